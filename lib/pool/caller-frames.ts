/**
 * The caller's frames on a failed checkout. A pool error is built where the pool decides (a WaitQueue timer, a
 * clear, `close()`), so its own stack holds only the pool's frames; the `await` that receives it lies in another
 * chain. The checkout's Promise form therefore rejects through one native Promise step in which V8's async stack
 * trace still reaches the awaiting functions, and appends their `at async` frames to the error's stack, as the
 * MongoDB Node.js driver's async `checkOut` gives them to its WaitQueueTimeoutError.
 *
 * Source: extension (V8's zero-cost async stack traces; the MongoDB Node.js driver's checkout errors carry them).
 */
import { CheckOutCancelledError, CmapError, isInstance } from '../errors';

/** Errors whose stack has had the frames of the first `await` it reached appended. */
const extended = new WeakSet<object>();

/**
 * Whether the Promise form hands `error` on through {@link rejectWithCallerFrames}: an rxcmap error, except
 * CheckOutCancelledError (built without frames on purpose: the abort's own stack is in its cause, and a cancel must
 * stay cheap), and never an error of user code (a factory's), whose stack is its owner's.
 */
export function takesCallerFrames(error: unknown): error is Error {
  return isInstance(error, CmapError) && !isInstance(error, CheckOutCancelledError);
}

/**
 * The Promise of one `then` of a failed checkout: it settles as `Promise.reject(error).then(onfulfilled, onrejected)`
 * does, two microtasks later. In the first, whose promise chain leads to the caller's `await` (the await's resolving
 * function is `onfulfilled`), the caller's async frames are appended to `error.stack` (see
 * {@link appendCallerFrames}).
 */
export function rejectWithCallerFrames(
  error: Error,
  onfulfilled: ((value: never) => unknown) | null | undefined,
  onrejected: ((reason: unknown) => unknown) | null | undefined,
): Promise<unknown> {
  // `then` is attached before the first step runs, so that V8 finds that step's one reaction and follows it.
  const failed = SETTLED.then(() => {
    appendCallerFrames(error);
    throw error;
  });
  return failed.then(onfulfilled, onrejected);
}

/**
 * Appends the `at async` frames of the code running now (read from a stack captured here) to `error.stack`, once
 * per error: a second caller sharing the same error finds it already extended. Never throws: a stack that cannot be
 * captured, read or written (a hardened realm, an `Error.prepareStackTrace` that returns no string) stays as it was;
 * `Error.stackTraceLimit` bounds the frames, as it bounds any stack.
 */
export function appendCallerFrames(error: Error): void {
  if (extended.has(error)) return;
  extended.add(error);
  try {
    const site: { stack?: unknown } = {};
    Error.captureStackTrace(site);
    if (typeof site.stack !== 'string') return;
    const frames = site.stack.split('\n').filter((line) => line.startsWith('    at async '));
    if (frames.length > 0) error.stack = `${String(error.stack)}\n${frames.join('\n')}`;
  } catch {
    // The stack stays as it was.
  }
}

/** A settled Promise, to start the step in which the caller's frames are read. */
const SETTLED = Promise.resolve();
