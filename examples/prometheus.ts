/**
 * The pool's OpenTelemetry metrics, scraped by Prometheus: `rxcmap/opentelemetry` records the database client
 * connection pool metrics of a pool on a MeterProvider whose reader is the OpenTelemetry Prometheus exporter, served
 * at `http://127.0.0.1:<port>/metrics` in the Prometheus text format while workers keep the pool busy.
 *
 * Starts the embedded MongoDB endpoint (unless MONGODB_URI names a server), connects through `connect()` (a pool per
 * host, maxPoolSize 5, minPoolSize 1, a monitor that readies the pool), instruments every pool of the client with
 * `instrumentConnectionPools(client, { meter, poolNamePrefix })` (those of a `mongodb+srv://` MONGODB_URI too, found
 * after `connect()` returns, and those SRV polling adds) and the client's commands with `instrumentCommands(client, {
 * meter })` (`db.client.operation.duration`), prints the metrics URL as one line on stdout, then runs
 * `--workers` concurrent workers for `--seconds`: each checks a connection out, pings, holds it 1 to 10 ms (the
 * work of a request), and checks it in. More workers than connections, so checkouts wait and every metric moves.
 * Then it shuts down in order (the workers finish, the pools close, recording stops, the HTTP server closes, the
 * MeterProvider and its exporter shut down, the endpoint stops), prints a one-line JSON summary, and exits by itself.
 * Ctrl-C (SIGINT) ends the run early with the same clean shutdown.
 *
 * The exporter's own server cannot listen on port 0 (it takes 0 as "unset" and uses 9464), so the exporter is built
 * with `preventServerStart` and its `getMetricsRequestHandler` is served by a `node:http` server listening on the
 * port asked for, 0 meaning any free port.
 *
 * Exit codes: 0 after a run; 1 when the server cannot be reached within serverSelectionTimeoutMS (or the metrics port
 * cannot be listened on); 2 for a bad argument or MONGODB_URI.
 *
 * Imports come from the repository's source: `../lib` stands for `rxcmap`, `../lib/testing` for `rxcmap/testing`,
 * `../lib/opentelemetry` for `rxcmap/opentelemetry`.
 *
 *   npx ts-node --transpile-only examples/prometheus.ts                 # 10 s, any free port; prints the URL
 *   npx ts-node --transpile-only examples/prometheus.ts --port 9464 --seconds 60
 *   curl -s http://127.0.0.1:9464/metrics | grep db_client_connection
 *
 * Summary: `seconds` run, `checkouts` that served a ping, `failedCheckouts` by error name, and `scrapes` of
 * `/metrics` served.
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { ClientClosedError, connect, InvalidOptionError } from '../lib';
import { instrumentCommands, instrumentConnectionPools } from '../lib/opentelemetry';
import { EmbeddedServer } from '../lib/testing';
import { hidePassword } from './demo-args';
import { unreachable } from './unreachable';

/** The one-line usage, printed on stderr after a bad argument. */
const USAGE = 'usage: prometheus [--port <0-65535>] [--seconds <s>] [--workers <n>] [--pool-name <name>] [--help]';

const HELP = `Serves the OpenTelemetry connection pool metrics of an rxcmap pool to Prometheus at
http://127.0.0.1:<port>/metrics (the URL is printed as the first line) while workers keep the pool busy, then shuts
down cleanly and prints a one-line JSON summary. The server is $MONGODB_URI, else an embedded endpoint.

${USAGE}

  --port <n>          the metrics port on 127.0.0.1, an integer 0-65535; 0 picks a free port (default 0)
  --seconds <s>       how long the workers run, a number of seconds > 0 (default 10)
  --workers <n>       how many workers run at once, an integer >= 1 (default 20; the pool has 5 connections)
  --pool-name <name>  what each pool's db.client.connection.pool.name label starts with (<name>/<host:port>),
                      a non-empty string (default "example")
  -h, --help          print this help and exit
`;

/** The settings of a run. */
interface Settings {
  /** The metrics port; 0: any free port. */
  readonly port: number;
  /** How long the workers run, ms. */
  readonly durationMS: number;
  readonly workers: number;
  readonly poolName: string;
}

/** Parses the arguments with `node:util` parseArgs; returns the settings, 'help', or the reason they are wrong. */
function parseSettings(argv: string[]): Settings | 'help' | { error: string } {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        port: { type: 'string', default: '0' },
        seconds: { type: 'string', default: '10' },
        workers: { type: 'string', default: '20' },
        'pool-name': { type: 'string', default: 'example' },
        help: { type: 'boolean', short: 'h', default: false },
      },
    }));
  } catch (error) {
    // ERR_PARSE_ARGS_UNKNOWN_OPTION, ERR_PARSE_ARGS_INVALID_OPTION_VALUE, ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL
    return { error: (error as Error).message.split('\n')[0] };
  }
  if (values.help === true) return 'help';
  const text = (name: string): string => values[name] as string;
  const port = Number(text('port'));
  if (!/^\d+$/.test(text('port').trim()) || port > 65535) {
    return { error: `--port must be an integer from 0 to 65535 (0: any free port), got ${JSON.stringify(text('port'))}` };
  }
  const seconds = Number(text('seconds'));
  const durationMS = Math.round(seconds * 1000);
  if (text('seconds').trim() === '' || !Number.isFinite(seconds) || !(durationMS >= 1)) {
    return { error: `--seconds must be a number of seconds > 0 (at least 0.001), got ${JSON.stringify(text('seconds'))}` };
  }
  const workers = Number(text('workers'));
  if (!/^\d+$/.test(text('workers').trim()) || workers < 1) {
    return { error: `--workers must be an integer >= 1, got ${JSON.stringify(text('workers'))}` };
  }
  if (text('pool-name').trim() === '') return { error: '--pool-name must be a non-empty string' };
  return { port, durationMS, workers, poolName: text('pool-name') };
}

