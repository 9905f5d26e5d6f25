/**
 * The pool's action input: an Observable with `next()` and at most one subscriber (the pool's state stream). It does
 * what a Subject would for one subscriber, without a Subject's per-value bookkeeping, on the pool's hottest path.
 */
import { Observable, type Subscriber, type TeardownLogic } from 'rxjs';

export class Inlet<A> extends Observable<A> {
  private sink: Subscriber<A> | undefined;

  /** Hands `value` to the subscriber (dropped when there is none). */
  next(value: A): void {
    this.sink?.next(value);
  }

  protected _subscribe(subscriber: Subscriber<A>): TeardownLogic {
    if (this.sink !== undefined) throw new Error('an Inlet takes one subscriber');
    this.sink = subscriber;
    return () => {
      if (this.sink === subscriber) this.sink = undefined;
    };
  }
}
