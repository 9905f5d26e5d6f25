import { Double, Int32, Long, deserialize, serialize } from 'bson';
import { expect } from 'chai';
import { serverConnectionIdOf } from '../../lib/connection/server-connection-id';

describe('serverConnectionIdOf', function () {
  /** `value` sent as a hello reply's connectionId and decoded as a connection decodes replies. */
  const decoded = (value: unknown): unknown => deserialize(serialize({ connectionId: value }), { validation: { utf8: true } }).connectionId;

  it('reads an int32, an int64 or a double holding a non-negative integer up to 2^53 - 1 as that number', function () {
    for (const [value, expected] of [
      [new Int32(7), 7],
      [new Int32(0), 0],
      [Long.fromNumber(2 ** 40), 2 ** 40],
      [Long.fromNumber(Number.MAX_SAFE_INTEGER), Number.MAX_SAFE_INTEGER],
      [new Double(42), 42],
    ] as const) {
      expect(serverConnectionIdOf(decoded(value)), String(value)).to.equal(expected);
    }
    expect(serverConnectionIdOf(Long.fromNumber(9)), 'a Long decoded without promotion').to.equal(9);
  });

  it('is undefined for anything no server sends: NaN, ±Infinity, negative, non-integer, beyond 2^53 - 1, not a number', function () {
    for (const value of [NaN, Infinity, -Infinity, -1, -0.5, 1.5, 2 ** 53, 1e300, Long.fromString('9223372036854775807'), Long.fromNumber(-5), '5', true, null, undefined, { id: 5 }, [5]]) {
      expect(serverConnectionIdOf(decoded(value)), `${String(value)} decoded`).to.equal(undefined);
      expect(serverConnectionIdOf(value), String(value)).to.equal(undefined);
    }
  });
});
