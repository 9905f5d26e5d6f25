/**
 * The monitor over real sockets against the embedded endpoint (fail points make checks fail), driving a pool
 * through heartbeatActions() into pool.input.
 */
import { expect } from 'chai';
import { createServer, type Socket } from 'net';
import { ObjectId, serialize, type Document } from 'bson';
import { Observable, of, type SchedulerLike } from 'rxjs';
import { ConnectionPool, connectionFactory, type Connection, heartbeatActions, IncompatibleServerError, InvalidOptionError, Monitor, MonitorClosedError, MongoNetworkError, MongoNetworkTimeoutError, MongoServerError, PoolCallbackError, PoolClearedError, WireProtocolError, type ConnectionPoolEvent, type ServerHeartbeatEvent, type ServerMonitoringMode } from '../../lib';
import { EmbeddedServer } from '../../lib/testing';
import { eventually, setFailPoint, startTestEndpoint, stopTestEndpoint } from '../support/endpoint';
import { VirtualClock } from '../../lib/testing';
import type { TestEndpoint } from '../support/endpoint';
import { startWireProxy, type WireProxy } from '../support/wire-proxy';
import { unhandledRejectionsOf } from '../support/unhandled';
import { blockEventLoop } from '../support/blocked-loop';
import { startHostileServer } from '../support/hostile-server';
import { decodeOpMsg, encodeOpMsg } from '../../lib/connection/op-msg';
import { OpCode, writeHeader } from '../../lib/connection/wire-protocol';

