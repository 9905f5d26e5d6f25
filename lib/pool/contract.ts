/**
 * The contract between the pool and its connections: what the pool needs of a connection ({@link PoolConnection}),
 * what it tells a factory about the one to establish ({@link ConnectionDescriptor}), and the factory itself
 * ({@link ConnectionFactory}). It lives with the pool so that connection/, monitor/ and testing/ depend on the pool's
 * contract, never the reverse.
 *
 * Source: CMAP spec, "Connection" (id, generation, perished: errored), "Establishing a Connection".
 */
import type { ObservableInput } from 'rxjs';

/**
 * What a pool needs of a connection. The pool never looks inside; it only asks whether it is errored, and tears it
 * down. A connection that throws when asked never stops the pool: an `errored` or `busy` that cannot be read counts
 * as true, a `serviceId` as none, and a `destroy()` that throws (or returns a Promise that rejects) as done.
 *
 * Source: CMAP spec, "Connection" (id, generation, Perishable: Errored).
 */
export interface PoolConnection {
  /** The id the pool assigned at creation (from the {@link ConnectionDescriptor}); unique within the pool. */
  readonly id: number;
  /**
   * True once the connection has seen an error that makes it unfit for further use (network error or timeout,
   * endpoint closed it, wire-protocol error). The pool closes an errored connection with reason `error` when it is
   * checked in or found among the available connections; one that is errored when its factory hands it over fails
   * its establishment.
   */
  readonly errored?: boolean | undefined;
  /**
   * The error that made the connection errored, when it knows one: ConnectionClosed (reason `error`) and its log
   * message carry it (CMAP "Connection Pool Logging": the Connection Closed message's `error`). Read only then.
   */
  readonly error?: Error | undefined;
  /**
   * The service behind the load balancer this connection reached (hex string, from the handshake's `serviceId`).
   * Read once the connection is established, in load-balanced mode only.
   */
  readonly serviceId?: string | undefined;
  /**
   * True while a request is in flight on the connection (or replies it asked for are still to come). A connection
   * checked in while this is true is closed (reason `error`), not made available: its reply may still arrive and
   * would reach the next borrower. A scoped checkout (`withConnection$`) unsubscribed before its work finished
   * returns the connection only when this is false: one that does not say counts as busy there.
   */
  readonly busy?: boolean | undefined;
  /**
   * Tears the connection down: closes its socket without blocking and fails any request in flight with `error`
   * (when given). Must be idempotent. Called by the pool when it closes the connection, and when a clear with
   * `interruptInUseConnections` interrupts it while in use.
   */
  destroy(error?: Error): void;
}

/**
 * What the pool tells a connection factory about the connection to establish.
 *
 * Source: CMAP spec, "Connection" (id, generation), "Establishing a Connection".
 */
export interface ConnectionDescriptor {
  /** The connection id: 1, 2, 3, ... in creation order within the pool. The established connection must carry it. */
  readonly id: number;
  /** The pool generation at creation (in load-balanced mode the connection takes its service's once established). */
  readonly generation: number;
  /** The pool's Endpoint, `host:port`. */
  readonly address: string;
  /** Aborts when the pool abandons the establishment (a clear with interruption, or close). */
  readonly signal: AbortSignal;
  /**
   * Load-balanced mode: to be called once the MongoDB handshake is done, before authentication, with the `serviceId`
   * it reached (hex ObjectId string). The connection then takes that service's generation and counts toward it, so a
   * clear of the service while it authenticates makes it stale (closed, never handed out). A factory that does not
   * call it: the connection takes the generation when established. Calls after the first, or once the establishment
   * ended, are ignored; never throws.
   *
   * Source: CMAP spec, "Load Balancer Mode" ("Once the MongoDB handshake is done, the connection MUST get the
   * generation number that applies to its serviceId").
   */
  readonly handshakeDone?: (serviceId: string) => void;
}

/**
 * Establishes one connection. Receives the {@link ConnectionDescriptor} (id, generation, address, abort signal) and
 * returns an Observable (cancelled by unsubscribing) or a Promise of the established connection: connected,
 * handshaken and authenticated. Its first value is taken; an error, completing without a value, or a first value
 * that is not a connection with the descriptor's id fails the establishment (ConnectionClosed with reason `error`, then
 * ConnectionCheckOutFailed for the checkout waiting on it), and so does a connection that is already errored (a
 * MongoNetworkError with the backpressure labels, which by default does not clear the pool). A factory that throws,
 * returns something that is not an ObservableInput, emits a value that is not such a connection, completes without
 * one, or fails with something that is not an Error fails the establishment with `PoolCallbackError` (its `cause`
 * what was thrown, when something was).
 *
 * Source: CMAP spec, "Establishing a Connection".
 */
export type ConnectionFactory<C extends PoolConnection> = (descriptor: ConnectionDescriptor) => ObservableInput<C>;
