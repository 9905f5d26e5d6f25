/**
 * Log settings: per-component minimum severity, destination and max document length, from programmatic options
 * (which take precedence) and the MONGODB_LOG_* environment variables (whose invalid values are ignored, never thrown).
 *
 * Source: logging spec, "Per-Component Configuration of Log Levels", "Configurable Log Destination", "Configurable
 * Max Document Length", "Supporting Both Programmatic and Environment Variable Configuration".
 */
import { InvalidOptionError } from '../errors';
import { optionValue, optionValues, rejectUnknownOptions, requireOptionsObject, type ListsEveryOption } from '../options';

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
 * The log components whose severity can be set (a frozen array): `client` (the client's own messages: warnings about
 * its connection string, level `warn`; over MONGODB_LOG_CLIENT), `command` (the application's commands, level
 * `debug`: Command started, succeeded, failed; over MONGODB_LOG_COMMAND), `connection` (the CMAP log messages, level
 * `debug`; over MONGODB_LOG_CONNECTION), `serverSelection` (a client's server selections: Server selection started,
 * succeeded, failed at `debug`, Waiting for suitable server to become available at `info`; over
 * MONGODB_LOG_SERVER_SELECTION) and `topology` (a client's heartbeat messages, level `debug`: Server heartbeat
 * started, succeeded, failed; over MONGODB_LOG_TOPOLOGY).
 *
 * Source: logging spec, "Components" (`command`, `connection`, `serverSelection`, `topology`; "Drivers MAY define
 * additional language-specific components"); command logging and monitoring spec, "Log Messages" (component
 * `command`); CMAP spec, "Connection Pool Logging" (component `connection`); server selection spec, "Logging"
 * (component `serverSelection`); server discovery and monitoring logging and monitoring spec, "Log Messages"
 * (component `topology`); `client`: the MongoDB Node.js driver's component of the same name and variable; connection
 * string spec, "Keys" and "Values" (WARN messages).
 */
export const LOG_COMPONENTS = Object.freeze(['client', 'command', 'connection', 'serverSelection', 'topology'] as const);

/** A log component name (see {@link LOG_COMPONENTS}). Source: logging spec, "Components". */
export type LogComponent = (typeof LOG_COMPONENTS)[number];

/**
 * Where a message goes when it is written: a user-supplied destination, in place of a file or standard stream. The
 * built-in destinations write each message's `toJSON()` as one JSON line.
 *
 * Source: logging spec, "Configurable Log Destination" (a way to consume the messages programmatically).
 */
export interface LogSink {
  /**
   * Receives each message (structured; `render()` gives the unstructured form), in the order of the events. May be
   * async: a Promise it returns is not awaited (the next message does not wait for it). If it throws, or its Promise
   * rejects, rxcmap stops writing to the sink and emits one process warning (code `RXCMAP_LOG_SINK_FAILED`) per pool
   * or client it was given to; the application is not affected.
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
   * `{ connection: 'debug' }` turns them on; the command messages are `debug` messages of `command`; a client's
   * heartbeat messages are `debug` messages of `topology`; connection string warnings are `warn` messages of `client`. Over
   * MONGODB_LOG_CLIENT / MONGODB_LOG_COMMAND / MONGODB_LOG_CONNECTION / MONGODB_LOG_TOPOLOGY / MONGODB_LOG_ALL.
   */
  componentSeverities?: Partial<Record<LogComponent | 'default', LogLevel>> | undefined;
  /** `stderr` (default), `stdout`, a file path (appended to), or a sink. Over MONGODB_LOG_PATH. */
  path?: string | LogSink | undefined;
  /** Max length of a document or error text in a message, in UTF-16 code units (default 1000). Over MONGODB_LOG_MAX_DOCUMENT_LENGTH. */
  maxDocumentLength?: number | undefined;
}

/** Settings with every source applied. */
export interface LogSettings {
  readonly severities: Readonly<Record<LogComponent, LogLevel>>;
  readonly path: string | LogSink;
  readonly maxDocumentLength: number;
}

/** The default max document length, in UTF-16 code units. Source: logging spec, "Configurable Max Document Length". */
export const DEFAULT_MAX_DOCUMENT_LENGTH = 1000;

const ENV_OF: Record<LogComponent, string> = {
  client: 'MONGODB_LOG_CLIENT',
  command: 'MONGODB_LOG_COMMAND',
  connection: 'MONGODB_LOG_CONNECTION',
  serverSelection: 'MONGODB_LOG_SERVER_SELECTION',
  topology: 'MONGODB_LOG_TOPOLOGY',
};

/**
 * The option names of {@link LoggingOptions} (a readonly tuple).
 *
 * Source: logging spec, "Supporting Both Programmatic and Environment Variable Configuration".
 */
