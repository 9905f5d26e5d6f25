/**
 * The server's id for a connection, as a hello reply's `connectionId` gives it.
 */
import { Long } from 'bson';
import { exactNumber } from '../int64';

/**
 * The server's id for a connection read from `value`, a hello reply's `connectionId` as BSON decodes it: an int32, an
 * int64 (a number, or a `Long` when it is beyond 2^53 or decoded without promotion) or a double, holding a
 * non-negative integer up to 2^53 - 1 (`Number.MAX_SAFE_INTEGER`), returned as that number. Anything else is no id a
 * server gives and is `undefined` (absent, as when the reply has none): NaN, ±Infinity, a negative number, a
 * non-integer, an integer beyond 2^53 - 1 (no number holds it exactly), a string, a boolean, null, a document. Never
 * throws.
 *
 * Source: command logging and monitoring spec, "Events API" (`serverConnectionId`: an int64, the `connectionId` of
 * the handshake reply, absent when unknown); server discovery and monitoring logging and monitoring spec ("if
 * known"). The official Node.js driver 7.8 reads it with `BigInt()`, which throws on NaN, Infinity or a non-integer
 * double and so fails the handshake; an id is metadata, so here it is only left out.
 */
export function serverConnectionIdOf(value: unknown): number | undefined {
  const id = Long.isLong(value) ? exactNumber(value) : value;
  return typeof id === 'number' && Number.isSafeInteger(id) && id >= 0 ? id : undefined;
}
