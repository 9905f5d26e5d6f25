import { Binary, type Document } from 'bson';
import { MongoServerError } from '../errors';
import type { RunCommand } from './scram';

/**
 * `run`, whose MongoServerError rejections are rebuilt from their reply with every occurrence of `secret` in its
 * strings, keys and binary values (at any depth of documents and arrays) replaced by `shown`: a mechanism that sends
 * a secret to the server (PLAIN's password, MONGODB-OIDC's access token, MONGODB-AWS's session token) must not let a
 * server or proxy that quotes what it was sent (as text, or the payload itself as BinData) carry it into errors,
 * events and logs. Other rejections, and refusals that do not quote it, pass as they are; `secret` empty: `run`
 * itself. A reply too deep to search (nested beyond the call stack) is rebuilt from its `code`, `codeName` and
 * `errmsg` alone, the last redacted.
 *
 * @throws what `run` throws, so redacted.
 *
 * Source: extension (the auth spec does not say how a quoted secret is hidden).
 */
export function withoutEcho(run: RunCommand, secret: string, shown: string): RunCommand {
  if (secret === '') return run;
  return async (db, command) => {
    try {
      return await run(db, command);
    } catch (error) {
      if (!(error instanceof MongoServerError)) throw error;
      const reply = error.response;
      try {
        if (!quotes(reply, secret)) throw error;
        throw new MongoServerError(redacted(reply, secret, shown) as Record<string, unknown>);
      } catch (rebuilt) {
        if (!(rebuilt instanceof RangeError)) throw rebuilt;
        const { code, codeName, errmsg } = reply;
        throw new MongoServerError({ ok: 0, code, codeName, errmsg: typeof errmsg === 'string' ? redacted(errmsg, secret, shown) : errmsg });
      }
    }
  };
}

/**
 * `reply` (a server's reply document) with every occurrence of `secret` in its strings, keys and binary values (at any
 * depth of documents and arrays) replaced by `shown`, as {@link withoutEcho} rebuilds a refusal: `reply` itself when it
 * quotes none, or `secret` is empty; otherwise a copy (`reply` is left as it is).
 *
 * @throws {RangeError} for a reply nested too deep to search (beyond the call stack).
 *
 * Source: extension (the auth spec does not say how a quoted secret is hidden).
 */
export function withoutSecret(reply: Document, secret: string, shown: string): Document {
  if (secret === '' || !quotes(reply, secret)) return reply;
  return redacted(reply, secret, shown) as Document;
}

/** The bytes of a BSON Binary (up to its `position`, a view, not a copy); none for another value. */
export function binaryBytes(value: unknown): Buffer {
  if (!(value instanceof Binary)) return Buffer.alloc(0);
  return Buffer.from(value.buffer.buffer, value.buffer.byteOffset, value.position);
}

/** Whether a string, key or binary value of `value` (a reply, at any depth) holds `secret` (its UTF-8 bytes for binary). */
function quotes(value: unknown, secret: string): boolean {
  if (typeof value === 'string') return value.includes(secret);
  if (value instanceof Binary) return binaryBytes(value).includes(secret, 0, 'utf8');
  if (Array.isArray(value)) return value.some((v) => quotes(v, secret));
  if (isDocument(value)) return Object.entries(value).some(([k, v]) => k.includes(secret) || quotes(v, secret));
  return false;
}

/**
 * `value` with `secret` replaced by `shown` in each of its strings and keys, and in the bytes of each Binary (as
 * UTF-8, the bytes sent, e.g. an echoed payload; the Binary keeps its subtype); values of other kinds are kept.
 */
function redacted(value: unknown, secret: string, shown: string): unknown {
  if (typeof value === 'string') return value.split(secret).join(shown);
  if (value instanceof Binary) {
    const bytes = binaryBytes(value);
    const needle = Buffer.from(secret, 'utf8');
    if (needle.length === 0) return value;
    const parts: Buffer[] = [];
    let from = 0;
    for (let at = bytes.indexOf(needle); at >= 0; at = bytes.indexOf(needle, from)) {
      parts.push(bytes.subarray(from, at), Buffer.from(shown, 'utf8'));
      from = at + needle.length;
    }
    return from === 0 ? value : new Binary(Buffer.concat([...parts, bytes.subarray(from)]), value.sub_type);
  }
  if (Array.isArray(value)) return value.map((v) => redacted(v, secret, shown));
  if (isDocument(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [redacted(k, secret, shown), redacted(v, secret, shown)]));
  return value;
}

/** A plain document of a reply (not a BSON value such as a Binary or an ObjectId). */
function isDocument(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object') return false;
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}
