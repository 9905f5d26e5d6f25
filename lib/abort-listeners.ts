/**
 * Listening to the AbortSignals callers hand in: one listener on each signal, whatever the number of waits it
 * governs.
 *
 * A caller commonly shares one signal among all the work of a request (`Promise.all` over a handler's queries,
 * `AbortSignal.timeout(ms)` per request, a framework's request signal). Added to that signal one by one, the listeners
 * of more than 10 waiting checkouts would make Node print a MaxListenersExceededWarning ("Possible EventTarget memory
 * leak detected") for every such signal, though each listener leaves as its checkout settles; and a listener the
 * caller added first that calls `stopImmediatePropagation()` would keep the pool's from running, so the abort would be
 * lost (a checkout waiting on until waitQueueTimeoutMS, forever by default).
 *
 * Source: extension; Node's `events.addAbortListener` (which resists `stopImmediatePropagation()`) registers the one
 * listener.
 */
import { addAbortListener } from 'node:events';

/** One listener, and its place in the order listeners run in (see {@link abortTurn}). */
interface Entry {
  readonly run: () => void;
  readonly turn: number;
}

/** The listeners waiting on one signal, and the one registration on the signal that runs them. */
interface Registration {
  readonly listeners: Set<Entry>;
  readonly registered: Disposable;
  /** The latest turn added, and whether one was added after a later one (the set is then out of turn order). */
  readonly order: { last: number; unordered: boolean };
}

const registrations = new WeakMap<AbortSignal, Registration>();

let turns = 0;

/**
 * A place in the order listeners run in, taken when a wait begins, for a listener added later (`listenToAbort`'s
 * `turn`): a wait that begins before another runs first, even when its listener is added after the other's (the other
 * began and listened while the pool was still entering the first).
 */
export function abortTurn(): number {
  return turns++;
}

/**
 * Runs `listener` once when `signal` aborts, unless the returned function is called first (calling it later, or
 * again, does nothing). `signal` must not be aborted yet (callers check `signal.aborted` first). Listeners on one
 * signal run in the order of their turns (`turn`, taken with {@link abortTurn} when the wait began; by default, the
 * order they were added in); one added or removed while they run is not run. A listener that throws does not stop the
 * others: its error is thrown from a timer, as Node reports an error thrown by an event listener. Never runs
 * `listener` inside this call: a signal that aborts as it is listened to (its `addEventListener` calls back at once)
 * runs it in a microtask, as Node does for a signal aborted already.
 */
export function listenToAbort(signal: AbortSignal, listener: () => void, turn: number = abortTurn()): () => void {
  let registration = registrations.get(signal);
  if (registration === undefined) {
    const listeners = new Set<Entry>();
    const order = { last: turn, unordered: false };
    // A signal that aborts as it is listened to (its addEventListener calls back at once): the listeners run in a
    // microtask, as Node runs them for a signal aborted already, once they are all in place; never inside this call.
    let registering = true;
    let abortedWhileRegistering = false;
    const runAll = (): void => {
      // Run late (see above), this registration may have been let go of and another made for the signal meanwhile.
      if (registrations.get(signal)?.listeners === listeners) registrations.delete(signal);
      // Over a snapshot, each taken out as it runs: a listener's work may remove others (not run then), and one added
      // now goes to a registration of its own.
      const snapshot = [...listeners];
      if (order.unordered) snapshot.sort((a, b) => a.turn - b.turn);
      for (const entry of snapshot) {
        if (!listeners.delete(entry)) continue;
        try {
          entry.run();
        } catch (error) {
          setTimeout(() => {
            throw error;
          });
        }
      }
    };
    const registered = addAbortListener(signal, () => {
      if (registering) abortedWhileRegistering = true;
      else runAll();
    });
    registering = false;
    registration = { listeners, registered, order };
    registrations.set(signal, registration);
    if (abortedWhileRegistering) queueMicrotask(runAll);
  } else if (turn < registration.order.last) {
    registration.order.unordered = true;
  } else {
    registration.order.last = turn;
  }
  const entry: Entry = { run: listener, turn };
  const { listeners, registered } = registration;
  listeners.add(entry);
  return () => {
    if (!listeners.delete(entry) || listeners.size > 0) return;
    // The last one gone: the signal is let go of, as its own listeners would be.
    if (registrations.get(signal) === registration) registrations.delete(signal);
    try {
      registered[Symbol.dispose]();
    } catch {
      // A signal whose removeEventListener throws keeps the pool's listener, which finds nothing left to run. The
      // throw must not reach the caller: it stops listening as its wait settles, in the middle of that settlement.
    }
  };
}

/**
 * The `reason` of an aborted signal, or what reading it throws (a getter of a signal-like object): an abort is
 * passed on with a reason either way, never lost to a throw inside an abort listener.
 */
export function abortReason(signal: AbortSignal): unknown {
  try {
    return signal.reason;
  } catch (error) {
    return error;
  }
}
