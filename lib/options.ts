/**
 * ConnectionPoolOptions: the CMAP pool options, their defaults, and their validation.
 *
 * Source: CMAP spec, "Connection Pool Options"; the CMAP test format for `backgroundThreadIntervalMS`.
 */
import { InvalidOptionError, inWords } from './errors';
import { MAX_TIMER_DELAY_MS } from './scheduler';

/**
 * The options of one connection pool. All durations are in milliseconds.
 *
 * Source: CMAP spec, "Connection Pool Options".
 */
export interface PoolOptions {
  /**
   * The maximum number of connections (pending + available + in use) the pool may hold at once.
   * An integer >= 0; 0 means no limit. Default 100.
   */
  maxPoolSize?: number | undefined;
  /**
   * The number of connections the pool keeps established while it is ready, populated in the background.
   * An integer >= 0, and <= maxPoolSize when maxPoolSize > 0. Default 0.
   */
  minPoolSize?: number | undefined;
  /**
   * How long (ms) a connection may stay available (unused) before it is idle and closed. A number >= 0; 0 means
   * never. Default 0.
   */
  maxIdleTimeMS?: number | undefined;
  /**
   * The maximum number of connections the pool establishes concurrently (from ConnectionCreated to
   * ConnectionReady). An integer > 0. Default 2.
   */
  maxConnecting?: number | undefined;
  /**
   * How long (ms) a checkout may wait in the WaitQueue for an available connection or a free establishment slot.
   * Time spent establishing a connection the checkout already started is not counted. A number >= 0; 0 means no
   * limit. Default 0.
   */
  waitQueueTimeoutMS?: number | undefined;
}

/**
 * Pool options beyond CMAP: opt-in, each off by default, and every CMAP behaviour is as the spec says while they are.
 * Durations in milliseconds.
 *
 * Source: extension (each option names where its idea comes from).
 */
export interface PoolExtensionOptions {
  /**
   * Leak detection: a connection checked out for longer than this many ms produces one ConnectionLeakSuspected event
   * (and a `warn` log message) naming the connection, how long it has been held and the stack of the `checkOut` call
   * that took it; checking it in afterwards produces ConnectionLeakSuspectCheckedIn (an `info` log message). The
   * stacks are captured only while this is on (a few µs per checkout). A number >= 0; 0 turns it off. Default 0.
   *
   * Source: extension (HikariCP's `leakDetectionThreshold`).
   */
  leakDetectionThresholdMS?: number | undefined;
  /**
   * A bounded WaitQueue: a checkout that would wait while this many already wait fails at once with
   * WaitQueueFullError (ConnectionCheckOutFailed reason `waitQueueFull`). Counts the WaitQueue proper: checkouts
   * waiting for a connection or an establishment slot (not those waiting on an establishment they started, at most
   * one per pending connection), so `snapshot().waitQueueLength`, which counts those too, can exceed it. An
   * integer >= 0; 0 means unbounded. Default 0.
   *
   * Source: extension (reactor-pool's `maxPendingAcquire`; Go's database/sql and HikariCP bound waiting callers by
   * time only).
   */
  maxWaitQueueSize?: number | undefined;
  /**
   * Connection lifetime: a connection older than its own lifetime (maxLifeTimeMS minus its share of
   * maxLifeTimeJitterMS, measured from ConnectionCreated) is perished: closed (reason `expired`) when met available
   * (a checkout, a Background Thread Run) or when checked in, never handed out again; minPoolSize refills the pool.
   * One whose establishment outlasted its lifetime goes, once, to the checkout that waited for it (and is closed
   * when checked in), or is closed as it becomes ready when nothing waits for it: a lifetime shorter than an
   * establishment costs a connection per checkout, never a checkout. In ms, a number >= 0; 0 means no limit. Default 0.
   *
   * Source: extension (HikariCP's `maxLifetime`, reactor-pool's `maxLifeTime`, the Java driver's
   * `maxConnectionLifeTime`): connections are renewed before a load balancer, firewall or server cuts them.
   */
  maxLifeTimeMS?: number | undefined;
  /**
   * How much earlier than maxLifeTimeMS each connection may expire (ms): connection n expires
   * maxLifeTimeJitterMS × frac(n × φ) earlier (φ the golden ratio), which spreads the expiries of connections made
   * together evenly over the window instead of closing them at the same instant. A Background Thread Run closes at
   * most maxConnecting expired connections, so the pool is renewed a few connections at a time. A number >= 0, and
   * <= maxLifeTimeMS when that is set (without a lifetime it is unused). Default: 2.5% of maxLifeTimeMS.
   *
   * Source: extension (HikariCP subtracts up to 2.5% from each connection's maxLifetime; reactor-pool's variance).
   */
  maxLifeTimeJitterMS?: number | undefined;
}

