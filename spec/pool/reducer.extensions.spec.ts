/**
 * The pool's opt-in extensions of the WaitQueue, on virtual time: a bounded WaitQueue (`maxWaitQueueSize`),
 * high-priority checkouts (`priority: 'high'`), and a checkout's own deadline (`timeoutMS`).
 */
import { expect } from 'chai';
import { firstValueFrom, from } from 'rxjs';
import { ConnectionPool, ConnectionPoolCore, InvalidOptionError, MongoNetworkError, PoolClosedError, WaitQueueFullError, WaitQueueTimeoutError, type CheckOutOptions, type ConnectionPoolEvent } from '../../lib';
import { MockConnectionFactory, VirtualClock, type MockConnection } from '../../lib/testing';
import { startTestEndpoint } from '../support/endpoint';
import { microtasks } from '../support/microtasks';

function virtualPool(options: { maxPoolSize?: number; maxConnecting?: number; maxWaitQueueSize?: number; waitQueueTimeoutMS?: number; establishDelayMS?: number } = {}) {
  const clock = new VirtualClock();
  const mock = new MockConnectionFactory({ scheduler: clock, establishDelayMS: options.establishDelayMS ?? 10 });
  const { establishDelayMS: _, ...poolOptions } = options;
  const pool = new ConnectionPoolCore<MockConnection>({ address: 'db.example:27017', scheduler: clock, connectionFactory: mock.factory, maxPoolSize: 1, ...poolOptions });
  const events: ConnectionPoolEvent[] = [];
  pool.events$.subscribe((e) => events.push(e));
  pool.ready();
  return { pool, clock, events };
}

/** Starts a checkout that records, under `name`, what it ended with (in `order`). */
function track(pool: ConnectionPoolCore<MockConnection>, order: string[], name: string, options?: CheckOutOptions) {
  const outcome: { connection?: MockConnection; error?: unknown } = {};
  pool.checkOut(options).subscribe({
    next: (c) => {
      outcome.connection = c;
      order.push(name);
    },
    error: (e: unknown) => {
      outcome.error = e;
      order.push(`${name} failed`);
    },
  });
  return outcome;
}

