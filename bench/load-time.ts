/**
 * What loading a package costs a process that starts cold (a serverless function, a CLI): the time `require()` takes
 * in a fresh Node.js process, for the package as it is shipped (compiled JavaScript), against the official driver's
 * and against rxjs alone (rxcmap's peer dependency, which an application using it loads anyway).
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { roundOrder } from './round-order';
import { median } from './stats';

const root = path.resolve(__dirname, '..');

/** The packages timed: rxcmap's main entry as compiled, the official driver, and rxjs alone. */
export const LOADED = ['rxcmap', 'mongodb', 'rxjs'] as const;
export type Loaded = (typeof LOADED)[number];

/**
 * Compiles lib/ as `npm run build` does, into a folder of its own under bench/ (so that it resolves the repository's
 * node_modules), and gives the path of its main entry.
 */
function buildPackage(): string {
  const outDir = path.join(root, 'bench', '.load-dist');
  fs.rmSync(outDir, { recursive: true, force: true });
  const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  const r = spawnSync(process.execPath, [tsc, '-p', path.join(root, 'tsconfig.build.json'), '--outDir', outDir], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`tsc for the load-time bench failed: ${r.stdout}${r.stderr}`);
  return path.join(outDir, 'index.js');
}

/** ms one `require(specifier)` takes in a fresh process (timed inside it, so the process's own start is left out). */
function timeRequire(specifier: string): number {
  const script = `const t = process.hrtime.bigint(); require(${JSON.stringify(specifier)}); process.stdout.write(String(Number(process.hrtime.bigint() - t) / 1e6));`;
  const r = spawnSync(process.execPath, ['-e', script], { cwd: root, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`require(${specifier}) failed: ${r.stderr}`);
  return Number(r.stdout);
}

/** The median ms of `require()` for each of {@link LOADED}, over `processes` fresh processes each, in rotating order. */
export function loadTimes(processes: number): Record<Loaded, number> {
  const entry = buildPackage();
  const specifiers: Record<Loaded, string> = { rxcmap: entry, mongodb: 'mongodb', rxjs: 'rxjs' };
  const samples: Record<Loaded, number[]> = { rxcmap: [], mongodb: [], rxjs: [] };
  for (let i = 0; i < processes; i++) {
    for (const kind of roundOrder(LOADED, i)) samples[kind].push(timeRequire(specifiers[kind]));
  }
  return { rxcmap: median(samples.rxcmap), mongodb: median(samples.mongodb), rxjs: median(samples.rxjs) };
}
