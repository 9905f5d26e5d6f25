/**
 * The pool's mailbox: its one serialized input. Every input (checkout requests and cancellations, check-ins,
 * clear/ready/close, establishment results, timers, and merged streams such as a monitor's heartbeats) is pushed into
 * it; its single subscriber (the pool's `scan` over the state) receives them one at a time, in one total order.
 *
 * An action pushed while another is being processed (say, a subscriber that checks a connection in from inside
 * `next`) is queued, never run inside the one in progress; each action runs to completion before the next starts.
 * Two lanes: control actions are drained before checkout actions, so a clear or close takes effect before the
 * checkouts queued behind it are served.
 */
import { Observable, Subscription, type Subscriber, type TeardownLogic } from 'rxjs';

/** A FIFO of values in a growable ring buffer (O(1) push and shift, slots cleared when removed). */
class Lane<A> {
  private items: (A | undefined)[] = new Array(32);
  private head = 0;
  size = 0;

  push(a: A): void {
    if (this.size === this.items.length) {
      const next: (A | undefined)[] = new Array(this.items.length * 2);
      for (let i = 0; i < this.size; i++) next[i] = this.items[(this.head + i) & (this.items.length - 1)];
      this.items = next;
      this.head = 0;
    }
    this.items[(this.head + this.size) & (this.items.length - 1)] = a;
    this.size++;
  }

  shift(): A {
    const a = this.items[this.head] as A;
    this.items[this.head] = undefined;
    this.head = (this.head + 1) & (this.items.length - 1);
    this.size--;
    return a;
  }
}

/** A serialized, two-lane input with one subscriber. */
export class Mailbox<A> extends Observable<A> {
  private readonly control = new Lane<A>();
  private readonly checkout = new Lane<A>();
  private draining = false;
  private sink: Subscriber<A> | undefined;

  /** @param isControl picks the lane of an action: true for the control lane. */
  constructor(private readonly isControl: (a: A) => boolean) {
    super();
  }

  /** Pushes one action: processed at once when the mailbox is idle, else queued in its lane. */
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
      while (this.control.size > 0 || this.checkout.size > 0) {
        sink.next(this.control.size > 0 ? this.control.shift() : this.checkout.shift());
      }
    } finally {
      this.draining = false;
    }
  }

  /** Merges a stream of actions into the mailbox until the returned Subscription is unsubscribed. */
  merge(source: Observable<A>): Subscription {
    return source.subscribe({ next: (a) => this.next(a) });
  }

  protected _subscribe(subscriber: Subscriber<A>): TeardownLogic {
    if (this.sink !== undefined) throw new Error('a Mailbox takes one subscriber');
    this.sink = subscriber;
    return () => {
      if (this.sink === subscriber) this.sink = undefined;
    };
  }
}
