/**
 * The limit: a minimal hand-written pool of plain objects with a FIFO queue of promise callbacks. No events, no
 * generations, no timeouts; lazy O(1) cancellation so it can take part in the churn scenario.
 */
export interface LimitWaiter<T> {
  resolve: ((item: T) => void) | undefined;
}

export class LimitPool<T> {
  private readonly free: T[] = [];
  private queue: (LimitWaiter<T> | undefined)[] = [];
  private head = 0;

  constructor(items: T[]) {
    this.free.push(...items);
  }

  acquire(): Promise<T> {
    const item = this.free.pop();
    if (item !== undefined) return Promise.resolve(item);
    return new Promise<T>((resolve) => this.queue.push({ resolve }));
  }

  /** Like acquire, but returns the waiter so it can be cancelled (its promise then never settles). */
  acquireCancellable(): { promise: Promise<T>; cancel(): void } {
    const item = this.free.pop();
    if (item !== undefined) return { promise: Promise.resolve(item), cancel: () => this.release(item) };
    const waiter: LimitWaiter<T> = { resolve: undefined };
    const promise = new Promise<T>((resolve) => (waiter.resolve = resolve));
    this.queue.push(waiter);
    return {
      promise,
      cancel: () => {
        waiter.resolve = undefined;
      },
    };
  }

  release(item: T): void {
    while (this.head < this.queue.length) {
      const waiter = this.queue[this.head];
      this.queue[this.head++] = undefined;
      if (this.head > 1024 && this.head * 2 > this.queue.length) {
        this.queue = this.queue.slice(this.head);
        this.head = 0;
      }
      if (waiter?.resolve !== undefined) {
        waiter.resolve(item);
        return;
      }
    }
    this.free.push(item);
  }
}
