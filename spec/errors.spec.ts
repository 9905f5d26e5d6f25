/** The errors rxcmap raises: one base class, so `instanceof CmapError` tells a pool's error from any other. */
import { expect } from 'chai';
import * as rxcmap from '../lib';
import { inspect } from 'node:util';
import { CmapError, MongoNetworkError, MongoServerError, PoolClearedError } from '../lib';
import { InvalidOptionError } from '../lib';
import { inWords } from '../lib/errors';
import { MINIFIED_NAMES, withClassesRenamed } from './support/renamed-classes';

describe('errors', function () {
  it('every error class the package exports extends CmapError', function () {
    const errorClasses = Object.entries(rxcmap).filter(
      ([, value]) => typeof value === 'function' && value.prototype instanceof Error,
    ) as [string, abstract new (...args: never[]) => Error][];
    expect(errorClasses.length, 'error classes exported').to.be.above(15);
    const outside = errorClasses.filter(([, value]) => value !== CmapError && !(value.prototype instanceof CmapError)).map(([name]) => name);
    expect(outside).to.deep.equal([]);
  });

  it('every error keeps its class name as its name, also once a minifying bundler has renamed the classes', function () {
    // esbuild --minify named WaitQueueTimeoutError "jc" and webpack's terser "": err.name, String(err), the JSON
    // form and the log feed's error type all followed it.
    const examples: Record<string, () => Error> = {
      CmapError: () => new CmapError('m'),
      InvalidOptionError: () => new InvalidOptionError('maxPoolSize', -1, 'an integer >= 0'),
      PoolClosedError: () => new rxcmap.PoolClosedError('h:1'),
      PoolClearedError: () => new PoolClearedError('h:1', 'cleared'),
      WaitQueueTimeoutError: () => new rxcmap.WaitQueueTimeoutError('h:1', 100),
      WaitQueueFullError: () => new rxcmap.WaitQueueFullError('h:1', 5),
      CheckOutCancelledError: () => new rxcmap.CheckOutCancelledError('h:1'),
      CommandCancelledError: () => new rxcmap.CommandCancelledError('h:1', 1, 'ping', false),
      ConnectionCheckInError: () => new rxcmap.ConnectionCheckInError('h:1', 1, 'not checked out'),
      MongoNetworkError: () => new MongoNetworkError('h:1', 'reset'),
      MongoNetworkTimeoutError: () => new rxcmap.MongoNetworkTimeoutError('h:1', 'timed out'),
      MongoServerError: () => new MongoServerError({ ok: 0, errmsg: 'failed' }),
      ConnectionBusyError: () => new rxcmap.ConnectionBusyError('h:1', 1),
      PoolCallbackError: () => new rxcmap.PoolCallbackError('h:1', 'connectionFactory', 'threw'),
      AuthenticationError: () => new rxcmap.AuthenticationError('refused'),
      OidcHostNotAllowedError: () => new rxcmap.OidcHostNotAllowedError('example.com'),
      MongoCompatibilityError: () => new rxcmap.MongoCompatibilityError('no serviceId'),
      IncompatibleServerError: () => new rxcmap.IncompatibleServerError('h:1', 0, 7, 'too old'),
      ClientClosedError: () => new rxcmap.ClientClosedError(['h:1']),
      MonitorClosedError: () => new rxcmap.MonitorClosedError('h:1'),
      ServerSelectionError: () => new rxcmap.ServerSelectionError(['h:1'], 30_000),
      SrvResolutionError: () => new rxcmap.SrvResolutionError('cluster0.example.net', 'no SRV record'),
      WireProtocolError: () => new rxcmap.WireProtocolError('bad'),
    };
    const classes = Object.entries(rxcmap).filter(([, value]) => typeof value === 'function' && value.prototype instanceof Error);
    expect(Object.keys(examples).sort(), 'an example of every exported error class').to.deep.equal(classes.map(([name]) => name).sort());
    for (const name of MINIFIED_NAMES) {
      withClassesRenamed(
        classes.map(([, value]) => value as Function),
        name,
        () => {
          for (const [expected, make] of Object.entries(examples)) {
            const error = make();
            const json = JSON.parse(JSON.stringify(error)) as { name: string };
            const shown = { name: error.name, text: String(error).split(':')[0], json: json.name, stack: String(error.stack).split(':')[0] };
            expect(shown, `classes named "${name}"`).to.deep.equal({ name: expected, text: expected, json: expected, stack: expected });
          }
        },
      );
    }
    // A class of user code keeps its own name, a subclass of a concrete error as much as one of CmapError.
    class ApplicationError extends CmapError {}
    class ReportTimeoutError extends rxcmap.WaitQueueTimeoutError {}
    expect(new ApplicationError('m').name).to.equal('ApplicationError');
    class FrameTooLargeError extends rxcmap.WireProtocolError {}
    expect(new ReportTimeoutError('h:1', 100).name).to.equal('ReportTimeoutError');
    expect(new FrameTooLargeError('too large').name).to.equal('FrameTooLargeError');
  });

  it('inWords never shows the password of a URI in what it writes, whatever was thrown', function () {
    // A clear's cause, or what a log sink or an option getter threw, quoted a connection string as it was.
    const uri = 'mongodb://bob:hunter2@db.example.net/';
    const shown = [
      inWords(new Error(`cannot reach ${uri}`)),
      inWords(uri),
      inWords(Object.assign(Object.create(null) as object, { uri })),
      PoolClearedError.interrupted('h:1', new Error(`lost ${uri}`)).message,
      PoolClearedError.cleared('h:1', uri).message,
    ];
    for (const words of shown) {
      expect(words).to.not.include('hunter2');
      expect(words).to.include('mongodb://<credentials not shown>@db.example.net/');
    }
  });

  it('hides the user information of every URI, up to the last @ of its run of non-space characters', function () {
    const cases: [string, string][] = [
      ['mongodb://bob:hunter2@h/db', 'mongodb://<credentials not shown>@h/db'],
      ['MONGODB+SRV://bob:hunter2@h', 'MONGODB+SRV://<credentials not shown>@h'],
      ['1mongodb://bob:p@h', '1mongodb://<credentials not shown>@h'],
      ['see-x.mongodb://bob:p@h', 'see-x.mongodb://<credentials not shown>@h'],
      ['(mongodb://bob:p/w@h/db?x=a@b) then', '(mongodb://<credentials not shown>@b) then'],
      ['a://u@h and b://v@k', 'a://<credentials not shown>@h and b://<credentials not shown>@k'],
      ['x@y a://u', 'x@y a://u'],
      ['1://u@h ://u@h', '1://u@h ://u@h'],
      ['mongodb://@h', 'mongodb://<credentials not shown>@h'],
      ['a://b://u@h', 'a://<credentials not shown>@h'],
    ];
    for (const [given, shown] of cases) expect(inWords(given), given).to.equal(shown);
  });

  it('hides a value whose name holds pwd or passwd, or has pass or token as a word, and shows names that only contain them', function () {
    // A configuration object passed where a number belongs, or thrown by user code: MongoDB's createUser takes `pwd`.
    const secrets = {
      pwd: 'S1',
      passwd: 'S2',
      pass: 'S3',
      dbPass: 'S4',
      db_pass: 'S5',
      'x-pass': 'S6',
      sessionToken: 'S7',
      TOKEN: 'S8',
      refreshTokens: 'S9',
      Authorization: 'S10',
      apiKey: 'S11',
      private_key: 'S12',
      API_KEYS: 'S13',
    };
    for (const [key, secret] of Object.entries(secrets)) {
      const shown = [
        new InvalidOptionError('maxPoolSize', { user: 'u', [key]: secret }, 'an integer').message,
        new InvalidOptionError(`connectionOptions.${key}`, secret, 'x').message,
        inWords({ user: 'u', [key]: secret }),
      ];
      for (const words of shown) expect(words, key).to.not.include(secret);
      expect(shown[0], key).to.include(`"${key}":"<not shown>"`);
    }
    const benign = { bypassDocumentValidation: true, compass: 'c', passes: 2, tokenizer: 't', PASSAGE: 'p', key: { a: 1 }, shardKey: 'k', keyId: 1 };
    expect(new InvalidOptionError('o', benign, 'x').message).to.equal(`Invalid o: ${JSON.stringify(benign)} (o must be x)`);
  });

  it('finds pass or token as the word after a capitalised abbreviation (APIToken, OIDCToken, DBPass), and only there', function () {
    const secrets = { APIToken: 'S1', OIDCToken: 'S2', IDToken: 'S3', DBPass: 'S4', userDBPassHint: 'S5', IDTokens: 'S6', APIKey: 'S7' };
    for (const [key, secret] of Object.entries(secrets)) {
      expect(new InvalidOptionError('maxPoolSize', { [key]: secret }, 'an integer').message, key).to.not.include(secret);
      expect(new InvalidOptionError(`connectionOptions.${key}`, secret, 'x').message, key).to.not.include(secret);
    }
    const benign = { PASSthrough: 1, TOKENizer: 2, XMLPassage: 3, IDKey: 4 };
    expect(new InvalidOptionError('o', benign, 'x').message).to.equal(`Invalid o: ${JSON.stringify(benign)} (o must be x)`);
  });

  it('writes a long value in time linear in its length: 100,000 characters, with or without a URI, in well under a second', function () {
    const values = ['x'.repeat(100_000), `${'x'.repeat(100_000)}@h`, 'a1://'.repeat(20_000), `${'a://'.repeat(25_000)}@`, `${'a://'.repeat(25_000)}u:hunter2@h`];
    for (const value of values) {
      const started = Date.now();
      const error = new InvalidOptionError('appName', value, 'a string of at most 128 bytes');
      const words = inWords(new Error(value));
      expect(Date.now() - started, `${value.slice(0, 10)}... (${value.length} characters)`).to.be.below(1000);
      expect(error.message + words).to.not.include('hunter2');
    }
  });

  it("a server error's message is the reply's errmsg, else its legacy $err, as the MongoDB Node.js driver reads it", function () {
    // A reply in the legacy format says what failed in `$err` only: that text is the error's message, not a generic one.
    expect(new MongoServerError({ ok: 0, $err: 'not master', code: 10107 }).message).to.equal('not master');
    expect(new MongoServerError({ $err: 'cursor id 7 not found', code: 43 }).message).to.equal('cursor id 7 not found');
    expect(new MongoServerError({ ok: 0, errmsg: 'E11000 duplicate key', $err: 'older text', code: 11000 }).message).to.equal('E11000 duplicate key');
    expect(new MongoServerError({ ok: 0, errmsg: 42, $err: 'legacy text' }).message, 'an errmsg that is not a string').to.equal('legacy text');
    expect(new MongoServerError({ ok: 0, $err: 42 }).message, 'neither is a string').to.equal('command failed');
    // An empty errmsg says nothing: the legacy text says what failed (and makes a state change error known as one).
    expect(new MongoServerError({ ok: 0, errmsg: '', $err: 'not master' }).message).to.equal('not master');
    expect(new MongoServerError({ ok: 0, errmsg: '' }).message, 'an empty errmsg alone').to.equal('');
    expect(new MongoServerError({ ok: 0 }).message).to.equal('command failed');
  });

  it('a server error keeps its whole reply on `response`, but loggers that walk its fields do not write it', function () {
    // A reply may hold megabytes (an errInfo, say); a logger writing the error with JSON.stringify, or as pino's error
    // serializer does (every enumerable field), must write what the error is, not the reply.
    const reply = { ok: 0, errmsg: 'Document failed validation', code: 121, codeName: 'DocumentValidationFailure', errInfo: { details: 'y'.repeat(1_000_000) } };
    const error = new MongoServerError(reply);
    expect(error.response).to.equal(reply);
    const json = JSON.stringify(error);
    expect(json.length).to.be.below(1000);
    expect(JSON.parse(json)).to.include({ code: 121, codeName: 'DocumentValidationFailure' });
    const fields: Record<string, unknown> = {};
    for (const key in error) fields[key] = (error as unknown as Record<string, unknown>)[key];
    expect(fields).to.not.have.property('response');
    expect(inspect(error).length).to.be.below(2000);
  });

  it('an error written as JSON, by a field-walking logger, or cloned for a worker keeps name, message, code and labels', function () {
    const reset = new MongoNetworkError('db:27017', 'connection 3 to db:27017 closed', { labels: ['SystemOverloadedError'] });
    const cleared = PoolClearedError.cleared('db:27017', reset);
    // JSON.stringify: the labels as an array (a Set alone writes `{}`), the name and message, the cause likewise.
    const json = JSON.parse(JSON.stringify(cleared)) as Record<string, unknown> & { cause: Record<string, unknown> };
    expect(json).to.deep.include({ name: 'PoolClearedError', message: cleared.message, address: 'db:27017', errorLabels: ['RetryableError', 'RetryableWriteError'] });
    expect(json.cause).to.deep.include({ name: 'MongoNetworkError', message: reset.message, errorLabels: ['SystemOverloadedError'] });
    // pino's error serializer copies every enumerable field and writes the copy as JSON.
    const fields: Record<string, unknown> = {};
    for (const key in cleared) fields[key] = (cleared as unknown as Record<string, unknown>)[key];
    expect(JSON.parse(JSON.stringify(fields))).to.deep.include({ errorLabels: ['RetryableError', 'RetryableWriteError'] });
    // structuredClone (worker.postMessage) of an Error keeps only its message, stack and cause, each a plain Error
    // (as the README says): toJSON() is what to send.
    const cloned = structuredClone(cleared) as Error & { cause: Error & { errorLabels?: unknown } };
    expect([cloned.name, cloned.message, cloned.stack]).to.deep.equal(['Error', cleared.message, cleared.stack]);
    expect(cloned).to.not.have.property('errorLabels');
    expect([cloned.cause.name, cloned.cause.message, cloned.cause.errorLabels]).to.deep.equal(['Error', reset.message, undefined]);
    const server = new MongoServerError({ ok: 0, errmsg: 'not primary', code: 10107, errorLabels: ['RetryableWriteError'] });
    expect(structuredClone(server.toJSON())).to.deep.include({ name: 'MongoServerError', message: 'not primary', code: 10107, errorLabels: ['RetryableWriteError'] });
    // A cause chain that loops, or one longer than any real one, is cut rather than followed for ever.
    const a = new CmapError('a');
    const b = new CmapError('b', { cause: a });
    (a as { cause?: unknown }).cause = b;
    expect(() => JSON.stringify(a)).to.not.throw();
    expect(JSON.stringify(a).length).to.be.below(2000);
  });

  it('an error reached again through an object or array field is written once, at once; a deep or unreadable field never throws', function () {
    // A library that attaches context to an error (`error.context = { error }`, or `errors: [...]` whose cause is it):
    // the nested objects are written by JSON.stringify, which calls the error's toJSON() again from the start.
    const self = new MongoNetworkError('db:27017', 'closed');
    (self as unknown as { context: unknown }).context = { error: self };
    const outer = new MongoNetworkError('db:27017', 'outer');
    const inner = new MongoNetworkError('db:27017', 'inner', { cause: outer });
    (outer as unknown as { errors: unknown }).errors = [inner];
    for (const [name, error] of [['context', self], ['errors', outer]] as const) {
      const started = performance.now();
      const json = JSON.stringify(error);
      const ms = performance.now() - started;
      // Written again from the start at each field, they take some 250 ms and 50,000 characters or more; at once, under
      // 1 ms: 200 ms leaves a loaded machine's pauses room.
      expect({ name, ms: ms < 200, length: json.length < 2000 }, `${name}: ${Math.round(ms)} ms, ${json.length} characters`).to.deep.equal({ name, ms: true, length: true });
    }
    expect(JSON.parse(JSON.stringify(self))).to.deep.include({ name: 'MongoNetworkError', message: 'closed', context: { error: { name: 'MongoNetworkError', message: 'closed' } } });
    // Errors nested in fields, each in the next: cut like a long cause chain, not followed until the stack overflows.
    let deep = new MongoNetworkError('db:27017', 'e0');
    for (let i = 1; i < 20_000; i++) {
      const next = new MongoNetworkError('db:27017', `e${i}`);
      (next as unknown as { inner: unknown }).inner = deep;
      deep = next;
    }
    expect(() => JSON.stringify(deep)).to.not.throw();
    expect(JSON.stringify(deep).length).to.be.below(5000);
    // A field whose getter throws is left out.
    const unreadable = new MongoNetworkError('db:27017', 'unreadable');
    Object.defineProperty(unreadable, 'detail', { enumerable: true, get: () => { throw new Error('no'); } });
    expect(() => JSON.stringify(unreadable)).to.not.throw();
    expect(JSON.parse(JSON.stringify(unreadable))).to.deep.include({ name: 'MongoNetworkError', message: 'unreadable' }).and.not.have.property('detail');
  });
});
