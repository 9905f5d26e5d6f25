import { expect } from 'chai';
import { firstValueFrom, timer } from 'rxjs';
import { ConnectionPoolCore, InvalidOptionError } from '../../lib';
import { MockConnection, MockConnectionFactory, VirtualClock } from '../../lib/testing';

describe('VirtualClock', function () {
  it('runs timers due at the same time in the order they were scheduled, and those they arm when due by then', function () {
    const clock = new VirtualClock();
    const order: string[] = [];
    clock.schedule(() => order.push('a'), 10);
    clock.schedule(() => {
      order.push('b');
      clock.schedule(() => order.push('b+0'), 0);
      clock.schedule(() => order.push('b+5'), 5);
      clock.schedule(() => order.push('b+50'), 50);
    }, 10);
    clock.schedule(() => order.push('c'), 10);
    clock.advance(15);
    expect(order).to.deep.equal(['a', 'b', 'c', 'b+0', 'b+5']);
    expect(clock.now()).to.equal(15);
  });

  it('a timer armed with a negative delay runs at the current time: the clock never moves back', function () {
    const clock = new VirtualClock();
    clock.advance(100);
    const seen: number[] = [];
    clock.schedule(() => seen.push(clock.now()), -50);
    clock.schedule(() => seen.push(clock.now()), 0);
    clock.advance(0);
    expect(seen).to.deep.equal([100, 100]);
    expect(clock.now()).to.equal(100);
  });

  it('a timer that throws stops the advance at its due time; the error is rethrown and the other timers stay scheduled', function () {
    const clock = new VirtualClock();
    const ran: number[] = [];
    clock.schedule(() => {
      throw new Error('boom');
    }, 10);
    clock.schedule(() => ran.push(clock.now()), 10);
    clock.schedule(() => ran.push(clock.now()), 20);
    const ticks: number[] = [];
    timer(5, 5, clock).subscribe((n) => ticks.push(n));
    expect(() => clock.advance(30)).to.throw('boom');
    expect(clock.now()).to.equal(10);
    expect(ran).to.deep.equal([]);
    clock.advance(20);
    expect(ran).to.deep.equal([10, 20]);
    expect(ticks).to.deep.equal([0, 1, 2, 3, 4, 5]);
    expect(clock.now()).to.equal(30);
  });

  it('refuses a negative, non-finite or non-number move with InvalidOptionError naming it, and leaves the clock where it was', function () {
    const clock = new VirtualClock();
    clock.advance(5);
    for (const bad of [-1, Number.NaN, Infinity, '10' as unknown as number]) {
      expect(() => clock.advance(bad), String(bad)).to.throw(InvalidOptionError, 'VirtualClock.advance(ms)').with.property('option', 'ms');
      expect(() => clock.advance(bad), String(bad)).to.throw(InvalidOptionError).with.property('allowed', 'a finite number >= 0');
    }
    for (const bad of [Number.NaN, Infinity, '10' as unknown as number]) {
      expect(() => clock.advanceTo(bad), String(bad)).to.throw(InvalidOptionError, 'VirtualClock.advanceTo(time)').with.property('option', 'time');
      expect(() => clock.advanceTo(bad), String(bad)).to.throw(InvalidOptionError).with.property('allowed', 'a finite number');
    }
    clock.advanceTo(3); // not ahead: no-op
    expect(clock.now()).to.equal(5);
  });

  it('advanceTo moves to an absolute time ahead, running what is due by then, and runs nothing at the current time', function () {
    const clock = new VirtualClock();
    const ran: number[] = [];
    clock.advance(5);
    clock.schedule(() => ran.push(clock.now()), 0);
    clock.advanceTo(5); // not ahead: the timer due now waits for the next move
    expect(ran).to.deep.equal([]);
    clock.schedule(() => ran.push(clock.now()), 10);
    clock.advanceTo(12);
    expect(clock.now()).to.equal(12);
    expect(ran).to.deep.equal([5]);
    clock.advanceTo(15);
    expect(clock.now()).to.equal(15);
    expect(ran).to.deep.equal([5, 15]);
  });
});

describe('VirtualClock.advanceAsync', function () {
  it('lets promise continuations run before each timer, so work they schedule runs at its virtual time within the same advance', async function () {
    const clock = new VirtualClock();
    const seen: string[] = [];
    // A retry loop: its backoff timer is armed only after two awaits.
    void (async () => {
      await Promise.resolve();
      await Promise.resolve();
      await firstValueFrom(timer(50, clock));
      seen.push(`retry at ${clock.now()}`);
      await firstValueFrom(timer(20, clock));
      seen.push(`done at ${clock.now()}`);
    })();
    await clock.advanceAsync(70);
    expect(seen).to.deep.equal(['retry at 50', 'done at 70']);
    expect(clock.now()).to.equal(70);
    await clock.advanceAsync(0);
    expect(clock.now()).to.equal(70);
  });

  it('settles a Promise-form checkout at its waitQueueTimeoutMS with no flush before or after the advance', async function () {
    const clock = new VirtualClock();
    const mock = new MockConnectionFactory({ scheduler: clock, establishDelayMS: 20 });
    const pool = new ConnectionPoolCore<MockConnection>({ address: 'db:27017', maxPoolSize: 1, waitQueueTimeoutMS: 100, scheduler: clock, connectionFactory: mock.factory });
    pool.ready();
    const outcomes: string[] = [];
    // `await` enters the pool a microtask after the call, as code under test awaits it.
    void (async () => {
      const c = await pool.checkOut();
      outcomes.push(`connection ${c.id} at ${clock.now()}`);
    })();
    void (async () => {
      try {
        await pool.checkOut();
        outcomes.push('second served');
      } catch (e) {
        outcomes.push(`${(e as Error).name} at ${clock.now()}`);
      }
    })();
    await clock.advanceAsync(20);
    expect(outcomes).to.deep.equal(['connection 1 at 20']);
    await clock.advanceAsync(80);
    expect(outcomes).to.deep.equal(['connection 1 at 20', 'WaitQueueTimeoutError at 100']);
    pool.close();
  });

  it('rejects with what a timer threw and stops at its due time; refuses a bad ms with InvalidOptionError', async function () {
    const clock = new VirtualClock();
    const ran: number[] = [];
    clock.schedule(() => {
      throw new Error('boom');
    }, 10);
    clock.schedule(() => ran.push(clock.now()), 20);
    let error: unknown;
    await clock.advanceAsync(30).catch((e: unknown) => (error = e));
    expect(error).to.have.property('message', 'boom');
    expect(clock.now()).to.equal(10);
    expect(ran).to.deep.equal([]);
    for (const bad of [-1, Number.NaN, Infinity, '10' as unknown as number]) {
      let refused: unknown;
      await clock.advanceAsync(bad).catch((e: unknown) => (refused = e));
      expect(refused, String(bad)).to.be.instanceOf(InvalidOptionError).with.property('option', 'ms');
      expect((refused as Error).message, String(bad)).to.equal(`VirtualClock.advanceAsync(ms): ms must be a finite number >= 0, got ${String(bad)}`);
    }
    expect(clock.now()).to.equal(10);
  });
});
