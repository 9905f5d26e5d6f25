/**
 * ConnectionPoolCore: the pool as one serialized reactive state machine, without default wiring. Its inputs
 * (checkout requests and cancellations, check-ins, clear/ready/close, establishment results, timers, and streams of
 * actions subscribed into {@link ConnectionPoolCore.input}) go into one {@link PoolInput}; `scan(reduce)` folds them,
 * one at a time, into the pool state; the commands each step leaves are then run in order:
 *
 * ```
 * input ──► scan(reduce, initialPoolState) ──► runner.run(state.commands) ──► events$, deliveries, sockets, timers
 *      └─(after each batch)──────────────────────────────────────────────────► state$
 * ```
 *
 * A step that throws (a fault of the pool itself) closes the pool instead of stopping the machine: see
 * `reduceFailingClosed`.
 *
 * It knows connections only through its contract (`connectionFactory`); `ConnectionPool` (the public class) adds
 * the default TCP factory and the log feed.
 *
 * Source: CMAP spec, "Connection Pool Behaviors", "Connection Pool Monitoring", "withConnection".
 */
import { inspect, type InspectOptionsStylized } from 'node:util';
import {
  defer,
  finalize,
  from,
  isObservable,
  Observable,
  scan,
  switchMap,
  tap,
  type ObservableInput,
  type Observer,
  type SchedulerLike,
  type Subscriber,
} from 'rxjs';
import { abortReason, listenToAbort } from '../abort-listeners';
import { parseAddress } from '../address';
import { ConnectionCheckInError, InvalidOptionError, MongoNetworkError, refusal } from '../errors';
import type { ConnectionPoolCreatedEvent, ConnectionPoolEvent } from '../events';
import { checkPoolCoreOptions, optionValue, optionValues, requireAbortSignal, requireDurationMS, requireMethodOptions, resolvePoolOptions, type ListsEveryOption, type BackgroundOptions, type PoolExtensionOptions, type PoolOptions, type ResolvedPoolOptions } from '../options';
import { timerScheduler } from '../scheduler';
import { isControlAction, type Action, type CheckOutSite } from './actions';
import { Broadcast } from './broadcast';
import { abortedBeforeEntry, CheckOutRequest, enterNow, type CheckOutOptions, type CheckOutPort, type CheckOutSettings } from './check-out';
import { CommandRunner, defaultClearOnEstablishmentError } from './command-runner';
import { hexServiceId, idOf, isPromiseLike, mayBeBusy } from './connection-checks';
import type { ConnectionFactory, PoolConnection } from './contract';
import { PoolInput } from './pool-input';
import { reportUnhandled } from './report-unhandled';
import { warmUp } from './warm-up';
import { reduceFailingClosed } from './reducer';
import { initialPoolState, inUseConnectionCount, recordOf, waitingCheckOutCount, type ConnectionPoolState, type PoolState } from './state';
import type { Waiter } from './wait-queue';

/**
 * Options of a {@link ConnectionPoolCore}: the CMAP pool options (see {@link PoolOptions}; durations in ms), the
 * opt-in extensions (see {@link PoolExtensionOptions}), the address, and how connections are made.
 *
 * Source: CMAP spec, "Connection Pool Options" and "Connection Pool" (address, establishing connections); the
 * load balancer spec (`loadBalanced`); each extension names its own source.
 */
export interface ConnectionPoolCoreOptions<C extends PoolConnection> extends PoolOptions, PoolExtensionOptions, BackgroundOptions {
  /** The Endpoint, `host:port` (host alone means port 27017), `[v6]:port`, or a Unix domain socket path (with a `/`, ending in `.sock`). Required. */
  address: string;
  /** Establishes connections (see {@link ConnectionFactory}). Required here; `ConnectionPool` defaults it to TCP. */
  connectionFactory: ConnectionFactory<C>;
  /**
   * The clock and timers of the pool (WaitQueue deadlines, Background Thread Runs, leak detection). Default: unref'd
   * Node timers and a monotonic clock. Inject a virtual-time scheduler (`VirtualClock` from `rxcmap/testing`) to test
   * deterministically. Its `now()` must not go back (the pool orders deadlines and checkouts by it): with a wall
   * clock's (RxJS's `asyncScheduler` reads `Date.now()`), a step back delays timeouts and leak reports by as much.
   */
  scheduler?: SchedulerLike | undefined;
  /**
   * Decides whether an establishment error clears the pool (generation + 1, paused, WaitQueue evicted), as SDAM
   * does for errors before or during the handshake. Default: every error clears, except one labelled
   * `SystemOverloadedError` (CMAP "Backpressure-enabled"). It must decide at once: one that throws or returns a Promise
   * (an async function) fails the establishment's checkout with a PoolCallbackError, and the default decides.
   * `establishment.generation` is the pool generation the connection was created in: one older than the pool's
   * (`generation`) is a stale establishment, begun before the last clear, whose error never clears the pool (SDAM,
   * "Application errors": an error of an older generation changes nothing), so a policy with other effects (marking
   * the server Unknown) leaves it alone too.
   */
  clearOnEstablishmentError?: ((error: Error, establishment: { readonly generation: number }) => boolean) | undefined;
  /**
   * Load-balanced mode (load balancer spec): connections take the generation of the service their handshake reached
   * (`serviceId`), `clear` must name a service and neither pauses the pool nor evicts the WaitQueue, and establishment
   * errors never clear the pool. Default false. The pool still starts paused: call `ready()` (`connect()` does it at
   * once in this mode, there being no monitor).
   */
  loadBalanced?: boolean | undefined;
}

/**
 * Options of {@link ConnectionPoolCore.clear}.
 *
 * Source: CMAP spec, "Clearing a non-load balanced pool" (`interruptInUseConnections`), "Clearing a load balanced
 * pool" (`serviceId`); `cause`: extension (the Node.js driver's PoolClearedError quotes the error that cleared).
 */
export interface ClearOptions {
  /**
   * Also interrupt in-use connections of the cleared generations (their requests fail with PoolClearedError) and
   * abort establishments under way. Default false. Not applied in load-balanced mode: a service's clear never
   * interrupts (ConnectionPoolCleared then reports `interruptInUseConnections: false`), since interrupting is what a
   * monitor's failed check asks for, and that mode has no monitor.
   */
  interruptInUseConnections?: boolean | undefined;
  /** The error that caused the clear; PoolClearedError messages quote it. */
  cause?: unknown;
  /**
   * Load-balanced mode only, and required there: the service to clear (an ObjectId or its 24-character hex string, in
   * either case; `''` for the connections whose handshake reported no serviceId). Only that service's generation is
   * incremented.
   */
  serviceId?: string | {
    /** The ObjectId's 24-character hex string. */
    toHexString(): string;
  } | undefined;
}

