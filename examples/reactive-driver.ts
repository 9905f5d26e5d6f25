/**
 * A small reactive driver built on the pool: `runCommand$(pool, db, command)` composes checkout → command → check-in
 * with RxJS operators, and retries what the pool says is retryable.
 *
 * - `pool.withConnection$` checks out lazily on subscription and checks the connection in exactly once, when the
 *   command completes, fails, or is unsubscribed (cancelling a checkout still waiting simply leaves the WaitQueue).
 * - A `PoolClearedError` carries the `RetryableError` label: the operation did not run, and may run again once the
 *   pool is ready. `retry({ count, delay })` waits for that (on `pool.state$`), a bounded number of times; any other
 *   error is passed on at once.
 *
 * The program starts the embedded MongoDB endpoint, runs many concurrent commands through a pool of 5 connections,
 * and halfway clears the pool (as a driver does after a network error), marking it ready again shortly after (as
 * its monitor would). The checkouts the clear evicted from the WaitQueue, and those started while the pool was
 * paused, fail with PoolClearedError and are retried. The last line on stdout is a JSON summary.
 *
 * Imports come from the repository's source: `../lib` stands for `rxcmap`, `../lib/testing` for `rxcmap/testing`.
 *
 *   npx ts-node --transpile-only examples/reactive-driver.ts
 *   npx ts-node --transpile-only examples/reactive-driver.ts --commands 1000 --concurrency 100
 */
import { parseArgs } from 'node:util';
import type { Document } from 'bson';
import { catchError, defer, EMPTY, first, lastValueFrom, mergeMap, Observable, range, retry, tap, throwError, timeout } from 'rxjs';
import { CmapError, ConnectionPool, ErrorLabel, type Connection } from '../lib';
import { EmbeddedServer } from '../lib/testing';

/** Options of {@link runCommand$}. */
interface RunCommandOptions {
  /** How many times a retryable failure is retried. Default 3. */
  maxRetries?: number;
  /** How long a retry waits for the pool to be ready again, in ms. Default 5000. */
  readyTimeoutMS?: number;
  /** Called before each retry (for metrics and logs). */
  onRetry?: (error: CmapError, attempt: number) => void;
}

/** Whether the operation may be run again: the pool labels the errors it knows are safe to retry. */
function isRetryable(error: unknown): error is CmapError {
  return error instanceof CmapError && error.hasErrorLabel(ErrorLabel.RetryableError);
}

/** Emits once the pool is no longer paused (ready, or closed: a retry on a closed pool then fails for good). */
function whenUsable$(pool: ConnectionPool, timeoutMS: number): Observable<unknown> {
  return pool.state$.pipe(
    first((s) => s.state !== 'paused'),
    timeout({ first: timeoutMS }),
  );
}

/**
 * Runs `command` on database `db` over a pooled connection. Cold: each subscription is one operation (and each retry
 * one more checkout). The connection is checked in exactly once per checkout, whatever happens.
 */
function runCommand$(pool: ConnectionPool, db: string, command: Document, options: RunCommandOptions = {}): Observable<Document> {
  const { maxRetries = 3, readyTimeoutMS = 5000, onRetry } = options;
  return pool
    .withConnection$((connection: Connection) => defer(() => connection.command(db, command)))
    .pipe(
      retry({
        count: maxRetries,
        delay: (error: unknown, attempt: number) => {
          if (!isRetryable(error)) return throwError(() => error);
          onRetry?.(error, attempt);
          return whenUsable$(pool, readyTimeoutMS);
        },
      }),
    );
}

const { values } = parseArgs({
  options: {
    commands: { type: 'string', default: '400' },
    concurrency: { type: 'string', default: '50' },
    'max-retries': { type: 'string', default: '3' },
  },
});
const total = Number(values.commands);
const concurrency = Number(values.concurrency);
const maxRetries = Number(values['max-retries']);
if (![total, concurrency].every((n) => Number.isInteger(n) && n >= 1) || !Number.isInteger(maxRetries) || maxRetries < 0) {
  console.error('usage: reactive-driver [--commands <n >= 1>] [--concurrency <n >= 1>] [--max-retries <n >= 0>]');
  process.exit(2);
}

async function main(): Promise<void> {
  const server = await new EmbeddedServer().start();
  const pool = new ConnectionPool({ address: server.address, maxPoolSize: 5 });

  // What the pool did, from its own events: every checkout must be matched by exactly one check-in.
  const counts = { checkedOut: 0, checkedIn: 0, poolCleared: 0, checkOutFailed: 0 };
  const events = pool.events$.subscribe((e) => {
    if (e.type === 'ConnectionCheckedOut') counts.checkedOut++;
    else if (e.type === 'ConnectionCheckedIn') counts.checkedIn++;
    else if (e.type === 'ConnectionPoolCleared') counts.poolCleared++;
    else if (e.type === 'ConnectionCheckOutFailed') counts.checkOutFailed++;
  });
  pool.ready(); // a monitor does this after a successful check

  let retries = 0;
  let ok = 0;
  const failures: string[] = [];
  let readyTimer: NodeJS.Timeout | undefined;

  // Halfway through, clear the pool as after a network error; "the monitor" marks it ready again 20 ms later.
  const clearHalfway = (): void => {
    if (ok !== Math.ceil(total / 2)) return;
    pool.clear({ cause: new Error('simulated network error') });
    readyTimer = setTimeout(() => pool.ready(), 20);
  };

  const started = performance.now();
  await lastValueFrom(
    range(0, total).pipe(
      mergeMap(
        (i) =>
          runCommand$(pool, 'shop', { find: 'orders', filter: { orderId: i } }, { maxRetries, onRetry: () => retries++ }).pipe(
            tap((reply) => {
              if (reply.ok !== 1) throw new Error(`command ${i} answered ${JSON.stringify(reply)}`);
              ok++;
              clearHalfway();
            }),
            // One failed command must not stop the others: record it and go on.
            catchError((error: unknown) => {
              failures.push(error instanceof Error ? `${error.name}: ${error.message}` : String(error));
              return EMPTY;
            }),
          ),
        concurrency,
      ),
    ),
    { defaultValue: undefined },
  );
  const elapsedMS = Math.round(performance.now() - started);

  clearTimeout(readyTimer);
  pool.close();
  events.unsubscribe();
  await server.stop();

  const summary = {
    commands: total,
    concurrency,
    ok,
    retries,
    failures: failures.length,
    firstFailure: failures[0],
    poolCleared: counts.poolCleared,
    checkOutFailed: counts.checkOutFailed,
    checkedOut: counts.checkedOut,
    checkedIn: counts.checkedIn,
    elapsedMS,
  };
  process.stdout.write(`${JSON.stringify(summary)}\n`);
  if (failures.length > 0) process.exitCode = 1;
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
