/**
 * MongoDB wire-protocol framing: opcodes, the standard message header, and splitting a byte stream into messages.
 *
 * Source: MongoDB wire protocol, "Standard Message Header"; OP_MSG spec.
 */
import { deserialize, type Document } from 'bson';

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

/** Thrown by the decoders for bytes that are not a valid message; the message says what is wrong. */
export class WireProtocolError extends Error {
  override readonly name = 'WireProtocolError';
}

/** The length of the standard message header, in bytes. */
export const HEADER_LENGTH = 16;

/** The default (and the server's usual) maxMessageSizeBytes: 48,000,000. */
export const DEFAULT_MAX_MESSAGE_SIZE_BYTES = 48_000_000;

/** Writes a standard message header at the start of `out`. */
export function writeHeader(out: Buffer, header: MessageHeader): void {
  out.writeInt32LE(header.messageLength, 0);
  out.writeInt32LE(header.requestId, 4);
  out.writeInt32LE(header.responseTo, 8);
  out.writeInt32LE(header.opCode, 12);
}

/**
 * Splits a byte stream into whole messages. Feed it socket chunks with {@link push}; it returns each complete
 * message. It copies only when a message spans chunks.
 */
export class MessageFramer {
  private buffered: Buffer[] = [];
  private bufferedLength = 0;

  constructor(private readonly maxMessageSizeBytes = DEFAULT_MAX_MESSAGE_SIZE_BYTES) {}

  /**
   * Adds a chunk and returns the messages it completed.
   *
   * @throws {WireProtocolError} when a header announces a length below 16 bytes or above maxMessageSizeBytes.
   */
  push(chunk: Buffer): WireMessage[] {
    this.buffered.push(chunk);
    this.bufferedLength += chunk.length;
    const messages: WireMessage[] = [];
    while (this.bufferedLength >= 4) {
      const data = this.buffered.length === 1 ? this.buffered[0] : this.flatten();
      const length = data.readInt32LE(0);
      if (length < HEADER_LENGTH || length > this.maxMessageSizeBytes) {
        throw new WireProtocolError(
          `message length ${length} is outside the allowed range ${HEADER_LENGTH}..${this.maxMessageSizeBytes}`,
        );
      }
      if (this.bufferedLength < length) break;
      const message = data.subarray(0, length);
      messages.push({
        header: {
          messageLength: length,
          requestId: message.readInt32LE(4),
          responseTo: message.readInt32LE(8),
          opCode: message.readInt32LE(12),
        },
        body: message.subarray(HEADER_LENGTH),
      });
      const rest = data.subarray(length);
      this.buffered = rest.length > 0 ? [rest] : [];
      this.bufferedLength = rest.length;
    }
    return messages;
  }

  private flatten(): Buffer {
    const data = Buffer.concat(this.buffered, this.bufferedLength);
    this.buffered = [data];
    return data;
  }
}

/**
 * Reads the BSON document at `offset` (which must end by `end`) and returns it with its size in bytes.
 *
 * @throws {WireProtocolError} for a size that overruns `end` or invalid BSON (including invalid UTF-8).
 */
export function readBsonDocument(buf: Buffer, offset: number, end: number): [Document, number] {
  if (offset + 4 > end) throw new WireProtocolError('BSON document overruns the message');
  const size = buf.readInt32LE(offset);
  if (size < 5 || offset + size > end) throw new WireProtocolError(`BSON document has invalid size ${size}`);
  try {
    return [deserialize(buf.subarray(offset, offset + size), { validation: { utf8: true } }), size];
  } catch (error) {
    throw new WireProtocolError(`invalid BSON: ${(error as Error).message}`);
  }
}
