/**
 * Fuzzing the wire-protocol framing and decoders with fast-check. Whatever bytes a server sends, cut into chunks
 * however the network cuts them, the MessageFramer and the decoders (OP_COMPRESSED, OP_MSG, OP_REPLY, OP_QUERY)
 * either produce messages or throw WireProtocolError, never another error, never a message over the limits; and
 * valid messages reassemble exactly at any chunk boundaries. `npm test` runs a fixed seed; `npm run fuzz` runs
 * FUZZ_RUNS (20000) of each property.
 */
import { expect } from 'chai';
import * as fc from 'fast-check';
import { deflateSync } from 'node:zlib';
import zlib = require('node:zlib');
import type { Document } from 'bson';
import { CompressorId, decompressMessage, type CompressorName } from '../../lib/connection/op-compressed';
import { decodeOpMsg, encodeOpMsg } from '../../lib/connection/op-msg';
import { decodeOpQuery, decodeOpReply, encodeOpReply } from '../../lib/connection/op-query';
import {
  HEADER_LENGTH,
  MessageFramer,
  OpCode,
  WireProtocolError,
  writeHeader,
  type WireMessage,
} from '../../lib/connection/wire-protocol';
import { fuzzParameters } from '../support/fuzz';

/** The message size limit of the fuzzed framers: small, so random lengths often fall on both sides of it. */
const LIMIT = 4096;

/** Splits `bytes` at the given cut points (any numbers; taken modulo the length). */
function chunk(bytes: Buffer, cuts: readonly number[]): Buffer[] {
  const points = [...new Set(cuts.map((c) => (bytes.length === 0 ? 0 : c % bytes.length)))].sort((a, b) => a - b);
  const out: Buffer[] = [];
  let from = 0;
  for (const p of points) {
    if (p > from) out.push(bytes.subarray(from, p));
    from = Math.max(from, p);
  }
  out.push(bytes.subarray(from));
  return out;
}

/** Runs `fn`; returns what it returned, or the error it threw if that is a WireProtocolError (any other fails). */
function wireOnly<T>(fn: () => T): T | WireProtocolError {
  try {
    return fn();
  } catch (error) {
    if (!(error instanceof WireProtocolError)) {
      throw new Error(`expected a WireProtocolError, got ${String(error)}`, { cause: error });
    }
    return error;
  }
}

/** The messages of `stream` framed in one piece by a plain loop: the reference the chunked framer must agree with. */
function referenceFrames(stream: Buffer, limit: number): { messages: Buffer[]; error: boolean } {
  const messages: Buffer[] = [];
  let at = 0;
  while (stream.length - at >= 4) {
    const length = stream.readInt32LE(at);
    if (length < HEADER_LENGTH || length > limit) return { messages, error: true };
    if (stream.length - at < length) break;
    messages.push(stream.subarray(at, at + length));
    at += length;
  }
  return { messages, error: false };
}

/** Decodes a framed message as a client would (decompress, then by opcode); every failure must be a WireProtocolError. */
function decodeAll(message: WireMessage, compressors: readonly CompressorName[]): void {
  expect(message.header.messageLength).to.be.within(HEADER_LENGTH, LIMIT);
  const unwrapped = wireOnly(() => decompressMessage(message, { compressors, maxMessageSizeBytes: LIMIT }));
  if (unwrapped instanceof WireProtocolError) return;
  expect(unwrapped.body.length).to.be.at.most(LIMIT - HEADER_LENGTH);
  expect(unwrapped.header.messageLength).to.equal(HEADER_LENGTH + unwrapped.body.length);
  wireOnly(() => decodeOpMsg(unwrapped.body));
  wireOnly(() => decodeOpReply(unwrapped.body));
  wireOnly(() => decodeOpQuery(unwrapped.body));
}

const documentArb: fc.Arbitrary<Document> = fc.dictionary(
  fc.string({ maxLength: 8 }).filter((k) => !k.includes('\0')),
  fc.oneof(fc.integer(), fc.string({ maxLength: 40 }), fc.boolean(), fc.constant(null)),
  { maxKeys: 6 },
);