/**
 * What a stream may send into a pool's {@link ConnectionPoolCore.input}: the same as calling `ready()`,
 * `clear(options)` or `close()`.
 *
 * Source: CMAP spec, "ready", "clear", "close"; extension: as stream values (a monitor's heartbeats mapped by
 * `heartbeatActions()` are the use).
 */
export type PoolInputAction =
  | {
      /** As `ready()`. */
      readonly type: 'ready';
    }
  | ({
      /** As `clear(options)`, with the other fields as its {@link ClearOptions}. */
      readonly type: 'clear';
    } & ClearOptions)
  | {
      /** As `close()`. */
      readonly type: 'close';
    };

/**
 * A frozen snapshot of a pool's state and counters. Counts are of connections, except `waitQueueLength` (checkouts).
 *
 * Source: CMAP spec, "Connection Pool Members" (ConnectionPool: state, generation, serviceGenerations, the counts);
 * `inUseConnectionCount` and `waitQueueLength`: extension, derived the same way.
 */
export interface PoolSnapshot {
  /** The pool's Endpoint, `host:port`. */
  readonly address: string;
  /** CMAP `ConnectionPool.state`. */
  readonly state: ConnectionPoolState;
  /**
   * Whether `drain()` took effect and the pool is not closed yet: new checkouts fail with PoolClosedError while the
   * waiting and in-use ones finish, whatever `state` says (`ready` or `paused`). Extension (see `drain()`).
   */
  readonly draining: boolean;
  /** CMAP `ConnectionPool.generation`: 0 at creation, + 1 on every (non-load-balanced) clear. */
  readonly generation: number;
  /** pending + available + in use. */
  readonly totalConnectionCount: number;
  /** Established connections waiting to be checked out. */
  readonly availableConnectionCount: number;
  /** Connections being established (from ConnectionCreated to ConnectionReady or ConnectionClosed). */
  readonly pendingConnectionCount: number;
  /** Connections checked out and not yet checked in. */
  readonly inUseConnectionCount: number;
  /** Checkouts waiting in the WaitQueue, plus those waiting on an establishment they claimed. */
  readonly waitQueueLength: number;
  /**
   * Load-balanced mode (CMAP `serviceGenerations`): each service's generation and connection count (a connection
   * counts from its handshake on); empty otherwise. Frozen, and the same array as the previous snapshot's while no
   * service changed.
   */
  readonly serviceGenerations: readonly ServiceGenerationSnapshot[];
}

/** One service behind a load balancer, in a {@link PoolSnapshot}. Source: CMAP spec, `serviceGenerations`. */
export interface ServiceGenerationSnapshot {
  /** The service's id from the handshake (`serviceId`), as a hex string. */
  readonly serviceId: string;
  /** The service's generation: + 1 on every `clear({ serviceId })`. */
  readonly generation: number;
  /** Connections that reach it: available, in use, and pending ones whose handshake is done. */
  readonly connectionCount: number;
}

/**
 * A MongoDB connection pool for one Endpoint, per the CMAP specification, as one serialized reactive state machine,
 * with no default wiring: give it a `connectionFactory`. Use {@link ConnectionPool} for real MongoDB connections
 * over TCP/TLS and the log feed.
 *
 * Starts paused: call {@link ready} (a monitor does it after a successful check) before checking out.
 *
 * @typeParam C the connection type its factory makes.
 * @throws {InvalidOptionError} from the constructor, for an invalid or missing option (named in the error).
 *
 * Source: CMAP spec, "Connection Pool" (its members, states and behaviour); each extension names its own source.
 */
export class ConnectionPoolCore<C extends PoolConnection = PoolConnection> {
  /** The pool's Endpoint, normalized to `host:port`. */
  readonly address: string;
  /** The resolved pool options (defaults applied). */
  readonly options: ResolvedPoolOptions;

  /**
   * Every CMAP event, in the order the pool committed the state changes they describe, typed as a discriminated
   * union on `type`. Each subscriber first receives the pool's ConnectionPoolCreated event (committed when the pool
   * was constructed), then every event committed after it subscribed (subscribed from an `events$` subscriber, it
   * receives the events of the steps after the one being delivered). Event objects are built only while someone
   * subscribes. Never completes: even a closed pool emits ConnectionCheckOutStarted and ConnectionCheckOutFailed for
   * each checkout attempted on it (CMAP "Checking Out a Connection"); `state$` completes when the pool is done.
   *
   * A subscriber that throws affects neither the pool nor other subscribers; RxJS reports the error as unhandled
   * (`config.onUnhandledError` when set, else it is thrown asynchronously, which ends a Node process that does not
   * handle it).
   *
   * @example
   * ```ts
   * pool.events$
   *   .pipe(filter((e) => e.type === 'ConnectionCheckOutFailed'))
   *   .subscribe((e) => console.warn(`checkout failed: ${e.reason}`, e.duration === undefined ? '' : `after ${e.duration} ms`));
   * ```
   *
   * Source: CMAP spec, "Connection Pool Monitoring".
   */
  readonly events$: Observable<ConnectionPoolEvent>;

  /**
   * The pool state stream: the current {@link PoolSnapshot} on subscribe, then one snapshot after each committed
   * batch of actions that changed the pool's state, `draining`, generation or a count. Nothing is built while nobody
   * subscribes. Completes once the pool is closed and its last connection is closed (a late subscriber receives the final
   * snapshot, then completion). A subscription made while the pool processes a batch (from an `events$` subscriber)
   * starts from the pool as it is then, which may be ahead of that batch's events still to be delivered; the
   * subscribers already there receive the change after the batch, once every one of its events has been delivered.
   *
   * @example
   * ```ts
   * pool.state$.subscribe((s) => gauge.set(s.inUseConnectionCount));
   * // backpressure: shed load while checkouts queue up
   * const busy$ = pool.state$.pipe(map((s) => s.waitQueueLength > 100), distinctUntilChanged());
   * ```
   *
   * Source: extension (the CMAP "ConnectionPool" members, published as a stream).
   */
  readonly state$: Observable<PoolSnapshot>;

