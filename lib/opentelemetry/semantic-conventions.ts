/**
 * The names, units and attribute keys of the OpenTelemetry database client connection pool metrics (and, at the end,
 * of `db.client.operation.duration`, Stable, with the attributes the conventions for MongoDB give it), as constants
 * named the way `@opentelemetry/semantic-conventions` names them (`METRIC_*`, `ATTR_*`, `*_VALUE_*`). They are at
 * Development status there, and that package asks users of unstable conventions to copy the definitions they need
 * rather than import its `incubating` entry point; these are those copies.
 *
 * They follow semantic conventions v1.44.0. The names are those since v1.26.0 (`db.client.connection.*`, times in
 * seconds); the `db.client.connections.*` names before it (times in ms) are deprecated and never emitted, so there is
 * no older convention to migrate from and `OTEL_SEMCONV_STABILITY_OPT_IN` changes nothing. Every connection pool
 * metric is Recommended, none Required.
 *
 * Source: OpenTelemetry semantic conventions v1.44.0, "Semantic conventions for database client metrics" (docs/db/
 * database-metrics.md), section "Connection pools"; attribute registry "db" (db.client.connection.*) and "server"
 * (server.address, server.port).
 */

/**
 * `db.client.connection.count`: UpDownCounter (int), unit `{connection}`, the number of connections in the state
 * named by {@link ATTR_DB_CLIENT_CONNECTION_STATE}. Recommended, like every connection pool metric (it was Required
 * before semantic conventions v1.43.0).
 *
 * Source: semantic conventions, database client metrics, "Metric: db.client.connection.count".
 */
export const METRIC_DB_CLIENT_CONNECTION_COUNT = 'db.client.connection.count';

/**
 * `db.client.connection.idle.max`: UpDownCounter (int), unit `{connection}`, the maximum number of idle open
 * connections allowed.
 *
 * Source: semantic conventions, database client metrics, "Metric: db.client.connection.idle.max".
 */
export const METRIC_DB_CLIENT_CONNECTION_IDLE_MAX = 'db.client.connection.idle.max';

/**
 * `db.client.connection.idle.min`: UpDownCounter (int), unit `{connection}`, the minimum number of idle open
 * connections allowed.
 *
 * Source: semantic conventions, database client metrics, "Metric: db.client.connection.idle.min".
 */
export const METRIC_DB_CLIENT_CONNECTION_IDLE_MIN = 'db.client.connection.idle.min';

/**
 * `db.client.connection.max`: UpDownCounter (int), unit `{connection}`, the maximum number of open connections
 * allowed.
 *
 * Source: semantic conventions, database client metrics, "Metric: db.client.connection.max".
 */
export const METRIC_DB_CLIENT_CONNECTION_MAX = 'db.client.connection.max';

/**
 * `db.client.connection.pending_requests`: UpDownCounter (int), unit `{request}`, the number of current pending
 * requests for an open connection.
 *
 * Source: semantic conventions, database client metrics, "Metric: db.client.connection.pending_requests".
 */
export const METRIC_DB_CLIENT_CONNECTION_PENDING_REQUESTS = 'db.client.connection.pending_requests';

/**
 * `db.client.connection.timeouts`: Counter (int), unit `{timeout}`, the number of connection timeouts that have
 * occurred trying to obtain a connection from the pool.
 *
 * Source: semantic conventions, database client metrics, "Metric: db.client.connection.timeouts".
 */
export const METRIC_DB_CLIENT_CONNECTION_TIMEOUTS = 'db.client.connection.timeouts';

/**
 * `db.client.connection.create_time`: Histogram (double), unit `s`, the time it took to create a new connection.
 *
 * Source: semantic conventions, database client metrics, "Metric: db.client.connection.create_time".
 */
export const METRIC_DB_CLIENT_CONNECTION_CREATE_TIME = 'db.client.connection.create_time';

/**
 * `db.client.connection.wait_time`: Histogram (double), unit `s`, the time it took to obtain an open connection from
 * the pool.
 *
 * Source: semantic conventions, database client metrics, "Metric: db.client.connection.wait_time".
 */
export const METRIC_DB_CLIENT_CONNECTION_WAIT_TIME = 'db.client.connection.wait_time';

/**
 * `db.client.connection.use_time`: Histogram (double), unit `s`, the time between borrowing a connection and
 * returning it to the pool.
 *
 * Source: semantic conventions, database client metrics, "Metric: db.client.connection.use_time".
 */
export const METRIC_DB_CLIENT_CONNECTION_USE_TIME = 'db.client.connection.use_time';

/**
 * `db.client.connection.pool.name` (string, Required on every connection pool metric): the name of the connection
 * pool, unique within the instrumented application.
 *
 * Source: semantic conventions, attribute registry "db", `db.client.connection.pool.name`.
 */
export const ATTR_DB_CLIENT_CONNECTION_POOL_NAME = 'db.client.connection.pool.name';

/**
 * `db.client.connection.state` (string, Required on `db.client.connection.count`): the state of a connection in the
 * pool; well-known values {@link DB_CLIENT_CONNECTION_STATE_VALUE_IDLE} and
 * {@link DB_CLIENT_CONNECTION_STATE_VALUE_USED}.
 *
 * Source: semantic conventions, attribute registry "db", `db.client.connection.state`.
 */
export const ATTR_DB_CLIENT_CONNECTION_STATE = 'db.client.connection.state';

/** `db.client.connection.state` value `idle`. Source: semantic conventions, attribute registry "db". */
export const DB_CLIENT_CONNECTION_STATE_VALUE_IDLE = 'idle';

