/**
 * The benchmark's comparisons that say what limits rxcmap and what its extensions cost: bench/report.ts's table and
 * targets of the extensions unused, bench/baseline.ts's extraction of the pool before them, and bench/limit-shape.ts,
 * the limit's pool on rxcmap's shape (it must be a working FIFO pool, or its figure means nothing).
 */
import { expect } from 'chai';
import { BASELINE_COMMIT, loadBaseline } from '../../bench/baseline';
import { ShapePool } from '../../bench/limit-shape';
import { EXTENSIONS_CELL_MIN_RATIO, EXTENSIONS_MIN_RATIO, extensionsReport, type ExtensionsCell } from '../../bench/report';

/** A cell whose rounds are the given rxcmap samples against a baseline of 2M (unobserved) and 1M (observed) per round. */
const cell = (maxPoolSize: number, callers: number, unobserved: number[], observed: number[]): ExtensionsCell => ({
  maxPoolSize,
  callers,
  unobserved,
  observed,
  baselineUnobserved: unobserved.map(() => 2_000_000),
  baselineObserved: observed.map(() => 1_000_000),
});

/** n rounds of `value` times the baseline, spread by ±spread in turn (the median stays `value`). */
const rounds = (n: number, value: number, base: number, spread = 0): number[] =>
  Array.from({ length: n }, (_, i) => base * (value + (i % 2 === 0 ? spread : -spread) * (i === n - 1 && n % 2 === 1 ? 0 : 1)));

