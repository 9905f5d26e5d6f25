/**
 * ConnectionPool: the public face of the pool. Its inputs (checkout requests and cancellations, check-ins,
 * clear/ready/close, establishment results, timers) are actions on one RxJS stream, serialized by the mailbox and
 * reduced by `scan` over the pool state; the commands each step returns are then run in order.
 *
 * Source: CMAP spec, "Connection Pool Behaviors", "Connection Pool Monitoring", "withConnection".
 */
import {
  defer,
  EMPTY,
  filter,
  finalize,
  from,
  map,
  Observable,
  scan,
  Subject,
  Subscription,
  switchMap,
  type ObservableInput,
  type OperatorFunction,
  type SchedulerLike,
} from 'rxjs';
import { parseAddress } from '../address';
import { connectionFactory, type ConnectionOptions } from '../connection/connect';
import type { Connection } from '../connection/connection';
import { CmapError, ConnectionCheckInError, ErrorLabel, InvalidOptionError, MongoNetworkTimeoutError } from '../errors';
import type { ServerHeartbeatEvent } from '../monitor/heartbeat-events';
import type { ConnectionPoolCreatedEvent, ConnectionPoolEvent } from '../events';
import { connectionLogMessage, type ConnectionLogMessage } from '../logging/log-message';
import { resolveLogSettings, willLog, type LoggingOptions, type LogSink } from '../logging/log-settings';
import { openLogSink } from '../logging/log-sink';
import { resolvePoolOptions, type BackgroundOptions, type PoolOptions, type ResolvedPoolOptions } from '../options';
import { timerScheduler } from '../scheduler';
import { isControlAction, type Action } from './actions';
import { CheckOutRequest, type CheckOutOptions, type CheckOutPort } from './check-out';
import { CommandRunner, type Command, type ConnectionFactory } from './commands';
import { Mailbox } from './mailbox';
import { reduce } from './reducer';
import { initialPoolState, type PoolConnection, type PoolState, type PoolStatus, type Waiter } from './state';

/**
 * Options of a {@link ConnectionPool}: the CMAP pool options (see {@link PoolOptions}; durations in ms), the
 * address, and how connections are made.
 */
export interface ConnectionPoolOptions<C extends PoolConnection = Connection> extends PoolOptions, BackgroundOptions {
  /** The Endpoint, `host:port` (host alone means port 27017). Required. */
  address: string;
  /**
   * Establishes connections. Default: real MongoDB connections over TCP (socket connect, OP_MSG `hello`
   * handshake), configured by `connectionOptions`.
   */
  connectionFactory?: ConnectionFactory<C>;
  /** Options of the default connection factory (appName, timeouts). Ignored when `connectionFactory` is given. */
  connectionOptions?: ConnectionOptions;
  /**
   * The clock and timers of the pool (WaitQueue deadlines, Background Thread Runs). Default: unref'd Node timers
   * and a monotonic clock. Inject a virtual-time scheduler to test deterministically.
   */
  scheduler?: SchedulerLike;
  /**
   * Decides whether an establishment error clears the pool (generation + 1, paused, WaitQueue evicted), as SDAM
   * does for errors before or during the handshake. Default: every error clears, except one labelled
   * `SystemOverloadedError` (CMAP "Backpressure-enabled").
   */
  clearOnEstablishmentError?: (error: Error) => boolean;
  /**
   * Load-balanced mode (load balancer spec): connections take the generation of the service their handshake reached
   * (`serviceId`), `clear` must name a service and neither pauses the pool nor evicts the WaitQueue, and establishment
   * errors never clear the pool. The default connection factory then sends `hello` with `loadBalanced: true`.
   * Default false.
   */
  loadBalanced?: boolean;
  /**
   * Logging of the CMAP log messages (component `connection`, level `debug`), over the MONGODB_LOG_* environment
   * variables. When enabled, the pool writes every message to the configured destination, and {@link log$} emits them.
   */
  logging?: LoggingOptions;
}

/** Options of {@link ConnectionPool.clear}. */
export interface ClearOptions {
  /**
   * Also interrupt in-use connections of the cleared generations (their requests fail with PoolClearedError) and
   * abort establishments under way. Default false.
   */
  interruptInUseConnections?: boolean;
  /** The error that caused the clear; PoolClearedError messages quote it. */
  cause?: unknown;
  /**
   * Load-balanced mode only, and required there: the service to clear (an ObjectId or its hex string). Only that
   * service's generation is incremented.
   */
  serviceId?: string | { toHexString(): string };
}

