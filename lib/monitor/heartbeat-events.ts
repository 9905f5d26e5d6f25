/**
 * The server heartbeat events a monitor publishes: one Started per check, then Succeeded or Failed.
 *
 * Source: server monitoring spec, "SDAM Monitoring" (ServerHeartbeatStarted/Succeeded/Failed); durations in ms.
 */
import type { Document } from 'bson';

/** A check started. `awaited` is always false: this monitor uses the polling protocol. */
export interface ServerHeartbeatStartedEvent {
  readonly type: 'ServerHeartbeatStarted';
  readonly address: string;
  readonly time: number;
  readonly awaited: false;
}

/** A check succeeded: `reply` is the hello (or handshake) reply; `duration` is its round trip, in ms. */
export interface ServerHeartbeatSucceededEvent {
  readonly type: 'ServerHeartbeatSucceeded';
  readonly address: string;
  readonly time: number;
  readonly awaited: false;
  readonly duration: number;
  readonly reply: Readonly<Document>;
}

/** A check failed with `error` after `duration` ms. */
export interface ServerHeartbeatFailedEvent {
  readonly type: 'ServerHeartbeatFailed';
  readonly address: string;
  readonly time: number;
  readonly awaited: false;
  readonly duration: number;
  readonly error: Error;
}

/** Every heartbeat event, discriminated on `type`. */
export type ServerHeartbeatEvent = ServerHeartbeatStartedEvent | ServerHeartbeatSucceededEvent | ServerHeartbeatFailedEvent;
