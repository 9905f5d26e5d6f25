/**
 * Log destinations that fail never reach the application: a sink that is not a sink is refused at construction; a
 * sink object whose write throws, a closed stdout pipe (EPIPE) and an unwritable file are switched off with one
 * process warning; files are written through a buffered stream that is flushed on close.
 */
import { expect } from 'chai';
import { execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { connect, ConnectionPool, InvalidOptionError } from '../../lib';
import { eventually } from '../support/endpoint';
import { openFiles } from '../support/open-files';
import { warningsOf } from '../support/process-warnings';
import { unhandledRejectionsOf } from '../support/unhandled';
import { openLogSink } from '../../lib/logging/log-sink';
import { EmbeddedServer, MockConnectionFactory, VirtualClock, type MockConnection } from '../../lib/testing';

const root = path.resolve(__dirname, '../..');
const debug = { connection: 'debug' } as const;

describe('log sinks', function () {
  const bad: [string, unknown][] = [
    ['an empty object', {}],
    ['a number', 42],
    ['an object whose write is not a function', { write: 'yes' }],
    ['an object whose close is not a function', { write() {}, close: 1 }],
  ];
  for (const [what, sink] of bad) {
    it(`refuses ${what} as the path, at construction, with an InvalidOptionError naming it`, function () {
      const make = (): unknown => new ConnectionPool({ address: 'h:1', connectionFactory: new MockConnectionFactory().factory, logging: { componentSeverities: debug, path: sink as never } });
      expect(make).to.throw(InvalidOptionError, /Invalid logging\.path: .*a sink object with a write\(message\) function/);
    });
  }

  it('refuses logging options that are not an object', function () {
    expect(() => new ConnectionPool({ address: 'h:1', connectionFactory: new MockConnectionFactory().factory, logging: null as never })).to.throw(InvalidOptionError, /Invalid logging: null/);
  });

  it('a sink whose write throws is switched off with one warning; the pool goes on', async function () {
    const warnings: Error[] = [];
    const onWarning = (w: Error): void => void warnings.push(w);
    process.on('warning', onWarning);
    try {
      let calls = 0;
      const sink = {
        write() {
          calls++;
          throw new Error('disk full');
        },
      };
      const pool = new ConnectionPool({ address: 'h:1', connectionFactory: new MockConnectionFactory().factory, logging: { componentSeverities: debug, path: sink } });
      pool.ready();
      const c = await pool.checkOut();
      pool.checkIn(c);
      pool.close();
      await new Promise((r) => setImmediate(r));
      expect(calls, 'tried once, then switched off').to.equal(1);
      expect(warnings.map((w) => w.message)).to.deep.equal(['rxcmap: the log sink threw (disk full); logging to it stopped']);
      expect((warnings[0] as Error & { code?: string }).code).to.equal('RXCMAP_LOG_SINK_FAILED');
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('an async sink whose write rejects is switched off with one warning, and no rejection goes unhandled', async function () {
    let calls = 0;
    const sink = {
      async write() {
        calls++;
        await Promise.resolve();
        throw new Error('log service unavailable');
      },
    };
    let warnings: Error[] = [];
    const unhandled = await unhandledRejectionsOf(async () => {
      warnings = await warningsOf(async () => {
        const pool = new ConnectionPool({ address: 'h:1', connectionFactory: new MockConnectionFactory().factory, logging: { componentSeverities: debug, path: sink } });
        pool.ready(); // Connection pool created, Connection pool ready: both written before the first rejects
        await new Promise((r) => setImmediate(r));
        const c = await pool.checkOut();
        pool.checkIn(c);
        pool.close();
        await new Promise((r) => setImmediate(r));
      });
    });
    expect(unhandled).to.deep.equal([]);
    expect(calls, 'switched off once its first Promise rejected').to.equal(2);
    expect(warnings.map((w) => w.message)).to.deep.equal(['rxcmap: the log sink rejected (log service unavailable); logging to it stopped']);
    expect((warnings[0] as Error & { code?: string }).code).to.equal('RXCMAP_LOG_SINK_FAILED');
  });

  it('a sink whose write returns a thenable that calls only its first callback is not switched off', async function () {
    const written: string[] = [];
    const sink = {
      write(m: { render(): string }) {
        written.push(m.render());
        return { then: (done: () => void) => done() }; // done() without asking whether it was given
      },
    };
    const warnings = await warningsOf(async () => {
      const pool = new ConnectionPool({ address: 'h:1', connectionFactory: new MockConnectionFactory().factory, logging: { componentSeverities: debug, path: sink as never } });
      pool.ready();
      pool.checkIn(await pool.checkOut());
      pool.close();
    });
    expect(warnings.map((w) => w.message)).to.deep.equal([]);
    expect(written, 'every message written').to.have.length(9);
  });

  it('gives back a sink it opened as it is, so a destination handed on (a client\'s, to its pools) is not guarded twice', function () {
    const application = { write() {} };
    const guarded = openLogSink(application);
    expect(guarded, 'an application\'s sink is guarded').to.not.equal(application);
    expect(openLogSink(guarded)).to.equal(guarded);
    const stderr = openLogSink('stderr');
    expect(openLogSink(stderr)).to.equal(stderr);
    void stderr.close?.();
    expect(openLogSink(application), 'the application\'s own object is guarded anew').to.not.equal(guarded);
  });

  it('a sink that throws something that cannot be written is switched off with one warning, and never throws itself', async function () {
    const warnings: Error[] = [];
    const onWarning = (w: Error): void => void warnings.push(w);
    process.on('warning', onWarning);
    try {
      const unreadable = Object.defineProperty(new Error('hidden'), 'message', {
        get: () => {
          throw new Error('no message');
        },
      });
      const thrown: unknown[] = [Object.create(null), unreadable, { toString: () => { throw new Error('no text'); } }];
      const message = { toJSON: () => ({}), render: () => '' };
      for (const value of thrown) {
        let calls = 0;
        const sink = openLogSink({
          write() {
            calls++;
            throw value;
          },
        });
        expect(() => sink.write(message)).to.not.throw();
        expect(() => sink.write(message)).to.not.throw();
        expect(calls, 'tried once, then switched off').to.equal(1);
      }
      await new Promise((r) => setImmediate(r));
      expect(warnings.map((w) => w.message)).to.deep.equal(
        ['{}', 'an Error whose message cannot be written', '{"toString":"[function toString]"}'].map((words) => `rxcmap: the log sink threw (${words}); logging to it stopped`),
      );
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('a closed stdout (EPIPE, as in `node app | head`) never crashes the application', async function () {
    this.timeout(30_000);
    // The child logs every pool event to stdout; its reader goes away at once. It must finish and exit 0.
    const script = [
      "const { ConnectionPool } = require('./lib');",
      "const { MockConnectionFactory } = require('./lib/testing');",
      "const pool = new ConnectionPool({ address: 'h:1', connectionFactory: new MockConnectionFactory().factory, logging: { componentSeverities: { connection: 'debug' }, path: 'stdout' } });",
      'pool.ready();',
      '(async () => {',
      '  for (let i = 0; i < 20000; i++) { const c = await pool.checkOut(); pool.checkIn(c); if (i % 1000 === 0) await new Promise((r) => setTimeout(r, 5)); }',
      '  pool.close();',
      "  process.stderr.write('done\\n');",
      '})();',
    ].join('\n');
    const child = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', '-e', script], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.once('data', () => child.stdout.destroy()); // the reader closes its end after the first chunk
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(stderr, stderr).to.include('done');
    expect(code, stderr).to.equal(0);
    expect(stderr).to.not.match(/Error: write EPIPE\n\s+at /); // no crash trace
  });

  it('a stdout or stderr pipe that fills up while its reader is slow loses no line, logged from the main thread or a worker', async function () {
    this.timeout(60_000);
    // Once process.stdout or process.stderr is used (here by console.log and console.error, in the main thread), Node
    // leaves that pipe non-blocking, for every thread: a write to a full pipe then fails with EAGAIN until the reader
    // reads again. One pool logs to stdout from the main thread, one to stderr from a worker; each says when done on fd 3.
    const run = (destination: string): string =>
      [
        `const { ConnectionPool } = require(${JSON.stringify(path.join(root, 'lib'))});`,
        `const { MockConnectionFactory } = require(${JSON.stringify(path.join(root, 'lib/testing'))});`,
        `const pool = new ConnectionPool({ address: 'h:1', connectionFactory: new MockConnectionFactory().factory, logging: { componentSeverities: { connection: 'debug' }, path: '${destination}' } });`,
        'pool.ready();',
        '(async () => {',
        '  for (let i = 0; i < 2000; i++) { const c = await pool.checkOut(); pool.checkIn(c); }',
        '  pool.close();',
        "  require('node:fs').writeSync(3, 'done\\n');",
        '})();',
      ].join('\n');
    const inWorker = `new (require('node:worker_threads').Worker)(${JSON.stringify(run('stderr'))}, { eval: true, execArgv: ['-r', 'ts-node/register/transpile-only'] });`;
    const script = `console.log('started');\nconsole.error('started');\n${inWorker}\n${run('stdout')}`;
    const child = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', '-e', script], { cwd: root, stdio: ['ignore', 'pipe', 'pipe', 'pipe'] });
    const output = { stdout: '', stderr: '' };
    child.stdout!.on('data', (d) => (output.stdout += d));
    child.stderr!.on('data', (d) => (output.stderr += d));
    // Slow readers: nothing is read until well after both pools logged everything, so both pipes fill up.
    child.stdout!.pause();
    child.stderr!.pause();
    let done = '';
    child.stdio[3]!.on('data', (d) => {
      done += d;
      if (done === 'done\ndone\n') {
        setTimeout(() => {
          child.stdout!.resume();
          child.stderr!.resume();
        }, 500);
      }
    });
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(output.stderr).to.not.include('RXCMAP_LOG_SINK_FAILED');
    expect(code, output.stderr.slice(-2000)).to.equal(0);
    for (const stream of ['stdout', 'stderr'] as const) {
      const messages = output[stream].split('\n').filter((l) => l.startsWith('{')).map((l) => (JSON.parse(l) as { message: string }).message);
      expect(messages.filter((m) => m === 'Connection checked in').length, `every check-in logged to ${stream}`).to.equal(2000);
      expect(messages.at(-1)).to.equal('Connection pool closed');
    }
  });

  it('writes "stdout" and "stderr" in any case to the process\'s own streams, and leaves them open after close', async function () {
    this.timeout(30_000);
    // In a child process of its own, whose stdout and stderr are read here; its working directory shows no file is made.
    const cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'rxcmap-sink-'));
    const script = [
      `const { openLogSink } = require(${JSON.stringify(path.join(root, 'lib/logging/log-sink'))});`,
      'const line = (i) => ({ toJSON: () => ({ i }), render: () => i });',
      '(async () => {',
      "  for (const [destination, i] of [['STDOUT', 'out'], ['Stderr', 'err'], ['no-such-dir/pool.log', 'instead of the file']]) {",
      '    const sink = openLogSink(destination);',
      '    sink.write(line(i));',
      '    await sink.close();',
      '  }',
      "  process.stdout.write('stdout still open\\n');",
      "  process.stderr.write('stderr still open\\n');",
      '})();',
    ].join('\n');
    const register = require.resolve('ts-node/register/transpile-only');
    const child = spawn(process.execPath, ['-r', register, '-e', script], { cwd, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, TS_NODE_PROJECT: path.join(root, 'tsconfig.json') } });
    const output = { stdout: '', stderr: '' };
    child.stdout.on('data', (d) => (output.stdout += d));
    child.stderr.on('data', (d) => (output.stderr += d));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    try {
      expect(code, output.stderr).to.equal(0);
      expect(output.stdout).to.equal('{"i":"out"}\nstdout still open\n');
      const stderr = output.stderr.split('\n');
      expect(stderr.filter((l) => l.startsWith('{'))).to.deep.equal(['{"i":"err"}', '{"i":"instead of the file"}']);
      expect(stderr).to.include('stderr still open');
      expect(fs.readdirSync(cwd), 'files made').to.deep.equal([]);
    } finally {
      fs.rmSync(cwd, { recursive: true, force: true });
    }
  });

  it('a file that fails is switched off: nothing more is written to it, not even after close, and one warning says why', async function () {
    if (!fs.existsSync('/dev/full')) this.skip(); // a device whose every write fails (ENOSPC)
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rxcmap-sink-'));
    const file = path.join(dir, 'pool.log'); // first the full device, then a regular file that could be written
    const regular = path.join(dir, 'regular.log');
    fs.writeFileSync(regular, '');
    fs.symlinkSync('/dev/full', file);
    const line = (i: number) => ({ toJSON: () => ({ i }), render: () => String(i) });
    const warnings: string[] = [];
    const emit = process.emitWarning;
    process.emitWarning = ((w: string) => void warnings.push(w)) as typeof process.emitWarning;
    try {
      const sink = openLogSink(file);
      sink.write(line(1)); // fails
      const closing = sink.close?.();
      sink.write(line(2)); // after close, while the failing write is under way
      fs.rmSync(file);
      fs.symlinkSync(regular, file);
      await closing;
      await new Promise((r) => setImmediate(r));
      sink.write(line(3)); // after the failure
      await sink.close?.();
      await new Promise((r) => setImmediate(r));
      expect(fs.readFileSync(regular, 'utf8')).to.equal('');
      expect(warnings).to.deep.equal(['rxcmap: the log file failed (ENOSPC: no space left on device, write); logging to it stopped']);
    } finally {
      process.emitWarning = emit;
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('writes a file through a buffered stream and flushes it on close', async function () {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'rxcmap-sink-')), 'pool.log');
    const sink = openLogSink(file);
    for (let i = 0; i < 1000; i++) sink.write({ toJSON: () => ({ i }), render: () => String(i) });
    await sink.close?.();
    const lines = fs.readFileSync(file, 'utf8').trim().split('\n');
    expect(lines).to.have.length(1000);
    expect(JSON.parse(lines[999])).to.deep.equal({ i: 999 });
  });

  it('takes messages written after close: each burst is appended in order through the file opened again, and closed after it', async function () {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'rxcmap-sink-')), 'pool.log');
    const line = (i: number) => ({ toJSON: () => ({ i }), render: () => String(i) });
    const sink = openLogSink(file);
    for (let i = 0; i < 100; i++) sink.write(line(i));
    const closing = sink.close?.(); // not awaited: the next burst comes while the first is still being written
    for (let i = 100; i < 150; i++) sink.write(line(i));
    await closing;
    await new Promise((r) => setImmediate(r));
    sink.write(line(150)); // a burst after every earlier write finished
    await sink.close?.();
    // The descriptor is closed right after the stream finishes: waited for (a loaded runner's pause could outlast a
    // fixed 10 ms), as a descriptor left open never closes.
    await eventually(() => openFiles(file) === 0, 2000);
    const lines = fs.readFileSync(file, 'utf8').trim().split('\n').map((l) => (JSON.parse(l) as { i: number }).i);
    expect(lines).to.deep.equal([...Array(151).keys()]);
    expect(openFiles(file), 'descriptors of the file left open').to.equal(0);
  });

  it('does not open a FIFO again after close (that would block until a reader comes): its later messages are dropped, with one warning', async function () {
    if (process.platform === 'win32') this.skip();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rxcmap-sink-'));
    const fifo = path.join(dir, 'pool.fifo');
    execFileSync('mkfifo', [fifo]);
    const reader = spawn('cat', [fifo], { stdio: ['ignore', 'pipe', 'ignore'] });
    let read = '';
    reader.stdout.on('data', (d: Buffer) => (read += d.toString()));
    const exited = new Promise((resolve) => reader.on('exit', resolve));
    const warnings: string[] = [];
    const emit = process.emitWarning;
    process.emitWarning = ((w: string) => void warnings.push(w)) as typeof process.emitWarning;
    try {
      const sink = openLogSink(fifo);
      sink.write({ toJSON: () => ({ i: 1 }), render: () => '1' });
      await sink.close?.();
      await exited; // the reader saw the end of the file and is gone
      sink.write({ toJSON: () => ({ i: 2 }), render: () => '2' });
      await sink.close?.(); // would never settle: the event loop blocked in open()
      await new Promise((r) => setTimeout(r, 10));
      expect(read.trim()).to.equal('{"i":1}');
      expect(warnings).to.have.length(1);
      expect(warnings[0]).to.match(/the log file failed \(it is not a regular file, so it is not opened again after close\)/);
    } finally {
      process.emitWarning = emit;
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a pool keeps logging after close: the closed pool\'s last connection and the checkouts tried on it reach the sink', function () {
    const clock = new VirtualClock();
    const mock = new MockConnectionFactory({ scheduler: clock, establishDelayMS: 10 });
    const written: string[] = [];
    const pool = new ConnectionPool<MockConnection>({
      address: 'db:27017',
      scheduler: clock,
      connectionFactory: mock.factory,
      logging: { componentSeverities: debug, path: { write: (m) => written.push(m.render()) } },
    });
    const viaLog: string[] = [];
    pool.log$.subscribe((m) => viaLog.push(m.render()));
    pool.ready();
    let held: MockConnection | undefined;
    pool.checkOut().subscribe((c) => (held = c));
    clock.advance(10);
    pool.close();
    pool.checkIn(held!); // the last connection: checked in and closed in one step
    pool.checkOut().subscribe({ error: () => undefined }); // tried on the closed pool
    expect(written.slice(-5)).to.deep.equal([
      'Connection pool closed for db:27017',
      'Connection checked in: address=db:27017, driver-generated ID=1',
      'Connection closed: address=db:27017, driver-generated ID=1. Reason: Connection pool was closed.',
      'Checkout started for connection to db:27017',
      'Checkout failed for connection to db:27017. Reason: Connection pool was closed. Duration: 0 ms',
    ]);
    expect(written).to.deep.equal(viaLog);
  });

  it("a pool closes the log file it opened once the closed pool's last connection is closed, after that connection's messages", async function () {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'rxcmap-sink-')), 'pool.log');
    const clock = new VirtualClock();
    const mock = new MockConnectionFactory({ scheduler: clock, establishDelayMS: 10 });
    const pool = new ConnectionPool<MockConnection>({ address: 'db:27017', scheduler: clock, connectionFactory: mock.factory, logging: { componentSeverities: debug, path: file } });
    expect(openFiles(file), 'opened with the pool').to.equal(1);
    pool.ready();
    let held: MockConnection | undefined;
    pool.checkOut().subscribe((c) => (held = c));
    clock.advance(10);
    pool.close();
    await new Promise((r) => setImmediate(r));
    expect(openFiles(file), 'open while a connection of the closed pool is out').to.equal(1);
    pool.checkIn(held!);
    expect(await eventually(() => openFiles(file) === 0), 'closed after the last connection').to.equal(true);
    const messages = fs.readFileSync(file, 'utf8').trim().split('\n').map((l) => (JSON.parse(l) as { message: string }).message);
    expect(messages.slice(-3)).to.deep.equal(['Connection pool closed', 'Connection checked in', 'Connection closed']);
  });

  it('a pool never closes a sink object handed to it: the application that made it closes it', async function () {
    const clock = new VirtualClock();
    const mock = new MockConnectionFactory({ scheduler: clock, establishDelayMS: 10 });
    const written: string[] = [];
    let closes = 0;
    const sink = { write: (m: { render(): string }) => void written.push(m.render()), close: () => void closes++ };
    const pool = new ConnectionPool<MockConnection>({ address: 'db:27017', scheduler: clock, connectionFactory: mock.factory, logging: { componentSeverities: debug, path: sink } });
    pool.ready();
    let held: MockConnection | undefined;
    pool.checkOut().subscribe((c) => (held = c));
    clock.advance(10);
    pool.close();
    pool.checkIn(held!);
    await new Promise((r) => setImmediate(r));
    expect(written.at(-1)).to.match(/^Connection closed/);
    expect(closes).to.equal(0);
  });

  it("a client closed while a connection is checked out: that connection's check-in and close still reach the client's file", async function () {
    this.timeout(10_000);
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'rxcmap-sink-')), 'client.log');
    const endpoint = process.env.MONGODB_URI === undefined ? await new EmbeddedServer().start() : undefined;
    const uri = process.env.MONGODB_URI ?? `mongodb://${endpoint!.address}/`;
    const client = connect(uri, { logging: { componentSeverities: debug, path: file } });
    try {
      await client.command('admin', { ping: 1 }); // the pool is ready
      const pool = [...client.pools.values()][0];
      const connection = await pool.checkOut();
      await client.close(); // resolves once the file is flushed; the connection is still out
      pool.checkIn(connection); // closed as it comes back
      await client.close(); // idempotent; the late lines are written by now or soon after
      const messages = (): string[] => fs.readFileSync(file, 'utf8').trim().split('\n').map((l) => (JSON.parse(l) as { message: string }).message);
      expect(await eventually(() => fs.readFileSync(file, 'utf8').includes('Connection closed'))).to.equal(true);
      const last = messages().slice(-3);
      expect(last).to.deep.equal(['Connection pool closed', 'Connection checked in', 'Connection closed']);
    } finally {
      await client.close();
      await endpoint?.stop();
    }
  });

  it('falls back to stderr, with a warning, when the file cannot be opened', function () {
    const warnings: string[] = [];
    const emit = process.emitWarning;
    process.emitWarning = ((w: string) => void warnings.push(w)) as typeof process.emitWarning;
    try {
      const sink = openLogSink(path.join(os.tmpdir(), 'no-such-dir-rxcmap', 'x', 'pool.log'));
      expect(sink.write).to.be.a('function');
      void sink.close?.();
    } finally {
      process.emitWarning = emit;
    }
    expect(warnings.join('\n')).to.match(/the log file could not be opened \(ENOENT.*\); logging to stderr instead/);
  });
});
