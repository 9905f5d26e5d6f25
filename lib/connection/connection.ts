/**
 * Connection: one MongoDB connection over a TCP or TLS socket, speaking OP_MSG (optionally inside OP_COMPRESSED),
 * one request at a time.
 *
 * Source: CMAP spec, "Connection" (Single Endpoint, Single Lifetime, Single Track, Perishable: Errored); OP_MSG spec;
 * OP_COMPRESSED spec; handshake spec (what the handshake reply tells about the server); Stable API spec (the declared
 * API fields on every command).
 */
import type { Socket } from 'node:net';
import { deserialize, ObjectId, onDemand, type Document } from 'bson';
import { abortReason, listenToAbort } from '../abort-listeners';
import { AuthenticationError, CommandCancelledError, ConnectionBusyError, InvalidOptionError, MongoNetworkError, MongoNetworkTimeoutError, MongoServerError, refusal } from '../errors';
import { optionValue, requireAbortSignal, requireBoolean, requireMethodOptions, requireTimerDurationMS } from '../options';
import { remainingOf, type Reauthenticate } from '../auth/authenticate';
import type { PoolConnection } from '../pool/contract';
import { isSensitiveCommand, redactedFailure, type CommandEvent, type CommandEventFields, type CommandEventSink } from './command-events';
import { reportUnhandled } from '../pool/report-unhandled';
import { HeldDeadline } from './held-deadline';
import { IoTimeout } from './io-timeout';
import {
  compressMessage,
  compressMessageOnThreadPool,
  decompressMessage,
  decompressMessageOnThreadPool,
  inflatesLarge,
  mayCompress,
  ZLIB_THREAD_POOL_MIN_BYTES,
  type CompressorName,
} from './op-compressed';
import { bsonElements, decodeOpMsg, encodeOpMsg, OpMsgFlag } from './op-msg';
import { serverApiFields, type ServerApi } from './server-api';
import { serverConnectionIdOf } from './server-connection-id';
import { wallClockNow } from '../scheduler';
import {
  DEFAULT_MAX_MESSAGE_SIZE_BYTES,
  effectiveMaxMessageSizeBytes,
  HEADER_LENGTH,
  MessageFramer,
  OpCode,
  WireProtocolError,
  type WireMessage,
} from './wire-protocol';

/**
 * Options of one {@link Connection.command} call. Source: `timeoutMS` an extension (a per-command socketTimeoutMS);
 * `signal` an extension, the official Node.js driver's `signal` option; `exhaustAllowed`, `documentSequences` and
 * `moreToCome` the OP_MSG spec, as each says.
 */
export interface CommandOptions {
  /**
   * Fail the command (and error the connection) if its whole reply has not arrived within this many ms of sending
   * it, however its bytes trickle in (a deadline, not an idle timeout): a number of ms from 0 to 2147483647 (one Node
   * timer); 0 = no limit. Default: the connection's socketTimeoutMS.
   */
  readonly timeoutMS?: number | undefined;
  /**
   * Set the OP_MSG exhaustAllowed flag: the server may answer with a stream of replies, each but the last with the
   * moreToCome flag. After such a reply the connection is {@link Connection.moreToCome}: it sends nothing and takes
   * each further reply with {@link Connection.nextReply}. Without it, a reply with moreToCome is a wire-protocol
   * error. Default false. Source: OP_MSG spec ("exhaustAllowed", "moreToCome"); server monitoring spec, "Streaming
   * hello or legacy hello".
   */
  readonly exhaustAllowed?: boolean | undefined;
  /**
   * Document sequences to send after the command document, each an OP_MSG section of Payload Type 1 whose identifier
   * is its key (the command argument it stands for, such as `documents` of an insert or `updates` of an update, which
   * the command document must then not hold): `{ documents: [doc1, doc2] }`. What bulk writes use, and must when a
   * batch has more than one entry; the documents of a sequence may together reach maxMessageSizeBytes (48 MB), each at
   * most maxBsonObjectSize. An identifier is a non-empty string without NUL characters or unpaired surrogates (it is
   * sent as UTF-8, which has none: two identifiers would become one); each value an array of documents (objects, not
   * arrays), each element read once. Source: OP_MSG spec ("Sections", Payload Type 1; "Bulk writes SHOULD use Payload
   * Type 1, and MUST do so when the batch contains more than one entry").
   */
  readonly documentSequences?: Readonly<Record<string, readonly Document[]>> | undefined;
  /**
   * Send the command with the OP_MSG moreToCome flag (bit 1, 0x2): the server runs it and sends no reply. What an
   * unacknowledged write (w: 0, "fire-and-forget") must use, with the command's `writeConcern` `{ w: 0 }`. Default
   * false.
   *
   * - The promise resolves to `{ ok: 1 }` (a new object each time; what the official Node.js driver returns for it)
   *   once the message is written to the socket (handed to the operating system), not when the server ran it; the
   *   connection is then free for its next command (not {@link Connection.busy}), and may be checked in at once.
   * - The outcome is never known: a write error (a duplicate key, a validation failure) or a command error is dropped
   *   by the server, by design. A server that finds it is no longer primary closes the connection instead: the
   *   connection is then errored, and its next command fails with a {@link MongoNetworkError} (the pool closes it,
   *   as any errored connection); the write, and any sent after it on that connection, may be lost.
   * - A reply the server sends anyway answers nothing: it fails the connection with a {@link MongoNetworkError}
   *   (`cause`: a `WireProtocolError`), the next command's error.
   * - `timeoutMS` (default socketTimeoutMS) bounds the write: a message the socket has not taken within it (a server
   *   that stopped reading) fails the connection with a {@link MongoNetworkTimeoutError}.
   * - Compressed as any command (the flag travels inside OP_COMPRESSED); `documentSequences` are sent as usual (a
   *   bulk write).
   * - Refused with {@link InvalidOptionError} (option `moreToCome`, nothing sent): with `exhaustAllowed` (a request
   *   that wants no reply cannot take a stream of them), and for a command whose `writeConcern` is present and is not
   *   a document with `w: 0` (a number 0), or that has `j` or `fsync` true (a server acknowledges such a write once
   *   it is in the journal, whatever w is): it asks for an acknowledgement that cannot come. Judged on the encoded
   *   command, what the server reads (a getter read once, a `toBSON` applied, own properties only; a BSON Int32,
   *   Double or Long 0 is w: 0). A command without
   *   `writeConcern` is sent as it is (the server applies its default write concern and still replies nothing):
   *   setting `w: 0` on an unacknowledged write is the caller's part of the spec's MUST.
   *
   * Source: OP_MSG spec, "moreToCome On Requests" ("Clients doing unacknowledged writes MUST set the moreToCome flag,
   * and MUST set the writeConcern to w=0") and the Q & A on fire-and-forget.
   */
  readonly moreToCome?: boolean | undefined;
  /**
   * The operation this command is part of, as the caller numbers its operations: an integer from 0 to
   * 2^53 - 1 (-0 is taken as 0). Carried only by the command's events and log messages (`operationId`), so that the
   * commands of one operation (a bulk write's batches, a cursor's getMores) can be linked; nothing is sent. Default:
   * none.
   *
   * Source: command logging and monitoring spec, "Events API" (`operationId`, OPTIONAL), "Bulk Writes" (linked by
   * the same operationId).
   */
  readonly operationId?: number | undefined;
  /**
   * Cancels the command when it aborts (the caller gave up: an HTTP request aborted, a subscriber gone): an
   * AbortSignal (`AbortController.signal`, `AbortSignal.timeout(ms)`, a framework's request signal), or an object of
   * its shape. The command rejects at once with {@link CommandCancelledError}, `cause` the signal's reason:
   *
   * - already aborted when `command` is called: nothing is built, sent or published (no command events), and the
   *   connection stays usable (`sent` false);
   * - aborted before the command was written (while a large one is compressed, or by a CommandStarted subscriber):
   *   nothing is sent, CommandFailed is published, and the connection stays usable (`sent` false);
   * - aborted once it was written (awaiting its reply, or an unacknowledged one being written): CommandFailed is
   *   published (its `failure` the same error), and the connection is closed, as its reply will never be read: it is
   *   {@link Connection.errored} with a {@link MongoNetworkError} saying so, and its pool closes it (reason `error`)
   *   once it is checked in (CMAP, "Connection": an errored connection is perished; "Checking In a Connection": a
   *   perished one is closed). The server may have run the command (`sent` true);
   * - on a MONGODB-OIDC connection, aborted while it is reauthenticated after ReauthenticationRequired (391, the
   *   command not run): the command is not sent again (`sent` false), the token callback's `timeoutContext` aborts,
   *   and the connection, its authentication left half done, is closed;
   * - aborted after the command settled: nothing happens.
   *
   * With `exhaustAllowed`, the signal covers the command until its first reply; each later read of the stream
   * ({@link Connection.nextReply}) takes a `signal` of its own ({@link NextReplyOptions.signal}).
   *
   * One listener of rxcmap's stays on the signal while any command or checkout it governs waits (none once they all
   * settled), whatever their number: a long-lived signal shared by many commands collects no listeners. A signal whose
   * `addEventListener` throws fails the command with that error (nothing sent, no events); one that aborts as it is
   * listened to (a wrapper finding its upstream aborted) cancels it as an aborted one does (nothing sent). Default:
   * none.
   *
   * Source: extension, the official Node.js driver's `signal` option (which rejects with the signal's reason itself,
   * and likewise closes a connection whose reply is awaited); the error's word and `cause` as `checkOut`'s `signal`.
   */
  readonly signal?: AbortSignal | undefined;
}