/** A frozen snapshot of a pool's counters (CMAP "ConnectionPool" members). */
export interface PoolSnapshot {
  readonly address: string;
  readonly status: PoolStatus;
  readonly generation: number;
  /** pending + available + in use. */
  readonly totalConnectionCount: number;
  readonly availableConnectionCount: number;
  readonly pendingConnectionCount: number;
  readonly inUseConnectionCount: number;
  /** Checkouts waiting in the WaitQueue, plus those waiting on an establishment they claimed. */
  readonly waitQueueLength: number;
  /** Load-balanced mode: each service's generation and established connection count. */
  readonly services: readonly { readonly serviceId: string; readonly generation: number; readonly connectionCount: number }[];
}

/**
 * A MongoDB connection pool for one Endpoint, per the CMAP specification, as one serialized reactive state machine.
 *
 * Starts paused: call {@link ready} (a monitor does it after a successful check) before checking out.
 *
 * @typeParam C the connection type its factory makes (default: the TCP {@link Connection}).
 * @throws {InvalidOptionError} from the constructor, for an invalid option (named in the error).
 */
export class ConnectionPool<C extends PoolConnection = Connection> {
  /** The pool's Endpoint, normalized to `host:port`. */
  readonly address: string;
  /** The resolved pool options (defaults applied). */
  readonly options: ResolvedPoolOptions;

  /**
   * Every CMAP event, in the order the pool committed the state changes they describe, typed as a discriminated
   * union on `type`. Each subscriber first receives the pool's ConnectionPoolCreated event (committed when the pool
   * was constructed), then every event committed after it subscribed. Event objects are built only while someone
   * subscribes. A subscriber that throws affects neither the pool nor other subscribers (RxJS reports the error
   * asynchronously). Never completes.
   */
  readonly events$: Observable<ConnectionPoolEvent>;

  /**
   * The CMAP log messages derived from {@link events$}, when the `connection` component logs at `debug` (see the
   * `logging` option and MONGODB_LOG_CONNECTION / MONGODB_LOG_ALL); otherwise it completes at once and nothing is
   * built. Each message has the spec's structured keys (`toJSON()`) and its unstructured form (`render()`).
   *
   * Source: CMAP spec, "Connection Pool Logging"; logging spec.
   */
  readonly log$: Observable<ConnectionLogMessage>;

  private readonly state: PoolState<C>;
  /** The pool's one serialized input: every action, from every source, goes through it. */
  private readonly inputs = new Mailbox<Action<C>>(isControlAction);
  private readonly events = new Subject<ConnectionPoolEvent>();
  private readonly runner: CommandRunner<C>;
  private readonly port: CheckOutPort<C>;
  private observers = 0;

  constructor(options: ConnectionPoolOptions<C>) {
    if (options === null || typeof options !== 'object') {
      throw new TypeError('ConnectionPool options must be an object with at least an address');
    }
    const server = parseAddress(options.address);
    this.address = server.address;
    this.options = resolvePoolOptions(options);
    const scheduler = options.scheduler ?? timerScheduler;
    const loadBalanced = options.loadBalanced === true;
    const factory =
      options.connectionFactory ??
      (connectionFactory({ ...options.connectionOptions, loadBalanced, host: server.host, port: server.port }) as unknown as ConnectionFactory<C>);
    this.state = initialPoolState<C>(this.address, this.options, () => scheduler.now(), loadBalanced);

    const dispatch = (action: Action<C>): void => this.inputs.next(action);
    this.runner = new CommandRunner<C>({
      address: this.address,
      factory,
      scheduler,
      events: this.events,
      clearOnEstablishmentError: options.clearOnEstablishmentError ?? defaultClearOnEstablishmentError,
      dispatch,
    });
    this.port = {
      address: this.address,
      enter: (waiter: Waiter<C>) => dispatch({ type: 'checkOut', waiter }),
      leave: (waiter: Waiter<C>) => dispatch({ type: 'cancel', waiter }),
    };

    const state = this.state;
    const seed: { commands: readonly Command<C>[] } = { commands: [] };
    this.inputs
      .pipe(
        scan((step, action) => {
          step.commands = reduce(state, action);
          return step;
        }, seed),
      )
      .subscribe((step) => this.runner.run(step.commands));

    // CMAP "Creating a Connection Pool": generation 0, paused, ConnectionPoolCreated.
    const created: ConnectionPoolCreatedEvent = Object.freeze({
      type: 'ConnectionPoolCreated',
      address: this.address,
      time: scheduler.now(),
      options: this.options.userSet,
    });
    this.events$ = new Observable<ConnectionPoolEvent>((subscriber) => {
      subscriber.next(created);
      const inner = this.events.subscribe(subscriber);
      if (this.observers++ === 0) dispatch({ type: 'monitor', monitored: true });
      return () => {
        inner.unsubscribe();
        if (--this.observers === 0) dispatch({ type: 'monitor', monitored: false });
      };
    });

    const logSettings = resolveLogSettings(options.logging);
    if (willLog(logSettings.severities.connection, 'debug')) {
      this.log$ = this.events$.pipe(map((e) => connectionLogMessage(e, server, logSettings.maxDocumentLength)));
      this.writeLog(logSettings.path);
    } else {
      this.log$ = EMPTY;
    }
  }

