/**
 * The caller's frames on a failed checkout: on Node.js 22 and later, an awaited checkout that fails with a pool error
 * of its own names, in the error's stack, the async functions that awaited it, whether it failed later (WaitQueue
 * timeout, clear) or at once (closed pool); an error shared by several checkouts, a cancel's, and any stack on
 * Node.js 20 stay as they were; the Promise semantics and the order of outcomes stay those of native Promises.
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
import { appendCallerFrames, countFailure } from '../../lib/pool/caller-frames';
import { of } from 'rxjs';
import { MockConnection, VirtualClock } from '../../lib/testing';
import { fullGc } from '../support/full-gc';
import { microtasks } from '../support/microtasks';
import { LAZY_STACKS } from '../support/lazy-stacks';
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

/**
 * Checks the callers an awaited checkout's error names: `callers`, in that order, on Node.js 22 and later; on 20, none
 * of them (its stack stays the pool's).
 */
function expectCallers(error: unknown, callers: readonly string[]): void {
  const frames = asyncFrames(error);
  if (LAZY_STACKS) expect(frames.join(' '), String((error as Error).stack)).to.include(callers.join(' '));
  else for (const caller of callers) expect(frames, String((error as Error).stack)).to.not.include(caller);
}

/** Whether V8 itself gives an error built inside a thenable's `then`, called by an `await`, that awaiter's frame. */
async function v8NamesTheAwaiterOfAThenable(): Promise<boolean> {
  let stack = '';
  async function probeAwaiter(): Promise<void> {
    await {
      then(resolve: (value: undefined) => void): void {
        stack = String(new Error('probe').stack);
        resolve(undefined);
      },
    };
  }
  await probeAwaiter();
  return stack.includes('at async probeAwaiter');
}

