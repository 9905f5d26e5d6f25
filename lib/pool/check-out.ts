/**
 * The checkout front ends: one lazy request object that is both an Observable (cancel by unsubscribing) and a
 * PromiseLike (cancel with an AbortSignal). Both forms enter the same WaitQueue through the same action.
 *
 * Source: CMAP spec, "Checking Out a Connection", "WaitQueue".
 */
import { Observable, type SchedulerLike, type Subscriber, type Subscription, type TeardownLogic } from 'rxjs';
import { abortReason, abortTurn, listenToAbort } from '../abort-listeners';
import { checkOutChannel, isTraced, Trace, type CheckOutTraceContext } from '../diagnostics-channels';
import { CheckOutCancelledError, PoolClosedError, refusal, WaitQueueFullError, WaitQueueTimeoutError } from '../errors';
import { countFailure, rejectWithCallerFrames, takesCallerFrames } from './caller-frames';
import { Waiter, type GiveBack } from './wait-queue';
import { reportUnhandled } from './report-unhandled';

/**
 * What a connection is checked out for: a cursor (held for its getMores), a transaction (held until it ends), or any
 * other operation (the default).
 *
 * Source: load balancer spec, "Connection Tracking" (its three categories).
 */
export type CheckOutPurpose = 'cursor' | 'transaction' | 'operation';

/**
 * Options of one checkout.
 *
 * Source: extension: `signal` (the web platform's AbortSignal, as `fetch` takes it), `priority` (the mongodb-core 2.0
 * pool lets monitoring operations jump the queue), `timeoutMS` (the client-side operations timeout spec's rule for
 * checkouts); `purpose` is the load balancer spec's "Connection Tracking".
 */
export interface CheckOutOptions {
  /**
   * Aborting it cancels the checkout: the request leaves the WaitQueue at once, ConnectionCheckOutFailed is
   * emitted (reason `cancelled`), and the checkout fails with {@link CheckOutCancelledError}, whose `cause` is the
   * signal's `reason`. That error has no stack frames of its own: the place that aborted is in the reason's stack
   * (an `AbortError` DOMException records it), and capturing another was most of a cancel's cost. The pool decides
   * in commit order (at once, inside `abort()`, when it is idle): an abort it processes after it committed another
   * outcome (ConnectionCheckedOut or ConnectionCheckOutFailed emitted first, e.g. an abort from inside an `events$`
   * subscriber with a check-in queued ahead) changes nothing, and the caller receives what the events say.
   *
   * One signal may govern any number of checkouts (a request's signal over all its queries): it carries one listener
   * of the pool's while any of them waits (none once they all settled), so Node never warns of a possible
   * EventTarget memory leak, and that listener runs even when one of the caller's own, added first, calls
   * `stopImmediatePropagation()` (it is added with Node's `events.addAbortListener`).
   */
  readonly signal?: AbortSignal | undefined;
  /**
   * `'high'`: the checkout is served before every normal one (FIFO among high-priority checkouts), for health checks,
   * `killCursors`, `abortTransaction` or `endSessions` at shutdown; normal checkouts keep their order. Default
   * `'normal'`.
   *
   * Source: extension (the mongodb-core 2.0 pool lets monitoring operations jump its queue).
   */
  readonly priority?: 'high' | 'normal' | undefined;
  /**
   * A deadline for this checkout, in ms from its start (a number >= 0; 0 means none): waiting in the WaitQueue and
   * waiting on an establishment it started both count. When it passes, the checkout fails with
   * WaitQueueTimeoutError (`timeoutMS` set) and ConnectionCheckOutFailed reason `timeout`; an establishment it
   * started goes on, for the next checkout. Independent of the pool's waitQueueTimeoutMS (whichever elapses first).
   *
   * Source: extension (the client-side operations timeout spec: a checkout is bounded by the operation's timeoutMS).
   */
  readonly timeoutMS?: number | undefined;
  /**
   * What the connection is checked out for (see {@link CheckOutPurpose}); default `'operation'`. The pool counts the
   * connections in use by purpose where it says what it holds (`PoolHoldings.inUseByPurpose`, e.g. in a
   * WaitQueueTimeoutError), and in load-balanced mode a WaitQueueTimeoutError's message gives those counts. Costs
   * nothing until a timeout reads it.
   *
   * Source: load balancer spec, "Connection Tracking".
   */
  readonly purpose?: CheckOutPurpose | undefined;
}

