/**
 * `npm run bench`: measures rxcmap against the official driver's pool, tarn, generic-pool and a hand-written limit,
 * in one run on one machine, over several rounds, and reports medians and each peer's ratio to rxcmap. rxcmap and
 * the driver run in three modes (unobserved, observed, logging; see peers.ts). Writes bench/results.json and
 * bench/results.md (pasteable as the README's benchmark section). `--quick` finishes in about a minute; `--rounds N`
 * overrides the number of rounds.
 *
 * Every measurement opens its pool, checks its mode's wiring, runs a full GC, primes the pool's hot path, then
 * measures; peers are interleaved and their order rotates every round. Before anything is measured, a short run checks that each mode is what it
 * claims, by counting what its listeners and log sink receive.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { DRIVER, MODES, PEERS, Probe, RXCMAP, generic, limit, limitThenable, tarn, type Mode, type Peer, type PoolUnderTest } from './peers';
import { abortAlone, adminCommand, cancelCost, cycles, fill, heapPerWaiter, ping, waits, type WaitForm, type WaitResult } from './scenarios';
import { human, median, micros, table } from './stats';

const { values } = parseArgs({ options: { quick: { type: 'boolean', default: false }, rounds: { type: 'string' } } });
const quick = values.quick === true;
const rounds = values.rounds !== undefined ? Number(values.rounds) : quick ? 3 : 5;
if (!Number.isInteger(rounds) || rounds < 1) throw new Error(`--rounds must be a positive integer, got ${values.rounds}`);
/** How long one throughput measurement runs, in seconds: each peer's cycle count is calibrated to it. */
const SECONDS_PER_RUN = quick ? 0.03 : 0.25;
/** A throughput run has at least this many cycles per caller, so that every caller cycles several times. */
const MIN_CYCLES_PER_CALLER = 5;
const POOL_SIZES = [10, 100];
/** Caller counts with targets (a quick run leaves 10 out); 10000 is reported as information (full runs only). */
const CALLERS = quick ? [1, 100, 1000] : [1, 10, 100, 1000];
const INFO_CALLERS = quick ? [] : [10000];
/** Checkout-wait latency cells, [maxPoolSize, callers]; each run lasts half a throughput run. */
const WAIT_CELLS: [number, number][] = quick
  ? [[10, 1000]]
  : [
      [10, 1],
      [10, 100],
      [10, 1000],
      [100, 1000],
    ];
const WAITING = 10_000;
const CANCEL_QUEUES = [1000, 10_000];
/** Cancels timed per measurement (in batches of the queue size). */
const CANCELS_TIMED = quick ? 3000 : 10_000;
const CHECK_CYCLES = 2000;

/** A progress line on stderr, stamped with the seconds since the process started. */
function log(line: string): void {
  process.stderr.write(`[${(performance.now() / 1000).toFixed(1)} s] ${line}\n`);
}

const exposedGc = (globalThis as { gc?: () => void }).gc;
if (exposedGc === undefined) throw new Error('run the benchmarks with node --expose-gc (npm run bench does)');
const gc: () => void = exposedGc;

// The MONGODB_LOG_* variables would turn logging on for both libraries whatever the mode says.
for (const name of Object.keys(process.env).filter((k) => k.startsWith('MONGODB_LOG_'))) {
  log(`ignoring ${name} (modes are set by the benchmark)`);
  delete process.env[name];
}

async function startServer(): Promise<{ address: string; child: ChildProcess }> {
  const child = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', path.join(__dirname, 'server-process.ts')], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const address = await new Promise<string>((resolve, reject) => {
    child.stdout!.once('data', (d: Buffer) => resolve(JSON.parse(d.toString()).address));
    child.once('exit', (code) => reject(new Error(`server process exited with ${code}`)));
  });
  return { address, child };
}

const immediate = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** One thing measured in a scenario: a peer (opened for each measurement), or nothing (a baseline). */
interface Entry {
  readonly name: string;
  readonly peer?: Peer;
  readonly form?: WaitForm;
}

/** The peers of the throughput and latency scenarios, as entries. */
const PEER_ENTRIES: readonly Entry[] = PEERS.map((peer) => ({ name: peer.name, peer }));

