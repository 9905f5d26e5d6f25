/**
 * The errors rxcmap throws or emits. Every one extends {@link CmapError}, so `err instanceof CmapError` tells a
 * pool error from anything else, and `err.name` is the class name (the CMAP test format matches on it), written as
 * a literal so that it stays when a minifying bundler renames the classes.
 *
 * Source: CMAP spec, "Connection Pool Errors".
 */

/**
 * Error labels used by the pool, verbatim from the specifications: a frozen object whose keys equal their values.
 *
 * Source: CMAP spec, "Connection Pool Errors" and "Backpressure-enabled"; retryable writes spec.
 */
export const ErrorLabel = Object.freeze({
  /** The operation may be retried (CMAP: PoolClearedError "extends RetryableError"). */
  RetryableError: 'RetryableError',
  /** A write that failed with this error may be retried (retryable-writes spec). */
  RetryableWriteError: 'RetryableWriteError',
  /** The server may be overloaded; SDAM must not clear the pool for it (CMAP "Backpressure-enabled"). */
  SystemOverloadedError: 'SystemOverloadedError',
} as const);

/**
 * rxcmap's own error classes, each with its name written as a literal (each class adds itself): a minifying bundler
 * renames the classes (esbuild wrote `class jc` for WaitQueueTimeoutError, terser an anonymous class), never these
 * names. A class of user code (a subclass of any of them) is not here, and takes its class's own name.
 */
const OWN_ERROR_NAMES = new Map<Function, string>();

/**
 * Base class of every error rxcmap raises.
 *
 * - `name`: the concrete class name, e.g. `"PoolClosedError"`: written as a literal for rxcmap's own classes (it
 *   stays when a minifying bundler renames them), the class's own `name` for a subclass of user code.
 * - `errorLabels`: the MongoDB error labels attached to this error (see {@link ErrorLabel}).
 * - `cause`: the underlying error, when there is one.
 *
 * Source: CMAP spec, "Connection Pool Errors" ("Errors SHOULD be created and dispatched in a manner idiomatic to the
 * Driver and Language"); error labels: the MongoDB drivers' `errorLabels` (a server reply's `errorLabels`).
 */
export class CmapError extends Error {
  static {
    OWN_ERROR_NAMES.set(this, 'CmapError');
  }
  /**
   * The MongoDB error labels of this error (see {@link ErrorLabel}), a mutable Set: the connection factory adds the
   * backpressure labels to establishment errors. Empty when there are none.
   */
  readonly errorLabels: Set<string>;
  /**
   * Load-balanced mode: the service (its `serviceId`, a 24-character hex string) that the connection which failed had
   * reached, set by the connection factory on an establishment error raised after the handshake (during
   * authentication, say); the pool then clears that service only. Undefined otherwise.
   */
  serviceId: string | undefined = undefined;

  constructor(message: string, options?: { cause?: unknown; labels?: readonly string[] }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = OWN_ERROR_NAMES.get(new.target) ?? new.target.name;
    this.errorLabels = new ErrorLabels(options?.labels ?? []);
  }

  /** True when this error carries `label` (e.g. `"RetryableError"`). */
  hasErrorLabel(label: string): boolean {
    return this.errorLabels.has(label);
  }

  /**
   * The JSON form, which `JSON.stringify` writes: `name`, `message`, then every enumerable field of the error
   * (`errorLabels` as an array of strings, `address`, `code`, `pool`, ...), then `cause`: an rxcmap error's JSON
   * form, any other Error as `{ name, message, code }` (a `code` it has), any other value in words. The chain stops
   * after 8 causes, and at a cause met before; an rxcmap error met again in a field (inside an object or array
   * included), or beyond the first 9 written, is written as its name or as `{ name, message }`; a field whose getter
   * throws is left out. A plain object of strings, numbers, booleans, arrays and objects. Never throws.
   *
   * This is what to send to a worker (`postMessage`) or keep with `structuredClone`: those keep only an Error's message,
   * stack and `cause` (each a plain Error: its `name` becomes `"Error"`, its fields are dropped), so the error itself
   * does not travel as one.
   *
   * Source: extension (what loggers and workers receive of an error; CMAP "Connection Pool Errors": errors
   * idiomatic to the language).
   */
  toJSON(): Record<string, unknown> {
    // Called again from inside a field's object (JSON.stringify of `{ error }` calls this error's toJSON()): the same
    // serialization goes on, with the errors it has written so far.
    if (writing !== undefined) {
      return writing.has(this) || writing.size > MAX_JSON_CAUSES ? { name: this.name, message: this.message } : errorJson(this, writing);
    }
    writing = new Set();
    try {
      return errorJson(this, writing);
    } finally {
      writing = undefined;
    }
  }
}

/** The errors the {@link CmapError.toJSON} in progress has written so far (undefined: none in progress). */
let writing: Set<unknown> | undefined;

/**
 * The labels of a {@link CmapError}: a Set whose JSON form is the array of its labels (a Set alone is written `{}`),
 * so a logger that writes an error's fields as JSON (pino's error serializer) keeps them.
 */
class ErrorLabels extends Set<string> {
  toJSON(): string[] {
    return [...this];
  }
}

/** How many causes {@link CmapError.toJSON} writes, at most. */
const MAX_JSON_CAUSES = 8;

/** The JSON form of `error` (see {@link CmapError.toJSON}); `seen`: the errors of the chain written so far. */
function errorJson(error: CmapError, seen: Set<unknown>): Record<string, unknown> {
  seen.add(error);
  const json: Record<string, unknown> = { name: error.name, message: error.message };
  for (const key of Object.keys(error)) {
    let value: unknown;
    try {
      value = (error as unknown as Record<string, unknown>)[key];
    } catch {
      continue; // a getter that throws: left out
    }
    json[key] = jsonValue(value, seen);
  }
  const cause = error.cause;
  if (cause === undefined || seen.has(cause) || seen.size > MAX_JSON_CAUSES) return json;
  if (isInstance(cause, CmapError)) {
    json.cause = errorJson(cause, seen);
  } else if (isError(cause)) {
    json.cause = foreignErrorJson(cause);
  } else {
    json.cause = inWords(cause);
  }
  return json;
}

/**
 * A field of an error as a JSON value: labels as an array, an Error as a cause is written, a function, bigint or
 * symbol in words, an object as its JSON form (one that has none, a cycle say, in words as `describeValue` writes it).
 */
