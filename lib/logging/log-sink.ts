/**
 * Log destinations: stderr, stdout, or a file appended to, each message written as one JSON line (its structured
 * form) through a buffered stream of the log's own; or a sink object of the application's.
 *
 * A destination that fails never reaches the application: a closed pipe (EPIPE, say `node app | head`), a file that
 * cannot be opened or written, or a sink whose `write` throws (or returns a Promise that rejects) is switched off
 * after its first failure, with one process warning (`process.emitWarning`, code `RXCMAP_LOG_SINK_FAILED`) saying
 * why. Nothing is thrown.
 *
 * Source: logging spec, "Configurable Log Destination"; extension: failure isolation and buffering.
 */
import * as fs from 'node:fs';
import { inWords } from '../errors';
import { withPermissionRefusal } from '../permission-model';
import { ignore, isPromiseLike } from '../pool/connection-checks';
import type { LogSink } from './log-settings';

/**
 * Opens the sink for `path`: `stderr`, `stdout` (case-insensitive), a file path (appended to; created if missing;
 * stderr when it cannot be opened), or a sink object. The sink returned never throws from `write`; its `close` (none
 * for a sink object, which stays the application's to close) flushes what is buffered (the Promise settles when it
 * is written) and closes a file it opened. A destination of its own (not a sink object) still takes messages written
 * after `close`: each burst of them is written, in order after everything before, through the destination opened
 * again and closed once they are written, so nothing is lost and no file stays open between bursts. A sink this
 * function returned is given back as it is: it already never throws, so it is not guarded again.
 */
export function openLogSink(path: string | LogSink): LogSink {
  if (typeof path !== 'string' && opened.has(path)) return path;
  const sink = openSink(path);
  opened.add(sink);
  return sink;
}

/** The sinks {@link openLogSink} returned: given to it again (a client's destination, handed to its pools), as is. */
const opened = new WeakSet<LogSink>();

function openSink(path: string | LogSink): LogSink {
  if (typeof path !== 'string') return guarded(path, 'the log sink');
  const lower = path.toLowerCase();
  if (lower === 'stdout') return streamSink(() => standardStream(1), 'stdout');
  if (lower === 'stderr') return streamSink(() => standardStream(2), 'stderr');
  let first: fs.WriteStream;
  try {
    first = fs.createWriteStream('', { fd: fs.openSync(path, 'a'), autoClose: true });
  } catch (error) {
    warn(`the log file could not be opened (${reason(error)}); logging to stderr instead`);
    return streamSink(() => standardStream(2), 'stderr');
  }
  // Opened again after close only as a regular file (or to create one): opening a FIFO or a device would block the
  // event loop until a reader comes, and the reader of a closed log may be gone.
  const openAgain = (): fs.WriteStream => {
    const stats = fs.statSync(path, { throwIfNoEntry: false });
    if (stats !== undefined && !stats.isFile()) throw new Error('it is not a regular file, so it is not opened again after close');
    return fs.createWriteStream('', { fd: fs.openSync(path, 'a'), autoClose: true });
  };
  return streamSink(openAgain, 'the log file', first, true);
}

/**
 * A write stream of the log's own over stdout (`fd` 1) or stderr (2), never closing it. Once `process.stdout` or
 * `process.stderr` is used, in any thread (a `console.log`, a worker's output forwarded by the main thread), Node leaves
 * that descriptor non-blocking when it is a pipe or a socket (a shell pipe, a container's log driver, a parent
 * process): a write to it while its reader is behind fails with EAGAIN. A plain `fs.WriteStream` tries such a write
 * again only five times at once, then fails, and the log would stop; here it is tried again until the reader made
 * room, as Node's own stdout waits for it.
 */
function standardStream(fd: 1 | 2): fs.WriteStream {
  return fs.createWriteStream('', { fd, autoClose: false, fs: WAITING_FS });
}

/** The longest wait, in ms, between two tries of a write that found a standard stream's pipe full. */
const MAX_FULL_PIPE_WAIT_MS = 50;

/**
 * `fs.write` and `fs.writev` that try a write again when the pipe is full (EAGAIN), after 1 ms, then twice as long
 * each time up to {@link MAX_FULL_PIPE_WAIT_MS}; every other outcome is passed on as it came.
 */
const WAITING_FS = {
  open: fs.open,
  close: fs.close,
  write(fd: number, buffer: Uint8Array, offset: number, length: number, position: number | null, callback: (error: NodeJS.ErrnoException | null, written: number, buffer: Uint8Array) => void): void {
    untilRoom((done) => fs.write(fd, buffer, offset, length, position, done), callback);
  },
  writev(fd: number, buffers: NodeJS.ArrayBufferView[], position: number | null, callback: (error: NodeJS.ErrnoException | null, written: number, buffers: NodeJS.ArrayBufferView[]) => void): void {
    untilRoom((done) => fs.writev(fd, buffers, position, done), callback);
  },
};