  /**
   * The pool as an RxJS `Observer`: a stream of {@link PoolInputAction}s subscribed into it acts as the matching
   * calls to `ready()`, `clear()` and `close()`, serialized with every other input. Its `complete` and `error` end
   * only that stream's contribution; the pool stays open.
   *
   * @example
   * ```ts
   * monitor.heartbeats$.pipe(heartbeatActions()).subscribe(pool.input);
   * ```
   *
   * Source: extension (CMAP's pool inputs as an RxJS Observer).
   */
  readonly input: Observer<PoolInputAction>;

  private readonly poolState: PoolState<C>;
  private readonly actions: PoolInput<Action<C>>;
  private readonly events = new Broadcast<ConnectionPoolEvent>();
  private readonly states = new Broadcast<PoolSnapshot>();
  private readonly port: CheckOutPort<C>;
  private readonly checkOutSites: WeakMap<CheckOutRequest<C>, CheckOutSite> | undefined;
  private lastSnapshot: PoolSnapshot | undefined;
  /** Whether a step's commands are being run (its events going out). */
  private stepping = false;
  /** The `events$` subscribers made while a step's events went out, listed once they have. */
  private joiningEvents: EventsJoiner[] = [];
  /** The `state$` subscribers made in the middle of a batch, listed with the others once it is over. */
  private joiningStates: StateJoiner[] = [];
  /** The resolves of `drain()` calls, settled once the pool is closed. */
  private drained: (() => void)[] = [];
  private finished = false;
  private observers = 0;

  constructor(options: ConnectionPoolCoreOptions<C>) {
    checkPoolCoreOptions(options, 'ConnectionPoolCore', [], 'an object with at least an address and a connectionFactory');
    const server = parseAddress(optionValue(options, 'address'));
    this.address = server.address;
    this.options = resolvePoolOptions(options);
    const factory = optionValue(options, 'connectionFactory');
    if (typeof factory !== 'function') {
      throw new InvalidOptionError('connectionFactory', factory, 'a function (descriptor) => ObservableInput<connection>');
    }
    const scheduler = optionValue(options, 'scheduler') ?? timerScheduler;
    const state = initialPoolState<C>(this.address, this.options, () => scheduler.now(), optionValue(options, 'loadBalanced') === true, {
      address: this.address,
      serverAddress: server.host,
      serverPort: server.port,
      pool: this,
    });
    this.poolState = state;
    this.actions = new PoolInput<Action<C>>(isControlAction, () => this.afterBatch());

    const dispatch = (action: Action<C>): void => this.actions.next(action);
    // Leak detection: where each checkout was requested, captured by checkOut() and taken by its waiter on entry.
    const sites = this.options.leakDetectionThresholdMS > 0 ? new WeakMap<CheckOutRequest<C>, CheckOutSite>() : undefined;
    this.checkOutSites = sites;
    const runner = new CommandRunner<C>({
      address: this.address,
      serverAddress: server.host,
      serverPort: server.port,
      pool: this,
      factory,
      scheduler,
      events: this.events,
      clearOnEstablishmentError: optionValue(options, 'clearOnEstablishmentError') ?? defaultClearOnEstablishmentError,
      dispatch,
    });
    this.port = {
      address: this.address,
      serverAddress: server.host,
      serverPort: server.port,
      pool: this,
      scheduler,
      enter:
        sites === undefined
          ? (waiter: Waiter<C>, request: CheckOutRequest<C>, high: boolean) => dispatch({ type: 'checkOut', waiter, high, purpose: request.purpose })
          : (waiter: Waiter<C>, request: CheckOutRequest<C>, high: boolean) =>
              dispatch({ type: 'checkOut', waiter, site: sites.get(request), high, purpose: request.purpose }),
      leave: (waiter: Waiter<C>, error?: Error, timeoutMS?: number) => dispatch({ type: 'cancel', waiter, error, timeoutMS }),
    };

    // The shape of the pool: one serialized input, folded into the pool state, each step's commands run in order.
    this.actions.pipe(scan(reduceFailingClosed<C>, state)).subscribe((s) => {
      this.stepping = true;
      runner.run(s.commands); // reports a faulty command and goes on: never throws
      this.stepping = false;
      if (this.joiningEvents.length > 0) this.admitJoiningEvents();
    });

    // CMAP "Creating a Connection Pool": generation 0, paused, ConnectionPoolCreated.
    const created: ConnectionPoolCreatedEvent = Object.freeze({
      type: 'ConnectionPoolCreated',
      address: this.address,
      time: scheduler.now(),
      options: this.options.userSet,
    });
    this.events$ = new Observable<ConnectionPoolEvent>((subscriber) => {
      // Observing and listed before ConnectionPoolCreated goes out, so the events of what the subscriber does from
      // that first callback (ready(), a checkout) reach it too, after ConnectionPoolCreated. Set at once, not queued
      // as an action: subscribed mid-batch, the steps already queued are committed after it subscribed, and must
      // build their events (no step is being reduced here: reducing runs no user code).
      if (this.observers++ === 0) this.poolState.observed = true;
      // Subscribed while a step's events go out (from an events$ subscriber): listed once they have, so it receives
      // the events committed after it subscribed, not the rest of a step whose changes snapshot() already shows.
      const joiner: EventsJoiner = { subscriber, remove: undefined };
      if (this.stepping) this.joiningEvents.push(joiner);
      else joiner.remove = this.events.add(subscriber);
      subscriber.next(created);
      return () => {
        joiner.remove?.(); // not listed yet: it never will be (see admitJoiningEvents)
        if (--this.observers === 0) this.poolState.observed = false;
      };
    });
    this.state$ = new Observable<PoolSnapshot>((subscriber) => {
      if (!this.states.observed) this.lastSnapshot = this.snapshot();
      if (this.finished) {
        subscriber.next(this.lastSnapshot!);
        return subscriber.complete();
      }
      if (this.changedSince(this.lastSnapshot!)) {
        // Subscribed in the middle of a batch that changed the pool (from an events$ subscriber, say): it starts from
        // the pool as it is now, and joins the others after the batch. They receive the change after the batch, as
        // always: sent to them now, it would reach them before the rest of the batch's events reach events$.
        const joiner: StateJoiner = { subscriber, first: this.snapshot(), remove: undefined };
        this.joiningStates.push(joiner);
        subscriber.next(joiner.first);
        return () => joiner.remove?.(); // not listed yet: it never will be (see admitJoiningStates)
      }
      // Listed before its first snapshot goes out, so a change it makes from that first callback reaches it too.
      const remove = this.states.add(subscriber);
      subscriber.next(this.lastSnapshot!);
      return remove;
    });
    this.input = {
      next: (action: PoolInputAction) => this.apply(action),
      error: (error: unknown) => this.actions.error(error),
      complete: () => undefined,
    };
  }