/** Reports a bad argument: the reason, then the usage line, on stderr. Returns the exit code, 2. */
function usageError(reason: string): number {
  process.stderr.write(`prometheus: ${reason}\n${USAGE}\n`);
  return 2;
}

async function main(): Promise<number> {
  const settings = parseSettings(process.argv.slice(2));
  if (settings === 'help') {
    process.stdout.write(HELP);
    return 0;
  }
  if ('error' in settings) return usageError(settings.error);

  const uri = process.env.MONGODB_URI || undefined;
  const endpoint = uri === undefined ? await new EmbeddedServer().start() : undefined;
  let client: ReturnType<typeof connect>;
  try {
    client = connect(uri ?? endpoint!.uri, { maxPoolSize: 5, minPoolSize: 1, heartbeatFrequencyMS: 500, appName: 'rxcmap-prometheus' });
  } catch (error) {
    await endpoint?.stop();
    if (!(error instanceof InvalidOptionError) || uri === undefined) throw error;
    return usageError(`invalid MONGODB_URI: ${hidePassword(error.message, uri)}`);
  }
  try {
    return await run(client, settings);
  } finally {
    await client.close();
    await endpoint?.stop();
  }
}

/** Serves the metrics of every pool of `client` while the workers run, then shuts the metrics down and summarizes. */
async function run(client: ReturnType<typeof connect>, settings: Settings): Promise<number> {
  for (const warning of client.warnings) console.error(`warning: ${warning}`);

  // The reader: the Prometheus exporter, pulled by each scrape (cumulative temporality, as Prometheus expects).
  const exporter = new PrometheusExporter({ preventServerStart: true });
  const meterProvider = new MeterProvider({ readers: [exporter] });
  const meter = meterProvider.getMeter('rxcmap-prometheus-example');
  // Every pool of the client, named <pool-name>/<host:port> (unique within the application): those it has now, and
  // those it opens later (a mongodb+srv:// URI's hosts, found after connect() returned; SRV polling's).
  const pools = instrumentConnectionPools(client, { meter, poolNamePrefix: settings.poolName });
  // Every command's duration (db.client.operation.duration), by command, database and server.
  const commands = instrumentCommands(client, { meter });

  let scrapes = 0;
  const metricsServer = http.createServer((request, response) => {
    if (request.method === 'GET' && new URL(request.url ?? '/', 'http://localhost').pathname === '/metrics') {
      scrapes++;
      exporter.getMetricsRequestHandler(request, response);
    } else {
      response.writeHead(404, { 'content-type': 'text/plain' }).end('not found: the metrics are at /metrics\n');
    }
  });
  const closeMetrics = async (): Promise<void> => {
    if (metricsServer.listening) {
      const closed = new Promise<void>((resolve) => metricsServer.close(() => resolve()));
      metricsServer.closeAllConnections(); // keep-alive scrapers would hold close() open
      await closed;
    }
    pools.unsubscribe();
    commands.unsubscribe();
    await meterProvider.shutdown(); // shuts the exporter down (its own server was never started)
  };

  try {
    await new Promise<void>((resolve, reject) => {
      metricsServer.once('error', reject).listen(settings.port, '127.0.0.1', () => resolve());
    });
  } catch (error) {
    await closeMetrics();
    process.stderr.write(`cannot serve the metrics on 127.0.0.1:${settings.port}: ${(error as Error).message}\n`);
    return 1;
  }
  const { port } = metricsServer.address() as AddressInfo;
  process.stdout.write(`http://127.0.0.1:${port}/metrics\n`);

  // Wait for the server once (up to serverSelectionTimeoutMS), so an unreachable one is reported with its cause.
  try {
    await client.command('admin', { ping: 1 });
  } catch (error) {
    await closeMetrics();
    process.stderr.write(`${unreachable(error, client.hosts.join(', '))}\n`);
    return 1;
  }

  // The load, until --seconds have passed or SIGINT.
  const stop = new AbortController();
  const deadline = setTimeout(() => stop.abort(), settings.durationMS);
  const interrupted = (): void => stop.abort();
  process.once('SIGINT', interrupted);
  const started = performance.now();
  let checkouts = 0;
  const failed: Record<string, number> = {};
  const worker = async (): Promise<void> => {
    while (!stop.signal.aborted) {
      try {
        const pool = await client.selectPool();
        await pool.withConnection(async (connection) => {
          await connection.command('admin', { ping: 1 });
          await sleep(1 + Math.random() * 9); // the request's work, holding the connection
        });
        checkouts++;
      } catch (error) {
        if (error instanceof ClientClosedError) return;
        const name = error instanceof Error ? error.name : 'Error';
        failed[name] = (failed[name] ?? 0) + 1;
        await sleep(10); // e.g. a cleared pool: give its monitor time to ready it again
      }
    }
  };
  await Promise.all(Array.from({ length: settings.workers }, worker));
  clearTimeout(deadline);
  process.off('SIGINT', interrupted);
  const seconds = Math.round(performance.now() - started) / 1000;

  await client.close();
  await closeMetrics();
  process.stdout.write(`${JSON.stringify({ seconds, checkouts, failedCheckouts: failed, scrapes })}\n`);
  return 0;
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
