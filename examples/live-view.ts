/**
 * The demo's live pool view: a pure function from a {@link LiveViewModel} to the lines of one screen, each within a
 * given width and no more of them than a given height. What it shows, top to bottom: the run (endpoint, elapsed
 * time), the pool (CMAP state, generation, counts), one cell per connection, the WaitQueue length, checkouts per
 * second and the checkout wait p50 / p99 as sparklines (one point per window), and the latest heartbeats and clears.
 *
 * Source: extension (a terminal dashboard of the CMAP `ConnectionPool` members and "Connection Pool Monitoring"
 * events, in the manner of `top`).
 */

/**
 * What a connection cell shows: the CMAP connection states a pool keeps (`pending`, `available`, `in use`), and
 * `closing` for a connection closed moments ago (kept a short while so the churn of a clear is visible).
 */
export type CellState = 'pending' | 'available' | 'in use' | 'closing';

/** One connection of the view, by its pool-assigned id. */
export interface ConnectionCell {
  readonly id: number;
  readonly state: CellState;
}

/** A line of the event log: when (ms since the run started) and what happened. */
export interface LogEntry {
  readonly atMS: number;
  readonly text: string;
}

/**
 * Everything the view shows. Series are oldest first, one point per window (the last may be the current window,
 * so far); the view shows their newest points, as many as fit.
 */
export interface LiveViewModel {
  /** Where the pool connects, e.g. `embedded 127.0.0.1:40123`. */
  readonly endpoint: string;
  /** ms since the run started. */
  readonly elapsedMS: number;
  /** ms the run lasts. */
  readonly durationMS: number;
  /** Concurrent workers checking out. */
  readonly workers: number;
  /** The pool's CMAP state: `paused`, `ready` or `closed`. */
  readonly poolState: string;
  /** The pool's CMAP generation. */
  readonly generation: number;
  /** The pool's maxPoolSize (0: unlimited). */
  readonly maxPoolSize: number;
  /** Checkouts waiting, from the last snapshot (`waitQueueLength`). */
  readonly waitQueueLength: number;
  /** Successful checkouts since the run started. */
  readonly checkouts: number;
  /** One cell per connection, in id order. */
  readonly connections: readonly ConnectionCell[];
  /** Successful checkouts per second, per window. */
  readonly checkoutsPerSecond: readonly number[];
  /** The longest WaitQueue seen, per window. */
  readonly waitQueue: readonly number[];
  /** Checkout wait (ConnectionCheckedOut `duration`) median, ms, per window. */
  readonly waitP50MS: readonly number[];
  /** Checkout wait 99th percentile, ms, per window. */
  readonly waitP99MS: readonly number[];
  /** Heartbeats, clears and other pool milestones, oldest first. */
  readonly log: readonly LogEntry[];
}

/** The glyph of each cell state. */
export const CELL_GLYPHS: Readonly<Record<CellState, string>> = Object.freeze({
  'in use': '█',
  available: '▒',
  pending: '░',
  closing: '×',
});

/** The legend line of the connection cells. */
export const CELL_LEGEND = (['in use', 'available', 'pending', 'closing'] as const)
  .map((s) => `${CELL_GLYPHS[s]} ${s}`)
  .join('  ');

/** The eight levels of a sparkline, lowest first. */
export const SPARK_LEVELS = '▁▂▃▄▅▆▇█';

/** The most rows the cell grid takes: cells beyond them are counted in a `+N` at its end. */
const MAX_CELL_ROWS = 3;
const LABEL_WIDTH = 14;
const VALUE_WIDTH = 10;

/**
 * A sparkline of the last `width` values: one block character per value, scaled so the largest shown is `█` and 0
 * is `▁`; non-finite and negative values count as 0. Shorter than `width` when there are fewer values.
 *
 * Source: extension (Edward Tufte's sparklines, drawn with the Unicode lower block elements U+2581..U+2588).
 */
export function sparkline(values: readonly number[], width: number): string {
  const shown = values
    .slice(Math.max(0, values.length - Math.max(0, width)))
    .map((v) => (Number.isFinite(v) && v > 0 ? v : 0));
  const max = Math.max(0, ...shown);
  const top = SPARK_LEVELS.length - 1;
  return shown.map((v) => SPARK_LEVELS[max > 0 ? Math.round((v / max) * top) : 0]).join('');
}

/** `text` cut to `width` characters. */
function fit(text: string, width: number): string {
  return text.length <= width ? text : text.slice(0, Math.max(0, width));
}

/** `left` and `right` on one line of `width`, `right` flush right; `right` is dropped when both do not fit. */
function spread(left: string, right: string, width: number): string {
  const gap = width - left.length - right.length;
  return gap >= 2 ? `${left}${' '.repeat(gap)}${right}` : fit(left, width);
}

