/**
 * ConnectionPool: the pool with its default wiring, the composition root of one pool. It is the
 * {@link ConnectionPoolCore} state machine, plus what a MongoDB driver's pool has by default: real connections over
 * TCP/TLS (socket connect, OP_MSG `hello` handshake, authentication) unless a `connectionFactory` is given, the
 * command events of its connections (`commandEvents$`), and the log feed (`log$`: CMAP and command messages, written
 * to the MONGODB_LOG_* destination).
 *
 * Source: CMAP spec, "Connection Pool Options", "Establishing a Connection", "Connection Pool Logging"; command logging
 * and monitoring spec; logging spec.
 */
import { EMPTY, filter, isObservable, map, merge, Subject, type Observable, type SchedulerLike } from 'rxjs';
import { parseAddress } from '../address';
import type { CommandEvent, CommandEventSink } from '../connection/command-events';
import { connectionFactory, type ConnectionOptions } from '../connection/connect';
import type { Connection } from '../connection/connection';
import { commandLogMessage, connectionLogMessage, type CommandLogMessage, type ConnectionLogMessage } from '../logging/log-message';
import { resolveLogSettings, willLog, type LoggingOptions, type LogSettings, type LogSink } from '../logging/log-settings';
import { openLogSink } from '../logging/log-sink';
import { checkConnectionOptions } from '../connection/connection-options';
import type { ServerApi } from '../connection/server-api';
import { InvalidOptionError } from '../errors';
import type { ConnectionPoolEvent } from '../events';
import { checkPoolCoreOptions, optionValue, POOL_CORE_OPTION_NAMES, type ListsEveryOption } from '../options';
import type { ConnectionFactory, PoolConnection } from '../pool/contract';
import { ConnectionPoolCore, type ConnectionPoolCoreOptions } from '../pool/connection-pool-core';
import { timerScheduler, wallClockTime } from '../scheduler';

/**
 * Options of a {@link ConnectionPool}: those of {@link ConnectionPoolCore} (the CMAP pool options, durations in ms),
 * with `connectionFactory` optional, plus the default factory's `connectionOptions` and `logging`.
 *
 * Source: CMAP spec, "Connection Pool Options", "Establishing a Connection", "Connection Pool Logging"; URI options
 * spec (`connectionOptions`); logging spec (`logging`).
 */
export interface ConnectionPoolOptions<C extends PoolConnection = Connection> extends Omit<ConnectionPoolCoreOptions<C>, 'connectionFactory'> {
  /**
   * Establishes connections. Default: real MongoDB connections over TCP (socket connect, OP_MSG `hello`
   * handshake, authentication), configured by `connectionOptions`.
   */
  connectionFactory?: ConnectionFactory<C> | undefined;
  /** Options of the default connection factory (appName, timeouts, TLS, credentials, serverApi). Ignored when `connectionFactory` is given. */
  connectionOptions?: ConnectionOptions | undefined;
  /**
   * Logging of the CMAP log messages (component `connection`, level `debug`) and of the command messages (component
   * `command`, level `debug`), over the MONGODB_LOG_* environment variables. When enabled, the pool writes every
   * message to the configured destination, and `log$` emits them.
   */
  logging?: LoggingOptions | undefined;
}

/**
 * A MongoDB connection pool for one Endpoint, per the CMAP specification, as one serialized reactive state machine
 * (see {@link ConnectionPoolCore} for everything it does), over real connections, with their command events and the
 * log feed.
 *
 * @example
 * ```ts
 * const pool = new ConnectionPool({ address: 'localhost:27017', maxPoolSize: 10, minPoolSize: 2 });
 * pool.ready(); // a monitor does this after a successful check
 * await pool.withConnection((c) => c.command('admin', { ping: 1 }));
 * pool.close();
 * ```
 *
 * @typeParam C the connection type its factory makes (default: the TCP {@link Connection}).
 * @throws {InvalidOptionError} from the constructor, before anything is made: for a key that is not an option of
 *   ConnectionPool (see {@link ConnectionPoolOptions}), of `connectionOptions` or of `logging` (naming the
 *   closest option: `maxPoolsize` gives "did you mean maxPoolSize?"), and for a value of the wrong type or range
 *   (named in the error, with the value, never a password, and what is allowed), e.g. `loadBalanced: 'true'`,
 *   `logging: null`, `scheduler: {}`, `connectionOptions: { tls: 'yes' }`; and for credentials the connection options
 *   cannot use (option `authMechanism`: MONGODB-X509 without `tlsCertificateKeyFile`, PLAIN over TCP with `tls` left
 *   unset; see `connectionFactory`).
 *
 * Source: CMAP spec, "Connection Pool Options", "Establishing a Connection", "Connection Pool Logging"; logging
 * spec; everything else as {@link ConnectionPoolCore}.
 */
