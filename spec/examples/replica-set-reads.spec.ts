/**
 * examples/replica-set-reads.ts runs end to end against three embedded replica set members: each of its read
 * preference checks prints `ok - <what>`, none prints `not ok`, closing the client leaves no connection open on any
 * member, and it exits 0 on its own.
 */
import { expect } from 'chai';
import { runExample } from './run-example';

const EXPECTED = [
  'ok - given one member, the client finds the two others',
  'ok - writes go to the primary',
  "ok - reads of mode 'secondary' spread over both secondaries",
  'ok - reads with maxStalenessSeconds 90 avoid the secondary 200 s behind',
  "ok - reads of mode 'nearest' go to the members of the first tag set that matches any",
  "ok - reads of mode 'primaryPreferred' keep succeeding while the primary changes, then go to the new primary",
  "ok - the URI's readPreference is client.readPreference, but command() without one goes to the primary",
  'ok - closing the client closes its connections to every member',
];

describe('examples/replica-set-reads.ts', function () {
  this.timeout(20_000);

  it('passes every read preference check it runs against three embedded members, and exits 0', async function () {
    const { code, stdout, stderr } = await runExample('replica-set-reads.ts', [], 15_000);
    const lines = stdout.trim().split('\n');
    expect(lines.filter((l) => l.startsWith('not ok')), stderr).to.deep.equal([]);
    expect(lines.filter((l) => l.startsWith('ok - '))).to.deep.equal(EXPECTED);
    expect(lines.at(-1)).to.equal(`${EXPECTED.length}/${EXPECTED.length} passed`);
    expect(code, stderr).to.equal(0);
  });
});
