import { expect } from 'chai';
import { CheckOutCancelledError, MongoNetworkTimeoutError, PoolClearedError, PoolClosedError, WaitQueueTimeoutError, type ConnectionCheckOutFailedEvent, type ConnectionClosedEvent } from '../../lib';
import { resolvePoolOptions } from '../../lib/options';
import { reduce } from '../../lib/pool/reducer';
import { initialPoolState } from '../../lib/pool/state';
import { Bench, FakeConnection, TestWaiter } from './harness';

/**
 * A ready pool (minPoolSize 1, maxPoolSize 2, maxConnecting 2, waitQueueTimeoutMS 50) where w1 (t=0, deadline 50)
 * claims the populate and w2 (t=10) starts connection 2; the clock at 10.
 */
function populateClaimedAndSecondStarted(): { b: Bench; w1: ReturnType<Bench['checkOut']>; w2: ReturnType<Bench['checkOut']> } {
  const b = new Bench({ minPoolSize: 1, maxPoolSize: 2, maxConnecting: 2, waitQueueTimeoutMS: 50, backgroundThreadIntervalMS: 10_000 });
  b.dispatch({ type: 'ready' });
  const w1 = b.checkOut();
  b.time = 10;
  const w2 = b.checkOut();
  return { b, w1, w2 };
}

