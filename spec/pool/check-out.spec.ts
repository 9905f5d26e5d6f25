/**
 * The checkout front ends (CheckOutRequest): what they leave on a caller's AbortSignal, a connection delivered to
 * a Promise checkout its caller had already abandoned, and one served into an Observable chain already torn down.
 */
import { expect } from 'chai';
import { tracingChannel } from 'node:diagnostics_channel';
import { getEventListeners } from 'node:events';
import { config, forkJoin, groupBy, map, merge, mergeMap, NEVER, of, Subject, Subscriber, timeout, timer, type SchedulerLike, type Subscription } from 'rxjs';
import { CheckOutCancelledError, ConnectionPoolCore, PoolClosedError, type ConnectionPoolEvent } from '../../lib';
import { MockConnection, MockConnectionFactory, VirtualClock } from '../../lib/testing';
import { microtasks } from '../support/microtasks';
import { brokenAtRead } from '../support/signals';

/** What `outcome` settles with, or 'unsettled' when it does not within 50 ms. */
function within50ms(outcome: Promise<unknown>): Promise<unknown> {
  return Promise.race([outcome, new Promise((resolve) => setTimeout(resolve, 50, 'unsettled'))]);
}

/**
 * Aborts a checkout waiting on `pool` (full) in each form, the Promise one then the Observable one, and gives what
 * each ended with: its error, or 'unsettled' when none came within 50 ms.
 */
async function abortWaitingCheckouts(pool: ConnectionPoolCore<MockConnection>): Promise<unknown[]> {
  const outcomes: unknown[] = [];
  for (const form of ['promise', 'observable'] as const) {
    const controller = new AbortController();
    const request = pool.checkOut({ signal: controller.signal });
    const outcome = form === 'promise' ? request.then(undefined, (e: unknown) => e) : new Promise((resolve) => request.subscribe({ error: resolve }));
    controller.abort();
    outcomes.push(await within50ms(outcome));
  }
  return outcomes;
}

/**
 * A checkout that failed with `refused` while `held` was the pool's one connection: it left the WaitQueue, and once
 * `held` is checked in, nothing is in use and the connection is available (no dead checkout took it).
 */
async function expectRefusedThenFreed(pool: ConnectionPoolCore<MockConnection>, held: MockConnection, form: string, outcome: unknown, refused: unknown): Promise<void> {
  expect(outcome, form).to.equal(refused);
  expect(pool.snapshot(), form).to.include({ waitQueueLength: 0, inUseConnectionCount: 1 });
  pool.checkIn(held);
  await microtasks();
  expect(pool.snapshot(), `${form}: once the held connection is back`).to.include({ inUseConnectionCount: 0, availableConnectionCount: 1 });
}

