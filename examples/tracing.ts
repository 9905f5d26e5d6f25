/**
 * The pool's checkouts as OpenTelemetry spans: a subscriber of the `rxcmap:pool:checkOut` TracingChannel turns each
 * checkout into a span `checkOut` (from the moment it enters the pool to its outcome), one of
 * `rxcmap:connection:establish` turns each connection establishment into a span `establish`, and each message on
 * `rxcmap:pool:checkIn` becomes an event `checkIn` on the active span. The pool itself knows nothing of
 * OpenTelemetry: it publishes on `node:diagnostics_channel`, and this file is the bridge for checkouts; the commands'
 * spans come from `traceCommands` (`rxcmap/opentelemetry`), which reads the command events.
 *
 * Starts the embedded MongoDB endpoint (unless MONGODB_URI names a server), connects through `connect()` (a pool per
 * host, maxPoolSize 5, minPoolSize 0: every connection is established for a checkout), and runs `--operations`
 * operations, `--concurrency` at a time. Each is a span `operation` (the application's unit of work) holding: the
 * `checkOut` span, then the span `ping` (kind CLIENT) that `traceCommands` makes for
 * `connection.command('admin', { ping: 1 })`, then the check-in. With `--closed-pool`, one more operation runs after
 * the pool closed: its checkout fails with PoolClosedError, and its spans have status ERROR.
 *
 * The parent of an `establish` span: the checkout's span is bound (`bindStore`) to the synchronous part of its trace
 * (`start` to `end`), where the pool processes the checkout and starts the establishment it needs, so that
 * establishment is a child of the `checkOut` span (without the bound store, of the `operation` span, the active one
 * there). An establishment the pool starts later, when a connecting slot frees up (more checkouts waiting than
 * maxConnecting, 2: try `--concurrency 3`), starts in the continuation of the establishment that just finished and
 * inherits its async context: its parent is that earlier checkout, ended by then. No checkout owns an establishment
 * anyway: connections serve the WaitQueue in order, and the checkout that started one may get another connection.
 *
 * Then it shuts down (the client closes, the TracerProvider flushes and shuts down, the endpoint stops), prints every
 * finished span as an indented tree, one line per span (events marked `event`), ordered by start time:
 *
 *   +<start, ms from the first span> <duration, ms>  <span> <details>
 *
 * and a one-line JSON summary, and exits by itself.
 *
 * Timestamps: the SDK stamps a span's start with `Date.now()` (whole milliseconds) unless given one, which cannot
 * order spans a few microseconds apart; every span and event here is stamped from one clock,
 * `performance.timeOrigin + performance.now()` (epoch ms with a sub-microsecond fraction).
 *
 * Exit codes: 0 after a run (whatever the operations' outcomes, which the spans and the summary show); 1 when the
 * server cannot be reached within serverSelectionTimeoutMS; 2 for a bad argument or MONGODB_URI.
 *
 * Imports come from the repository's source: `../lib` stands for `rxcmap`, `../lib/testing` for `rxcmap/testing`,
 * `../lib/opentelemetry` for `rxcmap/opentelemetry`.
 *
 *   npx ts-node --transpile-only examples/tracing.ts                        # 4 operations, 2 at a time
 *   npx ts-node --transpile-only examples/tracing.ts --operations 6 --concurrency 3 --closed-pool
 *   MONGODB_URI=mongodb://localhost:27017 npx ts-node --transpile-only examples/tracing.ts
 *
 * Summary: `operations` run and `failedOperations`; `spans` by name; `errorSpans` (status ERROR) by name;
 * `connectionsCreated` (ConnectionCreated events) and `establishParents`, how many `establish` spans had each parent
 * (`checkOut`, `operation`, or `none`).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import * as diagnosticsChannel from 'node:diagnostics_channel';
import { parseArgs } from 'node:util';
import {
  context,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type HrTime,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type ReadableSpan,
} from '@opentelemetry/sdk-trace-base';
import {
  connect,
  DIAGNOSTICS_CHANNELS,
  InvalidOptionError,
  type CheckInMessage,
  type CheckOutTraceContext,
  type EstablishTraceContext,
  type ServerAttributes,
} from '../lib';
import {
  ATTR_DB_CLIENT_CONNECTION_POOL_NAME,
  ATTR_DB_MONGODB_DRIVER_CONNECTION_ID,
  ATTR_ERROR_TYPE,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT,
  traceCommands,
} from '../lib/opentelemetry';
import { EmbeddedServer } from '../lib/testing';
import { hidePassword } from './demo-args';
import { unreachable } from './unreachable';

/** The one-line usage, printed on stderr after a bad argument. */
const USAGE = 'usage: tracing [--operations <n>] [--concurrency <n>] [--closed-pool] [--help]';

