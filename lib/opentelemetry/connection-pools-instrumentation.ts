/**
 * The OpenTelemetry database client connection pool metrics of every pool of a client, followed as the client opens
 * them: those of its hosts at the start, those a `mongodb+srv://` URI's seedlist finds later, those SRV polling adds.
 *
 * Source: OpenTelemetry semantic conventions v1.44.0, "Semantic conventions for database client metrics", section
 * "Connection pools"; extension: following a client's pools as they are opened is what Micrometer's MongoDB binder
 * does for the official Java driver (a pool's metrics registered as the driver reports the pool created).
 */
import { diag, type Meter } from '@opentelemetry/api';
import type { Observable, Subscription } from 'rxjs';
import { InvalidOptionError } from '../errors';
import type { ListsEveryOption } from '../options';
import { poolInstrumentationOptions, recordPool, type ConnectionPoolInstrumentation, type InstrumentedPool } from './connection-pool-instrumentation';

/**
 * What {@link instrumentConnectionPools} reads of a client: its `pools$`. Every `Client` is one.
 *
 * Source: extension (the public surface of `Client`).
 */
export interface InstrumentedPools {
  /** Each pool of the client: those it has now, then each one it opens later (see `Client.pools$`). */
  readonly pools$: Observable<InstrumentedPool>;
}

/**
 * Options of {@link instrumentConnectionPools}.
 *
 * Source: OpenTelemetry semantic conventions, database client metrics, "Connection pools"
 * (`db.client.connection.pool.name` unique within the application); extension: `meter` defaults the way OpenTelemetry
 * instrumentations do (the global MeterProvider, with the library's name and version as the instrumentation scope).
 */
export interface ConnectionPoolsInstrumentationOptions {
  /**
   * The Meter that creates the instruments. Default: `metrics.getMeter('rxcmap', <version>)` of `@opentelemetry/api`,
   * which records nothing until an SDK MeterProvider is registered globally.
   */
  meter?: Meter | undefined;
  /**
   * What each pool's `db.client.connection.pool.name` starts with: the pool of `host:port` is named
   * `<poolNamePrefix>/host:port`. A non-empty string. Default: none, each pool is named `host:port`.
   */
  poolNamePrefix?: string | undefined;
}

/**
 * The handle of a client's instrumented pools: {@link unsubscribe} (or a `using` declaration) stops recording.
 *
 * Source: extension (RxJS `Subscription.unsubscribe`, TC39 explicit resource management `Symbol.dispose`).
 */
export interface ConnectionPoolsInstrumentation extends Disposable {
  /**
   * The recording of each of the client's pools that has not stopped (see `ConnectionPoolInstrumentation`), in the
   * order the pools were opened: each has its `poolName` and `attributes`. A new array at each read.
   */
  readonly instrumentations: readonly ConnectionPoolInstrumentation[];
  /**
   * Whether recording has stopped: unsubscribed, disposed, or the client closed and the recording of each of its pools
   * stopped by itself (each pool closed with its last connection closed).
   */
  readonly closed: boolean;
  /**
   * Stops recording: no pool the client opens from now on is recorded, and the recording of each pool is stopped as
   * by its own `unsubscribe()` (its collection callback removed). Idempotent.
   */
  unsubscribe(): void;
  /** The same as {@link unsubscribe}, for `using` declarations. */
  [Symbol.dispose](): void;
}

