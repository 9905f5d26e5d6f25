/**
 * The vocabulary of the pool property test (connection-pool.property.spec.ts): random pool scenarios (options, the
 * opt-in extensions among them, establishment timing and failures) and random steps a pool's users and its
 * environment take. Every step prints compactly (`fc.toStringMethod`), so a shrunk counterexample reads as a short
 * script.
 */
import * as fc from 'fast-check';

/** How a checkout is cancellable: no signal, a signal aborted later (maybe), or one aborted before it starts. */
export type Signal = 'none' | 'live' | 'pre';

/**
 * The checkout options every checkout step carries: `high` for `priority: 'high'`, `timeoutMS` for the checkout's
 * own deadline (ms; 0 for none).
 */
export interface CheckOutStepOptions {
  readonly high: boolean;
  readonly timeoutMS: number;
}

export type Step =
  /** Observable checkout (subscribe); `inDelivery`: check-ins made from inside the delivery (2 = a duplicate). */
  | ({ readonly k: 'obs'; readonly sig: Signal; readonly inDelivery: 0 | 1 | 2 } & CheckOutStepOptions)
  /** Promise checkout (`then`). */
  | ({ readonly k: 'promise'; readonly sig: Signal } & CheckOutStepOptions)
  /** `withConnection` with a body that ends `bodyMS` later; `early`: the body checks the connection in itself first. */
  | ({ readonly k: 'with'; readonly sig: Signal; readonly bodyMS: number; readonly early: boolean; readonly throws: boolean } & CheckOutStepOptions)
  /** `withConnection$` with an inner Observable that completes `bodyMS` later. */
  | ({ readonly k: 'with$'; readonly bodyMS: number; readonly early: boolean } & CheckOutStepOptions)
  /** Unsubscribe the i-th (mod count) open Observable checkout (waiting, or in its withConnection$ body). */
  | { readonly k: 'unsubscribe'; readonly i: number }
  /** Abort the signal of the i-th (mod count) unsettled checkout that has one. */
  | { readonly k: 'abort'; readonly i: number }
  /** At the next ConnectionCheckedOut, from inside the events$ subscriber, cancel the oldest unsettled checkout. */
  | { readonly k: 'abortOnCheckedOut' }
  /** Check in the i-th (mod count) connection held by a plain checkout. */
  | { readonly k: 'checkIn'; readonly i: number }
  /** Check in again a connection already checked in and held by nobody (or a foreign one): must throw. */
  | { readonly k: 'checkInAgain'; readonly i: number; readonly foreign: boolean }
  /** Mark the i-th (mod count) held connection errored (a network error while in use). */
  | { readonly k: 'markErrored'; readonly i: number }
  | { readonly k: 'clear'; readonly interrupt: boolean; readonly cause: boolean }
  | { readonly k: 'ready' }
  | { readonly k: 'close' }
  /** `drain()`, with a deadline (ms) when `timeoutMS` > 0. */
  | { readonly k: 'drain'; readonly timeoutMS: number }
  /** `warmUp()`: its outcome is checked when it settles. */
  | { readonly k: 'warmUp' }
  /** Move virtual time forward. */
  | { readonly k: 'advance'; readonly ms: number };

/** What makes an establishment fail: nothing, an error that clears the pool, or a backpressure one that does not. */
export type Failure = 'ok' | 'clears' | 'overload';

/** One pool scenario: the pool options and how its connections are established. */
export interface Scenario {
  readonly maxPoolSize: number;
  readonly minPoolSize: number;
  readonly maxConnecting: number;
  readonly waitQueueTimeoutMS: number;
  readonly maxIdleTimeMS: number;
  readonly backgroundThreadIntervalMS: number;
  /** MockConnectionFactory's establishDelayMS. */
  readonly establishDelayMS: number;
  /** Extra establishment time of connection id, cycled: establishments finish out of creation order. */
  readonly jitterMS: readonly number[];
  /** How the establishment of connection id ends, cycled. */
  readonly failures: readonly Failure[];
  /** Extension options (0: off). */
  readonly maxWaitQueueSize: number;
  readonly maxLifeTimeMS: number;
  /** <= maxLifeTimeMS. */
  readonly maxLifeTimeJitterMS: number;
  readonly leakDetectionThresholdMS: number;
}

