/**
 * The unified test format's matching rules ("Evaluating Matches"), as the runner's matcher applies them: each rule
 * is shown both matching and refusing, with the refusal naming where the values differ.
 */
import { expect } from 'chai';
import { Decimal128, Double, EJSON, Int32, Long } from 'bson';
import { bsonTypeOf, match } from './match';

describe('unified test format matching', function () {
  describe('root and embedded documents', function () {
    it('allows extra fields at the root only', function () {
      expect(match({ x: 1 }, { x: 1, y: 1 })).to.equal(undefined);
      expect(match({ x: { y: 1 } }, { x: { y: 1, z: 1 } })).to.match(/x\.z: not expected in an embedded document/);
      expect(match({ x: 1 }, { x: 1, y: 1 }, false)).to.match(/y: not expected/);
    });

    it('needs every expected field', function () {
      expect(match({ x: 1, y: 1 }, { x: 1 })).to.match(/^y: missing/);
    });

    it('ignores the order of fields', function () {
      expect(match({ a: 1, b: { c: 1, d: 2 } }, { b: { d: 2, c: 1 }, a: 1 })).to.equal(undefined);
    });

    it('matches documents inside an array as embedded ones', function () {
      expect(match({ documents: [{ _id: 5 }] }, { documents: [{ _id: 5 }] })).to.equal(undefined);
      expect(match({ documents: [{ _id: 5 }] }, { documents: [{ _id: 5, x: 1 }] })).to.match(/documents\[0\]\.x: not expected/);
    });
  });

  describe('arrays', function () {
    it('need the same number of elements, matched in order', function () {
      expect(match({ a: [1, 2] }, { a: [1, 2] })).to.equal(undefined);
      expect(match({ a: [1, 2] }, { a: [1, 2, 3] })).to.match(/a: expected 2 elements, got 3/);
      expect(match({ a: [1, 2] }, { a: [1] })).to.match(/a: expected 2 elements, got 1/);
      expect(match({ a: [1, 2] }, { a: [2, 1] })).to.match(/a\[0\]: expected 1, got 2/);
      expect(match({ a: [] }, { a: {} })).to.match(/a: expected an array/);
    });
  });

  describe('numbers', function () {
    it('match by value whatever their type: int, long and double', function () {
      expect(match({ ok: 1 }, { ok: new Double(1) })).to.equal(undefined);
      expect(match({ ok: 1 }, { ok: Long.fromNumber(1) })).to.equal(undefined);
      expect(match({ ok: new Int32(1) }, { ok: 1n })).to.equal(undefined);
      expect(match({ ok: 1 }, { ok: 1.5 })).to.match(/ok: expected 1, got 1.5/);
      expect(match({ ok: 1 }, { ok: '1' })).to.match(/ok: expected 1/);
    });

    it('do not match a decimal by value (Decimal128 is not one of the flexible types)', function () {
      expect(match({ ok: 1 }, { ok: Decimal128.fromString('1') })).to.match(/ok: expected 1/);
    });
  });

  describe('$$exists', function () {
    it('true: the field is there, even null', function () {
      expect(match({ a: { $$exists: true } }, { a: null })).to.equal(undefined);
      expect(match({ a: { $$exists: true } }, {})).to.match(/a: expected to exist, absent/);
    });

    it('false: the field is absent', function () {
      expect(match({ a: { $$exists: false } }, {})).to.equal(undefined);
      expect(match({ a: { $$exists: false } }, { a: 1 })).to.match(/a: expected to be absent, got 1/);
    });
  });

  describe('$$type', function () {
    it('takes a name or a list of names', function () {
      expect(match({ a: { $$type: 'string' } }, { a: 'x' })).to.equal(undefined);
      expect(match({ a: { $$type: 'string' } }, { a: 1 })).to.match(/a: expected type "string", got int/);
      expect(match({ a: { $$type: ['int', 'long'] } }, { a: 27017 })).to.equal(undefined);
      expect(match({ a: { $$type: ['string', 'long'] } }, { a: true })).to.match(/a: expected type \["string","long"\], got bool/);
    });

    it('needs the field', function () {
      expect(match({ a: { $$type: 'int' } }, {})).to.match(/a: missing/);
    });

    it('takes an integral JS number as an int, or a long beyond int32, and a fractional one as a double', function () {
      expect(bsonTypeOf(5)).to.equal('int');
      expect(bsonTypeOf(-2147483648)).to.equal('int');
      expect(bsonTypeOf(2 ** 40)).to.equal('long');
      expect(bsonTypeOf(-(2 ** 40))).to.equal('long');
      expect(bsonTypeOf(1.5)).to.equal('double');
      expect(match({ d: { $$type: ['double', 'int', 'long'] } }, { d: 0.25 })).to.equal(undefined);
      expect(match({ d: { $$type: 'double' } }, { d: 3 })).to.match(/d: expected type "double", got int/);
      expect(match({ d: { $$type: 'int' } }, { d: 1.5 })).to.match(/d: expected type "int", got double/);
      expect(match({ d: { $$type: 'long' } }, { d: 2 ** 40 })).to.equal(undefined);
      expect(match({ d: { $$type: 'int' } }, { d: 2 ** 40 })).to.match(/d: expected type "int", got long/);
    });

    it('tells the bson types apart', function () {
      expect(match({ a: { $$type: 'long' } }, { a: Long.fromNumber(3) })).to.equal(undefined);
      expect(match({ a: { $$type: 'int' } }, { a: Long.fromNumber(3) })).to.match(/got long/);
      expect(match({ a: { $$type: 'double' } }, { a: new Double(3) })).to.equal(undefined);
      expect(match({ a: { $$type: 'array' } }, { a: [1] })).to.equal(undefined);
    });
  });

  describe('$$unsetOrMatches', function () {
    it('an absent field, or one that matches', function () {
      expect(match({ a: { $$unsetOrMatches: 2 } }, {})).to.equal(undefined);
      expect(match({ a: { $$unsetOrMatches: 2 } }, { a: 2 })).to.equal(undefined);
      expect(match({ a: { $$unsetOrMatches: 2 } }, { a: 3 })).to.match(/a: expected 2, got 3/);
      expect(match({ a: { $$unsetOrMatches: { b: 1 } } }, { a: { b: 1, c: 1 } })).to.match(/a\.c: not expected/);
    });
  });

  describe('$$matchAsDocument and $$matchAsRoot', function () {
    const reply = EJSON.stringify({ ok: 1, topologyVersion: { counter: 0 } }, { relaxed: false });

    it('parses an extended JSON string and matches it as an embedded document', function () {
      expect(match({ reply: { $$matchAsDocument: { ok: 1, topologyVersion: { counter: 0 } } } }, { reply })).to.equal(undefined);
      expect(match({ reply: { $$matchAsDocument: { ok: 1 } } }, { reply })).to.match(/topologyVersion: not expected/);
      expect(match({ reply: { $$matchAsDocument: { ok: 1 } } }, { reply: { ok: 1 } })).to.match(/reply: expected a string/);
    });

    it('with $$matchAsRoot inside, allows extra fields', function () {
      expect(match({ reply: { $$matchAsDocument: { $$matchAsRoot: { ok: 1 } } } }, { reply })).to.equal(undefined);
      expect(match({ reply: { $$matchAsDocument: { $$matchAsRoot: { ok: 0 } } } }, { reply })).to.match(/ok: expected 0, got 1/);
    });

    it('$$matchAsRoot alone allows extra fields of an embedded document', function () {
      expect(match({ a: { $$matchAsRoot: { b: 1 } } }, { a: { b: 1, c: 2 } })).to.equal(undefined);
      expect(match({ a: { $$matchAsRoot: { b: 1, d: 1 } } }, { a: { b: 1, c: 2 } })).to.match(/d: missing/);
    });
  });

  describe('$$lte', function () {
    it('a number at most the bound', function () {
      expect(match({ n: { $$lte: 5 } }, { n: 5 })).to.equal(undefined);
      expect(match({ n: { $$lte: 5 } }, { n: Long.fromNumber(4) })).to.equal(undefined);
      expect(match({ n: { $$lte: 5 } }, { n: 6 })).to.match(/n: expected <= 5, got 6/);
    });
  });

  describe('an operator the runner does not know', function () {
    it('throws, wherever it is', function () {
      expect(() => match({ a: { $$placeholder: 1 } }, { a: 1 })).to.throw(/\$\$placeholder is not supported/);
      expect(() => match({ a: { $$placeholder: 1 } }, {})).to.throw(/\$\$placeholder is not supported/);
      expect(() => match({ $$sessionLsid: 's' }, {})).to.throw(/\$\$sessionLsid is not supported/);
    });
  });
});
