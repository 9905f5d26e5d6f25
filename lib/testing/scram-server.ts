/**
 * The server side of SCRAM-SHA-1 and SCRAM-SHA-256 for the embedded endpoint: stored credentials, and the
 * saslStart / saslContinue conversation a mongod runs; and the one saslStart of PLAIN, checked as a mongod whose
 * `authenticationMechanisms` include PLAIN checks it (LDAP for `$external`, the SCRAM credentials elsewhere).
 *
 * Source: auth spec, "SCRAM-SHA-1", "SCRAM-SHA-256" (RFC 5802 / RFC 7677 server steps), "PLAIN" (RFC 4616).
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { Binary, type Document } from 'bson';
import { EXTERNAL_SOURCE, SCRAM_MECHANISMS, type ScramMechanism } from '../auth/credentials';
import { InvalidOptionError } from '../errors';
import { hash, hmac, parseAttributes, saltPassword, saslPayloadText, scramPassword, xor } from '../auth/scram';

/**
 * A user of the embedded endpoint: a SCRAM user, or, in database `$external`, a MONGODB-X509 user (no password: the
 * client certificate's subject is its name, as a mongod's `$external` users are made) or a PLAIN user (its password
 * stands for the one the LDAP server holds for it; its name can be a certificate subject too, as one `$external` user
 * serves both in a mongod). A SCRAM user's salt is drawn
 * (or taken from `salt`) when the user is created: when the endpoint is constructed, or by
 * `EmbeddedServer.setUsers`; its SCRAM keys are derived the first time a client sends a proof for it (synchronously,
 * on the event loop the endpoint shares with its clients), so a user whose iteration count a client refuses costs
 * nothing.
 *
 * Source: auth spec, "SCRAM-SHA-1", "SCRAM-SHA-256" (what a server stores for a user: salt, iteration count, stored
 * and server keys), "MONGODB-X509" (the user is the subject, RFC 2253, in `$external`).
 */
export interface EmbeddedUser {
  /**
   * The user name; for a MONGODB-X509 user, the client certificate's subject as RFC 2253 writes it (as
   * `openssl x509 -subject -nameopt RFC2253` prints it: the most specific attribute first).
   */
  username: string;
  /**
   * The password, in clear text (prepared as each mechanism requires when the user is added). Required for a SCRAM
   * user. In `$external`: the password the LDAP server would check for PLAIN (compared as given, byte for byte); none
   * for a MONGODB-X509 user only.
   */
  password?: string | undefined;
  /**
   * The database that holds the user. Default `admin`; `$external` makes a MONGODB-X509 user, and with a `password` a
   * PLAIN (LDAP) user.
   */
  db?: string | undefined;
  /** The mechanisms the user can authenticate with. Default both, SCRAM-SHA-1 and SCRAM-SHA-256. */
  mechanisms?: ScramMechanism[] | undefined;
  /**
   * The SCRAM iteration count the endpoint asks for (`i=` in its server-first message), for every mechanism of the
   * user: a positive integer. Default: mongod's, 10000 for SCRAM-SHA-1 (`scramIterationCount`) and 15000 for
   * SCRAM-SHA-256 (`scramSHA256IterationCount`). Any positive integer is allowed, including counts a real server
   * refuses (below 5000) and counts a client must refuse (below 4096, or above its maximum: 1,000,000 here), to test
   * clients against them; a count a client accepts costs the endpoint one derivation of that many iterations when
   * the first proof arrives.
   */
  iterations?: number | undefined;
  /**
   * The SCRAM salt (`s=` in its server-first message), for every mechanism of the user: 1 to 1024 bytes. Default: 16
   * random bytes per mechanism, drawn each time the user is created, as createUser does. Give it to reproduce a user
   * exactly (a replicated user, the same after a failover) or to tell two creations of a user apart.
   */
  salt?: Uint8Array | undefined;
}

