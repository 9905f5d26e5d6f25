/**
 * bench/soak.ts (`npm run soak`): a 6-second run (the CI soak) under every fault kind ends with no violation and
 * nothing left open; deliberate leaks (RXCMAP_SOAK_LEAK) make it report violations and exit 1; invalid arguments
 * exit 2 with a message naming the flag. The soak's parts (arguments, seeded randomness, checkout ledger, pool
 * audit) are checked in-process.
 */
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { ConnectionPoolCore } from '../../lib';
import { MockConnectionFactory, type MockConnection } from '../../lib/testing';
import { DEFAULT_SEED, LEAK_VARIABLE, parseSoakArgs } from '../../bench/soak-args';
import { PoolAudit } from '../../bench/soak-audit';
import { CheckOutLedger } from '../../bench/soak-ledger';
import { SoakRandom } from '../../bench/soak-random';
import { settled } from '../../bench/soak-resources';
import { eventually } from '../support/endpoint';

const root = path.resolve(__dirname, '../..');

/** What a finished soak left: exit code, output, and its JSON summary (the last stdout line) when it printed one. */
interface SoakRun {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly summary: Record<string, any> | undefined;
}

/** Runs `npm run soak`'s command with `args` and extra `env` as a child process; killed (and rejected) after `ms`. */
function runSoak(args: readonly string[], env: Record<string, string>, ms: number): Promise<SoakRun> {
  const inherited = { ...process.env };
  delete inherited[LEAK_VARIABLE];
  const child = spawn(process.execPath, ['--expose-gc', '-r', 'ts-node/register/transpile-only', 'bench/soak.ts', ...args], {
    cwd: root,
    env: { ...inherited, ...env },
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the soak did not exit within ${ms} ms\nstdout:\n${stdout}\nstderr:\n${stderr}`));
    }, ms);
    child.on('close', (code) => {
      clearTimeout(timer);
      const last = stdout.trim().split('\n').pop() ?? '';
      resolve({ code, stdout, stderr, summary: last.startsWith('{') ? JSON.parse(last) : undefined });
    });
  });
}

describe('bench/soak.ts', function () {
  describe('as a program (child processes)', function () {
    this.timeout(90_000);
    // Started together (they are mostly waiting) and awaited one per test.
    let clean: Promise<SoakRun>;
    let leakedConnection: Promise<SoakRun>;
    let leakedSocket: Promise<SoakRun>;
    before(function () {
      clean = runSoak(['--seconds', '6'], {}, 75_000);
      leakedConnection = runSoak(['--seconds', '2'], { [LEAK_VARIABLE]: 'connection' }, 60_000);
      leakedSocket = runSoak(['--seconds', '2'], { [LEAK_VARIABLE]: 'socket' }, 60_000);
      for (const run of [clean, leakedConnection, leakedSocket]) run.catch(() => undefined); // awaited below
    });

    it('runs 6 s of load under every fault kind with no violation, and leaves no socket or handle behind', async function () {
      const { code, stdout, stderr, summary: s } = await clean;
      expect(s, stderr).to.not.equal(undefined);
      expect(s!.violations, stderr).to.deep.equal([]);
      expect(code, stderr).to.equal(0);
      expect(stdout.trim().split('\n')).to.have.length(1); // ONE JSON line
      expect(stderr).to.include(`seed ${DEFAULT_SEED}`);
      expect(s).to.include({ seconds: 6, seed: DEFAULT_SEED, quiescentPoints: 3, socketsAtEnd: 0, handlesAtEnd: 0 });
      // Thousands of checkouts, each settled exactly once, in every form; commands through both the pool and the client.
      expect(s!.checkouts).to.be.at.least(5000);
      expect(s!.outcomes.settled).to.equal(s!.checkouts);
      expect(s!.outcomes.resolved).to.be.at.least(1000);
      for (const form of ['promise', 'abort', 'observable', 'unsubscribe', 'withConnection', 'withConnection$', 'burst']) {
        expect(s!.outcomes.forms[form], form).to.be.at.least(1);
      }
      expect(s!.commands.ok).to.be.at.least(1000);
      expect(s!.clientCommands.ok).to.be.at.least(1000);
      expect(s!.pool.checkOutStarted).to.equal(s!.checkouts);
      // Every fault kind happened.
      for (const key of ['clears', 'interruptingClears', 'bursts', 'aborts', 'unsubscribes', 'timeouts', 'heartbeatFailures']) {
        expect(s![key], key).to.be.at.least(1);
      }
      for (const [kind, n] of Object.entries(s!.failPoints)) expect(n, `failPoints.${kind}`).to.be.at.least(1);
      expect(Object.keys(s!.failPoints)).to.have.length(5);
      expect(s!.kills.pool, 'kills.pool').to.be.at.least(1);
      expect(s!.kills.client, 'kills.client').to.be.at.least(1);
      // One heap sample (bytes, after GC) per quiescent point.
      expect(s!.heapSamples).to.have.length(3);
      for (const bytes of s!.heapSamples) expect(bytes).to.be.a('number').greaterThan(1024 * 1024);
      expect(s!.maxHeap).to.equal(Math.max(...s!.heapSamples));
      expect(s!.lastHeap).to.equal(s!.heapSamples[2]);
    });

    it('reports a connection checked out and never checked in (RXCMAP_SOAK_LEAK=connection), and exits 1', async function () {
      const { code, stderr, summary: s } = await leakedConnection;
      expect(code, stderr).to.equal(1);
      expect(s!.violations.join('\n')).to.match(/pool at a quiescent point \(no work running\): 1 connection\(s\) in use/);
      expect(s!.violations.join('\n')).to.match(/pool did not finish closing within \d+ ms: 1 connection\(s\) still open, 1 in use/);
    });

    it('reports a connection left open at the endpoint (RXCMAP_SOAK_LEAK=socket), and exits 1', async function () {
      const { code, stderr, summary: s } = await leakedSocket;
      expect(code, stderr).to.equal(1);
      expect(s!.violations.join('\n')).to.match(/the endpoint has (\d+) open connection\(s\), expected \d+/);
      const [, open, expected] = /the endpoint has (\d+) open connection\(s\), expected (\d+)/.exec(s!.violations.join('\n'))!;
      expect(Number(open) - Number(expected)).to.equal(1);
      expect(s!.socketsAtEnd).to.equal(1);
      expect(s!.violations.join('\n')).to.include('1 connection(s) still open at the endpoint after the pool and the client were closed');
      // Both ends of the socket are this process's handles until the endpoint stops.
      expect(s!.handlesAtEnd).to.equal(2);
      expect(s!.violations.join('\n')).to.include('2 active resource(s) beyond the baseline after the pool and the client were closed: {"TCPSocketWrap":2}');
    });

    it('rejects an invalid argument with exit code 2 and a message naming the flag, before starting anything', async function () {
      const { code, stdout, stderr } = await runSoak(['--seconds', 'ten'], {}, 30_000);
      expect(code).to.equal(2);
      expect(stdout).to.equal('');
      expect(stderr).to.include('soak: --seconds must be a number of seconds > 0 and <= 86400, got "ten"');
      expect(stderr).to.include('usage: npm run soak --');
    });
  });

  describe('parseSoakArgs', function () {
    it('defaults to 60 s and the fixed seed, without leak', function () {
      expect(parseSoakArgs([])).to.deep.equal({ kind: 'run', settings: { seconds: 60, seed: DEFAULT_SEED, leak: undefined } });
    });

    it('reads --seconds (fractions allowed) and --seed, as separate or `=` values, and the leak variable', function () {
      expect(parseSoakArgs(['--seconds', '2.5', '--seed=42'], { [LEAK_VARIABLE]: 'socket' })).to.deep.equal({
        kind: 'run',
        settings: { seconds: 2.5, seed: 42, leak: 'socket' },
      });
      expect(parseSoakArgs(['--seconds=86400', '--seed', '2147483647'])).to.deep.include({ kind: 'run' });
      expect(parseSoakArgs(['-h'])).to.deep.equal({ kind: 'help' });
    });

    it('names the flag and what it accepts for each invalid value', function () {
      const message = (argv: string[], env: NodeJS.ProcessEnv = {}): string => {
        const parsed = parseSoakArgs(argv, env);
        expect(parsed.kind, argv.join(' ')).to.equal('error');
        return (parsed as { message: string }).message;
      };
      for (const bad of ['0', 'abc', '', '86401', 'Infinity', '1e9']) {
        expect(message(['--seconds', bad])).to.equal(`--seconds must be a number of seconds > 0 and <= 86400, got ${JSON.stringify(bad)}`);
      }
      for (const bad of ['1.5', 'x', '2147483648', '0x10']) {
        expect(message(['--seed', bad])).to.equal(`--seed must be an integer from 0 to 2147483647, got ${JSON.stringify(bad)}`);
      }
      expect(message(['--seconds=-1'])).to.include('--seconds must be a number of seconds > 0');
      expect(message(['--bogus'])).to.match(/--bogus.*allowed: --seconds <n>, --seed <integer>, --help/);
      expect(message(['20'])).to.match(/20.*allowed: --seconds/);
      expect(message(['--seconds'])).to.match(/--seconds/);
      expect(message([], { [LEAK_VARIABLE]: 'handle' })).to.equal(`${LEAK_VARIABLE} must be "connection" or "socket" when set, got "handle"`);
    });
  });

  describe('SoakRandom', function () {
    it('replays the same draws for the same seed, other draws for another, within the bounds asked', function () {
      const draw = (seed: number): number[] => {
        const rng = new SoakRandom(seed);
        return Array.from({ length: 200 }, () => rng.int(3, 9));
      };
      const a = draw(1);
      expect(draw(1)).to.deep.equal(a);
      expect(draw(2)).to.not.deep.equal(a);
      expect(Math.min(...a)).to.equal(3);
      expect(Math.max(...a)).to.equal(9);
      const rng = new SoakRandom(5);
      const picks = Array.from({ length: 1000 }, () => rng.weighted([['rare', 1], ['common', 9]] as const));
      const rare = picks.filter((p) => p === 'rare').length;
      expect(rare).to.be.within(50, 150);
    });
  });

  describe('CheckOutLedger', function () {
    it('counts each outcome once, and reports a second settlement, an unexplained error, and a checkout never settled', function () {
      const violations: string[] = [];
      const ledger = new CheckOutLedger((m) => violations.push(m));
      const delivered = ledger.start('promise');
      const timedOut = ledger.start('observable');
      const left = ledger.start('unsubscribe');
      const aborted = ledger.start('abort');
      const open = ledger.start('withConnection');
      expect(ledger.resolve(delivered)).to.equal(true);
      ledger.reject(timedOut, Object.assign(new Error('t'), { name: 'WaitQueueTimeoutError' }));
      ledger.unsubscribe(left);
      ledger.reject(aborted, Object.assign(new Error('c'), { name: 'CheckOutCancelledError' }));
      expect(violations).to.deep.equal([]);
      expect(ledger.check()).to.deep.equal(['1 checkout(s) never settled at a quiescent point: #5 (withConnection)']);

      expect(ledger.resolve(left)).to.equal(false);
      ledger.reject(open, new TypeError('boom'));
      const cancelledWithoutSignal = ledger.start('promise');
      ledger.reject(cancelledWithoutSignal, Object.assign(new Error('c'), { name: 'CheckOutCancelledError' }));
      expect(violations).to.deep.equal([
        'checkout #3 (unsubscribe) settled twice: unsubscribed, then resolved',
        'checkout #5 (withConnection) failed with an unexpected TypeError: boom',
        'checkout #6 (promise) failed with an unexpected CheckOutCancelledError: c',
      ]);
      expect(ledger.check()).to.deep.equal([]);
      expect(ledger.toJSON()).to.deep.include({ started: 6, settled: 6, resolved: 1, unsubscribed: 1 });
      expect(ledger.toJSON().rejected).to.deep.equal({ CheckOutCancelledError: 2, TypeError: 1, WaitQueueTimeoutError: 1 });
    });
  });

  describe('PoolAudit', function () {
    it('agrees with a pool at rest, and reports a connection still in use at a quiescent point', async function () {
      const mocks = new MockConnectionFactory();
      const pool = new ConnectionPoolCore<MockConnection>({ address: 'localhost:27017', connectionFactory: mocks.factory });
      const audit = new PoolAudit('pool', pool);
      pool.ready();
      const held = await pool.checkOut();
      const other = await pool.checkOut();
      pool.checkIn(other);
      expect(audit.check()).to.deep.equal(['pool at a quiescent point (no work running): 1 connection(s) in use, 0 checkout(s) waiting, 0 pending']);
      pool.checkIn(held);
      expect(await eventually(() => audit.checkedIn === 2)).to.equal(true);
      expect(audit.check()).to.deep.equal([]);
      expect(audit.toJSON()).to.deep.include({ created: 2, checkOutStarted: 2, checkedOut: 2, checkedIn: 2 });
      pool.close();
      audit.stop();
    });
  });

  describe('settled', function () {
    it('takes a condition as settled only once it held at the samples asked for in a row, not at a moment it held by chance', async function () {
      const values = [true, false, true, true, true, false];
      let i = 0;
      const condition = (): boolean => values[Math.min(i++, values.length - 1)];
      expect(await settled(condition, 1000, 1, 3), 'three in a row: the 3rd to 5th checks').to.equal(true);
      expect(i).to.equal(5);
      i = 0;
      expect(await settled(condition, 1000, 1, 1), 'one sample: the first check').to.equal(true);
      expect(i).to.equal(1);
      i = 0;
      expect(await settled(condition, 30, 1, 4), 'never four in a row').to.equal(false);
    });
  });
});