/**
 * Records the OpenTelemetry database client connection pool metrics (see `instrumentConnectionPool`, which this
 * calls for each pool) of every pool of `client`: each pool it has now, and each pool it opens until it is closed,
 * recorded as the client lists it (before its first checkout). A `mongodb+srv://` client has no pool until its
 * seedlist is found, and SRV polling adds and removes pools later: their metrics are recorded all the same. A pool
 * the client closes (a host SRV polling removed, or every pool at `client.close()`) stops being recorded by itself
 * once its last connection is closed, reporting its counts as 0 for a while first, as `instrumentConnectionPool` says.
 *
 * Each pool is named (`db.client.connection.pool.name`) `host:port`, or `<poolNamePrefix>/host:port`; when another
 * pool being recorded through the same Meter has that name (two clients of one server, or a host SRV polling added
 * again while its removed pool still has a connection in use), `#2` (`#3`, ...) is appended, the first one free.
 *
 * @example
 * ```ts
 * import { metrics } from '@opentelemetry/api';
 * import { connect } from 'rxcmap';
 * import { instrumentConnectionPools } from 'rxcmap/opentelemetry';
 *
 * const client = connect('mongodb+srv://cluster0.example.mongodb.net/');
 * const instrumentation = instrumentConnectionPools(client, { meter: metrics.getMeter('orders-service'), poolNamePrefix: 'orders' });
 * ```
 *
 * @param client the client (`connect()`).
 * @param options the Meter and the pool names' prefix; see {@link ConnectionPoolsInstrumentationOptions}.
 * @returns the handle that stops recording.
 * @throws {InvalidOptionError} for a `client` that has no `pools$` stream (option `client`), options that are not an
 *   object (option `options`), a key that is not one of its options (named, with the closest one), a `meter` that is
 *   not an OpenTelemetry Meter (option `meter`), or a `poolNamePrefix` that is not a non-empty string (option
 *   `poolNamePrefix`); what the Meter throws while the instruments of the client's pools of the time are made (nothing
 *   is recorded then). For a pool opened later, what the Meter throws is reported to OpenTelemetry's `diag` logger
 *   (that pool is not recorded), never thrown.
 *
 * Source: OpenTelemetry semantic conventions v1.44.0, "Semantic conventions for database client metrics", section
 * "Connection pools"; extension (following the pools as the client opens them).
 */
export function instrumentConnectionPools(client: InstrumentedPools, options: ConnectionPoolsInstrumentationOptions = {}): ConnectionPoolsInstrumentation {
  if (client === null || typeof client !== 'object' || typeof client.pools$?.subscribe !== 'function') {
    throw new InvalidOptionError('client', client, 'a Client (connect())');
  }
  const { meter, name: prefix } = poolInstrumentationOptions(options, POOLS_INSTRUMENTATION_OPTION_NAMES, 'instrumentConnectionPools');
  return new ClientPoolsRecorder(client, meter, prefix);
}

/** The option names of {@link ConnectionPoolsInstrumentationOptions}. */
const POOLS_INSTRUMENTATION_OPTION_NAMES = ['meter', 'poolNamePrefix'] as const;
POOLS_INSTRUMENTATION_OPTION_NAMES satisfies readonly (keyof ConnectionPoolsInstrumentationOptions)[];
true satisfies ListsEveryOption<ConnectionPoolsInstrumentationOptions, typeof POOLS_INSTRUMENTATION_OPTION_NAMES>;

/** The recorder behind {@link instrumentConnectionPools}: one pool recording per pool of the client. */
class ClientPoolsRecorder implements ConnectionPoolsInstrumentation {
  /** The recording of each pool whose collection callback is still there (a finished pool's zeros included). */
  private readonly recordings = new Set<ConnectionPoolInstrumentation>();
  private readonly subscription: Subscription;
  /** Whether `pools$` completed (the client closed): no pool comes any more. */
  private poolsComplete = false;
  private stopped = false;

  constructor(client: InstrumentedPools, meter: Meter, prefix: string | undefined) {
    let starting = true;
    let failure: { error: unknown } | undefined;
    this.subscription = client.pools$.subscribe({
      next: (pool) => {
        const name = prefix === undefined ? pool.address : `${prefix}/${pool.address}`;
        try {
          const recording = recordPool(pool, meter, name, () => this.recordings.delete(recording));
          this.recordings.add(recording);
        } catch (error) {
          if (starting) failure ??= { error };
          else diag.error(`rxcmap: recording the metrics of pool ${name} failed`, error);
        }
      },
      complete: () => {
        this.poolsComplete = true;
      },
    });
    starting = false;
    if (failure !== undefined) {
      this.unsubscribe();
      throw failure.error;
    }
  }

  get instrumentations(): readonly ConnectionPoolInstrumentation[] {
    return [...this.recordings].filter((recording) => !recording.closed);
  }

  get closed(): boolean {
    return this.stopped || (this.poolsComplete && this.instrumentations.length === 0);
  }

  unsubscribe(): void {
    // Idempotent as it is: the subscription's unsubscribe is, and each recording leaves `recordings` as it stops.
    this.stopped = true;
    this.subscription.unsubscribe();
    for (const recording of [...this.recordings]) recording.unsubscribe();
  }

  [Symbol.dispose](): void {
    this.unsubscribe();
  }
}
