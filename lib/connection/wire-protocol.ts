/**
 * MongoDB wire-protocol framing: opcodes, the standard message header, and splitting a byte stream into messages.
 *
 * Source: MongoDB wire protocol, "Standard Message Header"; OP_MSG spec.
 */
import { deserialize, type Document } from 'bson';
import { WireProtocolError } from '../errors';

/** Wire-protocol opcodes this library speaks or recognizes. */
export const OpCode = Object.freeze({ OP_REPLY: 1, OP_QUERY: 2004, OP_COMPRESSED: 2012, OP_MSG: 2013 } as const);

/** The 16-byte standard message header. */
export interface MessageHeader {
  readonly messageLength: number;
  readonly requestId: number;
  readonly responseTo: number;
  readonly opCode: number;
}

/** A whole message: its header and the bytes after the header. */
export interface WireMessage {
  readonly header: MessageHeader;
  readonly body: Buffer;
}

export { WireProtocolError } from '../errors';

/** The length of the standard message header, in bytes. */
export const HEADER_LENGTH = 16;

/**
 * The hard ceiling on maxMessageSizeBytes, in bytes: 48,000,000, the value every MongoDB server announces. The client
 * never accepts a larger message, whatever the server announces (see {@link effectiveMaxMessageSizeBytes}).
 *
 * Source: extension (MongoDB servers' fixed maxMessageSizeBytes; bounds what a lying server can make the client read).
 */
export const MAX_MESSAGE_SIZE_CEILING_BYTES = 48_000_000;

/** The default (and the server's usual) maxMessageSizeBytes, in bytes: 48,000,000. */
export const DEFAULT_MAX_MESSAGE_SIZE_BYTES = MAX_MESSAGE_SIZE_CEILING_BYTES;

/**
 * The floor of an announced maxMessageSizeBytes, in bytes: 16 MiB, the default maxBsonObjectSize. A server must be
 * able to send a reply holding a document of that size, so a smaller announcement is raised to it.
 *
 * Source: extension (handshake spec: `maxBsonObjectSize` defaults to 16 MiB).
 */
export const MIN_MAX_MESSAGE_SIZE_BYTES = 16 * 1024 * 1024;

/**
 * The message size limit the client applies, in bytes, for the `maxMessageSizeBytes` a handshake reply announces:
 * an announcement that is absent or not a positive integer gives {@link DEFAULT_MAX_MESSAGE_SIZE_BYTES}; any other is
 * clamped to {@link MIN_MAX_MESSAGE_SIZE_BYTES}..{@link MAX_MESSAGE_SIZE_CEILING_BYTES} (16,777,216..48,000,000). So
 * a server that announces 2^31-1 still cannot make the client read more than 48,000,000 bytes per message.
 *
 * Source: handshake spec (`maxMessageSizeBytes` in the hello reply); the bounds are an extension.
 */
export function effectiveMaxMessageSizeBytes(announced: unknown): number {
  if (typeof announced !== 'number' || !Number.isSafeInteger(announced) || announced <= 0) {
    return DEFAULT_MAX_MESSAGE_SIZE_BYTES;
  }
  return Math.min(Math.max(announced, MIN_MAX_MESSAGE_SIZE_BYTES), MAX_MESSAGE_SIZE_CEILING_BYTES);
}

/**
 * Received chunks shorter than this many bytes (4 KiB) are coalesced by the {@link MessageFramer} while a message is
 * incomplete, rather than kept one by one.
 *
 * Source: extension (bounds the per-chunk overhead a server slicing a reply thinly can make the client hold).
 */
export const SMALL_CHUNK_BYTES = 4096;

/**
 * The size of each buffer the {@link MessageFramer} coalesces small chunks into, in bytes: 64 KiB, the most Node
 * reads from a socket at once. Held only while a message is incomplete.
 *
 * Source: extension.
 */
export const COALESCE_BUFFER_BYTES = 64 * 1024;

/** Writes a standard message header at the start of `out`. */
export function writeHeader(out: Buffer, header: MessageHeader): void {
  out.writeInt32LE(header.messageLength, 0);
  out.writeInt32LE(header.requestId, 4);
  out.writeInt32LE(header.responseTo, 8);
  out.writeInt32LE(header.opCode, 12);
}

