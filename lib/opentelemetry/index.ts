/**
 * `rxcmap/opentelemetry`: the OpenTelemetry database client connection pool metrics of a pool (or of every pool of a
 * client, as the client opens them), the operation duration of its (or a client's) commands, and a span per command.
 * A separate entry point, so that only applications that use it need `@opentelemetry/api` (an optional peer
 * dependency).
 *
 * Source: OpenTelemetry semantic conventions v1.44.0, "Semantic conventions for database client metrics", sections
 * "Connection pools" and "Database operation", and "Semantic conventions for database client spans"; MongoDB
 * OpenTelemetry spec, "Instrumenting Server Commands".
 *
 * @packageDocumentation
 */
export { instrumentConnectionPool } from './connection-pool-instrumentation';
export type {
  ConnectionPoolInstrumentation,
  ConnectionPoolInstrumentationOptions,
  InstrumentedPool,
} from './connection-pool-instrumentation';
export { instrumentConnectionPools } from './connection-pools-instrumentation';
export type { ConnectionPoolsInstrumentation, ConnectionPoolsInstrumentationOptions, InstrumentedPools } from './connection-pools-instrumentation';
export { instrumentCommands } from './command-instrumentation';
export type { CommandInstrumentation, CommandInstrumentationOptions, InstrumentedCommands } from './command-instrumentation';
export { QUERY_TEXT_MAX_LENGTH_ENV, traceCommands } from './command-tracing';
export type { CommandTracing, CommandTracingOptions } from './command-tracing';
export * from './semantic-conventions';
