/**
 * The command runner against user code that breaks its contract: a connectionFactory that throws, returns something
 * that is not an ObservableInput, or emits something that is not this establishment's connection, and a
 * clearOnEstablishmentError that throws. Each must fail the establishment with a typed error, settle the checkout
 * once, and free the pending slot.
 */
import { expect } from 'chai';
import { config, EMPTY, Observable, of, throwError } from 'rxjs';
import { CmapError, ConnectionPoolCore, ErrorLabel, MongoNetworkError, PoolCallbackError, PoolClosedError, type ConnectionFactory, type ConnectionPoolEvent, type PoolConnection } from '../../lib';
import { defaultClearOnEstablishmentError } from '../../lib/pool/command-runner';
import { microtasks } from '../support/microtasks';
import { unhandledRejectionsOf } from '../support/unhandled';
import { MockConnectionFactory, VirtualClock, type MockConnection } from '../../lib/testing';

function poolWith(factory: ConnectionFactory<PoolConnection>, clearOnEstablishmentError?: (e: Error) => boolean) {
  const clock = new VirtualClock();
  const pool = new ConnectionPoolCore<PoolConnection>({ address: 'db:27017', maxConnecting: 1, scheduler: clock, connectionFactory: factory, clearOnEstablishmentError });
  const events: ConnectionPoolEvent[] = [];
  pool.events$.subscribe((e) => events.push(e));
  pool.ready();
  return { pool, clock, events };
}

/** A Proxy already revoked: every question about it (its prototype, its kind, a property) throws. */
function revokedProxy(): object {
  const { proxy, revoke } = Proxy.revocable({}, {});
  revoke();
  return proxy;
}

/** An Error whose `message` getter throws. */
function errorWithUnreadableMessage(): Error {
  const error = new Error('hidden');
  Object.defineProperty(error, 'message', { get: () => { throw new Error('unreadable'); } });
  return error;
}

/** Checks out once (Observable form) and returns what happened, synchronously. */
function checkOutOnce(pool: ConnectionPoolCore<PoolConnection>): { errors: unknown[]; connections: PoolConnection[] } {
  const outcome = { errors: [] as unknown[], connections: [] as PoolConnection[] };
  pool.checkOut().subscribe({ next: (c) => outcome.connections.push(c), error: (e) => outcome.errors.push(e) });
  return outcome;
}

