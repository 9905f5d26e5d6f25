import { expect } from 'chai';
import { serialize, type Document } from 'bson';
import { inspect } from 'node:util';
import { deflateSync } from 'node:zlib';
import { compressMessage, compressMessageOnThreadPool, decompressMessage, mayCompress, type DecompressionLimits } from '../../lib/connection/op-compressed';
import { decodeOpMsg, encodeOpMsg } from '../../lib/connection/op-msg';
import {
  COALESCE_BUFFER_BYTES,
  effectiveMaxMessageSizeBytes,
  HEADER_LENGTH,
  MessageFramer,
  OpCode,
  SMALL_CHUNK_BYTES,
  WireProtocolError,
  writeHeader,
  type WireMessage,
} from '../../lib/connection/wire-protocol';
import { opCompressed, zlibBomb } from '../support/hostile-server';

/** Runs `fn` while counting the calls of Buffer.concat and the bytes they copy. */
function countingConcat<T>(fn: () => T): { result: T; calls: number; bytesCopied: number } {
  const original = Buffer.concat;
  let calls = 0;
  let bytesCopied = 0;
  Buffer.concat = ((list: readonly Uint8Array[], totalLength?: number) => {
    const out = original(list, totalLength);
    calls++;
    bytesCopied += out.length;
    return out;
  }) as typeof Buffer.concat;
  try {
    return { result: fn(), calls, bytesCopied };
  } finally {
    Buffer.concat = original;
  }
}

/** A whole message of `length` bytes (header included) with request id `requestId` and a recognizable body. */
function messageOf(length: number, requestId: number): Buffer {
  const out = Buffer.alloc(length);
  writeHeader(out, { messageLength: length, requestId, responseTo: 0, opCode: OpCode.OP_MSG });
  for (let i = HEADER_LENGTH; i < length; i += 4096) out[i] = (i / 4096) & 0xff;
  return out;
}

/** A bare header of a `length`-byte message with opcode `opCode`. */
function header(length: number, opCode: number): Buffer {
  const out = Buffer.alloc(HEADER_LENGTH);
  writeHeader(out, { messageLength: length, requestId: 1, responseTo: 9, opCode });
  return out;
}

/** Feeds `bytes` to `framer` in chunks of `size` bytes; returns every message framed. */
function feed(framer: MessageFramer, bytes: Buffer, size: number): WireMessage[] {
  const out: WireMessage[] = [];
  for (let at = 0; at < bytes.length; at += size) out.push(...framer.push(bytes.subarray(at, at + size)));
  return out;
}

/** A kind-1 section: the document sequence `identifier` holding `documents`. */
function sequence(identifier: string, ...documents: object[]): Buffer {
  const docs = documents.map((d) => Buffer.from(serialize(d)));
  const id = Buffer.from(`${identifier}\0`);
  const size = Buffer.alloc(4);
  size.writeInt32LE(4 + id.length + docs.reduce((n, d) => n + d.length, 0));
  return Buffer.concat([Buffer.from([1]), size, id, ...docs]);
}