const HELP = `Traces the checkouts of an rxcmap pool with OpenTelemetry: runs operations that each check a connection
out, ping, and check it in, then prints the finished spans as a tree (one line per span, with durations) and a
one-line JSON summary. The server is $MONGODB_URI, else an embedded endpoint.

${USAGE}

  --operations <n>   how many operations run, an integer >= 1 (default 4)
  --concurrency <n>  how many operations run at once, an integer >= 1 (default 2; the pool has 5 connections)
  --closed-pool      then close the pool and run one more operation, whose checkout fails (status ERROR)
  -h, --help         print this help and exit
`;

/**
 * This example's own attributes: how a checkout or an establishment ended (the channels' `outcome`), the pool
 * generation a connection is established for, the operation's number.
 */
const ATTR_CHECK_OUT_OUTCOME = 'rxcmap.check_out.outcome';
const ATTR_ESTABLISH_OUTCOME = 'rxcmap.establish.outcome';
const ATTR_CONNECTION_GENERATION = 'rxcmap.connection.generation';
const ATTR_OPERATION = 'rxcmap.example.operation';

/** The settings of a run. */
interface Settings {
  readonly operations: number;
  readonly concurrency: number;
  readonly closedPool: boolean;
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
        operations: { type: 'string', default: '4' },
        concurrency: { type: 'string', default: '2' },
        'closed-pool': { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
    }));
  } catch (error) {
    // ERR_PARSE_ARGS_UNKNOWN_OPTION, ERR_PARSE_ARGS_INVALID_OPTION_VALUE, ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL
    return { error: (error as Error).message.split('\n')[0] };
  }
  if (values.help === true) return 'help';
  const count = (name: string): number | { error: string } => {
    const text = values[name] as string;
    const n = Number(text);
    return /^\d+$/.test(text.trim()) && n >= 1 && Number.isSafeInteger(n)
      ? n
      : { error: `--${name} must be an integer >= 1, got ${JSON.stringify(text)}` };
  };
  const operations = count('operations');
  if (typeof operations !== 'number') return operations;
  const concurrency = count('concurrency');
  if (typeof concurrency !== 'number') return concurrency;
  return { operations, concurrency, closedPool: values['closed-pool'] === true };
}

/** Reports a bad argument: the reason, then the usage line, on stderr. Returns the exit code, 2. */
function usageError(reason: string): number {
  process.stderr.write(`tracing: ${reason}\n${USAGE}\n`);
  return 2;
}

/** Now, in epoch ms with a sub-microsecond fraction: the one clock every span and event is stamped with. */
function now(): number {
  return performance.timeOrigin + performance.now();
}

/** `server.address`, `server.port`, `db.client.connection.pool.name` (the pool's `host:port`) of a channel message. */
function serverAttributes(server: ServerAttributes): Attributes {
  return {
    [ATTR_SERVER_ADDRESS]: server.serverAddress,
    ...(server.serverPort === undefined ? {} : { [ATTR_SERVER_PORT]: server.serverPort }),
    [ATTR_DB_CLIENT_CONNECTION_POOL_NAME]: server.address,
  };
}

/**
 * Marks a span failed: status ERROR with the error's message, the error recorded as an exception event at `time`.
 * Recording reads the error's stack, which can take milliseconds the first time (source maps), so callers take the
 * time first.
 */
function fail(span: Span, error: unknown, time: number): void {
  const e = error instanceof Error ? error : new Error(String(error));
  span.setAttribute(ATTR_ERROR_TYPE, e.name);
  span.recordException(e, time);
  span.setStatus({ code: SpanStatusCode.ERROR, message: e.message });
}

