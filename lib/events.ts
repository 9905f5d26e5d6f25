/**
 * The CMAP monitoring events: one discriminated union on `type`, emitted by `ConnectionPool.events$` in the order the
 * pool committed the state changes they describe.
 *
 * Source: CMAP spec, "Connection Pool Monitoring" / "Events". Durations are in milliseconds (the spec's `duration`).
 */
import type { PoolExtensionOptions, PoolOptions } from './options';

/**
 * Why a connection was closed (CMAP `ConnectionClosedEvent.reason`):
 * - `stale`: the pool was cleared, making the connection no longer valid;
 * - `idle`: the connection was available for longer than maxIdleTimeMS;
 * - `error`: the connection experienced an error (including a failed establishment);
 * - `poolClosed`: the pool was closed;
 * - `expired`: an rxcmap extension: the connection outlived its lifetime (`maxLifeTimeMS`).
 *
 * Where more than one holds, the first of: `poolClosed`; `error` for a connection that failed by itself (its socket
 * or its wire protocol; the event carries that error), not one a clear's interruptInUseConnections tore down; `stale`;
 * `error` for one checked in with a request in flight; `expired`. A connection whose network error cleared the pool
 * thus closes with `error` and that error, not `stale` (the spec leaves the order open).
 *
 * Source: CMAP spec, "Events" (ConnectionClosedEvent.reason); `expired`: extension (see `maxLifeTimeMS`); the order
 * where several hold: extension (the official Node.js driver also reports `error` for a connection that errored).
 */
export type ConnectionClosedReason = 'stale' | 'idle' | 'error' | 'poolClosed' | 'expired';

/**
 * Why a checkout failed (CMAP `ConnectionCheckOutFailedEvent.reason`):
 * - `poolClosed`: the pool was closed;
 * - `timeout`: the checkout waited longer than waitQueueTimeoutMS;
 * - `connectionError`: establishing a connection failed, or the pool was paused (cleared or not yet ready), or the
 *   checkout could not be set up (its AbortSignal refused a listener, the pool's scheduler refused its `timeoutMS`
 *   deadline: it fails with that error);
 * - `cancelled`: an rxcmap extension: the caller gave up (unsubscribed, or aborted its AbortSignal) before a
 *   connection was delivered. Monitors that only know the spec's three reasons can treat it as theirs to ignore.
 * - `waitQueueFull`: an rxcmap extension: `maxWaitQueueSize` checkouts were already waiting.
 *
 * `timeout` also covers a checkout's own `timeoutMS` (extension).
 *
 * Source: CMAP spec, "Events" (ConnectionCheckOutFailedEvent.reason); `cancelled`: extension (cancellation of an
 * RxJS subscription or an `AbortSignal`); `waitQueueFull`: extension (reactor-pool's maxPendingAcquire).
 */
export type ConnectionCheckOutFailedReason = 'poolClosed' | 'timeout' | 'connectionError' | 'cancelled' | 'waitQueueFull';

/**
 * Fields every pool event carries.
 *
 * Source: CMAP spec, "Events" (`address` on every event); `time`: extension (the Node driver's events carry a
 * `time` too).
 */
export interface PoolEventBase {
  /** The address (`host:port`) of the Endpoint the pool is for. */
  readonly address: string;
  /**
   * When the event was emitted, in ms, read from the pool's scheduler: ms since the Unix epoch with the default one,
   * an injected scheduler's own `now()` otherwise (a `VirtualClock` starts at 0).
   */
  readonly time: number;
}

/**
 * Emitted once when the pool is created.
 *
 * Source: CMAP spec, "Events" (PoolCreatedEvent), "Creating a Connection Pool".
 */
export interface ConnectionPoolCreatedEvent extends PoolEventBase {
  /** The event's name; discriminates {@link ConnectionPoolEvent}. */
  readonly type: 'ConnectionPoolCreated';
  /**
   * The pool options the user set explicitly, CMAP's and the extensions' (absent keys were left to their defaults);
   * durations in ms. `backgroundThreadIntervalMS` is not included.
   */
  readonly options: Readonly<PoolOptions & PoolExtensionOptions>;
}

