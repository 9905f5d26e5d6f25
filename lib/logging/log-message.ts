/**
 * CMAP events as the spec's log messages: structured (exact key names) and, through `render()`, unstructured; and
 * the client's own messages (component `client`: connection string warnings); the heartbeat messages (component
 * `topology`); the command messages (component `command`); the server selection messages (component
 * `serverSelection`).
 *
 * Source: CMAP spec, "Connection Pool Logging" (every message, its keys, reason strings and unstructured form);
 * logging spec ("Representing Errors", "Omitting Null Values", truncation of documents); connection string spec,
 * "Keys", "Values" (WARN messages for what a connection string has that is ignored); server discovery and monitoring
 * logging and monitoring spec, "Log Messages" (the heartbeat messages); command logging and monitoring spec, "Log
 * Messages" (the command messages); server selection spec, "Logging" (the server selection messages).
 */
import { randomUUID } from 'node:crypto';
import { EJSON, Long } from 'bson';
import { writtenAddress, type ServerAddress } from '../address';
import { inWords, isInstance, MongoServerError, PoolCallbackError, selectionFailureText, ServerSelectionError, type PoolHoldings } from '../errors';
import { exactNumber } from '../int64';
import { setOwnField } from '../own-field';
import type { CommandEvent } from '../connection/command-events';
import type { ConnectionPoolEvent } from '../events';
import type { ServerHeartbeatEvent } from '../monitor/heartbeat-events';
import type { ListsEveryOption, PoolOptions } from '../options';
import { documentPrefix } from './document-prefix';

/**
 * An error, as it appears in a structured log message: what the error classes report, with its texts truncated to
 * the max document length; absent values are omitted.
 *
 * Source: logging spec, "Representing Errors in Log Messages", "Omitting Null Values from Log Messages",
 * "Configurable Max Document Length".
 */
export interface LoggedError {
  /** The error's `name`, e.g. `"MongoNetworkError"`. */
  readonly type: string;
  /** The error's message, truncated. */
  readonly message: string;
  /** A server error's code ({@link MongoServerError.code}). */
  readonly code?: number;
  /** A server error's code name ({@link MongoServerError.codeName}). */
  readonly codeName?: string;
  /** The error's labels, when it has any. */
  readonly errorLabels?: readonly string[];
  /** A server error's reply, as relaxed extended JSON, truncated. */
  readonly response?: string;
  /** Load-balanced mode: the service the connection that failed had reached (`CmapError.serviceId`). */
  readonly serviceId?: string;
  /**
   * What the pool held when the checkout failed (`WaitQueueTimeoutError.pool`, `PoolClearedError.pool`,
   * `WaitQueueFullError.pool`), absent values left out and the `checkOut` stack truncated.
   */
  readonly pool?: LoggedPoolHoldings;
  /**
   * A PoolCallbackError's `establishmentError` (the establishment error `clearOnEstablishmentError` threw or returned a
   * Promise on), written the same way.
   */
  readonly establishmentError?: LoggedError;
  /**
   * The error's `cause`, when it is an Error, written the same way (with its own cause, and so on): what an
   * AuthenticationError's server reply or a MongoNetworkError's socket error says. The chain ends at the
   * 8th cause (`MAX_LOGGED_CAUSES`), at a cause met before, and at a cause that is not an Error or cannot be read.
   */
  readonly cause?: LoggedError;
}

/**
 * {@link PoolHoldings} as a log message writes it: the same keys, absent values left out, the `checkOut` stack
 * truncated to the max document length.
 *
 * Source: logging spec, "Representing Errors in Log Messages" (what an error class reports is logged), "Omitting Null
 * Values from Log Messages"; the holdings: extension (see {@link PoolHoldings}).
 */
export interface LoggedPoolHoldings extends Omit<PoolHoldings, 'oldestCheckOut'> {
  /** The checkout that had held its connection longest, when the pool knew it. */
  readonly oldestCheckOut?: {
    /** The connection's id. */
    readonly connectionId: number;
    /** ms since it was checked out. */
    readonly duration: number;
    /** With leak detection on: the stack of the `checkOut` call that took it, truncated. */
    readonly checkOutStack?: string;
  };
}

/**
 * How many causes of an error a log message writes, at most.
 *
 * Source: extension (a bound on what one log message holds).
 */
export const MAX_LOGGED_CAUSES = 8;

/**
 * The fields of a connection log message, with the spec's key names; an absent value is never null: its key is left
 * out, or (in the three checkout messages, built as one literal each) holds `undefined`. The structured form,
 * `toJSON()`, leaves every key without a value out.
 *
 * Source: CMAP spec, "Connection Pool Logging" ("Common Fields" and each message's keys); logging spec, "Omitting
 * Null Values from Log Messages".
 */
export interface ConnectionLogFields {
  /** The spec's message name, e.g. `"Connection checked out"`. */
  readonly message: string;
  /** The Endpoint's host name, IP address or Unix domain socket path. */
  readonly serverHost: string;
  /** The Endpoint's port (27017 when the address gave none); undefined for a Unix domain socket. */
  readonly serverPort?: number;
  /** The connection's pool-assigned id, in the messages about one connection. */
  readonly driverConnectionId?: number;
  /**
   * The event's `duration`, in ms: in Connection ready, Connection checked out and Connection checkout failed; the
   * leak messages' time held (extension).
   */
  readonly durationMS?: number;
  /** Connection pool draining (extension): the drain's deadline, in ms, when it has one (the event's `timeoutMS`). */
  readonly timeoutMS?: number;
  /** The spec's sentence for the event's reason, in Connection closed and Connection checkout failed. */
  readonly reason?: string;
  /** The error, when a connection was closed with reason `error` or a checkout failed with `connectionError`. */
  readonly error?: LoggedError;
  /** The cleared service (hex ObjectId string), in Connection pool cleared, in load-balanced mode. */
  readonly serviceId?: string;
  /** Connection pool created: the pool's maxIdleTimeMS (ms), when the user set it. */
  readonly maxIdleTimeMS?: number;
  /** Connection pool created: the pool's minPoolSize, when the user set it. */
  readonly minPoolSize?: number;
  /** Connection pool created: the pool's maxPoolSize, when the user set it. */
  readonly maxPoolSize?: number;
  /** Connection pool created: the pool's maxConnecting, when the user set it. */
  readonly maxConnecting?: number;
  /** Connection pool created: the pool's waitQueueTimeoutMS (ms), when the user set it. */
  readonly waitQueueTimeoutMS?: number;
  /**
   * Connection leak suspected (extension): the stack of the `checkOut` call that took the connection, truncated to
   * the max document length.
   */
  readonly checkOutStack?: string;
}