function jsonValue(value: unknown, seen: Set<unknown>): unknown {
  if (value instanceof ErrorLabels) return value.toJSON();
  if (value === null || typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean' || value === undefined) return value;
  if (typeof value !== 'object') return describeValue(value);
  if (isInstance(value, CmapError)) return seen.has(value) || seen.size > MAX_JSON_CAUSES ? value.name : errorJson(value, seen);
  if (isError(value)) return foreignErrorJson(value);
  try {
    return JSON.parse(JSON.stringify(value)) as unknown;
  } catch {
    return describeValue(value);
  }
}

/** An Error not of rxcmap as JSON: its name, message (in words: no URI's credentials) and a string or number code. */
function foreignErrorJson(error: Error): Record<string, unknown> {
  let name: unknown;
  let code: unknown;
  try {
    name = error.name;
    code = (error as { code?: unknown }).code;
  } catch {
    // a getter that throws: left out
  }
  return {
    name: typeof name === 'string' ? name : 'Error',
    message: inWords(error),
    ...(typeof code === 'string' || typeof code === 'number' ? { code } : {}),
  };
}

/**
 * A pool, connection, logging or client option was given a value it does not allow, or an options object has a key
 * that is not an option (a misspelt name, say). Thrown synchronously by the constructor or function that received it.
 *
 * - `option`: the option's name, e.g. `"maxPoolSize"` (a nested one by its path, as `"logging.componentSeverities.connection"`).
 * - `value`: the value given, or a `<... not shown>` placeholder for a secret (a password, credentials).
 * - `allowed`: what the option accepts, in words.
 * - `suggestion`: for an unknown option, the known option it most likely meant (`"maxPoolSize"` for
 *   `"maxPoolsize"`), when one is close.
 *
 * The message names the option, shows the value (never a secret: see `redactOptionValue`) and says what is
 * allowed: `Invalid maxConnecting: -3 (maxConnecting must be an integer > 0)`, or for an unknown option
 * `Unknown option maxPoolsize of ConnectionPool: did you mean maxPoolSize?`.
 *
 * Source: CMAP spec, "Connection Pool Options" (each option's "If specified, MUST be ..."); unknown options and the
 * suggestion: extension (the MongoDB Node.js driver also rejects unknown client options).
 */
export class InvalidOptionError extends CmapError {
  static {
    OWN_ERROR_NAMES.set(this, 'InvalidOptionError');
  }
  /** The value given, or a `<... not shown>` placeholder in place of a secret (a password, credentials). */
  readonly value: unknown;
  /** For an unknown option: the known option it most likely meant, when one is close; otherwise undefined. */
  readonly suggestion: string | undefined;

  constructor(
    /** The option's name, e.g. `"maxPoolSize"` (a nested one by its path, as `"logging.componentSeverities.connection"`). */
    readonly option: string,
    value: unknown,
    /** What the option accepts, in words, e.g. `"an integer >= 0"`. */
    readonly allowed: string,
    details?: {
      /** The message in place of the default `Invalid <option>: <value> (<option> must be <allowed>)`. */
      message?: string;
      /** As {@link InvalidOptionError.suggestion}. */
      suggestion?: string;
      /** What was thrown as the value was looked at (a getter of it threw), as the error's `cause`. */
      cause?: unknown;
    },
  ) {
    const shown = redactOptionValue(option, value);
    // A placeholder, or the redacted description of an object, is shown as it is (not quoted as a string value).
    const asIs = typeof shown === 'string' && (PLACEHOLDER.test(shown) || (shown !== value && typeof value === 'object'));
    const text = asIs ? shown : describeValue(shown);
    const message = details?.message ?? `Invalid ${option}: ${text} (${option} must be ${allowed})`;
    super(message, details !== undefined && 'cause' in details ? { cause: details.cause } : undefined);
    this.value = shown;
    this.suggestion = details?.suggestion;
  }

  /**
   * The error for a key of an options object that is not an option of `owner`: the message names the key and, when
   * `suggestion` is given, the option it most likely meant, else lists the `known` options. Its `value` is shown only
   * when it is a number, a boolean, null or undefined (an unknown key may be a misspelt secret).
   *
   * @param option the unknown key, with its path when nested (`"connectionOptions.tlsCAfile"`).
   * @param value the value given for it.
   * @param owner what received the options, e.g. `"ConnectionPool"` or `"connect()"`.
   * @param known every option `owner` accepts at that level.
   * @param suggestion the closest known option, if one is close.
   */
  static unknownOption(
    option: string,
    value: unknown,
    owner: string,
    known: readonly string[],
    suggestion?: string,
  ): InvalidOptionError {
    const allowed =
      suggestion !== undefined ? `not set (did you mean ${suggestion}?)` : `one of the options of ${owner}: ${known.join(', ')}`;
    const hint = suggestion !== undefined ? `did you mean ${suggestion}?` : `the options are ${known.join(', ')}`;
    const plain = typeof value === 'number' || typeof value === 'boolean' || value == null;
    const shown = plain ? value : `<${typeof value} not shown>`;
    // A key that is not a plain name (empty, spaces, quotes) is quoted, so the message shows where it starts and ends.
    const name = /^[A-Za-z_$][\w$.-]*$/.test(option) ? option : JSON.stringify(option);
    const message = `Unknown option ${name} of ${owner}: ${hint}`;
    return new InvalidOptionError(option, shown, allowed, { message, suggestion });
  }

  /**
   * The error for an option whose value could not be read: a getter or a Proxy trap of the caller's object threw
   * `thrown`, which becomes the error's `cause` and is quoted in the message (`Invalid <option>: reading it threw
   * (...)`). No value is shown (none was read).
   *
   * @param option the option's name, with its path when nested.
   * @param thrown what reading it threw.
   * @param allowed what the option takes, in words; default "a value that can be read".
   */
  static unreadableOption(option: string, thrown: unknown, allowed = 'a value that can be read'): InvalidOptionError {
    return new InvalidOptionError(option, undefined, allowed, { message: `Invalid ${option}: reading it threw (${inWords(thrown)})`, cause: thrown });
  }
}

/** A value that stands for one not shown, e.g. `<not shown>` or `<connection string not shown>`. */
const PLACEHOLDER = /^<[^<>]* not shown>$/;

/** What names a secret anywhere in a name: `password`, `tlsCertificateKeyFilePassword`, `clientSecret`, `pwd`. */
const SECRET_PART = /password|passphrase|passwd|pwd|secret|credential/i;

/** What names a secret as a whole word of a name (`pass`, `dbPass`, `db_pass`, `sessionToken`), not inside one. */
const SECRET_WORDS = new Set(['pass', 'token', 'tokens', 'authorization']);

/** The words before `key` or `keys` that make it a secret (`apiKey`, `private_key`); `key` alone is an index's. */
const SECRET_KEY_KINDS = new Set(['api', 'private']);

/**
 * Where a name splits into words: at what is not a letter or digit, before a capital after a small letter or digit,
 * and before the capital that starts a word after a capitalised abbreviation (`APIToken`: `API`, `Token`).
 */
const WORD_BOUNDARY = /[^A-Za-z\d]+|(?<=[a-z\d])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])/;

