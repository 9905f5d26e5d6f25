/**
 * Establishment over real sockets against embedded endpoints configured for each case: authentication, TLS,
 * compression, timeouts and the backpressure labels.
 */
import { expect } from 'chai';
import * as net from 'node:net';
import * as path from 'node:path';
import { inspect } from 'node:util';
import { ObjectId } from 'bson';
import { firstValueFrom, from } from 'rxjs';
import { AuthenticationError, ConnectionPool, InvalidOptionError, MongoCredentials, MongoNetworkError, MongoNetworkTimeoutError, MongoServerError, connectionFactory, ErrorLabel, type Connection, type ConnectionPoolEvent } from '../../lib';
import { EmbeddedServer } from '../../lib/testing';
import { isRefusedConnect } from '../../lib/connection/connect';
import { spyOnDerivations, ticker } from '../support/derivations';
import { blockEventLoop } from '../support/blocked-loop';
import { occupyThreadPool } from '../support/busy-thread-pool';
import { closedPort, establishOne, eventually } from '../support/endpoint';
import { startWireProxy, type WireProxy } from '../support/wire-proxy';

const fixtures = path.resolve(__dirname, '../fixtures/tls');
const file = (name: string): string => path.join(fixtures, name);

describe('connectionFactory (establishment)', function () {
  describe('the Endpoint', function () {
    // The rules an address string follows (connection string spec, "Host" and "Port"), checked when the factory is
    // made: otherwise { host: 'localhost' } dials a socket file named localhost, and [::1] or port 0 fail only at
    // connect time, with ENOENT, ENOTFOUND or ECONNREFUSED rather than an error naming the option.
    const bad: [Record<string, unknown>, string, RegExp][] = [
      [{ host: 'localhost' }, 'port', /port must be an integer from 1 to 65535 for host "localhost" \(only a Unix domain socket path/],
      [{ host: 'db.sock' }, 'port', /for host "db.sock" \(only a Unix domain socket path, with a "\/" and ending in .sock, has no port/],
      [{ host: 'db.example.com:27017' }, 'port', /for host "db.example.com:27017"/],
      [{ host: '127.0.0.1', port: 0 }, 'port', /Invalid port: 0 \(port must be an integer from 1 to 65535/],
      [{ host: '/tmp/mongodb-27017.sock', port: 27017 }, 'port', /port must be absent: host "\/tmp\/mongodb-27017.sock" is a Unix domain socket path/],
      [{ host: '[::1]', port: 27017 }, 'host', /Invalid host: "\[::1\]" \(host must be a host name, an IPv4 address or an IPv6 address without brackets/],
      [{ host: 'a:b', port: 27017 }, 'host', /Invalid host: "a:b"/],
      [{ host: 'db example', port: 27017 }, 'host', /Invalid host/],
      [{ host: '010.0.0.1', port: 27017 }, 'host', /Invalid host: "010.0.0.1" \(host must be an IPv4 address in dotted-decimal form/],
      [{ host: '', port: 27017 }, 'host', /Invalid host: "" \(host must be a non-empty host name, IP address or Unix domain socket path\)/],
      [{ host: 27017 }, 'host', /Invalid host: 27017 \(host must be a non-empty host name/],
      [{ port: 27017 }, 'host', /Invalid host: undefined \(host must be a non-empty host name/],
    ];
    for (const [endpoint, option, message] of bad) {
      it(`rejects ${JSON.stringify(endpoint)} with an InvalidOptionError for ${option}`, function () {
        expect(() => connectionFactory(endpoint as never)).to.throw(InvalidOptionError, message).with.property('option', option);
      });
    }

    it('names an unknown option as given, with the closest known one', function () {
      expect(() => connectionFactory({ host: 'db', port: 27017, conectTimeoutMS: 1 } as never)).to.throw(
        InvalidOptionError,
        /^Unknown option conectTimeoutMS of connectionFactory: did you mean connectTimeoutMS\?$/,
      );
    });

    it('accepts a host name (one ending in .sock too, as parseAddress reads db.sock:27017), an IPv4 or IPv6 address with a port, and a socket path without one', function () {
      for (const endpoint of [{ host: 'db.example.com', port: 1 }, { host: '10.0.0.7', port: 65535 }, { host: '::1', port: 27017 }, { host: 'fe80::1%eth0', port: 27017 }, { host: 'db.sock', port: 27017 }, { host: '/tmp/mongodb-27017.sock' }, { host: 'run/db 2.sock' }]) {
        expect(connectionFactory(endpoint), JSON.stringify(endpoint)).to.be.a('function');
      }
    });
  });

  describe('authentication', function () {
    let server: EmbeddedServer;
    before(async function () {
      server = await new EmbeddedServer({
        users: [
          { username: 'both', password: 'pencil' },
          { username: 'sha1', password: 'sha1pass', mechanisms: ['SCRAM-SHA-1'] },
          { username: 'app', password: 'ÅpP\u00ADle', db: 'appdb', mechanisms: ['SCRAM-SHA-256'] },
        ],
      }).start();
    });
    after(() => server.stop());

    it('negotiates SCRAM-SHA-256 when the server lists it, and authenticates', async function () {
      let mechanism: unknown;
      server.handle('whoami', (_cmd, client) => ({ ok: 1, user: client.user, mechanism: client.conversation?.mechanism }));
      const c = await establishOne(server.address, { credentials: { username: 'both', password: 'pencil' } });
      const reply = await c.command('admin', { whoami: 1 });
      mechanism = reply.mechanism;
      expect(reply.user).to.equal('admin.both');
      expect(mechanism).to.equal('SCRAM-SHA-256');
      c.destroy();
    });

    it('falls back to SCRAM-SHA-1 when the user has only that mechanism', async function () {
      server.handle('whoami', (_cmd, client) => ({ ok: 1, mechanism: client.conversation?.mechanism }));
      const c = await establishOne(server.address, { credentials: { username: 'sha1', password: 'sha1pass' } });
      expect((await c.command('admin', { whoami: 1 })).mechanism).to.equal('SCRAM-SHA-1');
      c.destroy();
    });

    it('uses authSource, and SASLprep for SCRAM-SHA-256 passwords', async function () {
      const c = await establishOne(server.address, { credentials: { username: 'app', password: 'ÅpPle', source: 'appdb' } });
      expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
      c.destroy();
    });

    it('does not authenticate to an arbiter (RSArbiter: arbiterOnly with a setName), which holds no users', async function () {
      // An arbiter has no users: any SASL conversation with it fails, so the handshake ends after hello.
      // Embedded endpoint only: it plays the arbiter, which a test server (MONGODB_URI's) is not.
      const arbiter = await new EmbeddedServer().start();
      try {
        const hello = { ismaster: false, secondary: false, arbiterOnly: true, setName: 'rs0', helloOk: true, minWireVersion: 0, maxWireVersion: 25, ok: 1 };
        arbiter.handle('ismaster', () => hello);
        const c = await establishOne(arbiter.address, { credentials: { username: 'both', password: 'pencil' } });
        expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
        c.destroy();
        expect(arbiter.scramConversations()).to.deep.equal({ started: 0, succeeded: 0, failed: 0 });
        // arbiterOnly without a setName is no RSArbiter (SDAM): authentication still happens, and fails here.
        arbiter.handle('ismaster', () => ({ ...hello, setName: undefined }));
        const error = await establishOne(arbiter.address, { credentials: { username: 'both', password: 'pencil' } }).catch((e: unknown) => e);
        expect(error).to.be.instanceOf(AuthenticationError);
        // A replica set member that is no arbiter (a setName, arbiterOnly false) holds the users: it is authenticated.
        arbiter.handle('ismaster', () => ({ ...hello, arbiterOnly: false, secondary: true }));
        arbiter.setUsers([{ username: 'both', password: 'pencil' }]);
        const member = await establishOne(arbiter.address, { credentials: { username: 'both', password: 'pencil' } });
        member.destroy();
        expect(arbiter.scramConversations()).to.deep.equal({ started: 1, succeeded: 1, failed: 0 });
      } finally {
        await arbiter.stop();
      }
    });

    it('load-balanced: authenticates even when the hello reply says arbiterOnly with a setName (behind a load balancer the server is a LoadBalancer, never an RSArbiter)', async function () {
      const balanced = await new EmbeddedServer({ users: [{ username: 'both', password: 'pencil' }] }).start();
      try {
        balanced.handle('hello', () => ({ isWritablePrimary: false, arbiterOnly: true, setName: 'rs0', helloOk: true, serviceId: new ObjectId(), maxWireVersion: 25, ok: 1 }));
        const c = await establishOne(balanced.address, { loadBalanced: true, credentials: { username: 'both', password: 'pencil' } });
        c.destroy();
        expect(balanced.scramConversations()).to.deep.equal({ started: 1, succeeded: 1, failed: 0 });
      } finally {
        await balanced.stop();
      }
    });

    it('without credentials, commands that need authentication are refused', async function () {
      const c = await establishOne(server.address, {});
      const error = await c.command('admin', { listDatabases: 1 }).catch((e) => e);
      expect(error).to.be.instanceOf(MongoServerError);
      expect(error.code).to.equal(13);
      c.destroy();
    });

    it('a wrong password fails the checkout (connectionError) with an AuthenticationError that shows no password', async function () {
      const pool = new ConnectionPool({
        address: server.address,
        connectionOptions: { credentials: { username: 'both', password: 'wrong-secret-123' } },
      });
      const seen: ConnectionPoolEvent[] = [];
      pool.events$.subscribe((e) => seen.push(e));
      pool.ready();
      const error = (await pool.checkOut().then(
        () => expect.fail('authentication must fail'),
        (e: unknown) => e,
      )) as AuthenticationError;
      pool.close();
      expect(error).to.be.instanceOf(AuthenticationError);
      expect(error.hasErrorLabel('SystemOverloadedError')).to.equal(false);
      expect(seen.find((e) => e.type === 'ConnectionCheckOutFailed')).to.include({ reason: 'connectionError' });
      expect(seen.find((e) => e.type === 'ConnectionClosed')).to.include({ reason: 'error' });
      expect(seen.map((e) => e.type)).to.include('ConnectionPoolCleared'); // SDAM's rule for auth errors
      const everything = inspect([error, seen, pool], { depth: 10, showHidden: true });
      expect(everything).to.not.include('wrong-secret-123');
    });
  });

  describe('SCRAM key derivation within connectTimeoutMS', function () {
    const CEILING = 1_000_000; // the largest iteration count a client accepts
    let server: EmbeddedServer;
    /** The commands the server received, lower-cased. */
    let received: string[] = [];
    let unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown): void => {
      unhandled.push(reason);
    };
    let tick: ReturnType<typeof ticker>;

    before(async function () {
      server = await new EmbeddedServer({
        users: [
          { username: 'hostile', password: 'pencil', iterations: 30_000_000, mechanisms: ['SCRAM-SHA-256'] },
          { username: 'ceiling', password: 'pencil', iterations: CEILING, mechanisms: ['SCRAM-SHA-256'] },
          { username: 'usual', password: 'pencil', mechanisms: ['SCRAM-SHA-256'] },
        ],
      }).start();
      const match = server.failCommand.match.bind(server.failCommand);
      server.failCommand.match = (name, appName) => {
        received.push(name);
        return match(name, appName);
      };
      // Warm the code paths up, so that timings below measure the establishment only.
      (await establishOne(server.address, { credentials: { username: 'usual', password: 'pencil' } })).destroy();
    });
    after(() => server.stop());
    beforeEach(async function () {
      expect(await eventually(() => server.openConnections === 0)).to.equal(true);
      received = [];
      unhandled = [];
      process.on('unhandledRejection', onUnhandled);
      tick = ticker();
    });
    afterEach(async function () {
      tick.stop();
      await new Promise((resolve) => setTimeout(resolve, 10));
      process.off('unhandledRejection', onUnhandled);
      expect(unhandled).to.deep.equal([]);
    });

    it('the embedded endpoint refuses an iteration count that is not a positive integer', function () {
      for (const iterations of [0, -1, 1.5, Number.NaN]) {
        expect(() => new EmbeddedServer({ users: [{ username: 'u', password: 'p', iterations }] })).to.throw(InvalidOptionError, /iterations/);
      }
    });

    it('a server asking for 30,000,000 iterations fails authentication at once, naming the count and the limit', async function () {
      const creds = new MongoCredentials({ username: 'hostile', password: 'pencil' });
      const derivations = spyOnDerivations(creds, tick);
      const started = performance.now();
      const error = await establishOne(server.address, { credentials: creds }).catch((e) => e);
      const elapsed = performance.now() - started;
      expect(error).to.be.instanceOf(AuthenticationError);
      expect(error.message).to.equal(
        'Authentication failed for user "hostile" on "admin" with SCRAM-SHA-256: the server asked for 30000000 iterations, more than the maximum 1000000',
      );
      expect(error.hasErrorLabel('SystemOverloadedError')).to.equal(false);
      // Deriving 30,000,000 iterations takes some 6 s on or off the event loop: 2 s leaves a loaded machine's pauses
      // room.
      expect(elapsed).to.be.below(2000);
      expect(derivations).to.have.length(0);
      expect(received).to.not.include('saslcontinue');
      expect(await eventually(() => server.openConnections === 0, 2000)).to.equal(true); // the socket was closed
    });

    it('a derivation of 1,000,000 iterations runs off the event loop: connectTimeoutMS ends the establishment on time', async function () {
      const creds = new MongoCredentials({ username: 'ceiling', password: 'pencil' });
      const derivations = spyOnDerivations(creds, tick);
      const connectTimeoutMS = 50;
      const started = performance.now();
      const error = await establishOne(server.address, { credentials: creds, connectTimeoutMS }).catch((e) => e);
      const elapsed = performance.now() - started;
      expect(error).to.be.instanceOf(MongoNetworkTimeoutError);
      expect(error.message).to.match(/timed out after 50 ms \(during auth\)/);
      expect(elapsed).to.be.at.least(connectTimeoutMS - 1);
      // A timeout that waited for the derivation would come after it (0.2 s here, over 1 s on a loaded machine), which
      // `settled` below sees whatever the machine's speed; the bound leaves a loaded machine's pauses room.
      expect(elapsed).to.be.below(connectTimeoutMS + 350);
      expect(derivations).to.have.length(1);
      expect(derivations[0].settled).to.equal(false); // the timeout came while the key was still being derived
      expect(await eventually(() => server.openConnections === 0, 2000)).to.equal(true); // the socket was closed
      await derivations[0].done;
      expect(derivations[0].ticksWhileRunning).to.be.at.least(5); // timers kept firing during the derivation
      await new Promise((resolve) => setTimeout(resolve, 10));
      expect(received).to.not.include('saslcontinue'); // its result was discarded: no proof was sent
    });

    it('concurrent establishments with the same credentials derive the salted password once', async function () {
      const creds = new MongoCredentials({ username: 'usual', password: 'pencil' });
      const derivations = spyOnDerivations(creds, tick);
      const connections = await Promise.all([establishOne(server.address, { credentials: creds }), establishOne(server.address, { credentials: creds })]);
      expect(derivations).to.have.length(1);
      for (const c of connections) {
        expect(await c.command('admin', { listDatabases: 1 })).to.include({ ok: 1 });
        c.destroy();
      }
      expect(received.filter((name) => name === 'saslcontinue')).to.have.length(2);
    });

    it('unsubscribing while the key is being derived closes the socket at once, and nothing is sent or delivered later', async function () {
      const creds = new MongoCredentials({ username: 'ceiling', password: 'pencil' });
      const derivations = spyOnDerivations(creds, tick);
      const [host, port] = server.address.split(':');
      const factory = connectionFactory({ host, port: Number(port), credentials: creds });
      const seen: string[] = [];
      const subscription = from(factory({ id: 1, generation: 0, address: server.address, signal: new AbortController().signal })).subscribe({
        next: () => seen.push('next'),
        error: (e: Error) => seen.push(`error: ${e.message}`),
        complete: () => seen.push('complete'),
      });
      expect(await eventually(() => derivations.length === 1, 1000)).to.equal(true);
      subscription.unsubscribe();
      expect(await eventually(() => server.openConnections === 0, 2000)).to.equal(true);
      expect(derivations[0].settled).to.equal(false);
      await derivations[0].done;
      await new Promise((resolve) => setTimeout(resolve, 10));
      expect(seen).to.deep.equal([]);
      expect(received).to.not.include('saslcontinue');
    });

    it("the descriptor's signal aborting while the key is being derived fails the establishment and closes the socket", async function () {
      const creds = new MongoCredentials({ username: 'ceiling', password: 'pencil' });
      const derivations = spyOnDerivations(creds, tick);
      const [host, port] = server.address.split(':');
      const factory = connectionFactory({ host, port: Number(port), credentials: creds });
      const controller = new AbortController();
      const outcome = firstValueFrom(from(factory({ id: 1, generation: 0, address: server.address, signal: controller.signal }))).catch((e) => e);
      expect(await eventually(() => derivations.length === 1, 1000)).to.equal(true);
      const reason = new Error('pool closed');
      controller.abort(reason);
      const error = await outcome;
      expect(error).to.be.instanceOf(MongoNetworkError);
      expect(error.message).to.equal(`establishing a connection to ${server.address} was aborted (during auth)`);
      expect(error.cause).to.equal(reason);
      expect(error.errorLabels.size).to.equal(0);
      expect(derivations[0].settled).to.equal(false);
      expect(await eventually(() => server.openConnections === 0, 2000)).to.equal(true);
      await derivations[0].done;
      await new Promise((resolve) => setTimeout(resolve, 10));
      expect(received).to.not.include('saslcontinue');
    });
  });

  describe('TLS', function () {
    let server: EmbeddedServer;
    let mutual: EmbeddedServer;
    before(async function () {
      const fs = await import('node:fs');
      const key = fs.readFileSync(file('server.key'));
      const cert = fs.readFileSync(file('server.crt'));
      server = await new EmbeddedServer({ tls: { key, cert } }).start();
      mutual = await new EmbeddedServer({ tls: { key, cert, ca: fs.readFileSync(file('ca.pem')), requestCert: true } }).start();
    });
    after(async () => {
      await server.stop();
      await mutual.stop();
    });

    it('connects when the server certificate verifies against tlsCAFile', async function () {
      const c = await establishOne(server.address.replace('127.0.0.1', 'localhost'), { tls: true, tlsCAFile: file('ca.pem') });
      expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
      c.destroy();
    });

    it('fails against the wrong CA, without backpressure labels; tlsAllowInvalidCertificates accepts it', async function () {
      const error = await establishOne(server.address, { tlsCAFile: file('other-ca.pem') }).catch((e) => e);
      expect(error).to.be.instanceOf(MongoNetworkError);
      expect(error.hasErrorLabel('SystemOverloadedError')).to.equal(false);
      const c = await establishOne(server.address, { tlsCAFile: file('other-ca.pem'), tlsAllowInvalidCertificates: true });
      c.destroy();
    });

    it('a TLS failure that is not socket I/O (protocol version refused, peer not speaking TLS) carries no backpressure label', async function () {
      const fs = await import('node:fs');
      const tls = await import('node:tls');
      const old = tls.createServer(
        { key: fs.readFileSync(file('server.key')), cert: fs.readFileSync(file('server.crt')), minVersion: 'TLSv1', maxVersion: 'TLSv1.1', ciphers: 'DEFAULT@SECLEVEL=0' },
        (socket) => socket.on('error', () => undefined),
      );
      old.on('tlsClientError', () => undefined);
      const banner = net.createServer((socket) => {
        socket.on('error', () => undefined);
        socket.end('SSH-2.0-OpenSSH_9.6\r\n');
      });
      await Promise.all([old, banner].map((s) => new Promise((r) => s.listen(0, '127.0.0.1', () => r(undefined)))));
      try {
        for (const [s, code] of [[old, 'ERR_SSL_TLSV1_ALERT_PROTOCOL_VERSION'], [banner, 'ERR_SSL_WRONG_VERSION_NUMBER']] as const) {
          const address = `127.0.0.1:${(s.address() as net.AddressInfo).port}`;
          const error = await establishOne(address, { tls: true, tlsAllowInvalidCertificates: true, connectTimeoutMS: 1000 }).catch((e) => e);
          expect(error).to.be.instanceOf(MongoNetworkError);
          expect(error.cause.code).to.equal(code);
          expect([...error.errorLabels], code).to.deep.equal([]);
        }
      } finally {
        old.close();
        banner.close();
      }
    });

    it('a connection closed during the TLS handshake (EOF) carries the backpressure labels', async function () {
      const closing = net.createServer((socket) => {
        socket.on('error', () => undefined);
        socket.once('data', () => socket.destroy());
      });
      await new Promise((r) => closing.listen(0, '127.0.0.1', () => r(undefined)));
      try {
        const address = `127.0.0.1:${(closing.address() as net.AddressInfo).port}`;
        const error = await establishOne(address, { tls: true, tlsAllowInvalidCertificates: true, connectTimeoutMS: 1000 }).catch((e) => e);
        expect(error).to.be.instanceOf(MongoNetworkError);
        expect(error).to.not.be.instanceOf(MongoNetworkTimeoutError);
        expect([...error.errorLabels]).to.have.members(['SystemOverloadedError', 'RetryableError']);
      } finally {
        closing.close();
      }
    });

    it('connects over TLS to a Unix domain socket, verifying the certificate against localhost', async function () {
      const fs = await import('node:fs');
      const os = await import('node:os');
      const tls = await import('node:tls');
      const { decodeOpMsg, encodeOpMsg } = await import('../../lib/connection/op-msg');
      const { MessageFramer } = await import('../../lib/connection/wire-protocol');
      const socketPath = path.join(os.tmpdir(), `rxcmap-tls-${process.pid}.sock`);
      fs.rmSync(socketPath, { force: true });
      const unix = tls.createServer({ key: fs.readFileSync(file('server.key')), cert: fs.readFileSync(file('server.crt')) }, (socket) => {
        const framer = new MessageFramer();
        socket.on('error', () => undefined);
        socket.on('data', (chunk) => {
          for (const m of framer.push(chunk)) {
            const { ping } = decodeOpMsg(m.body).document;
            socket.write(encodeOpMsg(1, m.header.requestId, ping === undefined ? { ismaster: true, maxWireVersion: 25, ok: 1 } : { ok: 1 }));
          }
        });
      });
      await new Promise((r) => unix.listen(socketPath, () => r(undefined)));
      try {
        const factory = connectionFactory({ host: socketPath, tls: true, tlsCAFile: file('ca.pem'), connectTimeoutMS: 1000 });
        const c = await firstValueFrom(from(factory({ id: 1, generation: 0, address: socketPath, signal: new AbortController().signal })));
        expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
        c.destroy();
      } finally {
        await new Promise((r) => unix.close(r));
        fs.rmSync(socketPath, { force: true });
      }
    });

    it('presents the client certificate from tlsCertificateKeyFile when the server requires one', async function () {
      const refused = await establishOne(mutual.address, { tlsCAFile: file('ca.pem') }).catch((e) => e);
      expect(refused).to.be.instanceOf(MongoNetworkError);
      const c = await establishOne(mutual.address, { tlsCAFile: file('ca.pem'), tlsCertificateKeyFile: file('client.pem') });
      expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
      c.destroy();
    });
  });

  describe('compression', function () {
    it('negotiates zlib and exchanges compressed messages, keeping the handshake uncompressed', async function () {
      const server = await new EmbeddedServer().start();
      try {
        const seen: (string | undefined)[] = [];
        server.handle('echo', (cmd, client) => {
          seen.push(client.compressor);
          return { ok: 1, echoed: cmd.echo };
        });
        const c = await establishOne(server.address, { compressors: ['zlib'], zlibCompressionLevel: 6 });
        expect(c.compressor).to.equal('zlib');
        const big = 'x'.repeat(10_000);
        expect((await c.command('admin', { echo: big })).echoed).to.equal(big);
        expect(seen).to.deep.equal(['zlib']);
        c.destroy();
        const plain = await establishOne(server.address, {});
        expect(plain.compressor).to.equal(undefined);
        plain.destroy();
      } finally {
        await server.stop();
      }
    });

    it('rejects an unknown compressor and an out-of-range zlib level', function () {
      expect(() => connectionFactory({ host: 'h', port: 1, compressors: ['lz4'] })).to.throw(/compressors/);
      expect(() => connectionFactory({ host: 'h', port: 1, zlibCompressionLevel: 10 })).to.throw(/zlibCompressionLevel/);
    });
  });

  describe('failures and backpressure labels', function () {
    it('labels a refused connection SystemOverloadedError + RetryableError, and the default policy does not clear', async function () {
      const port = await closedPort();
      const error = await establishOne(`127.0.0.1:${port}`, {}).catch((e) => e);
      expect(error).to.be.instanceOf(MongoNetworkError);
      expect([...error.errorLabels]).to.have.members(['SystemOverloadedError', 'RetryableError']);
      const pool = new ConnectionPool({ address: `127.0.0.1:${port}` });
      pool.ready();
      const failed = await pool.checkOut().then(
        () => undefined,
        (e) => e,
      );
      expect(failed).to.be.instanceOf(MongoNetworkError);
      expect(pool.state).to.equal('ready');
      pool.close();
    });

    it('isRefusedConnect: a connect refused at every address, and nothing else (a reset, a timeout, an accepted connection closed)', async function () {
      const port = await closedPort();
      const refused = await establishOne(`127.0.0.1:${port}`, {}).catch((e: unknown) => e);
      expect(isRefusedConnect(refused), 'one address refused').to.equal(true);
      // localhost: ::1 and 127.0.0.1 where both resolve (an AggregateError of the attempts), else one of them.
      const byName = await establishOne(`localhost:${port}`, {}).catch((e: unknown) => e);
      expect(isRefusedConnect(byName), 'every address of a host name refused').to.equal(true);
      const code = (c: string): NodeJS.ErrnoException => Object.assign(new Error(c), { code: c });
      const network = (cause: unknown): MongoNetworkError => new MongoNetworkError('db:27017', 'connecting to db:27017 failed', { cause });
      expect(isRefusedConnect(network(new AggregateError([code('ECONNREFUSED'), code('ECONNREFUSED')]))), 'all refused').to.equal(true);
      expect(isRefusedConnect(network(new AggregateError([code('ECONNREFUSED'), code('ETIMEDOUT')]))), 'one timed out').to.equal(false);
      expect(isRefusedConnect(network(new AggregateError([]))), 'no attempt').to.equal(false);
      expect(isRefusedConnect(network(code('ECONNRESET'))), 'reset').to.equal(false);
      expect(isRefusedConnect(network(undefined)), 'closed, no cause').to.equal(false);
      expect(isRefusedConnect(new MongoNetworkTimeoutError('db:27017', 'timed out')), 'a timeout').to.equal(false);
      expect(isRefusedConnect(Object.assign(new Error('x'), { cause: code('ECONNREFUSED') })), 'not a network error').to.equal(false);
      expect(isRefusedConnect(undefined)).to.equal(false);
    });

    it('isRefusedConnect: a Unix domain socket whose file is gone (ENOENT: its server shut down and removed it) is refused too', async function () {
      const fs = await import('node:fs');
      const os = await import('node:os');
      const socketPath = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'rxcmap-')), 'mongodb.sock');
      const factory = connectionFactory({ host: socketPath });
      const gone = await firstValueFrom(from(factory({ id: 1, generation: 0, address: socketPath, signal: new AbortController().signal }))).catch((e: unknown) => e);
      expect(gone).to.be.instanceOf(MongoNetworkError);
      expect((gone as MongoNetworkError).hasErrorLabel(ErrorLabel.SystemOverloadedError), 'labelled: it does not clear the pool').to.equal(true);
      expect(isRefusedConnect(gone), 'nothing listens at the path').to.equal(true);
    });

    it('isRefusedConnect: a TLS connect refused is one too (its socket\'s ECONNREFUSED, before any TLS), labelled; through a SOCKS5 proxy, the proxy\'s reply refusing the server is not', async function () {
      const port = await closedPort();
      const refused = await establishOne(`127.0.0.1:${port}`, { tls: true, tlsCAFile: file('ca.pem') }).catch((e: unknown) => e);
      expect(refused).to.be.instanceOf(MongoNetworkError);
      expect((refused as MongoNetworkError).hasErrorLabel(ErrorLabel.SystemOverloadedError), 'labelled').to.equal(true);
      expect(isRefusedConnect(refused), 'TLS, the port refusing').to.equal(true);
      const { startSocks5Proxy } = await import('../support/socks5-proxy');
      const socks = await startSocks5Proxy({ replyCode: 0x05 });
      try {
        const relayed = await establishOne(`127.0.0.1:${port}`, { proxyHost: '127.0.0.1', proxyPort: socks.port }).catch((e: unknown) => e);
        expect(relayed).to.be.instanceOf(MongoNetworkError);
        expect((relayed as MongoNetworkError).hasErrorLabel(ErrorLabel.SystemOverloadedError), 'not labelled').to.equal(false);
        expect(isRefusedConnect(relayed), 'the proxy\'s reply: connection refused').to.equal(false);
      } finally {
        await socks.close();
      }
    });

    it('isRefusedConnect: a host name whose other addresses have no route (no IPv6 here: EADDRNOTAVAIL, ENETUNREACH, EHOSTUNREACH) and the rest refused is refused', function () {
      const code = (c: string): NodeJS.ErrnoException => Object.assign(new Error(c), { code: c });
      const network = (cause: unknown): MongoNetworkError => new MongoNetworkError('localhost:27017', 'connecting to localhost:27017 failed', { cause });
      for (const other of ['EADDRNOTAVAIL', 'ENETUNREACH', 'EHOSTUNREACH']) {
        expect(isRefusedConnect(network(new AggregateError([code(other), code('ECONNREFUSED')]))), `${other}, then refused`).to.equal(true);
        expect(isRefusedConnect(network(new AggregateError([code('ECONNREFUSED'), code(other)]))), `refused, then ${other}`).to.equal(true);
        expect(isRefusedConnect(network(new AggregateError([code(other), code(other)]))), `${other} only: the server was never reached`).to.equal(false);
      }
      expect(isRefusedConnect(network(new AggregateError([code('ENETUNREACH'), code('ECONNREFUSED'), code('ECONNRESET')]))), 'one reset').to.equal(false);
    });

    it('a malformed hello reply (a wire-protocol error, not I/O) carries no backpressure label', async function () {
      const { encodeOpMsg, OpMsgFlag } = await import('../../lib/connection/op-msg');
      const { MessageFramer } = await import('../../lib/connection/wire-protocol');
      const replies: Array<[string, (requestId: number) => Buffer]> = [
        ['an answer to another request', (id) => encodeOpMsg(1, id + 1000, { ismaster: true, ok: 1 })],
        ['a reply flagged moreToCome', (id) => encodeOpMsg(1, id, { ismaster: true, ok: 1 }, OpMsgFlag.moreToCome)],
        ['a header announcing 4 bytes', () => Buffer.from([4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xdd, 7, 0, 0])],
      ];
      for (const [what, reply] of replies) {
        const broken = net.createServer((socket) => {
          const framer = new MessageFramer();
          socket.on('error', () => undefined);
          socket.on('data', (chunk) => {
            for (const m of framer.push(chunk)) socket.write(reply(m.header.requestId));
          });
        });
        await new Promise((r) => broken.listen(0, '127.0.0.1', () => r(undefined)));
        try {
          const address = `127.0.0.1:${(broken.address() as net.AddressInfo).port}`;
          const error = await establishOne(address, { connectTimeoutMS: 1000 }).catch((e) => e);
          expect(error, what).to.be.instanceOf(MongoNetworkError);
          expect(error.message, what).to.match(/wire-protocol error/);
          expect([...error.errorLabels], what).to.deep.equal([]);
        } finally {
          broken.close();
        }
      }
    });

    /** Runs `fn` while the host name `dual-stack.test` resolves to ::1, then 127.0.0.1 (as `localhost` does on many systems). */
    async function withDualStackName(fn: () => Promise<void>): Promise<void> {
      const dns = require('node:dns') as { lookup: (...args: unknown[]) => void };
      const lookup = dns.lookup;
      dns.lookup = (host: unknown, options: unknown, callback: unknown) => {
        if (host !== 'dual-stack.test') return lookup(host, options, callback);
        const all = [{ address: '::1', family: 6 }, { address: '127.0.0.1', family: 4 }];
        const cb = callback as (error: null, address: unknown, family?: number) => void;
        process.nextTick(() => ((options as { all?: boolean }).all === true ? cb(null, all) : cb(null, all[0].address, all[0].family)));
      };
      try {
        await fn();
      } finally {
        dns.lookup = lookup;
      }
    }

    it('a host name resolving to ::1 then 127.0.0.1, served on 127.0.0.1 only: connects over IPv4 after ::1 is refused', async function () {
      const server = await new EmbeddedServer().start();
      try {
        const port = Number(server.address.split(':')[1]);
        await withDualStackName(async () => {
          const connection = await establishOne(`dual-stack.test:${port}`, {});
          expect(await connection.command('admin', { ping: 1 })).to.include({ ok: 1 });
          connection.destroy();
        });
      } finally {
        await server.stop();
      }
    });

    it('a host name resolving to several addresses, each refused (localhost as ::1 and 127.0.0.1): the message names every attempt', async function () {
      // Node tries each address (autoSelectFamily) and fails with an AggregateError, whose own message is empty.
      const port = await closedPort();
      await withDualStackName(async () => {
        const error = await establishOne(`dual-stack.test:${port}`, {}).catch((e) => e);
        expect(error).to.be.instanceOf(MongoNetworkError);
        expect(error.message).to.equal(
          `connecting to dual-stack.test:${port} failed: connect ECONNREFUSED ::1:${port}; connect ECONNREFUSED 127.0.0.1:${port}`,
        );
        expect([...error.errorLabels]).to.have.members(['SystemOverloadedError', 'RetryableError']);
      });
    });

    it('does not label an error of this host\'s own resources (out of file descriptors, of memory, of local ports): no server load causes it', async function () {
      const dns = require('node:dns') as { lookup: (...args: unknown[]) => void };
      const lookup = dns.lookup;
      for (const code of ['EMFILE', 'ENFILE', 'ENOMEM', 'EADDRNOTAVAIL']) {
        // The lookup fails as getaddrinfo does when the process is out of descriptors (EAI_SYSTEM, errno EMFILE).
        dns.lookup = (host: unknown, options: unknown, callback: unknown) => {
          if (host !== 'local-limit.test') return lookup(host, options, callback);
          process.nextTick(() => (callback as (error: Error) => void)(Object.assign(new Error(`getaddrinfo ${code} local-limit.test`), { code, syscall: 'getaddrinfo' })));
        };
        try {
          const error = await establishOne('local-limit.test:27017', {}).catch((e) => e);
          expect(error, code).to.be.instanceOf(MongoNetworkError);
          expect(error.message, code).to.include(code);
          expect([...error.errorLabels], code).to.deep.equal([]);
        } finally {
          dns.lookup = lookup;
        }
      }
    });

    it('does not label a connect refused by this host\'s socket buffers (ENOBUFS: Windows\' out of local ports, Linux\'s out of kernel memory for the route) or its own policy (EPERM, EACCES: a local firewall rule, a broadcast address): no server load causes them', async function () {
      const port = await closedPort();
      const { TCP } = (process as unknown as { binding(name: string): { TCP: { prototype: Record<string, (...args: unknown[]) => unknown> } } }).binding('tcp_wrap');
      const connect4 = TCP.prototype.connect;
      for (const code of ['ENOBUFS', 'EPERM', 'EACCES'] as const) {
        TCP.prototype.connect = function (this: unknown, ...args: unknown[]) {
          return args[1] === '127.0.0.1' ? -(require('node:os') as typeof import('node:os')).constants.errno[code] : connect4.apply(this, args);
        };
        try {
          const error = await establishOne(`127.0.0.1:${port}`, {}).catch((e) => e);
          expect(error, code).to.be.instanceOf(MongoNetworkError);
          expect(error.message, code).to.include(code);
          expect([...error.errorLabels], code).to.deep.equal([]);
        } finally {
          TCP.prototype.connect = connect4;
        }
      }
    });

    it('does not label a connect Node\'s permission model refused (ERR_ACCESS_DENIED: --permission without --allow-net, Node.js 25 and later), and says how to allow it', async function () {
      // Node.js 26 under --permission fails a host name's connect as its lookup: `getaddrinfo ERR_ACCESS_DENIED <host>`,
      // an error with code ERR_ACCESS_DENIED and permission 'Net' (and an IP literal's with Node's own message, which
      // names --allow-net already).
      const dns = require('node:dns') as { lookup: (...args: unknown[]) => void };
      const lookup = dns.lookup;
      dns.lookup = (host: unknown, options: unknown, callback: unknown) => {
        if (host !== 'no-network.test') return lookup(host, options, callback);
        const denied = Object.assign(new Error('getaddrinfo ERR_ACCESS_DENIED no-network.test'), { code: 'ERR_ACCESS_DENIED', permission: 'Net', resource: 'no-network.test' });
        process.nextTick(() => (callback as (error: Error) => void)(denied));
      };
      try {
        const error = await establishOne('no-network.test:27017', {}).catch((e) => e);
        expect(error).to.be.instanceOf(MongoNetworkError);
        expect(error.message).to.equal(
          "connecting to no-network.test:27017 failed: getaddrinfo ERR_ACCESS_DENIED no-network.test: Node's permission model does not allow this process the network (run it with --allow-net)",
        );
        expect([...error.errorLabels]).to.deep.equal([]);
      } finally {
        dns.lookup = lookup;
      }
    });

    it('does not label a connect whose DNS lookup outlasts connectTimeoutMS, waiting for Node\'s busy thread pool: "(during lookup)", nothing reached the server', async function () {
      if (process.platform === 'win32') this.skip();
      const server = await new EmbeddedServer().start();
      const port = Number(server.address.split(':')[1]);
      const busy = await occupyThreadPool();
      try {
        const error = await establishOne(`localhost:${port}`, { connectTimeoutMS: 300 }).catch((e) => e);
        expect(error).to.be.instanceOf(MongoNetworkTimeoutError);
        expect(error.message).to.equal(`connecting to localhost:${port} timed out after 300 ms (during lookup)`);
        expect([...error.errorLabels]).to.deep.equal([]);
        expect(server.connectionsAccepted, 'connections the server saw').to.equal(0);
        await busy.release();
        // Once the pool is free, the same connect works.
        const connection = await establishOne(`localhost:${port}`, { connectTimeoutMS: 2000 });
        connection.destroy();
      } finally {
        await busy.release();
        await server.stop();
      }
    });

    it('labels a host name\'s failed attempts when only the first was out of local resources (::1 unusable, IPv6 off), the next refused by the server', async function () {
      // Node's AggregateError takes the code of its first attempt: EADDRNOTAVAIL here, whatever the next attempt met.
      const port = await closedPort();
      const { TCP } = (process as unknown as { binding(name: string): { TCP: { prototype: Record<string, (...args: unknown[]) => unknown> } } }).binding('tcp_wrap');
      const connect6 = TCP.prototype.connect6;
      TCP.prototype.connect6 = function (this: unknown, ...args: unknown[]) {
        return args[1] === '::1' ? -(require('node:os') as typeof import('node:os')).constants.errno.EADDRNOTAVAIL : connect6.apply(this, args);
      };
      try {
        await withDualStackName(async () => {
          const error = await establishOne(`dual-stack.test:${port}`, {}).catch((e) => e);
          expect(error).to.be.instanceOf(MongoNetworkError);
          expect(error.message).to.include('EADDRNOTAVAIL ::1').and.to.include(`ECONNREFUSED 127.0.0.1:${port}`);
          expect([...error.errorLabels]).to.have.members(['SystemOverloadedError', 'RetryableError']);
        });
      } finally {
        TCP.prototype.connect6 = connect6;
      }
    });

    it('does not label a DNS failure', async function () {
      const error = await establishOne('no-such-host.invalid:27017', {}).catch((e) => e);
      expect(error).to.be.instanceOf(MongoNetworkError);
      expect(error.errorLabels.size).to.equal(0);
    });

    it('times out after connectTimeoutMS when the server never answers the handshake', async function () {
      const silent = net.createServer(() => undefined).listen(0, '127.0.0.1');
      await new Promise((r) => silent.once('listening', r));
      try {
        const address = `127.0.0.1:${(silent.address() as net.AddressInfo).port}`;
        const error = await establishOne(address, { connectTimeoutMS: 100 }).catch((e) => e);
        expect(error).to.be.instanceOf(MongoNetworkTimeoutError);
        expect(error.message).to.match(/timed out after 100 ms \(during hello\)/);
        expect(error.hasErrorLabel('SystemOverloadedError')).to.equal(true);
      } finally {
        silent.close();
      }
    });

    it('a server error on the handshake is not a network error and carries no backpressure label', async function () {
      const server = await new EmbeddedServer().start();
      try {
        server.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['isMaster'], errorCode: 91 } });
        const error = await establishOne(server.address, {}).catch((e) => e);
        expect(error).to.be.instanceOf(MongoServerError);
        expect(error.code).to.equal(91);
        expect(error.errorLabels.size).to.equal(0);
      } finally {
        await server.stop();
      }
    });
  });
});

