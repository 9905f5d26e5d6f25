/**
 * Classes as a minifying bundler leaves them: esbuild renames a class (`class jc`), terser makes it anonymous (its
 * `name` is `""`). Function `name` is configurable, so a test renames the classes themselves for a while.
 */

/** Runs `fn` with each class of `classes` named `name`, then gives every class its own name back. */
export function withClassesRenamed<T>(classes: readonly Function[], name: string, fn: () => T): T {
  const saved = classes.map((c) => Object.getOwnPropertyDescriptor(c, 'name')!);
  for (const c of classes) Object.defineProperty(c, 'name', { value: name, configurable: true });
  try {
    return fn();
  } finally {
    classes.forEach((c, i) => Object.defineProperty(c, 'name', saved[i]!));
  }
}

/** The names a minifier gives classes: anonymous (terser) and a short identifier (esbuild). */
export const MINIFIED_NAMES = ['', 'e'] as const;
