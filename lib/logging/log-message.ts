/**
 * CMAP events as the spec's log messages: structured (exact key names) and, through `render()`, unstructured.
 *
 * Source: CMAP spec, "Connection Pool Logging" (every message, its keys, reason strings and unstructured form);
 * logging spec ("Representing Errors", "Omitting Null Values", truncation of documents).
 */
import { EJSON } from 'bson';
import type { ServerAddress } from '../address';
import { MongoServerError } from '../errors';
import type { ConnectionPoolEvent } from '../events';
import { POOL_OPTION_NAMES } from '../options';

/** An error, as it appears in a structured log message. */
export interface LoggedError {
  readonly type: string;
  readonly message: string;
  readonly code?: number;
  readonly codeName?: string;
  readonly errorLabels?: readonly string[];
  /** A server error's reply, as relaxed extended JSON, truncated. */
  readonly response?: string;
}

/** The fields of a connection log message, with the spec's key names; absent values are omitted. */
export interface ConnectionLogFields {
  readonly message: string;
  readonly serverHost: string;
  readonly serverPort?: number;
  readonly driverConnectionId?: number;
  readonly durationMS?: number;
  readonly reason?: string;
  readonly error?: LoggedError;
  readonly serviceId?: string;
  readonly maxIdleTimeMS?: number;
  readonly minPoolSize?: number;
  readonly maxPoolSize?: number;
  readonly maxConnecting?: number;
  readonly waitQueueTimeoutMS?: number;
}

/** One log message of the `connection` component, at `debug` level. */
export class ConnectionLogMessage {
  readonly component = 'connection' as const;
  readonly level = 'debug' as const;

  constructor(
    /** When the event was emitted, ms since the epoch. */
    readonly time: number,
    readonly fields: ConnectionLogFields,
  ) {
    Object.freeze(this);
  }

  /** The structured form: `t` (ISO time), `c` (component), `s` (severity), then the spec's keys. */
  toJSON(): Record<string, unknown> {
    return { t: new Date(this.time).toISOString(), c: this.component, s: this.level, ...this.fields };
  }

  /** The spec's unstructured form of this message. */
  render(): string {
    return renderConnectionMessage(this.fields);
  }
}

const CLOSED_REASONS: Record<string, string> = {
  stale: 'Connection became stale because the pool was cleared',
  idle: 'Connection has been available but unused for longer than the configured max idle time',
  error: 'An error occurred while using the connection',
  poolClosed: 'Connection pool was closed',
};

const CHECKOUT_FAILED_REASONS: Record<string, string> = {
  timeout: 'Wait queue timeout elapsed without a connection becoming available',
  connectionError: 'An error occurred while trying to establish a new connection',
  poolClosed: 'Connection pool was closed',
  cancelled: 'The checkout was cancelled before a connection was delivered',
};

/**
 * Cuts `text` to `max` UTF-16 code units, never inside a surrogate pair, and appends `...` (not counted) when it cut.
 */
export function truncate(text: string, max: number): string {
  if (text.length <= max) return text;
  let end = max;
  const last = text.charCodeAt(end - 1);
  if (end > 0 && last >= 0xd800 && last <= 0xdbff) end--;
  return `${text.slice(0, end)}...`;
}

/** An error as a structured log value, with texts and documents truncated to `maxDocumentLength`. */
export function logError(error: Error, maxDocumentLength: number): LoggedError {
  const labels = (error as { errorLabels?: Set<string> }).errorLabels;
  return {
    type: error.name,
    message: truncate(error.message, maxDocumentLength),
    ...(error instanceof MongoServerError && error.code !== undefined ? { code: error.code } : {}),
    ...(error instanceof MongoServerError && error.codeName !== undefined ? { codeName: error.codeName } : {}),
    ...(labels instanceof Set && labels.size > 0 ? { errorLabels: [...labels] } : {}),
    ...(error instanceof MongoServerError ? { response: truncate(EJSON.stringify(error.response, { relaxed: true }), maxDocumentLength) } : {}),
  };
}