describe('CommandRunner with a misbehaving connectionFactory or policy', function () {
  const broken: [string, ConnectionFactory<PoolConnection>, RegExp][] = [
    ['throws', () => { throw new Error('factory bug'); }, /connectionFactory threw: factory bug/],
    ['returns a number, not an ObservableInput', () => 42 as never, /connectionFactory returned 42, not an Observable, Promise or other ObservableInput/],
    ['returns null', () => null as never, /connectionFactory returned null/],
    ['emits a number, not a connection', () => of(7) as never, /connectionFactory emitted 7 for connection 1, not a connection/],
    ['emits a connection with another id', (d) => of({ id: d.id + 100, destroy: () => undefined }), /connection 101 for connection 1/],
    ['returns a function', () => (() => undefined) as never, /connectionFactory returned a function, not an Observable/],
    ['returns a plain object', () => ({}) as never, /connectionFactory returned an object \(\[object Object\]\), not an Observable/],
    ['emits null', () => of(null) as never, /connectionFactory emitted null for connection 1, not a connection/],
    ['emits undefined', () => of(undefined) as never, /connectionFactory emitted undefined for connection 1, not a connection/],
    ['returns NaN', () => NaN as never, /connectionFactory returned NaN, not an Observable, Promise or other ObservableInput/],
    ['emits an object whose id cannot be read', (d) => of({ destroy: () => undefined, get id(): number { throw new Error(`id ${d.id} unreadable`); } }), /connectionFactory emitted an object \(\[object Object\]\) for connection 1, not a connection/],
    ['emits an object without destroy()', (d) => of({ id: d.id }) as never, /connectionFactory emitted an object \(\[object Object\]\) for connection 1, not a connection/],
    ['completes without a connection', () => EMPTY, /connectionFactory completed without a connection for connection 1$/],
    ['fails with something that is not an Error', () => throwError(() => 'no route'), /connectionFactory failed with "no route", which is not an Error$/],
    // Values whose inspection throws: each once left the establishment pending for good, and its checkout unsettled.
    ['throws a revoked Proxy', () => { throw revokedProxy(); }, /connectionFactory threw: an object that cannot be inspected$/],
    ['returns a revoked Proxy', () => revokedProxy() as never, /connectionFactory returned an object that cannot be inspected, not an Observable/],
    ['fails with a revoked Proxy', () => throwError(revokedProxy), /connectionFactory failed with an object that cannot be inspected, which is not an Error$/],
    ['fails with a Proxy that refuses its prototype', () => throwError(() => new Proxy({}, { getPrototypeOf: () => { throw new Error('no prototype'); } })), /connectionFactory failed with an object \(\[object Object\]\), which is not an Error$/],
    ['throws an Error whose message cannot be read', () => { throw errorWithUnreadableMessage(); }, /connectionFactory threw: an Error whose message cannot be read$/],
  ];
  for (const [what, factory, message] of broken) {
    it(`fails the checkout with a PoolCallbackError when the factory ${what}, and frees the slot`, function () {
      const { pool, events } = poolWith(factory);
      const first = checkOutOnce(pool);
      expect(first.errors, 'settled once').to.have.length(1);
      const error = first.errors[0] as PoolCallbackError;
      expect(error).to.be.instanceOf(PoolCallbackError);
      expect(error.callback).to.equal('connectionFactory');
      expect(error.message).to.match(message);
      expect(events.filter((e) => e.type === 'ConnectionClosed')).to.have.length(1);
      expect(events.at(-1)).to.include({ type: 'ConnectionCheckOutFailed', reason: 'connectionError' });
      expect(pool.snapshot()).to.include({ pendingConnectionCount: 0, totalConnectionCount: 0 });
    });
  }

  it('tears down an object it cannot accept, so no socket is left behind', function () {
    let destroyed = 0;
    const { pool } = poolWith((d) => of({ id: d.id + 1, destroy: () => destroyed++ }));
    checkOutOnce(pool);
    expect(destroyed).to.equal(1);
  });

  it('fails the establishment with a PoolCallbackError when clearOnEstablishmentError throws, keeping both errors', function () {
    const clock = new VirtualClock();
    const refused = new Error('connection refused');
    const mock = new MockConnectionFactory({ scheduler: clock, failWith: () => refused });
    const pool = new ConnectionPoolCore<MockConnection>({
      address: 'db:27017',
      scheduler: clock,
      connectionFactory: mock.factory,
      clearOnEstablishmentError: () => {
        throw new Error('policy bug');
      },
    });
    pool.ready();
    const errors: unknown[] = [];
    pool.checkOut().subscribe({ error: (e) => errors.push(e) });
    clock.advance(0);
    expect(errors).to.have.length(1);
    const error = errors[0] as PoolCallbackError;
    expect(error).to.be.instanceOf(PoolCallbackError);
    expect(error.callback).to.equal('clearOnEstablishmentError');
    expect(error.message).to.match(/clearOnEstablishmentError threw: policy bug; the establishment had failed with: connection refused/);
    expect((error.cause as Error).message).to.equal('policy bug');
    expect(error.establishmentError).to.equal(refused);
    expect(pool.snapshot()).to.include({ pendingConnectionCount: 0, totalConnectionCount: 0 });
    expect(pool.state, 'the default rule decided: an unlabelled error clears').to.equal('paused');
  });

  it('fails the establishment with a PoolCallbackError when clearOnEstablishmentError is async; the default decides and no rejection goes unhandled', async function () {
    const overloaded = new CmapError('overloaded', { labels: [ErrorLabel.SystemOverloadedError] });
    const unhandled = await unhandledRejectionsOf(() => {
      for (const [policy, rejects] of [[async () => false, false], [async () => Promise.reject(new Error('policy bug')), true]] as const) {
        const { pool, events } = poolWith(() => throwError(() => overloaded), policy as never);
        const { errors } = checkOutOnce(pool);
        expect(errors).to.have.length(1);
        const error = errors[0] as PoolCallbackError;
        expect(error).to.be.instanceOf(PoolCallbackError);
        expect(error.message).to.equal('clearOnEstablishmentError returned a Promise (it must return a boolean); the establishment had failed with: overloaded');
        expect(error.establishmentError).to.equal(overloaded);
        expect(Object.hasOwn(error, 'cause'), 'nothing was thrown').to.equal(false);
        expect(events.some((e) => e.type === 'ConnectionPoolCleared'), `the default decided (rejects: ${rejects}): an overload does not clear`).to.equal(false);
        expect(pool.snapshot()).to.include({ pendingConnectionCount: 0, totalConnectionCount: 0, state: 'ready' });
      }
    });
    expect(unhandled).to.deep.equal([]);
  });

  it('says clearOnEstablishmentError returned a Promise when it returns a thenable that calls either callback without asking', function () {
    const overloaded = new CmapError('overloaded', { labels: [ErrorLabel.SystemOverloadedError] });
    for (const settle of ['fulfil', 'reject'] as const) {
      const policy = () => ({ then: (fulfil: (v: boolean) => void, reject: (e: Error) => void) => (settle === 'fulfil' ? fulfil(false) : reject(new Error('policy bug'))) });
      const { pool } = poolWith(() => throwError(() => overloaded), policy as never);
      const { errors } = checkOutOnce(pool);
      expect(errors).to.have.length(1);
      expect((errors[0] as Error).message, settle).to.equal('clearOnEstablishmentError returned a Promise (it must return a boolean); the establishment had failed with: overloaded');
    }
  });

  it('fails the establishment once when clearOnEstablishmentError throws on an error whose message and labels cannot be read', function () {
    const odd = Object.create(MongoNetworkError.prototype) as MongoNetworkError; // no errorLabels of its own
    Object.defineProperty(odd, 'message', { get: () => { throw new Error('unreadable'); } });
    const { pool } = poolWith(() => throwError(() => odd), () => {
      throw new Error('policy bug');
    });
    const { errors } = checkOutOnce(pool);
    expect(errors).to.have.length(1);
    expect((errors[0] as PoolCallbackError).message).to.match(/policy bug; the establishment had failed with: an Error whose message cannot be read$/);
    expect(pool.snapshot()).to.include({ pendingConnectionCount: 0, totalConnectionCount: 0, state: 'paused' });
  });

  it('keeps what the factory threw as the cause, and what it failed with when that is not an Error', function () {
    const bug = new Error('factory bug');
    const threw = checkOutOnce(
      poolWith(() => {
        throw bug;
      }).pool,
    );
    expect((threw.errors[0] as PoolCallbackError).cause).to.equal(bug);
    const failed = checkOutOnce(poolWith(() => throwError(() => 'no route')).pool);
    expect((failed.errors[0] as PoolCallbackError).cause).to.equal('no route');
  });
});

