/**
 * The OpenTelemetry database client connection pool metrics of one pool, recorded from its public streams: the CMAP
 * events (`events$`) give the time histograms and the timeout counter; the pool's counters (`snapshot()`, read once
 * per collection) give the connection counts, the pending requests and the configured limits; `state$` tells when a
 * closed pool is done, and recording stops by itself then.
 *
 * Source: OpenTelemetry semantic conventions v1.44.0, "Semantic conventions for database client metrics", section
 * "Connection pools" (Development status); CMAP spec, "Connection Pool Monitoring".
 */
import {
  diag,
  ValueType,
  type Attributes,
  type BatchObservableCallback,
  type Counter,
  type Histogram,
  type Meter,
  type Observable as ObservableInstrument,
} from '@opentelemetry/api';
import type { Observable, Subscription } from 'rxjs';
import { parseAddress } from '../address';
import { InvalidOptionError } from '../errors';
import { optionValue, rejectUnknownOptions, type ListsEveryOption } from '../options';
import type { ConnectionPoolEvent } from '../events';
import type { ConnectionPoolCore } from '../pool/connection-pool-core';
import { meterOption } from './provider-option';
import {
  ATTR_DB_CLIENT_CONNECTION_POOL_NAME,
  ATTR_DB_CLIENT_CONNECTION_STATE,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT,
  DB_CLIENT_CONNECTION_STATE_VALUE_IDLE,
  DB_CLIENT_CONNECTION_STATE_VALUE_USED,
  DB_CLIENT_CONNECTION_TIME_BUCKETS,
  METRIC_DB_CLIENT_CONNECTION_COUNT,
  METRIC_DB_CLIENT_CONNECTION_CREATE_TIME,
  METRIC_DB_CLIENT_CONNECTION_IDLE_MAX,
  METRIC_DB_CLIENT_CONNECTION_IDLE_MIN,
  METRIC_DB_CLIENT_CONNECTION_MAX,
  METRIC_DB_CLIENT_CONNECTION_PENDING_REQUESTS,
  METRIC_DB_CLIENT_CONNECTION_TIMEOUTS,
  METRIC_DB_CLIENT_CONNECTION_USE_TIME,
  METRIC_DB_CLIENT_CONNECTION_WAIT_TIME,
} from './semantic-conventions';

/**
 * What {@link instrumentConnectionPool} reads of a pool: its public members. Every `ConnectionPool` and
 * `ConnectionPoolCore` is one.
 *
 * Source: extension (the public surface of `ConnectionPoolCore`).
 */
export type InstrumentedPool = Pick<ConnectionPoolCore, 'address' | 'options' | 'events$' | 'state$' | 'state' | 'snapshot'>;

/**
 * Options of {@link instrumentConnectionPool}.
 *
 * Source: OpenTelemetry semantic conventions, database client metrics, "Connection pools"
 * (`db.client.connection.pool.name`); extension: `meter` defaults the way OpenTelemetry instrumentations do (the
 * global MeterProvider, with the library's name and version as the instrumentation scope).
 */
export interface ConnectionPoolInstrumentationOptions {
  /**
   * The Meter that creates the instruments. Default: `metrics.getMeter('rxcmap', <version>)` of `@opentelemetry/api`,
   * which records nothing until an SDK MeterProvider is registered globally.
   */
  meter?: Meter | undefined;
  /**
   * The `db.client.connection.pool.name` attribute: a non-empty string, unique within the application. Default: the
   * pool's address, `host:port` (the socket path for a Unix domain socket). A pool serves one server and every
   * database on it, so the conventions' fallback `server.address:server.port/db.namespace` reduces to `host:port`;
   * when another pool recorded through the same Meter has that name already (two clients of one server), the default
   * is `host:port#2` (`#3`, ...), the first one free. A name given here that another pool being recorded through the
   * same Meter has is an error: the SDK would merge the two pools' series. A name is free again once its recording
   * stopped.
   */
  poolName?: string | undefined;
}

/**
 * The handle of an instrumented pool: {@link unsubscribe} (or a `using` declaration) stops recording.
 *
 * Source: extension (RxJS `Subscription.unsubscribe`, TC39 explicit resource management `Symbol.dispose`).
 */