/**
 * Options that are not pool options in the CMAP sense but shape the pool's background work.
 *
 * Source: CMAP test format, `poolOptions.backgroundThreadIntervalMS`; CMAP spec, "Background Thread".
 */
export interface BackgroundOptions {
  /**
   * The time (ms) between the end of one background run and the start of the next. A run closes perished available
   * connections and populates the pool to minPoolSize. A positive number, or a negative number for "never run"
   * (0 is not allowed). Default 1000.
   *
   * Source: CMAP test format, `poolOptions.backgroundThreadIntervalMS`; CMAP spec, "Background Thread".
   */
  backgroundThreadIntervalMS?: number | undefined;
}

/**
 * The option names of {@link PoolOptions}, in the order the CMAP spec lists them (a readonly tuple).
 *
 * Source: CMAP spec, "Connection Pool Options".
 */
export const POOL_OPTION_NAMES = [
  'maxPoolSize',
  'minPoolSize',
  'maxIdleTimeMS',
  'maxConnecting',
  'waitQueueTimeoutMS',
] as const satisfies readonly (keyof PoolOptions)[];

/**
 * The option names of {@link PoolExtensionOptions} (a readonly tuple).
 *
 * Source: extension (see each option).
 */
export const POOL_EXTENSION_OPTION_NAMES = [
  'leakDetectionThresholdMS',
  'maxWaitQueueSize',
  'maxLifeTimeMS',
  'maxLifeTimeJitterMS',
] as const satisfies readonly (keyof PoolExtensionOptions)[];

/**
 * The option names of {@link BackgroundOptions} (a readonly tuple).
 *
 * Source: CMAP test format, `poolOptions.backgroundThreadIntervalMS`.
 */
export const BACKGROUND_OPTION_NAMES = [
  'backgroundThreadIntervalMS',
] as const satisfies readonly (keyof BackgroundOptions)[];

/**
 * Every option name of `ConnectionPoolCoreOptions` (a readonly tuple): the {@link POOL_OPTION_NAMES}, the
 * {@link POOL_EXTENSION_OPTION_NAMES}, the {@link BACKGROUND_OPTION_NAMES}, then `address`, `connectionFactory`, `scheduler`, `clearOnEstablishmentError` and
 * `loadBalanced`. `ConnectionPool` checks at compile time that it lists every key of `ConnectionPoolCoreOptions`.
 *
 * Source: CMAP spec, "Connection Pool Options", "Establishing a Connection"; load balancer spec; `scheduler`,
 * `clearOnEstablishmentError`: extension (see `ConnectionPoolCoreOptions`).
 */
export const POOL_CORE_OPTION_NAMES = [
  ...POOL_OPTION_NAMES,
  ...POOL_EXTENSION_OPTION_NAMES,
  ...BACKGROUND_OPTION_NAMES,
  'address',
  'connectionFactory',
  'scheduler',
  'clearOnEstablishmentError',
  'loadBalanced',
] as const;

/**
 * A compile-time check that the option-name list `Names` holds every key of the options type `T`: `true` when it
 * does, else an object type naming the keys it misses. Used as `true satisfies ListsEveryOption<T, typeof NAMES>`,
 * next to `NAMES satisfies readonly (keyof T)[]` (which checks that it holds nothing else).
 *
 * Source: extension (keeps each front end's known-option list in step with its options type).
 */
