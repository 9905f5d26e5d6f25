/**
 * A client's log of its topology's life (component `topology`, at debug) under re-entrant use: subscribers of `log$`
 * and log destinations that close, drain or use the client from inside a topology message, a close before the
 * monitors start, SRV changes and a seedlist discovery that a subscriber ends. Whatever happens, the log stays well
 * formed: "Starting topology monitoring" first, "Stopped topology monitoring" last and once, each "Starting server
 * monitoring" followed by its "Stopped server monitoring" (and no server stopped that was not started), each change of
 * the description starting from the last one, from and back to Unknown with no server, and `log$` completing.
 *
 * Source: SDAM logging and monitoring spec, "Event Order and Concurrency", "Initial Topology Description", "Closing
 * Topology Description", the events' table (TopologyOpening first, TopologyClosed last); load balancer spec, "Monitoring".
 */
import { expect } from 'chai';
import * as dns from 'node:dns';
import { connect, type Client, type LogMessage, type TopologyLogMessage } from '../../lib';
import { EmbeddedServer, type CommandHandler } from '../../lib/testing';
import { DnsResponder } from '../support/dns-responder';
import { eventually } from '../support/endpoint';
import { ONE_SERVER_LIFE } from '../support/topology-log';

const EMPTY = JSON.stringify({ type: 'Unknown', servers: [] });
const isLife = (m: LogMessage): m is TopologyLogMessage => m.component === 'topology' && !String((m.fields as { message: string }).message).startsWith('Server heartbeat');

/**
 * The defects of a topology log (all its `topology` messages, in order); none when it is well formed. `late`: the log
 * of a subscriber that came after the first changes (the opening replayed, then what came after it subscribed), whose
 * changes need not follow each other.
 */
function defects(messages: readonly LogMessage[], { late = false } = {}): string[] {
  const found: string[] = [];
  const topology = messages.filter((m): m is TopologyLogMessage => m.component === 'topology');
  const names = topology.map((m) => m.fields.message);
  if (names[0] !== 'Starting topology monitoring') found.push(`first: ${names[0]}`);
  if (names.filter((n) => n === 'Starting topology monitoring').length !== 1) found.push('"Starting topology monitoring" not once');
  if (names.filter((n) => n === 'Stopped topology monitoring').length !== 1) found.push(`"Stopped topology monitoring" ${names.filter((n) => n === 'Stopped topology monitoring').length} times`);
  if (names.at(-1) !== 'Stopped topology monitoring') found.push(`last: ${names.at(-1)}`);
  const monitored = new Set<string>();
  let description = EMPTY;
  for (const m of topology) {
    const f = m.fields as { message: string; serverHost?: string; serverPort?: number; previousDescription?: string; newDescription?: string };
    const server = `${f.serverHost}:${f.serverPort}`;
    if (f.message === 'Starting server monitoring') {
      if (monitored.has(server)) found.push(`${server} started twice`);
      monitored.add(server);
    } else if (f.message === 'Stopped server monitoring') {
      if (!monitored.delete(server)) found.push(`${server} stopped, not started`);
    } else if (f.message.startsWith('Server heartbeat')) {
      if (!monitored.has(server)) found.push(`${f.message} for ${server}, not monitored`);
    } else if (f.message === 'Topology description changed') {
      if (f.previousDescription !== description && !late) found.push(`a change from ${f.previousDescription}, not from ${description}`);
      description = f.newDescription!;
    }
  }
  if (monitored.size > 0) found.push(`never stopped: ${[...monitored].join(', ')}`);
  if (description !== EMPTY) found.push(`ends at ${description}`);
  return found;
}

