/**
 * The server side of SCRAM-SHA-1 and SCRAM-SHA-256 for the embedded endpoint: stored credentials, and the
 * saslStart / saslContinue conversation a mongod runs.
 *
 * Source: auth spec, "SCRAM-SHA-1", "SCRAM-SHA-256" (RFC 5802 / RFC 7677 server steps).
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { Binary, type Document } from 'bson';
import type { AuthMechanism } from '../auth/credentials';
import { InvalidOptionError } from '../errors';
import { hash, hmac, parseAttributes, saltPassword, saslPayloadText, scramPassword, xor } from '../auth/scram';

/**
 * A user of the embedded endpoint. Its salt is drawn when the endpoint is constructed; its SCRAM keys are derived the
 * first time a client sends a proof for it (synchronously, on the event loop the endpoint shares with its clients),
 * so a user whose iteration count a client refuses costs nothing.
 *
 * Source: auth spec, "SCRAM-SHA-1", "SCRAM-SHA-256" (what a server stores for a user: salt, iteration count, stored
 * and server keys).
 */
export interface EmbeddedUser {
  /** The user name. */
  username: string;
  /** The password, in clear text (prepared as each mechanism requires when the user is added). */
  password: string;
  /** The database that holds the user. Default `admin`. */
  db?: string;
  /** The mechanisms the user can authenticate with. Default both, SCRAM-SHA-1 and SCRAM-SHA-256. */
  mechanisms?: AuthMechanism[];
  /**
   * The SCRAM iteration count the endpoint asks for (`i=` in its server-first message), for every mechanism of the
   * user: a positive integer. Default: mongod's, 10000 for SCRAM-SHA-1 (`scramIterationCount`) and 15000 for
   * SCRAM-SHA-256 (`scramSHA256IterationCount`). Any positive integer is allowed, including counts a real server
   * refuses (below 5000) and counts a client must refuse (below 4096, or above its maximum: 1,000,000 here), to test
   * clients against them; a count a client accepts costs the endpoint one derivation of that many iterations when
   * the first proof arrives.
   */
  iterations?: number;
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
  readonly credentials: Partial<Record<AuthMechanism, StoredCredential>>;
}

/** One SASL conversation in progress on a connection. */
export interface ScramConversation {
  readonly mechanism: AuthMechanism;
  readonly user: StoredUser;
  readonly clientFirstBare: string;
  readonly serverFirst: string;
  readonly nonce: string;
  readonly skipEmptyExchange: boolean;
  step: 'proof' | 'final';
}

const ITERATIONS: Record<AuthMechanism, number> = { 'SCRAM-SHA-1': 10_000, 'SCRAM-SHA-256': 15_000 };

const authFailed = (): Document => ({ ok: 0, code: 18, codeName: 'AuthenticationFailed', errmsg: 'Authentication failed.' });

/**
 * The users of an endpoint and the SCRAM steps that check them.
 *
 * Source: auth spec, "SCRAM-SHA-1", "SCRAM-SHA-256" (RFC 5802 / RFC 7677 server steps).
 */
export class ScramUsers {
  private readonly users = new Map<string, StoredUser>();

  /** @throws {InvalidOptionError} when a user's `iterations` is not a positive integer (see {@link add}). */
  constructor(users: readonly EmbeddedUser[] = []) {
    for (const u of users) this.add(u);
  }

  /** Whether any user exists (authentication is then required). */
  get enabled(): boolean {
    return this.users.size > 0;
  }

