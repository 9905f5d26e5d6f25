/**
 * reduce(state, action) → state: every pool decision, made one action at a time; the `scan` of the pool's input.
 * The reducer mutates the state it owns, performs no I/O, reads time only from the state's injected clock, and
 * leaves the side effects it wants (events, establishments, deliveries, timers) as data in `state.commands`, for the
 * runner.
 *
 * Source: CMAP spec, "Connection Pool Behaviors" (creating, closing, marking ready, creating/establishing/closing
 * a connection, populating, checking out, checking in, clearing), "Background Thread", "WaitQueue".
 */
import { checkInChannel, clearChannel } from '../diagnostics-channels';
import { CheckOutCancelledError, PoolClearedError, PoolClosedError, WaitQueueFullError, WaitQueueTimeoutError, type PoolHoldings } from '../errors';
import type {
  ConnectionCheckOutFailedReason,
  ConnectionClosedReason,
  ConnectionPoolEvent,
} from '../events';
import type { Action } from './actions';
import {
  canStartEstablishment,
  hasUnclaimedEstablishment,
  isBelowMinPoolSize,
} from './admission';
import type { Command } from './commands';
import { errorOf, isErrored, serviceIdOf, serviceIdOfError } from './connection-checks';
import type { PoolConnection } from './contract';
import { inUseConnectionCount, recordOf, waitingCheckOutCount, type ConnectionRecord, type PoolState } from './state';
import type { Waiter, WaiterState } from './wait-queue';

/**
 * Applies `action` to `state` (in place) and returns it, with `state.commands` the commands that carry out the
 * action's effects, in commit order.
 */
export function reduce<C extends PoolConnection>(state: PoolState<C>, action: Action<C>): PoolState<C> {
  const out: Command<C>[] = [];
  state.commands = out;
  state.stepTime = NaN;
  switch (action.type) {
    case 'checkOut':
      if (action.site !== undefined) state.checkOutSites?.set(action.waiter, action.site);
      if (action.purpose !== undefined) (state.purposes ??= new WeakMap()).set(action.waiter, action.purpose);
      checkOut(state, action.waiter, action.high === true, out);
      break;
    case 'cancel':
      cancel(state, action.waiter, action.error, action.timeoutMS, out);
      break;
    case 'checkIn':
      checkIn(state, action.connection, action.holder, action.discard, out);
      break;
    case 'clear':
      if (action.serviceId !== undefined) clearService(state, action.serviceId, out);
      else clear(state, action.interruptInUseConnections, action.cause, out);
      break;
    case 'ready':
      ready(state, out);
      break;
    case 'close':
      close(state, out);
      break;
    case 'drain':
      drain(state, action.timeoutMS, out);
      break;
    case 'established':
      established(state, action.id, action.connection, out);
      break;
    case 'handshakeDone':
      handshakeDone(state, action.id, action.serviceId);
      break;
    case 'establishFailed':
      establishFailed(state, action.id, action.error, action.clearPool, out);
      break;
    case 'timer':
      if (action.timer === 'waitQueue') waitQueueTimer(state, out);
      else if (action.timer === 'background') backgroundRun(state, out);
      else if (action.timer === 'leakDetection') leakDetectionTimer(state, out);
      else drainTimeout(state, out);
      break;
  }
  if (state.draining && state.state !== 'closed' && isDrained(state)) close(state, out);
  return state;
}

/**
 * {@link reduce}, failing closed: when applying `action` throws (a fault of the pool itself: every value that user
 * code supplies is read through guards that cannot throw), the pool is torn down rather than left stopped with
 * checkouts that would never settle. The teardown relies on none of the counts or links the fault may have left half
 * updated:
 * - the commands the step had decided before the fault are kept (a checkout it served is still delivered);
 * - every connection no checkout holds is closed (ConnectionClosed, reason poolClosed); connections checked out are
 *   closed when checked in, as on any closed pool; the counts are rebuilt from what is left;
 * - every checkout the pool owes an outcome fails with a PoolClosedError whose `cause` is the fault: those in the
 *   WaitQueue, the claimants, those the step had taken out of either, and the checkout of `action`;
 * - ConnectionPoolClosed is emitted unless the pool was closed already; its timers are disarmed;
 * - when the fault is the clock's (a scheduler whose `now()` throws), the teardown's events carry the system clock's
 *   time (`Date.now()`, ms), so a clock that keeps failing cannot stop it;
 * - the fault is reported as RxJS reports unhandled errors (`config.onUnhandledError`, else thrown asynchronously),
 *   after the step's other commands run. If the teardown throws as well, that error is reported too.
 */
export function reduceFailingClosed<C extends PoolConnection>(state: PoolState<C>, action: Action<C>): PoolState<C> {
  const wasClosed = state.state === 'closed';
  state.waitQueue.beginStep();
  state.claimants.beginStep();
  try {
    return reduce(state, action);
  } catch (fault) {
    const out = state.commands; // the failed step's commands (reduce sets them before anything that can throw)
    try {
      tearDown(state, action, fault, wasClosed, out);
    } catch (second) {
      out.push({ type: 'report', error: second });
    }
    out.push({ type: 'report', error: fault });
    return state;
  }
}

