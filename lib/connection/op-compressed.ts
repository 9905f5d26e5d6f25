/**
 * OP_COMPRESSED: a message whose body (everything after the header) is compressed. This library speaks zlib (Node's
 * `zlib`), snappy (the optional package `snappy`), zstd (Node's `zlib`, Node.js 22.15 or later) and the no-op
 * compressor; it never compresses the handshake or authentication commands.
 *
 * Source: OP_COMPRESSED spec (wire format; compressor ids; "Messages that MUST NOT be compressed").
 */
import { deflate, deflateSync, inflate, inflateSync } from 'node:zlib';
import { InvalidOptionError } from '../errors';
import { ADDONS_DENIED, addonsDenied } from '../permission-model';
import {
  DEFAULT_MAX_MESSAGE_SIZE_BYTES,
  HEADER_LENGTH,
  OpCode,
  WireProtocolError,
  writeHeader,
  type WireMessage,
} from './wire-protocol';

/** Compressor ids of the OP_COMPRESSED spec. */
export const CompressorId = Object.freeze({ noop: 0, snappy: 1, zlib: 2, zstd: 3 } as const);

/** The name of each compressor id but noop's (the ids {@link checkCompressed} lets through to decompression). */
const COMPRESSOR_NAMES: Readonly<Record<number, CompressorName>> = Object.freeze({
  [CompressorId.snappy]: 'snappy',
  [CompressorId.zlib]: 'zlib',
  [CompressorId.zstd]: 'zstd',
});

/**
 * The compressor names this library can negotiate (the offer's order is the application's, as given in `compressors`).
 * snappy and zstd are usable only where {@link compressorUnavailable} says so.
 *
 * Source: OP_COMPRESSED spec ("Compressor IDs"); URI options spec (`compressors`).
 */
export const SUPPORTED_COMPRESSORS = Object.freeze(['zlib', 'snappy', 'zstd'] as const);

/** A compressor name this library speaks: `zlib`, `snappy`, `zstd` (the last two where {@link compressorUnavailable} allows). */
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
 * The size from which a message is compressed or decompressed on Node's thread pool rather than on the event loop,
 * in bytes: 64 KiB (its body, uncompressed), for every compressor (zlib, snappy, zstd). zlib takes about 1 ms for 64 KiB at the default level, and some 300 ms
 * for 16 MiB, during which nothing else of the process would run; below this size, the round trip to the thread
 * pool costs more than it saves.
 *
 * Source: extension (the Node.js driver runs every zlib call on the thread pool).
 */
export const ZLIB_THREAD_POOL_MIN_BYTES = 64 * 1024;

/**
 * Wraps a whole message (header included) in OP_COMPRESSED with `compressor` (default zlib), on the event loop. `level`
 * is zlib's (-1 = zlib's default, 0..9) and used by zlib only; zstd uses level 3 and snappy has none, as the official
 * driver.
 *
 * @throws {Error} when `compressor` is snappy or zstd and unavailable here ({@link compressorUnavailable}).
 *
 * Source: OP_COMPRESSED spec ("OP_COMPRESSED", "Compressor IDs"); the zstd level is the official driver's.
 */
export function compressMessage(message: Buffer, level = -1, compressor: CompressorName = 'zlib'): Buffer {
  return wrapCompressed(message, compressWith(compressor, message.subarray(HEADER_LENGTH), level), CompressorId[compressor]);
}

/**
 * As {@link compressMessage}, compressing on Node's thread pool (zlib's asynchronous `deflate` or `zstdCompress`,
 * snappy's asynchronous `compress`), so the event loop goes on meanwhile. Resolves to the OP_COMPRESSED message;
 * rejects with the compressor's error (none is expected for a valid level and an available compressor), or with the
 * Error {@link compressMessage} throws for an unavailable one.
 *
 * Source: extension (the official driver compresses every message on the thread pool).
 */
