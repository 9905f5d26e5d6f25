/**
 * exactNumber: a 64-bit integer as a number only where a number holds it exactly.
 */
import { expect } from 'chai';
import { Long } from 'bson';
import { exactNumber } from '../lib/int64';

describe('exactNumber', function () {
  it('gives the number of a Long or bigint within ±(2^53 - 1), and nothing beyond or for another value', function () {
    const max = Number.MAX_SAFE_INTEGER;
    expect([Long.fromNumber(max), Long.fromNumber(-max), Long.fromNumber(0), 5n, BigInt(max), -BigInt(max)].map(exactNumber)).to.deep.equal([max, -max, 0, 5, max, -max]);
    expect([Long.fromString('9007199254740992'), Long.fromString('-9007199254740992'), Long.MAX_VALUE, BigInt(max) + 1n, -BigInt(max) - 1n].map(exactNumber)).to.deep.equal([undefined, undefined, undefined, undefined, undefined]);
    // A Long of another copy of bson is known as bson knows it; a number, a string or a document is no 64-bit integer here.
    const foreign = Object.assign(Object.create(null) as object, { __isLong__: true, low: 7, high: 0, unsigned: false, lessThanOrEqual: () => true, greaterThanOrEqual: () => true, toNumber: () => 7 });
    expect([foreign, 7, '7', { low: 7 }, null, undefined].map(exactNumber)).to.deep.equal([7, undefined, undefined, undefined, undefined, undefined]);
  });
});