function tearDown<C extends PoolConnection>(s: PoolState<C>, action: Action<C>, fault: unknown, wasClosed: boolean, out: Command<C>[]): void {
  s.state = 'closed';
  // The fault may be the clock's (a scheduler whose now() throws): the teardown's events then take the system
  // clock's time, so that a clock failing again cannot stop the teardown before every checkout is settled; the
  // durations of its checkouts are then unknown (a start on one clock, an end on another).
  let clockFailed = false;
  if (Number.isNaN(s.stepTime)) {
    try {
      s.stepTime = s.now();
    } catch {
      s.stepTime = Date.now();
      clockFailed = true;
    }
  }
  // The checkouts owed an outcome: the step's commands settle some; every other one taken out, or still waiting, fails.
  const settled = new Set<Waiter<C>>();
  for (const c of out) if (c.type === 'deliver' || c.type === 'fail') settled.add(c.waiter);
  // (A waiter moved from the WaitQueue to the claimants in this step is in both lists.)
  const owed = [...new Set([...s.claimants.takeAll(), ...s.waitQueue.takeAll()])].filter((w) => !settled.has(w));
  // The checkout of a checkOut action (its first step in the pool), when no command of the step settles it and no
  // list holds it, is owed one too: while it is not done, or when it was given a connection not yet delivered. (A
  // cancel's checkout needs nothing more: a cancel takes it out of the WaitQueue only once nothing after can fail, so
  // it is in a list, done with its outcome, or done in an earlier step, keeping that outcome and its connection.)
  const own = action.type === 'checkOut' ? action.waiter : undefined;
  if (own !== undefined && !settled.has(own) && !owed.includes(own)) {
    if (own.state !== 'done' || [...s.records.values()].some((rec) => rec.holder === own)) owed.push(own);
  }
  // Connections: those checked out stay with their holders (closed when checked in); every other one is closed, a
  // connection the step gave to a checkout it did not deliver to among them. The counts are rebuilt from what is left.
  s.available.clear();
  s.pendingConnectionCount = s.claimablePendingCount = 0;
  s.handshakeGenerations?.clear();
  for (const rec of [...s.records.values()]) {
    rec.prev = rec.next = undefined;
    if (rec.state === 'in use' && rec.holder !== undefined && !owed.includes(rec.holder)) continue;
    rec.state = 'closed';
    rec.holder = undefined;
    s.records.delete(rec.id);
    if (s.observed) emit(out, { type: 'ConnectionClosed', address: s.address, time: now(s), connectionId: rec.id, reason: 'poolClosed' });
    out.push(rec.connection === undefined ? { type: 'abort', id: rec.id } : { type: 'destroy', connection: rec.connection });
  }
  // Those left are in use: their list is rebuilt in checkout order, for their check-ins and for leak detection, its
  // only reader once the pool is closed (their counts by purpose are no longer read: a closed pool has no holdings to
  // report, as nothing waits in it). With leak detection on, every checkout was timed.
  s.inUse.clear();
  for (const rec of [...s.records.values()].sort((a, b) => a.checkedOutAt - b.checkedOutAt)) s.inUse.push(rec);
  for (const service of s.serviceGenerations.values()) service.connectionCount = 0;
  for (const rec of s.records.values()) {
    const service = rec.serviceId === undefined ? undefined : s.serviceGenerations.get(rec.serviceId);
    if (service !== undefined) service.connectionCount++;
  }
  for (const [serviceId, service] of [...s.serviceGenerations]) if (service.connectionCount === 0) s.serviceGenerations.delete(serviceId);
  if (!wasClosed && s.observed && !out.some((c) => c.type === 'emit' && c.event.type === 'ConnectionPoolClosed')) {
    emit(out, { type: 'ConnectionPoolClosed', address: s.address, time: now(s) });
  }
  const error = new PoolClosedError(s.address, fault);
  for (const w of owed) {
    if (clockFailed) w.startedAt = undefined;
    failWaiter(s, w, 'poolClosed', error, out);
  }
  s.waitTimerAt = undefined;
  out.push({ type: 'disarm', timer: 'waitQueue' }, { type: 'disarm', timer: 'background' }, { type: 'disarm', timer: 'drain' });
  if (s.records.size === 0) disarmLeakDetection(s, out);
}

// ---------------------------------------------------------------------------------------------------------------
// Checking out

function checkOut<C extends PoolConnection>(s: PoolState<C>, w: Waiter<C>, high: boolean, out: Command<C>[]): void {
  if (w.state !== 'new') return; // cancelled before it reached the pool: it never started
  // The clock is read only when something needs it: a duration for an observer, or a WaitQueue deadline.
  const timeout = s.options.waitQueueTimeoutMS;
  if (s.observed || timeout > 0) w.startedAt = now(s);
  if (s.observed) emit(out, { type: 'ConnectionCheckOutStarted', address: s.address, time: now(s) });
  if (s.state === 'closed' || s.draining) return failWaiter(s, w, 'poolClosed', new PoolClosedError(s.address), out);
  if (s.state === 'paused') return failWaiter(s, w, 'connectionError', pausedError(s), out);

  // A connection is available only while nobody waits (serveWaiters hands each one out in the step that makes it
  // available), so the most recently used one, when one is left, goes to this checkout without queueing it.
  const rec = takeAvailable(s, out);
  if (rec !== undefined) return checkOutTo(s, w, rec, out);
  if (timeout > 0) w.deadline = now(s) + timeout;
  s.waitQueue.push(w, high);
  serveWaiters(s, out);
  if ((w.state as WaiterState) === 'done') return;
  const maxWaitQueueSize = s.options.maxWaitQueueSize;
  if ((w.state as WaiterState) === 'queued' && maxWaitQueueSize > 0 && s.waitQueue.length > maxWaitQueueSize) {
    // A bounded WaitQueue: it would wait behind maxWaitQueueSize others, so it fails at once instead.
    s.waitQueue.remove(w);
    return failWaiter(s, w, 'waitQueueFull', new WaitQueueFullError(s.address, maxWaitQueueSize, holdings(s)), out);
  }
  // Queued, or waiting on an establishment it did not start: either way its deadline stands. A WaitQueue timer still
  // armed for a time passed was lost (see waitTimerLost): armed again, it runs at once.
  if (w.deadline !== undefined) {
    if (s.waitTimerAt === undefined) armTimer(s, 'waitQueue', w.deadline, out);
    else if (waitTimerLost(s)) renewWaitTimer(s, out);
  }
}

/**
 * Serves waiters, oldest first, until no more progress is possible:
 * 1. available connections go to the oldest waiters: high-priority ones first (claimants, then queued), then
 *    claimants (they are older than any queued one), then the WaitQueue; perished connections met on the way are
 *    closed;
 * 2. the head of the WaitQueue (high-priority first) claims an establishment already under way that nobody claimed
 *    (a background populate, or one whose claimant left), or starts one if maxPoolSize and maxConnecting allow.
 * A claimant leaves the WaitQueue. One that started its establishment is no longer subject to waitQueueTimeoutMS (CMAP
 * "Checking Out a Connection": the thread that creates a connection leaves the WaitQueue, then establishes it); one
 * that claimed an establishment it did not start is still waiting for a pending connection, so its deadline stands
 * (CMAP "WaitQueue": members time out aggressively; waitQueueTimeoutMS bounds a wait for a pending connection).
 */
function serveWaiters<C extends PoolConnection>(s: PoolState<C>, out: Command<C>[]): void {
  if (waitingCheckOutCount(s) === 0) return;
  while (s.available.size > 0 && waitingCheckOutCount(s) > 0) {
    const rec = takeAvailable(s, out);
    if (rec === undefined) break;
    checkOutTo(s, takeWaiter(s)!, rec, out);
  }
  for (let w = s.waitQueue.peek(); w !== undefined; w = s.waitQueue.peek()) {
    if (hasUnclaimedEstablishment(s)) {
      // An establishment is under way with no claimant: wait for it rather than start another.
    } else if (canStartEstablishment(s)) {
      createConnection(s, out, w);
      w.deadline = undefined; // it establishes the connection it started: waitQueueTimeoutMS ends here
    } else {
      break;
    }
    const high = s.waitQueue.hasHigh(); // w is the head of the high lane when that has members
    s.waitQueue.shift();
    s.claimants.push(w, high);
  }
}

