/**
 * The checkout front ends: one lazy request object that is both an Observable (cancel by unsubscribing) and a
 * PromiseLike (cancel with an AbortSignal). Both forms enter the same WaitQueue through the same action.
 *
 * Source: CMAP spec, "Checking Out a Connection", "WaitQueue".
 */
import { Observable, type Subscriber, type TeardownLogic } from 'rxjs';
import { CheckOutCancelledError } from '../errors';
import { Waiter } from './wait-queue';

/** Options of one checkout. */
export interface CheckOutOptions {
  /**
   * Aborting it cancels the checkout: the request leaves the WaitQueue at once, ConnectionCheckOutFailed is
   * emitted (reason `cancelled`), and the checkout fails with {@link CheckOutCancelledError}. An abort that comes
   * after the pool committed the checkout's outcome (ConnectionCheckedOut or ConnectionCheckOutFailed already
   * emitted, delivery under way) changes nothing: the caller receives what the events say.
   */
  readonly signal?: AbortSignal;
}

/** How a request reaches its pool. */
export interface CheckOutPort<C> {
  readonly address: string;
  /** Enqueues the waiter's checkOut action. */
  enter(waiter: Waiter<C>): void;
  /** Enqueues the waiter's cancel action. */
  leave(waiter: Waiter<C>): void;
}

/**
 * A checkout request. Lazy: nothing is enqueued until it is subscribed to, or awaited.
 *
 * - As an Observable: each subscription is one checkout; it emits the connection once and completes, or errors with
 *   PoolClosedError, PoolClearedError, WaitQueueTimeoutError, CheckOutCancelledError (its signal aborted) or the
 *   establishment error. Unsubscribing before delivery cancels the checkout.
 * - As a PromiseLike: the first `then` starts one checkout; later `then`s share its outcome.
 *
 * The connection must be checked in with `pool.checkIn(connection)` (or use `pool.withConnection`).
 */
export class CheckOutRequest<C> extends Observable<C> implements PromiseLike<C> {
  /** The checkout the first `then` started; later `then`s share its outcome. */
  private waiter: PromiseWaiter<C> | undefined;

  constructor(
    private readonly port: CheckOutPort<C>,
    private readonly signal?: AbortSignal,
  ) {
    super();
  }

  /** One subscription = one checkout. (RxJS calls this for every subscriber.) */
  protected _subscribe(subscriber: Subscriber<C>): TeardownLogic {
    const { port, signal } = this;
    if (signal?.aborted) {
      subscriber.error(new CheckOutCancelledError(port.address, signal.reason));
      return undefined;
    }
    const waiter = new SubscriberWaiter<C>(subscriber);
    const onAbort = (): void => {
      // Once the pool has committed the outcome (delivery or failure on its way), it stands: caller and events agree.
      if (waiter.state !== 'done') subscriber.error(new CheckOutCancelledError(port.address, signal!.reason));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    port.enter(waiter);
    return () => {
      signal?.removeEventListener('abort', onAbort);
      if (waiter.state !== 'done') port.leave(waiter);
    };
  }

  then<R1 = C, R2 = never>(
    onfulfilled?: ((value: C) => R1 | PromiseLike<R1>) | null,
    onrejected?: ((reason: unknown) => R2 | PromiseLike<R2>) | null,
  ): Promise<R1 | R2> {
    if (this.waiter !== undefined) return this.waiter.join(onfulfilled, onrejected);
    return new Promise<R1 | R2>((resolve) => {
      this.waiter = checkOutPromise(this.port, this.signal, onfulfilled, onrejected, resolve as Resolve);
    });
  }
}

/** The waiter of one subscription: delivers to its subscriber, unless that has left. */
class SubscriberWaiter<C> extends Waiter<C> {
  constructor(private readonly subscriber: Subscriber<C>) {
    super();
  }

  deliver(connection: C): boolean {
    if (this.subscriber.closed) return false;
    this.subscriber.next(connection);
    this.subscriber.complete();
    return true;
  }

