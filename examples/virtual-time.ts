/**
 * Testing an application on virtual time with `rxcmap/testing`: no sockets, no real time, exact timings.
 *
 * The application under test is `withBackoff$`: it runs a job on a pooled connection, and when the pool is saturated
 * (the checkout timed out in the WaitQueue) it backs off exponentially and tries again, a bounded number of times.
 * Every test builds a pool whose `scheduler` is a `VirtualClock` and whose `connectionFactory` is a
 * `MockConnectionFactory` timed on the same clock, then moves time with `clock.advance(ms)` and checks what happened
 * at which virtual millisecond:
 *
 * - establishing a connection takes exactly establishDelayMS;
 * - a checkout waiting on a full pool fails with WaitQueueTimeoutError at exactly waitQueueTimeoutMS;
 * - the application's backoff schedule, when a connection frees up in time, and when none does;
 * - why tests use `clock.advance(ms)` and not `flush()`: a pool's Background Thread re-arms itself for as long as the
 *   pool is open, so "run every timer" never ends; `advance` stops at a bound.
 *
 * Checkouts use the Observable form (`pool.checkOut().subscribe(...)`, `pool.withConnection$`), which enters the
 * pool synchronously on subscribe; `await pool.checkOut()` would enter it one microtask later, after the test's next
 * synchronous `clock.advance`.
 *
 * Imports come from the repository's source: `../lib` stands for `rxcmap`, `../lib/testing` for `rxcmap/testing`.
 *
 *   npx ts-node --transpile-only examples/virtual-time.ts
 */
import * as assert from 'node:assert/strict';
import { map, retry, throwError, timer, type ObservableInput, type Observable, type SchedulerLike } from 'rxjs';
import { ConnectionPool, WaitQueueTimeoutError, type ConnectionPoolEvent } from '../lib';
import { MockConnectionFactory, VirtualClock, type MockConnection } from '../lib/testing';

// ---------------------------------------------------------------------------------------------------------------
// The application under test

interface BackoffOptions {
  /** How many times the job is tried in all. */
  attempts: number;
  /** The wait before the 2nd attempt; doubled before each next one. */
  backoffMS: number;
  /** The clock of the backoff waits: the pool's (real timers in production, a VirtualClock in tests). */
  scheduler: SchedulerLike;
}

/**
 * Runs `job` on a pooled connection (checked in when the job ends). When the checkout times out in the WaitQueue
 * (the pool is saturated), waits `backoffMS`, then `2 * backoffMS`, ... and tries again, `attempts` times in all;
 * every other error is passed on at once.
 */
function withBackoff$<T>(
  pool: ConnectionPool<MockConnection>,
  job: (connection: MockConnection) => ObservableInput<T>,
  { attempts, backoffMS, scheduler }: BackoffOptions,
): Observable<T> {
  return pool.withConnection$(job).pipe(
    retry({
      count: attempts - 1,
      delay: (error: unknown, retryCount: number) =>
        error instanceof WaitQueueTimeoutError ? timer(backoffMS * 2 ** (retryCount - 1), scheduler) : throwError(() => error),
    }),
  );
}

// ---------------------------------------------------------------------------------------------------------------
// Test harness: a pool on virtual time, and a recorder of what an Observable did, and when

interface Harness {
  clock: VirtualClock;
  pool: ConnectionPool<MockConnection>;
  mocks: MockConnectionFactory;
  events: ConnectionPoolEvent[];
}

function virtualPool(options: { maxPoolSize: number; waitQueueTimeoutMS?: number; establishDelayMS: number }): Harness {
  const clock = new VirtualClock();
  const mocks = new MockConnectionFactory({ scheduler: clock, establishDelayMS: options.establishDelayMS });
  const pool = new ConnectionPool<MockConnection>({
    address: 'db.example:27017',
    maxPoolSize: options.maxPoolSize,
    waitQueueTimeoutMS: options.waitQueueTimeoutMS,
    scheduler: clock,
    connectionFactory: mocks.factory,
  });
  const events: ConnectionPoolEvent[] = [];
  pool.events$.subscribe((e) => events.push(e));
  pool.ready();
  return { clock, pool, mocks, events };
}

/** What an Observable did: its values, its error, and the virtual time of its end. */
interface Outcome<T> {
  values: T[];
  error: unknown;
  endedAt: number | undefined;
}

function record<T>(clock: VirtualClock, source: Observable<T>): Outcome<T> {
  const outcome: Outcome<T> = { values: [], error: undefined, endedAt: undefined };
  source.subscribe({
    next: (v) => outcome.values.push(v),
    error: (e: unknown) => {
      outcome.error = e;
      outcome.endedAt = clock.now();
    },
    complete: () => (outcome.endedAt = clock.now()),
  });
  return outcome;
}

const tests: { name: string; run: () => void }[] = [];
const test = (name: string, run: () => void): void => void tests.push({ name, run });

// ---------------------------------------------------------------------------------------------------------------
// The tests

