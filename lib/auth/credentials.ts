/**
 * MongoCredentials: who a connection authenticates as. The password is kept out of every enumerable property, JSON
 * and `util.inspect` output, so it cannot leak into errors, events or logs by accident.
 *
 * Source: auth spec, "MongoCredential", "SCRAM-SHA-1", "SCRAM-SHA-256", "MONGODB-X509", "PLAIN", "Caching credentials
 * in SCRAM".
 */
import { inspect } from 'node:util';
import { saslprepFunction } from '../lazy-dependencies';
import { InvalidOptionError } from '../errors';
import { closestOptionName, optionValue, rejectUnknownOptions, requireOptionsObject, type ListsEveryOption } from '../options';

/**
 * The SCRAM mechanisms, in order of preference (a frozen array): the one the default rules pick when the server lists
 * it first.
 *
 * Source: auth spec, "SCRAM-SHA-256", "SCRAM-SHA-1", "Default Authentication Methods".
 */
export const SCRAM_MECHANISMS = Object.freeze(['SCRAM-SHA-256', 'SCRAM-SHA-1'] as const);

/** A SCRAM mechanism name. Source: auth spec, "SCRAM-SHA-1", "SCRAM-SHA-256" (`mechanism` of MongoCredential). */
export type ScramMechanism = (typeof SCRAM_MECHANISMS)[number];

/**
 * The mechanisms this library speaks (a frozen array): the SCRAM ones, then MONGODB-X509, PLAIN, MONGODB-AWS and
 * MONGODB-OIDC (machine workflow), which are never negotiated (only used when asked for).
 *
 * Source: auth spec, "SCRAM-SHA-256", "SCRAM-SHA-1", "MONGODB-X509", "PLAIN", "Default Authentication Methods"
 * (drivers MUST NOT use any other mechanism, e.g. PLAIN, as the default).
 */
export const AUTH_MECHANISMS = Object.freeze([...SCRAM_MECHANISMS, 'MONGODB-X509', 'PLAIN', 'MONGODB-AWS', 'MONGODB-OIDC'] as const);

/**
 * A mechanism name of {@link AUTH_MECHANISMS}. Source: auth spec, "SCRAM-SHA-1", "SCRAM-SHA-256", "MONGODB-X509",
 * "PLAIN" (`mechanism` of MongoCredential).
 */
export type AuthMechanism = (typeof AUTH_MECHANISMS)[number];

/**
 * The database of the users whose credentials the server does not store: every MONGODB-X509 user, and so its
 * credentials' only source; PLAIN (LDAP) users, and so the default source of PLAIN credentials.
 *
 * Source: auth spec, "MONGODB-X509" (source MUST be "$external"), "PLAIN" (the `$external` database must be used;
 * source defaults to the URI's database, else `$external`).
 */
export const EXTERNAL_SOURCE = '$external';

/**
 * Whether the users of `mechanism` are all in {@link EXTERNAL_SOURCE}, whatever else says (a URI's database, a TXT
 * record's authSource): MONGODB-X509, MONGODB-AWS and MONGODB-OIDC.
 *
 * Source: auth spec, "MONGODB-X509", "MONGODB-AWS", "MONGODB-OIDC" (source MUST be "$external").
 */
export function isExternalMechanism(mechanism: AuthMechanism | undefined): boolean {
  return mechanism === 'MONGODB-X509' || mechanism === 'MONGODB-AWS' || mechanism === 'MONGODB-OIDC';
}

/**
 * What {@link MongoCredentials} are made from.
 *
 * Source: auth spec, "MongoCredential" (username, source, password, mechanism), "MONGODB-X509", "PLAIN", "MONGODB-AWS", "MONGODB-OIDC" (each one's "MongoCredential Properties").
 */
