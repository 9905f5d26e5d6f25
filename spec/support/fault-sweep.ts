/**
 * Fault injection for the pool core: make one of the pool's own data-structure methods throw on its Nth call, run a
 * scenario of checkouts, cancellations, check-ins, clears, drains and timers on virtual time, then check what a pool
 * must guarantee however a step of it fails (see {@link violations}). Used by spec/pool/reducer.fault.spec.ts, which
 * sweeps N for every method and scenario.
 */
import { config, Subject, type Subscription } from 'rxjs';
import { ConnectionPoolCore, PoolClosedError, type ConnectionPoolEvent } from '../../lib';
import { ConnectionList } from '../../lib/pool/connection-list';
import { RingBuffer } from '../../lib/pool/ring-buffer';
import { WaitQueue } from '../../lib/pool/wait-queue';
import { MockConnectionFactory, VirtualClock, type MockConnection } from '../../lib/testing';
import { microtasks } from './microtasks';

/** The methods a fault is injected into: every data structure the reducer's steps go through. */
export const FAULT_SITES: readonly (readonly [string, object, string])[] = [
  ...['push', 'shift', 'shiftLane', 'remove', 'drain', 'peek', 'peekLane', 'hasHigh'].map((m) => [`WaitQueue.${m}`, WaitQueue.prototype, m] as const),
  ...['push', 'remove'].map((m) => [`ConnectionList.${m}`, ConnectionList.prototype, m] as const),
  ...['push', 'shift', 'peek', 'retain'].map((m) => [`RingBuffer.${m}`, RingBuffer.prototype, m] as const),
];

/** An injected fault: thrown once, by the Nth call of a method after {@link injectFault}. */
export interface Injection {
  readonly fault: Error;
  fired: boolean;
  restore(): void;
}

/** Makes `proto[method]` throw a new fault on its `nth` call from now, once. */
export function injectFault(proto: object, method: string, nth: number): Injection {
  const target = proto as Record<string, (...args: unknown[]) => unknown>;
  const original = target[method];
  let calls = 0;
  const injection: Injection = {
    fault: new Error(`injected fault: ${method} call ${nth}`),
    fired: false,
    restore: () => {
      target[method] = original;
    },
  };
  target[method] = function (this: unknown, ...args: unknown[]) {
    if (++calls === nth) {
      injection.fired = true;
      throw injection.fault;
    }
    return original.apply(this, args);
  };
  return injection;
}

/** One checkout of a scenario, and how it ended. */
export interface Tracked extends Outcome {
  readonly kind: string;
  /** False once unsubscribed before settling (an unsubscribed checkout settles never). */
  expectSettle: boolean;
  checkedIn: boolean;
  unsubscribe?: () => void;
  abort?: () => void;
  /** withConnection / withConnection$: lets the scope's work finish. */
  release?: () => void;
}

/** How a checkout ended: how many times it settled (once is right), and with what. */
export interface Outcome {
  settled: number;
  connection?: MockConnection;
  error?: unknown;
}

/** Handlers that record a checkout's outcome on `t`: `next` for its connection, `error` for its failure. */
export function recordOutcome(t: Outcome): { next: (c: MockConnection) => void; error: (e: unknown) => void } {
  return {
    next: (c) => {
      t.settled++;
      t.connection = c;
    },
    error: (e) => {
      t.settled++;
      t.error = e;
    },
  };
}

/** A pool on virtual time, watched: its events, its state$ snapshots, and its checkouts. */
export class FaultScene {
  readonly clock = new VirtualClock();
  readonly mock: MockConnectionFactory;
  readonly pool: ConnectionPoolCore<MockConnection>;
  readonly events: ConnectionPoolEvent[] = [];
  readonly tracked: Tracked[] = [];
  readonly snapshots: ReturnType<ConnectionPoolCore<MockConnection>['snapshot']>[] = [];
  stateCompleted = false;
  /** Errors that reached the code calling the pool (a fault must be reported instead). */
  readonly thrown: unknown[] = [];

  /** Called once the next scene's pool is built and watched, before the scenario drives it: where a fault is armed. */
  static afterCreate: (() => void) | undefined;

  constructor(options: Record<string, unknown>, mockOptions: Record<string, unknown> = {}) {
    this.mock = new MockConnectionFactory({ scheduler: this.clock, establishDelayMS: 10, ...mockOptions });
    this.pool = new ConnectionPoolCore<MockConnection>({ address: 'db.example:27017', scheduler: this.clock, connectionFactory: this.mock.factory, ...options });
    this.pool.events$.subscribe((e) => this.events.push(e));
    this.pool.state$.subscribe({ next: (s) => this.snapshots.push(s), complete: () => (this.stateCompleted = true) });
    FaultScene.afterCreate?.();
  }

