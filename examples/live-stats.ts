/**
 * The demo's run statistics in bounded memory: checkout waits go into `perf_hooks` histograms (integer µs), one per
 * window (1 s by default) and one for the whole run, never into a list of samples; per-window series keep only the
 * newest windows, the event log only its newest lines, and closed connections only for a moment. Fed with a pool's
 * `events$` (and a monitor's heartbeats) and `state$` snapshots; read as a {@link LiveViewModel}.
 *
 * Source: extension (the CMAP "Connection Pool Monitoring" events and `ConnectionCheckedOutEvent.duration`,
 * summarised the way HdrHistogram-based monitors do).
 */
import { createHistogram, type RecordableHistogram } from 'node:perf_hooks';
import { InvalidOptionError, MonitorClosedError, type ClientEvent, type PoolSnapshot } from '../lib';
import type { CellState, ConnectionCell, LiveViewModel, LogEntry } from './live-view';

/** Options of {@link LiveStats}. */
export interface LiveStatsOptions {
  /** The clock, in ms (default `performance.now`). */
  readonly now?: () => number;
  /** The length of a window of the series, ms (default 1000). */
  readonly windowMS?: number;
  /** How many windows the series keep (default 240). */
  readonly historyLength?: number;
  /** How many event log lines are kept (default 32). */
  readonly logLength?: number;
  /** How long a closed connection still shows, as `closing`, ms (default 1000). */
  readonly closingMS?: number;
}

/** What the run itself contributes to the view: the parts of {@link LiveViewModel} no event tells. */
export type RunDescription = Pick<LiveViewModel, 'endpoint' | 'durationMS' | 'workers' | 'maxPoolSize'>;

/** Checkout wait percentiles, ms (3 decimals, µs resolution); 0 when there was no checkout. */
export interface WaitPercentiles {
  readonly p50: number;
  readonly p99: number;
}

/** Histograms record integers ≥ 1: waits are kept in µs, a wait under 1 µs counting as 1 µs. */
/** The per-window series of the view, oldest first. */
type Series = { -readonly [K in 'checkoutsPerSecond' | 'waitQueue' | 'waitP50MS' | 'waitP99MS']: number[] };

const toMicros = (ms: number): number => Math.max(1, Math.round(ms * 1000));
const toMillis = (us: number): number => Math.round(us) / 1000;

/**
 * Accumulates a run's checkouts, waits, connections and milestones for the live view and the summary. Memory stays
 * bounded however many checkouts are recorded: see the module description. Never throws on an event it does not
 * know (it ignores it).
 *
 * @throws {InvalidOptionError} from the constructor when `windowMS` or `historyLength` is not an integer >= 1.
 *
 * Source: extension (see the module description).
 */
export class LiveStats {
  /** Successful checkouts (ConnectionCheckedOut events) since construction. */
  checkouts = 0;

  private readonly now: () => number;
  private readonly windowMS: number;
  private readonly historyLength: number;
  private readonly logLength: number;
  private readonly closingMS: number;
  /** The run so far, apart from the current window. */
  private readonly total: RecordableHistogram = createHistogram();
  /** The current window. */
  private readonly window: RecordableHistogram = createHistogram();
  private windowCheckouts = 0;
  private windowWaitQueue = 0;
  private startedAt: number;
  private windowStart: number;
  private readonly series: Series = { checkoutsPerSecond: [], waitQueue: [], waitP50MS: [], waitP99MS: [] };
  private readonly connections = new Map<number, { state: CellState; closedAt: number }>();
  private readonly log: LogEntry[] = [];
  private snapshot: Pick<PoolSnapshot, 'state' | 'generation' | 'waitQueueLength'> = {
    state: 'paused',
    generation: 0,
    waitQueueLength: 0,
  };

  constructor(options: LiveStatsOptions = {}) {
    this.now = options.now ?? (() => performance.now());
    this.windowMS = options.windowMS ?? 1000;
    this.historyLength = options.historyLength ?? 240;
    this.logLength = options.logLength ?? 32;
    this.closingMS = options.closingMS ?? 1000;
    for (const [name, value] of [['windowMS', this.windowMS], ['historyLength', this.historyLength]] as const) {
      if (!Number.isInteger(value) || value < 1) throw new InvalidOptionError(name, value, 'an integer >= 1');
    }
    this.startedAt = this.windowStart = this.now();
  }

  /**
   * Starts the run's clock again: elapsed time, the windows of the series and the event log start from here. The
   * checkouts and waits recorded before still count in {@link checkouts} and {@link waitPercentiles}.
   */
  start(): void {
    this.startedAt = this.windowStart = this.now();
    this.windowCheckouts = 0;
    this.windowWaitQueue = this.snapshot.waitQueueLength;
    this.total.add(this.window);
    this.window.reset();
    for (const values of Object.values(this.series)) values.length = 0;
    this.log.length = 0;
  }