export interface CredentialsInit {
  /**
   * Non-empty. Sent as given (never SASLprep'd). Required, except with mechanism MONGODB-X509, where the client
   * certificate's subject is the user name: omit it there (the server takes the subject), or give that subject as RFC
   * 2253 writes it (`openssl x509 -subject -nameopt RFC2253`). With PLAIN, without NUL (U+0000) or lone surrogate.
   * Optional with MONGODB-OIDC: given to the OIDC_CALLBACK, or the managed identity's client id with ENVIRONMENT
   * azure; refused with the other environments.
   * Must be absent with MONGODB-AWS (auth spec, "Obtaining Credentials": AWS credentials given in the URI or options
   * are an error; they come from AWS_CREDENTIAL_PROVIDER, the AWS SDK when installed, the environment or an AWS endpoint).
   */
  username?: string | undefined;
  /**
   * The password; may be empty. Never shown in errors, JSON or inspection. Required for SCRAM and PLAIN (which sends it
   * as given, never SASLprep'd: the LDAP server checks it; without NUL or lone surrogate there); must be absent with mechanism MONGODB-X509 (the client
   * certificate is the credential), MONGODB-AWS and MONGODB-OIDC (the access token is).
   */
  password?: string | undefined;
  /**
   * The database that holds the user (authSource). Default `admin`; with mechanism MONGODB-X509, `$external`, the only
   * one allowed there, as with MONGODB-AWS and MONGODB-OIDC; with mechanism PLAIN, `$external` (where LDAP users are).
   */
  source?: string | undefined;
  /**
   * Omit to negotiate: SCRAM-SHA-256 when the server lists it for the user, else SCRAM-SHA-1. MONGODB-X509 (over TLS,
   * with a client certificate: `tlsCertificateKeyFile`) and PLAIN (LDAP; the password travels in clear text inside
   * it, so over TCP TLS is required unless `tls: false` is given outright), MONGODB-AWS (AWS IAM credentials, see
   * `AwsCredentialProvider`) and MONGODB-OIDC (machine workflow, see `OidcCallback`; human workflow, see
   * `OidcHumanCallback`) are never negotiated.
   */
  mechanism?: AuthMechanism | undefined;
  /**
   * The mechanism's properties (a plain object), by the auth spec's names; each mechanism takes only its own (see
   * `MECHANISM_PROPERTIES`): SCRAM, MONGODB-X509 and PLAIN take none. Kept as a frozen copy, never shown in
   * errors, JSON or inspection. The connection string sets them with `authMechanismProperties=KEY:value,KEY2:value`.
   */
  mechanismProperties?: MechanismProperties | undefined;
}

/**
 * Mechanism properties: the auth spec's property names (upper case, as `AWS_CREDENTIAL_PROVIDER`) and their values.
 * Which names a mechanism takes, and what each accepts, is `MECHANISM_PROPERTIES`.
 *
 * Source: auth spec, "MongoCredential" (mechanism_properties), "Connection String Options" (authMechanismProperties).
 */
export interface MechanismProperties {
  readonly [name: string]: unknown;
}

/**
 * One mechanism property: what it accepts and where it may be given.
 *
 * Source: auth spec, each mechanism's "MongoCredential Properties".
 */
export interface MechanismPropertyRule {
  /** What the property accepts, in words (the `allowed` of the InvalidOptionError for a value it refuses). */
  readonly allowed: string;
  /** Whether the connection string may set it (its value is then a string); else only the credentials option may. */
  readonly inUri: boolean;
  /** Whether `value` is accepted. */
  readonly valid: (value: unknown) => boolean;
}

/**
 * The hosts the MONGODB-OIDC human workflow may authenticate to when `ALLOWED_HOSTS` is not given (a frozen array):
 * `*.mongodb.net`, `*.mongodb-qa.net`, `*.mongodb-dev.net`, `*.mongodbgov.net`, `localhost`, `127.0.0.1`, `::1`,
 * `*.mongo.com`. A leading `*.` matches any (possibly nested) subdomain, not the domain itself; names compare without
 * regard to case; ports are ignored.
 *
 * Source: auth spec, "MONGODB-OIDC" ("MongoCredential Properties": ALLOWED_HOSTS MUST default to this list).
 */
export const OIDC_DEFAULT_ALLOWED_HOSTS = Object.freeze(['*.mongodb.net', '*.mongodb-qa.net', '*.mongodb-dev.net', '*.mongodbgov.net', 'localhost', '127.0.0.1', '::1', '*.mongo.com'] as const);

