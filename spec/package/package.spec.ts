/**
 * The package as consumers get it. `npm pack` of this repository (whose prepack builds dist/) must hold the compiled
 * entry points, the license and nothing of lib/ or spec/, and every source map in it must carry (inline or ship) the
 * sources it names. Installed into a fresh project beside the lowest rxjs its peer range allows (RXCMAP_CONSUMER_RXJS
 * picks another version), it must leave exactly one rxjs copy; code importing `rxcmap` and `rxcmap/testing` (and
 * implementing the pool's connection contract itself, and forwarding options it did not set as `undefined`) must
 * type-check with `strict`, `exactOptionalPropertyTypes` and `noUncheckedIndexedAccess` under nodenext (CommonJS and
 * ESM), bundler and node10 resolution, compiled by this repository's TypeScript, and, type-checked only, the nodenext
 * CommonJS and node10 ones by the lowest TypeScript the declarations support (5.0.4) and the nodenext and bundler
 * ones by TypeScript 7.0.2 (which has no node10 resolution); a consumer of
 * `rxcmap/opentelemetry` beside the lowest `@opentelemetry/api` its peer range allows must type-check and run too; and
 * the CommonJS, ESM and node10 builds must run a pool against the embedded endpoint with
 * the consumer's own rxjs (a checkout is an `Observable` of it, its `VirtualTimeScheduler` is a pool scheduler, a
 * cancelled checkout fails with the package's CheckOutCancelledError, errors and pools carry their names, a failed
 * checkout's stack names the consumer's function that awaited it), then exit by themselves, the CommonJS one under
 * `node --frozen-intrinsics` too, and bundled and minified by esbuild (which renames every class). Loaded alone, the
 * main entry leaves the connection string parser and SASLprep unloaded until a URI or credentials need them. The consumer's install needs the npm registry, or an npm cache that already holds its packages.
 */
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

const root = path.resolve(__dirname, '../..');
const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

/** Runs a command to completion (killed after `timeoutMs`); never rejects on a non-zero exit. */
function run(command: string, args: string[], cwd: string, timeoutMs: number): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env: childEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const killer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    child.on('error', (err) => {
      clearTimeout(killer);
      reject(err);
    });
    child.on('close', (code) => {
      clearTimeout(killer);
      resolve({ code, stdout, stderr, timedOut });
    });
  });
}

/** This process's environment without what npm sets for the script running it (its package, its own prefix). */
function childEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const key of Object.keys(env)) {
    if (/^(npm_package_|npm_lifecycle_|npm_command$|npm_config_local_prefix$|init_cwd$)/i.test(key)) delete env[key];
  }
  return env;
}

function describeRun(what: string, r: Run): string {
  return `${what}: exit ${r.code}${r.timedOut ? ' (killed: timed out)' : ''}\n${r.stdout}\n${r.stderr}`.trim();
}

async function mustRun(what: string, command: string, args: string[], cwd: string, timeoutMs: number): Promise<Run> {
  const r = await run(command, args, cwd, timeoutMs);
  if (r.code !== 0) throw new Error(describeRun(what, r));
  return r;
}

/** A JSON file's content (package manifests, source maps), untyped. */
function readJson(file: string): any {
  return JSON.parse(fs.readFileSync(file, 'utf8'));
}

/** Every file under `dir`, as `/`-separated paths relative to it. */
function listFiles(dir: string, prefix = ''): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const rel = prefix ? `${prefix}/${entry.name}` : entry.name;
    return entry.isDirectory() ? listFiles(path.join(dir, entry.name), rel) : [rel];
  });
}

/** Every string target of an `exports` value (conditions and subpaths flattened). */
function exportTargets(value: unknown): string[] {
  if (typeof value === 'string') return [value];
  if (value && typeof value === 'object') return Object.values(value).flatMap(exportTargets);
  return [];
}

