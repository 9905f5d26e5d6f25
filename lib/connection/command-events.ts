/**
 * The command events a connection publishes for the application's commands: one CommandStarted when a command's
 * message is built and about to be sent, then one CommandSucceeded or CommandFailed with the same `requestId`; and the
 * redaction of the commands and replies that carry authentication data.
 *
 * Source: command logging and monitoring spec, "Events API", "Guarantees", "Security", "Unacknowledged/Acknowledged
 * Writes", "Succeeded or Failed", "Error Handling", "Implementation Notes" (document sequences); durations in ms.
 */
import type { Document } from 'bson';
import { isError, MongoNetworkError, MongoServerError, WireProtocolError } from '../errors';

/**
 * What every command event carries: the server, the connection and the command it is about.
 *
 * Source: command logging and monitoring spec, "Events API" (`connectionId`, `serverConnectionId`, `serviceId`,
 * `requestId`, `operationId` (OPTIONAL: given when the caller numbers its operations), `databaseName`,
 * `commandName`).
 */
export interface CommandEventFields {
  /** The server, `host:port` (or the Unix domain socket path), as in every CMAP event's `address`. */
  readonly address: string;
  /**
   * When the event was emitted, on the wall clock: ms since the Unix epoch with a sub-ms fraction (`Date.now()` kept
   * to microsecond order, as the pools' log messages are stamped; a `Date.now()` read at the same moment, a whole ms,
   * may be up to 2 ms behind it).
   */
  readonly time: number;
  /** The driver's id of the connection (its CMAP `connectionId`, as in the pool's events). */
  readonly connectionId: number;
  /** The server's id of the connection (the `connectionId` of its handshake reply), when the server gave one. */
  readonly serverConnectionId?: number;
  /** The service behind a load balancer, as a hex string, in load-balanced mode only. */
  readonly serviceId?: string;
  /** The request id of the command's message (OP_MSG `requestID`): the same in a command's two events. */
  readonly requestId: number;
  /** The operation the command is part of, when the caller gave one (`CommandOptions.operationId`). */
  readonly operationId?: number;
  /** The database the command ran on (its `$db`). */
  readonly databaseName: string;
  /** The command's name: its document's first key, e.g. `"find"`. */
  readonly commandName: string;
}

/**
 * A command is sent: emitted once its message is built (a command that cannot be encoded, or is refused before that,
 * has no events), before it is written. The connection is busy from then on: a command a subscriber runs on it meanwhile
 * is refused (ConnectionBusyError); one that checks the connection in or destroys it fails this command, which is then
 * not sent.
 *
 * Source: command logging and monitoring spec, "Events API" (CommandStartedEvent), "Implementation Notes".
 */
export interface CommandStartedEvent extends CommandEventFields {
  /** The event's name; discriminates {@link CommandEvent}. */
  readonly type: 'CommandStarted';
  /**
   * The command as sent: its document with `$db` and the Stable API fields (when declared), and each OP_MSG document
   * sequence as an array under its identifier; `{}` for a sensitive command (see {@link isSensitiveCommand}). Shared
   * with the caller's objects: treat it as read-only.
   */
  readonly command: Readonly<Document>;
}

/**
 * A command's reply has `ok: 1` (write errors included), or an unacknowledged command (`moreToCome`) was written (its
 * reply is `{ ok: 1 }`).
 *
 * Source: command logging and monitoring spec, "Events API" (CommandSucceededEvent), "Succeeded or Failed",
 * "Unacknowledged/Acknowledged Writes".
 */
export interface CommandSucceededEvent extends CommandEventFields {
  /** The event's name; discriminates {@link CommandEvent}. */
  readonly type: 'CommandSucceeded';
  /**
   * ms from just after CommandStarted (the message encoded, not yet compressed or written) to the reply, read as a
   * document: a compressed command's compression is counted.
   */
  readonly duration: number;
  /**
   * The server's reply; `{}` for a sensitive command. The very object the command resolves to (not a copy, so that
   * nothing is parsed twice): treat it as read-only, since a subscriber that changes it (trims or redacts it in place)
   * changes what the application receives.
   */
  readonly reply: Readonly<Document>;
}

/**
 * A command failed: the server answered `ok: 0` (a MongoServerError), or the command could not be written or its reply
 * not read (a network error, a timeout, the connection destroyed by its pool), or its caller's `signal` aborted after
 * CommandStarted (a CommandCancelledError; a command whose signal was aborted already has no events).
 *
 * Source: command logging and monitoring spec, "Events API" (CommandFailedEvent), "Error Handling", "Security".
 */
export interface CommandFailedEvent extends CommandEventFields {
  /** The event's name; discriminates {@link CommandEvent}. */
  readonly type: 'CommandFailed';
  /** ms from just after CommandStarted (the message encoded, not yet compressed or written) to the failure. */
  readonly duration: number;
  /**
   * The error the command's Promise rejects with; for a sensitive command a server error is replaced by a
   * MongoServerError carrying only its `code`, `codeName` and `errorLabels` (its message: `"command failed"`), and an
   * error about a reply that could not be read by one without its detail (see `redactedFailure`).
   */
  readonly failure: Error;
}