export function compressMessageOnThreadPool(message: Buffer, level = -1, compressor: CompressorName = 'zlib'): Promise<Buffer> {
  const body = message.subarray(HEADER_LENGTH);
  const id = CompressorId[compressor];
  if (compressor === 'snappy') {
    let pending: Promise<Buffer>;
    try {
      pending = snappyModule().compress(body);
    } catch (error) {
      return Promise.reject(error);
    }
    return pending.then((compressed) => wrapCompressed(message, compressed, id));
  }
  return new Promise((resolve, reject) => {
    const done = (error: Error | null, compressed: Buffer): void => {
      if (error !== null) reject(error);
      else resolve(wrapCompressed(message, compressed, id));
    };
    if (compressor === 'zlib') {
      deflate(body, { level }, done);
      return;
    }
    const zstd = nodeZstd();
    if (zstd === undefined) reject(new Error(compressorUnavailable('zstd')));
    else zstd.zstdCompress(body, { params: { [ZSTD_C_COMPRESSION_LEVEL]: ZSTD_LEVEL } }, done);
  });
}

/** The OP_COMPRESSED message carrying `message` (header included), whose body compressor `id` compressed to `compressed`. */
function wrapCompressed(message: Buffer, compressed: Buffer, id: number): Buffer {
  const originalOpCode = message.readInt32LE(12);
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
  out[24] = id;
  compressed.copy(out, 25);
  return out;
}

/**
 * What {@link decompressMessage} accepts.
 *
 * Source: OP_COMPRESSED spec ("MongoDB Handshake Amendment": the server compresses only with a compressor negotiated
 * in the handshake); the size bound is an extension.
 */
export interface DecompressionLimits {
  /**
   * The compressors negotiated in the handshake (those offered, while {@link duringHandshake}). An OP_COMPRESSED is
   * accepted only when this is not empty, and then only with one of these compressor ids or noop (0).
   */
  readonly compressors: readonly CompressorName[];
  /**
   * Whether the handshake is still under way: `compressors` are then those the client offered, none negotiated yet,
   * and a refusal says so ("offered", "during the handshake"). Default false.
   */
  readonly duringHandshake?: boolean;
  /**
   * The largest message accepted once decompressed, header included, in bytes: the connection's maxMessageSizeBytes
   * (see `effectiveMaxMessageSizeBytes`).
   */
  readonly maxMessageSizeBytes: number;
}

/** What the embedded endpoint accepts when it passes no limits: any compressor it speaks, up to 48,000,000 bytes. */
const DEFAULT_LIMITS: DecompressionLimits = {
  compressors: SUPPORTED_COMPRESSORS,
  maxMessageSizeBytes: DEFAULT_MAX_MESSAGE_SIZE_BYTES,
};

/**
 * Unwraps an OP_COMPRESSED message into the message it carries (same request ids, original opcode). Returns other
 * messages unchanged. Checks the compressor and the announced `uncompressedSize` before decompressing, and inflates
 * with an output limit of exactly `uncompressedSize` bytes (zlib and zstd `maxOutputLength`; snappy's length header
 * must equal it), so a message that inflates to more (a "zip bomb") is refused after at most that many bytes, never
 * held in full.
 *
 * `limits` defaults to every compressor this library speaks and 48,000,000 bytes; a connection passes the
 * compressors negotiated on it and its maxMessageSizeBytes.
 *
 * @throws {WireProtocolError} for a truncated body; an OP_COMPRESSED when no compressor was negotiated, or with a
 *   compressor id other than a negotiated one or noop; an `uncompressedSize` that is negative or puts the message
 *   over `limits.maxMessageSizeBytes`; an OP_COMPRESSED inside an OP_COMPRESSED; data that does not decompress, that
 *   inflates beyond `uncompressedSize`, or that holds fewer bytes than announced. Each message names the value and
 *   the limit.
 *
 * Source: OP_COMPRESSED spec ("OP_COMPRESSED", "Compressor IDs"); the limits are an extension.
 */
