/**
 * Monitor: checks one server with `hello` on a dedicated connection (never one from the pool, never authenticated),
 * streaming the server's replies when it supports awaitable hello (MongoDB 4.4+) and polling every
 * heartbeatFrequencyMS otherwise, and publishes heartbeat events. A pool follows those events as an input of its state
 * stream (`heartbeats$.pipe(heartbeatActions()).subscribe(pool.input)`): a successful check marks it ready, a failed
 * one clears it.
 *
 * Source: server monitoring spec ("Servers are monitored with dedicated sockets", "Servers are checked
 * periodically", "Requesting an immediate check", "Polling Protocol", "Error handling", "minHeartbeatFrequencyMS",
 * "heartbeatFrequencyMS", "Socket timeout for monitoring is connectTimeoutMS", "hello or legacy hello Cancellation",
 * "serverMonitoringMode", "Streaming Protocol").
 */
import type { Document } from 'bson';
import { Observable, Subject, type SchedulerLike, type Subscription } from 'rxjs';
import { parseAddress } from '../address';
import { connectionFactoryWithMetadata, malformedHello, type ConnectionOptions } from '../connection/connect';
import { checkConnectionOptions, DEFAULT_CONNECT_TIMEOUT_MS } from '../connection/connection-options';
import type { Connection } from '../connection/connection';
import { clientEnv, helloCommandName } from '../connection/handshake';
import { serverConnectionIdOf } from '../connection/server-connection-id';
import { InvalidOptionError, inWords, isError, MongoNetworkError, MonitorClosedError, PoolCallbackError } from '../errors';
import type { ConnectionFactory } from '../pool/contract';
import { destroyQuietly, isErrored } from '../pool/connection-checks';
import { establish } from './establish';
import { handshakeSample, RoundTripTimes, RttMonitor } from './rtt';
import { optionValue, optionValues, rejectUnknownOptions, requireFunction, requireOptionsObject, requireScheduler, type ListsEveryOption } from '../options';
import { MAX_TIMER_DELAY_MS, timerScheduler } from '../scheduler';
import type { HeartbeatConnectionIds, ServerHeartbeatEvent } from './heartbeat-events';
import { asTopologyVersion } from './topology-version';

/**
 * The shortest interval between checks, in ms: 500, not configurable.
 *
 * Source: server monitoring spec, "minHeartbeatFrequencyMS".
 */
export const MIN_HEARTBEAT_FREQUENCY_MS = 500;

/**
 * How long a polling monitor's connection may sit idle before a close found on it counts as an idle timeout rather
 * than news of the server: this many heartbeatFrequencyMS since the last check ended (a check is due after one).
 */
const IDLE_FREQUENCIES = 2;

/**
 * Whether `connection` says more replies are coming (`moreToCome === true`): false for no connection, and for one (of a
 * user's connectionFactory) whose `moreToCome` cannot be read, which then fails at its next request instead of
 * stopping the monitor.
 */
function moreToComeOf(connection: Connection | undefined): boolean {
  try {
    return connection?.moreToCome === true;
  } catch {
    return false;
  }
}

/**
 * The id a monitor gives its connection factory for every monitoring connection, and its heartbeat events'
 * `connectionId` (the RTT connection is 1).
 */
const MONITORING_CONNECTION_ID = 0;

/**
 * The server's id for `connection` (its handshake reply's `connectionId`), when it has one that can be read and a
 * server could send (see `serverConnectionIdOf`): a connection of a user's connectionFactory may have none, another
 * value, or a getter that throws.
 */
function heartbeatServerConnectionId(connection: Connection | undefined): number | undefined {
  try {
    return serverConnectionIdOf(connection?.server.serverConnectionId);
  } catch {
    return undefined;
  }
}

/** A heartbeat event's ids: the monitoring connection's, and the server's when known (else the key is left out). */
function connectionIds(serverConnectionId: number | undefined): HeartbeatConnectionIds {
  return serverConnectionId === undefined ? { connectionId: MONITORING_CONNECTION_ID } : { connectionId: MONITORING_CONNECTION_ID, serverConnectionId };
}

/**
 * Which monitoring protocol a monitor uses: `stream` uses the streaming protocol when the server supports it (its
 * hello reply carries `topologyVersion`, MongoDB 4.4+) and polls otherwise; `poll` always polls; `auto` (the default)
 * polls when the process runs on a FaaS platform (detected as for the handshake's `client.env.name`: AWS Lambda, Azure
 * Functions, GCP Cloud Functions, Vercel) and streams otherwise.
 *
 * Source: server monitoring spec, "serverMonitoringMode", "Streaming disabled".
 */
