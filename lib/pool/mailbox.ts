/**
 * The pool's serialized mailbox: an RxJS operator that turns re-entrant pushes into one total order. An action
 * pushed while another is being processed (say, a subscriber that checks a connection in from inside `next`) is
 * queued, never run inside the one in progress; each action runs to completion before the next starts.
 *
 * Two lanes: control actions are drained before checkout actions, so a clear or close takes effect before the
 * checkouts queued behind it are served.
 */
import { Observable, type MonoTypeOperatorFunction } from 'rxjs';

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

/**
 * Serializes the source: values pushed re-entrantly are queued and emitted after the current one has been fully
 * processed downstream. `isControl` picks the lane; the control lane is drained first.
 */
export function mailbox<A>(isControl: (a: A) => boolean): MonoTypeOperatorFunction<A> {
  return (source) =>
    new Observable<A>((subscriber) => {
      const control = new Lane<A>();
      const checkout = new Lane<A>();
      let draining = false;
      return source.subscribe({
        next(a) {
          if (draining) {
            (isControl(a) ? control : checkout).push(a);
            return;
          }
          draining = true;
          try {
            subscriber.next(a); // nothing is queued when not draining: run it at once
            while (control.size > 0 || checkout.size > 0) {
              subscriber.next(control.size > 0 ? control.shift() : checkout.shift());
            }
          } finally {
            draining = false;
          }
        },
        error: (e) => subscriber.error(e),
        complete: () => subscriber.complete(),
      });
    });
}
