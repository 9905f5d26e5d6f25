import { expect } from 'chai';
import { AsyncLocalStorage } from 'node:async_hooks';
import { defer, of } from 'rxjs';
import { ConnectionPoolCore, timerScheduler, WaitQueueTimeoutError } from '../lib';
import { ConnectionPool } from '../lib/client/connection-pool';
import { clientScheduler, MAX_TIMER_DELAY_MS, wallClockNow, wallClockTime } from '../lib/scheduler';
import { EmbeddedServer, MockConnection, MockConnectionFactory, VirtualClock } from '../lib/testing';
import { blockEventLoop } from './support/blocked-loop';
import { freshCopy } from './support/fresh-copy';
import { startWireProxy } from './support/wire-proxy';

/**
 * A stand-in for the globals a test framework's fake timers replace (`@sinonjs/fake-timers`, as installed by jest,
 * vitest and sinon): `setTimeout`, `clearTimeout`, `setImmediate`, `clearImmediate`, and `performance` when `perf` is
 * set. Timers run only on `tick(ms)`; `performance.now()` then moves with them. As there, a timer of 0 ms (an
 * immediate too) made while `tick` runs timers is due 1 ms later. `restore()` puts the real ones back. With `asNode`,
 * its timers stand in for Node's own instead: each a `Timeout`, as Node's `setTimeout` returns.
 */
class Timeout {}

function fakeGlobals(perf: boolean, asNode = false) {
  type Timer = { fn: () => void; due: number; cleared: boolean; immediate: boolean; unref: () => Timer; hasRef: () => boolean };
  const saved = {
    setTimeout: globalThis.setTimeout,
    clearTimeout: globalThis.clearTimeout,
    setImmediate: globalThis.setImmediate,
    clearImmediate: globalThis.clearImmediate,
    performance: Object.getOwnPropertyDescriptor(globalThis, 'performance')!,
  };
  let time = 0;
  let ticking = false;
  const timers: Timer[] = [];
  const add = (fn: () => void, delay: number, immediate = false): Timer => {
    const ms = delay > 0 ? delay : ticking ? 1 : 0;
    const timer: Timer = Object.assign(asNode ? new Timeout() : {}, { fn, due: time + ms, cleared: false, immediate, unref: () => timer, hasRef: () => false });
    timers.push(timer);
    return timer;
  };
  /** Handles given to its clearTimeout or clearImmediate that it did not make (Node's own would be corrupted). */
  let foreign = 0;
  const clear = (timer: Timer | undefined) => {
    if (timer !== undefined && timers.includes(timer)) timer.cleared = true; // a timer of its own only, as fake timers do
    else if (timer !== undefined) foreign++;
  };
  globalThis.setTimeout = ((fn: () => void, delay: number) => add(fn, delay)) as unknown as typeof setTimeout;
  globalThis.clearTimeout = clear as unknown as typeof clearTimeout;
  globalThis.setImmediate = ((fn: () => void) => add(fn, 0, true)) as unknown as typeof setImmediate;
  globalThis.clearImmediate = clear as unknown as typeof clearImmediate;
  if (perf) Object.defineProperty(globalThis, 'performance', { value: { now: () => time, timeOrigin: 0 }, configurable: true, writable: true });
  return {
    get foreign(): number {
      return foreign;
    },
    /**
     * Runs the timers due by now + ms, in order (the immediates too, unless `immediates` is false), and leaves the
     * time there.
     */
    tick(ms: number, immediates = true): void {
      const target = time + ms;
      for (;;) {
        const next = timers.filter((t) => !t.cleared && t.due <= target && (immediates || !t.immediate)).sort((a, b) => a.due - b.due)[0];
        if (next === undefined) break;
        next.cleared = true;
        time = next.due;
        ticking = true;
        try {
          next.fn();
        } finally {
          ticking = false;
        }
      }
      time = target;
    },
    restore(): void {
      globalThis.setTimeout = saved.setTimeout;
      globalThis.clearTimeout = saved.clearTimeout;
      globalThis.setImmediate = saved.setImmediate;
      globalThis.clearImmediate = saved.clearImmediate;
      Object.defineProperty(globalThis, 'performance', saved.performance);
    },
  };
}

