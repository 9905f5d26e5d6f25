/**
 * The options of how connections are established, their names, and the checks of their keys and value types, which
 * the connection factory and the pools, monitors and clients that make one apply to what they receive.
 *
 * Source: URI options spec (appName, connectTimeoutMS, socketTimeoutMS, compressors, zlibCompressionLevel, the tls
 * options, loadBalanced); auth spec, "MongoCredential".
 */
import { MongoCredentials, type CredentialsInit } from '../auth/credentials';
import { InvalidOptionError } from '../errors';
import {
  rejectUnknownOptions,
  requireBoolean,
  requireDurationMS,
  requireOptionsObject,
  type ListsEveryOption,
} from '../options';
import { SUPPORTED_COMPRESSORS } from './op-compressed';
import { TLS_OPTION_NAMES, type TlsSettings } from './tls-options';

/**
 * How connections are established. Durations in ms.
 *
 * Source: URI options spec (appName, connectTimeoutMS, socketTimeoutMS, compressors, zlibCompressionLevel, the tls
 * options, loadBalanced); handshake spec, "client.application.name"; auth spec, "MongoCredential"; load balancer
 * spec, "Connection Establishment".
 */
export interface ConnectionOptions extends TlsSettings {
  /** Sent in the handshake as `client.application.name` (at most 128 bytes). */
  appName?: string;
  /** Time allowed for socket connect, TLS, handshake and authentication together, in ms; 0 = no limit. Default 10000. */
  connectTimeoutMS?: number;
  /** Default time allowed for each reply once established, in ms; 0 = no limit. Default 0. */
  socketTimeoutMS?: number;
  /** Compressors to offer, in order of preference: `zlib`, or `none`. Default: none offered. */
  compressors?: readonly string[];
  /** zlib level, -1 (zlib's default) to 9. Default -1. */
  zlibCompressionLevel?: number;
  /** Authenticate every connection (SCRAM-SHA-256 or SCRAM-SHA-1). */
  credentials?: MongoCredentials | CredentialsInit;
  /** Load-balanced mode: the handshake sends `hello` with `loadBalanced: true`. */
  loadBalanced?: boolean;
}

/**
 * Every option name of `ConnectionOptions` (a readonly tuple): appName, the timeouts, compression, credentials,
 * loadBalanced, then the {@link TLS_OPTION_NAMES}.
 *
 * Source: URI options spec (appName, connectTimeoutMS, socketTimeoutMS, compressors, zlibCompressionLevel,
 * loadBalanced, the tls options); auth spec, "MongoCredential" (`credentials`).
 */
export const CONNECTION_OPTION_NAMES = [
  'appName',
  'connectTimeoutMS',
  'socketTimeoutMS',
  'compressors',
  'zlibCompressionLevel',
  'credentials',
  'loadBalanced',
  ...TLS_OPTION_NAMES,
] as const satisfies readonly (keyof ConnectionOptions)[];
true satisfies ListsEveryOption<ConnectionOptions, typeof CONNECTION_OPTION_NAMES>;

/** The keys of a credentials object given as options (a `CredentialsInit`). */
const CREDENTIALS_INIT_NAMES = [
  'username',
  'password',
  'source',
  'mechanism',
] as const satisfies readonly (keyof CredentialsInit)[];
true satisfies ListsEveryOption<CredentialsInit, typeof CREDENTIALS_INIT_NAMES>;

const BOOLEAN_OPTIONS = [
  'loadBalanced',
  'tls',
  'tlsAllowInvalidCertificates',
  'tlsAllowInvalidHostnames',
  'tlsInsecure',
] as const satisfies readonly (keyof ConnectionOptions)[];
const STRING_OPTIONS = [
  'tlsCAFile',
  'tlsCertificateKeyFile',
  'tlsServerName',
] as const satisfies readonly (keyof ConnectionOptions)[];

/**
 * Checks the keys and value types of connection options, without reading any file: no key outside
 * {@link CONNECTION_OPTION_NAMES} (plus `extraKeys`); `appName` a string; `connectTimeoutMS` and `socketTimeoutMS`
 * numbers of ms >= 0; `compressors` an array of `zlib` / `none`; `zlibCompressionLevel` an integer from -1 to 9;
 * `credentials` a {@link MongoCredentials} or a `{ username, password, source?, mechanism? }` object (validated as
 * MongoCredentials does); the booleans real booleans; `tlsCAFile`, `tlsCertificateKeyFile`, `tlsServerName`
 * non-empty strings; `tlsCertificateKeyFilePassword` a string. Undefined values are allowed everywhere.
 *
 * @param options the options to check.
 * @param owner what received them (named in an unknown-option error), e.g. `"ConnectionPool"`.
 * @param path prefix of the keys in an unknown-option error, e.g. `"connectionOptions."`.
 * @param extraKeys other keys the receiver accepts at the same level (e.g. the Endpoint's `host` and `port`).
 * @throws {InvalidOptionError} naming the first invalid option, its value (never a password or credentials) and
 *   what is allowed; for an unknown key, the closest known option.
 *
 * Source: URI options spec (each option's allowed values); auth spec, "MongoCredential".
 */
export function checkConnectionOptions(
  options: unknown,
  owner: string,
  path = '',
  extraKeys: readonly string[] = [],
): void {
  const o = requireOptionsObject(path === '' ? 'options' : path.slice(0, -1), options, 'an object of connection options');
  if (o === undefined) return;
  const known = extraKeys.length === 0 ? CONNECTION_OPTION_NAMES : [...CONNECTION_OPTION_NAMES, ...extraKeys];
  rejectUnknownOptions(o, known, owner, path);
  if (o.appName !== undefined && typeof o.appName !== 'string') {
    throw new InvalidOptionError('appName', o.appName, 'a string');
  }
  if (o.connectTimeoutMS !== undefined) requireDurationMS('connectTimeoutMS', o.connectTimeoutMS);
  if (o.socketTimeoutMS !== undefined) requireDurationMS('socketTimeoutMS', o.socketTimeoutMS);
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
    }
  }
  const level = o.zlibCompressionLevel;
  if (level !== undefined && (typeof level !== 'number' || !Number.isInteger(level) || level < -1 || level > 9)) {
    throw new InvalidOptionError('zlibCompressionLevel', level, 'an integer from -1 to 9');
  }
  if (o.credentials !== undefined && !(o.credentials instanceof MongoCredentials)) {
    const shape = 'a MongoCredentials or a { username, password, source?, mechanism? } object';
    const init = requireOptionsObject('credentials', o.credentials, shape, true);
    // A plain object takes only the CredentialsInit keys; a class instance (a MongoCredentials of another copy of
    // this library, say) is read through its properties, as MongoCredentials reads it.
    const proto = Object.getPrototypeOf(init);
    if (proto === Object.prototype || proto === null) {
      rejectUnknownOptions(init, CREDENTIALS_INIT_NAMES, 'credentials', `${path}credentials.`);
    }
    // Constructed only to run its checks (user name, password type, source, mechanism): it is not kept.
    new MongoCredentials(init as unknown as CredentialsInit);
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
}