  /**
   * The pool generation: 0 at creation, + 1 on every clear. In load-balanced mode a clear increments only its
   * service's generation (see {@link PoolSnapshot.serviceGenerations}), so this stays 0.
   *
   * Source: CMAP spec, "Connection Pool" (`generation`), "Clearing a load balanced pool".
   */
  get generation(): number {
    return this.poolState.generation;
  }

  /**
   * Load-balanced mode: the current generation of the service `serviceId` (CMAP `serviceGenerations[serviceId]`), 0
   * for a service the pool counts no connection of (an entry goes with its last connection, and a new one starts at
   * 0). `serviceId` is named as `clear({ serviceId })` takes it: an ObjectId, its 24-character hex string in either
   * case, or `''` (the connections whose handshake reported none). One map lookup for a service the pool counts, for
   * callers that need the number on every command (a {@link snapshot} copies every service).
   *
   * @throws {InvalidOptionError} (option `serviceId`) for a value that names no ObjectId.
   *
   * Source: CMAP spec, "Connection Pool Members" (`serviceGenerations`), "Clearing a load balanced pool".
   */
  serviceGeneration(serviceId: string | { toHexString(): string }): number {
    const services = this.poolState.serviceGenerations;
    const known = typeof serviceId === 'string' ? services.get(serviceId) : undefined;
    if (known !== undefined) return known.generation;
    const key = normalServiceId(typeof serviceId === 'object' && serviceId !== null && typeof serviceId.toHexString === 'function' ? serviceId.toHexString() : serviceId);
    return services.get(key)?.generation ?? 0;
  }

  /** CMAP `ConnectionPool.state`: `paused`, `ready` or `closed`. Source: CMAP spec, "Connection Pool" (`state`). */
  get state(): ConnectionPoolState {
    return this.poolState.state;
  }

  /**
   * A frozen snapshot of the pool's state and counters, as of the last committed action (see {@link PoolSnapshot}).
   * Never throws, on a closed pool too.
   *
   * Source: CMAP spec, "Connection Pool" (`totalConnectionCount`, `availableConnectionCount`,
   * `pendingConnectionCount`, `generation`, `state`); the other counts: extension (the Node.js driver's pool getters).
   */
  snapshot(): PoolSnapshot {
    const s = this.poolState;
    return Object.freeze({
      address: s.address,
      state: s.state,
      draining: isDraining(s),
      generation: s.generation,
      totalConnectionCount: s.records.size,
      availableConnectionCount: s.available.size,
      pendingConnectionCount: s.pendingConnectionCount,
      inUseConnectionCount: inUseConnectionCount(s),
      waitQueueLength: waitingCheckOutCount(s),
      serviceGenerations: serviceGenerationsOf(s, this.lastSnapshot),
    });
  }

  /**
   * The JSON form of the pool: its {@link snapshot} (address, state, generation, counts), so a log line or a
   * diagnostics channel message that carries the pool (`pool` in every one) is written as what the pool holds, never
   * as its connections, sockets and waiters (which form a cycle: `JSON.stringify` would throw). Never throws.
   *
   * Source: extension (what loggers and tracers write of an object they are handed).
   */
  toJSON(): PoolSnapshot {
    return this.snapshot();
  }

  /**
   * The pool's kind, `"ConnectionPoolCore"` (`"ConnectionPool"` for the subclass, the class's own name for a subclass
   * of user code): what `Object.prototype.toString` (`[object ConnectionPoolCore]`) and `util.inspect` show. Written
   * as a literal, so it stays when a minifying bundler renames the classes (esbuild, terser).
   *
   * Source: extension (ECMAScript `Symbol.toStringTag`).
   */
  get [Symbol.toStringTag](): string {
    return this.constructor === ConnectionPoolCore ? 'ConnectionPoolCore' : this.constructor.name;
  }

  /**
   * What `util.inspect` (and so `console.log`) shows: the pool's kind (its `Symbol.toStringTag`) and the
   * {@link snapshot}, e.g. `ConnectionPool { address: 'localhost:27017', state: 'ready', ... }`, at any depth and with
   * `showHidden`, never the pool's connections, sockets and waiters.
   *
   * Source: extension (see {@link toJSON}).
   */
  [inspect.custom](_depth: number, options: InspectOptionsStylized, show: typeof inspect = inspect): string {
    return `${this[Symbol.toStringTag]} ${show(this.snapshot(), { ...options, depth: 2 })}`;
  }

  /**
   * Checks out a connection: the first non-perished available one (the most recently used), else a new one while
   * total < maxPoolSize and pending < maxConnecting, else it waits in the FIFO WaitQueue (at most
   * waitQueueTimeoutMS, when set). The connection must be returned with {@link checkIn}.
   *
   * Returns a lazy {@link CheckOutRequest}: `await` it (cancel with `options.signal`), or subscribe to it (cancel by
   * unsubscribing). Fails with PoolClosedError (pool closed), PoolClearedError (pool paused, or cleared while
   * waiting; retryable), WaitQueueTimeoutError, WaitQueueFullError (`maxWaitQueueSize` already waiting),
   * CheckOutCancelledError (signal aborted), or the error that failed the establishment of the connection it started
   * (or of a background one it waited on). A connection established goes to the oldest checkout waiting on one; a
   * failure, to the checkout that started that establishment, else to the oldest one waiting on an establishment it
   * did not start (one whose own establishment is under way keeps waiting on it).
   *
   * @example
   * ```ts
   * const connection = await pool.checkOut({ signal: AbortSignal.timeout(1000) });
   * try {
   *   await connection.command('admin', { ping: 1 });
   * } finally {
   *   pool.checkIn(connection);
   * }
   * // or as an Observable: unsubscribing before delivery leaves the WaitQueue
   * pool.checkOut().pipe(timeout(1000)).subscribe((c) => pool.checkIn(c));
   * ```
   *
   * @throws {InvalidOptionError} synchronously, for options that are not an object (option `checkOut options`), a
   *   key that is not one of them (naming the closest), a `signal` that is not an AbortSignal, a `priority` other
   *   than `'high'` or `'normal'`, a `timeoutMS` that is not a number >= 0, or a `purpose` other than `'cursor'`,
   *   `'transaction'` or `'operation'` (each named).
   *
   * Source: CMAP spec, "Checking Out a Connection".
   */
  checkOut(options?: CheckOutOptions): CheckOutRequest<C> {
    const request = new CheckOutRequest<C>(this.port, options === undefined ? undefined : checkOutSettings(options));
    if (this.checkOutSites !== undefined) {
      const site: CheckOutSite = {};
      Error.captureStackTrace(site, ConnectionPoolCore.prototype.checkOut);
      this.checkOutSites.set(request, site);
    }
    return request;
  }

