/**
 * The pure parts of the benchmark report that run.ts builds from its samples: the OpenTelemetry instrumentation
 * table and the table of the extensions unused, with their targets.
 */
import { callersLabel, human, median, medianInterval, pairedRatios, ratio, ratioAgainst, table } from './stats';

/** One target of the report: what it asks, whether the run met it, and the figure measured. */
export interface Target {
  readonly target: string;
  readonly met: boolean;
  readonly detail: string;
}

/**
 * Targets of the form "entry A keeps at least a share of entry B's throughput", both measured in the same rounds,
 * decided on the per-round ratios A/B. Pairing the two of one round reduces the effect of the machine's speed drifting
 * between rounds, which alone spreads one cell's samples of one entry over ±20% on the benchmark machine.
 * - Over all target cells, the 95% interval of the median per-round ratio (sign-test order statistics; each round of
 *   each cell taken as an independent pair) must start at `min` or above. This rules out, at 97.5% one-sided, a cost
 *   of (1 − `min`) or more common to the cells; a cost confined to a few cells moves the pooled median little.
 * - Each target cell's own median per-round ratio must reach `cellMin`, a coarser check: it shows a cost confined to
 *   one cell only when it is larger than (1 − `cellMin`), since one cell's few rounds cannot resolve (1 − `min`).
 */
export interface PairedTarget {
  /** What is compared, as the target reads: `rxcmap instrumented`, `rxcmap at abc1234 observed`. */
  readonly ours: string;
  readonly against: string;
  /** Appended to each target's name (`, every extension unused`), or empty. */
  readonly qualifier: string;
  readonly min: number;
  readonly cellMin: number;
}

/** One cell's samples (cycles/s, one per round, in round order) of the two entries a {@link PairedTarget} compares. */
export interface PairedCell {
  readonly maxPoolSize: number;
  readonly callers: number;
  readonly ours: readonly number[];
  readonly against: readonly number[];
}

/** The per-round ratios of a cell, or [NaN] when a sample is not a positive finite number (every target it is in misses). */
function cellRatios(c: PairedCell): number[] {
  const valid = (values: readonly number[]): boolean => values.length > 0 && values.every((n) => Number.isFinite(n) && n > 0);
  return valid(c.ours) && valid(c.against) ? pairedRatios(c.ours, c.against) : [Number.NaN];
}

/** `1.04×, 0.90×–1.20×`: a cell's median per-round ratio, then its lowest and highest. */
export function roundsSummary(c: PairedCell): string {
  const r = cellRatios(c);
  return `${ratio(median(r), 1)}, ${ratio(Math.min(...r), 1)}–${ratio(Math.max(...r), 1)}`;
}

/**
 * The targets of `what` over `cells` (only those whose caller count is in `targetCallers`; none when there are none):
 * first the one over all of them, then one per cell. See {@link PairedTarget}. A cell with a sample that is not a
 * positive finite number misses both its own target and the one over all cells. Throws a RangeError when a targeted
 * cell's two entries have different numbers of samples (they could not be paired by round).
 */
export function pairedTargets(what: PairedTarget, cells: readonly PairedCell[], targetCallers: readonly number[]): Target[] {
  const targeted = cells.filter((c) => targetCallers.includes(c.callers));
  if (targeted.length === 0) return [];
  const all = targeted.flatMap(cellRatios);
  const finite = all.every(Number.isFinite);
  const { median: mid, low, high } = medianInterval(finite ? all : []);
  const overall: Target = {
    target:
      `${what.ours} against ${what.against}${what.qualifier}, over every cell at ${targetCallers.map(String).join(', ')} ` +
      `callers: the 95% interval of the median per-round ratio starts at ≥ ${what.min}×`,
    met: finite && low >= what.min,
    detail: finite
      ? `${ratioAgainst(low, 1, what.min)}–${ratio(high, 1)}, median ${ratio(mid, 1)} (${all.length} rounds in ${targeted.length} cells)`
      : 'n/a (a sample is not a positive finite number)',
  };
  const each = targeted.map((c): Target => {
    const r = cellRatios(c);
    const cellMedian = median(r);
    return {
      target: `${what.ours} ≥ ${what.cellMin}× ${what.against}${what.qualifier} (maxPoolSize ${c.maxPoolSize}, ${callersLabel(c.callers)}; median per-round ratio)`,
      met: r.every(Number.isFinite) && cellMedian >= what.cellMin,
      detail:
        `${Number.isFinite(cellMedian) ? `${cellMedian.toFixed(3)}×` : 'n/a'} (rounds ${ratio(Math.min(...r), 1)}–${ratio(Math.max(...r), 1)}; ` +
        `medians ${human(median([...c.ours]))} vs ${human(median([...c.against]))} cycles/s)`,
    };
  });
  return [overall, ...each];
}

/**
 * What rxcmap instrumented (no exporter attached: the API's Meter, no SDK) must keep of rxcmap observed's throughput,
 * as the low end of the 95% interval of the median per-round ratio over all target cells ({@link PairedTarget}).
 */
export const INSTRUMENTED_MIN_RATIO = 0.95;

/** What one target cell's median per-round ratio of rxcmap instrumented to rxcmap observed must reach. */
export const INSTRUMENTED_CELL_MIN_RATIO = 0.9;

