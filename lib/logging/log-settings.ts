/**
 * Log settings: per-component minimum severity, destination and max document length, from programmatic options
 * (which take precedence) and the MONGODB_LOG_* environment variables (whose invalid values are ignored, never thrown).
 *
 * Source: logging spec, "Per-Component Configuration of Log Levels", "Configurable Log Destination", "Configurable
 * Max Document Length", "Supporting Both Programmatic and Environment Variable Configuration".
 */
import { InvalidOptionError } from '../errors';

/**
 * The severity levels, most severe first, after `off` (a frozen array).
 *
 * Source: logging spec, "Log Severity Levels".
 */
export const LOG_LEVELS = Object.freeze([
  'off',
  'emergency',
  'alert',
  'critical',
  'error',
  'warn',
  'notice',
  'info',
  'debug',
  'trace',
] as const);

/** A severity level name. Source: logging spec, "Log Severity Levels". */
export type LogLevel = (typeof LOG_LEVELS)[number];

/**
 * The log components whose severity can be set: `connection` (the CMAP log messages) and `topology` (accepted and
 * resolved; this library emits no topology messages).
 *
 * Source: logging spec, "Components"; CMAP spec, "Connection Pool Logging" (component `connection`).
 */
export type LogComponent = 'connection' | 'topology';

/**
 * Where a message goes when it is written: a user-supplied destination, in place of a file or standard stream. The
 * built-in destinations write each message's `toJSON()` as one JSON line.
 *
 * Source: logging spec, "Configurable Log Destination" (a way to consume the messages programmatically).
 */
export interface LogSink {
  /**
   * Receives each message (structured; `render()` gives the unstructured form). If it throws, rxcmap stops writing to
   * the sink and emits one process warning (code `RXCMAP_LOG_SINK_FAILED`); the application is not affected.
   */
  write(message: { toJSON(): object; render(): string }): void;
  /**
   * Flushes and releases the destination. Called only on the sinks rxcmap opens itself for a `path` string: by a
   * pool once it is closed and has closed its last connection, by a client when it is closed. A sink object you pass
   * is yours to close. May return a Promise that settles once everything is written.
   */
  close?(): void | Promise<void>;
}

/**
 * Programmatic logging options; each overrides its environment variable. The pool or client that receives them
 * throws {@link InvalidOptionError} from its constructor for a level not in {@link LOG_LEVELS}, a maxDocumentLength
 * that is not an integer >= 0, or an empty path; invalid environment values are ignored instead.
 *
 * Source: logging spec, "Per-Component Configuration of Log Levels", "Configurable Log Destination", "Configurable
 * Max Document Length", "Supporting Both Programmatic and Environment Variable Configuration".
 */
export interface LoggingOptions {
  /**
   * Minimum severity per component; `default` applies to components not named. CMAP messages are `debug`, so
   * `{ connection: 'debug' }` turns them on. Over MONGODB_LOG_CONNECTION / MONGODB_LOG_TOPOLOGY / MONGODB_LOG_ALL.
   */
  componentSeverities?: Partial<Record<LogComponent | 'default', LogLevel>>;
  /** `stderr` (default), `stdout`, a file path (appended to), or a sink. Over MONGODB_LOG_PATH. */
  path?: string | LogSink;
  /** Max length of a document or error text in a message, in UTF-16 code units (default 1000). Over MONGODB_LOG_MAX_DOCUMENT_LENGTH. */
  maxDocumentLength?: number;
}

/** Settings with every source applied. */
export interface LogSettings {
  readonly severities: Readonly<Record<LogComponent, LogLevel>>;
  readonly path: string | LogSink;
  readonly maxDocumentLength: number;
}

/** The default max document length, in UTF-16 code units. Source: logging spec, "Configurable Max Document Length". */
export const DEFAULT_MAX_DOCUMENT_LENGTH = 1000;

const ENV_OF: Record<LogComponent, string> = { connection: 'MONGODB_LOG_CONNECTION', topology: 'MONGODB_LOG_TOPOLOGY' };

/**
 * Resolves the settings. Per component: the option for it, else its environment variable, else the `default`
 * option, else MONGODB_LOG_ALL, else `off`.
 *
 * @throws {InvalidOptionError} for an invalid programmatic value (options that are not an object, a level not in
 *   {@link LOG_LEVELS}, a negative or non-integer maxDocumentLength, an empty path, or a path that is neither a
 *   string nor a sink object with `write` and, if given, `close` functions). Invalid environment values are ignored.
 */
export function resolveLogSettings(options: LoggingOptions = {}, env: NodeJS.ProcessEnv = process.env): LogSettings {
  if (options === null || typeof options !== 'object') {
    throw new InvalidOptionError('logging', options, 'an object of logging options (componentSeverities, path, maxDocumentLength)');
  }
  const given = options.componentSeverities ?? {};
  for (const [component, level] of Object.entries(given)) {
    if (!isLevel(level)) throw new InvalidOptionError(`componentSeverities.${component}`, level, `one of ${LOG_LEVELS.join(', ')}`);
  }
  const envLevel = (name: string): LogLevel | undefined => {
    const value = env[name]?.toLowerCase();
    return isLevel(value) ? value : undefined;
  };
  const severities = {} as Record<LogComponent, LogLevel>;
  for (const component of Object.keys(ENV_OF) as LogComponent[]) {
    severities[component] = given[component] ?? envLevel(ENV_OF[component]) ?? given.default ?? envLevel('MONGODB_LOG_ALL') ?? 'off';
  }

  if (options.maxDocumentLength !== undefined && !(Number.isSafeInteger(options.maxDocumentLength) && options.maxDocumentLength >= 0)) {
    throw new InvalidOptionError('maxDocumentLength', options.maxDocumentLength, 'an integer >= 0');
  }
  const envLength = env.MONGODB_LOG_MAX_DOCUMENT_LENGTH;
  const parsedLength = envLength !== undefined && /^\d+$/.test(envLength.trim()) ? Number(envLength) : undefined;

  const sinkShape = '"stderr", "stdout", a file path, or a sink object with a write(message) function';
  if (options.path !== undefined) {
    const path: unknown = options.path;
    if (typeof path === 'string' ? path.trim() === '' : !isSink(path)) throw new InvalidOptionError('path', path, sinkShape);
  }
  const envPath = env.MONGODB_LOG_PATH?.trim();
  return Object.freeze({
    severities: Object.freeze(severities),
    path: options.path ?? (envPath ? envPath : 'stderr'),
    maxDocumentLength: options.maxDocumentLength ?? parsedLength ?? DEFAULT_MAX_DOCUMENT_LENGTH,
  });
}

/** Whether messages of `level` are emitted for a component set to `threshold`. */
export function willLog(threshold: LogLevel, level: LogLevel): boolean {
  return threshold !== 'off' && LOG_LEVELS.indexOf(level) <= LOG_LEVELS.indexOf(threshold);
}

function isSink(value: unknown): value is LogSink {
  if (typeof value !== 'object' || value === null) return false;
  const { write, close } = value as Partial<LogSink>;
  return typeof write === 'function' && (close === undefined || typeof close === 'function');
}

function isLevel(value: unknown): value is LogLevel {
  return typeof value === 'string' && (LOG_LEVELS as readonly string[]).includes(value);
}