export type ListsEveryOption<T, Names extends readonly PropertyKey[]> =
  [Exclude<keyof T, Names[number]>] extends [never] ? true : { missingOptionNames: Exclude<keyof T, Names[number]> };

true satisfies ListsEveryOption<PoolOptions, typeof POOL_OPTION_NAMES>;
true satisfies ListsEveryOption<BackgroundOptions, typeof BACKGROUND_OPTION_NAMES>;
true satisfies ListsEveryOption<PoolExtensionOptions, typeof POOL_EXTENSION_OPTION_NAMES>;

/** The built-in prototypes a value found only on counts as absent (see {@link optionValue}). */
const BUILT_IN_PROTOTYPES: readonly object[] = [Object.prototype, Function.prototype, Array.prototype];

/**
 * Option `name` of the user-supplied `options` (undefined when no options object was given), read once as a
 * property: a value of the object itself or of a prototype in its chain (a getter of a class, a value inherited from
 * the caller's own prototype object) counts; one found only on `Object.prototype`, `Function.prototype` or
 * `Array.prototype` is treated as absent (undefined). Every read of an options object an application passes goes
 * through it, so a property another part of the application put on `Object.prototype` (prototype pollution, say
 * `Object.prototype.tlsAllowInvalidCertificates = true`) never changes how a pool, a client or a connection behaves.
 *
 * Costs one property read when the value is absent, and a property read plus an own-property check when it is the
 * object's own; only an inherited value walks the prototype chain.
 *
 * @returns the value, or undefined when it is absent or found only on a built-in prototype.
 * @throws whatever reading the property throws (a getter, a Proxy trap): callers that name the option wrap it.
 *
 * Source: extension (hardening against prototype pollution; the MongoDB Node.js driver reads client options by
 * their own keys).
 */
export function optionValue<T extends object, K extends keyof T>(options: T | undefined, name: K): T[K] | undefined {
  if (options === undefined) return undefined;
  const value = options[name];
  if (value === undefined || Object.prototype.hasOwnProperty.call(options, name)) return value;
  return inheritedFromBuiltIn(options, name) ? undefined : value;
}

/**
 * The options `names` of the user-supplied `options`, each read once with {@link optionValue}, as a new object
 * without a prototype holding only those found (so reading any property of it, later or in code it is passed to,
 * cannot reach `Object.prototype`).
 *
 * Source: extension (hardening against prototype pollution; see {@link optionValue}).
 */
export function optionValues<T extends object, K extends keyof T>(options: T, names: readonly K[]): Partial<Pick<T, K>> {
  const out = Object.create(null) as Partial<Pick<T, K>>;
  for (const name of names) {
    const value = optionValue(options, name);
    if (value !== undefined) out[name] = value;
  }
  return out;
}

/** Whether the object that holds `name` for `options` (walking its prototype chain) is a built-in prototype. */
function inheritedFromBuiltIn(options: object, name: PropertyKey): boolean {
  for (let o: object | null = options; o !== null; o = Object.getPrototypeOf(o) as object | null) {
    if (Object.prototype.hasOwnProperty.call(o, name)) return BUILT_IN_PROTOTYPES.includes(o);
  }
  return false;
}

/** Every pool option a pool resolves: CMAP's, the extensions', the background run's. */
type AllPoolOptions = PoolOptions & PoolExtensionOptions & BackgroundOptions;

/**
 * The defaults of {@link PoolOptions}, {@link PoolExtensionOptions} and {@link BackgroundOptions} (a frozen object;
 * durations in ms).
 *
 * Source: CMAP spec, "Connection Pool Options" (each option's "Defaults to"); `backgroundThreadIntervalMS`:
 * extension (the spec leaves the interval between Background Thread Runs unspecified); the extensions: off.
 */
export const DEFAULT_POOL_OPTIONS: Readonly<Required<PoolOptions & PoolExtensionOptions & BackgroundOptions>> = Object.freeze({
  maxPoolSize: 100,
  minPoolSize: 0,
  maxIdleTimeMS: 0,
  maxConnecting: 2,
  waitQueueTimeoutMS: 0,
  leakDetectionThresholdMS: 0,
  maxWaitQueueSize: 0,
  maxLifeTimeMS: 0,
  maxLifeTimeJitterMS: 0,
  backgroundThreadIntervalMS: 1000,
});

