/**
 * The default scheduler of pool timers (WaitQueue deadlines, Background Thread Runs): real timers that never keep
 * the process alive, and a monotonic clock in epoch milliseconds.
 *
 * Any RxJS `SchedulerLike` can replace it (e.g. a `VirtualTimeScheduler` in tests): the pool reads time only from
 * `scheduler.now()` and arms timers only through `scheduler.schedule()`.
 */
import { AsyncResource } from 'node:async_hooks';
import { Subscription, type SchedulerAction, type SchedulerLike } from 'rxjs';

/**
 * The clock of {@link timerScheduler}: `performance.timeOrigin + performance.now()`, epoch ms, read from the global
 * `performance` at each call. Test frameworks' fake timers (`@sinonjs/fake-timers`, as jest, vitest and sinon install
 * them) replace that global, and put the real one back when uninstalled: the clock then takes the new one's time, but
 * never goes back. One behind it (a fake clock from epoch 0 as sinon's, a real one after a test moved its fake clock
 * past real time) is continued from the last value instead, as is a clock that goes back, so a duration timed across
 * the change is never negative and a deadline set before it is not moved by the process's uptime. A reading that is
 * not a finite number is skipped (the last value is returned; NaN before any reading was).
 */
const clock = {
  /** The `performance.now` function read. */
  source: performance.now,
  /** ms added to what it returns: its `performance.timeOrigin`, and what kept the clock from going back. */
  offset: performance.timeOrigin,
  /** The last reading of that clock, with `offset`. */
  base: -Infinity,
  /** The last value returned (at least `base`; see {@link reached}). */
  last: -Infinity,
};

function monotonicNow(): number {
  const perf = performance;
  const raw = perf.now();
  // A reading that is not a finite number (a stub's NaN, Infinity or string) is skipped: kept, as the clock never
  // goes back, an Infinity would stay for the rest of the process.
  if (!Number.isFinite(raw)) return clock.last > -Infinity ? clock.last : NaN;
  if (perf.now !== clock.source) {
    // Another clock: its own time, unless that is behind.
    clock.source = perf.now;
    clock.offset = Number.isFinite(perf.timeOrigin) ? perf.timeOrigin : 0;
    clock.base = clock.last;
  }
  let time = clock.offset + raw;
  if (time < clock.base) {
    clock.offset += clock.base - time;
    time = clock.base;
  }
  clock.base = time;
  return (clock.last = time > clock.last ? time : clock.last);
}

/**
 * How far ahead of the clock, in ms, a fake timers' timer may run and only hold the clock at its due time rather than
 * move it there (see {@link reached}).
 */
const TIMER_EARLY_MS = 1;

/**
 * A timer armed for `due` (a {@link monotonicNow} time) ran: from now on the clock reads at least `due`. Fake timers
 * that leave `performance` real (vitest before v4, sinon with a `toFake` list of timers) run a timer when the test
 * moves their clock, not when `performance.now()` has moved by its delay: work that compares a deadline with `now()`
 * (a WaitQueue timeout, an idle time) would see it not passed, and re-arm for ever. Such a clock, behind by more than
 * {@link TIMER_EARLY_MS}, is moved forward to `due` and goes on from there (held at `due` until it caught up, it would
 * stand still for as long as the test moved its fake clock, every duration 0, after the fakes are gone too). A timer
 * run early by Node (`nodeTimer`: armed with Node's own `setTimeout`) only holds the clock at `due` until it catches
 * up, however early it ran: about a millisecond at most where libuv's loop time follows `CLOCK_MONOTONIC`, more where
 * it follows `CLOCK_MONOTONIC_COARSE` (kernels with a 1 ms tick) and a tick is taken late; moved forward at such
 * timers, the clock would gain on real time for good.
 */
function reached(due: number, nodeTimer: boolean): void {
  const current = monotonicNow();
  if (!(due > current)) return; // passed, or not a number
  if (!nodeTimer && due - current > TIMER_EARLY_MS) {
    clock.offset += due - current;
    clock.base += due - current;
  }
  clock.last = due;
}