/** Calls `attempt` until it ends other than with EAGAIN, waiting longer each time (see {@link WAITING_FS}). */
function untilRoom<A extends unknown[]>(attempt: (done: (error: NodeJS.ErrnoException | null, ...rest: A) => void) => void, callback: (error: NodeJS.ErrnoException | null, ...rest: A) => void): void {
  let waitMS = 1;
  const done = (error: NodeJS.ErrnoException | null, ...rest: A): void => {
    if (error?.code !== 'EAGAIN') return callback(error, ...rest);
    setTimeout(() => attempt(done), waitMS);
    waitMS = Math.min(2 * waitMS, MAX_FULL_PIPE_WAIT_MS);
  };
  attempt(done);
}

/**
 * A sink over write streams of its own, `open` making each: buffered; switched off (with a warning) at the first
 * error, of a stream or of opening one again after `close`.
 */
function streamSink(open: () => fs.WriteStream, name: string, first?: fs.WriteStream, closesFile = false): LogSink {
  let failed = false;
  const fail = (error: Error): void => {
    if (failed) return;
    failed = true;
    warn(`${name} failed (${reason(error)}); logging to it stopped`);
  };
  const watch = (stream: fs.WriteStream): fs.WriteStream => stream.on('error', fail);
  /** The open stream; undefined once closed. */
  let stream: fs.WriteStream | undefined = watch(first ?? open());
  /** Settles once every stream ended so far is written and closed. */
  let ended: Promise<void> = Promise.resolve();
  /** The lines written since the last close, waiting for `ended` to be written through a stream opened again. */
  let late: string[] | undefined;
  // Settles once every line is written (or the stream failed) and, for a file (`closesFile`: its streams close their
  // descriptor, stdout's and stderr's never do), once its descriptor is closed: a file's stream reports its failure
  // only then, and the lines written after close must not open it again before.
  const end = (s: fs.WriteStream): Promise<void> =>
    new Promise<void>((resolve) => {
      if (s.closed) return resolve();
      if (closesFile) s.once('close', () => resolve());
      // Written through: done, unless the file's closing is still awaited.
      const written = (): void => {
        if (!closesFile) resolve();
      };
      if (s.destroyed || s.writableEnded) return written();
      s.end(written);
    });
  const writeLate = (): Promise<void> | undefined => {
    const lines = late!;
    late = undefined;
    if (failed) return undefined;
    let again: fs.WriteStream;
    try {
      again = watch(open());
    } catch (error) {
      return void fail(error as Error);
    }
    for (const line of lines) again.write(line);
    return end(again);
  };
  return {
    write(message) {
      if (failed) return;
      const line = `${JSON.stringify(message)}\n`;
      if (stream !== undefined) {
        if (!stream.destroyed) stream.write(line);
      } else if (late !== undefined) {
        late.push(line);
      } else {
        late = [line];
        ended = ended.then(writeLate);
      }
    },
    close() {
      if (stream !== undefined) {
        const s = stream;
        stream = undefined;
        const before = ended;
        ended = Promise.all([before, end(s)]).then(() => undefined);
      }
      return ended;
    },
  };
}

/**
 * An application's sink, whose `write` may throw, or return a Promise that rejects (an async `write`): switched off at
 * its first failure, with a warning. Its Promises are not awaited: messages are handed over in order. It has no
 * `close`: the application's sink is the application's to close.
 */
function guarded(sink: LogSink, name: string): LogSink {
  let failed = false;
  const fail = (error: unknown, how = 'threw'): void => {
    if (failed) return;
    failed = true;
    warn(`${name} ${how} (${inWords(error)}); logging to it stopped`);
  };
  const rejected = (error: unknown): void => fail(error, 'rejected');
  return {
    write(message) {
      if (failed) return;
      try {
        const written: unknown = sink.write(message);
        // A fulfilment handler too: a thenable of the application's may call it without checking it is one.
        if (isPromiseLike(written)) written.then(ignore, rejected);
      } catch (error) {
        fail(error);
      }
    },
  };
}

/**
 * `error`'s message; for a refusal of Node's permission model whose message names no flag (Node.js 20's `Access to
 * this API has been restricted`), with the flag that allows it.
 */
function reason(error: unknown): string {
  return withPermissionRefusal((error as Error).message, error);
}

function warn(text: string): void {
  process.emitWarning(`rxcmap: ${text}`, { code: 'RXCMAP_LOG_SINK_FAILED' });
}
