/**
 * OP_MSG: the message format of every command and reply, encoded and decoded with `bson`.
 *
 * Source: OP_MSG spec ("OP_MSG", "flagBits", "Sections": exactly one Payload Type 0, each Payload Type 1 identifier
 * unique per message); `undefined` sent as null: the official Node.js driver's default (`ignoreUndefined: false`).
 */
import { calculateObjectSize, serialize, type Document } from 'bson';
import { HEADER_LENGTH, OpCode, readBsonDocument, WireProtocolError, writeHeader } from './wire-protocol';

/** OP_MSG flag bits. */
export const OpMsgFlag = Object.freeze({ checksumPresent: 1 << 0, moreToCome: 1 << 1, exhaustAllowed: 1 << 16 });

/** A decoded OP_MSG: its flag bits, its body document, and its document sequences by identifier. */
export interface OpMsg {
  readonly flags: number;
  readonly document: Document;
  readonly sequences: ReadonlyMap<string, Document[]>;
  /**
   * When the body document holds a value that cannot be read as JavaScript (only with
   * {@link DecodeOptions.acceptUnreadableValues}): what the strict reading said, e.g. `"Invalid UTF-8 string in BSON
   * document"`; the document is then read leniently (see `readBsonDocument`). Undefined otherwise.
   */
  readonly unreadable: string | undefined;
}

/** Options of {@link decodeOpMsg}. */
export interface DecodeOptions {
  /**
   * Read a body document whose BSON is whole but which holds a value that cannot be read as JavaScript (a string that
   * is not valid UTF-8, a regular expression `RegExp` refuses) leniently, and say so in {@link OpMsg.unreadable},
   * rather than refuse it as invalid BSON. Default false.
   */
  readonly acceptUnreadableValues?: boolean;
}

/**
 * How much larger than maxBsonObjectSize a command document may be, in bytes: 16 KiB, the room a MongoDB server
 * leaves for a command's own fields around a document of the largest size.
 *
 * Source: MongoDB server (a command may be up to maxBsonObjectSize + 16 KiB); handshake spec (`maxBsonObjectSize`).
 */
export const COMMAND_SIZE_ALLOWANCE_BYTES = 16 * 1024;

/**
 * The server's limits on a message the client sends, from its handshake reply.
 *
 * Source: handshake spec (`maxBsonObjectSize`, `maxMessageSizeBytes`); OP_MSG spec ("Each OP_MSG MUST NOT exceed the
 * maxMessageSizeBytes").
 */
export interface OutgoingLimits {
  /** The largest BSON document the server accepts; a command document may be {@link COMMAND_SIZE_ALLOWANCE_BYTES} larger. */
  readonly maxBsonObjectSize: number;
  /** The largest message the server accepts, header included. */
  readonly maxMessageSizeBytes: number;
}

/**
 * How a command document is serialized: an `undefined` value is sent as null, as the official Node.js driver sends
 * it by default (its `ignoreUndefined: false`), not left out as `bson.serialize` does by default: a filter such as
 * `{ owner: undefined }` then matches the documents without an owner, never every document.
 */
const SERIALIZE_OPTIONS = Object.freeze({ ignoreUndefined: false });

/**
 * Encodes an OP_MSG with one body section (kind 0) holding `document`. With `limits`, a document larger than
 * maxBsonObjectSize + 16 KiB, or a message larger than maxMessageSizeBytes, is refused. The document is serialized
 * once (a `toBSON` or a getter runs once, as with `bson.serialize`); a value `undefined` is sent as null, wherever it
 * is (the official Node.js driver's default), rather than left out. Values the BSON library encodes with a loss go as
 * it encodes them, as with the driver: a BigInt beyond 64 bits wrapped to its low 64, an invalid Date as 1970-01-01,
 * functions and symbols left out.
 *
 * With `sequences`, each entry follows the body as a document sequence (Payload Type 1) whose identifier is its key,
 * its documents encoded one after another, in order: what a bulk write puts there (`documents` of an insert). With
 * `limits`, a document of a sequence larger than maxBsonObjectSize is refused too, and the message's size counts every
 * section: a batch that would take it past maxMessageSizeBytes is refused at the document that does so, the documents
 * after it neither read nor encoded.
 *
 * With `extraElements` (the BSON elements of a document: its bytes without the leading length and the trailing 0,
 * see {@link bsonElements}), they are written at the end of the body document, after `document`'s own fields, without
 * re-encoding or copying `document`: what a connection appends to every command (the declared Stable API fields).
 * The limits count them. A key of `document` equal to one of theirs is then sent twice.
 *
 * @throws {WireProtocolError} when `document`, or a document of a sequence, cannot be encoded as BSON (a cycle, a key
 *   holding a NUL character, a `toBSON` that throws, more than the BSON library's 17 MiB buffer, which would cut a
 *   string short; `cause`: the BSON library's error, if it threw one), or is beyond `limits`: the message names the
 *   size (the document's true size, also beyond that buffer), the limit and what is allowed.
 */