describe('Monitor', function () {
  let server: EmbeddedServer;
  let monitor: Monitor | undefined;
  let pool: ConnectionPool | undefined;
  const heartbeats: ServerHeartbeatEvent[] = [];
  const events: ConnectionPoolEvent[] = [];

  beforeEach(async function () {
    server = await new EmbeddedServer().start();
    heartbeats.length = 0;
    events.length = 0;
  });
  afterEach(async function () {
    monitor?.close();
    pool?.close();
    monitor = undefined;
    pool = undefined;
    await server.stop();
  });

  function setUp(connectTimeoutMS = 2000, overrides: Partial<ConstructorParameters<typeof Monitor>[0]> = {}): { monitor: Monitor; pool: ConnectionPool } {
    monitor = new Monitor({ address: server.address, heartbeatFrequencyMS: 500, connectionOptions: { appName: 'monitor', connectTimeoutMS }, ...overrides });
    pool = new ConnectionPool({ address: server.address, connectionOptions: { appName: 'pool' } });
    monitor.heartbeats$.subscribe((e) => heartbeats.push(e));
    pool.events$.subscribe((e) => events.push(e));
    monitor.heartbeats$.pipe(heartbeatActions()).subscribe(pool.input);
    monitor.start();
    return { monitor, pool };
  }

  const count = (type: string): number => [...heartbeats, ...events].filter((e) => e.type === type).length;

  /**
   * Resolves to whether the monitor came to sleep until its next check: its one timer armed on `clock`. A polling
   * monitor arms none while it checks (its connection's timeouts are real timers), so time moved after this moves
   * the sleep, not the check before it.
   */
  const asleep = (clock: VirtualClock): Promise<boolean> => eventually(() => clock.actions.length === 1);

  /**
   * Resolves to whether the monitoring connection has read the server's close of it (it counts as errored): what the
   * monitor's next check finds, at once, without a request.
   */
  const closeRead = (m: Monitor): Promise<boolean> => eventually(() => (m as unknown as { connection: Connection | undefined }).connection?.errored === true);

  it('a `using` declaration closes the monitor when its block is left: heartbeats$ completes and its connection closes', async function () {
    let completed = false;
    {
      using scoped = new Monitor({ address: server.address, heartbeatFrequencyMS: 500 });
      monitor = scoped;
      scoped.heartbeats$.subscribe({ next: (e) => heartbeats.push(e), complete: () => (completed = true) });
      scoped.start();
      expect(await eventually(() => count('ServerHeartbeatSucceeded') === 1)).to.equal(true);
      expect(server.openConnections).to.equal(1);
      expect(completed).to.equal(false);
    }
    expect(completed).to.equal(true);
    expect(await eventually(() => server.openConnections === 0)).to.equal(true);
  });

  it('a server whose wire versions rxcmap does not speak (maxWireVersion 7): each check fails with IncompatibleServerError, one connection per heartbeatFrequencyMS (no immediate retry), the pool never readied', async function () {
    await server.stop();
    server = await new EmbeddedServer({ maxWireVersion: 7 }).start();
    // On a virtual clock: the checks 1.3 s at 500 ms take were counted on the real one, which a loaded runner's pauses
    // could leave with fewer; a retry at once would come without the clock moving.
    const clock = new VirtualClock();
    setUp(2000, { scheduler: clock });
    const failures = (): number => count('ServerHeartbeatFailed');
    expect(await eventually(() => failures() === 1, 5000)).to.equal(true);
    // A retry at once would arm no timer: the monitor would check again without the clock moving.
    expect(await asleep(clock), 'the next check armed on the clock, none at once').to.equal(true);
    await clock.advanceAsync(499);
    expect([count('ServerHeartbeatStarted'), failures()], 'no retry at once, nor before heartbeatFrequencyMS').to.deep.equal([1, 1]);
    for (const n of [2, 3]) {
      clock.advance(n === 2 ? 1 : 500);
      expect(await eventually(() => failures() === n, 5000), `check ${n}`).to.equal(true);
    }
    const failed = heartbeats.filter((e) => e.type === 'ServerHeartbeatFailed') as Extract<ServerHeartbeatEvent, { type: 'ServerHeartbeatFailed' }>[];
    for (const f of failed) expect(f.error).to.be.instanceOf(IncompatibleServerError).and.include({ address: server.address, maxWireVersion: 7 });
    expect(server.connectionsAccepted, 'one connection per check').to.equal(failed.length);
    expect([count('ConnectionPoolReady'), count('ConnectionPoolCleared'), count('ServerHeartbeatSucceeded')]).to.deep.equal([0, 0, 0]);
    expect(await eventually(() => server.openConnections === 0)).to.equal(true);
  });

  it('rejects a heartbeatFrequencyMS below 500 ms', function () {
    expect(() => new Monitor({ address: 'h:1', heartbeatFrequencyMS: 499 })).to.throw(InvalidOptionError, /heartbeatFrequencyMS/);
  });

  it('rejects a misspelt key (naming the closest option), a garbage scheduler and a non-function factory', function () {
    const bad = (options: unknown): (() => Monitor) => () => new Monitor(options as never);
    expect(bad({ address: 'h:1', heartbeatFrequencyMs: 500 })).to.throw(InvalidOptionError, 'Unknown option heartbeatFrequencyMs of Monitor: did you mean heartbeatFrequencyMS?');
    expect(bad({ address: 'h:1', scheduler: {} })).to.throw(InvalidOptionError, /Invalid scheduler: \{\}/);
    expect(bad({ address: 'h:1', connectionFactory: 'tcp' })).to.throw(InvalidOptionError, /Invalid connectionFactory: "tcp"/);
    expect(bad({ address: 'h:1', connectionOptions: 'tls' })).to.throw(InvalidOptionError, /Invalid connectionOptions: "tls"/);
    expect(bad(null)).to.throw(InvalidOptionError, /Invalid options: null/);
  });

  it('a successful check marks the pool ready; Started precedes Succeeded, which carries the reply', async function () {
    const { pool } = setUp();
    expect(await eventually(() => pool.state === 'ready')).to.equal(true);
    expect(heartbeats.slice(0, 2).map((e) => e.type)).to.deep.equal(['ServerHeartbeatStarted', 'ServerHeartbeatSucceeded']);
    const ok = heartbeats[1] as Extract<ServerHeartbeatEvent, { type: 'ServerHeartbeatSucceeded' }>;
    expect(ok.reply.maxWireVersion).to.be.a('number');
    expect(ok.duration).to.be.at.least(0);
    expect(events.map((e) => e.type)).to.include('ConnectionPoolReady');
  });

  it('a failed check clears the pool (no interruption for a command error), and a later success readies it again', async function () {
    const { monitor, pool } = setUp();
    expect(await eventually(() => pool.state === 'ready')).to.equal(true);
    server.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['hello'], errorCode: 91, appName: 'monitor' } });
    monitor.requestCheck();
    expect(await eventually(() => count('ServerHeartbeatFailed') === 1, 3000)).to.equal(true);
    const failed = heartbeats.find((e) => e.type === 'ServerHeartbeatFailed') as Extract<ServerHeartbeatEvent, { type: 'ServerHeartbeatFailed' }>;
    expect(failed.error).to.be.instanceOf(MongoServerError);
    expect(events.find((e) => e.type === 'ConnectionPoolCleared')).to.include({ interruptInUseConnections: false });
    monitor.requestCheck();
    expect(await eventually(() => count('ConnectionPoolReady') === 2, 3000)).to.equal(true);
    expect(pool.generation).to.equal(1);
  });

  it('a check that times out clears the pool interrupting in-use connections', async function () {
    const { monitor, pool } = setUp(300);
    expect(await eventually(() => pool.state === 'ready')).to.equal(true);
    const inUse = await pool.checkOut();
    server.failCommand.configure({
      configureFailPoint: 'failCommand',
      mode: { times: 1 },
      data: { failCommands: ['hello'], blockConnection: true, blockTimeMS: 1500, appName: 'monitor' },
    });
    // Answered long after the clear, which comes about 800 ms in (requestCheck() waits out minHeartbeatFrequencyMS
    // from the last check, then the check times out after connectTimeoutMS); the timer holds no process alive.
    server.handle('slow', () => new Promise((r) => setTimeout(() => r({ ok: 1 }), 10_000).unref()));
    const running = inUse.command('admin', { slow: 1 }).catch((e) => e);
    monitor.requestCheck();
    expect(await eventually(() => count('ConnectionPoolCleared') === 1, 3000)).to.equal(true);
    const failed = heartbeats.find((e) => e.type === 'ServerHeartbeatFailed') as Extract<ServerHeartbeatEvent, { type: 'ServerHeartbeatFailed' }>;
    expect(failed.error).to.be.instanceOf(MongoNetworkTimeoutError);
    expect(events.find((e) => e.type === 'ConnectionPoolCleared')).to.include({ interruptInUseConnections: true });
    const error = await running;
    expect(error).to.be.instanceOf(PoolClearedError);
    expect(error.message).to.equal(`Connection to ${server.address} interrupted due to server monitor timeout`);
    pool.checkIn(inUse);
    expect(events.at(-1)).to.include({ type: 'ConnectionClosed', reason: 'stale' });
  });

  it(`never authenticates its dedicated connection: neither saslSupportedMechs nor speculativeAuthenticate (${process.env.MONGODB_URI ? 'MONGODB_URI' : 'embedded endpoint'})`, async function () {
    const endpoint = await startTestEndpoint();
    if (endpoint.connectionOptions.tls) {
      await endpoint.stop();
      console.log('      skipped: MONGODB_URI uses TLS, which the proxy reading the handshake cannot read');
      return this.skip();
    }
    const handshakes: Record<string, unknown>[] = [];
    const proxy = await startWireProxy(endpoint.address, { request: (cmd) => (cmd.client !== undefined && handshakes.push(cmd), cmd) });
    try {
      monitor = new Monitor({
        address: proxy.address,
        heartbeatFrequencyMS: 500,
        // Credentials no server knows: an attempt to authenticate would fail the check.
        connectionOptions: { ...endpoint.connectionOptions, credentials: { username: 'u', password: 'p' } },
      });
      monitor.heartbeats$.subscribe((e) => heartbeats.push(e));
      monitor.start();
      expect(await eventually(() => count('ServerHeartbeatSucceeded') === 1)).to.equal(true);
      expect(handshakes).to.have.length(1);
      expect(handshakes[0]).to.not.have.property('saslSupportedMechs');
      expect(handshakes[0]).to.not.have.property('speculativeAuthenticate');
      expect(proxy.commands).to.not.include('saslStart');
    } finally {
      monitor?.close();
      await proxy.stop();
      await endpoint.stop();
    }
  });

  it('a connectionFactory failing with something that is not an Error gives a PoolCallbackError, with it as the cause', async function () {
    monitor = new Monitor({ address: server.address, connectionFactory: () => Promise.reject('no route') as never });
    monitor.heartbeats$.subscribe((e) => heartbeats.push(e));
    monitor.start();
    expect(await eventually(() => count('ServerHeartbeatFailed') === 1)).to.equal(true);
    const failed = heartbeats.find((e) => e.type === 'ServerHeartbeatFailed');
    const error = failed?.type === 'ServerHeartbeatFailed' ? failed.error : undefined;
    expect(error).to.be.instanceOf(PoolCallbackError);
    expect(error).to.deep.include({ callback: 'connectionFactory', cause: 'no route' });
    expect(error!.message).to.equal('connectionFactory failed with no route, which is not an Error');
  });

  it('a connectionFactory failing with a value String() cannot write still fails the check, and checking goes on', async function () {
    const clock = new VirtualClock();
    const thrown = Object.create(null) as object;
    monitor = new Monitor({ address: server.address, heartbeatFrequencyMS: 10_000, scheduler: clock, connectionFactory: () => Promise.reject(thrown) as never });
    monitor.heartbeats$.subscribe((e) => heartbeats.push(e));
    const unhandled = await unhandledRejectionsOf(async () => {
      monitor!.start();
      expect(await eventually(() => count('ServerHeartbeatFailed') === 1)).to.equal(true);
      clock.advance(10_000);
      expect(await eventually(() => count('ServerHeartbeatFailed') === 2), 'the next check').to.equal(true);
    });
    expect(unhandled).to.deep.equal([]);
    const failed = heartbeats.find((e) => e.type === 'ServerHeartbeatFailed');
    const error = failed?.type === 'ServerHeartbeatFailed' ? failed.error : undefined;
    expect(error).to.be.instanceOf(PoolCallbackError);
    expect(error).to.deep.include({ callback: 'connectionFactory', cause: thrown });
    expect(error!.message).to.equal('connectionFactory failed with {}, which is not an Error');
  });

  it('polling: sleeps heartbeatFrequencyMS between checks (virtual time), on one dedicated connection', async function () {
    const clock = new VirtualClock();
    monitor = new Monitor({ address: server.address, heartbeatFrequencyMS: 10_000, scheduler: clock, serverMonitoringMode: 'poll' });
    monitor.heartbeats$.subscribe((e) => heartbeats.push(e));
    monitor.start();
    expect(await eventually(() => count('ServerHeartbeatSucceeded') === 1)).to.equal(true);
    expect(await asleep(clock)).to.equal(true);
    await clock.advanceAsync(9_999);
    expect(count('ServerHeartbeatStarted')).to.equal(1);
    clock.advance(1);
    expect(await eventually(() => count('ServerHeartbeatSucceeded') === 2)).to.equal(true);
    expect(server.connectionsAccepted).to.equal(1);
    monitor.close();
    expect(await eventually(() => server.openConnections === 0)).to.equal(true);
  });

  it('polling: a monitoring connection closed while the process was frozen past its next check is replaced by that check, which succeeds: no pool clear', async function () {
    // As on a FaaS platform: the process is frozen between invocations (here, its event loop blocked) long enough for
    // a load balancer's or the server's idle timeout to close the idle monitoring connection; the check comes late.
    const { pool } = setUp(2000, { serverMonitoringMode: 'poll' });
    expect(await eventually(() => pool.state === 'ready')).to.equal(true);
    expect(server.closeConnections((c) => c.appName === 'monitor')).to.equal(1);
    expect(await closeRead(monitor!), 'the client has read the close').to.equal(true);
    blockEventLoop(1_200); // frozen past the next check (due 500 ms after the last), and past twice that
    expect(await eventually(() => count('ServerHeartbeatStarted') === 2 && heartbeats.length === 4)).to.equal(true);
    expect(heartbeats.map((e) => e.type)).to.deep.equal(['ServerHeartbeatStarted', 'ServerHeartbeatSucceeded', 'ServerHeartbeatStarted', 'ServerHeartbeatSucceeded']);
    expect(count('ConnectionPoolCleared')).to.equal(0);
    expect(server.connectionsAccepted, 'a new monitoring connection').to.equal(2);
    expect(monitor!.connectionCount).to.equal(1);
  });

  it('polling: a monitoring connection the server closed between timely checks fails the next check, which clears the pool, as a restart does', async function () {
    const clock = new VirtualClock();
    const { pool } = setUp(2000, { heartbeatFrequencyMS: 10_000, scheduler: clock, serverMonitoringMode: 'poll' });
    expect(await eventually(() => pool.state === 'ready')).to.equal(true);
    expect(server.closeConnections((c) => c.appName === 'monitor')).to.equal(1);
    expect(await closeRead(monitor!), 'the client has read the close').to.equal(true);
    expect(await asleep(clock)).to.equal(true);
    clock.advance(10_000); // on time
    expect(await eventually(() => count('ServerHeartbeatSucceeded') === 2)).to.equal(true);
    expect(heartbeats.map((e) => e.type).slice(2)).to.deep.equal(['ServerHeartbeatStarted', 'ServerHeartbeatFailed', 'ServerHeartbeatStarted', 'ServerHeartbeatSucceeded']);
    expect(count('ConnectionPoolCleared')).to.equal(1);
  });

  it('polling: a server that went down between checks, its port now taken by an endpoint that accepts TCP but never replies, is found at the next check: the pool is cleared at once, not connectTimeoutMS later', async function () {
    // Server monitoring spec, "Retry hello or legacy hello calls once": a network error on the monitoring connection
    // of a server that responded before means a glitch, a restart, or a server that is truly down, and the pool is
    // cleared (all its connections are likely closed too). A proxy or load balancer whose backend died closes the
    // existing connections and goes on accepting new ones: a check that opened a new connection instead would leave
    // the pool ready, and every operation waiting on that endpoint, for connectTimeoutMS.
    const connectTimeoutMS = 5000;
    const clock = new VirtualClock();
    monitor = new Monitor({ address: server.address, heartbeatFrequencyMS: 10_000, scheduler: clock, serverMonitoringMode: 'poll', connectionOptions: { appName: 'monitor', connectTimeoutMS } });
    pool = new ConnectionPool({ address: server.address, connectionOptions: { appName: 'pool', connectTimeoutMS } });
    monitor.heartbeats$.subscribe((e) => heartbeats.push(e));
    pool.events$.subscribe((e) => events.push(e));
    monitor.heartbeats$.pipe(heartbeatActions()).subscribe(pool.input);
    monitor.start();
    expect(await eventually(() => pool!.state === 'ready')).to.equal(true);
    const port = Number(server.address.slice(server.address.lastIndexOf(':') + 1));
    await server.stop(); // every connection closed, the monitoring one included
    const held: Socket[] = [];
    const acceptor = createServer((socket) => held.push(socket));
    await new Promise<void>((resolve) => acceptor.listen(port, '127.0.0.1', resolve));
    try {
      expect(await closeRead(monitor), 'the client has read the close').to.equal(true);
      expect(await asleep(clock)).to.equal(true);
      const checkStarted = Date.now();
      clock.advance(10_000);
      expect(await eventually(() => count('ConnectionPoolCleared') > 0, connectTimeoutMS + 1000)).to.equal(true);
      expect(Date.now() - checkStarted, 'ms from the check to the pool clear').to.be.below(1000);
      const failed = heartbeats.find((e) => e.type === 'ServerHeartbeatFailed') as Extract<ServerHeartbeatEvent, { type: 'ServerHeartbeatFailed' }>;
      expect(failed.error).to.be.instanceOf(MongoNetworkError).and.not.instanceOf(MongoNetworkTimeoutError);
    } finally {
      for (const socket of held) socket.destroy();
      await new Promise((resolve) => acceptor.close(resolve));
    }
  });

  it('a check whose reply arrived while the event loop was blocked past connectTimeoutMS succeeds: no failure, no pool clear', async function () {
    // Server monitoring spec, "Network or command error during server check": a timeout clears the pool, interrupting
    // in-use connections. Node runs the timers that expired during a block before it reads the sockets: the reply,
    // already received, must win. The proxy blocks the process right after it wrote a polling check's reply.
    let blocked = false;
    const proxy = await startWireProxy(server.address, {
      reply: (reply, command) => {
        const check = command.hello !== undefined || command.isMaster !== undefined || command.ismaster !== undefined;
        if (check && command.client === undefined && !blocked) {
          blocked = true;
          process.nextTick(() => blockEventLoop(300));
        }
        return reply;
      },
    });
    try {
      monitor = new Monitor({ address: proxy.address, heartbeatFrequencyMS: 500, serverMonitoringMode: 'poll', connectionOptions: { connectTimeoutMS: 100 } });
      pool = new ConnectionPool({ address: server.address });
      monitor.heartbeats$.subscribe((e) => heartbeats.push(e));
      pool.events$.subscribe((e) => events.push(e));
      monitor.heartbeats$.pipe(heartbeatActions()).subscribe(pool.input);
      monitor.start();
      expect(await eventually(() => count('ServerHeartbeatSucceeded') >= 3 || count('ServerHeartbeatFailed') > 0, 5000)).to.equal(true);
      expect(blocked).to.equal(true);
      const failure = heartbeats.find((e) => e.type === 'ServerHeartbeatFailed');
      expect(failure, failure?.type === 'ServerHeartbeatFailed' ? failure.error.message : '').to.equal(undefined);
      expect(count('ConnectionPoolCleared')).to.equal(0);
    } finally {
      monitor?.close();
      await proxy.stop();
    }
  });

  describe(`cancelCheck() (${process.env.MONGODB_URI ? 'MONGODB_URI' : 'embedded endpoint'})`, function () {
    let endpoint: TestEndpoint;
    /** In front of the endpoint: counts the monitor's connections (skipped over TLS, which it cannot read). */
    let proxy: WireProxy | undefined;
    beforeEach(async function () {
      endpoint = await startTestEndpoint();
      if (endpoint.connectionOptions.tls) {
        console.log('      skipped: MONGODB_URI uses TLS, which the proxy counting connections cannot read');
        return this.skip();
      }
      proxy = await startWireProxy(endpoint.address);
    });
    afterEach(async function () {
      monitor?.close();
      monitor = undefined;
      await proxy?.stop();
      proxy = undefined;
      await stopTestEndpoint(endpoint);
    });
    const open = (): number => proxy!.sockets.accepted - proxy!.sockets.closed;
    /**
     * The hellos and legacy hellos the proxy has passed on to the server: a connection's handshake, and each check of
     * an established monitoring connection (`hello`, or a legacy hello to a server without helloOk).
     */
    const hellosSent = (): number => proxy!.commands.filter((name) => name === 'hello' || name === 'isMaster' || name === 'ismaster').length;

    /**
     * A polling monitor (its subject here is a check's hello), and a way to make the server hold back its next `hello`
     * (sent only on an established monitoring connection) long past the test, as a server gone without a FIN does: the
     * failCommand fail point, blocking.
     */
    function unresponsiveOnDemand(clock: VirtualClock): { monitor: Monitor; stopAnswering: (context: Mocha.Context) => Promise<void> } {
      const appName = 'cancel-check';
      monitor = new Monitor({ address: proxy!.address, heartbeatFrequencyMS: 10_000, scheduler: clock, serverMonitoringMode: 'poll', connectionOptions: { ...endpoint.connectionOptions, appName, connectTimeoutMS: 10_000 } });
      monitor.heartbeats$.subscribe((e) => heartbeats.push(e));
      const stopAnswering = (context: Mocha.Context): Promise<void> =>
        setFailPoint(context, endpoint, { mode: { times: 1 }, data: { failCommands: ['hello'], blockConnection: true, blockTimeMS: 60_000, appName } });
      return { monitor, stopAnswering };
    }

    it('during a check: it fails at once with a MongoNetworkError (cause: the one given), its connection closed, and the next check, on a new connection, comes minHeartbeatFrequencyMS later', async function () {
      const clock = new VirtualClock();
      const { monitor, stopAnswering } = unresponsiveOnDemand(clock);
      monitor.start();
      expect(await eventually(() => count('ServerHeartbeatSucceeded') === 1)).to.equal(true);
      await stopAnswering(this);
      expect(await asleep(clock)).to.equal(true);
      const sent = hellosSent();
      clock.advance(10_000);
      expect(await eventually(() => count('ServerHeartbeatStarted') === 2)).to.equal(true);
      // The check waits on the server: its hello is on its way there, and the fail point holds it back.
      expect(await eventually(() => hellosSent() === sent + 1), 'the check\'s hello sent').to.equal(true);
      const cause = new Error('an application connection was reset');
      monitor.cancelCheck(cause);
      // Not cancelled, the check would wait on the silent server for ever (the clock does not move).
      expect(await eventually(() => count('ServerHeartbeatFailed') === 1, 2000), 'the check ended').to.equal(true);
      const failed = heartbeats.at(-1) as Extract<ServerHeartbeatEvent, { type: 'ServerHeartbeatFailed' }>;
      expect(failed.error).to.be.instanceOf(MongoNetworkError);
      expect(failed.error).to.not.be.instanceOf(MongoNetworkTimeoutError);
      expect(failed.error.cause).to.equal(cause);
      expect(await eventually(() => open() === 0), 'the monitoring connection closed').to.equal(true);
      // The server counts as no longer known: no check at once, but the next one 500 ms after this one ended.
      expect(await asleep(clock), 'the next check armed on the clock, none at once').to.equal(true);
      await clock.advanceAsync(499);
      expect(count('ServerHeartbeatStarted')).to.equal(2);
      clock.advance(1);
      expect(await eventually(() => count('ServerHeartbeatSucceeded') === 2)).to.equal(true);
      expect(proxy!.sockets.accepted, 'connections the monitor opened').to.equal(2);
    });

    it('between checks: closes the monitoring connection (no event), and the next check, on a new connection, comes minHeartbeatFrequencyMS after the last', async function () {
      const clock = new VirtualClock();
      const { monitor } = unresponsiveOnDemand(clock);
      monitor.start();
      expect(await eventually(() => count('ServerHeartbeatSucceeded') === 1)).to.equal(true);
      expect(await asleep(clock)).to.equal(true);
      clock.advance(200);
      monitor.cancelCheck();
      expect(await eventually(() => open() === 0), 'the monitoring connection closed').to.equal(true);
      expect(heartbeats).to.have.length(2);
      await clock.advanceAsync(299);
      expect(count('ServerHeartbeatStarted')).to.equal(1);
      clock.advance(1);
      expect(await eventually(() => count('ServerHeartbeatSucceeded') === 2)).to.equal(true);
      expect(proxy!.sockets.accepted).to.equal(2);
    });

    /** A connection object of a factory's, counting its teardown; `command` answers when `answer` is called. */
    function stubConnection(): { connection: Connection; destroyed: () => boolean; answer: () => void } {
      let destroyed = false;
      let answer: () => void = () => undefined;
      const connection = {
        hello: { isWritablePrimary: true, helloOk: true, maxWireVersion: 25, ok: 1 },
        server: { helloOk: true },
        command: () => new Promise((resolve) => (answer = () => resolve({ ok: 1 }))),
        destroy: () => void (destroyed = true),
      };
      return { connection: connection as unknown as Connection, destroyed: () => destroyed, answer: () => answer() };
    }

    it('as the establishment of its connection completes (any microtask before the check goes on): the check fails, and the connection is closed, never kept nor leaked', async function () {
      for (let depth = 0; depth < 12; depth++) {
        const made: ReturnType<typeof stubConnection>[] = [];
        const seen: string[] = [];
        const m = new Monitor({ address: 'h:1', scheduler: new VirtualClock(), connectionFactory: () => Promise.resolve(made[made.push(stubConnection()) - 1].connection) });
        m.heartbeats$.subscribe((e) => seen.push(e.type));
        m.start();
        for (let i = 0; i < depth; i++) await null;
        const inProgress = seen.length === 1;
        m.cancelCheck(new Error('an application connection was reset'));
        await new Promise((r) => setImmediate(r));
        if (inProgress) expect(seen, `cancelled ${depth} microtasks in`).to.deep.equal(['ServerHeartbeatStarted', 'ServerHeartbeatFailed']);
        expect(made.map((c) => c.destroyed()), `the monitoring connection, cancelled ${depth} microtasks in`).to.deep.equal([true]);
        m.close();
      }
    });

    it('as the reply of its hello arrives, before the check goes on: the check fails, as a check in progress does', async function () {
      const made: ReturnType<typeof stubConnection>[] = [];
      const clock = new VirtualClock();
      monitor = new Monitor({ address: 'h:1', scheduler: clock, connectionFactory: () => Promise.resolve(made[made.push(stubConnection()) - 1].connection) });
      monitor.heartbeats$.subscribe((e) => heartbeats.push(e));
      monitor.start();
      await new Promise((r) => setImmediate(r));
      clock.advance(10_000);
      await new Promise((r) => setImmediate(r));
      expect(heartbeats.map((e) => e.type)).to.deep.equal(['ServerHeartbeatStarted', 'ServerHeartbeatSucceeded', 'ServerHeartbeatStarted']);
      made[0].answer();
      monitor.cancelCheck(new Error('an application connection was reset'));
      await new Promise((r) => setImmediate(r));
      expect(heartbeats.at(-1)?.type).to.equal('ServerHeartbeatFailed');
      expect(made[0].destroyed()).to.equal(true);
    });

    it('before start() and after close(): does nothing', function () {
      monitor = new Monitor({ address: server.address });
      monitor.heartbeats$.subscribe((e) => heartbeats.push(e));
      expect(() => monitor!.cancelCheck()).to.not.throw();
      monitor.close();
      expect(() => monitor!.cancelCheck()).to.not.throw();
      expect(heartbeats).to.deep.equal([]);
    });
  });

  describe('close()', function () {
    it('from a ServerHeartbeatStarted subscriber: the check ends with ServerHeartbeatFailed, opens no connection, and heartbeats$ completes', async function () {
      let established = 0;
      const factory = connectionFactory({ host: '127.0.0.1', port: Number(server.address.split(':')[1]) });
      monitor = new Monitor({
        address: server.address,
        connectionFactory: (d) => {
          established++;
          return factory(d);
        },
      });
      const seen: string[] = [];
      monitor.heartbeats$.subscribe({
        next: (e) => {
          seen.push(e.type);
          if (e.type === 'ServerHeartbeatStarted') monitor!.close();
        },
        complete: () => seen.push('complete'),
      });
      monitor.start();
      // Every promise job the check left has run: a connection it opened would have been asked of the factory by now.
      await new Promise((r) => setImmediate(r));
      // The check ends with the close: its ServerHeartbeatStarted has its ServerHeartbeatFailed.
      expect(seen).to.deep.equal(['ServerHeartbeatStarted', 'ServerHeartbeatFailed', 'complete']);
      expect(established, 'establishments started after close()').to.equal(0);
      expect(server.connectionsAccepted, 'sockets the endpoint accepted').to.equal(0);
    });

    /** A stand-in for a monitoring connection: just what a check reads, and whether it was destroyed. */
    const fakeConnection = (): { connection: Connection; destroyCalls: () => number } => {
      let calls = 0;
      const connection = { id: 0, generation: 0, hello: { ok: 1 }, server: { helloOk: true }, errored: false, destroy: () => void calls++ };
      return { connection: connection as unknown as Connection, destroyCalls: () => calls };
    };

    it('while a Promise factory establishes the connection: the connection it resolves to is destroyed', async function () {
      const { connection, destroyCalls } = fakeConnection();
      let resolve!: (c: Connection) => void;
      monitor = new Monitor({ address: 'h:1', connectionFactory: () => new Promise<Connection>((r) => (resolve = r)) });
      monitor.start();
      monitor.close();
      resolve(connection);
      await new Promise((r) => setImmediate(r)); // the resolved connection has reached the monitor
      expect(destroyCalls(), 'destroy() calls').to.equal(1);
    });

    it('right after the connection was emitted, before the check took it: that connection is destroyed', async function () {
      const { connection, destroyCalls } = fakeConnection();
      // Emitted at once: the connection is on its way to the check when start() returns.
      monitor = new Monitor({ address: 'h:1', connectionFactory: () => of(connection) });
      monitor.start();
      monitor.close();
      await new Promise((r) => setImmediate(r)); // the emitted connection has reached the check
      expect(destroyCalls(), 'destroy() calls').to.equal(1);
    });

    it('while a factory\'s Observable whose `then` cannot be read establishes: close() completes heartbeats$ without throwing', function () {
      const pending = new Observable<Connection>(() => undefined);
      Object.defineProperty(pending, 'then', { get: () => { throw new Error('then cannot be read'); } });
      monitor = new Monitor({ address: 'h:1', connectionFactory: () => pending });
      let completed = false;
      monitor.heartbeats$.subscribe({ complete: () => (completed = true) });
      monitor.start();
      expect(() => monitor!.close()).to.not.throw();
      expect(completed, 'heartbeats$ completed').to.equal(true);
    });

    it('a factory that emits more than one connection: the check keeps the first, every other is destroyed', async function () {
      const first = fakeConnection();
      const second = fakeConnection();
      const third = fakeConnection();
      monitor = new Monitor({ address: 'h:1', heartbeatFrequencyMS: 500, connectionFactory: () => of(first.connection, second.connection, third.connection) });
      const seen: string[] = [];
      monitor.heartbeats$.subscribe((e) => seen.push(e.type));
      monitor.start();
      await new Promise((r) => setImmediate(r)); // the check has taken its connection (the next one is 500 ms away)
      expect(seen).to.deep.equal(['ServerHeartbeatStarted', 'ServerHeartbeatSucceeded']);
      expect([first, second, third].map((c) => c.destroyCalls()), 'destroy() calls while open').to.deep.equal([0, 1, 1]);
      monitor.close();
      expect([first, second, third].map((c) => c.destroyCalls()), 'destroy() calls once closed').to.deep.equal([1, 1, 1]);
    });

    it('a connection whose destroy() throws or returns a rejected Promise: close() still completes heartbeats$, and nothing is left unhandled', async function () {
      const unhandled = await unhandledRejectionsOf(async () => {
        const destroys = [
          async (): Promise<void> => {
            throw new Error('socket already gone');
          },
          (): void => {
            throw new Error('destroy failed');
          },
        ];
        for (const destroy of destroys) {
          for (const closeAt of ['after the check took it', 'before the check took it']) {
            const connection = { id: 0, generation: 0, hello: { ok: 1 }, server: { helloOk: true }, errored: false, destroy };
            const m = new Monitor({ address: 'h:1', heartbeatFrequencyMS: 500, connectionFactory: () => of(connection as unknown as Connection) });
            let completed = false;
            m.heartbeats$.subscribe({ complete: () => (completed = true) });
            m.start();
            if (closeAt === 'after the check took it') await new Promise((r) => setImmediate(r));
            expect(() => m.close(), closeAt).to.not.throw();
            expect(completed, `heartbeats$ completed (${closeAt})`).to.equal(true);
          }
        }
      }, 20);
      expect(unhandled.map(String)).to.deep.equal([]);
    });
  });

  describe(`requestCheck() (${process.env.MONGODB_URI ? 'MONGODB_URI' : 'embedded endpoint'})`, function () {
    let endpoint: TestEndpoint;
    /** A unique appName, so the fail point catches this monitor's connections only (the server may be shared). */
    const appName = `rxcmap-monitor-${process.pid}`;

    before(async function () {
      endpoint = await startTestEndpoint();
    });
    after(() => stopTestEndpoint(endpoint));
    function failPoint(this: Mocha.Context, command: Record<string, unknown>): Promise<void> {
      return setFailPoint(this, endpoint, command);
    }

    it('polling: is ignored while a check is in progress: no extra check 500 ms later, the next one after heartbeatFrequencyMS', async function () {
      // The first check (the handshake of the monitoring connection) is held 200 ms by the server.
      await failPoint.call(this, { mode: { times: 1 }, data: { failCommands: ['hello', 'isMaster'], blockConnection: true, blockTimeMS: 200, appName } });
      const clock = new VirtualClock();
      monitor = new Monitor({ address: endpoint.address, heartbeatFrequencyMS: 10_000, scheduler: clock, connectionOptions: { ...endpoint.connectionOptions, appName }, serverMonitoringMode: 'poll' });
      monitor.heartbeats$.subscribe((e) => heartbeats.push(e));
      monitor.start();
      expect(count('ServerHeartbeatStarted')).to.equal(1);
      monitor.requestCheck();
      expect(await eventually(() => count('ServerHeartbeatSucceeded') === 1)).to.equal(true);
      expect(await asleep(clock)).to.equal(true);
      await clock.advanceAsync(9_999);
      expect(count('ServerHeartbeatStarted'), 'checks started within heartbeatFrequencyMS').to.equal(1);
      clock.advance(1);
      expect(await eventually(() => count('ServerHeartbeatSucceeded') === 2)).to.equal(true);
      // Once no check is in progress, a request is honoured, minHeartbeatFrequencyMS after the last check ended.
      expect(await asleep(clock)).to.equal(true);
      monitor.requestCheck();
      await clock.advanceAsync(499);
      expect(count('ServerHeartbeatStarted')).to.equal(2);
      clock.advance(1);
      expect(await eventually(() => count('ServerHeartbeatSucceeded') === 3)).to.equal(true);
    });
  });
});

