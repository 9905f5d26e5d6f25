import { expect } from 'chai';
import { inspect } from 'node:util';
import { DEFAULT_POOL_OPTIONS, InvalidOptionError, ConnectionPool, ConnectionPoolCore, Monitor, MongoCredentials, connect, connectionFactory, type CredentialsInit } from '../lib';
import { nodeTlsOptions, wantsTls } from '../lib/connection/tls-options';
import { resolveLogSettings } from '../lib/logging/log-settings';
import { CONNECTION_POOL_OPTION_NAMES } from '../lib/client/connection-pool';
import { checkPoolCoreOptions, closestOptionName, definedOnly, optionValue, optionValues, POOL_CORE_OPTION_NAMES, rejectUnknownOptions, requireMethodOptions, requireScheduler, resolvePoolOptions } from '../lib/options';
import { MockConnectionFactory } from '../lib/testing';
import { outcome, withPollutedPrototype } from './support/prototype-pollution';

/** The InvalidOptionError `fn` throws (fails the test when it throws something else, or nothing). */
function invalidOption(fn: () => unknown): InvalidOptionError {
  try {
    fn();
  } catch (error) {
    if (error instanceof InvalidOptionError) return error;
    throw new Error(`expected an InvalidOptionError, got ${String(error)}`);
  }
  throw new Error('expected an InvalidOptionError, nothing was thrown');
}

describe('resolvePoolOptions', function () {
  it('applies the CMAP defaults and records only what the user set', function () {
    const o = resolvePoolOptions({ maxPoolSize: 5, maxIdleTimeMS: undefined });
    expect(o).to.include({ ...DEFAULT_POOL_OPTIONS, maxPoolSize: 5 });
    expect(o.userSet).to.deep.equal({ maxPoolSize: 5 });
    expect(Object.isFrozen(o)).to.equal(true);
    expect(DEFAULT_POOL_OPTIONS).to.include({ maxPoolSize: 100, minPoolSize: 0, maxIdleTimeMS: 0, maxConnecting: 2, waitQueueTimeoutMS: 0 });
  });

  it('names the option, the value and what is allowed', function () {
    let error: InvalidOptionError | undefined;
    try {
      resolvePoolOptions({ maxConnecting: -3 });
    } catch (e) {
      error = e as InvalidOptionError;
    }
    expect(error).to.be.instanceOf(InvalidOptionError);
    expect(error).to.include({ option: 'maxConnecting', value: -3, allowed: 'an integer > 0' });
    expect(error!.message).to.equal('Invalid maxConnecting: -3 (maxConnecting must be an integer > 0)');
  });

  it('uses, and reports in userSet, the same value of each option: getters of a class and inherited values count, read once', function () {
    class Settings {
      get maxPoolSize(): number {
        return 3;
      }
    }
    const fromClass = resolvePoolOptions(new Settings());
    expect(fromClass).to.include({ maxPoolSize: 3 });
    expect(fromClass.userSet).to.deep.equal({ maxPoolSize: 3 });
    // A literal's __proto__ key sets the prototype: its values are read (and checked) like any other.
    expect(invalidOption(() => resolvePoolOptions({ __proto__: { maxPoolSize: 'x' } } as never))).to.include({ option: 'maxPoolSize', value: 'x' });
    let reads = 0;
    const flipping = Object.defineProperty({}, 'maxConnecting', { enumerable: true, get: () => (reads++ === 0 ? 1 : 'not checked') });
    const once = resolvePoolOptions(flipping);
    expect(once).to.include({ maxConnecting: 1 });
    expect(once.userSet).to.deep.equal({ maxConnecting: 1 });
    expect(reads).to.equal(1);
  });

  it('ConnectionPoolCreated reports the options the pool runs with, when they come from a class', function () {
    class Settings {
      readonly address = 'h:1';
      readonly connectionFactory = new MockConnectionFactory().factory;
      get maxPoolSize(): number {
        return 3;
      }
    }
    const pool = new ConnectionPoolCore(new Settings());
    let created: unknown;
    pool.events$.subscribe((e) => (created ??= e.type === 'ConnectionPoolCreated' ? e.options : undefined));
    expect(pool.options.maxPoolSize).to.equal(3);
    expect(created).to.deep.equal({ maxPoolSize: 3 });
    pool.close();
  });

  it('names an option whose getter throws, and quotes what it threw', function () {
    const unreachable = new Error('secret store unreachable');
    const options = Object.defineProperty({}, 'waitQueueTimeoutMS', {
      enumerable: true,
      get: () => {
        throw unreachable;
      },
    });
    const error = invalidOption(() => resolvePoolOptions(options));
    expect(error).to.include({ option: 'waitQueueTimeoutMS', allowed: 'a value that can be read', cause: unreachable });
    expect(error.message).to.equal('Invalid waitQueueTimeoutMS: reading it threw (secret store unreachable)');
    const bare = Object.create(null);
    const core = invalidOption(() => new ConnectionPoolCore({ address: 'h:1', connectionFactory: new MockConnectionFactory().factory, get maxPoolSize(): number { throw bare; } }));
    expect(core.message).to.equal('Invalid maxPoolSize: reading it threw ({})');
    expect(core.cause, 'what the getter threw').to.equal(bare);
  });

  it('allows a negative backgroundThreadIntervalMS (never run) but not 0', function () {
    expect(resolvePoolOptions({ backgroundThreadIntervalMS: -1 }).backgroundThreadIntervalMS).to.equal(-1);
    expect(() => resolvePoolOptions({ backgroundThreadIntervalMS: 0 })).to.throw(InvalidOptionError);
  });
});