export interface ConnectionPoolInstrumentation extends Disposable {
  /** The `db.client.connection.pool.name` recorded. */
  readonly poolName: string;
  /**
   * The attributes every measurement carries (frozen): `db.client.connection.pool.name`, `server.address` and, but
   * for a Unix domain socket, `server.port`. `db.client.connection.count` adds `db.client.connection.state`.
   */
  readonly attributes: Readonly<Attributes>;
  /**
   * Whether recording has stopped: unsubscribed, disposed, or the pool closed with its last connection closed (its
   * counts are then reported as 0 for a while; see {@link instrumentConnectionPool}).
   */
  readonly closed: boolean;
  /**
   * Stops recording: unsubscribes from the pool's streams and removes the collection callback, so nothing of this
   * pool is measured any more (a reader with cumulative temporality may keep exporting the last values it collected).
   * Idempotent.
   */
  unsubscribe(): void;
  /** The same as {@link unsubscribe}, for `using` declarations. */
  [Symbol.dispose](): void;
}

/**
 * Records the OpenTelemetry database client connection pool metrics of `pool`, named, typed and with the units of the
 * semantic conventions v1.44.0 (section "Connection pools", Development status; every one of them Recommended):
 *
 * | metric | instrument (value type) | unit | recorded from |
 * | --- | --- | --- | --- |
 * | `db.client.connection.count` | asynchronous UpDownCounter (int) | `{connection}` | `idle`: available connections; `used`: connections checked out |
 * | `db.client.connection.idle.max` | asynchronous UpDownCounter (int) | `{connection}` | maxPoolSize |
 * | `db.client.connection.idle.min` | asynchronous UpDownCounter (int) | `{connection}` | minPoolSize |
 * | `db.client.connection.max` | asynchronous UpDownCounter (int) | `{connection}` | maxPoolSize |
 * | `db.client.connection.pending_requests` | asynchronous UpDownCounter (int) | `{request}` | checkouts waiting (WaitQueue and claimed establishments) |
 * | `db.client.connection.timeouts` | Counter (int) | `{timeout}` | ConnectionCheckOutFailed with reason `timeout` |
 * | `db.client.connection.create_time` | Histogram (double) | `s` | ConnectionReady `duration` |
 * | `db.client.connection.wait_time` | Histogram (double) | `s` | ConnectionCheckedOut and ConnectionCheckOutFailed `duration` |
 * | `db.client.connection.use_time` | Histogram (double) | `s` | ConnectionCheckedIn `duration` (from its ConnectionCheckedOut) |
 *
 * Mapping choices:
 * - Connections being established (CMAP "pending") are in neither well-known `db.client.connection.state` (`idle`,
 *   `used`) and are not counted: `idle + used = totalConnectionCount - pendingConnectionCount`. Their establishment
 *   time appears in `create_time` once they are ready. (`idle` is the conventions' word for an available
 *   connection; in CMAP an idle connection is one perished after maxIdleTimeMS, ConnectionClosed reason `idle`.)
 * - CMAP caps all connections at maxPoolSize, and every one of them may be idle, so `idle.max` is maxPoolSize like
 *   `max`; `idle.min` is minPoolSize (the pool keeps at least that many connections, idle or not). With maxPoolSize
 *   0 (no limit), `max` and `idle.max` are not reported.
 * - `wait_time` records every checkout attempt, failed ones included (a timed-out wait is time spent waiting); a
 *   checkout that started while nobody observed the pool (under way when recording started, with no other
 *   `events$` subscriber) records none when its start was not timed (the pool times it anyway for a
 *   waitQueueTimeoutMS above 0: then its whole wait is recorded).
 * - `use_time` needs the checkout's time: a checkout made before anyone observed the pool records no `use_time`,
 *   unless the pool timed it anyway (waitQueueTimeoutMS or leakDetectionThresholdMS above 0).
 * - The conventions list only `db.client.connection.pool.name` (and `db.client.connection.state`) on these metrics;
 *   `server.address` and `server.port`, the attributes of `db.client.operation.duration`, are added (extension) so
 *   pool metrics join operation metrics without parsing the pool name.
 * - The histograms advise the bucket boundaries the conventions give `db.client.operation.duration` (seconds).
 *
 * Counts are read from `pool.snapshot()` in one batch callback per collection (asynchronous instruments: the
 * OpenTelemetry API's instrument for values kept elsewhere), so nothing is built between collections. Subscribing to
 * `events$` makes the pool build its event objects, which is the whole cost; a pool that is not instrumented pays
 * nothing. Recording stops by itself when `state$` completes (the pool closed and its last connection closed), or on
 * {@link ConnectionPoolInstrumentation.unsubscribe}. Stopping by itself, it goes on reporting the pool's counts
 * (`db.client.connection.count`, `pending_requests`) as 0 for 60 s, the SDK's default export interval, so that a
 * reader with cumulative temporality (which keeps exporting the last value it collected) ends on 0 rather than on the
 * counts before the close; its callback is removed at the first collection after that, after 120 s should no reader
 * collect, or by `unsubscribe()`.
 *
 * @example
 * ```ts
 * import { metrics } from '@opentelemetry/api';
 * import { instrumentConnectionPool } from 'rxcmap/opentelemetry';
 *
 * const meter = metrics.getMeter('my-service');
 * const instrumentation = instrumentConnectionPool(pool, { meter, poolName: 'orders' });
 * // ... later
 * instrumentation.unsubscribe();
 * ```
 *
 * @param pool the pool (a `ConnectionPool` or `ConnectionPoolCore`).
 * @param options the Meter and the pool name; see {@link ConnectionPoolInstrumentationOptions}.
 * @returns the handle that stops recording.
 * @throws {InvalidOptionError} for a `pool` that is not a pool (option `pool`), options that are not an object
 *   (option `options`), a key that is not one of its options (named, with the closest one: a misspelt `poolName` is
 *   not silently replaced by the default), a `meter` that is not an OpenTelemetry Meter (option `meter`), or a
 *   `poolName` that is not a non-empty string or that another pool being recorded through the same Meter has (option
 *   `poolName`); what the Meter throws while the instruments are made (the name stays free). Once recording, an
 *   instrument that throws is reported to OpenTelemetry's `diag` logger, never thrown.
 *
 * Source: OpenTelemetry semantic conventions v1.44.0, "Semantic conventions for database client metrics", section
 * "Connection pools" (`db.client.connection.pool.name` unique within the application; db.client.connection.count,
 * .idle.max, .idle.min, .max, .pending_requests, .timeouts, .create_time, .wait_time, .use_time); CMAP spec,
 * "Connection Pool Monitoring" (the events and their `duration`).
 */
