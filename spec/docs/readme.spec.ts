/**
 * README snippets compile as written: every ```ts block of README.md is type-checked (strict) as its own module,
 * importing `rxcmap`, `rxcmap/testing` and `rxcmap/opentelemetry` as a user would (mapped to lib/ here). A block that names something the
 * library does not export, or uses an undefined variable, fails this spec.
 */
import { expect } from 'chai';
import * as fs from 'node:fs';
import * as path from 'node:path';
import ts from 'typescript';

const root = path.resolve(__dirname, '../..');

/** The ```ts blocks of a Markdown text, with the line each starts on. */
export function typeScriptBlocks(markdown: string): { line: number; code: string }[] {
  const blocks: { line: number; code: string }[] = [];
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (lines[i].trim() !== '```ts') continue;
    const start = i + 1;
    let end = start;
    while (end < lines.length && lines[end].trim() !== '```') end++;
    blocks.push({ line: start + 1, code: lines.slice(start, end).join('\n') });
    i = end;
  }
  return blocks;
}

/** Type-checks each block as a module; returns the diagnostics, each naming the README line. */
function typeCheck(blocks: { line: number; code: string }[]): string[] {
  const files = new Map(blocks.map((b, i) => [path.join(root, 'spec/docs', `readme-snippet-${i}.ts`), b]));
  const options: ts.CompilerOptions = {
    strict: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.ES2022,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    lib: ['lib.es2022.d.ts'],
    types: ['node'],
    noEmit: true,
    skipLibCheck: true,
    esModuleInterop: true,
    baseUrl: root,
    paths: { rxcmap: ['lib/index.ts'], 'rxcmap/testing': ['lib/testing/index.ts'], 'rxcmap/opentelemetry': ['lib/opentelemetry/index.ts'] },
  };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (name, version, onError) => {
    const block = files.get(path.resolve(name));
    // `export {}` makes each block a module, so top-level await is allowed as in an ES module.
    return block !== undefined ? ts.createSourceFile(name, `${block.code}\nexport {};\n`, version) : getSourceFile(name, version, onError);
  };
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (name) => files.has(path.resolve(name)) || fileExists(name);
  const program = ts.createProgram([...files.keys()], options, host);
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const block = d.file ? files.get(path.resolve(d.file.fileName)) : undefined;
    const where = block && d.file && d.start !== undefined ? `README.md:${block.line + d.file.getLineAndCharacterOfPosition(d.start).line}` : (d.file?.fileName ?? '');
    return `${where}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
  });
}

describe('README.md', function () {
  this.timeout(60_000);

  it('has TypeScript snippets, and every one of them compiles as written', function () {
    const blocks = typeScriptBlocks(fs.readFileSync(path.join(root, 'README.md'), 'utf8'));
    expect(blocks.length).to.be.at.least(7);
    expect(typeCheck(blocks)).to.deep.equal([]);
  });

  it('a snippet that uses an undefined name or a missing export fails the check', function () {
    const diagnostics = typeCheck([
      { line: 1, code: "import { ConnectionPool } from 'rxcmap';\nnew ConnectionPool({ address: 'h' }).clear({ cause: error });" },
      { line: 10, code: "import { NoSuchThing } from 'rxcmap';\nconsole.log(NoSuchThing);" },
    ]);
    expect(diagnostics.join('\n')).to.match(/README.md:2: Cannot find name 'error'/);
    expect(diagnostics.join('\n')).to.match(/README.md:10: .*has no exported member 'NoSuchThing'/);
  });
});
