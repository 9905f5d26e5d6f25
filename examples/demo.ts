/**
 * The demo: a real pool serving real socket connections under load.
 *
 * Starts the embedded MongoDB endpoint (or uses the server in MONGODB_URI), builds a pool (maxPoolSize 10,
 * minPoolSize 2), and runs many concurrent workers doing checkOut → ping → checkIn. Midway it clears the pool once,
 * then marks it ready again, as a monitor would after its next successful check. Progress goes to stderr; the last
 * line on stdout is a JSON summary.
 *
 *   npm start                          # 5 s, 1000 workers, embedded endpoint
 *   npm start -- --duration 1 --workers 200
 *   MONGODB_URI=mongodb://host:27017 npm start
 */
import { parseArgs } from 'node:util';
import {
  ConnectionPool,
  EmbeddedServer,
  PoolClearedError,
  parseConnectionString,
  type ConnectionPoolEvent,
} from '../lib';

const { values } = parseArgs({
  options: {
    duration: { type: 'string', default: '5' },
    workers: { type: 'string', default: '1000' },
  },
});
const durationMS = Math.round(Number(values.duration) * 1000);
const workers = Number(values.workers);
if (!(durationMS > 0) || !Number.isInteger(workers) || workers < 1) {
  console.error('usage: demo [--duration <seconds, > 0>] [--workers <integer >= 1>]');
  process.exit(2);
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

const round = (ms: number): number => Math.round(ms * 1000) / 1000;

async function main(): Promise<void> {
  const uri = process.env.MONGODB_URI;
  const server = uri ? undefined : await new EmbeddedServer().start();
  const address = uri ? parseConnectionString(uri).hosts[0] : server!.address;

  const pool = new ConnectionPool({
    address,
    maxPoolSize: 10,
    minPoolSize: 2,
    connectionOptions: { appName: 'rxcmap-demo' },
  });

  const waits: number[] = [];
  const failed: Record<string, number> = {};
  let created = 0;
  let closed = 0;
  const events = pool.events$.subscribe((e: ConnectionPoolEvent) => {
    switch (e.type) {
      case 'ConnectionCheckedOut':
        waits.push(e.duration);
        break;
      case 'ConnectionCheckOutFailed':
        failed[e.reason] = (failed[e.reason] ?? 0) + 1;
        break;
      case 'ConnectionCreated':
        created++;
        break;
      case 'ConnectionClosed':
        closed++;
        break;
    }
  });

  pool.ready();
  const started = performance.now();
  const deadline = started + durationMS;
  let pings = 0;
  let otherErrors = 0;

  const worker = async (): Promise<void> => {
    while (performance.now() < deadline) {
      try {
        await pool.withConnection((c) => c.command('admin', { ping: 1 }));
        pings++;
      } catch (error) {
        if (!(error instanceof PoolClearedError)) otherErrors++;
        // Paused pool: back off briefly, as a driver would before retrying.
        await new Promise((r) => setTimeout(r, 5));
      }
    }
  };

  // Midway: clear once, then mark ready again 50 ms later.
  const clearTimer = setTimeout(() => {
    pool.clear({ cause: new Error('demo: simulated server monitor failure') });
    setTimeout(() => pool.ready(), 50);
  }, durationMS / 2);

  const tty = process.stderr.isTTY === true;
  const progress = setInterval(() => {
    const s = pool.snapshot();
    const elapsed = (performance.now() - started) / 1000;
    const line =
      `${elapsed.toFixed(1)}s  checkouts ${waits.length}  (${Math.round(waits.length / elapsed)}/s)  ` +
      `pool ${s.status} gen ${s.generation}: ${s.inUseConnectionCount} in use, ${s.availableConnectionCount} available, ` +
      `${s.pendingConnectionCount} pending, ${s.waitQueueLength} waiting`;
    process.stderr.write(tty ? `\r${line.padEnd(120)}` : `${line}\n`);
  }, tty ? 100 : 1000);

  await Promise.all(Array.from({ length: workers }, worker));
  clearInterval(progress);
  clearTimeout(clearTimer);
  if (tty) process.stderr.write('\n');

  pool.close();
  events.unsubscribe();
  await server?.stop();

  const sorted = waits.slice().sort((a, b) => a - b);
  const summary = {
    endpoint: uri ? parseConnectionString(uri).redacted : `embedded ${address}`,
    durationMS,
    workers,
    checkouts: waits.length,
    pings,
    failedCheckouts: failed,
    otherErrors,
    connectionsCreated: created,
    connectionsClosed: closed,
    checkoutWaitMS: { p50: round(percentile(sorted, 50)), p99: round(percentile(sorted, 99)) },
  };
  process.stdout.write(`${JSON.stringify(summary)}\n`);
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
