/**
 * The client-level entry point: `connect(uri, options)` builds, for each host, one connection pool and one monitor
 * (none in load-balanced mode) sharing the same options, and offers one merged event feed, the merged command events
 * (`commandEvents$`), the log feed, `command()` on the server selected for it, and `close()`.
 *
 * Source: CMAP spec ("Connection Pool Options": options at the client level, the same for all pools; parsing them
 * from a connection string); server monitoring spec (a monitor per server, pools readied and cleared by it); load
 * balancer spec (no monitor, one pool); connection string and URI options specs.
 */
import { ObjectId, type Document } from 'bson';
import { defer, endWith, filter, firstValueFrom, from, ignoreElements, interval, map, merge, mergeMap, Observable, race, ReplaySubject, Subject, Subscription, takeUntil, throwError, timeout, type SchedulerLike, type Subscriber } from 'rxjs';
import { abortReason, listenToAbort } from '../abort-listeners';
import { parseAddress, type ServerAddress } from '../address';
import type { CommandEvent } from '../connection/command-events';
import { connectionFactoryWithMetadata, isRefusedConnect, type ConnectionOptions } from '../connection/connect';
import { abortedAlready, commandNameOf, requireOperationId, signalRefused, type Connection, type SignalOwner } from '../connection/connection';
import { defaultClearOnEstablishmentError } from '../pool/command-runner';
import type { ConnectionFactory } from '../pool/contract';
import { checkConnectionOptions, CONNECTION_OPTION_NAMES, DEFAULT_CONNECT_TIMEOUT_MS } from '../connection/connection-options';
import { ClientMetadata, type DriverInfoOptions } from '../connection/handshake';
import { checkTopologyOptions, parseConnectionStringForClient, type ParsedConnectionString } from '../connection-string';
import { ClientClosedError, CommandCancelledError, IncompatibleServerError, InvalidOptionError, MonitorClosedError, MongoNetworkError, MongoNetworkTimeoutError, MongoServerError, PoolClosedError, ServerSelectionError, SrvResolutionError, WaitQueueTimeoutError } from '../errors';
import type { ConnectionPoolEvent } from '../events';
import { ClientLogMessage, heartbeatLogMessage, logError, selectionFailure, ServerSelectionLogMessage, serverLogFields, TopologyLogMessage, truncate, type LogMessage, type ServerMonitoringLogFields, type TopologyDescriptionChangedLogFields, type TopologyMonitoringLogFields, type CommandLogMessage, type ServerSelectionLogFields } from '../logging/log-message';
import { resolveLogSettings, willLog, type LoggingOptions, type LogSink } from '../logging/log-settings';
import { openLogSink } from '../logging/log-sink';
import type { ServerHeartbeatEvent } from '../monitor/heartbeat-events';
import { DEFAULT_HEARTBEAT_FREQUENCY_MS, MIN_HEARTBEAT_FREQUENCY_MS, Monitor, monitoringConnectionOptions, requireServerMonitoringMode, type ServerMonitoringMode } from '../monitor/monitor';
import {
  BACKGROUND_OPTION_NAMES,
  definedOnly,
  POOL_EXTENSION_OPTION_NAMES,
  POOL_OPTION_NAMES,
  optionValue,
  optionValues,
  rejectUnknownOptions,
  requireBoolean,
  readOption,
  requireDurationMS,
  requireAbortSignal,
  requireMethodOptions,
  requireTimerDurationMS,
  requireOptionsObject,
  requireScheduler,
  resolvePoolOptions,
  type BackgroundOptions,
  type ListsEveryOption,
  type PoolExtensionOptions,
  type PoolOptions,
} from '../options';
import { clientScheduler, MAX_TIMER_DELAY_MS, timerScheduler, wallClockTime } from '../scheduler';
import { ConnectionPool } from './connection-pool';
import { discoverSeedlist, resolvedUri } from './srv';
import { SrvPoller } from './srv-poller';
import { isExternalMechanism } from '../auth/credentials';
import { clientTopologyType, type ClientTopologyType } from './topology-type';
import { initialTopology, readiesPool, serverDescriptionOf, Topology, UNKNOWN_SERVER_DESCRIPTION, type ServerDescription, type TopologyChange, type TopologyDescription } from './topology-update';
import { serverDescriptionEquals, topologyDescriptionEquals, type TopologyEvent } from './topology-events';
import { setOwnField } from '../own-field';
import { describeReadPreference, PRIMARY, readPreferenceDocument, readPreferenceFrom, type ReadPreference, type ReadPreferenceMode, type TagSet } from '../read-preference';
import { DEFAULT_LOCAL_THRESHOLD_MS, selectServer, type CheckedServer, type SelectableServer } from './server-selection';
import { topologyDescriptionText, type ServerType } from './topology-description';
import { isStaleServerDescription, isStaleTopologyVersion, stateChangeError } from './state-change-error';
import { heartbeatActions } from '../monitor/heartbeat-actions';
import { asTopologyVersion } from '../monitor/topology-version';

/**
 * Options of {@link connect}. Each overrides the same option in the URI. Unlike URI values (ignored with a warning
 * when invalid), an invalid value here throws {@link InvalidOptionError}, and so does a key that is not one of
 * these options (naming the closest option). Values take real types: `loadBalanced: 'true'` is an
 * error, not `true`. Durations in ms.
 *
 * Source: CMAP spec, "Connection Pool Options" (set at the client level, the same for every pool); URI options spec
 * (the option names); server monitoring spec, "heartbeatFrequencyMS", "serverMonitoringMode"; load balancer spec, "loadBalanced"; logging
 * spec (the `logging` option); handshake spec, "Supporting Wrapping Libraries" (`driverInfo`); Stable API spec
 * (`serverApi`: given here only, never by the URI, and then carried by every command of every pool and monitor);
 * `scheduler`: extension (injection for tests).
 */
export interface ClientOptions extends PoolOptions, PoolExtensionOptions, BackgroundOptions, ConnectionOptions {
  /**
   * Time between monitor checks when polling, and the longest a streaming server waits before it replies
   * (maxAwaitTimeMS), in ms; at least 500. Default 10000.
   */
  heartbeatFrequencyMS?: number | undefined;
  /**
   * Server monitoring protocol: `auto` (default: streaming, except on a FaaS platform), `stream` or `poll` (see
   * {@link ServerMonitoringMode}).
   */
  serverMonitoringMode?: ServerMonitoringMode | undefined;
  /**
   * How long `command()` (and `selectPool()`) waits for a suitable server, in ms; a number > 0 and at most 2147483647
   * (what one Node timer holds). Default 30000.
   */
  serverSelectionTimeoutMS?: number | undefined;
  /**
   * The latency window's size, in ms, a number >= 0: of the servers suitable for an operation, server selection takes
   * one whose average RTT is at most this much above the shortest among them (then of two taken at random, the one
   * with the lower operationCount). Default 15. Source: server selection spec, "localThresholdMS".
   */
  localThresholdMS?: number | undefined;
  /**
   * The client's default read preference: a mode (`'primary'`, `'primaryPreferred'`, `'secondary'`,
   * `'secondaryPreferred'`, `'nearest'`) or `{ mode, tags?, maxStalenessSeconds? }` (see `ReadPreference`); it
   * replaces the URI's `readPreference`, `readPreferenceTags` and `maxStalenessSeconds`. Kept as
   * {@link Client.readPreference} for a driver's read helpers to pass: `command()` and `selectPool()` never take it
   * (the spec's generic command method ignores the client's default; give theirs as their `readPreference` option).
   * Default `primary`. Source: server selection spec, "Read preference configuration", "Use of read preferences with
   * commands".
   */
  readPreference?: ReadPreferenceMode | ReadPreference | undefined;
  /** Load-balanced mode: one pool, no monitor, the pool ready at once. */
  loadBalanced?: boolean | undefined;
  /**
   * Whether to connect to the deployment in Single topology: `true` (an error with several hosts, or with
   * loadBalanced) monitors the one host given and no other (no server discovery), its server suitable whatever its
   * type once its pool is ready, but not while Unknown (after a state change error, until its next check; with a
   * `replicaSet`, while its last check named no set or another one). `false` or unset: the hosts given are seeds, and
   * server discovery adds the members a replica set's replies list and removes the servers that do not belong (see
   * {@link Client}). Source: server discovery and monitoring spec, "Initial TopologyType", "TopologyType Single".
   */
  directConnection?: boolean | undefined;
  /**
   * Logging of the client and all its pools (one shared destination): the `client` component's `warn` messages (the
   * connection string warnings), the `connection` component's `debug` messages (CMAP), the `command` component's
   * `debug` messages (the application's commands: Command started, succeeded, failed) and the `topology` component's
   * `debug` messages (each monitor's heartbeats: Server heartbeat started, succeeded, failed; and the topology's life:
   * Starting and Stopped topology and server monitoring, Topology description changed).
   */
  logging?: LoggingOptions | undefined;
  /**
   * Clock and timers of the pools (waitQueueTimeoutMS, maxIdleTimeMS, background runs, durations in events) and of
   * the monitors' sleeps between checks, and of `command()`'s timeoutMS and server selection (tests). Not of the
   * connections: connectTimeoutMS, socketTimeoutMS and a check's timeout run on Node's timers whatever is given.
   * Default: the pools' and monitors' own (`timerScheduler`), and for the client's waits the same clock on timers that
   * keep the process alive (both on a clock that does not step with the wall clock). A scheduler given should
   * read a clock that does not go back: the client measures time elapsed as the difference of two `now()` readings.
   */
  scheduler?: SchedulerLike | undefined;
}

/**
 * Every event of a client: pool events and heartbeat events, each with the `address` of its server; discriminated
 * on `type`.
 *
 * Source: CMAP spec, "Events"; server monitoring spec, "SDAM Monitoring".
 */
export type ClientEvent = ConnectionPoolEvent | ServerHeartbeatEvent;

/** The options of {@link ClientOptions} that are neither pool nor connection options. */
const CLIENT_ONLY_OPTION_NAMES = [
  'heartbeatFrequencyMS',
  'serverMonitoringMode',
  'serverSelectionTimeoutMS',
  'localThresholdMS',
  'readPreference',
  'loadBalanced',
  'directConnection',
  'logging',
  'scheduler',
] as const satisfies readonly (keyof ClientOptions)[];

/**
 * Every option name of {@link ClientOptions} (a frozen array): the pool options ({@link POOL_OPTION_NAMES}, the
 * {@link POOL_EXTENSION_OPTION_NAMES}, then `backgroundThreadIntervalMS`), the connection options (`CONNECTION_OPTION_NAMES`), then heartbeatFrequencyMS, serverMonitoringMode,
 * serverSelectionTimeoutMS, directConnection, logging and scheduler. `loadBalanced` is both a connection and a client
 * option and is listed once.
 *
 * Source: as {@link ClientOptions}.
 */
export const CLIENT_OPTION_NAMES: readonly (keyof ClientOptions)[] = Object.freeze([
  ...new Set([
    ...POOL_OPTION_NAMES,
    ...POOL_EXTENSION_OPTION_NAMES,
    ...BACKGROUND_OPTION_NAMES,
    ...CONNECTION_OPTION_NAMES,
    ...CLIENT_ONLY_OPTION_NAMES,
  ] as const),
]);
true satisfies ListsEveryOption<
  ClientOptions,
  [
    ...typeof POOL_OPTION_NAMES,
    ...typeof POOL_EXTENSION_OPTION_NAMES,
    ...typeof BACKGROUND_OPTION_NAMES,
    ...typeof CONNECTION_OPTION_NAMES,
    ...typeof CLIENT_ONLY_OPTION_NAMES,
  ]
>;

/** The connection options of a client, handed to every pool and monitor (`loadBalanced` is the client's). */
const CLIENT_CONNECTION_OPTION_NAMES = CONNECTION_OPTION_NAMES.filter((name) => name !== 'loadBalanced');

/** The pool options of a client, handed to every pool. */
const CLIENT_POOL_OPTION_NAMES = [...POOL_OPTION_NAMES, ...POOL_EXTENSION_OPTION_NAMES, ...BACKGROUND_OPTION_NAMES] as const;

/** The connection factories of one host: its pool's, and its monitor's (none in load-balanced mode). */
interface HostFactories {
  readonly pool: ConnectionFactory<Connection>;
  readonly monitor: ConnectionFactory<Connection> | undefined;
}

/** The feeds of one host: its pool's events and log messages, its heartbeats (see `Client.openServer`). */
interface HostFeed {
  /** Its pool. */
  readonly pool: ConnectionPool<Connection>;
  /** Its pool's events (load-balanced: with ConnectionPoolReady after ConnectionPoolCreated), and its heartbeats. */
  readonly events$: Observable<ClientEvent>;
  readonly log$: Observable<LogMessage>;
  /** Its pool's command events. */
  readonly commandEvents$: Observable<CommandEvent>;
  /** Its pool's events, for the waiting server selections. */
  readonly poolEvents$: Observable<ConnectionPoolEvent>;
  /**
   * Fired once the host is removed (see `Client.removeHost`), or the client closed, and its pool is done: its feeds
   * then complete; a subscriber that comes later is given what its pool gives as it subscribes, then the completion.
   */
  readonly retired: Subject<void>;
}

/** What the pools and monitors of a client's hosts are made with, once its hosts are known. */
interface ServerContext {
  readonly settings: HostSettings;
  /** Writes and publishes the log message of a heartbeat event (none when the `topology` component is not at debug). */
  readonly heartbeatLog: ((event: ServerHeartbeatEvent, server: ServerAddress) => void) | undefined;
  readonly logging: LoggingOptions;
  readonly heartbeatFrequencyMS: number | undefined;
  readonly serverMonitoringMode: ServerMonitoringMode;
  readonly scheduler: SchedulerLike | undefined;
}

/** What a client connects its hosts with (see `Client.hostSettings`). */
export interface HostSettings {
  readonly connectionOptions: ConnectionOptions;
  readonly poolOptions: PoolOptions & BackgroundOptions & PoolExtensionOptions;
  readonly loadBalanced: boolean;
  /** `directConnection=true` (URI or options): the TopologyType is Single from the start. */
  readonly directConnection: boolean;
  readonly replicaSet: string | undefined;
}

/** The seedlist discovery of a client of a `mongodb+srv://` URI (see `Client.discover`). */
interface SrvState {
  /** The URI's host name. */
  readonly hostname: string;
  /** The URI, as given. */
  readonly uri: string;
  readonly srvServiceName: string | undefined;
  readonly srvMaxHosts: number | undefined;
  /** The discovery's deadline, in ms (0: none). */
  readonly connectTimeoutMS: number;
  /** Whether the credentials' source is `$external` (see `isExternalMechanism`): a TXT record's authSource is not for them. */
  readonly externalSource: boolean;
  /** The discovery in progress, or the one that succeeded. */
  discovery: Promise<void> | undefined;
  /** Whether the hosts are found and open. */
  done: boolean;
  /** Aborted by close(): cancels the DNS queries. */
  readonly abort: AbortController;
  /** Opens the hosts of the `mongodb://` URI the discovery gave. */
  readonly open: (resolved: string) => void;
  /** The rescans of the SRV records, once the hosts are open (none in load-balanced mode or with a replicaSet). */
  poller: SrvPoller | undefined;
}

/** What each client connects its hosts with, once they are known (see {@link connectedSettings}). */
const CONNECTED_SETTINGS = new WeakMap<Client, ConnectedSettings>();

/** What a client connects its hosts with: its {@link HostSettings}, and its URI's SRV options. */
export interface ConnectedSettings extends HostSettings {
  readonly srvMaxHosts: number | undefined;
  readonly srvServiceName: string | undefined;
}

/**
 * What `client` connects its hosts with (its connection and pool options, loadBalanced, the URI's or TXT record's
 * replicaSet, its SRV options), once its hosts are known; undefined before (a `mongodb+srv://` URI's seedlist not yet
 * discovered). Internal: not exported by the package (tests read the options a seedlist discovery gave).
 *
 * Source: extension.
 */
export function connectedSettings(client: Client): ConnectedSettings | undefined {
  return CONNECTED_SETTINGS.get(client);
}

/** The names of the options of `drain()`. */
const TIMEOUT_OPTION_NAMES = ['timeoutMS'] as const;
/** The names of the options of `command()`. */
const COMMAND_OPTION_NAMES = ['timeoutMS', 'signal', 'readPreference', 'operationId', 'moreToCome'] as const;
/**
 * How a client logs its server selections: whether at `debug` (else only the waiting message, at `info`), the max
 * document length, and where each message goes (the destination, then `log$`).
 */
interface SelectionLogging {
  readonly debug: boolean;
  readonly maxDocumentLength: number;
  readonly write: (message: ServerSelectionLogMessage) => void;
}

/**
 * How a client logs its topology's life (the `topology` component at debug): the max document length (of the
 * descriptions), and the writer of a message from its fields (the destination, then `log$`).
 */
interface TopologyLogging {
  readonly maxDocumentLength: number;
  readonly write: (fields: TopologyMonitoringLogFields | ServerMonitoringLogFields | TopologyDescriptionChangedLogFields) => void;
}

/** `T` with each of its optional fields present (its value may be undefined): a class that must answer every one. */
type EveryField<T> = { [K in keyof Required<T>]: T[K] };

/**
 * One server whose pool is ready, as selection reads it (see `Client.selectedPool`): what its last check said, its
 * monitor's average RTT, and its operationCount, each read only when selection asks (a class, not an object spread per
 * server and selection: the spread cost microseconds per command).
 */
class PoolServer implements EveryField<SelectableServer<ConnectionPool<Connection>>> {
  constructor(
    readonly pool: ConnectionPool<Connection>,
    private readonly checked: CheckedServer,
    private readonly monitor: Monitor | undefined,
    private readonly selected: ReadonlyMap<ConnectionPool<Connection>, number>,
  ) {}

  get type(): ServerType {
    return this.checked.type;
  }

  get setName(): string | undefined {
    return this.checked.setName;
  }

  get electionId(): ObjectId | undefined {
    return this.checked.electionId;
  }

  get setVersion(): number | undefined {
    return this.checked.setVersion;
  }

  get maxWireVersion(): number | undefined {
    return this.checked.maxWireVersion;
  }

  get tags(): TagSet | undefined {
    return this.checked.tags;
  }

  get lastWriteDate(): number | undefined {
    return this.checked.lastWriteDate;
  }

  get lastUpdateTime(): number | undefined {
    return this.checked.lastUpdateTime;
  }

  get averageRoundTripTimeMS(): number | undefined {
    return this.monitor?.averageRoundTripTimeMS;
  }

  /** Its pool's checkouts waiting or holding a connection, and the selections of it not handed over yet. */
  get operationCount(): number {
    const { inUseConnectionCount, waitQueueLength } = this.pool.snapshot();
    return inUseConnectionCount + waitQueueLength + (this.selected.get(this.pool) ?? 0);
  }
}

/**
 * The `readPreference` of a method's `options` (read once, checked, see `readPreferenceFrom`); undefined when absent
 * (the method's default is `primary`).
 *
 * @throws {InvalidOptionError} as `readPreferenceFrom` does, naming `readPreference`.
 */
function readPreferenceOption(options: { readPreference?: ReadPreferenceMode | ReadPreference | undefined } | undefined): ReadPreference | undefined {
  // Read once; a getter or Proxy trap that throws is an InvalidOptionError naming readPreference.
  const given = readOption(options, 'readPreference');
  return given === undefined ? undefined : readPreferenceFrom('readPreference', given);
}

