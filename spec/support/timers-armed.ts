import { AsyncLocalStorage, createHook } from 'node:async_hooks';

/** What {@link timersArmedBy} saw of the work it ran. */
export interface TimersArmed<T> {
  /** What the work resolved to. */
  readonly value: T;
  /** How many Node timers (setTimeout, setInterval) the work armed, itself or through what it awaited. */
  readonly armed: number;
  /** How many of those were still armed once it settled: neither cleared nor fired. */
  readonly left: number;
}

/**
 * Runs `work` and counts the Node timers armed in its asynchronous context (by it, by what it awaits, by their timer
 * callbacks), and those of them left armed once it settled. Timers that other code arms or clears meanwhile (a
 * server in this process, what an earlier test left running) are not counted: unlike a count of the process's active
 * timers before and after, this does not depend on what else the process is doing.
 */
export async function timersArmedBy<T>(work: () => Promise<T>): Promise<TimersArmed<T>> {
  const context = new AsyncLocalStorage<true>();
  const armed = new Set<number>();
  const live = new Set<number>();
  const hook = createHook({
    init(asyncId, type) {
      if (type === 'Timeout' && context.getStore() === true) {
        armed.add(asyncId);
        live.add(asyncId);
      }
    },
    destroy(asyncId) {
      live.delete(asyncId);
    },
  }).enable();
  try {
    const value = await context.run(true, work);
    // Node reports a timer cleared or fired (its destroy) on the next turn of the event loop, before its immediates.
    await new Promise((resolve) => setImmediate(resolve));
    return { value, armed: armed.size, left: live.size };
  } finally {
    hook.disable();
  }
}