describe('unknown options', function () {
  it('closestOptionName: a case-insensitive match first, then the nearest within a small edit distance, else none', function () {
    const known = ['maxPoolSize', 'minPoolSize', 'maxIdleTimeMS', 'maxConnecting', 'waitQueueTimeoutMS', 'tls', 'appName'];
    expect(closestOptionName('maxPoolsize', known)).to.equal('maxPoolSize');
    expect(closestOptionName('MAXPOOLSIZE', known)).to.equal('maxPoolSize');
    expect(closestOptionName('maxPoolSze', known)).to.equal('maxPoolSize');
    expect(closestOptionName('maxPoolSzie', known), 'an adjacent swap counts as one edit').to.equal('maxPoolSize');
    expect(closestOptionName('waitQueueTimeout', known)).to.equal('waitQueueTimeoutMS');
    expect(closestOptionName('maxConecting', known)).to.equal('maxConnecting');
    expect(closestOptionName('tsl', known)).to.equal('tls');
    expect(closestOptionName('appname', known)).to.equal('appName');
    expect(closestOptionName('poolSize', known), 'too far from every option').to.equal(undefined);
    expect(closestOptionName('x', known)).to.equal(undefined);
    expect(closestOptionName('completelyDifferent', known)).to.equal(undefined);
  });

  it('rejectUnknownOptions names the key and the closest option, or lists the options when none is close', function () {
    const known = ['maxPoolSize', 'minPoolSize'];
    const near = invalidOption(() => rejectUnknownOptions({ maxPoolSize: 1, maxPoolsize: 5 }, known, 'ConnectionPool'));
    expect(near).to.include({ option: 'maxPoolsize', value: 5, suggestion: 'maxPoolSize' });
    expect(near.message).to.equal('Unknown option maxPoolsize of ConnectionPool: did you mean maxPoolSize?');
    const far = invalidOption(() => rejectUnknownOptions({ size: 5 }, known, 'ConnectionPool', 'pool.'));
    expect(far).to.include({ option: 'pool.size', suggestion: undefined });
    expect(far.message).to.equal('Unknown option pool.size of ConnectionPool: the options are maxPoolSize, minPoolSize');
    // An unknown key may be a misspelt secret: a string value is never shown.
    const secret = invalidOption(() => rejectUnknownOptions({ pasword: 'Hunter2!' }, ['password'], 'credentials'));
    expect(secret.value).to.equal('<string not shown>');
    expect(secret.message + JSON.stringify(secret)).to.not.include('Hunter2!');
    expect(() => rejectUnknownOptions({ maxPoolSize: 1, minPoolSize: undefined }, known, 'ConnectionPool')).to.not.throw();
  });

  it('ConnectionPool rejects a misspelt key, with a suggestion, before anything is made', function () {
    const mock = new MockConnectionFactory();
    const error = invalidOption(() => new ConnectionPool({ address: 'h:1', connectionFactory: mock.factory, maxPoolsize: 5 } as never));
    expect(error).to.include({ option: 'maxPoolsize', suggestion: 'maxPoolSize' });
    expect(error.message).to.equal('Unknown option maxPoolsize of ConnectionPool: did you mean maxPoolSize?');
    // Nested options name their path; without a connectionFactory, the default factory's options are checked too.
    expect(invalidOption(() => new ConnectionPool({ address: 'h:1', connectionOptions: { tlsCAfile: '/ca.pem' } as never }))).to.include({
      option: 'connectionOptions.tlsCAfile',
      suggestion: 'tlsCAFile',
    });
    expect(invalidOption(() => new ConnectionPool({ address: 'h:1', logging: { componentSeverity: {} } as never }))).to.include({
      option: 'logging.componentSeverity',
      suggestion: 'componentSeverities',
    });
    expect(invalidOption(() => new ConnectionPool({ address: 'h:1', connectionFactory: mock.factory, bogus: 1 } as never)).message).to.match(
      /^Unknown option bogus of ConnectionPool: the options are maxPoolSize, .*connectionOptions, logging$/,
    );
  });

  it('connectionFactory rejects a misspelt connection option', function () {
    const error = invalidOption(() => connectionFactory({ host: 'h', port: 1, conectTimeoutMS: 5 } as never));
    expect(error).to.include({ option: 'conectTimeoutMS', suggestion: 'connectTimeoutMS' });
  });

  it('the option-name lists hold every option of their front end', function () {
    expect(POOL_CORE_OPTION_NAMES).to.include.members(['address', 'connectionFactory', 'scheduler', 'clearOnEstablishmentError', 'loadBalanced', 'backgroundThreadIntervalMS']);
    expect(CONNECTION_POOL_OPTION_NAMES).to.include.members([...POOL_CORE_OPTION_NAMES, 'connectionOptions', 'logging']);
  });
});