/**
 * A copy of `command` (its own enumerable string keys, in order) with field `name` set to `value`, the caller's object
 * left as it is. A loop, not an object spread: V8's spread of a command with one field added cost about 0.7 µs of each
 * command sent with a read preference, the loop about 0.1 µs. A field named `__proto__` (of a parsed JSON command) is
 * defined as a field, as the spread did, not made the copy's prototype.
 */
export function withField(command: Document, name: string, value: unknown): Document {
  const copy: Document = {};
  for (const key in command) {
    if (!Object.prototype.hasOwnProperty.call(command, key)) continue;
    setOwnField(copy, key, command[key]);
  }
  setOwnField(copy, name, value);
  return copy;
}

/** Why a topology description's last servers were removed, in words, from what it holds now. */
function emptied(topology: Topology): string {
  if (topology.setName !== undefined) return `none is a member of replica set ${topology.setName} the set's configuration lists`;
  return topology.type === 'Sharded' ? 'none is a mongos' : 'a standalone among several seeds is no deployment';
}

/**
 * The description of the load balancer of load-balanced mode (it has no check): its type `LoadBalancer`, nothing else
 * known. Source: load balancer spec, "Monitoring" (its ServerDescription's type is LoadBalancer from its opening).
 */
const LOAD_BALANCER: ServerDescription = Object.freeze({ ...UNKNOWN_SERVER_DESCRIPTION, type: 'LoadBalancer' });

/** The topology description a client's first TopologyDescriptionChanged starts from, and its last one, once closed, ends at. */
const EMPTY_TOPOLOGY: TopologyDescription = new Topology({ seeds: [], type: 'Unknown' }).description();

/**
 * A topology description as the log writes it (see `topologyDescriptionText`): its TopologyType and its servers' types;
 * of a published description, or of the client's `Topology` as it is (no snapshot is needed to write it).
 */
function describedText(description: Pick<TopologyDescription, 'type' | 'servers'>): string {
  return topologyDescriptionText(description.type, [...description.servers].map(([address, server]) => ({ address, type: server.type })));
}

/** The names of the options of `selectPool()`. */
const SELECT_POOL_OPTION_NAMES = ['signal', 'readPreference', 'operationId'] as const;

/**
 * An Observable that errors with `cancelled()` once `signal` aborts (at once when it has), and never emits; none
 * without a signal. Its listener (one per signal, see `listenToAbort`) leaves as it is unsubscribed. A signal whose
 * `aborted` or `addEventListener` throws makes it error with that Error, or with one saying the `owner`'s signal
 * refused a listener (see `signalRefused`).
 */
function cancelledBy(signal: AbortSignal | undefined, cancelled: () => Error, owner: SignalOwner): Observable<never> | undefined {
  if (signal === undefined) return undefined;
  return new Observable<never>((subscriber) => {
    try {
      if (signal.aborted) return subscriber.error(cancelled());
      return listenToAbort(signal, () => subscriber.error(cancelled()));
    } catch (error) {
      return subscriber.error(signalRefused(error, owner));
    }
  });
}

/**
 * A client of one deployment: a pool and a monitor per host (one pool and no monitor in load-balanced mode, its pool
 * ready at once). Each monitor's heartbeats mark its pool ready or clear it (see {@link heartbeatActions}). Create
 * it with {@link connect}.
 *
 * An establishment of a pool's connection that fails with a network error or timeout before or during the handshake
 * (labelled `SystemOverloadedError`: the server may only be overloaded) leaves the pool as it is, as CMAP asks. When
 * that error is a refused connect (see `isRefusedConnect`: ECONNREFUSED, nothing listens on the server's port; ENOENT
 * for a Unix domain socket whose file its server removed; for a host name, every address refused or with no route from
 * this host, as `localhost`'s ::1 where IPv6 is off), the client also asks that server's monitor for an immediate
 * check (`Monitor.requestCheck()`: no sooner than minHeartbeatFrequencyMS, 500 ms, after its last check; ignored while
 * one is under way, as a streaming monitor's always is). A server that shut down (a restart, an upgrade in place) is so
 * found Unknown and its pool paused within 500 ms of a refused connect, rather than at the next periodic check
 * (heartbeatFrequencyMS, 10 s by default, when the monitor polls), each command meanwhile failing with a refused
 * connect; commands then wait for the server, up to serverSelectionTimeoutMS. A server that answers the check (on the
 * monitor's own connection) keeps its pool ready. A connection the server accepted and then closed or left unanswered,
 * as an overloaded server sheds them, asks for no check: the server stays as it is.
 *
 * A `mongodb+srv://` URI's hosts are found by DNS once the client is created (see {@link connect}): its `hosts`,
 * `pools` and `monitors` are empty until then.
 *
 * SRV polling: once they are open, the SRV records (not the TXT record) are queried again every rescanSRVIntervalMS,
 * 60000 ms (Node's resolver gives no TTL, so the spec's 60 s applies; counted from the end of the previous query, or
 * of the discovery), on the `scheduler` option when given (else unref'd Node timers, which keep no process alive), as
 * long as the TopologyType may be Unknown or Sharded: never in load-balanced mode nor with a replicaSet (URI or TXT
 * record); no more once a monitor's successful check, while no mongos had answered, is of a server that is not
 * a mongos (a hello reply without `msg: 'isdbgrid'`, other than an RSGhost's `isreplicaset: true`); once a mongos
 * answered, the client stays Sharded (SDAM's TopologyType table). What a query gives:
 * - a DNS error (its timeout is connectTimeoutMS), no record, or no target in the parent domain that is a host name
 *   and port: the hosts stay as they are, a `warn` message of the `client` component says why (in `log$` and the log
 *   destination, not in `warnings`), nothing is thrown, and the next query comes heartbeatFrequencyMS later, until one
 *   gives a verified target;
 * - otherwise (each target outside the parent domain, or no host name and port, left out, with such a message): the
 *   hosts still listed are kept, unchanged; those no longer listed removed (monitor closed, then pool closed: its
 *   checkouts still waiting fail with PoolClosedError, a connection in use is closed when checked in, so a command in
 *   flight ends as the server answers it; their feeds end once the pool is done); the new ones added, in `hosts`,
 *   `pools` and `monitors` at once, their events and log messages given to the subscribers of `events$` and `log$`
 *   already there (all of them, or with srvMaxHosts > 0, picked at random until there are srvMaxHosts hosts).
 * {@link close} and {@link drain} stop the polling and abandon a query in progress.
 *
 * Server discovery (unless `directConnection=true` or load-balanced): the hosts given (or found by SRV) are seeds, and
 * each check's reply updates the topology description as SDAM's TopologyType table says. A replica set member's
 * `hosts`, `passives` and `arbiters` not yet monitored are added (host names lower-cased; of a reply's lists only the
 * first 50 entries are read, and the topology holds at most 50 servers; an entry that is no `host:port`, a Unix domain
 * socket path or a name over 255 characters, is left out), each with a pool and a monitor, in `hosts`, `pools` and
 * `monitors`, their events and log messages given to the subscribers already there; the pools of those that bear no
 * data (an arbiter, a hidden member, an RSGhost) are never readied. Removed, as SRV polling removes a host (monitor
 * closed, then pool closed; a command in flight ends as the server answers it): every server a primary's reply does not
 * list; a member of another set than the URI's `replicaSet` (or, without one, than the first member that answered); a
 * member whose `me` is not the address the client reaches it at (the name the configuration gives it is added instead);
 * a standalone or a mongos in a replica set; a server that is not a mongos once a mongos answered; a standalone among
 * several seeds (one seed that is a standalone makes the topology Single). A primary's claim older than the newest
 * election a primary reported (electionId, then setVersion; before MongoDB 6.0 setVersion first) leaves it Unknown; a
 * primary of a newer election makes the former one Unknown, checked at once, its pool not cleared. A network error on a
 * command's connection makes its server Unknown as its pool is cleared. A client whose last server was removed serves
 * no operation: its selections fail at once with `ServerSelectionError`, with no host (a `mongodb+srv://` client's
 * selections wait while its SRV polling goes on: a rescan may add hosts), and a `warn` message of the `client`
 * component says why.
 *
 * @throws {InvalidOptionError} from the constructor, before any pool, monitor or log file is opened: for an invalid
 *   URI (a `mongodb+srv` one with a port, several hosts, directConnection=true, or a positive srvMaxHosts with
 *   replicaSet or loadBalanced=true included); a key of `options` that is not one of {@link ClientOptions}, or of `options.logging`
 *   (naming the closest option: `maxPoolsize` gives "did you mean maxPoolSize?"); a value of the wrong type or range
 *   (named, with the value, never a password, and what is allowed), e.g. `loadBalanced: 'true'`, `compressors:
 *   'zlib'`, `credentials: null`; or an impossible combination (loadBalanced or directConnection with several hosts;
 *   loadBalanced with directConnection=true or a URI's replicaSet, from the URI or the options, either way round;
 *   PLAIN credentials over TCP with `tls` left unset, and MONGODB-X509 ones without `tlsCertificateKeyFile`, naming
 *   `authMechanism`).
 *
 * Source: CMAP spec, "Connection Pool Options" (client-level options, the same for all pools); server monitoring
 * spec (a monitor per server, its pool readied and cleared by it; "Requesting an immediate check": "At any time, the
 * client can request that a monitor check its server immediately", here after a refused connect the pool is not
 * cleared for, an extension); CMAP spec, "Backpressure-enabled"; load balancer spec (no monitor, one pool);
 * connection string and URI options specs; Polling SRV Records for mongos Discovery spec, "Implementation" (SRV
 * polling); server discovery and monitoring spec, "Updating the TopologyDescription" (the TopologyType table and its
 * actions), "Using me field to detect seed list members that do not match host names in the replica set
 * configuration", "Using electionId and setVersion to detect stale primaries", "Other TopologyTypes" (a warning when
 * the last server is removed), "Connection Pool Management", "Network error when reading or writing"; extension: the
 * limits of 50 entries read and 50 servers (MongoDB's limit of a replica set), and of a host's length (RFC 1035).
 */
export class Client {
  /**
   * The hosts the client monitors, `host:port`: the seeds given, as server discovery and SRV polling update them (a
   * new array each time: those kept, in their order, then those added; see {@link Client}). For a `mongodb+srv://`
   * URI: empty until its seedlist is discovered (see {@link connect}); the hosts its SRV records gave (at most
   * srvMaxHosts of them) are its seeds.
   */
  get hosts(): readonly string[] {
    return this.hostList;
  }
  /**
   * The deployment's logical session timeout, in minutes: the smallest `logicalSessionTimeoutMinutes` the data-bearing
   * servers' last checks reported (Standalone, Mongos, RSPrimary, RSSecondary); undefined while none has been checked,
   * when one of them reported none (the deployment does not support sessions), and in load-balanced mode (where
   * sessions are always supported and the value is ignored). What a driver's sessions read to decide whether to use
   * sessions and when a pooled server session is about to expire.
   *
   * Source: server discovery and monitoring spec, "Logical Session Timeout", "logicalSessionTimeoutMinutes"; load
   * balancer spec, "Session Support", "Session Expiration"; driver sessions spec (its use).
   */
  get logicalSessionTimeoutMinutes(): number | undefined {
    return this.topology.logicalSessionTimeoutMinutes;
  }
  /**
   * What the URI parser ignored, and why (never shows a password). Each is also logged: a `warn` message of the
   * `client` component (see {@link log$}).
   */
  get warnings(): readonly string[] {
    return this.warningList;
  }
  /**
   * The connection string with its credentials redacted: the password, the values of the keys that hold secrets, and
   * the value of every key that is not a URI option of the specs, each replaced by `_credentials_`.
   */
  readonly redactedUri: string;

  /**
   * What `JSON.stringify` gives of the client: `{ redactedUri, hosts, warnings }` (as the properties of those names;
   * never a password). Without it the JSON form would walk the client's subscriptions, which are circular once
   * `events$` or `log$` has a subscriber (a TypeError), and would show nothing useful about the client.
   *
   * Source: extension (the pool's `toJSON()` snapshot is its counterpart).
   */
  toJSON(): {
    /** As {@link Client.redactedUri}. */
    redactedUri: string;
    /** As {@link Client.hosts}. */
    hosts: readonly string[];
    /** As {@link Client.warnings}. */
    warnings: readonly string[];
  } {
    return { redactedUri: this.redactedUri, hosts: this.hosts, warnings: this.warnings };
  }
  /**
   * The pool of each host. All share the same options. For a `mongodb+srv://` URI, empty until its seedlist is
   * discovered; SRV polling adds and removes pools (a removed one is closed).
   */
  readonly pools: ReadonlyMap<string, ConnectionPool<Connection>> = new Map();
  /**
   * The monitor of each host (none in load-balanced mode; none before the seedlist of a `mongodb+srv://` URI is
   * known; SRV polling adds and removes them, a removed one closed).
   */
  readonly monitors: ReadonlyMap<string, Monitor> = new Map();
  /**
   * Each pool of the client, for what follows every one of them (metrics, a leak detector): first those in
   * {@link pools} as it is subscribed, then each pool opened later, as it is listed (the hosts a `mongodb+srv://`
   * URI's seedlist finds, those SRV polling adds; a host SRV polling adds again while its removed pool is still in
   * use gives a new pool). Completes when the client is closed (at once for a client closed already, after its pools
   * of that time; closed by a subscriber as a pool is given, once every subscriber was given each pool then listed).
   * A pool SRV polling removes is not announced: it is closed (ConnectionPoolClosed on its `events$`), and its
   * `state$` completes once it is done. Nothing is built while nobody subscribes.
   *
   * Source: extension (the official Java driver's `ConnectionPoolListener.connectionPoolCreated`, through which
   * Micrometer's MongoDB binder follows each pool of a client as the client opens it).
   */
  readonly pools$: Observable<ConnectionPool<Connection>>;
  /**
   * Pool events and heartbeat events of every host, merged; each carries its `address`. A host SRV polling adds is
   * followed from then on (its pool's ConnectionPoolCreated first); one it removes until its pool is done (closed, its
   * last connection checked in); a subscriber that comes later sees only the hosts of that time. In load-balanced mode
   * each subscriber receives the pool's ConnectionPoolReady (the pool is ready at once) right after its
   * ConnectionPoolCreated, unless the client is closed. Completes once the client is closed and its pools are done
   * (their last connections closed, after those events), so a subscription nobody ends keeps no closed client.
   */
  readonly events$: Observable<ClientEvent>;
  /**
   * The command events of every host's pool, merged (see `ConnectionPool.commandEvents$`): the application's commands
   * (`command()`, `withConnection`), never the handshakes, authentication or the monitors' heartbeats. A host SRV
   * polling adds is followed from then on; a subscriber that comes later sees only the commands of its time.
   * Completes once the client is closed and its pools are done (their last connections closed). While nobody
   * subscribes (and the `command` log component is below `debug`), nothing is built for them.
   *
   * Source: command logging and monitoring spec, "Events API", "Guarantees", "Security".
   */
  readonly commandEvents$: Observable<CommandEvent>;
  /**
   * The topology's SDAM events, in the order of the changes they report, whether or not anything logs: TopologyOpening
   * first; the first TopologyDescriptionChanged (from an Unknown description of no server to the seeds, each Unknown),
   * then ServerOpening per seed; ServerDescriptionChanged when a server's own check, or an error of one of its
   * connections, gives it a description not equal to the one it had (RTT and the times do not count: see
   * `serverDescriptionEquals`; the other servers the same update changes, a PossiblePrimary named or a former primary
   * made Unknown, are shown by the TopologyDescriptionChanged alone), before the ServerOpening and ServerClosed of the
   * servers the same change adds and removes; TopologyDescriptionChanged when the description is no longer equal to
   * the last one published, after those; ServerClosed per server removed (its monitor closed, after its last heartbeat);
   * once closed, ServerClosed for each server left, a TopologyDescriptionChanged to an Unknown description of no
   * server, TopologyClosed, then completion. In load-balanced mode the load balancer's ServerOpening is followed by its
   * change from Unknown to `LoadBalancer`. A subscriber that comes before any change after `connect()` is first given
   * those published while `connect()` ran; one that comes later, before TopologyClosed (while close() closes the
   * servers too), the topology as it is, as events (the TopologyOpening, one TopologyDescriptionChanged from the Unknown
   * description of no server to the last description published unless they are equal, a ServerOpening per open server;
   * extension), so that its ServerOpening and ServerClosed pair up; then each gets those that follow; one that comes
   * once TopologyClosed was given only the completion. The matching `topology`
   * log messages (see {@link log$}) are written with each. The events and their descriptions are frozen (see
   * {@link TopologyDescription}); a subscriber may close the client from any event: what that publishes reaches every
   * subscriber after that event, so each sees the same events in the same order.
   *
   * Source: SDAM logging and monitoring spec, "Events API", "Event Order and Concurrency", "Initial Server
   * Description", "Initial Topology Description", "Closing Topology Description"; server discovery and monitoring
   * spec, "Server Description Equality"; load balancer spec, "Monitoring".
   */
  readonly topologyEvents$: Observable<TopologyEvent>;
  /**
   * The client's log feed: first the `client` component's messages (one `warn` {@link ClientLogMessage} per
   * connection string warning, made when the client was created (for a `mongodb+srv://` URI, also those its TXT
   * record adds, once it is read) and given to every subscriber; and the warnings of SRV polling (see {@link Client}),
   * given only to the subscribers of the time, as they recur), when `client` logs
   * at `warn` or a more verbose level: MONGODB_LOG_CLIENT, MONGODB_LOG_ALL or `logging.componentSeverities`), then the
   * CMAP log messages of every pool, merged (when `connection` logs at `debug`), the command messages of every pool
   * (one {@link CommandLogMessage} per command event, when `command` logs at `debug`), the `topology` messages when that
   * component logs at `debug` (MONGODB_LOG_TOPOLOGY, MONGODB_LOG_ALL or `logging.componentSeverities`; nothing is made
   * otherwise): the heartbeat messages of every monitor (one {@link TopologyLogMessage} per heartbeat event, made as
   * its event is published, before the pool reacts to it) and those of the topology's life ("Starting topology
   * monitoring" first, those written while `connect()` ran given to every subscriber that comes before close();
   * "Starting server monitoring", "Topology description changed", "Stopped server monitoring"; "Stopped topology
   * monitoring" last; see {@link TopologyLogFields}), and the server selection messages of `command()` and `selectPool()` (a
   * {@link ServerSelectionLogMessage}: started, succeeded, failed when `serverSelection` logs at `debug`; the waiting
   * message when it logs at `info` or more verbosely: MONGODB_LOG_SERVER_SELECTION). Each message is also written to
   * the logging destination. Empty when all are off. In load-balanced mode each subscriber receives the pool's "Connection pool ready" message right after its
   * "Connection pool created" one (as `events$` does the events), unless the client is closed. Completes once the
   * client is closed and its pools and monitors are done (after their last messages), as `events$` does; a subscriber
   * that comes later receives the client's connection string warnings, then the completion.
   *
   * Source: connection string spec, "Keys", "Values" (WARN messages); CMAP spec, "Connection Pool Logging"; command
   * logging and monitoring spec, "Log Messages"; server discovery and monitoring logging and monitoring spec, "Log
   * Messages" (each message), "Initial Topology Description", "Closing Topology Description"; load balancer spec,
   * "Monitoring"; server selection spec, "Logging"; logging spec, "Components".
   */
  readonly log$: Observable<LogMessage>;
  /** How long `command()` waits for a suitable server, in ms (> 0, at most 2147483647). */
  readonly serverSelectionTimeoutMS: number;
  /** The latency window's size, in ms (>= 0; see {@link ClientOptions.localThresholdMS}). */
  readonly localThresholdMS: number;
  /**
   * The client's default read preference (frozen): the `readPreference` option's, else the URI's (`readPreference`,
   * `readPreferenceTags`, `maxStalenessSeconds`), else `primary`. `command()` and `selectPool()` do not take it (see
   * {@link ClientOptions.readPreference}): a driver passes it as their `readPreference` for the reads that may run on
   * a secondary. Source: server selection spec, "Read preference configuration".
   */
  readonly readPreference: ReadPreference;
  /**
   * The client's own id: a new ObjectId's 24-character hex string, made when the client is created, unique to it
   * (across processes and threads too). The `topologyId` of its `topology` log messages, which tells apart the
   * messages of two clients of one server written to one destination.
   *
   * Source: server discovery and monitoring logging and monitoring spec, "Topology IDs" ("a unique value that is
   * specific to the Topology", created once with it; "The language may decide how to generate the value and what
   * type the value is"), as the Java driver's ClusterId makes it.
   */
  readonly topologyId: string = new ObjectId().toHexString();

