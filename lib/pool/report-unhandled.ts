/**
 * Reports an error nobody can receive the way RxJS reports unhandled errors: to `config.onUnhandledError` when set,
 * else thrown asynchronously (which ends a Node process that does not handle it).
 *
 * Source: extension; RxJS's own reporting of errors a subscriber did not handle.
 */
import { config } from 'rxjs';

/**
 * Hands `error` to `config.onUnhandledError`, or throws it from a timer when that is not set. Never throws: what the
 * handler throws is thrown from a timer (as RxJS, which calls the handler from one, lets it be), so the pool's step
 * that reports goes on (its other commands run, and the step ends as every step does).
 */
export function reportUnhandled(error: unknown): void {
  const report = config.onUnhandledError;
  if (report === null) return throwLater(error);
  try {
    report(error);
  } catch (thrown) {
    throwLater(thrown);
  }
}

function throwLater(error: unknown): void {
  setTimeout(() => {
    throw error;
  });
}