export function decompressMessage(message: WireMessage, limits: DecompressionLimits = DEFAULT_LIMITS): WireMessage {
  const compressed = checkCompressed(message, limits);
  if (compressed === undefined) return message;
  if (compressed.compressorId === CompressorId.noop) return unwrapped(message, compressed, compressed.data);
  return unwrapped(message, compressed, decompressWith(COMPRESSOR_NAMES[compressed.compressorId], compressed.data, compressed.uncompressedSize));
}

/**
 * Whether {@link decompressMessage} of `message` would read or produce {@link ZLIB_THREAD_POOL_MIN_BYTES} or more with
 * zlib, snappy or zstd: an OP_COMPRESSED whose compressor id is one of these and whose announced `uncompressedSize`,
 * or whose compressed data, is that large. The compressed data counts too: a server may announce a few bytes and send
 * 47 MB that decompress to nothing (empty zlib stored blocks, empty zstd blocks), which takes zlib some 50 ms and zstd
 * some 200 ms to read through. Reads the header fields only; never throws.
 */
export function inflatesLarge(message: WireMessage): boolean {
  const body = message.body;
  return (
    message.header.opCode === OpCode.OP_COMPRESSED &&
    body.length >= 9 &&
    body[8] !== CompressorId.noop &&
    body[8] <= CompressorId.zstd &&
    (body.readInt32LE(4) >= ZLIB_THREAD_POOL_MIN_BYTES || body.length - 9 >= ZLIB_THREAD_POOL_MIN_BYTES)
  );
}

/**
 * As {@link decompressMessage}, decompressing on Node's thread pool (zlib's asynchronous `inflate` or `zstdDecompress`,
 * with the same output limit; snappy's asynchronous `uncompress`, after the same length-header check), so the event
 * loop goes on meanwhile. Resolves to the message carried (or `message` itself when it is not an
 * OP_COMPRESSED); rejects with the {@link WireProtocolError} decompressMessage throws.
 */
export function decompressMessageOnThreadPool(message: WireMessage, limits: DecompressionLimits = DEFAULT_LIMITS): Promise<WireMessage> {
  let compressed: CompressedBody | undefined;
  try {
    compressed = checkCompressed(message, limits);
  } catch (error) {
    return Promise.reject(error);
  }
  if (compressed === undefined) return Promise.resolve(message);
  if (compressed.compressorId === CompressorId.noop) return settleUnwrapped(message, compressed, compressed.data);
  const checked = compressed;
  return decompressWithOnThreadPool(COMPRESSOR_NAMES[checked.compressorId], checked.data, checked.uncompressedSize).then((original) =>
    unwrapped(message, checked, original),
  );
}

/** The checked header fields of an OP_COMPRESSED body, and its compressed data. */
interface CompressedBody {
  readonly originalOpCode: number;
  readonly uncompressedSize: number;
  readonly compressorId: number;
  readonly data: Buffer;
}

/**
 * The header fields of `message` when it is an OP_COMPRESSED, checked against `limits` as {@link decompressMessage}
 * says; undefined for another message.
 *
 * @throws {WireProtocolError} as decompressMessage, for everything but the data itself.
 */
