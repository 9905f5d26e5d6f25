/**
 * heartbeatActions: what a pool does with its server's heartbeats, as an RxJS operator from heartbeat events to pool
 * input actions. A successful check marks the pool ready; a failed one clears it, interrupting in-use connections
 * when the check failed with a network timeout.
 *
 * Source: server monitoring spec, "Marking the connection pool as ready (CMAP only)", "Network or command error
 * during server check"; CMAP spec, "interruptInUseConnections".
 */
import { mergeMap, type OperatorFunction } from 'rxjs';
import { MongoNetworkTimeoutError, MonitorClosedError } from '../errors';
import type { PoolInputAction } from '../pool/connection-pool-core';
import type { ServerHeartbeatEvent, ServerHeartbeatFailedEvent } from './heartbeat-events';

/**
 * Maps heartbeat events to pool input actions: ServerHeartbeatSucceeded → `{ type: 'ready' }`; ServerHeartbeatFailed →
 * `{ type: 'clear', cause: error, interruptInUseConnections: error is a network timeout }`, except the one
 * `Monitor.close()` ends a check in progress with (error: {@link MonitorClosedError}) → nothing: a closed monitor says
 * nothing of the server; ServerHeartbeatStarted → nothing. Any other value (a pool or client event of a merged stream
 * such as a client's `events$`, or a value that is no event at all: null, a number, an object without a heartbeat
 * `type`) → nothing: it is passed over, without erroring the stream, so that only a heartbeat can ready or clear the
 * pool.
 *
 * @example
 * ```ts
 * monitor.heartbeats$.pipe(heartbeatActions()).subscribe(pool.input);
 * ```
 *
 * Source: server monitoring spec, "Marking the connection pool as ready (CMAP only)", "Network or command error
 * during server check"; CMAP spec, "Clearing a non-load balanced pool" (interruptInUseConnections on a monitor
 * timeout); as an RxJS operator: extension.
 */
export function heartbeatActions(): OperatorFunction<ServerHeartbeatEvent, PoolInputAction> {
  return (events) => events.pipe(mergeMap((e: unknown): PoolInputAction[] => actionFor(e)));
}

/** The pool input action for one value of the stream: none for anything but a ServerHeartbeatSucceeded / Failed. */
function actionFor(e: unknown): PoolInputAction[] {
  if (e === null || typeof e !== 'object') return [];
  const event = e as Partial<ServerHeartbeatEvent>;
  if (event.type === 'ServerHeartbeatSucceeded') return [{ type: 'ready' }];
  if (event.type === 'ServerHeartbeatFailed') {
    const error = (event as ServerHeartbeatFailedEvent).error;
    // The monitor was closed, the server not found failing: the pool is left as it is.
    if (error instanceof MonitorClosedError) return [];
    return [{ type: 'clear', cause: error, interruptInUseConnections: error instanceof MongoNetworkTimeoutError }];
  }
  return [];
}
