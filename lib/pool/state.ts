/**
 * PoolState: everything the reducer owns. It is mutated in place by the reducer only, one action at a time, and is
 * never copied: counters are fields, the available connections and the WaitQueue are O(1) deques.
 *
 * Source: CMAP spec, "Connection Pool Members" (Connection, WaitQueue, ConnectionPool).
 */
import type { ResolvedPoolOptions } from '../options';

/**
 * What a pool needs of a connection. The pool never looks inside; it only asks whether it is errored, and tears it
 * down.
 *
 * Source: CMAP spec, "Connection" (id, generation, Perishable: Errored).
 */
export interface PoolConnection {
  /** The id the pool assigned at creation (from the {@link ConnectionDescriptor}); unique within the pool. */
  readonly id: number;
  /**
   * True once the connection has seen an error that makes it unfit for further use (network error or timeout,
   * endpoint closed it, wire-protocol error). The pool closes an errored connection with reason `error` when it is
   * checked in or found in the available list.
   */
  readonly errored?: boolean;
  /**
   * The service behind the load balancer this connection reached (hex string, from the handshake's `serviceId`).
   * Read once the connection is established, in load-balanced mode only.
   */
  readonly serviceId?: string;
  /**
   * Tears the connection down: closes its socket without blocking and fails any request in flight with `error`
   * (when given). Must be idempotent. Called by the pool when it closes the connection, and when a clear with
   * `interruptInUseConnections` interrupts it while in use.
   */
  destroy(error?: Error): void;
}

/**
 * What the pool tells a connection factory about the connection to establish.
 *
 * - `id`: the connection id (1, 2, 3, ... in creation order);
 * - `generation`: the pool generation at creation;
 * - `address`: the pool's `host:port`;
 * - `signal`: aborts when the pool abandons the establishment (clear with interruption, close).
 */
export interface ConnectionDescriptor {
  readonly id: number;
  readonly generation: number;
  readonly address: string;
  readonly signal: AbortSignal;
}

/** The CMAP connection states. */
export type ConnectionState = 'pending' | 'available' | 'in use' | 'closed';

/** The pool's record of one connection. */
export interface ConnectionRecord<C> {
  readonly id: number;
  /** The pool generation at creation; in load-balanced mode, its service's generation once established. */
  generation: number;
  /** In load-balanced mode, the service it reached (set once established). */
  serviceId: string | undefined;
  state: ConnectionState;
  /** The established connection; undefined while pending. */
  connection: C | undefined;
  /** Clock time (ms) of ConnectionCreated. */
  readonly createdAt: number;
  /** Clock time (ms) the connection last became available. */
  availableSince: number;
  /** Set by `checkIn()` when it accepts the connection, cleared by the reducer when it processes the check-in. */
  checkInQueued: boolean;
  /** Links in the available list (undefined when not available). */
  prev: ConnectionRecord<C> | undefined;
  next: ConnectionRecord<C> | undefined;
}

/**
 * How the pool delivers the outcome of a checkout. Implemented by the checkOut front ends (Promise, Observable).
 */
export interface CheckOutSink<C> {
  /**
   * Hands the connection over. Returns false when the requester is gone (unsubscribed, aborted); the pool then
   * checks the connection back in, so it is never stranded.
   */
  deliver(connection: C): boolean;
  /** Fails the checkout. Ignored when the requester is gone. */
  fail(error: Error): void;
}

/**
 * Where a waiter is:
 * - `new`: created, checkOut action not yet processed;
 * - `queued`: in the WaitQueue (waitQueueTimeoutMS applies);
 * - `establishing`: left the WaitQueue holding a claim on a connection being established (no timeout applies);
 * - `done`: delivered, failed or cancelled.
 */
export type WaiterState = 'new' | 'queued' | 'establishing' | 'done';

/** One checkout request. */
export class Waiter<C> {
  state: WaiterState = 'new';
  /** Clock time (ms) of ConnectionCheckOutStarted; NaN when nothing needed it timed. */
  startedAt = 0;
  /** Clock time (ms) after which the waiter times out of the WaitQueue; Infinity for none. */
  deadline = Infinity;
  /** Where the outcome goes. */
  readonly sink: CheckOutSink<C>;

  /** `sink` may be omitted by a subclass that is its own sink. */
  constructor(sink?: CheckOutSink<C>) {
    this.sink = sink ?? (this as unknown as CheckOutSink<C>);
  }
}

/**
 * A FIFO of waiters in a growable ring buffer. Cancelled waiters are marked `done` and skipped lazily at the head;
 * `live` counts the others, so cancellation is O(1). Removed slots are cleared so no dead waiter stays reachable.
 */
export class WaiterQueue<C> {
  private items: (Waiter<C> | undefined)[] = new Array(16);
  private head = 0;
  private size = 0;
  /** The number of waiters in the queue that are not done. */
  live = 0;

