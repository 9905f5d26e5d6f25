/** Lets pending promise reactions (and I/O callbacks already due) run. */
export function microtasks(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
