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
 * rxcmap only, `watched`: one no-op subscriber on `state$` (a dashboard of the pool's counts) and nothing else.
 *
 * rxcmap only, `instrumented`: `instrumentConnectionPool` of `rxcmap/opentelemetry` records the pool's metrics, and
 * nothing else listens. Three variants: the API's Meter with no SDK registered (no exporter attached), an
 * `@opentelemetry/sdk-metrics` MeterProvider with no reader, and one with a PeriodicExportingMetricReader whose
 * interval never elapses during a run (every measurement is aggregated, never collected). The instrumentation
 * subscribes to `events$`, so an instrumented pool is an observed pool; its cost beyond `observed` is that of
 * recording.
 *
 * Every peer can be opened with a {@link Probe}: its listeners and sink then count what they receive instead of
 * doing nothing, on the same wiring, and an instrumented pool's Meter gets a reader the probe can collect from (the
 * variant with a reader lends its own), so a short run can check that each mode is what it claims (see
 * mode-check.ts).
 */
import { metrics } from '@opentelemetry/api';
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  MetricReader,
  PeriodicExportingMetricReader,
} from '@opentelemetry/sdk-metrics';
import { MongoClient, type MongoClientOptions } from 'mongodb';
import * as genericPool from 'generic-pool';
import { EMPTY, type Subscription } from 'rxjs';
import { Pool as TarnPool } from 'tarn';
import { ConnectionPool, type Connection, type ConnectionLogMessage, type ConnectionPoolEvent, type LogSink } from '../lib';
import { instrumentConnectionPool } from '../lib/opentelemetry';
import { BASELINE_COMMIT, loadBaseline } from './baseline';
import { DirectAbortController } from './direct-signal';
import { LimitPool } from './limit-pool';
import { ShapePool } from './limit-shape';

/** The driver's internal timeout context (not part of its typed public API). */
const { TimeoutContext } = require('mongodb/lib/timeout') as { TimeoutContext: { create(options: object): unknown } };

/** How a pool is watched while it is measured, in the modes both rxcmap and the driver are measured in. */
export type Mode = 'unobserved' | 'observed' | 'logging';
export const MODES: readonly Mode[] = ['unobserved', 'observed', 'logging'];
/** The mode of a peer: one of {@link MODES}, or `watched` or `instrumented` (rxcmap only). */
export type PeerMode = Mode | 'watched' | 'instrumented';

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
 * (`connectionCheckedOut`); log messages are counted by their `message` field. An instrumented peer lends it a reader
 * of its Meter instead ({@link metricReader}).
 */
export class Probe {
  events = 0;
  writes = 0;
  /** Snapshots received on `state$` (a watched peer). */
  snapshots = 0;
  readonly eventsByType = new Map<string, number>();
  readonly writesByMessage = new Map<string, number>();
  /** Set by an instrumented peer: a reader of the Meter its pool is instrumented with, collected by the check only. */
  metricReader: MetricReader | undefined;

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

  snapshot(): void {
    this.snapshots++;
  }

  reset(): void {
    this.events = 0;
    this.writes = 0;
    this.snapshots = 0;
    this.eventsByType.clear();
    this.writesByMessage.clear();
  }
}

/** One opened pool. */
export interface PoolUnderTest {
  /** One checkout, the way its users write it (rxcmap: `pool.checkOut()`, to be awaited). */
  acquire(): PromiseLike<unknown>;
  release(item: unknown): void;
  /**
   * A checkout that can be abandoned; absent when the peer has no way to cancel one. `direct` (rxcmap only): through
   * a {@link DirectAbortController} rather than the platform's AbortController.
   */
  acquireCancellable?(direct?: boolean): { promise: Promise<unknown>; cancel(): void };
  /** rxcmap only: the Observable form, `pool.checkOut().subscribe(next)`; unsubscribing cancels. */
  subscribe?(next: (item: unknown) => void): Subscription;
  /** Throws unless the pool's wiring is what its mode says (listeners, subscribers, logger). */
  verifyMode(): void;
  close(): Promise<void>;
}