/**
 * Runs `measure` for every entry, `rounds` times, each on a freshly opened pool of `maxPoolSize` whose mode is
 * checked, after a full GC. Entries are interleaved and their order rotates every round, so neither machine noise
 * nor another peer's garbage lands on one peer only.
 *
 * A forced full GC also drops the compiled code of functions not running at that moment, so every measurement
 * would start with its hot path back in the interpreter (a fresh pool of rxcmap then cycles at a tenth of its
 * speed for its first several thousand cycles). `prime`, run between the GC and `measure`, brings the hot path back
 * to the state a running application keeps it in.
 */
async function overRounds<E extends Entry, T>(
  address: string,
  entries: readonly E[],
  maxPoolSize: number,
  measure: (pool: PoolUnderTest | undefined, entry: E) => Promise<T>,
  { prime }: { prime?: (pool: PoolUnderTest | undefined, entry: E) => Promise<unknown> } = {},
): Promise<Map<string, T[]>> {
  const once = async (entry: E): Promise<T> => {
    const pool = entry.peer === undefined ? undefined : await entry.peer.open(maxPoolSize, address);
    try {
      pool?.verifyMode();
      await immediate();
      gc();
      await prime?.(pool, entry);
      return await measure(pool, entry);
    } finally {
      await pool?.close();
    }
  };
  const results = new Map<string, T[]>(entries.map((e) => [e.name, []]));
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < entries.length; i++) {
      const entry = entries[(i + r) % entries.length];
      results.get(entry.name)!.push(await once(entry));
    }
  }
  return results;
}

/** What a mode check saw: per cycle, events at the listeners and messages at the log sink. */
interface ModeCheck {
  peer: string;
  cycles: number;
  eventsPerCycle: number;
  writesPerCycle: number;
  lifecycle: Record<string, number>;
}

/** The CMAP log messages of one checkOut/checkIn cycle, and those of a pool's life around it. */
const CYCLE_MESSAGES = ['Connection checkout started', 'Connection checked out', 'Connection checked in'];
const CYCLE_EVENTS = ['connectionCheckOutStarted', 'connectionCheckedOut', 'connectionCheckedIn'];
const LIFE_MESSAGES = ['Connection pool created', 'Connection pool ready', 'Connection created', 'Connection ready', 'Connection pool closed'];
const LIFE_EVENTS = ['connectionPoolCreated', 'connectionPoolReady', 'connectionCreated', 'connectionReady', 'connectionPoolClosed'];

/**
 * Checks, before measuring, that each mode of rxcmap and the driver is what it claims: its wiring (verifyMode), and
 * what a probe on the same wiring receives over a pool's life and over cycles at 1 and 100 callers on a pool of 10:
 * observed, exactly the three CMAP events of each cycle and the pool's life events, and nothing logged; logging,
 * exactly the three messages of each cycle and those of the pool's life, and no listener called; unobserved,
 * neither. Throws on any mismatch.
 */
