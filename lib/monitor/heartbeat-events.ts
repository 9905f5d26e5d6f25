/**
 * The server heartbeat events a monitor publishes: one Started per check, then Succeeded or Failed.
 *
 * Source: server monitoring spec, "SDAM Monitoring" (ServerHeartbeatStarted/Succeeded/Failed); durations in ms.
 */
import type { Document } from 'bson';

/**
 * The ids of the monitoring connection a check runs on, in every heartbeat event.
 *
 * Source: server discovery and monitoring logging and monitoring spec, "Events API" (`connectionId`), "Common Fields"
 * (`driverConnectionId`: "MUST NOT contain the host/port"; `serverConnectionId`: "if known").
 */
export interface HeartbeatConnectionIds {
  /**
   * The driver's id of the monitoring connection the check runs on, or opens: always 0 (with the default factory,
   * the connection's `id`), the id a monitor gives its connection factory for every monitoring connection (its RTT
   * connection is 1). An int, never `host:port` (that is `address`).
   */
  readonly connectionId: number;
  /**
   * The server's id for that connection (the `connectionId` of its handshake reply), when known: absent while the
   * check opens the connection (a first check, one after a failure, a failure before the connection was
   * established), and when the server gave none.
   */
  readonly serverConnectionId?: number;
}

/**
 * A check started: emitted before the monitor connects (first check, or after a failure), sends `hello`, or (streaming)
 * reads the server's next reply.
 *
 * Source: server monitoring spec, "SDAM Monitoring" (ServerHeartbeatStartedEvent).
 */
export interface ServerHeartbeatStartedEvent extends HeartbeatConnectionIds {
  /** The event's name; discriminates {@link ServerHeartbeatEvent}. */
  readonly type: 'ServerHeartbeatStarted';
  /** The monitored server, `host:port`. */
  readonly address: string;
  /** When the check started: the monitor's scheduler `now()` (ms since the Unix epoch by default). */
  readonly time: number;
  /**
   * True for a check of the streaming protocol (an awaitable hello, or the wait for the next reply the server
   * streams), whose duration includes the server's wait of up to maxAwaitTimeMS; false for a polling check or a new
   * connection's handshake. Source: server monitoring spec, "What is the purpose of the "awaited" field on server
   * heartbeat events?".
   */
  readonly awaited: boolean;
}

/**
 * A check succeeded.
 *
 * Source: server monitoring spec, "SDAM Monitoring" (ServerHeartbeatSucceededEvent).
 */
export interface ServerHeartbeatSucceededEvent extends HeartbeatConnectionIds {
  /** The event's name; discriminates {@link ServerHeartbeatEvent}. */
  readonly type: 'ServerHeartbeatSucceeded';
  /** The monitored server, `host:port`. */
  readonly address: string;
  /** When the check ended: the monitor's scheduler `now()` (ms since the Unix epoch by default). */
  readonly time: number;
  /**
   * True for a check of the streaming protocol (an awaitable hello, or the wait for the next reply the server
   * streams), whose duration includes the server's wait of up to maxAwaitTimeMS; false for a polling check or a new
   * connection's handshake. Source: server monitoring spec, "What is the purpose of the "awaited" field on server
   * heartbeat events?".
   */
  readonly awaited: boolean;
  /**
   * ms from sending the `hello` (or legacy hello) to its reply. When the check opened the monitoring connection, the
   * handshake hello's (the connection's `handshakeDurationMS`), without the socket connect and TLS handshake before
   * it (the whole establishment for a connection that does not record it). Not `awaited`, it is the same measurement
   * as the check's RTT sample; `awaited`, it includes the server's wait of up to maxAwaitTimeMS.
   *
   * Source: server discovery and monitoring logging and monitoring spec, "Events API" (ServerHeartbeatSucceededEvent
   * `duration`: "the time to send the message and receive the reply"; "When the awaited field is false, the time
   * measurement used MUST be the same measurement used for the RTT calculation").
   */
  readonly duration: number;
  /**
   * The server's reply: a new monitoring connection's handshake reply, else the `hello` (or legacy hello) reply, or
   * (streaming) the reply the server streamed.
   */
  readonly reply: Readonly<Document>;
}

/**
 * A check failed. The monitoring connection is closed; the next check opens a new one. Also the end of a check in
 * progress when the monitor is closed (error: MonitorClosedError).
 *
 * Source: server monitoring spec, "SDAM Monitoring" (ServerHeartbeatFailedEvent), "Network or command error during
 * server check"; server discovery and monitoring logging and monitoring spec, "Guarantees", "Heartbeats".
 */
export interface ServerHeartbeatFailedEvent extends HeartbeatConnectionIds {
  /** The event's name; discriminates {@link ServerHeartbeatEvent}. */
  readonly type: 'ServerHeartbeatFailed';
  /** The monitored server, `host:port`. */
  readonly address: string;
  /** When the check failed: the monitor's scheduler `now()` (ms since the Unix epoch by default). */
  readonly time: number;
  /**
   * True for a check of the streaming protocol (an awaitable hello, or the wait for the next reply the server
   * streams), whose duration includes the server's wait of up to maxAwaitTimeMS; false for a polling check or a new
   * connection's handshake. Source: server monitoring spec, "What is the purpose of the "awaited" field on server
   * heartbeat events?".
   */
  readonly awaited: boolean;
  /** ms from the start of the check to its failure. */
  readonly duration: number;
  /**
   * Why: a {@link MongoNetworkError} (or {@link MongoNetworkTimeoutError} after connectTimeoutMS), a
   * {@link MongoServerError}, whatever else the connection factory failed with (wrapped in an `Error` if it was
   * not one), or a {@link MonitorClosedError} when `Monitor.close()` ended the check (nothing is known of the server
   * then: the pool is not cleared).
   */
  readonly error: Error;
}

/** Every heartbeat event, discriminated on `type`. Source: server monitoring spec, "SDAM Monitoring". */
export type ServerHeartbeatEvent = ServerHeartbeatStartedEvent | ServerHeartbeatSucceededEvent | ServerHeartbeatFailedEvent;
