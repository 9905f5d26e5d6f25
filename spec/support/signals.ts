/**
 * AbortSignal shapes for the tests of a `signal` option.
 */

/**
 * A signal of AbortSignal's shape that aborts as it is listened to: a wrapper that subscribes to an upstream signal
 * when its `addEventListener` is called, and finds it aborted just then (`reason` its reason), so the listener is
 * called back inside that `addEventListener` call.
 */
export function abortingAsListened(reason: unknown): AbortSignal {
  const target = new EventTarget();
  let aborted = false;
  const signal = {
    get aborted(): boolean {
      return aborted;
    },
    reason,
    addEventListener(type: string, listener: (event: Event) => void, options: { once?: boolean }) {
      target.addEventListener(type, listener, options);
      aborted = true;
      target.dispatchEvent(new Event('abort'));
    },
    removeEventListener(type: string, listener: (event: Event) => void, options: object) {
      target.removeEventListener(type, listener, options);
    },
  };
  return signal as unknown as AbortSignal;
}

/** A signal of AbortSignal's shape, not aborted, whose `addEventListener` throws `thrown`: it refuses every listener. */
export function refusingListeners(thrown: unknown): AbortSignal {
  const signal = {
    aborted: false,
    addEventListener() {
      throw thrown;
    },
    removeEventListener() {},
  };
  return signal as unknown as AbortSignal;
}

/**
 * An object that cannot be read as an AbortSignal: its `aborted` getter throws `thrown` (as a revoked Proxy or a
 * signal of a torn-down realm does).
 */
export function unreadableAborted(thrown: unknown): AbortSignal {
  const signal = {
    get aborted(): boolean {
      throw thrown;
    },
    addEventListener() {},
    removeEventListener() {},
  };
  return signal as unknown as AbortSignal;
}

/**
 * A signal of AbortSignal's shape, never aborted, whose `aborted` getter throws `thrown` at its read number `at` (1 is
 * the first look, the options' shape check) and returns false at every other: a signal that breaks after it was
 * accepted.
 */
export function brokenAtRead(at: number, thrown: unknown): AbortSignal {
  let reads = 0;
  const signal = {
    get aborted(): boolean {
      if (++reads === at) throw thrown;
      return false;
    },
    addEventListener() {},
    removeEventListener() {},
  };
  return signal as unknown as AbortSignal;
}
