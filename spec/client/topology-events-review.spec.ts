import { expect } from 'chai';
import { Long, ObjectId, type Document } from 'bson';
import { connect, serverDescriptionEquals, topologyDescriptionEquals, type Client, type TopologyDescription, type TopologyEvent } from '../../lib';
import { VirtualClock } from '../../lib/testing';
import { eventLine as line, ScriptedServers, settle } from '../support/scripted-servers';

/**
 * What is wrong with one subscriber's view of a topology's life (its events, then `complete`): TopologyOpening first,
 * TopologyClosed last, each ServerClosed after its ServerOpening, each TopologyDescriptionChanged starting from the
 * description the one before gave (the first from Unknown with no server) and changing it. Empty when nothing.
 */
function lifeDefects(events: readonly TopologyEvent[], completed: boolean): string[] {
  const defects: string[] = [];
  if (events[0]?.type !== 'TopologyOpening') defects.push(`first: ${events[0] === undefined ? 'nothing' : line(events[0])}`);
  const closedAt = events.findIndex((e) => e.type === 'TopologyClosed');
  if (closedAt < 0) defects.push('no TopologyClosed');
  else if (closedAt !== events.length - 1) defects.push(`after TopologyClosed: ${events.slice(closedAt + 1).map(line).join(' | ')}`);
  if (!completed) defects.push('not completed');
  const open = new Set<string>();
  let last: TopologyDescription | undefined;
  for (const e of events) {
    if (e.type === 'ServerOpening') {
      if (open.has(e.address)) defects.push(`opened twice: ${e.address}`);
      open.add(e.address);
    } else if (e.type === 'ServerClosed') {
      if (!open.delete(e.address)) defects.push(`closed, not open: ${e.address}`);
    } else if (e.type === 'ServerDescriptionChanged') {
      // A server's own change comes before the topology's change that shows it.
      const shown = last?.servers.get(e.address);
      if (shown !== undefined && serverDescriptionEquals(shown, e.newDescription) && !serverDescriptionEquals(shown, e.previousDescription)) defects.push(`${line(e)} after the topology's change showed it`);
    } else if (e.type === 'TopologyDescriptionChanged') {
      const from = last === undefined ? 'Unknown{}' : line({ ...e, previousDescription: last, newDescription: last }).split(' -> ')[1];
      const seen = line(e).slice('TopologyDescriptionChanged '.length).split(' -> ')[0];
      if (from !== seen || (last !== undefined && !topologyDescriptionEquals(last, e.previousDescription))) defects.push(`changed from ${seen}, last seen ${from}`);
      if (topologyDescriptionEquals(e.previousDescription, e.newDescription)) defects.push(`a change to an equal description: ${line(e)}`);
      last = e.newDescription;
    }
  }
  if (open.size > 0) defects.push(`never closed: ${[...open].join(', ')}`);
  return defects;
}

const primary = (hosts: string[]): Document => ({ ok: 1, isWritablePrimary: true, setName: 'rs', hosts, maxWireVersion: 21 });

