/**
 * Server discovery as a client runs it (SDAM, "Updating the TopologyDescription"): the members a replica set's hello
 * replies list are monitored, those found not to belong (another set's member, a standalone or a mongos among a
 * replica set's seeds, a member the configuration no longer lists, a seed named otherwise than the configuration names
 * it) removed, their pools closed. Against the test endpoint (MONGODB_URI's server when set) behind proxies that play
 * the deployment.
 */
import { expect } from 'chai';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { connect, InvalidOptionError, MongoNetworkError, MongoServerError, ServerSelectionError, type Client, type ClientOptions } from '../../lib';
import { MAX_REPLICA_SET_MEMBERS } from '../../lib/client/topology-update';
import { closedPort, eventually, setFailPoint } from '../support/endpoint';
import { checkedAs, deployment, election, pings, playedDeployments, runPings, type Role } from '../support/deployment';

describe("server discovery (SDAM: a replica set's members found and removed by its hello replies)", function () {
  this.timeout(20_000);
  const played = playedDeployments();
  /**
   * A client of `seeds`, polling every 500 ms: its `client` component's warnings in `warnings`, the descriptions its
   * "Topology description changed" messages give in `descriptions`.
   */
  const open = (seeds: readonly string[], query = '', options: ClientOptions = {}): { c: Client; warnings: string[]; descriptions: { type: string; servers: unknown[] }[] } => {
    const warnings: string[] = [];
    const descriptions: { type: string; servers: unknown[] }[] = [];
    const write = (m: { component: string; fields: { message?: unknown; newDescription?: string } }): void => {
      if (m.component === 'client') warnings.push(String(m.fields.message));
      // One truncated at maxDocumentLength (1000 characters: tens of servers) is no JSON: left out, the sink kept.
      if (m.fields.message === 'Topology description changed' && m.fields.newDescription!.endsWith('}')) descriptions.push(JSON.parse(m.fields.newDescription!) as { type: string; servers: unknown[] });
    };
    const logging = { componentSeverities: { client: 'warn', topology: 'debug' }, path: { write } } as never;
    played.client = connect(`mongodb://${seeds.join(',')}/?serverMonitoringMode=poll&heartbeatFrequencyMS=500&serverSelectionTimeoutMS=5000${query}`, { ...played.endpoint.connectionOptions, logging, ...options });
    return { c: played.client, warnings, descriptions };
  };
  const addresses = (): string[] => played.proxies.map((p) => p.address);
  const sorted = (list: Iterable<string>): string[] => [...list].sort();

  for (const query of ['&replicaSet=rs0', '']) {
    it(`from one secondary as the only seed (${query === '' ? 'no replicaSet: the set name of the first member that answers' : 'replicaSet=rs0'}), monitors every member it lists and writes to the primary`, async function () {
      played.proxies = await deployment(played.endpoint, [{ kind: 'secondary' }, { kind: 'primary', electionId: election() }, { kind: 'secondary' }]);
      const { c } = open([addresses()[0]!], query);
      expect(c.hosts).to.deep.equal([addresses()[0]]);
      const created: string[] = [];
      c.events$.subscribe((e) => e.type === 'ConnectionPoolCreated' && created.push(e.address));
      expect(await runPings(c, 20, 4)).to.deep.equal([]);
      expect(pings(played.proxies)).to.deep.equal([0, 20, 0]);
      // The seed first, then the members in the order its reply lists them.
      expect(c.hosts).to.deep.equal(addresses());
      expect(sorted(c.pools.keys())).to.deep.equal(sorted(addresses()));
      expect(sorted(c.monitors.keys())).to.deep.equal(sorted(addresses()));
      expect(created).to.include.members(addresses().slice(1));
      // The smallest of the members' logicalSessionTimeoutMinutes (each proxy passes on its server's).
      const hello = (await c.command('admin', { hello: 1 })) as { logicalSessionTimeoutMinutes?: number };
      expect(c.logicalSessionTimeoutMinutes).to.equal(hello.logicalSessionTimeoutMinutes).and.to.be.a('number');
      // Reads from secondaries reach the members found too.
      for (let i = 0; i < 20; i++) await c.command('admin', { ping: 1 }, { readPreference: 'secondary' });
      expect(pings(played.proxies).map((n) => n > 0)).to.deep.equal([true, true, true]);
    });
  }

  it('logicalSessionTimeoutMinutes: none while a data-bearing member reports none (sessions not supported), a number once each reports one (the smallest: the ls_timeout cases of the topology-update spec)', async function () {
    const roles: Role[] = [{ kind: 'primary', electionId: election() }, { kind: 'secondary', noSessions: true }];
    played.proxies = await deployment(played.endpoint, roles);
    const { c } = open(addresses(), '&replicaSet=rs0');
    await checkedAs(c, 1, 'RSSecondary');
    await checkedAs(c, 0, 'RSPrimary');
    expect(c.logicalSessionTimeoutMinutes).to.equal(undefined);
    roles[1] = { kind: 'secondary' };
    await checkedAs(c, 1, 'RSSecondary');
    expect(await eventually(() => typeof c.logicalSessionTimeoutMinutes === 'number')).to.equal(true);
  });

  it("a network error on the primary's connection makes it Unknown with its pool cleared, the topology ReplicaSetNoPrimary, until its next check", async function () {
    played.proxies = await deployment(played.endpoint, [{ kind: 'primary', electionId: election() }, { kind: 'secondary' }]);
    const { c, descriptions } = open(addresses(), '&replicaSet=rs0&heartbeatFrequencyMS=60000');
    await checkedAs(c, 1, 'RSSecondary');
    await checkedAs(c, 0, 'RSPrimary');
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
    const topology = (c as unknown as { topology: { type: string; servers: Map<string, { type: string }> } }).topology;
    await setFailPoint(this, played.endpoint, { mode: { times: 1 }, data: { failCommands: ['insert'], closeConnection: true } });
    const error = await c.command('app', { insert: 'c', documents: [{}] }).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(Error);
    // At once, with the clear: not at the next check.
    expect(topology.servers.get(addresses()[0]!)!.type).to.equal('Unknown');
    expect(topology.type).to.equal('ReplicaSetNoPrimary');
    expect(c.logicalSessionTimeoutMinutes, 'the secondary alone bears data now').to.be.a('number');
    expect(descriptions.at(-1)).to.deep.equal({ type: 'ReplicaSetNoPrimary', servers: [{ address: addresses()[0], type: 'Unknown' }, { address: addresses()[1], type: 'RSSecondary' }] });
    // Its next check (requested by the error) finds it primary again.
    expect(await eventually(() => topology.type === 'ReplicaSetWithPrimary', 3000)).to.equal(true);
  });

  it('a failed check makes its server Unknown: a secondary down leaves the primary, the primary down leaves ReplicaSetNoPrimary', async function () {
    const roles: Role[] = [{ kind: 'primary', electionId: election() }, { kind: 'secondary' }];
    played.proxies = await deployment(played.endpoint, roles);
    const { c, descriptions } = open(addresses(), '&replicaSet=rs0&heartbeatFrequencyMS=60000');
    await checkedAs(c, 1, 'RSSecondary');
    await checkedAs(c, 0, 'RSPrimary');
    const topology = (c as unknown as { topology: { type: string } }).topology;
    roles[1] = { kind: 'down' };
    await checkedAs(c, 1, 'Unknown');
    expect(topology.type).to.equal('ReplicaSetWithPrimary');
    // Logged as it changes.
    expect(descriptions.at(-1)).to.deep.equal({ type: 'ReplicaSetWithPrimary', servers: [{ address: addresses()[0], type: 'RSPrimary' }, { address: addresses()[1], type: 'Unknown' }] });
    roles[0] = { kind: 'down' };
    await checkedAs(c, 0, 'Unknown');
    expect(topology.type).to.equal('ReplicaSetNoPrimary');
    expect(c.hosts, 'both still monitored').to.deep.equal(addresses());
  });

  for (const kind of ['a network error', 'a state change error with no topologyVersion, as MongoDB 4.2 sends'] as const) {
    it(`${kind} of a command that ran on a removed member's pool changes nothing of the member added again at that address`, async function () {
      const roles: Role[] = [{ kind: 'primary', electionId: election() }, { kind: 'secondary' }];
      played.proxies = await deployment(played.endpoint, roles);
      const network = kind === 'a network error';
      // The member's errors without their topologyVersion (a server before 4.4 sends none).
      const passOn = played.proxies[1]!.hooks.reply!;
      played.proxies[1]!.hooks.reply = (reply, command) => {
        const answered = passOn(reply, command);
        if (answered.ok !== 0) return answered;
        const { topologyVersion: _dropped, ...rest } = answered;
        return rest;
      };
      const { c } = open(addresses(), '&replicaSet=rs0&heartbeatFrequencyMS=60000');
      await checkedAs(c, 1, 'RSSecondary');
      await checkedAs(c, 0, 'RSPrimary');
      const topology = (c as unknown as { topology: { servers: Map<string, { type: string }> } }).topology;
      const member = addresses()[1]!;
      const first = c.pools.get(member);
      // A read that the server holds, then ends by closing its connection (a network error) or with NotWritablePrimary.
      const ending = network ? { closeConnection: true } : { errorCode: 10107 };
      await setFailPoint(this, played.endpoint, { mode: { times: 1 }, data: { failCommands: ['find'], blockConnection: true, blockTimeMS: 3000, ...ending } });
      const read = c.command('app', { find: 'c' }, { readPreference: 'secondary' }).catch((e: unknown) => e);
      await new Promise((resolve) => setTimeout(resolve, 100));
      // Meanwhile the member is removed from the configuration and added back: a new pool at its address.
      roles[0] = { ...roles[0]!, hosts: [addresses()[0]!] } as Role;
      await checkedAs(c, 0, 'RSPrimary');
      expect(await eventually(() => !c.pools.has(member))).to.equal(true);
      roles[0] = { ...roles[0]!, hosts: addresses() } as Role;
      await checkedAs(c, 0, 'RSPrimary');
      expect(await eventually(() => c.pools.has(member) && topology.servers.get(member)?.type === 'RSSecondary', 3000)).to.equal(true);
      expect(c.pools.get(member)).not.to.equal(first);
      let settled = false;
      void read.then(() => (settled = true));
      await Promise.resolve();
      expect(settled, 'the read still held by the server').to.equal(false);
      const error = await read;
      if (network) expect(error).to.be.instanceOf(MongoNetworkError);
      else expect(error).to.be.instanceOf(MongoServerError).and.include({ code: 10107 });
      expect(topology.servers.get(member)!.type, 'the new member untouched by the old pool\'s error').to.equal('RSSecondary');
    });
  }

  it('a member found whose connection options are refused is left out, with one warning however many checks list it', async function () {
    const roles: Role[] = [{ kind: 'primary', electionId: election() }];
    played.proxies = await deployment(played.endpoint, roles);
    const refused = '127.0.0.1:1';
    roles[0] = { ...roles[0]!, hosts: [addresses()[0]!, refused] } as Role;
    const { c, warnings } = open(addresses(), '&replicaSet=rs0');
    // Options the connection factory of that host refuses (as an unreadable TLS file or a proxy that cannot be asked for it would).
    const client = c as unknown as { connectionFactories: (hosts: readonly string[], ...rest: unknown[]) => unknown };
    const factories = client.connectionFactories.bind(c);
    client.connectionFactories = (hosts, ...rest) => {
      if (hosts.includes(refused)) throw new InvalidOptionError('tlsCAFile', '/gone/ca.pem', 'a file the process can read');
      return factories(hosts, ...rest);
    };
    // Three checks of the primary at least (every 500 ms), each listing the host.
    const hellos = (): number => played.proxies[0]!.commands.filter((name) => name === 'hello' || name === 'isMaster').length;
    const first = hellos();
    expect(await eventually(() => hellos() >= first + 3, 5000)).to.equal(true);
    expect(c.hosts).to.deep.equal([addresses()[0]]);
    expect(c.pools.has(refused)).to.equal(false);
    expect(warnings).to.have.length(1);
    expect(warnings[0]).to.match(/^server discovery: the new host 127\.0\.0\.1:1 is not used: .*tlsCAFile/);
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
  });

  it('a seed named otherwise than the configuration names it is replaced by the configured name: its pool closed, never a description without a server', async function () {
    played.proxies = await deployment(played.endpoint, [{ kind: 'primary', electionId: election() }, { kind: 'secondary' }]);
    const port = addresses()[0]!.split(':')[1];
    const seed = `localhost:${port}`;
    const { c, warnings, descriptions } = open([seed], '&replicaSet=rs0');
    const closed: string[] = [];
    c.events$.subscribe((e) => e.type === 'ConnectionPoolClosed' && closed.push(e.address));
    expect(await runPings(c, 10, 2)).to.deep.equal([]);
    expect(await eventually(() => c.hosts.length === 2 && !c.hosts.includes(seed))).to.equal(true);
    expect(sorted(c.hosts)).to.deep.equal(sorted(addresses()));
    expect(await eventually(() => closed.includes(seed)), "the seed's pool closed").to.equal(true);
    expect(c.pools.has(seed)).to.equal(false);
    expect(warnings, 'no warning of an empty topology').to.deep.equal([]);
    // The members it lists are opened before the seed is removed.
    expect(descriptions.filter((d) => d.servers.length === 0), 'descriptions of no server').to.deep.equal([]);
  });

  it('a server its own check removes (a seed named otherwise): its "Stopped server monitoring" comes before its pool\'s close and the description without it, once', async function () {
    played.proxies = await deployment(played.endpoint, [{ kind: 'primary', electionId: election() }]);
    const seed = `localhost:${addresses()[0]!.split(':')[1]}`;
    const lines: string[] = [];
    const write = (m: { fields: { message?: unknown; serverHost?: unknown; serverPort?: unknown; newDescription?: string } }): void => {
      const { message, serverHost, serverPort, newDescription } = m.fields;
      if (message === 'Topology description changed') lines.push(`${String(message)} ${newDescription!.includes(seed) ? 'with' : 'without'} the seed`);
      else if (`${String(serverHost)}:${String(serverPort)}` === seed) lines.push(String(message));
    };
    const logging = { componentSeverities: { topology: 'debug', connection: 'debug' }, path: { write } } as never;
    played.client = connect(`mongodb://${seed}/?serverMonitoringMode=poll&heartbeatFrequencyMS=500&replicaSet=rs0`, { ...played.endpoint.connectionOptions, logging });
    expect(await eventually(() => lines.includes('Connection pool closed'))).to.equal(true);
    // From its check on, less the description with the member its reply named (opened before the seed is removed).
    const removal = lines.slice(lines.indexOf('Server heartbeat succeeded')).filter((line) => !line.endsWith('with the seed'));
    expect(removal.slice(0, 4)).to.deep.equal(['Server heartbeat succeeded', 'Stopped server monitoring', 'Connection pool closed', 'Topology description changed without the seed']);
    expect(lines.filter((line) => line === 'Stopped server monitoring')).to.have.length(1);
  });

  it('a member the configuration no longer lists is removed (its monitor stopped, its pool closed); listed again, it is monitored again', async function () {
    const roles: Role[] = [{ kind: 'primary', electionId: election() }, { kind: 'secondary' }, { kind: 'secondary' }];
    played.proxies = await deployment(played.endpoint, roles);
    const { c, descriptions } = open(addresses(), '&replicaSet=rs0');
    expect(await eventually(() => [...c.pools.values()].every((p) => p.state === 'ready'))).to.equal(true);
    const [, , third] = addresses();
    const before = descriptions.length;
    const closed: string[] = [];
    c.events$.subscribe((e) => e.type === 'ConnectionPoolClosed' && closed.push(e.address));
    // A reconfiguration without the third member: the primary's reply is what removes it.
    roles[0] = { ...roles[0]!, hosts: addresses().slice(0, 2) } as Role;
    await checkedAs(c, 0, 'RSPrimary');
    expect(await eventually(() => !c.hosts.includes(third!))).to.equal(true);
    expect(c.pools.has(third!)).to.equal(false);
    expect(c.monitors.has(third!)).to.equal(false);
    expect(await eventually(() => closed.includes(third!))).to.equal(true);
    const hellos = played.proxies[2]!.commands.filter((name) => name === 'hello').length;
    await new Promise((resolve) => setTimeout(resolve, 700));
    expect(played.proxies[2]!.commands.filter((name) => name === 'hello').length, 'no check of a removed member').to.equal(hellos);
    // Described as it was until its removal, then no more: never Unknown in passing.
    const servers = descriptions.slice(before).map((d) => d.servers as { address: string; type: string }[]);
    expect(servers.map((list) => list.find((s) => s.address === third)?.type)).to.deep.equal([undefined]);
    // Listed again.
    roles[0] = { ...roles[0]!, hosts: addresses() } as Role;
    await checkedAs(c, 0, 'RSPrimary');
    expect(await eventually(() => c.hosts.includes(third!) && c.pools.get(third!)?.state === 'ready')).to.equal(true);
    expect(c.hosts).to.deep.equal(addresses());
  });

  it("a member of another set, a standalone and a mongos among a replica set's seeds are removed, each at its own check, even while the primary lists them", async function () {
    const roles: Role[] = [{ kind: 'primary', electionId: election() }, { kind: 'secondary', setName: 'rs1' }, { kind: 'standalone' }, { kind: 'mongos' }];
    played.proxies = await deployment(played.endpoint, roles);
    roles[0] = { ...roles[0]!, hosts: addresses() } as Role;
    const { c } = open(addresses(), '&replicaSet=rs0');
    const readied: string[] = [];
    c.events$.subscribe((e) => e.type === 'ConnectionPoolReady' && readied.push(e.address));
    expect(await eventually(() => c.hosts.length === 1, 5000)).to.equal(true);
    expect(c.hosts).to.deep.equal([addresses()[0]]);
    expect(await runPings(c, 20, 4)).to.deep.equal([]);
    expect(pings(played.proxies)).to.deep.equal([20, 0, 0, 0]);
    // A server its check removes is not readied first.
    expect(readied).to.deep.equal([addresses()[0]]);
  });

  it('in a sharded cluster, a server that is not a mongos is removed; the mongoses stay', async function () {
    played.proxies = await deployment(played.endpoint, [{ kind: 'mongos' }, { kind: 'mongos' }, { kind: 'standalone' }]);
    const { c } = open(addresses());
    expect(await eventually(() => c.hosts.length === 2, 5000)).to.equal(true);
    expect(c.hosts).to.deep.equal(addresses().slice(0, 2));
    expect(await runPings(c, 40, 4)).to.deep.equal([]);
    expect(pings(played.proxies)[2]).to.equal(0);
  });

  it('two standalones as seeds are both removed (SDAM: a standalone among several seeds is no deployment): a command waiting fails at once with ServerSelectionError, later ones too, and a warning says why', async function () {
    played.proxies = await deployment(played.endpoint, [{ kind: 'standalone' }, { kind: 'standalone' }]);
    // A minute to wait, beyond the test's timeout: the commands fail as the topology empties, not when the wait ends.
    const { c, warnings } = open(addresses(), '', { serverSelectionTimeoutMS: 60_000 });
    const error = (await c.command('admin', { ping: 1 }).catch((e: unknown) => e)) as ServerSelectionError;
    expect(error).to.be.instanceOf(ServerSelectionError);
    expect(error.message).to.equal('No suitable server: the topology has no server left (read preference primary)');
    const later = (await c.command('admin', { ping: 1 }, { readPreference: 'nearest' }).catch((e: unknown) => e)) as ServerSelectionError;
    expect(later).to.be.instanceOf(ServerSelectionError);
    expect(later.message).to.equal('No suitable server: the topology has no server left (read preference nearest)');
    // drain() with no pool left: a selection fails the same way.
    void c.drain();
    expect(await c.command('admin', { ping: 1 }).catch((e: unknown) => e)).to.be.instanceOf(ServerSelectionError);
    expect(error.hosts).to.deep.equal([]);
    expect(error.topologyDescription).to.equal(JSON.stringify({ type: 'Unknown', servers: [] }));
    expect(c.pools.size).to.equal(0);
    expect(pings(played.proxies)).to.deep.equal([0, 0]);
    expect(warnings).to.have.length(1);
    expect(warnings[0]).to.match(/^server discovery: the last server of the topology was removed \(127\.0\.0\.1:\d+\): a standalone among several seeds is no deployment; no operation can be served$/);
  });

  it("the last servers of a replica set or a sharded cluster removed: the warning says none is a member of the set, or none is a mongos", async function () {
    // A primary whose configuration lists neither seed (itself included): both removed by one reply.
    played.proxies = await deployment(played.endpoint, [{ kind: 'primary', electionId: election(), hosts: [] }, { kind: 'secondary' }]);
    let { c, warnings } = open(addresses(), '&replicaSet=rs0');
    expect(await eventually(() => c.hosts.length === 0)).to.equal(true);
    expect(warnings).to.deep.equal([`server discovery: the last server of the topology was removed (${addresses().join(', ')}): none is a member of replica set rs0 the set's configuration lists; no operation can be served`]);
    await c.close();
    await Promise.all(played.proxies.map((p) => p.stop()));

    const roles: Role[] = [{ kind: 'mongos' }, { kind: 'mongos' }];
    played.proxies = await deployment(played.endpoint, roles);
    ({ c, warnings } = open(addresses()));
    await checkedAs(c, 0, 'Mongos');
    await checkedAs(c, 1, 'Mongos');
    // Both become standalones: each is removed at its next check.
    roles[0] = roles[1] = { kind: 'standalone' };
    expect(await eventually(() => c.hosts.length === 0, 5000)).to.equal(true);
    expect(warnings).to.have.length(1);
    expect(warnings[0]).to.match(/^server discovery: the last server of the topology was removed \(127\.0\.0\.1:\d+\): none is a mongos; no operation can be served$/);
  });

  it('a member listing hundreds of hosts, some no address at all: of its first 50 entries, those that are addresses monitored, the rest ignored, and every one closed by close()', async function () {
    const roles: Role[] = [{ kind: 'secondary' }];
    played.proxies = await deployment(played.endpoint, roles);
    // Ports nothing listens on: their monitors' checks fail, refused.
    const port = await closedPort();
    const hostile = [addresses()[0]!, 42, '', 'a b:1', '[nonsense]:1', ...Array.from({ length: 300 }, (_, i) => `127.0.0.${(i % 250) + 2}:${port}`)];
    roles[0] = { ...roles[0]!, hosts: hostile, me: addresses()[0] } as Role;
    const { c } = open(addresses(), '&replicaSet=rs0');
    // The four entries that are no address count among the 50 read.
    expect(await eventually(() => c.hosts.length === MAX_REPLICA_SET_MEMBERS - 4)).to.equal(true);
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(c.hosts).to.have.length(MAX_REPLICA_SET_MEMBERS - 4);
    await c.close();
    expect([...c.pools.values()].every((p) => p.state === 'closed' && p.snapshot().totalConnectionCount === 0), 'every pool closed, empty').to.equal(true);
    expect(await eventually(() => played.proxies[0]!.openConnections().length === 0), 'no connection left open').to.equal(true);
  });

  it('members that each list 50 others, none of them known before: at most 50 servers monitored in all', async function () {
    const roles: Role[] = [{ kind: 'secondary' }, { kind: 'secondary' }];
    played.proxies = await deployment(played.endpoint, roles);
    const port = await closedPort();
    const [a, b] = addresses() as [string, string];
    const junk = (from: number): string[] => Array.from({ length: 48 }, (_, i) => `127.0.${from}.${i + 2}:${port}`);
    // Each lists itself, the other and 48 hosts nothing listens on: 98 servers between them.
    roles[0] = { ...roles[0]!, hosts: [a, b, ...junk(1)], me: a } as Role;
    roles[1] = { ...roles[1]!, hosts: [b, a, ...junk(2)], me: b } as Role;
    const { c } = open([a], '&replicaSet=rs0');
    const created: string[] = [];
    c.events$.subscribe((e) => e.type === 'ConnectionPoolCreated' && created.push(e.address));
    expect(await eventually(() => c.hosts.length === MAX_REPLICA_SET_MEMBERS)).to.equal(true);
    // b checked, its list read, twice.
    const hellos = (): number => played.proxies[1]!.commands.filter((name) => name === 'hello').length;
    expect(await eventually(() => hellos() >= 2, 5000), 'b checked twice').to.equal(true);
    expect(c.hosts).to.have.length(MAX_REPLICA_SET_MEMBERS);
    expect(c.monitors.size).to.equal(MAX_REPLICA_SET_MEMBERS);
    expect(new Set(created).size).to.equal(MAX_REPLICA_SET_MEMBERS);
  });

  it('a Unix domain socket path a member lists is not connected to: no socket of this machine is reached from a server\'s reply', async function () {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rxcmap-'));
    const socketPath = path.join(dir, 'mongodb-27017.sock');
    let accepted = 0;
    const local = net.createServer((socket) => {
      accepted++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => local.listen(socketPath, resolve));
    try {
      const roles: Role[] = [{ kind: 'primary', electionId: election() }];
      played.proxies = await deployment(played.endpoint, roles);
      roles[0] = { ...roles[0]!, hosts: [addresses()[0]!, socketPath] } as Role;
      const { c } = open(addresses(), '&replicaSet=rs0');
      expect(await runPings(c, 5, 1)).to.deep.equal([]);
      await checkedAs(c, 0, 'RSPrimary');
      expect(accepted, 'connections to the socket').to.equal(0);
      expect(c.hosts).to.deep.equal(addresses());
    } finally {
      await new Promise((resolve) => local.close(resolve));
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('close() from a subscriber of a discovered pool\'s ConnectionPoolCreated: the other members found are not opened, the seed closed', async function () {
    played.proxies = await deployment(played.endpoint, [{ kind: 'secondary' }, { kind: 'primary', electionId: election() }, { kind: 'secondary' }]);
    const { c } = open([addresses()[0]!], '&replicaSet=rs0');
    const created: string[] = [];
    let closing: Promise<void> | undefined;
    c.events$.subscribe((e) => {
      if (e.type !== 'ConnectionPoolCreated') return;
      created.push(e.address);
      if (e.address !== addresses()[0]) closing ??= c.close();
    });
    expect(await eventually(() => closing !== undefined)).to.equal(true);
    await closing;
    expect(created, 'one member found, then no other opened').to.have.length(2);
    expect([...c.pools.values()].every((p) => p.state === 'closed')).to.equal(true);
    expect(await eventually(() => played.proxies.every((p) => p.openConnections().length === 0)), 'no connection left open').to.equal(true);
  });
});