  /**
   * Warms the pool up: resolves with its snapshot once it is ready and holds at least minPoolSize established
   * connections (available or in use), at once when it already does; the filling is the pool's own population,
   * `maxConnecting` at a time. While the pool is paused it waits (a monitor readies it).
   *
   * @example
   * ```ts
   * pool.ready();
   * await pool.warmUp({ signal: AbortSignal.timeout(10_000) }); // then take traffic
   * ```
   *
   * @throws {InvalidOptionError} synchronously, for options that are not an object (option `warmUp options`), a key
   *   other than `signal` (named, with the closest option), or a `signal` that is not an AbortSignal.
   * @throws (rejection) the error of an establishment that failed meanwhile, one already under way at the call
   *   included (`ready()` starts establishing at once) (the pool is then cleared unless
   *   `clearOnEstablishmentError` says not to: by default an error labelled `SystemOverloadedError` does not clear);
   *   PoolClosedError when the pool is or gets closed; the signal's `reason` when `options.signal` aborts (the pool
   *   goes on filling), and the Error its `aborted` or `addEventListener` throws when it breaks or refuses a
   *   listener (for a value that is not an Error, an Error saying the warm-up's signal refused a listener, the value
   *   its `cause`); InvalidOptionError when minPoolSize > 0 but `backgroundThreadIntervalMS` < 0.
   *
   * Source: extension (the Rust driver's `Client::warm_connection_pool`); see {@link warmUp$} for the Observable form.
   */
  warmUp(options?: { signal?: AbortSignal | undefined }): Promise<PoolSnapshot> {
    requireMethodOptions('warmUp', options, WARM_UP_OPTION_NAMES);
    const signal = optionValue(options, 'signal');
    requireAbortSignal('signal', signal);
    return new Promise((resolve, reject) => {
      // Its `aborted` getter may throw (it broke after the options were checked): the wait could not be cancelled.
      const aborted = abortedBeforeEntry(signal, 'warm-up');
      if (aborted !== false) return reject(aborted === true ? abortReason(signal!) : aborted);
      let stopListening: (() => void) | undefined;
      const subscription = this.warmUp$().subscribe({
        next: resolve,
        error: (error: unknown) => {
          stopListening?.();
          reject(error);
        },
        complete: () => stopListening?.(),
      });
      if (!subscription.closed && signal !== undefined) {
        try {
          stopListening = listenToAbort(signal, () => {
            subscription.unsubscribe();
            reject(abortReason(signal));
          });
        } catch (error) {
          // A signal that refuses listeners: the wait could never be cancelled, so it ends now with that error.
          subscription.unsubscribe();
          reject(refusal("the warm-up's signal refused a listener", error));
        }
      }
    });
  }

  /**
   * The Observable form of {@link warmUp}: on subscription, emits the snapshot once the pool is warm, then
   * completes; errors as `warmUp` rejects; unsubscribing stops waiting (the pool goes on filling).
   *
   * Source: extension (see {@link warmUp}).
   */
  warmUp$(): Observable<PoolSnapshot> {
    const records = this.poolState.records;
    return warmUp({
      address: this.address,
      options: this.options,
      events$: this.events$,
      snapshot: () => this.snapshot(),
      pendingConnectionIds: () => [...records.values()].filter((rec) => rec.state === 'pending').map((rec) => rec.id),
    });
  }

  /**
   * Checks a connection back in: emits ConnectionCheckedIn, then closes it if it is perished (stale, errored) or the
   * pool is closed, else makes it available. A connection that says it is busy (`PoolConnection.busy === true`: a
   * request in flight, or replies of an exhaust stream still to come) is torn down and closed (reason `error`),
   * so its late reply never reaches the next borrower; the request in flight fails with a MongoNetworkError saying
   * it was checked in. One whose `busy` cannot be read counts as busy.
   *
   * The check-in ends the connection's current checkout. This method receives only the connection, so it cannot
   * tell its holder from a caller that held it before: code that checks in a connection it no longer holds ends
   * someone else's checkout. `withConnection` and `withConnection$` tie the check-in to their own checkout and
   * never do that. A duplicate made from inside the pool's own processing (an `events$` subscriber, a delivery
   * callback), queued behind the first check-in, is ignored rather than thrown.
   *
   * @throws {ConnectionCheckInError} synchronously, for a connection this pool did not create (or already closed),
   *   or one that is not checked out (already checked in).
   *
   * Source: CMAP spec, "Checking In a Connection"; closing a busy connection is an extension (the scoped forms' rule,
   * for requests that outlive their checkout such as the OP_MSG spec's moreToCome stream).
   */
  checkIn(connection: C): void {
    const rec = typeof connection === 'object' && connection !== null ? recordOf(this.poolState, connection) : undefined;
    if (rec === undefined) {
      const id = typeof connection === 'object' && connection !== null ? idOf(connection) : undefined;
      throw new ConnectionCheckInError(this.address, typeof id === 'number' ? id : undefined, 'it is not a live connection of this pool');
    }
    if (rec.state !== 'in use' || rec.holder === undefined) {
      throw new ConnectionCheckInError(this.address, rec.id, 'it is not checked out');
    }
    const discard = this.discardIfBusy(connection, rec.id, true, 'it was checked in');
    this.actions.next({ type: 'checkIn', connection, holder: rec.holder, discard });
  }

  /**
   * Checks out a connection, runs `fn` with it, and checks it in whatever `fn` does (returns, throws, rejects).
   * Resolves to `fn`'s result; rejects with `fn`'s error or the checkout's error. Only this checkout is ended: if
   * `fn` checked the connection in itself and it was checked out again by another caller, that caller keeps it.
   *
   * Nesting waits on the pool: a checkout made inside `fn` (another `withConnection`, say) needs a second connection
   * while this one is held, so once every connection is held by scopes doing so (always, with maxPoolSize 1) the inner
   * checkouts wait for each other for good, unless waitQueueTimeoutMS, the checkout's `timeoutMS` or its `signal`
   * bounds them (they then fail, e.g. with WaitQueueTimeoutError). Pass the connection down instead of nesting.
   *
   * @example
   * ```ts
   * const reply = await pool.withConnection((c) => c.command('admin', { ping: 1 }));
   * ```
   *
   * @throws {InvalidOptionError} synchronously, before anything is checked out: option `withConnection fn` when `fn` is
   *   not a function; the checkout's options as {@link checkOut} checks them.
   * @throws (rejection) `fn`'s error, or the checkout's (as {@link checkOut}).
   *
   * Source: CMAP spec, "withConnection".
   */
  withConnection<T>(fn: (connection: C) => T | PromiseLike<T>, options?: CheckOutOptions): Promise<T> {
    requireScope('withConnection', fn);
    // It enters the WaitQueue now, not when scoped's `await` reaches it a microtask later: in call order.
    return this.scoped(fn, enterNow(this.checkOut(options)));
  }

