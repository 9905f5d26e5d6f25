/**
 * The CMAP monitoring events: one discriminated union on `type`, emitted by `ConnectionPool.events$` in the order the
 * pool committed the state changes they describe.
 *
 * Source: CMAP spec, "Connection Pool Monitoring" / "Events". Durations are in milliseconds (the spec's `duration`).
 */
import type { PoolOptions } from './options';

/**
 * Why a connection was closed (CMAP `ConnectionClosedEvent.reason`):
 * - `stale`: the pool was cleared, making the connection no longer valid;
 * - `idle`: the connection was available for longer than maxIdleTimeMS;
 * - `error`: the connection experienced an error (including a failed establishment);
 * - `poolClosed`: the pool was closed.
 */
export type ConnectionClosedReason = 'stale' | 'idle' | 'error' | 'poolClosed';

/**
 * Why a checkout failed (CMAP `ConnectionCheckOutFailedEvent.reason`):
 * - `poolClosed`: the pool was closed;
 * - `timeout`: the checkout waited longer than waitQueueTimeoutMS;
 * - `connectionError`: establishing a connection failed, or the pool was paused (cleared or not yet ready);
 * - `cancelled`: an rxcmap extension: the caller gave up (unsubscribed, or aborted its AbortSignal) before a
 *   connection was delivered. Monitors that only know the spec's three reasons can treat it as theirs to ignore.
 */
export type ConnectionCheckOutFailedReason = 'poolClosed' | 'timeout' | 'connectionError' | 'cancelled';

/** Fields every pool event carries. */
export interface PoolEventBase {
  /** The address (`host:port`) of the Endpoint the pool is for. */
  readonly address: string;
  /** When the event was emitted: ms since the Unix epoch, read from the pool's scheduler clock. */
  readonly time: number;
}

/** Emitted once when the pool is created. `options`: the pool options the user set (non-default ones). */
export interface ConnectionPoolCreatedEvent extends PoolEventBase {
  readonly type: 'ConnectionPoolCreated';
  readonly options: Readonly<PoolOptions>;
}

/** Emitted when the pool goes from paused to ready. */
export interface ConnectionPoolReadyEvent extends PoolEventBase {
  readonly type: 'ConnectionPoolReady';
}

/** Emitted when a ready pool is cleared (never for a pool already paused), and for a load-balanced service clear. */
export interface ConnectionPoolClearedEvent extends PoolEventBase {
  readonly type: 'ConnectionPoolCleared';
  /** Whether in-use connections were interrupted as part of this clear. */
  readonly interruptInUseConnections: boolean;
  /** The service cleared, in load-balanced mode (hex ObjectId string). */
  readonly serviceId?: string;
}

/** Emitted when the pool is closed. */
export interface ConnectionPoolClosedEvent extends PoolEventBase {
  readonly type: 'ConnectionPoolClosed';
}

/** Emitted when the pool creates a (pending) connection; it is not yet usable. */
export interface ConnectionCreatedEvent extends PoolEventBase {
  readonly type: 'ConnectionCreated';
  readonly connectionId: number;
}

/** Emitted when a connection finished its establishment (TCP/TLS, handshake, auth) and may be used. */
export interface ConnectionReadyEvent extends PoolEventBase {
  readonly type: 'ConnectionReady';
  readonly connectionId: number;
  /** ms from ConnectionCreated to this event. */
  readonly duration: number;
}

/** Emitted when the pool closes a connection (pending, available, or checked in). */
export interface ConnectionClosedEvent extends PoolEventBase {
  readonly type: 'ConnectionClosed';
  readonly connectionId: number;
  readonly reason: ConnectionClosedReason;
  /** The error, when `reason` is `error`. */
  readonly error?: Error;
}

/** Emitted when a checkout starts. */
export interface ConnectionCheckOutStartedEvent extends PoolEventBase {
  readonly type: 'ConnectionCheckOutStarted';
}

/** Emitted when a checkout fails. */
export interface ConnectionCheckOutFailedEvent extends PoolEventBase {
  readonly type: 'ConnectionCheckOutFailed';
  readonly reason: ConnectionCheckOutFailedReason;
  /** ms from ConnectionCheckOutStarted to this event. */
  readonly duration: number;
  /** The error the checkout failed with. */
  readonly error?: Error;
}

/** Emitted when a checkout succeeds. */
export interface ConnectionCheckedOutEvent extends PoolEventBase {
  readonly type: 'ConnectionCheckedOut';
  readonly connectionId: number;
  /** ms from ConnectionCheckOutStarted to this event. */
  readonly duration: number;
}

/** Emitted when a connection is checked back in (before it is made available or closed). */
export interface ConnectionCheckedInEvent extends PoolEventBase {
  readonly type: 'ConnectionCheckedIn';
  readonly connectionId: number;
}

/** Every CMAP event, discriminated on `type`. */
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
  | ConnectionCheckedInEvent;

/** The `type` of every CMAP event. */
export type ConnectionPoolEventType = ConnectionPoolEvent['type'];

/** All eleven CMAP event types, in the order the spec lists them. */
export const CONNECTION_POOL_EVENT_TYPES: readonly ConnectionPoolEventType[] = Object.freeze([
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

/** An event's fields without the two every event carries; what the reducer decides, before the runner stamps it. */
export type PoolEventPayload = ConnectionPoolEvent extends infer E
  ? E extends ConnectionPoolEvent
    ? Omit<E, 'address' | 'time'>
    : never
  : never;