/**
 * The async context every timer is armed in: the one this module was loaded in (no request's), never the context of
 * the call that armed it. A pool re-arms its timers while it processes a checkout; a timer armed in that checkout's
 * context would run later work (a Background Thread Run's establishments, an idle connection's close) inside it, so
 * a tracer binding an AsyncLocalStorage store to the checkOut channel would file the pool's own work under a request
 * that ended long before, and that store would stay reachable as long as the timer.
 */
const timerContext = new AsyncResource('RXCMAP_TIMER');

/**
 * The longest delay one Node timer holds, in ms (2^31 - 1, about 24.8 days): Node runs a timer with a longer delay
 * after 1 ms instead, so a longer delay is armed as a chain of timers.
 */
export const MAX_TIMER_DELAY_MS = 2 ** 31 - 1;

/**
 * Whether a `setTimeout` handle is one of Node's own timers (a `Timeout`), not a fake timers' one
 * (`@sinonjs/fake-timers` and jest's legacy fakes return plain objects): its run follows the loop time, which runs
 * ahead of the clock by a millisecond or so at most.
 */
function isNodeTimer(handle: unknown): boolean {
  const proto = typeof handle === 'object' && handle !== null ? Object.getPrototypeOf(handle) : null;
  return proto !== null && proto !== Object.prototype && proto.constructor?.name === 'Timeout';
}

/** One scheduled work of {@link timerScheduler} (its timers unref'd) or {@link clientScheduler} (its timers ref'd). */
class TimerAction<T> extends Subscription implements SchedulerAction<T> {
  private handle: NodeJS.Timeout | undefined;
  /** When the work is due, on {@link monotonicNow}. */
  private due = 0;
  /** The work's turn, once its timer expired: the check phase that follows the poll phase, which reads the sockets. */
  private immediate: NodeJS.Immediate | undefined;
  /**
   * The `clearTimeout` and `clearImmediate` of the moment `handle` and `immediate` were made: a handle goes back to
   * the functions that made it. Node's `clearImmediate` given a fake timers' handle (the fakes uninstalled since)
   * counts down its pending immediates, and below zero its event loop never waits again (a process at 100% CPU); a
   * fake's `clearTimeout` given Node's handle leaves that timer running.
   */
  private clearTimer: typeof clearTimeout = clearTimeout;
  private clearTurn: typeof clearImmediate = clearImmediate;

  constructor(
    private readonly work: (this: SchedulerAction<T>, state?: T) => void,
    /** Whether its timers keep the process alive. */
    private readonly keepsAlive: boolean,
  ) {
    super(() => this.cancel());
  }

  schedule(state?: T, delay = 0): Subscription {
    if (this.closed) return this;
    this.cancel();
    // Negative, or not a number (NaN): 0. A NaN due time would stop the clock of every pool once the work ran.
    const ms = delay > 0 ? delay : 0;
    this.due = monotonicNow() + ms;
    this.arm(state, ms);
    return this;
  }

  /** Arms a timer for `delay` ms: one Node timer, or a chain of them for a delay beyond what one can hold. */
  private arm(state: T | undefined, delay: number): void {
    const step = delay > MAX_TIMER_DELAY_MS ? MAX_TIMER_DELAY_MS : delay;
    // Each callback runs only while it is the one armed: a fake timers' clear, once they are uninstalled, clears
    // nothing, and the callback would run after a cancel or a re-arm.
    this.clearTimer = clearTimeout;
    const handle: NodeJS.Timeout = timerContext.runInAsyncScope(setTimeout, undefined, () => {
      if (this.handle !== handle) return;
      this.handle = undefined;
      if (step < delay) return this.arm(state, delay - step);
      // A fake timers' timer (the test moved their clock): at once, at the time the test moved to. There is no event
      // loop to wait for, and a 0 ms immediate made during their tick runs 1 ms later, so `tickAsync(100)` would not
      // time out a checkout of waitQueueTimeoutMS 100.
      if (!isNodeTimer(handle)) return this.run(state, false);
      // After the I/O pending now is read: a connection checked in, or established, from a reply that arrived while
      // the event loop was blocked serves its checkout before that checkout's deadline is seen as passed.
      this.clearTurn = clearImmediate;
      const immediate: NodeJS.Immediate = setImmediate(() => {
        if (this.immediate !== immediate) return;
        this.immediate = undefined;
        this.run(state, true);
      });
      this.immediate = immediate;
    }, step);
    if (!this.keepsAlive) handle.unref();
    this.handle = handle;
  }

