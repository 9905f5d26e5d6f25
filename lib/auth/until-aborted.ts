/**
 * `work`, or a rejection with `signal.reason` as soon as `signal` aborts (already aborted: at once). What `work`
 * stands for is not cancelled (a credential provider, a token callback, another connection's fetch): its outcome is
 * then ignored. The abort listener is removed once either settles. `signal` undefined: `work` itself.
 *
 * Source: extension (the auth spec's MONGODB-AWS and MONGODB-OIDC fetches honour the operation's deadline; how is
 * the driver's).
 */
export function untilAborted<T>(work: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return work;
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
