import { expect } from 'chai';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { EJSON, Long, ObjectId, type Document } from 'bson';
import { Client, connect, InvalidOptionError, serverDescriptionEquals, topologyDescriptionEquals, type ServerDescription, type TopologyDescription, type TopologyEvent } from '../../lib';
import { initialTopology, serverDescriptionOf, Topology } from '../../lib/client/topology-update';
import { VirtualClock } from '../../lib/testing';
import { eventually, startTestEndpoint, type TestEndpoint } from '../support/endpoint';
import { eventLine as line, scriptedServersEachTest, settle } from '../support/scripted-servers';

/**
 * The SDAM monitoring spec tests (tests/monitoring), run through a client whose monitors' connections are scripted:
 * each phase's responses are the hello replies of the checks, in order, and the topology events the client publishes
 * during the phase must be those the test lists, in that order.
 */
const fixtures = path.resolve(__dirname, '../fixtures/server-discovery/monitoring');

/** A server description as the spec's tests write it. */
function specServer(address: string, server: ServerDescription): Document {
  return { address, arbiters: [...server.arbiters], hosts: [...server.hosts], passives: [...server.passives], primary: server.primary ?? null, setName: server.setName ?? null, type: server.type };
}

/** A topology description as the spec's tests write it (its servers by address). */
function specTopology(description: TopologyDescription): Document {
  const servers = [...description.servers].map(([address, server]) => specServer(address, server)).sort((a, b) => (a.address < b.address ? -1 : 1));
  return { topologyType: description.type, setName: description.setName ?? null, servers };
}

/** An event as the spec's tests write it. */
function specEvent(event: TopologyEvent): Document {
  switch (event.type) {
    case 'TopologyOpening':
      return { topology_opening_event: {} };
    case 'ServerOpening':
      return { server_opening_event: { address: event.address } };
    case 'ServerDescriptionChanged':
      return { server_description_changed_event: { address: event.address, previousDescription: specServer(event.address, event.previousDescription), newDescription: specServer(event.address, event.newDescription) } };
    case 'TopologyDescriptionChanged':
      return { topology_description_changed_event: { previousDescription: specTopology(event.previousDescription), newDescription: specTopology(event.newDescription) } };
    case 'ServerClosed':
      return { server_closed_event: { address: event.address } };
    case 'TopologyClosed':
      return { topology_closed_event: {} };
  }
}

/**
 * `expected` as it applies to `actual`: the fields the test gives (a missing `primary` or `setName` is null), servers
 * sorted by address; `topologyId` left out (the client's own, checked apart).
 */
function expectedAs(expected: Document): Document {
  const [kind, fields] = Object.entries(expected)[0] as [string, Document];
  const server = (s: Document): Document => ({ primary: null, setName: null, ...s });
  const topology = (t: Document): Document => ({ setName: null, ...t, servers: (t.servers as Document[]).map(server).sort((a, b) => (a.address < b.address ? -1 : 1)) });
  const { topologyId: _id, ...rest } = fields;
  if (kind === 'server_description_changed_event') return { [kind]: { ...rest, previousDescription: server(rest.previousDescription), newDescription: server(rest.newDescription) } };
  if (kind === 'topology_description_changed_event') return { [kind]: { previousDescription: topology(rest.previousDescription), newDescription: topology(rest.newDescription) } };
  return { [kind]: rest };
}

interface MonitoringTest {
  description: string;
  uri: string;
  phases: { responses?: [string, Document][]; outcome: { events: Document[] } }[];
}

describe('topology events: the SDAM monitoring spec tests (tests/monitoring), through a client', function () {
  const { servers, made } = scriptedServersEachTest();

  for (const file of fs.readdirSync(fixtures).filter((f) => f.endsWith('.json')).sort()) {
    const test = EJSON.parse(fs.readFileSync(path.join(fixtures, file), 'utf8'), { relaxed: true }) as MonitoringTest;
    it(`${file}: ${test.description}`, async function () {
      const clock = new VirtualClock();
      const uri = `${test.uri}${test.uri.includes('?') ? '&' : test.uri.endsWith('/') ? '?' : '/?'}serverMonitoringMode=poll`;
      const c = made(connect(uri, { scheduler: clock }));
      const events: TopologyEvent[] = [];
      c.topologyEvents$.subscribe((e) => events.push(e));
      await settle();
      for (const [i, phase] of test.phases.entries()) {
        for (const [address, reply] of phase.responses ?? []) {
          // A server an earlier response removed: no check of it is left to answer.
          if (!c.topologyDescription.servers.has(address)) continue;
          // Its next check, after heartbeatFrequencyMS, when none waits now.
          if (!servers.isWaiting(address)) clock.advance(10_000);
          servers.respond(address, reply);
          await settle();
        }
        const published = events.splice(0);
        expect(published.every((e) => e.topologyId === c.topologyId), `phase ${i + 1}: the client's topologyId`).to.equal(true);
        expect(published.map(specEvent), `phase ${i + 1}`).to.deep.equal(phase.outcome.events.map(expectedAs));
      }
    });
  }
});

