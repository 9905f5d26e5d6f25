import { expect } from 'chai';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ObjectId, type Document } from 'bson';
import { connect, InvalidOptionError, MongoServerError, ServerSelectionError, type Client } from '../../lib';
import {
  checkedServer,
  compareElections,
  inLatencyWindow,
  selectServer,
  selectWithinLatencyWindow,
  suitableServers,
  type SelectableServer,
  type SelectionCriteria,
} from '../../lib/client/server-selection';
import { PRIMARY, readPreferenceFrom, type ReadPreference } from '../../lib/read-preference';
import type { ServerType } from '../../lib/client/topology-description';
import type { ClientTopologyType } from '../../lib/client/topology-type';
import { nextAverageRoundTripTime, RoundTripTimes } from '../../lib/monitor/rtt';
import { EmbeddedServer } from '../../lib/testing';
import { eventually } from '../support/endpoint';
import { checkedAs, deployment, election, pings, playedDeployments, runPings, type Role } from '../support/deployment';

/** The server selection spec's tests (tests/server_selection, in_window, rtt) that apply to read preference primary. */
const fixtures = path.resolve(__dirname, '../fixtures/server-selection');

function jsonFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    return entry.isDirectory() ? jsonFiles(full) : entry.name.endsWith('.json') ? [full] : [];
  });
}

interface FixtureServer {
  address: string;
  avg_rtt_ms?: number;
  type: string;
  tags?: Record<string, string>;
  lastUpdateTime?: number;
  lastWrite?: { lastWriteDate: { $numberLong: string } };
  maxWireVersion?: number;
}

/** A fixture's read preference ("Nearest", tag_sets), as the client takes one; none: primary. */
interface FixtureReadPreference {
  mode?: string;
  tag_sets?: Record<string, string>[];
  maxStalenessSeconds?: number;
}

/** The fixture's read preference checked by readPreferenceFrom (its modes are capitalized, its tags `tag_sets`). */
function fixtureReadPreference(given: FixtureReadPreference | undefined, operation: string | undefined): ReadPreference {
  if (given === undefined || operation === 'write') return PRIMARY;
  const mode = given.mode === undefined ? 'primary' : given.mode[0]!.toLowerCase() + given.mode.slice(1);
  return readPreferenceFrom('readPreference', { mode, tags: given.tag_sets, maxStalenessSeconds: given.maxStalenessSeconds });
}

/** The spec's TopologyType as a client keeps it: ReplicaSetWithPrimary and ReplicaSetNoPrimary are both ReplicaSet. */
function clientTopologyType(type: string): ClientTopologyType {
  return type.startsWith('ReplicaSet') ? 'ReplicaSet' : (type as ClientTopologyType);
}

function selectable(s: FixtureServer, operationCount = 0): SelectableServer<string> {
  // PossiblePrimary is SDAM's, never a client's: a server not checked yet, Unknown to selection.
  const type = (s.type === 'PossiblePrimary' ? 'Unknown' : s.type) as ServerType;
  const lastWriteDate = s.lastWrite === undefined ? undefined : Number(s.lastWrite.lastWriteDate.$numberLong);
  return { pool: s.address, type, averageRoundTripTimeMS: s.avg_rtt_ms, operationCount, tags: s.tags, lastWriteDate, lastUpdateTime: s.lastUpdateTime, maxWireVersion: s.maxWireVersion };
}

