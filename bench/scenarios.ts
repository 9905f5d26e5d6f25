/**
 * The benchmark scenarios. Each runs once on a pool opened by run.ts (after a full GC and a priming run) and returns
 * raw numbers; run.ts repeats them over rounds and takes medians. Times come from performance.now(), in ms unless
 * named otherwise.
 *
 * Throughput loops read no clock: only the whole run is timed. Checkout-wait latency is measured by its own scenario
 * ({@link waits}), whose clock reads are its own cost and never reach a throughput figure.
 */
import { PerformanceObserver, type PerformanceEntry } from 'node:perf_hooks';
import { context } from '@opentelemetry/api';
import { MongoClient } from 'mongodb';
import { firstValueFrom, from, type Subscription } from 'rxjs';
import { ConnectionPool, connectionFactory, type Connection, type ConnectionPoolEvent } from '../lib';
import { traceCommands } from '../lib/opentelemetry';
import { startTracing } from './command-tracing';
import { DirectAbortController } from './direct-signal';
import type { PoolUnderTest } from './peers';
import { percentile } from './stats';

const immediate = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * Throughput, in cycles per second: `callers` concurrent loops of checkOut → (one microtask) → checkIn, `ops` cycles
 * in all; callers beyond the pool size wait in the queue. The loop is exactly what a caller writes
 * (`const c = await pool.checkOut(); …; pool.checkIn(c)`); nothing in it reads a clock.
 */
export async function cycles(pool: PoolUnderTest, callers: number, ops: number): Promise<number> {
  let done = 0;
  const loop = async (): Promise<void> => {
    while (done < ops) {
      done++;
      const item = await pool.acquire();
      await undefined;
      pool.release(item);
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: callers }, loop));
  const elapsed = performance.now() - started;
  return (done / elapsed) * 1000;
}

/** Checkout-wait latency percentiles, in µs, and the longest garbage-collection pause of the same run. */
export interface WaitResult {
  p50: number;
  p99: number;
  /** The 99.9th percentile. */
  p999: number;
  /** The longest wait of the run. */
  max: number;
  /**
   * The longest garbage-collection pause that began during the run (0 when none did): every checkout waiting then
   * waits at least this long, so a `max` close to it is the collector's, not the pool's.
   */
  gcLongest: number;
}

/**
 * Checkout-wait latency: the same loops as {@link cycles}, each checkout timed from the call to the connection in
 * hand (the clock is read twice per cycle, so this scenario's throughput is not reported). Garbage-collection pauses
 * are recorded by a `gc` PerformanceObserver, which receives them after the run.
 */
export async function waits(pool: PoolUnderTest, callers: number, ops: number): Promise<WaitResult> {
  const samples = new Float64Array(ops + callers);
  let done = 0;
  let recorded = 0;
  let gcLongest = 0;
  const started = performance.now();
  let ended = Number.POSITIVE_INFINITY;
  const pause = (entry: PerformanceEntry): void => {
    if (entry.startTime >= started && entry.startTime < ended) gcLongest = Math.max(gcLongest, entry.duration);
  };
  const observer = new PerformanceObserver((list) => list.getEntries().forEach(pause));
  observer.observe({ entryTypes: ['gc'] });
  const loop = async (): Promise<void> => {
    while (done < ops) {
      done++;
      const start = performance.now();
      const item = await pool.acquire();
      samples[recorded++] = performance.now() - start;
      await undefined;
      pool.release(item);
    }
  };
  try {
    await Promise.all(Array.from({ length: callers }, loop));
    ended = performance.now();
    // The observer is called on a later turn of the event loop; wait for the pauses that began before the end.
    await new Promise((resolve) => setTimeout(resolve, 5));
    observer.takeRecords().forEach(pause);
  } finally {
    observer.disconnect();
  }
  const at = (p: number): number => percentile(samples, recorded, p) * 1000;
  return { p50: at(50), p99: at(99), p999: at(99.9), max: at(100), gcLongest: gcLongest * 1000 };
}

/** How a waiting checkout is held: a promise (awaited), or a subscription (rxcmap's Observable form). */
export type WaitForm = 'promise' | 'observable';

/** Full GC, twice (the second collects what the first's finalizers released), after pending callbacks ran. */
async function collected(): Promise<number> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error('run the benchmarks with node --expose-gc (npm run bench does)');
  await immediate();
  gc();
  gc();
  return process.memoryUsage().heapUsed;
}

/**
 * Heap bytes per waiting checkout, on a pool of 1 whose connection is held: heapUsed after a full GC with `waiting`
 * checkouts queued, compared with before. `promise`: `Promise.resolve(pool.checkOut())`, what `await` builds for
 * it; `observable`: `pool.checkOut().subscribe(next)` with one shared `next`. The caller's handles go into an array
 * allocated before the first reading, so only the checkouts themselves are counted.
 */