/**
 * A copy of lib/scheduler of its own: its `timerScheduler` keeps a clock apart from the one pools read by default, so
 * a test may move that clock far ahead (a timer of days run at once by fake timers) without moving the process's.
 */
function isolatedScheduler(): typeof import('../lib/scheduler') {
  return freshCopy<typeof import('../lib/scheduler')>(require.resolve('../lib/scheduler'));
}

/** Replaces `performance` with one whose clock reads `now()` (its `timeOrigin` 0); returns what puts the real one back. */
function fakePerformance(now: () => unknown): () => void {
  const saved = Object.getOwnPropertyDescriptor(globalThis, 'performance')!;
  Object.defineProperty(globalThis, 'performance', { value: { now, timeOrigin: 0 }, configurable: true, writable: true });
  return () => Object.defineProperty(globalThis, 'performance', saved);
}

/**
 * Node's own timers with their runs taken in hand (each `setTimeout` and `setImmediate` callback queued in `pending`,
 * run by the test), and a `performance` whose clock reads `time()`; `restore()` puts the real ones back.
 */
function nodeTimersInHand(time: () => number): { pending: (() => void)[]; restore: () => void } {
  const pending: (() => void)[] = [];
  const saved = { setTimeout: globalThis.setTimeout, setImmediate: globalThis.setImmediate };
  const nodeTimer = (): NodeJS.Timeout => {
    const handle = saved.setTimeout(() => undefined, 60_000);
    clearTimeout(handle);
    return handle;
  };
  globalThis.setTimeout = ((fn: () => void) => (pending.push(fn), nodeTimer())) as unknown as typeof setTimeout;
  globalThis.setImmediate = ((fn: () => void) => (pending.push(fn), {})) as unknown as typeof setImmediate;
  const restorePerformance = fakePerformance(time);
  return {
    pending,
    restore: () => {
      globalThis.setTimeout = saved.setTimeout;
      globalThis.setImmediate = saved.setImmediate;
      restorePerformance();
    },
  };
}

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

  it('runs work outside the async context of the call that armed it', async function () {
    const store = new AsyncLocalStorage<string>();
    const seen: (string | undefined)[] = [];
    store.run('request 1', () => {
      timerScheduler.schedule(() => seen.push(store.getStore()), 1);
      // Re-armed from inside the context too, as a pool re-arms its timers while it processes a checkout.
      const action = timerScheduler.schedule(() => seen.push(`not this one: ${store.getStore()}`), 60_000);
      action.unsubscribe();
      timerScheduler.schedule(function (this: { schedule(state?: unknown, delay?: number): unknown }, n?: number) {
        seen.push(store.getStore());
        if (n === 0) this.schedule(1, 1);
      }, 1, 0);
    });
    for (let i = 0; i < 100 && seen.length < 3; i++) await new Promise((r) => setTimeout(r, 5));
    expect(seen).to.deep.equal([undefined, undefined, undefined]);
  });

  it("runs a pool's Background Thread Runs outside the context of the request that made the pool ready", async function () {
    // A pool made on a request's first use: its later work (here the establishments that replace idle connections)
    // must not be filed under that request, which ended long before, nor keep the request's store reachable.
    const store = new AsyncLocalStorage<string>();
    const establishedUnder: (string | undefined)[] = [];
    const pool = store.run('request 1', () => {
      const made = new ConnectionPoolCore({
        address: 'context.test:1',
        minPoolSize: 1,
        maxIdleTimeMS: 10,
        backgroundThreadIntervalMS: 5,
        connectionFactory: (d) =>
          defer(() => {
            establishedUnder.push(store.getStore());
            return of(new MockConnection(d));
          }),
      });
      made.ready();
      return made;
    });
    try {
      for (let i = 0; i < 200 && establishedUnder.length < 4; i++) await new Promise((r) => setTimeout(r, 5));
    } finally {
      pool.close();
    }
    // The first establishment may start within ready() itself; every replacement comes from a Background Thread Run.
    expect(establishedUnder.length).to.be.at.least(4);
    expect(establishedUnder.slice(1)).to.deep.equal(establishedUnder.slice(1).map(() => undefined));
  });

  it('keeps now() going forward, from where it was, when performance is replaced (fake timers installed or removed)', function () {
    // Fake timers installed after rxcmap was loaded give performance.now() from 0: a checkout or establishment timed
    // across the change had a negative duration, and a deadline set before it lay the process's uptime further away.
    // A clock of its own: the one every pool of the process reads would stay ahead by the fake clock's moves.
    const { timerScheduler } = isolatedScheduler();
    const before = timerScheduler.now();
    const clock = new VirtualClock(); // the mock's establishments, on a clock of their own
    const pool = new ConnectionPoolCore({ address: 'db:1', scheduler: timerScheduler, connectionFactory: new MockConnectionFactory({ scheduler: clock, establishDelayMS: 10 }).factory });
    const durations: number[] = [];
    pool.events$.subscribe((e) => {
      if (e.type === 'ConnectionReady' || e.type === 'ConnectionCheckedOut') durations.push(e.duration ?? NaN);
    });
    pool.ready();
    let connection: MockConnection | undefined;
    pool.checkOut().subscribe((c) => (connection = c)); // in the pool at once: its establishment starts now
    let installedAt: number;
    const fake = fakeGlobals(true);
    try {
      installedAt = timerScheduler.now();
      expect(installedAt, 'not back when installed').to.be.at.least(before);
      fake.tick(50);
      expect(timerScheduler.now() - installedAt, 'moves with the fake clock').to.equal(50);
      clock.advance(10); // established, and checked out, on the fake clock
      expect(connection).to.not.equal(undefined);
      pool.checkIn(connection!);
    } finally {
      fake.restore();
      pool.close();
    }
    const removed = timerScheduler.now();
    expect(removed - (installedAt + 50), 'goes on from there when removed').to.be.within(0, 200);
    expect(durations).to.have.length(2);
    for (const d of durations) expect(d).to.be.within(0, 1000);
  });

  it("runs a timer's work with now() at least its delay later, when the timers are faked and performance is not", function () {
    // vitest's fake timers before v4, and sinon's with toFake ['setTimeout', ...], fake the timers and leave
    // performance real: a WaitQueue deadline seen as not passed when its timer ran was re-armed, and a checkout never
    // timed out however far the test moved its clock.
    // A clock of its own: the one every pool of the process reads would stay ahead by the fake clock's moves.
    const { timerScheduler } = isolatedScheduler();
    const fake = fakeGlobals(false);
    const clock = new VirtualClock();
    const pool = new ConnectionPoolCore({
      address: 'db:1',
      scheduler: timerScheduler,
      maxPoolSize: 1,
      waitQueueTimeoutMS: 100,
      connectionFactory: new MockConnectionFactory({ scheduler: clock }).factory,
    });
    try {
      const start = timerScheduler.now();
      let elapsed = NaN;
      timerScheduler.schedule(() => (elapsed = timerScheduler.now() - start), 100);
      pool.ready();
      pool.checkOut().subscribe();
      clock.advance(0);
      let failure: unknown;
      pool.checkOut().subscribe({ error: (e: unknown) => (failure = e) });
      fake.tick(100);
      expect(elapsed).to.be.at.least(100);
      expect(failure).to.be.instanceOf(WaitQueueTimeoutError);
    } finally {
      fake.restore();
      pool.close();
    }
    // Moved forward, the clock goes on at once (held until real time caught up, it stood still for 100 ms: every
    // duration 0, an idle connection never perishing, in the tests after this one too).
    const a = timerScheduler.now();
    const until = performance.now() + 20;
    while (performance.now() < until);
    expect(timerScheduler.now() - a).to.be.within(15, 1000);
  });

  it('skips a reading of a replaced performance.now() that is not a finite number, and goes on once it is put back', function () {
    // A stub returning Infinity (or a value that is not a number) once left the clock of every pool at Infinity for the
    // rest of the process: it never goes back. Deadlines were then Infinity, each WaitQueue timeout fired at once.
    const before = timerScheduler.now();
    const readings: number[] = [];
    for (const value of [Infinity, -Infinity, NaN, '12', undefined]) {
      const restore = fakePerformance(() => value);
      try {
        readings.push(timerScheduler.now());
      } finally {
        restore();
      }
    }
    for (const r of readings) expect(r).to.be.a('number').and.be.within(before, before + 1000);
    const a = timerScheduler.now();
    const until = performance.now() + 20;
    while (performance.now() < until);
    expect(timerScheduler.now() - a).to.be.within(15, 1000);
  });

  it('never moves now() forward at a Node timer that ran early, only holds it at the due time, so it never gains on the clock', function () {
    // Node runs a timer once its millisecond loop time reaches the due time: up to about 1 ms before performance.now()
    // shows the delay passed, more where libuv's loop time follows CLOCK_MONOTONIC_COARSE (kernels with a 1 ms tick)
    // and a tick is taken late. Moved forward at each such timer, the clock gained on real time for good (tens of ms
    // over 100k timer runs), and WaitQueue timeouts came that much early.
    for (const early of [0.6, 1.5]) {
      // A clock of its own: the one every pool of the process reads would stay ahead by the fake clock's moves.
      const { timerScheduler } = isolatedScheduler();
      let time = 1000;
      const { pending, restore } = nodeTimersInHand(() => time);
      try {
        const start = timerScheduler.now();
        let seen = NaN;
        timerScheduler.schedule(() => (seen = timerScheduler.now() - start), 100);
        time += 100 - early; // the loop time reached the due time: the timer runs `early` ms before the clock shows it
        pending.shift()!(); // the timer
        pending.shift()!(); // its turn after the poll phase
        expect(seen, `${early} ms early: the delay passed, for the work`).to.equal(100);
        time += early / 2;
        expect(timerScheduler.now() - start, `${early} ms early: held until the clock catches up`).to.equal(100);
        time += early / 2 + 1;
        expect(timerScheduler.now() - start, `${early} ms early: then the clock itself, not moved forward`).to.be.closeTo(101, 0.01);
      } finally {
        restore();
      }
    }
  });

  it('never runs work unsubscribed after fake timers were installed, though their clearTimeout cannot clear its timer', function () {
    // Fake timers clear only their own timers (they warn and leave a real one running): a pool timer armed before
    // they were installed and cancelled after ran its work anyway, as a stale WaitQueue or Background Thread run.
    const ran: string[] = [];
    const real = fakeGlobals(false, true); // Node's timers, as armed
    try {
      const timer = timerScheduler.schedule(() => ran.push('timer'), 20);
      const immediate = timerScheduler.schedule(() => ran.push('immediate'), 10);
      real.tick(10, false); // the second one's timer expired: its work waits for its immediate
      const installed = fakeGlobals(false); // installed now: clears none of the timers above
      try {
        timer.unsubscribe();
        immediate.unsubscribe();
      } finally {
        installed.restore();
      }
      real.tick(20);
      expect(ran).to.deep.equal([]);
      // Each cleared with the clearTimeout or clearImmediate of the moment it was made: Node's clearImmediate given a
      // fake's handle (fake timers uninstalled meanwhile) counts down its pending immediates, and below zero the event
      // loop never waits again (a process at 100% CPU).
      expect([real.foreign, installed.foreign]).to.deep.equal([0, 0]);
    } finally {
      real.restore();
    }
  });

  it('takes a delay that is not a number as 0, and its work leaves now() a number that goes on', async function () {
    // A NaN delay (an RxJS delay or timer computed from a missing value) made the clock read NaN from then on, in every
    // pool and monitor of the process: each WaitQueue timeout fired at once, every duration NaN.
    const keep = setTimeout(() => undefined, 5000); // the scheduler's timers are unref'd
    try {
      const start = performance.now();
      await new Promise<void>((resolve) => timerScheduler.schedule(() => resolve(), NaN));
      // A NaN delay taken as anything but 0 would never fire (NaN compared to the clock) or fire at the largest delay:
      // 2 s leaves a loaded machine's pauses room.
      expect(performance.now() - start).to.be.below(2000);
      const a = timerScheduler.now();
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(a).to.be.a('number').and.not.NaN;
      expect(timerScheduler.now() - a).to.be.within(15, 2000);
    } finally {
      clearTimeout(keep);
    }
  });

  it('unrefs its timers so they never keep the process alive', function () {
    const sub = timerScheduler.schedule(() => undefined, 60_000);
    const handle = (sub as unknown as { handle: NodeJS.Timeout }).handle;
    expect(handle.hasRef()).to.equal(false);
    sub.unsubscribe();
  });

  it('clientScheduler: the same clock, and timers that keep the process alive (a script awaiting a command is not left to exit)', async function () {
    const before = timerScheduler.now();
    expect(clientScheduler.now()).to.be.at.least(before);
    const sub = clientScheduler.schedule(() => undefined, 60_000);
    const handle = (sub as unknown as { handle: NodeJS.Timeout }).handle;
    expect(handle.hasRef()).to.equal(true);
    sub.unsubscribe();
    const armed = clientScheduler.now();
    const ranAt = await new Promise<number>((resolve) => clientScheduler.schedule(() => resolve(clientScheduler.now()), 20));
    expect(ranAt - armed).to.be.at.least(20);
  });

  it('arms a delay beyond what one Node timer holds as a chain of timers, running the work once at the end', async function () {
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
    // Run at the end of the chain, the work moves the clock to its due time, 74 days ahead: on a copy of its own,
    // not the clock every pool of the process (and every spec file after this one) reads.
    const { timerScheduler } = isolatedScheduler();
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
      await new Promise((r) => setImmediate(r)); // the work runs after the I/O pending as the last timer expired
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
      await new Promise((r) => setImmediate(r));
      expect(ran).to.deep.equal([delay, MAX_TIMER_DELAY_MS]);
    } finally {
      globalThis.setTimeout = saved.set;
      globalThis.clearTimeout = saved.clear;
    }
  });

  it('after a block of the event loop, a WaitQueue deadline passed meanwhile lets the replies that arrived serve their checkouts first', async function () {
    // Node runs the timers that expired during a block before it reads the sockets. A checkout waits for the only
    // connection, whose holder's reply arrives while the process is blocked past waitQueueTimeoutMS: the check-in
    // that reply leads to must serve the checkout. Deterministic by ordering: the proxy writes the reply (into the
    // client's socket buffer, on loopback), then blocks the whole process.
    const server = await new EmbeddedServer().start();
    let block = false;
    const proxy = await startWireProxy(server.address, {
      reply: (reply) => {
        if (block) {
          block = false;
          process.nextTick(() => blockEventLoop(300));
        }
        return reply;
      },
    });
    const pool = new ConnectionPool({ address: proxy.address, maxPoolSize: 1, waitQueueTimeoutMS: 100 });
    try {
      pool.ready();
      const held = await pool.checkOut();
      const waiting = pool.checkOut().then(
        (c) => c,
        (e: unknown) => e,
      );
      await new Promise((r) => setImmediate(r));
      block = true;
      await held.command('admin', { ping: 1 });
      pool.checkIn(held);
      const outcome = await waiting;
      expect(outcome, String(outcome)).to.equal(held);
      pool.checkIn(held);
    } finally {
      pool.close();
      await proxy.stop();
      await server.stop();
    }
  });
});

