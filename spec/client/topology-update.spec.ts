import { expect } from 'chai';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { EJSON, ObjectId, type Document } from 'bson';
import { parseConnectionString } from '../../lib/connection-string';
import { asTopologyVersion } from '../../lib/monitor/topology-version';
import { incompatibleServer } from '../../lib/connection/handshake';
import { isStaleServerDescription } from '../../lib/client/state-change-error';
import { clientTopologyType } from '../../lib/client/topology-type';
import { readPreferenceFrom } from '../../lib/read-preference';
import { initialTopology, MAX_REPLICA_SET_MEMBERS, serverDescriptionOf, Topology, UNKNOWN_SERVER_DESCRIPTION, type ServerDescription } from '../../lib/client/topology-update';

/** The server discovery and monitoring spec's tests of the topology description (tests/rs, sharded, single). */
const fixtures = path.resolve(__dirname, '../fixtures/server-discovery');

interface OutcomeServer {
  type: string;
  setName?: string | null;
  setVersion?: number | null;
  electionId?: ObjectId | null;
  error?: string;
  logicalSessionTimeoutMinutes?: number | null;
  minWireVersion?: number;
  maxWireVersion?: number;
  topologyVersion?: Document | null;
}

interface Phase {
  description?: string;
  responses?: [string, Document][];
  outcome: {
    topologyType: string;
    setName?: string | null;
    servers: Record<string, OutcomeServer>;
    logicalSessionTimeoutMinutes?: number | null;
    maxSetVersion?: number;
    maxElectionId?: ObjectId;
    compatible?: boolean;
  };
}

/** What a client made of `uri` starts from, checked by the phases of one test. */
function run(uri: string, phases: Phase[]): void {
  const parsed = parseConnectionString(uri);
  const description = new Topology(initialTopology({ seeds: parsed.hosts, loadBalanced: false, directConnection: parsed.clientOptions.directConnection ?? false, replicaSet: parsed.replicaSet }));
  phases.forEach((phase, i) => {
    const at = `phase ${i + 1}${phase.description === undefined ? '' : ` (${phase.description})`}`;
    for (const [address, reply] of phase.responses ?? []) {
      const known = Object.keys(reply).length > 0;
      // A reply older than what the description holds of the server changes nothing (as the client does).
      if (known && isStaleServerDescription(description.servers.get(address)?.topologyVersion, asTopologyVersion(reply.topologyVersion))) continue;
      description.update(address, serverDescriptionOf(known ? reply : undefined));
    }
    const { outcome } = phase;
    expect(description.type, `${at}: topologyType`).to.equal(outcome.topologyType);
    expect(description.setName ?? null, `${at}: setName`).to.equal(outcome.setName ?? null);
    expect([...description.servers.keys()].sort(), `${at}: servers`).to.deep.equal(Object.keys(outcome.servers).sort());
    for (const [address, expected] of Object.entries(outcome.servers)) {
      const server = description.servers.get(address)!;
      expect(server.type, `${at}: ${address} type`).to.equal(expected.type);
      if ('setName' in expected) expect(server.setName ?? null, `${at}: ${address} setName`).to.equal(expected.setName);
      if ('setVersion' in expected) expect(server.setVersion ?? null, `${at}: ${address} setVersion`).to.equal(expected.setVersion);
      if ('electionId' in expected) expect(server.electionId?.toHexString() ?? null, `${at}: ${address} electionId`).to.equal(expected.electionId?.toHexString() ?? null);
      if (expected.error !== undefined) expect(server.error, `${at}: ${address} error`).to.include(expected.error);
      if ('logicalSessionTimeoutMinutes' in expected) expect(server.logicalSessionTimeoutMinutes ?? null, `${at}: ${address} logicalSessionTimeoutMinutes`).to.equal(expected.logicalSessionTimeoutMinutes);
      if (expected.minWireVersion !== undefined) expect(server.minWireVersion, `${at}: ${address} minWireVersion`).to.equal(expected.minWireVersion);
      if (expected.maxWireVersion !== undefined) expect(server.maxWireVersion, `${at}: ${address} maxWireVersion`).to.equal(expected.maxWireVersion);
      if ('topologyVersion' in expected) {
        const kept = server.topologyVersion;
        expect(kept === undefined ? null : EJSON.serialize(kept), `${at}: ${address} topologyVersion`).to.deep.equal(expected.topologyVersion === null || expected.topologyVersion === undefined ? null : EJSON.serialize(asTopologyVersion(expected.topologyVersion)!));
      }
    }
    if ('logicalSessionTimeoutMinutes' in outcome) expect(description.logicalSessionTimeoutMinutes ?? null, `${at}: logicalSessionTimeoutMinutes`).to.equal(outcome.logicalSessionTimeoutMinutes);
    if ('maxSetVersion' in outcome) expect(description.maxSetVersion, `${at}: maxSetVersion`).to.equal(outcome.maxSetVersion);
    if ('maxElectionId' in outcome) expect(description.maxElectionId?.toHexString(), `${at}: maxElectionId`).to.equal(outcome.maxElectionId?.toHexString());
    // Compatibility as the client's monitors judge it: a server whose wire versions the handshake refuses.
    if ('compatible' in outcome) {
      const compatible = [...description.servers].every(([address, s]) => s.type === 'Unknown' || incompatibleServer(address, s.minWireVersion, s.maxWireVersion ?? 0) === undefined);
      expect(compatible, `${at}: compatible`).to.equal(outcome.compatible);
    }
  });
}

