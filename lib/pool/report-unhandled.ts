/**
 * Reports an error nobody can receive the way RxJS reports unhandled errors: to `config.onUnhandledError` when set,
 * else thrown asynchronously (which ends a Node process that does not handle it).
 *
 * Source: extension; RxJS's own reporting of errors a subscriber did not handle.
 */
import { config } from 'rxjs';

/** Hands `error` to `config.onUnhandledError`, or throws it from a timer when that is not set. */
export function reportUnhandled(error: unknown): void {
  const report = config.onUnhandledError;
  if (report !== null) report(error);
  else
    setTimeout(() => {
      throw error;
    });
}
