import { expect } from 'chai';
import { timer } from 'rxjs';
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
});
