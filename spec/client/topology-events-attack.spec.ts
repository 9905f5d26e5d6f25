import { expect } from 'chai';
import { config } from 'rxjs';
import type { Document } from 'bson';
import { connect, InvalidOptionError, serverDescriptionEquals, type Client, type ServerDescription, type TopologyEvent } from '../../lib';
import { VirtualClock } from '../../lib/testing';
import { eventLine as line, scriptedServersEachTest, settle } from '../support/scripted-servers';


/** What is wrong with one subscriber's view of a topology's life (`lines`, then `complete` once): empty when nothing. */
function lifeDefects(lines: readonly string[]): string[] {
  const defects: string[] = [];
  if (lines[0] !== 'TopologyOpening') defects.push(`first: ${lines[0]}`);
  const closedAt = lines.indexOf('TopologyClosed');
  if (closedAt < 0) defects.push('no TopologyClosed');
  else if (lines.slice(closedAt + 1).join() !== 'complete') defects.push(`after TopologyClosed: ${lines.slice(closedAt + 1).join(' | ')}`);
  const open = new Set<string>();
  for (const l of lines) {
    const [kind, address] = l.split(' ');
    if (kind === 'ServerOpening') {
      if (open.has(address)) defects.push(`opened twice: ${address}`);
      open.add(address);
    } else if (kind === 'ServerClosed') {
      if (!open.delete(address)) defects.push(`closed, not open: ${address}`);
    } else if (kind === 'ServerDescriptionChanged' && !open.has(address)) defects.push(`changed, not open: ${address}`);
  }
  if (open.size > 0) defects.push(`never closed: ${[...open].join(', ')}`);
  return defects;
}

const primary = (hosts: string[]): Document => ({ ok: 1, isWritablePrimary: true, setName: 'rs', hosts, maxWireVersion: 21 });