describe('wire protocol (OP_MSG framing)', function () {
  it('encodes a header and one body section that decode back to the same document', function () {
    const bytes = encodeOpMsg(7, 3, { ping: 1, $db: 'admin' });
    expect(bytes.readInt32LE(0)).to.equal(bytes.length);
    expect(bytes.readInt32LE(4)).to.equal(7);
    expect(bytes.readInt32LE(8)).to.equal(3);
    expect(bytes.readInt32LE(12)).to.equal(OpCode.OP_MSG);
    const msg = decodeOpMsg(bytes.subarray(HEADER_LENGTH));
    expect(msg.document).to.deep.equal({ ping: 1, $db: 'admin' });
    expect(msg.flags).to.equal(0);
  });

  it('encodes every value the BSON library encodes, to the same bytes, calling a toBSON once', function () {
    let toBSONCalls = 0;
    const documents = [
      { ping: 1, bytes: new ArrayBuffer(4) },
      { ping: 1, floats: new Float64Array([1.5, 2.5]) },
      { ping: 1, ints: new Int32Array([1, 2, 3]) },
      { ping: 1, view: new DataView(new ArrayBuffer(2)) },
      { ping: 1, buffer: Buffer.from('abc'), missing: undefined },
      {
        ping: 1,
        custom: {
          toBSON() {
            toBSONCalls++;
            return { n: toBSONCalls };
          },
        },
      },
    ];
    for (const document of documents) {
      toBSONCalls = 0;
      const expected = Buffer.from(serialize(document, { ignoreUndefined: false }));
      toBSONCalls = 0;
      const limits = { maxBsonObjectSize: 16 * 1024 * 1024, maxMessageSizeBytes: 48_000_000 };
      const message = encodeOpMsg(1, 0, document, 0, limits);
      expect(message.subarray(21), Object.keys(document)[1]).to.deep.equal(expected);
      if ('custom' in document) expect(toBSONCalls).to.equal(1);
    }
  });

  it('decodes document sequences (kind 1) and ignores a trailing checksum', function () {
    const body = Buffer.from(serialize({ insert: 'c' }));
    const docs = [Buffer.from(serialize({ a: 1 })), Buffer.from(serialize({ a: 2 }))];
    const id = Buffer.from('documents\0');
    const seqSize = Buffer.alloc(4);
    seqSize.writeInt32LE(4 + id.length + docs[0].length + docs[1].length);
    const flags = Buffer.alloc(4);
    flags.writeUInt32LE(1); // checksumPresent
    const msg = decodeOpMsg(Buffer.concat([flags, Buffer.from([0]), body, Buffer.from([1]), seqSize, id, ...docs, Buffer.alloc(4)]));
    expect(msg.document).to.deep.equal({ insert: 'c' });
    expect(msg.sequences.get('documents')).to.deep.equal([{ a: 1 }, { a: 2 }]);
  });

  it('encodes document sequences (kind 1) after the body, in order, byte for byte as the spec lays them out', function () {
    const sequences = new Map<string, Document[]>([['documents', [{ a: 1 }, { a: 'é', b: undefined }]], ['ops', []]]);
    const bytes = encodeOpMsg(5, 0, { insert: 'c', $db: 'db' }, 0, undefined, sequences);
    const body = Buffer.from(serialize({ insert: 'c', $db: 'db' }));
    const docs = [Buffer.from(serialize({ a: 1 })), Buffer.from(serialize({ a: 'é', b: null }))];
    const section = (identifier: string, documents: Buffer[]): Buffer => {
      const id = Buffer.from(`${identifier}\0`);
      const size = Buffer.alloc(4);
      size.writeInt32LE(4 + id.length + documents.reduce((n, d) => n + d.length, 0));
      return Buffer.concat([Buffer.from([1]), size, id, ...documents]);
    };
    expect(bytes.readInt32LE(0)).to.equal(bytes.length);
    expect(bytes.subarray(16)).to.deep.equal(Buffer.concat([Buffer.alloc(4), Buffer.from([0]), body, section('documents', docs), section('ops', [])]));
    const decoded = decodeOpMsg(bytes.subarray(HEADER_LENGTH));
    expect(decoded.document).to.deep.equal({ insert: 'c', $db: 'db' });
    expect([...decoded.sequences]).to.deep.equal([['documents', [{ a: 1 }, { a: 'é', b: null }]], ['ops', []]]);
  });

  it('refuses a sequence document beyond maxBsonObjectSize, a message beyond maxMessageSizeBytes, and one that cannot be encoded, naming it', function () {
    const limits = { maxBsonObjectSize: 1024, maxMessageSizeBytes: 4096 };
    const seq = (documents: Document[]) => new Map([['documents', documents]]);
    // 20 documents of about 1000 bytes: more than a command document may hold (1024 + 16 KiB), allowed as a sequence.
    const batch = Array.from({ length: 20 }, () => ({ s: 'x'.repeat(980) }));
    const roomy = { maxBsonObjectSize: 1024, maxMessageSizeBytes: 48_000 };
    expect(() => encodeOpMsg(1, 0, { insert: 'c', documents: batch }, 0, roomy)).to.throw(WireProtocolError, /more than maxBsonObjectSize 1024 \+ 16384/);
    expect(encodeOpMsg(1, 0, { insert: 'c' }, 0, roomy, seq(batch)).length).to.be.above(1024 + 16 * 1024);
    // A document of exactly maxBsonObjectSize is allowed: 1024 bytes, its string of 1024 - 4 - 1 - 2 - 4 - 1 - 1 characters.
    const exact = { s: 'x'.repeat(1024 - 13) };
    expect(serialize(exact).length).to.equal(1024);
    expect(decodeOpMsg(encodeOpMsg(1, 0, { insert: 'c' }, 0, limits, seq([exact])).subarray(HEADER_LENGTH)).sequences.get('documents')).to.deep.equal([exact]);
    expect(() => encodeOpMsg(1, 0, { insert: 'c' }, 0, limits, seq([{ s: 'x' }, { s: 'x'.repeat(1100) }]))).to.throw(
      WireProtocolError,
      /^document 1 of sequence documents is 11\d\d bytes, more than maxBsonObjectSize 1024; nothing was sent$/,
    );
    expect(() => encodeOpMsg(1, 0, { insert: 'c' }, 0, limits, seq(Array.from({ length: 5 }, () => ({ s: 'x'.repeat(900) }))))).to.throw(
      WireProtocolError,
      /^the command's OP_MSG would be 4\d{3} bytes, more than maxMessageSizeBytes 4096; nothing was sent$/,
    );
    const cycle: Document = {};
    cycle.self = cycle;
    expect(() => encodeOpMsg(1, 0, { insert: 'c' }, 0, limits, seq([{}, cycle]))).to.throw(WireProtocolError, /^document 1 of sequence documents cannot be encoded as BSON: /);
  });

  it('stops encoding a batch at the document that takes the message past maxMessageSizeBytes', function () {
    const limits = { maxBsonObjectSize: 1024, maxMessageSizeBytes: 4096 };
    let encoded = 0;
    const documents = Array.from({ length: 50 }, () => ({ toBSON: () => (encoded++, { s: 'x'.repeat(900) }) }));
    expect(() => encodeOpMsg(1, 0, { insert: 'c' }, 0, limits, new Map([['documents', documents]]))).to.throw(
      WireProtocolError,
      /^the command's OP_MSG would be at least 4\d{3} bytes \(at document 4 of sequence documents\), more than maxMessageSizeBytes 4096; nothing was sent$/,
    );
    expect(encoded).to.equal(5);
  });

  it('refuses a document beyond the BSON library\'s 17 MiB buffer, which cuts its strings short, naming its true size', function () {
    const MiB = 1024 * 1024;
    const limits = { maxBsonObjectSize: 16 * MiB, maxMessageSizeBytes: 48_000_000 };
    const huge = { s: 'x'.repeat(20 * MiB) };
    const size = 20 * MiB + 13;
    expect(() => encodeOpMsg(1, 0, { insert: 'c' }, 0, limits, new Map([['documents', [huge]]]))).to.throw(
      WireProtocolError,
      new RegExp(`^document 0 of sequence documents is ${size} bytes, more than maxBsonObjectSize ${16 * MiB}; nothing was sent$`),
    );
    expect(() => encodeOpMsg(1, 0, { insert: 'c', ...huge }, 0, limits)).to.throw(WireProtocolError, new RegExp(`^the command document is ${size + 14} bytes, more than`));
    // A server announcing larger limits, or none given: refused rather than sent cut short.
    const roomy = { maxBsonObjectSize: 32 * MiB, maxMessageSizeBytes: 48_000_000 };
    for (const message of [
      () => encodeOpMsg(1, 0, { insert: 'c' }, 0, roomy, new Map([['documents', [huge]]])),
      () => encodeOpMsg(1, 0, { insert: 'c' }, 0, undefined, new Map([['documents', [{ a: 'x'.repeat(10 * MiB), b: 'y'.repeat(10 * MiB) }]]])),
      () => encodeOpMsg(1, 0, { insert: 'c', ...huge }, 0, roomy),
      () => encodeOpMsg(1, 0, { insert: 'c', ...huge }),
    ]) {
      expect(message).to.throw(WireProtocolError, /cannot be encoded as BSON: it is \d+ bytes, more than the BSON library's 17825792-byte buffer/);
    }
    // Up to the buffer, as before.
    const fits = encodeOpMsg(1, 0, { insert: 'c' }, 0, roomy, new Map([['documents', [{ s: 'x'.repeat(17 * MiB - 64) }]]]));
    expect(decodeOpMsg(fits.subarray(HEADER_LENGTH)).sequences.get('documents')?.[0].s).to.have.length(17 * MiB - 64);
  });

  const malformed: [string, Buffer, RegExp][] = [
    ['too short', Buffer.alloc(3), /too short/],
    ['unknown required flag bits', Buffer.concat([Buffer.from([4, 0, 0, 0, 0]), Buffer.from(serialize({ ok: 1 }))]), /unknown required flag/],
    ['an unknown section kind', Buffer.concat([Buffer.alloc(4), Buffer.from([9])]), /unknown section kind 9/],
    ['no body section', Buffer.alloc(4), /too short|no body section/],
    ['two body sections', Buffer.concat([Buffer.alloc(4), Buffer.from([0]), Buffer.from(serialize({})), Buffer.from([0]), Buffer.from(serialize({}))]), /more than one body/],
    ['a document overrunning the message', Buffer.concat([Buffer.alloc(4), Buffer.from([0, 50, 0, 0, 0, 0])]), /invalid size 50/],
    ['invalid BSON', Buffer.concat([Buffer.alloc(4), Buffer.from([0, 8, 0, 0, 0, 0x77, 0x61, 0, 0])]), /invalid BSON/],
    [
      'two document sequences with the same identifier',
      Buffer.concat([Buffer.alloc(4), Buffer.from([0]), Buffer.from(serialize({ ok: 1 })), sequence('documents', { a: 1 }), sequence('documents', { a: 2 })]),
      /two document sequences with the identifier "documents"; each identifier must be unique per message/,
    ],
  ];
  for (const [what, body, message] of malformed) {
    it(`rejects an OP_MSG with ${what}`, function () {
      expect(() => decodeOpMsg(body)).to.throw(WireProtocolError, message);
    });
  }

  it('frames messages split across chunks and several messages in one chunk', function () {
    const a = encodeOpMsg(1, 0, { a: 'x'.repeat(100) });
    const b = encodeOpMsg(2, 0, { b: 2 });
    const framer = new MessageFramer();
    const all = Buffer.concat([a, b]);
    expect(framer.push(all.subarray(0, 3))).to.have.length(0);
    expect(framer.push(all.subarray(3, 50))).to.have.length(0);
    const out = framer.push(all.subarray(50));
    expect(out.map((m) => m.header.requestId)).to.deep.equal([1, 2]);
    expect(decodeOpMsg(out[0].body).document).to.deep.equal({ a: 'x'.repeat(100) });
  });

  it('rejects a message longer than maxMessageSizeBytes, or shorter than a header', function () {
    const header = Buffer.alloc(16);
    header.writeInt32LE(1001, 0);
    expect(() => new MessageFramer(1000).push(header)).to.throw(
      WireProtocolError,
      /message length 1001 is outside the allowed range 16\.\.1000 bytes \(maxMessageSizeBytes is 1000\)/,
    );
    header.writeInt32LE(4, 0);
    expect(() => new MessageFramer().push(header)).to.throw(WireProtocolError, /message length 4/);
  });

  it('refuses an oversized length as soon as its 4 bytes are there, even split over chunks', function () {
    const header = Buffer.alloc(4);
    header.writeInt32LE(600_000_000, 0);
    const framer = new MessageFramer();
    expect(framer.push(header.subarray(0, 1))).to.deep.equal([]);
    expect(framer.push(header.subarray(1, 3))).to.deep.equal([]);
    expect(() => framer.push(header.subarray(3))).to.throw(WireProtocolError, /600000000 is outside the allowed range 16\.\.48000000/);
  });

  it('frames a 48,000,000-byte reply in 64 KiB chunks with one copy (one Buffer.concat of 48,000,000 bytes)', function () {
    const big = messageOf(48_000_000, 5);
    const framer = new MessageFramer();
    const { result, calls, bytesCopied } = countingConcat(() => feed(framer, big, 64 * 1024));
    expect(result).to.have.length(1);
    expect(result[0].header).to.deep.equal({ messageLength: 48_000_000, requestId: 5, responseTo: 0, opCode: OpCode.OP_MSG });
    expect(result[0].body.equals(big.subarray(HEADER_LENGTH))).to.equal(true);
    expect({ calls, bytesCopied }).to.deep.equal({ calls: 1, bytesCopied: 48_000_000 });
  });

  it('assembles each message with at most one Buffer.concat however the stream is cut: 1-byte chunks of three messages', function () {
    const messages = [messageOf(16 * 1024, 1), messageOf(16, 2), messageOf(3000, 3)];
    const stream = Buffer.concat(messages);
    const framer = new MessageFramer();
    const { result, calls, bytesCopied } = countingConcat(() => feed(framer, stream, 1));
    expect(result.map((m) => m.header.requestId)).to.deep.equal([1, 2, 3]);
    result.forEach((m, i) => expect(m.body.equals(messages[i].subarray(HEADER_LENGTH))).to.equal(true));
    expect({ calls, bytesCopied }).to.deep.equal({ calls: 3, bytesCopied: stream.length });
  });

  it('holds a message sliced into 1-byte chunks in 64 KiB buffers, not one Buffer per chunk (200 bytes of heap each)', function () {
    // A server can trickle a reply of up to maxMessageSizeBytes one byte per TCP segment: kept one by one, 1 MiB of
    // it held 194 MB of heap, and 48,000,000 bytes would exhaust the heap before the reply completes.
    const big = messageOf(1024 * 1024, 7);
    const framer = new MessageFramer();
    const held = (): number => (framer as unknown as { chunks: Buffer[] }).chunks.length;
    let framed = 0;
    for (let at = 0; at < big.length - 1; at++) framed += framer.push(big.subarray(at, at + 1)).length;
    expect(framed).to.equal(0);
    expect(framer.bufferedBytes).to.equal(big.length - 1);
    expect(held()).to.be.at.most(Math.ceil(big.length / COALESCE_BUFFER_BYTES) + 1);
    const [message] = framer.push(big.subarray(big.length - 1));
    expect(message.body.equals(big.subarray(HEADER_LENGTH))).to.equal(true);
    expect({ held: held(), buffered: framer.bufferedBytes }).to.deep.equal({ held: 0, buffered: 0 });
  });

  it('holds a message sliced into 4 KiB and 1-byte chunks by turns in one 64 KiB buffer, not one per 1-byte chunk', function () {
    // Each 1-byte chunk after a 4 KiB one took a new 64 KiB buffer: 20 MB of such a reply held 340 MB of buffers.
    const big = messageOf(2_000_000, 8);
    const framer = new MessageFramer();
    let at = 0;
    while (at + SMALL_CHUNK_BYTES + 1 < big.length) {
      framer.push(big.subarray(at, at + SMALL_CHUNK_BYTES));
      framer.push(big.subarray(at + SMALL_CHUNK_BYTES, at + SMALL_CHUNK_BYTES + 1));
      at += SMALL_CHUNK_BYTES + 1;
    }
    const chunks = (framer as unknown as { chunks: Buffer[] }).chunks;
    const coalescing = new Set(chunks.map((chunk) => chunk.buffer).filter((buffer) => buffer !== big.buffer));
    expect(coalescing.size).to.equal(1);
    const [message] = framer.push(big.subarray(at));
    expect(message.body.equals(big.subarray(HEADER_LENGTH))).to.equal(true);
  });

  it('keeps chunks of 4 KiB or more as they are, and coalesces only what arrives while a message is incomplete', function () {
    const framer = new MessageFramer();
    const big = messageOf(3 * SMALL_CHUNK_BYTES, 1);
    const parts = [big.subarray(0, SMALL_CHUNK_BYTES), big.subarray(SMALL_CHUNK_BYTES, 2 * SMALL_CHUNK_BYTES)];
    framer.push(parts[0]);
    framer.push(parts[1]);
    const chunks = (framer as unknown as { chunks: Buffer[] }).chunks;
    expect(chunks[0].buffer).to.equal(big.buffer);
    expect(chunks[1].buffer).to.equal(big.buffer);
    expect(framer.push(big.subarray(2 * SMALL_CHUNK_BYTES))[0].body.equals(big.subarray(HEADER_LENGTH))).to.equal(true);
    // A small whole message after that is a view of its chunk, as ever.
    const small = messageOf(100, 2);
    expect(framer.push(small)[0].body.buffer).to.equal(small.buffer);
  });

  it('returns a message within one chunk as a view of it, without copying', function () {
    const two = Buffer.concat([messageOf(100, 1), messageOf(200, 2)]);
    const { result, calls } = countingConcat(() => new MessageFramer().push(two));
    expect(calls).to.equal(0);
    expect(result[1].body.buffer).to.equal(two.buffer);
  });
});

describe('maxMessageSizeBytes the client applies (effectiveMaxMessageSizeBytes)', function () {
  const cases: [unknown, number][] = [
    [48_000_000, 48_000_000],
    [2 ** 31 - 1, 48_000_000],
    [600_000_000, 48_000_000],
    [40_000_000, 40_000_000],
    [1000, 16 * 1024 * 1024],
    [undefined, 48_000_000],
    [null, 48_000_000],
    ['48000000', 48_000_000],
    [0, 48_000_000],
    [-5, 48_000_000],
    [1.5e7 + 0.5, 48_000_000],
    [Number.NaN, 48_000_000],
    [Number.POSITIVE_INFINITY, 48_000_000],
  ];
  for (const [announced, limit] of cases) {
    it(`announced ${inspect(announced)} → ${limit} bytes`, function () {
      expect(effectiveMaxMessageSizeBytes(announced)).to.equal(limit);
    });
  }
});

describe('OP_COMPRESSED decompression (decompressMessage)', function () {
  const zlibOnly: DecompressionLimits = { compressors: ['zlib'], maxMessageSizeBytes: 48_000_000 };
  const none: DecompressionLimits = { compressors: [], maxMessageSizeBytes: 48_000_000 };
  const framed = (bytes: Buffer): WireMessage => new MessageFramer().push(bytes)[0];
  const reply = encodeOpMsg(3, 9, { ok: 1, n: 'x'.repeat(500) });

  it('unwraps a zlib message into the original one', function () {
    const out = decompressMessage(framed(compressMessage(reply)), zlibOnly);
    expect(out.header).to.deep.equal({ messageLength: reply.length, requestId: 3, responseTo: 9, opCode: OpCode.OP_MSG });
    expect(decodeOpMsg(out.body).document).to.deep.equal({ ok: 1, n: 'x'.repeat(500) });
  });

  it('accepts noop (id 0) once a compressor was negotiated', function () {
    const body = reply.subarray(HEADER_LENGTH);
    const out = decompressMessage(framed(opCompressed(9, body, body.length, 0)), zlibOnly);
    expect(decodeOpMsg(out.body).document.ok).to.equal(1);
  });

  const refused: [string, Buffer, DecompressionLimits, RegExp][] = [
    [
      'zlib when no compressor was negotiated',
      compressMessage(reply),
      none,
      /OP_COMPRESSED \(compressor id 2\) received, but no compressor was negotiated in the handshake/,
    ],
    ['noop when no compressor was negotiated', opCompressed(9, Buffer.alloc(8), 8, 0), none, /no compressor was negotiated/],
    [
      'a compressor id other than the negotiated one (snappy)',
      opCompressed(9, Buffer.alloc(8), 8, 1),
      zlibOnly,
      /compressor id 1, but only the negotiated zlib \(id 2\) or noop \(id 0\) is accepted/,
    ],
    ['a reserved compressor id', opCompressed(9, Buffer.alloc(8), 8, 200), zlibOnly, /compressor id 200/],
    [
      'an uncompressedSize over maxMessageSizeBytes',
      opCompressed(9, deflateSync(Buffer.alloc(10)), 48_000_000 - 15, 2),
      zlibOnly,
      /uncompressedSize of 47999985 bytes; allowed 0\.\.47999984 \(maxMessageSizeBytes 48000000 less the 16-byte header\)/,
    ],
    ['a negative uncompressedSize', opCompressed(9, deflateSync(Buffer.alloc(10)), -1, 2), zlibOnly, /uncompressedSize of -1 bytes/],
    [
      'data inflating beyond uncompressedSize (a bomb)',
      opCompressed(9, zlibBomb(64 * 1024 * 1024), 1000, 2),
      zlibOnly,
      /inflates beyond its announced uncompressedSize of 1000 bytes \(the inflate output limit, maxOutputLength\)/,
    ],
    ['data holding fewer bytes than announced', opCompressed(9, deflateSync(Buffer.alloc(10)), 11, 2), zlibOnly, /announced 11 bytes but held 10/],
    ['data that is not zlib', opCompressed(9, Buffer.from('not zlib at all'), 15, 2), zlibOnly, /zlib data is invalid/],
    ['a body under 9 bytes', Buffer.concat([header(20, OpCode.OP_COMPRESSED), Buffer.alloc(4)]), zlibOnly, /too short: 4 bytes/],
  ];
  for (const [what, bytes, limits, message] of refused) {
    it(`refuses ${what}`, function () {
      expect(() => decompressMessage(framed(bytes), limits)).to.throw(WireProtocolError, message);
    });
  }

  it('bounds the inflated size by the connection limit: a smaller maxMessageSizeBytes refuses a larger announcement', function () {
    const limits: DecompressionLimits = { compressors: ['zlib'], maxMessageSizeBytes: 20_000_000 };
    const bytes = opCompressed(9, zlibBomb(64 * 1024 * 1024), 30_000_000, 2);
    expect(() => decompressMessage(framed(bytes), limits)).to.throw(WireProtocolError, /allowed 0\.\.19999984 \(maxMessageSizeBytes 20000000/);
  });
});

describe('wire-layer edges (limits at their exact values, malformed sections, buffer reuse)', function () {
  /** An OP_MSG body: flag bits `flags` then the sections given. */
  const opMsgBody = (flags: number, ...sections: Buffer[]): Buffer => {
    const head = Buffer.alloc(4);
    head.writeUInt32LE(flags);
    return Buffer.concat([head, ...sections]);
  };
  const bodySection = (document: object): Buffer => Buffer.concat([Buffer.from([0]), Buffer.from(serialize(document))]);
  /** A kind-1 section announcing `size`, followed by `rest` (identifier and documents, as raw bytes). */
  const rawSequence = (size: number, rest: Buffer): Buffer => {
    const head = Buffer.from([1, 0, 0, 0, 0]);
    head.writeInt32LE(size, 1);
    return Buffer.concat([head, rest]);
  };

  describe('OP_MSG decoding (a MUST of the OP_MSG spec, "sections": exactly one Payload Type 0)', function () {
    it('refuses an OP_MSG holding only a document sequence: it has no body section', function () {
      expect(() => decodeOpMsg(opMsgBody(0, sequence('documents', { a: 1 })))).to.throw(WireProtocolError, /^OP_MSG has no body section$/);
    });

    it('refuses a document sequence cut before its 4-byte size ends', function () {
      const body = opMsgBody(0, bodySection({ ok: 1 }), Buffer.from([1, 9, 0]));
      expect(() => decodeOpMsg(body)).to.throw(WireProtocolError, /^OP_MSG document sequence overruns the message$/);
    });

    it('refuses a document sequence whose size overruns the message, or runs into the checksum', function () {
      const seq = sequence('documents', { a: 1 });
      const long = opMsgBody(0, bodySection({ ok: 1 }), rawSequence(seq.length + 10, seq.subarray(5)));
      expect(() => decodeOpMsg(long)).to.throw(WireProtocolError, new RegExp(`^OP_MSG document sequence has invalid size ${seq.length + 10}$`));
      // With checksumPresent, the last 4 bytes are the checksum, not part of any section.
      const intoChecksum = opMsgBody(1, bodySection({ ok: 1 }), rawSequence(seq.length + 3, seq.subarray(5)), Buffer.alloc(4));
      expect(() => decodeOpMsg(intoChecksum)).to.throw(WireProtocolError, /document sequence has invalid size/);
    });

    it('refuses a document sequence whose identifier is not terminated within it, even by the byte right after it', function () {
      // size 4 + "abc": the terminating NUL is the first byte after the section.
      const atEnd = opMsgBody(0, bodySection({ ok: 1 }), rawSequence(7, Buffer.from('abc\0')));
      expect(() => decodeOpMsg(atEnd)).to.throw(WireProtocolError, /^OP_MSG document sequence identifier is not terminated$/);
      const later = opMsgBody(0, bodySection({ ok: 1 }), rawSequence(6, Buffer.from('abcdef\0')), bodySection({}));
      expect(() => decodeOpMsg(later)).to.throw(WireProtocolError, /identifier is not terminated/);
      const never = opMsgBody(0, bodySection({ ok: 1 }), rawSequence(6, Buffer.from('ab')));
      expect(() => decodeOpMsg(never)).to.throw(WireProtocolError, /identifier is not terminated/);
    });

    it('names a repeated identifier of more than 64 characters by its first 64, and a 64-character one in full', function () {
      const long = 'i'.repeat(65);
      const body = (id: string) => opMsgBody(0, bodySection({ ok: 1 }), sequence(id, { a: 1 }), sequence(id, { a: 2 }));
      expect(() => decodeOpMsg(body(long))).to.throw(WireProtocolError, new RegExp(`identifier "${'i'.repeat(64)}\\.\\.\\."`));
      expect(() => decodeOpMsg(body('j'.repeat(64)))).to.throw(WireProtocolError, new RegExp(`identifier "${'j'.repeat(64)}";`));
    });

    it('refuses a body document cut before its 4-byte size ends, and one holding invalid UTF-8', function () {
      expect(() => decodeOpMsg(opMsgBody(0, Buffer.from([0, 9, 0])))).to.throw(WireProtocolError, /^BSON document overruns the message$/);
      const doc = Buffer.from(serialize({ s: 'ab' }));
      doc[doc.length - 3] = 0xff; // the string's "b"
      expect(() => decodeOpMsg(opMsgBody(0, Buffer.from([0]), doc))).to.throw(WireProtocolError, /invalid BSON: Invalid UTF-8/);
    });
  });

  describe('OP_MSG encoding limits at their exact values (OP_MSG spec: "MUST NOT exceed the maxMessageSizeBytes")', function () {
    /** A command document of exactly `size` bytes of BSON. */
    const documentOf = (size: number) => {
      const overhead = serialize({ ping: 1, pad: '' }).length;
      const doc = { ping: 1, pad: 'x'.repeat(size - overhead) };
      expect(serialize(doc).length).to.equal(size);
      return doc;
    };

    it('sends a command document of exactly maxBsonObjectSize + 16 KiB, and refuses one byte more', function () {
      const limits = { maxBsonObjectSize: 1000, maxMessageSizeBytes: 48_000_000 };
      const max = 1000 + 16 * 1024;
      expect(encodeOpMsg(1, 0, documentOf(max), 0, limits).length).to.equal(HEADER_LENGTH + 5 + max);
      expect(() => encodeOpMsg(1, 0, documentOf(max + 1), 0, limits)).to.throw(WireProtocolError, new RegExp(`is ${max + 1} bytes.*\\(${max} bytes allowed\\)`));
    });

    it('sends an OP_MSG of exactly maxMessageSizeBytes, and refuses one byte more', function () {
      const limits = { maxBsonObjectSize: 16 * 1024 * 1024, maxMessageSizeBytes: 2000 };
      expect(encodeOpMsg(1, 0, documentOf(2000 - HEADER_LENGTH - 5), 0, limits).length).to.equal(2000);
      expect(() => encodeOpMsg(1, 0, documentOf(2000 - HEADER_LENGTH - 4), 0, limits)).to.throw(
        WireProtocolError,
        /the command's OP_MSG would be 2001 bytes, more than maxMessageSizeBytes 2000/,
      );
    });
  });

  describe('OP_COMPRESSED (OP_COMPRESSED spec: "Messages that MUST NOT be compressed"; zlib level)', function () {
    const framed = (bytes: Buffer): WireMessage => new MessageFramer().push(bytes)[0];
    const zlibOnly: DecompressionLimits = { compressors: ['zlib'], maxMessageSizeBytes: 48_000_000 };

    it('never compresses the handshake and authentication commands, whatever their case', function () {
      const never = ['hello', 'isMaster', 'ismaster', 'saslStart', 'saslContinue', 'getnonce', 'authenticate', 'createUser', 'updateUser', 'copydbSaslStart', 'copydbgetnonce', 'copydb'];
      for (const name of never) {
        expect(mayCompress(name), name).to.equal(false);
        expect(mayCompress(name.toUpperCase()), name.toUpperCase()).to.equal(false);
      }
      for (const name of ['find', 'insert', 'ping', 'getMore', 'helloWorld']) expect(mayCompress(name), name).to.equal(true);
    });

    it('compresses at the zlib level given (0 stores, 9 compresses), zlib\'s default (-1) when none is', function () {
      const message = encodeOpMsg(1, 0, { find: 'c', filter: { text: 'abcdefghij'.repeat(200) }, n: [...Array(300).keys()] });
      const stored = compressMessage(message, 0);
      const best = compressMessage(message, 9);
      expect(stored.length).to.be.greaterThan(message.length);
      expect(best.length).to.be.lessThan(message.length / 4);
      expect(compressMessage(message)).to.deep.equal(compressMessage(message, -1));
      expect(compressMessage(message)).not.to.deep.equal(compressMessage(message, 1));
      for (const out of [stored, best]) expect(decompressMessage(framed(out), zlibOnly).body).to.deep.equal(message.subarray(HEADER_LENGTH));
    });

    it('compresses on the thread pool at the level given, byte for byte as on the event loop', async function () {
      const message = encodeOpMsg(1, 0, { insert: 'c', documents: [...Array(3000).keys()].map((i) => ({ i, text: 'abcdefghij'.repeat(3) })) });
      for (const level of [0, 1, 9, -1]) expect(await compressMessageOnThreadPool(message, level), String(level)).to.deep.equal(compressMessage(message, level));
      expect(await compressMessageOnThreadPool(message)).to.deep.equal(compressMessage(message, -1));
    });

    it('accepts an uncompressedSize of exactly maxMessageSizeBytes less the header', function () {
      const message = encodeOpMsg(1, 0, { ok: 1, pad: 'p'.repeat(900) });
      const limits: DecompressionLimits = { compressors: ['zlib'], maxMessageSizeBytes: message.length };
      expect(decompressMessage(framed(compressMessage(message)), limits).header.messageLength).to.equal(message.length);
      const tighter: DecompressionLimits = { compressors: ['zlib'], maxMessageSizeBytes: message.length - 1 };
      expect(() => decompressMessage(framed(compressMessage(message)), tighter)).to.throw(WireProtocolError, /announces an uncompressedSize/);
    });

    it('refuses a negative uncompressedSize before inflating anything', function () {
      const bytes = opCompressed(9, deflateSync(Buffer.alloc(10)), -1, 2);
      expect(() => decompressMessage(framed(bytes), zlibOnly)).to.throw(WireProtocolError, /^OP_COMPRESSED announces an uncompressedSize of -1 bytes; allowed 0\.\./);
    });

    it('refuses an OP_COMPRESSED wrapping another OP_COMPRESSED', function () {
      const inner = opCompressed(9, Buffer.alloc(0), 0, 0).subarray(HEADER_LENGTH);
      const bytes = opCompressed(9, inner, inner.length, 0);
      bytes.writeInt32LE(OpCode.OP_COMPRESSED, 16);
      expect(() => decompressMessage(framed(bytes), zlibOnly)).to.throw(WireProtocolError, /^OP_COMPRESSED wraps another OP_COMPRESSED$/);
    });
  });

  describe('MessageFramer buffers', function () {
    /** A whole message of `length` bytes whose body is pseudo-random (so a misplaced byte shows). */
    const randomMessage = (length: number): Buffer => {
      const out = Buffer.alloc(length);
      writeHeader(out, { messageLength: length, requestId: 1, responseTo: 0, opCode: OpCode.OP_MSG });
      for (let i = HEADER_LENGTH, x = 12345; i < length; i++) out[i] = (x = (x * 1103515245 + 12345) >>> 0) >>> 24;
      return out;
    };

    it('keeps the bytes of a large chunk that came between small ones, even one as long as the small ones before it', function () {
      // 10 bytes first (kept as is), then 5,000 bytes in small chunks (coalesced), a 5,000-byte chunk, then small ones.
      for (const bigLength of [5000, 4096, 7000]) {
        const message = randomMessage(10 + 5000 + bigLength + 3000);
        const framer = new MessageFramer();
        const out: WireMessage[] = [];
        out.push(...framer.push(message.subarray(0, 10)));
        for (let at = 10; at < 5010; at += 1000) out.push(...framer.push(Buffer.from(message.subarray(at, at + 1000))));
        out.push(...framer.push(Buffer.from(message.subarray(5010, 5010 + bigLength))));
        for (let at = 5010 + bigLength; at < message.length; at += 1000) out.push(...framer.push(Buffer.from(message.subarray(at, at + 1000))));
        expect(out).to.have.length(1);
        expect(out[0].body.equals(message.subarray(HEADER_LENGTH)), `large chunk of ${bigLength} bytes`).to.equal(true);
      }
    });

    it('returns each message that fills a chunk of its own as a view of that chunk, and lets the 64 KiB buffer go once nothing is buffered', function () {
      const framer = new MessageFramer();
      const first = messageOf(100, 1);
      expect(framer.push(first.subarray(0, 50))).to.deep.equal([]);
      expect((framer as unknown as { coalesce?: Buffer }).coalesce).to.equal(undefined); // 50 bytes as they came
      expect(framer.push(first.subarray(50))[0].body.equals(first.subarray(HEADER_LENGTH))).to.equal(true); // coalesced
      expect((framer as unknown as { coalesce?: Buffer }).coalesce).to.equal(undefined);
      for (const id of [2, 3]) {
        const whole = messageOf(200, id);
        expect(framer.push(whole)[0].body.buffer).to.equal(whole.buffer);
      }
      expect(framer.bufferedBytes).to.equal(0);
    });
  });
});
