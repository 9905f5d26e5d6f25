/**
 * SRV polling (mongodb+srv://): the spec's prose tests that apply to rxcmap, through Node's real resolver against a
 * local DNS responder, with mongos endpoints (EmbeddedServer with `mongos: true`) reached through a SOCKS5 proxy that
 * sends each SRV target's port to its endpoint. Rescans run on a VirtualClock: 60 virtual seconds are a rescan.
 *
 * Source: Polling SRV Records for mongos Discovery spec and its tests (tests/README.md, "Prose Tests").
 */
import { expect } from 'chai';
import type { Document } from 'bson';
import * as dns from 'node:dns';
import { ClientClosedError, connect, PoolClosedError, type Client, type TopologyLogMessage } from '../../lib';
import { MIN_RESCAN_SRV_INTERVAL_MS, rescannedHosts, rescanSRVIntervalMS, SrvPoller } from '../../lib/client/srv-poller';
import { querySrvHosts } from '../../lib/client/srv';
import { clientTopologyType, type ClientTopologyType, type TopologyType } from '../../lib/client/topology-type';
import { serverDescriptionOf, Topology } from '../../lib/client/topology-update';
import { parseConnectionString } from '../../lib/connection-string';
import { EmbeddedServer, VirtualClock } from '../../lib/testing';
import { DnsResponder, type Zone } from '../support/dns-responder';
import { eventually } from '../support/endpoint';
import { startSocks5Proxy, type Socks5Proxy } from '../support/socks5-proxy';

const L = 'localhost.test.build.10gen.cc';
const TEST1 = '_mongodb._tcp.test1.test.build.10gen.cc';
const records = (...ports: number[]) => ports.map((port) => ({ target: L, port }));
/** The test1, test3 and test22 records of the tests' README, "Configuring the Test Environment". */
const ZONE: Zone = {
  srv: {
    [TEST1]: records(27017, 27018),
    '_mongodb._tcp.test3.test.build.10gen.cc': records(27017),
    '_customname._tcp.test22.test.build.10gen.cc': records(27017),
  },
};
const host = (port: number): string => `${L}:${port}`;
const sorted = (hosts: Iterable<string>): string[] => [...hosts].sort();
/** The TopologyType, as SRV polling reads it, of a client of one seed whose TopologyType is `type` after the seed's check gave `reply`. */
const topologyTypeAfter = (type: TopologyType, reply: Document): ClientTopologyType => {
  const description = new Topology({ seeds: ['a:27017'], type });
  description.update('a:27017', serverDescriptionOf({ ok: 1, ...reply }));
  return clientTopologyType(description.type);
};

