/**
 * Warm-up: waiting until a pool holds its minPoolSize established connections, for services that must not take
 * traffic on a cold pool. Built on the pool's `events$` and `snapshot()`; the filling itself is the pool's own
 * population (CMAP "Background Thread"), which a ready pool runs at once.
 *
 * Source: extension (the Rust driver's `Client::warm_connection_pool`).
 */
import { Observable } from 'rxjs';
import { InvalidOptionError, PoolClosedError } from '../errors';
import type { ConnectionPoolEvent } from '../events';
import type { ResolvedPoolOptions } from '../options';

/** The members of a pool snapshot warm-up reads. */
interface Counts {
  readonly state: string;
  readonly totalConnectionCount: number;
  readonly pendingConnectionCount: number;
}

/** What warm-up reads from its pool. */
export interface WarmUpSource<S extends Counts> {
  readonly address: string;
  readonly options: ResolvedPoolOptions;
  readonly events$: Observable<ConnectionPoolEvent>;
  snapshot(): S;
  /** The ids of the connections being established now (ConnectionCreated emitted, not yet ready or closed). */
  pendingConnectionIds(): Iterable<number>;
}

/**
 * Emits the pool's snapshot, then completes, once the pool is ready and holds at least minPoolSize established
 * connections (available or in use); at once when it already does. While the pool is paused it waits (a monitor
 * readies it). Errors with the error of an establishment that failed meanwhile, one already under way when it was
 * subscribed to included (`ready()` starts the pool's population at once; the pool is then cleared), with
 * PoolClosedError when the pool is or gets closed, and with InvalidOptionError when minPoolSize > 0 but background
 * runs are disabled (`backgroundThreadIntervalMS` < 0: nothing would fill the pool). Unsubscribing stops waiting;
 * the pool goes on filling.
 */
export function warmUp<S extends Counts>(pool: WarmUpSource<S>): Observable<S> {
  return new Observable<S>((subscriber) => {
    const target = pool.options.minPoolSize;
    if (target > 0 && pool.options.backgroundThreadIntervalMS < 0) {
      subscriber.error(new InvalidOptionError('backgroundThreadIntervalMS', pool.options.backgroundThreadIntervalMS, 'a positive number for warmUp() to fill the pool to minPoolSize'));
      return undefined;
    }
    /** Connections being established while warm-up waits (their failure fails it): those under way already too. */
    const establishing = new Set<number>(pool.pendingConnectionIds());
    const check = (): void => {
      const s = pool.snapshot();
      if (s.state === 'closed') subscriber.error(new PoolClosedError(pool.address));
      else if (s.state === 'ready' && s.totalConnectionCount - s.pendingConnectionCount >= target) {
        subscriber.next(s);
        subscriber.complete();
      }
    };
    const subscription = pool.events$.subscribe((event) => {
      if (event.type === 'ConnectionCreated') establishing.add(event.connectionId);
      else if (event.type === 'ConnectionReady') establishing.delete(event.connectionId);
      else if (event.type === 'ConnectionClosed' && establishing.delete(event.connectionId) && event.reason === 'error' && event.error !== undefined) {
        return subscriber.error(event.error);
      }
      check();
    });
    return subscription;
  });
}
