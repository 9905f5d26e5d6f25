/**
 * Server addresses: the `host:port` string that names a pool's Endpoint.
 *
 * Source: CMAP spec, "Connection Pool" (a pool is associated with exactly one Endpoint) and "Common Fields"
 * (serverHost, serverPort); connection string spec, "Host Information".
 */
import { isIPv4, isIPv6, SocketAddress } from 'node:net';
import { InvalidOptionError } from './errors';

/** The default MongoDB port. */
export const DEFAULT_PORT = 27017;

/**
 * A parsed server address.
 *
 * - `address`: the normalized form, `host:port` (`[v6]:port` for IPv6), or the socket path for a Unix domain socket.
 * - `host`: host name, IP address (IPv6 without brackets) or socket path.
 * - `port`: the TCP port; absent for a Unix domain socket.
 */
export interface ServerAddress {
  readonly address: string;
  readonly host: string;
  readonly port?: number;
}

/**
 * Parses `host`, `host:port`, `[ipv6]`, `[ipv6]:port` or a Unix domain socket path: one that holds a `/` and ends in
 * `.sock` (`./mongodb.sock` for a socket file of the working directory). A name ending in `.sock` without a `/`
 * (`mongodb-27017.sock`) is a host name, as the connection string spec's tests read it. A missing port means 27017. A
 * host is case-insensitive (RFC 3986, section 3.2.2), so host names are lower-cased, and an IPv6 address is written in
 * its canonical text form (RFC 5952: lower-case hex, zeros compressed): every spelling of one server gives one
 * `address`, hence one pool and one monitor. An IPv6 zone id (`fe80::1%eth0`) is kept as given.
 *
 * @throws {InvalidOptionError} (option `address`) when the value is not a non-empty string of one of those forms, the
 *   text between brackets is not an IPv6 address, the host is made of numbers but is no dotted-decimal IPv4 address
 *   (`010.0.0.1`, which the resolver would read as 8.0.0.1; `127.1`), the host holds a control character (U+0000 to
 *   U+001F, U+007F: the resolver reads `evil.com\0.mongodb.net` as evil.com), or the port is not an integer from 1 to
 *   65535.
 */
