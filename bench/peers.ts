/**
 * The pools measured, behind one small interface: rxcmap, the official driver's pool (reached inside a MongoClient),
 * tarn, generic-pool, and the hand-written limit. rxcmap and the driver hold real connections to the same embedded
 * endpoint; the others pool plain objects (creation is done before measuring, so only the cycle is timed).
 */
import { MongoClient } from 'mongodb';
import * as genericPool from 'generic-pool';
import { Pool as TarnPool } from 'tarn';
import { ConnectionPool, type Connection } from '../lib';
import { LimitPool } from './limit-pool';

/** The driver's internal timeout context (not part of its typed public API). */
const { TimeoutContext } = require('mongodb/lib/timeout') as { TimeoutContext: { create(options: object): unknown } };

/** One opened pool. */
export interface PoolUnderTest {
  acquire(): PromiseLike<unknown>;
  release(item: unknown): void;
  /** A checkout that can be abandoned; absent when the peer has no way to cancel one. */
  acquireCancellable?(): { promise: Promise<unknown>; cancel(): void };
  close(): Promise<void>;
}

export interface Peer {
  readonly name: string;
  open(maxPoolSize: number, address: string): Promise<PoolUnderTest>;
}

/** Checks out `n` items at once and returns them, so the pool holds `n` established items. */
async function warm(pool: PoolUnderTest, n: number): Promise<void> {
  const items = await Promise.all(Array.from({ length: n }, () => pool.acquire()));
  for (const item of items) pool.release(item);
}

export const rxcmap: Peer = {
  name: 'rxcmap',
  async open(maxPoolSize, address) {
    const pool = new ConnectionPool({ address, maxPoolSize, maxConnecting: Math.min(maxPoolSize, 10) });
    pool.ready();
    const put: PoolUnderTest = {
      acquire: () => pool.checkOut(),
      release: (c) => pool.checkIn(c as Connection),
      acquireCancellable() {
        let resolve!: (c: unknown) => void;
        const promise = new Promise<unknown>((r) => (resolve = r));
        const subscription = pool.checkOut().subscribe((c) => resolve(c));
        return { promise, cancel: () => subscription.unsubscribe() };
      },
      close: async () => pool.close(),
    };
    await warm(put, maxPoolSize);
    return put;
  },
};

export const driver: Peer = {
  name: 'driver',
  async open(maxPoolSize, address) {
    const client = await new MongoClient(`mongodb://${address}/?directConnection=true`, { maxPoolSize, maxConnecting: Math.min(maxPoolSize, 10) }).connect();
    const server = [...(client as unknown as { topology: { s: { servers: Map<string, { pool: DriverPool }> } } }).topology.s.servers.values()][0];
    const pool = server.pool;
    const context = () => TimeoutContext.create({ serverSelectionTimeoutMS: 0, waitQueueTimeoutMS: 0, timeoutMS: undefined });
    const put: PoolUnderTest = {
      acquire: () => pool.checkOut({ timeoutContext: context() }),
      release: (c) => pool.checkIn(c),
      acquireCancellable() {
        const controller = new AbortController();
        const promise = pool.checkOut({ timeoutContext: context(), signal: controller.signal }).catch(() => undefined);
        return { promise, cancel: () => controller.abort() };
      },
      close: () => client.close(),
    };
    await warm(put, maxPoolSize);
    return put;
  },
};

interface DriverPool {
  checkOut(options: { timeoutContext: unknown; signal?: AbortSignal }): Promise<unknown>;
  checkIn(connection: unknown): void;
}

export const tarn: Peer = {
  name: 'tarn',
  async open(maxPoolSize) {
    const pool = new TarnPool<object>({ create: () => ({}), destroy: () => undefined, min: 0, max: maxPoolSize });
    const put: PoolUnderTest = {
      acquire: () => pool.acquire().promise,
      release: (r) => void pool.release(r as object),
      acquireCancellable() {
        const op = pool.acquire();
        return { promise: op.promise.catch(() => undefined), cancel: () => op.abort() };
      },
      close: async () => {
        await pool.destroy();
      },
    };
    await warm(put, maxPoolSize);
    return put;
  },
};

export const generic: Peer = {
  name: 'generic-pool',
  async open(maxPoolSize) {
    const pool = genericPool.createPool<object>({ create: async () => ({}), destroy: async () => undefined }, { max: maxPoolSize, min: 0 });
    const put: PoolUnderTest = {
      acquire: () => pool.acquire(),
      release: (r) => void pool.release(r as object),
      close: async () => {
        await pool.drain();
        await pool.clear();
      },
    };
    await warm(put, maxPoolSize);
    return put;
  },
};

export const limit: Peer = {
  name: 'limit',
  async open(maxPoolSize) {
    const pool = new LimitPool<object>(Array.from({ length: maxPoolSize }, () => ({})));
    return {
      acquire: () => pool.acquire(),
      release: (r) => pool.release(r as object),
      acquireCancellable: () => pool.acquireCancellable(),
      close: async () => undefined,
    };
  },
};

/** Every peer, rxcmap first. */
export const PEERS: readonly Peer[] = [rxcmap, driver, tarn, generic, limit];