  private hostList: readonly string[] = [];
  private warningList: readonly string[];
  /** The feeds of each host now (see {@link openServer}); a host removed by SRV polling leaves it. */
  private readonly hostFeeds = new Map<string, HostFeed>();
  /**
   * The feeds of the hosts opened from now on (all of them, or those SRV polling adds), for the subscribers of
   * `events$` and `log$` already there; completed by close().
   */
  private readonly addedFeeds = new Subject<HostFeed>();
  /** How many announcements of hosts (see {@link announce}) are under way: close() leaves `addedFeeds` to the last one. */
  private announcing = 0;
  /** The feeds of every host, now and later: a subscriber follows the hosts opened after it came too. */
  private readonly allFeeds$: Observable<HostFeed> = defer(() => merge(from([...this.hostFeeds.values()]), this.addedFeeds));
  /** What the pools and monitors of new hosts are made with, once the hosts are known (see {@link openServer}). */
  private serverContext: ServerContext | undefined;
  /**
   * The topology description (SDAM's): the servers the client monitors, its TopologyType, the replica set's name and
   * newest election. Replaced once the hosts are known (see {@link open}); each check's outcome updates it.
   */
  private topology = new Topology({ seeds: [], type: 'Unknown' });
  /** The TopologyType as selection and SRV polling read it (a replica set's two types as one). */
  private get topologyType(): ClientTopologyType {
    return clientTopologyType(this.topology.type);
  }
  /**
   * The warnings of SRV polling and server discovery, for the subscribers of `log$` at the time (not kept for later
   * ones: they may recur).
   */
  private readonly clientWarningLog = new Subject<LogMessage>();
  /**
   * Writes and publishes a warning of SRV polling or server discovery (see {@link clientWarningLog}); nothing when
   * `client` does not log at warn.
   */
  private clientWarning: (warning: string) => void = () => undefined;
  /**
   * The `client` component's messages of warnings found after the client was created (those a TXT record adds), kept
   * for every later subscriber of `log$` as the URI's are (at most one per TXT option).
   */
  private readonly lateClientLog = new ReplaySubject<LogMessage>();
  /**
   * The `topology` messages (when the component logs at debug) made once the client was made: the heartbeat messages
   * of every monitor and the messages of the topology's life, for the subscribers of `log$` at the time; completed
   * once close() closed every monitor, each published its last heartbeat, and "Stopped topology monitoring" was written.
   */
  private readonly topologyLog = new Subject<TopologyLogMessage>();
  /** The `topology` messages made while the client was made ("Starting topology monitoring"…): given to each subscriber of `log$`. */
  private readonly openingLog: TopologyLogMessage[] = [];
  /** How the topology's life is logged; undefined unless `topology` logs at debug. */
  private topologyLogging: TopologyLogging | undefined;
  /** The topology events published once the client was made, for the subscribers of `topologyEvents$` at the time. */
  private readonly topologyEvent = new Subject<TopologyEvent>();
  /**
   * The topology events published while the client was made (TopologyOpening…): given first to each subscriber that
   * comes before any later change (see {@link topologyAsEvents}).
   */
  private readonly openingEvents: TopologyEvent[] = [];
  /**
   * What was published in `topologyEvents$` while an event was being given to its subscribers (by one of them that
   * closed the client, say): given next, in order, once every subscriber has that event (see
   * {@link publishTopologyEvent}).
   */
  private readonly topologyEventsDue: (() => void)[] = [];
  /** Whether an event of `topologyEvents$` is being given to its subscribers (see {@link topologyEventsDue}). */
  private givingTopologyEvent = false;
  /** Whether the client is being made (see {@link openingEvents}, `openingLog`). */
  private opening = true;
  /** Whether a topology event was given since `connect()` returned (see {@link topologyAsEvents}). */
  private changedSinceOpening = false;
  /** Whether TopologyClosed was given to the subscribers of `topologyEvents$`: a subscriber that comes then gets the end only. */
  private topologyClosedGiven = false;
  /** The description of the last TopologyDescriptionChanged given to the subscribers of `topologyEvents$`. */
  private givenDescription = EMPTY_TOPOLOGY;
  /** The servers whose ServerOpening was given to the subscribers of `topologyEvents$`, and no ServerClosed yet. */
  private readonly givenServers = new Set<string>();
  /**
   * The topology description the last TopologyDescriptionChanged published gave (given to the subscribers at once, or
   * once the event being given is: see {@link givenDescription}); the next change is published from it.
   */
  private publishedDescription = EMPTY_TOPOLOGY;
  /**
   * The servers an establishment error made Unknown, whose ServerDescriptionChanged is not yet published (it waits for
   * the pool's clear to end: see `establishmentFailed`), each with its description before: published before any later
   * change of the server, and before the next TopologyDescriptionChanged (which shows it), so that the changes of two
   * servers whose pools failed in one tick come each before the topology's change that shows it.
   */
  private readonly unpublishedChanges = new Map<string, ServerDescription | undefined>();
  /** How often the monitors check their server, in ms: part of a secondary's staleness estimate. */
  private readonly heartbeatFrequencyMS: number;
  /** The hosts found whose connection options were refused (see {@link applyChange}): each warned of once. */
  private readonly refusedHosts = new Set<string>();
  /** Whether the client was given `directConnection=true` (see `suitableServers`). */
  private directConnection = false;
  /**
   * Per pool, the selections that took it and whose caller has not started its checkout yet (see {@link handOver}):
   * with the pool's checkouts in progress, its server's operationCount.
   */
  private readonly selected = new Map<ConnectionPool<Connection>, number>();
  /**
   * The hosts whose "Starting server monitoring" was written and whose "Stopped server monitoring" was not yet: a
   * server is stopped in the log only if it was started there (a subscriber may close the client between a host's
   * opening and its message).
   */
  private readonly monitoredServers = new Set<string>();
  /**
   * The server selection messages (component `serverSelection`, when it logs at info or debug), for the subscribers
   * of `log$` at the time; completed once the client is closed and every selection that logged its start logged its end.
   */
  private readonly selectionLog = new Subject<ServerSelectionLogMessage>();
  /** How server selections are logged; undefined when `serverSelection` logs at neither info nor debug. */
  private readonly selectionLogging: SelectionLogging | undefined;
  /** The selections that logged their start and not yet their end (see {@link loggedSelect}). */
  private selectionsLogging = 0;
  /** A `mongodb+srv://` URI's discovery: its host name, and its discovery in progress or done (see {@link discover}). */
  private srv: SrvState | undefined;
  private readonly sink: LogSink | undefined;
  private readonly scheduler: SchedulerLike;
  /** The client metadata every pool's and monitor's new connections send in their handshake. */
  private readonly metadata: ClientMetadata;
  private closed = false;
  /** Whether drain() was called: from then on a checkout is refused with PoolClosedError, as drain() says. */
  private draining = false;
  /**
   * The server selections waiting for a suitable server (see {@link select}), each told of the pool of a server
   * selected for it (see {@link selectedPool}), of the start of a
   * drain (`'drain'`), and of the client's close (ClientClosedError); each with its read preference. One Map and one
   * subscription to the pools' events serve them all, so a selection joins and leaves in O(1) and an event is read
   * once however many wait: in an outage every command waits here, thousands at a time, and the pool that becomes
   * ready then sends them on in one pass (each selection drawn on its own, counted before the next is drawn).
   */
  private readonly selections = new Map<Subscriber<ConnectionPool<Connection> | 'drain'>, ReadPreference>();
  /** The subscription to the pools' events while a selection waits (none otherwise: nobody to tell). */
  private selectionEvents: Subscription | undefined;
  /** The pools close() closed (those a drain had not closed already): the checkouts it ended fail as ClientClosedError. */
  private readonly closedByClient = new Set<ConnectionPool<Connection>>();
  /**
   * The pools of the hosts SRV polling removed that still have connections in use, each with the promise resolved once
   * it is done (its last connection checked in): {@link drain} waits for them as for the others.
   */
  private readonly retiringPools = new Map<ConnectionPool<Connection>, Promise<void>>();
  /** The connections `command()` has a command in flight on: `close()` closes them. */
  private readonly commandConnections = new Set<Connection>();
  /** The error of each host whose last check failed (none once a check succeeds), newest last. */
  private readonly heartbeatErrors = new Map<string, Error>();
  /**
   * The command errors that made their server Unknown and cancelled its monitor's check (see {@link run}): that check's
   * failure (its error's `cause`) says nothing more of the server.
   */
  private readonly checksCancelled = new WeakSet<Error>();

  /** Use {@link connect}. */
  constructor(uri: string, options: ClientOptions = {}) {
    // Every option is checked before anything is opened, so an invalid one leaves nothing behind.
    const given = requireOptionsObject('options', options, 'an object of client options') ?? {};
    rejectUnknownOptions(given, CLIENT_OPTION_NAMES, 'connect()');
    // Each option read once, none from Object.prototype (see optionValue): what follows reads only this copy.
    const o: ClientOptions = optionValues(given as ClientOptions, CLIENT_OPTION_NAMES);
    requireBoolean('loadBalanced', o.loadBalanced);
    requireBoolean('directConnection', o.directConnection);
    requireScheduler('scheduler', o.scheduler);
    // The URI may complete them (a proxyHost for the options' proxyUsername and proxyPassword): checked whole below.
    const serverApi = checkConnectionOptions(pick(o, CLIENT_CONNECTION_OPTION_NAMES), 'connect()', '', [], true);
    // Its checked copy from here on: read once, every pool and monitor declares what that reading said.
    if (serverApi !== undefined) o.serverApi = serverApi;
    const logSettings = resolveLogSettings(o.logging);

    // Server selection waits on real (ref'd) timers by default: a script awaiting command() is not left to exit
    // while it waits. close() cancels every wait, so nothing outlives the client.
    this.scheduler = o.scheduler ?? clientScheduler;
    // Credentials given here replace the URI's, completed by its authMechanism and authSource (else its database).
    // The URI's minPoolSize is judged against the maxPoolSize that applies: the options', when they set one.
    const parsed = parseConnectionStringForClient(uri, { credentials: o.credentials, maxPoolSize: o.maxPoolSize });
    this.warningList = parsed.warnings;
    this.redactedUri = parsed.redacted;
    const client = { ...parsed.clientOptions, ...definedOnly(pick(o, ['heartbeatFrequencyMS', 'serverMonitoringMode', 'serverSelectionTimeoutMS', 'localThresholdMS', 'loadBalanced', 'directConnection'])) };
    const serverMonitoringMode = requireServerMonitoringMode(optionValue(client, 'serverMonitoringMode'));
    const sst = optionValue(client, 'serverSelectionTimeoutMS') ?? 30_000;
    // Server selection waits on one timer: Node runs a longer one after 1 ms.
    if (typeof sst !== 'number' || !Number.isFinite(sst) || sst <= 0 || sst > MAX_TIMER_DELAY_MS) {
      throw new InvalidOptionError('serverSelectionTimeoutMS', sst, `a number of ms > 0 and at most ${MAX_TIMER_DELAY_MS}`);
    }
    this.serverSelectionTimeoutMS = sst;
    const threshold = optionValue(client, 'localThresholdMS') ?? DEFAULT_LOCAL_THRESHOLD_MS;
    if (typeof threshold !== 'number' || !Number.isFinite(threshold) || threshold < 0) {
      throw new InvalidOptionError('localThresholdMS', threshold, 'a number of ms >= 0');
    }
    this.localThresholdMS = threshold;
    this.readPreference = o.readPreference === undefined ? (parsed.readPreference ?? PRIMARY) : readPreferenceFrom('readPreference', o.readPreference);
    const frequency = optionValue(client, 'heartbeatFrequencyMS');
    const validFrequency = typeof frequency === 'number' && Number.isFinite(frequency) && frequency >= MIN_HEARTBEAT_FREQUENCY_MS;
    if (frequency !== undefined && !validFrequency) {
      throw new InvalidOptionError('heartbeatFrequencyMS', frequency, `a number of ms >= ${MIN_HEARTBEAT_FREQUENCY_MS}`);
    }
    this.heartbeatFrequencyMS = frequency ?? DEFAULT_HEARTBEAT_FREQUENCY_MS;
    // The options of the URI (and, for a mongodb+srv one, of its TXT record) merged with these, checked (see hostSettings).
    const first = this.hostSettings(parsed, o);
    const { connectionOptions } = first;
    // One client metadata for every connection of the client; appendMetadata() changes it for those made later.
    this.metadata = new ClientMetadata(optionValue(connectionOptions, 'appName'), optionValue(connectionOptions, 'driverInfo'));
    // Each host's connection factories, before the log destination is opened: one may still refuse its options (a
    // TLS file it cannot read, a host the SOCKS5 proxy cannot be asked for), and nothing is opened then. For a
    // mongodb+srv URI, tried on its host name: the options are refused now, not once its hosts are found.
    const monitorOptions = monitoringConnectionOptions(connectionOptions);
    const factories = this.connectionFactories(parsed.hosts, connectionOptions, monitorOptions, first.loadBalanced, o.scheduler);

    // Connection string spec: every warning is a WARN message (component `client`); client.warnings keeps them too.
    const clientMessage = (warning: string): ClientLogMessage => new ClientLogMessage(this.logTime(), { message: warning });
    const logsClientWarnings = willLog(logSettings.severities.client, 'warn');
    const clientMessages = logsClientWarnings ? parsed.warnings.map(clientMessage) : [];

    // One log destination for every pool of the client, opened once: a file or stream the client closes, or the
    // application's sink object guarded once, so that its first failure stops the client's writing to it (one warning).
    const loggingOn = Object.values(logSettings.severities).some((level) => level !== 'off');
    const { path } = logSettings;
    this.sink = loggingOn && typeof path === 'string' ? openLogSink(path) : undefined;
    const destination = loggingOn ? (this.sink ?? openLogSink(path)) : undefined;
    const logging: LoggingOptions = {
      componentSeverities: { ...logSettings.severities },
      maxDocumentLength: logSettings.maxDocumentLength,
      path: destination ?? path,
    };
    // The client's own messages (connection string warnings, heartbeats; each kind made only when its component
    // logs, so only when logging is on and there is a destination) reach that destination too.
    for (const message of clientMessages) destination?.write(message);

    // The heartbeat messages (component `topology`), made only when it logs at debug: one per heartbeat event, written
    // and published in log$ before the event reaches events$ and the pool.
    // The topology's life (SDAM logging and monitoring spec, "Log Messages"): those made while the client is made are
    // kept for every subscriber of log$ (none can have subscribed yet), the later ones go to those of the time.
    const topologyLog = this.topologyLog;
    let heartbeatLog: ((event: ServerHeartbeatEvent, server: ServerAddress) => void) | undefined;
    if (destination !== undefined && willLog(logSettings.severities.topology, 'debug')) {
      const { maxDocumentLength } = logSettings;
      // The monitors' clock: their events' times are read on it.
      const monitorScheduler = o.scheduler ?? timerScheduler;
      heartbeatLog = (event, server) => {
        const message = heartbeatLogMessage(event, server, this.topologyId, maxDocumentLength, wallClockTime(event.time, monitorScheduler));
        // In turn with the topology's events and messages (see publishTopologyEvent): one a subscriber's close() makes
        // (a check it ended) comes after the message or event that subscriber was given.
        this.giveTopologyEvents(() => {
          destination.write(message);
          topologyLog.next(message);
        });
      };
      this.topologyLogging = {
        maxDocumentLength,
        write: (fields) => {
          const message = new TopologyLogMessage(this.logTime(), fields);
          destination.write(message);
          if (this.opening) this.openingLog.push(message);
          else topologyLog.next(message);
        },
      };
    }
    // The server selection messages (component `serverSelection`): the waiting message at info, the others at debug.
    const selectionLevel = logSettings.severities.serverSelection;
    const selectionLog = this.selectionLog;
    this.selectionLogging =
      destination === undefined || !willLog(selectionLevel, 'info')
        ? undefined
        : {
            debug: willLog(selectionLevel, 'debug'),
            maxDocumentLength: logSettings.maxDocumentLength,
            write: (message) => {
              destination.write(message);
              selectionLog.next(message);
            },
          };
    this.pools$ = this.allFeeds$.pipe(map((f) => f.pool));
    this.events$ = this.allFeeds$.pipe(mergeMap((f) => f.events$));
    this.commandEvents$ = this.allFeeds$.pipe(mergeMap((f) => f.commandEvents$));
    this.topologyEvents$ = this.topologyEvents();
    this.log$ = merge(from(clientMessages), this.topologyLog$(), this.lateClientLog, this.allFeeds$.pipe(mergeMap((f) => f.log$)), selectionLog, this.clientWarningLog);
    if (logsClientWarnings) {
      this.clientWarning = (warning) => {
        const message = clientMessage(warning);
        destination?.write(message);
        this.clientWarningLog.next(message);
      };
    }

    const open = (settings: HostSettings, hosts: readonly string[], hostFactories: Map<string, HostFactories>): void => {
      const pools = this.pools as Map<string, ConnectionPool<Connection>>;
      const monitors = this.monitors as Map<string, Monitor>;
      const context: ServerContext = { settings, heartbeatLog, logging, heartbeatFrequencyMS: frequency, serverMonitoringMode, scheduler: o.scheduler };
      const feeds: [string, HostFeed][] = [];
      this.hostList = hosts;
      try {
        for (const [address, factory] of hostFactories) feeds.push([address, this.openServer(address, factory, context)]);
      } catch (error) {
        // A pool or monitor refused its options: close what was made before it, no longer listed, so the topology log
        // (which follows each pool) describes no server whose monitoring it never started.
        const made = [...pools.values()];
        const watching = [...monitors.values()];
        pools.clear();
        monitors.clear();
        this.hostFeeds.clear();
        this.hostList = [];
        for (const monitor of watching) monitor.close();
        for (const pool of made) pool.close();
        throw error;
      }
      this.serverContext = context;
      this.topology = new Topology(initialTopology({ ...settings, seeds: hosts }));
      this.directConnection = settings.directConnection;
      CONNECTED_SETTINGS.set(this, { ...settings, srvMaxHosts: parsed.srvMaxHosts, srvServiceName: parsed.srvServiceName });
      this.announce(feeds);
      // The seeds listed, each Unknown, then each opened.
      this.topologyChanged();
      this.serversOpened(feeds.map(([address]) => address));
      // Monitors start on the next microtask, so subscribers attached right after connect() see the first heartbeat.
      queueMicrotask(() => {
        if (!this.closed) for (const monitor of monitors.values()) monitor.start();
      });
    };

    this.publishTopologyEvent({ type: 'TopologyOpening', topologyId: this.topologyId, time: this.scheduler.now() }, { message: 'Starting topology monitoring', topologyId: this.topologyId });
    if (!parsed.isSRV) {
      try {
        open(first, parsed.hosts, factories);
      } catch (error) {
        // No client: its log and its topology events end here (a mongodb+srv client whose found hosts are refused lives
        // on, and its log too).
        this.publishTopologyEvent({ type: 'TopologyClosed', topologyId: this.topologyId, time: this.scheduler.now() }, { message: 'Stopped topology monitoring', topologyId: this.topologyId });
        void this.sink?.close?.();
        throw error;
      }
      this.opening = false;
      return;
    }
    // mongodb+srv: the hosts and the TXT record's options are found first (see discover); they make the URI the client
    // then connects with, checked again whole, with the options of the options object.
    const srvOpen = (resolved: string): void => {
      const effective = parseConnectionStringForClient(resolved, { credentials: o.credentials, maxPoolSize: o.maxPoolSize });
      const settings = this.hostSettings(effective, o, parsed.srvMaxHosts);
      // The warnings the TXT record adds.
      const known = [...parsed.warnings];
      const added = effective.warnings.filter((warning) => {
        const i = known.indexOf(warning);
        if (i < 0) return true;
        known.splice(i, 1);
        return false;
      });
      const hostFactories = this.connectionFactories(effective.hosts, settings.connectionOptions, monitoringConnectionOptions(settings.connectionOptions), settings.loadBalanced, o.scheduler);
      open(settings, effective.hosts, hostFactories);
      if (added.length > 0) {
        this.warningList = Object.freeze([...this.warningList, ...added]);
        if (logsClientWarnings) {
          for (const warning of added) {
            const message = clientMessage(warning);
            destination?.write(message);
            this.lateClientLog.next(message);
          }
        }
      }
    };
    this.srv = {
      hostname: parseAddress(parsed.hosts[0]).host,
      uri,
      srvServiceName: parsed.srvServiceName,
      srvMaxHosts: parsed.srvMaxHosts,
      connectTimeoutMS: optionValue(connectionOptions, 'connectTimeoutMS') ?? DEFAULT_CONNECT_TIMEOUT_MS,
      externalSource: isExternalMechanism(connectionOptions.credentials?.mechanism),
      discovery: undefined,
      done: false,
      abort: new AbortController(),
      open: srvOpen,
      poller: undefined,
    };
    this.opening = false;
    // Started at once; a failure no command awaits is kept for the next one (which starts it again).
    this.discover().catch(() => undefined);
  }