/**
 * Removes and returns the waiter the next connection goes to: high-priority ones first (claimants, then queued), then
 * claimants (they are older than any queued one), then the WaitQueue.
 */
function takeWaiter<C>(s: PoolState<C>): Waiter<C> | undefined {
  const fromClaimants = s.claimants.length > 0 && (s.claimants.hasHigh() || !s.waitQueue.hasHigh());
  return fromClaimants ? s.claimants.shift() : s.waitQueue.shift();
}

/** Pops the most recently used available connection that is not perished, closing perished ones on the way. */
function takeAvailable<C extends PoolConnection>(s: PoolState<C>, out: Command<C>[]): ConnectionRecord<C> | undefined {
  for (let rec = s.available.tail; rec !== undefined; rec = s.available.tail) {
    const perished = perishedReason(s, rec);
    if (perished === undefined) {
      s.available.remove(rec);
      return rec;
    }
    closeRecord(s, rec, perished, out);
  }
  return undefined;
}

function checkOutTo<C extends PoolConnection>(
  s: PoolState<C>,
  w: Waiter<C>,
  rec: ConnectionRecord<C>,
  out: Command<C>[],
): void {
  rec.state = 'in use';
  rec.holder = w;
  w.state = 'done';
  s.inUse.push(rec);
  if (s.purposes !== undefined) countPurpose(s, w, 1);
  // The checkout is timed only when something reads the time: an observer, a timeout's holdings, leak detection.
  const leakThreshold = s.options.leakDetectionThresholdMS;
  rec.checkedOutAt = s.observed || s.options.waitQueueTimeoutMS > 0 || leakThreshold > 0 ? now(s) : NaN;
  if (leakThreshold > 0) {
    rec.checkOutSite = s.checkOutSites!.get(w);
    rec.leakSuspected = false;
    if (s.leakTimerAt === undefined) armTimer(s, 'leakDetection', rec.checkedOutAt + leakThreshold, out);
  }
  if (s.observed) {
    emit(out, { type: 'ConnectionCheckedOut', address: s.address, time: now(s), connectionId: rec.id, duration: sinceStart(s, w) });
  }
  out.push({ type: 'deliver', waiter: w, connection: rec.connection! });
}

function failWaiter<C extends PoolConnection>(
  s: PoolState<C>,
  w: Waiter<C>,
  reason: ConnectionCheckOutFailedReason,
  error: Error,
  out: Command<C>[],
): void {
  w.state = 'done';
  if (s.observed) {
    emit(out, { type: 'ConnectionCheckOutFailed', address: s.address, time: now(s), reason, duration: sinceStart(s, w), error });
  }
  out.push({ type: 'fail', waiter: w, error });
}

/**
 * A requester gave up. Whether it is cancelled is decided here, in commit order: a checkout the pool already served
 * or failed keeps that outcome (caller and events agree, even when the abort came from inside the pool's own
 * processing). An aborted one is failed with its front end's error, which the event carries too; an unsubscribed
 * one has nobody to receive an error, so none is built unless an observer receives it in the event.
 */
function cancel<C extends PoolConnection>(
  s: PoolState<C>,
  w: Waiter<C>,
  abortError: Error | undefined,
  timeoutMS: number | undefined,
  out: Command<C>[],
): void {
  if (w.state === 'new') {
    w.state = 'done'; // it never reached the pool: no event, nothing to undo
    if (abortError !== undefined) out.push({ type: 'fail', waiter: w, error: abortError });
    return;
  }
  // What the pool held as the checkout's own timeout elapsed (taken before it leaves), and the clock its event reads:
  // read before the waiter leaves, so that once it has left, its outcome follows without anything that can fail.
  const held = timeoutMS === undefined ? undefined : holdings(s);
  if (s.observed) now(s);
  if (!s.waitQueue.remove(w) && !s.claimants.remove(w)) return; // already done: its outcome stands
  const error = held === undefined ? abortError : new WaitQueueTimeoutError(s.address, timeoutMS!, held, { timeoutMS, maxPoolSize: loadBalancedMaxPoolSize(s) });
  if (s.observed) {
    emit(out, {
      type: 'ConnectionCheckOutFailed',
      address: s.address,
      time: now(s),
      // An error other than the front end's cancellation is one the checkout could not be set up without (its signal
      // refused a listener, its scheduler a deadline): nobody gave up, and its trace says connectionError too.
      reason: held !== undefined ? 'timeout' : abortError === undefined || abortError instanceof CheckOutCancelledError ? 'cancelled' : 'connectionError',
      duration: sinceStart(s, w),
      error: error ?? new CheckOutCancelledError(s.address),
    });
  }
  if (error !== undefined) out.push({ type: 'fail', waiter: w, error });
  // A released claim leaves an establishment unclaimed, which the head of the WaitQueue may now take.
  serveWaiters(s, out);
}

/**
 * The WaitQueue timer fired: expired claimants of establishments they did not start time out (they are the oldest;
 * at most maxConnecting of them), then each lane's expired heads (deadlines grow within a lane, so the expired ones
 * are at its head); a claim left behind goes to the head of the WaitQueue; the timer is re-armed for the earliest
 * deadline left.
 */
function waitQueueTimer<C extends PoolConnection>(s: PoolState<C>, out: Command<C>[]): void {
  s.waitTimerAt = undefined;
  const time = now(s);
  // What the pool held when these checkouts timed out: taken once, before the first of them leaves the WaitQueue.
  let held: PoolHoldings | undefined;
  let next = Infinity;
  let released = false;
  if (s.claimants.length > 0) {
    for (const w of s.claimants.toArray()) {
      if (w.deadline === undefined) continue; // it started its establishment
      if (w.deadline > time) {
        next = Math.min(next, w.deadline);
        continue;
      }
      held ??= holdings(s);
      s.claimants.remove(w);
      released = true;
      failWaiter(s, w, 'timeout', new WaitQueueTimeoutError(s.address, s.options.waitQueueTimeoutMS, held, { maxPoolSize: loadBalancedMaxPoolSize(s) }), out);
    }
  }
  for (const high of [true, false]) {
    for (let w = s.waitQueue.peekLane(high); w !== undefined; w = s.waitQueue.peekLane(high)) {
      if (w.deadline === undefined) break; // no deadline (waitQueueTimeoutMS was 0 when it entered)
      if (w.deadline > time) {
        next = Math.min(next, w.deadline);
        break;
      }
      held ??= holdings(s);
      s.waitQueue.shiftLane(high);
      const error = new WaitQueueTimeoutError(s.address, s.options.waitQueueTimeoutMS, held, { maxPoolSize: loadBalancedMaxPoolSize(s) });
      failWaiter(s, w, 'timeout', error, out);
    }
  }
  if (released) {
    // The establishments they claimed go on: the head of the WaitQueue claims them, keeping its own deadline.
    serveWaiters(s, out);
    for (const w of s.claimants.toArray()) if (w.deadline !== undefined) next = Math.min(next, w.deadline);
  }
  if (next !== Infinity) armTimer(s, 'waitQueue', next, out);
}

