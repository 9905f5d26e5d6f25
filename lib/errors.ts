/**
 * The errors rxcmap throws or emits. Every one extends {@link CmapError}, so `err instanceof CmapError` tells a
 * pool error from anything else, and `err.name` is the class name (the CMAP test format matches on it).
 *
 * Source: CMAP spec, "Connection Pool Errors".
 */

/**
 * Error labels used by the pool, verbatim from the specifications: a frozen object whose keys equal their values.
 *
 * Source: CMAP spec, "Connection Pool Errors" and "Backpressure-enabled"; retryable writes spec.
 */
export const ErrorLabel = Object.freeze({
  /** The operation may be retried (CMAP: PoolClearedError "extends RetryableError"). */
  RetryableError: 'RetryableError',
  /** A write that failed with this error may be retried (retryable-writes spec). */
  RetryableWriteError: 'RetryableWriteError',
  /** The server may be overloaded; SDAM must not clear the pool for it (CMAP "Backpressure-enabled"). */
  SystemOverloadedError: 'SystemOverloadedError',
} as const);

/**
 * Base class of every error rxcmap raises.
 *
 * - `name`: the concrete class name, e.g. `"PoolClosedError"`.
 * - `errorLabels`: the MongoDB error labels attached to this error (see {@link ErrorLabel}).
 * - `cause`: the underlying error, when there is one.
 *
 * Source: CMAP spec, "Connection Pool Errors" ("Errors SHOULD be created and dispatched in a manner idiomatic to the
 * Driver and Language"); error labels: the MongoDB drivers' `errorLabels` (a server reply's `errorLabels`).
 */
export class CmapError extends Error {
  /**
   * The MongoDB error labels of this error (see {@link ErrorLabel}), a mutable Set: the connection factory adds the
   * backpressure labels to establishment errors. Empty when there are none.
   */
  readonly errorLabels: Set<string>;

  constructor(message: string, options?: { cause?: unknown; labels?: readonly string[] }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.errorLabels = new Set(options?.labels ?? []);
  }

  /** True when this error carries `label` (e.g. `"RetryableError"`). */
  hasErrorLabel(label: string): boolean {
    return this.errorLabels.has(label);
  }
}

/**
 * A pool or connection option was given a value it does not allow. Thrown synchronously by the constructor that
 * received it.
 *
 * - `option`: the option's name, e.g. `"maxPoolSize"`.
 * - `value`: the value given.
 * - `allowed`: what the option accepts, in words.
 *
 * Source: CMAP spec, "Connection Pool Options" (each option's "If specified, MUST be ...").
 */
export class InvalidOptionError extends CmapError {
  constructor(
    /** The option's name, e.g. `"maxPoolSize"` (a nested one as `"componentSeverities.connection"`). */
    readonly option: string,
    /** The value given (a `<... not shown>` placeholder in place of a password or a connection string). */
    readonly value: unknown,
    /** What the option accepts, in words, e.g. `"an integer >= 0"`. */
    readonly allowed: string,
  ) {
    super(`Invalid ${option}: ${describeValue(value)} (${option} must be ${allowed})`);
  }
}

/**
 * Thrown (as the Promise rejection or Observable error of `checkOut`) when the pool is closed, either before the
 * checkout started or while it was waiting.
 *
 * Source: CMAP spec, "Connection Pool Errors" (PoolClosedError). The message is the one the CMAP test format expects.
 */
export class PoolClosedError extends CmapError {
  constructor(
    /** The pool's Endpoint, `host:port`. */
    readonly address: string,
  ) {
    super('Attempted to check out a connection from closed connection pool');
  }
}

/**
 * Thrown by `checkOut` when the pool is paused: it was cleared (and not yet marked ready again), or it was never
 * marked ready. Also the error of every request evicted from the WaitQueue by `clear()`, and of operations whose
 * connection was interrupted by `clear({ interruptInUseConnections: true })`. Retryable: it carries the
 * `RetryableError` and `RetryableWriteError` labels and never means the server is unknown.
 *
 * Source: CMAP spec, "Connection Pool Errors" (PoolClearedError) and "Clearing a non-load balanced pool".
 */
export class PoolClearedError extends CmapError {
  constructor(
    /** The pool's Endpoint, `host:port`. */
    readonly address: string,
    message: string,
    cause?: unknown,
  ) {
    super(message, { cause, labels: [ErrorLabel.RetryableError, ErrorLabel.RetryableWriteError] });
  }

  /** The error for a checkout on a pool that was cleared because of `cause` (which may be absent). */
  static cleared(address: string, cause?: unknown): PoolClearedError {
    const because = cause instanceof Error ? cause.message : cause === undefined ? 'an unspecified error' : String(cause);
    return new PoolClearedError(
      address,
      `Connection pool for ${address} was cleared because another operation failed with: ${because}`,
      cause,
    );
  }

