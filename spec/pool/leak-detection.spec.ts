/**
 * Who holds the pool: leak detection (`leakDetectionThresholdMS`) and the holdings that the errors of waiting
 * checkouts report (WaitQueueTimeoutError.pool, PoolClearedError.pool), on virtual time, through the log feed, and
 * under real load on the endpoint.
 */
import { expect } from 'chai';
import {
  ConnectionPool,
  ConnectionPoolCore,
  InvalidOptionError,
  PoolClearedError,
  WaitQueueTimeoutError,
  type ConnectionLogMessage,
  type ConnectionPoolEvent,
  type PoolHoldings,
} from '../../lib';
import { MockConnectionFactory, VirtualClock, type MockConnection } from '../../lib/testing';
import { eventually, startTestEndpoint } from '../support/endpoint';

function virtualPool(options: { leakDetectionThresholdMS?: number; waitQueueTimeoutMS?: number; maxPoolSize?: number } = {}, observed = true) {
  const clock = new VirtualClock();
  const mock = new MockConnectionFactory({ scheduler: clock, establishDelayMS: 10 });
  const pool = new ConnectionPoolCore<MockConnection>({ address: 'db.example:27017', scheduler: clock, connectionFactory: mock.factory, maxPoolSize: 2, ...options });
  const events: ConnectionPoolEvent[] = [];
  if (observed) pool.events$.subscribe((e) => events.push(e));
  pool.ready();
  const leakEvents = () => events.filter((e) => e.type.startsWith('ConnectionLeak') || e.type === 'ConnectionCheckedIn');
  return { pool, clock, events, leakEvents };
}

/** A named function, so that its frame can be looked for in a captured checkOut stack. */
function checkOutFromHandler(pool: ConnectionPoolCore<MockConnection>, held: MockConnection[]): void {
  pool.checkOut().subscribe((c) => held.push(c));
}

