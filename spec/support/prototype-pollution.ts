/**
 * Runs code while `Object.prototype` carries extra properties, as a prototype-pollution bug elsewhere in an
 * application would leave it, and removes them again whatever happens.
 */

/**
 * Sets each of `values` on `Object.prototype` (by assignment, so enumerable, as a polluting merge sets them), runs
 * `fn`, then deletes them again (also when `fn` throws or its Promise rejects). Returns what `fn` returns: assert on it
 * after this returns, so no assertion library runs while the prototype is polluted.
 */
export function withPollutedPrototype<T>(values: Record<string, unknown>, fn: () => T): T {
  const proto = Object.prototype as Record<string, unknown>;
  const names = Object.keys(values);
  for (const name of names) if (Object.prototype.hasOwnProperty.call(proto, name)) throw new Error(`Object.prototype.${name} is already set`);
  const restore = (): void => {
    for (const name of names) delete proto[name];
  };
  for (const name of names) proto[name] = values[name];
  let result: T;
  try {
    result = fn();
  } catch (error) {
    restore();
    throw error;
  }
  if (result instanceof Promise) return result.finally(restore) as T;
  restore();
  return result;
}

/** What `fn` returns, or the error it throws (so a test can assert on either after the prototype is restored). */
export function outcome<T>(fn: () => T): T | Error {
  try {
    return fn();
  } catch (error) {
    return error as Error;
  }
}
