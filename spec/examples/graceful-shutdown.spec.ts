/**
 * examples/graceful-shutdown.ts shuts down gracefully on a signal: it stops starting work, lets every operation in
 * flight at the signal complete, closes the client, and exits 0 by itself within a few seconds. When the in-flight
 * work outlasts the shutdown timeout, it interrupts it, reports it as aborted, and exits 1, still promptly.
 */
import { expect } from 'chai';
import { setTimeout as sleep } from 'node:timers/promises';
import { lastJsonLine, startExample } from './run-example';

describe('examples/graceful-shutdown.ts', function () {
  this.timeout(20_000);

  it('on SIGTERM, finishes every operation in flight, starts none, and exits 0 with nothing left running', async function () {
    const service = startExample('graceful-shutdown.ts', ['--workers', '8', '--work-ms', '100']);
    await service.waitForLine(/^ready$/, 10_000);
    await sleep(300); // serving for a while: some operations done, one per worker in flight
    service.child.kill('SIGTERM');
    const { code, signal, stdout, stderr } = await service.exited(5_000);
    expect(signal, stderr).to.equal(null);
    expect(code, stderr).to.equal(0);
    const summary = lastJsonLine(stdout);
    expect(summary.signal).to.equal('SIGTERM');
    expect(summary.completedBeforeSignal).to.be.greaterThan(0);
    expect(summary.inFlightAtSignal).to.equal(8);
    expect(summary.completedAfterSignal).to.equal(summary.inFlightAtSignal);
    expect(summary.aborted).to.equal(0);
    expect(summary.startedAfterSignal).to.equal(0);
  });

  it('bounds the wait: work outlasting the shutdown timeout is interrupted and reported, exit 1 soon after', async function () {
    const service = startExample('graceful-shutdown.ts', ['--workers', '4', '--work-ms', '10000', '--shutdown-timeout-ms', '200']);
    await service.waitForLine(/^ready$/, 10_000);
    service.child.kill('SIGINT');
    const { code, stdout, stderr } = await service.exited(5_000);
    expect(code, stderr).to.equal(1);
    const summary = lastJsonLine(stdout);
    expect(summary.signal).to.equal('SIGINT');
    expect(summary.inFlightAtSignal).to.equal(4);
    expect(summary.completedAfterSignal).to.equal(0);
    expect(summary.aborted).to.equal(4);
    expect(summary.shutdownMS).to.be.below(5_000);
  });
});
