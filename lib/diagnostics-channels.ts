/**
 * The pool's `node:diagnostics_channel` channels: what APM agents and tracers subscribe to, without wrapping the
 * library. Names follow the `lib:noun[:verb]` pattern of undici, mysql2, ioredis and mssql. Nothing is built or
 * published while a channel has no subscribers (each publish point checks `hasSubscribers` first, a property read).
 *
 * | channel | kind | context / message |
 * |---|---|---|
 * | `rxcmap:pool:checkOut` | TracingChannel (`tracing:rxcmap:pool:checkOut:start` … `:asyncEnd`, `:error`) | {@link CheckOutTraceContext} |
 * | `rxcmap:connection:establish` | TracingChannel | {@link EstablishTraceContext} |
 * | `rxcmap:pool:checkIn` | Channel | {@link CheckInMessage} |
 * | `rxcmap:pool:clear` | Channel | {@link ClearMessage} |
 *
 * Source: extension (Node's `diagnostics_channel` and `TracingChannel` conventions: start → end for the synchronous
 * part, then error (on failure) → asyncStart → asyncEnd when the outcome is known, one context object throughout;
 * the attribute names `serverAddress`/`serverPort` are OpenTelemetry's `server.address`/`server.port`).
 */
import * as diagnosticsChannel from 'node:diagnostics_channel';
import type { ConnectionCheckOutFailedReason } from './events';

/**
 * The channel names (a frozen object), as subscribed to with `diagnostics_channel.tracingChannel(name)` or
 * `.channel(name)`.
 *
 * Source: extension (Node.js `diagnostics_channel` and its TracingChannel, named as undici, mysql2, ioredis and mssql
 * name theirs; the moments are CMAP's: checkout, establishment, check-in, clear).
 */
export const DIAGNOSTICS_CHANNELS = Object.freeze({
  /** TracingChannel: one trace per checkout, from the moment it starts (subscribed to, or first awaited) to its outcome. */
  checkOut: 'rxcmap:pool:checkOut',
  /** TracingChannel: one trace per connection establishment (socket, handshake, authentication), from ConnectionCreated on. */
  establish: 'rxcmap:connection:establish',
  /** Channel: one message per accepted check-in, in commit order. */
  checkIn: 'rxcmap:pool:checkIn',
  /**
   * Channel: one message per clear that incremented a generation, in commit order: ConnectionPoolCleared's moment,
   * and also a clear of a paused pool, which increments the generation but emits no ConnectionPoolCleared (CMAP).
   */
  clear: 'rxcmap:pool:clear',
} as const);

/**
 * The server a pool reaches: OpenTelemetry's `server.address` and `server.port` (absent for a Unix domain socket).
 *
 * Source: extension (OpenTelemetry semantic conventions, `server.address` and `server.port`).
 */
export interface ServerAttributes {
  /** The pool's Endpoint, `host:port` (or the socket path), as in every CMAP event's `address`. */
  readonly address: string;
  /** The host name or IP address (IPv6 without brackets), or the Unix domain socket path. */
  readonly serverAddress: string;
  /** The TCP port; undefined for a Unix domain socket. */
  readonly serverPort: number | undefined;
}

/**
 * What every message and trace context carries: the server (see {@link ServerAttributes}) and the pool that published
 * it. The channels are shared by every pool of the thread (a worker thread has its own, as for every
 * `node:diagnostics_channel` channel), so two pools of one server (two clients of it) publish the same address and the
 * same connection ids: `pool` tells them apart.
 *
 * Source: extension (a pool's identity: CMAP numbers connections per pool, "Monotonically Increasing ID").
 */
export interface PoolAttributes extends ServerAttributes {
  /**
   * The pool that published it: the `ConnectionPoolCore` (or `ConnectionPool`) itself, to compare with `===` or to
   * key a WeakMap by (holding it in a strong structure keeps the pool reachable).
   */
  readonly pool: object;
}

/**
 * The context of one checkout's trace on `rxcmap:pool:checkOut` (the same object in every phase). `start` is
 * published when the checkout enters the pool (run with the subscribers' bound stores, as `tracePromise` does), `end`
 * right after (the request is queued or served); once the outcome is known: `error` (failed or cancelled with an
 * error), then `asyncStart` and `asyncEnd`. The fields below the server's are written before `asyncStart`.
 *
 * Source: extension (see the module).
 */
export interface CheckOutTraceContext extends PoolAttributes {
  /** How the checkout ended: `checkedOut`, or its ConnectionCheckOutFailed reason; undefined until then. */
  outcome: 'checkedOut' | ConnectionCheckOutFailedReason | undefined;
  /** The connection's id (CMAP `connectionId`) once checked out. */
  connectionId: number | undefined;
  /** The connection handed out (`outcome` `checkedOut`). */
  result: unknown;
  /**
   * The error the checkout failed with (PoolClosedError, PoolClearedError, WaitQueueTimeoutError, WaitQueueFullError,
   * CheckOutCancelledError, or the establishment's error); undefined when it was checked out, or cancelled by
   * unsubscribing (outcome `cancelled`, nobody to receive an error).
   */
  error: Error | undefined;
}