  /** The error for a checkout on a pool that has not been marked ready since it was created. */
  static notReady(address: string): PoolClearedError {
    return new PoolClearedError(address, `Connection pool for ${address} is paused: it has not been marked ready yet`);
  }

  /**
   * The error given to an operation whose in-use connection a clear interrupted. With no cause, or a network timeout
   * (a monitor's check timing out: the case the spec names), the message is the spec's; any other cause is quoted.
   */
  static interrupted(address: string, cause?: unknown): PoolClearedError {
    if (cause === undefined || cause instanceof MongoNetworkTimeoutError) {
      return new PoolClearedError(address, `Connection to ${address} interrupted due to server monitor timeout`, cause);
    }
    const because = cause instanceof Error ? cause.message : String(cause);
    return new PoolClearedError(address, `Connection to ${address} interrupted by a pool clear because of: ${because}`, cause);
  }
}

/**
 * Thrown by `checkOut` when the request waited in the WaitQueue longer than `waitQueueTimeoutMS`. The time spent
 * establishing a connection the request already started is not counted.
 *
 * Source: CMAP spec, "Connection Pool Errors" (WaitQueueTimeoutError) and "WaitQueue: Timeout aggressively".
 */
export class WaitQueueTimeoutError extends CmapError {
  constructor(
    /** The pool's Endpoint, `host:port`. */
    readonly address: string,
    /** The waitQueueTimeoutMS that elapsed, in ms. */
    readonly waitQueueTimeoutMS: number,
  ) {
    super('Timed out while checking out a connection from connection pool');
  }
}

/**
 * Thrown by `checkOut` when its `AbortSignal` aborts before a connection was delivered (or was already aborted when
 * the checkout started): the Promise rejects with it, and the Observable errors with it. `cause` is the signal's
 * reason. (Unsubscribing from the Observable form also cancels, and raises nothing.)
 *
 * Source: extension (cancellation through the Web `AbortSignal`); the checkout's ConnectionCheckOutFailed event
 * carries reason `cancelled`.
 */
export class CheckOutCancelledError extends CmapError {
  constructor(
    /** The pool's Endpoint, `host:port`. */
    readonly address: string,
    cause?: unknown,
  ) {
    super(`Checkout from connection pool for ${address} was cancelled before a connection was delivered`, { cause });
  }
}

/**
 * Thrown synchronously by `checkIn` for a connection this pool did not create, one that is not checked out (already
 * checked in, or never delivered), or one already closed by the pool.
 *
 * - `connectionId`: the id of the offending connection, when it has one.
 *
 * Source: CMAP spec, "Checking In a Connection" ("MUST throw an Error if this is attempted").
 */
export class ConnectionCheckInError extends CmapError {
  constructor(
    /** The pool's Endpoint, `host:port`. */
    readonly address: string,
    /** The `id` of the connection given to `checkIn`; undefined when it has no numeric id. */
    readonly connectionId: number | undefined,
    reason: string,
  ) {
    super(`Cannot check in connection ${connectionId ?? '(no id)'} to connection pool for ${address}: ${reason}`);
  }
}

function describeValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean' || value == null) return String(value);
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return Object.prototype.toString.call(value);
  }
}

/**
 * A network error on a connection: the socket failed or closed, a reply could not be parsed (wire-protocol error),
 * or the connection was destroyed while a request was in flight. The connection that raised it is errored: the pool
 * closes it with reason `error` when it is checked in. Raised by `Connection.command` and by the connection factory
 * (connect and TLS failures, which may carry the backpressure labels).
 *
 * Source: CMAP spec, "Connection" (Perishable, Errored: network error, endpoint closing the connection,
 * wire-protocol error); the name is the MongoDB Node.js driver's.
 */
export class MongoNetworkError extends CmapError {
  constructor(
    /** The Endpoint's `host:port`. */
    readonly address: string,
    message: string,
    options?: { cause?: unknown; labels?: readonly string[] },
  ) {
    super(message, options);
  }
}

/**
 * A network timeout: connecting took longer than `connectTimeoutMS`, or a reply took longer than
 * `socketTimeoutMS` (or the `timeoutMS` of that command). Like every {@link MongoNetworkError}, it leaves its
 * connection errored. A monitor check failing with it makes `heartbeatActions()` clear the pool with
 * `interruptInUseConnections`.
 *
 * Source: CMAP spec, "Connection" (Errored: network timeout) and "Clearing a non-load balanced pool"; server
 * monitoring spec, "Network or command error during server check"; the name is the MongoDB Node.js driver's.
 */
export class MongoNetworkTimeoutError extends MongoNetworkError {}

