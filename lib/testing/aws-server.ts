/**
 * The endpoint's side of MONGODB-AWS (see EmbeddedServerOptions.aws): the server nonce and STS host of the first
 * reply, then, in place of STS, the check of the client's SigV4 signature against the access keys it was given.
 *
 * Source: auth spec, "MONGODB-AWS" ("Conversation"); extension: the signature is verified here, not by STS.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { Binary, deserialize, serialize, type Document } from 'bson';
import { EXTERNAL_SOURCE } from '../auth/credentials';
import { awsRegion, awsSignedRequest, sigV4Authorization } from '../auth/aws';

/** What a mongod answers to every MONGODB-AWS failure: AuthenticationFailed (18). */
export const AWS_FAILED: Document = Object.freeze({ ok: 0, code: 18, codeName: 'AuthenticationFailed', errmsg: 'Authentication failed.' });

/** One connection's conversation between saslStart and saslContinue. */
export interface AwsServerConversation {
  /** The 64-byte server nonce sent. */
  readonly serverNonce: Buffer;
  /** The STS host sent. */
  readonly host: string;
}

function bytes(value: unknown): Buffer | undefined {
  return value instanceof Binary ? Buffer.from(value.buffer.buffer, value.buffer.byteOffset, value.position) : undefined;
}

/**
 * The reply to a MONGODB-AWS saslStart on `db`, or undefined (AuthenticationFailed) for another database than
 * `$external`, a payload that is not `{ r: <32 bytes>, p: 110 or 121 }`.
 */
export function awsServerStart(db: string, command: Document, host: string): { reply: Document; conversation: AwsServerConversation } | undefined {
  if (db !== EXTERNAL_SOURCE) return undefined;
  let payload: Document;
  try {
    payload = deserialize(bytes(command.payload) ?? Buffer.alloc(0));
  } catch {
    return undefined;
  }
  const clientNonce = bytes(payload.r);
  if (clientNonce === undefined || clientNonce.length !== 32 || (payload.p !== 110 && payload.p !== 121)) return undefined;
  const serverNonce = Buffer.concat([clientNonce, randomBytes(32)]);
  return {
    reply: { conversationId: 1, done: false, payload: new Binary(serialize({ s: new Binary(serverNonce), h: host })), ok: 1 },
    conversation: { serverNonce, host },
  };
}

/**
 * Checks a MONGODB-AWS saslContinue as STS would check the request it signs: its `a` must be the Authorization header
 * the listed secret of its access key ID gives for the GetCallerIdentity request with this conversation's nonce and
 * host, its date `d` and session token `t` (which must be the listed one, when one is listed). Returns the user (the
 * key's ARN), or undefined.
 */
export function awsServerContinue(
  conversation: AwsServerConversation,
  command: Document,
  keys: readonly { accessKeyId: string; secretAccessKey: string; sessionToken?: string | undefined; arn?: string | undefined }[],
): string | undefined {
  let payload: Document;
  try {
    payload = deserialize(bytes(command.payload) ?? Buffer.alloc(0));
  } catch {
    return undefined;
  }
  const { a, d, t } = payload;
  if (typeof a !== 'string' || typeof d !== 'string' || (t !== undefined && typeof t !== 'string') || !/^\d{8}T\d{6}Z$/.test(d)) return undefined;
  const match = /^AWS4-HMAC-SHA256 Credential=([^/]+)\//.exec(a);
  const key = match === null ? undefined : keys.find((k) => k.accessKeyId === match[1]);
  if (key === undefined || awsRegion(conversation.host) === undefined) return undefined;
  if ((key.sessionToken ?? undefined) !== (t ?? undefined)) return undefined;
  const expected = Buffer.from(sigV4Authorization(awsSignedRequest(conversation.host, conversation.serverNonce, d, t), key));
  const given = Buffer.from(a);
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined;
  return key.arn ?? `arn:aws:iam::000000000000:user/${key.accessKeyId}`;
}
