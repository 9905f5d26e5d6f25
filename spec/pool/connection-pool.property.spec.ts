/**
 * Property-based test of the whole pool (ConnectionPoolCore: its input, scan(reduce), command runner and both
 * checkout front ends) on virtual time. A random scenario (options, establishment timing and failures) and a long
 * random script of steps (checkouts through every front end, cancellations, check-ins, duplicate and late check-ins,
 * errored connections, clear, ready, close, time passing) are played against a real pool; after every step the pool is
 * judged from the outside only (snapshot(), events$, state$, and what each caller received) against the CMAP spec:
 *
 * - counts: total = pending + available + in use, as the events tell it and as snapshot() reports it; total <=
 *   maxPoolSize (when > 0) and pending <= maxConnecting at every committed event; in use = connections callers hold;
 * - checkouts: each settles at most once; ConnectionCheckOutStarted = ConnectionCheckedOut + ConnectionCheckOutFailed
 *   + waitQueueLength; every caller's connection has its ConnectionCheckedOut, every caller's failure its
 *   ConnectionCheckOutFailed (same error), every CheckOutCancelledError a ConnectionCheckOutFailed (cancelled) or
 *   no ConnectionCheckOutStarted at all, every unsubscribe one of those or a ConnectionCheckedOut whose connection
 *   the pool checked back in for it; FIFO service; no wait longer than waitQueueTimeoutMS (plus the establishment
 *   it claimed); no checkout waits while a connection is available;
 * - connections: never held by two callers; never handed out closed, destroyed, errored, stale or idle; ids in
 *   creation order; each goes Created → (Ready → (CheckedOut → CheckedIn)* → Closed | Closed); check-ins from a
 *   checkout that no longer holds the connection (duplicates, scoped forms ending after an early check-in) change
 *   nothing, and one for a connection nobody holds throws ConnectionCheckInError;
 * - pool life cycle: paused → ready → (cleared) paused → … → closed, as events$ and snapshot() say; clear fails every
 *   waiter with PoolClearedError and (interruptInUseConnections) interrupts in-use connections with a retryable
 *   PoolClearedError; close fails every waiter with PoolClosedError;
 * - progress and liveness: the pool never starts establishments endlessly at one instant; once it is ready and every
 *   connection is returned, every checkout settles within a time bound (and a Background Thread keeps minPoolSize);
 *   once closed and everything is returned, every connection the factory made is destroyed, the pool is empty and
 *   state$ completes.
 *
 * The opt-in extensions are judged the same way, when a scenario turns them on:
 *
 * - maxWaitQueueSize: the WaitQueue proper (waiting checkouts minus claimants; the claimants are as many as the
 *   current-generation establishments under way, or every waiting checkout when fewer wait) never exceeds it, and a
 *   checkout fails with WaitQueueFullError (reason `waitQueueFull`) only when it was full;
 * - priority: FIFO within each priority; a normal checkout is never served while a high-priority one that entered
 *   before that moment waits, except by a connection established that instant for an establishment it may have
 *   claimed, and then only while no high-priority checkout that entered before it waits;
 * - maxLifeTimeMS: no connection is checked out at or after its expiry (ConnectionCreated time + maxLifeTimeMS −
 *   maxLifeTimeJitterMS × frac(id × φ)); ConnectionClosed(expired) only for a connection past its expiry;
 *   with a Background Thread, an expired connection does not stay available for more runs than it takes to close
 *   maxConnecting of them per run;
 * - leakDetectionThresholdMS: ConnectionLeakSuspected once per checkout, only for one held at least the threshold,
 *   and for every one held that long; ConnectionLeakSuspectCheckedIn right after the ConnectionCheckedIn of such a
 *   checkout, and only then;
 * - a checkout's own timeoutMS: it settles by its deadline; its WaitQueueTimeoutError carries that timeoutMS, after
 *   exactly that long;
 * - drain(): after ConnectionPoolDraining every new checkout fails with PoolClosedError; the pool closes as soon as
 *   nothing waits and nothing is in use, and by its deadline (interrupting in-use connections with PoolClosedError);
 *   drain()'s Promise resolves once the pool is closed, and not before;
 * - warmUp(): resolves only with a ready snapshot holding minPoolSize established connections, rejects only with
 *   PoolClosedError (closed pool), InvalidOptionError (minPoolSize without a Background Thread) or an establishment's
 *   error, and does not stay pending once the pool is warm or closed.
 *
 * `npm test` runs a fixed seed. PROPERTY_SEED, PROPERTY_RUNS and PROPERTY_MAX_STEPS run other seeds, more runs, or
 * longer scripts; PROPERTY_STATS=1 prints how often each situation of interest came up; PROPERTY_STACK_TRACE_LIMIT
 * sets Error.stackTraceLimit while scripts run (default 0).
 *
 * Source: CMAP spec, "Connection Pool Behaviors" (Checking Out, Checking In, Clearing, Closing, Marking Ready),
 * "WaitQueue", "Connection Pool Monitoring"; the extensions: see PoolExtensionOptions, CheckOutOptions,
 * ConnectionPoolCore.drain and ConnectionPoolCore.warmUp.
 */
import { expect } from 'chai';
import * as fc from 'fast-check';
import { config, Observable, switchMap, timer, type Subscription } from 'rxjs';
import {
  CheckOutCancelledError,
  CmapError,
  ConnectionCheckInError,
  ErrorLabel,
  InvalidOptionError,
  PoolClearedError,
  PoolClosedError,
  WaitQueueFullError,
  WaitQueueTimeoutError,
} from '../../lib/errors';
import type { ConnectionCheckOutFailedReason, ConnectionPoolEvent } from '../../lib/events';
import type { CheckOutOptions } from '../../lib/pool/check-out';
import { ConnectionPoolCore, type PoolSnapshot } from '../../lib/pool/connection-pool-core';
import type { ConnectionFactory } from '../../lib/pool/contract';
import type { ConnectionPoolState } from '../../lib/pool/state';
import { MockConnection, MockConnectionFactory, VirtualClock } from '../../lib/testing';
import { envInt, pick } from '../support/property';
import { describeStep, scenarioArb, stepsArb, type CheckOutStepOptions, type Scenario, type Signal, type Step } from './property-steps';

const SEED = envInt('PROPERTY_SEED', 424242);
const RUNS = envInt('PROPERTY_RUNS', 1000);
const MAX_STEPS = envInt('PROPERTY_MAX_STEPS', 400);
/**
 * Error.stackTraceLimit while scripts run: the pool makes an error for every failed checkout (tens of thousands per
 * `npm test`), and capturing their stacks, which nothing here reads, was most of the test's time.
 * PROPERTY_STACK_TRACE_LIMIT=10 restores them to debug a failure the harness itself threw.
 */
const STACK_TRACE_LIMIT = envInt('PROPERTY_STACK_TRACE_LIMIT', 0);
/** PROPERTY_STATS=1 prints how often each interesting situation came up, over all runs. */
const STATS = process.env.PROPERTY_STATS !== undefined && process.env.PROPERTY_STATS !== '';
const coverage = new Map<string, number>();
function count(what: string, n = 1): void {
  if (STATS && n > 0) coverage.set(what, (coverage.get(what) ?? 0) + n);
}
/**
 * More establishments than any script can legitimately start at one virtual instant (each step starts at most a few;
 * a script has at most a few hundred steps).
 */
const HOT_LOOP_LIMIT = 5_000;
/** The longest body a scoped checkout runs (see property-steps). */
const MAX_BODY_MS = 60;
/**
 * frac(φ), as the documented lifetime formula uses it: connection n expires maxLifeTimeJitterMS × frac(n × φ) before
 * maxLifeTimeMS (frac(n × φ) = frac(n × frac(φ)) for an integer n).
 */
const GOLDEN_RATIO_FRACTION = 0.6180339887498949;


