import { expect } from 'chai';
import { timerScheduler } from '../lib';

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
});