export function describeStep(s: Step): string {
  const sig = (x: Signal): string => (x === 'none' ? '' : x === 'live' ? '!sig' : '!preAborted');
  const opts = (o: CheckOutStepOptions): string => `${o.high ? '!high' : ''}${o.timeoutMS > 0 ? `@${o.timeoutMS}ms` : ''}`;
  switch (s.k) {
    case 'obs':
      return `obs${sig(s.sig)}${opts(s)}${'+checkInInside'.repeat(s.inDelivery)}`;
    case 'promise':
      return `promise${sig(s.sig)}${opts(s)}`;
    case 'with':
      return `with(${s.bodyMS}ms${s.early ? ',early' : ''}${s.throws ? ',throws' : ''})${sig(s.sig)}${opts(s)}`;
    case 'with$':
      return `with$(${s.bodyMS}ms${s.early ? ',early' : ''})${opts(s)}`;
    case 'unsubscribe':
      return `unsubscribe#${s.i}`;
    case 'abort':
      return `abort#${s.i}`;
    case 'abortOnCheckedOut':
      return 'abortOnCheckedOut';
    case 'checkIn':
      return `checkIn#${s.i}`;
    case 'checkInAgain':
      return s.foreign ? 'checkInForeign' : `checkInAgain#${s.i}`;
    case 'markErrored':
      return `markErrored#${s.i}`;
    case 'clear':
      return `clear(${[s.interrupt ? 'interrupt' : '', s.cause ? 'cause' : ''].filter(Boolean).join(',')})`;
    case 'ready':
    case 'close':
    case 'warmUp':
      return s.k;
    case 'drain':
      return s.timeoutMS > 0 ? `drain(${s.timeoutMS}ms)` : 'drain';
    case 'advance':
      return `+${s.ms}ms`;
  }
}

function printable(s: Step): Step {
  return Object.defineProperty({ ...s }, fc.toStringMethod, { value: () => describeStep(s), enumerable: false });
}

const signal: fc.Arbitrary<Signal> = fc.constantFrom<Signal>('none', 'none', 'live', 'live', 'pre');
const index = fc.nat(15);
const bodyMS = fc.integer({ min: 0, max: 60 });
/** About one checkout in six is high-priority, and one in six has its own deadline. */
const checkOutOptions: fc.Arbitrary<CheckOutStepOptions> = fc.record({
  high: fc.constantFrom(false, false, false, false, false, true),
  timeoutMS: fc.oneof({ weight: 5, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.integer({ min: 1, max: 200 }) }),
});

