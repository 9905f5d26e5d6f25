/**
 * PoolState: the accumulator of the pool's `scan`, and everything the reducer owns. It is mutated in place by the
 * reducer only, one action at a time, and is never copied: counters are fields, the available connections and the
 * WaitQueue are O(1) structures. Each step's commands are left in `commands` for the runner.
 *
 * Source: CMAP spec, "Connection Pool Members" (Connection, WaitQueue, ConnectionPool: state, generation,
 * serviceGenerations, the connection counts).
 */
import type { PoolAttributes } from '../diagnostics-channels';
import type { ResolvedPoolOptions } from '../options';
import type { CheckOutSite } from './actions';
import type { Command } from './commands';
import { idOf } from './connection-checks';
import { ConnectionList } from './connection-list';
import type { PoolConnection } from './contract';
import { WaitQueue, type Waiter } from './wait-queue';

/** The CMAP connection states. Source: CMAP spec, "Connection" (`state`). */
export type ConnectionState = 'pending' | 'available' | 'in use' | 'closed';

/**
 * The CMAP pool states (`ConnectionPool.state`): paused at creation and after a clear, ready, closed for good.
 * Source: CMAP spec, "Connection Pool" (`state`).
 */
export type ConnectionPoolState = 'paused' | 'ready' | 'closed';

/** The pool's record of one connection. */
export interface ConnectionRecord<C> {
  readonly id: number;
  /** The pool generation at creation; in load-balanced mode, its service's generation once established. */
  generation: number;
  /** In load-balanced mode, the service it reached (set once its handshake is done, else once established). */
  serviceId: string | undefined;
  state: ConnectionState;
  /** The established connection; undefined while pending. */
  connection: C | undefined;
  /** The checkout that holds it while `in use`: a check-in must come from that checkout to be accepted. */
  holder: Waiter<C> | undefined;
  /**
   * While pending: the checkout that started its establishment (CMAP "Checking Out a Connection": it left the WaitQueue
   * to establish it, so waitQueueTimeoutMS no longer applies to it, and its failure is that checkout's); undefined for a
   * background populate.
   */
  starter: Waiter<C> | undefined;
  /** Clock time (ms) of ConnectionCreated. */
  readonly createdAt: number;
  /** Clock time (ms) its lifetime ends (maxLifeTimeMS); Infinity without a lifetime. */
  readonly expiresAt: number;
  /** Clock time (ms) the connection last became available. */
  availableSince: number;
  /**
   * Clock time (ms) of its current checkout; NaN when that was not timed (the clock is read for it only when
   * something uses it: an observer, a WaitQueue timeout's report of the pool's holdings, leak detection).
   */
  checkedOutAt: number;
  /** Leak detection: where its current checkout was requested (the `checkOut` call's stack). */
  checkOutSite: CheckOutSite | undefined;
  /** Leak detection: whether its current checkout was reported as a suspected leak. */
  leakSuspected: boolean;
  /**
   * Whether a clear with interruptInUseConnections tore it down while in use, before any error of its own: the error
   * it then reports is the interruption's, and it closes as stale when checked in.
   */
  interrupted: boolean;
  /** Links in the list it is in: the available connections, or those in use (undefined while pending). */
  prev: ConnectionRecord<C> | undefined;
  next: ConnectionRecord<C> | undefined;
}

/**
 * A service behind the load balancer: its generation and how many connections reach it (each from its handshake on).
 */
export interface ServiceGeneration {
  generation: number;
  connectionCount: number;
}