describe('bench: the extensions unused, and the limit on rxcmap\'s shape', function () {
  describe('extensionsReport', function () {
    it('reports each cell against the baseline in both modes: the ratio of the medians, then of the rounds paired', function () {
      const c = {
        maxPoolSize: 10,
        callers: 1,
        unobserved: [2_200_000, 1_800_000, 2_100_000],
        observed: [900_000, 1_000_000, 1_200_000],
        baselineUnobserved: [2_000_000, 2_000_000, 1_500_000],
        baselineObserved: [1_000_000, 1_000_000, 1_000_000],
      };
      const { table } = extensionsReport([c], [], 'abc1234');
      expect(table.split('\n')).to.deep.equal([
        '| maxPoolSize | callers | rxcmap at abc1234 unobserved | rxcmap unobserved | rxcmap at abc1234 observed | rxcmap observed |',
        '| --- | --- | --- | --- | --- | --- |',
        // unobserved: medians 2.10M / 2.00M; rounds 1.10, 0.90, 1.40 → median 1.10
        '| 10 | 1 | 2.00M | 2.10M (1.05×; rounds 1.10×, 0.90×–1.40×) | 1.00M | 1.00M (1.00×; rounds 1.00×, 0.90×–1.20×) |',
      ]);
    });

    it('sets one target per mode over the target cells (the low end of the 95% interval) and one per target cell', function () {
      // 3 target cells × 7 rounds = 21 pairs per mode (10000 callers has no target): the sign test's 95% interval runs
      // from the 6th to the 16th smallest
      const cells = [1, 10, 100, 10_000].map((callers) => cell(10, callers, rounds(7, 1.0, 2_000_000, 0.1), rounds(7, 1.0, 1_000_000, 0.01)));
      const { targets } = extensionsReport(cells, [1, 10, 100], 'abc1234');
      expect(targets.map((t) => [t.target, t.met, t.detail])).to.deep.equal([
        [
          `rxcmap unobserved against rxcmap at abc1234 unobserved, every extension unused, over every cell at 1, 10, 100 callers: the 95% interval of the median per-round ratio starts at ≥ ${EXTENSIONS_MIN_RATIO}×`,
          false,
          '0.90×–1.10×, median 1.00× (21 rounds in 3 cells)',
        ],
        ...[1, 10, 100].map((n) => [
          `rxcmap unobserved ≥ ${EXTENSIONS_CELL_MIN_RATIO}× rxcmap at abc1234 unobserved, every extension unused (maxPoolSize 10, ${n === 1 ? '1 caller' : `${n} callers`}; median per-round ratio)`,
          true,
          '1.000× (rounds 0.90×–1.10×; medians 2.00M vs 2.00M cycles/s)',
        ]),
        [
          `rxcmap observed against rxcmap at abc1234 observed, every extension unused, over every cell at 1, 10, 100 callers: the 95% interval of the median per-round ratio starts at ≥ ${EXTENSIONS_MIN_RATIO}×`,
          true,
          '0.99×–1.01×, median 1.00× (21 rounds in 3 cells)',
        ],
        ...[1, 10, 100].map((n) => [
          `rxcmap observed ≥ ${EXTENSIONS_CELL_MIN_RATIO}× rxcmap at abc1234 observed, every extension unused (maxPoolSize 10, ${n === 1 ? '1 caller' : `${n} callers`}; median per-round ratio)`,
          true,
          '1.000× (rounds 0.99×–1.01×; medians 1.00M vs 1.00M cycles/s)',
        ]),
      ]);
    });

    it('pairs the samples of the same round and takes the median of their ratios, not the ratio of their medians', function () {
      // The baseline's speed changes from round to round; rxcmap keeps 1.00× of it in rounds 1, 3, 5, 7 and 0.85× in
      // rounds 2, 4, 6. The ratio of the medians is 3.40M / 4.00M = 0.85×; the median per-round ratio is 1.00×.
      const against = [1, 2, 3, 4, 5, 6, 7].map((m) => m * 1_000_000);
      const ours = against.map((x, i) => x * (i % 2 === 0 ? 1 : 0.85));
      const drifting = (callers: number): ExtensionsCell => ({
        maxPoolSize: 10,
        callers,
        unobserved: ours,
        observed: rounds(7, 1, 1_000_000),
        baselineUnobserved: against,
        baselineObserved: rounds(7, 1, 1_000_000),
      });
      const { table, targets } = extensionsReport([1, 10, 100].map(drifting), [1, 10, 100], 'abc1234');
      expect(table.split('\n')[2]).to.equal('| 10 | 1 | 4.00M | 3.40M (0.85×; rounds 1.00×, 0.85×–1.00×) | 1.00M | 1.00M (1.00×; rounds 1.00×, 1.00×–1.00×) |');
      const unobserved = targets.filter((t) => t.target.startsWith('rxcmap unobserved'));
      expect(unobserved.map((t) => [t.met, t.detail])).to.deep.equal([
        // 21 pairs: 9 at 0.85, 12 at 1.00; the interval runs from the 6th to the 16th smallest
        [false, '0.85×–1.00×, median 1.00× (21 rounds in 3 cells)'],
        ...[1, 2, 3].map(() => [true, '1.000× (rounds 0.85×–1.00×; medians 3.40M vs 4.00M cycles/s)']),
      ]);
    });

    it('misses the target of a cell whose median per-round ratio is below its minimum, and meets one exactly at it', function () {
      const { targets } = extensionsReport(
        [cell(10, 1, rounds(7, 0.899, 2_000_000), rounds(7, 1, 1_000_000)), cell(10, 10, rounds(7, EXTENSIONS_CELL_MIN_RATIO, 2_000_000), rounds(7, 1, 1_000_000))],
        [1, 10],
        'abc1234',
      );
      const unobserved = targets.filter((t) => t.target.startsWith('rxcmap unobserved ≥'));
      expect(unobserved.map((t) => [t.met, t.detail.split(' (')[0]])).to.deep.equal([
        [false, '0.899×'], // three decimals: 0.90× would read as met
        [true, '0.900×'],
      ]);
    });

    it('misses every target a sample that is not a positive finite number is in, and an interval too few rounds give', function () {
      const broken = cell(10, 1, [2_000_000, Infinity, 2_000_000, 2_000_000, 2_000_000, 2_000_000, 2_000_000], rounds(7, 1, 1_000_000));
      const { targets } = extensionsReport([broken], [1], 'abc1234');
      expect(targets.map((t) => t.met)).to.deep.equal([false, false, true, true]);
      const few = extensionsReport([cell(10, 1, rounds(5, 1, 2_000_000), rounds(5, 1, 1_000_000))], [1], 'abc1234');
      expect(few.targets.map((t) => t.met), '5 rounds give no 95% interval of a median').to.deep.equal([false, true, false, true]);
    });
  });

  describe('loadBaseline', function () {
    this.timeout(60_000);

    it(`extracts the pool of commit ${BASELINE_COMMIT} beside the current one, a pool that checks out and in`, async function () {
      const library = loadBaseline();
      if (typeof library === 'string') throw new Error(library);
      const { MockConnectionFactory } = require('../../lib/testing') as typeof import('../../lib/testing');
      const mock = new MockConnectionFactory();
      const pool = new library.ConnectionPool({ address: 'baseline:27017', connectionFactory: mock.factory as never });
      try {
        pool.ready();
        const connection = await pool.checkOut();
        pool.checkIn(connection);
        expect(pool.snapshot().availableConnectionCount).to.equal(1);
        expect(library.ConnectionPool).to.not.equal((require('../../lib') as typeof import('../../lib')).ConnectionPool);
      } finally {
        pool.close();
      }
    });
  });

  describe('ShapePool', function () {
    it('hands out its items, queues checkouts FIFO when none is free, and serves them as items are released', async function () {
      const pool = new ShapePool(['a', 'b']);
      const first = await pool.acquire();
      const second = await pool.acquire();
      const served: string[] = [];
      const waiting = [1, 2, 3].map((n) => Promise.resolve(pool.acquire()).then((item) => served.push(`${n}:${item}`)));
      await Promise.resolve();
      expect(served).to.deep.equal([]);
      pool.release(second);
      pool.release(first);
      await Promise.all(waiting.slice(0, 2));
      expect(served).to.deep.equal([`1:${second}`, `2:${first}`]);
      pool.release('c');
      await waiting[2];
      expect(served).to.deep.equal([`1:${second}`, `2:${first}`, '3:c']);
    });

    it('delivers on a microtask, never inside the then that started the checkout, and shares one checkout between thens', async function () {
      const pool = new ShapePool(['a']);
      const request = pool.acquire();
      let delivered: string | undefined;
      const done = request.then((item) => (delivered = item));
      expect(delivered).to.equal(undefined);
      await done;
      expect(delivered).to.equal('a');
      expect(await request).to.equal('a');
      const next = pool.acquire();
      let late = false;
      void Promise.resolve(next).then(() => (late = true));
      await Promise.resolve();
      await Promise.resolve();
      expect(late, 'a second checkout of the only item waits for its release').to.equal(false);
    });
  });
});
