import { expect } from 'chai';
import { serverTypeOf, topologyDescriptionText } from '../../lib/client/topology-description';

describe('topology description (SDAM "ServerDescription", "TopologyType")', function () {
  it('serverTypeOf: the ServerType each hello reply shows, by the symptoms of SDAM\'s table', function () {
    expect(serverTypeOf({ ok: 1, isWritablePrimary: true })).to.equal('Standalone');
    expect(serverTypeOf({ ok: 1, ismaster: true, msg: 'isdbgrid' })).to.equal('Mongos');
    expect(serverTypeOf({ ok: 1, isWritablePrimary: true, setName: 'rs0' })).to.equal('RSPrimary');
    expect(serverTypeOf({ ok: 1, ismaster: true, setName: 'rs0' }), 'the legacy hello').to.equal('RSPrimary');
    expect(serverTypeOf({ ok: 1, isWritablePrimary: false, ismaster: true, secondary: true, setName: 'rs0' }), 'isWritablePrimary first, ismaster only without it').to.equal('RSSecondary');
    expect(serverTypeOf({ ok: 1, secondary: true, setName: 'rs0' })).to.equal('RSSecondary');
    expect(serverTypeOf({ ok: 1, arbiterOnly: true, setName: 'rs0' })).to.equal('RSArbiter');
    expect(serverTypeOf({ ok: 1, setName: 'rs0' }), 'neither primary, secondary nor arbiter (recovering)').to.equal('RSOther');
    expect(serverTypeOf({ ok: 1, secondary: true, hidden: true, setName: 'rs0' }), 'hidden').to.equal('RSOther');
    expect(serverTypeOf({ ok: 1, isreplicaset: true })).to.equal('RSGhost');
    expect(serverTypeOf({ ok: 1, isreplicaset: true, setName: 'rs0', isWritablePrimary: true }), 'isreplicaset wins').to.equal('RSGhost');
    expect(serverTypeOf({ ok: 1, isWritablePrimary: true, setName: 7 }), 'a setName that is not a string is none').to.equal('Standalone');
  });

  it('topologyDescriptionText: JSON of the TopologyType and the servers in order', function () {
    expect(topologyDescriptionText('Unknown', [])).to.equal('{"type":"Unknown","servers":[]}');
    const a = { address: 'a:27017', type: 'RSSecondary' as const };
    const b = { address: 'b:27017', type: 'RSPrimary' as const };
    expect(JSON.parse(topologyDescriptionText('ReplicaSetNoPrimary', [a]))).to.deep.equal({ type: 'ReplicaSetNoPrimary', servers: [a] });
    expect(JSON.parse(topologyDescriptionText('ReplicaSetWithPrimary', [a, b]))).to.deep.equal({ type: 'ReplicaSetWithPrimary', servers: [a, b] });
    expect(JSON.parse(topologyDescriptionText('Single', [b])).type, 'a primary under directConnection is still Single').to.equal('Single');
    expect(topologyDescriptionText('Sharded', [b, a])).to.not.equal(topologyDescriptionText('Sharded', [a, b]));
  });
});
