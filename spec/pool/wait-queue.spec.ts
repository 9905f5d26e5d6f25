import { expect } from 'chai';
import { WaitQueue, Waiter } from '../../lib/pool/wait-queue';

class TestWaiter extends Waiter<never> {
  deliver(): boolean {
    return true;
  }
  fail(): void {}
}
const waiter = (): Waiter<never> => new TestWaiter();

describe('WaitQueue', function () {
  it('is FIFO, gives members its state, and skips removed members lazily', function () {
    const q = new WaitQueue<never>('queued');
    const [a, b, c] = [waiter(), waiter(), waiter()];
    q.push(a);
    q.push(b);
    q.push(c);
    expect(a.state).to.equal('queued');
    expect(q.remove(b)).to.equal(true);
    expect(b.state).to.equal('done');
    expect(q.length).to.equal(2);
    expect(q.remove(b)).to.equal(false); // not a member any more
    expect(q.shift()).to.equal(a);
    expect(q.peek()).to.equal(c);
    expect(q.drain()).to.deep.equal([c]);
    expect(q.length).to.equal(0);
  });

  it('toArray lists the members in the order they would come out, high lane first, leaving them members', function () {
    const q = new WaitQueue<never>('claimant');
    expect(q.toArray()).to.deep.equal([]);
    const [a, b, c, d, e] = [waiter(), waiter(), waiter(), waiter(), waiter()];
    q.push(a);
    q.push(b);
    q.push(c, true);
    q.push(d);
    q.push(e, true);
    q.remove(b); // removed lazily: still in its lane, no member
    expect(q.toArray()).to.deep.equal([c, e, a, d]);
    expect(q.length).to.equal(4);
    expect([a, c, d, e].map((w) => w.state)).to.deep.equal(['claimant', 'claimant', 'claimant', 'claimant']);
    expect(q.shift()).to.equal(c);
    const plain = new WaitQueue<never>('queued'); // no high lane made yet
    plain.push(a);
    expect(plain.toArray()).to.deep.equal([a]);
  });

  it('does not remove a waiter that belongs to the other queue', function () {
    const queued = new WaitQueue<never>('queued');
    const claimants = new WaitQueue<never>('claimant');
    const w = waiter();
    claimants.push(w);
    expect(queued.remove(w)).to.equal(false);
    expect(claimants.remove(w)).to.equal(true);
  });

  it('compacts when removed waiters outnumber members, so abandoned checkouts are not kept', function () {
    const q = new WaitQueue<never>('queued');
    const head = waiter();
    q.push(head); // a member at the head that is never served keeps everything behind it in a lazy queue
    const removed: WeakRef<Waiter<never>>[] = [];
    for (let i = 0; i < 1000; i++) {
      const w = waiter();
      q.push(w);
      q.remove(w);
      removed.push(new WeakRef(w));
    }
    expect(q.length).to.equal(1);
    // What is left in the buffer: the member and fewer removed waiters than members + the compaction threshold.
    const buffer = (q as unknown as { buffer: { size: number } }).buffer;
    expect(buffer.size).to.be.at.most(1 + 65);
    expect(q.shift()).to.equal(head);
  });

  it('counts the removed waiters of both lanes toward compacting, and compacts the high-priority lane too', function () {
    const highSize = (q: WaitQueue<never>): number => (q as unknown as { high: { size: number } }).high.size;
    const q = new WaitQueue<never>('queued');
    q.push(waiter());
    const high = Array.from({ length: 200 }, () => waiter());
    for (const w of high) q.push(w, true);
    for (let i = 0; i < 100; i++) q.remove(high[i]);
    expect(highSize(q), '100 removed, 101 members (100 high, 1 normal): not compacted').to.equal(200);
    q.remove(high[100]);
    expect(highSize(q), '101 removed, 100 members: compacted').to.equal(99);
    expect(q.length).to.equal(100);
    expect(q.shift()).to.equal(high[101]);
  });

  it('removes lazily: compacts only once more than 64 removed waiters outnumber its members', function () {
    const size = (q: WaitQueue<never>): number => (q as unknown as { buffer: { size: number } }).buffer.size;
    // One member at the head, removed waiters behind it: kept until the 65th removal, then compacted away.
    const q = new WaitQueue<never>('queued');
    const head = waiter();
    q.push(head);
    for (let i = 0; i < 64; i++) {
      const w = waiter();
      q.push(w);
      q.remove(w);
    }
    expect(size(q), '64 removed: still there (O(1) removal)').to.equal(65);
    const last = waiter();
    q.push(last);
    q.remove(last);
    expect(size(q), 'the 65th removal compacts').to.equal(1);
    expect(q.length).to.equal(1);
    // Many members: removed waiters are kept while they do not outnumber the members, even past 64.
    const big = new WaitQueue<never>('queued');
    const all = Array.from({ length: 200 }, () => waiter());
    for (const w of all) big.push(w);
    for (let i = 1; i < 200; i += 2) big.remove(all[i]);
    expect(big.length).to.equal(100);
    expect(size(big), '100 removed, 100 members: not compacted').to.equal(200);
    big.remove(all[2]);
    expect(size(big), '101 removed, 99 members: compacted').to.equal(99);
    expect(big.drain()).to.deep.equal(all.filter((_, i) => i % 2 === 0 && i !== 2));
  });
});