interface StoredCredential {
  readonly salt: Buffer;
  readonly iterations: number;
  /** StoredKey and ServerKey, derived on first use. */
  keys: () => { readonly storedKey: Buffer; readonly serverKey: Buffer };
}

interface StoredUser {
  readonly username: string;
  readonly db: string;
  readonly credentials: Partial<Record<ScramMechanism, StoredCredential>>;
  /** For a user of `$external` given a password: the password its LDAP server holds, UTF-8. */
  readonly ldapPassword?: Buffer;
}

/** One SASL conversation in progress on a connection. */
export interface ScramConversation {
  readonly mechanism: ScramMechanism;
  readonly user: StoredUser;
  /** The users generation the conversation started in (its salt and keys are that generation's). */
  readonly generation: number;
  readonly clientFirstBare: string;
  readonly serverFirst: string;
  readonly nonce: string;
  readonly skipEmptyExchange: boolean;
  step: 'proof' | 'final';
}

const ITERATIONS: Record<ScramMechanism, number> = { 'SCRAM-SHA-1': 10_000, 'SCRAM-SHA-256': 15_000 };

const authFailed = (): Document => ({ ok: 0, code: 18, codeName: 'AuthenticationFailed', errmsg: 'Authentication failed.' });

/** Counts of the SCRAM conversations of one users generation (`EmbeddedServer.scramConversations`). */
export interface ScramConversationCounts {
  /** Conversations started: saslStart answered with a server-first message (salt and iteration count). */
  started: number;
  /** Conversations that proved the password: the client is authenticated. */
  succeeded: number;
  /** saslStart or saslContinue answered with AuthenticationFailed (unknown user, wrong proof, user since removed). */
  failed: number;
}

/**
 * The users of an endpoint and the SCRAM steps that check them, with a generation counted up each time the whole
 * list is replaced and the conversations of each generation counted.
 *
 * Source: auth spec, "SCRAM-SHA-1", "SCRAM-SHA-256" (RFC 5802 / RFC 7677 server steps).
 */
export class ScramUsers {
  private users: Map<string, StoredUser>;
  private currentGeneration = 0;
  /** The conversation counts of each generation that had any. */
  private readonly counts = new Map<number, ScramConversationCounts>();

  /** @throws {InvalidOptionError} for an invalid user (see {@link replace}). */
  constructor(users: readonly EmbeddedUser[] = []) {
    this.users = storedUsers(users);
  }

  /** Whether any user exists (authentication is then required). */
  get enabled(): boolean {
    return this.users.size > 0;
  }

  /** The users generation: 0 at construction, + 1 on every {@link replace}. */
  get generation(): number {
    return this.currentGeneration;
  }

  /**
   * Replaces every user at once with `users` (each created anew: a fresh salt unless `salt` is given) and counts the
   * generation up. All are checked before any is stored, so an invalid list leaves the users as they were.
   *
   * @throws {InvalidOptionError} when `users` is not an array, or for a user whose `username` is not a non-empty
   *   string or `db` not a non-empty string; for a SCRAM user (any `db` but `$external`), `password` not a string
   *   (never shown), `mechanisms` not a non-empty list of SCRAM-SHA-1 / SCRAM-SHA-256, `iterations` not a positive
   *   integer, or `salt` not 1 to 1024 bytes; for a user of `$external` (MONGODB-X509, PLAIN), a `password` given that
   *   is not a string (never shown), any `mechanisms`, `iterations` or `salt`.
   */
  replace(users: readonly EmbeddedUser[]): void {
    this.users = storedUsers(users);
    this.currentGeneration++;
  }

  /** The conversation counts of users generation `generation` (default: the current one); zeros when it had none. */
  conversations(generation: number = this.currentGeneration): ScramConversationCounts {
    return { ...(this.counts.get(generation) ?? { started: 0, succeeded: 0, failed: 0 }) };
  }

  private count(generation: number, outcome: keyof ScramConversationCounts): void {
    let counts = this.counts.get(generation);
    if (counts === undefined) this.counts.set(generation, (counts = { started: 0, succeeded: 0, failed: 0 }));
    counts[outcome]++;
  }

