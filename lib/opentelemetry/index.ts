/**
 * `rxcmap/opentelemetry`: the OpenTelemetry database client connection pool metrics of a pool. A separate entry point,
 * so that only applications that use it need `@opentelemetry/api` (an optional peer dependency).
 *
 * Source: OpenTelemetry semantic conventions v1.44.0, "Semantic conventions for database client metrics", section
 * "Connection pools".
 *
 * @packageDocumentation
 */
export { instrumentConnectionPool } from './connection-pool-instrumentation';
export type {
  ConnectionPoolInstrumentation,
  ConnectionPoolInstrumentationOptions,
  InstrumentedPool,
} from './connection-pool-instrumentation';
export * from './semantic-conventions';
