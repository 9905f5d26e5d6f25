/**
 * A fault of the pool itself (an exception inside a step of the reducer, or while a command runs), injected by making
 * one of the pool's own data structures throw once: the pool closes, every checkout settles, every connection it
 * opened is closed, and the fault is reported; it never stops with checkouts that would wait for ever. The last test
 * sweeps the fault over every call of every data-structure method in scenarios that take every kind of step
 * (spec/support/fault-sweep.ts).
 */
import { expect } from 'chai';
import { config } from 'rxjs';
import { ConnectionPoolCore, PoolClosedError, type ConnectionPoolEvent } from '../../lib';
import { ConnectionList } from '../../lib/pool/connection-list';
import { Broadcast } from '../../lib/pool/broadcast';
import { WaitQueue } from '../../lib/pool/wait-queue';
import { MockConnectionFactory, VirtualClock, type MockConnection } from '../../lib/testing';
import { collectingReports, FAULT_SCENARIOS, FAULT_SITES, FaultScene, injectFault, recordOutcome, violations, type Injection, type Outcome } from '../support/fault-sweep';

/** Makes `method` of `proto` throw `fault` on its `nth` call from now (1 = the next), once; returns the restore. */
function throwOnce(proto: object, method: string, fault: Error, nth = 1): () => void {
  const target = proto as Record<string, (...args: unknown[]) => unknown>;
  const original = target[method];
  let calls = 0;
  target[method] = function (this: unknown, ...args: unknown[]) {
    if (++calls === nth) throw fault;
    return original.apply(this, args);
  };
  return () => {
    target[method] = original;
  };
}

/**
 * Holds the callbacks given to `setTimeout` (where an error is thrown to end up uncaught) until the returned release
 * runs them, collecting what they throw in `thrown`.
 */
function holdTimers(thrown: unknown[]): () => void {
  const original = globalThis.setTimeout;
  const held: (() => void)[] = [];
  globalThis.setTimeout = ((fn: () => void) => held.push(fn)) as unknown as typeof setTimeout;
  return () => {
    globalThis.setTimeout = original;
    for (const fn of held.splice(0)) {
      try {
        fn();
      } catch (error) {
        thrown.push(error);
      }
    }
  };
}

/** A ready pool on virtual time; watched (its events recorded) unless `observed` is false. */
function virtualPool(maxPoolSize = 2, options: Record<string, unknown> = {}, observed = true) {
  const clock = new VirtualClock();
  const mock = new MockConnectionFactory({ scheduler: clock, establishDelayMS: 10 });
  const pool = new ConnectionPoolCore<MockConnection>({ address: 'db.example:27017', scheduler: clock, connectionFactory: mock.factory, maxPoolSize, ...options });
  const events: ConnectionPoolEvent[] = [];
  if (observed) pool.events$.subscribe((e) => events.push(e));
  pool.ready();
  return { pool, clock, mock, events };
}

/** Starts a checkout (subscribed to; awaited, with `signal`, when one is given) and records how it ended. */
function track(pool: ConnectionPoolCore<MockConnection>, signal?: AbortSignal): Outcome {
  const outcome: Outcome = { settled: 0 };
  const record = recordOutcome(outcome);
  if (signal === undefined) pool.checkOut().subscribe(record);
  else void pool.checkOut({ signal }).then(record.next, record.error);
  return outcome;
}

