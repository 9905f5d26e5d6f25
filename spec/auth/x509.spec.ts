/**
 * MONGODB-X509: the `authenticate` command and its speculative form, then whole establishments over TLS with a client
 * certificate, against the embedded endpoint (its users in `$external`), or against MONGODB_URI's server when that URI
 * authenticates with MONGODB-X509 (skipped otherwise: a server's X.509 users and certificates are its own).
 */
import { expect } from 'chai';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { inspect } from 'node:util';
import type { Document } from 'bson';
import {
  AuthenticationError,
  ConnectionPool,
  InvalidOptionError,
  MongoCredentials,
  MongoServerError,
  WireProtocolError,
  connect,
  connectionFactory,
  type ConnectionOptions,
  type CredentialsInit,
} from '../../lib';
import { authenticate, speculativeStart } from '../../lib/auth/authenticate';
import { x509Authenticate, x509Command } from '../../lib/auth/x509';
import { parseConnectionString, parseConnectionStringWithCredentials } from '../../lib/connection-string';
import { EmbeddedServer } from '../../lib/testing';
import { authenticatedUsers, establishOne } from '../support/endpoint';
import { recordingRun, type RunRecorder } from '../support/run-recorder';

const fixtures = path.resolve(__dirname, '../fixtures/tls');
const file = (name: string): string => path.join(fixtures, name);
/** The subject of x509-client.pem as RFC 2253 writes it (fixtures README). */
const SUBJECT = 'CN=client,OU=Drivers,O=rxcmap\\, test,L=Reykjavik,ST=Reykjavik,C=IS';

const x509 = (username?: string): MongoCredentials => new MongoCredentials({ mechanism: 'MONGODB-X509', ...(username === undefined ? {} : { username }) });

/** A RunCommand that records what it is asked and answers with `answer`. */
const recorder = (answer: () => Promise<Document> = async () => ({ dbname: '$external', user: SUBJECT, ok: 1 })): RunRecorder => recordingRun(answer);

const rejection = (work: Promise<unknown>): Promise<unknown> => work.then(() => undefined, (e: unknown) => e);

