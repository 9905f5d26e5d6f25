/**
 * The pure parts of the benchmark report that run.ts builds from its medians: the OpenTelemetry instrumentation
 * table and the table of the extensions unused, with their targets.
 */
import { callersLabel, human, ratio, ratioAgainst, table } from './stats';

/** One target of the report: what it asks, whether the run met it, and the figure measured. */
export interface Target {
  readonly target: string;
  readonly met: boolean;
  readonly detail: string;
}

/**
 * The least share of rxcmap observed's throughput rxcmap instrumented (no exporter attached: the API's Meter, no SDK)
 * must keep: the instrumentation may cost at most 5% on top of being observed.
 */
export const INSTRUMENTED_MIN_RATIO = 0.95;

/** The median throughputs (cycles/s) of one throughput cell, rxcmap's modes only. */
export interface InstrumentationCell {
  readonly maxPoolSize: number;
  readonly callers: number;
  readonly unobserved: number;
  readonly observed: number;
  /** Instrumented with the API's Meter, no SDK registered (no exporter attached). */
  readonly instrumented: number;
  /** Instrumented on an SDK MeterProvider with no reader. */
  readonly instrumentedSdk: number;
  /** Instrumented on an SDK MeterProvider with a reader that never collects during the run. */
  readonly instrumentedWithReader: number;
}

/**
 * The OpenTelemetry instrumentation section: one table row per cell (maxPoolSize, callers, unobserved, observed, then
 * each instrumented variant as `cycles/s (× observed / × unobserved)`), and one target per cell whose caller count is
 * in `targetCallers`: `rxcmap instrumented ≥ 0.95× rxcmap observed` ({@link INSTRUMENTED_MIN_RATIO}). Cells of other
 * caller counts are information only; the SDK variants never have a target (their cost is the SDK's own). A cell with a figure that is not
 * a positive finite number misses its target and shows `n/a`.
 */
export function instrumentationReport(
  cells: readonly InstrumentationCell[],
  targetCallers: readonly number[],
): { table: string; targets: Target[] } {
  const both = (n: number, c: InstrumentationCell): string => `${human(n)} (${ratio(n, c.observed)} / ${ratio(n, c.unobserved)})`;
  const rows = cells.map((c) => [
    String(c.maxPoolSize),
    String(c.callers),
    human(c.unobserved),
    human(c.observed),
    both(c.instrumented, c),
    both(c.instrumentedSdk, c),
    both(c.instrumentedWithReader, c),
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
  const targets = cells
    .filter((c) => targetCallers.includes(c.callers))
    .map((c): Target => {
      const share = c.instrumented / c.observed;
      const valid = [c.instrumented, c.observed].every((n) => Number.isFinite(n) && n > 0);
      return {
        target: `rxcmap instrumented ≥ ${INSTRUMENTED_MIN_RATIO}× rxcmap observed (maxPoolSize ${c.maxPoolSize}, ${callersLabel(c.callers)})`,
        met: valid && share >= INSTRUMENTED_MIN_RATIO,
        detail:
          `${ratioAgainst(c.instrumented, c.observed, INSTRUMENTED_MIN_RATIO)} (${human(c.instrumented)} vs ${human(c.observed)} cycles/s; ` +
          `${ratio(c.instrumented, c.unobserved)} rxcmap unobserved)`,
      };
    });
  return { table: table(header, rows), targets };
}

/**
 * The least share of rxcmap's throughput before its extensions (see baseline.ts) rxcmap must keep with every extension
 * unused, in each mode: the resolution of one median between runs on the benchmark machine.
 */
export const EXTENSIONS_MIN_RATIO = 0.95;

/** The median throughputs (cycles/s) of one throughput cell: rxcmap and rxcmap before its extensions. */
export interface ExtensionsCell {
  readonly maxPoolSize: number;
  readonly callers: number;
  readonly unobserved: number;
  readonly observed: number;
  readonly baselineUnobserved: number;
  readonly baselineObserved: number;
}

/**
 * The section of the extensions unused: one row per cell (maxPoolSize, callers, then per mode the baseline and
 * `rxcmap (× baseline)`), and per cell whose caller count is in `targetCallers` one target per mode: `rxcmap ≥ 0.95×
 * rxcmap at <commit>` ({@link EXTENSIONS_MIN_RATIO}). A figure that is not a positive finite number misses its target.
 */
export function extensionsReport(
  cells: readonly ExtensionsCell[],
  targetCallers: readonly number[],
  commit: string,
): { table: string; targets: Target[] } {
  const rows = cells.map((c) => [
    String(c.maxPoolSize),
    String(c.callers),
    human(c.baselineUnobserved),
    `${human(c.unobserved)} (${ratio(c.unobserved, c.baselineUnobserved)})`,
    human(c.baselineObserved),
    `${human(c.observed)} (${ratio(c.observed, c.baselineObserved)})`,
  ]);
  const header = ['maxPoolSize', 'callers', `rxcmap at ${commit} unobserved`, 'rxcmap unobserved', `rxcmap at ${commit} observed`, 'rxcmap observed'];
  const targets = cells
    .filter((c) => targetCallers.includes(c.callers))
    .flatMap((c) =>
      (['unobserved', 'observed'] as const).map((mode): Target => {
        const ours = c[mode];
        const before = mode === 'unobserved' ? c.baselineUnobserved : c.baselineObserved;
        const valid = [ours, before].every((n) => Number.isFinite(n) && n > 0);
        return {
          target: `rxcmap ${mode} ≥ ${EXTENSIONS_MIN_RATIO}× rxcmap at ${commit} ${mode}, every extension unused (maxPoolSize ${c.maxPoolSize}, ${callersLabel(c.callers)})`,
          met: valid && ours >= EXTENSIONS_MIN_RATIO * before,
          detail: `${ratioAgainst(ours, before, EXTENSIONS_MIN_RATIO)} (${human(ours)} vs ${human(before)} cycles/s)`,
        };
      }),
    );
  return { table: table(header, rows), targets };
}