describe('serverDescriptionEquals and topologyDescriptionEquals (server discovery and monitoring spec, "Server Description Equality")', function () {
  const base = serverDescriptionOf({ ok: 1, isWritablePrimary: true, setName: 'rs', setVersion: 1, electionId: new ObjectId('000000000000000000000001'), hosts: ['a:1', 'b:1'], passives: ['p:1'], arbiters: ['q:1'], primary: 'a:1', me: 'a:1', tags: { dc: 'ny' }, minWireVersion: 0, maxWireVersion: 21, logicalSessionTimeoutMinutes: 30, topologyVersion: { processId: new ObjectId('000000000000000000000002'), counter: 1 }, lastWrite: { lastWriteDate: new Date(1000) } }, 5);

  it('each field SDAM counts makes two descriptions differ; the times (lastUpdateTime, lastWriteDate) do not; member lists compare as sets', function () {
    expect(serverDescriptionEquals(base, { ...base })).to.equal(true);
    const changed: [string, Partial<ServerDescription>][] = [
      ['type', { type: 'RSSecondary' }],
      ['minWireVersion', { minWireVersion: 1 }],
      ['maxWireVersion', { maxWireVersion: 20 }],
      ['me', { me: 'b:1' }],
      ['hosts', { hosts: ['a:1'] }],
      ['hosts (another member)', { hosts: ['a:1', 'c:1'] }],
      ['passives', { passives: [] }],
      ['arbiters', { arbiters: ['r:1'] }],
      ['tags', { tags: { dc: 'sf' } }],
      ['tags (one more)', { tags: { dc: 'ny', rack: '1' } }],
      ['tags (none)', { tags: undefined }],
      ['tags (one of two)', { tags: { dc: 'ny', rack: '2' } }],
      ['setName', { setName: 'other' }],
      ['setVersion', { setVersion: 2 }],
      ['electionId', { electionId: new ObjectId('000000000000000000000003') }],
      ['primary', { primary: 'b:1' }],
      ['logicalSessionTimeoutMinutes', { logicalSessionTimeoutMinutes: 31 }],
      ['topologyVersion', { topologyVersion: { processId: base.topologyVersion!.processId, counter: Long.fromNumber(2) } }],
      ['topologyVersion (none)', { topologyVersion: undefined }],
      ['error', { error: 'connection refused' }],
    ];
    for (const [field, change] of changed) {
      expect(serverDescriptionEquals(base, { ...base, ...change }), field).to.equal(false);
      expect(serverDescriptionEquals({ ...base, ...change }, base), `${field}, the other way`).to.equal(false);
    }
    expect(serverDescriptionEquals(base, { ...base, lastUpdateTime: 99, lastWriteDate: 99 }), 'times').to.equal(true);
    expect(serverDescriptionEquals(base, { ...base, hosts: ['b:1', 'a:1'] }), 'hosts in another order').to.equal(true);
    expect(serverDescriptionEquals(base, { ...base, tags: { dc: 'ny' } }), 'an equal tag set').to.equal(true);
    expect(serverDescriptionEquals({ ...base, tags: { dc: 'ny', rack: '1' } }, { ...base, tags: { rack: '1', dc: 'ny' } }), 'tags in another order').to.equal(true);
    expect(serverDescriptionEquals({ ...base, tags: { dc: 'ny', rack: '1' } }, { ...base, tags: { dc: 'ny', rack: '2' } }), 'one tag of two').to.equal(false);
    expect(serverDescriptionEquals(base, { ...base, electionId: new ObjectId('000000000000000000000001') }), 'an equal electionId').to.equal(true);
    expect(serverDescriptionEquals(base, { ...base, topologyVersion: { processId: new ObjectId('000000000000000000000002'), counter: Long.fromNumber(1) } }), 'an equal topologyVersion').to.equal(true);
  });

  it('two topology descriptions differ in type, setName, maxSetVersion, maxElectionId, a server, or the servers\' order', function () {
    const topology = (seeds: string[]): Topology => new Topology(initialTopology({ seeds, loadBalanced: false, directConnection: false, replicaSet: undefined }));
    expect(topologyDescriptionEquals(topology(['a:1', 'b:1']).description(), topology(['a:1', 'b:1']).description())).to.equal(true);
    expect(topologyDescriptionEquals(topology(['a:1', 'b:1']).description(), topology(['b:1', 'a:1']).description()), 'order').to.equal(false);
    expect(topologyDescriptionEquals(topology(['a:1', 'b:1']).description(), topology(['a:1']).description()), 'one server fewer').to.equal(false);
    const checked = topology(['a:1', 'b:1']);
    checked.update('a:1', base);
    const again = topology(['a:1', 'b:1']);
    again.update('a:1', { ...base, lastUpdateTime: 1000 });
    expect(topologyDescriptionEquals(checked.description(), again.description()), 'equal servers, other times').to.equal(true);
    expect(topologyDescriptionEquals(checked.description(), topology(['a:1', 'b:1']).description()), 'a server checked').to.equal(false);
    const fields: [string, Partial<TopologyDescription>][] = [
      ['type', { type: 'ReplicaSetNoPrimary' }],
      ['setName', { setName: 'other' }],
      ['maxSetVersion', { maxSetVersion: 9 }],
      ['maxElectionId', { maxElectionId: new ObjectId('000000000000000000000009') }],
    ];
    const description = checked.description();
    for (const [field, change] of fields) expect(topologyDescriptionEquals(description, { ...description, ...change }), field).to.equal(false);
    expect(topologyDescriptionEquals(description, { ...description, maxElectionId: description.maxElectionId === undefined ? undefined : new ObjectId(description.maxElectionId.toHexString()) }), 'an equal maxElectionId').to.equal(true);
  });
});