  /**
   * Adds (or replaces) a user.
   *
   * @throws {InvalidOptionError} when `user.iterations` is given and is not a positive integer.
   */
  add(user: EmbeddedUser): void {
    if (user.iterations !== undefined && !(Number.isSafeInteger(user.iterations) && user.iterations > 0)) {
      throw new InvalidOptionError('iterations', user.iterations, 'a positive integer');
    }
    const db = user.db ?? 'admin';
    const credentials: Partial<Record<AuthMechanism, StoredCredential>> = {};
    for (const mechanism of user.mechanisms ?? (['SCRAM-SHA-1', 'SCRAM-SHA-256'] as AuthMechanism[])) {
      const salt = randomBytes(16);
      const iterations = user.iterations ?? ITERATIONS[mechanism];
      const password = scramPassword(mechanism, user.username, user.password);
      let keys: { storedKey: Buffer; serverKey: Buffer } | undefined;
      credentials[mechanism] = {
        salt,
        iterations,
        keys: () => {
          if (keys === undefined) {
            const salted = saltPassword(mechanism, password, salt, iterations);
            const storedKey = hash(mechanism, hmac(mechanism, salted, 'Client Key'));
            keys = { storedKey, serverKey: hmac(mechanism, salted, 'Server Key') };
          }
          return keys;
        },
      };
    }
    this.users.set(`${db}.${user.username}`, { username: user.username, db, credentials });
  }

  /** The mechanisms of `<db>.<username>`, for a handshake's `saslSupportedMechs`; undefined for an unknown user. */
  mechanismsOf(qualifiedName: string): AuthMechanism[] | undefined {
    const user = this.users.get(qualifiedName);
    return user ? (Object.keys(user.credentials) as AuthMechanism[]) : undefined;
  }

  /** Handles saslStart on database `db`; returns the reply and the conversation to continue (if any). */
  start(db: string, command: Document): { reply: Document; conversation?: ScramConversation } {
    const mechanism = command.mechanism as AuthMechanism;
    const message = (saslPayloadText(command.payload) ?? '');
    if (!message.startsWith('n,,')) return { reply: authFailed() };
    const clientFirstBare = message.slice(3);
    const attrs = parseAttributes(clientFirstBare);
    const name = unescapeUsername(attrs.get('n') ?? '');
    const user = this.users.get(`${db}.${name}`);
    const credential = user?.credentials[mechanism];
    const clientNonce = attrs.get('r');
    if (!user || !credential || !clientNonce) return { reply: authFailed() };
    const nonce = clientNonce + randomBytes(18).toString('base64');
    const serverFirst = `r=${nonce},s=${credential.salt.toString('base64')},i=${credential.iterations}`;
    return {
      reply: { conversationId: 1, done: false, payload: new Binary(Buffer.from(serverFirst)), ok: 1 },
      conversation: {
        mechanism,
        user,
        clientFirstBare,
        serverFirst,
        nonce,
        skipEmptyExchange: command.options?.skipEmptyExchange === true,
        step: 'proof',
      },
    };
  }

  /** Handles saslContinue; `authenticated` is true once the client proved the password. */
  continue(conversation: ScramConversation, command: Document): { reply: Document; authenticated: boolean } {
    if (conversation.step === 'final') {
      return { reply: { conversationId: 1, done: true, payload: new Binary(Buffer.alloc(0)), ok: 1 }, authenticated: true };
    }
    const message = (saslPayloadText(command.payload) ?? '');
    const attrs = parseAttributes(message);
    const proofText = attrs.get('p');
    if (attrs.get('r') !== conversation.nonce || proofText === undefined) return { reply: authFailed(), authenticated: false };
    const { mechanism } = conversation;
    const credential = conversation.user.credentials[mechanism]!.keys();
    const withoutProof = message.slice(0, message.lastIndexOf(',p='));
    const authMessage = `${conversation.clientFirstBare},${conversation.serverFirst},${withoutProof}`;
    const clientKey = xor(Buffer.from(proofText, 'base64'), hmac(mechanism, credential.storedKey, authMessage));
    const storedKey = hash(mechanism, clientKey);
    if (storedKey.length !== credential.storedKey.length || !timingSafeEqual(storedKey, credential.storedKey)) {
      return { reply: authFailed(), authenticated: false };
    }
    const serverSignature = hmac(mechanism, credential.serverKey, authMessage).toString('base64');
    conversation.step = 'final';
    return {
      reply: { conversationId: 1, done: conversation.skipEmptyExchange, payload: new Binary(Buffer.from(`v=${serverSignature}`)), ok: 1 },
      authenticated: true,
    };
  }
}

function unescapeUsername(name: string): string {
  return name.replace(/=2C/g, ',').replace(/=3D/g, '=');
}
