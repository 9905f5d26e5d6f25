/**
 * A client's reads by read preference: server selection by mode, tag sets and maxStalenessSeconds, and the
 * $readPreference each command carries, against deployments played by proxies and against embedded members.
 */
import { expect } from 'chai';
import type { Document } from 'bson';
import { connect, InvalidOptionError, ServerSelectionError, type Client } from '../../lib';
import { withField } from '../../lib/client/client';
import { PRIMARY } from '../../lib/read-preference';
import { EmbeddedServer } from '../../lib/testing';
import { checkedAs, deployment, election, playedDeployments, type Role } from '../support/deployment';
import { eventually } from '../support/endpoint';
import type { WireProxy } from '../support/wire-proxy';

describe('the command a client sends with a read preference', function () {
  it('a command goes with its $readPreference as a copy: its fields in order, a __proto__ field kept as a field, the caller\'s object unchanged', function () {
    const command = JSON.parse('{"find":"c","__proto__":{"x":1},"filter":{}}') as Document;
    const sent = withField(command, '$readPreference', { mode: 'secondary' });
    expect(Object.keys(sent)).to.deep.equal(['find', '__proto__', 'filter', '$readPreference']);
    expect(Object.getPrototypeOf(sent)).to.equal(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(sent, '__proto__')?.value).to.deep.equal({ x: 1 });
    expect(Object.keys(command)).to.deep.equal(['find', '__proto__', 'filter']);
    const inherited = Object.assign(Object.create({ inheritedField: 1 }) as Document, { ping: 1 });
    expect(Object.keys(withField(inherited, '$readPreference', { mode: 'nearest' }))).to.deep.equal(['ping', '$readPreference']);
  });
});

/** Each proxy's `ping` commands, as the `$readPreference` each carried (`-` for none). */
function sentReadPreferences(proxies: WireProxy[]): string[][] {
  return proxies.map((p) => (p as WireProxy & { sent?: string[] }).sent ?? []);
}

/** Records on each proxy the `$readPreference` of each `ping` it passes on (see {@link sentReadPreferences}). */
function recordReadPreferences(proxies: WireProxy[]): void {
  for (const proxy of proxies) {
    const sent: string[] = [];
    (proxy as WireProxy & { sent?: string[] }).sent = sent;
    const reply = proxy.hooks.reply!;
    proxy.hooks.reply = (r, command) => {
      if (Object.keys(command)[0] === 'ping') sent.push(command.$readPreference === undefined ? '-' : JSON.stringify(command.$readPreference));
      return reply(r, command);
    };
  }
}

