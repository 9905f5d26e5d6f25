/**
 * Commands traced as production traces them, for the end-to-end ping: an SDK TracerProvider whose spans go through a
 * BatchSpanProcessor to an exporter that drops them, async context in an AsyncLocalStorage, each caller's pings under
 * a request span of its own. rxcmap traces with `traceCommands`; the official driver, which makes no spans itself,
 * with `@opentelemetry/instrumentation-mongodb`, the OpenTelemetry contrib instrumentation an APM setup installs.
 *
 * Import this module before anything that loads `mongodb`: the instrumentation patches the driver's modules as they
 * are first required. It is turned off at once, and on only while a traced driver runs.
 */
import { context, trace, type Context, type Tracer } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { MongoDBInstrumentation } from '@opentelemetry/instrumentation-mongodb';
import { BasicTracerProvider, BatchSpanProcessor, type ReadableSpan, type SpanExporter } from '@opentelemetry/sdk-trace-base';

/** The driver's instrumentation, made before `mongodb` loads; off until {@link startTracing} turns it on. */
const driverInstrumentation = new MongoDBInstrumentation();
// eslint-disable-next-line @typescript-eslint/no-require-imports
require('mongodb');
driverInstrumentation.disable();

/** What a traced run uses: the Tracer rxcmap is given, and the request span context each caller runs under. */
export interface Tracing {
  readonly tracer: Tracer;
  /** A context holding a fresh request span (ended at {@link Tracing.stop}), for one caller's loop. */
  requestContext(): Context;
  /** How many command spans were exported (checks the run traced what it claims). */
  exported(): number;
  /** Ends the request spans, flushes and shuts the provider down, and turns the instrumentation and context off. */
  stop(): Promise<void>;
}

/** Starts tracing; `driver`: turn the driver's instrumentation on too. */
export function startTracing(driver: boolean): Tracing {
  let exportedSpans = 0;
  const exporter: SpanExporter = {
    export: (spans: ReadableSpan[], done) => {
      exportedSpans += spans.filter((s) => s.name !== 'request').length;
      done({ code: 0 });
    },
    shutdown: async () => undefined,
  };
  const provider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(exporter)] });
  const contextManager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
  const tracer = provider.getTracer('rxcmap-bench');
  if (driver) {
    driverInstrumentation.setTracerProvider(provider);
    driverInstrumentation.enable();
  }
  const requests: { end(): void }[] = [];
  return {
    tracer,
    requestContext: () => {
      const span = tracer.startSpan('request');
      requests.push(span);
      return trace.setSpan(context.active(), span);
    },
    exported: () => exportedSpans,
    stop: async () => {
      for (const span of requests) span.end();
      if (driver) driverInstrumentation.disable();
      await provider.forceFlush();
      await provider.shutdown();
      context.disable();
    },
  };
}