  /**
   * The settings of the hosts of `parsed` (a connection string whose hosts are servers, or a `mongodb+srv` one before
   * its discovery) merged with the options object `o`: its connection and pool options, loadBalanced, replicaSet,
   * checked as each pool and monitor will check them, and against the topology rules.
   *
   * @throws {InvalidOptionError} as {@link Client} says.
   */
  private hostSettings(parsed: ParsedConnectionString, o: ClientOptions, srvMaxHosts?: number): HostSettings {
    const client = { ...parsed.clientOptions, ...definedOnly(pick(o, ['loadBalanced', 'directConnection'])) };
    const loadBalanced = optionValue(client, 'loadBalanced') === true;
    const directConnection = optionValue(client, 'directConnection') === true;
    // The URI's own topology options were checked as it was parsed; the same rules apply to them merged with these:
    // loadBalanced from the object with the URI's replicaSet or directConnection=true (or both from the object) is
    // the same impossible topology, not one to settle by ignoring one of them.
    const replicaSet = parsed.replicaSet !== undefined;
    checkTopologyOptions({ hostCount: parsed.hosts.length, isSRV: parsed.isSRV, loadBalanced, directConnection, replicaSet, srvMaxHosts: srvMaxHosts ?? parsed.srvMaxHosts });

    // loadBalanced goes to each pool as the pool's own option (which also sets its handshake), not in these.
    const { loadBalanced: _loadBalanced, ...connectionOptions }: ConnectionOptions = {
      ...parsed.connectionOptions,
      ...definedOnly(pick(o, CLIENT_CONNECTION_OPTION_NAMES)),
      credentials: parsed.connectionOptions.credentials,
    };
    const poolOptions = { ...parsed.poolOptions, ...definedOnly(pick(o, CLIENT_POOL_OPTION_NAMES)) };
    resolvePoolOptions(poolOptions);
    // The URI's values with the object's, checked as each pool and monitor checks what it is given.
    checkConnectionOptions(connectionOptions, 'connect()');
    return { connectionOptions, poolOptions, loadBalanced, directConnection, replicaSet: parsed.replicaSet };
  }

  /**
   * The discovery of the seedlist of the client's `mongodb+srv://` URI, then the opening of its hosts' pools and
   * monitors: the one in progress, or a new one when none is or the last one failed (resolved at once when it is
   * done, or for a `mongodb://` URI). Bounded by connectTimeoutMS (default 10000 ms, as for connections; 0: none of its own, the resolver's retries end
   * after about 25 s); cancelled by
   * {@link close}, then rejected with ClientClosedError.
   *
   * @throws {SrvResolutionError} (rejection) as discoverSeedlist does, or when the URI's and TXT record's options with
   *   the hosts found are an impossible combination (`cause`: that InvalidOptionError).
   */
  private discover(): Promise<void> {
    const srv = this.srv;
    if (srv === undefined || srv.done) return Promise.resolve();
    if (this.closed) return Promise.reject(new ClientClosedError(this.hostsForErrors()));
    if (srv.discovery !== undefined) return srv.discovery;
    const discovery = discoverSeedlist(srv.hostname, {
      srvServiceName: srv.srvServiceName,
      srvMaxHosts: srv.srvMaxHosts,
      timeoutMS: srv.connectTimeoutMS,
      signal: srv.abort.signal,
    }).then(
      (seedlist) => {
        if (this.closed) throw new ClientClosedError(this.hostsForErrors());
        try {
          // The TXT record's authSource is a default for users in a database: MONGODB-X509 users are all in $external,
          // where a URI's authSource must point (as the official driver, which applies it only to other mechanisms).
          const txt = srv.externalSource ? seedlist.txtOptions.filter(([key]) => key.toLowerCase() !== 'authsource') : seedlist.txtOptions;
          srv.open(resolvedUri(srv.uri, seedlist.hosts, txt));
        } catch (error) {
          const reason = error instanceof Error ? error.message : String(error);
          throw new SrvResolutionError(srv.hostname, `its hosts (${seedlist.hosts.join(', ')}) and options cannot be used: ${reason}`, error);
        }
        srv.done = true;
        this.startSrvPolling(srv);
      },
      (error: unknown) => {
        throw this.closed ? new ClientClosedError(this.hostsForErrors()) : error;
      },
    );
    srv.discovery = discovery;
    // A failed discovery is not kept: the next command starts a new one.
    discovery.catch(() => {
      if (srv.discovery === discovery) srv.discovery = undefined;
    });
    return discovery;
  }

  /**
   * Starts the rescans of the SRV records of `srv` once its hosts are open (see `SrvPoller`): not in load-balanced
   * mode, nor with a replicaSet (from the URI or the TXT record), whose TopologyType is never Unknown or
   * Sharded, nor once the client is closed or draining (a subscriber of its first events may have closed it). The
   * first comes rescanSRVIntervalMS (60 s) after this call, on the client's scheduler (default: unref'd Node timers,
   * which keep no process alive). The changes are applied by {@link applySrvHosts}; what a rescan cannot
   * use is a `warn` message of the `client` component.
   *
   * Source: Polling SRV Records for mongos Discovery spec, "Implementation".
   */
  private startSrvPolling(srv: SrvState): void {
    const context = this.serverContext;
    // Closed or draining already: by a subscriber of the events the hosts gave as they opened.
    if (this.closed || this.draining) return;
    if (context === undefined || this.topologyType !== 'Unknown' && this.topologyType !== 'Sharded') return;
    srv.poller = new SrvPoller({
      hostname: srv.hostname,
      srvServiceName: srv.srvServiceName,
      srvMaxHosts: srv.srvMaxHosts,
      heartbeatFrequencyMS: context.heartbeatFrequencyMS ?? DEFAULT_HEARTBEAT_FREQUENCY_MS,
      timeoutMS: srv.connectTimeoutMS,
      scheduler: context.scheduler ?? timerScheduler,
      hosts: () => this.hostList,
      update: (hosts) => this.applySrvHosts(hosts),
      warn: (warning) => this.clientWarning(warning),
    });
    srv.poller.start();
  }

  /**
   * The hosts that errors name: the client's (none once discovery removed every one), or the host name of a
   * mongodb+srv URI before its hosts are known.
   */
  private hostsForErrors(): readonly string[] {
    return this.hostList.length > 0 || this.srv === undefined || this.srv.done ? this.hostList : [this.srv.hostname];
  }

  /**
   * The connection factories of each host: its pool's and (unless load-balanced) its monitor's, sharing the client's
   * metadata (see appendMetadata). Opens nothing.
   *
   * @throws {InvalidOptionError} for options a factory refuses (a TLS file it cannot read, a host the proxy cannot be
   *   asked for).
   */
  private connectionFactories(
    hosts: readonly string[],
    connectionOptions: ConnectionOptions,
    monitorOptions: ConnectionOptions,
    loadBalanced: boolean,
    scheduler: SchedulerLike | undefined,
  ): Map<string, HostFactories> {
    const factories = new Map<string, HostFactories>();
    for (const address of hosts) {
      const { host, port } = parseAddress(address);
      factories.set(address, {
        pool: connectionFactoryWithMetadata({ ...connectionOptions, loadBalanced, host, port }, this.metadata),
        // load balancer spec: no monitoring connection
        monitor: loadBalanced
          ? undefined
          : connectionFactoryWithMetadata({ ...monitorOptions, host, port }, this.metadata, () => (scheduler ?? timerScheduler).now()),
      });
    }
    return factories;
  }

  /**
   * Makes the pool and (unless load-balanced) the monitor of the host `address`, listed in `pools` and `monitors`
   * (the monitor not started); the monitor's heartbeats drive the pool. Returns the host's feeds, for `events$` and
   * `log$` (load-balanced: the pool readied at once).
   *
   * @throws {InvalidOptionError} when the pool or the monitor refuses its options (nothing of this host is listed then).
   */
  private openServer(address: string, factory: HostFactories, context: ServerContext): HostFeed {
    const { heartbeatLog, settings, logging, heartbeatFrequencyMS, serverMonitoringMode, scheduler } = context;
    const pools = this.pools as Map<string, ConnectionPool<Connection>>;
    const monitors = this.monitors as Map<string, Monitor>;
    const pool: ConnectionPool<Connection> = new ConnectionPool({
      address,
      ...settings.poolOptions,
      connectionFactory: factory.pool,
      loadBalanced: settings.loadBalanced,
      logging,
      scheduler,
      clearOnEstablishmentError: (error, establishment) => this.establishmentFailed(pool, error, establishment.generation),
    });
    const retired = new Subject<void>();
    const retire = untilRetired(retired);
    // Read as each subscriber comes (not captured now): `events$` is the pool's property.
    const poolEvents$ = defer(() => pool.events$).pipe(retire);
    const commandEvents$ = pool.commandEvents$.pipe(retire);
    if (factory.monitor === undefined) {
      // Load-balanced: no monitoring connection; the pool is usable at once. Its subscribers receive that
      // ConnectionPoolReady (and its log message) right after the ConnectionPoolCreated the pool gives each of them.
      pools.set(pool.address, pool);
      const feeds = readyAtOnce(pool);
      return { pool, events$: feeds.events$.pipe(retire), log$: feeds.log$.pipe(retire), commandEvents$, poolEvents$, retired };
    }
    let monitor: Monitor;
    try {
      monitor = new Monitor({
        address,
        heartbeatFrequencyMS,
        serverMonitoringMode,
        connectionOptions: monitoringConnectionOptions(settings.connectionOptions),
        connectionFactory: factory.monitor,
        scheduler,
      });
    } catch (error) {
      pool.close();
      throw error;
    }
    pools.set(pool.address, pool);
    monitors.set(monitor.address, monitor);
    // Each heartbeat reaches the client's feed before the pool reacts to it, so the merged feed is causally
    // ordered (ServerHeartbeatSucceeded, then ConnectionPoolReady).
    const published = new Subject<ServerHeartbeatEvent>();
    const toPool = new Subject<ServerHeartbeatEvent>();
    toPool.pipe(heartbeatActions()).subscribe(pool.input);
    const server = parseAddress(address);
    monitor.heartbeats$.subscribe({
      next: (e) => {
        let change: TopologyChange | undefined;
        const previous = this.describedNow(address);
        // Its log message first: the spec's order of log messages is that of the changes they report.
        heartbeatLog?.(e, server);
        // Each host's last check, when it failed; the newest failure is the Map's last entry.
        if (e.type === 'ServerHeartbeatFailed') {
          this.heartbeatErrors.delete(address);
          this.heartbeatErrors.set(address, e.error);
          // A check a removal or close() ended leaves the description alone, and so does one a command's network error
          // cancelled: that error made the server Unknown already (SDAM's unified tests count one change to Unknown).
          if (!(e.error instanceof MonitorClosedError) && !this.checksCancelled.has(e.error.cause as Error)) this.serverUnknown(address, undefined, e.error);
        } else if (e.type === 'ServerHeartbeatSucceeded') {
          const topologyVersion = asTopologyVersion(e.reply.topologyVersion);
          // A reply older than what the client knows (a state change error that came during the check, whose
          // topologyVersion its Unknown description keeps) changes nothing: the server stays Unknown, its pool as the
          // error left it.
          if (isStaleServerDescription(this.topology.servers.get(address)?.topologyVersion, topologyVersion)) {
            published.next(e);
            return;
          }
          this.heartbeatErrors.delete(address);
          change = this.serverChecked(address, e.reply);
        }
        published.next(e);
        // Its new description, after the heartbeat that brought it (in events$ as in the log) and before the servers
        // the check adds and removes.
        this.serverChanged(address, previous);
        // A server the check removed (a member of another set, a standalone among seeds, one the primary no longer
        // lists): its pool is closed next, not readied first. One that bears no data (an arbiter, a hidden member, an
        // RSGhost) keeps its pool paused: see readiesPool.
        if (this.topology.servers.has(address) && (e.type !== 'ServerHeartbeatSucceeded' || readiesPool(this.topology, address))) toPool.next(e);
        if (change !== undefined) this.applyChange(change);
        // The check a removal ended says nothing of the server: its "Stopped server monitoring" comes next, then the
        // description without it (see removeHost).
        if (!(e.type === 'ServerHeartbeatFailed' && e.error instanceof MonitorClosedError)) this.topologyChanged();
        // An incompatible server makes the topology incompatible: the selections waiting fail now with its error.
        if (e.type === 'ServerHeartbeatFailed' && e.error instanceof IncompatibleServerError) for (const selection of [...this.selections.keys()]) selection.error(e.error);
        // A check can make a server suitable without a pool event (a secondary elected primary, its pool ready already).
        else if (e.type === 'ServerHeartbeatSucceeded') this.announceReadyPool();
      },
      complete: () => {
        published.complete();
        toPool.complete();
        this.serverStopped(address);
      },
    });
    return { pool, events$: merge(poolEvents$, published), log$: pool.log$.pipe(retire), commandEvents$, poolEvents$, retired };
  }

  /**
   * The client's establishment error policy for the pool of `address` (see `ConnectionPoolCore`'s
   * `clearOnEstablishmentError`): the pool's default rule decides whether `error` clears the pool (a network error or
   * timeout before or during the handshake, labelled as backpressure, does not); one it leaves the pool alone for that
   * is a refused connect (see `isRefusedConnect`: nothing listens on the server's port or socket path) asks the
   * server's monitor for an immediate check (`Monitor.requestCheck()`), so a server that is gone is found Unknown and
   * its pool paused within minHeartbeatFrequencyMS, not heartbeatFrequencyMS later. A connection the server accepted
   * and then closed or left unanswered, as an overloaded server sheds them, asks for nothing: the server stays as it is
   * (SDAM's backpressure tests: no clear, no change of its description). An error that clears the pool makes the
   * server Unknown in the topology description first (SDAM, "MongoDB Handshake errors": as a network error after the
   * handshake; the description and the pool change together). An establishment begun before the pool's last clear
   * (`generation`, the one its connection was created in, older than the pool's), or by a pool the client no longer
   * has, changes nothing of the server: its error is stale, and the pool does not clear for it either (SDAM,
   * "Application errors": "the client MUST NOT update any topology state").
   */
  private establishmentFailed(pool: ConnectionPool<Connection>, error: Error, generation: number): boolean {
    const address = pool.address;
    const clears = defaultClearOnEstablishmentError(error);
    const current = generation === pool.generation && this.pools.get(address) === pool;
    if (clears && current && this.monitors.has(address)) {
      // The description before the first change not yet published (two failures in one tick make one change).
      if (!this.unpublishedChanges.has(address)) this.unpublishedChanges.set(address, this.topology.servers.get(address));
      this.serverUnknown(address, undefined, error);
      // Published once the pool's clear is done (this runs within the pool's establishment), as its ConnectionPoolCleared
      // is; before any topology change that shows it (see topologyChanged), whichever comes first.
      queueMicrotask(() => this.topologyChanged());
    }
    if (!clears && isRefusedConnect(error)) this.monitors.get(address)?.requestCheck();
    return clears;
  }

  /**
   * After a successful check of `address` whose hello reply is `reply`: the topology description takes the server's
   * new description (see `Topology.update`; with its monitor's round-trip times as they are now), which selection
   * reads: Unknown when the update made it so (a primary older than the newest election; a direct connection given a
   * `replicaSet` whose reply names no set or another one). SRV polling stops for good once the TopologyType is neither
   * Unknown nor Sharded. Returns what the client must do next (see {@link applyChange}).
   *
   * Source: server discovery and monitoring spec, "Updating the TopologyDescription", "Verifying setName with
   * TopologyType Single", "Using electionId and setVersion to detect stale primaries"; Polling SRV Records for mongos
   * Discovery spec, "Implementation".
   */
  private serverChecked(address: string, reply: Document): TopologyChange {
    const checked = serverDescriptionOf(reply, this.scheduler.now());
    const monitor = this.monitors.get(address);
    // A reply that leaves the server Unknown (no ok: 1) has no RTT, as SDAM's Unknown server has none.
    const description = monitor === undefined || checked.type === 'Unknown' ? checked : Object.freeze({ ...checked, roundTripTime: monitor.averageRoundTripTimeMS, minRoundTripTime: monitor.minRoundTripTimeMS });
    const change = this.topology.update(address, description);
    if (this.topologyType !== 'Unknown' && this.topologyType !== 'Sharded') this.srv?.poller?.stop();
    return change;
  }

  /**
   * Makes the server at `address` Unknown after an error of one of its connections or of its check (its last check no
   * longer describes it): a replica set left without a primary is ReplicaSetNoPrimary. Its description keeps
   * `topologyVersion`, a state change error's (a check answered before the error, older, is then ignored), and the
   * message of `error` (the failed check's, or the connection's error).
   *
   * Source: server discovery and monitoring spec, "Error handling" ("mark the server Unknown"; "the server's
   * description ... topologyVersion" of a state change error).
   */
  private serverUnknown(address: string, topologyVersion?: Document, error?: Error): void {
    this.topology.update(address, topologyVersion === undefined && error === undefined ? UNKNOWN_SERVER_DESCRIPTION : Object.freeze({ ...UNKNOWN_SERVER_DESCRIPTION, topologyVersion, error: error?.message }));
  }