describe('reduce (pool reducer, virtual time)', function () {
  describe('checkOut', function () {
    it('fails at once on a paused pool with PoolClearedError and reason connectionError', function () {
      const b = new Bench();
      const w = b.checkOut();
      expect(b.types()).to.deep.equal(['ConnectionCheckOutStarted', 'ConnectionCheckOutFailed']);
      expect((b.events[1] as ConnectionCheckOutFailedEvent).reason).to.equal('connectionError');
      expect(b.errorOf(w)).to.be.instanceOf(PoolClearedError);
      expect(b.errorOf(w)!.message).to.match(/has not been marked ready/);
    });

    it('fails at once on a closed pool with PoolClosedError and reason poolClosed', function () {
      const b = new Bench();
      b.dispatch({ type: 'close' });
      const w = b.checkOut();
      expect(b.errorOf(w)).to.be.instanceOf(PoolClosedError);
      expect((b.events.at(-1) as ConnectionCheckOutFailedEvent).reason).to.equal('poolClosed');
    });

    it('creates a connection, and delivers it once established, with durations from the clock', function () {
      const b = new Bench();
      b.dispatch({ type: 'ready' });
      b.time = 10;
      const w = b.checkOut();
      expect([...b.pending]).to.deep.equal([1]);
      b.time = 35;
      const c = b.succeed(1);
      expect(b.connectionOf(w)).to.equal(c);
      const ready = b.events.find((e) => e.type === 'ConnectionReady')!;
      const out = b.events.find((e) => e.type === 'ConnectionCheckedOut')!;
      expect(ready).to.include({ connectionId: 1, duration: 25 });
      expect(out).to.include({ connectionId: 1, duration: 25 });
    });

    it('never exceeds maxConnecting establishments; waiters beyond it wait in the WaitQueue', function () {
      const b = new Bench({ maxConnecting: 2, maxPoolSize: 10 });
      b.dispatch({ type: 'ready' });
      const ws = [b.checkOut(), b.checkOut(), b.checkOut()];
      expect(b.pending.size).to.equal(2);
      expect(b.state.waitQueue.length).to.equal(1);
      b.succeed(1);
      expect(b.connectionOf(ws[0])?.id).to.equal(1);
      // the freed slot goes to the third waiter, which starts connection 3
      expect([...b.pending].sort()).to.deep.equal([2, 3]);
    });

    it('claims an unclaimed background establishment instead of starting another one', function () {
      const b = new Bench({ minPoolSize: 2, maxPoolSize: 3 });
      b.dispatch({ type: 'ready' });
      expect(b.pending.size).to.equal(2);
      const w1 = b.checkOut();
      const w2 = b.checkOut();
      b.succeed(1);
      b.succeed(2);
      expect(b.types().filter((t) => t === 'ConnectionCreated')).to.have.length(2);
      expect(b.connectionOf(w1)?.id).to.equal(1);
      expect(b.connectionOf(w2)?.id).to.equal(2);
    });

    it('gives a checked-in connection to the oldest waiter, even one waiting on an establishment', function () {
      const b = new Bench({ maxConnecting: 1 });
      b.dispatch({ type: 'ready' });
      const first = b.checkOut();
      const c1 = b.succeed(1);
      expect(b.connectionOf(first)).to.equal(c1);
      const w2 = b.checkOut(); // starts connection 2 and holds its claim
      const w3 = b.checkOut(); // queued: maxConnecting reached
      b.checkIn(c1);
      expect(b.connectionOf(w2)).to.equal(c1);
      // w3 claims the establishment w2 no longer needs at once: it leaves the WaitQueue (keeping its deadline, if any)
      expect(b.state.waitQueue.length).to.equal(0);
      expect(b.state.claimants.length).to.equal(1);
      b.succeed(2);
      expect(b.connectionOf(w3)?.id).to.equal(2);
    });

    it('takes the most recently used available connection and closes perished ones met on the way', function () {
      const b = new Bench({ maxIdleTimeMS: 100 });
      b.dispatch({ type: 'ready' });
      const [w1, w2] = [b.checkOut(), b.checkOut()];
      const c1 = b.succeed(1);
      const c2 = b.succeed(2);
      expect(b.connectionOf(w1)).to.equal(c1);
      expect(b.connectionOf(w2)).to.equal(c2);
      b.checkIn(c1);
      b.time = 50;
      b.checkIn(c2);
      b.time = 120; // c1 is idle (120 ms available), c2 is not (70 ms)
      const w3 = b.checkOut();
      expect(b.connectionOf(w3)).to.equal(c2);
      c2.errored = true;
      b.checkIn(c2);
      const closed = b.events.filter((e): e is ConnectionClosedEvent => e.type === 'ConnectionClosed');
      expect(closed.map((e) => [e.connectionId, e.reason])).to.deep.equal([[2, 'error']]);
      const w4 = b.checkOut(); // c1 is idle: closed, and a new connection is created
      expect(b.events.filter((e): e is ConnectionClosedEvent => e.type === 'ConnectionClosed').map((e) => [e.connectionId, e.reason])).to.deep.equal([
        [2, 'error'],
        [1, 'idle'],
      ]);
      expect(b.state.records.size).to.equal(1);
      expect([...b.pending]).to.deep.equal([3]);
      expect(b.connectionOf(w4)).to.equal(undefined);
    });
  });

  describe('WaitQueue timeout', function () {
    it('arms one timer for the head, fails expired waiters in order, and re-arms for the next', function () {
      const b = new Bench({ maxPoolSize: 1, waitQueueTimeoutMS: 100 });
      b.dispatch({ type: 'ready' });
      b.checkOut();
      b.succeed(1);
      b.time = 0;
      const w1 = b.checkOut();
      b.time = 30;
      const w2 = b.checkOut();
      b.time = 60;
      const w3 = b.checkOut();
      const arms = b.commands.filter((c) => c.type === 'arm' && c.timer === 'waitQueue');
      expect(arms).to.have.length(1); // one timer, not one per waiter
      b.advanceTo(100);
      expect(b.errorOf(w1)).to.be.instanceOf(WaitQueueTimeoutError);
      expect(b.errorOf(w2)).to.equal(undefined);
      expect(b.timers.get('waitQueue')).to.equal(130);
      b.advanceTo(200);
      expect(b.errorOf(w2)).to.be.instanceOf(WaitQueueTimeoutError);
      expect(b.errorOf(w3)).to.be.instanceOf(WaitQueueTimeoutError);
      const failed = b.events.filter((e): e is ConnectionCheckOutFailedEvent => e.type === 'ConnectionCheckOutFailed');
      expect(failed.map((e) => [e.reason, e.duration])).to.deep.equal([
        ['timeout', 100],
        ['timeout', 100],
        ['timeout', 100],
      ]);
    });

    it('does not time out a checkout while the establishment it started is under way', function () {
      const b = new Bench({ waitQueueTimeoutMS: 50 });
      b.dispatch({ type: 'ready' });
      const w = b.checkOut();
      b.advanceTo(500);
      expect(b.errorOf(w)).to.equal(undefined);
      b.succeed(1);
      expect(b.connectionOf(w)?.id).to.equal(1);
    });

    it('times out a checkout waiting on an establishment it did not start (a background populate)', function () {
      // maxPoolSize 1 is reached by the Background Thread's establishment: the checkout cannot start one, so it
      // waits for that pending connection, which is waiting in the WaitQueue (CMAP "WaitQueue": timeout aggressively).
      const b = new Bench({ minPoolSize: 1, maxPoolSize: 1, waitQueueTimeoutMS: 50 });
      b.dispatch({ type: 'ready' });
      expect([...b.pending]).to.deep.equal([1]);
      const w = b.checkOut();
      b.advanceTo(50);
      expect(b.errorOf(w)).to.be.instanceOf(WaitQueueTimeoutError);
      expect(b.events.at(-1)).to.include({ type: 'ConnectionCheckOutFailed', reason: 'timeout', duration: 50 });
      b.succeed(1);
      expect(b.state.available.size, 'the populated connection is kept, available').to.equal(1);
    });

    it('times out a checkout that took over an establishment another checkout no longer needed', function () {
      const b = new Bench({ maxConnecting: 1, waitQueueTimeoutMS: 100 });
      b.dispatch({ type: 'ready' });
      const c1 = b.succeed((b.checkOut(), 1));
      const w2 = b.checkOut(); // starts connection 2
      const w3 = b.checkOut(); // queued: maxConnecting reached
      b.time = 10;
      b.checkIn(c1); // to w2; w3 takes over the establishment of connection 2, which it did not start
      expect(b.connectionOf(w2)).to.equal(c1);
      b.advanceTo(100);
      expect(b.errorOf(w3)).to.be.instanceOf(WaitQueueTimeoutError);
      b.succeed(2);
      expect(b.connectionOf(w3)).to.equal(undefined);
      expect(b.state.available.size).to.equal(1);
    });

    it('re-arms the WaitQueue timer for a claimant still waiting when it fires with nothing due, and times it out with what the pool held', function () {
      // Two Background Thread establishments, each claimed by a checkout that did not start it. The older checkout is
      // served before its deadline, so the timer fires with nothing due: it must be re-armed for the younger one.
      const b = new Bench({ minPoolSize: 2, maxPoolSize: 2, maxConnecting: 2, waitQueueTimeoutMS: 100, backgroundThreadIntervalMS: 10_000 });
      b.dispatch({ type: 'ready' });
      expect([...b.pending]).to.deep.equal([1, 2]);
      b.time = 5;
      const w0 = b.checkOut(); // claims connection 1: deadline 105
      b.time = 8;
      const w1 = b.checkOut(); // claims connection 2: deadline 108
      b.time = 9;
      b.succeed(1);
      expect(b.connectionOf(w0)?.id).to.equal(1);
      expect(b.timers.get('waitQueue')).to.equal(105);
      b.advanceTo(105);
      expect(b.errorOf(w1)).to.equal(undefined);
      expect(b.timers.get('waitQueue'), 're-armed for the claimant').to.equal(108);
      b.advanceTo(108);
      const error = b.errorOf(w1) as WaitQueueTimeoutError;
      expect(error).to.be.instanceOf(WaitQueueTimeoutError);
      expect(error.pool, 'what the pool held when it timed out').to.not.equal(undefined);
      expect(error.pool).to.deep.include({ inUseConnectionCount: 1, pendingConnectionCount: 1 });
    });

    it('after a claimant times out and a queued checkout takes its claim, re-arms the timer for the earliest claimant deadline', function () {
      const b = new Bench({ minPoolSize: 2, maxPoolSize: 2, maxConnecting: 2, waitQueueTimeoutMS: 50, backgroundThreadIntervalMS: 10_000 });
      b.dispatch({ type: 'ready' });
      expect([...b.pending]).to.deep.equal([1, 2]);
      const w1 = b.checkOut(); // claims connection 1: deadline 50
      b.time = 20;
      const wa = b.checkOut(); // claims connection 2: deadline 70
      b.time = 30;
      const w2 = b.checkOut(); // queued (maxPoolSize reached): deadline 80
      b.advanceTo(50);
      expect(b.errorOf(w1)).to.be.instanceOf(WaitQueueTimeoutError);
      expect(b.state.claimants.length, 'w2 took the claim w1 left').to.equal(2);
      expect(b.timers.get('waitQueue'), 'the earliest deadline left: wa\'s').to.equal(70);
      b.advanceTo(70);
      expect(b.errorOf(wa)).to.be.instanceOf(WaitQueueTimeoutError);
      expect(b.errorOf(w2)).to.equal(undefined);
      expect(b.timers.get('waitQueue')).to.equal(80);
    });

    it('load-balanced: a checkout waiting on an establishment it did not start times out with an error giving maxPoolSize', function () {
      const b = new Bench({ maxPoolSize: 7, maxConnecting: 1, waitQueueTimeoutMS: 100 }, true, true);
      b.dispatch({ type: 'ready' });
      const c1 = b.succeed((b.checkOut(), 1), 'aaaaaaaaaaaaaaaaaaaaaaaa');
      const w2 = b.checkOut(); // starts connection 2
      const w3 = b.checkOut(); // queued: maxConnecting reached
      b.time = 10;
      b.checkIn(c1); // to w2; w3 takes over the establishment of connection 2, which it did not start
      expect(b.connectionOf(w2)).to.equal(c1);
      b.advanceTo(100);
      const error = b.errorOf(w3) as WaitQueueTimeoutError;
      expect(error).to.be.instanceOf(WaitQueueTimeoutError);
      expect(error.maxPoolSize, 'load balancer spec: the message gives maxPoolSize').to.equal(7);
    });

    it('leak detection: a checkout whose site was not recorded is reported with an empty checkOutStack', function () {
      const b = new Bench({ leakDetectionThresholdMS: 100 } as ConstructorParameters<typeof Bench>[0]);
      b.dispatch({ type: 'ready' });
      b.checkOut(); // the reducer is given no site for it
      b.succeed(1);
      b.advanceTo(100);
      const leak = b.events.find((e) => e.type === 'ConnectionLeakSuspected');
      expect(leak).to.deep.include({ connectionId: 1, duration: 100, checkOutStack: '' });
    });

    it('lets a later checkout take the claim of one that timed out', function () {
      const b = new Bench({ minPoolSize: 1, maxPoolSize: 1, waitQueueTimeoutMS: 50 });
      b.dispatch({ type: 'ready' });
      const w1 = b.checkOut(); // claims the Background Thread's establishment
      b.time = 30;
      const w2 = b.checkOut(); // queued behind it
      b.advanceTo(50);
      expect(b.errorOf(w1)).to.be.instanceOf(WaitQueueTimeoutError);
      expect(b.state.claimants.length, 'w2 claims the establishment w1 left').to.equal(1);
      expect(b.timers.get('waitQueue')).to.equal(80);
      b.time = 60;
      b.succeed(1);
      expect(b.connectionOf(w2)?.id).to.equal(1);
    });

    it('times out a checkout whose establishment went to an older checkout, leaving it waiting on a background populate', function () {
      // Connection 1 is the Background Thread's; w1 claims it, w2 starts connection 2. Connection 2 is established
      // first and goes to w1, the oldest: w2 is now waiting on the populate, which it did not start.
      const b = new Bench({ minPoolSize: 1, maxPoolSize: 2, maxConnecting: 2, waitQueueTimeoutMS: 50, backgroundThreadIntervalMS: 10_000 });
      b.dispatch({ type: 'ready' });
      const w1 = b.checkOut();
      const w2 = b.checkOut();
      expect([...b.pending]).to.deep.equal([1, 2]);
      b.time = 1;
      expect(b.succeed(2)).to.equal(b.connectionOf(w1));
      b.advanceTo(1000); // the populate takes 1000 ms
      expect(b.errorOf(w2), 'timed out by its deadline').to.be.instanceOf(WaitQueueTimeoutError);
      expect(b.events.find((e) => e.type === 'ConnectionCheckOutFailed')).to.include({ reason: 'timeout', time: 50, duration: 50 });
      b.succeed(1);
      expect(b.state.available.size, 'the populated connection is kept, available').to.equal(1);
    });

    it('gives a checkout left waiting on a populate the later of its own deadline and the one the older checkout had', function () {
      // w1 (t=0, deadline 50) claims the populate; w2 (t=10, its own deadline 60) starts connection 2, which goes to w1
      // at t=20: w2 now waits on the populate, until its own deadline, 60, not w1's 50 nor one counted backwards.
      const { b, w1, w2 } = populateClaimedAndSecondStarted();
      expect([...b.pending]).to.deep.equal([1, 2]);
      b.time = 20;
      expect(b.succeed(2)).to.equal(b.connectionOf(w1));
      expect(w2.deadline, 'its own deadline again').to.equal(60);
      b.advanceTo(59);
      expect(b.errorOf(w2), 'not at w1\'s deadline').to.equal(undefined);
      expect(b.timers.get('waitQueue'), 'the timer is armed for it').to.equal(60);
      b.advanceTo(60);
      expect(b.errorOf(w2)).to.be.instanceOf(WaitQueueTimeoutError);
      expect(b.events.filter((e) => e.type === 'ConnectionCheckOutFailed').at(-1)).to.include({ reason: 'timeout', time: 60, duration: 50 });
    });

    it('fails the checkout whose own establishment failed, leaving an older one waiting on a background populate to its deadline', function () {
      const b = new Bench({ minPoolSize: 1, maxPoolSize: 2, maxConnecting: 2, waitQueueTimeoutMS: 50, backgroundThreadIntervalMS: 10_000 });
      b.dispatch({ type: 'ready' });
      const w1 = b.checkOut(); // claims connection 1, the populate
      const w2 = b.checkOut(); // starts connection 2
      b.time = 1;
      b.failEstablishment(2, new Error('connection 2 refused'), false);
      expect(b.errorOf(w2)?.message, 'the failure goes to the checkout that started the establishment').to.equal('connection 2 refused');
      expect(b.errorOf(w1), 'not to the older one, waiting on another').to.equal(undefined);
      b.advanceTo(1000);
      expect(b.errorOf(w1)).to.be.instanceOf(WaitQueueTimeoutError);
      expect(b.events.filter((e) => e.type === 'ConnectionCheckOutFailed').at(-1)).to.include({ reason: 'timeout', time: 50 });
    });

    it('gives an establishment\'s failure to the checkout that started it, and an older checkout the connection it started', function () {
      // w1 starts connection 1 (slow), w2 starts connection 2, which fails first: w2 gets that error (its ConnectionClosed
      // names connection 2), w1 keeps waiting and gets connection 1 (CMAP "Checking Out a Connection").
      const b = new Bench({ maxPoolSize: 2, maxConnecting: 2, waitQueueTimeoutMS: 100 });
      b.dispatch({ type: 'ready' });
      const w1 = b.checkOut();
      const w2 = b.checkOut();
      expect([...b.pending]).to.deep.equal([1, 2]);
      b.time = 10;
      b.failEstablishment(2, new Error('connection 2 refused: overloaded'), false);
      expect(b.errorOf(w2)?.message).to.equal('connection 2 refused: overloaded');
      expect(b.errorOf(w1)).to.equal(undefined);
      expect(b.types().slice(-2)).to.deep.equal(['ConnectionClosed', 'ConnectionCheckOutFailed']);
      expect(b.events.at(-2)).to.include({ connectionId: 2, reason: 'error' });
      b.time = 50;
      expect(b.succeed(1)).to.equal(b.connectionOf(w1));
      b.advanceTo(1000);
      expect(b.outcomes.map((o) => o.kind), 'one outcome each').to.deep.equal(['fail', 'deliver']);
    });

    it('gives a failure to the checkout that took over the establishment, once an older one got the outcome it started', function () {
      // w1 and w2 each start one; connection 2 (w2's) goes to w1, the oldest; w2 takes over connection 1 as its own, so
      // connection 1's failure is w2's; a third checkout, queued behind, is not failed by it.
      const b = new Bench({ maxPoolSize: 2, maxConnecting: 2, waitQueueTimeoutMS: 100 });
      b.dispatch({ type: 'ready' });
      const w1 = b.checkOut();
      const w2 = b.checkOut();
      const w3 = b.checkOut();
      b.time = 10;
      expect(b.succeed(2)).to.equal(b.connectionOf(w1));
      b.time = 20;
      b.failEstablishment(1, new Error('connection 1 refused'), false);
      expect(b.errorOf(w2)?.message).to.equal('connection 1 refused');
      expect(b.errorOf(w3)).to.equal(undefined);
      expect(w3.state, 'w3 now starts its own').to.equal('claimant');
    });

    it('gives the failure of an establishment whose starter left to the checkout that claimed it, not to an older one waiting on its own', function () {
      // w1 and w2 each start one; w2 leaves and w3 claims connection 2 in its place. Connection 2's failure is w3's:
      // w1, whose own connection 1 is still under way, keeps waiting and gets it.
      const b = new Bench({ maxPoolSize: 2, maxConnecting: 2, waitQueueTimeoutMS: 100 });
      b.dispatch({ type: 'ready' });
      const w1 = b.checkOut();
      const w2 = b.checkOut();
      b.cancel(w2);
      const w3 = b.checkOut();
      expect([...b.pending]).to.deep.equal([1, 2]);
      b.time = 10;
      b.failEstablishment(2, new Error('connection 2 refused: overloaded'), false);
      expect(b.errorOf(w3)?.message).to.equal('connection 2 refused: overloaded');
      expect(b.errorOf(w1), 'not the checkout whose own establishment is under way').to.equal(undefined);
      b.time = 50;
      expect(b.succeed(1)).to.equal(b.connectionOf(w1));
    });

    it('gives a background populate\'s failure to the checkout that claimed it, not to an older one waiting on its own', function () {
      // minPoolSize 2: connection 1 is made, 2 fails; x holds 1; s starts 3; 1 is checked in errored and closed, so the
      // pool populates 4, which w claims. Connection 4's failure is w's: s keeps waiting on its own connection 3.
      const b = new Bench({ minPoolSize: 2, maxPoolSize: 4, maxConnecting: 2, waitQueueTimeoutMS: 100, backgroundThreadIntervalMS: 10_000 });
      b.dispatch({ type: 'ready' });
      const c1 = b.succeed(1);
      b.failEstablishment(2, new Error('connection 2 refused'), false);
      b.checkOut(); // holds 1
      const s = b.checkOut(); // starts 3
      c1.errored = true;
      b.checkIn(c1); // closed: the pool populates 4
      const w = b.checkOut(); // claims 4
      expect([...b.pending]).to.deep.equal([3, 4]);
      b.time = 5;
      b.failEstablishment(4, new Error('connection 4 refused: overloaded'), false);
      expect(b.errorOf(w)?.message).to.equal('connection 4 refused: overloaded');
      expect(b.errorOf(s), 'not the checkout whose own establishment is under way').to.equal(undefined);
      b.time = 10;
      expect(b.succeed(3)).to.equal(b.connectionOf(s));
    });

    it('without waitQueueTimeoutMS too, a checkout that took over an older one\'s establishment keeps waiting on it when another fails', function () {
      // waitQueueTimeoutMS 0 (the default): A and B each start one; B's connection 2 goes to A, so B takes over A's
      // connection 1. C starts 3 and leaves; D claims 3. Connection 3's failure is D's, not B's.
      const b = new Bench({ maxPoolSize: 4, maxConnecting: 3 });
      b.dispatch({ type: 'ready' });
      const a = b.checkOut();
      const w = b.checkOut();
      b.time = 1;
      expect(b.succeed(2)).to.equal(b.connectionOf(a));
      const c = b.checkOut();
      b.cancel(c);
      const d = b.checkOut();
      expect([...b.pending]).to.deep.equal([1, 3]);
      b.time = 2;
      b.failEstablishment(3, new Error('connection 3 refused: overloaded'), false);
      expect(b.errorOf(d)?.message).to.equal('connection 3 refused: overloaded');
      expect(b.errorOf(w), 'not the checkout waiting on the establishment it took over').to.equal(undefined);
      b.time = 3;
      expect(b.succeed(1)).to.equal(b.connectionOf(w));
    });

    it('lets a checkout whose establishment went to an older one wait on that one\'s own establishment without a deadline', function () {
      // w1 and w2 each start an establishment; connection 2 (w2's) is established first and goes to w1: w2 takes over
      // connection 1, which w1 started for a checkout, as its own.
      const b = new Bench({ maxPoolSize: 2, maxConnecting: 2, waitQueueTimeoutMS: 50 });
      b.dispatch({ type: 'ready' });
      const w1 = b.checkOut();
      const w2 = b.checkOut();
      b.time = 1;
      expect(b.succeed(2)).to.equal(b.connectionOf(w1));
      b.advanceTo(1000);
      expect(w2.state, 'still waiting on the establishment it took over').to.equal('claimant');
      expect(b.succeed(1)).to.equal(b.connectionOf(w2));
    });

    it('skips cancelled waiters without failing the next one early', function () {
      const b = new Bench({ maxPoolSize: 1, waitQueueTimeoutMS: 100 });
      b.dispatch({ type: 'ready' });
      b.checkOut();
      b.succeed(1);
      const w1 = b.checkOut();
      b.time = 40;
      const w2 = b.checkOut();
      b.cancel(w1);
      expect(b.events.at(-1)).to.include({ type: 'ConnectionCheckOutFailed', reason: 'cancelled' });
      expect((b.events.at(-1) as ConnectionCheckOutFailedEvent).error).to.be.instanceOf(CheckOutCancelledError);
      expect(b.errorOf(w1), 'its front end settles a cancelled checkout; the pool sends it nothing').to.equal(undefined);
      expect(b.state.waitQueue.length).to.equal(1);
      b.advanceTo(100);
      expect(b.errorOf(w2)).to.equal(undefined);
      b.advanceTo(140);
      expect(b.errorOf(w2)).to.be.instanceOf(WaitQueueTimeoutError);
    });
  });

  describe('clear', function () {
    it('bumps the generation, pauses, evicts every waiter, and closes a stale establishment when it completes', function () {
      const b = new Bench({ maxPoolSize: 1 });
      b.dispatch({ type: 'ready' });
      const claimant = b.checkOut(); // starts connection 1
      const queued = b.checkOut();
      const cause = new Error('monitor check failed');
      b.dispatch({ type: 'clear', interruptInUseConnections: false, cause });
      expect(b.state.generation).to.equal(1);
      expect(b.state.state).to.equal('paused');
      for (const w of [claimant, queued]) {
        expect(b.errorOf(w)).to.be.instanceOf(PoolClearedError);
        expect(b.errorOf(w)!.message).to.include('monitor check failed');
      }
      b.dispatch({ type: 'ready' });
      const later = b.checkOut();
      b.succeed(1); // generation 0: stale
      expect(b.connectionOf(later)).to.equal(undefined);
      const closed = b.events.find((e): e is ConnectionClosedEvent => e.type === 'ConnectionClosed');
      expect(closed).to.include({ connectionId: 1, reason: 'stale' });
      expect(closed, 'an error only when the reason is error').to.not.have.property('error');
      expect(b.destroyed.map((c) => c.id)).to.deep.equal([1]);
      // the closed one freed the only slot: the new waiter now starts connection 2
      expect([...b.pending]).to.deep.equal([2]);
    });

    it('emits ConnectionPoolCleared only when the pool was ready, but always bumps the generation', function () {
      const b = new Bench();
      b.dispatch({ type: 'clear', interruptInUseConnections: false });
      expect(b.types()).to.deep.equal([]);
      expect(b.state.generation).to.equal(1);
      b.dispatch({ type: 'ready' });
      b.dispatch({ type: 'clear', interruptInUseConnections: true });
      expect(b.types()).to.deep.equal(['ConnectionPoolReady', 'ConnectionPoolCleared']);
      expect(b.events[1]).to.include({ interruptInUseConnections: true });
    });

    it('with interruptInUseConnections aborts pending establishments and interrupts in-use connections', function () {
      const b = new Bench({ maxConnecting: 5 });
      b.dispatch({ type: 'ready' });
      const w1 = b.checkOut();
      const inUse = b.succeed(1);
      expect(b.connectionOf(w1)).to.equal(inUse);
      const w2 = b.checkOut(); // connection 2 pending
      b.dispatch({ type: 'clear', interruptInUseConnections: true });
      expect(b.aborted).to.deep.equal([2]);
      expect(inUse.destroyed).to.equal(true);
      expect(inUse.destroyError?.message).to.equal('Connection to localhost:27017 interrupted due to server monitor timeout');
      expect(b.errorOf(w2)).to.be.instanceOf(PoolClearedError);
      expect(b.types().slice(-3)).to.deep.equal(['ConnectionPoolCleared', 'ConnectionClosed', 'ConnectionCheckOutFailed']);
      b.checkIn(inUse);
      expect(b.events.at(-1)).to.include({ type: 'ConnectionClosed', connectionId: 1, reason: 'stale' });
      expect(b.state.records.size).to.equal(0);
    });

    it('an interrupting clear quotes its cause in the error it gives in-use connections (the spec message for a timeout)', function () {
      const b = new Bench();
      b.dispatch({ type: 'ready' });
      b.checkOut();
      const first = b.succeed(1);
      const cause = new Error('shutdown deadline expired');
      b.dispatch({ type: 'clear', interruptInUseConnections: true, cause });
      expect(first.destroyError).to.be.instanceOf(PoolClearedError);
      expect(first.destroyError?.message).to.equal('Connection to localhost:27017 interrupted by a pool clear because of: shutdown deadline expired');
      expect(first.destroyError?.cause).to.equal(cause);
      expect(first.destroyError).to.satisfy((e: PoolClearedError) => e.hasErrorLabel('RetryableError'));
      b.dispatch({ type: 'ready' });
      b.checkOut();
      const second = b.succeed(2);
      const timeout = new MongoNetworkTimeoutError('localhost:27017', 'hello timed out');
      b.dispatch({ type: 'clear', interruptInUseConnections: true, cause: timeout });
      expect(second.destroyError?.message).to.equal('Connection to localhost:27017 interrupted due to server monitor timeout');
      expect(second.destroyError?.cause).to.equal(timeout);
    });

    it('schedules a background run at once, which closes the stale available connections', function () {
      const b = new Bench({ backgroundThreadIntervalMS: 10_000 });
      b.dispatch({ type: 'ready' });
      const w = b.checkOut();
      const c = b.succeed(1);
      expect(b.connectionOf(w)).to.equal(c);
      b.checkIn(c);
      b.dispatch({ type: 'clear', interruptInUseConnections: false });
      expect(b.timers.get('background')).to.equal(b.time);
      b.advanceTo(b.time);
      expect(b.events.at(-1)).to.include({ type: 'ConnectionClosed', connectionId: 1, reason: 'stale' });
    });

    it('an establishment failure clears the pool before its maxConnecting slot frees: the checkout held back fails, no connection is started for it', function () {
      const b = new Bench({ maxConnecting: 1 });
      b.dispatch({ type: 'ready' });
      const first = b.checkOut(); // starts connection 1
      const heldBack = b.checkOut(); // waits: maxConnecting reached
      b.failEstablishment(1);
      expect(b.errorOf(first)!.message).to.equal('establishment 1 failed');
      expect(b.errorOf(heldBack)).to.be.instanceOf(PoolClearedError);
      expect(b.types().filter((t) => t === 'ConnectionCreated')).to.have.length(1);
      expect(b.pending.size).to.equal(0);
    });

    it('a stale establishment that ends after ready() passes its maxConnecting slot to the checkout it held back', function () {
      for (const end of ['succeeds', 'fails'] as const) {
        const b = new Bench({ maxConnecting: 1, maxPoolSize: 1 });
        b.dispatch({ type: 'ready' });
        b.checkOut(); // starts connection 1 (generation 0)
        b.dispatch({ type: 'clear', interruptInUseConnections: false });
        b.dispatch({ type: 'ready' });
        const w = b.checkOut(); // held back by connection 1's slot
        expect([...b.pending], end).to.deep.equal([1]);
        if (end === 'succeeds') expect(b.succeed(1).destroyed, end).to.equal(true);
        else b.failEstablishment(1);
        expect([...b.pending], end).to.deep.equal([2]);
        expect(b.state, end).to.include({ state: 'ready', generation: 1 });
        const c2 = b.succeed(2);
        expect(b.connectionOf(w), end).to.equal(c2);
      }
    });
  });

  describe('establishment failure', function () {
    it('fails the claimant with the error (connectionError) and clears the pool', function () {
      const b = new Bench();
      b.dispatch({ type: 'ready' });
      const w = b.checkOut();
      const error = new Error('ECONNREFUSED');
      b.failEstablishment(1, error);
      expect(b.errorOf(w)).to.equal(error);
      expect(b.types().slice(-3)).to.deep.equal(['ConnectionPoolCleared', 'ConnectionClosed', 'ConnectionCheckOutFailed']);
      expect(b.events.at(-2)).to.include({ reason: 'error', error });
      expect(b.events.at(-1)).to.include({ reason: 'connectionError', error });
      expect(b.state.state).to.equal('paused');
      expect(b.state.records.size).to.equal(0);
    });

    it('fails the checkout that claimed a background establishment when that fails, even if another is pending', function () {
      // minPoolSize 2: the Background Thread starts two; a checkout claims one; the first to fail is its outcome.
      const b = new Bench({ minPoolSize: 2, maxConnecting: 2, waitQueueTimeoutMS: 100 });
      b.dispatch({ type: 'ready' });
      expect([...b.pending]).to.deep.equal([1, 2]);
      const w = b.checkOut();
      expect(b.state.claimants.length).to.equal(1);
      const overloaded = new Error('overloaded');
      b.failEstablishment(1, overloaded, false); // a backpressure error: the pool is not cleared
      expect(b.errorOf(w)).to.equal(overloaded);
      expect(b.events.at(-1)).to.include({ type: 'ConnectionCheckOutFailed', reason: 'connectionError' });
    });

    it('leaves repopulating after a failure to the next Background Thread Run (no retry loop at the same instant)', function () {
      const b = new Bench({ minPoolSize: 1, maxConnecting: 1, backgroundThreadIntervalMS: 50 });
      b.dispatch({ type: 'ready' });
      expect([...b.pending]).to.deep.equal([1]);
      b.failEstablishment(1, new Error('overloaded'), false);
      expect(b.pending.size, 'nothing started again at once').to.equal(0);
      b.advanceTo(50);
      expect([...b.pending], 'the next run populates').to.deep.equal([2]);
    });

    it('does not clear when the policy says so, and the pool stays ready', function () {
      const b = new Bench();
      b.dispatch({ type: 'ready' });
      const w = b.checkOut();
      b.failEstablishment(1, new Error('overloaded'), false);
      expect(b.state.state).to.equal('ready');
      expect(b.errorOf(w)?.message).to.equal('overloaded');
    });
  });

  describe('a connection errored as it becomes ready', function () {
    /** Sends `established` with a connection that is already errored (the runner turns those into failures). */
    function arriveErrored(b: Bench, id: number): FakeConnection {
      const connection = new FakeConnection(id);
      connection.errored = true;
      b.pending.delete(id);
      b.dispatch({ type: 'established', id, connection });
      return connection;
    }

    it('is closed (reason error); the checkout that claimed it gets another establishment', function () {
      const b = new Bench({ maxPoolSize: 2 });
      b.dispatch({ type: 'ready' });
      const w = b.checkOut();
      const c = arriveErrored(b, 1);
      expect(c.destroyed).to.equal(true);
      expect(b.events.filter((e): e is ConnectionClosedEvent => e.type === 'ConnectionClosed').map((e) => [e.connectionId, e.reason])).to.deep.equal([[1, 'error']]);
      expect([...b.pending]).to.deep.equal([2]);
      b.succeed(2);
      expect(b.connectionOf(w)?.id).to.equal(2);
    });

    it('is replaced for minPoolSize by the next Background Thread Run, not in the same step', function () {
      const b = new Bench({ minPoolSize: 1, backgroundThreadIntervalMS: 100 });
      b.dispatch({ type: 'ready' });
      expect([...b.pending]).to.deep.equal([1]);
      arriveErrored(b, 1);
      expect([...b.pending], 'nothing started at once').to.deep.equal([]);
      b.advanceTo(100);
      expect([...b.pending], 'the run refills').to.deep.equal([2]);
    });
  });

  describe('background runs', function () {
    it('populates to minPoolSize, maxConnecting at a time, without waiting for a slot', function () {
      const b = new Bench({ minPoolSize: 5, maxConnecting: 2, backgroundThreadIntervalMS: 1000 });
      b.dispatch({ type: 'ready' });
      expect([...b.pending]).to.deep.equal([1, 2]);
      b.succeed(1);
      expect([...b.pending]).to.deep.equal([2, 3]);
      b.succeed(2);
      b.succeed(3);
      b.succeed(4);
      b.succeed(5);
      expect(b.state.records.size).to.equal(5);
      expect(b.state.available.size).to.equal(5);
      expect(b.pending.size).to.equal(0);
    });

    it('closes idle available connections and repopulates to minPoolSize', function () {
      const b = new Bench({ minPoolSize: 1, maxIdleTimeMS: 500, backgroundThreadIntervalMS: 100 });
      b.dispatch({ type: 'ready' });
      b.succeed(1);
      b.advanceTo(499);
      expect(b.types()).to.not.include('ConnectionClosed');
      b.advanceTo(500);
      expect(b.events.find((e) => e.type === 'ConnectionClosed')).to.include({ connectionId: 1, reason: 'idle' });
      expect([...b.pending]).to.deep.equal([2]);
    });

    it('never runs with a negative interval, not even the run a clear schedules', function () {
      const b = new Bench({ minPoolSize: 1, backgroundThreadIntervalMS: -1 });
      b.dispatch({ type: 'ready' });
      expect(b.pending.size).to.equal(0);
      expect(b.timers.size).to.equal(0);
      b.dispatch({ type: 'clear', interruptInUseConnections: false });
      expect(b.timers.size).to.equal(0);
      expect(b.commands.filter((c) => c.type === 'arm')).to.deep.equal([]);
    });
  });

  describe('close', function () {
    it('closes available then pending connections, then emits ConnectionPoolClosed', function () {
      const b = new Bench({ maxPoolSize: 3, minPoolSize: 3, maxConnecting: 2 });
      b.dispatch({ type: 'ready' });
      b.succeed(1); // background populate: 1 available, 2 and 3 pending
      const w = b.checkOut();
      const c1 = b.connectionOf(w)!;
      expect(c1.id).to.equal(1);
      b.succeed(2); // available
      b.dispatch({ type: 'close' });
      const closed = b.events.filter((e): e is ConnectionClosedEvent => e.type === 'ConnectionClosed');
      expect(closed.map((e) => [e.connectionId, e.reason])).to.deep.equal([
        [2, 'poolClosed'],
        [3, 'poolClosed'],
      ]);
      expect(b.types().at(-1)).to.equal('ConnectionPoolClosed');
      expect(b.aborted).to.deep.equal([3]);
      expect(b.timers.size).to.equal(0);
      b.checkIn(c1); // in use during close: closed when checked in
      expect(b.events.at(-1)).to.include({ type: 'ConnectionClosed', connectionId: 1, reason: 'poolClosed' });
      expect(c1.destroyed).to.equal(true);
      expect(b.state.records.size).to.equal(0);
      const late = b.succeed(3); // a late establishment result is torn down, never pooled
      expect(late.destroyed).to.equal(true);
    });

    it('fails waiting checkouts with PoolClosedError after ConnectionPoolClosed', function () {
      const b = new Bench({ maxPoolSize: 1 });
      b.dispatch({ type: 'ready' });
      b.checkOut();
      b.succeed(1);
      const queued = b.checkOut();
      b.dispatch({ type: 'close' });
      expect(b.types().slice(-2)).to.deep.equal(['ConnectionPoolClosed', 'ConnectionCheckOutFailed']);
      expect(b.events.at(-1)).to.include({ reason: 'poolClosed' });
      expect(b.errorOf(queued)).to.be.instanceOf(PoolClosedError);
    });
  });

  describe('checkIn', function () {
    it('closes a connection checked in to be discarded (reason error, with its error), even though it does not report errored', function () {
      const b = new Bench();
      b.dispatch({ type: 'ready' });
      const w = b.checkOut();
      const c = b.succeed(1);
      expect(c.errored).to.equal(false);
      const discard = new Error('its scoped checkout ended while a request was in flight');
      b.dispatch({ type: 'checkIn', connection: c, holder: w, discard });
      expect(b.types().slice(-2)).to.deep.equal(['ConnectionCheckedIn', 'ConnectionClosed']);
      expect(b.events.at(-1)).to.include({ connectionId: 1, reason: 'error', error: discard });
      expect(b.destroyed).to.deep.equal([c]);
      expect(b.state.records.size).to.equal(0);
    });

    /** A ready pool of 2 with both connections checked out. */
    function twoCheckedOut() {
      const b = new Bench({ maxPoolSize: 2 });
      b.dispatch({ type: 'ready' });
      const w1 = b.checkOut();
      const w2 = b.checkOut();
      return { b, w1, w2, c1: b.succeed(1), c2: b.succeed(2) };
    }

    it('closes an errored connection checked in with the error it says made it errored (reason error); none when it says none', function () {
      const { b, w1, w2, c1, c2 } = twoCheckedOut();
      const reset = new Error('read ECONNRESET');
      c1.errored = true;
      c1.error = reset;
      c2.errored = true;
      b.dispatch({ type: 'checkIn', connection: c1, holder: w1 });
      expect(b.events.at(-1)).to.include({ type: 'ConnectionClosed', connectionId: 1, reason: 'error', error: reset });
      b.dispatch({ type: 'checkIn', connection: c2, holder: w2 });
      expect(b.events.at(-1)).to.include({ type: 'ConnectionClosed', connectionId: 2, reason: 'error' });
      expect(b.events.at(-1)).to.not.have.property('error');
    });

    it('closes an errored connection checked in after the clear its error caused with reason error and that error, not stale', function () {
      // A command's network error clears the pool, then the connection comes back: its own error is why it closed,
      // and the only place the events and the log show the error that caused the clear.
      const { b, w1, c1 } = twoCheckedOut();
      const reset = new Error('read ECONNRESET');
      c1.errored = true;
      c1.error = reset;
      b.dispatch({ type: 'clear', interruptInUseConnections: false });
      b.dispatch({ type: 'checkIn', connection: c1, holder: w1 });
      expect(b.events.at(-1)).to.include({ type: 'ConnectionClosed', connectionId: 1, reason: 'error', error: reset });
    });

    it('closes a connection an interrupting clear errored as stale when it comes back, and one errored later by its own error', function () {
      const { b, w1, c1 } = twoCheckedOut();
      b.dispatch({ type: 'clear', interruptInUseConnections: true });
      expect(c1.destroyed, 'interrupted').to.equal(true);
      c1.errored = true;
      c1.error = c1.destroyError;
      b.dispatch({ type: 'checkIn', connection: c1, holder: w1 });
      expect(b.events.at(-1)).to.include({ type: 'ConnectionClosed', connectionId: 1, reason: 'stale' });
      expect(b.events.at(-1)).to.not.have.property('error');
      // A connection of the generation after the interruption, errored by its own network error after a later clear.
      b.dispatch({ type: 'ready' });
      const w = b.checkOut();
      const c = b.succeed([...b.pending].at(-1)!);
      expect(b.connectionOf(w)).to.equal(c);
      const reset = new Error('read ECONNRESET');
      c.errored = true;
      c.error = reset;
      b.dispatch({ type: 'clear', interruptInUseConnections: false });
      b.dispatch({ type: 'checkIn', connection: c, holder: w });
      expect(b.events.at(-1)).to.include({ type: 'ConnectionClosed', connectionId: c.id, reason: 'error', error: reset });
    });

    it('closes a connection errored by its own error before an interrupting clear with reason error and that error: the clear did not interrupt it', function () {
      // Its network error cleared the pool; before it came back, a failed check cleared it again, interrupting the
      // connections in use: this one had failed already, and its own error is still why it closed.
      const { b, w1, w2, c1, c2 } = twoCheckedOut();
      const reset = new Error('read ECONNRESET');
      c1.errored = true;
      c1.error = reset;
      b.dispatch({ type: 'clear', interruptInUseConnections: false });
      b.dispatch({ type: 'clear', interruptInUseConnections: true });
      expect(c2.destroyed, 'c2 interrupted').to.equal(true);
      c2.errored = true;
      c2.error = c2.destroyError;
      b.dispatch({ type: 'checkIn', connection: c1, holder: w1 });
      expect(b.events.at(-1)).to.include({ type: 'ConnectionClosed', connectionId: 1, reason: 'error', error: reset });
      b.dispatch({ type: 'checkIn', connection: c2, holder: w2 });
      expect(b.events.at(-1)).to.include({ type: 'ConnectionClosed', connectionId: 2, reason: 'stale' });
      expect(b.events.at(-1)).to.not.have.property('error');
    });

    it('carries no error on a close for another reason, nor one whose error cannot be read', function () {
      const { b, w1, w2, c1, c2 } = twoCheckedOut();
      b.dispatch({ type: 'clear', interruptInUseConnections: false });
      b.dispatch({ type: 'checkIn', connection: c1, holder: w1 });
      expect(b.events.at(-1)).to.include({ type: 'ConnectionClosed', connectionId: 1, reason: 'stale' });
      expect(b.events.at(-1)).to.not.have.property('error');
      c2.errored = true;
      c2.error = new Error('read ECONNRESET');
      b.dispatch({ type: 'close' });
      b.dispatch({ type: 'checkIn', connection: c2, holder: w2 }); // the pool's close comes first
      expect(b.events.at(-1)).to.include({ type: 'ConnectionClosed', connectionId: 2, reason: 'poolClosed' });
      expect(b.events.at(-1)).to.not.have.property('error');
      const e = new Bench();
      e.dispatch({ type: 'ready' });
      const w = e.checkOut();
      const c = e.succeed(1);
      c.errored = true;
      Object.defineProperty(c, 'error', {
        get() {
          throw new Error('unreadable');
        },
      });
      e.dispatch({ type: 'checkIn', connection: c, holder: w });
      expect(e.events.at(-1)).to.include({ type: 'ConnectionClosed', connectionId: 1, reason: 'error' });
      expect(e.events.at(-1)).to.not.have.property('error');
    });
  });

  describe('WaitQueue timer', function () {
    it('is armed only for a checkout left waiting in the WaitQueue, not one served at once or claiming an establishment', function () {
      const b = new Bench({ maxPoolSize: 1, waitQueueTimeoutMS: 100 });
      b.dispatch({ type: 'ready' });
      const claimant = b.checkOut(); // starts connection 1: a claimant, out of the WaitQueue
      const c = b.succeed(1);
      expect(b.connectionOf(claimant)).to.equal(c);
      b.checkIn(c);
      const served = b.checkOut(); // served at once from the available connection
      expect(b.connectionOf(served)).to.equal(c);
      expect(b.commands.filter((x) => x.type === 'arm' && x.timer === 'waitQueue')).to.deep.equal([]);
      b.time = 10;
      b.checkOut(); // waits: the pool is full
      expect(b.timers.get('waitQueue')).to.equal(110);
    });

    it('is disarmed by a clear, which evicted every waiter', function () {
      const b = new Bench({ maxPoolSize: 1, waitQueueTimeoutMS: 100 });
      b.dispatch({ type: 'ready' });
      b.checkOut();
      b.succeed(1);
      b.checkOut();
      expect(b.timers.has('waitQueue')).to.equal(true);
      b.dispatch({ type: 'clear', interruptInUseConnections: false });
      expect(b.timers.has('waitQueue')).to.equal(false);
      // A waiter that comes after the next ready gets its own deadline.
      b.dispatch({ type: 'ready' });
      b.time = 30;
      const late = b.checkOut();
      expect(b.timers.get('waitQueue')).to.equal(130);
      b.advanceTo(129);
      expect(b.errorOf(late)).to.equal(undefined);
      b.advanceTo(130);
      expect(b.errorOf(late)).to.be.instanceOf(WaitQueueTimeoutError);
    });
    /** A pool of 1 whose connection is held, and a checkout waiting until t = 100. */
    function heldWithWaiter(): { b: Bench; first: ReturnType<Bench['checkOut']> } {
      const b = new Bench({ maxPoolSize: 1, waitQueueTimeoutMS: 100 });
      b.dispatch({ type: 'ready' });
      b.checkOut();
      b.succeed(1);
      return { b, first: b.checkOut() };
    }
    /** How many times the WaitQueue timer was armed so far. */
    const waitQueueArms = (b: Bench): number => b.commands.filter((x) => x.type === 'arm' && x.timer === 'waitQueue').length;

    it('is armed again when a checkout enters while it is overdue (lost: fake timers uninstalled before it ran)', function () {
      // Fake timers drop the timers armed with them when uninstalled. The WaitQueue timer is armed for its head only:
      // lost, no later checkout timed out either while the pool stayed full.
      const { b, first } = heldWithWaiter();
      expect(b.timers.get('waitQueue')).to.equal(100);
      b.timers.delete('waitQueue'); // lost
      b.time = 500;
      const later = b.checkOut(); // until 600
      expect(b.timers.get('waitQueue'), 'armed for now: the lost one was due').to.equal(500);
      b.advanceTo(500);
      expect(b.errorOf(first)).to.be.instanceOf(WaitQueueTimeoutError);
      expect(b.errorOf(later)).to.equal(undefined);
      b.advanceTo(600);
      expect(b.errorOf(later)).to.be.instanceOf(WaitQueueTimeoutError);
    });

    it('is armed again once, not by each checkout that enters while it is late, until it runs', function () {
      const { b } = heldWithWaiter();
      b.time = 150; // the timer is late (an event loop behind), or lost
      const before = waitQueueArms(b);
      b.checkOut();
      expect(waitQueueArms(b), 'armed again').to.equal(before + 1);
      b.time = 160;
      b.checkOut();
      b.time = 170;
      b.checkOut();
      expect(waitQueueArms(b), 'not again while that one is coming').to.equal(before + 1);
    });

    it('is armed again when a checkout left waiting on a populate takes a deadline while it is overdue', function () {
      // w1 (t=0, deadline 50) claims the populate; w2 (t=10) starts connection 2. The timer, armed for 50, is lost;
      // connection 2 goes to w1 at t=55 and w2 waits on the populate until 60: the timer must come again for it.
      const { b, w1, w2 } = populateClaimedAndSecondStarted();
      expect(b.timers.get('waitQueue')).to.equal(50);
      b.timers.delete('waitQueue'); // lost
      b.time = 55;
      expect(b.succeed(2)).to.equal(b.connectionOf(w1));
      expect(b.timers.get('waitQueue'), 'armed for now: the lost one was due').to.equal(55);
      b.advanceTo(55);
      expect(b.errorOf(w2), 'not before its own deadline').to.equal(undefined);
      b.advanceTo(60);
      expect(b.errorOf(w2)).to.be.instanceOf(WaitQueueTimeoutError);
    });

    it('is not armed again by a checkout that enters while it is due at that very time', function () {
      const { b } = heldWithWaiter();
      b.time = 100;
      const armed = b.commands.filter((x) => x.type === 'arm').length;
      b.checkOut();
      expect(b.commands.filter((x) => x.type === 'arm').length).to.equal(armed);
    });
  });

  describe('durations and time', function () {
    it('a checkout started while nobody observed is untimed (no duration), unless a WaitQueue deadline timed it', function () {
      for (const [waitQueueTimeoutMS, duration] of [
        [0, undefined],
        [1000, 10],
      ] as const) {
        const b = new Bench({ waitQueueTimeoutMS }, false);
        b.dispatch({ type: 'ready' });
        b.checkOut(); // at t = 0, nobody observing
        b.time = 5;
        b.state.observed = true; // as events$'s first subscriber sets it
        b.time = 10;
        b.succeed(1);
        expect(b.events.find((e) => e.type === 'ConnectionCheckedOut'), `waitQueueTimeoutMS ${waitQueueTimeoutMS}`).to.include({ duration });
      }
    });

    it('reads the clock once per step: every event of one action carries the same time', function () {
      let reads = 0;
      const state = initialPoolState<FakeConnection>('localhost:27017', resolvePoolOptions({}), () => ++reads);
      state.observed = true;
      reduce(state, { type: 'ready' });
      reads = 100;
      const commands = reduce(state, { type: 'checkOut', waiter: new TestWaiter() }).commands;
      const events = commands.flatMap((c) => (c.type === 'emit' ? [c.event] : []));
      expect(events.map((e) => [e.type, e.time])).to.deep.equal([
        ['ConnectionCheckOutStarted', 101],
        ['ConnectionCreated', 101],
      ]);
      expect(reads).to.equal(101);
    });
  });

  it('a cancel processed before its checkOut means the checkout never starts', function () {
    const b = new Bench();
    b.dispatch({ type: 'ready' });
    const w = new TestWaiter();
    expect(b.dispatch({ type: 'cancel', waiter: w })).to.deep.equal([]);
    expect(w.state).to.equal('done');
    expect(b.dispatch({ type: 'checkOut', waiter: w })).to.deep.equal([]);
    expect(b.types()).to.deep.equal(['ConnectionPoolReady']);
    expect(b.state.waitQueue.length + b.state.claimants.length).to.equal(0);
    expect(b.pending.size).to.equal(0);
  });

  it('the failure of an establishment from before a clear neither fails a newer claimant nor clears the pool again', function () {
    const b = new Bench();
    b.dispatch({ type: 'ready' });
    const old = b.checkOut(); // starts connection 1 (generation 0)
    b.dispatch({ type: 'clear', interruptInUseConnections: false });
    expect(b.errorOf(old)).to.be.instanceOf(PoolClearedError);
    b.dispatch({ type: 'ready' });
    const w = b.checkOut(); // starts connection 2 (generation 1), and claims it
    expect([...b.pending]).to.deep.equal([1, 2]);
    b.failEstablishment(1, new Error('refused'), true);
    expect(b.errorOf(w)).to.equal(undefined);
    expect(b.state).to.include({ state: 'ready', generation: 1 });
    expect(b.events.at(-1)).to.include({ type: 'ConnectionClosed', connectionId: 1, reason: 'error' });
    const c = b.succeed(2);
    expect(b.connectionOf(w)).to.equal(c);
  });

  it('builds no event while nobody observes', function () {
    const b = new Bench({}, false);
    b.dispatch({ type: 'ready' });
    b.checkOut();
    b.succeed(1);
    expect(b.commands.filter((c) => c.type === 'emit')).to.have.length(0);
    expect(b.outcomes).to.have.length(1);
  });

  it('builds no event on any path while nobody observes: failures, check-ins, closes, clear, close', function () {
    const b = new Bench({ maxPoolSize: 1, waitQueueTimeoutMS: 100 }, false);
    b.checkOut(); // paused: fails
    b.dispatch({ type: 'ready' });
    const w = b.checkOut();
    const c = b.succeed(1);
    b.checkIn(c); // available
    const w2 = b.checkOut();
    expect(b.connectionOf(w2)).to.equal(c);
    c.errored = true;
    b.checkIn(c); // closed: errored
    b.checkOut();
    b.failEstablishment(2, new Error('refused'), false);
    b.checkOut();
    b.checkOut();
    b.advanceTo(100); // the queued one times out
    b.dispatch({ type: 'clear', interruptInUseConnections: true });
    b.dispatch({ type: 'ready' });
    b.checkOut();
    b.dispatch({ type: 'close' });
    expect(b.connectionOf(w)).to.equal(c);
    expect(b.outcomes.filter((o) => o.kind === 'fail')).to.have.length(5); // paused, establishment, timeout, clear, close
    expect(b.commands.filter((x) => x.type === 'emit')).to.deep.equal([]);
  });

  it('a state made without the loadBalanced argument is not load-balanced: connections join no service', function () {
    const state = initialPoolState<FakeConnection>('localhost:27017', resolvePoolOptions({}), () => 0);
    expect(state.loadBalanced).to.equal(false);
    reduce(state, { type: 'ready' });
    reduce(state, { type: 'checkOut', waiter: new TestWaiter() });
    reduce(state, { type: 'established', id: 1, connection: new FakeConnection(1, 'aaaaaaaaaaaaaaaaaaaaaaaa') });
    expect(state.records.get(1)).to.include({ state: 'in use', serviceId: undefined, generation: 0 });
    expect(state.serviceGenerations.size).to.equal(0);
  });

  it('ignores a check-in from the holder of a connection that carries its id but is another object', function () {
    const b = new Bench();
    b.dispatch({ type: 'ready' });
    const w = b.checkOut();
    const c = b.succeed(1);
    expect(b.connectionOf(w)).to.equal(c);
    const other = new FakeConnection(1);
    expect(b.dispatch({ type: 'checkIn', connection: other, holder: w })).to.deep.equal([]);
    expect(b.state.records.get(1)).to.include({ state: 'in use', holder: w, connection: c });
    b.checkIn(c, w); // the connection itself is still accepted from its holder
    expect(b.state.records.get(1)).to.include({ state: 'available', holder: undefined });
  });

  it('a second establishment result for a connection no longer pending destroys what it carries and changes nothing', function () {
    const b = new Bench();
    b.dispatch({ type: 'ready' });
    const w = b.checkOut();
    const c = b.succeed(1);
    expect(b.connectionOf(w)).to.equal(c);
    const duplicate = new FakeConnection(1);
    const commands = b.dispatch({ type: 'established', id: 1, connection: duplicate });
    expect(commands).to.deep.equal([{ type: 'destroy', connection: duplicate }]);
    expect(duplicate.destroyed).to.equal(true);
    expect(b.state.records.get(1)).to.include({ state: 'in use', connection: c });
    expect(b.state).to.include({ pendingConnectionCount: 0, claimablePendingCount: 0 });
    expect(b.state.available.size).to.equal(0);
  });

  it('an establishment failure reported for an established connection is ignored: no clear, no close, no claimant failed', function () {
    const b = new Bench();
    b.dispatch({ type: 'ready' });
    b.checkOut();
    const c = b.succeed(1);
    const claimant = b.checkOut(); // starts connection 2 and claims it
    const commands = b.dispatch({ type: 'establishFailed', id: 1, error: new Error('late failure'), clearPool: true });
    expect(commands).to.deep.equal([]);
    expect(b.state).to.include({ state: 'ready', generation: 0 });
    expect(b.state.records.get(1)).to.include({ state: 'in use', connection: c });
    expect(c.destroyed).to.equal(false);
    expect(b.errorOf(claimant)).to.equal(undefined);
    expect(b.state.claimants.length).to.equal(1);
  });

  it('reads no clock for check-ins and checkouts of an established connection when nothing needs time', function () {
    // Unobserved, no maxIdleTimeMS, no waitQueueTimeoutMS: no event duration, idle time or deadline to compute.
    let reads = 0;
    const state = initialPoolState<FakeConnection>('localhost:27017', resolvePoolOptions({}), () => ++reads);
    reduce(state, { type: 'ready' });
    reduce(state, { type: 'checkOut', waiter: new TestWaiter() });
    const c = new FakeConnection(1);
    reduce(state, { type: 'established', id: 1, connection: c });
    expect(reads, 'creating a connection records its creation time').to.equal(1);
    reads = 0;
    for (let i = 0; i < 3; i++) {
      reduce(state, { type: 'checkIn', connection: c, holder: state.records.get(1)!.holder! });
      expect(state.records.get(1)?.state).to.equal('available');
      reduce(state, { type: 'checkOut', waiter: new TestWaiter() });
      expect(state.records.get(1)?.state).to.equal('in use');
    }
    expect(reads).to.equal(0);
  });

  it('a clear while no WaitQueue timer is armed sends no disarm command', function () {
    const b = new Bench({ maxPoolSize: 1 }); // no waitQueueTimeoutMS: a waiter has no deadline, no timer is armed
    b.dispatch({ type: 'ready' });
    b.checkOut();
    b.succeed(1);
    const queued = b.checkOut();
    expect(b.timers.has('waitQueue')).to.equal(false);
    const commands = b.dispatch({ type: 'clear', interruptInUseConnections: false });
    expect(b.errorOf(queued)).to.be.instanceOf(PoolClearedError);
    expect(commands.map((c) => c.type)).to.not.include('disarm');
  });

  it('a cancel nobody observes is one state change: no event, no error built, no command', function () {
    const b = new Bench({ maxPoolSize: 1 }, false);
    b.dispatch({ type: 'ready' });
    b.checkOut();
    b.succeed(1);
    const waiting = b.checkOut();
    expect(b.cancel(waiting)).to.deep.equal([]);
    expect(b.state.waitQueue.length).to.equal(0);
  });
});