/**
 * Whether an option or property name looks secret: it holds password, passphrase, passwd, pwd, secret or credential
 * (any case), has `pass`, `token(s)` or `authorization` as a word, or `key(s)` after `api` or `private`. Such a value
 * is never shown.
 */
function isSecretName(name: string): boolean {
  if (SECRET_PART.test(name)) return true;
  let previous = '';
  for (const part of name.split(WORD_BOUNDARY)) {
    const word = part.toLowerCase();
    if (SECRET_WORDS.has(word) || ((word === 'key' || word === 'keys') && SECRET_KEY_KINDS.has(previous))) return true;
    previous = word;
  }
  return false;
}

/**
 * The value of `option` as it may be shown and kept on an {@link InvalidOptionError}: a `<not shown>` placeholder
 * for the value of a secret option (a password, a passphrase, credentials) unless it is null or undefined; for an
 * object holding a secret property at any depth, its description with those properties shown as `<not shown>` (a
 * string); every other value as given.
 *
 * Source: extension (auth spec: drivers MUST NOT log credentials; the logging spec likewise).
 */
export function redactOptionValue(option: string, value: unknown): unknown {
  if (value == null) return value;
  if (isSecretName(option.split('.').pop() ?? option)) {
    return typeof value === 'string' && PLACEHOLDER.test(value) ? value : '<not shown>';
  }
  if (typeof value === 'string') return withoutUserinfo(value);
  return typeof value === 'object' && holdsSecret(value) ? withoutUserinfo(describeValue(value)) : value;
}

/** A character of a URI scheme (its first is a {@link LETTER}). */
const SCHEME_CHARACTER = /[a-z\d+.-]/i;
const LETTER = /[a-z]/i;

/**
 * The user information of a URI (`scheme://user:password@`), up to the last `@`, hidden: a connection string given
 * where another value belongs must not show its password (one with an unescaped `/` included).
 *
 * `text` with the user information of every URI in it replaced by `<credentials not shown>`: in each run of non-space
 * characters, from the first `scheme://` (a letter, then letters, digits, `+`, `.` or `-`) that an `@` follows, up to
 * the last `@`. In time linear in the length of `text` (a regular expression for this backtracks quadratically over a
 * long run of letters, and the values written are the user's, of any length).
 */
function withoutUserinfo(text: string): string {
  if (!text.includes('@') || !text.includes('://')) return text;
  return text.replace(/\S+/g, (run) => {
    const at = run.lastIndexOf('@');
    for (let slashes = run.indexOf('://'); slashes >= 0 && slashes + 3 <= at; slashes = run.indexOf('://', slashes + 3)) {
      // The scheme: the scheme characters just before `://`, from the first letter among them.
      let start = slashes;
      while (start > 0 && SCHEME_CHARACTER.test(run[start - 1])) start--;
      while (start < slashes && !LETTER.test(run[start])) start++;
      if (start < slashes) return `${run.slice(0, slashes + 3)}<credentials not shown>@${run.slice(at + 1)}`;
    }
    return run;
  });
}

/**
 * Whether `value` has a property whose name looks secret, with a value, or a string holding a URI with user
 * information, at any depth its JSON form reaches. An object that cannot be walked that way (a cycle, a throwing
 * `toJSON`) counts as holding one, so that it is only ever kept described, never as it is.
 */
function holdsSecret(value: object): boolean {
  let found = false;
  try {
    JSON.stringify(value, (key, v: unknown) => {
      if (key !== '' && v != null && isSecretName(key)) found = true;
      if (typeof v === 'string' && withoutUserinfo(v) !== v) found = true;
      return found ? undefined : typeof v === 'bigint' ? String(v) : v;
    });
  } catch {
    return true;
  }
  return found;
}

/**
 * What a pool held at one moment, as the errors of waiting checkouts report it ({@link WaitQueueTimeoutError.pool},
 * {@link PoolClearedError.pool}): the counts of a `PoolSnapshot`, and the checkout that had held its connection
 * longest. A frozen object; durations in ms.
 *
 * Source: extension (what users of every driver's pool ask when a checkout times out: who holds the connections).
 */
export interface PoolHoldings {
  /** Connections checked out. */
  readonly inUseConnectionCount: number;
  /**
   * Those connections by what their checkouts were for (`checkOut({ purpose })`): cursors, transactions, and every
   * other operation (the default); the three add up to inUseConnectionCount. Source: load balancer spec,
   * "Connection Tracking".
   */
  readonly inUseByPurpose: {
    /** Checked out for cursors (`purpose: 'cursor'`). */
    readonly cursor: number;
    /** Checked out for transactions (`purpose: 'transaction'`). */
    readonly transaction: number;
    /** Checked out for any other operation (`purpose: 'operation'`, or none given). */
    readonly operation: number;
  };
  /** Connections being established. */
  readonly pendingConnectionCount: number;
  /** Connections available (established, not checked out). */
  readonly availableConnectionCount: number;
  /** Checkouts waiting (in the WaitQueue, or for an establishment they claimed); for a timeout, this one included. */
  readonly waitQueueLength: number;
  /**
   * The checkout that has held its connection longest, when the pool timed it (it times checkouts while `events$` is
   * observed, waitQueueTimeoutMS is set, or leak detection is on); undefined when it was not timed (it was made while
   * nobody observed the pool), or when none is in use.
   */
  readonly oldestCheckOut:
    | {
        /** The connection's id (CMAP `connectionId`). */
        readonly connectionId: number;
        /** ms since it was checked out. */
        readonly duration: number;
        /** With leak detection on: the stack of the `checkOut` call that took it. */
        readonly checkOutStack: string | undefined;
      }
    | undefined;
}

/**
 * Thrown (as the Promise rejection or Observable error of `checkOut`) when the pool is closed, either before the
 * checkout started or while it was waiting. When the pool closed itself on a fault of its own, rather than by
 * `close()`, `cause` is that fault.
 *
 * Source: CMAP spec, "Connection Pool Errors" (PoolClosedError). The message is the one the CMAP test format expects.
 * Closing on a fault of the pool itself is an extension (a pool that fails closed: no checkout is left waiting).
 */
export class PoolClosedError extends CmapError {
  static {
    OWN_ERROR_NAMES.set(this, 'PoolClosedError');
  }
  constructor(
    /** The pool's Endpoint, `host:port`. */
    readonly address: string,
    /** Why the pool closed, when it was not `close()`: the fault of the pool itself that made it close (extension). */
    cause?: unknown,
  ) {
    super('Attempted to check out a connection from closed connection pool', cause === undefined ? undefined : { cause });
  }
}