  /**
   * Whether the topology has no server and none can come: every host was removed (SDAM: "The state of topology
   * containing zero servers is terminal"), and no SRV polling may add one (a `mongodb+srv://` URI's client whose
   * polling goes on waits, as a rescan may list new hosts; one with a `replicaSet`, or whose topology was a replica
   * set, polls no more).
   */
  private emptiedForGood(): boolean {
    const polling = this.srv?.poller !== undefined && !this.srv.poller.stopped;
    return !polling && this.serverContext !== undefined && this.hostList.length === 0;
  }

  /**
   * Does what an update of the topology description asks (see `TopologyChange`): each server added opened (pool and
   * monitor, the monitor started on the next microtask), then each removed removed (see {@link removeHost}; SRV
   * polling's removed first), each invalidated checked at once (its pool is not cleared). A new server whose
   * connection options are refused (an InvalidOptionError from its factory, pool or monitor) is left out, with a
   * warning of the `client` component (once per host); none is opened once the client is closed or draining (a
   * subscriber of the events of this change may close or drain it). `hosts` follows the description's order.
   *
   * Source: server discovery and monitoring spec, "updateRSFromPrimary" ("begin monitoring the new server", "remove
   * the server and stop monitoring it"; a multi-threaded client "MUST request an immediate check" of an old primary,
   * and "MUST NOT clear its connection pool"), "remove".
   */
  private applyChange(change: TopologyChange, source: 'server discovery' | 'SRV polling' = 'server discovery'): void {
    // SRV polling removes first: a subscriber of a removed pool's events that closes the client leaves nothing opened.
    // Discovery opens first, as SDAM adds before it removes: a seed the set's configuration names otherwise (the
    // members it lists replacing it) never leaves a description of no server.
    const removeFirst = source === 'SRV polling';
    if (removeFirst) for (const address of change.removed) this.removeHost(address);
    const context = this.serverContext;
    const opened: string[] = [];
    for (const address of change.added) {
      // A subscriber of the events this gives (a removed pool's ConnectionPoolClosed, a new one's ConnectionPoolCreated)
      // may have closed or drained the client: nothing more is opened then.
      if (this.closed || this.draining || context === undefined) {
        this.topology.removeServer(address);
        continue;
      }
      try {
        const { settings } = context;
        const factories = this.connectionFactories([address], settings.connectionOptions, monitoringConnectionOptions(settings.connectionOptions), settings.loadBalanced, context.scheduler);
        const feed = this.openServer(address, factories.get(address)!, context);
        opened.push(address);
        this.announce([[address, feed]]);
      } catch (error) {
        this.topology.removeServer(address);
        // Once per host: a member's reply lists it again at each check.
        if (!this.refusedHosts.has(address)) this.clientWarning(`${source}: the new host ${address} is not used: ${error instanceof Error ? error.message : String(error)}`);
        this.refusedHosts.add(address);
      }
    }
    // The new servers first, as SDAM adds them before it removes, so the topology is never empty in passing; the
    // description with them, without those removed, is published after (by the caller, once the check's server's pool
    // has its heartbeat; here for SRV polling).
    this.serversOpened(opened);
    if (!removeFirst) for (const address of change.removed) this.removeHost(address);
    if (removeFirst) this.topologyChanged();
    for (const address of change.invalidated) this.monitors.get(address)?.requestCheck();
    if (change.removed.length === 0 && change.added.length === 0) return;
    this.hostList = Object.freeze([...this.topology.servers.keys()].filter((address) => this.pools.has(address)));
    // SDAM: a topology of no server stays so (only a server of it can name another); the client says why it is empty,
    // and the selections waiting fail now, as later ones will at once.
    if (this.hostList.length === 0 && !this.closed) {
      const terminal = this.emptiedForGood();
      this.clientWarning(`${source}: the last server of the topology was removed (${change.removed.join(', ')}): ${emptied(this.topology)}; ${terminal ? 'no operation can be served' : 'operations wait for SRV polling to list a host'}`);
      if (terminal) for (const [selection, readPreference] of [...this.selections]) selection.error(this.selectionTimedOut(readPreference, undefined));
    }
    queueMicrotask(() => {
      if (this.closed) return;
      for (const address of opened) this.monitors.get(address)?.start();
    });
  }

  /**
   * Makes the client's hosts `hosts` (a rescan's; see `SrvPoller`): the hosts no longer in it are removed, those new
   * to it opened, those in both left alone (see {@link applyChange}). Nothing once the client is closed or draining.
   */
  private applySrvHosts(hosts: readonly string[]): void {
    if (this.closed || this.draining || this.serverContext === undefined) return;
    this.applyChange(this.topology.replaceServers(hosts), 'SRV polling');
  }

  /**
   * Lists each of `feeds` in `hostFeeds` and announces it to the subscribers of `addedFeeds` (`pools$`, `events$`,
   * `log$`), each listed just before it is announced, so that a subscriber that comes meanwhile takes each feed once.
   * A subscriber that closes the client meanwhile (from `pools$`, or from a pool's ConnectionPoolCreated) leaves the
   * announcement whole: the subscribers after it, and those of the hosts after, are given every host that is listed,
   * as a subscriber that comes after the close is; then the feeds complete, each ending once its pool is done.
   */
  private announce(feeds: readonly (readonly [string, HostFeed])[]): void {
    this.announcing++;
    try {
      for (const [address, feed] of feeds) {
        this.hostFeeds.set(address, feed);
        this.addedFeeds.next(feed);
      }
    } finally {
      this.announcing--;
      if (this.closed && this.announcing === 0) {
        // Those listed after close() ran end once their pools are done, as close() ends the others (again: harmless).
        for (const [, feed] of feeds) whenDone(feed.pool, feed);
        this.addedFeeds.complete();
      }
    }
  }

  /**
   * Removes the host `address` (SRV polling, server discovery): its monitor is closed (a check in progress ends with
   * ServerHeartbeatFailed, MonitorClosedError) and "Stopped server monitoring" written, then its pool (CMAP "Closing a
   * Connection Pool": ConnectionPoolClosed; its checkouts still waiting, in the WaitQueue or for an establishment, fail
   * at once with PoolClosedError; a connection in use stays so until its holder checks it in, then is closed, so a
   * command in flight ends as the server answers it). Its feeds complete once its pool is done (closed, its last
   * connection checked in), so the subscribers of `events$` receive those last events; a later subscriber does not see
   * the host.
   */
  private removeHost(address: string): void {
    const monitor = this.monitors.get(address);
    const pool = this.pools.get(address);
    monitor?.close();
    // Now, even when its heartbeats$ completes later (a monitor closed from the delivery of its own check, which
    // removed its server): before its pool's close, and the description without it, are written.
    this.serverStopped(address);
    (this.monitors as Map<string, Monitor>).delete(address);
    (this.pools as Map<string, ConnectionPool<Connection>>).delete(address);
    this.heartbeatErrors.delete(address);
    const feed = this.hostFeeds.get(address);
    this.hostFeeds.delete(address);
    if (pool === undefined) return;
    pool.close();
    let done!: () => void;
    // Listed first: a pool with nothing in use is done at once, as it is subscribed, and leaves the list then.
    this.retiringPools.set(pool, new Promise<void>((resolve) => (done = resolve)));
    whenDone(pool, feed, () => {
      this.retiringPools.delete(pool);
      done();
    });
  }

  /**
   * Appends a wrapping library's driver info to the client metadata ({@link DriverInfoOptions}): its name, version
   * and platform are appended to `client.driver.name`, `client.driver.version` and `client.platform` after a `|`.
   * Only connections created from then on send it (those of every pool and monitor); an established connection keeps
   * the metadata it sent, and none is opened or closed for this. Driver info equal to one given before (at creation
   * or appended; the same name, version and platform, an empty string counting as unset) appends nothing, and so
   * does one whose fields are all unset.
   *
   * @example
   * ```ts
   * client.appendMetadata({ name: 'my-odm', version: '2.1.0' }); // driver.name "rxcmap|my-odm"
   * ```
   *
   * @throws {InvalidOptionError} (option `driverInfo`, or `driverInfo.<field>`) for a value that is not a
   *   `{ name, version?, platform? }` object of strings, a field containing `|`, or a name and version that would
   *   take the `client` document over 512 bytes; the metadata is then unchanged.
   *
   * Source: handshake spec, "Supporting Wrapping Libraries", "Metadata updates after MongoClient initialization",
   * "Appending metadata".
   */
  appendMetadata(driverInfo: DriverInfoOptions): void {
    this.metadata.append(driverInfo);
  }

  /**
   * The pool of the server selected for an operation of read preference `options.readPreference` (default `primary`,
   * as for a write; the client's default {@link readPreference} is not taken: pass it for a read that may run on a
   * secondary), as the server selection spec selects: of the servers whose pool is ready, those suitable in the
   * client's TopologyType (Single: its server, of the client's `replicaSet` when given, whatever the read preference;
   * LoadBalanced: its server; Sharded: every mongos; ReplicaSet: by the read preference's mode, the primary (of the
   * client's `replicaSet` when given, the one of the newest election when two say they are), the eligible secondaries
   * (of estimated staleness at most its maxStalenessSeconds, then matching the first of its tag sets that matches
   * any), or both (see `suitableServers`); Unknown: none), then those within
   * the latency window ({@link localThresholdMS} above the shortest average RTT), then of two of those taken at
   * random, the one with the lower operationCount (its pool's checkouts waiting or holding a connection, and the
   * selections that took it whose caller has not started its checkout yet). A server is no longer suitable (in
   * any topology but LoadBalanced) from a state change error of one of its commands (see {@link command}) until its
   * next check describes it. Waits up to serverSelectionTimeoutMS for one. While it waits, it requests an
   * immediate check (`Monitor.requestCheck()`) of every server's monitor (none is suitable then: a server whose pool
   * is not ready, or a member that may have been elected since its last check): at once, then again
   * every minHeartbeatFrequencyMS (500 ms) until it resolves (one such request for all the selections waiting, on the
   * beat begun when the first of them began to wait), so a server that is healthy again is found about
   * 500 ms after its last failed check rather than heartbeatFrequencyMS later. A monitor whose check is in progress
   * ignores the request, and none checks sooner than 500 ms after its previous check ended.
   *
   * `options.signal` (an AbortSignal, or an object of its shape: a caller that may give up, such as an HTTP request's
   * or a subscriber's) ends the wait when it aborts: already aborted, it rejects at once, before anything is done (no
   * check requested); aborted while it waits (for a suitable server, or a `mongodb+srv` seedlist), it rejects at once
   * and leaves the selection (its share of the immediate checks too); aborted once it resolved, nothing happens. A pool
   * selected at once is returned without listening to it. One listener of rxcmap's stays on the signal while anything
   * it governs waits, none once all settled. Default: none.
   *
   * `options.operationId` (an integer from 0 to 2^53 - 1, -0 taken as 0; default none): the ID of the operation the
   * pool is selected for, carried by the selection's log messages (`operationId`, operation `selectPool`); give the
   * same ID to the operation's commands (`Connection.command`'s `operationId`) to link them to it. Source: server
   * selection spec, "Logging" (`operationId`).
   *
   * @throws {ServerSelectionError} (rejection) when none became suitable in time; its cause is the newest error among
   *   the hosts whose last check failed (none when every host's last check succeeded, e.g. a pool paused by a clear).
   * @throws {IncompatibleServerError} (rejection) at once, without waiting, while the last check of one of the hosts
   *   failed with it (a server whose wire versions rxcmap does not speak; the newest such error), and as soon as a check
   *   fails so while it waits; a host's successful check, or its removal, ends that.
   * @throws {ClientClosedError} (rejection) after `close()`, or at once when `close()` is called while it waits.
   * @throws {SrvResolutionError} (rejection) for a `mongodb+srv://` URI whose seedlist discovery failed (see
   *   {@link connect}); it first waits for that discovery, within the same serverSelectionTimeoutMS (ServerSelectionError
   *   when it is still in progress then).
   * @throws {CommandCancelledError} (rejection) when `options.signal` aborts before a server was selected, or was
   *   aborted already (`cause`: the signal's reason; no `address` or `connectionId`, `commandName` '', `sent` false),
   *   as `command()` rejects when its signal aborts during its server selection; see `options.signal` above.
   * @throws {InvalidOptionError} (rejection) for options that are not an object (option `selectPool options`), a key
   *   other than `signal`, `readPreference` and `operationId` (named, with the closest option), an `operationId` that
   *   is not an integer from 0 to 2^53 - 1, a `signal` that is not an AbortSignal
   *   (option `signal`, by its shape, as `command()`), or a `readPreference` that `readPreferenceFrom` refuses; nothing
   *   is done. In a replica set, for a maxStalenessSeconds below 90 or below (heartbeatFrequencyMS + 10,000 ms) / 1000
   *   (option `readPreference.maxStalenessSeconds`), at once or as soon as the topology turns out to be one.
   *
   * The caller sends the read preference with its commands itself: {@link withReadPreference} gives each command as
   * `command()` would send it to the pool's server. A cursor's getMore and killCursors go to the
   * server that opened it: select once, and keep that pool for the cursor's life.
   * @throws what a `signal` throws (rejection) when its `addEventListener` (or its `aborted` getter) throws: that
   *   Error, or an Error saying the signal refused a listener, the value its `cause`, as `command()` says.
   *
   * Source: server selection spec, "Multi-threaded or asynchronous server selection" (a selection that finds no
   * suitable server requests an immediate check, then waits for a change, up to serverSelectionTimeoutMS); server
   * monitoring spec, "Requesting an immediate check", "Application operations are unblocked when a server is found",
   * "minHeartbeatFrequencyMS"; server selection spec, "Topology type: ..." (the rules for reads and writes), "Read
   * Preference", "Filtering suitable servers based on the latency window", "operationCount"; server discovery and
   * monitoring spec, "Using electionId and setVersion to detect stale primaries"; server selection spec, "Server
   * Selection Algorithm" ("If the topology wire version is
   * invalid, raise an error": IncompatibleServerError); `signal` an extension, as `command()`'s (the official Node.js
   * driver's `signal` option).
   */
  selectPool(options?: { signal?: AbortSignal | undefined; readPreference?: ReadPreferenceMode | ReadPreference | undefined; operationId?: number | undefined }): Promise<ConnectionPool<Connection>> {
    let signal: AbortSignal | undefined;
    let readPreference: ReadPreference;
    let operationId: number | undefined;
    // Before a server is selected: no address, no connection, no command.
    const unselected = (): CommandCancelledError => new CommandCancelledError(undefined, undefined, '', false, abortReason(signal!));
    try {
      requireMethodOptions('selectPool', options, SELECT_POOL_OPTION_NAMES);
      signal = requireAbortSignal('signal', optionValue(options, 'signal'));
      readPreference = readPreferenceOption(options) ?? PRIMARY;
      operationId = requireOperationId(optionValue(options, 'operationId'));
      if (abortedAlready(signal, 'server selection')) return Promise.reject(unselected());
    } catch (error) {
      return Promise.reject(error);
    }
    // The caller's checkout, when it makes one, is counted by the pool.
    return this.select(undefined, operationId, readPreference, this.serverSelectionTimeoutMS, undefined, false, cancelledBy(signal, unselected, 'server selection')).then((pool) => {
      this.handOver(pool);
      return pool;
    });
  }

  /**
   * {@link selectPool}, waiting at most `waitMS`: less than serverSelectionTimeoutMS when an operation's timeoutMS is.
   * Requests immediate checks while it waits, as {@link selectPool} says. `cancelled$` (a command's or selectPool's
   * signal, see `cancelledBy`) ends the wait with its error as soon as it errors; a pool ready at once is returned
   * without it. Logged (see {@link loggedSelect}) when `serverSelection` logs: for `command`, or for `selectPool()`
   * when undefined; its messages carry `operationId` when given (the caller's, see {@link command}).
   */
  private select(
    command: Document | undefined,
    operationId: number | undefined,
    readPreference: ReadPreference,
    waitMS: number,
    timeoutMS: number | undefined,
    endAtDrain: boolean,
    cancelled$?: Observable<never>,
  ): Promise<ConnectionPool<Connection>> {
    const logging = this.selectionLogging;
    if (logging === undefined || this.closed) return this.selectServer(readPreference, waitMS, timeoutMS, endAtDrain, cancelled$);
    // The command's name is read once a message is made: at info, a selection that finds a suitable server at once
    // makes none.
    return this.loggedSelect(logging, () => (command === undefined ? 'selectPool' : commandNameOf(command)), operationId, readPreference, waitMS, timeoutMS, endAtDrain, cancelled$);
  }

  /**
   * {@link selectServer}, logged: "Server selection started" first, "Waiting for suitable server to become available"
   * once if no server is suitable at the start (at `info`, the others at `debug`), then "Server selection succeeded" or
   * "Server selection failed" with the error it fails with (a cancellation and the client's close included; for a
   * command while the client drains, the PoolClosedError its checkout is refused with; see {@link selectionFailure}).
   * Each carries `operationId` when given. The end of the last selection logged after close() completes the messages'
   * part of `log$`.
   */
  private async loggedSelect(
    logging: SelectionLogging,
    operationName: () => string,
    operationId: number | undefined,
    readPreference: ReadPreference,
    waitMS: number,
    timeoutMS: number | undefined,
    endAtDrain: boolean,
    cancelled$: Observable<never> | undefined,
  ): Promise<ConnectionPool<Connection>> {
    const start = this.scheduler.now();
    let operation: string | undefined;
    const log = ({ message, ...rest }: Omit<ServerSelectionLogFields, 'selector' | 'operation' | 'operationId' | 'topologyDescription'>, level: 'debug' | 'info' = 'debug'): void => {
      if (level === 'info' || logging.debug) {
        const topologyDescription = truncate(this.describe(), logging.maxDocumentLength);
        operation ??= operationName();
        const identified = operationId === undefined ? {} : { operationId };
        // The common keys in the order of the spec's table: selector, operationId, operation, topologyDescription.
        logging.write(new ServerSelectionLogMessage(this.logTime(), { message, selector: describeReadPreference(readPreference), ...identified, operation, topologyDescription, ...rest }, level));
      }
    };
    this.selectionsLogging++;
    let waiting = false;
    const waits = (): void => {
      if (waiting) return;
      waiting = true;
      // A whole number of ms (the spec's Int), rounded down: the clock reads fractions of a ms (performance.now()).
      log({ message: 'Waiting for suitable server to become available', remainingTimeMS: Math.max(0, Math.floor(waitMS - (this.scheduler.now() - start))) }, 'info');
    };
    try {
      log({ message: 'Server selection started' });
      // The wait counts from the start (server selection spec: the start time is recorded as it is logged), the time
      // the message's destination and subscribers took included.
      const pool = await this.selectServer(readPreference, waitMS - (this.scheduler.now() - start), timeoutMS, endAtDrain, cancelled$, waits);
      if (endAtDrain && this.draining) {
        // Draining: the pool refuses the command's checkout, ready or not (see drain()). No server was selected for
        // it: its selection fails with the error the command fails with, rather than naming a server that refuses it.
        log({ message: 'Server selection failed', failure: logError(new PoolClosedError(pool.address), logging.maxDocumentLength) });
        return pool;
      }
      log({ message: 'Server selection succeeded', ...serverLogFields(parseAddress(pool.address)) });
      return pool;
    } catch (error) {
      log({ message: 'Server selection failed', failure: selectionFailure(error as Error, logging.maxDocumentLength) });
      throw error;
    } finally {
      if (--this.selectionsLogging === 0 && this.closed) this.selectionLog.complete();
    }
  }