describe('connectionFactory: replies received while the event loop was blocked', function () {
  // Node runs the timers that expired during a block before it reads the sockets: connectTimeoutMS must not report
  // an establishment whose handshake reply had already arrived. Deterministic by ordering: the proxy writes the
  // hello reply (into the client's socket buffer, on loopback), then blocks the whole process past the timeout.
  let server: EmbeddedServer;
  let proxy: WireProxy;
  let blocks = 0;
  beforeEach(async function () {
    server = await new EmbeddedServer().start();
    blocks = 0;
    proxy = await startWireProxy(server.address, {
      reply: (reply, command) => {
        if (command.client !== undefined) {
          blocks++;
          process.nextTick(() => blockEventLoop(300));
        }
        return reply;
      },
    });
  });
  afterEach(async function () {
    await proxy.stop();
    await server.stop();
  });

  it('establishes the connection, though connectTimeoutMS ran out during the block', async function () {
    const outcome = await establishOne(proxy.address, { connectTimeoutMS: 100 }).catch((e: unknown) => e);
    expect(outcome, String(outcome)).to.not.be.instanceOf(Error);
    expect(blocks).to.equal(1);
    (outcome as Connection).destroy();
  });

  it('a pool checks it out: no ConnectionCheckOutFailed, no ConnectionPoolCleared', async function () {
    const pool = new ConnectionPool({ address: proxy.address, connectionOptions: { connectTimeoutMS: 100 } });
    const events: ConnectionPoolEvent[] = [];
    pool.events$.subscribe((e) => events.push(e));
    pool.ready();
    try {
      const outcome = await pool.checkOut().then(
        (c) => c,
        (e: unknown) => e,
      );
      expect(outcome, String(outcome)).to.not.be.instanceOf(Error);
      pool.checkIn(outcome as Connection);
      expect(events.filter((e) => e.type === 'ConnectionCheckOutFailed' || e.type === 'ConnectionPoolCleared')).to.deep.equal([]);
    } finally {
      pool.close();
    }
  });
});

