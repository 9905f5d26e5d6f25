/**
 * The caller's frames on a failed checkout. A pool error is built where the pool decides (a WaitQueue timer,
 * `close()` refusing a checkout), so its own stack holds only the pool's frames; the `await` that receives it lies in
 * another chain. The checkout's Promise form therefore calls the caller's rejection callback from a native Promise
 * step in which V8's async stack trace still reaches the awaiting functions, and appends their `at async` frames to
 * the error's stack, as the MongoDB Node.js driver's async `checkOut` gives them to its WaitQueueTimeoutError. Only an
 * error that reached one caller gets them: one a clear or a close gave every waiter, or one that several `then`s of
 * a request received, belongs to no single caller.
 *
 * Source: extension (V8's zero-cost async stack traces; the MongoDB Node.js driver's checkout errors carry them).
 */
import { CheckOutCancelledError, CmapError, isInstance } from '../errors';

/**
 * Whether this Node.js keeps an Error's stack as V8's lazy accessor (22 and later). On 20 it is a value, and reading
 * its property descriptor formats it: that would cost every failed checkout what the frames are meant to save.
 */
const LAZY_STACKS = typeof Object.getOwnPropertyDescriptor(new Error(), 'stack')?.get === 'function';

/** How many checkouts each error failed, counted as the pool fails them (a clear's error fails every waiter). */
const failures = new WeakMap<object, number>();
/** Errors whose stack has had the caller's frames appended. */
const extended = new WeakSet<object>();

/**
 * Counts one more caller of `error`, when it may take caller frames: the pool calls it for each checkout it fails,
 * and the Promise form for each `then` after the first that receives one checkout's failure.
 */
export function countFailure(error: Error): void {
  if (takesCallerFrames(error)) failures.set(error, (failures.get(error) ?? 0) + 1);
}

/**
 * Whether the Promise form hands `error` on through {@link rejectWithCallerFrames}: on Node.js 22 and later only (on
 * 20 every rejection keeps its former path), an rxcmap error, except CheckOutCancelledError (built without frames on
 * purpose: the abort's own stack is in its cause, and a cancel must stay cheap), and never an error of user code (a
 * factory's), whose stack is its owner's.
 */
export function takesCallerFrames(error: unknown): error is Error {
  return LAZY_STACKS && isInstance(error, CmapError) && !isInstance(error, CheckOutCancelledError);
}

/** What the step that reads the frames throws, so that its Promise never fulfils: nothing else reads it. */
const STEP_DONE = Symbol('caller frames read');
const ignore = (): void => {};

/**
 * Calls `settle` (which calls the `then`'s rejection callback) on the next microtask, as the Promise form calls every
 * callback, so that outcomes reach their callers in the order the pool committed them. That microtask is a native
 * Promise step with one reaction, `onfulfilled`: for an `await`, the resolving function of the Promise it awaits, which
 * V8 follows to the awaiting async functions. Their frames are appended to `error.stack` first (see
 * {@link appendCallerFrames}).
 */
export function rejectWithCallerFrames(error: Error, onfulfilled: ((value: never) => unknown) | null | undefined, settle: () => void): void {
  const step = SETTLED.then(() => {
    appendCallerFrames(error);
    settle();
    throw STEP_DONE;
  });
  // Attached before the step runs, so that V8 finds the one reaction and follows it; never called, as the step throws.
  void step.then(onfulfilled, ignore);
}

/**
 * Appends the `at async` frames of the code running now to `error.stack`, when `error` failed exactly one checkout and
 * has not had them appended yet. They are captured now and formatted when the stack is first read, as V8 formats any
 * stack: formatting them at once made 10,000 timeouts take 330 ms instead of 143 ms (Node.js 24).
 * Until then, as with any Error built inside an async function (the MongoDB Node.js driver's WaitQueueTimeoutError
 * included), the captured frames keep their functions' receivers alive; reading the stack lets them go. Where the stack
 * is a plain value rather than V8's lazy accessor, nothing is appended. Never throws: a stack that cannot be captured,
 * read or replaced (a frozen error, a hardened realm, an `Error.prepareStackTrace` that returns no string) stays as it
 * was. `Error.stackTraceLimit` bounds the frames captured here, as for any capture: the step's own frames count in it,
 * and `at async` ones fill the rest.
 */
export function appendCallerFrames(error: Error): void {
  if (failures.get(error) !== 1 || extended.has(error)) return;
  extended.add(error);
  try {
    const own = Object.getOwnPropertyDescriptor(error, 'stack');
    const read = own?.get;
    const write = own?.set;
    if (read === undefined || write === undefined) return;
    let site: { stack?: unknown } | undefined = {};
    Error.captureStackTrace(site);
    let frames = '';
    Object.defineProperty(error, 'stack', {
      configurable: true,
      enumerable: own!.enumerable === true,
      get: () => {
        if (site !== undefined) {
          frames = asyncFrames(site.stack);
          site = undefined; // formatted once; the captured frames are let go
        }
        const stack: unknown = read.call(error);
        return frames !== '' && typeof stack === 'string' ? withFrames(stack, frames) : stack;
      },
      set: (value: unknown) => {
        write.call(error, value);
        site = undefined;
        frames = ''; // what was assigned is read as it was
      },
    });
  } catch {
    // The stack stays as it was.
  }
}

/**
 * `stack` followed by those of `frames` it does not hold yet. An error built inside the first `then` of an `await`
 * (a checkout refused at once) already has its awaiting functions' frames on Node.js 26, whose V8 follows that call.
 */
function withFrames(stack: string, frames: string): string {
  const missing = frames.split('\n').filter((line) => !stack.includes(line));
  return missing.length === 0 ? stack : `${stack}\n${missing.join('\n')}`;
}

/** The `at async` lines of a captured stack, joined; empty when it is no string or has none. */
function asyncFrames(stack: unknown): string {
  if (typeof stack !== 'string') return '';
  return stack
    .split('\n')
    .filter((line) => line.startsWith('    at async '))
    .join('\n');
}

/** A settled Promise, to start the step in which the caller's frames are read. */
const SETTLED = Promise.resolve();
