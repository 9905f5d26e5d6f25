/**
 * The pool's diagnostics channels: every phase of every checkout and establishment trace, the check-in and clear
 * messages, under real load on the endpoint (the embedded one, or MONGODB_URI's) and on virtual time for each
 * outcome; and nothing published while nobody subscribes.
 */
import { expect } from 'chai';
import { AsyncLocalStorage } from 'node:async_hooks';
import * as diagnosticsChannel from 'node:diagnostics_channel';
import { config, NEVER, throwError } from 'rxjs';
import {
  CheckOutCancelledError,
  ConnectionPool,
  ConnectionPoolCore,
  MongoNetworkError,
  PoolClosedError,
  WaitQueueTimeoutError,
  type ConnectionPoolEvent,
} from '../lib';
import {
  DIAGNOSTICS_CHANNELS,
  checkInChannel,
  checkOutChannel,
  clearChannel,
  establishChannel,
  type CheckInMessage,
  type CheckOutTraceContext,
  type ClearMessage,
  type EstablishTraceContext,
} from '../lib/diagnostics-channels';
import { MockConnectionFactory, VirtualClock, type MockConnection } from '../lib/testing';
import { startTestEndpoint } from './support/endpoint';
import { microtasks } from './support/microtasks';

type Phase = 'start' | 'end' | 'asyncStart' | 'asyncEnd' | 'error';
const PHASES: Phase[] = ['start', 'end', 'asyncStart', 'asyncEnd', 'error'];

/** Records every phase of a tracing channel, per context object, in order; `stop()` unsubscribes. */
function recordTraces<T extends object>(name: string) {
  const channel = diagnosticsChannel.tracingChannel<unknown, T>(name);
  const phases = new Map<T, Phase[]>();
  const handlers = Object.fromEntries(
    PHASES.map((phase) => [
      phase,
      (context: T) => {
        const list = phases.get(context) ?? [];
        list.push(phase);
        phases.set(context, list);
      },
    ]),
  ) as unknown as diagnosticsChannel.TracingChannelSubscribers<T>;
  channel.subscribe(handlers);
  return { phases, stop: () => channel.unsubscribe(handlers) };
}

/** Records every message of a plain channel; `stop()` unsubscribes. */
function recordMessages<T>(name: string) {
  const messages: T[] = [];
  const listener = (message: unknown): void => void messages.push(message as T);
  diagnosticsChannel.subscribe(name, listener);
  return { messages, stop: () => diagnosticsChannel.unsubscribe(name, listener) };
}

function virtualPool(options: { maxPoolSize?: number; waitQueueTimeoutMS?: number; fail?: boolean } = {}) {
  const clock = new VirtualClock();
  const mock = new MockConnectionFactory({
    scheduler: clock,
    establishDelayMS: 10,
    failWith: options.fail ? () => new MongoNetworkError('db.example:27017', 'connection refused') : undefined,
  });
  const pool = new ConnectionPoolCore<MockConnection>({
    address: 'db.example:27017',
    scheduler: clock,
    connectionFactory: mock.factory,
    maxPoolSize: options.maxPoolSize ?? 1,
    waitQueueTimeoutMS: options.waitQueueTimeoutMS ?? 0,
  });
  pool.ready();
  return { pool, clock };
}