/**
 * The mechanism properties each mechanism takes, by name (a frozen object of frozen objects); a negotiated mechanism
 * (none given) takes those of SCRAM: none. A property of no mechanism's list, or of another mechanism's, is refused.
 * MONGODB-OIDC takes ENVIRONMENT and TOKEN_RESOURCE (URI or option), and OIDC_CALLBACK, OIDC_HUMAN_CALLBACK (a
 * function) and ALLOWED_HOSTS (an array of non-empty strings) in the option only.
 *
 * Source: auth spec, "SCRAM-SHA-1", "SCRAM-SHA-256", "MONGODB-X509", "PLAIN" ("MongoCredential Properties":
 * mechanism_properties are not listed for them), "MONGODB-AWS" (AWS_CREDENTIAL_PROVIDER; "Custom Credential
 * Providers": a function, as the AWS SDK's providers), "MONGODB-OIDC" ("MongoCredential Properties"), "Errors" (a mechanism_property given for a mechanism that does not
 * support it raises an error).
 */
export const MECHANISM_PROPERTIES: { readonly [M in AuthMechanism]: Readonly<Record<string, MechanismPropertyRule>> } = deepFreeze({
  'SCRAM-SHA-256': {},
  'SCRAM-SHA-1': {},
  'MONGODB-X509': {},
  PLAIN: {},
  'MONGODB-AWS': {
    AWS_CREDENTIAL_PROVIDER: {
      allowed: 'a function returning a Promise of { accessKeyId, secretAccessKey, sessionToken?, expiration? } (an AWS SDK credential provider)',
      inUri: false,
      valid: (value) => typeof value === 'function',
    },
  },
  'MONGODB-OIDC': {
    ENVIRONMENT: { allowed: 'one of test, azure, gcp, k8s', inUri: true, valid: (v) => typeof v === 'string' && (['test', 'azure', 'gcp', 'k8s'] as unknown[]).includes(v) },
    TOKEN_RESOURCE: {
      allowed: 'a non-empty string (the Azure resource or GCP audience: no token is issued for an empty one; it may hold colons; one with a comma must be given in the credentials option, not the connection string)',
      inUri: true,
      valid: (v) => typeof v === 'string' && v !== '',
    },
    OIDC_CALLBACK: { allowed: 'a function returning { accessToken, expiresInSeconds? } (see OidcCallback)', inUri: false, valid: (v) => typeof v === 'function' },
    OIDC_HUMAN_CALLBACK: { allowed: 'a function returning { accessToken, expiresInSeconds?, refreshToken? } (see OidcHumanCallback)', inUri: false, valid: (v) => typeof v === 'function' },
    ALLOWED_HOSTS: {
      allowed: 'an array of non-empty strings (host names or IP addresses, a leading "*." matching subdomains)',
      inUri: false,
      valid: (v) => Array.isArray(v) && v.every((h) => typeof h === 'string' && h !== ''),
    },
  },
});

/**
 * Checks the MONGODB-OIDC properties together, and the user name with them.
 *
 * @throws {InvalidOptionError} (option `authMechanismProperties.ENVIRONMENT`) with none of ENVIRONMENT,
 *   OIDC_CALLBACK and OIDC_HUMAN_CALLBACK; (`authMechanismProperties.OIDC_CALLBACK`) with ENVIRONMENT and OIDC_CALLBACK;
 *   (`authMechanismProperties.OIDC_HUMAN_CALLBACK`) with OIDC_HUMAN_CALLBACK and OIDC_CALLBACK or ENVIRONMENT; (`authMechanismProperties.TOKEN_RESOURCE`)
 *   without one for azure or gcp (an empty one is refused as a property before), or with one for another source; (`username`) a user name with ENVIRONMENT test,
 *   gcp or k8s (azure takes it as the managed identity's client id).
 *
 * Source: auth spec, "MONGODB-OIDC" ("MongoCredential Properties": ENVIRONMENT and a callback MUST NOT both be given;
 * TOKEN_RESOURCE MUST be given exactly for azure and gcp), "Built-in OIDC Environment Integrations" (azure's
 * client_id); the auth spec tests refuse a user name with ENVIRONMENT test and gcp.
 */