describe('CheckOutRequest', function () {
  it('leaves no listener on a signal shared by many checkouts once each has ended (Observable and Promise forms)', async function () {
    const clock = new VirtualClock();
    const mock = new MockConnectionFactory({ scheduler: clock, establishDelayMS: 10 });
    const pool = new ConnectionPoolCore<MockConnection>({ address: 'db:27017', maxPoolSize: 1, scheduler: clock, connectionFactory: mock.factory });
    pool.ready();
    const shared = new AbortController(); // e.g. one per request handler, never aborted
    const listeners = (): number => getEventListeners(shared.signal, 'abort').length;
    for (let i = 0; i < 3; i++) {
      let held: MockConnection | undefined;
      pool.checkOut({ signal: shared.signal }).subscribe((c) => (held = c));
      clock.advance(10);
      expect(held, 'delivered').to.not.equal(undefined);
      expect(listeners(), 'the Observable form, once delivered').to.equal(0);
      const request = pool.checkOut({ signal: shared.signal }).then((c) => c); // waits for the one held
      expect(listeners(), 'while the Promise form waits').to.equal(1);
      pool.checkIn(held!);
      const next = await request;
      expect(listeners(), 'the Promise form, once delivered').to.equal(0);
      pool.checkIn(next);
    }
    expect(listeners()).to.equal(0);
    const waiting = pool.checkOut({ signal: shared.signal }).subscribe();
    const waitingToo = pool.checkOut({ signal: shared.signal }).subscribe();
    waiting.unsubscribe();
    waitingToo.unsubscribe();
    expect(listeners(), 'after unsubscribing').to.equal(0);
  });

  it('a signal shared by 40 waiting checkouts carries one listener: no MaxListenersExceededWarning, and its abort cancels them all, oldest first', async function () {
    // One request's signal over a Promise.all of its queries, on a full pool: before, each waiting checkout added a
    // listener of its own, and the 11th made Node warn of a possible EventTarget memory leak.
    const warnings: Error[] = [];
    const onWarning = (w: Error): void => void warnings.push(w);
    process.on('warning', onWarning);
    const pool = poolOfOneEstablishedAtOnce();
    try {
      pool.ready();
      const held = await pool.checkOut();
      const shared = new AbortController();
      const order: number[] = [];
      const outcomes = Array.from({ length: 40 }, (_, i) => {
        const request = pool.checkOut({ signal: shared.signal });
        const settled = (e: unknown): unknown => (order.push(i), e);
        return i % 2 === 0 ? request.then(settled, settled) : new Promise((resolve) => request.subscribe({ next: resolve, error: (e) => resolve(settled(e)) }));
      });
      expect(getEventListeners(shared.signal, 'abort'), 'while they wait').to.have.length(1);
      await new Promise((resolve) => setImmediate(resolve)); // Node emits the warning on a later tick
      expect(warnings.map((w) => w.name)).to.deep.equal([]);
      shared.abort();
      const settled = await Promise.all(outcomes);
      expect(settled.every((e) => e instanceof CheckOutCancelledError)).to.equal(true);
      // The Observable form settles as the abort runs (the Promise form a microtask later): in WaitQueue order.
      expect(order.slice(0, 20)).to.deep.equal([...Array(20).keys()].map((i) => 2 * i + 1));
      expect(getEventListeners(shared.signal, 'abort'), 'once aborted').to.have.length(0);
      expect(pool.snapshot()).to.include({ waitQueueLength: 0, inUseConnectionCount: 1 });
      pool.checkIn(held);
    } finally {
      process.off('warning', onWarning);
      pool.close();
    }
  });

  it('a checkout served as it enters never listens to its signal; one whose signal code run by the pool aborted as it entered is cancelled at once', function () {
    const pool = poolOfOneEstablishedAtOnce();
    try {
      pool.ready();
      const controller = new AbortController();
      const added: string[] = [];
      const addEventListener = controller.signal.addEventListener.bind(controller.signal);
      controller.signal.addEventListener = (type: string, ...rest: unknown[]) => {
        added.push(type);
        return addEventListener(type, ...(rest as [() => void]));
      };
      let held: MockConnection | undefined;
      pool.checkOut({ signal: controller.signal }).subscribe((c) => (held = c));
      expect(held, 'served as it entered').to.be.instanceOf(MockConnection);
      expect(added, 'no listener added').to.deep.equal([]);
      // The pool is full: the next checkout would wait, but an events$ subscriber aborts its signal as it enters.
      const subscription = pool.events$.subscribe((e) => {
        if (e.type === 'ConnectionCheckOutStarted') controller.abort();
      });
      const errors: unknown[] = [];
      pool.checkOut({ signal: controller.signal }).subscribe({ error: (e) => errors.push(e) });
      expect(errors, 'cancelled before subscribe() returned').to.have.length(1);
      expect(errors[0]).to.be.instanceOf(CheckOutCancelledError);
      expect(added).to.deep.equal([]);
      expect(pool.snapshot()).to.include({ waitQueueLength: 0, inUseConnectionCount: 1 });
      subscription.unsubscribe();
      pool.checkIn(held!);
    } finally {
      pool.close();
    }
  });

  it("a caller's own abort listener that calls stopImmediatePropagation() does not keep the checkout waiting (Promise and Observable forms, warmUp)", async function () {
    // Before, the pool's listener never ran: the checkout waited on until waitQueueTimeoutMS (forever by default).
    const pool = new ConnectionPoolCore<MockConnection>({ address: 'db:27017', maxPoolSize: 1, minPoolSize: 1, scheduler: new VirtualClock(), connectionFactory: () => NEVER });
    try {
      pool.ready(); // its one connection is being established, forever
      const controller = new AbortController();
      controller.signal.addEventListener('abort', (event) => event.stopImmediatePropagation());
      const promiseForm = pool.checkOut({ signal: controller.signal }).then(undefined, (e: unknown) => e);
      const errors: unknown[] = [];
      pool.checkOut({ signal: controller.signal }).subscribe({ error: (e) => errors.push(e) });
      const warm = pool.warmUp({ signal: controller.signal }).then(undefined, (e: unknown) => e);
      controller.abort(new Error('request ended'));
      expect(await within50ms(promiseForm)).to.be.instanceOf(CheckOutCancelledError);
      expect(errors).to.have.length(1);
      expect(errors[0]).to.be.instanceOf(CheckOutCancelledError);
      expect(await within50ms(warm)).to.have.property('message', 'request ended');
      expect(pool.snapshot()).to.include({ waitQueueLength: 0 });
    } finally {
      pool.close();
    }
  });

  it('an abort cancels checkouts sharing its signal in WaitQueue order, though one was made by an events$ subscriber as the other entered', function () {
    // The checkout made while the first entered is behind it in the WaitQueue, but listened to the signal first (the
    // first listens once its entry returns): before, the abort cancelled it first.
    const pool = poolOfOneEstablishedAtOnce();
    try {
      pool.ready();
      let held: MockConnection | undefined;
      pool.checkOut().subscribe((c) => (held = c));
      const controller = new AbortController();
      const cancelled: string[] = [];
      const subscription = pool.events$.subscribe((e) => {
        if (e.type !== 'ConnectionCheckOutStarted' || cancelled.length > 0) return;
        cancelled.push('(made)');
        pool.checkOut({ signal: controller.signal }).subscribe({ error: () => cancelled.push('made as the first entered') });
      });
      pool.checkOut({ signal: controller.signal }).subscribe({ error: () => cancelled.push('first') });
      subscription.unsubscribe();
      expect(pool.snapshot()).to.include({ waitQueueLength: 2 });
      controller.abort();
      expect(cancelled).to.deep.equal(['(made)', 'first', 'made as the first entered']);
      expect(pool.snapshot()).to.include({ waitQueueLength: 0 });
      pool.checkIn(held!);
    } finally {
      pool.close();
    }
  });

  it('a signal whose addEventListener throws fails a waiting checkout with that error, and the pool does not hand it the next connection (Promise and Observable forms)', async function () {
    // The listener is added once the checkout has entered the pool: before, the throw reached the caller (the Promise
    // form's then threw) while the checkout stayed in the WaitQueue, and the connection checked in next went to it and
    // was never checked in again (inUseConnectionCount stayed 1 with nothing checked out).
    const pool = poolOfOneEstablishedAtOnce();
    try {
      pool.ready();
      const refused = new TypeError('listeners refused');
      const signal = new AbortController().signal;
      signal.addEventListener = () => {
        throw refused;
      };
      for (const form of ['promise', 'observable'] as const) {
        const held = await pool.checkOut();
        const request = pool.checkOut({ signal });
        let outcome: unknown = 'unsettled';
        if (form === 'promise') {
          outcome = await Promise.resolve(request).then(undefined, (e: unknown) => e);
        } else {
          request.subscribe({ next: (c) => (outcome = c), error: (e: unknown) => (outcome = e) });
        }
        await expectRefusedThenFreed(pool, held, form, outcome, refused);
      }
    } finally {
      pool.close();
    }
  });

  it('a signal whose aborted getter breaks after the option check fails the checkout with an Error, and the pool does not hand it the next connection (Promise and Observable forms)', async function () {
    // Read 1 is the option check; read 2 the look before the checkout enters the pool; read 3 the look as it waits.
    // Before: read 3 threw out of the entry with the checkout left in the WaitQueue (the next connection checked in
    // went to it and stayed in use for good), and a value that is not an Error reached the caller bare.
    const pool = poolOfOneEstablishedAtOnce();
    try {
      pool.ready();
      for (const at of [2, 3]) {
        for (const thrown of [new TypeError('torn down'), null, Symbol('torn down')]) {
          for (const form of ['promise', 'observable'] as const) {
            const what = `read ${at}, ${String(thrown)}, ${form}`;
            const signal = brokenAtRead(at, thrown);
            const held = await pool.checkOut();
            const request = pool.checkOut({ signal });
            let outcome: unknown = 'unsettled';
            if (form === 'promise') {
              outcome = await within50ms(Promise.resolve(request).then(undefined, (e: unknown) => e));
            } else {
              request.subscribe({ next: (c) => (outcome = c), error: (e: unknown) => (outcome = e) });
            }
            expect(outcome, what).to.be.instanceOf(Error);
            if (!(thrown instanceof Error)) {
              expect((outcome as Error).message, what).to.match(/^the checkout's signal refused a listener: /);
              expect((outcome as Error).cause, what).to.equal(thrown);
            }
            expect(pool.snapshot(), what).to.include({ waitQueueLength: 0, inUseConnectionCount: 1 });
            pool.checkIn(held);
            await microtasks();
            expect(pool.snapshot(), `${what}, once the held connection is checked in`).to.include({ waitQueueLength: 0, inUseConnectionCount: 0 });
          }
        }
      }
    } finally {
      pool.close();
    }
  });

  it('a signal whose removeEventListener throws: a waiting checkout is still served, and the throw reaches nobody (Promise and Observable forms)', async function () {
    // Before, the Promise form's settlement threw while it stopped listening: the caller never received the connection
    // it was served (inUseConnectionCount stayed 1 with nothing checked out) and the pool reported the throw as
    // unhandled; the Observable form threw an UnsubscriptionError from its teardown.
    const pool = poolOfOneEstablishedAtOnce();
    const reported: unknown[] = [];
    const onUnhandledError = config.onUnhandledError;
    config.onUnhandledError = (e) => reported.push(e);
    try {
      pool.ready();
      const signal = new AbortController().signal;
      signal.removeEventListener = () => {
        throw new TypeError('listeners kept');
      };
      for (const form of ['promise', 'observable'] as const) {
        const held = await pool.checkOut();
        const request = pool.checkOut({ signal });
        let outcome: unknown = 'unsettled';
        if (form === 'promise') void request.then((c) => (outcome = c), (e: unknown) => (outcome = e));
        else request.subscribe({ next: (c) => (outcome = c), error: (e: unknown) => (outcome = e) });
        pool.checkIn(held);
        await microtasks();
        expect(outcome, form).to.equal(held);
        pool.checkIn(outcome as MockConnection);
        expect(pool.snapshot(), form).to.include({ inUseConnectionCount: 0, availableConnectionCount: 1 });
      }
      expect(reported).to.deep.equal([]);
    } finally {
      config.onUnhandledError = onUnhandledError;
      pool.close();
    }
  });

  it('a signal whose reason cannot be read still cancels a waiting checkout, with what reading it threw as the cause (Promise and Observable forms)', async function () {
    // Before, the abort listener threw (reported from a timer: an uncaught exception) and the checkout waited on.
    const pool = poolOfOneEstablishedAtOnce();
    try {
      pool.ready();
      const held = await pool.checkOut();
      for (const form of ['promise', 'observable'] as const) {
        const controller = new AbortController();
        const unreadable = new TypeError('no reason');
        Object.defineProperty(controller.signal, 'reason', {
          get() {
            throw unreadable;
          },
        });
        const request = pool.checkOut({ signal: controller.signal });
        let outcome: unknown = 'unsettled';
        if (form === 'promise') void request.then((c) => (outcome = c), (e: unknown) => (outcome = e));
        else request.subscribe({ next: (c) => (outcome = c), error: (e: unknown) => (outcome = e) });
        controller.abort();
        await microtasks();
        expect(outcome, form).to.be.instanceOf(CheckOutCancelledError).with.property('cause', unreadable);
        expect(pool.snapshot(), form).to.include({ waitQueueLength: 0 });
      }
      pool.checkIn(held);
    } finally {
      pool.close();
    }
  });

  it('a scheduler whose schedule throws fails a waiting checkout with a timeoutMS with that error, and the pool does not hand it the next connection', async function () {
    // Before, the Promise form's first then threw (withConnection threw synchronously) while the checkout stayed in the
    // WaitQueue: the connection checked in next went to it and was never checked in again.
    const clock = new VirtualClock();
    const refused = new Error('no timers');
    // It refuses the checkouts' 100 ms deadlines only; the pool's own timers are armed as usual.
    const scheduler: SchedulerLike = {
      now: () => clock.now(),
      schedule: (work: (state?: unknown) => void, delay?: number, state?: unknown) => {
        if (delay === 100) throw refused;
        return clock.schedule(work, delay, state);
      },
    } as SchedulerLike;
    const pool = new ConnectionPoolCore<MockConnection>({ address: 'db:27017', maxPoolSize: 1, scheduler, connectionFactory: (d) => of(new MockConnection(d)) });
    try {
      pool.ready();
      for (const form of ['withConnection', 'promise', 'observable'] as const) {
        const held = await pool.checkOut();
        let outcome: unknown = 'unsettled';
        if (form === 'withConnection') void pool.withConnection(() => 'ran', { timeoutMS: 100 }).then((c) => (outcome = c), (e: unknown) => (outcome = e));
        else if (form === 'promise') void pool.checkOut({ timeoutMS: 100 }).then((c) => (outcome = c), (e: unknown) => (outcome = e));
        else pool.checkOut({ timeoutMS: 100 }).subscribe({ next: (c) => (outcome = c), error: (e: unknown) => (outcome = e) });
        await microtasks();
        await expectRefusedThenFreed(pool, held, form, outcome, refused);
      }
    } finally {
      pool.close();
    }
  });

  it('a checkout its scheduler or signal refused: ConnectionCheckOutFailed gives the reason its trace gives, not cancelled (nobody gave up)', async function () {
    // Before, the event said `cancelled` (the caller gave up) while the trace said `connectionError` for the same
    // failure, with the same error.
    const clock = new VirtualClock();
    const scheduler: SchedulerLike = {
      now: () => clock.now(),
      schedule: (work: (state?: unknown) => void, delay?: number, state?: unknown) => {
        if (delay === 100) throw new Error('no timers');
        if (delay === 200) throw 'timers off'; // not an Error: wrapped in one, still no cancellation
        return clock.schedule(work, delay, state);
      },
    } as SchedulerLike;
    const pool = new ConnectionPoolCore<MockConnection>({ address: 'db:27017', maxPoolSize: 1, scheduler, connectionFactory: (d) => of(new MockConnection(d)) });
    const reasons: string[] = [];
    pool.events$.subscribe((e) => {
      if (e.type === 'ConnectionCheckOutFailed') reasons.push(`event ${e.reason}`);
    });
    const traced = { start() {}, end() {}, asyncStart() {}, error() {}, asyncEnd: (c: { outcome?: string }) => void reasons.push(`trace ${c.outcome}`) };
    const channel = tracingChannel('rxcmap:pool:checkOut');
    channel.subscribe(traced as never);
    try {
      pool.ready();
      const held = await pool.checkOut();
      reasons.length = 0;
      const signal = new AbortController().signal;
      signal.addEventListener = () => {
        throw new TypeError('listeners refused');
      };
      await pool.checkOut({ timeoutMS: 100 }).then(undefined, () => undefined);
      await pool.checkOut({ signal }).then(undefined, () => undefined);
      const wrapped = await pool.checkOut({ timeoutMS: 200 }).then(undefined, (e: unknown) => e);
      expect(wrapped).to.be.instanceOf(Error).with.property('message', "the pool's scheduler refused the deadline: timers off");
      const stringly = new AbortController().signal;
      stringly.addEventListener = () => {
        throw 'listeners off'; // not an Error: wrapped in one, still no cancellation
      };
      const refused = await pool.checkOut({ signal: stringly }).then(undefined, (e: unknown) => e);
      expect(refused).to.be.instanceOf(Error).and.not.instanceOf(CheckOutCancelledError);
      expect(refused).to.have.property('message', "the checkout's signal refused a listener: listeners off");
      expect(refused).to.have.property('cause', 'listeners off');
      expect(reasons).to.deep.equal(Array(4).fill(['event connectionError', 'trace connectionError']).flat());
      pool.checkIn(held);
    } finally {
      channel.unsubscribe(traced as never);
      pool.close();
    }
  });

  it('an abort from inside the pool\'s processing, after the pool committed a delivery, leaves the caller with the connection, as the events say', async function () {
    // The establishment completes synchronously, so its result is queued ahead of the cancellation the abort
    // enqueues: the pool delivers first, and the caller receives what the events say (not a cancellation).
    const pool = new ConnectionPoolCore<MockConnection>({ address: 'db:27017', scheduler: new VirtualClock(), connectionFactory: (d) => of(new MockConnection(d)) });
    const controller = new AbortController();
    const events: ConnectionPoolEvent[] = [];
    pool.events$.subscribe((e) => {
      events.push(e);
      if (e.type === 'ConnectionCreated') controller.abort();
    });
    pool.ready();
    const outcome = await pool.checkOut({ signal: controller.signal }).then(
      (c) => c,
      (e: unknown) => e,
    );
    await microtasks();
    expect(outcome).to.be.instanceOf(MockConnection);
    expect(events.map((e) => e.type).slice(2)).to.deep.equal(['ConnectionCheckOutStarted', 'ConnectionCreated', 'ConnectionReady', 'ConnectionCheckedOut']);
    expect(pool.snapshot()).to.include({ availableConnectionCount: 0, inUseConnectionCount: 1, waitQueueLength: 0 });
    pool.checkIn(outcome as MockConnection);
  });

  for (const form of ['Promise', 'Observable'] as const) {
    it(`caller and events agree when an events$ subscriber checks a connection in and then aborts the checkout it will serve (${form} form)`, async function () {
      const pool = new ConnectionPoolCore<MockConnection>({ address: 'db:27017', maxPoolSize: 1, connectionFactory: (d) => of(new MockConnection(d)) });
      pool.ready();
      const held = await pool.checkOut();
      const controller = new AbortController();
      const waiting = // W2: waits for the one connection
        form === 'Promise'
          ? pool.checkOut({ signal: controller.signal }).then((c) => c, (e: unknown) => e)
          : new Promise((resolve) => pool.checkOut({ signal: controller.signal }).subscribe({ next: resolve, error: resolve }));
      await microtasks();
      const types: string[] = [];
      let triggered = false;
      pool.events$.subscribe((e) => {
        types.push(e.type);
        if (e.type !== 'ConnectionCheckOutStarted' || triggered) return;
        triggered = true;
        pool.checkIn(held); // queued: the pool is processing W3's checkout...
        controller.abort(); // ...and the cancel is queued behind it, so W2 is served first
      });
      const third = pool.checkOut().then((c) => c, (e: unknown) => e); // W3: its ConnectionCheckOutStarted triggers both
      const got = await waiting;
      await microtasks();
      expect(got, 'W2 was served before its cancel reached the pool').to.equal(held);
      expect(types).to.deep.equal(['ConnectionPoolCreated', 'ConnectionCheckOutStarted', 'ConnectionCheckedIn', 'ConnectionCheckedOut']);
      pool.checkIn(got as MockConnection);
      expect(await third).to.equal(held);
    });
  }

  it('a checkout served at once (while its first then runs) still calls back on a microtask, for every then', async function () {
    const pool = new ConnectionPoolCore<MockConnection>({ address: 'db:27017', connectionFactory: new MockConnectionFactory().factory });
    pool.ready();
    const warm = await pool.checkOut();
    pool.checkIn(warm); // available: the next checkout is delivered while its first `then` is still running
    const order: string[] = [];
    const request = pool.checkOut();
    const first = request.then((c) => (order.push('first'), c));
    const second = request.then((c) => (order.push('second'), c));
    const passedOn = request.then(); // no callback: the connection passes on
    order.push('sync');
    expect(await first).to.equal(warm);
    expect(await second).to.equal(warm);
    expect(await passedOn).to.equal(warm);
    expect(order).to.deep.equal(['sync', 'first', 'second']);
    pool.checkIn(warm);

    pool.close(); // fails at once, inside the first `then`
    const closed = pool.checkOut();
    const caught = closed.then(undefined, (e: unknown) => (order.push('rejected'), e));
    order.push('after');
    expect(await caught).to.be.instanceOf(PoolClosedError);
    const rethrown = await closed.then().then(undefined, (e: unknown) => e);
    expect(rethrown).to.be.instanceOf(PoolClosedError);
    expect(order.slice(3)).to.deep.equal(['after', 'rejected']);
  });

  it('an aborted checkout fails with a CheckOutCancelledError without stack frames of its own, caused by the abort', async function () {
    const pool = new ConnectionPoolCore<MockConnection>({ address: 'db:27017', maxPoolSize: 1, connectionFactory: new MockConnectionFactory().factory });
    pool.ready();
    const held = await pool.checkOut();
    const limit = Error.stackTraceLimit;
    const errors = await abortWaitingCheckouts(pool);
    for (const error of errors) {
      expect(error).to.be.instanceOf(CheckOutCancelledError);
      const { stack, cause } = error as CheckOutCancelledError;
      expect(stack, 'no frames: capturing them was most of the cost of a cancel').to.not.match(/\n\s+at /);
      expect(cause).to.be.instanceOf(DOMException).and.have.property('name', 'AbortError');
      expect((cause as Error).stack, 'the abort\'s place is in its reason').to.match(/\n\s+at /);
    }
    expect(Error.stackTraceLimit, 'restored').to.equal(limit);
    pool.checkIn(held);
    pool.close();
  });

  it('an aborted checkout still fails with its CheckOutCancelledError where Error.stackTraceLimit is frozen (node --frozen-intrinsics)', async function () {
    const pool = new ConnectionPoolCore<MockConnection>({ address: 'db:27017', maxPoolSize: 1, connectionFactory: new MockConnectionFactory().factory });
    pool.ready();
    const held = await pool.checkOut();
    const original = Object.getOwnPropertyDescriptor(Error, 'stackTraceLimit')!;
    // As a hardened realm leaves it: readable, not writable (assigning it throws in strict code).
    Object.defineProperty(Error, 'stackTraceLimit', { value: original.value, writable: false, configurable: true });
    const thrown: unknown[] = [];
    const crash = (e: unknown): number => thrown.push(e);
    // An abort listener that throws is reported by Node's event dispatch as an uncaught exception: held here, in place
    // of the test runner's own handler, so that the test fails rather than the run.
    const runners = process.rawListeners('uncaughtException') as ((e: unknown) => void)[];
    process.removeAllListeners('uncaughtException');
    process.on('uncaughtException', crash);
    try {
      const errors = await abortWaitingCheckouts(pool);
      expect(thrown, 'nothing thrown from the abort').to.deep.equal([]);
      for (const error of errors) {
        expect(error).to.be.instanceOf(CheckOutCancelledError);
        expect((error as Error).cause).to.be.instanceOf(DOMException).and.have.property('name', 'AbortError');
      }
    } finally {
      process.removeListener('uncaughtException', crash);
      for (const runner of runners) process.on('uncaughtException', runner);
      Object.defineProperty(Error, 'stackTraceLimit', original);
    }
    expect(pool.snapshot().waitQueueLength, 'both left the WaitQueue').to.equal(0);
    pool.checkIn(held);
    pool.close();
  });

  it('an aborted checkout leaves no listener on its signal (Promise and Observable forms)', async function () {
    const pool = new ConnectionPoolCore<MockConnection>({
      address: 'db:27017',
      maxPoolSize: 1,
      scheduler: new VirtualClock(),
      connectionFactory: (d) => of(new MockConnection(d)),
    });
    pool.ready();
    const held = await pool.checkOut();
    const promiseForm = new AbortController();
    // Waits: the pool is full.
    const outcome = pool.checkOut({ signal: promiseForm.signal }).then(undefined, (e: unknown) => e);
    expect(getEventListeners(promiseForm.signal, 'abort'), 'while it waits').to.have.length(1);
    promiseForm.abort();
    expect(await outcome).to.be.instanceOf(CheckOutCancelledError);
    expect(getEventListeners(promiseForm.signal, 'abort'), 'the Promise form, once aborted').to.have.length(0);
    const observableForm = new AbortController();
    const errors: unknown[] = [];
    pool.checkOut({ signal: observableForm.signal }).subscribe({ error: (e) => errors.push(e) });
    expect(getEventListeners(observableForm.signal, 'abort'), 'while it waits').to.have.length(1);
    observableForm.abort();
    expect(errors).to.have.length(1);
    expect(errors[0]).to.be.instanceOf(CheckOutCancelledError);
    expect(getEventListeners(observableForm.signal, 'abort'), 'the Observable form, once aborted').to.have.length(0);
    expect(pool.snapshot()).to.include({ waitQueueLength: 0, inUseConnectionCount: 1 });
    pool.checkIn(held);
    pool.close();
  });

  describe('a composite unsubscribed while its first member hands the connection on to its second', function () {
    // Unsubscribing a merge, race or forkJoin closes the composite before its members are unsubscribed, one by one.
    // The first member's teardown checks its connection in; the pool serves the second member, still waiting, at once,
    // into a chain whose consumer is already gone.
    const count = (events: ConnectionPoolEvent[], type: ConnectionPoolEvent['type']): number => events.filter((e) => e.type === type).length;

    it('checks the connection back in rather than lose it (Observable checkOut in a merge)', async function () {
      const { pool, clock, events } = poolOfOne();
      const received: MockConnection[] = [];
      const subscription = merge(
        pool.withConnection$(() => NEVER),
        pool.checkOut().pipe(map((c) => c)),
      ).subscribe((c) => received.push(c as MockConnection));
      clock.advance(1);
      subscription.unsubscribe();
      await microtasks();
      expect(received, 'nobody received it').to.deep.equal([]);
      expect(pool.snapshot()).to.include({ inUseConnectionCount: 0, availableConnectionCount: 1, waitQueueLength: 0 });
      expect(count(events, 'ConnectionCheckedIn'), 'a check-in for every checkout').to.equal(count(events, 'ConnectionCheckedOut'));
    });

    it('checks the connection back in when the composite and its operators come from another copy of RxJS', async function () {
      const other = loadAnotherRxjs();
      const { pool, clock, events } = poolOfOne();
      const received: unknown[] = [];
      const subscription = other
        .merge(pool.withConnection$(() => NEVER), pool.checkOut().pipe(other.map((c: MockConnection) => c)))
        .subscribe((c) => received.push(c));
      clock.advance(1);
      subscription.unsubscribe();
      await microtasks();
      expect(received, 'nobody received it').to.deep.equal([]);
      expect(pool.snapshot()).to.include({ inUseConnectionCount: 0, availableConnectionCount: 1, waitQueueLength: 0 });
      expect(count(events, 'ConnectionCheckedIn')).to.equal(count(events, 'ConnectionCheckedOut'));
    });

    it('does not run the scope of a withConnection$ its caller gave up (forkJoin under timeout)', async function () {
      const { pool, clock, events } = poolOfOne();
      const scopes: number[] = [];
      let failure: unknown;
      forkJoin([
        pool.withConnection$((c) => (scopes.push(c.id), timer(100, clock))),
        pool.withConnection$((c) => (scopes.push(c.id), timer(100, clock))),
      ])
        .pipe(timeout({ first: 50, scheduler: clock }))
        .subscribe({ error: (e: unknown) => (failure = e) });
      clock.advance(60);
      await microtasks();
      expect(failure).to.have.property('name', 'TimeoutError');
      expect(scopes, 'only the first scope ran').to.deep.equal([1]);
      expect(pool.snapshot()).to.include({ inUseConnectionCount: 0, availableConnectionCount: 1 });
      expect(count(events, 'ConnectionCheckedIn')).to.equal(count(events, 'ConnectionCheckedOut'));
    });
  });

  it('delivers to a subscriber that still routes values though its own consumer left (groupBy keeps its source for a live group)', async function () {
    // groupBy stays subscribed to its source while a group is subscribed, after its own subscriber has gone: a
    // closed link in the chain there does not mean the value is lost.
    const { pool, clock, events } = poolOfOne();
    const received: number[] = [];
    const requests = new Subject<number>();
    let outer: Subscription | undefined;
    outer = requests
      .pipe(
        mergeMap((n) => pool.checkOut().pipe(map((c) => [n, c] as const))),
        groupBy(() => 'all'),
      )
      .subscribe((group) => {
        group.subscribe(([n, c]) => {
          received.push(n);
          pool.checkIn(c);
          outer?.unsubscribe(); // the group lives on; groupBy's own subscriber is gone
        });
      });
    requests.next(1);
    requests.next(2); // waits for the one connection
    clock.advance(1);
    await microtasks();
    expect(received, 'the live group received both').to.deep.equal([1, 2]);
    expect(pool.snapshot()).to.include({ inUseConnectionCount: 0, waitQueueLength: 0 });
    expect(events.filter((e) => e.type === 'ConnectionCheckOutFailed')).to.deep.equal([]);
  });

  it('checks in a connection served to a subscriber of another copy of RxJS that unsubscribed after the pool committed the delivery', function () {
    // Two copies of rxjs in one application are common (an app's own and a library's). An operator of the other copy
    // subscribes with its own Subscriber class; when it left after the pool committed the delivery (here from inside
    // an events$ subscriber), the connection must still come back.
    const other = loadAnotherRxjs();
    const clock = new VirtualClock();
    const mock = new MockConnectionFactory({ scheduler: clock });
    const pool = new ConnectionPoolCore<MockConnection>({ address: 'db:27017', maxPoolSize: 1, scheduler: clock, connectionFactory: mock.factory });
    const events: ConnectionPoolEvent[] = [];
    let held: MockConnection | undefined;
    pool.ready();
    pool.checkOut().subscribe((c) => (held = c));
    clock.advance(1);
    let waiting: Subscription | undefined;
    pool.events$.subscribe((e) => {
      events.push(e);
      if (e.type === 'ConnectionCheckedOut') waiting?.unsubscribe();
    });
    const received: MockConnection[] = [];
    waiting = pool
      .checkOut()
      .pipe(other.map((c: MockConnection) => c))
      .subscribe((c) => received.push(c));
    pool.checkIn(held!);
    clock.advance(1);
    expect(received, 'nobody received it').to.deep.equal([]);
    expect(pool.snapshot()).to.include({ inUseConnectionCount: 0, availableConnectionCount: 1 });
    expect(events.map((e) => e.type).filter((t) => t.startsWith('ConnectionChecked'))).to.deep.equal(['ConnectionCheckedIn', 'ConnectionCheckedOut', 'ConnectionCheckedIn']);
  });
});

/**
 * A pool of one connection on virtual time, not yet ready and not observed, whose connection is established as soon as
 * it is asked for (its factory emits synchronously), so a checkout of the ready pool is served or queued as it is
 * subscribed to.
 */
function poolOfOneEstablishedAtOnce(): ConnectionPoolCore<MockConnection> {
  return new ConnectionPoolCore<MockConnection>({ address: 'db:27017', maxPoolSize: 1, scheduler: new VirtualClock(), connectionFactory: (d) => of(new MockConnection(d)) });
}

/** A ready pool of one connection on virtual time, with its events recorded. */
function poolOfOne(): { pool: ConnectionPoolCore<MockConnection>; clock: VirtualClock; events: ConnectionPoolEvent[] } {
  const clock = new VirtualClock();
  const mock = new MockConnectionFactory({ scheduler: clock });
  const pool = new ConnectionPoolCore<MockConnection>({ address: 'db:27017', maxPoolSize: 1, scheduler: clock, connectionFactory: mock.factory });
  const events: ConnectionPoolEvent[] = [];
  pool.events$.subscribe((e) => events.push(e));
  pool.ready();
  return { pool, clock, events };
}

/** A second, separate copy of rxjs (its own Subscriber class), as an application that bundles another copy has. */
function loadAnotherRxjs(): typeof import('rxjs') {
  const own = Object.keys(require.cache).filter((k) => /[\\/]node_modules[\\/]rxjs[\\/]/.test(k));
  const saved = own.map((k) => [k, require.cache[k]] as const);
  for (const k of own) delete require.cache[k];
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const copy = require('rxjs') as typeof import('rxjs');
    expect(copy.Subscriber, 'a separate copy').to.not.equal(Subscriber);
    return copy;
  } finally {
    for (const k of Object.keys(require.cache)) if (/[\\/]node_modules[\\/]rxjs[\\/]/.test(k)) delete require.cache[k];
    for (const [k, m] of saved) require.cache[k] = m;
  }
}