export const stepArb: fc.Arbitrary<Step> = fc
  .oneof(
    // Weights out of ~800: close and drain are rare (everything after them fails fast), time passes often, and ready
    // comes often enough that clears (explicit, or by establishment errors) do not leave the pool paused for long.
    { weight: 160, arbitrary: fc.integer({ min: 0, max: 60 }).map((ms): Step => ({ k: 'advance', ms })) },
    {
      weight: 80,
      arbitrary: fc.record({ sig: signal, inDelivery: fc.constantFrom<0 | 1 | 2>(0, 0, 0, 1, 2), o: checkOutOptions }).map(({ o, ...r }): Step => ({ k: 'obs', ...r, ...o })),
    },
    { weight: 80, arbitrary: fc.record({ sig: signal, o: checkOutOptions }).map(({ sig, o }): Step => ({ k: 'promise', sig, ...o })) },
    {
      weight: 40,
      arbitrary: fc.record({ sig: signal, bodyMS, early: fc.boolean(), throws: fc.boolean(), o: checkOutOptions }).map(({ o, ...r }): Step => ({ k: 'with', ...r, ...o })),
    },
    { weight: 40, arbitrary: fc.record({ bodyMS, early: fc.boolean(), o: checkOutOptions }).map(({ o, ...r }): Step => ({ k: 'with$', ...r, ...o })) },
    { weight: 20, arbitrary: index.map((i): Step => ({ k: 'unsubscribe', i })) },
    { weight: 20, arbitrary: index.map((i): Step => ({ k: 'abort', i })) },
    { weight: 20, arbitrary: fc.constant<Step>({ k: 'abortOnCheckedOut' }) },
    { weight: 110, arbitrary: index.map((i): Step => ({ k: 'checkIn', i })) },
    { weight: 20, arbitrary: fc.record({ i: index, foreign: fc.boolean() }).map((r): Step => ({ k: 'checkInAgain', ...r })) },
    { weight: 16, arbitrary: index.map((i): Step => ({ k: 'markErrored', i })) },
    { weight: 12, arbitrary: fc.record({ interrupt: fc.boolean(), cause: fc.boolean() }).map((r): Step => ({ k: 'clear', ...r })) },
    { weight: 120, arbitrary: fc.constant<Step>({ k: 'ready' }) },
    { weight: 1, arbitrary: fc.constant<Step>({ k: 'close' }) },
    { weight: 1, arbitrary: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 300 })).map((timeoutMS): Step => ({ k: 'drain', timeoutMS })) },
    { weight: 6, arbitrary: fc.constant<Step>({ k: 'warmUp' }) },
  )
  .map(printable);

/**
 * Long step sequences: lengths spread evenly over 0..maxLength (fast-check's default bias favours short arrays), so
 * most runs take hundreds of steps, while shrinking may still go down to a handful.
 */
export function stepsArb(maxLength: number): fc.Arbitrary<Step[]> {
  return fc.noBias(fc.array(stepArb, { maxLength, size: 'max' }));
}

export const scenarioArb: fc.Arbitrary<Scenario> = fc
  .record({
    maxPoolSize: fc.integer({ min: 0, max: 5 }),
    minPoolSize: fc.integer({ min: 0, max: 3 }),
    maxConnecting: fc.integer({ min: 1, max: 3 }),
    waitQueueTimeoutMS: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 200 })),
    maxIdleTimeMS: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 300 })),
    backgroundThreadIntervalMS: fc.oneof(fc.constant(-1), fc.integer({ min: 1, max: 200 })),
    // Instant establishments (0 ms) are an edge case of their own: they complete within the step that started them.
    establishDelayMS: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 50 })),
    jitterMS: fc.array(fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 30 })), { minLength: 1, maxLength: 8 }),
    // A failure profile per scenario: from a healthy server to one that refuses most connections.
    failures: fc
      .constantFrom<readonly Failure[]>(['ok'], ['ok', 'ok', 'ok', 'ok', 'ok', 'clears', 'overload'], ['ok', 'clears', 'overload', 'overload'])
      .chain((kinds) => fc.array(fc.constantFrom(...kinds), { minLength: 1, maxLength: 12 })),
    // The extensions, each on in about a third of the scenarios, with values small enough to matter within a script:
    // a WaitQueue of a few checkouts, lifetimes of a few establishments (jitter up to the whole lifetime), leak
    // thresholds of a few body lengths.
    maxWaitQueueSize: fc.oneof({ weight: 2, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.integer({ min: 1, max: 5 }) }),
    maxLifeTimeMS: fc.oneof({ weight: 2, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.integer({ min: 50, max: 500 }) }),
    maxLifeTimeJitterMS: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 500 })),
    leakDetectionThresholdMS: fc.oneof({ weight: 2, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.integer({ min: 20, max: 200 }) }),
  })
  .map((o) => ({
    ...o,
    minPoolSize: o.maxPoolSize === 0 ? o.minPoolSize : Math.min(o.minPoolSize, o.maxPoolSize),
    maxLifeTimeJitterMS: Math.min(o.maxLifeTimeJitterMS, o.maxLifeTimeMS),
  }));
