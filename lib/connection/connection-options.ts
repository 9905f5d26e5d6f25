/**
 * The options of how connections are established, their names, and the checks of their keys and value types, which
 * the connection factory and the pools, monitors and clients that make one apply to what they receive.
 *
 * Source: URI options spec (appName, connectTimeoutMS, socketTimeoutMS, compressors, zlibCompressionLevel, the tls
 * options, loadBalanced); handshake spec, "Supporting Wrapping Libraries" (driverInfo); auth spec, "MongoCredential";
 * extension: keepAliveInitialDelay, autoSelectFamily, autoSelectFamilyAttemptTimeout and family (the official Node.js
 * driver's options of those names).
 */
import { CREDENTIALS_INIT_NAMES, CREDENTIALS_SHAPES, MongoCredentials, type CredentialsInit } from '../auth/credentials';
import { InvalidOptionError } from '../errors';
import {
  optionValues,
  rejectUnknownOptions,
  requireBoolean,
  requireTimerDurationMS,
  requireOptionsObject,
  type ListsEveryOption,
} from '../options';
import { checkDriverInfo, type DriverInfoOptions } from './handshake';
import { checkServerApi, type ServerApi, type ServerApiVersionId } from './server-api';
import { checkCompressorAvailable, SUPPORTED_COMPRESSORS } from './op-compressed';
import { checkProxyValues, PROXY_OPTION_NAMES, proxySettings, type ProxyOptions } from './proxy';
import { TLS_OPTION_NAMES, type TlsSettings } from './tls-options';

/**
 * connectTimeoutMS when neither the options nor a URI give it, in ms: 10000.
 *
 * Source: URI options spec ("connectTimeoutMS", default 10,000 ms).
 */
export const DEFAULT_CONNECT_TIMEOUT_MS = 10_000;

/**
 * How connections are established. Durations in ms.
 *
 * Source: URI options spec (appName, connectTimeoutMS, socketTimeoutMS, compressors, zlibCompressionLevel, the tls
 * options, loadBalanced); handshake spec, "client.application.name", "Supporting Wrapping Libraries" (driverInfo);
 * auth spec, "MongoCredential"; load balancer spec, "Connection Establishment"; SOCKS5 support spec (the proxy
 * options, see {@link ProxyOptions}).
 */
