/**
 * Log destinations: stderr, stdout, or a file appended to; each message written as one JSON line (its structured
 * form). An unusable file falls back to stderr, never throws.
 *
 * Source: logging spec, "Configurable Log Destination".
 */
import * as fs from 'node:fs';
import type { LogSink } from './log-settings';

/** Opens the sink for `path`: `stderr`, `stdout` (case-insensitive), a file path, or a sink object (returned as is). */
export function openLogSink(path: string | LogSink): LogSink {
  if (typeof path !== 'string') return path;
  const lower = path.toLowerCase();
  if (lower === 'stdout') return streamSink(process.stdout);
  if (lower === 'stderr') return streamSink(process.stderr);
  let fd: number;
  try {
    fd = fs.openSync(path, 'a');
  } catch {
    return streamSink(process.stderr);
  }
  return {
    write(message) {
      try {
        fs.writeSync(fd, `${JSON.stringify(message)}\n`);
      } catch {
        // A failing log file must never affect the pool.
      }
    },
    close() {
      try {
        fs.closeSync(fd);
      } catch {
        // already closed
      }
    },
  };
}

function streamSink(stream: NodeJS.WriteStream): LogSink {
  return { write: (message) => void stream.write(`${JSON.stringify(message)}\n`) };
}