/**
 * The context of one establishment's trace on `rxcmap:connection:establish`: `start` when the pool asks its
 * connection factory for connection `connectionId` (right after ConnectionCreated), `end` once the factory returned;
 * then `error` (failed), `asyncStart`, `asyncEnd` when it is ready, failed, or abandoned by the pool (clear with
 * interruption, close).
 *
 * Source: extension (see the module); CMAP spec, "Establishing a Connection".
 */
export interface EstablishTraceContext extends PoolAttributes {
  /** CMAP `connectionId` of the connection being established. */
  readonly connectionId: number;
  /** The pool generation it is established for. */
  readonly generation: number;
  /**
   * `ready` (the factory delivered the connection: ConnectionReady follows, unless the pool closes it at once, as
   * ConnectionClosed `stale` after a clear, `expired` or `poolClosed`), `failed` (`error` is set), or `aborted` (the
   * pool gave it up); undefined until then.
   */
  outcome: 'ready' | 'failed' | 'aborted' | undefined;
  /** The established connection (outcome `ready`). */
  result: unknown;
  /** The establishment error (outcome `failed`). */
  error: Error | undefined;
}

/** A message on `rxcmap:pool:checkIn`: a checkout ended. Source: extension; CMAP spec, "Checking In a Connection". */
export interface CheckInMessage extends PoolAttributes {
  /** CMAP `connectionId`. */
  readonly connectionId: number;
}

/** A message on `rxcmap:pool:clear`. Source: extension; CMAP spec, "Clearing a Connection Pool". */
export interface ClearMessage extends PoolAttributes {
  /** The generation after the clear (in load-balanced mode, the service's). */
  readonly generation: number;
  /** Load-balanced mode: the service cleared (hex ObjectId). */
  readonly serviceId: string | undefined;
  /** Whether in-use connections of the cleared generations were interrupted. */
  readonly interruptInUseConnections: boolean;
  /** The error that caused the clear, when one was given. */
  readonly cause: unknown;
}

/** The channel objects the pool publishes to (created once, at load). */
export const checkOutChannel = diagnosticsChannel.tracingChannel<unknown, CheckOutTraceContext & object>(DIAGNOSTICS_CHANNELS.checkOut);
export const establishChannel = diagnosticsChannel.tracingChannel<unknown, EstablishTraceContext & object>(DIAGNOSTICS_CHANNELS.establish);
export const checkInChannel = diagnosticsChannel.channel(DIAGNOSTICS_CHANNELS.checkIn);
export const clearChannel = diagnosticsChannel.channel(DIAGNOSTICS_CHANNELS.clear);

/** Whether a tracing channel has any subscriber on any of its five channels. */
export function isTraced(channel: diagnosticsChannel.TracingChannel<unknown, object>): boolean {
  return channel.start.hasSubscribers || channel.end.hasSubscribers || channel.asyncStart.hasSubscribers || channel.asyncEnd.hasSubscribers || channel.error.hasSubscribers;
}

/**
 * One trace on a TracingChannel, in Node's phase order whatever the timing: `start` (running the traced work with the
 * subscribers' bound stores) and `end`, then, once the outcome is known, `error` (when it carries one), `asyncStart`,
 * `asyncEnd`. An outcome known before the work returned (a checkout served or failed at once) is published right
 * after `end`.
 */
export class Trace<T extends { outcome: unknown; error: Error | undefined }> {
  private ended = false;
  private finished = false;

  constructor(
    private readonly channel: diagnosticsChannel.TracingChannel<unknown, T & object>,
    /** The context object every phase carries. */
    readonly context: T & object,
  ) {}

  /** Publishes `start` around `work(...args)` (with the bound stores), then `end`. */
  run<A extends unknown[]>(work: (...args: A) => void, thisArg: unknown, ...args: A): void {
    this.channel.start.runStores(this.context, work, thisArg, ...args);
    this.end();
  }

  /** Publishes `start` and `end` for work that did not run (its outcome is known already). */
  skip(): void {
    this.channel.start.publish(this.context);
    this.end();
  }

  /** Whether the outcome was recorded. */
  get done(): boolean {
    return this.finished;
  }

  /** Records that the context's outcome fields are written: its phases are published now, or right after `end`. */
  finish(): void {
    if (this.finished) return;
    this.finished = true;
    if (this.ended) this.publishOutcome();
  }

  private end(): void {
    this.channel.end.publish(this.context);
    this.ended = true;
    if (this.finished) this.publishOutcome();
  }

  private publishOutcome(): void {
    const { channel, context } = this;
    if (context.error !== undefined) channel.error.publish(context);
    channel.asyncStart.publish(context);
    channel.asyncEnd.publish(context);
  }
}
