/**
 * What the command metric (`instrumentCommands`) and the command spans (`traceCommands`) read alike from a command's
 * events: the collection a command acts on, the server's attributes, and how a failure is classed.
 *
 * Source: OpenTelemetry semantic conventions v1.44.0, "Semantic conventions for MongoDB" (`db.collection.name`,
 * `db.response.status_code`, `error.type`, `server.address`, `server.port`), "Recording errors" (a span and its metric
 * have the same `error.type`); MongoDB OpenTelemetry spec, "db.collection.name".
 */
import type { Attributes } from '@opentelemetry/api';
import type { Document } from 'bson';
import { parseAddress } from '../address';
import { MongoServerError } from '../errors';
import { ATTR_DB_RESPONSE_STATUS_CODE, ATTR_ERROR_TYPE, ATTR_SERVER_ADDRESS, ATTR_SERVER_PORT } from './semantic-conventions';

/**
 * The collection command `name` (document `command`, run on database `databaseName`) acts on: the value of its first
 * key when that is a non-empty string (`{ find: 'orders' }`: `orders`), for `getMore` its `collection` field; none for
 * a command on the `admin` database (`configureFailPoint: 'failCommand'` names no collection), for one whose first
 * value is not a string (`{ aggregate: 1 }`, `{ ping: 1 }`), and for a document that cannot be read. Never throws.
 */
export function commandCollection(name: string, command: Readonly<Document>, databaseName: string): string | undefined {
  if (databaseName === 'admin') return undefined;
  try {
    const value: unknown = command[name === 'getMore' ? 'collection' : name];
    return typeof value === 'string' && value !== '' ? value : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The attributes of a failed command: `error.type`, a server error's code as a string (`11000`), else the error's
 * name (`MongoNetworkError`, `MongoNetworkTimeoutError`); and, for a server error, `db.response.status_code` (the
 * same code). Written into `attributes`.
 */
export function addFailureAttributes(attributes: Attributes, failure: Error): void {
  const code = failure instanceof MongoServerError ? failure.code : undefined;
  if (code !== undefined) attributes[ATTR_DB_RESPONSE_STATUS_CODE] = String(code);
  attributes[ATTR_ERROR_TYPE] = code !== undefined ? String(code) : failure.name;
}

/** The `server.address` and (not for a Unix domain socket) `server.port` attributes of each address met, made once. */
export class ServerAttributes {
  private readonly byAddress = new Map<string, Attributes>();

  /** `server.address` and `server.port` of `address` (`host:port`, or a socket path): a shared, read-only object. */
  of(address: string): Readonly<Attributes> {
    let attributes = this.byAddress.get(address);
    if (attributes === undefined) {
      const server = parseAddress(address);
      attributes = { [ATTR_SERVER_ADDRESS]: server.host, ...(server.port === undefined ? {} : { [ATTR_SERVER_PORT]: server.port }) };
      this.byAddress.set(address, attributes);
    }
    return attributes;
  }
}