/**
 * Options of one {@link Connection.nextReply} call. Source: `timeoutMS` an extension (a per-read socketTimeoutMS);
 * `signal` an extension, as {@link CommandOptions.signal}.
 */
export interface NextReplyOptions {
  /**
   * Fail the read (and error the connection) if the next streamed reply has not arrived whole within this many ms of
   * the call: a number of ms from 0 to 2147483647; 0 = no limit. Default: the connection's socketTimeoutMS.
   */
  readonly timeoutMS?: number | undefined;
  /**
   * Cancels the read when it aborts (the caller gave up on the stream: a subscriber of an exhaust cursor gone): an
   * AbortSignal, or an object of its shape, as {@link CommandOptions.signal}. The read rejects at once with
   * {@link CommandCancelledError} (`streamedReply` true, `commandName` the exhaustAllowed command whose stream it
   * reads, `cause` the signal's reason):
   *
   * - already aborted when `nextReply` is called (or as it is listened to): nothing is read (a reply received already
   *   stays for the next read), and the connection is left as it was, still {@link Connection.moreToCome} (`sent`
   *   false);
   * - aborted while the read waits for the next reply: the connection is closed, as the stream's next reply will never
   *   be read: it is {@link Connection.errored} with a {@link MongoNetworkError} saying so, and its pool closes it
   *   (reason `error`) once it is checked in, as for a command cancelled once sent (`sent` true);
   * - aborted after the read settled: nothing happens.
   *
   * The signal covers this one read: the exhaustAllowed command's own `signal` does not cover the reads after it. One
   * listener of rxcmap's stays on the signal while any read, command or checkout it governs waits (none once they all
   * settled). A signal whose `addEventListener` throws fails the read with that error (nothing read, the connection as
   * it was). Default: none.
   *
   * Source: extension, as {@link CommandOptions.signal}.
   */
  readonly signal?: AbortSignal | undefined;
}

/** The keys of {@link CommandOptions}, and those of {@link NextReplyOptions}, which `nextReply` takes. */
const COMMAND_OPTION_NAMES = ['timeoutMS', 'exhaustAllowed', 'documentSequences', 'moreToCome', 'operationId', 'signal'] as const satisfies readonly (keyof CommandOptions)[];
const NEXT_REPLY_OPTION_NAMES = ['timeoutMS', 'signal'] as const satisfies readonly (keyof NextReplyOptions)[];

/**
 * The checked options of `command` or `nextReply` (`method`): `timeoutMS` undefined for the connection's
 * socketTimeoutMS.
 *
 * @throws {InvalidOptionError} as {@link Connection.command} says.
 */
function commandOptions(
  method: string,
  options: unknown,
  names: readonly string[],
): { timeoutMS: number | undefined; exhaustAllowed: boolean; moreToCome: boolean; operationId: number | undefined; signal: AbortSignal | undefined } {
  requireMethodOptions(method, options, names);
  const signal = names.includes('signal') ? requireAbortSignal('signal', optionValue(options as CommandOptions | undefined, 'signal')) : undefined;
  const operationId = names.includes('operationId') ? requireOperationId(optionValue(options as CommandOptions | undefined, 'operationId')) : undefined;
  const given = optionValue(options as CommandOptions | undefined, 'timeoutMS');
  const timeoutMS = given === undefined ? undefined : requireTimerDurationMS('timeoutMS', given);
  const flag = (name: 'exhaustAllowed' | 'moreToCome'): boolean =>
    names.includes(name) && requireBoolean(name, optionValue(options as CommandOptions | undefined, name)) === true;
  const exhaustAllowed = flag('exhaustAllowed');
  const moreToCome = flag('moreToCome');
  if (moreToCome && exhaustAllowed) {
    throw new InvalidOptionError('moreToCome', true, 'false when exhaustAllowed is true', {
      message: 'Invalid moreToCome: a request with moreToCome gets no reply, so it cannot set exhaustAllowed (a stream of replies) too',
    });
  }
  return { timeoutMS, exhaustAllowed, moreToCome, operationId, signal };
}

/**
 * `value` checked as an `operationId` option (see {@link CommandOptions.operationId}): undefined, or an integer from 0
 * to 2^53 - 1, returned as that number; -0 is the ID 0 and is returned as 0 (an Int64 has no -0, and the events would
 * otherwise carry a value that `Object.is` and deep equality tell from 0, and that `util.inspect` writes as `-0`).
 * Used by `Connection.command`, `Client.command` and `Client.selectPool`.
 *
 * Source: command logging and monitoring spec, "Events API" (`operationId`, an Int64); server selection spec,
 * "Logging" (`operationId`, an Int).
 *
 * @throws {InvalidOptionError} (option `operationId`) for any other value.
 */
export function requireOperationId(value: unknown): number | undefined {
  if (value === undefined) return undefined;
  if (!(Number.isSafeInteger(value) && (value as number) >= 0)) {
    throw new InvalidOptionError('operationId', value, 'an integer from 0 to 2^53 - 1');
  }
  // -0 + 0 is +0; every other integer is unchanged.
  return (value as number) + 0;
}

/** Where an encoded OP_MSG's body section (kind 0) starts: after the header, the flag bits and the kind byte. */
const OP_MSG_BODY_OFFSET = HEADER_LENGTH + 4 + 1;

/**
 * Refuses a `command` sent with moreToCome whose `writeConcern` asks for an acknowledgement: one that is present and
 * is not a document with `w: 0` (the number), or has `j` or `fsync` true. Judged on `message`, the encoded OP_MSG
 * (body first), so on what the server will read: a getter or Proxy read once, a `toBSON` applied, only own enumerable
 * properties, a BSON Int32, Double or Long 0 as the number 0. See {@link CommandOptions.moreToCome}.
 *
 * @throws {InvalidOptionError} (option `moreToCome`).
 */
function requireUnacknowledged(message: Buffer): void {
  let found: { type: number; offset: number; length: number } | undefined;
  for (const [type, nameOffset, nameLength, offset, length] of onDemand.parseToElements(message, OP_MSG_BODY_OFFSET)) {
    if (nameLength === WRITE_CONCERN.length && message.toString('utf8', nameOffset, nameOffset + nameLength) === WRITE_CONCERN) {
      found = { type, offset, length };
    }
  }
  if (found === undefined) return;
  const writeConcern: Document | undefined = found.type === BSON_DOCUMENT ? deserialize(message.subarray(found.offset, found.offset + found.length)) : undefined;
  const w: unknown = writeConcern?.w;
  // A server waits for the journal for j: true (fsync: true) whatever w is, and acknowledges once it is written.
  const journaled = (['j', 'fsync'] as const).find((key) => isTrue(writeConcern?.[key]));
  if (w === 0 && journaled !== undefined) {
    throw new InvalidOptionError('moreToCome', true, 'false unless the command has no writeConcern or one with w: 0 without j or fsync true', {
      message: `Invalid moreToCome: the command's writeConcern has w: 0 with ${journaled}: true, which asks for an acknowledgement once the write is in the journal (j prevails over w: 0 on the server), and no reply will bring it; an unacknowledged write must have writeConcern w: 0 alone (OP_MSG spec, "moreToCome On Requests")`,
    });
  }
  if (w === 0) return;
  const shown = writeConcern === undefined ? 'no document' : w === undefined ? 'no w (the default, w: 1)' : `w: ${typeof w === 'string' ? JSON.stringify(w) : String(w)}`;
  throw new InvalidOptionError('moreToCome', true, 'false unless the command has no writeConcern or one with w: 0', {
    message: `Invalid moreToCome: the command's writeConcern has ${shown}, which asks for an acknowledgement no reply will bring; an unacknowledged write must have writeConcern w: 0 (OP_MSG spec, "moreToCome On Requests")`,
  });
}

/** Whether a writeConcern's `j` or `fsync` value asks for it, as the server reads one: true, or a number other than 0. */
function isTrue(value: unknown): boolean {
  return value === true || (typeof value === 'number' && value !== 0 && !Number.isNaN(value));
}

/** The BSON type of an embedded document, and the body field {@link requireUnacknowledged} reads. */
const BSON_DOCUMENT = 3;
const WRITE_CONCERN = 'writeConcern';

/** What {@link CommandOptions.documentSequences} must be. */
const DOCUMENT_SEQUENCES_ALLOWED =
  'an object of document sequences: each key a non-empty identifier without NUL or unpaired surrogate that the command document does not hold, each value an array of documents';

/** An unpaired UTF-16 surrogate: UTF-8 has no encoding for it, and sends U+FFFD in its place. */
const UNPAIRED_SURROGATE = /\p{Cs}/u;

/**
 * The checked `documentSequences` of `command` (see {@link CommandOptions.documentSequences}), in their order;
 * undefined when none are given. Each array's elements are read once, by index, into a new array: the documents
 * checked are the documents encoded.
 *
 * @throws {InvalidOptionError} (option `documentSequences`) for a value that is not a plain object, an identifier that
 *   is empty, holds a NUL character or an unpaired surrogate, is `$db` or a key of `command`, or a value that is not an
 *   array of documents (a hole in the array included; the message names the element).
 */
