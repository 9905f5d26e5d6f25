/**
 * The caller's frames on a failed checkout: an awaited checkout that fails with a pool error names, in the error's
 * stack, the async functions that awaited it, whether it failed later (WaitQueue timeout, clear) or at once (closed
 * pool); a cancel keeps its frameless error; the Promise semantics of `then` stay those of a rejected Promise.
 */
import { expect } from 'chai';
import {
  CheckOutCancelledError,
  ConnectionPoolCore,
  PoolClearedError,
  PoolClosedError,
  WaitQueueTimeoutError,
  type CheckOutRequest,
} from '../../lib';
import { appendCallerFrames } from '../../lib/pool/caller-frames';
import { of } from 'rxjs';
import { MockConnection, VirtualClock } from '../../lib/testing';
import { outcome } from '../support/prototype-pollution';

/** A ready pool of one connection on virtual time, established at once; waitQueueTimeoutMS 100. */
function virtualPool(maxPoolSize = 1) {
  const clock = new VirtualClock();
  const pool = new ConnectionPoolCore<MockConnection>({
    address: 'db.example:27017',
    scheduler: clock,
    connectionFactory: (d) => of(new MockConnection(d)),
    maxPoolSize,
    waitQueueTimeoutMS: 100,
  });
  pool.ready();
  return { pool, clock };
}

// Two levels of the caller's own async functions, as an application's route and its data layer.
async function loadAccount(request: PromiseLike<MockConnection>): Promise<MockConnection> {
  return await request;
}
async function handleAccountRoute(request: PromiseLike<MockConnection>): Promise<MockConnection> {
  return await loadAccount(request);
}

/** The `at async` lines of a stack, by function name. */
function asyncFrames(error: unknown): string[] {
  return String((error as Error).stack)
    .split('\n')
    .filter((line) => line.startsWith('    at async '))
    .map((line) => line.slice('    at async '.length).split(' ')[0]!);
}

describe('the caller frames of a failed checkout', function () {
  it('a WaitQueue timeout names the async functions that awaited the checkout, after the pool frames', async function () {
    const { pool, clock } = virtualPool();
    const held = await pool.checkOut();
    const waiting = handleAccountRoute(pool.checkOut()).catch((e: unknown) => e);
    await clock.advanceAsync(100);
    const error = await waiting;
    expect(error).to.be.instanceOf(WaitQueueTimeoutError);
    expect(asyncFrames(error).join(' ')).to.include('loadAccount handleAccountRoute');
    const stack = String((error as Error).stack);
    expect(stack.startsWith('WaitQueueTimeoutError: Timed out'), stack).to.equal(true);
    expect(stack.indexOf('waitQueueTimer'), 'the pool frame where it was decided, first').to.be.within(0, stack.indexOf('at async loadAccount'));
    pool.checkIn(held);
    pool.close();
  });

  it('so does a checkout refused at once by a closed pool, and one evicted by a clear', async function () {
    const { pool } = virtualPool();
    const held = await pool.checkOut();
    const evicted = handleAccountRoute(pool.checkOut()).catch((e: unknown) => e);
    pool.clear();
    const cleared = await evicted;
    expect(cleared).to.be.instanceOf(PoolClearedError);
    expect(asyncFrames(cleared).join(' ')).to.include('loadAccount handleAccountRoute');
    pool.close();
    const closed = await handleAccountRoute(pool.checkOut()).catch((e: unknown) => e);
    expect(closed).to.be.instanceOf(PoolClosedError);
    expect(asyncFrames(closed).join(' ')).to.include('loadAccount handleAccountRoute');
    void held;
  });

  it('withConnection on a closed pool names the function that awaited it', async function () {
    const { pool } = virtualPool();
    pool.close();
    async function runQuery(): Promise<unknown> {
      return await pool.withConnection((c) => c.id);
    }
    const error = await runQuery().catch((e: unknown) => e);
    expect(error).to.be.instanceOf(PoolClosedError);
    expect(asyncFrames(error)).to.include('runQuery');
  });

  it('appends the frames once when two awaits share one request, those of the first to receive it', async function () {
    const { pool } = virtualPool();
    pool.close();
    const request = pool.checkOut();
    async function first(): Promise<unknown> {
      return await request;
    }
    async function second(): Promise<unknown> {
      return await request;
    }
    const [a, b] = await Promise.all([first().catch((e: unknown) => e), second().catch((e: unknown) => e)]);
    expect(a, 'one error for both').to.equal(b);
    expect(asyncFrames(a)[0]).to.equal('first');
    expect(asyncFrames(a)).to.not.include('second');
  });

  it('leaves a cancelled checkout frameless: its place is in the abort reason', async function () {
    const { pool } = virtualPool();
    const held = await pool.checkOut();
    const controller = new AbortController();
    const waiting = handleAccountRoute(pool.checkOut({ signal: controller.signal })).catch((e: unknown) => e);
    controller.abort();
    const error = await waiting;
    expect(error).to.be.instanceOf(CheckOutCancelledError);
    expect(String((error as Error).stack)).to.equal(`CheckOutCancelledError: ${(error as Error).message}`);
    pool.checkIn(held);
    pool.close();
  });

  it('keeps the semantics of a rejected Promise for every form of then', async function () {
    const { pool } = virtualPool();
    pool.close();
    const request: CheckOutRequest<MockConnection> = pool.checkOut();
    const seen: unknown[] = [];
    const handled = await request.then(undefined, (e: unknown) => {
      seen.push(e);
      return 'handled';
    });
    expect(handled).to.equal('handled');
    expect(seen).to.have.length(1);
    expect(await request.then((c) => c).then(undefined, (e: unknown) => e), 'passed through without onrejected').to.equal(seen[0]);
    const thrown = new Error('from onrejected');
    expect(
      await request.then(undefined, () => {
        throw thrown;
      }).then(undefined, (e: unknown) => e),
    ).to.equal(thrown);
    // A then made before the failure, settled by close(), behaves alike.
    const open = virtualPool();
    const held = await open.pool.checkOut();
    const early = open.pool.checkOut().then(undefined, (e: unknown) => ['early', e]);
    open.pool.close();
    const [label, error] = (await early) as [string, unknown];
    expect(label).to.equal('early');
    expect(error).to.be.instanceOf(PoolClosedError);
    void held;
  });

  it('never throws, and leaves a stack it cannot read or write as it was', function () {
    const frozen = Object.freeze(new PoolClosedError('db.example:27017'));
    const before = frozen.stack;
    expect(outcome(() => appendCallerFrames(frozen))).to.equal(undefined);
    expect(frozen.stack).to.equal(before);
    const saved = Error.prepareStackTrace;
    Error.prepareStackTrace = () => ['not', 'a', 'string'];
    try {
      const error = new PoolClosedError('db.example:27017');
      expect(outcome(() => appendCallerFrames(error))).to.equal(undefined);
    } finally {
      Error.prepareStackTrace = saved;
    }
  });
});
