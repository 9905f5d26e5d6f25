import { expect } from 'chai';
import { timer } from 'rxjs';
import { InvalidOptionError } from '../../lib';
import { VirtualClock } from '../../lib/testing';

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
    }
    for (const bad of [Number.NaN, Infinity, '10' as unknown as number]) {
      expect(() => clock.advanceTo(bad), String(bad)).to.throw(InvalidOptionError, 'VirtualClock.advanceTo(time)').with.property('option', 'time');
    }
    clock.advanceTo(3); // not ahead: no-op
    expect(clock.now()).to.equal(5);
  });
});
