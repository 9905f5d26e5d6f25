/**
 * `rxcmap/testing`: what tests and demos of code that uses a pool need, kept out of the main entry so production
 * bundles never carry it: an embedded MongoDB wire-protocol endpoint (with SCRAM users and the `failCommand` fail
 * point), mock connections, and virtual time.
 *
 * Source: extension (the CMAP spec allows a mocked Connection for its unit tests; the fail points follow the
 * server's `failCommand`).
 *
 * @packageDocumentation
 */
export { EmbeddedServer } from './embedded-server';
export type { EmbeddedServerOptions, ClientConnectionInfo, CommandHandler, ReceivedCommand, ReplicaSetConfigMember } from './embedded-server';
export { FailCommandPoint } from './fail-points';
export type { FailAction } from './fail-points';
export type { EmbeddedUser } from './scram-server';
export { OidcIdentities, signOidcToken } from './oidc-server';
export type { EmbeddedIdpInfo, EmbeddedOidcOptions, OidcOutcome } from './oidc-server';
export { MockConnection, MockConnectionFactory } from './mock-connection';
export type { MockConnectionFactoryOptions } from './mock-connection';
export { VirtualClock } from './virtual-clock';
