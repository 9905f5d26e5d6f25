/**
 * Parameters shared by the fuzzers (`*.fuzz.spec.ts`): `npm test` runs each with a fixed seed and a short run
 * count; `npm run fuzz` sets FUZZ_RUNS for a long run, and FUZZ_SEED replays or varies the seed.
 */

/** fast-check parameters for one fuzzer: a seed (FUZZ_SEED, default fixed) and a run count (FUZZ_RUNS). */
export function fuzzParameters(defaultRuns: number): { seed: number; numRuns: number } {
  return { seed: envInt('FUZZ_SEED', 20261122), numRuns: envInt('FUZZ_RUNS', defaultRuns) };
}

function envInt(name: string, fallback: number): number {
  const text = process.env[name];
  if (text === undefined || text === '') return fallback;
  const value = Number(text);
  if (!Number.isSafeInteger(value)) throw new Error(`${name} must be an integer, got ${JSON.stringify(text)}`);
  return value;
}
