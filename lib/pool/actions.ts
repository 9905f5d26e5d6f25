/**
 * The Action union: every input of the pool's state stream. Inputs only enqueue actions; the reducer applies them
 * one at a time, in one total order.
 *
 * Source: CMAP spec, "Connection Pool Behaviors" (checkOut, checkIn, clear, ready, close, establishment, Background
 * Thread Runs, WaitQueue timeouts).
 */
import type { Waiter } from './wait-queue';

/** Leak detection: the stack of a `checkOut` call, captured with `Error.captureStackTrace`. */
export interface CheckOutSite {
  stack?: string;
}

/** A checkout request enters the pool (ConnectionCheckOutStarted). */
export interface CheckOutAction<C> {
  readonly type: 'checkOut';
  readonly waiter: Waiter<C>;
  /** Leak detection: where the checkout was requested (given only while leak detection is on). */
  readonly site?: CheckOutSite;
  /** A high-priority checkout (`checkOut({ priority: 'high' })`): served before every normal one. */
  readonly high?: boolean;
  /** What the connection is for, when that is a cursor or a transaction (`checkOut({ purpose })`). */
  readonly purpose?: 'cursor' | 'transaction';
}

/**
 * A checkout's requester gave up: unsubscribed (no `error`: nobody is left to receive one), or its AbortSignal
 * aborted (`error`: the CheckOutCancelledError its caller receives, unless the pool committed another outcome first).
 */
export interface CancelAction<C> {
  readonly type: 'cancel';
  readonly waiter: Waiter<C>;
  readonly error?: Error;
  /**
   * The checkout's own `timeoutMS` (ms) elapsed: it fails with a WaitQueueTimeoutError the pool makes (with what it
   * held), and reason `timeout`, rather than as a cancellation.
   */
  readonly timeoutMS?: number;
}

/**
 * A connection is checked back in by the checkout that holds it (`holder`). A check-in from any other checkout (a
 * duplicate, or one that arrives after the connection was checked out again) is ignored.
 */
export interface CheckInAction<C> {
  readonly type: 'checkIn';
  readonly connection: C & { readonly id: number };
  readonly holder: Waiter<C>;
  /**
   * Set when the checkout ended while a request may still be in flight on the connection (a scoped checkout abandoned
   * mid-request): the error it was torn down with. It is closed with reason `error` (ConnectionClosed carries this
   * error), never made available, whatever the connection reports.
   */
  readonly discard?: Error;
}

/** `clear()`: bump the generation, pause, evict the WaitQueue, optionally interrupt in-use connections. */
export interface ClearAction {
  readonly type: 'clear';
  readonly interruptInUseConnections: boolean;
  /** The error that caused the clear (shown in PoolClearedError messages). */
  readonly cause?: unknown;
  /** Load-balanced mode: the service to clear (hex ObjectId). */
  readonly serviceId?: string;
}

/** `ready()`: paused → ready. */
export interface ReadyAction {
  readonly type: 'ready';
}

/** `drain()`: new checkouts fail, waiting ones are served, then closed (at the latest after `timeoutMS`, when > 0). */
export interface DrainAction {
  readonly type: 'drain';
  readonly timeoutMS: number;
}

/** `close()`: → closed, forever. */
export interface CloseAction {
  readonly type: 'close';
}

/** An establishment finished. */
export interface EstablishedAction<C> {
  readonly type: 'established';
  readonly id: number;
  readonly connection: C;
}

/**
 * Load-balanced mode: the MongoDB handshake of connection `id` is done (authentication may follow), and reached
 * `serviceId` (hex ObjectId): the connection takes that service's generation now (CMAP "Load Balancer Mode").
 */
export interface HandshakeDoneAction {
  readonly type: 'handshakeDone';
  readonly id: number;
  readonly serviceId: string;
}

/** An establishment failed. `clearPool`: whether the failure clears the pool (see the establishment error policy). */
export interface EstablishFailedAction {
  readonly type: 'establishFailed';
  readonly id: number;
  readonly error: Error;
  readonly clearPool: boolean;
}

/** A timer fired: the WaitQueue deadline of its head, a Background Thread Run, leak detection's next check, or a drain's deadline. */
export interface TimerAction {
  readonly type: 'timer';
  readonly timer: TimerName;
}

/** The pool's timers. */
export type TimerName = 'waitQueue' | 'background' | 'leakDetection' | 'drain';

/** Every pool input. */
export type Action<C> =
  | CheckOutAction<C>
  | CancelAction<C>
  | CheckInAction<C>
  | ClearAction
  | ReadyAction
  | CloseAction
  | DrainAction
  | EstablishedAction<C>
  | HandshakeDoneAction
  | EstablishFailedAction
  | TimerAction;

/**
 * The input lane of an action: checkout requests and their cancellations go to the checkout lane; everything else
 * (check-ins, clear/ready/close, establishment results, timers) to the control lane, which is drained first, so a
 * clear or close takes effect before checkouts that queued behind it are served.
 */
export function isControlAction<C>(action: Action<C>): boolean {
  return action.type !== 'checkOut' && action.type !== 'cancel';
}