export type ServerMonitoringMode = 'auto' | 'stream' | 'poll';

/** The valid {@link ServerMonitoringMode} values. Source: server monitoring spec, "serverMonitoringMode". */
export const SERVER_MONITORING_MODES: readonly ServerMonitoringMode[] = Object.freeze(['auto', 'stream', 'poll']);

/**
 * The options of a monitoring connection: `options` without its credentials, since monitoring sockets are never
 * authenticated and never negotiate a SASL mechanism. Every monitoring connection, the monitor's own factory's or one a
 * client builds for it, takes its options from here.
 *
 * Source: server monitoring spec, "Servers are monitored with dedicated sockets"; auth spec ("Authentication
 * (including mechanism negotiation) MUST NOT happen on monitoring-only sockets").
 */
export function monitoringConnectionOptions<O extends { readonly credentials?: unknown }>(options: O): Omit<O, 'credentials'> {
  const { credentials: _credentials, ...rest } = options;
  return rest;
}

/**
 * Checks a serverMonitoringMode: undefined gives `auto`.
 *
 * @throws {InvalidOptionError} naming serverMonitoringMode, the value and the modes allowed, for anything else.
 * Source: server monitoring spec, "serverMonitoringMode".
 */
export function requireServerMonitoringMode(value: unknown): ServerMonitoringMode {
  if (value === undefined) return 'auto';
  if (!SERVER_MONITORING_MODES.includes(value as ServerMonitoringMode)) {
    throw new InvalidOptionError('serverMonitoringMode', value, `one of ${SERVER_MONITORING_MODES.map((m) => `"${m}"`).join(', ')}`);
  }
  return value as ServerMonitoringMode;
}

/** The keys of {@link MonitorOptions}: any other key is refused, naming the closest of these. */
const MONITOR_OPTION_NAMES = ['address', 'heartbeatFrequencyMS', 'serverMonitoringMode', 'connectionOptions', 'connectionFactory', 'scheduler'] as const satisfies readonly (keyof MonitorOptions)[];
true satisfies ListsEveryOption<MonitorOptions, typeof MONITOR_OPTION_NAMES>;

/**
 * Options of a {@link Monitor}. Durations in ms.
 *
 * Source: server monitoring spec, "heartbeatFrequencyMS", "minHeartbeatFrequencyMS", "Socket timeout for monitoring
 * is connectTimeoutMS", "Servers are monitored with dedicated sockets"; `connectionFactory`, `scheduler`: extension
 * (injection for tests).
 */
export interface MonitorOptions {
  /** The server, `host:port`. */
  address: string;
  /**
   * Polling: time from the end of one check to the start of the next. Streaming: the longest the server waits before
   * it streams a reply (maxAwaitTimeMS). In ms, at least 500 ({@link MIN_HEARTBEAT_FREQUENCY_MS}). Default 10000.
   */
  heartbeatFrequencyMS?: number | undefined;
  /** Streaming or polling (see {@link ServerMonitoringMode}). Default `auto`. */
  serverMonitoringMode?: ServerMonitoringMode | undefined;
  /**
   * How connections are made (TLS, appName, connectTimeoutMS, which is also each check's timeout; `serverApi`: every
   * hello is `hello` with the API fields). Credentials are ignored. With a `connectionFactory`, only `connectTimeoutMS`
   * is read (as the checks' timeout): the factory makes the connections, and each connection's own `serverApi` decides
   * its hellos.
   */
  connectionOptions?: ConnectionOptions | undefined;
  /** Replaces the default TCP factory (tests); `connectionOptions` then serve only for `connectTimeoutMS`. */
  connectionFactory?: ConnectionFactory<Connection> | undefined;
  /** Clock and timers of the sleeps between checks. Default: unref'd Node timers. */
  scheduler?: SchedulerLike | undefined;
}

/** heartbeatFrequencyMS when none is given: 10000 ms. Source: server monitoring spec, "heartbeatFrequencyMS". */
export const DEFAULT_HEARTBEAT_FREQUENCY_MS = 10_000;

