import { expect } from 'chai';
import { inspect } from 'node:util';
import { config, EMPTY, firstValueFrom, last, lastValueFrom, NEVER, takeUntil, Observable, of, Subject, Subscription, tap, throwError, delay as rxDelay } from 'rxjs';
import { CheckOutCancelledError, ConnectionCheckInError, ConnectionPool, ConnectionPoolCore, InvalidOptionError, MongoNetworkError, PoolClearedError, PoolClosedError, WaitQueueTimeoutError, type ConnectionPoolEvent, type PoolConnection, type PoolInputAction, type PoolSnapshot } from '../../lib';
import type { MockConnectionFactoryOptions } from '../../lib/testing';
import { MockConnection, MockConnectionFactory } from '../../lib/testing';
import { VirtualClock } from '../../lib/testing';
import { closeTimeline } from '../support/close-timeline';
import { microtasks } from '../support/microtasks';
import { outcome, withPollutedPrototype } from '../support/prototype-pollution';
import { MINIFIED_NAMES, withClassesRenamed } from '../support/renamed-classes';

const noop = (): void => undefined;

function makePool(
  options: Partial<ConstructorParameters<typeof ConnectionPool<MockConnection>>[0]> = {},
  factoryOptions: MockConnectionFactoryOptions = {},
) {
  const clock = new VirtualClock();
  const mock = new MockConnectionFactory({ scheduler: clock, establishDelayMS: 10, ...factoryOptions });
  const pool = new ConnectionPool<MockConnection>({
    address: 'db.example:27017',
    scheduler: clock,
    connectionFactory: mock.factory,
    ...options,
  });
  const events: ConnectionPoolEvent[] = [];
  const sub = pool.events$.subscribe((e) => events.push(e));
  return { pool, clock, mock, events, sub, types: () => events.map((e) => e.type) };
}