/**
 * Subscribes to the pool's channels and makes spans of what they publish, with `tracer`:
 *
 * - `rxcmap:pool:checkOut` (TracingChannel): a span `checkOut` (INTERNAL) per checkout, a child of the span active
 *   where the checkout started; ended on `asyncEnd` with the outcome and the connection's id, status ERROR on `error`.
 * - `rxcmap:connection:establish` (TracingChannel): a span `establish` (CLIENT: socket, handshake, authentication)
 *   per establishment; ended on `asyncEnd` with the outcome, status ERROR on `error`.
 * - `rxcmap:pool:checkIn` (Channel): an event `checkIn` on the span active where the connection was checked in.
 *
 * Returns the function that unsubscribes.
 */
function traceConnectionPools(tracer: Tracer): () => void {
  const checkOuts = diagnosticsChannel.tracingChannel<Context, CheckOutTraceContext>(DIAGNOSTICS_CHANNELS.checkOut);
  const establishments = diagnosticsChannel.tracingChannel<unknown, EstablishTraceContext>(
    DIAGNOSTICS_CHANNELS.establish,
  );
  const checkIns = diagnosticsChannel.channel(DIAGNOSTICS_CHANNELS.checkIn);
  // The span of each trace, keyed by the context object every phase of that trace carries; and when it failed (the
  // `error` phase), its end time.
  const spans = new WeakMap<object, Span>();
  const failedAt = new WeakMap<object, number>();
  const failed = (message: object, span: Span, error: unknown): void => {
    const time = now();
    failedAt.set(message, time);
    fail(span, error, time);
  };

  const checkOutSpan = (message: CheckOutTraceContext): Span => {
    let span = spans.get(message);
    if (span === undefined) {
      const options = { kind: SpanKind.INTERNAL, startTime: now(), attributes: serverAttributes(message) };
      span = tracer.startSpan('checkOut', options, context.active());
      spans.set(message, span);
    }
    return span;
  };
  // The checkout's span, with its parent's context, for the synchronous part of the checkout's trace (between `start`
  // and `end`): `runStores` enters the bound store around the pool's processing of the checkout, where an
  // establishment it needs starts. The SDK's context manager keeps its own AsyncLocalStorage private, so this one is
  // read by the establishment subscriber alone; what runs there (spans of other instrumentations) still has the
  // operation's context. A checkout that starts already failed (aborted signal) publishes `start` without the stores.
  const checkOutContext = new AsyncLocalStorage<Context>();
  checkOuts.start.bindStore(checkOutContext, (message) => trace.setSpan(context.active(), checkOutSpan(message)));
  const checkOutSubscribers: diagnosticsChannel.TracingChannelSubscribers<CheckOutTraceContext> = {
    start: (message) => void checkOutSpan(message),
    end: () => undefined,
    error: (message) => failed(message, checkOutSpan(message), message.error),
    asyncStart: () => undefined,
    asyncEnd: (message) => {
      const span = checkOutSpan(message);
      spans.delete(message);
      span.setAttribute(ATTR_CHECK_OUT_OUTCOME, String(message.outcome));
      if (message.connectionId !== undefined) {
        span.setAttribute(ATTR_DB_MONGODB_DRIVER_CONNECTION_ID, message.connectionId);
      }
      span.end(failedAt.get(message) ?? now());
    },
  };

  const establishSubscribers: diagnosticsChannel.TracingChannelSubscribers<EstablishTraceContext> = {
    start: (message) => {
      const attributes = {
        ...serverAttributes(message),
        [ATTR_DB_MONGODB_DRIVER_CONNECTION_ID]: message.connectionId,
        [ATTR_CONNECTION_GENERATION]: message.generation,
      };
      // The parent: the checkout whose processing started it, when the store says so; else the active span.
      const parent = checkOutContext.getStore() ?? context.active();
      spans.set(
        message,
        tracer.startSpan('establish', { kind: SpanKind.CLIENT, startTime: now(), attributes }, parent),
      );
    },
    end: () => undefined,
    error: (message) => {
      const span = spans.get(message);
      if (span !== undefined) failed(message, span, message.error);
    },
    asyncStart: () => undefined,
    asyncEnd: (message) => {
      const span = spans.get(message);
      if (span === undefined) return; // started before this subscription
      spans.delete(message);
      span.setAttribute(ATTR_ESTABLISH_OUTCOME, String(message.outcome));
      span.end(failedAt.get(message) ?? now());
    },
  };

  const onCheckIn = (message: unknown): void => {
    const { connectionId } = message as CheckInMessage;
    trace.getActiveSpan()?.addEvent('checkIn', { [ATTR_DB_MONGODB_DRIVER_CONNECTION_ID]: connectionId }, now());
  };

  checkOuts.subscribe(checkOutSubscribers);
  establishments.subscribe(establishSubscribers);
  checkIns.subscribe(onCheckIn);
  return () => {
    checkIns.unsubscribe(onCheckIn);
    establishments.unsubscribe(establishSubscribers);
    checkOuts.unsubscribe(checkOutSubscribers);
    checkOuts.start.unbindStore(checkOutContext);
  };
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
    client = connect(uri ?? endpoint!.uri, {
      maxPoolSize: 5,
      minPoolSize: 0,
      heartbeatFrequencyMS: 500,
      appName: 'rxcmap-tracing',
    });
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

/** Traces the operations on `client`, then prints the span tree and the summary. */
async function run(client: ReturnType<typeof connect>, settings: Settings): Promise<number> {
  for (const warning of client.warnings) console.error(`warning: ${warning}`);

  // The SDK: spans kept in memory (SimpleSpanProcessor: exported as each ends), contexts in an AsyncLocalStorage.
  const contextManager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const tracer = provider.getTracer('rxcmap-tracing-example');
  const untrace = traceConnectionPools(tracer);
  // A span per command, from the client's command events: its parent is the span active where the command is called.
  const commands = traceCommands(client, { tracer });

  // Counted on the client's events, which follow every pool: a mongodb+srv:// URI's pools are opened later.
  let connectionsCreated = 0;
  const counting = client.events$.subscribe((event) => {
    if (event.type === 'ConnectionCreated') connectionsCreated++;
  });
  /** Stops tracing; returns the finished spans (read before the exporter's shutdown, which drops them). */
  const stop = async (): Promise<ReadableSpan[]> => {
    counting.unsubscribe();
    untrace();
    commands.unsubscribe();
    await provider.forceFlush();
    const spans = exporter.getFinishedSpans();
    await provider.shutdown();
    context.disable();
    return spans;
  };

  // Wait for a suitable server once (up to serverSelectionTimeoutMS), without a checkout, so nothing is traced yet.
  let pool: Awaited<ReturnType<typeof client.selectPool>>;
  try {
    pool = await client.selectPool();
  } catch (error) {
    await stop();
    process.stderr.write(`${unreachable(error, client.hosts.join(', '))}\n`);
    return 1;
  }

  /** One operation: a span `operation` holding the checkout, a `ping`, and the check-in. */
  let failedOperations = 0;
  const operation = (n: number): Promise<void> =>
    tracer.startActiveSpan(
      'operation',
      { kind: SpanKind.INTERNAL, startTime: now(), attributes: { [ATTR_OPERATION]: n } },
      async (span) => {
        try {
          const connection = await pool.checkOut();
          try {
            await connection.command('admin', { ping: 1 });
          } finally {
            pool.checkIn(connection);
          }
          span.end(now());
        } catch (error) {
          const time = now();
          failedOperations++;
          fail(span, error, time);
          span.end(time);
        }
      },
    );

  let next = 1;
  const lane = async (): Promise<void> => {
    while (next <= settings.operations) await operation(next++);
  };
  await Promise.all(Array.from({ length: Math.min(settings.concurrency, settings.operations) }, lane));
  let operations = settings.operations;
  if (settings.closedPool) {
    pool.close();
    await operation(++operations);
  }

  await client.close();
  const spans = await stop();
  process.stdout.write(renderTree(spans));
  process.stdout.write(`${JSON.stringify(summarize(spans, { operations, failedOperations, connectionsCreated }))}\n`);
  return 0;
}

/** An HrTime (seconds, nanoseconds) in ms. */
function ms(time: HrTime): number {
  return time[0] * 1e3 + time[1] / 1e6;
}

/**
 * The span tree, one line per span (and per event, marked `event`), each span's children and events in time order
 * under it, two spaces deeper: `+<start> ms <duration> ms  <name> <details>`, start in ms from the first span.
 */
function renderTree(spans: readonly ReadableSpan[]): string {
  const ids = new Set(spans.map((s) => s.spanContext().spanId));
  const children = new Map<string | undefined, ReadableSpan[]>();
  for (const span of spans) {
    const parent = span.parentSpanContext?.spanId;
    const key = parent !== undefined && ids.has(parent) ? parent : undefined; // a parent not recorded: a root
    children.set(key, [...(children.get(key) ?? []), span]);
  }
  const origin = Math.min(...spans.map((s) => ms(s.startTime)));
  const at = (time: HrTime): string => `+${(ms(time) - origin).toFixed(3).padStart(9)} ms`;
  const lines: string[] = [];
  const visit = (span: ReadableSpan, indent: string): void => {
    const duration = (ms(span.endTime) - ms(span.startTime)).toFixed(3).padStart(9);
    lines.push(`${at(span.startTime)} ${duration} ms  ${indent}${span.name}${details(span)}`);
    // Its children and its events (but exceptions: the status line tells the error), in time order.
    const inner = [
      ...(children.get(span.spanContext().spanId) ?? []).map((child) => ({
        time: child.startTime,
        show: () => visit(child, `${indent}  `),
      })),
      ...span.events
        .filter((event) => event.name !== 'exception')
        .map((event) => ({
          time: event.time,
          show: () =>
            lines.push(
              `${at(event.time)} ${'event'.padStart(12)}  ${indent}  ${event.name}${connectionOf(event.attributes)}`,
            ),
        })),
    ];
    for (const { show } of inner.sort((a, b) => ms(a.time) - ms(b.time))) show();
  };
  for (const root of (children.get(undefined) ?? []).sort((a, b) => ms(a.startTime) - ms(b.startTime))) visit(root, '');
  return lines.map((line) => `${line}\n`).join('');
}

/** ` connection <id>` when `attributes` name a connection, else ''. */
function connectionOf(attributes: Attributes | undefined): string {
  const id = attributes?.[ATTR_DB_MONGODB_DRIVER_CONNECTION_ID];
  return id === undefined ? '' : ` connection ${String(id)}`;
}

/** What a span line tells after its name: the operation number, the pool, the connection, the outcome, an error. */
function details(span: ReadableSpan): string {
  const a = span.attributes;
  const pool =
    span.name === 'checkOut' || span.name === 'establish' ? ` ${String(a[ATTR_DB_CLIENT_CONNECTION_POOL_NAME])}` : '';
  const outcome = a[ATTR_CHECK_OUT_OUTCOME] ?? a[ATTR_ESTABLISH_OUTCOME];
  const error =
    span.status.code === SpanStatusCode.ERROR
      ? ` ERROR ${String(a[ATTR_ERROR_TYPE])}: ${span.status.message ?? ''}`
      : '';
  return [
    a[ATTR_OPERATION] === undefined ? '' : ` #${String(a[ATTR_OPERATION])}`,
    pool,
    connectionOf(a),
    outcome === undefined ? '' : ` ${String(outcome)}`,
    error,
  ].join('');
}

/** The one-line summary (see the module). */
function summarize(
  spans: readonly ReadableSpan[],
  counts: { operations: number; failedOperations: number; connectionsCreated: number },
): Record<string, unknown> {
  const byId = new Map(spans.map((s) => [s.spanContext().spanId, s]));
  const tally = (names: readonly string[]): Record<string, number> => {
    const out: Record<string, number> = {};
    for (const name of names) out[name] = (out[name] ?? 0) + 1;
    return out;
  };
  return {
    operations: counts.operations,
    failedOperations: counts.failedOperations,
    spans: tally(spans.map((s) => s.name)),
    errorSpans: tally(spans.filter((s) => s.status.code === SpanStatusCode.ERROR).map((s) => s.name)),
    connectionsCreated: counts.connectionsCreated,
    establishParents: tally(
      spans
        .filter((s) => s.name === 'establish')
        .map((s) => byId.get(s.parentSpanContext?.spanId ?? '')?.name ?? 'none'),
    ),
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