/**
 * A server monitor. `start()` it, follow {@link heartbeats$}, `close()` it.
 *
 * Streaming protocol (the server's hello reply carries `topologyVersion`, and {@link serverMonitoringMode} allows it):
 * after each successful check the next starts at once, as an awaitable hello (`topologyVersion` of the last reply,
 * `maxAwaitTimeMS` = heartbeatFrequencyMS) sent with the OP_MSG exhaustAllowed flag; the server answers when its
 * topology changes or maxAwaitTimeMS elapses, and goes on streaming replies (moreToCome) without further requests.
 * Each reply is a check of its own: ServerHeartbeatStarted, then Succeeded, both with `awaited: true`, so a pool
 * following the heartbeats learns of a server that fails or shuts down at once, not heartbeatFrequencyMS later. Its
 * timeout is connectTimeoutMS + heartbeatFrequencyMS (none when connectTimeoutMS is 0). An error (network error,
 * timeout, `ok: 0`, a malformed reply) is a failed check as in polling: the connection is closed and the protocol
 * restarts on a new connection.
 *
 * Polling protocol (otherwise): each check runs `hello` (legacy hello when the server did not answer `helloOk` and the
 * connection declares no Stable API version: with one, always `hello`, with its API fields) on a
 * dedicated, unauthenticated connection, with connectTimeoutMS as its timeout; when there is no connection, opening one
 * (its handshake reply) is the check. A failed check closes that connection; after a network error on a server that
 * was known (its previous check succeeded), the next check starts at once, else after heartbeatFrequencyMS.
 * {@link cancelCheck} ends a check in progress and closes the connection when the server was found unusable otherwise.
 *
 * A connection found errored when a check starts more than twice heartbeatFrequencyMS after the last one ended (the
 * process was frozen, as a FaaS platform freezes it between invocations, or stalled, and a load balancer's or the
 * server's idle timeout closed the connection meanwhile) is closed, and the check opens a new one, so a healthy
 * server's pool is not cleared for it; a server that is down fails that establishment. Found errored sooner, the close
 * is news of the server: the check fails on it and the pool is cleared at once, as the spec says.
 *
 * @throws {InvalidOptionError} from the constructor for options that are not an object, an unknown key (naming the
 *   closest option), a heartbeatFrequencyMS that is not a finite number of ms >= 500, a serverMonitoringMode other
 *   than auto, stream or poll, a scheduler or connectionFactory of the wrong type, or an invalid address or connection
 *   option.
 *
 * Source: server monitoring spec, "Servers are monitored with dedicated sockets", "Servers are checked
 * periodically", "Requesting an immediate check", "Polling Protocol", "Network or command error during server
 * check" (a connection found closed after an idle of over twice heartbeatFrequencyMS is replaced rather than checked:
 * extension, after CMAP's perished connections), "minHeartbeatFrequencyMS", "heartbeatFrequencyMS", "Socket timeout
 * for monitoring is connectTimeoutMS", "serverMonitoringMode", "Streaming Protocol" ("Streaming hello or legacy
 * hello", "Socket timeout", "SDAM Monitoring", "Heartbeat frequency", "hello or legacy hello Cancellation"); Stable API
 * spec, "Handshake behavior" (`hello` only, with a declared API version; a server without `hello` fails the check, so
 * it is Unknown).
 */
export class Monitor {
  /** The monitored server, normalized to `host:port`. */
  readonly address: string;
  /** Time from the end of one check to the start of the next, in ms (at least 500; default 10000). */
  readonly heartbeatFrequencyMS: number;
  /** The monitoring mode asked for (default `auto`). */
  readonly serverMonitoringMode: ServerMonitoringMode;
  /**
   * Whether this monitor streams when the server supports it: the mode is `stream`, or `auto` outside a FaaS
   * platform (decided at construction).
   */
  readonly streamingEnabled: boolean;
  private readonly events = new Subject<ServerHeartbeatEvent>();
  private readonly factory: ConnectionFactory<Connection>;
  private readonly connectTimeoutMS: number;
  /** The timeout of an awaitable hello's reply: connectTimeoutMS + heartbeatFrequencyMS, 0 (none) with connectTimeoutMS 0. */
  private readonly awaitedTimeoutMS: number;
  /** The topologyVersion of the last successful check, while streaming is enabled and the server supports it. */
  private topologyVersion: Document | undefined;
  /** The RTT samples: handshakes and polling checks of the monitoring connection, and the RTT task's. */
  private readonly roundTripTimes = new RoundTripTimes();
  /** The RTT task, while streaming. */
  private rttMonitor: RttMonitor | undefined;
  private readonly scheduler: SchedulerLike;
  private connection: Connection | undefined;
  private establishing: Subscription | undefined;
  private running = false;
  private closed = false;
  private known = false;
  private lastCheckEnd = -Infinity;
  /** When the last failed check ended (scheduler ms), and whether the last check succeeded. */
  private lastFailureEnd = -Infinity;
  private lastCheckOk = false;
  private wake: (() => void) | undefined;
  private checkRequested = false;
  /** Whether a check (its hello, legacy hello or connection handshake) is in progress. */
  private checking = false;
  /** Ends the check in progress with the error given (see {@link cancelCheck}); set while a check waits on the server. */
  private cancelCurrent: ((error: Error) => void) | undefined;
  /**
   * The check whose ServerHeartbeatStarted was published and whose Succeeded or Failed was not yet: `close()` ends it
   * with ServerHeartbeatFailed (MonitorClosedError).
   */
  private inProgress: { readonly started: number; readonly awaited: boolean; serverConnectionId: number | undefined } | undefined;
  /** How many heartbeat events are being delivered now (more than one only when a subscriber's close() ends a check). */
  private delivering = 0;
  /** close() was called from a subscriber: its ServerHeartbeatFailed and the completion wait for that delivery to end. */
  private endDeferred = false;