/**
 * Splits a byte stream into whole messages. Feed it socket chunks with {@link push}; it returns each complete
 * message. It reads each message's length once its first 4 bytes are there, then keeps the chunks until the message
 * is complete: a message within one chunk is a view of that chunk (no copy), and a message spread over several
 * chunks is copied once, with one `Buffer.concat`. A chunk shorter than {@link SMALL_CHUNK_BYTES} (4 KiB) that
 * arrives while a message is incomplete is first copied into a shared buffer of {@link COALESCE_BUFFER_BYTES}
 * (64 KiB), so the memory held for an incomplete message stays within a few percent of its bytes however thinly a
 * server slices it (kept one by one, 1-byte chunks cost about 200 bytes of heap each). Framing is linear in the bytes
 * received, however they are chunked: each byte is copied at most twice.
 *
 * Source: MongoDB wire protocol, "Standard Message Header" (`messageLength` counts the whole message, header
 * included); OP_MSG spec ("Each OP_MSG MUST NOT exceed the maxMessageSizeBytes"); the coalescing is an extension.
 */
export class MessageFramer {
  /** Received chunks not yet returned as messages; the first may be a view of a chunk partly consumed. */
  private chunks: Buffer[] = [];
  private bufferedLength = 0;
  /** The length of the message being received, once its first 4 bytes are there; -1 before. */
  private expectedLength = -1;
  /** The buffer small chunks are copied into while a message is incomplete; chunks buffered may view its used part. */
  private coalesce: Buffer | undefined;
  /** The bytes of `coalesce` in use. */
  private coalesced = 0;

  /** The bytes received and not yet returned in a message (those of the incomplete message, if any). */
  get bufferedBytes(): number {
    return this.bufferedLength;
  }

  /**
   * @param maxMessageSizeBytes the longest message accepted, header included, in bytes (default 48,000,000). The
   *   framer refuses a longer message as soon as its length is known, before its bytes arrive.
   */
  constructor(readonly maxMessageSizeBytes = DEFAULT_MAX_MESSAGE_SIZE_BYTES) {}

  /**
   * Adds a chunk and returns the messages it completed (in order; none while a message is incomplete).
   *
   * @throws {WireProtocolError} when a header announces a length below 16 bytes or above maxMessageSizeBytes; the
   *   message names the length, maxMessageSizeBytes and the allowed range. The framer is unusable afterwards.
   */
  push(chunk: Buffer): WireMessage[] {
    if (chunk.length > 0) {
      if (this.chunks.length > 0 && chunk.length < SMALL_CHUNK_BYTES) this.append(chunk);
      else this.chunks.push(chunk);
      this.bufferedLength += chunk.length;
    }
    const messages: WireMessage[] = [];
    for (;;) {
      if (this.expectedLength < 0) {
        if (this.bufferedLength < 4) break;
        const length = this.peekInt32();
        if (length < HEADER_LENGTH || length > this.maxMessageSizeBytes) {
          throw new WireProtocolError(
            `message length ${length} is outside the allowed range ${HEADER_LENGTH}..${this.maxMessageSizeBytes} ` +
              `bytes (maxMessageSizeBytes is ${this.maxMessageSizeBytes})`,
          );
        }
        this.expectedLength = length;
      }
      if (this.bufferedLength < this.expectedLength) break;
      const message = this.take(this.expectedLength);
      this.expectedLength = -1;
      messages.push({
        header: {
          messageLength: message.length,
          requestId: message.readInt32LE(4),
          responseTo: message.readInt32LE(8),
          opCode: message.readInt32LE(12),
        },
        body: message.subarray(HEADER_LENGTH),
      });
    }
    // Nothing buffered: the coalescing buffer is let go (messages returned may still view it).
    if (this.chunks.length === 0) this.coalesce = undefined;
    return messages;
  }