describe('a fault of the pool itself closes the pool: nothing waits for ever, nothing is leaked', function () {
  let reported: unknown[];
  let restore: (() => void)[];
  const previousHandler = config.onUnhandledError;

  beforeEach(function () {
    reported = [];
    restore = [];
    config.onUnhandledError = (error) => reported.push(error);
  });

  afterEach(function () {
    for (const r of restore) r();
    config.onUnhandledError = previousHandler;
  });

  it('a fault while a check-in is applied: the waiting checkouts fail with PoolClosedError caused by it, the connections close', function () {
    const { pool, clock, mock, events } = virtualPool(2);
    const a = track(pool);
    const b = track(pool);
    clock.advance(10);
    const waiting = [track(pool), track(pool), track(pool)];
    const fault = new Error('injected: check-in');
    // The check-in hands a's connection to the oldest waiter; the fault comes from the WaitQueue as it is taken.
    restore.push(throwOnce(WaitQueue.prototype, 'shiftLane', fault));
    pool.checkIn(a.connection!);

    expect(pool.state).to.equal('closed');
    for (const w of waiting) {
      expect(w.settled).to.equal(1);
      expect(w.error).to.be.instanceOf(PoolClosedError);
      expect((w.error as Error).cause).to.equal(fault);
    }
    expect(reported).to.deep.equal([fault]);
    expect(a.connection!.destroyed, 'the connection being checked in').to.equal(true);
    expect(b.connection!.destroyed, 'still checked out').to.equal(false);
    pool.checkIn(b.connection!);
    expect(b.connection!.destroyed, 'closed at its check-in').to.equal(true);
    expect(mock.created.every((c) => c.destroyed)).to.equal(true);
    const types = events.map((e) => e.type);
    expect(types.filter((t) => t === 'ConnectionPoolClosed')).to.have.length(1);
    expect(types.filter((t) => t === 'ConnectionCheckOutFailed')).to.have.length(3);
    for (const e of events) if (e.type === 'ConnectionCheckOutFailed') expect(e.duration, 'timed on the one clock').to.be.a('number');
    // Later checkouts fail as on any closed pool; the pool still processes its input.
    const later = track(pool);
    expect(later.error).to.be.instanceOf(PoolClosedError);
    expect((later.error as Error).cause).to.equal(undefined);
  });

  it('a fault while a checkout is applied: that checkout fails too, though it never reached the WaitQueue', function () {
    const { pool, clock } = virtualPool(1);
    const a = track(pool);
    clock.advance(10);
    const queued = track(pool);
    const fault = new Error('injected: checkOut');
    restore.push(throwOnce(WaitQueue.prototype, 'push', fault));
    const faulted = track(pool);
    for (const w of [queued, faulted]) {
      expect(w.settled).to.equal(1);
      expect((w.error as Error).cause).to.equal(fault);
    }
    expect(reported).to.deep.equal([fault]);
    expect(a.connection!.destroyed).to.equal(false);
  });

  it('a fault after a connection was given to the checkout being applied: that checkout fails and the connection closes', async function () {
    // Unobserved, with leak detection: the step's first clock read is as the available connection is given to the
    // checkout (to time its hold), after the connection was marked as held by it.
    const { pool, clock, mock } = virtualPool(2, { leakDetectionThresholdMS: 60_000 }, false);
    const first = track(pool);
    const other = track(pool); // holds the other connection throughout
    clock.advance(10);
    pool.checkIn(first.connection!);
    const fault = new Error('injected: clock read');
    restore.push(throwOnce(clock, 'now', fault));
    const faulted = track(pool);
    expect(reported).to.deep.equal([fault]);
    expect(faulted.settled).to.equal(1);
    expect(faulted.connection).to.equal(undefined);
    expect(faulted.error).to.be.instanceOf(PoolClosedError);
    expect((faulted.error as Error).cause).to.equal(fault);
    expect(mock.created).to.have.length(2);
    expect(first.connection!.destroyed, 'given to the checkout, never delivered').to.equal(true);
    expect(other.connection!.destroyed, 'still checked out').to.equal(false);
    expect(pool.snapshot()).to.deep.include({ totalConnectionCount: 1, inUseConnectionCount: 1 });
  });

  it('connections still checked out after a fault stay watched by leak detection, oldest checkout first', function () {
    const { pool, clock, events } = virtualPool(3, { leakDetectionThresholdMS: 1000 });
    const a = track(pool);
    const b = track(pool);
    clock.advance(10); // connections 1 and 2 checked out at t=10
    clock.advance(10);
    pool.checkIn(a.connection!);
    clock.advance(480);
    const c = track(pool); // connection 1 again, at t=500: held since after connection 2, made before it
    expect([b.connection!.id, c.connection!.id]).to.deep.equal([2, 1]);
    const fault = new Error('injected: WaitQueue.push');
    restore.push(throwOnce(WaitQueue.prototype, 'push', fault));
    track(pool);
    expect(pool.state).to.equal('closed');
    expect(reported).to.deep.equal([fault]);
    const suspected = (): number[] => events.filter((e) => e.type === 'ConnectionLeakSuspected').map((e) => (e as { connectionId: number }).connectionId);
    clock.advance(1010 - clock.now());
    expect(suspected(), 'connection 2, held since t=10, at t=1010').to.deep.equal([2]);
    clock.advance(500);
    expect(suspected(), 'connection 1, held since t=500, at t=1500').to.deep.equal([2, 1]);
    pool.checkIn(b.connection!);
    pool.checkIn(c.connection!);
    expect(pool.snapshot()).to.deep.include({ totalConnectionCount: 0, inUseConnectionCount: 0 });
  });

  it('a clock that keeps failing: the teardown still settles every checkout and closes every connection, its events timed by the system clock', function () {
    const { pool, clock, mock, events } = virtualPool(1);
    const a = track(pool);
    clock.advance(10);
    const waiting = track(pool);
    const fault = new Error('injected: the clock fails on every read');
    const original = clock.now;
    clock.now = () => {
      throw fault;
    };
    restore.push(() => (clock.now = original));
    const before = Date.now();
    pool.checkIn(a.connection!); // observed: the check-in's event reads the clock first
    expect(pool.state).to.equal('closed');
    expect(reported).to.deep.equal([fault]);
    expect(waiting.settled).to.equal(1);
    expect(waiting.error).to.be.instanceOf(PoolClosedError);
    expect((waiting.error as Error).cause).to.equal(fault);
    expect(mock.created).to.have.length(1);
    expect(a.connection!.destroyed, 'being checked in as the clock failed').to.equal(true);
    const teardown = events.slice(events.findIndex((e) => e.type === 'ConnectionClosed'));
    expect(teardown.map((e) => e.type)).to.deep.equal(['ConnectionClosed', 'ConnectionPoolClosed', 'ConnectionCheckOutFailed']);
    for (const e of teardown) expect(e.time).to.be.within(before, Date.now());
    expect(teardown[2], 'its start was on the failed clock: no duration across two clocks').to.include({ duration: undefined });
  });

  it('a fault as an abort is applied: the aborted checkout still settles, with its one outcome event', async function () {
    const { pool, clock, events } = virtualPool(1);
    const a = track(pool);
    clock.advance(10);
    const controller = new AbortController();
    const outcome = track(pool, controller.signal);
    const fault = new Error('injected: clock read');
    restore.push(throwOnce(clock, 'now', fault)); // the cancel step's first clock read (for its event)
    controller.abort();
    await Promise.resolve();
    expect(reported).to.deep.equal([fault]);
    expect(outcome.settled).to.equal(1);
    expect((outcome.error as Error).cause).to.equal(fault);
    const types = events.map((e) => e.type);
    expect(types.filter((t) => t === 'ConnectionCheckOutStarted')).to.have.length(2);
    expect(types.filter((t) => t === 'ConnectionCheckedOut' || t === 'ConnectionCheckOutFailed')).to.have.length(2);
    expect(a.connection!.destroyed, 'still checked out').to.equal(false);
  });

  it('a fault as a late abort is applied, after its checkout was served: that checkout keeps its connection', async function () {
    const { pool, clock, events } = virtualPool(1);
    const a = track(pool);
    clock.advance(10);
    const controller = new AbortController();
    const late = track(pool, controller.signal);
    const fault = new Error('injected: WaitQueue.remove');
    // From inside the pool's processing: the check-in serves the waiting checkout, and its abort, queued behind the
    // check-in, finds it served; the abort's step faults.
    const inside = pool.events$.subscribe((e) => {
      if (e.type !== 'ConnectionCheckOutStarted') return;
      inside.unsubscribe();
      restore.push(throwOnce(WaitQueue.prototype, 'remove', fault));
      pool.checkIn(a.connection!);
      controller.abort();
    });
    track(pool);
    await Promise.resolve();
    expect(reported).to.deep.equal([fault]);
    expect(late.error).to.equal(undefined);
    expect(late.connection).to.equal(a.connection);
    expect(late.connection!.destroyed, 'held by the served checkout: closed at its check-in, not before').to.equal(false);
    const outcomes = events.filter((e) => e.type === 'ConnectionCheckedOut' || e.type === 'ConnectionCheckOutFailed');
    expect(outcomes.map((e) => e.type)).to.deep.equal(['ConnectionCheckedOut', 'ConnectionCheckedOut', 'ConnectionCheckOutFailed']);
    pool.checkIn(late.connection!);
    expect(late.connection!.destroyed).to.equal(true);
  });

  it('a fault while an establishment result is applied: the new connection is closed, not left unlinked', function () {
    const clock = new VirtualClock();
    const mock = new MockConnectionFactory({ scheduler: clock, establishDelayMS: 10 });
    const pool = new ConnectionPoolCore<MockConnection>({ address: 'db.example:27017', scheduler: clock, connectionFactory: mock.factory, minPoolSize: 1 });
    const events: ConnectionPoolEvent[] = [];
    pool.events$.subscribe((e) => events.push(e));
    pool.ready();
    const fault = new Error('injected: established');
    // Nobody waits for the background populate's connection: it is made available, and the fault comes as it is
    // linked into the available list (its record already says available).
    restore.push(throwOnce(ConnectionList.prototype, 'push', fault));
    clock.advance(10);
    expect(pool.state).to.equal('closed');
    expect(reported).to.deep.equal([fault]);
    expect(mock.created).to.have.length(1);
    expect(mock.created[0].destroyed).to.equal(true);
    expect(pool.snapshot()).to.deep.include({ totalConnectionCount: 0, availableConnectionCount: 0, pendingConnectionCount: 0 });
    const closed = events.filter((e) => e.type === 'ConnectionClosed');
    expect(closed).to.have.length(1);
    expect(closed[0]).to.deep.include({ connectionId: 1, reason: 'poolClosed' });
    clock.advance(60_000); // no background run is left armed to find the pool's state half made
    expect(mock.created).to.have.length(1);
  });

  it('a command that throws as it runs is reported, and the commands after it in its step still run', function () {
    const { pool, clock } = virtualPool(1);
    const a = track(pool);
    clock.advance(10);
    const b = track(pool);
    const fault = new Error('injected: runner');
    // The check-in's step emits ConnectionCheckedIn, then ConnectionCheckedOut, then delivers to b: the first emit
    // throws, and b is still served.
    restore.push(throwOnce(Broadcast.prototype, 'next', fault));
    pool.checkIn(a.connection!);
    expect(reported).to.deep.equal([fault]);
    expect(b.settled).to.equal(1);
    expect(b.connection).to.equal(a.connection);
    expect(pool.state).to.equal('ready');
  });

  it('a command that throws, reported to an onUnhandledError that throws too: the step\'s other commands still run, and a later events$ subscriber receives the next step\'s events', function () {
    const { pool, clock } = virtualPool(1);
    const a = track(pool);
    clock.advance(10);
    const b = track(pool);
    const fault = new Error('injected: runner');
    const rethrown: unknown[] = [];
    config.onUnhandledError = (error) => {
      reported.push(error);
      throw error; // a handler that makes unhandled errors loud
    };
    const releaseTimers = holdTimers(rethrown);
    restore.push(releaseTimers);
    restore.push(throwOnce(Broadcast.prototype, 'next', fault)); // the check-in's ConnectionCheckedIn
    pool.checkIn(a.connection!);
    expect(reported).to.deep.equal([fault]);
    expect(b.settled, 'served by the commands after the one that threw').to.equal(1);
    const late: string[] = [];
    pool.events$.subscribe((e) => late.push(e.type)); // at rest, after that step
    pool.checkIn(b.connection!);
    expect(late).to.deep.equal(['ConnectionPoolCreated', 'ConnectionCheckedIn']);
    releaseTimers();
    expect(rethrown, 'what the handler threw, thrown from a timer as RxJS does').to.deep.equal([fault]);
  });

  it('a fault at any point of any step: every guarantee holds (each scenario, each method, each of its calls)', async function () {
    this.timeout(120_000);
    const broken: string[] = [];
    let runs = 0;
    for (const [scenario, run] of Object.entries(FAULT_SCENARIOS)) {
      const baseline = await collectingReports((reported) => violations(run(), undefined, reported));
      expect(baseline, `${scenario}, with no fault`).to.deep.equal([]);
      for (const [site, proto, method] of FAULT_SITES) {
        // Call 1, 2, 3, ... of the method, until a run no longer reaches that call.
        for (let nth = 1; ; nth++) {
          let injection: Injection | undefined;
          FaultScene.afterCreate = () => (injection = injectFault(proto, method, nth));
          let found: string[];
          try {
            found = await collectingReports((reported) => violations(run(), injection, reported));
          } finally {
            FaultScene.afterCreate = undefined;
            injection?.restore();
          }
          runs++;
          if (!injection!.fired) break;
          for (const f of found) broken.push(`${scenario}; ${site} call ${nth}: ${f}`);
        }
      }
    }
    expect(broken).to.deep.equal([]);
    expect(runs, 'runs').to.be.above(1000);
  });
});