/** The checked options of one checkout, as its request keeps them (made only when options were given). */
export interface CheckOutSettings {
  readonly signal: AbortSignal | undefined;
  readonly high: boolean;
  /** ms; 0 for none. */
  readonly timeoutMS: number;
  /** undefined for `'operation'` (the default): only cursors and transactions are recorded. */
  readonly purpose: 'cursor' | 'transaction' | undefined;
}

/** How a request reaches its pool. */
export interface CheckOutPort<C> {
  readonly address: string;
  /** OpenTelemetry's `server.address` and `server.port` of the pool's Endpoint (for checkout traces). */
  readonly serverAddress: string;
  readonly serverPort: number | undefined;
  /** The pool (for checkout traces: which pool published them). */
  readonly pool: object;
  /** The pool's clock and timers (for checkout deadlines). */
  readonly scheduler: SchedulerLike;
  /** Enqueues the waiter's checkOut action; `request` is the request it was started from, `high` its priority. */
  enter(waiter: Waiter<C>, request: CheckOutRequest<C>, high: boolean): void;
  /**
   * Enqueues the waiter's cancel action: with `error` for an abort (the pool fails the waiter with it, unless it
   * committed another outcome first), with `timeoutMS` when the checkout's own deadline passed, with neither for an
   * unsubscribe.
   */
  leave(waiter: Waiter<C>, error?: Error, timeoutMS?: number): void;
}

/**
 * A checkout request. Lazy: nothing is enqueued until it is subscribed to, or awaited.
 *
 * - As an Observable: each subscription is one checkout; it emits the connection once and completes, or errors with
 *   PoolClosedError, PoolClearedError, WaitQueueTimeoutError, WaitQueueFullError, CheckOutCancelledError (its signal
 *   aborted) or the establishment error. Unsubscribing before delivery cancels the checkout.
 * - As a PromiseLike: the first `then` starts one checkout; later `then`s share its outcome.
 *
 * The connection must be checked in with `pool.checkIn(connection)` (or use `pool.withConnection`).
 *
 * Source: CMAP spec, "Checking Out a Connection"; extension: one request in both RxJS's and a Promise's form
 * (cancelled by unsubscribing, or by an AbortSignal).
 */
export class CheckOutRequest<C> extends Observable<C> implements PromiseLike<C> {
  /** The checkout the first `then` started; later `then`s share its outcome. */
  private waiter: PromiseWaiter<C> | undefined;

  constructor(
    private readonly port: CheckOutPort<C>,
    private readonly settings?: CheckOutSettings,
  ) {
    super();
  }

  /** One subscription = one checkout. (RxJS calls this for every subscriber.) */
  protected _subscribe(subscriber: Subscriber<C>): TeardownLogic {
    const { port, settings } = this;
    const signal = settings?.signal;
    const trace = isTraced(checkOutChannel) ? startTrace(port) : undefined;
    const aborted = abortedBeforeEntry(signal);
    if (aborted !== false) {
      const error = aborted === true ? cancelled(port.address, abortReason(signal!)) : aborted;
      if (trace !== undefined) {
        trace.skip();
        endTrace(trace, false, error);
      }
      subscriber.error(error);
      return undefined;
    }
    const waiter = trace === undefined ? new SubscriberWaiter<C>(subscriber) : new TracedSubscriberWaiter<C>(subscriber, trace);
    const turn = signal === undefined ? 0 : abortTurn();
    enter(port, waiter, this, trace);
    const stopListening = signal === undefined ? undefined : listenWhileWaiting(port, waiter, signal, turn);
    const deadline = settings === undefined || settings.timeoutMS === 0 ? undefined : armDeadline(port, waiter, settings.timeoutMS);
    return () => {
      stopListening?.();
      deadline?.unsubscribe();
      if (waiter.state === 'done') return;
      // Unsubscribed before an outcome. Untraced, nobody is left to receive an error, so none is built. Traced, the
      // pool is handed one, so that the trace ends with the outcome the pool commits, in commit order: cancelled, or
      // served before it processed the leave (ConnectionCheckedOut, then the connection checked back in).
      port.leave(waiter, trace === undefined ? undefined : cancelled(port.address, undefined));
    };
  }

  /** Whether it is a high-priority checkout (`priority: 'high'`). */
  get high(): boolean {
    return this.settings?.high === true;
  }