/** `db.client.connection.state` value `used`. Source: semantic conventions, attribute registry "db". */
export const DB_CLIENT_CONNECTION_STATE_VALUE_USED = 'used';

/**
 * `server.address` (string): the server domain name, IP address or Unix domain socket name.
 *
 * Source: semantic conventions, attribute registry "server", `server.address` (Stable).
 */
export const ATTR_SERVER_ADDRESS = 'server.address';

/**
 * `server.port` (int): the server port number.
 *
 * Source: semantic conventions, attribute registry "server", `server.port` (Stable).
 */
export const ATTR_SERVER_PORT = 'server.port';

/**
 * Explicit histogram bucket boundaries, in seconds, advised for the three connection pool time histograms: those the
 * conventions advise for `db.client.operation.duration` (the pool ones advise none, and the SDK's default buckets
 * are sized for milliseconds).
 *
 * Source: extension (semantic conventions, database client metrics, "Metric: db.client.operation.duration",
 * `ExplicitBucketBoundaries` advice).
 */
export const DB_CLIENT_CONNECTION_TIME_BUCKETS: readonly number[] = Object.freeze([0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10]);

/**
 * `db.client.operation.duration`: Histogram (double), unit `s`, the duration of database client operations (Stable).
 * For MongoDB, one per command.
 *
 * Source: semantic conventions, database client metrics, "Metric: db.client.operation.duration".
 */
export const METRIC_DB_CLIENT_OPERATION_DURATION = 'db.client.operation.duration';

/** `db.system.name`: the database management system (Required on `db.client.operation.duration`). Source: attribute registry "db". */
export const ATTR_DB_SYSTEM_NAME = 'db.system.name';

/** The `db.system.name` of MongoDB. Source: semantic conventions for MongoDB. */
export const DB_SYSTEM_NAME_VALUE_MONGODB = 'mongodb';

/** `db.operation.name`: for MongoDB, the command's name (`find`, `getMore`). Source: semantic conventions for MongoDB. */
export const ATTR_DB_OPERATION_NAME = 'db.operation.name';

/** `db.namespace`: for MongoDB, the database name. Source: semantic conventions for MongoDB. */
export const ATTR_DB_NAMESPACE = 'db.namespace';

/** `db.collection.name`: the collection the command names, as the application gave it. Source: semantic conventions for MongoDB. */
export const ATTR_DB_COLLECTION_NAME = 'db.collection.name';

/** `db.response.status_code`: for MongoDB, the server's error code as a string. Source: semantic conventions for MongoDB. */
export const ATTR_DB_RESPONSE_STATUS_CODE = 'db.response.status_code';

/** `error.type`: the class of error an operation ended with, present if and only if it failed. Source: attribute registry "error". */
export const ATTR_ERROR_TYPE = 'error.type';

/**
 * `db.command.name`: the name of the server command a command span describes.
 * Source: MongoDB OpenTelemetry spec, "Command Span Attributes".
 */
export const ATTR_DB_COMMAND_NAME = 'db.command.name';

/**
 * `db.query.summary`: for a MongoDB command span, `<command> <database>.<collection>`, or `<command> <database>` when
 * it names no collection. Source: MongoDB OpenTelemetry spec, "db.query.summary"; attribute registry "db" (Stable).
 */
export const ATTR_DB_QUERY_SUMMARY = 'db.query.summary';

/**
 * `db.query.text`: the command sent, as relaxed Extended JSON (opt-in, truncated). Source: MongoDB OpenTelemetry spec,
 * "db.query.text"; attribute registry "db" (Stable).
 */
export const ATTR_DB_QUERY_TEXT = 'db.query.text';

/** `network.transport`: `tcp`, or `unix` for a Unix domain socket. Source: attribute registry "network" (Stable). */
export const ATTR_NETWORK_TRANSPORT = 'network.transport';

/** `network.transport` value `tcp`. Source: attribute registry "network". */
export const NETWORK_TRANSPORT_VALUE_TCP = 'tcp';

/** `network.transport` value `unix`. Source: attribute registry "network". */
export const NETWORK_TRANSPORT_VALUE_UNIX = 'unix';

/**
 * `db.mongodb.driver_connection_id` (int64): the driver's id of the connection.
 * Source: MongoDB OpenTelemetry spec, "Command Span Attributes".
 */
export const ATTR_DB_MONGODB_DRIVER_CONNECTION_ID = 'db.mongodb.driver_connection_id';

/**
 * `db.mongodb.server_connection_id` (int64): the server's id of the connection, when the server gave one.
 * Source: MongoDB OpenTelemetry spec, "Command Span Attributes".
 */
export const ATTR_DB_MONGODB_SERVER_CONNECTION_ID = 'db.mongodb.server_connection_id';

/**
 * `db.mongodb.cursor_id` (int64): the cursor a command creates or uses.
 * Source: MongoDB OpenTelemetry spec, "Command Span Attributes", "db.mongodb.cursor_id".
 */
export const ATTR_DB_MONGODB_CURSOR_ID = 'db.mongodb.cursor_id';

/**
 * `db.mongodb.lsid` (string): the logical session id a command carries.
 * Source: MongoDB OpenTelemetry spec, "Command Span Attributes".
 */
export const ATTR_DB_MONGODB_LSID = 'db.mongodb.lsid';

/**
 * `db.mongodb.txn_number` (int64): the transaction number a command carries.
 * Source: MongoDB OpenTelemetry spec, "Command Span Attributes".
 */
export const ATTR_DB_MONGODB_TXN_NUMBER = 'db.mongodb.txn_number';