/**
 * The monitor's own decisions on virtual time, over scripted connections from its connectionFactory: which timeout
 * each check gets, when the next check starts, what the heartbeat events say of time, what counts as an RTT sample,
 * and that nothing runs on after close(). Each connection answers its commands as `plan.answer` says, at a virtual
 * time; establishing one takes `plan.establish`'s time (the RTT connection is the factory's descriptor id 1).
 */
describe('Monitor on virtual time (scripted connections)', function () {
  interface Answer {
    reply?: Document;
    error?: Error;
    /** Virtual ms until it comes (default 0). */
    afterMS?: number;
    /** Whether more replies follow without a request (a streamed reply). */
    moreToCome?: boolean;
  }
  interface Establishment {
    error?: Error;
    afterMS?: number;
    hello?: Document;
    handshakeDurationMS?: number;
    /** A connection whose `moreToCome` getter throws (a user's factory's). */
    moreToComeThrows?: boolean;
    /** A connection whose `server` getter throws (a user's factory's). */
    serverThrows?: boolean;
  }
  interface Call {
    op: 'command' | 'nextReply';
    at: number;
    command?: Document;
    timeoutMS: unknown;
    exhaustAllowed: unknown;
  }
  const topologyVersion = { processId: new ObjectId(), counter: 0 };

  class ScriptedConnection {
    readonly calls: Call[] = [];
    moreToCome = false;
    destroyed = false;
    constructor(
      readonly id: number,
      readonly hello: Document,
      readonly handshakeDurationMS: number | undefined,
      private readonly clock: VirtualClock,
      private readonly answer: (connection: ScriptedConnection, call: Call) => Answer,
    ) {}
    command(_db: string, command: Document, options: { timeoutMS?: number; exhaustAllowed?: boolean } = {}): Promise<Document> {
      return this.reply({ op: 'command', at: this.clock.now(), command, timeoutMS: options.timeoutMS, exhaustAllowed: options.exhaustAllowed });
    }
    nextReply(options: { timeoutMS?: number } = {}): Promise<Document> {
      return this.reply({ op: 'nextReply', at: this.clock.now(), timeoutMS: options.timeoutMS, exhaustAllowed: undefined });
    }
    destroy(): void {
      this.destroyed = true;
    }
    /** As a handshake records it: the server's id for the connection is its hello's `connectionId`. */
    get server(): { helloOk: boolean; serverConnectionId: number | undefined } {
      return { helloOk: true, serverConnectionId: typeof this.hello.connectionId === 'number' ? this.hello.connectionId : undefined };
    }
    private reply(call: Call): Promise<Document> {
      this.calls.push(call);
      const answer = this.answer(this, call);
      return new Promise((resolve, reject) => {
        this.clock.schedule(() => {
          this.moreToCome = answer.moreToCome === true;
          if (answer.error !== undefined) reject(answer.error);
          else resolve(answer.reply ?? { ok: 1, isWritablePrimary: true });
        }, answer.afterMS ?? 0);
      });
    }
  }

  interface Rig {
    clock: VirtualClock;
    monitor: Monitor;
    heartbeats: ServerHeartbeatEvent[];
    /** The monitoring connections made, in order (descriptor id 0). */
    connections: ScriptedConnection[];
    /** The RTT connections made (descriptor id 1). */
    rttConnections: ScriptedConnection[];
    /** The factory's calls, failed ones included: [time, descriptor id]. */
    establishments: [number, number][];
  }
  let rigged: Rig | undefined;
  afterEach(function () {
    rigged?.monitor.close();
    rigged = undefined;
  });

  /** A monitor on a VirtualClock whose factory makes scripted connections; not started. */
  function rig(
    options: Partial<ConstructorParameters<typeof Monitor>[0]>,
    plan: {
      establish?: (n: number, descriptorId: number) => Establishment;
      answer?: (connection: ScriptedConnection, call: Call) => Answer;
    } = {},
  ): Rig {
    const clock = new VirtualClock();
    const heartbeats: ServerHeartbeatEvent[] = [];
    const connections: ScriptedConnection[] = [];
    const rttConnections: ScriptedConnection[] = [];
    const establishments: [number, number][] = [];
    const factory = (descriptor: { id: number }): Promise<Connection> => {
      establishments.push([clock.now(), descriptor.id]);
      const e = plan.establish?.(establishments.length, descriptor.id) ?? {};
      return new Promise((resolve, reject) => {
        clock.schedule(() => {
          if (e.error !== undefined) return reject(e.error);
          const hello = e.hello ?? { ok: 1, isWritablePrimary: true, maxWireVersion: 21 };
          const c = new ScriptedConnection(establishments.length, hello, e.handshakeDurationMS, clock, plan.answer ?? (() => ({})));
          if (e.serverThrows === true) {
            Object.defineProperty(c, 'server', { get: () => { throw new TypeError('server cannot be read'); } });
          }
          if (e.moreToComeThrows === true) {
            Object.defineProperty(c, 'moreToCome', { get: () => { throw new TypeError('moreToCome cannot be read'); }, set: () => undefined });
          }
          (descriptor.id === 1 ? rttConnections : connections).push(c);
          resolve(c as unknown as Connection);
        }, e.afterMS ?? 0);
      });
    };
    const monitor = new Monitor({ address: 'db:27017', heartbeatFrequencyMS: 10_000, scheduler: clock, connectionFactory: factory, ...options });
    monitor.heartbeats$.subscribe((e) => heartbeats.push(e));
    rigged = { clock, monitor, heartbeats, connections, rttConnections, establishments };
    return rigged;
  }
  const starts = (r: Rig): number[] => r.heartbeats.filter((e) => e.type === 'ServerHeartbeatStarted').map((e) => e.time);
  const networkError = (): MongoNetworkError => new MongoNetworkError('db:27017', 'connection reset');

  it('gives each check its timeout: polling connectTimeoutMS; an awaitable hello and each streamed reply connectTimeoutMS + heartbeatFrequencyMS; none with connectTimeoutMS 0', async function () {
    const poll = rig({ heartbeatFrequencyMS: 500, serverMonitoringMode: 'poll', connectionOptions: { connectTimeoutMS: 300 } });
    poll.monitor.start();
    await poll.clock.advanceAsync(500);
    expect(poll.connections[0].calls.map((c) => [c.op, c.timeoutMS])).to.deep.equal([['command', 300]]);
    poll.monitor.close();

    for (const [connectTimeoutMS, expected] of [[300, 800], [0, 0]]) {
      const stream = rig(
        { heartbeatFrequencyMS: 500, serverMonitoringMode: 'stream', connectionOptions: { connectTimeoutMS } },
        {
          establish: () => ({ hello: { ok: 1, isWritablePrimary: true, topologyVersion } }),
          answer: () => ({ afterMS: 500, moreToCome: true, reply: { ok: 1, isWritablePrimary: true, topologyVersion } }),
        },
      );
      stream.monitor.start();
      await stream.clock.advanceAsync(1_000);
      const calls = stream.connections[0].calls.map((c) => [c.op, c.timeoutMS, c.exhaustAllowed]);
      expect(calls, `connectTimeoutMS ${connectTimeoutMS}`).to.deep.equal([
        ['command', expected, true],
        ['nextReply', expected, undefined],
        ['nextReply', expected, undefined],
      ]);
      expect(stream.monitor.streaming).to.equal(true);
      stream.monitor.close();
    }
  });

  it('gives each heartbeat event the monitoring connection\'s ids: connectionId 0 always, serverConnectionId once the connection\'s handshake gave one', async function () {
    const r = rig(
      { serverMonitoringMode: 'poll' },
      {
        establish: (n) => (n === 1 ? { hello: { ok: 1, isWritablePrimary: true, connectionId: 41 } } : { error: networkError() }),
        answer: () => ({ error: networkError() }),
      },
    );
    r.monitor.start();
    await r.clock.advanceAsync(10_000);
    const ids = r.heartbeats.map((e) => [e.type.replace('ServerHeartbeat', ''), e.connectionId, 'serverConnectionId' in e ? e.serverConnectionId : 'absent']);
    expect(ids).to.deep.equal([
      ['Started', 0, 'absent'], // opening the connection: the server's id is not known yet
      ['Succeeded', 0, 41],
      ['Started', 0, 41],
      ['Failed', 0, 41], // the hello failed on connection 41
      ['Started', 0, 'absent'], // retried at once, on a new connection
      ['Failed', 0, 'absent'], // which could not be established
    ]);
    expect(r.establishments.map(([, id]) => id), 'the id each monitoring connection was made with').to.deep.equal([0, 0]);
  });

  it('leaves serverConnectionId out when the connection\'s server gives one no server sends (not a non-negative safe integer: a user\'s factory\'s connection)', async function () {
    for (const connectionId of [NaN, Infinity, -1, 1.5, 2 ** 53]) {
      const r = rig({ serverMonitoringMode: 'poll' }, { establish: () => ({ hello: { ok: 1, isWritablePrimary: true, connectionId } }) });
      r.monitor.start();
      await r.clock.advanceAsync(1_000);
      expect(r.heartbeats.map((e) => 'serverConnectionId' in e), String(connectionId)).to.deep.equal([false, false]);
      r.monitor.close();
    }
  });

  it('leaves serverConnectionId out when the connection\'s server cannot be read (a user\'s factory\'s connection)', async function () {
    const r = rig({ serverMonitoringMode: 'poll' }, { establish: () => ({ serverThrows: true, hello: { ok: 1, isWritablePrimary: true, connectionId: 7 } }) });
    r.monitor.start();
    await r.clock.advanceAsync(10_000);
    const ids = r.heartbeats.map((e) => [e.type.replace('ServerHeartbeat', ''), e.connectionId, 'serverConnectionId' in e ? e.serverConnectionId : 'absent']);
    expect(ids).to.deep.equal([
      ['Started', 0, 'absent'],
      ['Succeeded', 0, 'absent'],
      ['Started', 0, 'absent'],
      ['Failed', 0, 'absent'], // its hello cannot be sent: which command to use is read from `server` too
    ]);
    expect(String((r.heartbeats[3] as { error?: unknown }).error)).to.equal('TypeError: server cannot be read');
  });

  it('gives a streamed reply the duration of the server\'s wait for it, not the time since the stream began', async function () {
    const r = rig(
      { heartbeatFrequencyMS: 500, serverMonitoringMode: 'stream' },
      {
        establish: () => ({ afterMS: 5, hello: { ok: 1, isWritablePrimary: true, topologyVersion } }),
        answer: () => ({ afterMS: 500, moreToCome: true, reply: { ok: 1, isWritablePrimary: true, topologyVersion } }),
      },
    );
    r.monitor.start();
    await r.clock.advanceAsync(1_505);
    const succeeded = r.heartbeats.filter((e) => e.type === 'ServerHeartbeatSucceeded').map((e) => [e.time, e.awaited, 'duration' in e ? e.duration : undefined]);
    expect(succeeded).to.deep.equal([
      [5, false, 5],
      [505, true, 500],
      [1005, true, 500],
      [1505, true, 500],
    ]);
    r.monitor.close();
  });

  it('times its heartbeat events on its scheduler: time is the end, duration the virtual time the check took', async function () {
    let n = 0;
    const r = rig({ serverMonitoringMode: 'poll' }, { establish: () => ({ afterMS: 25 }), answer: () => (++n === 1 ? { afterMS: 40 } : { afterMS: 70, error: new MongoServerError({ ok: 0, code: 91, errmsg: 'shutting down' }) }) });
    r.clock.advance(1_000);
    r.monitor.start();
    await r.clock.advanceAsync(10_100);
    // Two samples (the establishment's 25 ms, the connection recording no handshake duration, and the check's 40 ms).
    expect(r.monitor.minRoundTripTimeMS).to.equal(25);
    await r.clock.advanceAsync(20_000);
    const shape = r.heartbeats.slice(0, 6).map((e) => [e.type.replace('ServerHeartbeat', ''), e.time, 'duration' in e ? e.duration : undefined]);
    expect(shape).to.deep.equal([
      ['Started', 1_000, undefined],
      ['Succeeded', 1_025, 25], // the connection's establishment is the first check
      ['Started', 11_025, undefined],
      ['Succeeded', 11_065, 40],
      ['Started', 21_065, undefined],
      ['Failed', 21_135, 70],
    ]);
  });

  it('gives a check that opens the monitoring connection the duration of its handshake hello, its RTT sample, not of the connect before it', async function () {
    // 25 ms to establish, of which the handshake hello took 6 (the TCP connect and TLS handshake the rest).
    const r = rig({ serverMonitoringMode: 'poll' }, { establish: () => ({ afterMS: 25, handshakeDurationMS: 6 }), answer: () => ({ afterMS: 40 }) });
    r.monitor.start();
    await r.clock.advanceAsync(10_100);
    const succeeded = r.heartbeats.filter((e) => e.type === 'ServerHeartbeatSucceeded').map((e) => [e.time, e.awaited, 'duration' in e ? e.duration : undefined]);
    expect(succeeded, 'the time is still the check\'s end').to.deep.equal([
      [25, false, 6],
      [10_065, false, 40],
    ]);
    expect(r.monitor.minRoundTripTimeMS, 'the same measurements as the samples').to.equal(6);
  });

  it('after a network error, checks again at once only a server that was known: not at the first check, nor again after a failed retry', async function () {
    let n = 0;
    const r = rig(
      { serverMonitoringMode: 'poll' },
      { establish: (k) => (k === 1 || k === 3 ? { error: networkError() } : {}), answer: () => ({ afterMS: 5, error: ++n === 1 ? networkError() : undefined }) },
    );
    r.monitor.start();
    await r.clock.advanceAsync(31_000);
    const trail = r.heartbeats.map((e) => `${e.type.replace('ServerHeartbeat', '')}@${e.time}`);
    expect(trail).to.deep.equal([
      'Started@0', 'Failed@0', // the first establishment fails: the server was never known, so no retry at once
      'Started@10000', 'Succeeded@10000', // known from here
      'Started@20000', 'Failed@20005', // a network error on a known server: the next check at once
      'Started@20005', 'Failed@20005', // that retry fails to connect: the server is no longer known
      'Started@30005', 'Succeeded@30005',
    ]);
  });

  it('streaming on after a failure waits out minHeartbeatFrequencyMS from that failure, the new connection\'s establishment included', async function () {
    let commands = 0;
    const r = rig(
      { serverMonitoringMode: 'stream', heartbeatFrequencyMS: 10_000 },
      {
        establish: (k, id) => (id === 1 ? { error: networkError() } : { afterMS: k === 1 ? 0 : 150, hello: { ok: 1, isWritablePrimary: true, topologyVersion } }),
        // The first awaitable hello fails (a network error after 100 ms), the next is held by the server.
        answer: () => (++commands === 1 ? { afterMS: 100, error: networkError() } : { afterMS: 60_000 }),
      },
    );
    r.monitor.start();
    await r.clock.advanceAsync(300);
    expect(r.monitor.streaming, 'streaming (topologyVersion known), between the handshake and the awaitable hello').to.equal(true);
    r.monitor.requestCheck(); // a request does not shorten the pause
    await r.clock.advanceAsync(1_700);
    // Failed at 100; the retry's connection is established at 250 (its handshake the successful check); the
    // awaitable hello on it goes out at 100 + 500 = 600, not 250 + 500.
    expect(r.connections.map((c) => c.calls.map((call) => call.at))).to.deep.equal([[0], [600]]);
  });

  it('streaming on after a failure, the scheduler\'s clock set back meanwhile (a wall clock set back an hour): waits minHeartbeatFrequencyMS at most, not the hour', async function () {
    let commands = 0;
    let back = 0;
    let r: Rig | undefined;
    // The scheduler a user may give (RxJS's asyncScheduler reads Date.now()), over the rig's virtual clock.
    const wall: SchedulerLike = {
      now: () => (r?.clock.now() ?? 0) - back,
      schedule: ((work: never, delay?: number, state?: never) => r!.clock.schedule(work, delay, state)) as SchedulerLike['schedule'],
    };
    r = rig(
      { serverMonitoringMode: 'stream', heartbeatFrequencyMS: 10_000, scheduler: wall },
      {
        establish: (k, id) => (id === 1 ? { error: networkError() } : { afterMS: k === 1 ? 0 : 150, hello: { ok: 1, isWritablePrimary: true, topologyVersion } }),
        answer: () => (++commands === 1 ? { afterMS: 100, error: networkError() } : { afterMS: 60_000 }),
      },
    );
    r.monitor.start();
    // The awaitable hello fails at 100; the clock goes back an hour before the retry's connection is made, at 250.
    await r.clock.advanceAsync(150);
    back = 3_600_000;
    await r.clock.advanceAsync(1_850);
    // How long ago the failure was is unknown then: the pause is minHeartbeatFrequencyMS in full, from 250.
    expect(r.connections.map((c) => c.calls.map((call) => call.at))).to.deep.equal([[0], [750]]);
  });

  it('takes no RTT sample from a streamed reply, whose duration is the server\'s wait', async function () {
    const r = rig(
      { serverMonitoringMode: 'stream', heartbeatFrequencyMS: 10_000 },
      {
        // The RTT connection never comes: the samples are the monitoring connection's alone.
        establish: (_k, id) => (id === 1 ? { error: networkError() } : { handshakeDurationMS: 5, hello: { ok: 1, isWritablePrimary: true, topologyVersion } }),
        answer: () => ({ afterMS: 9_000, moreToCome: true, reply: { ok: 1, isWritablePrimary: true, topologyVersion } }),
      },
    );
    r.monitor.start();
    await r.clock.advanceAsync(120_000);
    expect(r.heartbeats.filter((e) => e.type === 'ServerHeartbeatSucceeded' && e.awaited)).to.have.length.above(10);
    expect(r.monitor.minRoundTripTimeMS, 'one sample (the handshake\'s 5 ms): no minimum yet').to.equal(0);
  });

  it('streaming: requestCheck() while it waits for the server\'s next reply is ignored: no hello sent, no check started, however often it is called', async function () {
    const run = async (requests: boolean): Promise<{ starts: number[]; calls: string[][] }> => {
      const r = rig(
        { serverMonitoringMode: 'stream', heartbeatFrequencyMS: 10_000 },
        {
          establish: (_k, id) => (id === 1 ? { error: networkError() } : { hello: { ok: 1, isWritablePrimary: true, topologyVersion } }),
          // The server streams a reply every 9 s on the awaitable hello.
          answer: () => ({ afterMS: 9_000, moreToCome: true, reply: { ok: 1, isWritablePrimary: true, topologyVersion } }),
        },
      );
      r.monitor.start();
      for (let t = 0; t < 40_000; t += 100) {
        if (requests) r.monitor.requestCheck();
        await r.clock.advanceAsync(100);
      }
      const result = { starts: starts(r), calls: r.connections.map((c) => c.calls.map((call) => `${call.op}@${call.at}`)) };
      r.monitor.close();
      return result;
    };
    const quiet = await run(false);
    const asked = await run(true);
    expect(quiet.calls, 'one awaitable hello, then streamed replies').to.deep.equal([['command@0', 'nextReply@9000', 'nextReply@18000', 'nextReply@27000', 'nextReply@36000']]);
    expect(asked, '400 requests changed nothing').to.deep.equal(quiet);
  });

  it('a check requested after the scheduler\'s clock went back (a wall clock set back an hour) runs within minHeartbeatFrequencyMS, not an hour later', async function () {
    const clock = new VirtualClock();
    // The scheduler a user may give (RxJS's asyncScheduler reads Date.now()): its now() steps back 1 h at 2000 ms.
    let back = 0;
    const wall: SchedulerLike = { now: () => clock.now() - back, schedule: clock.schedule.bind(clock) as SchedulerLike['schedule'] };
    let n = 0;
    const factory = (): Promise<Connection> => Promise.resolve(new ScriptedConnection(++n, { ok: 1, isWritablePrimary: true, maxWireVersion: 21 }, undefined, clock, () => ({})) as unknown as Connection);
    const m = new Monitor({ address: 'db:27017', heartbeatFrequencyMS: 10_000, scheduler: wall, connectionFactory: factory, serverMonitoringMode: 'poll' });
    const started: number[] = [];
    m.heartbeats$.subscribe((e) => void (e.type === 'ServerHeartbeatStarted' && started.push(clock.now())));
    try {
      m.start();
      await clock.advanceAsync(2_000);
      back = 3_600_000;
      m.requestCheck();
      await clock.advanceAsync(600);
      // How long ago the last check ended is unknown then: the request waits out minHeartbeatFrequencyMS in full.
      expect(started, 'the requested check').to.deep.equal([0, 2_500]);
    } finally {
      m.close();
    }
  });

  /** A polling monitor on `clock` whose scheduler's now() reads `back()` ms behind it (a wall clock set back); its check starts. */
  function wallClockMonitor(clock: VirtualClock, back: () => number): { m: Monitor; started: number[] } {
    const wall: SchedulerLike = { now: () => clock.now() - back(), schedule: clock.schedule.bind(clock) as SchedulerLike['schedule'] };
    let n = 0;
    const factory = (): Promise<Connection> => Promise.resolve(new ScriptedConnection(++n, { ok: 1, isWritablePrimary: true, maxWireVersion: 21 }, undefined, clock, () => ({})) as unknown as Connection);
    const m = new Monitor({ address: 'db:27017', heartbeatFrequencyMS: 10_000, scheduler: wall, connectionFactory: factory, serverMonitoringMode: 'poll' });
    const started: number[] = [];
    m.heartbeats$.subscribe((e) => void (e.type === 'ServerHeartbeatStarted' && started.push(clock.now())));
    return { m, started };
  }

  it('the scheduler\'s clock set back (a wall clock set back an hour): a check requested again and again, as each refused connect asks, runs minHeartbeatFrequencyMS after the first request, not after the last', async function () {
    const clock = new VirtualClock();
    let back = 0;
    const { m, started } = wallClockMonitor(clock, () => back);
    try {
      m.start();
      await clock.advanceAsync(2_000);
      back = 3_600_000;
      // Requested every 100 ms, as a pool under load meets one refused connect after another.
      for (let t = 2_000; t < 3_000; t += 100) {
        m.requestCheck();
        await clock.advanceAsync(100);
      }
      expect(started[1], 'the check the first request asked for').to.equal(2_500);
    } finally {
      m.close();
    }
  });

  it('the scheduler\'s clock set back (a wall clock set back an hour): a check requested shortly before the periodic one does not postpone it', async function () {
    const clock = new VirtualClock();
    let back = 0;
    const { m, started } = wallClockMonitor(clock, () => back);
    try {
      m.start();
      await clock.advanceAsync(9_800);
      back = 3_600_000;
      m.requestCheck();
      await clock.advanceAsync(1_000);
      expect(started, 'the periodic check, at heartbeatFrequencyMS').to.deep.equal([0, 10_000]);
    } finally {
      m.close();
    }
  });

  it('honours a check requested just after a check ended, before the monitor went to sleep', async function () {
    const r = rig({ serverMonitoringMode: 'poll' });
    let asked = false;
    r.monitor.heartbeats$.subscribe((e) => {
      if (e.type === 'ServerHeartbeatSucceeded' && !asked) {
        asked = true;
        queueMicrotask(() => r.monitor.requestCheck()); // the check has ended; the monitor is not asleep yet
      }
    });
    r.monitor.start();
    await r.clock.advanceAsync(600);
    expect(starts(r)).to.deep.equal([0, 500]);
  });

  it('cancelCheck() during a check fails it with a MongoNetworkError that says so', async function () {
    const r = rig({ serverMonitoringMode: 'poll' }, { answer: () => ({ afterMS: 1_000 }) });
    r.monitor.start();
    await r.clock.advanceAsync(10_100);
    r.monitor.cancelCheck(new Error('an application connection was reset'));
    await r.clock.advanceAsync(0);
    const failed = r.heartbeats.find((e) => e.type === 'ServerHeartbeatFailed') as Extract<ServerHeartbeatEvent, { type: 'ServerHeartbeatFailed' }>;
    expect(failed.error).to.be.instanceOf(MongoNetworkError);
    expect(failed.error.message).to.equal('the check of db:27017 was cancelled and its monitoring connection closed');
    expect(failed.duration).to.equal(100);
  });

  it('a connection whose moreToCome cannot be read is polled: one outcome per check, the monitor goes on, nothing is left unhandled', async function () {
    const r = rig({ serverMonitoringMode: 'stream' }, { establish: () => ({ moreToComeThrows: true }) });
    const unhandled = await unhandledRejectionsOf(async () => {
      r.monitor.start();
      await r.clock.advanceAsync(20_000);
    });
    expect(unhandled).to.deep.equal([]);
    expect(r.heartbeats.map((e) => `${e.type.replace('ServerHeartbeat', '')}@${e.time}`), 'one outcome per check').to.deep.equal([
      'Started@0', 'Succeeded@0', 'Started@10000', 'Succeeded@10000', 'Started@20000', 'Succeeded@20000',
    ]);
    expect(r.establishments, 'one connection, polled').to.have.length(1);
    expect(r.monitor.streaming).to.equal(false);
  });

  it('start() twice runs one check at a time on one connection', async function () {
    const r = rig({ serverMonitoringMode: 'poll' }, { establish: () => ({ afterMS: 50 }) });
    r.monitor.start();
    r.monitor.start();
    expect(r.monitor.connectionCount, 'while its connection is being established').to.equal(1);
    await r.clock.advanceAsync(10_100);
    expect(starts(r)).to.deep.equal([0, 10_050]);
    expect(r.establishments).to.have.length(1);
    expect(r.monitor.connectionCount).to.equal(1);
  });

  it('streaming: runs an RTT connection beside the monitoring one, and closes it once the server stops streaming', async function () {
    let replies = 0;
    const r = rig(
      { serverMonitoringMode: 'stream', heartbeatFrequencyMS: 10_000 },
      {
        establish: (_k, id) => ({ hello: id === 1 ? { ok: 1 } : { ok: 1, isWritablePrimary: true, topologyVersion } }),
        // Streamed replies every 4 s; the fifth carries no topologyVersion (a server that no longer streams).
        answer: (c) => (c.id !== 1 ? {} : ++replies < 5 ? { afterMS: 4_000, moreToCome: true, reply: { ok: 1, topologyVersion } } : { afterMS: 4_000, reply: { ok: 1 } }),
      },
    );
    r.monitor.start();
    await r.clock.advanceAsync(12_000);
    expect(r.monitor.streaming).to.equal(true);
    expect(r.rttConnections, 'the RTT connection, opened heartbeatFrequencyMS after streaming began').to.have.length(1);
    expect(r.monitor.connectionCount).to.equal(2);
    await r.clock.advanceAsync(8_000);
    expect(r.monitor.streaming).to.equal(false);
    expect(r.rttConnections[0].destroyed, 'polling runs no RTT connection').to.equal(true);
    expect(r.monitor.connectionCount).to.equal(1);
  });

  describe('close()', function () {
    it('ends a check in progress with ServerHeartbeatFailed (MonitorClosedError), polling and streaming: every Started has its end, no clear, no check after', async function () {
      type Plan = Parameters<typeof rig>[1];
      const streamed = { hello: { ok: 1, isWritablePrimary: true, topologyVersion } };
      // [mode, state closed in, plan, virtual ms before the state, awaited of the check in progress (none: asleep)]
      const cases: [ServerMonitoringMode, string, Plan, number, boolean | undefined][] = [
        ['poll', 'establishing its connection', { establish: () => ({ afterMS: 60_000 }) }, 0, false],
        ['poll', 'its hello in flight', { answer: () => ({ afterMS: 60_000 }) }, 10_000, false],
        ['poll', 'asleep between checks', {}, 0, undefined],
        ['stream', 'establishing its connection', { establish: () => ({ ...streamed, afterMS: 60_000 }) }, 0, false],
        ['stream', 'waiting on the server\'s next reply', { establish: () => streamed, answer: () => ({ afterMS: 10_000, moreToCome: true, reply: streamed.hello }) }, 0, true],
      ];
      const closesAt = [0, 1, 250, 4_321, 9_999];
      for (const [mode, state, plan, before, awaited] of cases) {
        for (const k of closesAt) {
          const label = `${mode}, closed ${k} ms into ${state}`;
          const r = rig({ serverMonitoringMode: mode }, plan);
          const actions: string[] = [];
          r.monitor.heartbeats$.pipe(heartbeatActions()).subscribe((a) => actions.push(a.type));
          r.monitor.start();
          await r.clock.advanceAsync(before);
          await r.clock.advanceAsync(k);
          const seen = r.heartbeats.length;
          r.monitor.close();
          const count = (type: string): number => r.heartbeats.filter((e) => e.type === type).length;
          expect(count('ServerHeartbeatStarted'), label).to.equal(count('ServerHeartbeatSucceeded') + count('ServerHeartbeatFailed'));
          const published = r.heartbeats.slice(seen);
          if (awaited === undefined) expect(published, label).to.deep.equal([]);
          else {
            expect(published.map((e) => e.type), label).to.deep.equal(['ServerHeartbeatFailed']);
            const failed = published[0] as Extract<ServerHeartbeatEvent, { type: 'ServerHeartbeatFailed' }>;
            expect(failed.error, label).to.be.instanceOf(MonitorClosedError);
            expect(failed.error.message).to.equal('The monitor of db:27017 was closed while its check was in progress');
            expect({ awaited: failed.awaited, duration: failed.duration, time: failed.time }, label).to.deep.equal({ awaited, duration: k, time: before + k });
          }
          expect(actions, `${label}: the pool actions`).to.not.include('clear');
          const establishments = r.establishments.length;
          await r.clock.advanceAsync(60_000);
          expect(r.establishments.length, `${label}: establishments after close()`).to.equal(establishments);
          expect(r.heartbeats.length, `${label}: events after close()`).to.equal(seen + (awaited === undefined ? 0 : 1));
        }
      }
    });

    it('while its connection is being established: counts no connection from then on, and cancelCheck() likewise', async function () {
      const closing = rig({ serverMonitoringMode: 'poll' }, { establish: () => ({ afterMS: 60_000 }) });
      closing.monitor.start();
      expect(closing.monitor.connectionCount).to.equal(1);
      closing.monitor.close();
      expect(closing.monitor.connectionCount, 'after close()').to.equal(0);

      const cancelling = rig({ serverMonitoringMode: 'poll' }, { establish: () => ({ afterMS: 60_000 }) });
      cancelling.monitor.start();
      cancelling.monitor.cancelCheck();
      await cancelling.clock.advanceAsync(0);
      expect(cancelling.monitor.connectionCount, 'after cancelCheck(), until the next check').to.equal(0);
    });

    it('from a heartbeats$ subscriber: every later subscriber still gets that event first, then the end close() gives its check, then the completion', async function () {
      for (const closeOn of ['ServerHeartbeatStarted', 'ServerHeartbeatSucceeded'] as const) {
        const r = rig({ serverMonitoringMode: 'poll' });
        const closer: string[] = [];
        const later: string[] = [];
        r.monitor.heartbeats$.subscribe({
          next: (e) => {
            closer.push(e.type);
            if (e.type === closeOn) r.monitor.close();
          },
          complete: () => closer.push('complete'),
        });
        r.monitor.heartbeats$.subscribe({ next: (e) => later.push(e.type), complete: () => later.push('complete') });
        r.monitor.start();
        await r.clock.advanceAsync(0);
        const expected = closeOn === 'ServerHeartbeatStarted' ? ['ServerHeartbeatStarted', 'ServerHeartbeatFailed', 'complete'] : ['ServerHeartbeatStarted', 'ServerHeartbeatSucceeded', 'complete'];
        expect(closer, `closed on ${closeOn}: the closing subscriber`).to.deep.equal(expected);
        expect(later, `closed on ${closeOn}: a later subscriber`).to.deep.equal(expected);
        expect(r.heartbeats.map((e) => e.type), `closed on ${closeOn}: the first subscriber`).to.deep.equal(expected.slice(0, 2));
      }
    });

    it('from a ServerHeartbeatSucceeded subscriber while streaming: no RTT connection is opened later, no timer is left', async function () {
      const r = rig(
        { serverMonitoringMode: 'stream' },
        { establish: () => ({ hello: { ok: 1, isWritablePrimary: true, topologyVersion } }) },
      );
      r.monitor.heartbeats$.subscribe((e) => {
        if (e.type === 'ServerHeartbeatSucceeded') r.monitor.close();
      });
      r.monitor.start();
      await r.clock.advanceAsync(0);
      expect(r.clock.actions, 'timers left').to.have.length(0);
      await r.clock.advanceAsync(30_000);
      expect(r.establishments).to.deep.equal([[0, 0]]);
      expect(r.connections[0].destroyed).to.equal(true);
    });

    it('from a ServerHeartbeatSucceeded subscriber while polling: the monitor does not go to sleep, no timer is left', async function () {
      const r = rig({ serverMonitoringMode: 'poll' });
      r.monitor.heartbeats$.subscribe((e) => {
        if (e.type === 'ServerHeartbeatSucceeded') r.monitor.close();
      });
      r.monitor.start();
      await r.clock.advanceAsync(0);
      expect(r.clock.actions, 'timers left').to.have.length(0);
    });

    it('while sleeping between checks, or pausing after a failure before streaming on: ends the wait, no timer is left', async function () {
      const sleeping = rig({ serverMonitoringMode: 'poll' });
      sleeping.monitor.start();
      await sleeping.clock.advanceAsync(100);
      expect(sleeping.clock.actions, 'asleep').to.have.length(1);
      sleeping.monitor.close();
      expect(sleeping.clock.actions, 'timers left after close() during the sleep').to.have.length(0);

      let commands = 0;
      const pausing = rig(
        { serverMonitoringMode: 'stream' },
        {
          establish: (_k, id) => (id === 1 ? { error: networkError() } : { hello: { ok: 1, isWritablePrimary: true, topologyVersion } }),
          answer: () => (++commands === 1 ? { afterMS: 100, error: networkError() } : {}),
        },
      );
      pausing.monitor.start();
      await pausing.clock.advanceAsync(200); // failed at 100, reconnected at once, pausing until 600
      expect(pausing.connections).to.have.length(2);
      expect(pausing.clock.actions, 'pausing, and the RTT task\'s next round').to.have.length(2);
      pausing.monitor.close();
      expect(pausing.clock.actions, 'timers left after close() during the pause').to.have.length(0);
    });
  });

  it('refuses a heartbeatFrequencyMS that is not a finite number of ms >= 500, and bad options, saying what is allowed', function () {
    for (const heartbeatFrequencyMS of ['500', Number.NaN, Infinity, 499]) {
      expect(() => new Monitor({ address: 'h:1', heartbeatFrequencyMS: heartbeatFrequencyMS as number }), String(heartbeatFrequencyMS))
        .to.throw(InvalidOptionError, /heartbeatFrequencyMS.*a number of ms >= 500/);
    }
    expect(() => new Monitor(null as never)).to.throw(InvalidOptionError, /an object with at least an address/);
    expect(() => new Monitor({ address: 'h:1', connectionOptions: { conectTimeoutMS: 1 } as never })).to.throw(InvalidOptionError, 'Unknown option connectionOptions.conectTimeoutMS of Monitor: did you mean connectTimeoutMS?');
    expect(() => new Monitor({ address: 'h:1', connectionFactory: 'tcp' as never })).to.throw(InvalidOptionError, /a function \(descriptor\) => ObservableInput<Connection>/);
  });
});