  /** Takes in one pool or heartbeat event. */
  onEvent(e: ClientEvent): void {
    this.roll();
    switch (e.type) {
      case 'ConnectionCheckedOut':
        this.checkouts++;
        this.windowCheckouts++;
        if (e.duration !== undefined) this.window.record(toMicros(e.duration)); // undefined: started before we watched
        this.setConnection(e.connectionId, 'in use');
        break;
      case 'ConnectionCreated':
        this.setConnection(e.connectionId, 'pending');
        break;
      case 'ConnectionReady':
      case 'ConnectionCheckedIn':
        this.setConnection(e.connectionId, 'available');
        break;
      case 'ConnectionClosed':
        this.setConnection(e.connectionId, 'closing');
        break;
      case 'ConnectionPoolCleared':
        this.addLog(`pool cleared${e.interruptInUseConnections ? ' (in-use connections interrupted)' : ''}`);
        break;
      case 'ConnectionPoolReady':
        this.addLog('pool ready');
        break;
      case 'ConnectionPoolClosed':
        this.addLog('pool closed');
        break;
      case 'ServerHeartbeatSucceeded':
        this.addLog(`heartbeat ok ${e.duration.toFixed(1)} ms`);
        break;
      case 'ServerHeartbeatFailed':
        // The check a close() ended says nothing of the server.
        if (e.error instanceof MonitorClosedError) this.addLog('monitor closed');
        else this.addLog(`heartbeat failed after ${e.duration.toFixed(1)} ms: ${e.error.message}`);
        break;
    }
  }

  /** Takes in one pool snapshot (from `state$` or `snapshot()`): state, generation and WaitQueue length. */
  onSnapshot(s: PoolSnapshot): void {
    this.roll();
    this.snapshot = { state: s.state, generation: s.generation, waitQueueLength: s.waitQueueLength };
    this.windowWaitQueue = Math.max(this.windowWaitQueue, s.waitQueueLength);
  }

  /** Checkout wait percentiles over the whole run so far. */
  waitPercentiles(): WaitPercentiles {
    const all = createHistogram();
    all.add(this.total);
    all.add(this.window);
    if (all.count === 0) return { p50: 0, p99: 0 };
    return { p50: toMillis(all.percentile(50)), p99: toMillis(all.percentile(99)) };
  }

  /** How many waits the histograms hold, the run's and the current window's: one per checkout. */
  get recordedWaits(): number {
    return this.total.count + this.window.count;
  }

  /**
   * The view model now: the completed windows, then the current one when at least a quarter of it has passed (a
   * rate over a shorter time says little).
   */
  model(run: RunDescription): LiveViewModel {
    const now = this.roll();
    const { checkoutsPerSecond, waitQueue, waitP50MS, waitP99MS } = this.series;
    const series: Series = {
      checkoutsPerSecond: [...checkoutsPerSecond],
      waitQueue: [...waitQueue],
      waitP50MS: [...waitP50MS],
      waitP99MS: [...waitP99MS],
    };
    const partial = now - this.windowStart;
    if (partial >= this.windowMS / 4) this.pushWindow(series, (this.windowCheckouts * 1000) / partial);
    for (const [id, c] of this.connections) {
      if (c.state === 'closing' && now - c.closedAt >= this.closingMS) this.connections.delete(id);
    }
    const connections: ConnectionCell[] = [...this.connections]
      .sort(([a], [b]) => a - b)
      .map(([id, c]) => ({ id, state: c.state }));
    return {
      ...run,
      elapsedMS: now - this.startedAt,
      poolState: this.snapshot.state,
      generation: this.snapshot.generation,
      waitQueueLength: this.snapshot.waitQueueLength,
      checkouts: this.checkouts,
      connections,
      ...series,
      log: [...this.log],
    };
  }

  private setConnection(id: number, state: CellState): void {
    this.connections.set(id, { state, closedAt: state === 'closing' ? this.now() : 0 });
  }

  private addLog(text: string): void {
    this.log.push({ atMS: this.now() - this.startedAt, text });
    if (this.log.length > this.logLength) this.log.splice(0, this.log.length - this.logLength);
  }

  /** Appends the current window's points to `series`, its rate being `rate` checkouts per second. */
  private pushWindow(series: Series, rate: number): void {
    const empty = this.window.count === 0;
    series.checkoutsPerSecond.push(rate);
    series.waitQueue.push(this.windowWaitQueue);
    series.waitP50MS.push(empty ? 0 : toMillis(this.window.percentile(50)));
    series.waitP99MS.push(empty ? 0 : toMillis(this.window.percentile(99)));
  }

  /** Closes every window that has ended, and returns the time. */
  private roll(): number {
    const now = this.now();
    if (now - this.windowStart >= this.windowMS) {
      // After a long pause, the windows beyond the history would be dropped at once: skip them.
      const skip = Math.floor((now - this.windowStart) / this.windowMS) - this.historyLength - 1;
      if (skip > 0) this.windowStart += skip * this.windowMS;
      while (now - this.windowStart >= this.windowMS) {
        this.pushWindow(this.series, (this.windowCheckouts * 1000) / this.windowMS);
        for (const values of Object.values(this.series)) if (values.length > this.historyLength) values.shift();
        this.total.add(this.window);
        this.window.reset();
        this.windowCheckouts = 0;
        this.windowWaitQueue = this.snapshot.waitQueueLength;
        this.windowStart += this.windowMS;
      }
    }
    return now;
  }
}
