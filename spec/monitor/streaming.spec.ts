/**
 * The streaming protocol: against a 4.4+ server (the embedded endpoint), the monitor sends awaitable hellos with
 * exhaustAllowed and turns every reply the server streams into an `awaited` heartbeat, so a pool following it learns
 * of a change at once instead of heartbeatFrequencyMS later. serverMonitoringMode picks the protocol (auto polls on a
 * FaaS platform); hostile servers check the error handling of streamed replies.
 */
import { expect } from 'chai';
import type * as net from 'node:net';
import { ObjectId } from 'bson';
import { ConnectionPool, heartbeatActions, InvalidOptionError, Monitor, MonitorClosedError, MongoNetworkError, MongoNetworkTimeoutError, MongoServerError, type ConnectionPoolEvent, type ServerHeartbeatEvent } from '../../lib';
import { encodeOpMsg, OpMsgFlag } from '../../lib/connection/op-msg';
import { WireProtocolError } from '../../lib/connection/wire-protocol';
import { EmbeddedServer, VirtualClock } from '../../lib/testing';
import { eventually } from '../support/endpoint';
import { startHostileServer, type HostileServer } from '../support/hostile-server';
import { startTcpFaultProxy } from '../support/tcp-fault-proxy';

type Failed = Extract<ServerHeartbeatEvent, { type: 'ServerHeartbeatFailed' }>;

