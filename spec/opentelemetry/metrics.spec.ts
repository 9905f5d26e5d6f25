import { expect } from 'chai';
import { metrics, ValueType, type Attributes } from '@opentelemetry/api';
import {
  DataPointType,
  InstrumentType,
  MeterProvider,
  MetricReader,
  type DataPoint,
  type Histogram,
  type MetricData,
} from '@opentelemetry/sdk-metrics';
import { Observable, type Subscription } from 'rxjs';
import { ConnectionPool, InvalidOptionError, type PoolConnection, type PoolSnapshot } from '../../lib';
import type { Connection } from '../../lib/connection/connection';
import { EmbeddedServer, MockConnectionFactory, VirtualClock, type MockConnection } from '../../lib/testing';
import { instrumentConnectionPool, type ConnectionPoolInstrumentation, type InstrumentedPool } from '../../lib/opentelemetry';
import { DRIVER_INFO } from '../../lib/version';
import { closeTimeline } from '../support/close-timeline';

/** A reader collected from by hand. */
class ManualReader extends MetricReader {
  protected async onShutdown(): Promise<void> {}
  protected async onForceFlush(): Promise<void> {}
}

/** One collection: every metric by name. */
type Collected = Map<string, MetricData>;

function harness() {
  const reader = new ManualReader();
  const provider = new MeterProvider({ readers: [reader] });
  const meter = provider.getMeter('metrics.spec');
  // How many times a callback was removed from the Meter.
  let removed = 0;
  const removeCallback = meter.removeBatchObservableCallback.bind(meter);
  meter.removeBatchObservableCallback = (...args) => {
    removed++;
    removeCallback(...args);
  };
  const scopes: { name: string; version?: string }[] = [];
  const collect = async (): Promise<Collected> => {
    const { resourceMetrics, errors } = await reader.collect();
    expect(errors).to.deep.equal([]);
    scopes.splice(0, scopes.length, ...resourceMetrics.scopeMetrics.map((sm) => sm.scope));
    const byName: Collected = new Map();
    for (const scope of resourceMetrics.scopeMetrics) for (const m of scope.metrics) byName.set(m.descriptor.name, m);
    return byName;
  };
  return { meter, collect, provider, scopes, removals: () => removed };
}

function pointsOf(c: Collected, name: string): DataPoint<unknown>[] {
  return (c.get(name)?.dataPoints ?? []) as DataPoint<unknown>[];
}

/** The value of the one point of `name` whose attributes include `match` (undefined when none). */
function valueOf(c: Collected, name: string, match: Attributes = {}): number | undefined {
  const points = pointsOf(c, name).filter((p) => Object.entries(match).every(([k, v]) => p.attributes[k] === v));
  expect(points.length, `${name} points matching ${JSON.stringify(match)}`).to.be.at.most(1);
  return points[0]?.value as number | undefined;
}

function histogramOf(c: Collected, name: string): Histogram {
  const points = pointsOf(c, name);
  expect(points, name).to.have.length(1);
  return points[0].value as Histogram;
}

function virtualPool(options: Partial<ConstructorParameters<typeof ConnectionPool<MockConnection>>[0]> = {}) {
  const clock = new VirtualClock();
  const mock = new MockConnectionFactory({ scheduler: clock, establishDelayMS: 10 });
  const pool = new ConnectionPool<MockConnection>({ address: 'db.example:27017', scheduler: clock, connectionFactory: mock.factory, ...options });
  return { pool, clock };
}

const POOL = { 'db.client.connection.pool.name': 'db.example:27017', 'server.address': 'db.example', 'server.port': 27017 };