/** The log message of a CMAP event. */
export function connectionLogMessage(
  event: ConnectionPoolEvent,
  server: ServerAddress,
  maxDocumentLength: number,
): ConnectionLogMessage {
  const base = { serverHost: server.host, ...(server.port === undefined ? {} : { serverPort: server.port }) };
  let fields: ConnectionLogFields;
  switch (event.type) {
    case 'ConnectionPoolCreated': {
      const options: Record<string, number> = {};
      for (const name of POOL_OPTION_NAMES) if (event.options[name] !== undefined) options[name] = event.options[name]!;
      fields = { message: 'Connection pool created', ...base, ...options };
      break;
    }
    case 'ConnectionPoolReady':
      fields = { message: 'Connection pool ready', ...base };
      break;
    case 'ConnectionPoolCleared':
      fields = { message: 'Connection pool cleared', ...base, ...(event.serviceId ? { serviceId: event.serviceId } : {}) };
      break;
    case 'ConnectionPoolClosed':
      fields = { message: 'Connection pool closed', ...base };
      break;
    case 'ConnectionCreated':
      fields = { message: 'Connection created', ...base, driverConnectionId: event.connectionId };
      break;
    case 'ConnectionReady':
      fields = { message: 'Connection ready', ...base, driverConnectionId: event.connectionId, durationMS: event.duration };
      break;
    case 'ConnectionClosed':
      fields = {
        message: 'Connection closed',
        ...base,
        driverConnectionId: event.connectionId,
        reason: CLOSED_REASONS[event.reason],
        ...(event.reason === 'error' && event.error ? { error: logError(event.error, maxDocumentLength) } : {}),
      };
      break;
    case 'ConnectionCheckOutStarted':
      fields = { message: 'Connection checkout started', ...base };
      break;
    case 'ConnectionCheckOutFailed':
      fields = {
        message: 'Connection checkout failed',
        ...base,
        reason: CHECKOUT_FAILED_REASONS[event.reason],
        ...(event.reason === 'connectionError' && event.error ? { error: logError(event.error, maxDocumentLength) } : {}),
        durationMS: event.duration,
      };
      break;
    case 'ConnectionCheckedOut':
      fields = { message: 'Connection checked out', ...base, driverConnectionId: event.connectionId, durationMS: event.duration };
      break;
    case 'ConnectionCheckedIn':
      fields = { message: 'Connection checked in', ...base, driverConnectionId: event.connectionId };
      break;
  }
  return new ConnectionLogMessage(event.time, fields);
}

/** The unstructured form (CMAP "Connection Pool Logging"), omitting the segments of absent values. */
export function renderConnectionMessage(f: ConnectionLogFields): string {
  const where = f.serverPort === undefined ? f.serverHost : `${f.serverHost}:${f.serverPort}`;
  const id = `address=${where}, driver-generated ID=${f.driverConnectionId}`;
  const error = f.error ? `${f.error.type}: ${f.error.message}` : undefined;
  switch (f.message) {
    case 'Connection pool created': {
      const options = POOL_OPTION_NAMES.filter((n) => f[n] !== undefined).map((n) => `${n}=${f[n]}`);
      return `Connection pool created for ${where}${options.length > 0 ? ` using options ${options.join(', ')}` : ''}`;
    }
    case 'Connection pool ready':
      return `Connection pool ready for ${where}`;
    case 'Connection pool cleared':
      return `Connection pool for ${where} cleared${f.serviceId ? ` for serviceId ${f.serviceId}` : ''}`;
    case 'Connection pool closed':
      return `Connection pool closed for ${where}`;
    case 'Connection created':
      return `Connection created: ${id}`;
    case 'Connection ready':
      return `Connection ready: ${id}, established in=${f.durationMS} ms`;
    case 'Connection closed':
      return `Connection closed: ${id}. Reason: ${f.reason}.${error ? ` Error: ${error}` : ''}`;
    case 'Connection checkout started':
      return `Checkout started for connection to ${where}`;
    case 'Connection checkout failed':
      return `Checkout failed for connection to ${where}. Reason: ${f.reason}.${error ? ` Error: ${error}.` : ''} Duration: ${f.durationMS} ms`;
    case 'Connection checked out':
      return `Connection checked out: ${id}, duration=${f.durationMS} ms`;
    case 'Connection checked in':
      return `Connection checked in: ${id}`;
    default:
      return f.message;
  }
}