export function parseAddress(value: unknown): ServerAddress {
  const allowed = 'a "host:port" string (host alone means port 27017; IPv6 as "[::1]:27017"; or a path with a "/", ending in .sock)';
  if (typeof value !== 'string' || value.trim() === '') throw new InvalidOptionError('address', value, allowed);
  const text = value.trim();
  if (isSocketPath(text) && !hasUserinfo(text)) return Object.freeze({ address: text, host: text });
  // What errors name from here on: never the password of user information given with the host.
  const shown = withoutUserinfo(value);

  let host: string;
  let portText: string | undefined;
  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    if (close < 2) throw new InvalidOptionError('address', shown, allowed);
    host = ipv6Text(text.slice(1, close), shown, allowed);
    const rest = text.slice(close + 1);
    if (rest !== '' && !rest.startsWith(':')) throw new InvalidOptionError('address', shown, allowed);
    portText = rest === '' ? undefined : rest.slice(1);
  } else {
    const parts = text.split(':');
    if (parts.length > 2) throw new InvalidOptionError('address', shown, allowed);
    host = parts[0];
    portText = parts[1];
  }
  // A control character (NUL above all, where the resolver stops reading) would make the host named differ from the
  // one connected to: `evil.com\0.mongodb.net` resolves evil.com.
  if (host === '' || /[\s/?#@\x00-\x1f\x7f]/.test(host)) throw new InvalidOptionError('address', shown, allowed);
  if (isNumericHost(host)) throw new InvalidOptionError('address', shown, DOTTED_DECIMAL);
  const port = portText === undefined ? DEFAULT_PORT : Number(portText);
  if (!/^\d+$/.test(portText ?? '1') || !isPort(port)) {
    throw new InvalidOptionError('address', shown, allowed);
  }
  const canonical = host.includes(':') ? host : host.toLowerCase();
  return Object.freeze({ address: writtenAddress(canonical, port), host: canonical, port });
}

/**
 * How an address is written in events, errors and log messages: `host:port`, an IPv6 host in brackets (`[::1]:27017`,
 * where `::1:27017` would read as another IPv6 address), a Unix domain socket path (no `port`) alone. `host` is written
 * as given.
 *
 * Source: connection string spec, "Host Information" (the IP-literal form of an IPv6 host).
 */
export function writtenAddress(host: string, port: number | undefined): string {
  if (port === undefined) return host;
  return `${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/**
 * Whether `text` is a Unix domain socket path: it holds a `/` and ends in `.sock`. The connection string spec asks for
 * the `.sock` ending, and its tests read `mongodb-27017.sock` (no `/`) as a host name: that name would otherwise
 * connect to a socket file of the working directory, not to the server named.
 */
function isSocketPath(text: string): boolean {
  return text.endsWith('.sock') && text.includes('/');
}

/** Whether `text` starts with user information (`user:password@`): an `@` before any `/` (a socket path may hold one after). */
function hasUserinfo(text: string): boolean {
  const at = text.indexOf('@');
  return at >= 0 && !text.slice(0, at).includes('/');
}

/**
 * `text` with what comes before its last `@` shown as `<credentials not shown>`: no host holds an `@`, so one given
 * with a host is user information (`user:password@host`, the authority of a connection string without its scheme).
 *
 * Source: auth spec (drivers MUST NOT log credentials), for the values an error names.
 */
function withoutUserinfo(text: string): string {
  const at = text.lastIndexOf('@');
  return at < 0 ? text : `<credentials not shown>${text.slice(at)}`;
}

/** Whether `port` is a TCP port: an integer from 1 to 65535 (connection string spec, "Port"). */
function isPort(port: number): boolean {
  return Number.isInteger(port) && port >= 1 && port <= 65535;
}

/** What a host made only of numbers must be. */
const DOTTED_DECIMAL = 'an IPv4 address in dotted-decimal form: four numbers from 0 to 255, without leading zeros (e.g. 10.0.0.1)';

/**
 * Whether `host` is made only of numbers (decimal, or hexadecimal with 0x) separated by dots, yet is no IPv4 address
 * in dotted-decimal form: `010.0.0.1`, `127.1`, `0x7f.1`, `2130706433`. No host name is all numbers (a top-level
 * domain never is), and the resolver reads these the BSD way (inet_aton): a leading 0 makes a number octal, so
 * `010.0.0.1` reaches 8.0.0.1, not 10.0.0.1, while every event and log message shows `010.0.0.1`.
 *
 * Source: RFC 3986, section 3.2.2 (only the dotted-decimal form of four octets is an IPv4 address) and section 7.4
 * ("Rare IP Address Formats"), to which the connection string spec's "Host" refers.
 */
function isNumericHost(host: string): boolean {
  return /^(?:0x[0-9a-f]+|[0-9]+)(?:\.(?:0x[0-9a-f]+|[0-9]+))*\.?$/i.test(host) && !isIPv4(host);
}

/**
 * The canonical text of the IPv6 address between an IP literal's brackets (RFC 5952), its zone id kept as given.
 *
 * @throws {InvalidOptionError} (option `address`, the whole `value`) when `literal` is not an IPv6 address (an IPv4
 *   address or a host name in brackets included: RFC 3986's IP-literal holds an IPv6 address).
 */
function ipv6Text(literal: string, value: unknown, allowed: string): string {
  if (!isIPv6(literal)) throw new InvalidOptionError('address', value, allowed);
  const zone = literal.indexOf('%');
  const bare = zone < 0 ? literal : literal.slice(0, zone);
  return new SocketAddress({ address: bare, family: 'ipv6' }).address + (zone < 0 ? '' : literal.slice(zone));
}

/**
 * Checks an Endpoint given as `host` and `port` (as a connection factory takes it) by the rules {@link parseAddress}
 * applies to an address string: a Unix domain socket path holds a `/`, ends in `.sock` and has no port; any other host has a port
 * from 1 to 65535, and is a host name, an IPv4 address or an IPv6 address written without brackets.
 *
 * @throws {InvalidOptionError} (option `port`) for a port that is not an integer from 1 to 65535, a missing port with a
 *   host that is not a socket path (`{ host: 'localhost' }` or `{ host: 'db.sock' }` would otherwise be taken for a
 *   socket file of that name), or a port with a socket path;
 *   (option `host`) for an IPv6 address in brackets, a host made of numbers that is no dotted-decimal IPv4 address,
 *   a `host:port` string or a host containing whitespace, a control character, `/`, `?`, `#` or `@`.
 *
 * Source: connection string spec, "Host" (socket paths end in ".sock"; its tests read "mongodb-27017.sock" as a host
 * name), "Port" (an integer from 1 to 65535).
 */
export function checkEndpoint(host: string, port: number | undefined): void {
  if (hasUserinfo(host)) throw new InvalidOptionError('host', withoutUserinfo(host), 'a host name, an IP address or a Unix domain socket path, without user information');
  const socketPath = isSocketPath(host);
  if (port === undefined) {
    if (!socketPath) {
      throw new InvalidOptionError('port', port, `an integer from 1 to 65535 for host ${JSON.stringify(withoutUserinfo(host))} (only a Unix domain socket path, with a "/" and ending in .sock, has no port)`);
    }
    return;
  }
  if (!isPort(port)) {
    throw new InvalidOptionError('port', port, 'an integer from 1 to 65535, or absent for a Unix domain socket');
  }
  if (socketPath) {
    throw new InvalidOptionError('port', port, `absent: host ${JSON.stringify(withoutUserinfo(host))} is a Unix domain socket path`);
  }
  if (isNumericHost(host)) throw new InvalidOptionError('host', host, DOTTED_DECIMAL);
  if ((host.includes(':') && !isIPv6(host)) || /[\s/?#@[\]\x00-\x1f\x7f]/.test(host)) {
    throw new InvalidOptionError('host', withoutUserinfo(host), 'a host name, an IPv4 address or an IPv6 address without brackets (e.g. ::1), with the port given as port');
  }
}
