/**
 * Connection strings: a `mongodb://` URI parsed with `mongodb-connection-string-url` into hosts, pool options,
 * connection options and client options, with warnings for what is ignored.
 *
 * Invalid values in a URI are warnings and are ignored (connection string spec: "Any invalid Values for a given key
 * MUST be ignored and MUST log a WARN level message"); so are unknown keys (with the closest known key, when one is
 * close) and keys this library does not support; so is PLAIN authenticating on the URI's database for want of an
 * authSource (as the auth spec says it does, though LDAP users are in `$external`). A client logs each warning as a `warn` message of its `client` log
 * component. Security-relevant conflicts, impossible topologies, a read preference that cannot be (a positive
 * maxStalenessSeconds or non-empty tags with mode primary), a key with no value, and credentials options that
 * cannot apply (an empty authSource, a SCRAM or PLAIN authMechanism without credentials, a MONGODB-X509 password) are
 * errors.
 *
 * A `mongodb+srv://` URI is parsed here as it is written (its one host name, srvServiceName, srvMaxHosts, TLS on by
 * default); the DNS queries that give its hosts and the TXT record's options are made by the client (`connect()`, see
 * `lib/client/srv.ts`), which then reads the `mongodb://` URI they make with this same parser.
 *
 * Source: connection string spec ("Host", "Key Value Pair", "Keys", "Values", "Repeated keys"); URI options spec
 * (option list, "Conflicting TLS options", "directConnection URI option with multiple seeds or SRV URI"); initial DNS
 * seedlist discovery spec ("URI Validation", "srvServiceName", "srvMaxHosts", "Validation Before Querying DNS"); load balancer spec ("URI Validation"); auth spec ("Credential delimiter
 * in URI implies authentication", "Errors", "Connection String Options"); max staleness spec, "API"; server selection
 * spec, "tag_sets"; Stable API spec, "No URI Options" (`serverApi`
 * in a URI is an error, as in the official driver; `apiVersion`, `apiStrict`, `apiDeprecationErrors` are ignored with
 * a warning).
 */
import type { ConnectionString } from 'mongodb-connection-string-url';
import { connectionStringClass } from './lazy-dependencies';
import { parseAddress } from './address';
import { AUTH_MECHANISMS, isExternalMechanism, MECHANISM_PROPERTIES, MongoCredentials, type AuthMechanism, type CredentialsInit } from './auth/credentials';
import type { ConnectionOptions } from './connection/connect';
import { CONNECTION_OPTION_NAMES } from './connection/connection-options';
import { MAX_APP_NAME_BYTES } from './connection/handshake';
import { proxySettings } from './connection/proxy';
import { API_PARAMETER_NAMES } from './connection/server-api';
import { compressorUnavailable, SUPPORTED_COMPRESSORS } from './connection/op-compressed';
import { InvalidOptionError } from './errors';
import { isMaxStalenessSeconds, MAX_STALENESS_SECONDS_ALLOWED, READ_PREFERENCE_MODES, readPreferenceFrom, type ReadPreference, type ReadPreferenceMode } from './read-preference';
import { BACKGROUND_OPTION_NAMES, closestOptionName, DEFAULT_POOL_OPTIONS, optionValue, POOL_EXTENSION_OPTION_NAMES, type PoolOptions } from './options';
import { MAX_TIMER_DELAY_MS } from './scheduler';

/**
 * Client-level options a URI can set (the same names as in {@link ClientOptions}, which override them). Invalid values
 * in a URI are ignored with a warning; `loadBalanced=true` or `directConnection=true` with several hosts is an
 * {@link InvalidOptionError}.
 *
 * Source: URI options spec (heartbeatFrequencyMS, serverSelectionTimeoutMS, localThresholdMS, loadBalanced,
 * directConnection, serverMonitoringMode;
 * "directConnection URI option with multiple seeds or SRV URI"); load balancer spec, "URI Validation".
 */
export interface UriClientOptions {
  /** Time between monitor checks, in ms; an integer >= 500. */
  heartbeatFrequencyMS?: number | undefined;
  /**
   * How long `command()` waits for a suitable server, in ms; an integer from 1 to 2147483647 (what one timer holds).
   */
  serverSelectionTimeoutMS?: number | undefined;
  /**
   * The latency window's size, in ms: server selection takes a server whose average RTT is at most this much above
   * the shortest among the suitable servers; an integer >= 0. Default 15.
   */
  localThresholdMS?: number | undefined;
  /** Load-balanced mode: one pool, no monitor. */
  loadBalanced?: boolean | undefined;
  /**
   * Whether to connect to the deployment in Single topology: `true` (an error with several hosts, or with
   * loadBalanced) monitors the one host given and no other (no server discovery), its server suitable whatever its
   * type once its pool is ready, but not while Unknown (after a state change error, until its next check; with a
   * `replicaSet`, while its last check named no set or another one). `false` or unset: the hosts given are seeds, and
   * server discovery adds the members a replica set's replies list and removes the servers that do not belong (see
   * {@link Client}). Source: server discovery and monitoring spec, "Initial TopologyType", "TopologyType Single".
   */
  directConnection?: boolean | undefined;
  /** Streaming or polling server monitoring: `auto`, `stream` or `poll` (see `ServerMonitoringMode`). */
  serverMonitoringMode?: 'auto' | 'stream' | 'poll' | undefined;
}