  /** What it is checked out for, when that is a cursor or a transaction (`purpose`); undefined for any other operation. */
  get purpose(): 'cursor' | 'transaction' | undefined {
    return this.settings?.purpose;
  }

  then<R1 = C, R2 = never>(
    onfulfilled?: ((value: C) => R1 | PromiseLike<R1>) | null,
    onrejected?: ((reason: unknown) => R2 | PromiseLike<R2>) | null,
  ): Promise<R1 | R2> {
    return this.promiseWaiter().join(onfulfilled, onrejected) as Promise<R1 | R2>;
  }

  /** The checkout of the Promise form: started by the first call (the first `then`, or {@link enterNow}). */
  private promiseWaiter(): PromiseWaiter<C> {
    let waiter = this.waiter;
    if (waiter === undefined) {
      const trace = isTraced(checkOutChannel) ? startTrace(this.port) : undefined;
      waiter = this.waiter = trace === undefined ? new PromiseWaiter<C>() : new TracedPromiseWaiter<C>(trace);
      startCheckOut(this.port, this.settings, waiter, this, trace);
    }
    return waiter;
  }
}

/**
 * Starts the Promise form of `request` now, as its first `then` would, and returns it: an `await` of it later (as
 * `withConnection` awaits its checkout, a microtask after its call) then shares that checkout. So a checkout the pool
 * makes for its caller enters the WaitQueue at the call, in call order with checkouts subscribed to or `then`ed.
 */
export function enterNow<C>(request: CheckOutRequest<C>): CheckOutRequest<C> {
  request['promiseWaiter']();
  return request;
}

/**
 * The waiter of one subscription: delivers to its subscriber, unless it has left; when a subscriber down its chain has
 * left ({@link chainClosed}), decides a microtask later whether its requester is gone.
 */
class SubscriberWaiter<C> extends Waiter<C> {
  constructor(protected readonly subscriber: Subscriber<C>) {
    super();
  }

  deliver(connection: C, giveBack: GiveBack<C>): boolean {
    // Unsubscribed: the pool checks the connection back in at once.
    if (this.subscriber.closed) return false;
    if (!chainClosed(this.subscriber)) {
      this.handOver(connection);
    } else {
      // A subscriber down the chain has left while this one is open. Either a composite (merge, race, forkJoin)
      // is being torn down and will unsubscribe it within the same call (the connection would be lost in the closed
      // composite), or an operator such as groupBy outlives its own subscriber and still routes values (the connection
      // must reach it). The teardown is synchronous: once it has run, the subscriber says which.
      void SETTLED.then(() => {
        try {
          if (this.subscriber.closed) giveBack(connection, this);
          else this.handOver(connection);
        } catch (error) {
          reportUnhandled(error);
        }
      });
    }
    return true;
  }

  private handOver(connection: C): void {
    this.subscriber.next(connection);
    this.subscriber.complete();
  }

  fail(error: Error): void {
    // Unsubscribed: nothing to tell (an error sent to a closed subscriber would reach config.onStoppedNotification).
    if (!this.subscriber.closed) this.subscriber.error(error);
  }
}

/**
 * Whether a subscriber down the chain `subscriber` feeds (of any copy of RxJS) is closed; `subscriber` itself is
 * known to be open. Unsubscribing a composite (merge, race, forkJoin, ...) closes it before it unsubscribes its
 * members one by one; a member's teardown that checks a connection in makes the pool serve the next member at once,
 * whose own subscriber is still open while the composite it feeds is already closed.
 */
function chainClosed(subscriber: Subscriber<unknown>): boolean {
  // Read by shape, not `instanceof`: a link has a boolean `closed` (a Subscriber of any copy of RxJS, a Subject); the
  // chain ends at the consumer's observer, which has none.
  type Link = { readonly closed?: unknown; readonly destination?: unknown } | null | undefined;
  for (let s = (subscriber as unknown as { destination?: Link }).destination; typeof s?.closed === 'boolean'; s = s.destination as Link) {
    if (s.closed) return true;
  }
  return false;
}

/** A subscription's waiter while checkouts are traced: ends its trace with the outcome, then hands it over. */
class TracedSubscriberWaiter<C> extends SubscriberWaiter<C> {
  constructor(
    subscriber: Subscriber<C>,
    private readonly trace: Trace<CheckOutTraceContext>,
  ) {
    super(subscriber);
  }

  override deliver(connection: C, giveBack: GiveBack<C>): boolean {
    if (!this.trace.done) endTrace(this.trace, true, connection);
    return super.deliver(connection, giveBack);
  }

