/**
 * The legacy OP_QUERY request and OP_REPLY reply. Clients no longer send commands this way, but many still open a
 * connection with an OP_QUERY legacy hello; the embedded endpoint answers it with OP_REPLY, as mongod does.
 *
 * Source: MongoDB wire protocol, "Legacy Opcodes" (OP_QUERY, OP_REPLY).
 */
import { serialize, type Document } from 'bson';
import { HEADER_LENGTH, OpCode, readBsonDocument, WireProtocolError, writeHeader } from './wire-protocol';

/** A decoded OP_QUERY. */
export interface OpQuery {
  readonly flags: number;
  /** `<db>.<collection>`; commands go to `<db>.$cmd`. */
  readonly fullCollectionName: string;
  readonly numberToSkip: number;
  readonly numberToReturn: number;
  readonly query: Document;
}

/** Encodes an OP_QUERY (used by tests acting as legacy clients). */
export function encodeOpQuery(requestId: number, fullCollectionName: string, query: Document): Buffer {
  const name = Buffer.from(`${fullCollectionName}\0`, 'utf8');
  const bson = serialize(query);
  const length = HEADER_LENGTH + 4 + name.length + 8 + bson.length;
  const out = Buffer.allocUnsafe(length);
  writeHeader(out, { messageLength: length, requestId, responseTo: 0, opCode: OpCode.OP_QUERY });
  out.writeInt32LE(0, 16);
  name.copy(out, 20);
  out.writeInt32LE(0, 20 + name.length);
  out.writeInt32LE(-1, 24 + name.length);
  out.set(bson, 28 + name.length);
  return out;
}

/**
 * Decodes the body of an OP_QUERY.
 *
 * @throws {WireProtocolError} when the collection name is not terminated or the query document is invalid.
 */
export function decodeOpQuery(body: Buffer): OpQuery {
  if (body.length < 4) throw new WireProtocolError('OP_QUERY too short');
  const nul = body.indexOf(0, 4);
  if (nul < 0 || nul + 9 > body.length) throw new WireProtocolError('OP_QUERY collection name is not terminated');
  const [query] = readBsonDocument(body, nul + 9, body.length);
  return {
    flags: body.readInt32LE(0),
    fullCollectionName: body.toString('utf8', 4, nul),
    numberToSkip: body.readInt32LE(nul + 1),
    numberToReturn: body.readInt32LE(nul + 5),
    query,
  };
}

/** Encodes an OP_REPLY carrying one document, in answer to request `responseTo`. */
export function encodeOpReply(requestId: number, responseTo: number, document: Document): Buffer {
  const bson = serialize(document);
  const length = HEADER_LENGTH + 20 + bson.length;
  const out = Buffer.allocUnsafe(length);
  writeHeader(out, { messageLength: length, requestId, responseTo, opCode: OpCode.OP_REPLY });
  out.writeInt32LE(0, 16); // responseFlags
  out.writeBigInt64LE(0n, 20); // cursorID
  out.writeInt32LE(0, 28); // startingFrom
  out.writeInt32LE(1, 32); // numberReturned
  out.set(bson, 36);
  return out;
}

/**
 * Decodes the first document of an OP_REPLY body.
 *
 * @throws {WireProtocolError} when it holds no document or an invalid one.
 */
export function decodeOpReply(body: Buffer): Document {
  if (body.length < 20) throw new WireProtocolError('OP_REPLY too short');
  if (body.readInt32LE(16) < 1) throw new WireProtocolError('OP_REPLY holds no document');
  return readBsonDocument(body, 20, body.length)[0];
}
