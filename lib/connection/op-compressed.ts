/**
 * OP_COMPRESSED: a message whose body (everything after the header) is compressed. This library speaks zlib (Node's
 * `zlib`) and the no-op compressor; it never compresses the handshake or authentication commands.
 *
 * Source: OP_COMPRESSED spec (wire format; compressor ids; "Messages that MUST NOT be compressed").
 */
import { deflateSync, inflateSync } from 'node:zlib';
import { HEADER_LENGTH, OpCode, WireProtocolError, writeHeader, type WireMessage } from './wire-protocol';

/** Compressor ids of the OP_COMPRESSED spec. */
export const CompressorId = Object.freeze({ noop: 0, snappy: 1, zlib: 2, zstd: 3 } as const);

/** The compressors this library can negotiate, in order of preference. */
export const SUPPORTED_COMPRESSORS = Object.freeze(['zlib'] as const);

/** A compressor name this library speaks. */
export type CompressorName = (typeof SUPPORTED_COMPRESSORS)[number];

/** Commands that MUST NOT be compressed (lower case). */
const UNCOMPRESSIBLE = new Set([
  'hello',
  'ismaster',
  'saslstart',
  'saslcontinue',
  'getnonce',
  'authenticate',
  'createuser',
  'updateuser',
  'copydbsaslstart',
  'copydbgetnonce',
  'copydb',
]);

/** Whether a command named `commandName` may be sent compressed. */
export function mayCompress(commandName: string): boolean {
  return !UNCOMPRESSIBLE.has(commandName.toLowerCase());
}

/**
 * Wraps a whole message (header included) in OP_COMPRESSED with zlib at `level` (-1 = zlib's default, 0..9).
 */
export function compressMessage(message: Buffer, level = -1): Buffer {
  const originalOpCode = message.readInt32LE(12);
  const compressed = deflateSync(message.subarray(HEADER_LENGTH), { level });
  const length = HEADER_LENGTH + 9 + compressed.length;
  const out = Buffer.allocUnsafe(length);
  writeHeader(out, {
    messageLength: length,
    requestId: message.readInt32LE(4),
    responseTo: message.readInt32LE(8),
    opCode: OpCode.OP_COMPRESSED,
  });
  out.writeInt32LE(originalOpCode, 16);
  out.writeInt32LE(message.length - HEADER_LENGTH, 20);
  out[24] = CompressorId.zlib;
  compressed.copy(out, 25);
  return out;
}

/**
 * Unwraps an OP_COMPRESSED message into the message it carries (same request ids, original opcode). Returns other
 * messages unchanged.
 *
 * @throws {WireProtocolError} for a truncated body, an unsupported compressor, data that does not decompress, or a
 *   decompressed size that differs from the announced one.
 */
export function decompressMessage(message: WireMessage): WireMessage {
  if (message.header.opCode !== OpCode.OP_COMPRESSED) return message;
  const body = message.body;
  if (body.length < 9) throw new WireProtocolError('OP_COMPRESSED too short');
  const originalOpCode = body.readInt32LE(0);
  const uncompressedSize = body.readInt32LE(4);
  const compressorId = body[8];
  let original: Buffer;
  if (compressorId === CompressorId.noop) {
    original = body.subarray(9);
  } else if (compressorId === CompressorId.zlib) {
    try {
      original = inflateSync(body.subarray(9));
    } catch (error) {
      throw new WireProtocolError(`OP_COMPRESSED zlib data is invalid: ${(error as Error).message}`);
    }
  } else {
    throw new WireProtocolError(`OP_COMPRESSED uses unsupported compressor id ${compressorId}`);
  }
  if (original.length !== uncompressedSize) {
    throw new WireProtocolError(`OP_COMPRESSED announced ${uncompressedSize} bytes but held ${original.length}`);
  }
  return {
    header: { ...message.header, opCode: originalOpCode, messageLength: HEADER_LENGTH + original.length },
    body: original,
  };
}
