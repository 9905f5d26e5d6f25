/**
 * The embedded endpoint as a member of a replica set whose other members a client discovers from it, answering as
 * mongod answers: a secondary's `primary` (the set's primary in this process, when its configuration lists it), and,
 * from a configuration given with `setReplicaSetConfig`, `hosts`, `passives` and `arbiters` as mongod lists them, an
 * arbiter's, a passive member's and a hidden member's own reply, and a member removed from the configuration
 * answering as a removed mongod does (an RSGhost). Real sockets; the library's client and the official driver
 * discover such a set as SDAM says.
 */
import { expect } from 'chai';
import type { Document } from 'bson';
import { MongoClient } from 'mongodb';
import { connect, InvalidOptionError, MongoServerError, type Client } from '../../lib';
import { EmbeddedServer, type ReplicaSetConfigMember } from '../../lib/testing';
import { eventually } from '../support/endpoint';
import { startedMembers } from '../support/members';

describe('EmbeddedServer: a replica set member as a client discovers it (primary, passives, arbiters, hidden, removed)', function () {
  this.timeout(20_000);
  const started = startedMembers();
  const { member, connect: open } = started;

  const hello = async (server: EmbeddedServer, command: Document = { hello: 1 }): Promise<Document> => (await open(server)).command('admin', command);
  const refusal = (promise: Promise<unknown>): Promise<unknown> => promise.then(() => 'no error', (e: unknown) => e);

  /** A primary, a secondary, a passive, a hidden member and an arbiter of `rs0`, each given the set's configuration. */
  async function fiveMembers(): Promise<{ primary: EmbeddedServer; secondary: EmbeddedServer; passive: EmbeddedServer; hidden: EmbeddedServer; arbiter: EmbeddedServer; config: ReplicaSetConfigMember[] }> {
    const primary = await member({ setName: 'rs0', state: 'primary' });
    const [secondary, passive, hidden, arbiter] = await Promise.all([0, 1, 2, 3].map(() => member({ setName: 'rs0', state: 'secondary' })));
    const config: ReplicaSetConfigMember[] = [
      { host: primary.address },
      { host: arbiter!.address, arbiterOnly: true },
      { host: secondary!.address, priority: 2 },
      { host: hidden!.address, hidden: true, priority: 0 },
      { host: passive!.address, priority: 0 },
    ];
    for (const m of [primary, secondary!, passive!, hidden!, arbiter!]) m.setReplicaSetConfig(config);
    return { primary, secondary: secondary!, passive: passive!, hidden: hidden!, arbiter: arbiter!, config };
  }

  it("a secondary reports the set's primary in `primary` once its configuration lists it, follows an election, and reports none without a primary", async function () {
    const a = await member({ setName: 'rs0', state: 'primary' });
    const b = await member({ setName: 'rs0', state: 'secondary' });
    // Its configuration (by default its own address) does not list the primary: as a mongod, it knows none.
    expect(await hello(b)).to.not.have.property('primary');
    for (const m of [a, b]) m.setReplicaSetHosts([a.address, b.address]);
    expect(await hello(b)).to.include({ isWritablePrimary: false, secondary: true, primary: a.address });
    expect(await hello(b, { isMaster: 1 })).to.include({ ismaster: false, primary: a.address });
    expect(await hello(a)).to.include({ primary: a.address });
    // An election: each reports the new primary at its next hello.
    a.setReplicaSetMemberState('secondary');
    b.setReplicaSetMemberState('primary');
    expect(await hello(a)).to.include({ secondary: true, primary: b.address });
    expect(await hello(b)).to.include({ isWritablePrimary: true, primary: b.address });
    // Two primaries (the old one not stepped down yet): a secondary follows the one elected last.
    const c = await member({ setName: 'rs0', state: 'secondary' });
    c.setReplicaSetHosts([a.address, b.address, c.address]);
    b.setReplicaSetMemberState('secondary');
    a.setReplicaSetMemberState('primary');
    expect(await hello(c)).to.include({ primary: a.address });
    b.setReplicaSetMemberState('primary');
    expect(await hello(c)).to.include({ primary: b.address });
    // No primary started: none reported; another set's primary is none of its business.
    a.setReplicaSetMemberState('secondary');
    await b.stop();
    expect(await hello(c)).to.not.have.property('primary');
    const other = await member({ setName: 'rs1', state: 'primary' });
    c.setReplicaSetHosts([other.address, c.address]);
    expect(await hello(c)).to.not.have.property('primary');
  });

  it('from a configuration, lists the electable members in hosts, the priority 0 ones in passives, the arbiters in arbiters, and the hidden in none, as mongod', async function () {
    const { primary, secondary, passive, hidden, arbiter } = await fiveMembers();
    for (const m of [primary, secondary, passive, hidden, arbiter]) {
      const reply = await hello(m);
      expect(reply.hosts, m.address).to.deep.equal([primary.address, secondary.address]);
      expect(reply.passives, m.address).to.deep.equal([passive.address]);
      expect(reply.arbiters, m.address).to.deep.equal([arbiter.address]);
      expect(reply, m.address).to.include({ setName: 'rs0', setVersion: 2, me: m.address, primary: primary.address });
    }
    // A configuration without passives nor arbiters: those lists are left out, as mongod leaves them.
    primary.setReplicaSetConfig([{ host: primary.address }]);
    expect(await hello(primary)).to.not.have.any.keys('passives', 'arbiters');
    expect((await hello(primary)).hosts).to.deep.equal([primary.address]);
  });

  it("an arbiter's, a passive member's and a hidden member's own hello, as mongod's (arbiterOnly; passive; hidden with passive), and the primary's and a secondary's have none of those fields", async function () {
    const { primary, secondary, passive, hidden, arbiter } = await fiveMembers();
    const arbiterReply = await hello(arbiter);
    expect(arbiterReply).to.include({ isWritablePrimary: false, secondary: false, arbiterOnly: true });
    expect(arbiterReply).to.not.have.any.keys('passive', 'hidden', 'electionId');
    expect(await hello(arbiter, { isMaster: 1 })).to.include({ ismaster: false, secondary: false, arbiterOnly: true });
    const passiveReply = await hello(passive);
    expect(passiveReply).to.include({ isWritablePrimary: false, secondary: true, passive: true });
    expect(passiveReply).to.not.have.any.keys('arbiterOnly', 'hidden');
    const hiddenReply = await hello(hidden);
    expect(hiddenReply).to.include({ isWritablePrimary: false, secondary: true, passive: true, hidden: true });
    expect(hiddenReply).to.not.have.property('arbiterOnly');
    for (const m of [primary, secondary]) expect(await hello(m), m.address).to.not.have.any.keys('arbiterOnly', 'passive', 'hidden');
    // mongod elects none of them: the state cannot be set to primary, and nothing changes.
    for (const m of [arbiter, passive, hidden]) {
      expect(() => m.setReplicaSetMemberState('primary'), m.address).to.throw(InvalidOptionError).with.property('option', 'state');
      expect(Number(m.topologyVersion.counter), m.address).to.equal(1);
    }
    // An arbiter serves no read (NotPrimaryOrSecondary, 13436) and no write (NotWritablePrimary, 10107).
    const c = await open(arbiter);
    expect(await refusal(c.command('test', { find: 'c', $readPreference: { mode: 'secondary' } }))).to.be.instanceOf(MongoServerError)
      .and.include({ code: 13436, codeName: 'NotPrimaryOrSecondary', message: 'node is not in primary or recovering state' });
    expect(await refusal(c.command('test', { insert: 'c', documents: [{}] }))).to.include({ code: 10107 });
    expect(await refusal(c.command('test', { find: 'c' }))).to.include({ code: 13435 });
    // A passive member serves the reads a secondary serves.
    expect(await (await open(passive)).command('test', { find: 'c', $readPreference: { mode: 'secondary' } })).to.include({ ok: 1 });
  });

  it('a member its configuration does not list answers as a removed mongod (setName, isreplicaset, no hosts nor me), serves nothing, and is a member again once listed', async function () {
    const a = await member({ setName: 'rs0', state: 'primary' });
    const b = await member({ setName: 'rs0', state: 'secondary' });
    const removed = await member({ setName: 'rs0', state: 'secondary' });
    const config = [{ host: a.address }, { host: b.address }];
    for (const m of [a, b, removed]) m.setReplicaSetConfig(config);
    const reply = await hello(removed);
    expect(reply).to.include({ ok: 1, setName: 'rs0', isWritablePrimary: false, secondary: false, info: 'Does not have a valid replica set config', isreplicaset: true });
    expect(reply).to.not.have.any.keys('hosts', 'passives', 'arbiters', 'setVersion', 'primary', 'me', 'electionId', 'lastWrite', 'tags', 'arbiterOnly', 'passive', 'hidden');
    expect(reply).to.have.property('topologyVersion');
    expect(await hello(removed, { isMaster: 1 })).to.include({ ismaster: false, secondary: false, isreplicaset: true });
    const c = await open(removed);
    expect(await refusal(c.command('test', { find: 'c', $readPreference: { mode: 'nearest' } }))).to.include({ code: 13436 });
    expect(await refusal(c.command('test', { insert: 'c', documents: [{}] }))).to.include({ code: 10107 });
    expect(() => removed.setReplicaSetMemberState('primary')).to.throw(InvalidOptionError).with.property('option', 'state');
    // Listed again (a reconfiguration adding it back): a member again.
    removed.setReplicaSetConfig([...config, { host: removed.address }]);
    expect(await hello(removed)).to.include({ secondary: true, me: removed.address, primary: a.address }).and.not.have.property('isreplicaset');
  });

  it('a primary that a new configuration removes or makes unelectable steps down, answering a waiting awaitable hello at once', async function () {
    const a = await member({ setName: 'rs0', state: 'primary' });
    const c = await open(a);
    const waiting = c.command('admin', { hello: 1, topologyVersion: c.hello.topologyVersion, maxAwaitTimeMS: 10_000 });
    expect(await eventually(() => a.awaitingHelloCount === 1)).to.equal(true);
    const startedAt = Date.now();
    a.setReplicaSetConfig([{ host: 'other:1' }]);
    const reply = await waiting;
    expect(Date.now() - startedAt).to.be.below(2_000);
    expect(reply).to.include({ isWritablePrimary: false, isreplicaset: true });
    expect(Number(reply.topologyVersion.counter)).to.equal(1);
    const b = await member({ setName: 'rs0', state: 'primary' });
    b.setReplicaSetConfig([{ host: b.address, priority: 0 }]);
    const passive = await hello(b);
    expect(passive).to.include({ isWritablePrimary: false, secondary: true, passive: true });
    expect(passive).to.not.have.any.keys('electionId', 'primary');
    // setReplicaSetHosts returns to a plain list of members: every member data-bearing, none removed.
    a.setReplicaSetHosts(['other:1']);
    expect(await hello(a)).to.include({ secondary: true, setVersion: 3 }).and.not.have.property('isreplicaset');
  });

  it('refuses a configuration mongod refuses, naming members[i] and the field, changing nothing', function () {
    const server = new EmbeddedServer({ replicaSetMember: { setName: 'rs0', state: 'primary', tags: { dc: 'ny' } } });
    const error = (members: unknown): unknown => {
      try {
        server.setReplicaSetConfig(members as never);
        return undefined;
      } catch (e) {
        return e;
      }
    };
    const cases: [unknown, string][] = [
      [[], 'members'],
      ['a:1', 'members'],
      [Array.from({ length: 51 }, (_, i) => ({ host: `h:${i}` })), 'members'],
      [['a:1'], 'members[0]'],
      [[{ host: 'a:1', priorty: 0 }], 'members[0].priorty'],
      [[{ host: '' }], 'members[0].host'],
      [[{ host: 'a:1' }, { host: 'a:1' }], 'members[1].host'],
      [[{ host: 'a:1', arbiterOnly: 'yes' }], 'members[0].arbiterOnly'],
      [[{ host: 'a:1', hidden: 1 }], 'members[0].hidden'],
      [[{ host: 'a:1', priority: -1 }], 'members[0].priority'],
      [[{ host: 'a:1', priority: 1001 }], 'members[0].priority'],
      [[{ host: 'a:1', priority: Number.NaN }], 'members[0].priority'],
      [[{ host: 'a:1', hidden: true }], 'members[0].priority'],
      // Tags on an arbiter, its own entry (mongod: "Cannot set tags on arbiters.").
      [[{ host: server.address, arbiterOnly: true }], 'members'],
    ];
    for (const [members, option] of cases) {
      expect(error(members), JSON.stringify(members)).to.be.instanceOf(InvalidOptionError).and.include({ option });
    }
    expect((error([{ host: 'a:1', priorty: 0 }]) as InvalidOptionError).suggestion).to.equal('priority');
    expect((error([{ host: 'a:1', hidden: true }]) as InvalidOptionError).allowed).to.include('hidden');
    expect(Number(server.topologyVersion.counter)).to.equal(0);
    expect(() => new EmbeddedServer().setReplicaSetConfig([{ host: 'a:1' }])).to.throw(InvalidOptionError).with.property('option', 'replicaSetMember');
    // What mongod accepts: an arbiter of priority 1 (made 0, so it may be hidden), a hidden member of priority 0.
    expect(error([{ host: 'a:1', arbiterOnly: true, priority: 1, hidden: true }, { host: 'b:1', hidden: true, priority: 0 }, { host: 'c:1', priority: 1000 }])).to.equal(undefined);
  });

  describe("the library's client discovering such a set (SDAM)", function () {
    let client: Client | undefined;
    afterEach(async function () {
      await client?.close();
      client = undefined;
    });

    /**
     * A client of `seeds`, polling every 200 ms: the server types of its last topology description by address
     * (`types()`), and every type each address had in one (`seen`).
     */
    function discover(seeds: readonly string[]): { types: () => Record<string, string>; seen: Map<string, Set<string>> } {
      let last: Record<string, string> = {};
      const seen = new Map<string, Set<string>>();
      const write = (m: { fields: { message?: unknown; newDescription?: string } }): void => {
        if (m.fields.message !== 'Topology description changed') return;
        const { servers } = JSON.parse(m.fields.newDescription!) as { servers: { address: string; type: string }[] };
        last = Object.fromEntries(servers.map((s) => [s.address, s.type]));
        for (const s of servers) seen.set(s.address, (seen.get(s.address) ?? new Set()).add(s.type));
      };
      client = connect(`mongodb://${seeds.join(',')}/?replicaSet=rs0&serverMonitoringMode=poll&heartbeatFrequencyMS=200&serverSelectionTimeoutMS=5000`, {
        logging: { componentSeverities: { topology: 'debug' }, path: { write } } as never,
      });
      return { types: () => last, seen };
    }

    it('from the arbiter alone, finds every listed member with its type, the hidden one not, and writes to the primary', async function () {
      const { primary, secondary, passive, hidden, arbiter } = await fiveMembers();
      let inserts = 0;
      primary.handle('insert', () => (inserts++, { n: 1, ok: 1 }));
      const { types } = discover([arbiter.address]);
      const expected = { [primary.address]: 'RSPrimary', [arbiter.address]: 'RSArbiter', [secondary.address]: 'RSSecondary', [passive.address]: 'RSSecondary' };
      expect(await eventually(() => sameTypes(types(), expected), 5_000), JSON.stringify(types())).to.equal(true);
      expect(types()).to.not.have.property(hidden.address);
      await client!.command('test', { insert: 'c', documents: [{ x: 1 }] });
      expect(inserts).to.equal(1);
    });

    it('a seed the configuration no longer lists is an RSGhost and a hidden seed an RSOther, each removed once the primary is found', async function () {
      const { primary, secondary, hidden } = await fiveMembers();
      const removed = await member({ setName: 'rs0', state: 'secondary' });
      removed.setReplicaSetConfig([{ host: primary.address }, { host: secondary.address }]);
      // The two seeds list no primary: the client learns of it from the hidden member's `primary` and `hosts`.
      const { types, seen } = discover([removed.address, hidden.address]);
      expect(await eventually(() => types()[primary.address] === 'RSPrimary', 5_000), JSON.stringify(types())).to.equal(true);
      expect(await eventually(() => !(removed.address in types()) && !(hidden.address in types()), 5_000), JSON.stringify(types())).to.equal(true);
      expect([...(seen.get(removed.address) ?? [])]).to.include('RSGhost');
      expect([...(seen.get(hidden.address) ?? [])]).to.include('RSOther');
    });
  });

  describe('the official driver discovering such a set', function () {
    let driver: MongoClient | undefined;
    afterEach(async function () {
      await driver?.close();
      driver = undefined;
    });

    it('seeded with the removed member and the hidden one, types them RSGhost and RSOther, finds the others with their types, and writes to the primary', async function () {
      const { primary, secondary, passive, hidden, arbiter, config } = await fiveMembers();
      const removed = await member({ setName: 'rs0', state: 'secondary' });
      removed.setReplicaSetConfig(config);
      let inserts = 0;
      primary.handle('insert', () => (inserts++, { n: 1, ok: 1 }));
      const seen = new Map<string, Set<string>>();
      driver = new MongoClient(`mongodb://${removed.address},${hidden.address}/?replicaSet=rs0`, { serverSelectionTimeoutMS: 5000, heartbeatFrequencyMS: 500, retryWrites: false });
      driver.on('serverDescriptionChanged', (event) => seen.set(event.address, (seen.get(event.address) ?? new Set()).add(event.newDescription.type)));
      await driver.connect();
      await driver.db('test').collection('c').insertOne({ x: 1 });
      expect(inserts).to.equal(1);
      const types = (address: string): string[] => [...(seen.get(address) ?? [])];
      expect(types(removed.address)).to.include('RSGhost');
      expect(types(hidden.address)).to.include('RSOther');
      expect(await eventually(() => types(arbiter.address).includes('RSArbiter') && types(passive.address).includes('RSSecondary') && types(secondary.address).includes('RSSecondary'), 5_000), JSON.stringify([...seen].map(([a, t]) => [a, [...t]]))).to.equal(true);
    });
  });
});

/** Whether `types` has exactly the entries of `expected`. */
function sameTypes(types: Record<string, string>, expected: Record<string, string>): boolean {
  const keys = Object.keys(expected);
  return Object.keys(types).length === keys.length && keys.every((k) => types[k] === expected[k]);
}
