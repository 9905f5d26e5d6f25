/**
 * The demo: a real pool serving real socket connections under load, driven by its monitor.
 *
 * Starts the embedded MongoDB endpoint (unless a URI is given with --uri or MONGODB_URI), connects through
 * `connect()` (a pool and a monitor per host; maxPoolSize 10, minPoolSize 2, a heartbeat every 500 ms), and runs many
 * concurrent workers doing checkOut → ping → checkIn. Midway it clears the pool once, as a driver does after a
 * network error; the monitor's next successful check marks it ready again. Progress goes to stderr; the last line on
 * stdout is a JSON summary.
 *
 *   npm start                          # 5 s, 1000 workers, embedded endpoint
 *   npm start -- --duration 1 --workers 200
 *   npm start -- --uri 'mongodb://user:pass@host:27017/?authSource=admin'
 */
import { parseArgs } from 'node:util';
import { connect, PoolClearedError, type ClientEvent } from '../lib';
import { EmbeddedServer } from '../lib/testing';

const { values } = parseArgs({
  options: {
    duration: { type: 'string', default: '5' },
    workers: { type: 'string', default: '1000' },
    uri: { type: 'string' },
  },
});
const durationMS = Math.round(Number(values.duration) * 1000);
const workers = Number(values.workers);
if (!(durationMS > 0) || !Number.isInteger(workers) || workers < 1) {
  console.error('usage: demo [--duration <seconds, > 0>] [--workers <integer >= 1>] [--uri <mongodb:// connection string>]');
  process.exit(2);
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

const round = (ms: number): number => Math.round(ms * 1000) / 1000;

async function main(): Promise<void> {
  const uri = values.uri ?? process.env.MONGODB_URI;
  const server = uri ? undefined : await new EmbeddedServer().start();
  const client = connect(uri ?? server!.uri, {
    maxPoolSize: 10,
    minPoolSize: 2,
    heartbeatFrequencyMS: 500,
    appName: 'rxcmap-demo',
  });
  for (const warning of client.warnings) console.error(`warning: ${warning}`);
  const address = client.hosts[0];
  const pool = client.pools.get(address)!;

  const waits: number[] = [];
  const failed: Record<string, number> = {};
  const heartbeats = { succeeded: 0, failed: 0, lastMS: 0 };
  let created = 0;
  let closed = 0;
  const events = client.events$.subscribe((e: ClientEvent) => {
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
      case 'ServerHeartbeatSucceeded':
        heartbeats.succeeded++;
        heartbeats.lastMS = e.duration;
        break;
      case 'ServerHeartbeatFailed':
        heartbeats.failed++;
        break;
    }
  });

  const started = performance.now();
  const deadline = started + durationMS;
  let pings = 0;
  let otherErrors = 0;

  const worker = async (): Promise<void> => {
    while (performance.now() < deadline) {
      try {
        await client.command('admin', { ping: 1 }); // waits for a ready server, then checkOut → ping → checkIn
        pings++;
      } catch (error) {
        // A checkout evicted by the clear is retryable: the next attempt waits for the monitor to ready the pool.
        if (!(error instanceof PoolClearedError)) otherErrors++;
      }
    }
  };

  // Midway: clear once, as after a network error; the monitor's next successful check readies the pool again.
  const clearTimer = setTimeout(() => pool.clear({ cause: new Error('demo: simulated network error') }), durationMS / 2);

  const tty = process.stderr.isTTY === true;
  const progress = setInterval(() => {
    const s = pool.snapshot();
    const elapsed = (performance.now() - started) / 1000;
    const line =
      `${elapsed.toFixed(1)}s  checkouts ${waits.length}  (${Math.round(waits.length / elapsed)}/s)  ` +
      `pool ${s.status} gen ${s.generation}: ${s.inUseConnectionCount} in use, ${s.availableConnectionCount} available, ` +
      `${s.pendingConnectionCount} pending, ${s.waitQueueLength} waiting  ` +
      `heartbeats ${heartbeats.succeeded} ok / ${heartbeats.failed} failed (last ${heartbeats.lastMS.toFixed(1)} ms)`;
    process.stderr.write(tty ? `\r${line.padEnd(120)}` : `${line}\n`);
  }, tty ? 100 : 1000);

  await Promise.all(Array.from({ length: workers }, worker));
  clearInterval(progress);
  clearTimeout(clearTimer);
  if (tty) process.stderr.write('\n');

  await client.close();
  events.unsubscribe();
  await server?.stop();

  const sorted = waits.slice().sort((a, b) => a - b);
  const summary = {
    endpoint: uri ? client.redactedUri : `embedded ${address}`,
    durationMS,
    workers,
    checkouts: waits.length,
    pings,
    failedCheckouts: failed,
    otherErrors,
    connectionsCreated: created,
    connectionsClosed: closed,
    heartbeats: { succeeded: heartbeats.succeeded, failed: heartbeats.failed },
    checkoutWaitMS: { p50: round(percentile(sorted, 50)), p99: round(percentile(sorted, 99)) },
  };
  process.stdout.write(`${JSON.stringify(summary)}\n`);
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