  private async scoped<T>(fn: (connection: C) => T | PromiseLike<T>, checkOut: PromiseLike<C>): Promise<T> {
    const connection = await checkOut;
    const holder = this.holderOf(connection);
    try {
      return await fn(connection);
    } finally {
      this.release(connection, holder, true);
    }
  }

  /**
   * The Observable form of {@link withConnection}: on subscription checks out a connection, subscribes to
   * `fn(connection)`, and checks the connection in when that completes, errors, or is unsubscribed. Only this
   * checkout is ended (as in `withConnection`). Unsubscribed before `fn`'s Observable finished (say by `timeout()`),
   * the connection goes back only if it says it is not busy (`PoolConnection.busy === false`): a request still in
   * flight could answer the next borrower, so such a connection is closed instead (ConnectionClosed, reason `error`).
   * When `fn` returned a Promise (an `async` scope) still pending at that moment, the connection is closed too, busy
   * or not: a Promise cannot be cancelled, so `fn` still runs and could send its next command on a connection lent
   * to someone else; that command fails with a MongoNetworkError instead.
   *
   * @example
   * ```ts
   * pool.withConnection$((c) => from(c.command('admin', { ping: 1 }))).pipe(retry({ count: 1 })).subscribe(console.log);
   * ```
   *
   * @throws {InvalidOptionError} synchronously, at the call: option `withConnection$ fn` when `fn` is not a function;
   *   the checkout's options as {@link checkOut} checks them.
   *
   * Source: CMAP spec, "withConnection" (as an Observable: extension).
   */
  withConnection$<T>(fn: (connection: C) => ObservableInput<T>, options?: CheckOutOptions): Observable<T> {
    requireScope('withConnection$', fn);
    return this.checkOut(options).pipe(
      switchMap((connection) => {
        const holder = this.holderOf(connection);
        let finished = false;
        // A Promise cannot be cancelled: unsubscribed while it is pending, fn is still running and may send its next
        // command on the connection, which must then not go back to the pool.
        let running = false;
        return defer(() => {
          const result = fn(connection);
          if (isObservable(result) || !isPromiseLike(result)) return from(result);
          running = true;
          // Its `then` is called once: a lazy thenable (a query builder) starts its work there, and a throw is its error.
          const settled = result instanceof Promise ? result : new Promise((resolve, reject) => void result.then(resolve, reject));
          settled.then(() => (running = false), () => (running = false));
          return from(settled);
        }).pipe(
          tap({ complete: () => (finished = true), error: () => (finished = true) }),
          finalize(() => this.release(connection, holder, finished, running)),
        );
      }),
    );
  }

  /**
   * Clears the pool: increments the generation (every existing connection becomes stale and is closed when next
   * met), pauses the pool, and fails every waiting checkout with PoolClearedError. Emits ConnectionPoolCleared unless
   * the pool was already paused. With `interruptInUseConnections`, in-use connections of the cleared generations are
   * interrupted and establishments under way aborted. No-op on a closed pool.
   *
   * In load-balanced mode, `serviceId` is required: only that service's generation is incremented, ConnectionPoolCleared
   * carries the serviceId, and the pool is neither paused nor its WaitQueue evicted; `interruptInUseConnections` is
   * not applied there (see {@link ClearOptions}).
   *
   * @throws {InvalidOptionError} synchronously: a key that is not an option of clear (named, with the closest option);
   *   option `serviceId` when it is missing in load-balanced mode, given
   *   outside it, or neither an ObjectId nor its 24-character hex string (either case) nor `''`; `interruptInUseConnections` when it is not a boolean; `clear
   *   options` when the options are not an object.
   *
   * Source: CMAP spec, "Clearing a non-load balanced pool", "Clearing a load balanced pool".
   */
  clear(options: ClearOptions = {}): void {
    requireMethodOptions('clear', options, CLEAR_OPTION_NAMES);
    const given = optionValue(options, 'serviceId');
    if (given !== undefined && typeof given !== 'string' && typeof (given as { toHexString?: unknown } | null)?.toHexString !== 'function') {
      throw new InvalidOptionError('serviceId', given, 'an ObjectId or its hex string');
    }
    const interruptInUseConnections = optionValue(options, 'interruptInUseConnections');
    if (interruptInUseConnections !== undefined && typeof interruptInUseConnections !== 'boolean') {
      throw new InvalidOptionError('interruptInUseConnections', interruptInUseConnections, 'true or false');
    }
    const serviceId = given === undefined ? undefined : normalServiceId(typeof given === 'string' ? given : given.toHexString());
    if (this.poolState.loadBalanced && serviceId === undefined) {
      throw new InvalidOptionError('serviceId', undefined, 'given to clear() in load-balanced mode (only one service is cleared)');
    }
    if (!this.poolState.loadBalanced && serviceId !== undefined) {
      throw new InvalidOptionError('serviceId', serviceId, 'absent outside load-balanced mode (the whole pool is cleared)');
    }
    this.actions.next({
      type: 'clear',
      interruptInUseConnections: interruptInUseConnections === true,
      cause: optionValue(options, 'cause'),
      ...(serviceId === undefined ? {} : { serviceId }),
    });
  }

  /**
   * Marks a paused pool ready: emits ConnectionPoolReady, then allows checkouts and background population. No-op
   * (no event) on a ready or closed pool. Never throws.
   *
   * Source: CMAP spec, "Marking a Connection Pool as Ready".
   */
  ready(): void {
    this.actions.next({ type: 'ready' });
  }

  /**
   * Closes the pool, for good: closes available and pending connections, emits ConnectionPoolClosed, fails waiting
   * checkouts with PoolClosedError, and stops its timers. In-use connections are closed when checked in; once the
   * last is, `state$` completes and leak detection's timer (which watches them until then) stops. Idempotent.
   *
   * Source: CMAP spec, "Closing a Connection Pool".
   */
  close(): void {
    this.actions.next({ type: 'close' });
  }

