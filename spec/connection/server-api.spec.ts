/**
 * The Stable API: the serverApi option (its checks, its immutability, never from a URI), the API fields on every
 * command a connection sends (handshake, authentication, monitoring, the user's commands, getMore), `hello` in place
 * of the legacy hello, and a server without hello. Integration tests run against MONGODB_URI's server when it is set
 * (through a proxy that reads the commands), else the embedded endpoint.
 */
import { expect } from 'chai';
import { Binary, calculateObjectSize, serialize, type Document } from 'bson';
import { firstValueFrom, from } from 'rxjs';
import {
  connect,
  connectionFactory,
  ConnectionPool,
  InvalidOptionError,
  Monitor,
  MongoCompatibilityError,
  MongoServerError,
  ServerApiVersion,
  type Client,
  type ConnectionOptions,
  type ServerApi,
  type ServerHeartbeatEvent,
} from '../../lib';
import { EmbeddedServer } from '../../lib/testing';
import { parseConnectionString } from '../../lib/connection-string';
import { bsonElements, decodeOpMsg, encodeOpMsg } from '../../lib/connection/op-msg';
import { eventually, startTestEndpoint, type TestEndpoint } from '../support/endpoint';
import { startWireProxy, type WireProxy } from '../support/wire-proxy';

const API_FIELDS = ['apiVersion', 'apiStrict', 'apiDeprecationErrors'];

/** The API fields a command carried, as a document (only those it held). */
function apiOf(command: Document): Document {
  return Object.fromEntries(Object.entries(command).filter(([k]) => API_FIELDS.includes(k)));
}

/** Establishes one connection to `address` with `options`. */
function establish(address: string, options: ConnectionOptions) {
  const [host, port] = address.split(':');
  const factory = connectionFactory({ ...options, host, port: Number(port) });
  return firstValueFrom(from(factory({ id: 1, generation: 0, address, signal: new AbortController().signal })));
}

