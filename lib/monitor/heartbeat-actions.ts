/**
 * heartbeatActions: what a pool does with its server's heartbeats, as an RxJS operator from heartbeat events to pool
 * input actions. A successful check marks the pool ready; a failed one clears it, interrupting in-use connections
 * when the check failed with a network timeout.
 *
 * Source: server monitoring spec, "Marking the connection pool as ready (CMAP only)", "Network or command error
 * during server check"; CMAP spec, "interruptInUseConnections".
 */
import { filter, map, type OperatorFunction } from 'rxjs';
import { MongoNetworkTimeoutError } from '../errors';
import type { PoolInputAction } from '../pool/connection-pool-core';
import type { ServerHeartbeatEvent } from './heartbeat-events';

/**
 * Maps heartbeat events to pool input actions: ServerHeartbeatSucceeded → `{ type: 'ready' }`;
 * ServerHeartbeatFailed → `{ type: 'clear', cause: error, interruptInUseConnections: error is a network timeout }`;
 * ServerHeartbeatStarted → nothing.
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
  return (events) =>
    events.pipe(
      filter((e) => e.type !== 'ServerHeartbeatStarted'),
      map(
        (e): PoolInputAction =>
          e.type === 'ServerHeartbeatFailed'
            ? { type: 'clear', cause: e.error, interruptInUseConnections: e.error instanceof MongoNetworkTimeoutError }
            : { type: 'ready' },
      ),
    );
}