describe('options of the wrong type', function () {
  const factory = new MockConnectionFactory().factory;

  it('a boolean option takes a real boolean: loadBalanced "true" is refused, not taken as false', function () {
    const error = invalidOption(() => new ConnectionPool({ address: 'h:1', connectionFactory: factory, loadBalanced: 'true' } as never));
    expect(error.message).to.equal('Invalid loadBalanced: "true" (loadBalanced must be true or false (a boolean))');
    expect(invalidOption(() => new ConnectionPool({ address: 'h:1', connectionOptions: { tls: 'yes' } as never })).option).to.equal('tls');
    const lb = new ConnectionPool({ address: 'h:1', connectionFactory: factory, loadBalanced: true });
    lb.close();
  });

  // Each of these threw a TypeError (or was silently ignored) before: each is now an InvalidOptionError naming it.
  const cases: [string, Record<string, unknown>, string, RegExp][] = [
    ['logging: null', { logging: null }, 'logging', /logging must be an object/],
    ['logging: []', { logging: [] }, 'logging', /logging must be an object/],
    ['scheduler: {}', { scheduler: {} }, 'scheduler', /SchedulerLike/],
    ['scheduler: 5', { scheduler: 5 }, 'scheduler', /SchedulerLike/],
    ['connectionFactory: "tcp"', { connectionFactory: 'tcp' }, 'connectionFactory', /a function/],
    ['clearOnEstablishmentError: true', { clearOnEstablishmentError: true }, 'clearOnEstablishmentError', /a function/],
    ['connectionOptions: "tls"', { connectionOptions: 'tls' }, 'connectionOptions', /an object of connection options/],
    ['compressors: "zlib"', { connectionOptions: { compressors: 'zlib' } }, 'compressors', /an array of compressor names/],
    ['compressors: [1]', { connectionOptions: { compressors: [1] } }, 'compressors', /one of zlib, snappy, zstd, none/],
    ['credentials: null', { connectionOptions: { credentials: null } }, 'credentials', /MongoCredentials or a \{ username, password, source\?, mechanism\? \} object \(SCRAM, or mechanism 'PLAIN'\), or \{ mechanism: 'MONGODB-X509', username\? \}/],
    ['credentials: []', { connectionOptions: { credentials: [] } }, 'credentials', /MongoCredentials/],
    ['connectTimeoutMS: "100"', { connectionOptions: { connectTimeoutMS: '100' } }, 'connectTimeoutMS', /a number of ms from 0 to 2147483647/],
    ['zlibCompressionLevel: "5"', { connectionOptions: { zlibCompressionLevel: '5' } }, 'zlibCompressionLevel', /from -1 to 9/],
    ['appName: 5', { connectionOptions: { appName: 5 } }, 'appName', /a string/],
    ['tlsCAFile: ""', { connectionOptions: { tlsCAFile: '' } }, 'tlsCAFile', /a non-empty string/],
    ['componentSeverities: null', { logging: { componentSeverities: null } }, 'logging.componentSeverities', /an object of levels/],
  ];
  for (const [name, given, option, allowed] of cases) {
    it(`ConnectionPool: ${name} is an InvalidOptionError naming ${option}`, function () {
      const error = invalidOption(() => new ConnectionPool({ address: 'h:1', ...given } as never));
      expect(error.option).to.equal(option);
      expect(error.message).to.match(allowed);
    });
  }

  it('never shows a password: credentials and tlsCertificateKeyFilePassword values are redacted', function () {
    const credentials = { username: 'alice', password: 'Pw-s3cret', mechanism: 'GSSAPI' };
    const mechanism = invalidOption(() => new ConnectionPool({ address: 'h:1', connectionOptions: { credentials } as never }));
    expect(mechanism.option).to.equal('authMechanism');
    const misspelt = invalidOption(() => new ConnectionPool({ address: 'h:1', connectionOptions: { credentials: { ...credentials, mechanism: undefined, pasword: 'Pw-s3cret' } } as never }));
    expect(misspelt).to.include({ option: 'connectionOptions.credentials.pasword', suggestion: 'password' });
    const keyPassword = invalidOption(() => new ConnectionPool({ address: 'h:1', connectionOptions: { tlsCertificateKeyFilePassword: ['Pw-s3cret'] } as never }));
    expect(keyPassword).to.include({ option: 'tlsCertificateKeyFilePassword', value: '<not shown>' });
    const wholeObject = new InvalidOptionError('connectionOptions', { appName: 'a', credentials: { username: 'u', password: 'Pw-s3cret' } }, 'an object');
    expect(wholeObject.message).to.equal('Invalid connectionOptions: {"appName":"a","credentials":"<not shown>"} (connectionOptions must be an object)');
    for (const error of [mechanism, misspelt, keyPassword, wholeObject]) {
      expect(`${error.message} ${JSON.stringify(error)} ${String(error.value)}`).to.not.include('Pw-s3cret');
    }
  });

  it('shows any value in a few words: functions by name, bigints, symbols, cycles, long values cut', function () {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(new InvalidOptionError('o', function named() {}, 'x').message).to.equal('Invalid o: [function named] (o must be x)');
    expect(new InvalidOptionError('o', 5n, 'x').message).to.equal('Invalid o: 5n (o must be x)');
    expect(new InvalidOptionError('o', Symbol('s'), 'x').message).to.equal('Invalid o: Symbol(s) (o must be x)');
    expect(new InvalidOptionError('o', cyclic, 'x').message).to.equal('Invalid o: [object Object] (o must be x)');
    expect(new InvalidOptionError('o', 'y'.repeat(500), 'x').message).to.have.length.below(260);
  });

  it('checkPoolCoreOptions: the check the core constructor can run (unknown keys, function and scheduler types)', function () {
    expect(invalidOption(() => checkPoolCoreOptions({ address: 'h', connectionFactory: factory, maxPoolsize: 1 }))).to.include({
      option: 'maxPoolsize',
      suggestion: 'maxPoolSize',
    });
    expect(invalidOption(() => checkPoolCoreOptions({ address: 'h', connectionOptions: {} }))).to.include({ option: 'connectionOptions' });
    expect(() => checkPoolCoreOptions({ address: 'h', connectionOptions: {} }, 'ConnectionPool', ['connectionOptions'])).to.not.throw();
    expect(invalidOption(() => checkPoolCoreOptions(null)).option).to.equal('options');
    expect(invalidOption(() => checkPoolCoreOptions([])).option).to.equal('options');
    expect(invalidOption(() => checkPoolCoreOptions({ address: 'h', loadBalanced: 1 })).option).to.equal('loadBalanced');
  });
});