/**
 * Thrown by `checkOut` when the pool is paused: it was cleared (and not yet marked ready again), or it was never
 * marked ready. Also the error of every request evicted from the WaitQueue by `clear()`, and of operations whose
 * connection was interrupted by `clear({ interruptInUseConnections: true })`. Retryable: it carries the
 * `RetryableError` and `RetryableWriteError` labels and never means the server is unknown.
 *
 * For a checkout that was waiting when the clear evicted it, `pool` says what the pool held at that moment (see
 * {@link PoolHoldings}); the message stays the spec's.
 *
 * Source: CMAP spec, "Connection Pool Errors" (PoolClearedError) and "Clearing a non-load balanced pool"; `pool`:
 * extension.
 */
export class PoolClearedError extends CmapError {
  static {
    OWN_ERROR_NAMES.set(this, 'PoolClearedError');
  }
  constructor(
    /** The pool's Endpoint, `host:port`. */
    readonly address: string,
    message: string,
    cause?: unknown,
    /** For a checkout evicted from the WaitQueue: what the pool held when the clear evicted it; else undefined. */
    readonly pool?: PoolHoldings,
  ) {
    super(message, { cause, labels: [ErrorLabel.RetryableError, ErrorLabel.RetryableWriteError] });
  }

  /**
   * The error for a checkout on a pool that was cleared because of `cause` (which may be absent); `pool`: what the
   * pool held, for checkouts the clear evicted from the WaitQueue.
   */
  static cleared(address: string, cause?: unknown, pool?: PoolHoldings): PoolClearedError {
    const because = cause === undefined ? 'an unspecified error' : inWords(cause);
    return new PoolClearedError(
      address,
      `Connection pool for ${address} was cleared because another operation failed with: ${because}`,
      cause,
      pool,
    );
  }

  /** The error for a checkout on a pool that has not been marked ready since it was created. */
  static notReady(address: string): PoolClearedError {
    return new PoolClearedError(address, `Connection pool for ${address} is paused: it has not been marked ready yet`);
  }

  /**
   * The error given to an operation whose in-use connection a clear interrupted. With no cause, or a network timeout
   * (a monitor's check timing out: the case the spec names), the message is the spec's; any other cause is quoted.
   */
  static interrupted(address: string, cause?: unknown): PoolClearedError {
    if (cause === undefined || cause instanceof MongoNetworkTimeoutError) {
      return new PoolClearedError(address, `Connection to ${address} interrupted due to server monitor timeout`, cause);
    }
    return new PoolClearedError(address, `Connection to ${address} interrupted by a pool clear because of: ${inWords(cause)}`, cause);
  }
}

/**
 * Whether `value` is an instance of `type`. Never throws: `instanceof` asks a Proxy for its prototype, which its
 * handler (or its revocation) may refuse; such a value counts as no instance. For values of user code (what a factory
 * failed with, an error to log).
 *
 * Source: extension.
 */
export function isInstance<T>(value: unknown, type: abstract new (...args: never[]) => T): value is T {
  try {
    return value instanceof type;
  } catch {
    return false;
  }
}

/** {@link isInstance} of Error: whether `value` is an Error, never throwing. Source: extension. */
export function isError(value: unknown): value is Error {
  return isInstance(value, Error);
}

/**
 * The error to fail with when what a caller supplied threw as it was set up (an AbortSignal refusing a listener, a
 * scheduler refusing a deadline): that Error, or, for any other value, an Error saying `what` refused, the value as its
 * `cause`. Never throws. Source: extension.
 */
export function refusal(what: string, thrown: unknown): Error {
  return isError(thrown) ? thrown : new Error(`${what}: ${inWords(thrown)}`, { cause: thrown });
}

/**
 * An error or any thrown value in words, for a message or a warning: an Error's message, else the value as `String()`
 * writes it. Never throws (the value comes from user code: a clear's cause, what a log sink or an option getter
 * threw, and the words are often written from inside the pool's processing): a value `String()` cannot convert (an
 * object without a prototype, one whose `toString` throws) is written as `describeValue` does (as JSON, secrets
 * hidden), else as "a value that cannot be written"; an Error whose message getter throws is said to be one. The user
 * information of any URI in the words (`mongodb://user:password@`) is shown as `<credentials not shown>`.
 *
 * Source: extension (messages that survive hostile user code; auth spec: drivers MUST NOT log credentials).
 */
export function inWords(value: unknown): string {
  let anError = false;
  let words: string;
  try {
    anError = value instanceof Error;
    words = anError ? String((value as Error).message) : String(value);
  } catch {
    if (anError) return 'an Error whose message cannot be written';
    try {
      words = describeValue(value);
    } catch {
      return 'a value that cannot be written';
    }
  }
  return withoutUserinfo(words);
}

/**
 * Thrown by `checkOut` when the request waited in the WaitQueue longer than `waitQueueTimeoutMS`. The time spent
 * establishing a connection the request already started is not counted.
 *
 * Also thrown when a checkout's own `timeoutMS` (`checkOut({ timeoutMS })`) elapsed, the time spent establishing a
 * connection it started included; `timeoutMS` is then set.
 *
 * `pool` says what the pool held when it timed out (see {@link PoolHoldings}: in use, pending, available, waiting,
 * and the checkout that had held its connection longest, with its `checkOut` stack when leak detection is on).
 * `util.inspect` (and so `console.error`) shows it; the message is the spec's, which the CMAP tests compare exactly.
 * In load-balanced mode, when the pool timed out, the message is the load balancer spec's detailed one instead:
 * "Timeout waiting for connection from the connection pool. maxPoolSize: 10, connections in use by cursors: 2,
 * connections in use by transactions: 1, connections in use by other operations: 7" (`maxPoolSize` set, and the
 * counts are `pool.inUseByPurpose`).
 *
 * Source: CMAP spec, "Connection Pool Errors" (WaitQueueTimeoutError) and "WaitQueue: Timeout aggressively"; the
 * load-balanced message: load balancer spec, "Connection Tracking"; `pool`: extension; `timeoutMS`: extension (the
 * client-side operations timeout spec: a checkout is bounded by the operation's remaining timeoutMS and fails with a
 * timeout error).
 */
export class WaitQueueTimeoutError extends CmapError {
  static {
    OWN_ERROR_NAMES.set(this, 'WaitQueueTimeoutError');
  }
  /** The checkout's own timeoutMS (ms) when that is what elapsed; undefined for the pool's waitQueueTimeoutMS. */
  readonly timeoutMS: number | undefined;
  /** In load-balanced mode, the pool's maxPoolSize (0: no limit), which the message gives; undefined otherwise. */
  readonly maxPoolSize: number | undefined;

