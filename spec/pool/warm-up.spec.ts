/**
 * warmUp() / warmUp$(): waiting until the pool holds minPoolSize established connections, on virtual time and
 * against the endpoint.
 */
import { getEventListeners } from 'node:events';
import { expect } from 'chai';
import { ConnectionPool, ConnectionPoolCore, InvalidOptionError, MongoNetworkError, PoolClosedError, type PoolSnapshot } from '../../lib';
import { MockConnectionFactory, VirtualClock, type MockConnection } from '../../lib/testing';
import { startTestEndpoint } from '../support/endpoint';
import { microtasks } from '../support/microtasks';
import { brokenAtRead, refusingListeners } from '../support/signals';

function virtualPool(options: { minPoolSize?: number; failId?: number; backgroundThreadIntervalMS?: number } = {}) {
  const clock = new VirtualClock();
  const mock = new MockConnectionFactory({
    scheduler: clock,
    establishDelayMS: 10,
    failWith: (d) => (d.id === options.failId ? new MongoNetworkError('db.example:27017', `connection ${d.id} refused`) : undefined),
  });
  const pool = new ConnectionPoolCore<MockConnection>({
    address: 'db.example:27017',
    scheduler: clock,
    connectionFactory: mock.factory,
    minPoolSize: options.minPoolSize ?? 5,
    maxConnecting: 2,
    ...(options.backgroundThreadIntervalMS === undefined ? {} : { backgroundThreadIntervalMS: options.backgroundThreadIntervalMS }),
  });
  return { pool, clock };
}

/** Settles `promise` into an inspectable outcome. */
function watch<T>(promise: Promise<T>) {
  const outcome: { value?: T; error?: unknown; settled: boolean } = { settled: false };
  promise.then(
    (value) => Object.assign(outcome, { value, settled: true }),
    (error: unknown) => Object.assign(outcome, { error, settled: true }),
  );
  return outcome;
}