describe('connectionFactory: what each establishment sets up', function () {
  let server: EmbeddedServer;
  beforeEach(async function () {
    server = await new EmbeddedServer({ users: [{ username: 'both', password: 'pencil' }] }).start();
  });
  afterEach(() => server.stop());

  it('the handshake and authentication are bounded by connectTimeoutMS, not socketTimeoutMS (a slow hello or saslContinue within connectTimeoutMS establishes)', async function () {
    // socketTimeoutMS bounds the operations run on an established connection; the establishment has its own limit.
    const credentials = { username: 'both', password: 'pencil' };
    for (const command of ['isMaster', 'saslContinue']) {
      server.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: [command], blockConnection: true, blockTimeMS: 150 } });
      const outcome = await establishOne(server.address, { socketTimeoutMS: 30, connectTimeoutMS: 5000, credentials }).catch((e: unknown) => e);
      expect(outcome, `${command}: ${String(outcome)}`).to.not.be.instanceOf(Error);
      (outcome as Connection).destroy();
    }
    // Both were blocked: the saslContinue ran (speculative authentication carries only saslStart).
    expect(server.scramConversations()).to.deep.equal({ started: 2, succeeded: 2, failed: 0 });
  });

  it('connectTimeoutMS 0 sets no deadline: a hello answered after 150 ms establishes', async function () {
    server.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['isMaster'], blockConnection: true, blockTimeMS: 150 } });
    const outcome = await establishOne(server.address, { connectTimeoutMS: 0 }).catch((e: unknown) => e);
    expect(outcome, String(outcome)).to.not.be.instanceOf(Error);
    (outcome as Connection).destroy();
  });

  it("handshakeDurationMS is the hello's round trip on the factory's clock (a monitor's RTT sample)", async function () {
    const { connectionFactoryWithMetadata } = await import('../../lib/connection/connect');
    const [host, port] = server.address.split(':');
    const readings = [1000, 1042];
    const factory = connectionFactoryWithMetadata({ host, port: Number(port) }, undefined, () => readings.shift() ?? Number.NaN);
    const c = await firstValueFrom(from(factory({ id: 1, generation: 0, address: server.address, signal: new AbortController().signal })));
    c.destroy();
    expect(c.handshakeDurationMS).to.equal(42);
    expect(readings).to.deep.equal([]);
  });

  it('an already-aborted signal fails the establishment before any socket is opened', async function () {
    let accepted = 0;
    const counting = net.createServer((socket) => {
      accepted++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => counting.listen(0, '127.0.0.1', resolve));
    try {
      const port = (counting.address() as net.AddressInfo).port;
      const factory = connectionFactory({ host: '127.0.0.1', port });
      const reason = new Error('shutting down');
      const error = await firstValueFrom(from(factory({ id: 1, generation: 0, address: `127.0.0.1:${port}`, signal: AbortSignal.abort(reason) }))).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(MongoNetworkError);
      expect((error as Error).message).to.match(/was aborted \(during connect\)/);
      expect((error as Error).cause).to.equal(reason);
      // A round trip on the listening socket, so that a connection opened meanwhile would have been accepted.
      await new Promise<void>((resolve) => net.connect(port, '127.0.0.1', function (this: net.Socket) { this.destroy(); resolve(); }));
      await eventually(() => accepted === 1);
      expect(accepted).to.equal(1);
    } finally {
      counting.close();
    }
  });

  it("turns off Nagle's algorithm on the socket, so that a command's message leaves at once", async function () {
    // The client's sockets only: the embedded endpoint sets it on the sockets it accepts too.
    const port = Number(server.address.split(':')[1]);
    const calls: unknown[][] = [];
    const original = net.Socket.prototype.setNoDelay;
    net.Socket.prototype.setNoDelay = function (this: net.Socket, ...args: Parameters<typeof original>) {
      if (this.remotePort === port || this.connecting) calls.push(args);
      return original.apply(this, args);
    };
    try {
      const c = await establishOne(server.address, {});
      c.destroy();
    } finally {
      net.Socket.prototype.setNoDelay = original;
    }
    expect(calls).to.deep.equal([[true]]);
  });

  it('a network error during authentication carries no backpressure label (the server answered the hello: it is not overloaded)', async function () {
    server.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['saslContinue'], closeConnection: true } });
    const error = await establishOne(server.address, { credentials: { username: 'both', password: 'pencil' } }).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(MongoNetworkError);
    expect([...(error as MongoNetworkError).errorLabels]).to.deep.equal([]);
  });
});