export class ConnectionPool<C extends PoolConnection = Connection> extends ConnectionPoolCore<C> {
  /** `"ConnectionPool"` (the class's own name for a subclass of user code), as {@link ConnectionPoolCore}'s. */
  override get [Symbol.toStringTag](): string {
    return this.constructor === ConnectionPool ? 'ConnectionPool' : this.constructor.name;
  }

  /**
   * The log messages derived from `events$` (component `connection`): every CMAP message (level `debug`) when the
   * component logs at `debug` (see the `logging` option and MONGODB_LOG_CONNECTION / MONGODB_LOG_ALL); with leak
   * detection on (`leakDetectionThresholdMS`), its messages from level `warn` (leak suspected) or `info` (a suspect
   * checked in) up; and, when the `command` component logs at `debug` (MONGODB_LOG_COMMAND), one
   * {@link CommandLogMessage} per event of `commandEvents$`. Otherwise it completes at once and nothing is built. Each
   * message has the spec's structured keys (`toJSON()`) and its unstructured form (`render()`). Completes as the
   * streams it derives from do: never while it carries CMAP messages (as `events$`: a closed pool still reports each
   * checkout attempted on it), once the closed pool is done when it carries command messages only. A `Client` ends its
   * subscription to it once the pool is done (see `Client.log$`).
   *
   * Source: CMAP spec, "Connection Pool Logging"; command logging and monitoring spec, "Log Messages"; logging spec;
   * leak messages: extension (see `ConnectionLogMessage`).
   */
  readonly log$: Observable<ConnectionLogMessage | CommandLogMessage>;

  /**
   * The command events of the application's commands on this pool's connections: CommandStarted, then
   * CommandSucceeded or CommandFailed with the same `requestId` (see {@link CommandEvent}), never for the handshake,
   * authentication or a monitor's heartbeats; those of this pool's connections only, even when its factory serves
   * other pools too (their events then stay off this stream, and off this pool's log). Hot: what happens while
   * subscribed; completes once the pool is closed (or drained) and its last connection closed. While nobody
   * subscribes (and the `command` log component is below `debug`), no connection builds an event: one property read
   * per command. Emits
   * for connections of rxcmap's own factories (the default one, or one made by `connectionFactory`); with any other
   * `connectionFactory` it completes at once.
   *
   * Source: command logging and monitoring spec, "Events API", "Guarantees", "Security".
   */
  readonly commandEvents$: Observable<CommandEvent>;

  /** Where this pool's connections publish their command events (none with a factory that has none). */
  private readonly ownCommandEvents: Subject<CommandEvent> | undefined;
  /** Whether `commandEvents$` is set to complete once the closed pool is done. */
  private commandEventsEnding = false;

  constructor(options: ConnectionPoolOptions<C>) {
    // Every option is checked before the pool exists, so an invalid one leaves nothing behind.
    const { settings, serverApi } = checkOptions(options);
    const core = coreOptions(options, serverApi);
    // rxcmap's own factories carry their connections' command events; a user's may not (read once, as any option).
    // The pool publishes those of its own connections only: a factory may serve other pools too.
    const commandEvents = ownCommandEvents(core);
    super(core);
    const server = parseAddress(optionValue(options, 'address'));
    this.ownCommandEvents = commandEvents;
    this.commandEvents$ = commandEvents === undefined ? EMPTY : commandEvents.asObservable();
    const threshold = settings.severities.connection;
    // Stamped on the wall clock, as the application's other log lines are (the pool's clock does not step with it).
    const scheduler: SchedulerLike = core.scheduler ?? timerScheduler;
    const message = (e: ConnectionPoolEvent): ConnectionLogMessage => connectionLogMessage(e, server, settings.maxDocumentLength, wallClockTime(e.time, scheduler));
    let logged: ((e: ConnectionPoolEvent) => boolean) | undefined;
    let poolLog$: Observable<ConnectionLogMessage>;
    if (willLog(threshold, 'debug')) {
      poolLog$ = this.events$.pipe(map(message));
      logged = () => true;
    } else if (this.options.leakDetectionThresholdMS > 0 && willLog(threshold, 'warn')) {
      const checkedIn = willLog(threshold, 'info');
      logged = (e) => e.type === 'ConnectionLeakSuspected' || (checkedIn && e.type === 'ConnectionLeakSuspectCheckedIn');
      poolLog$ = this.events$.pipe(filter(logged), map(message));
    } else {
      poolLog$ = EMPTY;
    }
    const commandsLogged = willLog(settings.severities.command, 'debug') && this.commandEvents$ !== EMPTY;
    const commandMessage = (e: CommandEvent): CommandLogMessage => commandLogMessage(e, server, settings.maxDocumentLength);
    if (logged !== undefined || commandsLogged) this.writeLog(settings.path, logged ?? (() => false), message, commandsLogged ? commandMessage : undefined);
    this.log$ = commandsLogged ? merge(poolLog$, this.commandEvents$.pipe(map(commandMessage))) : poolLog$;
  }

