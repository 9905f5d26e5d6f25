/**
 * MongoCredentials: who a connection authenticates as. The password is kept out of every enumerable property, JSON
 * and `util.inspect` output, so it cannot leak into errors, events or logs by accident.
 *
 * Source: auth spec, "MongoCredential", "SCRAM-SHA-1", "SCRAM-SHA-256", "Caching credentials in SCRAM".
 */
import { inspect } from 'node:util';
import { saslprepFunction } from '../lazy-dependencies';
import { InvalidOptionError } from '../errors';
import { optionValue, rejectUnknownOptions, requireOptionsObject, type ListsEveryOption } from '../options';

/**
 * The mechanisms this library speaks, in order of preference (a frozen array).
 *
 * Source: auth spec, "SCRAM-SHA-256", "SCRAM-SHA-1", "Default Authentication Methods".
 */
export const AUTH_MECHANISMS = Object.freeze(['SCRAM-SHA-256', 'SCRAM-SHA-1'] as const);

/** A SCRAM mechanism name. Source: auth spec, "SCRAM-SHA-1", "SCRAM-SHA-256" (`mechanism` of MongoCredential). */
export type AuthMechanism = (typeof AUTH_MECHANISMS)[number];

/**
 * What {@link MongoCredentials} are made from.
 *
 * Source: auth spec, "MongoCredential" (username, source, password, mechanism).
 */
export interface CredentialsInit {
  /** Non-empty. Sent as given (never SASLprep'd). */
  username: string;
  /** The password; may be empty. Never shown in errors, JSON or inspection. */
  password: string;
  /** The database that holds the user (authSource). Default `admin`. */
  source?: string | undefined;
  /** Omit to negotiate: SCRAM-SHA-256 when the server lists it for the user, else SCRAM-SHA-1. */
  mechanism?: AuthMechanism | undefined;
}

/** The keys of a {@link CredentialsInit}. */
export const CREDENTIALS_INIT_NAMES = ['username', 'password', 'source', 'mechanism'] as const satisfies readonly (keyof CredentialsInit)[];
true satisfies ListsEveryOption<CredentialsInit, typeof CREDENTIALS_INIT_NAMES>;

const passwords = new WeakMap<MongoCredentials, string>();

/**
 * The SCRAM salted passwords of each {@link MongoCredentials} (settled or being derived), keyed by mechanism, salt
 * and iteration count. Kept out of the instance, as the password is: a salted password authenticates as well as the
 * password, and a field would show it to `util.inspect` without the custom form and make `structuredClone` throw.
 */
const saltedPasswordCaches = new WeakMap<MongoCredentials, Map<string, Promise<Buffer>>>();

/**
 * How many salted passwords one {@link MongoCredentials} keeps. A deployment needs one per mechanism and salt (one
 * salt per user and mechanism), so a handful at most; the bound only stops a server that sends a fresh salt on every
 * conversation from growing the cache without limit.
 */
const MAX_CACHED_SALTED_PASSWORDS = 16;

/**
 * Credentials for SCRAM authentication, validated at construction. The password is kept out of every enumerable
 * property, JSON and `util.inspect` output. The salted passwords derived from it are cached per instance, so reusing
 * one instance for many connections derives each once.
 *
 * Source: auth spec, "MongoCredential", "SCRAM-SHA-1", "SCRAM-SHA-256", "Caching credentials in SCRAM".
 */
export class MongoCredentials {
  /** The user name, as given. */
  readonly username: string;
  /** The database that holds the user (authSource); `admin` unless given. */
  readonly source: string;
  /**
   * The mechanism to use; undefined to negotiate it (SCRAM-SHA-256 when the server lists it for the user, else
   * SCRAM-SHA-1).
   */
  readonly mechanism: AuthMechanism | undefined;