describe('MONGODB-X509 (auth spec, "MONGODB-X509")', function () {
  describe('the authenticate command', function () {
    it('sends the user name only when given, and nothing else; the handshake speculates with the same document', function () {
      expect(x509Command(x509())).to.deep.equal({ authenticate: 1, mechanism: 'MONGODB-X509' });
      expect(x509Command(x509(SUBJECT))).to.deep.equal({ authenticate: 1, mechanism: 'MONGODB-X509', user: SUBJECT });
      expect(speculativeStart(x509())).to.deep.equal({ mechanism: 'MONGODB-X509', speculativeAuthenticate: { authenticate: 1, mechanism: 'MONGODB-X509' } });
      expect(speculativeStart(x509(SUBJECT))?.speculativeAuthenticate).to.deep.equal({ authenticate: 1, mechanism: 'MONGODB-X509', user: SUBJECT });
    });

    it('sends authenticate to $external once, unless the handshake was answered; a malformed answer is refused', async function () {
      const plain = recorder();
      await x509Authenticate(plain.run, x509());
      expect(plain.sent).to.deep.equal([['$external', { authenticate: 1, mechanism: 'MONGODB-X509' }]]);

      const answered = recorder();
      await x509Authenticate(answered.run, x509(), { speculativeReply: { dbname: '$external', user: SUBJECT } });
      expect(answered.sent).to.deep.equal([]);

      for (const reply of [null, 'done', 1, [SUBJECT]]) {
        const r = recorder();
        const error = await rejection(x509Authenticate(r.run, x509(), { speculativeReply: reply }));
        expect(error, inspect(reply)).to.be.instanceOf(AuthenticationError);
        expect((error as Error).message).to.equal(
          `Authentication failed for the client certificate's subject on "$external" with MONGODB-X509: the speculativeAuthenticate of the handshake reply is not a document`,
        );
        expect(r.sent).to.deep.equal([]);
      }
    });

    it('turns the server\'s refusal into AuthenticationError naming the user (cause: the server\'s error); other errors pass', async function () {
      const serverError = new MongoServerError({ ok: 0, code: 18, codeName: 'AuthenticationFailed', errmsg: 'Authentication failed.' });
      const refused = await rejection(x509Authenticate(recorder(async () => Promise.reject(serverError)).run, x509(SUBJECT)));
      expect(refused).to.be.instanceOf(AuthenticationError);
      expect((refused as Error).message).to.equal(`Authentication failed for user "${SUBJECT}" on "$external" with MONGODB-X509: ${serverError.message}`);
      expect((refused as Error).cause).to.equal(serverError);

      const unsendable = new WireProtocolError('the command document is too large');
      const malformed = await rejection(x509Authenticate(recorder(async () => Promise.reject(unsendable)).run, x509()));
      expect(malformed).to.be.instanceOf(AuthenticationError);
      expect((malformed as Error).message).to.match(/the authenticate command failed: the command document is too large$/);
      expect((malformed as Error).cause).to.equal(unsendable);

      const network = new Error('connection reset');
      expect(await rejection(x509Authenticate(recorder(async () => Promise.reject(network)).run, x509()))).to.equal(network);
    });

    it('sends nothing once its signal aborted, and rejects with the signal\'s reason', async function () {
      const r = recorder();
      const controller = new AbortController();
      const reason = new Error('establishment cancelled');
      controller.abort(reason);
      expect(await rejection(x509Authenticate(r.run, x509(), { signal: controller.signal }))).to.equal(reason);
      expect(await rejection(authenticate(r.run, x509(), { ok: 1 }, controller.signal))).to.equal(reason);
      expect(r.sent).to.deep.equal([]);
    });

    it('is what authenticate() runs for MONGODB-X509 credentials, never negotiated and never SCRAM', async function () {
      const speculative = speculativeStart(x509());
      const answered = recorder();
      await authenticate(answered.run, x509(), { ok: 1, saslSupportedMechs: ['SCRAM-SHA-256'], speculativeAuthenticate: { dbname: '$external', user: SUBJECT } }, undefined, speculative);
      expect(answered.sent).to.deep.equal([]);
      // A handshake answered for another mechanism, or not answered: the command is sent.
      const unanswered = recorder();
      await authenticate(unanswered.run, x509(), { ok: 1 }, undefined, speculative);
      await authenticate(unanswered.run, x509(), { ok: 1, speculativeAuthenticate: { conversationId: 1 } }, undefined, speculativeStart(new MongoCredentials({ username: 'u', password: 'p' })));
      // A speculativeAuthenticate the handshake did not carry is no answer: the command is sent.
      await authenticate(unanswered.run, x509(), { ok: 1, speculativeAuthenticate: { dbname: '$external', user: SUBJECT } });
      expect(unanswered.sent.map(([db, c]) => `${db} ${Object.keys(c)[0]}`)).to.deep.equal(['$external authenticate', '$external authenticate', '$external authenticate']);
    });
  });

  describe('credentials in the connection string (auth spec, "Connection String Options")', function () {
    const credentialsOf = (uri: string): unknown => (parseConnectionString(uri).connectionOptions.credentials as MongoCredentials | undefined)?.toJSON();
    it('takes a subject as user name or none, always in $external whatever the URI\'s database', function () {
      const user = encodeURIComponent('CN=myName,OU=myOrgUnit,O=myOrg,L=myLocality,ST=myState,C=myCountry');
      expect(credentialsOf(`mongodb://${user}@localhost/?authMechanism=MONGODB-X509`)).to.deep.equal({
        username: 'CN=myName,OU=myOrgUnit,O=myOrg,L=myLocality,ST=myState,C=myCountry',
        source: '$external',
        mechanism: 'MONGODB-X509',
      });
      expect(credentialsOf(`mongodb://${user}@localhost/foo?authMechanism=MONGODB-X509`)).to.include({ source: '$external' });
      expect(credentialsOf(`mongodb://${user}@localhost/foo?authMechanism=MONGODB-X509&authSource=$external`)).to.include({ source: '$external' });
      for (const uri of ['mongodb://localhost/?authMechanism=MONGODB-X509', 'mongodb://localhost/foo?authMechanism=MONGODB-X509&authSource=$external']) {
        expect(credentialsOf(uri), uri).to.deep.equal({ source: '$external', mechanism: 'MONGODB-X509' });
        expect(parseConnectionString(uri).connectionOptions.credentials?.password, uri).to.equal(undefined);
      }
    });

    it('puts credentials given to connect() in $external whatever the URI\'s database, and keeps the URI\'s mechanism for them', function () {
      const withOption = (uri: string, credentials: CredentialsInit): unknown =>
        (parseConnectionStringWithCredentials(uri, credentials).connectionOptions.credentials as MongoCredentials).toJSON();
      expect(withOption('mongodb://localhost/sales', { mechanism: 'MONGODB-X509' })).to.deep.equal({ source: '$external', mechanism: 'MONGODB-X509' });
      expect(withOption('mongodb://localhost/sales?authMechanism=MONGODB-X509', { username: SUBJECT })).to.deep.equal({ username: SUBJECT, source: '$external', mechanism: 'MONGODB-X509' });
      expect(() => parseConnectionStringWithCredentials('mongodb://localhost/?authMechanism=MONGODB-X509', { username: SUBJECT, password: 'pencil-secret' }))
        .to.throw(InvalidOptionError).with.property('option', 'password');
    });

    it('refuses a password (never shown) and an authSource other than $external', function () {
      for (const uri of ['mongodb://user:pencil-secret@localhost/?authMechanism=MONGODB-X509', 'mongodb://user:@localhost/?authMechanism=MONGODB-X509']) {
        let error: unknown;
        try {
          parseConnectionString(uri);
        } catch (e) {
          error = e;
        }
        expect(error, uri).to.be.instanceOf(InvalidOptionError).with.property('option', 'password');
        expect(`${(error as Error).message} ${inspect(error, { depth: 5 })}`).to.not.include('pencil-secret');
        expect((error as Error).message).to.equal('Invalid password: "<not shown>" (password must be none for MONGODB-X509: the client certificate is the credential)');
      }
      for (const uri of ['mongodb://user@localhost/?authMechanism=MONGODB-X509&authSource=bar', 'mongodb://localhost/?authMechanism=MONGODB-X509&authSource=admin']) {
        expect(() => parseConnectionString(uri), uri).to.throw(InvalidOptionError, 'Invalid authSource: "').with.property('allowed', '$external for MONGODB-X509');
      }
    });
  });

  describe('establishment over TLS with a client certificate (embedded endpoint)', function () {
    let server: EmbeddedServer;
    let options: ConnectionOptions;
    before(async function () {
      server = await new EmbeddedServer({
        users: [{ username: SUBJECT, db: '$external' }, { username: 'scram-user', password: 'p' }],
        // Both CAs: client.pem (subject "CN=rxcmap client", no user) verifies too.
        tls: { key: fs.readFileSync(file('server.key')), cert: fs.readFileSync(file('server.crt')), ca: fs.readFileSync(file('ca.pem'), 'utf8') + fs.readFileSync(file('x509-ca.pem'), 'utf8'), requestCert: true },
      }).start();
      options = { tlsCAFile: file('ca.pem'), tlsCertificateKeyFile: file('x509-client.pem'), credentials: { mechanism: 'MONGODB-X509' } };
    });
    after(async function () {
      await server?.stop();
    });
    afterEach(function () {
      server?.failCommand.configure({ configureFailPoint: 'failCommand', mode: 'off' });
    });

    it('authenticates as the certificate\'s subject in the hello alone: no authenticate command is sent', async function () {
      // Any authenticate command would fail: the connection authenticates all the same, so the handshake did it.
      server.failCommand.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['authenticate'], errorCode: 18 } });
      for (const credentials of [{ mechanism: 'MONGODB-X509' as const }, { mechanism: 'MONGODB-X509' as const, username: SUBJECT }]) {
        const connection = await establishOne(server.address, { ...options, credentials });
        expect(await authenticatedUsers(connection)).to.deep.equal([`$external.${SUBJECT}`]);
        connection.destroy();
      }
    });

    it('sends the authenticate command where the server does not speculate (before 4.4), and fails with its refusal', async function () {
      const old = await new EmbeddedServer({ maxWireVersion: 8, users: [{ username: SUBJECT, db: '$external' }], tls: { key: fs.readFileSync(file('server.key')), cert: fs.readFileSync(file('server.crt')), ca: fs.readFileSync(file('x509-ca.pem')), requestCert: true } }).start();
      try {
        const connection = await establishOne(old.address, options);
        expect(await authenticatedUsers(connection)).to.deep.equal([`$external.${SUBJECT}`]);
        connection.destroy();
        old.failCommand.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['authenticate'], errorCode: 18 } });
        const error = await rejection(establishOne(old.address, options));
        expect(error).to.be.instanceOf(AuthenticationError);
        expect((error as Error).cause).to.be.instanceOf(MongoServerError).with.property('code', 18);
      } finally {
        await old.stop();
      }
    });

    it('with a declared Stable API version, the authenticate command carries it (a server that requires it accepts the connection)', async function () {
      const old = await new EmbeddedServer({ maxWireVersion: 8, requireApiVersion: true, users: [{ username: SUBJECT, db: '$external' }], tls: { key: fs.readFileSync(file('server.key')), cert: fs.readFileSync(file('server.crt')), ca: fs.readFileSync(file('x509-ca.pem')), requestCert: true } }).start();
      try {
        const connection = await establishOne(old.address, { ...options, serverApi: { version: '1', strict: true } });
        const [info] = old.clientConnections();
        connection.destroy();
        expect(info.user).to.equal(`$external.${SUBJECT}`);
        expect(info.apiParameters.authenticate).to.deep.equal({ apiVersion: '1', apiStrict: true });
        expect(info.handshakeApiParameters).to.deep.equal({ apiVersion: '1', apiStrict: true });
      } finally {
        await old.stop();
      }
    });

    it('fails with AuthenticationError for a user name that is not the subject, or a subject no user has', async function () {
      const wrongName = await rejection(establishOne(server.address, { ...options, credentials: { mechanism: 'MONGODB-X509', username: 'CN=someone else' } }));
      expect(wrongName).to.be.instanceOf(AuthenticationError);
      expect((wrongName as Error).message).to.equal('Authentication failed for user "CN=someone else" on "$external" with MONGODB-X509: Authentication failed.');
      expect((wrongName as Error).cause).to.be.instanceOf(MongoServerError).with.property('codeName', 'AuthenticationFailed');
      const noUser = await rejection(establishOne(server.address, { ...options, tlsCertificateKeyFile: file('client.pem') }));
      expect(noUser).to.be.instanceOf(AuthenticationError);
      expect((noUser as Error).message).to.match(/^Authentication failed for the client certificate's subject on "\$external" with MONGODB-X509: /);
    });

    it('is refused before any connection without tlsCertificateKeyFile, naming authMechanism', function () {
      for (const make of [
        () => connectionFactory({ host: '127.0.0.1', port: 1, tls: true, credentials: { mechanism: 'MONGODB-X509' } }),
        () => new ConnectionPool({ address: '127.0.0.1:1', connectionOptions: { tlsCAFile: file('ca.pem'), credentials: { mechanism: 'MONGODB-X509' } } }),
      ]) {
        expect(make).to.throw(InvalidOptionError, 'Invalid authMechanism: "MONGODB-X509" (authMechanism must be with tlsCertificateKeyFile: MONGODB-X509 authenticates by the client certificate of a TLS connection)');
      }
    });

    it('runs commands through connect() with the mechanism in the URI, its database ignored for the source', async function () {
      const uri = `mongodb://${server.address}/sales?directConnection=true&authMechanism=MONGODB-X509&tlsCAFile=${encodeURIComponent(file('ca.pem'))}&tlsCertificateKeyFile=${encodeURIComponent(file('x509-client.pem'))}`;
      const client = connect(uri);
      try {
        const status = await client.command('admin', { connectionStatus: 1 });
        expect(status.authInfo.authenticatedUsers).to.deep.equal([{ user: SUBJECT, db: '$external' }]);
      } finally {
        await client.close();
      }
    });

    it('runs commands through connect() with credentials in the options object that the URI\'s mechanism completes', async function () {
      const uri = `mongodb://${server.address}/sales?directConnection=true&authMechanism=MONGODB-X509&tlsCAFile=${encodeURIComponent(file('ca.pem'))}&tlsCertificateKeyFile=${encodeURIComponent(file('x509-client.pem'))}`;
      for (const credentials of [{ username: SUBJECT }, {}, { source: '$external' }] as CredentialsInit[]) {
        const client = connect(uri, { credentials });
        try {
          const status = await client.command('admin', { connectionStatus: 1 });
          expect(status.authInfo.authenticatedUsers, inspect(credentials)).to.deep.equal([{ user: SUBJECT, db: '$external' }]);
        } finally {
          await client.close();
        }
      }
      // What the URI's mechanism cannot complete is still refused, before anything is opened.
      expect(() => connect(uri, { credentials: { username: SUBJECT, password: 'pencil-secret' } })).to.throw(InvalidOptionError).with.property('option', 'password');
      expect(() => connect(uri, { credentials: { username: SUBJECT, sourec: '$external' } as CredentialsInit })).to.throw(InvalidOptionError, 'sourec');
      expect(() => connect(uri, { credentials: { username: 5 } as unknown as CredentialsInit })).to.throw(InvalidOptionError).with.property('option', 'username');
    });
  });

  describe('against MONGODB_URI', function () {
    it('authenticates a pool\'s connections when MONGODB_URI uses MONGODB-X509', async function () {
      const uri = process.env.MONGODB_URI;
      const parsed = uri === undefined ? undefined : parseConnectionString(uri);
      if (parsed?.connectionOptions.credentials?.mechanism !== 'MONGODB-X509') {
        console.log('      skipped: MONGODB_URI is unset or does not authenticate with MONGODB-X509');
        this.skip();
      }
      const pool = new ConnectionPool({ address: parsed!.hosts[0], connectionOptions: parsed!.connectionOptions });
      pool.ready();
      try {
        const status = await pool.withConnection((c) => c.command('admin', { connectionStatus: 1 }));
        expect((status.authInfo.authenticatedUsers as { db: string }[]).map((u) => u.db)).to.include('$external');
      } finally {
        pool.close();
      }
    });
  });
});
