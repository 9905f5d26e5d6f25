/**
 * Server addresses: the `host:port` string that names a pool's Endpoint.
 *
 * Source: CMAP spec, "Connection Pool" (a pool is associated with exactly one Endpoint) and "Common Fields"
 * (serverHost, serverPort); connection string spec, "Host Information".
 */
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
 * Parses `host`, `host:port`, `[ipv6]`, `[ipv6]:port` or a Unix domain socket path ending in `.sock`.
 * A missing port means 27017.
 *
 * @throws {InvalidOptionError} (option `address`) when the value is not a non-empty string of one of those forms, or
 *   the port is not an integer from 1 to 65535.
 */
export function parseAddress(value: unknown): ServerAddress {
  const allowed = 'a "host:port" string (host alone means port 27017; IPv6 as "[::1]:27017"; or a path ending in .sock)';
  if (typeof value !== 'string' || value.trim() === '') throw new InvalidOptionError('address', value, allowed);
  const text = value.trim();
  if (text.endsWith('.sock')) return Object.freeze({ address: text, host: text });

  let host: string;
  let portText: string | undefined;
  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    if (close < 2) throw new InvalidOptionError('address', value, allowed);
    host = text.slice(1, close);
    const rest = text.slice(close + 1);
    if (rest !== '' && !rest.startsWith(':')) throw new InvalidOptionError('address', value, allowed);
    portText = rest === '' ? undefined : rest.slice(1);
  } else {
    const parts = text.split(':');
    if (parts.length > 2) throw new InvalidOptionError('address', value, allowed);
    host = parts[0];
    portText = parts[1];
  }
  if (host === '' || /[\s/?#@]/.test(host)) throw new InvalidOptionError('address', value, allowed);
  const port = portText === undefined ? DEFAULT_PORT : Number(portText);
  if (!/^\d+$/.test(portText ?? '1') || !Number.isInteger(port) || port < 1 || port > 65535) {
    throw new InvalidOptionError('address', value, allowed);
  }
  const shown = host.includes(':') ? `[${host}]` : host.toLowerCase();
  return Object.freeze({ address: `${shown}:${port}`, host: host.includes(':') ? host : host.toLowerCase(), port });
}