describe('Stable API (serverApi)', function () {
  describe('the option', function () {
    it('ServerApiVersion is the frozen { v1: "1" }', function () {
      expect(ServerApiVersion).to.deep.equal({ v1: '1' });
      expect(Object.isFrozen(ServerApiVersion)).to.equal(true);
    });

    const invalid: [unknown, string, RegExp][] = [
      ['2', 'serverApi', /serverApi must be one of the API versions '1' \(ServerApiVersion\), or a \{ version/],
      [1, 'serverApi', /serverApi must be a \{ version: '1'/],
      [null, 'serverApi', /serverApi must be/],
      [{}, 'serverApi.version', /one of the API versions '1'/],
      [{ version: '2' }, 'serverApi.version', /serverApi\.version: "2" .*'1'/],
      [{ version: 1 }, 'serverApi.version', /one of the API versions '1'/],
      [{ version: '1', strict: 'true' }, 'serverApi.strict', /a boolean/],
      [{ version: '1', deprecationErrors: 1 }, 'serverApi.deprecationErrors', /a boolean/],
      [{ version: '1', stric: true }, 'serverApi.stric', /did you mean strict/],
    ];
    for (const [value, option, message] of invalid) {
      it(`refuses ${JSON.stringify(value)} naming ${option}, in every front end`, function () {
        const fronts: [string, () => unknown][] = [
          ['connectionFactory', () => connectionFactory({ host: 'h', port: 1, serverApi: value as ServerApi })],
          ['ConnectionPool', () => new ConnectionPool({ address: 'h:1', connectionOptions: { serverApi: value as ServerApi } })],
          ['Monitor', () => new Monitor({ address: 'h:1', connectionOptions: { serverApi: value as ServerApi } })],
          ['connect()', () => connect('mongodb://h:1', { serverApi: value as ServerApi })],
        ];
        for (const [front, make] of fronts) {
          let error: unknown;
          try {
            make();
          } catch (e) {
            error = e;
          }
          expect(error, front).to.be.instanceOf(InvalidOptionError);
          expect((error as InvalidOptionError).option, front).to.match(new RegExp(`(^|\\.)${option.replace('.', '\\.')}$`));
          expect((error as Error).message, front).to.match(message);
        }
      });
    }

    it('takes the version alone, as the official driver does: serverApi: ServerApiVersion.v1 is { version: "1" }', async function () {
      const server = await new EmbeddedServer({ requireApiVersion: true }).start();
      try {
        const connection = await establish(server.address, { serverApi: ServerApiVersion.v1 });
        expect(connection.serverApi).to.deep.equal({ version: '1' });
        expect(server.clientConnections()[0].handshakeApiParameters).to.deep.equal({ apiVersion: '1' });
        connection.destroy();
      } finally {
        await server.stop();
      }
    });

    it('is copied once given: changing the object afterwards changes nothing sent', async function () {
      const server = await new EmbeddedServer({ requireApiVersion: true }).start();
      try {
        const serverApi = { version: '1', strict: true } as { version: '1'; strict?: boolean };
        const [host, port] = server.address.split(':');
        const factory = connectionFactory({ host, port: Number(port), serverApi });
        serverApi.strict = false;
        (serverApi as { version: string }).version = '2';
        const connection = await firstValueFrom(from(factory({ id: 1, generation: 0, address: server.address, signal: new AbortController().signal })));
        try {
          expect(connection.serverApi).to.deep.equal({ version: '1', strict: true });
          expect(Object.isFrozen(connection.serverApi)).to.equal(true);
          expect(() => ((connection.serverApi as { version: string }).version = '2')).to.throw(TypeError);
          await connection.command('admin', { ping: 1 });
          expect(server.clientConnections()[0].apiParameters.ping).to.deep.equal({ apiVersion: '1', apiStrict: true });
        } finally {
          connection.destroy();
        }
      } finally {
        await server.stop();
      }
    });

    it('is read once per front end: each field of the given object is read once, and one client\'s connections all declare what was read', async function () {
      const reads: Record<string, number> = {};
      const counted = (): ServerApi =>
        new Proxy({ version: '1', strict: true, deprecationErrors: false } as ServerApi, {
          get(target, key, receiver) {
            if (typeof key === 'string') reads[key] = (reads[key] ?? 0) + 1;
            return Reflect.get(target, key, receiver) as unknown;
          },
        });
      const fronts: [string, () => { close?: () => unknown }][] = [
        ['connectionFactory', () => (connectionFactory({ host: 'h', port: 1, serverApi: counted() }), {})],
        ['ConnectionPool', () => new ConnectionPool({ address: 'h:1', connectionOptions: { serverApi: counted() } })],
        ['Monitor', () => new Monitor({ address: 'h:1', connectionOptions: { serverApi: counted() } })],
        ['connect() (two hosts)', () => connect('mongodb://h:1,h:2/', { serverApi: counted() })],
      ];
      for (const [front, make] of fronts) {
        for (const key of Object.keys(reads)) delete reads[key];
        const made = make();
        void made.close?.();
        expect({ version: reads.version, strict: reads.strict, deprecationErrors: reads.deprecationErrors }, front).to.deep.equal({ version: 1, strict: 1, deprecationErrors: 1 });
      }
      // A getter that answers otherwise once read: every connection of the client (its pool's, its monitor's and
      // RTT's) declares what the first reading said, as one client must declare one version.
      const server = await new EmbeddedServer({ requireApiVersion: true }).start();
      let strictReads = 0;
      const changing = {
        version: '1' as const,
        get strict() {
          return ++strictReads === 1;
        },
      };
      const client = connect(`mongodb://${server.address}/?heartbeatFrequencyMS=500`, { serverApi: changing });
      try {
        await client.command('admin', { ping: 1 });
        const infos = server.clientConnections();
        expect(infos.length, 'a monitoring and a pooled connection at least').to.be.at.least(2);
        for (const info of infos) expect(info.handshakeApiParameters).to.deep.equal({ apiVersion: '1', apiStrict: true });
      } finally {
        await client.close();
        await server.stop();
      }
    });
  });

  describe('the encoding', function () {
    it('appends the declared fields, encoded once, to the body document without re-encoding it; the limits count them', function () {
      const extra = bsonElements({ apiVersion: '1', apiStrict: true });
      const message = encodeOpMsg(7, 0, { find: 'c', $db: 'db' }, 0, undefined, undefined, extra);
      const plain = encodeOpMsg(7, 0, { find: 'c', $db: 'db', apiVersion: '1', apiStrict: true });
      expect(message.equals(plain), 'the same bytes as the whole document encoded at once').to.equal(true);
      const decoded = decodeOpMsg(message.subarray(16));
      expect(decoded.document).to.deep.equal({ find: 'c', $db: 'db', apiVersion: '1', apiStrict: true });
      const size = serialize({ find: 'c', $db: 'db' }).length;
      // A document just within maxBsonObjectSize + 16 KiB alone is refused once the fields take it over.
      const limits = { maxBsonObjectSize: size - 16 * 1024 + extra.length - 1, maxMessageSizeBytes: 48_000_000 };
      expect(() => encodeOpMsg(7, 0, { find: 'c', $db: 'db' }, 0, limits)).not.to.throw();
      expect(() => encodeOpMsg(7, 0, { find: 'c', $db: 'db' }, 0, limits, undefined, extra)).to.throw(/the command document is \d+ bytes/);
    });
    it('appends them to the body document only: document sequences after it keep their place and bytes', function () {
      const extra = bsonElements({ apiVersion: '1', apiDeprecationErrors: true });
      const sequences = new Map([['documents', [{ _id: 1 }, { _id: 2, x: 'y' }]]]);
      const message = encodeOpMsg(7, 0, { insert: 'c', $db: 'db' }, 0, undefined, sequences, extra);
      const plain = encodeOpMsg(7, 0, { insert: 'c', $db: 'db', apiVersion: '1', apiDeprecationErrors: true }, 0, undefined, sequences);
      expect(message.equals(plain), 'the same bytes as the whole document encoded at once').to.equal(true);
      const decoded = decodeOpMsg(message.subarray(16));
      expect(decoded.document).to.deep.equal({ insert: 'c', $db: 'db', apiVersion: '1', apiDeprecationErrors: true });
      expect(decoded.sequences).to.deep.equal(new Map([['documents', [{ _id: 1 }, { _id: 2, x: 'y' }]]]));
    });
  });

  describe('the encoding of a command beyond the BSON library\'s buffer', function () {
    it('names the size with the declared fields counted, as for any other command too large', function () {
      const extra = bsonElements({ apiVersion: '1', apiStrict: true });
      const limits = { maxBsonObjectSize: 16 * 1024 * 1024, maxMessageSizeBytes: 48_000_000 };
      // A Binary the BSON library cannot fit (it throws), and a string it would cut short (refused after the fact).
      for (const big of [new Binary(Buffer.alloc(18 * 1024 * 1024)), 'x'.repeat(18 * 1024 * 1024)]) {
        const document = { insert: 'c', $db: 'db', big };
        const size = calculateObjectSize(document) + extra.length;
        expect(() => encodeOpMsg(7, 0, document, 0, limits, undefined, extra)).to.throw(`the command document is ${size} bytes`);
      }
    });
  });

  describe('the connection string', function () {
    it('refuses serverApi in a URI (any case), as the official driver does', function () {
      for (const uri of ['mongodb://h/?serverApi=1', 'mongodb://h/?serverapi=1']) {
        expect(() => parseConnectionString(uri), uri).to.throw(InvalidOptionError, /a Stable API version is declared only by the serverApi option/);
        expect(() => connect(uri), uri).to.throw(InvalidOptionError, /serverApi option of connect\(\)/);
      }
    });

    it('ignores apiVersion, apiStrict and apiDeprecationErrors in a URI with a warning: no version is declared', function () {
      const parsed = parseConnectionString('mongodb://h/?apiVersion=1&apiStrict=true&apiDeprecationErrors=true');
      expect(parsed.connectionOptions).not.to.have.property('serverApi');
      expect(parsed.warnings).to.have.length(3);
      for (const warning of parsed.warnings) expect(warning).to.match(/is ignored: a Stable API version is declared only by the serverApi option of connect\(\), never by the connection string/);
    });
  });

  describe('on the wire', function () {
    let endpoint: TestEndpoint;
    let proxy: WireProxy;
    let sent: Document[];

    beforeEach(async function () {
      endpoint = await startTestEndpoint();
      if (endpoint.connectionOptions.tls) {
        await endpoint.stop();
        console.log('      skipped: MONGODB_URI uses TLS, which the proxy reading the commands cannot read');
        this.skip();
      }
      proxy = await startWireProxy(endpoint.address);
      sent = [];
      proxy.hooks = { request: (command) => (sent.push(command), command) };
    });
    afterEach(async function () {
      await proxy?.stop();
      await endpoint?.stop();
    });

    it('declared: the handshake is hello (never isMaster) with apiVersion only, and so is every command, getMore and commitTransaction included; the command object is not changed', async function () {
      const connection = await establish(proxy.address, { ...endpoint.connectionOptions, serverApi: { version: ServerApiVersion.v1 } });
      try {
        const ping = { ping: 1 };
        await connection.command('admin', ping);
        expect(ping, 'the caller\'s command').to.deep.equal({ ping: 1 });
        // A getMore of a cursor that does not exist: the server refuses it, but only what it carried matters here.
        await connection.command('admin', { getMore: 1, collection: 'c' }).catch(() => undefined);
        // Transaction commands too (Stable API spec, "Transactions"): no transaction here, so the server may refuse it.
        await connection.command('admin', { commitTransaction: 1 }).catch(() => undefined);
      } finally {
        connection.destroy();
      }
      expect(Object.keys(sent[0])[0]).to.equal('hello');
      expect(sent[0]).not.to.have.property('helloOk');
      expect(proxy.commands).not.to.include('isMaster');
      expect(proxy.commands.filter((c) => c.startsWith('OP_')), 'only OP_MSG').to.deep.equal([]);
      expect(sent.length).to.be.at.least(3);
      for (const command of sent) expect(apiOf(command), Object.keys(command)[0]).to.deep.equal({ apiVersion: '1' });
      expect(proxy.commands).to.include.members(['ping', 'getMore', 'commitTransaction']);
    });

    it('declared with strict and deprecationErrors false: both are sent, as given, on every command', async function () {
      const connection = await establish(proxy.address, { ...endpoint.connectionOptions, serverApi: { version: '1', strict: false, deprecationErrors: false } });
      try {
        await connection.command('admin', { ping: 1 });
      } finally {
        connection.destroy();
      }
      for (const command of sent) expect(apiOf(command), Object.keys(command)[0]).to.deep.equal({ apiVersion: '1', apiStrict: false, apiDeprecationErrors: false });
    });

    it('declared with strict true: apiStrict true on every command (the handshake, hello, is in API version 1)', async function () {
      const connection = await establish(proxy.address, { ...endpoint.connectionOptions, serverApi: { version: '1', strict: true } });
      try {
        await connection.command('admin', { ping: 1 });
      } finally {
        connection.destroy();
      }
      for (const command of sent) expect(apiOf(command), Object.keys(command)[0]).to.deep.equal({ apiVersion: '1', apiStrict: true });
    });

    it('not declared: no API field on any command, and the handshake stays the legacy hello with helloOk', async function () {
      const connection = await establish(proxy.address, endpoint.connectionOptions);
      try {
        await connection.command('admin', { ping: 1 });
        expect(connection.serverApi).to.equal(undefined);
      } finally {
        connection.destroy();
      }
      expect(Object.keys(sent[0])[0]).to.equal('isMaster');
      for (const command of sent) expect(apiOf(command), Object.keys(command)[0]).to.deep.equal({});
    });

    it('the command document is not inspected: the declared fields follow its own fields and $db, whatever it holds', async function () {
      const connection = await establish(proxy.address, { ...endpoint.connectionOptions, serverApi: { version: '1' } });
      try {
        const ping = { ping: 1, apiStrict: false };
        await connection.command('admin', ping);
        expect(ping).to.deep.equal({ ping: 1, apiStrict: false });
      } finally {
        connection.destroy();
      }
      expect(Object.keys(sent.at(-1)!)).to.deep.equal(['ping', 'apiStrict', '$db', 'apiVersion']);
      expect(apiOf(sent.at(-1)!)).to.deep.equal({ apiStrict: false, apiVersion: '1' });
    });

    it('not declared: a server that does not answer helloOk is monitored with the legacy hello (server monitoring spec), a refusal of it is no compatibility error', async function () {
      this.timeout(5000);
      proxy.hooks.reply = (reply) => {
        const { helloOk: _, ...rest } = reply;
        return rest;
      };
      const monitor = new Monitor({ address: proxy.address, heartbeatFrequencyMS: 500, serverMonitoringMode: 'poll', connectionOptions: { ...endpoint.connectionOptions, connectTimeoutMS: 2000 } });
      monitor.start();
      try {
        expect(await eventually(() => sent.length >= 3, 3000)).to.equal(true);
      } finally {
        monitor.close();
      }
      expect(new Set(proxy.commands)).to.deep.equal(new Set(['isMaster']));
      proxy.hooks.reply = (reply, command) =>
        Object.keys(command)[0] === 'isMaster' ? { ok: 0, errmsg: "no such command: 'isMaster'", code: 59, codeName: 'CommandNotFound' } : reply;
      const error = await establish(proxy.address, endpoint.connectionOptions).catch((e: unknown) => e);
      expect(error).not.to.be.instanceOf(MongoCompatibilityError);
      expect(String((error as Error).message)).to.include("no such command: 'isMaster'");
    });

    it('a server that does not know hello fails the establishment with MongoCompatibilityError (cause: its CommandNotFound)', async function () {
      proxy.hooks.reply = (reply, command) =>
        Object.keys(command)[0] === 'hello' ? { ok: 0, errmsg: "no such command: 'hello'", code: 59, codeName: 'CommandNotFound' } : reply;
      const error = await establish(proxy.address, { ...endpoint.connectionOptions, serverApi: { version: '1' } }).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(MongoCompatibilityError);
      expect((error as Error).message).to.match(/does not support the hello command, which a declared Stable API version \(serverApi version 1\) requires/);
      expect((error as Error).cause).to.be.instanceOf(MongoServerError);
      expect(((error as Error).cause as MongoServerError).code).to.equal(59);
      expect(proxy.commands).not.to.include('isMaster');
    });

    for (const serverMonitoringMode of ['poll', 'stream'] as const) {
      it(`a ${serverMonitoringMode} monitor (and its RTT task) sends only hello, each with the API fields, though the server never said helloOk`, async function () {
        this.timeout(5000);
        const monitor = new Monitor({
          address: proxy.address,
          heartbeatFrequencyMS: 500,
          serverMonitoringMode,
          connectionOptions: { ...endpoint.connectionOptions, connectTimeoutMS: 2000, serverApi: { version: '1', deprecationErrors: true } },
        });
        const heartbeats: ServerHeartbeatEvent[] = [];
        monitor.heartbeats$.subscribe((e) => heartbeats.push(e));
        monitor.start();
        try {
          // The handshake, then at least two checks (and, streaming, an RTT round on a second connection).
          expect(await eventually(() => sent.length >= 4, 3000)).to.equal(true);
        } finally {
          monitor.close();
        }
        // Streaming, the check waiting when the monitor closes fails with MonitorClosedError: no other failure.
        const failures = heartbeats.filter((e) => e.type === 'ServerHeartbeatFailed' && e.error.name !== 'MonitorClosedError');
        expect(failures).to.deep.equal([]);
        expect(new Set(proxy.commands)).to.deep.equal(new Set(['hello']));
        for (const command of sent) expect(apiOf(command)).to.deep.equal({ apiVersion: '1', apiDeprecationErrors: true });
        if (serverMonitoringMode === 'stream') expect(proxy.sockets.accepted, 'the monitoring and the RTT connections').to.equal(2);
      });
    }

    it('a monitor of a server that does not know hello publishes a failed heartbeat (the server is Unknown) with MongoCompatibilityError', async function () {
      proxy.hooks.reply = (reply, command) =>
        Object.keys(command)[0] === 'hello' ? { ok: 0, errmsg: "no such command: 'hello'", code: 59, codeName: 'CommandNotFound' } : reply;
      const monitor = new Monitor({ address: proxy.address, heartbeatFrequencyMS: 500, connectionOptions: { ...endpoint.connectionOptions, serverApi: { version: '1' } } });
      const heartbeats: ServerHeartbeatEvent[] = [];
      monitor.heartbeats$.subscribe((e) => heartbeats.push(e));
      monitor.start();
      try {
        expect(await eventually(() => heartbeats.some((e) => e.type === 'ServerHeartbeatFailed'))).to.equal(true);
      } finally {
        monitor.close();
      }
      const failed = heartbeats.find((e) => e.type === 'ServerHeartbeatFailed') as Extract<ServerHeartbeatEvent, { type: 'ServerHeartbeatFailed' }>;
      expect(failed.error).to.be.instanceOf(MongoCompatibilityError);
      expect(proxy.commands).not.to.include('isMaster');
    });
  });

  describe('against a server that requires an API version (requireApiVersion)', function () {
    let server: EmbeddedServer;
    let client: Client | undefined;
    beforeEach(async function () {
      server = await new EmbeddedServer({ requireApiVersion: true, users: [{ username: 'alice', password: 'pw', mechanisms: ['SCRAM-SHA-256'] }] }).start();
    });
    afterEach(async function () {
      await client?.close();
      client = undefined;
      await server.stop();
    });
    const credentials = { username: 'alice', password: 'pw' };

    it('without a declared version, the handshake is refused (498870)', async function () {
      const error = await establish(server.address, { credentials }).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(MongoServerError);
      expect((error as MongoServerError).code).to.equal(498870);
    });

    it('with one, a SCRAM connection is established: the handshake (its speculative saslStart) and saslContinue carry apiVersion', async function () {
      const connection = await establish(server.address, { credentials, serverApi: { version: '1', strict: true } });
      try {
        const info = server.clientConnections()[0];
        expect(info.user).to.equal('admin.alice');
        expect(info.handshakeApiParameters).to.deep.equal({ apiVersion: '1', apiStrict: true });
        expect(info.apiParameters.saslcontinue).to.deep.equal({ apiVersion: '1', apiStrict: true });
        await connection.command('admin', { ping: 1 });
        expect(info.apiParameters.ping).to.deep.equal({ apiVersion: '1', apiStrict: true });
      } finally {
        connection.destroy();
      }
    });

    it('with one, against a server that ignores speculative authentication (4.2), saslStart carries apiVersion too', async function () {
      const older = await new EmbeddedServer({ requireApiVersion: true, maxWireVersion: 8, users: [{ username: 'alice', password: 'pw' }] }).start();
      try {
        const connection = await establish(older.address, { credentials, serverApi: { version: '1', deprecationErrors: true } });
        const [info] = older.clientConnections();
        connection.destroy();
        expect(Object.keys(info.apiParameters).sort()).to.deep.equal(['hello', 'saslcontinue', 'saslstart']);
        for (const api of Object.values(info.apiParameters)) expect(api).to.deep.equal({ apiVersion: '1', apiDeprecationErrors: true });
      } finally {
        await older.stop();
      }
    });

    it('connect() with serverApi: the pools and monitors work, command() succeeds', async function () {
      client = connect(`mongodb://alice:pw@${server.address}/?heartbeatFrequencyMS=500`, { serverApi: { version: '1' } });
      const reply = await client.command('admin', { ping: 1 });
      expect(reply.ok).to.equal(1);
      const infos = server.clientConnections();
      expect(infos.length, 'a monitoring and a pooled connection at least').to.be.at.least(2);
      for (const info of infos) {
        expect(info.handshakeApiParameters).to.deep.equal({ apiVersion: '1' });
        expect(Object.keys(info.apiParameters)).not.to.include('ismaster');
      }
    });
  });
});