  constructor(
    /** The pool's Endpoint, `host:port`. */
    readonly address: string,
    /** The limit that elapsed, in ms: the pool's waitQueueTimeoutMS, or the checkout's own timeoutMS. */
    readonly waitQueueTimeoutMS: number,
    /** What the pool held when the checkout timed out; undefined when the error was not made by a pool. */
    readonly pool?: PoolHoldings,
    details?: {
      /** The checkout's own timeoutMS, when that is what elapsed. */
      timeoutMS?: number;
      /** Load-balanced mode: the pool's maxPoolSize; with `pool`, the message is the load balancer spec's. */
      maxPoolSize?: number;
    },
  ) {
    const maxPoolSize = details?.maxPoolSize;
    super(
      maxPoolSize === undefined || pool === undefined
        ? 'Timed out while checking out a connection from connection pool'
        : 'Timeout waiting for connection from the connection pool. ' +
            `maxPoolSize: ${maxPoolSize}, connections in use by cursors: ${pool.inUseByPurpose.cursor}, ` +
            `connections in use by transactions: ${pool.inUseByPurpose.transaction}, ` +
            `connections in use by other operations: ${pool.inUseByPurpose.operation}`,
    );
    this.timeoutMS = details?.timeoutMS;
    this.maxPoolSize = maxPoolSize;
  }
}

/**
 * Thrown by `checkOut` when `maxWaitQueueSize` checkouts were already waiting: the checkout fails at once, without
 * waiting (ConnectionCheckOutFailed reason `waitQueueFull`). `pool` says what the pool held at that moment.
 *
 * Source: extension (reactor-pool's `maxPendingAcquire`, which fails an acquire beyond it at once).
 */
export class WaitQueueFullError extends CmapError {
  static {
    OWN_ERROR_NAMES.set(this, 'WaitQueueFullError');
  }
  constructor(
    /** The pool's Endpoint, `host:port`. */
    readonly address: string,
    /** The pool's maxWaitQueueSize. */
    readonly maxWaitQueueSize: number,
    /** What the pool held when the checkout was refused. */
    readonly pool?: PoolHoldings,
  ) {
    super(`Connection pool for ${address} refused a checkout: maxWaitQueueSize (${maxWaitQueueSize}) checkouts are already waiting`);
  }
}

/**
 * Thrown by `checkOut` when its `AbortSignal` aborts before a connection was delivered (or was already aborted when
 * the checkout started): the Promise rejects with it, and the Observable errors with it. `cause` is the signal's
 * reason. (Unsubscribing from the Observable form also cancels, and raises nothing.)
 *
 * Source: extension (cancellation through the Web `AbortSignal`); the checkout's ConnectionCheckOutFailed event
 * carries reason `cancelled`.
 */
export class CheckOutCancelledError extends CmapError {
  static {
    OWN_ERROR_NAMES.set(this, 'CheckOutCancelledError');
  }
  constructor(
    /** The pool's Endpoint, `host:port`. */
    readonly address: string,
    cause?: unknown,
  ) {
    super(`Checkout from connection pool for ${address} was cancelled before a connection was delivered`, { cause });
  }
}

/**
 * Thrown by `Connection.command()` and `Client.command()` when their `signal` aborts before the command settled (or
 * was already aborted when it was called), and by `Connection.nextReply()` and `Client.selectPool()` likewise: the
 * Promise rejects with it.
 * `cause` is the signal's reason, as for {@link CheckOutCancelledError} (which `Client.command()` rejects with when the
 * abort comes during its checkout).
 *
 * - `address`: the server, `host:port`; undefined when no server was selected yet (`Client.command()`,
 *   `Client.selectPool()`).
 * - `connectionId`: the connection the command was on; undefined before one was checked out.
 * - `commandName`: the command's name (its document's first key; '' when it has none); for `Connection.nextReply`, the
 *   exhaustAllowed command whose stream it reads; '' for `Client.selectPool()` (no command).
 * - `sent`: whether the command was written to the socket (wholly or in part) before the abort. When true the server
 *   may have run it, or may still be running it (a write may have been applied), and its reply was never read: the
 *   connection was closed, and its pool closes it with reason `error` once it is checked in (CMAP, "Connection": an
 *   errored connection is perished; "Checking In a Connection": a perished one is closed). When false the command did
 *   not run on the server (nothing of it was written, or the server refused it with ReauthenticationRequired), and the
 *   connection stays usable, unless the abort came during its MONGODB-OIDC reauthentication, which closes it (see
 *   `Connection.command`). For `streamedReply` see below.
 * - `streamedReply`: true when what was cancelled is `Connection.nextReply`, the read of a reply the server streams to
 *   the exhaustAllowed command `commandName`: that command was sent, and ran, before. `sent` true: the read was
 *   waiting, and the connection was closed (as above), since the stream's next reply will never be read; `sent`
 *   false: the signal was aborted already, nothing was read, and the connection is left as it was (still streaming).
 *   False for a command.
 *
 * `Client.selectPool()` rejects with it when its `signal` aborts before a server was selected, as `Client.command()`
 * does during its server selection: no `address` or `connectionId`, `commandName` '' (no command), `sent` false.
 *
 * Source: extension, the official Node.js driver's `signal` option (which rejects with the signal's reason itself
 * and closes the connection likewise); the word and the `cause` are those of {@link CheckOutCancelledError}.
 */
export class CommandCancelledError extends CmapError {
  static {
    OWN_ERROR_NAMES.set(this, 'CommandCancelledError');
  }
  constructor(
    /** The server, `host:port`; undefined when no server was selected yet. */
    readonly address: string | undefined,
    /** The connection the command was on; undefined before one was checked out. */
    readonly connectionId: number | undefined,
    /** The command's name (its document's first key). */
    readonly commandName: string,
    /** Whether any of the command was written to the socket before the abort (see the class). */
    readonly sent: boolean,
    cause?: unknown,
    /** Whether what was cancelled is `Connection.nextReply`, the read of a streamed reply (see the class). */
    readonly streamedReply: boolean = false,
  ) {
    const on = connectionId === undefined ? '' : ` on connection ${connectionId} to ${address}`;
    const when = streamedReply
      ? sent
        ? "while its next streamed reply was awaited: the stream's replies will not be read, and the connection is closed"
        : 'before its next streamed reply was read: nothing was read, and the connection is left as it was'
      : sent
        ? 'after it was sent, before its reply was read: the server may have run it, and the connection is closed'
        : connectionId === undefined
          ? 'before a server was selected'
          : 'before it was sent';
    super(`Command${commandName === '' ? '' : ` ${commandName}`}${on} was cancelled ${when}`, { cause });
  }
}

/**
 * Thrown synchronously by `checkIn` for a connection this pool did not create, one that is not checked out (already
 * checked in, or never delivered), or one already closed by the pool.
 *
 * - `connectionId`: the id of the offending connection, when it has one.
 *
 * Source: CMAP spec, "Checking In a Connection" ("MUST throw an Error if this is attempted").
 */