  /**
   * The client's topology description (SDAM's, see `Topology`) as the log and ServerSelectionError write it (see
   * `topologyDescriptionText`): its TopologyType and each server's type, in the order the client came to monitor them;
   * once closed, Unknown with no server.
   */
  private describe(): string {
    return describedText(this.closed ? EMPTY_TOPOLOGY : this.topology);
  }

  /**
   * The topology description now (SDAM's; frozen, see {@link TopologyDescription}): the TopologyType, the replica set's
   * name and newest election, and the description of each server the client monitors (by address, in the order it came
   * to monitor them: its seeds, then each member as a reply first listed it); `hasReadableServer()` and
   * `hasWritableServer()` tell whether an operation could find a server now. Once closed: Unknown, with no server.
   * Its changes are published in {@link topologyEvents$}.
   *
   * Source: server discovery and monitoring spec, "TopologyDescription"; SDAM logging and monitoring spec, "Events API"
   * (`hasReadableServer`, `hasWritableServer`), "Closing Topology Description".
   */
  get topologyDescription(): TopologyDescription {
    return this.closed ? EMPTY_TOPOLOGY : this.topology.description(this.heartbeatFrequencyMS);
  }

  /**
   * The time of a message the client writes now: on the wall clock with the default scheduler (as the application's
   * other log lines are; the client's clock does not step with it), on the scheduler's clock with any other.
   */
  private logTime(): number {
    return wallClockTime(this.scheduler.now(), this.scheduler);
  }

  /**
   * Publishes TopologyDescriptionChanged, with its "Topology description changed" message (when `topology` logs at
   * debug), if the topology description is no longer equal to the last one published. Nothing once closed (close()
   * publishes the last change, see {@link topologyClosed}). Called after each heartbeat has reached the pool, after each
   * error that made a server Unknown, after servers were added or removed.
   */
  private topologyChanged(): void {
    if (this.closed) return;
    for (const address of [...this.unpublishedChanges.keys()]) this.describedNow(address);
    this.publishDescription(this.topology.description(this.heartbeatFrequencyMS));
  }

  /**
   * The description of the server at `address` now, once the change an establishment error made to it, if one is not
   * yet published (see {@link unpublishedChanges}), is: a change that follows (a check's outcome, another error) starts
   * from it, and comes after it.
   */
  private describedNow(address: string): ServerDescription | undefined {
    if (this.unpublishedChanges.has(address)) {
      const previous = this.unpublishedChanges.get(address);
      this.unpublishedChanges.delete(address);
      this.serverChanged(address, previous);
    }
    return this.topology.servers.get(address);
  }

  /**
   * Publishes ServerDescriptionChanged for the server at `address`, whose description was `previous` before a check's
   * outcome or an error was applied, if its description now is not equal to it (see `serverDescriptionEquals`).
   * Nothing for a server the change removed, nor once closed. The other servers the same update changed (one another
   * member names primary, a primary a newer one replaced) get none: the TopologyDescriptionChanged after shows them.
   *
   * Source: SDAM monitoring spec tests (`replica_set_with_no_primary`: a member's PossiblePrimary shown by the
   * topology's change alone).
   */
  private serverChanged(address: string, previous: ServerDescription | undefined): void {
    const newDescription = this.topology.servers.get(address);
    if (this.closed || previous === undefined || newDescription === undefined || serverDescriptionEquals(previous, newDescription)) return;
    this.publishTopologyEvent({ type: 'ServerDescriptionChanged', topologyId: this.topologyId, time: this.scheduler.now(), address, previousDescription: previous, newDescription });
  }

  /**
   * Publishes TopologyDescriptionChanged from the last description published to `next`, and writes its "Topology
   * description changed" message, unless they are equal (see `topologyDescriptionEquals`).
   */
  private publishDescription(next: TopologyDescription): void {
    const previous = this.publishedDescription;
    if (topologyDescriptionEquals(previous, next)) return;
    // Kept before it is published: a subscriber that changes the topology in turn publishes from this one.
    this.publishedDescription = next;
    const maxDocumentLength = this.topologyLogging?.maxDocumentLength;
    this.publishTopologyEvent(
      { type: 'TopologyDescriptionChanged', topologyId: this.topologyId, time: this.scheduler.now(), previousDescription: previous, newDescription: next },
      maxDocumentLength === undefined ? undefined : { message: 'Topology description changed', topologyId: this.topologyId, previousDescription: truncate(describedText(previous), maxDocumentLength), newDescription: truncate(describedText(next), maxDocumentLength) },
    );
  }

  /**
   * Publishes `event` in `topologyEvents$`, then writes its log message `message` (when `topology` logs at debug): the
   * event kept for every subscriber while the client is made, else given to those there. One published by a
   * subscriber's call (close(), drain()) while an event or its message is being given waits until every subscriber has
   * that one and its message is written: each subscriber sees the changes in the order they happened, not the ones its
   * predecessors' calls made first (a ServerClosed before the ServerOpening of its server), and the log has the
   * messages in the events' order ("Starting server monitoring" after "Stopped topology monitoring", otherwise).
   */
  private publishTopologyEvent(event: TopologyEvent, message?: Parameters<TopologyLogging['write']>[0]): void {
    // Frozen, as its descriptions are: one object for every subscriber, and those of connect() for every later one.
    Object.freeze(event);
    const write = (): void => {
      if (message !== undefined) this.topologyLogging?.write(message);
    };
    if (this.opening) {
      this.openingEvents.push(event);
      this.given(event);
      write();
    } else {
      this.giveTopologyEvents(() => {
        this.changedSinceOpening = true;
        this.given(event);
        this.topologyEvent.next(event);
        write();
      });
    }
  }

  /** Records `event` as given to the subscribers (see {@link givenDescription}, {@link givenServers}). */
  private given(event: TopologyEvent): void {
    if (event.type === 'TopologyDescriptionChanged') this.givenDescription = event.newDescription;
    else if (event.type === 'ServerOpening') this.givenServers.add(event.address);
    else if (event.type === 'ServerClosed') this.givenServers.delete(event.address);
    else if (event.type === 'TopologyClosed') this.topologyClosedGiven = true;
  }

  /**
   * What a subscriber of `topologyEvents$` that comes once the topology changed after `connect()` is given first: the
   * topology as the events given so far left it, as events: the TopologyOpening of `connect()`, a
   * TopologyDescriptionChanged from the Unknown description of no server to the last description given (none when
   * that one is equal to it: a topology its servers' checks emptied, or one close() emptied), and a ServerOpening per
   * server opened and not closed (each stamped now). Its life then pairs each ServerOpening with a ServerClosed, and
   * each TopologyDescriptionChanged starts from the one before.
   */
  private topologyAsEvents(): TopologyEvent[] {
    const time = this.scheduler.now();
    const { topologyId } = this;
    const freeze = (event: TopologyEvent): TopologyEvent => Object.freeze(event);
    const described = topologyDescriptionEquals(EMPTY_TOPOLOGY, this.givenDescription) ? [] : [freeze({ type: 'TopologyDescriptionChanged', topologyId, time, previousDescription: EMPTY_TOPOLOGY, newDescription: this.givenDescription })];
    return [this.openingEvents[0]!, ...described, ...[...this.givenServers].map((address) => freeze({ type: 'ServerOpening', topologyId, time, address }))];
  }

  /**
   * Runs `give` (it gives subscribers of `topologyEvents$` an event, or the end, or writes a `topology` log message)
   * after those due before it (see {@link publishTopologyEvent}).
   */
  private giveTopologyEvents(give: () => void): void {
    this.topologyEventsDue.push(give);
    if (this.givingTopologyEvent) return;
    this.givingTopologyEvent = true;
    try {
      for (let next = this.topologyEventsDue.shift(); next !== undefined; next = this.topologyEventsDue.shift()) next();
    } finally {
      this.givingTopologyEvent = false;
    }
  }

  /**
   * The servers `addresses` were just added (their pools made, their monitors not started): for each its ServerOpening
   * and "Starting server monitoring", its description Unknown (in load-balanced mode then `LoadBalancer`: its pool is
   * ready at once, and the change is published here). The seeds' first TopologyDescriptionChanged, which lists them
   * Unknown, comes before (see `open`); a server discovery or SRV polling adds is listed by the one after, which also
   * leaves out the servers the same change removes.
   *
   * Source: SDAM logging and monitoring spec, "ServerOpeningEvent", "Starting Server Monitoring" Log Message, "Initial
   * Server Description"; load balancer spec, "Monitoring" (the first change gives the server Unknown, the next one
   * LoadBalancer).
   */
  private serversOpened(addresses: readonly string[]): void {
    for (const address of addresses) {
      // A subscriber (or the log's destination) that closed the client from one of these: its topology has ended
      // (every server opened so far closed, TopologyClosed last), so no server opens after.
      if (this.closed) return;
      this.monitoredServers.add(address);
      this.publishTopologyEvent({ type: 'ServerOpening', topologyId: this.topologyId, time: this.scheduler.now(), address }, this.serverMonitoringMessage('Starting server monitoring', address));
      if (!this.monitors.has(address)) {
        const previous = this.describedNow(address);
        this.topology.update(address, LOAD_BALANCER);
        this.serverChanged(address, previous);
        this.topologyChanged();
      }
    }
  }

  /**
   * Publishes ServerClosed for the host `address`, and writes its "Stopped server monitoring", if its ServerOpening was
   * published.
   */
  private serverStopped(address: string): void {
    if (!this.monitoredServers.delete(address)) return;
    this.publishTopologyEvent({ type: 'ServerClosed', topologyId: this.topologyId, time: this.scheduler.now(), address }, this.serverMonitoringMessage('Stopped server monitoring', address));
  }

  /** The fields of "Starting server monitoring" or "Stopped server monitoring" for the host `address`. */
  private serverMonitoringMessage(message: ServerMonitoringLogFields['message'], address: string): ServerMonitoringLogFields {
    return { message, topologyId: this.topologyId, ...serverLogFields(parseAddress(address)) };
  }

  /** The `topology` part of `log$` (see {@link openedThenLive}). */
  private topologyLog$(): Observable<TopologyLogMessage> {
    return this.openedThenLive(this.openingLog, this.topologyLog);
  }

  /**
   * `topologyEvents$` (see {@link openedThenLive}). A subscriber that comes once close() began, before TopologyClosed
   * was given (from a ServerClosed of the close, or while a monitor finishes its last check), is given the topology as
   * it is first too: the ServerClosed events and the change to Unknown that follow then close what it saw open.
   */
  private topologyEvents(): Observable<TopologyEvent> {
    return defer(() => (this.topologyClosedGiven ? this.topologyEvent : this.openedThenLive(this.changedSinceOpening ? this.topologyAsEvents() : this.openingEvents, this.topologyEvent, true)));
  }

  /**
   * For a subscriber that comes before close(), `opened` (what was published while the client was made), then what
   * `live` publishes from then on; for one that comes after, only what `live` still publishes (a monitor's last
   * heartbeat, the end of the topology), unless `untilLiveEnds`: then `opened` first until `live` ends (the caller
   * decides when only the end is left). `live` is listened to before `opened` is given: a subscriber that changes the
   * client from one of them (closes it, adds a host) receives what that published after them, in order, to the end,
   * and its subscription completes with `live`.
   */
  private openedThenLive<T>(opened: readonly T[], live: Subject<T>, untilLiveEnds = false): Observable<T> {
    return new Observable<T>((subscriber) => {
      if (this.closed && !untilLiveEnds) return live.subscribe(subscriber);
      const held: T[] = [];
      let replaying = true;
      let ended = false;
      const subscription = live.subscribe({
        next: (value) => (replaying ? held.push(value) : subscriber.next(value)),
        complete: () => (replaying ? (ended = true) : subscriber.complete()),
      });
      for (const value of opened) subscriber.next(value);
      // What the subscriber's own calls published while it was given those (in order; each may publish more).
      for (let i = 0; i < held.length && !subscriber.closed; i++) subscriber.next(held[i]);
      replaying = false;
      if (ended) subscriber.complete();
      return subscription;
    });
  }

  /**
   * The end of the topology's log, once closed and every monitor published its last heartbeat (and its "Stopped server
   * monitoring"): "Stopped server monitoring" for each pool that has no monitor (load-balanced), the description
   * changed to Unknown with no server, then "Stopped topology monitoring".
   *
   * Source: SDAM logging and monitoring spec, "Closing Topology Description", "Stopped Topology Monitoring" Log Message;
   * load balancer spec, "Monitoring" (ServerClosed, then the change to Unknown, then TopologyClosed).
   */
  private topologyClosed(): void {
    // Those a monitor's end has not stopped: load-balanced mode's server, which has no monitor.
    for (const address of this.pools.keys()) this.serverStopped(address);
    this.publishDescription(EMPTY_TOPOLOGY);
    this.publishTopologyEvent({ type: 'TopologyClosed', topologyId: this.topologyId, time: this.scheduler.now() }, { message: 'Stopped topology monitoring', topologyId: this.topologyId });
    this.giveTopologyEvents(() => this.topologyEvent.complete());
  }

  /**
   * The server selection itself (see {@link select}); `waits` is called as it starts to wait (for the seedlist's
   * discovery, or for a suitable server). `waitMS` may be 0 or less (a log destination took the whole wait): it then
   * looks for a suitable server once, and fails as a wait that ran out does, without waiting or calling `waits`.
   */
  private async selectServer(readPreference: ReadPreference, waitMS: number, timeoutMS: number | undefined, endAtDrain: boolean, cancelled$?: Observable<never>, waits?: () => void): Promise<ConnectionPool<Connection>> {
    if (this.closed) throw new ClientClosedError(this.hostsForErrors());
    if (this.srv !== undefined && !this.srv.done) {
      // A mongodb+srv URI's hosts are not known yet: found first, within this selection's wait, which the waiting
      // message's destination and subscribers take their time from too.
      const start = this.scheduler.now();
      if (waitMS > 0) waits?.();
      await this.awaitDiscovery(readPreference, waitMS - (this.scheduler.now() - start), timeoutMS, cancelled$);
      waitMS -= this.scheduler.now() - start;
      // Closed as the found hosts opened (by a subscriber of their first events): no selection would end before its wait.
      if (this.closed) throw new ClientClosedError(this.hostsForErrors());
    }
    // Draining, every pool refuses a checkout, ready or not: a command's selection takes the first one, which says so
    // at once (PoolClosedError), where waiting for a ready one would take until a check readied it, the drain ended,
    // or serverSelectionTimeoutMS. A selection still waiting when the drain starts ends then, the same way.
    const first = (): ConnectionPool<Connection> => {
      const pool = this.pools.values().next().value;
      if (pool === undefined) throw this.selectionTimedOut(readPreference, timeoutMS);
      return this.counted(pool);
    };
    if (endAtDrain && this.draining) return first();
    // Server selection spec: an incompatible topology fails the selection at once, whatever else is ready. So does one
    // of no server, for good (see `emptied`).
    const incompatible = this.incompatibility();
    if (incompatible !== undefined) throw incompatible;
    if (this.emptiedForGood()) throw this.selectionTimedOut(readPreference, timeoutMS);
    const now = this.selectedPool(readPreference);
    if (now !== undefined) return this.counted(now);
    // Server selection spec: once the time is up (here: taken by the log messages' destination and subscribers), the
    // selection fails rather than waits.
    if (waitMS <= 0) throw this.selectionTimedOut(readPreference, timeoutMS);
    if (waits !== undefined) {
      // The waiting message's subscribers run here: one may have closed or drained the client, or readied a pool. The
      // selection looks again, so that it never waits where close() or drain() can no longer tell it.
      const before = this.scheduler.now();
      waits();
      return this.selectServer(readPreference, waitMS - (this.scheduler.now() - before), timeoutMS, endAtDrain, cancelled$);
    }
    this.requestChecks();
    const selected$ = this.selection$(readPreference).pipe(
      filter((signal) => signal !== 'drain' || endAtDrain),
      map((signal) => (signal === 'drain' ? first() : this.counted(signal))),
      timeout({ first: waitMS, with: () => throwError(() => this.selectionTimedOut(readPreference, timeoutMS)), scheduler: this.scheduler }),
    );
    // A command whose signal aborts leaves the selection at once (its wait, and its share of the immediate checks).
    return firstValueFrom(cancelled$ === undefined ? selected$ : race(selected$, cancelled$));
  }

  /**
   * The ServerSelectionError of a wait for a suitable server that ran out (`timeoutMS`: the operation's, when it ended
   * it).
   */
  private selectionTimedOut(readPreference: ReadPreference, timeoutMS: number | undefined): ServerSelectionError {
    const lastError = [...this.heartbeatErrors.values()].at(-1);
    return new ServerSelectionError(this.hostsForErrors(), this.serverSelectionTimeoutMS, lastError, timeoutMS, this.describe(), describeReadPreference(readPreference));
  }

  /**
   * Waits for the discovery of the seedlist (see {@link discover}) at most `waitMS` (0 or less: fails as at its end,
   * unless the client is closed), and no longer than `cancelled$` (a command's signal) lets it: the discovery goes on
   * for the other waits.
   *
   * @throws {SrvResolutionError} (rejection) when it failed; {@link ServerSelectionError} when it did not end within
   *   `waitMS` (cause: a SrvResolutionError saying it is still in progress); {@link ClientClosedError} at close();
   *   the error of `cancelled$` (CommandCancelledError) when it errors first.
   */
  private awaitDiscovery(readPreference: ReadPreference, waitMS: number, timeoutMS: number | undefined, cancelled$?: Observable<never>): Promise<void> {
    const hostname = this.srv!.hostname;
    const inProgress = (): ServerSelectionError =>
      new ServerSelectionError(this.hostsForErrors(), this.serverSelectionTimeoutMS, new SrvResolutionError(hostname, 'the DNS queries are still in progress'), timeoutMS, undefined, describeReadPreference(readPreference));
    if (waitMS <= 0) return Promise.reject(this.closed ? new ClientClosedError(this.hostsForErrors()) : inProgress());
    const discovered$ = from(this.discover()).pipe(timeout({ first: waitMS, with: () => throwError(inProgress), scheduler: this.scheduler }));
    return firstValueFrom(cancelled$ === undefined ? discovered$ : race(discovered$, cancelled$), { defaultValue: undefined });
  }

  /**
   * The newest IncompatibleServerError among the hosts whose last check failed with one (a server whose wire versions
   * rxcmap does not speak), if any: the topology is then incompatible (server discovery and monitoring spec,
   * "Checking wire protocol compatibility") until that host's check succeeds or the host is removed.
   */
  private incompatibility(): IncompatibleServerError | undefined {
    let newest: IncompatibleServerError | undefined;
    // The Map keeps the newest failure last (see openServer).
    for (const error of this.heartbeatErrors.values()) if (error instanceof IncompatibleServerError) newest = error;
    return newest;
  }

  /**
   * Requests an immediate check of every server (see {@link selectPool}): a selection waits only while none is
   * suitable, and a server whose pool is ready may be suitable after its next check (a secondary elected primary).
   */
  private requestChecks(): void {
    for (const monitor of this.monitors.values()) monitor.requestCheck();
  }

