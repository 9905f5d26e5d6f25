/**
 * Work registered while mocha defines its tests, run `limit` at a time from the first test that asks for a result:
 * tests that each wait on their own embedded deployment's timers take the time of the slowest few, not of all. A
 * job's failure is its result's rejection, seen by its own test only.
 */
export class Concurrently<T> {
  private readonly queue: (() => Promise<void>)[] = [];
  private started = false;

  constructor(private readonly limit: number) {}

  /** Registers `work`; its result, once {@link start}ed. */
  add(work: () => Promise<T>): Promise<T> {
    let settle!: (outcome: { value: T } | { error: unknown }) => void;
    const outcome = new Promise<{ value: T } | { error: unknown }>((resolve) => (settle = resolve));
    this.queue.push(() => work().then((value) => settle({ value }), (error: unknown) => settle({ error })));
    const result = outcome.then((o) => ('error' in o ? Promise.reject(o.error) : o.value));
    // Seen by the test that awaits it; one mocha does not run (--grep) leaves its failure unread, not unhandled.
    result.catch(() => undefined);
    return result;
  }

  /** Starts the work registered, `limit` at a time (once; later calls do nothing). */
  start(): void {
    if (this.started) return;
    this.started = true;
    const next = (): Promise<void> | undefined => this.queue.shift()?.().then(next);
    for (let i = 0; i < this.limit; i++) void next();
  }
}