describe('Client.topologyEvents$ and Client.topologyDescription', function () {
  const { servers, made } = scriptedServersEachTest();

  /** A client of `uri` (polled, on a VirtualClock) and the lines of the events it publishes. */
  async function open(uri: string, options: Parameters<typeof connect>[1] = {}): Promise<{ c: Client; lines: () => string[]; events: TopologyEvent[]; clock: VirtualClock; completed: () => boolean }> {
    const clock = new VirtualClock();
    const c = made(connect(`${uri}${uri.includes('?') ? '&' : '?'}serverMonitoringMode=poll`, { scheduler: clock, ...options }));
    const events: TopologyEvent[] = [];
    let done = false;
    c.topologyEvents$.subscribe({ next: (e) => events.push(e), complete: () => (done = true) });
    await settle();
    return { c, events, clock, completed: () => done, lines: () => events.map(line) };
  }

  const primary = (hosts: string[]): Document => ({ ok: 1, isWritablePrimary: true, setName: 'rs', hosts, maxWireVersion: 21 });

  it('a replica set found from one seed: the member its primary adds opened after the primary\'s change, listed by the next topology change; close() ends with each server closed, the description emptied, TopologyClosed, completion', async function () {
    const { c, lines, completed, events } = await open('mongodb://a:27017/?replicaSet=rs');
    expect(lines()).to.deep.equal(['TopologyOpening', 'TopologyDescriptionChanged Unknown{} -> ReplicaSetNoPrimary{a:27017=Unknown}', 'ServerOpening a:27017']);
    servers.respond('a:27017', primary(['a:27017', 'b:27017']));
    await settle();
    expect(lines().slice(3)).to.deep.equal([
      'ServerDescriptionChanged a:27017 Unknown->RSPrimary',
      'ServerOpening b:27017',
      'TopologyDescriptionChanged ReplicaSetNoPrimary{a:27017=Unknown} -> ReplicaSetWithPrimary{a:27017=RSPrimary,b:27017=Unknown}',
    ]);
    expect(c.topologyDescription.servers.get('a:27017')).to.include({ type: 'RSPrimary', setName: 'rs' });
    const before = events.length;
    await c.close();
    await settle();
    expect(lines().slice(before)).to.deep.equal([
      'ServerClosed a:27017',
      'ServerClosed b:27017',
      'TopologyDescriptionChanged ReplicaSetWithPrimary{a:27017=RSPrimary,b:27017=Unknown} -> Unknown{}',
      'TopologyClosed',
    ]);
    expect(completed()).to.equal(true);
    expect(c.topologyDescription).to.include({ type: 'Unknown' });
    expect(c.topologyDescription.servers.size).to.equal(0);
  });

  it('load-balanced: the load balancer spec\'s sequence, opening and closing, and no heartbeat', async function () {
    const { c, lines } = await open('mongodb://lb:27017/?loadBalanced=true');
    await c.close();
    await settle();
    expect(lines()).to.deep.equal([
      'TopologyOpening',
      'TopologyDescriptionChanged Unknown{} -> LoadBalanced{lb:27017=Unknown}',
      'ServerOpening lb:27017',
      'ServerDescriptionChanged lb:27017 Unknown->LoadBalancer',
      'TopologyDescriptionChanged LoadBalanced{lb:27017=Unknown} -> LoadBalanced{lb:27017=LoadBalancer}',
      'ServerClosed lb:27017',
      'TopologyDescriptionChanged LoadBalanced{lb:27017=LoadBalancer} -> Unknown{}',
      'TopologyClosed',
    ]);
  });

  it('a failed check: its server Unknown with the error\'s message, published once while it fails the same way', async function () {
    const { lines, events, clock } = await open('mongodb://a:27017/?directConnection=true');
    servers.respond('a:27017', { ok: 1, isWritablePrimary: true, maxWireVersion: 21 });
    await settle();
    servers.fail('a:27017', new Error('connection refused'));
    for (let i = 0; i < 4; i++) {
      clock.advance(10_000);
      await settle();
    }
    const changes = events.filter((e) => e.type === 'ServerDescriptionChanged');
    expect(changes.map(line)).to.deep.equal(['ServerDescriptionChanged a:27017 Unknown->Standalone', 'ServerDescriptionChanged a:27017 Standalone->Unknown']);
    expect(changes[1]).to.have.nested.property('newDescription.error', 'connection refused');
    expect(lines().filter((l) => l.startsWith('TopologyDescriptionChanged'))).to.have.length(3);
    servers.fail('a:27017', new Error('connection reset'));
    clock.advance(10_000);
    await settle();
    expect(events.filter((e) => e.type === 'ServerDescriptionChanged').map(line), 'another error').to.have.length(3);
  });

  it('publishes whatever the log level; with topology at debug, one message per event, in the same order ("MUST be published under the same circumstances")', async function () {
    const written: Document[] = [];
    const logging = { componentSeverities: { topology: 'debug' }, path: { write: (m: { fields: Document }) => void written.push(m.fields) } } as never;
    const { c, events } = await open('mongodb://a:27017,b:27017/', { logging });
    servers.respond('a:27017', { ok: 1, secondary: true, setName: 'rs', hosts: ['a:27017', 'c:27017'], maxWireVersion: 21 });
    await settle();
    await c.close();
    await settle();
    const kind: Record<string, string> = {
      'Starting topology monitoring': 'TopologyOpening',
      'Starting server monitoring': 'ServerOpening',
      'Topology description changed': 'TopologyDescriptionChanged',
      'Stopped server monitoring': 'ServerClosed',
      'Stopped topology monitoring': 'TopologyClosed',
    };
    const messages = written.filter((f) => f.message in kind).map((f) => `${kind[f.message as string]}${f.serverPort === undefined ? '' : ` ${String(f.serverHost)}:${String(f.serverPort)}`}`);
    const published = events.filter((e) => e.type !== 'ServerDescriptionChanged').map((e) => `${e.type}${'address' in e ? ` ${e.address}` : ''}`);
    expect(messages).to.deep.equal(published);
    expect(published).to.include.members(['ServerOpening c:27017', 'ServerClosed c:27017']);
    const described = written.filter((f) => f.message === 'Topology description changed').map((f) => JSON.parse(f.newDescription as string) as Document);
    const changed = events.filter((e): e is Extract<TopologyEvent, { type: 'TopologyDescriptionChanged' }> => e.type === 'TopologyDescriptionChanged');
    expect(described.map((d) => d.type)).to.deep.equal(changed.map((e) => e.newDescription.type));
  });

  it('a subscriber that closes the client from its first ServerDescriptionChanged: the rest of the life, well formed, then completion', async function () {
    const { c } = await open('mongodb://a:27017,b:27017/');
    const seen: string[] = [];
    let completed = false;
    c.topologyEvents$.subscribe({
      next: (e) => {
        seen.push(line(e));
        if (e.type === 'ServerDescriptionChanged') void c.close();
      },
      complete: () => (completed = true),
    });
    expect(seen[0], 'the events of connect() given first').to.equal('TopologyOpening');
    servers.respond('a:27017', primary(['a:27017', 'c:27017']));
    await settle();
    expect(completed).to.equal(true);
    expect(seen.at(-1)).to.equal('TopologyClosed');
    expect(seen.at(-2)).to.match(/-> Unknown\{\}$/);
    const opened = seen.filter((l) => l.startsWith('ServerOpening')).map((l) => l.split(' ')[1]);
    const closed = seen.filter((l) => l.startsWith('ServerClosed')).map((l) => l.split(' ')[1]);
    expect(closed.sort()).to.deep.equal(opened.sort());
    expect(opened, 'no server opened once closed').to.not.include('c:27017');
  });

  it('hasReadableServer with a maxStalenessSeconds: as server selection reads it, with the client\'s heartbeatFrequencyMS (its staleness estimate and its smallest maxStalenessSeconds)', async function () {
    const { c, clock, events } = await open('mongodb://a:27017,b:27017/?replicaSet=rs&heartbeatFrequencyMS=500');
    const now = clock.now();
    const member = (reply: Document, lagMS: number): Document => ({ ok: 1, setName: 'rs', hosts: ['a:27017', 'b:27017'], maxWireVersion: 21, lastWrite: { lastWriteDate: new Date(now - lagMS) }, ...reply });
    servers.respond('a:27017', member({ isWritablePrimary: true }, 0));
    servers.respond('b:27017', member({ secondary: true }, 85_000));
    await settle();
    const within = { mode: 'secondary', maxStalenessSeconds: 90 } as const;
    // 85 s behind, plus heartbeatFrequencyMS (0.5 s): within 90 s, as selection finds it.
    expect((await c.selectPool({ readPreference: within })).address, 'selection').to.equal('b:27017');
    expect(c.topologyDescription.hasReadableServer(within)).to.equal(true);
    const last = events.filter((e) => e.type === 'TopologyDescriptionChanged').at(-1) as Extract<TopologyEvent, { type: 'TopologyDescriptionChanged' }>;
    expect(last.newDescription.hasReadableServer(within), 'the description the last event gave').to.equal(true);
    await c.close();
    const { c: slow } = await open('mongodb://a:27017/?replicaSet=rs&heartbeatFrequencyMS=100000');
    // Below heartbeatFrequencyMS + 10 s: selection refuses it, and so does the description.
    const tooSmall = { mode: 'secondary', maxStalenessSeconds: 100 } as const;
    expect(await slow.selectPool({ readPreference: tooSmall }).catch((e: unknown) => e)).to.be.instanceOf(InvalidOptionError);
    expect(() => slow.topologyDescription.hasReadableServer(tooSmall)).to.throw(InvalidOptionError, /maxStalenessSeconds/);
  });

  it('a check\'s ServerHeartbeatSucceeded or ServerHeartbeatFailed (events$) comes before the ServerDescriptionChanged it causes, as its log message does', async function () {
    const { c, clock } = await open('mongodb://a:27017/?directConnection=true');
    const merged: string[] = [];
    c.events$.subscribe((e) => {
      if (e.type === 'ServerHeartbeatSucceeded' || e.type === 'ServerHeartbeatFailed') merged.push(e.type);
    });
    c.topologyEvents$.subscribe((e) => {
      if (e.type === 'ServerDescriptionChanged' || e.type === 'TopologyDescriptionChanged') merged.push(e.type);
    });
    merged.splice(0);
    servers.respond('a:27017', { ok: 1, isWritablePrimary: true, maxWireVersion: 21 });
    await settle();
    servers.fail('a:27017', new Error('connection refused'));
    clock.advance(10_000);
    await settle();
    expect(merged).to.deep.equal(['ServerHeartbeatSucceeded', 'ServerDescriptionChanged', 'TopologyDescriptionChanged', 'ServerHeartbeatFailed', 'ServerDescriptionChanged', 'TopologyDescriptionChanged']);
  });

  it('hasReadableServer takes a read preference as selectPool does: a mode alone, or an object, checked', async function () {
    const { c } = await open('mongodb://a:27017,b:27017/?replicaSet=rs');
    servers.respond('a:27017', { ok: 1, secondary: true, setName: 'rs', hosts: ['a:27017', 'b:27017'], maxWireVersion: 21 });
    await settle();
    const description = c.topologyDescription;
    expect(description.type).to.equal('ReplicaSetNoPrimary');
    // A secondary, no primary: readable for 'secondary', not for 'primary', given either way.
    expect(description.hasReadableServer('primary'), "'primary'").to.equal(false);
    expect(description.hasReadableServer({ mode: 'primary' }), "{ mode: 'primary' }").to.equal(false);
    expect(description.hasReadableServer('secondary'), "'secondary'").to.equal(true);
    const refused = (call: () => unknown): unknown => {
      try {
        call();
      } catch (error) {
        return error instanceof InvalidOptionError ? error.option : error;
      }
      return 'accepted';
    };
    expect(refused(() => description.hasReadableServer('Secondary' as never)), 'a mode misspelled').to.match(/^readPreference/);
    expect(refused(() => description.hasReadableServer({ mode: 'primary', tags: [{ dc: 'ny' }] })), 'tags with primary').to.equal('readPreference.tags');
  });

  it('a description given to subscribers cannot be changed by one of them: its servers map refuses set, delete and clear', async function () {
    const { c, events } = await open('mongodb://a:27017,b:27017/');
    const first = events.find((e) => e.type === 'TopologyDescriptionChanged') as Extract<TopologyEvent, { type: 'TopologyDescriptionChanged' }>;
    for (const description of [first.newDescription, c.topologyDescription]) {
      const servers = description.servers as Map<string, ServerDescription>;
      expect(() => servers.set('x:1', servers.get('a:27017')!), 'set').to.throw(TypeError);
      expect(() => servers.delete('a:27017'), 'delete').to.throw(TypeError);
      expect(() => servers.clear(), 'clear').to.throw(TypeError);
      expect([...description.servers.keys()]).to.deep.equal(['a:27017', 'b:27017']);
    }
    servers.respond('a:27017', { ok: 1, isWritablePrimary: true, setName: 'rs', hosts: ['a:27017', 'b:27017'], maxWireVersion: 21 });
    await settle();
    const next = events.filter((e) => e.type === 'TopologyDescriptionChanged').at(-1) as Extract<TopologyEvent, { type: 'TopologyDescriptionChanged' }>;
    expect([...next.previousDescription.servers.keys()], 'the next change starts from the description as published').to.deep.equal(['a:27017', 'b:27017']);
  });

  it('a subscriber that comes once the topology changed is given it as it is first (its opening, one change from nothing to the description given last, a ServerOpening per open server), then what follows; one that comes before any change, the events of connect()', async function () {
    const { c, lines, events } = await open('mongodb://a:27017,b:27017/');
    const early: string[] = [];
    c.topologyEvents$.subscribe((e) => early.push(line(e)));
    expect(early, 'nothing changed since connect()').to.deep.equal(lines());
    servers.respond('a:27017', primary(['a:27017', 'c:27017']));
    await settle();
    const late: TopologyEvent[] = [];
    c.topologyEvents$.subscribe((e) => late.push(e));
    expect(late.map(line)).to.deep.equal([
      'TopologyOpening',
      'TopologyDescriptionChanged Unknown{} -> ReplicaSetWithPrimary{a:27017=RSPrimary,c:27017=Unknown}',
      'ServerOpening a:27017',
      'ServerOpening c:27017',
    ]);
    expect(late[0], 'the opening of connect()').to.equal(events[0]);
    const lastChange = events.filter((e): e is Extract<TopologyEvent, { type: 'TopologyDescriptionChanged' }> => e.type === 'TopologyDescriptionChanged').at(-1)!;
    expect((late[1] as Extract<TopologyEvent, { type: 'TopologyDescriptionChanged' }>).newDescription, 'the description given last').to.equal(lastChange.newDescription);
    await c.close();
    await settle();
    expect(late.slice(4).map(line)).to.deep.equal(['ServerClosed a:27017', 'ServerClosed c:27017', 'TopologyDescriptionChanged ReplicaSetWithPrimary{a:27017=RSPrimary,c:27017=Unknown} -> Unknown{}', 'TopologyClosed']);
    expect(lines().slice(-4), 'the same end for the first subscriber').to.deep.equal(late.slice(4).map(line));
  });

  it('a subscriber that comes once closed gets the completion only; topologyDescription is Unknown with no server then', async function () {
    const { c } = await open('mongodb://a:27017/');
    await c.close();
    await settle();
    const late: TopologyEvent[] = [];
    let completed = false;
    c.topologyEvents$.subscribe({ next: (e) => late.push(e), complete: () => (completed = true) });
    expect(late).to.deep.equal([]);
    expect(completed).to.equal(true);
  });
});

