/**
 * The checkout front ends: one lazy request object that is both an Observable (cancel by unsubscribing) and a
 * PromiseLike (cancel with an AbortSignal). Both forms enter the same WaitQueue through the same action.
 *
 * Source: CMAP spec, "Checking Out a Connection", "WaitQueue".
 */
import { Observable, type Subscriber, type TeardownLogic } from 'rxjs';
import { CheckOutCancelledError } from '../errors';
import { Waiter, type CheckOutSink } from './wait-queue';

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
  private promise: Promise<C> | undefined;

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
    const waiter = new Waiter<C>({
      deliver(connection) {
        if (subscriber.closed) return false;
        subscriber.next(connection);
        subscriber.complete();
        return true;
      },
      fail(error) {
        subscriber.error(error);
      },
    });
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
    this.promise ??= checkOutPromise(this.port, this.signal);
    return this.promise.then(onfulfilled, onrejected);
  }
}

/** A waiter that settles a Promise: waiter and sink in one object, so a checkout allocates little. */
class PromiseWaiter<C> extends Waiter<C> implements CheckOutSink<C> {
  settled = false;
  resolve!: (connection: C) => void;
  reject!: (error: unknown) => void;
  onAbort: (() => void) | undefined;

  constructor(private readonly signal: AbortSignal | undefined) {
    super();
  }

  deliver(connection: C): boolean {
    if (!this.settle()) return false;
    this.resolve(connection);
    return true;
  }

  fail(error: Error): void {
    if (this.settle()) this.reject(error);
  }

  /** Marks the waiter settled (false if it already was) and stops listening to its signal. */
  settle(): boolean {
    if (this.settled) return false;
    this.settled = true;
    if (this.onAbort !== undefined) this.signal!.removeEventListener('abort', this.onAbort);
    return true;
  }
}

/** One checkout as a Promise; settles exactly once, whichever of delivery, failure or abort comes first. */
function checkOutPromise<C>(port: CheckOutPort<C>, signal: AbortSignal | undefined): Promise<C> {
  if (signal?.aborted) return Promise.reject(new CheckOutCancelledError(port.address, signal.reason));
  const waiter = new PromiseWaiter<C>(signal);
  const promise = new Promise<C>((resolve, reject) => {
    waiter.resolve = resolve;
    waiter.reject = reject;
  });
  if (signal !== undefined) {
    waiter.onAbort = () => {
      // Once the pool has committed the outcome (delivery or failure on its way), it stands: caller and events agree.
      if (waiter.state === 'done' || !waiter.settle()) return;
      waiter.reject(new CheckOutCancelledError(port.address, signal.reason));
      port.leave(waiter);
    };
    signal.addEventListener('abort', waiter.onAbort, { once: true });
  }
  port.enter(waiter);
  return promise;
}
