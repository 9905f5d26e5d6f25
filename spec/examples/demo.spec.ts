/**
 * The main job runs end to end: `examples/demo.ts` with a short duration must exit 0 on its own (no open handles)
 * and print a JSON summary whose numbers add up, explaining its deliberate mid-run clear; `--help` prints usage; bad
 * arguments exit 2 with one usage line; an unreachable server exits 1 with the reason; with stderr alone on a
 * terminal the progress line is rewritten in place within the terminal's width; with stdout on a terminal (a real
 * pseudo-terminal) the live view is redrawn in place and the cursor shown again at the end and on Ctrl-C.
 */
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import * as net from 'node:net';
import * as path from 'node:path';
import { EmbeddedServer } from '../../lib/testing';
import { CELL_LEGEND } from '../../examples/live-view';
import { noPseudoTerminal, startExampleInTerminal } from './run-example';

const root = path.resolve(__dirname, '../..');

interface DemoRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** ms from spawn to exit. */
  elapsedMS: number;
}

/** Runs the demo with `args`; `preload` modules are required before it (e.g. the fake terminal). */
function runDemo(args: string[], options: { preload?: string[]; env?: NodeJS.ProcessEnv } = {}): Promise<DemoRun> {
  const preload = (options.preload ?? []).flatMap((m) => ['-r', m]);
  const env = { ...process.env, ...options.env };
  if (options.env?.MONGODB_URI === undefined) delete env.MONGODB_URI; // the embedded endpoint unless told otherwise
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const child = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', ...preload, 'examples/demo.ts', ...args], {
      cwd: root,
      env,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const killer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`demo did not exit within 60 s (open handles?)\nstderr:\n${stderr}`));
    }, 60_000);
    child.on('exit', (code) => {
      clearTimeout(killer);
      resolve({ code, stdout, stderr, elapsedMS: Date.now() - started });
    });
  });
}