export interface Peer {
  /** `rxcmap observed`, `driver logging`, `tarn`, … */
  readonly name: string;
  readonly mode: PeerMode;
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

/**
 * rxcmap in one mode, or watched (one no-op subscriber on `state$`, none on `events$`, no logging); `library` and
 * `name` pick another build of it (the baseline before the extensions, see baseline.ts).
 */
function rxcmapPeer(mode: Mode | 'watched', library: { readonly ConnectionPool: typeof ConnectionPool } = { ConnectionPool }, name = `rxcmap ${mode}`): Peer {
  return {
    name,
    mode,
    async open(maxPoolSize, address, probe) {
      const sink: LogSink = { write: probe ? (m) => probe.write((m as ConnectionLogMessage).fields.message) : noop };
      const pool = new library.ConnectionPool({
        address,
        maxPoolSize,
        maxConnecting: Math.min(maxPoolSize, 10),
        ...(mode === 'logging' ? { logging: { componentSeverities: { connection: 'debug' }, path: sink } } : {}),
      });
      const subscriber =
        mode === 'observed'
          ? pool.events$.subscribe(probe ? (e: ConnectionPoolEvent) => probe.event(e.type) : noop)
          : mode === 'watched'
            ? pool.state$.subscribe(probe ? () => probe.snapshot() : noop)
            : undefined;
      const watchedStream = mode === 'watched' ? 'state$' : 'events$';
      pool.ready();
      const put = rxcmapUnderTest(
        pool,
        () => {
          check((pool.log$ === EMPTY) === (mode !== 'logging'), `rxcmap ${mode}: log$ is ${pool.log$ === EMPTY ? 'off' : 'on'}`);
          const live = subscriber?.closed === false;
          check(live === (mode === 'observed' || mode === 'watched'), `rxcmap ${mode}: ${live ? 'a' : 'no'} live subscriber on ${watchedStream}`);
        },
        async () => pool.close(),
      );
      await warm(put, maxPoolSize);
      return put;
    },
  };
}

/** An opened rxcmap pool behind {@link PoolUnderTest}. */
function rxcmapUnderTest(pool: ConnectionPool<Connection>, verifyMode: () => void, close: () => Promise<void>): PoolUnderTest {
  return {
    acquire: () => pool.checkOut(),
    release: (c) => pool.checkIn(c as Connection),
    acquireCancellable(direct = false) {
      const controller = direct ? new DirectAbortController() : new AbortController();
      const promise = pool.checkOut({ signal: controller.signal }).then(undefined, noop);
      return { promise, cancel: () => controller.abort() };
    },
    subscribe: (next) => pool.checkOut().subscribe(next),
    verifyMode,
    close,
  };
}

/** A reader that collects only when asked, as the mode check does. */
class OnDemandReader extends MetricReader {
  protected override async onShutdown(): Promise<void> {}
  protected override async onForceFlush(): Promise<void> {}
}

/** The export interval of the `instrumented (reader)` variant, in ms: longer than any benchmark run. */
const NEVER_ELAPSING_INTERVAL_MS = 24 * 60 * 60 * 1000;

/** Where an instrumented peer's Meter comes from. */
type MeterSource = 'api' | 'sdk' | 'sdk-reader';

/**
 * rxcmap instrumented by `instrumentConnectionPool`, with a Meter from:
 * - `api`: `metrics.getMeter()` of `@opentelemetry/api` with no MeterProvider registered (an application that ships
 *   the instrumentation but attached no SDK or exporter; the Meter is the API's no-op one);
 * - `sdk`: a fresh `@opentelemetry/sdk-metrics` MeterProvider with no reader (an SDK set up with no exporter: every
 *   measurement is still aggregated);
 * - `sdk-reader`: the same with a PeriodicExportingMetricReader in front of an InMemoryMetricExporter whose interval
 *   never elapses during a run.
 * Opened with a probe (the mode check), the `api` and `sdk` variants record on an SDK MeterProvider with an
 * {@link OnDemandReader} instead (and `sdk-reader` lends its own), set as `probe.metricReader`, so the check reads
 * what the same instrumentation records.
 */
function instrumentedPeer(source: MeterSource): Peer {
  const name = source === 'api' ? 'rxcmap instrumented' : source === 'sdk' ? 'rxcmap instrumented (SDK)' : 'rxcmap instrumented (SDK, reader)';
  return {
    name,
    mode: 'instrumented',
    async open(maxPoolSize, address, probe) {
      const pool = new ConnectionPool({ address, maxPoolSize, maxConnecting: Math.min(maxPoolSize, 10) });
      const readers: MetricReader[] =
        source === 'sdk-reader'
          ? [
              new PeriodicExportingMetricReader({
                exporter: new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE),
                exportIntervalMillis: NEVER_ELAPSING_INTERVAL_MS,
              }),
            ]
          : probe
            ? [new OnDemandReader()]
            : [];
      const provider = source === 'api' && !probe ? undefined : new MeterProvider({ readers });
      const meter = provider === undefined ? metrics.getMeter('rxcmap-bench') : provider.getMeter('rxcmap-bench');
      const instrumentation = instrumentConnectionPool(pool, { meter, poolName: 'bench' });
      if (probe) probe.metricReader = readers[0];
      pool.ready();
      const put = rxcmapUnderTest(
        pool,
        () => {
          check(pool.log$ === EMPTY, `${name}: log$ is on`);
          check(!instrumentation.closed, `${name}: the instrumentation has stopped recording`);
          if (provider === undefined) check(metrics.getMeterProvider() === NOOP_PROVIDER, `${name}: a global MeterProvider is registered`);
        },
        async () => {
          pool.close();
          instrumentation.unsubscribe();
          await provider?.shutdown();
        },
      );
      await warm(put, maxPoolSize);
      return put;
    },
  };
}

