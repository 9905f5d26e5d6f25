/**
 * The timers of one soak actor (the load, the fault injector). Each pending timer can be fired at once with
 * {@link Timers.flush}, so pausing the load never waits out a sleep, and nothing the soak scheduled outlives it.
 */

/** A set of pending timers, each run at its time or at the next flush, whichever comes first. */
export class Timers {
  private readonly pending = new Map<NodeJS.Timeout, () => void>();

  /** Runs `fn` after `ms`, or at the next {@link flush}. Returns a function that cancels it (a no-op once it ran). */
  after(ms: number, fn: () => void): () => void {
    const timer = setTimeout(() => {
      this.pending.delete(timer);
      fn();
    }, ms);
    this.pending.set(timer, fn);
    return () => {
      if (this.pending.delete(timer)) clearTimeout(timer);
    };
  }

  /** Resolves after `ms`, or at the next {@link flush}. */
  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.after(ms, resolve));
  }

  /** Runs every pending timer's function now (in the order they were set) and clears its timer. */
  flush(): void {
    const due = [...this.pending];
    this.pending.clear();
    for (const [timer, fn] of due) {
      clearTimeout(timer);
      fn();
    }
  }
}
