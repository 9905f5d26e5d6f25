/**
 * The demo: a real pool serving real socket connections under load, driven by its monitor.
 *
 * Starts the embedded MongoDB endpoint (unless a URI is given with --uri or MONGODB_URI), connects through
 * `connect()` (a pool and a monitor per host; maxPoolSize 10, minPoolSize 2, a heartbeat every 500 ms), waits for the
 * server with one ping, and runs many concurrent workers doing checkOut → ping → checkIn. Midway it clears the pool
 * once, as a driver does after a network error: the checkouts waiting then fail with PoolClearedError and are retried,
 * and the monitor's next successful check marks the pool ready again. When stdout is a terminal, it shows a live view
 * of the pool there (examples/live-view.ts), redrawn in place 4 times a second, the cursor hidden until the run ends
 * or is interrupted (Ctrl-C: exit code 130, no summary). Otherwise progress goes to stderr (on a terminal, one line
 * rewritten in place within the terminal's width; otherwise a line a second). The last line on stdout is a JSON
 * summary.
 *
 * Exit codes: 0 after a run; 1 when the server cannot be reached (or answers the first ping with an error) within
 * serverSelectionTimeoutMS; 2 for a bad argument or URI.
 *
 *   npm start                          # 5 s, 1000 workers, embedded endpoint
 *   npm start -- --duration 1 --workers 200
 *   npm start -- --uri 'mongodb://user:pass@host:27017/?authSource=admin'
 *   npm start -- --help
 *
 * Summary: `checkouts` and `pings` (equal when every checkout ran its ping), `failedCheckouts` by reason (not
 * counting those the deliberate clear evicted), `otherErrors` (worker errors other than PoolClearedError),
 * `connectionsCreated` / `connectionsClosed`, `heartbeats`, `checkoutWaitMS` percentiles (from histograms of µs, in
 * memory bounded however many checkouts: see examples/live-stats.ts), and `clear`: when the deliberate clear happened
 * and when the pool was ready again (ms since the workers started), how many checkouts it evicted and how many of
 * those were retried (null when the run ended before the clear).
 */
import { connect, InvalidOptionError, MonitorClosedError, type ConnectionPool, PoolClearedError, type ClientEvent } from '../lib';
import { EmbeddedServer } from '../lib/testing';
import { HELP, hidePassword, parseDemoArgs, USAGE } from './demo-args';
import { unreachable } from './unreachable';
import { progressFrame, progressLine, progressWidth } from './demo-progress';
import { LiveStats, type RunDescription } from './live-stats';
import { enterScreen, frame, leaveScreen, SHOW_CURSOR } from './live-screen';
import { renderLiveView } from './live-view';

type Client = ReturnType<typeof connect>;

/** The live view's redraw period, ms. */
const VIEW_REFRESH_MS = 250;
/** The live view's height when the terminal does not say, and its most. */
const VIEW_ROWS = 24;

/** Reports a bad argument: the reason, then the usage line, on stderr. Returns the exit code, 2. */
function usageError(reason: string): number {
  process.stderr.write(`demo: ${reason}\n${USAGE}\n`);
  return 2;
}

async function main(): Promise<number> {
  const args = parseDemoArgs(process.argv.slice(2));
  if (args.kind === 'help') {
    process.stdout.write(HELP);
    return 0;
  }
  if (args.kind === 'error') return usageError(args.message);

  const uri = args.uri ?? (process.env.MONGODB_URI || undefined);
  const server = uri === undefined ? await new EmbeddedServer().start() : undefined;
  let client: Client;
  try {
    client = connect(uri ?? server!.uri, { maxPoolSize: 10, minPoolSize: 2, heartbeatFrequencyMS: 500, appName: 'rxcmap-demo' });
  } catch (error) {
    await server?.stop();
    if (!(error instanceof InvalidOptionError) || uri === undefined) throw error;
    return usageError(`invalid ${args.uri === undefined ? 'MONGODB_URI' : '--uri'}: ${hidePassword(error.message, uri)}`);
  }
  try {
    return await run(client, args.durationMS, args.workers, uri === undefined ? `embedded ${client.hosts[0]}` : client.redactedUri);
  } finally {
    await client.close();
    await server?.stop();
  }
}

