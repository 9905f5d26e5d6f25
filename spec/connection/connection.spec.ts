/**
 * Real connections over TCP, against the embedded endpoint, or the server in MONGODB_URI when it is set.
 */
import { expect } from 'chai';
import { ConnectionBusyError, ConnectionPool, MongoNetworkError, MongoNetworkTimeoutError, type ConnectionPoolEvent, type ConnectionPoolOptions } from '../../lib';
import { DRIVER_INFO } from '../../lib/version';
import { closedPort, eventually, startTestEndpoint, type TestEndpoint } from '../support/endpoint';
import * as pkg from '../../package.json';

describe('Connection (TCP, OP_MSG)', function () {
  let endpoint: TestEndpoint;
  const pools: ConnectionPool[] = [];

  before(async function () {
    endpoint = await startTestEndpoint();
  });
  after(async function () {
    await endpoint.stop();
  });
  afterEach(function () {
    for (const pool of pools.splice(0)) pool.close();
  });

  function pool(options: Partial<ConnectionPoolOptions> = {}): ConnectionPool {
    const p = new ConnectionPool({ address: endpoint.address, connectionOptions: { appName: 'rxcmap-tests' }, ...options });
    pools.push(p);
    p.ready();
    return p;
  }

  it('reports the package version in the handshake metadata', function () {
    expect(DRIVER_INFO.version).to.equal(pkg.version);
  });

  it('establishes, handshakes and runs ping through the pool', async function () {
    const p = pool();
    const reply = await p.withConnection(async (c) => {
      expect(c.hello).to.have.property('maxWireVersion').that.is.a('number');
      expect(c.hello.helloOk).to.equal(true);
      return c.command('admin', { ping: 1 });
    });
    expect(reply).to.include({ ok: 1 });
  });

  it('sends appName in the handshake (embedded endpoint only: it records what it received)', async function () {
    if (!endpoint.embedded) this.skip();
    const seen: (string | undefined)[] = [];
    endpoint.embedded.handle('whoami', (_cmd, client) => {
      seen.push(client.appName);
      return { ok: 1 };
    });
    await pool().withConnection((c) => c.command('admin', { whoami: 1 }));
    expect(seen).to.deep.equal(['rxcmap-tests']);
  });

  it('runs one request at a time: a second concurrent command fails with ConnectionBusyError', async function () {
    await pool().withConnection(async (c) => {
      const first = c.command('admin', { ping: 1 });
      const second = c.command('admin', { ping: 1 }).then(
        () => undefined,
        (e) => e,
      );
      expect(await second).to.be.instanceOf(ConnectionBusyError);
      expect(await first).to.include({ ok: 1 });
      expect(c.errored).to.equal(false);
    });
  });

  it('closes every socket it opened when the pool closes (no leaked connection)', async function () {
    const p = pool({ minPoolSize: 3, maxPoolSize: 5 });
    const held = await Promise.all([p.checkOut(), p.checkOut()]);
    const before = endpoint.embedded?.openConnections;
    p.close();
    for (const c of held) p.checkIn(c);
    expect(held.every((c) => c.errored)).to.equal(true);
    if (endpoint.embedded) {
      expect(before).to.be.at.least(2);
      expect(await eventually(() => endpoint.embedded!.openConnections === 0)).to.equal(true);
    }
  });

  it('a refused connection fails the checkout with a MongoNetworkError and reason connectionError', async function () {
    const closed = await closedPort();
    const p = new ConnectionPool({ address: `127.0.0.1:${closed}` });
    pools.push(p);
    const events: ConnectionPoolEvent[] = [];
    p.events$.subscribe((e) => events.push(e));
    p.ready();
    const error = await p.checkOut().then(
      () => undefined,
      (e) => e,
    );
    expect(error).to.be.instanceOf(MongoNetworkError);
    expect(events.find((e) => e.type === 'ConnectionCheckOutFailed')).to.include({ reason: 'connectionError' });
    expect(events.find((e) => e.type === 'ConnectionClosed')).to.include({ reason: 'error' });
  });

  it('a reply that does not come within the timeout fails with MongoNetworkTimeoutError and errors the connection', async function () {
    if (!endpoint.embedded) this.skip();
    endpoint.embedded.handle('sleep', () => new Promise((r) => setTimeout(() => r({ ok: 1 }), 500)));
    const p = pool();
    const events: ConnectionPoolEvent[] = [];
    p.events$.subscribe((e) => events.push(e));
    const c = await p.checkOut();
    const error = await c.command('admin', { sleep: 1 }, { timeoutMS: 50 }).then(
      () => undefined,
      (e) => e,
    );
    expect(error).to.be.instanceOf(MongoNetworkTimeoutError);
    expect(c.errored).to.equal(true);
    p.checkIn(c);
    expect(events.at(-1)).to.include({ type: 'ConnectionClosed', reason: 'error' });
  });
});