function checkOidcProperties(properties: MechanismProperties, username: unknown): void {
  const environment = properties.ENVIRONMENT as string | undefined;
  const callback = properties.OIDC_CALLBACK;
  const human = properties.OIDC_HUMAN_CALLBACK;
  if (callback !== undefined && human !== undefined) {
    throw new InvalidOptionError('authMechanismProperties.OIDC_HUMAN_CALLBACK', '<not shown>', 'absent when OIDC_CALLBACK is given: one callback (OIDC_CALLBACK for the machine workflow, OIDC_HUMAN_CALLBACK for the human one)');
  }
  if (environment !== undefined && human !== undefined) {
    throw new InvalidOptionError('authMechanismProperties.OIDC_HUMAN_CALLBACK', '<not shown>', `absent when ENVIRONMENT (${environment}) is given: one token source`);
  }
  if (human !== undefined) return;
  if (environment === undefined && callback === undefined) {
    throw new InvalidOptionError('authMechanismProperties.ENVIRONMENT', undefined, 'one of test, azure, gcp, k8s when neither OIDC_CALLBACK nor OIDC_HUMAN_CALLBACK is given (MONGODB-OIDC needs a token source)');
  }
  if (environment !== undefined && callback !== undefined) {
    throw new InvalidOptionError('authMechanismProperties.OIDC_CALLBACK', '<not shown>', `absent when ENVIRONMENT (${environment}) is given: one token source`);
  }
  const needsResource = environment === 'azure' || environment === 'gcp';
  if (needsResource && properties.TOKEN_RESOURCE === undefined) {
    throw new InvalidOptionError('authMechanismProperties.TOKEN_RESOURCE', undefined, `a string for ENVIRONMENT ${environment}`);
  }
  if (!needsResource && properties.TOKEN_RESOURCE !== undefined) {
    throw new InvalidOptionError('authMechanismProperties.TOKEN_RESOURCE', '<not shown>', `absent: only ENVIRONMENT azure and gcp take it`);
  }
  if (environment !== undefined && environment !== 'azure' && username !== undefined) {
    throw new InvalidOptionError('username', username, `none with ENVIRONMENT ${environment} (only azure takes one: the managed identity's client id)`);
  }
}

function deepFreeze<T extends Record<string, object>>(table: T): T {
  for (const value of Object.values(table)) Object.freeze(value);
  return Object.freeze(table);
}

/** The frozen, prototype-less empty properties of credentials given none. */
const NO_PROPERTIES: MechanismProperties = Object.freeze(Object.create(null) as MechanismProperties);

/**
 * The mechanism properties `given` for `mechanism` (undefined: negotiated), checked and copied: a frozen object
 * without a prototype holding each own enumerable property of `given` (an empty one for `given` undefined).
 *
 * @throws {InvalidOptionError} (option `authMechanismProperties`, value not shown) for `given` that is not a plain
 *   object; (option `authMechanismProperties.<KEY>`, value not shown) for a key `mechanism` does not take, naming the
 *   properties it takes (or that it takes none) and the mechanism whose property it is, if any; for a value the
 *   property refuses (its rule's `allowed`).
 *
 * Source: auth spec, "MongoCredential", "Errors".
 */
export function checkMechanismProperties(
  mechanism: AuthMechanism | undefined,
  given: unknown,
  /** The table to check against: `MECHANISM_PROPERTIES` but in tests. */
  table: { readonly [M in AuthMechanism]: Readonly<Record<string, MechanismPropertyRule>> } = MECHANISM_PROPERTIES,
): MechanismProperties {
  if (given === undefined) return NO_PROPERTIES;
  const proto: unknown = given !== null && typeof given === 'object' ? Object.getPrototypeOf(given) : undefined;
  if (proto !== Object.prototype && proto !== null) {
    throw new InvalidOptionError('authMechanismProperties', '<not shown>', 'a plain object of mechanism properties ({ KEY: value })');
  }
  const rules = table[mechanism ?? 'SCRAM-SHA-256'];
  const known = Object.keys(rules);
  const copy = Object.create(null) as Record<string, unknown>;
  for (const name of Object.keys(given as object)) {
    const value: unknown = (given as Record<string, unknown>)[name];
    const rule = Object.prototype.hasOwnProperty.call(rules, name) ? rules[name] : undefined;
    if (rule === undefined) {
      const owner = (Object.keys(table) as AuthMechanism[]).find((m) => Object.prototype.hasOwnProperty.call(table[m], name));
      const of = mechanism ?? 'SCRAM (negotiated)';
      const allowed = known.length === 0 ? `absent: ${of} takes no mechanism properties` : `one of the properties of ${of}: ${known.join(', ')}`;
      const suggestion = owner === undefined ? closestOptionName(name, known) : undefined;
      const why = owner !== undefined ? `: it is a property of ${owner}` : suggestion !== undefined ? ` (did you mean ${suggestion}?)` : '';
      throw new InvalidOptionError(`authMechanismProperties.${name}`, '<not shown>', allowed, {
        message: `Invalid authMechanismProperties.${name}${why} (authMechanismProperties.${name} must be ${allowed})`,
        ...(suggestion === undefined ? {} : { suggestion }),
      });
    }
    if (!rule.valid(value)) throw new InvalidOptionError(`authMechanismProperties.${name}`, '<not shown>', rule.allowed);
    copy[name] = value;
  }
  return Object.keys(copy).length === 0 ? NO_PROPERTIES : Object.freeze(copy);
}