export const LOGGING_OPTION_NAMES = [
  'componentSeverities',
  'path',
  'maxDocumentLength',
] as const satisfies readonly (keyof LoggingOptions)[];
true satisfies ListsEveryOption<LoggingOptions, typeof LOGGING_OPTION_NAMES>;

const SEVERITY_KEYS: readonly (LogComponent | 'default')[] = [...LOG_COMPONENTS, 'default'];

/**
 * Resolves the settings. Per component: the option for it, else its environment variable, else the `default`
 * option, else MONGODB_LOG_ALL, else `off`.
 *
 * @throws {InvalidOptionError} for an invalid programmatic value: options that are not an object, a key that is not
 *   a logging option or a componentSeverities key that is not a component of {@link LOG_COMPONENTS} or `default`
 *   (naming the closest one), componentSeverities that is not an object, a level not in {@link LOG_LEVELS}, a
 *   negative or non-integer maxDocumentLength, an empty path, or a path that is neither a string nor a sink object
 *   with `write` and, if given, `close` functions. Invalid environment values are ignored. The error names the option
 *   by its path from the client or pool options that hold these: `logging` itself, `logging.path`,
 *   `logging.maxDocumentLength`, `logging.componentSeverities`, `logging.componentSeverities.connection`.
 */
export function resolveLogSettings(options: LoggingOptions = {}, env: NodeJS.ProcessEnv = process.env): LogSettings {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new InvalidOptionError('logging', options, 'an object of logging options (componentSeverities, path, maxDocumentLength)');
  }
  rejectUnknownOptions(options, LOGGING_OPTION_NAMES, 'logging', 'logging.');
  // Each option read once, none from Object.prototype (see optionValue).
  const { componentSeverities, maxDocumentLength, path } = optionValues(options, LOGGING_OPTION_NAMES);
  const severitiesShape = `an object of levels by component (${SEVERITY_KEYS.join(', ')})`;
  const levels = requireOptionsObject('logging.componentSeverities', componentSeverities, severitiesShape) ?? {};
  rejectUnknownOptions(levels, SEVERITY_KEYS, 'logging.componentSeverities', 'logging.componentSeverities.');
  const given = optionValues(levels as Partial<Record<LogComponent | 'default', LogLevel>>, SEVERITY_KEYS);
  for (const [component, level] of Object.entries(given)) {
    if (level !== undefined && !isLevel(level)) {
      throw new InvalidOptionError(`logging.componentSeverities.${component}`, level, `one of ${LOG_LEVELS.join(', ')}`);
    }
  }
  const envLevel = (name: string): LogLevel | undefined => {
    const value = env[name]?.toLowerCase();
    return isLevel(value) ? value : undefined;
  };
  const severities = {} as Record<LogComponent, LogLevel>;
  for (const component of LOG_COMPONENTS) {
    severities[component] = given[component] ?? envLevel(ENV_OF[component]) ?? given.default ?? envLevel('MONGODB_LOG_ALL') ?? 'off';
  }

  if (maxDocumentLength !== undefined && !(Number.isSafeInteger(maxDocumentLength) && maxDocumentLength >= 0)) {
    throw new InvalidOptionError('logging.maxDocumentLength', maxDocumentLength, 'an integer >= 0');
  }
  const envLength = env.MONGODB_LOG_MAX_DOCUMENT_LENGTH;
  const parsedLength = envLength !== undefined && /^\d+$/.test(envLength.trim()) ? Number(envLength) : undefined;

  const sinkShape = '"stderr", "stdout", a file path, or a sink object with a write(message) function';
  if (path !== undefined) {
    if (typeof path === 'string' ? path.trim() === '' : !isSink(path)) throw new InvalidOptionError('logging.path', path, sinkShape);
  }
  const envPath = env.MONGODB_LOG_PATH?.trim();
  return Object.freeze({
    severities: Object.freeze(severities),
    path: path ?? (envPath ? envPath : 'stderr'),
    maxDocumentLength: maxDocumentLength ?? parsedLength ?? DEFAULT_MAX_DOCUMENT_LENGTH,
  });
}

/** Whether messages of `level` are emitted for a component set to `threshold`. */
export function willLog(threshold: LogLevel, level: LogLevel): boolean {
  return threshold !== 'off' && LOG_LEVELS.indexOf(level) <= LOG_LEVELS.indexOf(threshold);
}

function isSink(value: unknown): value is LogSink {
  if (typeof value !== 'object' || value === null) return false;
  const sink = value as Partial<LogSink>;
  const write = optionValue(sink, 'write');
  const close = optionValue(sink, 'close');
  return typeof write === 'function' && (close === undefined || typeof close === 'function');
}

function isLevel(value: unknown): value is LogLevel {
  return typeof value === 'string' && (LOG_LEVELS as readonly string[]).includes(value);
}
