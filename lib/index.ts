/**
 * rxcmap: a MongoDB connection pool implementing the Connection Monitoring and Pooling (CMAP) specification as one
 * serialized, RxJS-based state machine. This module is the only public entry point.
 */
export { ConnectionPool } from './pool/connection-pool';
export type { ConnectionPoolOptions, ClearOptions, PoolSnapshot } from './pool/connection-pool';
export { CheckOutRequest } from './pool/check-out';
export type { CheckOutOptions } from './pool/check-out';
export type { ConnectionFactory } from './pool/commands';
export type { PoolConnection, ConnectionDescriptor, PoolStatus, ConnectionState } from './pool/state';

export { DEFAULT_POOL_OPTIONS, POOL_OPTION_NAMES, resolvePoolOptions } from './options';
export type { PoolOptions, BackgroundOptions, ResolvedPoolOptions } from './options';
export { parseAddress, DEFAULT_PORT } from './address';
export type { ServerAddress } from './address';
export { timerScheduler } from './scheduler';

export { CONNECTION_POOL_EVENT_TYPES } from './events';
export type * from './events';

export {
  CmapError,
  ErrorLabel,
  InvalidOptionError,
  PoolClosedError,
  PoolClearedError,
  WaitQueueTimeoutError,
  CheckOutCancelledError,
  ConnectionCheckInError,
  ConnectionBusyError,
  MongoNetworkError,
  MongoNetworkTimeoutError,
  MongoServerError,
  AuthenticationError,
  MongoCompatibilityError,
  ServerSelectionError,
} from './errors';

export { Connection } from './connection/connection';
export type { CommandOptions } from './connection/connection';
export { connectionFactory } from './connection/connect';
export type { ConnectionOptions, Endpoint } from './connection/connect';

export { EmbeddedServer } from './testing/embedded-server';
export type { EmbeddedServerOptions, ClientConnectionInfo, CommandHandler } from './testing/embedded-server';
export { MockConnection, MockConnectionFactory } from './testing/mock-connection';
export type { MockConnectionFactoryOptions } from './testing/mock-connection';
export { DRIVER_INFO } from './version';
export { parseConnectionString } from './connection-string';
export type { ParsedConnectionString } from './connection-string';
export { MongoCredentials, AUTH_MECHANISMS } from './auth/credentials';
export type { AuthMechanism, CredentialsInit } from './auth/credentials';
export type { TlsSettings } from './connection/tls-options';
export type { ServerDescription } from './connection/connection';
export { FailCommandPoint } from './testing/fail-points';
export type { FailAction } from './testing/fail-points';
export type { EmbeddedUser } from './testing/scram-server';
export { LOG_LEVELS, DEFAULT_MAX_DOCUMENT_LENGTH, resolveLogSettings, willLog } from './logging/log-settings';
export type { LogLevel, LogComponent, LogSink, LoggingOptions, LogSettings } from './logging/log-settings';
export { ConnectionLogMessage, connectionLogMessage, renderConnectionMessage, truncate } from './logging/log-message';
export type { ConnectionLogFields, LoggedError } from './logging/log-message';
export { openLogSink } from './logging/log-sink';
export { Monitor, MIN_HEARTBEAT_FREQUENCY_MS } from './monitor/monitor';
export type { MonitorOptions } from './monitor/monitor';
export type * from './monitor/heartbeat-events';
export { Client, connect } from './client/client';
export type { ClientOptions, ClientEvent } from './client/client';
export type { UriClientOptions } from './connection-string';