  /**
   * Closes the pool, as {@link ConnectionPoolCore.close} does; `commandEvents$` completes once the closed pool is done
   * (its last connection closed): no command of it can come any more, and a subscriber's subscription ends.
   */
  override close(): void {
    super.close();
    this.endCommandEvents();
  }

  /** Drains the pool, as {@link ConnectionPoolCore.drain} does; `commandEvents$` completes as after {@link close}. */
  override drain(options?: { timeoutMS?: number | undefined }): Promise<void> {
    const drained = super.drain(options);
    return drained.then(() => this.endCommandEvents());
  }

  /** Completes `commandEvents$` once the closed pool is done (`state$` completes). Idempotent. */
  private endCommandEvents(): void {
    const events = this.ownCommandEvents;
    if (events === undefined || this.commandEventsEnding) return;
    this.commandEventsEnding = true;
    this.state$.subscribe({ complete: () => events.complete() });
  }

  /**
   * Writes the message of every event `logged` accepts to `path`, for as long as the pool lives: a closed pool still
   * reports the checkouts attempted on it (CMAP "Connection Pool Logging": each message is emitted whenever its event
   * is); and, given `commandMessage`, the message of every command event, to the same destination. A destination it
   * opened (a path, not a sink object) is closed once the closed pool's last connection is closed, after that batch's
   * messages; messages after it (a command that was in flight) open the destination again for as long as they take.
   */
  private writeLog(
    path: string | LogSink,
    logged: (e: ConnectionPoolEvent) => boolean,
    message: (e: ConnectionPoolEvent) => ConnectionLogMessage,
    commandMessage: ((e: CommandEvent) => CommandLogMessage) | undefined,
  ): void {
    const sink = openLogSink(path);
    const owned = typeof path === 'string';
    if (commandMessage !== undefined) this.commandEvents$.subscribe((e) => sink.write(commandMessage(e)));
    this.events$.subscribe((event) => {
      if (logged(event)) sink.write(message(event));
      // state$ is followed only once the pool is closed (no snapshot is built before); it completes after the batch
      // that closed the last connection.
      if (owned && event.type === 'ConnectionPoolClosed') this.state$.subscribe({ complete: () => void sink.close?.() });
    });
  }
}

/**
 * When `core`'s factory carries command events (`commandEvents$`: rxcmap's own factories), replaces it by one that
 * has each connection it establishes publish its command events to the Subject returned too, as well as to the
 * factory's; undefined (the factory left as it is) otherwise. So a pool's `commandEvents$` holds its own connections'
 * commands, never those of another pool sharing the factory (whose connection ids are numbered apart, so the same).
 */
function ownCommandEvents<C extends PoolConnection>(core: ConnectionPoolCoreOptions<C>): Subject<CommandEvent> | undefined {
  const factory = core.connectionFactory;
  if (!isObservable((factory as { commandEvents$?: unknown }).commandEvents$)) return undefined;
  const events = new Subject<CommandEvent>();
  // Read as a property, not by class: a connection of another copy of rxcmap publishes the same way.
  const attach = (connection: C): C => {
    try {
      const sink = (connection as { commandEvents?: unknown }).commandEvents as CommandEventSink | undefined;
      if (sink !== null && typeof sink === 'object' && typeof sink.next === 'function') {
        (connection as { commandEvents?: CommandEventSink }).commandEvents = bothSinks(events, sink);
      }
    } catch {
      // A connection whose property cannot be read or set publishes to its factory only.
    }
    return connection;
  };
  (core as { connectionFactory: ConnectionFactory<C> }).connectionFactory = (descriptor) => {
    const made = factory(descriptor);
    if (isObservable(made)) return made.pipe(map(attach));
    // A factory of the application's that carries rxcmap's commandEvents$ may return a Promise.
    if (made !== null && typeof made === 'object' && typeof (made as PromiseLike<C>).then === 'function') return Promise.resolve(made as PromiseLike<C>).then(attach);
    return made;
  };
  return events;
}

