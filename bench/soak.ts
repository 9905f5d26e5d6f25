/**
 * `npm run soak -- --seconds N --seed S`: a bounded soak of the pool on loopback. A `ConnectionPool` and a
 * `connect()` client (its own pool and monitor) run against the embedded endpoint for N seconds (default 60) of load,
 * under random faults: pool clears (with and without interruptInUseConnections), `failCommand` fail points (command
 * errors, closed and blocked connections, failed handshakes), checkouts aborted by an AbortSignal or left by
 * unsubscribing, WaitQueue timeouts, connections closed by the endpoint, and failed heartbeats of the client's
 * monitor. Every random choice comes from the seed (default fixed, printed): a failing run is replayed with its seed.
 *
 * Every ~2 s the load pauses and, once everything settled, the soak checks (a quiescent point):
 * - every checkout started was settled exactly once: delivered, failed with an error the faults explain, or left by
 *   its caller (see soak-ledger.ts);
 * - each pool's counts agree with its events: ConnectionCreated - ConnectionClosed = totalConnectionCount,
 *   ConnectionCheckedOut - ConnectionCheckedIn = inUseConnectionCount, every ConnectionCheckOutStarted ended, and
 *   nothing is in use, waiting or pending; the callers' outcomes agree with the pool's events;
 * - the endpoint's open connections = the pool's total + the client pool's total + the monitor's connection;
 * - the heap after a full GC (sampled, in bytes), which must not keep growing: the last sample may exceed the first
 *   by at most 8 MiB or a quarter of the first, whichever is more.
 * After closing the pool and the client: no connection left open at the endpoint, and no active resource (handle,
 * timer, request) beyond those the process had before the soak started.
 *
 * Prints one progress line per quiescent point on stderr, then ONE JSON line on stdout: seconds, seed, checkouts,
 * outcomes, the faults applied (clears, fail points, kills, aborts, unsubscribes, timeouts, heartbeat failures,
 * bursts), the pools' event counts, heap samples (bytes) with their max and last, sockets and handles at end, and
 * `violations` (a list of messages). Exit 0 when there is no violation, 1 when there is, 2 for invalid arguments.
 *
 * Test-only: the environment variable RXCMAP_SOAK_LEAK injects a deliberate leak, `connection` (a connection checked
 * out and never checked in) or `socket` (a raw connection to the endpoint never closed); either must end in
 * violations and exit 1. Nothing else reads it.
 *
 * Runs with `node --expose-gc` (as `npm run soak` does): the heap is sampled after `global.gc()`.
 */
import * as net from 'node:net';
import { lastValueFrom } from 'rxjs';
import { connect, ConnectionPool } from '../lib';
import { EmbeddedServer } from '../lib/testing';
import { HELP, parseSoakArgs, USAGE, type SoakSettings } from './soak-args';
import { MonitorAudit, PoolAudit } from './soak-audit';
import { FaultInjector, type FaultKind } from './soak-faults';
import { CheckOutLedger } from './soak-ledger';
import { Load } from './soak-load';
import { SoakRandom } from './soak-random';
import { activeResources, heapAfterGc, resourcesAbove, settled, within } from './soak-resources';

/** The appName of the pool's connections; fail points and kills select on it. */
const POOL_APP_NAME = 'soak-pool';
/** The appName of the client's connections (its pool's and its monitor's). */
const CLIENT_APP_NAME = 'soak-client';
/** Load between two quiescent points, in seconds (the run is cut into rounds of about this length). */
const ROUND_SECONDS = 2;
/** How long a paused load may take to finish its cycles, in ms, before it is a violation. */
const STOP_MS = 10_000;
/** How long the pools, the monitor and the endpoint may take to settle at a quiescent point or at the end, in ms. */
const SETTLE_MS = 3_000;
/** The heap growth allowed from the first sample to the last, in bytes, at least (a quarter of the first if more). */
const HEAP_GROWTH_BYTES = 8 * 1024 * 1024;
/** At most this many violation messages are kept (the rest are counted). */
const MAX_VIOLATIONS = 50;