describe('ConnectionPool', function () {
  describe('options', function () {
    const invalid: [string, Record<string, unknown>, RegExp][] = [
      ['maxPoolSize', { maxPoolSize: -1 }, /Invalid maxPoolSize: -1 \(maxPoolSize must be an integer >= 0/],
      ['maxPoolSize', { maxPoolSize: 1.5 }, /Invalid maxPoolSize: 1.5/],
      ['minPoolSize', { minPoolSize: -2 }, /Invalid minPoolSize: -2/],
      ['minPoolSize', { maxPoolSize: 2, minPoolSize: 3 }, /minPoolSize must be <= maxPoolSize \(2\)/],
      ['maxConnecting', { maxConnecting: 0 }, /Invalid maxConnecting: 0 \(maxConnecting must be an integer > 0\)/],
      ['maxIdleTimeMS', { maxIdleTimeMS: -5 }, /Invalid maxIdleTimeMS: -5/],
      ['waitQueueTimeoutMS', { waitQueueTimeoutMS: Number.NaN }, /Invalid waitQueueTimeoutMS: NaN/],
      ['waitQueueTimeoutMS', { waitQueueTimeoutMS: '100' }, /Invalid waitQueueTimeoutMS: "100"/],
      ['backgroundThreadIntervalMS', { backgroundThreadIntervalMS: 0 }, /0 is not allowed/],
      ['address', { address: 'host:99999' }, /Invalid address: "host:99999"/],
      ['address', { address: '' }, /Invalid address/],
    ];
    for (const [option, given, message] of invalid) {
      it(`rejects ${JSON.stringify(given)} with an InvalidOptionError naming ${option}`, function () {
        let error: unknown;
        try {
          new ConnectionPool({ address: 'localhost', ...given } as never);
        } catch (e) {
          error = e;
        }
        expect(error).to.be.instanceOf(InvalidOptionError);
        expect((error as InvalidOptionError).option).to.equal(option);
        expect((error as Error).message).to.match(message);
      });
    }

    it('accepts minPoolSize above maxPoolSize when maxPoolSize is 0 (no limit), and applies the defaults', function () {
      const pool = new ConnectionPool({ address: 'LocalHost', maxPoolSize: 0, minPoolSize: 5 });
      expect(pool.address).to.equal('localhost:27017');
      expect(pool.options).to.include({ maxPoolSize: 0, minPoolSize: 5, maxConnecting: 2, maxIdleTimeMS: 0, waitQueueTimeoutMS: 0 });
      pool.close();
    });

    it('reports only the options the user set in ConnectionPoolCreated, to every subscriber', async function () {
      const { pool, events } = makePool({ maxPoolSize: 7, waitQueueTimeoutMS: 100 });
      expect(events[0]).to.include({ type: 'ConnectionPoolCreated', address: 'db.example:27017' });
      expect((events[0] as { options: unknown }).options).to.deep.equal({ maxPoolSize: 7, waitQueueTimeoutMS: 100 });
      const late = await firstValueFrom(pool.events$);
      expect(late).to.equal(events[0]);
    });
  });

  describe('checkOut as an Observable', function () {
    it('is lazy: nothing is enqueued until subscribed', function () {
      const { pool, types } = makePool();
      pool.ready();
      pool.checkOut();
      expect(types()).to.deep.equal(['ConnectionPoolCreated', 'ConnectionPoolReady']);
    });

    it('emits the connection once and completes', function () {
      const { pool, clock } = makePool();
      pool.ready();
      const seen: unknown[] = [];
      let completed = false;
      pool.checkOut().subscribe({ next: (c) => seen.push(c), complete: () => (completed = true) });
      clock.advance(10);
      expect(seen).to.have.length(1);
      expect(completed).to.equal(true);
    });

    it('unsubscribing while waiting leaves the WaitQueue at once and emits ConnectionCheckOutFailed (cancelled)', function () {
      const { pool, clock, events } = makePool({ maxPoolSize: 1 });
      pool.ready();
      let held: MockConnection | undefined;
      pool.checkOut().subscribe((c) => (held = c));
      clock.advance(10);
      const sub = pool.checkOut().subscribe(() => expect.fail('a cancelled checkout must not receive a connection'));
      expect(pool.snapshot().waitQueueLength).to.equal(1);
      sub.unsubscribe();
      expect(pool.snapshot().waitQueueLength).to.equal(0);
      expect(events.at(-1)).to.include({ type: 'ConnectionCheckOutFailed', reason: 'cancelled' });
      pool.checkIn(held!);
      expect(pool.snapshot()).to.include({ availableConnectionCount: 1, inUseConnectionCount: 0 });
    });

    it('unsubscribing while its establishment is under way does not strand the connection', function () {
      const { pool, clock } = makePool();
      pool.ready();
      const sub = pool.checkOut().subscribe(() => expect.fail('cancelled'));
      sub.unsubscribe();
      clock.advance(10);
      expect(pool.snapshot()).to.include({ totalConnectionCount: 1, availableConnectionCount: 1, pendingConnectionCount: 0 });
    });

    it('a connection delivered to a subscriber that left from inside the delivery is checked back in', function () {
      // A subscriber unsubscribes another checkout from its own next handler, while the pool is mid-delivery.
      const { pool, clock, types } = makePool({ maxPoolSize: 2 });
      pool.ready();
      let second: Subscription | undefined;
      const first = pool.checkOut().subscribe(() => second?.unsubscribe());
      second = pool.checkOut().subscribe(() => expect.fail('unsubscribed before delivery'));
      clock.advance(10);
      expect(first.closed).to.equal(true);
      const snap = pool.snapshot();
      expect(snap.inUseConnectionCount).to.equal(1);
      expect(snap.totalConnectionCount).to.equal(2);
      expect(types().filter((t) => t === 'ConnectionCheckOutFailed' || t === 'ConnectionCheckedIn')).to.have.length(1);
    });

    it('errors with CheckOutCancelledError when its AbortSignal aborts', function () {
      const { pool, events } = makePool({ maxPoolSize: 1 });
      pool.ready();
      pool.checkOut().subscribe();
      const controller = new AbortController();
      let error: unknown;
      pool.checkOut({ signal: controller.signal }).subscribe({ error: (e) => (error = e) });
      controller.abort(new Error('user gave up'));
      expect(error).to.be.instanceOf(CheckOutCancelledError);
      expect((error as Error).cause).to.have.property('message', 'user gave up');
      expect(events.at(-1)).to.include({ type: 'ConnectionCheckOutFailed', reason: 'cancelled' });
    });
  });

  describe('checkOut as a Promise', function () {
    it('takes no checkout option from Object.prototype: its timeoutMS, priority or purpose are ignored', async function () {
      const { pool, clock, types } = makePool({ maxPoolSize: 1 });
      pool.ready();
      const first = pool.checkOut().then((c) => c);
      clock.advance(10);
      await first;
      const second = withPollutedPrototype({ timeoutMS: 5, priority: 'urgent', purpose: 'nonsense' }, () => outcome(() => pool.checkOut({})));
      expect(second).not.to.be.instanceOf(Error);
      let settled = false;
      void Promise.resolve(second as PromiseLike<unknown>).then(() => (settled = true), () => (settled = true));
      clock.advance(1000);
      await microtasks();
      expect(settled, 'the second checkout still waits: no 5 ms timeout from Object.prototype').to.equal(false);
      expect(types()).not.to.include('ConnectionCheckOutFailed');
      pool.close();
    });

    it('takes none of the four checkout options from Object.prototype when it holds that one alone', async function () {
      // Each name on its own: a pool that looked for pollution under some names only would take the others.
      const polluted: Record<string, unknown> = { signal: AbortSignal.abort(new Error('from the prototype')), priority: 'urgent', timeoutMS: -1, purpose: 'nonsense' };
      const { pool, clock } = makePool({ maxPoolSize: 1 });
      pool.ready();
      for (const [name, value] of Object.entries(polluted)) {
        const request = withPollutedPrototype({ [name]: value }, () => outcome(() => pool.checkOut({})));
        expect(request, name).not.to.be.instanceOf(Error);
        const served = (request as PromiseLike<MockConnection>).then(
          (c) => c,
          (e: unknown) => e,
        );
        clock.advance(10);
        const c = await served;
        expect(c, name).to.be.instanceOf(MockConnection);
        pool.checkIn(c as MockConnection);
      }
      pool.close();
    });

    it('resolves to the connection; awaiting the same request twice is one checkout', async function () {
      const { pool, clock, types } = makePool();
      pool.ready();
      const request = pool.checkOut();
      const p1 = request.then((c) => c);
      clock.advance(10);
      const c = await p1;
      expect(await request).to.equal(c);
      expect(types().filter((t) => t === 'ConnectionCheckOutStarted')).to.have.length(1);
    });

    it('later thens share the outcome, before and after it settles; callbacks never run inside the pool', async function () {
      const { pool, clock, types } = makePool();
      pool.ready();
      const request = pool.checkOut();
      const order: string[] = [];
      const first = request.then((c) => (order.push('first'), c.id));
      const second = request.then((c) => (order.push('second'), c.id)); // joins while waiting
      clock.advance(10); // delivered now, synchronously inside the pool's processing...
      expect(order, '...but no callback has run yet').to.deep.equal([]);
      expect(await first).to.equal(1);
      expect(await second).to.equal(1);
      expect(await request.then((c) => c.id), 'a then after settlement').to.equal(1);
      expect(order).to.deep.equal(['first', 'second']);
      expect(types().filter((t) => t === 'ConnectionCheckOutStarted')).to.have.length(1);
    });

    it('a callback that throws rejects the Promise its then returned; a missing one passes the outcome on', async function () {
      const { pool, clock } = makePool({ maxPoolSize: 1, waitQueueTimeoutMS: 5 });
      pool.ready();
      const thrown = pool.checkOut().then(() => {
        throw new Error('callback failed');
      });
      const passedOn = pool.checkOut().then(undefined, undefined); // waits, then times out
      clock.advance(10);
      const errors = await Promise.all([thrown.catch((e: unknown) => e), passedOn.catch((e: unknown) => e)]);
      expect(errors[0]).to.have.property('message', 'callback failed');
      expect(errors[1]).to.be.instanceOf(WaitQueueTimeoutError);
    });

    it('rejects with WaitQueueTimeoutError after waitQueueTimeoutMS of virtual time, not before', async function () {
      const { pool, clock, events } = makePool({ maxPoolSize: 1, waitQueueTimeoutMS: 100 });
      pool.ready();
      pool.checkOut().subscribe();
      clock.advance(10);
      let outcome: unknown = 'pending';
      pool.checkOut().then(
        () => (outcome = 'resolved'),
        (e) => (outcome = e),
      );
      clock.advance(99);
      await microtasks();
      expect(outcome).to.equal('pending');
      clock.advance(1);
      await microtasks();
      expect(outcome).to.be.instanceOf(WaitQueueTimeoutError);
      expect((outcome as WaitQueueTimeoutError).address).to.equal('db.example:27017');
      expect(events.at(-1)).to.include({ type: 'ConnectionCheckOutFailed', reason: 'timeout', duration: 100 });
    });

    it('rejects with CheckOutCancelledError when its signal aborts, and at once for an aborted signal', async function () {
      const { pool, types } = makePool({ maxPoolSize: 1 });
      pool.ready();
      pool.checkOut().subscribe();
      const controller = new AbortController();
      const p = pool.checkOut({ signal: controller.signal });
      const settled = p.then(
        () => 'resolved',
        (e) => e,
      );
      controller.abort();
      expect(await settled).to.be.instanceOf(CheckOutCancelledError);
      const before = types().length;
      const error = await pool.checkOut({ signal: AbortSignal.abort() }).then(
        () => undefined,
        (e) => e,
      );
      expect(error).to.be.instanceOf(CheckOutCancelledError);
      expect(types().length).to.equal(before); // it never started
    });

    it('rejects with PoolClearedError on a paused pool and PoolClosedError on a closed one', async function () {
      const { pool } = makePool();
      const paused = await pool.checkOut().then(
        () => undefined,
        (e) => e,
      );
      expect(paused).to.be.instanceOf(PoolClearedError);
      expect((paused as PoolClearedError).hasErrorLabel('RetryableError')).to.equal(true);
      pool.close();
      const closed = await pool.checkOut().then(
        () => undefined,
        (e) => e,
      );
      expect(closed).to.be.instanceOf(PoolClosedError);
    });

    it('rejects with the establishment error, and the pool clears itself', async function () {
      const boom = new Error('handshake failed');
      const { pool, clock, types } = makePool({}, { failWith: () => boom });
      pool.ready();
      const p = pool.checkOut().then(
        () => undefined,
        (e) => e,
      );
      clock.advance(10);
      expect(await p).to.equal(boom);
      expect(pool.state).to.equal('paused');
      expect(types()).to.deep.equal([
        'ConnectionPoolCreated',
        'ConnectionPoolReady',
        'ConnectionCheckOutStarted',
        'ConnectionCreated',
        'ConnectionPoolCleared', // the establishment error clears the pool first,
        'ConnectionClosed', // then the failed connection is closed (reason error),
        'ConnectionCheckOutFailed', // then the checkout that claimed it fails
      ]);
    });
  });

  describe('checkIn', function () {
    it('throws ConnectionCheckInError for a connection of another pool, or one already checked in', function () {
      const a = makePool();
      const b = makePool();
      a.pool.ready();
      b.pool.ready();
      let fromB: MockConnection | undefined;
      b.pool.checkOut().subscribe((c) => (fromB = c));
      b.clock.advance(10);
      expect(() => a.pool.checkIn(fromB!)).to.throw(ConnectionCheckInError, /not a live connection of this pool/);
      b.pool.checkIn(fromB!);
      expect(() => b.pool.checkIn(fromB!)).to.throw(ConnectionCheckInError, /not checked out/);
      expect(() => b.pool.checkIn({} as MockConnection)).to.throw(ConnectionCheckInError);
    });

    it('closes an errored connection with reason error', function () {
      const { pool, clock, events } = makePool();
      pool.ready();
      let c: MockConnection | undefined;
      pool.checkOut().subscribe((x) => (c = x));
      clock.advance(10);
      c!.errored = true;
      pool.checkIn(c!);
      expect(events.at(-1)).to.include({ type: 'ConnectionClosed', reason: 'error', connectionId: 1 });
    });

    it('a check-in from inside a delivery runs after the current action, keeping commit order', function () {
      const { pool, clock, types } = makePool({ maxPoolSize: 1 });
      pool.ready();
      pool.checkOut().subscribe((c) => pool.checkIn(c)); // re-enters the pool from inside its own delivery
      let second: MockConnection | undefined;
      pool.checkOut().subscribe((c) => (second = c));
      clock.advance(10);
      expect(second?.id).to.equal(1);
      expect(types().slice(-3)).to.deep.equal(['ConnectionCheckedOut', 'ConnectionCheckedIn', 'ConnectionCheckedOut']);
    });
  });

  describe('withConnection', function () {
    it('enters the WaitQueue at its call, in call order with checkouts then-ed or subscribed to in the same turn', async function () {
      // A pool of 1, its connection held; then one synchronous burst of five checkouts. Each served one records its name
      // and gives the connection back: the order served is the order of the calls.
      const { pool, clock, events } = makePool({ maxPoolSize: 1 });
      pool.ready();
      let held: MockConnection | undefined;
      pool.checkOut().subscribe((c) => (held = c));
      clock.advance(10);
      const served: string[] = [];
      const as = (name: string) => (c: MockConnection): void => {
        served.push(name);
        pool.checkIn(c);
      };
      const all = Promise.all([
        pool.withConnection(() => void served.push('withConnection 1')),
        pool.checkOut().then(as('then')),
        firstValueFrom(pool.checkOut()).then(as('subscribe')),
        pool.withConnection(() => void served.push('withConnection 2')),
        firstValueFrom(pool.withConnection$(() => of(served.push('withConnection$')))),
      ]);
      expect(events.filter((e) => e.type === 'ConnectionCheckOutStarted'), 'all five in the pool at the call').to.have.length(6);
      pool.checkIn(held!);
      await all;
      expect(served).to.deep.equal(['withConnection 1', 'then', 'subscribe', 'withConnection 2', 'withConnection$']);
    });

    it('checks the connection in after fn resolves, after fn throws, and when fn checked it in itself', async function () {
      const { pool, clock } = makePool();
      pool.ready();
      const run = async <T>(p: Promise<T>): Promise<T> => {
        await microtasks(); // fn runs a microtask after the connection is delivered
        clock.advance(10);
        return p;
      };
      expect(await run(pool.withConnection((c) => c.id))).to.equal(1);
      const error = await run(
        pool
          .withConnection(() => {
            throw new Error('fn failed');
          })
          .catch((e: unknown) => e),
      );
      expect(error).to.have.property('message', 'fn failed');
      await run(pool.withConnection((c) => pool.checkIn(c)));
      expect(pool.snapshot()).to.include({ inUseConnectionCount: 0, availableConnectionCount: 1, totalConnectionCount: 1 });
    });

    it('withConnection$ checks in when the inner Observable completes, errors, or is unsubscribed', function () {
      const { pool, clock } = makePool();
      pool.ready();
      const ids: number[] = [];
      pool.withConnection$((c) => of(c.id)).subscribe((id) => ids.push(id));
      clock.advance(10);
      expect(ids).to.deep.equal([1]);
      let error: unknown;
      pool.withConnection$(() => throwError(() => new Error('inner'))).subscribe({ error: (e) => (error = e) });
      clock.advance(10);
      expect(error).to.have.property('message', 'inner');
      const sub = pool.withConnection$(() => of(1).pipe(rxDelay(1000, clock))).subscribe();
      clock.advance(10);
      expect(pool.snapshot().inUseConnectionCount).to.equal(1);
      sub.unsubscribe();
      expect(pool.snapshot()).to.include({ inUseConnectionCount: 0, totalConnectionCount: 1 });
      expect(pool.snapshot().availableConnectionCount).to.equal(1);
    });
  });

  describe('events$', function () {
    it('a subscriber that throws affects neither the pool nor the other subscribers', async function () {
      const reported: unknown[] = [];
      const previous = config.onUnhandledError;
      config.onUnhandledError = (e) => reported.push(e);
      try {
        const { pool, clock, types } = makePool();
        pool.events$.subscribe(() => {
          throw new Error('bad subscriber');
        });
        pool.ready();
        pool.checkOut().subscribe();
        clock.advance(10);
        expect(types()).to.deep.equal([
          'ConnectionPoolCreated',
          'ConnectionPoolReady',
          'ConnectionCheckOutStarted',
          'ConnectionCreated',
          'ConnectionReady',
          'ConnectionCheckedOut',
        ]);
        expect(pool.snapshot().inUseConnectionCount).to.equal(1);
        await new Promise((r) => setTimeout(r, 5)); // RxJS reports subscriber errors on a timer
        expect(reported).to.have.length.greaterThan(0);
        expect(reported[0]).to.have.property('message', 'bad subscriber');
      } finally {
        config.onUnhandledError = previous;
      }
    });

    it('stamps events with the scheduler clock and durations in ms', function () {
      const { pool, clock, events } = makePool({}, { establishDelayMS: 25 });
      clock.advance(1000);
      pool.ready();
      pool.checkOut().subscribe();
      clock.advance(25);
      const ready = events.find((e) => e.type === 'ConnectionReady')!;
      expect(ready).to.include({ time: 1025, duration: 25 });
      expect(events.find((e) => e.type === 'ConnectionCheckedOut')).to.include({ duration: 25 });
    });

    it('ConnectionCheckedIn carries how long the connection was used, from its checkout to its check-in (ms)', function () {
      const { pool, clock, events } = makePool({}, { establishDelayMS: 25 });
      clock.advance(1000);
      pool.ready();
      let connection: MockConnection | undefined;
      pool.checkOut().subscribe((c) => (connection = c));
      clock.advance(25);
      expect(connection, 'delivered once established').to.not.equal(undefined);
      clock.advance(40);
      pool.checkIn(connection!);
      expect(events.find((e) => e.type === 'ConnectionCheckedIn')).to.include({ time: 1065, duration: 40 });
    });
  });

  describe('clear and close', function () {
    it('clear fails waiting checkouts with a PoolClearedError quoting the cause', async function () {
      const { pool, clock } = makePool({ maxPoolSize: 1 });
      pool.ready();
      pool.checkOut().subscribe();
      clock.advance(10);
      const waiting = pool.checkOut().then(
        () => undefined,
        (e) => e,
      );
      pool.clear({ cause: new Error('heartbeat failed') });
      const error = await waiting;
      expect(error).to.be.instanceOf(PoolClearedError);
      expect((error as Error).message).to.equal(
        'Connection pool for db.example:27017 was cleared because another operation failed with: heartbeat failed',
      );
      expect(pool.generation).to.equal(1);
    });

    it('close destroys every connection it closes and aborts establishments under way', function () {
      const { pool, clock, mock } = makePool({ minPoolSize: 3, maxConnecting: 2 });
      pool.ready();
      clock.advance(10); // 1 and 2 established, 3 pending
      pool.close();
      clock.advance(100);
      expect(mock.created.map((c) => c.destroyed)).to.deep.equal([true, true]);
      expect(mock.aborted).to.equal(1);
      expect(pool.snapshot()).to.include({ state: 'closed', totalConnectionCount: 0 });
    });

    it('a `using` declaration closes the pool when its block is left by a throw', function () {
      const { pool, clock, mock, types } = makePool({ minPoolSize: 2 });
      const thrown = new Error('the block failed');
      try {
        using scoped = pool;
        scoped.ready();
        clock.advance(10); // 2 connections established and available
        throw thrown;
      } catch (error) {
        expect(error).to.equal(thrown);
      }
      expect(pool.state).to.equal('closed');
      expect(mock.created.map((c) => c.destroyed)).to.deep.equal([true, true]);
      expect(types().filter((t) => t === 'ConnectionPoolClosed')).to.have.lengthOf(1);
      pool[Symbol.dispose](); // idempotent, as close()
      expect(types().filter((t) => t === 'ConnectionPoolClosed')).to.have.lengthOf(1);
    });
  });

  describe('state$', function () {
    const counts = (s: PoolSnapshot) => [s.state, s.generation, s.totalConnectionCount, s.availableConnectionCount, s.pendingConnectionCount, s.inUseConnectionCount, s.waitQueueLength];

    it('emits the current snapshot on subscribe, then one per committed batch that changed something, on virtual time', function () {
      const { pool, clock } = makePool({ maxPoolSize: 1 });
      const seen: PoolSnapshot[] = [];
      pool.state$.subscribe((s) => seen.push(s));
      expect(seen.map(counts)).to.deep.equal([['paused', 0, 0, 0, 0, 0, 0]]);
      expect(Object.isFrozen(seen[0])).to.equal(true);
      pool.ready();
      let first: MockConnection | undefined;
      pool.checkOut().subscribe((c) => (first = c)); // starts an establishment (10 ms of virtual time)
      pool.checkOut().subscribe(); // waits: maxPoolSize 1
      clock.advance(5);
      pool.ready(); // no-op: nothing changes, nothing is emitted
      clock.advance(5); // established: delivered to the first
      pool.checkIn(first!); // then to the second
      expect(seen.map(counts)).to.deep.equal([
        ['paused', 0, 0, 0, 0, 0, 0],
        ['ready', 0, 0, 0, 0, 0, 0],
        ['ready', 0, 1, 0, 1, 0, 1], // pending, its claimant waiting
        ['ready', 0, 1, 0, 1, 0, 2],
        ['ready', 0, 1, 0, 0, 1, 1], // established: the first holds it, the second waits
        ['ready', 0, 1, 0, 0, 1, 0], // the check-in went straight to the second
      ]);
    });

    it('publishes once per batch: a check-in made from inside a delivery lands in the same snapshot', function () {
      const { pool, clock } = makePool({ maxPoolSize: 1 });
      pool.ready();
      const seen: PoolSnapshot[] = [];
      pool.state$.subscribe((s) => seen.push(s));
      pool.checkOut().subscribe((c) => pool.checkIn(c)); // re-entrant: queued, same batch
      clock.advance(10);
      expect(seen.map(counts).slice(-1)).to.deep.equal([['ready', 0, 1, 1, 0, 0, 0]]);
      expect(seen.map((s) => s.inUseConnectionCount)).to.not.include(1); // never published mid-batch
    });

    it('builds nothing while nobody subscribes', function () {
      const { pool, clock } = makePool();
      let built = 0;
      const snapshot = pool.snapshot.bind(pool);
      pool.snapshot = () => (built++, snapshot());
      pool.ready();
      pool.checkOut().subscribe();
      clock.advance(10);
      expect(built).to.equal(0);
      const sub = pool.state$.subscribe();
      expect(built).to.equal(1);
      sub.unsubscribe();
      pool.clear();
      expect(built).to.equal(1);
    });

    it('completes once the pool is closed and its last connection closed; a late subscriber gets the final snapshot', function () {
      const { pool, clock } = makePool();
      pool.ready();
      let held: MockConnection | undefined;
      pool.checkOut().subscribe((c) => (held = c));
      clock.advance(10);
      let completed = false;
      const seen: PoolSnapshot[] = [];
      pool.state$.subscribe({ next: (s) => seen.push(s), complete: () => (completed = true) });
      pool.close();
      expect(completed, 'an in-use connection is still open').to.equal(false);
      pool.checkIn(held!);
      expect(completed).to.equal(true);
      expect(counts(seen.at(-1)!)).to.deep.equal(['closed', 0, 0, 0, 0, 0, 0]);
      const late: PoolSnapshot[] = [];
      let lateCompleted = false;
      pool.state$.subscribe({ next: (s) => late.push(s), complete: () => (lateCompleted = true) });
      expect(late.map(counts)).to.deep.equal([['closed', 0, 0, 0, 0, 0, 0]]);
      expect(lateCompleted).to.equal(true);
    });

    it('ends an events$ exporter when the pool is done, as the README shows, with the last events in it', function () {
      const { pool, clock } = makePool();
      pool.ready();
      let held: MockConnection | undefined;
      pool.checkOut().subscribe((c) => (held = c));
      clock.advance(10);
      const exported: string[] = [];
      let ended = false;
      pool.events$
        .pipe(takeUntil(pool.state$.pipe(last())))
        .subscribe({ next: (e) => exported.push(e.type), complete: () => (ended = true) });
      pool.close();
      expect(ended, 'a connection is still in use').to.equal(false);
      pool.checkIn(held!);
      expect(ended).to.equal(true);
      expect(exported.slice(1)).to.deep.equal(['ConnectionPoolClosed', 'ConnectionCheckedIn', 'ConnectionClosed']);
    });
  });

  describe('input (an Observer of pool actions)', function () {
    it('a stream subscribed into it readies, clears and closes the pool, serialized with other inputs', function () {
      const { pool, types } = makePool();
      const actions = new Subject<PoolInputAction>();
      actions.subscribe(pool.input);
      actions.next({ type: 'ready' });
      expect(pool.state).to.equal('ready');
      actions.next({ type: 'clear', cause: new Error('heartbeat failed') });
      expect(pool.state).to.equal('paused');
      actions.complete(); // the stream ending does not close the pool
      expect(pool.state).to.equal('paused');
      const more = new Subject<PoolInputAction>();
      more.subscribe(pool.input);
      more.next({ type: 'close' });
      expect(pool.state).to.equal('closed');
      expect(types()).to.deep.equal(['ConnectionPoolCreated', 'ConnectionPoolReady', 'ConnectionPoolCleared', 'ConnectionPoolClosed']);
    });

    it('rejects an unknown action with an InvalidOptionError', function () {
      const { pool } = makePool();
      expect(() => pool.input.next({ type: 'explode' } as never)).to.throw(InvalidOptionError, /input action/);
    });
  });

  describe('check-ins belong to the checkout that holds the connection', function () {
    it('a duplicate check-in queued inside a delivery never takes the connection from its next holder', function () {
      const { pool, clock, types } = makePool({ maxPoolSize: 1 });
      pool.ready();
      let next: MockConnection | undefined;
      pool.checkOut().subscribe((c) => {
        pool.checkIn(c); // queued (we are inside the pool's delivery)
        pool.checkIn(c); // the same checkout again: also queued, and must change nothing
      });
      pool.checkOut().subscribe((c) => (next = c));
      clock.advance(10);
      expect(next?.id).to.equal(1);
      expect(pool.snapshot()).to.include({ inUseConnectionCount: 1, availableConnectionCount: 0 });
      expect(types().filter((t) => t === 'ConnectionCheckedIn')).to.have.length(1);
      pool.checkIn(next!); // the new holder's own check-in works
      expect(pool.snapshot()).to.include({ inUseConnectionCount: 0, availableConnectionCount: 1 });
    });

    it('withConnection ends only its own checkout when fn checked the connection in and another caller took it', async function () {
      const { pool, clock } = makePool({ maxPoolSize: 1 });
      pool.ready();
      let other: MockConnection | undefined;
      const scoped = pool.withConnection(async (c) => {
        pool.checkIn(c); // early check-in...
        other = await pool.checkOut(); // ...and the same connection goes to another checkout
      });
      await microtasks();
      clock.advance(10);
      await scoped;
      expect(other?.id).to.equal(1);
      expect(pool.snapshot().inUseConnectionCount, 'the other caller still holds it').to.equal(1);
      expect(() => pool.checkIn(other!)).to.not.throw();
    });

    it('withConnection$ ends only its own checkout too', function () {
      const { pool, clock } = makePool({ maxPoolSize: 1 });
      pool.ready();
      let other: MockConnection | undefined;
      pool
        .withConnection$((c) => {
          pool.checkIn(c);
          pool.checkOut().subscribe((x) => (other = x));
          return of(c.id);
        })
        .subscribe();
      clock.advance(10);
      expect(other?.id).to.equal(1);
      expect(pool.snapshot().inUseConnectionCount).to.equal(1);
      expect(() => pool.checkIn(other!)).to.not.throw();
    });
  });

  describe('caller and events agree', function () {
    it('an AbortSignal that fires after the pool committed a checkout, before delivery, does not cancel it', async function () {
      const { pool, clock, types } = makePool({ maxPoolSize: 1 });
      pool.ready();
      const controller = new AbortController();
      // An events$ subscriber aborts the moment ConnectionCheckedOut is committed: the caller must get the connection.
      const abortOnCheckOut = pool.events$.subscribe((e) => {
        if (e.type === 'ConnectionCheckedOut') controller.abort();
      });
      const request = pool.checkOut({ signal: controller.signal }).then(
        (c) => c,
        (e: unknown) => e,
      );
      await microtasks();
      clock.advance(10);
      const outcome = await request;
      abortOnCheckOut.unsubscribe();
      expect(outcome, 'the caller receives the connection the events say it checked out').to.have.property('id', 1);
      expect(types().slice(-2)).to.deep.equal(['ConnectionReady', 'ConnectionCheckedOut']);
      expect(pool.snapshot().inUseConnectionCount).to.equal(1);
    });

    it('the Observable form, aborted the same way, also receives its connection', function () {
      const { pool, clock } = makePool({ maxPoolSize: 1 });
      pool.ready();
      const controller = new AbortController();
      pool.events$.subscribe((e) => {
        if (e.type === 'ConnectionCheckedOut') controller.abort();
      });
      let got: MockConnection | undefined;
      let error: unknown;
      pool.checkOut({ signal: controller.signal }).subscribe({ next: (c) => (got = c), error: (e) => (error = e) });
      clock.advance(10);
      expect(error).to.equal(undefined);
      expect(got?.id).to.equal(1);
    });
  });

  describe('withConnection$ unsubscribed while its request is in flight', function () {
    it('closes a busy connection instead of returning it, and returns an idle one', function () {
      const { pool, clock, events } = makePool({ maxPoolSize: 1 });
      pool.ready();
      // fn leaves a request in flight (busy) and never completes: a timeout() upstream unsubscribes it.
      const busy = pool
        .withConnection$((c) => {
          c.busy = true;
          return new Observable<never>(() => undefined);
        })
        .subscribe();
      clock.advance(10);
      busy.unsubscribe();
      expect(events.at(-1)).to.include({ type: 'ConnectionClosed', connectionId: 1, reason: 'error' });
      expect(pool.snapshot().totalConnectionCount).to.equal(0);
      // Not busy when unsubscribed (its request had settled): the connection goes back.
      const idle = pool.withConnection$(() => new Observable<never>(() => undefined)).subscribe();
      clock.advance(10);
      idle.unsubscribe();
      expect(pool.snapshot()).to.include({ totalConnectionCount: 1, availableConnectionCount: 1 });
    });

    it('closes the connection of an async scope still running, busy or not, and returns it once the scope has settled', async function () {
      const { pool, clock, events } = makePool({ maxPoolSize: 1 });
      pool.ready();
      // Between two awaited commands: nothing in flight (busy false), but the scope will send its next command.
      let next!: () => void;
      const used: MockConnection[] = [];
      const running = pool
        .withConnection$(async (c) => {
          c.busy = false;
          await new Promise<void>((resolve) => (next = resolve));
          used.push(c);
        })
        .subscribe();
      clock.advance(10);
      running.unsubscribe();
      expect(events.at(-1)).to.include({ type: 'ConnectionClosed', connectionId: 1, reason: 'error' });
      let other!: MockConnection;
      pool.checkOut().subscribe((c) => (other = c));
      clock.advance(10);
      expect(other.id, 'the next borrower gets another connection').to.equal(2);
      next();
      await new Promise((resolve) => setImmediate(resolve));
      expect(used[0]?.id).to.equal(1);
      pool.checkIn(other);
      // A scope whose Promise has settled before the unsubscription (firstValueFrom unsubscribes on the value, before
      // completion): the connection goes back.
      const value = firstValueFrom(pool.withConnection$(async (c) => ((c.busy = false), c.id)));
      clock.advance(10);
      expect(await value).to.equal(2);
      expect(pool.snapshot()).to.include({ totalConnectionCount: 1, availableConnectionCount: 1 });
    });

    it('calls the then of a scope\'s thenable once, so work that a lazy thenable starts there runs once', async function () {
      const { pool, clock, events } = makePool({ maxPoolSize: 1 });
      pool.ready();
      // A lazy thenable (as a query builder is): each then sends its command again.
      const sent: number[] = [];
      const lazy = (c: MockConnection): PromiseLike<number> => ({
        then(onfulfilled, onrejected) {
          sent.push(c.id);
          return Promise.resolve(c.id).then(onfulfilled, onrejected);
        },
      });
      const value = firstValueFrom(pool.withConnection$((c) => lazy(c)));
      clock.advance(10);
      expect(await value).to.equal(1);
      expect(sent, 'the command went out once').to.deep.equal([1]);
      // A thenable whose then throws fails the scope with that error; nothing ran, so the connection goes back.
      const broken = pool.withConnection$(() => ({ then: (): never => { throw new Error('no then'); } }) as PromiseLike<never>);
      const failure = await firstValueFrom(broken).then(undefined, (e: unknown) => e);
      expect(failure).to.have.property('message', 'no then');
      expect(events.filter((e) => e.type === 'ConnectionClosed')).to.deep.equal([]);
      expect(pool.snapshot()).to.include({ totalConnectionCount: 1, availableConnectionCount: 1 });
    });
  });

  describe('abandoned checkouts', function () {
    it('do not stay reachable behind a waiter that cannot be served (waitQueueTimeoutMS 0)', function () {
      const { pool } = makePool({ maxPoolSize: 1 });
      pool.ready();
      pool.checkOut().subscribe(); // holds the only connection (once established)
      pool.checkOut().subscribe(); // waits forever: nothing will be checked in
      const abandoned: WeakRef<object>[] = [];
      for (let i = 0; i < 5000; i++) {
        const controller = new AbortController();
        const request = pool.checkOut({ signal: controller.signal });
        request.then(undefined, () => undefined);
        controller.abort();
        const sub = pool.checkOut().subscribe();
        sub.unsubscribe();
        if (i % 500 === 0) abandoned.push(new WeakRef(request));
      }
      const queue = (pool as unknown as { poolState: { waitQueue: { length: number; buffer: { size: number } } } }).poolState.waitQueue;
      expect(queue.length, 'only the one real waiter').to.be.at.most(2);
      expect(queue.buffer.size, 'abandoned entries are compacted away').to.be.below(200);
    });
  });

  describe('ConnectionPoolCore construction', function () {
    it('rejects options that are not an object, or that lack a connectionFactory, naming the option', function () {
      const cases: [unknown, string, string][] = [
        [null, 'options', 'Invalid options: null (options must be an object with at least an address and a connectionFactory)'],
        ['db:27017', 'options', 'Invalid options: "db:27017" (options must be an object with at least an address and a connectionFactory)'],
        [{ address: 'db:27017' }, 'connectionFactory', 'Invalid connectionFactory: undefined (connectionFactory must be a function (descriptor) => ObservableInput<connection>)'],
        [{ address: 'db:27017', connectionFactory: 'tcp' }, 'connectionFactory', 'Invalid connectionFactory: "tcp" (connectionFactory must be a function (descriptor) => ObservableInput<connection>)'],
        [{ address: 'db:27017', connectionFactory: () => EMPTY, maxPoolsize: 5 }, 'maxPoolsize', 'Unknown option maxPoolsize of ConnectionPoolCore: did you mean maxPoolSize?'],
        [{ address: 'db:27017', connectionFactory: () => EMPTY, scheduler: [] }, 'scheduler', 'Invalid scheduler: [] (scheduler must be an RxJS SchedulerLike (an object with now() and schedule() functions))'],
        [{ address: 'db:27017', connectionFactory: () => EMPTY, loadBalanced: 'true' }, 'loadBalanced', 'Invalid loadBalanced: "true" (loadBalanced must be true or false (a boolean))'],
      ];
      for (const [given, option, message] of cases) {
        let error: unknown;
        try {
          new ConnectionPoolCore(given as never);
        } catch (e) {
          error = e;
        }
        expect(error, JSON.stringify(given)).to.be.instanceOf(InvalidOptionError);
        expect((error as InvalidOptionError).option).to.equal(option);
        expect((error as Error).message).to.equal(message);
      }
    });
  });

  describe('bad arguments to clear() and checkOut()', function () {
    it('are InvalidOptionErrors that name the argument, thrown at the call, with nothing sent into the pool', function () {
      const { pool, events } = makePool();
      pool.ready();
      const before = events.length;
      const cases: [() => unknown, string, RegExp][] = [
        [() => pool.clear(null as never), 'clear options', /Invalid clear options: null \(clear options must be an object/],
        [() => pool.clear('all' as never), 'clear options', /Invalid clear options: "all"/],
        [() => pool.clear({ serviceId: 5 } as never), 'serviceId', /Invalid serviceId: 5 \(serviceId must be an ObjectId or its hex string\)/],
        [() => pool.clear({ serviceId: {} } as never), 'serviceId', /Invalid serviceId/],
        [() => pool.clear({ interruptInUseConnections: 'yes' } as never), 'interruptInUseConnections', /must be true or false/],
        [() => pool.input.next({ type: 'clear', serviceId: 5 } as never), 'serviceId', /Invalid serviceId: 5/],
        [() => pool.checkOut({ signal: 'x' } as never), 'signal', /Invalid signal: "x" \(signal must be an AbortSignal/],
        [() => pool.checkOut({ signal: { aborted: false } } as never), 'signal', /Invalid signal/],
        // One whose `aborted` throws as it is read (a value that is not an Error): refused at the call likewise.
        [() => pool.checkOut({ signal: { get aborted() { throw 'torn down'; }, addEventListener: noop, removeEventListener: noop } } as never), 'signal', /^Invalid signal: reading it as an AbortSignal threw \(torn down\); signal must be an AbortSignal/],
        [() => pool.warmUp({ signal: { get aborted() { throw 'torn down'; }, addEventListener: noop, removeEventListener: noop } } as never), 'signal', /^Invalid signal: reading it as an AbortSignal threw \(torn down\)/],
        // An AbortSignal by its shape needs all of: an object, a boolean `aborted`, addEventListener, removeEventListener.
        [() => pool.checkOut({ signal: { aborted: 'no', addEventListener: noop, removeEventListener: noop } } as never), 'signal', /Invalid signal/],
        [() => pool.checkOut({ signal: { aborted: false, removeEventListener: noop } } as never), 'signal', /Invalid signal/],
        [() => pool.checkOut({ signal: { aborted: false, addEventListener: noop } } as never), 'signal', /Invalid signal/],
        [() => pool.checkOut({ signal: Object.assign(() => undefined, { aborted: false, addEventListener: noop, removeEventListener: noop }) } as never), 'signal', /Invalid signal/],
        [() => pool.checkOut(null as never), 'checkOut options', /Invalid checkOut options: null \(checkOut options must be an object \{ signal\?, priority\?, timeoutMS\?, purpose\? \}, or nothing\)/],
        [() => pool.checkOut(5 as never), 'checkOut options', /Invalid checkOut options: 5/],
        [() => pool.checkOut({ timeoutMs: 5 } as never), 'timeoutMs', /Unknown option timeoutMs of checkOut: did you mean timeoutMS\?/],
        [() => pool.checkOut({ priority: 'urgent' } as never), 'priority', /Invalid priority: "urgent" \(priority must be 'high' or 'normal'\)/],
        [() => pool.checkOut({ timeoutMS: -1 }), 'timeoutMS', /Invalid timeoutMS: -1 \(timeoutMS must be a number of ms >= 0 \(0 means none\)\)/],
        [() => pool.drain({ timeoutMS: -1 }), 'timeoutMS', /Invalid timeoutMS: -1 \(timeoutMS must be a number of ms >= 0 \(0 means no deadline\)\)/],
        // A misspelt option is refused, never dropped (a drain whose deadline was dropped would wait for ever).
        [() => pool.drain({ timeoutMs: 20 } as never), 'timeoutMs', /Unknown option timeoutMs of drain: did you mean timeoutMS\?/],
        [() => pool.drain(5 as never), 'drain options', /Invalid drain options: 5 \(drain options must be an object \{ timeoutMS\? \}, or nothing\)/],
        [() => pool.clear({ interruptInUseConection: true } as never), 'interruptInUseConection', /Unknown option interruptInUseConection of clear: did you mean interruptInUseConnections\?/],
        [() => pool.clear({ serviceID: 'x' } as never), 'serviceID', /Unknown option serviceID of clear: did you mean serviceId\?/],
        [() => pool.input.next({ type: 'clear', causes: 'x' } as never), 'causes', /Unknown option causes of clear: did you mean cause\?/],
        [() => pool.warmUp({ singal: AbortSignal.timeout(1) } as never), 'singal', /Unknown option singal of warmUp: did you mean signal\?/],
        [() => pool.warmUp(5 as never), 'warmUp options', /Invalid warmUp options: 5 \(warmUp options must be an object \{ signal\? \}, or nothing\)/],
        // The scope function is checked before anything is checked out.
        [() => pool.withConnection(5 as never), 'withConnection fn', /Invalid withConnection fn: 5 \(withConnection fn must be a function that takes the connection\)/],
        [() => pool.withConnection$(null as never), 'withConnection$ fn', /Invalid withConnection\$ fn: null/],
      ];
      for (const [call, option, message] of cases) {
        let error: unknown;
        try {
          call();
        } catch (e) {
          error = e;
        }
        expect(error, String(call)).to.be.instanceOf(InvalidOptionError);
        expect((error as InvalidOptionError).option, String(call)).to.equal(option);
        expect((error as Error).message, String(call)).to.match(message);
      }
      expect(events.slice(before), 'no clear, no checkout').to.deep.equal([]);
      expect(pool.state).to.equal('ready');
      // A signal of another implementation (a polyfill, another realm) is an AbortSignal by its shape, and cancels.
      class ForeignSignal extends EventTarget {
        aborted = false;
        reason: unknown = undefined;
        abort(): void {
          this.aborted = true;
          this.reason = new Error('polyfilled abort');
          this.dispatchEvent(new Event('abort'));
        }
      }
      const foreign = new ForeignSignal();
      const held = Array.from({ length: pool.options.maxPoolSize }, () => pool.checkOut().subscribe());
      let failed: unknown;
      pool.checkOut({ signal: foreign as unknown as AbortSignal }).subscribe({ error: (e) => (failed = e) });
      foreign.abort();
      expect(failed).to.be.instanceOf(CheckOutCancelledError).and.have.nested.property('cause.message', 'polyfilled abort');
      for (const h of held) h.unsubscribe();
      // Options without a signal are fine, as is no options object at all.
      for (const request of [pool.checkOut({}), pool.checkOut({ signal: undefined }), pool.checkOut()]) request.subscribe((c) => pool.checkIn(c));
      expect(events.filter((e) => e.type === 'ConnectionCheckOutStarted')).to.have.length(3 + pool.options.maxPoolSize + 1);
    });
  });

  describe('events$ subscribers', function () {
    it('one subscriber leaving does not stop the events of another', function () {
      const { pool, sub: first } = makePool();
      const seen: string[] = [];
      const second = pool.events$.subscribe((e) => seen.push(e.type));
      first.unsubscribe();
      pool.ready();
      expect(seen).to.deep.equal(['ConnectionPoolCreated', 'ConnectionPoolReady']);
      second.unsubscribe();
    });

    it('a subscriber that acts on the pool from its first callback receives the events it caused, after ConnectionPoolCreated', function () {
      for (const earlier of [false, true]) {
        const clock = new VirtualClock();
        const mock = new MockConnectionFactory({ scheduler: clock, establishDelayMS: 10 });
        const pool = new ConnectionPoolCore<MockConnection>({ address: 'db:27017', scheduler: clock, connectionFactory: mock.factory });
        const before: string[] = [];
        if (earlier) pool.events$.subscribe((e) => before.push(e.type));
        const seen: string[] = [];
        pool.events$.subscribe((e) => {
          seen.push(e.type);
          if (e.type !== 'ConnectionPoolCreated') return;
          pool.ready();
          pool.checkOut().subscribe({ error: noop });
          pool.close();
        });
        const expected = [
          'ConnectionPoolCreated',
          'ConnectionPoolReady',
          'ConnectionCheckOutStarted',
          'ConnectionCreated',
          'ConnectionClosed',
          'ConnectionPoolClosed',
          'ConnectionCheckOutFailed',
        ];
        expect(seen, `with an earlier subscriber: ${earlier}`).to.deep.equal(expected);
        if (earlier) expect(before).to.deep.equal(expected);
        clock.advance(10);
        expect(seen).to.have.length(expected.length);
      }
    });

    it('a checkout started while nobody subscribed is untimed: its ConnectionCheckedOut reports no duration', function () {
      // Events (and their timings) are built only while someone subscribes: before the first subscriber, and again
      // after the last one left.
      for (const subscribeFirst of [false, true]) {
        const clock = new VirtualClock();
        const mock = new MockConnectionFactory({ scheduler: clock, establishDelayMS: 10 });
        const pool = new ConnectionPoolCore<MockConnection>({ address: 'db:27017', scheduler: clock, connectionFactory: mock.factory });
        if (subscribeFirst) {
          const a = pool.events$.subscribe();
          const b = pool.events$.subscribe();
          a.unsubscribe();
          b.unsubscribe();
        }
        pool.ready();
        pool.checkOut().subscribe(); // t = 0, unobserved
        clock.advance(5);
        const events: ConnectionPoolEvent[] = [];
        pool.events$.subscribe((e) => events.push(e));
        clock.advance(5);
        expect(events.map((e) => e.type), `subscribeFirst ${subscribeFirst}`).to.deep.equal(['ConnectionPoolCreated', 'ConnectionReady', 'ConnectionCheckedOut']);
        expect(events[1]).to.include({ duration: 10 }); // from ConnectionCreated, which is always timed
        expect(events[2]).to.include({ duration: undefined });
        // The same for a failure: a checkout that started unobserved and is then failed by a clear.
        pool.checkOut().subscribe({ error: noop }); // t = 10, observed: timed
        const unobserved = new ConnectionPoolCore<MockConnection>({ address: 'db:27017', scheduler: clock, connectionFactory: mock.factory, maxPoolSize: 1 });
        unobserved.ready();
        unobserved.checkOut().subscribe({ error: noop }); // waits for its establishment, unobserved
        unobserved.checkOut().subscribe({ error: noop }); // waits in the WaitQueue, unobserved
        const failed: ConnectionPoolEvent[] = [];
        unobserved.events$.subscribe((e) => failed.push(e));
        clock.advance(7);
        unobserved.clear();
        const outcomes = failed.filter((e) => e.type === 'ConnectionCheckOutFailed');
        expect(outcomes).to.have.length(2);
        for (const e of outcomes) expect(e).to.include({ reason: 'connectionError', duration: undefined });
      }
    });
  });

  describe('input errors', function () {
    it('reports an error of a stream subscribed into input as unhandled, and the pool goes on', function () {
      const { pool } = makePool();
      const reported: unknown[] = [];
      const saved = config.onUnhandledError;
      config.onUnhandledError = (e) => reported.push(e);
      const failure = new Error('monitor stream failed');
      try {
        const actions = new Subject<PoolInputAction>();
        actions.subscribe(pool.input);
        actions.error(failure);
      } finally {
        config.onUnhandledError = saved;
      }
      expect(reported).to.deep.equal([failure]);
      pool.ready();
      expect(pool.state).to.equal('ready');
    });

    it('rejects a null or unknown input action with an InvalidOptionError that says what is accepted', function () {
      const { pool } = makePool();
      const accepted = "input action must be { type: 'ready' }, { type: 'clear', ...ClearOptions } or { type: 'close' })";
      expect(() => pool.input.next(null as never)).to.throw(InvalidOptionError, `Invalid input action: null (${accepted}`);
      expect(() => pool.input.next({ type: 'explode' } as never)).to.throw(InvalidOptionError, accepted);
    });
  });

  describe('scoped checkouts and connections that do not say whether they are busy', function () {
    /** A connection without `busy`: the pool must treat it as busy only when its work was abandoned. */
    class Plain implements PoolConnection {
      busy?: boolean;
      destroyed = false;
      destroyError: Error | undefined;
      constructor(readonly id: number) {}
      destroy(error?: Error): void {
        if (this.destroyed) return; // idempotent, as the contract asks
        this.destroyed = true;
        this.destroyError = error;
      }
    }
    function plainPool() {
      const clock = new VirtualClock();
      const made: Plain[] = [];
      const pool = new ConnectionPoolCore<Plain>({
        address: 'db:27017',
        maxPoolSize: 1,
        scheduler: clock,
        connectionFactory: (d) => of(new Plain(d.id)).pipe(tap((c) => made.push(c))),
      });
      const events: ConnectionPoolEvent[] = [];
      pool.events$.subscribe((e) => events.push(e));
      pool.ready();
      return { pool, clock, made, events };
    }

    it('withConnection returns the connection once fn has finished', async function () {
      const { pool, made } = plainPool();
      expect(await pool.withConnection((c) => c.id)).to.equal(1);
      expect(await pool.withConnection((c) => c.id), 'the same connection again').to.equal(1);
      expect(made).to.have.length(1);
      expect(made[0].destroyed).to.equal(false);
      expect(pool.snapshot()).to.include({ availableConnectionCount: 1, inUseConnectionCount: 0 });
    });

    it('withConnection closes a connection that is still busy when fn has finished', async function () {
      const { pool, made, events } = plainPool();
      await pool.withConnection((c) => {
        c.busy = true; // fn returned with a request still in flight
      });
      expect(made[0].destroyError).to.be.instanceOf(MongoNetworkError);
      expect(made[0].destroyError?.message).to.equal('Connection 1 to db:27017 closed: its scoped checkout ended while a request was in flight');
      expect(events.at(-1)).to.include({ type: 'ConnectionClosed', connectionId: 1, reason: 'error' });
      expect(pool.snapshot().totalConnectionCount).to.equal(0);
    });

    it('withConnection$ returns it when the inner Observable completes or errors, and closes it when unsubscribed first', function () {
      const { pool, clock, made, events } = plainPool();
      pool.withConnection$((c) => of(c.id)).subscribe();
      pool.withConnection$(() => throwError(() => new Error('inner'))).subscribe({ error: () => undefined });
      expect(made).to.have.length(1);
      expect(made[0].destroyed).to.equal(false);
      expect(pool.snapshot()).to.include({ availableConnectionCount: 1, inUseConnectionCount: 0 });
      const abandoned = pool.withConnection$(() => of(1).pipe(rxDelay(100, clock))).subscribe();
      abandoned.unsubscribe(); // (a timeout() upstream, say): not known to be idle
      expect(made[0].destroyed).to.equal(true);
      expect(events.at(-1)).to.include({ type: 'ConnectionClosed', connectionId: 1, reason: 'error' });
      expect(pool.snapshot().totalConnectionCount).to.equal(0);
    });

    it('checkIn closes a connection that says it is busy, and makes one that does not say available', async function () {
      const { pool, made, events } = plainPool();
      const first = await pool.checkOut();
      pool.checkIn(first); // says nothing: its holder checked it in, so its work is taken as done
      expect(first.destroyed).to.equal(false);
      expect(pool.snapshot()).to.include({ availableConnectionCount: 1, inUseConnectionCount: 0 });
      const again = await pool.checkOut();
      expect(again).to.equal(first);
      again.busy = true; // checked in with a request in flight
      pool.checkIn(again);
      expect(made[0].destroyError).to.be.instanceOf(MongoNetworkError);
      expect(made[0].destroyError?.message).to.equal('Connection 1 to db:27017 closed: it was checked in while a request was in flight');
      expect(events.slice(-2).map((e) => [e.type, 'reason' in e ? e.reason : undefined])).to.deep.equal([
        ['ConnectionCheckedIn', undefined],
        ['ConnectionClosed', 'error'],
      ]);
      expect(pool.snapshot().totalConnectionCount).to.equal(0);
      expect((await pool.checkOut()).id, 'the next borrower gets a new connection').to.equal(2);
    });

    it('a busy connection checked in after a clear or close is closed stale or poolClosed, with no error on the event', async function () {
      const { pool, events } = plainPool();
      const stale = await pool.checkOut();
      pool.clear();
      stale.busy = true;
      pool.checkIn(stale);
      pool.ready();
      const late = await pool.checkOut();
      pool.close();
      late.busy = true;
      pool.checkIn(late);
      expect(stale.destroyError?.message).to.match(/checked in while a request was in flight/);
      expect(late.destroyError?.message).to.match(/checked in while a request was in flight/);
      const closed = events.filter((e) => e.type === 'ConnectionClosed');
      expect(closed.map((e) => ({ ...e, time: 0 }))).to.deep.equal([
        { type: 'ConnectionClosed', address: 'db:27017', time: 0, connectionId: 1, reason: 'stale' },
        { type: 'ConnectionClosed', address: 'db:27017', time: 0, connectionId: 2, reason: 'poolClosed' },
      ]);
    });

    it('a duplicate checkIn queued behind the one that counts never tears down the connection, even one busy by then', async function () {
      const { pool, made, events } = plainPool();
      let holder: Plain | undefined = await pool.checkOut();
      pool.events$.subscribe((e) => {
        if (e.type !== 'ConnectionCheckOutStarted' || holder === undefined) return;
        const c = holder;
        holder = undefined;
        pool.checkIn(c); // inside the pool's processing: queued, and it counts (idle: the next waiter gets it)
        c.busy = true; // a request sent on it after its check-in (or a busy getter that changed its answer)
        pool.checkIn(c); // queued behind the first: ignored, so it must change nothing
      });
      const next = await pool.checkOut();
      expect(next).to.equal(made[0]);
      expect(next.destroyed, 'the connection the waiter holds is not torn down').to.equal(false);
      expect(events.slice(-2).map((e) => e.type)).to.deep.equal(['ConnectionCheckedIn', 'ConnectionCheckedOut']);
      expect(pool.snapshot()).to.include({ totalConnectionCount: 1, inUseConnectionCount: 1 });
    });

    it('withConnection never tears down the connection another caller checked out after fn checked it in', async function () {
      const { pool, clock } = makePool({ maxPoolSize: 1 });
      pool.ready();
      let other: MockConnection | undefined;
      const scoped = pool.withConnection(async (c) => {
        pool.checkIn(c);
        other = await pool.checkOut();
        other.busy = true; // the other caller's request is in flight when fn ends
      });
      await microtasks();
      clock.advance(10);
      await scoped;
      expect(other?.id).to.equal(1);
      expect(other?.destroyed).to.equal(false);
      expect(pool.snapshot().inUseConnectionCount).to.equal(1);
    });
  });

  describe('state$ publishes a change of any single count', function () {
    const counts = (s: PoolSnapshot) => [s.state, s.generation, s.totalConnectionCount, s.availableConnectionCount, s.pendingConnectionCount, s.inUseConnectionCount, s.waitQueueLength];

    it('the generation alone (a clear of a paused pool)', function () {
      const { pool } = makePool();
      const seen: PoolSnapshot[] = [];
      pool.state$.subscribe((s) => seen.push(s));
      pool.clear();
      expect(seen.map(counts)).to.deep.equal([
        ['paused', 0, 0, 0, 0, 0, 0],
        ['paused', 1, 0, 0, 0, 0, 0],
      ]);
    });

    it('the available count alone (a check-in nobody waits for)', function () {
      const { pool, clock } = makePool();
      pool.ready();
      let held: MockConnection | undefined;
      pool.checkOut().subscribe((c) => (held = c));
      clock.advance(10);
      const seen: PoolSnapshot[] = [];
      pool.state$.subscribe((s) => seen.push(s));
      pool.checkIn(held!);
      expect(seen.map(counts)).to.deep.equal([
        ['ready', 0, 1, 0, 0, 1, 0],
        ['ready', 0, 1, 1, 0, 0, 0],
      ]);
    });

    it('the pending count alone (an establishment delivered to a caller that checks out again at once)', function () {
      const { pool, clock } = makePool({ maxPoolSize: 1 });
      pool.ready();
      pool.checkOut().subscribe(() => pool.checkOut().subscribe()); // the second waits: the pool is full
      const seen: PoolSnapshot[] = [];
      pool.state$.subscribe((s) => seen.push(s));
      clock.advance(10);
      expect(seen.map(counts)).to.deep.equal([
        ['ready', 0, 1, 0, 1, 0, 1],
        ['ready', 0, 1, 0, 0, 1, 1],
      ]);
    });

    it('load-balanced: a service generation alone, and nothing for a batch that changed nothing', function () {
      const A = 'aaaaaaaaaaaaaaaaaaaaaaaa';
      const B = 'bbbbbbbbbbbbbbbbbbbbbbbb';
      const { pool, clock } = makePool({ loadBalanced: true }, { serviceIdOf: (d) => (d.id === 1 ? A : B) });
      pool.ready();
      pool.checkOut().subscribe();
      pool.checkOut().subscribe();
      clock.advance(10);
      const seen: PoolSnapshot[] = [];
      pool.state$.subscribe((s) => seen.push(s));
      pool.ready(); // no-op
      pool.clear({ serviceId: B });
      pool.ready();
      expect(seen.map((s) => s.serviceGenerations.map((g) => [g.serviceId, g.generation, g.connectionCount]))).to.deep.equal([
        [
          [A, 0, 1],
          [B, 0, 1],
        ],
        [
          [A, 0, 1],
          [B, 1, 1],
        ],
      ]);
    });
  });

  describe('serviceGeneration()', function () {
    it('refuses with an InvalidOptionError (serviceId) a value that names no service: null, an object without toHexString(), a number, a short hex string', function () {
      const { pool } = makePool({ loadBalanced: true });
      for (const given of [null, {}, { toHexString: 'aaaaaaaaaaaaaaaaaaaaaaaa' }, 7, 'abc', undefined]) {
        expect(() => pool.serviceGeneration(given as never), String(given)).to.throw(InvalidOptionError, /serviceId/);
      }
      expect(() => pool.serviceGeneration('abc'), 'what is allowed').to.throw(InvalidOptionError, /^Invalid serviceId: "abc" \(serviceId must be an ObjectId, its 24-character hex string, or '' /);
      expect(() => pool.clear({ serviceId: 'abc' }), 'as clear() says it').to.throw(InvalidOptionError, /serviceId must be an ObjectId, its 24-character hex string, or '' /);
      expect(pool.serviceGeneration({ toHexString: () => 'AAAAAAAAAAAAAAAAAAAAAAAA' }), 'an ObjectId the pool counts no connection of').to.equal(0);
    });
  });

  describe('connections and causes from user code that throw', function () {
    /** A connection whose answers are scripted: each getter throws while its `throws` flag is set. */
    class Hostile implements PoolConnection {
      destroyed = 0;
      throws = { errored: false, busy: false, serviceId: false, destroy: false };
      busyValue: boolean | undefined = false;
      constructor(readonly id: number) {}
      get errored(): boolean {
        if (this.throws.errored) throw new Error('errored getter failed');
        return this.destroyed > 0;
      }
      get busy(): boolean | undefined {
        if (this.throws.busy) throw new Error('busy getter failed');
        return this.busyValue;
      }
      get serviceId(): string {
        if (this.throws.serviceId) throw new Error('serviceId getter failed');
        return 'aaaaaaaaaaaaaaaaaaaaaaaa';
      }
      destroy(): void {
        this.destroyed++;
        if (this.throws.destroy) throw new Error('destroy failed');
      }
    }
    function hostilePool(script: (c: Hostile) => void, options: { loadBalanced?: boolean } = {}) {
      const made: Hostile[] = [];
      const pool = new ConnectionPoolCore<Hostile>({
        address: 'db:27017',
        maxPoolSize: 1,
        scheduler: new VirtualClock(),
        connectionFactory: (d) => {
          const c = new Hostile(d.id);
          script(c);
          made.push(c);
          return of(c);
        },
        ...options,
      });
      const events: ConnectionPoolEvent[] = [];
      pool.events$.subscribe((e) => events.push(e));
      pool.ready();
      return { pool, made, events };
    }
    /** The pool still works: a checkout is served and checked in, and close() closes every connection it made. */
    async function stillWorks(pool: ConnectionPoolCore<Hostile>, made: Hostile[], events: ConnectionPoolEvent[]): Promise<void> {
      for (const c of made) c.throws = { errored: false, busy: false, serviceId: false, destroy: false };
      const c = await pool.checkOut({ timeoutMS: 10 });
      pool.checkIn(c);
      pool.close();
      expect(pool.snapshot().totalConnectionCount, 'every connection closed').to.equal(0);
      expect(made.every((m) => m.destroyed > 0), 'every connection torn down').to.equal(true);
      const count = (type: string) => events.filter((e) => e.type === type).length;
      expect(count('ConnectionClosed')).to.equal(count('ConnectionCreated'));
      expect(count('ConnectionCheckedOut') + count('ConnectionCheckOutFailed')).to.equal(count('ConnectionCheckOutStarted'));
    }

    it('a connection whose errored cannot be read counts as errored: its establishment fails, and found available it is closed', async function () {
      const { pool, made, events } = hostilePool((c) => (c.throws.errored = c.id === 1));
      const failed = await pool.checkOut({ timeoutMS: 10 }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(failed).to.be.instanceOf(MongoNetworkError);
      expect((failed as Error).message).to.equal('connection 1 to db:27017 was errored when its establishment completed');
      // A network error during the establishment: the backpressure labels, so the pool is not cleared (CMAP).
      expect([...(failed as MongoNetworkError).errorLabels]).to.have.members(['SystemOverloadedError', 'RetryableError']);
      expect(events.map((e) => e.type)).to.not.include('ConnectionPoolCleared');
      expect(events.find((e) => e.type === 'ConnectionClosed')).to.include({ connectionId: 1, reason: 'error' });
      const first = await pool.checkOut({ timeoutMS: 10 });
      expect(first.id).to.equal(2);
      // Found among the available connections, it is closed too (CMAP: a perished connection is never handed out).
      pool.checkIn(first);
      first.throws.errored = true;
      const third = await pool.checkOut({ timeoutMS: 10 });
      expect(third.id).to.equal(3);
      expect(events.filter((e) => e.type === 'ConnectionClosed').at(-1)).to.include({ connectionId: 2, reason: 'error' });
      pool.checkIn(third);
      await stillWorks(pool, made, events);
    });

    it('a load-balanced connection whose serviceId cannot be read joins the service with no id, and is served', async function () {
      const { pool, made, events } = hostilePool((c) => (c.throws.serviceId = true), { loadBalanced: true });
      const c = await pool.checkOut({ timeoutMS: 10 });
      expect(pool.snapshot().serviceGenerations).to.deep.equal([{ serviceId: '', generation: 0, connectionCount: 1 }]);
      pool.checkIn(c);
      await stillWorks(pool, made, events);
    });

    it('withConnection and withConnection$ return fn\'s result and close the connection when its busy or destroy() throws', async function () {
      const { pool, made, events } = hostilePool((c) => {
        c.busyValue = true;
        c.throws.destroy = true;
      });
      expect(await pool.withConnection(async () => 'result')).to.equal('result');
      expect(made[0].destroyed).to.be.above(0);
      expect(events.at(-1)).to.include({ type: 'ConnectionClosed', connectionId: 1, reason: 'error' });
      const errors: unknown[] = [];
      const abandoned = pool.withConnection$(() => NEVER).subscribe({ error: (e) => errors.push(e) });
      await microtasks();
      made[1].throws.busy = true;
      abandoned.unsubscribe();
      expect(errors, 'unsubscribing reports nothing').to.deep.equal([]);
      expect(made[1].destroyed, "a busy that cannot be read counts as busy").to.be.above(0);
      expect(events.at(-1)).to.include({ type: 'ConnectionClosed', connectionId: 2, reason: 'error' });
      await stillWorks(pool, made, events);
    });

    it('a clear whose cause String() cannot convert fails the waiting checkout with the cause written out, and the pool goes on', async function () {
      for (const interruptInUseConnections of [false, true]) {
        const { pool, made, events } = hostilePool(() => undefined);
        const held = await pool.checkOut();
        const waiting = pool.checkOut().then(
          () => undefined,
          (e: unknown) => e,
        );
        await microtasks();
        const cause = Object.assign(Object.create(null) as object, { code: 6 });
        pool.clear({ cause, interruptInUseConnections });
        const error = (await waiting) as PoolClearedError;
        expect(error).to.be.instanceOf(PoolClearedError);
        expect(error.message).to.equal('Connection pool for db:27017 was cleared because another operation failed with: {"code":6}');
        expect(error.cause).to.equal(cause);
        expect(made[0].destroyed, `interruptInUseConnections ${interruptInUseConnections}`).to.equal(interruptInUseConnections ? 1 : 0);
        pool.ready();
        pool.checkIn(held); // an interrupted connection too: it is closed when checked in
        await stillWorks(pool, made, events);
      }
    });
  });

  describe('connections whose id stops answering once established', function () {
    /** A pool of one whose connections answer `id` until `unreadable` is set, then throw (or, with `moved`, lie). */
    function idPool(moved = false) {
      const control = { unreadable: false };
      const made: PoolConnection[] = [];
      const pool = new ConnectionPoolCore<PoolConnection>({
        address: 'db:27017',
        maxPoolSize: 1,
        scheduler: new VirtualClock(),
        backgroundThreadIntervalMS: -1,
        connectionFactory: (d) => {
          const c = {
            get id(): number {
              if (!control.unreadable) return d.id;
              if (moved) return d.id + 100;
              throw new Error('id getter failed');
            },
            destroy: () => undefined,
          };
          made.push(c);
          return of(c);
        },
      });
      pool.ready();
      return { pool, control, made };
    }

    it("a connection handed to a checkout that left is checked back in, instead of the pool's step throwing and closing the pool", function () {
      const reported: unknown[] = [];
      const previous = config.onUnhandledError;
      config.onUnhandledError = (e) => reported.push(e);
      try {
        const { pool, control } = idPool();
        let held: PoolConnection | undefined;
        pool.checkOut().subscribe((c) => (held = c));
        const waiting = pool.checkOut().subscribe(noop);
        // The waiting checkout leaves in the step that served it: the runner checks the connection back in for it.
        pool.events$.subscribe((e) => {
          if (e.type !== 'ConnectionCheckedOut') return;
          control.unreadable = true;
          waiting.unsubscribe();
        });
        pool.checkIn(held!);
        expect(reported).to.deep.equal([]);
        expect(pool.snapshot()).to.include({ state: 'ready', availableConnectionCount: 1, inUseConnectionCount: 0 });
      } finally {
        config.onUnhandledError = previous;
      }
    });

    for (const moved of [false, true]) {
      it(`checkIn and withConnection return a connection whose id ${moved ? 'changed' : 'cannot be read'} since its establishment`, async function () {
        const { pool, control } = idPool(moved);
        const c = await pool.checkOut();
        control.unreadable = true;
        pool.checkIn(c);
        expect(pool.snapshot()).to.include({ availableConnectionCount: 1, inUseConnectionCount: 0 });
        expect(await pool.withConnection(() => 'done')).to.equal('done');
        expect(pool.snapshot()).to.include({ availableConnectionCount: 1, inUseConnectionCount: 0 });
        expect(() => pool.checkIn(c)).to.throw(ConnectionCheckInError, /connection 1 .*: it is not checked out/);
        pool.close();
        expect(pool.snapshot().totalConnectionCount).to.equal(0);
      });
    }
  });

  describe('events$ subscribed from inside the pool\'s processing', function () {
    it('receives the events of the steps after it subscribed, not the rest of the step whose changes snapshot() already shows', function () {
      const { pool, clock } = makePool({ maxPoolSize: 2 });
      let seed: PoolSnapshot | undefined;
      const late: string[] = [];
      pool.events$.subscribe((e) => {
        if (e.type !== 'ConnectionPoolCleared' || seed !== undefined) return;
        seed = pool.snapshot(); // a monitor starting from the counts, then following the events
        pool.events$.subscribe((x) => late.push(x.type));
      });
      pool.ready();
      pool.checkOut().subscribe();
      clock.advance(10);
      for (let i = 0; i < 2; i++) pool.checkOut().subscribe({ error: () => undefined }); // one establishing, one waiting
      pool.clear(); // fails both in the step that emits ConnectionPoolCleared
      expect(seed!.waitQueueLength, 'the snapshot already shows the waiters gone').to.equal(0);
      expect(late, 'so their failures are not delivered to it again').to.deep.equal(['ConnectionPoolCreated']);
      pool.ready();
      expect(late).to.deep.equal(['ConnectionPoolCreated', 'ConnectionPoolReady']);
    });

    it('a subscriber made mid-step still receives the events of what it does from its first callback', function () {
      const { pool } = makePool();
      const late: string[] = [];
      pool.events$.subscribe((e) => {
        if (e.type === 'ConnectionPoolReady') {
          pool.events$.subscribe((x) => {
            late.push(x.type);
            if (x.type === 'ConnectionPoolCreated') pool.clear();
          });
        }
      });
      pool.ready();
      expect(late).to.deep.equal(['ConnectionPoolCreated', 'ConnectionPoolCleared']);
    });
    it('the first subscriber, made mid-step, receives the events of the steps already queued behind that step', function () {
      const { pool, clock, sub } = makePool({ maxPoolSize: 1 });
      sub.unsubscribe(); // nobody observes: no event is built
      pool.ready();
      pool.checkOut().subscribe();
      clock.advance(10);
      const late: string[] = [];
      pool.checkOut().subscribe({ error: () => pool.ready() }); // queues the ready behind the clear's step
      pool.checkOut().subscribe({ error: () => void pool.events$.subscribe((e) => late.push(e.type)) });
      pool.clear(); // fails both waiters in one step
      expect(pool.state, 'the ready was committed after the subscription').to.equal('ready');
      expect(late).to.deep.equal(['ConnectionPoolCreated', 'ConnectionPoolReady']);
    });

    it('a subscriber made mid-step and gone before the step ends is never listed, and the pool stops building events once the others go', function () {
      const { pool, sub } = makePool();
      const late: string[] = [];
      const outer = pool.events$.subscribe((e) => {
        if (e.type === 'ConnectionPoolReady') pool.events$.subscribe((x) => late.push(x.type)).unsubscribe();
      });
      pool.ready();
      outer.unsubscribe();
      sub.unsubscribe();
      const events = (pool as unknown as { events: { observed: boolean } }).events;
      expect(events.observed, 'no subscriber left listed').to.equal(false);
      expect(late).to.deep.equal(['ConnectionPoolCreated']);
    });
  });

  describe('state$ during a drain', function () {
    it('shows draining while new checkouts fail and the pool still says ready, and not once it is closed', async function () {
      const { pool, clock } = makePool({ maxPoolSize: 1 });
      const seen: string[] = [];
      pool.state$.subscribe((s) => seen.push(`${s.state} draining=${s.draining} inUse=${s.inUseConnectionCount}`));
      pool.ready();
      let held: MockConnection | undefined;
      pool.checkOut().subscribe((c) => (held = c));
      clock.advance(10);
      seen.length = 0;
      const drained = pool.drain();
      expect(seen, 'the drain alone changes no count').to.deep.equal(['ready draining=true inUse=1']);
      expect(pool.snapshot().draining).to.equal(true);
      pool.checkIn(held!);
      await drained;
      expect(seen.at(-1)).to.equal('closed draining=false inUse=0');
      expect(pool.snapshot().draining).to.equal(false);
    });
  });

  describe('state$ subscribed from inside the pool\'s processing', function () {
    it('subscribers already there still get the snapshot of the batch', function () {
      const { pool } = makePool();
      const seen: string[] = [];
      pool.state$.subscribe((s) => seen.push(s.state));
      const late: string[] = [];
      pool.events$.subscribe((e) => {
        if (e.type === 'ConnectionPoolReady') pool.state$.subscribe((s) => late.push(s.state));
      });
      pool.ready();
      pool.close();
      expect(seen).to.deep.equal(['paused', 'ready', 'closed']);
      expect(late, 'no snapshot twice').to.deep.equal(['ready', 'closed']);
    });

    it('a subscriber that changes the pool from its first snapshot receives the snapshot of that change', function () {
      const { pool } = makePool();
      const seen: string[] = [];
      pool.state$.subscribe((s) => {
        seen.push(s.state);
        if (seen.length === 1) pool.ready();
      });
      expect(seen).to.deep.equal(['paused', 'ready']);
      pool.close();
      expect(seen).to.deep.equal(['paused', 'ready', 'closed']);
    });

    it('reaches subscribers already there after the batch\'s events, not in the middle of them, when another subscribes on ConnectionPoolClosed', function () {
      const { pool, clock } = makePool({ maxPoolSize: 1 });
      pool.events$.subscribe((e) => {
        if (e.type === 'ConnectionPoolClosed') pool.state$.subscribe(); // as a recorder watching for the end does
      });
      expect(closeTimeline(pool, clock)).to.deep.equal(['ConnectionPoolClosed', 'ConnectionCheckOutFailed', 'state$ closed, waitQueueLength 0']);
    });

    it('a subscriber made in the middle of a batch starts from the pool as it is then, and receives the changes the rest of the batch makes, once', function () {
      const { pool, clock } = makePool({ maxPoolSize: 1 });
      pool.state$.subscribe();
      pool.ready();
      pool.checkOut().subscribe();
      clock.advance(10);
      pool.checkOut().subscribe({ error: () => undefined }); // waits
      const late: string[] = [];
      const subscription = new Subscription();
      pool.events$.subscribe((e) => {
        if (e.type !== 'ConnectionPoolCleared') return;
        subscription.add(pool.state$.subscribe((s) => late.push(`${s.state} ${s.waitQueueLength} ${s.generation}`)));
        pool.ready(); // queued behind this batch's events: a change the late subscriber must receive
      });
      pool.clear();
      expect(late).to.deep.equal(['paused 0 1', 'ready 0 1']);
      pool.close();
      expect(late).to.deep.equal(['paused 0 1', 'ready 0 1', 'closed 0 1']);
      subscription.unsubscribe();
    });

    it('a subscriber made mid-batch that leaves, before or after it joined, is no longer listed: the pool stops building snapshots once the others go', function () {
      const { pool } = makePool();
      const states = (pool as unknown as { states: { observed: boolean } }).states;
      const outer = pool.state$.subscribe();
      let joined: Subscription | undefined;
      const watcher = pool.events$.subscribe((e) => {
        if (e.type === 'ConnectionPoolReady') pool.state$.subscribe().unsubscribe(); // gone before the batch ends
        if (e.type === 'ConnectionPoolCleared') joined = pool.state$.subscribe(); // joins after the batch
      });
      pool.ready();
      pool.clear();
      expect(joined).to.not.equal(undefined);
      joined!.unsubscribe();
      outer.unsubscribe();
      watcher.unsubscribe();
      expect(states.observed, 'no state$ subscriber left listed').to.equal(false);
    });

    it('the last value of state$ is the closed pool when another subscribes on ConnectionPoolClosed', async function () {
      const { pool } = makePool();
      pool.ready();
      const last = lastValueFrom(pool.state$);
      pool.events$.subscribe((e) => {
        if (e.type === 'ConnectionPoolClosed') pool.state$.subscribe();
      });
      pool.close();
      expect((await last).state).to.equal('closed');
    });
  });

  describe('serialized by loggers and tracers', function () {
    // A diagnostics channel message carries the pool itself; an APM that logs the message with JSON.stringify or
    // util.inspect must get the pool's state, not a TypeError (a cycle) or every socket and waiter of the pool.
    it('writes the pool, and a message carrying it, as its snapshot in JSON and under util.inspect', async function () {
      const { pool, clock } = makePool({ maxPoolSize: 3 });
      pool.ready();
      const held: MockConnection[] = [];
      for (let i = 0; i < 3; i++) pool.checkOut().subscribe((c) => held.push(c));
      clock.advance(20);
      await microtasks();
      expect(held).to.have.length(3);
      const message = { address: pool.address, pool, connectionId: held[0].id };
      const json = JSON.parse(JSON.stringify(message)) as { pool: PoolSnapshot };
      expect(json.pool).to.deep.equal(JSON.parse(JSON.stringify(pool.snapshot())));
      expect(json.pool.inUseConnectionCount).to.equal(3);
      const deep = inspect(message, { depth: Infinity, showHidden: true });
      expect(deep).to.include('inUseConnectionCount: 3').and.not.include('poolState');
      expect(deep.length).to.be.below(2000);
      expect(inspect(pool)).to.match(/^ConnectionPool \{/);
      for (const c of held) pool.checkIn(c);
      pool.close();
    });

    it('names the pool by its kind, also once a minifying bundler has renamed the classes', function () {
      const core = new ConnectionPoolCore({ address: 'db:27017', connectionFactory: (d) => of(new MockConnection(d)) });
      const full = new ConnectionPool({ address: 'db:27017' });
      for (const name of MINIFIED_NAMES) {
        withClassesRenamed([ConnectionPoolCore, ConnectionPool], name, () => {
          expect(inspect(core), `classes named "${name}"`).to.match(/^ConnectionPoolCore \{\s+address: 'db:27017'/);
          expect(inspect(full), `classes named "${name}"`).to.match(/^ConnectionPool \{\s+address: 'db:27017'/);
          expect(Object.prototype.toString.call(full)).to.equal('[object ConnectionPool]');
        });
      }
      class ReportPool extends ConnectionPool {}
      const own = new ReportPool({ address: 'db:27017' });
      expect(inspect(own), 'a subclass of user code').to.match(/^ReportPool \{/);
      own.close();
      core.close();
      full.close();
    });
  });
});