export function instrumentConnectionPool(
  pool: InstrumentedPool,
  options: ConnectionPoolInstrumentationOptions = {},
): ConnectionPoolInstrumentation {
  if (pool === null || typeof pool !== 'object' || typeof pool.snapshot !== 'function' || typeof pool.events$?.subscribe !== 'function') {
    throw new InvalidOptionError('pool', pool, 'a ConnectionPool or ConnectionPoolCore');
  }
  const { meter, name: given } = poolInstrumentationOptions(options, INSTRUMENTATION_OPTION_NAMES, 'instrumentConnectionPool');
  if (given !== undefined && namesRecording(meter).has(given)) {
    throw new InvalidOptionError('poolName', given, 'a name no other pool being recorded through this Meter has (give each pool its own)');
  }
  return recordPool(pool, meter, given ?? pool.address);
}

/**
 * The options of a pool instrumentation function (`functionName`: `instrumentConnectionPool` or
 * `instrumentConnectionPools`), checked: an object or nothing, no key but `names` (`meter`, then the name option), a
 * Meter that records pools, and the name option a non-empty string when given. Returns the Meter and that name.
 *
 * @throws {InvalidOptionError} for options that are not an object (option `options`), an unknown key (named, with the
 *   closest one), a `meter` that is not an OpenTelemetry Meter (option `meter`), a name that is not a non-empty string
 *   (option: its key).
 */