export async function heapPerWaiter(pool: PoolUnderTest, form: WaitForm, waiting: number): Promise<number> {
  const held = await pool.acquire();
  const handles: unknown[] = new Array(waiting).fill(0);
  let delivered = 0;
  const next = (item: unknown): void => {
    delivered++;
    pool.release(item);
  };
  const before = await collected();
  if (form === 'promise') {
    for (let i = 0; i < waiting; i++) handles[i] = Promise.resolve(pool.acquire());
  } else {
    for (let i = 0; i < waiting; i++) handles[i] = pool.subscribe!(next);
  }
  const after = await collected();
  const bytes = (after - before) / waiting;
  // Drain: every waiter gets the connection in turn.
  pool.release(held);
  if (form === 'promise') {
    for (const p of handles as Promise<unknown>[]) pool.release(await p);
  } else {
    const deadline = performance.now() + 10_000;
    while (delivered < waiting) {
      if (performance.now() > deadline) throw new Error(`only ${delivered} of ${waiting} subscribed checkouts were delivered`);
      await immediate();
    }
  }
  return bytes;
}

/**
 * Cost of one cancellation, in µs, with `waiting` checkouts queued behind a pool of 1 whose connection is held: the
 * time to cancel them all (newest first; `promise`: AbortController.abort(), `observable`: unsubscribe), let the
 * cancellations settle, and hand the held connection back (the pool then skips every cancelled waiter), per cancel.
 * Repeated in batches until `atLeast` cancels were timed, so a small queue is timed over as many cancels as a large one.
 * `direct` (Promise form): aborted through a {@link DirectAbortController}, whose abort() builds nothing of its own.
 */
export async function cancelCost(pool: PoolUnderTest, form: WaitForm, waiting: number, atLeast = 10_000, direct = false): Promise<number> {
  let delivered = 0;
  const onItem = (item: unknown): void => {
    if (item === undefined) return; // rejected as cancelled
    delivered++;
    pool.release(item);
  };
  const cancels: (() => void)[] = new Array(waiting);
  let elapsed = 0;
  let timed = 0;
  while (timed < atLeast) {
    const held = await pool.acquire();
    if (form === 'promise') {
      for (let i = 0; i < waiting; i++) {
        const handle = pool.acquireCancellable!(direct);
        void handle.promise.then(onItem);
        cancels[i] = handle.cancel;
      }
    } else {
      for (let i = 0; i < waiting; i++) {
        const subscription: Subscription = pool.subscribe!(onItem);
        cancels[i] = () => subscription.unsubscribe();
      }
    }
    await immediate();
    const started = performance.now();
    for (let i = waiting - 1; i >= 0; i--) cancels[i]();
    await immediate();
    pool.release(held);
    await immediate();
    elapsed += performance.now() - started;
    timed += waiting;
    if (delivered > 0) throw new Error(`${delivered} of ${waiting} cancelled checkouts were delivered a connection`);
  }
  return (elapsed * 1000) / timed;
}

/**
 * The floor under every AbortSignal-based cancel: AbortController.abort() on `waiting` controllers with one
 * listener each, no pool involved, in µs per abort (batches as in {@link cancelCost}). With `reject`, each listener
 * also does what any Promise-form cancel must do for its caller, still with no pool: it builds a new error (a
 * message naming the address, the signal's reason as `cause`, no stack frames, as rxcmap's CheckOutCancelledError)
 * and rejects that caller's pending Promise with it, handled as the rxcmap adapter and {@link cancelCost} handle it.
 * Throws when a caller was not rejected with its own error by the time its batch is timed. `direct`: the controllers
 * are {@link DirectAbortController}s, so what is timed is the listener's work alone.
 */
export async function abortAlone(waiting: number, atLeast = 10_000, reject = false, direct = false): Promise<number> {
  let elapsed = 0;
  let timed = 0;
  let rejected = 0;
  while (timed < atLeast) {
    const controllers = Array.from({ length: waiting }, () => {
      const controller = direct ? new DirectAbortController() : new AbortController();
      const signal = controller.signal;
      if (!reject) {
        signal.addEventListener('abort', () => undefined, { once: true });
        return controller;
      }
      let fail!: (error: unknown) => void;
      void new Promise((_resolve, rejectWith) => (fail = rejectWith))
        .then(undefined, (error: unknown) => {
          if (error instanceof FloorCancelledError && error.cause === signal.reason) rejected++;
        })
        .then(noop);
      signal.addEventListener('abort', () => fail(cancelledWithoutStack('localhost:27017', signal.reason)), { once: true });
      return controller;
    });
    await immediate();
    const started = performance.now();
    for (let i = waiting - 1; i >= 0; i--) controllers[i].abort();
    await immediate();
    elapsed += performance.now() - started;
    timed += waiting;
    if (reject && rejected !== timed) throw new Error(`${timed - rejected} of ${timed} aborted callers were not rejected with their cancellation error`);
  }
  return (elapsed * 1000) / timed;
}

const noop = (): void => undefined;