describe('Client.topologyEvents$ against a server (the embedded endpoint, or MONGODB_URI\'s)', function () {
  let endpoint: TestEndpoint | undefined;
  let client: Client | undefined;
  afterEach(async () => {
    await client?.close();
    await endpoint?.stop();
    client = endpoint = undefined;
  });

  it('a command, then close(): TopologyOpening first, the seed described once checked, each server opened closed, the description emptied, TopologyClosed last', async function () {
    endpoint = await startTestEndpoint();
    const c = (client = connect(`mongodb://${endpoint.address}/`, endpoint.connectionOptions));
    const events: TopologyEvent[] = [];
    let completed = false;
    c.topologyEvents$.subscribe({ next: (e) => events.push(e), complete: () => (completed = true) });
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
    expect(events.map((e) => e.type).slice(0, 3)).to.deep.equal(['TopologyOpening', 'TopologyDescriptionChanged', 'ServerOpening']);
    const seed = events.find((e) => e.type === 'ServerDescriptionChanged' && e.address === endpoint!.address);
    expect(seed, 'the seed checked').to.not.equal(undefined);
    expect(seed).to.have.nested.property('previousDescription.type', 'Unknown');
    // The RTT the monitor measured at that check (SDAM's prose test: each change "includes a non-zero RTT").
    const { roundTripTime, minRoundTripTime } = (seed as Extract<TopologyEvent, { type: 'ServerDescriptionChanged' }>).newDescription;
    expect(roundTripTime).to.be.a('number').above(0);
    expect(minRoundTripTime).to.be.a('number').at.least(0);
    expect((seed as Extract<TopologyEvent, { type: 'ServerDescriptionChanged' }>).previousDescription.roundTripTime, 'an Unknown server has none').to.equal(undefined);
    expect(c.topologyDescription.hasWritableServer()).to.equal(true);
    await c.close();
    expect(await eventually(() => completed)).to.equal(true);
    expect(events.at(-1)!.type).to.equal('TopologyClosed');
    const emptied = events.at(-2)!;
    expect(emptied.type === 'TopologyDescriptionChanged' && emptied.newDescription.type === 'Unknown' && emptied.newDescription.servers.size === 0).to.equal(true);
    const addresses = (type: string): string[] => events.filter((e) => e.type === type).map((e) => (e as { address: string }).address).sort();
    expect(addresses('ServerClosed')).to.deep.equal(addresses('ServerOpening'));
    expect(events.every((e) => e.topologyId === c.topologyId)).to.equal(true);
  });

  it('a command\'s network error: one ServerDescriptionChanged to Unknown, with the error\'s message, then the server known again at its next check (as the unified test find-network-error counts them)', async function () {
    endpoint = await startTestEndpoint();
    const c = (client = connect(`mongodb://${endpoint.address}/?heartbeatFrequencyMS=500&appName=eventsneterr&serverMonitoringMode=poll`, endpoint.connectionOptions));
    const events: TopologyEvent[] = [];
    c.topologyEvents$.subscribe((e) => events.push(e));
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
    const known = events.filter((e) => e.type === 'ServerDescriptionChanged').at(-1) as Extract<TopologyEvent, { type: 'ServerDescriptionChanged' }>;
    await endpoint.adminCommand({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['ping'], closeConnection: true, appName: 'eventsneterr' } });
    const before = events.length;
    expect(await c.command('admin', { ping: 1 }).catch((e: unknown) => e)).to.be.instanceOf(Error);
    const changes = (): Extract<TopologyEvent, { type: 'ServerDescriptionChanged' }>[] => events.slice(before).filter((e): e is Extract<TopologyEvent, { type: 'ServerDescriptionChanged' }> => e.type === 'ServerDescriptionChanged');
    expect(await eventually(() => changes().length >= 2, 3000)).to.equal(true);
    const [unknown, again] = changes();
    expect(unknown.previousDescription.type).to.equal(known.newDescription.type);
    expect(unknown.newDescription.type).to.equal('Unknown');
    expect(unknown.newDescription.error).to.be.a('string').and.not.equal('');
    expect(again.newDescription.type).to.equal(known.newDescription.type);
    expect(changes().filter((e) => e.newDescription.type === 'Unknown'), 'one change to Unknown').to.have.length(1);
    await endpoint.adminCommand({ configureFailPoint: 'failCommand', mode: 'off' });
  });

  it('a command\'s network error while the monitor streams: the check it cancels changes nothing more, so one ServerDescriptionChanged to Unknown (the unified tests\' default monitoring mode)', async function () {
    endpoint = await startTestEndpoint();
    const c = (client = connect(`mongodb://${endpoint.address}/?heartbeatFrequencyMS=500&appName=eventsstream&serverMonitoringMode=stream`, endpoint.connectionOptions));
    const events: TopologyEvent[] = [];
    c.topologyEvents$.subscribe((e) => events.push(e));
    let awaiting = false;
    c.events$.subscribe((e) => {
      if (e.type === 'ServerHeartbeatStarted' && e.awaited) awaiting = true;
    });
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
    // The monitor waits on an awaitable hello: the network error cancels that check.
    expect(await eventually(() => awaiting, 3000), 'an awaited check in progress').to.equal(true);
    await endpoint.adminCommand({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['ping'], closeConnection: true, appName: 'eventsstream' } });
    const before = events.length;
    const error = await c.command('admin', { ping: 1 }).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(Error);
    const changes = (): Extract<TopologyEvent, { type: 'ServerDescriptionChanged' }>[] => events.slice(before).filter((e): e is Extract<TopologyEvent, { type: 'ServerDescriptionChanged' }> => e.type === 'ServerDescriptionChanged');
    expect(await eventually(() => changes().some((e) => e.newDescription.type !== 'Unknown'), 3000), 'known again').to.equal(true);
    expect(changes().map((e) => `${e.previousDescription.type}->${e.newDescription.type}`)).to.deep.equal(['Standalone->Unknown', 'Unknown->Standalone']);
    expect(changes()[0].newDescription.error, 'the command\'s error').to.equal((error as Error).message);
    await endpoint.adminCommand({ configureFailPoint: 'failCommand', mode: 'off' });
  });
});