export class ConnectionCheckInError extends CmapError {
  static {
    OWN_ERROR_NAMES.set(this, 'ConnectionCheckInError');
  }
  constructor(
    /** The pool's Endpoint, `host:port`. */
    readonly address: string,
    /** The `id` of the connection given to `checkIn`; undefined when it has no numeric id. */
    readonly connectionId: number | undefined,
    reason: string,
  ) {
    super(`Cannot check in connection ${connectionId ?? '(no id)'} to connection pool for ${address}: ${reason}`);
  }
}

/** At most this many characters of a value are shown in a message. */
const MAX_SHOWN_VALUE = 200;

/**
 * A value in words for a message: strings quoted, numbers and the like as written, functions by name, objects as
 * JSON (cut to 200 characters) with every property whose name looks secret (password, credentials, ...) shown as
 * `<not shown>`.
 */
function describeValue(value: unknown): string {
  switch (typeof value) {
    case 'string':
      return cut(JSON.stringify(value));
    case 'number':
    case 'boolean':
    case 'undefined':
      return String(value);
    case 'bigint':
      return `${value}n`;
    case 'symbol':
      return value.toString();
    case 'function':
      return value.name ? `[function ${value.name}]` : '[function]';
  }
  if (value === null) return 'null';
  try {
    const json = JSON.stringify(value, (key, v: unknown) =>
      key !== '' && v != null && isSecretName(key)
        ? '<not shown>'
        : typeof v === 'function'
          ? `[function${v.name ? ` ${v.name}` : ''}]`
          : typeof v === 'bigint'
            ? `${v}n`
            : v,
    );
    if (json !== undefined) return cut(json);
  } catch {
    // a cycle, or a toJSON that throws: fall back to the kind of object
  }
  return Object.prototype.toString.call(value);
}

function cut(text: string): string {
  return text.length <= MAX_SHOWN_VALUE ? text : `${text.slice(0, MAX_SHOWN_VALUE)}...`;
}

/**
 * A network error on a connection: the socket failed or closed, a reply could not be parsed (wire-protocol error),
 * or the connection was destroyed while a request was in flight. The connection that raised it is errored: the pool
 * closes it with reason `error` when it is checked in. Raised by `Connection.command` and by the connection factory
 * (connect and TLS failures, which may carry the backpressure labels).
 *
 * Source: CMAP spec, "Connection" (Perishable, Errored: network error, endpoint closing the connection,
 * wire-protocol error); the name is the MongoDB Node.js driver's.
 */
export class MongoNetworkError extends CmapError {
  static {
    OWN_ERROR_NAMES.set(this, 'MongoNetworkError');
  }
  constructor(
    /** The Endpoint's `host:port`. */
    readonly address: string,
    message: string,
    options?: { cause?: unknown; labels?: readonly string[] },
  ) {
    super(message, options);
  }
}

/**
 * A network timeout: connecting took longer than `connectTimeoutMS`, or a reply took longer than
 * `socketTimeoutMS` (or the `timeoutMS` of that command). Like every {@link MongoNetworkError}, it leaves its
 * connection errored. A monitor check failing with it makes `heartbeatActions()` clear the pool with
 * `interruptInUseConnections`.
 *
 * Source: CMAP spec, "Connection" (Errored: network timeout) and "Clearing a non-load balanced pool"; server
 * monitoring spec, "Network or command error during server check"; the name is the MongoDB Node.js driver's.
 */
export class MongoNetworkTimeoutError extends MongoNetworkError {
  static {
    OWN_ERROR_NAMES.set(this, 'MongoNetworkTimeoutError');
  }
}

/**
 * The server answered a command with `ok: 0`. The message is the reply's `errmsg`, else the `$err` of a reply in the
 * legacy format (else `"command failed"`), and `errorLabels` holds the reply's `errorLabels`. The connection stays
 * usable. The reply itself (`response`) is kept out of the error's JSON and inspected forms.
 *
 * Source: the MongoDB server's command reply (`ok`, `errmsg`, `code`, `codeName`, `errorLabels`; `$err` in the legacy
 * reply format); the name, and the message read from `errmsg` or `$err`, are the MongoDB Node.js driver's.
 */
export class MongoServerError extends CmapError {
  static {
    OWN_ERROR_NAMES.set(this, 'MongoServerError');
  }
  /** The server's numeric error code (`code` in the reply), when it gave one. */
  readonly code: number | undefined;
  /** The server's error name (`codeName` in the reply), e.g. `"Unauthorized"`, when it gave one. */
  readonly codeName: string | undefined;
  /**
   * The whole reply document. Not enumerable: a reply may hold megabytes (an `errInfo`, say), so `JSON.stringify`,
   * `util.inspect` and loggers that write an error's enumerable fields (pino's error serializer) leave it out; read
   * it here, or in the log feed's `response` (truncated to the max document length).
   */
  declare readonly response: Readonly<Record<string, unknown>>;

  constructor(
    /** The whole reply document, kept as {@link MongoServerError.response}. */
    response: Readonly<Record<string, unknown>>,
  ) {
    const labels = Array.isArray(response.errorLabels) ? (response.errorLabels as string[]) : [];
    super(serverErrorMessage(response) ?? 'command failed', { labels });
    Object.defineProperty(this, 'response', { value: response, enumerable: false, writable: false, configurable: true });
    this.code = typeof response.code === 'number' ? response.code : undefined;
    this.codeName = typeof response.codeName === 'string' ? response.codeName : undefined;
  }
}

/**
 * What a failed reply says went wrong: its `errmsg`, else (none, or empty) the `$err` of a reply in the legacy
 * format, when that is a string; an empty `errmsg` when that is all; undefined when neither is a string.
 *
 * Source: the MongoDB server's command reply (`errmsg`; `$err` in the legacy reply format).
 */
export function serverErrorMessage(reply: Readonly<Record<string, unknown>>): string | undefined {
  if (typeof reply.errmsg === 'string' && reply.errmsg !== '') return reply.errmsg;
  if (typeof reply.$err === 'string') return reply.$err;
  return typeof reply.errmsg === 'string' ? reply.errmsg : undefined;
}

/**
 * Thrown by `Connection.command` (as its rejection) when a request is already in flight on that connection: a
 * connection carries one request at a time and never pipelines. The connection stays usable.
 *
 * Source: CMAP spec, "Connection" (Single Track).
 */
export class ConnectionBusyError extends CmapError {
  static {
    OWN_ERROR_NAMES.set(this, 'ConnectionBusyError');
  }
  constructor(
    /** The Endpoint's `host:port`. */
    readonly address: string,
    /** The pool-assigned id of the busy connection. */
    readonly connectionId: number,
  ) {
    super(`Connection ${connectionId} to ${address} already has a request in flight; it runs one request at a time`);
  }
}