function checkCompressed(message: WireMessage, limits: DecompressionLimits): CompressedBody | undefined {
  if (message.header.opCode !== OpCode.OP_COMPRESSED) return undefined;
  const body = message.body;
  if (body.length < 9) {
    throw new WireProtocolError(`OP_COMPRESSED too short: ${body.length} bytes after the header, at least 9 needed`);
  }
  const originalOpCode = body.readInt32LE(0);
  const uncompressedSize = body.readInt32LE(4);
  const compressorId = body[8];
  const accepted = limits.compressors.map((name) => CompressorId[name]);
  // Before the handshake's reply, the compressors were only offered: the words say which.
  const handshake = limits.duringHandshake === true;
  if (accepted.length === 0) {
    throw new WireProtocolError(
      handshake
        ? `OP_COMPRESSED (compressor id ${compressorId}) received during the handshake, but no compressor was offered`
        : `OP_COMPRESSED (compressor id ${compressorId}) received, but no compressor was negotiated in the handshake`,
    );
  }
  if (compressorId !== CompressorId.noop && !accepted.includes(compressorId as (typeof accepted)[number])) {
    const allowed = limits.compressors.map((name) => `${name} (id ${CompressorId[name]})`).join(', ');
    throw new WireProtocolError(
      handshake
        ? `OP_COMPRESSED uses compressor id ${compressorId} during the handshake, but only the offered ${allowed} or noop (id 0) is accepted`
        : `OP_COMPRESSED uses compressor id ${compressorId}, but only the negotiated ${allowed} or noop (id 0) is accepted`,
    );
  }
  const maxBodyBytes = limits.maxMessageSizeBytes - HEADER_LENGTH;
  if (uncompressedSize < 0 || uncompressedSize > maxBodyBytes) {
    throw new WireProtocolError(
      `OP_COMPRESSED announces an uncompressedSize of ${uncompressedSize} bytes; allowed 0..${maxBodyBytes} ` +
        `(maxMessageSizeBytes ${limits.maxMessageSizeBytes} less the ${HEADER_LENGTH}-byte header)`,
    );
  }
  if (originalOpCode === OpCode.OP_COMPRESSED) throw new WireProtocolError('OP_COMPRESSED wraps another OP_COMPRESSED');
  return { originalOpCode, uncompressedSize, compressorId, data: body.subarray(9) };
}

/**
 * The message `message` carries, once its data decompressed to `original`.
 *
 * @throws {WireProtocolError} when `original` is not the announced size.
 */
function unwrapped(message: WireMessage, compressed: CompressedBody, original: Buffer): WireMessage {
  checkedLength(original, compressed.uncompressedSize);
  return {
    header: { ...message.header, opCode: compressed.originalOpCode, messageLength: HEADER_LENGTH + original.length },
    body: original,
  };
}

/** {@link unwrapped}, as a promise. */
function settleUnwrapped(message: WireMessage, compressed: CompressedBody, original: Buffer): Promise<WireMessage> {
  try {
    return Promise.resolve(unwrapped(message, compressed, original));
  } catch (error) {
    return Promise.reject(error);
  }
}

/** Node's zstd functions (Node.js 22.15 / 23.8 and later), absent from older runtimes and from @types/node 20. */
interface NodeZstd {
  zstdCompressSync(data: Buffer, options?: { params?: Record<number, number> }): Buffer;
  zstdDecompressSync(data: Buffer, options?: { maxOutputLength?: number }): Buffer;
  zstdCompress(data: Buffer, options: { params?: Record<number, number> }, callback: (error: Error | null, result: Buffer) => void): void;
  zstdDecompress(data: Buffer, options: { maxOutputLength?: number }, callback: (error: Error | null, result: Buffer) => void): void;
}

/** zlib.constants.ZSTD_c_compressionLevel, and the level the official driver uses. */
const ZSTD_C_COMPRESSION_LEVEL = 100;
const ZSTD_LEVEL = 3;

/**
 * Why compressor `name` cannot be used in this process, or undefined when it can (zlib, `none` and any other name
 * always: an unknown name is refused elsewhere): zstd needs Node's `zlib.zstdCompress` (Node.js 22.15 / 23.8 or
 * later); snappy needs the optional package `snappy` (loaded on this first call, never with the package), a native
 * addon that Node's permission model must allow (`--allow-addons`). Never throws.
 *
 * Source: extension (the official driver loads the same optional `snappy` package and Node's built-in zstd).
 */
export function compressorUnavailable(name: string): string | undefined {
  if (name === 'zstd') {
    return nodeZstd() === undefined ? `Node.js ${process.version} has no zlib.zstdCompress (Node.js 22.15 or later)` : undefined;
  }
  if (name !== 'snappy') return undefined;
  try {
    snappyModule();
    return undefined;
  } catch (error) {
    // snappy is a native addon: under Node's permission model without --allow-addons its loader fails, and says only
    // that it found no binding for this platform, advising a reinstall that cannot help.
    if ((error as NodeJS.ErrnoException | undefined)?.code !== 'MODULE_NOT_FOUND' && addonsDenied()) return `it is a native addon, and ${ADDONS_DENIED}`;
    // The first line only: Node's MODULE_NOT_FOUND message goes on with the require stack, the application's file paths.
    return `the optional package snappy could not be loaded (npm install snappy): ${String((error as Error | undefined)?.message).split('\n')[0]}`;
  }
}