  /**
   * Every heartbeat event, hot: Started, then Succeeded or Failed, for each check. Completes when the monitor is
   * closed.
   */
  readonly heartbeats$: Observable<ServerHeartbeatEvent> = this.events.asObservable();

  constructor(options: MonitorOptions) {
    const o = requireOptionsObject('options', options, 'an object with at least an address', true);
    rejectUnknownOptions(o, MONITOR_OPTION_NAMES, 'Monitor');
    // Each option read once, none from Object.prototype (see optionValue).
    const m = optionValues(options, MONITOR_OPTION_NAMES);
    requireScheduler('scheduler', m.scheduler);
    requireFunction('connectionFactory', m.connectionFactory, 'a function (descriptor) => ObservableInput<Connection>');
    // The checked copy of serverApi is what the connections declare: its fields are read once (see checkServerApi).
    const serverApi = checkConnectionOptions(m.connectionOptions, 'Monitor', 'connectionOptions.');
    const server = parseAddress(m.address);
    this.address = server.address;
    const frequency = m.heartbeatFrequencyMS ?? DEFAULT_HEARTBEAT_FREQUENCY_MS;
    if (typeof frequency !== 'number' || !Number.isFinite(frequency) || frequency < MIN_HEARTBEAT_FREQUENCY_MS) {
      throw new InvalidOptionError('heartbeatFrequencyMS', frequency, `a number of ms >= ${MIN_HEARTBEAT_FREQUENCY_MS}`);
    }
    this.heartbeatFrequencyMS = frequency;
    this.serverMonitoringMode = requireServerMonitoringMode(m.serverMonitoringMode);
    this.streamingEnabled = this.serverMonitoringMode === 'stream' || (this.serverMonitoringMode === 'auto' && clientEnv()?.name === undefined);
    this.connectTimeoutMS = optionValue(m.connectionOptions, 'connectTimeoutMS') ?? DEFAULT_CONNECT_TIMEOUT_MS;
    // One Node timer: a longer delay would fire after 1 ms.
    this.awaitedTimeoutMS = this.connectTimeoutMS === 0 ? 0 : Math.min(this.connectTimeoutMS + frequency, MAX_TIMER_DELAY_MS);
    this.scheduler = m.scheduler ?? timerScheduler;
    const connectionOptions = { ...monitoringConnectionOptions(m.connectionOptions ?? {}), ...(serverApi === undefined ? {} : { serverApi }) };
    // Its connections time their handshake hello on the monitor's clock: an RTT sample like the others.
    const scheduler = this.scheduler;
    this.factory =
      m.connectionFactory ?? connectionFactoryWithMetadata({ ...connectionOptions, host: server.host, port: server.port }, undefined, () => scheduler.now());
  }

  /**
   * Whether the monitor uses the streaming protocol now: streaming is enabled and the last check's reply carried
   * `topologyVersion` (or the server is still streaming replies). Source: server monitoring spec, "Streaming Protocol".
   */
  get streaming(): boolean {
    return (this.streamingEnabled && this.topologyVersion !== undefined) || moreToComeOf(this.connection);
  }

  /**
   * The server's minimum round-trip time, in ms: the smallest of the latest 10 samples, 0 until there are 2 (read
   * only; reset to no samples by a failed check). The samples: the duration of each new monitoring connection's
   * handshake `hello` (its `handshakeDurationMS`, without the socket connect and TLS handshake before it; the whole
   * establishment for a connection of a factory that does not record it), of each polling check, and, while
   * streaming, of the `hello` that a dedicated RTT connection runs every heartbeatFrequencyMS (publishing no event;
   * its errors only close that connection; the first heartbeatFrequencyMS after streaming starts; a new RTT connection
   * counts its handshake `hello` likewise). Streamed replies are never samples: their duration is the server's wait.
   * Polling opens no RTT connection. Times come from the monitor's scheduler, except a handshake `hello`'s, which the
   * connection measures.
   *
   * Source: server monitoring spec, "Measuring RTT", "RTT thread", "Monitors MUST use a dedicated connection for RTT
   * commands"; counting polling checks as samples is an extension.
   */
  get minRoundTripTimeMS(): number {
    return this.roundTripTimes.min;
  }

