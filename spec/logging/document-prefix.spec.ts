import { expect } from 'chai';
import * as fc from 'fast-check';
import { Binary, Decimal128, EJSON, Long, ObjectId, Timestamp, UUID } from 'bson';
import { documentPrefix } from '../../lib/logging/document-prefix';
import { truncate } from '../../lib/logging/log-message';
import { fuzzParameters } from '../support/fuzz';
import { freshCopy } from '../support/fresh-copy';

/** The text the logging spec asks for: the whole document's relaxed Extended JSON, cut naively at `max`. */
const reference = (document: unknown, max: number): string => truncate(EJSON.stringify(document, { relaxed: true }), max);
const written = (document: unknown, max: number): string => truncate(EJSON.stringify(documentPrefix(document, max), { relaxed: true }), max);

class ReplyArray extends Array<unknown> {
  toJSON(): string {
    return 'x';
  }
}

/** Strings of any UTF-16 code units (lone surrogates and pairs included), short and long. */
const text = fc.oneof(fc.string({ unit: 'binary', maxLength: 40 }), fc.string({ unit: 'grapheme', maxLength: 40 }), fc.string({ maxLength: 400 }));

const bsonValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.uint8Array({ maxLength: 400 }).chain((bytes) => fc.constantFrom(0, 4, 5, 128).map((subType) => new Binary(bytes, subType))),
  fc.uint8Array({ minLength: 12, maxLength: 12 }).map((bytes) => new ObjectId(bytes)),
  fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }).map((n) => Long.fromBigInt(n)),
  fc.uint8Array({ minLength: 16, maxLength: 16 }).map((bytes) => new Decimal128(bytes)),
  fc.record({ t: fc.nat(), i: fc.nat() }).map((v) => new Timestamp(v)),
  fc.date({ noInvalidDate: true }),
  fc.uint8Array({ maxLength: 40 }).map((bytes) => Buffer.from(bytes)),
  fc.float64Array({ maxLength: 12 }),
  fc.constantFrom(
    /a+b/gi,
    () => 1,
    () => undefined,
    new Map([['k', 'v']]),
    Symbol('s'),
    undefined,
    null,
    -0,
    NaN,
    Infinity,
    2n ** 70n,
    new UUID('0123456789abcdef0123456789abcdef'),
    new Date(NaN),
    Object.assign(new Binary(new Uint8Array(50).fill(1)), { sub_type: 265 }), // a subtype outside a byte
    // An Array subclass with a toJSON, an array tagged as a Map, a non-enumerable toJSON getter that throws:
    ReplyArray.from([1, 2]),
    Object.assign([['k', 'v']], { [Symbol.toStringTag]: 'Map' }),
    Object.defineProperty({ a: 1 }, 'toJSON', {
      enumerable: false,
      get: () => {
        throw new Error('not read by bson');
      },
    }),
  ),
);

/** Documents as a server reply (or a user factory's error) can hold them, with every kind of leaf. */
const { document } = fc.letrec<{ value: unknown; document: Record<string, unknown> }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    text,
    fc.double(),
    fc.integer(),
    fc.boolean(),
    bsonValue,
    fc.array(tie('value'), { maxLength: 30 }),
    fc.sparseArray(tie('value'), { maxLength: 8 }),
    tie('document'),
  ),
  document: fc.dictionary(
    fc.oneof(text, fc.constantFrom('__proto__', 'toJSON', '0', '17', '$ref'), fc.string({ minLength: 30, maxLength: 3000 }), fc.stringMatching(/^[1-9][0-9]{0,12}x*$/)),
    tie('value'),
    { maxKeys: 12 },
  ) as fc.Arbitrary<
    Record<string, unknown>
  >,
}));