/**
 * Pool options with every default applied and every value validated (frozen; durations in ms), as a pool's
 * `options`.
 *
 * Source: CMAP spec, "Connection Pool Options"; `userSet`: CMAP spec, "Events" (PoolCreatedEvent.options: "Any
 * non-default pool options that were set").
 */
export interface ResolvedPoolOptions extends Readonly<Required<PoolOptions & PoolExtensionOptions & BackgroundOptions>> {
  /** The pool options (CMAP's and the extensions') the caller set explicitly (what ConnectionPoolCreated reports). */
  readonly userSet: Readonly<PoolOptions & PoolExtensionOptions>;
}

/**
 * Applies defaults to `options` and validates every value. Each option is read once, as a property (an inherited
 * one, such as a getter of a class, counts as given; one found only on `Object.prototype` does not, see
 * {@link optionValue}), so the value checked, the value used and the value reported in `userSet` are the same.
 *
 * @throws {InvalidOptionError} naming the option, the value and what is allowed, for: a maxPoolSize or minPoolSize
 *   that is not an integer >= 0; a maxConnecting that is not an integer > 0; a maxIdleTimeMS or waitQueueTimeoutMS
 *   that is not a finite number >= 0; a minPoolSize above a non-zero maxPoolSize; a backgroundThreadIntervalMS that
 *   is 0 or not a finite number; an option whose getter throws (the error names it and quotes what was thrown).
 */
export function resolvePoolOptions(options: AllPoolOptions = {}): ResolvedPoolOptions {
  const given: AllPoolOptions = {};
  const userSet: PoolOptions & PoolExtensionOptions = {};
  for (const name of ALL_POOL_OPTION_NAMES) {
    const value = readOption(options, name);
    if (value === undefined) continue;
    given[name] = value;
    if (name !== 'backgroundThreadIntervalMS') userSet[name] = value;
  }
  const resolved = { ...DEFAULT_POOL_OPTIONS, ...given };

  requireInteger('maxPoolSize', resolved.maxPoolSize, 0, 'an integer >= 0 (0 means no limit)');
  requireInteger('minPoolSize', resolved.minPoolSize, 0, 'an integer >= 0');
  requireInteger('maxConnecting', resolved.maxConnecting, 1, 'an integer > 0');
  requireDurationMS('maxIdleTimeMS', resolved.maxIdleTimeMS);
  requireDurationMS('waitQueueTimeoutMS', resolved.waitQueueTimeoutMS);
  requireDurationMS('leakDetectionThresholdMS', resolved.leakDetectionThresholdMS, 'a number of ms >= 0 (0 turns leak detection off)');
  requireInteger('maxWaitQueueSize', resolved.maxWaitQueueSize, 0, 'an integer >= 0 (0 means unbounded)');
  requireDurationMS('maxLifeTimeMS', resolved.maxLifeTimeMS);
  if (given.maxLifeTimeJitterMS === undefined) resolved.maxLifeTimeJitterMS = Math.round(resolved.maxLifeTimeMS * 0.025);
  requireDurationMS('maxLifeTimeJitterMS', resolved.maxLifeTimeJitterMS, 'a number of ms >= 0');
  if (resolved.maxLifeTimeMS > 0 && resolved.maxLifeTimeJitterMS > resolved.maxLifeTimeMS) {
    throw new InvalidOptionError('maxLifeTimeJitterMS', resolved.maxLifeTimeJitterMS, `<= maxLifeTimeMS (${resolved.maxLifeTimeMS})`);
  }
  if (resolved.maxPoolSize > 0 && resolved.minPoolSize > resolved.maxPoolSize) {
    throw new InvalidOptionError(
      'minPoolSize',
      resolved.minPoolSize,
      `<= maxPoolSize (${resolved.maxPoolSize}) when maxPoolSize is not 0`,
    );
  }
  const interval = resolved.backgroundThreadIntervalMS;
  if (typeof interval !== 'number' || !Number.isFinite(interval) || interval === 0) {
    throw new InvalidOptionError(
      'backgroundThreadIntervalMS',
      interval,
      'a positive number of ms, or a negative number to never run (0 is not allowed)',
    );
  }
  return Object.freeze({ ...pick(resolved), userSet: Object.freeze(userSet) });
}