/** The one-line JSON summary of a soak run. Sizes in bytes, durations in ms unless named otherwise. */
export interface SoakSummary {
  /** The load's duration asked for, in seconds (`--seconds`). */
  seconds: number;
  /** The seed of every random choice (`--seed`): replay the run with it. */
  seed: number;
  /** Wall-clock time from start to the end of the checks after close, in ms. */
  elapsedMS: number;
  /** How many quiescent points were checked (one per ~2 s round). */
  quiescentPoints: number;
  /** Checkouts started on the pool. */
  checkouts: number;
  /** The checkout ledger: started, settled, resolved, unsubscribed, rejected (by error name), forms (by form). */
  outcomes: Record<string, unknown>;
  /** Commands on pool connections: ok, failed (by error name). */
  commands: Record<string, unknown>;
  /** Commands through the client: ok, failed (by error name). */
  clientCommands: Record<string, unknown>;
  /** `pool.clear()` faults without, and with, interruptInUseConnections. */
  clears: number;
  interruptingClears: number;
  /** `failCommand` fail points set, by kind: commandError, closeConnection, blockConnection, handshakeError, heartbeat. */
  failPoints: Record<string, number>;
  /** Connections the endpoint closed: the pool's, and the client's (its pool's and its monitor's). */
  kills: { pool: number; client: number };
  /** Bursts of checkouts holding their connections (to make others time out). */
  bursts: number;
  /** Checkouts that ended with CheckOutCancelledError (their AbortSignal fired first). */
  aborts: number;
  /** Checkouts their caller left (unsubscribed, or a `timeout` operator did) before delivery. */
  unsubscribes: number;
  /** Checkouts that ended with WaitQueueTimeoutError. */
  timeouts: number;
  /** Failed checks of the client's monitor (ServerHeartbeatFailed). */
  heartbeatFailures: number;
  /** The pool's and the client pool's event counts. */
  pool: Record<string, unknown>;
  clientPool: Record<string, unknown>;
  /** The heap after a full GC at each quiescent point, in bytes, and their max and last. */
  heapSamples: number[];
  maxHeap: number;
  lastHeap: number;
  /** Connections still open at the endpoint after the pool and the client were closed. */
  socketsAtEnd: number;
  /** Active resources (handles, timers, requests) beyond the baseline after the pool and the client were closed. */
  handlesAtEnd: number;
  /** What went wrong, one message each; empty for a clean run (exit 0). */
  violations: string[];
}

const log = (line: string): void => void process.stderr.write(`[soak ${(performance.now() / 1000).toFixed(1)} s] ${line}\n`);