export function poolInstrumentationOptions(
  options: unknown,
  names: readonly ['meter', string],
  functionName: string,
): { meter: Meter; name: string | undefined } {
  if (options === null || typeof options !== 'object') {
    throw new InvalidOptionError('options', options, `an object { ${names.map((n) => `${n}?`).join(', ')} }, or nothing`);
  }
  rejectUnknownOptions(options, names, functionName);
  const meter = meterOption(options as { meter?: Meter }, ['createHistogram', 'addBatchObservableCallback']);
  const nameKey = names[1];
  const name = optionValue(options as Record<string, unknown>, nameKey);
  if (name !== undefined && (typeof name !== 'string' || name === '')) {
    throw new InvalidOptionError(nameKey, name, 'a non-empty string');
  }
  return { meter, name };
}

/**
 * Starts recording `pool` through `meter` as `name`, or, when another pool being recorded through `meter` has that
 * name, as `name#2` (`#3`, ...), the first one free. `removed` is called once its collection callback is removed.
 *
 * @throws what the Meter throws while the instruments are made (the name stays free).
 */
export function recordPool(pool: InstrumentedPool, meter: Meter, name: string, removed?: () => void): ConnectionPoolInstrumentation {
  const recording = namesRecording(meter);
  let poolName = name;
  for (let n = 2; recording.has(poolName); n++) poolName = `${name}#${n}`;
  try {
    return new PoolMetricsRecorder(pool, meter, poolName, recording, removed);
  } catch (error) {
    // A Meter that threw while the instruments were made: the name records nothing, and stays free.
    recording.delete(poolName);
    throw error;
  }
}

/** The names of the pools being recorded through `meter` (see {@link recordingByMeter}). */
function namesRecording(meter: Meter): Set<string> {
  let recording = recordingByMeter.get(meter);
  if (recording === undefined) recordingByMeter.set(meter, (recording = new Set()));
  return recording;
}

/** The option names of {@link ConnectionPoolInstrumentationOptions}. */
const INSTRUMENTATION_OPTION_NAMES = ['meter', 'poolName'] as const;
INSTRUMENTATION_OPTION_NAMES satisfies readonly (keyof ConnectionPoolInstrumentationOptions)[];
true satisfies ListsEveryOption<ConnectionPoolInstrumentationOptions, typeof INSTRUMENTATION_OPTION_NAMES>;

/**
 * The names of the pools being recorded, by Meter: two pools recorded under one name through one Meter would have
 * their series merged by the SDK (one pool's counts and limits overwriting the other's), as two clients of one server
 * would with the default name. A name is released when its recording stops (unsubscribed, or the pool finished).
 */
const recordingByMeter = new WeakMap<Meter, Set<string>>();

/**
 * How long a finished pool's counts are reported as 0 before its collection callback is removed, in ms: the OpenTelemetry
 * SDK's default metric export interval (OTEL_METRIC_EXPORT_INTERVAL, 60000 ms), so a reader collecting at that interval
 * or more often exports the zeros.
 */
const FINAL_ZEROS_MS = 60_000;

/** The recorder behind {@link instrumentConnectionPool}: the instruments, the event handler, the collection callback. */
class PoolMetricsRecorder implements ConnectionPoolInstrumentation {
  readonly poolName: string;
  readonly attributes: Readonly<Attributes>;

  private readonly idleAttributes: Readonly<Attributes>;
  private readonly usedAttributes: Readonly<Attributes>;
  private readonly timeouts: Counter;
  private readonly createTime: Histogram;
  private readonly waitTime: Histogram;
  private readonly useTime: Histogram;
  private readonly observables: ObservableInstrument[];
  private readonly collect: BatchObservableCallback;
  private readonly subscriptions: Subscription[] = [];
  private watchingCompletion = false;
  /** The timer that removes the collection callback of a finished pool should no reader collect (see `finish`). */
  private removalTimer: ReturnType<typeof setTimeout> | undefined;
  /** When the pool finished (Date.now(), ms): from then on the callback reports its counts as 0. */
  private finishedAt: number | undefined = undefined;
  /** The pool, while recording (nothing keeps a finished pool reachable). */
  private pool: InstrumentedPool | undefined;
  /** Whether the collection callback is removed. */
  private removed = false;

