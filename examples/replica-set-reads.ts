/**
 * Read preferences against a replica set: where a client's reads go, by mode, tag sets and maxStalenessSeconds, and
 * what happens to them while the primary changes.
 *
 * The program starts three embedded members of replica set `rs0` (`rxcmap/testing`'s `replicaSetMember`):
 *
 * - ny1, the primary, tagged `{ dc: 'ny' }`;
 * - ny2, a secondary, tagged `{ dc: 'ny' }`;
 * - sf, a secondary, tagged `{ dc: 'sf' }`, that replicates 200 s behind the primary (its hello's `lastWrite` says so);
 *
 * connects a client to one of them, sf (`replicaSet=rs0`, and `readPreference=secondaryPreferred` as its
 * default), and checks, counting the commands each member received (`receivedCommands`), that:
 *
 * 0. the client finds the two others from sf's reply (server discovery: one member is enough as a seed);
 * 1. writes (insert, sent without a read preference) go to the primary;
 * 2. reads of mode `secondary` spread over both secondaries;
 * 3. reads of `{ mode: 'secondary', maxStalenessSeconds: 90 }` avoid the secondary 200 s behind;
 * 4. reads of mode `nearest` with tag sets `[{ dc: 'sf' }]` go only to sf, and with `[{ dc: 'tokyo' }, { dc: 'ny' }]`
 *    (no member in tokyo: the next tag set) to ny1 and ny2, the primary included;
 * 5. while ny1 steps down and ny2 is elected, `primaryPreferred` reads keep succeeding (on the secondaries while
 *    there is no primary), then go to the new primary, ny2;
 * 6. the URI's `readPreference=secondaryPreferred` is the client's default, `client.readPreference`, for a driver's
 *    read helpers to pass on, but `command()` given no read preference sends to the primary (the spec's generic
 *    command method takes only the read preference it is given).
 *
 * Each check prints `ok - <what>` (with `#` lines saying where the commands went) or `not ok - <what>: <detail>`,
 * and a last line `N/N passed`; the exit code is 1 when one failed. Everything is closed at the end (a last check:
 * closing the client leaves no connection open on any member), and the program exits on its own.
 *
 * The members all run in this process, so their round-trip times differ by noise only: `localThresholdMS=1000`
 * keeps every suitable member in the latency window, and only the read preference decides.
 *
 * Imports come from the repository's source: `../lib` stands for `rxcmap`, `../lib/testing` for `rxcmap/testing`.
 *
 *   npx ts-node --transpile-only examples/replica-set-reads.ts
 */
import * as assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { filter, firstValueFrom, throwError, timeout } from 'rxjs';
import { connect, type ReadPreference, type ReadPreferenceMode, type ServerType } from '../lib';
import { EmbeddedServer } from '../lib/testing';

// ---------------------------------------------------------------------------------------------------------------
// The replica set: three embedded members, each told the others' addresses once all are listening

const members = [
  new EmbeddedServer({ replicaSetMember: { setName: 'rs0', state: 'primary', tags: { dc: 'ny' } } }),
  new EmbeddedServer({ replicaSetMember: { setName: 'rs0', state: 'secondary', tags: { dc: 'ny' } } }),
  new EmbeddedServer({ replicaSetMember: { setName: 'rs0', state: 'secondary', tags: { dc: 'sf' }, replicationLagMS: 200_000 } }),
];
const [ny1, ny2] = members as [EmbeddedServer, EmbeddedServer, EmbeddedServer];
/** How the `#` lines name each member, in the order of {@link members}. */
const NAMES = ['ny1', 'ny2', 'sf'];

/**
 * How many commands named `name` each member received, in the order of {@link members}. (A member keeps its last
 * 1000 commands, heartbeats included: far more than this program sends.)
 */
function received(name: string): number[] {
  return members.map((m) => m.receivedCommands.filter((c) => c.name === name).length);
}

/** Where the `name` commands that `run` sent went: how many each member received meanwhile. */
async function where(name: string, run: () => Promise<void>): Promise<number[]> {
  const before = received(name);
  await run();
  return received(name).map((n, i) => n - before[i]!);
}

/** `counts` in words, for the `#` lines: `ny1 0, ny2 12, sf 9`. */
function spread(counts: readonly number[]): string {
  return counts.map((n, i) => `${NAMES[i]} ${n}`).join(', ');
}