describe('Client: topology log messages under re-entrant use', function () {
  this.timeout(20_000);
  const servers: EmbeddedServer[] = [];
  const clients: Client[] = [];

  afterEach(async function () {
    await Promise.all(clients.splice(0).map((c) => c.close()));
    for (const server of servers.splice(0)) await server.stop();
  });

  /** A client of `uri` whose topology component logs at debug: what its destination got, what `log$` gave, whether it completed. */
  function logging(uri: string, onWrite?: (m: LogMessage, c: Client) => void): { c: Client; written: LogMessage[]; fed: LogMessage[]; completed: () => boolean } {
    const written: LogMessage[] = [];
    let c: Client | undefined;
    c = connect(uri, {
      logging: {
        componentSeverities: { topology: 'debug' },
        path: {
          write: (m) => {
            written.push(m as LogMessage);
            if (c !== undefined) onWrite?.(m as LogMessage, c);
          },
        },
      },
    });
    clients.push(c);
    const fed: LogMessage[] = [];
    let done = false;
    c.log$.subscribe({ next: (m) => fed.push(m), complete: () => (done = true) });
    return { c, written, fed, completed: () => done };
  }

  it('close() right after connect(), before the monitors start: each server started and stopped, the description back to Unknown, the topology stopped last', async function () {
    const { c, written, fed, completed } = logging('mongodb://127.0.0.1:1,127.0.0.1:2/');
    await c.close();
    expect(defects(written)).to.deep.equal([]);
    expect(fed.filter(isLife)).to.deep.equal(written.filter(isLife));
    expect(completed()).to.equal(true);
  });

  it('SRV polling: a subscriber of log$ that closes the client as a new server is described closes it with a well-formed log (no server started after the topology stopped)', async function () {
    servers.push(await new EmbeddedServer().start());
    const a = servers[0].address;
    let closeAt: string | undefined;
    const { c, written, fed, completed } = logging(`mongodb://${a}/?heartbeatFrequencyMS=500`);
    c.log$.subscribe((m) => {
      if (closeAt !== undefined && m.component === 'topology' && m.fields.message === 'Topology description changed' && m.fields.newDescription.includes(closeAt)) void c.close();
    });
    expect(await eventually(() => [...c.pools.values()].every((p) => p.state === 'ready'))).to.equal(true);
    closeAt = '127.0.0.1:3';
    // What a rescan that found two more hosts applies.
    (c as unknown as { applySrvHosts(hosts: readonly string[]): void }).applySrvHosts([a, '127.0.0.1:3', '127.0.0.1:4']);
    expect(await eventually(completed), 'log$ completes').to.equal(true);
    expect(defects(written)).to.deep.equal([]);
    expect(fed.filter(isLife)).to.deep.equal(written.filter(isLife));
  });

  it('SRV polling: a log destination that closes the client at a new server\'s "Starting server monitoring" ends the log there (that server stopped, none started after)', async function () {
    servers.push(await new EmbeddedServer().start());
    const a = servers[0].address;
    let armed = false;
    const { c, written, completed } = logging(`mongodb://${a}/?heartbeatFrequencyMS=500`, (m, client) => {
      if (armed && m.component === 'topology' && m.fields.message === 'Starting server monitoring') void client.close();
    });
    expect(await eventually(() => [...c.pools.values()].every((p) => p.state === 'ready'))).to.equal(true);
    armed = true;
    (c as unknown as { applySrvHosts(hosts: readonly string[]): void }).applySrvHosts([a, '127.0.0.1:3', '127.0.0.1:4']);
    expect(await eventually(completed), 'log$ completes').to.equal(true);
    expect(defects(written)).to.deep.equal([]);
  });

  it('a subscriber of log$ that closes the client at the first message it is given ("Starting topology monitoring", replayed as it subscribes) still receives the rest of the log, "Stopped topology monitoring" last, then completes', async function () {
    servers.push(await new EmbeddedServer().start());
    const { c, written } = logging(`mongodb://${servers[0].address}/`);
    const mine: LogMessage[] = [];
    let completed = false;
    c.log$.subscribe({
      next: (m) => {
        mine.push(m);
        if (m.component === 'topology' && m.fields.message === 'Starting topology monitoring') void c.close();
      },
      complete: () => (completed = true),
    });
    expect(await eventually(() => completed), 'log$ completes').to.equal(true);
    expect(defects(written)).to.deep.equal([]);
    expect(defects(mine), 'log$ gives the whole log').to.deep.equal([]);
    expect(mine.filter(isLife)).to.deep.equal(written.filter(isLife));
  });

  it('a subscriber of log$ that sends a command, drains and subscribes again from inside topology messages: the command answered, the log well formed in each subscription, each completing', async function () {
    servers.push(await new EmbeddedServer().start());
    const { c, written, fed, completed } = logging(`mongodb://${servers[0].address}/?heartbeatFrequencyMS=500`);
    let answer: Promise<unknown> | undefined;
    let drained: Promise<void> | undefined;
    const inner: LogMessage[] = [];
    let innerCompleted = false;
    let answered = false;
    c.log$.subscribe((m) => {
      if (m.component !== 'topology') return;
      if (answer === undefined && m.fields.message === 'Topology description changed' && m.fields.newDescription.includes('Standalone')) {
        answer = c.command('admin', { ping: 1 }).finally(() => (answered = true));
        c.log$.subscribe({ next: (n) => inner.push(n), complete: () => (innerCompleted = true) });
      }
      // Drained from the next heartbeat's message once the command is answered.
      if (answered && drained === undefined && m.fields.message === 'Server heartbeat started') drained = c.drain();
    });
    expect(await eventually(() => drained !== undefined)).to.equal(true);
    expect(await answer).to.include({ ok: 1 });
    await drained;
    expect(await eventually(() => completed() && innerCompleted), 'both subscriptions complete').to.equal(true);
    expect(defects(written)).to.deep.equal([]);
    expect(fed.filter(isLife)).to.deep.equal(written.filter(isLife));
    expect(defects(inner, { late: true }), 'the inner subscription: the opening replayed, then the rest').to.deep.equal([]);
  });

  it('server fields: an IPv6 host without brackets, a Unix domain socket with no serverPort key, user information and URI options in no message', async function () {
    const { c, written } = logging('mongodb://us%3Aer:s3cr3tpw@[::1]:1,%2Ftmp%2Frxcmap-none.sock/?authSource=adm1nDb&appName=secretApp');
    await c.close();
    expect(defects(written)).to.deep.equal([]);
    const started = written.filter(isLife).filter((m) => m.fields.message === 'Starting server monitoring').map((m) => m.toJSON());
    expect(started.map((j) => [j.serverHost, j.serverPort])).to.deep.equal([
      ['::1', 1],
      ['/tmp/rxcmap-none.sock', undefined],
    ]);
    expect(Object.keys(started[1])).not.to.include('serverPort');
    const text = written.filter(isLife).map((m) => `${JSON.stringify(m.toJSON())} ${m.render()}`).join('\n');
    for (const secret of ['s3cr3tpw', 'us:er', 'adm1nDb', 'secretApp']) expect(text).not.to.include(secret);
    expect(written.filter(isLife).map((m) => m.render())[2]).to.equal(`Starting monitoring for server [::1]:1 in topology with ID ${c.topologyId}`);
  });

  it('a log destination that closes the client at its first "Server heartbeat succeeded": that heartbeat changes nothing, the server stopped after its last heartbeat, the log well formed', async function () {
    servers.push(await new EmbeddedServer().start());
    const { written, fed, completed } = logging(`mongodb://${servers[0].address}/`, (m, client) => {
      if (m.component === 'topology' && m.fields.message === 'Server heartbeat succeeded') void client.close();
    });
    expect(await eventually(completed), 'log$ completes').to.equal(true);
    expect(defects(written)).to.deep.equal([]);
    expect(fed.filter((m) => m.component === 'topology')).to.deep.equal(written.filter((m) => m.component === 'topology'));
    const names = written.map((m) => (m as TopologyLogMessage).fields.message);
    expect(names.slice(names.indexOf('Server heartbeat succeeded'))).to.deep.equal(['Server heartbeat succeeded', 'Stopped server monitoring', 'Topology description changed', 'Stopped topology monitoring']);
  });

  it('a command\'s network error clears the pool: the server Unknown at once, with no heartbeat, then known again at the next check', async function () {
    servers.push(await new EmbeddedServer().start());
    const [a] = servers;
    const { c, written } = logging(`mongodb://${a.address}/?heartbeatFrequencyMS=500&appName=neterr&serverMonitoringMode=poll`);
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
    a.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['ping'], closeConnection: true, appName: 'neterr' } });
    const before = written.length;
    expect(await c.command('admin', { ping: 1 }).catch((e: unknown) => e)).to.be.instanceOf(Error);
    const changes = () => written.slice(before).filter((m) => m.component === 'topology' && m.fields.message === 'Topology description changed').map((m) => JSON.parse((m as TopologyLogMessage<{ message: 'Topology description changed'; topologyId: string; previousDescription: string; newDescription: string }>).fields.newDescription) as { servers: { type: string }[] });
    expect(await eventually(() => changes().length >= 2, 3000)).to.equal(true);
    expect(changes().slice(0, 2).map((d) => d.servers[0].type)).to.deep.equal(['Unknown', 'Standalone']);
    const first = written.findIndex((m, i) => i >= before && m.component === 'topology' && m.fields.message === 'Topology description changed');
    expect(written.slice(before, first).filter((m) => m.component === 'topology' && m.fields.message === 'Server heartbeat started'), 'no check before the change to Unknown').to.deep.equal([]);
    await c.close();
    expect(defects(written)).to.deep.equal([]);
  });

  it('maxDocumentLength: each description truncated to it (with "..."), the untruncated ones compared', async function () {
    const written: LogMessage[] = [];
    const c = connect('mongodb://127.0.0.1:1,127.0.0.1:2/', { logging: { componentSeverities: { topology: 'debug' }, maxDocumentLength: 40, path: { write: (m) => void written.push(m as LogMessage) } } });
    clients.push(c);
    await c.close();
    const changes = written.filter((m): m is TopologyLogMessage => m.component === 'topology' && m.fields.message === 'Topology description changed').map((m) => m.fields as { previousDescription: string; newDescription: string });
    expect(changes.map((f) => [f.previousDescription, f.newDescription])).to.deep.equal([
      [EMPTY, `${`{"type":"Unknown","servers":[{"address":"127.0.0.1:1"`.slice(0, 40)}...`],
      [`${`{"type":"Unknown","servers":[{"address":"127.0.0.1:1"`.slice(0, 40)}...`, EMPTY],
    ]);
  });

  it('close() twice, drain() right after connect(), a load-balanced client closed at once: each log well formed, the load balancer\'s sequence whole', async function () {
    const twice = logging('mongodb://127.0.0.1:1/');
    await Promise.all([twice.c.close(), twice.c.close()]);
    await twice.c.close();
    const drained = logging('mongodb://127.0.0.1:1,127.0.0.1:2/');
    await drained.c.drain();
    const balanced = logging('mongodb://127.0.0.1:1/?loadBalanced=true');
    await balanced.c.close();
    for (const { written, completed } of [twice, drained, balanced]) {
      expect(defects(written)).to.deep.equal([]);
      expect(completed()).to.equal(true);
    }
    expect(balanced.written.map((m) => (m as TopologyLogMessage).fields.message)).to.deep.equal(ONE_SERVER_LIFE);
  });

  it('a log destination that closes the client at the change its pool\'s ConnectionPoolReady writes (Standalone), and one that closes it at an SRV-removed server\'s "Stopped server monitoring": each log well formed', async function () {
    servers.push(await new EmbeddedServer().start(), await new EmbeddedServer().start());
    const [a, b] = servers.map((server) => server.address);
    const ready = logging(`mongodb://${a}/`, (m, client) => {
      if (m.component === 'topology' && m.fields.message === 'Topology description changed' && m.fields.newDescription.includes('Standalone')) void client.close();
    });
    expect(await eventually(ready.completed), 'log$ completes').to.equal(true);
    expect(defects(ready.written)).to.deep.equal([]);
    expect(ready.fed.filter(isLife)).to.deep.equal(ready.written.filter(isLife));

    let armed = false;
    const removed = logging(`mongodb://${a}/?heartbeatFrequencyMS=500`, (m, client) => {
      if (armed && m.component === 'topology' && m.fields.message === 'Stopped server monitoring') void client.close();
    });
    expect(await eventually(() => [...removed.c.pools.values()].every((p) => p.state === 'ready'))).to.equal(true);
    armed = true;
    (removed.c as unknown as { applySrvHosts(hosts: readonly string[]): void }).applySrvHosts([b]);
    expect(await eventually(removed.completed), 'log$ completes').to.equal(true);
    expect(defects(removed.written)).to.deep.equal([]);
    expect(removed.c.pools.size, 'the new host not opened').to.equal(0);
  });

  it('drain(): the pools it closes leave the description as it was (load-balanced: the load balancer spec\'s sequence, no other change; a standalone stays Standalone until it is stopped)', async function () {
    servers.push(await new EmbeddedServer({ loadBalancedServices: 1 }).start(), await new EmbeddedServer().start());
    const [lb, standalone] = servers.map((server) => server.address);
    const balanced = logging(`mongodb://${lb}/?loadBalanced=true`);
    expect(await balanced.c.command('admin', { ping: 1 })).to.include({ ok: 1 });
    await balanced.c.drain();
    const described = (written: LogMessage[]) =>
      written.filter((m): m is TopologyLogMessage => m.component === 'topology' && !m.fields.message.startsWith('Server heartbeat')).map((m) => (m.fields.message === 'Topology description changed' ? m.fields.newDescription : m.fields.message));
    const server = (address: string, topology: string, type: string) => JSON.stringify({ type: topology, servers: [{ address, type }] });
    expect(described(balanced.written)).to.deep.equal([
      'Starting topology monitoring',
      server(lb, 'LoadBalanced', 'Unknown'),
      'Starting server monitoring',
      server(lb, 'LoadBalanced', 'LoadBalancer'),
      'Stopped server monitoring',
      EMPTY,
      'Stopped topology monitoring',
    ]);
    const single = logging(`mongodb://${standalone}/`);
    expect(await single.c.command('admin', { ping: 1 })).to.include({ ok: 1 });
    await single.c.drain();
    expect(described(single.written)).to.deep.equal([
      'Starting topology monitoring',
      server(standalone, 'Unknown', 'Unknown'),
      'Starting server monitoring',
      server(standalone, 'Single', 'Standalone'),
      'Stopped server monitoring',
      EMPTY,
      'Stopped topology monitoring',
    ]);
    expect(defects(single.written)).to.deep.equal([]);
  });

  it('a replica set of three (replicaSet=rs0): the sequence of the unified test logging-replicaset ("Topology lifecycle": four changes before close, one per member answering)', async function () {
    for (let i = 0; i < 3; i++) servers.push(await new EmbeddedServer().start());
    servers.forEach((server, i) => {
      for (const name of ['hello', 'ismaster']) {
        const hello = (server as unknown as { handlers: Map<string, CommandHandler> }).handlers.get(name)!;
        server.handle(name, async (command, info) => ({ ...(await hello(command, info)), setName: 'rs0', isWritablePrimary: i === 0, ismaster: i === 0, secondary: i !== 0, hosts: servers.map((s) => s.address) }));
      }
    });
    const addresses = servers.map((server) => server.address);
    const { c, written } = logging(`mongodb://${addresses.join(',')}/?replicaSet=rs0`);
    const changes = () => written.filter((m): m is TopologyLogMessage => m.component === 'topology' && m.fields.message === 'Topology description changed');
    expect(await eventually(() => changes().length === 4)).to.equal(true);
    await c.close();
    expect(written.filter(isLife).map((m) => m.fields.message)).to.deep.equal([
      'Starting topology monitoring',
      'Topology description changed',
      'Starting server monitoring',
      'Starting server monitoring',
      'Starting server monitoring',
      'Topology description changed',
      'Topology description changed',
      'Topology description changed',
      'Stopped server monitoring',
      'Stopped server monitoring',
      'Stopped server monitoring',
      'Topology description changed',
      'Stopped topology monitoring',
    ]);
    const described = changes().map((m) => JSON.parse((m.fields as { newDescription: string }).newDescription) as unknown);
    expect(described[0]).to.deep.equal({ type: 'ReplicaSetNoPrimary', servers: addresses.map((address) => ({ address, type: 'Unknown' })) });
    expect(described[3]).to.deep.equal({ type: 'ReplicaSetWithPrimary', servers: addresses.map((address, i) => ({ address, type: i === 0 ? 'RSPrimary' : 'RSSecondary' })) });
    expect(defects(written)).to.deep.equal([]);
  });

  describe('mongodb+srv', function () {
    let responder: DnsResponder;
    let dnsServers: string[];
    before(async function () {
      dnsServers = dns.getServers();
      responder = await new DnsResponder({
        srv: {
          '_mongodb._tcp.test1.test.build.10gen.cc': [{ target: 'localhost.test.build.10gen.cc', port: 1 }, { target: 'localhost.test.build.10gen.cc', port: 2 }],
          '_mongodb._tcp.test3.test.build.10gen.cc': [{ target: 'localhost.test.build.10gen.cc', port: 1 }],
        },
        txt: { 'test3.test.build.10gen.cc': [['loadBalanced=true']] },
      }).start();
      dns.setServers([responder.server]);
    });
    after(async function () {
      dns.setServers(dnsServers);
      await responder.close();
    });

    const closedAtFirstDescription: [string, string, unknown][] = [
      ['a subscriber of log$ that closes the client as the discovered hosts are first described: no server started after the topology stopped, each started one stopped', 'test1', undefined],
      ['load-balanced (TXT record): a subscriber of log$ that closes the client as the load balancer is first described (Unknown): no server stopped that was not started', 'test3', { type: 'LoadBalanced', servers: [{ address: 'localhost.test.build.10gen.cc:1', type: 'Unknown' }] }],
    ];
    for (const [title, name, first] of closedAtFirstDescription) {
      it(title, async function () {
        const { c, written, fed, completed } = logging(`mongodb+srv://${name}.test.build.10gen.cc/?tls=false`);
        c.log$.subscribe((m) => {
          if (m.component === 'topology' && m.fields.message === 'Topology description changed' && m.fields.newDescription.includes('localhost')) void c.close();
        });
        await (c as unknown as { discover(): Promise<void> }).discover().catch(() => undefined);
        expect(await eventually(completed), 'log$ completes').to.equal(true);
        expect(defects(written)).to.deep.equal([]);
        expect(fed.filter(isLife)).to.deep.equal(written.filter(isLife));
        if (first !== undefined) expect(JSON.parse((written[1] as TopologyLogMessage<{ message: 'Topology description changed'; topologyId: string; previousDescription: string; newDescription: string }>).fields.newDescription)).to.deep.equal(first);
      });
    }

    it('close() before the discovery ends: the topology started and stopped, no server', async function () {
      const { c, written, completed } = logging('mongodb+srv://test1.test.build.10gen.cc/?tls=false');
      await c.close();
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(completed()).to.equal(true);
      expect(c.pools.size, 'no host opened after close()').to.equal(0);
      expect(defects(written)).to.deep.equal([]);
      expect(written.filter(isLife).map((m) => m.fields.message)).to.deep.equal(['Starting topology monitoring', 'Stopped topology monitoring']);
    });
  });
});

describe('Client: the description a selection message gives once the client closed', function () {
  this.timeout(20_000);
  let server: EmbeddedServer | undefined;
  let client: Client | undefined;

  afterEach(async function () {
    await client?.close();
    client = undefined;
    await server?.stop();
    server = undefined;
  });

  it('a log destination that closes the client at a command\'s "Server selection started": its "Server selection failed" describes the closed topology (Unknown, no server), not the server as it was while open', async function () {
    server = await new EmbeddedServer().start();
    const address = server.address;
    let closeAtNextSelection = false;
    const written: LogMessage[] = [];
    // Polled: at close() the monitor sleeps between checks, so no failed check forgets the server's type first.
    const c = (client = connect(`mongodb://${address}/?serverMonitoringMode=poll`, {
      logging: {
        componentSeverities: { topology: 'debug', serverSelection: 'debug' },
        path: {
          write: (m) => {
            written.push(m as LogMessage);
            if (closeAtNextSelection && (m as LogMessage).fields.message === 'Server selection started') {
              closeAtNextSelection = false;
              void c.close();
            }
          },
        },
      },
    }));
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
    closeAtNextSelection = true;
    const outcome = await c.command('admin', { ping: 1 }).catch((e: unknown) => e);
    expect(outcome).to.have.property('name', 'ClientClosedError');
    // The first command's selection may wait for the first check; the second's is the last two messages.
    const selections = written.filter((m) => m.component === 'serverSelection').map((m) => m.fields as { message: string; topologyDescription: string }).slice(-2);
    expect(selections.map((f) => f.message)).to.deep.equal(['Server selection started', 'Server selection failed']);
    expect(JSON.parse(selections[0].topologyDescription), 'as the close began').to.deep.equal({ type: 'Single', servers: [{ address, type: 'Standalone' }] });
    expect(JSON.parse(selections[1].topologyDescription), 'once closed').to.deep.equal({ type: 'Unknown', servers: [] });
  });
});

describe('Client: the topology log of a connect() that throws as it opens its servers', function () {
  it('a monitor refusing the second host: the first host, made and closed again, is in no message (no description names a server whose monitoring never started), and the log ends with "Stopped topology monitoring"', function () {
    // A Monitor that refuses one address only: the options every host shares are checked before any is opened, so a
    // refusal after the first host is made is otherwise out of reach.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const monitors = require('../../lib/monitor/monitor') as { Monitor: new (options: { address: string }) => unknown };
    const Real = monitors.Monitor;
    monitors.Monitor = class extends (Real as new (options: { address: string }) => object) {
      constructor(options: { address: string }) {
        if (options.address === '127.0.0.1:2') throw new Error('refused');
        super(options);
      }
    };
    const written: LogMessage[] = [];
    try {
      expect(() => connect('mongodb://127.0.0.1:1,127.0.0.1:2/', { logging: { componentSeverities: { topology: 'debug' }, path: { write: (m) => void written.push(m as LogMessage) } } })).to.throw('refused');
    } finally {
      monitors.Monitor = Real;
    }
    expect(written.map((m) => m.fields.message)).to.deep.equal(['Starting topology monitoring', 'Stopped topology monitoring']);
  });
});

describe('Client: the description the selection messages give while the client drains', function () {
  this.timeout(20_000);

  it('is the same whether or not the topology component logs at debug: the drained server as it was while open', async function () {
    const server = await new EmbeddedServer().start();
    try {
      const seen: string[][] = [];
      for (const topology of ['debug', 'off'] as const) {
        const written: LogMessage[] = [];
        const c = connect(`mongodb://${server.address}/`, { logging: { componentSeverities: { topology, serverSelection: 'debug' }, path: { write: (m) => void written.push(m as LogMessage) } } });
        expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
        const drained = c.drain();
        const refused = await c.command('admin', { ping: 1 }).catch((e: unknown) => e);
        await drained;
        expect(refused).to.have.property('name', 'PoolClosedError');
        // The refused command's selection: its start and its failure.
        seen.push(written.filter((m) => m.component === 'serverSelection').slice(-2).map((m) => (m.fields as { topologyDescription: string }).topologyDescription));
      }
      const standalone = JSON.stringify({ type: 'Single', servers: [{ address: server.address, type: 'Standalone' }] });
      expect(seen[0], 'topology at debug').to.deep.equal([standalone, standalone]);
      expect(seen[1], 'topology off').to.deep.equal(seen[0]);
    } finally {
      await server.stop();
    }
  });
});