/**
 * One log message of the `connection` component, made from one event: at `debug` for every CMAP event; at `warn`
 * for ConnectionLeakSuspected and `info` for ConnectionLeakSuspectCheckedIn (leak detection, an extension). Treat it
 * as immutable (its members are readonly; it is shared by every subscriber of `log$`). `time` is in ms. Made by the
 * pool, which never fails to make one; the constructor checks nothing and never throws. `toJSON()` throws a
 * RangeError only when `time` is not a valid date (a scheduler whose `now()` is outside `Date`'s range); `render()`
 * never throws.
 *
 * Source: CMAP spec, "Connection Pool Logging"; logging spec, "Components", "Log Severity Levels", "Structured versus
 * Unstructured Logging", "Including Timestamps in Log Messages"; leak messages: extension (HikariCP logs its leak
 * warnings at WARN and the return of a reported connection at INFO).
 */
export class ConnectionLogMessage {
  /** The log component: always `connection`. */
  readonly component = 'connection' as const;

  constructor(
    /**
     * When the event was emitted, in ms since the Unix epoch: on the wall clock with the pool's default scheduler (its
     * monotonic clock, from which the event's `time` is read, does not step with the wall clock; see
     * `wallClockTime`), the event's `time` with any other scheduler.
     */
    readonly time: number,
    /** The structured fields, under the spec's key names. */
    readonly fields: ConnectionLogFields,
    /** The severity: `debug` (the CMAP messages), `warn` or `info` (leak detection). */
    readonly level: 'debug' | 'info' | 'warn' = 'debug',
  ) {}

  /** The structured form: `t` (ISO time), `c` (component), `s` (severity), then the spec's keys. */
  toJSON(): Record<string, unknown> {
    return structuredForm(this);
  }

  /** The spec's unstructured form of this message. */
  render(): string {
    return renderConnectionMessage(this.fields);
  }
}

/**
 * The fields of a client log message.
 *
 * Source: logging spec, "Structured versus Unstructured Logging"; connection string spec, "Keys", "Values".
 */
export interface ClientLogFields {
  /**
   * What happened, in words: for a connection string warning, what was ignored and why, e.g.
   * `unknown option fooBar is ignored` (never a password: values of secret options are not shown).
   */
  readonly message: string;
}

/**
 * One log message of the `client` component, at `warn` level: a connection string warning (an unknown or
 * unsupported key, an invalid value, a repeated key: see `ParsedConnectionString.warnings`), or what an SRV polling
 * rescan could not use and why (its message starts with `SRV polling:`). Treat it as immutable.
 * `time` is in ms. The constructor checks nothing and never throws; `toJSON()` throws a RangeError only when `time`
 * is not a valid date (a scheduler whose `now()` is outside `Date`'s range); `render()` never throws.
 *
 * Source: connection string spec, "Keys" ("A WARN level logging message MUST be issued for unsupported keys"),
 * "Values" ("Any invalid Values for a given key MUST be ignored and MUST log a WARN level message"), "Repeated Keys";
 * Polling SRV Records for mongos Discovery spec, "Implementation" (SHOULD log a rescan's non-compliant host names,
 * and why the records could not be used);
 * logging spec, "Components" (a language-specific component; the MongoDB Node.js driver names it `client`),
 * "Log Severity Levels".
 */
export class ClientLogMessage {
  /** The log component: always `client`. */
  readonly component = 'client' as const;
  /** The severity: always `warn`. */
  readonly level = 'warn' as const;

  constructor(
    /**
     * When the message was made, in ms since the Unix epoch: on the wall clock with the client's default scheduler,
     * its scheduler's `now()` with any other.
     */
    readonly time: number,
    /** The structured fields. */
    readonly fields: ClientLogFields,
  ) {}

  /** The structured form: `t` (ISO time), `c` (component), `s` (severity), then `message`. */
  toJSON(): Record<string, unknown> {
    return structuredForm(this);
  }

  /** The unstructured form: the message itself. */
  render(): string {
    return this.fields.message;
  }
}

/**
 * What the `debug` messages share (those made one per event: a heartbeat's, a command's; and a topology's life): the
 * time, the structured fields under the spec's key names, and the structured form. A subclass names its component and writes its
 * unstructured form. The constructor checks nothing and never throws; `toJSON()` throws a RangeError only when `time`
 * is not a valid date.
 *
 * Source: logging spec, "Structured versus Unstructured Logging", "Including Timestamps in Log Messages".
 */
export abstract class DebugLogMessage<F extends object> {
  /** The log component. */
  abstract readonly component: string;
  /** The severity: always `debug`. */
  readonly level = 'debug' as const;

  constructor(
    /**
     * When the event was emitted, or for a message of a topology's life when it was written, in ms since the Unix
     * epoch: on the wall clock with the default schedulers, the event's `time` (its scheduler's `now()`) with any other;
     * a command message's is its event's `time`, on the wall clock whatever the scheduler.
     */
    readonly time: number,
    /** The structured fields, under the spec's key names. */
    readonly fields: F,
  ) {}

  /** The structured form: `t` (ISO time), `c` (component), `s` (severity), then the spec's keys. */
  toJSON(): Record<string, unknown> {
    return structuredForm(this);
  }

  /** The spec's unstructured form of this message. */
  abstract render(): string;
}

/**
 * The fields of a heartbeat log message, under the spec's key names; a key without a value is left out.
 *
 * Source: server discovery and monitoring logging and monitoring spec, "Common Fields", "Server Heartbeat Started",
 * "Server Heartbeat Succeeded" and "Server Heartbeat Failed" Log Messages; logging spec, "Omitting Null Values from
 * Log Messages".
 */
export interface ServerHeartbeatLogFields {
  /** `"Server heartbeat started"`, `"Server heartbeat succeeded"` or `"Server heartbeat failed"`. */
  readonly message: 'Server heartbeat started' | 'Server heartbeat succeeded' | 'Server heartbeat failed';
  /** The id of the client whose monitor checked (`Client.topologyId`: a 24-character hex string). */
  readonly topologyId: string;
  /** The monitored server's host name, IP address (IPv6 without brackets) or Unix domain socket path. */
  readonly serverHost: string;
  /** The monitored server's port (27017 when the address gave none); absent for a Unix domain socket. */
  readonly serverPort?: number;
  /** The driver's id of the monitoring connection: the event's `connectionId` (always 0). */
  readonly driverConnectionId: number;
  /** The server's id of the monitoring connection (the event's `serverConnectionId`), when known. */
  readonly serverConnectionId?: number;
  /** Whether the check is of the streaming protocol (the event's `awaited`). */
  readonly awaited: boolean;
  /** Succeeded and failed: the event's `duration`, in ms. */
  readonly durationMS?: number;
  /** Succeeded: the server's reply as relaxed Extended JSON, truncated to the max document length. */
  readonly reply?: string;
  /**
   * Failed: the event's error, written as every logged error is (see {@link LoggedError}). Never redacted: a
   * monitoring connection is never authenticated, so its hello is not a sensitive command.
   */
  readonly failure?: LoggedError;
}

/**
 * The fields of the messages that open and end a client's log of its topology: "Starting topology monitoring" (the
 * client is made; its first `topology` message) and "Stopped topology monitoring" (the client closed; its last).
 *
 * Source: server discovery and monitoring logging and monitoring spec, "Starting Topology Monitoring" and "Stopped
 * Topology Monitoring" Log Messages.
 */
