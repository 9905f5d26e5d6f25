/**
 * The mode check `npm run bench` runs before measuring: a short run on each peer, opened with a {@link Probe}, that
 * fails unless the peer's mode is what it claims (see {@link checkModes}).
 */
import { DataPointType, type Histogram, type MetricReader } from '@opentelemetry/sdk-metrics';
import { Probe, type Peer } from './peers';
import { cycles } from './scenarios';

/** Cycles checked at each caller count. */
export const CHECK_CYCLES = 2000;
/** The caller counts checked, on a pool of 10. */
const CHECK_CALLERS = [1, 100];
const CHECK_POOL_SIZE = 10;

const fail = (peer: Peer, what: string): never => {
  throw new Error(`mode check failed for ${peer.name}: ${what}`);
};

/** What a mode check saw: per cycle, events at the listeners and messages at the log sink. */
export interface ModeCheck {
  peer: string;
  cycles: number;
  eventsPerCycle: number;
  writesPerCycle: number;
  lifecycle: Record<string, number>;
  /**
   * Instrumented peers: the histogram measurements their Meter recorded per cycle (one `wait_time` and one `use_time`
   * each), read through the probe's reader.
   */
  measurementsPerCycle?: number;
  /** Watched peers: the snapshots their `state$` subscriber received per cycle. */
  snapshotsPerCycle?: number;
}

/** The CMAP log messages of one checkOut/checkIn cycle, and those of a pool's life around it. */
const CYCLE_MESSAGES = ['Connection checkout started', 'Connection checked out', 'Connection checked in'];
const CYCLE_EVENTS = ['connectionCheckOutStarted', 'connectionCheckedOut', 'connectionCheckedIn'];
const LIFE_MESSAGES = ['Connection pool created', 'Connection pool ready', 'Connection created', 'Connection ready', 'Connection pool closed'];
const LIFE_EVENTS = ['connectionPoolCreated', 'connectionPoolReady', 'connectionCreated', 'connectionReady', 'connectionPoolClosed'];

/**
 * Checks, before measuring, that each mode of `peers` is what it claims: its wiring (verifyMode), and what a probe on
 * the same wiring receives over a pool's life and over cycles at 1 and 100 callers on a pool of 10: observed, exactly
 * the three CMAP events of each cycle and the pool's life events, and nothing logged; logging, exactly the three
 * messages of each cycle and those of the pool's life, and no listener called; unobserved, neither; instrumented,
 * neither, and its Meter recorded one wait and one use per cycle and the pool's 10 connections (see
 * {@link checkInstrumented}). Throws on any mismatch; `log` gets one line per peer.
 */