  /**
   * {@link close}, for a `using` declaration (`using pool = new ConnectionPool(...)`): the pool closes when the block
   * that declared it is left, however it is left. Synchronous and idempotent as `close()`; never throws.
   *
   * Source: extension (TC39 explicit resource management, `Symbol.dispose`; the official Node.js driver's MongoClient,
   * sessions and cursors are disposable too, asynchronously, with `Symbol.asyncDispose`).
   */
  [Symbol.dispose](): void {
    this.close();
  }

  /**
   * Drains the pool, then closes it: from now on new checkouts fail with PoolClosedError (ConnectionCheckOutFailed
   * reason `poolClosed`); checkouts already waiting are still served, by the connections checked in meanwhile (and
   * establishments they start); once nothing waits and nothing is in use, the pool closes as {@link close} does. If
   * `timeoutMS` (ms, a number >= 0; 0 = no deadline, the default) passes first, in-use connections are interrupted
   * (their requests fail with PoolClosedError) and the pool closes, failing what still waits. Emits
   * ConnectionPoolDraining (an extension event) first. Resolves once the pool is closed; at once on a closed pool.
   * Calling it again while draining changes nothing and resolves at the same moment.
   *
   * A method of its own rather than an option of `close()`: `close()` stays exactly the CMAP operation (synchronous,
   * idempotent, nothing awaited), and a drain is a phase before it, which a SIGTERM handler awaits.
   *
   * @example
   * ```ts
   * process.once('SIGTERM', async () => {
   *   await pool.drain({ timeoutMS: 10_000 });
   *   process.exit(0);
   * });
   * ```
   *
   * @throws {InvalidOptionError} synchronously, for options that are not an object (option `drain options`), a key
   *   other than `timeoutMS` (named, with the closest option), or a `timeoutMS` that is not a number >= 0.
   *
   * Source: extension (the mongodb-core 2.0 pool drains its queue before it is destroyed); CMAP spec, "Closing a
   * Connection Pool", for the close that ends it.
   */
  drain(options?: { timeoutMS?: number | undefined }): Promise<void> {
    requireMethodOptions('drain', options, DRAIN_OPTION_NAMES);
    const given = optionValue(options, 'timeoutMS');
    const timeoutMS = given === undefined ? 0 : requireDurationMS('timeoutMS', given, 'a number of ms >= 0 (0 means no deadline)');
    if (this.poolState.state === 'closed') return Promise.resolve();
    const drained = new Promise<void>((resolve) => this.drained.push(resolve));
    this.actions.next({ type: 'drain', timeoutMS });
    return drained;
  }

  /** One action from {@link input}: the same as the matching call. */
  private apply(action: PoolInputAction): void {
    switch (action?.type) {
      case 'ready':
        return this.ready();
      case 'clear': {
        const { type: _clear, ...options } = action;
        return this.clear(options);
      }
      case 'close':
        return this.close();
      default:
        throw new InvalidOptionError('input action', action, "{ type: 'ready' }, { type: 'clear', ...ClearOptions } or { type: 'close' }");
    }
  }

  /** The checkout that holds `connection` now (just delivered to the caller). */
  private holderOf(connection: C): Waiter<C> | undefined {
    return recordOf(this.poolState, connection)?.holder;
  }

  /**
   * Ends one checkout of the scoped forms: checks the connection in only if that checkout still holds it. A
   * connection that may still have a request in flight (busy, or not known to be idle when the work was abandoned
   * before it finished) is checked in to be closed, and torn down with that error as the pool takes the check-in, so
   * the pool never lends it out mid-request (whether or not the connection reports itself errored once destroyed).
   */
  private release(connection: C, holder: Waiter<C> | undefined, finished: boolean, running = false, again = true): void {
    const rec = holder === undefined ? undefined : recordOf(this.poolState, connection);
    if (holder === undefined || rec?.connection !== connection || rec.state !== 'in use' || rec.holder !== holder) return;
    const discard = running
      ? new MongoNetworkError(this.address, `Connection ${rec.id} to ${this.address} closed: its scoped checkout ended while its scope was still running`)
      : this.discardIfBusy(connection, rec.id, finished, 'its scoped checkout ended');
    try {
      this.actions.next({ type: 'checkIn', connection: rec.connection, holder, discard });
    } catch (fault) {
      // A fault of the pool's own input, which may have lost the check-in. Nobody called checkIn here to retry it, and
      // thrown from a scope's end it would replace fn's result, or vanish in an RxJS teardown: it is reported as any
      // fault of the pool is, and the check-in is made once more a microtask later (a duplicate is ignored).
      reportUnhandled(fault);
      if (again) queueMicrotask(() => this.release(connection, holder, finished, running, false));
    }
  }

  /**
   * The error to tear connection `id` down with as it is checked in, when it may still have a request in flight
   * (`finished`: its holder's work is known to have ended; see `mayBeBusy`); undefined when it is idle. `when` says
   * what ended the checkout. The reducer tears it down once it takes the check-in, never the caller: a check-in made
   * inside the pool's processing is queued, and a duplicate queued behind the one that counts is ignored; it must not
   * destroy the connection the next holder has by then.
   */
  private discardIfBusy(connection: C, id: number, finished: boolean, when: string): MongoNetworkError | undefined {
    return mayBeBusy(connection, finished)
      ? new MongoNetworkError(this.address, `Connection ${id} to ${this.address} closed: ${when} while a request was in flight`)
      : undefined;
  }

  /**
   * After each batch of actions: publishes a snapshot on state$ when something it shows changed, and completes
   * state$ once the pool is closed and empty (nothing it shows can change after that).
   */
  private afterBatch(): void {
    if (this.finished) return;
    const s = this.poolState;
    if (s.state === 'closed' && this.drained.length > 0) for (const resolve of this.drained.splice(0)) resolve();
    if (this.states.observed) this.publishChangedState();
    if (this.joiningStates.length > 0) this.admitJoiningStates();
    if (s.state === 'closed' && s.records.size === 0) {
      this.finished = true;
      this.states.complete();
    }
  }

  /** Publishes a snapshot on state$ when something it shows changed since the last one published. */
  private publishChangedState(): void {
    if (this.lastSnapshot === undefined || this.changedSince(this.lastSnapshot)) {
      this.lastSnapshot = this.snapshot();
      this.states.next(this.lastSnapshot);
    }
  }

