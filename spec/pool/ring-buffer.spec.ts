import { expect } from 'chai';
import { RingBuffer } from '../../lib/pool/ring-buffer';

describe('RingBuffer', function () {
  it('is a FIFO across growth and wrap-around', function () {
    const q = new RingBuffer<number>();
    const out: number[] = [];
    for (let i = 0; i < 10; i++) q.push(i);
    for (let i = 0; i < 5; i++) out.push(q.shift()!); // head moves, so the next pushes wrap
    for (let i = 10; i < 60; i++) q.push(i); // grows while wrapped
    expect(q.size).to.equal(55);
    expect(q.peek()).to.equal(5);
    while (q.size > 0) out.push(q.shift()!);
    expect(out).to.deep.equal(Array.from({ length: 60 }, (_, i) => i));
    expect(q.shift()).to.equal(undefined);
    expect(q.peek()).to.equal(undefined);
  });

  it('retains only what the predicate keeps, in order, and stays a FIFO afterwards', function () {
    const q = new RingBuffer<number>();
    for (let i = 0; i < 40; i++) q.push(i);
    q.shift();
    q.retain((x) => x % 3 === 0);
    expect(q.size).to.equal(13);
    q.push(100);
    const out: number[] = [];
    while (q.size > 0) out.push(q.shift()!);
    expect(out).to.deep.equal([3, 6, 9, 12, 15, 18, 21, 24, 27, 30, 33, 36, 39, 100]);
  });
});
