/**
 * `rxcmap/opentelemetry`: the OpenTelemetry database client connection pool metrics of a pool. A separate entry point,
 * so that only applications that use it need `@opentelemetry/api` (an optional peer dependency).
 *
 * Source: OpenTelemetry semantic conventions, "Semantic conventions for database client metrics", section
 * "Connection pools".
 */
export { instrumentConnectionPool } from './connection-pool-instrumentation';
export type {
  ConnectionPoolInstrumentation,
  ConnectionPoolInstrumentationOptions,
  InstrumentedPool,
} from './connection-pool-instrumentation';
export {
  ATTR_DB_CLIENT_CONNECTION_POOL_NAME,
  ATTR_DB_CLIENT_CONNECTION_STATE,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT,
  DB_CLIENT_CONNECTION_STATE_VALUE_IDLE,
  DB_CLIENT_CONNECTION_STATE_VALUE_USED,
  DB_CLIENT_CONNECTION_TIME_BUCKETS,
  METRIC_DB_CLIENT_CONNECTION_COUNT,
  METRIC_DB_CLIENT_CONNECTION_CREATE_TIME,
  METRIC_DB_CLIENT_CONNECTION_IDLE_MAX,
  METRIC_DB_CLIENT_CONNECTION_IDLE_MIN,
  METRIC_DB_CLIENT_CONNECTION_MAX,
  METRIC_DB_CLIENT_CONNECTION_PENDING_REQUESTS,
  METRIC_DB_CLIENT_CONNECTION_TIMEOUTS,
  METRIC_DB_CLIENT_CONNECTION_USE_TIME,
  METRIC_DB_CLIENT_CONNECTION_WAIT_TIME,
} from './semantic-conventions';