describe('the caller frames of a failed checkout', function () {
  it('a WaitQueue timeout names the async functions that awaited the checkout, after the pool frames', async function () {
    const { pool, clock } = virtualPool();
    const held = await pool.checkOut();
    const waiting = handleAccountRoute(pool.checkOut()).catch((e: unknown) => e);
    await clock.advanceAsync(100);
    const error = await waiting;
    expect(error).to.be.instanceOf(WaitQueueTimeoutError);
    expectCallers(error, ['loadAccount', 'handleAccountRoute']);
    const stack = String((error as Error).stack);
    expect(stack.startsWith('WaitQueueTimeoutError: Timed out'), stack).to.equal(true);
    if (LAZY_STACKS) expect(stack.indexOf('waitQueueTimer'), 'the pool frame where it was decided, first').to.be.within(0, stack.indexOf('at async loadAccount'));
    pool.checkIn(held);
    pool.close();
  });

  it('so does a checkout refused at once by a closed pool, and the one waiter a clear evicted', async function () {
    const { pool } = virtualPool();
    const held = await pool.checkOut();
    const evicted = handleAccountRoute(pool.checkOut()).catch((e: unknown) => e);
    await microtasks(); // an await enters its checkout on a microtask
    expect(pool.snapshot().waitQueueLength).to.equal(1);
    pool.clear();
    const cleared = await evicted;
    expect(cleared).to.be.instanceOf(PoolClearedError);
    expectCallers(cleared, ['loadAccount', 'handleAccountRoute']);
    pool.close();
    const closed = await handleAccountRoute(pool.checkOut()).catch((e: unknown) => e);
    expect(closed).to.be.instanceOf(PoolClosedError);
    expectCallers(closed, ['loadAccount', 'handleAccountRoute']);
    const named = asyncFrames(closed).filter((f) => f === 'loadAccount');
    expect(named, 'once, also where V8 named them itself').to.have.length(LAZY_STACKS || (await v8NamesTheAwaiterOfAThenable()) ? 1 : 0);
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
    expectCallers(error, ['runQuery']);
  });

  it('names no caller when two awaits share one request, whether it fails at once or while they wait', async function () {
    const { pool, clock } = virtualPool();
    const held = await pool.checkOut();
    async function reportingJob(request: PromiseLike<MockConnection>): Promise<unknown> {
      return await request;
    }
    async function userRoute(request: PromiseLike<MockConnection>): Promise<unknown> {
      return await request;
    }
    const waiting = pool.checkOut();
    const both = Promise.all([reportingJob(waiting).catch((e: unknown) => e), userRoute(waiting).catch((e: unknown) => e)]);
    await clock.advanceAsync(100);
    const [a, b] = await both;
    expect(a).to.be.instanceOf(WaitQueueTimeoutError);
    expect(b, 'one error for both').to.equal(a);
    expect(asyncFrames(a)).to.not.include('reportingJob').and.not.include('userRoute');
    pool.close();
    const refused = pool.checkOut();
    const [c, d] = await Promise.all([reportingJob(refused).catch((e: unknown) => e), userRoute(refused).catch((e: unknown) => e)]);
    expect(c).to.be.instanceOf(PoolClosedError);
    expect(d, 'one error for both').to.equal(c);
    // Built inside the first await's `then`, the error names that awaiter by itself where V8 follows that call.
    const ownFrames = (await v8NamesTheAwaiterOfAThenable()) ? ['reportingJob'] : [];
    expect(asyncFrames(c).filter((f) => f === 'reportingJob' || f === 'userRoute')).to.deep.equal(ownFrames);
    void held;
  });

  it("appends no caller's frames to the one error a clear gives every waiter, nor to the events carrying it", async function () {
    const { pool } = virtualPool();
    const held = await pool.checkOut();
    const failed: unknown[] = [];
    pool.events$.subscribe((e) => void (e.type === 'ConnectionCheckOutFailed' && failed.push(e.error)));
    async function alphaRoute(): Promise<unknown> {
      return await pool.checkOut();
    }
    async function betaRoute(): Promise<unknown> {
      return await pool.checkOut();
    }
    const observed = new Promise((resolve) => pool.checkOut().subscribe({ error: resolve }));
    const errors = Promise.all([alphaRoute().catch((e: unknown) => e), betaRoute().catch((e: unknown) => e), observed]);
    await microtasks(); // an await enters its checkout on a microtask
    expect(pool.snapshot().waitQueueLength).to.equal(3);
    pool.clear();
    const [alpha, beta, viaObservable] = await errors;
    expect(beta, 'one error').to.equal(alpha);
    expect(viaObservable, 'one error').to.equal(alpha);
    expect(failed).to.deep.equal([alpha, alpha, alpha]);
    expect(asyncFrames(alpha)).to.not.include('alphaRoute').and.not.include('betaRoute');
    pool.checkIn(held);
    pool.close();
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
    // A then made before the failure, settled by close(), behaves alike, and its onfulfilled is never called.
    const open = virtualPool();
    const held = await open.pool.checkOut();
    const early = open.pool.checkOut().then(
      () => ['fulfilled'],
      (e: unknown) => ['early', e],
    );
    open.pool.close();
    const [label, error] = (await early) as [string, unknown];
    expect(label).to.equal('early');
    expect(error).to.be.instanceOf(PoolClosedError);
    void held;
  });

  it('keeps the order in which outcomes reach their callers: a failure first stays first', async function () {
    // A native rejected Promise's callbacks run as soon as a fulfilled one's: the frames must not delay them.
    const closed = virtualPool().pool;
    closed.close();
    const open = virtualPool().pool;
    const order: string[] = [];
    const done = Promise.all([
      closed.checkOut().then(undefined, () => order.push('closed')),
      open.checkOut().then((c) => {
        order.push('open');
        open.checkIn(c);
      }),
    ]);
    await done;
    expect(order).to.deep.equal(['closed', 'open']);
    const raced = await Promise.race([closed.checkOut(), open.checkOut()]).then(
      (c) => c,
      (e: unknown) => e,
    );
    expect(raced, 'Promise.race settles with the failure, as with native Promises').to.be.instanceOf(PoolClosedError);
    open.close();
  });

  it('appends at the first read of the stack, once, and keeps what is assigned to it (Node.js 22 and later)', async function () {
    if (!LAZY_STACKS) this.skip();
    async function inner(error: Error): Promise<void> {
      await null;
      appendCallerFrames(error);
    }
    async function outer(error: Error): Promise<void> {
      await inner(error);
    }
    const error = new PoolClosedError('db.example:27017');
    const before = String(error.stack);
    countFailure(error);
    await outer(error);
    expect(String(error.stack)).to.equal(`${before}\n${String(error.stack).split('\n').slice(before.split('\n').length).join('\n')}`);
    expect(asyncFrames(error)).to.include('outer');
    await outer(error);
    expect(asyncFrames(error).filter((f) => f === 'outer'), 'once').to.have.length(1);
    error.stack = 'replaced';
    expect(error.stack).to.equal('replaced');
  });

  it("lets the awaiting functions' objects go once the stack is read, as any error built in an async function does (Node.js 22 and later)", async function () {
    if (!LAZY_STACKS) this.skip();
    const { pool, clock } = virtualPool();
    const held = await pool.checkOut();
    class Report {
      readonly rows = new Array<number>(1000).fill(1);
      constructor(private readonly source: ConnectionPoolCore<MockConnection>) {}
      async load(): Promise<unknown> {
        return await this.source.checkOut();
      }
    }
    let report: Report | undefined = new Report(pool);
    const kept = new WeakRef(report);
    const failing = report.load().catch((e: unknown) => e);
    report = undefined;
    await clock.advanceAsync(100);
    const error = await failing;
    const collected = async (): Promise<boolean> => {
      await new Promise((resolve) => setImmediate(resolve));
      fullGc();
      await new Promise((resolve) => setImmediate(resolve));
      return kept.deref() === undefined;
    };
    expect(await collected(), 'unread: the captured frames hold the Report, as V8 holds any unformatted stack').to.equal(false);
    expect(asyncFrames(error)).to.include('Report.load');
    expect(await collected(), 'read: let go').to.equal(true);
    pool.checkIn(held);
    pool.close();
  });

  it('leaves a stack as it was when the error failed several checkouts, or cannot be read or replaced, and never throws', async function () {
    async function append(error: Error): Promise<void> {
      await null;
      appendCallerFrames(error);
    }
    const shared = new PoolClosedError('db.example:27017');
    const sharedBefore = shared.stack;
    countFailure(shared);
    countFailure(shared);
    await append(shared);
    expect(shared.stack, 'failed two checkouts').to.equal(sharedBefore);
    const frozen = new PoolClosedError('db.example:27017');
    countFailure(frozen);
    Object.freeze(frozen);
    const frozenBefore = frozen.stack;
    expect(outcome(() => appendCallerFrames(frozen))).to.equal(undefined);
    expect(frozen.stack).to.equal(frozenBefore);
    const plain = new PoolClosedError('db.example:27017');
    Object.defineProperty(plain, 'stack', { value: 'PoolClosedError: as Node.js 20 keeps it', writable: true, configurable: true });
    countFailure(plain);
    await append(plain);
    expect(plain.stack, 'a plain value, as on Node.js 20').to.equal('PoolClosedError: as Node.js 20 keeps it');
    const saved = Error.prepareStackTrace;
    const unusual = new PoolClosedError('db.example:27017');
    countFailure(unusual);
    Error.prepareStackTrace = () => ['not', 'a', 'string'];
    try {
      await append(unusual);
      expect(outcome(() => unusual.stack)).to.not.be.instanceOf(Error);
    } finally {
      Error.prepareStackTrace = saved;
    }
  });
});