/**
 * Refuses compressor `name` in an options object (a connection's or the embedded endpoint's) when this process
 * cannot use it.
 *
 * @throws {InvalidOptionError} `compressors`, naming the compressor and {@link compressorUnavailable}'s reason.
 */
export function checkCompressorAvailable(name: string): void {
  const why = compressorUnavailable(name);
  if (why !== undefined) throw new InvalidOptionError('compressors', name, `a compressor available in this process; ${name} is not: ${why}`);
}

function nodeZstd(): NodeZstd | undefined {
  const z = require('node:zlib') as Partial<NodeZstd>;
  return typeof z.zstdCompressSync === 'function' && typeof z.zstdDecompress === 'function' ? (z as NodeZstd) : undefined;
}

let snappy: typeof import('snappy') | undefined;
/**
 * The optional `snappy` package, loaded on the first call; throws Node's error when it is not installed. The `require`
 * sits in a `try` so that bundlers (esbuild, webpack) leave a missing optional package to run time rather than failing
 * the build of an application that never compresses with snappy.
 */
function snappyModule(): typeof import('snappy') {
  if (snappy === undefined) {
    try {
      snappy = require('snappy') as typeof import('snappy');
    } catch (error) {
      throw error;
    }
  }
  return snappy;
}

/**
 * Compresses `data` (a message body, without the 16-byte header) with zlib (at `level`: -1 = zlib's default, 0..9),
 * snappy (raw block format) or zstd (one frame, level 3, as the official driver), on the event loop; returns the
 * compressed bytes only (no OP_COMPRESSED header).
 *
 * @throws {Error} when the compressor is unavailable ({@link compressorUnavailable}).
 *
 * Source: OP_COMPRESSED spec ("Compressor IDs": snappy 1, zlib 2, zstd 3).
 */
export function compressWith(name: CompressorName, data: Buffer, level = -1): Buffer {
  if (name === 'zlib') return deflateSync(data, { level });
  if (name === 'snappy') return snappyModule().compressSync(data);
  const zstd = nodeZstd();
  if (zstd === undefined) throw new Error(compressorUnavailable('zstd'));
  return zstd.zstdCompressSync(data, { params: { [ZSTD_C_COMPRESSION_LEVEL]: ZSTD_LEVEL } });
}

/**
 * Decompresses zlib, snappy or zstd `data` that announces `uncompressedSize` bytes, never allocating more: zlib and
 * zstd are bounded by `maxOutputLength`; snappy's own length header (a varint) must equal `uncompressedSize` before
 * anything is decompressed.
 *
 * @throws {WireProtocolError} for data that does not decompress, whose length header differs from
 *   `uncompressedSize`, that inflates beyond it, or that holds fewer bytes; for zstd where it is unavailable.
 *
 * Source: OP_COMPRESSED spec ("Compressor IDs"); the bound is an extension.
 */
export function decompressWith(name: CompressorName, data: Buffer, uncompressedSize: number): Buffer {
  let out: Buffer;
  if (name === 'zlib') {
    try {
      out = inflateSync(data, { maxOutputLength: Math.max(uncompressedSize, 1) });
    } catch (error) {
      throw codecError('zlib', error, uncompressedSize);
    }
  } else if (name === 'snappy') {
    checkSnappyLength(data, uncompressedSize);
    try {
      out = snappyModule().uncompressSync(data, { asBuffer: true }) as Buffer;
    } catch (error) {
      throw codecError('snappy', error, uncompressedSize);
    }
  } else {
    const zstd = nodeZstd();
    if (zstd === undefined) throw new WireProtocolError(`OP_COMPRESSED zstd: ${compressorUnavailable('zstd')}`);
    try {
      out = zstd.zstdDecompressSync(data, { maxOutputLength: Math.max(uncompressedSize, 1) });
    } catch (error) {
      throw codecError('zstd', error, uncompressedSize);
    }
  }
  return checkedLength(out, uncompressedSize);
}