describe('no credential in an option error', function () {
  it('a connection string given where another value belongs, in any shape, never shows its password', function () {
    const uri = 'mongodb://alice:S3CRET@127.0.0.1:1/';
    const unescaped = 'mongodb://alice:S3cretPw/x@[::1]:1/db';
    const cycle: Record<string, unknown> = { db: { password: 'S3CRET' } };
    cycle.parent = cycle;
    const cases: Record<string, unknown>[] = [
      { address: 'db:1', connectionOptions: uri },
      { address: uri },
      { address: unescaped },
      { address: 'db:1', connectionOptions: { compressors: [uri] } },
      { address: 'db:1', connectionOptions: { appName: cycle } },
      { address: 'db:1', connectionOptions: { appName: { n: 1n, password: 'S3CRET' } } },
      { address: 'db:1', logging: uri },
      { address: 'db:1', scheduler: { uri } },
    ];
    for (const options of cases) {
      let error: unknown;
      try {
        new ConnectionPool(options as never);
      } catch (e) {
        error = e;
      }
      expect(error, JSON.stringify(Object.keys(options))).to.be.instanceOf(InvalidOptionError);
      const shown = `${(error as Error).message}\n${inspect(error, { depth: 10 })}`;
      expect(shown).to.not.include('S3CRET').and.not.include('S3cretPw');
    }
  });
});