describe('a client reading by read preference (against the test endpoint, behind proxies that play the deployment)', function () {
  this.timeout(20_000);
  const played = playedDeployments();

  const open = async (roles: Role[], query: string, options: object = {}): Promise<Client> => {
    played.proxies = await deployment(played.endpoint, roles);
    recordReadPreferences(played.proxies);
    const hosts = played.proxies.map((p) => p.address).join(',');
    played.client = connect(`mongodb://${hosts}/?serverMonitoringMode=poll&heartbeatFrequencyMS=500&${query}`, { ...played.endpoint.connectionOptions, ...options });
    expect(await eventually(() => [...played.client!.pools.values()].every((p) => p.state === 'ready'), 5000)).to.equal(true);
    return played.client;
  };
  const ping = (c: Client, readPreference?: unknown, n = 1): Promise<Document[]> =>
    Promise.all(Array.from({ length: n }, () => c.command('admin', { ping: 1 }, readPreference === undefined ? undefined : { readPreference: readPreference as never })));
  const counts = (): number[] => sentReadPreferences(played.proxies).map((s) => s.length);

  it('reads from the secondaries with mode secondary, each command carrying it; the client\'s default is kept for a driver, not taken by command()', async function () {
    const c = await open([{ kind: 'primary', electionId: election() }, { kind: 'secondary' }, { kind: 'secondary' }], 'replicaSet=rs0', { readPreference: 'secondary' });
    expect(c.readPreference).to.deep.equal({ mode: 'secondary' });
    await ping(c, undefined, 10);
    expect(sentReadPreferences(played.proxies)).to.deep.equal([Array(10).fill('-'), [], []]);
    await ping(c, 'secondary', 40);
    const [primary, ...secondaries] = sentReadPreferences(played.proxies);
    expect(primary).to.have.length(10);
    expect(secondaries[0]!.length + secondaries[1]!.length).to.equal(40);
    expect(secondaries[0]!.length, 'both secondaries take reads').to.be.within(5, 35);
    expect(new Set(secondaries.flat())).to.deep.equal(new Set(['{"mode":"secondary"}']));
  });

  it('reads from the secondaries of the first tag set that matches one, else (secondaryPreferred) from the primary', async function () {
    const c = await open(
      [{ kind: 'primary', electionId: election(), tags: { dc: 'ny' } }, { kind: 'secondary', tags: { dc: 'ny', rack: '1' } }, { kind: 'secondary', tags: { dc: 'sf' } }],
      'replicaSet=rs0',
    );
    await ping(c, { mode: 'secondary', tags: [{ dc: 'sf' }] }, 5);
    expect(counts()).to.deep.equal([0, 0, 5]);
    await ping(c, { mode: 'secondary', tags: [{ dc: 'tokyo' }, { dc: 'ny' }, { dc: 'sf' }] }, 5);
    expect(counts()).to.deep.equal([0, 5, 5]);
    await ping(c, { mode: 'nearest', tags: [{ dc: 'ny', rack: '1' }] }, 5);
    expect(counts()).to.deep.equal([0, 10, 5]);
    await ping(c, { mode: 'secondaryPreferred', tags: [{ dc: 'tokyo' }] }, 5);
    expect(counts()).to.deep.equal([5, 10, 5]);
    expect(sentReadPreferences(played.proxies)[0]!.at(-1), 'sent to the primary too').to.equal('{"mode":"secondaryPreferred","tags":[{"dc":"tokyo"}]}');
    const noMatch = await c.command('admin', { ping: 1 }, { readPreference: { mode: 'secondary', tags: [{ dc: 'tokyo' }] }, timeoutMS: 700 }).catch((e: unknown) => e);
    expect(noMatch).to.be.instanceOf(ServerSelectionError);
    expect((noMatch as Error).message).to.include('(read preference {"mode":"secondary","tags":[{"dc":"tokyo"}]})');
  });

  it('reads only from a secondary within maxStalenessSeconds of the primary; one too small for the replica set fails at once', async function () {
    const c = await open([{ kind: 'primary', electionId: election() }, { kind: 'secondary', lagMS: 200_000 }, { kind: 'secondary', lagMS: 1_000 }], 'replicaSet=rs0');
    await ping(c, { mode: 'secondary', maxStalenessSeconds: 90 }, 10);
    expect(counts()).to.deep.equal([0, 0, 10]);
    expect(sentReadPreferences(played.proxies)[2]![0]).to.equal('{"mode":"secondary","maxStalenessSeconds":90}');
    await ping(c, { mode: 'secondary', maxStalenessSeconds: 300 }, 40);
    expect(counts()[1], 'within 300 s').to.be.above(0);
    const start = Date.now();
    const tooSmall = await c.command('admin', { ping: 1 }, { readPreference: { mode: 'secondary', maxStalenessSeconds: 60 } }).catch((e: unknown) => e);
    expect(tooSmall).to.be.instanceOf(InvalidOptionError).and.include({ option: 'readPreference.maxStalenessSeconds' });
    expect(Date.now() - start, 'no wait for a server').to.be.below(1000);
  });

  it('primaryPreferred reads from the primary while there is one, else from a secondary; nearest from either', async function () {
    const roles: Role[] = [{ kind: 'primary', electionId: election() }, { kind: 'secondary' }];
    const c = await open(roles, 'replicaSet=rs0');
    await ping(c, 'primaryPreferred', 5);
    expect(counts()).to.deep.equal([5, 0]);
    expect(sentReadPreferences(played.proxies)[0]![0]).to.equal('{"mode":"primaryPreferred"}');
    await ping(c, 'nearest', 40);
    expect(counts()[0]).to.be.above(5);
    expect(counts()[1]).to.be.above(0);
    roles[0] = { kind: 'secondary' };
    await checkedAs(c, 0, 'RSSecondary');
    const before = counts();
    await ping(c, 'primaryPreferred', 5);
    expect(counts()[0]! + counts()[1]!).to.equal(before[0]! + before[1]! + 5);
    const refused = await c.command('admin', { ping: 1 }, { timeoutMS: 700 }).catch((e: unknown) => e);
    expect(refused, 'no primary: primary waits').to.be.instanceOf(ServerSelectionError);
  });

  it('reads waiting while the topology is Unknown: once it turns out a replica set, one whose maxStalenessSeconds it cannot meet fails, the others are served', async function () {
    const roles: Role[] = [{ kind: 'down' }, { kind: 'down' }];
    played.proxies = await deployment(played.endpoint, roles);
    recordReadPreferences(played.proxies);
    const hosts = played.proxies.map((p) => p.address).join(',');
    // No replicaSet in the URI: the topology is Unknown until a member answers.
    const c = (played.client = connect(`mongodb://${hosts}/?serverMonitoringMode=poll&heartbeatFrequencyMS=500`, { ...played.endpoint.connectionOptions, serverSelectionTimeoutMS: 10_000 }));
    const start = Date.now();
    const outcome = (p: Promise<unknown>): Promise<unknown> => p.then(() => 'served', (e: unknown) => e);
    const waiting = [
      outcome(c.selectPool({ readPreference: { mode: 'secondary', maxStalenessSeconds: 60 } })),
      outcome(c.command('admin', { ping: 1 }, { readPreference: 'secondary' })),
      outcome(c.command('admin', { ping: 1 }, { readPreference: { mode: 'nearest', maxStalenessSeconds: 89 } })),
      outcome(c.command('admin', { ping: 1 }, { readPreference: 'secondaryPreferred' })),
    ];
    await new Promise((resolve) => setTimeout(resolve, 300));
    roles[0] = { kind: 'primary', electionId: election() };
    roles[1] = { kind: 'secondary' };
    const [tooSmall, secondary, tooSmallToo, preferred] = await Promise.all(waiting);
    expect(tooSmall).to.be.instanceOf(InvalidOptionError).and.include({ option: 'readPreference.maxStalenessSeconds' });
    expect(tooSmallToo).to.be.instanceOf(InvalidOptionError).and.include({ option: 'readPreference.maxStalenessSeconds' });
    expect([secondary, preferred]).to.deep.equal(['served', 'served']);
    expect(Date.now() - start, 'none waited out serverSelectionTimeoutMS').to.be.below(5000);
    // secondaryPreferred may find the primary first (its secondary not known yet); the secondary read, the secondary.
    expect(counts()[1]).to.be.at.least(1);
    expect(counts()[0]! + counts()[1]!).to.equal(2);
  });

  it('a waiting read is sent on when a server suitable for it is found, while one of another read preference goes on waiting', async function () {
    const roles: Role[] = [{ kind: 'secondary' }, { kind: 'secondary', tags: { dc: 'ny' } }];
    const c = await open(roles, 'replicaSet=rs0', { serverSelectionTimeoutMS: 5000 });
    let primaryDone = false;
    const write = c.command('admin', { ping: 1 }).then((r) => ((primaryDone = true), r));
    let taggedDone = false;
    const tagged = c.command('admin', { ping: 1 }, { readPreference: { mode: 'secondary', tags: [{ dc: 'sf' }] } }).then((r) => ((taggedDone = true), r));
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect([primaryDone, taggedDone]).to.deep.equal([false, false]);
    roles[0] = { kind: 'secondary', tags: { dc: 'sf' } };
    await checkedAs(c, 0, 'RSSecondary');
    expect(await tagged).to.include({ ok: 1 });
    expect(primaryDone, 'the primary read still waits').to.equal(false);
    roles[1] = { kind: 'primary', electionId: election() };
    expect(await write).to.include({ ok: 1 });
    expect(counts()).to.deep.equal([1, 1]);
  });

  it('sends $readPreference to a mongos for every mode but primary (secondaryPreferred included), and never to a standalone', async function () {
    const c = await open([{ kind: 'mongos' }], '');
    await ping(c, 'primary');
    await ping(c, 'secondaryPreferred');
    await ping(c, { mode: 'nearest', tags: [{ dc: 'ny' }] });
    expect(sentReadPreferences(played.proxies)).to.deep.equal([['-', '{"mode":"secondaryPreferred"}', '{"mode":"nearest","tags":[{"dc":"ny"}]}']]);
    await c.close();
    await Promise.all(played.proxies.map((p) => p.stop()));
    const s = await open([{ kind: 'standalone' }], '');
    await ping(s, 'secondary');
    await ping(s, 'nearest');
    expect(sentReadPreferences(played.proxies)).to.deep.equal([['-', '-']]);
  });

  it('sends a member reached directly its read preference, primary as primaryPreferred; given, it replaces the command\'s own, whose object is never changed', async function () {
    const c = await open([{ kind: 'secondary' }], 'directConnection=true');
    await ping(c);
    await ping(c, 'secondary');
    await ping(c, 'primary');
    const command = { ping: 1, $readPreference: { mode: 'nearest' } };
    await c.command('admin', command);
    await c.command('admin', command, { readPreference: 'secondaryPreferred' });
    expect(command).to.deep.equal({ ping: 1, $readPreference: { mode: 'nearest' } });
    expect(sentReadPreferences(played.proxies)).to.deep.equal([
      ['{"mode":"primaryPreferred"}', '{"mode":"secondary"}', '{"mode":"primaryPreferred"}', '{"mode":"nearest"}', '{"mode":"secondaryPreferred"}'],
    ]);
  });

  it('with mode primary, no $readPreference to a replica set\'s primary, even over the command\'s own; selectPool() selects by its readPreference', async function () {
    const c = await open([{ kind: 'primary', electionId: election() }], 'replicaSet=rs0', { serverSelectionTimeoutMS: 700 });
    await c.command('admin', { ping: 1, $readPreference: { mode: 'secondary' } }, { readPreference: 'primary' });
    expect(sentReadPreferences(played.proxies)).to.deep.equal([['-']]);
    const pool = await c.selectPool({ readPreference: 'primary' });
    expect(pool.address).to.equal(played.proxies[0]!.address);
    const refused = await c.selectPool({ readPreference: 'secondary' }).catch((e: unknown) => e);
    expect(refused).to.be.instanceOf(ServerSelectionError);
    expect((refused as Error).message).to.include('(read preference secondary)');
  });

  it('takes the client\'s default read preference from the URI, the readPreference option replacing it; primary by default', function () {
    const made = [
      connect('mongodb://127.0.0.1:1/?readPreference=secondary&readPreferenceTags=dc:ny&readPreferenceTags=&maxStalenessSeconds=120'),
      connect('mongodb://127.0.0.1:1/?readPreference=secondary', { readPreference: { mode: 'nearest', tags: [{ dc: 'sf' }] } }),
      connect('mongodb://127.0.0.1:1/'),
    ];
    try {
      expect(made.map((c) => c.readPreference)).to.deep.equal([
        { mode: 'secondary', tags: [{ dc: 'ny' }, {}], maxStalenessSeconds: 120 },
        { mode: 'nearest', tags: [{ dc: 'sf' }] },
        PRIMARY,
      ]);
    } finally {
      for (const c of made) void c.close();
    }
  });

  it('names the read preference as the selector of its server selection log messages', async function () {
    const selectors: unknown[] = [];
    const write = (m: { fields: { message?: unknown; selector?: unknown } }): void => {
      if (m.fields.message === 'Server selection started') selectors.push(m.fields.selector);
    };
    const c = await open([{ kind: 'mongos' }], '', { logging: { componentSeverities: { serverSelection: 'debug' }, path: { write } } });
    await ping(c);
    await ping(c, 'nearest');
    await ping(c, { mode: 'secondary', tags: [{ dc: 'ny' }], maxStalenessSeconds: 90 });
    await c.selectPool({ readPreference: 'secondaryPreferred' });
    expect(selectors).to.deep.equal(['primary', 'nearest', '{"mode":"secondary","tags":[{"dc":"ny"}],"maxStalenessSeconds":90}', 'secondaryPreferred']);
  });

  it('gives a selectPool() caller each command as command() would send it to the pool\'s server', async function () {
    const c = await open([{ kind: 'mongos' }], '');
    const pool = await c.selectPool({ readPreference: 'secondaryPreferred' });
    const command = { find: 'c', filter: {} };
    expect(c.withReadPreference(pool, command, 'secondaryPreferred')).to.deep.equal({ find: 'c', filter: {}, $readPreference: { mode: 'secondaryPreferred' } });
    expect(c.withReadPreference(pool, command), 'primary: the command itself').to.equal(command);
    expect(c.withReadPreference(pool, { ...command, $readPreference: { mode: 'nearest' } }, 'primary')).to.deep.equal(command);
    expect(command).to.deep.equal({ find: 'c', filter: {} });
    const foreign = (() => {
      try {
        return c.withReadPreference({ address: pool.address } as never, command);
      } catch (error) {
        return error;
      }
    })();
    expect(foreign).to.be.instanceOf(InvalidOptionError).and.include({ option: 'pool' });
    expect(() => c.withReadPreference(pool, command, 'Nearest' as never)).to.throw(InvalidOptionError).with.property('option', 'readPreference');
    await c.close();
    await Promise.all(played.proxies.map((p) => p.stop()));
    const direct = await open([{ kind: 'secondary' }], 'directConnection=true');
    const member = await direct.selectPool();
    expect(direct.withReadPreference(member, command)).to.deep.equal({ ...command, $readPreference: { mode: 'primaryPreferred' } });
    expect(direct.withReadPreference(member, command, { mode: 'secondary', tags: [{ dc: 'ny' }] })).to.deep.equal({ ...command, $readPreference: { mode: 'secondary', tags: [{ dc: 'ny' }] } });
  });

  it('refuses a bad readPreference of command(), selectPool() and connect() with InvalidOptionError, sending nothing', async function () {
    const c = await open([{ kind: 'primary', electionId: election() }], 'replicaSet=rs0');
    for (const [bad, option] of [
      ['Secondary', 'readPreference'],
      [{ mode: 'secondary', hedge: {} }, 'readPreference.hedge'],
      [{ mode: 'primary', maxStalenessSeconds: 120 }, 'readPreference.maxStalenessSeconds'],
    ] as const) {
      expect(await c.command('admin', { ping: 1 }, { readPreference: bad as never }).catch((e: unknown) => e)).to.be.instanceOf(InvalidOptionError).and.include({ option });
      expect(await c.selectPool({ readPreference: bad as never }).catch((e: unknown) => e)).to.be.instanceOf(InvalidOptionError).and.include({ option });
      expect(() => connect('mongodb://127.0.0.1:1', { readPreference: bad as never })).to.throw(InvalidOptionError).with.property('option', option);
    }
    // Options whose readPreference getter throws (or whose read preference has one): the option is named, the cause kept.
    const boom = new Error('boom');
    const throwing = {
      get readPreference(): never {
        throw boom;
      },
    };
    const deep = { readPreference: { mode: 'secondary', get tags(): never { throw boom; } } };
    for (const options of [throwing, deep]) {
      for (const refused of [await c.command('admin', { ping: 1 }, options as never).catch((e: unknown) => e), await c.selectPool(options as never).catch((e: unknown) => e)]) {
        expect(refused).to.be.instanceOf(InvalidOptionError).and.include({ option: 'readPreference' });
        expect((refused as Error).cause).to.equal(boom);
      }
    }
    expect(() => connect('mongodb://127.0.0.1:1', deep as never)).to.throw(InvalidOptionError);
    expect(counts()).to.deep.equal([0]);
  });
});