  /** Runs the work, the clock at least at its due time (see {@link reached}). */
  private run(state: T | undefined, nodeTimer: boolean): void {
    reached(this.due, nodeTimer);
    this.work.call(this, state);
  }

  private cancel(): void {
    if (this.handle !== undefined) this.clearTimer(this.handle);
    if (this.immediate !== undefined) this.clearTurn(this.immediate);
    this.handle = undefined;
    this.immediate = undefined;
  }
}

/**
 * A scheduler reading {@link monotonicNow} and arming {@link TimerAction}s; `keepsAlive`: whether their timers hold the
 * process open. The two below differ only there.
 */
function monotonicScheduler(keepsAlive: boolean): SchedulerLike {
  return Object.freeze({
    now: monotonicNow,
    schedule<T>(work: (this: SchedulerAction<T>, state?: T) => void, delay = 0, state?: T): Subscription {
      return new TimerAction<T>(work, keepsAlive).schedule(state, delay);
    },
  });
}

/**
 * A `SchedulerLike` on Node timers, each `unref()`'d so a pool's timers never keep the process alive. `now()` is
 * monotonic (`performance.now()`), offset to milliseconds since the Unix epoch; it reads the global `performance` each
 * time, so it follows fake timers that replace it (jest, vitest, sinon: `@sinonjs/fake-timers`), taking their time when
 * they are installed and the real one when uninstalled, but never going back (a clock behind its last value, e.g.
 * sinon's from epoch 0, is continued from that value; a reading that is not a finite number is skipped, the last value
 * returned); when a timer's work runs, `now()` reads at least the time it was due (its delay after `schedule()`), also
 * under fake timers that leave `performance` real (the clock is then moved forward to it, and goes on from there; after
 * a timer that ran early, by 1 ms at most under fake timers, or by however much for Node's own timers, whose loop time
 * runs ahead of `performance.now()`, it is only held there until it catches up, never moved forward); `schedule(work,
 * delay)` takes its delay in ms (negative or NaN counts as 0; beyond 2147483647 ms (2^31 - 1), Node's limit for one
 * timer, it is armed as a chain of timers, so a long deadline is never cut to 1 ms), and runs the work once the delay
 * has passed and the I/O pending by then has been read (in the check phase of the loop turn whose timers phase saw it
 * expire, after its poll phase; under fake timers, at once, at the time the test moved their clock to): after the event
 * loop was blocked, a WaitQueue deadline is never seen as passed before the replies that arrived meanwhile were read.
 * Work runs in the async context rxcmap was loaded in, not in the one of the call that armed it (an AsyncLocalStorage
 * store current at `schedule()` is not current in `work`). Work unsubscribed never runs, nor runs at the time of an
 * earlier arming once re-armed; each timer is cleared with the `clearTimeout` or `clearImmediate` of the moment it was
 * armed (fake timers installed or uninstalled meanwhile). The default `scheduler` of pools and monitors.
 *
 * Source: extension (RxJS's `SchedulerLike`; the CMAP spec's timers: WaitQueue timeouts and Background Thread Runs).
 */
export const timerScheduler: SchedulerLike = monotonicScheduler(false);

/**
 * The default `scheduler` of a client's own waits (server selection, a command's timeoutMS, the seedlist discovery's
 * deadline, drain's `timeoutMS`): {@link timerScheduler}, except that its timers keep the process alive (a script
 * awaiting a command is not left to exit while it waits). Its clock does not step with the wall clock: a time elapsed
 * across an NTP correction or a resumed VM is the time that passed (RxJS's `asyncScheduler` reads `Date.now()`, on
 * which a step back of an hour would lengthen a command's timeoutMS by an hour, and a step forward end it at once).
 * `now()` in epoch ms; `schedule(work, delay, state)` as {@link timerScheduler}'s (delay in ms).
 *
 * Source: extension (RxJS's `SchedulerLike`; the client-side operations timeout spec's timeoutMS, measured on a
 * monotonic clock as the official Node.js driver measures it, with `performance.now()`).
 */