describe('wallClockNow and wallClockTime', function () {
  const realNow = Date.now;
  afterEach(() => {
    Date.now = realNow;
  });

  it('wallClockNow: Date.now() to the microsecond, ordered while the clocks agree, and following a step of the wall clock either way', function () {
    const first = wallClockNow();
    expect(first).to.be.within(Date.now() - 1, Date.now() + 2);
    const stamps = Array.from({ length: 1000 }, () => wallClockNow());
    expect(stamps.every((t, i) => i === 0 || t >= stamps[i - 1]), 'ordered').to.equal(true);
    for (const step of [3_600_000, -3_600_000]) {
      Date.now = () => realNow() + step;
      const stepped = wallClockNow();
      expect(stepped - Date.now()).to.be.within(-1, 2);
    }
  });

  it('wallClockTime: a time of the default schedulers as the wall clock read it then; a time of any other scheduler as it is', function () {
    Date.now = () => realNow() + 3_600_000;
    for (const scheduler of [timerScheduler, clientScheduler]) {
      const before = scheduler.now() - 250;
      expect(wallClockTime(before, scheduler) - (Date.now() - 250), scheduler === timerScheduler ? 'timerScheduler' : 'clientScheduler').to.be.within(-2, 3);
    }
    const clock = new VirtualClock();
    clock.advance(1234);
    expect(wallClockTime(clock.now(), clock)).to.equal(clock.now());
  });

  it('wallClockTime: times less than 1 ms apart share one check of the wall clock for a step; a later or earlier time checks it again', function () {
    const at = timerScheduler.now() + 10; // after any reading made so far: read now
    const ahead = wallClockTime(at, timerScheduler) - at;
    Date.now = () => realNow() + 3_600_000;
    expect(wallClockTime(at + 0.5, timerScheduler) - (at + 0.5), 'within the millisecond: the last check').to.be.closeTo(ahead, 0.001);
    expect(wallClockTime(at + 1, timerScheduler) - (at + 1) - ahead, '1 ms later: checked again').to.be.closeTo(3_600_000, 3);
    Date.now = realNow;
    expect(wallClockTime(at + 0.9, timerScheduler) - (at + 0.9) - ahead, 'an earlier time: checked again').to.be.closeTo(0, 3);
  });
});

