import { expect } from 'chai';
import { inspect } from 'node:util';
import { InvalidOptionError, MongoCredentials, connectionFactory } from '../../lib';
import { outcome } from '../support/prototype-pollution';
import { MECHANISM_PROPERTIES, checkMechanismProperties } from '../../lib/auth/credentials';

describe('MongoCredentials', function () {
  it('keeps the password out of JSON, inspection and enumerable properties', function () {
    const creds = new MongoCredentials({ username: 'u', password: 'hunter2', mechanism: 'SCRAM-SHA-256' });
    expect(creds.password).to.equal('hunter2');
    expect(JSON.stringify(creds)).to.not.include('hunter2');
    expect(inspect(creds, { depth: 5, showHidden: true })).to.not.include('hunter2');
    expect(Object.values(creds).map(String).join()).to.not.include('hunter2');
    expect(creds.toJSON()).to.deep.equal({ username: 'u', source: 'admin', mechanism: 'SCRAM-SHA-256' });
  });

  it('keeps the salted passwords it caches out of its fields: inspection without its own form, and structuredClone', async function () {
    // The salted password authenticates as well as the password does (it derives the client key).
    const creds = new MongoCredentials({ username: 'u', password: 'hunter2' });
    const salted = Buffer.from('a1b2c3d4e5f60718293a4b5c6d7e8f9012345678', 'hex');
    await creds.saltedPassword('SCRAM-SHA-1:salt:10000', () => Promise.resolve(salted));
    const shown = inspect(creds, { customInspect: false, showHidden: true, depth: Infinity });
    expect(shown).to.not.include(String(salted[0])).and.not.include('Map');
    expect(structuredClone(creds)).to.deep.equal({ username: 'u', source: 'admin', mechanism: undefined });
    expect(await creds.saltedPassword('SCRAM-SHA-1:salt:10000', () => Promise.reject(new Error('derived again')))).to.equal(salted);
  });

  it('refuses at construction a password SASLprep refuses when the mechanism is SCRAM-SHA-256, without showing it; SCRAM-SHA-1 and a negotiated mechanism take it', function () {
    for (const [password, rule] of [['se\u0007cret', /Prohibited character/], ['se\u0627cret', /RandALCat/]] as const) {
      const error = (() => {
        try {
          return new MongoCredentials({ username: 'u', password, mechanism: 'SCRAM-SHA-256' });
        } catch (e) {
          return e;
        }
      })();
      expect(error).to.be.instanceOf(InvalidOptionError);
      expect((error as InvalidOptionError).option).to.equal('password');
      expect((error as Error).message).to.match(/^Invalid password for SCRAM-SHA-256: SASLprep \(RFC 4013\) refuses it: /);
      expect((error as Error).message).to.match(rule);
      expect(inspect(error, { depth: 5, showHidden: true })).to.not.include('cret');
      // SCRAM-SHA-1 never SASLpreps a password; a negotiated mechanism may turn out to be SCRAM-SHA-1.
      expect(new MongoCredentials({ username: 'u', password, mechanism: 'SCRAM-SHA-1' }).password).to.equal(password);
      expect(new MongoCredentials({ username: 'u', password }).password).to.equal(password);
    }
    expect(() => connectionFactory({ host: 'h', credentials: { username: 'u', password: 'bell\u0007', mechanism: 'SCRAM-SHA-256' } })).to.throw(InvalidOptionError, /password/);
  });

  it('rejects an empty username, an unknown mechanism and an empty source', function () {
    expect(() => new MongoCredentials({ username: '', password: 'p' })).to.throw(InvalidOptionError, /username/);
    expect(() => new MongoCredentials({ username: 'u', password: 'p', mechanism: 'GSSAPI' as never })).to.throw(InvalidOptionError, /authMechanism/);
    expect(() => new MongoCredentials({ username: 'u', password: 'p', source: '' })).to.throw(InvalidOptionError, /authSource/);
  });

  it('refuses init that is not an object, and a misspelt key of a plain object, naming it without its value', function () {
    for (const init of [null, undefined, 'u:p', ['u', 'p']]) {
      expect(() => new MongoCredentials(init as never), String(init)).to.throw(InvalidOptionError).with.property('option', 'credentials');
    }
    // Without the check, `sorce` was dropped and the user was looked up in admin.
    expect(() => new MongoCredentials({ username: 'u', password: 'p', sorce: 'db' } as never))
      .to.throw(InvalidOptionError, /credentials\.sorce.*did you mean source\?/)
      .with.property('option', 'credentials.sorce');
    const misspelt = outcome(() => new MongoCredentials({ username: 'u', pasword: 'hunter2' } as never)) as InvalidOptionError;
    expect(misspelt).to.be.instanceOf(InvalidOptionError);
    expect(`${(misspelt as Error).message} ${inspect(misspelt, { depth: 5 })}`).to.not.include('hunter2');
  });

  it('names the option, the value (never a password) and what is allowed, for each invalid credential', function () {
    const cases: [unknown, string, string][] = [
      [null, 'credentials', "Invalid credentials: null (credentials must be a { username, password, source?, mechanism? } object (SCRAM, or mechanism 'PLAIN'), or { mechanism: 'MONGODB-X509', username? })"],
      [{ username: '', password: 'p' }, 'username', 'Invalid username: "" (username must be a non-empty string)'],
      [{ username: 'u', password: 1234 }, 'password', 'Invalid password: "<not shown>" (password must be a string)'],
      [{ username: 'u', password: 'p', source: '' }, 'authSource', 'Invalid authSource: "" (authSource must be a non-empty database name)'],
      [{ username: 'u', password: 'p', source: 5 }, 'authSource', 'Invalid authSource: 5 (authSource must be a non-empty database name)'],
      [{ username: 'u', password: 'p', mechanism: 'GSSAPI' }, 'authMechanism', 'Invalid authMechanism: "GSSAPI" (authMechanism must be one of SCRAM-SHA-256, SCRAM-SHA-1, MONGODB-X509, PLAIN, MONGODB-AWS, MONGODB-OIDC)'],
      // An object without a prototype is a plain object too: its keys are checked.
      [Object.assign(Object.create(null) as object, { username: 'u', password: 'p', sorce: 'db' }), 'credentials.sorce', 'Unknown option credentials.sorce of credentials: did you mean source?'],
    ];
    for (const [init, option, message] of cases) {
      const error = outcome(() => new MongoCredentials(init as never)) as InvalidOptionError;
      expect(error, message).to.be.instanceOf(InvalidOptionError);
      expect((error as InvalidOptionError).option).to.equal(option);
      expect((error as Error).message).to.equal(message);
      expect(inspect(error, { depth: 5 })).to.not.include('1234');
    }
    const refused = outcome(() => new MongoCredentials({ username: 'u', password: 'bell\u0007', mechanism: 'SCRAM-SHA-256' })) as InvalidOptionError;
    expect(refused).to.include({ option: 'password', value: '<not shown>', allowed: 'a password SASLprep accepts, for SCRAM-SHA-256' });
  });

  it('takes MONGODB-X509 with or without a user name, in $external, and refuses a password (never shown) or another source', function () {
    const anonymous = new MongoCredentials({ mechanism: 'MONGODB-X509' });
    expect(anonymous).to.include({ username: undefined, source: '$external', mechanism: 'MONGODB-X509', password: undefined });
    expect(inspect(anonymous)).to.equal("MongoCredentials { source: '$external', mechanism: 'MONGODB-X509' }");
    expect(new MongoCredentials({ mechanism: 'MONGODB-X509', username: 'CN=client', source: '$external' }).toJSON()).to.deep.equal({ username: 'CN=client', source: '$external', mechanism: 'MONGODB-X509' });
    const cases: [unknown, string, string][] = [
      [{ mechanism: 'MONGODB-X509', password: 'hunter2' }, 'password', 'Invalid password: "<not shown>" (password must be none for MONGODB-X509: the client certificate is the credential)'],
      [{ mechanism: 'MONGODB-X509', username: 'CN=client', password: '' }, 'password', 'Invalid password: "<not shown>" (password must be none for MONGODB-X509: the client certificate is the credential)'],
      [{ mechanism: 'MONGODB-X509', username: '' }, 'username', 'Invalid username: "" (username must be a non-empty string (the client certificate\'s subject, RFC 2253), or none)'],
      [{ mechanism: 'MONGODB-X509', username: 7 }, 'username', 'Invalid username: 7 (username must be a non-empty string (the client certificate\'s subject, RFC 2253), or none)'],
      [{ mechanism: 'MONGODB-X509', source: 'admin' }, 'authSource', 'Invalid authSource: "admin" (authSource must be $external for MONGODB-X509)'],
      // Without MONGODB-X509, a user name and a password stay required.
      [{ password: 'p' }, 'username', 'Invalid username: undefined (username must be a non-empty string)'],
      [{ username: 'u', mechanism: 'SCRAM-SHA-1' }, 'password', 'Invalid password: "<not shown>" (password must be a string)'],
    ];
    for (const [init, option, message] of cases) {
      const error = outcome(() => new MongoCredentials(init as never)) as InvalidOptionError;
      expect(error, message).to.be.instanceOf(InvalidOptionError);
      expect(error.option).to.equal(option);
      expect(error.message).to.equal(message);
      expect(inspect(error, { depth: 5 })).to.not.include('hunter2');
    }
  });

  it('shows its JSON form when inspected', function () {
    expect(inspect(new MongoCredentials({ username: 'u', password: 'p', mechanism: 'SCRAM-SHA-1' }))).to.equal("MongoCredentials { username: 'u', source: 'admin', mechanism: 'SCRAM-SHA-1' }");
    expect(inspect(new MongoCredentials({ username: 'app', password: 'p', source: 'appdb' }))).to.equal("MongoCredentials { username: 'app', source: 'appdb' }");
  });

  it('caches salted passwords per mechanism, salt and iteration count', async function () {
    const creds = new MongoCredentials({ username: 'u', password: 'p' });
    let derived = 0;
    const derive = async () => {
      derived++;
      return Buffer.from('x');
    };
    await creds.saltedPassword('SCRAM-SHA-256:salt:4096', derive);
    await creds.saltedPassword('SCRAM-SHA-256:salt:4096', derive);
    await creds.saltedPassword('SCRAM-SHA-1:salt:4096', derive);
    expect(derived).to.equal(2);
  });

  it('shares one derivation in progress between concurrent callers of the same key', async function () {
    const creds = new MongoCredentials({ username: 'u', password: 'p' });
    let derived = 0;
    let finish!: (salted: Buffer) => void;
    const derive = () => {
      derived++;
      return new Promise<Buffer>((resolve) => (finish = resolve));
    };
    const first = creds.saltedPassword('SCRAM-SHA-256:salt:15000', derive);
    const second = creds.saltedPassword('SCRAM-SHA-256:salt:15000', derive);
    expect(derived).to.equal(1);
    finish(Buffer.from('salted'));
    const [a, b] = await Promise.all([first, second]);
    expect(a.toString()).to.equal('salted');
    expect(b).to.equal(a);
    expect(derived).to.equal(1);
  });

  it('does not keep a failed derivation: every waiter gets the error, the next caller derives again', async function () {
    const creds = new MongoCredentials({ username: 'u', password: 'p' });
    let derived = 0;
    const failing = async (): Promise<Buffer> => {
      derived++;
      throw new Error('derivation failed');
    };
    const waiters = [creds.saltedPassword('k', failing), creds.saltedPassword('k', failing)];
    for (const waiter of waiters) expect(await waiter.catch((e: Error) => e.message)).to.equal('derivation failed');
    expect(derived).to.equal(1);
    expect((await creds.saltedPassword('k', async () => Buffer.from('ok'))).toString()).to.equal('ok');
    // A derivation that throws synchronously is refused the same way, as a rejection.
    const thrown = await creds
      .saltedPassword('sync', () => {
        throw new Error('bad parameters');
      })
      .catch((e: Error) => e.message);
    expect(thrown).to.equal('bad parameters');
    expect((await creds.saltedPassword('sync', async () => Buffer.from('ok'))).toString()).to.equal('ok');
  });

  it('keeps at most 16 salted passwords, dropping the oldest', async function () {
    const creds = new MongoCredentials({ username: 'u', password: 'p' });
    let derived = 0;
    const derive = async () => Buffer.from(String(++derived));
    for (let salt = 0; salt < 17; salt++) await creds.saltedPassword(`SCRAM-SHA-256:${salt}:4096`, derive);
    expect(derived).to.equal(17);
    await creds.saltedPassword('SCRAM-SHA-256:16:4096', derive); // the newest is still there
    await creds.saltedPassword('SCRAM-SHA-256:1:4096', derive); // and every other of the last 16
    expect(derived).to.equal(17);
    await creds.saltedPassword('SCRAM-SHA-256:0:4096', derive); // the oldest was dropped
    expect(derived).to.equal(18);
  });

  it('a derivation that fails after its entry was replaced leaves the newer entry cached', async function () {
    const creds = new MongoCredentials({ username: 'u', password: 'p' });
    let failFirst!: (e: Error) => void;
    const first = creds.saltedPassword('k', () => new Promise<Buffer>((_, reject) => (failFirst = reject)));
    // 16 other keys push 'k' out; 'k' is derived anew, and that derivation succeeds.
    for (let salt = 0; salt < 16; salt++) await creds.saltedPassword(`other:${salt}`, async () => Buffer.from('x'));
    let derived = 0;
    const derive = async (): Promise<Buffer> => Buffer.from(String(++derived));
    await creds.saltedPassword('k', derive);
    failFirst(new Error('derivation failed'));
    await first.catch(() => undefined);
    await creds.saltedPassword('k', derive);
    expect(derived, 'the newer entry was kept').to.equal(1);
  });
});

