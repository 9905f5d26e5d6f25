import type { ConnectionPoolCore, PoolConnection } from '../../lib';
import type { VirtualClock } from '../../lib/testing';

/**
 * Closes a ready pool of one connection while that connection is held and one checkout waits, and returns what an
 * application subscribed to `events$` and `state$` saw from the close on, in order: each event's type, and each
 * snapshot as `state$ <state>, waitQueueLength <n>`. The pool must have maxPoolSize 1 and run on `clock`; anything
 * else subscribed before the call (a recorder watching for the end, say) stays subscribed.
 */
export function closeTimeline<C extends PoolConnection>(pool: ConnectionPoolCore<C>, clock: VirtualClock): string[] {
  const timeline: string[] = [];
  pool.events$.subscribe((e) => timeline.push(e.type));
  pool.state$.subscribe((s) => timeline.push(`state$ ${s.state}, waitQueueLength ${s.waitQueueLength}`));
  pool.ready();
  pool.checkOut().subscribe();
  clock.advance(10);
  pool.checkOut().subscribe({ error: () => undefined }); // waits
  timeline.length = 0;
  pool.close();
  return timeline;
}