  /**
   * The pool of the server selected for one operation of read preference `readPreference` among those whose pool is
   * ready (see `selectServer`: suitable for that read preference, within the latency window, of two the one with the
   * lower operationCount), if any.
   * A server's operationCount is its pool's checkouts in progress (waiting, or holding a connection) and the
   * selections that took it whose caller has not started its checkout yet; it is read only of the two servers
   * compared.
   *
   * @throws {InvalidOptionError} in a replica set, for a maxStalenessSeconds it cannot meet (see `suitableServers`).
   *
   * Source: server selection spec, "Server Selection Algorithm" (multi-threaded or async), "operationCount" (kept "on
   * the pool itself", which counts the checkouts of `command()` and of a `selectPool()` caller alike).
   */
  private selectedPool(readPreference: ReadPreference): ConnectionPool<Connection> | undefined {
    const servers: SelectableServer<ConnectionPool<Connection>>[] = [];
    for (const [address, pool] of this.pools) {
      if (pool.state !== 'ready') continue;
      const monitor = this.monitors.get(address);
      const checked = monitor === undefined ? LOAD_BALANCER : (this.topology.servers.get(address) ?? UNKNOWN_SERVER_DESCRIPTION);
      servers.push(new PoolServer(pool, checked, monitor, this.selected));
    }
    return selectServer(this.topologyType, servers, {
      localThresholdMS: this.localThresholdMS,
      replicaSet: this.topology.setName,
      directConnection: this.directConnection,
      readPreference,
      heartbeatFrequencyMS: this.heartbeatFrequencyMS,
    })?.pool;
  }

  /** `pool`, selected for an operation: counted in its server's operationCount until {@link handOver}. */
  private counted(pool: ConnectionPool<Connection>): ConnectionPool<Connection> {
    this.selected.set(pool, (this.selected.get(pool) ?? 0) + 1);
    return pool;
  }

  /**
   * The caller of a selection that took `pool` starts its checkout now (or gives up): from here the pool counts it
   * (see {@link selectedPool}). Called once per pool {@link select} gave.
   */
  private handOver(pool: ConnectionPool<Connection>): void {
    const n = (this.selected.get(pool) ?? 0) - 1;
    if (n > 0) this.selected.set(pool, n);
    else this.selected.delete(pool);
  }

  /**
   * One waiting selection's news (see {@link selections}): the pool of a server selected for it (at once when one is
   * suitable as it subscribes),
   * `'drain'` when a drain starts, ClientClosedError when the client closes. While some selection waits, the pools'
   * events are followed, and immediate checks are requested every minHeartbeatFrequencyMS (500 ms) from when the first
   * began waiting: once for all of them, the monitors taking no more than one request per 500 ms anyway.
   */
  private selection$(readPreference: ReadPreference): Observable<ConnectionPool<Connection> | 'drain'> {
    // Subscribed only by select(), in the same step as its check that the client is open: close() then ends it.
    return new Observable<ConnectionPool<Connection> | 'drain'>((subscriber) => {
      const selections = this.selections;
      selections.set(subscriber, readPreference);
      // Added before anything below can end it: a selection that fails at once leaves the Map (and, the last, stops the
      // pools' events and the checks).
      subscriber.add(() => {
        if (!selections.delete(subscriber) || selections.size > 0) return;
        this.selectionEvents?.unsubscribe();
        this.selectionEvents = undefined;
      });
      if (this.selectionEvents === undefined) {
        // Set first: a selection sent on while the pools replay their first event leaves before the subscription exists.
        const events = (this.selectionEvents = new Subscription());
        // The pools of the hosts SRV polling adds meanwhile too.
        // Only a pool made ready can make a server suitable (a check, the other way, announces by itself): the events
        // of checkouts, which move operationCounts, wake no selection (server selection spec, "operationCount").
        events.add(this.allFeeds$.pipe(mergeMap((f) => f.poolEvents$)).subscribe((e) => e.type === 'ConnectionPoolReady' && this.announceReadyPool()));
        events.add(interval(MIN_HEARTBEAT_FREQUENCY_MS, this.scheduler).subscribe(() => this.requestChecks()));
      } else {
        let ready: ConnectionPool<Connection> | undefined;
        try {
          ready = this.selectedPool(readPreference);
        } catch (error) {
          // A maxStalenessSeconds too small for a replica set fails this selection.
          subscriber.error(error);
          return;
        }
        if (ready !== undefined) subscriber.next(ready);
      }
    });
  }

  /**
   * After a pool event or a check: to every waiting selection, the pool of a server selected for it by its read
   * preference, if any; a selection whose read preference the topology refuses (a maxStalenessSeconds too small for
   * the replica set it turned out to be) fails with that InvalidOptionError.
   */
  private announceReadyPool(): void {
    // Selections of one read preference share their fate: once none is suitable for one, the others wait too.
    let unsuitable: ReadPreference | undefined;
    for (const [selection, readPreference] of [...this.selections]) {
      if (readPreference === unsuitable) continue;
      let ready: ConnectionPool<Connection> | undefined;
      try {
        ready = this.selectedPool(readPreference);
      } catch (error) {
        selection.error(error);
        continue;
      }
      if (ready === undefined) unsuitable = readPreference;
      else selection.next(ready);
    }
  }

  /**
   * Runs `command` on database `db` over a connection of the server selected for it (see {@link selectPool}), checked
   * in afterwards. While no server is suitable it waits as {@link selectPool} does, requesting immediate checks of the
   * servers.
   *
   * `options.readPreference` (a mode, or `{ mode, tags?, maxStalenessSeconds? }`; default `primary`, whatever the
   * client's default {@link readPreference}, as the spec's generic command method) selects the server (see
   * {@link selectPool}; the command's name is not looked at: a write sent with mode `secondary` goes to a secondary,
   * which refuses it) and goes with the command as `$readPreference` (on a copy; given, it replaces the command's own):
   * to a replica set member in a ReplicaSet topology, to a mongos and to a load balancer, for every mode but `primary`;
   * to a replica set member reached directly (Single), always (`primary` sent as `primaryPreferred`, so a secondary
   * runs it); never to a standalone. A cursor's getMore must go to the server that opened the cursor, which a second
   * selection may not give: use {@link selectPool} and one pool for a cursor read from a secondary or a mongos.
   *
   * `options.timeoutMS` (ms, a number from 0 to 2147483647; 0 or absent: none) bounds the whole operation: server
   * selection waits at most the smaller of it and serverSelectionTimeoutMS (a ServerSelectionError then has
   * `timeoutMS` set), the checkout at most what is left after server selection (`checkOut({ timeoutMS })`), and the
   * reply wait at most what is left after the checkout; a reply that does not come in time fails the command with
   * MongoNetworkTimeoutError and closes that connection (its reply could still arrive).
   *
   * `options.signal` (an AbortSignal, or an object of its shape: a caller that may give up, such as an HTTP request's
   * or a subscriber's) cancels the whole operation when it aborts, and the command rejects at once, `cause` the
   * signal's reason: already aborted, with CommandCancelledError before anything is done; while it waits for a ready
   * server (or a `mongodb+srv` seedlist), with CommandCancelledError (no `address`, `sent` false), leaving the
   * selection; while it waits for its checkout, with the pool's CheckOutCancelledError (ConnectionCheckOutFailed reason
   * `cancelled`); once checked out, as `Connection.command`'s `signal` says (CommandCancelledError: nothing sent and
   * the connection checked in for reuse; or, once sent, CommandFailed published and the connection closed, reason
   * `error`, since its reply is never read). A cancelled command clears no pool and requests no check. One listener
   * stays on the signal while anything it governs waits, none once all settled. A signal whose `addEventListener`
   * throws, or whose `aborted` getter throws after the options were checked, fails the command with that Error (or an
   * Error saying the signal refused a listener, the value its `cause`), wherever it waits. Source: extension, the
   * official Node.js driver's `signal` option (which rejects with the signal's reason itself).
   *
   * `options.operationId` (an integer from 0 to 2^53 - 1, -0 taken as 0; default none) is the ID of the operation the
   * command is part of, as the caller numbers its operations: carried by the command's server selection log messages,
   * its CommandStarted/Succeeded/Failed events and its command log messages (`operationId`), so that the commands of
   * one operation (a bulk write's batches, a cursor's getMores) and their selections can be linked; nothing is sent.
   * Source: command logging and monitoring spec, "Events API" (`operationId`), "Bulk Writes"; server selection spec,
   * "Logging" (`operationId`).
   *
   * `options.moreToCome` (a boolean; default false) sends an unacknowledged write (writeConcern `{ w: 0 }`) with the
   * OP_MSG moreToCome flag: the server sends no reply, and the command resolves to `{ ok: 1 }` once written (its
   * CommandSucceeded and "Command succeeded" message carry that reply); whether the server applied it is never known.
   * A command whose writeConcern asks for an acknowledgement (one without w: 0, `{}` included, or with j or fsync
   * true) is refused by the connection before anything is sent (InvalidOptionError, option `moreToCome`; see
   * `Connection.command`), once a server was selected and a connection checked out; one without a writeConcern is sent
   * as it is (setting w: 0 is the caller's part). Source: OP_MSG spec, "moreToCome On Requests" ("Clients doing
   * unacknowledged writes MUST set the moreToCome flag"); command logging and monitoring spec,
   * "Unacknowledged/Acknowledged Writes".
   *
   * A network error that is not a timeout (the server reset or closed the connection, a malformed reply) means the
   * server's other connections are likely gone too: the command's pool is cleared (cause: that error) unless a clear
   * since the connection was made already did, and its monitor's check in progress is cancelled and its connection
   * closed (`Monitor.cancelCheck()`), the next check, on a new connection, coming 500 ms after the last and readying
   * the pool again once the server answers; the other pooled connections are then closed as stale rather than each
   * failing a command. In load-balanced mode (no monitor) only the connection's service is cleared (its connections
   * close as stale; the pool is not paused), unless a clear of that service since the command started already did.
   *
   * A state change error ("not writable primary": codes 10107, 13435, 10058; "node is recovering": 11600, 11602,
   * 13436, 189, 91; by its `errmsg` only when it has no code), whether the command failed with it (MongoServerError)
   * or its reply carries it as `writeConcernError` (the reply is still returned as is; `writeErrors` are not read),
   * means the server is up but the client's view of it is wrong. Unless it is stale (of a connection older than the
   * pool's last clear, or with a `topologyVersion` no newer than the one of the server's last check or last such
   * error), the server is treated as Unknown: its monitor is asked for an immediate check (`Monitor.requestCheck()`:
   * 500 ms after its last check; ignored while a check is under way, e.g. a streaming wait, which the server answers
   * itself on a topology change), and for a "node is shutting down" error (91, 11600) the pool is cleared (cause: that
   * error; the command's pool is paused until the check readies it again). (A server before 4.2, whose every state
   * change error cleared the pool, is never connected to: see `MIN_SUPPORTED_WIRE_VERSION`.) Other state change errors leave the pool, and its readiness, as they are. In
   * load-balanced mode nothing is checked and the pool's state does not change; only the errors that clear the pool
   * clear the connection's service, once per service generation.
   *
   * @throws (rejection) ClientClosedError (the client was closed while the command waited for a server or for its
   *   checkout, or was in flight; see {@link close}), ServerSelectionError, IncompatibleServerError (see
   *   {@link selectPool}), SrvResolutionError (a `mongodb+srv://` URI
   *   whose hosts could not be found; see {@link connect}), the checkout's errors (PoolClearedError, WaitQueueTimeoutError (also when
   *   `timeoutMS` ran out before the checkout; when `timeoutMS` is what ran out, its `timeoutMS` is the operation's, not
   *   what was left of it for the checkout), ...), the command's (MongoServerError, MongoNetworkError,
   *   MongoNetworkTimeoutError, ...), CommandCancelledError or CheckOutCancelledError (`signal` aborted, see above), or
   *   InvalidOptionError for options that are not an object, a key other than `timeoutMS`, `signal`,
   *   `readPreference`, `operationId` and `moreToCome` (named, with the closest option), a `timeoutMS` that is not a
   *   number of ms from 0 to 2147483647, an `operationId` that is not an integer from 0 to 2^53 - 1, a `moreToCome`
   *   that is not a boolean (these before anything is done), a command sent with `moreToCome` whose writeConcern asks
   *   for an acknowledgement (see above), a `signal` that is not an AbortSignal (by its shape), a `readPreference`
   *   that `readPreferenceFrom` refuses or (in a replica set) whose maxStalenessSeconds is too small (see {@link selectPool}), or (from the
   *   connection) a `db` that is not a non-empty string without NUL characters.
   *
   * Source: the client-side operations timeout spec (timeoutMS bounds server selection, checkout and reply wait);
   * server monitoring spec, "hello or legacy hello Cancellation", "Drivers cancel in-progress monitor checks" (a
   * non-timeout network error on an application connection: the pool is cleared, the monitor's check cancelled and
   * its connection closed, the server checked again soon; generations keep the clear to one);
   * server discovery and monitoring spec, "Error handling" ("Application errors": generation; "'not writable
   * primary' and 'node is recovering'": the codes, writeConcernError, the immediate check, the clear for "node is
   * shutting down"; "Error handling pseudocode": topologyVersion staleness); load balancer
   * spec, "Post-Handshake Errors" (no change to the load balancer's description; only the connections of the
   * errored connection's serviceId are cleared); extension: applied to this one method, and Unknown kept by this
   * client as a server no selection takes until its next check (a state change error that does not clear leaves its
   * pool ready); server selection spec, "Use of read preferences with commands" (the generic command method: primary
   * by default, the client's default ignored, an explicit read preference used whatever the command), "Passing read
   * preference to mongos and load balancers", "Topology type: Single", "Topology types: ReplicaSetWithPrimary or
   * ReplicaSetNoPrimary" (when `$readPreference` is sent).
   */
  async command(
    db: string,
    command: Document,
    options?: {
      timeoutMS?: number | undefined;
      signal?: AbortSignal | undefined;
      readPreference?: ReadPreferenceMode | ReadPreference | undefined;
      operationId?: number | undefined;
      moreToCome?: boolean | undefined;
    },
  ): Promise<Document> {
    requireMethodOptions('command', options, COMMAND_OPTION_NAMES);
    const given = optionValue(options, 'timeoutMS');
    const timeoutMS = given === undefined ? 0 : requireTimerDurationMS('timeoutMS', given, 'none');
    const signal = requireAbortSignal('signal', optionValue(options, 'signal'));
    const operationId = requireOperationId(optionValue(options, 'operationId'));
    const moreToCome = requireBoolean('moreToCome', optionValue(options, 'moreToCome')) === true;
    // Given to the connection as timeoutMS and signal are: undefined (or false) when absent.
    const sendOptions = { operationId, moreToCome };
    // Read once: whether it was given decides what happens to the command's own $readPreference.
    const explicitReadPreference = readPreferenceOption(options);
    const explicit = explicitReadPreference !== undefined;
    const readPreference = explicitReadPreference ?? PRIMARY;
    // Before a server is selected: no address, no connection, nothing sent.
    const unselected = (): CommandCancelledError => new CommandCancelledError(undefined, undefined, commandNameOf(command), false, abortReason(signal!));
    if (abortedAlready(signal, 'command')) throw unselected();
    const start = this.scheduler.now();
    // Server selection ends at timeoutMS when that comes first (0: none).
    const bound = timeoutMS > 0 && timeoutMS < this.serverSelectionTimeoutMS ? timeoutMS : undefined;
    // Draining, this is a pool that refuses it at once (see select).
    const pool = await this.select(command, operationId, readPreference, bound ?? this.serverSelectionTimeoutMS, bound, true, cancelledBy(signal, unselected, 'command'));
    // Its checkout starts below, in this same step (or the command fails first): the pool counts it from there.
    this.handOver(pool);
    // As the server was described when it was selected.
    const sent = this.commandSent(pool.address, command, readPreference, explicit);
    // As the checkout starts: one a drain refuses fails with PoolClosedError, as drain() says.
    const draining = this.draining;
    const commandError = (error: unknown): never => {
      // close() ended the checkout while it waited (in the WaitQueue, or for its connection's establishment): the
      // command fails as every wait close() ends does, not with the pool's own error.
      if (error instanceof PoolClosedError && !draining && this.closedByClient.has(pool)) throw new ClientClosedError(this.hostsForErrors());
      // The checkout and the connection look at the signal's shape again: one that fails there passed it above, so it
      // broke since (its `aborted` getter threw). Not an invalid option of the caller's: the command's signal failed.
      if (error instanceof InvalidOptionError && error.option === 'signal') throw signalRefused(error.cause, 'command');
      throw error;
    };
    // The checkout takes the signal (CheckOutCancelledError when it aborts meanwhile), and so does the command.
    const checkOut = signal === undefined ? undefined : { signal };
    // Awaited in a try: what withConnection throws (its own look at the options) fails the command as what it rejects
    // with does.
    if (timeoutMS === 0) {
      try {
        return await pool.withConnection((connection) => this.run(pool, connection, db, sent, undefined, signal, sendOptions), checkOut);
      } catch (error) {
        return commandError(error);
      }
    }
    const left = (): number => timeoutMS - (this.scheduler.now() - start);
    // Read once: the clock moves between two reads, and a checkout given 0 would have no deadline, a negative one throw.
    const remaining = left();
    if (remaining <= 0) throw new WaitQueueTimeoutError(pool.address, timeoutMS, undefined, { timeoutMS });
    try {
      return await pool.withConnection((connection) => this.run(pool, connection, db, sent, Math.max(1, left()), signal, sendOptions), { timeoutMS: remaining, ...checkOut });
    } catch (error) {
      // The checkout had what was left of timeoutMS: its timeout is the operation's, and says so.
      if (error instanceof WaitQueueTimeoutError && error.timeoutMS !== undefined) {
        throw new WaitQueueTimeoutError(pool.address, timeoutMS, error.pool, { timeoutMS, maxPoolSize: error.maxPoolSize });
      }
      return commandError(error);
    }
  }

  /**
   * Runs the command on `connection`; a non-timeout network error clears `pool`, or in load-balanced mode the
   * connection's service, and a state change error (of a failed command, or a reply's writeConcernError) is handled
   * by {@link onStateChangeError} (see {@link command}). The reply or error is the connection's, unchanged.
   */
  private async run(
    pool: ConnectionPool<Connection>,
    connection: Connection,
    db: string,
    command: Document,
    timeoutMS: number | undefined,
    signal: AbortSignal | undefined,
    sendOptions: { readonly operationId: number | undefined; readonly moreToCome: boolean },
  ): Promise<Document> {
    // Closed between the checkout and this call: close() did not see this connection, and nothing would end a command
    // sent on it now (a closed pool closes an in-use connection only once it is checked in).
    if (this.closed) throw new ClientClosedError(this.hostsForErrors());
    const monitor = this.monitors.get(pool.address);
    // Load-balanced mode (no monitor): the connection's service and that service's generation as the command starts
    // (a connection there counts in its service's generation, not in the pool's, which stays 0).
    const service = monitor === undefined ? connection.serviceId : undefined;
    const serviceGeneration = service === undefined ? undefined : pool.serviceGeneration(service);
    let reply: Document;
    this.commandConnections.add(connection);
    try {
      // timeoutMS undefined: the connection's socketTimeoutMS. A cancelled command (CommandCancelledError) clears
      // nothing: the server did nothing wrong.
      reply = await connection.command(db, command, { timeoutMS, signal, ...sendOptions });
    } catch (error) {
      if (error instanceof MongoServerError) this.onStateChangeError(pool, connection, error.response, error, serviceGeneration);
      else if (error instanceof MongoNetworkError && !(error instanceof MongoNetworkTimeoutError)) {
        // A connection of an older generation was made stale by a clear already.
        if (monitor !== undefined) {
          // A pool the client no longer has (its server removed, perhaps added again since) changes nothing of the
          // topology.
          if (connection.generation === pool.generation && this.pools.get(pool.address) === pool) {
            // SDAM, "Network error when reading or writing": the server Unknown, then its pool cleared.
            const previous = this.describedNow(pool.address);
            this.serverUnknown(pool.address, undefined, error);
            this.serverChanged(pool.address, previous);
            pool.clear({ cause: error });
            this.topologyChanged();
            // Its connection is likely gone too: checked again on a new one, 500 ms after the last check; that readies the pool.
            this.checksCancelled.add(error);
            monitor.cancelCheck(error);
          }
        } else if (service !== undefined && pool.serviceGeneration(service) === serviceGeneration) {
          pool.clear({ serviceId: service, cause: error }); // not paused: nothing would ready it again
        }
      }
      throw error;
    } finally {
      this.commandConnections.delete(connection);
    }
    if (reply.writeConcernError !== undefined) this.onStateChangeError(pool, connection, reply, undefined, serviceGeneration);
    return reply;
  }

