/**
 * PoolInput: the pool's one serialized input, an RxJS `Observer` of actions with exactly one subscriber (the pool's
 * `scan` over its state). Every input (checkout requests and cancellations, check-ins, clear/ready/close,
 * establishment results, timers, and streams of actions subscribed into it) is pushed into it, and its subscriber
 * receives them one at a time, in one total order.
 *
 * Why not a plain `Subject`: a Subject delivers `next` synchronously and re-entrantly, so a subscriber that checks a
 * connection in from inside the pool's own processing would run the reducer inside the step in progress, with that
 * step's commands half run and its events out of commit order. Here an action pushed while another is processed is
 * queued and runs after it, to completion. It also has two lanes (control actions drain first, so a clear or close
 * takes effect before checkouts that queued behind it are served), a hook after each batch (where `state$`
 * publishes), and no multicast: one consumer, no subscriber list to walk per action.
 *
 * `error` and `complete` end only the source that sent them: a stream of actions subscribed into the pool may finish
 * without closing the pool (`close()` does that). An error is reported the way RxJS reports any unhandled error
 * (`config.onUnhandledError`, else thrown asynchronously).
 */
import { Observable, type Observer, type Subscriber, type TeardownLogic } from 'rxjs';
import { reportUnhandled } from './report-unhandled';
import { RingBuffer } from './ring-buffer';

/** A serialized, two-lane input with one subscriber. */
export class PoolInput<A> extends Observable<A> implements Observer<A> {
  private readonly control = new RingBuffer<A>();
  private readonly checkout = new RingBuffer<A>();
  private draining = false;
  private sink: Subscriber<A> | undefined;

  /**
   * @param isControl picks the lane of an action: true for the control lane.
   * @param afterBatch called when every queued action has been processed, before the input goes idle; actions it
   *   pushes are processed (and it is called again) before `next` returns.
   */
  constructor(
    private readonly isControl: (a: A) => boolean,
    private readonly afterBatch?: () => void,
  ) {
    super();
  }

  /** Pushes one action: processed at once when the input is idle, else queued in its lane. */
  next(a: A): void {
    if (this.draining) {
      (this.isControl(a) ? this.control : this.checkout).push(a);
      return;
    }
    const sink = this.sink;
    if (sink === undefined) return;
    this.draining = true;
    try {
      sink.next(a);
      for (;;) {
        while (this.control.size > 0 || this.checkout.size > 0) {
          sink.next((this.control.size > 0 ? this.control.shift() : this.checkout.shift()) as A);
        }
        if (this.afterBatch === undefined) break;
        this.afterBatch();
        if (this.control.size === 0 && this.checkout.size === 0) break;
      }
    } finally {
      this.draining = false;
    }
  }

  /** A source of actions failed: reported as an unhandled error; the pool goes on. */
  error(err: unknown): void {
    reportUnhandled(err);
  }

  /** A source of actions completed: nothing to do; the pool goes on. */
  complete(): void {}

  protected _subscribe(subscriber: Subscriber<A>): TeardownLogic {
    if (this.sink !== undefined) throw new Error('a PoolInput takes one subscriber');
    this.sink = subscriber;
    return () => {
      if (this.sink === subscriber) this.sink = undefined;
    };
  }
}