function documentSequences(given: unknown, command: Document): Map<string, readonly Document[]> | undefined {
  if (given === undefined) return undefined;
  const proto: unknown = given !== null && typeof given === 'object' ? Object.getPrototypeOf(given) : undefined;
  // Named by its kind, never shown: a value of documents could be megabytes.
  if (proto !== Object.prototype && proto !== null) {
    throw new InvalidOptionError('documentSequences', given !== null && typeof given === 'object' ? Object.prototype.toString.call(given) : given, DOCUMENT_SEQUENCES_ALLOWED);
  }
  const sequences = new Map<string, readonly Document[]>();
  const refuse = (identifier: string, what: string): InvalidOptionError =>
    new InvalidOptionError('documentSequences', identifier, DOCUMENT_SEQUENCES_ALLOWED, { message: `Invalid documentSequences: ${what} (documentSequences must be ${DOCUMENT_SEQUENCES_ALLOWED})` });
  for (const [identifier, documents] of Object.entries(given as Record<string, unknown>)) {
    const taken = identifier === '$db' || Object.hasOwn(command, identifier);
    const notSequence = `its entry ${JSON.stringify(identifier)} is not an identifier with an array of documents`;
    if (taken) throw refuse(identifier, `its identifier ${JSON.stringify(identifier)} is also a key of the command document`);
    // The identifier goes as UTF-8: with an unpaired surrogate it would name another sequence (two of them, the same).
    if (identifier === '' || identifier.includes('\0') || UNPAIRED_SURROGATE.test(identifier) || !Array.isArray(documents)) throw refuse(identifier, notSequence);
    // Each element read once, by index (a hole reads as undefined): the documents checked are the documents encoded.
    const length = documents.length;
    const checked: Document[] = [];
    for (let i = 0; i < length; i++) {
      const d: unknown = documents[i];
      if (d === null || typeof d !== 'object' || Array.isArray(d)) throw refuse(identifier, `${notSequence}: its element ${i} is missing or not a document`);
      checked.push(d as Document);
    }
    sequences.set(identifier, checked);
  }
  return sequences;
}

/**
 * The most streamed replies (moreToCome) a connection keeps received and not yet read with
 * {@link Connection.nextReply}: 16. One more fails the connection with a wire-protocol error, so a server streaming
 * faster than the client reads cannot make it hold an unbounded backlog.
 *
 * Source: extension (bounds the memory of the OP_MSG spec's exhaust stream).
 */
export const MAX_UNREAD_STREAMED_REPLIES = 16;

/** Identity and settings of a connection, from the pool and the factory. */
export interface ConnectionInit {
  /** The pool-assigned id. */
  readonly id: number;
  /** The pool generation at creation. */
  readonly generation: number;
  /** The Endpoint, `host:port`. */
  readonly address: string;
  /** Default reply timeout of every command, in ms (0 = none). */
  readonly socketTimeoutMS?: number;
  /** zlib level for compressed messages, -1 (zlib's default) to 9. */
  readonly zlibCompressionLevel?: number;
  /**
   * The compressors offered in the handshake. The OP_COMPRESSED spec lets the server compress its handshake reply
   * with one of them; until the handshake reply is applied, an OP_COMPRESSED using another is refused. Default: none
   * (a compressed handshake reply is refused).
   */
  readonly offeredCompressors?: readonly CompressorName[];
  /**
   * The declared Stable API version, already checked (`checkServerApi`): every command of the connection carries its
   * fields. Default: none (no API field is sent).
   */
  readonly serverApi?: ServerApi | undefined;
}

/**
 * What the handshake reply tells about the server, as recorded on the connection (`connection.server`; the topology's
 * description of a server, which its monitor's checks update, is `ServerDescription`). A limit the reply lacks, or gives
 * as anything but a positive integer (0, a negative number, a fraction such as 0.5, NaN, Infinity, a number beyond
 * 2^53, a string), keeps its default, shown in parentheses.
 *
 * Source: handshake spec, "Connection handshake" (the fields of the server's `hello` / legacy hello reply); load
 * balancer spec, "Connection Establishment" (`serviceId`).
 */
export interface HandshakeDescription {
  /** The highest wire protocol version the server speaks (`maxWireVersion`; 0). */
  readonly maxWireVersion: number;
  /** The lowest wire protocol version the server speaks (`minWireVersion`; 0). */
  readonly minWireVersion: number;
  /** The largest BSON document the server accepts, in bytes (`maxBsonObjectSize`; 16 MiB). */
  readonly maxBsonObjectSize: number;
  /**
   * The largest wire message exchanged, in bytes: the reply's `maxMessageSizeBytes` bounded to 16,777,216..48,000,000
   * (absent or not a positive integer: 48000000; see `effectiveMaxMessageSizeBytes`). The client never accepts more,
   * whatever the server announces: a reply (or a decompressed reply) announcing a larger length fails its command
   * with a {@link MongoNetworkError} naming maxMessageSizeBytes and the limit, before its bytes are read.
   */
  readonly maxMessageSizeBytes: number;
  /** The most write operations the server accepts in one batch (`maxWriteBatchSize`; 100000). */
  readonly maxWriteBatchSize: number;
  /**
   * The server's id for this connection (`connectionId` in the reply): a non-negative integer up to 2^53 - 1; absent
   * when the reply has none or one no server sends (see `serverConnectionIdOf`).
   */
  readonly serverConnectionId: number | undefined;
  /** The service behind a load balancer (`serviceId` in the reply), in load-balanced mode. */
  readonly serviceId: ObjectId | undefined;
  /** Whether the server accepts `hello` (it answered `helloOk: true`). */
  readonly helloOk: boolean;
}

/** What a request in flight is: its id, and how it was sent. */
type OutgoingRequest = Pick<InFlight, 'requestId' | 'exhaustAllowed' | 'unacknowledged'>;

interface InFlight {
  readonly requestId: number;
  readonly resolve: (doc: Document) => void;
  readonly reject: (error: Error) => void;
  /** Whether the request set exhaustAllowed (or this is the read of a streamed reply): moreToCome is allowed. */
  readonly exhaustAllowed: boolean;
  /**
   * Whether the request was sent with moreToCome: it is settled with `{ ok: 1 }` once written, and any byte received
   * meanwhile is a reply nobody awaits.
   */
  readonly unacknowledged: boolean;
  timer: IoTimeout | undefined;
  /**
   * Whether the request was sent (a read of a stream: at once): a reply can answer it only then. False while a large
   * command is compressed.
   */
  sent: boolean;
  /** The promise `resolve` and `reject` settle. */
  readonly reply: Promise<Document>;
  /** Stops listening to the command's `signal`: called as the request settles. */
  stopListening: (() => void) | undefined;
}

let nextRequestId = 1;

/** A fresh wire-protocol request id (positive int32, wrapping). */
export function newRequestId(): number {
  const id = nextRequestId;
  nextRequestId = nextRequestId >= 0x7fffffff ? 1 : nextRequestId + 1;
  return id;
}

/** ReauthenticationRequired: the server's code for a command that needs the connection reauthenticated first. */
const REAUTHENTICATION_REQUIRED = 391;

/**
 * A MongoDB connection. The connection factory ({@link connectionFactory}) creates it on a connected socket, runs
 * the handshake and authentication through it, and hands it to the pool; a caller then uses it while it is checked
 * out. Users never construct one.
 *
 * Source: CMAP spec, "Connection" (Single Endpoint, Single Lifetime, Single Track, Monotonically Increasing ID,
 * Perishable: Errored); OP_MSG spec; OP_COMPRESSED spec (the commands sent uncompressed); handshake spec (what the
 * handshake reply tells about the server); Stable API spec, "Sending Declared API Version to the Server" (see
 * {@link Connection.serverApi}).
 */
export class Connection implements PoolConnection {
  /** The pool-assigned id (CMAP "Monotonically Increasing ID"). */
  readonly id: number;
  /** The pool generation at creation. */
  readonly generation: number;
  /** The Endpoint, `host:port`. */
  readonly address: string;
  /**
   * The handshake reply (`hello` / legacy hello), once the handshake is done: as the server sent it, but for its
   * `speculativeAuthenticate` (the authentication's, not kept) and any quotation of a MONGODB-OIDC access token sent
   * speculatively (`<access token not shown>`).
   */
  hello: Readonly<Document> = {};
  /** The server's limits and identity, from the handshake. */
  server: HandshakeDescription = {
    maxWireVersion: 0,
    minWireVersion: 0,
    maxBsonObjectSize: 16 * 1024 * 1024,
    maxMessageSizeBytes: DEFAULT_MAX_MESSAGE_SIZE_BYTES,
    maxWriteBatchSize: 100_000,
    serverConnectionId: undefined,
    serviceId: undefined,
    helloOk: false,
  };
  /** The compressor negotiated in the handshake, if any. */
  compressor: CompressorName | undefined;
  /**
   * How long the handshake's `hello` (or legacy hello) took, in ms, from sending it to its reply: one round trip to
   * the server, without the socket connect and TLS handshake before it or the authentication after it. Undefined
   * until the factory records it (a connection of another factory may never have it). Set by the factory.
   *
   * Source: server monitoring spec, "Measuring RTT" ("the hello or legacy hello duration of the initial connection
   * handshake").
   */
  handshakeDurationMS: number | undefined;
  /**
   * How this connection reauthenticates when a command fails with ReauthenticationRequired (391): set by
   * establishment for a mechanism that supports it (MONGODB-OIDC); undefined otherwise, and then {@link command}
   * does nothing more than send. Set by establishment only.
   *
   * Source: auth spec, "Reauthentication".
   * @internal
   */
  reauthenticate: Reauthenticate | undefined;
  /**
   * Where the application's commands on this connection publish their command events (CommandStarted, then
   * CommandSucceeded or CommandFailed): set by the connection factory once the connection is established, so that the
   * handshake's and authentication's commands never are; a monitoring connection has none. Nothing is built while it
   * is not `observed`. Reauthentication's own commands (MONGODB-OIDC after a 391) publish none either.
   *
   * Source: command logging and monitoring spec ("Events API"; log messages MUST NOT be emitted for the handshake or
   * heartbeats).
   */
  commandEvents: CommandEventSink | undefined;
  /**
   * The Stable API version this connection declares (frozen), or undefined when none is declared. With one, every
   * command it sends carries `apiVersion` (and `apiStrict` / `apiDeprecationErrors` when given), and monitoring uses
   * `hello`.
   *
   * Source: Stable API spec, "Sending Declared API Version to the Server", "Handshake behavior".
   */
  readonly serverApi: ServerApi | undefined;