  do(f: () => void): void {
    try {
      f();
    } catch (error) {
      this.thrown.push(error);
    }
  }

  /** A new tracked checkout of this scene. */
  private track(kind: string): Tracked {
    const t: Tracked = { kind, settled: 0, expectSettle: true, checkedIn: false };
    this.tracked.push(t);
    return t;
  }

  promise(options?: Record<string, unknown>, kind = 'promise'): Tracked {
    const t = this.track(kind);
    const { next, error } = recordOutcome(t);
    this.do(() => void this.pool.checkOut(options).then(next, error));
    return t;
  }

  abortable(): Tracked {
    const controller = new AbortController();
    const t = this.promise({ signal: controller.signal }, 'promise with signal');
    t.abort = () => this.do(() => controller.abort());
    return t;
  }

  observable(options?: Record<string, unknown>, kind = 'observable'): Tracked {
    const t = this.track(kind);
    let subscription: Subscription | undefined;
    this.do(() => {
      subscription = this.pool.checkOut(options).subscribe(recordOutcome(t));
    });
    t.unsubscribe = () => {
      if (t.settled === 0) t.expectSettle = false;
      this.do(() => subscription?.unsubscribe());
    };
    return t;
  }

  withConnection(): Tracked {
    const t = this.track('withConnection');
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    t.release = () => release();
    this.do(() => {
      this.pool
        .withConnection(async (c) => {
          t.connection = c;
          await gate;
        })
        .then(() => t.settled++, recordOutcome(t).error);
    });
    return t;
  }

  withConnection$(): Tracked {
    const t = this.track('withConnection$');
    const gate = new Subject<number>();
    t.release = () => {
      gate.next(1);
      gate.complete();
    };
    this.do(() => {
      this.pool
        .withConnection$((c) => {
          t.connection = c;
          return gate;
        })
        .subscribe({ complete: () => t.settled++, error: recordOutcome(t).error });
    });
    return t;
  }

  checkIn(t: Tracked): void {
    if (t.connection === undefined || t.release !== undefined || t.checkedIn) return;
    t.checkedIn = true;
    this.do(() => this.pool.checkIn(t.connection!));
  }

  advance(ms: number): void {
    this.do(() => this.clock.advance(ms));
  }
}