describe('Client.topologyEvents$: establishments of one server failing together', function () {
  const { servers, made } = scriptedServersEachTest();

  it('two connections of a pool failing in one tick (maxConnecting 2) publish one ServerDescriptionChanged, from the server as it was to Unknown with the first one\'s error (the second is stale)', async function () {
    const rejects: ((error: Error) => void)[] = [];
    servers.poolConnection = () => new Promise<never>((_resolve, reject) => rejects.push(reject));
    const clock = new VirtualClock();
    const c = made(connect('mongodb://a:27017/?directConnection=true&serverMonitoringMode=poll&minPoolSize=2&maxConnecting=2', { scheduler: clock }));
    const events: TopologyEvent[] = [];
    c.topologyEvents$.subscribe((e) => events.push(e));
    await settle();
    servers.respond('a:27017', { ok: 1, isWritablePrimary: true, maxWireVersion: 21 });
    await settle();
    expect(rejects, 'two establishments under way').to.have.length(2);
    rejects.forEach((reject, i) => reject(new Error(`connection reset ${i + 1}`)));
    await settle();
    const changes = events.filter((e): e is Extract<TopologyEvent, { type: 'ServerDescriptionChanged' }> => e.type === 'ServerDescriptionChanged');
    expect(changes.map(line)).to.deep.equal(['ServerDescriptionChanged a:27017 Unknown->Standalone', 'ServerDescriptionChanged a:27017 Standalone->Unknown']);
    expect(changes[1].newDescription.error, 'the first failure: the second, of a generation the first cleared, is stale').to.equal('connection reset 1');
  });
});
