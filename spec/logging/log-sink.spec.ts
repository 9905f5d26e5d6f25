/**
 * Log destinations that fail never reach the application: a sink that is not a sink is refused at construction; a
 * sink object whose write throws, a closed stdout pipe (EPIPE) and an unwritable file are switched off with one
 * process warning; files are written through a buffered stream that is flushed on close.
 */
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ConnectionPool, InvalidOptionError } from '../../lib';
import { openLogSink } from '../../lib/logging/log-sink';
import { MockConnectionFactory } from '../../lib/testing';

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
      expect(make).to.throw(InvalidOptionError, /Invalid path: .*a sink object with a write\(message\) function/);
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

  it('writes a file through a buffered stream and flushes it on close', async function () {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'rxcmap-sink-')), 'pool.log');
    const sink = openLogSink(file);
    for (let i = 0; i < 1000; i++) sink.write({ toJSON: () => ({ i }), render: () => String(i) });
    await sink.close?.();
    const lines = fs.readFileSync(file, 'utf8').trim().split('\n');
    expect(lines).to.have.length(1000);
    expect(JSON.parse(lines[999])).to.deep.equal({ i: 999 });
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
