/**
 * The benchmark's comparisons that say what limits rxcmap and what its extensions cost: bench/report.ts's table and
 * targets of the extensions unused, bench/baseline.ts's extraction of the pool before them, and bench/limit-shape.ts,
 * the limit's pool on rxcmap's shape (it must be a working FIFO pool, or its figure means nothing).
 */
import { expect } from 'chai';
import { BASELINE_COMMIT, loadBaseline } from '../../bench/baseline';
import { ShapePool } from '../../bench/limit-shape';
import { EXTENSIONS_MIN_RATIO, extensionsReport, type ExtensionsCell } from '../../bench/report';

const cell = (maxPoolSize: number, callers: number, unobserved: number, observed: number): ExtensionsCell => ({
  maxPoolSize,
  callers,
  unobserved,
  observed,
  baselineUnobserved: 2_000_000,
  baselineObserved: 1_000_000,
});

describe('bench: the extensions unused, and the limit on rxcmap\'s shape', function () {
  describe('extensionsReport', function () {
    it('reports each cell against the baseline in both modes, with a target per mode for the target caller counts', function () {
      const { table, targets } = extensionsReport([cell(10, 1, 2_100_000, 940_000), cell(10, 10_000, 100_000, 100_000)], [1], 'abc1234');
      expect(table.split('\n')).to.deep.equal([
        '| maxPoolSize | callers | rxcmap at abc1234 unobserved | rxcmap unobserved | rxcmap at abc1234 observed | rxcmap observed |',
        '| --- | --- | --- | --- | --- | --- |',
        '| 10 | 1 | 2.00M | 2.10M (1.05×) | 1.00M | 940.0k (0.94×) |',
        '| 10 | 10000 | 2.00M | 100.0k (0.05×) | 1.00M | 100.0k (0.10×) |',
      ]);
      expect(targets.map((t) => [t.target, t.met, t.detail])).to.deep.equal([
        [`rxcmap unobserved ≥ ${EXTENSIONS_MIN_RATIO}× rxcmap at abc1234 unobserved, every extension unused (maxPoolSize 10, 1 caller)`, true, '1.05× (2.10M vs 2.00M cycles/s)'],
        [`rxcmap observed ≥ ${EXTENSIONS_MIN_RATIO}× rxcmap at abc1234 observed, every extension unused (maxPoolSize 10, 1 caller)`, false, '0.94× (940.0k vs 1.00M cycles/s)'],
      ]);
    });

    it('misses a target whose figures are not positive finite numbers, and meets one exactly at the ratio', function () {
      const { targets } = extensionsReport([cell(10, 1, Infinity, EXTENSIONS_MIN_RATIO * 1_000_000)], [1], 'abc1234');
      expect(targets.map((t) => t.met)).to.deep.equal([false, true]);
    });

    it('shows a third decimal where two would put a ratio on the other side of the target', function () {
      const { targets } = extensionsReport([cell(10, 1, 1_898_000, 950_000)], [1], 'abc1234');
      expect(targets.map((t) => [t.met, t.detail])).to.deep.equal([
        [false, '0.949× (1.90M vs 2.00M cycles/s)'],
        [true, '0.95× (950.0k vs 1.00M cycles/s)'],
      ]);
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