test('establishing a connection takes exactly establishDelayMS of virtual time', () => {
  const { clock, pool, events } = virtualPool({ maxPoolSize: 1, establishDelayMS: 50 });
  const checkout = record(clock, pool.checkOut());

  clock.advance(49);
  assert.equal(checkout.values.length, 0, 'no connection yet at t = 49');
  clock.advance(1);
  assert.equal(checkout.values.length, 1, 'the connection is delivered at t = 50');
  assert.equal(checkout.endedAt, 50);
  const ready = events.find((e) => e.type === 'ConnectionReady');
  assert.equal(ready?.type === 'ConnectionReady' && ready.duration, 50);
  pool.checkIn(checkout.values[0]);
  pool.close();
});

test('a checkout waiting on a full pool fails with WaitQueueTimeoutError at exactly waitQueueTimeoutMS', () => {
  const { clock, pool, events } = virtualPool({ maxPoolSize: 1, waitQueueTimeoutMS: 100, establishDelayMS: 10 });
  const holder = record(clock, pool.checkOut());
  clock.advance(10); // t = 10: the only connection is established and held
  assert.equal(holder.values.length, 1);

  const waiting = record(clock, pool.checkOut()); // enters the WaitQueue at t = 10
  clock.advance(99);
  assert.equal(waiting.endedAt, undefined, 'still waiting at t = 109');
  clock.advance(1);
  assert.ok(waiting.error instanceof WaitQueueTimeoutError, `timed out at t = 110, got ${String(waiting.error)}`);
  assert.equal(waiting.endedAt, 110);
  const failed = events.find((e) => e.type === 'ConnectionCheckOutFailed');
  assert.equal(failed?.type === 'ConnectionCheckOutFailed' && failed.reason, 'timeout');
  assert.equal(failed?.type === 'ConnectionCheckOutFailed' && failed.duration, 100);
  pool.checkIn(holder.values[0]);
  pool.close();
});

test('the application backs off and succeeds once a connection frees up', () => {
  const { clock, pool } = virtualPool({ maxPoolSize: 1, waitQueueTimeoutMS: 100, establishDelayMS: 0 });
  // Another user holds the only connection from t = 0 to t = 180.
  const other = record(clock, pool.withConnection$(() => timer(180, clock)));
  clock.advance(0);
  assert.equal(pool.snapshot().inUseConnectionCount, 1);

  // Attempt 1 waits t = 0..100 and times out; backoff 50; attempt 2 enters at t = 150 and gets the connection
  // when it is checked in at t = 180; the job takes 30 ms: done at t = 210.
  const job = (connection: MockConnection) => timer(30, clock).pipe(map(() => `job ran on connection ${connection.id}`));
  const app = record(clock, withBackoff$(pool, job, { attempts: 3, backoffMS: 50, scheduler: clock }));
  clock.advance(209);
  assert.equal(app.endedAt, undefined, 'still running at t = 209');
  clock.advance(1);
  assert.equal(app.error, undefined);
  assert.deepEqual(app.values, ['job ran on connection 1']);
  assert.equal(app.endedAt, 210);
  assert.equal(other.endedAt, 180);
  assert.equal(pool.snapshot().inUseConnectionCount, 0, 'both checked their connection in');
  pool.close();
});

test('the application gives up after its last attempt, on a schedule known to the millisecond', () => {
  const { clock, pool, events } = virtualPool({ maxPoolSize: 1, waitQueueTimeoutMS: 100, establishDelayMS: 0 });
  const hog = pool.withConnection$(() => timer(1_000_000, clock)).subscribe(); // holds the connection for good
  clock.advance(0);

  // Attempts wait t = 0..100, 150..250 (after 50), 350..450 (after 100): the error comes at t = 450.
  const app = record(clock, withBackoff$(pool, () => timer(1, clock), { attempts: 3, backoffMS: 50, scheduler: clock }));
  clock.advance(449);
  assert.equal(app.endedAt, undefined, 'still trying at t = 449');
  clock.advance(1);
  assert.ok(app.error instanceof WaitQueueTimeoutError);
  assert.equal(app.endedAt, 450);
  const timeouts = events.filter((e) => e.type === 'ConnectionCheckOutFailed' && e.reason === 'timeout').map((e) => e.time);
  assert.deepEqual(timeouts, [100, 250, 450]);
  hog.unsubscribe(); // checks the connection in
  pool.close();
});

test('clock.advance, not flush(): the Background Thread re-arms itself while the pool is open', () => {
  const { clock, pool, mocks } = virtualPool({ maxPoolSize: 5, establishDelayMS: 0 });
  // An hour of virtual time, in one call: the Background Thread ran every backgroundThreadIntervalMS (1000 ms)...
  clock.advance(3_600_000);
  assert.equal(clock.now(), 3_600_000);
  // ...and its next run is already armed: `flush()`, which runs timers until none is left, would never return.
  assert.ok(clock.actions.length > 0, 'a Background Thread Run is always pending while the pool is open');
  assert.equal(mocks.started.length, 0, 'nothing was established: minPoolSize is 0');

  // Closing the pool stops its timers: only then would flush() end.
  pool.close();
  clock.flush();
  assert.equal(clock.actions.length, 0);
});

// ---------------------------------------------------------------------------------------------------------------

let failed = 0;
for (const { name, run } of tests) {
  try {
    run();
    console.log(`ok - ${name}`);
  } catch (error) {
    failed++;
    console.log(`not ok - ${name}`);
    console.error(error);
  }
}
console.log(`${tests.length - failed}/${tests.length} passed`);
if (failed > 0) process.exitCode = 1;