/** A TCP port on 127.0.0.1 that nothing listens on: it was bound a moment ago and closed. */
function closedPort(): Promise<number> {
  return new Promise((resolve) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

const STACK_FRAME = /^\s+at /m;

describe('examples/demo.ts (the main job)', function () {
  this.timeout(90_000);

  it('runs workers through a clear, exits 0 by itself, and prints a consistent JSON summary that explains the clear', async function () {
    const { code, stdout, stderr } = await runDemo(['--duration', '1', '--workers', '300']);
    expect(code, stderr).to.equal(0);
    expect(stderr).to.not.match(/[\r\x1b]/); // not a terminal: plain progress lines
    const lines = stdout.trim().split('\n');
    const summary = JSON.parse(lines[lines.length - 1]);
    expect(summary).to.have.keys([
      'endpoint',
      'durationMS',
      'workers',
      'checkouts',
      'pings',
      'failedCheckouts',
      'otherErrors',
      'connectionsCreated',
      'connectionsClosed',
      'heartbeats',
      'checkoutWaitMS',
      'clear',
    ]);
    expect(summary.heartbeats.succeeded).to.be.at.least(2); // one before the run, one that readied the pool after the clear
    expect(summary.workers).to.equal(300);
    expect(summary.checkouts).to.be.greaterThan(0);
    expect(summary.pings).to.equal(summary.checkouts);
    expect(summary.otherErrors).to.equal(0);
    // The mid-run clear made every connection stale; after close, all created connections were closed.
    expect(summary.connectionsCreated).to.be.greaterThan(10);
    expect(summary.connectionsClosed).to.equal(summary.connectionsCreated);
    expect(summary.checkoutWaitMS.p99).to.be.at.least(summary.checkoutWaitMS.p50);

    // The deliberate clear is explained, not counted as failures.
    // 300 workers share 10 connections: when the clear comes, about 290 checkouts are waiting and are evicted.
    expect(summary.clear).to.have.keys(['atMS', 'readyAgainAtMS', 'evictedCheckouts', 'retried']);
    expect(summary.clear.atMS).to.be.within(1, summary.durationMS);
    expect(summary.clear.readyAgainAtMS).to.be.at.least(summary.clear.atMS);
    expect(summary.clear.evictedCheckouts).to.be.greaterThan(0);
    expect(summary.clear.retried).to.equal(summary.clear.evictedCheckouts);
    expect(summary.failedCheckouts).to.deep.equal({}); // nothing failed apart from what the clear evicted
  });

  it('--uri points it at another server, whose credentials it never prints', async function () {
    const server = await new EmbeddedServer({ users: [{ username: 'demo', password: 'pencil-secret' }] }).start();
    try {
      const uri = `mongodb://demo:pencil-secret@${server.address}/?authSource=admin&directConnection=true`;
      const { code, stdout, stderr } = await runDemo(['--duration', '0.5', '--workers', '50', '--uri', uri]);
      expect(code, stderr).to.equal(0);
      const summary = JSON.parse(stdout.trim().split('\n').at(-1)!);
      expect(summary.endpoint).to.include(server.address);
      expect(summary.checkouts).to.be.greaterThan(0);
      expect(summary.otherErrors).to.equal(0);
      expect(stdout + stderr).to.not.include('pencil-secret');
      expect(server.connectionsAccepted).to.be.greaterThan(1); // the monitor's connection and the pool's
    } finally {
      await server.stop();
    }
  });

  it('--help and -h print the usage, flags, defaults and an example on stdout and exit 0', async function () {
    for (const run of await Promise.all([runDemo(['--help']), runDemo(['-h'])])) {
      expect(run.code, run.stderr).to.equal(0);
      expect(run.stderr).to.equal('');
      expect(run.stdout).to.match(/^usage: demo /m);
      for (const text of ['--duration', '--workers', '--uri', 'MONGODB_URI', 'default 5', 'default 1000', 'example:']) {
        expect(run.stdout).to.include(text);
      }
    }
  });

  it('bad arguments give the reason and one usage line on stderr, exit 2, and never a stack trace or a password', async function () {
    // Each flag's refusal is the parser's (spec/examples/demo-args.spec.ts, in process); here, one of them and each way
    // a URI is refused, as the process reports them (each run a process of its own, some 2 s of CPU).
    const cases: [string[], RegExp, NodeJS.ProcessEnv?][] = [
      [['--workers', '-1'], /--workers must be an integer >= 1, got "-1"/],
      [['mongodb://demo:pencil-secret@localhost'], /unexpected argument at position 1/],
      [['--uri', 'notauri'], /invalid --uri: .*valid mongodb:\/\/ connection string/],
      [['--uri', 'mongodb://demo:pencil-secret@localhost:notaport'], /invalid --uri: /],
      [[], /invalid MONGODB_URI: /, { MONGODB_URI: 'mongodb://demo:pencil-secret@' }],
    ];
    const runs = await Promise.all(cases.map(([args, , env]) => runDemo(args, { env })));
    runs.forEach(({ code, stdout, stderr }, i) => {
      const [args, reason] = cases[i];
      const why = `${args.join(' ') || 'MONGODB_URI'}\n${stderr}`;
      expect(code, why).to.equal(2);
      expect(stdout, why).to.equal('');
      const lines = stderr.trimEnd().split('\n');
      expect(lines, why).to.have.lengthOf(2);
      expect(lines[0], why).to.match(reason);
      expect(lines[1], why).to.match(/^usage: demo /);
      expect(stderr, why).to.not.match(STACK_FRAME);
      expect(stderr, why).to.not.include('pencil-secret');
    });
  });

  it('an unreachable server is reported with its cause within serverSelectionTimeoutMS, exit 1', async function () {
    const port = await closedPort();
    const uri = `mongodb://127.0.0.1:${port}/?serverSelectionTimeoutMS=500`;
    const { code, stdout, stderr, elapsedMS } = await runDemo(['--duration', '30', '--uri', uri]);
    expect(code, stderr).to.equal(1);
    expect(stderr).to.match(new RegExp(`^cannot reach 127\\.0\\.0\\.1:${port} within 500 ms: .*ECONNREFUSED`, 'm'));
    expect(stderr).to.not.match(STACK_FRAME);
    expect(stdout).to.equal(''); // no summary of a run that never started
    expect(elapsedMS).to.be.below(10_000); // startup plus 500 ms, far from the 30 s run
  });

  it('on a terminal, rewrites one progress line in place, never wider than the terminal', async function () {
    const { code, stdout, stderr } = await runDemo(['--duration', '1', '--workers', '100'], {
      preload: ['./spec/examples/tty-stderr.ts'],
      env: { TTY_COLUMNS: '40' },
    });
    expect(code, stderr).to.equal(0);
    expect(JSON.parse(stdout.trim().split('\n').at(-1)!).checkouts).to.be.greaterThan(0);
    const refreshes = stderr.split('\r\x1b[2K').slice(1);
    expect(refreshes.length, stderr).to.be.at.least(5); // every 100 ms over 1 s
    for (const line of refreshes) {
      expect(line.trimEnd(), JSON.stringify(line)).to.not.include('\n'); // one line, no stacking
      expect(line.trimEnd().length, JSON.stringify(line)).to.be.at.most(39);
    }
    expect(stderr.split('\n').filter((l) => l !== '')).to.have.lengthOf(1); // one line in all, then the final newline
  });

  describe('on a terminal of 80 x 24 (a pseudo-terminal)', function () {
    const HIDE = '\x1b[?25l';
    const SHOW = '\x1b[?25h';
    const HOME = '\x1b[H';

    /** The screen the last complete frame left: its lines, as drawn (each followed by a clear to its end). */
    function lastScreen(output: string): string[] {
      const frames = output.split(HOME).slice(1).filter((f) => f.includes('\x1b[J'));
      const last = frames.at(-1)!.split('\x1b[J')[0];
      return last.split(/\x1b\[K\r*\n?/).slice(0, -1);
    }

    before(function () {
      const reason = noPseudoTerminal();
      if (reason !== undefined) {
        console.log(`      skipped: ${reason}`);
        this.skip();
      }
    });

    it('redraws the live view in place 4 times a second, within 79 columns and 24 lines, then shows the cursor again', async function () {
      const demo = startExampleInTerminal('demo.ts', ['--duration', '2', '--workers', '100'], { columns: 80, rows: 24 });
      const { code, output } = await demo.exited(15_000);
      expect(code, output).to.equal(0);
      expect(output.startsWith(`${HIDE}\x1b[2J${HOME}`), JSON.stringify(output.slice(0, 80))).to.equal(true);
      expect(output.split('\x1b[2J'), 'a full clear only once: no flicker').to.have.lengthOf(2);
      expect(output).to.not.include('\r\x1b[2K'); // no progress line on stderr as well
      const frames = output.split(HOME).length - 1;
      expect(frames, 'about 9 frames over 2 s').to.be.within(5, 12);

      const screen = lastScreen(output);
      expect(screen.length, screen.join('\n')).to.be.within(12, 24);
      for (const line of screen) expect(line.length, line).to.be.at.most(79);
      expect(screen[0]).to.match(/^rxcmap demo · embedded 127\.0\.0\.1:\d+ +2\.0 s of 2\.0 s$/);
      expect(screen).to.include(CELL_LEGEND);
      expect(screen.some((l) => /^WaitQueue {5}[▁-█]* +\d+$/.test(l)), screen.join('\n')).to.equal(true);
      expect(screen.some((l) => /^checkouts\/s {3}[▁-█]+ +\d+$/.test(l)), screen.join('\n')).to.equal(true);
      expect(screen).to.include('events');
      expect(screen.some((l) => / s {2}pool cleared$/.test(l)), screen.join('\n')).to.equal(true);
      expect(screen.some((l) => / s {2}heartbeat ok \d+\.\d ms$/.test(l)), screen.join('\n')).to.equal(true);

      // After the last frame: the cursor shown again, on the next line, then the summary.
      const after = output.slice(output.lastIndexOf('\x1b[J') + 3);
      expect(after.startsWith(`\r\n${SHOW}`) || after.startsWith(`\r\r\n${SHOW}`), JSON.stringify(after)).to.equal(true);
      const summary = JSON.parse(after.slice(after.indexOf(SHOW) + SHOW.length).trim().split('\n').at(-1)!);
      expect(summary.checkouts).to.be.greaterThan(0);
      expect(summary.pings).to.equal(summary.checkouts);
    });

    it('on Ctrl-C, shows the cursor again and exits with 130, without a summary', async function () {
      const demo = startExampleInTerminal('demo.ts', ['--duration', '30', '--workers', '100'], { columns: 80, rows: 24 });
      let ended: { code: number | null; output: string };
      try {
        await demo.waitFor(/WaitQueue/, 10_000);
        demo.type('\x03');
        ended = await demo.exited(5_000);
      } finally {
        demo.child.kill('SIGKILL'); // a no-op once it has exited
      }
      const { code, output } = ended;
      expect(code, JSON.stringify(output.slice(-300))).to.equal(130);
      const end = output.slice(output.lastIndexOf(HOME));
      expect(end.includes(SHOW), JSON.stringify(end.slice(-200))).to.equal(true);
      expect(output.lastIndexOf(SHOW)).to.be.greaterThan(output.lastIndexOf(HIDE));
      expect(output).to.not.include('"checkouts"');
    });
  });
});
