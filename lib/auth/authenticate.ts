/**
 * The authentication step of establishing a connection: picks the mechanism (explicit, or negotiated through the
 * handshake's `saslSupportedMechs`) and runs it, going on from the handshake's speculative first message when the
 * server answered it.
 *
 * Source: auth spec, "Authentication Handshake", "Mechanism Negotiation via Handshake", "Default Authentication
 * Methods", "MONGODB-X509", "PLAIN"; handshake spec, "Speculative Authentication".
 */
import type { Document } from 'bson';
import type { AuthMechanism, MongoCredentials } from './credentials';
import { awsAuthenticate } from './aws';
import { oidcAuthenticate, oidcReauthenticate, oidcSpeculativeStart } from './oidc';
import { plainAuthenticate } from './plain';
import { scramAuthenticate, scramPassword, scramStart, type RunCommand, type ScramStart } from './scram';
import { x509Authenticate, x509Command } from './x509';

/**
 * The first message of an authentication a handshake carries as `speculativeAuthenticate`: a SCRAM saslStart
 * ({@link ScramStart}), or the MONGODB-X509 `authenticate` command.
 *
 * Source: handshake spec, "Speculative Authentication".
 */
export type SpeculativeStart =
  | ScramStart
  | { readonly mechanism: 'MONGODB-X509'; readonly speculativeAuthenticate: Document }
  | { readonly mechanism: 'MONGODB-OIDC'; readonly speculativeAuthenticate: Document; readonly token: string };

/**
 * Reauthenticates a connection that was authenticated with {@link authenticate}, sending SASL commands (no hello)
 * with `run`; what {@link authenticate} resolves to for a mechanism that supports reauthentication (MONGODB-OIDC).
 * `signal` ends it; `remainingMS` gives the time left, in ms, to the deadline `signal` aborts at (the command's
 * timeoutMS), which bounds a MONGODB-OIDC callback's `timeoutMS` (undefined: no deadline, 60000); `holdDeadline`
 * holds that deadline while MONGODB-OIDC's human callback runs (see {@link OidcOptions.holdDeadline}).
 *
 * @throws {AuthenticationError} (rejection) as the mechanism's authentication does.
 *
 * Source: auth spec, "Reauthentication".
 */
export type Reauthenticate = (run: RunCommand, signal?: AbortSignal, remainingMS?: () => number, holdDeadline?: () => () => void) => Promise<void>;

/**
 * The `remainingMS` of {@link authenticate} and {@link Reauthenticate} for a deadline of `timeoutMS` (ms) counted from
 * now: a function giving the time it has left, in ms (on `performance.now()`, the clock of Node's timers; negative
 * once passed); undefined when `timeoutMS` is 0 (no deadline: a MONGODB-OIDC callback then gets its 60000 ms).
 *
 * Source: auth spec, "OIDC Callback" (the callback's timeout is what connectTimeoutMS or timeoutMS has left).
 */