describe('SRV polling (Polling SRV Records for mongos Discovery)', function () {
  this.timeout(10_000);
  let responder: DnsResponder;
  let dnsServers: string[];
  let proxy: Socks5Proxy;
  /** The mongos of ports 27017 to 27020, and a standalone for port 27030. */
  const servers = new Map<number, EmbeddedServer>();
  let clock: VirtualClock;
  const clients: Client[] = [];

  before(async function () {
    for (const port of [27017, 27018, 27019, 27020]) servers.set(port, await new EmbeddedServer({ mongos: true }).start());
    servers.set(27030, await new EmbeddedServer().start());
    proxy = await startSocks5Proxy({
      map: (_host, port) => {
        const server = servers.get(port);
        return server === undefined ? undefined : { host: '127.0.0.1', port: Number(server.address.split(':')[1]) };
      },
    });
    dnsServers = dns.getServers();
    responder = await new DnsResponder(ZONE).start();
    dns.setServers([responder.server]);
  });
  afterEach(async function () {
    await Promise.all(clients.splice(0).map((c) => c.close()));
    responder.setZone(ZONE);
    responder.silent = false;
    responder.questions.length = 0;
  });
  after(async function () {
    dns.setServers(dnsServers);
    await responder.close();
    await proxy.close();
    for (const server of servers.values()) await server.stop();
  });

  const srvQuestions = (): number => responder.questions.filter((q) => q.startsWith('SRV')).length;
  const poller = (client: Client): SrvPoller | undefined => client['srv']?.poller;
  /**
   * Whether a rescan is under way: its SRV query asked and not yet answered. A rescan starts in the timer the clock
   * runs, so right after `clock.advance()` this says whether the time moved started one, before its question has
   * reached the DNS responder.
   */
  const rescanning = (client: Client): boolean => poller(client)?.['lookup'] !== undefined;

  /** A client of `uri`'s options on the VirtualClock, its hosts discovered; `sharded`: once a monitor saw a mongos. */
  async function open(query: string, options: { sharded?: boolean; name?: string; topology?: TopologyLogMessage[] } = {}): Promise<Client> {
    clock = new VirtualClock();
    const warnings: string[] = [];
    const client = connect(`mongodb+srv://${options.name ?? 'test1'}.test.build.10gen.cc/?tls=false&serverMonitoringMode=poll&proxyHost=127.0.0.1&proxyPort=${proxy.port}${query}`, {
      scheduler: clock,
      logging: {
        componentSeverities: { client: 'warn', connection: 'debug', topology: options.topology === undefined ? 'off' : 'debug' },
        path: {
          write: (m: { component: string; fields: { message?: unknown } }) => {
            if (m.component === 'client') warnings.push(String(m.fields.message));
            if (m.component === 'topology' && !String(m.fields.message).startsWith('Server heartbeat')) options.topology?.push(m as TopologyLogMessage);
          },
        },
      } as never,
    });
    (client as unknown as { logged: string[] }).logged = warnings;
    clients.push(client);
    await client['discover']();
    if (options.sharded !== false) expect(await eventually(() => client['topologyType'] === 'Sharded'), 'a mongos seen').to.equal(true);
    return client;
  }
  const logged = (client: Client): string[] => (client as unknown as { logged: string[] }).logged;

  /** Moves the clock `ms` and waits for the rescan that comes then to end (one SRV question more, answered). */
  async function rescanAfter(client: Client, ms = MIN_RESCAN_SRV_INTERVAL_MS): Promise<void> {
    const asked = srvQuestions();
    clock.advance(ms);
    expect(await eventually(() => srvQuestions() > asked), 'an SRV question').to.equal(true);
    expect(await eventually(() => poller(client)?.['lookup'] === undefined), 'its answer taken').to.equal(true);
  }

  describe('changing DNS records with test1.test.build.10gen.cc', function () {
    it('1. addition of a new DNS record: its host is added (pool and monitor, events to a subscriber already there)', async function () {
      const client = await open('');
      const events: string[] = [];
      client.events$.subscribe((e) => events.push(`${e.type} ${e.address}`));
      events.length = 0; // each pool's ConnectionPoolCreated, given to every subscriber first
      const messages: string[] = [];
      client.log$.subscribe((m) => messages.push(`${String(m.fields.message)} ${String((m.fields as { serverPort?: number }).serverPort)}`));
      responder.setZone({ srv: { [TEST1]: records(27017, 27018, 27019) } });
      clock.advance(MIN_RESCAN_SRV_INTERVAL_MS - 1);
      expect(rescanning(client), 'no rescan before 60 s').to.equal(false);
      expect(srvQuestions(), 'no rescan before 60 s').to.equal(1);
      await rescanAfter(client, 1);
      expect(client.hosts).to.deep.equal([host(27017), host(27018), host(27019)]);
      expect(sorted(client.pools.keys())).to.deep.equal([host(27017), host(27018), host(27019)]);
      expect(sorted(client.monitors.keys())).to.deep.equal([host(27017), host(27018), host(27019)]);
      expect(await eventually(() => events.includes(`ConnectionPoolReady ${host(27019)}`))).to.equal(true);
      expect(events.filter((e) => e.endsWith(host(27019)))[0]).to.equal(`ConnectionPoolCreated ${host(27019)}`);
      expect(messages).to.include('Connection pool created 27019').and.to.include('Connection pool ready 27019');
      // The new pool serves commands.
      expect(await client.pools.get(host(27019))!.withConnection((c) => c.command('admin', { ping: 1 }))).to.include({ ok: 1 });
    });

    it('2. removal of an existing DNS record: its pool and monitor are closed, the others left alone', async function () {
      const client = await open('');
      const kept = client.pools.get(host(27017));
      const removed = client.pools.get(host(27018))!;
      const events: string[] = [];
      client.events$.subscribe((e) => events.push(`${e.type} ${e.address}`));
      events.length = 0; // each pool's ConnectionPoolCreated, given to every subscriber first
      responder.setZone({ srv: { [TEST1]: records(27017) } });
      await rescanAfter(client);
      expect(client.hosts).to.deep.equal([host(27017)]);
      expect([...client.pools.keys()]).to.deep.equal([host(27017)]);
      expect([...client.monitors.keys()]).to.deep.equal([host(27017)]);
      expect(client.pools.get(host(27017))).to.equal(kept);
      expect(removed.state).to.equal('closed');
      expect(events).to.include(`ConnectionPoolClosed ${host(27018)}`);
      expect(events.filter((e) => e.endsWith(host(27017)) && e.startsWith('ConnectionPool'))).to.deep.equal([]);
    });

    it('3. replacement of a DNS record', async function () {
      const client = await open('');
      responder.setZone({ srv: { [TEST1]: records(27017, 27019) } });
      await rescanAfter(client);
      expect(client.hosts).to.deep.equal([host(27017), host(27019)]);
      expect(sorted(client.monitors.keys())).to.deep.equal([host(27017), host(27019)]);
    });

    it('3, with topology at debug: the replaced host stopped, the new one started, one change for both (the new one Unknown), then it a Mongos', async function () {
      const messages: TopologyLogMessage[] = [];
      const client = await open('', { topology: messages });
      expect(await eventually(() => [...client.pools.values()].every((p) => p.state === 'ready'))).to.equal(true);
      const server = (m: TopologyLogMessage) => ('serverPort' in m.fields ? ` ${String(m.fields.serverPort)}` : '');
      const described = (m: TopologyLogMessage) => (m.fields.message === 'Topology description changed' ? ` ${m.fields.newDescription}` : '');
      const text = (m: TopologyLogMessage) => `${m.fields.message}${server(m)}${described(m)}`;
      const sharded = (...servers: [number, string][]) => JSON.stringify({ type: 'Sharded', servers: servers.map(([port, type]) => ({ address: host(port), type })) });
      const unknown = JSON.stringify({ type: 'Unknown', servers: [{ address: host(27017), type: 'Unknown' }, { address: host(27018), type: 'Unknown' }] });
      expect(await eventually(() => messages.length === 6)).to.equal(true);
      // The first router to answer is either one.
      const first = messages[4].fields.message === 'Topology description changed' && messages[4].fields.newDescription.includes(`${host(27017)}","type":"Mongos`) ? 27017 : 27018;
      const other = first === 27017 ? 27018 : 27017;
      expect(messages.map(text), 'the seedlist found: the servers Unknown, their monitoring started, each a Mongos').to.deep.equal([
        'Starting topology monitoring',
        `Topology description changed ${unknown}`,
        'Starting server monitoring 27017',
        'Starting server monitoring 27018',
        `Topology description changed ${sharded(...([[27017, first === 27017 ? 'Mongos' : 'Unknown'], [27018, first === 27018 ? 'Mongos' : 'Unknown']] as [number, string][]))}`,
        `Topology description changed ${sharded([27017, 'Mongos'], [27018, 'Mongos'])}`,
      ]);
      expect(other).to.not.equal(first);
      messages.length = 0;
      responder.setZone({ srv: { [TEST1]: records(27017, 27019) } });
      await rescanAfter(client);
      expect(await eventually(() => client.pools.get(host(27019))?.state === 'ready')).to.equal(true);
      expect(messages.map(text)).to.deep.equal([
        'Stopped server monitoring 27018',
        'Starting server monitoring 27019',
        `Topology description changed ${sharded([27017, 'Mongos'], [27019, 'Unknown'])}`,
        `Topology description changed ${sharded([27017, 'Mongos'], [27019, 'Mongos'])}`,
      ]);
    });

    it('4. replacement of both existing DNS records with one new record; a waiting command gets the new host', async function () {
      const client = await open('');
      responder.setZone({ srv: { [TEST1]: records(27019) } });
      await rescanAfter(client);
      expect(client.hosts).to.deep.equal([host(27019)]);
      expect([...client.pools.keys()]).to.deep.equal([host(27019)]);
      expect(await client.command('admin', { ping: 1 })).to.include({ ok: 1 });
    });

    it('5. replacement of both existing DNS records with two new records', async function () {
      const client = await open('');
      responder.setZone({ srv: { [TEST1]: records(27019, 27020) } });
      await rescanAfter(client);
      expect(client.hosts).to.deep.equal([host(27019), host(27020)]);
      expect(sorted(client.pools.keys())).to.deep.equal([host(27019), host(27020)]);
    });
  });

  describe('error scenarios with test1.test.build.10gen.cc: the hosts are unchanged, rescans every heartbeatFrequencyMS', function () {
    const unchanged = async (client: Client, reason: RegExp): Promise<void> => {
      expect(client.hosts).to.deep.equal([host(27017), host(27018)]);
      expect(sorted(client.pools.keys())).to.deep.equal([host(27017), host(27018)]);
      expect(logged(client).at(-1)).to.match(reason);
      expect(poller(client)!.rescanSRVIntervalMS).to.equal(10_000);
      // Records again: the next rescan, heartbeatFrequencyMS later, uses them, and 60 s is the interval again.
      responder.silent = false;
      responder.setZone({ srv: { [TEST1]: records(27017, 27019) } });
      await rescanAfter(client, 10_000);
      expect(client.hosts).to.deep.equal([host(27017), host(27019)]);
      expect(poller(client)!.rescanSRVIntervalMS).to.equal(60_000);
    };

    it('6. DNS record lookup timeout', async function () {
      const client = await open('&connectTimeoutMS=200');
      responder.silent = true;
      const asked = srvQuestions();
      clock.advance(MIN_RESCAN_SRV_INTERVAL_MS);
      expect(await eventually(() => logged(client).length > 0, 3000)).to.equal(true);
      expect(srvQuestions()).to.be.greaterThan(asked);
      await unchanged(client, /SRV polling: the hosts are left unchanged, next rescan in 10000 ms: .*did not answer within 200 ms$/);
    });

    it('7. DNS record lookup failure (the name no longer exists: NXDOMAIN)', async function () {
      const client = await open('');
      responder.setZone({ srv: {} });
      await rescanAfter(client);
      await unchanged(client, /ENOTFOUND/);
    });

    it('8. removal of all DNS SRV records (an answer without records: ENODATA)', async function () {
      const client = await open('');
      responder.setZone({ srv: { [TEST1]: [] } });
      await rescanAfter(client);
      await unchanged(client, /ENODATA/);
    });

    it('records all outside the parent domain change nothing; one outside among valid ones is left out, named', async function () {
      const client = await open('');
      responder.setZone({ srv: { [TEST1]: [{ target: 'localhost.evil.build.10gen.cc', port: 27019 }] } });
      await rescanAfter(client);
      expect(logged(client)).to.deep.equal([
        'SRV polling: the SRV target localhost.evil.build.10gen.cc of _mongodb._tcp.test1.test.build.10gen.cc is not in the domain of test1.test.build.10gen.cc and is not used',
        'SRV polling: the hosts are left unchanged, next rescan in 10000 ms: no SRV target is in its domain',
      ]);
      expect(client.hosts).to.deep.equal([host(27017), host(27018)]);
      responder.setZone({ srv: { [TEST1]: [...records(27017, 27020), { target: 'localhost.evil.build.10gen.cc', port: 27019 }] } });
      await rescanAfter(client, 10_000);
      expect(client.hosts).to.deep.equal([host(27017), host(27020)]);
      expect(logged(client)).to.have.length(3);
    });
    it('targets that are no host name and port (a comma, a space, port 0) are left out, named; none else changes nothing', async function () {
      const client = await open('');
      responder.setZone({ srv: { [TEST1]: [{ target: L, port: 0 }, { target: 'sp ace.test.build.10gen.cc', port: 27019 }] } });
      await rescanAfter(client);
      expect(client.hosts).to.deep.equal([host(27017), host(27018)]);
      expect(sorted(client.pools.keys())).to.deep.equal([host(27017), host(27018)]);
      expect(logged(client)).to.deep.equal([
        `SRV polling: the SRV target ${L} (port 0) of _mongodb._tcp.test1.test.build.10gen.cc is not a host name and port a client can connect to, and is not used`,
        'SRV polling: the SRV target sp ace.test.build.10gen.cc (port 27019) of _mongodb._tcp.test1.test.build.10gen.cc is not a host name and port a client can connect to, and is not used',
        'SRV polling: the hosts are left unchanged, next rescan in 10000 ms: no SRV target is a host name and port in its domain',
      ]);
      expect(poller(client)!.rescanSRVIntervalMS).to.equal(10_000);
      responder.setZone({ srv: { [TEST1]: [{ target: 'localhost,a.test.build.10gen.cc', port: 27019 }, ...records(27017)] } });
      await rescanAfter(client, 10_000);
      expect(client.hosts).to.deep.equal([host(27017)]);
      expect(logged(client)).to.have.length(4);
    });
  });

  describe('when polling is not done', function () {
    it('9. not for load-balanced clusters (test3, loadBalanced=true)', async function () {
      const client = await open('&loadBalanced=true', { name: 'test3', sharded: false });
      responder.setZone({ srv: { ...ZONE.srv, '_mongodb._tcp.test3.test.build.10gen.cc': records(27017, 27018) } });
      clock.advance(2 * MIN_RESCAN_SRV_INTERVAL_MS);
      // No poller, so no rescan to start: what the time moved ran is done once the promise jobs it left have run.
      await new Promise((r) => setImmediate(r));
      expect(client.hosts).to.deep.equal([host(27017)]);
      expect(srvQuestions()).to.equal(1);
      expect(poller(client)).to.equal(undefined);
    });

    it('not with a replicaSet (ReplicaSetNoPrimary from the start)', async function () {
      const client = await open('&replicaSet=rs0', { sharded: false });
      responder.setZone({ srv: { [TEST1]: records(27017, 27018, 27019) } });
      clock.advance(2 * MIN_RESCAN_SRV_INTERVAL_MS);
      await new Promise((r) => setImmediate(r));
      expect(poller(client), 'no poller').to.equal(undefined);
      expect(client.hosts).to.have.length(2);
      expect(srvQuestions()).to.equal(1);
    });

    it('no more once a server answers as no mongos (Unknown becomes Single or a replica set)', async function () {
      responder.setZone({ srv: { [TEST1]: records(27030) } });
      const client = await open('', { sharded: false });
      expect(await eventually(() => poller(client)?.stopped === true), 'stopped at the standalone\'s reply').to.equal(true);
      responder.setZone({ srv: { [TEST1]: records(27030, 27017) } });
      clock.advance(2 * MIN_RESCAN_SRV_INTERVAL_MS);
      expect(rescanning(client), 'no rescan started').to.equal(false);
      await new Promise((r) => setImmediate(r));
      expect(client.hosts).to.deep.equal([host(27030)]);
      expect(srvQuestions()).to.equal(1);
    });

    it('a standalone among hosts a rescan joined to the only one (Unknown still) is removed: the topology does not become Single, and it polls on', async function () {
      // 27040: no endpoint there, the proxy refuses it; the topology stays Unknown.
      responder.setZone({ srv: { [TEST1]: records(27040) } });
      const client = await open('', { sharded: false });
      responder.setZone({ srv: { [TEST1]: records(27040, 27030) } });
      await rescanAfter(client);
      expect(await eventually(() => !client.hosts.includes(host(27030))), 'the standalone removed').to.equal(true);
      expect(client.hosts).to.deep.equal([host(27040)]);
      expect(client['topologyType']).to.equal('Unknown');
      expect(poller(client)?.stopped).to.equal(false);
    });

    it('while Unknown (no server answered yet), it polls; a command waiting for a server gets the new one', async function () {
      // 27040: no endpoint there, the proxy refuses it; the topology stays Unknown.
      responder.setZone({ srv: { [TEST1]: records(27040) } });
      const client = await open('&serverSelectionTimeoutMS=300000', { sharded: false });
      const command = client.command('admin', { ping: 1 });
      responder.setZone({ srv: { [TEST1]: records(27017) } });
      await rescanAfter(client);
      expect(client.hosts).to.deep.equal([host(27017)]);
      expect(await command).to.include({ ok: 1 });
    });
  });

  describe('srvMaxHosts', function () {
    it('10. all DNS records are selected (srvMaxHosts=0)', async function () {
      const client = await open('&srvMaxHosts=0');
      responder.setZone({ srv: { [TEST1]: records(27017, 27019, 27020) } });
      await rescanAfter(client);
      await rescanAfter(client);
      expect(sorted(client.hosts)).to.deep.equal([host(27017), host(27019), host(27020)]);
    });

    it('11. all DNS records are selected (srvMaxHosts >= records)', async function () {
      const client = await open('&srvMaxHosts=2');
      responder.setZone({ srv: { [TEST1]: records(27019, 27020) } });
      await rescanAfter(client);
      expect(sorted(client.hosts)).to.deep.equal([host(27019), host(27020)]);
    });

    it('12. new DNS records are randomly selected (srvMaxHosts > 0), the host still listed kept', async function () {
      const seen = new Set<string>();
      for (let i = 0; i < 20 && seen.size < 2; i++) {
        const client = await open('&srvMaxHosts=2');
        responder.setZone({ srv: { [TEST1]: records(27017, 27019, 27020) } });
        await rescanAfter(client);
        expect(client.hosts).to.have.length(2);
        expect(client.hosts[0]).to.equal(host(27017));
        seen.add(client.hosts[1]);
        await client.close();
        responder.setZone(ZONE);
      }
      // Each pick is 27019 or 27020 with chance 1/2: both seen within 20 tries but with chance 2^-19.
      expect(sorted(seen)).to.deep.equal([host(27019), host(27020)]);
    });

    it('rescannedHosts: keeps the hosts still valid, drops the others, fills up to srvMaxHosts at random', function () {
      expect(rescannedHosts(['a:1', 'b:1'], ['b:1', 'c:1'], 0)).to.deep.equal(['b:1', 'c:1']);
      expect(rescannedHosts(['a:1', 'b:1'], ['c:1', 'd:1', 'a:1'], 2, () => 0)).to.deep.equal(['a:1', 'd:1']);
      expect(rescannedHosts(['a:1', 'b:1'], ['c:1', 'd:1', 'a:1'], 2, () => 0.99)).to.deep.equal(['a:1', 'c:1']);
      expect(rescannedHosts(['a:1', 'b:1'], ['a:1', 'b:1', 'c:1'], 2)).to.deep.equal(['a:1', 'b:1']);
    });
  });

  it('13. DNS record with custom service name can be found (srvServiceName=customname)', async function () {
    const client = await open('&srvServiceName=customname', { name: 'test22' });
    responder.setZone({ srv: { '_customname._tcp.test22.test.build.10gen.cc': records(27019, 27020) } });
    await rescanAfter(client);
    expect(responder.questions.filter((q) => q.startsWith('SRV'))).to.deep.equal(Array(2).fill('SRV _customname._tcp.test22.test.build.10gen.cc'));
    expect(client.hosts).to.deep.equal([host(27019), host(27020)]);
  });

  describe('the rest of the client', function () {
    it('a removed pool: its waiting checkout fails with PoolClosedError, its connection in use is closed at check-in', async function () {
      const client = await open('&maxPoolSize=1');
      const pool = client.pools.get(host(27018))!;
      expect(await eventually(() => pool.state === 'ready')).to.equal(true);
      const held = await pool.checkOut();
      const waiting = pool.checkOut().then(
        () => 'delivered',
        (e: unknown) => e,
      );
      const events: string[] = [];
      client.events$.subscribe((e) => e.address === host(27018) && events.push(e.type));
      responder.setZone({ srv: { [TEST1]: records(27017) } });
      await rescanAfter(client);
      expect(await waiting).to.be.instanceOf(PoolClosedError);
      expect(await held.command('admin', { ping: 1 }), 'a command in flight on it ends normally').to.include({ ok: 1 });
      pool.checkIn(held);
      expect(await eventually(() => events.includes('ConnectionClosed'))).to.equal(true);
    });

    it('drain() lets a command in flight on a removed host finish, as on the hosts still there', async function () {
      responder.setZone({ srv: { [TEST1]: records(27018) } });
      const client = await open('');
      const removed = client.pools.get(host(27018))!;
      expect(await eventually(() => removed.state === 'ready')).to.equal(true);
      servers.get(27018)!.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['find'], blockConnection: true, blockTimeMS: 500 } });
      const inFlight = client.command('db', { find: 'c' }).catch((e: unknown) => e);
      expect(await eventually(() => client['commandConnections'].size === 1), 'the find in flight').to.equal(true);
      responder.setZone({ srv: { [TEST1]: records(27017) } });
      await rescanAfter(client);
      expect(removed.state).to.equal('closed');
      await client.drain();
      expect(await inFlight).to.include({ ok: 1 });
      // With a timeoutMS, such a command still in flight then is ended as on the other hosts.
      const other = await open('');
      const pool = other.pools.get(host(27017))!;
      expect(await eventually(() => pool.state === 'ready')).to.equal(true);
      servers.get(27017)!.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['find'], blockConnection: true, blockTimeMS: 2000 } });
      const blocked = other.command('db', { find: 'c' }).catch((e: unknown) => e);
      expect(await eventually(() => other['commandConnections'].size === 1), 'the find in flight').to.equal(true);
      responder.setZone({ srv: { [TEST1]: records(27018) } });
      await rescanAfter(other);
      const draining = other.drain({ timeoutMS: 100 });
      clock.advance(100);
      await draining;
      expect(await blocked).to.be.instanceOf(ClientClosedError);
      servers.get(27017)!.failCommand.configure({ configureFailPoint: 'failCommand', mode: 'off' });
    });

    it('close() from a subscriber of a removed host\'s ConnectionPoolClosed: the hosts that rescan adds are not opened', async function () {
      const client = await open('');
      client.events$.subscribe((e) => {
        if (e.type === 'ConnectionPoolClosed' && e.address === host(27018)) void client.close();
      });
      responder.setZone({ srv: { [TEST1]: records(27017, 27019) } });
      await rescanAfter(client);
      // Waited for rather than assumed done within 50 ms, which a loaded runner's pause could outlast. A host opened
      // would have its pool and monitor in the client's maps from the rescan on (close() empties neither), its monitor
      // started on the microtask after it: connecting, one connection counted, from then on.
      const states = (): string[] => [...client.pools.values()].map((p) => `${p.address} ${p.state}`);
      await eventually(() => states().every((state) => state.endsWith(' closed')), 2000);
      await new Promise((r) => setImmediate(r));
      expect(states()).to.deep.equal([`${host(27017)} closed`]);
      expect([...client.monitors].map(([address, m]) => `${address} ${m.connectionCount}`), 'monitors, and their connections').to.deep.equal([`${host(27017)} 0`]);
      expect(servers.get(27019)!.openConnections).to.equal(0);
    });

    it('close() from a subscriber of the first ConnectionPoolCreated, as the hosts open: no polling starts', async function () {
      clock = new VirtualClock();
      const client = connect(`mongodb+srv://test1.test.build.10gen.cc/?tls=false&proxyHost=127.0.0.1&proxyPort=${proxy.port}`, { scheduler: clock });
      clients.push(client);
      client.events$.subscribe((e) => {
        if (e.type === 'ConnectionPoolCreated') void client.close();
      });
      await client['discover']().catch(() => undefined);
      expect(poller(client)?.stopped ?? true, 'no polling').to.equal(true);
      expect(clock.actions, 'no timer of the client left').to.have.length(0);
      clock.advance(10 * MIN_RESCAN_SRV_INTERVAL_MS);
      expect(rescanning(client), 'no rescan started').to.equal(false);
      expect(srvQuestions()).to.equal(1);
    });

    it('close() stops polling: no rescan is armed, a query in progress is abandoned', async function () {
      const client = await open('');
      responder.silent = true;
      clock.advance(MIN_RESCAN_SRV_INTERVAL_MS);
      expect(await eventually(() => poller(client)?.['lookup'] !== undefined)).to.equal(true);
      await client.close();
      expect(poller(client)!.stopped).to.equal(true);
      expect(poller(client)!['lookup']).to.equal(undefined);
      expect(clock.actions, 'no timer of the client left').to.have.length(0);
      responder.silent = false;
      clock.advance(10 * MIN_RESCAN_SRV_INTERVAL_MS);
      // No rescan started by the time moved, so no question after the abandoned query's; that one counted (waited
      // for: a loaded runner may deliver it late).
      expect(rescanning(client), 'no rescan started').to.equal(false);
      expect(clock.actions, 'no timer of the client left').to.have.length(0);
      await eventually(() => srvQuestions() >= 2, 2000);
      expect(srvQuestions()).to.equal(2);
    });

    it('rescanSRVIntervalMS: the smallest TTL, not below 60 s; 60 s without TTLs', function () {
      expect(rescanSRVIntervalMS()).to.equal(60_000);
      expect(rescanSRVIntervalMS([30, 86400])).to.equal(60_000);
      expect(rescanSRVIntervalMS([300, 86400])).to.equal(300_000);
    });

    it('topologyTypeAfter: Unknown becomes Sharded at a mongos, stays Unknown at an RSGhost, ReplicaSet at a member, Single at a standalone', function () {
      expect(topologyTypeAfter('Unknown', { msg: 'isdbgrid' })).to.equal('Sharded');
      expect(topologyTypeAfter('Unknown', { isreplicaset: true })).to.equal('Unknown');
      expect(topologyTypeAfter('Unknown', { setName: 'rs0', isWritablePrimary: true })).to.equal('ReplicaSet');
      expect(topologyTypeAfter('Unknown', { isWritablePrimary: true })).to.equal('Single');
      expect(topologyTypeAfter('Sharded', { isWritablePrimary: true })).to.equal('Sharded');
    });
  });
});