describe('rxcmap/opentelemetry: instrumentConnectionPool', function () {
  describe('on virtual time', function () {
    it('records every connection pool metric, named, typed and with the units of the semantic conventions', async function () {
      const { meter, collect } = harness();
      const { pool, clock } = virtualPool({ maxPoolSize: 2, minPoolSize: 0, waitQueueTimeoutMS: 50 });
      const instrumentation = instrumentConnectionPool(pool, { meter });
      expect(instrumentation.poolName).to.equal('db.example:27017');
      expect(instrumentation.attributes).to.deep.equal(POOL);

      const held = new Map<string, MockConnection>();
      const failures: Record<string, string> = {};
      const subs: Subscription[] = [];
      const checkOut = (name: string) =>
        subs.push(pool.checkOut().subscribe({ next: (c) => held.set(name, c), error: (e: Error) => (failures[name] = e.name) }));

      pool.ready();
      checkOut('A');
      checkOut('B');
      clock.advanceTo(5); // two connections being established, two checkouts waiting on them
      let c = await collect();
      expect(valueOf(c, 'db.client.connection.count', { 'db.client.connection.state': 'idle' })).to.equal(0);
      expect(valueOf(c, 'db.client.connection.count', { 'db.client.connection.state': 'used' })).to.equal(0);
      expect(valueOf(c, 'db.client.connection.pending_requests')).to.equal(2);

      clock.advanceTo(10); // both ready (create 10 ms) and checked out (wait 10 ms)
      checkOut('C'); // pool full: waits
      clock.advanceTo(20);
      pool.checkIn(held.get('A')!); // used 10 ms; C gets it (wait 10 ms)
      checkOut('D'); // waits, times out at t = 70 (wait 50 ms)
      clock.advanceTo(70);
      expect(failures).to.deep.equal({ D: 'WaitQueueTimeoutError' });
      c = await collect();
      expect(valueOf(c, 'db.client.connection.count', { 'db.client.connection.state': 'used' })).to.equal(2);
      expect(valueOf(c, 'db.client.connection.count', { 'db.client.connection.state': 'idle' })).to.equal(0);
      clock.advanceTo(80);
      pool.checkIn(held.get('B')!); // used 70 ms
      pool.checkIn(held.get('C')!); // used 60 ms
      c = await collect();
      expect(valueOf(c, 'db.client.connection.count', { 'db.client.connection.state': 'idle' })).to.equal(2);
      expect(valueOf(c, 'db.client.connection.count', { 'db.client.connection.state': 'used' })).to.equal(0);

      pool.clear(); // paused: the next checkout fails at once (wait 0 ms, not a timeout)
      checkOut('E');
      clock.advanceTo(90);
      expect(failures).to.deep.equal({ D: 'WaitQueueTimeoutError', E: 'PoolClearedError' });
      c = await collect();

      const expected: [string, InstrumentType, string][] = [
        ['db.client.connection.count', InstrumentType.OBSERVABLE_UP_DOWN_COUNTER, '{connection}'],
        ['db.client.connection.idle.max', InstrumentType.OBSERVABLE_UP_DOWN_COUNTER, '{connection}'],
        ['db.client.connection.idle.min', InstrumentType.OBSERVABLE_UP_DOWN_COUNTER, '{connection}'],
        ['db.client.connection.max', InstrumentType.OBSERVABLE_UP_DOWN_COUNTER, '{connection}'],
        ['db.client.connection.pending_requests', InstrumentType.OBSERVABLE_UP_DOWN_COUNTER, '{request}'],
        ['db.client.connection.timeouts', InstrumentType.COUNTER, '{timeout}'],
        ['db.client.connection.create_time', InstrumentType.HISTOGRAM, 's'],
        ['db.client.connection.wait_time', InstrumentType.HISTOGRAM, 's'],
        ['db.client.connection.use_time', InstrumentType.HISTOGRAM, 's'],
      ];
      expect([...c.keys()].sort()).to.deep.equal(expected.map(([name]) => name).sort());
      for (const [name, type, unit] of expected) {
        const metric = c.get(name)!;
        expect(metric.descriptor, name).to.include({ type, unit });
        expect(metric.descriptor.description, name).to.be.a('string').and.not.equal('');
        expect(metric.dataPointType, name).to.equal(type === InstrumentType.HISTOGRAM ? DataPointType.HISTOGRAM : DataPointType.SUM);
        for (const p of metric.dataPoints) {
          const state = name === 'db.client.connection.count' ? { 'db.client.connection.state': p.attributes['db.client.connection.state'] } : {};
          expect(p.attributes, name).to.deep.equal({ ...POOL, ...state });
        }
      }
      expect(pointsOf(c, 'db.client.connection.count').map((p) => p.attributes['db.client.connection.state']).sort()).to.deep.equal(['idle', 'used']);
      expect(c.get('db.client.connection.timeouts')).to.include({ isMonotonic: true });
      expect(c.get('db.client.connection.count')).to.include({ isMonotonic: false });

      expect(valueOf(c, 'db.client.connection.max')).to.equal(2);
      expect(valueOf(c, 'db.client.connection.idle.max')).to.equal(2);
      expect(valueOf(c, 'db.client.connection.idle.min')).to.equal(0);
      expect(valueOf(c, 'db.client.connection.pending_requests')).to.equal(0);
      expect(valueOf(c, 'db.client.connection.timeouts')).to.equal(1);
      // cleared: the two idle connections were stale and are closed
      expect(valueOf(c, 'db.client.connection.count', { 'db.client.connection.state': 'idle' })).to.equal(0);
      expect(valueOf(c, 'db.client.connection.count', { 'db.client.connection.state': 'used' })).to.equal(0);

      const create = histogramOf(c, 'db.client.connection.create_time');
      expect(create.count).to.equal(2);
      expect(create.sum).to.be.closeTo(0.02, 1e-9);
      expect(create.buckets.boundaries).to.deep.equal([0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10]);
      const wait = histogramOf(c, 'db.client.connection.wait_time');
      expect(wait.count).to.equal(5); // A, B, C: 10 ms; D: 50 ms (timed out); E: 0 ms (pool paused)
      expect(wait.sum).to.be.closeTo(0.08, 1e-9);
      expect(wait.max).to.be.closeTo(0.05, 1e-9);
      const use = histogramOf(c, 'db.client.connection.use_time');
      expect(use.count).to.equal(3); // A 10 ms, B 70 ms, C 60 ms
      expect(use.sum).to.be.closeTo(0.14, 1e-9);
      expect(use.max).to.be.closeTo(0.07, 1e-9);

      instrumentation.unsubscribe();
      for (const s of subs) s.unsubscribe();
      pool.close();
    });

    it('records the counts, limits and timeouts as integers, the times as floating point (the conventions\' value types)', async function () {
      const { meter, collect } = harness();
      const { pool, clock } = virtualPool({ maxPoolSize: 1, waitQueueTimeoutMS: 5 });
      const instrumentation = instrumentConnectionPool(pool, { meter });
      pool.ready();
      let held: MockConnection | undefined;
      pool.checkOut().subscribe((x) => (held = x));
      clock.advance(10);
      pool.checkOut().subscribe({ error: () => undefined }); // times out at 5 ms
      clock.advance(10);
      pool.checkIn(held!);
      const c = await collect();
      const integers = ['count', 'idle.max', 'idle.min', 'max', 'pending_requests', 'timeouts'].map((n) => `db.client.connection.${n}`);
      const doubles = ['create_time', 'wait_time', 'use_time'].map((n) => `db.client.connection.${n}`);
      expect([...c.keys()].sort()).to.deep.equal([...integers, ...doubles].sort());
      for (const name of integers) expect(c.get(name)!.descriptor.valueType, name).to.equal(ValueType.INT);
      for (const name of doubles) expect(c.get(name)!.descriptor.valueType, name).to.equal(ValueType.DOUBLE);
      instrumentation.unsubscribe();
      pool.close();
    });

    it('reports minPoolSize as idle.min, and no max or idle.max when maxPoolSize is 0 (no limit)', async function () {
      const { meter, collect } = harness();
      const { pool } = virtualPool({ maxPoolSize: 0, minPoolSize: 3 });
      const instrumentation = instrumentConnectionPool(pool, { meter, poolName: 'orders' });
      const c = await collect();
      expect(valueOf(c, 'db.client.connection.idle.min')).to.equal(3);
      expect(pointsOf(c, 'db.client.connection.idle.min')[0].attributes).to.deep.equal({ ...POOL, 'db.client.connection.pool.name': 'orders' });
      expect(pointsOf(c, 'db.client.connection.max')).to.deep.equal([]);
      expect(pointsOf(c, 'db.client.connection.idle.max')).to.deep.equal([]);
      instrumentation[Symbol.dispose]();
      pool.close();
    });

    it('stops recording on unsubscribe, and by itself once the closed pool has closed its last connection', async function () {
      const { meter, collect } = harness();
      const { pool, clock } = virtualPool({ maxPoolSize: 2 });
      const stopped = instrumentConnectionPool(pool, { meter, poolName: 'stopped' });
      const running = instrumentConnectionPool(pool, { meter, poolName: 'running' });
      stopped.unsubscribe();
      stopped.unsubscribe(); // idempotent
      expect(stopped.closed).to.equal(true);
      pool.ready();
      let connection: PoolConnection | undefined;
      pool.checkOut().subscribe((x) => (connection = x));
      clock.advance(10);
      let c = await collect();
      const names = (name: string) => pointsOf(c, name).map((p) => p.attributes['db.client.connection.pool.name']);
      expect(names('db.client.connection.wait_time')).to.deep.equal(['running']);
      expect(names('db.client.connection.pending_requests')).to.deep.equal(['running']);

      pool.close();
      expect(running.closed, 'a connection is still checked out').to.equal(false);
      clock.advance(5);
      pool.checkIn(connection as MockConnection); // the last connection: closed, state$ completes
      expect(running.closed).to.equal(true);
      pool.checkOut().subscribe({ error: (e: Error) => expect(e.name).to.equal('PoolClosedError') }); // not recorded any more
      c = await collect();
      expect(histogramOf(c, 'db.client.connection.use_time').sum).to.be.closeTo(0.005, 1e-9);
      expect(histogramOf(c, 'db.client.connection.wait_time').count).to.equal(1);
    });

    it('once the closed pool has closed its last connection, reports its counts as 0 for 60 s, not the last ones, then removes its callback', async function () {
      const { meter, removals, collect } = harness();
      const { pool, clock } = virtualPool({ maxPoolSize: 2 });
      const instrumentation = instrumentConnectionPool(pool, { meter });
      pool.ready();
      const held: MockConnection[] = [];
      for (let i = 0; i < 2; i++) pool.checkOut().subscribe((x) => held.push(x));
      clock.advance(10);
      pool.checkOut().subscribe({ error: () => undefined }); // waits
      const counts = (c: Collected) => [
        valueOf(c, 'db.client.connection.count', { 'db.client.connection.state': 'idle' }),
        valueOf(c, 'db.client.connection.count', { 'db.client.connection.state': 'used' }),
        valueOf(c, 'db.client.connection.pending_requests'),
      ];
      expect(counts(await collect()), 'idle, used, pending').to.deep.equal([0, 2, 1]);
      pool.close(); // fails the waiting checkout; both connections are still out
      for (const connection of held) pool.checkIn(connection); // the last one closed: state$ completes
      expect(instrumentation.closed).to.equal(true);
      const now = Date.now;
      const finished = now();
      try {
        Date.now = () => finished + 59_000;
        expect(counts(await collect()), 'a collection within 60 s').to.deep.equal([0, 0, 0]);
        expect(removals()).to.equal(0);
        Date.now = () => finished + 61_000;
        expect(counts(await collect()), 'the first collection after 60 s').to.deep.equal([0, 0, 0]);
        await Promise.resolve();
        expect(removals(), 'removed after it').to.equal(1);
        expect(counts(await collect()), 'the last values collected').to.deep.equal([0, 0, 0]);
        instrumentation.unsubscribe();
        expect(removals(), 'once').to.equal(1);
      } finally {
        Date.now = now;
      }
    });

    it('removes a finished pool\'s callback after 120 s when no reader collects, on a timer that keeps no process alive', function () {
      const { meter, removals } = harness();
      const { pool } = virtualPool({ maxPoolSize: 1 });
      instrumentConnectionPool(pool, { meter });
      const timers: { delay: number | undefined; run: () => void; unref: boolean }[] = [];
      const original = globalThis.setTimeout;
      globalThis.setTimeout = ((run: () => void, delay?: number) => {
        const timer = { delay, run, unref: false };
        timers.push(timer);
        return { unref: () => ((timer.unref = true), timer) };
      }) as unknown as typeof setTimeout;
      try {
        pool.close(); // no connection: state$ completes at once
      } finally {
        globalThis.setTimeout = original;
      }
      expect(timers.map((t) => [t.delay, t.unref])).to.deep.equal([[120_000, true]]);
      expect(removals()).to.equal(0);
      timers[0].run();
      expect(removals()).to.equal(1);
    });

    it('clears that timer once the callback is removed otherwise, so a finished recorder is not kept for 120 s', function () {
      const { meter } = harness();
      const { pool } = virtualPool({ maxPoolSize: 1 });
      const instrumentation = instrumentConnectionPool(pool, { meter });
      const handle = { unref: () => handle };
      const [originalSet, originalClear] = [globalThis.setTimeout, globalThis.clearTimeout];
      const cleared: unknown[] = [];
      globalThis.setTimeout = (() => handle) as unknown as typeof setTimeout;
      globalThis.clearTimeout = ((h: unknown) => cleared.push(h)) as typeof clearTimeout;
      try {
        pool.close(); // no connection: state$ completes at once, and the removal timer is armed
        expect(cleared).to.deep.equal([]);
        instrumentation.unsubscribe(); // as the first collection after 60 s does
        instrumentation.unsubscribe();
      } finally {
        globalThis.setTimeout = originalSet;
        globalThis.clearTimeout = originalClear;
      }
      expect(cleared).to.have.length(1);
      expect(cleared[0]).to.equal(handle);
    });

    it('changes nothing of what other subscribers see: the closed pool\'s state$ snapshot still comes after its events', function () {
      const { meter } = harness();
      const { pool, clock } = virtualPool({ maxPoolSize: 1 });
      instrumentConnectionPool(pool, { meter }); // watches state$ from ConnectionPoolClosed on
      expect(closeTimeline(pool, clock)).to.deep.equal(['ConnectionPoolClosed', 'ConnectionCheckOutFailed', 'state$ closed, waitQueueLength 0']);
    });

    it('records no wait_time for a checkout under way when recording started (its wait was not timed)', async function () {
      const { meter, collect } = harness();
      const { pool, clock } = virtualPool({ maxPoolSize: 1 });
      pool.ready();
      pool.checkOut().subscribe(); // started unobserved, at t = 0
      clock.advance(4);
      instrumentConnectionPool(pool, { meter });
      clock.advance(6); // delivered at t = 10: its wait is unknown, not 0
      pool.checkOut().subscribe({ error: () => undefined }); // started observed, at t = 10
      clock.advance(5);
      pool.clear(); // fails it after 5 ms
      const c = await collect();
      const waits = histogramOf(c, 'db.client.connection.wait_time');
      expect(waits.count, 'only the timed checkout').to.equal(1);
      expect(waits.sum).to.be.closeTo(0.005, 1e-9);
    });

    it('defaults to a Meter of the global MeterProvider, scoped by the library name and version', async function () {
      const { collect, provider, scopes } = harness();
      metrics.setGlobalMeterProvider(provider);
      const { pool } = virtualPool({ maxPoolSize: 4 });
      try {
        const instrumentation = instrumentConnectionPool(pool);
        expect(valueOf(await collect(), 'db.client.connection.max')).to.equal(4);
        expect(scopes.map((scope) => [scope.name, scope.version])).to.deep.equal([['rxcmap', DRIVER_INFO.version]]);
        instrumentation.unsubscribe();
      } finally {
        metrics.disable();
        pool.close();
      }
    });

    it('keeps two pools of one server apart: the default name of the second is made unique, a name given twice is refused', async function () {
      // Two clients of one server: each has a pool at the same address. Recorded under one name through one Meter, the
      // SDK would merge their series (one pool's counts and limits overwriting the other's).
      const { meter, collect } = harness();
      const mockA = new MockConnectionFactory();
      const mockB = new MockConnectionFactory();
      const a = new ConnectionPool<MockConnection>({ address: 'db.example:27017', maxPoolSize: 10, connectionFactory: mockA.factory });
      const b = new ConnectionPool<MockConnection>({ address: 'db.example:27017', maxPoolSize: 50, connectionFactory: mockB.factory });
      const c = new ConnectionPool<MockConnection>({ address: 'db.example:27017', maxPoolSize: 7, connectionFactory: new MockConnectionFactory().factory });
      const first = instrumentConnectionPool(a, { meter });
      const second = instrumentConnectionPool(b, { meter });
      expect(first.poolName).to.equal('db.example:27017');
      expect(second.poolName).to.not.equal(first.poolName);
      expect(() => instrumentConnectionPool(c, { meter, poolName: 'db.example:27017' }))
        .to.throw(InvalidOptionError, 'db.example:27017')
        .with.property('option', 'poolName');
      a.ready();
      b.ready();
      const heldA = [await a.checkOut(), await a.checkOut()];
      const heldB = [await b.checkOut(), await b.checkOut(), await b.checkOut()];
      let collected = await collect();
      const named = (name: string) => ({ 'db.client.connection.pool.name': name });
      expect(valueOf(collected, 'db.client.connection.max', named(first.poolName))).to.equal(10);
      expect(valueOf(collected, 'db.client.connection.max', named(second.poolName))).to.equal(50);
      expect(valueOf(collected, 'db.client.connection.count', { ...named(first.poolName), 'db.client.connection.state': 'used' })).to.equal(2);
      expect(valueOf(collected, 'db.client.connection.count', { ...named(second.poolName), 'db.client.connection.state': 'used' })).to.equal(3);

      // A name is free again once its recording stopped: a pool replacing a closed one keeps the name.
      first.unsubscribe();
      const third = instrumentConnectionPool(c, { meter, poolName: 'db.example:27017' });
      c.ready();
      collected = await collect();
      expect(valueOf(collected, 'db.client.connection.max', named('db.example:27017'))).to.equal(7);
      // Through another Meter (another scope, kept apart by the SDK) the default name is not changed.
      const other = instrumentConnectionPool(b, { meter: harness().meter });
      expect(other.poolName).to.equal('db.example:27017');
      for (const x of [second, third, other]) x.unsubscribe();
      for (const x of heldA) a.checkIn(x);
      for (const x of heldB) b.checkIn(x);
      for (const pool of [a, b, c]) pool.close();
    });

    it('gives a finished pool\'s name to the pool replacing it, whose counts then win over the finished one\'s zeros', async function () {
      const { meter, collect } = harness();
      const old = virtualPool({ maxPoolSize: 10 });
      const finished = instrumentConnectionPool(old.pool, { meter });
      old.pool.close(); // no connection: state$ completes, recording stops, its zeros are reported for 60 s
      expect(finished.closed).to.equal(true);
      const { pool, clock } = virtualPool({ maxPoolSize: 7 });
      const replacing = instrumentConnectionPool(pool, { meter });
      expect(replacing.poolName).to.equal(finished.poolName);
      pool.ready();
      pool.checkOut().subscribe();
      clock.advance(10);
      const c = await collect();
      expect(valueOf(c, 'db.client.connection.max')).to.equal(7);
      expect(valueOf(c, 'db.client.connection.count', { 'db.client.connection.state': 'used' })).to.equal(1);
      finished.unsubscribe();
      replacing.unsubscribe();
      pool.close();
    });

    it('names a third pool of one server address#3 by default, after address and address#2', function () {
      const { meter } = harness();
      const pools = [1, 2, 3].map(() => virtualPool().pool);
      const instrumentations = pools.map((pool) => instrumentConnectionPool(pool, { meter }));
      expect(instrumentations.map((i) => i.poolName)).to.deep.equal(['db.example:27017', 'db.example:27017#2', 'db.example:27017#3']);
      for (const i of instrumentations) i.unsubscribe();
      for (const pool of pools) pool.close();
    });

    it('gives a pool over a Unix domain socket no server.port attribute', async function () {
      const { meter, collect } = harness();
      const { pool } = virtualPool({ address: '/tmp/mongodb-27017.sock', maxPoolSize: 3 });
      const instrumentation = instrumentConnectionPool(pool, { meter });
      const socket = { 'db.client.connection.pool.name': '/tmp/mongodb-27017.sock', 'server.address': '/tmp/mongodb-27017.sock' };
      expect(instrumentation.attributes).to.deep.equal(socket);
      expect(pointsOf(await collect(), 'db.client.connection.max')[0].attributes).to.deep.equal(socket);
      instrumentation.unsubscribe();
      pool.close();
    });

    it('stops recording when disposed, as by a using declaration', function () {
      const { meter, removals } = harness();
      const { pool } = virtualPool();
      let scoped: ConnectionPoolInstrumentation | undefined;
      {
        using instrumentation = instrumentConnectionPool(pool, { meter, poolName: 'scoped' });
        scoped = instrumentation;
        expect(scoped.closed).to.equal(false);
      }
      expect(scoped.closed).to.equal(true);
      expect(removals(), 'the collection callback removed').to.equal(1);
      instrumentConnectionPool(pool, { meter, poolName: 'scoped' }).unsubscribe(); // the name is free again
      pool.close();
    });

    it('stops at once for a pool already closed with its last connection closed, freeing its name', function () {
      const { meter } = harness();
      const { pool } = virtualPool();
      pool.close(); // no connection: finished
      const instrumentation = instrumentConnectionPool(pool, { meter, poolName: 'orders' });
      expect(instrumentation.closed).to.equal(true);
      instrumentConnectionPool(virtualPool().pool, { meter, poolName: 'orders' }).unsubscribe();
      instrumentation.unsubscribe();
    });

    it('follows a pool already closed when instrumented until its last connection is closed', function () {
      const { meter } = harness();
      const { pool, clock } = virtualPool();
      pool.ready();
      let held: MockConnection | undefined;
      pool.checkOut().subscribe((c) => (held = c));
      clock.advance(10);
      pool.close(); // a connection is still checked out
      const instrumentation = instrumentConnectionPool(pool, { meter });
      expect(instrumentation.closed).to.equal(false);
      pool.checkIn(held!); // the last connection: closed
      expect(instrumentation.closed).to.equal(true);
    });

    it('keeps the name of the pool that took it over when the finished pool it replaced is unsubscribed', function () {
      const { meter } = harness();
      const old = virtualPool().pool;
      const finished = instrumentConnectionPool(old, { meter });
      old.close(); // finished: its name is free
      const { pool } = virtualPool();
      const replacing = instrumentConnectionPool(pool, { meter });
      expect(replacing.poolName).to.equal(finished.poolName);
      finished.unsubscribe(); // as its first collection after 60 s does
      expect(() => instrumentConnectionPool(virtualPool().pool, { meter, poolName: replacing.poolName })).to.throw(InvalidOptionError);
      expect(instrumentConnectionPool(virtualPool().pool, { meter }).poolName).to.equal('db.example:27017#2');
    });

    it('follows state$ only once the pool is closed, and not after unsubscribe', function () {
      const { meter } = harness();
      const { pool, clock } = virtualPool();
      let subscribed = 0;
      let active = 0;
      const state$ = new Observable<PoolSnapshot>((subscriber) => {
        subscribed++;
        active++;
        const subscription = pool.state$.subscribe(subscriber);
        return () => {
          active--;
          subscription.unsubscribe();
        };
      });
      const observed: InstrumentedPool = {
        address: pool.address,
        options: pool.options,
        events$: pool.events$,
        state$,
        get state() {
          return pool.state;
        },
        snapshot: () => pool.snapshot(),
      };
      const instrumentation = instrumentConnectionPool(observed, { meter });
      pool.ready();
      let held: MockConnection | undefined;
      pool.checkOut().subscribe((c) => (held = c));
      clock.advance(10);
      expect(subscribed, 'while the pool is open').to.equal(0);
      pool.close(); // a connection is still checked out
      expect([subscribed, active]).to.deep.equal([1, 1]);
      instrumentation.unsubscribe();
      expect(active, 'after unsubscribe').to.equal(0);
      pool.checkIn(held!);
    });

    it('rejects what is not a pool, a Meter or a pool name with an InvalidOptionError naming it', function () {
      const { meter } = harness();
      const { pool } = virtualPool();
      const cases: [string, () => unknown][] = [
        ['pool', () => instrumentConnectionPool({} as never, { meter })],
        ['options', () => instrumentConnectionPool(pool, null as never)],
        ['meter', () => instrumentConnectionPool(pool, { meter: {} as never })],
        ['poolName', () => instrumentConnectionPool(pool, { meter, poolName: '' })],
        ['poolName', () => instrumentConnectionPool(pool, { meter, poolName: 42 as never })],
      ];
      for (const [option, call] of cases) {
        expect(call, option).to.throw(InvalidOptionError).with.property('option', option);
      }
      pool.close();
    });

    it('says what each refused pool, options or Meter should be: option, value and what it accepts', function () {
      const { meter } = harness();
      const { pool } = virtualPool();
      const thrown = (call: () => unknown): InvalidOptionError => {
        try {
          call();
        } catch (error) {
          if (error instanceof InvalidOptionError) return error;
          throw error;
        }
        throw new Error('accepted');
      };
      const { snapshot: _snapshot, ...noSnapshot } = { address: pool.address, options: pool.options, events$: pool.events$, state$: pool.state$, state: pool.state, snapshot: () => pool.snapshot() };
      const { events$: _events$, ...noEvents } = { address: pool.address, options: pool.options, events$: pool.events$, state$: pool.state$, state: pool.state, snapshot: () => pool.snapshot() };
      const aPool = 'a ConnectionPool or ConnectionPoolCore';
      for (const notAPool of [null, undefined, 'db.example:27017', noSnapshot, noEvents]) {
        expect(thrown(() => instrumentConnectionPool(notAPool as never, { meter })), String(notAPool)).to.include({ option: 'pool', allowed: aPool });
      }
      const anObject = 'an object { meter?, poolName? }, or nothing';
      for (const notOptions of [null, 5, 'orders']) {
        expect(thrown(() => instrumentConnectionPool(pool, notOptions as never))).to.include({ option: 'options', value: notOptions, allowed: anObject });
      }
      const aMeter = 'an OpenTelemetry Meter (e.g. metrics.getMeter(name) of @opentelemetry/api)';
      const histogramsOnly = { createHistogram: meter.createHistogram.bind(meter) };
      const callbacksOnly = { addBatchObservableCallback: meter.addBatchObservableCallback.bind(meter) };
      for (const notAMeter of [null, 5, histogramsOnly, callbacksOnly]) {
        expect(thrown(() => instrumentConnectionPool(pool, { meter: notAMeter as never })), String(notAMeter)).to.include({ option: 'meter', allowed: aMeter });
      }
      const first = instrumentConnectionPool(pool, { meter, poolName: 'orders' });
      expect(thrown(() => instrumentConnectionPool(pool, { meter, poolName: 'orders' }))).to.include({
        option: 'poolName',
        value: 'orders',
        allowed: 'a name no other pool being recorded through this Meter has (give each pool its own)',
      });
      first.unsubscribe();
      pool.close();
    });

    it('refuses an unknown option, naming the closest one, rather than recording under the default pool name', function () {
      const { meter } = harness();
      const { pool } = virtualPool();
      const call = (): unknown => instrumentConnectionPool(pool, { meter, poolname: 'orders' } as never);
      expect(call).to.throw(InvalidOptionError, 'Unknown option poolname of instrumentConnectionPool: did you mean poolName?').with.property('option', 'poolname');
      pool.close();
    });
  });

  describe('under load against the embedded endpoint', function () {
    let server: EmbeddedServer;
    before(async function () {
      server = await new EmbeddedServer().start();
    });
    after(async function () {
      await server.stop();
    });

    it('counts idle + used as the established connections and one wait per checkout, for 200 concurrent checkouts', async function () {
      const { meter, collect } = harness();
      const pool = new ConnectionPool<Connection>({ address: server.address, maxPoolSize: 10, maxConnecting: 4 });
      let instrumentation: ConnectionPoolInstrumentation | undefined;
      try {
        instrumentation = instrumentConnectionPool(pool, { meter });
        pool.ready();
        const kept = await Promise.all([pool.checkOut(), pool.checkOut(), pool.checkOut()]);
        const work = Array.from({ length: 200 }, () => pool.withConnection((c) => c.command('admin', { ping: 1 })));
        const replies = await Promise.all(work);
        expect(replies.every((r) => (r as { ok?: number }).ok === 1)).to.equal(true);

        const c = await collect(); // quiescent: the 3 kept connections in use, nothing waiting
        const s = pool.snapshot();
        const idle = valueOf(c, 'db.client.connection.count', { 'db.client.connection.state': 'idle' })!;
        const used = valueOf(c, 'db.client.connection.count', { 'db.client.connection.state': 'used' })!;
        expect(used).to.equal(3);
        expect(idle + used).to.equal(s.totalConnectionCount - s.pendingConnectionCount);
        expect(idle + used).to.be.within(4, 10);
        expect(valueOf(c, 'db.client.connection.pending_requests')).to.equal(0);
        const wait = histogramOf(c, 'db.client.connection.wait_time');
        expect(wait.count).to.equal(203);
        expect(histogramOf(c, 'db.client.connection.use_time').count).to.equal(200);
        expect(histogramOf(c, 'db.client.connection.create_time').count).to.equal(s.totalConnectionCount);
        expect(pointsOf(c, 'db.client.connection.count')[0].attributes).to.include({ 'server.address': '127.0.0.1', 'server.port': Number(server.address.split(':')[1]) });
        for (const k of kept) pool.checkIn(k);
      } finally {
        instrumentation?.unsubscribe();
        pool.close();
      }
    });
  });
});