  /** The command fields of {@link serverApi}, as BSON elements appended to every command, or undefined when none is declared. */
  private readonly apiElements: Uint8Array | undefined;
  private erroredBy: Error | undefined;
  /** Bytes read from the socket so far (how a timeout sees a reply still being read), as the establishment's sees them. */
  private readonly bytesReceived = (): number => this.socket.bytesRead;
  private destroyed = false;
  private inFlight: InFlight | undefined;
  /** While the server streams replies (the last one had moreToCome): the `responseTo` its next reply carries. */
  private streamResponseTo: number | undefined;
  /** The name of the last exhaustAllowed command sent: the command whose stream {@link nextReply} reads. */
  private streamCommandName = '';
  /** Streamed replies received and not yet read with {@link nextReply}, in order. */
  private readonly unread: Document[] = [];
  private framer = new MessageFramer(DEFAULT_MAX_MESSAGE_SIZE_BYTES);
  /**
   * Messages received and not yet read: those that came while one was being inflated (the socket is not read
   * meanwhile, so they are at most the rest of the chunk that completed it).
   */
  private readonly received: WireMessage[] = [];
  /** The inflation of a large compressed reply on the thread pool, while it runs. */
  private inflating: Promise<void> | undefined;
  /** The error of the socket, or of the peer's close, met while a reply was inflated: the connection fails with it next. */
  private lostWith: Error | undefined;
  /** The compressors offered in the handshake (`ConnectionInit.offeredCompressors`). */
  private readonly offeredCompressors: readonly CompressorName[];
  /** The compressors an OP_COMPRESSED reply may use: the offered ones until the handshake, then the negotiated one. */
  private acceptedCompressors: readonly CompressorName[];
  /** Whether {@link applyHandshake} recorded the handshake reply: until then the compressors were only offered. */
  private handshaken = false;
  private readonly socketTimeoutMS: number;
  private readonly zlibCompressionLevel: number;

  /**
   * Wraps a connected socket. Called by the connection factory only.
   *
   * @internal
   */
  constructor(
    private readonly socket: Socket,
    init: ConnectionInit,
  ) {
    this.id = init.id;
    this.generation = init.generation;
    this.address = init.address;
    this.socketTimeoutMS = init.socketTimeoutMS ?? 0;
    this.zlibCompressionLevel = init.zlibCompressionLevel ?? -1;
    this.offeredCompressors = init.offeredCompressors ?? [];
    this.acceptedCompressors = this.offeredCompressors;
    this.serverApi = init.serverApi;
    this.apiElements = init.serverApi === undefined ? undefined : bsonElements(serverApiFields(init.serverApi));
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', (error) => this.lost(this.networkError(error.message, error)));
    const closed = (): void => this.lost(this.networkError('closed by the server or the network'));
    // The peer's FIN: no reply can come any more. The socket closes only a moment later (or never, on a socket that
    // allows half-open connections), and until then an idle connection must already count as errored, so that the
    // pool closes it rather than hand it out. Every byte received before the FIN was delivered before 'end'.
    socket.on('end', closed);
    socket.on('close', closed);
  }

  /** The service behind a load balancer, as a hex string (from the handshake's `serviceId`). */
  get serviceId(): string | undefined {
    return this.server.serviceId?.toHexString();
  }

  /**
   * True while a request is in flight (a connection carries one at a time), and while {@link moreToCome}: the server
   * still streams replies to a request, so nothing else may be sent.
   */
  get busy(): boolean {
    return this.inFlight !== undefined || this.moreToCome;
  }

  /**
   * True while replies to an exhaustAllowed request remain to be read: the last reply had the moreToCome flag (the
   * server goes on streaming), or streamed replies were received and not yet read with {@link nextReply}. Such a
   * connection takes no command (ConnectionBusyError) until the stream ends with a reply without moreToCome.
   *
   * Source: OP_MSG spec ("moreToCome"); server monitoring spec, "Streaming hello or legacy hello".
   */
  get moreToCome(): boolean {
    return this.streamResponseTo !== undefined || this.unread.length > 0;
  }

  /**
   * True once the connection met a network error, timeout or wire-protocol error, or was destroyed; also as soon as
   * the peer ended or closed the socket, whether or not a request was in flight (when a reply received before is
   * still being inflated on the thread pool, once it and those received behind it are read), and as soon as a byte
   * arrives with no request in flight, or before the one in flight was sent (a large command being compressed): a
   * reply nobody asked for (the error is a {@link MongoNetworkError} whose `cause`, a
   * `WireProtocolError`, says "received N bytes with no request in flight"; nothing of it is kept) (CMAP
   * "Perishable: Errored").
   */
  get errored(): boolean {
    return this.erroredBy !== undefined || this.destroyed;
  }

  /** The error that made the connection errored, if any. */
  get error(): Error | undefined {
    return this.erroredBy;
  }

  /**
   * Records the handshake reply: the server's limits and identity, and the negotiated compressor (the first of
   * `offeredCompressors`, by default those of `ConnectionInit`, that the reply's `compression` list holds). From then on
   * a reply is accepted up to `server.maxMessageSizeBytes` (at most 48,000,000 bytes), and an OP_COMPRESSED reply
   * only with the negotiated compressor or noop (none negotiated: every OP_COMPRESSED reply fails its command).
   * `reply` becomes {@link hello} as given: the factory passes it without its `speculativeAuthenticate` and any quoted
   * access token (see `keptHelloReply`). Called by the factory.
   *
   * Source: handshake spec, "Connection handshake"; OP_COMPRESSED spec, "MongoDB Handshake Amendment".
   */
  applyHandshake(reply: Document, offeredCompressors: readonly CompressorName[] = this.offeredCompressors): void {
    this.hello = reply;
    this.handshaken = true;
    // The reply's limits are int32s: a double that is not a positive integer (0.5, Infinity, NaN) is no limit at all.
    const num = (v: unknown, fallback: number): number => (Number.isSafeInteger(v) && (v as number) > 0 ? (v as number) : fallback);
    this.server = {
      maxWireVersion: num(reply.maxWireVersion, 0),
      minWireVersion: num(reply.minWireVersion, 0),
      maxBsonObjectSize: num(reply.maxBsonObjectSize, 16 * 1024 * 1024),
      maxMessageSizeBytes: effectiveMaxMessageSizeBytes(reply.maxMessageSizeBytes),
      maxWriteBatchSize: num(reply.maxWriteBatchSize, 100_000),
      // An int64: only a non-negative integer a number holds exactly (NaN, Infinity, 1.5 or -1 count as none).
      serverConnectionId: serverConnectionIdOf(reply.connectionId),
      // Only an ObjectId is a serviceId (load balancer spec); anything else counts as none.
      serviceId: reply.serviceId instanceof ObjectId ? reply.serviceId : undefined,
      helloOk: reply.helloOk === true,
    };
    this.framer = new MessageFramer(this.server.maxMessageSizeBytes);
    const agreed: unknown[] = Array.isArray(reply.compression) ? reply.compression : [];
    // OP_COMPRESSED spec: the first of the client's list that the server lists, whatever the server's order.
    this.compressor = offeredCompressors.find((c) => agreed.includes(c));
    this.acceptedCompressors = this.compressor === undefined ? [] : [this.compressor];
  }

