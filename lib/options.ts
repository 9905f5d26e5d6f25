/**
 * ConnectionPoolOptions: the CMAP pool options, their defaults, and their validation.
 *
 * Source: CMAP spec, "Connection Pool Options"; the CMAP test format for `backgroundThreadIntervalMS`.
 */
import { InvalidOptionError } from './errors';

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
  maxPoolSize?: number;
  /**
   * The number of connections the pool keeps established while it is ready, populated in the background.
   * An integer >= 0, and <= maxPoolSize when maxPoolSize > 0. Default 0.
   */
  minPoolSize?: number;
  /**
   * How long (ms) a connection may stay available (unused) before it is idle and closed. A number >= 0; 0 means
   * never. Default 0.
   */
  maxIdleTimeMS?: number;
  /**
   * The maximum number of connections the pool establishes concurrently (from ConnectionCreated to
   * ConnectionReady). An integer > 0. Default 2.
   */
  maxConnecting?: number;
  /**
   * How long (ms) a checkout may wait in the WaitQueue for an available connection or a free establishment slot.
   * Time spent establishing a connection the checkout already started is not counted. A number >= 0; 0 means no
   * limit. Default 0.
   */
  waitQueueTimeoutMS?: number;
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
  backgroundThreadIntervalMS?: number;
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
 * The defaults of {@link PoolOptions} and {@link BackgroundOptions} (a frozen object; durations in ms).
 *
 * Source: CMAP spec, "Connection Pool Options" (each option's "Defaults to"); `backgroundThreadIntervalMS`:
 * extension (the spec leaves the interval between Background Thread Runs unspecified).
 */
export const DEFAULT_POOL_OPTIONS: Readonly<Required<PoolOptions & BackgroundOptions>> = Object.freeze({
  maxPoolSize: 100,
  minPoolSize: 0,
  maxIdleTimeMS: 0,
  maxConnecting: 2,
  waitQueueTimeoutMS: 0,
  backgroundThreadIntervalMS: 1000,
});

/**
 * Pool options with every default applied and every value validated (frozen; durations in ms), as a pool's
 * `options`.
 *
 * Source: CMAP spec, "Connection Pool Options"; `userSet`: CMAP spec, "Events" (PoolCreatedEvent.options: "Any
 * non-default pool options that were set").
 */
export interface ResolvedPoolOptions extends Readonly<Required<PoolOptions & BackgroundOptions>> {
  /** The pool options the caller set explicitly (what ConnectionPoolCreated reports). */
  readonly userSet: Readonly<PoolOptions>;
}

/**
 * Applies defaults to `options` and validates every value.
 *
 * @throws {InvalidOptionError} naming the option, the value and what is allowed, for: a maxPoolSize or minPoolSize
 *   that is not an integer >= 0; a maxConnecting that is not an integer > 0; a maxIdleTimeMS or waitQueueTimeoutMS
 *   that is not a finite number >= 0; a minPoolSize above a non-zero maxPoolSize; a backgroundThreadIntervalMS that
 *   is 0 or not a finite number.
 */
export function resolvePoolOptions(options: PoolOptions & BackgroundOptions = {}): ResolvedPoolOptions {
  const userSet: PoolOptions = {};
  for (const name of POOL_OPTION_NAMES) {
    if (options[name] !== undefined) userSet[name] = options[name];
  }
  const resolved = { ...DEFAULT_POOL_OPTIONS, ...definedOnly(options) };

  requireInteger('maxPoolSize', resolved.maxPoolSize, 0, 'an integer >= 0 (0 means no limit)');
  requireInteger('minPoolSize', resolved.minPoolSize, 0, 'an integer >= 0');
  requireInteger('maxConnecting', resolved.maxConnecting, 1, 'an integer > 0');
  requireDurationMS('maxIdleTimeMS', resolved.maxIdleTimeMS);
  requireDurationMS('waitQueueTimeoutMS', resolved.waitQueueTimeoutMS);
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

function pick(o: Required<PoolOptions & BackgroundOptions>): Required<PoolOptions & BackgroundOptions> {
  return {
    maxPoolSize: o.maxPoolSize,
    minPoolSize: o.minPoolSize,
    maxIdleTimeMS: o.maxIdleTimeMS,
    maxConnecting: o.maxConnecting,
    waitQueueTimeoutMS: o.waitQueueTimeoutMS,
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
 * Returns `value` when it is a duration option: a finite number of ms >= 0, where 0 means no limit.
 *
 * @throws {InvalidOptionError} naming `name` otherwise.
 */
export function requireDurationMS(name: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw new InvalidOptionError(name, value, 'a number of ms >= 0 (0 means no limit)');
  }
  return value;
}
