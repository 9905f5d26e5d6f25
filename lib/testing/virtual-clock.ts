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

/** Node's `setImmediate` as it was when this module was loaded: fake timers installed later do not replace it. */
const realSetImmediate = setImmediate;

/** A real turn of the event loop: every pending promise job (and I/O already due) runs before it resolves. */
function nextTurn(): Promise<void> {
  return new Promise((resolve) => realSetImmediate(resolve));
}

/**
 * An RxJS `VirtualTimeScheduler` whose time moves only when told. `now()` starts at 0 (ms). It replaces neither
 * `Date.now()` nor Node's timers: only code given it as its `scheduler` runs on virtual time. The constructor never
 * throws; {@link VirtualClock.advance} and {@link VirtualClock.advanceTo} throw InvalidOptionError for a bad input,
 * and {@link VirtualClock.advanceAsync} (for code that awaits between timers) rejects with it.
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
    const target = this.targetOf('advance', ms);
    while (this.runNextDue(target));
    this.frame = target;
  }

  /**
   * {@link advance} for code that awaits: moves to `now() + ms` the same way, but lets pending promise jobs run (a
   * turn of the event loop, `setImmediate`) before the first timer and after each one. So a checkout
   * awaited before the call (`await pool.checkOut()`, `withConnection`, which enter the pool a microtask later) is in
   * the pool before time moves; a timer that promise continuations arm meanwhile (a retry's backoff, the next
   * establishment) runs at its own virtual time within this same advance, when due by then; and the outcomes the
   * timers decided (a connection delivered, a `WaitQueueTimeoutError`) have reached the awaiting code when the
   * returned Promise resolves. `await clock.advanceAsync(0)` runs what is due now and lets everything pending settle.
   *
   * One advance at a time: calling {@link advance} or another `advanceAsync` before this one resolves moves the clock
   * under it (it never moves back). The turns it waits are real ones, taken with the `setImmediate` Node had when this
   * module was loaded (fake timers installed later do not stop it; installed before, it is theirs, and the advance
   * waits until their clock runs it); I/O already due runs in them too.
   *
   * @param ms how far to move, in ms; a finite number >= 0.
   * @returns a Promise that resolves once the clock is at `now() + ms` and the promise jobs pending then have run.
   * @throws (rejection) {@link InvalidOptionError} (option `ms`) for a negative or non-finite `ms`, or one that is
   *   not a number, before anything runs; whatever a timer throws, with the clock left at that timer's due time and
   *   the timers not yet run still scheduled (as {@link advance}).
   *
   * Source: extension (as `@sinonjs/fake-timers`' `tickAsync`).
   */
  async advanceAsync(ms: number): Promise<void> {
    const target = this.targetOf('advanceAsync', ms);
    await nextTurn();
    while (this.runNextDue(target)) await nextTurn();
    this.frame = Math.max(this.frame, target);
  }

  /**
   * The time `ms` from now, for {@link advance} and {@link advanceAsync}.
   *
   * @throws {InvalidOptionError} (option `ms`) for a negative or non-finite `ms`, or one that is not a number.
   */
  private targetOf(method: string, ms: number): number {
    if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
      throw new InvalidOptionError('ms', ms, 'a finite number >= 0', {
        message: `VirtualClock.${method}(ms): ms must be a finite number >= 0, got ${String(ms)}`,
      });
    }
    return this.now() + ms;
  }

  /**
   * Runs the first timer due by `target`, if any, at its due time; returns whether one ran.
   *
   * @throws whatever the timer throws.
   */
  private runNextDue(target: number): boolean {
    const action = this.actions[0];
    if (action === undefined || action.delay > target) return false;
    this.actions.shift();
    // A VirtualAction's delay is its due time. One armed with a negative delay runs now, as a real timer does: the
    // clock never moves back.
    this.frame = Math.max(this.frame, action.delay);
    const error: unknown = action.execute(action.state, action.delay);
    if (error) throw error;
    return true;
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
