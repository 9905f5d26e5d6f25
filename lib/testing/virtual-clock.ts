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
import { InvalidOptionError } from '../errors';

/**
 * An RxJS `VirtualTimeScheduler` whose time moves only when told. `now()` starts at 0 (ms). It replaces neither
 * `Date.now()` nor Node's timers: only code given it as its `scheduler` runs on virtual time. The constructor never
 * throws; {@link VirtualClock.advance} and {@link VirtualClock.advanceTo} throw InvalidOptionError for a bad input.
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
   * Runs every timer due up to `now() + ms`, in time order (timers due at the same time in the order they were
   * scheduled; timers they arm run too, if due by then), and leaves the clock at exactly `now() + ms`.
   *
   * A timer armed with a negative delay is due at once (the clock never moves back), as with Node's timers.
   *
   * A timer that throws stops the advance there, as a test clock's `tick` does: the error is rethrown, the clock stays
   * at that timer's due time, and every timer not yet run stays scheduled (RxJS's own `flush()` would cancel them all).
   *
   * @param ms how far to move, in ms; a finite number >= 0.
   * @throws {InvalidOptionError} (option `ms`) for a negative or non-finite `ms`, or one that is not a number.
   * @throws whatever a timer throws.
   */
  advance(ms: number): void {
    if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
      throw new InvalidOptionError('ms', ms, 'a finite number >= 0', {
        message: `VirtualClock.advance(ms): ms must be a finite number >= 0, got ${String(ms)}`,
      });
    }
    const target = this.now() + ms;
    for (let action = this.actions[0]; action !== undefined && action.delay <= target; action = this.actions[0]) {
      this.actions.shift();
      // A VirtualAction's delay is its due time. One armed with a negative delay runs now, as a real timer does: the
      // clock never moves back.
      this.frame = Math.max(this.frame, action.delay);
      const error: unknown = action.execute(action.state, action.delay);
      if (error) throw error;
    }
    this.frame = target;
  }

  /**
   * Moves to the absolute virtual time `time` (ms), running what is due (as {@link advance}); no-op when `time` is
   * not ahead.
   *
   * @throws {InvalidOptionError} (option `time`) for a `time` that is not a finite number.
   */
  advanceTo(time: number): void {
    if (typeof time !== 'number' || !Number.isFinite(time)) {
      throw new InvalidOptionError('time', time, 'a finite number', {
        message: `VirtualClock.advanceTo(time): time must be a finite number, got ${String(time)}`,
      });
    }
    if (time > this.now()) this.advance(time - this.now());
  }
}