/** The two shapes of a {@link CredentialsInit}, as an InvalidOptionError for a value of another kind names them. */
export const CREDENTIALS_SHAPES = "a { username, password, source?, mechanism? } object (SCRAM, or mechanism 'PLAIN'), or { mechanism: 'MONGODB-X509', username? }";

/** The keys of a {@link CredentialsInit}. */
export const CREDENTIALS_INIT_NAMES = ['username', 'password', 'source', 'mechanism', 'mechanismProperties'] as const satisfies readonly (keyof CredentialsInit)[];
true satisfies ListsEveryOption<CredentialsInit, typeof CREDENTIALS_INIT_NAMES>;

const passwords = new WeakMap<MongoCredentials, string>();
/** The mechanism properties of each {@link MongoCredentials}, kept out of the instance as the password is. */
const mechanismPropertiesOf = new WeakMap<MongoCredentials, MechanismProperties>();

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
 * Makes the `username`, `source` and `mechanism` of `credentials` read-only (non-writable, non-configurable): what is
 * cached for credentials (SCRAM's salted passwords, MONGODB-OIDC's tokens, IdpInfo and refresh token) is for that user,
 * source and mechanism, and must never be sent for another one assigned later.
 */
function fixFields(credentials: MongoCredentials): void {
  for (const name of ['username', 'source', 'mechanism'] as const) {
    Object.defineProperty(credentials, name, { value: credentials[name], writable: false, configurable: false, enumerable: true });
  }
}

/**
 * Credentials for SCRAM, MONGODB-X509, PLAIN, MONGODB-AWS or MONGODB-OIDC authentication, validated at construction;
 * `username`, `source` and `mechanism` are read-only at run time too (a strict-mode assignment throws a TypeError).
 * The password is kept out of every enumerable property, JSON and `util.inspect` output. The salted passwords
 * derived from it are cached per instance, so reusing one instance for many connections derives each once.
 *
 * Source: auth spec, "MongoCredential", "SCRAM-SHA-1", "SCRAM-SHA-256", "MONGODB-X509", "Caching credentials in
 * SCRAM".
 */
export class MongoCredentials {
  /**
   * The user name, as given; undefined only with mechanism MONGODB-X509 when none was given (the server takes the
   * client certificate's subject).
   */
  readonly username: string | undefined;
  /**
   * The database that holds the user (authSource); `admin` unless given, `$external` for MONGODB-X509 and, unless
   * given, for PLAIN.
   */
  readonly source: string;
  /**
   * The mechanism to use; undefined to negotiate it (SCRAM-SHA-256 when the server lists it for the user, else
   * SCRAM-SHA-1).
   */
  readonly mechanism: AuthMechanism | undefined;

