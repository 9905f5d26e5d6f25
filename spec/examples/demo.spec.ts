/**
 * The main job runs end to end: `examples/demo.ts` with a short duration must exit 0 on its own (no open handles)
 * and print a JSON summary whose numbers add up.
 */
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { EmbeddedServer } from '../../lib/testing';

const root = path.resolve(__dirname, '../..');

function runDemo(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-r', 'ts-node/register/transpile-only', 'examples/demo.ts', ...args], {
      cwd: root,
      env: process.env,
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
      resolve({ code, stdout, stderr });
    });
  });
}

describe('examples/demo.ts (the main job)', function () {
  this.timeout(90_000);

  it('runs workers through a clear, exits 0 by itself, and prints a consistent JSON summary', async function () {
    const { code, stdout, stderr } = await runDemo(['--duration', '1', '--workers', '300']);
    expect(code, stderr).to.equal(0);
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
    ]);
    expect(summary.heartbeats.succeeded).to.be.at.least(2); // one before the run, one that readied the pool after the clear
    expect(summary.workers).to.equal(300);
    expect(summary.checkouts).to.be.greaterThan(0);
    expect(summary.pings).to.equal(summary.checkouts);
    expect(summary.otherErrors).to.equal(0);
    // The mid-run clear made every connection stale; after close, all created connections were closed.
    expect(summary.connectionsCreated).to.be.greaterThan(10);
    expect(summary.connectionsClosed).to.equal(summary.connectionsCreated);
    expect(summary.failedCheckouts).to.be.an('object');
    for (const n of Object.values(summary.failedCheckouts)) expect(n).to.be.a('number');
    expect(summary.checkoutWaitMS.p99).to.be.at.least(summary.checkoutWaitMS.p50);
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
});
