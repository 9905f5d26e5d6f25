import { expect } from 'chai';
import { timerScheduler } from '../lib';
import { MAX_TIMER_DELAY_MS } from '../lib/scheduler';

describe('timerScheduler', function () {
  it('reads a monotonic clock in epoch milliseconds', function () {
    const a = timerScheduler.now();
    const b = timerScheduler.now();
    expect(b).to.be.at.least(a);
    expect(Math.abs(a - Date.now())).to.be.below(1000);
  });

  it('runs scheduled work after the delay, and not when unsubscribed first', async function () {
    const ran: string[] = [];
    timerScheduler.schedule(() => ran.push('kept'), 5);
    const cancelled = timerScheduler.schedule(() => ran.push('cancelled'), 5);
    cancelled.unsubscribe();
    await new Promise((r) => setTimeout(r, 30));
    expect(ran).to.deep.equal(['kept']);
  });

  it('unrefs its timers so they never keep the process alive', function () {
    const sub = timerScheduler.schedule(() => undefined, 60_000);
    const handle = (sub as unknown as { handle: NodeJS.Timeout }).handle;
    expect(handle.hasRef()).to.equal(false);
    sub.unsubscribe();
  });

  it('arms a delay beyond what one Node timer holds as a chain of timers, running the work once at the end', function () {
    // Node runs a timer whose delay exceeds 2^31 - 1 ms after 1 ms: a waitQueueTimeoutMS or checkOut timeoutMS of
    // 2^31 must not fail a checkout at once. setTimeout is replaced so the chain is seen without waiting 25 days.
    const armed: { fn: () => void; delay: number; cleared: boolean }[] = [];
    const saved = { set: globalThis.setTimeout, clear: globalThis.clearTimeout };
    globalThis.setTimeout = ((fn: () => void, delay: number) => {
      const timer = { fn, delay, cleared: false, unref: () => timer, hasRef: () => false };
      armed.push(timer);
      return timer;
    }) as unknown as typeof setTimeout;
    globalThis.clearTimeout = ((timer: { cleared: boolean }) => (timer.cleared = true)) as unknown as typeof clearTimeout;
    const ran: number[] = [];
    try {
      const delay = 2 * MAX_TIMER_DELAY_MS + 5;
      timerScheduler.schedule(() => ran.push(delay), delay);
      expect(armed.map((t) => t.delay)).to.deep.equal([MAX_TIMER_DELAY_MS]);
      armed[0].fn();
      expect(armed.map((t) => t.delay)).to.deep.equal([MAX_TIMER_DELAY_MS, MAX_TIMER_DELAY_MS]);
      armed[1].fn();
      expect(armed.map((t) => t.delay)).to.deep.equal([MAX_TIMER_DELAY_MS, MAX_TIMER_DELAY_MS, 5]);
      expect(ran, 'not before the whole delay').to.deep.equal([]);
      armed[2].fn();
      expect(ran).to.deep.equal([delay]);
      // Cancelled part way, the chain stops: the timer armed now is cleared and the work never runs.
      const cancelled = timerScheduler.schedule(() => ran.push(-1), MAX_TIMER_DELAY_MS + 1);
      armed[3].fn();
      expect(armed[4].delay).to.equal(1);
      cancelled.unsubscribe();
      expect(armed[4].cleared).to.equal(true);
      // A delay Node's timer holds is one timer, as before.
      timerScheduler.schedule(() => ran.push(MAX_TIMER_DELAY_MS), MAX_TIMER_DELAY_MS);
      expect(armed[5].delay).to.equal(MAX_TIMER_DELAY_MS);
      armed[5].fn();
      expect(ran).to.deep.equal([delay, MAX_TIMER_DELAY_MS]);
    } finally {
      globalThis.setTimeout = saved.set;
      globalThis.clearTimeout = saved.clear;
    }
  });
});
