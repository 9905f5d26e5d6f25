/**
 * The pools measured, behind one small interface: rxcmap and the official driver's pool (reached inside a
 * MongoClient), each in three modes, plus tarn, generic-pool and the hand-written limit (unobserved: they have no
 * events). rxcmap and the driver hold real connections to the same embedded endpoint; the others pool plain objects
 * (creation is done before measuring, so only the cycle is timed).
 *
 * Modes:
 * - `unobserved`: nobody listens to the pool's events and nothing is logged;
 * - `observed`: one no-op subscriber on rxcmap's `events$`; a no-op listener on the MongoClient for every CMAP event;
 * - `logging`: the `connection` component logs at `debug` to a no-op sink (rxcmap's `logging` option; the driver's
 *   `mongodbLogComponentSeverities` and `mongodbLogPath`).
 *
 * Every peer can be opened with a {@link Probe}: its listeners and sink then count what they receive instead of
 * doing nothing, on the same wiring, so a short run can check that each mode is what it claims (see run.ts).
 */
import { MongoClient, type MongoClientOptions } from 'mongodb';
import * as genericPool from 'generic-pool';
import { EMPTY, type Subscription } from 'rxjs';
import { Pool as TarnPool } from 'tarn';
import { ConnectionPool, type Connection, type ConnectionLogMessage, type ConnectionPoolEvent, type LogSink } from '../lib';
import { LimitPool } from './limit-pool';

/** The driver's internal timeout context (not part of its typed public API). */
const { TimeoutContext } = require('mongodb/lib/timeout') as { TimeoutContext: { create(options: object): unknown } };

/** How a pool is watched while it is measured. */
export type Mode = 'unobserved' | 'observed' | 'logging';
export const MODES: readonly Mode[] = ['unobserved', 'observed', 'logging'];

/** The driver's CMAP event names, as listened to on a MongoClient. */
export const DRIVER_CMAP_EVENTS = [
  'connectionPoolCreated',
  'connectionPoolReady',
  'connectionPoolCleared',
  'connectionPoolClosed',
  'connectionCreated',
  'connectionReady',
  'connectionClosed',
  'connectionCheckOutStarted',
  'connectionCheckOutFailed',
  'connectionCheckedOut',
  'connectionCheckedIn',
] as const;

/**
 * Counts what a peer's listeners and log sink receive. Event names are normalized to the driver's spelling
 * (`connectionCheckedOut`); log messages are counted by their `message` field.
 */
export class Probe {
  events = 0;
  writes = 0;
  readonly eventsByType = new Map<string, number>();
  readonly writesByMessage = new Map<string, number>();

  event(type: string): void {
    this.events++;
    const name = type.charAt(0).toLowerCase() + type.slice(1);
    this.eventsByType.set(name, (this.eventsByType.get(name) ?? 0) + 1);
  }

  write(message: string | undefined): void {
    this.writes++;
    const key = message ?? '(no message)';
    this.writesByMessage.set(key, (this.writesByMessage.get(key) ?? 0) + 1);
  }

  reset(): void {
    this.events = 0;
    this.writes = 0;
    this.eventsByType.clear();
    this.writesByMessage.clear();
  }
}

/** One opened pool. */
export interface PoolUnderTest {
  /** One checkout, the way its users write it (rxcmap: `pool.checkOut()`, to be awaited). */
  acquire(): PromiseLike<unknown>;
  release(item: unknown): void;
  /** A checkout that can be abandoned; absent when the peer has no way to cancel one. */
  acquireCancellable?(): { promise: Promise<unknown>; cancel(): void };
  /** rxcmap only: the Observable form, `pool.checkOut().subscribe(next)`; unsubscribing cancels. */
  subscribe?(next: (item: unknown) => void): Subscription;
  /** Throws unless the pool's wiring is what its mode says (listeners, subscribers, logger). */
  verifyMode(): void;
  close(): Promise<void>;
}