/** The consumer program: the same text for every module format. */
function program(label: string): string {
  return `import { inspect } from 'node:util';
import { CheckOutCancelledError, ConnectionPool, ConnectionPoolCore, PoolClosedError, type ConnectionFactory, type PoolConnection } from 'rxcmap';
import { EmbeddedServer } from 'rxcmap/testing';
import { Observable, VirtualTimeScheduler } from 'rxjs';

/** A connection of the consumer's own, whose optional fields hold \`undefined\` until they are known. */
class OwnConnection implements PoolConnection {
  errored: boolean | undefined = undefined;
  error: Error | undefined = undefined;
  serviceId: string | undefined = undefined;
  busy: boolean | undefined = undefined;
  constructor(readonly id: number) {}
  destroy(): void {}
}
const ownFactory: ConnectionFactory<OwnConnection> = async (descriptor) => new OwnConnection(descriptor.id);

/** Settings of the consumer's own, forwarded as they are: an option it did not set is passed as \`undefined\`. */
interface Operation {
  signal?: AbortSignal;
  timeoutMS?: number;
  maxPoolSize?: number;
}
const operation: Operation = {};

/** The consumer's own async function around a checkout, which a failed checkout's stack must name. */
async function checkOutFrom(pool: ConnectionPool): Promise<unknown> {
  return await pool.checkOut();
}

async function main(): Promise<void> {
  const server = await new EmbeddedServer().start();
  try {
    const pool = new ConnectionPool({ address: server.address, maxPoolSize: operation.maxPoolSize });
    try {
      pool.ready();
      const connection = await pool.checkOut({ signal: operation.signal, timeoutMS: operation.timeoutMS });
      const reply = await connection.command('admin', { ping: 1 });
      pool.checkIn(connection);
      if (reply.ok !== 1) throw new Error('ping replied ' + JSON.stringify(reply));
      if (!(pool.checkOut() instanceof Observable)) throw new Error('checkOut() is not an Observable of this rxjs');
    } finally {
      pool.close();
    }
    const virtual = new ConnectionPool({ address: server.address, scheduler: new VirtualTimeScheduler() });
    virtual.close();
    // Names and stacks as production logs show them, also once a minifying bundler has renamed every class.
    if (!inspect(virtual).startsWith('ConnectionPool {')) throw new Error('a pool is shown as ' + inspect(virtual).slice(0, 40));
    const refused = await checkOutFrom(virtual).catch((err: unknown) => err);
    if (!(refused instanceof PoolClosedError) || refused.name !== 'PoolClosedError') throw new Error('a closed pool refused with ' + String(refused));
    // Node.js 22 and later keep a stack lazily, and there the caller's frames are appended to it.
    const lazyStacks = typeof Object.getOwnPropertyDescriptor(new Error(), 'stack')?.get === 'function';
    if (lazyStacks !== /\\n {4}at async /.test(String(refused.stack))) throw new Error('caller frames: ' + String(refused.stack));
    const own = new ConnectionPoolCore({ address: server.address, connectionFactory: ownFactory, maxPoolSize: 1 });
    try {
      own.ready();
      const connection: OwnConnection = await own.checkOut();
      const controller = new AbortController();
      const waiting = own.checkOut({ signal: controller.signal }).then(
        () => 'served',
        (err: unknown) => (err instanceof CheckOutCancelledError && err.name === 'CheckOutCancelledError' ? 'cancelled' : err),
      );
      controller.abort();
      const outcome = await waiting;
      if (outcome !== 'cancelled') throw new Error('a cancelled checkout ended with ' + String(outcome));
      own.checkIn(connection);
    } finally {
      own.close();
    }
  } finally {
    await server.stop();
  }
  console.log('consumer ok ${label}');
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
`;
}

/**
 * What every consumer build sets: strict, with the package's declarations checked too (no skipLibCheck), and the
 * stricter checks applications turn on beyond `strict` (under which an optional property no longer admits `undefined`
 * unless it says so, and an index access may be `undefined`).
 */
const COMMON_OPTIONS = {
  target: 'es2022',
  strict: true,
  exactOptionalPropertyTypes: true,
  noUncheckedIndexedAccess: true,
  skipLibCheck: false,
  types: ['node'],
};

/** The consumer's builds: a folder each, with its tsconfig, its entry file and what it compiles to (if it runs). */
const BUILDS = [
  {
    label: 'nodenext-cjs',
    entry: 'main.ts',
    output: 'out/main.js',
    options: { module: 'nodenext', moduleResolution: 'nodenext', outDir: 'out' },
  },
  {
    label: 'nodenext-esm',
    entry: 'main.mts',
    output: 'out/main.mjs',
    options: { module: 'nodenext', moduleResolution: 'nodenext', outDir: 'out' },
  },
  {
    label: 'bundler',
    entry: 'main.ts',
    output: undefined,
    options: { module: 'esnext', moduleResolution: 'bundler', noEmit: true },
  },
  {
    label: 'node10',
    entry: 'main.ts',
    output: 'out/main.js',
    options: { module: 'commonjs', moduleResolution: 'node10', outDir: 'out' },
  },
] as const;