export interface ConnectionOptions extends TlsSettings, ProxyOptions {
  /** Sent in the handshake as `client.application.name` (at most 128 bytes). */
  appName?: string | undefined;
  /**
   * The library built on rxcmap, as it names itself in the handshake: its name, version and platform appended to
   * `client.driver.name`, `client.driver.version` and `client.platform` after a `|` (see {@link DriverInfoOptions};
   * `Client.appendMetadata` appends more later). No field may contain `|`; the name and version must leave the
   * `client` document within 512 bytes.
   */
  driverInfo?: DriverInfoOptions | undefined;
  /**
   * Time allowed for socket connect (with a proxy, the SOCKS5 exchange too), TLS, handshake and authentication
   * together, in ms, at most 2147483647 (one Node timer); 0 = no limit. Default 10000. A MONGODB-OIDC human callback
   * (a person signing in) does not count: it has its 5 minutes, this deadline held meanwhile.
   */
  connectTimeoutMS?: number | undefined;
  /**
   * Default time allowed for each reply once established, in ms, at most 2147483647 (one Node timer); 0 = no limit.
   * Default 0. A deadline counted from the moment the command is sent, not an idle timeout: a server that trickles a
   * reply a byte at a time still fails the command (MongoNetworkTimeoutError) when it passes. With 0, such a server
   * (or one that never answers) holds the command, and up to maxMessageSizeBytes of reply, for as long as it likes.
   */
  socketTimeoutMS?: number | undefined;
  /**
   * Compressors to offer, in order of preference: `zlib`, `snappy` (needs the optional package `snappy`), `zstd` (needs
   * Node.js 22.15 or later), or `none`. Default: none offered. The first of them that the server's hello lists is
   * used, whatever the server's order; a name given twice is offered once, in its first place. An unavailable snappy
   * or zstd is an InvalidOptionError here; in a connection string it is left out of the offer with a warning.
   *
   * Source: OP_COMPRESSED spec (the first of the application's list that the server supports); URI options spec.
   */
  compressors?: readonly string[] | undefined;
  /** zlib level, -1 (zlib's default) to 9. Default -1. */
  zlibCompressionLevel?: number | undefined;
  /**
   * Authenticate every connection: SCRAM-SHA-256 or SCRAM-SHA-1 (`{ username, password, source?, mechanism? }`), or
   * MONGODB-X509 (`{ mechanism: 'MONGODB-X509', username? }`, in `$external`, with the client certificate of
   * `tlsCertificateKeyFile`, which it requires), or PLAIN (`{ username, password, mechanism: 'PLAIN', source? }`, LDAP,
   * in `$external` unless given; over TCP, TLS required unless `tls: false` is given outright). See
   * {@link CredentialsInit}.
   */
  credentials?: MongoCredentials | CredentialsInit | undefined;
  /** Load-balanced mode: the handshake sends `hello` with `loadBalanced: true`. */
  loadBalanced?: boolean | undefined;
  /**
   * TCP keepalive: how long a connection may sit idle before the operating system sends its first keepalive probe,
   * in ms; an integer from 0 to {@link MAX_KEEP_ALIVE_INITIAL_DELAY_MS}. Keepalive is on for every connection (TCP
   * and TLS); 0 keeps it on with the operating system's default delay (as Node's `socket.setKeepAlive(true, 0)`
   * does). The kernel counts whole seconds: a delay is rounded down to seconds, and one under 1000 ms counts as
   * 1000 ms. Default {@link DEFAULT_KEEP_ALIVE_INITIAL_DELAY_MS} (120000).
   *
   * Source: extension, the official Node.js driver's `keepAliveInitialDelay` (same name, same default): probes sent
   * well before a load balancer, NAT or firewall drops an idle flow (Azure's 4 minutes, for one) keep pooled
   * connections alive, and reveal a peer that vanished without a FIN.
   */
  keepAliveInitialDelay?: number | undefined;
  /**
   * How a host name that resolves to several addresses (IPv6 and IPv4, several A records) is connected to: `true`,
   * Node's `autoSelectFamily` (RFC 8305 "Happy Eyeballs"): the addresses are tried one after the other, IPv6 and IPv4
   * interleaved, each attempt but the last abandoned after {@link ConnectionOptions.autoSelectFamilyAttemptTimeout} ms
   * without an answer, and the first to connect is used; `false`: only the first address the lookup returns is tried,
   * for as long as connectTimeoutMS allows. A boolean. Default: Node's (`net.getDefaultAutoSelectFamily()`, true since
   * Node.js 20, or what `net.setDefaultAutoSelectFamily()` / `--no-network-family-autoselection` set). Applies to the
   * SOCKS5 proxy's host name too, with `proxyHost`; an IP address or a Unix domain socket path has one address only.
   *
   * Source: extension, the official Node.js driver's option of that name (Node's `net.connect` option).
   */
  autoSelectFamily?: boolean | undefined;
  /**
   * With {@link ConnectionOptions.autoSelectFamily}, how long each attempt but the last may wait for the connection, in
   * ms, before the next address is tried: an integer from 1 to 2147483647; Node counts one under 10 as 10. Default:
   * Node's (`net.getDefaultAutoSelectFamilyAttemptTimeout()`, 250). A link whose TCP handshake takes longer (a
   * long-haul or satellite link, a congested VPN) loses every address but the last to it, and the establishment fails
   * when that one is unreachable: raise it above the link's round trip. Connecting as a whole is still bounded by
   * connectTimeoutMS.
   *
   * Source: extension, the official Node.js driver's option of that name (Node's `net.connect` option).
   */
  autoSelectFamilyAttemptTimeout?: number | undefined;
  /**
   * Which addresses of a host name are used: `4`, its IPv4 addresses only; `6`, its IPv6 addresses only; `0`, both.
   * With 4 or 6, only the first address of that family is tried (no {@link ConnectionOptions.autoSelectFamily} among
   * several): for a host whose IPv6 (or IPv4) path is black-holed, no connection then waits on it first. An IP
   * address is connected to as it is, whatever `family`. Default 0. With `proxyHost`, for the proxy's host name (the
   * proxy resolves the server's).
   *
   * Source: extension, the official Node.js driver's option of that name (Node's `net.connect` option, passed to
   * `dns.lookup`).
   */
  family?: 0 | 4 | 6 | undefined;
  /**
   * The Stable API version to declare: `{ version: '1', strict?, deprecationErrors? }` (see {@link ServerApi} and
   * `ServerApiVersion`), or the version alone (`ServerApiVersion.v1`, as the official driver also takes it). Every
   * command of every connection (handshake, authentication, monitoring, the commands run on it, getMore included) then
   * carries `apiVersion`, and `apiStrict` / `apiDeprecationErrors` when given; the
   * handshake and monitoring use `hello`. Copied and frozen when given. Never read from a connection string. Default:
   * none declared, and no API field is ever sent.
   *
   * Source: Stable API spec.
   */
  serverApi?: ServerApi | ServerApiVersionId | undefined;
}