/** One message-like piece of a hostile stream: mostly well framed, with random or mutated contents. */
const pieceArb: fc.Arbitrary<Buffer> = fc.oneof(
  // random bytes
  fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b)),
  // a header with a length that may or may not match, a known or random opcode, random body bytes
  fc
    .record({
      lengthDelta: fc.oneof(fc.constant(0), fc.integer({ min: -20, max: 20 }), fc.integer()),
      opCode: fc.oneof(fc.constantFrom(OpCode.OP_MSG, OpCode.OP_REPLY, OpCode.OP_QUERY, OpCode.OP_COMPRESSED), fc.integer()),
      body: fc.uint8Array({ maxLength: 200 }),
    })
    .map(({ lengthDelta, opCode, body }) => {
      const out = Buffer.alloc(HEADER_LENGTH + body.length);
      writeHeader(out, { messageLength: (out.length + lengthDelta) | 0, requestId: 1, responseTo: 0, opCode });
      out.set(body, HEADER_LENGTH);
      return out;
    }),
  // a valid OP_MSG or OP_REPLY with a few bytes flipped
  fc
    .record({
      document: documentArb,
      reply: fc.boolean(),
      flips: fc.array(fc.record({ at: fc.nat(), value: fc.integer({ min: 0, max: 255 }) }), { maxLength: 3 }),
    })
    .map(({ document, reply, flips }) => {
      const out = Buffer.from(reply ? encodeOpReply(1, 0, document) : encodeOpMsg(1, 0, document));
      for (const { at, value } of flips) out[at % out.length] = value;
      return out;
    }),
  // an OP_COMPRESSED with any compressor id, an announced size near, below or far above the truth, and zlib data
  // that may be a bomb (zeros far beyond the limit), valid, or damaged
  fc
    .record({
      inflated: fc.oneof(fc.integer({ min: 0, max: 300 }), fc.constant(64 * 1024)),
      announcedDelta: fc.oneof(fc.constant(0), fc.integer({ min: -10, max: 10 }), fc.integer()),
      compressorId: fc.oneof(fc.constantFrom(CompressorId.noop, CompressorId.zlib), fc.integer({ min: 0, max: 255 })),
      damage: fc.option(fc.nat()),
    })
    .map(({ inflated, announcedDelta, compressorId, damage }) => {
      const plain = Buffer.alloc(inflated, 7);
      const data = compressorId === CompressorId.zlib ? Buffer.from(deflateSync(plain)) : plain;
      if (damage !== null && data.length > 0) data[damage % data.length] ^= 0x55;
      const out = Buffer.alloc(HEADER_LENGTH + 9 + data.length);
      writeHeader(out, { messageLength: out.length, requestId: 1, responseTo: 0, opCode: OpCode.OP_COMPRESSED });
      out.writeInt32LE(OpCode.OP_MSG, 16);
      out.writeInt32LE((inflated + announcedDelta) | 0, 20);
      out[24] = compressorId;
      data.copy(out, 25);
      return out;
    }),
);

const compressorsArb = fc.constantFrom<readonly CompressorName[]>([], ['zlib']);
const cutsArb = fc.array(fc.nat(), { maxLength: 12 });

describe('wire-protocol framing and decoders (fuzzed)', function () {
  /** The largest output any inflate was allowed (maxOutputLength) or produced, in bytes; Infinity when unbounded. */
  let largestInflate = 0;
  const inflateSync = zlib.inflateSync;
  before(function () {
    // Every inflate must carry an output limit within the message limit: that is what stops a bomb early. (The
    // module object itself, as lib/connection/op-compressed.ts reads `inflateSync` from it at each call.)
    zlib.inflateSync = ((data: zlib.InputType, options?: zlib.ZlibOptions) => {
      largestInflate = Math.max(largestInflate, options?.maxOutputLength ?? Number.POSITIVE_INFINITY);
      const out = inflateSync(data, options);
      largestInflate = Math.max(largestInflate, out.length);
      return out;
    }) as typeof zlib.inflateSync;
  });
  after(function () {
    zlib.inflateSync = inflateSync;
  });

  it('any byte stream, chunked any way: messages within the limit, or WireProtocolError only; the same as unchunked', function () {
    fc.assert(
      fc.property(fc.array(pieceArb, { maxLength: 6 }), cutsArb, compressorsArb, (pieces, cuts, compressors) => {
        largestInflate = 0;
        const stream = Buffer.concat(pieces);
        const reference = referenceFrames(stream, LIMIT);
        const framer = new MessageFramer(LIMIT);
        const framed: WireMessage[] = [];
        let failed = false;
        for (const piece of chunk(stream, cuts)) {
          const out = wireOnly(() => framer.push(piece));
          if (out instanceof WireProtocolError) {
            failed = true;
            break;
          }
          framed.push(...out);
        }
        expect(failed).to.equal(reference.error);
        if (!failed) expect(framed.length).to.equal(reference.messages.length);
        framed.forEach((m, i) => {
          const expected = reference.messages[i];
          expect(m.header.messageLength).to.equal(expected.length);
          expect(m.body.equals(expected.subarray(HEADER_LENGTH))).to.equal(true);
          decodeAll(m, compressors);
        });
        expect(largestInflate, 'inflate output limit').to.be.at.most(LIMIT - HEADER_LENGTH);
      }),
      fuzzParameters(300),
    );
  });

  it('valid OP_MSG and OP_REPLY messages split at any chunk boundaries reassemble exactly', function () {
    fc.assert(
      fc.property(fc.array(fc.tuple(documentArb, fc.boolean()), { minLength: 1, maxLength: 6 }), cutsArb, (docs, cuts) => {
        const messages = docs.map(([document, reply], i) => (reply ? encodeOpReply(i, 7, document) : encodeOpMsg(i, 7, document)));
        const framer = new MessageFramer(LIMIT);
        const framed = chunk(Buffer.concat(messages), cuts).flatMap((piece) => framer.push(piece));
        expect(framed.map((m) => m.header.requestId)).to.deep.equal(docs.map((_, i) => i));
        framed.forEach((m, i) => {
          expect(m.header).to.deep.equal({
            messageLength: messages[i].length,
            requestId: i,
            responseTo: 7,
            opCode: docs[i][1] ? OpCode.OP_REPLY : OpCode.OP_MSG,
          });
          expect(m.body.equals(messages[i].subarray(HEADER_LENGTH))).to.equal(true);
          const decoded = docs[i][1] ? decodeOpReply(m.body) : decodeOpMsg(m.body).document;
          expect(decoded).to.deep.equal(docs[i][0]);
        });
        expect(framer.push(Buffer.alloc(0))).to.deep.equal([]);
      }),
      fuzzParameters(200),
    );
  });
});