/** Every option {@link resolvePoolOptions} reads. */
const ALL_POOL_OPTION_NAMES = [...POOL_OPTION_NAMES, ...POOL_EXTENSION_OPTION_NAMES, ...BACKGROUND_OPTION_NAMES] as const;

/**
 * Reads option `name` of `options` once, with {@link optionValue}.
 *
 * @throws {InvalidOptionError} naming the option when reading it throws (a getter, a Proxy): the options come from
 *   user code, and an error that does not say which option failed is hard to trace.
 */
export function readOption<T extends object, K extends keyof T & string>(options: T | undefined, name: K): T[K] | undefined {
  try {
    return optionValue(options, name);
  } catch (error) {
    throw InvalidOptionError.unreadableOption(name, error);
  }
}

function pick(o: Required<AllPoolOptions>): Required<AllPoolOptions> {
  return {
    maxPoolSize: o.maxPoolSize,
    minPoolSize: o.minPoolSize,
    maxIdleTimeMS: o.maxIdleTimeMS,
    maxConnecting: o.maxConnecting,
    waitQueueTimeoutMS: o.waitQueueTimeoutMS,
    leakDetectionThresholdMS: o.leakDetectionThresholdMS,
    maxWaitQueueSize: o.maxWaitQueueSize,
    maxLifeTimeMS: o.maxLifeTimeMS,
    maxLifeTimeJitterMS: o.maxLifeTimeJitterMS,
    backgroundThreadIntervalMS: o.backgroundThreadIntervalMS,
  };
}

/** A copy of `o` without its undefined properties (so spreading it never overrides a default with undefined). */
export function definedOnly<T extends object>(o: T): Partial<T> {
  const out: Partial<T> = {};
  for (const key of Object.keys(o) as (keyof T)[]) {
    if (o[key] !== undefined) out[key] = o[key];
  }
  return out;
}

function requireInteger(name: string, value: unknown, min: number, allowed: string): void {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) {
    throw new InvalidOptionError(name, value, allowed);
  }
}

/**
 * Returns `value` when it is a duration option: a finite number of ms >= 0 (where 0 means no limit, unless `allowed`
 * says otherwise).
 *
 * @throws {InvalidOptionError} naming `name`, saying `allowed`, otherwise.
 */
export function requireDurationMS(name: string, value: unknown, allowed = 'a number of ms >= 0 (0 means no limit)'): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw new InvalidOptionError(name, value, allowed);
  }
  return value;
}

/**
 * Returns `value` when it is a duration that arms one Node timer: a number of ms from 0 to {@link MAX_TIMER_DELAY_MS}
 * (2147483647, about 24.8 days), where 0 means no limit. Node runs a timer with a longer delay after 1 ms, so a
 * longer timeout would fire at once.
 *
 * @throws {InvalidOptionError} naming `name`, saying what is allowed, otherwise.
 */
export function requireTimerDurationMS(name: string, value: unknown, noLimit = 'no limit'): number {
  const allowed = `a number of ms from 0 to ${MAX_TIMER_DELAY_MS} (0 means ${noLimit})`;
  requireDurationMS(name, value, allowed);
  if ((value as number) > MAX_TIMER_DELAY_MS) throw new InvalidOptionError(name, value, allowed);
  return value as number;
}

/**
 * Throws for the first own key of `options` that `known` does not hold, naming the closest known option when one is
 * close (see {@link closestOptionName}). `path` prefixes the key in the error (`"connectionOptions."`).
 *
 * @throws {InvalidOptionError} (see `InvalidOptionError.unknownOption`) for a key that is not an option of `owner`.
 *
 * Source: extension (a misspelt option must not be silently ignored; the MongoDB Node.js driver rejects unknown
 * client options too).
 */