export interface TopologyMonitoringLogFields {
  /** `"Starting topology monitoring"` or `"Stopped topology monitoring"`. */
  readonly message: 'Starting topology monitoring' | 'Stopped topology monitoring';
  /** The client's id (`Client.topologyId`: a 24-character hex string). */
  readonly topologyId: string;
}

/**
 * The fields of the messages that open and end a server's part in a client: "Starting server monitoring" (the
 * server is added: its pool, and unless load-balanced its monitor, are made) and "Stopped server monitoring" (its
 * monitor published its last heartbeat, or in load-balanced mode its pool closed: the client closed, or SRV polling
 * removed the host).
 *
 * Source: server discovery and monitoring logging and monitoring spec, "Common Fields", "Starting Server Monitoring"
 * and "Stopped Server Monitoring" Log Messages; load balancer spec, "Monitoring" (both messages in load-balanced mode,
 * which has no monitoring connection).
 */
export interface ServerMonitoringLogFields {
  /** `"Starting server monitoring"` or `"Stopped server monitoring"`. */
  readonly message: 'Starting server monitoring' | 'Stopped server monitoring';
  /** The client's id (`Client.topologyId`). */
  readonly topologyId: string;
  /** The server's host name, IP address (IPv6 without brackets) or Unix domain socket path. */
  readonly serverHost: string;
  /** The server's port (27017 when the address gave none); absent for a Unix domain socket. */
  readonly serverPort?: number;
}

/**
 * The fields of a "Topology description changed" message: the client's topology description before and after a
 * change, each as JSON (see `Client`'s description: `{ type, servers: [{ address, type }] }`), truncated to the max
 * document length.
 *
 * Source: server discovery and monitoring logging and monitoring spec, "Topology Description Changed" Log Message
 * ("The format is flexible": JSON here).
 */
export interface TopologyDescriptionChangedLogFields {
  /** `"Topology description changed"`. */
  readonly message: 'Topology description changed';
  /** The client's id (`Client.topologyId`). */
  readonly topologyId: string;
  /** The description before the change, as JSON. */
  readonly previousDescription: string;
  /** The description after it, as JSON. */
  readonly newDescription: string;
}

/**
 * The fields of a `topology` log message, under the spec's key names, told apart by `message`; a key without a value
 * is left out.
 *
 * Source: server discovery and monitoring logging and monitoring spec, "Log Messages"; logging spec, "Omitting Null
 * Values from Log Messages".
 */
export type TopologyLogFields = ServerHeartbeatLogFields | TopologyMonitoringLogFields | ServerMonitoringLogFields | TopologyDescriptionChangedLogFields;

/**
 * One log message of the `topology` component, at `debug`, made only when the component logs at `debug`: a client's
 * heartbeat messages, made from its monitors' heartbeat events ("Server heartbeat started", "succeeded", "failed"),
 * one per event, and the messages of its topology's life ("Starting topology monitoring", "Starting server
 * monitoring", "Topology description changed", "Stopped server monitoring", "Stopped topology monitoring"); see
 * {@link TopologyLogFields}; `F` narrows its fields to one kind (a heartbeat message's are
 * {@link ServerHeartbeatLogFields}). Treat it as immutable (it is shared by every subscriber of `log$`). `time` is
 * in ms. The constructor checks nothing and never throws; `toJSON()` throws a RangeError only when `time` is not a
 * valid date; `render()` never throws.
 *
 * Source: server discovery and monitoring logging and monitoring spec, "Log Messages" ("MUST be logged at Debug level
 * and use the topology log component"), each message's section; logging spec,
 * "Components", "Structured versus Unstructured Logging".
 */
export class TopologyLogMessage<F extends TopologyLogFields = TopologyLogFields> extends DebugLogMessage<F> {
  /** The log component: always `topology`. */
  readonly component = 'topology' as const;

  /** The spec's unstructured form of this message. */
  render(): string {
    return renderTopologyMessage(this.fields);
  }
}

/**
 * The structured form of a log message: `t` (its time as an ISO string), `c` (component), `s` (severity), then its
 * fields under the spec's key names, those without a value left out (logging spec, "Omitting Null Values"). Throws a
 * RangeError only when `time` is not a valid date.
 */
function structuredForm(m: { readonly time: number; readonly component: string; readonly level: string; readonly fields: object }): Record<string, unknown> {
  const json: Record<string, unknown> = { t: new Date(m.time).toISOString(), c: m.component, s: m.level };
  for (const [key, value] of Object.entries(m.fields)) if (value !== undefined) json[key] = value;
  return json;
}

/**
 * The fields of a command log message, under the spec's key names; a key without a value is left out.
 *
 * Source: command logging and monitoring spec, "Common Fields", "Command Started Message", "Command Succeeded
 * Message", "Command Failed Message"; logging spec, "Omitting Null Values from Log Messages".
 */
export interface CommandLogFields {
  /** `"Command started"`, `"Command succeeded"` or `"Command failed"`. */
  readonly message: 'Command started' | 'Command succeeded' | 'Command failed';
  /** The command's name, e.g. `"find"`. */
  readonly commandName: string;
  /** The database it ran on. */
  readonly databaseName: string;
  /** The request id of its message, the same in its two messages. */
  readonly requestId: number;
  /** The operation it is part of, when the caller gave one. */
  readonly operationId?: number;
  /** The driver's id of the connection (its CMAP `connectionId`), without the host and port. */
  readonly driverConnectionId: number;
  /** The server's host name, IP address (IPv6 without brackets) or Unix domain socket path. */
  readonly serverHost: string;
  /** The server's port (27017 when the address gave none); absent for a Unix domain socket. */
  readonly serverPort?: number;
  /** The server's id of the connection, when the server gave one. */
  readonly serverConnectionId?: number;
  /** The service behind a load balancer (hex string), in load-balanced mode. */
  readonly serviceId?: string;
  /** Started: the command as relaxed Extended JSON, truncated to the max document length (`{}` when sensitive). */
  readonly command?: string;
  /** Succeeded and failed: the event's `duration`, in ms. */
  readonly durationMS?: number;
  /** Succeeded: the reply as relaxed Extended JSON, truncated to the max document length (`{}` when sensitive). */
  readonly reply?: string;
  /** Failed: the event's failure, written as every logged error is (see {@link LoggedError}); redacted when sensitive. */
  readonly failure?: LoggedError;
}

/**
 * One log message of the `command` component, at `debug`: "Command started", "succeeded" or "failed", made from one
 * command event when the component logs at `debug` (nothing is built otherwise). Treat it as immutable. `time` is in
 * ms. The constructor checks nothing and never throws; `toJSON()` throws a RangeError only when `time` is not a valid
 * date; `render()` never throws.
 *
 * Source: command logging and monitoring spec, "Log Messages" ("MUST be logged at Debug level and use the command log
 * component"); logging spec, "Components", "Structured versus Unstructured Logging".
 */