  fail(error: Error): void {
    this.subscriber.error(error);
  }
}

type OnFulfilled<C> = ((value: C) => unknown) | null | undefined;
type OnRejected = ((reason: unknown) => unknown) | null | undefined;
type Resolve = (value: unknown) => void;
/** A later `then` of the same request: its callbacks and the resolve of the Promise it returned. */
type Listener<C> = readonly [OnFulfilled<C>, OnRejected, Resolve];
/** How the checkout ended. */
interface Outcome<C> {
  readonly ok: boolean;
  readonly value: C | unknown;
}

/**
 * The waiter of one Promise checkout. The first `then`'s callbacks settle the Promise that `then` returned directly
 * (no internal Promise chained to it): while it waits, a checkout keeps one Promise and its `resolve`, nothing more.
 * Callbacks run on a microtask, never inside the pool's own processing (Promises/A+).
 */
class PromiseWaiter<C> extends Waiter<C> {
  /** Undefined once settled. */
  private resolve: Resolve | undefined;
  /** Before settlement: later `then`s waiting too (rare); after: the outcome, for `then`s still to come. */
  private later: Listener<C>[] | Outcome<C> | undefined;
  /** Stops listening to the AbortSignal, when there is one. */
  detach: (() => void) | undefined;

  constructor(
    private onfulfilled: OnFulfilled<C>,
    private onrejected: OnRejected,
    resolve: Resolve,
  ) {
    super();
    this.resolve = resolve;
  }

  deliver(connection: C): boolean {
    return this.settle(true, connection);
  }

  fail(error: Error): void {
    this.settle(false, error);
  }

  /** Settles once: false if it already was. The callbacks run on a microtask. */
  settle(ok: boolean, value: C | unknown): boolean {
    const resolve = this.resolve;
    if (resolve === undefined) return false;
    const { onfulfilled, onrejected } = this;
    const later = this.later as Listener<C>[] | undefined;
    this.resolve = this.onfulfilled = this.onrejected = undefined;
    this.later = { ok, value };
    this.detach?.();
    this.detach = undefined;
    queueMicrotask(() => {
      notify(onfulfilled, onrejected, resolve, ok, value);
      if (later !== undefined) for (const [f, r, res] of later) notify(f, r, res, ok, value);
    });
    return true;
  }

  /** A later `then` of the same request: shares its outcome. */
  join<R1, R2>(onfulfilled: OnFulfilled<C>, onrejected: OnRejected): Promise<R1 | R2> {
    return new Promise<R1 | R2>((resolve) => {
      const later = this.later;
      if (this.resolve !== undefined) {
        this.later = [...((later as Listener<C>[] | undefined) ?? []), [onfulfilled, onrejected, resolve as Resolve]];
      } else {
        const { ok, value } = later as Outcome<C>;
        queueMicrotask(() => notify(onfulfilled, onrejected, resolve as Resolve, ok, value));
      }
    });
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

/** Starts one checkout as a Promise; it settles exactly once, whichever of delivery, failure or abort comes first. */
function checkOutPromise<C>(
  port: CheckOutPort<C>,
  signal: AbortSignal | undefined,
  onfulfilled: OnFulfilled<C>,
  onrejected: OnRejected,
  resolve: Resolve,
): PromiseWaiter<C> {
  const waiter = new PromiseWaiter<C>(onfulfilled, onrejected, resolve);
  if (signal?.aborted) {
    waiter.state = 'done';
    waiter.settle(false, new CheckOutCancelledError(port.address, signal.reason));
    return waiter;
  }
  if (signal !== undefined) {
    const onAbort = (): void => {
      // Once the pool has committed the outcome (delivery or failure on its way), it stands: caller and events agree.
      if (waiter.state !== 'done' && waiter.settle(false, new CheckOutCancelledError(port.address, signal.reason))) port.leave(waiter);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    waiter.detach = () => signal.removeEventListener('abort', onAbort);
  }
  port.enter(waiter);
  return waiter;
}