describe('connection options wherever they are given', function () {
  it('a Monitor checks its connectionOptions even with its own factory, naming them as its own', function () {
    const factory = new MockConnectionFactory().factory as never;
    expect(() => new Monitor({ address: 'db:1', connectionFactory: factory, connectionOptions: { connectTimeoutMS: 'abc' as never } })).to.throw(
      InvalidOptionError,
      /Invalid connectTimeoutMS: "abc"/,
    );
    expect(() => new Monitor({ address: 'db:1', connectionOptions: { tlsCAfile: 'ca.pem' } as never })).to.throw(
      InvalidOptionError,
      'Unknown option connectionOptions.tlsCAfile of Monitor: did you mean tlsCAFile?',
    );
  });

  it('a Monitor with its own factory refuses each connection option of the wrong type, naming it, its value and what is allowed', function () {
    const factory = new MockConnectionFactory().factory as never;
    const cases: [Record<string, unknown>, string][] = [
      [{ appName: 5 }, 'Invalid appName: 5 (appName must be a string)'],
      [{ driverInfo: 5 }, 'Invalid driverInfo: 5 (driverInfo must be a { name, version?, platform? } object of strings)'],
      [{ socketTimeoutMS: -1 }, 'Invalid socketTimeoutMS: -1 (socketTimeoutMS must be a number of ms from 0 to 2147483647 (0 means no limit))'],
      [{ compressors: 'zlib' }, 'Invalid compressors: "zlib" (compressors must be an array of compressor names (zlib, snappy, zstd, none))'],
      [{ proxyPort: 1080 }, 'Invalid proxyPort: 1080 (proxyPort must be given only with proxyHost (the SOCKS5 proxy it applies to))'],
      [
        { credentials: { username: 'u', password: 'p', bogus: 1 } },
        'Unknown option connectionOptions.credentials.bogus of credentials: the options are username, password, source, mechanism, mechanismProperties',
      ],
      [
        { credentials: Object.assign(Object.create(null) as object, { username: 'u', password: 'p', bogus: 1 }) },
        'Unknown option connectionOptions.credentials.bogus of credentials: the options are username, password, source, mechanism, mechanismProperties',
      ],
    ];
    for (const level of [10, -2, 1.5, '5']) {
      cases.push([{ zlibCompressionLevel: level }, `Invalid zlibCompressionLevel: ${JSON.stringify(level)} (zlibCompressionLevel must be an integer from -1 to 9)`]);
    }
    for (const [connectionOptions, message] of cases) {
      expect(invalidOption(() => new Monitor({ address: 'db:1', connectionFactory: factory, connectionOptions: connectionOptions as never })).message).to.equal(message);
    }
    for (const level of [-1, 0, 9]) {
      new Monitor({ address: 'db:1', connectionFactory: factory, connectionOptions: { zlibCompressionLevel: level } }).close();
    }
  });

  it('connectionFactory names its options when they are not an object', function () {
    expect(invalidOption(() => connectionFactory(5 as never)).message).to.equal('Invalid options: 5 (options must be an object of connection options)');
  });

  it('connect() checks the proxy options together once merged with the URI\'s: a proxyPort without proxyHost in either is refused', async function () {
    expect(invalidOption(() => connect('mongodb://db:1/', { proxyPort: 1080 }))).to.include({ option: 'proxyPort', value: 1080 });
    const client = connect('mongodb://db:1/?proxyHost=proxy.example', { proxyPort: 1080 });
    await client.close();
  });

  it('connectTimeoutMS and socketTimeoutMS beyond what one Node timer holds (2^31 - 1 ms) are refused, not cut to 1 ms', function () {
    const allowed = 'must be a number of ms from 0 to 2147483647 (0 means no limit)';
    for (const option of ['connectTimeoutMS', 'socketTimeoutMS'] as const) {
      expect(() => new ConnectionPool({ address: 'db:1', connectionOptions: { [option]: 2 ** 31 } })).to.throw(
        InvalidOptionError,
        `Invalid ${option}: 2147483648 (${option} ${allowed})`,
      );
      expect(() => connectionFactory({ host: 'db', [option]: 3e9 })).to.throw(InvalidOptionError, `Invalid ${option}: 3000000000 (${option} ${allowed})`);
      expect(() => new ConnectionPool({ address: 'db:1', connectionOptions: { [option]: 2 ** 31 - 1 } })).to.not.throw();
    }
  });

  it('a ConnectionPool takes loadBalanced only as its own option, where it also sets the handshake', function () {
    expect(() => new ConnectionPool({ address: 'db:1', connectionOptions: { loadBalanced: true } })).to.throw(
      InvalidOptionError,
      /Invalid connectionOptions.loadBalanced: true \(connectionOptions.loadBalanced must be absent/,
    );
  });

  it('credentials may be a MongoCredentials of another copy of the library (read through its properties)', function () {
    class ForeignCredentials {
      readonly #secret = 'S3CRET';
      readonly saltedPasswords = new Map<string, unknown>(); // its own state, as a MongoCredentials keeps
      readonly username = 'alice';
      readonly source = 'admin';
      readonly mechanism = undefined;
      get password(): string {
        return this.#secret;
      }
    }
    const pool = new ConnectionPool({ address: 'db:1', connectionOptions: { credentials: new ForeignCredentials() as never } });
    pool.close();
  });
});

describe('optionValue: values found only on Object.prototype are absent (prototype pollution)', function () {
  it('takes own values, getters of a class and values of the caller\'s own prototype, and ignores Object.prototype\'s', function () {
    class Settings {
      get maxPoolSize(): number {
        return 3;
      }
    }
    const read = withPollutedPrototype({ maxPoolSize: 1, minPoolSize: 1 }, () => ({
      own: optionValue({ maxPoolSize: 5 }, 'maxPoolSize'),
      absent: optionValue({} as { maxPoolSize?: number }, 'maxPoolSize'),
      getter: optionValue(new Settings(), 'maxPoolSize'),
      inherited: optionValue(Object.create({ maxPoolSize: 7 }) as { maxPoolSize?: number }, 'maxPoolSize'),
      noPrototype: optionValue(Object.create(null) as { maxPoolSize?: number }, 'maxPoolSize'),
      copy: { ...optionValues({ maxConnecting: 4 } as { maxConnecting?: number; minPoolSize?: number }, ['maxConnecting', 'minPoolSize']) },
      fromClass: resolvePoolOptions(new Settings()),
      fromPrototype: resolvePoolOptions(Object.create({ maxPoolSize: 7 }) as object),
    }));
    expect(read).to.deep.include({ own: 5, absent: undefined, getter: 3, inherited: 7, noPrototype: undefined, copy: { maxConnecting: 4 } });
    expect(read.fromClass).to.include({ maxPoolSize: 3, minPoolSize: 0 });
    expect(read.fromClass.userSet).to.deep.equal({ maxPoolSize: 3 });
    expect(read.fromPrototype).to.include({ maxPoolSize: 7, minPoolSize: 0 });
    expect(read.fromPrototype.userSet).to.deep.equal({ maxPoolSize: 7 });
  });

  it('a polluted Object.prototype changes no pool option, TLS setting, credential, logging option or checkout option', function () {
    const written: unknown[] = [];
    const sink = { write: (message: unknown) => void written.push(message) };
    const seen = withPollutedPrototype(
      {
        maxPoolSize: 1,
        waitQueueTimeoutMS: 5,
        loadBalanced: true,
        logging: { componentSeverities: { default: 'debug' }, path: sink },
        componentSeverities: { default: 'debug' },
        path: sink,
        tls: true,
        tlsAllowInvalidCertificates: true,
        tlsAllowInvalidHostnames: true,
        password: 'from-the-prototype',
        priority: 'urgent',
        interruptInUseConnections: 'yes',
      },
      () => {
        const pool = new ConnectionPool({ address: 'h:1', connectionFactory: new MockConnectionFactory().factory });
        const checkOut = outcome(() => pool.checkOut({}));
        const clear = outcome(() => pool.clear({}));
        const result = {
          options: pool.options,
          checkOut: checkOut instanceof Error ? checkOut : 'no error',
          clear: clear instanceof Error ? clear : 'no error',
          logging: resolveLogSettings({}, {}),
          wantsTls: wantsTls({}),
          tlsOptions: nodeTlsOptions({ tls: true }, 'db.example'),
          credentials: outcome(() => new MongoCredentials({ username: 'u' } as CredentialsInit)),
        };
        pool.close();
        return result;
      },
    );
    expect(seen.options).to.include({ maxPoolSize: 100, waitQueueTimeoutMS: 0 });
    expect(seen.options.userSet).to.deep.equal({});
    expect(seen.checkOut).to.equal('no error');
    expect(seen.clear).to.equal('no error');
    expect(written, 'log messages written to a sink from Object.prototype').to.deep.equal([]);
    expect(seen.logging.severities).to.deep.equal({ client: 'off', command: 'off', connection: 'off', serverSelection: 'off', topology: 'off' });
    expect(seen.logging.path).to.equal('stderr');
    expect(seen.wantsTls).to.equal(false);
    expect(seen.tlsOptions).to.include({ rejectUnauthorized: true, servername: 'db.example' });
    expect(seen.tlsOptions).not.to.have.own.property('checkServerIdentity');
    expect(seen.credentials).to.be.instanceOf(InvalidOptionError).and.include({ option: 'password' });
  });
});

describe('each pool option refused names itself, its value and what is allowed', function () {
  const ms = 'a number of ms >= 0 (0 means no limit)';
  const cases: [Record<string, unknown>, string][] = [
    [{ minPoolSize: -1 }, 'Invalid minPoolSize: -1 (minPoolSize must be an integer >= 0)'],
    [{ maxIdleTimeMS: -1 }, `Invalid maxIdleTimeMS: -1 (maxIdleTimeMS must be ${ms})`],
    [{ waitQueueTimeoutMS: -1 }, `Invalid waitQueueTimeoutMS: -1 (waitQueueTimeoutMS must be ${ms})`],
    [{ leakDetectionThresholdMS: -1 }, 'Invalid leakDetectionThresholdMS: -1 (leakDetectionThresholdMS must be a number of ms >= 0 (0 turns leak detection off))'],
    [{ maxWaitQueueSize: -1 }, 'Invalid maxWaitQueueSize: -1 (maxWaitQueueSize must be an integer >= 0 (0 means unbounded))'],
    [{ maxLifeTimeMS: -1 }, `Invalid maxLifeTimeMS: -1 (maxLifeTimeMS must be ${ms})`],
    [{ maxLifeTimeJitterMS: -1 }, 'Invalid maxLifeTimeJitterMS: -1 (maxLifeTimeJitterMS must be a number of ms >= 0)'],
    [{ maxLifeTimeMS: 100, maxLifeTimeJitterMS: 101 }, 'Invalid maxLifeTimeJitterMS: 101 (maxLifeTimeJitterMS must be <= maxLifeTimeMS (100))'],
    [{ minPoolSize: 6, maxPoolSize: 5 }, 'Invalid minPoolSize: 6 (minPoolSize must be <= maxPoolSize (5) when maxPoolSize is not 0)'],
  ];
  for (const interval of ['abc', NaN, Infinity, 0]) {
    const shown = typeof interval === 'string' ? `"${interval}"` : String(interval);
    const allowed = 'a positive number of ms, or a negative number to never run (0 is not allowed)';
    cases.push([{ backgroundThreadIntervalMS: interval }, `Invalid backgroundThreadIntervalMS: ${shown} (backgroundThreadIntervalMS must be ${allowed})`]);
  }
  for (const [options, message] of cases) {
    it(`${JSON.stringify(options, (_k, v: unknown) => (typeof v === 'number' && !Number.isFinite(v) ? String(v) : v))}`, function () {
      expect(invalidOption(() => resolvePoolOptions(options)).message).to.equal(message);
    });
  }

  it('takes the limits themselves: minPoolSize = maxPoolSize, a jitter = maxLifeTimeMS, any jitter without a lifetime', function () {
    expect(resolvePoolOptions({ minPoolSize: 5, maxPoolSize: 5 })).to.include({ minPoolSize: 5, maxPoolSize: 5 });
    expect(resolvePoolOptions({ maxLifeTimeMS: 100, maxLifeTimeJitterMS: 100 })).to.include({ maxLifeTimeJitterMS: 100 });
    expect(resolvePoolOptions({ maxLifeTimeMS: 0, maxLifeTimeJitterMS: 5 })).to.include({ maxLifeTimeJitterMS: 5 });
  });

  it('maxLifeTimeJitterMS defaults to 2.5% of maxLifeTimeMS; one given is kept, and not reported unless given', function () {
    const derived = resolvePoolOptions({ maxLifeTimeMS: 60_000 });
    expect(derived).to.include({ maxLifeTimeMS: 60_000, maxLifeTimeJitterMS: 1500 });
    expect(derived.userSet).to.deep.equal({ maxLifeTimeMS: 60_000 });
    expect(resolvePoolOptions({ maxLifeTimeMS: 60_000, maxLifeTimeJitterMS: 10 })).to.include({ maxLifeTimeJitterMS: 10 });
    expect(resolvePoolOptions({ maxLifeTimeMS: 60_000, maxLifeTimeJitterMS: 0 })).to.include({ maxLifeTimeJitterMS: 0 });
  });

  it('reads options through a Proxy whose get trap computes them (no own property behind them)', function () {
    const computed = new Proxy({}, { get: (_target, key) => (key === 'maxPoolSize' ? 7 : undefined) });
    expect(resolvePoolOptions(computed)).to.include({ maxPoolSize: 7 });
  });

  it('definedOnly drops the undefined values, so spreading it never overrides a default with undefined', function () {
    expect(definedOnly({ a: 1, b: undefined, c: null })).to.deep.equal({ a: 1, c: null });
  });
});

describe('method options and schedulers of the wrong shape', function () {
  it('requireMethodOptions names "<method> options", the value and the options it takes', function () {
    for (const [value, shown] of [[5, '5'], [null, 'null'], [[], '[]'], ['x', '"x"']] as const) {
      expect(invalidOption(() => requireMethodOptions('checkOut', value, ['timeoutMS', 'signal'])).message).to.equal(
        `Invalid checkOut options: ${shown} (checkOut options must be an object { timeoutMS?, signal? }, or nothing)`,
      );
    }
    expect(() => requireMethodOptions('checkOut', { timeoutMS: 5 }, ['timeoutMS', 'signal'])).to.not.throw();
    expect(invalidOption(() => requireMethodOptions('checkOut', { timeoutMs: 5 }, ['timeoutMS', 'signal']))).to.include({ option: 'timeoutMs', suggestion: 'timeoutMS' });
  });

  it('requireScheduler takes an object with now() and schedule(), nothing else', function () {
    const allowed = 'scheduler must be an RxJS SchedulerLike (an object with now() and schedule() functions)';
    expect(invalidOption(() => requireScheduler('scheduler', null)).message).to.equal(`Invalid scheduler: null (${allowed})`);
    expect(invalidOption(() => requireScheduler('scheduler', { schedule() {} })).option).to.equal('scheduler');
    expect(invalidOption(() => requireScheduler('scheduler', { now: () => 0 })).option).to.equal('scheduler');
    expect(invalidOption(() => requireScheduler('scheduler', Object.assign(() => 0, { now: () => 0, schedule: () => 0 }))).option).to.equal('scheduler');
    expect(() => requireScheduler('scheduler', { now: () => 0, schedule: () => 0 })).to.not.throw();
  });

  it('checkPoolCoreOptions names a connectionFactory that is not a function, and the shape it must have', function () {
    expect(invalidOption(() => checkPoolCoreOptions({ address: 'h', connectionFactory: 'tcp' })).message).to.equal(
      'Invalid connectionFactory: "tcp" (connectionFactory must be a function (descriptor) => ObservableInput<connection>)',
    );
  });
});

describe('closestOptionName: the edit distance and its limits', function () {
  it('up to 4 characters, 1 edit; up to 8, 2; beyond, 3', function () {
    expect(closestOptionName('pxrx', ['port']), 'two edits on a 4-character name').to.equal(undefined);
    expect(closestOptionName('pxrt', ['port'])).to.equal('port');
    expect(closestOptionName('pxrtz', ['portz']), 'one edit on a 5-character name').to.equal('portz');
    expect(closestOptionName('pxrxz', ['portz']), 'two edits on a 5-character name').to.equal('portz');
    expect(closestOptionName('tlxz', ['tls']), 'a substitution and a deletion, the last character included').to.equal(undefined);
  });

  it('an adjacent swap counts as one edit, only for the two characters swapped', function () {
    expect(closestOptionName('pls', ['tls'])).to.equal('tls');
    expect(closestOptionName('lt', ['tls'])).to.equal(undefined);
    expect(closestOptionName('appnea', ['appName'])).to.equal(undefined);
    expect(closestOptionName('appanep', ['appName'])).to.equal(undefined);
    expect(closestOptionName('tlsiencre', ['tlsInsecure'])).to.equal(undefined);
  });
});