/** The API's MeterProvider while none is registered (a no-op one), as read when this module loads. */
const NOOP_PROVIDER = metrics.getMeterProvider();

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

/**
 * The limit's pool rebuilt on rxcmap's shape (lazy thenable → serialized input → `scan` → commands → runner; see
 * limit-shape.ts): what the shape costs before any pool work.
 */
export const limitShape: Peer = {
  name: 'limit (rxcmap\'s shape)',
  mode: 'unobserved',
  async open(maxPoolSize) {
    const pool = new ShapePool<object>(Array.from({ length: maxPoolSize }, () => ({})));
    return {
      acquire: () => pool.acquire(),
      release: (r) => pool.release(r as object),
      verifyMode: noop, // no events, no logging
      close: async () => undefined,
    };
  },
};

/**
 * rxcmap unobserved and observed as of the commit before its extensions (see baseline.ts), or why it is not measured.
 */
export function baselinePeers(): { readonly unobserved: Peer; readonly observed: Peer } | string {
  const library = loadBaseline();
  if (typeof library === 'string') return library;
  return {
    unobserved: rxcmapPeer('unobserved', library, `rxcmap at ${BASELINE_COMMIT} unobserved`),
    observed: rxcmapPeer('observed', library, `rxcmap at ${BASELINE_COMMIT} observed`),
  };
}

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
 * Every peer of the throughput scenarios: rxcmap and the driver in each mode, then tarn, generic-pool, the limit, the
 * limit behind a lazy thenable, and the limit on rxcmap's shape.
 */
export const PEERS: readonly Peer[] = [...MODES.map((m) => RXCMAP[m]), ...MODES.map((m) => DRIVER[m]), tarn, generic, limit, limitThenable, limitShape];

/** rxcmap watched through `state$`, measured in the throughput scenario only, beside {@link PEERS}. */
export const WATCHED: Peer = rxcmapPeer('watched');

/**
 * rxcmap instrumented with `rxcmap/opentelemetry`, measured in the throughput scenario only, beside {@link PEERS}: with
 * the API's Meter and no SDK (the target's mode: no exporter attached), then on an SDK with no reader, and with a
 * reader that never collects (information).
 */
export const INSTRUMENTED: readonly Peer[] = [instrumentedPeer('api'), instrumentedPeer('sdk'), instrumentedPeer('sdk-reader')];