export interface Peer {
  /** `rxcmap observed`, `driver logging`, `tarn`, … */
  readonly name: string;
  readonly mode: Mode;
  open(maxPoolSize: number, address: string, probe?: Probe): Promise<PoolUnderTest>;
}

const noop = (): void => undefined;

function check(condition: boolean, what: string): void {
  if (!condition) throw new Error(`mode check failed: ${what}`);
}

/** Checks out `n` items at once and returns them, so the pool holds `n` established items. */
async function warm(pool: PoolUnderTest, n: number): Promise<void> {
  const items = await Promise.all(Array.from({ length: n }, () => pool.acquire()));
  for (const item of items) pool.release(item);
}

function rxcmapPeer(mode: Mode): Peer {
  return {
    name: `rxcmap ${mode}`,
    mode,
    async open(maxPoolSize, address, probe) {
      const sink: LogSink = { write: probe ? (m) => probe.write((m as ConnectionLogMessage).fields.message) : noop };
      const pool = new ConnectionPool({
        address,
        maxPoolSize,
        maxConnecting: Math.min(maxPoolSize, 10),
        ...(mode === 'logging' ? { logging: { componentSeverities: { connection: 'debug' }, path: sink } } : {}),
      });
      const subscriber = mode === 'observed' ? pool.events$.subscribe(probe ? (e: ConnectionPoolEvent) => probe.event(e.type) : noop) : undefined;
      pool.ready();
      const put: PoolUnderTest = {
        acquire: () => pool.checkOut(),
        release: (c) => pool.checkIn(c as Connection),
        acquireCancellable() {
          const controller = new AbortController();
          const promise = pool.checkOut({ signal: controller.signal }).then(undefined, noop);
          return { promise, cancel: () => controller.abort() };
        },
        subscribe: (next) => pool.checkOut().subscribe(next),
        verifyMode() {
          check((pool.log$ === EMPTY) === (mode !== 'logging'), `rxcmap ${mode}: log$ is ${pool.log$ === EMPTY ? 'off' : 'on'}`);
          check((subscriber?.closed === false) === (mode === 'observed'), `rxcmap ${mode}: ${subscriber ? 'a' : 'no'} live subscriber on events$`);
        },
        close: async () => pool.close(),
      };
      await warm(put, maxPoolSize);
      return put;
    },
  };
}

interface DriverPool {
  checkOut(options: { timeoutContext: unknown; signal?: AbortSignal }): Promise<unknown>;
  checkIn(connection: unknown): void;
}

interface DriverInternals {
  topology: { s: { servers: Map<string, { pool: DriverPool & { mongoLogger?: DriverLogger } }> } };
}

interface DriverLogger {
  willLog(component: string, severity: string): boolean;
}

function driverPeer(mode: Mode): Peer {
  return {
    name: `driver ${mode}`,
    mode,
    async open(maxPoolSize, address, probe) {
      const options: MongoClientOptions = { maxPoolSize, maxConnecting: Math.min(maxPoolSize, 10) };
      if (mode === 'logging') {
        options.mongodbLogComponentSeverities = { connection: 'debug' };
        options.mongodbLogPath = { write: probe ? (m: { message?: string }) => probe.write(m.message) : noop };
      }
      const client = new MongoClient(`mongodb://${address}/?directConnection=true`, options);
      if (mode === 'observed') {
        for (const name of DRIVER_CMAP_EVENTS) client.on(name, probe ? () => probe.event(name) : noop);
      }
      await client.connect();
      const internals = client as unknown as DriverInternals;
      const pool = [...internals.topology.s.servers.values()][0].pool;
      const context = () => TimeoutContext.create({ serverSelectionTimeoutMS: 0, waitQueueTimeoutMS: 0, timeoutMS: undefined });
      const put: PoolUnderTest = {
        acquire: () => pool.checkOut({ timeoutContext: context() }),
        release: (c) => pool.checkIn(c),
        acquireCancellable() {
          const controller = new AbortController();
          const promise = pool.checkOut({ timeoutContext: context(), signal: controller.signal }).catch(noop);
          return { promise, cancel: () => controller.abort() };
        },
        verifyMode() {
          const listened = DRIVER_CMAP_EVENTS.filter((name) => client.listenerCount(name) > 0);
          check(
            mode === 'observed' ? listened.length === DRIVER_CMAP_EVENTS.length : listened.length === 0,
            `driver ${mode}: listeners on ${listened.length} of ${DRIVER_CMAP_EVENTS.length} CMAP events`,
          );
          const logs = pool.mongoLogger?.willLog('connection', 'debug') === true;
          check(logs === (mode === 'logging'), `driver ${mode}: the pool ${logs ? 'logs' : 'does not log'} connection messages`);
        },
        close: () => client.close(),
      };
      await warm(put, maxPoolSize);
      return put;
    },
  };
}