/** Everything the reducer owns. */
export interface PoolState<C> {
  readonly address: string;
  /** The Endpoint as OpenTelemetry names it, for diagnostics channel messages. */
  readonly server: PoolAttributes;
  readonly options: ResolvedPoolOptions;
  /** Load-balanced mode: generations are per service, and clears name a service. */
  readonly loadBalanced: boolean;
  /** The injected clock: ms, monotonic. */
  readonly now: () => number;
  /** CMAP `ConnectionPool.state`. */
  state: ConnectionPoolState;
  /** `drain()` took effect: new checkouts fail, and the pool closes once nothing waits and nothing is in use. */
  draining: boolean;
  /** CMAP `ConnectionPool.generation`: + 1 on every (non-load-balanced) clear. */
  generation: number;
  /** CMAP `serviceGenerations`: serviceId → (generation, connection count); an entry goes when its count is 0. */
  readonly serviceGenerations: Map<string, ServiceGeneration>;
  /**
   * Load-balanced mode: pending connection id → the generation of its service when its handshake was done (made on
   * the first such handshake); the connection takes it once established.
   */
  handshakeGenerations?: Map<number, number>;
  /**
   * Whether anyone observes events; when false the reducer builds none. Set by `events$` itself as its first
   * subscriber comes and its last goes (never during a step: reducing runs no user code), so the steps already queued
   * then build their events for it.
   */
  observed: boolean;
  nextConnectionId: number;
  /** Every connection that is not closed: pending, available and in use. Its size is totalConnectionCount. */
  readonly records: Map<number, ConnectionRecord<C>>;
  /** CMAP `availableConnections`; its size is availableConnectionCount. */
  readonly available: ConnectionList<ConnectionRecord<C>>;
  /**
   * The connections in use, in checkout order (the one held longest at the head; a connection handed from one
   * checkout to the next goes to the tail): what the holdings of a WaitQueue timeout and leak detection read.
   */
  readonly inUse: ConnectionList<ConnectionRecord<C>>;
  /** Of the connections in use, how many are held for a cursor and for a transaction (see `purposes`). */
  readonly inUseByPurpose: { cursor: number; transaction: number };
  /** CMAP `pendingConnectionCount`: connections being established. */
  pendingConnectionCount: number;
  /** Of those, the ones of the current generation: the only ones a waiter may claim. */
  claimablePendingCount: number;
  /** CMAP WaitQueue: checkouts waiting for an available connection or an establishment slot. */
  readonly waitQueue: WaitQueue<C>;
  /** Checkouts holding a claim on a current-generation establishment; always older than every queued waiter. */
  readonly claimants: WaitQueue<C>;
  /**
   * Each checkout → the last establishment it started or took over (the reverse of ConnectionRecord.starter), so that
   * the one it still owns is found without a pass over the connections. An entry is current only while that record is
   * pending with this checkout as its starter; a stale one goes with its checkout.
   */
  readonly startedEstablishments: WeakMap<Waiter<C>, ConnectionRecord<C>>;
  /** The deadline the WaitQueue timer is armed for, if it is armed. */
  waitTimerAt: number | undefined;
  /** Whether the WaitQueue timer was armed again as lost, for the time it is armed for (see `waitTimerLost`). */
  waitTimerRenewed: boolean;
  /** Leak detection: the time the leak detection timer is armed for, if it is armed. */
  leakTimerAt: number | undefined;
  /** Leak detection: where each waiting checkout was requested (only while leak detection is on). */
  readonly checkOutSites: WeakMap<Waiter<C>, CheckOutSite> | undefined;
  /**
   * Load balancer spec "Connection Tracking": the checkouts made for a cursor or a transaction (`checkOut({ purpose
   * })`); every other checkout is for an operation. Made on the first such checkout; read as a connection is checked
   * out and in, to keep `inUseByPurpose`.
   */
  purposes: WeakMap<Waiter<C>, 'cursor' | 'transaction'> | undefined;
  /** The error that caused the last clear (part of PoolClearedError's message). */
  clearCause: unknown;
  /** Whether the pool was ever marked ready (picks PoolClearedError's message). */
  everReady: boolean;
  /** The clock reading of the current step (ms), read at most once per step; NaN until read. */
  stepTime: number;
  /** The commands of the last step, in commit order, for the runner. Rewritten by every step. */
  commands: Command<C>[];
}

/** A fresh, paused pool state (CMAP "Creating a Connection Pool": generation 0, paused). */
export function initialPoolState<C>(
  address: string,
  options: ResolvedPoolOptions,
  now: () => number,
  loadBalanced = false,
  server: PoolAttributes = { address, serverAddress: address, serverPort: undefined, pool: {} },
): PoolState<C> {
  return {
    address,
    server,
    options,
    loadBalanced,
    now,
    state: 'paused',
    draining: false,
    generation: 0,
    serviceGenerations: new Map(),
    observed: false,
    nextConnectionId: 1,
    records: new Map(),
    available: new ConnectionList<ConnectionRecord<C>>(),
    inUse: new ConnectionList<ConnectionRecord<C>>(),
    inUseByPurpose: { cursor: 0, transaction: 0 },
    pendingConnectionCount: 0,
    claimablePendingCount: 0,
    waitQueue: new WaitQueue<C>('queued'),
    claimants: new WaitQueue<C>('claimant'),
    startedEstablishments: new WeakMap(),
    waitTimerAt: undefined,
    waitTimerRenewed: false,
    leakTimerAt: undefined,
    checkOutSites: options.leakDetectionThresholdMS > 0 ? new WeakMap() : undefined,
    purposes: undefined,
    clearCause: undefined,
    everReady: false,
    stepTime: NaN,
    commands: [],
  };
}

/** Connections checked out: every record that is neither available nor pending (CMAP's in-use count, derived). */
export function inUseConnectionCount<C>(s: PoolState<C>): number {
  return s.records.size - s.available.size - s.pendingConnectionCount;
}

/** Checkouts waiting: the WaitQueue proper and those waiting on an establishment they claimed. */
export function waitingCheckOutCount<C>(s: PoolState<C>): number {
  return s.waitQueue.length + s.claimants.length;
}

/**
 * The live record of `connection` (one of this pool's, not closed), or undefined. Found by the id the connection
 * carries, and, when that id cannot be read or is no longer the one it was established with (a getter of user code),
 * by looking for the connection among the records: the connection's own answers never decide whose it is.
 */
export function recordOf<C extends PoolConnection>(s: PoolState<C>, connection: C): ConnectionRecord<C> | undefined {
  const id = idOf(connection);
  const rec = typeof id === 'number' ? s.records.get(id) : undefined;
  if (rec !== undefined && rec.connection === connection) return rec;
  for (const other of s.records.values()) if (other.connection === connection) return other;
  return undefined;
}
