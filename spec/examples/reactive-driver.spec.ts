/**
 * examples/reactive-driver.ts runs end to end: every command succeeds although the pool is cleared midway (the
 * checkouts the clear failed are retried once the pool is ready again), each checkout is checked in exactly once,
 * and the program exits 0 on its own.
 */
import { expect } from 'chai';
import { lastJsonLine, runExample } from './run-example';

describe('examples/reactive-driver.ts', function () {
  this.timeout(20_000);

  it('retries the PoolClearedErrors of a mid-run clear: every command succeeds, nothing fails, exit 0', async function () {
    const { code, stdout, stderr } = await runExample('reactive-driver.ts', ['--commands', '300', '--concurrency', '40'], 15_000);
    expect(code, stderr).to.equal(0);
    const summary = lastJsonLine(stdout);
    expect(summary.commands).to.equal(300);
    expect(summary.ok).to.equal(300);
    expect(summary.failures, String(summary.firstFailure)).to.equal(0);
    expect(summary.poolCleared).to.equal(1);
    // 40 operations in flight and 5 connections: the clear evicted waiting checkouts, which were retried.
    expect(summary.retries).to.be.at.least(1);
    expect(summary.checkOutFailed).to.equal(summary.retries);
    // One check-in per checkout, and one checkout per successful command.
    expect(summary.checkedOut).to.equal(300);
    expect(summary.checkedIn).to.equal(summary.checkedOut);
  });
});