describe('ConnectionPoolCore.warmUp', function () {
  it('resolves once the ready pool holds minPoolSize established connections, waiting while it is paused', async function () {
    const { pool, clock } = virtualPool();
    const warm = watch(pool.warmUp());
    clock.advance(100);
    await microtasks();
    expect(warm.settled, 'paused: nothing fills it').to.equal(false);
    pool.ready(); // t=100: two establishments at a time, 10 ms each
    for (const [t, settled] of [[110, false], [120, false], [130, true]] as const) {
      clock.advanceTo(t);
      await microtasks();
      expect(warm.settled, `at ${t}`).to.equal(settled);
    }
    expect(warm.value).to.deep.include({ state: 'ready', totalConnectionCount: 5, pendingConnectionCount: 0, availableConnectionCount: 5 });
    expect(await pool.warmUp(), 'at once when warm').to.deep.include({ totalConnectionCount: 5 });
  });

  it('rejects with the error of an establishment that failed', async function () {
    const { pool, clock } = virtualPool({ failId: 3 });
    pool.ready();
    const warm = watch(pool.warmUp());
    clock.advance(20);
    await microtasks();
    expect(warm.error).to.be.instanceOf(MongoNetworkError);
    expect((warm.error as Error).message).to.equal('connection 3 refused');
  });

  it('rejects with the error of an establishment already under way when it was called (ready() started it), as in `pool.ready(); await pool.warmUp()`', async function () {
    const { pool, clock } = virtualPool({ failId: 1 });
    pool.ready(); // connections 1 and 2 are being established before warmUp() subscribes
    expect(pool.snapshot().pendingConnectionCount).to.equal(2);
    const warm = watch(pool.warmUp());
    clock.advance(100);
    await microtasks();
    // Without counting connection 1, its failure (which clears and pauses the pool) left warmUp waiting for good.
    expect(warm.settled, 'settled').to.equal(true);
    expect(warm.error).to.be.instanceOf(MongoNetworkError);
    expect((warm.error as Error).message).to.equal('connection 1 refused');
  });

  it('is not failed by a connection established before it was called that closes with an error: only establishments fail it', async function () {
    const { pool, clock } = virtualPool({ minPoolSize: 3 });
    pool.ready();
    clock.advance(10); // connections 1 and 2 established, 3 being established
    const taken: MockConnection[] = [];
    pool.checkOut().subscribe((c) => taken.push(c));
    expect(taken).to.have.length(1);
    const warm = watch(pool.warmUp());
    Object.assign(taken[0]!, { errored: true, error: new MongoNetworkError('db.example:27017', 'connection reset') });
    pool.checkIn(taken[0]!); // closed with reason error
    await microtasks();
    expect(warm.settled, 'an in-use connection closing is no failed establishment').to.equal(false);
    clock.advance(100);
    await microtasks();
    expect(warm.error).to.equal(undefined);
    expect(warm.value).to.deep.include({ state: 'ready', totalConnectionCount: 3, pendingConnectionCount: 0 });
  });

  it('rejects with PoolClosedError when the pool closes, and with the signal\'s reason when aborted, the pool filling on', async function () {
    const closing = virtualPool();
    closing.pool.ready();
    const warm = watch(closing.pool.warmUp());
    closing.pool.close();
    await microtasks();
    expect(warm.error).to.be.instanceOf(PoolClosedError);

    const { pool, clock } = virtualPool();
    pool.ready();
    const controller = new AbortController();
    const aborted = watch(pool.warmUp({ signal: controller.signal }));
    controller.abort(new Error('deploy cancelled'));
    await microtasks();
    expect((aborted.error as Error).message).to.equal('deploy cancelled');
    clock.advance(30);
    expect(pool.snapshot().availableConnectionCount).to.equal(5);
    expect(await pool.warmUp({ signal: AbortSignal.abort() }).catch((e: unknown) => (e as Error).name)).to.equal('AbortError');
  });

  it('leaves no abort listener on its signal once it resolves, rejects or is aborted, and adds none when already warm', async function () {
    const { pool, clock } = virtualPool({ minPoolSize: 2 });
    pool.ready();
    const listeners = (signal: AbortSignal): number => getEventListeners(signal, 'abort').length;
    const resolving = new AbortController();
    const warm = pool.warmUp({ signal: resolving.signal });
    expect(listeners(resolving.signal), 'while waiting').to.equal(1);
    clock.advance(10);
    await warm;
    expect(listeners(resolving.signal), 'resolved').to.equal(0);
    const already = new AbortController();
    await pool.warmUp({ signal: already.signal });
    expect(listeners(already.signal), 'already warm').to.equal(0);

    const other = virtualPool({ minPoolSize: 2 });
    other.pool.ready();
    const aborting = new AbortController();
    const aborted = watch(other.pool.warmUp({ signal: aborting.signal }));
    aborting.abort();
    await microtasks();
    expect(aborted.error).to.be.instanceOf(Error);
    expect(listeners(aborting.signal), 'aborted').to.equal(0);
    const closing = new AbortController();
    const closed = watch(other.pool.warmUp({ signal: closing.signal }));
    other.pool.close();
    await microtasks();
    expect(closed.error).to.be.instanceOf(PoolClosedError);
    expect(listeners(closing.signal), 'rejected').to.equal(0);
  });

  it('rejects with the error of a signal whose addEventListener throws, and stops waiting (no subscription left on events$)', async function () {
    const { pool } = virtualPool({ minPoolSize: 2 });
    pool.ready();
    const refused = new TypeError('listeners refused');
    const signal = new AbortController().signal;
    signal.addEventListener = () => {
      throw refused;
    };
    const outcome = watch(pool.warmUp({ signal }));
    await microtasks();
    expect(outcome.error).to.equal(refused);
    expect((pool as unknown as { poolState: { observed: boolean } }).poolState.observed, 'events$ still observed').to.equal(false);
  });

  it('a signal that breaks after it was accepted (aborted throws) or refuses a listener with a value that is not an Error rejects with an Error naming the warm-up\'s signal, the value its cause', async function () {
    const { pool } = virtualPool({ minPoolSize: 2 });
    pool.ready();
    for (const thrown of [null, undefined, Symbol('torn down'), 'torn down']) {
      // Read 1 is the option check: it breaks at the next.
      const broken = brokenAtRead(2, thrown);
      const refusing = refusingListeners(thrown);
      for (const [what, signal] of [['aborted throws', broken], ['addEventListener throws', refusing]] as const) {
        const outcome = watch(pool.warmUp({ signal }));
        await microtasks();
        expect(outcome.error, `${what}: ${String(thrown)}`).to.be.instanceOf(Error);
        expect((outcome.error as Error).message, `${what}: ${String(thrown)}`).to.match(/^the warm-up's signal refused a listener: /);
        expect((outcome.error as Error).cause, `${what}: ${String(thrown)}`).to.equal(thrown);
      }
    }
    expect((pool as unknown as { poolState: { observed: boolean } }).poolState.observed, 'events$ still observed').to.equal(false);
  });

  it('a signal whose reason cannot be read still ends the wait, with what reading it threw; one whose removeEventListener throws still resolves', async function () {
    // Before, the abort listener threw (reported from a timer: an uncaught exception) and warmUp never settled; a
    // signal that refused to let the pool's listener go threw from the warm-up's completion.
    const { pool, clock } = virtualPool({ minPoolSize: 2 });
    pool.ready();
    const controller = new AbortController();
    const unreadable = new TypeError('no reason');
    Object.defineProperty(controller.signal, 'reason', {
      get() {
        throw unreadable;
      },
    });
    const aborted = watch(pool.warmUp({ signal: controller.signal }));
    controller.abort();
    await microtasks();
    expect(aborted.error).to.equal(unreadable);
    const signal = new AbortController().signal;
    signal.removeEventListener = () => {
      throw new TypeError('listeners kept');
    };
    const warm = watch(pool.warmUp({ signal }));
    clock.advance(10);
    await microtasks();
    expect(warm.value).to.include({ availableConnectionCount: 2 });
  });

  it('as an Observable: emits the snapshot and completes; unsubscribing stops waiting', function () {
    const { pool, clock } = virtualPool({ minPoolSize: 2 });
    pool.ready();
    const seen: PoolSnapshot[] = [];
    let completed = false;
    pool.warmUp$().subscribe({ next: (s) => seen.push(s), complete: () => (completed = true) });
    const left = pool.warmUp$().subscribe(() => expect.fail('unsubscribed'));
    left.unsubscribe();
    clock.advance(10);
    expect(seen.map((s) => s.availableConnectionCount)).to.deep.equal([2]);
    expect(completed).to.equal(true);
  });

  it('refuses when nothing would fill the pool (background runs disabled), and a signal that is not one', async function () {
    const { pool } = virtualPool({ backgroundThreadIntervalMS: -1 });
    pool.ready();
    const refused = await pool.warmUp().catch((e: unknown) => e);
    expect(refused).to.be.instanceOf(InvalidOptionError);
    expect((refused as Error).message).to.equal(
      'Invalid backgroundThreadIntervalMS: -1 (backgroundThreadIntervalMS must be a positive number for warmUp() to fill the pool to minPoolSize)',
    );
    expect(() => pool.warmUp({ signal: 'soon' as never })).to.throw(InvalidOptionError, /signal/);
    const empty = virtualPool({ minPoolSize: 0 });
    empty.pool.ready();
    expect(await empty.pool.warmUp()).to.deep.include({ totalConnectionCount: 0 });
  });

  it('warms a pool of real connections on the endpoint', async function () {
    const endpoint = await startTestEndpoint();
    const pool = new ConnectionPool({ address: endpoint.address, connectionOptions: endpoint.connectionOptions, minPoolSize: 3 });
    try {
      pool.ready();
      const snapshot = await pool.warmUp({ signal: AbortSignal.timeout(5000) });
      expect(snapshot).to.deep.include({ availableConnectionCount: 3, pendingConnectionCount: 0 });
      if (endpoint.embedded !== undefined) expect(endpoint.embedded.openConnections).to.be.at.least(3);
    } finally {
      pool.close();
      await endpoint.stop();
    }
  });
});