  /**
   * Whether `subject` (RFC 2253) is a MONGODB-X509 user: a user of `$external`, which has no SCRAM credentials.
   */
  isX509User(subject: string): boolean {
    const user = this.users.get(`${EXTERNAL_SOURCE}.${subject}`);
    return user !== undefined && user.db === EXTERNAL_SOURCE;
  }

  /**
   * The saslStart of PLAIN on database `db`, answered as a mongod with PLAIN among its `authenticationMechanisms`
   * answers it: the payload `[authzid]\0authcid\0password` (RFC 4616) must have both NULs, a non-empty user name, an
   * authorization identity empty or equal to it, and a non-empty password. In `$external` the password must be the
   * user's (what its LDAP server would check); in any other database, as a mongod's own PLAIN does, the password up to
   * its first NUL (a mongod reads it as a C string; empty then is a failure) must derive the user's stored
   * SCRAM-SHA-256 key (the password as given, not SASLprep'd), or, for a user without SCRAM-SHA-256, its SCRAM-SHA-1
   * key (of MongoDB's MD5 digest). Success: `{ conversationId: 1, done: true, payload: <empty>, ok: 1 }`
   * and the user `<db>.<name>`; any failure: AuthenticationFailed (18) "Authentication failed.", the words a mongod
   * gives for each. PLAIN conversations are not counted with the SCRAM ones.
   *
   * Source: auth spec, "PLAIN" ("Conversation"); mongod's PLAIN server mechanisms (LDAP in `$external`, its own
   * users elsewhere).
   */
  plain(db: string, command: Document): { reply: Document; user?: string } {
    const payload = command.payload instanceof Binary ? Buffer.from(command.payload.buffer) : Buffer.alloc(0);
    const first = payload.indexOf(0);
    const second = first < 0 ? -1 : payload.indexOf(0, first + 1);
    if (second < 0) return { reply: authFailed() };
    const authzid = payload.subarray(0, first);
    const name = payload.subarray(first + 1, second).toString('utf8');
    const rest = payload.subarray(second + 1);
    // A mongod reads the password of its own users as a C string: up to its first NUL. (The LDAP password of a user
    // of $external is the directory's to judge: compared whole.)
    const end = db === EXTERNAL_SOURCE ? -1 : rest.indexOf(0);
    const password = end < 0 ? rest : rest.subarray(0, end);
    if (name === '' || (authzid.length > 0 && authzid.toString('utf8') !== name) || password.length === 0) return { reply: authFailed() };
    const user = this.users.get(`${db}.${name}`);
    if (user === undefined || user.db !== db) return { reply: authFailed() };
    let proved: boolean;
    if (db === EXTERNAL_SOURCE) {
      proved = user.ldapPassword !== undefined && user.ldapPassword.length === password.length && timingSafeEqual(user.ldapPassword, password);
    } else {
      const mechanism: ScramMechanism = user.credentials['SCRAM-SHA-256'] !== undefined ? 'SCRAM-SHA-256' : 'SCRAM-SHA-1';
      const credential = user.credentials[mechanism]!;
      const clear = password.toString('utf8');
      const key = mechanism === 'SCRAM-SHA-256' ? clear : scramPassword(mechanism, name, clear);
      const storedKey = hash(mechanism, hmac(mechanism, saltPassword(mechanism, key, credential.salt, credential.iterations), 'Client Key'));
      proved = timingSafeEqual(storedKey, credential.keys().storedKey);
    }
    if (!proved) return { reply: authFailed() };
    return { reply: { conversationId: 1, done: true, payload: new Binary(Buffer.alloc(0)), ok: 1 }, user: `${db}.${name}` };
  }

  /** The mechanisms of `<db>.<username>`, for a handshake's `saslSupportedMechs`; undefined for an unknown user. */
  mechanismsOf(qualifiedName: string): ScramMechanism[] | undefined {
    const user = this.users.get(qualifiedName);
    return user ? (Object.keys(user.credentials) as ScramMechanism[]) : undefined;
  }