  /** After a step's commands ran: lists the `events$` subscribers made meanwhile, unless they already left. */
  private admitJoiningEvents(): void {
    for (const joiner of this.joiningEvents.splice(0)) if (!joiner.subscriber.closed) joiner.remove = this.events.add(joiner.subscriber);
  }

  /**
   * After a batch: the `state$` subscribers made during it receive what the rest of it changed since their first
   * snapshot, then are listed with the others, unless they already left.
   */
  private admitJoiningStates(): void {
    if (this.changedSince(this.lastSnapshot!)) this.lastSnapshot = this.snapshot();
    for (const joiner of this.joiningStates.splice(0)) {
      if (joiner.subscriber.closed) continue;
      joiner.remove = this.states.add(joiner.subscriber);
      // lastSnapshot now shows the pool as it is: what changed since the joiner's first snapshot is what it missed.
      if (this.changedSince(joiner.first)) joiner.subscriber.next(this.lastSnapshot!);
    }
  }

  /** Whether something `state$` shows changed since `last`. */
  private changedSince(last: PoolSnapshot): boolean {
    const s = this.poolState;
    return (
      last.state !== s.state ||
      last.draining !== isDraining(s) ||
      last.generation !== s.generation ||
      last.totalConnectionCount !== s.records.size ||
      last.availableConnectionCount !== s.available.size ||
      last.pendingConnectionCount !== s.pendingConnectionCount ||
      last.waitQueueLength !== waitingCheckOutCount(s) ||
      (s.loadBalanced && !sameServices(last, s))
    );
  }
}

/** An `events$` subscriber made while a step's events went out, and its removal once listed. */
interface EventsJoiner {
  readonly subscriber: Subscriber<ConnectionPoolEvent>;
  remove: (() => void) | undefined;
}

/** A `state$` subscriber made in the middle of a batch: its first snapshot, and its removal once listed. */
interface StateJoiner {
  readonly subscriber: Subscriber<PoolSnapshot>;
  readonly first: PoolSnapshot;
  remove: (() => void) | undefined;
}

/** `PoolSnapshot.draining`: a drain took effect and the pool is not closed yet. */
function isDraining<C>(s: PoolState<C>): boolean {
  return s.draining && s.state !== 'closed';
}

/**
 * A snapshot's frozen `serviceGenerations`: shared with `last` (the last snapshot taken for state$) while no service
 * changed since, so the snapshot published after each batch copies nothing that did not change (for a pool that
 * reaches no service, the same empty array every time).
 */
function serviceGenerationsOf<C>(s: PoolState<C>, last: PoolSnapshot | undefined): readonly ServiceGenerationSnapshot[] {
  if (last !== undefined && sameServices(last, s)) return last.serviceGenerations;
  return Object.freeze([...s.serviceGenerations].map(([serviceId, g]) => Object.freeze({ serviceId, generation: g.generation, connectionCount: g.connectionCount })));
}

function sameServices<C>(last: PoolSnapshot, s: PoolState<C>): boolean {
  if (last.serviceGenerations.length !== s.serviceGenerations.size) return false;
  let i = 0;
  for (const [serviceId, g] of s.serviceGenerations) {
    const l = last.serviceGenerations[i++];
    if (l.serviceId !== serviceId || l.generation !== g.generation || l.connectionCount !== g.connectionCount) return false;
  }
  return true;
}

/** The names of {@link CheckOutOptions}. */
const CHECK_OUT_OPTION_NAMES = ['signal', 'priority', 'timeoutMS', 'purpose'] as const satisfies readonly (keyof CheckOutOptions)[];
true satisfies ListsEveryOption<CheckOutOptions, typeof CHECK_OUT_OPTION_NAMES>;

/**
 * Checks a checkout's options (a misspelt key is refused, naming the closest option) and keeps what the request
 * needs.
 */
function checkOutSettings(options: CheckOutOptions): CheckOutSettings {
  requireMethodOptions('checkOut', options, CHECK_OUT_OPTION_NAMES);
  // The rule of optionValue (nothing from Object.prototype) at the cost of a plain read: when Object.prototype holds
  // none of these names, which is the usual case, no value read can come from it (the options are a non-array object).
  const p = Object.prototype as CheckOutOptions;
  const clean = p.signal === undefined && p.priority === undefined && p.timeoutMS === undefined && p.purpose === undefined;
  const { signal, priority, timeoutMS, purpose } = clean ? options : optionValues(options, CHECK_OUT_OPTION_NAMES);
  requireAbortSignal('signal', signal);
  if (priority !== undefined && priority !== 'high' && priority !== 'normal') {
    throw new InvalidOptionError('priority', priority, "'high' or 'normal'");
  }
  if (timeoutMS !== undefined) requireDurationMS('timeoutMS', timeoutMS, 'a number of ms >= 0 (0 means none)');
  if (purpose !== undefined && purpose !== 'cursor' && purpose !== 'transaction' && purpose !== 'operation') {
    throw new InvalidOptionError('purpose', purpose, "'cursor', 'transaction' or 'operation'");
  }
  return { signal, high: priority === 'high', timeoutMS: timeoutMS ?? 0, purpose: purpose === 'operation' ? undefined : purpose };
}

/** The names of {@link ClearOptions}. */
const CLEAR_OPTION_NAMES = ['interruptInUseConnections', 'cause', 'serviceId'] as const satisfies readonly (keyof ClearOptions)[];
true satisfies ListsEveryOption<ClearOptions, typeof CLEAR_OPTION_NAMES>;
/** The names of the options of `drain()`. */
const DRAIN_OPTION_NAMES = ['timeoutMS'] as const;
/**
 * The key a service is known by: a serviceId's hex string in lower case (as `ObjectId.toHexString()` writes it and
 * connections report it), or `''` for the connections whose handshake reported none.
 *
 * @throws {InvalidOptionError} (option `serviceId`) for anything else.
 */
function normalServiceId(serviceId: unknown): string {
  if (serviceId === '') return serviceId;
  const key = hexServiceId(serviceId);
  if (key !== undefined) return key;
  throw new InvalidOptionError('serviceId', serviceId, "an ObjectId, its 24-character hex string, or '' (the connections whose handshake reported none)");
}

/** The names of the options of `warmUp()`. */
const WARM_UP_OPTION_NAMES = ['signal'] as const;

/** Checks the scope function of `withConnection` or `withConnection$`, before anything is checked out. */
function requireScope(method: string, fn: unknown): void {
  if (typeof fn !== 'function') throw new InvalidOptionError(`${method} fn`, fn, 'a function that takes the connection');
}
