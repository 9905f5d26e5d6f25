/**
 * `npm run bench`: measures rxcmap against the official driver's pool, tarn, generic-pool and a hand-written limit,
 * in one run on one machine, over several rounds, and reports medians and each peer's ratio to rxcmap. Writes
 * bench/results.json. `--quick` finishes in under a minute; `--rounds N` overrides the number of rounds.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { PEERS, type Peer } from './peers';
import { adminCommand, cancelCost, churn, cycles, fill, heapPerWaiter, ping, type ChurnResult, type CycleResult } from './scenarios';
import { human, median, table } from './stats';

const { values } = parseArgs({ options: { quick: { type: 'boolean', default: false }, rounds: { type: 'string' } } });
const quick = values.quick === true;
const rounds = values.rounds !== undefined ? Number(values.rounds) : quick ? 3 : 5;
const cycleOps = quick ? 20_000 : 150_000;
const POOL_SIZES = [10, 100];
const CALLERS = [1, 10, 100, 1000, 10000];

function log(line: string): void {
  process.stderr.write(`${line}\n`);
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

/**
 * Runs `measure` for every peer, `rounds` times. Peers are interleaved and their order rotates every round, and each
 * measurement starts after a full GC, so neither machine noise nor another peer's garbage lands on one peer only.
 */
async function overRounds<T>(peers: readonly Peer[], measure: (peer: Peer) => Promise<T>): Promise<Map<string, T[]>> {
  const results = new Map<string, T[]>(peers.map((p) => [p.name, []]));
  const gc = (globalThis as { gc?: () => void }).gc;
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < peers.length; i++) {
      const peer = peers[(i + r) % peers.length];
      gc?.();
      await new Promise((resolve) => setImmediate(resolve));
      results.get(peer.name)!.push(await measure(peer));
    }
  }
  return results;
}

const ratio = (peer: number, ours: number): string => (Number.isFinite(peer) && ours > 0 ? `${(peer / ours).toFixed(2)}×` : 'n/a');

