/**
 * DirectAbortController: an AbortController of a polyfill's shape whose `abort()` calls the signal's listeners at
 * once, building no Event and no DOMException. Node's own `abort()` costs 9–12 µs on the bench's host before any
 * listener runs, so a cancel through it is mostly the platform's; through this one it is what the pool (or the floor
 * with no pool) does. rxcmap takes any signal of this shape (it checks an AbortSignal by its shape, as Node does).
 */

/** A cancellation's reason when `abort()` is given none: one shared Error, so none is built per abort. */
const DIRECT_REASON = new Error('aborted');

/** The signal half: `aborted`, `reason`, `addEventListener`/`removeEventListener` for `'abort'` (once-only listeners). */
export class DirectSignal {
  aborted = false;
  reason: unknown = undefined;
  private listeners: (() => void)[] = [];

  addEventListener(_type: 'abort', listener: () => void): void {
    this.listeners.push(listener);
  }

  removeEventListener(_type: 'abort', listener: () => void): void {
    const i = this.listeners.indexOf(listener);
    if (i >= 0) this.listeners.splice(i, 1);
  }

  /** Marks the signal aborted and calls each listener once, in the order they were added. */
  fire(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    const listeners = this.listeners;
    this.listeners = [];
    for (const listener of listeners) listener();
  }
}

/** The controller half, as `new AbortController()` is used: `signal`, and `abort(reason?)`. */
export class DirectAbortController {
  private readonly direct = new DirectSignal();

  /** The signal, typed as the platform's (it has the shape the pools under test read). */
  get signal(): AbortSignal {
    return this.direct as unknown as AbortSignal;
  }

  abort(reason: unknown = DIRECT_REASON): void {
    this.direct.fire(reason);
  }
}