/**
 * A callback the pool calls broke its contract, so the establishment it was part of failed: the `connectionFactory`
 * threw, returned something that is not an ObservableInput, or emitted something that is not the connection it was
 * asked for (an object with `destroy()` and the descriptor's `id`); or `clearOnEstablishmentError` threw or returned a
 * Promise (it decides at once). The checkout waiting on that establishment fails with this error
 * (ConnectionCheckOutFailed, reason `connectionError`); the pending slot is freed. `cause` is what the callback threw,
 * if it threw. A monitor's `connectionFactory` that fails with something that is not an Error gives this error as the
 * ServerHeartbeatFailed `error`.
 *
 * Source: extension (CMAP "Establishing a Connection": an establishment error fails the checkout and frees the slot).
 */
export class PoolCallbackError extends CmapError {
  static {
    OWN_ERROR_NAMES.set(this, 'PoolCallbackError');
  }
  constructor(
    /** The pool's Endpoint, `host:port`. */
    readonly address: string,
    /** The option that holds the callback. */
    readonly callback: 'connectionFactory' | 'clearOnEstablishmentError',
    message: string,
    options?: { cause?: unknown },
    /** For `clearOnEstablishmentError`: the establishment error it was asked about. */
    readonly establishmentError?: Error,
  ) {
    super(message, options);
  }
}

/**
 * Authentication failed while establishing a connection: the server rejected the credentials, the SCRAM
 * conversation was malformed, the server's signature did not verify, or its iteration count was below 4096 or above
 * 1,000,000 (refused before any key is derived); the password cannot be prepared with SASLprep (refused before
 * saslStart); or the server-first message has a mandatory extension (`m=`) or a salt that is not base64. The
 * message names the user, source and mechanism, never the password. `cause` is the server's error, when there is one.
 *
 * Source: auth spec, "Authentication Handshake", "SCRAM-SHA-1", "SCRAM-SHA-256".
 */
export class AuthenticationError extends CmapError {
  static {
    OWN_ERROR_NAMES.set(this, 'AuthenticationError');
  }
  constructor(message: string, cause?: unknown) {
    super(message, { cause });
  }
}

/**
 * The human workflow was asked to authenticate to a host its `ALLOWED_HOSTS` (default
 * `OIDC_DEFAULT_ALLOWED_HOSTS`) does not match; nothing was sent and no callback called. `host` names it.
 *
 * Source: auth spec, "MONGODB-OIDC" ("MongoCredential Properties": ALLOWED_HOSTS, a client-side error without invoking
 * any user-provided callbacks).
 */
export class OidcHostNotAllowedError extends AuthenticationError {
  static {
    OWN_ERROR_NAMES.set(this, 'OidcHostNotAllowedError');
  }
  /** The host refused (as connected to, without port). */
  readonly host: string;
  constructor(host: string) {
    super(`MONGODB-OIDC: the host "${host}" is not in ALLOWED_HOSTS: the human workflow's callback is not called for it (add it to ALLOWED_HOSTS in the credentials option to allow it)`);
    this.host = host;
  }
}

/**
 * The server cannot serve the requested mode: e.g. load-balanced mode against a server whose handshake reply has no
 * `serviceId`, or a declared Stable API version against a server that does not know the `hello` command (`cause`: the
 * server's CommandNotFound error).
 *
 * Source: load balancer spec, "Connection Establishment"; Stable API spec, "Handshake behavior".
 */
export class MongoCompatibilityError extends CmapError {
  static {
    OWN_ERROR_NAMES.set(this, 'MongoCompatibilityError');
  }
}

/**
 * The server's wire protocol version range does not overlap rxcmap's (`MIN_SUPPORTED_WIRE_VERSION` to
 * `MAX_SUPPORTED_WIRE_VERSION`): a server too old (its `maxWireVersion` below rxcmap's minimum) or too new (its
 * `minWireVersion` above rxcmap's maximum). Raised by the connection factory once the handshake reply is read (before
 * authentication, and the connection is closed); a pool's establishment fails with it, and clears the pool, a
 * monitor's check fails with it, and a client's server selection fails with it at once. Its message names the server,
 * the server's range and rxcmap's.
 *
 * Source: server discovery and monitoring spec, "Checking wire protocol compatibility" (the message); server
 * selection spec, "Server Selection Algorithm" ("If the topology wire version is invalid, raise an error").
 */