/** Load-balanced mode: the maxPoolSize a WaitQueueTimeoutError's message gives (load balancer spec); else undefined. */
function loadBalancedMaxPoolSize<C>(s: PoolState<C>): number | undefined {
  return s.loadBalanced ? s.options.maxPoolSize : undefined;
}

/**
 * Whether the WaitQueue timer is armed for a time already passed: its run, due before this step, did not come. The
 * scheduler lost it (fake timers uninstalled while it was armed drop it); with it the timeouts of every checkout behind
 * it would be lost, the timer being armed for the head of the WaitQueue only. (A timer merely late, its run still
 * coming, is armed again too: it runs then, once.) Once armed again, it is not taken for lost again before it runs or
 * is armed for another time: checkouts arriving while it is late (an event loop behind its timers) arm it once, not
 * once each.
 */
function waitTimerLost<C>(s: PoolState<C>): boolean {
  return s.waitTimerAt !== undefined && !s.waitTimerRenewed && s.waitTimerAt < now(s);
}

/** Arms the WaitQueue timer again for the time it was armed for (passed: it runs at once), as lost. */
function renewWaitTimer<C>(s: PoolState<C>, out: Command<C>[]): void {
  armTimer(s, 'waitQueue', s.waitTimerAt!, out);
  s.waitTimerRenewed = true;
}

/** Arms one of the pool's timers for clock time `at` (ms), recording when it is due. */
function armTimer<C>(s: PoolState<C>, timer: 'waitQueue' | 'leakDetection', at: number, out: Command<C>[]): void {
  if (timer === 'waitQueue') {
    s.waitTimerAt = at;
    s.waitTimerRenewed = false;
  } else s.leakTimerAt = at;
  out.push({ type: 'arm', timer, delay: Math.max(0, at - now(s)) });
}

/**
 * What the pool holds now (see {@link PoolHoldings}): its counts, and the checkout that has held its connection
 * longest (the head of the in-use list), when that checkout was timed. O(1): read as often as checkouts time out or
 * are refused, however many connections are in use.
 */
function holdings<C>(s: PoolState<C>): PoolHoldings {
  const inUse = inUseConnectionCount(s);
  // A checkout that was not timed (made while nobody observed the pool) has no duration: then none can be named.
  const head = s.inUse.head;
  const oldest = head === undefined || Number.isNaN(head.checkedOutAt) ? undefined : head;
  const { cursor, transaction } = s.inUseByPurpose;
  return Object.freeze({
    inUseConnectionCount: inUse,
    inUseByPurpose: Object.freeze({ cursor, transaction, operation: inUse - cursor - transaction }),
    pendingConnectionCount: s.pendingConnectionCount,
    availableConnectionCount: s.available.size,
    waitQueueLength: waitingCheckOutCount(s),
    oldestCheckOut:
      oldest === undefined
        ? undefined
        : Object.freeze({ connectionId: oldest.id, duration: now(s) - oldest.checkedOutAt, checkOutStack: framesOf(oldest.checkOutSite) }),
  });
}

/** Counts a connection checked out (`delta` 1) or in (-1) for `holder`'s purpose, when it gave one. */
function countPurpose<C>(s: PoolState<C>, holder: Waiter<C>, delta: 1 | -1): void {
  const purpose = s.purposes!.get(holder);
  if (purpose !== undefined) s.inUseByPurpose[purpose] += delta;
}

/** The frames of a captured `checkOut` stack (its lines after the first), or undefined when none was captured. */
function framesOf(site: { stack?: string } | undefined): string | undefined {
  const stack = site?.stack;
  return stack === undefined ? undefined : stack.slice(stack.indexOf('\n') + 1);
}

/**
 * Leak detection's check: each connection checked out for at least leakDetectionThresholdMS is reported once
 * (ConnectionLeakSuspected), at the first check that finds it due while the pool is observed; the timer is re-armed
 * for the next checkout that will reach the threshold, or a threshold later while a due one waits for an observer.
 * The in-use list is in checkout order, so the due checkouts are at its head: a firing reads those and the first one
 * not due, however many connections are in use; it fires at most once per threshold while checkouts are short.
 */
function leakDetectionTimer<C extends PoolConnection>(s: PoolState<C>, out: Command<C>[]): void {
  s.leakTimerAt = undefined;
  const threshold = s.options.leakDetectionThresholdMS;
  const time = now(s);
  let next = Infinity;
  for (let rec = s.inUse.head; rec !== undefined; rec = rec.next) {
    if (rec.leakSuspected) continue;
    const due = rec.checkedOutAt + threshold;
    if (due > time) {
      // The first one not due: every later checkout is younger (a threshold later while due ones wait is later still).
      next = Math.min(next, due);
      break;
    }
    if (!s.observed) {
      // Nobody to tell: it stays a suspect to report, looked at again a threshold later, so an observer who comes
      // meanwhile learns of it (and its check-in is never reported for a suspicion nobody heard of).
      next = Math.min(next, time + threshold);
      continue;
    }
    rec.leakSuspected = true;
    emit(out, {
      type: 'ConnectionLeakSuspected',
      extension: 'leakDetectionThresholdMS',
      address: s.address,
      time,
      connectionId: rec.id,
      duration: time - rec.checkedOutAt,
      checkOutStack: framesOf(rec.checkOutSite) ?? '',
    });
  }
  if (next !== Infinity) armTimer(s, 'leakDetection', next, out);
}

// ---------------------------------------------------------------------------------------------------------------
// Checking in

