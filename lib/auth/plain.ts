/**
 * PLAIN (RFC 4616): the user name and password, in clear text, in one saslStart; MongoDB checks them against an LDAP
 * server (Enterprise, Atlas) for users of `$external`. One round trip, never speculative: the handshake spec lists
 * the mechanisms a hello may carry, and PLAIN is not one of them (a mongod refuses a plaintext mechanism there).
 *
 * Source: auth spec, "PLAIN", "SASL Mechanisms"; handshake spec, "Speculative Authentication".
 */
import { Binary, type Document } from 'bson';
import { AuthenticationError } from '../errors';
import { optionValue } from '../options';
import type { MongoCredentials } from './credentials';
import { runStep, type RunCommand } from './scram';
import { withoutEcho } from './without-echo';

/**
 * The saslStart of PLAIN: `{ saslStart: 1, mechanism: 'PLAIN', payload, autoAuthorize: 1 }`, where `payload` is the
 * bytes `\0<username>\0<password>` (UTF-8; no authorization identity, the first form the auth spec shows), the user
 * name and password as given (no SASLprep). The document holds the password: it is sent, never shown.
 *
 * @throws {AuthenticationError} for credentials without a user name or password (MONGODB-X509 ones), which PLAIN
 *   cannot send; the message shows neither.
 *
 * Source: auth spec, "PLAIN" ("Conversation"), "SASL Mechanisms" (`autoAuthorize: 1`); RFC 4616, section 2.
 */
export function plainCommand(credentials: MongoCredentials): Document {
  const { username, password } = credentials;
  if (username === undefined || password === undefined) {
    throw new AuthenticationError(`Authentication failed on "${credentials.source}" with PLAIN: PLAIN needs a user name and a password, and these credentials have none (they are for MONGODB-X509)`);
  }
  return { saslStart: 1, mechanism: 'PLAIN', payload: new Binary(Buffer.from(`\0${username}\0${password}`, 'utf8')), autoAuthorize: 1 };
}

/** Options of {@link plainAuthenticate}. */
export interface PlainOptions {
  /** Ends the authentication: once aborted, the command is not sent and the Promise rejects with `signal.reason`. */
  signal?: AbortSignal | undefined;
}

/**
 * Authenticates with PLAIN as `credentials`, sending {@link plainCommand} to the credentials' source (`$external`
 * unless given) with `run`. A reply that does not say `done: true` fails: PLAIN has one step, and a server that asks
 * for more is not a MongoDB server speaking PLAIN.
 *
 * @throws {AuthenticationError} (rejection) when the credentials have no user name or password (nothing sent), when
 *   the server refuses (cause: its error; AuthenticationFailed, 18, "Authentication failed." for a wrong password or
 *   an unknown user; MechanismUnavailable, 334, where PLAIN is not enabled for that database), when the command cannot
 *   be sent or its reply read (cause: the WireProtocolError), or when the reply does not end the conversation.
 *   Messages name the user, source and mechanism, never the password: a refusal whose reply quotes the password
 *   (the server received it in clear) has each occurrence replaced by `<password not shown>`, in its message and in
 *   its cause (a MongoServerError of the reply so redacted).
 * @throws `options.signal.reason` (rejection) once the signal aborts.
 *
 * Source: auth spec, "PLAIN" ("Conversation"), "SASL Mechanisms" (continue while `done` is false: PLAIN never is).
 */
export async function plainAuthenticate(run: RunCommand, credentials: MongoCredentials, options: PlainOptions = {}): Promise<void> {
  const signal = optionValue(options, 'signal');
  const who = `${credentials.username === undefined ? 'no user name' : `user "${credentials.username}"`} on "${credentials.source}" with PLAIN`;
  const fail = (why: string, cause?: unknown): never => {
    throw new AuthenticationError(`Authentication failed for ${who}: ${why}`, cause);
  };
  signal?.throwIfAborted();
  const command = plainCommand(credentials);
  const reply = await runStep(withoutEcho(run, credentials.password!, PASSWORD_NOT_SHOWN), credentials.source, command, 'saslStart', fail);
  if (reply.done !== true) fail('the server did not end the conversation after the saslStart (PLAIN has one step)');
}

/** What a server's refusal shows in place of the password it quotes. */
const PASSWORD_NOT_SHOWN = '<password not shown>';
