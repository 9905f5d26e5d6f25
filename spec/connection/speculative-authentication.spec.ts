/**
 * Speculative authentication in establishment, on the wire: the handshake carries the saslStart, and the conversation
 * goes on from the server's answer to it. Against MONGODB_URI's server when it is set (with its credentials; skipped
 * without them, or over TLS, which the counting proxy cannot read), else the embedded endpoint.
 */
import { expect } from 'chai';
import { inspect } from 'node:util';
import { Binary, type Document } from 'bson';
import { AuthenticationError, type ConnectionOptions, type CredentialsInit } from '../../lib';
import { EmbeddedServer } from '../../lib/testing';
import { authenticatedUsers, establishOne, eventually, startTestEndpoint, type TestEndpoint } from '../support/endpoint';
import { startWireProxy, type WireProxy } from '../support/wire-proxy';

const PASSWORD = 'pencil-secret-4711';

const text = (payload: unknown): string => Buffer.from((payload as Binary).buffer).toString('utf8');
const binary = (value: string): Binary => new Binary(Buffer.from(value, 'utf8'));

describe(`speculative authentication (handshake spec, "Speculative Authentication"; ${process.env.MONGODB_URI ? 'MONGODB_URI' : 'embedded endpoint'})`, function () {
  let endpoint: TestEndpoint;
  let proxy: WireProxy;
  let credentials: CredentialsInit;
  /** The connection options of the server (TLS aside), with `credentials`. */
  let options: ConnectionOptions;

  before(async function () {
    endpoint = await startTestEndpoint({ users: [{ username: 'spec-user', password: PASSWORD }] });
    const given = endpoint.embedded ? { username: 'spec-user', password: PASSWORD } : endpoint.connectionOptions.credentials;
    if (given === undefined || endpoint.connectionOptions.tls) {
      console.log('      skipped: MONGODB_URI names no credentials, or uses TLS (the counting proxy reads plain TCP only)');
      await endpoint.stop();
      this.skip();
    }
    credentials = { username: given!.username, password: given!.password, source: given!.source, mechanism: given!.mechanism };
    options = { ...endpoint.connectionOptions, credentials };
    proxy = await startWireProxy(endpoint.address);
  });
  after(async function () {
    await proxy?.stop();
    await endpoint?.stop();
  });
  beforeEach(function () {
    if (proxy === undefined) this.skip();
    proxy.commands.length = 0;
    proxy.hooks = {};
    proxy.sockets.accepted = proxy.sockets.closed = 0;
  });

  it('authenticates with hello + saslContinue: the saslStart rides in the handshake, with db', async function () {
    const hellos: Document[] = [];
    proxy.hooks = { request: (command) => (hellos.push(command), command) };
    const connection = await establishOne(proxy.address, options);
    const source = credentials.source ?? 'admin';
    expect(await authenticatedUsers(connection)).to.include(`${source}.${credentials.username}`);
    connection.destroy();
    const establishment = proxy.commands.slice(0, proxy.commands.indexOf('connectionStatus'));
    expect(establishment[0]).to.match(/^(isMaster|hello)$/);
    expect(establishment.slice(1)).to.not.include('saslStart');
    // A 4.4+ server honours skipEmptyExchange: one saslContinue ends the conversation.
    expect(establishment.slice(1)).to.deep.equal(['saslContinue']);
    const speculative = hellos[0].speculativeAuthenticate as Document;
    expect(speculative).to.include({ saslStart: 1, mechanism: credentials.mechanism ?? 'SCRAM-SHA-256', db: source });
    expect(speculative.options).to.deep.equal({ skipEmptyExchange: true });
    expect(text(speculative.payload)).to.match(new RegExp(`^n,,n=${credentials.username!.replace(/=/g, '=3D').replace(/,/g, '=2C')},r=[A-Za-z0-9+/=]{32}$`));
  });

  it('draws a fresh client nonce for every connection', async function () {
    const nonces: string[] = [];
    proxy.hooks = {
      request: (command) => {
        if (command.speculativeAuthenticate) nonces.push(text(command.speculativeAuthenticate.payload).split(',r=')[1]);
        return command;
      },
    };
    for (let i = 0; i < 2; i++) (await establishOne(proxy.address, options)).destroy();
    expect(nonces).to.have.length(2);
    expect(nonces[0]).to.not.equal(nonces[1]);
  });

  it('a server that ignores speculativeAuthenticate (before 4.4) gets the whole conversation: hello + saslStart + saslContinue', async function () {
    proxy.hooks = {
      request: (command) => {
        delete command.speculativeAuthenticate;
        return command;
      },
    };
    const connection = await establishOne(proxy.address, options);
    expect(await authenticatedUsers(connection)).to.include(`${credentials.source ?? 'admin'}.${credentials.username}`);
    connection.destroy();
    expect(proxy.commands.slice(1, proxy.commands.indexOf('connectionStatus'))).to.deep.equal(['saslStart', 'saslContinue']);
  });

  it('a wrong password fails with AuthenticationError after hello + saslContinue, showing no password', async function () {
    const error = await establishOne(proxy.address, { ...options, credentials: { ...credentials, password: 'wrong-secret-0815' } }).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(AuthenticationError);
    expect(proxy.commands.slice(1)).to.deep.equal(['saslContinue']);
    expect(inspect(error, { depth: 10, showHidden: true })).to.not.include('wrong-secret-0815');
    expect(await eventually(() => proxy.sockets.closed === 1)).to.equal(true);
  });

  describe('a hostile speculative reply fails with AuthenticationError and closes the socket', function () {
    /** Establishes through the proxy, the hello reply's speculativeAuthenticate changed by `change`. */
    async function withSpeculativeReply(change: (answer: Document, hello: Document) => unknown): Promise<unknown> {
      proxy.hooks = {
        reply: (reply, command) => {
          if (command.speculativeAuthenticate === undefined || reply.speculativeAuthenticate === undefined) return reply;
          return { ...reply, speculativeAuthenticate: change(reply.speculativeAuthenticate, command) };
        },
      };
      const error = await establishOne(proxy.address, options).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(AuthenticationError);
      expect(inspect(error, { depth: 10, showHidden: true })).to.not.include(credentials.password);
      expect(await eventually(() => proxy.sockets.closed === 1), 'the client closed the socket').to.equal(true);
      return error;
    }

    it('a nonce that does not extend the client nonce: nothing more is sent', async function () {
      const error = await withSpeculativeReply((answer) => ({
        ...answer,
        payload: binary(text(answer.payload).replace(/^r=[^,]{8}/, 'r=AAAAAAAA')),
      }));
      expect((error as Error).message).to.include('the server nonce does not extend the client nonce');
      expect(proxy.commands).to.have.length(1);
    });

    it('no conversationId: nothing more is sent', async function () {
      const error = await withSpeculativeReply(({ conversationId: _id, ...answer }) => answer);
      expect((error as Error).message).to.include('no conversationId');
      expect(proxy.commands).to.have.length(1);
    });

    it('not a document', async function () {
      const error = await withSpeculativeReply(() => 'r=abc');
      expect((error as Error).message).to.include('speculativeAuthenticate of the handshake reply is not a document');
      expect(proxy.commands).to.have.length(1);
    });

    it('an iteration count below 4096', async function () {
      const error = await withSpeculativeReply((answer) => ({ ...answer, payload: binary(text(answer.payload).replace(/i=\d+/, 'i=4095')) }));
      expect((error as Error).message).to.include('fewer than the minimum 4096');
    });

    it('a server signature that does not verify', async function () {
      proxy.hooks = {
        reply: (reply, command) =>
          command.saslContinue === 1 && text(reply.payload).startsWith('v=') ? { ...reply, payload: binary(`v=${Buffer.alloc(32, 1).toString('base64')}`) } : reply,
      };
      const error = await establishOne(proxy.address, options).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(AuthenticationError);
      expect((error as Error).message).to.include('the server signature does not verify');
      expect(proxy.commands.slice(1)).to.deep.equal(['saslContinue']);
      expect(await eventually(() => proxy.sockets.closed === 1)).to.equal(true);
    });
  });
});

