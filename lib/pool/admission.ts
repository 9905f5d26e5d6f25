/**
 * The admission rules: when the pool may start an establishment, when a waiter should claim one already under way,
 * and when the pool is short of minPoolSize. Each is a question asked of the state the reducer owns; the reducer asks
 * them, in one place each, and acts on the answers.
 *
 * Why these are not `mergeMap(…, maxConnecting)` and friends: RxJS's concurrency limits bound the inner
 * subscriptions of one stream, but CMAP's limits are joint conditions on the whole pool. maxPoolSize counts pending,
 * available and in-use connections together; maxConnecting counts establishments started by checkouts and by
 * background population alike; a waiter may take an available connection, claim an unclaimed establishment or start
 * one, in FIFO order across all of them; and a clear changes which establishments may be claimed at all. An operator
 * cannot see any of that state, and two operators would need to agree on it; answered here, against the one
 * serialized state, each decision is made once, in commit order, and shows up in `events$` in that order.
 *
 * Source: CMAP spec, "Checking Out a Connection" (maxPoolSize, maxConnecting), "Populating the Pool with a
 * Connection" (minPoolSize), "Background Thread".
 */
import type { PoolState } from './state';

/** Is the pool below maxPoolSize (pending + available + in use), or is maxPoolSize 0 (no limit)? */
export function isBelowMaxPoolSize<C>(s: PoolState<C>): boolean {
  const max = s.options.maxPoolSize;
  return max === 0 || s.records.size < max;
}

/** Are fewer than maxConnecting establishments under way? */
export function hasEstablishmentSlot<C>(s: PoolState<C>): boolean {
  return s.pendingConnectionCount < s.options.maxConnecting;
}

/** May the pool start one more establishment now (below maxPoolSize, and an establishment slot free)? */
export function canStartEstablishment<C>(s: PoolState<C>): boolean {
  return isBelowMaxPoolSize(s) && hasEstablishmentSlot(s);
}

/**
 * Is an establishment of the current generation under way that no checkout has claimed (a background population, or
 * one whose claimant left)? The head of the WaitQueue then claims it rather than start another.
 */
export function hasUnclaimedEstablishment<C>(s: PoolState<C>): boolean {
  return s.claimablePendingCount > s.claimants.length;
}

/** Is the pool below minPoolSize, so background population should start an establishment (when a slot allows)? */
export function isBelowMinPoolSize<C>(s: PoolState<C>): boolean {
  return s.records.size < s.options.minPoolSize;
}