/** The throughputs (cycles/s, one per round, in round order) of one throughput cell, rxcmap's modes only. */
export interface InstrumentationCell {
  readonly maxPoolSize: number;
  readonly callers: number;
  readonly unobserved: readonly number[];
  readonly observed: readonly number[];
  /** Instrumented with the API's Meter, no SDK registered (no exporter attached). */
  readonly instrumented: readonly number[];
  /** Instrumented on an SDK MeterProvider with no reader. */
  readonly instrumentedSdk: readonly number[];
  /** Instrumented on an SDK MeterProvider with a reader that never collects during the run. */
  readonly instrumentedWithReader: readonly number[];
}

/**
 * The OpenTelemetry instrumentation section: one table row per cell (maxPoolSize, callers, then the medians of
 * unobserved, observed and each instrumented variant, the variants as `cycles/s (× observed / × unobserved)`, ratios of
 * the medians), and the targets of rxcmap instrumented against rxcmap observed ({@link pairedTargets},
 * {@link INSTRUMENTED_MIN_RATIO}, {@link INSTRUMENTED_CELL_MIN_RATIO}) over the cells whose caller count is in
 * `targetCallers`. The SDK variants never have a target (their cost is the SDK's own). A ratio shows `n/a` when its
 * divisor is not positive or its dividend not finite; a sample that is not a positive finite number misses every target
 * it is in.
 */
export function instrumentationReport(
  cells: readonly InstrumentationCell[],
  targetCallers: readonly number[],
): { table: string; targets: Target[] } {
  const m = (values: readonly number[]): number => median([...values]);
  const both = (n: number, c: InstrumentationCell): string => `${human(n)} (${ratio(n, m(c.observed))} / ${ratio(n, m(c.unobserved))})`;
  const rows = cells.map((c) => [
    String(c.maxPoolSize),
    String(c.callers),
    human(m(c.unobserved)),
    human(m(c.observed)),
    both(m(c.instrumented), c),
    both(m(c.instrumentedSdk), c),
    both(m(c.instrumentedWithReader), c),
  ]);
  const header = [
    'maxPoolSize',
    'callers',
    'rxcmap unobserved',
    'rxcmap observed',
    'rxcmap instrumented',
    'rxcmap instrumented (SDK)',
    'rxcmap instrumented (SDK, reader)',
  ];
  const targets = pairedTargets(
    { ours: 'rxcmap instrumented', against: 'rxcmap observed', qualifier: '', min: INSTRUMENTED_MIN_RATIO, cellMin: INSTRUMENTED_CELL_MIN_RATIO },
    cells.map((c) => ({ maxPoolSize: c.maxPoolSize, callers: c.callers, ours: c.instrumented, against: c.observed })),
    targetCallers,
  );
  return { table: table(header, rows), targets };
}

/**
 * What rxcmap must keep of its throughput before its extensions (see baseline.ts), every extension unused, in each
 * mode, as the low end of the 95% interval of the median per-round ratio over all target cells ({@link PairedTarget}).
 */
export const EXTENSIONS_MIN_RATIO = 0.95;

/** What one target cell's median per-round ratio of rxcmap to rxcmap before its extensions must reach, in each mode. */
export const EXTENSIONS_CELL_MIN_RATIO = 0.9;

/** The samples (cycles/s, one per round, in round order) of one throughput cell: rxcmap and rxcmap before its extensions. */
export interface ExtensionsCell {
  readonly maxPoolSize: number;
  readonly callers: number;
  readonly unobserved: readonly number[];
  readonly observed: readonly number[];
  readonly baselineUnobserved: readonly number[];
  readonly baselineObserved: readonly number[];
}

/**
 * The section of the extensions unused: one row per cell (maxPoolSize, callers, then per mode the baseline's median and
 * rxcmap's as `median (× baseline's median; rounds: median per-round ratio, lowest–highest)`), and per mode the
 * targets of rxcmap against the baseline ({@link pairedTargets}, {@link EXTENSIONS_MIN_RATIO},
 * {@link EXTENSIONS_CELL_MIN_RATIO}) over the cells whose caller count is in `targetCallers`.
 */
export function extensionsReport(
  cells: readonly ExtensionsCell[],
  targetCallers: readonly number[],
  commit: string,
): { table: string; targets: Target[] } {
  const modes = ['unobserved', 'observed'] as const;
  const paired = (c: ExtensionsCell, mode: (typeof modes)[number]): PairedCell => ({
    maxPoolSize: c.maxPoolSize,
    callers: c.callers,
    ours: c[mode],
    against: mode === 'unobserved' ? c.baselineUnobserved : c.baselineObserved,
  });
  const ours = (c: ExtensionsCell, mode: (typeof modes)[number]): string => {
    const p = paired(c, mode);
    return `${human(median([...p.ours]))} (${ratio(median([...p.ours]), median([...p.against]))}; rounds ${roundsSummary(p)})`;
  };
  const rows = cells.map((c) => [
    String(c.maxPoolSize),
    String(c.callers),
    human(median([...c.baselineUnobserved])),
    ours(c, 'unobserved'),
    human(median([...c.baselineObserved])),
    ours(c, 'observed'),
  ]);
  const header = ['maxPoolSize', 'callers', `rxcmap at ${commit} unobserved`, 'rxcmap unobserved', `rxcmap at ${commit} observed`, 'rxcmap observed'];
  const targets = modes.flatMap((mode) =>
    pairedTargets(
      { ours: `rxcmap ${mode}`, against: `rxcmap at ${commit} ${mode}`, qualifier: ', every extension unused', min: EXTENSIONS_MIN_RATIO, cellMin: EXTENSIONS_CELL_MIN_RATIO },
      cells.map((c) => paired(c, mode)),
      targetCallers,
    ),
  );
  return { table: table(header, rows), targets };
}
