/**
 * An establishment that fails with a network error before or during the handshake leaves the pool as it is (CMAP's
 * backpressure labels: the server may only be overloaded). When the error is a refused connect (nothing listens on
 * the port), the client also asks the server's monitor for an immediate check: a server that shut down (a restart, an
 * upgrade in place) is then found Unknown and its pool paused at once, so commands wait for it rather than each
 * failing with a refused connect until the next heartbeat, heartbeatFrequencyMS later (10 s by default, and polling is
 * the default in FaaS environments). A connection the server accepted and then closed, as an overloaded server sheds
 * them, changes nothing (SDAM's backpressure tests). Against the embedded endpoint, or the server of MONGODB_URI when
 * it is set, through a fault proxy standing for the server's port; server monitoring on a virtual clock.
 */
import { expect } from 'chai';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { AuthenticationError, connect, ErrorLabel, MongoNetworkError, type Client, type ClientEvent, type ClientOptions, type ConnectionPool } from '../../lib';
import { VirtualClock } from '../../lib/testing';
import { closedPort, eventually, setFailPoint, startTestEndpoint, stopTestEndpoint, type TestEndpoint } from '../support/endpoint';
import { deployment } from '../support/deployment';
import { startRelay } from '../support/relay';
import { startSocks5Proxy } from '../support/socks5-proxy';
import { startTcpFaultProxy, type TcpFaultProxy } from '../support/tcp-fault-proxy';