export function encodeOpMsg(
  requestId: number,
  responseTo: number,
  document: Document,
  flags = 0,
  limits?: OutgoingLimits,
  sequences?: ReadonlyMap<string, readonly Document[]>,
  extraElements?: Uint8Array,
): Buffer {
  const extra = extraElements === undefined ? 0 : extraElements.length;
  // The document's size as sent: its own and the extra elements', also when it is known only from an encoding failure.
  const check = limits === undefined ? undefined : (size: number): void => checkLimits(size + extra, limits);
  const bson = encodeDocument(document, 'the command', check);
  check?.(bson.length);
  // Each sequence section: kind 1, its size (itself, the identifier and the documents), the identifier as a C string.
  const sections: { identifier: Buffer; documents: Uint8Array[]; size: number }[] = [];
  let length = HEADER_LENGTH + 4 + 1 + bson.length + extra;
  const tooLong = (at: string): WireProtocolError =>
    new WireProtocolError(`the command's OP_MSG would be ${at}, more than maxMessageSizeBytes ${limits?.maxMessageSizeBytes}; nothing was sent`);
  const entries = [...(sequences ?? [])];
  for (const [s, [name, documents]] of entries.entries()) {
    const identifier = Buffer.from(`${name}\0`, 'utf8');
    const encoded: Uint8Array[] = [];
    let size = 4 + identifier.length;
    length += 1 + size;
    for (let i = 0; i < documents.length; i++) {
      const what = `document ${i} of sequence ${name}`;
      const checkOne = limits === undefined ? undefined : (bytes: number): void => {
        if (bytes > limits.maxBsonObjectSize) throw new WireProtocolError(`${what} is ${bytes} bytes, more than maxBsonObjectSize ${limits.maxBsonObjectSize}; nothing was sent`);
      };
      const bytes = encodeDocument(documents[i], what, checkOne);
      checkOne?.(bytes.length);
      encoded.push(bytes);
      size += bytes.length;
      length += bytes.length;
      // A batch too large stops at the document that makes it so: the rest is neither read nor encoded.
      const last = i === documents.length - 1 && s === entries.length - 1;
      if (limits !== undefined && length > limits.maxMessageSizeBytes && !last) throw tooLong(`at least ${length} bytes (at ${what})`);
    }
    sections.push({ identifier, documents: encoded, size });
  }
  if (limits !== undefined && length > limits.maxMessageSizeBytes) throw tooLong(`${length} bytes`);
  const out = Buffer.allocUnsafe(length);
  writeHeader(out, { messageLength: length, requestId, responseTo, opCode: OpCode.OP_MSG });
  out.writeUInt32LE(flags >>> 0, 16);
  out[20] = 0;
  out.set(bson, 21);
  if (extraElements !== undefined && extra > 0) {
    // The elements go where the document's terminating 0 was, then a new terminator; the document's length grows.
    out.set(extraElements, 21 + bson.length - 1);
    out[21 + bson.length - 1 + extra] = 0;
    out.writeInt32LE(bson.length + extra, 21);
  }
  let offset = 21 + bson.length + extra;
  for (const section of sections) {
    out[offset++] = 1;
    out.writeInt32LE(section.size, offset);
    offset += 4;
    out.set(section.identifier, offset);
    offset += section.identifier.length;
    for (const d of section.documents) {
      out.set(d, offset);
      offset += d.length;
    }
  }
  return out;
}

/**
 * The size of the buffer the BSON library serializes into, in bytes: 17 MiB. A string that does not fit is cut short
 * there without an error (only a Binary or Buffer that does not fit throws), so a longer document comes out as valid
 * BSON of about this size that holds less than was given.
 *
 * Source: bson (`serialize`'s internal buffer, 17 MiB by default).
 */
const BSON_BUFFER_BYTES = 17 * 1024 * 1024;

/**
 * `document` as BSON (see {@link SERIALIZE_OPTIONS}); `what` names it in the error. When it cannot be encoded, or
 * comes out within a few bytes of the BSON library's 17 MiB buffer ({@link BSON_BUFFER_BYTES}), where a string may
 * have been cut short, its size is computed (a second reading of the document, only then): a document too large for
 * the server goes to `checkSize` and gets the limit's message with its true size, and one whose BSON is shorter than
 * its size is refused rather than sent without what was cut.
 *
 * @throws {WireProtocolError} as {@link encodeOpMsg} says, or what `checkSize` throws.
 */
function encodeDocument(document: Document, what: string, checkSize: ((size: number) => void) | undefined): Uint8Array {
  let bytes: Uint8Array;
  try {
    bytes = serialize(document, SERIALIZE_OPTIONS);
  } catch (error) {
    if (checkSize !== undefined) {
      const size = sizeOf(document);
      if (size !== undefined) checkSize(size);
    }
    throw new WireProtocolError(`${what} cannot be encoded as BSON: ${(error as Error).message}; nothing was sent`, { cause: error });
  }
  // A cut string leaves at most 3 bytes of the buffer unused (part of a character), and its document ends after it.
  if (bytes.length >= BSON_BUFFER_BYTES - 4) {
    const size = sizeOf(document);
    if (size !== bytes.length) {
      if (checkSize !== undefined && size !== undefined) checkSize(size);
      throw new WireProtocolError(
        `${what} cannot be encoded as BSON: it is ${size ?? `more than ${bytes.length}`} bytes, more than the BSON library's ` +
          `${BSON_BUFFER_BYTES}-byte buffer (which would cut its strings short); nothing was sent`,
      );
    }
  }
  return bytes;
}

