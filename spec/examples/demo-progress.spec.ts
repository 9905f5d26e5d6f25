/**
 * The demo's progress line (examples/demo-progress.ts): bounded to the terminal's width at any width, dropping the
 * less important parts first, and framed to rewrite one terminal line in place.
 */
import { expect } from 'chai';
import { progressFrame, progressLine, progressWidth, type Progress } from '../../examples/demo-progress';

const typical: Progress = {
  elapsedMS: 4000,
  checkouts: 114_355,
  poolState: 'ready',
  generation: 1,
  inUse: 10,
  available: 0,
  pending: 0,
  waiting: 990,
  heartbeats: { succeeded: 8, failed: 0, lastMS: 0.5 },
};

const busy: Progress = {
  elapsedMS: 123_456,
  checkouts: 12_345_678,
  poolState: 'paused',
  generation: 17,
  inUse: 100,
  available: 100,
  pending: 100,
  waiting: 99_999,
  heartbeats: { succeeded: 12_345, failed: 678, lastMS: 1234.56 },
};

describe('examples/demo-progress', function () {
  it('progressWidth: one column less than the terminal, 80 columns when unknown', function () {
    expect(progressWidth(160)).to.equal(159);
    expect(progressWidth(40)).to.equal(39);
    expect(progressWidth(undefined)).to.equal(79);
    expect(progressWidth(0)).to.equal(79);
    expect(progressWidth(1)).to.equal(0);
  });

  it('at 160 columns, shows every part within 159 characters', function () {
    const line = progressLine(typical, progressWidth(160));
    expect(line.length).to.be.at.most(159);
    expect(line).to.equal(
      '4.0s  114355 checkouts (28589/s)  pool ready gen 1  10 in use, 990 waiting  0 available, 0 pending  ' +
        'heartbeats 8 ok / 0 failed (last 0.5 ms)',
    );
  });

  it('at 80 columns, keeps time, checkouts, pool state, in use and waiting within 79 characters', function () {
    const line = progressLine(typical, progressWidth(80));
    expect(line.length).to.be.at.most(79);
    expect(line).to.equal('4.0s  114355 checkouts (28589/s)  pool ready gen 1  10 in use, 990 waiting');
    expect(progressLine(busy, progressWidth(80))).to.equal('123.5s  12345678 checkouts (100001/s)  pool paused gen 17');
  });

  it('at 40 columns, keeps time and checkouts within 39 characters', function () {
    expect(progressLine(typical, progressWidth(40))).to.equal('4.0s  114355 checkouts (28589/s)');
    expect(progressLine(busy, progressWidth(40))).to.equal('123.5s  12345678 checkouts (100001/s)');
  });

  it('never exceeds the width, down to cutting the first part', function () {
    for (let width = 0; width <= 200; width++) expect(progressLine(busy, width).length).to.be.at.most(width);
    expect(progressLine(busy, 3)).to.equal('123');
  });

  it('is unbounded by default (for logs)', function () {
    expect(progressLine(busy)).to.include('heartbeats 12345 ok / 678 failed (last 1234.6 ms)');
    expect(progressLine(busy).length).to.be.greaterThan(159);
  });

  it('progressFrame: on a terminal returns to column 0 and clears the line; elsewhere ends the line', function () {
    expect(progressFrame('abc', true)).to.equal('\r\x1b[2Kabc');
    expect(progressFrame('abc', false)).to.equal('abc\n');
  });
});