/**
 * As {@link decompressWith}, on Node's thread pool (zlib's asynchronous `inflate` and `zstdDecompress` with the same
 * `maxOutputLength`, snappy's asynchronous `uncompress`). Rejects with the {@link WireProtocolError} decompressWith
 * throws.
 */
function decompressWithOnThreadPool(name: CompressorName, data: Buffer, uncompressedSize: number): Promise<Buffer> {
  if (name === 'snappy') {
    let pending: Promise<Buffer>;
    try {
      checkSnappyLength(data, uncompressedSize);
      pending = snappyModule().uncompress(data, { asBuffer: true }) as Promise<Buffer>;
    } catch (error) {
      return Promise.reject(error instanceof WireProtocolError ? error : codecError('snappy', error, uncompressedSize));
    }
    return pending.then(
      (out) => checkedLength(out, uncompressedSize),
      (error: unknown) => Promise.reject(codecError('snappy', error, uncompressedSize)),
    );
  }
  const zstd = name === 'zstd' ? nodeZstd() : undefined;
  if (name === 'zstd' && zstd === undefined) return Promise.reject(new WireProtocolError(`OP_COMPRESSED zstd: ${compressorUnavailable('zstd')}`));
  const decompress = zstd === undefined ? inflate : zstd.zstdDecompress.bind(zstd);
  return new Promise((resolve, reject) => {
    decompress(data, { maxOutputLength: Math.max(uncompressedSize, 1) }, (error, out) => {
      if (error !== null) reject(codecError(name, error, uncompressedSize));
      else {
        try {
          resolve(checkedLength(out, uncompressedSize));
        } catch (lengthError) {
          reject(lengthError);
        }
      }
    });
  });
}

/** Refuses snappy `data` whose length header is not `uncompressedSize`, before anything is decompressed. */
function checkSnappyLength(data: Buffer, uncompressedSize: number): void {
  const announced = snappyLength(data);
  if (announced !== uncompressedSize) {
    throw new WireProtocolError(
      `OP_COMPRESSED snappy data announces ${announced ?? 'no valid'} uncompressed bytes, the message ${uncompressedSize}; refused`,
    );
  }
}

/**
 * The error for zlib, snappy or zstd data that failed to decompress within `uncompressedSize` bytes (zlib's names the
 * inflate output limit, as it has since before snappy and zstd).
 */
function codecError(name: CompressorName, error: unknown, uncompressedSize: number): WireProtocolError {
  if ((error as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') {
    const limit = name === 'zlib' ? ' (the inflate output limit, maxOutputLength)' : '';
    return new WireProtocolError(
      `OP_COMPRESSED ${name} data inflates beyond its announced uncompressedSize of ${uncompressedSize} bytes${limit}; refused`,
    );
  }
  return new WireProtocolError(`OP_COMPRESSED ${name} data is invalid: ${(error as Error).message}`);
}

/** `out`, when it holds `uncompressedSize` bytes. @throws {WireProtocolError} otherwise. */
function checkedLength(out: Buffer, uncompressedSize: number): Buffer {
  if (out.length !== uncompressedSize) {
    throw new WireProtocolError(`OP_COMPRESSED announced ${uncompressedSize} bytes but held ${out.length}`);
  }
  return out;
}

/** The uncompressed length snappy's raw format announces (a little-endian base-128 varint of at most 5 bytes). */
function snappyLength(data: Buffer): number | undefined {
  let value = 0;
  for (let i = 0; i < 5 && i < data.length; i++) {
    value += (data[i] & 0x7f) * 2 ** (7 * i);
    if ((data[i] & 0x80) === 0) return value;
  }
  return undefined;
}