describe('MongoCredentials mechanismProperties', function () {
  const refusal = (f: () => unknown): InvalidOptionError => {
    try {
      f();
    } catch (error) {
      expect(error).to.be.instanceOf(InvalidOptionError);
      return error as InvalidOptionError;
    }
    throw new Error('not refused');
  };

  it('are none for SCRAM, MONGODB-X509 and PLAIN: any key is refused by its path, naming what is allowed, its value not shown', function () {
    for (const mechanism of [undefined, 'SCRAM-SHA-1', 'SCRAM-SHA-256', 'PLAIN', 'MONGODB-X509'] as const) {
      const init = mechanism === 'MONGODB-X509' ? { mechanism } : { username: 'u', password: 'p', ...(mechanism ? { mechanism } : {}) };
      const error = refusal(() => new MongoCredentials({ ...init, mechanismProperties: { SERVICE_NAME: 'hunter2' } }));
      expect(error.option).to.equal('authMechanismProperties.SERVICE_NAME');
      expect(error.value).to.equal('<not shown>');
      expect(error.message).to.equal(
        `Invalid authMechanismProperties.SERVICE_NAME (authMechanismProperties.SERVICE_NAME must be absent: ${mechanism ?? 'SCRAM (negotiated)'} takes no mechanism properties)`,
      );
      expect(inspect(error, { showHidden: true, depth: 9 })).to.not.include('hunter2');
      // An empty object is none.
      expect(Object.keys(new MongoCredentials({ ...init, mechanismProperties: {} }).mechanismProperties)).to.deep.equal([]);
    }
  });

  it('must be a plain object', function () {
    for (const value of [null, 'A:b', ['x'], new Map(), () => 1]) {
      const error = refusal(() => new MongoCredentials({ username: 'u', password: 'p', mechanismProperties: value as never }));
      expect(error.option, String(value)).to.equal('authMechanismProperties');
      expect(error.allowed).to.equal('a plain object of mechanism properties ({ KEY: value })');
    }
  });

  it('are a frozen prototype-less copy kept out of JSON, inspection, enumerable properties and structuredClone', function () {
    const creds = new MongoCredentials({ username: 'u', password: 'p' });
    expect(Object.isFrozen(creds.mechanismProperties)).to.equal(true);
    expect(Object.getPrototypeOf(creds.mechanismProperties)).to.equal(null);
    expect(Object.keys(creds)).to.not.include('mechanismProperties');
    expect(creds.toJSON()).to.not.have.property('mechanismProperties');
    expect(structuredClone(creds)).to.deep.equal({ username: 'u', source: 'admin', mechanism: undefined });
  });
});

