/**
 * SCRAM-SHA-1 and SCRAM-SHA-256 over MongoDB's SASL commands (saslStart / saslContinue), client side, plus the
 * primitives the embedded endpoint's server side shares.
 *
 * Source: auth spec, "SCRAM-SHA-1", "SCRAM-SHA-256" (RFC 5802, RFC 7677); `@mongodb-js/saslprep` for SASLprep.
 */
import { createHash, createHmac, pbkdf2Sync, randomBytes, timingSafeEqual } from 'node:crypto';
import { Binary, type Document } from 'bson';
import { saslprep } from '@mongodb-js/saslprep';
import { AuthenticationError, MongoServerError } from '../errors';
import type { AuthMechanism, MongoCredentials } from './credentials';

/** The smallest iteration count a client accepts (auth spec: MUST enforce 4096). */
export const MIN_ITERATIONS = 4096;

/** Hash parameters of a SCRAM mechanism. */
export function scramHash(mechanism: AuthMechanism): { algorithm: 'sha1' | 'sha256'; length: number } {
  return mechanism === 'SCRAM-SHA-256' ? { algorithm: 'sha256', length: 32 } : { algorithm: 'sha1', length: 20 };
}

/** The password SCRAM hashes: MongoDB's MD5 digest for SCRAM-SHA-1, the SASLprep'd password for SCRAM-SHA-256. */
export function scramPassword(mechanism: AuthMechanism, username: string, password: string): string {
  if (mechanism === 'SCRAM-SHA-1') return createHash('md5').update(`${username}:mongo:${password}`, 'utf8').digest('hex');
  return saslprep(password);
}

/** Hi() of RFC 5802: PBKDF2 with HMAC. */
export function saltPassword(mechanism: AuthMechanism, password: string, salt: Buffer, iterations: number): Buffer {
  const { algorithm, length } = scramHash(mechanism);
  return pbkdf2Sync(password, salt, iterations, length, algorithm);
}

/** HMAC(key, text) with the mechanism's hash. */
export function hmac(mechanism: AuthMechanism, key: Buffer, text: string): Buffer {
  return createHmac(scramHash(mechanism).algorithm, key).update(text, 'utf8').digest();
}

/** H(data) with the mechanism's hash. */
export function hash(mechanism: AuthMechanism, data: Buffer): Buffer {
  return createHash(scramHash(mechanism).algorithm).update(data).digest();
}

/** XOR of two equal-length buffers. */
export function xor(a: Buffer, b: Buffer): Buffer {
  const out = Buffer.alloc(a.length);
  for (let i = 0; i < a.length; i++) out[i] = a[i] ^ b[i];
  return out;
}

/** Escapes a SCRAM username: `=` → `=3D`, `,` → `=2C`. */
export function escapeUsername(username: string): string {
  return username.replace(/=/g, '=3D').replace(/,/g, '=2C');
}

/** Parses `k=v,k=v` SCRAM attributes (values may contain `=`). */
export function parseAttributes(message: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const part of message.split(',')) {
    const eq = part.indexOf('=');
    if (eq > 0) out.set(part.slice(0, eq), part.slice(eq + 1));
  }
  return out;
}

/** Runs one command on the connection being authenticated. */
export type RunCommand = (db: string, command: Document) => Promise<Document>;

/**
 * Authenticates with SCRAM (`mechanism`) as `credentials`, using `run` to send saslStart/saslContinue to the
 * credentials' source database.
 *
 * @throws {AuthenticationError} when the server rejects the credentials (cause: its error), sends a malformed or
 *   inconsistent message, an iteration count below 4096, or a server signature that does not verify.
 */
export async function scramAuthenticate(
  run: RunCommand,
  credentials: MongoCredentials,
  mechanism: AuthMechanism,
  clientNonce: string = randomBytes(24).toString('base64'),
): Promise<void> {
  const who = `user "${credentials.username}" on "${credentials.source}" with ${mechanism}`;
  const fail = (why: string, cause?: unknown): never => {
    throw new AuthenticationError(`Authentication failed for ${who}: ${why}`, cause);
  };
  const send = async (command: Document): Promise<Document> => {
    try {
      return await run(credentials.source, command);
    } catch (error) {
      if (error instanceof MongoServerError) return fail(error.message, error);
      throw error;
    }
  };

  const clientFirstBare = `n=${escapeUsername(credentials.username)},r=${clientNonce}`;
  const first = await send({
    saslStart: 1,
    mechanism,
    payload: new Binary(Buffer.from(`n,,${clientFirstBare}`, 'utf8')),
    autoAuthorize: 1,
    options: { skipEmptyExchange: true },
  });
  const serverFirst = payloadText(first);
  const attrs = parseAttributes(serverFirst);
  const nonce = attrs.get('r');
  const saltText = attrs.get('s');
  const iterations = Number(attrs.get('i'));
  if (!nonce || !nonce.startsWith(clientNonce) || nonce.length <= clientNonce.length) fail('the server nonce does not extend the client nonce');
  if (!saltText) fail('the server sent no salt');
  if (!Number.isInteger(iterations) || iterations < MIN_ITERATIONS) {
    fail(`the server asked for ${attrs.get('i')} iterations, fewer than the minimum ${MIN_ITERATIONS}`);
  }

  const password = scramPassword(mechanism, credentials.username, credentials.password);
  const salted = credentials.saltedPassword(`${mechanism}:${saltText}:${iterations}`, () =>
    saltPassword(mechanism, password, Buffer.from(saltText!, 'base64'), iterations),
  );
  const clientKey = hmac(mechanism, salted, 'Client Key');
  const serverKey = hmac(mechanism, salted, 'Server Key');
  const storedKey = hash(mechanism, clientKey);
  const clientFinalWithoutProof = `c=biws,r=${nonce}`;
  const authMessage = `${clientFirstBare},${serverFirst},${clientFinalWithoutProof}`;
  const proof = xor(clientKey, hmac(mechanism, storedKey, authMessage)).toString('base64');

  let reply = await send({
    saslContinue: 1,
    conversationId: first.conversationId,
    payload: new Binary(Buffer.from(`${clientFinalWithoutProof},p=${proof}`, 'utf8')),
  });
  const final = parseAttributes(payloadText(reply));
  if (final.has('e')) fail(`the server said: ${final.get('e')}`);
  const expected = hmac(mechanism, serverKey, authMessage);
  const given = Buffer.from(final.get('v') ?? '', 'base64');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) fail('the server signature does not verify');
  // Servers that ignore skipEmptyExchange need one more, empty, round trip.
  while (reply.done !== true) {
    reply = await send({ saslContinue: 1, conversationId: reply.conversationId, payload: new Binary(Buffer.alloc(0)) });
  }
}

/** The text of a SASL `payload` (Binary, bytes or string); undefined when there is none. */
export function saslPayloadText(payload: unknown): string | undefined {
  if (payload instanceof Binary) return Buffer.from(payload.buffer).toString('utf8');
  if (payload instanceof Uint8Array) return Buffer.from(payload).toString('utf8');
  return typeof payload === 'string' ? payload : undefined;
}

function payloadText(reply: Document): string {
  const text = saslPayloadText(reply.payload);
  if (text === undefined) throw new AuthenticationError('Authentication failed: the server reply has no SASL payload');
  return text;
}