describe('beyond CMAP: the WaitQueue and connection lifetime', function () {
  describe('maxWaitQueueSize', function () {
    it('fails a checkout at once when maxWaitQueueSize already wait, with WaitQueueFullError and reason waitQueueFull', async function () {
      const { pool, clock, events } = virtualPool({ maxWaitQueueSize: 2 });
      const order: string[] = [];
      const a = track(pool, order, 'a');
      clock.advance(10);
      track(pool, order, 'b');
      track(pool, order, 'c');
      const d = track(pool, order, 'd');
      expect(order).to.deep.equal(['a', 'd failed']);
      expect(d.error).to.be.instanceOf(WaitQueueFullError);
      expect(d.error).to.deep.include({ maxWaitQueueSize: 2, address: 'db.example:27017' });
      expect((d.error as WaitQueueFullError).pool).to.deep.include({ inUseConnectionCount: 1, waitQueueLength: 2 });
      expect((d.error as Error).message).to.equal('Connection pool for db.example:27017 refused a checkout: maxWaitQueueSize (2) checkouts are already waiting');
      const failed = events.filter((e) => e.type === 'ConnectionCheckOutFailed');
      expect(failed).to.have.length(1);
      expect(failed[0]).to.deep.include({ reason: 'waitQueueFull', error: d.error });
      // Room again once a waiter is served.
      pool.checkIn(a.connection!);
      track(pool, order, 'e');
      expect(order).to.deep.equal(['a', 'd failed', 'b']);
      expect(pool.snapshot().waitQueueLength).to.equal(2);
      await microtasks();
    });

    it('is unbounded by default', function () {
      const { pool, clock } = virtualPool();
      const order: string[] = [];
      track(pool, order, 'held');
      clock.advance(10);
      for (let i = 0; i < 1000; i++) track(pool, order, `w${i}`);
      expect(order).to.deep.equal(['held']);
      expect(pool.snapshot().waitQueueLength).to.equal(1000);
    });
  });

  describe("priority: 'high'", function () {
    it('serves high-priority checkouts before every normal one, FIFO within each priority', function () {
      const { pool, clock } = virtualPool();
      const order: string[] = [];
      const held = track(pool, order, 'held');
      clock.advance(10);
      track(pool, order, 'n1');
      track(pool, order, 'h1', { priority: 'high' });
      track(pool, order, 'n2', { priority: 'normal' });
      track(pool, order, 'h2', { priority: 'high' });
      // The one connection goes round: each check-in serves the next checkout in line.
      for (let i = 0; i < 4; i++) pool.checkIn(held.connection!);
      expect(order).to.deep.equal(['held', 'h1', 'h2', 'n1', 'n2']);
    });

    it('lets a high-priority checkout start the next establishment before older normal ones', function () {
      const { pool, clock } = virtualPool({ maxPoolSize: 3, maxConnecting: 1 });
      const order: string[] = [];
      track(pool, order, 'n1'); // starts the only establishment slot's first establishment
      track(pool, order, 'n2');
      track(pool, order, 'h1', { priority: 'high' });
      clock.advance(10); // n1's connection; the next establishment is started for h1
      clock.advance(10);
      clock.advance(10);
      expect(order).to.deep.equal(['n1', 'h1', 'n2']);
    });

    it('times out each priority at its own deadlines', async function () {
      const { pool, clock } = virtualPool({ waitQueueTimeoutMS: 100 });
      const order: string[] = [];
      track(pool, order, 'held');
      clock.advance(10);
      track(pool, order, 'n1'); // deadline 110
      clock.advance(50);
      track(pool, order, 'h1', { priority: 'high' }); // deadline 160
      clock.advance(50); // t=110: n1 is due although the high-priority head is not
      expect(order).to.deep.equal(['held', 'n1 failed']);
      clock.advance(50);
      expect(order).to.deep.equal(['held', 'n1 failed', 'h1 failed']);
    });
  });

  describe('timeoutMS (a checkout\'s own deadline)', function () {
    it('fails the checkout with WaitQueueTimeoutError (timeoutMS set) and reason timeout when it passes, in both forms', async function () {
      const { pool, clock, events } = virtualPool();
      const order: string[] = [];
      track(pool, order, 'held');
      clock.advance(10);
      const observable = track(pool, order, 'o', { timeoutMS: 30 });
      const promise = pool.checkOut({ timeoutMS: 40 }).then(undefined, (e: unknown) => e);
      clock.advance(29);
      expect(order).to.deep.equal(['held']);
      clock.advance(1);
      expect(order).to.deep.equal(['held', 'o failed']);
      expect(observable.error).to.be.instanceOf(WaitQueueTimeoutError);
      expect(observable.error).to.deep.include({ timeoutMS: 30, waitQueueTimeoutMS: 30 });
      expect((observable.error as WaitQueueTimeoutError).pool).to.deep.include({ inUseConnectionCount: 1, waitQueueLength: 2 });
      clock.advance(10);
      const error = await promise;
      expect(error).to.be.instanceOf(WaitQueueTimeoutError);
      expect(error).to.deep.include({ timeoutMS: 40 });
      const failed = events.filter((e) => e.type === 'ConnectionCheckOutFailed');
      expect(failed.map((e) => [e.type === 'ConnectionCheckOutFailed' && e.reason, e.type === 'ConnectionCheckOutFailed' && e.duration])).to.deep.equal([
        ['timeout', 30],
        ['timeout', 40],
      ]);
    });

    it('counts an establishment the checkout started, which goes on and serves the next checkout', async function () {
      const { pool, clock, events } = virtualPool({ establishDelayMS: 100 });
      const error = pool.checkOut({ timeoutMS: 50 }).then(undefined, (e: unknown) => e);
      clock.advance(50);
      expect(await error).to.be.instanceOf(WaitQueueTimeoutError);
      clock.advance(50);
      expect(events.map((e) => e.type).slice(2)).to.deep.equal(['ConnectionCheckOutStarted', 'ConnectionCreated', 'ConnectionCheckOutFailed', 'ConnectionReady']);
      expect(pool.snapshot().availableConnectionCount).to.equal(1);
      const next = firstValueFrom(pool.checkOut());
      expect((await next).id).to.equal(1);
    });

    it('leaves nothing behind once the checkout is served: no late failure', async function () {
      const { pool, clock, events } = virtualPool();
      const order: string[] = [];
      const first = track(pool, order, 'a', { timeoutMS: 1000 });
      const second = pool.checkOut({ timeoutMS: 1000 }).then((c) => c);
      clock.advance(10);
      pool.checkIn(first.connection!);
      const connection = await second;
      clock.advance(10_000);
      expect(order).to.deep.equal(['a']);
      expect(events.filter((e) => e.type === 'ConnectionCheckOutFailed')).to.deep.equal([]);
      pool.checkIn(connection);
    });
  });

  describe('maxLifeTimeMS (connection lifetime)', function () {
    function lifetimePool(
      options: { maxLifeTimeMS: number; maxLifeTimeJitterMS?: number; minPoolSize?: number; maxPoolSize?: number; backgroundThreadIntervalMS?: number },
      establishDelayMS = 10,
    ) {
      const clock = new VirtualClock();
      const mock = new MockConnectionFactory({ scheduler: clock, establishDelayMS });
      const pool = new ConnectionPoolCore<MockConnection>({ address: 'db.example:27017', scheduler: clock, connectionFactory: mock.factory, ...options });
      const events: ConnectionPoolEvent[] = [];
      pool.events$.subscribe((e) => events.push(e));
      pool.ready();
      return { pool, clock, events, mock };
    }
    const closed = (events: ConnectionPoolEvent[]) =>
      events.flatMap((e) => (e.type === 'ConnectionClosed' ? [[e.connectionId, e.reason, e.time]] : []));

    it('closes a connection that outlived its lifetime when it is checked in, and hands out a new one', async function () {
      const { pool, clock, events } = lifetimePool({ maxLifeTimeMS: 1000, maxLifeTimeJitterMS: 0 });
      const checkedOut = firstValueFrom(pool.checkOut());
      clock.advance(10);
      const first = await checkedOut;
      expect(first.id).to.equal(1);
      clock.advanceTo(995);
      pool.checkIn(first);
      const again = firstValueFrom(pool.checkOut());
      expect((await again).id, 'not expired yet (created at 0, lifetime to 1000)').to.equal(1);
      clock.advanceTo(1000);
      pool.checkIn(first);
      expect(closed(events)).to.deep.equal([[1, 'expired', 1000]]);
      const next = firstValueFrom(pool.checkOut());
      clock.advance(10);
      expect((await next).id).to.equal(2);
    });

    it('closes an expired available connection when a checkout meets it', async function () {
      const { pool, clock, events } = lifetimePool({ maxLifeTimeMS: 1000, maxLifeTimeJitterMS: 0, backgroundThreadIntervalMS: -1 });
      const first = firstValueFrom(pool.checkOut());
      clock.advance(10);
      pool.checkIn(await first);
      clock.advanceTo(1000);
      const next = firstValueFrom(pool.checkOut());
      clock.advance(10);
      expect((await next).id).to.equal(2);
      expect(closed(events)).to.deep.equal([[1, 'expired', 1000]]);
    });

    it('renews connections made together a few at a time, minPoolSize refilling, never emptying the pool', function () {
      const { clock, events, pool } = lifetimePool({ maxLifeTimeMS: 10_000, maxLifeTimeJitterMS: 1000, minPoolSize: 10, maxPoolSize: 10, backgroundThreadIntervalMS: 100 });
      let fewest = Infinity;
      for (let t = 10; t <= 35_000; t += 10) {
        clock.advanceTo(t);
        const s = pool.snapshot();
        if (t >= 100) fewest = Math.min(fewest, s.totalConnectionCount - s.pendingConnectionCount);
      }
      const expiries = closed(events);
      expect(expiries.length, 'every connection renewed three times').to.be.at.least(30);
      expect(expiries.every(([, reason]) => reason === 'expired')).to.equal(true);
      const perInstant = new Map<number, number>();
      for (const [, , time] of expiries) perInstant.set(time as number, (perInstant.get(time as number) ?? 0) + 1);
      expect(Math.max(...perInstant.values()), 'at most maxConnecting (2) closed by one run').to.be.at.most(2);
      expect(fewest, 'established connections never fell below 8').to.be.at.least(8);
      // Each closed within its own window: created + [9000, 10000], plus one run's wait.
      const createdAt = new Map(events.flatMap((e) => (e.type === 'ConnectionCreated' ? [[e.connectionId, e.time] as const] : [])));
      for (const [id, , time] of expiries) {
        const age = (time as number) - createdAt.get(id as number)!;
        expect(age, `connection ${id}`).to.be.within(9000, 10_000 + 300);
      }
    });

    it('a lifetime shorter than an establishment: minPoolSize is refilled by Background Thread Runs, never in a loop', function () {
      // Every connection is past its lifetime (10 ms) as it becomes ready (20 ms); nobody waits, so each is closed.
      const { pool, clock, events, mock } = lifetimePool({ minPoolSize: 1, maxLifeTimeMS: 10, backgroundThreadIntervalMS: 100 }, 20);
      clock.advance(1000);
      // One establishment at ready, then one per run (t = 100, 200, ..., 1000), as after failed establishments.
      expect(mock.started, 'establishments started in 1000 ms').to.have.length(11);
      expect(closed(events).every(([, reason]) => reason === 'expired')).to.equal(true);
      // A checkout still gets one (once: it is closed at its check-in).
      const held: MockConnection[] = [];
      pool.checkOut().subscribe((c) => held.push(c));
      clock.advance(20);
      expect(held).to.have.length(1);
      pool.checkIn(held[0]);
      expect(closed(events).at(-1)).to.deep.equal([held[0].id, 'expired', clock.now()]);
      pool.close();
    });

    it('spreads only expired connections over runs: one Background Thread Run closes every idle one (CMAP)', function () {
      const clock = new VirtualClock();
      const mock = new MockConnectionFactory({ scheduler: clock, establishDelayMS: 10 });
      const pool = new ConnectionPoolCore<MockConnection>({
        address: 'db.example:27017',
        scheduler: clock,
        connectionFactory: mock.factory,
        maxPoolSize: 5,
        maxConnecting: 2,
        maxIdleTimeMS: 100,
        maxLifeTimeMS: 60_000,
      });
      const events: ConnectionPoolEvent[] = [];
      pool.events$.subscribe((e) => events.push(e));
      pool.ready();
      const held: MockConnection[] = [];
      for (let i = 0; i < 5; i++) pool.checkOut().subscribe((c) => held.push(c));
      clock.advance(50);
      expect(held).to.have.length(5);
      for (const c of held) pool.checkIn(c);
      clock.advance(3000);
      const closed = events.flatMap((e) => (e.type === 'ConnectionClosed' ? [[e.reason, e.time]] : []));
      expect(closed.map(([reason]) => reason)).to.deep.equal(['idle', 'idle', 'idle', 'idle', 'idle']);
      expect(new Set(closed.map(([, time]) => time)).size, 'all in one run').to.equal(1);
    });

    it('defaults the jitter to 2.5% of the lifetime, and refuses a jitter above it', function () {
      expect(lifetimePool({ maxLifeTimeMS: 10_000 }).pool.options).to.include({ maxLifeTimeMS: 10_000, maxLifeTimeJitterMS: 250 });
      expect(() => lifetimePool({ maxLifeTimeMS: 1000, maxLifeTimeJitterMS: 2000 })).to.throw(InvalidOptionError, /maxLifeTimeJitterMS: 2000 \(maxLifeTimeJitterMS must be <= maxLifeTimeMS \(1000\)\)/);
      expect(() => lifetimePool({ maxLifeTimeMS: -5 })).to.throw(InvalidOptionError, /maxLifeTimeMS/);
    });
  });

  describe('drain()', function () {
    it('refuses new checkouts, serves the waiting ones with checked-in connections, then closes; resolves once closed', async function () {
      const { pool, clock, events } = virtualPool();
      const order: string[] = [];
      const a = track(pool, order, 'a');
      clock.advance(10);
      const b = track(pool, order, 'b');
      const before = events.length;
      let drained = false;
      const draining = pool.drain().then(() => (drained = true));
      const c = track(pool, order, 'c');
      expect(c.error).to.be.instanceOf(PoolClosedError);
      pool.checkIn(a.connection!);
      expect(order).to.deep.equal(['a', 'c failed', 'b']);
      await microtasks();
      expect(drained, 'b still holds its connection').to.equal(false);
      expect(pool.state).to.equal('ready');
      pool.checkIn(b.connection!);
      await draining;
      expect(pool.state).to.equal('closed');
      expect(events.slice(before).map((e) => (e.type === 'ConnectionCheckOutFailed' ? `${e.type}:${e.reason}` : e.type))).to.deep.equal([
        'ConnectionPoolDraining',
        'ConnectionCheckOutStarted',
        'ConnectionCheckOutFailed:poolClosed',
        'ConnectionCheckedIn',
        'ConnectionCheckedOut',
        'ConnectionCheckedIn',
        'ConnectionClosed',
        'ConnectionPoolClosed',
      ]);
    });

    it('interrupts in-use connections and closes when timeoutMS passes first', async function () {
      const { pool, clock, events } = virtualPool();
      const order: string[] = [];
      const a = track(pool, order, 'a');
      clock.advance(10);
      const b = track(pool, order, 'b');
      let drained = false;
      const draining = pool.drain({ timeoutMS: 100 }).then(() => (drained = true));
      clock.advance(99);
      await microtasks();
      expect(drained).to.equal(false);
      clock.advance(1);
      await draining;
      expect(a.connection!.destroyError).to.be.instanceOf(PoolClosedError);
      expect(b.error, 'still waiting at the deadline').to.be.instanceOf(PoolClosedError);
      expect(events.at(-1)!.type).to.equal('ConnectionCheckOutFailed');
      expect(events.some((e) => e.type === 'ConnectionPoolClosed')).to.equal(true);
      pool.checkIn(a.connection!);
      expect(pool.snapshot().totalConnectionCount).to.equal(0);
    });

    it('a second drain while draining changes nothing: one ConnectionPoolDraining, and both resolve when the pool closes', async function () {
      const { pool, clock, events } = virtualPool();
      const order: string[] = [];
      const a = track(pool, order, 'a');
      clock.advance(10);
      const settled: string[] = [];
      const first = pool.drain().then(() => settled.push('first'));
      const second = pool.drain().then(() => settled.push('second'));
      await microtasks();
      expect(settled).to.deep.equal([]);
      pool.checkIn(a.connection!);
      await Promise.all([first, second]);
      expect(settled).to.have.members(['first', 'second']);
      expect(events.filter((e) => e.type === 'ConnectionPoolDraining')).to.have.length(1);
      expect(events.filter((e) => e.type === 'ConnectionPoolClosed')).to.have.length(1);
    });

    it('closes an idle pool at once, resolves at once on a closed one, and refuses a bad timeoutMS', async function () {
      const { pool, events } = virtualPool();
      await pool.drain();
      expect(events.map((e) => e.type).slice(-2)).to.deep.equal(['ConnectionPoolDraining', 'ConnectionPoolClosed']);
      await pool.drain();
      expect(() => pool.drain({ timeoutMS: -1 })).to.throw(InvalidOptionError, /timeoutMS/);
    });

    it('lets requests in flight on the endpoint finish, refuses new ones, and leaves no socket open', async function () {
      this.timeout(20_000);
      const endpoint = await startTestEndpoint();
      const pool = new ConnectionPool({ address: endpoint.address, connectionOptions: endpoint.connectionOptions, maxPoolSize: 3 });
      try {
        pool.ready();
        const inFlight = Array.from({ length: 20 }, () => pool.withConnection((c) => c.command('admin', { ping: 1 })));
        await microtasks(); // every one has reached the pool, and waits for the connections being established
        expect(pool.snapshot().waitQueueLength).to.equal(20);
        const drained = pool.drain({ timeoutMS: 10_000 });
        const refused = await pool.withConnection((c) => c.command('admin', { ping: 1 })).catch((e: unknown) => e);
        expect(refused).to.be.instanceOf(PoolClosedError);
        for (const reply of await Promise.all(inFlight)) expect(reply).to.include({ ok: 1 });
        await drained;
        expect(pool.state).to.equal('closed');
        if (endpoint.embedded !== undefined) {
          const deadline = Date.now() + 2000;
          while (endpoint.embedded.openConnections > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
          expect(endpoint.embedded.openConnections).to.equal(0);
        }
      } finally {
        pool.close();
        await endpoint.stop();
      }
    });
  });

  describe('a connection that perished as it became ready', function () {
    it('fails its establishment when its socket ended before the pool took it: closed (reason error), its checkout fails once', async function () {
      const clock = new VirtualClock();
      let made = 0;
      const mock = new MockConnectionFactory({ scheduler: clock, establishDelayMS: 10 });
      const pool = new ConnectionPoolCore<MockConnection>({
        address: 'db.example:27017',
        scheduler: clock,
        connectionFactory: (d) =>
          new Promise<MockConnection>((resolve) =>
            from(mock.factory(d)).subscribe((c) => {
              if (made++ === 0) c.errored = true; // the server closed it right after the handshake
              resolve(c);
            }),
          ),
      });
      const events: ConnectionPoolEvent[] = [];
      pool.events$.subscribe((e) => events.push(e));
      pool.ready();
      // Replaced for the same checkout instead, a connection that is errored every time would be replaced for ever.
      const failed = firstValueFrom(pool.checkOut()).catch((e: unknown) => e);
      clock.advance(10);
      await microtasks();
      expect(await failed).to.be.instanceOf(MongoNetworkError);
      expect(events.flatMap((e) => (e.type === 'ConnectionClosed' ? [[e.connectionId, e.reason]] : []))).to.deep.equal([[1, 'error']]);
      expect(pool.state, 'not cleared: the error has the backpressure labels').to.equal('ready');
      const checkedOut = firstValueFrom(pool.checkOut());
      clock.advance(10);
      await microtasks();
      expect((await checkedOut).id).to.equal(2);
      expect(events.filter((e) => e.type === 'ConnectionCreated')).to.have.length(2);
    });
  });
});
