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
});