  /**
   * Handles saslStart on database `db`; returns the reply and the conversation to continue (if any). A `speculative`
   * saslStart (the handshake's `speculativeAuthenticate`) that fails is not counted: a mongod treats it as if it had
   * never been sent.
   */
  start(db: string, command: Document, speculative = false): { reply: Document; conversation?: ScramConversation } {
    const mechanism = command.mechanism as ScramMechanism;
    const message = (saslPayloadText(command.payload) ?? '');
    if (!message.startsWith('n,,')) {
      if (!speculative) this.count(this.currentGeneration, 'failed');
      return { reply: authFailed() };
    }
    const clientFirstBare = message.slice(3);
    const attrs = parseAttributes(clientFirstBare);
    const name = unescapeUsername(attrs.get('n') ?? '');
    const user = this.users.get(`${db}.${name}`);
    // Own properties only: a mechanism named after an Object property (constructor, __proto__) is no stored one.
    const credential = user !== undefined && Object.hasOwn(user.credentials, mechanism) ? user.credentials[mechanism] : undefined;
    const clientNonce = attrs.get('r');
    if (!user || !credential || !clientNonce) {
      if (!speculative) this.count(this.currentGeneration, 'failed');
      return { reply: authFailed() };
    }
    this.count(this.currentGeneration, 'started');
    const nonce = clientNonce + randomBytes(18).toString('base64');
    const serverFirst = `r=${nonce},s=${credential.salt.toString('base64')},i=${credential.iterations}`;
    return {
      reply: { conversationId: 1, done: false, payload: new Binary(Buffer.from(serverFirst)), ok: 1 },
      conversation: {
        mechanism,
        user,
        generation: this.currentGeneration,
        clientFirstBare,
        serverFirst,
        nonce,
        skipEmptyExchange: command.options?.skipEmptyExchange === true,
        step: 'proof',
      },
    };
  }

  /**
   * Handles saslContinue; `authenticated` is true once the client proved the password. The proof is checked against
   * the keys the conversation started with (its salt); a user removed since then fails it, as a mongod fails to
   * acquire a user dropped during the conversation.
   */
  continue(conversation: ScramConversation, command: Document): { reply: Document; authenticated: boolean } {
    if (conversation.step === 'final') {
      return { reply: { conversationId: 1, done: true, payload: new Binary(Buffer.alloc(0)), ok: 1 }, authenticated: true };
    }
    const message = (saslPayloadText(command.payload) ?? '');
    const attrs = parseAttributes(message);
    const proofText = attrs.get('p');
    const failed = (): { reply: Document; authenticated: boolean } => {
      this.count(conversation.generation, 'failed');
      return { reply: authFailed(), authenticated: false };
    };
    if (attrs.get('r') !== conversation.nonce || proofText === undefined) return failed();
    const { mechanism } = conversation;
    const credential = conversation.user.credentials[mechanism]!.keys();
    const withoutProof = message.slice(0, message.lastIndexOf(',p='));
    const authMessage = `${conversation.clientFirstBare},${conversation.serverFirst},${withoutProof}`;
    const clientKey = xor(Buffer.from(proofText, 'base64'), hmac(mechanism, credential.storedKey, authMessage));
    const storedKey = hash(mechanism, clientKey);
    if (storedKey.length !== credential.storedKey.length || !timingSafeEqual(storedKey, credential.storedKey)) {
      return failed();
    }
    if (!this.users.has(`${conversation.user.db}.${conversation.user.username}`)) return failed();
    this.count(conversation.generation, 'succeeded');
    const serverSignature = hmac(mechanism, credential.serverKey, authMessage).toString('base64');
    conversation.step = 'final';
    return {
      reply: { conversationId: 1, done: conversation.skipEmptyExchange, payload: new Binary(Buffer.from(`v=${serverSignature}`)), ok: 1 },
      authenticated: true,
    };
  }
}