  /**
   * Runs one command on database `db` and resolves to the reply document. Compressed when a compressor was
   * negotiated, except for the commands the OP_COMPRESSED spec keeps uncompressed (handshake, authentication) and a
   * command whose compressed message would be longer than maxMessageSizeBytes (data that does not compress, near the
   * limit), which is sent uncompressed (OP_MSG spec: no message may exceed maxMessageSizeBytes). A command of 64 KiB
   * or more (`ZLIB_THREAD_POOL_MIN_BYTES`) is compressed on Node's thread pool, so the event loop is not held
   * meanwhile: the connection is busy from the call, and the command is sent once it is compressed. A `timeoutMS`
   * given bounds that wait too (the pool's threads may all be busy with DNS lookups, file reads, crypto or other zlib
   * work): when it runs out first, the command fails with a MongoNetworkTimeoutError saying nothing was sent (the
   * connection errored, as by any timeout), and otherwise what is left of it bounds the write and the reply. Without
   * one, socketTimeoutMS starts when the message is sent. Likewise a compressed reply announcing 64 KiB or more, or
   * carrying 64 KiB or more of compressed data, is decompressed on the thread pool; its `timeoutMS` is met once it has
   * arrived whole, and messages received meanwhile are read after it, in order. With
   * {@link CommandOptions.moreToCome} (an unacknowledged write) no reply is awaited: it resolves to `{ ok: 1 }` once the
   * message is written, and the errors below that come from a reply cannot occur.
   *
   * With a declared Stable API version ({@link serverApi}), the message carries `apiVersion` (and `apiStrict` /
   * `apiDeprecationErrors` when declared) after the command's own fields and `$db`, whatever the command (getMore and
   * transaction commands included), encoded once for the connection; `command` itself is never changed. The command
   * document is not inspected: putting `apiVersion`, `apiStrict` or `apiDeprecationErrors` in it as well is not
   * supported, and the behaviour is then undefined (today both are sent, the command's first, and the server may
   * refuse the command). Without a declared version no API field is added, and nothing else is done.
   *
   * While its {@link commandEvents} are observed, the command publishes CommandStarted once its message is built, then
   * CommandSucceeded or CommandFailed with the same `requestId` (and the caller's `operationId`); a command refused
   * before its message is built publishes nothing.
   *
   * @throws {InvalidOptionError} (rejection, option `db`) when `db` is not a non-empty string without NUL characters
   *   (it is the command's `$db`, which the OP_MSG spec requires); nothing is sent and the connection stays usable.
   * @throws {InvalidOptionError} (rejection) when `command` is not a document (option `command`), or for options that
   *   are not an object (option `command options`), a key that is not a {@link CommandOptions} key (named, with the
   *   closest one), a `timeoutMS` that is not a number of ms from 0 to 2147483647 (what one Node timer holds; a longer
   *   one would fire after 1 ms), an `operationId` that is not an integer from 0 to 2^53 - 1, an `exhaustAllowed` or
   *   `moreToCome` that is not a boolean, `moreToCome` with
   *   `exhaustAllowed` or with a `writeConcern` that asks for an acknowledgement (not w: 0, or `j` or `fsync` true;
   *   option `moreToCome`, see
   *   {@link CommandOptions.moreToCome}), or `documentSequences` that are not what
   *   {@link CommandOptions.documentSequences} says (option `documentSequences`: not a plain object, an identifier
   *   that is empty, holds a NUL or an unpaired surrogate, or is `$db` or a key of `command`, or a value that is not an
   *   array of documents; the message names the entry, and the element); nothing is sent and the connection stays
   *   usable.
   * @throws what reading `command` throws (rejection; a revoked Proxy's TypeError, say): nothing is sent and the
   *   connection stays usable.
   * @throws {ConnectionBusyError} (rejection) when another command is in flight on this connection.
   * @throws {AuthenticationError} (rejection) on a MONGODB-OIDC connection whose command failed with
   *   ReauthenticationRequired (391), when the reauthentication fails, or its wait for a token outlasts `timeoutMS`
   *   (default socketTimeoutMS; 0: the token source's own 60000 ms); the callback's `timeoutMS` is what is left of it.
   *   A human callback (OIDC_HUMAN_CALLBACK) is not bounded by it: it has its 5 minutes, `timeoutMS` held meanwhile.
   * @throws {MongoServerError} (rejection) when the reply has `ok: 0`; the connection stays usable. A value of it that
   *   cannot be read as JavaScript is read leniently: a string that is not valid UTF-8 (an `errmsg` cut inside a
   *   character, say) with U+FFFD in place of each bad sequence, every regular expression as a `BSONRegExp` when one
   *   of them is one `RegExp` refuses.
   * @throws {WireProtocolError} (rejection) when the reply has `ok: 1` and its BSON is whole but holds a value that
   *   cannot be read as JavaScript (a document stored so): a string that is not valid UTF-8, or a regular expression
   *   `RegExp` refuses (PCRE syntax such as `(?i)` or `a++`); the message quotes what was refused. It cannot be
   *   returned, and the connection stays usable.
   * @throws {WireProtocolError} (rejection) when the command cannot be sent: its document is larger than the
   *   handshake's maxBsonObjectSize + 16 KiB, a document of its sequences larger than maxBsonObjectSize, its OP_MSG
   *   (every section) larger than maxMessageSizeBytes (the message names the size and the limit), or its document or
   *   one of its sequences (named, `document <i> of sequence <identifier>`) cannot be encoded as BSON (a cycle, say;
   *   `cause`: the BSON library's error). Nothing is sent and the connection stays usable.
   * @throws {MongoNetworkError} (rejection) on a socket error or close, a malformed reply (bad length, over
   *   maxMessageSizeBytes, unknown opcode, invalid BSON other than a value that cannot be read as JavaScript, an
   *   OP_COMPRESSED with a compressor that was not negotiated or that inflates beyond its announced size, an OP_MSG
   *   with the moreToCome flag set when the request did not set `exhaustAllowed`, or with `ok: 0`), a reply to
   *   another request, or bytes received while a request with `moreToCome` is being written (it gets no reply); for
   *   a malformed reply its `cause` is the `WireProtocolError` saying what is wrong; {@link MongoNetworkTimeoutError}
   *   when `timeoutMS` (default socketTimeoutMS) elapses (with `moreToCome`: before the socket took the message).
   *   Both leave the connection errored.
   * @throws the error the connection was destroyed with while the command was in flight (rejection): from its pool,
   *   `PoolClearedError` for a clear with `interruptInUseConnections`, `PoolClosedError` at a drain's deadline.
   * @throws {CommandCancelledError} (rejection) when `signal` aborts before the command settled, or was aborted
   *   already (`cause`: the signal's reason): nothing sent and the connection usable when `sent` is false; the
   *   connection closed when `sent` is true (see {@link CommandOptions.signal}). On a MONGODB-OIDC connection, after
   *   ReauthenticationRequired (391, the command not run): aborted as the 391 came, nothing more is sent and the
   *   connection stays usable; aborted during the reauthentication, the command is not sent again (`sent` false), the
   *   token callback's `timeoutContext` aborts, and the connection, its authentication left half done, is closed.
   * @throws {InvalidOptionError} (rejection, option `signal`) for a `signal` that is not an AbortSignal (by its shape:
   *   a boolean `aborted`, `addEventListener` and `removeEventListener`); nothing is sent and the connection stays
   *   usable.
   * @throws what a `signal` throws (rejection) when its `addEventListener` (or its `aborted` getter, once the options
   *   are checked) throws: that Error, or an Error saying the signal refused a listener, the value its `cause`. Nothing
   *   is sent (on a MONGODB-OIDC connection after ReauthenticationRequired: the reauthentication does not start), no
   *   events are published, and the connection stays usable.
   */
  command(db: string, command: Document, options: CommandOptions = {}): Promise<Document> {
    const reply = this.commandOnce(db, command, options, this.commandEvents);
    // Only a connection whose mechanism reauthenticates (MONGODB-OIDC) looks at its failures here.
    return this.reauthenticate === undefined ? reply : this.reauthenticatingOn(reply, db, command, options);
  }

  /**
   * `reply`, or, when it fails with ReauthenticationRequired (391), the connection's reauthentication (SASL only, no
   * hello) followed by one more attempt of the command, whatever its kind (retryable or not). An error of either is
   * the command's. Not for a `moreToCome` command (no reply to fail) or an `exhaustAllowed` one (its stream is the
   * caller's). The command's `timeoutMS` (default socketTimeoutMS; 0: none) also bounds the reauthentication's wait for
   * a token (its callback's `timeoutContext` aborts): an AuthenticationError once it elapses.
   *
   * Source: auth spec, "Reauthentication" (MUST reauthenticate and re-attempt the operation, irrespective of whether
   * it is retryable; MUST NOT resend a hello; errors of either raised to the user).
   */
  private async reauthenticatingOn(reply: Promise<Document>, db: string, command: Document, options: CommandOptions): Promise<Document> {
    try {
      return await reply;
    } catch (error) {
      const reauthenticate = this.reauthenticate;
      if (!(error instanceof MongoServerError) || error.code !== REAUTHENTICATION_REQUIRED || reauthenticate === undefined) throw error;
      if (optionValue(options, 'moreToCome') === true || optionValue(options, 'exhaustAllowed') === true) throw error;
      // The command's timeoutMS (default socketTimeoutMS) bounds the token source too, not only each round trip:
      // a callback that hangs must not hold the command for the source's own 60000 ms.
      const timeoutMS = optionValue(options, 'timeoutMS') ?? this.socketTimeoutMS;
      const deadline = new AbortController();
      // What is left of it bounds the callback's timeoutMS (0: no deadline, the callback's 60000 ms).
      const remainingMS = remainingOf(timeoutMS);
      // MONGODB-OIDC's human callback (a person signing in) is not subject to the command's timeoutMS (auth spec, "OIDC
      // Human Callback"): the deadline is held while it runs, and resumes with what it had left.
      const held = new HeldDeadline((delayMS) => {
        const timer = setTimeout(() => deadline.abort(new AuthenticationError(`reauthenticating connection ${this.id} to ${this.address} did not finish within the command's timeoutMS (${timeoutMS} ms)`)), delayMS);
        return { clear: () => clearTimeout(timer) };
      }, timeoutMS);
      const signal = optionValue(options, 'signal');
      const cancelled = (): CommandCancelledError => new CommandCancelledError(this.address, this.id, commandNameOf(command), false, abortReason(signal!));
      // The signal aborted as the 391 came: nothing more is sent, and the connection is reauthenticated by its next
      // command.
      if (signal?.aborted === true) throw cancelled();
      let stopListening: (() => void) | undefined;
      let cancelReauthentication!: (error: Error) => void;
      // Rejects as the signal aborts during the reauthentication: the command fails at once, and the connection, whose
      // authentication is left half done (a SASL reply unread, or a token awaited), is closed, never reused.
      const reauthenticationCancelled = new Promise<never>((_resolve, reject) => (cancelReauthentication = reject));
      if (signal !== undefined) {
        try {
          stopListening = listenToAbort(signal, () => {
            const error = cancelled();
            cancelReauthentication(error);
            deadline.abort(error);
            this.fail(this.networkError(`was closed: its command ${error.commandName} was cancelled while the connection was reauthenticated`));
          });
        } catch (refused) {
          // The signal refused a listener: the reauthentication could not be cancelled, so it does not start.
          throw signalRefused(refused);
        }
      }
      try {
        const reauthenticated = reauthenticate((authDb, authCommand) => this.commandOnce(authDb, authCommand, { timeoutMS: optionValue(options, 'timeoutMS') }, undefined), deadline.signal, remainingMS, held.hold);
        await (stopListening === undefined ? reauthenticated : Promise.race([reauthenticated, reauthenticationCancelled]));
      } finally {
        held.end();
        stopListening?.();
      }
      return this.commandOnce(db, command, options, this.commandEvents);
    }
  }

