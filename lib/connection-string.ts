/**
 * Connection strings: the parts of a `mongodb://` URI this library uses, parsed with
 * `mongodb-connection-string-url`.
 *
 * Source: connection string spec ("Host Information", "Connection Options"); URI options spec.
 */
import { ConnectionString } from 'mongodb-connection-string-url';
import { parseAddress } from './address';
import { InvalidOptionError } from './errors';

/** A parsed connection string. */
export interface ParsedConnectionString {
  /** Every host, normalized to `host:port`. */
  readonly hosts: readonly string[];
  /** `appName`, when given. */
  readonly appName?: string;
  /** The URI with its credentials replaced, safe to print. */
  readonly redacted: string;
}

/**
 * Parses a `mongodb://` or `mongodb+srv://` connection string.
 *
 * @throws {InvalidOptionError} (option `uri`) when it is not a valid connection string; the message never contains
 *   the password.
 */
export function parseConnectionString(uri: string): ParsedConnectionString {
  let parsed: ConnectionString;
  try {
    parsed = new ConnectionString(uri);
  } catch (error) {
    throw new InvalidOptionError('uri', '<connection string not shown>', `a valid mongodb:// connection string (${(error as Error).message})`);
  }
  const appName = parsed.searchParams.get('appName') ?? undefined;
  return Object.freeze({
    hosts: Object.freeze(parsed.hosts.map((h) => parseAddress(h).address)),
    ...(appName === undefined ? {} : { appName }),
    redacted: parsed.redact().toString(),
  });
}
