/**
 * What the soak observes of a pool and of a monitor, through their public streams only (`events$`, `snapshot()`,
 * `heartbeats$`), and the checks it makes of them at quiescent points: a pool's counts must agree with the events it
 * emitted, and with no work running nothing may be in use, waiting or being established.
 */
import type { Subscription } from 'rxjs';
import { MonitorClosedError, type ConnectionPoolCore, type ConnectionPoolEvent, type PoolSnapshot, type ServerHeartbeatEvent } from '../lib';

/** What an audit reads of a pool: its events and its snapshot. */
export type AuditedPool = Pick<ConnectionPoolCore, 'events$' | 'snapshot'>;

/** The events of one pool, counted. */
export class PoolAudit {
  /** ConnectionCreated events. */
  created = 0;
  /** ConnectionClosed events, by reason. */
  readonly closed = new Map<string, number>();
  /** ConnectionCheckOutStarted events. */
  checkOutStarted = 0;
  /** ConnectionCheckedOut events. */
  checkedOut = 0;
  /** ConnectionCheckOutFailed events, by reason. */
  readonly checkOutFailed = new Map<string, number>();
  /** ConnectionCheckedIn events. */
  checkedIn = 0;
  /** ConnectionPoolCleared events. */
  cleared = 0;
  private readonly subscription: Subscription;

  /**
   * Starts counting the events of `pool` (subscribe before the pool does anything: its first event, creation, is
   * replayed to every subscriber).
   *
   * @param label names the pool in violations, e.g. `pool` or `client pool`.
   */
  constructor(
    readonly label: string,
    readonly pool: AuditedPool,
  ) {
    this.subscription = pool.events$.subscribe((event) => this.count(event));
  }

  /** ConnectionClosed events of every reason. */
  get closedTotal(): number {
    return sum(this.closed);
  }

  /** ConnectionCheckOutFailed events of every reason. */
  get checkOutFailedTotal(): number {
    return sum(this.checkOutFailed);
  }

  /** Whether nothing is in use, waiting or being established (the state a quiescent point waits for). */
  idle(s: PoolSnapshot = this.pool.snapshot()): boolean {
    return s.inUseConnectionCount === 0 && s.waitQueueLength === 0 && s.pendingConnectionCount === 0;
  }

  /** The violations of a quiescent point: counts that disagree with the events, and work left in the pool. */
  check(): string[] {
    const s = this.pool.snapshot();
    const v: string[] = [];
    const at = `${this.label} at a quiescent point`;
    if (this.created - this.closedTotal !== s.totalConnectionCount) {
      v.push(`${at}: ConnectionCreated ${this.created} - ConnectionClosed ${this.closedTotal} != totalConnectionCount ${s.totalConnectionCount}`);
    }
    if (this.checkedOut - this.checkedIn !== s.inUseConnectionCount) {
      v.push(`${at}: ConnectionCheckedOut ${this.checkedOut} - ConnectionCheckedIn ${this.checkedIn} != inUseConnectionCount ${s.inUseConnectionCount}`);
    }
    if (this.checkOutStarted !== this.checkedOut + this.checkOutFailedTotal) {
      v.push(
        `${at}: ConnectionCheckOutStarted ${this.checkOutStarted} != ConnectionCheckedOut ${this.checkedOut} + ConnectionCheckOutFailed ${this.checkOutFailedTotal}`,
      );
    }
    if (!this.idle(s)) {
      v.push(
        `${at} (no work running): ${s.inUseConnectionCount} connection(s) in use, ${s.waitQueueLength} checkout(s) waiting, ${s.pendingConnectionCount} pending`,
      );
    }
    return v;
  }

  /** The event counts, for the JSON summary. */
  toJSON(): Record<string, unknown> {
    return {
      created: this.created,
      closed: Object.fromEntries([...this.closed].sort()),
      checkOutStarted: this.checkOutStarted,
      checkedOut: this.checkedOut,
      checkOutFailed: Object.fromEntries([...this.checkOutFailed].sort()),
      checkedIn: this.checkedIn,
      cleared: this.cleared,
    };
  }

  /** Stops counting. */
  stop(): void {
    this.subscription.unsubscribe();
  }

  private count(event: ConnectionPoolEvent): void {
    switch (event.type) {
      case 'ConnectionCreated':
        this.created++;
        break;
      case 'ConnectionClosed':
        this.closed.set(event.reason, (this.closed.get(event.reason) ?? 0) + 1);
        break;
      case 'ConnectionCheckOutStarted':
        this.checkOutStarted++;
        break;
      case 'ConnectionCheckedOut':
        this.checkedOut++;
        break;
      case 'ConnectionCheckOutFailed':
        this.checkOutFailed.set(event.reason, (this.checkOutFailed.get(event.reason) ?? 0) + 1);
        break;
      case 'ConnectionCheckedIn':
        this.checkedIn++;
        break;
      case 'ConnectionPoolCleared':
        this.cleared++;
        break;
    }
  }
}

/**
 * A monitor seen through its heartbeats: how many checks failed, and whether it holds its monitoring connection.
 * After a successful check it holds one; after a failed one it holds none; while a check runs on a new connection
 * (after a failure) the connection may or may not be open yet, so counts are compared only when it is {@link idle}.
 */
export class MonitorAudit {
  /** ServerHeartbeatSucceeded events. */
  succeeded = 0;
  /** ServerHeartbeatFailed events, but for the check a close() ended (MonitorClosedError). */
  failed = 0;
  private connected = false;
  private checking = false;

  /** Follows one event of a client's `events$` (it reads the heartbeat events, and ignores the others). */
  observe(event: ServerHeartbeatEvent | ConnectionPoolEvent): void {
    switch (event.type) {
      case 'ServerHeartbeatStarted':
        this.checking = true;
        break;
      case 'ServerHeartbeatSucceeded':
        this.succeeded++;
        this.checking = false;
        this.connected = true;
        break;
      case 'ServerHeartbeatFailed':
        // The check close() ended says nothing of the server: no failure.
        if (!(event.error instanceof MonitorClosedError)) this.failed++;
        this.checking = false;
        this.connected = false;
        break;
    }
  }

  /** Whether the number of its open connections is known: no check is running on a connection not yet made. */
  get idle(): boolean {
    return !this.checking || this.connected;
  }
}

function sum(counts: ReadonlyMap<string, number>): number {
  let total = 0;
  for (const n of counts.values()) total += n;
  return total;
}