export function rejectUnknownOptions(options: object, known: readonly string[], owner: string, path = ''): void {
  for (const key of Object.keys(options)) {
    if (known.includes(key)) continue;
    const value: unknown = (options as Record<string, unknown>)[key];
    throw InvalidOptionError.unknownOption(`${path}${key}`, value, owner, known, closestOptionName(key, known));
  }
}

/**
 * The known option `name` most likely meant: one equal to it ignoring case, else the one at the smallest edit
 * distance (Damerau-Levenshtein, ignoring case) when that distance is at most 1 for names up to 4 characters, 2 up
 * to 8, and 3 beyond; undefined when none is that close.
 *
 * Source: extension ("did you mean" suggestions, as in command-line tools).
 */
export function closestOptionName(name: string, known: readonly string[]): string | undefined {
  const lower = name.toLowerCase();
  const exact = known.find((k) => k.toLowerCase() === lower);
  if (exact !== undefined) return exact;
  const limit = lower.length <= 4 ? 1 : lower.length <= 8 ? 2 : 3;
  let best: string | undefined;
  let bestDistance = limit + 1;
  for (const candidate of known) {
    const d = editDistance(lower, candidate.toLowerCase(), bestDistance);
    if (d < bestDistance) {
      best = candidate;
      bestDistance = d;
    }
  }
  return best;
}

/**
 * The optimal string alignment distance of `a` and `b` (insertions, deletions, substitutions, adjacent swaps), capped
 * at `cap`.
 */
function editDistance(a: string, b: string, cap: number): number {
  if (Math.abs(a.length - b.length) >= cap) return cap;
  let before = new Array<number>(b.length + 1).fill(0);
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, before[j - 2] + 1);
      current.push(d);
    }
    before = previous;
    previous = current;
  }
  return Math.min(previous[b.length], cap);
}

/**
 * Returns `value` when it is a plain options object (not null, not an array, not a function), or undefined when it is
 * undefined and not `required`.
 *
 * @throws {InvalidOptionError} naming `name`, saying `allowed`, otherwise.
 */
export function requireOptionsObject(name: string, value: unknown, allowed: string, required: true): Record<string, unknown>;
export function requireOptionsObject(
  name: string,
  value: unknown,
  allowed: string,
  required?: false,
): Record<string, unknown> | undefined;
export function requireOptionsObject(
  name: string,
  value: unknown,
  allowed: string,
  required = false,
): Record<string, unknown> | undefined {
  if (value === undefined && !required) return undefined;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new InvalidOptionError(name, value, allowed);
  }
  return value as Record<string, unknown>;
}

/**
 * Checks the options of method `method`: nothing, or an object whose keys are all in `names` (a misspelt key is
 * refused, naming the closest option, so a deadline or a flag is never silently dropped).
 *
 * @throws {InvalidOptionError} naming `<method> options` for a value that is not an object, or the unknown key.
 *
 * Source: extension (see {@link rejectUnknownOptions}).
 */
export function requireMethodOptions(method: string, options: unknown, names: readonly string[]): void {
  // Allocation-free when the options are right: checkOut runs this on every call that passes options.
  if (options === undefined) return;
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new InvalidOptionError(`${method} options`, options, `an object { ${names.map((n) => `${n}?`).join(', ')} }, or nothing`);
  }
  for (const key in options) {
    if (!names.includes(key)) return rejectUnknownOptions(options, names, method);
  }
}

/**
 * Returns `value` when it is a boolean or undefined. Options objects take real booleans: the string `"true"` is not
 * one (a connection string's `"true"` is converted by the URI parser).
 *
 * @throws {InvalidOptionError} naming `name` otherwise.
 */
export function requireBoolean(name: string, value: unknown): boolean | undefined {
  if (value !== undefined && typeof value !== 'boolean') {
    throw new InvalidOptionError(name, value, 'true or false (a boolean)');
  }
  return value;
}

/**
 * Checks that `value` is a function or undefined.
 *
 * @throws {InvalidOptionError} naming `name`, saying `allowed` (the function's shape), otherwise.
 */
export function requireFunction(name: string, value: unknown, allowed: string): void {
  if (value !== undefined && typeof value !== 'function') throw new InvalidOptionError(name, value, allowed);
}

