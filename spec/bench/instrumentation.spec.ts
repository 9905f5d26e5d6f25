/**
 * bench/report.ts and bench/mode-check.ts for rxcmap instrumented with `rxcmap/opentelemetry`: the table rows with
 * their ratios to rxcmap observed and unobserved, the `instrumented ≥ 0.95× observed` targets, and the mode check of
 * the instrumented peers against the embedded endpoint, which passes for them and fails for a pool whose Meter is
 * read but was never given to `instrumentConnectionPool`.
 */
import { expect } from 'chai';
import { MeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { EmbeddedServer } from '../../lib/testing';
import { CHECK_CYCLES, checkModes } from '../../bench/mode-check';
import { INSTRUMENTED, RXCMAP, type Peer } from '../../bench/peers';
import { INSTRUMENTED_CELL_MIN_RATIO, INSTRUMENTED_MIN_RATIO, instrumentationReport, type InstrumentationCell } from '../../bench/report';

/** A reader collected from by hand. */
class ManualReader extends MetricReader {
  protected override async onShutdown(): Promise<void> {}
  protected override async onForceFlush(): Promise<void> {}
}

/** A cell of 7 rounds, each with the same figures; `instrumented` may differ by round. */
const cell = (maxPoolSize: number, callers: number, instrumented: number | number[], instrumentedWithReader = 500_000): InstrumentationCell => {
  const each = (n: number): number[] => Array.from({ length: 7 }, () => n);
  return {
    maxPoolSize,
    callers,
    unobserved: each(2_000_000),
    observed: each(1_000_000),
    instrumented: typeof instrumented === 'number' ? each(instrumented) : instrumented,
    instrumentedSdk: each(600_000),
    instrumentedWithReader: each(instrumentedWithReader),
  };
};

describe('bench: rxcmap instrumented with rxcmap/opentelemetry', function () {
  describe('instrumentationReport', function () {
    it('reports every cell with the ratios of its medians to observed and unobserved, and targets over the target cells', function () {
      const { table, targets } = instrumentationReport(
        [cell(10, 1, 950_000), cell(100, 1000, [890_000, 1_200_000, 890_000, 1_100_000, 890_000, 1_000_000, 880_000]), cell(10, 10_000, 100_000)],
        [1, 1000],
      );
      expect(table.split('\n')).to.deep.equal([
        '| maxPoolSize | callers | rxcmap unobserved | rxcmap observed | rxcmap instrumented | rxcmap instrumented (SDK) | rxcmap instrumented (SDK, reader) |',
        '| --- | --- | --- | --- | --- | --- | --- |',
        '| 10 | 1 | 2.00M | 1.00M | 950.0k (0.95× / 0.47×) | 600.0k (0.60× / 0.30×) | 500.0k (0.50× / 0.25×) |',
        '| 100 | 1000 | 2.00M | 1.00M | 890.0k (0.89× / 0.45×) | 600.0k (0.60× / 0.30×) | 500.0k (0.50× / 0.25×) |',
        '| 10 | 10000 | 2.00M | 1.00M | 100.0k (0.10× / 0.05×) | 600.0k (0.60× / 0.30×) | 500.0k (0.50× / 0.25×) |',
      ]);
      expect([INSTRUMENTED_MIN_RATIO, INSTRUMENTED_CELL_MIN_RATIO]).to.deep.equal([0.95, 0.9]);
      // 14 rounds: 7 at 0.95, then 0.88, 0.89 ×3, 1.00, 1.10, 1.20; the sign test's 95% interval: 3rd..12th smallest
      expect(targets).to.deep.equal([
        {
          target: 'rxcmap instrumented against rxcmap observed, over every cell at 1, 1000 callers: the 95% interval of the median per-round ratio starts at ≥ 0.95×',
          met: false,
          detail: '0.89×–1.00×, median 0.95× (14 rounds in 2 cells)',
        },
        {
          target: 'rxcmap instrumented ≥ 0.9× rxcmap observed (maxPoolSize 10, 1 caller; median per-round ratio)',
          met: true,
          detail: '0.950× (rounds 0.95×–0.95×; medians 950.0k vs 1.00M cycles/s)',
        },
        {
          target: 'rxcmap instrumented ≥ 0.9× rxcmap observed (maxPoolSize 100, 1000 callers; median per-round ratio)',
          met: false,
          detail: '0.890× (rounds 0.88×–1.20×; medians 890.0k vs 1.00M cycles/s)',
        },
      ]);
    });

    it('meets the target over the cells when the low end of the interval reaches 0.95×', function () {
      const { targets } = instrumentationReport([cell(10, 1, 950_000), cell(10, 10, 1_000_000)], [1, 10]);
      expect(targets.map((t) => [t.met, t.detail.split(' (')[0]])).to.deep.equal([
        [true, '0.95×–1.00×, median 0.97×'],
        [true, '0.950×'],
        [true, '1.000×'],
      ]);
    });

    it('misses the targets and shows n/a when a figure is missing or zero; the variant with a reader has no target', function () {
      const { table, targets } = instrumentationReport(
        [cell(10, 1, Number.NaN), { ...cell(10, 100, 1_000_000), observed: [0, 0, 0, 0, 0, 0, 0] }, cell(100, 1, 2_000_000, 0)],
        [1, 100],
      );
      expect(targets.map((t) => [t.met, t.detail.split(' ')[0]])).to.deep.equal([
        [false, 'n/a'],
        [false, 'n/a'],
        [false, 'n/a'],
        [true, '2.000×'],
      ]);
      expect(table).to.include('| n/a (n/a / n/a) |');
      expect(targets.every((t) => !t.target.includes('reader'))).to.equal(true);
    });
  });

  describe('mode check against the embedded endpoint', function () {
    let server: EmbeddedServer;
    before(async function () {
      server = await new EmbeddedServer().start();
    });
    after(async function () {
      await server.stop();
    });

    it('passes for rxcmap instrumented, on the API and on an SDK with and without a reader: one wait and one use recorded per cycle', async function () {
      const lines: string[] = [];
      const checks = await checkModes(server.address, INSTRUMENTED, (line) => lines.push(line));
      expect(checks.map((c) => c.peer)).to.deep.equal(['rxcmap instrumented', 'rxcmap instrumented (SDK)', 'rxcmap instrumented (SDK, reader)']);
      for (const check of checks) {
        expect(check).to.deep.include({ cycles: 2 * CHECK_CYCLES, eventsPerCycle: 0, writesPerCycle: 0, measurementsPerCycle: 2 });
        expect(check.lifecycle).to.deep.equal({
          'db.client.connection.create_time': 10,
          'db.client.connection.wait_time': 10,
          'db.client.connection.use_time': 10,
          'db.client.connection.count{idle}': 10,
          'db.client.connection.count{used}': 0,
          'db.client.connection.max': 10,
        });
      }
      expect(lines).to.have.length(3);
      expect(lines[0]).to.match(/^mode check: rxcmap instrumented: 2 histogram measurements, 0 events and 0 log messages per cycle/);
    });

    it('fails for a pool whose Meter is read but that was never instrumented, and for one lending no reader', async function () {
      const notInstrumented: Peer = {
        name: 'rxcmap not instrumented',
        mode: 'instrumented',
        async open(maxPoolSize, address, probe) {
          const reader = new ManualReader();
          new MeterProvider({ readers: [reader] }).getMeter('unused');
          if (probe) probe.metricReader = reader;
          return RXCMAP.unobserved.open(maxPoolSize, address);
        },
      };
      const noReader: Peer = { ...RXCMAP.unobserved, name: 'rxcmap lending no reader', mode: 'instrumented' };
      const failure = async (peer: Peer): Promise<string> => {
        try {
          await checkModes(server.address, [peer], () => undefined);
        } catch (error) {
          return (error as Error).message;
        }
        throw new Error(`the mode check passed for ${peer.name}`);
      };
      expect(await failure(notInstrumented)).to.match(
        /^mode check failed for rxcmap not instrumented: its Meter after opening: \{"db.client.connection.create_time":0,/,
      );
      expect(await failure(noReader)).to.equal('mode check failed for rxcmap lending no reader: no reader of its Meter was lent to the probe');
    });
  });
});