// Embedded endpoint only: these need a user with SCRAM-SHA-1 credentials only, a server before 4.4, per-server SCRAM
// counts, or are about the endpoint's own answers; MONGODB_URI's server offers none of these.
describe('speculative authentication with the embedded endpoint (mechanisms, older servers)', function () {
  let server: EmbeddedServer;
  let proxy: WireProxy;
  before(async function () {
    server = await new EmbeddedServer({
      users: [
        { username: 'both', password: PASSWORD },
        { username: 'sha1', password: PASSWORD, mechanisms: ['SCRAM-SHA-1'] },
      ],
    }).start();
    proxy = await startWireProxy(server.address);
  });
  after(async function () {
    await proxy.stop();
    await server.stop();
  });
  beforeEach(function () {
    proxy.commands.length = 0;
    proxy.hooks = {};
  });

  it('speculates with SCRAM-SHA-1 when the credentials set it', async function () {
    const speculated: Document[] = [];
    proxy.hooks = { request: (command) => (command.speculativeAuthenticate && speculated.push(command.speculativeAuthenticate), command) };
    const connection = await establishOne(proxy.address, { credentials: { username: 'sha1', password: PASSWORD, mechanism: 'SCRAM-SHA-1' } });
    expect(await authenticatedUsers(connection)).to.deep.equal(['admin.sha1']);
    connection.destroy();
    expect(speculated.map((s) => s.mechanism)).to.deep.equal(['SCRAM-SHA-1']);
    expect(proxy.commands.slice(1, 2)).to.deep.equal(['saslContinue']);
  });

  it('negotiating, speculates with SCRAM-SHA-256; a user with only SCRAM-SHA-1 gets no answer and the whole SCRAM-SHA-1 conversation', async function () {
    const generation = server.usersGeneration;
    const before = server.scramConversations(generation);
    const speculated: Document[] = [];
    proxy.hooks = { request: (command) => (command.speculativeAuthenticate && speculated.push(command.speculativeAuthenticate), command) };
    const connection = await establishOne(proxy.address, { credentials: { username: 'sha1', password: PASSWORD } });
    expect(await authenticatedUsers(connection)).to.deep.equal(['admin.sha1']);
    connection.destroy();
    expect(speculated.map((s) => s.mechanism)).to.deep.equal(['SCRAM-SHA-256']);
    expect(proxy.commands.slice(1, 3)).to.deep.equal(['saslStart', 'saslContinue']);
    const after = server.scramConversations(generation);
    expect({ started: after.started - before.started, succeeded: after.succeeded - before.succeeded, failed: after.failed - before.failed })
      .to.deep.equal({ started: 1, succeeded: 1, failed: 0 });
  });

  it('an endpoint announcing maxWireVersion 8 (4.2) ignores speculativeAuthenticate, and the whole conversation runs', async function () {
    const old = await new EmbeddedServer({ maxWireVersion: 8, users: [{ username: 'both', password: PASSWORD }] }).start();
    const oldProxy = await startWireProxy(old.address);
    try {
      const connection = await establishOne(oldProxy.address, { credentials: { username: 'both', password: PASSWORD } });
      expect(await authenticatedUsers(connection)).to.deep.equal(['admin.both']);
      connection.destroy();
      expect(oldProxy.commands.slice(0, 3)).to.deep.equal(['isMaster', 'saslStart', 'saslContinue']);
    } finally {
      await oldProxy.stop();
      await old.stop();
    }
  });

  it('the endpoint answers speculativeAuthenticate as mongod: without ok, and not at all without db or for an unknown user', async function () {
    const start = (over: Document = {}): Document => ({
      saslStart: 1,
      mechanism: 'SCRAM-SHA-256',
      payload: binary('n,,n=both,r=abcdefghijklmnop'),
      options: { skipEmptyExchange: true },
      db: 'admin',
      ...over,
    });
    const hello = async (speculativeAuthenticate: unknown): Promise<Document> => {
      const connection = await establishOne(server.address, {});
      try {
        return await connection.command('admin', { hello: 1, speculativeAuthenticate });
      } finally {
        connection.destroy();
      }
    };
    const answered = (await hello(start())).speculativeAuthenticate;
    expect(answered).to.have.keys('conversationId', 'done', 'payload');
    expect(answered).to.include({ conversationId: 1, done: false });
    expect(text(answered.payload)).to.match(/^r=abcdefghijklmnop.+,s=.+,i=15000$/);
    const { db: _db, ...withoutDb } = start();
    for (const request of [withoutDb, start({ db: 'other' }), start({ payload: binary('n,,n=nobody,r=abc') }), start({ mechanism: 'PLAIN' }), 'saslStart']) {
      expect(await hello(request), inspect(request)).to.not.have.property('speculativeAuthenticate');
    }
  });
});