  /**
   * @throws {InvalidOptionError} for an `init` that is not an object (option `credentials`), a key of a plain object
   *   that is not one of {@link CredentialsInit}'s (named, with the closest one, its value not shown), an empty or
   *   non-string username, a non-string password, an empty source, a
   *   mechanism other than SCRAM-SHA-1 and SCRAM-SHA-256, or (mechanism SCRAM-SHA-256 only) a password SASLprep
   *   refuses (a prohibited character, an unassigned code point, misplaced bidirectional characters; the message
   *   names the rule, never the password). A password for SCRAM-SHA-1 or a negotiated mechanism is not checked:
   *   SCRAM-SHA-1 does not SASLprep it.
   *
   * Source: auth spec, "Errors" (SHOULD raise an error as early as possible for an invalid credential),
   * "SCRAM-SHA-256" (passwords MUST be prepared with SASLprep), "SCRAM-SHA-1" (MUST NOT be).
   */
  constructor(init: CredentialsInit) {
    requireOptionsObject('credentials', init, 'a { username, password, source?, mechanism? } object', true);
    // A plain object takes only the CredentialsInit keys (a misspelt `source` must not fall back to admin); a class
    // instance (credentials of another copy of this library, say) is read through its properties.
    const proto: unknown = Object.getPrototypeOf(init);
    if (proto === Object.prototype || proto === null) rejectUnknownOptions(init, CREDENTIALS_INIT_NAMES, 'credentials', 'credentials.');
    // Each field read once, none from Object.prototype (see optionValue).
    const username = optionValue(init, 'username');
    const password = optionValue(init, 'password');
    const mechanism = optionValue(init, 'mechanism');
    if (typeof username !== 'string' || username === '') {
      throw new InvalidOptionError('username', username, 'a non-empty string');
    }
    if (typeof password !== 'string') {
      throw new InvalidOptionError('password', '<not shown>', 'a string');
    }
    const source = optionValue(init, 'source') ?? 'admin';
    if (typeof source !== 'string' || source === '') throw new InvalidOptionError('authSource', source, 'a non-empty database name');
    if (mechanism !== undefined && !AUTH_MECHANISMS.includes(mechanism)) {
      throw new InvalidOptionError('authMechanism', mechanism, `one of ${AUTH_MECHANISMS.join(', ')}`);
    }
    // SASLprep is loaded with the credentials, before anything that blames the password (here, or authentication,
    // which SASLpreps it for SCRAM-SHA-256, negotiated too): a module that cannot be loaded is no fault of the input.
    const saslprep = saslprepFunction();
    // SCRAM-SHA-256 SASLpreps the password: one SASLprep refuses could never authenticate. Only when the mechanism is
    // set: a negotiated one may be SCRAM-SHA-1, which uses the password as it is. The message names the rule broken.
    if (mechanism === 'SCRAM-SHA-256') {
      try {
        saslprep(password);
      } catch (error) {
        const why = `SASLprep (RFC 4013) refuses it: ${(error as Error).message}`;
        throw new InvalidOptionError('password', '<not shown>', 'a password SASLprep accepts, for SCRAM-SHA-256', {
          message: `Invalid password for SCRAM-SHA-256: ${why}`,
        });
      }
    }
    this.username = username;
    this.source = source;
    this.mechanism = mechanism;
    passwords.set(this, password);
  }

  /** The password (not an own property: it never shows in JSON or inspection). */
  get password(): string {
    return passwords.get(this)!;
  }

  /**
   * The salted password for `key` (SCRAM: mechanism, salt and iteration count), derived with `derive` the first time
   * and cached. The Promise itself is cached, so concurrent callers with the same key share one derivation. A
   * derivation that fails (throws or rejects) is dropped from the cache, so the next caller derives again; each
   * caller waiting on it gets its error. At most 16 salted passwords are kept; the oldest entry goes first. Used by
   * SCRAM authentication.
   *
   * Resolves to the salted password bytes (20 for SCRAM-SHA-1, 32 for SCRAM-SHA-256); rejects with `derive`'s error.
   *
   * Source: auth spec, "Caching credentials in SCRAM" (drivers MUST keep a cache of computed SCRAM credentials,
   * whose entries SHOULD be identified by password, salt, iteration count and mechanism; the password is this
   * instance's); sharing a derivation in progress and the bound on entries are extensions.
   */
  saltedPassword(key: string, derive: () => Promise<Buffer>): Promise<Buffer> {
    const saltedPasswords = saltedPasswordCaches.get(this) ?? new Map<string, Promise<Buffer>>();
    saltedPasswordCaches.set(this, saltedPasswords);
    const cached = saltedPasswords.get(key);
    if (cached !== undefined) return cached;
    let salted: Promise<Buffer>;
    try {
      salted = derive();
    } catch (error) {
      return Promise.reject(error);
    }
    if (saltedPasswords.size >= MAX_CACHED_SALTED_PASSWORDS) {
      saltedPasswords.delete(saltedPasswords.keys().next().value!);
    }
    saltedPasswords.set(key, salted);
    salted.catch(() => {
      if (saltedPasswords.get(key) === salted) saltedPasswords.delete(key);
    });
    return salted;
  }

  /** The JSON form: `username`, `source` and (when set) `mechanism`; never the password. */
  toJSON(): {
    /** As {@link MongoCredentials.username}. */
    username: string;
    /** As {@link MongoCredentials.source}. */
    source: string;
    /** As {@link MongoCredentials.mechanism}, present only when set. */
    mechanism?: AuthMechanism;
  } {
    return { username: this.username, source: this.source, ...(this.mechanism ? { mechanism: this.mechanism } : {}) };
  }

  /** What `util.inspect` (and `console.log`) shows: `MongoCredentials` and the JSON form, never the password. */
  [inspect.custom](): string {
    return `MongoCredentials ${inspect(this.toJSON())}`;
  }
}