/**
 * Emitted when the pool goes from paused to ready.
 *
 * Source: CMAP spec, "Events" (PoolReadyEvent), "Marking a Connection Pool as Ready".
 */
export interface ConnectionPoolReadyEvent extends PoolEventBase {
  /** The event's name; discriminates {@link ConnectionPoolEvent}. */
  readonly type: 'ConnectionPoolReady';
}

/**
 * Emitted when a ready pool is cleared (never for a pool already paused), and for a load-balanced service clear.
 *
 * Source: CMAP spec, "Events" (PoolClearedEvent), "Clearing a Connection Pool"; load balancer spec, "Events"
 * (`serviceId`).
 */
export interface ConnectionPoolClearedEvent extends PoolEventBase {
  /** The event's name; discriminates {@link ConnectionPoolEvent}. */
  readonly type: 'ConnectionPoolCleared';
  /** Whether in-use connections were interrupted as part of this clear. */
  readonly interruptInUseConnections: boolean;
  /** The service cleared, in load-balanced mode (hex ObjectId string). */
  readonly serviceId?: string;
}

/**
 * Emitted when the pool is closed.
 *
 * Source: CMAP spec, "Events" (PoolClosedEvent), "Closing a Connection Pool".
 */
export interface ConnectionPoolClosedEvent extends PoolEventBase {
  /** The event's name; discriminates {@link ConnectionPoolEvent}. */
  readonly type: 'ConnectionPoolClosed';
}

/**
 * Emitted when the pool creates a (pending) connection; it is not yet usable.
 *
 * Source: CMAP spec, "Events" (ConnectionCreatedEvent), "Creating a Connection".
 */
export interface ConnectionCreatedEvent extends PoolEventBase {
  /** The event's name; discriminates {@link ConnectionPoolEvent}. */
  readonly type: 'ConnectionCreated';
  /** The connection's pool-assigned id: 1, 2, 3, ... in creation order. */
  readonly connectionId: number;
}

/**
 * Emitted when a connection finished its establishment (TCP/TLS, handshake, auth) and may be used.
 *
 * Source: CMAP spec, "Events" (ConnectionReadyEvent), "Establishing a Connection".
 */
export interface ConnectionReadyEvent extends PoolEventBase {
  /** The event's name; discriminates {@link ConnectionPoolEvent}. */
  readonly type: 'ConnectionReady';
  /** The connection's pool-assigned id. */
  readonly connectionId: number;
  /** ms from ConnectionCreated to this event. */
  readonly duration: number;
}

/**
 * Emitted when the pool closes a connection (pending, available, or checked in).
 *
 * Source: CMAP spec, "Events" (ConnectionClosedEvent), "Closing a Connection"; `error`: extension (the logging
 * section's Connection Closed Message carries the error).
 */
export interface ConnectionClosedEvent extends PoolEventBase {
  /** The event's name; discriminates {@link ConnectionPoolEvent}. */
  readonly type: 'ConnectionClosed';
  /** The connection's pool-assigned id. */
  readonly connectionId: number;
  /** Why it was closed (see {@link ConnectionClosedReason}). */
  readonly reason: ConnectionClosedReason;
  /**
   * The error, when `reason` is `error` and one is known: the establishment's error, the error a scoped checkout
   * abandoned mid-request tore the connection down with, or the one the connection says made it errored
   * (`PoolConnection.error`; a Connection's network, timeout or wire-protocol error).
   */
  readonly error?: Error;
}

/**
 * Emitted when a checkout starts.
 *
 * Source: CMAP spec, "Events" (ConnectionCheckOutStartedEvent), "Checking Out a Connection".
 */
export interface ConnectionCheckOutStartedEvent extends PoolEventBase {
  /** The event's name; discriminates {@link ConnectionPoolEvent}. */
  readonly type: 'ConnectionCheckOutStarted';
}

