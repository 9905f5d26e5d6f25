/**
 * The benchmark scenarios. Each runs one peer once and returns raw numbers; run.ts repeats them over rounds and takes
 * medians. Times come from performance.now(), in ms.
 */
import { MongoClient } from 'mongodb';
import { firstValueFrom, from } from 'rxjs';
import { ConnectionPool, connectionFactory, type Connection, type ConnectionPoolEvent } from '../lib';
import type { Peer } from './peers';
import { percentile } from './stats';

/** Result of a cycle run: throughput and wait latency of the checkouts. */
export interface CycleResult {
  opsPerSec: number;
  p50: number;
  p99: number;
}

/**
 * `callers` concurrent loops of checkOut → (one microtask) → checkIn, `ops` cycles in all, on a pool of
 * `maxPoolSize`; callers beyond the pool size wait in the queue.
 */
export async function cycles(peer: Peer, address: string, maxPoolSize: number, callers: number, ops: number): Promise<CycleResult> {
  const pool = await peer.open(maxPoolSize, address);
  const waits = new Float64Array(ops + callers);
  let done = 0;
  let recorded = 0;
  const loop = async (): Promise<void> => {
    while (done < ops) {
      done++;
      const start = performance.now();
      const item = await pool.acquire();
      waits[recorded++] = performance.now() - start;
      await undefined;
      pool.release(item);
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: callers }, loop));
  const elapsed = performance.now() - started;
  await pool.close();
  return { opsPerSec: (done / elapsed) * 1000, p50: percentile(waits, recorded, 50), p99: percentile(waits, recorded, 99) };
}

/** Result of a churn run. */
export interface ChurnResult {
  /** Completed cycles per second of the callers that keep their checkouts. */
  opsPerSec: number;
  /** Checkouts abandoned per second. */
  cancelsPerSec: number;
}

/**
 * Cancellation churn on a pool of 10: 50 callers cycle as in {@link cycles} while 50 others start checkouts and
 * abandon them a microtask later (unsubscribe / AbortSignal / abort), returning any connection that arrived first.
 */
export async function churn(peer: Peer, address: string, ops: number): Promise<ChurnResult | undefined> {
  const pool = await peer.open(10, address);
  if (pool.acquireCancellable === undefined) {
    await pool.close();
    return undefined;
  }
  let done = 0;
  let cancels = 0;
  let stop = false;
  const cycler = async (): Promise<void> => {
    while (done < ops) {
      done++;
      const item = await pool.acquire();
      await undefined;
      pool.release(item);
    }
    stop = true;
  };
  const churner = async (): Promise<void> => {
    while (!stop) {
      const handle = pool.acquireCancellable!();
      let arrived: unknown;
      let abandoned = false;
      void handle.promise.then((item) => {
        if (item === undefined) return;
        if (abandoned) pool.release(item); // it was already on its way when the caller gave up
        else arrived = item;
      });
      await undefined;
      await undefined;
      if (arrived !== undefined) pool.release(arrived);
      else {
        abandoned = true;
        handle.cancel();
        cancels++;
      }
      await new Promise((r) => setImmediate(r)); // let the pool's cancellation bookkeeping settle
    }
  };
  const started = performance.now();
  await Promise.all([...Array.from({ length: 50 }, cycler), ...Array.from({ length: 50 }, churner)]);
  const elapsed = performance.now() - started;
  await new Promise((r) => setTimeout(r, 10));
  await pool.close();
  return { opsPerSec: (done / elapsed) * 1000, cancelsPerSec: (cancels / elapsed) * 1000 };
}

/**
 * Cost of one cancellation with `waiting` checkouts queued behind a pool of 1 whose connection is held: the time to
 * start them all and cancel them all (newest first), per cancel, in µs. O(1) cancellation keeps it flat in `waiting`.
 */
export async function cancelCost(peer: Peer, address: string, waiting: number): Promise<number | undefined> {
  const pool = await peer.open(1, address);
  if (pool.acquireCancellable === undefined) {
    await pool.close();
    return undefined;
  }
  const held = await pool.acquire();
  const handles = Array.from({ length: waiting }, () => pool.acquireCancellable!());
  await new Promise((r) => setImmediate(r));
  const started = performance.now();
  for (let i = handles.length - 1; i >= 0; i--) handles[i].cancel();
  await new Promise((r) => setImmediate(r));
  pool.release(held); // the pool must skip every cancelled waiter
  await new Promise((r) => setImmediate(r));
  const elapsed = performance.now() - started;
  await pool.close();
  return (elapsed * 1000) / waiting;
}

/**
 * Heap bytes per waiting checkout: `waiting` checkouts queued behind a pool of 1 whose connection is held,
 * heapUsed after a full GC compared with before. Needs --expose-gc.
 */
export async function heapPerWaiter(peer: Peer, address: string, waiting: number): Promise<number> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error('run the benchmarks with node --expose-gc (npm run bench does)');
  const pool = await peer.open(1, address);
  const held = await pool.acquire();
  const settle = async (): Promise<number> => {
    await new Promise((r) => setImmediate(r));
    gc();
    gc();
    return process.memoryUsage().heapUsed;
  };
  const before = await settle();
  const pending: PromiseLike<unknown>[] = [];
  // Promise.resolve() starts lazy requests (it calls then()) the way awaiting them would.
  for (let i = 0; i < waiting; i++) pending.push(Promise.resolve(pool.acquire()));
  const after = await settle();
  const bytes = (after - before) / waiting;
  // Drain: every waiter gets the connection in turn.
  pool.release(held);
  for (const p of pending) pool.release(await p);
  await pool.close();
  return bytes;
}

/**
 * Time (ms) for a pool with minPoolSize 10 and maxConnecting 2 to establish its 10 connections, when each handshake
 * takes `handshakeMS` (a fail point on the endpoint blocks the hello of connections named `appName`).
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

/** End-to-end `ping` throughput: `callers` concurrent loops through pool + connection, pool of 10. */
export async function ping(kind: 'rxcmap' | 'driver', address: string, callers: number, ops: number): Promise<number> {
  let done = 0;
  if (kind === 'rxcmap') {
    const pool = new ConnectionPool({ address, maxPoolSize: 10, maxConnecting: 10 });
    pool.ready();
    const loop = async (): Promise<void> => {
      while (done < ops) {
        done++;
        await pool.withConnection((c) => c.command('admin', { ping: 1 }));
      }
    };
    const started = performance.now();
    await Promise.all(Array.from({ length: callers }, loop));
    const elapsed = performance.now() - started;
    pool.close();
    return (done / elapsed) * 1000;
  }
  const client = await new MongoClient(`mongodb://${address}/?directConnection=true`, { maxPoolSize: 10, maxConnecting: 10 }).connect();
  const admin = client.db('admin');
  const loop = async (): Promise<void> => {
    while (done < ops) {
      done++;
      await admin.command({ ping: 1 });
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: callers }, loop));
  const elapsed = performance.now() - started;
  await client.close();
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