describe('CommandRunner', function () {
  class Plain implements PoolConnection {
    destroyed = 0;
    constructor(readonly id: number) {}
    destroy(): void {
      this.destroyed++;
    }
  }

  it('an establishment the pool abandons (close, clear) is not reported to clearOnEstablishmentError, even when its factory fails on abort', function () {
    let aborted = 0;
    // As the TCP factory does: the descriptor's signal aborting fails the establishment.
    const factory: ConnectionFactory<PoolConnection> = (d) =>
      new Observable<PoolConnection>((subscriber) => {
        const onAbort = (): void => {
          aborted++;
          subscriber.error(new Error('establishment aborted'));
        };
        d.signal.addEventListener('abort', onAbort, { once: true });
        return () => d.signal.removeEventListener('abort', onAbort);
      });
    const policyCalls: Error[] = [];
    const { pool } = poolWith(factory, (e) => (policyCalls.push(e), true));
    pool.checkOut().subscribe({ error: () => undefined });
    pool.clear({ interruptInUseConnections: true });
    pool.ready();
    pool.checkOut().subscribe({ error: () => undefined });
    pool.close();
    expect(policyCalls.map((e) => e.message)).to.deep.equal([]);
    expect(aborted, 'the factory saw no abort after it was unsubscribed').to.equal(0);
  });

  it('takes the first value of the factory\'s Observable, then unsubscribes from it, even when it emitted synchronously', function () {
    let tornDown = 0;
    const factory: ConnectionFactory<PoolConnection> = (d) =>
      new Observable<PoolConnection>((subscriber) => {
        subscriber.next(new Plain(d.id));
        subscriber.next(new Plain(d.id)); // ignored: torn down
        return () => tornDown++; // never completes on its own
      });
    const { pool } = poolWith(factory);
    const { connections, errors } = checkOutOnce(pool);
    expect(errors).to.deep.equal([]);
    expect(connections.map((c) => c.id)).to.deep.equal([1]);
    expect(tornDown).to.equal(1);
    expect(pool.snapshot()).to.include({ totalConnectionCount: 1, inUseConnectionCount: 1 });
  });

  it('asks clearOnEstablishmentError only about establishments that failed', function () {
    const asked: Error[] = [];
    const policy = (e: Error): boolean => (asked.push(e), true);
    const { pool } = poolWith((d) => of(new Plain(d.id)), policy); // emits, then completes
    const { connections } = checkOutOnce(pool);
    expect(connections).to.have.length(1);
    expect(asked).to.deep.equal([]);
    expect(pool.state).to.equal('ready');
  });

  it('by default does not clear the pool for an establishment error labelled SystemOverloadedError', function () {
    expect(defaultClearOnEstablishmentError(new Error('refused'))).to.equal(true);
    expect(defaultClearOnEstablishmentError(new CmapError('handshake failed'))).to.equal(true);
    const overloaded = new CmapError('overloaded', { labels: [ErrorLabel.SystemOverloadedError] });
    expect(defaultClearOnEstablishmentError(overloaded)).to.equal(false);
    const { pool, events } = poolWith(() => throwError(() => overloaded));
    const { errors } = checkOutOnce(pool);
    expect(errors).to.deep.equal([overloaded]);
    expect(pool.state).to.equal('ready');
    expect(events.map((e) => e.type)).to.not.include('ConnectionPoolCleared');
  });

  it('tears down what an abandoned Promise establishment resolves to, and aborts its signal', async function () {
    let resolve: ((c: Plain) => void) | undefined;
    let signal: AbortSignal | undefined;
    const { pool } = poolWith((d) => {
      signal = d.signal;
      return new Promise<Plain>((r) => (resolve = r));
    });
    const { errors } = checkOutOnce(pool);
    pool.close(); // abandons the establishment under way
    expect(signal?.aborted).to.equal(true);
    expect(errors[0]).to.be.instanceOf(PoolClosedError);
    const late = new Plain(1);
    resolve!(late);
    await microtasks();
    expect(late.destroyed).to.equal(1);
  });

  it('abandons an establishment whose Observable has a `then` that cannot be read without a fault of the pool', function () {
    const reported: unknown[] = [];
    const previous = config.onUnhandledError;
    config.onUnhandledError = (e) => reported.push(e);
    try {
      const pending = new Observable<PoolConnection>(() => undefined);
      Object.defineProperty(pending, 'then', { get: () => { throw new Error('then cannot be read'); } });
      const { pool } = poolWith(() => pending);
      const { errors } = checkOutOnce(pool);
      pool.close(); // abandons the establishment under way
      expect(errors[0]).to.be.instanceOf(PoolClosedError);
      expect(reported.map(String)).to.deep.equal([]);
      expect(pool.snapshot().totalConnectionCount).to.equal(0);
    } finally {
      config.onUnhandledError = previous;
    }
  });

  describe('handshakeDone (load-balanced mode)', function () {
    const A = 'aaaaaaaaaaaaaaaaaaaaaaaa';

    /** A load-balanced pool whose factory reports `reported` through handshakeDone, then a connection reporting `serviceId`. */
    function lbPool(reported: unknown, serviceId: string) {
      const clock = new VirtualClock();
      const pool = new ConnectionPoolCore<PoolConnection>({
        address: 'lb:27017',
        loadBalanced: true,
        scheduler: clock,
        connectionFactory: (d) => {
          d.handshakeDone?.(reported as string);
          return of({ id: d.id, serviceId, destroy: () => undefined });
        },
      });
      pool.ready();
      return pool;
    }

    it('ignores a serviceId that is not a string: the connection joins the service it reports once established', function () {
      for (const reported of [undefined, null, 7, { toHexString: () => A }]) {
        const pool = lbPool(reported, A);
        const { connections } = checkOutOnce(pool);
        expect(connections, String(reported)).to.have.length(1);
        expect(pool.snapshot().serviceGenerations, String(reported)).to.deep.equal([{ serviceId: A, generation: 0, connectionCount: 1 }]);
        pool.close();
      }
    });

    it('names the service in lower case, as clear({ serviceId }) does, so a clear of that service makes the connection stale', function () {
      const pool = lbPool(A.toUpperCase(), A.toUpperCase());
      const events: ConnectionPoolEvent[] = [];
      pool.events$.subscribe((e) => events.push(e));
      const { connections } = checkOutOnce(pool);
      expect(pool.snapshot().serviceGenerations).to.deep.equal([{ serviceId: A, generation: 0, connectionCount: 1 }]);
      pool.clear({ serviceId: A });
      expect(pool.serviceGeneration(A)).to.equal(1);
      pool.checkIn(connections[0]!); // taken at generation 0, before the clear: stale
      expect(events.filter((e) => e.type === 'ConnectionClosed').map((e) => (e as { reason?: string }).reason)).to.deep.equal(['stale']);
      expect(pool.snapshot().totalConnectionCount).to.equal(0);
      pool.close();
    });
  });

  it('disarms the pool\'s timers when it closes: nothing stays scheduled', function () {
    const clock = new VirtualClock();
    const mock = new MockConnectionFactory({ scheduler: clock, establishDelayMS: 10 });
    const pool = new ConnectionPoolCore<MockConnection>({ address: 'db:27017', maxPoolSize: 1, waitQueueTimeoutMS: 1000, scheduler: clock, connectionFactory: mock.factory });
    pool.ready();
    pool.checkOut().subscribe();
    clock.advance(10);
    pool.checkOut().subscribe({ error: () => undefined }); // waits: the WaitQueue timer is armed
    expect(clock.actions.length, 'the Background Thread and the WaitQueue timers').to.equal(2);
    pool.close();
    expect(clock.actions).to.deep.equal([]);
  });
});

