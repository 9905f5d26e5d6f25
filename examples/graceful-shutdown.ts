/**
 * Graceful shutdown of a service built on `connect()`: on SIGTERM (or SIGINT) it stops starting new work, lets the
 * operations in flight finish (for at most a shutdown timeout), then closes the client and exits by itself, with
 * nothing left running: no `process.exit()`, the event loop simply drains.
 *
 * The service: a few workers, each running commands in a loop against the embedded MongoDB endpoint (which stands in
 * for mongod here; its `failCommand` fail point makes every `find` take `--work-ms`, like a real query). It prints
 * `ready` on stdout once it is serving; on the signal it prints a one-line JSON summary: how many operations were in
 * flight at the signal, how many of them completed after it, and how many were aborted (failed, or still running
 * when the shutdown timeout expired: those are interrupted with `pool.clear({ interruptInUseConnections: true })`).
 * Exit code 0 when nothing was aborted, else 1. A second signal during the shutdown ends the process at once (the
 * handlers are removed when the first arrives).
 *
 * Imports come from the repository's source: `../lib` stands for `rxcmap`, `../lib/testing` for `rxcmap/testing`.
 *
 *   npx ts-node --transpile-only examples/graceful-shutdown.ts      # then press Ctrl-C, or `kill <pid>`
 *   npx ts-node --transpile-only examples/graceful-shutdown.ts --workers 20 --work-ms 200 --shutdown-timeout-ms 5000
 */
import { parseArgs } from 'node:util';
import { lastValueFrom } from 'rxjs';
import { connect } from '../lib';
import { EmbeddedServer } from '../lib/testing';

const { values } = parseArgs({
  options: {
    workers: { type: 'string', default: '8' },
    'work-ms': { type: 'string', default: '100' },
    'shutdown-timeout-ms': { type: 'string', default: '5000' },
  },
});
const workers = Number(values.workers);
const workMS = Number(values['work-ms']);
const shutdownTimeoutMS = Number(values['shutdown-timeout-ms']);
if (!Number.isInteger(workers) || workers < 1 || !(workMS >= 0) || !(shutdownTimeoutMS >= 0)) {
  console.error('usage: graceful-shutdown [--workers <n >= 1>] [--work-ms <ms>] [--shutdown-timeout-ms <ms>]');
  process.exit(2);
}

/** Resolves after `ms`, or as soon as `done` settles; never leaves a timer behind. */
function within(ms: number, done: Promise<unknown>): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)));
  return Promise.race([done.then(() => undefined), expired]).finally(() => clearTimeout(timer));
}

async function main(): Promise<void> {
  const server = await new EmbeddedServer().start();
  server.failCommand.configure({
    configureFailPoint: 'failCommand',
    mode: 'alwaysOn',
    data: { failCommands: ['find'], blockConnection: true, blockTimeMS: workMS },
  });
  const client = connect(server.uri, { maxPoolSize: 10, heartbeatFrequencyMS: 500, appName: 'orders-service' });

  // The service's state: whether it accepts new work, and the operations in flight.
  let accepting = true;
  const inFlight = new Set<Promise<unknown>>();
  const stats = { completed: 0, failed: 0, startedAfterSignal: 0 };

  /** One unit of work: a query on a pooled connection (checked out, run, checked in by `client.command`). */
  function operation(worker: number): Promise<unknown> {
    if (!accepting) stats.startedAfterSignal++;
    const op = client.command('shop', { find: 'orders', filter: { worker } }).then(
      () => void stats.completed++,
      (error: unknown) => {
        stats.failed++;
        console.error(`worker ${worker}: ${String(error)}`);
      },
    );
    inFlight.add(op);
    void op.finally(() => inFlight.delete(op));
    return op;
  }

  async function worker(id: number): Promise<void> {
    while (accepting) await operation(id);
  }

  // Shutdown on the first SIGTERM or SIGINT, listened for before the service says it is ready; the handlers go at
  // once, so a second signal has its default effect.
  const signalled = new Promise<NodeJS.Signals>((resolve) => {
    const onSignal = (received: NodeJS.Signals): void => {
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
      resolve(received);
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  });

  await client.selectPool(); // the monitor's first check readied the pool
  const running = Array.from({ length: workers }, (_, i) => worker(i));
  console.log('ready');

  const signal = await signalled;
  const signalAt = performance.now();
  accepting = false; // 1. no new work
  const pending = [...inFlight];
  const completedBefore = stats.completed;
  const failedBefore = stats.failed;
  console.error(`${signal}: waiting for ${pending.length} operations in flight (at most ${shutdownTimeoutMS} ms)`);

  await within(shutdownTimeoutMS, Promise.all(pending)); // 2. let the work in flight finish, bounded
  const completedAfterSignal = stats.completed - completedBefore;
  const failedAfterSignal = stats.failed - failedBefore;
  const unfinished = inFlight.size;

  if (unfinished > 0) {
    // 3. Past the deadline: interrupt what is still running (its connections are destroyed, its operations fail).
    const cause = new Error(`shutdown timeout of ${shutdownTimeoutMS} ms expired`);
    for (const pool of client.pools.values()) pool.clear({ interruptInUseConnections: true, cause });
  }
  await client.close(); // 4. close monitors and pools (a command still in flight would fail with ClientClosedError)
  // Closed for good: a pool's state$ completes once the pool is closed and its last connection closed.
  await Promise.all([...client.pools.values()].map((pool) => lastValueFrom(pool.state$)));
  await Promise.all(running);
  await server.stop();

  const summary = {
    signal,
    workers,
    completedBeforeSignal: completedBefore,
    inFlightAtSignal: pending.length,
    completedAfterSignal,
    aborted: unfinished + failedAfterSignal,
    startedAfterSignal: stats.startedAfterSignal,
    shutdownMS: Math.round(performance.now() - signalAt),
  };
  console.log(JSON.stringify(summary));
  if (summary.aborted > 0 || stats.failed > 0) process.exitCode = 1;
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
