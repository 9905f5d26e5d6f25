/**
 * VirtualClock: virtual time for testing code that uses a pool, a monitor or a client. Pass it as their `scheduler`
 * and move time with {@link VirtualClock.advance}.
 *
 * Why not RxJS's `VirtualTimeScheduler.flush()` alone: a pool's Background Thread re-arms itself every
 * backgroundThreadIntervalMS (and a monitor its next check), so `flush()` would run virtual time forever. `advance`
 * runs only what is due up to a bound, and stops there.
 *
 * Source: extension (RxJS `VirtualTimeScheduler`, bounded the way test clocks such as `@sinonjs/fake-timers`' `tick`
 * are).
 */
import { VirtualTimeScheduler } from 'rxjs';

/**
 * An RxJS `VirtualTimeScheduler` whose time moves only when told. `now()` starts at 0 (ms).
 *
 * @example
 * ```ts
 * const clock = new VirtualClock();
 * const pool = new ConnectionPool({ address: 'db:27017', waitQueueTimeoutMS: 100, scheduler: clock,
 *   connectionFactory: new MockConnectionFactory({ scheduler: clock }).factory });
 * clock.advance(100); // every timer due by t = 100 ms has run, in order; now() === 100
 * ```
 *
 * Source: extension (RxJS `VirtualTimeScheduler`, bounded the way test clocks such as `@sinonjs/fake-timers`' `tick`
 * are).
 */
export class VirtualClock extends VirtualTimeScheduler {
  /**
   * Runs every timer due up to `now() + ms`, in time order (timers they arm run too, if due by then), and leaves the
   * clock at exactly `now() + ms`.
   *
   * @param ms how far to move, in ms; a finite number >= 0.
   * @throws {RangeError} for a negative or non-finite `ms`.
   */
  advance(ms: number): void {
    if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
      throw new RangeError(`VirtualClock.advance(ms): ms must be a finite number >= 0, got ${String(ms)}`);
    }
    const target = this.now() + ms;
    this.schedule(() => undefined, ms); // so the clock lands on the target even when nothing is due there
    this.maxFrames = target;
    try {
      this.flush();
    } finally {
      this.maxFrames = Infinity;
    }
  }

  /** Moves to the absolute virtual time `time` (ms), running what is due; no-op when `time` is not ahead. */
  advanceTo(time: number): void {
    if (time > this.now()) this.advance(time - this.now());
  }
}
