import { expect } from 'chai';
import { EmbeddedServer } from '../../../lib/testing';
import { compareVersions, describeExternal, embeddedPlan, unmet } from './deployment';

describe('unified test deployments', function () {
  it('compare versions part by part, a missing part 0, bounds inclusive ("Version String", "runOnRequirement")', function () {
    expect(compareVersions('4.4.7', '4.4')).to.be.above(0);
    expect(compareVersions('4.2.99', '4.4.0')).to.be.below(0);
    expect(compareVersions('4.4', '4.4.0')).to.equal(0);
    const deployment = { topology: 'single' as const, serverVersion: '4.4.0', auth: false };
    expect(unmet({ minServerVersion: '4.4', maxServerVersion: '4.4.0' }, deployment)).to.equal(undefined);
    expect(unmet({ minServerVersion: '4.4.1' }, deployment)).to.match(/4\.4\.0 < 4\.4\.1/);
    expect(unmet({ topologies: ['sharded-replicaset'] }, { ...deployment, topology: 'sharded' })).to.equal(undefined);
    expect(unmet({ auth: true }, deployment)).to.match(/auth required/);
  });

  it('plan an embedded deployment reporting the newest release a test allows (a test of servers before 4.4 gets wire version 8)', function () {
    expect(embeddedPlan([{ maxServerVersion: '4.2.99', topologies: ['single'] }])).to.include({ serverVersion: '4.2.0', maxWireVersion: 8 });
    expect(embeddedPlan([{ topologies: ['replicaset'], auth: true }])).to.include({ topology: 'replicaset', serverVersion: '8.0.0', auth: true });
    expect(embeddedPlan([{ maxServerVersion: '3.4' }])).to.be.a('string');
  });

  it("read a real deployment's version from buildInfo's versionArray, without a release's suffix", async function () {
    const server = await new EmbeddedServer().start();
    server.handle('buildInfo', () => ({ version: '8.1.0-rc0', versionArray: [8, 1, 0, -50], ok: 1 }));
    try {
      expect(await describeExternal(`mongodb://${server.address}/`)).to.include({ serverVersion: '8.1.0', topology: 'single', auth: false });
    } finally {
      await server.stop();
    }
  });
});