/** Runs one soak with `settings` and returns its summary (violations included; it never throws for them). */
async function soak(settings: SoakSettings, gc: () => void): Promise<SoakSummary> {
  const violations: string[] = [];
  let dropped = 0;
  const violation = (message: string): void => {
    if (violations.length < MAX_VIOLATIONS) violations.push(message);
    else dropped++;
  };
  const baseline = activeResources();
  const startedAt = performance.now();
  const rng = new SoakRandom(settings.seed);

  const server = await new EmbeddedServer().start();
  const pool = new ConnectionPool({
    address: server.address,
    maxPoolSize: 8,
    minPoolSize: 2,
    maxConnecting: 2,
    waitQueueTimeoutMS: 50,
    maxIdleTimeMS: 500,
    backgroundThreadIntervalMS: 100,
    connectionOptions: { appName: POOL_APP_NAME, connectTimeoutMS: 2000 },
  });
  const poolAudit = new PoolAudit('pool', pool);
  pool.ready();
  const client = connect(server.uri, {
    appName: CLIENT_APP_NAME,
    maxPoolSize: 4,
    waitQueueTimeoutMS: 200,
    backgroundThreadIntervalMS: 100,
    heartbeatFrequencyMS: 500,
    serverSelectionTimeoutMS: 2000,
    connectTimeoutMS: 2000,
  });
  const clientPool = [...client.pools.values()][0];
  const clientAudit = new PoolAudit('client pool', clientPool);
  const monitorAudit = new MonitorAudit();
  const heartbeats = client.events$.subscribe((e) => monitorAudit.observe(e));
  const ledger = new CheckOutLedger(violation);
  const load = new Load(rng.fork(), { pool, client, ledger, violation }, { poolWorkers: 24, clientWorkers: 2 });
  const faults = new FaultInjector(rng.fork(), {
    pool,
    server,
    poolAppName: POOL_APP_NAME,
    clientAppName: CLIENT_APP_NAME,
    burst: (size, holdMS) => load.burst(size, holdMS),
  });
  await client.selectPool(); // the monitor's first check readied the client's pool

  // The monitor's connections: its checks' one, and while it streams its RTT connection.
  const monitor = [...client.monitors.values()][0];
  const expectedSockets = (): number =>
    pool.snapshot().totalConnectionCount + clientPool.snapshot().totalConnectionCount + monitor.connectionCount;
  const quiet = (): boolean => poolAudit.idle() && clientAudit.idle() && monitorAudit.idle && server.openConnections === expectedSockets();

  const rounds = Math.max(1, Math.round(settings.seconds / ROUND_SECONDS));
  const roundMS = (settings.seconds * 1000) / rounds;
  const heapSamples: number[] = [];
  let leakedSocket: net.Socket | undefined;
  for (let round = 1; round <= rounds; round++) {
    const roundStart = performance.now();
    load.start();
    faults.start();
    if (round === 1 && settings.leak === 'connection') await load.leakConnection();
    if (round === 1 && settings.leak === 'socket') leakedSocket = await openSocket(server.address);
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, roundMS - (performance.now() - roundStart))));

    // A quiescent point: no fault, no work; let connections, the monitor and the endpoint settle, then check.
    await faults.stop();
    for (const v of await load.stop(STOP_MS)) violation(v);
    // Five agreeing samples 20 ms apart: a connection one side has seen close and the other not yet is no agreement.
    await settled(quiet, SETTLE_MS, 20, 5);
    for (const v of [...ledger.check(), ...poolAudit.check(), ...clientAudit.check()]) violation(v);
    for (const v of outcomesAgreeWithEvents(ledger, poolAudit)) violation(v);
    if (server.openConnections !== expectedSockets()) {
      violation(
        `round ${round}: the endpoint has ${server.openConnections} open connection(s), expected ${expectedSockets()} ` +
          `(pool ${pool.snapshot().totalConnectionCount} + client pool ${clientPool.snapshot().totalConnectionCount} + monitor ${monitor.connectionCount})`,
      );
    }
    heapSamples.push(heapAfterGc(gc));
    log(
      `round ${round}/${rounds}: ${ledger.started} checkouts, ${load.commands.ok} commands ok, heap ${mib(heapSamples[heapSamples.length - 1])}, ` +
        `${violations.length + dropped} violation(s)`,
    );
  }
  const first = heapSamples[0];
  const last = heapSamples[heapSamples.length - 1];
  const allowed = Math.max(HEAP_GROWTH_BYTES, first / 4);
  if (last - first > allowed) {
    violation(`the heap after GC grew from ${first} to ${last} bytes across quiescent points (more than the ${Math.round(allowed)} allowed)`);
  }

  // Close everything: the pools must finish (state$ completes once closed with no connection left), the endpoint
  // must see no connection, and no resource may remain beyond the baseline.
  await client.close();
  pool.close();
  const finished = await within(Promise.all([lastValueFrom(pool.state$), lastValueFrom(clientPool.state$)]).then(() => true), SETTLE_MS, false);
  if (!finished) {
    for (const [label, p] of [['pool', pool], ['client pool', clientPool]] as const) {
      const s = p.snapshot();
      if (s.totalConnectionCount > 0) {
        violation(`${label} did not finish closing within ${SETTLE_MS} ms: ${s.totalConnectionCount} connection(s) still open, ${s.inUseConnectionCount} in use`);
      }
    }
  }
  await settled(() => server.openConnections === 0, SETTLE_MS);
  const socketsAtEnd = server.openConnections;
  if (socketsAtEnd > 0) violation(`${socketsAtEnd} connection(s) still open at the endpoint after the pool and the client were closed`);
  poolAudit.stop();
  clientAudit.stop();
  heartbeats.unsubscribe();
  // Resources are counted while the endpoint still listens (its one listening handle aside), so that stopping it
  // (which closes every connection it holds) cannot hide a client-side socket left open; then once it stopped.
  const listening = new Map(baseline).set('TCPServerWrap', (baseline.get('TCPServerWrap') ?? 0) + 1);
  const handlesAtEnd = await resourcesLeft(listening, 'after the pool and the client were closed', violation);
  await server.stop();
  await resourcesLeft(baseline, 'after the endpoint stopped', violation);
  leakedSocket?.destroy();
  if (dropped > 0) violations.push(`... and ${dropped} more violation(s)`);

  const count = (kind: FaultKind): number => faults.counts.get(kind) ?? 0;
  return {
    seconds: settings.seconds,
    seed: settings.seed,
    elapsedMS: Math.round(performance.now() - startedAt),
    quiescentPoints: rounds,
    checkouts: ledger.started,
    outcomes: ledger.toJSON(),
    commands: load.commands.toJSON(),
    clientCommands: load.clientCommands.toJSON(),
    clears: count('clear'),
    interruptingClears: count('interruptingClear'),
    failPoints: {
      commandError: count('commandError'),
      closeConnection: count('closeConnection'),
      blockConnection: count('blockConnection'),
      handshakeError: count('handshakeError'),
      heartbeat: count('heartbeatFailPoint'),
    },
    kills: { ...faults.socketsKilled },
    bursts: count('burst'),
    aborts: ledger.rejectedWith('CheckOutCancelledError'),
    unsubscribes: ledger.unsubscribed,
    timeouts: ledger.rejectedWith('WaitQueueTimeoutError'),
    heartbeatFailures: monitorAudit.failed,
    pool: poolAudit.toJSON(),
    clientPool: clientAudit.toJSON(),
    heapSamples,
    maxHeap: Math.max(...heapSamples),
    lastHeap: last,
    socketsAtEnd,
    handlesAtEnd,
    violations,
  };
}