describe('Client.topologyEvents$ attacked: subscribers that re-enter the client, hostile servers, mutated descriptions', function () {
  const { servers, made } = scriptedServersEachTest();

  /** A client of `uri` (polled, on a VirtualClock). */
  function open(uri: string): { c: Client; clock: VirtualClock } {
    const clock = new VirtualClock();
    const c = made(connect(`${uri}${uri.includes('?') ? '&' : '?'}serverMonitoringMode=poll`, { scheduler: clock }));
    return { c, clock };
  }

  // Seeds a and b; a's check finds the primary of a set of a and c: a changes, c opens, b closes, the topology changes.
  for (const [kind, which] of [
    ['ServerDescriptionChanged', 'ServerDescriptionChanged a:27017'],
    ['ServerOpening', 'ServerOpening c:27017'],
    ['ServerClosed', 'ServerClosed b:27017'],
    ['TopologyDescriptionChanged', 'TopologyDescriptionChanged Unknown{a:27017'],
  ] as const) {
    it(`a subscriber that closes the client from a check's ${kind}: every other subscriber is given the same events in the same order, that subscriber's first (the changes in the order they happened)`, async function () {
      const { c } = open('mongodb://a:27017,b:27017/');
      const closer: string[] = [];
      const others: string[][] = [[], []];
      c.topologyEvents$.subscribe({
        next: (e) => {
          closer.push(line(e));
          if (line(e).startsWith(which)) void c.close();
        },
        complete: () => closer.push('complete'),
      });
      for (const seen of others) c.topologyEvents$.subscribe({ next: (e) => seen.push(line(e)), complete: () => seen.push('complete') });
      await settle();
      servers.respond('a:27017', primary(['a:27017', 'c:27017']));
      await settle();
      expect(closer.some((l) => l.startsWith(which)), 'the event came').to.equal(true);
      expect(lifeDefects(closer), 'the closer\'s view').to.deep.equal([]);
      for (const seen of others) expect(seen).to.deep.equal(closer);
    });
  }
  // The log's topology messages, one per event but ServerDescriptionChanged, in the events' order.
  const MESSAGE_EVENT: Record<string, string> = {
    'Starting topology monitoring': 'TopologyOpening',
    'Starting server monitoring': 'ServerOpening',
    'Topology description changed': 'TopologyDescriptionChanged',
    'Stopped server monitoring': 'ServerClosed',
    'Stopped topology monitoring': 'TopologyClosed',
  };
  for (const [kind, which, change] of [
    ['ServerOpening', 'ServerOpening d:27017', 'SRV polling'],
    ['ServerClosed', 'ServerClosed b:27017', 'SRV polling'],
    ['TopologyDescriptionChanged', 'TopologyDescriptionChanged Unknown{a:27017=Unknown,b:27017=Unknown} ->', 'SRV polling'],
    ['ServerOpening', 'ServerOpening c:27017', 'server discovery'],
    ['ServerClosed', 'ServerClosed b:27017', 'server discovery'],
  ] as const) {
    it(`a subscriber that closes the client from ${change}'s ${kind}: the log's topology messages are still one per event, in the events' order ("Stopped topology monitoring" last)`, async function () {
      const written: Document[] = [];
      const logging = { componentSeverities: { topology: 'debug' }, path: { write: (m: { fields: Document }) => void written.push(m.fields) } } as never;
      const clock = new VirtualClock();
      const c = made(connect('mongodb://a:27017,b:27017/?serverMonitoringMode=poll', { scheduler: clock, logging }));
      const seen: string[] = [];
      c.topologyEvents$.subscribe((e) => {
        seen.push(line(e));
        if (line(e).startsWith(which)) void c.close();
      });
      const fed: Document[] = [];
      c.log$.subscribe((m) => fed.push((m as unknown as { fields: Document }).fields));
      await settle();
      // A rescan that lists a and d (b gone), or a's check as the primary of a and c (b not a member).
      if (change === 'SRV polling') (c as unknown as { applySrvHosts: (hosts: string[]) => void }).applySrvHosts(['a:27017', 'd:27017']);
      else servers.respond('a:27017', primary(['a:27017', 'c:27017']));
      await settle();
      expect(seen.some((l) => l.startsWith(which)), 'the event came').to.equal(true);
      const messages = written.filter((f) => f.message in MESSAGE_EVENT).map((f) => `${MESSAGE_EVENT[f.message as string]}${f.serverPort === undefined ? '' : ` ${String(f.serverHost)}:${String(f.serverPort)}`}`);
      const events = seen.filter((l) => !l.startsWith('ServerDescriptionChanged')).map((l) => (l.startsWith('TopologyDescriptionChanged') ? 'TopologyDescriptionChanged' : l));
      expect(messages).to.deep.equal(events);
      expect(fed.filter((f) => f.message in MESSAGE_EVENT), 'log$ as the destination').to.deep.equal(written.filter((f) => f.message in MESSAGE_EVENT));
    });
  }

  it('the pools of two servers whose establishments fail in one tick (minPoolSize, an outage): each server\'s ServerDescriptionChanged comes before the TopologyDescriptionChanged that shows it Unknown, and starts from the description the last one gave', async function () {
    // Every pool connection fails (a network error clears the pool and makes the server Unknown).
    const { c } = open('mongodb://a:27017,b:27017/?minPoolSize=1');
    const events: TopologyEvent[] = [];
    c.topologyEvents$.subscribe((e) => events.push(e));
    await settle();
    const mongos: Document = { ok: 1, isWritablePrimary: true, msg: 'isdbgrid', maxWireVersion: 21 };
    servers.respond('a:27017', mongos);
    servers.respond('b:27017', mongos);
    await settle();
    const lines = events.map(line);
    for (const address of ['a:27017', 'b:27017']) {
      const changed = lines.indexOf(`ServerDescriptionChanged ${address} Mongos->Unknown`);
      const shown = events.findIndex((e, i) => i > lines.indexOf(`ServerDescriptionChanged ${address} Unknown->Mongos`) && e.type === 'TopologyDescriptionChanged' && e.newDescription.servers.get(address)?.type === 'Unknown');
      expect(changed, `${address}: its change to Unknown`).to.be.greaterThan(0);
      expect(shown, `${address}: a topology change shows it Unknown`).to.be.greaterThan(0);
      expect(changed, `${address}: its change before the topology's (${lines.join(' | ')})`).to.be.lessThan(shown);
    }
    // Each change starts from the description the one before gave.
    const last = new Map<string, ServerDescription>();
    for (const e of events) {
      if (e.type !== 'ServerDescriptionChanged') continue;
      const before = last.get(e.address);
      if (before !== undefined) expect(serverDescriptionEquals(before, e.previousDescription), `${e.address}: ${line(e)}`).to.equal(true);
      last.set(e.address, e.newDescription);
    }
  });

  it('a check that lands between a pool\'s establishment error and the publication of its change: each ServerDescriptionChanged starts from the description the last one gave, and none is published twice', async function () {
    const standalone: Document = { ok: 1, isWritablePrimary: true, maxWireVersion: 21 };
    let interleaved = 0;
    // The establishment fails k microtasks after the check's reply is given: some k land the check in between.
    for (let k = 0; k < 8; k++) {
      let reject!: (error: Error) => void;
      servers.poolConnection = () => new Promise<never>((_resolve, r) => (reject = r));
      const { c, clock } = open('mongodb://a:27017/?minPoolSize=1&directConnection=true');
      const events: TopologyEvent[] = [];
      c.topologyEvents$.subscribe((e) => events.push(e));
      await settle();
      servers.respond('a:27017', standalone);
      await settle();
      clock.advance(10_000);
      await settle();
      servers.respond('a:27017', { ...standalone, tags: { k: String(k) } });
      for (let i = 0; i < k; i++) await Promise.resolve();
      reject(new Error('pool connection failed'));
      await settle();
      await c.close();
      const changes = events.filter((e): e is Extract<TopologyEvent, { type: 'ServerDescriptionChanged' }> => e.type === 'ServerDescriptionChanged');
      for (const [i, e] of changes.entries()) {
        if (i > 0) expect(serverDescriptionEquals(changes[i - 1].newDescription, e.previousDescription), `k=${k}: ${changes.map(line).join(' | ')}`).to.equal(true);
        expect(serverDescriptionEquals(e.previousDescription, e.newDescription), `k=${k}: a change to an equal description`).to.equal(false);
      }
      const failed = events.findIndex((e) => e.type === 'ServerDescriptionChanged' && e.newDescription.error === 'pool connection failed');
      if (failed >= 0 && events[failed + 1]?.type === 'ServerDescriptionChanged') interleaved++;
    }
    expect(interleaved, 'a check landed in between').to.be.greaterThan(0);
  });

  // A subscriber that comes after the first changes is given the topology as it is (its opening, the description, a
  // ServerOpening per server open now), not the events of connect(): it sees no ServerClosed of a server discovery
  // added before it came without its ServerOpening, and no seed removed before it came stays open in its view.
  it('a subscriber that comes after discovery changed the servers: its view pairs each ServerOpening with one ServerClosed', async function () {
    const { c } = open('mongodb://a:27017,b:27017/');
    await settle();
    servers.respond('a:27017', primary(['a:27017', 'c:27017']));
    await settle();
    const late: string[] = [];
    c.topologyEvents$.subscribe({ next: (e) => late.push(line(e)), complete: () => late.push('complete') });
    await c.close();
    await settle();
    expect(lifeDefects(late), late.join(' | ')).to.deep.equal([]);
  });

  for (const closeOn of ['Server heartbeat succeeded', 'Starting server monitoring', 'Topology description changed', 'Stopped server monitoring']) {
    it(`a subscriber of log$ that closes the client from a check's "${closeOn}": every other subscriber of log$ is given the topology's messages in the same order, and the destination writes them so`, async function () {
      const written: Document[] = [];
      const logging = { componentSeverities: { topology: 'debug' }, path: { write: (m: { fields: Document }) => void written.push(m.fields) } } as never;
      const clock = new VirtualClock();
      const c = made(connect('mongodb://a:27017,b:27017/?serverMonitoringMode=poll', { scheduler: clock, logging }));
      const text = (f: Document): string => `${String(f.message)}${f.serverPort === undefined ? '' : ` ${String(f.serverHost)}:${String(f.serverPort)}`}`;
      const topology = (f: Document): boolean => f.topologyId === c.topologyId;
      const closer: string[] = [];
      const others: string[][] = [[], []];
      let armed = false;
      c.log$.subscribe((m) => {
        const fields = (m as unknown as { fields: Document }).fields;
        if (!topology(fields)) return;
        closer.push(text(fields));
        if (armed && fields.message === closeOn) void c.close();
      });
      for (const seen of others) c.log$.subscribe((m) => topology((m as unknown as { fields: Document }).fields) && seen.push(text((m as unknown as { fields: Document }).fields)));
      await settle();
      armed = true;
      servers.respond('a:27017', primary(['a:27017', 'c:27017']));
      await settle();
      expect(closer.filter((l) => l.startsWith(closeOn)).length, 'the message came').to.be.greaterThan(0);
      expect(closer.at(-1)).to.equal('Stopped topology monitoring');
      for (const seen of others) expect(seen).to.deep.equal(closer);
      expect(written.filter(topology).map(text), 'the destination').to.deep.equal(closer);
    });
  }

  it('the re-entrancy matrix: a subscriber of topologyEvents$, log$ or events$ that closes, drains, commands or throws from each kind of event, as the client connects, discovers, follows SRV polling, opens a load balancer, fails a check, closes: every subscriber\'s life well formed and the same, the log one message per event', async function () {
    this.timeout(60_000);
    type Scenario = { name: string; uri: string; run: (c: Client, clock: VirtualClock) => Promise<void> };
    const scenarios: Scenario[] = [
      { name: 'connect', uri: 'mongodb://a:27017,b:27017/', run: async () => {} },
      { name: 'discovery', uri: 'mongodb://a:27017,b:27017/', run: async () => servers.respond('a:27017', primary(['a:27017', 'c:27017'])) },
      { name: 'SRV polling', uri: 'mongodb://a:27017,b:27017/', run: async (c) => (c as unknown as { applySrvHosts: (hosts: string[]) => void }).applySrvHosts(['a:27017', 'd:27017']) },
      { name: 'load-balanced', uri: 'mongodb://lb:27017/?loadBalanced=true', run: async () => {} },
      {
        name: 'failed check',
        uri: 'mongodb://a:27017/?directConnection=true',
        run: async (_c, clock) => {
          servers.respond('a:27017', { ok: 1, isWritablePrimary: true, maxWireVersion: 21 });
          await settle();
          servers.fail('a:27017', new Error('connection refused'));
          clock.advance(10_000);
        },
      },
      { name: 'close', uri: 'mongodb://a:27017,b:27017/', run: async (c) => void c.close() },
    ];
    const triggers = [
      ...['TopologyOpening', 'ServerOpening', 'ServerDescriptionChanged', 'TopologyDescriptionChanged', 'ServerClosed', 'TopologyClosed'].map((kind) => `topologyEvents$ ${kind}`),
      ...['ServerHeartbeatSucceeded', 'ServerHeartbeatFailed', 'ConnectionPoolCreated', 'ConnectionPoolReady', 'ConnectionPoolClosed'].map((type) => `events$ ${type}`),
      ...['Starting server monitoring', 'Topology description changed', 'Stopped server monitoring', 'Server heartbeat succeeded', 'Server heartbeat failed'].map((message) => `log$ ${message}`),
    ];
    const actions = ['close', 'drain', 'command', 'throw'] as const;
    const unhandled: unknown[] = [];
    const defects: string[] = [];
    let cells = 0;
    config.onUnhandledError = (error) => void unhandled.push(error);
    try {
      for (const scenario of scenarios) {
        for (const trigger of triggers) {
          for (const action of actions) {
            unhandled.length = 0;
            const written: Document[] = [];
            const logging = { componentSeverities: { topology: 'debug' }, path: { write: (m: { fields: Document }) => void written.push(m.fields) } } as never;
            const clock = new VirtualClock();
            const c = made(connect(`${scenario.uri}${scenario.uri.includes('?') ? '&' : '?'}serverMonitoringMode=poll`, { scheduler: clock, logging }));
            const [source, kind] = [trigger.slice(0, trigger.indexOf(' ')), trigger.slice(trigger.indexOf(' ') + 1)];
            let armed = scenario.name === 'connect' || scenario.name === 'load-balanced';
            let fired = false;
            let thrown: Error | undefined;
            const act = (what: string): void => {
              if (!armed || fired || what !== kind) return;
              fired = true;
              if (action === 'close') void c.close();
              else if (action === 'drain') void c.drain();
              else if (action === 'command') void c.command('admin', { ping: 1 }).catch(() => undefined);
              else throw (thrown = new Error(`a subscriber threw from ${trigger}`));
            };
            const views: string[][] = [[], [], []];
            const subscribe = (view: string[]): unknown => c.topologyEvents$.subscribe({ next: (e) => view.push(line(e)), complete: () => view.push('complete') });
            subscribe(views[0]);
            if (source === 'topologyEvents$') {
              c.topologyEvents$.subscribe({
                next: (e) => {
                  views[1].push(line(e));
                  act(e.type);
                },
                complete: () => views[1].push('complete'),
              });
            } else {
              subscribe(views[1]);
              if (source === 'events$') c.events$.subscribe((e) => act(e.type));
              else c.log$.subscribe((m) => act(String((m as unknown as { fields: Document }).fields.message)));
            }
            subscribe(views[2]);
            await settle();
            armed = true;
            await scenario.run(c, clock);
            await settle();
            await c.close();
            await settle();
            // RxJS reports a subscriber's error on a timer.
            await new Promise((resolve) => setTimeout(resolve, 1));
            if (!fired) continue;
            cells++;
            const found: string[] = [];
            // A subscriber that came after close() (the third, once the second closed the client as it was given the events
            // of connect()) is given the completion only.
            const late = views[2].join() === 'complete';
            for (const [i, view] of views.entries()) {
              if (i === 2 && late) continue;
              const life = lifeDefects(view);
              if (life.length > 0) found.push(`subscriber ${i + 1}: ${life.join('; ')}`);
              if (i > 0 && view.join(' | ') !== views[0].join(' | ')) found.push(`subscriber ${i + 1} saw another sequence than the first`);
            }
            const events = views[0].filter((l) => l !== 'complete' && !l.startsWith('ServerDescriptionChanged')).map((l) => (l.startsWith('TopologyDescriptionChanged') ? 'TopologyDescriptionChanged' : l));
            const messages = written.filter((f) => f.message in MESSAGE_EVENT).map((f) => `${MESSAGE_EVENT[f.message as string]}${f.serverPort === undefined ? '' : ` ${String(f.serverHost)}:${String(f.serverPort)}`}`);
            if (messages.join(' | ') !== events.join(' | ')) found.push(`log: ${messages.join(' | ')}; events: ${events.join(' | ')}`);
            const others = unhandled.filter((error) => error !== thrown);
            if (others.length > 0) found.push(`unhandled: ${others.map(String).join('; ')}`);
            if (thrown !== undefined && !unhandled.includes(thrown)) found.push('the error thrown reached nobody');
            if (found.length > 0) defects.push(`${scenario.name}, ${action} from ${trigger}: ${found.join(' ;; ')}`);
          }
        }
      }
    } finally {
      config.onUnhandledError = null;
    }
    expect(cells, 'cells whose trigger came').to.be.greaterThan(150);
    expect(defects).to.deep.equal([]);
  });

  it('a subscriber that changes an event (its address, its descriptions) is refused: the subscribers after it, and one that comes later (given the topology as it is), see it as published', async function () {
    const { c } = open('mongodb://a:27017/');
    let refused = 0;
    const tamper = (e: TopologyEvent): void => {
      try {
        Object.assign(e, { address: 'tampered:1', topologyId: 'tampered', previousDescription: undefined, newDescription: undefined });
      } catch (error) {
        if (error instanceof TypeError) refused++;
      }
    };
    c.topologyEvents$.subscribe(tamper);
    const after: TopologyEvent[] = [];
    c.topologyEvents$.subscribe((e) => after.push(e));
    await settle();
    servers.respond('a:27017', { ok: 1, isWritablePrimary: true, maxWireVersion: 21 });
    await settle();
    const later: TopologyEvent[] = [];
    c.topologyEvents$.subscribe((e) => later.push(e));
    for (const e of [...after, ...later]) {
      expect(e.topologyId, line(e)).to.equal(c.topologyId);
      if ('address' in e) expect(e.address, line(e)).to.equal('a:27017');
      if ('newDescription' in e) expect(e.newDescription, line(e)).to.not.equal(undefined);
    }
    expect(later.map(line), 'a later subscriber: the topology as it is').to.deep.equal(['TopologyOpening', 'TopologyDescriptionChanged Unknown{} -> Single{a:27017=Standalone}', 'ServerOpening a:27017']);
    expect(refused, 'each change refused').to.equal(after.length);
  });

  it('serverDescriptionEquals compares member lists as sets, either way round: repeats do not make two different lists equal', function () {
    const base: ServerDescription = { type: 'RSPrimary', minWireVersion: 0, maxWireVersion: 21, setName: 'rs', hosts: ['a:1', 'b:1'], passives: [], arbiters: [] };
    for (const field of ['hosts', 'passives', 'arbiters'] as const) {
      const repeated = { ...base, [field]: ['a:1', 'a:1'] };
      const two = { ...base, [field]: ['a:1', 'b:1'] };
      expect(serverDescriptionEquals(repeated, two), `${field}: [a, a] and [a, b]`).to.equal(false);
      expect(serverDescriptionEquals(two, repeated), `${field}: [a, b] and [a, a]`).to.equal(false);
      expect(serverDescriptionEquals({ ...base, [field]: ['a:1'] }, repeated), `${field}: [a] and [a, a]`).to.equal(true);
    }
  });

  it('hasReadableServer() of a client checking every 120 s reads staleness as its selection does: with that heartbeatFrequencyMS, not 10 s', async function () {
    const { c } = open('mongodb://a:27017,b:27017/?replicaSet=rs&heartbeatFrequencyMS=120000');
    await settle();
    const written = Date.UTC(2026, 0, 1);
    servers.respond('a:27017', { ok: 1, isWritablePrimary: true, setName: 'rs', hosts: ['a:27017', 'b:27017'], maxWireVersion: 21, lastWrite: { lastWriteDate: new Date(written) } });
    // The secondary's last write 200 s behind the primary's: its staleness 200 s + heartbeatFrequencyMS.
    servers.respond('b:27017', { ok: 1, secondary: true, setName: 'rs', hosts: ['a:27017', 'b:27017'], maxWireVersion: 21, lastWrite: { lastWriteDate: new Date(written - 200_000) } });
    await settle();
    const description = c.topologyDescription;
    expect(description.servers.get('b:27017')?.type).to.equal('RSSecondary');
    expect(description.hasReadableServer({ mode: 'secondary', maxStalenessSeconds: 350 }), 'staleness 320 s, at most 350').to.equal(true);
    expect(description.hasReadableServer({ mode: 'secondary', maxStalenessSeconds: 300 }), 'staleness 320 s, at most 300').to.equal(false);
    expect(() => description.hasReadableServer({ mode: 'secondary', maxStalenessSeconds: 100 }), 'below heartbeatFrequencyMS + 10 s').to.throw(InvalidOptionError);
  });

  it('a subscriber that changes the servers of a published description (set, delete, clear) is refused: neither the client nor another client sees its change', async function () {
    const { c } = open('mongodb://a:27017/');
    const refused: string[] = [];
    c.topologyEvents$.subscribe((e) => {
      if (e.type !== 'TopologyDescriptionChanged') return;
      for (const [name, change] of [
        ['delete', (m: Map<string, unknown>) => m.delete('a:27017')],
        ['clear', (m: Map<string, unknown>) => m.clear()],
        ['set', (m: Map<string, unknown>) => m.set('junk:1', {})],
      ] as const) {
        for (const description of [e.previousDescription, e.newDescription]) {
          try {
            change(description.servers as Map<string, unknown>);
          } catch (error) {
            if (error instanceof TypeError) refused.push(name);
          }
        }
      }
    });
    await settle();
    servers.respond('a:27017', { ok: 1, isWritablePrimary: true, maxWireVersion: 21 });
    await settle();
    expect([...c.topologyDescription.servers.keys()], 'the client\'s description').to.deep.equal(['a:27017']);
    await c.close();
    await settle();
    expect([...c.topologyDescription.servers.keys()], 'the closed client\'s description').to.deep.equal([]);
    // Another client: its first change starts from a description of no server.
    const other = connect('mongodb://z:27017/?serverMonitoringMode=poll', { scheduler: new VirtualClock() });
    const first: TopologyEvent[] = [];
    other.topologyEvents$.subscribe((e) => first.push(e));
    await other.close();
    const initial = first.find((e) => e.type === 'TopologyDescriptionChanged');
    expect(initial !== undefined && initial.type === 'TopologyDescriptionChanged' && [...initial.previousDescription.servers.keys()], 'another client\'s first change').to.deep.equal([]);
    expect(refused, 'each change refused').to.include.members(['delete', 'clear', 'set']);
  });
});
