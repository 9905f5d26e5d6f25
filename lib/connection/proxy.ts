/**
 * The SOCKS5 proxy options and their checks. The exchange with the proxy is socks5.ts.
 *
 * Source: SOCKS5 support spec, "MongoClient Configuration"; URI options spec (proxyHost, proxyPort, proxyUsername,
 * proxyPassword).
 */
import { isIP } from 'node:net';
import { InvalidOptionError } from '../errors';
import { optionValues } from '../options';

/**
 * The SOCKS5 proxy options of {@link ConnectionOptions}. All four apply to every connection a factory, pool, monitor
 * or client opens (a client's monitoring connections included), and to no single operation.
 *
 * Source: SOCKS5 support spec, "MongoClient Configuration"; URI options spec.
 */
export interface ProxyOptions {
  /**
   * The SOCKS5 proxy every TCP connection (TLS included) goes through: a domain name, or an IPv4 or IPv6 address (an
   * IPv6 address with or without brackets), without a port (that is `proxyPort`). The server's host name is passed to the proxy as it is: it is never
   * resolved here (no DNS query for it leaves this host). A connection to a Unix domain socket path never goes
   * through the proxy. Undefined or `''`: no proxy.
   */
  proxyHost?: string | undefined;
  /** The proxy's TCP port, an integer from 1 to 65535; only with `proxyHost`. Default 1080. */
  proxyPort?: number | undefined;
  /**
   * The user name to authenticate to the proxy with (RFC 1929): 1 to 255 bytes of UTF-8; only with `proxyHost` and
   * `proxyPassword`. `''` counts as not given.
   */
  proxyUsername?: string | undefined;
  /**
   * The password to authenticate to the proxy with (RFC 1929): 1 to 255 bytes of UTF-8; only with `proxyHost` and
   * `proxyUsername`. `''` counts as not given. Never shown in an error, event, log message or warning.
   */
  proxyPassword?: string | undefined;
}

/**
 * The names of {@link ProxyOptions}.
 *
 * Source: SOCKS5 support spec, "MongoClient Configuration".
 */
export const PROXY_OPTION_NAMES = ['proxyHost', 'proxyPort', 'proxyUsername', 'proxyPassword'] as const satisfies readonly (keyof ProxyOptions)[];

/** The default proxyPort (SOCKS5 support spec, "proxyPort"). */
const DEFAULT_PROXY_PORT = 1080;

/** RFC 1929: a user name or password is 1 to 255 bytes. */
const MAX_CREDENTIAL_BYTES = 255;

/** A proxy to connect through, as checked by {@link proxySettings}. */
export interface ProxySettings {
  /** The proxy's host: a domain name or an IP address (IPv6 without brackets). */
  readonly host: string;
  readonly port: number;
  /** Both or neither. */
  readonly username: string | undefined;
  readonly password: string | undefined;
}

/**
 * Checks the proxy options and returns the proxy they name, or undefined for none (`proxyHost` undefined or `''`).
 *
 * @throws {InvalidOptionError} naming the option: any {@link checkProxyValues} refuses, and any of proxyPort,
 *   proxyUsername, proxyPassword without proxyHost, proxyUsername without proxyPassword and the reverse (the password
 *   is never shown).
 *
 * Source: SOCKS5 support spec, "MongoClient Configuration" (each MUST error, zero-length user names and passwords
 * ignored).
 */