export class CommandLogMessage extends DebugLogMessage<CommandLogFields> {
  /** The log component: always `command`. */
  readonly component = 'command' as const;

  /** The spec's unstructured form of this message. */
  render(): string {
    return renderCommandMessage(this.fields);
  }
}

/**
 * The fields of a server selection log message, under the spec's key names, the common ones in the order of its table
 * (`selector`, `operationId`, `operation`, `topologyDescription`); a key without a value is left out.
 *
 * Source: server selection spec, "Logging" ("Common Fields" and each message's keys); logging spec, "Omitting Null
 * Values from Log Messages".
 */
export interface ServerSelectionLogFields {
  /**
   * `"Server selection started"`, `"Server selection succeeded"`, `"Server selection failed"` or `"Waiting for suitable
   * server to become available"`.
   */
  readonly message: 'Server selection started' | 'Server selection succeeded' | 'Server selection failed' | 'Waiting for suitable server to become available';
  /**
   * What the selection looks for: the operation's read preference (the `readPreference` option of `command()` or
   * `selectPool()`, `primary` when not given) with all its components, as `describeReadPreference` writes it: its mode
   * alone when it has no tags or maxStalenessSeconds (`"primary"`, `"nearest"`), else its `$readPreference` document
   * as JSON (`{"mode":"secondary","tags":[{"dc":"ny"}],"maxStalenessSeconds":90}`). rxcmap takes no custom selector.
   *
   * Source: server selection spec, "Logging", "Common Fields" (`selector`: "when the selector is a read preference
   * this string MUST contain all components of the read preference").
   */
  readonly selector: string;
  /**
   * The operation's ID, when the caller gave one (the `operationId` option of `command()` or `selectPool()`): the ID
   * the operation's command log messages and events carry, linking its selection to its commands.
   */
  readonly operationId?: number;
  /** The operation a server is selected for: the command's name for `command()`, `"selectPool"` for `selectPool()`. */
  readonly operation: string;
  /**
   * The client's topology description when the message is made, as JSON, the one its "Topology description changed"
   * messages give (`{ type, servers: [{ address, type }] }`): its TopologyType in SDAM's names (`Unknown`, `Single`,
   * `Sharded`, `ReplicaSetNoPrimary`, `ReplicaSetWithPrimary`, `LoadBalanced`), and per server, in the order the client
   * came to monitor them, its address and the ServerType of its description (`Unknown`: not checked yet, its last check
   * failed, or an error of one of its connections made it so; while the client drains, each server as it was before,
   * though none is selectable then; once closed, Unknown with no server); truncated to the max document length. Why a
   * host's last check failed is in the `topology` component's "Server heartbeat failed" message, and in a failed
   * selection's `failure`.
   */
  readonly topologyDescription: string;
  /** Succeeded: the selected server's host name, IP address (IPv6 without brackets) or Unix domain socket path. */
  readonly serverHost?: string;
  /** Succeeded: the selected server's port (27017 when the address gave none); absent for a Unix domain socket. */
  readonly serverPort?: number;
  /**
   * Failed: the error the selection fails with, written as every logged error is (see {@link LoggedError}), but a
   * ServerSelectionError's message without its hosts and read preference, which `topologyDescription` and `selector`
   * hold, and without its last check's error, which its `cause` holds.
   */
  readonly failure?: LoggedError;
  /** Waiting: the ms left before the selection times out, a whole number (rounded down). */
  readonly remainingTimeMS?: number;
}

/**
 * One log message of the `serverSelection` component: a client's "Server selection started", "succeeded" and
 * "failed" at `debug`, and "Waiting for suitable server to become available" at `info` (once per selection, when no
 * server is ready at its start), made by `command()` and `selectPool()` when the component logs at that level (nothing
 * is built otherwise). Treat it as immutable (it is shared by every subscriber of `log$`). `time` is in ms. The
 * constructor checks nothing and never throws; `toJSON()` throws a RangeError only when `time` is not a valid date;
 * `render()` never throws.
 *
 * Source: server selection spec, "Logging" (the four messages, their levels, "only emit this message once per
 * operation"); logging spec, "Components", "Log Severity Levels", "Structured versus Unstructured Logging".
 */
export class ServerSelectionLogMessage {
  /** The log component: always `serverSelection`. */
  readonly component = 'serverSelection' as const;

  constructor(
    /**
     * When the message was made, in ms since the Unix epoch: on the wall clock with the client's default scheduler,
     * its scheduler's `now()` with any other.
     */
    readonly time: number,
    /** The structured fields, under the spec's key names. */
    readonly fields: ServerSelectionLogFields,
    /** The severity: `info` for the waiting message, `debug` for the others. */
    readonly level: 'debug' | 'info' = 'debug',
  ) {}

  /** The structured form: `t` (ISO time), `c` (component), `s` (severity), then the spec's keys. */
  toJSON(): Record<string, unknown> {
    return structuredForm(this);
  }

  /** The spec's unstructured form of this message. */
  render(): string {
    return renderServerSelectionMessage(this.fields);
  }
}

/**
 * Any log message rxcmap emits, discriminated on `component`: a {@link ConnectionLogMessage} (`connection`, `debug`),
 * a {@link ClientLogMessage} (`client`, `warn`), a {@link TopologyLogMessage} (`topology`, `debug`), a
 * {@link CommandLogMessage} (`command`, `debug`) or a {@link ServerSelectionLogMessage} (`serverSelection`, `debug`
 * and `info`).
 *
 * Source: logging spec, "Components", "Log Severity Levels"; server selection spec, "Logging".
 */
export type LogMessage = ConnectionLogMessage | ClientLogMessage | TopologyLogMessage | CommandLogMessage | ServerSelectionLogMessage;

/**
 * The pool options Connection pool created reports (each only when the user set it), in the order the CMAP message
 * lists them, in its structured keys and its unstructured text alike.
 *
 * Source: CMAP spec, "Connection Pool Logging", "Pool Created Message".
 */
const LOGGED_POOL_OPTIONS = ['maxIdleTimeMS', 'minPoolSize', 'maxPoolSize', 'maxConnecting', 'waitQueueTimeoutMS'] as const satisfies readonly (keyof PoolOptions)[];
true satisfies ListsEveryOption<PoolOptions, typeof LOGGED_POOL_OPTIONS>;

const CLOSED_REASONS: Record<string, string> = {
  stale: 'Connection became stale because the pool was cleared',
  idle: 'Connection has been available but unused for longer than the configured max idle time',
  error: 'An error occurred while using the connection',
  poolClosed: 'Connection pool was closed',
  expired: 'Connection reached its maximum lifetime (maxLifeTimeMS)',
};

const CHECKOUT_FAILED_REASONS: Record<string, string> = {
  timeout: 'Wait queue timeout elapsed without a connection becoming available',
  connectionError: 'An error occurred while trying to establish a new connection',
  poolClosed: 'Connection pool was closed',
  cancelled: 'The checkout was cancelled before a connection was delivered',
  waitQueueFull: 'The wait queue was full (maxWaitQueueSize checkouts were waiting)',
};

