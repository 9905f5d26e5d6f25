/**
 * PLAIN (LDAP): the saslStart and its bytes, the credentials and the connection string, then whole establishments over
 * TLS against the embedded endpoint (its users in `$external`, the password standing for the LDAP server's), or
 * against MONGODB_URI's server when that URI authenticates with PLAIN (skipped otherwise: a server's LDAP users are
 * its own). No test may find the password in an error, event, log message or inspection.
 */
import { expect } from 'chai';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { inspect } from 'node:util';
import { Binary, type Document } from 'bson';
import { MongoClient } from 'mongodb';
import {
  AuthenticationError,
  ConnectionPool,
  InvalidOptionError,
  Monitor,
  MongoCredentials,
  MongoServerError,
  WireProtocolError,
  connect,
  connectionFactory,
  type ConnectionOptions,
  type CredentialsInit,
  type LogSink,
} from '../../lib';
import { authenticate, saslSupportedMechsRequest, speculativeStart } from '../../lib/auth/authenticate';
import { plainAuthenticate, plainCommand } from '../../lib/auth/plain';
import { parseConnectionString, parseConnectionStringWithCredentials } from '../../lib/connection-string';
import { EmbeddedServer } from '../../lib/testing';
import { ScramUsers } from '../../lib/testing/scram-server';
import { authenticatedUsers, establishOne, eventually } from '../support/endpoint';
import { recordingRun, type RunRecorder } from '../support/run-recorder';

const fixtures = path.resolve(__dirname, '../fixtures/tls');
const file = (name: string): string => path.join(fixtures, name);
/** The LDAP password of the tests' user: no error, event, log or inspection may hold it. */
const SECRET = 'pencil-secret';

const plain = (init: Partial<CredentialsInit> = {}): MongoCredentials => new MongoCredentials({ username: 'alice', password: SECRET, mechanism: 'PLAIN', ...init });

/** A RunCommand that records what it is asked and answers with `answer`. */
const recorder = (answer: () => Promise<Document> = async () => ({ conversationId: 1, done: true, payload: new Binary(Buffer.alloc(0)), ok: 1 })): RunRecorder => recordingRun(answer);

const rejection = (work: Promise<unknown>): Promise<unknown> => work.then(() => undefined, (e: unknown) => e);

/** Everything an error shows: its message, its inspection (causes included) and its JSON. */
const shown = (value: unknown): string => `${value instanceof Error ? value.message : ''} ${inspect(value, { depth: 8 })} ${JSON.stringify(value) ?? ''}`;

/** The payload of a saslStart, as bytes. */
const payloadOf = (command: Document): Buffer => Buffer.from((command.payload as Binary).buffer);