  /**
   * What a state change error in `reply` (a failed command's, or a successful one's writeConcernError) does to the
   * server of `pool` (see {@link command}); nothing for any other reply, nor for a stale error: of a connection older
   * than the pool's (or, load-balanced, its service's) last clear, or carrying a topologyVersion no newer than the
   * one the client knows. `cause`: the error the command failed with (else one is made of the writeConcernError).
   */
  private onStateChangeError(pool: ConnectionPool<Connection>, connection: Connection, reply: Document, cause: Error | undefined, serviceGeneration: number | undefined): void {
    const change = stateChangeError(reply);
    // A pool the client no longer has (its server removed, perhaps added again since) changes nothing of the topology.
    if (change === undefined || this.pools.get(pool.address) !== pool) return;
    const clears = change.shuttingDown;
    const error = (): Error => cause ?? new MongoServerError(change.error);
    const monitor = this.monitors.get(pool.address);
    if (monitor === undefined) {
      // Load-balanced: nothing of the load balancer changes; only the errored connection's service may be cleared.
      const service = connection.serviceId;
      if (clears && service !== undefined && pool.serviceGeneration(service) === serviceGeneration) pool.clear({ serviceId: service, cause: error() });
      return;
    }
    if (connection.generation !== pool.generation) return;
    if (isStaleTopologyVersion(this.topology.servers.get(pool.address)?.topologyVersion, change.topologyVersion)) return;
    // The server counts as Unknown: its description takes the error's topologyVersion (none if it has none), and it
    // is no longer suitable (a Single topology's server included) until a check describes it again.
    const previous = this.describedNow(pool.address);
    this.serverUnknown(pool.address, change.topologyVersion, error());
    this.serverChanged(pool.address, previous);
    if (clears) pool.clear({ cause: error() });
    // Its description changed (Unknown), as the log says.
    this.topologyChanged();
    monitor.requestCheck();
  }

  /**
   * `command` as it must be sent to the server of `pool` (one this client's {@link selectPool} gave) for an operation of
   * read preference `readPreference` (a mode or `{ mode, tags?, maxStalenessSeconds? }`; default `primary`), for a
   * driver that selects with {@link selectPool} and sends its commands itself: what {@link command} sends, by the
   * server's type as the client knows it now (call it right after the selection): `$readPreference` for every mode but
   * `primary` to a replica set member, a mongos or a load balancer; `{ mode: 'primaryPreferred' }` for `primary` to a
   * replica set member reached directly; nothing to a standalone. The caller's object is never changed: a copy when a
   * field is added or removed, else `command` itself. Given, the read preference replaces the command's own
   * `$readPreference`.
   *
   * @example
   * ```ts
   * const readPreference = client.readPreference; // the URI's, for a driver's read helper
   * const pool = await client.selectPool({ readPreference });
   * const reply = await pool.withConnection((connection) => connection.command('app', client.withReadPreference(pool, { find: 'orders', filter: {} }, readPreference)));
   * ```
   *
   * @throws {InvalidOptionError} for a `readPreference` that `readPreferenceFrom` refuses (option `readPreference`), or
   *   a `pool` that is not one of this client's open pools (option `pool`).
   *
   * Source: server selection spec, "Passing read preference to mongos and load balancers", "Topology type: Single",
   * "Topology types: ReplicaSetWithPrimary or ReplicaSetNoPrimary" (when `$readPreference` is sent); extension: the rule
   * offered apart from {@link command}, for a caller of {@link selectPool}.
   */
  withReadPreference(pool: ConnectionPool<Connection>, command: Document, readPreference?: ReadPreferenceMode | ReadPreference): Document {
    if (this.pools.get(pool?.address) !== pool) {
      throw new InvalidOptionError('pool', pool?.address, "a pool of this client's (see selectPool() and client.pools)");
    }
    const checked = readPreference === undefined ? undefined : readPreferenceFrom('readPreference', readPreference);
    return this.commandSent(pool.address, command, checked ?? PRIMARY, checked !== undefined);
  }

  /**
   * `command` as it is sent to the server at `address` (by its last check's type) for an operation of read preference
   * `readPreference`, `explicit` when the caller gave it: with `$readPreference` (a copy of the command; the read
   * preference's document, see `readPreferenceDocument`) for every mode but `primary` to a mongos, a load balancer or
   * a replica set member; in a Single topology to a replica set member, `primary` sent as `{ mode: 'primaryPreferred'
   * }` so a member reached directly, a secondary included, runs it; nothing to a standalone, or for `primary` in
   * another topology. Explicit, the read preference replaces the command's own `$readPreference` (removed for a
   * `primary` that sends none); else a command's own `$readPreference` is sent as it is.
   *
   * Source: server selection spec, "Passing read preference to mongos and load balancers" (OP_MSG: "For mode
   * 'primary', drivers MUST NOT set $readPreference", for all other modes they MUST), "Topology type: Single" ("Type
   * Standalone: clients MUST NOT send the read preference"; for other types "If no read preference is configured by
   * the application, or if the application read preference is Primary, then $readPreference MUST be set to {
   * "mode": "primaryPreferred" }"), "Topology types: ReplicaSetWithPrimary or ReplicaSetNoPrimary" (every mode but
   * primary sends it), "Topology type: LoadBalanced"; load balancer spec, "Server Selection".
   */
  private commandSent(address: string, command: Document, readPreference: ReadPreference, explicit: boolean): Document {
    const own = Object.prototype.hasOwnProperty.call(command, '$readPreference');
    // Unknown for a load balancer (it has no check).
    const type = this.topology.servers.get(address)?.type;
    // A replica set member (RSPrimary, RSSecondary, RSArbiter, RSOther, RSGhost) reached directly.
    const directMember = this.topologyType === 'Single' && type?.startsWith('RS') === true;
    let document: Document | undefined;
    if (type === 'Standalone') document = undefined;
    else if (readPreference.mode !== 'primary') document = readPreferenceDocument(readPreference);
    else if (directMember) document = { mode: 'primaryPreferred' };
    if (!explicit && own) return command;
    if (document !== undefined) return withField(command, '$readPreference', document);
    if (!own) return command;
    const { $readPreference: _, ...rest } = command;
    return rest;
  }

  /**
   * Drains every pool (see `ConnectionPoolCore.drain`): commands whose checkout is waiting or in use finish, new ones
   * fail at once with PoolClosedError (a server ready or not), and so do those still waiting for a server; the pools of
   * hosts SRV polling removed, closed already, have their connections in use checked in too; then closes
   * the client as {@link close} does (commands still waiting for a `mongodb+srv` seedlist then fail with
   * ClientClosedError, as at {@link close}: there is no pool to drain yet). At `timeoutMS` (ms, a number >= 0; 0 or absent: no deadline) a pool still busy
   * interrupts its in-use connections and closes (a removed host's commands still in flight then fail with
   * ClientClosedError). Resolves once the client is closed.
   *
   * @example
   * ```ts
   * process.once('SIGTERM', () => void client.drain({ timeoutMS: 10_000 }));
   * ```
   *
   * @throws {InvalidOptionError} (rejection) for options that are not an object, a key other than `timeoutMS` (named,
   *   with the closest option), or a `timeoutMS` that is not a number >= 0.
   *
   * Source: extension (see `ConnectionPoolCore.drain`).
   */
  async drain(options?: { timeoutMS?: number | undefined }): Promise<void> {
    requireMethodOptions('drain', options, TIMEOUT_OPTION_NAMES);
    const given = optionValue(options, 'timeoutMS');
    const timeoutMS = given === undefined ? 0 : requireDurationMS('timeoutMS', given, 'a number of ms >= 0 (0 means no deadline)');
    if (this.closed) return;
    this.draining = true;
    this.srv?.poller?.stop();
    const drained = [...this.pools.values()].map((pool) => pool.drain({ timeoutMS }));
    // The pools of hosts SRV polling removed, closed already: their connections in use are checked in before close()
    // ends what is still in flight, as a drain's are, until timeoutMS.
    let deadline: Subscription | undefined;
    const removedDone = new Promise<void>((resolve) => {
      if (timeoutMS > 0 && this.retiringPools.size > 0) deadline = this.scheduler.schedule(() => resolve(), timeoutMS);
      void Promise.all(this.retiringPools.values()).then(() => resolve());
    });
    // The pools refuse checkouts now: the commands still selecting a server go to their refusal at once.
    for (const selection of [...this.selections.keys()]) selection.next('drain');
    await Promise.all([...drained, removedDone]);
    deadline?.unsubscribe();
    await this.close();
  }

  /**
   * Closes every monitor and pool, and fails every server selection still waiting (`command()` included) with
   * ClientClosedError at once, and so every `command()` waiting for its checkout (in the WaitQueue, or for its
   * connection's establishment) that a drain had not refused. A `command()` whose command is in flight fails with
   * ClientClosedError too, its connection closed (the pool's ConnectionClosed reason `poolClosed`): without a
   * socketTimeoutMS nothing else would end a command to a server gone silent. Connections checked out from `pools`
   * by other code close when checked in. A monitor's check in progress (always one while streaming) ends with
   * ServerHeartbeatFailed (error: {@link MonitorClosedError}), published in `events$` during this call, before the
   * pools close (called from a subscriber of a heartbeat event: once that event has reached every subscriber); it
   * clears no pool. No heartbeat event comes after that one. Resolves once the log destination the client opened is
   * flushed. Idempotent. To let commands finish first, use {@link drain}.
   *
   * Source: CMAP spec, "Closing a Connection Pool" (each pool); server monitoring spec (its monitors); extension: the
   * waiting selections failed at once, and the connections of commands in flight closed (as the official Node.js
   * driver's `MongoClient.close()` closes its checked-out connections, since 6.17).
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // A seedlist discovery in progress: its DNS queries cancelled, what waits for it failed with ClientClosedError.
    this.srv?.abort.abort(new ClientClosedError(this.hostsForErrors()));
    // SRV polling: the next rescan cancelled, a query in progress aborted.
    this.srv?.poller?.stop();
    // Called from a subscriber of a host's announcement: the feeds are completed once every subscriber was given each
    // host of that announcement (see announce), as a later subscriber is.
    if (this.announcing === 0) this.addedFeeds.complete();
    if (this.selections.size > 0) {
      const closed = new ClientClosedError(this.hostsForErrors());
      for (const selection of [...this.selections.keys()]) selection.error(closed);
    }
    for (const monitor of this.monitors.values()) monitor.close();
    for (const pool of this.pools.values()) {
      if (pool.state !== 'closed') this.closedByClient.add(pool);
      pool.close();
      // Its feeds end once it is done (its last connection closed, after that batch's events): a subscription nobody
      // ends (an APM agent's) then no longer keeps the closed client reachable.
      const feed = this.hostFeeds.get(pool.address);
      if (feed !== undefined) whenDone(pool, feed);
    }
    if (this.commandConnections.size > 0) {
      const closed = new ClientClosedError(this.hostsForErrors());
      for (const connection of [...this.commandConnections]) connection.destroy(closed);
    }
    this.endLog();
    await this.sink?.close?.();
  }

  /**
   * Ends the client's own parts of `log$` once closed (the pools' parts end with the pools): the `client` messages
   * (nothing adds any now: SRV polling stopped, the discovery cancelled) at once, the heartbeat messages once every
   * monitor published its last heartbeat (the check close() ended; later when close() was called from a subscriber of
   * a heartbeat), the server selection messages once every selection logged has logged its end. So `log$` completes
   * once the closed client is done, as `events$` does.
   */
  private endLog(): void {
    this.clientWarningLog.complete();
    this.lateClientLog.complete();
    // A selection logged and still going on (one that waits for the seedlist's discovery, which ends a moment later)
    // completes it as it logs its end.
    if (this.selectionsLogging === 0) this.selectionLog.complete();
    const lastHeartbeats = [...this.monitors.values()].map((monitor) => monitor.heartbeats$.pipe(ignoreElements()));
    merge(...lastHeartbeats).subscribe({
      complete: () => {
        this.topologyClosed();
        // After the messages of topologyClosed, which wait for the event being given, if any (see publishTopologyEvent).
        this.giveTopologyEvents(() => this.topologyLog.complete());
      },
    });
  }

  /**
   * {@link close}, for an `await using` declaration (`await using client = connect(uri)`): the client closes when the
   * block that declared it is left, however it is left, and the block's exit waits for it. Resolves as `close()` does
   * (once the log destination the client opened is flushed). Idempotent.
   *
   * Source: extension (TC39 explicit resource management, `Symbol.asyncDispose`; the official Node.js driver's
   * `MongoClient[Symbol.asyncDispose]()` is its `close()` the same way).
   */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

/**
 * Creates a {@link Client} for `uri` and starts monitoring its hosts. Options given here override the URI's.
 *
 * @example
 * ```ts
 * const client = connect('mongodb://localhost:27017/?maxPoolSize=20&appName=app', { waitQueueTimeoutMS: 2000 });
 * client.events$.subscribe((e) => console.log(e.address, e.type));
 * await client.command('admin', { ping: 1 });
 * await client.close();
 * ```
 *
 * A `mongodb+srv://{host}` URI (the one Atlas shows) is accepted: the client is returned at once, and its hosts are
 * found first: the SRV records of `_{srvServiceName}._tcp.{host}` (default service `mongodb`) give them (at most
 * srvMaxHosts, picked at random; each must be in the parent domain of `{host}`), and the TXT record of `{host}` (at most
 * one) default options: only authSource, replicaSet and loadBalanced, which the URI's options and these options
 * override (MONGODB-X509 credentials keep `$external` whatever the TXT record's authSource). TLS is on unless
 * tls=false (or ssl=false) is given in the URI or here. The queries use Node's `dns/promises` Resolver on the servers
 * of `dns.getServers()`, and are given up after connectTimeoutMS (default 10000 ms, as for connections; 0: no deadline
 * of its own, the resolver's own retries then end after about 25 s).
 * No pool or monitor opens before both answered; `command()` and `selectPool()` wait for them within their own wait
 * (serverSelectionTimeoutMS, or a shorter timeoutMS: then ServerSelectionError, cause a SrvResolutionError saying the
 * queries are in progress), and fail with {@link SrvResolutionError} when the discovery failed (the next one tries
 * again), with ClientClosedError when `close()` cancelled it. The SRV records are then queried again every 60 s while
 * the deployment may be sharded, and the hosts follow them (see {@link Client}, "SRV polling").
 *
 * Source: CMAP spec, "Connection Pool Options" (client-level options); server monitoring spec; URI options spec;
 * initial DNS seedlist discovery spec ("Seedlist Discovery", "Default Connection String Options", "URI Validation":
 * the SRV lookup asynchronous, "a MongoClient being instantiated but erroring later during operation execution"); the
 * deadline: extension (the spec sets none).
 *
 * @throws {InvalidOptionError} for a URI that is not a string (option `uri`), an invalid URI, an unknown option or invalid option value given here, or an
 *   impossible combination (see {@link Client} and `parseConnectionString`). Unknown URI options and invalid URI values
 *   are not errors (but for an empty authSource, and a `serverApi` key: a Stable API version is declared in code only): they are `warnings`, each logged as a `warn` message of the `client`
 *   component.
 */
export function connect(uri: string, options: ClientOptions = {}): Client {
  return new Client(uri, options);
}

/**
 * Once the closed `pool` is done (`state$` completes: its last connection closed, after that batch's events), runs
 * `then` and ends `feed`, the feeds of its host: their subscribers' streams complete.
 */
function whenDone(pool: ConnectionPool<Connection>, feed: HostFeed | undefined, then?: () => void): void {
  pool.state$.pipe(ignoreElements(), endWith(undefined)).subscribe(() => {
    then?.();
    feed?.retired.next();
    feed?.retired.complete();
  });
}

/**
 * `takeUntil(retired)` (see `HostFeed.retired`), and for a subscriber that comes once `retired` fired: what the source
 * gives it as it subscribes (a closed pool's ConnectionPoolCreated), then the completion, rather than a subscription
 * that waits for a retirement that came already, keeping the closed client reachable.
 */
function untilRetired(retired: Subject<void>): <T>(source: Observable<T>) => Observable<T> {
  let over = false;
  retired.subscribe(() => (over = true));
  return <T>(source: Observable<T>) =>
    new Observable<T>((subscriber) => {
      const subscription = source.pipe(takeUntil(retired)).subscribe(subscriber);
      if (over) subscriber.complete();
      return subscription;
    });
}

/**
 * Readies `pool` (load-balanced mode: before the client is returned, so before anyone can subscribe to it) and returns
 * its feeds, in which every subscriber receives its ConnectionPoolReady, and the message of it, right after the
 * ConnectionPoolCreated (and its message) the pool gives each subscriber first: otherwise no subscriber of the client
 * would ever see them.
 */
function readyAtOnce(pool: ConnectionPool<Connection>): { events$: Observable<ConnectionPoolEvent>; log$: Observable<LogMessage> } {
  let ready: ConnectionPoolEvent | undefined;
  let readyMessage: LogMessage | undefined;
  const events = pool.events$.subscribe((e) => {
    if (e.type === 'ConnectionPoolReady') ready = e;
  });
  const log = pool.log$.subscribe((m) => {
    if (m.fields.message === 'Connection pool ready') readyMessage = m;
  });
  pool.ready();
  events.unsubscribe();
  log.unsubscribe();
  // Not once the pool is closed: a subscriber then learns it was created, not that it is ready.
  const open = (): boolean => pool.state !== 'closed';
  return { events$: afterFirst(pool.events$, ready, open), log$: afterFirst(pool.log$, readyMessage, open) };
}

/**
 * `source`, with `extra` (when defined) sent to each subscriber right after the first value `source` gives it, if
 * `when()` holds as it subscribes: before any value `source` gives while that first one is delivered (the events of a
 * checkout the subscriber starts from its first callback come after the ConnectionPoolReady that preceded them).
 */
function afterFirst<T>(source: Observable<T>, extra: T | undefined, when: () => boolean): Observable<T> {
  if (extra === undefined) return source;
  return new Observable<T>((subscriber) => {
    let owed = when();
    let first = true;
    const payExtra = (): void => {
      if (!owed) return;
      owed = false;
      subscriber.next(extra);
    };
    return source.subscribe({
      next: (value) => {
        if (!first) {
          payExtra(); // a value given while the first one is delivered
          return subscriber.next(value);
        }
        first = false;
        subscriber.next(value);
        payExtra();
      },
      error: (error: unknown) => subscriber.error(error),
      complete: () => subscriber.complete(),
    });
  });
}

function pick<T extends object, K extends keyof T>(o: T, keys: readonly K[]): Pick<T, K> {
  const out = {} as Pick<T, K>;
  for (const k of keys) if (k in o) out[k] = o[k];
  return out;
}