describe('Client.topologyEvents$: what a subscriber that comes late is given', function () {
  const servers = new ScriptedServers();
  let client: Client | undefined;
  beforeEach(() => servers.install());
  afterEach(async () => {
    servers.uninstall();
    await client?.close();
    client = undefined;
  });

  function open(uri: string): Client {
    return (client = connect(`${uri}${uri.includes('?') ? '&' : '?'}serverMonitoringMode=poll`, { scheduler: new VirtualClock() }));
  }

  for (const changed of [false, true]) {
    it(`a subscriber that comes while close() closes the servers (from a ServerClosed${changed ? ', once discovery changed the topology' : ', nothing changed since connect()'}) is given a whole life: the opening and the servers still open, each ServerClosed after its ServerOpening, the last change from the description it saw`, async function () {
      const c = open('mongodb://a:27017,b:27017/');
      await settle();
      if (changed) {
        servers.respond('a:27017', primary(['a:27017', 'b:27017']));
        await settle();
      }
      const late: TopologyEvent[] = [];
      let completed = false;
      let subscribed = false;
      c.topologyEvents$.subscribe((e) => {
        if (subscribed || e.type !== 'ServerClosed') return;
        subscribed = true;
        c.topologyEvents$.subscribe({ next: (x) => late.push(x), complete: () => (completed = true) });
      });
      await c.close();
      await settle();
      expect(subscribed, 'a ServerClosed came').to.equal(true);
      expect(lifeDefects(late, completed), late.map(line).join(' | ')).to.deep.equal([]);
    });
  }

  it('a subscriber that comes once a server check emptied the topology is given no change to an equal description', async function () {
    const c = open('mongodb://a:27017,b:27017/');
    await settle();
    // Two standalones among seeds: each is removed (SDAM, updateUnknownWithStandalone), leaving Unknown with no server.
    servers.respond('a:27017', { ok: 1, isWritablePrimary: true, maxWireVersion: 21 });
    servers.respond('b:27017', { ok: 1, isWritablePrimary: true, maxWireVersion: 21 });
    await settle();
    const late: TopologyEvent[] = [];
    let completed = false;
    c.topologyEvents$.subscribe({ next: (x) => late.push(x), complete: () => (completed = true) });
    await c.close();
    await settle();
    expect(lifeDefects(late, completed), late.map(line).join(' | ')).to.deep.equal([]);
    expect(late.map(line), 'its opening, then the close (no server left)').to.deep.equal(['TopologyOpening', 'TopologyClosed']);
  });

  // Each scenario runs on a client whose first subscriber of topologyEvents$ came at connect().
  const scenarios: { name: string; uri: string; run: (c: Client) => Promise<void> }[] = [
    {
      name: 'discovery (a member added, a seed removed), then a failed check',
      uri: 'mongodb://a:27017,b:27017/',
      run: async () => {
        servers.respond('a:27017', primary(['a:27017', 'c:27017']));
        await settle();
        servers.fail('a:27017', new Error('check failed'));
        await settle();
      },
    },
    {
      name: 'SRV polling (a host added, one removed)',
      uri: 'mongodb://a:27017,b:27017/',
      run: async (c) => {
        (c as unknown as { applySrvHosts: (hosts: string[]) => void }).applySrvHosts(['a:27017', 'd:27017']);
        await settle();
      },
    },
    {
      name: 'a command whose connection fails (the server made Unknown by its pool), then a check',
      uri: 'mongodb://a:27017/',
      run: async (c) => {
        servers.respond('a:27017', { ok: 1, isWritablePrimary: true, maxWireVersion: 21 });
        await settle();
        await c.command('admin', { ping: 1 }).catch(() => undefined);
        await settle();
        servers.respond('a:27017', { ok: 1, isWritablePrimary: true, maxWireVersion: 21 });
        await settle();
      },
    },
    {
      name: 'drain()',
      uri: 'mongodb://a:27017,b:27017/',
      run: async (c) => {
        servers.respond('a:27017', primary(['a:27017', 'b:27017']));
        await settle();
        await c.drain();
      },
    },
  ];
  for (const scenario of scenarios) {
    it(`${scenario.name}, then close(): a subscriber that comes from inside any callback (topologyEvents$, events$, log$) is given a whole life whose live part is the end of every other subscriber's`, async function () {
      let cells = 0;
      const defects: string[] = [];
      for (let k = 0; ; k++) {
        servers.uninstall();
        servers.install();
        const written: Document[] = [];
        const logging = { componentSeverities: { topology: 'debug' }, path: { write: (m: { fields: Document }) => void written.push(m.fields) } } as never;
        const c = (client = connect(`${scenario.uri}?serverMonitoringMode=poll`, { scheduler: new VirtualClock(), logging }));
        const first: TopologyEvent[] = [];
        c.topologyEvents$.subscribe((e) => first.push(e));
        let count = 0;
        let at = '';
        const late: TopologyEvent[] = [];
        let completed = false;
        const maybe = (what: string): void => {
          if (count++ !== k) return;
          at = what;
          c.topologyEvents$.subscribe({ next: (e) => late.push(e), complete: () => (completed = true) });
        };
        await settle();
        c.topologyEvents$.subscribe((e) => maybe(`event ${line(e)}`));
        c.events$.subscribe((e) => maybe(`pool or heartbeat ${e.type}`));
        c.log$.subscribe((m) => maybe(`message ${String((m as unknown as { fields: Document }).fields.message)}`));
        await scenario.run(c);
        await c.close();
        await settle();
        if (at === '') break;
        cells++;
        // A subscriber that came once TopologyClosed was given gets the completion only.
        if (late.length === 0 && first.at(-1)?.type === 'TopologyClosed' && completed) continue;
        const found = lifeDefects(late, completed);
        const shared = late.filter((e) => first.includes(e) && e.type !== 'TopologyOpening');
        if (shared.length > 0) {
          const from = first.indexOf(shared[0]);
          if (first.slice(from).map(line).join(' | ') !== shared.map(line).join(' | ')) found.push(`live part ${shared.map(line).join(' | ')}; first subscriber from there: ${first.slice(from).map(line).join(' | ')}`);
        } else if (first.at(-1) !== late.at(-1)) found.push('not the same TopologyClosed');
        if (found.length > 0) defects.push(`at ${at} (#${k}): ${found.join('; ')} [${late.map(line).join(' | ')}]`);
      }
      expect(cells, 'callbacks').to.be.greaterThan(10);
      expect(defects).to.deep.equal([]);
    });
  }

  it('a subscriber that closes the client from any callback while connections fail (minPoolSize, the server made Unknown by its pool, then checked again): every subscriber of topologyEvents$ is given the same whole life', async function () {
    let cells = 0;
    const defects: string[] = [];
    for (let k = 0; ; k++) {
      servers.uninstall();
      servers.install();
      const clock = new VirtualClock();
      const logging = { componentSeverities: { topology: 'debug' }, path: { write: () => undefined } } as never;
      const c = (client = connect('mongodb://a:27017,b:27017/?serverMonitoringMode=poll&minPoolSize=3', { scheduler: clock, logging }));
      const views: { events: TopologyEvent[]; completed: boolean }[] = [];
      const watch = (): void => {
        const view = { events: [] as TopologyEvent[], completed: false };
        views.push(view);
        c.topologyEvents$.subscribe({ next: (e) => view.events.push(e), complete: () => (view.completed = true) });
      };
      watch();
      let count = 0;
      let at = '';
      let armed = false;
      const maybe = (what: string): void => {
        if (!armed || count++ !== k) return;
        at = what;
        void c.close();
      };
      await settle();
      c.topologyEvents$.subscribe((e) => maybe(`event ${line(e)}`));
      c.events$.subscribe((e) => maybe(`pool or heartbeat ${e.type}`));
      c.log$.subscribe((m) => maybe(`message ${String((m as unknown as { fields: Document }).fields.message)}`));
      watch();
      armed = true;
      servers.respond('a:27017', primary(['a:27017', 'b:27017']));
      servers.respond('b:27017', { ok: 1, secondary: true, setName: 'rs', hosts: ['a:27017', 'b:27017'], maxWireVersion: 21 });
      await settle();
      await clock.advanceAsync(1000);
      await settle();
      servers.respond('a:27017', primary(['a:27017', 'b:27017']));
      servers.respond('b:27017', { ok: 1, secondary: true, setName: 'rs', hosts: ['a:27017', 'b:27017'], maxWireVersion: 21 });
      await clock.advanceAsync(20_000);
      await settle();
      await c.close();
      await settle();
      if (at === '') break;
      cells++;
      const first = views[0].events.map(line).join(' | ');
      for (const [i, view] of views.entries()) {
        const found = lifeDefects(view.events, view.completed);
        if (i > 0 && view.events.map(line).join(' | ') !== first) found.push('another sequence than the first subscriber');
        if (found.length > 0) defects.push(`close() at ${at} (#${k}), subscriber ${i + 1}: ${found.join('; ')} [${view.events.map(line).join(' | ')}]`);
      }
    }
    expect(cells, 'callbacks').to.be.greaterThan(10);
    expect(defects).to.deep.equal([]);
  });

  it('a subscriber that changes a published topologyVersion (its counter replaced, or the counter\'s bits in place), or the heartbeat reply it came from, is refused or changes only its copy: the client still takes the server\'s newer replies', async function () {
    const clock = new VirtualClock();
    const c = (client = connect('mongodb://a:27017/?directConnection=true&serverMonitoringMode=poll', { scheduler: clock }));
    const processId = new ObjectId();
    c.topologyEvents$.subscribe((e) => {
      if (e.type !== 'ServerDescriptionChanged' || e.newDescription.topologyVersion === undefined) return;
      let replaced = false;
      try {
        (e.newDescription.topologyVersion as { counter: Long }).counter = Long.fromNumber(1_000_000);
      } catch (error) {
        replaced = !(error instanceof TypeError);
      }
      expect(replaced, 'the counter\'s replacement refused').to.equal(false);
      try {
        (e.newDescription.topologyVersion.counter as { low: number }).low = 1_000_000;
      } catch {
        // Refused: what the test wants.
      }
    });
    c.events$.subscribe((e) => {
      if (e.type !== 'ServerHeartbeatSucceeded') return;
      const counter = (e.reply.topologyVersion as Document | undefined)?.counter as { low: number } | undefined;
      try {
        if (counter !== undefined) counter.low = 1_000_000;
      } catch {
        // Refused.
      }
    });
    await settle();
    servers.respond('a:27017', { ok: 1, isWritablePrimary: true, setName: 'rs', maxWireVersion: 21, topologyVersion: { processId, counter: Long.fromNumber(1) } });
    await settle();
    clock.advance(10_000);
    servers.respond('a:27017', { ok: 1, isWritablePrimary: false, secondary: true, setName: 'rs', maxWireVersion: 21, topologyVersion: { processId, counter: Long.fromNumber(2) } });
    await settle();
    expect(c.topologyDescription.servers.get('a:27017')?.type, 'the newer reply taken').to.equal('RSSecondary');
  });
});
