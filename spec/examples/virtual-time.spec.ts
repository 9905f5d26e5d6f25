/**
 * examples/virtual-time.ts runs end to end: each of its virtual-time tests prints `ok - <name>`, none prints
 * `not ok`, and it exits 0 on its own (a pool on a VirtualClock arms no real timer and opens no socket).
 */
import { expect } from 'chai';
import { runExample } from './run-example';

const EXPECTED = [
  'ok - establishing a connection takes exactly establishDelayMS of virtual time',
  'ok - a checkout waiting on a full pool fails with WaitQueueTimeoutError at exactly waitQueueTimeoutMS',
  'ok - the application backs off and succeeds once a connection frees up',
  'ok - the application gives up after its last attempt, on a schedule known to the millisecond',
  'ok - clock.advance, not flush(): the Background Thread re-arms itself while the pool is open',
];

describe('examples/virtual-time.ts', function () {
  this.timeout(20_000);

  it('passes every virtual-time test it runs, and exits 0', async function () {
    const { code, stdout, stderr } = await runExample('virtual-time.ts', [], 15_000);
    const lines = stdout.trim().split('\n');
    expect(lines.filter((l) => l.startsWith('not ok')), stderr).to.deep.equal([]);
    expect(lines.filter((l) => l.startsWith('ok - '))).to.deep.equal(EXPECTED);
    expect(lines.at(-1)).to.equal(`${EXPECTED.length}/${EXPECTED.length} passed`);
    expect(code, stderr).to.equal(0);
  });
});