/**
 * Cuts `text` to `max` UTF-16 code units, never inside a surrogate pair, and appends `...` (not counted) when it cut.
 */
export function truncate(text: string, max: number): string {
  if (text.length <= max) return text;
  let end = max;
  const last = text.charCodeAt(end - 1);
  if (end > 0 && last >= 0xd800 && last <= 0xdbff) end--;
  return `${text.slice(0, end)}...`;
}

/**
 * An error as a structured log value, with texts and documents truncated to `maxDocumentLength`. Never throws: the
 * error may come from a user's connection factory, and is written inside an `events$` subscriber, where a throw would
 * end the process. A `name` or `message` that is not a string is written as `String()` writes it; one that cannot be
 * read (a getter that throws) is said to be so; labels that cannot be read are left out.
 */
export function logError(error: Error, maxDocumentLength: number): LoggedError {
  return logErrorChain(error, maxDocumentLength, [error]);
}

/**
 * The `failure` of a "Server selection failed" message for `error`, the error the selection fails with: written as
 * {@link logError} writes every error, but for a {@link ServerSelectionError} a message that leaves out what the log
 * message's other keys hold, its hosts (listed by `topologyDescription`) and its read preference (the `selector`), and
 * what the failure's own `cause` holds, the last check's error: e.g. `No suitable server within
 * serverSelectionTimeoutMS=30000 ms` with `cause` `{ type: 'MongoNetworkError', message: 'connect ECONNREFUSED …' }`,
 * where the error's message names all three. Never throws (an error whose fields cannot be read is written as logError
 * writes it).
 *
 * Source: server selection spec, "Logging", "Server selection failed" message (`failure`: "Drivers MUST take care to
 * not include any information in this field that is already included in the log message").
 */
export function selectionFailure(error: Error, maxDocumentLength: number): LoggedError {
  const logged = logError(error, maxDocumentLength);
  if (!isInstance(error, ServerSelectionError)) return logged;
  try {
    // The cause is the failure's `cause` (logError writes an Error cause), not repeated in its message.
    const text = selectionFailureText(error, true);
    return { ...logged, message: truncate(text, maxDocumentLength) };
  } catch {
    return logged;
  }
}

/** {@link logError} of `error`, the last of `chain` (the errors above it, and it), with its causes. */
function logErrorChain(error: Error, maxDocumentLength: number, chain: Error[]): LoggedError {
  const server = isInstance(error, MongoServerError) ? serverFields(error, maxDocumentLength) : undefined;
  const labels = labelsOf(error);
  const serviceId = propertyOf(error, 'serviceId');
  const pool = holdingsOf(error, maxDocumentLength);
  const cause = chain.length <= MAX_LOGGED_CAUSES ? causeOf(error) : undefined;
  // Logging spec, "Representing Errors": what an error class reports is logged, its cause included.
  const loggedCause = cause !== undefined && !chain.includes(cause) ? logErrorChain(cause, maxDocumentLength, [...chain, cause]) : undefined;
  const establishment = chain.length <= MAX_LOGGED_CAUSES && isInstance(error, PoolCallbackError) ? propertyOf(error, 'establishmentError') : undefined;
  const loggedEstablishment =
    isInstance(establishment, Error) && !chain.includes(establishment) ? logErrorChain(establishment, maxDocumentLength, [...chain, establishment]) : undefined;
  return {
    type: textOf(error, 'name'),
    message: truncate(textOf(error, 'message'), maxDocumentLength),
    ...(server?.code !== undefined ? { code: server.code } : {}),
    ...(server?.codeName !== undefined ? { codeName: server.codeName } : {}),
    ...(labels !== undefined ? { errorLabels: labels } : {}),
    ...(server !== undefined ? { response: server.response } : {}),
    ...(typeof serviceId === 'string' ? { serviceId: truncate(serviceId, maxDocumentLength) } : {}),
    ...(pool !== undefined ? { pool } : {}),
    ...(loggedEstablishment !== undefined ? { establishmentError: loggedEstablishment } : {}),
    ...(loggedCause !== undefined ? { cause: loggedCause } : {}),
  };
}

/** A property of an error, or undefined when it cannot be read (a getter of user code that throws). */
function propertyOf(error: Error, key: string): unknown {
  try {
    return (error as unknown as Record<string, unknown>)[key];
  } catch {
    return undefined;
  }
}

/** The holdings a pool's checkout error reports, as a log message writes them; undefined when it has none. */
function holdingsOf(error: Error, maxDocumentLength: number): LoggedPoolHoldings | undefined {
  // Never throws: a factory's error may have a `pool` of its own, with getters that throw.
  try {
    const pool = propertyOf(error, 'pool') as PoolHoldings | undefined;
    if (pool === null || typeof pool !== 'object' || typeof pool.inUseConnectionCount !== 'number') return undefined;
    // The holdings' own keys only, each read as what it must be: an error not of this pool may hold anything under
    // `pool` (a password, itself), which must reach no log line.
    const byPurpose = pool.inUseByPurpose;
    const holdings: Record<string, unknown> = {
      inUseConnectionCount: pool.inUseConnectionCount,
      ...(byPurpose !== null && typeof byPurpose === 'object' ? { inUseByPurpose: numbersOf(byPurpose, PURPOSES) } : {}),
      ...numbersOf(pool, HOLDINGS_COUNTS),
    };
    const oldest = pool.oldestCheckOut;
    if (oldest === null || typeof oldest !== 'object') return holdings as unknown as LoggedPoolHoldings;
    const { checkOutStack } = oldest;
    const stack = typeof checkOutStack === 'string' ? { checkOutStack: truncate(checkOutStack, maxDocumentLength) } : {};
    holdings.oldestCheckOut = { ...numbersOf(oldest, ['connectionId', 'duration']), ...stack };
    return holdings as unknown as LoggedPoolHoldings;
  } catch {
    return undefined;
  }
}

/** The counts of {@link PoolHoldings} a log message writes after `inUseByPurpose`, in its order. */
const HOLDINGS_COUNTS = ['pendingConnectionCount', 'availableConnectionCount', 'waitQueueLength'] as const;
/** The keys of `PoolHoldings.inUseByPurpose`. */
const PURPOSES = ['cursor', 'transaction', 'operation'] as const;

/** The values of `keys` in `source` that are numbers, under the same keys. */
function numbersOf(source: object, keys: readonly string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const key of keys) {
    const value = (source as Record<string, unknown>)[key];
    if (typeof value === 'number') out[key] = value;
  }
  return out;
}

/** An error's `cause`, when it is an Error that can be read. */
function causeOf(error: Error): Error | undefined {
  try {
    const cause: unknown = error.cause;
    return cause instanceof Error ? cause : undefined;
  } catch {
    return undefined;
  }
}