/**
 * Emitted when a checkout fails.
 *
 * Source: CMAP spec, "Events" (ConnectionCheckOutFailedEvent), "Checking Out a Connection"; `error`: extension
 * (the logging section's Connection Checkout Failed Message carries the error).
 */
export interface ConnectionCheckOutFailedEvent extends PoolEventBase {
  /** The event's name; discriminates {@link ConnectionPoolEvent}. */
  readonly type: 'ConnectionCheckOutFailed';
  /** Why it failed (see {@link ConnectionCheckOutFailedReason}). */
  readonly reason: ConnectionCheckOutFailedReason;
  /**
   * ms from ConnectionCheckOutStarted to this event; undefined for a checkout that started while nobody observed the
   * pool (its start was not timed, and no ConnectionCheckOutStarted was emitted for it).
   */
  readonly duration: number | undefined;
  /** The error the checkout failed with. */
  readonly error?: Error;
}

/**
 * Emitted when a checkout succeeds.
 *
 * Source: CMAP spec, "Events" (ConnectionCheckedOutEvent), "Checking Out a Connection".
 */
export interface ConnectionCheckedOutEvent extends PoolEventBase {
  /** The event's name; discriminates {@link ConnectionPoolEvent}. */
  readonly type: 'ConnectionCheckedOut';
  /** The id of the connection delivered. */
  readonly connectionId: number;
  /**
   * ms from ConnectionCheckOutStarted to this event; undefined for a checkout that started while nobody observed the
   * pool (its start was not timed, and no ConnectionCheckOutStarted was emitted for it).
   */
  readonly duration: number | undefined;
}

/**
 * Emitted when a connection is checked back in (before it is made available or closed).
 *
 * Source: CMAP spec, "Events" (ConnectionCheckedInEvent), "Checking In a Connection".
 */
export interface ConnectionCheckedInEvent extends PoolEventBase {
  /** The event's name; discriminates {@link ConnectionPoolEvent}. */
  readonly type: 'ConnectionCheckedIn';
  /** The id of the connection checked in. */
  readonly connectionId: number;
  /**
   * ms from the checkout's ConnectionCheckedOut to this event (how long the connection was used); undefined when the
   * checkout was made before anyone observed the pool (it was not timed). Extension: the spec's event has no duration;
   * this is OpenTelemetry's `db.client.connection.use_time`.
   */
  readonly duration: number | undefined;
}

/**
 * Emitted once for a checkout that has held its connection for longer than `leakDetectionThresholdMS`: the
 * connection may have been leaked (never checked in). Only while leak detection is on. A checkout that passed the
 * threshold while nobody observed the pool is reported at the first check (one every threshold) after someone does.
 *
 * Source: extension (HikariCP's leak detection warning); marked by `extension`.
 */
export interface ConnectionLeakSuspectedEvent extends PoolEventBase {
  /** The event's name; discriminates {@link ConnectionPoolEvent}. */
  readonly type: 'ConnectionLeakSuspected';
  /** The option that produced it: this is not a CMAP event. */
  readonly extension: 'leakDetectionThresholdMS';
  /** The id of the connection held. */
  readonly connectionId: number;
  /** ms since the connection was checked out (ConnectionCheckedOut). */
  readonly duration: number;
  /** The stack of the `checkOut` call that took the connection (its frames, one per line, as `Error.stack` has them). */
  readonly checkOutStack: string;
}

/**
 * Emitted when a connection that was the subject of a ConnectionLeakSuspected event is checked in after all (right
 * after its ConnectionCheckedIn). Only while leak detection is on.
 *
 * Source: extension (HikariCP's "previously reported leaked connection was returned"); marked by `extension`.
 */
export interface ConnectionLeakSuspectCheckedInEvent extends PoolEventBase {
  /** The event's name; discriminates {@link ConnectionPoolEvent}. */
  readonly type: 'ConnectionLeakSuspectCheckedIn';
  /** The option that produced it: this is not a CMAP event. */
  readonly extension: 'leakDetectionThresholdMS';
  /** The id of the connection checked in. */
  readonly connectionId: number;
  /** ms from its checkout to its check-in. */
  readonly duration: number;
}