  /** {@link command}, without reauthentication; its command events go to `events` (none when undefined). */
  private commandOnce(db: string, command: Document, options: CommandOptions, events: CommandEventSink | undefined): Promise<Document> {
    if (this.errored) return Promise.reject(this.erroredBy ?? this.networkError('is closed'));
    if (this.busy) return Promise.reject(new ConnectionBusyError(this.address, this.id));
    // OP_MSG spec, "Global Command Arguments": $db MUST be provided and be a valid database name.
    if (typeof db !== 'string' || db === '' || db.includes('\0')) {
      return Promise.reject(new InvalidOptionError('db', db, 'a non-empty string without NUL characters'));
    }
    let timeoutMS: number | undefined;
    let exhaustAllowed: boolean;
    let moreToCome: boolean;
    let operationId: number | undefined;
    let signal: AbortSignal | undefined;
    const requestId = newRequestId();
    let name: string;
    let message: Buffer;
    let sequences: Map<string, readonly Document[]> | undefined;
    // Every read of `command` inside: a revoked Proxy, or one whose traps throw, rejects as any invalid command does.
    try {
      if (command === null || typeof command !== 'object' || Array.isArray(command)) {
        return Promise.reject(new InvalidOptionError('command', command, 'a command document, such as { ping: 1 }'));
      }
      ({ timeoutMS, exhaustAllowed, moreToCome, operationId, signal } = commandOptions('command', options, COMMAND_OPTION_NAMES));
      sequences = documentSequences(optionValue(options as CommandOptions, 'documentSequences'), command);
      name = Object.keys(command)[0] ?? '';
      // The signal aborted already: nothing is built, sent or published. One whose `aborted` throws (it broke after
      // the options were checked) fails the command as it does once the command is encoded.
      if (abortedAlready(signal, 'command')) return Promise.reject(new CommandCancelledError(this.address, this.id, name, false, abortReason(signal!)));
      const flags = (exhaustAllowed ? OpMsgFlag.exhaustAllowed : 0) | (moreToCome ? OpMsgFlag.moreToCome : 0);
      // Stable API spec, "Generic command helper": the command is not inspected; the declared fields, encoded once,
      // are written after its own, whatever it holds.
      message = encodeOpMsg(requestId, 0, { ...command, $db: db }, flags, this.server, sequences, this.apiElements);
      // On the bytes to be sent: the document is read once, as they were encoded.
      if (moreToCome) requireUnacknowledged(message);
    } catch (error) {
      return Promise.reject(error);
    }
    // Destroyed while the command was encoded (by a getter of its document, say): nothing is sent.
    if (this.errored) return Promise.reject(this.erroredBy ?? this.networkError('is closed'));
    // Busy from now on, before CommandStarted: a subscriber that runs a command on this connection meanwhile meets
    // ConnectionBusyError, one that destroys it (or checks it in) fails this command, which is then not sent.
    const inFlight = this.track({ requestId, exhaustAllowed, unacknowledged: moreToCome });
    if (exhaustAllowed) this.streamCommandName = name;
    if (signal !== undefined) {
      // The command given up before it was sent: the connection is free again, and it fails with `error`.
      const unsent = (error: Error): Promise<never> => this.untrack(inFlight, error);
      try {
        // Aborted while the command was encoded (by a getter of its document, say), or as it was listened to (a
        // signal whose addEventListener aborts it): nothing is sent.
        if (signal.aborted) return unsent(new CommandCancelledError(this.address, this.id, name, false, abortReason(signal)));
        inFlight.stopListening = listenToAbort(signal, () => this.cancel(inFlight, name, signal));
        if (signal.aborted) return unsent(new CommandCancelledError(this.address, this.id, name, false, abortReason(signal)));
      } catch (error) {
        // The signal refused a listener (or its `aborted` threw): the command could never be cancelled, so it is not
        // sent.
        return unsent(signalRefused(error));
      }
    }
    if (events === undefined || !events.observed) {
      this.dispatch(inFlight, message, timeoutMS, name);
      return inFlight.reply;
    }
    // Only now is anything built for the events: somebody receives them.
    const settled = this.published(events, requestId, operationId, db, name, command, sequences);
    this.dispatch(inFlight, message, timeoutMS, name);
    return settled(inFlight.reply);
  }

  /**
   * Publishes CommandStarted for the command about to be sent, and returns what publishes its CommandSucceeded or
   * CommandFailed once its reply settles (the reply's outcome unchanged). Never throws: a command document that can
   * no longer be read (a getter that throws) is published as `{}`.
   *
   * Source: command logging and monitoring spec, "Events API", "Guarantees", "Security", "Implementation Notes".
   */
  private published(
    events: CommandEventSink,
    requestId: number,
    operationId: number | undefined,
    db: string,
    name: string,
    command: Document,
    sequences: ReadonlyMap<string, readonly Document[]> | undefined,
  ): (reply: Promise<Document>) => Promise<Document> {
    const sensitive = isSensitiveCommand(name, command);
    const serverConnectionId = this.server.serverConnectionId;
    const serviceId = this.serviceId;
    const fields = (time: number): CommandEventFields => ({
      address: this.address,
      time,
      connectionId: this.id,
      ...(serverConnectionId === undefined ? {} : { serverConnectionId }),
      ...(serviceId === undefined ? {} : { serviceId }),
      requestId,
      ...(operationId === undefined ? {} : { operationId }),
      databaseName: db,
      commandName: name,
    });
    let sent: Document = {};
    if (!sensitive) {
      try {
        // As sent: the document, $db, the declared API fields, and each document sequence as an array.
        sent = { ...command, $db: db, ...(this.serverApi === undefined ? {} : serverApiFields(this.serverApi)) };
        for (const [identifier, documents] of sequences ?? []) sent[identifier] = documents;
      } catch {
        sent = {};
      }
    }
    publish(events, { type: 'CommandStarted', ...fields(wallClockNow()), command: sent });
    const start = performance.now();
    return (reply) =>
      reply.then(
        (doc) => {
          publish(events, { type: 'CommandSucceeded', ...fields(wallClockNow()), duration: performance.now() - start, reply: sensitive ? {} : doc });
          return doc;
        },
        (error: Error) => {
          publish(events, { type: 'CommandFailed', ...fields(wallClockNow()), duration: performance.now() - start, failure: sensitive ? redactedFailure(error) : error });
          throw error;
        },
      );
  }

  /**
   * Sends the encoded command `message` (compressed when negotiated and allowed for command `name`) for the request
   * `inFlight` made busy before; nothing when it was settled meanwhile.
   */
  private dispatch(inFlight: InFlight, message: Buffer, timeoutMS: number | undefined, name: string): void {
    if (this.compressor === undefined || !mayCompress(name)) return this.sendTracked(inFlight, message, timeoutMS);
    if (message.length - HEADER_LENGTH < ZLIB_THREAD_POOL_MIN_BYTES) {
      let compressed: Buffer;
      try {
        compressed = this.compressedOrNot(message, compressMessage(message, this.zlibCompressionLevel, this.compressor));
      } catch {
        // Compression is optional: a message the compressor could not compress goes as it is.
        compressed = message;
      }
      return this.sendTracked(inFlight, compressed, timeoutMS);
    }
    // A large command is compressed on the thread pool: the event loop goes on meanwhile. Node's threads (4 by default)
    // also serve DNS lookups, file reads, crypto and other zlib work, and may all be busy: an explicit timeoutMS bounds
    // the wait for one too, and what is left of it then bounds the write and the reply. Without one, socketTimeoutMS
    // starts when the message is sent.
    const remaining = timeoutMS === undefined ? undefined : remainingOf(timeoutMS);
    if (timeoutMS !== undefined && remaining !== undefined) {
      // Cleared as the request settles (cancelled, the connection destroyed) or once compressed.
      inFlight.timer = new IoTimeout(() => {
        if (this.inFlight !== inFlight || inFlight.sent || this.destroyed) return;
        const waited = `timed out after ${timeoutMS} ms waiting for Node's thread pool to compress the command (nothing was sent)`;
        this.fail(new MongoNetworkTimeoutError(this.address, `connection ${this.id} to ${this.address} ${waited}`));
      }, timeoutMS);
    }
    const send = (compressed: Buffer): void => {
      inFlight.timer?.clear();
      this.sendTracked(inFlight, compressed, remaining === undefined ? timeoutMS : Math.max(1, Math.floor(remaining())));
    };
    compressMessageOnThreadPool(message, this.zlibCompressionLevel, this.compressor).then(
      (compressed) => send(this.compressedOrNot(message, compressed)),
      // Compression is optional: a message the compressor could not compress goes as it is.
      () => send(message),
    );
  }

