/**
 * Broadcast: how `events$` and `state$` reach their subscribers. One value goes to every current subscriber, in
 * subscription order, through each subscriber's own RxJS `Subscriber` (so one that throws is reported as RxJS reports
 * any unhandled error, and affects neither the pool nor the others).
 *
 * Why not a `Subject`: the pool publishes several events per checkout to usually one subscriber, and `Subject.next`
 * builds an error-context closure and copies or iterates its observer list per value; here `next` is a plain indexed
 * loop over an array that is replaced (copy on write) only when someone subscribes or unsubscribes.
 */
import type { Subscriber } from 'rxjs';

/** A synchronous, hot multicast to RxJS subscribers. */
export class Broadcast<T> {
  private subscribers: readonly Subscriber<T>[] = [];
  private completed = false;

  /** Whether anyone subscribes now. */
  get observed(): boolean {
    return this.subscribers.length > 0;
  }

  /** Sends `value` to every subscriber present when the call starts. */
  next(value: T): void {
    const subscribers = this.subscribers;
    for (let i = 0; i < subscribers.length; i++) subscribers[i].next(value);
  }

  /** Completes every subscriber; later ones are completed at once. */
  complete(): void {
    if (this.completed) return;
    this.completed = true;
    const subscribers = this.subscribers;
    this.subscribers = [];
    for (const s of subscribers) s.complete();
  }

  /** Adds `subscriber` until the returned teardown runs. */
  add(subscriber: Subscriber<T>): () => void {
    if (this.completed) {
      subscriber.complete();
      return () => undefined;
    }
    this.subscribers = [...this.subscribers, subscriber];
    return () => {
      this.subscribers = this.subscribers.filter((s) => s !== subscriber);
    };
  }
}