export function remainingOf(timeoutMS: number): (() => number) | undefined {
  if (timeoutMS <= 0) return undefined;
  const started = performance.now();
  return () => timeoutMS - (performance.now() - started);
}

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
 * The first message a handshake carries as `speculativeAuthenticate`: for MONGODB-X509 its `authenticate` command;
 * none for PLAIN (the handshake spec lists no speculative form of it, and a mongod refuses a plaintext mechanism
 * there); for MONGODB-OIDC the one-step saslStart with the cached access token, none when no token is cached (nor,
 * with the human workflow, for a `host` its ALLOWED_HOSTS does not match: the token is not sent there);
 * otherwise the saslStart (with a fresh client nonce: one per connection) with the credentials' mechanism, or
 * SCRAM-SHA-256 when the mechanism is negotiated. Undefined when the password cannot be prepared with SASLprep for
 * SCRAM-SHA-256: that conversation could never finish, and a negotiated SCRAM-SHA-1 (which does not SASLprep) may
 * still authenticate.
 *
 * Source: handshake spec, "Speculative Authentication" (SCRAM-SHA-256 when no mechanism is given, and the saslStart
 * fields plus `db`; for MONGODB-X509 the conversation's command; nothing for other mechanisms); auth spec,
 * "SCRAM-SHA-256" (passwords are SASLprep'd).
 */
export function speculativeStart(credentials: MongoCredentials, host?: string): SpeculativeStart | undefined {
  const mechanism = credentials.mechanism ?? 'SCRAM-SHA-256';
  // Handshake spec, "Speculative Authentication": only MONGODB-X509, SCRAM and MONGODB-OIDC are speculative.
  if (mechanism === 'PLAIN' || mechanism === 'MONGODB-AWS') return undefined;
  if (mechanism === 'MONGODB-OIDC') return oidcSpeculativeStart(credentials, host);
  if (mechanism === 'MONGODB-X509') return { mechanism, speculativeAuthenticate: x509Command(credentials) };
  try {
    // SCRAM credentials always have both (see MongoCredentials).
    scramPassword(mechanism, credentials.username!, credentials.password!);
  } catch {
    return undefined;
  }
  return scramStart(credentials, mechanism);
}

/**
 * Authenticates a connection whose handshake returned `handshakeReply`, sending commands with `run`. When the
 * handshake carried `speculative` ({@link speculativeStart}) and its reply has a `speculativeAuthenticate` document
 * for the mechanism selected, the conversation goes on from that document (SCRAM: saslContinue; MONGODB-X509: done);
 * otherwise (an older server, or one that did not take the speculative message) the whole conversation runs. PLAIN
 * is never speculative: its one saslStart is sent ({@link plainAuthenticate}). MONGODB-OIDC: see
 * {@link oidcAuthenticate}; it resolves to the connection's {@link Reauthenticate} (the other mechanisms to
 * undefined: the server never asks them to reauthenticate). The key
 * derivation runs off the event loop; `signal` ends the conversation (see {@link scramAuthenticate},
 * {@link x509Authenticate}); `remainingMS` gives the time left, in ms, to the deadline it aborts at (connectTimeoutMS),
 * which bounds a MONGODB-OIDC callback's `timeoutMS` (undefined: no deadline, 60000; human callback 300000, not
 * bounded by it when `holdDeadline` is given); `host`,
 * the host connected to (no port), is what MONGODB-OIDC's human workflow checks against `ALLOWED_HOSTS`;
 * `holdDeadline` holds that deadline while MONGODB-OIDC's human callback runs (see {@link OidcOptions.holdDeadline}).
 *
 * @throws {AuthenticationError} (rejection) when authentication fails, including an iteration count outside 4096 to
 *   1,000,000 (see {@link scramAuthenticate}), a certificate subject no user has (see {@link x509Authenticate}) and
 *   a PLAIN user name or password the server refuses (see {@link plainAuthenticate}); an OidcHostNotAllowedError
 *   (an AuthenticationError) for a `host` the human workflow's ALLOWED_HOSTS does not match, before anything is sent.
 * @throws `signal.reason` (rejection) once `signal` aborts.
 *
 * Source: auth spec, "Authentication Handshake", "Mechanism Negotiation via Handshake"; handshake spec, "Speculative
 * Authentication" (go on with the next step when answered; without a reply, the standard conversation).
 */
export function authenticate(
  run: RunCommand,
  credentials: MongoCredentials,
  handshakeReply: Document,
  signal?: AbortSignal,
  speculative?: SpeculativeStart,
  remainingMS?: () => number,
  host?: string,
  holdDeadline?: () => () => void,
): Promise<Reauthenticate | undefined> {
  const mechanism = selectMechanism(credentials, handshakeReply);
  const speculativeReply: unknown = handshakeReply.speculativeAuthenticate;
  const answered = speculative !== undefined && speculativeReply !== undefined && speculative.mechanism === mechanism;
  if (mechanism === 'PLAIN') return plainAuthenticate(run, credentials, { signal }).then(() => undefined);
  if (mechanism === 'MONGODB-OIDC') {
    const speculativeToken = answered && 'token' in speculative ? speculative.token : undefined;
    return oidcAuthenticate(run, credentials, { signal, remainingMS, speculativeToken, speculativeReply: answered ? speculativeReply : undefined, host, holdDeadline }).then((first) => {
      // The Connection Cache: the token this connection authenticated with, replaced by each reauthentication.
      let token = first;
      return async (again: RunCommand, reauthSignal?: AbortSignal, reauthRemainingMS?: () => number, reauthHold?: () => () => void) => {
        token = await oidcReauthenticate(again, credentials, token, reauthSignal, reauthRemainingMS, host, reauthHold);
      };
    });
  }
  if (mechanism === 'MONGODB-X509') return x509Authenticate(run, credentials, { signal, speculativeReply: answered ? speculativeReply : undefined }).then(() => undefined);
  if (mechanism === 'MONGODB-AWS') return awsAuthenticate(run, credentials, { signal }).then(() => undefined);
  // A speculative answer for another mechanism than the one selected (SCRAM-SHA-256 tried, SCRAM-SHA-1 negotiated)
  // is not used: the mechanism is the one the default rules select.
  if (answered && 'clientNonce' in speculative) {
    return scramAuthenticate(run, credentials, mechanism, { signal, clientNonce: speculative.clientNonce, speculativeReply }).then(() => undefined);
  }
  return scramAuthenticate(run, credentials, mechanism, { signal }).then(() => undefined);
}
