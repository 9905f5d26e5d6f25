/**
 * The default scheduler of pool timers (WaitQueue deadlines, Background Thread Runs): real timers that never keep
 * the process alive, and a monotonic clock in epoch milliseconds.
 *
 * Any RxJS `SchedulerLike` can replace it (e.g. a `VirtualTimeScheduler` in tests): the pool reads time only from
 * `scheduler.now()` and arms timers only through `scheduler.schedule()`.
 */
import { Subscription, type SchedulerAction, type SchedulerLike } from 'rxjs';

const origin = performance.timeOrigin;

class UnrefTimerAction<T> extends Subscription implements SchedulerAction<T> {
  private handle: NodeJS.Timeout | undefined;

  constructor(private readonly work: (this: SchedulerAction<T>, state?: T) => void) {
    super(() => this.cancel());
  }

  schedule(state?: T, delay = 0): Subscription {
    if (this.closed) return this;
    this.cancel();
    this.handle = setTimeout(() => {
      this.handle = undefined;
      this.work.call(this, state);
    }, Math.max(0, delay));
    this.handle.unref();
    return this;
  }

  private cancel(): void {
    if (this.handle !== undefined) clearTimeout(this.handle);
    this.handle = undefined;
  }
}

/**
 * A `SchedulerLike` on Node timers, each `unref()`'d so a pool's timers never keep the process alive.
 * `now()` is monotonic (`performance.now()`), offset to milliseconds since the Unix epoch; `schedule(work, delay)`
 * takes its delay in ms (negative counts as 0). The default `scheduler` of pools and monitors.
 *
 * Source: extension (RxJS's `SchedulerLike`; the CMAP spec's timers: WaitQueue timeouts and Background Thread Runs).
 */
export const timerScheduler: SchedulerLike = Object.freeze({
  now: (): number => origin + performance.now(),
  schedule<T>(work: (this: SchedulerAction<T>, state?: T) => void, delay = 0, state?: T): Subscription {
    return new UnrefTimerAction<T>(work).schedule(state, delay);
  },
});
