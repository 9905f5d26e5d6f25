/**
 * SCRAM-SHA-1 and SCRAM-SHA-256 over MongoDB's SASL commands (saslStart / saslContinue), client side, plus the
 * primitives the embedded endpoint's server side shares.
 *
 * Source: auth spec, "SCRAM-SHA-1", "SCRAM-SHA-256" (RFC 5802, RFC 7677); `@mongodb-js/saslprep` for SASLprep.
 */
import { createHash, createHmac, pbkdf2, pbkdf2Sync, randomBytes, timingSafeEqual } from 'node:crypto';
import { Binary, type Document } from 'bson';
import { saslprepFunction } from '../lazy-dependencies';
import { AuthenticationError, MongoServerError, WireProtocolError } from '../errors';
import { optionValue } from '../options';
import type { MongoCredentials, ScramMechanism } from './credentials';

/** The smallest iteration count a client accepts (auth spec: MUST enforce 4096). */
export const MIN_ITERATIONS = 4096;

/**
 * The largest iteration count a client accepts: 1,000,000. A server asking for more fails authentication with an
 * {@link AuthenticationError} naming the count asked and this limit, before any key derivation starts.
 *
 * Why a ceiling: RFC 5802, section 9, warns that a hostile server can mount a computational denial-of-service attack
 * on clients by sending a big iteration count; the auth spec sets only the minimum. Why this value: MongoDB derives
 * new users' keys with `scramIterationCount` (SCRAM-SHA-1, default 10,000) and `scramSHA256IterationCount`
 * (SCRAM-SHA-256, default 15,000), both at least 5,000 and with no upper bound but the 32-bit integer; the highest
 * count an administrator is likely to choose is OWASP's PBKDF2-HMAC-SHA256 recommendation of 600,000. The ceiling is
 * above that and 66 times the SCRAM-SHA-256 default, so no real deployment meets it, and it bounds one derivation to
 * about 0.3 s of one libuv threadpool thread on a current x86-64 core (never the event loop), well inside the default
 * connectTimeoutMS of 10 s. Other clients bound it too: node-postgres and pgjdbc refuse more than 100,000 by default.
 *
 * Source: extension (RFC 5802, section 9, "Security Considerations"; MongoDB server parameters
 * `scramIterationCount` and `scramSHA256IterationCount`; OWASP Password Storage Cheat Sheet, PBKDF2).
 */
export const MAX_ITERATIONS = 1_000_000;

/** Hash parameters of a SCRAM mechanism. */
export function scramHash(mechanism: ScramMechanism): { algorithm: 'sha1' | 'sha256'; length: number } {
  return mechanism === 'SCRAM-SHA-256' ? { algorithm: 'sha256', length: 32 } : { algorithm: 'sha1', length: 20 };
}

/**
 * The password SCRAM hashes: MongoDB's MD5 digest for SCRAM-SHA-1, the SASLprep'd password for SCRAM-SHA-256.
 *
 * @throws {Error} (from `@mongodb-js/saslprep`) for SCRAM-SHA-256 when SASLprep refuses the password (a prohibited
 *   character, an unassigned code point, misplaced bidirectional characters); its message names the rule, not the
 *   password. {@link scramAuthenticate} turns it into an AuthenticationError.
 */
export function scramPassword(mechanism: ScramMechanism, username: string, password: string): string {
  if (mechanism === 'SCRAM-SHA-1') return createHash('md5').update(`${username}:mongo:${password}`, 'utf8').digest('hex');
  return saslprepFunction()(password);
}

/**
 * Hi() of RFC 5802 (PBKDF2 with the mechanism's HMAC), computed synchronously: it blocks the event loop for the whole
 * derivation, so clients use {@link saltPasswordAsync}; the embedded endpoint's server side uses this one.
 *
 * Returns the salted password: 20 bytes for SCRAM-SHA-1, 32 for SCRAM-SHA-256.
 *
 * Source: auth spec, "SCRAM-SHA-1", "SCRAM-SHA-256" (RFC 5802, section 2.2, Hi()).
 */
export function saltPassword(mechanism: ScramMechanism, password: string, salt: Buffer, iterations: number): Buffer {
  const { algorithm, length } = scramHash(mechanism);
  return pbkdf2Sync(password, salt, iterations, length, algorithm);
}

/**
 * Hi() of RFC 5802 (PBKDF2 with the mechanism's HMAC), computed on the libuv threadpool (node:crypto `pbkdf2`), so
 * the event loop keeps running (timers, sockets) during the derivation. A derivation cannot be stopped once started;
 * callers that give up simply ignore its result.
 *
 * Resolves to the salted password: 20 bytes for SCRAM-SHA-1, 32 for SCRAM-SHA-256. Rejects with node:crypto's error
 * when the parameters are invalid.
 *
 * Source: auth spec, "SCRAM-SHA-1", "SCRAM-SHA-256" (RFC 5802, section 2.2, Hi()).
 */