/** An error's `name` or `message` as a string, or words saying it cannot be read. */
function textOf(error: Error, key: 'name' | 'message'): string {
  try {
    const value: unknown = error[key];
    return typeof value === 'string' ? value : String(value);
  } catch {
    return `(the error's ${key} cannot be read)`;
  }
}

/** An error's labels, when it has some and they can be read. */
function labelsOf(error: Error): string[] | undefined {
  try {
    const labels = (error as { errorLabels?: unknown }).errorLabels;
    return labels instanceof Set && labels.size > 0 ? [...labels].map(String) : undefined;
  } catch {
    return undefined;
  }
}

/** A server error's code, code name and reply, each left out when it cannot be read. */
function serverFields(error: MongoServerError, maxDocumentLength: number): { code?: number; codeName?: string; response: string } {
  let code: number | undefined;
  let codeName: string | undefined;
  try {
    code = error.code;
    codeName = error.codeName;
  } catch {
    // A subclass's getter that throws: the reply below still says what the server answered.
  }
  let response: unknown;
  try {
    response = error.response;
  } catch (e) {
    return { code, codeName, response: `(the reply cannot be read: ${inWords(e)})` };
  }
  return { code, codeName, response: documentText(response, maxDocumentLength) };
}

/**
 * A document (a command or a server reply) as relaxed Extended JSON, truncated to `maxDocumentLength` (cut text ends
 * with `...`); only the part of the document that shows within that length is written (see {@link documentPrefix}),
 * so a huge document costs no more than a small one. A 64-bit integer (a BSON Long, a bigint) beyond 2^53 - 1 in
 * magnitude is written with all its digits, as relaxed Extended JSON writes an Int64 (`bson` would write the nearest
 * double: a cursor id `5476541286716842819` as `5476541286716843000`), in a Map as in a plain object; one inside an
 * object with its own `toJSON` is left to `bson` (which writes that object as JSON does, not as Extended JSON). A
 * document that cannot be written (a getter that throws, say: a user factory's error can hold anything) is said to be
 * so, rather than throwing where the log message (or span) is built, in an `events$` subscriber. `omitted`: top-level
 * keys written as if the document did not have them (see {@link documentPrefix}).
 *
 * Source: logging spec, "Configurable Max Document Length"; Extended JSON spec (relaxed Int64: an integer).
 */
export function documentText(document: unknown, maxDocumentLength: number, omitted?: ReadonlySet<string>): string {
  let text: string;
  try {
    const digits: string[] = [];
    text = EJSON.stringify(markedIntegers(documentPrefix(document, maxDocumentLength, omitted), digits), { relaxed: true });
    if (digits.length > 0) text = text.replace(MARKED_INTEGER, (_, index: string) => digits[Number(index)]!);
  } catch (error) {
    text = `(the document cannot be written as Extended JSON: ${inWords(error)})`;
  }
  return truncate(text, maxDocumentLength);
}

/**
 * What stands for a 64-bit integer beyond 2^53 - 1 until the text is written: a string of its own, whose random part
 * no string of a document can be written with (it is never shown), followed by the integer's index and `\u0001`.
 */
const INTEGER_MARK = `\u0001${randomUUID().replaceAll('-', '')}:`;
/** A mark, as JSON writes it (control characters as `\u0001`), with the index of its integer. */
const MARKED_INTEGER = new RegExp(`"\\\\u0001${INTEGER_MARK.slice(1)}(\\d+)\\\\u0001"`, 'g');

/**
 * `copy` (a {@link documentPrefix} copy: its plain objects and arrays are its own) with each Long or bigint beyond
 * 2^53 - 1 in magnitude in its plain objects, arrays and Maps replaced by a mark, its digits pushed to `digits`. A
 * container with none is returned as it is (never changed in place: a Map of the caller's is copied).
 */
function markedIntegers(value: unknown, digits: string[], within = new Set<object>()): unknown {
  if (typeof value === 'bigint' || Long.isLong(value)) return exactNumber(value) === undefined ? mark(value.toString(), digits) : value;
  if (value === null || typeof value !== 'object') return value;
  // A container inside itself (in a Map, which the copy keeps as it is) is left to bson, which says it is circular.
  if (within.has(value)) return value;
  within.add(value);
  try {
    return markedContainer(value, digits, within);
  } finally {
    within.delete(value);
  }
}

/** {@link markedIntegers} of an object, `within` the containers around it. */
function markedContainer(value: object, digits: string[], within: Set<object>): unknown {
  // A Map is written as a document of its entries (bson knows one by its tag too): its values marked in a new Map.
  if (value instanceof Map || Object.prototype.toString.call(value) === '[object Map]') {
    let changed = false;
    const entries = [...(value as Map<unknown, unknown>)].map(([key, field]): [unknown, unknown] => {
      const marked = markedIntegers(field, digits, within);
      if (marked !== field) changed = true;
      return [key, marked];
    });
    return changed ? new Map(entries) : value;
  }
  const prototype: unknown = Object.getPrototypeOf(value);
  if (Array.isArray(value)) {
    if (prototype !== Array.prototype) return value;
    let changed: unknown[] | undefined;
    for (let i = 0; i < value.length; i++) {
      const marked = markedIntegers(value[i], digits, within);
      if (marked !== value[i]) (changed ??= [...(value as unknown[])])[i] = marked;
    }
    return changed ?? value;
  }
  // The documents the copy made (plain objects); any other object (a BSON value, a Date, a toJSON) as it is.
  if (prototype !== Object.prototype || '_bsontype' in value || Object.prototype.propertyIsEnumerable.call(value, 'toJSON')) return value;
  let changed: Record<string, unknown> | undefined;
  for (const key of Object.keys(value)) {
    const field = (value as Record<string, unknown>)[key];
    const marked = markedIntegers(field, digits, within);
    if (marked === field) continue;
    changed ??= copyOf(value as Record<string, unknown>);
    setOwnField(changed, key, marked);
  }
  return changed ?? value;
}

/** The mark of an integer written `written`, which is pushed to `digits`. */
function mark(written: string, digits: string[]): string {
  digits.push(written);
  return `${INTEGER_MARK}${digits.length - 1}\u0001`;
}

/** A plain object with the own enumerable fields of `value`, in order (a `__proto__` key an own field too). */
function copyOf(value: Record<string, unknown>): Record<string, unknown> {
  const copy: Record<string, unknown> = {};
  for (const key of Object.keys(value)) setOwnField(copy, key, value[key]);
  return copy;
}