describe('wallClockTime while a Node timer that ran early holds the clock', function () {
  // A Node timer runs once its millisecond loop time reaches the due time, up to about 1 ms (more on a coarse clock)
  // before performance.now() shows it: the clock is then held at the due time until it catches up (see timerScheduler).
  // A checkout served meanwhile (from that timer's work, or from a reply read in the same turn) has its CMAP messages
  // stamped through wallClockTime and its command messages through wallClockNow: they must come in the order made.
  const realNow = Date.now;
  const EPOCH = 1_750_000_000_000;

  /** Runs `work` as the timerScheduler of a scheduler copy of its own runs a 100 ms timer `early` ms early. */
  function inEarlyTimer(early: number, before: (copy: typeof import('../lib/scheduler'), advance: (ms: number) => void) => void, work: (copy: typeof import('../lib/scheduler'), advance: (ms: number) => void) => void): void {
    const copy = isolatedScheduler();
    let time = 1000;
    const advance = (ms: number) => void (time += ms);
    const { pending, restore } = nodeTimersInHand(() => time);
    Date.now = () => Math.floor(EPOCH + time);
    try {
      copy.timerScheduler.schedule(() => work(copy, advance), 100);
      before(copy, advance);
      time += 100 - early - (time - 1000);
      pending.shift()!(); // the timer
      pending.shift()!(); // its turn after the poll phase
    } finally {
      restore();
      Date.now = realNow;
    }
  }

  it('while the clock is held, an event of 5 ms ago is stamped 5 ms before the wall clock now', function () {
    const stamps: Record<string, number> = {};
    inEarlyTimer(
      0.5,
      () => undefined,
      ({ timerScheduler, wallClockNow, wallClockTime }) => {
        stamps.older = wallClockTime(timerScheduler.now() - 5, timerScheduler);
        stamps.now = wallClockNow();
      },
    );
    expect(stamps.now - stamps.older).to.be.closeTo(5, 0.001);
  });

  it('wallClockNow keeps its origin while Date.now() is within its rounding of the stamp (1 ms after it to 2 ms before), and moves it to Date.now() + 0.5 beyond', function () {
    const { wallClockNow } = isolatedScheduler();
    let time = 1000;
    const wall = EPOCH;
    const restorePerformance = fakePerformance(() => time);
    Date.now = () => wall;
    try {
      expect(wallClockNow(), 'far from the wall clock: moved').to.equal(wall + 0.5);
      time += 1.4;
      expect(wallClockNow(), '1.9 ms ahead of Date.now(): kept').to.be.closeTo(wall + 1.9, 1e-9);
      time += 0.1;
      expect(wallClockNow(), '2 ms ahead: moved').to.equal(wall + 0.5);
      time -= 1.5;
      expect(wallClockNow(), '1 ms behind Date.now(): kept').to.be.closeTo(wall - 1, 1e-9);
      time -= 0.1;
      expect(wallClockNow(), '1.1 ms behind: moved').to.equal(wall + 0.5);
    } finally {
      restorePerformance();
      Date.now = realNow;
    }
  });

  it('a CMAP message made after a command message is not stamped before it, the clock held since the last reading', function () {
    const stamps: Record<string, number> = {};
    inEarlyTimer(
      1.5,
      () => undefined,
      ({ timerScheduler, wallClockNow, wallClockTime }, advance) => {
        stamps.checkedOut = wallClockTime(timerScheduler.now(), timerScheduler);
        advance(1);
        stamps.commandStarted = wallClockNow();
        stamps.checkedIn = wallClockTime(timerScheduler.now(), timerScheduler);
      },
    );
    expect(stamps.commandStarted - stamps.checkedOut, 'ConnectionCheckedOut, then CommandStarted').to.be.at.least(0);
    expect(stamps.checkedIn - stamps.commandStarted, 'CommandStarted, then ConnectionCheckedIn').to.be.at.least(0);
  });

  it('a CMAP message made while the clock is held is not stamped before a command message made before it, the process descheduled as it is stamped', function () {
    const stamps: Record<string, number> = {};
    inEarlyTimer(
      1.5,
      () => undefined,
      ({ timerScheduler, wallClockNow, wallClockTime }, advance) => {
        stamps.commandStarted = wallClockNow();
        const checkedInTime = timerScheduler.now();
        const stub = Date.now;
        Date.now = () => {
          const wall = stub();
          advance(5); // descheduled as it read the wall clock: the hold is over when it runs again
          Date.now = stub;
          return wall;
        };
        stamps.checkedIn = wallClockTime(checkedInTime, timerScheduler);
      },
    );
    expect(stamps.checkedIn - stamps.commandStarted, 'CommandStarted, then ConnectionCheckedIn').to.be.at.least(0);
  });

  it('a CMAP message made as the clock is held is not stamped after a command message that follows it, the last reading made before', function () {
    const stamps: Record<string, number> = {};
    inEarlyTimer(
      0.6,
      ({ timerScheduler, wallClockTime }, advance) => {
        advance(99.2); // 0.8 ms before the due time: the last reading of how far the wall clock is ahead
        stamps.checkOutStarted = wallClockTime(timerScheduler.now(), timerScheduler);
      },
      ({ timerScheduler, wallClockNow, wallClockTime }) => {
        stamps.checkedOut = wallClockTime(timerScheduler.now(), timerScheduler);
        stamps.commandStarted = wallClockNow();
      },
    );
    expect(stamps.checkedOut - stamps.checkOutStarted, 'ConnectionCheckOutStarted, then ConnectionCheckedOut').to.be.at.least(0);
    expect(stamps.commandStarted - stamps.checkedOut, 'ConnectionCheckedOut, then CommandStarted').to.be.at.least(0);
  });
});