/**
 * What the callers saw must agree with what the pool says it did: one ConnectionCheckOutStarted per checkout; each
 * delivered checkout had its ConnectionCheckedOut (and any other ConnectionCheckedOut went to a caller that had just
 * left); each WaitQueueTimeoutError its `timeout` failure event.
 */
function outcomesAgreeWithEvents(ledger: CheckOutLedger, audit: PoolAudit): string[] {
  const v: string[] = [];
  if (ledger.started !== audit.checkOutStarted) {
    v.push(`checkouts started by callers ${ledger.started} != ConnectionCheckOutStarted events ${audit.checkOutStarted}`);
  }
  if (audit.checkedOut < ledger.resolved || audit.checkedOut > ledger.resolved + ledger.unsubscribed) {
    v.push(
      `ConnectionCheckedOut events ${audit.checkedOut} outside [delivered ${ledger.resolved}, delivered + left by their caller ${ledger.resolved + ledger.unsubscribed}]`,
    );
  }
  const timedOut = audit.checkOutFailed.get('timeout') ?? 0;
  if (ledger.rejectedWith('WaitQueueTimeoutError') !== timedOut) {
    v.push(`WaitQueueTimeoutError at callers ${ledger.rejectedWith('WaitQueueTimeoutError')} != ConnectionCheckOutFailed (timeout) events ${timedOut}`);
  }
  return v;
}

/**
 * Waits (up to SETTLE_MS) for the process's active resources to fall to `baseline`; records a violation naming what
 * is left `when` it does not, and resolves to how many resources are left.
 */
async function resourcesLeft(baseline: ReadonlyMap<string, number>, when: string, violation: (message: string) => void): Promise<number> {
  await settled(() => Object.keys(resourcesAbove(baseline)).length === 0, SETTLE_MS);
  const extra = resourcesAbove(baseline);
  const left = Object.values(extra).reduce((a, b) => a + b, 0);
  if (left > 0) violation(`${left} active resource(s) beyond the baseline ${when}: ${JSON.stringify(extra)}`);
  return left;
}

/** Opens a raw TCP connection to `address` (the test-only socket leak); errors on it are ignored. */
function openSocket(address: string): Promise<net.Socket> {
  const [host, port] = address.split(':');
  const socket = net.connect({ host, port: Number(port) });
  socket.on('error', () => undefined);
  return new Promise((resolve) => socket.once('connect', () => resolve(socket)));
}

function mib(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

async function main(): Promise<number> {
  const args = parseSoakArgs(process.argv.slice(2), process.env);
  if (args.kind === 'help') {
    process.stdout.write(HELP);
    return 0;
  }
  if (args.kind === 'error') {
    process.stderr.write(`soak: ${args.message}\n${USAGE}\n`);
    return 2;
  }
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) {
    process.stderr.write('soak: run it with node --expose-gc (npm run soak does): the heap is sampled after a full GC\n');
    return 2;
  }
  const { seconds, seed, leak } = args.settings;
  log(`${seconds} s of load, seed ${seed} (replay with --seed ${seed})${leak === undefined ? '' : `, injected leak: ${leak}`}`);
  const summary = await soak(args.settings, gc);
  await new Promise<void>((resolve) => process.stdout.write(`${JSON.stringify(summary)}\n`, () => resolve()));
  log(summary.violations.length === 0 ? 'no violation' : `${summary.violations.length} violation(s)`);
  return summary.violations.length === 0 ? 0 : 1;
}

main().then(
  (code) => {
    // A clean run exits by itself (nothing of it is left running); after a violation, whatever leaked may not let it.
    if (code === 0) process.exitCode = 0;
    else process.exit(code);
  },
  (error: unknown) => {
    process.stderr.write(`soak: ${(error as Error)?.stack ?? String(error)}\n`);
    process.exit(1);
  },
);