/**
 * The server answered a command with `ok: 0`. The message is the reply's `errmsg` (else `"command failed"`), and
 * `errorLabels` holds the reply's `errorLabels`. The connection stays usable.
 *
 * Source: the MongoDB server's command reply (`ok`, `errmsg`, `code`, `codeName`, `errorLabels`); the name is the
 * MongoDB Node.js driver's.
 */
export class MongoServerError extends CmapError {
  /** The server's numeric error code (`code` in the reply), when it gave one. */
  readonly code: number | undefined;
  /** The server's error name (`codeName` in the reply), e.g. `"Unauthorized"`, when it gave one. */
  readonly codeName: string | undefined;

  constructor(
    /** The whole reply document. */
    readonly response: Readonly<Record<string, unknown>>,
  ) {
    const labels = Array.isArray(response.errorLabels) ? (response.errorLabels as string[]) : [];
    super(typeof response.errmsg === 'string' ? response.errmsg : 'command failed', { labels });
    this.code = typeof response.code === 'number' ? response.code : undefined;
    this.codeName = typeof response.codeName === 'string' ? response.codeName : undefined;
  }
}

/**
 * Thrown by `Connection.command` (as its rejection) when a request is already in flight on that connection: a
 * connection carries one request at a time and never pipelines. The connection stays usable.
 *
 * Source: CMAP spec, "Connection" (Single Track).
 */
export class ConnectionBusyError extends CmapError {
  constructor(
    /** The Endpoint's `host:port`. */
    readonly address: string,
    /** The pool-assigned id of the busy connection. */
    readonly connectionId: number,
  ) {
    super(`Connection ${connectionId} to ${address} already has a request in flight; it runs one request at a time`);
  }
}

/**
 * A callback the pool calls broke its contract, so the establishment it was part of failed: the `connectionFactory`
 * threw, returned something that is not an ObservableInput, or emitted something that is not the connection it was
 * asked for (an object with `destroy()` and the descriptor's `id`); or `clearOnEstablishmentError` threw. The
 * checkout waiting on that establishment fails with this error (ConnectionCheckOutFailed, reason `connectionError`);
 * the pending slot is freed. `cause` is what the callback threw, if it threw.
 *
 * Source: extension (CMAP "Establishing a Connection": an establishment error fails the checkout and frees the slot).
 */
export class PoolCallbackError extends CmapError {
  constructor(
    /** The pool's Endpoint, `host:port`. */
    readonly address: string,
    /** The option that holds the callback. */
    readonly callback: 'connectionFactory' | 'clearOnEstablishmentError',
    message: string,
    options?: { cause?: unknown },
    /** For `clearOnEstablishmentError`: the establishment error it was asked about. */
    readonly establishmentError?: Error,
  ) {
    super(message, options);
  }
}

/**
 * Authentication failed while establishing a connection: the server rejected the credentials, the SCRAM
 * conversation was malformed, the server's signature did not verify, or its iteration count was below 4096. The
 * message names the user, source and mechanism, never the password. `cause` is the server's error, when there is one.
 *
 * Source: auth spec, "Authentication Handshake", "SCRAM-SHA-1", "SCRAM-SHA-256".
 */
export class AuthenticationError extends CmapError {
  constructor(message: string, cause?: unknown) {
    super(message, { cause });
  }
}

/**
 * The server cannot serve the requested mode: e.g. load-balanced mode against a server whose handshake reply has no
 * `serviceId`.
 *
 * Source: load balancer spec, "Connection Establishment".
 */
export class MongoCompatibilityError extends CmapError {}

/**
 * The client was closed: thrown by `command()` and `selectPool()` called after `close()`, and the rejection of every
 * server selection still waiting when `close()` was called (it settles at once, not at serverSelectionTimeoutMS).
 *
 * Source: extension (a closed MongoDB client refuses operations; the driver's MongoClient does likewise).
 */
export class ClientClosedError extends CmapError {
  constructor(
    /** Every host of the client, `host:port`, in URI order. */
    readonly hosts: readonly string[],
  ) {
    super(`The client of ${hosts.join(', ')} was closed`);
  }
}

/**
 * No server became ready within serverSelectionTimeoutMS. `cause` is the last heartbeat error, when there is one.
 *
 * Source: server monitoring spec (application operations wait for a suitable server).
 */
export class ServerSelectionError extends CmapError {
  constructor(
    /** Every host of the client, `host:port`, in URI order. */
    readonly hosts: readonly string[],
    /** How long the client waited, in ms. */
    readonly serverSelectionTimeoutMS: number,
    cause?: unknown,
  ) {
    super(
      `No server of ${hosts.join(', ')} became ready within serverSelectionTimeoutMS=${serverSelectionTimeoutMS} ms` +
        (cause instanceof Error ? `; last check failed with: ${cause.message}` : ''),
      { cause },
    );
  }
}