describe('instrumentConnectionPool with a Meter that throws', function () {
  it('an instrument that throws is reported to diag, not thrown from the pool\'s events; a Meter that throws while instruments are made leaves the name free', async function () {
    // Before, every measurement an instrument threw from was an uncaught exception (7 for 3 withConnection calls),
    // and a name whose instruments could not be made stayed taken.
    const escaped: unknown[] = [];
    const onUncaught = (error: unknown): void => void escaped.push(error);
    process.prependListener('uncaughtException', onUncaught);
    const logged: unknown[][] = [];
    const { diag: otelDiag } = await import('@opentelemetry/api');
    otelDiag.setLogger({ error: (...args: unknown[]) => logged.push(args), warn: () => {}, info: () => {}, debug: () => {}, verbose: () => {} });
    const pool = new ConnectionPool<MockConnection>({ address: 'db:27017', connectionFactory: new MockConnectionFactory().factory });
    try {
      const base = metrics.getMeter('t');
      const throwing = {
        record() {
          throw new Error('record refused');
        },
        add() {
          throw new Error('add refused');
        },
      };
      let refuseNext = true;
      const meter = Object.assign(Object.create(base) as object, {
        createHistogram: () => {
          if (refuseNext) {
            refuseNext = false;
            throw new Error('no histograms');
          }
          return throwing;
        },
        createCounter: () => throwing,
        addBatchObservableCallback: () => undefined,
        removeBatchObservableCallback: () => undefined,
      }) as never;
      expect(() => instrumentConnectionPool(pool, { meter, poolName: 'orders' })).to.throw('no histograms');
      const instrumentation = instrumentConnectionPool(pool, { meter, poolName: 'orders' });
      pool.ready();
      for (let i = 0; i < 3; i++) await pool.withConnection(() => 1);
      await new Promise((resolve) => setTimeout(resolve, 0)); // RxJS reports a subscriber's throw on a timer
      expect(escaped).to.deep.equal([]);
      expect(logged.length).to.be.greaterThan(0);
      expect(logged[0][0], 'what failed, and where').to.match(/^rxcmap: recording Connection\w+ of pool orders failed$/);
      expect(logged[0][1]).to.be.instanceOf(Error).with.property('message').that.matches(/refused$/);
      expect(pool.snapshot()).to.include({ availableConnectionCount: 1, inUseConnectionCount: 0 });
      instrumentation.unsubscribe();
    } finally {
      process.removeListener('uncaughtException', onUncaught);
      otelDiag.disable();
      pool.close();
    }
  });
});

