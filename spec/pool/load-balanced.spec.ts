/**
 * Load-balanced mode: per-service generations and connection counts, service clears that neither pause the pool nor
 * evict the WaitQueue. Reducer level on a hand-driven clock, then the pool over sockets against the embedded endpoint
 * acting as a load balancer.
 */
import { expect } from 'chai';
import { of } from 'rxjs';
import {
  AuthenticationError,
  ConnectionPool,
  ConnectionPoolCore,
  InvalidOptionError,
  MongoCompatibilityError,
  WaitQueueTimeoutError,
  type ConnectionClosedEvent,
  type ConnectionPoolEvent,
  type PoolSnapshot,
} from '../../lib';
import { EmbeddedServer, MockConnection, MockConnectionFactory, VirtualClock } from '../../lib/testing';
import { Bench } from './harness';
import { eventually } from '../support/endpoint';

const A = 'aaaaaaaaaaaaaaaaaaaaaaaa';
const B = 'bbbbbbbbbbbbbbbbbbbbbbbb';

describe('load-balanced mode', function () {
  describe('reducer', function () {
    function twoServices() {
      const b = new Bench({}, true, true);
      b.dispatch({ type: 'ready' });
      const [w1, w2] = [b.checkOut(), b.checkOut()];
      const a = b.succeed(1, A);
      const c = b.succeed(2, B);
      expect(b.connectionOf(w1)).to.equal(a);
      expect(b.connectionOf(w2)).to.equal(c);
      return { b, a, c };
    }

    it('counts established connections per service', function () {
      const { b } = twoServices();
      expect([...b.state.serviceGenerations]).to.deep.equal([
        [A, { generation: 0, connectionCount: 1 }],
        [B, { generation: 0, connectionCount: 1 }],
      ]);
    });

    it('a service clear stales only that service, without pausing or evicting the WaitQueue', function () {
      const { b, a, c } = twoServices();
      const waiting = b.checkOut(); // starts connection 3
      b.dispatch({ type: 'clear', interruptInUseConnections: false, serviceId: A });
      expect(b.events.at(-1)).to.include({ type: 'ConnectionPoolCleared', serviceId: A, interruptInUseConnections: false });
      expect(b.state.state).to.equal('ready');
      expect(b.errorOf(waiting)).to.equal(undefined);
      expect(b.state.serviceGenerations.get(A)).to.deep.equal({ generation: 1, connectionCount: 1 });
      b.checkIn(a); // stale: closed, and A's entry goes with its last connection
      expect(b.events.find((e): e is ConnectionClosedEvent => e.type === 'ConnectionClosed')).to.include({ connectionId: 1, reason: 'stale' });
      expect(b.state.serviceGenerations.has(A)).to.equal(false);
      b.checkIn(c); // B is untouched: goes to the waiting checkout
      expect(b.connectionOf(waiting)).to.equal(c);
    });

    it('a service keeps its entry, and so its generation, until its last connection closes', function () {
      const b = new Bench({}, true, true);
      b.dispatch({ type: 'ready' });
      b.checkOut();
      b.checkOut();
      const [first, second] = [b.succeed(1, A), b.succeed(2, A)];
      b.dispatch({ type: 'clear', interruptInUseConnections: false, serviceId: A });
      b.checkIn(first); // stale: closed
      expect([...b.state.serviceGenerations]).to.deep.equal([[A, { generation: 1, connectionCount: 1 }]]);
      b.checkIn(second); // stale too: the last one, and the entry goes with it
      const closed = b.events.filter((e): e is ConnectionClosedEvent => e.type === 'ConnectionClosed');
      expect(closed.map((e) => [e.connectionId, e.reason])).to.deep.equal([
        [1, 'stale'],
        [2, 'stale'],
      ]);
      expect(b.state.serviceGenerations.size).to.equal(0);
    });

    it('a new connection to a cleared service takes the service generation current at its handshake', function () {
      const { b } = twoServices();
      b.dispatch({ type: 'clear', interruptInUseConnections: false, serviceId: B });
      const w = b.checkOut();
      const d = b.succeed(3, B);
      expect(b.connectionOf(w)).to.equal(d);
      expect(b.state.records.get(3)!.generation).to.equal(1);
      expect(b.state.serviceGenerations.get(B)).to.deep.equal({ generation: 1, connectionCount: 2 });
    });

    it('a connection joins its service when its handshake is done: a clear of that service while it authenticates makes it stale', function () {
      const b = new Bench({}, true, true);
      b.dispatch({ type: 'ready' });
      const w = b.checkOut(); // starts connection 1
      b.dispatch({ type: 'handshakeDone', id: 1, serviceId: A });
      expect(b.state.serviceGenerations.get(A), 'counted from its handshake on').to.deep.equal({ generation: 0, connectionCount: 1 });
      b.dispatch({ type: 'clear', interruptInUseConnections: false, serviceId: A }); // during its authentication
      b.succeed(1, A);
      expect(b.events.find((e): e is ConnectionClosedEvent => e.type === 'ConnectionClosed')).to.include({ connectionId: 1, reason: 'stale' });
      expect(b.connectionOf(w), 'never handed out').to.equal(undefined);
      expect([...b.pending], 'its checkout gets another establishment').to.deep.equal([2]);
      b.dispatch({ type: 'handshakeDone', id: 2, serviceId: A });
      const d = b.succeed(2, A);
      expect(b.connectionOf(w)).to.equal(d);
      // Connection 1 was the service's last: its entry went with it, and connection 2 made a new one.
      expect([...b.state.serviceGenerations]).to.deep.equal([[A, { generation: 0, connectionCount: 1 }]]);
    });

    it('a connection made stale while it authenticated is replaced only for a checkout no other establishment serves', function () {
      const b = new Bench({}, true, true);
      b.dispatch({ type: 'ready' });
      const w1 = b.checkOut(); // starts connection 1
      const w2 = b.checkOut(); // starts connection 2
      b.dispatch({ type: 'handshakeDone', id: 1, serviceId: A });
      b.dispatch({ type: 'clear', interruptInUseConnections: false, serviceId: A });
      b.cancel(w1); // one checkout left, and connection 2 is being established for it
      b.succeed(1, A); // stale: closed
      expect(b.events.find((e): e is ConnectionClosedEvent => e.type === 'ConnectionClosed')).to.include({ connectionId: 1, reason: 'stale' });
      expect([...b.pending], 'no establishment nobody needs').to.deep.equal([2]);
      const d = b.succeed(2, B);
      expect(b.connectionOf(w2)).to.equal(d);
    });

    it('a connection that joined its service at its handshake leaves it when its establishment fails or the pool closes', function () {
      const b = new Bench({}, true, true);
      b.dispatch({ type: 'ready' });
      b.checkOut();
      b.checkOut();
      b.dispatch({ type: 'handshakeDone', id: 1, serviceId: A });
      b.dispatch({ type: 'handshakeDone', id: 2, serviceId: A });
      b.dispatch({ type: 'handshakeDone', id: 2, serviceId: B }); // a second call changes nothing
      expect([...b.state.serviceGenerations]).to.deep.equal([[A, { generation: 0, connectionCount: 2 }]]);
      b.failEstablishment(1, new Error('authentication failed'), false);
      expect([...b.state.serviceGenerations]).to.deep.equal([[A, { generation: 0, connectionCount: 1 }]]);
      b.dispatch({ type: 'close' });
      expect(b.state.serviceGenerations.size).to.equal(0);
      expect(b.state.handshakeGenerations?.size ?? 0).to.equal(0);
    });

    it('a service clear schedules a background run at once, which closes that service\'s stale available connections', function () {
      const { b, a, c } = twoServices();
      b.checkIn(a);
      b.checkIn(c);
      b.advanceTo(10); // the run ready() scheduled (backgroundThreadIntervalMS is 100 by default) has not come yet
      b.dispatch({ type: 'clear', interruptInUseConnections: false, serviceId: A });
      expect(b.timers.get('background')).to.equal(10);
      b.advanceTo(10);
      const closed = b.events.filter((e): e is ConnectionClosedEvent => e.type === 'ConnectionClosed');
      expect(closed.map((e) => [e.connectionId, e.reason])).to.deep.equal([[1, 'stale']]);
      expect(b.state.available.size).to.equal(1);
    });

    it('an establishment error after the handshake of a connection whose service was cleared since clears nothing more', function () {
      const b = new Bench({}, true, true);
      b.dispatch({ type: 'ready' });
      const [w1, w2] = [b.checkOut(), b.checkOut()]; // connections 1 and 2
      b.dispatch({ type: 'handshakeDone', id: 1, serviceId: A });
      b.dispatch({ type: 'handshakeDone', id: 2, serviceId: A });
      const first = Object.assign(new Error('authentication 1 failed'), { serviceId: A });
      b.failEstablishment(1, first, true); // clears A: generation 1
      expect(b.errorOf(w1)).to.equal(first);
      const w3 = b.checkOut(); // connection 3, established after the clear
      b.dispatch({ type: 'handshakeDone', id: 3, serviceId: A });
      const c = b.succeed(3, A);
      const second = Object.assign(new Error('authentication 2 failed'), { serviceId: A });
      b.failEstablishment(2, second, true); // of generation 0: stale
      expect(b.errorOf(w2) ?? b.errorOf(w3)).to.equal(second);
      expect(b.events.filter((e) => e.type === 'ConnectionPoolCleared'), 'cleared once').to.have.length(1);
      expect(b.state.serviceGenerations.get(A)).to.deep.equal({ generation: 1, connectionCount: 1 });
      b.checkIn(c);
      expect(b.events.at(-1), 'the connection made after the clear stays').to.include({ type: 'ConnectionCheckedIn', connectionId: 3 });
    });

    it('an establishment error naming a service clears it when no handshake of that connection took its generation', function () {
      const b = new Bench({}, true, true);
      b.dispatch({ type: 'ready' });
      b.checkOut(); // connection 1: no handshakeDone (a factory that does not report it)
      b.checkOut(); // connection 2: its handshake reached A, then A was cleared
      b.dispatch({ type: 'handshakeDone', id: 2, serviceId: A });
      b.dispatch({ type: 'clear', serviceId: A, interruptInUseConnections: false });
      b.failEstablishment(1, Object.assign(new Error('authentication 1 failed'), { serviceId: A }), true);
      b.failEstablishment(2, Object.assign(new Error('authentication 2 failed'), { serviceId: B }), true); // another service named
      const cleared = b.events.filter((e) => e.type === 'ConnectionPoolCleared').map((e) => (e as { serviceId?: string }).serviceId);
      expect(cleared, 'the clear, then one per error').to.deep.equal([A, A, B]);
    });

    it('a service clear is a no-op on a closed pool, and schedules no run when background runs are off', function () {
      const closed = new Bench({}, true, true);
      closed.dispatch({ type: 'close' });
      expect(closed.dispatch({ type: 'clear', interruptInUseConnections: false, serviceId: A })).to.deep.equal([]);
      expect(closed.types()).to.deep.equal(['ConnectionPoolClosed']);
      const noRuns = new Bench({ backgroundThreadIntervalMS: -1 }, true, true);
      noRuns.dispatch({ type: 'ready' });
      noRuns.dispatch({ type: 'clear', interruptInUseConnections: false, serviceId: A });
      expect(noRuns.types()).to.deep.equal(['ConnectionPoolReady', 'ConnectionPoolCleared']);
      expect(noRuns.timers.size).to.equal(0);
    });

    it('a service clear builds no event while nobody observes', function () {
      const b = new Bench({}, false, true);
      b.dispatch({ type: 'ready' });
      b.checkOut();
      b.succeed(1, A);
      b.dispatch({ type: 'clear', interruptInUseConnections: false, serviceId: A });
      expect(b.state.serviceGenerations.get(A)?.generation).to.equal(1);
      expect(b.commands.filter((c) => c.type === 'emit')).to.deep.equal([]);
    });

    it('a connection whose handshake reports no serviceId counts under the empty serviceId, which a clear of "" stales', function () {
      const b = new Bench({}, true, true);
      b.dispatch({ type: 'ready' });
      const w = b.checkOut();
      const c = b.succeed(1); // no serviceId
      expect(b.connectionOf(w)).to.equal(c);
      expect([...b.state.serviceGenerations]).to.deep.equal([['', { generation: 0, connectionCount: 1 }]]);
      b.dispatch({ type: 'clear', interruptInUseConnections: false, serviceId: '' });
      b.checkIn(c);
      expect(b.events.at(-1)).to.include({ type: 'ConnectionClosed', connectionId: 1, reason: 'stale' });
      expect(b.state.serviceGenerations.size).to.equal(0);
    });

    it('an establishment error before the handshake completed never clears the pool', function () {
      const b = new Bench({}, true, true);
      b.dispatch({ type: 'ready' });
      const w = b.checkOut();
      b.failEstablishment(1, new Error('refused'), true);
      expect(b.state.state).to.equal('ready');
      expect(b.errorOf(w)?.message).to.equal('refused');
      expect(b.types()).to.not.include('ConnectionPoolCleared');
    });

    it('an establishment error after the handshake (it names the service reached) clears that service only', function () {
      const { b, a, c } = twoServices();
      const w = b.checkOut();
      const error = Object.assign(new Error('Authentication failed'), { serviceId: A.toUpperCase() });
      b.failEstablishment(3, error, true);
      expect(b.state.state, 'not paused').to.equal('ready');
      expect(b.errorOf(w)).to.equal(error);
      expect(b.events.filter((e) => e.type === 'ConnectionPoolCleared')).to.deep.equal([
        { type: 'ConnectionPoolCleared', address: b.state.address, time: b.events.at(-1)!.time, interruptInUseConnections: false, serviceId: A },
      ]);
      b.checkIn(a);
      expect(b.events.at(-1)).to.include({ type: 'ConnectionClosed', connectionId: 1, reason: 'stale' });
      // An error naming no service (not a 24-digit hex id, or one that cannot be read) clears nothing.
      const unreadable = Object.defineProperty(new Error('no id'), 'serviceId', {
        get() {
          throw new Error('unreadable');
        },
      });
      for (const [n, error] of [[4, Object.assign(new Error('prefixed'), { serviceId: `x${B}` })], [5, Object.assign(new Error('suffixed'), { serviceId: `${B}x` })], [6, unreadable]] as const) {
        const waiter = b.checkOut();
        b.failEstablishment(n, error, true);
        expect(b.errorOf(waiter), error.message).to.equal(error);
      }
      expect(b.events.filter((e) => e.type === 'ConnectionPoolCleared')).to.have.length(1);
      // A policy that does not clear (clearPool false) leaves the service alone.
      const w2 = b.checkOut(); // c is still checked out: a new establishment
      b.failEstablishment(7, Object.assign(new Error('overloaded'), { serviceId: B }), false);
      expect(b.errorOf(w2)?.message).to.equal('overloaded');
      expect(b.events.filter((e) => e.type === 'ConnectionPoolCleared')).to.have.length(1);
      b.checkIn(c);
      expect(b.events.at(-1)).to.include({ type: 'ConnectionCheckedIn', connectionId: 2 });
    });
  });

  describe('state$', function () {
    it('shares a snapshot\'s services with the last one published while none changed (frozen, as every snapshot is)', function () {
      const pool = new ConnectionPoolCore<MockConnection>({
        address: 'lb:27017',
        loadBalanced: true,
        scheduler: new VirtualClock(),
        connectionFactory: (d) => of(new MockConnection(d, d.id === 3 ? B : A)),
      });
      const published: PoolSnapshot[] = [];
      pool.state$.subscribe((s) => published.push(s));
      pool.ready();
      const held: MockConnection[] = [];
      for (let i = 0; i < 2; i++) pool.checkOut().subscribe((c) => held.push(c));
      const before = published.length;
      pool.checkIn(held[0]); // the counts change, the services do not
      pool.checkIn(held[1]);
      const [first, second] = published.slice(before);
      expect(first.availableConnectionCount).to.equal(1);
      expect(second.availableConnectionCount).to.equal(2);
      expect(second.serviceGenerations).to.equal(first.serviceGenerations);
      expect(first.serviceGenerations).to.deep.equal([{ serviceId: A, generation: 0, connectionCount: 2 }]);
      expect(Object.isFrozen(first.serviceGenerations) && Object.isFrozen(first.serviceGenerations[0])).to.equal(true);
      // A third connection, to another service: a new array, with both.
      const third: MockConnection[] = [];
      for (let i = 0; i < 3; i++) pool.checkOut().subscribe((c) => third.push(c));
      expect(published.at(-1)!.serviceGenerations).to.not.equal(first.serviceGenerations);
      expect(published.at(-1)!.serviceGenerations).to.deep.equal([
        { serviceId: A, generation: 0, connectionCount: 2 },
        { serviceId: B, generation: 0, connectionCount: 1 },
      ]);
      // A pool that reaches no service: every snapshot has the same frozen empty array.
      const plain = new ConnectionPoolCore<MockConnection>({ address: 'db:27017', scheduler: new VirtualClock(), connectionFactory: (d) => of(new MockConnection(d)) });
      const snapshots: PoolSnapshot[] = [];
      plain.state$.subscribe((s) => snapshots.push(s));
      plain.ready();
      plain.checkOut().subscribe((c) => plain.checkIn(c));
      expect(snapshots.length).to.be.greaterThan(2);
      expect(new Set(snapshots.map((s) => s.serviceGenerations)).size).to.equal(1);
      expect(snapshots[0].serviceGenerations).to.deep.equal([]);
      expect(Object.isFrozen(snapshots[0].serviceGenerations)).to.equal(true);
    });

    it('publishes a batch that changes only which services the connections reach, not how many connections there are', function () {
      const C = 'cccccccccccccccccccccccc';
      const serviceOf = [A, B, B, A, C, A]; // the service connection n reaches: serviceOf[n - 1]
      const pool = new ConnectionPoolCore<MockConnection>({
        address: 'lb:27017',
        loadBalanced: true,
        scheduler: new VirtualClock(),
        connectionFactory: (d) => of(new MockConnection(d, serviceOf[d.id - 1])), // established at once
      });
      const held = new Map<number, MockConnection>();
      const hold = (c: MockConnection): void => void held.set(c.id, c);
      let replace = false;
      pool.events$.subscribe((e) => {
        // From inside the pool's processing: this checkout, and the connection it creates, join the check-in's batch.
        if (e.type === 'ConnectionClosed' && replace) {
          replace = false;
          pool.checkOut().subscribe(hold);
        }
      });
      const published: string[] = [];
      pool.state$.subscribe((s) => {
        published.push(s.serviceGenerations.map((g) => `${g.serviceId[0]}:${g.connectionCount}`).join(' '));
      });
      pool.ready();
      for (let i = 0; i < 3; i++) pool.checkOut().subscribe(hold);
      expect(published.at(-1)).to.equal('a:1 b:2');
      const before = published.length;
      /** One batch: connection `id` is checked in errored (closed), and a checkout replaces it with the next one. */
      const replaceConnection = (id: number): void => {
        const c = held.get(id)!;
        held.delete(id);
        c.errored = true;
        replace = true;
        pool.checkIn(c);
      };
      replaceConnection(3); // B's second connection by connection 4, to A: the counts change
      replaceConnection(2); // B's last connection by connection 5, to C: a service changes
      replaceConnection(5); // C's only connection by connection 6, to A: the number of services changes
      expect(published.slice(before)).to.deep.equal(['a:2 b:1', 'a:2 c:1', 'a:3']);
      expect([...held.keys()]).to.deep.equal([1, 4, 6]);
      expect(pool.snapshot(), 'the counts are those of before the three batches').to.include({
        totalConnectionCount: 3,
        inUseConnectionCount: 3,
        pendingConnectionCount: 0,
        availableConnectionCount: 0,
        waitQueueLength: 0,
      });
      pool.close();
    });
  });

  describe('WaitQueueTimeoutError', function () {
    it('gives maxPoolSize and the connections in use by cursors, by transactions and by other operations (load balancer spec)', async function () {
      const clock = new VirtualClock();
      const pool = new ConnectionPoolCore<MockConnection>({
        address: 'lb:27017',
        loadBalanced: true,
        maxPoolSize: 3,
        waitQueueTimeoutMS: 100,
        scheduler: clock,
        connectionFactory: (d) => of(new MockConnection(d, A)),
      });
      pool.ready();
      const held: MockConnection[] = [];
      pool.checkOut({ purpose: 'cursor' }).subscribe((c) => held.push(c));
      pool.checkOut({ purpose: 'transaction' }).subscribe((c) => held.push(c));
      held.push(await pool.checkOut());
      expect(held).to.have.length(3);
      const waiting = [pool.checkOut().then(undefined, (e: unknown) => e), pool.checkOut({ timeoutMS: 40 }).then(undefined, (e: unknown) => e)];
      clock.advance(100);
      const [queueTimeout, ownTimeout] = (await Promise.all(waiting)) as WaitQueueTimeoutError[];
      const message =
        'Timeout waiting for connection from the connection pool. maxPoolSize: 3, connections in use by cursors: 1, ' +
        'connections in use by transactions: 1, connections in use by other operations: 1';
      expect(queueTimeout).to.be.instanceOf(WaitQueueTimeoutError);
      expect(queueTimeout.message).to.equal(message);
      expect(queueTimeout).to.deep.include({ maxPoolSize: 3, waitQueueTimeoutMS: 100, timeoutMS: undefined });
      expect(ownTimeout.message, 'the checkout\'s own timeoutMS too').to.equal(message);
      expect(ownTimeout).to.deep.include({ maxPoolSize: 3, timeoutMS: 40 });
      pool.close();
    });
  });

  describe('ConnectionPool', function () {
    it('requires a serviceId to clear in load-balanced mode, and refuses one outside it', function () {
      const lb = new ConnectionPool({ address: 'lb:27017', loadBalanced: true, connectionFactory: new MockConnectionFactory().factory });
      expect(() => lb.clear()).to.throw(InvalidOptionError, 'Invalid serviceId: undefined (serviceId must be given to clear() in load-balanced mode (only one service is cleared))');
      const plain = new ConnectionPool({ address: 'db:27017', connectionFactory: new MockConnectionFactory().factory });
      expect(() => plain.clear({ serviceId: A })).to.throw(InvalidOptionError, `Invalid serviceId: "${A}" (serviceId must be absent outside load-balanced mode (the whole pool is cleared))`);
      lb.close();
      plain.close();
    });

    it('clears a service named by its hex string in either case, and refuses a serviceId that names no ObjectId', async function () {
      const mock = new MockConnectionFactory({ serviceIdOf: () => A });
      const lb = new ConnectionPool({ address: 'lb:27017', loadBalanced: true, connectionFactory: mock.factory });
      const events: ConnectionPoolEvent[] = [];
      lb.events$.subscribe((e) => events.push(e));
      lb.ready();
      const c = await lb.checkOut();
      // Before: an upper-case hex string was taken as another service, so A's connection was not made stale.
      lb.clear({ serviceId: A.toUpperCase() });
      expect(events.at(-1)).to.include({ type: 'ConnectionPoolCleared', serviceId: A });
      expect(lb.snapshot().serviceGenerations).to.deep.equal([{ serviceId: A, generation: 1, connectionCount: 1 }]);
      lb.checkIn(c);
      expect(events.at(-1)).to.include({ type: 'ConnectionClosed', connectionId: 1, reason: 'stale' });
      for (const serviceId of ['zzz', `${A}0`, 'not-a-service']) {
        expect(() => lb.clear({ serviceId }), serviceId).to.throw(InvalidOptionError).with.property('option', 'serviceId');
      }
      expect(events.filter((e) => e.type === 'ConnectionPoolCleared')).to.have.length(1);
      lb.close();
    });

    it('a serviceId given to handshakeDone in upper case is the service clear({ serviceId }) names', async function () {
      const upper = A.toUpperCase();
      const lb = new ConnectionPool({
        address: 'lb:27017',
        loadBalanced: true,
        connectionFactory: (d) => {
          d.handshakeDone?.(upper);
          return Promise.resolve(new MockConnection(d, upper));
        },
      });
      const events: ConnectionPoolEvent[] = [];
      lb.events$.subscribe((e) => events.push(e));
      lb.ready();
      const c = await lb.checkOut();
      expect(lb.snapshot().serviceGenerations).to.deep.equal([{ serviceId: A, generation: 0, connectionCount: 1 }]);
      lb.clear({ serviceId: upper });
      expect(lb.serviceGeneration(upper)).to.equal(1);
      lb.checkIn(c);
      expect(events.at(-1)).to.include({ type: 'ConnectionClosed', connectionId: 1, reason: 'stale' });
      lb.close();
    });

    it('over sockets: serviceIds come from the handshake; clearing one service leaves the other', async function () {
      const server = await new EmbeddedServer({ loadBalancedServices: 2 }).start();
      const pool = new ConnectionPool({ address: server.address, loadBalanced: true });
      const events: ConnectionPoolEvent[] = [];
      pool.events$.subscribe((e) => events.push(e));
      pool.ready();
      try {
        const [c1, c2] = await Promise.all([pool.checkOut(), pool.checkOut()]);
        expect(c1.serviceId).to.equal(server.services[0].toHexString());
        expect(c2.serviceId).to.equal(server.services[1].toHexString());
        expect(pool.snapshot().serviceGenerations.map((s) => s.connectionCount)).to.deep.equal([1, 1]);
        expect([pool.serviceGeneration(c1.serviceId!), pool.serviceGeneration(c2.serviceId!)]).to.deep.equal([0, 0]);
        pool.clear({ serviceId: server.services[0] });
        expect(events.at(-1)).to.include({ type: 'ConnectionPoolCleared', serviceId: c1.serviceId });
        expect([pool.serviceGeneration(c1.serviceId!), pool.serviceGeneration(c2.serviceId!)], 'serviceGeneration() reads what snapshot() shows').to.deep.equal(
          pool.snapshot().serviceGenerations.map((g) => g.generation),
        );
        expect([pool.serviceGeneration(c1.serviceId!), pool.serviceGeneration(c2.serviceId!), pool.serviceGeneration(A)]).to.deep.equal([1, 0, 0]);
        expect([pool.serviceGeneration(server.services[0]), pool.serviceGeneration(c1.serviceId!.toUpperCase())], 'named as clear() names it').to.deep.equal([1, 1]);
        expect(() => pool.serviceGeneration('zzz'), 'a value naming no ObjectId').to.throw(InvalidOptionError, /serviceId/);
        expect(pool.state).to.equal('ready');
        pool.checkIn(c1);
        pool.checkIn(c2);
        expect(events.filter((e) => e.type === 'ConnectionClosed').map((e) => (e as ConnectionClosedEvent).connectionId)).to.deep.equal([1]);
        expect(pool.snapshot().serviceGenerations).to.have.length(1);
      } finally {
        pool.close();
        await server.stop();
      }
    });

    it('over sockets: an authentication failure after the handshake clears the service it reached, not the pool', async function () {
      const server = await new EmbeddedServer({ loadBalancedServices: 1, users: [{ username: 'u', password: 'old' }] }).start();
      const credentials = { username: 'u', password: 'old' };
      const pool = new ConnectionPool({ address: server.address, loadBalanced: true, connectionOptions: { credentials } });
      const events: ConnectionPoolEvent[] = [];
      pool.events$.subscribe((e) => events.push(e));
      pool.ready();
      try {
        const held = await pool.checkOut(); // authenticated
        server.setUsers([{ username: 'u', password: 'rotated' }]);
        const error = await pool.checkOut().then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error).to.be.instanceOf(AuthenticationError);
        const serviceId = server.services[0].toHexString();
        expect((error as AuthenticationError).serviceId).to.equal(serviceId);
        expect(events.filter((e) => e.type === 'ConnectionPoolCleared')).to.have.length(1);
        expect(events.find((e) => e.type === 'ConnectionPoolCleared')).to.include({ serviceId, interruptInUseConnections: false });
        expect(pool.state, 'a service clear does not pause the pool').to.equal('ready');
        pool.checkIn(held); // of the cleared service: closed as stale
        expect(events.at(-1)).to.include({ type: 'ConnectionClosed', connectionId: held.id, reason: 'stale' });
      } finally {
        pool.close();
        await server.stop();
      }
    });

    it('over sockets: a service clear while a connection authenticates (after its handshake) makes that connection stale', async function () {
      const server = await new EmbeddedServer({ loadBalancedServices: 1, users: [{ username: 'u', password: 'p' }] }).start();
      const pool = new ConnectionPool({ address: server.address, loadBalanced: true, connectionOptions: { credentials: { username: 'u', password: 'p' } } });
      const events: ConnectionPoolEvent[] = [];
      pool.events$.subscribe((e) => events.push(e));
      pool.ready();
      try {
        const held = await pool.checkOut();
        const serviceId = server.services[0].toHexString();
        // Held 2.5 s: counted only once authenticated, connection 2 would not count within the 1.5 s waited for it (a
        // fixed 150 ms wait inside a 300 ms hold raced a loaded runner's pauses on both sides).
        const blocked = { failCommands: ['saslContinue'], blockConnection: true, blockTimeMS: 2500 };
        await held.command('admin', { configureFailPoint: 'failCommand', mode: { times: 1 }, data: blocked });
        const second = pool.checkOut().then((c) => c); // connection 2: handshake, then saslContinue held back
        const counted = await eventually(() => pool.snapshot().serviceGenerations[0]?.connectionCount === 2, 1500);
        expect(counted, 'connection 2 counted while it authenticates').to.equal(true);
        expect(pool.snapshot().serviceGenerations, 'connection 2 counts toward its service from its handshake on').to.deep.equal([
          { serviceId, generation: 0, connectionCount: 2 },
        ]);
        pool.clear({ serviceId });
        const connection = await second;
        expect(events.find((e) => e.type === 'ConnectionClosed')).to.include({ connectionId: 2, reason: 'stale' });
        expect(connection.id, 'a connection made after the clear').to.equal(3);
        pool.checkIn(connection);
        expect(events.at(-1), 'current: made available').to.include({ type: 'ConnectionCheckedIn', connectionId: 3 });
        pool.checkIn(held);
      } finally {
        pool.close();
        await server.stop();
      }
    });

    it('fails establishment when the server reports no serviceId', async function () {
      const server = await new EmbeddedServer().start();
      const pool = new ConnectionPool({ address: server.address, loadBalanced: true });
      pool.ready();
      try {
        const error = await pool.checkOut().then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error).to.be.instanceOf(MongoCompatibilityError);
        expect((error as Error).message).to.equal('Driver attempted to initialize in load balancing mode, but the server does not support this mode.');
        expect(pool.state).to.equal('ready');
      } finally {
        pool.close();
        await server.stop();
      }
    });
  });
});