  /** The message to send for `message`: `compressed`, unless it exceeds maxMessageSizeBytes. */
  private compressedOrNot(message: Buffer, compressed: Buffer): Buffer {
    // zlib makes incompressible data a little longer: near the limit, only the uncompressed message stays within it.
    return compressed.length <= this.server.maxMessageSizeBytes ? compressed : message;
  }

  /**
   * Sends `message` for the request `inFlight` made busy before, and arms its timeout; unless the request was settled
   * meanwhile (the connection failed or was destroyed): nothing is sent then.
   */
  private sendTracked(inFlight: InFlight, message: Buffer, timeoutMS: number | undefined): void {
    if (this.inFlight !== inFlight || this.destroyed) return;
    this.arm(inFlight, timeoutMS);
    inFlight.sent = true;
    if (!inFlight.unacknowledged) return void this.socket.write(message);
    // No reply will come (OP_MSG spec, "moreToCome On Requests"): done once the socket has taken the message. A write
    // that fails fails the connection through the socket's 'error'.
    this.socket.write(message, (error) => {
      if (error === undefined || error === null) {
        if (this.inFlight === inFlight) this.settle({ ok: 1 }, undefined);
      } else {
        this.fail(this.networkError(`failed writing an unacknowledged command: ${error.message}`, error));
      }
    });
  }

  /**
   * Reads the next reply the server streams to an exhaustAllowed request (see {@link moreToCome}): one received
   * already, or the next to arrive. Resolves to it as {@link command} does; when it has moreToCome too, the
   * connection stays {@link moreToCome}.
   *
   * @throws {WireProtocolError} (rejection) when the connection is not {@link moreToCome}: no streamed reply will
   *   come. The connection is left as it is.
   * @throws {InvalidOptionError} (rejection) for options that are not an object (option `nextReply options`), a key
   *   other than `timeoutMS` and `signal`, a `timeoutMS` that is not a number of ms from 0 to 2147483647, or a
   *   `signal` that is not an AbortSignal (option `signal`, by its shape, as {@link command}); the connection is left
   *   as it is.
   * @throws {ConnectionBusyError} (rejection) when another read is in progress.
   * @throws {CommandCancelledError} (rejection, `streamedReply` true) when `signal` aborts before the reply was read,
   *   or was aborted already (`cause`: the signal's reason): nothing read and the connection left as it was when
   *   `sent` is false; the connection closed when `sent` is true (see {@link NextReplyOptions.signal}).
   * @throws what a `signal` throws (rejection) when its `addEventListener` (or its `aborted` getter) throws, as
   *   {@link command} says: nothing is read, and the connection is left as it was.
   * @throws {MongoServerError}, {@link MongoNetworkError}, {@link MongoNetworkTimeoutError} (rejection) as
   *   {@link command}, `timeoutMS` (default socketTimeoutMS) counting from this call and met once the reply has
   *   arrived whole (a large compressed one may still be inflated then); replies received before the connection failed
   *   are read first.
   *
   * Source: OP_MSG spec ("moreToCome"); server monitoring spec, "Streaming hello or legacy hello" (each response
   * processed, in the order received).
   */
  nextReply(options: NextReplyOptions = {}): Promise<Document> {
    let timeoutMS: number | undefined;
    let signal: AbortSignal | undefined;
    try {
      ({ timeoutMS, signal } = commandOptions('nextReply', options, NEXT_REPLY_OPTION_NAMES));
    } catch (error) {
      return Promise.reject(error);
    }
    if (this.inFlight !== undefined) return Promise.reject(new ConnectionBusyError(this.address, this.id));
    const name = this.streamCommandName;
    // Nothing read (a reply received already stays for the next read), the connection left as it is.
    const unread = (): CommandCancelledError => new CommandCancelledError(this.address, this.id, name, false, abortReason(signal!), true);
    try {
      // The signal aborted already: nothing is read.
      if (abortedAlready(signal, 'streamed read')) return Promise.reject(unread());
    } catch (error) {
      return Promise.reject(error);
    }
    // Replies received before the connection failed are still read, in order.
    const queued = this.unread.shift();
    if (queued !== undefined) return succeeded(queued) ? Promise.resolve(queued) : Promise.reject(new MongoServerError(queued));
    if (this.errored) return Promise.reject(this.erroredBy ?? this.networkError('is closed'));
    if (this.streamResponseTo === undefined) {
      return Promise.reject(new WireProtocolError(`connection ${this.id} to ${this.address} has no streamed reply to read: the last reply did not set moreToCome`));
    }
    const inFlight = this.track({ requestId: this.streamResponseTo, exhaustAllowed: true, unacknowledged: false });
    // A read of a stream is sent at once: its command was.
    inFlight.sent = true;
    if (signal !== undefined) {
      // Given up before the read began (the signal aborted as it was listened to, or refused a listener): the
      // connection is as it was.
      const unstarted = (error: Error): Promise<never> => this.untrack(inFlight, error);
      try {
        // Aborted while waiting: the stream's next reply will never be read, so the connection is closed (see cancel).
        inFlight.stopListening = listenToAbort(signal, () => this.cancel(inFlight, name, signal, true));
        if (signal.aborted) return unstarted(unread());
      } catch (error) {
        return unstarted(signalRefused(error, 'streamed read'));
      }
    }
    this.arm(inFlight, timeoutMS);
    return inFlight.reply;
  }

  /**
   * Gives up the request `inFlight` before any of it began (nothing sent, or no streamed reply waited for): its
   * signal's listener removed, the connection free again; rejects with `error`.
   */
  private untrack(inFlight: InFlight, error: Error): Promise<never> {
    inFlight.stopListening?.();
    this.inFlight = undefined;
    return Promise.reject(error);
  }

  /** Makes the request `request` the one in flight (the connection is busy), without a timeout yet. */
  private track({ requestId, exhaustAllowed, unacknowledged }: OutgoingRequest): InFlight {
    let resolve!: (doc: Document) => void;
    let reject!: (error: Error) => void;
    const reply = new Promise<Document>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    const inFlight: InFlight = { requestId, resolve, reject, exhaustAllowed, unacknowledged, timer: undefined, sent: false, reply, stopListening: undefined };
    this.inFlight = inFlight;
    return inFlight;
  }

  /** Arms the timeout of the request `inFlight`: `timeoutMS`, by default socketTimeoutMS (0: none). */
  private arm(inFlight: InFlight, timeoutMS = this.socketTimeoutMS): void {
    if (timeoutMS > 0) {
      // Expires only once what the socket already received is read: a reply that arrived while the event loop was
      // blocked is no timeout.
      // Nor while a reply that has arrived whole is inflated: that reply answers the request in flight (a read of the
      // stream it belongs to, begun meanwhile), or fails the connection.
      inFlight.timer = new IoTimeout(
        () => {
          if (this.inflating !== undefined && !this.destroyed) return;
          const waiting = inFlight.unacknowledged ? 'writing an unacknowledged command' : 'waiting for a reply';
          this.fail(new MongoNetworkTimeoutError(this.address, `connection ${this.id} to ${this.address} timed out after ${timeoutMS} ms ${waiting}`));
        },
        timeoutMS,
        this.bytesReceived,
      );
    }
  }

  /**
   * The command `name` of request `inFlight` (or, `streamedReply`, the read of its next streamed reply) was cancelled
   * by its signal: it fails with {@link CommandCancelledError} (`cause` the signal's reason). Once any of it was
   * written (a read of a stream: always), its reply will never be read: the connection is closed (errored with a
   * network error saying why), so that its pool closes it rather than hand it out again. Nothing when the request
   * settled already.
   */
  private cancel(inFlight: InFlight, name: string, signal: AbortSignal, streamedReply = false): void {
    if (this.inFlight !== inFlight) return;
    const sent = inFlight.sent;
    this.settle(undefined, new CommandCancelledError(this.address, this.id, name, sent, abortReason(signal), streamedReply));
    if (sent) this.fail(this.networkError(`was closed: its command ${name} was cancelled after it was sent, before its reply was read`));
  }