describe('Monitor: a hello reply holding a value that cannot be read', function () {
  it('fails the check with a network error, so a known server is checked again at once', async function () {
    // { isWritablePrimary, helloOk, maxWireVersion, ok: 1, me: "a\xff\xfeb" }: whole BSON, a string not valid UTF-8.
    const hello = { isWritablePrimary: true, helloOk: true, maxWireVersion: 21, ok: 1 };
    const unreadable = (responseTo: number): Buffer => {
      const doc = Buffer.from(serialize({ ...hello, me: 'aXYb' }));
      doc.set([0xff, 0xfe], doc.indexOf('aXYb') + 1);
      const out = Buffer.concat([Buffer.alloc(21), doc]);
      writeHeader(out, { messageLength: out.length, requestId: 7, responseTo, opCode: OpCode.OP_MSG });
      return out;
    };
    const server = await startHostileServer({
      at: 'handshake',
      misbehaviour: {
        kind: 'answer',
        answer: (request, socket) => {
          const handshake = decodeOpMsg(request.body).document.client !== undefined;
          socket.write(handshake ? encodeOpMsg(1, request.header.requestId, hello) : unreadable(request.header.requestId));
        },
      },
    });
    // On a virtual clock: the polling check comes when the test moves it, and a check heartbeatFrequencyMS after the
    // failure never would (a 250 ms wait for it on the real clock raced a loaded machine's pauses).
    const clock = new VirtualClock();
    const monitor = new Monitor({ address: server.address, heartbeatFrequencyMS: 500, serverMonitoringMode: 'poll', scheduler: clock });
    const heartbeats: { type: string; time: number; error?: Error }[] = [];
    monitor.heartbeats$.subscribe((e) => heartbeats.push({ type: e.type, time: performance.now(), error: 'error' in e ? e.error : undefined }));
    try {
      monitor.start();
      expect(await eventually(() => heartbeats.some((e) => e.type === 'ServerHeartbeatSucceeded'), 5000)).to.equal(true);
      clock.advance(500);
      expect(await eventually(() => heartbeats.some((e) => e.type === 'ServerHeartbeatFailed'), 5000)).to.equal(true);
      const failed = heartbeats.find((e) => e.type === 'ServerHeartbeatFailed')!;
      expect(failed.error).to.be.instanceOf(MongoNetworkError);
      expect(failed.error!.message).to.match(/failed: wire-protocol error: the hello reply holds a value that cannot be read/);
      expect(failed.error!.cause).to.be.instanceOf(WireProtocolError);
      // Checked again at once on a new connection, not heartbeatFrequencyMS later.
      expect(await eventually(() => heartbeats.filter((e) => e.type === 'ServerHeartbeatSucceeded').length >= 2, 5000)).to.equal(true);
    } finally {
      monitor.close();
      await server.close();
    }
  });
});