  /**
   * @throws {InvalidOptionError} for an `init` that is not an object (option `credentials`), a key of a plain object
   *   that is not one of {@link CredentialsInit}'s (named, with the closest one, its value not shown), a
   *   mechanism other than those of {@link AUTH_MECHANISMS}, an empty source; for SCRAM (a mechanism of
   *   {@link SCRAM_MECHANISMS}, or none) and PLAIN: an empty or non-string username, a non-string password (never
   *   shown: `"<not shown>"`), or (mechanism
   *   SCRAM-SHA-256 only) a password SASLprep refuses (a prohibited character, an unassigned code point, misplaced
   *   bidirectional characters; the message names the rule, never the password); for PLAIN, a username or password
   *   holding a NUL (U+0000) or a lone surrogate, which its saslStart cannot carry as given (the password never
   *   shown); for MONGODB-X509: a username given that is not a non-empty string, any password (never shown), or a
   *   source other than `$external`; for MONGODB-AWS: any username or password (the password never shown), or a
   *   source other than `$external`. A password for SCRAM-SHA-1, PLAIN or a negotiated mechanism is not otherwise
   *   checked: neither SCRAM-SHA-1 nor PLAIN SASLpreps it. For `mechanismProperties` the mechanism does not take, or
   *   values they refuse: see `checkMechanismProperties`. For MONGODB-OIDC: any password, a source other than
   *   `$external`, a username that is not a non-empty string, and the properties' combinations the auth spec refuses
   *   (no token source, or two of ENVIRONMENT, OIDC_CALLBACK and OIDC_HUMAN_CALLBACK; TOKEN_RESOURCE missing or empty for azure or gcp, or given
   *   for test or k8s; a username with an ENVIRONMENT other than azure; an OIDC_HUMAN_CALLBACK that is not a function; an
   *   ALLOWED_HOSTS that is not an array of non-empty strings).
   *
   * Source: auth spec, "Errors" (SHOULD raise an error as early as possible for an invalid credential; MUST when
   * required information is missing), "SCRAM-SHA-256" (passwords MUST be prepared with SASLprep), "SCRAM-SHA-1" (MUST
   * NOT be), "MONGODB-X509" (no error without a username; password MUST NOT be specified; source MUST be
   * "$external"), "PLAIN" (username MUST be specified and non-zero length; password MUST be specified; source
   * defaults to `$external`); RFC 4616, section 2 (authcid and passwd are UTF-8 without NUL).
   */
  constructor(init: CredentialsInit) {
    requireOptionsObject('credentials', init, CREDENTIALS_SHAPES, true);
    // A plain object takes only the CredentialsInit keys (a misspelt `source` must not fall back to admin); a class
    // instance (credentials of another copy of this library, say) is read through its properties.
    const proto: unknown = Object.getPrototypeOf(init);
    if (proto === Object.prototype || proto === null) rejectUnknownOptions(init, CREDENTIALS_INIT_NAMES, 'credentials', 'credentials.');
    // Each field read once, none from Object.prototype (see optionValue).
    const username = optionValue(init, 'username');
    const password = optionValue(init, 'password');
    const mechanism = optionValue(init, 'mechanism');
    if (mechanism !== undefined && !AUTH_MECHANISMS.includes(mechanism)) {
      throw new InvalidOptionError('authMechanism', mechanism, `one of ${AUTH_MECHANISMS.join(', ')}`);
    }
    const mechanismProperties = checkMechanismProperties(mechanism, optionValue(init, 'mechanismProperties'));
    // MONGODB-AWS: credentials come from the environment, an AWS endpoint or the AWS_CREDENTIAL_PROVIDER, never from
    // the URI or the options (auth spec, "Obtaining Credentials": the driver MUST raise an error).
    if (mechanism === 'MONGODB-AWS') {
      if (username !== undefined || password !== undefined) {
        throw new InvalidOptionError(username !== undefined ? 'username' : 'password', username !== undefined ? username : '<not shown>', 'none for MONGODB-AWS: AWS credentials come from the environment variables, the AWS_CREDENTIAL_PROVIDER mechanism property, the AWS SDK or an AWS endpoint, never from the URI or the credentials option', {
          message: `Invalid ${username !== undefined ? 'username' : 'password'} for MONGODB-AWS: AWS credentials come from the environment variables (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), the AWS_CREDENTIAL_PROVIDER mechanism property, the AWS SDK (@aws-sdk/credential-providers, when installed) or an AWS endpoint, never from the URI or the credentials option`,
        });
      }
      const awsSource = optionValue(init, 'source') ?? EXTERNAL_SOURCE;
      if (awsSource !== EXTERNAL_SOURCE) throw new InvalidOptionError('authSource', awsSource, `${EXTERNAL_SOURCE} for MONGODB-AWS`);
      mechanismPropertiesOf.set(this, mechanismProperties);
      this.username = undefined;
      this.source = EXTERNAL_SOURCE;
      this.mechanism = mechanism;
      fixFields(this);
      return;
    }
    // MONGODB-X509 or MONGODB-OIDC here (MONGODB-AWS has returned above).
    const externalUser = isExternalMechanism(mechanism);
    const oidc = mechanism === 'MONGODB-OIDC';
    if (oidc) checkOidcProperties(mechanismProperties, username);
    if (externalUser ? username !== undefined && (typeof username !== 'string' || username === '') : typeof username !== 'string' || username === '') {
      throw new InvalidOptionError('username', username, oidc ? 'a non-empty string, or none' : externalUser ? 'a non-empty string (the client certificate\'s subject, RFC 2253), or none' : 'a non-empty string');

    }
    if (externalUser ? password !== undefined : typeof password !== 'string') {
      throw new InvalidOptionError('password', '<not shown>', oidc ? 'none for MONGODB-OIDC: the access token is the credential' : externalUser ? 'none for MONGODB-X509: the client certificate is the credential' : 'a string');
    }
    const source = optionValue(init, 'source') ?? (externalUser || mechanism === 'PLAIN' ? EXTERNAL_SOURCE : 'admin');
    if (typeof source !== 'string' || source === '') throw new InvalidOptionError('authSource', source, 'a non-empty database name');
    if (externalUser && source !== EXTERNAL_SOURCE) throw new InvalidOptionError('authSource', source, `${EXTERNAL_SOURCE} for ${mechanism}`);
    // PLAIN sends `\0<username>\0<password>` as UTF-8 (RFC 4616: neither may hold a NUL). A NUL would move the field
    // boundary: "alice\0x" is read by the server as the user "alice" with the password "x\0<password>" (which a mongod
    // cuts at its NUL); a lone surrogate would be sent as U+FFFD, a password the user did not give.
    if (mechanism === 'PLAIN') {
      const unsendable = 'without NUL (U+0000) or lone surrogate, for PLAIN: its saslStart sends it as UTF-8 between NULs';
      if (!plainSendable(username as string)) throw new InvalidOptionError('username', username, `a user name ${unsendable}`);
      if (!plainSendable(password as string)) throw new InvalidOptionError('password', '<not shown>', `a password ${unsendable}`);
    }
    // SASLprep is loaded with the credentials, before anything that blames the password (here, or authentication,
    // which SASLpreps it for SCRAM-SHA-256, negotiated too): a module that cannot be loaded is no fault of the input.
    if (!externalUser) {
      const saslprep = saslprepFunction();
      // SCRAM-SHA-256 SASLpreps the password: one SASLprep refuses could never authenticate. Only when the mechanism
      // is set: a negotiated one may be SCRAM-SHA-1, which uses the password as it is. The message names the rule
      // broken.
      if (mechanism === 'SCRAM-SHA-256') {
        try {
          saslprep(password as string);
        } catch (error) {
          const why = `SASLprep (RFC 4013) refuses it: ${(error as Error).message}`;
          throw new InvalidOptionError('password', '<not shown>', 'a password SASLprep accepts, for SCRAM-SHA-256', {
            message: `Invalid password for SCRAM-SHA-256: ${why}`,
          });
        }
      }
      passwords.set(this, password as string);
    }
    mechanismPropertiesOf.set(this, mechanismProperties);
    this.username = username;
    this.source = source;
    this.mechanism = mechanism;
    fixFields(this);
  }

