import { expect } from 'chai';
import { abortAlone } from '../../bench/scenarios';

describe('bench scenarios: the cancel floors', () => {
  it('abort() alone times every abort of each batch', async () => {
    const micros = await abortAlone(50, 100);
    expect(micros).to.be.a('number').and.to.be.greaterThan(0);
    expect(Number.isFinite(micros)).to.equal(true);
  });

  it("the rejection floor rejects every aborted caller with a new error whose cause is the signal's reason, before its batch is timed", async () => {
    const micros = await abortAlone(50, 100, true);
    expect(micros).to.be.a('number').and.to.be.greaterThan(0);
    expect(Number.isFinite(micros)).to.equal(true);
  });
});