/** Waits for the server, runs the workers through one clear, closes the client, and prints the summary. */
async function run(client: Client, durationMS: number, workers: number, endpoint: string): Promise<number> {
  for (const warning of client.warnings) console.error(`warning: ${warning}`);
  // The pool the demo clears and shows: that of the server a selection takes. Known once the first ping succeeded: a
  // mongodb+srv:// URI has no host, and so no pool, until its DNS records are in.
  let address: string | undefined;

  const stats = new LiveStats();
  const failed: Record<string, number> = {};
  const heartbeats = { succeeded: 0, failed: 0, lastMS: 0 };
  let created = 0;
  let closed = 0;
  // The deliberate clear: from the clear() call until the pool is ready again, a checkout failing with
  // PoolClearedError was evicted by it (not a failure), and its worker retries.
  let clearing = false;
  let clear: { atMS: number; readyAgainAtMS: number | null; evictedCheckouts: number; retried: number } | null = null;
  const evictions = new WeakSet<object>();
  let startedAt = performance.now();
  const sinceStart = (): number => Math.round(performance.now() - startedAt);

  const events = client.events$.subscribe((e: ClientEvent) => {
    stats.onEvent(e);
    switch (e.type) {
      case 'ConnectionCheckOutFailed':
        if (clearing && clear !== null && e.reason === 'connectionError' && e.error instanceof PoolClearedError) {
          clear.evictedCheckouts++;
          evictions.add(e.error);
        } else {
          failed[e.reason] = (failed[e.reason] ?? 0) + 1;
        }
        break;
      case 'ConnectionCreated':
        created++;
        break;
      case 'ConnectionClosed':
        closed++;
        break;
      case 'ConnectionPoolReady':
        if (e.address === address && clearing && clear !== null) {
          clearing = false;
          clear.readyAgainAtMS = sinceStart();
        }
        break;
      case 'ServerHeartbeatSucceeded':
        heartbeats.succeeded++;
        heartbeats.lastMS = e.duration;
        break;
      case 'ServerHeartbeatFailed':
        // A check the client's close() ended is no failure of the server.
        if (!(e.error instanceof MonitorClosedError)) heartbeats.failed++;
        break;
    }
  });

  let pings = 0;
  let otherErrors = 0;
  // Wait for the server once (up to serverSelectionTimeoutMS), so an unreachable one is reported with its cause.
  try {
    await client.command('admin', { ping: 1 });
    pings++;
  } catch (error) {
    events.unsubscribe();
    process.stderr.write(`${unreachable(error, client.hosts.join(', ') || endpoint)}\n`);
    return 1;
  }
  const pool = await client.selectPool();
  address = pool.address;

  startedAt = performance.now();
  stats.start();
  const deadline = startedAt + durationMS;
  const worker = async (): Promise<void> => {
    while (performance.now() < deadline) {
      try {
        await client.command('admin', { ping: 1 }); // waits for a suitable server, then checkOut → ping → checkIn
        pings++;
      } catch (error) {
        // A checkout evicted by a clear is retryable: the next attempt waits for the monitor to ready the pool.
        if (!(error instanceof PoolClearedError)) otherErrors++;
        else if (clear !== null && evictions.has(error) && performance.now() < deadline) clear.retried++;
      }
    }
  };

  // Midway: clear once, as after a network error; the monitor's next successful check readies the pool again.
  const clearTimer = setTimeout(() => {
    clear = { atMS: sinceStart(), readyAgainAtMS: null, evictedCheckouts: 0, retried: 0 };
    clearing = true;
    pool.clear({ cause: new Error('demo: simulated network error') });
  }, durationMS / 2);

  const view = process.stdout.isTTY === true ? liveView(pool, stats, { endpoint, durationMS, workers }) : undefined;
  const tty = view === undefined && process.stderr.isTTY === true;
  const writeProgress = (): void => {
    const s = pool.snapshot();
    const line = progressLine(
      {
        elapsedMS: performance.now() - startedAt,
        checkouts: stats.checkouts,
        poolState: s.state,
        generation: s.generation,
        inUse: s.inUseConnectionCount,
        available: s.availableConnectionCount,
        pending: s.pendingConnectionCount,
        waiting: s.waitQueueLength,
        heartbeats,
      },
      tty ? progressWidth(process.stderr.columns) : Infinity,
    );
    process.stderr.write(progressFrame(line, tty));
  };
  const progress = view === undefined ? setInterval(writeProgress, tty ? 100 : 1000) : undefined;

  await Promise.all(Array.from({ length: workers }, worker));
  clearInterval(progress);
  clearTimeout(clearTimer);
  if (tty) process.stderr.write('\n');

  await client.close();
  view?.stop();
  events.unsubscribe();

  const summary = {
    endpoint,
    durationMS,
    workers,
    checkouts: stats.checkouts,
    pings,
    failedCheckouts: failed,
    otherErrors,
    connectionsCreated: created,
    connectionsClosed: closed,
    heartbeats: { succeeded: heartbeats.succeeded, failed: heartbeats.failed },
    checkoutWaitMS: stats.waitPercentiles(),
    clear,
  };
  process.stdout.write(`${JSON.stringify(summary)}\n`);
  return 0;
}

/**
 * Shows the live view on stdout (a terminal) until `stop()`: hides the cursor, clears the screen once, then redraws
 * every {@link VIEW_REFRESH_MS} ms from `stats`, fed with the pool's `state$`. `stop()` draws the last frame, leaves
 * the cursor below it and shows it again. Ctrl-C (SIGINT) shows the cursor again and exits with 130; any other exit
 * while the view is up (an uncaught error) shows the cursor again too.
 */
function liveView(pool: ConnectionPool, stats: LiveStats, run: Omit<RunDescription, 'maxPoolSize'>): { stop(): void } {
  const out = process.stdout;
  const draw = (): void => {
    const lines = renderLiveView(
      stats.model({ ...run, maxPoolSize: pool.options.maxPoolSize }),
      progressWidth(out.columns),
      Math.min(VIEW_ROWS, out.rows > 0 ? out.rows : VIEW_ROWS),
    );
    out.write(frame(lines));
  };
  const restore = (): void => void out.write(SHOW_CURSOR);
  const interrupted = (): void => {
    out.write(leaveScreen());
    process.exit(130);
  };
  const snapshots = pool.state$.subscribe((s) => stats.onSnapshot(s));
  out.write(enterScreen());
  process.on('exit', restore);
  process.once('SIGINT', interrupted);
  draw();
  const timer = setInterval(draw, VIEW_REFRESH_MS);
  return {
    stop() {
      clearInterval(timer);
      snapshots.unsubscribe();
      draw();
      out.write(leaveScreen());
      process.off('exit', restore);
      process.off('SIGINT', interrupted);
    },
  };
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error) => {
    console.error(error);
    process.exitCode = 1;
  },
);
