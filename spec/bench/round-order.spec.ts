/** bench/round-order.ts: the order of the entries in each round of the benchmark. */
import { expect } from 'chai';
import { roundOrder } from '../../bench/round-order';

describe('bench: round order', function () {
  const entries = (n: number): number[] => Array.from({ length: n }, (_, i) => i);

  it('rotates by one every second round and reverses the odd rounds', function () {
    expect([0, 1, 2, 3, 4].map((r) => roundOrder(entries(4), r))).to.deep.equal([
      [0, 1, 2, 3],
      [3, 2, 1, 0],
      [1, 2, 3, 0],
      [0, 3, 2, 1],
      [2, 3, 0, 1],
    ]);
  });

  it('runs each entry before each other in as many rounds as after it, give or take one, for any number of rounds', function () {
    for (const n of [2, 3, 5, 16, 20]) {
      const order = entries(n);
      const before = new Map<string, number>(); // `${a},${b}`: rounds in which a ran before b
      for (let round = 0; round < 9; round++) {
        const ran = roundOrder(order, round);
        expect([...ran].sort((a, b) => a - b), `round ${round} of ${n} is a permutation`).to.deep.equal(order);
        const at = new Map(ran.map((e, i) => [e, i]));
        for (const a of order) for (const b of order) if (at.get(a)! < at.get(b)!) before.set(`${a},${b}`, (before.get(`${a},${b}`) ?? 0) + 1);
        const rounds = round + 1;
        for (const a of order) {
          for (const b of order) {
            if (a >= b) continue;
            const ab = before.get(`${a},${b}`) ?? 0;
            expect(Math.abs(2 * ab - rounds), `${a} before ${b} in ${ab} of ${rounds} rounds (${n} entries)`).to.be.at.most(1);
          }
        }
      }
    }
  });

  it('moves every entry through the first place', function () {
    const firsts = new Set(Array.from({ length: 32 }, (_, r) => roundOrder(entries(16), r)[0]));
    expect(firsts.size).to.equal(16);
  });

  it('throws a RangeError for a round that is not an integer ≥ 0', function () {
    for (const round of [-1, 1.5, Number.NaN]) expect(() => roundOrder([1, 2], round), String(round)).to.throw(RangeError, `round ${round}; allowed: an integer ≥ 0`);
  });

  it('orders no entries as no entries', function () {
    expect(roundOrder([], 3)).to.deep.equal([]);
  });
});