describe('topology description updates (server discovery and monitoring spec)', function () {
  for (const [dir, count] of [
    ['rs', 77],
    ['sharded', 9],
    ['single', 19],
  ] as const) {
    describe(`its ${dir} tests`, function () {
      const files = fs.readdirSync(path.join(fixtures, dir)).filter((name) => name.endsWith('.json')).sort();
      it('has every case', function () {
        expect(files).to.have.length(count);
      });
      for (const file of files) {
        const test = EJSON.parse(fs.readFileSync(path.join(fixtures, dir, file), 'utf8'), { relaxed: true }) as { description: string; uri: string; phases: Phase[] };
        it(`${file}: ${test.description}`, function () {
          run(test.uri, test.phases);
        });
      }
    });
  }

  describe('beyond the spec tests', function () {
    const primary = (hosts: unknown, extra: Document = {}): Document => ({ ok: 1, isWritablePrimary: true, setName: 'rs', hosts, maxWireVersion: 21, ...extra });

    /** A description with `seeds`, in a replica set named `replicaSet` when given. */
    const topology = (seeds: string[], replicaSet?: string): Topology => new Topology(initialTopology({ seeds, loadBalanced: false, directConnection: false, replicaSet }));
    const secondary = (hosts: string[], extra: Document = {}): Document => ({ ok: 1, secondary: true, setName: 'rs', hosts, maxWireVersion: 21, ...extra });
    const oid = (n: number): ObjectId => new ObjectId(n.toString(16).padStart(24, '0'));
    const listed = (description: ServerDescription): string[] => [...description.hosts, ...description.passives, ...description.arbiters];

    it('a failed check, a null reply and a reply without ok: 1 give an Unknown server of which nothing is known', function () {
      for (const reply of [undefined, null as unknown as Document, { ok: 0, isWritablePrimary: true, setName: 'rs', hosts: ['a'] }]) {
        expect(serverDescriptionOf(reply), String(reply)).to.deep.equal({ type: 'Unknown', minWireVersion: 0, hosts: [], passives: [], arbiters: [] });
      }
    });

    it('takes no set name, member list, me nor primary from a ghost, a standalone or a mongos', function () {
      const fields = { setName: 'rs', hosts: ['b:27017'], passives: ['c:27017'], me: 'a:27017', primary: 'b:27017', maxWireVersion: 21 };
      for (const [reply, type] of [
        [{ ok: 1, isreplicaset: true, ...fields }, 'RSGhost'],
        [{ ok: 1, ...fields, setName: 5 }, 'Standalone'],
        [{ ok: 1, msg: 'isdbgrid', ...fields, setName: undefined }, 'Mongos'],
      ] as const) {
        const description = serverDescriptionOf(reply);
        expect(description.type).to.equal(type);
        expect({ setName: description.setName, me: description.me, primary: description.primary, members: listed(description) }, type).to.deep.equal({ setName: undefined, me: undefined, primary: undefined, members: [] });
      }
    });

    it('takes setVersion only as a finite number, and an absent or non-numeric wire version as 0', function () {
      for (const setVersion of ['2', Number.NaN, Number.POSITIVE_INFINITY]) expect(serverDescriptionOf(primary(['a'], { setVersion })).setVersion, String(setVersion)).to.equal(undefined);
      expect(serverDescriptionOf(primary(['a'], { setVersion: 2 })).setVersion).to.equal(2);
      expect(serverDescriptionOf({ ok: 1, maxWireVersion: 21 }).minWireVersion).to.equal(0);
      expect(serverDescriptionOf({ ok: 1, minWireVersion: '8', maxWireVersion: 21 }).minWireVersion).to.equal(0);
    });

    it('starts LoadBalanced in load-balanced mode, and then no check changes it', function () {
      const initial = initialTopology({ seeds: ['lb:27017'], loadBalanced: true, directConnection: false, replicaSet: 'rs' });
      expect(initial).to.deep.equal({ seeds: ['lb:27017'], type: 'LoadBalanced', setName: undefined });
      const description = new Topology(initial);
      expect(description.update('lb:27017', serverDescriptionOf({ ok: 1, msg: 'isdbgrid', maxWireVersion: 21 }))).to.deep.equal({ added: [], removed: [], invalidated: [] });
      expect(description.type).to.equal('LoadBalanced');
      expect(description.servers.get('lb:27017')).to.equal(UNKNOWN_SERVER_DESCRIPTION);
    });

    it('clientTopologyType takes a replica set\'s two TopologyTypes as one', function () {
      const types = ['Unknown', 'Single', 'Sharded', 'ReplicaSetNoPrimary', 'ReplicaSetWithPrimary', 'LoadBalanced'] as const;
      expect(types.map(clientTopologyType)).to.deep.equal(['Unknown', 'Single', 'Sharded', 'ReplicaSet', 'ReplicaSet', 'LoadBalanced']);
    });

    it('replaceServers and removeServer leave a replica set without a primary when they remove it, and other TopologyTypes as they were', function () {
      let description = topology(['a:27017', 'b:27017'], 'rs');
      description.update('a:27017', serverDescriptionOf(primary(['a:27017', 'b:27017'])));
      expect(description.replaceServers(['b:27017'])).to.deep.equal({ added: [], removed: ['a:27017'], invalidated: [] });
      expect(description.type).to.equal('ReplicaSetNoPrimary');

      description = topology(['a:27017', 'b:27017'], 'rs');
      description.update('a:27017', serverDescriptionOf(primary(['a:27017', 'b:27017'])));
      description.removeServer('a:27017');
      expect([...description.servers.keys()]).to.deep.equal(['b:27017']);
      expect(description.type).to.equal('ReplicaSetNoPrimary');

      description = topology(['a:27017', 'b:27017']);
      description.removeServer('b:27017');
      expect([...description.servers.keys()]).to.deep.equal(['a:27017']);
      expect(description.type).to.equal('Unknown');
    });

    it('an arbiter is a member of the set: it makes an Unknown topology a replica set, and its hosts are discovered', function () {
      const arbiter = (hosts: string[]): Document => ({ ok: 1, arbiterOnly: true, setName: 'rs', hosts, maxWireVersion: 21 });
      let description = topology(['a:27017', 'b:27017']);
      expect(description.update('a:27017', serverDescriptionOf(arbiter(['a:27017', 'c:27017'])))).to.deep.equal({ added: ['c:27017'], removed: [], invalidated: [] });
      expect(description.type).to.equal('ReplicaSetNoPrimary');
      expect(description.setName).to.equal('rs');

      description = topology(['a:27017'], 'rs');
      expect(description.update('a:27017', serverDescriptionOf(arbiter(['a:27017', 'c:27017'])))).to.deep.equal({ added: ['c:27017'], removed: [], invalidated: [] });
      expect(description.servers.get('a:27017')!.type).to.equal('RSArbiter');
    });

    it('with a primary, a member whose me names another host is removed', function () {
      const description = topology(['a:27017'], 'rs');
      description.update('a:27017', serverDescriptionOf(primary(['a:27017', 'b:27017'])));
      expect(description.update('b:27017', serverDescriptionOf(secondary(['a:27017', 'b:27017'], { me: 'c:27017' })))).to.deep.equal({ added: [], removed: ['b:27017'], invalidated: [] });
      expect(description.type).to.equal('ReplicaSetWithPrimary');
    });

    it('a primary that answers as a secondary leaves no primary, and the member it names becomes PossiblePrimary', function () {
      const description = topology(['a:27017'], 'rs');
      description.update('a:27017', serverDescriptionOf(primary(['a:27017', 'b:27017'])));
      description.update('a:27017', serverDescriptionOf(secondary(['a:27017', 'b:27017'], { primary: 'b:27017' })));
      expect(description.type).to.equal('ReplicaSetNoPrimary');
      expect(description.servers.get('b:27017')!.type).to.equal('PossiblePrimary');
    });

    it('a member named as primary becomes PossiblePrimary only while Unknown, and a primary named that is no server is not added', function () {
      const description = topology(['a:27017', 'b:27017'], 'rs');
      description.update('b:27017', serverDescriptionOf(secondary(['a:27017', 'b:27017'])));
      description.update('a:27017', serverDescriptionOf(secondary(['a:27017', 'b:27017'], { primary: 'b:27017' })));
      expect(description.servers.get('b:27017')!.type).to.equal('RSSecondary');
      expect(description.update('a:27017', serverDescriptionOf(secondary(['a:27017', 'b:27017'], { primary: 'z:27017' })))).to.deep.equal({ added: [], removed: [], invalidated: [] });
      expect([...description.servers.keys()]).to.deep.equal(['a:27017', 'b:27017']);
    });

    it('before MongoDB 6.0, a primary\'s claim orders by setVersion, then electionId; the same claim again is not stale', function () {
      const old = (setVersion: number | undefined, electionId: ObjectId | undefined): Document => primary(['a:27017', 'b:27017', 'c:27017'], { maxWireVersion: 16, ...(setVersion === undefined ? {} : { setVersion }), ...(electionId === undefined ? {} : { electionId }) });
      const types = (description: Topology): string[] => [...description.servers.values()].map((server) => server.type);
      const description = topology(['a:27017', 'b:27017', 'c:27017'], 'rs');
      description.update('a:27017', serverDescriptionOf(old(1, oid(1))));
      // Same setVersion, greater electionId: newer.
      expect(description.update('b:27017', serverDescriptionOf(old(1, oid(2)))).invalidated).to.deep.equal(['a:27017']);
      expect(types(description)).to.deep.equal(['Unknown', 'RSPrimary', 'Unknown']);
      // The same claim again.
      description.update('b:27017', serverDescriptionOf(old(1, oid(2))));
      expect(types(description)).to.deep.equal(['Unknown', 'RSPrimary', 'Unknown']);
      // Greater setVersion, smaller electionId: newer.
      expect(description.update('c:27017', serverDescriptionOf(old(2, oid(1)))).invalidated).to.deep.equal(['b:27017']);
      expect({ maxSetVersion: description.maxSetVersion, maxElectionId: description.maxElectionId?.toHexString() }).to.deep.equal({ maxSetVersion: 2, maxElectionId: oid(1).toHexString() });
      // Smaller setVersion, greater electionId: stale.
      description.update('a:27017', serverDescriptionOf(old(1, oid(3))));
      expect(types(description)).to.deep.equal(['Unknown', 'Unknown', 'RSPrimary']);
      expect(description.servers.get('a:27017')!.error).to.include('primary marked stale due to electionId/setVersion mismatch');

      // An electionId without a setVersion is not recorded.
      const alone = topology(['a:27017'], 'rs');
      alone.update('a:27017', serverDescriptionOf(old(undefined, oid(5))));
      expect(alone.servers.get('a:27017')!.type).to.equal('RSPrimary');
      expect(alone.maxElectionId).to.equal(undefined);
    });

    it('a stale primary\'s error names its claim and the newest election, null for what is absent', function () {
      const description = topology(['a:27017', 'b:27017'], 'rs');
      description.update('a:27017', serverDescriptionOf(primary(['a:27017', 'b:27017'], { setVersion: 1, electionId: oid(2) })));
      description.update('b:27017', serverDescriptionOf(primary(['a:27017', 'b:27017'])));
      expect(description.servers.get('b:27017')!.error).to.equal(`primary marked stale due to electionId/setVersion mismatch, { electionId: null, setVersion: null } is stale compared to { electionId: ${oid(2).toHexString()}, setVersion: 1 }`);
      description.update('b:27017', serverDescriptionOf(primary(['a:27017', 'b:27017'], { setVersion: 5, electionId: oid(1) })));
      expect(description.servers.get('b:27017')!.error).to.equal(`primary marked stale due to electionId/setVersion mismatch, { electionId: ${oid(1).toHexString()}, setVersion: 5 } is stale compared to { electionId: ${oid(2).toHexString()}, setVersion: 1 }`);
    });

    it('counts a LoadBalancer among the data-bearing servers of logicalSessionTimeoutMinutes', function () {
      const description = topology(['lb:27017']);
      description.update('lb:27017', { ...UNKNOWN_SERVER_DESCRIPTION, type: 'LoadBalancer', logicalSessionTimeoutMinutes: 30 });
      expect(description.logicalSessionTimeoutMinutes).to.equal(30);
    });

    it('a PossiblePrimary keeps the topologyVersion a state change error left on its Unknown description', function () {
      const description = topology(['a:27017', 'b:27017'], 'rs');
      const topologyVersion = { processId: oid(7), counter: 3 };
      description.update('b:27017', { ...UNKNOWN_SERVER_DESCRIPTION, topologyVersion });
      description.update('a:27017', serverDescriptionOf(secondary(['a:27017', 'b:27017'], { primary: 'b:27017' })));
      expect(description.servers.get('b:27017')).to.deep.include({ type: 'PossiblePrimary', topologyVersion });
    });

    it('takes at most 50 members of a reply, of its first 50 entries, and leaves out entries that are no address', function () {
      const description = new Topology(initialTopology({ seeds: ['a:27017'], loadBalanced: false, directConnection: false, replicaSet: 'rs' }));
      const hosts = ['a:27017', 17, '', 'b:99999', { host: 'c' }, ...Array.from({ length: 80 }, (_, i) => `m${i}:27017`)];
      const change = description.update('a:27017', serverDescriptionOf(primary(hosts, { passives: ['p:1'], arbiters: 'q:1' })));
      // a and m0 to m44: the four entries that are no address count among the 50 read.
      expect(description.servers.size).to.equal(MAX_REPLICA_SET_MEMBERS - 4);
      expect(change.added).to.have.length(MAX_REPLICA_SET_MEMBERS - 5);
      expect(change.added[0]).to.equal('m0:27017');
      expect(description.servers.has('p:1')).to.equal(false);
    });

    it('reads no more than the first 50 entries of a reply\'s lists: a member after 58,000 entries that are no address is not taken', function () {
      const noAddress = Array.from({ length: 58_000 }, () => 'a b:1');
      for (const reply of [{ hosts: [...noAddress, 'late:1'] }, { hosts: noAddress.slice(0, MAX_REPLICA_SET_MEMBERS), passives: ['late:1'] }]) {
        expect(listed(serverDescriptionOf({ ok: 1, secondary: true, setName: 'rs', maxWireVersion: 21, ...reply }))).to.deep.equal([]);
      }
      expect(serverDescriptionOf({ ok: 1, secondary: true, setName: 'rs', maxWireVersion: 21, hosts: noAddress.slice(0, MAX_REPLICA_SET_MEMBERS - 1), passives: ['late:1'] }).passives).to.deep.equal(['late:1']);
    });

    it('holds at most 50 servers, however many members list 50 new ones each; a primary then listing its members has them all', function () {
      const description = new Topology(initialTopology({ seeds: ['a:27017'], loadBalanced: false, directConnection: false, replicaSet: 'rs' }));
      const fresh = (round: number): string[] => Array.from({ length: MAX_REPLICA_SET_MEMBERS }, (_, i) => `h${round}-${i}:27017`);
      const secondary = (hosts: string[]): Document => ({ ok: 1, secondary: true, setName: 'rs', hosts, maxWireVersion: 21 });
      let added = description.update('a:27017', serverDescriptionOf(secondary(fresh(0)))).added.length;
      // Each server found lists 50 more, never seen.
      for (let round = 1; round <= 20; round++) {
        const [, next] = [...description.servers.keys()];
        added += description.update(next!, serverDescriptionOf(secondary(fresh(round)))).added.length;
      }
      expect(description.servers.size).to.equal(MAX_REPLICA_SET_MEMBERS);
      expect(added).to.equal(MAX_REPLICA_SET_MEMBERS - 1);
      // The seed is the primary, and lists three members none of which is known yet.
      const change = description.update('a:27017', serverDescriptionOf(primary(['a:27017', 'b:27017', 'c:27017'])));
      expect([...description.servers.keys()]).to.deep.equal(['a:27017', 'b:27017', 'c:27017']);
      expect(change.added).to.deep.equal(['b:27017', 'c:27017']);
      expect(change.removed).to.have.length(MAX_REPLICA_SET_MEMBERS - 1);
    });

    it('leaves out Unix domain socket paths and hosts of more than 255 characters, in every field that names a member', function () {
      const longest = `${'h'.repeat(255)}:1`;
      const reply = { ok: 1, secondary: true, setName: 'rs', hosts: ['a:27017', '/tmp/mongodb-27017.sock', './x.sock', `${'h'.repeat(256)}:1`, longest], passives: ['/var/run/m.sock'], me: '/tmp/mongodb-27017.sock', primary: `${'p'.repeat(300)}:27017`, maxWireVersion: 21 };
      const description = serverDescriptionOf(reply);
      expect(description.hosts).to.deep.equal(['a:27017', longest]);
      expect(description.passives).to.deep.equal([]);
      expect(description.me).to.equal(undefined);
      expect(description.primary).to.equal(undefined);
    });

    it('names hosts as the client writes them: lower case, port 27017 when none, IPv6 in canonical form', function () {
      const description = new Topology(initialTopology({ seeds: ['a:27017'], loadBalanced: false, directConnection: false, replicaSet: 'rs' }));
      description.update('a:27017', serverDescriptionOf(primary(['A', 'B:27018', '[0:0:0:0:0:0:0:1]:27019'], { me: 'A:27017' })));
      expect([...description.servers.keys()]).to.deep.equal(['a:27017', 'b:27018', '[::1]:27019']);
    });

    it('reports what the client must do: open the new members, remove those left out, check again an old primary', function () {
      const description = new Topology(initialTopology({ seeds: ['a:27017', 'b:27017', 'x:27017'], loadBalanced: false, directConnection: false, replicaSet: 'rs' }));
      let change = description.update('a:27017', serverDescriptionOf(primary(['a:27017', 'b:27017', 'c:27017'], { electionId: new ObjectId('000000000000000000000001') })));
      expect(change).to.deep.equal({ added: ['c:27017'], removed: ['x:27017'], invalidated: [] });
      change = description.update('b:27017', serverDescriptionOf(primary(['a:27017', 'b:27017', 'c:27017'], { electionId: new ObjectId('000000000000000000000002') })));
      expect(change).to.deep.equal({ added: [], removed: [], invalidated: ['a:27017'] });
      expect(description.servers.get('a:27017')!.error).to.include('primary marked stale due to discovery of newer primary');
      // A removed server's late outcome changes nothing.
      expect(description.update('x:27017', serverDescriptionOf(primary(['x:27017'])))).to.deep.equal({ added: [], removed: [], invalidated: [] });
      expect(description.servers.has('x:27017')).to.equal(false);
    });

    it('a member that lists itself under another name is removed, the name it lists added', function () {
      const description = new Topology(initialTopology({ seeds: ['seed:27017'], loadBalanced: false, directConnection: false, replicaSet: 'rs' }));
      const change = description.update('seed:27017', serverDescriptionOf({ ok: 1, secondary: true, setName: 'rs', hosts: ['m1:27017', 'm2:27017'], me: 'm1:27017', maxWireVersion: 21 }));
      expect(change).to.deep.equal({ added: ['m1:27017', 'm2:27017'], removed: ['seed:27017'], invalidated: [] });
    });

    it('a member one reply added and the primary\'s list leaves out is removed again', function () {
      const description = new Topology(initialTopology({ seeds: ['a:27017', 'b:27017'], loadBalanced: false, directConnection: false, replicaSet: undefined }));
      description.update('a:27017', serverDescriptionOf({ ok: 1, secondary: true, setName: 'rs', hosts: ['a:27017', 'b:27017', 'c:27017'], maxWireVersion: 21 }));
      // c came with a's reply; the primary's list leaves it out again.
      const change = description.update('b:27017', serverDescriptionOf(primary(['a:27017', 'b:27017'])));
      expect(change).to.deep.equal({ added: [], removed: ['c:27017'], invalidated: [] });
    });

    it('replaceServers (SRV polling) adds and removes servers', function () {
      const description = new Topology(initialTopology({ seeds: ['a:27017', 'b:27017'], loadBalanced: false, directConnection: false, replicaSet: undefined }));
      description.update('a:27017', serverDescriptionOf({ ok: 1, msg: 'isdbgrid', maxWireVersion: 21 }));
      expect(description.replaceServers(['b:27017', 'c:27017'])).to.deep.equal({ added: ['c:27017'], removed: ['a:27017'], invalidated: [] });
      expect([...description.servers.keys()]).to.deep.equal(['b:27017', 'c:27017']);
      expect(description.servers.get('c:27017')).to.equal(UNKNOWN_SERVER_DESCRIPTION);
    });

    it('a standalone among servers SRV polling joined to the one seed is removed: the topology never becomes Single with several servers', function () {
      const description = new Topology(initialTopology({ seeds: ['a:27017'], loadBalanced: false, directConnection: false, replicaSet: undefined }));
      description.replaceServers(['a:27017', 'b:27017', 'c:27017']);
      const standalone = serverDescriptionOf({ ok: 1, isWritablePrimary: true, maxWireVersion: 21 });
      expect(description.update('b:27017', standalone)).to.deep.equal({ added: [], removed: ['b:27017'], invalidated: [] });
      description.update('c:27017', standalone);
      expect(description.type).to.equal('Unknown');
      expect([...description.servers.keys()]).to.deep.equal(['a:27017']);
      // SRV polling left it the only server again: a standalone is its server.
      description.replaceServers(['d:27017']);
      description.update('d:27017', standalone);
      expect(description.type).to.equal('Single');
    });

    it('a reply of a type it does not know, or with fields of the wrong type, never throws', function () {
      for (const reply of [{ ok: 1, setName: 5, hosts: 'a' }, { ok: 1, setName: 'rs', hosts: [null, undefined, ['a']], me: 7, primary: {} }, { ok: 0 }, { ok: 1, electionId: 'x', setVersion: '2' }]) {
        const description = new Topology(initialTopology({ seeds: ['a:27017'], loadBalanced: false, directConnection: false, replicaSet: 'rs' }));
        expect(() => description.update('a:27017', serverDescriptionOf(reply))).not.to.throw();
      }
    });
  });

  describe('description(): the description as it is now, frozen (SDAM logging and monitoring spec, "Determining If A Topology Has Readable/Writable Servers")', function () {
    const make = (seeds: string[], options: { replicaSet?: string; directConnection?: boolean; loadBalanced?: boolean } = {}): Topology =>
      new Topology(initialTopology({ seeds, loadBalanced: options.loadBalanced ?? false, directConnection: options.directConnection ?? false, replicaSet: options.replicaSet }));
    const member = (extra: Document): ServerDescription => serverDescriptionOf({ ok: 1, setName: 'rs', hosts: ['a:27017', 'b:27017'], maxWireVersion: 21, ...extra });
    const secondaryRead = readPreferenceFrom('readPreference', 'secondary');
    const nearest = readPreferenceFrom('readPreference', 'nearest');
    const table = (topology: Topology): boolean[] => {
      const d = topology.description();
      return [d.hasReadableServer(), d.hasReadableServer(secondaryRead), d.hasReadableServer(nearest), d.hasWritableServer()];
    };

    it('readable and writable by the TopologyType table: Unknown never, Single and Sharded with a server available, LoadBalanced always, a replica set by the read preference', function () {
      expect(table(make(['a:27017', 'b:27017'])), 'Unknown').to.deep.equal([false, false, false, false]);
      const single = make(['a:27017'], { directConnection: true });
      expect(table(single), 'Single, not checked').to.deep.equal([false, false, false, false]);
      single.update('a:27017', serverDescriptionOf({ ok: 1, isWritablePrimary: true, maxWireVersion: 21 }));
      expect(table(single), 'Single, a standalone').to.deep.equal([true, true, true, true]);
      const sharded = make(['a:27017', 'b:27017']);
      sharded.update('a:27017', serverDescriptionOf({ ok: 1, msg: 'isdbgrid', maxWireVersion: 21 }));
      expect(table(sharded), 'Sharded, one mongos of two').to.deep.equal([true, true, true, true]);
      sharded.update('a:27017', serverDescriptionOf(undefined));
      expect(sharded.description().type).to.equal('Sharded');
      expect(table(sharded), 'Sharded, none available').to.deep.equal([false, false, false, false]);
      expect(table(make(['lb:27017'], { loadBalanced: true })), 'LoadBalanced').to.deep.equal([true, true, true, true]);
      const set = make(['a:27017', 'b:27017'], { replicaSet: 'rs' });
      expect(table(set), 'ReplicaSetNoPrimary, none checked').to.deep.equal([false, false, false, false]);
      set.update('b:27017', member({ secondary: true }));
      expect(table(set), 'ReplicaSetNoPrimary, a secondary').to.deep.equal([false, true, true, false]);
      set.update('a:27017', member({ isWritablePrimary: true }));
      expect(set.description().type).to.equal('ReplicaSetWithPrimary');
      expect(table(set), 'ReplicaSetWithPrimary').to.deep.equal([true, true, true, true]);
      set.update('b:27017', serverDescriptionOf(undefined));
      expect(table(set), 'ReplicaSetWithPrimary, no secondary').to.deep.equal([true, false, true, true]);
    });

    it('is frozen and keeps its servers when the topology changes after', function () {
      const topology = make(['a:27017', 'b:27017'], { replicaSet: 'rs' });
      const before = topology.description();
      expect(Object.isFrozen(before)).to.equal(true);
      topology.update('a:27017', member({ isWritablePrimary: true, hosts: ['a:27017', 'c:27017'] }));
      expect([...before.servers.keys()]).to.deep.equal(['a:27017', 'b:27017']);
      expect(before.type).to.equal('ReplicaSetNoPrimary');
      expect(before.servers.get('a:27017')!.type).to.equal('Unknown');
      const after = topology.description();
      expect([...after.servers.keys()]).to.deep.equal(['a:27017', 'c:27017']);
      expect(after.servers.get('a:27017')).to.include({ type: 'RSPrimary', primary: undefined });
      expect(Object.isFrozen(after.servers.get('a:27017'))).to.equal(true);
      expect(Object.isFrozen(after.servers.get('a:27017')!.hosts)).to.equal(true);
    });
  });
});