  /**
   * The server's average RTT in ms (the samples {@link minRoundTripTimeMS} takes, averaged as
   * `nextAverageRoundTripTime` says), which server selection's latency window compares; undefined before its first
   * successful check and after a failed one, which forgets it (a state change error, which makes the server Unknown
   * too, keeps it).
   *
   * Source: server selection spec, "Calculation of Average Round Trip Times".
   */
  get averageRoundTripTimeMS(): number | undefined {
    return this.roundTripTimes.average;
  }

  /**
   * The monitoring connections it holds now, established or being established: the checks' connection (0 or 1), and
   * while streaming the RTT connection (0 or 1). They are outside every pool: what a server counts beyond its pools'
   * connections. Source: extension (who holds the connections to a server).
   */
  get connectionCount(): number {
    return (this.connection !== undefined || this.establishing !== undefined ? 1 : 0) + (this.rttMonitor?.connectionCount ?? 0);
  }

  /**
   * Starts checking (the first check at once). Idempotent; no-op once closed. Never throws: a failed check is a
   * ServerHeartbeatFailed event, never an error of this call. Source: server monitoring spec, "Monitor thread".
   */
  start(): void {
    if (this.running || this.closed) return;
    this.running = true;
    void this.loop();
  }

  /**
   * Requests an immediate check: wakes a sleeping monitor, no sooner than 500 ms (minHeartbeatFrequencyMS) after the
   * previous check ended, nor later than the periodic check; further requests before it runs change nothing (with a
   * scheduler whose clock went back, the first request's check runs 500 ms after it). Ignored while a check is in
   * progress (its hello, legacy hello or connection handshake, or, streaming, the wait for the server's next reply,
   * which comes as soon as the server changes): the next check is then the periodic one, heartbeatFrequencyMS after it
   * ends (or at once after a network error on a known server). Ignored too before `start()` (whose first check is at
   * once) and after `close()`.
   *
   * Source: server monitoring spec, "Requesting an immediate check" ("If a hello or legacy hello call is already in
   * progress, the request MUST be ignored"), "minHeartbeatFrequencyMS".
   */
  requestCheck(): void {
    if (this.checking || !this.running || this.closed) return;
    this.checkRequested = true;
    this.wake?.();
  }

  /**
   * Cancels the check in progress and closes the monitoring connection, for when the server was found unusable
   * otherwise: an application connection to it met a network error that is not a timeout, so this connection is
   * likely gone too, and waiting on it would take up to connectTimeoutMS.
   *
   * - A check in progress (its hello or legacy hello, a streaming wait for the server's next reply, or the
   *   establishment of its connection) ends at once with
   *   ServerHeartbeatFailed, whose error is a {@link MongoNetworkError} with `cause` as its cause (a pool following
   *   the heartbeats is cleared, as for any failed check).
   * - The monitoring connection is closed (no event when no check is in progress); the next check opens a new one.
   * - The server counts as no longer known, so a network error at the next check is not retried at once.
   * - The next check is requested: it starts minHeartbeatFrequencyMS (500 ms) after the previous check ended.
   *
   * Ignored before `start()` and after `close()`. Never throws.
   *
   * Source: server monitoring spec, "hello or legacy hello Cancellation" ("clients MUST cancel the hello or legacy
   * hello check on that server and close the current monitoring connection"), "Drivers cancel in-progress monitor
   * checks", "Requesting an immediate check", "Network or command error during server check" (step 4: a server
   * marked Unknown is not retried at once).
   */
  cancelCheck(cause?: unknown): void {
    if (!this.running || this.closed) return;
    this.known = false;
    const error = new MongoNetworkError(this.address, `the check of ${this.address} was cancelled and its monitoring connection closed`, { cause });
    const cancel = this.cancelCurrent;
    this.cancelCurrent = undefined;
    cancel?.(error);
    this.establishing?.unsubscribe(); // aborted; a connection it still yields is destroyed as it arrives
    this.establishing = undefined;
    destroyQuietly(this.connection, error);
    this.connection = undefined;
    this.checkRequested = true;
    this.wake?.();
  }