export function saltPasswordAsync(
  mechanism: ScramMechanism,
  password: string,
  salt: Buffer,
  iterations: number,
): Promise<Buffer> {
  const { algorithm, length } = scramHash(mechanism);
  return new Promise((resolve, reject) => {
    pbkdf2(password, salt, iterations, length, algorithm, (error, key) => (error ? reject(error) : resolve(key)));
  });
}

/** HMAC(key, text) with the mechanism's hash. */
export function hmac(mechanism: ScramMechanism, key: Buffer, text: string): Buffer {
  return createHmac(scramHash(mechanism).algorithm, key).update(text, 'utf8').digest();
}

/** H(data) with the mechanism's hash. */
export function hash(mechanism: ScramMechanism, data: Buffer): Buffer {
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

/**
 * Base64 of at least one byte, padded (RFC 5802, section 7: `salt = "s=" base64`; RFC 4648), as a salt must be.
 * Linear in the length of the text.
 */
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{4}|[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)$/;

/**
 * How much of a server's `e=` error text (RFC 5802 server-error) an AuthenticationError message shows: 300
 * characters, then `... (<n> more characters)`. The server chooses its length; a message is read by people and logs.
 *
 * Source: extension.
 */
export const MAX_SERVER_ERROR_CHARS = 300;

/** Runs one command on the connection being authenticated. */
export type RunCommand = (db: string, command: Document) => Promise<Document>;

/**
 * Runs `command` on `db` with `run` as the step `step` of an authentication (its command's name, in messages) and
 * resolves to the reply. The server's refusal (a MongoServerError), and a command that cannot be sent or whose reply
 * cannot be read (a WireProtocolError: the conversation is malformed), go to `fail` with why and the error as cause;
 * any other error (the network's) is thrown as it is.
 */
export async function runStep(run: RunCommand, db: string, command: Document, step: string, fail: (why: string, cause: unknown) => never): Promise<Document> {
  try {
    return await run(db, command);
  } catch (error) {
    if (error instanceof MongoServerError) return fail(error.message, error);
    if (error instanceof WireProtocolError) return fail(`the ${step} failed: ${error.message}`, error);
    throw error;
  }
}

/**
 * Options of {@link scramAuthenticate}.
 *
 * Source: extension (cancellation of an establishment: CMAP spec, "Establishing a Connection"; the fixed nonce
 * reproduces the auth spec's example conversations).
 */
export interface ScramOptions {
  /**
   * Ends the conversation: once aborted, no further command is sent and the returned Promise rejects with
   * `signal.reason` at once, even while the salted password is still being derived (that derivation finishes on the
   * threadpool and only fills the credentials' cache).
   */
  signal?: AbortSignal;
  /** The client nonce, base64. Default: 24 random bytes. */
  clientNonce?: string;
  /**
   * The `speculativeAuthenticate` document of the handshake reply, when the handshake carried the saslStart of
   * {@link scramStart} (with this `clientNonce`) and the server answered it: the conversation goes on from this
   * reply, with no saslStart of its own. It is checked as a saslStart reply is (nonce, salt, iteration count,
   * `conversationId`), and the server signature is verified as usual.
   */
  speculativeReply?: unknown;
}

/**
 * The first message of a SCRAM conversation, made before it is sent: `command` is the saslStart to send, and
 * `speculativeAuthenticate` the same saslStart with the `db` the user is looked up in (the credentials' source), to
 * put in the handshake.
 *
 * Source: auth spec, "SCRAM-SHA-1", "SCRAM-SHA-256" (saslStart); handshake spec, "Speculative Authentication".
 */
export interface ScramStart {
  /** The mechanism of the conversation. */
  readonly mechanism: ScramMechanism;
  /** The client nonce, base64. */
  readonly clientNonce: string;
  /** `{ saslStart: 1, mechanism, payload, autoAuthorize: 1, options: { skipEmptyExchange: true } }`. */
  readonly command: Document;
  /** `command` with `db`: the credentials' source. */
  readonly speculativeAuthenticate: Document;
}

/**
 * The saslStart of a SCRAM conversation with `mechanism` as `credentials` (client-first message
 * `n,,n=<user>,r=<nonce>`, the user name escaped, never SASLprep'd), for a saslStart command or the handshake's
 * `speculativeAuthenticate`.
 * Nothing is checked here: {@link scramAuthenticate} refuses a password SASLprep refuses before it sends anything.
 *
 * @param clientNonce the client nonce, base64 (default: 24 random bytes).
 *
 * Source: auth spec, "SCRAM-SHA-1", "SCRAM-SHA-256" ("Conversation", skipEmptyExchange); handshake spec,
 * "Speculative Authentication" (the saslStart fields plus `db`).
 */
export function scramStart(
  credentials: MongoCredentials,
  mechanism: ScramMechanism,
  clientNonce: string = newClientNonce(),
): ScramStart {
  const command: Document = {
    saslStart: 1,
    mechanism,
    payload: new Binary(Buffer.from(`n,,${clientFirstBare(credentials, clientNonce)}`, 'utf8')),
    autoAuthorize: 1,
    options: { skipEmptyExchange: true },
  };
  return { mechanism, clientNonce, command, speculativeAuthenticate: { ...command, db: credentials.source } };
}

/** A fresh client nonce: 24 random bytes, base64. */
function newClientNonce(): string {
  return randomBytes(24).toString('base64');
}

/** The client-first message without its GS2 header. */
function clientFirstBare(credentials: MongoCredentials, clientNonce: string): string {
  // SCRAM credentials always have a user name (see MongoCredentials); scramAuthenticate refuses others first.
  return `n=${escapeUsername(credentials.username!)},r=${clientNonce}`;
}

/**
 * Authenticates with SCRAM (`mechanism`) as `credentials`, using `run` to send saslStart/saslContinue to the
 * credentials' source database; with `options.speculativeReply`, the handshake already carried the saslStart and the
 * conversation goes on from the server's answer to it (one round trip fewer). The salted password is derived off
 * the event loop ({@link saltPasswordAsync}) and cached in `credentials` per mechanism, salt and iteration count;
 * concurrent conversations that need the same one share a single derivation.
 *
 * @throws {AuthenticationError} (rejection) when the credentials have no user name or password (MONGODB-X509 ones,
 *   nothing sent), the password cannot be prepared with SASLprep for SCRAM-SHA-256 (a
 *   prohibited character, say: refused before anything is sent, the message naming the SASLprep rule broken), the
 *   server rejects the credentials (cause: its error), sends a malformed or inconsistent message (a first reply
 *   without a numeric `conversationId`, a `speculativeReply` that is not a document, a nonce that does not extend the
 *   client nonce), an iteration count below {@link MIN_ITERATIONS} (4096) or above {@link MAX_ITERATIONS}
 *   (1,000,000), a message to send that the server could not take (a server nonce so long that the client-final
 *   message exceeds maxBsonObjectSize: cause the WireProtocolError, nothing sent), a reply holding a value that cannot
 *   be read (a string that is not valid UTF-8: cause the WireProtocolError), an `e=` server error (its text cut
 *   to {@link MAX_SERVER_ERROR_CHARS}), or a server signature that does not verify. A server-first message with a
 *   mandatory extension (`m=`, RFC 5802 section 5.1) or a salt that is not padded base64 of at least one byte is
 *   refused before any key is derived or proof sent. Messages name the user, source and mechanism, never the
 *   password.
 * @throws `options.signal.reason` (rejection) once the signal aborts.
 *
 * Source: auth spec, "SCRAM-SHA-1", "SCRAM-SHA-256" (including the minimum iteration count and the MUST-cache of
 * "Caching credentials in SCRAM"); handshake spec, "Speculative Authentication"; the maximum iteration count is an
 * extension (see {@link MAX_ITERATIONS}).
 */
export async function scramAuthenticate(
  run: RunCommand,
  credentials: MongoCredentials,
  mechanism: ScramMechanism,
  options: ScramOptions = {},
): Promise<void> {
  // Read as optionValue reads options: a clientNonce or speculativeReply found only on Object.prototype (polluted by
  // a bug elsewhere in the application) would make the nonce fixed and known, or start from a reply nobody sent.
  const signal = optionValue(options, 'signal');
  const clientNonce = optionValue(options, 'clientNonce') ?? newClientNonce();
  const speculativeReply = optionValue(options, 'speculativeReply');
  const who = `${credentials.username === undefined ? 'no user name' : `user "${credentials.username}"`} on "${credentials.source}" with ${mechanism}`;
  const fail = (why: string, cause?: unknown): never => {
    throw new AuthenticationError(`Authentication failed for ${who}: ${why}`, cause);
  };
  const send = (command: Document): Promise<Document> => {
    signal?.throwIfAborted();
    // A command the server could not take (its proof grown past maxBsonObjectSize by a server nonce of megabytes) fails
    // the conversation as a refusal does.
    return runStep(run, credentials.source, command, Object.keys(command)[0], fail);
  };

  // Prepared before anything is sent: a password SASLprep refuses could never authenticate. Its error names the
  // rule broken (RFC 4013), never the password.
  const { username, password: clearPassword } = credentials;
  if (username === undefined || clearPassword === undefined) return fail('SCRAM needs a user name and a password, and these credentials have none (they are for MONGODB-X509)');
  let password: string;
  try {
    password = scramPassword(mechanism, username, clearPassword);
  } catch (error) {
    return fail(`the password cannot be prepared with SASLprep (RFC 4013), as ${mechanism} requires: ${(error as Error).message}`);
  }

  const firstBare = clientFirstBare(credentials, clientNonce);
  let first: Document;
  if (speculativeReply === undefined) {
    first = await send(scramStart(credentials, mechanism, clientNonce).command);
  } else {
    signal?.throwIfAborted();
    if (speculativeReply === null || typeof speculativeReply !== 'object' || Array.isArray(speculativeReply)) {
      return fail('the speculativeAuthenticate of the handshake reply is not a document');
    }
    first = speculativeReply as Document;
  }
  if (typeof first.conversationId !== 'number') fail('the server\'s first SASL reply has no conversationId');
  const serverFirst = payloadText(first);
  const attrs = parseAttributes(serverFirst);
  if (attrs.has('m')) {
    fail('the server-first message has a mandatory extension (m=), which this client does not support (RFC 5802, section 5.1)');
  }
  const nonce = attrs.get('r');
  const saltText = attrs.get('s');
  const iterationsText = attrs.get('i') ?? '';
  if (!nonce || !nonce.startsWith(clientNonce) || nonce.length <= clientNonce.length) fail('the server nonce does not extend the client nonce');
  if (!saltText) fail('the server sent no salt');
  if (!BASE64.test(saltText!)) {
    const shown = saltText!.length > 20 ? `${saltText!.slice(0, 20)}...` : saltText!;
    fail(`the server sent a salt that is not base64: ${JSON.stringify(shown)} (a salt is base64 of at least one byte, padded)`);
  }
  // The count as the server wrote it (at most 20 characters of it), for messages.
  const asked = iterationsText.length > 20 ? `${iterationsText.slice(0, 20)}...` : iterationsText;
  if (!/^[0-9]+$/.test(iterationsText)) fail(`the server sent an invalid iteration count "${asked}"`);
  const iterations = Number(iterationsText);
  if (iterations < MIN_ITERATIONS) {
    fail(`the server asked for ${asked} iterations, fewer than the minimum ${MIN_ITERATIONS}`);
  }
  if (iterations > MAX_ITERATIONS) {
    fail(`the server asked for ${asked} iterations, more than the maximum ${MAX_ITERATIONS}`);
  }
  signal?.throwIfAborted();

  const salted = await unlessAborted(
    // The salt enters the key as its digest: the server chooses the salt's length, and the key outlives the conversation.
    credentials.saltedPassword(`${mechanism}:${createHash('sha256').update(saltText!).digest('base64')}:${iterations}`, () =>
      saltPasswordAsync(mechanism, password, Buffer.from(saltText!, 'base64'), iterations),
    ),
    signal,
  );
  const clientKey = hmac(mechanism, salted, 'Client Key');
  const serverKey = hmac(mechanism, salted, 'Server Key');
  const storedKey = hash(mechanism, clientKey);
  const clientFinalWithoutProof = `c=biws,r=${nonce}`;
  const authMessage = `${firstBare},${serverFirst},${clientFinalWithoutProof}`;
  const proof = xor(clientKey, hmac(mechanism, storedKey, authMessage)).toString('base64');

  let reply = await send({
    saslContinue: 1,
    conversationId: first.conversationId,
    payload: new Binary(Buffer.from(`${clientFinalWithoutProof},p=${proof}`, 'utf8')),
  });
  const final = parseAttributes(payloadText(reply));
  if (final.has('e')) {
    const said = final.get('e')!;
    const over = said.length - MAX_SERVER_ERROR_CHARS;
    fail(`the server said: ${over > 0 ? `${said.slice(0, MAX_SERVER_ERROR_CHARS)}... (${over} more characters)` : said}`);
  }
  const expected = hmac(mechanism, serverKey, authMessage);
  const given = Buffer.from(final.get('v') ?? '', 'base64');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) fail('the server signature does not verify');
  // Servers that ignore skipEmptyExchange need one more, empty, round trip; a server that goes on asking is refused.
  if (reply.done !== true) {
    reply = await send({ saslContinue: 1, conversationId: reply.conversationId, payload: new Binary(Buffer.alloc(0)) });
    if (reply.done !== true) fail('the server did not end the conversation after the empty round trip that may follow its signature');
  }
}

/** `work`, or a rejection with `signal.reason` as soon as `signal` aborts (`work` itself goes on, unobserved here). */
function unlessAborted<T>(work: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return work;
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    const settle = <V>(then: (value: V) => void) => (value: V): void => {
      signal.removeEventListener('abort', onAbort);
      then(value);
    };
    work.then(settle(resolve), settle(reject));
    if (signal.aborted) onAbort();
  });
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