  /** Writes every log message to `path`; a sink the pool opened itself is closed once the pool is closed and empty. */
  private writeLog(path: string | LogSink): void {
    const sink = openLogSink(path);
    const owned = typeof path === 'string';
    let poolClosed = false;
    const subscription = this.log$.subscribe((message) => {
      sink.write(message);
      poolClosed ||= message.fields.message === 'Connection pool closed';
      if (poolClosed && this.state.records.size === 0) {
        subscription.unsubscribe();
        if (owned) sink.close?.();
      }
    });
  }

  /** The pool generation: 0 at creation, + 1 on every clear. */
  get generation(): number {
    return this.state.generation;
  }

  /** The pool's state: `paused`, `ready` or `closed`. */
  get status(): PoolStatus {
    return this.state.status;
  }

  /** A frozen snapshot of the pool's counters, as of the last committed action. */
  snapshot(): PoolSnapshot {
    const s = this.state;
    return Object.freeze({
      address: s.address,
      status: s.status,
      generation: s.generation,
      totalConnectionCount: s.records.size,
      availableConnectionCount: s.available.size,
      pendingConnectionCount: s.pendingCount,
      inUseConnectionCount: s.records.size - s.available.size - s.pendingCount,
      waitQueueLength: s.waitQueue.live + s.establishing.live,
      services: Object.freeze(
        [...s.services].map(([serviceId, g]) => Object.freeze({ serviceId, generation: g.generation, connectionCount: g.connectionCount })),
      ),
    });
  }

  /**
   * Checks out a connection: the first non-perished available one (the most recently used), else a new one while
   * total < maxPoolSize and pending < maxConnecting, else it waits in the FIFO WaitQueue (at most
   * waitQueueTimeoutMS, when set). The connection must be returned with {@link checkIn}.
   *
   * Returns a lazy {@link CheckOutRequest}: `await` it (cancel with `options.signal`), or subscribe to it (cancel by
   * unsubscribing). Fails with PoolClosedError (pool closed), PoolClearedError (pool paused, or cleared while
   * waiting; retryable), WaitQueueTimeoutError, CheckOutCancelledError (signal aborted), or the error that failed
   * the establishment of the connection it started.
   *
   * Source: CMAP spec, "Checking Out a Connection".
   */
  checkOut(options?: CheckOutOptions): CheckOutRequest<C> {
    return new CheckOutRequest<C>(this.port, options?.signal);
  }

  /**
   * Checks a connection back in: emits ConnectionCheckedIn, then closes it if it is perished (stale, errored) or the
   * pool is closed, else makes it available.
   *
   * @throws {ConnectionCheckInError} synchronously, for a connection this pool did not create (or already closed),
   *   or one that is not checked out (already checked in).
   *
   * Source: CMAP spec, "Checking In a Connection".
   */
  checkIn(connection: C): void {
    const id = (connection as Partial<PoolConnection> | null | undefined)?.id;
    const rec = typeof id === 'number' ? this.state.records.get(id) : undefined;
    if (rec === undefined || rec.connection !== connection) {
      throw new ConnectionCheckInError(this.address, id, 'it is not a live connection of this pool');
    }
    if (rec.state !== 'in use' || rec.checkInQueued) {
      throw new ConnectionCheckInError(this.address, id, 'it is not checked out');
    }
    rec.checkInQueued = true;
    this.inputs.next({ type: 'checkIn', connection: rec.connection });
  }

  /**
   * Checks out a connection, runs `fn` with it, and checks it in whatever `fn` does (returns, throws, rejects, or
   * checks it in itself). Resolves to `fn`'s result; rejects with `fn`'s error or the checkout's error.
   *
   * Source: CMAP spec, "withConnection".
   */
  async withConnection<T>(fn: (connection: C) => T | PromiseLike<T>, options?: CheckOutOptions): Promise<T> {
    const connection = await this.checkOut(options);
    try {
      return await fn(connection);
    } finally {
      this.release(connection);
    }
  }