  push(w: Waiter<C>): void {
    if (this.size === this.items.length) this.grow();
    this.items[(this.head + this.size) & (this.items.length - 1)] = w;
    this.size++;
    this.live++;
  }

  /** The oldest waiter that is not done, discarding done ones in front of it. */
  peek(): Waiter<C> | undefined {
    while (this.size > 0) {
      const w = this.items[this.head]!;
      if (w.state !== 'done') return w;
      this.drop();
    }
    return undefined;
  }

  /** Removes and returns the oldest waiter that is not done. */
  shift(): Waiter<C> | undefined {
    const w = this.peek();
    if (w !== undefined) {
      this.drop();
      this.live--;
    }
    return w;
  }

  /** Removes every waiter, returning the ones not done, oldest first. */
  drain(): Waiter<C>[] {
    const out: Waiter<C>[] = [];
    for (let w = this.shift(); w !== undefined; w = this.shift()) out.push(w);
    return out;
  }

  private drop(): void {
    this.items[this.head] = undefined;
    this.head = (this.head + 1) & (this.items.length - 1);
    this.size--;
  }

  private grow(): void {
    const next: (Waiter<C> | undefined)[] = new Array(this.items.length * 2);
    for (let i = 0; i < this.size; i++) next[i] = this.items[(this.head + i) & (this.items.length - 1)];
    this.items = next;
    this.head = 0;
  }
}

/**
 * The available connections as an intrusive doubly linked list, oldest-available at the head. Checkout takes from
 * the tail (the most recently used connection), so unused connections age at the head, where idle pruning finds
 * them. Every operation is O(1).
 */
export class AvailableList<C> {
  head: ConnectionRecord<C> | undefined;
  tail: ConnectionRecord<C> | undefined;
  size = 0;

  push(r: ConnectionRecord<C>): void {
    r.prev = this.tail;
    r.next = undefined;
    if (this.tail) this.tail.next = r;
    else this.head = r;
    this.tail = r;
    this.size++;
  }

  remove(r: ConnectionRecord<C>): void {
    if (r.prev) r.prev.next = r.next;
    else this.head = r.next;
    if (r.next) r.next.prev = r.prev;
    else this.tail = r.prev;
    r.prev = r.next = undefined;
    this.size--;
  }
}

/** The pool states (CMAP "ConnectionPool.state"). */
export type PoolStatus = 'paused' | 'ready' | 'closed';

/** A service behind the load balancer: its generation and how many established connections reach it. */
export interface ServiceGeneration {
  generation: number;
  connectionCount: number;
}

/** Everything the reducer owns. */
export interface PoolState<C> {
  readonly address: string;
  readonly options: ResolvedPoolOptions;
  /** Load-balanced mode: generations are per service, and clears name a service. */
  readonly loadBalanced: boolean;
  /** serviceId → (generation, connection count); an entry is removed when its count reaches 0. */
  readonly services: Map<string, ServiceGeneration>;
  /** The injected clock: ms, monotonic. */
  readonly now: () => number;
  status: PoolStatus;
  generation: number;
  /** Whether anyone observes events; when false the reducer builds none. */
  monitored: boolean;
  nextConnectionId: number;
  /** Every connection that is not closed: pending, available and in use. Its size is totalConnectionCount. */
  readonly records: Map<number, ConnectionRecord<C>>;
  readonly available: AvailableList<C>;
  /** Connections being established (pendingConnectionCount). */
  pendingCount: number;
  /** Of those, the ones of the current generation (the only ones a waiter may claim). */
  pendingCurrent: number;
  /** Checkouts waiting for an available connection or an establishment slot. */
  readonly waitQueue: WaiterQueue<C>;
  /** Checkouts holding a claim on a current-generation establishment; always older than every queued waiter. */
  readonly establishing: WaiterQueue<C>;
  /** The deadline the WaitQueue timer is armed for, if it is armed. */
  waitTimerAt: number | undefined;
  /** The error that caused the last clear (part of PoolClearedError's message). */
  clearCause: unknown;
  /** Whether the pool was ever marked ready (picks PoolClearedError's message). */
  everReady: boolean;
}

/** A fresh, paused pool state. */
export function initialPoolState<C>(
  address: string,
  options: ResolvedPoolOptions,
  now: () => number,
  loadBalanced = false,
): PoolState<C> {
  return {
    address,
    options,
    loadBalanced,
    services: new Map(),
    now,
    status: 'paused',
    generation: 0,
    monitored: false,
    nextConnectionId: 1,
    records: new Map(),
    available: new AvailableList<C>(),
    pendingCount: 0,
    pendingCurrent: 0,
    waitQueue: new WaiterQueue<C>(),
    establishing: new WaiterQueue<C>(),
    waitTimerAt: undefined,
    clearCause: undefined,
    everReady: false,
  };
}
