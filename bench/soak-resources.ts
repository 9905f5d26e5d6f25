/**
 * What the soak measures of the process itself: its active resources (handles and requests, by type, from
 * `process.getActiveResourcesInfo()`) against a baseline taken before it started anything, and its heap after a full
 * garbage collection. Also the bounded wait the soak uses to let things settle.
 */

/** The process's active resources (handles, requests, timers), counted by type, e.g. `TCPSocketWrap: 3`. */
export function activeResources(): Map<string, number> {
  const counts = new Map<string, number>();
  for (const type of process.getActiveResourcesInfo()) counts.set(type, (counts.get(type) ?? 0) + 1);
  return counts;
}

/** The resources of `now` beyond `baseline`, by type (only types with more than the baseline had). */
export function resourcesAbove(
  baseline: ReadonlyMap<string, number>,
  now: ReadonlyMap<string, number> = activeResources(),
): Record<string, number> {
  const extra: Record<string, number> = {};
  for (const [type, n] of now) {
    const over = n - (baseline.get(type) ?? 0);
    if (over > 0) extra[type] = over;
  }
  return extra;
}

/** The heap in use after a full garbage collection, in bytes. `gc` is `global.gc` (node --expose-gc). */
export function heapAfterGc(gc: () => void): number {
  gc();
  return process.memoryUsage().heapUsed;
}

/**
 * Resolves to true as soon as `condition()` has held at `samples` checks in a row (checked every `intervalMS`), or to
 * false after `ms`. More than one sample keeps a moment when two counts agree by chance (one side not yet told of a
 * close the other saw) from passing for a settled state.
 */
export async function settled(condition: () => boolean, ms: number, intervalMS = 10, samples = 1): Promise<boolean> {
  const deadline = performance.now() + ms;
  for (let held = 0; ; ) {
    held = condition() ? held + 1 : 0;
    if (held >= samples) return true;
    if (performance.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, intervalMS));
  }
}

/** Resolves to `promise`'s value, or to `fallback` if it has not settled after `ms` (its timer is then cleared). */
export async function within<T, F>(promise: Promise<T>, ms: number, fallback: F): Promise<T | F> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<F>((resolve) => (timer = setTimeout(() => resolve(fallback), ms)));
  try {
    return await Promise.race([promise, expired]);
  } finally {
    clearTimeout(timer);
  }
}
