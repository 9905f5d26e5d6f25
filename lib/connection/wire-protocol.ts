/**
 * MongoDB wire-protocol framing: the standard message header and OP_MSG, encoded and decoded with `bson`.
 *
 * Source: OP_MSG spec ("OP_MSG", "flagBits", "Sections"); MongoDB wire protocol standard message header.
 */
import { deserialize, serialize, type Document } from 'bson';

/** Wire-protocol opcodes this library speaks or recognizes. */
export const OpCode = Object.freeze({ OP_REPLY: 1, OP_QUERY: 2004, OP_COMPRESSED: 2012, OP_MSG: 2013 } as const);

/** OP_MSG flag bits. */
export const OpMsgFlag = Object.freeze({ checksumPresent: 1 << 0, moreToCome: 1 << 1, exhaustAllowed: 1 << 16 });

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

/** A decoded OP_MSG: its flag bits, its body document, and its document sequences by identifier. */
export interface OpMsg {
  readonly flags: number;
  readonly document: Document;
  readonly sequences: ReadonlyMap<string, Document[]>;
}

/** Thrown by the decoders for bytes that are not a valid message; the message says what is wrong. */
export class WireProtocolError extends Error {
  override readonly name = 'WireProtocolError';
}

export const HEADER_LENGTH = 16;

/** The default (and the server's usual) maxMessageSizeBytes: 48,000,000. */
export const DEFAULT_MAX_MESSAGE_SIZE_BYTES = 48_000_000;

/** Encodes an OP_MSG with one body section (kind 0) holding `document`. */
export function encodeOpMsg(requestId: number, responseTo: number, document: Document, flags = 0): Buffer {
  const bson = serialize(document);
  const length = HEADER_LENGTH + 4 + 1 + bson.length;
  const out = Buffer.allocUnsafe(length);
  writeHeader(out, { messageLength: length, requestId, responseTo, opCode: OpCode.OP_MSG });
  out.writeUInt32LE(flags >>> 0, 16);
  out[20] = 0;
  out.set(bson, 21);
  return out;
}

/** Writes a standard message header at the start of `out`. */
export function writeHeader(out: Buffer, header: MessageHeader): void {
  out.writeInt32LE(header.messageLength, 0);
  out.writeInt32LE(header.requestId, 4);
  out.writeInt32LE(header.responseTo, 8);
  out.writeInt32LE(header.opCode, 12);
}

/**
 * Decodes the body (the bytes after the header) of an OP_MSG.
 *
 * @throws {WireProtocolError} for unknown required flag bits, a missing or repeated body section, an unknown section
 *   kind, a section that overruns the message, or invalid BSON.
 */
export function decodeOpMsg(body: Buffer): OpMsg {
  if (body.length < 5) throw new WireProtocolError(`OP_MSG too short: ${body.length} bytes after the header`);
  const flags = body.readUInt32LE(0);
  const requiredUnknown = flags & 0xffff & ~(OpMsgFlag.checksumPresent | OpMsgFlag.moreToCome);
  if (requiredUnknown !== 0) throw new WireProtocolError(`OP_MSG has unknown required flag bits 0x${requiredUnknown.toString(16)}`);
  const end = flags & OpMsgFlag.checksumPresent ? body.length - 4 : body.length;
  let offset = 4;
  let document: Document | undefined;
  const sequences = new Map<string, Document[]>();
  while (offset < end) {
    const kind = body[offset++];
    if (kind === 0) {
      if (document !== undefined) throw new WireProtocolError('OP_MSG has more than one body section');
      const size = readDocumentSize(body, offset, end);
      document = parseBson(body, offset, size);
      offset += size;
    } else if (kind === 1) {
      if (offset + 4 > end) throw new WireProtocolError('OP_MSG document sequence overruns the message');
      const size = body.readInt32LE(offset);
      const sectionEnd = offset + size;
      if (size < 5 || sectionEnd > end) throw new WireProtocolError(`OP_MSG document sequence has invalid size ${size}`);
      const nul = body.indexOf(0, offset + 4);
      if (nul < 0 || nul >= sectionEnd) throw new WireProtocolError('OP_MSG document sequence identifier is not terminated');
      const identifier = body.toString('utf8', offset + 4, nul);
      const docs: Document[] = [];
      for (let p = nul + 1; p < sectionEnd; ) {
        const docSize = readDocumentSize(body, p, sectionEnd);
        docs.push(parseBson(body, p, docSize));
        p += docSize;
      }
      sequences.set(identifier, docs);
      offset = sectionEnd;
    } else {
      throw new WireProtocolError(`OP_MSG has unknown section kind ${kind}`);
    }
  }
  if (document === undefined) throw new WireProtocolError('OP_MSG has no body section');
  return { flags, document, sequences };
}

function readDocumentSize(buf: Buffer, offset: number, end: number): number {
  if (offset + 4 > end) throw new WireProtocolError('BSON document overruns the message');
  const size = buf.readInt32LE(offset);
  if (size < 5 || offset + size > end) throw new WireProtocolError(`BSON document has invalid size ${size}`);
  return size;
}

function parseBson(buf: Buffer, offset: number, size: number): Document {
  try {
    return deserialize(buf.subarray(offset, offset + size), { validation: { utf8: true } });
  } catch (error) {
    throw new WireProtocolError(`invalid BSON: ${(error as Error).message}`);
  }
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