/** Every command event, discriminated on `type`. Source: command logging and monitoring spec, "Events API". */
export type CommandEvent = CommandStartedEvent | CommandSucceededEvent | CommandFailedEvent;

/**
 * Where a connection publishes its command events: an rxjs Subject fits. `observed` is read before anything is built,
 * so a connection whose events nobody receives builds none.
 *
 * Source: extension (the shape of an rxjs Subject).
 */
export interface CommandEventSink {
  /** Whether anybody receives the events now. */
  readonly observed: boolean;
  /** Receives one event; must not throw (a throw is the subscriber's error, not the command's). */
  next(event: CommandEvent): void;
}

/**
 * The commands whose document, reply and server error are not shown in events and log messages, by name (as the
 * server reads them, case included).
 *
 * Source: command logging and monitoring spec, "Security" (the list of sensitive commands).
 */
export const SENSITIVE_COMMANDS: ReadonlySet<string> = new Set([
  'authenticate',
  'saslStart',
  'saslContinue',
  'getnonce',
  'createUser',
  'updateUser',
  'copydbgetnonce',
  'copydbsaslstart',
  'copydb',
]);

/**
 * Whether the command of `event` was withheld: a sensitive command's (see {@link isSensitiveCommand}), or one whose
 * document could not be read again once sent, is published as `{}`; every other carries at least `$db`. What the
 * command spans read to leave a sensitive command out.
 *
 * Source: command logging and monitoring spec, "Security"; MongoDB OpenTelemetry spec, "Instrumenting Server
 * Commands" (no span for a sensitive command).
 */
export function isWithheld(event: CommandStartedEvent): boolean {
  return !Object.prototype.hasOwnProperty.call(event.command, '$db');
}

/** hello and both casings of legacy hello: sensitive when they carry `speculativeAuthenticate`. */
const HELLO_NAMES: ReadonlySet<string> = new Set(['hello', 'isMaster', 'ismaster']);

/**
 * Whether command `name` (with document `command`) is sensitive: one of {@link SENSITIVE_COMMANDS}, or hello / legacy
 * hello with a `speculativeAuthenticate` field present, whatever its value (an own field that is null or undefined
 * too: undefined is sent as null). Never throws (a document whose field cannot be read counts as sensitive).
 *
 * Source: command logging and monitoring spec, "Security" ("`hello` (or legacy hello) when `speculativeAuthenticate`
 * is present").
 */
export function isSensitiveCommand(name: string, command: Document): boolean {
  if (SENSITIVE_COMMANDS.has(name)) return true;
  if (!HELLO_NAMES.has(name)) return false;
  try {
    return command.speculativeAuthenticate !== undefined || Object.prototype.hasOwnProperty.call(command, 'speculativeAuthenticate');
  } catch {
    return true;
  }
}

/**
 * The failure a sensitive command's CommandFailed event shows for `error`: a server error reduced to its `code`,
 * `codeName` and `errorLabels`; an error about a reply that could not be read (a {@link WireProtocolError}, itself or
 * as the `cause` of a network error), whose message may quote what the reply holds (a regular expression `RegExp`
 * refuses, say), with that detail left out: the same class, `address` and `errorLabels`, no `cause`; any other error
 * (network, timeout) as it is, since it holds nothing the server said.
 *
 * Source: command logging and monitoring spec, "Security" (the reply replaced by `{}`; a server-side error: every
 * field but `code`, `codeName`, `errorLabels` redacted).
 */
export function redactedFailure(error: Error): Error {
  if (error instanceof MongoServerError) {
    return new MongoServerError({
      ok: 0,
      ...(error.code === undefined ? {} : { code: error.code }),
      ...(error.codeName === undefined ? {} : { codeName: error.codeName }),
      ...(error.errorLabels.size === 0 ? {} : { errorLabels: [...error.errorLabels] }),
    });
  }
  if (error instanceof WireProtocolError) return new WireProtocolError(REDACTED_REPLY, { labels: [...error.errorLabels] });
  if (error instanceof MongoNetworkError && readsReply(error.cause)) {
    // "connection 3 to host:port failed: wire-protocol error: <what the reply held>": the part before the detail.
    const at = error.message.indexOf(': wire-protocol error');
    const prefix = at < 0 ? `connection to ${error.address} failed` : error.message.slice(0, at);
    const Network = error.constructor as typeof MongoNetworkError;
    return new Network(error.address, `${prefix}: wire-protocol error: ${REDACTED_REPLY}`, { labels: [...error.errorLabels] });
  }
  return error;
}

/** What a redacted error about a sensitive command's reply says in place of its detail. */
const REDACTED_REPLY = 'the reply of a sensitive command could not be read (the detail, which may quote the reply, is redacted)';

/** Whether `cause`, or an error of its `cause` chain (at most 8 deep), is a {@link WireProtocolError}. */
function readsReply(cause: unknown): boolean {
  for (let depth = 0; depth < 8 && isError(cause); depth++) {
    if (cause instanceof WireProtocolError) return true;
    cause = cause.cause;
  }
  return false;
}