/**
 * The consumer's other compilers, installed beside it under an alias each: the lowest TypeScript the package's
 * declarations support (they use `export type *`, new in 5.0: TypeScript 4.9 refuses them), and TypeScript 7, the
 * current major, which removed node10 resolution (so that build is not compiled by it). The lowest compiles the
 * nodenext CommonJS build (the exports map) and the node10 one (typesVersions).
 */
const COMPILERS = [
  { alias: 'typescript-lowest', version: '5.0.4', builds: ['nodenext-cjs', 'node10'] },
  { alias: 'typescript-7', version: '7.0.2', builds: ['nodenext-cjs', 'nodenext-esm', 'bundler'] },
] as const;

/**
 * The bundler the consumer installs to bundle and minify its CommonJS build, as serverless and container deployments
 * ship an application: esbuild, which renames every class it minifies.
 */
const ESBUILD_VERSION = '0.28.2';

/** Bundles `entry` (with the packages it requires) into `outfile`, minified, through esbuild's JavaScript API. */
const BUNDLE_SCRIPT = `require('esbuild').buildSync({
  entryPoints: [process.argv[2]],
  outfile: process.argv[3],
  bundle: true,
  minify: true,
  platform: 'node',
  logLevel: 'warning',
});
`;

/** A consumer of `rxcmap/opentelemetry`: it records a pool's metrics through the OpenTelemetry API. */
const OPENTELEMETRY_PROGRAM = `import { metrics } from '@opentelemetry/api';
import { ConnectionPool } from 'rxcmap';
import { instrumentConnectionPool, type ConnectionPoolInstrumentation } from 'rxcmap/opentelemetry';
import { EmbeddedServer } from 'rxcmap/testing';

async function main(): Promise<void> {
  const server = await new EmbeddedServer().start();
  const pool = new ConnectionPool({ address: server.address });
  const instrumentation: ConnectionPoolInstrumentation = instrumentConnectionPool(pool, { meter: metrics.getMeter('consumer') });
  try {
    pool.ready();
    await pool.withConnection((connection) => connection.command('admin', { ping: 1 }));
    if (typeof instrumentation.poolName !== 'string') throw new Error('no pool name');
  } finally {
    instrumentation[Symbol.dispose]();
    pool.close();
    await server.stop();
  }
  console.log('consumer ok opentelemetry');
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
`;