describe('diagnostics channels', function () {
  let stops: (() => void)[] = [];
  afterEach(function () {
    for (const stop of stops) stop();
    stops = [];
  });

  it('are named in the lib:noun[:verb] pattern', function () {
    expect(DIAGNOSTICS_CHANNELS).to.deep.equal({
      checkOut: 'rxcmap:pool:checkOut',
      establish: 'rxcmap:connection:establish',
      checkIn: 'rxcmap:pool:checkIn',
      clear: 'rxcmap:pool:clear',
    });
  });

  it('trace every checkout, establishment, check-in and clear of a pool under real load, in every phase and in order', async function () {
    this.timeout(20_000);
    const endpoint = await startTestEndpoint();
    const checkOuts = recordTraces<CheckOutTraceContext>(DIAGNOSTICS_CHANNELS.checkOut);
    const establishments = recordTraces<EstablishTraceContext>(DIAGNOSTICS_CHANNELS.establish);
    const checkIns = recordMessages<CheckInMessage>(DIAGNOSTICS_CHANNELS.checkIn);
    const clears = recordMessages<ClearMessage>(DIAGNOSTICS_CHANNELS.clear);
    stops = [checkOuts.stop, establishments.stop, checkIns.stop, clears.stop];
    const pool = new ConnectionPool({ address: endpoint.address, connectionOptions: endpoint.connectionOptions, maxPoolSize: 3 });
    const events: ConnectionPoolEvent[] = [];
    pool.events$.subscribe((e) => events.push(e));
    try {
      pool.ready();
      const pings = 60;
      // Both checkout forms, 20 callers at once over 3 connections: most checkouts wait.
      await Promise.all(
        Array.from({ length: pings }, (_, i) =>
          i % 2 === 0
            ? pool.withConnection((c) => c.command('admin', { ping: 1 }))
            : new Promise<void>((resolve, reject) =>
                pool.withConnection$((c) => c.command('admin', { ping: 1 })).subscribe({ complete: resolve, error: reject }),
              ),
        ),
      );
      const cause = new Error('a monitor check failed');
      pool.clear({ cause });

      const [host, port] = endpoint.address.split(':');
      const server = { address: endpoint.address, serverAddress: host, serverPort: Number(port) };
      expect(checkOuts.phases.size, 'one trace per checkout').to.equal(pings);
      const checkedOut = events.filter((e) => e.type === 'ConnectionCheckedOut').map((e) => (e as { connectionId: number }).connectionId);
      const traced: number[] = [];
      for (const [context, phases] of checkOuts.phases) {
        expect(phases).to.deep.equal(['start', 'end', 'asyncStart', 'asyncEnd']);
        expect(context).to.include({ ...server, outcome: 'checkedOut', error: undefined });
        expect((context.result as { id: number }).id).to.equal(context.connectionId);
        traced.push(context.connectionId!);
      }
      expect(traced.sort()).to.deep.equal(checkedOut.sort());

      const created = events.filter((e) => e.type === 'ConnectionCreated').map((e) => (e as { connectionId: number }).connectionId);
      expect([...establishments.phases.keys()].map((c) => c.connectionId)).to.deep.equal(created);
      for (const [context, phases] of establishments.phases) {
        expect(phases).to.deep.equal(['start', 'end', 'asyncStart', 'asyncEnd']);
        expect(context).to.include({ ...server, generation: 0, outcome: 'ready', error: undefined });
        expect((context.result as { id: number }).id).to.equal(context.connectionId);
      }

      expect(checkIns.messages.map((m) => m.connectionId)).to.deep.equal(
        events.filter((e) => e.type === 'ConnectionCheckedIn').map((e) => (e as { connectionId: number }).connectionId),
      );
      expect(checkIns.messages[0]).to.include(server);
      expect(clears.messages).to.deep.equal([{ ...server, pool, generation: 1, serviceId: undefined, interruptInUseConnections: false, cause }]);
    } finally {
      pool.close();
      await endpoint.stop();
    }
  });

  it('say which pool published each message, so two pools of one server (two clients) are told apart', async function () {
    const checkOuts = recordTraces<CheckOutTraceContext>(DIAGNOSTICS_CHANNELS.checkOut);
    const establishments = recordTraces<EstablishTraceContext>(DIAGNOSTICS_CHANNELS.establish);
    const checkIns = recordMessages<CheckInMessage>(DIAGNOSTICS_CHANNELS.checkIn);
    const clears = recordMessages<ClearMessage>(DIAGNOSTICS_CHANNELS.clear);
    stops = [checkOuts.stop, establishments.stop, checkIns.stop, clears.stop];
    const a = virtualPool();
    const b = virtualPool();
    // The same address and the same connection ids: only the pool tells the messages apart.
    for (const { pool, clock } of [a, b, a]) {
      let connection: MockConnection | undefined;
      pool.checkOut().subscribe((c) => (connection = c));
      clock.advance(10);
      pool.checkIn(connection!);
    }
    a.pool.clear();
    const published = (messages: Iterable<{ pool: unknown; connectionId?: number }>) => [...messages].map((m) => [m.pool === a.pool ? 'a' : m.pool === b.pool ? 'b' : 'neither', m.connectionId]);
    expect(published(checkOuts.phases.keys())).to.deep.equal([['a', 1], ['b', 1], ['a', 1]]);
    expect(published(establishments.phases.keys())).to.deep.equal([['a', 1], ['b', 1]]);
    expect(published(checkIns.messages)).to.deep.equal([['a', 1], ['b', 1], ['a', 1]]);
    expect(published(clears.messages)).to.deep.equal([['a', undefined]]);
    a.pool.close();
    b.pool.close();
  });

  it('end a checkout trace with its outcome: timeout, abort, unsubscribe, closed pool, full WaitQueue, establishment error', async function () {
    const checkOuts = recordTraces<CheckOutTraceContext>(DIAGNOSTICS_CHANNELS.checkOut);
    stops = [checkOuts.stop];
    const outcomes = (): [string | undefined, string | undefined, Phase[]][] =>
      [...checkOuts.phases].map(([c, phases]) => [c.outcome, c.error?.name, phases]);

    const { pool, clock } = virtualPool({ waitQueueTimeoutMS: 50 });
    let held: MockConnection | undefined;
    pool.checkOut().subscribe((c) => (held = c));
    clock.advance(10);
    const timedOut = pool.checkOut().then(undefined, (e: unknown) => e);
    clock.advance(50);
    expect(await timedOut).to.be.instanceOf(WaitQueueTimeoutError);
    const controller = new AbortController();
    const aborted = pool.checkOut({ signal: controller.signal }).then(undefined, (e: unknown) => e);
    controller.abort();
    expect(await aborted).to.be.instanceOf(CheckOutCancelledError);
    pool.checkOut().subscribe().unsubscribe();
    const preAborted = pool.checkOut({ signal: AbortSignal.abort() }).then(undefined, (e: unknown) => e);
    expect(await preAborted).to.be.instanceOf(CheckOutCancelledError);
    pool.checkIn(held!);
    pool.close();
    const closed = pool.checkOut().then(undefined, (e: unknown) => e);
    expect(await closed).to.be.instanceOf(PoolClosedError);

    const full = new ConnectionPoolCore<MockConnection>({ address: 'db.example:27017', connectionFactory: () => NEVER, maxConnecting: 1, maxWaitQueueSize: 1, scheduler: new VirtualClock() });
    full.ready(); // its factory never completes an establishment: the first checkout waits on it, the second in the queue
    full.checkOut().subscribe({ error: () => undefined });
    full.checkOut().subscribe({ error: () => undefined });
    full.checkOut().subscribe({ error: () => undefined });
    full.close();

    const failing = virtualPool({ fail: true });
    const refused = failing.pool.checkOut().then(undefined, (e: unknown) => e);
    failing.clock.advance(10);
    expect(await refused).to.be.instanceOf(MongoNetworkError);
    await microtasks();

    const failed: Phase[] = ['start', 'end', 'error', 'asyncStart', 'asyncEnd'];
    expect(outcomes()).to.deep.equal([
      ['checkedOut', undefined, ['start', 'end', 'asyncStart', 'asyncEnd']],
      ['timeout', 'WaitQueueTimeoutError', failed],
      ['cancelled', 'CheckOutCancelledError', failed],
      ['cancelled', undefined, ['start', 'end', 'asyncStart', 'asyncEnd']],
      ['cancelled', 'CheckOutCancelledError', failed],
      ['poolClosed', 'PoolClosedError', failed],
      ['poolClosed', 'PoolClosedError', failed],
      ['poolClosed', 'PoolClosedError', failed],
      ['waitQueueFull', 'WaitQueueFullError', failed],
      ['connectionError', 'MongoNetworkError', failed],
    ]);
  });

  it('end an unsubscribed checkout\'s trace with the outcome the pool commits, as the events do: checked out when served first', async function () {
    const checkOuts = recordTraces<CheckOutTraceContext>(DIAGNOSTICS_CHANNELS.checkOut);
    stops = [checkOuts.stop];
    const { pool, clock } = virtualPool();
    let held: MockConnection | undefined;
    pool.checkOut().subscribe((c) => (held = c));
    clock.advance(10);
    const events: string[] = [];
    pool.events$.subscribe((e) => events.push(e.type));
    const waiting = pool.checkOut().subscribe(); // waits for the one connection
    // From inside the pool's processing: the check-in, queued after the unsubscribe but processed before it (check-ins
    // go first), serves the waiting checkout, whose connection then comes back as nobody takes it.
    const inside = pool.events$.subscribe((e) => {
      if (e.type !== 'ConnectionCheckOutStarted') return;
      inside.unsubscribe();
      waiting.unsubscribe();
      pool.checkIn(held!);
    });
    pool.checkOut().subscribe({ next: (c) => pool.checkIn(c), error: () => undefined });
    clock.advance(0);
    const outcomes = [...checkOuts.phases.keys()].map((c) => [c.outcome, c.connectionId]);
    expect(outcomes).to.deep.equal([
      ['checkedOut', 1],
      ['checkedOut', 1], // the unsubscribed one: served before its leave was processed
      ['checkedOut', 1],
    ]);
    expect(events.filter((t) => t === 'ConnectionCheckedOut' || t === 'ConnectionCheckOutFailed')).to.deep.equal(['ConnectionCheckedOut', 'ConnectionCheckedOut']);
    // Processed before any serving, the same unsubscribe ends the trace cancelled, with no error, as before, and
    // tells the closed subscriber nothing (RxJS would pass an error to config.onStoppedNotification).
    const stopped: string[] = [];
    const previous = config.onStoppedNotification;
    config.onStoppedNotification = (notification) => void stopped.push(notification.kind);
    try {
      const second = virtualPool();
      second.pool.checkOut().subscribe();
      second.pool.checkOut().subscribe({ next: () => undefined }).unsubscribe();
      await new Promise((r) => setTimeout(r, 0)); // RxJS reports stopped notifications on a timer
    } finally {
      config.onStoppedNotification = previous;
    }
    const last = [...checkOuts.phases].at(-1)!;
    expect([last[0].outcome, last[0].error, last[1]]).to.deep.equal(['cancelled', undefined, ['start', 'end', 'asyncStart', 'asyncEnd']]);
    expect(stopped, 'notifications sent to the closed subscriber').to.not.include('E');
    // Aborted by its signal while subscribed, an Observable checkout's trace carries the error its subscriber got.
    const third = virtualPool();
    third.pool.checkOut().subscribe();
    const controller = new AbortController();
    let received: unknown;
    third.pool.checkOut({ signal: controller.signal }).subscribe({ error: (e: unknown) => (received = e) });
    controller.abort();
    const aborted = [...checkOuts.phases.keys()].at(-1)!;
    expect(received).to.be.instanceOf(CheckOutCancelledError);
    expect([aborted.outcome, aborted.error]).to.deep.equal(['cancelled', received]);
  });

  it('end an establishment trace as failed (with the error) or aborted (the pool gave it up)', async function () {
    const establishments = recordTraces<EstablishTraceContext>(DIAGNOSTICS_CHANNELS.establish);
    stops = [establishments.stop];
    const failing = virtualPool({ fail: true });
    failing.pool.checkOut().subscribe({ error: () => undefined });
    failing.clock.advance(10);
    const abandoned = virtualPool();
    abandoned.pool.checkOut().subscribe({ error: () => undefined });
    abandoned.pool.close(); // while establishing
    // A factory that fails before it returns: its outcome phases still follow `end`.
    const sync = new ConnectionPoolCore({ address: 'db.example:27017', connectionFactory: () => throwError(() => new MongoNetworkError('db.example:27017', 'refused at once')) });
    sync.ready();
    sync.checkOut().subscribe({ error: () => undefined });
    sync.close();

    expect([...establishments.phases].map(([c, phases]) => [c.outcome, c.error?.message, phases])).to.deep.equal([
      ['failed', 'connection refused', ['start', 'end', 'error', 'asyncStart', 'asyncEnd']],
      ['aborted', undefined, ['start', 'end', 'asyncStart', 'asyncEnd']],
      ['failed', 'refused at once', ['start', 'end', 'error', 'asyncStart', 'asyncEnd']],
    ]);
  });

  it("run a checkout's start with the stores its subscribers bound, as tracePromise does", function () {
    const storage = new AsyncLocalStorage<string>();
    checkOutChannel.start.bindStore(storage, (context) => `checkOut of ${(context as CheckOutTraceContext).address}`);
    stops = [() => checkOutChannel.start.unbindStore(storage)];
    const { pool, clock } = virtualPool({ maxPoolSize: 2 });
    let seen: string | undefined = 'nothing';
    pool.checkOut().subscribe((c) => pool.checkIn(c));
    clock.advance(10);
    // An available connection is delivered inside the checkout's start, where the bound store is active.
    pool.checkOut().subscribe((c) => {
      seen = storage.getStore();
      pool.checkIn(c);
    });
    expect(seen).to.equal('checkOut of db.example:27017');
    expect(storage.getStore(), 'and only there').to.equal(undefined);
  });

  it('publish nothing, and build no context, while no channel has subscribers', async function () {
    const publishers = [
      checkInChannel,
      clearChannel,
      ...[checkOutChannel, establishChannel].flatMap((t) => [t.start, t.end, t.asyncStart, t.asyncEnd, t.error]),
    ];
    let calls = 0;
    for (const channel of publishers) {
      const spy = (): void => void calls++;
      Object.assign(channel, { publish: spy, runStores: spy });
    }
    stops = [() => publishers.forEach((channel) => Reflect.deleteProperty(channel, 'publish') && Reflect.deleteProperty(channel, 'runStores'))];
    const { pool, clock } = virtualPool({ maxPoolSize: 2, waitQueueTimeoutMS: 5 });
    for (let i = 0; i < 20; i++) {
      const request = pool.checkOut().then((c) => pool.checkIn(c), () => undefined);
      clock.advance(10);
      await request;
    }
    pool.clear({ cause: new Error('x') });
    pool.close();
    expect(calls).to.equal(0);
  });
});