/** A caller's cancellation error as a pool with no stack frames of its own builds it (see {@link abortAlone}). */
export class FloorCancelledError extends Error {
  constructor(address: string, cause: unknown) {
    super(`Checkout from connection pool for ${address} was cancelled before a connection was delivered`, { cause });
    this.name = 'FloorCancelledError';
  }
}

function cancelledWithoutStack(address: string, cause: unknown): FloorCancelledError {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    return new FloorCancelledError(address, cause);
  } finally {
    Error.stackTraceLimit = limit;
  }
}

/**
 * Time (ms) for a pool with minPoolSize 10 and maxConnecting 2 to establish its 10 connections, when each handshake
 * is slowed by a fail point on the endpoint (it blocks the hello of connections named `appName`). Watched through
 * events: `events$` for rxcmap, `connectionReady` for the driver.
 */
export async function fill(kind: 'rxcmap' | 'driver', address: string, appName: string): Promise<number> {
  if (kind === 'rxcmap') {
    const pool = new ConnectionPool({ address, minPoolSize: 10, maxConnecting: 2, connectionOptions: { appName } });
    let ready = 0;
    const started = performance.now();
    const filled = new Promise<number>((resolve) => {
      pool.events$.subscribe((e: ConnectionPoolEvent) => {
        if (e.type === 'ConnectionReady' && ++ready === 10) resolve(performance.now() - started);
      });
    });
    pool.ready();
    const ms = await filled;
    pool.close();
    return ms;
  }
  const client = new MongoClient(`mongodb://${address}/?directConnection=true`, { appName, minPoolSize: 10, maxConnecting: 2 });
  let ready = 0;
  const started = performance.now();
  const filled = new Promise<number>((resolve) => {
    client.on('connectionReady', () => {
      if (++ready === 10) resolve(performance.now() - started);
    });
  });
  await client.connect();
  const ms = await filled;
  await client.close();
  return ms;
}

/**
 * How the end-to-end ping's commands are watched: `unobserved`; `watched`, with one no-op subscriber of the command
 * events (rxcmap's `commandEvents$`; the driver's `monitorCommands` with no-op listeners of its three command events),
 * as APM runs; `traced`, a span per command as an OpenTelemetry setup makes them (see command-tracing.ts).
 */
export type CommandWatch = 'unobserved' | 'watched' | 'traced';

/**
 * End-to-end `ping` throughput: `callers` concurrent loops through pool + connection, pool of 10; the first
 * `primeOps` pings (untimed) bring the hot path up to speed. `watch`: see {@link CommandWatch}. A traced run that
 * exports fewer command spans than it ran pings throws: it would not be measuring what it claims.
 */
export async function ping(kind: 'rxcmap' | 'driver', address: string, callers: number, ops: number, primeOps: number, watch: CommandWatch = 'unobserved'): Promise<number> {
  let run: () => Promise<unknown>;
  let close: () => Promise<void>;
  const tracing = watch === 'traced' ? startTracing(kind === 'driver') : undefined;
  if (kind === 'rxcmap') {
    const pool = new ConnectionPool({ address, maxPoolSize: 10, maxConnecting: 10 });
    if (watch === 'watched') pool.commandEvents$.subscribe(() => undefined);
    if (tracing !== undefined) traceCommands(pool, { tracer: tracing.tracer });
    pool.ready();
    run = () => pool.withConnection((c) => c.command('admin', { ping: 1 }));
    close = async () => pool.close();
  } else {
    const client = new MongoClient(`mongodb://${address}/?directConnection=true`, { maxPoolSize: 10, maxConnecting: 10, monitorCommands: watch === 'watched' });
    if (watch === 'watched') for (const name of ['commandStarted', 'commandSucceeded', 'commandFailed'] as const) client.on(name, () => undefined);
    await client.connect();
    const admin = client.db('admin');
    run = () => admin.command({ ping: 1 });
    close = () => client.close();
  }
  let done = 0;
  let target = 0;
  const loop = async (): Promise<void> => {
    while (done < target) {
      done++;
      await run();
    }
  };
  const caller = tracing === undefined ? loop : (): Promise<void> => context.with(tracing.requestContext(), loop);
  const all = (): Promise<void[]> => Promise.all(Array.from({ length: callers }, caller));
  target = primeOps;
  await all();
  done = 0;
  target = ops;
  const started = performance.now();
  await all();
  const elapsed = performance.now() - started;
  await close();
  if (tracing !== undefined) {
    await tracing.stop();
    if (tracing.exported() < primeOps + ops) throw new Error(`${kind}: ${tracing.exported()} command spans exported for ${primeOps + ops} pings`);
  }
  return (done / elapsed) * 1000;
}

/** Runs one command on `admin` of the endpoint over a connection of its own. */
export async function adminCommand(address: string, command: Record<string, unknown>): Promise<void> {
  const [host, port] = address.split(':');
  const factory = connectionFactory({ host, port: Number(port) });
  const connection: Connection = await firstValueFrom(from(factory({ id: 0, generation: 0, address, signal: new AbortController().signal })));
  try {
    await connection.command('admin', command);
  } finally {
    connection.destroy();
  }
}