/** The log message of a CMAP event; `time`: its time (ms), by default the event's. */
export function connectionLogMessage(
  event: ConnectionPoolEvent,
  server: ServerAddress,
  maxDocumentLength: number,
  time: number = event.time,
): ConnectionLogMessage {
  // The messages of every checkout come first, each built as one literal (they are most of a busy pool's log).
  switch (event.type) {
    case 'ConnectionCheckOutStarted':
      return new ConnectionLogMessage(time, { message: 'Connection checkout started', serverHost: server.host, serverPort: server.port });
    case 'ConnectionCheckedOut':
      return new ConnectionLogMessage(time, { message: 'Connection checked out', serverHost: server.host, serverPort: server.port, driverConnectionId: event.connectionId, durationMS: event.duration });
    case 'ConnectionCheckedIn':
      return new ConnectionLogMessage(time, { message: 'Connection checked in', serverHost: server.host, serverPort: server.port, driverConnectionId: event.connectionId });
  }
  const base = serverLogFields(server);
  let fields: ConnectionLogFields;
  switch (event.type) {
    case 'ConnectionPoolCreated': {
      const options: Record<string, number> = {};
      for (const name of LOGGED_POOL_OPTIONS) if (event.options[name] !== undefined) options[name] = event.options[name]!;
      fields = { message: 'Connection pool created', ...base, ...options };
      break;
    }
    case 'ConnectionPoolReady':
      fields = { message: 'Connection pool ready', ...base };
      break;
    case 'ConnectionPoolCleared':
      fields = { message: 'Connection pool cleared', ...base, ...(event.serviceId ? { serviceId: event.serviceId } : {}) };
      break;
    case 'ConnectionPoolClosed':
      fields = { message: 'Connection pool closed', ...base };
      break;
    case 'ConnectionPoolDraining':
      fields = { message: 'Connection pool draining', ...base, ...(event.timeoutMS > 0 ? { timeoutMS: event.timeoutMS } : {}) };
      break;
    case 'ConnectionCreated':
      fields = { message: 'Connection created', ...base, driverConnectionId: event.connectionId };
      break;
    case 'ConnectionReady':
      fields = { message: 'Connection ready', ...base, driverConnectionId: event.connectionId, durationMS: event.duration };
      break;
    case 'ConnectionClosed':
      fields = {
        message: 'Connection closed',
        ...base,
        driverConnectionId: event.connectionId,
        reason: CLOSED_REASONS[event.reason],
        ...(event.reason === 'error' && event.error ? { error: logError(event.error, maxDocumentLength) } : {}),
      };
      break;
    case 'ConnectionCheckOutFailed':
      fields = {
        message: 'Connection checkout failed',
        ...base,
        reason: CHECKOUT_FAILED_REASONS[event.reason],
        ...(event.reason === 'connectionError' && event.error ? { error: logError(event.error, maxDocumentLength) } : {}),
        durationMS: event.duration,
      };
      break;
    case 'ConnectionLeakSuspected':
      return new ConnectionLogMessage(
        time,
        {
          message: 'Connection leak suspected',
          ...base,
          driverConnectionId: event.connectionId,
          durationMS: event.duration,
          checkOutStack: truncate(event.checkOutStack, maxDocumentLength),
        },
        'warn',
      );
    case 'ConnectionLeakSuspectCheckedIn':
      return new ConnectionLogMessage(
        time,
        { message: 'Connection leak suspect checked in', ...base, driverConnectionId: event.connectionId, durationMS: event.duration },
        'info',
      );
  }
  return new ConnectionLogMessage(time, fields);
}

/**
 * The unstructured form (CMAP "Connection Pool Logging"), omitting the segments of absent values. `{{serverHost}}:
 * {{serverPort}}` is written as the address of the events and errors: an IPv6 serverHost in brackets (`[::1]:27017`,
 * where `::1:27017` would read as another IPv6 address), a Unix domain socket path alone.
 */
export function renderConnectionMessage(f: ConnectionLogFields): string {
  const where = writtenAddress(f.serverHost, f.serverPort);
  const id = `address=${where}, driver-generated ID=${f.driverConnectionId}`;
  const error = f.error ? errorText(f.error) : undefined;
  switch (f.message) {
    case 'Connection pool created': {
      const options = LOGGED_POOL_OPTIONS.filter((n) => f[n] !== undefined).map((n) => `${n}=${f[n]}`);
      return `Connection pool created for ${where}${options.length > 0 ? ` using options ${options.join(', ')}` : ''}`;
    }
    case 'Connection pool ready':
      return `Connection pool ready for ${where}`;
    case 'Connection pool cleared':
      return `Connection pool for ${where} cleared${f.serviceId ? ` for serviceId ${f.serviceId}` : ''}`;
    case 'Connection pool closed':
      return `Connection pool closed for ${where}`;
    case 'Connection pool draining':
      return `Connection pool draining for ${where}${f.timeoutMS === undefined ? '' : `, closing in at most ${f.timeoutMS} ms`}`;
    case 'Connection created':
      return `Connection created: ${id}`;
    case 'Connection ready':
      return `Connection ready: ${id}, established in=${f.durationMS} ms`;
    case 'Connection closed':
      return `Connection closed: ${id}. Reason: ${f.reason}.${error ? ` Error: ${error}` : ''}`;
    case 'Connection checkout started':
      return `Checkout started for connection to ${where}`;
    case 'Connection checkout failed':
      return `Checkout failed for connection to ${where}. Reason: ${f.reason}.${error ? ` Error: ${error}.` : ''}${f.durationMS === undefined ? '' : ` Duration: ${f.durationMS} ms`}`;
    case 'Connection checked out':
      return `Connection checked out: ${id}${f.durationMS === undefined ? '' : `, duration=${f.durationMS} ms`}`;
    case 'Connection checked in':
      return `Connection checked in: ${id}`;
    case 'Connection leak suspected':
      return `Connection leak suspected: ${id}, checked out ${f.durationMS} ms ago by:\n${f.checkOutStack}`;
    case 'Connection leak suspect checked in':
      return `Connection leak suspect checked in: ${id}, after ${f.durationMS} ms`;
    default:
      return f.message;
  }
}

/** An error in the unstructured form: `type: message`, then `, caused by type: message` for each cause. */
function errorText(error: LoggedError): string {
  let text = `${error.type}: ${error.message}`;
  for (let cause = error.cause; cause !== undefined; cause = cause.cause) text += `, caused by ${cause.type}: ${cause.message}`;
  return text;
}

/**
 * The log message of a heartbeat event of the client whose id is `topologyId`, for the monitor of `server`: the reply
 * and the error truncated to `maxDocumentLength` (only the part of the reply that shows within it is written); `time`:
 * its time (ms), by default the event's. Never throws (a reply or an error that cannot be read is said to be so).
 */
export function heartbeatLogMessage(
  event: ServerHeartbeatEvent,
  server: ServerAddress,
  topologyId: string,
  maxDocumentLength: number,
  time: number = event.time,
): TopologyLogMessage<ServerHeartbeatLogFields> {
  const common = {
    topologyId,
    ...serverLogFields(server),
    driverConnectionId: event.connectionId,
    ...(event.serverConnectionId === undefined ? {} : { serverConnectionId: event.serverConnectionId }),
    awaited: event.awaited,
  };
  switch (event.type) {
    case 'ServerHeartbeatStarted':
      return new TopologyLogMessage(time, { message: 'Server heartbeat started', ...common });
    case 'ServerHeartbeatSucceeded':
      return new TopologyLogMessage(time, { message: 'Server heartbeat succeeded', ...common, durationMS: event.duration, reply: documentText(event.reply, maxDocumentLength) });
    case 'ServerHeartbeatFailed':
      return new TopologyLogMessage(time, { message: 'Server heartbeat failed', ...common, durationMS: event.duration, failure: logError(event.error, maxDocumentLength) });
  }
}