describe('SrvPoller on a scripted SRV query', function () {
  type Answer = { hosts: string[]; rejected: string[]; unusable?: { target: string; port: number }[] } | Error;
  /** A poller on a VirtualClock whose queries get `answers` in turn (the last one again when they run out). */
  function scripted(answers: Answer[], current: string[] = ['a.example.com:1']) {
    const clock = new VirtualClock();
    const updates: (readonly string[])[] = [];
    const warnings: string[] = [];
    let queries = 0;
    let settle: (() => void) | undefined;
    const poller = new SrvPoller({
      hostname: 'example.com',
      heartbeatFrequencyMS: 500,
      timeoutMS: 0,
      scheduler: clock,
      hosts: () => current,
      update: (hosts) => updates.push(hosts),
      warn: (warning) => warnings.push(warning),
      query: () => {
        const answer = answers[Math.min(queries++, answers.length - 1)];
        return new Promise((resolve, reject) => {
          settle = () => (answer instanceof Error ? reject(answer) : resolve({ unusable: [], ...answer }));
        });
      },
    });
    /** Moves the clock by `ms`, then answers the query that started, if any. */
    const advance = async (ms: number): Promise<void> => {
      clock.advance(ms);
      const answer = settle;
      settle = undefined;
      answer?.();
      for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
    };
    return { poller, updates, warnings, queries: () => queries, advance, pending: () => settle !== undefined, clock };
  }

  it('arms one rescan however often start() is called, and none while a rescan runs or once stopped', async function () {
    const t = scripted([{ hosts: ['a.example.com:1'], rejected: [] }]);
    t.poller.start();
    t.poller.start();
    t.clock.advance(MIN_RESCAN_SRV_INTERVAL_MS);
    expect(t.queries()).to.equal(1);
    t.poller.start();
    t.clock.advance(MIN_RESCAN_SRV_INTERVAL_MS);
    expect(t.queries()).to.equal(1);
    await t.advance(0);
    await t.advance(MIN_RESCAN_SRV_INTERVAL_MS);
    expect(t.queries()).to.equal(2);
    t.poller.stop();
    t.poller.start();
    await t.advance(10 * MIN_RESCAN_SRV_INTERVAL_MS);
    expect(t.queries()).to.equal(2);
  });

  it('an answer arriving after stop() changes nothing and warns of nothing', async function () {
    const t = scripted([new Error('SERVFAIL')]);
    t.poller.start();
    t.clock.advance(MIN_RESCAN_SRV_INTERVAL_MS);
    expect(t.pending()).to.equal(true);
    t.poller.stop();
    await t.advance(0);
    expect({ updates: t.updates, warnings: t.warnings }).to.deep.equal({ updates: [], warnings: [] });
  });

  it('the same hosts again call no update; other hosts do', async function () {
    const t = scripted([{ hosts: ['a.example.com:1'], rejected: [] }, { hosts: ['b.example.com:1'], rejected: [] }]);
    t.poller.start();
    await t.advance(MIN_RESCAN_SRV_INTERVAL_MS);
    expect(t.updates).to.deep.equal([]);
    await t.advance(MIN_RESCAN_SRV_INTERVAL_MS);
    expect(t.updates).to.deep.equal([['b.example.com:1']]);
    expect(t.warnings).to.deep.equal([]);
  });

  it('names each target outside the domain, and why the hosts were left as they are', async function () {
    const t = scripted([
      { hosts: ['a.example.com:1'], rejected: ['evil.test'] },
      { hosts: [], rejected: ['evil.test'] },
      { hosts: [], rejected: [] },
      new Error('querySrv ETIMEOUT'),
      { hosts: [], rejected: [], unusable: [{ target: 'a b.example.com', port: 1 }] },
    ]);
    t.poller.start();
    await t.advance(MIN_RESCAN_SRV_INTERVAL_MS);
    expect(t.poller.rescanSRVIntervalMS).to.equal(MIN_RESCAN_SRV_INTERVAL_MS);
    await t.advance(MIN_RESCAN_SRV_INTERVAL_MS);
    expect(t.poller.rescanSRVIntervalMS).to.equal(500);
    await t.advance(500);
    await t.advance(500);
    await t.advance(500);
    const service = '_mongodb._tcp.example.com';
    expect(t.warnings).to.deep.equal([
      `SRV polling: the SRV target evil.test of ${service} is not in the domain of example.com and is not used`,
      `SRV polling: the SRV target evil.test of ${service} is not in the domain of example.com and is not used`,
      'SRV polling: the hosts are left unchanged, next rescan in 500 ms: no SRV target is in its domain',
      `SRV polling: the hosts are left unchanged, next rescan in 500 ms: no SRV record for ${service}`,
      'SRV polling: the hosts are left unchanged, next rescan in 500 ms: querySrv ETIMEOUT',
      `SRV polling: the SRV target a b.example.com (port 1) of ${service} is not a host name and port a client can connect to, and is not used`,
      'SRV polling: the hosts are left unchanged, next rescan in 500 ms: no SRV target is a host name and port in its domain',
    ]);
    expect(t.updates).to.deep.equal([]);
  });

  it('rescanSRVIntervalMS: the smallest known TTL, at least 60 s; TTLs that are not finite and >= 0 are not known', function () {
    expect(rescanSRVIntervalMS([NaN, -5, Infinity, 120, 300])).to.equal(120_000);
    expect(rescanSRVIntervalMS([NaN, -5])).to.equal(MIN_RESCAN_SRV_INTERVAL_MS);
    expect(rescanSRVIntervalMS([-500, 90])).to.equal(90_000);
    expect(rescanSRVIntervalMS([30])).to.equal(MIN_RESCAN_SRV_INTERVAL_MS);
  });

  it('the TopologyType after a check: Unknown becomes Sharded for a mongos, ReplicaSet for a member, Single for a standalone, stays Unknown for an RSGhost', function () {
    expect(topologyTypeAfter('Unknown', { isWritablePrimary: true, msg: 'isdbgrid' })).to.equal('Sharded');
    expect(topologyTypeAfter('Unknown', { isWritablePrimary: true })).to.equal('Single');
    expect(topologyTypeAfter('Unknown', { isWritablePrimary: true, setName: 'rs0' })).to.equal('ReplicaSet');
    expect(topologyTypeAfter('Unknown', { isreplicaset: true, setName: 'rs0' }), 'an RSGhost, as serverTypeOf reads it').to.equal('Unknown');
    expect(topologyTypeAfter('Unknown', { isreplicaset: true })).to.equal('Unknown');
    expect(topologyTypeAfter('Sharded', { isWritablePrimary: true })).to.equal('Sharded');
    expect(topologyTypeAfter('Single', { msg: 'isdbgrid' })).to.equal('Single');
    expect(topologyTypeAfter('ReplicaSetNoPrimary', { msg: 'isdbgrid' })).to.equal('ReplicaSet');
  });
});