/** A PRNG of a fixed seed (mulberry32): the frequency tests give the same draws every run. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('server selection (server selection spec)', function () {
  for (const [name, dir, count] of [
    ['its tests of suitability and the latency window, for reads and writes', path.join(fixtures, 'server_selection'), 54],
    ['its max staleness tests', path.resolve(fixtures, '../max-staleness'), 32],
  ] as const) describe(name, function () {
    const files = jsonFiles(dir);
    it('has every applicable case', function () {
      expect(files).to.have.length(count);
    });
    for (const file of files) {
      it(path.relative(dir, file), function () {
        const test = JSON.parse(fs.readFileSync(file, 'utf8')) as {
          topology_description: { type: string; servers: FixtureServer[] };
          operation?: string;
          read_preference?: FixtureReadPreference;
          heartbeatFrequencyMS?: number;
          error?: boolean;
          suitable_servers: FixtureServer[];
          in_latency_window: FixtureServer[];
        };
        const type = clientTopologyType(test.topology_description.type);
        const servers = test.topology_description.servers.map((s) => selectable(s));
        const criteria = (): SelectionCriteria => ({ readPreference: fixtureReadPreference(test.read_preference, test.operation), heartbeatFrequencyMS: test.heartbeatFrequencyMS });
        if (test.error === true) {
          expect(() => suitableServers(type, servers, criteria())).to.throw(InvalidOptionError, /maxStalenessSeconds/);
          return;
        }
        const suitable = suitableServers(type, servers, criteria());
        expect(suitable.map((s) => s.pool).sort(), 'suitable').to.deep.equal(test.suitable_servers.map((s) => s.address).sort());
        const window = inLatencyWindow(suitable, 15);
        expect(window.map((s) => s.pool).sort(), 'in the latency window').to.deep.equal(test.in_latency_window.map((s) => s.address).sort());
        const selected = selectServer(type, servers, { ...criteria(), localThresholdMS: 15, random: seeded(1) });
        if (test.in_latency_window.length === 0) expect(selected).to.equal(undefined);
        else expect(test.in_latency_window.map((s) => s.address)).to.include(selected!.pool);
      });
    }
  });

  describe('its tests of selection within the latency window by operationCount', function () {
    const dir = path.join(fixtures, 'in_window');
    const files = jsonFiles(dir);
    it('has every case', function () {
      expect(files).to.have.length(8);
    });
    for (const file of files) {
      it(path.basename(file), function () {
        const test = JSON.parse(fs.readFileSync(file, 'utf8')) as {
          topology_description: { type: string; servers: FixtureServer[] };
          mocked_topology_state: { address: string; operation_count: number }[];
          iterations: number;
          outcome: { tolerance: number; expected_frequencies: Record<string, number> };
        };
        const counts = new Map(test.mocked_topology_state.map((s) => [s.address, s.operation_count]));
        const servers = test.topology_description.servers.map((s) => selectable(s, counts.get(s.address)));
        // The replica set cases select for reads with mode nearest: each of their servers is suitable.
        const type = clientTopologyType(test.topology_description.type);
        const suitable = suitableServers(type, servers, { readPreference: readPreferenceFrom('readPreference', 'nearest') });
        expect(suitable).to.have.length(servers.length);
        const window = inLatencyWindow(suitable, 15);
        const random = seeded(20261129);
        const selections = new Map<string, number>();
        for (let i = 0; i < test.iterations; i++) {
          const selected = selectWithinLatencyWindow(window, random)!;
          selections.set(selected.pool, (selections.get(selected.pool) ?? 0) + 1);
        }
        for (const [address, expected] of Object.entries(test.outcome.expected_frequencies)) {
          const frequency = (selections.get(address) ?? 0) / test.iterations;
          expect(Math.abs(frequency - expected), `${address}: ${frequency} against ${expected}`).to.be.at.most(test.outcome.tolerance);
        }
      });
    }
  });

  describe('its tests of the average RTT', function () {
    const dir = path.join(fixtures, 'rtt');
    const files = jsonFiles(dir);
    it('has every case', function () {
      expect(files).to.have.length(7);
    });
    for (const file of files) {
      it(path.basename(file), function () {
        const test = JSON.parse(fs.readFileSync(file, 'utf8')) as { avg_rtt_ms: number | 'NULL'; new_rtt_ms: number; new_avg_rtt: number };
        const average = nextAverageRoundTripTime(test.avg_rtt_ms === 'NULL' ? undefined : test.avg_rtt_ms, test.new_rtt_ms);
        expect(average).to.be.closeTo(test.new_avg_rtt, 1e-9);
      });
    }
  });

  it('a monitor\'s RTT samples average from the first one, and a failed check forgets the average', function () {
    const times = new RoundTripTimes();
    expect(times.average).to.equal(undefined);
    times.add(10);
    expect(times.average).to.equal(10);
    times.add(20);
    expect(times.average).to.be.closeTo(12, 1e-9);
    times.add(-5); // a clock that went back: a sample of 0
    expect(times.average).to.be.closeTo(9.6, 1e-9);
    times.reset();
    expect(times.average).to.equal(undefined);
    times.add(7);
    expect(times.average).to.equal(7);
  });

  it('in a Sharded topology only a mongos is suitable (a server that answered otherwise keeps its pool); in Single every server not Unknown, or only a standalone among several seeds; in LoadBalanced every server', function () {
    const servers = (['Mongos', 'Standalone', 'RSPrimary', 'Unknown', 'Mongos'] as ServerType[]).map((type, i) => ({ pool: `${type}${i}`, type, averageRoundTripTimeMS: 1, operationCount: 0 }));
    expect(suitableServers('Sharded', servers).map((s) => s.pool)).to.deep.equal(['Mongos0', 'Mongos4']);
    expect(suitableServers('Single', servers).map((s) => s.pool)).to.deep.equal(['Mongos0', 'Standalone1', 'RSPrimary2', 'Mongos4']);
    expect(suitableServers('Single', servers, { directConnection: false }).map((s) => s.pool)).to.deep.equal(['Standalone1']);
    expect(suitableServers('LoadBalanced', servers)).to.have.length(5);
    expect(suitableServers('Unknown', servers)).to.deep.equal([]);
  });

  describe('a replica set\'s primary', function () {
    const primary = (pool: string, electionId: string | undefined, setVersion: number | undefined, setName = 'rs0'): SelectableServer<string> => ({
      pool,
      type: 'RSPrimary',
      setName,
      electionId: electionId === undefined ? undefined : new ObjectId(electionId),
      setVersion,
      averageRoundTripTimeMS: 1,
      operationCount: 0,
    });

    it('of two that say they are primary, the one of the newest electionId, then setVersion, is suitable: the other is stale', function () {
      const old = primary('a', '000000000000000000000001', 5);
      // MongoDB before 6.0 (maxWireVersion < 17): setVersion first.
      const pre6 = (s: SelectableServer<string>): SelectableServer<string> => ({ ...s, maxWireVersion: 13 });
      expect(compareElections(pre6(old), pre6(primary('b', '000000000000000000000002', 1)))).to.be.above(0);
      expect(compareElections(old, primary('b', '000000000000000000000002', 1))).to.be.below(0);
      expect(compareElections(pre6(old), pre6(primary('b', '000000000000000000000002', 5)))).to.be.below(0);
      const elected = primary('b', '000000000000000000000002', 1);
      expect(suitableServers('ReplicaSet', [old, elected]).map((s) => s.pool)).to.deep.equal(['b']);
      expect(suitableServers('ReplicaSet', [elected, old]).map((s) => s.pool)).to.deep.equal(['b']);
      const sameElection = primary('c', '000000000000000000000002', 2);
      expect(suitableServers('ReplicaSet', [old, elected, sameElection]).map((s) => s.pool)).to.deep.equal(['c']);
      expect(suitableServers('ReplicaSet', [primary('d', undefined, 9), elected]).map((s) => s.pool), 'an electionId beats none').to.deep.equal(['b']);
      expect(suitableServers('ReplicaSet', [primary('e', undefined, 9), primary('f', undefined, 3)]).map((s) => s.pool)).to.deep.equal(['e']);
    });

    it('of another set than the client\'s replicaSet is not suitable', function () {
      const servers = [primary('a', '000000000000000000000003', 1, 'other'), primary('b', '000000000000000000000001', 1)];
      expect(suitableServers('ReplicaSet', servers, { replicaSet: 'rs0' }).map((s) => s.pool)).to.deep.equal(['b']);
      expect(suitableServers('ReplicaSet', servers).map((s) => s.pool), 'no replicaSet given: any set').to.deep.equal(['a']);
      const members = [...servers, { pool: 'c', type: 'RSSecondary', setName: 'other', averageRoundTripTimeMS: 1, operationCount: 0 }, { pool: 'd', type: 'RSSecondary', setName: 'rs0', averageRoundTripTimeMS: 1, operationCount: 0 }] as SelectableServer<string>[];
      const secondary = { readPreference: readPreferenceFrom('readPreference', 'secondary') };
      expect(suitableServers('ReplicaSet', members, { ...secondary, replicaSet: 'rs0' }).map((s) => s.pool), 'secondaries of the set').to.deep.equal(['d']);
      expect(suitableServers('ReplicaSet', members, secondary).map((s) => s.pool), 'no replicaSet given: any set').to.deep.equal(['c', 'd']);
      // Mode nearest: the primary and the secondaries of the set, in the servers' order; never an arbiter, another
      // set's secondary or a server of unknown type.
      const others = [{ pool: 'e', type: 'RSArbiter', setName: 'rs0' }, { pool: 'f', type: 'Unknown' }, { pool: 'g', type: 'RSOther', setName: 'rs0' }].map((o) => ({ ...o, averageRoundTripTimeMS: 1, operationCount: 0 })) as SelectableServer<string>[];
      const nearest = { readPreference: readPreferenceFrom('readPreference', 'nearest'), replicaSet: 'rs0' };
      expect(suitableServers('ReplicaSet', [...others, ...members], nearest).map((s) => s.pool)).to.deep.equal(['b', 'd']);
    });

    it('is read from a hello reply: type, setName, electionId, setVersion, tags and lastWriteDate, each only of the right type', function () {
      const electionId = new ObjectId();
      const lastWrite = { opTime: {}, lastWriteDate: new Date(1_700_000_000_000) };
      expect(checkedServer({ setName: 'rs0', isWritablePrimary: true, electionId, setVersion: 3, maxWireVersion: 25, tags: { dc: 'ny', n: 1 }, lastWrite }, 42)).to.deep.equal({
        type: 'RSPrimary',
        setName: 'rs0',
        electionId,
        setVersion: 3,
        maxWireVersion: 25,
        tags: { dc: 'ny' },
        lastWriteDate: 1_700_000_000_000,
        lastUpdateTime: 42,
      });
      expect(checkedServer({ setName: 1, electionId: 'x', setVersion: Number.NaN, maxWireVersion: '25', msg: 'isdbgrid', tags: ['a'], lastWrite: { lastWriteDate: 5 } })).to.deep.equal({
        type: 'Mongos',
        setName: undefined,
        electionId: undefined,
        setVersion: undefined,
        maxWireVersion: undefined,
        tags: undefined,
        lastWriteDate: undefined,
        lastUpdateTime: undefined,
      });
      expect(checkedServer({ setName: 'rs0', secondary: true, setVersion: '3', tags: { n: 1 }, lastWrite: { lastWriteDate: new Date(Number.NaN) } })).to.include({ setVersion: undefined, tags: undefined, lastWriteDate: undefined });
      expect(checkedServer({ setName: 'rs0', secondary: true, tags: null, lastWrite: null })).to.include({ tags: undefined, lastWriteDate: undefined });
      const hostile = JSON.parse('{"__proto__": "ny", "constructor": "x"}') as Document;
      expect(Object.keys(checkedServer({ setName: 'rs0', secondary: true, tags: hostile }).tags!)).to.deep.equal(['__proto__', 'constructor']);
    });

    it('matches a tag set against the tags a member sent, never against fields of a polluted Object.prototype', function () {
      const member = (pool: string, tags: Record<string, string> | undefined): SelectableServer<string> => ({ pool, type: 'RSSecondary', setName: 'rs0', averageRoundTripTimeMS: 1, operationCount: 0, tags });
      const servers = [member('ny', checkedServer({ setName: 'rs0', secondary: true, tags: { dc: 'ny' } }).tags), member('untagged', checkedServer({ setName: 'rs0', secondary: true, tags: { rack: '1' } }).tags)];
      const readPreference = readPreferenceFrom('readPreference', { mode: 'secondary', tags: [{ dc: 'sf' }] });
      const proto = Object.prototype as Record<string, unknown>;
      proto.dc = 'sf';
      try {
        expect(suitableServers('ReplicaSet', servers, { readPreference }).map((s) => s.pool)).to.deep.equal([]);
      } finally {
        delete proto.dc;
      }
    });
  });

  describe('within the latency window', function () {
    const server = (pool: string, rtt: number | undefined, operationCount = 0): SelectableServer<string> => ({ pool, type: 'Mongos', averageRoundTripTimeMS: rtt, operationCount });

    it('takes the servers at most localThresholdMS above the shortest average RTT, the bound included; one with none measured anchors nothing and is kept', function () {
      const servers = [server('a', 10), server('b', 25), server('c', 25.5), server('d', undefined)];
      expect(inLatencyWindow(servers, 15).map((s) => s.pool)).to.deep.equal(['a', 'b', 'd']);
      expect(inLatencyWindow([server('d', undefined), server('e', undefined)], 0).map((s) => s.pool)).to.deep.equal(['d', 'e']);
      expect(inLatencyWindow(servers.slice(0, 3), 15).map((s) => s.pool)).to.deep.equal(['a', 'b']);
      expect(inLatencyWindow(servers.slice(0, 3), 0).map((s) => s.pool)).to.deep.equal(['a']);
      expect(inLatencyWindow(servers.slice(0, 3), 1000).map((s) => s.pool)).to.deep.equal(['a', 'b', 'c']);
    });

    it('takes the less busy of the two servers drawn, and never draws one server twice', function () {
      const servers = [server('a', 1, 3), server('b', 1, 1)];
      for (const draws of [[0, 0], [0.99, 0.99], [0.5, 0], [0, 0.99]]) {
        let i = 0;
        expect(selectWithinLatencyWindow(servers, () => draws[i++]!)!.pool, String(draws)).to.equal('b');
      }
      // Three servers, every pair of draws: the pair is two distinct servers, each pair as likely.
      const three = [server('a', 1, 0), server('b', 1, 0), server('c', 1, 0)];
      const seen = new Map<string, number>();
      for (const first of [0, 0.4, 0.8]) {
        for (const second of [0, 0.6]) {
          const draws = [first, second];
          let i = 0;
          const picked: string[] = [];
          const counting = three.map((s) => ({ ...s, get operationCount(): number { picked.push(s.pool); return 0; } }));
          selectWithinLatencyWindow(counting, () => draws[i++]!);
          const pair = [...new Set(picked)].sort().join('');
          expect(pair, String(draws)).to.have.length(2);
          seen.set(pair, (seen.get(pair) ?? 0) + 1);
        }
      }
      expect([...seen.values()]).to.deep.equal([2, 2, 2]);
    });

    it('gives the only server in the window, and nothing for none', function () {
      expect(selectWithinLatencyWindow([server('a', 5)])!.pool).to.equal('a');
      expect(selectWithinLatencyWindow([])).to.equal(undefined);
    });

    it('gives a server of the window even from a random source that gives 1 (outside [0, 1))', function () {
      const servers = [server('a', 1, 2), server('b', 1, 1), server('c', 1, 0)];
      expect(selectWithinLatencyWindow(servers, () => 1)).to.not.equal(undefined);
      expect(servers).to.include(selectWithinLatencyWindow(servers, () => 0.9999999999999999));
    });
  });
});

describe('a client selecting among its servers (against the test endpoint, behind proxies that play the deployment)', function () {
  this.timeout(20_000);
  const played = playedDeployments();

  const open = (query: string): Client => {
    const hosts = played.proxies.map((p) => p.address).join(',');
    played.client = connect(`mongodb://${hosts}/?serverMonitoringMode=poll&heartbeatFrequencyMS=500&${query}`, played.endpoint.connectionOptions);
    return played.client;
  };
  const allReady = (c: Client): Promise<boolean> => eventually(() => [...c.pools.values()].every((p) => p.state === 'ready'), 5000);

  it('takes localThresholdMS from the URI, the options overriding it (default 15 ms), and refuses a value that is not a number of ms >= 0', async function () {
    const made: Client[] = [];
    const make = (uri: string, options: object = {}): Client => {
      const c = connect(uri, options);
      made.push(c);
      return c;
    };
    try {
      expect(make('mongodb://127.0.0.1:1/').localThresholdMS).to.equal(15);
      expect(make('mongodb://127.0.0.1:1/?localThresholdMS=0').localThresholdMS).to.equal(0);
      expect(make('mongodb://127.0.0.1:1/?localThresholdMS=40', { localThresholdMS: 2.5 }).localThresholdMS).to.equal(2.5);
      for (const bad of [-1, Number.NaN, Infinity, '15', {}]) {
        expect(() => make('mongodb://127.0.0.1:1/', { localThresholdMS: bad }), String(bad)).to.throw(InvalidOptionError, /localThresholdMS/).with.property('allowed', 'a number of ms >= 0');
      }
    } finally {
      await Promise.all(made.map((c) => c.close()));
    }
  });

  it('spreads the commands over three mongos, rather than sending all to the first', async function () {
    played.proxies = await deployment(played.endpoint, [{ kind: 'mongos' }, { kind: 'mongos' }, { kind: 'mongos' }]);
    const c = open('maxPoolSize=5');
    expect(await allReady(c)).to.equal(true);
    expect(await runPings(c, 300, 30)).to.deep.equal([]);
    const counts = pings(played.proxies);
    for (const n of counts) expect(n, String(counts)).to.be.within(60, 140);
  });

  it('balances the commands selected in one step: each counts in its server\'s operationCount from its selection, before its checkout', async function () {
    played.proxies = await deployment(played.endpoint, [{ kind: 'mongos' }, { kind: 'mongos' }, { kind: 'mongos' }]);
    const c = open('maxPoolSize=5');
    expect(await allReady(c)).to.equal(true);
    const outcomes = await Promise.all(Array.from({ length: 300 }, () => c.command('admin', { ping: 1 }).then(() => undefined, (e: unknown) => e)));
    expect(outcomes.filter((e) => e !== undefined)).to.deep.equal([]);
    const counts = pings(played.proxies);
    expect(Math.max(...counts) - Math.min(...counts), String(counts)).to.be.at.most(6);
    // Every selection handed over (command() and selectPool() alike): the client counts none once they are done.
    const selected = (c as unknown as { selected: Map<unknown, number> }).selected;
    expect(selected.size).to.equal(0);
    await Promise.all([c.selectPool(), c.selectPool(), c.command('admin', { ping: 1 })]);
    expect(selected.size).to.equal(0);
  });

  it('sends no command to a mongos whose checkouts are busy while the others are idle', async function () {
    played.proxies = await deployment(played.endpoint, [{ kind: 'mongos' }, { kind: 'mongos' }, { kind: 'mongos' }]);
    const c = open('maxPoolSize=5');
    expect(await allReady(c)).to.equal(true);
    const busy = [...c.pools.values()][0]!;
    // Five connections held and two checkouts waiting: an operationCount of 7 on the first mongos.
    const held = await Promise.all(Array.from({ length: 5 }, () => busy.checkOut().toPromise()));
    const waiting = [busy.checkOut().toPromise(), busy.checkOut().toPromise()];
    expect(await runPings(c, 100, 1)).to.deep.equal([]);
    expect(pings(played.proxies)[0]).to.equal(0);
    for (const connection of held) busy.checkIn(connection!);
    for (const connection of await Promise.all(waiting)) busy.checkIn(connection!);
  });

  it('sends no command to a mongos whose average RTT is above the latency window, unless localThresholdMS widens it', async function () {
    played.proxies = await deployment(played.endpoint, [{ kind: 'mongos' }, { kind: 'mongos' }, { kind: 'mongos' }]);
    for (const [query, far] of [['', 0], ['localThresholdMS=1000', 1]] as const) {
      const c = open(query);
      expect(await allReady(c)).to.equal(true);
      // The first mongos 100 ms farther than the others, as its monitor measures it.
      const monitor = [...c.monitors.values()][0]!;
      Object.defineProperty(monitor, 'averageRoundTripTimeMS', { get: () => 100 });
      const before = pings(played.proxies)[0]!;
      expect(await runPings(c, 60, 3)).to.deep.equal([]);
      const sent = pings(played.proxies)[0]! - before;
      if (far === 0) expect(sent, 'outside the default window of 15 ms').to.equal(0);
      else expect(sent, 'inside a window of 1000 ms').to.be.above(0);
      await c.close();
    }
  });

  it('sends every command to the replica set\'s primary, wherever it is in the host list', async function () {
    played.proxies = await deployment(played.endpoint, [{ kind: 'secondary' }, { kind: 'secondary' }, { kind: 'primary', electionId: election() }]);
    const c = open('replicaSet=rs0');
    expect(await allReady(c)).to.equal(true);
    expect(await runPings(c, 60, 6)).to.deep.equal([]);
    expect(pings(played.proxies)).to.deep.equal([0, 0, 60]);
  });

  it('after a step down: commands go to the new primary once a check finds it, though the old one still says it is primary', async function () {
    const roles: Role[] = [{ kind: 'primary', electionId: election() }, { kind: 'secondary' }, { kind: 'secondary' }];
    played.proxies = await deployment(played.endpoint, roles);
    const c = open('replicaSet=rs0&heartbeatFrequencyMS=60000');
    expect(await allReady(c)).to.equal(true);
    expect(await runPings(c, 10, 2)).to.deep.equal([]);
    expect(pings(played.proxies)).to.deep.equal([10, 0, 0]);
    // The second member elected: the first still says it is primary until its next check (a minute away).
    const elected = election();
    roles[1] = { kind: 'primary', electionId: elected };
    await checkedAs(c, 1, 'RSPrimary', elected);
    expect(await runPings(c, 10, 2)).to.deep.equal([]);
    expect(pings(played.proxies)).to.deep.equal([10, 10, 0]);
  });

  it('a command refused by a primary that stepped down makes it unsuitable until a check: the next ones wait for the new primary', async function () {
    const roles: Role[] = [{ kind: 'primary', electionId: election() }, { kind: 'secondary' }];
    played.proxies = await deployment(played.endpoint, roles);
    const c = open('replicaSet=rs0&heartbeatFrequencyMS=60000&serverSelectionTimeoutMS=5000');
    expect(await allReady(c)).to.equal(true);
    roles[0] = { kind: 'secondary' };
    const refused = await c.command('admin', { ping: 1 }).catch((e: unknown) => e);
    expect(refused).to.be.instanceOf(MongoServerError).and.include({ code: 13435 });
    // Its state change error asked for a check of the first member, which finds it a secondary; the second is elected.
    roles[1] = { kind: 'primary', electionId: election() };
    const next = c.command('admin', { ping: 1 });
    [...c.monitors.values()][1]!.requestCheck();
    expect(await next).to.include({ ok: 1 });
    expect(pings(played.proxies)).to.deep.equal([1, 1]);
  });

  it('a reply\'s writeConcernError with a state change code makes its primary unsuitable until a check, as a refused command does', async function () {
    const roles: Role[] = [{ kind: 'primary', electionId: election() }];
    played.proxies = await deployment(played.endpoint, roles);
    const reply = played.proxies[0]!.hooks.reply!;
    let interrupted = 1;
    played.proxies[0]!.hooks.reply = (r, command) => {
      const answer = reply(r, command);
      if (Object.keys(command)[0] !== 'ping' || interrupted-- <= 0) return answer;
      return { ...answer, writeConcernError: { code: 11602, codeName: 'InterruptedDueToReplStateChange', errmsg: 'operation was interrupted' } };
    };
    const c = open('replicaSet=rs0&heartbeatFrequencyMS=60000&serverSelectionTimeoutMS=5000');
    expect(await allReady(c)).to.equal(true);
    const describe = (): string => (c as unknown as { describe(): string }).describe();
    expect(await c.command('admin', { ping: 1 })).to.have.property('writeConcernError');
    expect(JSON.parse(describe())).to.deep.equal({ type: 'ReplicaSetNoPrimary', servers: [{ address: played.proxies[0]!.address, type: 'Unknown' }] });
    // The check the error asked for finds it primary again: the next command goes there.
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 }).and.not.have.property('writeConcernError');
    expect(pings(played.proxies)).to.deep.equal([2]);
  });

  it('a state change error logs the server\'s description as Unknown, and its next check as what it found', async function () {
    const roles: Role[] = [{ kind: 'primary', electionId: election() }];
    played.proxies = await deployment(played.endpoint, roles);
    const descriptions: string[] = [];
    const write = (m: { fields: { message?: unknown; newDescription?: unknown } }): void => {
      if (m.fields.message === 'Topology description changed') descriptions.push(String(m.fields.newDescription));
    };
    const hosts = played.proxies.map((p) => p.address).join(',');
    played.client = connect(`mongodb://${hosts}/?replicaSet=rs0&serverMonitoringMode=poll&heartbeatFrequencyMS=60000&serverSelectionTimeoutMS=300`, {
      ...played.endpoint.connectionOptions,
      logging: { componentSeverities: { topology: 'debug' }, path: { write } } as never,
    });
    expect(await allReady(played.client)).to.equal(true);
    const address = played.proxies[0]!.address;
    const described = (type: string): string => JSON.stringify({ type, servers: [{ address, type: type === 'ReplicaSetWithPrimary' ? 'RSPrimary' : type === 'ReplicaSetNoPrimary' ? 'Unknown' : 'RSSecondary' }] });
    expect(descriptions.at(-1)).to.equal(described('ReplicaSetWithPrimary'));
    roles[0] = { kind: 'secondary' };
    expect(await played.client.command('admin', { ping: 1 }).catch((e: unknown) => e)).to.be.instanceOf(MongoServerError);
    expect(descriptions.at(-1), 'Unknown from the error').to.equal(described('ReplicaSetNoPrimary'));
    expect(await eventually(() => descriptions.length > 0 && descriptions.at(-1)!.includes('RSSecondary')), 'a secondary from the check the error asked for').to.equal(true);
  });

  it('with no primary, a command waits, and goes on as soon as a check finds one (a pool ready already)', async function () {
    const roles: Role[] = [{ kind: 'secondary' }, { kind: 'secondary' }];
    played.proxies = await deployment(played.endpoint, roles);
    const c = open('replicaSet=rs0&heartbeatFrequencyMS=60000&serverSelectionTimeoutMS=5000');
    expect(await allReady(c)).to.equal(true);
    let settled = false;
    const waiting = c.command('admin', { ping: 1 }).finally(() => void (settled = true));
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(settled, 'no suitable server: it waits').to.equal(false);
    roles[1] = { kind: 'primary', electionId: election() };
    // The wait's immediate checks (every 500 ms) find the new primary; its pool was ready all along.
    expect(await waiting).to.include({ ok: 1 });
    expect(pings(played.proxies)).to.deep.equal([0, 1]);
  });

  it('remembers the newest election: once a newer primary was seen, the old one that still says it is primary is never selected, even with the new one gone', async function () {
    const first = election();
    const roles: Role[] = [{ kind: 'primary', electionId: first }, { kind: 'secondary' }];
    played.proxies = await deployment(played.endpoint, roles);
    const c = open('replicaSet=rs0&heartbeatFrequencyMS=60000&serverSelectionTimeoutMS=700');
    expect(await allReady(c)).to.equal(true);
    // The second member elected; the first, cut off, still says it is primary of its older election.
    const elected = election();
    roles[1] = { kind: 'primary', electionId: elected };
    const b = [...c.monitors.values()][1]!;
    // The old primary's checks as the client takes them in (the reply's arrival, not the request's passing).
    const oldAddress = played.proxies[0]!.address;
    let oldChecks = 0;
    c.events$.subscribe((e) => e.type === 'ServerHeartbeatSucceeded' && e.address === oldAddress && oldChecks++);
    const before = oldChecks;
    await checkedAs(c, 1, 'RSPrimary', elected);
    // Finding the new primary asks for a check of the old one at once, which is then a stale primary.
    expect(await eventually(() => oldChecks > before), 'the old primary checked again at once').to.equal(true);
    // The new primary goes down: its check fails, its pool is paused.
    roles[1] = { kind: 'down' };
    b.requestCheck();
    expect(await eventually(() => [...c.pools.values()][1]!.state === 'paused')).to.equal(true);
    const error = await c.command('admin', { ping: 1 }).catch((e: unknown) => e);
    expect(error, 'never the stale primary').to.be.instanceOf(ServerSelectionError);
    expect(pings(played.proxies)).to.deep.equal([0, 0]);
  });

  it('sends $readPreference primaryPreferred to a member reached directly (directConnection=true), so a secondary runs the command; none to a standalone or a primary of a replica set', async function () {
    const sent: unknown[] = [];
    played.proxies = await deployment(played.endpoint, [{ kind: 'secondary' }]);
    const request = (command: Document): Document => {
      if (Object.keys(command)[0] === 'ping') sent.push(command.$readPreference);
      return command;
    };
    played.proxies[0]!.hooks.request = request;
    const c = open('directConnection=true');
    expect(await allReady(c)).to.equal(true);
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
    expect(sent).to.deep.equal([{ mode: 'primaryPreferred' }]);
    // A command with its own $readPreference keeps it.
    await c.command('admin', { ping: 1, $readPreference: { mode: 'secondary' } });
    expect(sent.at(-1)).to.deep.equal({ mode: 'secondary' });
    await c.close();
    for (const [role, query] of [[{ kind: 'standalone' }, 'directConnection=true'], [{ kind: 'mongos' }, 'directConnection=true'], [{ kind: 'primary', electionId: election() }, 'replicaSet=rs0']] as const) {
      await Promise.all(played.proxies.map((p) => p.stop()));
      played.proxies = await deployment(played.endpoint, [role]);
      played.proxies[0]!.hooks.request = request;
      sent.length = 0;
      const other = open(query);
      expect(await allReady(other)).to.equal(true);
      await other.command('admin', { ping: 1 });
      expect(sent, role.kind).to.deep.equal([undefined]);
      await other.close();
    }
  });

  it('removes a standalone that answers among several seeds (SDAM: the topology stays Unknown), and never sends it a command; a secondary that answers then makes it a replica set', async function () {
    played.proxies = await deployment(played.endpoint, [{ kind: 'secondary', setName: 'rs9' }, { kind: 'standalone' }]);
    // The secondary's first check fails until the standalone has answered and been removed.
    const roles = [{ kind: 'down' }] as Role[];
    const hooks = played.proxies[0]!.hooks.reply!;
    played.proxies[0]!.hooks.reply = (reply, command) => (roles[0]!.kind === 'down' && ['hello', 'ismaster'].includes(Object.keys(command)[0]!.toLowerCase()) ? { ok: 0, errmsg: 'down', code: 6 } : hooks(reply, command));
    const c = open('serverSelectionTimeoutMS=2000');
    const standalone = played.proxies[1]!.address;
    expect(await eventually(() => !c.hosts.includes(standalone)), 'the standalone removed').to.equal(true);
    expect(c.pools.has(standalone)).to.equal(false);
    expect(c.monitors.has(standalone)).to.equal(false);
    roles[0] = { kind: 'secondary' };
    await checkedAs(c, 0, 'RSSecondary');
    expect(c.hosts).to.deep.equal([played.proxies[0]!.address]);
    for (let i = 0; i < 20; i++) expect(await c.command('admin', { ping: 1 }, { readPreference: 'secondary' })).to.include({ ok: 1 });
    expect(pings(played.proxies)).to.deep.equal([20, 0]);
  });

  it('keeps the set name of the first member that answered when the URI gives none: a primary of another set is never selected', async function () {
    const roles: Role[] = [{ kind: 'primary', electionId: election() }, { kind: 'down' }];
    played.proxies = await deployment(played.endpoint, roles);
    const c = open('serverSelectionTimeoutMS=2000');
    expect(await eventually(() => [...c.pools.values()][0]!.state === 'ready')).to.equal(true);
    // A primary of another set, of a newer election, answers next.
    roles[1] = { kind: 'primary', electionId: election(), setName: 'other' };
    expect(await allReady(c)).to.equal(true);
    expect(await runPings(c, 20, 4)).to.deep.equal([]);
    expect(pings(played.proxies)).to.deep.equal([20, 0]);
  });

  it('wakes no waiting selection for the checkouts of a pool (operationCount moving): only a pool made ready or a check does', async function () {
    played.proxies = await deployment(played.endpoint, [{ kind: 'secondary' }, { kind: 'secondary' }]);
    const c = open('replicaSet=rs0&heartbeatFrequencyMS=60000&serverSelectionTimeoutMS=5000');
    expect(await allReady(c)).to.equal(true);
    const waiting = c.command('admin', { ping: 1 }).catch((e: unknown) => e);
    const internals = c as unknown as { selectedPool(): unknown; selections: Set<unknown> };
    expect(await eventually(() => internals.selections.size === 1)).to.equal(true);
    let looks = 0;
    const look = internals.selectedPool.bind(c);
    internals.selectedPool = () => {
      looks++;
      return look();
    };
    const pool = [...c.pools.values()][0]!;
    for (let i = 0; i < 20; i++) pool.checkIn((await pool.checkOut().toPromise())!);
    expect(looks, 'no look for 40 checkout events').to.equal(0);
    await c.close();
    expect(await waiting).to.be.instanceOf(Error);
  });

  it('counts no selection once every command and selectPool() settled, however each selection ended (found, cancelled, timed out, drained, closed)', async function () {
    const roles: Role[] = [{ kind: 'secondary' }, { kind: 'secondary' }];
    played.proxies = await deployment(played.endpoint, roles);
    const c = open('replicaSet=rs0&heartbeatFrequencyMS=60000&serverSelectionTimeoutMS=5000');
    expect(await allReady(c)).to.equal(true);
    const selected = (c as unknown as { selected: Map<unknown, number> }).selected;
    const settle = (p: Promise<unknown>): Promise<unknown> => p.then((v) => v, (e: unknown) => e);
    // Waiting (no primary): twenty commands and five selectPool() calls, then one member elected.
    const waiting = [...Array.from({ length: 20 }, () => settle(c.command('admin', { ping: 1 }))), ...Array.from({ length: 5 }, () => settle(c.selectPool()))];
    const aborter = new AbortController();
    const cancelled = settle(c.command('admin', { ping: 1 }, { signal: aborter.signal }));
    const timedOut = settle(c.command('admin', { ping: 1 }, { timeoutMS: 50 }));
    await new Promise((resolve) => setTimeout(resolve, 100));
    aborter.abort();
    roles[1] = { kind: 'primary', electionId: election() };
    const outcomes = await Promise.all(waiting);
    expect(outcomes.filter((o) => o instanceof Error)).to.deep.equal([]);
    expect(await timedOut).to.be.instanceOf(ServerSelectionError);
    expect(((await cancelled) as Error).name).to.equal('CommandCancelledError');
    expect(selected.size, 'after selections that found a server, were cancelled or timed out').to.equal(0);
    // No primary again: commands wait, then drain() refuses them, and close() ends the selectPool() calls.
    roles[1] = { kind: 'secondary' };
    await checkedAs(c, 1, 'RSSecondary');
    const drained = Array.from({ length: 5 }, () => settle(c.command('admin', { ping: 1 })));
    const closed = Array.from({ length: 5 }, () => settle(c.selectPool()));
    await new Promise((resolve) => setTimeout(resolve, 50));
    await c.drain();
    expect((await Promise.all(drained)).map((e) => (e as Error).name)).to.deep.equal(Array(5).fill('PoolClosedError'));
    expect((await Promise.all(closed)).map((e) => (e as Error).name)).to.deep.equal(Array(5).fill('ClientClosedError'));
    expect(selected.size, 'after a drain and close()').to.equal(0);
    // Two selections of one pool, one handed over: one still counted.
    const internals = c as unknown as { counted(pool: unknown): unknown; handOver(pool: unknown): void };
    const pool = [...c.pools.values()][0]!;
    internals.counted(pool);
    internals.counted(pool);
    internals.handOver(pool);
    expect(selected.get(pool)).to.equal(1);
    internals.handOver(pool);
    expect(selected.size).to.equal(0);
  });

  it('a new primary makes the one the client took for primary Unknown at once, before that one\'s own check answers; a secondary stays as it is, unchecked', async function () {
    const roles: Role[] = [{ kind: 'primary', electionId: election() }, { kind: 'secondary' }, { kind: 'secondary' }];
    played.proxies = await deployment(played.endpoint, roles);
    const c = open('replicaSet=rs0&heartbeatFrequencyMS=60000');
    expect(await allReady(c)).to.equal(true);
    // The first and third members' checks get no answer from now on (a partition): only the second's check tells, and
    // a check of the third, were one asked for, could not make it look unchanged.
    const hello = (command: Document): boolean => ['hello', 'ismaster'].includes(Object.keys(command)[0]!.toLowerCase());
    played.proxies[0]!.hooks.hold = hello;
    played.proxies[2]!.hooks.hold = hello;
    const checksOf = (i: number): number => played.proxies[i]!.commands.filter((name) => name === 'hello' || name === 'isMaster').length;
    const third = checksOf(2);
    roles[1] = { kind: 'primary', electionId: election() };
    [...c.monitors.values()][1]!.requestCheck();
    const describe = (): { servers: { type: string }[] } => JSON.parse((c as unknown as { describe(): string }).describe()) as { servers: { type: string }[] };
    expect(await eventually(() => describe().servers[1]!.type === 'RSPrimary')).to.equal(true);
    const second = checksOf(1);
    expect(describe().servers.map((server) => server.type)).to.deep.equal(['Unknown', 'RSPrimary', 'RSSecondary']);
    // Past minHeartbeatFrequencyMS: a check asked of the new primary itself, or of the secondary, would have run.
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(checksOf(2), 'the secondary not checked').to.equal(third);
    expect(checksOf(1), 'the new primary not checked again').to.equal(second);
  });

  it('sends no command to a mongos whose pool is paused (a clear), though its last check described it', async function () {
    played.proxies = await deployment(played.endpoint, [{ kind: 'mongos' }, { kind: 'mongos' }]);
    const c = open('heartbeatFrequencyMS=60000');
    expect(await allReady(c)).to.equal(true);
    [...c.pools.values()][0]!.clear();
    expect(await runPings(c, 20, 2)).to.deep.equal([]);
    expect(pings(played.proxies)).to.deep.equal([0, 20]);
  });

  it('two hosts of one election (the same electionId and setVersion, as only two names of one server give): the one checked last is the primary, the other Unknown and checked at once (SDAM equal_electionids); no command fails', async function () {
    const elected = election();
    played.proxies = await deployment(played.endpoint, [{ kind: 'primary', electionId: elected }, { kind: 'primary', electionId: elected }]);
    const c = open('replicaSet=rs0&heartbeatFrequencyMS=60000');
    expect(await eventually(() => [...c.pools.values()].some((p) => p.state === 'ready'))).to.equal(true);
    const checked = (c as unknown as { topology: { servers: Map<string, { type: string }> } }).topology.servers;
    const primaries = (): number => [...c.monitors.keys()].filter((address) => checked.get(address)?.type === 'RSPrimary').length;
    const hellos = (): number => played.proxies.map((p) => p.commands.filter((name) => name === 'hello' || name === 'isMaster').length).reduce((a, b) => a + b);
    const before = hellos();
    for (let i = 0; i < 10; i++) {
      expect(primaries(), 'never two primaries').to.be.at.most(1);
      await new Promise((resolve) => setTimeout(resolve, 120));
    }
    // Each check of one makes the other Unknown and asks for its check: checks go on far more often than every 60 s.
    expect(hellos() - before, 'checks in 1.2 s (heartbeatFrequencyMS 60 s)').to.be.above(0);
    expect(await runPings(c, 40, 4)).to.deep.equal([]);
  });

  it('reached directly with a replicaSet (directConnection=true), takes its member only of that set: one of another set is Unknown', async function () {
    played.proxies = await deployment(played.endpoint, [{ kind: 'primary', electionId: election(), setName: 'other' }]);
    const c = open('directConnection=true&replicaSet=rs0&serverSelectionTimeoutMS=300');
    expect(await allReady(c)).to.equal(true);
    const error = (await c.command('admin', { ping: 1 }).catch((e: unknown) => e)) as ServerSelectionError;
    expect(error).to.be.instanceOf(ServerSelectionError);
    expect(error.topologyDescription).to.equal(JSON.stringify({ type: 'Single', servers: [{ address: played.proxies[0]!.address, type: 'Unknown' }] }));
    expect(pings(played.proxies)).to.deep.equal([0]);
    await c.close();
    await Promise.all(played.proxies.map((p) => p.stop()));
    // A secondary of the set given is taken, as any member reached directly.
    played.proxies = await deployment(played.endpoint, [{ kind: 'secondary' }]);
    const same = open('directConnection=true&replicaSet=rs0&serverSelectionTimeoutMS=2000');
    expect(await allReady(same)).to.equal(true);
    expect(await same.command('admin', { ping: 1 })).to.include({ ok: 1 });
    expect(pings(played.proxies)).to.deep.equal([1]);
  });

  it('with members of another replica set than the URI\'s, fails with ServerSelectionError', async function () {
    played.proxies = await deployment(played.endpoint, [{ kind: 'primary', electionId: election(), setName: 'other' }]);
    const c = open('replicaSet=rs0&serverSelectionTimeoutMS=300');
    expect(await allReady(c)).to.equal(true);
    const error = (await c.command('admin', { ping: 1 }).catch((e: unknown) => e)) as ServerSelectionError;
    expect(error).to.be.instanceOf(ServerSelectionError);
    expect(pings(played.proxies)).to.deep.equal([0]);
    // Why none was suitable: the topology as the wait ended, in the error (not its message, which the log's failed
    // message carries beside the description it gives).
    // The member of another set was removed (SDAM's updateRSFromPrimary), its pool closed: the topology has no server.
    expect(error.topologyDescription).to.equal(JSON.stringify({ type: 'ReplicaSetNoPrimary', servers: [] }));
    expect(error.message).to.equal('No suitable server: the topology has no server left (read preference primary)');
    expect(c.pools.size).to.equal(0);
    expect(c.warnings).to.deep.equal([]);
  });
});

describe('a client of a replica set of embedded endpoints (rxcmap/testing\'s replicaSetMember)', function () {
  this.timeout(20_000);
  it('writes to the primary, the second host, then, after it steps down and the third is elected, to the third, with no command lost', async function () {
    const members = await Promise.all([0, 1, 2].map((i) => new EmbeddedServer({ replicaSetMember: { setName: 'rs0', state: i === 1 ? 'primary' : 'secondary' } }).start()));
    for (const m of members) m.setReplicaSetHosts(members.map((x) => x.address));
    const client = connect(`mongodb://${members.map((m) => m.address).join(',')}/?replicaSet=rs0&heartbeatFrequencyMS=500&serverSelectionTimeoutMS=5000`);
    try {
      const checkedOut: string[] = [];
      client.events$.subscribe((e) => e.type === 'ConnectionCheckedOut' && checkedOut.push(e.address));
      const insert = { insert: 'c', documents: [{ a: 1 }] };
      expect(await runPings(client, 30, 3, insert)).to.deep.equal([]);
      expect(new Set(checkedOut)).to.deep.equal(new Set([members[1]!.address]));
      checkedOut.length = 0;
      members[1]!.setReplicaSetMemberState('secondary');
      members[2]!.setReplicaSetMemberState('primary');
      // Commands run through the change: those that reach the old primary fail with its refusal, none is lost.
      const errors = await runPings(client, 60, 3, insert);
      for (const error of errors) expect(error).to.be.instanceOf(MongoServerError).and.include({ code: 10107 });
      expect(checkedOut.at(-1)).to.equal(members[2]!.address);
      expect(errors.length, 'at most the commands in flight at the change').to.be.at.most(3);
    } finally {
      await client.close();
      await Promise.all(members.map((m) => m.stop()));
    }
  });
});