export function proxySettings(options: { readonly [K in keyof ProxyOptions]?: unknown }): ProxySettings | undefined {
  const o = checkProxyValues(options);
  const { username, password } = o;
  const host = o.proxyHost === undefined || o.proxyHost === '' ? undefined : unbracketed(o.proxyHost);
  if (host === undefined) {
    const stray = o.proxyPort !== undefined ? 'proxyPort' : username !== undefined ? 'proxyUsername' : password !== undefined ? 'proxyPassword' : undefined;
    if (stray === undefined) return undefined;
    const shown = stray === 'proxyPassword' ? '<not shown>' : stray === 'proxyPort' ? o.proxyPort : username;
    throw new InvalidOptionError(stray, shown, 'given only with proxyHost (the SOCKS5 proxy it applies to)');
  }
  if (username !== undefined && password === undefined) {
    throw new InvalidOptionError('proxyUsername', username, 'given only with proxyPassword (RFC 1929 authentication needs both)');
  }
  if (password !== undefined && username === undefined) {
    throw new InvalidOptionError('proxyPassword', '<not shown>', 'given only with proxyUsername (RFC 1929 authentication needs both)');
  }
  return { host, port: o.proxyPort ?? DEFAULT_PROXY_PORT, username, password };
}

/**
 * Checks each proxy option by itself, for options that others may complete (`connect()`'s options object, which the
 * URI's proxy options complete, and the reverse): a proxyHost that is not a string (its form is checked once the
 * options are whole, by {@link proxySettings}), a proxyPort that is not an integer from 1 to 65535, a proxyUsername or proxyPassword that is not
 * a string or is longer than 255 bytes of UTF-8. Returns the options, with the user name and password undefined
 * where `''` (as not given).
 *
 * @throws {InvalidOptionError} naming the option; the password is never shown.
 *
 * Source: SOCKS5 support spec, "MongoClient Configuration"; RFC 1929 (the 255-byte limits).
 */
export function checkProxyValues(options: { readonly [K in keyof ProxyOptions]?: unknown }): {
  readonly proxyHost: string | undefined;
  readonly proxyPort: number | undefined;
  readonly username: string | undefined;
  readonly password: string | undefined;
} {
  const o = optionValues(options, PROXY_OPTION_NAMES);
  if (o.proxyHost !== undefined && typeof o.proxyHost !== 'string') {
    throw new InvalidOptionError('proxyHost', o.proxyHost, 'a string: the domain name or IP address of a SOCKS5 proxy');
  }
  if (o.proxyPort !== undefined && (typeof o.proxyPort !== 'number' || !Number.isInteger(o.proxyPort) || o.proxyPort < 1 || o.proxyPort > 65535)) {
    throw new InvalidOptionError('proxyPort', o.proxyPort, 'an integer from 1 to 65535: the TCP port of the SOCKS5 proxy');
  }
  return {
    proxyHost: o.proxyHost,
    proxyPort: o.proxyPort,
    username: credential('proxyUsername', o.proxyUsername),
    password: credential('proxyPassword', o.proxyPassword),
  };
}

/** A proxy user name or password: undefined when not given or `''`. An error shows the user name, never the password. */
function credential(name: 'proxyUsername' | 'proxyPassword', value: unknown): string | undefined {
  if (value === undefined) return undefined;
  const shown = name === 'proxyPassword' ? '<not shown>' : value;
  if (typeof value !== 'string') throw new InvalidOptionError(name, shown, 'a string');
  if (Buffer.byteLength(value) > MAX_CREDENTIAL_BYTES) {
    throw new InvalidOptionError(name, shown, `at most ${MAX_CREDENTIAL_BYTES} bytes of UTF-8 (RFC 1929)`);
  }
  return value === '' ? undefined : value;
}

/**
 * A proxy host with the brackets of an IPv6 address removed (`[::1]` → `::1`). A `:` elsewhere than in an IPv6
 * address is refused (`proxy.example:1081` would be looked up as a host name, ENOTFOUND, its port never used), and
 * so is a bracket anywhere but around an IPv6 address.
 */
function unbracketed(host: string): string {
  const bracketed = /^\[(.*)\]$/.exec(host);
  const inner = bracketed === null ? host : bracketed[1];
  const valid = bracketed === null ? !/[[\]]/.test(host) && (!host.includes(':') || isIP(host) === 6) : isIP(inner) === 6;
  if (!valid) {
    throw new InvalidOptionError('proxyHost', host, 'a domain name, an IPv4 address, or an IPv6 address (with or without brackets), without a port (give the port as proxyPort)');
  }
  return inner;
}
