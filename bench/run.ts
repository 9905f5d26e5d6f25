/**
 * `npm run bench`: measures rxcmap against the official driver's pool, tarn, generic-pool and a hand-written limit,
 * in one run on one machine, over several rounds, and reports medians and each peer's ratio to rxcmap. rxcmap and
 * the driver run in three modes (unobserved, observed, logging; see peers.ts), and rxcmap also instrumented with
 * `rxcmap/opentelemetry` (throughput only, with and without a metric reader). Writes bench/results.json and
 * bench/results.md (pasteable as the README's benchmark section). `--quick` finishes in about a minute; `--rounds N`
 * overrides the number of rounds.
 *
 * Every measurement opens its pool, checks its mode's wiring, runs a full GC, primes the pool's hot path, then
 * measures; peers are interleaved, in an order that reverses every second round and rotates (round-order.ts). Before
 * anything is measured, a short run checks that each mode is what it claims, by counting what its listeners, log sink
 * and Meter receive (mode-check.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
// First: it instruments the driver's modules as they load.
import './command-tracing';
import { BASELINE_COMMIT } from './baseline';
import { DRIVER, INSTRUMENTED, MODES, PEERS, RXCMAP, WATCHED, baselinePeers, generic, limit, limitShape, limitThenable, tarn, type Mode, type Peer, type PoolUnderTest } from './peers';
import { abortAlone, adminCommand, cancelCost, cycles, fill, heapPerWaiter, ping, waits, type WaitForm, type WaitResult } from './scenarios';
import { CHECK_CYCLES, checkModes, type ModeCheck } from './mode-check';
import { loadTimes } from './load-time';
import { extensionsReport, EXTENSIONS_CELL_MIN_RATIO, EXTENSIONS_MIN_RATIO, instrumentationReport, INSTRUMENTED_CELL_MIN_RATIO, INSTRUMENTED_MIN_RATIO, type Target } from './report';
import { roundOrder } from './round-order';
import { callersLabel, costShare, human, median, micros, ratio, table } from './stats';

const { values } = parseArgs({ options: { quick: { type: 'boolean', default: false }, rounds: { type: 'string' } } });
const quick = values.quick === true;
const rounds = values.rounds !== undefined ? Number(values.rounds) : quick ? 3 : 7;
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
const CANCELS_TIMED = quick ? 3000 : 30_000;
/**
 * Cancels run (in batches of 1000) before each timed measurement, after its full GC. The cancel path of every peer
 * runs several times slower until its code is optimised again: rxcmap's Observable form takes 2–3 µs per cancel over
 * its first few thousand and settles near 0.1–0.3 µs after 20,000 to 30,000; the driver's and tarn's settle sooner.
 */
const CANCELS_PRIMED = quick ? 2000 : 30_000;

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
  /** A cancel entry with no pool: abort() only, or (true) abort() and the caller's Promise rejected (see abortAlone). */
  readonly reject?: boolean;
  /** A cancel entry: aborted through a DirectAbortController (bench/direct-signal.ts) rather than the platform's. */
  readonly direct?: boolean;
}

/** The peers of the latency scenario, as entries. */
const PEER_ENTRIES: readonly Entry[] = PEERS.map((peer) => ({ name: peer.name, peer }));
/** rxcmap unobserved and observed before its extensions (see baseline.ts), or why they are not measured. */
const BASELINE = baselinePeers();
/**
 * The peers of the throughput scenario: every peer, then rxcmap watched through state$, then rxcmap instrumented with
 * and without a reader, then rxcmap before its extensions.
 */
const THROUGHPUT_PEERS: readonly Peer[] = [...PEERS, WATCHED, ...INSTRUMENTED, ...(typeof BASELINE === 'string' ? [] : [BASELINE.unobserved, BASELINE.observed])];
const THROUGHPUT_ENTRIES: readonly Entry[] = THROUGHPUT_PEERS.map((peer) => ({ name: peer.name, peer }));

