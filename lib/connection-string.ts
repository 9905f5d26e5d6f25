/**
 * Connection strings: a `mongodb://` URI parsed with `mongodb-connection-string-url` into hosts and the connection
 * options this library understands.
 *
 * Source: connection string spec ("Host Information", "Userinfo", "Connection Options"); URI options spec; auth spec
 * ("Credential delimiter in URI implies authentication", authSource defaults).
 */
import { ConnectionString } from 'mongodb-connection-string-url';
import { parseAddress } from './address';
import { AUTH_MECHANISMS, type AuthMechanism, type CredentialsInit } from './auth/credentials';
import type { ConnectionOptions } from './connection/connect';
import { InvalidOptionError } from './errors';

/** A parsed connection string. */
export interface ParsedConnectionString {
  /** Every host, normalized to `host:port`. */
  readonly hosts: readonly string[];
  /** `appName`, when given. */
  readonly appName?: string;
  /** The connection options the URI sets (credentials, TLS, timeouts, compression, appName). */
  readonly connectionOptions: ConnectionOptions;
  /** The URI with its credentials replaced, safe to print. */
  readonly redacted: string;
}

/**
 * Parses a `mongodb://` or `mongodb+srv://` connection string.
 *
 * @throws {InvalidOptionError} (option `uri`) when it is not a valid connection string, or naming the option when a
 *   connection option has an invalid value; messages never contain the password.
 */
export function parseConnectionString(uri: string): ParsedConnectionString {
  let parsed: ConnectionString;
  try {
    parsed = new ConnectionString(uri);
  } catch (error) {
    throw new InvalidOptionError('uri', '<connection string not shown>', `a valid mongodb:// connection string (${(error as Error).message})`);
  }
  const params = caseInsensitive(parsed.searchParams);
  const options: ConnectionOptions = {};
  const appName = params.get('appname');
  if (appName !== undefined) options.appName = appName;
  for (const name of ['connectTimeoutMS', 'socketTimeoutMS', 'zlibCompressionLevel'] as const) {
    const text = params.get(name.toLowerCase());
    if (text !== undefined) options[name] = integer(name, text);
  }
  const compressors = params.get('compressors');
  if (compressors !== undefined) options.compressors = compressors.split(',').filter((c) => c !== '');
  for (const name of ['tls', 'ssl', 'tlsAllowInvalidCertificates', 'tlsAllowInvalidHostnames', 'tlsInsecure', 'loadBalanced'] as const) {
    const text = params.get(name.toLowerCase());
    if (text === undefined) continue;
    const value = boolean(name, text);
    if (name === 'ssl') options.tls = value;
    else options[name] = value;
  }
  for (const name of ['tlsCAFile', 'tlsCertificateKeyFile', 'tlsCertificateKeyFilePassword'] as const) {
    const text = params.get(name.toLowerCase());
    if (text !== undefined) options[name] = text;
  }
  if (parsed.isSRV && options.tls === undefined) options.tls = true;

  // A credential delimiter (@) means authentication, even with an empty user name (which is then an error).
  if (parsed.username !== '' || /^[^/]*:\/\/[^/]*@/.test(uri)) {
    const mechanism = params.get('authmechanism');
    if (mechanism !== undefined && !AUTH_MECHANISMS.includes(mechanism as AuthMechanism)) {
      throw new InvalidOptionError('authMechanism', mechanism, `one of ${AUTH_MECHANISMS.join(', ')}`);
    }
    const database = parsed.pathname.replace(/^\//, '');
    const credentials: CredentialsInit = {
      username: decodeURIComponent(parsed.username),
      password: decodeURIComponent(parsed.password),
      source: params.get('authsource') ?? (database !== '' ? database : 'admin'),
      ...(mechanism !== undefined ? { mechanism: mechanism as AuthMechanism } : {}),
    };
    options.credentials = credentials;
  }

  return Object.freeze({
    hosts: Object.freeze(parsed.hosts.map((h) => parseAddress(h).address)),
    ...(appName === undefined ? {} : { appName }),
    connectionOptions: Object.freeze(options),
    redacted: parsed.redact().toString(),
  });
}

function caseInsensitive(params: URLSearchParams): Map<string, string> {
  const out = new Map<string, string>();
  for (const [k, v] of params) if (!out.has(k.toLowerCase())) out.set(k.toLowerCase(), v);
  return out;
}

function integer(name: string, text: string): number {
  const n = Number(text);
  if (text.trim() === '' || !Number.isInteger(n)) throw new InvalidOptionError(name, text, 'an integer');
  return n;
}

function boolean(name: string, text: string): boolean {
  if (text === 'true') return true;
  if (text === 'false') return false;
  throw new InvalidOptionError(name, text, '"true" or "false"');
}