describe('connectionFactory: the phase a deadline passed in', function () {
  it('a deadline that passed during the hello, whose reply was read late (event loop blocked), fails the authentication still to come as of the hello: its labels, its message', async function () {
    const server = await new EmbeddedServer({ users: [{ username: 'both', password: 'pencil' }] }).start();
    const proxy = await startWireProxy(server.address, {
      reply: (reply, command) => {
        // The hello reply is written, then the process blocks past connectTimeoutMS before reading it.
        if (command.client !== undefined) process.nextTick(() => blockEventLoop(300));
        return reply;
      },
      // The server never answers the authentication's next round trip.
      hold: (command) => command.saslContinue !== undefined,
    });
    try {
      const error = await establishOne(proxy.address, { connectTimeoutMS: 100, credentials: { username: 'both', password: 'pencil' } }).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(MongoNetworkTimeoutError);
      expect((error as Error).message).to.match(/timed out after 100 ms \(during hello\)$/);
      expect([...(error as MongoNetworkError).errorLabels]).to.have.members(['SystemOverloadedError', 'RetryableError']);
    } finally {
      await proxy.stop();
      await server.stop();
    }
  });
});

describe('connectionFactory: what the handshake offers and reports', function () {
  let server: EmbeddedServer;
  let proxy: WireProxy;
  const hellos: Record<string, unknown>[] = [];
  beforeEach(async function () {
    server = await new EmbeddedServer().start();
    hellos.length = 0;
    proxy = await startWireProxy(server.address, {
      request: (command) => {
        if (command.client !== undefined) hellos.push(command);
        return command;
      },
    });
  });
  afterEach(async function () {
    await proxy.stop();
    await server.stop();
  });

  it("offers no compressor for compressors ['none'], and leaves 'none' out of a list that has others", async function () {
    (await establishOne(proxy.address, { compressors: ['none'] })).destroy();
    (await establishOne(proxy.address, { compressors: ['none', 'zlib'] })).destroy();
    expect(hellos).to.have.length(2);
    expect(hellos[0]).to.not.have.property('compression');
    expect(hellos[1].compression).to.deep.equal(['zlib']);
  });

  it("a refused connection's message is Node's own (the address and port refused)", async function () {
    const port = await closedPort();
    const error = await establishOne(`127.0.0.1:${port}`, {}).catch((e: unknown) => e);
    expect((error as Error).message).to.equal(`connecting to 127.0.0.1:${port} failed: connect ECONNREFUSED 127.0.0.1:${port}`);
  });

  it('outside load-balanced mode, a serviceId in the hello reply gives the connection no service generation (handshakeDone is not called)', async function () {
    server.handle('ismaster', () => ({ ismaster: true, serviceId: new ObjectId(), maxWireVersion: 25, ok: 1 }));
    const [host, port] = proxy.address.split(':');
    const done: string[] = [];
    const factory = connectionFactory({ host, port: Number(port) });
    const c = await firstValueFrom(from(factory({ id: 1, generation: 0, address: proxy.address, signal: new AbortController().signal, handshakeDone: (id) => done.push(id) })));
    c.destroy();
    expect(done).to.deep.equal([]);
    // In load-balanced mode it is called, with the service's id.
    const serviceId = new ObjectId();
    server.handle('hello', () => ({ isWritablePrimary: true, serviceId, maxWireVersion: 25, ok: 1 }));
    const balanced = connectionFactory({ host, port: Number(port), loadBalanced: true });
    const b = await firstValueFrom(from(balanced({ id: 2, generation: 0, address: proxy.address, signal: new AbortController().signal, handshakeDone: (id) => done.push(id) })));
    b.destroy();
    expect(done).to.deep.equal([serviceId.toHexString()]);
  });
});
