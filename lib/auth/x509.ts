/**
 * MONGODB-X509: authentication by the client certificate a TLS connection presented, whose subject is the user name.
 * One `authenticate` command on `$external`, or none when the handshake carried it as `speculativeAuthenticate` and
 * the server answered it.
 *
 * Source: auth spec, "MONGODB-X509"; handshake spec, "Speculative Authentication".
 */
import type { Document } from 'bson';
import { AuthenticationError } from '../errors';
import { optionValue } from '../options';
import { EXTERNAL_SOURCE, type MongoCredentials } from './credentials';
import { runStep, type RunCommand } from './scram';

/**
 * The `authenticate` command of MONGODB-X509: `{ authenticate: 1, mechanism: 'MONGODB-X509' }`, with `user` only when
 * the credentials have a user name (without one, the server takes the certificate's subject). The handshake carries
 * the same document as its `speculativeAuthenticate`.
 *
 * Source: auth spec, "MONGODB-X509" ("Conversation"; a username MUST be sent when given and MUST NOT be otherwise);
 * handshake spec, "Speculative Authentication" (the same structure as the conversation's command).
 */
export function x509Command(credentials: MongoCredentials): Document {
  const command: Document = { authenticate: 1, mechanism: 'MONGODB-X509' };
  if (credentials.username !== undefined) command.user = credentials.username;
  return command;
}

/** Options of {@link x509Authenticate}. */
export interface X509Options {
  /** Ends the authentication: once aborted, the command is not sent and the Promise rejects with `signal.reason`. */
  signal?: AbortSignal | undefined;
  /**
   * The `speculativeAuthenticate` document of the handshake reply, when the handshake carried {@link x509Command} and
   * the server answered it (`{ dbname: '$external', user }`): the connection is then authenticated, and nothing is
   * sent. Undefined (no answer) runs the conversation.
   */
  speculativeReply?: unknown;
}

/**
 * Authenticates with MONGODB-X509 as `credentials`, sending the `authenticate` command to `$external` with `run`,
 * unless `options.speculativeReply` says the handshake already did.
 *
 * @throws {AuthenticationError} (rejection) when the server refuses (cause: its error; e.g. AuthenticationFailed when
 *   no user of `$external` has the certificate's subject, or the user name given is not that subject; ProtocolError
 *   over a connection without TLS), when the command cannot be sent or its reply read (cause: the WireProtocolError),
 *   or when the handshake's answer is not a document. Messages name the user (or "the client certificate's
 *   subject"), never a key.
 * @throws `options.signal.reason` (rejection) once the signal aborts.
 *
 * Source: auth spec, "MONGODB-X509" ("Conversation"); handshake spec, "Speculative Authentication" (go on from the
 * answer; without one, the standard conversation).
 */
export async function x509Authenticate(run: RunCommand, credentials: MongoCredentials, options: X509Options = {}): Promise<void> {
  const signal = optionValue(options, 'signal');
  const speculativeReply = optionValue(options, 'speculativeReply');
  const who = credentials.username === undefined ? "the client certificate's subject" : `user "${credentials.username}"`;
  const fail = (why: string, cause?: unknown): never => {
    throw new AuthenticationError(`Authentication failed for ${who} on "${EXTERNAL_SOURCE}" with MONGODB-X509: ${why}`, cause);
  };
  signal?.throwIfAborted();
  if (speculativeReply !== undefined) {
    if (speculativeReply === null || typeof speculativeReply !== 'object' || Array.isArray(speculativeReply)) {
      fail('the speculativeAuthenticate of the handshake reply is not a document');
    }
    return;
  }
  await runStep(run, EXTERNAL_SOURCE, x509Command(credentials), 'authenticate command', fail);
}
