/**
 * The soak's command line, parsed with node:util `parseArgs`: `--seconds N` and `--seed S`, each validated with a
 * message that names the flag and what it accepts; plus the test-only leak injection, read from the environment.
 */
import { parseArgs } from 'node:util';

/** The seed used when `--seed` is not given (the one the fuzzers use too). */
export const DEFAULT_SEED = 20261122;
/** How long the load runs when `--seconds` is not given, in seconds. */
export const DEFAULT_SECONDS = 60;
/** The longest soak accepted, in seconds (one day): the soak is always bounded. */
export const MAX_SECONDS = 86_400;

/** The one-line usage, printed on stderr after a bad argument. */
export const USAGE = 'usage: npm run soak -- [--seconds <n>] [--seed <integer>] [--help]';

/** The help text, printed on stdout for `--help` / `-h`. */
export const HELP = `Runs a ConnectionPool and a connect() client against the embedded endpoint under random faults (pool clears,
fail points, aborted and unsubscribed checkouts, WaitQueue timeouts, server-side socket kills, heartbeat failures),
checks the pool's accounting at quiescent points, and prints one JSON line of figures on stdout. Exit 0 when there
is no violation, 1 otherwise.

${USAGE}

  --seconds <n>     how long the load runs, a number of seconds > 0 and <= ${MAX_SECONDS} (default ${DEFAULT_SECONDS})
  --seed <integer>  the seed of every random choice, 0 to 2147483647 (default ${DEFAULT_SEED}); printed, so a failing
                    run can be replayed
  -h, --help        print this help and exit
`;

/**
 * Deliberate leaks, for the soak's own test only (environment variable RXCMAP_SOAK_LEAK): `connection` checks out
 * one pool connection and never checks it in; `socket` opens one raw TCP connection to the endpoint and never closes
 * it. Either must make the soak report violations and exit non-zero.
 */
export type LeakKind = 'connection' | 'socket';

/** The environment variable that injects a {@link LeakKind} (test-only). */
export const LEAK_VARIABLE = 'RXCMAP_SOAK_LEAK';

/** The settings of one soak run. */
export interface SoakSettings {
  /** How long the load runs, in seconds (quiescent checks come on top). */
  readonly seconds: number;
  /** The seed of every random choice. */
  readonly seed: number;
  /** The deliberate leak to inject (test-only), if any. */
  readonly leak: LeakKind | undefined;
}

/** What the arguments ask for: a run, the help text, or nothing valid (with the reason). */
export type SoakArgs =
  | { readonly kind: 'run'; readonly settings: SoakSettings }
  | { readonly kind: 'help' }
  | { readonly kind: 'error'; readonly message: string };

/** Parses `argv` (`process.argv.slice(2)`) and the leak variable of `env`. Never throws. */
export function parseSoakArgs(argv: readonly string[], env: NodeJS.ProcessEnv = {}): SoakArgs {
  let values: { seconds?: string; seed?: string; help?: boolean };
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: { seconds: { type: 'string' }, seed: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    return { kind: 'error', message: `${(error as Error).message} (allowed: --seconds <n>, --seed <integer>, --help)` };
  }
  if (values.help === true) return { kind: 'help' };

  const seconds = values.seconds === undefined ? DEFAULT_SECONDS : Number(values.seconds);
  if (values.seconds?.trim() === '' || !Number.isFinite(seconds) || seconds <= 0 || seconds > MAX_SECONDS) {
    return { kind: 'error', message: `--seconds must be a number of seconds > 0 and <= ${MAX_SECONDS}, got ${JSON.stringify(values.seconds)}` };
  }
  const seed = values.seed === undefined ? DEFAULT_SEED : /^\d+$/.test(values.seed) ? Number(values.seed) : NaN;
  if (!Number.isSafeInteger(seed) || seed > 0x7fffffff) {
    return { kind: 'error', message: `--seed must be an integer from 0 to 2147483647, got ${JSON.stringify(values.seed)}` };
  }
  const leak = env[LEAK_VARIABLE];
  if (leak !== undefined && leak !== '' && leak !== 'connection' && leak !== 'socket') {
    return { kind: 'error', message: `${LEAK_VARIABLE} must be "connection" or "socket" when set, got ${JSON.stringify(leak)}` };
  }
  return { kind: 'run', settings: { seconds, seed, leak: leak === '' ? undefined : leak } };
}