/**
 * The default {@link ConnectionOptions.keepAliveInitialDelay}: 120000 ms (2 minutes), half the idle timeout of the
 * Azure load balancer (4 minutes), so that probes start before such a load balancer drops an idle connection.
 *
 * Source: extension, the official Node.js driver's default keepAliveInitialDelay (its
 * `DEFAULT_KEEP_ALIVE_INITIAL_DELAY_MS`, `src/cmap/connect.ts`).
 */
export const DEFAULT_KEEP_ALIVE_INITIAL_DELAY_MS = 120_000;

/**
 * The largest {@link ConnectionOptions.keepAliveInitialDelay}: 32,767,000 ms (32767 s), the largest idle time Linux
 * accepts for a socket's `TCP_KEEPIDLE`; the kernel refuses a larger one, and the socket would silently keep another
 * delay.
 *
 * Source: extension (Linux `tcp(7)`, `TCP_KEEPIDLE`; its limit `MAX_TCP_KEEPIDLE`).
 */
export const MAX_KEEP_ALIVE_INITIAL_DELAY_MS = 32_767_000;

/**
 * The largest {@link ConnectionOptions.autoSelectFamilyAttemptTimeout}: 2147483647 ms, the largest Node's
 * `net.connect` accepts (a 32-bit integer).
 *
 * Source: extension (Node's `net.connect`, `autoSelectFamilyAttemptTimeout`).
 */
export const MAX_AUTO_SELECT_FAMILY_ATTEMPT_TIMEOUT_MS = 2_147_483_647;

/**
 * Every option name of `ConnectionOptions` (a readonly tuple): appName, driverInfo, the timeouts, compression, credentials,
 * loadBalanced, keepAliveInitialDelay, autoSelectFamily, autoSelectFamilyAttemptTimeout, family, serverApi, then the
 * {@link TLS_OPTION_NAMES} and the {@link PROXY_OPTION_NAMES}.
 *
 * Source: URI options spec (appName, connectTimeoutMS, socketTimeoutMS, compressors, zlibCompressionLevel,
 * loadBalanced, the tls options, the proxy options); handshake spec, "Supporting Wrapping Libraries" (`driverInfo`);
 * auth spec, "MongoCredential" (`credentials`); SOCKS5 support spec; Stable API spec (`serverApi`); extension:
 * keepAliveInitialDelay, autoSelectFamily, autoSelectFamilyAttemptTimeout and family (the official Node.js driver's
 * options).
 */
export const CONNECTION_OPTION_NAMES = [
  'appName',
  'driverInfo',
  'connectTimeoutMS',
  'socketTimeoutMS',
  'compressors',
  'zlibCompressionLevel',
  'credentials',
  'loadBalanced',
  'keepAliveInitialDelay',
  'autoSelectFamily',
  'autoSelectFamilyAttemptTimeout',
  'family',
  'serverApi',
  ...TLS_OPTION_NAMES,
  ...PROXY_OPTION_NAMES,
] as const satisfies readonly (keyof ConnectionOptions)[];
true satisfies ListsEveryOption<ConnectionOptions, typeof CONNECTION_OPTION_NAMES>;

