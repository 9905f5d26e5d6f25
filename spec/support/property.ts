/**
 * What the property tests share: the integer an environment variable sets (PROPERTY_SEED, PROPERTY_RUNS, ...), and
 * the item a generated index picks from a list that grows as the script runs.
 */

/** The integer `name` holds in the environment, or `fallback` when it is unset or empty; throws for anything else. */
export function envInt(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isSafeInteger(n)) throw new Error(`${name} must be an integer, got ${raw}`);
  return n;
}

/** The item at `i` modulo the length of `items`; undefined when it is empty. */
export function pick<T>(items: readonly T[], i: number): T | undefined {
  return items.length === 0 ? undefined : items[i % items.length];
}
