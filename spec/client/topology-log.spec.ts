/**
 * A client's log of its topology's life (component `topology`, at debug): "Starting topology monitoring", "Starting
 * server monitoring", "Topology description changed", "Stopped server monitoring", "Stopped topology monitoring",
 * as the SDAM logging and monitoring spec and its unified tests (logging-standalone, logging-sharded,
 * logging-loadbalanced) give them, and as the load balancer spec requires them in load-balanced mode. Against the
 * embedded endpoint; the standalone's life also against the server of MONGODB_URI when it is set.
 */
import { expect } from 'chai';
import { connect, type Client, type LogMessage, type TopologyLogMessage } from '../../lib';
import { EmbeddedServer, type CommandHandler } from '../../lib/testing';
import { ONE_SERVER_LIFE } from '../support/topology-log';
import { eventually, startTestEndpoint, stopTestEndpoint, withOptions, type TestEndpoint } from '../support/endpoint';

describe('Client: topology log messages (SDAM logging and monitoring spec, "Log Messages")', function () {
  this.timeout(20_000);
  let servers: EmbeddedServer[] = [];
  let endpoint: TestEndpoint | undefined;
  let client: Client | undefined;

  afterEach(async function () {
    await client?.close();
    client = undefined;
    for (const server of servers.splice(0)) await server.stop();
    if (endpoint !== undefined) await stopTestEndpoint(endpoint);
    endpoint = undefined;
  });

  /** A client of `uri` whose topology component logs at debug (the others off): what it wrote, and what `log$` gave. */
  function logging(uri: string): { c: Client; written: TopologyLogMessage[]; fed: LogMessage[]; completed: () => boolean } {
    const written: TopologyLogMessage[] = [];
    const c = (client = connect(uri, { logging: { componentSeverities: { topology: 'debug' }, path: { write: (m) => void written.push(m as TopologyLogMessage) } } }));
    const fed: LogMessage[] = [];
    let done = false;
    c.log$.subscribe({ next: (m) => fed.push(m), complete: () => (done = true) });
    return { c, written, fed, completed: () => done };
  }

  const lifeOf = (messages: readonly LogMessage[]): TopologyLogMessage[] =>
    messages.filter((m): m is TopologyLogMessage => m.component === 'topology' && !m.fields.message.startsWith('Server heartbeat'));
  const names = (messages: readonly TopologyLogMessage[]): string[] => messages.map((m) => m.fields.message);
  const descriptions = (messages: readonly TopologyLogMessage[]): [unknown, unknown][] =>
    messages.flatMap((m) => (m.fields.message === 'Topology description changed' ? [[JSON.parse(m.fields.previousDescription), JSON.parse(m.fields.newDescription)] as [unknown, unknown]] : []));
  const EMPTY = { type: 'Unknown', servers: [] };

  it('a standalone: the sequence of the unified test logging-standalone ("Topology lifecycle"), in log$ as written, log$ completing after "Stopped topology monitoring"', async function () {
    endpoint = await startTestEndpoint();
    const { c, written, fed, completed } = logging(withOptions(process.env.MONGODB_URI ?? `mongodb://${endpoint.address}/`, 'heartbeatFrequencyMS=500'));
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
    await c.close();
    const life = lifeOf(written);
    expect(lifeOf(fed), 'log$ gives what was written, in order').to.deep.equal(life);
    expect(completed()).to.equal(true);
    expect(written.at(-1)!.fields.message, 'the last topology message').to.equal('Stopped topology monitoring');
    expect(written.every((m) => m.fields.topologyId === c.topologyId && m.level === 'debug' && m.component === 'topology')).to.equal(true);
    const hosts = [...c.pools.keys()];
    // One "Starting server monitoring" and one "Stopped server monitoring" per host, each with its host and port.
    for (const message of ['Starting server monitoring', 'Stopped server monitoring']) {
      expect(life.filter((m) => m.fields.message === message).map((m) => m.toJSON()).map((j) => `${String(j.serverHost)}:${String(j.serverPort)}`), message).to.deep.equal(hosts);
    }
    const changes = descriptions(life);
    expect(changes[0][0], 'the first change starts from Unknown with no server (SDAM "Initial Topology Description")').to.deep.equal(EMPTY);
    expect(changes.at(-1)![1], 'the last one ends there (SDAM "Closing Topology Description")').to.deep.equal(EMPTY);
    for (let i = 1; i < changes.length; i++) expect(changes[i][0], 'each change starts from the last one').to.deep.equal(changes[i - 1][1]);
    if (process.env.MONGODB_URI) return;
    const address = hosts[0];
    expect(names(life)).to.deep.equal(ONE_SERVER_LIFE);
    expect(changes).to.deep.equal([
      [EMPTY, { type: 'Unknown', servers: [{ address, type: 'Unknown' }] }],
      [{ type: 'Unknown', servers: [{ address, type: 'Unknown' }] }, { type: 'Single', servers: [{ address, type: 'Standalone' }] }],
      [{ type: 'Single', servers: [{ address, type: 'Standalone' }] }, EMPTY],
    ]);
    const [host, port] = [address.split(':')[0], Number(address.split(':')[1])];
    expect(life.map((m) => m.toJSON())[2]).to.deep.equal({ t: new Date(life[2].time).toISOString(), c: 'topology', s: 'debug', message: 'Starting server monitoring', topologyId: c.topologyId, serverHost: host, serverPort: port });
    expect(life.map((m) => m.render())).to.deep.equal([
      `Starting monitoring for topology with ID ${c.topologyId}`,
      `Description changed for topology with ID ${c.topologyId}. Previous description: {"type":"Unknown","servers":[]}. New description: {"type":"Unknown","servers":[{"address":"${address}","type":"Unknown"}]}`,
      `Starting monitoring for server ${address} in topology with ID ${c.topologyId}`,
      `Description changed for topology with ID ${c.topologyId}. Previous description: {"type":"Unknown","servers":[{"address":"${address}","type":"Unknown"}]}. New description: {"type":"Single","servers":[{"address":"${address}","type":"Standalone"}]}`,
      `Stopped monitoring for server ${address} in topology with ID ${c.topologyId}`,
      `Description changed for topology with ID ${c.topologyId}. Previous description: {"type":"Single","servers":[{"address":"${address}","type":"Standalone"}]}. New description: {"type":"Unknown","servers":[]}`,
      `Stopped monitoring for topology with ID ${c.topologyId}`,
    ]);
    // "Stopped server monitoring" comes after the monitor's last heartbeat (the check close() ended).
    const all = written.map((m) => m.fields.message);
    expect(all.lastIndexOf('Server heartbeat failed')).to.be.below(all.indexOf('Stopped server monitoring'));
  });

  it('two mongos: the sequence of the unified test logging-sharded (Unknown to Sharded, each router connected, both stopped, back to Unknown)', async function () {
    servers = [await new EmbeddedServer({ mongos: true }).start(), await new EmbeddedServer({ mongos: true }).start()];
    const [a, b] = servers.map((s) => s.address);
    const { c, written } = logging(`mongodb://${a},${b}/?heartbeatFrequencyMS=500`);
    expect(await eventually(() => [...c.pools.values()].every((p) => p.state === 'ready'))).to.equal(true);
    await c.close();
    const life = lifeOf(written);
    expect(names(life).filter((m) => m !== 'Starting server monitoring')).to.deep.equal([
      'Starting topology monitoring',
      'Topology description changed',
      'Topology description changed',
      'Topology description changed',
      'Stopped server monitoring',
      'Stopped server monitoring',
      'Topology description changed',
      'Stopped topology monitoring',
    ]);
    const mongos = (...known: string[]) => [a, b].map((address) => ({ address, type: known.includes(address) ? 'Mongos' : 'Unknown' }));
    const changes = descriptions(life);
    expect(changes[0]).to.deep.equal([EMPTY, { type: 'Unknown', servers: mongos() }]);
    // Either router may answer first.
    const first = (changes[1][1] as { servers: { address: string; type: string }[] }).servers.find((s) => s.type === 'Mongos')!.address;
    expect(changes.slice(1)).to.deep.equal([
      [{ type: 'Unknown', servers: mongos() }, { type: 'Sharded', servers: mongos(first) }],
      [{ type: 'Sharded', servers: mongos(first) }, { type: 'Sharded', servers: mongos(a, b) }],
      [{ type: 'Sharded', servers: mongos(a, b) }, EMPTY],
    ]);
  });

  it('load-balanced: the load balancer spec\'s sequence (Unknown to LoadBalanced with an Unknown server, then a LoadBalancer; at close the server stopped, Unknown, the topology stopped), with no monitor', async function () {
    servers = [await new EmbeddedServer({ loadBalancedServices: 1 }).start()];
    const address = servers[0].address;
    const { c, written, fed } = logging(`mongodb://${address}/?loadBalanced=true`);
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
    await c.close();
    const life = lifeOf(written);
    expect(names(written), 'no heartbeat: no monitor').to.deep.equal(ONE_SERVER_LIFE);
    const server = (type: string) => ({ type: 'LoadBalanced', servers: [{ address, type }] });
    expect(descriptions(life)).to.deep.equal([
      [EMPTY, server('Unknown')],
      [server('Unknown'), server('LoadBalancer')],
      [server('LoadBalancer'), EMPTY],
    ]);
    expect(lifeOf(fed)).to.deep.equal(life);
  });

  it('the description follows the server: Unknown after a failed check or a "node is shutting down" error, known again after the next check', async function () {
    servers = [await new EmbeddedServer().start()];
    const [a] = servers;
    const address = a.address;
    const { c, written } = logging(`mongodb://${address}/?heartbeatFrequencyMS=500&appName=toplog&serverMonitoringMode=poll`);
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
    const standalone = { type: 'Single', servers: [{ address, type: 'Standalone' }] };
    const unknown = { type: 'Single', servers: [{ address, type: 'Unknown' }] };
    // A failing heartbeat (the unified test logging-standalone's "Failing heartbeat").
    a.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['hello', 'isMaster'], closeConnection: true, appName: 'toplog' } });
    expect(await eventually(() => descriptions(lifeOf(written)).length === 4, 3000), 'Unknown, then Standalone again').to.equal(true);
    expect(descriptions(lifeOf(written)).slice(2)).to.deep.equal([
      [standalone, unknown],
      [unknown, standalone],
    ]);
    // "Node is shutting down" on a command: the pool is cleared (the server Unknown) with no heartbeat, until the next check.
    // (Its topologyVersion newer than the one the monitor last saw, as a server that starts shutting down gives it.)
    a.changeTopology();
    a.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['ping'], errorCode: 91 } });
    const checksBefore = written.filter((m) => m.fields.message === 'Server heartbeat started').length;
    expect(await c.command('admin', { ping: 1 }).catch((e: unknown) => e)).to.include({ code: 91 });
    expect(await eventually(() => descriptions(lifeOf(written)).length === 6, 3000)).to.equal(true);
    expect(descriptions(lifeOf(written)).slice(4)).to.deep.equal([
      [standalone, unknown],
      [unknown, standalone],
    ]);
    // The change to Unknown came with the clear, before the check that found the server again had started.
    const order = written.map((m) => m.fields.message);
    const cleared = order.map((m, i) => (m === 'Topology description changed' ? i : -1)).filter((i) => i >= 0)[4];
    expect(order.slice(0, cleared).filter((m) => m === 'Server heartbeat started').length, 'no check between').to.equal(checksBefore);
  });

  it('a replica set member that becomes primary: the description changes with the check alone, the pool staying ready (ReplicaSetNoPrimary, then ReplicaSetWithPrimary)', async function () {
    servers = [await new EmbeddedServer().start()];
    const [a] = servers;
    // Both hellos: the handshake's (the monitor's first check) is the legacy one.
    let primary = false;
    for (const name of ['hello', 'ismaster']) {
      const hello = (a as unknown as { handlers: Map<string, CommandHandler> }).handlers.get(name)!;
      a.handle(name, async (command, info) => ({ ...(await hello(command, info)), setName: 'rs0', isWritablePrimary: primary, ismaster: primary, secondary: !primary, hosts: [a.address] }));
    }
    const { c, written } = logging(`mongodb://${a.address}/?heartbeatFrequencyMS=500&serverMonitoringMode=poll`);
    const address = a.address;
    const poolEvents: string[] = [];
    c.events$.subscribe((e) => e.type.startsWith('ConnectionPool') && poolEvents.push(e.type));
    expect(await eventually(() => descriptions(lifeOf(written)).length === 2)).to.equal(true);
    const secondary = { type: 'ReplicaSetNoPrimary', servers: [{ address, type: 'RSSecondary' }] };
    expect(descriptions(lifeOf(written))[1][1]).to.deep.equal(secondary);
    poolEvents.length = 0;
    primary = true;
    expect(await eventually(() => descriptions(lifeOf(written)).length === 3, 3000)).to.equal(true);
    expect(descriptions(lifeOf(written))[2]).to.deep.equal([secondary, { type: 'ReplicaSetWithPrimary', servers: [{ address, type: 'RSPrimary' }] }]);
    expect(poolEvents, 'the pool neither cleared nor readied').to.deep.equal([]);
  });

  it('directConnection=true: Single from the start, a mongos included (SDAM "Initial TopologyType")', async function () {
    servers = [await new EmbeddedServer({ mongos: true }).start()];
    const address = servers[0].address;
    const { c, written } = logging(`mongodb://${address}/?directConnection=true`);
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
    await c.close();
    expect(descriptions(lifeOf(written))).to.deep.equal([
      [EMPTY, { type: 'Single', servers: [{ address, type: 'Unknown' }] }],
      [{ type: 'Single', servers: [{ address, type: 'Unknown' }] }, { type: 'Single', servers: [{ address, type: 'Mongos' }] }],
      [{ type: 'Single', servers: [{ address, type: 'Mongos' }] }, EMPTY],
    ]);
  });

  it('topology not at debug: no topology message; at any level no pool followed for the topology (its events not built for it)', async function () {
    servers = [await new EmbeddedServer().start()];
    const observers = (c: Client): number[] => [...c.pools.values()].map((p) => (p as unknown as { observers: number }).observers);
    const written: LogMessage[] = [];
    const quiet = (client = connect(`mongodb://${servers[0].address}/`, { logging: { componentSeverities: { topology: 'info', serverSelection: 'debug' }, path: { write: (m) => void written.push(m as LogMessage) } } }));
    expect(await quiet.command('admin', { ping: 1 })).to.include({ ok: 1 });
    expect(observers(quiet), 'nothing subscribed to the pool events').to.deep.equal([0]);
    await quiet.close();
    expect(written.length, 'the selection messages written').to.be.above(0);
    expect(written.filter((m) => m.component === 'topology')).to.deep.equal([]);
    const { c } = logging(`mongodb://${servers[0].address}/`);
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
    expect(observers(c), 'at debug: the description is the topology\'s, not the pool\'s').to.deep.equal([0]);
  });

  it('log$: a subscriber that comes after connect() receives the messages written while the client was made; one that comes after close() none of them', async function () {
    servers = [await new EmbeddedServer().start()];
    const { c, written } = logging(`mongodb://${servers[0].address}/`);
    const late: LogMessage[] = [];
    await Promise.resolve();
    c.log$.subscribe((m) => late.push(m));
    expect(names(lifeOf(late))).to.deep.equal(['Starting topology monitoring', 'Topology description changed', 'Starting server monitoring']);
    expect(lifeOf(late)).to.deep.equal(lifeOf(written).slice(0, 3));
    await c.close();
    const after: LogMessage[] = [];
    let completed = false;
    c.log$.subscribe({ next: (m) => after.push(m), complete: () => (completed = true) });
    expect(after).to.deep.equal([]);
    expect(completed).to.equal(true);
  });
});