/**
 * The `serverHost` and `serverPort` keys of a message about `server`: its host name, IP address (IPv6 without brackets)
 * or Unix domain socket path, and its port, the key left out for a socket path (logging spec, "Omitting Null Values
 * from Log Messages").
 */
export function serverLogFields(server: ServerAddress): { readonly serverHost: string; readonly serverPort?: number } {
  return server.port === undefined ? { serverHost: server.host } : { serverHost: server.host, serverPort: server.port };
}

/**
 * The unstructured form (SDAM logging and monitoring spec, each message's section), omitting a heartbeat's segment
 * of an unknown serverConnectionId; `{{serverHost}}:{{serverPort}}` written as the connection messages write it (an
 * IPv6 host in brackets, a Unix domain socket path alone).
 */
export function renderTopologyMessage(f: TopologyLogFields): string {
  switch (f.message) {
    case 'Starting topology monitoring':
      return `Starting monitoring for topology with ID ${f.topologyId}`;
    case 'Stopped topology monitoring':
      return `Stopped monitoring for topology with ID ${f.topologyId}`;
    case 'Starting server monitoring':
      return `Starting monitoring for server ${writtenAddress(f.serverHost, f.serverPort)} in topology with ID ${f.topologyId}`;
    case 'Stopped server monitoring':
      return `Stopped monitoring for server ${writtenAddress(f.serverHost, f.serverPort)} in topology with ID ${f.topologyId}`;
    case 'Topology description changed':
      return `Description changed for topology with ID ${f.topologyId}. Previous description: ${f.previousDescription}. New description: ${f.newDescription}`;
    default:
      return renderHeartbeatMessage(f);
  }
}

/** The unstructured form of a heartbeat message (see {@link renderTopologyMessage}). */
function renderHeartbeatMessage(f: ServerHeartbeatLogFields): string {
  const where = writtenAddress(f.serverHost, f.serverPort);
  const serverId = f.serverConnectionId === undefined ? '' : ` and server-generated ID ${f.serverConnectionId}`;
  const on = `for ${where} on connection with driver-generated ID ${f.driverConnectionId}${serverId} in topology with ID ${f.topologyId}. Awaited: ${f.awaited}`;
  switch (f.message) {
    case 'Server heartbeat started':
      return `Heartbeat started ${on}`;
    case 'Server heartbeat succeeded':
      return `Heartbeat succeeded in ${f.durationMS} ms ${on}. Reply: ${f.reply}`;
    default:
      return `Heartbeat failed in ${f.durationMS} ms ${on}. Failure: ${f.failure ? errorText(f.failure) : ''}`;
  }
}

/**
 * The log message of a command event from the server `server`: the command and the reply truncated to
 * `maxDocumentLength` (only the part that shows within it is written). Never throws (a document or an error that
 * cannot be read is said to be so).
 *
 * Source: command logging and monitoring spec, "Log Messages".
 */
export function commandLogMessage(event: CommandEvent, server: ServerAddress, maxDocumentLength: number): CommandLogMessage {
  const common = {
    commandName: event.commandName,
    databaseName: event.databaseName,
    requestId: event.requestId,
    ...(event.operationId === undefined ? {} : { operationId: event.operationId }),
    driverConnectionId: event.connectionId,
    ...serverLogFields(server),
    ...(event.serverConnectionId === undefined ? {} : { serverConnectionId: event.serverConnectionId }),
    ...(event.serviceId === undefined ? {} : { serviceId: event.serviceId }),
  };
  switch (event.type) {
    case 'CommandStarted':
      return new CommandLogMessage(event.time, { message: 'Command started', ...common, command: documentText(event.command, maxDocumentLength) });
    case 'CommandSucceeded':
      return new CommandLogMessage(event.time, { message: 'Command succeeded', ...common, durationMS: event.duration, reply: documentText(event.reply, maxDocumentLength) });
    case 'CommandFailed':
      return new CommandLogMessage(event.time, { message: 'Command failed', ...common, durationMS: event.duration, failure: logError(event.failure, maxDocumentLength) });
  }
}

/**
 * The unstructured form (command logging and monitoring spec, "Command Started/Succeeded/Failed Message"), leaving
 * out the segments of an unknown serverConnectionId, of a service id outside load-balanced mode and of an operation
 * id the caller did not give; `{{serverHost}}:{{serverPort}}` written as the connection messages write it.
 */
export function renderCommandMessage(f: CommandLogFields): string {
  const serverId = f.serverConnectionId === undefined ? '' : ` and server-generated ID ${f.serverConnectionId}`;
  const service = f.serviceId === undefined ? '' : ` with service ID ${f.serviceId}`;
  const where = `using a connection with driver-generated ID ${f.driverConnectionId}${serverId} to ${writtenAddress(f.serverHost, f.serverPort)}${service}. The requestID is ${f.requestId}${f.operationId === undefined ? '' : ` and the operation ID is ${f.operationId}`}`;
  switch (f.message) {
    case 'Command started':
      return `Command "${f.commandName}" started on database "${f.databaseName}" ${where}. Command: ${f.command}`;
    case 'Command succeeded':
      return `Command "${f.commandName}" succeeded on database "${f.databaseName}" in ${f.durationMS} ms ${where}. Command reply: ${f.reply}`;
    case 'Command failed':
      return `Command "${f.commandName}" failed on database "${f.databaseName}" in ${f.durationMS} ms ${where}. Error: ${f.failure ? errorText(f.failure) : ''}`;
    default:
      return f.message;
  }
}

/**
 * The unstructured form (server selection spec, "Logging": each message's unstructured form), its `with ID
 * {{operationId}}` segment only when the operation has an ID (the caller's `operationId`);
 * `{{serverHost}}:{{serverPort}}` written as the connection messages write it.
 */
export function renderServerSelectionMessage(f: ServerSelectionLogFields): string {
  const rest = `Selector: ${f.selector}, topology description: ${f.topologyDescription}`;
  const operation = f.operationId === undefined ? f.operation : `${f.operation} with ID ${f.operationId}`;
  switch (f.message) {
    case 'Server selection started':
      return `Server selection started for operation ${operation}. ${rest}`;
    case 'Server selection succeeded':
      return `Server selection succeeded for operation ${operation}. Selected server: ${writtenAddress(f.serverHost ?? '', f.serverPort)}. ${rest}`;
    case 'Server selection failed':
      return `Server selection failed for operation ${operation}. Failure: ${f.failure ? errorText(f.failure) : ''}. ${rest}`;
    case 'Waiting for suitable server to become available':
      return `Waiting for server to become available for operation ${operation}. Remaining time: ${f.remainingTimeMS} ms. ${rest}.`;
    default:
      return f.message;
  }
}