describe('clearOnEstablishmentError: the generation of the establishment it is asked about', function () {
  it('is told the generation its connection was created in: older than the pool\'s for one begun before a clear, and that one does not clear the pool', async function () {
    const pending: { generation: number; fail: (error: Error) => void }[] = [];
    const factory: ConnectionFactory<PoolConnection> = (d) => new Observable<PoolConnection>((subscriber) => void pending.push({ generation: d.generation, fail: (e) => subscriber.error(e) }));
    const asked: { generation: number; poolGeneration: number }[] = [];
    const clock = new VirtualClock();
    const pool: ConnectionPoolCore<PoolConnection> = new ConnectionPoolCore<PoolConnection>({
      address: 'db:27017',
      maxConnecting: 2,
      scheduler: clock,
      connectionFactory: factory,
      clearOnEstablishmentError: (_error, establishment) => {
        asked.push({ generation: establishment.generation, poolGeneration: pool.generation });
        return true;
      },
    });
    pool.ready();
    checkOutOnce(pool);
    await microtasks();
    pool.clear();
    pool.ready();
    checkOutOnce(pool);
    await microtasks();
    expect(pending.map((p) => p.generation)).to.deep.equal([0, 1]);
    // The one begun before the clear: stale, no clear.
    pending[0].fail(new Error('refused'));
    await microtasks();
    expect(pool.generation).to.equal(1);
    // The current one: the policy's answer clears the pool.
    pending[1].fail(new Error('refused'));
    await microtasks();
    expect(pool.generation).to.equal(2);
    expect(asked).to.deep.equal([
      { generation: 0, poolGeneration: 1 },
      { generation: 1, poolGeneration: 1 },
    ]);
    pool.close();
  });
});
