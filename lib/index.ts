/**
 * `rxcmap`: a MongoDB connection pool implementing the Connection Monitoring and Pooling (CMAP) specification as one
 * serialized, RxJS-based state machine; the connections, monitor, log feed and client around it. Test helpers (the
 * embedded endpoint, mock connections, virtual time) are in `rxcmap/testing`.
 *
 * @packageDocumentation
 */
export { ConnectionPool } from './client/connection-pool';
export type { ConnectionPoolOptions } from './client/connection-pool';
export { ConnectionPoolCore } from './pool/connection-pool-core';
export type { PoolHoldings } from './errors';
export type { ConnectionPoolCoreOptions, ClearOptions, PoolSnapshot, ServiceGenerationSnapshot, PoolInputAction } from './pool/connection-pool-core';
export type { CheckOutRequest, CheckOutOptions, CheckOutPurpose } from './pool/check-out';
export type { PoolConnection, ConnectionDescriptor, ConnectionFactory } from './pool/contract';
export type { ConnectionPoolState, ConnectionState } from './pool/state';

export { DEFAULT_POOL_OPTIONS, POOL_OPTION_NAMES, POOL_EXTENSION_OPTION_NAMES } from './options';
export type { PoolOptions, PoolExtensionOptions, BackgroundOptions, ResolvedPoolOptions } from './options';
export { timerScheduler } from './scheduler';

export { CONNECTION_POOL_EVENT_TYPES, EXTENSION_EVENT_TYPES } from './events';
export type * from './events';
export { DIAGNOSTICS_CHANNELS } from './diagnostics-channels';
export type { CheckOutTraceContext, EstablishTraceContext, CheckInMessage, ClearMessage, ServerAttributes, PoolAttributes } from './diagnostics-channels';

export {
  CmapError,
  ErrorLabel,
  InvalidOptionError,
  PoolClosedError,
  PoolClearedError,
  WaitQueueTimeoutError,
  WaitQueueFullError,
  CheckOutCancelledError,
  CommandCancelledError,
  ConnectionCheckInError,
  ConnectionBusyError,
  MongoNetworkError,
  MongoNetworkTimeoutError,
  MongoServerError,
  AuthenticationError,
  MongoCompatibilityError,
  IncompatibleServerError,
  ServerSelectionError,
  SrvResolutionError,
  PoolCallbackError,
  ClientClosedError,
  MonitorClosedError,
} from './errors';

export { Connection } from './connection/connection';
export { WireProtocolError } from './errors';
export type { CommandOptions, HandshakeDescription, NextReplyOptions } from './connection/connection';
export { connectionFactory } from './connection/connect';
export type { ConnectionOptions, Endpoint, TcpConnectionFactory } from './connection/connect';
export { SENSITIVE_COMMANDS, isSensitiveCommand, isWithheld } from './connection/command-events';
export type { CommandEvent, CommandEventFields, CommandEventSink, CommandFailedEvent, CommandStartedEvent, CommandSucceededEvent } from './connection/command-events';
export { DEFAULT_KEEP_ALIVE_INITIAL_DELAY_MS, MAX_KEEP_ALIVE_INITIAL_DELAY_MS } from './connection/connection-options';
export type { TlsSettings } from './connection/tls-options';
export type { ProxyOptions } from './connection/proxy';
export type { DriverInfoOptions } from './connection/handshake';
export { MIN_SUPPORTED_WIRE_VERSION, MAX_SUPPORTED_WIRE_VERSION, MIN_SUPPORTED_SERVER_VERSION, MAX_SUPPORTED_SERVER_VERSION } from './connection/handshake';
export { ServerApiVersion } from './connection/server-api';
export type { ServerApi, ServerApiVersionId } from './connection/server-api';
export { MongoCredentials, AUTH_MECHANISMS, SCRAM_MECHANISMS, EXTERNAL_SOURCE } from './auth/credentials';
export type { AuthMechanism, ScramMechanism, CredentialsInit, MechanismProperties } from './auth/credentials';
export { OIDC_MECHANISM, OIDC_CALLBACK_VERSION, OIDC_CALLBACK_TIMEOUT_MS, OIDC_MIN_CALL_INTERVAL_MS, OIDC_ENVIRONMENTS, OIDC_HUMAN_CALLBACK_TIMEOUT_MS, OIDC_DEFAULT_ALLOWED_HOSTS, OidcHostNotAllowedError } from './auth/oidc';
export type { OidcCallback, OidcCallbackParams, OidcCredential, OidcEnvironment, IdpInfo, OidcHumanCallback, OidcHumanCallbackParams, OidcHumanCredential } from './auth/oidc';
export type { AwsCredentials, AwsCredentialProvider } from './auth/aws';

export { LOG_LEVELS, LOG_COMPONENTS, DEFAULT_MAX_DOCUMENT_LENGTH } from './logging/log-settings';
export type { LogLevel, LogComponent, LogSink, LoggingOptions } from './logging/log-settings';
export type { ConnectionLogMessage, ConnectionLogFields, ClientLogMessage, ClientLogFields, CommandLogMessage, CommandLogFields, DebugLogMessage, TopologyLogMessage, TopologyLogFields, ServerHeartbeatLogFields, TopologyMonitoringLogFields, ServerMonitoringLogFields, TopologyDescriptionChangedLogFields, ServerSelectionLogMessage, ServerSelectionLogFields, LogMessage, LoggedError, LoggedPoolHoldings } from './logging/log-message';

export { Monitor, MIN_HEARTBEAT_FREQUENCY_MS, SERVER_MONITORING_MODES } from './monitor/monitor';
export { heartbeatActions } from './monitor/heartbeat-actions';
export type { MonitorOptions, ServerMonitoringMode } from './monitor/monitor';
export type * from './monitor/heartbeat-events';

export { Client, connect } from './client/client';
export type { ClientOptions, ClientEvent } from './client/client';
export type { TopologyType } from './client/topology-type';
export type { ServerType } from './client/topology-description';
export type { ServerDescription, TopologyDescription } from './client/topology-update';
export { serverDescriptionEquals, topologyDescriptionEquals } from './client/topology-events';
export type { TopologyEvent, TopologyEventBase, TopologyOpeningEvent, ServerOpeningEvent, ServerDescriptionChangedEvent, TopologyDescriptionChangedEvent, ServerClosedEvent, TopologyClosedEvent } from './client/topology-events';
export { readPreferenceDocument, readPreferenceFrom, READ_PREFERENCE_MODES } from './read-preference';
export type { ReadPreference, ReadPreferenceMode, TagSet } from './read-preference';
export type { UriClientOptions } from './connection-string';