  /**
   * The mechanism properties (a frozen object without a prototype, empty when none were given), by the auth spec's
   * names. Not an own property: they never show in JSON or inspection.
   */
  get mechanismProperties(): MechanismProperties {
    return mechanismPropertiesOf.get(this) ?? NO_PROPERTIES;
  }

  /**
   * The password (not an own property: it never shows in JSON or inspection); undefined for MONGODB-X509, which has
   * none.
   */
  get password(): string | undefined {
    return passwords.get(this);
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

  /**
   * The JSON form: `username` (when set), `source` and (when set) `mechanism`; never the password, nor the mechanism
   * properties.
   */
  toJSON(): {
    /** As {@link MongoCredentials.username}, present only when set. */
    username?: string;
    /** As {@link MongoCredentials.source}. */
    source: string;
    /** As {@link MongoCredentials.mechanism}, present only when set. */
    mechanism?: AuthMechanism;
  } {
    return { ...(this.username !== undefined ? { username: this.username } : {}), source: this.source, ...(this.mechanism ? { mechanism: this.mechanism } : {}) };
  }

  /**
   * What `util.inspect` (and `console.log`) shows: `MongoCredentials` and the JSON form, never the password nor the
   * mechanism properties.
   */
  [inspect.custom](): string {
    return `MongoCredentials ${inspect(this.toJSON())}`;
  }
}

/** Whether `text` reaches a PLAIN server as it is: no NUL (a field separator of RFC 4616) and no lone surrogate. */
function plainSendable(text: string): boolean {
  return !/[\0\p{Cs}]/u.test(text);
}