/** Lets every pending promise reaction run (there are no real timers: time is virtual). */
function flush(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

type Form = 'obs' | 'promise' | 'with' | 'with$';

/** One checkout, as its caller sees it. */
interface Request {
  readonly n: number;
  readonly form: Form;
  /** Whether its checkout reaches the pool (false: its signal was aborted before it started). */
  readonly entered: boolean;
  /** `priority: 'high'`. */
  readonly high: boolean;
  /** Its own deadline, in ms (0: none). */
  readonly timeoutMS: number;
  /** Its position among ConnectionCheckOutStarted events; -1 until seen. */
  ordinal: number;
  /** The position of its ConnectionCheckOutStarted in events$; Infinity until seen. */
  startSeq: number;
  /**
   * The position in events$ of its outcome (its connection's ConnectionCheckedOut, or the ConnectionCheckOutFailed
   * carrying its error), or, when its caller left without an error, of the next event after it left (the pool decides
   * no earlier); Infinity while unknown.
   */
  endSeq: number;
  /** Its connection was checked out right as it was established (its ConnectionReady just before). */
  fresh: boolean;
  /** The pool was draining (ConnectionPoolDraining seen) when it entered. */
  drainingAtEnter: boolean;
  enteredAt: number;
  poolStateAtEnter: ConnectionPoolState | undefined;
  /** The connection it received (for the scoped forms: the one its body was given). */
  connection: MockConnection | undefined;
  /** The error its checkout failed with, other than a cancellation. */
  error: unknown;
  /** The caller left first: unsubscribed, or got CheckOutCancelledError. */
  cancelled: boolean;
  /** It left by unsubscribing (it got no error). */
  unsubscribed: boolean;
  /** Delivery and failure callbacks received. */
  settlements: number;
  /** It holds `connection` now. */
  holding: boolean;
  /** Scoped forms: the body is running. */
  inBody: boolean;
  controller: AbortController | undefined;
  sub: Subscription | undefined;
}

const isSettled = (r: Request): boolean => r.connection !== undefined || r.error !== undefined || r.cancelled;

/** One connection, as events$ tells it. */
interface Life {
  readonly id: number;
  state: 'pending' | 'available' | 'in use' | 'closed';
  /** Time it last became available. */
  since: number;
  /** The caller its current checkout went to (undefined until the caller has it). */
  owner: Request | undefined;
  /** The pool generation when it was checked out. */
  generationAtCheckOut: number;
  /** maxLifeTimeMS: the time it expires, by the documented formula (Infinity without a lifetime). */
  expiresAt: number;
  /** Its current checkout: when (ConnectionCheckedOut time) and where in events$ it was committed. */
  checkedOutTime: number;
  checkedOutSeq: number;
  /** Its current checkout came right as it was established (ConnectionReady just before ConnectionCheckedOut). */
  fresh: boolean;
  /** Its current checkout was reported as a suspected leak. */
  leakSuspected: boolean;
}

/** One warmUp() call: whether it settled, and the error it must reject with, if any. */
interface WarmUp {
  readonly n: number;
  settled: boolean;
  /**
   * The error of the first establishment under way while the call waited (started before it or since) that failed
   * (ConnectionClosed(error) of a pending connection).
   */
  failWith: unknown;
}

class PropertyFailure extends Error {}

/** Plays one scenario and one script against a real pool, checking the pool after every step. */
class Run {
  readonly clock = new VirtualClock();
  readonly mock: MockConnectionFactory;
  readonly pool: ConnectionPoolCore<MockConnection>;
  readonly maxEstablishMS: number;

  private finalPhase = false;
  private establishCalls = 0;
  private readonly descriptorGeneration = new Map<number, number>();
  private readonly establishmentErrors = new Map<number, Error>();
  private readonly knownEstablishmentErrors = new Set<Error>();
  private readonly createdById = new Map<number, MockConnection>();
  private instant = -1;
  private establishedAtInstant = 0;

  private readonly requests: Request[] = [];
  private readonly entering: Request[] = [];
  private readonly holders = new Map<number, Request>();
  private readonly returned: MockConnection[] = [];

  // What events$ said.
  private readonly lives = new Map<number, Life>();
  private readonly counts = { pending: 0, available: 0, 'in use': 0 };
  private poolState: ConnectionPoolState = 'paused';
  private nextConnectionId = 1;
  private started = 0;
  private checkedOut = 0;
  private readonly failed: Record<ConnectionCheckOutFailedReason, number> = { poolClosed: 0, timeout: 0, connectionError: 0, cancelled: 0, waitQueueFull: 0 };
  /** Every ConnectionCheckOutFailed error: the position in events$ of the first event carrying it, and its time. */
  private readonly failures = new Map<unknown, { readonly seq: number; readonly time: number }>();
  /** Checkouts the pool committed (ConnectionCheckedOut) whose caller had left: it checked the connection back in. */
  private abandoned = 0;
  private readonly failedErrors = new Map<unknown, number>();
  private readonly callerErrors = new Map<unknown, number>();
  /** Per priority: the latest-entered checkout (ordinal) that got a connection. */
  private readonly maxDeliveredOrdinal = { high: -1, normal: -1 };
  /** Checkouts that got a connection since the last quiescent check (judged then for priority). */
  private readonly deliveredSinceCheck: Request[] = [];
  /** Events seen so far (the position of the next one in events$), and the last one. */
  private seq = 0;
  private lastEvent: ConnectionPoolEvent | undefined;
  /** The most connections the pool held at once (for the lifetime liveness bound). */
  private maxTotal = 0;
  /** Positions in events$ of ConnectionClosed(expired) for connections closed as they were established. */
  private readonly expiredAtEstablishment: number[] = [];
  /** A suspected checkout's connection was just checked in: the next event must be its ConnectionLeakSuspectCheckedIn. */
  private leakCheckInDue: number | undefined;
  /** drain(): ConnectionPoolDraining seen, with its time and timeoutMS; each call's Promise, resolved or not. */
  private draining = false;
  private drainStartedAt = NaN;
  private drainTimeoutMS = 0;
  private drainEvents = 0;
  private readonly drains: { resolved: boolean }[] = [];
  private readonly warmUps: WarmUp[] = [];
  private readyEvents = 0;
  private readonly clearedEvents: boolean[] = [];
  private closedEvents = 0;
  private createdEvents = 0;

  private cancelOnCheckedOut = false;
  private sawFull = false;
  private sawMaxConnecting = false;
  private stateCompleted = false;
  private readonly violations: string[] = [];
  private where = 'setup';

  constructor(readonly scenario: Scenario) {
    const s = scenario;
    this.maxEstablishMS = s.establishDelayMS + Math.max(...s.jitterMS);
    this.mock = new MockConnectionFactory({
      scheduler: this.clock,
      establishDelayMS: s.establishDelayMS,
      failWith: (d) => (this.finalPhase ? undefined : this.establishmentError(d.id)),
    });
    const factory: ConnectionFactory<MockConnection> = (d) => {
      this.establishCalls++;
      // Progress check: a pool that keeps starting establishments at one instant never lets time move on.
      const now = this.clock.now();
      this.establishedAtInstant = now === this.instant ? this.establishedAtInstant + 1 : 1;
      this.instant = now;
      if (this.establishedAtInstant > HOT_LOOP_LIMIT) {
        this.bad(`no progress: ${HOT_LOOP_LIMIT} establishments started at t=${now} ms without time moving (connection ${d.id}); the factory now fails with an error that clears the pool, to stop it`);
        throw new Error('the test stops a pool that does not make progress');
      }
      this.descriptorGeneration.set(d.id, d.generation);
      const extra = s.jitterMS[(d.id - 1) % s.jitterMS.length];
      return extra === 0 ? this.mock.factory(d) : timer(extra, this.clock).pipe(switchMap(() => this.mock.factory(d)));
    };
    this.pool = new ConnectionPoolCore<MockConnection>({
      address: 'db.example:27017',
      scheduler: this.clock,
      connectionFactory: factory,
      maxPoolSize: s.maxPoolSize,
      minPoolSize: s.minPoolSize,
      maxConnecting: s.maxConnecting,
      waitQueueTimeoutMS: s.waitQueueTimeoutMS,
      maxIdleTimeMS: s.maxIdleTimeMS,
      backgroundThreadIntervalMS: s.backgroundThreadIntervalMS,
      maxWaitQueueSize: s.maxWaitQueueSize,
      maxLifeTimeMS: s.maxLifeTimeMS,
      maxLifeTimeJitterMS: s.maxLifeTimeJitterMS,
      leakDetectionThresholdMS: s.leakDetectionThresholdMS,
    });
    this.pool.events$.subscribe((e) => this.guard(() => this.onEvent(e)));
    this.pool.state$.subscribe({
      next: (snap) => this.guard(() => this.onSnapshot(snap)),
      complete: () => (this.stateCompleted = true),
    });
    if (this.pool.snapshot().state !== 'paused') this.bad('a new pool must be paused');
  }

  // ------------------------------------------------------------------------------------------------------------
  // Playing the script

  async play(steps: readonly Step[]): Promise<void> {
    for (let i = 0; i < steps.length; i++) {
      this.where = `step ${i} ${describeStep(steps[i])}`;
      await this.step(steps[i]);
      this.checkQuiescent();
      this.throwIfViolated(steps, i);
    }
    await this.windDown(steps);
    if (STATS) {
      count('runs');
      count('steps', steps.length);
      count('checkouts', this.requests.length);
      count('delivered', this.requests.filter((r) => r.connection !== undefined).length);
      count('committed, then returned for a caller that left', this.abandoned);
      for (const [reason, n] of Object.entries(this.failed)) count(`failed: ${reason}`, n);
      count('failed: establishment error', [...this.callerErrors.keys()].filter((e) => this.knownEstablishmentErrors.has(e as Error)).length);
      count('connections created', this.createdEvents);
      count('checkouts on a paused pool', this.requests.filter((r) => r.poolStateAtEnter === 'paused').length);
      count('clears (ConnectionPoolCleared)', this.clearedEvents.length);
      count('runs reaching maxPoolSize', this.sawFull ? 1 : 0);
      count('runs reaching maxConnecting', this.sawMaxConnecting ? 1 : 0);
      count('high-priority checkouts', this.requests.filter((r) => r.high && r.entered).length);
      count('checkouts with their own timeoutMS', this.requests.filter((r) => r.timeoutMS > 0 && r.entered).length);
      count('failed: own timeoutMS', this.requests.filter((r) => r.error instanceof WaitQueueTimeoutError && r.error.timeoutMS !== undefined).length);
      count('drains (ConnectionPoolDraining)', this.drainEvents);
      count('warm-ups', this.warmUps.length);
    }
  }

  private async step(st: Step): Promise<void> {
    const pool = this.pool;
    switch (st.k) {
      case 'obs':
        this.checkOutObservable(st.sig, st.inDelivery, st);
        break;
      case 'promise':
        this.checkOutPromise(st.sig, st);
        break;
      case 'with':
        this.withConnection(st.sig, st.bodyMS, st.early, st.throws, st);
        break;
      case 'with$':
        this.withConnection$(st.bodyMS, st.early, st);
        break;
      case 'unsubscribe': {
        const r = pick(
          this.requests.filter((x) => x.sub !== undefined && !x.sub.closed),
          st.i,
        );
        if (r !== undefined) this.unsubscribe(r);
        break;
      }
      case 'abort': {
        const r = pick(
          this.requests.filter((x) => x.controller !== undefined && !x.controller.signal.aborted && !isSettled(x)),
          st.i,
        );
        r?.controller!.abort(new Error(`caller of checkout #${r.n} gave up`));
        break;
      }
      case 'abortOnCheckedOut':
        this.cancelOnCheckedOut = true;
        break;
      case 'checkIn': {
        const r = pick(
          this.requests.filter((x) => x.holding && (x.form === 'obs' || x.form === 'promise')),
          st.i,
        );
        if (r !== undefined) this.checkIn(r);
        break;
      }
      case 'checkInAgain':
        this.checkInAgain(st.i, st.foreign);
        break;
      case 'markErrored': {
        const r = pick(
          this.requests.filter((x) => x.holding),
          st.i,
        );
        if (r !== undefined) r.connection!.errored = true;
        break;
      }
      case 'clear':
        await this.clear(st.interrupt, st.cause);
        return;
      case 'ready': {
        const was = this.poolState;
        const before = this.readyEvents;
        pool.ready();
        await flush();
        const emitted = this.readyEvents - before;
        if (was === 'paused' && (emitted !== 1 || pool.state !== 'ready')) this.bad(`ready() on a paused pool: ${emitted} ConnectionPoolReady, state ${pool.state}`);
        if (was !== 'paused' && emitted !== 0) this.bad(`ready() on a ${was} pool emitted ConnectionPoolReady`);
        return;
      }
      case 'close':
        await this.close();
        return;
      case 'drain':
        await this.drain(st.timeoutMS);
        return;
      case 'warmUp':
        this.warmUp();
        break;
      case 'advance':
        this.clock.advance(st.ms);
        break;
    }
    await flush();
  }

  private newRequest(form: Form, entered: boolean, o: CheckOutStepOptions, controller?: AbortController): Request {
    const r: Request = {
      n: this.requests.length,
      form,
      entered,
      high: o.high,
      timeoutMS: o.timeoutMS,
      ordinal: -1,
      startSeq: Infinity,
      endSeq: Infinity,
      fresh: false,
      drainingAtEnter: false,
      enteredAt: NaN,
      poolStateAtEnter: undefined,
      connection: undefined,
      error: undefined,
      cancelled: false,
      unsubscribed: false,
      settlements: 0,
      holding: false,
      inBody: false,
      controller,
      sub: undefined,
    };
    this.requests.push(r);
    if (entered) this.entering.push(r);
    return r;
  }

  private signal(sig: Signal): AbortController | undefined {
    if (sig === 'none') return undefined;
    const controller = new AbortController();
    if (sig === 'pre') controller.abort(new Error('aborted before the checkout started'));
    return controller;
  }

  /** The options of a checkout: none at all when it has neither a signal, a priority nor a deadline. */
  private options(controller: AbortController | undefined, o: CheckOutStepOptions): CheckOutOptions | undefined {
    if (controller === undefined && !o.high && o.timeoutMS === 0) return undefined;
    return {
      ...(controller === undefined ? {} : { signal: controller.signal }),
      ...(o.high ? { priority: 'high' as const } : {}),
      ...(o.timeoutMS === 0 ? {} : { timeoutMS: o.timeoutMS }),
    };
  }

  private checkOutObservable(sig: Signal, inDelivery: 0 | 1 | 2, o: CheckOutStepOptions): void {
    const controller = this.signal(sig);
    const r = this.newRequest('obs', sig !== 'pre', o, controller);
    let completes = 0;
    r.sub = this.pool.checkOut(this.options(controller, o)).subscribe({
      next: (c) =>
        this.guard(() => {
          this.receive(r, c);
          // Check-ins from inside the delivery: queued behind the step in progress; a second one is a duplicate
          // from a checkout that will no longer hold the connection, and must change nothing.
          for (let k = 0; k < inDelivery; k++) {
            this.release(r);
            try {
              this.pool.checkIn(c);
            } catch (e) {
              this.bad(`check-in #${k + 1} of connection ${c.id} from inside its delivery threw: ${String(e)}`);
            }
          }
        }),
      error: (e) => this.guard(() => this.fail(r, e)),
      complete: () =>
        this.guard(() => {
          if (++completes > 1 || r.connection === undefined) this.bad(`checkout #${r.n} completed without exactly one connection`);
        }),
    });
  }

  private checkOutPromise(sig: Signal, o: CheckOutStepOptions): void {
    const controller = this.signal(sig);
    const r = this.newRequest('promise', sig !== 'pre', o, controller);
    this.pool.checkOut(this.options(controller, o)).then(
      (c) => this.guard(() => this.receive(r, c)),
      (e) => this.guard(() => this.fail(r, e)),
    );
  }

  private withConnection(sig: Signal, bodyMS: number, early: boolean, throws: boolean, o: CheckOutStepOptions): void {
    const controller = this.signal(sig);
    const r = this.newRequest('with', sig !== 'pre', o, controller);
    const bodyError = new Error(`body of checkout #${r.n} failed`);
    const result = this.pool.withConnection(
      (c) => {
        this.guard(() => this.receive(r, c));
        r.inBody = true;
        if (early) this.earlyCheckIn(r, c);
        return new Promise<number>((resolve, reject) => {
          this.clock.schedule(() => {
            r.inBody = false;
            if (early && this.holders.has(c.id)) count('scope ended after its connection went to another checkout');
            this.release(r); // the scope checks the connection in once this settles
            if (throws) reject(bodyError);
            else resolve(c.id);
          }, bodyMS);
        });
      },
      this.options(controller, o),
    );
    result.then(
      (v) =>
        this.guard(() => {
          if (r.connection === undefined || v !== r.connection.id || throws) this.bad(`withConnection #${r.n} resolved to ${v}`);
        }),
      (e) =>
        this.guard(() => {
          if (r.connection === undefined) this.fail(r, e);
          else if (e !== bodyError) this.bad(`withConnection #${r.n} rejected with ${String(e)}, not its body's error`);
        }),
    );
  }

  private withConnection$(bodyMS: number, early: boolean, o: CheckOutStepOptions): void {
    const r = this.newRequest('with$', true, o);
    r.sub = this.pool
      .withConnection$(
        (c) => {
          this.guard(() => this.receive(r, c));
          r.inBody = true;
          if (early) this.earlyCheckIn(r, c);
          return new Observable<number>((subscriber) => {
            const action = this.clock.schedule(() => {
              r.inBody = false;
              if (early && this.holders.has(c.id)) count('scope ended after its connection went to another checkout');
              this.release(r);
              subscriber.next(c.id);
              subscriber.complete();
            }, bodyMS);
            return () => action.unsubscribe();
          });
        },
        this.options(undefined, o),
      )
      .subscribe({ error: (e) => this.guard(() => (r.connection === undefined ? this.fail(r, e) : this.bad(`withConnection$ #${r.n} errored after its body ran: ${String(e)}`))) });
  }

  /** A scoped body checks its connection in itself; the scope's own check-in, later, must then change nothing. */
  private earlyCheckIn(r: Request, c: MockConnection): void {
    this.release(r);
    try {
      this.pool.checkIn(c);
    } catch (e) {
      this.bad(`early check-in of connection ${c.id} by the body of checkout #${r.n} threw: ${String(e)}`);
    }
  }

  private unsubscribe(r: Request): void {
    if (r.inBody) {
      r.inBody = false;
      this.release(r); // withConnection$ checks the connection in on unsubscribe
    } else if (!isSettled(r)) {
      r.cancelled = true;
      r.unsubscribed = true;
      // The pool leaves it waiting until it processes the cancel: not before the next event.
      r.endSeq = Math.min(r.endSeq, this.seq);
    }
    r.sub!.unsubscribe();
  }

  private checkIn(r: Request): void {
    const c = r.connection!;
    this.release(r);
    try {
      this.pool.checkIn(c);
    } catch (e) {
      this.bad(`check-in of connection ${c.id} by its holder, checkout #${r.n}, threw: ${String(e)}`);
    }
    if (!this.returned.includes(c)) this.returned.push(c);
  }

  /** Checks in a connection nobody holds (already checked in), or one this pool never made: must throw. */
  private checkInAgain(i: number, foreign: boolean): void {
    const c = foreign
      ? new MockConnection({ id: 1, generation: this.pool.generation, address: this.pool.address })
      : pick(
          this.returned.filter((x) => !this.holders.has(x.id)),
          i,
        );
    if (c === undefined) return;
    const before = this.pool.snapshot();
    try {
      this.pool.checkIn(c);
      this.bad(`checking in connection ${c.id} ${foreign ? '(not made by this pool)' : 'that nobody holds'} did not throw`);
    } catch (e) {
      count('check-in of a connection nobody holds rejected');
      if (!(e instanceof ConnectionCheckInError)) this.bad(`checking in connection ${c.id} again threw ${String(e)}, not a ConnectionCheckInError`);
    }
    const after = this.pool.snapshot();
    if (JSON.stringify(before) !== JSON.stringify(after)) this.bad('a rejected check-in changed the pool');
  }

  private async clear(interrupt: boolean, withCause: boolean): Promise<void> {
    const cause = withCause ? new Error('heartbeat failed') : undefined;
    const was = this.poolState;
    const generation = this.pool.generation;
    const waiting = this.requests.filter((r) => r.entered && !isSettled(r));
    const held = [...this.holders.values()].map((r) => r.connection!).filter((c) => !c.destroyed);
    const clears = this.clearedEvents.length;
    this.pool.clear({ interruptInUseConnections: interrupt, cause });
    await flush();
    if (was === 'closed') {
      if (this.pool.generation !== generation) this.bad('clear() changed the generation of a closed pool');
      return;
    }
    if (this.pool.generation !== generation + 1) this.bad(`clear(): generation ${generation} → ${this.pool.generation}`);
    // A draining pool closes as soon as nothing waits or is in use, which a clear may bring about.
    if (this.pool.state !== 'paused' && !(this.draining && this.pool.state === 'closed')) this.bad(`clear(): pool is ${this.pool.state}, not paused`);
    const emitted = this.clearedEvents.slice(clears);
    if (was === 'ready' && (emitted.length !== 1 || emitted[0] !== interrupt)) this.bad(`clear() of a ready pool emitted ${JSON.stringify(emitted)}`);
    if (was === 'paused' && emitted.length !== 0) this.bad('clear() of a paused pool emitted ConnectionPoolCleared');
    for (const r of waiting) {
      const e = r.error;
      if (!(e instanceof PoolClearedError) || !e.hasErrorLabel(ErrorLabel.RetryableError) || (cause !== undefined && e.cause !== cause)) {
        this.bad(`checkout #${r.n}, waiting when the pool was cleared, ended with ${describeOutcome(r)}, not a retryable PoolClearedError quoting the cause`);
      }
    }
    for (const c of held) {
      if (interrupt && c.generation <= generation) {
        count('in-use connection interrupted by clear');
        const e = c.destroyError;
        if (!c.destroyed || !(e instanceof PoolClearedError) || !e.hasErrorLabel(ErrorLabel.RetryableError)) {
          this.bad(`in-use connection ${c.id} was not interrupted with a retryable PoolClearedError (destroyed: ${c.destroyed}, ${String(e)})`);
        }
      } else if (c.destroyed) {
        this.bad(`clear() without interruptInUseConnections destroyed in-use connection ${c.id}`);
      }
    }
  }

  private async close(): Promise<void> {
    const waiting = this.requests.filter((r) => r.entered && !isSettled(r));
    const held = [...this.holders.values()].map((r) => r.connection!).filter((c) => !c.destroyed);
    const wasClosed = this.poolState === 'closed';
    const closes = this.closedEvents;
    this.pool.close();
    await flush();
    if (this.pool.state !== 'closed') this.bad('close(): the pool is not closed');
    if (this.closedEvents - closes !== (wasClosed ? 0 : 1)) this.bad(`close() emitted ${this.closedEvents - closes} ConnectionPoolClosed`);
    for (const r of waiting) {
      if (!(r.error instanceof PoolClosedError)) this.bad(`checkout #${r.n}, waiting when the pool closed, ended with ${describeOutcome(r)}, not PoolClosedError`);
    }
    for (const c of held) {
      if (c.destroyed) this.bad(`close() destroyed connection ${c.id} while it was in use`);
    }
    if (this.counts.available + this.counts.pending !== 0) this.bad('close() left available or pending connections');
  }

  private async drain(timeoutMS: number): Promise<void> {
    const was = this.poolState;
    const wasDraining = this.draining;
    const drainEvents = this.drainEvents;
    const d = { resolved: false };
    this.drains.push(d);
    this.pool.drain(timeoutMS === 0 ? undefined : { timeoutMS }).then(
      () =>
        this.guard(() => {
          d.resolved = true;
          if (this.poolState !== 'closed') this.bad(`drain() resolved while the pool is ${this.poolState}`);
        }),
      (e) => this.guard(() => this.bad(`drain() rejected with ${String(e)}`)),
    );
    await flush();
    const emitted = this.drainEvents - drainEvents;
    if (was === 'closed' || wasDraining) {
      if (emitted !== 0) this.bad(`drain() of a ${wasDraining ? 'draining' : 'closed'} pool emitted ConnectionPoolDraining`);
      if (was === 'closed' && !d.resolved) this.bad('drain() of a closed pool did not resolve at once');
    } else if (emitted !== 1 || this.drainTimeoutMS !== timeoutMS) {
      this.bad(`drain(${timeoutMS} ms) emitted ${emitted} ConnectionPoolDraining (timeoutMS ${this.drainTimeoutMS})`);
    }
  }

  /** warmUp(): what it settles with is checked when it settles, and in every quiescent check while it has not. */
  private warmUp(): void {
    const s = this.scenario;
    const w: WarmUp = { n: this.warmUps.length, settled: false, failWith: undefined };
    this.warmUps.push(w);
    this.pool.warmUp().then(
      (snap) =>
        this.guard(() => {
          w.settled = true;
          count('warm-ups resolved');
          const established = snap.totalConnectionCount - snap.pendingConnectionCount;
          if (snap.state !== 'ready' || established < s.minPoolSize) {
            this.bad(`warmUp #${w.n} resolved with a ${snap.state} pool of ${established} established connections (minPoolSize ${s.minPoolSize})`);
          }
        }),
      (e) =>
        this.guard(() => {
          w.settled = true;
          count(`warm-ups rejected: ${(e as Error).name}`);
          // Refused when nothing would fill the pool; else only a closed pool or an establishment's error ends it.
          const refused = s.minPoolSize > 0 && s.backgroundThreadIntervalMS < 0;
          const expected =
            e instanceof InvalidOptionError
              ? refused
              : !refused && (e instanceof PoolClosedError ? this.poolState === 'closed' : this.knownEstablishmentErrors.has(e as Error));
          if (!expected) this.bad(`warmUp #${w.n} rejected with ${String(e)} (pool ${this.poolState}, minPoolSize ${s.minPoolSize}, backgroundThreadIntervalMS ${s.backgroundThreadIntervalMS})`);
          if (w.failWith !== undefined && e !== w.failWith && !(e instanceof PoolClosedError)) {
            this.bad(`warmUp #${w.n} rejected with ${String(e)}, not with the error of the establishment that failed first: ${String(w.failWith)}`);
          }
        }),
    );
  }

  /** Liveness: ready, return everything, let time pass: every checkout settles; then close and drain. */
  private async windDown(steps: readonly Step[]): Promise<void> {
    const s = this.scenario;
    const chunk = this.maxEstablishMS + MAX_BODY_MS + s.waitQueueTimeoutMS + Math.max(0, s.backgroundThreadIntervalMS) + 1;
    this.finalPhase = true; // establishments succeed from now on
    this.cancelOnCheckedOut = false;
    const unsettled = (): Request[] => this.requests.filter((r) => !isSettled(r));
    this.where = 'wind-down: ready, return everything, wait';
    // A round more for each establishment that outlasted its connection's lifetime (another one was made), up to a
    // limit: a lifetime shorter than every establishment would never let a checkout through.
    let rounds = unsettled().length + this.holders.size + 5;
    const maxRounds = rounds + 200;
    this.pool.ready();
    await flush();
    for (let i = 0; i < rounds && (unsettled().length > 0 || this.holders.size > 0); i++) {
      const reestablished = this.expiredAtEstablishment.length;
      this.pool.ready();
      this.returnEverything();
      this.clock.advance(chunk);
      await flush();
      this.checkQuiescent();
      this.throwIfViolated(steps);
      rounds = Math.min(maxRounds, rounds + this.expiredAtEstablishment.length - reestablished);
    }
    const stuck = unsettled();
    if (stuck.length > 0) {
      this.bad(
        `liveness: ${stuck.length} checkout(s) never settled in a ready pool with every connection returned: ` +
          stuck.map((r) => `#${r.n} (${r.form}, entered at ${r.enteredAt} ms)`).join(', '),
      );
    }
    // (With maxIdleTimeMS or maxLifeTimeMS, connections may go idle or expire faster than they are established: no
    // floor then. A draining pool does not populate.)
    if (this.poolState === 'ready' && !this.draining && s.backgroundThreadIntervalMS > 0 && s.minPoolSize > 0 && s.maxIdleTimeMS === 0 && s.maxLifeTimeMS === 0) {
      this.where = 'wind-down: minPoolSize';
      for (let i = 0; i < s.minPoolSize + 2; i++) {
        this.clock.advance(s.backgroundThreadIntervalMS + this.maxEstablishMS + 1);
        await flush();
      }
      const total = this.pool.snapshot().totalConnectionCount;
      if (total < s.minPoolSize) this.bad(`a ready pool with a Background Thread holds ${total} < minPoolSize ${s.minPoolSize} connections`);
    }
    this.throwIfViolated(steps);

    this.where = 'wind-down: close, return everything';
    await this.close();
    for (let i = 0; i < this.holders.size + 5 && this.holders.size > 0; i++) {
      this.returnEverything();
      this.clock.advance(MAX_BODY_MS + 1);
      await flush();
    }
    this.clock.advance(chunk);
    await flush();
    this.checkQuiescent();
    const snap = this.pool.snapshot();
    if (snap.state !== 'closed' || snap.totalConnectionCount !== 0) this.bad(`after close and every check-in: ${JSON.stringify(snap)}`);
    if (this.holders.size > 0) this.bad(`connections still held after close: ${[...this.holders.keys()]}`);
    if (unsettled().length > 0) this.bad(`checkouts unsettled after close: ${unsettled().map((r) => `#${r.n}`)}`);
    if (!this.stateCompleted) this.bad('state$ did not complete once the pool was closed and empty');
    const pendingWarmUps = this.warmUps.filter((w) => !w.settled).map((w) => `#${w.n}`);
    if (pendingWarmUps.length > 0) this.bad(`warmUp() calls still pending after close: ${pendingWarmUps}`);
    if (this.drains.some((d) => !d.resolved)) this.bad('a drain() Promise still pending after close');
    this.syncCreated();
    const alive = this.mock.created.filter((c) => !c.destroyed).map((c) => c.id);
    if (alive.length > 0) this.bad(`connections never destroyed: ${alive}`);
    const open = [...this.lives.values()].filter((l) => l.state !== 'closed').map((l) => l.id);
    if (open.length > 0) this.bad(`connections without ConnectionClosed: ${open}`);
    if (this.createdEvents !== this.establishCalls) this.bad(`${this.createdEvents} ConnectionCreated but ${this.establishCalls} establishments`);
    this.throwIfViolated(steps);
  }

  private returnEverything(): void {
    for (const r of [...this.holders.values()]) {
      if (r.form === 'obs' || r.form === 'promise') this.checkIn(r);
    }
  }

  // ------------------------------------------------------------------------------------------------------------
  // What callers receive

  private receive(r: Request, c: MockConnection): void {
    if (++r.settlements > 1 || r.cancelled) this.bad(`checkout #${r.n} got connection ${c.id} after it had settled (${describeOutcome(r)})`);
    this.syncCreated();
    if (this.createdById.get(c.id) !== c) this.bad(`checkout #${r.n} got connection ${c.id}, which the factory did not make`);
    const life = this.lives.get(c.id);
    if (life === undefined || life.state !== 'in use') {
      this.bad(`checkout #${r.n} got connection ${c.id} with no open ConnectionCheckedOut for it (it is ${life?.state ?? 'unknown'})`);
    } else if (life.owner !== undefined) {
      this.bad(`checkout #${r.n} got connection ${c.id}, whose checkout had already gone to checkout #${life.owner.n}`);
    } else {
      life.owner = r;
      if (c.generation !== life.generationAtCheckOut) this.bad(`checkout #${r.n} got connection ${c.id} of stale generation ${c.generation}`);
    }
    const other = this.holders.get(c.id);
    if (other !== undefined) this.bad(`connection ${c.id} handed to checkout #${r.n} while checkout #${other.n} holds it`);
    // (A drain deadline may interrupt a connection on its way to a Promise caller: virtual time runs its timers
    // without the microtask turns between them that real time would have.)
    const interrupted = this.draining && c.destroyError instanceof PoolClosedError;
    if ((c.destroyed || c.errored) && !interrupted) this.bad(`checkout #${r.n} got connection ${c.id}, which is ${c.destroyed ? 'destroyed' : 'errored'}`);
    r.connection = c;
    r.holding = true;
    this.holders.set(c.id, r);
    const lane = r.high ? 'high' : 'normal';
    this.maxDeliveredOrdinal[lane] = Math.max(this.maxDeliveredOrdinal[lane], r.ordinal);
    if (life !== undefined) {
      r.endSeq = life.checkedOutSeq;
      r.fresh = life.fresh;
    }
    this.deliveredSinceCheck.push(r);
  }

  private fail(r: Request, e: unknown): void {
    if (++r.settlements > 1 || r.cancelled) this.bad(`checkout #${r.n} failed with ${String(e)} after it had settled (${describeOutcome(r)})`);
    r.endSeq = Math.min(r.endSeq, this.failures.get(e)?.seq ?? this.seq);
    if (e instanceof CheckOutCancelledError) {
      r.cancelled = true;
      return;
    }
    const known =
      e instanceof PoolClosedError ||
      e instanceof PoolClearedError ||
      e instanceof WaitQueueTimeoutError ||
      e instanceof WaitQueueFullError ||
      this.knownEstablishmentErrors.has(e as Error);
    if (!known) this.bad(`checkout #${r.n} failed with an unexpected error: ${String(e)}`);
    if (e instanceof WaitQueueTimeoutError && e.timeoutMS !== undefined) {
      // Its own deadline: the timeoutMS it gave, after exactly that long.
      const waited = (this.failures.get(e)?.time ?? NaN) - r.enteredAt;
      if (e.timeoutMS !== r.timeoutMS || waited !== r.timeoutMS) {
        this.bad(`checkout #${r.n} (timeoutMS ${r.timeoutMS}) failed after ${waited} ms with a WaitQueueTimeoutError for timeoutMS ${e.timeoutMS}`);
      }
    }
    r.error = e;
    bump(this.callerErrors, e);
  }

  /** The connection stops being held by `r` (about to be checked in, or the scope ended). */
  private release(r: Request): void {
    if (!r.holding) return;
    r.holding = false;
    if (this.holders.get(r.connection!.id) === r) this.holders.delete(r.connection!.id);
  }

  // ------------------------------------------------------------------------------------------------------------
  // What events$ says (checked at every event: the commit order)

  private onEvent(e: ConnectionPoolEvent): void {
    const s = this.scenario;
    const seq = this.seq++;
    const previous = this.lastEvent;
    this.lastEvent = e;
    if (this.leakCheckInDue !== undefined && e.type !== 'ConnectionLeakSuspectCheckedIn') {
      this.bad(`the ConnectionCheckedIn of connection ${this.leakCheckInDue}, suspected of a leak, is followed by ${e.type}, not ConnectionLeakSuspectCheckedIn`);
      this.leakCheckInDue = undefined;
    }
    switch (e.type) {
      case 'ConnectionPoolCreated':
        if (this.started + this.createdEvents + this.readyEvents > 0) this.bad('ConnectionPoolCreated after other events');
        return;
      case 'ConnectionPoolReady':
        if (this.poolState !== 'paused') this.bad(`ConnectionPoolReady while ${this.poolState}`);
        this.poolState = 'ready';
        this.readyEvents++;
        return;
      case 'ConnectionPoolCleared':
        if (this.poolState !== 'ready') this.bad(`ConnectionPoolCleared while ${this.poolState}`);
        this.poolState = 'paused';
        this.clearedEvents.push(e.interruptInUseConnections);
        return;
      case 'ConnectionPoolDraining':
        if (this.poolState === 'closed' || this.draining) this.bad(`ConnectionPoolDraining while ${this.draining ? 'draining' : 'closed'}`);
        this.draining = true;
        this.drainStartedAt = e.time;
        this.drainTimeoutMS = e.timeoutMS;
        this.drainEvents++;
        return;
      case 'ConnectionPoolClosed':
        if (this.poolState === 'closed') this.bad('ConnectionPoolClosed twice');
        this.poolState = 'closed';
        this.closedEvents++;
        if (this.draining && this.drainTimeoutMS > 0 && e.time >= this.drainStartedAt + this.drainTimeoutMS) {
          // The drain's deadline: in-use connections were interrupted (destroyed with PoolClosedError) first, unless a
          // clear had interrupted them already (a connection keeps its first teardown's error).
          count('drain deadlines reached');
          for (const life of this.lives.values()) {
            if (life.state !== 'in use') continue;
            count('in-use connection interrupted by a drain deadline');
            const c = this.createdById.get(life.id) ?? this.syncCreated().get(life.id);
            if (c === undefined || !c.destroyed || !(c.destroyError instanceof PoolClosedError || c.destroyError instanceof PoolClearedError)) {
              this.bad(`the drain deadline closed the pool, but in-use connection ${life.id} was not interrupted with PoolClosedError (${String(c?.destroyError)})`);
            }
          }
        }
        return;
      case 'ConnectionCreated': {
        if (e.connectionId !== this.nextConnectionId) this.bad(`ConnectionCreated ${e.connectionId}, expected id ${this.nextConnectionId}`);
        this.nextConnectionId = e.connectionId + 1;
        if (this.poolState !== 'ready') this.bad(`ConnectionCreated ${e.connectionId} while the pool is ${this.poolState}`);
        // A draining pool does not populate: it establishes only for the checkouts that still wait.
        if (this.draining && this.waitingByEvents() === 0) this.bad(`ConnectionCreated ${e.connectionId} while draining, with no checkout waiting`);
        const lifetime = this.pool.options.maxLifeTimeMS;
        const expiresAt = lifetime === 0 ? Infinity : e.time + lifetime - this.pool.options.maxLifeTimeJitterMS * ((e.connectionId * GOLDEN_RATIO_FRACTION) % 1);
        this.lives.set(e.connectionId, {
          id: e.connectionId,
          state: 'pending',
          since: e.time,
          owner: undefined,
          generationAtCheckOut: -1,
          expiresAt,
          checkedOutTime: NaN,
          checkedOutSeq: -1,
          fresh: false,
          leakSuspected: false,
        });
        this.counts.pending++;
        this.createdEvents++;
        const total = this.counts.pending + this.counts.available + this.counts['in use'];
        this.maxTotal = Math.max(this.maxTotal, total);
        if (total === s.maxPoolSize) this.sawFull = true;
        if (this.counts.pending === s.maxConnecting) this.sawMaxConnecting = true;
        if (s.maxPoolSize > 0 && total > s.maxPoolSize) this.bad(`ConnectionCreated ${e.connectionId}: ${total} connections > maxPoolSize ${s.maxPoolSize}`);
        if (this.counts.pending > s.maxConnecting) this.bad(`ConnectionCreated ${e.connectionId}: ${this.counts.pending} pending > maxConnecting ${s.maxConnecting}`);
        return;
      }
      case 'ConnectionReady': {
        const life = this.move(e.connectionId, ['pending'], 'available', e.type);
        if (life) life.since = e.time;
        return;
      }
      case 'ConnectionClosed': {
        const was = this.lives.get(e.connectionId)?.state;
        const life = this.move(e.connectionId, ['pending', 'available'], 'closed', `${e.type}(${e.reason})`);
        if (!life) return;
        const c = this.createdById.get(e.connectionId) ?? this.syncCreated().get(e.connectionId);
        if (e.reason === 'error') {
          if (was === 'pending' && e.error !== this.establishmentErrors.get(e.connectionId)) this.bad(`ConnectionClosed(error) ${e.connectionId} does not carry its establishment error`);
          // warmUp(): an establishment under way while the call waits (started before it or since) failed, so the call
          // rejects with its error.
          if (was === 'pending') for (const w of this.warmUps) if (!w.settled) w.failWith ??= e.error;
          if (was === 'available' && c?.errored !== true) this.bad(`ConnectionClosed(error) ${e.connectionId}: the connection is not errored`);
        } else if (e.reason === 'stale') {
          const g = c?.generation ?? this.descriptorGeneration.get(e.connectionId);
          if (g === undefined || g >= this.pool.generation) this.bad(`ConnectionClosed(stale) ${e.connectionId} of generation ${g}, pool generation ${this.pool.generation}`);
        } else if (e.reason === 'idle') {
          if (was !== 'available' || s.maxIdleTimeMS === 0 || e.time - life.since < s.maxIdleTimeMS) this.bad(`ConnectionClosed(idle) ${e.connectionId} after ${e.time - life.since} ms available`);
        } else if (e.reason === 'expired') {
          count('closed: expired');
          // (Available, or pending: just established, past its lifetime.)
          if (was === 'in use' || !(e.time >= life.expiresAt)) this.bad(`ConnectionClosed(expired) ${e.connectionId} (${was}) at t=${e.time} ms, but it expires at ${life.expiresAt} ms`);
          if (was === 'pending') this.expiredAtEstablishment.push(seq);
        } else if (this.pool.state !== 'closed') {
          // (close() closes connections before it emits ConnectionPoolClosed: CMAP "Closing a Connection Pool")
          this.bad(`ConnectionClosed(poolClosed) ${e.connectionId} while the pool is ${this.pool.state}`);
        }
        return;
      }
      case 'ConnectionCheckOutStarted': {
        const r = this.entering.shift();
        if (r === undefined) {
          this.bad('ConnectionCheckOutStarted for no checkout that entered the pool');
          return;
        }
        r.ordinal = this.started++;
        r.startSeq = seq;
        r.enteredAt = e.time;
        r.poolStateAtEnter = this.poolState;
        r.drainingAtEnter = this.draining;
        return;
      }
      case 'ConnectionCheckedOut': {
        const life = this.move(e.connectionId, ['available'], 'in use', e.type);
        this.checkedOut++;
        if (this.poolState !== 'ready') this.bad(`ConnectionCheckedOut ${e.connectionId} while the pool is ${this.poolState}`);
        if (life) {
          const c = this.createdById.get(e.connectionId) ?? this.syncCreated().get(e.connectionId);
          if (c === undefined || c.destroyed || c.errored) this.bad(`ConnectionCheckedOut ${e.connectionId}: connection ${c === undefined ? 'unknown' : c.destroyed ? 'destroyed' : 'errored'}`);
          if (c !== undefined && c.generation !== this.pool.generation) this.bad(`ConnectionCheckedOut ${e.connectionId} of stale generation ${c.generation} (pool: ${this.pool.generation})`);
          if (s.maxIdleTimeMS > 0 && e.time - life.since > s.maxIdleTimeMS) this.bad(`ConnectionCheckedOut ${e.connectionId}, idle for ${e.time - life.since} ms > maxIdleTimeMS`);
          life.fresh = previous?.type === 'ConnectionReady' && previous.connectionId === e.connectionId;
          // (A connection whose establishment outlasted its lifetime goes, once, to the checkout that waited for it.)
          if (e.time >= life.expiresAt && !life.fresh) {
            this.bad(`ConnectionCheckedOut ${e.connectionId} at t=${e.time} ms, but it expired at ${life.expiresAt} ms (maxLifeTimeMS)`);
          }
          life.owner = undefined;
          life.generationAtCheckOut = this.pool.generation;
          life.checkedOutTime = e.time;
          life.checkedOutSeq = seq;
          life.leakSuspected = false;
        }
        if (this.cancelOnCheckedOut) {
          // The caller leaves after the pool committed the checkout and before the connection reached it.
          this.cancelOnCheckedOut = false;
          this.cancelOldest();
        }
        return;
      }
      case 'ConnectionCheckedIn': {
        const life = this.move(e.connectionId, ['in use'], 'available', e.type);
        if (!life) return;
        life.since = e.time;
        if (life.owner === undefined) this.abandoned++;
        else if (life.owner.holding) this.bad(`ConnectionCheckedIn ${e.connectionId} while checkout #${life.owner.n} still holds it`);
        life.owner = undefined;
        if (life.leakSuspected) this.leakCheckInDue = life.id;
        life.leakSuspected = false;
        return;
      }
      case 'ConnectionCheckOutFailed': {
        this.failed[e.reason]++;
        const err = e.error;
        if (!this.failures.has(err)) this.failures.set(err, { seq, time: e.time });
        let matches: boolean;
        switch (e.reason) {
          case 'cancelled':
            matches = err instanceof CheckOutCancelledError;
            break;
          case 'poolClosed':
            matches = err instanceof PoolClosedError;
            break;
          case 'timeout':
            matches = err instanceof WaitQueueTimeoutError;
            // The pool's waitQueueTimeoutMS, after at least that long (a checkout's own timeoutMS is judged by its caller).
            if (err instanceof WaitQueueTimeoutError && err.timeoutMS === undefined && (s.waitQueueTimeoutMS === 0 || e.duration === undefined || e.duration < s.waitQueueTimeoutMS)) {
              this.bad(`ConnectionCheckOutFailed(timeout) after ${e.duration} ms, waitQueueTimeoutMS ${s.waitQueueTimeoutMS}`);
            }
            break;
          case 'waitQueueFull':
            matches = err instanceof WaitQueueFullError && err.maxWaitQueueSize === s.maxWaitQueueSize;
            if (err instanceof WaitQueueFullError) this.checkWaitQueueFull(err);
            break;
          default:
            matches = err instanceof PoolClearedError || this.knownEstablishmentErrors.has(err as Error);
        }
        if (!matches) this.bad(`ConnectionCheckOutFailed(${e.reason}) with ${String(err)}`);
        if (e.reason !== 'cancelled') bump(this.failedErrors, err);
        return;
      }
      case 'ConnectionLeakSuspected': {
        const life = this.lives.get(e.connectionId);
        const threshold = s.leakDetectionThresholdMS;
        count('leaks suspected');
        if (life === undefined || life.state !== 'in use' || life.leakSuspected || threshold === 0 || e.time - life.checkedOutTime < threshold || e.duration !== e.time - life.checkedOutTime) {
          this.bad(
            `ConnectionLeakSuspected ${e.connectionId} (duration ${e.duration} ms): it is ${life?.state ?? 'unknown'}, checked out at ${life?.checkedOutTime} ms, ` +
              `${life?.leakSuspected ? 'already suspected' : 'not suspected yet'}, leakDetectionThresholdMS ${threshold}`,
          );
        }
        if (life !== undefined) life.leakSuspected = true;
        return;
      }
      case 'ConnectionLeakSuspectCheckedIn': {
        const life = this.lives.get(e.connectionId);
        if (this.leakCheckInDue !== e.connectionId || previous?.type !== 'ConnectionCheckedIn' || previous.connectionId !== e.connectionId) {
          this.bad(`ConnectionLeakSuspectCheckedIn ${e.connectionId} not right after the ConnectionCheckedIn of a checkout suspected of a leak`);
        } else if (life !== undefined && e.duration !== e.time - life.checkedOutTime) {
          this.bad(`ConnectionLeakSuspectCheckedIn ${e.connectionId}: duration ${e.duration} ms, but it was checked out at ${life.checkedOutTime} ms`);
        }
        this.leakCheckInDue = undefined;
        return;
      }
    }
  }

  /** Checkouts the pool holds, as events$ tell it: ConnectionCheckOutStarted not yet followed by an outcome. */
  private waitingByEvents(): number {
    let failed = 0;
    for (const n of Object.values(this.failed)) failed += n;
    return this.started - this.checkedOut - failed;
  }

  /**
   * Current-generation establishments under way (pending, of the pool's generation): only these can be claimed, and
   * after every action either the WaitQueue is empty or each of them has its claimant (a queued head claims one
   * nobody claims). So the claimants are min(waiting, this), and the WaitQueue proper is waiting minus that.
   */
  private claimablePending(): number {
    let n = 0;
    for (const life of this.lives.values()) if (life.state === 'pending' && this.descriptorGeneration.get(life.id) === this.pool.generation) n++;
    return n;
  }

  /**
   * A checkout failed with WaitQueueFullError: it would have waited behind maxWaitQueueSize others in the WaitQueue
   * proper (its own checkOut changed no other claim: nothing was served or established for it), and the error
   * reports the others.
   */
  private checkWaitQueueFull(err: WaitQueueFullError): void {
    const max = this.scenario.maxWaitQueueSize;
    const others = this.waitingByEvents();
    const queued = Math.max(0, others - this.claimablePending());
    count('failed: waitQueueFull');
    if (max === 0 || queued < max) this.bad(`WaitQueueFullError with ${queued} checkout(s) in the WaitQueue (${others} waiting, claimants included), maxWaitQueueSize ${max}`);
    if (err.pool?.waitQueueLength !== others) this.bad(`WaitQueueFullError reports waitQueueLength ${err.pool?.waitQueueLength}, events$ say ${others} wait`);
  }

  /** Cancels the oldest checkout its caller still waits for, from inside the pool's processing. */
  private cancelOldest(): void {
    const r = this.requests
      .filter((x) => x.entered && !isSettled(x) && !x.inBody && ((x.sub !== undefined && !x.sub.closed) || (x.controller !== undefined && !x.controller.signal.aborted)))
      .sort((a, b) => a.ordinal - b.ordinal)[0];
    if (r === undefined) return;
    count('cancelled from inside events$ at ConnectionCheckedOut');
    if (r.sub !== undefined && !r.sub.closed) this.unsubscribe(r);
    else r.controller!.abort(new Error(`caller of checkout #${r.n} left during the delivery`));
  }

  private move(id: number, from: Life['state'][], to: Life['state'], what: string): Life | undefined {
    const life = this.lives.get(id);
    if (life === undefined || !from.includes(life.state)) {
      this.bad(`${what} for connection ${id}, which is ${life?.state ?? 'unknown'} (expected ${from.join(' or ')})`);
      return undefined;
    }
    if (life.state !== 'closed') this.counts[life.state]--;
    life.state = to;
    if (to !== 'closed') this.counts[to]++;
    return life;
  }

  private onSnapshot(snap: PoolSnapshot): void {
    const s = this.scenario;
    if (this.stateCompleted) this.bad('state$ emitted after completing');
    if (snap.totalConnectionCount !== snap.pendingConnectionCount + snap.availableConnectionCount + snap.inUseConnectionCount || snap.inUseConnectionCount < 0) {
      this.bad(`state$ snapshot counts do not add up: ${JSON.stringify(snap)}`);
    }
    if (s.maxPoolSize > 0 && snap.totalConnectionCount > s.maxPoolSize) this.bad(`state$: total ${snap.totalConnectionCount} > maxPoolSize`);
    if (snap.pendingConnectionCount > s.maxConnecting) this.bad(`state$: pending ${snap.pendingConnectionCount} > maxConnecting`);
    // (Claimants, at most one per establishment under way, wait outside the WaitQueue proper.)
    if (s.maxWaitQueueSize > 0 && snap.waitQueueLength > s.maxWaitQueueSize + snap.pendingConnectionCount) {
      this.bad(`state$: waitQueueLength ${snap.waitQueueLength} > maxWaitQueueSize ${s.maxWaitQueueSize} + pending ${snap.pendingConnectionCount}`);
    }
  }

  // ------------------------------------------------------------------------------------------------------------
  // Between steps, with every promise reaction run: the pool, events$ and the callers must agree

  private checkQuiescent(): void {
    const s = this.scenario;
    const snap = this.pool.snapshot();
    const now = this.clock.now();
    const c = this.counts;

    if (this.entering.length > 0) this.bad(`${this.entering.length} checkout(s) never emitted ConnectionCheckOutStarted`);
    if (snap.state !== this.poolState) this.bad(`snapshot().state ${snap.state}, events$ say ${this.poolState}`);
    if (snap.totalConnectionCount !== snap.pendingConnectionCount + snap.availableConnectionCount + snap.inUseConnectionCount) this.bad('snapshot counts do not add up');
    if (snap.pendingConnectionCount !== c.pending || snap.availableConnectionCount !== c.available || snap.inUseConnectionCount !== c['in use']) {
      this.bad(`snapshot() pending/available/in use ${snap.pendingConnectionCount}/${snap.availableConnectionCount}/${snap.inUseConnectionCount}, events$ say ${c.pending}/${c.available}/${c['in use']}`);
    }
    if (s.maxPoolSize > 0 && snap.totalConnectionCount > s.maxPoolSize) this.bad(`total ${snap.totalConnectionCount} > maxPoolSize ${s.maxPoolSize}`);
    if (snap.pendingConnectionCount > s.maxConnecting) this.bad(`pending ${snap.pendingConnectionCount} > maxConnecting ${s.maxConnecting}`);
    if (snap.inUseConnectionCount !== this.holders.size) this.bad(`${snap.inUseConnectionCount} connection(s) in use, but callers hold ${this.holders.size}: [${[...this.holders.keys()]}]`);

    this.syncCreated();
    for (const life of this.lives.values()) {
      const conn = this.createdById.get(life.id);
      if (life.state === 'in use' && (life.owner === undefined || !life.owner.holding || this.holders.get(life.id) !== life.owner)) {
        this.bad(`connection ${life.id} is in use, but no caller holds it`);
      } else if (life.state === 'available' && (conn === undefined || conn.destroyed || conn.errored)) {
        this.bad(`connection ${life.id} is available but ${conn === undefined ? 'was never established' : conn.destroyed ? 'destroyed' : 'errored'}`);
      } else if (life.state === 'pending' && conn !== undefined) {
        this.bad(`connection ${life.id} is established but still pending`);
      } else if (life.state === 'closed' && conn !== undefined && !conn.destroyed) {
        this.bad(`connection ${life.id} was closed but not destroyed`);
      }
    }

    const entered = this.requests.filter((r) => r.entered);
    const waiting = entered.filter((r) => !isSettled(r));
    const failedTotal = this.failed.poolClosed + this.failed.timeout + this.failed.connectionError + this.failed.cancelled + this.failed.waitQueueFull;
    if (this.started !== entered.length) this.bad(`${this.started} ConnectionCheckOutStarted for ${entered.length} checkouts that entered the pool`);
    if (snap.waitQueueLength > 0 && snap.availableConnectionCount > 0) {
      this.bad(`${snap.waitQueueLength} checkout(s) wait while ${snap.availableConnectionCount} connection(s) are available`);
    }
    if (snap.waitQueueLength !== waiting.length) this.bad(`waitQueueLength ${snap.waitQueueLength}, but ${waiting.length} caller(s) wait: ${waiting.map((r) => `#${r.n}`)}`);
    if (this.started !== this.checkedOut + failedTotal + snap.waitQueueLength) {
      this.bad(`ConnectionCheckOutStarted ${this.started} != ConnectionCheckedOut ${this.checkedOut} + ConnectionCheckOutFailed ${failedTotal} + waiting ${snap.waitQueueLength}`);
    }
    const received = entered.filter((r) => r.connection !== undefined).length;
    if (this.checkedOut !== received + this.abandoned) this.bad(`ConnectionCheckedOut ${this.checkedOut} != connections callers received ${received} + checked back in for callers that left ${this.abandoned}`);
    // A caller that got CheckOutCancelledError has its ConnectionCheckOutFailed(cancelled); one that unsubscribed has
    // that, or its committed checkout went back into the pool (ConnectionCheckedOut, then ConnectionCheckedIn).
    const cancelled = entered.filter((r) => r.cancelled).length;
    const unsubscribed = entered.filter((r) => r.unsubscribed).length;
    if (cancelled !== this.failed.cancelled + this.abandoned) this.bad(`${cancelled} caller(s) cancelled, but ConnectionCheckOutFailed(cancelled) ${this.failed.cancelled} + committed-then-returned ${this.abandoned}`);
    if (this.abandoned > unsubscribed) this.bad(`${this.abandoned} committed checkout(s) went back into the pool, but only ${unsubscribed} caller(s) unsubscribed: a caller got CheckOutCancelledError for a checkout the pool had committed`);
    if (!sameCounts(this.failedErrors, this.callerErrors)) this.bad('the errors callers got are not the errors of the ConnectionCheckOutFailed events');

    for (const r of this.requests) {
      if (!r.entered && (r.connection !== undefined || r.error !== undefined || r.settlements > 1)) this.bad(`checkout #${r.n} never entered the pool but ended with ${describeOutcome(r)}`);
      if (!r.entered && !r.cancelled) this.bad(`checkout #${r.n} with an aborted signal did not fail with CheckOutCancelledError`);
      if (r.poolStateAtEnter === 'paused' && !r.drainingAtEnter && !(r.error instanceof PoolClearedError)) {
        this.bad(`checkout #${r.n} on a paused pool ended with ${describeOutcome(r)}, not PoolClearedError`);
      }
      if (r.poolStateAtEnter === 'closed' && !(r.error instanceof PoolClosedError)) this.bad(`checkout #${r.n} on a closed pool ended with ${describeOutcome(r)}, not PoolClosedError`);
      if (r.drainingAtEnter && !(r.error instanceof PoolClosedError)) this.bad(`checkout #${r.n}, started after ConnectionPoolDraining, ended with ${describeOutcome(r)}, not PoolClosedError`);
    }
    for (const r of waiting) {
      const lane = r.high ? 'high' : 'normal';
      if (r.ordinal < this.maxDeliveredOrdinal[lane]) {
        this.bad(`FIFO: ${lane} checkout #${r.n} (entered ${r.ordinal}th) still waits, but a ${lane} one that entered ${this.maxDeliveredOrdinal[lane]}th got a connection`);
      }
      // Members of the WaitQueue time out after waitQueueTimeoutMS; one that claimed an establishment gets its outcome,
      // unless high-priority checkouts that came later claim the establishments before it (one each), or the
      // establishment outlasts the connection's lifetime (another is made).
      if (s.waitQueueTimeoutMS > 0 && now - r.enteredAt > s.waitQueueTimeoutMS + this.maxEstablishMS) {
        const overtaking = r.high ? 0 : this.requests.filter((h) => h.high && h.startSeq > r.startSeq).length;
        const reestablished = this.expiredAtEstablishment.filter((seq) => seq > r.startSeq).length;
        const establishments = 1 + overtaking + reestablished;
        if (now - r.enteredAt > s.waitQueueTimeoutMS + this.maxEstablishMS * establishments) {
          this.bad(`checkout #${r.n} has waited ${now - r.enteredAt} ms > waitQueueTimeoutMS ${s.waitQueueTimeoutMS} + establishment ${this.maxEstablishMS} ms × ${establishments}`);
        }
      }
      // A checkout's own timeoutMS bounds its whole wait, in the WaitQueue and on an establishment alike.
      if (r.timeoutMS > 0 && now - r.enteredAt >= r.timeoutMS) this.bad(`checkout #${r.n} (timeoutMS ${r.timeoutMS}) still waits after ${now - r.enteredAt} ms`);
    }
    this.checkExtensions(waiting.length);
  }

  /** The extensions' invariants between steps (see the file's comment). */
  private checkExtensions(waiting: number): void {
    const s = this.scenario;
    const now = this.clock.now();

    // maxWaitQueueSize: the WaitQueue proper never holds more.
    if (s.maxWaitQueueSize > 0) {
      const queued = Math.max(0, waiting - this.claimablePending());
      if (queued > s.maxWaitQueueSize) this.bad(`${queued} checkout(s) in the WaitQueue (${waiting} waiting, claimants included) > maxWaitQueueSize ${s.maxWaitQueueSize}`);
    }

    // priority: a normal checkout served while a high-priority one waited (one that entered before it was served).
    // Served right as its connection was established, it may have claimed that establishment first: then only a
    // high-priority checkout that entered before it counts (that one would have claimed first).
    for (const n of this.deliveredSinceCheck.splice(0)) {
      if (n.high) continue;
      const served = n.endSeq;
      for (const h of this.requests) {
        if (!h.high || !(h.startSeq < served && served < h.endSeq) || (n.fresh && h.startSeq > n.startSeq)) continue;
        this.bad(
          `normal checkout #${n.n} got connection ${n.connection?.id}${n.fresh ? ' (just established)' : ''} while high-priority checkout ` +
            `#${h.n}, which entered ${h.startSeq < n.startSeq ? 'before it' : 'after it but before that'}, waited`,
        );
      }
      if (STATS && this.requests.some((h) => h.high && h.connection !== undefined && h.startSeq > n.startSeq && h.endSeq < served)) count('high-priority checkout served before an older normal one');
    }

    // drain(): closed as soon as nothing waits and nothing is in use, and by its deadline; resolved once closed.
    if (this.draining && this.poolState !== 'closed') {
      if (waiting === 0 && this.counts['in use'] === 0) this.bad('the pool is draining, nothing waits and nothing is in use, but it is not closed');
      if (this.drainTimeoutMS > 0 && now >= this.drainStartedAt + this.drainTimeoutMS) {
        this.bad(`the drain deadline (${this.drainStartedAt} + ${this.drainTimeoutMS} ms) passed, but the pool is not closed`);
      }
    }
    if (this.poolState === 'closed' && this.drains.some((d) => !d.resolved)) this.bad('the pool is closed, but a drain() Promise is still pending');

    // leakDetectionThresholdMS: every checkout held that long was reported; a suspected check-in was reported.
    if (this.leakCheckInDue !== undefined) {
      this.bad(`the ConnectionCheckedIn of connection ${this.leakCheckInDue}, suspected of a leak, had no ConnectionLeakSuspectCheckedIn`);
      this.leakCheckInDue = undefined;
    }
    const threshold = s.leakDetectionThresholdMS;
    // maxLifeTimeMS: with a Background Thread, an expired available connection is closed within the runs it takes to
    // close those ahead of it, maxConnecting per run (available connections age at the head of the list).
    const runs = Math.ceil(this.maxTotal / s.maxConnecting) + 1;
    const expiryBound = s.backgroundThreadIntervalMS > 0 ? runs * s.backgroundThreadIntervalMS : Infinity;
    for (const life of this.lives.values()) {
      if (threshold > 0 && life.state === 'in use' && !life.leakSuspected && now - life.checkedOutTime >= threshold) {
        this.bad(`connection ${life.id} has been checked out for ${now - life.checkedOutTime} ms >= leakDetectionThresholdMS ${threshold}, but no ConnectionLeakSuspected`);
      }
      if (life.state === 'available' && now - Math.max(life.expiresAt, life.since) > expiryBound) {
        this.bad(
          `connection ${life.id}, available since ${life.since} ms, expired at ${life.expiresAt} ms and is still available at ${now} ms ` +
            `(${runs} Background Thread Runs of ${s.backgroundThreadIntervalMS} ms)`,
        );
      }
    }

    // warmUp(): not pending once the pool is warm (ready, minPoolSize established) or closed, when it must refuse, or
    // once an establishment started since the call failed.
    const established = this.counts.available + this.counts['in use'];
    const warm = this.poolState === 'ready' && established >= s.minPoolSize;
    const refused = s.minPoolSize > 0 && s.backgroundThreadIntervalMS < 0;
    for (const w of this.warmUps) {
      if (w.settled) continue;
      if (warm || refused || this.poolState === 'closed') {
        this.bad(`warmUp #${w.n} still pending, with the pool ${this.poolState} and ${established} established connections (minPoolSize ${s.minPoolSize})`);
      }
      else if (w.failWith !== undefined) this.bad(`warmUp #${w.n} still pending after an establishment started since the call failed: ${String(w.failWith)}`);
    }
  }

  // ------------------------------------------------------------------------------------------------------------

  private establishmentError(id: number): Error | undefined {
    const failures = this.scenario.failures;
    const kind = failures[(id - 1) % failures.length];
    if (kind === 'ok') return undefined;
    let e = this.establishmentErrors.get(id);
    if (e === undefined) {
      e =
        kind === 'overload'
          ? new CmapError(`establishment of connection ${id} failed: server overloaded`, { labels: [ErrorLabel.SystemOverloadedError, ErrorLabel.RetryableError] })
          : new Error(`establishment of connection ${id} failed`);
      this.establishmentErrors.set(id, e);
      this.knownEstablishmentErrors.add(e);
    }
    return e;
  }

  private syncCreated(): Map<number, MockConnection> {
    const created = this.mock.created;
    for (let i = this.createdById.size; i < created.length; i++) this.createdById.set(created[i].id, created[i]);
    return this.createdById;
  }

  private guard(f: () => void): void {
    try {
      f();
    } catch (e) {
      this.bad(`the test harness threw: ${e instanceof Error ? e.stack : String(e)}`);
    }
  }

  private bad(message: string): void {
    if (this.violations.length < 20) this.violations.push(`[${this.where}, t=${this.clock.now()} ms] ${message}`);
  }

  private throwIfViolated(steps: readonly Step[], at = steps.length - 1): void {
    if (this.violations.length === 0) return;
    const script = steps.slice(0, at + 1).map(describeStep).join(' ');
    throw new PropertyFailure(`${this.violations.join('\n')}\nscenario: ${JSON.stringify(this.scenario)}\nscript up to the failure: ${script}`);
  }
}

function bump(m: Map<unknown, number>, k: unknown): void {
  m.set(k, (m.get(k) ?? 0) + 1);
}

function sameCounts(a: Map<unknown, number>, b: Map<unknown, number>): boolean {
  if (a.size !== b.size) return false;
  for (const [k, n] of a) if (b.get(k) !== n) return false;
  return true;
}

function describeOutcome(r: Request): string {
  if (r.connection !== undefined) return `connection ${r.connection.id}`;
  if (r.error !== undefined) return r.error instanceof Error ? `${r.error.name}: ${r.error.message}` : String(r.error);
  return r.cancelled ? 'a cancellation' : 'nothing yet';
}

describe('ConnectionPoolCore (property: long random scripts on virtual time)', function () {
  let previousOnUnhandledError: typeof config.onUnhandledError;
  let previousStackTraceLimit = Error.stackTraceLimit;
  const unhandled: unknown[] = [];
  before(function () {
    previousOnUnhandledError = config.onUnhandledError;
    config.onUnhandledError = (e) => unhandled.push(e);
    previousStackTraceLimit = Error.stackTraceLimit;
    Error.stackTraceLimit = STACK_TRACE_LIMIT;
  });
  after(function () {
    config.onUnhandledError = previousOnUnhandledError;
    Error.stackTraceLimit = previousStackTraceLimit;
  });

  it('keeps CMAP counts, limits, FIFO, single settlement and caller/event agreement and the extensions\' invariants; settles every checkout; leaks nothing', async function () {
    this.timeout(Math.max(60_000, RUNS * 2_000));
    await fc.assert(
      fc.asyncProperty(scenarioArb, stepsArb(MAX_STEPS), async (scenario, steps) => {
        await new Run(scenario).play(steps);
        if (unhandled.length > 0) throw new PropertyFailure(`unhandled errors reported by RxJS: ${unhandled.splice(0).map(String).join('; ')}`);
      }),
      { seed: SEED, numRuns: RUNS },
    );
    if (STATS) console.log(Object.fromEntries(coverage));
  });
});

describe('ConnectionPoolCore: a connection that expired while it was established', function () {
  function expiringPool() {
    const clock = new VirtualClock();
    const mock = new MockConnectionFactory({ scheduler: clock, establishDelayMS: 50 });
    const pool = new ConnectionPoolCore<MockConnection>({
      address: 'db.example:27017',
      scheduler: clock,
      connectionFactory: mock.factory,
      maxLifeTimeMS: 100,
      maxLifeTimeJitterMS: 100,
      backgroundThreadIntervalMS: -1,
    });
    const closed: [number, string, number][] = [];
    pool.events$.subscribe((e) => {
      if (e.type === 'ConnectionClosed') closed.push([e.connectionId, e.reason, e.time]);
    });
    pool.ready();
    return { clock, pool, closed };
  }

  it('hands it, once, to the checkout that claimed it, and closes it (reason expired) when checked in', function () {
    // Connection 1 expires at 100 − 100 × frac(φ) ≈ 38.2 ms, before its establishment ends at 50 ms. Replaced instead,
    // a lifetime shorter than every establishment would never let a checkout through.
    const { clock, pool, closed } = expiringPool();
    let received: MockConnection | undefined;
    pool.checkOut().subscribe((c) => (received = c));
    clock.advance(50);
    expect(received?.id).to.equal(1);
    expect(closed).to.deep.equal([]);
    clock.advance(10);
    pool.checkIn(received!);
    expect(closed).to.deep.equal([[1, 'expired', 60]]);
    expect(pool.snapshot().totalConnectionCount).to.equal(0);
  });

  it('closes it (reason expired) as it becomes ready when no checkout waits for it', function () {
    const { clock, pool, closed } = expiringPool();
    pool.checkOut().subscribe().unsubscribe(); // the establishment goes on without a claimant
    clock.advance(50);
    expect(closed).to.deep.equal([[1, 'expired', 50]]);
    expect(pool.snapshot().totalConnectionCount).to.equal(0);
  });
});