  constructor(
    pool: InstrumentedPool,
    private readonly meter: Meter,
    poolName: string,
    /** The names being recorded through `meter`: this one is released when recording stops. */
    private readonly recording: Set<string>,
    /** Called once the collection callback is removed. */
    private readonly removedCallback?: () => void,
  ) {
    this.pool = pool;
    this.poolName = poolName;
    recording.add(poolName);
    const server = parseAddress(pool.address);
    this.attributes = Object.freeze({
      [ATTR_DB_CLIENT_CONNECTION_POOL_NAME]: poolName,
      [ATTR_SERVER_ADDRESS]: server.host,
      ...(server.port === undefined ? {} : { [ATTR_SERVER_PORT]: server.port }),
    });
    this.idleAttributes = Object.freeze({ ...this.attributes, [ATTR_DB_CLIENT_CONNECTION_STATE]: DB_CLIENT_CONNECTION_STATE_VALUE_IDLE });
    this.usedAttributes = Object.freeze({ ...this.attributes, [ATTR_DB_CLIENT_CONNECTION_STATE]: DB_CLIENT_CONNECTION_STATE_VALUE_USED });

    const seconds = { unit: 's', valueType: ValueType.DOUBLE, advice: { explicitBucketBoundaries: [...DB_CLIENT_CONNECTION_TIME_BUCKETS] } };
    // The counts, limits and timeouts are integers (the conventions' value type for them): without this, the SDK would
    // export them as floating-point sums.
    const connections = { unit: '{connection}', valueType: ValueType.INT };
    this.timeouts = meter.createCounter(METRIC_DB_CLIENT_CONNECTION_TIMEOUTS, {
      unit: '{timeout}',
      valueType: ValueType.INT,
      description: 'The number of connection timeouts that have occurred trying to obtain a connection from the pool.',
    });
    this.createTime = meter.createHistogram(METRIC_DB_CLIENT_CONNECTION_CREATE_TIME, {
      ...seconds,
      description: 'The time it took to create a new connection.',
    });
    this.waitTime = meter.createHistogram(METRIC_DB_CLIENT_CONNECTION_WAIT_TIME, {
      ...seconds,
      description: 'The time it took to obtain an open connection from the pool.',
    });
    this.useTime = meter.createHistogram(METRIC_DB_CLIENT_CONNECTION_USE_TIME, {
      ...seconds,
      description: 'The time between borrowing a connection and returning it to the pool.',
    });

    const count = meter.createObservableUpDownCounter(METRIC_DB_CLIENT_CONNECTION_COUNT, {
      ...connections,
      description: 'The number of connections that are currently in state described by the state attribute.',
    });
    const idleMax = meter.createObservableUpDownCounter(METRIC_DB_CLIENT_CONNECTION_IDLE_MAX, {
      ...connections,
      description: 'The maximum number of idle open connections allowed.',
    });
    const idleMin = meter.createObservableUpDownCounter(METRIC_DB_CLIENT_CONNECTION_IDLE_MIN, {
      ...connections,
      description: 'The minimum number of idle open connections allowed.',
    });
    const max = meter.createObservableUpDownCounter(METRIC_DB_CLIENT_CONNECTION_MAX, {
      ...connections,
      description: 'The maximum number of open connections allowed.',
    });
    const pending = meter.createObservableUpDownCounter(METRIC_DB_CLIENT_CONNECTION_PENDING_REQUESTS, {
      unit: '{request}',
      valueType: ValueType.INT,
      description: 'The number of current pending requests for an open connection.',
    });
    this.observables = [count, idleMax, idleMin, max, pending];
    const { maxPoolSize, minPoolSize } = pool.options;
    this.collect = (result) => {
      const s = this.pool?.snapshot();
      result.observe(count, s?.availableConnectionCount ?? 0, this.idleAttributes);
      result.observe(count, s?.inUseConnectionCount ?? 0, this.usedAttributes);
      result.observe(pending, s?.waitQueueLength ?? 0, this.attributes);
      // A finished pool's zeros are reported for FINAL_ZEROS_MS, so that every reader collecting at least that often
      // exports them (with cumulative temporality a reader keeps the last value it collected); then the callback goes.
      if (this.finishedAt !== undefined && Date.now() - this.finishedAt >= FINAL_ZEROS_MS) queueMicrotask(() => this.unsubscribe());
      result.observe(idleMin, minPoolSize, this.attributes);
      if (maxPoolSize > 0) {
        result.observe(max, maxPoolSize, this.attributes);
        result.observe(idleMax, maxPoolSize, this.attributes);
      }
    };
    meter.addBatchObservableCallback(this.collect, this.observables);

    this.subscriptions.push(pool.events$.subscribe((event) => this.record(event)));
    if (pool.state === 'closed') this.watchCompletion();
  }