describe('Monitor: streaming protocol', function () {
  let server: EmbeddedServer;
  let monitor: Monitor | undefined;
  let pool: ConnectionPool | undefined;
  let heartbeats: ServerHeartbeatEvent[];
  let events: ConnectionPoolEvent[];

  beforeEach(async function () {
    server = await new EmbeddedServer().start();
    heartbeats = [];
    events = [];
  });
  afterEach(async function () {
    monitor?.close();
    pool?.close();
    monitor = undefined;
    pool = undefined;
    await server.stop();
  });

  /** A monitor (appName "monitor", heartbeatFrequencyMS 10000 unless given) driving a pool, started. */
  function setUp(options: Partial<ConstructorParameters<typeof Monitor>[0]> = {}, address = server.address): Monitor {
    monitor = new Monitor({ address, heartbeatFrequencyMS: 10_000, connectionOptions: { appName: 'monitor', connectTimeoutMS: 2000 }, ...options });
    pool = new ConnectionPool({ address, connectionOptions: { appName: 'pool' } });
    monitor.heartbeats$.subscribe((e) => record(e));
    pool.events$.subscribe((e) => events.push(e));
    monitor.heartbeats$.pipe(heartbeatActions()).subscribe(pool.input);
    monitor.start();
    return monitor;
  }
  const shape = (): string[] => heartbeats.map((e) => `${e.type.replace('ServerHeartbeat', '')}:${e.awaited}`);
  /** The connections the server had accepted as each heartbeat was seen. */
  const acceptedAt = new WeakMap<ServerHeartbeatEvent, number>();
  const record = (e: ServerHeartbeatEvent): void => {
    heartbeats.push(e);
    acceptedAt.set(e, server.connectionsAccepted);
  };
  /**
   * The check after the heartbeat at `index`: the ms from that heartbeat to its start on the monitor's clock, and the
   * connections the server had accepted as it started. Timed by the events rather than by a test timer racing the
   * monitor's, which a loaded machine's pause could let the monitor's win.
   */
  async function nextCheck(index: number): Promise<{ afterMS: number; accepted: number }> {
    const started = (): ServerHeartbeatEvent | undefined => heartbeats.slice(index + 1).find((e) => e.type === 'ServerHeartbeatStarted');
    expect(await eventually(() => started() !== undefined, 5000), 'the next check').to.equal(true);
    const next = started()!;
    return { afterMS: next.time - heartbeats[index].time, accepted: acceptedAt.get(next)! };
  }

  /**
   * Whether a timer is armed on `clock` for the virtual time `time`: there, the monitor's pause before it streams on
   * (its RTT task's next round is due heartbeatFrequencyMS, 10 s, after it started).
   */
  const pauseEndsAt = (clock: VirtualClock, time: number): boolean => clock.actions.some((action) => action.delay === time);

  /**
   * Moves `clock` to 1 ms before `time` and checks that no check started meanwhile (the heartbeats are still
   * `count`), then to `time`.
   */
  async function noCheckBefore(clock: VirtualClock, time: number, count: number): Promise<void> {
    await clock.advanceAsync(time - 1 - clock.now());
    expect(heartbeats, `no check before ${time} ms`).to.have.length(count);
    await clock.advanceAsync(1);
  }

  it('after the handshake, waits on an awaitable hello: a topology change reaches it within ms, as awaited heartbeats', async function () {
    const m = setUp();
    expect(await eventually(() => server.awaitingHelloCount === 1)).to.equal(true);
    expect(m.streaming).to.equal(true);
    expect(pool!.state).to.equal('ready');
    const started = Date.now();
    server.changeTopology();
    // Polling, the change would come heartbeatFrequencyMS (10 s) later: 5 s leaves a loaded machine's pauses room.
    expect(await eventually(() => heartbeats.length === 5, 5000)).to.equal(true);
    expect(Date.now() - started, 'ms from the change to the heartbeat').to.be.below(5000);
    expect(shape()).to.deep.equal(['Started:false', 'Succeeded:false', 'Started:true', 'Succeeded:true', 'Started:true']);
    const reply = (heartbeats[3] as Extract<ServerHeartbeatEvent, { type: 'ServerHeartbeatSucceeded' }>).reply;
    expect(Number(reply.topologyVersion.counter)).to.equal(1);
    // The exhaust stream goes on: the next change comes on the same connection, without a new request.
    server.changeTopology();
    expect(await eventually(() => heartbeats.length === 7)).to.equal(true);
    expect(server.connectionsAccepted, 'the monitoring connection and the RTT connection at most').to.be.at.most(2);
  });

  it('a server shutting down (fail point during the wait) clears the pool within ms, not heartbeatFrequencyMS later', async function () {
    setUp();
    expect(await eventually(() => server.awaitingHelloCount === 1 && pool!.state === 'ready')).to.equal(true);
    const started = Date.now();
    server.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['hello'], errorCode: 91, appName: 'monitor' } });
    // Polling, the clear would come heartbeatFrequencyMS (10 s) later: 5 s leaves a loaded machine's pauses room.
    expect(await eventually(() => events.some((e) => e.type === 'ConnectionPoolCleared'), 5000)).to.equal(true);
    expect(Date.now() - started, 'ms from the shutdown to the clear').to.be.below(5000);
    const failed = heartbeats.find((e) => e.type === 'ServerHeartbeatFailed') as Failed;
    expect(failed.awaited).to.equal(true);
    expect(failed.error).to.be.instanceOf(MongoServerError);
  });

  it('a streaming connection closed by the server: failed awaited heartbeat, pool cleared, and at once a new connection readies it', async function () {
    const clock = new VirtualClock();
    setUp({ scheduler: clock });
    expect(await eventually(() => server.awaitingHelloCount === 1 && pool!.state === 'ready')).to.equal(true);
    server.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['hello'], closeConnection: true, appName: 'monitor' } });
    // Not retried at once, the pool would be readied heartbeatFrequencyMS (10 s) later: the virtual clock stands still.
    expect(await eventually(() => events.filter((e) => e.type === 'ConnectionPoolReady').length === 2, 5000)).to.equal(true);
    expect(shape()).to.deep.equal(['Started:false', 'Succeeded:false', 'Started:true', 'Failed:true', 'Started:false', 'Succeeded:false']);
    expect((heartbeats[3] as Failed).error).to.be.instanceOf(MongoNetworkError);
    // Streaming again, minHeartbeatFrequencyMS after the failure.
    expect(await eventually(() => pauseEndsAt(clock, 500)), 'pausing until 500').to.equal(true);
    await noCheckBefore(clock, 500, 6);
    expect(await eventually(() => heartbeats.length === 7)).to.equal(true);
    expect(shape()[6]).to.equal('Started:true');
    expect(heartbeats[6]!.time, 'the check after the pause, at').to.equal(500);
  });

  it('a network gone silent while the server streams (no FIN, no RST): the awaited check fails after connectTimeoutMS + heartbeatFrequencyMS, and the pool is cleared', async function () {
    const proxy = await startTcpFaultProxy(server.address);
    try {
      setUp({ heartbeatFrequencyMS: 500, connectionOptions: { appName: 'monitor', connectTimeoutMS: 300 } }, proxy.address);
      // Streaming: replies come without requests once the first has come, at each topology change (or every
      // maxAwaitTimeMS, 500 ms).
      const awaitedReplies = (): number => heartbeats.filter((e) => e.type === 'ServerHeartbeatSucceeded' && e.awaited).length;
      for (const replies of [1, 2]) {
        server.changeTopology();
        expect(await eventually(() => awaitedReplies() >= replies, 3000), `awaited reply ${replies}`).to.equal(true);
      }
      expect(monitor!.streaming).to.equal(true);
      const since = Date.now();
      proxy.blackhole = true;
      expect(await eventually(() => heartbeats.some((e) => e.type === 'ServerHeartbeatFailed'), 3000), 'the check ends').to.equal(true);
      const failed = heartbeats.find((e) => e.type === 'ServerHeartbeatFailed') as Failed;
      expect(failed.awaited).to.equal(true);
      expect(failed.error).to.be.instanceOf(MongoNetworkTimeoutError);
      expect(failed.duration, 'connectTimeoutMS + heartbeatFrequencyMS').to.be.within(780, 1500);
      expect(Date.now() - since).to.be.below(1500);
      expect(events.find((e) => e.type === 'ConnectionPoolCleared')).to.include({ interruptInUseConnections: true });
    } finally {
      monitor?.close();
      await proxy.stop();
    }
  });

  it('a server that completes handshakes but drops every awaitable hello is reconnected to once per minHeartbeatFrequencyMS, not as fast as the network allows', async function () {
    // A proxy without exhaust support does this: each handshake succeeds (the server is known), each awaitable hello
    // fails with a network error, which on a known server is retried at once, on a new connection whose handshake
    // succeeds again. Streaming on at once after that success would loop without a pause.
    const clock = new VirtualClock();
    server.failCommand.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['hello'], closeConnection: true, appName: 'monitor' } });
    setUp({ scheduler: clock });
    // Waited for by its events rather than for a fixed 300 ms, which a loaded machine's pause could outlast; without
    // the pause the monitor would reconnect as fast as the network allows, more than once within 50 ms.
    expect(await eventually(() => heartbeats.length >= 6 && server.connectionsAccepted >= 2, 5000)).to.equal(true);
    // The monitor pauses: the end of its pause armed on the clock, minHeartbeatFrequencyMS after the failure.
    expect(await eventually(() => pauseEndsAt(clock, 500)), 'pausing until 500').to.equal(true);
    expect(server.connectionsAccepted, 'the first connection, and the one retrying at once').to.equal(2);
    expect(shape()).to.deep.equal(['Started:false', 'Succeeded:false', 'Started:true', 'Failed:true', 'Started:false', 'Succeeded:false']);
    await clock.advanceAsync(499);
    expect(heartbeats, 'no check started 1 ms before minHeartbeatFrequencyMS').to.have.length(6);
    expect(server.connectionsAccepted, '1 ms before minHeartbeatFrequencyMS').to.equal(2);
    clock.advance(1);
    expect(await eventually(() => server.connectionsAccepted === 3)).to.equal(true);
    // The new connection's handshake succeeded, and the monitor pauses again, minHeartbeatFrequencyMS after that failure.
    expect(await eventually(() => pauseEndsAt(clock, 1000)), 'pausing until 1000').to.equal(true);
    expect(server.connectionsAccepted).to.equal(3);
  });

  it('poll mode never streams: no awaitable hello, every heartbeat awaited: false', async function () {
    const clock = new VirtualClock();
    const m = setUp({ heartbeatFrequencyMS: 500, serverMonitoringMode: 'poll', scheduler: clock });
    expect(m.streamingEnabled).to.equal(false);
    // Three checks, heartbeatFrequencyMS apart.
    for (const count of [2, 4, 6]) {
      expect(await eventually(() => heartbeats.length === count), `${count} heartbeats`).to.equal(true);
      if (count < 6) await noCheckBefore(clock, clock.now() + 500, count);
    }
    expect(server.awaitingHelloCount).to.equal(0);
    expect(m.streaming).to.equal(false);
    expect(heartbeats.every((e) => e.awaited === false)).to.equal(true);
    expect(server.connectionsAccepted, 'the monitoring connection only').to.equal(1);
  });

  it('stream mode polls a server older than 4.4 (no topologyVersion)', async function () {
    await server.stop();
    server = await new EmbeddedServer({ maxWireVersion: 8 }).start();
    const clock = new VirtualClock();
    const m = setUp({ heartbeatFrequencyMS: 500, serverMonitoringMode: 'stream', scheduler: clock });
    expect(await eventually(() => heartbeats.length === 2)).to.equal(true);
    // The next check heartbeatFrequencyMS later, a polling one.
    await noCheckBefore(clock, 500, 2);
    expect(await eventually(() => heartbeats.length === 4)).to.equal(true);
    expect(m.streaming).to.equal(false);
    expect(heartbeats.every((e) => e.awaited === false)).to.equal(true);
  });

  it('auto polls on a FaaS platform (as client.env.name detects it); stream streams there too; bad modes are refused', function () {
    const saved = process.env.AWS_LAMBDA_RUNTIME_API;
    process.env.AWS_LAMBDA_RUNTIME_API = '127.0.0.1:9001';
    try {
      expect(new Monitor({ address: 'h:1' }).streamingEnabled).to.equal(false);
      expect(new Monitor({ address: 'h:1', serverMonitoringMode: 'auto' }).streamingEnabled).to.equal(false);
      expect(new Monitor({ address: 'h:1', serverMonitoringMode: 'stream' }).streamingEnabled).to.equal(true);
    } finally {
      if (saved === undefined) delete process.env.AWS_LAMBDA_RUNTIME_API;
      else process.env.AWS_LAMBDA_RUNTIME_API = saved;
    }
    expect(new Monitor({ address: 'h:1' }).streamingEnabled).to.equal(true);
    expect(new Monitor({ address: 'h:1', serverMonitoringMode: 'poll' }).streamingEnabled).to.equal(false);
    expect(() => new Monitor({ address: 'h:1', serverMonitoringMode: 'Stream' as never })).to.throw(InvalidOptionError, /serverMonitoringMode.*"auto", "stream", "poll"/);
  });

  it('close() during a streaming wait ends it at once and leaves no socket on the server (nor the RTT connection)', async function () {
    const clock = new VirtualClock();
    const m = setUp({ scheduler: clock });
    // The monitoring connection waits on the server, and the RTT connection is open (heartbeatFrequencyMS after
    // streaming started).
    expect(await eventually(() => server.awaitingHelloCount === 1)).to.equal(true);
    await clock.advanceAsync(10_000);
    expect(await eventually(() => server.awaitingHelloCount === 1 && server.openConnections === 2, 5000)).to.equal(true);
    // Closed just after a streamed reply (brought by a topology change): the server's next one is maxAwaitTimeMS
    // (10 s) away, which a close that waited for it would take; 1 s leaves a loaded machine's pauses room.
    const awaitedReplies = (): number => heartbeats.filter((e) => e.type === 'ServerHeartbeatSucceeded' && e.awaited).length;
    const replies = awaitedReplies();
    server.changeTopology();
    expect(await eventually(() => awaitedReplies() > replies, 5000)).to.equal(true);
    let completed = false;
    m.heartbeats$.subscribe({ complete: () => (completed = true) });
    const started = Date.now();
    m.close();
    expect(completed).to.equal(true);
    expect(await eventually(() => server.openConnections === 0 && server.awaitingHelloCount === 0, 3000)).to.equal(true);
    expect(Date.now() - started).to.be.below(1000);
    // The streaming wait ends with the close, as a failed check that clears nothing; no event after it.
    expect(heartbeats.slice(-2).map((e) => `${e.type}:${e.awaited}`)).to.deep.equal(['ServerHeartbeatStarted:true', 'ServerHeartbeatFailed:true']);
    expect((heartbeats.at(-1) as Failed).error).to.be.instanceOf(MonitorClosedError);
    expect(events.filter((e) => e.type === 'ConnectionPoolCleared'), 'clears').to.deep.equal([]);
  });

  it('cancelCheck() during a streaming wait fails the check at once and closes the connection; the next check comes 500 ms later', async function () {
    const clock = new VirtualClock();
    const m = setUp({ scheduler: clock });
    expect(await eventually(() => server.awaitingHelloCount === 1)).to.equal(true);
    const accepted = server.connectionsAccepted;
    const started = Date.now();
    m.cancelCheck(new Error('an application connection was reset'));
    // Not cancelled, the check would end when the server streams its reply, maxAwaitTimeMS (10 s) later.
    expect(await eventually(() => shape().at(-1) === 'Failed:true', 5000)).to.equal(true);
    expect(Date.now() - started).to.be.below(5000);
    const failedAt = heartbeats.length - 1;
    expect((heartbeats[failedAt] as Failed).error).to.be.instanceOf(MongoNetworkError);
    expect(await eventually(() => server.awaitingHelloCount === 0)).to.equal(true);
    await noCheckBefore(clock, 500, failedAt + 1);
    const next = await nextCheck(failedAt);
    expect(next.accepted, 'no new monitoring connection before the next check').to.equal(accepted);
    expect(next.afterMS, 'ms from the failure to the next check').to.equal(500);
    expect(await eventually(() => server.awaitingHelloCount === 1, 2000)).to.equal(true);
  });

  it('cancelCheck() from a ServerHeartbeatStarted subscriber fails that check: no new connection, no success reported', async function () {
    const clock = new VirtualClock();
    const m = new Monitor({ address: server.address, heartbeatFrequencyMS: 10_000, connectionOptions: { appName: 'monitor', connectTimeoutMS: 2000 }, scheduler: clock });
    monitor = m;
    let cancelled = false;
    m.heartbeats$.subscribe((e) => {
      record(e);
      // The first streaming check, as it starts: the server is found unusable by an application connection.
      if (e.type === 'ServerHeartbeatStarted' && e.awaited && !cancelled) {
        cancelled = true;
        m.cancelCheck(new Error('an application connection was reset'));
      }
    });
    m.start();
    expect(await eventually(() => heartbeats.length >= 4)).to.equal(true);
    expect(shape().slice(0, 4)).to.deep.equal(['Started:false', 'Succeeded:false', 'Started:true', 'Failed:true']);
    expect((heartbeats[3] as Failed).error).to.be.instanceOf(MongoNetworkError);
    await noCheckBefore(clock, 500, 4);
    const next = await nextCheck(3);
    expect(next.accepted, 'no monitoring connection opened in place of the closed one before the next check').to.equal(1);
    expect(next.afterMS, 'ms from the failure to the next check').to.equal(500);
  });

  it('cancelCheck() from the ServerHeartbeatStarted subscriber of a first check fails it before it connects', async function () {
    const clock = new VirtualClock();
    const m = new Monitor({ address: server.address, heartbeatFrequencyMS: 10_000, serverMonitoringMode: 'poll', connectionOptions: { connectTimeoutMS: 2000 }, scheduler: clock });
    monitor = m;
    m.heartbeats$.subscribe((e) => {
      record(e);
      if (heartbeats.length === 1) m.cancelCheck(new Error('an application connection was reset'));
    });
    m.start();
    expect(await eventually(() => heartbeats.length >= 2)).to.equal(true);
    expect(shape()).to.deep.equal(['Started:false', 'Failed:false']);
    await noCheckBefore(clock, 500, 2);
    const next = await nextCheck(1);
    expect(next.accepted, 'no connection before the next check').to.equal(0);
    expect(next.afterMS, 'ms from the failure to the next check').to.equal(500);
  });

  it('cancelCheck() from a ServerHeartbeatSucceeded subscriber: the next check comes 500 ms later, on a new connection, the server no longer known', async function () {
    const clock = new VirtualClock();
    const m = new Monitor({ address: server.address, heartbeatFrequencyMS: 10_000, connectionOptions: { appName: 'monitor', connectTimeoutMS: 2000 }, scheduler: clock });
    monitor = m;
    m.heartbeats$.subscribe((e) => {
      record(e);
      if (heartbeats.length === 2) m.cancelCheck(new Error('an application connection was reset'));
    });
    m.start();
    expect(await eventually(() => heartbeats.length >= 2)).to.equal(true);
    await noCheckBefore(clock, 500, 2);
    const next = await nextCheck(1);
    expect(next.accepted).to.equal(1);
    expect(next.afterMS, 'ms from the success to the next check').to.equal(500);
    expect(await eventually(() => server.awaitingHelloCount === 1, 2000)).to.equal(true);
    expect(shape().slice(2, 5)).to.deep.equal(['Started:false', 'Succeeded:false', 'Started:true']);
  });

  describe('hostile servers', function () {
    let hostile: HostileServer | undefined;
    afterEach(async function () {
      monitor?.close();
      monitor = undefined;
      await hostile?.close();
      hostile = undefined;
    });

    const topologyVersion = { processId: new ObjectId(), counter: 0 };

    it('a moreToCome reply to a polling hello (no exhaustAllowed) fails the check', async function () {
      hostile = await startHostileServer({
        hello: { topologyVersion },
        misbehaviour: { kind: 'answer', answer: (request, s) => s.write(encodeOpMsg(5, request.header.requestId, { isWritablePrimary: true, ok: 1 }, OpMsgFlag.moreToCome)) },
      });
      const clock = new VirtualClock();
      monitor = new Monitor({ address: hostile.address, heartbeatFrequencyMS: 500, serverMonitoringMode: 'poll', scheduler: clock });
      monitor.heartbeats$.subscribe((e) => heartbeats.push(e));
      monitor.start();
      // The handshake's hello, then a polling hello heartbeatFrequencyMS later.
      expect(await eventually(() => heartbeats.length === 2)).to.equal(true);
      await noCheckBefore(clock, 500, 2);
      expect(await eventually(() => heartbeats.some((e) => e.type === 'ServerHeartbeatFailed'), 2000)).to.equal(true);
      const failed = heartbeats.find((e) => e.type === 'ServerHeartbeatFailed') as Failed;
      expect(failed.awaited).to.equal(false);
      expect(failed.error.message).to.match(/moreToCome flag set \(0x2\), but the request did not set exhaustAllowed/);
    });

    it('a malformed streamed reply ends the stream with a failed awaited heartbeat and closes the connection', async function () {
      let exhaustFlag = 0;
      let stream: net.Socket | undefined;
      hostile = await startHostileServer({
        hello: { topologyVersion },
        misbehaviour: {
          kind: 'answer',
          answer: (request, s) => {
            exhaustFlag = request.body.readUInt32LE(0) & OpMsgFlag.exhaustAllowed;
            s.write(encodeOpMsg(50, request.header.requestId, { isWritablePrimary: true, topologyVersion, ok: 1 }, OpMsgFlag.moreToCome));
            stream = s;
          },
        },
      });
      monitor = new Monitor({ address: hostile.address, heartbeatFrequencyMS: 10_000, serverMonitoringMode: 'stream' });
      monitor.heartbeats$.subscribe((e) => {
        heartbeats.push(e);
        // The check that waits for the stream's next reply has started: the server streams a malformed one.
        if (heartbeats.length === 5 && e.type === 'ServerHeartbeatStarted' && e.awaited) {
          const bad = encodeOpMsg(51, 50, { ok: 1 });
          bad.writeUInt32LE(1 << 5, 16); // an unknown required flag bit
          stream!.write(bad);
        }
      });
      monitor.start();
      expect(await eventually(() => heartbeats.some((e) => e.type === 'ServerHeartbeatFailed'), 2000)).to.equal(true);
      expect(exhaustFlag).to.equal(OpMsgFlag.exhaustAllowed);
      expect(shape().slice(0, 6)).to.deep.equal(['Started:false', 'Succeeded:false', 'Started:true', 'Succeeded:true', 'Started:true', 'Failed:true']);
      const failed = heartbeats[5] as Failed;
      expect(failed.error).to.be.instanceOf(MongoNetworkError);
      expect(failed.error.cause).to.be.instanceOf(WireProtocolError);
      monitor.close();
      expect(await eventually(() => hostile!.open === 0, 1000)).to.equal(true);
    });
  });
});