describe('a load-balanced client\'s $readPreference (against an embedded load balancer)', function () {
  it('sends the load balancer every mode but primary, as the command\'s $readPreference', async function () {
    const balancer = await new EmbeddedServer({ loadBalancedServices: 1 }).start();
    const client = connect(`mongodb://${balancer.address}/?loadBalanced=true`);
    try {
      await client.command('admin', { ping: 1 });
      await client.command('admin', { ping: 1 }, { readPreference: 'primary' });
      await client.command('admin', { ping: 1 }, { readPreference: 'secondaryPreferred' });
      await client.command('admin', { ping: 1 }, { readPreference: { mode: 'nearest', tags: [{ dc: 'ny' }], maxStalenessSeconds: 90 } });
      const sent = balancer.receivedCommands.filter((c) => c.name === 'ping').map((c) => c.readPreference);
      expect(sent).to.deep.equal([undefined, undefined, { mode: 'secondaryPreferred' }, { mode: 'nearest', tags: [{ dc: 'ny' }], maxStalenessSeconds: 90 }]);
    } finally {
      await client.close();
      await balancer.stop();
    }
  });
});

describe('a client reading from a replica set of embedded endpoints (rxcmap/testing\'s replicaSetMember: tags, replicationLagMS)', function () {
  this.timeout(20_000);
  it('reads from the fresh tagged secondary, never from one 200 s behind, and the members receive the $readPreference sent', async function () {
    const members = await Promise.all([
      new EmbeddedServer({ replicaSetMember: { setName: 'rs0', state: 'primary', tags: { dc: 'ny' } } }).start(),
      new EmbeddedServer({ replicaSetMember: { setName: 'rs0', state: 'secondary', tags: { dc: 'ny' }, replicationLagMS: 200_000 } }).start(),
      new EmbeddedServer({ replicaSetMember: { setName: 'rs0', state: 'secondary', tags: { dc: 'ny' }, replicationLagMS: 500 } }).start(),
    ]);
    for (const m of members) m.setReplicaSetHosts(members.map((x) => x.address));
    const client = connect(`mongodb://${members.map((m) => m.address).join(',')}/?replicaSet=rs0&heartbeatFrequencyMS=500&serverSelectionTimeoutMS=5000`);
    try {
      const readPreference = { mode: 'secondary', tags: [{ dc: 'ny' }], maxStalenessSeconds: 90 } as const;
      const find = { find: 'c', filter: {} };
      for (let i = 0; i < 20; i++) expect(await client.command('app', find, { readPreference })).to.include({ ok: 1 });
      const finds = members.map((m) => m.receivedCommands.filter((c) => c.name === 'find'));
      expect(finds.map((f) => f.length)).to.deep.equal([0, 0, 20]);
      expect(finds[2]![0]!.readPreference).to.deep.equal({ mode: 'secondary', tags: [{ dc: 'ny' }], maxStalenessSeconds: 90 });
      // Within 300 s, the lagging one is eligible too; nearest takes the primary as well.
      for (let i = 0; i < 60; i++) await client.command('app', find, { readPreference: { mode: 'nearest', maxStalenessSeconds: 300 }, });
      const after = members.map((m) => m.receivedCommands.filter((c) => c.name === 'find').length);
      expect(after.every((n) => n > 0), `every member read from: ${after.join(', ')}`).to.equal(true);
    } finally {
      await client.close();
      await Promise.all(members.map((m) => m.stop()));
    }
  });
});