  /** Closes the socket (idempotent) and fails the request in flight with `error`, or a network error. */
  destroy(error?: Error): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.received.length = 0;
    this.settle(undefined, error ?? this.networkError('was closed by the pool'));
    this.socket.destroy();
  }

  private onData(chunk: Buffer): void {
    // A reply answers a request: bytes that arrive with none in flight can only be (the start of) one nobody asked
    // for. Refused at once, rather than buffered until a message completes: a server could otherwise park up to
    // maxMessageSizeBytes in every idle connection of a pool, for as long as it stays idle.
    // A server streaming replies (moreToCome) may send the next one before it is read.
    // Nor can a reply come before its command was sent (while a large one is compressed).
    // Nor to a request with moreToCome (OP_MSG spec: "There is no response to a request where moreToCome has been set").
    if ((!(this.inFlight?.sent ?? false) || this.inFlight?.unacknowledged === true) && this.streamResponseTo === undefined) {
      return this.fail(this.unsolicited(chunk.length));
    }
    let messages: WireMessage[];
    try {
      messages = this.framer.push(chunk);
    } catch (error) {
      return this.fail(this.protocolError(error));
    }
    for (const message of messages) this.received.push(message);
    this.readReceived();
  }

  /**
   * Reads the messages received, in order, until one is being inflated on the thread pool (the others wait for it).
   * Then, with no request in flight and no stream, any byte received is one nobody asked for.
   */
  private readReceived(): void {
    while (this.inflating === undefined) {
      const message = this.received.shift();
      if (message === undefined || this.destroyed) break;
      this.onMessage(message);
    }
    if (this.inflating !== undefined || this.destroyed) return;
    if (this.lostWith !== undefined) return this.fail(this.lostWith);
    // The reply came with the start of another message (or a whole one) behind it.
    if (this.inFlight === undefined && this.streamResponseTo === undefined && this.framer.bufferedBytes > 0) {
      this.fail(this.unsolicited(this.framer.bufferedBytes));
    }
  }

  /** The network error for `bytes` bytes received with no request in flight. */
  private unsolicited(bytes: number): MongoNetworkError {
    const detail =
      this.inFlight?.unacknowledged === true
        ? `received ${bytes} bytes while sending a request with moreToCome, which gets no reply`
        : `received ${bytes} bytes with no request in flight (a reply must answer a request of this client)`;
    return this.protocolError(new WireProtocolError(detail));
  }

  private onMessage(raw: WireMessage): void {
    const inFlight = this.inFlight;
    // While streaming, each reply answers the previous one (its responseTo is that reply's requestId).
    const expectedResponseTo = inFlight?.requestId ?? this.streamResponseTo;
    if (expectedResponseTo === undefined || raw.header.responseTo !== expectedResponseTo) {
      const expected = expectedResponseTo ?? 'none';
      const detail = `reply responseTo ${raw.header.responseTo} does not match the request in flight (${expected})`;
      return this.fail(this.protocolError(new WireProtocolError(detail)));
    }
    const limits = { compressors: this.acceptedCompressors, duringHandshake: !this.handshaken, maxMessageSizeBytes: this.server.maxMessageSizeBytes };
    if (inflatesLarge(raw)) {
      // Inflated on the thread pool, so the event loop goes on meanwhile. The reply has arrived whole: its deadline
      // is met. Messages received meanwhile wait for it, and the socket is read no further until it is inflated: a
      // server sending on (zlib's asynchronous inflate yields to the event loop every 16 KiB of output, so a flood of
      // bytes also slows it down) would otherwise have the connection hold whatever it sends meanwhile.
      inFlight?.timer?.clear();
      this.socket.pause();
      const inflating = decompressMessageOnThreadPool(raw, limits).then(
        (message) => {
          if (this.inflating !== inflating || this.destroyed) return;
          this.inflating = undefined;
          this.socket.resume();
          this.onDecompressed(raw, message);
          this.readReceived();
        },
        (error: unknown) => {
          if (this.inflating !== inflating || this.destroyed) return;
          this.inflating = undefined;
          this.fail(this.protocolError(error));
        },
      );
      this.inflating = inflating;
      return;
    }
    let message: WireMessage;
    try {
      message = decompressMessage(raw, limits);
    } catch (error) {
      return this.fail(this.protocolError(error));
    }
    this.onDecompressed(raw, message);
  }

  /** Reads the reply `message` (received as `raw`, which it is unless `raw` was compressed). */
  private onDecompressed(raw: WireMessage, message: WireMessage): void {
    // Read now: a request in flight may have started while `raw` was being inflated (nextReply).
    const inFlight = this.inFlight;
    let document: Document;
    let moreToCome: boolean;
    let unreadable: string | undefined;
    try {
      if (message.header.opCode !== OpCode.OP_MSG) {
        const opCode = message.header.opCode;
        throw new WireProtocolError(`unexpected opcode ${opCode} in reply (expected OP_MSG, ${OpCode.OP_MSG})`);
      }
      const reply = decodeOpMsg(message.body, { acceptUnreadableValues: true });
      moreToCome = (reply.flags & OpMsgFlag.moreToCome) !== 0;
      unreadable = reply.unreadable;
      // A streamed reply cannot be left out of its stream: one that cannot be read fails the connection.
      if (unreadable !== undefined && (moreToCome || inFlight === undefined)) throw new WireProtocolError(`invalid BSON: ${unreadable}`);
      // Only a request with exhaustAllowed may be answered by a stream of replies (OP_MSG spec, "moreToCome").
      if (moreToCome && !(inFlight?.exhaustAllowed ?? true)) {
        throw new WireProtocolError(
          `OP_MSG reply has the moreToCome flag set (0x${OpMsgFlag.moreToCome.toString(16)}), but the request did not set ` +
            'exhaustAllowed: a reply to this client must not have it',
        );
      }
      document = reply.document;
      // Server monitoring spec, "Awaitable hello or legacy hello Protocol": a reply with ok: 0 MUST NOT set moreToCome.
      if (moreToCome && !succeeded(document)) {
        throw new WireProtocolError('OP_MSG reply has the moreToCome flag set with ok: 0; a failed reply must end the stream');
      }
      if (inFlight === undefined && this.unread.length >= MAX_UNREAD_STREAMED_REPLIES) {
        throw new WireProtocolError(`more than ${MAX_UNREAD_STREAMED_REPLIES} streamed replies received and not yet read`);
      }
    } catch (error) {
      return this.fail(this.protocolError(error));
    }
    this.streamResponseTo = moreToCome ? raw.header.requestId : undefined;
    if (inFlight === undefined) return void this.unread.push(document);
    if (unreadable !== undefined) {
      // The message and its BSON are whole: the connection is in step with the server, only a value of this reply is
      // unreadable. A failed reply still says what failed (its code, its labels); a successful one cannot be returned.
      const error = new WireProtocolError(
        `the reply on connection ${this.id} to ${this.address} holds a value that cannot be read (${unreadable}), so it cannot be returned`,
      );
      return this.settle(undefined, succeeded(document) ? error : new MongoServerError(document));
    }
    if (succeeded(document)) this.settle(document, undefined);
    else this.settle(undefined, new MongoServerError(document));
  }

  private networkError(detail: string, cause?: unknown): MongoNetworkError {
    return new MongoNetworkError(this.address, `connection ${this.id} to ${this.address} ${detail}`, { cause });
  }

  /** The network error for a malformed reply; `cause` is the {@link WireProtocolError} (or other error) met. */
  private protocolError(error: unknown): MongoNetworkError {
    return this.networkError(`failed: wire-protocol error: ${(error as Error).message}`, error);
  }

  /**
   * The socket failed, or the peer closed it: the connection fails with `error`, once the messages it received whole
   * before are read, as they are when none is being inflated (a reply inflated on the thread pool, and those received
   * behind it).
   */
  private lost(error: Error): void {
    if (this.inflating !== undefined && !this.destroyed) this.lostWith ??= error;
    else this.fail(error);
  }

  /** Marks the connection errored, fails the request in flight, and closes the socket. */
  private fail(error: Error): void {
    if (this.erroredBy === undefined && !this.destroyed) this.erroredBy = error;
    this.settle(undefined, error);
    if (!this.destroyed) {
      this.destroyed = true;
      this.received.length = 0;
      this.socket.destroy();
    }
  }

  private settle(reply: Document | undefined, error: Error | undefined): void {
    const inFlight = this.inFlight;
    if (inFlight === undefined) return;
    this.inFlight = undefined;
    inFlight.timer?.clear();
    inFlight.stopListening?.();
    if (error !== undefined) inFlight.reject(error);
    else inFlight.resolve(reply!);
  }
}

/**
 * Hands `event` to `events`. A throw (a subscriber's, with RxJS's `useDeprecatedSynchronousErrorHandling`, or a sink's
 * own) is reported as RxJS reports an unhandled error, never the command's: it neither fails the command nor leaves
 * the connection busy.
 */
function publish(events: CommandEventSink, event: CommandEvent): void {
  try {
    events.next(event);
  } catch (error) {
    reportUnhandled(error);
  }
}

/** Whose `signal` refused a listener, in an error's words: a command's, a streamed read's, a server selection's. */
export type SignalOwner = 'command' | 'streamed read' | 'server selection';

/**
 * The error a command, a streamed read or a server selection (`owner`) fails with when its `signal` threw as it was
 * looked at or listened to: that Error, or an Error saying the owner's signal refused a listener, `thrown` its
 * `cause`. Never throws.
 */
export function signalRefused(thrown: unknown, owner: SignalOwner = 'command'): Error {
  return refusal(`the ${owner}'s signal refused a listener`, thrown);
}

/**
 * Whether `signal` (if any) has aborted, as a command, a streamed read or a server selection (`owner`) looks before it
 * starts. A signal whose `aborted` throws (it passed the shape check, then broke) fails the owner: throws
 * {@link signalRefused}'s error.
 */
export function abortedAlready(signal: AbortSignal | undefined, owner: SignalOwner): boolean {
  try {
    return signal?.aborted === true;
  } catch (error) {
    throw signalRefused(error, owner);
  }
}

/**
 * The name of command document `command` (its first key) for an error's message, '' when it has none, is not an
 * object or cannot be read (a revoked Proxy, say). Never throws.
 */
export function commandNameOf(command: unknown): string {
  try {
    return command !== null && typeof command === 'object' ? (Object.keys(command)[0] ?? '') : '';
  } catch {
    return '';
  }
}

/** Whether a reply reports success (`ok: 1`, or `ok: true`); any other reply is a MongoServerError. */
function succeeded(reply: Document): boolean {
  return reply.ok === 1 || reply.ok === true;
}