describe('wallClockTime under fake timers', function () {
  const realNow = Date.now;
  afterEach(() => {
    Date.now = realNow;
  });

  it('a message made as soon as fake timers replaced performance and Date is stamped on their Date, as a command message is', function () {
    // jest's and sinon's fake timers (@sinonjs/fake-timers) replace both; the pools' clock goes on from where it was,
    // so the times of the first millisecond after the install are within the last reading made on the real clocks.
    const { timerScheduler, wallClockNow, wallClockTime } = isolatedScheduler();
    wallClockTime(timerScheduler.now(), timerScheduler); // a reading on the real clocks
    const fake = fakeGlobals(true);
    Date.now = () => Math.floor(1_600_000_000_000 + performance.now());
    let stamp = NaN;
    let command = NaN;
    let fakeNow = NaN;
    try {
      stamp = wallClockTime(timerScheduler.now(), timerScheduler);
      command = wallClockNow();
      fakeNow = Date.now();
    } finally {
      fake.restore();
    }
    expect(stamp - fakeNow, 'on the fake Date').to.be.within(-1, 2);
    expect(command - stamp, 'then the command message').to.be.at.least(0);
  });
});

describe('wallClockTime and a thread descheduled as it reads the clocks', function () {
  const realNow = Date.now;

  it('a CMAP message made after a command message is not stamped before it, the process descheduled between the two clocks read', function () {
    // How far the wall clock is ahead of the pools' clock was read from two clocks read one after the other: a
    // process descheduled between them (a loaded host, a GC pause) took the time it was away as an offset, and the
    // messages of the next millisecond were stamped that much early, before the command messages made before them.
    const { timerScheduler, wallClockNow, wallClockTime } = isolatedScheduler();
    const EPOCH = 1_750_000_000_000;
    let time = 1000;
    let away = 0;
    const restorePerformance = fakePerformance(() => time);
    Date.now = () => {
      const wall = Math.floor(EPOCH + time);
      time += away; // descheduled as it read the wall clock
      away = 0;
      return wall;
    };
    let commandStarted = NaN;
    let checkedIn = NaN;
    try {
      timerScheduler.now();
      commandStarted = wallClockNow();
      time += 1;
      const checkedInTime = timerScheduler.now();
      away = 5;
      checkedIn = wallClockTime(checkedInTime, timerScheduler);
    } finally {
      restorePerformance();
      Date.now = realNow;
    }
    expect(checkedIn - commandStarted, 'CommandStarted, then ConnectionCheckedIn').to.be.at.least(0);
  });
});

describe('wallClockTime after the wall clock stepped', function () {
  const realNow = Date.now;
  afterEach(() => {
    Date.now = realNow;
  });

  it('a CMAP message made after a command message that saw the step is stamped after it, within the millisecond of the last check too', function () {
    const { timerScheduler, wallClockNow, wallClockTime } = isolatedScheduler();
    const EPOCH = 1_750_000_000_000;
    let time = 1000;
    let step = 0;
    const restorePerformance = fakePerformance(() => time);
    Date.now = () => Math.floor(EPOCH + time + step);
    let commandStarted = NaN;
    let checkedIn = NaN;
    try {
      wallClockTime(timerScheduler.now(), timerScheduler); // the last check: the clocks agree
      step = 3_600_000;
      time += 0.25;
      commandStarted = wallClockNow(); // sees the step
      time += 0.25;
      checkedIn = wallClockTime(timerScheduler.now(), timerScheduler);
    } finally {
      restorePerformance();
      Date.now = realNow;
    }
    expect(checkedIn - commandStarted, 'CommandStarted, then ConnectionCheckedIn').to.be.closeTo(0.25, 0.001);
  });
});