  override fail(error: Error): void {
    // Unsubscribed and then cancelled by the pool: nobody received an error, so the trace carries none.
    const unsubscribed = this.subscriber.closed && error instanceof CheckOutCancelledError;
    if (!this.trace.done) endTrace(this.trace, false, unsubscribed ? undefined : error);
    super.fail(error);
  }
}

/**
 * Callbacks are scheduled with a settled Promise's `then` rather than `queueMicrotask`: the same microtask queue,
 * without the AsyncResource and bound function Node's queueMicrotask allocates for each call.
 */
const SETTLED = Promise.resolve();

type OnFulfilled<C> = ((value: C) => unknown) | null | undefined;
type OnRejected = ((reason: unknown) => unknown) | null | undefined;
type Resolve = (value: unknown) => void;
/** A `then` waiting for the outcome: its callbacks and the resolve of the Promise it returned. */
type Listener<C> = readonly [OnFulfilled<C>, OnRejected, Resolve];

/**
 * The waiter of one Promise checkout, shared by every `then` of its request. A `then` made after the outcome is
 * known (the usual case when a connection is available: the pool delivers while the first `then` is still running)
 * chains on a settled native Promise; one made before waits with one Promise and its `resolve`, nothing more, and
 * is settled directly (no internal Promise chained to it). Callbacks always run on a microtask, never inside the
 * pool's own processing (Promises/A+). A failure with a pool error calls its callbacks on that same microtask from a
 * native Promise step, in which the caller's async frames are read (see `caller-frames.ts`).
 */
class PromiseWaiter<C> extends Waiter<C> {
  /**
   * Before settlement: the other `then`s waiting for the outcome, when any (rare). After: whether it was delivered
   * (`value` is the connection) or failed (`value` is the error). One field for both keeps a waiting checkout small.
   */
  private later: Listener<C>[] | boolean | undefined = undefined;
  private value: unknown = undefined;
  /** The first `then` waiting for the outcome (all but always the only one), when there is one. */
  private onfulfilled: OnFulfilled<C> = undefined;
  /**
   * The first `then`'s rejection callback while it waits. After a failure, `null` once some `then` has received it:
   * a later one is not the first caller, and its failure names no caller (see caller-frames.ts). One field for both
   * keeps a waiting checkout small.
   */
  private onrejected: OnRejected = undefined;
  private resolve: Resolve | undefined = undefined;
  /** Stops listening to the AbortSignal, when there is one. */
  detach: (() => void) | undefined = undefined;

  deliver(connection: C): boolean {
    return this.settle(true, connection);
  }

  fail(error: Error): void {
    this.settle(false, error);
  }

  /** Settles once: false if it already was. Waiting `then`s are notified on a microtask. */
  settle(ok: boolean, value: C | unknown): boolean {
    const others = this.later;
    if (typeof others === 'boolean') return false;
    this.later = ok;
    this.value = value;
    this.detach?.();
    this.detach = undefined;
    const { onfulfilled, onrejected, resolve } = this;
    if (resolve !== undefined) {
      this.onfulfilled = this.resolve = undefined;
      this.onrejected = null;
      // Several `then`s share the outcome: no one of them is the caller, so none names itself (see caller-frames.ts).
      if (!ok && others === undefined && takesCallerFrames(value)) {
        rejectWithCallerFrames(value, onfulfilled, () => notify(onfulfilled, onrejected, resolve, false, value));
        return true;
      }
      void SETTLED.then(() => {
        notify(onfulfilled, onrejected, resolve, ok, value);
        if (others !== undefined) for (const [f, r, res] of others) notify(f, r, res, ok, value);
      });
    }
    return true;
  }

  /** One `then` of the request: its Promise settles from the outcome, through its callback when it has one. */
  join(onfulfilled: OnFulfilled<C>, onrejected: OnRejected): Promise<unknown> {
    const ok = this.later;
    if (typeof ok === 'boolean') {
      const value = this.value;
      const callback = ok ? onfulfilled : onrejected;
      if (!ok) {
        const first = this.onrejected === undefined;
        this.onrejected = null;
        // A second caller of the failure: the error is no longer one caller's, should the first not have named itself yet.
        if (!first) countFailure(value as Error);
        else if (typeof callback === 'function' && takesCallerFrames(value)) {
          return new Promise((resolve) => rejectWithCallerFrames(value, onfulfilled, () => notify(onfulfilled, onrejected, resolve, false, value)));
        }
      }
      if (typeof callback === 'function') return SETTLED.then(() => callback(value as C));
      return ok ? SETTLED.then(() => value) : Promise.reject(value);
    }
    return new Promise<unknown>((resolve) => {
      if (this.resolve === undefined) {
        this.onfulfilled = onfulfilled;
        this.onrejected = onrejected;
        this.resolve = resolve;
      } else {
        ((this.later as Listener<C>[] | undefined) ??= []).push([onfulfilled, onrejected, resolve]);
      }
    });
  }
}