async function main(): Promise<void> {
  const started = Date.now();
  const { address, child } = await startServer();
  const report: Record<string, unknown> = {
    date: new Date().toISOString(),
    mode: quick ? 'quick' : 'full',
    rounds,
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
  try {
    // Warm-up, not recorded: lets the JIT compile every peer's hot path before the first measured cell.
    log('warm-up');
    for (const peer of PEERS) {
      for (const callers of [1, 10, 1000]) await cycles(peer, address, 10, callers, cycleOps);
    }

    // 1. checkOut → microtask → checkIn cycles.
    const cycleRows: string[][] = [];
    const cycleData: Record<string, unknown>[] = [];
    const perCycle = new Map<string, number>(); // rxcmap ns per cycle by "size/callers"
    for (const size of POOL_SIZES) {
      for (const callers of CALLERS) {
        const cellStart = Date.now();
        const runs = await overRounds(PEERS, (peer) => cycles(peer, address, size, callers, cycleOps));
        log(`cycles: maxPoolSize ${size}, ${callers} callers (${Date.now() - cellStart} ms)`);
        const med = (name: string): CycleResult => {
          const r = runs.get(name)!;
          return { opsPerSec: median(r.map((x) => x.opsPerSec)), p50: median(r.map((x) => x.p50)), p99: median(r.map((x) => x.p99)) };
        };
        const ours = med('rxcmap');
        perCycle.set(`${size}/${callers}`, 1e9 / ours.opsPerSec);
        const row = [String(size), String(callers), `${human(ours.opsPerSec)}/s (p50 ${ours.p50.toFixed(3)}, p99 ${ours.p99.toFixed(3)} ms)`];
        const cell: Record<string, unknown> = { maxPoolSize: size, callers };
        for (const peer of PEERS) {
          const m = med(peer.name);
          cell[peer.name] = m;
          if (peer.name !== 'rxcmap') row.push(`${human(m.opsPerSec)}/s (${ratio(m.opsPerSec, ours.opsPerSec)})`);
        }
        cycleRows.push(row);
        cycleData.push(cell);
        const d = med('driver').opsPerSec;
        const t = med('tarn').opsPerSec;
        const g = med('generic-pool').opsPerSec;
        const l = med('limit').opsPerSec;
        const at = `maxPoolSize ${size}, ${callers} callers`;
        checks.push({ target: `≥ 1.5× driver (${at})`, met: ours.opsPerSec >= 1.5 * d, detail: `${(ours.opsPerSec / d).toFixed(2)}×` });
        checks.push({ target: `≥ tarn and generic-pool (${at})`, met: ours.opsPerSec >= t && ours.opsPerSec >= g, detail: `${(ours.opsPerSec / t).toFixed(2)}× tarn, ${(ours.opsPerSec / g).toFixed(2)}× generic-pool` });
        checks.push({ target: `≥ ¼ of the limit (${at})`, met: ours.opsPerSec >= 0.25 * l, detail: `${(ours.opsPerSec / l).toFixed(2)} of the limit` });
      }
    }
    report.cycles = cycleData;
    out.push('### checkOut → microtask → checkIn (ops/s, median; ratio = peer / rxcmap)', '');
    out.push(table(['maxPoolSize', 'callers', 'rxcmap', ...PEERS.filter((p) => p.name !== 'rxcmap').map((p) => p.name)], cycleRows), '');
    for (const size of POOL_SIZES) {
      const flat = perCycle.get(`${size}/10000`)! / perCycle.get(`${size}/10`)!;
      const limitCell = (callers: number): number =>
        ((cycleData.find((c) => c.maxPoolSize === size && c.callers === callers)!.limit as CycleResult).opsPerSec);
      const limitFlat = limitCell(10) / limitCell(10000);
      checks.push({
        target: `cost per cycle, 10000 vs 10 callers ≤ 1.3× (maxPoolSize ${size})`,
        met: flat <= 1.3,
        detail: `${flat.toFixed(2)}× (the hand-written limit: ${limitFlat.toFixed(2)}× in the same run)`,
      });
    }

    // 2. Cancellation churn and cost per cancel.
    log('cancellation churn');
    const churnRuns = await overRounds(PEERS, (peer) => churn(peer, address, quick ? 20_000 : 100_000));
    const churnRows: string[][] = [];
    const churnData: Record<string, unknown> = {};
    for (const peer of PEERS) {
      const r = churnRuns.get(peer.name)!.filter((x): x is ChurnResult => x !== undefined);
      const ops = median(r.map((x) => x.opsPerSec));
      const cancels = median(r.map((x) => x.cancelsPerSec));
      churnData[peer.name] = r.length > 0 ? { opsPerSec: ops, cancelsPerSec: cancels } : null;
      churnRows.push([peer.name, r.length > 0 ? human(ops) : 'cannot cancel', r.length > 0 ? human(cancels) : '—']);
    }
    log('cost per cancel');
    const costs: Record<string, Record<string, number | null>> = {};
    for (const waiting of [1000, 10000]) {
      const runs = await overRounds(PEERS, (peer) => cancelCost(peer, address, waiting));
      for (const peer of PEERS) {
        const r = runs.get(peer.name)!.filter((x): x is number => x !== undefined);
        (costs[peer.name] ??= {})[waiting] = r.length > 0 ? median(r) : null;
      }
    }
    report.churn = churnData;
    report.cancelCostMicros = costs;
    out.push('### cancellation (pool of 10: 50 callers cycling, 50 abandoning checkouts)', '');
    out.push(
      table(
        ['pool', 'cycles/s while churning', 'cancels/s', 'µs per cancel, 1000 queued', 'µs per cancel, 10000 queued'],
        churnRows.map((row, i) => {
          const c = costs[PEERS[i].name];
          return [...row, c[1000] === null ? '—' : c[1000].toFixed(2), c[10000] === null ? '—' : c[10000].toFixed(2)];
        }),
      ),
      '',
    );
    const cancelFlat = costs.rxcmap[10000]! / costs.rxcmap[1000]!;
    checks.push({ target: 'cancellation O(1): µs per cancel, 10000 vs 1000 queued ≤ 1.5×', met: cancelFlat <= 1.5, detail: `${cancelFlat.toFixed(2)}×` });

    // 3. Heap per waiting checkout.
    log('heap per waiting checkout');
    const heapRuns = await overRounds(PEERS, (peer) => heapPerWaiter(peer, address, 10_000));
    const heap: Record<string, number> = {};
    for (const peer of PEERS) heap[peer.name] = median(heapRuns.get(peer.name)!);
    report.heapBytesPerWaiter = heap;
    out.push('### heap per waiting checkout (10000 waiting, bytes, median)', '');
    out.push(table(PEERS.map((p) => p.name), [PEERS.map((p) => `${Math.round(heap[p.name])} B`)]), '');
    checks.push({ target: 'heap per waiting checkout ≤ 1 KiB', met: heap.rxcmap <= 1024, detail: `${Math.round(heap.rxcmap)} B` });

    // 4. Fill to minPoolSize 10 at maxConnecting 2, 20 ms handshake.
    log('fill to minPoolSize');
    const appName = 'bench-fill';
    await adminCommand(address, {
      configureFailPoint: 'failCommand',
      mode: 'alwaysOn',
      data: { failCommands: ['isMaster', 'hello'], blockConnection: true, blockTimeMS: 20, appName },
    });
    const fillRuns = { rxcmap: [] as number[], driver: [] as number[] };
    for (let r = 0; r < rounds; r++) {
      fillRuns.rxcmap.push(await fill('rxcmap', address, appName));
      fillRuns.driver.push(await fill('driver', address, appName));
    }
    await adminCommand(address, { configureFailPoint: 'failCommand', mode: 'off' });
    const fillMs = { rxcmap: median(fillRuns.rxcmap), driver: median(fillRuns.driver) };
    report.fillMS = fillMs;
    out.push('### fill to minPoolSize 10, maxConnecting 2, 20 ms handshake (ms, median)', '');
    out.push(table(['rxcmap', 'driver'], [[fillMs.rxcmap.toFixed(1), `${fillMs.driver.toFixed(1)} (${ratio(fillMs.driver, fillMs.rxcmap)})`]]), '');
    checks.push({ target: 'fill to minPoolSize 10 ≤ 150 ms', met: fillMs.rxcmap <= 150, detail: `${fillMs.rxcmap.toFixed(1)} ms` });

    // 5. End-to-end ping.
    log('end-to-end ping');
    const pingOps = quick ? 10_000 : 50_000;
    const pingRuns = { rxcmap: [] as number[], driver: [] as number[] };
    for (let r = 0; r < rounds; r++) {
      pingRuns.rxcmap.push(await ping('rxcmap', address, 50, pingOps));
      pingRuns.driver.push(await ping('driver', address, 50, pingOps));
    }
    const pings = { rxcmap: median(pingRuns.rxcmap), driver: median(pingRuns.driver) };
    report.pingPerSec = pings;
    out.push('### end-to-end ping (pool of 10, 50 callers, pings/s, median)', '');
    out.push(table(['rxcmap pool + connection', 'driver MongoClient'], [[human(pings.rxcmap), `${human(pings.driver)} (${ratio(pings.driver, pings.rxcmap)})`]]), '');
    checks.push({ target: 'end-to-end ping ≥ 2× MongoClient', met: pings.rxcmap >= 2 * pings.driver, detail: `${(pings.rxcmap / pings.driver).toFixed(2)}×` });
  } finally {
    child.kill('SIGTERM');
  }

  report.targets = checks;
  report.seconds = Math.round((Date.now() - started) / 1000);
  const m = report.machine as Record<string, unknown>;
  const header = `Measured ${String(report.date).slice(0, 10)} on ${m.cpu} (${m.cores} cores, ${m.memoryGiB} GiB), Node ${m.node}, ${m.platform}; ${report.mode} mode, ${rounds} rounds, medians.`;
  const targets = checks.map((c) => `- ${c.met ? 'met' : 'MISSED'}: ${c.target}: ${c.detail}`).join('\n');
  const text = [header, '', ...out, '### targets', '', targets, ''].join('\n');
  fs.writeFileSync(path.join(__dirname, 'results.json'), `${JSON.stringify(report, null, 2)}\n`);
  fs.writeFileSync(path.join(__dirname, 'results.md'), text);
  process.stdout.write(`${text}\n(${report.seconds} s; written to bench/results.json and bench/results.md)\n`);
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
