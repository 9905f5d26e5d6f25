/**
 * The vocabulary of the pool property test (connection-pool.property.spec.ts): random pool scenarios (options,
 * establishment timing and failures) and random steps a pool's users and its environment take. Every step prints
 * compactly (`fc.toStringMethod`), so a shrunk counterexample reads as a short script.
 */
import * as fc from 'fast-check';

/** How a checkout is cancellable: no signal, a signal aborted later (maybe), or one aborted before it starts. */
export type Signal = 'none' | 'live' | 'pre';

export type Step =
  /** Observable checkout (subscribe); `inDelivery`: check-ins made from inside the delivery (2 = a duplicate). */
  | { readonly k: 'obs'; readonly sig: Signal; readonly inDelivery: 0 | 1 | 2 }
  /** Promise checkout (`then`). */
  | { readonly k: 'promise'; readonly sig: Signal }
  /** `withConnection` with a body that ends `bodyMS` later; `early`: the body checks the connection in itself first. */
  | { readonly k: 'with'; readonly sig: Signal; readonly bodyMS: number; readonly early: boolean; readonly throws: boolean }
  /** `withConnection$` with an inner Observable that completes `bodyMS` later. */
  | { readonly k: 'with$'; readonly bodyMS: number; readonly early: boolean }
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
}

export function describeStep(s: Step): string {
  const sig = (x: Signal): string => (x === 'none' ? '' : x === 'live' ? '!sig' : '!preAborted');
  switch (s.k) {
    case 'obs':
      return `obs${sig(s.sig)}${'+checkInInside'.repeat(s.inDelivery)}`;
    case 'promise':
      return `promise${sig(s.sig)}`;
    case 'with':
      return `with(${s.bodyMS}ms${s.early ? ',early' : ''}${s.throws ? ',throws' : ''})${sig(s.sig)}`;
    case 'with$':
      return `with$(${s.bodyMS}ms${s.early ? ',early' : ''})`;
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
      return s.k;
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

export const stepArb: fc.Arbitrary<Step> = fc
  .oneof(
    // Weights out of ~800: close is rare (everything after it fails fast), time passes often, and ready comes
    // often enough that clears (explicit, or by establishment errors) do not leave the pool paused for long.
    { weight: 160, arbitrary: fc.integer({ min: 0, max: 60 }).map((ms): Step => ({ k: 'advance', ms })) },
    { weight: 80, arbitrary: fc.record({ sig: signal, inDelivery: fc.constantFrom<0 | 1 | 2>(0, 0, 0, 1, 2) }).map((r): Step => ({ k: 'obs', ...r })) },
    { weight: 80, arbitrary: signal.map((sig): Step => ({ k: 'promise', sig })) },
    { weight: 40, arbitrary: fc.record({ sig: signal, bodyMS, early: fc.boolean(), throws: fc.boolean() }).map((r): Step => ({ k: 'with', ...r })) },
    { weight: 40, arbitrary: fc.record({ bodyMS, early: fc.boolean() }).map((r): Step => ({ k: 'with$', ...r })) },
    { weight: 20, arbitrary: index.map((i): Step => ({ k: 'unsubscribe', i })) },
    { weight: 20, arbitrary: index.map((i): Step => ({ k: 'abort', i })) },
    { weight: 20, arbitrary: fc.constant<Step>({ k: 'abortOnCheckedOut' }) },
    { weight: 110, arbitrary: index.map((i): Step => ({ k: 'checkIn', i })) },
    { weight: 20, arbitrary: fc.record({ i: index, foreign: fc.boolean() }).map((r): Step => ({ k: 'checkInAgain', ...r })) },
    { weight: 16, arbitrary: index.map((i): Step => ({ k: 'markErrored', i })) },
    { weight: 12, arbitrary: fc.record({ interrupt: fc.boolean(), cause: fc.boolean() }).map((r): Step => ({ k: 'clear', ...r })) },
    { weight: 120, arbitrary: fc.constant<Step>({ k: 'ready' }) },
    { weight: 1, arbitrary: fc.constant<Step>({ k: 'close' }) },
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
  })
  .map((o) => ({ ...o, minPoolSize: o.maxPoolSize === 0 ? o.minPoolSize : Math.min(o.minPoolSize, o.maxPoolSize) }));