describe('PLAIN (auth spec, "PLAIN")', function () {
  describe('the saslStart', function () {
    it('is the auth spec\'s conversation: \\0user\\0password, mechanism PLAIN, autoAuthorize, and nothing else', function () {
      const command = plainCommand(new MongoCredentials({ username: 'user', password: 'pencil', mechanism: 'PLAIN' }));
      expect(Object.keys(command)).to.deep.equal(['saslStart', 'mechanism', 'payload', 'autoAuthorize']);
      expect(command).to.include({ saslStart: 1, mechanism: 'PLAIN', autoAuthorize: 1 });
      // The auth spec's example: BinData(0, "AHVzZXIAcGVuY2ls").
      expect((command.payload as Binary).sub_type).to.equal(0);
      expect(payloadOf(command).toString('base64')).to.equal('AHVzZXIAcGVuY2ls');
    });

    it('sends the user name and password as given, in UTF-8, never SASLprep\'d', function () {
      // SASLprep would drop the soft hyphen (U+00AD) and map the no-break space (U+00A0) to a space.
      const password = 'p\u00ADa\u00A0ß😀';
      const command = plainCommand(new MongoCredentials({ username: 'Jón', password, mechanism: 'PLAIN' }));
      expect(payloadOf(command).equals(Buffer.from(`\0Jón\0${password}`, 'utf8'))).to.equal(true);
      // A password SASLprep refuses (a control character) is no error for PLAIN: the LDAP server judges it.
      expect(() => plainCommand(new MongoCredentials({ username: 'u', password: 'a\u0007b', mechanism: 'PLAIN' }))).to.not.throw();
    });

    it('never rides in the handshake: no speculativeAuthenticate, no saslSupportedMechs (handshake spec, "Speculative Authentication")', function () {
      expect(speculativeStart(plain())).to.equal(undefined);
      expect(saslSupportedMechsRequest(plain())).to.equal(undefined);
    });

    it('is sent once to the credentials\' source ($external unless given), and the conversation is over', async function () {
      const r = recorder();
      await plainAuthenticate(r.run, plain());
      await plainAuthenticate(r.run, plain({ source: 'foo' }));
      expect(r.sent.map(([db]) => db)).to.deep.equal(['$external', 'foo']);
      expect(payloadOf(r.sent[0][1]).equals(Buffer.from(`\0alice\0${SECRET}`))).to.equal(true);
    });

    it('is what authenticate() runs for PLAIN credentials, whatever the handshake reply lists or answered', async function () {
      const r = recorder();
      await authenticate(r.run, plain(), { ok: 1, saslSupportedMechs: ['SCRAM-SHA-256'], speculativeAuthenticate: { conversationId: 1, done: true } }, undefined, speculativeStart(plain()));
      expect(r.sent.map(([db, c]) => `${db} ${Object.keys(c)[0]} ${c.mechanism}`)).to.deep.equal(['$external saslStart PLAIN']);
    });

    it('turns the server\'s refusal into AuthenticationError naming the user, never the password; other errors pass', async function () {
      const serverError = new MongoServerError({ ok: 0, code: 18, codeName: 'AuthenticationFailed', errmsg: 'Authentication failed.' });
      const refused = await rejection(plainAuthenticate(recorder(async () => Promise.reject(serverError)).run, plain()));
      expect(refused).to.be.instanceOf(AuthenticationError);
      expect((refused as Error).message).to.equal(`Authentication failed for user "alice" on "$external" with PLAIN: ${serverError.message}`);
      expect((refused as Error).cause).to.equal(serverError);
      expect(shown(refused)).to.not.include(SECRET);

      const unsendable = new WireProtocolError('the command document is too large');
      const malformed = await rejection(plainAuthenticate(recorder(async () => Promise.reject(unsendable)).run, plain()));
      expect((malformed as Error).message).to.match(/the saslStart failed: the command document is too large$/);
      expect((malformed as Error).cause).to.equal(unsendable);

      const network = new Error('connection reset');
      expect(await rejection(plainAuthenticate(recorder(async () => Promise.reject(network)).run, plain()))).to.equal(network);
    });

    it('fails when the reply does not end the conversation: PLAIN has one step', async function () {
      for (const reply of [{ conversationId: 1, done: false, payload: new Binary(Buffer.alloc(0)), ok: 1 }, { ok: 1 }]) {
        const error = await rejection(plainAuthenticate(recorder(async () => reply).run, plain()));
        expect(error, inspect(reply)).to.be.instanceOf(AuthenticationError);
        expect((error as Error).message).to.equal('Authentication failed for user "alice" on "$external" with PLAIN: the server did not end the conversation after the saslStart (PLAIN has one step)');
      }
    });

    it('sends nothing once its signal aborted, or for credentials without a password, never showing one', async function () {
      const r = recorder();
      const controller = new AbortController();
      const reason = new Error('establishment cancelled');
      controller.abort(reason);
      expect(await rejection(plainAuthenticate(r.run, plain(), { signal: controller.signal }))).to.equal(reason);
      expect(await rejection(authenticate(r.run, plain(), { ok: 1 }, controller.signal))).to.equal(reason);
      const x509 = new MongoCredentials({ mechanism: 'MONGODB-X509' });
      const error = await rejection(plainAuthenticate(r.run, x509));
      expect(error).to.be.instanceOf(AuthenticationError);
      expect(r.sent).to.deep.equal([]);
    });
  });

  describe('credentials (auth spec, "PLAIN": MongoCredential Properties, "Errors")', function () {
    it('defaults the source to $external, keeps one given, and never shows the password', function () {
      expect(plain().toJSON()).to.deep.equal({ username: 'alice', source: '$external', mechanism: 'PLAIN' });
      expect(plain({ source: 'foo' }).source).to.equal('foo');
      expect(plain().password).to.equal(SECRET);
      expect(`${inspect(plain(), { depth: 5, showHidden: true })} ${JSON.stringify(plain())} ${Object.keys(plain()).join()}`).to.not.include(SECRET);
    });

    it('requires a non-empty user name and a password, refused when the factory is made, naming the option, never showing the password', function () {
      const cases: [CredentialsInit, string, string][] = [
        [{ password: SECRET, mechanism: 'PLAIN' }, 'username', 'Invalid username: undefined (username must be a non-empty string)'],
        [{ username: '', password: SECRET, mechanism: 'PLAIN' }, 'username', 'Invalid username: "" (username must be a non-empty string)'],
        [{ username: 'alice', mechanism: 'PLAIN' }, 'password', 'Invalid password: "<not shown>" (password must be a string)'],
        [{ username: 'alice', password: Buffer.from(SECRET) as unknown as string, mechanism: 'PLAIN' }, 'password', 'Invalid password: "<not shown>" (password must be a string)'],
        [{ username: 'alice', password: SECRET, mechanism: 'PLAIN', source: '' }, 'authSource', 'Invalid authSource: "" (authSource must be a non-empty database name)'],
      ];
      for (const [credentials, option, message] of cases) {
        for (const make of [
          () => new MongoCredentials(credentials),
          () => connectionFactory({ host: '127.0.0.1', port: 1, tlsCAFile: file('ca.pem'), credentials }),
          () => new ConnectionPool({ address: '127.0.0.1:1', connectionOptions: { tlsCAFile: file('ca.pem'), credentials } }),
        ]) {
          let error: unknown;
          try {
            make();
          } catch (e) {
            error = e;
          }
          expect(error, message).to.be.instanceOf(InvalidOptionError).with.property('option', option);
          expect((error as Error).message).to.equal(message);
          expect(shown(error)).to.not.include(SECRET);
        }
      }
    });

    it('refuses a user name or password the saslStart cannot carry as given (RFC 4616: no NUL; UTF-8), never showing the password', function () {
      // A NUL ends a field of the payload: "alice\0x" would be sent as the user "alice" with the password "x\0<password>"
      // (which a mongod cuts at its NUL); a lone surrogate would be sent as U+FFFD, another password.
      const cases: [CredentialsInit, string, RegExp][] = [
        [{ username: 'alice\0x', password: SECRET }, 'username', /^Invalid username: "alice\\u0000x" \(username must be a user name without NUL \(U\+0000\) or lone surrogate, for PLAIN/],
        [{ username: 'alice\uD800', password: SECRET }, 'username', /^Invalid username: .* \(username must be a user name without NUL \(U\+0000\) or lone surrogate, for PLAIN/],
        [{ username: 'alice', password: `${SECRET}\0x` }, 'password', /^Invalid password: "<not shown>" \(password must be a password without NUL \(U\+0000\) or lone surrogate, for PLAIN/],
        [{ username: 'alice', password: `${SECRET}\uDC00` }, 'password', /^Invalid password: "<not shown>" \(password must be a password without NUL \(U\+0000\) or lone surrogate, for PLAIN/],
      ];
      for (const [init, option, message] of cases) {
        const makers = [
          () => new MongoCredentials({ ...init, mechanism: 'PLAIN' }),
          () => parseConnectionStringWithCredentials('mongodb://localhost/?authMechanism=PLAIN', init),
        ];
        // A URI holds a NUL (%00), never a lone surrogate.
        if (!/\p{Cs}/u.test(`${init.username}${init.password}`)) {
          makers.push(() => parseConnectionString(`mongodb://${encodeURIComponent(init.username!)}:${encodeURIComponent(init.password!)}@localhost/?authMechanism=PLAIN`));
        }
        for (const make of makers) {
          let error: unknown;
          try {
            make();
          } catch (e) {
            error = e;
          }
          expect(error, `${option}: ${make.toString()}`).to.be.instanceOf(InvalidOptionError).with.property('option', option);
          expect((error as Error).message).to.match(message);
          expect(shown(error)).to.not.include(SECRET);
        }
      }
      // The same strings stay valid for SCRAM-SHA-1 and a negotiated mechanism, whose payloads escape nothing of theirs.
      expect(() => new MongoCredentials({ username: 'alice', password: `${SECRET}\0x`, mechanism: 'SCRAM-SHA-1' })).to.not.throw();
    });

    it('is refused over TCP with TLS left unset when the factory is made, naming authMechanism: the password would cross the network in clear', function () {
      for (const make of [
        () => connectionFactory({ host: '127.0.0.1', port: 1, credentials: { username: 'alice', password: SECRET, mechanism: 'PLAIN' } }),
        () => connectionFactory({ host: '127.0.0.1', port: 1, tls: undefined, credentials: plain() }),
        () => new ConnectionPool({ address: '127.0.0.1:1', connectionOptions: { credentials: plain() } }),
        () => connect('mongodb://alice:pencil-secret@127.0.0.1:1/?authMechanism=PLAIN'),
      ]) {
        let error: unknown;
        try {
          make();
        } catch (e) {
          error = e;
        }
        expect(error).to.be.instanceOf(InvalidOptionError).with.property('option', 'authMechanism');
        expect((error as Error).message).to.equal(
          'Invalid authMechanism: "PLAIN" (authMechanism must be with TLS (tls=true), over a Unix domain socket, or with tls=false given outright: PLAIN sends the password in clear text)',
        );
        expect(shown(error)).to.not.include(SECRET);
      }
      expect(() => connectionFactory({ host: '127.0.0.1', port: 1, tls: true, credentials: plain() })).to.not.throw();
      // The clear text chosen outright: a mongod accepts it, so the user may.
      expect(() => connectionFactory({ host: '127.0.0.1', port: 1, tls: false, credentials: plain() })).to.not.throw();
      expect(() => new ConnectionPool({ address: '127.0.0.1:1', connectionOptions: { tls: false, credentials: plain() } })).to.not.throw();
      const client = connect('mongodb://alice:pencil-secret@127.0.0.1:1/?authMechanism=PLAIN&tls=false');
      void client.close();
      // A Unix domain socket crosses no network.
      expect(() => connectionFactory({ host: '/tmp/mongodb-27017.sock', credentials: plain() })).to.not.throw();
      expect(() => new ConnectionPool({ address: '/tmp/mongodb-27017.sock', connectionOptions: { credentials: plain() } })).to.not.throw();
    });
  });

  describe('credentials in the connection string (auth spec, "Connection String Options")', function () {
    const credentialsOf = (uri: string): unknown => (parseConnectionString(uri).connectionOptions.credentials as MongoCredentials | undefined)?.toJSON();

    // The PLAIN cases of the auth spec's tests/legacy/connection-string.json, as they are there.
    const SPEC_CASES: { description: string; uri: string; valid: boolean; credential?: { username: string; password: string; source: string; mechanism: string; mechanism_properties: null } }[] = [
      { description: 'should recognize the mechanism (PLAIN)', uri: 'mongodb://user:password@localhost/?authMechanism=PLAIN', valid: true, credential: { username: 'user', password: 'password', source: '$external', mechanism: 'PLAIN', mechanism_properties: null } },
      { description: 'should use the database when no authSource is specified (PLAIN)', uri: 'mongodb://user:password@localhost/foo?authMechanism=PLAIN', valid: true, credential: { username: 'user', password: 'password', source: 'foo', mechanism: 'PLAIN', mechanism_properties: null } },
      { description: 'should use the authSource when specified (PLAIN)', uri: 'mongodb://user:password@localhost/foo?authMechanism=PLAIN&authSource=bar', valid: true, credential: { username: 'user', password: 'password', source: 'bar', mechanism: 'PLAIN', mechanism_properties: null } },
      { description: 'should throw an exception if no username (PLAIN)', uri: 'mongodb://localhost/?authMechanism=PLAIN', valid: false },
    ];
    for (const test of SPEC_CASES) {
      it(test.description, function () {
        if (!test.valid) {
          expect(() => parseConnectionString(test.uri)).to.throw(InvalidOptionError, 'PLAIN needs a user name').with.property('option', 'authMechanism');
          return;
        }
        const credentials = parseConnectionString(test.uri).connectionOptions.credentials!;
        const { username, password, source, mechanism } = test.credential!;
        expect({ username: credentials.username, password: credentials.password, source: credentials.source, mechanism: credentials.mechanism }).to.deep.equal({ username, password, source, mechanism });
      });
    }

    it('warns when the source is the URI\'s database for want of an authSource: LDAP users are in $external', function () {
      const warning = 'authMechanism=PLAIN authenticates on the URI\'s database "sales" (there is no authSource); LDAP users are in $external: add authSource=$external if the user is one';
      expect(parseConnectionString('mongodb://alice:pencil-secret@localhost/sales?authMechanism=PLAIN').warnings).to.deep.equal([warning]);
      expect(parseConnectionStringWithCredentials('mongodb://localhost/sales?authMechanism=PLAIN', { username: 'alice', password: SECRET }).warnings).to.deep.equal([warning]);
      for (const [uri, credentials] of [
        ['mongodb://alice:pencil-secret@localhost/?authMechanism=PLAIN', undefined],
        ['mongodb://alice:pencil-secret@localhost/sales?authMechanism=PLAIN&authSource=$external', undefined],
        ['mongodb://alice:pencil-secret@localhost/sales?authMechanism=SCRAM-SHA-256', undefined],
        ['mongodb://localhost/sales?authMechanism=PLAIN', { username: 'alice', password: SECRET, source: 'sales' }],
      ] as [string, CredentialsInit | undefined][]) {
        const parsed = credentials === undefined ? parseConnectionString(uri) : parseConnectionStringWithCredentials(uri, credentials);
        expect(parsed.warnings, uri).to.deep.equal([]);
      }
    });

    it('keeps the password out of what the parse shows, and takes one written empty as a password', function () {
      const parsed = parseConnectionString('mongodb://alice:pencil-secret@localhost/?authMechanism=PLAIN');
      expect(`${inspect(parsed, { depth: 8 })} ${JSON.stringify(parsed)}`).to.not.include(SECRET);
      expect(credentialsOf('mongodb://alice:@localhost/?authMechanism=PLAIN')).to.deep.equal({ username: 'alice', source: '$external', mechanism: 'PLAIN' });
    });

    it('completes credentials given to connect() with the URI\'s mechanism and source (authSource, else database, else $external)', function () {
      const withOption = (uri: string, credentials: CredentialsInit): unknown =>
        (parseConnectionStringWithCredentials(uri, credentials).connectionOptions.credentials as MongoCredentials).toJSON();
      expect(withOption('mongodb://localhost/?authMechanism=PLAIN', { username: 'alice', password: SECRET })).to.deep.equal({ username: 'alice', source: '$external', mechanism: 'PLAIN' });
      expect(withOption('mongodb://localhost/sales?authMechanism=PLAIN', { username: 'alice', password: SECRET })).to.deep.equal({ username: 'alice', source: 'sales', mechanism: 'PLAIN' });
      expect(withOption('mongodb://localhost/sales?authMechanism=PLAIN&authSource=$external', { username: 'alice', password: SECRET })).to.deep.equal({ username: 'alice', source: '$external', mechanism: 'PLAIN' });
      expect(withOption('mongodb://localhost/', { username: 'alice', password: SECRET, mechanism: 'PLAIN' })).to.deep.equal({ username: 'alice', source: '$external', mechanism: 'PLAIN' });
      expect(() => parseConnectionStringWithCredentials('mongodb://localhost/?authMechanism=PLAIN', { username: 'alice' })).to.throw(InvalidOptionError).with.property('option', 'password');
    });
  });

  describe('establishment over TLS (embedded endpoint: LDAP users in $external)', function () {
    let server: EmbeddedServer;
    const tls = { tlsCAFile: file('ca.pem') };
    const options: ConnectionOptions = { ...tls, credentials: { username: 'alice', password: SECRET, mechanism: 'PLAIN' } };
    /** The PLAIN saslStarts the endpoint answered: database, command. */
    const plainStarts: [string, Document][] = [];
    const original = ScramUsers.prototype.plain;
    before(async function () {
      ScramUsers.prototype.plain = function (this: ScramUsers, db: string, command: Document) {
        plainStarts.push([db, command]);
        return original.call(this, db, command);
      };
      server = await new EmbeddedServer({
        users: [
          { username: 'alice', password: SECRET, db: '$external' },
          // An internal user: PLAIN elsewhere than $external checks its SCRAM credentials, as a mongod with PLAIN on.
          { username: 'bob', password: SECRET, db: 'sales' },
        ],
        tls: { key: fs.readFileSync(file('server.key')), cert: fs.readFileSync(file('server.crt')) },
      }).start();
    });
    after(async function () {
      ScramUsers.prototype.plain = original;
      await server?.stop();
    });
    beforeEach(function () {
      plainStarts.length = 0;
    });

    it('authenticates with one saslStart after the hello, as the LDAP user in $external', async function () {
      const connection = await establishOne(server.address, options);
      expect(await authenticatedUsers(connection)).to.deep.equal(['$external.alice']);
      connection.destroy();
      expect(plainStarts).to.have.length(1);
      expect(plainStarts[0][0]).to.equal('$external');
    });

    it('sends the very saslStart the official driver sends for the same credentials', async function () {
      const connection = await establishOne(server.address, options);
      connection.destroy();
      const ours = plainStarts.splice(0);
      const client = new MongoClient(`mongodb://alice:${SECRET}@${server.address}/?authMechanism=PLAIN&directConnection=true&tls=true&tlsCAFile=${encodeURIComponent(file('ca.pem'))}`, { serverSelectionTimeoutMS: 5000 });
      try {
        await client.db('admin').command({ ping: 1 });
      } finally {
        await client.close();
      }
      const theirs = plainStarts.splice(0);
      expect(theirs.length).to.be.greaterThan(0);
      const fields = ([db, c]: [string, Document]) => ({ db, saslStart: c.saslStart, mechanism: c.mechanism, autoAuthorize: c.autoAuthorize, subtype: (c.payload as Binary).sub_type, payload: payloadOf(c).toString('hex'), keys: Object.keys(c).filter((k) => !k.startsWith('$')) });
      expect(fields(ours[0])).to.deep.equal(fields(theirs[0]));
    });

    it('fails with AuthenticationError for a wrong password or an unknown user (AuthenticationFailed, 18), never showing the password', async function () {
      for (const credentials of [
        { username: 'alice', password: 'wrong-pencil', mechanism: 'PLAIN' as const },
        { username: 'nobody', password: SECRET, mechanism: 'PLAIN' as const },
        // The internal user is not in $external: the LDAP directory does not know it.
        { username: 'bob', password: SECRET, mechanism: 'PLAIN' as const },
      ]) {
        const error = await rejection(establishOne(server.address, { ...tls, credentials }));
        expect(error, credentials.username).to.be.instanceOf(AuthenticationError);
        expect((error as Error).message).to.equal(`Authentication failed for user "${credentials.username}" on "$external" with PLAIN: Authentication failed.`);
        expect((error as Error).cause).to.be.instanceOf(MongoServerError).with.property('code', 18);
        expect(shown(error)).to.not.include(SECRET).and.not.include('wrong-pencil');
      }
    });

    it('never shows the password a server echoes in its refusal: not in the error, its cause, the cause\'s reply, a pool event or a log message', async function () {
      const recording = ScramUsers.prototype.plain;
      // An LDAP proxy (or a server's diagnostics) that quotes what it was sent: it received the password in clear.
      ScramUsers.prototype.plain = function (this: ScramUsers, _db: string, command: Document) {
        const sent = payloadOf(command).toString('utf8').split('\0');
        return { reply: { ok: 0, code: 18, codeName: 'AuthenticationFailed', errmsg: `LDAP bind of "${sent[1]}" with "${sent[2]}" failed`, errorLabels: [`bind:${sent[2]}`], detail: { tried: [sent[2]] } } };
      };
      try {
        const error = await rejection(establishOne(server.address, options));
        expect(error).to.be.instanceOf(AuthenticationError);
        expect((error as Error).message).to.equal('Authentication failed for user "alice" on "$external" with PLAIN: LDAP bind of "alice" with "<password not shown>" failed');
        const cause = (error as Error).cause as MongoServerError;
        expect(cause).to.be.instanceOf(MongoServerError).with.property('code', 18);
        expect(cause.codeName).to.equal('AuthenticationFailed');
        expect(`${shown(error)} ${shown(cause)} ${inspect(cause.response, { depth: 8 })} ${cause.stack} ${(error as Error).stack}`).to.not.include(SECRET);

        const messages: string[] = [];
        const pool = new ConnectionPool({ address: server.address, connectionOptions: options, logging: { componentSeverities: { connection: 'debug' }, path: { write: (m) => void messages.push(`${m.render()} ${JSON.stringify(m.toJSON())}`) } } });
        const events: string[] = [];
        pool.events$.subscribe((e) => events.push(shown(e)));
        pool.ready();
        try {
          expect(await pool.withConnection((c) => c.command('admin', { ping: 1 })).catch((e: unknown) => e)).to.be.instanceOf(AuthenticationError);
        } finally {
          pool.close();
        }
        expect(messages.join('\n')).to.include('<password not shown>');
        expect([...events, ...messages].join('\n')).to.not.include(SECRET);
      } finally {
        ScramUsers.prototype.plain = recording;
      }
    });

    it('never keeps the password a refusal echoes in binary data (the payload it was sent, as BinData) in the cause\'s reply', async function () {
      const payload = (): Binary => new Binary(Buffer.from(`\0alice\0${SECRET}`, 'utf8'));
      const refusal = new MongoServerError({ ok: 0, code: 18, codeName: 'AuthenticationFailed', errmsg: 'Authentication failed.', received: payload(), tried: [payload()] });
      const credentials = new MongoCredentials({ username: 'alice', password: SECRET, mechanism: 'PLAIN' });
      const error = await rejection(plainAuthenticate(() => Promise.reject(refusal), credentials));
      expect(error).to.be.instanceOf(AuthenticationError);
      const cause = (error as Error).cause as MongoServerError;
      expect(cause).to.be.instanceOf(MongoServerError).with.property('code', 18);
      const received = cause.response.received as Binary;
      expect(received).to.be.instanceOf(Binary);
      expect(Buffer.from(received.buffer).toString('utf8')).to.equal('\0alice\0<password not shown>');
      expect(Buffer.from((cause.response.tried as Binary[])[0].buffer).toString('utf8')).to.equal('\0alice\0<password not shown>');
    });

    it('a refusal nested too deep to search is rebuilt from its code, codeName and errmsg, the password not shown (no RangeError)', async function () {
      // A reply can nest millions of levels (the connection decodes them); searching it recursively overflows the stack.
      let deep: Document = { tried: SECRET };
      for (let i = 0; i < 200_000; i++) deep = { d: deep };
      const refusal = new MongoServerError({ ok: 0, code: 18, codeName: 'AuthenticationFailed', errmsg: `bind with ${SECRET} failed`, deep });
      const credentials = new MongoCredentials({ username: 'alice', password: SECRET, mechanism: 'PLAIN' });
      const error = await rejection(plainAuthenticate(() => Promise.reject(refusal), credentials));
      expect(error).to.be.instanceOf(AuthenticationError);
      expect((error as Error).message).to.equal('Authentication failed for user "alice" on "$external" with PLAIN: bind with <password not shown> failed');
      const cause = (error as Error).cause as MongoServerError;
      expect(cause).to.be.instanceOf(MongoServerError).with.property('code', 18);
      expect(cause.codeName).to.equal('AuthenticationFailed');
      expect(`${shown(error)} ${inspect(cause.response, { depth: 3 })}`).to.not.include(SECRET);
    });

    it('authenticates an internal user in another source, as a mongod with PLAIN enabled checks its SCRAM credentials', async function () {
      const connection = await establishOne(server.address, { ...tls, credentials: { username: 'bob', password: SECRET, mechanism: 'PLAIN', source: 'sales' } });
      expect(await authenticatedUsers(connection)).to.deep.equal(['sales.bob']);
      connection.destroy();
      const error = await rejection(establishOne(server.address, { ...tls, credentials: { username: 'bob', password: 'wrong', mechanism: 'PLAIN', source: 'sales' } }));
      expect((error as Error).cause).to.be.instanceOf(MongoServerError).with.property('code', 18);
    });

    it('authenticates a pool\'s connections, and its failures show the password in no event, log message or error', async function () {
      const messages: string[] = [];
      const sink: LogSink = { write: (m) => void messages.push(`${m.render()} ${JSON.stringify(m.toJSON())}`) };
      const run = async (credentials: CredentialsInit): Promise<{ events: string[]; result: unknown }> => {
        const pool = new ConnectionPool({ address: server.address, connectionOptions: { ...tls, credentials }, logging: { componentSeverities: { connection: 'debug' }, path: sink } });
        const events: string[] = [];
        pool.events$.subscribe((e) => events.push(shown(e)));
        pool.ready();
        try {
          const result = await pool.withConnection((c) => c.command('admin', { connectionStatus: 1 })).catch((e: unknown) => e);
          return { events, result };
        } finally {
          pool.close();
        }
      };
      const ok = await run({ username: 'alice', password: SECRET, mechanism: 'PLAIN' });
      expect((ok.result as Document).authInfo.authenticatedUsers).to.deep.equal([{ user: 'alice', db: '$external' }]);
      const failed = await run({ username: 'alice', password: `${SECRET}-wrong`, mechanism: 'PLAIN' });
      expect(failed.result).to.be.instanceOf(Error);
      expect(shown(failed.result)).to.include('Authentication failed.');
      for (const text of [...ok.events, ...failed.events, ...messages, shown(failed.result)]) {
        expect(text).to.not.include(SECRET);
      }
      expect(messages.join('\n')).to.include('Authentication failed');
    });

    it('runs commands through connect(), the URI\'s authMechanism=PLAIN with and without authSource; the monitors never authenticate', async function () {
      const query = `directConnection=true&tls=true&tlsCAFile=${encodeURIComponent(file('ca.pem'))}`;
      for (const [uri, user] of [
        [`mongodb://alice:${SECRET}@${server.address}/?authMechanism=PLAIN&${query}`, { user: 'alice', db: '$external' }],
        [`mongodb://alice:${SECRET}@${server.address}/sales?authMechanism=PLAIN&authSource=%24external&${query}`, { user: 'alice', db: '$external' }],
        // Without authSource, the URI's database is the source: the internal user there.
        [`mongodb://bob:${SECRET}@${server.address}/sales?authMechanism=PLAIN&${query}`, { user: 'bob', db: 'sales' }],
      ] as const) {
        plainStarts.length = 0;
        const before = server.connectionsAccepted;
        const logged: string[] = [];
        const client = connect(uri, { logging: { componentSeverities: { default: 'debug' }, path: { write: (m) => void logged.push(m.render()) } } });
        const events: string[] = [];
        client.events$.subscribe((e) => events.push(shown(e)));
        try {
          const status = await client.command('admin', { connectionStatus: 1 });
          expect(status.authInfo.authenticatedUsers, uri).to.deep.equal([user]);
          expect(shown(client)).to.not.include(SECRET);
        } finally {
          await client.close();
        }
        // Every connection but the pool's is a monitor's: it opened, and sent no saslStart.
        const opened = server.connectionsAccepted - before;
        expect(opened, uri).to.be.greaterThan(1);
        expect(plainStarts, uri).to.have.length(1);
        expect(plainStarts[0][0], uri).to.equal(user.db);
        expect([...events, ...logged].join('\n')).to.not.include(SECRET);
      }
    });

    it('a monitor given PLAIN credentials checks the server without authenticating', async function () {
      const monitor = new Monitor({ address: server.address, heartbeatFrequencyMS: 500, connectionOptions: options });
      let succeeded = 0;
      monitor.heartbeats$.subscribe((e) => void (e.type === 'ServerHeartbeatSucceeded' && succeeded++));
      monitor.start();
      try {
        expect(await eventually(() => succeeded >= 1)).to.equal(true);
        expect(plainStarts).to.deep.equal([]);
      } finally {
        monitor.close();
      }
    });
  });

  describe('against MONGODB_URI', function () {
    it('authenticates a pool\'s connections when MONGODB_URI uses PLAIN', async function () {
      const uri = process.env.MONGODB_URI;
      const parsed = uri === undefined ? undefined : parseConnectionString(uri);
      if (parsed?.connectionOptions.credentials?.mechanism !== 'PLAIN') {
        console.log('      skipped: MONGODB_URI is unset or does not authenticate with PLAIN');
        this.skip();
      }
      const credentials = parsed!.connectionOptions.credentials!;
      const pool = new ConnectionPool({ address: parsed!.hosts[0], connectionOptions: parsed!.connectionOptions });
      pool.ready();
      try {
        const status = await pool.withConnection((c) => c.command('admin', { connectionStatus: 1 }));
        expect(status.authInfo.authenticatedUsers).to.deep.include({ user: credentials.username, db: credentials.source });
      } finally {
        pool.close();
      }
      // A wrong password is refused by the server, and shown nowhere.
      const wrong = new ConnectionPool({ address: parsed!.hosts[0], connectionOptions: { ...parsed!.connectionOptions, credentials: { username: credentials.username!, password: `${credentials.password}-wrong`, mechanism: 'PLAIN', source: credentials.source } } });
      wrong.ready();
      try {
        const error = await wrong.withConnection((c) => c.command('admin', { ping: 1 })).catch((e: unknown) => e);
        expect(error).to.be.instanceOf(Error);
        expect(shown(error)).to.not.include(credentials.password!);
      } finally {
        wrong.close();
      }
    });
  });
});