const BOOLEAN_OPTIONS = [
  'loadBalanced',
  'autoSelectFamily',
  'tls',
  'tlsAllowInvalidCertificates',
  'tlsAllowInvalidHostnames',
  'tlsInsecure',
] as const satisfies readonly (keyof ConnectionOptions)[];
const STRING_OPTIONS = [
  'tlsCAFile',
  'tlsCertificateKeyFile',
  'tlsServerName',
  'tlsCRLFile',
] as const satisfies readonly (keyof ConnectionOptions)[];

/**
 * Checks the keys and value types of connection options, without reading any file: no key outside
 * {@link CONNECTION_OPTION_NAMES} (plus `extraKeys`); `appName` a string; `driverInfo` a `{ name, version?,
 * platform? }` object of strings without `|`; `connectTimeoutMS` and `socketTimeoutMS`
 * numbers of ms >= 0; `keepAliveInitialDelay` an integer number of ms from 0 to
 * {@link MAX_KEEP_ALIVE_INITIAL_DELAY_MS}; `autoSelectFamilyAttemptTimeout` an integer number of ms from 1 to
 * {@link MAX_AUTO_SELECT_FAMILY_ATTEMPT_TIMEOUT_MS}; `family` 0, 4 or 6; `compressors` an array of `zlib` / `snappy` /
 * `zstd` / `none`, snappy and zstd only where available (`compressorUnavailable`); `zlibCompressionLevel` an
 * integer from -1 to 9; `serverApi` a {@link ServerApi} (see `checkServerApi`); `credentials` a {@link MongoCredentials} or a {@link CredentialsInit} object (validated as
 * MongoCredentials does, unless `partial`: see below); the booleans real booleans; `tlsCAFile`,
 * `tlsCertificateKeyFile`, `tlsServerName` non-empty strings; `tlsCertificateKeyFilePassword` a string; the proxy
 * options as {@link proxySettings} checks them (each type, proxyPort 1 to 65535, user name and password at most 255
 * bytes, and which must come together). Undefined values are allowed everywhere.
 *
 * @param options the options to check.
 * @param owner what received them (named in an unknown-option error), e.g. `"ConnectionPool"`.
 * @param path prefix of the keys in an unknown-option error, e.g. `"connectionOptions."`.
 * @param extraKeys other keys the receiver accepts at the same level (e.g. the Endpoint's `host` and `port`).
 * @param partial whether other options complete these (`connect()`'s options object, completed by the URI's): each
 *   proxy option is then checked alone ({@link checkProxyValues}), not for those that must come together, and
 *   `credentials` only for its shape (an object of {@link CredentialsInit} keys): the URI's authMechanism and
 *   authSource complete it, and it is checked as MongoCredentials once so completed.
 * @returns the checked, frozen copy of `serverApi` (see `checkServerApi`), undefined when it is not given: what the
 *   receiver passes on in place of the caller's object, so that its fields are read once.
 * @throws {InvalidOptionError} naming the first invalid option, its value (never a password or credentials) and
 *   what is allowed; for an unknown key, the closest known option.
 *
 * Source: URI options spec (each option's allowed values); auth spec, "MongoCredential"; SOCKS5 support spec,
 * "MongoClient Configuration"; extension: keepAliveInitialDelay (see {@link ConnectionOptions.keepAliveInitialDelay}),
 * autoSelectFamily, autoSelectFamilyAttemptTimeout and family (see {@link ConnectionOptions.autoSelectFamily},
 * {@link ConnectionOptions.family}).
 */