export class IncompatibleServerError extends MongoCompatibilityError {
  static {
    OWN_ERROR_NAMES.set(this, 'IncompatibleServerError');
  }
  constructor(
    /** The Endpoint's `host:port`. */
    readonly address: string,
    /** The server's `minWireVersion` (0 when its reply has none). */
    readonly minWireVersion: number,
    /** The server's `maxWireVersion` (0 when its reply has none). */
    readonly maxWireVersion: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * The client was closed: thrown by `command()` and `selectPool()` called after `close()`, and the rejection of every
 * server selection still waiting when `close()` was called (it settles at once, not at serverSelectionTimeoutMS), and
 * of every `command()` then waiting for its checkout or with its command in flight.
 *
 * Source: extension (a closed MongoDB client refuses operations; the driver's MongoClient does likewise).
 */
export class ClientClosedError extends CmapError {
  static {
    OWN_ERROR_NAMES.set(this, 'ClientClosedError');
  }
  constructor(
    /** Every host of the client, `host:port`, in URI order. */
    readonly hosts: readonly string[],
  ) {
    super(`The client of ${hosts.join(', ')} was closed`);
  }
}

/**
 * The monitor was closed while one of its checks was in progress: the `error` of the ServerHeartbeatFailed event that
 * `Monitor.close()` publishes for that check (a streaming wait for the server's next reply, a hello, or the
 * establishment of the monitoring connection), before heartbeats$ completes, so that every ServerHeartbeatStarted has
 * its Succeeded or Failed event. It says nothing of the server: `heartbeatActions()` maps it to no pool action (the
 * pool is neither cleared nor marked); a client publishes it as its monitors are closed, when no command can select a
 * server any more.
 *
 * Source: server discovery and monitoring logging and monitoring spec, "Guarantees", "Heartbeats" ("every
 * ServerHeartbeatStartedEvent has either a correlating ServerHeartbeatSucceededEvent or ServerHeartbeatFailedEvent");
 * the error class: extension.
 */
export class MonitorClosedError extends CmapError {
  static {
    OWN_ERROR_NAMES.set(this, 'MonitorClosedError');
  }
  constructor(
    /** The monitored server, `host:port`. */
    readonly address: string,
  ) {
    super(`The monitor of ${address} was closed while its check was in progress`);
  }
}

/**
 * No server became suitable (see `Client.selectPool`: for the operation's read preference, its pool ready) within
 * serverSelectionTimeoutMS, or within an operation's shorter `timeoutMS` (then set on the error). `cause` is the last
 * heartbeat error, when there is one; `topologyDescription` the client's topology description as the wait ended
 * (when it had one; not in the message, which the server selection log's failed message carries beside the
 * description it gives), which says why no server was suitable (`{"type":"ReplicaSetNoPrimary","servers":[...]}`: no
 * primary among the members; a host `Unknown`: its last check failed, or an error of one of its connections came since).
 *
 * Source: server selection spec, "Server Selection Errors" (a useful message from the server descriptions: the message
 * names the read preference, `topologyDescription` gives the descriptions); server monitoring spec (application
 * operations wait for a suitable server); client-side operations timeout spec (server selection waits at most the
 * smaller of serverSelectionTimeoutMS and timeoutMS).
 */
export class ServerSelectionError extends CmapError {
  static {
    OWN_ERROR_NAMES.set(this, 'ServerSelectionError');
  }
  constructor(
    /**
     * Every host of the client, `host:port`, in its order (see `Client.hosts`); empty when server discovery removed
     * every one (a standalone among several seeds, members of another set): the selection then failed at once, as no
     * server can come back to such a topology.
     */
    readonly hosts: readonly string[],
    /** The client's serverSelectionTimeoutMS, in ms: how long it waited unless `timeoutMS` is set. */
    readonly serverSelectionTimeoutMS: number,
    cause?: unknown,
    /** The operation's timeoutMS, in ms, when it was shorter than serverSelectionTimeoutMS and ended the wait. */
    readonly timeoutMS?: number,
    /** The client's topology description as JSON (see the topology log's descriptions), as the wait ended. */
    readonly topologyDescription?: string,
    /**
     * The operation's read preference in words (see `describeReadPreference`: `primary`, `secondary`, or its
     * `$readPreference` document as JSON when it has tags or a maxStalenessSeconds).
     */
    readonly readPreference = 'primary',
  ) {
    super(selectionFailureText({ hosts, serverSelectionTimeoutMS, cause, timeoutMS, readPreference }), { cause });
  }
}

/**
 * The text of a {@link ServerSelectionError} made of `parts`, e.g. `No suitable server of a:27017, b:27017 (read
 * preference primary) within serverSelectionTimeoutMS=30000 ms; last check failed with: connect ECONNREFUSED`. With
 * `logged` (the `failure` of a "Server selection failed" log message, whose `topologyDescription`, `selector` and
 * `cause` keys hold them) the hosts, the read preference and the last check's error are left out: `No suitable server
 * within serverSelectionTimeoutMS=30000 ms`. Never throws for parts of the types given (a `cause` whose `message`
 * cannot be read aside).
 *
 * Source: server selection spec, "Server Selection Errors" (a useful message: the read preference named), "Logging"
 * ("Server selection failed" `failure`: "MUST take care to not include any information in this field that is already
 * included in the log message").
 */
export function selectionFailureText(
  parts: {
    readonly hosts: readonly string[];
    readonly serverSelectionTimeoutMS: number;
    readonly cause?: unknown;
    readonly timeoutMS?: number | undefined;
    readonly readPreference: string;
  },
  logged = false,
): string {
  const preference = logged ? '' : ` (read preference ${parts.readPreference})`;
  const within = parts.timeoutMS === undefined ? `serverSelectionTimeoutMS=${parts.serverSelectionTimeoutMS} ms` : `the operation's timeoutMS=${parts.timeoutMS} ms`;
  const hosts = logged ? '' : ` of ${parts.hosts.join(', ')}`;
  const last = !logged && parts.cause instanceof Error ? `; last check failed with: ${parts.cause.message}` : '';
  return (parts.hosts.length === 0 ? `No suitable server: the topology has no server left${preference}` : `No suitable server${hosts}${preference} within ${within}`) + last;
}

/**
 * The seedlist of a `mongodb+srv://` connection string could not be discovered or used: the SRV query of
 * `_{srvServiceName}._tcp.{hostname}` failed (a DNS error, no such name, no SRV record, the deadline passed), an SRV
 * target is not in the parent domain of `hostname`, there is more than one TXT record, or a TXT record holds an option
 * other than authSource, replicaSet and loadBalanced or one without `=` and value; or the options the TXT record and the
 * URI give together with the hosts found are an impossible combination (loadBalanced=true with several hosts,
 * srvMaxHosts with replicaSet or loadBalanced=true; `cause` is then that InvalidOptionError). The rejection of every
 * `command()` and `selectPool()` waiting for the resolution when it failed; the next one resolves again. The message
 * names the host name and the reason, never the credentials of the connection string.
 *
 * Source: initial DNS seedlist discovery spec, "Querying DNS" ("an error MUST be raised indicating that the URI could
 * not be used to find hostnames. The error SHALL include the reason"), "Default Connection String Options", "URI
 * Validation" (the validation after the SRV and TXT lookup, erroring during operation execution).
 */
export class SrvResolutionError extends CmapError {
  static {
    OWN_ERROR_NAMES.set(this, 'SrvResolutionError');
  }
  constructor(
    /** The host name of the `mongodb+srv://` connection string, as written there. */
    readonly hostname: string,
    /** Why, in words (e.g. `"no SRV record for _mongodb._tcp.cluster0.example.net (ENOTFOUND)"`). */
    readonly reason: string,
    cause?: unknown,
  ) {
    super(`The hosts of mongodb+srv://${hostname} could not be found: ${reason}`, cause === undefined ? undefined : { cause });
  }
}

/**
 * Thrown by the framer and the decoders for bytes that are not a valid message, or a message beyond a limit
 * (maxMessageSizeBytes, the negotiated compressors); the message says what is wrong, and names the limit and what is
 * allowed. A `Connection` turns such a reply into a `MongoNetworkError` whose `cause` it is.
 *
 * Also what `Connection.command` rejects with, as it is, for a reply with `ok: 1` that is whole but holds a value that
 * cannot be read as JavaScript (a document stored so: a string that is not valid UTF-8, a regular expression `RegExp`
 * refuses): the reply cannot be returned, and the connection stays usable.
 *
 * Also thrown by `encodeOpMsg` for a command that cannot be sent: larger than maxBsonObjectSize + 16 KiB or
 * maxMessageSizeBytes, or not encodable as BSON. `Connection.command` rejects with it as it is: nothing was sent,
 * and the connection stays usable.
 *
 * Source: CMAP spec, "Connection" (Errored: wire-protocol error); OP_MSG spec ("Each OP_MSG MUST NOT exceed the
 * maxMessageSizeBytes"); handshake spec (`maxBsonObjectSize`).
 */
export class WireProtocolError extends CmapError {
  static {
    OWN_ERROR_NAMES.set(this, 'WireProtocolError');
  }
}