function checkIn<C extends PoolConnection>(
  s: PoolState<C>,
  connection: C,
  holder: Waiter<C>,
  discard: Error | undefined,
  out: Command<C>[],
): void {
  const rec = recordOf(s, connection);
  // Only the checkout that holds the connection may check it in: a duplicate, or a late check-in after the
  // connection went to another checkout, changes nothing.
  if (rec === undefined || rec.connection !== connection || rec.state !== 'in use' || rec.holder !== holder) return;
  rec.holder = undefined;
  if (s.observed) {
    const used = now(s) - rec.checkedOutAt;
    emit(out, { type: 'ConnectionCheckedIn', address: s.address, time: now(s), connectionId: rec.id, duration: Number.isNaN(used) ? undefined : used });
  }
  // After its event: should this fail (a fault of the pool), the teardown closes a connection the events show checked in.
  s.inUse.remove(rec);
  if (s.purposes !== undefined) countPurpose(s, holder, -1);
  if (checkInChannel.hasSubscribers) {
    const { address, serverAddress, serverPort, pool } = s.server;
    out.push({ type: 'publish', channel: checkInChannel, message: { address, serverAddress, serverPort, pool, connectionId: rec.id } });
  }
  if (rec.leakSuspected) {
    rec.leakSuspected = false;
    if (s.observed) {
      emit(out, {
        type: 'ConnectionLeakSuspectCheckedIn',
        extension: 'leakDetectionThresholdMS',
        address: s.address,
        time: now(s),
        connectionId: rec.id,
        duration: now(s) - rec.checkedOutAt,
      });
    }
  }
  rec.checkOutSite = undefined;
  // The pool's close first; then the connection's own error (a command's network error that cleared the pool is why
  // this one closes, and the events show it), unless its error is the pool's interruption of it; then staleness.
  const reason: ConnectionClosedReason | undefined =
    s.state === 'closed'
      ? 'poolClosed'
      : ((rec.interrupted ? undefined : erroredReason(rec)) ??
        (isStale(s, rec) ? 'stale' : discard !== undefined ? 'error' : expiredReason(s, rec)));
  if (reason !== undefined) {
    closeRecord(s, rec, reason, out, discard);
    populate(s, out);
    serveWaiters(s, out);
  } else if (waitingCheckOutCount(s) > 0) {
    // Straight to the next waiter: nothing else is available while someone waits, so serveWaiters would hand it this
    // very connection.
    const claimants = s.claimants.length;
    checkOutTo(s, takeWaiter(s)!, rec, out);
    // A claimant served this way leaves its establishment unclaimed, which the head of the WaitQueue may now take.
    if (s.claimants.length < claimants) serveWaiters(s, out);
  } else {
    makeAvailable(s, rec);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Connections: create, establish, make available, close

function createConnection<C extends PoolConnection>(s: PoolState<C>, out: Command<C>[], starter?: Waiter<C>): void {
  const id = s.nextConnectionId++;
  const rec: ConnectionRecord<C> = {
    id,
    generation: s.generation,
    serviceId: undefined,
    state: 'pending',
    connection: undefined,
    createdAt: now(s),
    expiresAt: lifetimeEnd(s, id),
    availableSince: 0,
    checkedOutAt: NaN,
    checkOutSite: undefined,
    leakSuspected: false,
    interrupted: false,
    holder: undefined,
    starter,
    prev: undefined,
    next: undefined,
  };
  s.records.set(id, rec);
  if (starter !== undefined) s.startedEstablishments.set(starter, rec);
  s.pendingConnectionCount++;
  s.claimablePendingCount++;
  if (s.observed) emit(out, { type: 'ConnectionCreated', address: s.address, time: now(s), connectionId: id });
  out.push({ type: 'establish', id, generation: rec.generation });
}

function established<C extends PoolConnection>(s: PoolState<C>, id: number, connection: C, out: Command<C>[]): void {
  const rec = s.records.get(id);
  if (rec === undefined || rec.state !== 'pending') {
    out.push({ type: 'destroy', connection }); // abandoned while it was being established
    return;
  }
  rec.connection = connection;
  // Whether minPoolSize is refilled in this step: not after a connection that perished as it became ready (errored,
  // or past its lifetime), which the next Background Thread Run replaces instead, as after a failed establishment: a
  // lifetime shorter than an establishment would otherwise restart it at once, in a loop.
  let refill = true;
  // Load-balanced mode: the service generation it took when its handshake was done (see handshakeDone), if it did.
  const handshakeGeneration = s.handshakeGenerations?.get(id);
  if (handshakeGeneration !== undefined) s.handshakeGenerations!.delete(id);
  const stale = handshakeGeneration === undefined ? isStale(s, rec) : handshakeGeneration !== s.serviceGenerations.get(rec.serviceId!)!.generation;
  // The checkout that started it, when it still waits on it: a replacement made below is started for it in turn.
  const starter = rec.starter?.state === 'claimant' ? rec.starter : undefined;
  rec.starter = undefined;
  if (stale) {
    // Established for a generation that has since been cleared: closed, never handed out.
    closeRecord(s, rec, 'stale', out);
    // Load-balanced mode (its service was cleared while it authenticated): a service clear leaves the WaitQueue, so
    // the checkout that claimed it gets another establishment.
    if (s.loadBalanced && s.claimants.length > s.claimablePendingCount && canStartEstablishment(s)) createConnection(s, out, starter);
  } else if (isErrored(connection)) {
    // Perished as it became ready (the runner fails the establishment of a connection that arrives errored, so only
    // an `established` action sent by other means gets here errored): never made available; the checkout that
    // claimed it gets another establishment when the limits allow.
    closeRecord(s, rec, 'error', out);
    if (s.claimants.length > s.claimablePendingCount && canStartEstablishment(s)) createConnection(s, out, starter);
    refill = false;
  } else if (s.claimants.length === 0 && expiredReason(s, rec) !== undefined) {
    // Past its lifetime (maxLifeTimeMS counts from ConnectionCreated) as it became ready, and no checkout waits for
    // it: closed, never made available.
    closeRecord(s, rec, 'expired', out);
    refill = false;
  } else {
    // (Past its lifetime with a checkout waiting for it, it is still handed out, once, and closed when checked in:
    // replaced instead, a lifetime shorter than the establishment would never let a checkout through.)
    endPending(s, rec);
    if (handshakeGeneration !== undefined) rec.generation = handshakeGeneration;
    else if (s.loadBalanced) rec.generation = joinService(s, rec, serviceIdOf(connection) ?? '');
    if (s.observed) {
      emit(out, { type: 'ConnectionReady', address: s.address, time: now(s), connectionId: id, duration: now(s) - rec.createdAt });
    }
    const claimant = s.claimants.shift();
    if (claimant !== undefined) {
      checkOutTo(s, claimant, rec, out);
      if (starter !== undefined && starter !== claimant) passClaim(s, starter, claimant, out);
    } else {
      makeAvailable(s, rec);
    }
  }
  serveWaiters(s, out);
  if (refill) populate(s, out);
}

function establishFailed<C extends PoolConnection>(
  s: PoolState<C>,
  id: number,
  error: Error,
  clearPool: boolean,
  out: Command<C>[],
): void {
  const rec = s.records.get(id);
  if (rec === undefined || rec.state !== 'pending') return; // abandoned already
  const current = rec.generation === s.generation;
  // The failure goes to the checkout that started the establishment, while it still waits on it (CMAP "Checking Out a
  // Connection": the thread establishing a connection gets its error), not to an older checkout waiting on another
  // establishment, which may still succeed. One that nobody started for a checkout still waiting on it (a background
  // populate, or one whose starter left) goes to the oldest claimant that waits on an establishment it did not start
  // (the one that claimed this one in its starter's place): the checkout waiting on an establishment gets its error
  // (and may retry), rather than silently moving on to the next one; one whose own establishment is still under way
  // keeps waiting on it.
  const starter = rec.starter;
  let claimant: Waiter<C> | undefined;
  if (current) claimant = starter !== undefined && s.claimants.take(starter) ? starter : takeClaimantWithoutOwn(s);
  // Load-balanced mode: errors before or during the handshake never clear the pool; one after it (during
  // authentication) names the service the connection reached, and clears that service only (load balancer spec),
  // unless that service was cleared since the connection took its generation at its handshake: a stale error, which
  // would otherwise make the connections made since that clear stale too (SDAM error handling: errors of an older
  // generation are ignored).
  if (clearPool && current) {
    if (!s.loadBalanced) clear(s, false, error, out);
    else {
      const serviceId = serviceIdOfError(error);
      // The service its handshake joined (rec.serviceId), with the generation it took there.
      const staleService = serviceId !== undefined && serviceId === rec.serviceId && s.handshakeGenerations?.get(id) !== s.serviceGenerations.get(serviceId)?.generation;
      if (serviceId !== undefined && !staleService) clearService(s, serviceId, out, error);
    }
  }
  closeRecord(s, rec, 'error', out, error);
  if (claimant !== undefined) failWaiter(s, claimant, 'connectionError', error, out);
  serveWaiters(s, out);
  // No populate here: after an error, minPoolSize is restored by the next Background Thread Run, never at the same
  // instant (an establishment failing at once would otherwise be retried in a loop).
}

/**
 * Removes and returns the oldest claimant (high-priority ones first) that has no establishment of its own under way,
 * counted among the waiters taken out in this step; undefined when every claimant waits on one of its own. Called
 * for a failed establishment whose starter is no claimant, so none of them owns that one. O(claimants).
 */
function takeClaimantWithoutOwn<C extends PoolConnection>(s: PoolState<C>): Waiter<C> | undefined {
  const claimant = s.claimants.toArray().find((w) => pendingStartedBy(s, w) === undefined);
  return claimant !== undefined && s.claimants.take(claimant) ? claimant : undefined;
}

/** The establishment under way that `w` started and still owns (see ConnectionRecord.starter), if any. O(1). */
function pendingStartedBy<C>(s: PoolState<C>, w: Waiter<C>): ConnectionRecord<C> | undefined {
  const rec = s.startedEstablishments.get(w);
  return rec !== undefined && rec.state === 'pending' && rec.starter === w ? rec : undefined;
}

/**
 * The connection `starter` started went to `claimant`, an older checkout (each connection established goes to the
 * oldest claimant), so `starter`, still waiting, now waits on the claim `claimant` held. When that was an establishment
 * `claimant` started, `starter` takes it over as its own; otherwise (a background populate, or one whose claimant
 * left) `starter` waits on an establishment it did not start, and waitQueueTimeoutMS applies to it again, from when
 * it entered the WaitQueue, but never ending before the deadline `claimant` had (CMAP "WaitQueue": members time out
 * aggressively; only the checkout that establishes its connection leaves waitQueueTimeoutMS behind).
 */
function passClaim<C extends PoolConnection>(s: PoolState<C>, starter: Waiter<C>, claimant: Waiter<C>, out: Command<C>[]): void {
  const timeout = s.options.waitQueueTimeoutMS;
  // With waitQueueTimeoutMS or without, `starter` takes over the establishment `claimant` started, so that its failure
  // is `starter`'s (see establishFailed).
  const own = pendingStartedBy(s, claimant);
  if (own !== undefined) {
    own.starter = starter;
    s.startedEstablishments.set(starter, own);
    return;
  }
  if (timeout === 0) return; // no deadlines to keep
  const deadline = Math.max(claimant.deadline ?? -Infinity, starter.startedAt! + timeout);
  starter.deadline = deadline;
  if (s.waitTimerAt === undefined || s.waitTimerAt > deadline) armTimer(s, 'waitQueue', deadline, out);
  else if (waitTimerLost(s)) renewWaitTimer(s, out);
}

function endPending<C>(s: PoolState<C>, rec: ConnectionRecord<C>): void {
  s.pendingConnectionCount--;
  if (rec.generation === s.generation) s.claimablePendingCount--;
}

function makeAvailable<C>(s: PoolState<C>, rec: ConnectionRecord<C>): void {
  rec.state = 'available';
  if (s.options.maxIdleTimeMS > 0) rec.availableSince = now(s); // only idleness needs it
  s.available.push(rec);
}

/** Stale: its generation is not the pool's (in load-balanced mode: not its service's). */
function isStale<C>(s: PoolState<C>, rec: ConnectionRecord<C>): boolean {
  if (!s.loadBalanced) return rec.generation !== s.generation;
  return rec.serviceId !== undefined && rec.generation !== s.serviceGenerations.get(rec.serviceId)?.generation;
}

/**
 * Load-balanced mode: the connection counts toward its service (an entry is made for a new one); returns the
 * service's generation, which the connection takes.
 */
function joinService<C>(s: PoolState<C>, rec: ConnectionRecord<C>, serviceId: string): number {
  let service = s.serviceGenerations.get(serviceId);
  if (service === undefined) {
    service = { generation: 0, connectionCount: 0 };
    s.serviceGenerations.set(serviceId, service);
  }
  service.connectionCount++;
  rec.serviceId = serviceId;
  return service.generation;
}

/**
 * Load-balanced mode: the MongoDB handshake of pending connection `id` is done: it joins `serviceId` now, and its
 * generation is that service's at this moment (CMAP "Load Balancer Mode"), kept aside until it is established (its
 * `generation` stays the pool's while pending, for the establishment bookkeeping). Ignored for a connection no longer
 * pending, or one that joined already.
 */
function handshakeDone<C>(s: PoolState<C>, id: number, serviceId: string): void {
  const rec = s.records.get(id);
  if (!s.loadBalanced || rec === undefined || rec.state !== 'pending' || rec.serviceId !== undefined) return;
  (s.handshakeGenerations ??= new Map()).set(id, joinService(s, rec, serviceId));
}

function perishedReason<C extends PoolConnection>(
  s: PoolState<C>,
  rec: ConnectionRecord<C>,
): ConnectionClosedReason | undefined {
  if (isStale(s, rec)) return 'stale';
  const maxIdle = s.options.maxIdleTimeMS;
  if (maxIdle > 0 && now(s) - rec.availableSince >= maxIdle) return 'idle';
  return erroredReason(rec) ?? expiredReason(s, rec);
}

/** `expired` when the connection outlived its lifetime (maxLifeTimeMS); the clock is read only when it has one. */
function expiredReason<C>(s: PoolState<C>, rec: ConnectionRecord<C>): 'expired' | undefined {
  return rec.expiresAt !== Infinity && now(s) >= rec.expiresAt ? 'expired' : undefined;
}

/**
 * When connection `id`, created now, reaches its lifetime: maxLifeTimeMS, minus maxLifeTimeJitterMS × frac(id × φ).
 * The golden-ratio sequence spreads the ends of connections made together evenly over the jitter window (any n of
 * them split it into gaps of at most three sizes), deterministically, so a test on virtual time knows each one.
 */
function lifetimeEnd<C>(s: PoolState<C>, id: number): number {
  const { maxLifeTimeMS, maxLifeTimeJitterMS } = s.options;
  if (maxLifeTimeMS === 0) return Infinity;
  const share = (id * GOLDEN_RATIO) % 1;
  return now(s) + maxLifeTimeMS - maxLifeTimeJitterMS * share;
}

/** φ − 1, the fractional part of the golden ratio. */
const GOLDEN_RATIO = 0.6180339887498949;

function erroredReason<C extends PoolConnection>(rec: ConnectionRecord<C>): 'error' | undefined {
  return rec.connection !== undefined && isErrored(rec.connection) ? 'error' : undefined;
}

/**
 * CMAP "Closing a Connection": mark closed, fix the counts, emit ConnectionClosed, then tear down (with `error` when
 * given). Its `error`, for reason `error`: `error` when given, else the one the connection says made it errored.
 */
function closeRecord<C extends PoolConnection>(
  s: PoolState<C>,
  rec: ConnectionRecord<C>,
  reason: ConnectionClosedReason,
  out: Command<C>[],
  error?: Error,
): void {
  const was = rec.state;
  rec.state = 'closed';
  if (was === 'available') s.available.remove(rec);
  if (was === 'pending') {
    endPending(s, rec);
    s.handshakeGenerations?.delete(rec.id);
    out.push({ type: 'abort', id: rec.id });
  }
  if (rec.serviceId !== undefined) {
    const service = s.serviceGenerations.get(rec.serviceId)!;
    if (--service.connectionCount === 0) s.serviceGenerations.delete(rec.serviceId);
  }
  if (s.observed) {
    const time = now(s);
    // The event carries an error for reason `error` only (a busy connection checked in to a cleared or closed pool is
    // torn down with one, yet closed stale or poolClosed).
    const shown = reason !== 'error' ? undefined : (error ?? (rec.connection !== undefined ? errorOf(rec.connection) : undefined));
    emit(
      out,
      shown === undefined
        ? { type: 'ConnectionClosed', address: s.address, time, connectionId: rec.id, reason }
        : { type: 'ConnectionClosed', address: s.address, time, connectionId: rec.id, reason, error: shown },
    );
  }
  // Torn down with the error it is closed for (a check-in of a busy connection: its request in flight fails with it).
  if (rec.connection !== undefined) out.push({ type: 'destroy', connection: rec.connection, error });
  // Last: should anything above throw (a fault of the pool), the record is still there for the teardown to close.
  s.records.delete(rec.id);
  if (s.state === 'closed' && s.records.size === 0) disarmLeakDetection(s, out);
}

/**
 * A closed pool whose last connection is closed has no checkout left to watch: leak detection's timer goes with it,
 * so no timer of the pool outlives it (with a scheduler whose timers keep the process alive, say).
 */
function disarmLeakDetection<C>(s: PoolState<C>, out: Command<C>[]): void {
  if (s.leakTimerAt === undefined) return;
  s.leakTimerAt = undefined;
  out.push({ type: 'disarm', timer: 'leakDetection' });
}

// ---------------------------------------------------------------------------------------------------------------
// Pool life cycle: ready, clear, close, background runs

function ready<C extends PoolConnection>(s: PoolState<C>, out: Command<C>[]): void {
  if (s.state !== 'paused') return; // already ready (no event), or closed (cannot be readied)
  s.state = 'ready';
  s.everReady = true;
  if (s.observed) emit(out, { type: 'ConnectionPoolReady', address: s.address, time: now(s) });
  // The Ready event is committed before any background creation, so no observer sees one before it.
  backgroundRun(s, out);
}

function clear<C extends PoolConnection>(
  s: PoolState<C>,
  interruptInUseConnections: boolean,
  cause: unknown,
  out: Command<C>[],
): void {
  if (s.state === 'closed') return;
  // What the pool held as the clear came, for the errors of the checkouts it evicts from the WaitQueue.
  const held = waitingCheckOutCount(s) > 0 ? holdings(s) : undefined;
  const clearedGeneration = s.generation;
  s.generation++;
  s.claimablePendingCount = 0;
  s.clearCause = cause;
  const wasReady = s.state === 'ready';
  s.state = 'paused';
  if (wasReady && s.observed) emit(out, { type: 'ConnectionPoolCleared', address: s.address, time: now(s), interruptInUseConnections });
  publishClear(s, s.generation, undefined, interruptInUseConnections, cause, out);

  if (interruptInUseConnections) {
    const interrupted = PoolClearedError.interrupted(s.address, cause);
    for (const rec of [...s.records.values()]) {
      if (rec.generation > clearedGeneration) continue;
      if (rec.state === 'pending') closeRecord(s, rec, 'stale', out);
      else if (rec.state === 'in use') {
        // One that failed by itself already keeps its own error as the reason it closes (see checkIn).
        if (erroredReason(rec) === undefined) rec.interrupted = true;
        out.push({ type: 'destroy', connection: rec.connection!, error: interrupted });
      }
    }
  }
  // The WaitQueue is cleared eagerly, claimants first (they are the oldest), so every waiter can retry at once.
  if (held !== undefined) {
    const error = pausedError(s, held);
    for (const w of s.claimants.drain()) failWaiter(s, w, 'connectionError', error, out);
    for (const w of s.waitQueue.drain()) failWaiter(s, w, 'connectionError', error, out);
  }
  if (s.waitTimerAt !== undefined) {
    s.waitTimerAt = undefined;
    out.push({ type: 'disarm', timer: 'waitQueue' });
  }
  // The next Background Thread Run is scheduled at once: it closes the now-stale available connections.
  if (runsEnabled(s)) out.push({ type: 'arm', timer: 'background', delay: 0 });
}

/**
 * Load-balanced clear: bumps one service's generation (its connections become stale) and emits
 * ConnectionPoolCleared with the serviceId. Neither pauses the pool nor touches the WaitQueue.
 */
function clearService<C extends PoolConnection>(s: PoolState<C>, serviceId: string, out: Command<C>[], cause?: unknown): void {
  if (s.state === 'closed') return;
  const service = s.serviceGenerations.get(serviceId);
  if (service !== undefined) service.generation++;
  if (s.observed) {
    emit(out, { type: 'ConnectionPoolCleared', address: s.address, time: now(s), interruptInUseConnections: false, serviceId });
  }
  publishClear(s, service?.generation ?? 0, serviceId, false, cause, out);
  if (runsEnabled(s)) out.push({ type: 'arm', timer: 'background', delay: 0 });
}

function close<C extends PoolConnection>(s: PoolState<C>, out: Command<C>[]): void {
  if (s.state === 'closed') return;
  s.state = 'closed';
  for (let rec = s.available.head; rec !== undefined; rec = s.available.head) closeRecord(s, rec, 'poolClosed', out);
  for (const rec of [...s.records.values()]) {
    if (rec.state === 'pending') closeRecord(s, rec, 'poolClosed', out);
  }
  if (s.observed) emit(out, { type: 'ConnectionPoolClosed', address: s.address, time: now(s) });
  const error = new PoolClosedError(s.address);
  for (const w of s.claimants.drain()) failWaiter(s, w, 'poolClosed', error, out);
  for (const w of s.waitQueue.drain()) failWaiter(s, w, 'poolClosed', error, out);
  s.waitTimerAt = undefined;
  out.push({ type: 'disarm', timer: 'waitQueue' }, { type: 'disarm', timer: 'background' });
  if (s.draining) out.push({ type: 'disarm', timer: 'drain' });
  if (s.records.size === 0) disarmLeakDetection(s, out);
}

/**
 * `drain()`: new checkouts fail with PoolClosedError from now on; waiting ones are still served (by check-ins, and
 * establishments they start); the pool closes as CMAP says once nothing waits and nothing is in use (checked after
 * every action), or when `timeoutMS` passes.
 */
function drain<C extends PoolConnection>(s: PoolState<C>, timeoutMS: number, out: Command<C>[]): void {
  if (s.state === 'closed' || s.draining) return;
  s.draining = true;
  if (s.observed) emit(out, { type: 'ConnectionPoolDraining', extension: 'drain', address: s.address, time: now(s), timeoutMS });
  if (timeoutMS > 0 && !isDrained(s)) out.push({ type: 'arm', timer: 'drain', delay: timeoutMS });
}

/** Nothing waits and nothing is in use. */
function isDrained<C>(s: PoolState<C>): boolean {
  return waitingCheckOutCount(s) === 0 && inUseConnectionCount(s) === 0;
}

/** A drain's deadline passed: in-use connections are interrupted, then the pool closes (failing what still waits). */
function drainTimeout<C extends PoolConnection>(s: PoolState<C>, out: Command<C>[]): void {
  if (s.state === 'closed') return;
  const interrupted = new PoolClosedError(s.address);
  for (let rec = s.inUse.head; rec !== undefined; rec = rec.next) out.push({ type: 'destroy', connection: rec.connection!, error: interrupted });
  close(s, out);
}

/**
 * A Background Thread Run: close perished available connections, populate to minPoolSize (without waiting for
 * establishment slots), serve waiters the closing made room for, and schedule the next run.
 */
function backgroundRun<C extends PoolConnection>(s: PoolState<C>, out: Command<C>[]): void {
  if (s.state === 'closed' || !runsEnabled(s)) return;
  // Expired connections are renewed at most maxConnecting per run, as fast as their replacements can be made.
  let expiring = s.options.maxConnecting;
  for (let rec = s.available.head; rec !== undefined; ) {
    const next = rec.next;
    const perished = perishedReason(s, rec);
    if (perished !== undefined && (perished !== 'expired' || expiring-- > 0)) closeRecord(s, rec, perished, out);
    rec = next;
  }
  populate(s, out);
  serveWaiters(s, out);
  out.push({ type: 'arm', timer: 'background', delay: s.options.backgroundThreadIntervalMS });
}

/** Starts establishments (up to maxConnecting at once) until the pool holds minPoolSize connections. */
function populate<C extends PoolConnection>(s: PoolState<C>, out: Command<C>[]): void {
  if (s.state !== 'ready' || s.draining || !runsEnabled(s)) return;
  while (isBelowMinPoolSize(s) && canStartEstablishment(s)) createConnection(s, out);
}

function runsEnabled<C>(s: PoolState<C>): boolean {
  return s.options.backgroundThreadIntervalMS > 0;
}

/**
 * ms since the waiter's checkout started; undefined when it started before anyone observed (its start was not timed).
 */
function sinceStart<C>(s: PoolState<C>, w: Waiter<C>): number | undefined {
  return w.startedAt === undefined ? undefined : now(s) - w.startedAt;
}

function pausedError<C>(s: PoolState<C>, held?: PoolHoldings): PoolClearedError {
  return s.everReady ? PoolClearedError.cleared(s.address, s.clearCause, held) : PoolClearedError.notReady(s.address);
}

/** A clear took effect: its message on `rxcmap:pool:clear`, when that channel has subscribers. */
function publishClear<C>(
  s: PoolState<C>,
  generation: number,
  serviceId: string | undefined,
  interruptInUseConnections: boolean,
  cause: unknown,
  out: Command<C>[],
): void {
  if (!clearChannel.hasSubscribers) return;
  const { address, serverAddress, serverPort, pool } = s.server;
  const message = { address, serverAddress, serverPort, pool, generation, serviceId, interruptInUseConnections, cause };
  out.push({ type: 'publish', channel: clearChannel, message });
}

/**
 * Queues an event, built once at its call site as one literal (no spread, no copy). Call sites check `s.observed`
 * first, so nothing is built when nobody observes. Events are shared by every subscriber: typed readonly, not frozen.
 */
function emit<C>(out: Command<C>[], event: ConnectionPoolEvent): void {
  out.push({ type: 'emit', event });
}

/** The clock, read at most once per step: every event and duration of one action shares the same time (ms). */
function now<C>(s: PoolState<C>): number {
  if (Number.isNaN(s.stepTime)) s.stepTime = s.now();
  return s.stepTime;
}
