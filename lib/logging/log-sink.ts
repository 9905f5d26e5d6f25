/**
 * Log destinations: stderr, stdout, or a file appended to, each message written as one JSON line (its structured
 * form) through a buffered stream of the log's own; or a sink object of the application's.
 *
 * A destination that fails never reaches the application: a closed pipe (EPIPE, say `node app | head`), a file that
 * cannot be opened or written, or a sink whose `write` throws is switched off after its first failure, with one
 * process warning (`process.emitWarning`, code `RXCMAP_LOG_SINK_FAILED`) saying why. Nothing is thrown.
 *
 * Source: logging spec, "Configurable Log Destination"; extension: failure isolation and buffering.
 */
import * as fs from 'node:fs';
import type { LogSink } from './log-settings';

/**
 * Opens the sink for `path`: `stderr`, `stdout` (case-insensitive), a file path (appended to; created if missing;
 * stderr when it cannot be opened), or a sink object. The sink returned never throws from `write`; its `close`
 * flushes what is buffered (the Promise settles when it is written) and closes a file it opened.
 */
export function openLogSink(path: string | LogSink): LogSink {
  if (typeof path !== 'string') return guarded(path, 'the log sink');
  const lower = path.toLowerCase();
  if (lower === 'stdout') return streamSink(fs.createWriteStream('', { fd: 1, autoClose: false }), 'stdout');
  if (lower === 'stderr') return streamSink(fs.createWriteStream('', { fd: 2, autoClose: false }), 'stderr');
  let fd: number;
  try {
    fd = fs.openSync(path, 'a');
  } catch (error) {
    warn(`the log file could not be opened (${(error as Error).message}); logging to stderr instead`);
    return streamSink(fs.createWriteStream('', { fd: 2, autoClose: false }), 'stderr');
  }
  return streamSink(fs.createWriteStream('', { fd, autoClose: true }), 'the log file');
}

/** A sink over a write stream of its own: buffered, switched off (with a warning) at its first error. */
function streamSink(stream: fs.WriteStream, name: string): LogSink {
  let failed = false;
  stream.on('error', (error) => {
    if (failed) return;
    failed = true;
    warn(`${name} failed (${error.message}); logging to it stopped`);
  });
  return {
    write(message) {
      if (!failed && !stream.destroyed) stream.write(`${JSON.stringify(message)}\n`);
    },
    close() {
      return new Promise<void>((resolve) => {
        if (failed || stream.destroyed || stream.writableEnded) return resolve();
        stream.end(() => resolve());
      });
    },
  };
}

/** An application's sink, whose `write` or `close` may throw: switched off at its first failure, with a warning. */
function guarded(sink: LogSink, name: string): LogSink {
  let failed = false;
  const fail = (error: unknown): void => {
    if (failed) return;
    failed = true;
    warn(`${name} threw (${error instanceof Error ? error.message : String(error)}); logging to it stopped`);
  };
  return {
    write(message) {
      if (failed) return;
      try {
        sink.write(message);
      } catch (error) {
        fail(error);
      }
    },
    close() {
      try {
        return sink.close?.();
      } catch (error) {
        fail(error);
      }
    },
  };
}

function warn(text: string): void {
  process.emitWarning(`rxcmap: ${text}`, { code: 'RXCMAP_LOG_SINK_FAILED' });
}
