/**
 * The demo's progress line: built from the run's counters, bounded to a width so it never wraps on a terminal, and
 * framed either to rewrite one terminal line in place or as one log line.
 */

/** What a progress line shows. */
export interface Progress {
  /** ms since the workers started. */
  readonly elapsedMS: number;
  /** Successful checkouts so far. */
  readonly checkouts: number;
  /** The pool's state as last announced by its events: `paused`, `ready` or `closed`. */
  readonly poolState: string;
  readonly generation: number;
  readonly inUse: number;
  readonly available: number;
  readonly pending: number;
  readonly waiting: number;
  readonly heartbeats: { readonly succeeded: number; readonly failed: number; readonly lastMS: number };
}

/** The column count assumed when the terminal does not say. */
export const DEFAULT_COLUMNS = 80;

/**
 * How many characters a progress line may take on a terminal of `columns` columns ({@link DEFAULT_COLUMNS} when
 * unknown): one less, so the cursor never reaches the last column and the line never wraps.
 */
export function progressWidth(columns: number | undefined): number {
  return Math.max(0, (columns !== undefined && columns > 0 ? columns : DEFAULT_COLUMNS) - 1);
}

/**
 * One progress line of at most `width` characters (default: unbounded). Its parts, most important first: elapsed
 * time, checkouts and their rate, pool state and generation, connections in use and checkouts waiting, available
 * and pending connections, heartbeats. A part that does not fit is left out; a first part wider than `width` is cut.
 */
export function progressLine(p: Progress, width = Infinity): string {
  const seconds = p.elapsedMS / 1000;
  const rate = seconds > 0 ? Math.round(p.checkouts / seconds) : 0;
  const parts = [
    `${seconds.toFixed(1)}s`,
    `${p.checkouts} checkouts (${rate}/s)`,
    `pool ${p.poolState} gen ${p.generation}`,
    `${p.inUse} in use, ${p.waiting} waiting`,
    `${p.available} available, ${p.pending} pending`,
    `heartbeats ${p.heartbeats.succeeded} ok / ${p.heartbeats.failed} failed (last ${p.heartbeats.lastMS.toFixed(1)} ms)`,
  ];
  let line = '';
  for (const part of parts) {
    const longer = line === '' ? part : `${line}  ${part}`;
    if (longer.length <= width) line = longer;
  }
  return line === '' ? parts[0].slice(0, Math.max(0, width)) : line;
}

/**
 * What to write for one refresh: on a terminal, back to column 0, clear the line (`\r\x1b[2K`), then the line, so
 * each refresh replaces the last; elsewhere (a file, a pipe), the line and a newline.
 */
export function progressFrame(line: string, tty: boolean): string {
  return tty ? `\r\x1b[2K${line}` : `${line}\n`;
}
