/**
 * `rxcmap/opentelemetry`: the OpenTelemetry database client connection pool metrics of a pool, and the operation
 * duration of its (or a client's) commands. A separate entry point, so that only applications that use it need
 * `@opentelemetry/api` (an optional peer dependency).
 *
 * Source: OpenTelemetry semantic conventions v1.44.0, "Semantic conventions for database client metrics", sections
 * "Connection pools" and "Database operation".
 *
 * @packageDocumentation
 */
export { instrumentConnectionPool } from './connection-pool-instrumentation';
export type {
  ConnectionPoolInstrumentation,
  ConnectionPoolInstrumentationOptions,
  InstrumentedPool,
} from './connection-pool-instrumentation';
export { instrumentCommands } from './command-instrumentation';
export type { CommandInstrumentation, CommandInstrumentationOptions, InstrumentedCommands } from './command-instrumentation';
export * from './semantic-conventions';