describe('SRV polling against MONGODB_URI', function () {
  it('a rescan of a mongodb+srv MONGODB_URI\'s records finds the hosts its discovery found, and changes nothing', async function () {
    const uri = process.env.MONGODB_URI;
    if (uri === undefined || !uri.startsWith('mongodb+srv://')) {
      console.log('      skipped: MONGODB_URI is unset or not a mongodb+srv URI');
      this.skip();
    }
    const parsed = parseConnectionString(uri!);
    const client = connect(uri!);
    try {
      expect(await client.command('admin', { ping: 1 })).to.include({ ok: 1 });
      const hostname = parsed.hosts[0].replace(/:\d+$/, '');
      const found = await querySrvHosts(hostname, { srvServiceName: parsed.srvServiceName, timeoutMS: 10_000 });
      expect(found.rejected).to.deep.equal([]);
      if ((parsed.srvMaxHosts ?? 0) === 0) expect(sorted(found.hosts)).to.deep.equal(sorted(client.hosts));
      else expect(found.hosts).to.include.members([...client.hosts]);
      // One rescan on a virtual clock, through the real resolver: the same records change nothing and warn of nothing.
      const clock = new VirtualClock();
      const updates: (readonly string[])[] = [];
      const warnings: string[] = [];
      let rescans = 0;
      const poller = new SrvPoller({
        hostname,
        srvServiceName: parsed.srvServiceName,
        srvMaxHosts: parsed.srvMaxHosts,
        heartbeatFrequencyMS: 10_000,
        timeoutMS: 10_000,
        scheduler: clock,
        hosts: () => client.hosts,
        update: (hosts) => updates.push(hosts),
        warn: (warning) => warnings.push(warning),
        query: (name, options) => querySrvHosts(name, options).finally(() => rescans++),
      });
      poller.start();
      clock.advance(MIN_RESCAN_SRV_INTERVAL_MS);
      expect(await eventually(() => rescans === 1, 10_000)).to.equal(true);
      await new Promise((resolve) => setImmediate(resolve));
      poller.stop();
      expect({ updates, warnings, intervalMS: poller.rescanSRVIntervalMS }).to.deep.equal({ updates: [], warnings: [], intervalMS: MIN_RESCAN_SRV_INTERVAL_MS });
    } finally {
      await client.close();
    }
  });
});