describe('the npm package', function () {
  this.timeout(180_000);

  let temp: string;
  let packed: string;
  let files: string[];

  before(async function () {
    temp = fs.mkdtempSync(path.join(os.tmpdir(), 'rxcmap-package-'));
    const packDir = path.join(temp, 'pack');
    fs.mkdirSync(packDir);
    await mustRun('npm pack', 'npm', ['pack', '--pack-destination', packDir], root, 120_000);
    const tarballs = fs.readdirSync(packDir).filter((f) => f.endsWith('.tgz'));
    expect(tarballs, 'npm pack wrote one tarball').to.have.lengthOf(1);
    packed = path.join(packDir, tarballs[0]);
    const extracted = path.join(temp, 'extracted');
    fs.mkdirSync(extracted);
    await mustRun('tar', 'tar', ['-xzf', packed, '-C', extracted], temp, 30_000);
    files = listFiles(path.join(extracted, 'package'));
  });

  after(function () {
    if (temp) fs.rmSync(temp, { recursive: true, force: true });
  });

  const unpacked = (rel: string) => path.join(temp, 'extracted', 'package', rel);

  it('holds the built entry points and the license, and nothing of lib/, spec/ or other sources', function () {
    expect(files).to.include.members([
      'package.json',
      'LICENSE',
      'README.md',
      'dist/index.js',
      'dist/index.d.ts',
      'dist/testing/index.js',
      'dist/testing/index.d.ts',
    ]);
    expect(fs.readFileSync(unpacked('LICENSE'), 'utf8')).to.match(/Apache License\s+Version 2\.0, January 2004/);
    const strays = files.filter((f) => !['package.json', 'README.md', 'LICENSE'].includes(f) && !f.startsWith('dist/'));
    expect(strays, 'files outside dist/').to.deep.equal([]);
    const sources = files.filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'));
    expect(sources, 'TypeScript sources').to.deep.equal([]);
  });

  it('points main, types, exports and typesVersions at files it ships', function () {
    const pkg = readJson(unpacked('package.json'));
    expect(Object.keys(pkg.exports)).to.have.members(['.', './testing', './opentelemetry', './package.json']);
    const typesVersions = Object.values<Record<string, string[]>>(pkg.typesVersions ?? {}).flatMap((paths) =>
      Object.values(paths).flat(),
    );
    const targets = [pkg.main, pkg.types, ...exportTargets(pkg.exports), ...typesVersions];
    for (const target of targets) {
      expect(fs.existsSync(unpacked(target)), `${target} is in the package`).to.equal(true);
    }
  });

  it('has rxjs as a peer dependency, not a regular one', function () {
    const pkg = readJson(unpacked('package.json'));
    expect(pkg.dependencies?.rxjs, 'dependencies.rxjs').to.equal(undefined);
    expect(pkg.peerDependencies?.rxjs, 'peerDependencies.rxjs').to.be.a('string');
  });

  it('ships no source map that names a source it does not carry', function () {
    const maps = files.filter((f) => f.endsWith('.map'));
    for (const js of files.filter((f) => f.endsWith('.js'))) {
      const ref = /\/\/# sourceMappingURL=(\S+)\s*$/.exec(fs.readFileSync(unpacked(js), 'utf8'))?.[1];
      if (ref && !ref.startsWith('data:')) {
        expect(maps, `${js} refers to its map`).to.include(path.posix.join(path.posix.dirname(js), ref));
      }
    }
    const missing: string[] = [];
    for (const map of maps) {
      const { sources = [], sourcesContent = [], sourceRoot = '' } = readJson(unpacked(map));
      sources.forEach((source: string, i: number) => {
        if (typeof sourcesContent[i] === 'string') return;
        const file = path.resolve(path.dirname(unpacked(map)), sourceRoot, source);
        if (!fs.existsSync(file)) missing.push(`${map}: ${source}`);
      });
    }
    expect(missing, 'sources named by maps but neither inlined nor shipped').to.deep.equal([]);
  });

  describe('installed in a consumer project', function () {
    let consumer: string;
    let consumerRxjs: string;
    const compiled = new Map<string, Promise<Run>>();
    /** The tsc of a compiler the consumer installed under `alias`, as its package.json names it. */
    const ownCompiler = (alias: string): string => {
      const dir = path.join(consumer, 'node_modules', alias);
      return path.join(dir, readJson(path.join(dir, 'package.json')).bin.tsc);
    };

    /** The lowest version the packed package's peer range for `name` allows (the range must be `^x.y.z`). */
    const peerFloor = (name: string): string => {
      const peerRange: string = readJson(unpacked('package.json')).peerDependencies?.[name] ?? '';
      const floor = /^\^(\d+\.\d+\.\d+)$/.exec(peerRange)?.[1];
      expect(floor, `${name} peer range "${peerRange}" has the form ^x.y.z`).to.be.a('string');
      return floor!;
    };
    /** Writes the package.json of a private CommonJS project into `dir`: `dependencies` and our @types/node. */
    const writeManifest = (dir: string, name: string, dependencies: Record<string, string>): void => {
      const typesNode = readJson(path.join(root, 'node_modules', '@types', 'node', 'package.json')).version;
      const all = { ...dependencies, '@types/node': typesNode };
      const manifest = { name, version: '1.0.0', private: true, type: 'commonjs', dependencies: all };
      fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify(manifest, null, 2));
    };
    /** Installs the project in `dir` (from the npm cache where it can). */
    const install = (dir: string): Promise<Run> =>
      mustRun('npm install', 'npm', ['install', '--no-audit', '--no-fund', '--prefer-offline'], dir, 150_000);

    before(async function () {
      consumerRxjs = process.env.RXCMAP_CONSUMER_RXJS || peerFloor('rxjs');
      if (!process.env.RXCMAP_CONSUMER_RXJS) {
        const devRxjs = readJson(path.join(root, 'node_modules', 'rxjs', 'package.json')).version;
        expect(consumerRxjs, 'the consumer rxjs differs from the one the repository builds with').to.not.equal(devRxjs);
      }
      consumer = path.join(temp, 'consumer');
      fs.mkdirSync(consumer);
      writeManifest(consumer, 'rxcmap-consumer', {
        rxcmap: `file:${packed}`,
        rxjs: consumerRxjs,
        ...Object.fromEntries(COMPILERS.map((c) => [c.alias, `npm:typescript@${c.version}`])),
        esbuild: ESBUILD_VERSION,
      });
      for (const build of BUILDS) {
        const dir = path.join(consumer, build.label);
        fs.mkdirSync(dir);
        fs.writeFileSync(path.join(dir, build.entry), program(build.label));
        const tsconfig = { compilerOptions: { ...COMMON_OPTIONS, ...build.options }, files: [build.entry] };
        fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify(tsconfig, null, 2));
      }
      await install(consumer);
      // All builds compile at once; each test below awaits its own.
      for (const build of BUILDS) {
        compiled.set(build.label, run(process.execPath, [tsc, '-p', build.label], consumer, 120_000));
      }
      for (const compiler of COMPILERS) {
        const own = ownCompiler(compiler.alias);
        for (const label of compiler.builds) {
          compiled.set(`${label} ${compiler.version}`, run(process.execPath, [own, '-p', label, '--noEmit'], consumer, 120_000));
        }
      }
    });

    it("resolves one rxjs, the consumer's", async function () {
      const ls = await run('npm', ['ls', 'rxjs', '--all', '--parseable'], consumer, 60_000);
      const copies = ls.stdout.split('\n').filter((line) => line.trim() !== '' && path.basename(line) === 'rxjs');
      expect(copies, describeRun('npm ls rxjs', ls)).to.deep.equal([path.join(consumer, 'node_modules', 'rxjs')]);
      expect(ls.code, describeRun('npm ls rxjs', ls)).to.equal(0);
      const installed = readJson(path.join(copies[0], 'package.json')).version;
      expect(installed).to.equal(consumerRxjs);
    });

    for (const build of BUILDS) {
      it(`type-checks a strict ${build.label} consumer of rxcmap and rxcmap/testing`, async function () {
        const r = await compiled.get(build.label)!;
        expect(r.code, describeRun(`tsc -p ${build.label}`, r)).to.equal(0);
      });
    }

    for (const compiler of COMPILERS) {
      it(`type-checks the strict ${compiler.builds.join(', ')} consumers with TypeScript ${compiler.version}`, async function () {
        const version = await run(process.execPath, [ownCompiler(compiler.alias), '--version'], consumer, 60_000);
        expect(version.stdout.trim(), describeRun(`${compiler.alias} --version`, version)).to.equal(`Version ${compiler.version}`);
        for (const label of compiler.builds) {
          const r = await compiled.get(`${label} ${compiler.version}`)!;
          expect(r.code, describeRun(`TypeScript ${compiler.version}: tsc -p ${label}`, r)).to.equal(0);
        }
      });
    }

    it('loads its three entries from CommonJS and ESM, refuses deep imports, and keeps the optional peer to rxcmap/opentelemetry', async function () {
      // The consumer installs no @opentelemetry/api: it is an optional peer, needed by rxcmap/opentelemetry alone.
      const cjs = `
        const before = new Set(Object.keys(require.cache));
        const main = require('rxcmap');
        const loaded = Object.keys(require.cache).filter((f) => !before.has(f));
        const strays = loaded.filter((f) => /[\\/](testing|opentelemetry)[\\/]|@opentelemetry/.test(f));
        if (strays.length) throw new Error('rxcmap loaded ' + strays.join(', '));
        if (typeof main.ConnectionPool !== 'function') throw new Error('no ConnectionPool');
        if (typeof require('rxcmap/testing').EmbeddedServer !== 'function') throw new Error('no EmbeddedServer');
        for (const deep of ['rxcmap/dist/pool/connection-pool-core', 'rxcmap/dist/index.js']) {
          let code;
          try { require(deep); } catch (err) { code = err.code; }
          if (code !== 'ERR_PACKAGE_PATH_NOT_EXPORTED') throw new Error(deep + ': ' + code);
        }
        let missing;
        try { require('rxcmap/opentelemetry'); } catch (err) { missing = err; }
        if (!missing || missing.code !== 'MODULE_NOT_FOUND' || !missing.message.includes("'@opentelemetry/api'")) {
          throw new Error('rxcmap/opentelemetry without @opentelemetry/api: ' + missing);
        }
        console.log('cjs ok');
      `;
      const esm = `
        import { createRequire } from 'node:module';
        import * as main from 'rxcmap';
        import * as testing from 'rxcmap/testing';
        import { ConnectionPool, CmapError } from 'rxcmap';
        const require = createRequire(import.meta.url);
        for (const [entry, namespace] of [['rxcmap', main], ['rxcmap/testing', testing]]) {
          const missing = Object.keys(require(entry)).filter((name) => !(name in namespace));
          if (missing.length) throw new Error(entry + ' lacks named ESM exports ' + missing.join(', '));
        }
        if (typeof ConnectionPool !== 'function' || typeof CmapError !== 'function') throw new Error('named imports');
        console.log('esm ok');
      `;
      fs.writeFileSync(path.join(consumer, 'load.cjs'), cjs);
      fs.writeFileSync(path.join(consumer, 'load.mjs'), esm);
      for (const [file, said] of [['load.cjs', 'cjs ok'], ['load.mjs', 'esm ok']]) {
        const r = await run(process.execPath, [file], consumer, 30_000);
        expect(r.code, describeRun(`node ${file}`, r)).to.equal(0);
        expect(r.stdout.trim()).to.equal(said);
      }
    });

    // A cold start (a serverless function, a CLI) pays for every module loaded: these two only some uses need.
    it('loads the connection string parser, SASLprep and Node\'s HTTP client only once a URI or credentials need them, and fails with their own error when they cannot be loaded', async function () {
      const script = `
        const path = require('node:path');
        const lazy = ['mongodb-connection-string-url', '@mongodb-js/saslprep'];
        const loaded = () => lazy.filter((name) => Object.keys(require.cache).some((f) => f.includes(path.join('node_modules', name, '')))).join(' ');
        const rxcmap = require('rxcmap');
        const steps = [loaded()];
        // Node's HTTP client, which only MONGODB-AWS credentials fetched from AWS need.
        if (process.moduleLoadList.some((m) => m === 'NativeModule http' || m === 'NativeModule https')) steps.push('node:http');
        new rxcmap.ConnectionPool({ address: 'localhost:27017' }).close();
        steps.push(loaded());
        rxcmap.connect('mongodb://localhost:27017/').close();
        steps.push(loaded());
        new rxcmap.MongoCredentials({ username: 'u', password: 'p' }); // the mechanism negotiated: SCRAM-SHA-256 likely
        steps.push(loaded());
        console.log(JSON.stringify(steps));
      `;
      const r = await run(process.execPath, ['-e', script], consumer, 30_000);
      expect(r.code, describeRun('node -e (lazy dependencies)', r)).to.equal(0);
      expect(JSON.parse(r.stdout)).to.deep.equal(['', '', 'mongodb-connection-string-url', 'mongodb-connection-string-url @mongodb-js/saslprep']);
      // One that cannot be loaded fails with its own error, never as the user's URI or password refused.
      const missing = `
        const Module = require('node:module');
        const load = Module._load;
        Module._load = function (request, ...rest) {
          if (request === 'mongodb-connection-string-url' || request === '@mongodb-js/saslprep') {
            throw Object.assign(new Error("Cannot find module '" + request + "'"), { code: 'MODULE_NOT_FOUND' });
          }
          return load.call(this, request, ...rest);
        };
        const rxcmap = require('rxcmap');
        const seen = [];
        const attempts = [
          () => rxcmap.connect('mongodb://localhost:27017/'),
          () => new rxcmap.MongoCredentials({ username: 'u', password: 'p' }),
        ];
        for (const attempt of attempts) {
          try { attempt(); seen.push('no error'); } catch (err) { seen.push(err.code + ' ' + (err instanceof rxcmap.CmapError)); }
        }
        console.log(JSON.stringify(seen));
      `;
      const m = await run(process.execPath, ['-e', missing], consumer, 30_000);
      expect(m.code, describeRun('node -e (missing dependencies)', m)).to.equal(0);
      expect(JSON.parse(m.stdout)).to.deep.equal(['MODULE_NOT_FOUND false', 'MODULE_NOT_FOUND false']);
    });

    for (const build of BUILDS.filter((b) => b.output !== undefined)) {
      it(`runs the ${build.label} build against the embedded endpoint and exits by itself`, async function () {
        await compiled.get(build.label);
        const r = await run(process.execPath, [path.join(build.label, build.output!)], consumer, 30_000);
        expect(r.timedOut, describeRun(`node ${build.label}: did not exit by itself`, r)).to.equal(false);
        expect(r.code, describeRun(`node ${build.label}`, r)).to.equal(0);
        expect(r.stdout.split('\n')).to.include(`consumer ok ${build.label}`);
      });
    }

    it('type-checks and runs a strict consumer of rxcmap/opentelemetry beside the lowest @opentelemetry/api its peer range allows', async function () {
      // A project of its own: the consumer above must stay without the optional peer.
      const floor = peerFloor('@opentelemetry/api');
      const project = path.join(temp, 'consumer-opentelemetry');
      fs.mkdirSync(project);
      const dependencies = { rxcmap: `file:${packed}`, rxjs: consumerRxjs, '@opentelemetry/api': floor };
      writeManifest(project, 'rxcmap-opentelemetry-consumer', dependencies);
      fs.writeFileSync(path.join(project, 'main.ts'), OPENTELEMETRY_PROGRAM);
      const options = { ...COMMON_OPTIONS, module: 'nodenext', moduleResolution: 'nodenext', outDir: 'out' };
      fs.writeFileSync(path.join(project, 'tsconfig.json'), JSON.stringify({ compilerOptions: options, files: ['main.ts'] }, null, 2));
      await install(project);
      const installed = readJson(path.join(project, 'node_modules', '@opentelemetry', 'api', 'package.json')).version;
      expect(installed).to.equal(floor);
      const compiledHere = await run(process.execPath, [tsc, '-p', '.'], project, 120_000);
      expect(compiledHere.code, describeRun('tsc -p . (opentelemetry consumer)', compiledHere)).to.equal(0);
      const r = await run(process.execPath, [path.join('out', 'main.js')], project, 30_000);
      expect(r.timedOut, describeRun('node out/main.js: did not exit by itself', r)).to.equal(false);
      expect(r.code, describeRun('node out/main.js', r)).to.equal(0);
      expect(r.stdout.split('\n')).to.include('consumer ok opentelemetry');
    });

    // Bundled for deployment: a minifier renames rxcmap's classes (esbuild: `class jc`), so anything that read a
    // class's name (an error's name, a pool's inspect) would show the new one.
    it('runs the nodenext-cjs build bundled and minified by esbuild, its classes renamed, with error names, pool kind and caller frames intact', async function () {
      await compiled.get('nodenext-cjs');
      fs.writeFileSync(path.join(consumer, 'bundle.js'), BUNDLE_SCRIPT);
      const bundled = path.join('bundled', 'main.js');
      await mustRun('esbuild', process.execPath, ['bundle.js', path.join('nodenext-cjs', 'out', 'main.js'), bundled], consumer, 60_000);
      const text = fs.readFileSync(path.join(consumer, bundled), 'utf8');
      expect(text, 'rxcmap inside the bundle').to.include('Attempted to check out a connection from closed connection pool');
      expect(text, 'the minifier renamed the classes').to.not.match(/class (PoolClosedError|ConnectionPool)\b/);
      const r = await run(process.execPath, [bundled], consumer, 30_000);
      expect(r.timedOut, describeRun('node bundled/main.js: did not exit by itself', r)).to.equal(false);
      expect(r.code, describeRun('node bundled/main.js', r)).to.equal(0);
      expect(r.stdout.split('\n')).to.include('consumer ok nodenext-cjs');
    });

    // Hardened realms (Node's frozen intrinsics, as SES-style lockdowns leave the platform): nothing the package does
    // may assign to a built-in (Error.stackTraceLimit, Error.captureStackTrace, a prototype's name or toString).
    it('runs the nodenext-cjs build under node --frozen-intrinsics, a cancelled checkout included', async function () {
      await compiled.get('nodenext-cjs');
      const r = await run(process.execPath, ['--frozen-intrinsics', path.join('nodenext-cjs', 'out/main.js')], consumer, 30_000);
      expect(r.timedOut, describeRun('node --frozen-intrinsics: did not exit by itself', r)).to.equal(false);
      expect(r.code, describeRun('node --frozen-intrinsics', r)).to.equal(0);
      expect(r.stdout.split('\n')).to.include('consumer ok nodenext-cjs');
    });
  });
});