/** The scenarios: between them, every kind of step the reducer takes. */
export const FAULT_SCENARIOS: Readonly<Record<string, () => FaultScene>> = {
  'checkouts of every form, cancelled and checked in'() {
    const c = new FaultScene({ maxPoolSize: 2 });
    c.do(() => c.pool.ready());
    const a = c.promise();
    const b = c.observable();
    c.advance(10);
    const d = c.promise();
    const e = c.observable();
    const f = c.abortable();
    const g = c.observable();
    c.promise({ timeoutMS: 30 }, 'promise with timeoutMS');
    const h = c.observable({ priority: 'high' }, 'observable, high priority');
    c.checkIn(a);
    c.advance(5);
    f.abort!();
    g.unsubscribe!();
    c.advance(40);
    for (const t of [b, h, d, e]) c.checkIn(t);
    return c;
  },
  'claimants of establishments, one aborted'() {
    const c = new FaultScene({ maxPoolSize: 3, maxConnecting: 2 });
    c.do(() => c.pool.ready());
    const a = c.promise();
    const b = c.abortable();
    const d = c.observable();
    const e = c.promise();
    b.abort!();
    c.advance(20);
    for (const t of [a, d, e]) c.checkIn(t);
    return c;
  },
  'clears, with and without interrupting'() {
    const c = new FaultScene({ maxPoolSize: 2, maxConnecting: 2 });
    c.do(() => c.pool.ready());
    const a = c.promise();
    c.advance(10);
    const waiting = [c.promise(), c.observable(), c.promise()];
    c.do(() => c.pool.clear());
    c.do(() => c.pool.ready());
    c.advance(10);
    waiting.push(c.observable(), c.promise());
    c.advance(10);
    c.do(() => c.pool.clear({ interruptInUseConnections: true }));
    c.do(() => c.pool.ready());
    c.checkIn(a);
    c.advance(10);
    for (const t of waiting) c.checkIn(t);
    return c;
  },
  'an establishment that fails and clears the pool'() {
    const c = new FaultScene({ maxPoolSize: 2 }, { failWith: (d: { id: number }) => (d.id === 2 ? new Error('establishment failed') : undefined) });
    c.do(() => c.pool.ready());
    const a = c.promise();
    c.advance(10);
    const waiting = [c.promise(), c.observable(), c.promise()];
    c.advance(10);
    c.do(() => c.pool.ready());
    waiting.push(c.promise());
    c.advance(10);
    for (const t of [a, ...waiting]) c.checkIn(t);
    return c;
  },
  'close with checkouts waiting'() {
    const c = new FaultScene({ maxPoolSize: 3, maxConnecting: 2 });
    c.do(() => c.pool.ready());
    const a = c.promise();
    c.advance(10);
    c.promise();
    c.observable();
    c.abortable();
    c.observable({ priority: 'high' }, 'observable, high priority');
    c.promise({ timeoutMS: 50 }, 'promise with timeoutMS');
    c.do(() => c.pool.close());
    c.advance(10);
    c.checkIn(a);
    return c;
  },
  'close with connections available'() {
    const c = new FaultScene({ maxPoolSize: 3 });
    c.do(() => c.pool.ready());
    const [a, b, d] = [c.promise(), c.promise(), c.promise()];
    c.advance(10);
    c.checkIn(b);
    c.checkIn(d);
    c.do(() => c.pool.close());
    c.checkIn(a);
    return c;
  },
  'a drain that times out, and one that completes'() {
    const c = new FaultScene({ maxPoolSize: 1 });
    c.do(() => c.pool.ready());
    const a = c.promise();
    c.advance(10);
    const b = c.promise();
    c.observable();
    c.do(() => void c.pool.drain({ timeoutMS: 100 }).catch(() => undefined));
    c.promise();
    c.checkIn(a);
    c.advance(200);
    c.checkIn(b);
    return c;
  },
  'background runs: populate, idle and lifetime, leak detection'() {
    const c = new FaultScene({ minPoolSize: 2, maxPoolSize: 3, maxIdleTimeMS: 50, backgroundThreadIntervalMS: 20, leakDetectionThresholdMS: 30, maxLifeTimeMS: 200 });
    c.do(() => c.pool.ready());
    c.advance(10);
    const a = c.promise();
    c.advance(40);
    c.checkIn(a);
    c.advance(300);
    const b = c.promise();
    const d = c.observable();
    c.advance(20);
    c.checkIn(b);
    c.checkIn(d);
    c.advance(100);
    return c;
  },
  'WaitQueue timeouts and a bounded WaitQueue'() {
    const c = new FaultScene({ maxPoolSize: 1, waitQueueTimeoutMS: 30, maxWaitQueueSize: 2 });
    c.do(() => c.pool.ready());
    const a = c.promise();
    c.advance(10);
    c.promise();
    c.observable({ priority: 'high' }, 'observable, high priority');
    c.promise();
    c.advance(15);
    c.observable();
    c.advance(20);
    c.checkIn(a);
    c.advance(40);
    return c;
  },
  'load-balanced: clears of one service'() {
    const [one, two] = ['aaaaaaaaaaaaaaaaaaaaaaaa', 'bbbbbbbbbbbbbbbbbbbbbbbb'];
    const c = new FaultScene({ maxPoolSize: 3, loadBalanced: true }, { serviceIdOf: (d: { id: number }) => (d.id % 2 ? one : two) });
    c.do(() => c.pool.ready());
    const [a, b, d] = [c.promise(), c.observable(), c.promise()];
    c.advance(10);
    const e = c.promise();
    c.do(() => c.pool.clear({ serviceId: one }));
    c.checkIn(a);
    c.advance(10);
    c.checkIn(b);
    c.checkIn(d);
    c.advance(10);
    c.checkIn(e);
    c.do(() => c.pool.clear({ serviceId: two }));
    c.advance(10);
    return c;
  },
  'a WaitQueue compacted once cancelled checkouts outnumber those left'() {
    const c = new FaultScene({ maxPoolSize: 1 });
    c.do(() => c.pool.ready());
    const a = c.observable();
    c.advance(10);
    // 100 queued; of each ten, three stay, one is unsubscribed and six are aborted. The 65th cancel (an abort) makes the
    // WaitQueue compact, which a fault can interrupt after that checkout has left it.
    const kept: Tracked[] = [];
    const cancels: (() => void)[] = [];
    for (let i = 0; i < 100; i++) {
      if (i % 10 < 3) kept.push(c.observable());
      else if (i % 10 === 3) cancels.push(c.observable().unsubscribe!);
      else cancels.push(c.abortable().abort!);
    }
    for (const cancel of cancels) cancel();
    c.checkIn(a);
    for (const t of kept) c.checkIn(t);
    return c;
  },
  'withConnection and withConnection$'() {
    const c = new FaultScene({ maxPoolSize: 1 });
    c.do(() => c.pool.ready());
    c.withConnection();
    c.withConnection$();
    c.withConnection();
    c.advance(10);
    return c;
  },
};

