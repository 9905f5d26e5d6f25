/**
 * ts-node's transpiler for this repository (tsconfig.json, "ts-node"."transpiler"): TypeScript's own
 * `transpileModule`, as ts-node's transpile-only mode runs it, with each file's output kept on disk under
 * node_modules/.cache/rxcmap-transpile, keyed by the file's text, its name, the compiler options and TypeScript's
 * version. The emit is TypeScript's, byte for byte; only its cost is paid once: each process the tests start (the
 * examples, the soak run, the permission-model child) transpiled the library again (1.6 of its 2.2 s of start-up). An
 * output that TypeScript reported diagnostics for is not kept.
 *
 * Written in JavaScript: ts-node loads it before it can load TypeScript files.
 */
'use strict';
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

const CACHE_DIR = path.resolve(__dirname, '../../node_modules/.cache/rxcmap-transpile');

/** @param {{ service: { config: { options: object }, projectLocalResolveHelper: (name: string, relative: boolean) => string } }} options */
exports.create = function create({ service }) {
  const ts = require(service.projectLocalResolveHelper('typescript', true));
  const compilerOptions = service.config.options;
  const optionsKey = `${ts.version}\0${JSON.stringify(compilerOptions)}`;
  return {
    transpile(input, { fileName }) {
      const key = crypto.createHash('sha256').update(optionsKey).update('\0').update(fileName).update('\0').update(input).digest('hex');
      const file = path.join(CACHE_DIR, `${key}.json`);
      try {
        return JSON.parse(fs.readFileSync(file, 'utf8'));
      } catch {
        // Not kept yet (or unreadable): transpiled below.
      }
      const result = ts.transpileModule(input, { fileName, compilerOptions, reportDiagnostics: true });
      if ((result.diagnostics ?? []).length > 0) return result;
      const output = { outputText: result.outputText, sourceMapText: result.sourceMapText };
      try {
        fs.mkdirSync(CACHE_DIR, { recursive: true });
        // Written whole, then renamed: processes that start together never read half a file.
        const temporary = `${file}.${process.pid}.${crypto.randomBytes(4).toString('hex')}`;
        fs.writeFileSync(temporary, JSON.stringify(output));
        fs.renameSync(temporary, file);
      } catch {
        // A read-only or full disk: the output is used, not kept.
      }
      return output;
    },
  };
};
