/**
 * The pools of servers that bear no data (an arbiter, a hidden member, a member removed from the configuration):
 * never readied in a replica set, so minPoolSize opens no connection to them (an arbiter refuses authentication: a
 * pool populating it would fail at every attempt), while a client connected directly to one readies its pool.
 * Embedded replica set members on real sockets.
 */
import { expect } from 'chai';
import { connect, type Client } from '../../lib';
import type { EmbeddedServer, ReplicaSetConfigMember } from '../../lib/testing';
import { eventually } from '../support/endpoint';
import { startedMembers } from '../support/members';

describe('pools of servers that bear no data (arbiters, hidden and removed members): not readied, no connection', function () {
  this.timeout(20_000);
  const { member } = startedMembers();
  let client: Client | undefined;
  afterEach(async function () {
    await client?.close();
    client = undefined;
  });

  /** A primary, a secondary, a hidden member and an arbiter of `rs0`, and a member its configuration left out. */
  async function members(): Promise<Record<'primary' | 'secondary' | 'hidden' | 'arbiter' | 'removed', EmbeddedServer>> {
    const primary = await member({ setName: 'rs0', state: 'primary' });
    const [secondary, hidden, arbiter, removed] = await Promise.all([0, 1, 2, 3].map(() => member({ setName: 'rs0', state: 'secondary' })));
    const config: ReplicaSetConfigMember[] = [{ host: primary.address }, { host: secondary!.address }, { host: hidden!.address, hidden: true, priority: 0 }, { host: arbiter!.address, arbiterOnly: true }];
    for (const m of [primary, secondary!, hidden!, arbiter!, removed!]) m.setReplicaSetConfig(config);
    return { primary, secondary: secondary!, hidden: hidden!, arbiter: arbiter!, removed: removed! };
  }

  for (const mode of ['poll', 'stream']) {
    it(`minPoolSize=2 (${mode}): connections to the primary and the secondary only; the arbiter's pool stays paused`, async function () {
      const m = await members();
      // Seeded with those that bear no data: each is checked, the arbiter's reply finds the others.
      const seeds = [m.arbiter.address, m.hidden.address, m.removed.address];
      client = connect(`mongodb://${seeds.join(',')}/?serverMonitoringMode=${mode}&heartbeatFrequencyMS=500&minPoolSize=2`);
      const created = new Map<string, number>();
      const readied: string[] = [];
      let arbiterChecks = 0;
      client.events$.subscribe((e) => {
        if (e.type === 'ServerHeartbeatSucceeded' && e.address === m.arbiter.address) arbiterChecks++;
        if (e.type === 'ConnectionCreated') created.set(e.address, (created.get(e.address) ?? 0) + 1);
        if (e.type === 'ConnectionPoolReady') readied.push(e.address);
      });
      const c = client;
      const settled = (): boolean => created.get(m.primary.address) === 2 && created.get(m.secondary.address) === 2 && c.pools.has(m.arbiter.address) && !c.pools.has(m.hidden.address) && !c.pools.has(m.removed.address);
      expect(await eventually(settled, 5000)).to.equal(true);
      // Several checks of the arbiter since (every 500 ms).
      expect(await eventually(() => arbiterChecks >= 3, 5000)).to.equal(true);
      expect([...created.keys()].sort()).to.deep.equal([m.primary.address, m.secondary.address].sort());
      expect(readied).to.not.include.members([m.arbiter.address]);
      expect(readied).to.not.include.members([m.hidden.address]);
      expect(readied).to.not.include.members([m.removed.address]);
      expect(c.pools.get(m.arbiter.address)!.state).to.equal('paused');
      // Reads go to the members that bear data.
      for (let i = 0; i < 10; i++) expect([m.primary.address, m.secondary.address]).to.include((await c.selectPool({ readPreference: 'nearest' })).address);
    });
  }

  it('directConnection=true to an arbiter: its pool readied and populated, as the only server the client may use', async function () {
    const m = await members();
    client = connect(`mongodb://${m.arbiter.address}/?directConnection=true&heartbeatFrequencyMS=500&minPoolSize=2&serverSelectionTimeoutMS=3000`);
    const pool = await client.selectPool();
    expect(pool.address).to.equal(m.arbiter.address);
    expect(pool.state).to.equal('ready');
    expect(await eventually(() => m.arbiter.connectionsAccepted >= 3, 5000)).to.equal(true);
  });
});