describe('documentPrefix: the part of a document its Extended JSON shows within the max length', function () {
  it('writes exactly the truncated Extended JSON of the whole document, for any document and max length', function () {
    fc.assert(
      fc.property(document, fc.oneof(fc.nat(40), fc.nat(2000)), (doc, max) => {
        let expected: string;
        try {
          expected = reference(doc, max);
        } catch {
          return; // not writable as a whole (a key bson refuses, say): nothing to agree with
        }
        expect(written(doc, max)).to.equal(expected);
      }),
      fuzzParameters(400),
    );
  });

  it('reads O(max length) of a huge reply: 1,000,000 elements, each behind a getter, are read 137 times at max 1000', function () {
    let reads = 0;
    const element = Object.defineProperty({}, 'n', { enumerable: true, get: () => ++reads });
    const reply = { ok: 0, errmsg: 'huge', cursor: { firstBatch: new Array<object>(1_000_000).fill(element) } };
    const max = 1000;
    const prefix = documentPrefix(reply, max) as { cursor: { firstBatch: unknown[] } };
    // Each element {"n":k}, adds 7 to the lower bound (its {, "n":, a digit and a comma): after the 46 of what comes
    // before the array, the lower bound passes 1000 after ⌊(1000 − 46) / 7⌋ + 1 elements.
    expect(reads).to.equal(prefix.cursor.firstBatch.length);
    expect(reads).to.equal(Math.floor((max - 46) / 7) + 1);
    reads = 0;
    expect(truncate(EJSON.stringify(prefix, { relaxed: true }), max)).to.equal(reference(reply, max));
  });

  it('cuts a 17 MB string to max + 1 code units, and a Binary to the bytes its base64 shows', function () {
    const huge = 'x'.repeat(17 * 1024 * 1024);
    const prefix = documentPrefix({ errmsg: huge, data: new Binary(new Uint8Array(4 * 1024 * 1024).fill(7)) }, 1000) as {
      errmsg: string;
      data?: Binary;
    };
    expect(prefix.errmsg.length).to.equal(1001);
    expect(prefix).to.not.have.property('data'); // after the cut: not even read
    const binary = documentPrefix({ data: new Binary(new Uint8Array(4 * 1024 * 1024).fill(7), 5) }, 1000) as { data: Binary };
    expect(binary.data.buffer.length).to.equal(753); // 3 × ⌈1001 / 4⌉ bytes: 1004 base64 characters
    expect(binary.data.sub_type).to.equal(5);
  });

  it('cuts a Binary of another copy of bson (an ES module application\'s, another version\'s) as its own: the text agrees, the copy is small', function () {
    const other = freshCopy<typeof import('bson')>(require.resolve('bson'));
    const document = { data: new other.Binary(new Uint8Array(4 * 1024 * 1024).fill(7), 5), uuid: new other.UUID('0b4c6c1e-5d3f-4a7e-9c1b-2f0a8e6d4c3b') };
    const prefix = documentPrefix(document, 1000) as { data: { buffer: Uint8Array; sub_type: number } };
    expect(prefix.data.buffer.length).to.equal(753);
    expect(prefix.data.sub_type).to.equal(5);
    expect(written(document, 1000)).to.equal(reference(document, 1000));
    expect(written({ uuid: document.uuid }, 1000)).to.equal(reference({ uuid: document.uuid }, 1000));
  });

  it('writes a reply nested 100,000 deep, or cyclic, as far as the max length', function () {
    let deep: Record<string, unknown> = {};
    for (let i = 0; i < 100_000; i++) deep = { a: deep };
    const text = EJSON.stringify(documentPrefix(deep, 100), { relaxed: true });
    expect(truncate(text, 100)).to.equal(`${'{"a":'.repeat(20)}...`);
    const cyclic: Record<string, unknown> = { ok: 0 };
    cyclic.self = cyclic;
    expect(truncate(EJSON.stringify(documentPrefix(cyclic, 40), { relaxed: true }), 40)).to.equal('{"ok":0,"self":{"ok":0,"self":{"ok":0,"s...');
  });

  it('counts nothing for fields JSON leaves out (functions, symbols, a toJSON that gives nothing), so no field is dropped early', function () {
    const omitted: Record<string, unknown> = {};
    for (let i = 0; i < 10; i++) omitted[`f${i}`] = [() => 1, Symbol('s'), { toJSON: () => undefined }][i % 3];
    const reply = { ...omitted, ok: 0, code: 2 };
    expect(reference(reply, 8)).to.equal('{"ok":0,...');
    for (const max of [0, 4, 8, 15, 16]) expect(written(reply, max)).to.equal(reference(reply, max));
  });

  it('agrees on typed arrays of every length cut at every max length, reading only the indexes shown', function () {
    for (let length = 0; length <= 60; length++) {
      const bytes = Buffer.from(Array.from({ length }, (_, i) => (i * 37) % 256));
      for (let max = 0; max <= 200; max++) {
        for (const doc of [bytes, { ok: 0, data: bytes, after: 'x' }, { n: new Float64Array(bytes).map((b) => b / 3) }]) {
          expect(written(doc, max), `length ${length}, max ${max}`).to.equal(reference(doc, max));
        }
      }
    }
    // A 16 MB Buffer: its key list is never built (Object.keys watched), and only the indexes shown are copied.
    const huge = Buffer.alloc(16 * 1024 * 1024);
    const keysOf = Object.keys;
    const listed: number[] = [];
    Object.keys = (o: object) => {
      const keys = keysOf(o);
      listed.push(keys.length);
      return keys;
    };
    let copy: object;
    try {
      copy = documentPrefix(huge, 1000) as object;
    } finally {
      Object.keys = keysOf;
    }
    expect(listed).to.deep.equal([]);
    expect(keysOf(copy)).to.have.length(159); // {, then "i":0, for 0–158: 1 + 10 × 5 + 90 × 6 + 59 × 7 = 1004 > 1000
    expect(EJSON.stringify(copy, { relaxed: true }).slice(0, 1000)).to.equal(`{${Array.from({ length: 200 }, (_, i) => `"${i}":0`).join(',')}`.slice(0, 1000));
  });

  it('cuts a key longer than the max length, unless the cut would make it an array index (ordered first)', function () {
    const long = 'k'.repeat(5000);
    expect(written({ ok: 0, [long]: 1 }, 100)).to.equal(reference({ ok: 0, [long]: 1 }, 100));
    expect((Object.keys(documentPrefix({ ok: 0, [long]: 1 }, 100) as object)[1] ?? '').length).to.equal(101);
    const digits = `${'1'.repeat(8)}x`;
    for (let max = 0; max < 12; max++) expect(written({ ok: 0, [digits]: 1 }, max), `max ${max}`).to.equal(reference({ ok: 0, [digits]: 1 }, max));
  });

  it('keeps a document that fits as it is written: nothing cut, no ellipsis', function () {
    const reply = { ok: 0, errmsg: 'not primary', code: 10107, codeName: 'NotWritablePrimary', errorLabels: ['RetryableWriteError'] };
    const text = EJSON.stringify(reply, { relaxed: true });
    expect(written(reply, text.length)).to.equal(text);
    expect(written(reply, text.length - 1)).to.equal(`${text.slice(0, -1)}...`);
  });
});
