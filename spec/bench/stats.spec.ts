/** bench/stats.ts: the statistics the benchmark report's targets are decided by. */
import { expect } from 'chai';
import { costShare, medianInterval, pairedRatios, ratioAgainst } from '../../bench/stats';

describe('bench: statistics', function () {
  describe('pairedRatios', function () {
    it('divides the samples of the same round, in round order', function () {
      expect(pairedRatios([2, 3, 8], [1, 4, 2])).to.deep.equal([2, 0.75, 4]);
    });

    it('throws a RangeError for samples of different lengths, which cannot be paired by round', function () {
      expect(() => pairedRatios([1, 2], [1])).to.throw(RangeError, '2 samples against 1');
    });
  });

  describe('medianInterval', function () {
    const ranks = (n: number): number[] => Array.from({ length: n }, (_, i) => n - i); // n..1, unsorted on purpose

    it('gives the sign test\'s order statistics: 1st..7th of 7, 2nd..9th of 10, 9th..20th of 28, 21st..36th of 56', function () {
      expect(medianInterval(ranks(7))).to.deep.equal({ median: 4, low: 1, high: 7 });
      expect(medianInterval(ranks(10))).to.deep.equal({ median: 5.5, low: 2, high: 9 });
      expect(medianInterval(ranks(28))).to.deep.equal({ median: 14.5, low: 9, high: 20 });
      expect(medianInterval(ranks(56))).to.deep.equal({ median: 28.5, low: 21, high: 36 });
    });

    it('widens with the confidence asked for', function () {
      expect(medianInterval(ranks(56), 0.99)).to.deep.equal({ median: 28.5, low: 18, high: 39 });
      expect(medianInterval(ranks(56), 0.5)).to.deep.equal({ median: 28.5, low: 25, high: 32 });
    });

    it('stays exact past n = 1074, where 0.5 ** n underflows: 505th..570th of 1074, 505th..571st of 1075, 956th..1045th of 2000', function () {
      expect(medianInterval(ranks(1074))).to.deep.equal({ median: 537.5, low: 505, high: 570 });
      expect(medianInterval(ranks(1075))).to.deep.equal({ median: 538, low: 505, high: 571 });
      expect(medianInterval(ranks(2000))).to.deep.equal({ median: 1000.5, low: 956, high: 1045 });
    });

    it('throws a RangeError for a confidence outside (0, 1) or a value that is not finite', function () {
      for (const confidence of [0, 1, -0.5, 95, Number.NaN]) {
        expect(() => medianInterval(ranks(56), confidence), String(confidence)).to.throw(RangeError, `confidence ${confidence}; allowed: a number strictly between 0 and 1`);
      }
      for (const bad of [Number.NaN, Number.POSITIVE_INFINITY]) {
        expect(() => medianInterval([...ranks(10), bad]), String(bad)).to.throw(RangeError, `value ${bad}; allowed: finite numbers only`);
      }
    });

    it('gives no interval (NaN) when there are too few values for the confidence: 5 at 0.95', function () {
      const { median, low, high } = medianInterval(ranks(5));
      expect([median, low, high]).to.deep.equal([3, Number.NaN, Number.NaN]);
      expect(medianInterval(ranks(6))).to.deep.equal({ median: 3.5, low: 1, high: 6 });
    });
  });

  describe('costShare', function () {
    it('gives the cost a minimum share allows, as a whole percentage', function () {
      expect([0.95, 0.9, 0.5, 1].map(costShare)).to.deep.equal(['5%', '10%', '50%', '0%']);
    });
  });

  describe('ratioAgainst', function () {
    it('shows a third decimal where two would put a ratio on the other side of its target', function () {
      expect(ratioAgainst(1_898_000, 2_000_000, 0.95)).to.equal('0.949×');
      expect(ratioAgainst(1_900_000, 2_000_000, 0.95)).to.equal('0.95×');
      expect(ratioAgainst(2_100_000, 2_000_000, 0.95)).to.equal('1.05×');
      expect(ratioAgainst(1, 0, 0.95)).to.equal('n/a');
    });
  });
});