/**
 * Emitted when `drain()` takes effect: from now on new checkouts fail with PoolClosedError, the waiting ones are
 * still served, and the pool closes (ConnectionPoolClosed) once nothing waits and nothing is in use, or when
 * `timeoutMS` passes (in-use connections are then interrupted).
 *
 * Source: extension (the mongodb-core 2.0 pool drains its queue before it is destroyed); marked by `extension`.
 */
export interface ConnectionPoolDrainingEvent extends PoolEventBase {
  /** The event's name; discriminates {@link ConnectionPoolEvent}. */
  readonly type: 'ConnectionPoolDraining';
  /** The method that produced it: this is not a CMAP event. */
  readonly extension: 'drain';
  /** The drain's deadline, in ms from this event; 0 for none. */
  readonly timeoutMS: number;
}

/**
 * Every event of `events$`, discriminated on `type`: the eleven CMAP events, and the extension events of options that
 * are on (each carries an `extension` field naming its option).
 *
 * Source: CMAP spec, "Events"; extension events: see each.
 */
export type ConnectionPoolEvent =
  | ConnectionPoolCreatedEvent
  | ConnectionPoolReadyEvent
  | ConnectionPoolClearedEvent
  | ConnectionPoolClosedEvent
  | ConnectionCreatedEvent
  | ConnectionReadyEvent
  | ConnectionClosedEvent
  | ConnectionCheckOutStartedEvent
  | ConnectionCheckOutFailedEvent
  | ConnectionCheckedOutEvent
  | ConnectionCheckedInEvent
  | ConnectionLeakSuspectedEvent
  | ConnectionLeakSuspectCheckedInEvent
  | ConnectionPoolDrainingEvent;

/**
 * The `type` of every event of `events$`.
 *
 * Source: CMAP spec, "Events" (the spec's event interface names without the `Event` suffix, and `Pool*` events
 * prefixed with `Connection`, as the CMAP test format names them); extension events: see each.
 */
export type ConnectionPoolEventType = ConnectionPoolEvent['type'];

/**
 * The extension events: those carrying an `extension` field.
 *
 * Source: extension (see each event).
 */
export type ConnectionPoolExtensionEvent = Extract<
  ConnectionPoolEvent,
  {
    /** The option or method that produced the event. */
    readonly extension: string;
  }
>;

/**
 * The types of the extension events (a frozen array).
 *
 * Source: extension (see each event).
 */
export const EXTENSION_EVENT_TYPES: readonly ConnectionPoolExtensionEvent['type'][] = Object.freeze([
  'ConnectionLeakSuspected',
  'ConnectionLeakSuspectCheckedIn',
  'ConnectionPoolDraining',
]);

/** All eleven CMAP event types, in the order the spec lists them (a frozen array). Source: CMAP spec, "Events". */
export const CONNECTION_POOL_EVENT_TYPES: readonly Exclude<ConnectionPoolEventType, ConnectionPoolExtensionEvent['type']>[] = Object.freeze([
  'ConnectionPoolCreated',
  'ConnectionPoolReady',
  'ConnectionPoolCleared',
  'ConnectionPoolClosed',
  'ConnectionCreated',
  'ConnectionReady',
  'ConnectionClosed',
  'ConnectionCheckOutStarted',
  'ConnectionCheckOutFailed',
  'ConnectionCheckedOut',
  'ConnectionCheckedIn',
]);

/**
 * An event's fields without the two every event carries (`address`, `time`): what the pool decides for an event
 * before it stamps the address and the time on it.
 *
 * Source: extension (the shape of {@link ConnectionPoolEvent}, minus {@link PoolEventBase}).
 */
export type PoolEventPayload = ConnectionPoolEvent extends infer E
  ? E extends ConnectionPoolEvent
    ? Omit<E, 'address' | 'time'>
    : never
  : never;