/** A Promise checkout's waiter while checkouts are traced: its first settlement ends the trace. */
class TracedPromiseWaiter<C> extends PromiseWaiter<C> {
  constructor(private readonly trace: Trace<CheckOutTraceContext>) {
    super();
  }

  override settle(ok: boolean, value: C | unknown): boolean {
    if (!super.settle(ok, value)) return false;
    endTrace(this.trace, ok, value);
    return true;
  }
}

/** Settles a `then`'s Promise from the outcome, through its callback when it has one (as a native `then` does). */
function notify<C>(onfulfilled: OnFulfilled<C>, onrejected: OnRejected, resolve: Resolve, ok: boolean, value: unknown): void {
  const callback = ok ? onfulfilled : onrejected;
  if (typeof callback !== 'function') return resolve(ok ? value : Promise.reject(value));
  try {
    resolve(callback(value as C));
  } catch (error) {
    resolve(Promise.reject(error));
  }
}

/** Starts the checkout of a Promise waiter; it settles exactly once, whichever of delivery, failure or abort is first. */
function startCheckOut<C>(
  port: CheckOutPort<C>,
  settings: CheckOutSettings | undefined,
  waiter: PromiseWaiter<C>,
  request: CheckOutRequest<C>,
  trace: Trace<CheckOutTraceContext> | undefined,
): void {
  const signal = settings?.signal;
  const aborted = abortedBeforeEntry(signal);
  if (aborted !== false) {
    waiter.state = 'done';
    trace?.skip(); // the waiter's settlement ends the trace
    waiter.settle(false, aborted === true ? cancelled(port.address, abortReason(signal!)) : aborted);
    return;
  }
  const turn = signal === undefined ? 0 : abortTurn();
  enter(port, waiter, request, trace);
  if (signal !== undefined) waiter.detach = listenWhileWaiting(port, waiter, signal, turn);
  if (settings !== undefined && settings.timeoutMS > 0 && waiter.state !== 'done') {
    const deadline = armDeadline(port, waiter, settings.timeoutMS);
    const detach = waiter.detach;
    if (deadline !== undefined) {
      waiter.detach = () => {
        deadline.unsubscribe();
        detach?.();
      };
    }
  }
}

/** Enqueues a waiter; when traced, inside the trace's `start` (with its bound stores), followed by `end`. */
function enter<C>(port: CheckOutPort<C>, waiter: Waiter<C>, request: CheckOutRequest<C>, trace: Trace<CheckOutTraceContext> | undefined): void {
  const high = request.high;
  if (trace === undefined) port.enter(waiter, request, high);
  else trace.run(port.enter, port, waiter, request, high);
}

/**
 * A checkout's own deadline: when it passes first, the pool fails the checkout with a timeout (in commit order). A
 * scheduler that throws from `schedule` fails the checkout with that error (in commit order, as it has entered the
 * pool already) rather than leave it waiting with no deadline, or throw to a caller who would never take the
 * connection it is then served; undefined then.
 */
function armDeadline<C>(port: CheckOutPort<C>, waiter: Waiter<C>, timeoutMS: number): Subscription | undefined {
  try {
    return port.scheduler.schedule(() => {
      if (waiter.state !== 'done') port.leave(waiter, undefined, timeoutMS);
    }, timeoutMS);
  } catch (error) {
    if (waiter.state !== 'done') port.leave(waiter, refusal("the pool's scheduler refused the deadline", error));
    return undefined;
  }
}

/** A new checkout trace (see {@link CheckOutTraceContext}). */
function startTrace<C>(port: CheckOutPort<C>): Trace<CheckOutTraceContext> {
  return new Trace(checkOutChannel, {
    address: port.address,
    serverAddress: port.serverAddress,
    serverPort: port.serverPort,
    pool: port.pool,
    outcome: undefined,
    connectionId: undefined,
    result: undefined,
    error: undefined,
  });
}