describe('Client: an establishment error that leaves the pool as it is', function () {
  this.timeout(20_000);
  let server: TestEndpoint | undefined;
  let proxy: TcpFaultProxy | undefined;
  let client: Client | undefined;

  afterEach(async function () {
    await client?.close();
    client = undefined;
    await proxy?.stop();
    proxy = undefined;
    if (server !== undefined) await stopTestEndpoint(server);
    server = undefined;
  });

  /**
   * A polling client (heartbeatFrequencyMS 60 s) through a fault proxy, its monitor on `clock`, its pool ready;
   * `options` in place of the server's connection options.
   */
  async function start(clock: VirtualClock, options?: ClientOptions): Promise<{ c: Client; p: TcpFaultProxy; events: string[]; pool: ConnectionPool }> {
    server = await startTestEndpoint({ users: [{ username: 'app', password: 'right' }] });
    const p = (proxy = await startTcpFaultProxy(server.address));
    const c = (client = connect(`mongodb://${p.address}/?directConnection=true&serverMonitoringMode=poll&heartbeatFrequencyMS=60000&serverSelectionTimeoutMS=5000`, {
      scheduler: clock,
      ...(options ?? server.connectionOptions),
    }));
    const events: string[] = [];
    c.events$.subscribe((e: ClientEvent) => void (e.type !== 'ConnectionCheckOutStarted' && events.push(e.type)));
    const pool = [...c.pools.values()][0];
    expect(await eventually(() => pool.state === 'ready'), 'ready after the first check').to.equal(true);
    return { c, p, events, pool };
  }

  it('asks for an immediate check: a server that shut down pauses the pool, and the next command waits for the server to come back', async function () {
    const clock = new VirtualClock();
    const { c, p, events, pool } = await start(clock);
    // The last check ended more than minHeartbeatFrequencyMS ago: a requested check runs at once.
    clock.advance(1000);
    await p.shutDown();
    const refused = await c.command('admin', { ping: 1 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(refused, 'the connect refused').to.be.instanceOf(MongoNetworkError);
    expect((refused as MongoNetworkError).hasErrorLabel(ErrorLabel.SystemOverloadedError), 'labelled: it did not clear the pool').to.equal(true);
    expect(events, 'no heartbeat yet').to.not.include('ServerHeartbeatFailed');
    clock.advance(0);
    expect(await eventually(() => pool.state === 'paused'), 'paused by the check it requested').to.equal(true);
    const failedAt = events.indexOf('ServerHeartbeatFailed');
    expect(failedAt, 'the check failed').to.be.above(-1);
    expect(events.slice(failedAt), 'then the pool was cleared').to.include('ConnectionPoolCleared');
    // The next command waits for the server rather than failing with another refused connect.
    let settled = false;
    const next = c.command('admin', { ping: 1 }).finally(() => void (settled = true));
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(settled, 'waiting for the server').to.equal(false);
    await p.restart();
    // Server selection requests a check every minHeartbeatFrequencyMS while it waits.
    clock.advance(500);
    expect(await next).to.include({ ok: 1 });
    expect(pool.state).to.equal('ready');
  });

  it('two servers, the first one shut down: after one refused connect the commands go to the second, rather than failing until the next periodic check', async function () {
    server = await startTestEndpoint();
    // Two proxies of one server stand for two mongos: each answers hello as one, behind a fault proxy.
    const mongoses = await deployment(server, [{ kind: 'mongos' }, { kind: 'mongos' }]);
    const first = (proxy = await startTcpFaultProxy(mongoses[0]!.address));
    const second = await startTcpFaultProxy(mongoses[1]!.address);
    try {
      const clock = new VirtualClock();
      const c = (client = connect(`mongodb://${first.address},${second.address}/?serverMonitoringMode=poll&heartbeatFrequencyMS=60000&serverSelectionTimeoutMS=5000`, {
        scheduler: clock,
        ...server.connectionOptions,
      }));
      const [a, b] = [...c.pools.values()];
      expect(await eventually(() => a.state === 'ready' && b.state === 'ready')).to.equal(true);
      clock.advance(1000);
      await first.shutDown();
      // Selection spreads the commands over both servers: those that go to the first fail with its refused connect.
      const spread = await Promise.all(Array.from({ length: 10 }, () => c.command('admin', { ping: 1 }).catch((e: unknown) => e)));
      expect(spread.filter((e) => e instanceof MongoNetworkError).length, 'the first server refuses').to.be.above(0);
      clock.advance(0);
      expect(await eventually(() => a.state === 'paused'), 'the first server found gone').to.equal(true);
      const before = second.accepted();
      const results = await Promise.allSettled(Array.from({ length: 10 }, () => c.command('admin', { ping: 1 })));
      expect(results.filter((r) => r.status === 'rejected').length, 'failures').to.equal(0);
      expect(second.accepted(), 'served by the second').to.be.above(before);
    } finally {
      await client?.close();
      client = undefined;
      await second.stop();
      for (const mongos of mongoses) await mongos.stop();
    }
  });

  it('a server on a Unix domain socket that shut down (its socket file removed): the connect fails with ENOENT, and the check it requests pauses the pool', async function () {
    const clock = new VirtualClock();
    server = await startTestEndpoint();
    const socketPath = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'rxcmap-')), 'mongodb.sock');
    // The socket stands for the server: it forwards to the server's TCP port.
    const relay = await startRelay(server.address, socketPath);
    try {
      const c = (client = connect(`mongodb://${encodeURIComponent(socketPath)}/?directConnection=true&serverMonitoringMode=poll&heartbeatFrequencyMS=60000&serverSelectionTimeoutMS=5000`, { scheduler: clock, ...server.connectionOptions }));
      const events: string[] = [];
      c.events$.subscribe((e: ClientEvent) => void (e.type !== 'ConnectionCheckOutStarted' && events.push(e.type)));
      const pool = [...c.pools.values()][0];
      expect(await eventually(() => pool.state === 'ready')).to.equal(true);
      clock.advance(1000);
      // The server shuts down: it stops listening (Node, as mongod, removes the socket file) and its connections close.
      await relay.close();
      expect(fs.existsSync(socketPath), 'the socket file removed').to.equal(false);
      const gone = await c.command('admin', { ping: 1 }).catch((e: unknown) => e);
      expect(gone).to.be.instanceOf(MongoNetworkError);
      expect(((gone as MongoNetworkError).cause as NodeJS.ErrnoException).code).to.equal('ENOENT');
      expect((gone as MongoNetworkError).hasErrorLabel(ErrorLabel.SystemOverloadedError), 'labelled: it did not clear the pool').to.equal(true);
      expect(events, 'no heartbeat yet').to.not.include('ServerHeartbeatFailed');
      clock.advance(0);
      expect(await eventually(() => pool.state === 'paused'), 'paused by the check it requested').to.equal(true);
      expect(events.slice(events.indexOf('ServerHeartbeatFailed'))).to.include('ConnectionPoolCleared');
    } finally {
      await relay.close();
    }
  });

  it('load-balanced (no monitor): a refused connect fails the command with the network error itself, and the pool stays ready', async function () {
    const c = (client = connect(`mongodb://127.0.0.1:${await closedPort()}/?loadBalanced=true`));
    const events: string[] = [];
    c.events$.subscribe((e: ClientEvent) => void events.push(e.type));
    const pool = [...c.pools.values()][0];
    expect(c.monitors.size).to.equal(0);
    for (let i = 0; i < 3; i++) {
      const refused = await c.command('admin', { ping: 1 }).catch((e: unknown) => e);
      expect(refused, 'the refused connect, not an error of the pool\'s policy').to.be.instanceOf(MongoNetworkError);
      expect(((refused as MongoNetworkError).cause as NodeJS.ErrnoException).code).to.equal('ECONNREFUSED');
    }
    expect(pool.state).to.equal('ready');
    expect(events).to.not.include('ConnectionPoolCleared');
    expect(events.filter((e) => e.startsWith('ServerHeartbeat'))).to.deep.equal([]);
  });

  it('runs that check no sooner than minHeartbeatFrequencyMS after the last one ended', async function () {
    const clock = new VirtualClock();
    const { c, p, events, pool } = await start(clock);
    clock.advance(200);
    await p.shutDown();
    const refused = await c.command('admin', { ping: 1 }).catch((e: unknown) => e);
    expect(refused).to.be.instanceOf(MongoNetworkError);
    clock.advance(299);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(events.filter((e) => e === 'ServerHeartbeatStarted').length, '499 ms after the last check: only the first check').to.equal(1);
    expect(pool.state).to.equal('ready');
    clock.advance(1);
    expect(await eventually(() => pool.state === 'paused'), 'checked at 500 ms').to.equal(true);
    expect(events.filter((e) => e === 'ServerHeartbeatStarted').length, 'the requested check, and its retry on a new connection').to.be.at.least(2);
  });

  it('a server that refuses every new connect while the monitor\'s connection stays up (a full listen queue): one requested check per minHeartbeatFrequencyMS at most, the pool ready', async function () {
    const clock = new VirtualClock();
    server = await startTestEndpoint();
    const relay = await startRelay(server.address);
    try {
      const c = (client = connect(`mongodb://${relay.address}/?directConnection=true&serverMonitoringMode=poll&heartbeatFrequencyMS=60000&serverSelectionTimeoutMS=5000&maxConnecting=10`, { scheduler: clock, ...server.connectionOptions }));
      const events: string[] = [];
      c.events$.subscribe((e: ClientEvent) => void (e.type !== 'ConnectionCheckOutStarted' && events.push(e.type)));
      const pool = [...c.pools.values()][0];
      expect(await eventually(() => pool.state === 'ready')).to.equal(true);
      clock.advance(1000);
      relay.stopListening(); // new connects refused; the monitor's connection stays up
      let refusedCount = 0;
      // 3000 ms of virtual time, 20 refused commands every 100 ms of it.
      for (let step = 0; step < 30; step++) {
        const failures = await Promise.all(Array.from({ length: 20 }, () => c.command('admin', { ping: 1 }).catch((e: unknown) => e)));
        refusedCount += failures.filter((e) => e instanceof MongoNetworkError).length;
        clock.advance(100);
        await new Promise((resolve) => setImmediate(resolve));
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
      const checks = events.filter((e) => e === 'ServerHeartbeatStarted').length;
      expect(refusedCount, 'every command refused').to.equal(600);
      expect(checks - 1, 'requested checks in 3000 ms').to.be.within(1, 6);
      expect(events, 'each check succeeded on the monitor\'s connection').to.not.include('ServerHeartbeatFailed');
      expect(pool.state).to.equal('ready');
    } finally {
      await relay.close();
    }
  });

  it('asks for no check when the server accepted the connection and reset it, as an overloaded server sheds connections: the pool stays ready', async function () {
    const clock = new VirtualClock();
    const { c, p, events, pool } = await start(clock);
    clock.advance(1000);
    const before = p.accepted();
    // The next connection (the pool's first) is reset as soon as its hello arrives; the monitor's stays up.
    p.fault = (n) => (n === before + 1 ? { direction: 'up', afterBytes: 1, kind: 'rst' } : undefined);
    const reset = await c.command('admin', { ping: 1 }).catch((e: unknown) => e);
    expect(reset).to.be.instanceOf(MongoNetworkError);
    expect((reset as MongoNetworkError).hasErrorLabel(ErrorLabel.SystemOverloadedError)).to.equal(true);
    clock.advance(1000);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(events.filter((e) => e === 'ServerHeartbeatStarted').length, 'no check beyond the first').to.equal(1);
    expect(events).to.not.include('ConnectionPoolCleared');
    expect(pool.state).to.equal('ready');
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
    expect(p.accepted() - before, 'connections opened since: the reset one and the next').to.equal(2);
  });

  it("SDAM's backpressure test: every hello closed, the monitor's too; a command's establishment fails labelled, and neither the pool nor the server changes", async function () {
    // Unified test backpressure-network-error-fail: polling every 10 s, failCommand closing the connection of every
    // hello of the client's appName; the command fails with both labels, and no clear or description change follows.
    const clock = new VirtualClock();
    server = await startTestEndpoint();
    const c = (client = connect(`mongodb://${server.address}/?directConnection=true&serverMonitoringMode=poll&heartbeatFrequencyMS=10000&appName=backpressureNetworkErrorFailTest`, {
      scheduler: clock,
      ...server.connectionOptions,
    }));
    const events: string[] = [];
    c.events$.subscribe((e: ClientEvent) => void (e.type !== 'ConnectionCheckOutStarted' && events.push(e.type)));
    const pool = [...c.pools.values()][0];
    expect(await eventually(() => pool.state === 'ready')).to.equal(true);
    await setFailPoint(this, server, { mode: 'alwaysOn', data: { failCommands: ['isMaster', 'hello'], closeConnection: true, appName: 'backpressureNetworkErrorFailTest' } });
    const failed = await c.command('admin', { ping: 1 }).catch((e: unknown) => e);
    expect(failed).to.be.instanceOf(MongoNetworkError);
    expect((failed as MongoNetworkError).hasErrorLabel(ErrorLabel.SystemOverloadedError)).to.equal(true);
    expect((failed as MongoNetworkError).hasErrorLabel(ErrorLabel.RetryableError)).to.equal(true);
    // Up to the next periodic check, nothing changes.
    clock.advance(9000);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(events.filter((e) => e.startsWith('ServerHeartbeat')), 'the first check only').to.deep.equal(['ServerHeartbeatStarted', 'ServerHeartbeatSucceeded']);
    expect(events).to.not.include('ConnectionPoolCleared');
    expect(pool.state).to.equal('ready');
  });

  it('asks for no check after an establishment error that clears the pool (an authentication refused): the pool stays paused until the next periodic check', async function () {
    const clock = new VirtualClock();
    const { c, events, pool } = await start(clock, { credentials: { username: 'app', password: 'wrong' } });
    clock.advance(1000);
    const refused = await c.command('admin', { ping: 1 }).catch((e: unknown) => e);
    expect(refused).to.be.instanceOf(AuthenticationError);
    expect(pool.state, 'cleared by the refusal').to.equal('paused');
    clock.advance(30_000);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(events.filter((e) => e === 'ServerHeartbeatStarted').length, 'only the first check').to.equal(1);
    expect(pool.state).to.equal('paused');
  });

  it('asks for no check after a refused connect that clears the pool (the SOCKS5 proxy\'s port refusing: not labelled, the server never reached)', async function () {
    const clock = new VirtualClock();
    server = await startTestEndpoint();
    const socks = await startSocks5Proxy();
    try {
      const c = (client = connect(`mongodb://${server.address}/?directConnection=true&serverMonitoringMode=poll&heartbeatFrequencyMS=60000&proxyHost=127.0.0.1&proxyPort=${socks.port}`, {
        scheduler: clock,
        ...server.connectionOptions,
      }));
      const events: string[] = [];
      c.events$.subscribe((e: ClientEvent) => void (e.type !== 'ConnectionCheckOutStarted' && events.push(e.type)));
      const pool = [...c.pools.values()][0];
      expect(await eventually(() => pool.state === 'ready')).to.equal(true);
      clock.advance(1000); // a requested check would run at once from here
      await socks.close();
      const refused = await c.command('admin', { ping: 1 }).catch((e: unknown) => e);
      expect(refused).to.be.instanceOf(MongoNetworkError);
      expect(((refused as MongoNetworkError).cause as NodeJS.ErrnoException).code, 'the proxy\'s port refused').to.equal('ECONNREFUSED');
      expect((refused as MongoNetworkError).hasErrorLabel(ErrorLabel.SystemOverloadedError), 'not labelled').to.equal(false);
      expect(pool.state, 'cleared by it').to.equal('paused');
      clock.advance(30_000);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(events.filter((e) => e === 'ServerHeartbeatStarted').length, 'only the first check').to.equal(1);
    } finally {
      await client?.close();
      client = undefined;
      await socks.close();
    }
  });
});