const seconds = (ms: number): string => `${(ms / 1000).toFixed(1)} s`;
const decimals = (ms: number): string => (Number.isFinite(ms) ? ms.toFixed(3) : '-');

/** The cell grid: glyphs separated by a space, wrapped at `width`, at most {@link MAX_CELL_ROWS} rows. */
function cellRows(cells: readonly ConnectionCell[], width: number): string[] {
  if (cells.length === 0) return ['(no connections)'];
  const perRow = Math.max(1, Math.floor((width + 1) / 2));
  const glyphs = cells.map((c) => CELL_GLYPHS[c.state]);
  if (glyphs.length <= perRow * MAX_CELL_ROWS) {
    const rows: string[] = [];
    for (let i = 0; i < glyphs.length; i += perRow) rows.push(glyphs.slice(i, i + perRow).join(' '));
    return rows;
  }
  // Too many: fill the rows, the last one ending with how many more there are (` +N`).
  const suffix = ` +${cells.length}`.length; // at least as long as the ` +N` shown
  const drop = Math.ceil(Math.max(0, perRow * 2 - 1 + suffix - width) / 2);
  const shown = Math.max(0, perRow * MAX_CELL_ROWS - drop);
  const rows: string[] = [];
  for (let i = 0; i < shown; i += perRow) rows.push(glyphs.slice(i, Math.min(i + perRow, shown)).join(' '));
  if (rows.length === 0) rows.push('');
  rows[rows.length - 1] = fit(`${rows[rows.length - 1]} +${cells.length - shown}`, width);
  return rows;
}

/** One sparkline row: label, the series' newest points, and its latest value flush right. */
function seriesRow(label: string, values: readonly number[], latest: string, width: number): string {
  const sparkWidth = width - LABEL_WIDTH - VALUE_WIDTH - 1;
  if (sparkWidth < 1) return fit(`${label} ${latest}`, width);
  const spark = sparkline(values, sparkWidth).padEnd(sparkWidth);
  return `${label.padEnd(LABEL_WIDTH)}${spark} ${latest.padStart(VALUE_WIDTH)}`;
}

/**
 * The view of `model` as at most `height` lines of at most `width` characters each (one column per character: the
 * view uses only single-width characters). Lines that do not fit the height are dropped from the end: the event
 * log first, which otherwise fills the lines left over. Never throws; a width or height of 0 gives no characters
 * or no lines.
 *
 * On a terminal, give one column less than the terminal has, so the cursor never reaches the last column.
 *
 * Source: extension (see the module description).
 */
export function renderLiveView(model: LiveViewModel, width: number, height: number): string[] {
  const w = Math.max(0, Math.floor(width));
  const h = Math.max(0, Math.floor(height));
  const counts = { 'in use': 0, available: 0, pending: 0, closing: 0 };
  for (const c of model.connections) counts[c.state]++;
  const open = counts['in use'] + counts.available + counts.pending;
  const max = model.maxPoolSize > 0 ? ` of ${model.maxPoolSize}` : '';
  const last = <T>(values: readonly T[], empty: T): T => (values.length > 0 ? values[values.length - 1] : empty);

  const pool = `pool ${model.poolState} · generation ${model.generation}`;
  const connections = `${counts['in use']} in use, ${counts.available} available, ${counts.pending} pending`;
  const lines = [
    spread(`rxcmap demo · ${model.endpoint}`, `${seconds(model.elapsedMS)} of ${seconds(model.durationMS)}`, w),
    `${pool} · ${model.workers} workers · ${model.checkouts} checkouts`,
    '',
    `connections ${open}${max}: ${connections}, ${counts.closing} closing`,
    ...cellRows(model.connections, w),
    CELL_LEGEND,
    '',
    seriesRow('WaitQueue', model.waitQueue, String(model.waitQueueLength), w),
    seriesRow('checkouts/s', model.checkoutsPerSecond, String(Math.round(last(model.checkoutsPerSecond, 0))), w),
    seriesRow('wait p50 ms', model.waitP50MS, decimals(last(model.waitP50MS, NaN)), w),
    seriesRow('wait p99 ms', model.waitP99MS, decimals(last(model.waitP99MS, NaN)), w),
  ].map((line) => fit(line, w));

  const room = h - lines.length - 2; // a blank line and the log's header
  if (room > 0 && model.log.length > 0) {
    lines.push('', fit('events', w));
    for (const entry of model.log.slice(-room)) lines.push(fit(`${seconds(entry.atMS).padStart(8)}  ${entry.text}`, w));
  }
  return lines.slice(0, h);
}