export const tarn: Peer = {
  name: 'tarn',
  mode: 'unobserved',
  async open(maxPoolSize) {
    const pool = new TarnPool<object>({ create: () => ({}), destroy: () => undefined, min: 0, max: maxPoolSize });
    const put: PoolUnderTest = {
      acquire: () => pool.acquire().promise,
      release: (r) => void pool.release(r as object),
      acquireCancellable() {
        const op = pool.acquire();
        return { promise: op.promise.catch(noop), cancel: () => op.abort() };
      },
      verifyMode: noop, // no events, no logging
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
  mode: 'unobserved',
  async open(maxPoolSize) {
    const pool = genericPool.createPool<object>({ create: async () => ({}), destroy: async () => undefined }, { max: maxPoolSize, min: 0 });
    const put: PoolUnderTest = {
      acquire: () => pool.acquire(),
      release: (r) => void pool.release(r as object),
      verifyMode: noop, // no events, no logging
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
  mode: 'unobserved',
  async open(maxPoolSize) {
    const pool = new LimitPool<object>(Array.from({ length: maxPoolSize }, () => ({})));
    return {
      acquire: () => pool.acquire(),
      release: (r) => pool.release(r as object),
      acquireCancellable: () => pool.acquireCancellable(),
      verifyMode: noop, // no events, no logging
      close: async () => undefined,
    };
  },
};

/**
 * The limit's acquire behind the protocol `await pool.checkOut()` goes through: a lazy thenable (nothing starts until
 * `then`), which `await` must resolve through a job that calls `then`, and whose `then` returns a new Promise. The
 * gap between it and the limit is what that protocol costs any pool, before any pool work.
 */
class LazyAcquire<T> implements PromiseLike<T> {
  constructor(private readonly pool: LimitPool<T>) {}

  then<A = T, B = never>(
    onfulfilled?: ((value: T) => A | PromiseLike<A>) | null,
    onrejected?: ((reason: unknown) => B | PromiseLike<B>) | null,
  ): Promise<A | B> {
    return this.pool.acquire().then(onfulfilled, onrejected);
  }
}

export const limitThenable: Peer = {
  name: 'limit (lazy thenable)',
  mode: 'unobserved',
  async open(maxPoolSize) {
    const pool = new LimitPool<object>(Array.from({ length: maxPoolSize }, () => ({})));
    return {
      acquire: () => new LazyAcquire(pool),
      release: (r) => pool.release(r as object),
      verifyMode: noop, // no events, no logging
      close: async () => undefined,
    };
  },
};

export const RXCMAP: Readonly<Record<Mode, Peer>> = {
  unobserved: rxcmapPeer('unobserved'),
  observed: rxcmapPeer('observed'),
  logging: rxcmapPeer('logging'),
};
export const DRIVER: Readonly<Record<Mode, Peer>> = {
  unobserved: driverPeer('unobserved'),
  observed: driverPeer('observed'),
  logging: driverPeer('logging'),
};

/**
 * Every peer of the throughput scenarios: rxcmap and the driver in each mode, then tarn, generic-pool, the limit and
 * the limit behind a lazy thenable.
 */
export const PEERS: readonly Peer[] = [...MODES.map((m) => RXCMAP[m]), ...MODES.map((m) => DRIVER[m]), tarn, generic, limit, limitThenable];