describe('leak detection (leakDetectionThresholdMS)', function () {
  it('reports a connection held past the threshold once, with how long and where it was checked out, and says when it comes back', function () {
    const { pool, clock, leakEvents } = virtualPool({ leakDetectionThresholdMS: 1000 });
    const held: MockConnection[] = [];
    checkOutFromHandler(pool, held);
    clock.advance(10); // established and checked out at t=10
    clock.advance(999);
    expect(leakEvents(), 'not before the threshold').to.deep.equal([]);
    clock.advance(1);
    const [suspected] = leakEvents();
    expect(suspected).to.deep.include({
      type: 'ConnectionLeakSuspected',
      extension: 'leakDetectionThresholdMS',
      address: 'db.example:27017',
      time: 1010,
      connectionId: held[0].id,
      duration: 1000,
    });
    const stack = (suspected as { checkOutStack: string }).checkOutStack;
    expect(stack.split('\n')[0], 'the first frame is the caller of checkOut').to.match(/at checkOutFromHandler .*leak-detection\.spec\.ts/);
    clock.advance(60_000);
    expect(leakEvents(), 'once').to.have.length(1);
    pool.checkIn(held[0]);
    expect(leakEvents().map((e) => e.type)).to.deep.equal(['ConnectionLeakSuspected', 'ConnectionCheckedIn', 'ConnectionLeakSuspectCheckedIn']);
    expect(leakEvents()[2]).to.deep.include({ connectionId: held[0].id, duration: 61_000, time: 61_010 });
  });

  it('reports a connection that passed the threshold while nobody observed the pool to the observer who comes later', function () {
    const { pool, clock } = virtualPool({ leakDetectionThresholdMS: 100 }, false);
    const held: MockConnection[] = [];
    checkOutFromHandler(pool, held);
    clock.advance(10); // checked out at t=10, due at t=110, when nobody observes
    clock.advance(190);
    const events: ConnectionPoolEvent[] = [];
    const incident = pool.events$.subscribe((e) => events.push(e)); // an operator looks at t=200
    clock.advance(100);
    pool.checkIn(held[0]);
    incident.unsubscribe();
    const leaks = events.filter((e) => e.type.startsWith('ConnectionLeak'));
    expect(leaks.map((e) => e.type)).to.deep.equal(['ConnectionLeakSuspected', 'ConnectionLeakSuspectCheckedIn']);
    // Found due at t=110 with nobody to tell, looked at again a threshold later: reported at t=210, held 200 ms.
    expect(leaks[0]).to.deep.include({ connectionId: held[0].id, duration: 200, time: 210 });
    expect(leaks[1]).to.deep.include({ connectionId: held[0].id, duration: 290, time: 300 });
  });

  it('times each checkout from its own checkout, and forgets a checkout that ended', function () {
    const { pool, clock, leakEvents } = virtualPool({ leakDetectionThresholdMS: 100 });
    const held: MockConnection[] = [];
    checkOutFromHandler(pool, held);
    clock.advance(10); // first at t=10
    clock.advance(50);
    checkOutFromHandler(pool, held);
    clock.advance(10); // second at t=70
    clock.advance(40); // t=110: the first is due
    expect(leakEvents().map((e) => [e.type, (e as { connectionId: number }).connectionId])).to.deep.equal([['ConnectionLeakSuspected', held[0].id]]);
    pool.checkIn(held[1]); // back before its threshold: never reported
    checkOutFromHandler(pool, held); // the same connection again, at t=110
    clock.advance(99);
    expect(leakEvents().filter((e) => e.type === 'ConnectionLeakSuspected')).to.have.length(1);
    clock.advance(1); // t=210: the new checkout is due, 100 ms after it was made (not after the first checkout of that connection)
    const last = leakEvents().at(-1)!;
    expect(last).to.deep.include({ type: 'ConnectionLeakSuspected', connectionId: held[2].id, duration: 100, time: 210 });
  });

  it('leaves no timer behind once the closed pool has no connection left (nor when it had none in use at close)', function () {
    const { pool, clock } = virtualPool({ leakDetectionThresholdMS: 1000 });
    const held: MockConnection[] = [];
    checkOutFromHandler(pool, held);
    checkOutFromHandler(pool, held);
    clock.advance(10);
    pool.checkIn(held[1]);
    pool.close();
    expect(clock.actions.length, 'armed while a checkout is still out').to.equal(1);
    pool.checkIn(held[0]); // the last connection of the closed pool is closed
    expect(clock.actions.length, 'timers armed once the pool is done').to.equal(0);

    const idle = virtualPool({ leakDetectionThresholdMS: 1000 });
    const one: MockConnection[] = [];
    checkOutFromHandler(idle.pool, one);
    idle.clock.advance(10);
    idle.pool.checkIn(one[0]); // the timer stays armed for the threshold: it is not rearmed at each checkout
    idle.pool.close();
    expect(idle.clock.actions.length, 'timers armed once the pool is done').to.equal(0);
  });

  it('is off by default: no stack captured, no timer, no extension event', function () {
    const { pool, clock, events } = virtualPool();
    expect(pool.options.leakDetectionThresholdMS).to.equal(0);
    const captures = countStackCaptures();
    try {
      const held: MockConnection[] = [];
      checkOutFromHandler(pool, held);
      clock.advance(10);
      clock.advance(3_600_000);
      pool.checkIn(held[0]);
      expect(events.filter((e) => 'extension' in e)).to.deep.equal([]);
      expect(captures.count).to.equal(0);
    } finally {
      captures.restore();
    }
  });

  it('refuses a threshold that is not a number of ms >= 0, naming the option', function () {
    for (const value of [-1, Number.NaN, '1000', Infinity]) {
      const make = () => new ConnectionPoolCore({ address: 'db:27017', connectionFactory: () => [], leakDetectionThresholdMS: value as number });
      expect(make).to.throw(InvalidOptionError, /leakDetectionThresholdMS/);
    }
  });

  it('logs a suspected leak at warn and its check-in at info, with connection logging at warn or info only (and no debug message then), to the destination and log$ alike', function () {
    const logged = (severity: 'warn' | 'info' | 'debug') => {
      const clock = new VirtualClock();
      const messages: ConnectionLogMessage[] = [];
      const pool = new ConnectionPool<MockConnection>({
        address: 'db.example:27017',
        scheduler: clock,
        connectionFactory: new MockConnectionFactory({ scheduler: clock }).factory,
        leakDetectionThresholdMS: 100,
        logging: { componentSeverities: { connection: severity }, path: { write: (m) => void messages.push(m as ConnectionLogMessage) } },
      });
      const viaLog: ConnectionLogMessage[] = [];
      pool.log$.subscribe((m) => viaLog.push(m as ConnectionLogMessage));
      pool.ready();
      const held: MockConnection[] = [];
      pool.checkOut().subscribe((c) => held.push(c));
      clock.advance(100);
      pool.checkIn(held[0]);
      pool.close();
      expect(viaLog, `${severity}: log$ carries what the destination gets`).to.deep.equal(messages);
      // At debug, the pool's other messages come too; at warn or info, none but the leak messages.
      return messages.filter((m) => severity !== 'debug' || m.level !== 'debug').map((m) => [m.level, m.fields.message, m.render().split('\n')[0]]);
    };
    const suspected = ['warn', 'Connection leak suspected', 'Connection leak suspected: address=db.example:27017, driver-generated ID=1, checked out 100 ms ago by:'];
    const checkedIn = ['info', 'Connection leak suspect checked in', 'Connection leak suspect checked in: address=db.example:27017, driver-generated ID=1, after 100 ms'];
    expect(logged('warn')).to.deep.equal([suspected]);
    expect(logged('info')).to.deep.equal([suspected, checkedIn]);
    expect(logged('debug')).to.deep.equal([suspected, checkedIn]);
  });

  it('reports the connection a worker holds too long under real load on the endpoint, and no other', async function () {
    this.timeout(20_000);
    const endpoint = await startTestEndpoint();
    const pool = new ConnectionPool({ address: endpoint.address, connectionOptions: endpoint.connectionOptions, maxPoolSize: 4, leakDetectionThresholdMS: 300 });
    const events: ConnectionPoolEvent[] = [];
    pool.events$.subscribe((e) => events.push(e));
    try {
      pool.ready();
      const slow = await pool.checkOut();
      let stop = false;
      const workers = Array.from({ length: 8 }, async () => {
        while (!stop) await pool.withConnection((c) => c.command('admin', { ping: 1 }));
      });
      expect(await eventually(() => events.some((e) => e.type === 'ConnectionLeakSuspected'), 5000)).to.equal(true);
      stop = true;
      await Promise.all(workers);
      pool.checkIn(slow);
      const leaks = events.filter((e) => e.type === 'ConnectionLeakSuspected' || e.type === 'ConnectionLeakSuspectCheckedIn');
      expect(leaks.map((e) => [e.type, (e as { connectionId: number }).connectionId])).to.deep.equal([
        ['ConnectionLeakSuspected', slow.id],
        ['ConnectionLeakSuspectCheckedIn', slow.id],
      ]);
      expect((leaks[0] as { duration: number }).duration).to.be.at.least(300);
      expect((leaks[0] as { checkOutStack: string }).checkOutStack).to.match(/leak-detection\.spec\.ts/);
      expect(events.filter((e) => e.type === 'ConnectionCheckedOut').length, 'the other workers kept going').to.be.greaterThan(8);
    } finally {
      pool.close();
      await endpoint.stop();
    }
  });
});

