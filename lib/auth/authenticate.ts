/**
 * The authentication step of establishing a connection: picks the mechanism (explicit, or negotiated through the
 * handshake's `saslSupportedMechs`) and runs it.
 *
 * Source: auth spec, "Authentication Handshake", "Mechanism Negotiation via Handshake", "Default Authentication
 * Methods".
 */
import type { Document } from 'bson';
import type { AuthMechanism, MongoCredentials } from './credentials';
import { scramAuthenticate, type RunCommand } from './scram';

/** The `saslSupportedMechs` value to put in the handshake, when the mechanism must be negotiated. */
export function saslSupportedMechsRequest(credentials: MongoCredentials): string | undefined {
  return credentials.mechanism === undefined ? `${credentials.source}.${credentials.username}` : undefined;
}

/**
 * The mechanism to use: the credentials' own, else SCRAM-SHA-256 when the handshake reply lists it, else
 * SCRAM-SHA-1. Unknown names in the list are ignored, never an error.
 */
export function selectMechanism(credentials: MongoCredentials, handshakeReply: Document): AuthMechanism {
  if (credentials.mechanism !== undefined) return credentials.mechanism;
  const listed = handshakeReply.saslSupportedMechs;
  return Array.isArray(listed) && listed.includes('SCRAM-SHA-256') ? 'SCRAM-SHA-256' : 'SCRAM-SHA-1';
}

/**
 * Authenticates a connection whose handshake returned `handshakeReply`, sending commands with `run`. The key
 * derivation runs off the event loop; `signal` ends the conversation (see {@link scramAuthenticate}).
 *
 * @throws {AuthenticationError} (rejection) when authentication fails, including an iteration count outside 4096 to
 *   1,000,000 (see {@link scramAuthenticate}).
 * @throws `signal.reason` (rejection) once `signal` aborts.
 *
 * Source: auth spec, "Authentication Handshake", "Mechanism Negotiation via Handshake".
 */
export function authenticate(
  run: RunCommand,
  credentials: MongoCredentials,
  handshakeReply: Document,
  signal?: AbortSignal,
): Promise<void> {
  return scramAuthenticate(run, credentials, selectMechanism(credentials, handshakeReply), { signal });
}