/** A sink that hands each event to `pool`, then to `factory`, each while somebody receives it. */
function bothSinks(pool: Subject<CommandEvent>, factory: CommandEventSink): CommandEventSink {
  return {
    get observed(): boolean {
      return pool.observed || factory.observed;
    },
    next(event: CommandEvent): void {
      try {
        if (pool.observed) pool.next(event);
      } finally {
        if (factory.observed) factory.next(event);
      }
    },
  };
}

/**
 * Every option name of {@link ConnectionPoolOptions} (a readonly tuple): the {@link POOL_CORE_OPTION_NAMES}, then
 * `connectionOptions` and `logging`.
 *
 * Source: CMAP spec, "Connection Pool Options"; see {@link ConnectionPoolOptions}.
 */
export const CONNECTION_POOL_OPTION_NAMES = [
  ...POOL_CORE_OPTION_NAMES,
  'connectionOptions',
  'logging',
] as const satisfies readonly (keyof ConnectionPoolOptions<PoolConnection>)[];
true satisfies ListsEveryOption<ConnectionPoolOptions<PoolConnection>, typeof CONNECTION_POOL_OPTION_NAMES>;
// The core's list lives below the pool layer; this keeps it in step with ConnectionPoolCoreOptions.
POOL_CORE_OPTION_NAMES satisfies readonly (keyof ConnectionPoolCoreOptions<PoolConnection>)[];
true satisfies ListsEveryOption<ConnectionPoolCoreOptions<PoolConnection>, typeof POOL_CORE_OPTION_NAMES>;

/**
 * Checks every key and the type of every value the core does not check itself (the pool options' ranges and the
 * address are the core's), and returns the resolved log settings and the checked copy of `connectionOptions.serverApi`.
 */
function checkOptions(options: unknown): { settings: LogSettings; serverApi: ServerApi | undefined } {
  checkPoolCoreOptions(options, 'ConnectionPool', ['connectionOptions', 'logging']);
  const o = options as ConnectionPoolOptions<PoolConnection>;
  const connectionOptions = optionValue(o, 'connectionOptions');
  const serverApi = checkConnectionOptions(connectionOptions, 'ConnectionPool', 'connectionOptions.');
  const nested = optionValue(connectionOptions as { loadBalanced?: unknown } | undefined, 'loadBalanced');
  if (nested !== undefined) {
    // One place says whether the pool is load-balanced: the pool's option, which also sets its handshake.
    throw new InvalidOptionError('connectionOptions.loadBalanced', nested, "absent: set the pool's own loadBalanced option");
  }
  return { settings: resolveLogSettings(optionValue(o, 'logging')), serverApi };
}

/**
 * The core's options: only its own keys (the core may reject any other), with the default TCP factory filled in when
 * none is given (with `serverApi`, the checked copy of the connection options' serverApi, in place of theirs).
 */
function coreOptions<C extends PoolConnection>(options: ConnectionPoolOptions<C>, serverApi: ServerApi | undefined): ConnectionPoolCoreOptions<C> {
  // No prototype: reading an option the caller did not give finds nothing, here and in the core.
  const core = Object.create(null) as Record<string, unknown>;
  for (const name of POOL_CORE_OPTION_NAMES) {
    const value = optionValue(options, name);
    if (value !== undefined) core[name] = value;
  }
  if (core.connectionFactory === undefined) {
    const { host, port } = parseAddress(core.address);
    const loadBalanced = core.loadBalanced === true;
    const connectionOptions = optionValue(options, 'connectionOptions');
    core.connectionFactory = connectionFactory({ ...connectionOptions, ...(serverApi === undefined ? {} : { serverApi }), loadBalanced, host, port });
  }
  return core as unknown as ConnectionPoolCoreOptions<C>;
}