/**
 * Ends a checkout trace with its outcome: checked out (`value` is the connection), failed (`value` is the error; the
 * outcome is the ConnectionCheckOutFailed reason it stands for), or cancelled by unsubscribing (no error).
 */
function endTrace(trace: Trace<CheckOutTraceContext>, ok: boolean, value: unknown): void {
  const context = trace.context;
  if (ok) {
    context.outcome = 'checkedOut';
    context.result = value;
    context.connectionId = (value as { id?: number }).id;
  } else {
    context.outcome =
      value === undefined || value instanceof CheckOutCancelledError
        ? 'cancelled'
        : value instanceof PoolClosedError
          ? 'poolClosed'
          : value instanceof WaitQueueTimeoutError
            ? 'timeout'
            : value instanceof WaitQueueFullError
              ? 'waitQueueFull'
              : 'connectionError';
    context.error = value as Error | undefined;
  }
  trace.finish();
}

/**
 * After a checkout entered the pool: listens to its signal while it waits (`listenToAbort`), and gives the function
 * that stops listening. A checkout served at once, as it entered, never listens: that is most checkouts, and adding
 * then removing a listener would be the costliest part of their path (about 1.2 µs of the 2.1 µs such a checkout took).
 * An abort during the entry (by code the pool ran meanwhile: an `events$` subscriber, a factory) reaches the pool now,
 * as the listener would have passed it on. A signal that throws from its addEventListener fails the checkout with that
 * error (an Error made for it, with the value as its `cause`, when it is not an Error): nobody gave up. `turn` was
 * taken before the entry, so that an abort cancels in the order the checkouts entered, though one entered by code the
 * pool ran during this entry (a checkout made by an `events$` subscriber) listened first.
 */
function listenWhileWaiting<C>(port: CheckOutPort<C>, waiter: Waiter<C>, signal: AbortSignal, turn: number): (() => void) | undefined {
  if (waiter.state === 'done') return undefined;
  try {
    if (signal.aborted) {
      abort(port, waiter, signal);
      return undefined;
    }
    return listenToAbort(signal, () => abort(port, waiter, signal), turn);
  } catch (error) {
    // Or its `aborted` getter threw (it broke after the options were checked): the checkout is failed likewise.
    // The signal refused the listener (its addEventListener threw): the checkout has entered the pool already, so the
    // pool fails it with that error, in commit order, rather than leave it waiting for a connection nobody would take.
    port.leave(waiter, refusal("the checkout's signal refused a listener", error));
    return undefined;
  }
}

/**
 * Whether `signal` (if any) has aborted, looked at before a checkout enters the pool or a warm-up waits (`owner`: whose
 * signal it is, in words); or, when its `aborted` getter throws (a signal that broke after the options were checked),
 * the Error to fail it with: what it threw, or an Error saying the owner's signal refused a listener, the value its
 * `cause`. Never throws.
 */
export function abortedBeforeEntry(signal: AbortSignal | undefined, owner = 'checkout'): boolean | Error {
  try {
    return signal?.aborted === true;
  } catch (error) {
    return refusal(`the ${owner}'s signal refused a listener`, error);
  }
}

/**
 * A checkout's signal aborted: the pool decides, in commit order, failing the checkout with its caller's error unless
 * it already served or failed it, so caller and events agree even when the abort comes from inside the pool's own
 * processing.
 */
function abort<C>(port: CheckOutPort<C>, waiter: Waiter<C>, signal: AbortSignal): void {
  if (waiter.state !== 'done') port.leave(waiter, cancelled(port.address, abortReason(signal)));
}

/**
 * The caller's error for an aborted checkout, built without stack frames: the abort's own stack is in its cause (the
 * signal's reason), and capturing a second one cost more than the rest of the cancel. Where `Error.stackTraceLimit`
 * cannot be written (frozen intrinsics: `node --frozen-intrinsics`, a hardened realm), the error keeps its stack.
 */
function cancelled(address: string, reason: unknown): CheckOutCancelledError {
  const limit = Error.stackTraceLimit;
  try {
    Error.stackTraceLimit = 0;
  } catch {
    return new CheckOutCancelledError(address, reason);
  }
  try {
    return new CheckOutCancelledError(address, reason);
  } finally {
    Error.stackTraceLimit = limit;
  }
}