export function checkConnectionOptions(
  options: unknown,
  owner: string,
  path = '',
  extraKeys: readonly string[] = [],
  partial = false,
): ServerApi | undefined {
  const given = requireOptionsObject(path === '' ? 'options' : path.slice(0, -1), options, 'an object of connection options');
  if (given === undefined) return undefined;
  const known = extraKeys.length === 0 ? CONNECTION_OPTION_NAMES : [...CONNECTION_OPTION_NAMES, ...extraKeys];
  rejectUnknownOptions(given, known, owner, path);
  const o = optionValues(given, CONNECTION_OPTION_NAMES);
  if (o.appName !== undefined && typeof o.appName !== 'string') {
    throw new InvalidOptionError('appName', o.appName, 'a string');
  }
  if (o.driverInfo !== undefined) checkDriverInfo(o.driverInfo, 'driverInfo', path);
  const serverApi = o.serverApi === undefined ? undefined : checkServerApi(o.serverApi, path);
  if (o.connectTimeoutMS !== undefined) requireTimerDurationMS('connectTimeoutMS', o.connectTimeoutMS);
  if (o.socketTimeoutMS !== undefined) requireTimerDurationMS('socketTimeoutMS', o.socketTimeoutMS);
  const delay = o.keepAliveInitialDelay;
  const max = MAX_KEEP_ALIVE_INITIAL_DELAY_MS;
  const valid = typeof delay === 'number' && Number.isSafeInteger(delay) && delay >= 0 && delay <= max;
  if (delay !== undefined && !valid) {
    const allowed = `an integer number of ms from 0 (the OS default delay) to ${max}`;
    throw new InvalidOptionError('keepAliveInitialDelay', delay, allowed);
  }
  const attempt = o.autoSelectFamilyAttemptTimeout;
  const maxAttempt = MAX_AUTO_SELECT_FAMILY_ATTEMPT_TIMEOUT_MS;
  if (attempt !== undefined && !(typeof attempt === 'number' && Number.isSafeInteger(attempt) && attempt >= 1 && attempt <= maxAttempt)) {
    throw new InvalidOptionError('autoSelectFamilyAttemptTimeout', attempt, `an integer number of ms from 1 to ${maxAttempt}`);
  }
  if (o.family !== undefined && o.family !== 0 && o.family !== 4 && o.family !== 6) {
    throw new InvalidOptionError('family', o.family, '0 (IPv4 and IPv6), 4 (IPv4 only) or 6 (IPv6 only)');
  }
  const allowed = [...SUPPORTED_COMPRESSORS, 'none'];
  if (o.compressors !== undefined) {
    const list = o.compressors;
    if (!Array.isArray(list)) {
      throw new InvalidOptionError('compressors', list, `an array of compressor names (${allowed.join(', ')})`);
    }
    for (const c of list as unknown[]) {
      if (typeof c !== 'string' || !allowed.includes(c)) {
        throw new InvalidOptionError('compressors', c, `compressor names, each one of ${allowed.join(', ')}`);
      }
      checkCompressorAvailable(c);
    }
  }
  const level = o.zlibCompressionLevel;
  if (level !== undefined && (typeof level !== 'number' || !Number.isInteger(level) || level < -1 || level > 9)) {
    throw new InvalidOptionError('zlibCompressionLevel', level, 'an integer from -1 to 9');
  }
  if (o.credentials !== undefined && !(o.credentials instanceof MongoCredentials)) {
    const init = requireOptionsObject('credentials', o.credentials, `a MongoCredentials or ${CREDENTIALS_SHAPES}`, true);
    // A plain object takes only the CredentialsInit keys; a class instance (a MongoCredentials of another copy of
    // this library, say) is read through its properties, as MongoCredentials reads it.
    const proto = Object.getPrototypeOf(init);
    if (proto === Object.prototype || proto === null) {
      rejectUnknownOptions(init, CREDENTIALS_INIT_NAMES, 'credentials', `${path}credentials.`);
    }
    // Constructed only to run its checks (user name, password type, source, mechanism): it is not kept. Not when
    // other options complete these: a URI's authMechanism and authSource (else its database) complete the credentials,
    // which are checked once so completed (`{ username }` alone is whole with the URI's MONGODB-X509, not otherwise).
    if (!partial) new MongoCredentials(init as unknown as CredentialsInit);
  }
  for (const name of BOOLEAN_OPTIONS) requireBoolean(name, o[name]);
  for (const name of STRING_OPTIONS) {
    const value = o[name];
    if (value !== undefined && (typeof value !== 'string' || value === '')) {
      throw new InvalidOptionError(name, value, 'a non-empty string');
    }
  }
  const password = o.tlsCertificateKeyFilePassword;
  if (password !== undefined && typeof password !== 'string') {
    throw new InvalidOptionError('tlsCertificateKeyFilePassword', password, 'a string');
  }
  if (partial) checkProxyValues(o);
  else proxySettings(o);
  return serverApi;
}
