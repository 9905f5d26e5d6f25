/**
 * Steps whose work does not grow with the pool: the inputs that come once per checkout, timeout or establishment read
 * no list of every connection, so a pool with thousands in use (maxPoolSize 0 is unlimited) or thousands establishing
 * takes each of them in the same time as a pool of ten. Counted, not timed: each test counts the passes a step makes
 * over the pool's connections.
 */
import { expect } from 'chai';
import { WaitQueueFullError, WaitQueueTimeoutError } from '../../lib';
import { Bench, type FakeConnection } from './harness';
import type { Waiter } from '../../lib/pool/wait-queue';

/** Counts the passes made over `bench`'s connection records from now on. */
function countPasses(bench: Bench): { readonly count: number } {
  const records = bench.state.records;
  const counter = { count: 0 };
  for (const method of ['values', 'keys', 'entries', 'forEach', Symbol.iterator] as const) {
    const original = records[method].bind(records) as (...args: unknown[]) => unknown;
    Object.defineProperty(records, method, {
      configurable: true,
      value: (...args: unknown[]) => {
        counter.count++;
        return original(...args);
      },
    });
  }
  return counter;
}

/** A ready pool with `n` connections in use. */
function inUse(n: number, options: Record<string, number> = {}, observed = false): { bench: Bench; held: FakeConnection[] } {
  const bench = new Bench({ maxPoolSize: n + 10, maxConnecting: n, ...options }, observed);
  bench.dispatch({ type: 'ready' });
  const waiters = Array.from({ length: n }, () => bench.checkOut());
  for (const id of [...bench.pending]) bench.succeed(id);
  const held = waiters.map((w) => bench.connectionOf(w)!);
  expect(held.every((c) => c !== undefined)).to.equal(true);
  return { bench, held };
}

describe('reducer: steps that do not grow with the pool', function () {
  it('a checkout timing out (its own timeoutMS, or waitQueueTimeoutMS) names the oldest checkout without a pass over the connections', function () {
    const { bench } = inUse(200, { maxPoolSize: 200, waitQueueTimeoutMS: 50 });
    bench.time = 10;
    const own = bench.checkOut();
    const queued = bench.checkOut();
    const passes = countPasses(bench);
    bench.dispatch({ type: 'cancel', waiter: own, timeoutMS: 5 });
    bench.advanceTo(100);
    expect(passes.count).to.equal(0);
    for (const [w, waitQueueLength] of [[own, 2], [queued, 1]] as const) {
      const error = bench.errorOf(w) as WaitQueueTimeoutError;
      expect(error).to.be.instanceOf(WaitQueueTimeoutError);
      expect(error.pool).to.deep.include({ inUseConnectionCount: 200, waitQueueLength });
      expect(error.pool?.oldestCheckOut?.connectionId).to.equal(1);
    }
  });

  it('a checkout refused by a full WaitQueue reports the holdings without a pass over the connections', function () {
    const { bench } = inUse(200, { maxPoolSize: 200, maxWaitQueueSize: 1 });
    bench.checkOut();
    const passes = countPasses(bench);
    const refused = bench.checkOut();
    expect(passes.count).to.equal(0);
    expect(bench.errorOf(refused)).to.be.instanceOf(WaitQueueFullError);
  });

  it('leak detection reads the checkouts that are due and the first that is not, not every connection in use', function () {
    const { bench } = inUse(200, { leakDetectionThresholdMS: 1000 }, true);
    const passes = countPasses(bench);
    bench.advanceTo(999);
    bench.advanceTo(5000);
    expect(passes.count).to.equal(0);
    expect(bench.events.filter((e) => e.type === 'ConnectionLeakSuspected')).to.have.length(200);
  });

  it('a connection established for a younger checkout, going to an older claimant, passes the claim on without a pass over the connections', function () {
    const bench = new Bench({ maxPoolSize: 300, maxConnecting: 300 }, false);
    bench.dispatch({ type: 'ready' });
    const waiters = Array.from({ length: 300 }, () => bench.checkOut());
    const pending = [...bench.pending];
    const passes = countPasses(bench);
    // The youngest checkout's establishment completes first: the oldest claimant gets it, and the youngest takes over
    // the establishment the oldest had started.
    bench.succeed(pending[pending.length - 1]);
    expect(bench.connectionOf(waiters[0])?.id).to.equal(pending[pending.length - 1]);
    // That establishment failing now goes to the youngest, its starter, not to the next oldest claimant.
    bench.failEstablishment(pending[0], new Error('connect ECONNREFUSED'), false);
    expect(bench.errorOf(waiters[299])?.message).to.equal('connect ECONNREFUSED');
    expect(bench.errorOf(waiters[1])).to.equal(undefined);
    expect(passes.count).to.equal(0);
  });

  it('a failed establishment whose starter left goes to the oldest claimant waiting on none of its own without a pass over the connections', function () {
    const bench = new Bench({ maxPoolSize: 300, maxConnecting: 300 }, false);
    bench.dispatch({ type: 'ready' });
    const waiters: Waiter<FakeConnection>[] = Array.from({ length: 300 }, () => bench.checkOut());
    // The oldest leaves: its establishment goes on unclaimed, and the next checkout claims it without starting one.
    bench.cancel(waiters[0]);
    const late = bench.checkOut();
    expect(bench.state.claimants.toArray()).to.include(late);
    const passes = countPasses(bench);
    const [first] = [...bench.pending];
    bench.failEstablishment(first, new Error('connect ECONNREFUSED'), false);
    expect(bench.errorOf(late)?.message).to.equal('connect ECONNREFUSED');
    expect(waiters.slice(1).every((w) => bench.errorOf(w) === undefined)).to.equal(true);
    expect(passes.count).to.equal(0);
  });
});