/** The document's BSON size, when it can be computed. */
function sizeOf(document: Document): number | undefined {
  try {
    return calculateObjectSize(document, SERIALIZE_OPTIONS);
  } catch {
    return undefined;
  }
}

/** Refuses a command document of `size` bytes beyond `limits` (see {@link encodeOpMsg}). */
function checkLimits(size: number, limits: OutgoingLimits): void {
  const maxDocument = limits.maxBsonObjectSize + COMMAND_SIZE_ALLOWANCE_BYTES;
  if (size > maxDocument) {
    throw new WireProtocolError(
      `the command document is ${size} bytes, more than maxBsonObjectSize ${limits.maxBsonObjectSize} + ` +
        `${COMMAND_SIZE_ALLOWANCE_BYTES} (${maxDocument} bytes allowed); nothing was sent`,
    );
  }
  const length = HEADER_LENGTH + 4 + 1 + size;
  if (length > limits.maxMessageSizeBytes) {
    throw new WireProtocolError(`the command's OP_MSG would be ${length} bytes, more than maxMessageSizeBytes ${limits.maxMessageSizeBytes}; nothing was sent`);
  }
}

/**
 * Decodes the body (the bytes after the header) of an OP_MSG.
 *
 * @throws {WireProtocolError} for unknown required flag bits, a missing or repeated body section, two document
 *   sequences with the same identifier, an unknown section kind, a section that overruns the message, or invalid
 *   BSON (a value that cannot be read as JavaScript included, except in the body document with
 *   `acceptUnreadableValues`).
 */
export function decodeOpMsg(body: Buffer, options: DecodeOptions = {}): OpMsg {
  if (body.length < 5) throw new WireProtocolError(`OP_MSG too short: ${body.length} bytes after the header`);
  const flags = body.readUInt32LE(0);
  const requiredUnknown = flags & 0xffff & ~(OpMsgFlag.checksumPresent | OpMsgFlag.moreToCome);
  if (requiredUnknown !== 0) throw new WireProtocolError(`OP_MSG has unknown required flag bits 0x${requiredUnknown.toString(16)}`);
  const end = flags & OpMsgFlag.checksumPresent ? body.length - 4 : body.length;
  let offset = 4;
  let document: Document | undefined;
  let unreadable: string | undefined;
  const onUnreadable = options.acceptUnreadableValues === true ? (reason: string): void => void (unreadable = reason) : undefined;
  const sequences = new Map<string, Document[]>();
  while (offset < end) {
    const kind = body[offset++];
    if (kind === 0) {
      if (document !== undefined) throw new WireProtocolError('OP_MSG has more than one body section');
      const [doc, size] = readBsonDocument(body, offset, end, onUnreadable);
      document = doc;
      offset += size;
    } else if (kind === 1) {
      if (offset + 4 > end) throw new WireProtocolError('OP_MSG document sequence overruns the message');
      const size = body.readInt32LE(offset);
      const sectionEnd = offset + size;
      if (size < 5 || sectionEnd > end) throw new WireProtocolError(`OP_MSG document sequence has invalid size ${size}`);
      const nul = body.indexOf(0, offset + 4);
      if (nul < 0 || nul >= sectionEnd) throw new WireProtocolError('OP_MSG document sequence identifier is not terminated');
      const identifier = body.toString('utf8', offset + 4, nul);
      if (sequences.has(identifier)) {
        // A second sequence would silently replace the first: the documents of one would be lost.
        const shown = identifier.length > 64 ? `${identifier.slice(0, 64)}...` : identifier;
        throw new WireProtocolError(
          `OP_MSG has two document sequences with the identifier ${JSON.stringify(shown)}; each identifier must be unique per message`,
        );
      }
      const docs: Document[] = [];
      for (let p = nul + 1; p < sectionEnd; ) {
        const [doc, docSize] = readBsonDocument(body, p, sectionEnd);
        docs.push(doc);
        p += docSize;
      }
      sequences.set(identifier, docs);
      offset = sectionEnd;
    } else {
      throw new WireProtocolError(`OP_MSG has unknown section kind ${kind}`);
    }
  }
  if (document === undefined) throw new WireProtocolError('OP_MSG has no body section');
  return { flags, document, sequences, unreadable };
}

/**
 * The BSON elements of `document`: its encoding without the leading int32 length and the trailing 0, to append to
 * another document (see `extraElements` of {@link encodeOpMsg}).
 *
 * @throws {WireProtocolError} when `document` cannot be encoded as BSON.
 */
export function bsonElements(document: Document): Uint8Array {
  const bytes = encodeDocument(document, 'the extra fields', undefined);
  return bytes.slice(4, bytes.length - 1);
}
