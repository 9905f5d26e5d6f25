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

  it('forEach visits each value head to tail, across wrap-around, removing none', function () {
    const q = new RingBuffer<number>();
    const seen = (): number[] => {
      const out: number[] = [];
      q.forEach((x) => out.push(x));
      return out;
    };
    expect(seen()).to.deep.equal([]);
    for (let i = 0; i < 16; i++) q.push(i);
    for (let i = 0; i < 10; i++) q.shift(); // the head moves near the end of the storage
    for (let i = 16; i < 24; i++) q.push(i); // so these wrap around to its start
    expect(seen()).to.deep.equal([10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23]);
    expect(q.size, 'nothing removed').to.equal(14);
    expect(q.peek()).to.equal(10);
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

  it('shifting an empty buffer changes nothing: it stays empty, and a FIFO afterwards', function () {
    const q = new RingBuffer<number>();
    expect(q.shift()).to.equal(undefined);
    expect(q.shift()).to.equal(undefined);
    expect(q.size).to.equal(0);
    q.push(1);
    q.push(2);
    expect(q.size).to.equal(2);
    expect([q.shift(), q.shift(), q.shift()]).to.deep.equal([1, 2, undefined]);
  });

  it('keeps a power-of-two capacity when retain keeps more than the initial 16, so later pushes still wrap in order', function () {
    // 20 kept (capacity must grow past 16) and exactly 32 kept (capacity 32, full): each is then pushed through a
    // wrap-around and growth, and must come out in order.
    for (const keepEvery of [2, 1]) {
      const q = new RingBuffer<number>();
      const total = keepEvery === 2 ? 40 : 32;
      for (let i = 0; i < total; i++) q.push(i);
      q.retain((x) => x % keepEvery === 0);
      const kept = Array.from({ length: total }, (_, i) => i).filter((x) => x % keepEvery === 0);
      expect(q.size).to.equal(kept.length);
      const out: number[] = [];
      for (let i = 0; i < 5; i++) out.push(q.shift()!);
      for (let i = 100; i < 140; i++) q.push(i);
      while (q.size > 0) out.push(q.shift()!);
      expect(out).to.deep.equal([...kept, ...Array.from({ length: 40 }, (_, i) => 100 + i)]);
    }
  });
});