describe('the holdings in the errors of waiting checkouts', function () {
  it('WaitQueueTimeoutError.pool: what the pool held when the checkout timed out, the message staying the spec\'s', async function () {
    const { pool, clock } = virtualPool({ maxPoolSize: 1, waitQueueTimeoutMS: 100 });
    const held: MockConnection[] = [];
    checkOutFromHandler(pool, held);
    clock.advance(10);
    const waiting = [pool.checkOut().then(undefined, (e: unknown) => e), pool.checkOut().then(undefined, (e: unknown) => e)];
    clock.advance(150);
    const [first, second] = (await Promise.all(waiting)) as WaitQueueTimeoutError[];
    expect(first).to.be.instanceOf(WaitQueueTimeoutError);
    expect(first.message).to.equal('Timed out while checking out a connection from connection pool');
    const expected: PoolHoldings = {
      inUseConnectionCount: 1,
      inUseByPurpose: { cursor: 0, transaction: 0, operation: 1 },
      pendingConnectionCount: 0,
      availableConnectionCount: 0,
      waitQueueLength: 2,
      oldestCheckOut: { connectionId: held[0].id, duration: 100, checkOutStack: undefined },
    };
    expect(first.pool).to.deep.equal(expected);
    expect(second.pool, 'both timed out at once: the same moment').to.equal(first.pool);
    expect(Object.isFrozen(first.pool)).to.equal(true);
  });

  it('counts the connections in use by what they were checked out for (cursor, transaction, other operations)', async function () {
    const { pool, clock } = virtualPool({ maxPoolSize: 4, waitQueueTimeoutMS: 100 }, false);
    const held = new Map<string, MockConnection>();
    pool.checkOut({ purpose: 'cursor' }).subscribe((c) => held.set('cursor 1', c));
    pool.checkOut({ purpose: 'cursor' }).subscribe((c) => held.set('cursor 2', c));
    void pool.checkOut({ purpose: 'transaction', priority: 'high' }).then((c) => held.set('transaction', c));
    pool.checkOut({ purpose: 'operation' }).subscribe((c) => held.set('operation', c));
    clock.advance(20); // two establishments at a time (maxConnecting), 10 ms each
    await Promise.resolve();
    expect(held.size).to.equal(4);
    // A connection a cursor gave back is counted for what its next checkout is for.
    pool.checkIn(held.get('cursor 2')!);
    pool.checkOut().subscribe((c) => held.set('other', c));
    expect(held.get('other')).to.equal(held.get('cursor 2'));
    const waiting = [pool.checkOut().then(undefined, (e: unknown) => e), pool.checkOut({ timeoutMS: 50 }).then(undefined, (e: unknown) => e)];
    clock.advance(100);
    for (const error of (await Promise.all(waiting)) as WaitQueueTimeoutError[]) {
      expect(error).to.be.instanceOf(WaitQueueTimeoutError);
      expect(error.pool?.inUseByPurpose).to.deep.equal({ cursor: 1, transaction: 1, operation: 2 });
      expect(error.message, 'outside load-balanced mode the message stays the CMAP spec\'s').to.equal('Timed out while checking out a connection from connection pool');
      expect(error.maxPoolSize).to.equal(undefined);
    }
  });

  it('refuses a purpose that is not one of the three, naming the option', function () {
    const { pool } = virtualPool();
    expect(() => pool.checkOut({ purpose: 'cursors' as never })).to.throw(InvalidOptionError, /purpose.*'cursor', 'transaction' or 'operation'/);
    expect(() => pool.checkOut({ purpose: null as never })).to.throw(InvalidOptionError, /purpose/);
  });

  it('with leak detection on, names where the oldest checkout was made', async function () {
    const { pool, clock } = virtualPool({ maxPoolSize: 1, waitQueueTimeoutMS: 100, leakDetectionThresholdMS: 60_000 });
    const held: MockConnection[] = [];
    checkOutFromHandler(pool, held);
    clock.advance(10);
    const waiting = pool.checkOut().then(undefined, (e: unknown) => e);
    clock.advance(100);
    const error = (await waiting) as WaitQueueTimeoutError;
    expect(error.pool?.oldestCheckOut?.checkOutStack).to.match(/^ +at checkOutFromHandler .*leak-detection\.spec\.ts/);
  });

  it('PoolClearedError.pool: what the pool held when the clear evicted the checkout', async function () {
    const { pool, clock } = virtualPool({ maxPoolSize: 2 });
    const held: MockConnection[] = [];
    checkOutFromHandler(pool, held);
    clock.advance(10);
    clock.advance(5);
    checkOutFromHandler(pool, held);
    clock.advance(10);
    const waiting = pool.checkOut().then(undefined, (e: unknown) => e);
    clock.advance(20);
    pool.clear({ cause: new Error('primary stepped down') });
    const error = (await waiting) as PoolClearedError;
    expect(error).to.be.instanceOf(PoolClearedError);
    expect(error.message).to.equal('Connection pool for db.example:27017 was cleared because another operation failed with: primary stepped down');
    expect(error.pool).to.deep.equal({
      inUseConnectionCount: 2,
      inUseByPurpose: { cursor: 0, transaction: 0, operation: 2 },
      pendingConnectionCount: 0,
      availableConnectionCount: 0,
      waitQueueLength: 1,
      oldestCheckOut: { connectionId: held[0].id, duration: 35, checkOutStack: undefined },
    });
  });

  it('times the checkouts of an unobserved pool when a WaitQueue timeout or leak detection will read the time', async function () {
    for (const options of [{ waitQueueTimeoutMS: 100 }, { leakDetectionThresholdMS: 60_000 }]) {
      const { pool, clock } = virtualPool({ maxPoolSize: 1, ...options }, false);
      const held: MockConnection[] = [];
      checkOutFromHandler(pool, held);
      clock.advance(10);
      clock.advance(30);
      const waiting = pool.checkOut().then(undefined, (e: unknown) => e);
      if (options.waitQueueTimeoutMS === undefined) pool.clear();
      else clock.advance(100);
      const error = (await waiting) as WaitQueueTimeoutError | PoolClearedError;
      const duration = options.waitQueueTimeoutMS === undefined ? 30 : 130;
      expect(error.pool?.oldestCheckOut, JSON.stringify(options)).to.deep.include({ connectionId: held[0].id, duration });
    }
  });

  it('says nothing of the oldest checkout when the pool did not time its checkouts (unobserved, no timeout, no leak detection)', async function () {
    const clock = new VirtualClock();
    const pool = new ConnectionPoolCore<MockConnection>({ address: 'db.example:27017', scheduler: clock, maxPoolSize: 1, connectionFactory: new MockConnectionFactory({ scheduler: clock }).factory });
    pool.ready();
    const held: MockConnection[] = [];
    checkOutFromHandler(pool, held);
    clock.advance(0);
    const waiting = pool.checkOut().then(undefined, (e: unknown) => e);
    pool.clear();
    const error = (await waiting) as PoolClearedError;
    expect(held).to.have.length(1);
    expect(error.pool).to.deep.include({ inUseConnectionCount: 1, waitQueueLength: 1, oldestCheckOut: undefined });
  });
  it('names no oldest checkout while a connection checked out before the pool was observed is still held (its time is unknown)', async function () {
    const { pool, clock } = virtualPool({}, false);
    const held: MockConnection[] = [];
    checkOutFromHandler(pool, held);
    clock.advance(1000); // connection 1 checked out at t=10, untimed: nobody observed the pool
    const dashboard = pool.events$.subscribe();
    checkOutFromHandler(pool, held); // connection 2 at t=1020, timed
    clock.advance(100);
    const waiting = pool.checkOut({ timeoutMS: 50 }).then(undefined, (e: unknown) => e);
    clock.advance(50);
    const error = (await waiting) as WaitQueueTimeoutError;
    dashboard.unsubscribe();
    expect(held.map((c) => c.id)).to.deep.equal([1, 2]);
    expect(error).to.be.instanceOf(WaitQueueTimeoutError);
    // Connection 2 (held 130 ms) is not the oldest checkout: connection 1 has been held since t=10.
    expect(error.pool).to.deep.include({ inUseConnectionCount: 2, oldestCheckOut: undefined });
  });

  it('names the oldest checkout when it was timed, though a younger one, made while nobody observed, was not', async function () {
    const { pool, clock } = virtualPool({ maxPoolSize: 2 }, false);
    const held: MockConnection[] = [];
    const dashboard = pool.events$.subscribe();
    checkOutFromHandler(pool, held); // connection 1 at t=10, timed
    clock.advance(10);
    dashboard.unsubscribe();
    clock.advance(40);
    checkOutFromHandler(pool, held); // connection 2 at t=60, untimed
    clock.advance(10);
    const waiting = pool.checkOut({ timeoutMS: 30 }).then(undefined, (e: unknown) => e);
    clock.advance(30);
    const error = (await waiting) as WaitQueueTimeoutError;
    expect(held.map((c) => c.id)).to.deep.equal([1, 2]);
    expect(error).to.be.instanceOf(WaitQueueTimeoutError);
    expect(error.pool).to.deep.include({ inUseConnectionCount: 2, waitQueueLength: 1 });
    expect(error.pool?.oldestCheckOut).to.deep.include({ connectionId: 1, duration: 80 });
  });

  it('counts a connection handed from one checkout to the next as checked out when the next one got it', async function () {
    const { pool, clock } = virtualPool({ maxPoolSize: 2, waitQueueTimeoutMS: 1000 });
    const held: MockConnection[] = [];
    checkOutFromHandler(pool, held); // connection 1 at t=10
    clock.advance(10);
    clock.advance(20);
    checkOutFromHandler(pool, held); // connection 2 at t=40
    clock.advance(10);
    const next = pool.checkOut();
    clock.advance(20);
    pool.checkIn(held[0]); // connection 1 goes straight to `next` at t=60
    expect(await next).to.equal(held[0]);
    clock.advance(25);
    const waiting = pool.checkOut({ timeoutMS: 15 }).then(undefined, (e: unknown) => e);
    clock.advance(15);
    const error = (await waiting) as WaitQueueTimeoutError;
    expect(error).to.be.instanceOf(WaitQueueTimeoutError);
    // Connection 2 (checked out at t=40) has been held longest; connection 1 only since t=60.
    expect(error.pool?.oldestCheckOut).to.deep.include({ connectionId: 2, duration: 60 });
  });
});

/** Counts calls of Error.captureStackTrace until restored. */
function countStackCaptures(): { count: number; restore(): void } {
  const original = Error.captureStackTrace;
  const counter = {
    count: 0,
    restore: () => {
      Error.captureStackTrace = original;
    },
  };
  Error.captureStackTrace = function (this: unknown, ...args: Parameters<typeof original>) {
    counter.count++;
    return original.apply(this, args);
  } as typeof original;
  return counter;
}
