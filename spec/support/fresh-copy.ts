/**
 * A module loaded afresh beside its cached copy, as another package's copy of it would be: its classes and module
 * state are its own (another bson's Binary and UUID, a scheduler whose clock is apart from the one pools read).
 */

/** Module `id` (a resolved path, from `require.resolve`) loaded again; the cached copy stays the one `require` gives. */
export function freshCopy<T>(id: string): T {
  const cached = require.cache[id];
  delete require.cache[id];
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require(id) as T;
  } finally {
    require.cache[id] = cached;
  }
}