/** A parsed connection string. */
export interface ParsedConnectionString {
  /**
   * Every host, normalized to `host:port`, or a Unix domain socket path (percent-decoded, case kept, holding a `/`
   * and ending in `.sock`; `mongodb-27017.sock` is a host name), each once (a host listed again is a warning).
   */
  readonly hosts: readonly string[];
  /**
   * Whether it is a `mongodb+srv://` URI: `hosts` is then its one host name (no port), whose SRV and TXT records give
   * the servers and default options when a client connects (see `connect()`).
   */
  readonly isSRV: boolean;
  /**
   * `srvServiceName` of a `mongodb+srv://` URI, when given: the SRV service queried (`_{srvServiceName}._tcp.{host}`;
   * default "mongodb"). Letters, digits and single hyphens, at most 62 characters; another value is ignored with a
   * warning.
   *
   * Source: initial DNS seedlist discovery spec, "srvServiceName".
   */
  readonly srvServiceName?: string;
  /**
   * `srvMaxHosts` of a `mongodb+srv://` URI, when given: at most this many of the SRV records' hosts are used, picked
   * at random (0: all); an integer >= 0, another value ignored with a warning.
   *
   * Source: initial DNS seedlist discovery spec, "srvMaxHosts".
   */
  readonly srvMaxHosts?: number;
  /** `appName`, when given. */
  readonly appName?: string;
  /** The CMAP pool options it sets, under the spec's names. */
  readonly poolOptions: Readonly<PoolOptions>;
  /**
   * The connection options it sets (credentials, TLS, timeouts, compression, appName). connectTimeoutMS and
   * socketTimeoutMS are integers from 0 to 2147483647 ms; a value outside that is a warning and is ignored.
   */
  readonly connectionOptions: Readonly<ConnectionOptions>;
  /** The client options it sets. */
  readonly clientOptions: Readonly<UriClientOptions>;
  /**
   * `replicaSet`, when given (its last valid value: a non-empty string). The name of the replica set the hosts belong
   * to: the TopologyType is ReplicaSet from the start, and server selection takes only a primary of that set (see
   * `suitableServers`); with `directConnection=true` the TopologyType is Single, and its server is taken only while
   * its last check named that set; it makes load-balanced mode an error, whether `loadBalanced` comes from the URI or
   * from the options of `connect()`.
   *
   * Source: URI options spec ("replicaSet"); server discovery and monitoring spec, "Initial TopologyType", "Initial
   * setName", "Verifying setName with TopologyType Single"; load balancer spec, "URI Validation".
   */
  readonly replicaSet?: string;
  /**
   * The read preference the URI's `readPreference`, `readPreferenceTags` and `maxStalenessSeconds` give, checked and
   * frozen as `readPreferenceFrom` makes it (`{ mode, tags?, maxStalenessSeconds? }`); undefined when the URI gives
   * none of the three validly. The mode is `primary` when only tags or maxStalenessSeconds are given.
   *
   * - `readPreference`: one of the five modes as written, lowercase camelCase (`secondaryPreferred`); another value
   *   (`SECONDARY`, `Secondary`) is ignored with a warning that names the closest mode. A repeated one takes its last
   *   valid value, as any other key.
   * - `readPreferenceTags`: a list, never a repeated key: each instance is one tag set, in the order written;
   *   `dc:ny,rack:1` is `{ dc: 'ny', rack: '1' }` (each pair split at its first ":"; names and values case-sensitive),
   *   the empty value the tag set `{}` that every server matches. One that is not such pairs (`invalid`, a trailing
   *   ",", a name given twice) is ignored with a warning; the others stay, in order. Tags whose first tag set is `{}`
   *   count as none (`tags` undefined), as that set matches every candidate.
   * - `maxStalenessSeconds`: an integer from 1 to 2147483647 (a BSON int32, as `$readPreference` carries it), or -1 for
   *   no maximum (`maxStalenessSeconds` undefined). Another value (not an integer, 0, below -1, beyond an int32) is
   *   ignored with a warning, 0 as -2 is (too low: no secondary could meet it, and it
   *   is not the -1 that means no maximum). Whether it is at least 90 and at least (heartbeatFrequencyMS + 10 s) / 1000 is checked by server
   *   selection in a replica set, not here (a sharded cluster takes a smaller one).
   *
   * Errors (the URI is invalid): a maxStalenessSeconds >= 1, or a non-empty tag set, with mode `primary`, given or by
   * default (no valid readPreference: a mode ignored with a warning leaves primary).
   *
   * A TXT record of a `mongodb+srv://` URI gives none of them (only authSource, replicaSet and loadBalanced: any other
   * key there is an error, see `lib/client/srv.ts`).
   *
   * Source: URI options spec (readPreference: "must be lowercase camelCase"; readPreferenceTags: "can be specified
   * multiple times; each instance of this key is a separate tag set", "only valid if the read preference mode is not
   * primary"; maxStalenessSeconds), and its read-preference-options tests (an invalid readPreferenceTags, a non-numeric
   * or too low maxStalenessSeconds: warnings); connection string spec, "Values" (lists; key value pairs; "Any invalid
   * Values for a given key MUST be ignored and MUST log a WARN level message"); max staleness spec, "API" (-1 means no
   * maximum; "A connection string combining a positive maxStalenessSeconds with read preference mode "primary" MUST be
   * considered invalid; this includes connection strings with no explicit read preference mode"); server selection
   * spec, "tag_sets" ("Clients MUST raise an error if a non-empty tag set is given in tag_sets and the mode field is
   * 'primary'"), "maxStalenessSeconds"; initial DNS seedlist discovery spec, "Default Connection String Options".
   */
  readonly readPreference?: ReadPreference;
  /**
   * What was ignored and why: unknown or unsupported keys, rxcmap's own options (taken only in `connect()`'s options
   * object), invalid values, repeated keys (readPreferenceTags excepted: a list). Never shows a password.
   */
  readonly warnings: readonly string[];
  /**
   * The URI with its credentials replaced, and the value of every key that is not a URI option of the specs (and of
   * `authMechanismProperties`): safe to print.
   */
  readonly redacted: string;
}

type Target = 'pool' | 'connection' | 'client' | 'srv' | 'topology' | 'readPreference';
type Kind = 'readPreferenceMode' | 'tagSet' | 'maxStaleness' | 'monitoringMode' | 'count' | 'positive' | 'ms' | 'timer' | 'selection' | 'heartbeat' | 'bool' | 'string' | 'appName' | 'compressors' | 'zlib' | 'mechanism' | 'source' | 'proxy' | 'proxyPort' | 'serviceName' | 'properties';

/**
 * The keys this library understands: canonical name, where it goes, and what it accepts. A `timer` or `selection`
 * value arms one Node timer, so it is at most 2147483647 ms (a longer timer runs after 1 ms); the pool's `ms` options
 * are armed as chains of timers and take any integer >= 0.
 */
const KEYS: Record<string, { name: string; target: Target; kind: Kind }> = {};
function key(name: string, target: Target, kind: Kind): void {
  KEYS[name.toLowerCase()] = { name, target, kind };
}
key('maxPoolSize', 'pool', 'count');
key('minPoolSize', 'pool', 'count');
key('maxIdleTimeMS', 'pool', 'ms');
key('maxConnecting', 'pool', 'positive');
key('waitQueueTimeoutMS', 'pool', 'ms');
key('appName', 'connection', 'appName');
key('connectTimeoutMS', 'connection', 'timer');
key('socketTimeoutMS', 'connection', 'timer');
key('compressors', 'connection', 'compressors');
key('zlibCompressionLevel', 'connection', 'zlib');
key('tls', 'connection', 'bool');
key('ssl', 'connection', 'bool');
key('tlsCAFile', 'connection', 'string');
key('tlsCertificateKeyFile', 'connection', 'string');
key('tlsCertificateKeyFilePassword', 'connection', 'string');
key('tlsCRLFile', 'connection', 'string');
key('tlsAllowInvalidCertificates', 'connection', 'bool');
key('tlsAllowInvalidHostnames', 'connection', 'bool');
key('tlsInsecure', 'connection', 'bool');
key('authSource', 'connection', 'source');
key('authMechanism', 'connection', 'mechanism');
key('authMechanismProperties', 'connection', 'properties');
key('heartbeatFrequencyMS', 'client', 'heartbeat');
key('serverSelectionTimeoutMS', 'client', 'selection');
key('localThresholdMS', 'client', 'ms');
key('loadBalanced', 'client', 'bool');
key('directConnection', 'client', 'bool');
key('serverMonitoringMode', 'client', 'monitoringMode');
key('proxyHost', 'connection', 'proxy');
key('proxyPort', 'connection', 'proxyPort');
key('proxyUsername', 'connection', 'proxy');
key('proxyPassword', 'connection', 'proxy');
key('srvServiceName', 'srv', 'serviceName');
key('srvMaxHosts', 'srv', 'count');
key('replicaSet', 'topology', 'string');
key('readPreference', 'readPreference', 'readPreferenceMode');
key('readPreferenceTags', 'readPreference', 'tagSet');
key('maxStalenessSeconds', 'readPreference', 'maxStaleness');

/** The canonical names of {@link KEYS}, for "did you mean" suggestions. */
const KNOWN_NAMES = Object.values(KEYS).map((k) => k.name);

/**
 * rxcmap's own options that `connect()` takes in its options object but a connection string does not (by lower-case
 * name): a URI key with such a name is ignored with a warning that says where the option goes, not as an unknown key.
 */
const OPTIONS_OBJECT_ONLY = new Map<string, string>(
  [...POOL_EXTENSION_OPTION_NAMES, ...BACKGROUND_OPTION_NAMES, ...CONNECTION_OPTION_NAMES]
    .filter((name) => KEYS[name.toLowerCase()] === undefined)
    .map((name) => [name.toLowerCase(), name]),
);

/**
 * The command's API parameters (lower case): ignored in a URI with a warning that names the serverApi option. Source:
 * Stable API spec, "No URI Options".
 */