  /**
   * Buffers a small chunk by copying it into the coalescing buffer, after the bytes already there, while there is
   * room (extending the last chunk buffered when that one ends where the copy starts, else as a chunk of its own);
   * otherwise into a new coalescing buffer. Bytes are only ever written past those in use, so no view already taken
   * (buffered, or a message returned) sees them change.
   */
  private append(chunk: Buffer): void {
    const into = this.coalesce;
    if (into !== undefined && this.coalesced + chunk.length <= into.length) {
      const start = this.coalesced;
      chunk.copy(into, start);
      this.coalesced += chunk.length;
      const last = this.chunks.length - 1;
      const tail = this.chunks[last];
      if (tail.buffer === into.buffer && tail.byteOffset + tail.length === into.byteOffset + start) {
        this.chunks[last] = into.subarray(tail.byteOffset - into.byteOffset, this.coalesced);
      } else {
        // A chunk of 4 KiB or more came in between: a new buffer for each small chunk after one would hold 64 KiB
        // per few bytes.
        this.chunks.push(into.subarray(start, this.coalesced));
      }
      return;
    }
    // Its own memory (not Node's shared pool), so that it holds nothing else.
    const fresh = Buffer.allocUnsafeSlow(COALESCE_BUFFER_BYTES);
    chunk.copy(fresh, 0);
    this.coalesce = fresh;
    this.coalesced = chunk.length;
    this.chunks.push(fresh.subarray(0, chunk.length));
  }

  /** The little-endian int32 formed by the first 4 buffered bytes (which may span chunks). */
  private peekInt32(): number {
    const first = this.chunks[0];
    if (first.length >= 4) return first.readInt32LE(0);
    const bytes = Buffer.allocUnsafe(4);
    let filled = 0;
    for (let i = 0; filled < 4; i++) {
      filled += this.chunks[i].copy(bytes, filled, 0, Math.min(4 - filled, this.chunks[i].length));
    }
    return bytes.readInt32LE(0);
  }

  /** Removes and returns the first `length` buffered bytes: a view when one chunk holds them, else one copy. */
  private take(length: number): Buffer {
    const first = this.chunks[0];
    if (first.length >= length) {
      if (first.length === length) this.chunks.shift();
      else this.chunks[0] = first.subarray(length);
      this.bufferedLength -= length;
      return first.subarray(0, length);
    }
    let covered = 0;
    let count = 0;
    while (covered < length) covered += this.chunks[count++].length;
    const parts = this.chunks.splice(0, count);
    const message = Buffer.concat(parts, length);
    const rest = covered - length;
    if (rest > 0) this.chunks.unshift(parts[count - 1].subarray(parts[count - 1].length - rest));
    this.bufferedLength -= length;
    return message;
  }
}

/**
 * Reads the BSON document at `offset` (which must end by `end`) and returns it with its size in bytes.
 *
 * With `onUnreadable`, a document whose BSON is whole but which holds a value that cannot be read as JavaScript (a
 * string that is not valid UTF-8, a regular expression `RegExp` refuses, such as PCRE's `(?i)`) is read with each bad
 * UTF-8 sequence replaced by U+FFFD and every regular expression as a `BSONRegExp`, and `onUnreadable` is called with
 * what the strict reading said; without it, such a document is invalid BSON.
 *
 * @throws {WireProtocolError} for a size that overruns `end` or invalid BSON (including such values, unless
 *   `onUnreadable` is given).
 */
export function readBsonDocument(buf: Buffer, offset: number, end: number, onUnreadable?: (reason: string) => void): [Document, number] {
  if (offset + 4 > end) throw new WireProtocolError('BSON document overruns the message');
  const size = buf.readInt32LE(offset);
  if (size < 5 || offset + size > end) throw new WireProtocolError(`BSON document has invalid size ${size}`);
  const bytes = buf.subarray(offset, offset + size);
  try {
    return [deserialize(bytes, { validation: { utf8: true } }), size];
  } catch (error) {
    if (onUnreadable !== undefined) {
      let document: Document | undefined;
      try {
        document = deserialize(bytes, { validation: { utf8: false }, bsonRegExp: true });
      } catch {
        // not only a value: invalid BSON, as below
      }
      if (document !== undefined) {
        onUnreadable((error as Error).message);
        return [document, size];
      }
    }
    throw new WireProtocolError(`invalid BSON: ${(error as Error).message}`);
  }
}