/** Runs `f` with RxJS's unhandled errors collected (restored afterwards). */
export async function collectingReports<T>(f: (reported: unknown[]) => Promise<T>): Promise<T> {
  const previous = config.onUnhandledError;
  const reported: unknown[] = [];
  config.onUnhandledError = (e) => reported.push(e);
  try {
    return await f(reported);
  } finally {
    config.onUnhandledError = previous;
  }
}

async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await microtasks();
}

/**
 * Winds the scene down (time passes, scoped work finishes, every checkout still holding its connection checks it in,
 * the pool closes) and lists what broke the guarantees a pool keeps whatever fault it met:
 * 1. every checkout settles exactly once (one unsubscribed before settling, never), never both served and failed;
 * 2. every connection the factory made is destroyed;
 * 3. the pool ends closed with every count at 0 (and no count below 0 on the way), state$ completes, and a later
 *    checkout fails with PoolClosedError;
 * 4. the fault is reported once, as an unhandled error, never thrown at the code calling the pool;
 * 5. the events agree: one ConnectionPoolClosed; each ConnectionCheckOutStarted ends in one ConnectionCheckedOut or
 *    ConnectionCheckOutFailed; as many ConnectionCheckedIn as ConnectionCheckedOut, ConnectionClosed as
 *    ConnectionCreated; no checkout of a closed connection.
 */
export async function violations(scene: FaultScene, injection: Injection | undefined, reported: unknown[]): Promise<string[]> {
  const found: string[] = [];
  await settle();
  scene.advance(1000);
  await settle();
  for (const t of scene.tracked) t.release?.();
  await settle();
  for (const t of scene.tracked) scene.checkIn(t);
  scene.advance(1000);
  await settle();
  scene.do(() => scene.pool.close());
  scene.advance(1000);
  await settle();

  for (const t of scene.tracked) {
    if (t.settled > 1) found.push(`1: a ${t.kind} checkout settled ${t.settled} times`);
    if (t.expectSettle && t.settled === 0) found.push(`1: a ${t.kind} checkout never settled`);
    if (t.connection !== undefined && t.error !== undefined && t.release === undefined) found.push(`1: a ${t.kind} checkout was served and failed`);
  }
  const alive = scene.mock.created.filter((c) => !c.destroyed);
  if (alive.length > 0) found.push(`2: connections ${alive.map((c) => c.id).join(', ')} never destroyed`);
  if (scene.pool.state !== 'closed') found.push(`3: the pool ended ${scene.pool.state}`);
  const counts = (s: (typeof scene.snapshots)[number]) => [s.totalConnectionCount, s.availableConnectionCount, s.pendingConnectionCount, s.inUseConnectionCount, s.waitQueueLength];
  if (counts(scene.pool.snapshot()).some((n) => n !== 0)) found.push(`3: final counts ${counts(scene.pool.snapshot()).join('/')}`);
  if (scene.snapshots.some((s) => counts(s).some((n) => n < 0))) found.push('3: state$ published a count below 0');
  if (!scene.stateCompleted) found.push('3: state$ did not complete');
  const later = await scene.pool.checkOut().then(
    () => 'a connection',
    (e: unknown) => e,
  );
  if (!(later instanceof PoolClosedError)) found.push(`3: a later checkout ended with ${String(later)}`);
  if (injection?.fired === true) {
    const times = reported.filter((r) => r === injection.fault).length;
    if (times !== 1) found.push(`4: the fault was reported ${times} times`);
  }
  const otherReports = reported.filter((r) => r !== injection?.fault);
  if (otherReports.length > 0) found.push(`4: also reported: ${otherReports.map(String).join('; ')}`);
  if (scene.thrown.length > 0) found.push(`4: thrown at the caller: ${scene.thrown.map(String).join('; ')}`);

  const count = (type: string): number => scene.events.filter((e) => e.type === type).length;
  if (count('ConnectionPoolClosed') !== 1) found.push(`5: ${count('ConnectionPoolClosed')} ConnectionPoolClosed`);
  const [started, out, failed] = [count('ConnectionCheckOutStarted'), count('ConnectionCheckedOut'), count('ConnectionCheckOutFailed')];
  if (started !== out + failed) found.push(`5: ${started} checkouts started, ${out} checked out, ${failed} failed`);
  if (out !== count('ConnectionCheckedIn')) found.push(`5: ${out} checked out, ${count('ConnectionCheckedIn')} checked in`);
  if (count('ConnectionCreated') !== count('ConnectionClosed')) found.push(`5: ${count('ConnectionCreated')} created, ${count('ConnectionClosed')} closed`);
  const closed = new Set<number>();
  for (const e of scene.events) {
    if (e.type === 'ConnectionClosed') closed.add(e.connectionId);
    if (e.type === 'ConnectionCheckedOut' && closed.has(e.connectionId)) found.push(`5: connection ${e.connectionId} checked out after it closed`);
  }
  return found;
}