/** Checks every user, then stores them all (a later entry with the same db and username replaces an earlier one). */
function storedUsers(users: readonly EmbeddedUser[]): Map<string, StoredUser> {
  if (!Array.isArray(users)) throw new InvalidOptionError('users', users, 'an array of users');
  const stored = new Map<string, StoredUser>();
  for (const user of users) {
    const u = storedUser(user);
    stored.set(`${u.db}.${u.username}`, u);
  }
  return stored;
}

/** Checks one user and makes its stored credentials (salt drawn now, keys derived on first use). */
function storedUser(user: EmbeddedUser): StoredUser {
  if (user === null || typeof user !== 'object') {
    throw new InvalidOptionError('user', user, 'an object { username, password, ... }');
  }
  if (typeof user.username !== 'string' || user.username === '') {
    throw new InvalidOptionError('username', user.username, 'a non-empty string');
  }
  if (user.db !== undefined && (typeof user.db !== 'string' || user.db === '')) {
    throw new InvalidOptionError('db', user.db, 'a non-empty database name');
  }
  if (user.db === EXTERNAL_SOURCE) {
    // A MONGODB-X509 user (its name is all it has), and a PLAIN one with the password of its LDAP server.
    const scramOnly = (['mechanisms', 'iterations', 'salt'] as const).find((key) => user[key] !== undefined);
    if (scramOnly !== undefined) throw new InvalidOptionError(scramOnly, user[scramOnly], `none for a user in ${EXTERNAL_SOURCE} (MONGODB-X509, PLAIN)`);
    if (user.password !== undefined && typeof user.password !== 'string') throw new InvalidOptionError('password', '<not shown>', 'a string, or none');
    return { username: user.username, db: EXTERNAL_SOURCE, credentials: {}, ...(user.password === undefined ? {} : { ldapPassword: Buffer.from(user.password, 'utf8') }) };
  }
  if (typeof user.password !== 'string') throw new InvalidOptionError('password', user.password, 'a string');
  const mechanisms = user.mechanisms ?? (['SCRAM-SHA-1', 'SCRAM-SHA-256'] as ScramMechanism[]);
  if (!Array.isArray(mechanisms) || mechanisms.length === 0 || !mechanisms.every((m) => SCRAM_MECHANISMS.includes(m))) {
    throw new InvalidOptionError('mechanisms', mechanisms, `a non-empty list of ${SCRAM_MECHANISMS.join(', ')}`);
  }
  if (user.iterations !== undefined && !(Number.isSafeInteger(user.iterations) && user.iterations > 0)) {
    throw new InvalidOptionError('iterations', user.iterations, 'a positive integer');
  }
  const { salt } = user;
  if (salt !== undefined && !(salt instanceof Uint8Array && salt.length >= 1 && salt.length <= 1024)) {
    throw new InvalidOptionError('salt', salt, 'a Uint8Array of 1 to 1024 bytes');
  }
  const db = user.db ?? 'admin';
  const credentials: Partial<Record<ScramMechanism, StoredCredential>> = {};
  for (const mechanism of mechanisms) {
    const drawn = salt === undefined ? randomBytes(16) : Buffer.from(salt);
    const iterations = user.iterations ?? ITERATIONS[mechanism];
    const password = scramPassword(mechanism, user.username, user.password);
    let keys: { storedKey: Buffer; serverKey: Buffer } | undefined;
    credentials[mechanism] = {
      salt: drawn,
      iterations,
      keys: () => {
        if (keys === undefined) {
          const salted = saltPassword(mechanism, password, drawn, iterations);
          const storedKey = hash(mechanism, hmac(mechanism, salted, 'Client Key'));
          keys = { storedKey, serverKey: hmac(mechanism, salted, 'Server Key') };
        }
        return keys;
      },
    };
  }
  return { username: user.username, db, credentials };
}

function unescapeUsername(name: string): string {
  return name.replace(/=2C/g, ',').replace(/=3D/g, '=');
}
