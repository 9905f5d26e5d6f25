/**
 * The hello reply a connection keeps for life (`Connection.hello`): the handshake reply without what only the
 * handshake's authentication reads, which reads the reply as the server sent it.
 */
import type { Document } from 'bson';
import { withoutSecret } from '../auth/without-echo';

/** What a quoted MONGODB-OIDC access token is replaced with in a kept hello reply. */
export const ACCESS_TOKEN_NOT_SHOWN = '<access token not shown>';

/**
 * The handshake reply `reply` as a connection keeps it: without `speculativeAuthenticate` (the first reply of a
 * speculative authentication, which the authentication reads from `reply` itself, and which a server may fill with
 * what it was sent), and, when the handshake carried a MONGODB-OIDC access token (`accessToken`), with every other
 * quotation of that token (in a string, key or binary value, at any depth) replaced by `<access token not shown>`.
 * `reply` itself when there is nothing to take out; a copy otherwise (`reply` is left as it is, for the
 * authentication).
 *
 * @throws {RangeError} for a reply quoting the token nested too deep to search (beyond the call stack).
 *
 * Source: handshake spec, "Speculative Authentication"; extension: no credential in an exposed object (command
 * logging and monitoring spec, "Security", for the commands and replies it covers; the auth spec says nothing of it).
 */
export function keptHelloReply(reply: Document, accessToken?: string): Document {
  let kept = reply;
  if (Object.hasOwn(reply, 'speculativeAuthenticate')) {
    const { speculativeAuthenticate: _used, ...rest } = reply;
    kept = rest;
  }
  return accessToken === undefined ? kept : withoutSecret(kept, accessToken, ACCESS_TOKEN_NOT_SHOWN);
}