// ---------------------------------------------------------------------------------------------------------------
// The steps

interface Step {
  what: string;
  /** Checks what it shows (throws when it does not hold); returns what to print under its `ok` line. */
  run: () => Promise<string>;
}

async function main(): Promise<number> {
  await Promise.all(members.map((m) => m.start()));
  const hosts = members.map((m) => m.address);
  for (const m of members) m.setReplicaSetHosts(hosts);

  // One member as the seed: the client discovers the others from its hello's `hosts`.
  const client = connect(`mongodb://${hosts[2]}/?replicaSet=rs0&readPreference=secondaryPreferred&localThresholdMS=1000&serverSelectionTimeoutMS=5000`);
  const find = { find: 'orders', filter: { open: true } };
  /** `count` finds, one after the other, with `readPreference`. */
  const reads = async (count: number, readPreference: ReadPreferenceMode | ReadPreference): Promise<void> => {
    for (let i = 0; i < count; i++) await client.command('shop', find, { readPreference });
  };

  const steps: Step[] = [
    {
      what: 'given one member, the client finds the two others',
      run: async () => {
        // A write waits for the primary, which the seed's reply names among the members.
        await client.command('admin', { ping: 1 });
        assert.deepEqual([...client.hosts].sort(), [...hosts].sort(), `hosts: ${client.hosts.join(', ')}`);
        return `hosts: ${client.hosts.join(', ')}`;
      },
    },
    {
      what: 'writes go to the primary',
      run: async () => {
        const counts = await where('insert', async () => {
          for (let i = 0; i < 10; i++) await client.command('shop', { insert: 'orders', documents: [{ _id: i, open: true }] });
        });
        assert.deepEqual(counts, [10, 0, 0], `inserts: ${spread(counts)}`);
        return `inserts: ${spread(counts)}`;
      },
    },
    {
      what: "reads of mode 'secondary' spread over both secondaries",
      run: async () => {
        const counts = await where('find', () => reads(40, 'secondary'));
        assert.ok(counts[0] === 0 && counts[1]! > 0 && counts[2]! > 0, `finds: ${spread(counts)}`);
        return `finds: ${spread(counts)}`;
      },
    },
    {
      what: 'reads with maxStalenessSeconds 90 avoid the secondary 200 s behind',
      run: async () => {
        const counts = await where('find', () => reads(20, { mode: 'secondary', maxStalenessSeconds: 90 }));
        assert.deepEqual(counts, [0, 20, 0], `finds: ${spread(counts)}`);
        return `finds: ${spread(counts)}`;
      },
    },
    {
      what: "reads of mode 'nearest' go to the members of the first tag set that matches any",
      run: async () => {
        const sf = await where('find', () => reads(20, { mode: 'nearest', tags: [{ dc: 'sf' }] }));
        assert.deepEqual(sf, [0, 0, 20], `tags [{ dc: 'sf' }]: ${spread(sf)}`);
        const ny = await where('find', () => reads(40, { mode: 'nearest', tags: [{ dc: 'tokyo' }, { dc: 'ny' }] }));
        assert.ok(ny[0]! > 0 && ny[1]! > 0 && ny[2] === 0, `tags [{ dc: 'tokyo' }, { dc: 'ny' }]: ${spread(ny)}`);
        return `tags [{ dc: 'sf' }]: ${spread(sf)}\ntags [{ dc: 'tokyo' }, { dc: 'ny' }]: ${spread(ny)}`;
      },
    },
    {
      what: "reads of mode 'primaryPreferred' keep succeeding while the primary changes, then go to the new primary",
      run: async () => {
        // Resolves when the client describes `server` as `type` (its check saw the step down, the election).
        const described = (server: EmbeddedServer, type: ServerType): Promise<unknown> =>
          firstValueFrom(
            client.topologyEvents$.pipe(
              filter((e) => e.type === 'ServerDescriptionChanged' && e.address === server.address && e.newDescription.type === type),
              timeout({ first: 5000, with: () => throwError(() => new Error(`the client did not describe ${server.address} as ${type} within 5 s`)) }),
            ),
          );
        // The topology's types as the client's description changed meanwhile.
        const types: string[] = [client.topologyDescription.type];
        const following = client.topologyEvents$.subscribe((e) => {
          if (e.type === 'TopologyDescriptionChanged' && e.newDescription.type !== types.at(-1)) types.push(e.newDescription.type);
        });

        // Reads one after the other, 10 ms apart, from before the step down until the client has seen the election.
        let succeeded = 0;
        const failures: string[] = [];
        let stop = false;
        const failover = where('find', async () => {
          while (!stop) {
            try {
              await client.command('shop', find, { readPreference: 'primaryPreferred' });
              succeeded++;
            } catch (error) {
              failures.push(error instanceof Error ? error.message : String(error));
            }
            await sleep(10);
          }
        });
        let during: number[];
        let noPrimary = [0, 0, 0];
        try {
          await sleep(100);
          const steppedDown = described(ny1, 'RSSecondary');
          ny1.setReplicaSetMemberState('secondary'); // steps down: no primary...
          await steppedDown;
          const atStepDown = received('find');
          await sleep(200); // ...for a while: the reads go to the secondaries
          noPrimary = received('find').map((n, i) => n - atStepDown[i]!);
          const elected = described(ny2, 'RSPrimary');
          ny2.setReplicaSetMemberState('primary');
          await elected;
        } finally {
          stop = true;
          following.unsubscribe();
          during = await failover;
        }
        assert.deepEqual(failures, [], `${failures.length} of ${succeeded + failures.length} reads failed during the step down and election`);
        assert.ok(noPrimary.some((n) => n > 0), `no read ran while there was no primary: ${spread(noPrimary)}`);

        const after = await where('find', () => reads(20, 'primaryPreferred'));
        assert.deepEqual(after, [0, 20, 0], `after the election: ${spread(after)}`);
        assert.deepEqual(types, ['ReplicaSetWithPrimary', 'ReplicaSetNoPrimary', 'ReplicaSetWithPrimary'], `the topology: ${types.join(' -> ')}`);
        return [
          `the topology: ${types.join(' -> ')}`,
          `during the step down and election: ${succeeded} reads, none failed: ${spread(during)}`,
          `of which while there was no primary: ${spread(noPrimary)}`,
          `after the election: ${spread(after)}`,
        ].join('\n');
      },
    },
    {
      what: "the URI's readPreference is client.readPreference, but command() without one goes to the primary",
      run: async () => {
        assert.deepEqual(client.readPreference, { mode: 'secondaryPreferred' }, 'client.readPreference');
        const counts = await where('find', async () => {
          for (let i = 0; i < 10; i++) await client.command('shop', find);
        });
        assert.deepEqual(counts, [0, 10, 0], `finds without a read preference: ${spread(counts)}`);
        // Read preference primary: a member is sent no $readPreference.
        const last = ny2.receivedCommands.filter((c) => c.name === 'find').at(-1);
        assert.equal(last?.readPreference, undefined, 'the $readPreference the primary received');
        return `client.readPreference: ${JSON.stringify(client.readPreference)}; finds without a read preference: ${spread(counts)}`;
      },
    },
  ];

  let checks = 0;
  let failed = 0;
  /** Runs one check: prints `ok - <what>` and its `#` lines, or `not ok - <what>: <why>`. */
  const check = async (what: string, run: () => Promise<string>): Promise<void> => {
    checks++;
    try {
      const detail = await run();
      console.log(`ok - ${what}`);
      for (const line of detail.split('\n')) console.log(`#   ${line}`);
    } catch (error) {
      failed++;
      console.log(`not ok - ${what}: ${error instanceof Error ? error.message.split('\n')[0] : String(error)}`);
      console.error(error);
    }
  };
  try {
    // Before the first step: every member checked once (its pool ready), so each step sees the whole set.
    await Promise.all([...client.pools.values()].map((pool) => firstValueFrom(pool.state$.pipe(filter((s) => s.state === 'ready'), timeout(5000)))));
    for (const { what, run } of steps) await check(what, run);
  } finally {
    // The client's own timers keep no process alive: what shows it closed is the members seeing no connection left.
    await check('closing the client closes its connections to every member', async () => {
      await client.close();
      const open = await Promise.all(members.map((m) => m.waitForOpenConnections(0)));
      assert.deepEqual(open, [0, 0, 0], `connections still open: ${spread(open)}`);
      return `connections still open: ${spread(open)}`;
    });
    await Promise.all(members.map((m) => m.stop()));
  }
  console.log(`${checks - failed}/${checks} passed`);
  return failed;
}

main().then(
  (failed) => {
    if (failed > 0) process.exitCode = 1;
  },
  (error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  },
);