describe('checkMechanismProperties', function () {
  const table = {
    'SCRAM-SHA-256': {},
    'SCRAM-SHA-1': {},
    PLAIN: {},
    'MONGODB-AWS': {},
    'MONGODB-OIDC': {},
    'MONGODB-X509': {
      TOKEN: { allowed: 'a string', inUri: true, valid: (v: unknown) => typeof v === 'string' },
      CALLBACK: { allowed: 'a function', inUri: false, valid: (v: unknown) => typeof v === 'function' },
    },
  } as const;

  it('copies the properties of the mechanism into a frozen prototype-less object, and refuses a value its rule refuses', function () {
    const given = { TOKEN: 'abc', CALLBACK: () => 1 };
    const copy = checkMechanismProperties('MONGODB-X509', given, table);
    expect(copy).to.not.equal(given);
    expect(Object.isFrozen(copy)).to.equal(true);
    expect(Object.getPrototypeOf(copy)).to.equal(null);
    expect({ ...copy }).to.deep.equal(given);
    given.TOKEN = 'changed';
    expect(copy.TOKEN).to.equal('abc');
    const error = (() => {
      try {
        return checkMechanismProperties('MONGODB-X509', { TOKEN: 42 }, table);
      } catch (e) {
        return e as InvalidOptionError;
      }
    })() as InvalidOptionError;
    expect(error).to.be.instanceOf(InvalidOptionError);
    expect(error.message).to.equal('Invalid authMechanismProperties.TOKEN: "<not shown>" (authMechanismProperties.TOKEN must be a string)');
  });

  it('names what the mechanism takes, the closest name, and the mechanism a property of another one belongs to', function () {
    const message = (mechanism: 'MONGODB-X509' | 'PLAIN', given: object): string => {
      try {
        checkMechanismProperties(mechanism, given, table);
      } catch (e) {
        return (e as Error).message;
      }
      return 'accepted';
    };
    expect(message('MONGODB-X509', { TOKN: 'x' })).to.equal(
      'Invalid authMechanismProperties.TOKN (did you mean TOKEN?) (authMechanismProperties.TOKN must be one of the properties of MONGODB-X509: TOKEN, CALLBACK)',
    );
    expect(message('MONGODB-X509', { ZZZZZZZZ: 'x' })).to.equal(
      'Invalid authMechanismProperties.ZZZZZZZZ (authMechanismProperties.ZZZZZZZZ must be one of the properties of MONGODB-X509: TOKEN, CALLBACK)',
    );
    expect(message('PLAIN', { TOKEN: 'x' })).to.equal(
      'Invalid authMechanismProperties.TOKEN: it is a property of MONGODB-X509 (authMechanismProperties.TOKEN must be absent: PLAIN takes no mechanism properties)',
    );
  });

  it('lists no property for SCRAM, MONGODB-X509 and PLAIN in the real table, which is frozen', function () {
    for (const mechanism of ['SCRAM-SHA-256', 'SCRAM-SHA-1', 'MONGODB-X509', 'PLAIN'] as const) {
      expect(Object.keys(MECHANISM_PROPERTIES[mechanism]), mechanism).to.deep.equal([]);
      expect(Object.isFrozen(MECHANISM_PROPERTIES[mechanism])).to.equal(true);
    }
    expect(Object.isFrozen(MECHANISM_PROPERTIES)).to.equal(true);
  });
});
