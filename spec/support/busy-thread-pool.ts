/**
 * Occupies every thread of Node's thread pool (UV_THREADPOOL_SIZE, 4 by default) without using the CPU: each thread
 * blocks opening a FIFO for reading until a writer comes. Meanwhile DNS lookups (getaddrinfo), file reads, crypto and
 * zlib work on the pool wait, as they do in a process whose threads are all busy (slow lookups, a burst of pbkdf2,
 * large compressions). Linux and macOS only (mkfifo).
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

/** A thread pool held busy: `release()` frees its threads, and resolves once every one is free again (idempotent). */
export interface BusyThreadPool {
  release(): Promise<void>;
}

/** Holds every thread of the pool; resolves once a probe queued behind the holds (fs.stat) shows the pool is busy. */
export async function occupyThreadPool(): Promise<BusyThreadPool> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rxcmap-busy-'));
  const fifo = path.join(dir, 'hold');
  execFileSync('mkfifo', [fifo]);
  const threads = Number(process.env.UV_THREADPOOL_SIZE ?? 4);
  const opened = Array.from({ length: threads }, () => fs.promises.open(fifo, 'r'));
  const probe = fs.promises.stat(dir).then(() => 'ran');
  let released: Promise<void> | undefined;
  const free = async (): Promise<void> => {
    // A writer unblocks every reader waiting on the FIFO.
    const writer = fs.openSync(fifo, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK);
    for (const handle of await Promise.all(opened)) await handle.close();
    fs.closeSync(writer);
    await probe;
    fs.rmSync(dir, { recursive: true, force: true });
  };
  const pool = { release: () => (released ??= free()) };
  // The pool is busy once a stat queued behind the holds has not run within 100 ms.
  const busy = await Promise.race([probe, new Promise((resolve) => setTimeout(() => resolve('busy'), 100))]);
  if (busy !== 'busy') {
    await pool.release();
    throw new Error(`the thread pool is not held: UV_THREADPOOL_SIZE is ${threads}, yet a stat ran`);
  }
  return pool;
}