export const clientScheduler: SchedulerLike = monotonicScheduler(true);

/**
 * `performance.timeOrigin`, moved whenever the monotonic clock has drifted from the wall clock (see
 * {@link wallClockNow}).
 */
let wallOrigin = performance.timeOrigin;

/**
 * Now on the wall clock: ms since the Unix epoch, with a sub-microsecond fraction, so that stamps a few microseconds
 * apart keep their order. The monotonic clock (`performance.now()`) is read from an origin kept on `Date.now()`:
 * `performance.timeOrigin + performance.now()` alone falls behind `Date.now()` for good once the host was suspended
 * or its clock stepped, while every other stamp of the application (its own log lines, the OpenTelemetry SDK's spans)
 * is on `Date.now()`. The origin is moved only when the two drift apart by more than Date.now()'s rounding (about
 * 1 ms), so a move may put a stamp up to 2 ms before the one made just before it; a step moves the stamps by the step.
 *
 * Source: extension (the OpenTelemetry SDK's and every logging library's timestamps are on the wall clock).
 */
export function wallClockNow(): number {
  const now = performance.now();
  const wall = Date.now();
  const stamp = wallOrigin + now;
  // Date.now() is a whole ms: a stamp on the same clock lies within [wall, wall + 1); one more ms either side is
  // rounding, beyond that the clocks have drifted apart.
  if (stamp >= wall - 1 && stamp < wall + 2) return stamp;
  wallOrigin = wall + 0.5 - now;
  return wallOrigin + now;
}

/** The default schedulers' time the wall clock was last read at for {@link wallClockTime} (-Infinity: never). */
let wallClockReadAt = -Infinity;
/** The `performance.now` the default schedulers' clock read then: fake timers installed or removed since, read again. */
let wallClockReadSource: unknown;

/**
 * The wall clock time (as {@link wallClockNow}) of `time`, a reading of `scheduler`'s clock: for {@link timerScheduler}
 * and {@link clientScheduler}, whose monotonic clock does not follow the wall clock's steps, `time` plus how far the
 * wall clock's origin is ahead of theirs, both read from `performance.now()` (the wall clock checked again for a step
 * once `time` is 1 ms or more past the last check, or before it, or once fake timers replaced `performance` or put the
 * real one back: a busy pool's messages of one millisecond share one check, a few ns each rather than three clock
 * reads; a step a command message's {@link wallClockNow} saw shows at once); while the clock is held at a timer's due
 * time, the wall clock now less how long ago `time` was on it, so that a message made then is stamped in order with a
 * command's; for any other scheduler (a user's, a `VirtualClock`), `time` as it is: its clock is the one the
 * application chose to read. For the time of a log message made as its event is.
 *
 * Source: extension.
 */
export function wallClockTime(time: number, scheduler: SchedulerLike): number {
  if (scheduler !== timerScheduler && scheduler !== clientScheduler) return time;
  // Held at a timer's due time (see reached): the clock stands still while the wall clock goes on, so no offset maps
  // its times; the wall clock now, less how long ago `time` was on that clock (that age read first: a pause before the
  // wall clock is read then stamps the message late, never before one made earlier).
  if (clock.last > clock.base) {
    const age = scheduler.now() - time;
    return wallClockNow() - age;
  }
  if (!(time >= wallClockReadAt && time - wallClockReadAt < 1 && clock.source === wallClockReadSource)) {
    wallClockReadAt = time;
    scheduler.now(); // the origin of the `performance` read now (fake timers installed or removed meanwhile)
    wallClockNow(); // the wall clock's origin moved if the two have drifted apart
    wallClockReadSource = clock.source;
  }
  // Both clocks read `performance.now()` from an origin of their own: the difference of the origins, not of two
  // readings, which would count a pause between them (the process descheduled, a GC) as an offset; the origins of now,
  // so that a step a command message's wallClockNow() saw shows in the messages made after it.
  return time + (wallOrigin - clock.offset);
}
