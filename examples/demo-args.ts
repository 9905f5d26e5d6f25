/**
 * The demo's command line: its usage and help texts, and the parser that turns the arguments into a run's settings,
 * a request for help, or one error message saying which flag or value is wrong and what is allowed.
 */

/** The one-line usage, printed on stderr after a bad argument. */
export const USAGE = 'usage: demo [--duration <seconds>] [--workers <n>] [--uri <mongodb:// connection string>] [--help]';

/** The help text, printed on stdout for `--help` / `-h`. */
export const HELP = `Runs many concurrent workers pinging a MongoDB server through one rxcmap pool, clears the pool once midway
(as after a network error), and prints progress on stderr and a one-line JSON summary on stdout.

${USAGE}

  --duration <seconds>  how long the workers run, a number > 0 (default 5)
  --workers <n>         how many workers run at once, an integer >= 1 (default 1000)
  --uri <uri>           the server, a mongodb:// connection string (default: $MONGODB_URI, else an embedded endpoint)
  -h, --help            print this help and exit

example:
  npm start -- --duration 1 --workers 200 --uri 'mongodb://localhost:27017/?serverSelectionTimeoutMS=2000'
`;

/** What the arguments ask for: a run with its settings, the help text, or nothing valid (with the reason). */
export type DemoArgs =
  | { readonly kind: 'run'; readonly durationMS: number; readonly workers: number; readonly uri?: string }
  | { readonly kind: 'help' }
  | { readonly kind: 'error'; readonly message: string };

const FLAGS = ['duration', 'workers', 'uri'] as const;

/**
 * Parses the demo's arguments (`process.argv.slice(2)`): `--duration`, `--workers` and `--uri`, each followed by its
 * value or written `--flag=value`, and `--help` / `-h`. Defaults: 5 s, 1000 workers, no URI.
 *
 * Error messages name the flag and what it accepts; they never repeat a URI or a positional argument, which may
 * hold a password.
 */
export function parseDemoArgs(argv: readonly string[]): DemoArgs {
  const values: Partial<Record<(typeof FLAGS)[number], string>> = {};
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--help' || arg === '-h') return { kind: 'help' };
    if (!arg.startsWith('-')) {
      return error(`unexpected argument at position ${i + 1} (the demo takes only flags: --duration, --workers, --uri, --help)`);
    }
    const eq = arg.indexOf('=');
    const name = eq < 0 ? arg : arg.slice(0, eq);
    const flag = FLAGS.find((f) => `--${f}` === name);
    if (flag === undefined) return error(`unknown flag ${name} (allowed: --duration, --workers, --uri, --help)`);
    const value = eq < 0 ? argv[++i] : arg.slice(eq + 1);
    if (value === undefined || value === '') return error(`${name} needs a value`);
    values[flag] = value;
  }

  const seconds = Number(values.duration ?? '5');
  const durationMS = Math.round(seconds * 1000);
  if (!Number.isFinite(seconds) || !(durationMS >= 1)) {
    return error(`--duration must be a number of seconds > 0 (at least 0.001), got ${JSON.stringify(values.duration)}`);
  }
  const workers = values.workers === undefined ? 1000 : /^\d+$/.test(values.workers) ? Number(values.workers) : NaN;
  if (!Number.isSafeInteger(workers) || workers < 1) {
    return error(`--workers must be an integer >= 1, got ${JSON.stringify(values.workers)}`);
  }
  return { kind: 'run', durationMS, workers, ...(values.uri === undefined ? {} : { uri: values.uri }) };
}

/**
 * `text` with the password of `uri`'s user information (`scheme://user:password@hosts`), if it has one, replaced by
 * `****`: for messages about a URI that may not even parse.
 */
export function hidePassword(text: string, uri: string): string {
  const authority = uri.replace(/^[^:/]*:\/\//, '').split(/[/?]/)[0];
  const at = authority.lastIndexOf('@');
  const colon = authority.indexOf(':');
  if (at < 0 || colon < 0 || colon > at) return text;
  const password = authority.slice(colon + 1, at);
  let decoded = password;
  try {
    decoded = decodeURIComponent(password);
  } catch {
    // not percent-encoded: the raw form is the only one
  }
  return [password, decoded].reduce((t, p) => (p === '' ? t : t.split(p).join('****')), text);
}

function error(message: string): DemoArgs {
  return { kind: 'error', message };
}