/**
 * Checks that `value` is an RxJS `SchedulerLike` (an object with `now()` and `schedule()` functions) or undefined.
 *
 * @throws {InvalidOptionError} naming `name` otherwise.
 */
export function requireScheduler(name: string, value: unknown): void {
  if (value === undefined) return;
  const s = value as { now?: unknown; schedule?: unknown } | null;
  if (s === null || typeof s !== 'object' || typeof s.now !== 'function' || typeof s.schedule !== 'function') {
    throw new InvalidOptionError(name, value, 'an RxJS SchedulerLike (an object with now() and schedule() functions)');
  }
}

/**
 * Checks the keys and the value types of `ConnectionPoolCoreOptions` that {@link resolvePoolOptions} and
 * `parseAddress` do not: no key outside {@link POOL_CORE_OPTION_NAMES} (plus `extraKeys`, which a front end that
 * passes the rest on checks itself), `connectionFactory` and `clearOnEstablishmentError` functions (when given),
 * `scheduler` a SchedulerLike (when given), `loadBalanced` a boolean (when given).
 *
 * @param owner what received the options (named in an unknown-option error), e.g. `"ConnectionPoolCore"`.
 * @param shape what the options must be, in words (the error for options that are not an object says it).
 * @throws {InvalidOptionError} for options that are not an object, an unknown key (naming the closest option), or a
 *   value of the wrong type.
 *
 * Source: CMAP spec, "Connection Pool Options"; unknown keys: extension (see {@link rejectUnknownOptions}).
 */
export function checkPoolCoreOptions(
  options: unknown,
  owner = 'ConnectionPoolCore',
  extraKeys: readonly string[] = [],
  shape = 'an object with at least an address',
): void {
  const o = requireOptionsObject('options', options, shape, true);
  rejectUnknownOptions(o, extraKeys.length === 0 ? POOL_CORE_OPTION_NAMES : [...POOL_CORE_OPTION_NAMES, ...extraKeys], owner);
  requireFunction('connectionFactory', optionValue(o, 'connectionFactory'), 'a function (descriptor) => ObservableInput<connection>');
  requireFunction('clearOnEstablishmentError', optionValue(o, 'clearOnEstablishmentError'), 'a function (error, { generation }) => boolean');
  requireScheduler('scheduler', optionValue(o, 'scheduler'));
  requireBoolean('loadBalanced', optionValue(o, 'loadBalanced'));
}

/**
 * Returns `value` when it is undefined or an AbortSignal, judged by its shape as Node's own APIs judge one (a boolean
 * `aborted`, `addEventListener` and `removeEventListener` functions): signals of polyfills, of other realms and of DOM
 * emulations are not instances of this realm's AbortSignal. `checkOut`, `warmUp`, `command`, `nextReply` and
 * `selectPool` check theirs with it.
 *
 * @throws {InvalidOptionError} (option `name`) for anything else, and for a value whose `aborted`,
 *   `addEventListener` or `removeEventListener` throws as it is read (what it threw is the error's `cause`).
 *
 * Source: extension (the web platform's AbortSignal, as `fetch` takes it).
 */
export function requireAbortSignal(name: string, value: unknown): AbortSignal | undefined {
  if (value === undefined) return undefined;
  const s = value as Partial<AbortSignal> | null;
  try {
    if (s !== null && typeof s === 'object' && typeof s.aborted === 'boolean' && typeof s.addEventListener === 'function' && typeof s.removeEventListener === 'function') {
      return value as AbortSignal;
    }
  } catch (thrown) {
    // A getter of its shape threw (a revoked Proxy, a hostile `aborted`): not a signal the call can read.
    const message = `Invalid ${name}: reading it as an AbortSignal threw (${inWords(thrown)}); ${name} must be ${SIGNAL_ALLOWED}`;
    throw new InvalidOptionError(name, undefined, SIGNAL_ALLOWED, { message, cause: thrown });
  }
  throw new InvalidOptionError(name, value, SIGNAL_ALLOWED);
}

/** What a `signal` option accepts, in words. */
const SIGNAL_ALLOWED = 'an AbortSignal (e.g. AbortController.signal or AbortSignal.timeout(ms))';