const API_PARAMETERS: ReadonlySet<string> = new Set(API_PARAMETER_NAMES.map((name) => name.toLowerCase()));

/** Keys of the URI options spec that this library accepts but does not act on. */
const UNSUPPORTED = new Set(
  [
    'journal', 'readConcernLevel',
    'retryReads', 'retryWrites', 'serverSelectionTryOnce', 'socketCheckIntervalMS',
    'timeoutMS', 'tlsDisableCertificateRevocationCheck',
    'tlsDisableOCSPEndpointCheck', 'w', 'wTimeoutMS', 'waitQueueMultiple', 'waitQueueSize', 'maxAdaptiveRetries',
    'enableOverloadRetargeting', 'uuidRepresentation',
  ].map((k) => k.toLowerCase()),
);

/**
 * The TLS keys that must not appear together: each key, then those it conflicts with. Source: URI options spec,
 * "Conflicting TLS options" (items 1 to 7; item 8, tls and ssl, is checked on its own).
 */
const TLS_CONFLICTS: readonly (readonly [string, readonly string[]])[] = [
  ['tlsInsecure', ['tlsAllowInvalidCertificates', 'tlsAllowInvalidHostnames', 'tlsDisableOCSPEndpointCheck', 'tlsDisableCertificateRevocationCheck']],
  ['tlsAllowInvalidCertificates', ['tlsDisableOCSPEndpointCheck', 'tlsDisableCertificateRevocationCheck']],
  ['tlsDisableOCSPEndpointCheck', ['tlsDisableCertificateRevocationCheck']],
];

/** The keys whose values are never shown: in warnings, errors, or the redacted URI. */
const SECRET = new Set(['tlscertificatekeyfilepassword', 'proxypassword', 'authmechanismproperties']);

/**
 * Parses a `mongodb://` or `mongodb+srv://` connection string.
 *
 * @throws {InvalidOptionError} (option `uri`, or the option concerned) when it is not a string, or not a valid
 *   connection string (a query key with no "=" and value included; a Unix domain socket path whose slashes are not URL encoded, named with
 *   its encoded form); for conflicting TLS options, whatever their values: `tlsInsecure` with
 *   `tlsAllowInvalidCertificates`, `tlsAllowInvalidHostnames`, `tlsDisableOCSPEndpointCheck` or
 *   `tlsDisableCertificateRevocationCheck`, `tlsAllowInvalidCertificates` with either of the last two, those two
 *   together, instances of `tls` and `ssl` (a repeated one included) that do not all have the same value; for
 *   `srvServiceName` or `srvMaxHosts` in a `mongodb://` URI; for a positive `srvMaxHosts` with `replicaSet` or
 *   `loadBalanced=true`; for a port or several hosts in a `mongodb+srv://` URI; for `directConnection=true` with several
 *   hosts or an SRV URI; for
 *   `loadBalanced=true` with several hosts, `replicaSet` or `directConnection=true`; for an authMechanism other than
 *   SCRAM-SHA-1, SCRAM-SHA-256, MONGODB-X509, PLAIN, MONGODB-AWS (which takes no user name or password: one in the
 *   URI is an error) and MONGODB-OIDC (see MongoCredentials for its rules), or a SCRAM or PLAIN one without credentials in the URI (PLAIN
 *   credentials are in the authSource, else the URI's database, else `$external`); for MONGODB-X509 with
 *   a password (`user:password@`) or an authSource other than `$external`; for an empty authSource (`authSource=`,
 *   with or without credentials); for credentials with an empty user name, or for PLAIN with a NUL (`%00`) in the user name or password (see MongoCredentials); for an
 *   `authMechanismProperties` key (option `authMechanismProperties.<KEY>`) the credentials' mechanism does not take, or
 *   one only the credentials option may set (a list that is not `KEY:value` pairs, each split at its first ':', is
 *   ignored with a warning, as is one without credentials; its values are never shown); for a proxy key given twice with different
 *   values, a proxyPort that is not an integer from 1 to 65535, and the proxy options the SOCKS5 support spec refuses
 *   together or alone (see `proxySettings`); for a `serverApi` key (any case: a Stable API version is declared only
 *   in code); for a `maxStalenessSeconds` >= 1 (option `maxStalenessSeconds`) or a non-empty `readPreferenceTags` tag
 *   set (option `readPreferenceTags`) with read preference mode primary, given or by default (see
 *   {@link ParsedConnectionString.readPreference}). Messages never contain the password (nor the proxy's).
 */
export function parseConnectionString(uri: string): ParsedConnectionString {
  return parse(uri, undefined, undefined, true);
}

