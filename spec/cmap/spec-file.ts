/**
 * The CMAP test format (JSON), as typed data, and where the files are read from: `CMAP_SPEC_DIR` when set, else
 * `../shared/spec-tests/cmap-format` beside the repository.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

export interface CmapOperation {
  name: 'start' | 'wait' | 'waitForThread' | 'waitForEvent' | 'checkOut' | 'checkIn' | 'clear' | 'close' | 'ready';
  thread?: string;
  target?: string;
  ms?: number;
  event?: string;
  count?: number;
  timeout?: number;
  label?: string;
  connection?: string;
  interruptInUseConnections?: boolean;
}

export interface CmapSpecFile {
  version: number;
  style: 'unit' | 'integration';
  description: string;
  poolOptions?: Record<string, unknown>;
  operations: CmapOperation[];
  error?: Record<string, unknown>;
  events?: Record<string, unknown>[];
  ignore?: string[];
  runOn?: { minServerVersion?: string; maxServerVersion?: string }[];
  failPoint?: Record<string, unknown>;
}

/** The directory of the official CMAP tests. */
export function specDirectory(): string {
  return process.env.CMAP_SPEC_DIR ?? path.resolve(__dirname, '../../../shared/spec-tests/cmap-format');
}

/** Every `*.json` test file in `dir`, sorted by name. */
export function loadSpecFiles(dir: string): { file: string; spec: CmapSpecFile }[] {
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((file) => ({ file, spec: JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8')) as CmapSpecFile }));
}