export async function checkModes(address: string, peers: readonly Peer[], log: (line: string) => void): Promise<ModeCheck[]> {
  const checks: ModeCheck[] = [];
  for (const peer of peers) {
    if (peer.mode === 'watched') {
      const check = await checkWatched(address, peer);
      checks.push(check);
      log(`mode check: ${peer.name}: ${check.snapshotsPerCycle} state$ snapshots and ${check.writesPerCycle} log messages per cycle over ${check.cycles} cycles`);
      continue;
    }
    if (peer.mode === 'instrumented') {
      const check = await checkInstrumented(address, peer);
      checks.push(check);
      log(
        `mode check: ${peer.name}: ${check.measurementsPerCycle} histogram measurements, ${check.eventsPerCycle} events and ` +
          `${check.writesPerCycle} log messages per cycle over ${check.cycles} cycles; pool life ${JSON.stringify(check.lifecycle)}`,
      );
      continue;
    }
    const probe = new Probe();
    const pool = await peer.open(CHECK_POOL_SIZE, address, probe);
    pool.verifyMode();
    const life = (name: string): number =>
      peer.mode === 'logging' ? (probe.writesByMessage.get(name) ?? 0) : (probe.eventsByType.get(name) ?? 0);
    const lifeNames = peer.mode === 'logging' ? LIFE_MESSAGES : LIFE_EVENTS;
    const lifecycle: Record<string, number> = {};
    for (const name of lifeNames.slice(0, 4)) lifecycle[name] = life(name);
    probe.reset();
    let total = 0;
    let cycleEvents = 0;
    let cycleWrites = 0;
    for (const callers of CHECK_CALLERS) {
      const before = { events: probe.events, writes: probe.writes };
      await cycles(pool, callers, CHECK_CYCLES);
      const events = probe.events - before.events;
      const writes = probe.writes - before.writes;
      const expected = { events: peer.mode === 'observed' ? 3 * CHECK_CYCLES : 0, writes: peer.mode === 'logging' ? 3 * CHECK_CYCLES : 0 };
      if (events !== expected.events || writes !== expected.writes) {
        fail(peer, `${CHECK_CYCLES} cycles at ${callers} callers gave ${events} events and ${writes} log messages, expected ${expected.events} and ${expected.writes}`);
      }
      total += CHECK_CYCLES;
      cycleEvents += events;
      cycleWrites += writes;
    }
    const names = peer.mode === 'logging' ? CYCLE_MESSAGES : peer.mode === 'observed' ? CYCLE_EVENTS : [];
    for (const name of names) {
      const n = peer.mode === 'logging' ? probe.writesByMessage.get(name) : probe.eventsByType.get(name);
      if (n !== total) fail(peer, `${n ?? 0} × ${name} over ${total} cycles`);
    }
    await pool.close();
    for (let i = 0; i < 100 && peer.mode !== 'unobserved' && life(lifeNames[4]) === 0; i++) await new Promise((r) => setTimeout(r, 10));
    lifecycle[lifeNames[4]] = life(lifeNames[4]);
    if (peer.mode !== 'unobserved') {
      const [created, ready, connCreated, connReady, closed] = lifeNames.map((n) => lifecycle[n]);
      if (created !== 1 || ready !== 1 || connCreated !== 10 || connReady !== 10 || closed !== 1) {
        fail(peer, `pool life: ${JSON.stringify(lifecycle)}, expected 1 pool created, 1 ready, 10 connections created and ready, 1 pool closed`);
      }
    } else if (probe.events !== 0 || probe.writes !== 0) {
      fail(peer, `unobserved, yet ${probe.events} events and ${probe.writes} log messages`);
    }
    checks.push({ peer: peer.name, cycles: total, eventsPerCycle: cycleEvents / total, writesPerCycle: cycleWrites / total, lifecycle });
    log(
      `mode check: ${peer.name}: ${cycleEvents / total} events and ${cycleWrites / total} log messages per cycle over ${total} cycles; ` +
        `pool life ${JSON.stringify(lifecycle)}`,
    );
  }
  return checks;
}

/**
 * The check of a watched peer: its `state$` subscriber receives 2 snapshots per cycle at 1 caller (the pool's counts
 * change as a connection goes out, and as it comes back), at least one per cycle at 100 callers on a pool of 10 (a
 * connection handed to a waiter changes the WaitQueue's length), and nothing is logged.
 */
async function checkWatched(address: string, peer: Peer): Promise<ModeCheck> {
  const probe = new Probe();
  const pool = await peer.open(CHECK_POOL_SIZE, address, probe);
  pool.verifyMode();
  let total = 0;
  let snapshots = 0;
  for (const callers of CHECK_CALLERS) {
    const before = probe.snapshots;
    await cycles(pool, callers, CHECK_CYCLES);
    const received = probe.snapshots - before;
    const enough = callers === 1 ? received === 2 * CHECK_CYCLES : received >= CHECK_CYCLES;
    if (!enough || probe.writes !== 0) fail(peer, `${CHECK_CYCLES} cycles at ${callers} callers gave ${received} snapshots and ${probe.writes} log messages`);
    total += CHECK_CYCLES;
    snapshots += received;
  }
  await pool.close();
  return { peer: peer.name, cycles: total, eventsPerCycle: 0, writesPerCycle: 0, lifecycle: {}, snapshotsPerCycle: snapshots / total };
}

/** The metric names an instrumented pool's check reads. */
const WAIT_TIME = 'db.client.connection.wait_time';
const USE_TIME = 'db.client.connection.use_time';
const CREATE_TIME = 'db.client.connection.create_time';
const IDLE = 'db.client.connection.count{idle}';
const USED = 'db.client.connection.count{used}';
const MAX = 'db.client.connection.max';

