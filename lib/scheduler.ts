/**
 * The default scheduler of pool timers (WaitQueue deadlines, Background Thread Runs): real timers that never keep
 * the process alive, and a monotonic clock in epoch milliseconds.
 *
 * Any RxJS `SchedulerLike` can replace it (e.g. a `VirtualTimeScheduler` in tests): the pool reads time only from
 * `scheduler.now()` and arms timers only through `scheduler.schedule()`.
 */
import { AsyncResource } from 'node:async_hooks';
import { Subscription, type SchedulerAction, type SchedulerLike } from 'rxjs';

const origin = performance.timeOrigin;

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
 * How many more turns of the event loop an expired {@link IoTimeout} waits at most for what the socket already
 * received: 24, enough to read 48,000,000 bytes (the largest message, more than a socket's receive buffer holds) at
 * the 2 MiB Node reads of a socket in one turn. Bytes still arriving after that came after the deadline: a server that
 * sends a byte in every turn (a trickle, with a busy process turning every few ms) must not hold a command past its
 * timeout for as long as it keeps sending.
 *
 * Source: extension (the timeouts are deadlines: socketTimeoutMS, connectTimeoutMS).
 */
export const MAX_IO_TIMEOUT_READ_TURNS = 24;

/**
 * A timeout on I/O: `onTimeout` runs once `delayMS` ms (a number from 0 to {@link MAX_TIMER_DELAY_MS}) have passed
 * and the I/O pending by then has been read, never before. After the event loop was blocked (a long synchronous
 * computation, a GC pause) Node runs the timers that expired meanwhile before it reads the sockets: a timer alone
 * would report as timed out a reply that arrived during the block and sits unread in the socket. So when the timer
 * expires, `onTimeout` waits for the check phase of that same loop turn (`setImmediate`), which comes after the poll
 * phase that reads what arrived: a reply read there settles its request and clears this timeout first. Without a
 * block this adds no more than one turn of the loop. A long reply is read over several turns (Node reads at most about
 * 2 MiB of a socket in one): with `progress` (a count that grows as bytes of what is awaited are read, e.g. the bytes
 * a socket received; first read as the delay runs out, so it can also note that moment), `onTimeout` waits one more
 * turn each time the last one read more, and runs after the first turn that read nothing, or after
 * {@link MAX_IO_TIMEOUT_READ_TURNS} turns, so a reply that had arrived is read whole, while a server that sends nothing
 * more still times out at once and one that keeps sending bytes times out within those turns. {@link clear} cancels it
 * (idempotent); the Node timer keeps the process alive, as `setTimeout` does.
 *
 * Source: extension (Node's event loop phase order: timers, then poll, then check).
 */
export class IoTimeout {
  private timer: NodeJS.Timeout | undefined;
  private immediate: NodeJS.Immediate | undefined;
  /** The `progress` count when the last turn began. */
  private seen = 0;
  /** The turns waited since the delay ran out. */
  private turns = 0;

  constructor(
    private readonly onTimeout: () => void,
    delayMS: number,
    private readonly progress?: () => number,
  ) {
    this.timer = setTimeout(this.expired, delayMS);
  }

  /** Cancels the timeout: `onTimeout` will not run. */
  clear(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    if (this.immediate !== undefined) clearImmediate(this.immediate);
    this.timer = undefined;
    this.immediate = undefined;
  }

  private readonly expired = (): void => {
    this.timer = undefined;
    if (this.progress !== undefined) this.seen = this.progress();
    this.immediate = setImmediate(this.fire);
  };

  private readonly fire = (): void => {
    this.immediate = undefined;
    if (this.progress !== undefined) {
      const count = this.progress();
      if (count !== this.seen && ++this.turns < MAX_IO_TIMEOUT_READ_TURNS) {
        this.seen = count;
        this.immediate = setImmediate(this.fire);
        return;
      }
    }
    this.onTimeout();
  };
}

class UnrefTimerAction<T> extends Subscription implements SchedulerAction<T> {
  private handle: NodeJS.Timeout | undefined;
  /** The work's turn, once its timer expired: the check phase that follows the poll phase (see {@link IoTimeout}). */
  private immediate: NodeJS.Immediate | undefined;

  constructor(private readonly work: (this: SchedulerAction<T>, state?: T) => void) {
    super(() => this.cancel());
  }

  schedule(state?: T, delay = 0): Subscription {
    if (this.closed) return this;
    this.cancel();
    this.arm(state, Math.max(0, delay));
    return this;
  }

  /** Arms a timer for `delay` ms: one Node timer, or a chain of them for a delay beyond what one can hold. */
  private arm(state: T | undefined, delay: number): void {
    const step = delay > MAX_TIMER_DELAY_MS ? MAX_TIMER_DELAY_MS : delay;
    const handle = timerContext.runInAsyncScope(setTimeout, undefined, () => {
      this.handle = undefined;
      if (step < delay) return this.arm(state, delay - step);
      // After the I/O pending now is read: a connection checked in, or established, from a reply that arrived while
      // the event loop was blocked serves its checkout before that checkout's deadline is seen as passed.
      this.immediate = setImmediate(() => {
        this.immediate = undefined;
        this.work.call(this, state);
      });
    }, step);
    handle.unref();
    this.handle = handle;
  }

  private cancel(): void {
    if (this.handle !== undefined) clearTimeout(this.handle);
    if (this.immediate !== undefined) clearImmediate(this.immediate);
    this.handle = undefined;
    this.immediate = undefined;
  }
}

/**
 * A `SchedulerLike` on Node timers, each `unref()`'d so a pool's timers never keep the process alive.
 * `now()` is monotonic (`performance.now()`), offset to milliseconds since the Unix epoch; `schedule(work, delay)`
 * takes its delay in ms (negative counts as 0; beyond 2147483647 ms (2^31 - 1), Node's limit for one timer, it is
 * armed as a chain of timers, so a long deadline is never cut to 1 ms), and runs the work once the delay has passed
 * and the I/O pending by then has been read (in the check phase of the loop turn whose timers phase saw it expire, as
 * {@link IoTimeout} does): after the event loop was blocked, a WaitQueue deadline is never seen as passed before the
 * replies that arrived meanwhile were read. Work runs in the async context rxcmap was loaded in, not in the one of
 * the call that armed it (an AsyncLocalStorage store current at `schedule()` is not current in `work`). The default
 * `scheduler` of pools and monitors.
 *
 * Source: extension (RxJS's `SchedulerLike`; the CMAP spec's timers: WaitQueue timeouts and Background Thread Runs).
 */
export const timerScheduler: SchedulerLike = Object.freeze({
  now: (): number => origin + performance.now(),
  schedule<T>(work: (this: SchedulerAction<T>, state?: T) => void, delay = 0, state?: T): Subscription {
    return new UnrefTimerAction<T>(work).schedule(state, delay);
  },
});