/**
 * Runs `measure` for every entry, `rounds` times, each on a freshly opened pool of `maxPoolSize` whose mode is
 * checked, after a full GC. Entries are interleaved in {@link roundOrder}: each runs before each other entry in as many
 * rounds as after it (give or take one), so neither machine noise nor another peer's garbage lands on one peer only.
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
    for (const entry of roundOrder(entries, r)) results.get(entry.name)!.push(await once(entry));
  }
  return results;
}

/**
 * Warms every peer up and measures its cycle rate on a pool of 10 at each caller count of the throughput cells, from
 * which the peer's cycle count per run is set for that caller count (so that every run lasts about as long).
 */
async function calibrate(address: string, callerCounts: readonly number[]): Promise<Map<string, number>> {
  const rates = new Map<string, number>();
  for (const peer of THROUGHPUT_PEERS) {
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
  const checks: Target[] = [];
  const target = (name: string, met: boolean, detail: string): void => void checks.push({ target: name, met, detail });
  let modeChecks: ModeCheck[] = [];
  try {
    // 0. Each mode is what it claims.
    modeChecks = await checkModes(address, [...MODES.map((m) => RXCMAP[m]), WATCHED, ...INSTRUMENTED, ...MODES.map((m) => DRIVER[m])], log);
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
    report.cyclesPerRun = Object.fromEntries(THROUGHPUT_PEERS.map((p) => [p.name, Object.fromEntries(allCallers.map((c) => [c, opsFor(p, c)]))]));

    // 1. Throughput: checkOut → microtask → checkIn, no clock in the loop.
    const cells: Record<string, unknown>[] = [];
    const tput = new Map<string, number>(); // median cycles/s by "size/callers/peer"
    const perRoundSamples = new Map<string, number[]>(); // cycles/s per round, in round order, by "size/callers/peer"
    for (const size of POOL_SIZES) {
      for (const callers of allCallers) {
        const cellStart = Date.now();
        const runs = await overRounds(address, THROUGHPUT_ENTRIES, size, (pool, e) => cycles(pool!, callers, opsFor(e.peer!, callers)), {
          prime: (pool, e) => cycles(pool!, callers, primeOps(e.peer!, callers)),
        });
        log(`throughput: maxPoolSize ${size}, ${callersLabel(callers)} (${Date.now() - cellStart} ms)`);
        const cell: Record<string, unknown> = { maxPoolSize: size, callers };
        for (const peer of THROUGHPUT_PEERS) {
          const samples = runs.get(peer.name)!;
          tput.set(`${size}/${callers}/${peer.name}`, median(samples));
          perRoundSamples.set(`${size}/${callers}/${peer.name}`, samples);
          cell[peer.name] = { cyclesPerSec: median(samples), samples: samples.map(Math.round) };
        }
        cells.push(cell);
      }
    }
    report.throughput = cells;
    const at = (size: number, callers: number, peer: Peer): number => tput.get(`${size}/${callers}/${peer.name}`)!;
    const perRound = (size: number, callers: number, peer: Peer): number[] => perRoundSamples.get(`${size}/${callers}/${peer.name}`)!;
    out.push('#### checkOut → microtask → checkIn (cycles/s, median)', '');
    out.push(
      'rxcmap observed and logging: ratio to rxcmap unobserved. The driver: ratio to rxcmap in the same mode. ' +
        'tarn, generic-pool, the limit, the limit behind a lazy thenable and the limit on rxcmap\'s shape (unobserved): ratio ' +
        'to rxcmap unobserved. The limit on rxcmap\'s shape is the limit\'s FIFO pool of plain objects behind the lazy thenable, ' +
        'the serialized input, `scan`, commands and runner that rxcmap is built on, with no other pool work (bench/limit-shape.ts).' +
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
          ...[tarn, generic, limit, limitThenable, limitShape].map((p) => `${human(at(size, callers, p))} (${ratio(at(size, callers, p), ours('unobserved'))})`),
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
        const ls = at(size, callers, limitShape);
        target(
          `rxcmap unobserved ≥ 0.4× the limit (${where})`,
          ru >= 0.4 * l,
          `${(ru / l).toFixed(2)}× (${(ru / lt).toFixed(2)}× the limit behind the same lazy-thenable protocol; ` +
            `the limit on rxcmap's shape reaches ${(ls / l).toFixed(2)}× the limit, and rxcmap ${(ru / ls).toFixed(2)}× of it)`,
        );
        target(`rxcmap logging ≥ 2× driver logging (${where})`, rl >= 2 * dl, `${(rl / dl).toFixed(2)}×`);
      }
    }

    // 1b. Watched through state$, from the same runs.
    out.push('#### watched through `state$`, checkOut → microtask → checkIn (cycles/s, median; same runs as above)', '');
    out.push(
      'rxcmap watched: one no-op subscriber on `state$` (a dashboard of the pool\'s counts; it receives a snapshot after ' +
        'each batch that changes one, two per cycle at 1 caller) and none on `events$`. In parentheses, the ratio to rxcmap ' +
        `unobserved, of the medians. Target, as for observed: ≥ 0.5× rxcmap unobserved at ${CALLERS.join(', ')} callers.` +
        (INFO_CALLERS.length > 0 ? ` ${INFO_CALLERS.join(', ')} callers: information, no target.` : ''),
      '',
    );
    out.push(
      table(
        ['maxPoolSize', 'callers', 'rxcmap unobserved', 'rxcmap observed', 'rxcmap watched'],
        POOL_SIZES.flatMap((size) =>
          allCallers.map((callers) => {
            const [ru, ro, rw] = [RXCMAP.unobserved, RXCMAP.observed, WATCHED].map((p) => at(size, callers, p));
            return [String(size), String(callers), human(ru), `${human(ro)} (${ratio(ro, ru)})`, `${human(rw)} (${ratio(rw, ru)})`];
          }),
        ),
      ),
      '',
    );
    for (const size of POOL_SIZES) {
      for (const callers of CALLERS) {
        const [ru, rw] = [RXCMAP.unobserved, WATCHED].map((p) => at(size, callers, p));
        target(`rxcmap watched ≥ 0.5× rxcmap unobserved (maxPoolSize ${size}, ${callersLabel(callers)})`, rw >= 0.5 * ru, `${(rw / ru).toFixed(2)}×`);
      }
    }

    // 1c. The OpenTelemetry instrumentation, from the same runs.
    const [instrumented, instrumentedSdk, instrumentedWithReader] = INSTRUMENTED;
    const otel = instrumentationReport(
      POOL_SIZES.flatMap((size) =>
        allCallers.map((callers) => ({
          maxPoolSize: size,
          callers,
          unobserved: perRound(size, callers, RXCMAP.unobserved),
          observed: perRound(size, callers, RXCMAP.observed),
          instrumented: perRound(size, callers, instrumented),
          instrumentedSdk: perRound(size, callers, instrumentedSdk),
          instrumentedWithReader: perRound(size, callers, instrumentedWithReader),
        })),
      ),
      CALLERS,
    );
    out.push('#### OpenTelemetry instrumentation, checkOut → microtask → checkIn (cycles/s, median; same runs as above)', '');
    out.push(
      '`instrumentConnectionPool(pool, { meter, poolName })` of `rxcmap/opentelemetry`: with the Meter of ' +
        '`@opentelemetry/api` and no SDK registered (no exporter attached), then, information only, on an ' +
        '`@opentelemetry/sdk-metrics` MeterProvider with no reader and with a PeriodicExportingMetricReader whose ' +
        'interval never elapses during a run (the SDK hashes the attributes and reads the clock on every `record()`, ' +
        'two per cycle: that is its cost, not the pool\'s). ' +
        'The instrumentation is the pool\'s only `events$` subscriber; in parentheses, the ratio to rxcmap observed ' +
        '(one no-op `events$` subscriber) / to rxcmap unobserved, of the medians. Targets, decided on the per-round ratios ' +
        `of instrumented to observed (the two measured in the same round): over every cell of ${CALLERS.join(', ')} callers, ` +
        `the 95% interval of their median starts at ≥ ${INSTRUMENTED_MIN_RATIO}× (a cost of ${costShare(INSTRUMENTED_MIN_RATIO)} ` +
        'or more common to the cells, on top of being observed, is ruled out), and no cell\'s median is below ' +
        `${INSTRUMENTED_CELL_MIN_RATIO}× (a coarser check for a cost confined to one cell); why pairs, and what the interval ` +
        'assumes: see the extensions unused, below.' +
        (INFO_CALLERS.length > 0 ? ` ${INFO_CALLERS.join(', ')} callers: information, no target.` : ''),
      '',
    );
    out.push(otel.table, '');
    checks.push(...otel.targets);

    // 1d. The extensions unused: rxcmap against itself before them, from the same runs.
    out.push(`#### the extensions unused: rxcmap against rxcmap at ${BASELINE_COMMIT}, before them (cycles/s, median; same runs as above)`, '');
    if (typeof BASELINE === 'string') {
      out.push(`Not measured: ${BASELINE}.`, '');
    } else {
      const ext = extensionsReport(
        POOL_SIZES.flatMap((size) =>
          allCallers.map((callers) => ({
            maxPoolSize: size,
            callers,
            unobserved: perRound(size, callers, RXCMAP.unobserved),
            observed: perRound(size, callers, RXCMAP.observed),
            baselineUnobserved: perRound(size, callers, BASELINE.unobserved),
            baselineObserved: perRound(size, callers, BASELINE.observed),
          })),
        ),
        CALLERS,
        BASELINE_COMMIT,
      );
      out.push(
        `Commit ${BASELINE_COMMIT} is the last one before leak detection, the diagnostics channels, drain, priority checkouts, ` +
          'the bounded WaitQueue, connection lifetime, warm-up, per-checkout deadlines and TCP keepalive; it is extracted ' +
          'with `git archive` and measured in the same rounds as everything above, with default options (every extension ' +
          "unused). In parentheses, rxcmap's ratio to it in the same mode: of the medians, then of each round's pair " +
          '(the two measured in the same round; the median, then the lowest and the highest). rxcmap today also holds ' +
          'optimisations made after that commit (the no-wait path of `checkOut`, the one-check high-priority lane, the ' +
          'hand-off of a checked-in connection to the oldest waiter), so the ratio is the extensions\' cost net of them, ' +
          "not in isolation. Pairing reduces the effect of the machine's speed drifting between rounds, which alone spreads " +
          `one cell's samples of one entry over ±20%: one cell's ${rounds} rounds cannot resolve ${costShare(EXTENSIONS_MIN_RATIO)}, ` +
          `all cells together can. Targets, in each mode: over every cell of ${CALLERS.join(', ')} callers, the 95% interval ` +
          `of the median per-round ratio (sign-test order statistics, each round of each cell taken as an independent pair) ` +
          `starts at ≥ ${EXTENSIONS_MIN_RATIO}× (a cost of ${costShare(EXTENSIONS_MIN_RATIO)} or more common to the cells is ` +
          "ruled out, 97.5% one-sided), and no cell's median per-round ratio is below " +
          `${EXTENSIONS_CELL_MIN_RATIO}× (a coarser check: a cost confined to a few cells shows only when larger than ` +
          `${costShare(EXTENSIONS_CELL_MIN_RATIO)}).` +
          (INFO_CALLERS.length > 0 ? ` ${INFO_CALLERS.join(', ')} callers: information, no target.` : ''),
        '',
      );
      out.push(ext.table, '');
      checks.push(...ext.targets);
    }

    // 2. Checkout-wait latency, in its own runs.
    const waitRows: string[][] = [];
    const tailRows: string[][] = [];
    const waitData: Record<string, unknown>[] = [];
    for (const [size, callers] of WAIT_CELLS) {
      const cellStart = Date.now();
      const runs = await overRounds(address, PEER_ENTRIES, size, (pool, e) => waits(pool!, callers, opsFor(e.peer!, callers, SECONDS_PER_RUN / 2)), {
        prime: (pool, e) => waits(pool!, callers, primeOps(e.peer!, callers)),
      });
      log(`checkout wait: maxPoolSize ${size}, ${callersLabel(callers)} (${Date.now() - cellStart} ms)`);
      const cell: Record<string, unknown> = { maxPoolSize: size, callers };
      const row = [String(size), String(callers)];
      const tail = [String(size), String(callers)];
      for (const peer of PEERS) {
        const r: WaitResult[] = runs.get(peer.name)!;
        const of = (k: keyof WaitResult): number => median(r.map((x) => x[k]));
        const m: WaitResult = { p50: of('p50'), p99: of('p99'), p999: of('p999'), max: of('max'), gcLongest: of('gcLongest') };
        cell[peer.name] = m;
        row.push(`${micros(m.p50)} / ${micros(m.p99)}`);
        tail.push(`${micros(m.p999)} / ${micros(m.max)} (${micros(m.gcLongest)})`);
      }
      waitRows.push(row);
      tailRows.push(tail);
      waitData.push(cell);
    }
    report.checkoutWaitMicros = waitData;
    out.push('#### checkout wait (p50 / p99, µs, median; measured apart from throughput)', '');
    out.push(table(['maxPoolSize', 'callers', ...PEERS.map((p) => p.name)], waitRows), '');
    out.push(
      '#### checkout wait, the tail (p99.9 / max, µs, median; in parentheses the longest garbage-collection pause of the same run)',
      '',
      'The same runs as above. A checkout waiting while the collector pauses the thread waits at least that pause: a max near the pause in parentheses is the collector\'s, not the pool\'s.',
      '',
    );
    out.push(table(['maxPoolSize', 'callers', ...PEERS.map((p) => p.name)], tailRows), '');

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
      { name: 'abort() and a Promise rejected with a new error, no pool', form: 'promise', reject: true },
      { name: 'rxcmap (Promise, direct abort())', peer: RXCMAP.unobserved, form: 'promise', direct: true },
      { name: 'direct abort() and a Promise rejected with a new error, no pool', form: 'promise', reject: true, direct: true },
    ];
    const costs: Record<string, Record<number, number>> = {};
    for (const queued of CANCEL_QUEUES) {
      const runs = await overRounds(
        address,
        cancelEntries,
        1,
        (pool, e) =>
          pool === undefined
            ? abortAlone(queued, CANCELS_TIMED, e.reject, e.direct)
            : cancelCost(pool, e.form!, queued, CANCELS_TIMED, e.direct),
        {
          prime: (pool, e) =>
            pool === undefined
              ? abortAlone(1000, CANCELS_PRIMED, e.reject, e.direct)
              : cancelCost(pool, e.form!, 1000, CANCELS_PRIMED, e.direct),
        },
      );
      for (const e of cancelEntries) (costs[e.name] ??= {})[queued] = median(runs.get(e.name)!);
    }
    report.cancelMicros = costs;
    out.push('#### cost of one cancel, unobserved (pool of 1 held, µs per cancel, median)', '');
    out.push(
      'Cancelling every queued checkout, newest first, then handing the held connection back (the pool skips the cancelled), ' +
        `${CANCELS_TIMED} cancels per measurement, after ${CANCELS_PRIMED} untimed ones (in batches of 1000) that bring the ` +
        "cancel path back to the optimised state a pool that cancels often keeps it in: after each measurement's full GC, " +
        "rxcmap's Observable form costs 2–3 µs per cancel over its first few thousand and settles near 0.1–0.3 µs. " +
        'Garbage collection during a measurement is included. generic-pool cannot cancel a checkout. The seventh row is the ' +
        'floor of a Promise-form cancel that gives each caller its own error, with no pool: abort(), then, in the ' +
        "listener, a new error (message, the signal's reason as cause, no stack frames) rejecting the caller's pending Promise. " +
        'The last two rows take the platform out: the signal is an AbortController of a polyfill\'s shape whose abort() ' +
        "calls its listener at once, building no Event and no DOMException (bench/direct-signal.ts); between them is the pool's own work.",
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
    const floorName = 'abort() and a Promise rejected with a new error, no pool';
    // The Promise form is cancelled through AbortController.abort(), which costs microseconds before any pool sees
    // it (Node builds a DOMException for its reason); the pool's own part is what is left. Beyond the floor (abort()
    // and the caller's rejection, no pool) is the pool's work alone: information, no target.
    const beyond = (floor: string): number => Math.max(...CANCEL_QUEUES.map((q) => costs[cancelEntries[0].name][q] - costs[floor][q]));
    const ownPart = beyond(abortName);
    target(
      "a cancel ≤ 1 µs unobserved (Promise form: the pool's part, beyond AbortController.abort() itself)",
      ownPart <= 1,
      `${micros(ownPart)} µs (${both(cancelEntries[0].name)}; AbortController.abort() alone: ${both(abortName)}; ` +
        `abort() and a rejected Promise, no pool: ${both(floorName)}, so ${micros(Math.max(0, beyond(floorName)))} µs is the pool's work)`,
    );
    target('a cancel ≤ 1 µs unobserved (Observable form, unsubscribe)', worst(cancelEntries[1].name) <= 1, both(cancelEntries[1].name));
    const directName = 'rxcmap (Promise, direct abort())';
    const directFloorName = 'direct abort() and a Promise rejected with a new error, no pool';
    out.push(
      `The Promise form's cancel without the platform's abort(): ${both(directName)}; the floor with no pool: ` +
        `${both(directFloorName)}; so the pool's own work is ` +
        CANCEL_QUEUES.map((q) => `${micros(costs[directName][q] - costs[directFloorName][q])} µs at ${q} queued`).join(', ') +
        ' (information, no target).',
      '',
    );

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
      for (const kind of roundOrder(['rxcmap', 'driver'] as const, r)) {
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
      for (const kind of roundOrder(['rxcmap', 'driver'] as const, r)) {
        gc();
        pingRuns[kind].push(await ping(kind, address, 50, pingOps, pingOps / 10));
      }
    }
    const pings = { rxcmap: median(pingRuns.rxcmap), driver: median(pingRuns.driver) };
    report.pingPerSec = pings;
    out.push('#### end-to-end ping (pool of 10, 50 callers, unobserved, pings/s, median)', '');
    out.push(table(['rxcmap pool + connection', 'driver MongoClient'], [[human(pings.rxcmap), `${human(pings.driver)} (${ratio(pings.driver, pings.rxcmap)})`]]), '');
    target('end-to-end ping ≥ 2× MongoClient', pings.rxcmap >= 2 * pings.driver, `${(pings.rxcmap / pings.driver).toFixed(2)}×`);
    // The same with the command events watched, as APM does (rxcmap's commandEvents$; the driver's monitorCommands).
    log('end-to-end ping, command events watched');
    const watchedRuns = { rxcmap: [] as number[], driver: [] as number[] };
    for (let r = 0; r < rounds; r++) {
      for (const kind of roundOrder(['rxcmap', 'driver'] as const, r)) {
        gc();
        watchedRuns[kind].push(await ping(kind, address, 50, pingOps, pingOps / 10, 'watched'));
      }
    }
    const watchedPings = { rxcmap: median(watchedRuns.rxcmap), driver: median(watchedRuns.driver) };
    report.pingWatchedPerSec = watchedPings;
    out.push('#### end-to-end ping, command events watched (one no-op subscriber; the driver with monitorCommands and no-op listeners; pings/s, median)', '');
    out.push(table(['rxcmap pool + connection', 'driver MongoClient', 'rxcmap watched / unwatched'], [[human(watchedPings.rxcmap), `${human(watchedPings.driver)} (${ratio(watchedPings.driver, watchedPings.rxcmap)})`, `${(watchedPings.rxcmap / pings.rxcmap).toFixed(2)}×`]]), '');
    target('end-to-end ping, command events watched ≥ 2× MongoClient watched', watchedPings.rxcmap >= 2 * watchedPings.driver, `${(watchedPings.rxcmap / watchedPings.driver).toFixed(2)}×`);
    // The same with every command traced, as an OpenTelemetry setup does (rxcmap's traceCommands; the driver through
    // @opentelemetry/instrumentation-mongodb): information, no target.
    log('end-to-end ping, commands traced');
    const tracedRuns = { rxcmap: [] as number[], driver: [] as number[] };
    for (let r = 0; r < rounds; r++) {
      for (const kind of roundOrder(['rxcmap', 'driver'] as const, r)) {
        gc();
        tracedRuns[kind].push(await ping(kind, address, 50, pingOps, pingOps / 10, 'traced'));
      }
    }
    const tracedPings = { rxcmap: median(tracedRuns.rxcmap), driver: median(tracedRuns.driver) };
    report.pingTracedPerSec = tracedPings;
    out.push('#### end-to-end ping, commands traced (a span per command, batched to an exporter that drops them, each caller under a request span; the driver through @opentelemetry/instrumentation-mongodb; pings/s, median)', '');
    out.push(table(['rxcmap pool + connection', 'driver MongoClient', 'rxcmap traced / unwatched'], [[human(tracedPings.rxcmap), `${human(tracedPings.driver)} (${ratio(tracedPings.driver, tracedPings.rxcmap)})`, `${(tracedPings.rxcmap / pings.rxcmap).toFixed(2)}×`]]), '');
    // 7. Load time: require() in a fresh process, as a cold start pays it.
    log('load time');
    const loads = loadTimes(quick ? 5 : 15);
    report.loadMS = loads;
    out.push('#### load time: `require()` in a fresh process (ms, median)', '');
    out.push(
      table(
        ['rxcmap', 'driver (`mongodb`)', 'rxjs alone'],
        [[loads.rxcmap.toFixed(1), `${loads.mongodb.toFixed(1)} (${ratio(loads.mongodb, loads.rxcmap)})`, loads.rxjs.toFixed(1)]],
      ),
      '',
    );
    target('load time ≤ the driver\'s', loads.rxcmap <= loads.mongodb, `${loads.rxcmap.toFixed(1)} ms against ${loads.mongodb.toFixed(1)} ms`);
  } finally {
    child.kill('SIGTERM');
  }

  report.targets = checks;
  report.seconds = Math.round((Date.now() - started) / 1000);
  const m = report.machine as Record<string, unknown>;
  const header =
    `Measured ${String(report.date).slice(0, 10)} on ${m.cpu} (${m.cores} cores, ${m.memoryGiB} GiB), Node ${m.node}, ${m.platform}; ` +
    `${report.mode} run, ${rounds} rounds, ${SECONDS_PER_RUN} s per throughput run, medians.`;
  const perCycle = (name: string, key: 'eventsPerCycle' | 'writesPerCycle' | 'measurementsPerCycle' | 'snapshotsPerCycle'): string =>
    String(modeChecks.find((c) => c.peer === name)?.[key] ?? 'n/a');
  const modesNote =
    'Modes: `unobserved` (no listener, no logging), `observed` (a no-op subscriber on rxcmap\'s `events$`; a no-op listener ' +
    'on the MongoClient for each CMAP event), `logging` (the `connection` component at `debug` to a no-op sink); rxcmap ' +
    'only, `watched` (a no-op subscriber on `state$`, none on `events$`) and `instrumented` (`rxcmap/opentelemetry` records the pool\'s metrics, no other subscriber; the API\'s Meter, or an SDK one). ' +
    `Checked before measuring, over ${CHECK_CYCLES} cycles at 1 and at 100 callers on a pool of 10: ` +
    `observed listeners received ${perCycle(RXCMAP.observed.name, 'eventsPerCycle')} (rxcmap) and ${perCycle(DRIVER.observed.name, 'eventsPerCycle')} (driver) events per cycle, ` +
    `logging sinks ${perCycle(RXCMAP.logging.name, 'writesPerCycle')} (rxcmap) and ${perCycle(DRIVER.logging.name, 'writesPerCycle')} (driver) messages per cycle, ` +
    'unobserved pools had neither listener nor logger; ' +
    `the watched pool's subscriber received ${perCycle(WATCHED.name, 'snapshotsPerCycle')} state$ snapshots per cycle; ` +
    'instrumented pools, recording for the check on an SDK Meter read ' +
    `through a reader (the variant with a reader: its own), recorded ` +
    `${INSTRUMENTED.map((p) => `${perCycle(p.name, 'measurementsPerCycle')} (${p.name})`).join(', ')} histogram measurements per cycle (one wait_time, one use_time).`;
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