async function checkModes(address: string): Promise<ModeCheck[]> {
  const checks: ModeCheck[] = [];
  const fail = (peer: Peer, what: string): never => {
    throw new Error(`mode check failed for ${peer.name}: ${what}`);
  };
  for (const peer of [...MODES.map((m) => RXCMAP[m]), ...MODES.map((m) => DRIVER[m])]) {
    const probe = new Probe();
    const pool = await peer.open(10, address, probe);
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
    for (const callers of [1, 100]) {
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
 * Warms every peer up and measures its cycle rate on a pool of 10 at each caller count of the throughput cells, from
 * which the peer's cycle count per run is set for that caller count (so that every run lasts about as long).
 */
async function calibrate(address: string, callerCounts: readonly number[]): Promise<Map<string, number>> {
  const rates = new Map<string, number>();
  for (const peer of PEERS) {
    const pool = await peer.open(10, address);
    try {
      await cycles(pool, 10, 5000);
      for (const callers of callerCounts) {
        for (let ops = Math.max(2000, MIN_CYCLES_PER_CALLER * callers); ; ops *= 2) {
          const started = performance.now();
          const rate = await cycles(pool, callers, ops);
          if (performance.now() - started >= 40) {
            rates.set(`${peer.name}/${callers}`, rate);
            break;
          }
        }
      }
    } finally {
      await pool.close();
    }
  }
  return rates;
}

/** `peer / ours` as `0.42×`. */
const ratio = (peer: number, ours: number): string => (Number.isFinite(peer) && ours > 0 ? `${(peer / ours).toFixed(2)}×` : 'n/a');
const callersLabel = (n: number): string => `${n} caller${n === 1 ? '' : 's'}`;

async function main(): Promise<void> {
  const started = Date.now();
  const { address, child } = await startServer();
  const report: Record<string, unknown> = {
    date: new Date().toISOString(),
    mode: quick ? 'quick' : 'full',
    rounds,
    secondsPerRun: SECONDS_PER_RUN,
    machine: {
      cpu: os.cpus()[0]?.model ?? 'unknown',
      cores: os.cpus().length,
      memoryGiB: Math.round(os.totalmem() / 2 ** 30),
      node: process.version,
      platform: `${os.platform()} ${os.release()}`,
    },
  };
  const out: string[] = [];
  const checks: { target: string; met: boolean; detail: string }[] = [];
  const target = (name: string, met: boolean, detail: string): void => void checks.push({ target: name, met, detail });
  let modeChecks: ModeCheck[] = [];
  try {
    // 0. Each mode is what it claims.
    modeChecks = await checkModes(address);
    report.modeChecks = modeChecks;

    // Warm-up and calibration, not recorded.
    log('warm-up and calibration');
    const allCallers = [...CALLERS, ...INFO_CALLERS];
    const rates = await calibrate(address, allCallers);
    const opsFor = (peer: Peer, callers: number, seconds = SECONDS_PER_RUN): number =>
      Math.max(1000, MIN_CYCLES_PER_CALLER * callers, Math.round(rates.get(`${peer.name}/${callers}`)! * seconds));
    /**
     * Cycles that bring a fresh pool's hot path back after the GC: a quarter of a run, but at least 20000 cycles
     * (about what a fresh rxcmap pool takes to be back at full speed), or 0.1 s of cycles for a peer slower than that.
     */
    const primeOps = (peer: Peer, callers: number): number =>
      Math.max(opsFor(peer, callers, SECONDS_PER_RUN / 4), Math.min(20_000, opsFor(peer, callers, 0.1)));
    report.cyclesPerRun = Object.fromEntries(PEERS.map((p) => [p.name, Object.fromEntries(allCallers.map((c) => [c, opsFor(p, c)]))]));

    // 1. Throughput: checkOut → microtask → checkIn, no clock in the loop.
    const cells: Record<string, unknown>[] = [];
    const tput = new Map<string, number>(); // median cycles/s by "size/callers/peer"
    for (const size of POOL_SIZES) {
      for (const callers of allCallers) {
        const cellStart = Date.now();
        const runs = await overRounds(address, PEER_ENTRIES, size, (pool, e) => cycles(pool!, callers, opsFor(e.peer!, callers)), {
          prime: (pool, e) => cycles(pool!, callers, primeOps(e.peer!, callers)),
        });
        log(`throughput: maxPoolSize ${size}, ${callersLabel(callers)} (${Date.now() - cellStart} ms)`);
        const cell: Record<string, unknown> = { maxPoolSize: size, callers };
        for (const peer of PEERS) {
          const samples = runs.get(peer.name)!;
          tput.set(`${size}/${callers}/${peer.name}`, median(samples));
          cell[peer.name] = { cyclesPerSec: median(samples), samples: samples.map(Math.round) };
        }
        cells.push(cell);
      }
    }
    report.throughput = cells;
    const at = (size: number, callers: number, peer: Peer): number => tput.get(`${size}/${callers}/${peer.name}`)!;
    out.push('#### checkOut → microtask → checkIn (cycles/s, median)', '');
    out.push(
      'rxcmap observed and logging: ratio to rxcmap unobserved. The driver: ratio to rxcmap in the same mode. ' +
        'tarn, generic-pool, the limit and the limit behind a lazy thenable (unobserved): ratio to rxcmap unobserved.' +
        (INFO_CALLERS.length > 0 ? ` ${INFO_CALLERS.join(', ')} callers: information, no target.` : ''),
      '',
    );
    const rows = POOL_SIZES.flatMap((size) =>
      allCallers.map((callers) => {
        const ours = (m: Mode): number => at(size, callers, RXCMAP[m]);
        return [
          String(size),
          String(callers),
          human(ours('unobserved')),
          `${human(ours('observed'))} (${ratio(ours('observed'), ours('unobserved'))})`,
          `${human(ours('logging'))} (${ratio(ours('logging'), ours('unobserved'))})`,
          ...MODES.map((m) => `${human(at(size, callers, DRIVER[m]))} (${ratio(at(size, callers, DRIVER[m]), ours(m))})`),
          ...[tarn, generic, limit, limitThenable].map((p) => `${human(at(size, callers, p))} (${ratio(at(size, callers, p), ours('unobserved'))})`),
        ];
      }),
    );
    out.push(table(['maxPoolSize', 'callers', ...PEERS.map((p) => p.name)], rows), '');
    for (const size of POOL_SIZES) {
      for (const callers of CALLERS) {
        const where = `maxPoolSize ${size}, ${callersLabel(callers)}`;
        const [ru, ro, rl] = MODES.map((m) => at(size, callers, RXCMAP[m]));
        const [, dobs, dl] = MODES.map((m) => at(size, callers, DRIVER[m]));
        const l = at(size, callers, limit);
        target(`rxcmap observed ≥ 2× driver observed (${where})`, ro >= 2 * dobs, `${(ro / dobs).toFixed(2)}×`);
        target(`rxcmap observed ≥ 0.5× rxcmap unobserved (${where})`, ro >= 0.5 * ru, `${(ro / ru).toFixed(2)}×`);
        const lt = at(size, callers, limitThenable);
        target(
          `rxcmap unobserved ≥ 0.4× the limit (${where})`,
          ru >= 0.4 * l,
          `${(ru / l).toFixed(2)}× (${(ru / lt).toFixed(2)}× the limit behind the same lazy-thenable protocol)`,
        );
        target(`rxcmap logging ≥ 2× driver logging (${where})`, rl >= 2 * dl, `${(rl / dl).toFixed(2)}×`);
      }
    }

    // 2. Checkout-wait latency, in its own runs.
    const waitRows: string[][] = [];
    const waitData: Record<string, unknown>[] = [];
    for (const [size, callers] of WAIT_CELLS) {
      const cellStart = Date.now();
      const runs = await overRounds(address, PEER_ENTRIES, size, (pool, e) => waits(pool!, callers, opsFor(e.peer!, callers, SECONDS_PER_RUN / 2)), {
        prime: (pool, e) => waits(pool!, callers, primeOps(e.peer!, callers)),
      });
      log(`checkout wait: maxPoolSize ${size}, ${callersLabel(callers)} (${Date.now() - cellStart} ms)`);
      const cell: Record<string, unknown> = { maxPoolSize: size, callers };
      const row = [String(size), String(callers)];
      for (const peer of PEERS) {
        const r: WaitResult[] = runs.get(peer.name)!;
        const m = { p50: median(r.map((x) => x.p50)), p99: median(r.map((x) => x.p99)) };
        cell[peer.name] = m;
        row.push(`${micros(m.p50)} / ${micros(m.p99)}`);
      }
      waitRows.push(row);
      waitData.push(cell);
    }
    report.checkoutWaitMicros = waitData;
    out.push('#### checkout wait (p50 / p99, µs, median; measured apart from throughput)', '');
    out.push(table(['maxPoolSize', 'callers', ...PEERS.map((p) => p.name)], waitRows), '');

    // 3. Heap per waiting checkout, unobserved.
    log('heap per waiting checkout');
    const heapEntries: Entry[] = [
      { name: 'rxcmap (Promise)', peer: RXCMAP.unobserved, form: 'promise' },
      { name: 'rxcmap (Observable)', peer: RXCMAP.unobserved, form: 'observable' },
      { name: 'driver', peer: DRIVER.unobserved, form: 'promise' },
      { name: 'tarn', peer: tarn, form: 'promise' },
      { name: 'generic-pool', peer: generic, form: 'promise' },
      { name: 'limit', peer: limit, form: 'promise' },
    ];
    const heapRuns = await overRounds(address, heapEntries, 1, (pool, e) => heapPerWaiter(pool!, e.form!, WAITING));
    const heap: Record<string, number> = {};
    for (const e of heapEntries) heap[e.name] = median(heapRuns.get(e.name)!);
    report.heapBytesPerWaiter = heap;
    out.push(`#### heap per waiting checkout (${WAITING} waiting, after a full GC, bytes, median)`, '');
    out.push(
      'Promise form: `Promise.resolve(pool.checkOut())`, what `await` builds; Observable form: `pool.checkOut().subscribe(next)`.',
      '',
    );
    out.push(table(heapEntries.map((e) => e.name), [heapEntries.map((e) => `${Math.round(heap[e.name])} B`)]), '');
    target('heap per waiting checkout ≤ 500 B (Promise form)', heap['rxcmap (Promise)'] <= 500, `${Math.round(heap['rxcmap (Promise)'])} B`);
    target('heap per waiting checkout ≤ 800 B (Observable form)', heap['rxcmap (Observable)'] <= 800, `${Math.round(heap['rxcmap (Observable)'])} B`);

    // 4. Cost of one cancel, unobserved.
    log('cost per cancel');
    const cancelEntries: Entry[] = [
      { name: 'rxcmap (Promise, AbortController.abort())', peer: RXCMAP.unobserved, form: 'promise' },
      { name: 'rxcmap (Observable, unsubscribe)', peer: RXCMAP.unobserved, form: 'observable' },
      { name: 'driver (AbortController.abort())', peer: DRIVER.unobserved, form: 'promise' },
      { name: 'tarn (abort())', peer: tarn, form: 'promise' },
      { name: 'limit (flag)', peer: limit, form: 'promise' },
      { name: 'AbortController.abort() alone, no pool', form: 'promise' },
    ];
    const costs: Record<string, Record<number, number>> = {};
    for (const queued of CANCEL_QUEUES) {
      const runs = await overRounds(
        address,
        cancelEntries,
        1,
        (pool, e) => (pool === undefined ? abortAlone(queued, CANCELS_TIMED) : cancelCost(pool, e.form!, queued, CANCELS_TIMED)),
        { prime: (pool, e) => (pool === undefined ? abortAlone(1000, 2000) : cancelCost(pool, e.form!, 1000, 2000)) },
      );
      for (const e of cancelEntries) (costs[e.name] ??= {})[queued] = median(runs.get(e.name)!);
    }
    report.cancelMicros = costs;
    out.push('#### cost of one cancel, unobserved (pool of 1 held, µs per cancel, median)', '');
    out.push(
      'Cancelling every queued checkout, newest first, then handing the held connection back (the pool skips the cancelled). ' +
        'generic-pool cannot cancel a checkout.',
      '',
    );
    out.push(
      table(
        ['checkout', ...CANCEL_QUEUES.map((q) => `${q} queued`)],
        cancelEntries.map((e) => [e.name, ...CANCEL_QUEUES.map((q) => micros(costs[e.name][q]))]),
      ),
      '',
    );
    const worst = (name: string): number => Math.max(...CANCEL_QUEUES.map((q) => costs[name][q]));
    const both = (name: string): string => CANCEL_QUEUES.map((q) => `${micros(costs[name][q])} µs at ${q} queued`).join(', ');
    const abortName = 'AbortController.abort() alone, no pool';
    // The Promise form is cancelled through AbortController.abort(), which costs microseconds before any pool sees
    // it (Node builds a DOMException for its reason); the pool's own part is what is left.
    const ownPart = Math.max(...CANCEL_QUEUES.map((q) => costs[cancelEntries[0].name][q] - costs[abortName][q]));
    target(
      "a cancel ≤ 1 µs unobserved (Promise form: the pool's part, beyond AbortController.abort() itself)",
      ownPart <= 1,
      `${micros(ownPart)} µs (${both(cancelEntries[0].name)}; AbortController.abort() alone: ${both(abortName)})`,
    );
    target('a cancel ≤ 1 µs unobserved (Observable form, unsubscribe)', worst(cancelEntries[1].name) <= 1, both(cancelEntries[1].name));

    // 5. Fill to minPoolSize 10 at maxConnecting 2, 20 ms handshake.
    log('fill to minPoolSize');
    const appName = 'bench-fill';
    await adminCommand(address, {
      configureFailPoint: 'failCommand',
      mode: 'alwaysOn',
      data: { failCommands: ['isMaster', 'hello'], blockConnection: true, blockTimeMS: 20, appName },
    });
    const fillRuns = { rxcmap: [] as number[], driver: [] as number[] };
    for (let r = 0; r < rounds; r++) {
      for (const kind of r % 2 === 0 ? (['rxcmap', 'driver'] as const) : (['driver', 'rxcmap'] as const)) {
        gc();
        fillRuns[kind].push(await fill(kind, address, appName));
      }
    }
    await adminCommand(address, { configureFailPoint: 'failCommand', mode: 'off' });
    const fillMs = { rxcmap: median(fillRuns.rxcmap), driver: median(fillRuns.driver) };
    report.fillMS = fillMs;
    out.push('#### fill to minPoolSize 10, maxConnecting 2, 20 ms handshake (ms, median)', '');
    out.push(table(['rxcmap', 'driver'], [[fillMs.rxcmap.toFixed(1), `${fillMs.driver.toFixed(1)} (${ratio(fillMs.driver, fillMs.rxcmap)})`]]), '');
    target('fill to minPoolSize 10 ≤ 150 ms', fillMs.rxcmap <= 150, `${fillMs.rxcmap.toFixed(1)} ms`);

    // 6. End-to-end ping.
    log('end-to-end ping');
    const pingOps = quick ? 10_000 : 50_000;
    const pingRuns = { rxcmap: [] as number[], driver: [] as number[] };
    for (let r = 0; r < rounds; r++) {
      for (const kind of r % 2 === 0 ? (['rxcmap', 'driver'] as const) : (['driver', 'rxcmap'] as const)) {
        gc();
        pingRuns[kind].push(await ping(kind, address, 50, pingOps, pingOps / 10));
      }
    }
    const pings = { rxcmap: median(pingRuns.rxcmap), driver: median(pingRuns.driver) };
    report.pingPerSec = pings;
    out.push('#### end-to-end ping (pool of 10, 50 callers, unobserved, pings/s, median)', '');
    out.push(table(['rxcmap pool + connection', 'driver MongoClient'], [[human(pings.rxcmap), `${human(pings.driver)} (${ratio(pings.driver, pings.rxcmap)})`]]), '');
    target('end-to-end ping ≥ 2× MongoClient', pings.rxcmap >= 2 * pings.driver, `${(pings.rxcmap / pings.driver).toFixed(2)}×`);
  } finally {
    child.kill('SIGTERM');
  }

  report.targets = checks;
  report.seconds = Math.round((Date.now() - started) / 1000);
  const m = report.machine as Record<string, unknown>;
  const header =
    `Measured ${String(report.date).slice(0, 10)} on ${m.cpu} (${m.cores} cores, ${m.memoryGiB} GiB), Node ${m.node}, ${m.platform}; ` +
    `${report.mode} run, ${rounds} rounds, ${SECONDS_PER_RUN} s per throughput run, medians.`;
  const perCycle = (name: string, key: 'eventsPerCycle' | 'writesPerCycle'): string =>
    String(modeChecks.find((c) => c.peer === name)?.[key] ?? 'n/a');
  const modesNote =
    'Modes: `unobserved` (no listener, no logging), `observed` (a no-op subscriber on rxcmap\'s `events$`; a no-op listener ' +
    'on the MongoClient for each CMAP event), `logging` (the `connection` component at `debug` to a no-op sink). ' +
    `Checked before measuring, over ${CHECK_CYCLES} cycles at 1 and at 100 callers on a pool of 10: ` +
    `observed listeners received ${perCycle(RXCMAP.observed.name, 'eventsPerCycle')} (rxcmap) and ${perCycle(DRIVER.observed.name, 'eventsPerCycle')} (driver) events per cycle, ` +
    `logging sinks ${perCycle(RXCMAP.logging.name, 'writesPerCycle')} (rxcmap) and ${perCycle(DRIVER.logging.name, 'writesPerCycle')} (driver) messages per cycle, ` +
    'unobserved pools had neither listener nor logger.';
  const met = checks.filter((c) => c.met).length;
  const targets = checks.map((c) => `- ${c.met ? 'met' : 'MISSED'}: ${c.target}: ${c.detail}`).join('\n');
  const text = [header, '', modesNote, '', ...out, `#### targets (${met} of ${checks.length} met)`, '', targets, ''].join('\n');
  fs.writeFileSync(path.join(__dirname, 'results.json'), `${JSON.stringify(report, null, 2)}\n`);
  fs.writeFileSync(path.join(__dirname, 'results.md'), text);
  process.stdout.write(`${text}\n(${report.seconds} s; written to bench/results.json and bench/results.md)\n`);
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