  get closed(): boolean {
    return this.pool === undefined;
  }

  unsubscribe(): void {
    if (this.removed) return;
    this.removed = true;
    if (this.pool !== undefined) this.recording.delete(this.poolName);
    this.pool = undefined;
    for (const subscription of this.subscriptions.splice(0)) subscription.unsubscribe();
    this.meter.removeBatchObservableCallback(this.collect, this.observables);
    // Its job done: left pending, the timer would keep this recorder reachable for the rest of its 120 s.
    if (this.removalTimer !== undefined) clearTimeout(this.removalTimer);
    this.removalTimer = undefined;
    this.removedCallback?.();
  }

  /**
   * The pool finished: nothing more is recorded; the collection callback reports 0 for a while (see `collect`), and
   * is removed after twice that at the latest, should no reader collect (an unref'd timer: it keeps no process alive).
   */
  private finish(): void {
    if (this.pool === undefined) return;
    this.finishedAt = Date.now();
    this.pool = undefined;
    this.recording.delete(this.poolName);
    for (const subscription of this.subscriptions.splice(0)) subscription.unsubscribe();
    this.removalTimer = setTimeout(() => this.unsubscribe(), 2 * FINAL_ZEROS_MS).unref();
  }

  [Symbol.dispose](): void {
    this.unsubscribe();
  }

  /**
   * Records what one CMAP event measures (durations in ms on the events, seconds on the instruments). An instrument
   * that throws (the API says they never do) is reported to OpenTelemetry's `diag` logger, as the API reports its own
   * errors: thrown from an `events$` subscriber, it would be an uncaught exception, ending the process.
   */
  private record(event: ConnectionPoolEvent): void {
    try {
      this.measure(event);
    } catch (error) {
      diag.error(`rxcmap: recording ${event.type} of pool ${this.poolName} failed`, error);
    }
  }

  private measure(event: ConnectionPoolEvent): void {
    switch (event.type) {
      case 'ConnectionReady':
        this.createTime.record(event.duration / 1000, this.attributes);
        break;
      case 'ConnectionCheckedOut':
      case 'ConnectionCheckOutFailed':
        // Checkouts started before anyone observed the pool were not timed: they record no wait time.
        if (event.duration !== undefined) this.waitTime.record(event.duration / 1000, this.attributes);
        if (event.type === 'ConnectionCheckOutFailed' && event.reason === 'timeout') this.timeouts.add(1, this.attributes);
        break;
      case 'ConnectionCheckedIn':
        // Checkouts made before anyone observed the pool were not timed: they record no use time.
        if (event.duration !== undefined) this.useTime.record(event.duration / 1000, this.attributes);
        break;
      case 'ConnectionPoolClosed':
        this.watchCompletion();
        break;
    }
  }

  /**
   * Once the pool is closed: follows `state$` (only then, so no snapshot is built before) and stops recording when it
   * completes, the pool closed and its last connection closed.
   */
  private watchCompletion(): void {
    if (this.watchingCompletion || this.pool === undefined) return;
    this.watchingCompletion = true;
    const states$: Observable<unknown> = this.pool.state$;
    const subscription = states$.subscribe({ complete: () => this.finish() });
    if (this.pool !== undefined) this.subscriptions.push(subscription);
  }
}