/**
 * One collection through `reader`: each histogram's measurement count by metric name, each sum's value by metric name
 * (`db.client.connection.count` by state, as `db.client.connection.count{idle}`). Throws a collection error.
 */
export async function readMeter(reader: MetricReader): Promise<Record<string, number>> {
  const { resourceMetrics, errors } = await reader.collect();
  if (errors.length > 0) throw errors[0];
  const read: Record<string, number> = {};
  for (const scope of resourceMetrics.scopeMetrics) {
    for (const metric of scope.metrics) {
      for (const point of metric.dataPoints) {
        const state = point.attributes['db.client.connection.state'];
        const key = state === undefined ? metric.descriptor.name : `${metric.descriptor.name}{${String(state)}}`;
        const value = metric.dataPointType === DataPointType.HISTOGRAM ? (point.value as Histogram).count : (point.value as number);
        read[key] = (read[key] ?? 0) + value;
      }
    }
  }
  return read;
}

/**
 * The check of an instrumented peer: nothing reaches the probe's listener or sink (the instrumentation is the pool's
 * only subscriber), and its Meter, read through the reader the peer lends the probe, holds what the pool did: after
 * opening (10 connections created, checked out at once and checked in), 10 `create_time`, 10 `wait_time` and 10
 * `use_time` measurements, 10 idle connections, none used, `max` 10; then exactly one `wait_time` and one `use_time`
 * measurement per cycle. A pool that is not instrumented, or whose Meter is not the one read, records nothing and
 * fails.
 */
async function checkInstrumented(address: string, peer: Peer): Promise<ModeCheck> {
  const probe = new Probe();
  const pool = await peer.open(CHECK_POOL_SIZE, address, probe);
  try {
    pool.verifyMode();
    const reader = probe.metricReader ?? fail(peer, 'no reader of its Meter was lent to the probe');
    const opened = await readMeter(reader);
    const lifecycle: Record<string, number> = {};
    for (const name of [CREATE_TIME, WAIT_TIME, USE_TIME, IDLE, USED, MAX]) lifecycle[name] = opened[name] ?? 0;
    const expected: Record<string, number> = {
      [CREATE_TIME]: CHECK_POOL_SIZE,
      [WAIT_TIME]: CHECK_POOL_SIZE,
      [USE_TIME]: CHECK_POOL_SIZE,
      [IDLE]: CHECK_POOL_SIZE,
      [USED]: 0,
      [MAX]: CHECK_POOL_SIZE,
    };
    if (Object.entries(expected).some(([name, n]) => lifecycle[name] !== n)) {
      fail(peer, `its Meter after opening: ${JSON.stringify(lifecycle)}, expected ${JSON.stringify(expected)}`);
    }
    let total = 0;
    let measurements = 0;
    for (const callers of CHECK_CALLERS) {
      const before = await readMeter(reader);
      await cycles(pool, callers, CHECK_CYCLES);
      const after = await readMeter(reader);
      const waits = (after[WAIT_TIME] ?? 0) - (before[WAIT_TIME] ?? 0);
      const uses = (after[USE_TIME] ?? 0) - (before[USE_TIME] ?? 0);
      if (waits !== CHECK_CYCLES || uses !== CHECK_CYCLES) {
        fail(
          peer,
          `${CHECK_CYCLES} cycles at ${callers} callers recorded ${waits} ${WAIT_TIME} and ${uses} ${USE_TIME} measurements, ` +
            `expected ${CHECK_CYCLES} each`,
        );
      }
      total += CHECK_CYCLES;
      measurements += waits + uses;
    }
    if (probe.events !== 0 || probe.writes !== 0) {
      fail(peer, `${probe.events} events at a listener and ${probe.writes} log messages, expected none`);
    }
    return { peer: peer.name, cycles: total, eventsPerCycle: 0, writesPerCycle: 0, lifecycle, measurementsPerCycle: measurements / total };
  } finally {
    await pool.close();
  }
}
