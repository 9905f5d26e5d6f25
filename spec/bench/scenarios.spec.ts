import { expect } from 'chai';
import type { PoolUnderTest } from '../../bench/peers';
import { abortAlone, waits } from '../../bench/scenarios';

describe('bench scenarios: the cancel floors', () => {
  it('abort() alone times every abort of each batch', async () => {
    const micros = await abortAlone(50, 100);
    expect(micros).to.be.a('number').and.to.be.greaterThan(0);
    expect(Number.isFinite(micros)).to.equal(true);
  });

  it("the rejection floor rejects every aborted caller with a new error whose cause is the signal's reason, before its batch is timed", async () => {
    const micros = await abortAlone(50, 100, true);
    expect(micros).to.be.a('number').and.to.be.greaterThan(0);
    expect(Number.isFinite(micros)).to.equal(true);
  });
});

describe('bench scenarios: checkout wait', () => {
  /**
   * Resolves once `ms` have passed on `performance.now()`, the clock the bench reads. A timer alone may fire a fraction
   * of a ms early on that clock: libuv counts it from the loop's time, read before the timer was set.
   */
  async function waitedFor(ms: number): Promise<void> {
    const start = performance.now();
    while (performance.now() - start < ms) await new Promise((resolve) => setTimeout(resolve, Math.max(1, ms - (performance.now() - start))));
  }

  /** A pool whose every checkout is served at once but the `slowAt`-th, which waits `slowMS`; `work` runs in each. */
  function fakePool(slowAt: number, slowMS: number, work: () => void = () => undefined): PoolUnderTest {
    let calls = 0;
    return {
      acquire: () => {
        work();
        return ++calls === slowAt ? waitedFor(slowMS).then(() => calls) : Promise.resolve(calls);
      },
      release: () => undefined,
      verifyMode: () => undefined,
      close: async () => undefined,
    };
  }

  it('reports the slowest checkout as max and the tail percentiles between the median and it', async () => {
    const r = await waits(fakePool(500, 30), 1, 2000);
    expect(r.max, 'the one checkout that waited 30 ms').to.be.at.least(30_000);
    expect(r.p50).to.be.below(1000);
    expect(r.p999, 'one sample in 2000 is above the 99.9th percentile').to.be.below(r.max);
    expect(r.p99).to.be.at.most(r.p999);
  });

  it('records the longest garbage-collection pause that began during the run', async () => {
    // Each checkout allocates 64 KiB of short-lived arrays: the young generation is collected several times.
    const garbage: unknown[] = [];
    const r = await waits(fakePool(0, 0, () => void garbage.splice(0, 1, new Array(8192).fill(0))), 1, 3000);
    expect(r.gcLongest, 'at least one scavenge during the run').to.be.greaterThan(0);
    expect(r.gcLongest).to.be.below(1e6);
  });
});
