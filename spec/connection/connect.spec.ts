/**
 * Establishment over real sockets against embedded endpoints configured for each case: authentication, TLS,
 * compression, timeouts and the backpressure labels.
 */
import { expect } from 'chai';
import * as net from 'node:net';
import * as path from 'node:path';
import { inspect } from 'node:util';
import { firstValueFrom, from } from 'rxjs';
import { AuthenticationError, ConnectionPool, MongoNetworkError, MongoNetworkTimeoutError, MongoServerError, connectionFactory, type Connection, type ConnectionOptions, type ConnectionPoolEvent } from '../../lib';
import { EmbeddedServer } from '../../lib/testing';
import { closedPort } from '../support/endpoint';

const fixtures = path.resolve(__dirname, '../fixtures/tls');
const file = (name: string): string => path.join(fixtures, name);

/** Establishes one connection with `options` to `address`; resolves to it or rejects with the error. */
async function establish(address: string, options: ConnectionOptions): Promise<Connection> {
  const [host, port] = address.split(':');
  const factory = connectionFactory({ ...options, host, port: Number(port) });
  return firstValueFrom(from(factory({ id: 1, generation: 0, address, signal: new AbortController().signal })));
}

describe('connectionFactory (establishment)', function () {
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
      const c = await establish(server.address, { credentials: { username: 'both', password: 'pencil' } });
      const reply = await c.command('admin', { whoami: 1 });
      mechanism = reply.mechanism;
      expect(reply.user).to.equal('admin.both');
      expect(mechanism).to.equal('SCRAM-SHA-256');
      c.destroy();
    });

    it('falls back to SCRAM-SHA-1 when the user has only that mechanism', async function () {
      server.handle('whoami', (_cmd, client) => ({ ok: 1, mechanism: client.conversation?.mechanism }));
      const c = await establish(server.address, { credentials: { username: 'sha1', password: 'sha1pass' } });
      expect((await c.command('admin', { whoami: 1 })).mechanism).to.equal('SCRAM-SHA-1');
      c.destroy();
    });

    it('uses authSource, and SASLprep for SCRAM-SHA-256 passwords', async function () {
      const c = await establish(server.address, { credentials: { username: 'app', password: 'ÅpPle', source: 'appdb' } });
      expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
      c.destroy();
    });

    it('without credentials, commands that need authentication are refused', async function () {
      const c = await establish(server.address, {});
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
      const c = await establish(server.address.replace('127.0.0.1', 'localhost'), { tls: true, tlsCAFile: file('ca.pem') });
      expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
      c.destroy();
    });

    it('fails against the wrong CA, without backpressure labels; tlsAllowInvalidCertificates accepts it', async function () {
      const error = await establish(server.address, { tlsCAFile: file('other-ca.pem') }).catch((e) => e);
      expect(error).to.be.instanceOf(MongoNetworkError);
      expect(error.hasErrorLabel('SystemOverloadedError')).to.equal(false);
      const c = await establish(server.address, { tlsCAFile: file('other-ca.pem'), tlsAllowInvalidCertificates: true });
      c.destroy();
    });

    it('presents the client certificate from tlsCertificateKeyFile when the server requires one', async function () {
      const refused = await establish(mutual.address, { tlsCAFile: file('ca.pem') }).catch((e) => e);
      expect(refused).to.be.instanceOf(MongoNetworkError);
      const c = await establish(mutual.address, { tlsCAFile: file('ca.pem'), tlsCertificateKeyFile: file('client.pem') });
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
        const c = await establish(server.address, { compressors: ['zlib'], zlibCompressionLevel: 6 });
        expect(c.compressor).to.equal('zlib');
        const big = 'x'.repeat(10_000);
        expect((await c.command('admin', { echo: big })).echoed).to.equal(big);
        expect(seen).to.deep.equal(['zlib']);
        c.destroy();
        const plain = await establish(server.address, {});
        expect(plain.compressor).to.equal(undefined);
        plain.destroy();
      } finally {
        await server.stop();
      }
    });

    it('rejects an unknown compressor and an out-of-range zlib level', function () {
      expect(() => connectionFactory({ host: 'h', port: 1, compressors: ['snappy'] })).to.throw(/compressors/);
      expect(() => connectionFactory({ host: 'h', port: 1, zlibCompressionLevel: 10 })).to.throw(/zlibCompressionLevel/);
    });
  });

  describe('failures and backpressure labels', function () {
    it('labels a refused connection SystemOverloadedError + RetryableError, and the default policy does not clear', async function () {
      const port = await closedPort();
      const error = await establish(`127.0.0.1:${port}`, {}).catch((e) => e);
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

    it('does not label a DNS failure', async function () {
      const error = await establish('no-such-host.invalid:27017', {}).catch((e) => e);
      expect(error).to.be.instanceOf(MongoNetworkError);
      expect(error.errorLabels.size).to.equal(0);
    });

    it('times out after connectTimeoutMS when the server never answers the handshake', async function () {
      const silent = net.createServer(() => undefined).listen(0, '127.0.0.1');
      await new Promise((r) => silent.once('listening', r));
      try {
        const address = `127.0.0.1:${(silent.address() as net.AddressInfo).port}`;
        const error = await establish(address, { connectTimeoutMS: 100 }).catch((e) => e);
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
        const error = await establish(server.address, {}).catch((e) => e);
        expect(error).to.be.instanceOf(MongoServerError);
        expect(error.code).to.equal(91);
        expect(error.errorLabels.size).to.equal(0);
      } finally {
        await server.stop();
      }
    });
  });
});