  /**
   * The Observable form of {@link withConnection}: on subscription checks out a connection, subscribes to
   * `fn(connection)`, and checks the connection in when that completes, errors, or is unsubscribed.
   */
  withConnection$<T>(fn: (connection: C) => ObservableInput<T>, options?: CheckOutOptions): Observable<T> {
    return this.checkOut(options).pipe(
      switchMap((connection) => defer(() => from(fn(connection))).pipe(finalize(() => this.release(connection)))),
    );
  }

  /**
   * Clears the pool: increments the generation (every existing connection becomes stale and is closed when next
   * met), pauses the pool, and fails every waiting checkout with PoolClearedError. Emits ConnectionPoolCleared unless
   * the pool was already paused. With `interruptInUseConnections`, in-use connections of the cleared generations are
   * interrupted and establishments under way aborted. No-op on a closed pool.
   *
   * In load-balanced mode, `serviceId` is required: only that service's generation is incremented, ConnectionPoolCleared
   * carries the serviceId, and the pool is neither paused nor its WaitQueue evicted.
   *
   * @throws {InvalidOptionError} (option `serviceId`) when it is missing in load-balanced mode, or given outside it.
   *
   * Source: CMAP spec, "Clearing a non-load balanced pool", "Clearing a load balanced pool".
   */
  clear(options: ClearOptions = {}): void {
    const serviceId = options.serviceId === undefined ? undefined : typeof options.serviceId === 'string' ? options.serviceId : options.serviceId.toHexString();
    if (this.state.loadBalanced && serviceId === undefined) {
      throw new InvalidOptionError('serviceId', undefined, 'given to clear() in load-balanced mode (only one service is cleared)');
    }
    if (!this.state.loadBalanced && serviceId !== undefined) {
      throw new InvalidOptionError('serviceId', serviceId, 'absent outside load-balanced mode (the whole pool is cleared)');
    }
    this.inputs.next({
      type: 'clear',
      interruptInUseConnections: options.interruptInUseConnections === true,
      cause: options.cause,
      ...(serviceId === undefined ? {} : { serviceId }),
    });
  }

  /**
   * Marks a paused pool ready: emits ConnectionPoolReady, then allows checkouts and background population. No-op
   * (no event) on a ready or closed pool.
   *
   * Source: CMAP spec, "Marking a Connection Pool as Ready".
   */
  ready(): void {
    this.inputs.next({ type: 'ready' });
  }

  /**
   * Closes the pool, for good: closes available and pending connections, emits ConnectionPoolClosed, fails waiting
   * checkouts with PoolClosedError, and stops its timers. In-use connections are closed when checked in. Idempotent.
   *
   * Source: CMAP spec, "Closing a Connection Pool".
   */
  close(): void {
    this.inputs.next({ type: 'close' });
  }

  /**
   * Makes a monitor's heartbeats an input of the pool: each ServerHeartbeatSucceeded marks the pool ready; each
   * ServerHeartbeatFailed clears it (the error is the cause), interrupting in-use connections when the check failed
   * with a network timeout. Unsubscribe the returned Subscription to stop following.
   *
   * Source: server monitoring spec, "Marking the connection pool as ready (CMAP only)", "Network or command error
   * during server check".
   */
  followHeartbeats(heartbeats$: Observable<ServerHeartbeatEvent>): Subscription {
    return this.inputs.merge(heartbeats$.pipe(heartbeatActions<C>()));
  }

  /** Checks a connection in if it is still checked out (used by the scoped forms). */
  private release(connection: C): void {
    const rec = this.state.records.get(connection.id);
    if (rec?.connection === connection && rec.state === 'in use' && !rec.checkInQueued) this.checkIn(connection);
  }
}

/** Heartbeat outcomes as pool actions: success → ready; failure → clear (interrupting on a network timeout). */
function heartbeatActions<C>(): OperatorFunction<ServerHeartbeatEvent, Action<C>> {
  return (events) =>
    events.pipe(
      filter((e) => e.type !== 'ServerHeartbeatStarted'),
      map((e): Action<C> =>
        e.type === 'ServerHeartbeatFailed'
          ? { type: 'clear', cause: e.error, interruptInUseConnections: e.error instanceof MongoNetworkTimeoutError }
          : { type: 'ready' },
      ),
    );
}

/** SDAM's rule for errors before or during the handshake, minus those CMAP labels as backpressure. */
function defaultClearOnEstablishmentError(error: Error): boolean {
  return !(error instanceof CmapError && error.hasErrorLabel(ErrorLabel.SystemOverloadedError));
}