  /**
   * Stops checking, cancels a check in progress (a streaming wait too, at once, not maxAwaitTimeMS later), closes the
   * monitoring connection (one still being established
   * too: aborted, or destroyed as it arrives), completes heartbeats$. Idempotent; callable from a heartbeats$
   * subscriber. A connection whose `destroy()` throws, or returns a Promise that rejects, counts as closed: close()
   * still completes heartbeats$, and the rejection is handled.
   *
   * A check in progress (its ServerHeartbeatStarted published, a streaming wait included) ends with
   * ServerHeartbeatFailed, published by this call before heartbeats$ completes: `error` a {@link MonitorClosedError},
   * `duration` the ms from the check's start, `awaited` the check's. No other event follows, and the check does
   * nothing more: no connection opened, no further check. `heartbeatActions()` maps that event to no pool action.
   * Called from a heartbeats$ subscriber, that ServerHeartbeatFailed and the completion come once the event being
   * delivered has reached every subscriber, so each sees a check's start before its end.
   *
   * Source: server monitoring spec, "Monitor thread"; server discovery and monitoring logging and monitoring spec,
   * "Guarantees", "Heartbeats" (every ServerHeartbeatStartedEvent has a correlating Succeeded or Failed event).
   */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.establishing?.unsubscribe(); // an aborted establishment may never settle: it counts no more from here
    this.establishing = undefined;
    // Quietly: a connection of a user's factory may throw, or return a Promise that rejects; close() still ends.
    destroyQuietly(this.connection);
    this.connection = undefined;
    this.rttMonitor?.close();
    this.rttMonitor = undefined;
    this.wake?.();
    // From a subscriber: the event it was given first reaches every other subscriber, so none of them sees the end of
    // a check before its start, or the completion before an event the others had.
    if (this.delivering > 0) this.endDeferred = true;
    else this.end();
  }

  /**
   * {@link close}, for a `using` declaration (`using monitor = new Monitor(...)`): the monitor closes when the block
   * that declared it is left, however it is left. Synchronous and idempotent as `close()`; never throws.
   *
   * Source: extension (TC39 explicit resource management, `Symbol.dispose`; the official Node.js driver's MongoClient,
   * sessions and cursors are disposable too, asynchronously, with `Symbol.asyncDispose`).
   */
  [Symbol.dispose](): void {
    this.close();
  }

  /** The end of close(): the check in progress ends with ServerHeartbeatFailed (MonitorClosedError), heartbeats$ completes. */
  private end(): void {
    const check = this.inProgress;
    this.inProgress = undefined;
    if (check !== undefined) {
      const now = this.scheduler.now();
      const error = new MonitorClosedError(this.address);
      this.events.next(Object.freeze({ type: 'ServerHeartbeatFailed', address: this.address, ...connectionIds(check.serverConnectionId), time: now, awaited: check.awaited, duration: now - check.started, error }));
    }
    this.events.complete();
  }

  private async loop(): Promise<void> {
    while (!this.closed) {
      const retryAtOnce = await this.check();
      if (this.closed) break;
      if (!retryAtOnce) await this.sleep();
      else if (this.lastCheckOk) {
        // A success streams on at once, but not sooner than minHeartbeatFrequencyMS after the last failure: a server
        // that completes handshakes yet drops every awaitable hello (a proxy without exhaust support) would otherwise
        // be reconnected to, and its pool cleared, as fast as the network allows.
        const left = this.minIntervalLeftSince(this.lastFailureEnd);
        if (left > 0) await this.pause(left);
      }
    }
  }

  /**
   * What is left, in ms (0 or more), of minHeartbeatFrequencyMS since `time` on the scheduler's clock. A scheduler whose
   * clock went back (a wall clock set back) gives no time since then: the whole 500 ms are left, not that plus however
   * far the clock went back.
   */
  private minIntervalLeftSince(time: number): number {
    return Math.max(0, MIN_HEARTBEAT_FREQUENCY_MS - Math.max(0, this.scheduler.now() - time));
  }

  /** Waits `delay` ms (close() ends it at once; a requested check does not). */
  private pause(delay: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = this.scheduler.schedule(() => done(), delay);
      const done = (): void => {
        timer.unsubscribe();
        this.wake = undefined;
        resolve();
      };
      this.wake = () => {
        if (this.closed) done();
      };
    });
  }

  /**
   * One check; resolves to whether the next check must start at once: streaming (the reply carried topologyVersion,
   * or more replies are coming), or a network error on a known server.
   */
  private async check(): Promise<boolean> {
    this.checking = true;
    this.checkRequested = false;
    const started = this.scheduler.now();
    // A monitoring connection found closed after it sat idle longer than the monitor ever leaves it (the process was
    // frozen, as a FaaS platform freezes it between invocations, or stalled, long enough for a load balancer's or the
    // server's idle timeout) is perished, as a pooled connection would be: this check opens a new one, whose handshake
    // is the check, instead of failing on it and clearing the pool of a healthy server. Closed within the usual idle
    // time, the close is news of the server (down, restarted, or behind an endpoint that accepts but never answers):
    // the check fails on it, and the pool is cleared at once.
    if (this.connection !== undefined && started - this.lastCheckEnd > IDLE_FREQUENCIES * this.heartbeatFrequencyMS && !moreToComeOf(this.connection) && isErrored(this.connection)) {
      destroyQuietly(this.connection);
      this.connection = undefined;
    }
    const connection = this.connection;
    const moreToCome = moreToComeOf(connection);
    const awaited = connection !== undefined && (moreToCome || (this.streamingEnabled && this.topologyVersion !== undefined));
    // cancelCheck() ends the wait on the server at once, whatever the connection does with its request; from
    // ServerHeartbeatStarted on, since a subscriber of that event may call it.
    let cancellation: Error | undefined;
    const cancelled = new Promise<never>((_resolve, reject) => {
      this.cancelCurrent = (error) => {
        cancellation = error;
        reject(error);
      };
    });
    cancelled.catch(() => undefined); // awaited through cancellable() only
    // Set first: a subscriber of ServerHeartbeatStarted may close the monitor, which then ends this check.
    const check = (this.inProgress = { started, awaited, serverConnectionId: heartbeatServerConnectionId(connection) });
    this.emit({ type: 'ServerHeartbeatStarted', address: this.address, ...connectionIds(check.serverConnectionId), time: started, awaited });
    /**
     * `work` or the cancellation, whichever comes first; a cancellation that comes after `work` settled, but before
     * the check went on with it, still ends the check. What `work` yields after a cancellation is given to `discard`
     * (a connection nobody will hold).
     */
    const cancellable = async <T>(work: Promise<T>, discard?: (value: T) => void): Promise<T> => {
      try {
        const value = await Promise.race([work, cancelled]);
        if (cancellation !== undefined) throw cancellation;
        return value;
      } catch (error) {
        // The error of work that lost to a cancellation is nobody's; its value is discarded once it comes.
        work.then(discard, () => undefined);
        throw error;
      }
    };
    try {
      // Closed by a subscriber of that event: the check ends there, before it opens anything.
      if (this.closed) return false;
      // Cancelled by a subscriber of that event: the check fails there, before it reads or opens anything.
      if (cancellation !== undefined) throw cancellation;
      let reply;
      /** A new connection's hello round trip, the RTT sample instead of the whole establishment's duration. */
      let handshakeDurationMS: unknown;
      if (this.connection === undefined) {
        // A new connection's handshake reply satisfies the check.
        const connection = await cancellable(this.connect(), destroyQuietly);
        if (this.closed) {
          // Closed while the connection was on its way in (emitted, not yet taken): nobody else will close it.
          destroyQuietly(connection);
          return false;
        }
        this.connection = connection;
        check.serverConnectionId = heartbeatServerConnectionId(connection);
        reply = connection.hello;
        handshakeDurationMS = connection.handshakeDurationMS;
      } else if (moreToCome) {
        // Streaming hello: the server's next reply, sent without a request.
        reply = await cancellable(this.connection.nextReply({ timeoutMS: this.awaitedTimeoutMS }));
      } else if (awaited) {
        // Awaitable hello with exhaustAllowed: the server replies on a topology change or after maxAwaitTimeMS.
        const command = {
          [helloCommandName(this.connection.server.helloOk, this.connection.serverApi !== undefined)]: 1,
          topologyVersion: this.topologyVersion,
          maxAwaitTimeMS: this.heartbeatFrequencyMS,
        };
        reply = await cancellable(this.connection.command('admin', command, { timeoutMS: this.awaitedTimeoutMS, exhaustAllowed: true }).catch(this.malformedHello));
      } else {
        const command = { [helloCommandName(this.connection.server.helloOk, this.connection.serverApi !== undefined)]: 1 };
        reply = await cancellable(this.connection.command('admin', command, { timeoutMS: this.connectTimeoutMS }).catch(this.malformedHello));
      }
      // Cancelled between the reply (or the new connection) and here: the check fails all the same, and the catch
      // closes the connection, a new one included.
      if (cancellation !== undefined) throw cancellation;
      const now = this.scheduler.now();
      // The state is the reply's before it is published: a subscriber's cancelCheck() or close() has the last word.
      this.known = true;
      this.lastCheckOk = true;
      // A handshake's hello or a polling hello measures the round trip (the socket connect and TLS handshake before a
      // new connection's hello do not), and that is the check's duration too; a streamed reply measures the server's
      // wait, and is no sample.
      const duration = awaited ? now - started : handshakeSample(handshakeDurationMS, now - started);
      if (!awaited) this.roundTripTimes.add(duration);
      // Feature discovery: a reply with topologyVersion says the server supports awaitable hello.
      this.topologyVersion = this.streamingEnabled ? asTopologyVersion(reply.topologyVersion) : undefined;
      this.inProgress = undefined;
      this.emit({ type: 'ServerHeartbeatSucceeded', address: this.address, ...connectionIds(check.serverConnectionId), time: now, awaited, duration, reply });
      this.followRtt();
      // Cancelled by a subscriber of that event: the next check is the requested one, 500 ms after this one.
      if (cancellation !== undefined) return false;
      return this.streaming;
    } catch (error) {
      if (this.closed) return false;
      const now = this.scheduler.now();
      // Only a connectionFactory of the user's can fail with something that is not an Error.
      const err = isError(error)
        ? error
        : new PoolCallbackError(this.address, 'connectionFactory', `connectionFactory failed with ${inWords(error)}, which is not an Error`, { cause: error });
      destroyQuietly(this.connection);
      this.connection = undefined;
      this.topologyVersion = undefined;
      this.roundTripTimes.reset();
      this.inProgress = undefined;
      this.emit({ type: 'ServerHeartbeatFailed', address: this.address, ...connectionIds(check.serverConnectionId), time: now, awaited, duration: now - started, error: err });
      const wasKnown = this.known;
      this.known = false;
      this.lastCheckOk = false;
      this.lastFailureEnd = now;
      return wasKnown && err instanceof MongoNetworkError;
    } finally {
      this.cancelCurrent = undefined;
      this.inProgress = undefined;
      this.checking = false;
      this.lastCheckEnd = this.scheduler.now();
    }
  }

  /**
   * Rethrows the error of a check's hello; a hello reply holding a value that cannot be read (a string that is not
   * valid UTF-8), which fails only its command, as a malformed reply: for a check, whose reply is the server's
   * description, it is one, as for an establishment (see `malformedHello` of connection/connect).
   */
  private readonly malformedHello = (error: unknown): never => {
    throw malformedHello(error, this.address, `the check of ${this.address}`);
  };

  /**
   * Establishes the monitoring connection (see {@link establish}): `close()` or `cancelCheck()` abort it, and no
   * connection outlives the monitor.
   */
  private connect(): Promise<Connection> {
    const { connection, subscription } = establish(this.factory, this.address, MONITORING_CONNECTION_ID, () => this.closed);
    this.establishing = subscription;
    return connection.finally(() => {
      if (this.establishing === subscription) this.establishing = undefined;
    });
  }

  /**
   * Runs the RTT task while streaming, and only then (server monitoring spec, "Streaming disabled": no RTT
   * connection when polling).
   */
  private followRtt(): void {
    if (this.closed) return;
    if (this.streaming) {
      this.rttMonitor ??= new RttMonitor({
        address: this.address,
        factory: this.factory,
        heartbeatFrequencyMS: this.heartbeatFrequencyMS,
        connectTimeoutMS: this.connectTimeoutMS,
        scheduler: this.scheduler,
        samples: this.roundTripTimes,
      });
      this.rttMonitor.start();
    } else {
      this.rttMonitor?.close();
      this.rttMonitor = undefined;
    }
  }

  /**
   * Sleeps heartbeatFrequencyMS, or until a requested check is due (at least 500 ms after the last), whichever comes
   * first, or close. The first request of a sleep sets when its check is due; later ones change nothing.
   */
  private sleep(): Promise<void> {
    return new Promise<void>((resolve) => {
      let periodic: Subscription | undefined;
      let requested: Subscription | undefined;
      const done = (): void => {
        periodic?.unsubscribe();
        requested?.unsubscribe();
        this.wake = undefined;
        resolve();
      };
      this.wake = () => {
        if (this.closed) return done();
        if (requested !== undefined) return;
        // Never past the periodic check, which stays armed.
        requested = this.scheduler.schedule(done, this.minIntervalLeftSince(this.lastCheckEnd));
      };
      // Requested before the sleep: due within minHeartbeatFrequencyMS, before any periodic check could be.
      if (this.checkRequested) this.wake();
      else periodic = this.scheduler.schedule(done, this.heartbeatFrequencyMS);
    });
  }

  private emit(event: ServerHeartbeatEvent): void {
    if (this.closed) return;
    this.delivering++;
    try {
      this.events.next(Object.freeze(event));
    } finally {
      this.delivering--;
      if (this.delivering === 0 && this.endDeferred) {
        this.endDeferred = false;
        this.end();
      }
    }
  }
}
