/**
 * The pool as it was before its opt-in extensions, measured beside the current one to show what the extensions cost
 * a pool that does not use them: the library of commit {@link BASELINE_COMMIT} (the last one before leak detection,
 * the diagnostics channels, drain, priority checkouts, the bounded WaitQueue, connection lifetime, warm-up,
 * per-checkout deadlines and TCP keepalive), extracted with `git archive` into `bench/.baseline/` (ignored by git)
 * and loaded by ts-node beside the current `lib/`, with the same dependencies.
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { ConnectionPool } from '../lib';

/** The last commit before the extensions. */
export const BASELINE_COMMIT = '5fb6a15';

/** What the benchmark uses of the baseline library. */
export interface BaselineLibrary {
  readonly ConnectionPool: typeof ConnectionPool;
}

/**
 * The baseline library, extracted on first use, or why it cannot be (no git, or a clone without that commit): the
 * benchmark then reports the comparison as not measured.
 */
export function loadBaseline(): BaselineLibrary | string {
  const root = path.join(__dirname, '..');
  const dir = path.join(__dirname, '.baseline', BASELINE_COMMIT);
  try {
    if (!fs.existsSync(path.join(dir, 'lib', 'index.ts'))) {
      fs.rmSync(dir, { recursive: true, force: true });
      fs.mkdirSync(dir, { recursive: true });
      const archive = execFileSync('git', ['-C', root, 'archive', '--format=tar', BASELINE_COMMIT, 'lib'], { maxBuffer: 64 * 2 ** 20 });
      execFileSync('tar', ['-x', '-C', dir], { input: archive });
    }
    return require(path.join(dir, 'lib')) as BaselineLibrary;
  } catch (error) {
    fs.rmSync(dir, { recursive: true, force: true });
    return `commit ${BASELINE_COMMIT} could not be extracted (${error instanceof Error ? error.message.split('\n')[0] : String(error)})`;
  }
}