/** What the connection string spec forbids in a database name once decoded: `/`, `\\`, space, `"` and `$`. */
const FORBIDDEN_IN_DATABASE = /[/\\ "$]/;

/**
 * The auth database of a connection string (`path`: what follows the hosts' `/`, without it), percent-decoded.
 *
 * @throws {InvalidOptionError} (option `database`) when its percent-encoding is malformed, or it holds a character a
 *   database name cannot (`/`, `\\`, space, `"`, `$`).
 *
 * Source: connection string spec, "Auth Database" (URL decoded by the parser; the characters that MUST NOT appear).
 */
function authDatabase(path: string): string {
  const allowed = 'a percent-encoded database name without /, \\, space, " or $ once decoded (the auth database of the connection string)';
  let name: string;
  try {
    name = decodeURIComponent(path);
  } catch {
    throw new InvalidOptionError('database', path, allowed);
  }
  if (FORBIDDEN_IN_DATABASE.test(name)) throw new InvalidOptionError('database', name, allowed);
  return name;
}

/**
 * {@link parseConnectionString} for a client given `credentials` as an option (`connect(uri, { credentials })`), which
 * take the place of any in the URI. A URI without credentials may then set how those authenticate: its
 * `authMechanism` and `authSource` (else its database, as for credentials in the URI) apply to the option's
 * credentials where they leave them unset; one the credentials set otherwise (a {@link MongoCredentials} instance
 * always sets its source, admin by default) is ignored with a warning. The result's `connectionOptions.credentials`
 * are a {@link MongoCredentials}: the option's own instance when the URI changes nothing in it, else one made from the
 * option's credentials so completed (a plain object always becomes one, shared by every pool of the client).
 *
 * @throws {InvalidOptionError} as {@link parseConnectionString} does, but for an authMechanism without credentials in
 *   the URI; for MONGODB-X509 (the URI's or the credentials') with a password or a source other than `$external`
 *   (which is its default, whatever the URI's database).
 *
 * Source: URI options spec (authMechanism, authSource); extension: options given in code complete the URI's, as in the
 * official Node.js driver.
 */
export function parseConnectionStringWithCredentials(uri: string, credentials: MongoCredentials | CredentialsInit): ParsedConnectionString {
  return parse(uri, credentials, undefined, true);
}

/**
 * {@link parseConnectionString}, or {@link parseConnectionStringWithCredentials} when `options.credentials` is given,
 * for a client whose options set `options.maxPoolSize`: the URI's minPoolSize is then judged against that maxPoolSize
 * (which overrides the URI's), and ignored with a warning only when it exceeds it (maxPoolSize 0: no limit).
 *
 * @throws {InvalidOptionError} as {@link parseConnectionString} (or {@link parseConnectionStringWithCredentials}).
 *
 * Source: CMAP spec, "Connection Pool Options" (minPoolSize at most maxPoolSize); connection string spec, "Values"
 * (an invalid value is ignored with a warning); extension: options given in code override the URI's.
 */
export function parseConnectionStringForClient(uri: string, options: { readonly credentials?: MongoCredentials | CredentialsInit; readonly maxPoolSize?: number }): ParsedConnectionString {
  // The proxy options that must come together are checked once merged with the options object (checkConnectionOptions).
  return parse(uri, options.credentials, options.maxPoolSize, false);
}

/** `proxyAlone`: whether the URI's proxy options must be complete by themselves (no options object completes them). */
function parse(uri: string, given: MongoCredentials | CredentialsInit | undefined, maxPoolSizeOption: number | undefined, proxyAlone: boolean): ParsedConnectionString {
  // Called from JavaScript, the URI may be anything: only a string is parsed (a URL object, say, is refused too).
  if (typeof uri !== 'string') throw new InvalidOptionError('uri', uri, 'a string: a mongodb:// connection string');
  rejectUnescapedSocketPath(uri);
  const ConnectionStringParser = connectionStringClass();
  let parsed: ConnectionString;
  try {
    parsed = new ConnectionStringParser(hashesAsText(uri));
  } catch (error) {
    throw new InvalidOptionError('uri', '<connection string not shown>', `a valid mongodb:// connection string (${parserMessage(error)})`);
  }
  rejectKeysWithoutValue(parsed.search);
  const warnings: string[] = [];
  // No prototype: an option the URI does not set reads as undefined, never as a value put on Object.prototype.
  const pool = Object.create(null) as Record<string, unknown>;
  const connection = Object.create(null) as Record<string, unknown>;
  const client = Object.create(null) as Record<string, unknown>;
  const srv = Object.create(null) as Record<string, unknown>;
  const topology = Object.create(null) as Record<string, unknown>;
  const readPreference = Object.create(null) as Record<string, unknown>;
  /** The record of each Target. */
  const targets: Record<Target, Record<string, unknown>> = { pool, connection, client, srv, topology, readPreference };
  /** Every valid readPreferenceTags, in order: each instance of the key is one tag set (a list, not a repeated key). */
  const tagSets: Record<string, string>[] = [];
  /** The last readPreference ignored for a value that is no mode, as its warning quotes it: the error of a URI left primary names it. */
  let ignoredMode: string | undefined;
  const seen = new Map<string, string>();
  /** Every instance of tls and ssl, in order: a repeated one included (URI options spec, item 8). */
  const tlsAndSsl: [string, string][] = [];

  for (const [rawKey, value] of parsed.searchParams) {
    const lower = keyLowerCase(rawKey);
    // Stable API spec, "No URI Options": a declared API version comes only from code. The official driver refuses a
    // URI's serverApi alike (MongoParseError); ignoring it would leave the application without the version it meant.
    if (lower === 'serverapi') {
      throw new InvalidOptionError(rawKey, value, `absent from the connection string: a Stable API version is declared only by the serverApi option of connect() (ServerApiVersion)`);
    }
    if (lower === 'tls' || lower === 'ssl') tlsAndSsl.push([rawKey, value]);
    const shown = SECRET.has(lower) ? '<not shown>' : JSON.stringify(value);
    // readPreferenceTags is a list: each instance is a tag set, none replaces another (connection string spec, "Values").
    if (seen.has(lower) && seen.get(lower) !== value && KEYS[lower]?.kind !== 'tagSet') {
      // The proxy says where every connection goes: which of two proxies (or ports, or users) is no guess to make.
      if (KEYS[lower]?.kind === 'proxy' || KEYS[lower]?.kind === 'proxyPort') {
        // The value itself (the error quotes it), not the quoted text a warning shows.
        throw new InvalidOptionError(KEYS[lower].name, SECRET.has(lower) ? '<not shown>' : value, 'given once (or each time with the same value)');
      }
      // The last valid one: an invalid value is ignored (below), so an earlier valid one stays.
      warnings.push(`${rawKey} is given more than once; using the last valid value`);
    }
    seen.set(lower, value);
    const spec = KEYS[lower];
    if (spec === undefined) {
      const objectOnly = OPTIONS_OBJECT_ONLY.get(lower);
      if (UNSUPPORTED.has(lower)) {
        warnings.push(`${rawKey} is not supported by rxcmap and is ignored`);
      } else if (API_PARAMETERS.has(lower)) {
        warnings.push(`${rawKey} is ignored: a Stable API version is declared only by the serverApi option of connect(), never by the connection string`);
      } else if (objectOnly !== undefined) {
        warnings.push(`${rawKey} is ignored: it is not a connection string option; give ${objectOnly} in the options of connect()`);
      } else {
        const suggestion = closestOptionName(rawKey, KNOWN_NAMES);
        const hint = suggestion === undefined ? '' : ` (did you mean ${suggestion}?)`;
        warnings.push(`unknown option ${rawKey} is ignored${hint}`);
      }
      continue;
    }
    const converted = convert(spec.kind, value);
    if (converted.error !== undefined) {
      if (spec.kind === 'readPreferenceMode') ignoredMode = shown;
      warnings.push(`${spec.name}=${shown} is ignored: ${spec.name} must be ${converted.error}`);
      continue;
    }
    if (converted.warning !== undefined) warnings.push(converted.warning);
    if (spec.kind === 'tagSet') {
      tagSets.push(converted.value as Record<string, string>);
      continue;
    }
    targets[spec.target][spec.name] = converted.value;
  }

  // Judged against the maxPoolSize the pools will have: the options' (which override the URI's), else the URI's, else
  // the default. A URI value is never an error, even where only the options or the default make it too large.
  const maxPoolSize = maxPoolSizeOption ?? (typeof pool.maxPoolSize === 'number' ? pool.maxPoolSize : DEFAULT_POOL_OPTIONS.maxPoolSize);
  if (maxPoolSize > 0 && typeof pool.minPoolSize === 'number' && pool.minPoolSize > maxPoolSize) {
    const from = maxPoolSizeOption !== undefined ? 'the maxPoolSize option' : typeof pool.maxPoolSize === 'number' ? 'maxPoolSize' : 'the default maxPoolSize';
    warnings.push(`minPoolSize=${pool.minPoolSize} is ignored: it must be <= ${from} (${maxPoolSize})`);
    delete pool.minPoolSize;
  }

  // Conflicting TLS options are errors (URI options spec), whatever their values, even for the two keys this library
  // does not act on: each pair weakens certificate checks in two ways that contradict or duplicate each other.
  for (const [option, others] of TLS_CONFLICTS) {
    const other = others.find((o) => seen.has(o.toLowerCase()));
    if (seen.has(option.toLowerCase()) && other !== undefined) {
      throw new InvalidOptionError(option, seen.get(option.toLowerCase()), `not combined with ${other}`);
    }
  }
  // Item 8: every instance of tls and ssl, a repeated tls or ssl included, has the same value; otherwise whether the
  // connections use TLS would hang on which instance came last.
  const differing = tlsAndSsl.find(([, value]) => value !== tlsAndSsl[0][1]);
  if (differing !== undefined) {
    const [firstKey, firstValue] = tlsAndSsl[0];
    throw new InvalidOptionError(differing[0].toLowerCase(), differing[1], `the same value as ${firstKey}=${firstValue} (every tls and ssl of a connection string must have the same value)`);
  }
  if (connection.ssl !== undefined) {
    connection.tls ??= connection.ssl;
    delete connection.ssl;
  }
  if (parsed.isSRV && connection.tls === undefined) connection.tls = true;

  const listed = parsed.hosts.map((host) => {
    try {
      // A Unix domain socket path must be percent-encoded in the URI (connection string spec, "Host"): its '/' would
      // end the host list. Decoded here, so the pool connects to /tmp/mongodb-27017.sock, not to a relative path
      // named %2Ftmp%2Fmongodb-27017.sock.
      return parseAddress(decodeHost(host)).address;
    } catch (error) {
      // With credentials in the URI, a "host" may be part of them: a password with an unescaped '/' ends the
      // authority early, leaving "user:password" where the host list should be. Never echo it then.
      if (!uri.includes('@')) throw error;
      throw new InvalidOptionError(
        'uri',
        '<connection string not shown>',
        "a host list of host[:port] entries (a user name or password containing '/', ':', '@', '?' or '#' must be percent-encoded)",
      );
    }
  });
  // One server, one pool and one monitor: a host listed twice is used once.
  const hosts = [...new Set(listed)];
  for (const host of hosts) {
    const times = listed.filter((h) => h === host).length;
    if (times > 1) warnings.push(`host ${host} is listed ${times} times; it is used once`);
  }
  // Initial DNS seedlist discovery spec, "URI Validation": the SRV options are errors in a mongodb:// URI.
  if (!parsed.isSRV) {
    const srvOption = ['srvServiceName', 'srvMaxHosts'].find((o) => seen.has(o.toLowerCase()));
    if (srvOption !== undefined) {
      throw new InvalidOptionError(srvOption, seen.get(srvOption.toLowerCase()), 'given only in a mongodb+srv:// URI');
    }
  }
  checkTopologyOptions({
    hostCount: hosts.length,
    isSRV: parsed.isSRV,
    loadBalanced: client.loadBalanced === true,
    directConnection: client.directConnection === true,
    replicaSet: topology.replicaSet !== undefined,
    srvMaxHosts: srv.srvMaxHosts as number | undefined,
  });
  const uriReadPreference = readPreferenceOf(readPreference.readPreference as ReadPreferenceMode | undefined, tagSets, readPreference.maxStalenessSeconds as number | undefined, ignoredMode);
  // SOCKS5 support spec: a proxyPort, proxyUsername or proxyPassword without proxyHost, or a user name without a
  // password and the reverse, are errors.
  if (proxyAlone) proxySettings(connection);

  // Credentials: a credential delimiter (@) means authentication, even with an empty user name.
  const authSource = connection.authSource as string | undefined;
  const authMechanism = connection.authMechanism as AuthMechanism | undefined;
  const authMechanismProperties = connection.authMechanismProperties as Record<string, string> | undefined;
  delete connection.authSource;
  delete connection.authMechanism;
  delete connection.authMechanismProperties;
  // The URI's properties for credentials of `mechanism`: each one a property the connection string may set (auth
  // spec: ALLOWED_HOSTS, for one, MUST NOT be); the rest is checked with the credentials.
  const uriProperties = (mechanism: AuthMechanism | undefined): Record<string, string> | undefined => {
    if (authMechanismProperties === undefined) return undefined;
    const rules = MECHANISM_PROPERTIES[mechanism ?? 'SCRAM-SHA-256'];
    for (const name of Object.keys(authMechanismProperties)) {
      const rule = Object.prototype.hasOwnProperty.call(rules, name) ? rules[name] : undefined;
      if (rule !== undefined && !rule.inUri) {
        throw new InvalidOptionError(`authMechanismProperties.${name}`, '<not shown>', 'given in the credentials option of connect() (mechanismProperties), never in the connection string');
      }
    }
    return authMechanismProperties;
  };
  // Credentials refused for a mechanism property the URI's authMechanismProperties would have given, had that value
  // not been ignored as malformed (a trailing ',', a KEY given twice): the error says so, not only the warning.
  const withIgnoredProperties = (make: () => MongoCredentials): MongoCredentials => {
    try {
      return make();
    } catch (error) {
      const ignored = authMechanismProperties === undefined ? warnings.find((w) => w.startsWith('authMechanismProperties=')) : undefined;
      if (!(error instanceof InvalidOptionError) || ignored === undefined || !error.option.startsWith('authMechanismProperties.')) throw error;
      throw new InvalidOptionError(error.option, error.value, `${error.allowed}; the URI's ${ignored}`);
    }
  };
  // The URI database: the default source of credentials (auth spec, SCRAM "source"); read only where it is that.
  const database = (): string => authDatabase(parsed.pathname.replace(/^\//, ''));
  // The source the URI gives credentials of `mechanism`: its authSource, else its database, but for MONGODB-X509,
  // MONGODB-AWS and MONGODB-OIDC, whose users are in $external whatever the database (isExternalMechanism; auth spec,
  // "Connection String Options"); undefined leaves the credentials' own default (admin, or $external).
  const uriSource = (mechanism: AuthMechanism | undefined): string | undefined =>
    authSource ?? (isExternalMechanism(mechanism) ? undefined : database() || undefined);
  // PLAIN takes the URI's database as its source when there is no authSource (auth spec, "PLAIN"), but LDAP users
  // are in $external: a database written for the application's data would send the password where no such user is.
  const warnIfPlainOnDatabase = (mechanism: unknown): void => {
    if (mechanism === 'PLAIN' && authSource === undefined && database() !== '') {
      warnings.push(`authMechanism=PLAIN authenticates on the URI's database "${database()}" (there is no authSource); LDAP users are in $external: add authSource=$external if the user is one`);
    }
  };
  if (given !== undefined) {
    // The option's credentials replace the URI's; the URI's mechanism and source (its authSource, else its database,
    // as for credentials in the URI) fill in what they leave unset.
    const mechanism = optionValue(given, 'mechanism') ?? authMechanism;
    const source = given instanceof MongoCredentials ? given.source : (optionValue(given, 'source') ?? uriSource(mechanism));
    if (!(given instanceof MongoCredentials) && optionValue(given, 'source') === undefined) warnIfPlainOnDatabase(mechanism);
    // Where the option sets its own (a MongoCredentials always has a source, admin by default), the URI's is not
    // dropped silently.
    if (authSource !== undefined && source !== authSource) {
      warnings.push(`authSource=${authSource} is ignored: the credentials option sets its own source (${source})`);
    }
    if (authMechanism !== undefined && mechanism !== authMechanism) {
      warnings.push(`authMechanism=${authMechanism} is ignored: the credentials option sets its own mechanism (${mechanism})`);
    }
    // The option's properties (a MongoCredentials' when it has any), else the URI's; never a mix of both.
    const givenProperties = optionValue(given, 'mechanismProperties');
    const ownProperties = givenProperties !== undefined && !(given instanceof MongoCredentials && Object.keys(givenProperties).length === 0);
    if (ownProperties && authMechanismProperties !== undefined) {
      warnings.push('authMechanismProperties is ignored: the credentials option sets its own mechanismProperties');
    }
    const mechanismProperties = ownProperties ? givenProperties : uriProperties(mechanism);
    connection.credentials =
      // A plain object becomes one MongoCredentials here, not one per pool: every pool of the client then shares its
      // cache of salted passwords (auth spec, "Caching credentials in SCRAM"), so a user is derived once, not once
      // per server.
      given instanceof MongoCredentials && source === given.source && mechanism === given.mechanism && (ownProperties || mechanismProperties === undefined)
        ? given
        : new MongoCredentials({
          username: optionValue(given, 'username') as string,
          password: optionValue(given, 'password') as string,
          ...(source === undefined ? {} : { source }),
          ...(mechanism === undefined ? {} : { mechanism }),
          ...(mechanismProperties === undefined ? {} : { mechanismProperties }),
        });
  } else if (/^[^/]*:\/\/[^/]*@/.test(uri)) {
    const username = decodeURIComponent(parsed.username);
    if (username === '') throw new InvalidOptionError('username', '', 'a non-empty string when the URI has credentials');
    // MONGODB-X509 and MONGODB-OIDC take no password.
    const noPassword = authMechanism === 'MONGODB-X509' || authMechanism === 'MONGODB-OIDC';
    // As MongoCredentials at once, which keeps the password out of inspection and JSON of everything parsed here.
    // MONGODB-X509 takes no password: one written (`user:secret@`, `user:@`) is refused there, not dropped.
    const passwordWritten = /^[^/]*:\/\/[^/@]*:[^/]*@/.test(uri);
    warnIfPlainOnDatabase(authMechanism);
    connection.credentials = withIgnoredProperties(() => new MongoCredentials({
      username,
      ...(noPassword && !passwordWritten ? {} : { password: decodeURIComponent(parsed.password) }),
      source: uriSource(authMechanism),
      ...(authMechanism !== undefined ? { mechanism: authMechanism } : {}),
      ...(authMechanismProperties !== undefined ? { mechanismProperties: uriProperties(authMechanism) } : {}),
    }));
  } else if (authMechanism === 'MONGODB-X509' || authMechanism === 'MONGODB-AWS' || authMechanism === 'MONGODB-OIDC') {
    // MONGODB-X509 needs no user name: the server takes the client certificate's subject (auth spec, "MONGODB-X509");
    // MONGODB-AWS takes none: its credentials come from the environment or AWS (auth spec, "Obtaining Credentials");
    // MONGODB-OIDC needs none either: the token names the user (auth spec, "MONGODB-OIDC": username MAY be specified).
    connection.credentials = withIgnoredProperties(() => new MongoCredentials({
      mechanism: authMechanism,
      source: uriSource(authMechanism),
      ...(authMechanismProperties !== undefined ? { mechanismProperties: uriProperties(authMechanism) } : {}),
    }));
  } else if (authMechanism !== undefined) {
    // Auth spec, "Errors": a mechanism with its required information (a SCRAM or PLAIN user name) missing is an error.
    throw new InvalidOptionError('authMechanism', authMechanism, `given with credentials (user[:password]@host in the URI, or the credentials option of connect()): ${authMechanism === 'PLAIN' ? 'PLAIN' : 'SCRAM'} needs a user name`);
  } else {
    // Auth spec: an authSource without credentials is not a request for authentication.
    if (authSource !== undefined) warnings.push('authSource is ignored: the URI has no credentials');
    if (authMechanismProperties !== undefined) warnings.push('authMechanismProperties is ignored: the URI has no credentials');
  }

  const appName = connection.appName as string | undefined;
  const replicaSet = topology.replicaSet as string | undefined;
  return Object.freeze({
    hosts: Object.freeze(hosts),
    isSRV: parsed.isSRV,
    ...(appName === undefined ? {} : { appName }),
    ...(replicaSet === undefined ? {} : { replicaSet }),
    ...(uriReadPreference === undefined ? {} : { readPreference: uriReadPreference }),
    ...(typeof srv.srvServiceName === 'string' ? { srvServiceName: srv.srvServiceName } : {}),
    ...(typeof srv.srvMaxHosts === 'number' ? { srvMaxHosts: srv.srvMaxHosts } : {}),
    poolOptions: Object.freeze(pool as PoolOptions),
    connectionOptions: Object.freeze(connection as ConnectionOptions),
    clientOptions: Object.freeze(client as UriClientOptions),
    warnings: Object.freeze(warnings),
    redacted: redact(parsed),
  });
}

/**
 * Throws for a topology the options describe that cannot be: `directConnection=true` with several hosts or a
 * `mongodb+srv` URI; `loadBalanced=true` with several hosts, a `replicaSet` or `directConnection=true`; a positive
 * `srvMaxHosts` with a `replicaSet` or `loadBalanced=true`. Applied to a connection string's own options, and by
 * `connect()` to them merged with its options object (and, for a `mongodb+srv` URI, with the hosts and TXT options
 * found).
 *
 * @throws {InvalidOptionError} (option `directConnection` or `loadBalanced`, value `true`; or `srvMaxHosts`, its value)
 *   naming what it conflicts with.
 *
 * Source: URI options spec, "directConnection"; load balancer spec, "URI Validation"; initial DNS seedlist discovery
 * spec, "URI Validation" (srvMaxHosts).
 */
export function checkTopologyOptions(o: {
  /** How many hosts the host list has. */
  readonly hostCount: number;
  /** Whether the URI is a `mongodb+srv` one. */
  readonly isSRV: boolean;
  readonly loadBalanced: boolean;
  readonly directConnection: boolean;
  /** Whether a `replicaSet` is given. */
  readonly replicaSet: boolean;
  /** The srvMaxHosts of a `mongodb+srv` URI, when it gives one. */
  readonly srvMaxHosts?: number | undefined;
}): void {
  if (o.directConnection && (o.hostCount > 1 || o.isSRV)) {
    throw new InvalidOptionError('directConnection', true, 'false (or absent) with several hosts or a mongodb+srv URI');
  }
  if (o.loadBalanced) {
    if (o.hostCount > 1) throw new InvalidOptionError('loadBalanced', true, 'false (or absent) with several hosts');
    if (o.replicaSet) throw new InvalidOptionError('loadBalanced', true, 'false (or absent) with replicaSet');
    if (o.directConnection) throw new InvalidOptionError('loadBalanced', true, 'false (or absent) with directConnection=true');
  }
  if (o.srvMaxHosts !== undefined && o.srvMaxHosts > 0) {
    if (o.replicaSet) throw new InvalidOptionError('srvMaxHosts', o.srvMaxHosts, '0 (or absent) with replicaSet');
    if (o.loadBalanced) throw new InvalidOptionError('srvMaxHosts', o.srvMaxHosts, '0 (or absent) with loadBalanced=true');
  }
}

/**
 * Throws for a Unix domain socket path written with its slashes unescaped where a host belongs
 * (`mongodb:///tmp/mongodb-27017.sock`, `mongodb://user:pw@/tmp/mongodb-27017.sock/db`,
 * `mongodb://a,/tmp/mongodb-27017.sock`, `mongodb://./mongodb-27017.sock`): its first "/" ends the host list, which is
 * then empty or ends in an empty host (or in the host "." or ".."), and the path is read as the auth database. The
 * message names the path and its encoded form rather than saying only that the host list is invalid. A candidate
 * containing "@" is never shown (it may hold a password).
 *
 * @throws {InvalidOptionError} (option `uri`) "Unsupported host '<path>', UNIX socket domain paths must be URL encoded".
 *
 * Source: connection string spec, "Host" (an unescaped slash in the host information: "an exception MUST be thrown
 * informing users that paths must be URL encoded").
 */
function rejectUnescapedSocketPath(uri: string): void {
  // A "#" after the host list is text (see hashesAsText): it may be part of the path, or follow it.
  const match = /^mongodb(?:\+srv)?:\/\/([^/?#]*)\/([^?]*?\.sock)(?:[/#][^?]*)?(?:\?.*)?$/is.exec(uri);
  if (match === null) return;
  const hostList = match[1].slice(match[1].lastIndexOf('@') + 1);
  // The last host empty (an absolute path), or "." or ".." (a relative one, ./mongodb.sock): no host is named so.
  const last = hostList.slice(hostList.lastIndexOf(',') + 1);
  if (last !== '' && last !== '.' && last !== '..') return;
  const path = `${last}/${match[2]}`;
  const shown = path.includes('@') ? '<path not shown>' : path;
  throw new InvalidOptionError('uri', '<connection string not shown>', 'a host list whose Unix domain socket paths are URL encoded', {
    message: `Unsupported host '${shown}', UNIX socket domain paths must be URL encoded${shown === path ? ` (write ${encodeURIComponent(path)})` : ''}`,
  });
}

/**
 * What the URL library's error says, without the text it quotes as a user name: that is everything before the first
 * "@" of the URI, which, when the "@" is in an option value (`?proxyPassword=s3cret@x`), is the query up to it, a
 * password included.
 */
function parserMessage(error: unknown): string {
  const message = (error as Error).message;
  return /^Username contains unescaped characters/.test(message)
    ? 'the user name contains unescaped characters; or an "@" in an option value is not percent-encoded (%40)'
    : message;
}

/**
 * `uri` with each "#" after its host list percent-encoded (`%23`): a connection string has no fragment, so a "#" in the
 * auth database or in an option value is part of it. Read as a URL, the "#" would start a fragment, and the rest of the
 * URI would be dropped without a word: `?appName=a#b&tls=true` would give appName "a" and no TLS at all.
 *
 * Source: connection string spec, "Auth Database" (everything up to the first "?" or end of string) and "Connection
 * Options" (everything after the first "?" to the end of the string).
 */
function hashesAsText(uri: string): string {
  const scheme = uri.indexOf('://');
  if (scheme < 0) return uri;
  const afterHosts = uri.slice(scheme + 3).search(/[/?]/);
  if (afterHosts < 0) return uri;
  const start = scheme + 3 + afterHosts;
  return uri.slice(0, start) + uri.slice(start).replace(/#/g, '%23');
}

/**
 * A host of the host list, percent-decoded (a Unix domain socket path must be percent-encoded there).
 *
 * @throws {InvalidOptionError} (option `address`, the host as written) when a "%" is not followed by two hex digits
 *   or the bytes they give are not UTF-8: the host cannot be decoded, and decodeURIComponent's bare URIError would say
 *   neither which host nor what is wrong.
 */
function decodeHost(host: string): string {
  try {
    return decodeURIComponent(host);
  } catch {
    throw new InvalidOptionError('address', host, 'a host whose percent-encoding is valid (each "%" followed by two hex digits, the bytes UTF-8)');
  }
}

/**
 * A key of the query, its ASCII letters A to Z lower-cased and every other character left as it is. `toLowerCase()`
 * would also fold non-ASCII letters onto ASCII ones: the Kelvin sign (U+212A) becomes "k", so
 * `tlsCertificate\u212AeyFile` would be read as tlsCertificateKeyFile instead of being ignored as an unknown key.
 *
 * Source: connection string spec, "Keys" ("lower casing the uppercase ASCII characters A through Z; other characters
 * are left as-is").
 */
export function keyLowerCase(key: string): string {
  return key.replace(/[A-Z]+/g, (letters) => letters.toLowerCase());
}

/**
 * Throws for a key with no "=" in the query (`?tls`, `?w`): a connection string's options are key=value pairs, and a
 * bare key is an incomplete one, most often a truncated or mistyped URI, not an option given an empty value.
 *
 * Source: connection string spec, "Key Value Pair", and its test of an incomplete key value pair (an invalid URI).
 */
function rejectKeysWithoutValue(search: string): void {
  for (const piece of search.replace(/^\?/, '').split('&')) {
    if (piece === '' || piece.includes('=')) continue;
    let key: string;
    try {
      key = decodeURIComponent(piece.replace(/\+/g, ' '));
    } catch {
      key = piece;
    }
    throw new InvalidOptionError(key, undefined, 'a key=value pair', {
      message: `Invalid connection string option ${key}: it has no "=" and value (write ${key}=<value>, or leave it out)`,
    });
  }
}

/**
 * The URI with its credentials replaced (the password, and the values of the keys that hold secrets), and also the
 * value of every key that is not a URI option of the specs (those rxcmap reads, those it ignores with a warning, the
 * Stable API's): a misspelt secret key (`tlsCertificateKeyFilePasword=...`) would otherwise be shown as it is.
 */
function redact(parsed: ConnectionString): string {
  const text = parsed.redact().toString();
  const query = text.indexOf('?');
  if (query < 0) return text;
  // The query as the URI holds it, piece by piece, so the known keys keep their text as written and a repeated key
  // stays repeated (the redacted form's query is re-encoded whole once a secret's value was replaced in it:
  // `tlsCertificateKeyFile=/a/b.pem` as `%2Fa%2Fb.pem`); the keys holding secrets are hidden here.
  const written = parsed.toString();
  const pieces = written.slice(written.indexOf('?') + 1).split('&').map((piece) => {
    const equals = piece.indexOf('=');
    if (equals < 0) return piece;
    let name: string;
    try {
      name = decodeURIComponent(piece.slice(0, equals).replace(/\+/g, ' '));
    } catch {
      name = '';
    }
    // The secret keys (authMechanismProperties may carry what a mechanism needs to obtain credentials) and the proxy's
    // user name, as the password and user name of the URI are: hidden as an unknown key is. The URI options spec's
    // keys rxcmap does not act on (`w=majority`, `retryWrites=true` in every Atlas connection string) hold no secret:
    // shown as written.
    const lower = keyLowerCase(name);
    const shown = (KEYS[lower] !== undefined || UNSUPPORTED.has(lower) || API_PARAMETERS.has(lower)) && !SECRET.has(lower) && lower !== 'proxyusername';
    return shown ? piece : `${piece.slice(0, equals)}=_credentials_`;
  });
  return `${text.slice(0, query)}?${pieces.join('&')}`;
}

/**
 * The value of `authMechanismProperties` (a prototype-less object of strings), or `error` saying what it must be: a
 * list of `KEY:value` pairs separated by ',', each split at its first ':' (a value may hold ':', as a URL does; none
 * can hold ','), each KEY non-empty and given once. Which keys a mechanism takes is checked with the credentials.
 *
 * Source: connection string spec, "Values" (key value pairs); auth spec, "Connection String Options".
 */
export function authMechanismPropertiesValue(text: string): { value?: Record<string, string>; error?: string } {
  const properties = Object.create(null) as Record<string, string>;
  for (const pair of text.split(',')) {
    const colon = pair.indexOf(':');
    if (colon <= 0) return { error: "a list of KEY:value pairs separated by ','" };
    const name = pair.slice(0, colon);
    if (Object.prototype.hasOwnProperty.call(properties, name)) return { error: `a list of KEY:value pairs, each KEY once (${name} is given twice)` };
    properties[name] = pair.slice(colon + 1);
  }
  return { value: properties };
}

/**
 * The read preference of a URI whose valid readPreference, readPreferenceTags (every instance, in order) and
 * maxStalenessSeconds are `mode`, `tagSets` and `maxStalenessSeconds` (an invalid value of each was ignored with a
 * warning; `ignoredMode`: the last readPreference ignored, as its warning quotes it): undefined when it gives none of them, else checked and frozen by `readPreferenceFrom`,
 * the mode `primary` when it gives none. A positive maxStalenessSeconds or a non-empty tag set with mode primary makes
 * the URI invalid.
 *
 * @throws {InvalidOptionError} (option `maxStalenessSeconds`, its value) for one >= 1 with mode primary, given or by
 *   default; (option `readPreferenceTags`, the first non-empty tag set as written) for a non-empty tag set with mode
 *   primary. The message names the readPreference the URI gave and had ignored, if any.
 *
 * Source: max staleness spec, "API" ("A connection string combining a positive maxStalenessSeconds with read
 * preference mode "primary" MUST be considered invalid; this includes connection strings with no explicit read
 * preference mode"); server selection spec, "tag_sets" ("Clients MUST raise an error if a non-empty tag set is given in
 * tag_sets and the mode field is 'primary'"); URI options spec (readPreferenceTags: "only valid if the read preference
 * mode is not primary").
 */
function readPreferenceOf(mode: ReadPreferenceMode | undefined, tagSets: readonly Record<string, string>[], maxStalenessSeconds: number | undefined, ignoredMode: string | undefined): ReadPreference | undefined {
  if (mode === undefined && tagSets.length === 0 && maxStalenessSeconds === undefined) return undefined;
  const effective = mode ?? 'primary';
  if (effective === 'primary') {
    // A mode ignored with a warning leaves primary: the error names it, not only the warning.
    const why = mode !== undefined ? 'readPreference=primary' : ignoredMode === undefined ? 'the URI gives no readPreference' : `the URI's readPreference=${ignoredMode} is no mode and is ignored`;
    if (maxStalenessSeconds !== undefined && maxStalenessSeconds > 0) {
      throw new InvalidOptionError('maxStalenessSeconds', maxStalenessSeconds, `-1 (or absent) with read preference mode primary (${why}): a primary is never stale; give a readPreference other than primary`);
    }
    const tagged = tagSets.find((set) => Object.keys(set).length > 0);
    if (tagged !== undefined) {
      const written = Object.entries(tagged).map(([name, value]) => `${name}:${value}`).join(',');
      throw new InvalidOptionError('readPreferenceTags', written, `empty (or absent) with read preference mode primary (${why}): only the primary is suitable, whatever its tags; give a readPreference other than primary`);
    }
  }
  return readPreferenceFrom('readPreference', { mode: effective, tags: tagSets, ...(maxStalenessSeconds === undefined ? {} : { maxStalenessSeconds }) });
}

/**
 * One readPreferenceTags value as a tag set: `name:value` pairs separated by ",", each split at its first ":" (a value
 * may hold ":"; none can hold ","), each name non-empty and given once; the empty value is the empty tag set `{}`.
 *
 * Source: connection string spec, "Values" (lists, key value pairs); URI options spec, readPreferenceTags.
 */
function tagSetValue(text: string): { value?: Record<string, string>; error?: string } {
  if (text === '') return { value: {} };
  const pairs = authMechanismPropertiesValue(text).value;
  if (pairs === undefined) return { error: 'a tag set: name:value pairs separated by "," (e.g. dc:ny,rack:1), each name once; or empty, for the tag set {} that every server matches' };
  // Without a prototype, as readPreferenceFrom takes a tag set (and copies it).
  return { value: pairs };
}

/** Converts one value; `error` says what is allowed when the value is invalid. */
function convert(kind: Kind, text: string): { value?: unknown; error?: string; warning?: string } {
  const int = /^-?\d+$/.test(text.trim()) ? Number(text) : Number.NaN;
  switch (kind) {
    case 'readPreferenceMode': {
      if ((READ_PREFERENCE_MODES as readonly string[]).includes(text)) return { value: text };
      const closest = closestOptionName(text, READ_PREFERENCE_MODES);
      return { error: `one of ${READ_PREFERENCE_MODES.join(', ')}, written in lowercase camelCase${closest === undefined ? '' : ` (did you mean ${closest}?)`}` };
    }
    case 'tagSet':
      return tagSetValue(text);
    case 'maxStaleness':
      // As a read preference object takes it: one beyond a BSON int32 is an invalid value, ignored as 0 is.
      return isMaxStalenessSeconds(int) ? { value: int } : { error: MAX_STALENESS_SECONDS_ALLOWED };
    case 'count':
      return Number.isSafeInteger(int) && int >= 0 ? { value: int } : { error: 'an integer >= 0' };
    case 'positive':
      return Number.isSafeInteger(int) && int > 0 ? { value: int } : { error: 'an integer > 0' };
    case 'ms':
      return Number.isSafeInteger(int) && int >= 0 ? { value: int } : { error: 'an integer number of ms >= 0' };
    case 'timer':
      return Number.isSafeInteger(int) && int >= 0 && int <= MAX_TIMER_DELAY_MS ? { value: int } : { error: `an integer number of ms from 0 to ${MAX_TIMER_DELAY_MS}` };
    case 'selection':
      return Number.isSafeInteger(int) && int > 0 && int <= MAX_TIMER_DELAY_MS ? { value: int } : { error: `an integer number of ms from 1 to ${MAX_TIMER_DELAY_MS}` };
    case 'monitoringMode':
      return text === 'auto' || text === 'stream' || text === 'poll' ? { value: text } : { error: 'one of "auto", "stream", "poll"' };
    case 'heartbeat':
      return Number.isSafeInteger(int) && int >= 500 ? { value: int } : { error: 'an integer number of ms >= 500' };
    case 'zlib':
      return Number.isSafeInteger(int) && int >= -1 && int <= 9 ? { value: int } : { error: 'an integer from -1 to 9' };
    case 'bool':
      return text === 'true' ? { value: true } : text === 'false' ? { value: false } : { error: '"true" or "false"' };
    case 'string':
      return text === '' ? { error: 'a non-empty string' } : { value: text };
    case 'appName':
      return Buffer.byteLength(text, 'utf8') <= MAX_APP_NAME_BYTES ? { value: text } : { error: `at most ${MAX_APP_NAME_BYTES} bytes` };
    case 'compressors': {
      const names = text.split(',').map((c) => c.trim()).filter((c) => c !== '');
      const known = names.filter((c) => c === 'none' || (SUPPORTED_COMPRESSORS as readonly string[]).includes(c));
      const dropped = names.filter((c) => !known.includes(c));
      // snappy or zstd that this process cannot speak (no snappy package, Node.js before 22.15) is left out likewise.
      const why = new Map(known.flatMap((c) => {
        const reason = compressorUnavailable(c);
        return reason === undefined ? [] : [[c, reason] as const];
      }));
      const unavailable = [...why].map(([c, reason]) => `${c} (${reason})`);
      const warnings = [
        ...(dropped.length > 0 ? [`compressors ${dropped.join(', ')} are not supported and are ignored`] : []),
        ...(unavailable.length > 0 ? [`compressors ${unavailable.join(', ')} are unavailable here and are ignored`] : []),
      ];
      return {
        value: known.filter((c) => !why.has(c)),
        ...(warnings.length > 0 ? { warning: warnings.join('; ') } : {}),
      };
    }
    case 'source':
      // Auth spec, "Errors": an empty authSource is an error, with or without credentials (not ignored).
      if (text === '') throw new InvalidOptionError('authSource', text, 'a non-empty database name');
      return { value: text };
    case 'proxy':
      // Checked with the other proxy options once all are read (proxySettings): an invalid one is an error, never
      // ignored, as ignoring it would send connections around the proxy, or to another port of it.
      return { value: text };
    case 'proxyPort':
      if (!(Number.isSafeInteger(int) && int >= 1 && int <= 65535)) {
        throw new InvalidOptionError('proxyPort', text, 'an integer from 1 to 65535: the TCP port of the SOCKS5 proxy');
      }
      return { value: int };
    case 'serviceName':
      // RFC 6335, section 5.1 (letters, digits, hyphens; a letter; no hyphen first, last or doubled), but for its 15
      // characters: the spec allows up to 62, the longest DNS label with the leading "_".
      return /^(?=.*[A-Za-z])[A-Za-z0-9](?:-?[A-Za-z0-9])*$/.test(text) && text.length <= 62
        ? { value: text }
        : { error: 'an SRV service name: letters, digits and single hyphens (not first or last), with a letter, at most 62 characters' };
    case 'properties':
      return authMechanismPropertiesValue(text);
    case 'mechanism':
      if (!(AUTH_MECHANISMS as readonly string[]).includes(text)) {
        throw new InvalidOptionError('authMechanism', text, `one of ${AUTH_MECHANISMS.join(', ')}`);
      }
      return { value: text };
  }
}
