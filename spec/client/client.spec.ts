/**
 * connect(): one pool and one monitor per host sharing the same options (CMAP prose tests 1–3), URI versus object
 * options, the merged event feed, command() and close() over real sockets against embedded endpoints.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Long, ObjectId } from 'bson';
import { expect } from 'chai';
import { AuthenticationError, ClientClosedError, connect, IncompatibleServerError, InvalidOptionError, MonitorClosedError, MongoNetworkError, MongoNetworkTimeoutError, MongoServerError, PoolClearedError, PoolClosedError, ServerSelectionError, WaitQueueTimeoutError, type Client, type ClientEvent, type ConnectionPoolCreatedEvent, type LogSink, type ClientOptions, type TopologyLogMessage } from '../../lib';
import type { LogMessage } from '../../lib/logging/log-message';
import { EmbeddedServer, VirtualClock, type CommandHandler } from '../../lib/testing';
import { closedPort, eventually, setFailPoint, startTestEndpoint, stopTestEndpoint, type TestEndpoint } from '../support/endpoint';
import { selectionsWaiting } from '../support/selections';
import { openFiles } from '../support/open-files';
import { LAZY_STACKS } from '../support/lazy-stacks';
import { Observable } from 'rxjs';
import type { ConnectionPoolEvent } from '../../lib/events';
import { startWireProxy } from '../support/wire-proxy';
import { warningsOf } from '../support/process-warnings';

describe('connect() / Client', function () {
  it('refuses a URI that is not a string with an InvalidOptionError naming uri, not an internal message', () => {
    for (const value of [5, null, undefined, {}, ['mongodb://localhost']]) {
      let thrown: unknown;
      try {
        connect(value as unknown as string);
      } catch (error) {
        thrown = error;
      }
      expect(thrown, String(value)).to.be.instanceOf(InvalidOptionError);
      expect((thrown as InvalidOptionError).option).to.equal('uri');
      expect((thrown as InvalidOptionError).message).to.match(/^Invalid uri: .* \(uri must be a string/);
      expect((thrown as InvalidOptionError).message).to.not.match(/startsWith|Cannot read|is not a function/);
    }
  });

  const servers: EmbeddedServer[] = [];
  let client: Client | undefined;

  /** `n` endpoints of `options`: two or more are given as mongos (two standalones among seeds are no deployment: SDAM removes both). */
  async function start(n = 1, options = {}): Promise<EmbeddedServer[]> {
    for (let i = 0; i < n; i++) servers.push(await new EmbeddedServer(options).start());
    return servers;
  }

  /**
   * A load-balanced client of one endpoint with two services, four connections established (two per service), its
   * events recorded; `pings(n)` runs n pings at once, each settling to undefined or its error.
   */
  async function loadBalancedClient() {
    const [a] = await start(1, { loadBalancedServices: 2 });
    const c = connect(`mongodb://${a.address}/?loadBalanced=true&maxPoolSize=4`);
    client = c;
    const pool = [...c.pools.values()][0];
    const events: ClientEvent[] = [];
    c.events$.subscribe((e) => events.push(e));
    const pings = (n: number) => Promise.all(Array.from({ length: n }, () => c.command('admin', { ping: 1 }).then(() => undefined, (e: unknown) => e)));
    expect(await pings(4)).to.deep.equal([undefined, undefined, undefined, undefined]);
    expect(pool.snapshot().serviceGenerations.map((g) => g.connectionCount)).to.deep.equal([2, 2]);
    return { a, pool, events, pings };
  }

  afterEach(async function () {
    await client?.close();
    client = undefined;
    for (const s of servers.splice(0)) await s.stop();
  });

  it('prose 1–3: pool options come from the URI under the spec names, set once for the client, the same for every pool', async function () {
    const [a, b] = await start(2, { mongos: true });
    client = connect(`mongodb://${a.address},${b.address}/?maxPoolSize=7&minPoolSize=1&maxIdleTimeMS=9000&maxConnecting=3&waitQueueTimeoutMS=1234`);
    const created: ConnectionPoolCreatedEvent[] = [];
    client.events$.subscribe((e) => {
      if (e.type === 'ConnectionPoolCreated') created.push(e);
    });
    expect(client.pools.size).to.equal(2);
    expect(client.monitors.size).to.equal(2);
    for (const pool of client.pools.values()) {
      expect(pool.options).to.include({ maxPoolSize: 7, minPoolSize: 1, maxIdleTimeMS: 9000, maxConnecting: 3, waitQueueTimeoutMS: 1234 });
    }
    expect(created.map((e) => e.address)).to.have.members([a.address, b.address]);
    expect(created[0].options).to.deep.equal(created[1].options);
  });

  it('object options override the URI; an invalid URI value is a warning, the same value in the object an error', async function () {
    const [a] = await start();
    client = connect(`mongodb://${a.address}/?maxPoolSize=-3&maxConnecting=4`, { maxConnecting: 1 });
    const pool = [...client.pools.values()][0];
    expect(pool.options).to.include({ maxPoolSize: 100, maxConnecting: 1 });
    expect(client.warnings).to.deep.equal(['maxPoolSize="-3" is ignored: maxPoolSize must be an integer >= 0']);
    expect(() => connect(`mongodb://${a.address}`, { maxPoolSize: -3 })).to.throw(InvalidOptionError, /maxPoolSize/);
  });

  it('the URI\'s minPoolSize is judged against the maxPoolSize that applies (the options\', else the URI\'s, else 100): too large, a warning, never an error', function () {
    const cases: [string, { maxPoolSize?: number }, number, string[]][] = [
      // The options raise the URI's maxPoolSize: the URI's minPoolSize fits and is used.
      ['mongodb://127.0.0.1:1/?minPoolSize=5&maxPoolSize=2', { maxPoolSize: 10 }, 5, []],
      // The options lower it: the URI's minPoolSize no longer fits and is ignored, as any invalid URI value is.
      ['mongodb://127.0.0.1:1/?minPoolSize=5', { maxPoolSize: 2 }, 0, ['minPoolSize=5 is ignored: it must be <= the maxPoolSize option (2)']],
      ['mongodb://127.0.0.1:1/?minPoolSize=150', {}, 0, ['minPoolSize=150 is ignored: it must be <= the default maxPoolSize (100)']],
      ['mongodb://127.0.0.1:1/?minPoolSize=150&maxPoolSize=2', { maxPoolSize: 0 }, 150, []],
    ];
    for (const [uri, options, minPoolSize, warnings] of cases) {
      const c = connect(uri, options);
      expect([...c.pools.values()][0].options.minPoolSize, uri).to.equal(minPoolSize);
      expect(c.warnings, uri).to.deep.equal(warnings);
      void c.close();
    }
    // A minPoolSize of the options too large for the URI's maxPoolSize is the options' error.
    expect(() => connect('mongodb://127.0.0.1:1/?maxPoolSize=2', { minPoolSize: 5 })).to.throw(InvalidOptionError, /minPoolSize/);
  });

  it('monitors ready the pools; command() runs on a ready server; events carry their address; close() leaves nothing open', async function () {
    const [a] = await start();
    const events: ClientEvent[] = [];
    client = connect(`mongodb://${a.address}/?heartbeatFrequencyMS=500&appName=client-test`);
    client.events$.subscribe((e) => events.push(e));
    expect(await client.command('admin', { ping: 1 })).to.include({ ok: 1 });
    const types = events.map((e) => e.type);
    // One host, one pool: its monitor's first check, then the pool readied, then command()'s checkout. The pool
    // runs no background population (minPoolSize 0), so this is the whole feed, in commit order (later heartbeats,
    // every 500 ms, may interleave on a slow machine and are left out).
    const ready = types.indexOf('ConnectionPoolReady');
    expect(types.filter((t, i) => i < ready || !t.startsWith('ServerHeartbeat'))).to.deep.equal([
      'ConnectionPoolCreated',
      'ServerHeartbeatStarted',
      'ServerHeartbeatSucceeded',
      'ConnectionPoolReady',
      'ConnectionCheckOutStarted',
      'ConnectionCreated',
      'ConnectionReady',
      'ConnectionCheckedOut',
      'ConnectionCheckedIn',
    ]);
    expect(new Set(events.map((e) => e.address))).to.deep.equal(new Set([a.address]));
    expect(types.indexOf('ServerHeartbeatSucceeded')).to.be.below(types.indexOf('ConnectionPoolReady'));
    await client.close();
    expect(await eventually(() => a.openConnections === 0)).to.equal(true);
    const after = await client.command('admin', { ping: 1 }).catch((e) => e);
    expect(after).to.be.instanceOf(ClientClosedError);
  });

  it('close() ends each monitor\'s check in progress with ServerHeartbeatFailed (MonitorClosedError), streaming or polling: every Started has its end, no clear, nothing after', async function () {
    const [a] = await start();
    const closes: [string, number][] = [['stream', 5], ['poll', 3]];
    for (const [mode, n] of closes) {
      for (let i = 0; i < n; i++) {
        const label = `${mode}, close ${i + 1}`;
        const events: ClientEvent[] = [];
        const c = (client = connect(`mongodb://${a.address}/?serverMonitoringMode=${mode}&heartbeatFrequencyMS=500&appName=closing`));
        c.events$.subscribe((e) => events.push(e));
        const count = (type: string): number => events.filter((e) => e.type === type).length;
        expect(await eventually(() => count('ServerHeartbeatSucceeded') === 1), label).to.equal(true);
        if (mode === 'stream') {
          expect(await eventually(() => a.awaitingHelloCount === 1), `${label}: the streaming wait`).to.equal(true);
        } else {
          // The next polling check's hello is held by the server: closed while it is in flight.
          a.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['hello', 'isMaster'], blockConnection: true, blockTimeMS: 5000, appName: 'closing' } });
          expect(await eventually(() => count('ServerHeartbeatStarted') === 2, 2000), `${label}: the next check`).to.equal(true);
          expect(await eventually(() => !a.failCommand.active), `${label}: the server holds the hello`).to.equal(true);
        }
        await c.close();
        const atClose = events.length;
        expect(count('ServerHeartbeatStarted'), label).to.equal(count('ServerHeartbeatSucceeded') + count('ServerHeartbeatFailed'));
        const failed = events.filter((e) => e.type === 'ServerHeartbeatFailed');
        expect(failed.map((e) => [e.awaited, e.error.constructor]), label).to.deep.equal([[mode === 'stream', MonitorClosedError]]);
        expect(count('ConnectionPoolCleared'), `${label}: clears`).to.equal(0);
        const heartbeatsAfter = events.slice(events.indexOf(failed[0]) + 1).filter((e) => e.type.startsWith('ServerHeartbeat'));
        expect(heartbeatsAfter, `${label}: heartbeats after the close's`).to.deep.equal([]);
        await new Promise((r) => setTimeout(r, 50));
        expect(events.length, `${label}: events after close() resolved`).to.equal(atClose);
        a.failCommand.configure({ configureFailPoint: 'failCommand', mode: 'off' });
      }
    }
  });

  it('authenticates pool connections with the URI credentials, never printing the password', async function () {
    const [a] = await start(1, { users: [{ username: 'alice', password: 'pencil' }] });
    client = connect(`mongodb://alice:pencil@${a.address}/?authSource=admin`);
    a.handle('whoami', (_c, info) => ({ ok: 1, user: info.user }));
    expect(await client.command('admin', { whoami: 1 })).to.include({ user: 'admin.alice' });
    expect(client.redactedUri).to.not.include('pencil');
  });

  it('shows its redacted URI, hosts and warnings as JSON, also while events$ and log$ have subscribers', async function () {
    const [a] = await start(1, { users: [{ username: 'alice', password: 'pencil' }] });
    client = connect(`mongodb://alice:pencil@${a.address}/?fooBar=1`);
    client.events$.subscribe(() => undefined);
    client.log$.subscribe(() => undefined);
    await client.command('admin', { ping: 1 });
    expect(JSON.parse(JSON.stringify(client))).to.deep.equal({ redactedUri: client.redactedUri, hosts: [a.address], warnings: ['unknown option fooBar is ignored'] });
    expect(JSON.stringify(client)).to.not.include('pencil');
  });

  it('credentials given as an option take the URI\'s authMechanism and authSource where they leave them unset', async function () {
    const [a] = await start(1, {
      users: [
        { username: 'bob', password: 'pw', db: 'reports' },
        { username: 'carol', password: 'pw', mechanisms: ['SCRAM-SHA-1'] },
      ],
    });
    a.handle('whoami', (_c, info) => ({ ok: 1, user: info.user }));
    client = connect(`mongodb://${a.address}/?authSource=reports&authMechanism=SCRAM-SHA-256`, { credentials: { username: 'bob', password: 'pw' } });
    expect(client.warnings).to.deep.equal([]);
    expect(await client.command('admin', { whoami: 1 })).to.include({ user: 'reports.bob' });
    await client.close();
    // The URI's mechanism is used: carol has no SCRAM-SHA-256 credentials.
    client = connect(`mongodb://${a.address}/?authMechanism=SCRAM-SHA-256`, { credentials: { username: 'carol', password: 'pw' } });
    expect(await client.command('admin', { whoami: 1 }).catch((e: unknown) => e)).to.be.instanceOf(AuthenticationError);
    await client.close();
    // The option's own mechanism wins over the URI's.
    client = connect(`mongodb://${a.address}/?authMechanism=SCRAM-SHA-256`, { credentials: { username: 'carol', password: 'pw', mechanism: 'SCRAM-SHA-1' } });
    expect(await client.command('admin', { whoami: 1 })).to.include({ user: 'admin.carol' });
  });

  it('accepts a mongodb+srv URI: returns at once, its hosts found by DNS before any pool opens (see srv.spec.ts)', async function () {
    const client = connect('mongodb+srv://alice:s3cret@cluster0.example.net/');
    expect(client.hosts).to.deep.equal([]);
    expect(client.pools.size).to.equal(0);
    expect(client.redactedUri).to.not.include('s3cret');
    await client.close();
    expect(client.pools.size).to.equal(0);
  });

  it('refuses a serverSelectionTimeoutMS or heartbeatFrequencyMS out of range, given as an option, naming it and what is allowed', function () {
    for (const value of [0, -1, Number.NaN, Number.POSITIVE_INFINITY, 2_147_483_648, '5']) {
      expect(() => connect('mongodb://127.0.0.1:1/', { serverSelectionTimeoutMS: value as number }), String(value))
        .to.throw(InvalidOptionError, 'serverSelectionTimeoutMS must be a number of ms > 0 and at most 2147483647')
        .with.property('option', 'serverSelectionTimeoutMS');
    }
    expect(connect('mongodb://127.0.0.1:1/', { serverSelectionTimeoutMS: 2_147_483_647 }).serverSelectionTimeoutMS).to.equal(2_147_483_647);
    for (const value of [499, Number.NaN, '1000']) {
      expect(() => connect('mongodb://127.0.0.1:1/', { heartbeatFrequencyMS: value as number }), String(value))
        .to.throw(InvalidOptionError, 'heartbeatFrequencyMS must be a number of ms >= 500')
        .with.property('option', 'heartbeatFrequencyMS');
    }
  });

  it('a client closed in the tick connect() made it starts no monitor: the server sees no connection', async function () {
    const [a] = await start();
    const c = connect(`mongodb://${a.address}/`);
    await c.close();
    // Monitors start on the next microtask; give one a chance to connect, had it started.
    await new Promise((r) => setTimeout(r, 100));
    expect(a.connectionsAccepted).to.equal(0);
  });

  it('a ServerSelectionError has the last failed check of the host as its cause', async function () {
    const port = await closedPort();
    client = connect(`mongodb://127.0.0.1:${port}/?serverSelectionTimeoutMS=300&connectTimeoutMS=200`);
    const error = await client.command('admin', { ping: 1 }).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(ServerSelectionError);
    expect((error as Error).cause).to.be.instanceOf(MongoNetworkError);
  });

  it('fails command() with ServerSelectionError when no server becomes ready', async function () {
    const port = await closedPort();
    client = connect(`mongodb://127.0.0.1:${port}/?serverSelectionTimeoutMS=300&connectTimeoutMS=200`);
    const error = await client.command('admin', { ping: 1 }).catch((e) => e);
    expect(error).to.be.instanceOf(ServerSelectionError);
    expect(error.message).to.match(/serverSelectionTimeoutMS=300 ms/);
  });

  it('command(db, cmd, { timeoutMS }) bounds server selection too, when it is below serverSelectionTimeoutMS', async function () {
    const port = await closedPort();
    client = connect(`mongodb://127.0.0.1:${port}/?serverSelectionTimeoutMS=8000&connectTimeoutMS=200`);
    const started = performance.now();
    const error = await client.command('admin', { ping: 1 }, { timeoutMS: 150 }).catch((e: unknown) => e);
    const waited = performance.now() - started;
    expect(error).to.be.instanceOf(ServerSelectionError);
    expect(error).to.deep.include({ timeoutMS: 150, serverSelectionTimeoutMS: 8000 });
    expect((error as Error).message).to.match(/within the operation's timeoutMS=150 ms/);
    expect(waited, 'ms waited').to.be.below(4000);
  });

  it('a command whose checkout runs out of timeoutMS reports the operation\'s timeoutMS, not what server selection left of it', async function () {
    const [a] = await start();
    a.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['hello', 'isMaster'], errorCode: 91 } });
    const clock = new VirtualClock();
    client = connect(`mongodb://${a.address}/?maxPoolSize=1&heartbeatFrequencyMS=10000`, { scheduler: clock });
    const pool = [...client.pools.values()][0];
    const heartbeats: string[] = [];
    client.events$.subscribe((e) => void (e.type.startsWith('ServerHeartbeat') && heartbeats.push(e.type)));
    expect(await eventually(() => heartbeats.length === 2)).to.equal(true);
    a.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['ping'], blockConnection: true, blockTimeMS: 3000 } });
    // Both wait for server selection; the check they request readies the pool 500 virtual ms later. The first then
    // holds the only connection (its ping held by the server, for 3 real s: the steps below, on the virtual clock,
    // must end before it comes back, and a loaded runner's pause could outlast a shorter hold), the second waits for
    // it with 300 ms of its 800 left.
    const busy = client.command('admin', { ping: 1 });
    const waited = client.command('admin', { ping: 1 }, { timeoutMS: 800 }).catch((e: unknown) => e);
    clock.advance(500);
    expect(await eventually(() => pool.snapshot().inUseConnectionCount === 1 && pool.snapshot().waitQueueLength === 1)).to.equal(true);
    clock.advance(299);
    await new Promise((r) => setTimeout(r, 20));
    expect(pool.snapshot().waitQueueLength, 'still waiting 1 ms before its deadline').to.equal(1);
    clock.advance(1);
    const error = await waited;
    expect(error).to.be.instanceOf(WaitQueueTimeoutError);
    expect(error).to.deep.include({ timeoutMS: 800, waitQueueTimeoutMS: 800 });
    expect(await busy).to.include({ ok: 1 });
  });

  it("a command whose checkout runs out of the pool's waitQueueTimeoutMS names the caller that awaited it", async function () {
    const [a] = await start();
    const clock = new VirtualClock();
    const opened = (client = connect(`mongodb://${a.address}/?maxPoolSize=1&waitQueueTimeoutMS=300`, { scheduler: clock }));
    const pool = [...opened.pools.values()][0];
    expect(await eventually(() => pool.state === 'ready')).to.equal(true);
    // The busy ping held 3 real s: the waiter's deadline, on the virtual clock, must pass before it comes back, and a
    // loaded runner's pause could outlast a shorter hold.
    a.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['ping'], blockConnection: true, blockTimeMS: 3000 } });
    const busy = opened.command('admin', { ping: 1 });
    async function runReport(): Promise<unknown> {
      return await opened.command('admin', { ping: 1 });
    }
    const waited = runReport().catch((e: unknown) => e);
    expect(await eventually(() => pool.snapshot().inUseConnectionCount === 1 && pool.snapshot().waitQueueLength === 1)).to.equal(true);
    clock.advance(300);
    const error = await waited;
    expect(error).to.be.instanceOf(WaitQueueTimeoutError);
    expect(String((error as Error).stack).includes('\n    at async runReport ('), 'the caller named (Node.js 22 and later)').to.equal(LAZY_STACKS);
    expect(await busy).to.include({ ok: 1 });
  });

  it('a command with a fraction of a ms of timeoutMS left for its checkout never gives the checkout 0 or less', async function () {
    // What was left was read twice, the clock moving in between: 0.25 ms left at the check became -0.25 ms for the
    // checkout, which threw InvalidOptionError (timeoutMS must be >= 0); exactly 0 gave it no deadline at all.
    const [a] = await start();
    const clock = new VirtualClock();
    const base = clock.now.bind(clock);
    let moved = 0;
    let moving = false;
    clock.now = () => base() + (moving ? (moved += 0.5) : moved); // each read half a ms later
    client = connect(`mongodb://${a.address}/?heartbeatFrequencyMS=10000`, { scheduler: clock });
    await client.command('admin', { ping: 1 });
    for (let timeoutMS = 0.25; timeoutMS < 6; timeoutMS += 0.5) {
      moving = true;
      const outcome = await client.command('admin', { ping: 1 }, { timeoutMS }).catch((e: unknown) => e);
      moving = false;
      expect(outcome, `timeoutMS ${timeoutMS}`).to.not.be.instanceOf(InvalidOptionError);
    }
  });

  it('close() fails a command waiting for server selection at once, with ClientClosedError, and later calls too', async function () {
    const port = await closedPort();
    client = connect(`mongodb://127.0.0.1:${port}/?serverSelectionTimeoutMS=8000&connectTimeoutMS=200`);
    const started = performance.now();
    const waiting = client.command('admin', { ping: 1 }).catch((e: unknown) => e);
    setTimeout(() => void client!.close(), 50);
    const error = await waiting;
    expect(error).to.be.instanceOf(ClientClosedError);
    expect(performance.now() - started, 'settled at close, not at serverSelectionTimeoutMS').to.be.below(2000);
    expect(await client.command('admin', { ping: 1 }).catch((e: unknown) => e)).to.be.instanceOf(ClientClosedError);
  });

  it('commands waiting for a server share one subscription to the pool\'s events: each event is read once, however many wait, and all go on when the pool is ready', async function () {
    const port = await closedPort();
    client = connect(`mongodb://127.0.0.1:${port}/?serverSelectionTimeoutMS=60000&connectTimeoutMS=200&heartbeatFrequencyMS=60000&directConnection=true`);
    const pool = [...client.pools.values()][0];
    // The server as a successful check would describe it (Single: a standalone, suitable once its pool is ready).
    (client as unknown as { topology: { servers: Map<string, { type: string }> } }).topology.servers.set(pool.address, { type: 'Standalone' });
    // What the client's selections do with the pool: subscriptions to its events, and reads of its state.
    let subscribed = 0;
    let following = 0;
    let stateReads = 0;
    const events$ = pool.events$;
    Object.defineProperty(pool, 'events$', {
      value: new Observable<ConnectionPoolEvent>((subscriber) => {
        subscribed++;
        following++;
        const subscription = events$.subscribe(subscriber);
        return () => {
          following--;
          subscription.unsubscribe();
        };
      }),
    });
    const state = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(Object.getPrototypeOf(pool)), 'state')!.get!;
    Object.defineProperty(pool, 'state', {
      get() {
        stateReads++;
        return state.call(pool);
      },
    });
    const commands = Array.from({ length: 200 }, () => client!.command('admin', { ping: 1 }).catch((e: unknown) => e));
    expect(await eventually(() => selectionsWaiting(client!) === 200), 'they all wait for a ready server').to.equal(true);
    expect(subscribed, 'one subscription for every waiting selection').to.equal(1);
    stateReads = 0;
    pool.checkOut().subscribe({ error: () => undefined }); // refused by the paused pool: two events
    expect(stateReads, 'each event read once, not once per waiting command').to.be.at.most(2);
    pool.ready();
    expect(following, 'left once nobody waits').to.equal(0);
    const outcomes = await Promise.all(commands);
    expect(outcomes.filter((e) => e instanceof ServerSelectionError || e instanceof ClientClosedError), 'every command went on to its checkout').to.deep.equal([]);
    // A later wait follows the events again, and close() ends every one waiting.
    pool.clear();
    const waiting = Array.from({ length: 3 }, () => client!.command('admin', { ping: 1 }).catch((e: unknown) => e));
    expect(await eventually(() => selectionsWaiting(client!) === 3)).to.equal(true);
    expect(following).to.equal(1);
    await client.close();
    for (const outcome of await Promise.all(waiting)) expect(outcome).to.be.instanceOf(ClientClosedError);
    expect(following).to.equal(0);
  });

  it('a command leaving the wait for a server (its timeoutMS ran out) leaves the others waiting on the pool\'s events: they go on when the pool is ready', async function () {
    const port = await closedPort();
    const clock = new VirtualClock();
    client = connect(`mongodb://127.0.0.1:${port}/?serverSelectionTimeoutMS=60000&connectTimeoutMS=200&heartbeatFrequencyMS=60000&directConnection=true`, { scheduler: clock });
    const pool = [...client.pools.values()][0];
    // The server as a successful check would describe it (Single: a standalone, suitable once its pool is ready).
    (client as unknown as { topology: { servers: Map<string, { type: string }> } }).topology.servers.set(pool.address, { type: 'Standalone' });
    const short = client.command('admin', { ping: 1 }, { timeoutMS: 100 }).catch((e: unknown) => e);
    const long = client.selectPool();
    expect(await eventually(() => selectionsWaiting(client!) === 2), 'both wait for a ready server').to.equal(true);
    clock.advance(100);
    expect(await short).to.be.instanceOf(ServerSelectionError);
    expect(selectionsWaiting(client)).to.equal(1);
    pool.ready();
    expect(await long).to.equal(pool);
  });

  it('selectPool() already waiting for a server when a drain starts keeps waiting (only command() is refused at once), and fails with ClientClosedError as the drain closes the client', async function () {
    const port = await closedPort();
    client = connect(`mongodb://127.0.0.1:${port}/?serverSelectionTimeoutMS=60000&connectTimeoutMS=200&heartbeatFrequencyMS=60000`, { scheduler: new VirtualClock() });
    const waiting = client.selectPool().catch((e: unknown) => e);
    expect(await eventually(() => selectionsWaiting(client!) === 1)).to.equal(true);
    await client.drain();
    expect(await waiting).to.be.instanceOf(ClientClosedError);
  });

  it('commands waiting for a server request immediate checks together: each at once, then one request every minHeartbeatFrequencyMS for all', async function () {
    const port = await closedPort();
    const clock = new VirtualClock();
    client = connect(`mongodb://127.0.0.1:${port}/?serverSelectionTimeoutMS=60000&connectTimeoutMS=200&heartbeatFrequencyMS=60000`, { scheduler: clock });
    const monitor = [...client.monitors.values()][0];
    let requests = 0;
    monitor.requestCheck = () => void requests++;
    const commands = Array.from({ length: 50 }, () => client!.command('admin', { ping: 1 }).catch((e: unknown) => e));
    expect(await eventually(() => selectionsWaiting(client!) === 50), 'they all wait for a ready server').to.equal(true);
    expect(requests, 'each asks at once').to.equal(50);
    clock.advance(500);
    expect(requests, 'then one request for all of them').to.equal(51);
    clock.advance(500);
    expect(requests).to.equal(52);
    await client.close();
    for (const outcome of await Promise.all(commands)) expect(outcome).to.be.instanceOf(ClientClosedError);
    clock.advance(500);
    expect(requests, 'none once nobody waits').to.equal(52);
  });

  it('close() fails a command in flight with ClientClosedError at once and closes its connection, where nothing else would end it (no socketTimeoutMS, a server gone silent)', async function () {
    const [a] = await start();
    client = connect(`mongodb://${a.address}`);
    const pool = [...client.pools.values()][0];
    const events: ClientEvent[] = [];
    client.events$.subscribe((e) => events.push(e));
    expect(await client.command('admin', { ping: 1 })).to.include({ ok: 1 });
    a.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['ping'], blockConnection: true, blockTimeMS: 30_000 } });
    const inFlight = client.command('admin', { ping: 1 }).catch((e: unknown) => e);
    expect(await eventually(() => pool.snapshot().inUseConnectionCount === 1)).to.equal(true);
    await client.close();
    const outcome = await Promise.race([inFlight, new Promise((r) => setTimeout(() => r('still in flight 2 s after close()'), 2000))]);
    expect(outcome).to.be.instanceOf(ClientClosedError);
    expect(pool.snapshot().totalConnectionCount, 'its connection closed').to.equal(0);
    expect(events.filter((e) => e.type === 'ConnectionClosed').map((e) => (e as { reason: string }).reason)).to.deep.equal(['poolClosed']);
  });

  it('close() between the checkout and the command\'s start fails that command with ClientClosedError and closes its connection, nothing sent', async function () {
    const [a] = await start();
    client = connect(`mongodb://${a.address}`);
    const c = client;
    const pool = [...c.pools.values()][0];
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
    a.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['ping'], blockConnection: true, blockTimeMS: 30_000 } });
    const events: ClientEvent[] = [];
    let closing: Promise<void> | undefined;
    c.events$.subscribe((e) => {
      events.push(e);
      // The pool has committed the checkout; its delivery to command() comes a hop later.
      if (e.type === 'ConnectionCheckedOut') closing ??= c.close();
    });
    const inFlight = c.command('admin', { ping: 1 }).catch((e: unknown) => e);
    const outcome = await Promise.race([inFlight, new Promise((r) => setTimeout(() => r('still in flight 2 s after close()'), 2000))]);
    await closing;
    expect(outcome).to.be.instanceOf(ClientClosedError);
    expect(pool.snapshot().totalConnectionCount, 'its connection closed').to.equal(0);
    expect(events.filter((e) => e.type === 'ConnectionCheckedIn' || e.type === 'ConnectionClosed').map((e) => e.type)).to.deep.equal(['ConnectionCheckedIn', 'ConnectionClosed']);
  });

  it('close() fails a command waiting for its checkout (in the WaitQueue, or for its connection\'s establishment) with ClientClosedError, as any other wait', async function () {
    const [a] = await start();
    // Polling every 10 s: no hello of the monitor's meets the fail point on hello below.
    client = connect(`mongodb://${a.address}/?maxPoolSize=1&serverMonitoringMode=poll&heartbeatFrequencyMS=10000`);
    const pool = [...client.pools.values()][0];
    expect(await client.command('admin', { ping: 1 })).to.include({ ok: 1 });
    // The only connection held by a ping the server holds; a second command waits in the WaitQueue.
    a.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['ping'], blockConnection: true, blockTimeMS: 30_000 } });
    const inFlight = client.command('admin', { ping: 1 }).catch((e: unknown) => e);
    const queued = client.command('admin', { ping: 1 }, { timeoutMS: 20_000 }).catch((e: unknown) => e);
    expect(await eventually(() => pool.snapshot().inUseConnectionCount === 1 && pool.snapshot().waitQueueLength === 1)).to.equal(true);
    await client.close();
    expect(await inFlight).to.be.instanceOf(ClientClosedError);
    expect(await queued, 'waiting in the WaitQueue').to.be.instanceOf(ClientClosedError);
    // A command whose connection is being established: the server holds its handshake.
    client = connect(`mongodb://${a.address}/?serverMonitoringMode=poll&heartbeatFrequencyMS=10000`);
    const second = [...client.pools.values()][0];
    await client.selectPool();
    a.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['hello', 'isMaster'], blockConnection: true, blockTimeMS: 30_000 } });
    const establishing = client.command('admin', { ping: 1 }).catch((e: unknown) => e);
    expect(await eventually(() => second.snapshot().pendingConnectionCount === 1)).to.equal(true);
    await client.close();
    expect(await establishing, 'waiting for its connection').to.be.instanceOf(ClientClosedError);
    expect(await eventually(() => a.openConnections === 0)).to.equal(true);
  });

  it('rejects a misspelt option key, naming the closest option, and a boolean given as a string', function () {
    let error: unknown;
    try {
      connect('mongodb://127.0.0.1:1', { maxPoolsize: 5 } as never);
    } catch (e) {
      error = e;
    }
    expect(error).to.be.instanceOf(InvalidOptionError);
    expect(error).to.include({ option: 'maxPoolsize', suggestion: 'maxPoolSize' });
    expect((error as Error).message).to.equal('Unknown option maxPoolsize of connect(): did you mean maxPoolSize?');
    expect(() => connect('mongodb://127.0.0.1:1', { tlsCaFile: '/ca.pem' } as never)).to.throw(InvalidOptionError, /did you mean tlsCAFile\?/);
    expect(() => connect('mongodb://127.0.0.1:1', { logging: { componentSeverities: { clinet: 'warn' } } } as never)).to.throw(
      InvalidOptionError,
      /did you mean client\?/,
    );
    // 'true' is not true: refused, where it used to mean a client that is silently not load-balanced.
    expect(() => connect('mongodb://127.0.0.1:1', { loadBalanced: 'true' } as never)).to.throw(InvalidOptionError, /Invalid loadBalanced: "true"/);
    expect(() => connect('mongodb://127.0.0.1:1', { directConnection: 1 } as never)).to.throw(InvalidOptionError, /Invalid directConnection: 1/);
    expect(() => connect('mongodb://127.0.0.1:1', { compressors: 'zlib' } as never)).to.throw(InvalidOptionError, /Invalid compressors: "zlib"/);
    expect(() => connect('mongodb://127.0.0.1:1', { credentials: null } as never)).to.throw(InvalidOptionError, /Invalid credentials: null/);
    expect(() => connect('mongodb://127.0.0.1:1', { scheduler: 'virtual' } as never)).to.throw(InvalidOptionError, /SchedulerLike/);
    expect(() => connect('mongodb://127.0.0.1:1', null as never)).to.throw(InvalidOptionError, /Invalid options: null/);
    // Checked before any pool or monitor is made, in load-balanced mode too (where no monitor would check it).
    expect(() => connect('mongodb://127.0.0.1:1/?loadBalanced=true', { heartbeatFrequencyMS: 100 })).to.throw(InvalidOptionError, /heartbeatFrequencyMS/);
  });

  it('a connection option refused only as the connections are set up (a TLS file, a host the proxy cannot be asked for) opens no log file and makes no pool', function () {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rxcmap-client-'));
    try {
      const file = path.join(dir, 'client.log');
      const logging = { componentSeverities: { connection: 'debug' as const, client: 'warn' as const }, path: file };
      expect(() => connect('mongodb://127.0.0.1:1/?tls=true&tlsCAFile=/nonexistent/ca.pem&maxPoolSze=1', { logging })).to.throw(InvalidOptionError, /tlsCAFile/);
      expect(fs.existsSync(file), 'the log file').to.equal(false);
      // The second host's factory refuses it: the first host's pool was made, its creation and closing logged.
      const written: unknown[] = [];
      const sink: LogSink = { write: (m) => void written.push(m) };
      const long = Array.from({ length: 5 }, () => 'a'.repeat(60)).join('.');
      expect(() => connect(`mongodb://127.0.0.1:1,${long}:2/?proxyHost=127.0.0.1`, { logging: { ...logging, path: sink } })).to.throw(InvalidOptionError, /host/);
      expect(written, 'messages of a client that was never made').to.deep.equal([]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('serverSelectionTimeoutMS beyond 2147483647 ms (what one timer holds) is refused in the options, ignored with a warning in the URI', async function () {
    expect(() => connect('mongodb://127.0.0.1:1', { serverSelectionTimeoutMS: 2 ** 31 })).to.throw(
      InvalidOptionError,
      'Invalid serverSelectionTimeoutMS: 2147483648 (serverSelectionTimeoutMS must be a number of ms > 0 and at most 2147483647)',
    );
    expect(() => connect('mongodb://127.0.0.1:1', { serverSelectionTimeoutMS: 0 })).to.throw(InvalidOptionError, /serverSelectionTimeoutMS must be a number of ms > 0/);
    client = connect('mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=3000000000');
    expect(client.serverSelectionTimeoutMS).to.equal(30_000);
    expect(client.warnings).to.deep.equal([
      'serverSelectionTimeoutMS="3000000000" is ignored: serverSelectionTimeoutMS must be an integer number of ms from 1 to 2147483647',
    ]);
    await client.close();
    // The longest one still waits: it does not run out after 1 ms.
    const port = await closedPort();
    client = connect(`mongodb://127.0.0.1:${port}/?connectTimeoutMS=200`, { serverSelectionTimeoutMS: 2 ** 31 - 1 });
    expect(client.serverSelectionTimeoutMS).to.equal(2 ** 31 - 1);
    const waiting = client.command('admin', { ping: 1 }).catch((e: unknown) => e);
    expect(await eventually(() => selectionsWaiting(client!) === 1), 'it waits for a ready server').to.equal(true);
    await client.close();
    expect(await waiting).to.be.instanceOf(ClientClosedError);
  });

  it('connectTimeoutMS and socketTimeoutMS beyond 2147483647 ms in the URI are ignored with a warning, refused in the options', async function () {
    client = connect('mongodb://127.0.0.1:1/?connectTimeoutMS=3000000000&socketTimeoutMS=2147483648&waitQueueTimeoutMS=3000000000');
    expect(client.warnings).to.deep.equal([
      'connectTimeoutMS="3000000000" is ignored: connectTimeoutMS must be an integer number of ms from 0 to 2147483647',
      'socketTimeoutMS="2147483648" is ignored: socketTimeoutMS must be an integer number of ms from 0 to 2147483647',
    ]);
    // A pool arms a longer WaitQueue timeout as a chain of timers: that one is taken.
    expect([...client.pools.values()][0].options).to.include({ waitQueueTimeoutMS: 3_000_000_000 });
    await client.close();
    expect(() => connect('mongodb://127.0.0.1:1', { connectTimeoutMS: 2 ** 31 })).to.throw(InvalidOptionError, /Invalid connectTimeoutMS: 2147483648/);
    expect(() => connect('mongodb://127.0.0.1:1', { socketTimeoutMS: 2 ** 31 })).to.throw(InvalidOptionError, /Invalid socketTimeoutMS: 2147483648/);
  });

  it('command(db, cmd, { timeoutMS }) bounds the checkout and the reply wait by what is left of timeoutMS', async function () {
    const [a] = await start();
    client = connect(`mongodb://${a.address}/?maxPoolSize=1`);
    expect(await client.command('admin', { ping: 1 })).to.include({ ok: 1 });
    a.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 2 }, data: { failCommands: ['ping'], blockConnection: true, blockTimeMS: 2000 } });
    // The reply wait: the server holds the reply 2 s; the command gives up at its deadline. (A command that waited for
    // the reply would take the 2 s: 1.5 s leaves a loaded machine's pauses room.)
    let began = Date.now();
    const late = await client.command('admin', { ping: 1 }, { timeoutMS: 150 }).catch((e: unknown) => e);
    expect(late).to.be.instanceOf(MongoNetworkTimeoutError);
    expect(Date.now() - began).to.be.within(140, 1500);
    // The checkout: the only connection is busy for 2 s, so the second command times out waiting for it.
    const busy = client.command('admin', { ping: 1 });
    began = Date.now();
    const waited = await client.command('admin', { ping: 1 }, { timeoutMS: 100 }).catch((e: unknown) => e);
    expect(waited).to.be.instanceOf(WaitQueueTimeoutError);
    expect(waited).to.deep.include({ timeoutMS: 100 });
    expect(Date.now() - began).to.be.within(90, 1500);
    expect(await busy).to.include({ ok: 1 });
    expect(await client.command('admin', { ping: 1 }, { timeoutMS: -1 }).catch((e: unknown) => e)).to.be.instanceOf(InvalidOptionError);
    // Beyond what one Node timer holds, the reply wait would time out after 1 ms: refused instead.
    const tooLong = await client.command('admin', { ping: 1 }, { timeoutMS: 2 ** 31 }).catch((e: unknown) => e);
    expect(tooLong).to.be.instanceOf(InvalidOptionError);
    expect((tooLong as Error).message).to.equal('Invalid timeoutMS: 2147483648 (timeoutMS must be a number of ms from 0 to 2147483647 (0 means none))');
    // A misspelt option is refused, never dropped.
    const misspelt = await client.command('admin', { ping: 1 }, { timeoutMs: 5 } as never).catch((e: unknown) => e);
    expect((misspelt as Error).message).to.equal('Unknown option timeoutMs of command: did you mean timeoutMS?');
  });

  it('drain(): commands under way finish, new ones fail with PoolClosedError, then the client closes', async function () {
    const [a] = await start();
    client = connect(`mongodb://${a.address}/?maxPoolSize=2`);
    expect(await client.command('admin', { ping: 1 })).to.include({ ok: 1 });
    a.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 3 }, data: { failCommands: ['ping'], blockConnection: true, blockTimeMS: 100 } });
    const underWay = [1, 2, 3].map(() => client!.command('admin', { ping: 1 }));
    await new Promise((r) => setImmediate(r)); // every one has reached its pool: two in use, one waiting
    // A misspelt deadline is refused, and nothing is drained.
    const misspelt = await client.drain({ timeoutMs: 5000 } as never).catch((e: unknown) => e);
    expect((misspelt as Error).message).to.equal('Unknown option timeoutMs of drain: did you mean timeoutMS?');
    const drained = client.drain({ timeoutMS: 5000 });
    const refused = await client.command('admin', { ping: 1 }).catch((e: unknown) => e);
    expect(refused).to.be.instanceOf(PoolClosedError);
    for (const reply of await Promise.all(underWay)) expect(reply).to.include({ ok: 1 });
    await drained;
    expect(await client.command('admin', { ping: 1 }).catch((e: unknown) => e)).to.be.instanceOf(ClientClosedError);
    expect(await eventually(() => a.openConnections === 0)).to.equal(true);
  });

  /**
   * A polling client on virtual time (no check readies a pool before the clock moves) with one command held in flight
   * by the server, its pool then cleared: paused, no server ready.
   */
  async function pausedWithCommandInFlight(): Promise<{ c: Client; clock: VirtualClock; held: Promise<unknown> }> {
    const [a] = await start();
    const clock = new VirtualClock();
    const c = connect(`mongodb://${a.address}/?serverMonitoringMode=poll&heartbeatFrequencyMS=10000`, { scheduler: clock });
    client = c;
    const pool = [...c.pools.values()][0];
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
    a.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['ping'], blockConnection: true, blockTimeMS: 30_000 } });
    const held = c.command('admin', { ping: 1 }).catch((e: unknown) => e);
    expect(await eventually(() => pool.snapshot().inUseConnectionCount === 1)).to.equal(true);
    pool.clear();
    return { c, clock, held };
  }

  it('drain(): a new command fails at once with PoolClosedError though no server is ready, rather than waiting for one', async function () {
    const { c, held } = await pausedWithCommandInFlight();
    const drained = c.drain();
    const refused = await Promise.race([c.command('admin', { ping: 1 }).catch((e: unknown) => e), new Promise((r) => setTimeout(() => r('still waiting 1 s later'), 1000))]);
    expect(refused).to.be.instanceOf(PoolClosedError);
    await c.close();
    await drained;
    expect(await held).to.be.instanceOf(ClientClosedError);
  });

  it('drain(): a command still waiting for a server when the drain starts fails at once with PoolClosedError too', async function () {
    const { c, held } = await pausedWithCommandInFlight();
    const selecting = c.command('admin', { ping: 1 }).catch((e: unknown) => e);
    expect(await eventually(() => selectionsWaiting(c) === 1), 'it waits for a ready server').to.equal(true);
    const drained = c.drain();
    const outcome = await Promise.race([selecting, new Promise((r) => setTimeout(() => r('still waiting 1 s later'), 1000))]);
    expect(outcome).to.be.instanceOf(PoolClosedError);
    await c.close();
    await drained;
    expect(await held).to.be.instanceOf(ClientClosedError);
  });

  it('names the options object and scheduler it refuses, and what each must be', function () {
    expect(() => connect('mongodb://127.0.0.1:1', 5 as never)).to.throw(InvalidOptionError, 'Invalid options: 5 (options must be an object of client options)');
    expect(() => connect('mongodb://127.0.0.1:1', { scheduler: {} } as never))
      .to.throw(InvalidOptionError, /^Invalid scheduler: .* \(scheduler must be an RxJS SchedulerLike/)
      .with.property('option', 'scheduler');
  });

  it('names a misspelt key of the credentials option by its path; proxy credentials in the options may take their proxyHost from the URI', async function () {
    expect(() => connect('mongodb://127.0.0.1:1', { credentials: { username: 'u', password: 'p', sourc: 'admin' } } as never))
      .to.throw(InvalidOptionError, /^Unknown option credentials\.sourc of credentials: did you mean source\?/)
      .with.property('option', 'credentials.sourc');
    const c = connect('mongodb://127.0.0.1:1/?proxyHost=127.0.0.1', { proxyUsername: 'u', proxyPassword: 'p' });
    await c.close();
    expect(() => connect('mongodb://127.0.0.1:1/', { proxyUsername: 'u', proxyPassword: 'p' }), 'without any proxyHost').to.throw(InvalidOptionError, /proxyHost/);
  });

  it('events$ completes once the closed client\'s pools are done, after their closing events, also with a command in flight at close', async function () {
    const [a] = await start(1);
    for (const loadBalanced of [false, true]) {
      const b = loadBalanced ? await new EmbeddedServer({ loadBalancedServices: 1 }).start() : a;
      const c = connect(`mongodb://${b.address}/?${loadBalanced ? 'loadBalanced=true' : 'directConnection=true'}`);
      const seen: string[] = [];
      let completed = false;
      c.events$.subscribe({ next: (e) => seen.push(e.type), complete: () => (completed = true) });
      await c.command('admin', { ping: 1 });
      b.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['find'], blockConnection: true, blockTimeMS: 100 } });
      const inFlight = c.command('test', { find: 'c' }).catch((e: unknown) => e);
      expect(await eventually(() => [...c.pools.values()][0].snapshot().inUseConnectionCount === 1), 'the find holds a connection').to.equal(true);
      await c.close();
      await inFlight;
      expect(await eventually(() => completed), `completed (loadBalanced ${loadBalanced})`).to.equal(true);
      expect(seen.slice(-2), `loadBalanced ${loadBalanced}`).to.include('ConnectionClosed');
      expect(seen, `loadBalanced ${loadBalanced}`).to.include('ConnectionPoolClosed');
      if (loadBalanced) await b.stop();
    }
  });

  it('log$ completes once the closed client\'s pools are done, as events$ does, whatever is logged, its last messages first', async function () {
    const [a] = await start(1);
    const lb = await new EmbeddedServer({ loadBalancedServices: 1 }).start();
    servers.push(lb);
    const severities = [
      { client: 'off', connection: 'off', topology: 'off', command: 'off', serverSelection: 'off' },
      { client: 'warn', connection: 'debug', topology: 'debug', command: 'debug', serverSelection: 'debug' },
    ] as const;
    for (const loadBalanced of [false, true]) {
      for (const componentSeverities of severities) {
        const label = `loadBalanced ${loadBalanced}, ${JSON.stringify(componentSeverities)}`;
        const b = loadBalanced ? lb : a;
        const c = connect(`mongodb://${b.address}/?${loadBalanced ? 'loadBalanced=true' : 'directConnection=true'}&unknownOption=1`, {
          logging: { componentSeverities, path: { write: () => undefined } },
        });
        const seen: string[] = [];
        let completed = false;
        let eventsCompleted = false;
        c.log$.subscribe({ next: (m) => seen.push(String(m.toJSON().message)), complete: () => (completed = true) });
        c.events$.subscribe({ complete: () => (eventsCompleted = true) });
        await c.command('admin', { ping: 1 });
        await c.close();
        expect(await eventually(() => eventsCompleted), `events$ completed (${label})`).to.equal(true);
        expect(await eventually(() => completed), `log$ completed (${label})`).to.equal(true);
        if (componentSeverities.connection === 'debug') expect(seen, label).to.include('Connection pool closed');
        if (componentSeverities.topology === 'debug' && !loadBalanced) expect(seen, `the check close() ended (${label})`).to.include('Server heartbeat failed');
        if (componentSeverities.serverSelection === 'debug') expect(seen, label).to.include('Server selection succeeded');
      }
    }
  });

  it('log$ of a closed client completes for a subscriber that comes later too', async function () {
    const [a] = await start(1);
    const c = (client = connect(`mongodb://${a.address}/?unknownOption=1`, { logging: { componentSeverities: { client: 'warn', topology: 'debug' }, path: { write: () => undefined } } }));
    await c.close();
    let completed = false;
    const seen: LogMessage[] = [];
    c.log$.subscribe({ next: (m) => seen.push(m), complete: () => (completed = true) });
    expect(await eventually(() => completed)).to.equal(true);
    expect(seen.map((m) => m.component), 'the connection string warning is still given').to.include('client');
  });

  it('pools$ gives each pool the client has, and completes when the client is closed; after close, its pools of that time, then the completion', async function () {
    const [a, b] = await start(2, { mongos: true });
    const c = (client = connect(`mongodb://${a.address},${b.address}/`));
    const given: unknown[] = [];
    let completed = false;
    c.pools$.subscribe({ next: (pool) => given.push(pool), complete: () => (completed = true) });
    expect(given).to.deep.equal([...c.pools.values()]);
    expect(given).to.have.length(2);
    expect(completed).to.equal(false);
    await c.close();
    expect(completed).to.equal(true);
    const later: unknown[] = [];
    let laterCompleted = false;
    c.pools$.subscribe({ next: (pool) => later.push(pool), complete: () => (laterCompleted = true) });
    expect(later).to.deep.equal(given);
    expect(laterCompleted).to.equal(true);
  });

  it('events$, commandEvents$ and log$ subscribed after close() complete once its pools are done, so a subscription nobody ends keeps no closed client', async function () {
    const [a, b] = await start(2, { mongos: true });
    const c = (client = connect(`mongodb://${a.address},${b.address}/`));
    await c.command('admin', { ping: 1 });
    await c.close();
    expect(await eventually(() => [...c.pools.values()].every((pool) => pool.snapshot().totalConnectionCount === 0)), 'its pools done').to.equal(true);
    const ended: string[] = [];
    c.events$.subscribe({ complete: () => ended.push('events$') });
    c.commandEvents$.subscribe({ complete: () => ended.push('commandEvents$') });
    c.log$.subscribe({ complete: () => ended.push('log$') });
    expect(ended).to.deep.equal(['events$', 'commandEvents$', 'log$']);
  });

  describe('the log destination', function () {
    let dir: string;
    beforeEach(() => void (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rxcmap-client-'))));
    afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));
    const messages = (file: string): string[] => fs.readFileSync(file, 'utf8').trim().split('\n').map((l) => (JSON.parse(l) as { message: string }).message);

    it('a file path: opened once by the client for every pool, flushed and closed when close() resolves', async function () {
      const [a, b] = await start(2, { mongos: true });
      const file = path.join(dir, 'client.log');
      client = connect(`mongodb://${a.address},${b.address}/`, { logging: { componentSeverities: { connection: 'debug' }, path: file } });
      expect(openFiles(file), 'descriptors of the file').to.equal(1);
      expect(await client.command('admin', { ping: 1 })).to.include({ ok: 1 });
      await client.close();
      expect(openFiles(file), 'descriptors left once close() resolved').to.equal(0);
      const written = messages(file);
      expect(written.filter((m) => m === 'Connection pool created'), 'one per pool').to.have.length(2);
      expect(written.filter((m) => m === 'Connection pool closed'), 'one per pool, written before close() resolved').to.have.length(2);
    });

    it('every component off: no file is opened or created, whatever the path', async function () {
      const file = path.join(dir, 'off.log');
      client = connect('mongodb://127.0.0.1:1/?fooBar=1', { logging: { componentSeverities: { client: 'off', connection: 'off', topology: 'off' }, path: file } });
      expect(client.warnings).to.have.length(1);
      await client.close();
      expect(fs.existsSync(file)).to.equal(false);
    });

    it("a sink object: every message written to it with the client's severities, and never closed by the client", async function () {
      const written: LogMessage[] = [];
      let closes = 0;
      const sink: LogSink = { write: (m) => void written.push(m as LogMessage), close: () => void closes++ };
      client = connect('mongodb://127.0.0.1:1/?fooBar=1', { logging: { componentSeverities: { client: 'warn', connection: 'debug' }, path: sink } });
      await client.close();
      expect(written.map((m) => m.toJSON().message)).to.deep.equal(['unknown option fooBar is ignored', 'Connection pool created', 'Connection pool closed']);
      expect(closes).to.equal(0);
    });
  });

  describe('heartbeat log messages (component topology)', function () {
    /** The environment variables a case sets, put back after it. */
    const saved: Record<string, string | undefined> = {};
    afterEach(function () {
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
        delete saved[name];
      }
    });

    const cases: [string, Record<string, string>, ClientOptions['logging']][] = [
      ['logging option', {}, { componentSeverities: { topology: 'debug', connection: 'debug' } }],
      ['MONGODB_LOG_TOPOLOGY=debug', { MONGODB_LOG_TOPOLOGY: 'debug', MONGODB_LOG_CONNECTION: 'debug' }, {}],
      ['MONGODB_LOG_ALL=debug', { MONGODB_LOG_ALL: 'debug' }, {}],
    ];
    for (const [how, env, logging] of cases) {
      it(`topology at debug (${how}): one message per heartbeat, with the spec's keys, written before the pool reacts, and every started one ends, at close too`, async function () {
        for (const [name, value] of Object.entries(env)) {
          saved[name] = process.env[name];
          process.env[name] = value;
        }
        const [a] = await start();
        const written: LogMessage[] = [];
        const sink: LogSink = { write: (m) => void written.push(m as LogMessage) };
        const c = (client = connect(`mongodb://${a.address}/?heartbeatFrequencyMS=500&appName=hblog&serverMonitoringMode=stream`, { logging: { ...logging, path: sink } }));
        const fed: LogMessage[] = [];
        c.log$.subscribe((m) => fed.push(m));
        const heartbeats: ClientEvent[] = [];
        c.events$.subscribe((e) => e.type.startsWith('ServerHeartbeat') && heartbeats.push(e));
        expect(await eventually(() => heartbeats.some((e) => e.type === 'ServerHeartbeatSucceeded') && a.awaitingHelloCount === 1)).to.equal(true);
        // A failing heartbeat: the server closes the monitoring connection (unified test logging-standalone, "Failing heartbeat").
        a.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['hello', 'isMaster'], closeConnection: true, appName: 'hblog' } });
        expect(await eventually(() => heartbeats.some((e) => e.type === 'ServerHeartbeatFailed'))).to.equal(true);
        expect(await eventually(() => heartbeats.filter((e) => e.type === 'ServerHeartbeatSucceeded').length === 2)).to.equal(true);
        // Streaming again (500 ms after the failure): closed during that wait.
        expect(await eventually(() => a.awaitingHelloCount === 1, 2000)).to.equal(true);
        await c.close();

        const isHeartbeat = (m: LogMessage): m is TopologyLogMessage => m.component === 'topology' && m.fields.message.startsWith('Server heartbeat');
        const topology = written.filter(isHeartbeat);
        expect(topology.length, 'one message per heartbeat event').to.equal(heartbeats.length);
        expect(fed.filter(isHeartbeat), 'log$ carries the messages written').to.deep.equal(topology);
        const json = topology.map((m) => m.toJSON());
        const messages = json.map((m) => m.message);
        expect(messages.filter((m) => m === 'Server heartbeat started').length, 'every started one ends').to.equal(messages.filter((m) => m !== 'Server heartbeat started').length);
        expect(json.every((m) => m.c === 'topology' && m.s === 'debug' && m.topologyId === c.topologyId && m.serverHost === '127.0.0.1' && m.serverPort === Number(a.address.split(':')[1]) && m.driverConnectionId === 0)).to.equal(true);
        expect(c.topologyId).to.match(/^[0-9a-f]{24}$/);
        // Unified test logging-standalone, "Successful heartbeat": the first two messages.
        expect(json[0]).to.include({ message: 'Server heartbeat started', awaited: false }).and.not.have.property('serverConnectionId');
        expect(json[1]).to.include({ message: 'Server heartbeat succeeded', awaited: false });
        expect(json[1].serverConnectionId).to.be.a('number');
        expect(json[1].durationMS).to.be.a('number');
        expect(JSON.parse(json[1].reply as string)).to.include({ ok: 1 });
        const failure = json.find((m) => m.message === 'Server heartbeat failed')!;
        expect(failure).to.include({ awaited: true });
        expect(failure.durationMS).to.be.a('number');
        expect(failure.failure).to.include({ type: 'MongoNetworkError' });
        expect(json.at(-1)!.failure, 'the check the close ended').to.include({ type: 'MonitorClosedError' });
        // Written as its event is published, before the pool it readies says so.
        const order = written.map((m) => m.toJSON().message);
        expect(order.indexOf('Server heartbeat succeeded')).to.be.below(order.indexOf('Connection pool ready'));
      });
    }

    it('topology off (the default): no topology message, and nothing in log$ for it', async function () {
      const [a] = await start();
      const written: LogMessage[] = [];
      client = connect(`mongodb://${a.address}/?heartbeatFrequencyMS=500`, { logging: { componentSeverities: { connection: 'debug', topology: 'info' }, path: { write: (m) => void written.push(m as LogMessage) } } });
      const fed: LogMessage[] = [];
      client.log$.subscribe((m) => fed.push(m));
      expect(await client.command('admin', { ping: 1 })).to.include({ ok: 1 });
      await client.close();
      expect(written.length).to.be.above(0);
      expect([...written, ...fed].filter((m) => m.component === 'topology')).to.deep.equal([]);
    });
  });

  it('selectPool() while a drain is under way still waits for a ready pool (only command() is refused at once), and fails with ClientClosedError as the drain closes the client', async function () {
    const port = await closedPort();
    client = connect(`mongodb://127.0.0.1:${port}/`, { scheduler: new VirtualClock() });
    const drained = client.drain();
    const selected = client.selectPool().catch((e: unknown) => e);
    await drained;
    expect(await selected).to.be.instanceOf(ClientClosedError);
  });

  it("a ServerSelectionError's cause is the newest of the hosts' failed checks", async function () {
    const port = await closedPort();
    const clock = new VirtualClock();
    client = connect(`mongodb://127.0.0.1:${port},127.0.0.2:${port},127.0.0.3:${port}/?serverSelectionTimeoutMS=300`, { scheduler: clock });
    const failed: Error[] = [];
    client.events$.subscribe((e) => void (e.type === 'ServerHeartbeatFailed' && failed.push(e.error)));
    expect(await eventually(() => failed.length === 3)).to.equal(true);
    const waiting = client.command('admin', { ping: 1 }).catch((e: unknown) => e);
    clock.advance(300);
    const error = await waiting;
    expect(error).to.be.instanceOf(ServerSelectionError);
    expect((error as Error).cause).to.equal(failed[2]);
  });

  it('command() with timeoutMS equal to serverSelectionTimeoutMS: server selection runs out as serverSelectionTimeoutMS; without timeoutMS it waits that long too', async function () {
    const port = await closedPort();
    const clock = new VirtualClock();
    client = connect(`mongodb://127.0.0.1:${port}/?serverSelectionTimeoutMS=300`, { scheduler: clock });
    const settled: string[] = [];
    const bounded = client.command('admin', { ping: 1 }, { timeoutMS: 300 }).catch((e: unknown) => e).finally(() => settled.push('bounded'));
    const unbounded = client.command('admin', { ping: 1 }).catch((e: unknown) => e).finally(() => settled.push('unbounded'));
    clock.advance(299);
    await new Promise((r) => setImmediate(r));
    expect(settled, 'both still waiting 1 ms before serverSelectionTimeoutMS').to.deep.equal([]);
    clock.advance(1);
    for (const error of [await bounded, await unbounded]) {
      expect(error).to.be.instanceOf(ServerSelectionError);
      expect(error).to.deep.include({ serverSelectionTimeoutMS: 300, timeoutMS: undefined });
      expect((error as Error).message).to.match(/serverSelectionTimeoutMS=300 ms/).and.not.match(/operation's timeoutMS/);
    }
  });

  it('a command whose timeoutMS has exactly run out once its server is selected fails with WaitQueueTimeoutError, starting no checkout', async function () {
    const [a] = await start();
    const clock = new VirtualClock();
    const base = clock.now.bind(clock);
    let moved = 0;
    const reads: number[] = []; // what each read of the clock adds, in order
    clock.now = () => base() + (moved = reads.shift() ?? moved);
    client = connect(`mongodb://${a.address}/?maxPoolSize=1&heartbeatFrequencyMS=10000`, { scheduler: clock });
    expect(await client.command('admin', { ping: 1 })).to.include({ ok: 1 });
    const pool = [...client.pools.values()][0];
    const held = await pool.checkOut();
    const started: unknown[] = [];
    client.events$.subscribe((e) => void (e.type === 'ConnectionCheckOutStarted' && started.push(e)));
    reads.push(0, 5); // the command starts at +0; the server is selected at +5, its timeoutMS
    const outcome = client.command('admin', { ping: 1 }, { timeoutMS: 5 }).catch((e: unknown) => e);
    const settledAtOnce = await Promise.race([outcome, new Promise((r) => setImmediate(() => r('still waiting')))]);
    pool.checkIn(held);
    expect(reads, 'the clock read twice').to.deep.equal([]);
    expect(settledAtOnce).to.be.instanceOf(WaitQueueTimeoutError);
    expect(settledAtOnce).to.deep.include({ timeoutMS: 5 });
    expect(started, 'no checkout started').to.deep.equal([]);
  });

  it("a checkout that ran out of the pool's waitQueueTimeoutMS keeps that error, also within a longer timeoutMS and when close() comes before it settles", async function () {
    const [a] = await start();
    const clock = new VirtualClock();
    client = connect(`mongodb://${a.address}/?maxPoolSize=1&waitQueueTimeoutMS=300&heartbeatFrequencyMS=10000`, { scheduler: clock });
    expect(await client.command('admin', { ping: 1 })).to.include({ ok: 1 });
    const pool = [...client.pools.values()][0];
    const held = await pool.checkOut();
    const plain = client.command('admin', { ping: 1 }).catch((e: unknown) => e);
    const bounded = client.command('admin', { ping: 1 }, { timeoutMS: 5000 }).catch((e: unknown) => e);
    expect(await eventually(() => pool.snapshot().waitQueueLength === 2)).to.equal(true);
    clock.advance(300);
    const closed = client.close(); // the checkouts failed already: their errors are not the close's
    for (const error of [await plain, await bounded]) {
      expect(error).to.be.instanceOf(WaitQueueTimeoutError);
      expect(error).to.deep.include({ waitQueueTimeoutMS: 300, timeoutMS: undefined });
    }
    pool.checkIn(held);
    await closed;
  });

  it('drain(): a command it refused fails with PoolClosedError, also when close() comes before that settles', async function () {
    const { c, held } = await pausedWithCommandInFlight();
    const drained = c.drain();
    const refused = c.command('admin', { ping: 1 }).catch((e: unknown) => e);
    await c.close();
    expect(await refused).to.be.instanceOf(PoolClosedError);
    await drained;
    expect(await held).to.be.instanceOf(ClientClosedError);
  });

  it('drain({ timeoutMS }): a command still in flight at the deadline is interrupted, and the drain ends then', async function () {
    const { c, clock, held } = await pausedWithCommandInFlight();
    const settled: string[] = [];
    const drained = c.drain({ timeoutMS: 100 }).finally(() => settled.push('drained'));
    clock.advance(99);
    await new Promise((r) => setImmediate(r));
    expect(settled).to.deep.equal([]);
    clock.advance(1);
    expect(await eventually(() => settled.length === 1), 'drained at its deadline').to.equal(true);
    await drained;
    expect(await held).to.be.instanceOf(Error);
  });

  it('drain() refuses a timeoutMS that is not a number of ms >= 0, naming it, and drains nothing', async function () {
    const port = await closedPort();
    client = connect(`mongodb://127.0.0.1:${port}/`, { scheduler: new VirtualClock() });
    for (const timeoutMS of [-1, Number.NaN, '100']) {
      const refused = await client.drain({ timeoutMS: timeoutMS as number }).catch((e: unknown) => e);
      expect(refused, String(timeoutMS)).to.be.instanceOf(InvalidOptionError).and.include({ option: 'timeoutMS' });
      expect((refused as Error).message).to.match(/timeoutMS must be a number of ms >= 0 \(0 means no deadline\)\)$/);
    }
    expect([...client.pools.values()][0].state).to.not.equal('closed');
  });

  it('close() leaves open a connection that other code checked out after a command ran on it, until it is checked in', async function () {
    const [a] = await start();
    client = connect(`mongodb://${a.address}/?maxPoolSize=1`);
    expect(await client.command('admin', { ping: 1 })).to.include({ ok: 1 });
    const pool = [...client.pools.values()][0];
    const connection = await pool.checkOut(); // the one the command ran on
    await client.close();
    expect(await connection.command('admin', { ping: 1 })).to.include({ ok: 1 });
    pool.checkIn(connection); // closed now
    expect(await eventually(() => a.openConnections === 0)).to.equal(true);
  });

  it('a log sink that fails is switched off for the whole client at its first failure, with one warning', async function () {
    const [a, b] = await start(2, { mongos: true });
    let calls = 0;
    const sink = {
      write() {
        calls++;
        throw new Error('log service unavailable');
      },
    };
    const warnings = await warningsOf(async () => {
      client = connect(`mongodb://${a.address},${b.address}/?maxPoolSize=3&unknownOption=1`, { logging: { componentSeverities: { default: 'debug' }, path: sink } });
      for (let i = 0; i < 4; i++) await client.command('admin', { ping: 1 });
      await client.close();
    });
    expect(calls, 'one client, one destination: tried once').to.equal(1);
    expect(warnings.map((w) => w.message)).to.deep.equal(['rxcmap: the log sink threw (log service unavailable); logging to it stopped']);
  });

  describe('connection string warnings on the log feed (component client, level warn)', function () {
    function logged(uri: string, severities: object) {
      const written: LogMessage[] = [];
      const sink: LogSink = { write: (m) => written.push(m as LogMessage) };
      client = connect(uri, { logging: { componentSeverities: severities as never, path: sink } });
      const received: LogMessage[] = [];
      client.log$.subscribe((m) => received.push(m));
      return { written, received };
    }

    it('logs one warn message per warning, to the destination and to every log$ subscriber, never with a password', async function () {
      const { written, received } = logged('mongodb://alice:Pw-s3cret@127.0.0.1:1/?maxPoolSze=5&tlsCertificateKeyFilePasword=Pw-s3cret', { client: 'warn' });
      const expected = ['unknown option maxPoolSze is ignored (did you mean maxPoolSize?)', 'unknown option tlsCertificateKeyFilePasword is ignored (did you mean tlsCertificateKeyFilePassword?)'];
      expect(client!.warnings).to.deep.equal(expected);
      for (const messages of [written, received]) {
        expect(messages.map((m) => [m.component, m.level, m.render()])).to.deep.equal(expected.map((w) => ['client', 'warn', w]));
      }
      const { t, ...json } = written[0].toJSON();
      expect(t).to.be.a('string');
      expect(json).to.deep.equal({ c: 'client', s: 'warn', message: expected[0] });
      const late: LogMessage[] = [];
      client!.log$.subscribe((m) => late.push(m));
      expect(late, 'a late subscriber receives them too').to.have.length(2);
      expect(JSON.stringify(written) + written.map((m) => m.render()).join()).to.not.include('Pw-s3cret');
      await client!.close();
    });

    it('logs nothing when the client component is off or above warn, and nothing for a URI without warnings', async function () {
      for (const severities of [{}, { client: 'off' }, { client: 'error' }, { connection: 'debug', client: 'off' }]) {
        const { written, received } = logged('mongodb://127.0.0.1:1/?fooBar=1', severities);
        expect(client!.warnings, JSON.stringify(severities)).to.deep.equal(['unknown option fooBar is ignored']);
        expect(written.filter((m) => m.component === 'client'), JSON.stringify(severities)).to.deep.equal([]);
        expect(received.filter((m) => m.component === 'client'), JSON.stringify(severities)).to.deep.equal([]);
        await client!.close();
      }
      const { written } = logged('mongodb://127.0.0.1:1/?maxPoolSize=5', { client: 'trace' });
      expect(written).to.deep.equal([]);
    });
  });

  it('load-balanced mode from the options, with directConnection=true or a replicaSet (from the URI or the options), is an error as in the URI', function () {
    const cases: [string, Parameters<typeof connect>[1], RegExp][] = [
      ['mongodb://127.0.0.1:1/?directConnection=true', { loadBalanced: true }, /directConnection=true/],
      ['mongodb://127.0.0.1:1/?replicaSet=rs', { loadBalanced: true }, /replicaSet/],
      ['mongodb://127.0.0.1:1/?loadBalanced=true', { directConnection: true }, /directConnection=true/],
      ['mongodb://127.0.0.1:1/', { loadBalanced: true, directConnection: true }, /directConnection=true/],
      ['mongodb://127.0.0.1:1/?loadBalanced=false&replicaSet=rs', { loadBalanced: true }, /replicaSet/],
    ];
    for (const [uri, options, reason] of cases) {
      let made: Client | undefined;
      let error: unknown;
      try {
        made = connect(uri, options);
      } catch (e) {
        error = e;
      }
      void made?.close();
      expect(error, `${uri} with ${JSON.stringify(options)}`).to.be.instanceOf(InvalidOptionError).and.include({ option: 'loadBalanced' });
      expect((error as Error).message).to.match(reason);
    }
    // Overridden to false by the options: not load-balanced, nothing conflicts.
    const c = connect('mongodb://127.0.0.1:1/?directConnection=true', { loadBalanced: false });
    expect(c.monitors.size).to.equal(1);
    void c.close();
  });

  it('load-balanced: one pool, ready at once, no monitor', async function () {
    const [a] = await start(1, { loadBalancedServices: 1 });
    client = connect(`mongodb://${a.address}/?loadBalanced=true`);
    expect(client.monitors.size).to.equal(0);
    expect(await client.command('admin', { ping: 1 })).to.include({ ok: 1 });
    expect([...client.pools.values()][0].snapshot().serviceGenerations).to.have.length(1);
  });

  it('load-balanced: a subscriber attached right after connect() sees ConnectionPoolCreated, then ConnectionPoolReady, in events$ and log$', async function () {
    const [a] = await start(1, { loadBalancedServices: 1 });
    const written: string[] = [];
    client = connect(`mongodb://${a.address}/?loadBalanced=true`, {
      logging: { componentSeverities: { connection: 'debug' }, path: { write: (m) => void written.push(String((m.toJSON() as { message?: unknown }).message)) } },
    });
    const events: string[] = [];
    const messages: string[] = [];
    client.events$.subscribe((e) => events.push(e.type));
    client.log$.subscribe((m) => messages.push(String(m.toJSON().message)));
    expect([...client.pools.values()][0].state, 'ready at once').to.equal('ready');
    await client.command('admin', { ping: 1 });
    expect(events.slice(0, 3)).to.deep.equal(['ConnectionPoolCreated', 'ConnectionPoolReady', 'ConnectionCheckOutStarted']);
    expect(events.filter((t) => t === 'ConnectionPoolReady')).to.have.length(1);
    expect(messages.slice(0, 3)).to.deep.equal(['Connection pool created', 'Connection pool ready', 'Connection checkout started']);
    expect(messages, 'log$ shows what the destination has').to.deep.equal(written);
    const later: string[] = [];
    client.events$.subscribe((e) => later.push(e.type)).unsubscribe();
    expect(later, 'a subscriber after the first command').to.deep.equal(['ConnectionPoolCreated', 'ConnectionPoolReady']);
    await client.close();
    const afterClose: string[] = [];
    client.events$.subscribe((e) => afterClose.push(e.type)).unsubscribe();
    client.log$.subscribe((m) => afterClose.push(String(m.toJSON().message))).unsubscribe();
    expect(afterClose, 'a closed pool is not said to be ready').to.deep.equal(['ConnectionPoolCreated', 'Connection pool created']);
  });

  it('load-balanced: a checkout or close() started from the first events$ or log$ callback comes after ConnectionPoolReady', async function () {
    const [a] = await start(1, { loadBalancedServices: 1 });
    client = connect(`mongodb://${a.address}/?loadBalanced=true`, { logging: { componentSeverities: { connection: 'debug' }, path: { write() {} } } });
    const pool = [...client.pools.values()][0];
    const events: string[] = [];
    const messages: string[] = [];
    const checkOut = (): void => void pool.checkOut().then((c) => pool.checkIn(c));
    client.events$.subscribe((e) => {
      events.push(e.type);
      if (events.length === 1) checkOut();
    });
    client.log$.subscribe((m) => {
      messages.push(String(m.toJSON().message));
      if (messages.length === 1) checkOut();
    });
    expect(events.slice(0, 3)).to.deep.equal(['ConnectionPoolCreated', 'ConnectionPoolReady', 'ConnectionCheckOutStarted']);
    expect(events.filter((t) => t === 'ConnectionPoolReady')).to.have.length(1);
    expect(messages.slice(0, 3)).to.deep.equal(['Connection pool created', 'Connection pool ready', 'Connection checkout started']);
    expect(messages.filter((t) => t === 'Connection pool ready')).to.have.length(1);
    const closing: string[] = [];
    const c2 = connect(`mongodb://${a.address}/?loadBalanced=true`);
    c2.events$.subscribe((e) => {
      closing.push(e.type);
      if (closing.length === 1) void c2.close();
    });
    expect(closing.slice(0, 2)).to.deep.equal(['ConnectionPoolCreated', 'ConnectionPoolReady']);
    expect(closing.filter((t) => t === 'ConnectionPoolReady')).to.have.length(1);
    await c2.close();
  });

  it('load-balanced: a command whose checkout runs out of timeoutMS says what holds the pool, in the load balancer spec\'s words', async function () {
    // Embedded endpoint only: it plays the load balancer (loadBalancedServices), which MONGODB_URI's server is not.
    const [a] = await start(1, { loadBalancedServices: 1 });
    const clock = new VirtualClock();
    client = connect(`mongodb://${a.address}/?loadBalanced=true&maxPoolSize=1`, { scheduler: clock });
    const pool = [...client.pools.values()][0];
    const cursor = pool.checkOut({ purpose: 'cursor' }).then((c) => c);
    expect(await eventually(() => pool.snapshot().inUseConnectionCount === 1)).to.equal(true);
    await cursor;
    const waited = client.command('admin', { ping: 1 }, { timeoutMS: 200 }).catch((e: unknown) => e);
    expect(await eventually(() => pool.snapshot().waitQueueLength === 1)).to.equal(true);
    clock.advance(200);
    const error = await waited;
    expect(error).to.be.instanceOf(WaitQueueTimeoutError);
    expect(error).to.deep.include({ timeoutMS: 200, maxPoolSize: 1 });
    expect((error as Error).message).to.equal(
      'Timeout waiting for connection from the connection pool. maxPoolSize: 1, connections in use by cursors: 1, ' +
        'connections in use by transactions: 0, connections in use by other operations: 0',
    );
  });

  it('load-balanced: a command failing with a network error (not a timeout) clears its connection\'s service once, not the pool', async function () {
    const { a, pool, events, pings } = await loadBalancedClient();
    // Four commands in flight together, one per connection (two per service), each find their connection closed.
    a.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 4 }, data: { failCommands: ['ping'], closeConnection: true } });
    for (const error of await pings(4)) {
      expect(error).to.be.instanceOf(MongoNetworkError);
      expect(error).to.not.be.instanceOf(MongoNetworkTimeoutError);
    }
    const cleared = events.filter((e) => e.type === 'ConnectionPoolCleared') as Array<{ serviceId?: string }>;
    expect(cleared.map((e) => e.serviceId).sort(), 'once per service: the second failure of each is of a connection the first made stale').to.deep.equal(
      a.services.map((id) => id.toHexString()).sort(),
    );
    expect(pool.state, 'load-balanced clears never pause').to.equal('ready');
    // Each closed for its own network error, which the events then show, not as stale.
    const closed = events.filter((e) => e.type === 'ConnectionClosed') as Array<{ reason: string; error?: Error }>;
    expect(closed.map((e) => e.reason)).to.deep.equal(['error', 'error', 'error', 'error']);
    for (const e of closed) expect(e.error).to.be.instanceOf(MongoNetworkError);
    expect(await client!.command('admin', { ping: 1 })).to.include({ ok: 1 });
  });

  it('load-balanced: a command reads its service\'s generation by one lookup, building no snapshot() of the pool (every service copied) per command', async function () {
    const { a, pool, pings } = await loadBalancedClient();
    let snapshots = 0;
    const snapshot = pool.snapshot.bind(pool);
    pool.snapshot = () => {
      snapshots++;
      return snapshot();
    };
    expect(await pings(4)).to.deep.equal([undefined, undefined, undefined, undefined]);
    a.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['ping'], closeConnection: true } });
    expect(await pings(1)).to.have.length(1);
    expect(snapshots).to.equal(0);
    expect(pool.snapshot().serviceGenerations.map((g) => g.generation).sort(), 'the failed command still cleared its service').to.deep.equal([0, 1]);
  });

  describe('servers whose wire versions rxcmap does not speak (server selection spec: "If the topology wire version is invalid, raise an error")', function () {
    /** A client of `a` (heartbeatFrequencyMS 10 s, serverSelectionTimeoutMS 30 s), its events recorded. */
    function clientOf(a: EmbeddedServer, query = '') {
      client = connect(`mongodb://${a.address}/?serverSelectionTimeoutMS=30000${query}`);
      const events: ClientEvent[] = [];
      client.events$.subscribe((e) => events.push(e));
      return { c: client, count: (type: string) => events.filter((e) => e.type === type).length };
    }

    for (const [what, options] of [['too old (MongoDB 4.0, maxWireVersion 7)', { maxWireVersion: 7 }], ['too new (minWireVersion 26)', { maxWireVersion: 30, minWireVersion: 26 }]] as const) {
      it(`a server ${what}: command() fails with IncompatibleServerError as the check fails, not at serverSelectionTimeoutMS, and at once from then on; no pool connection is made`, async function () {
        const [a] = await start(1, options);
        const { c, count } = clientOf(a);
        const started = Date.now();
        const first = await c.command('admin', { ping: 1 }).catch((e: unknown) => e);
        expect(first).to.be.instanceOf(IncompatibleServerError).and.include({ address: a.address, maxWireVersion: options.maxWireVersion });
        expect(Date.now() - started, 'ms to the first error').to.be.below(2000);
        const later = Date.now();
        for (let i = 0; i < 50; i++) expect(await c.command('admin', { ping: 1 }).catch((e: unknown) => e)).to.equal(first);
        expect(await c.selectPool().catch((e: unknown) => e)).to.equal(first);
        // Each waiting for the next check (500 ms after the last) instead, they would take some 25 s.
        expect(Date.now() - later, 'ms for 51 more selections').to.be.below(5000);
        expect([count('ConnectionCreated'), a.connectionsAccepted], 'pool connections, endpoint connections').to.deep.equal([0, 1]);
        expect([count('ServerHeartbeatFailed'), count('ConnectionPoolReady')]).to.deep.equal([1, 0]);
      });
    }

    it('an incompatible host fails the selection even while another host is ready (the topology is incompatible)', async function () {
      const [good] = await start(1);
      const [, old] = await start(1, { maxWireVersion: 7 });
      client = connect(`mongodb://${good.address},${old.address}/?serverSelectionTimeoutMS=30000`);
      const failed = new Promise<void>((resolve) => client!.events$.subscribe((e) => e.type === 'ServerHeartbeatFailed' && resolve()));
      await failed;
      expect(await client.command('admin', { ping: 1 }).catch((e: unknown) => e)).to.be.instanceOf(IncompatibleServerError).and.include({ address: old.address });
    });
  });

  describe('state change errors ("not writable primary", "node is recovering") on the embedded endpoint', function () {
    // Embedded only: replies a server sends of itself (writeConcernError, topologyVersion, a 4.0 server's codes) are
    // made by command handlers, which MONGODB_URI's server does not have.
    async function pollingOn(a: EmbeddedServer, query = '') {
      const clock = new VirtualClock();
      client = connect(`mongodb://${a.address}/?heartbeatFrequencyMS=10000&serverMonitoringMode=poll${query}`, { scheduler: clock });
      const pool = [...client.pools.values()][0];
      const events: ClientEvent[] = [];
      client.events$.subscribe((e) => events.push(e));
      const count = (type: string) => events.filter((e) => e.type === type).length;
      expect(await client.command('admin', { ping: 1 })).to.include({ ok: 1 });
      return { clock, pool, count, events };
    }
    // Lets a check that the advanced clock started, if any, emit its ServerHeartbeatStarted (a few microtasks later).
    const settle = (): Promise<unknown> => new Promise((r) => setImmediate(r));

    it('a writeConcernError with a state change code counts as the error (its reply still returned as is); writeErrors do not', async function () {
      const [a] = await start();
      let reply: Record<string, unknown> = { ok: 1, n: 1, writeErrors: [{ index: 0, code: 91, errmsg: 'node is shutting down' }] };
      a.handle('insert', () => reply);
      const { clock, pool, count } = await pollingOn(a);
      const checks = count('ServerHeartbeatStarted');
      expect(await client!.command('test', { insert: 'c', documents: [{}] })).to.deep.include({ n: 1 });
      clock.advance(500);
      await settle();
      expect([count('ConnectionPoolCleared'), count('ServerHeartbeatStarted')], 'writeErrors are not checked').to.deep.equal([0, checks]);
      reply = { ok: 1, n: 1, writeConcernError: { code: 91, codeName: 'ShutdownInProgress', errmsg: 'Replication is being shut down' } };
      const returned = await client!.command('test', { insert: 'c', documents: [{}] });
      expect(returned, 'the reply reaches the caller unchanged').to.deep.equal(reply);
      expect(count('ConnectionPoolCleared')).to.equal(1);
      const refused = await pool.checkOut().then(undefined, (e: unknown) => e);
      expect((refused as Error).cause).to.be.instanceOf(MongoServerError).and.include({ code: 91, message: 'Replication is being shut down' });
      clock.advance(500);
      expect(await eventually(() => count('ServerHeartbeatStarted') === checks + 1 && pool.state === 'ready')).to.equal(true);
    });

    it('a state change error without a code is read by its message ("not master"): an immediate check, the pool kept', async function () {
      const [a] = await start(1, { maxWireVersion: 8 });
      a.handle('find', () => ({ ok: 0, errmsg: 'not master' }));
      const { clock, pool, count } = await pollingOn(a);
      const checks = count('ServerHeartbeatStarted');
      const error = await client!.command('test', { find: 'c' }).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(MongoServerError).and.include({ code: undefined, message: 'not master' });
      expect([count('ConnectionPoolCleared'), pool.state]).to.deep.equal([0, 'ready']);
      clock.advance(500);
      expect(await eventually(() => count('ServerHeartbeatStarted') === checks + 1), 'an immediate check').to.equal(true);
    });

    it('a 4.2 server (maxWireVersion 8) keeps its pool on a "not writable primary" error, as any later server', async function () {
      const [a] = await start(1, { maxWireVersion: 8 });
      a.handle('find', () => ({ ok: 0, code: 10107, errmsg: 'not primary' }));
      const { clock, pool, count } = await pollingOn(a);
      const checks = count('ServerHeartbeatStarted');
      expect(await client!.command('test', { find: 'c' }).catch((e: unknown) => e)).to.be.instanceOf(MongoServerError).and.include({ code: 10107 });
      expect([count('ConnectionPoolCleared'), pool.state]).to.deep.equal([0, 'ready']);
      clock.advance(500);
      expect(await eventually(() => count('ServerHeartbeatStarted') === checks + 1), 'an immediate check').to.equal(true);
    });

    it('a state change error of a connection older than the last clear is stale: nothing is cleared or checked again', async function () {
      const [a] = await start();
      let reply: (r: Record<string, unknown>) => void = () => undefined;
      a.handle('find', () => new Promise((resolve) => (reply = resolve)));
      const { clock, pool, count } = await pollingOn(a);
      const held = client!.command('test', { find: 'c' }).catch((e: unknown) => e);
      expect(await eventually(() => pool.snapshot().inUseConnectionCount === 1)).to.equal(true);
      // The pool is cleared and readied again by a check while the command is held on its connection of generation 0.
      pool.clear();
      client!.monitors.get(pool.address)!.requestCheck();
      clock.advance(500);
      expect(await eventually(() => pool.state === 'ready')).to.equal(true);
      const checks = count('ServerHeartbeatStarted');
      reply({ ok: 0, code: 91, errmsg: 'shutting down' }); // no topologyVersion: only its generation says it is stale
      expect(await held).to.be.instanceOf(MongoServerError).and.include({ code: 91 });
      clock.advance(500);
      await settle();
      expect([count('ConnectionPoolCleared'), pool.state, count('ServerHeartbeatStarted')]).to.deep.equal([1, 'ready', checks]);
    });

    it('an error whose topologyVersion is not newer than the server\'s last is stale and ignored; a newer one counts, and is remembered', async function () {
      const [a] = await start();
      let counter = 0;
      a.handle('find', () => ({ ok: 0, code: 11600, codeName: 'InterruptedAtShutdown', errmsg: 'interrupted at shutdown', topologyVersion: { processId: a.topologyVersion.processId, counter: Long.fromNumber(counter) } }));
      const { clock, pool, count } = await pollingOn(a);
      const checks = count('ServerHeartbeatStarted');
      // The monitor's last reply carried counter 0: an error with counter 0 says nothing new.
      await client!.command('test', { find: 'c' }).catch((e: unknown) => e);
      clock.advance(500);
      await settle();
      expect([count('ConnectionPoolCleared'), count('ServerHeartbeatStarted'), pool.state]).to.deep.equal([0, checks, 'ready']);
      // Counter 1 is newer: the pool is cleared, and the server's description now holds counter 1.
      counter = 1;
      await client!.command('test', { find: 'c' }).catch((e: unknown) => e);
      expect(count('ConnectionPoolCleared')).to.equal(1);
      // The monitor has not checked yet: another error with counter 1, on a connection of the new generation, is stale.
      // As a check would (the pool ready, the server a standalone again), but leaving the server's topologyVersion as
      // the error left it.
      pool.ready();
      const servers = (client as unknown as { topology: { servers: Map<string, { type: string }> } }).topology.servers;
      servers.set(pool.address, { ...servers.get(pool.address)!, type: 'Standalone' });
      await client!.command('test', { find: 'c' }).catch((e: unknown) => e);
      expect(count('ConnectionPoolCleared'), 'not cleared again by an error as old as the last').to.equal(1);
      // A different processId (a restarted server) always counts.
      a.handle('find', () => ({ ok: 0, code: 91, errmsg: 'shutting down', topologyVersion: { processId: new ObjectId(), counter: Long.fromNumber(0) } }));
      await client!.command('test', { find: 'c' }).catch((e: unknown) => e);
      expect(count('ConnectionPoolCleared')).to.equal(2);
    });

    it('a check answered before a state change error that counted, with an older topologyVersion, does not ready the pool', async function () {
      const [a] = await start();
      const { clock, pool, count } = await pollingOn(a);
      const hello = (a as unknown as { handlers: Map<string, CommandHandler> }).handlers.get('hello')!;
      // The next hello (the monitor's periodic check) is answered with the server's state when it arrived, but its
      // reply reaches the client only once `release` is called.
      let hold = true;
      let arrived = false;
      let release!: () => void;
      const released = new Promise<void>((r) => (release = r));
      a.handle('hello', async (command, info) => {
        if (!hold) return hello(command, info);
        hold = false;
        arrived = true;
        const reply = await hello(command, info);
        await released;
        return reply;
      });
      const succeeded = count('ServerHeartbeatSucceeded');
      clock.advance(10000);
      expect(await eventually(() => arrived), 'the periodic check is under way').to.equal(true);
      // The server enters quiesce mode (shutting down): its topologyVersion goes up, and a command fails with the new
      // one, as mongod's shutdown errors carry it in that mode only.
      a.changeTopology();
      a.handle('find', () => ({ ok: 0, code: 91, codeName: 'ShutdownInProgress', errmsg: 'The server is in quiesce mode and will shut down', topologyVersion: a.topologyVersion }));
      expect(await client!.command('test', { find: 'c' }).catch((e: unknown) => e)).to.be.instanceOf(MongoServerError).and.include({ code: 91 });
      expect([count('ConnectionPoolCleared'), pool.state]).to.deep.equal([1, 'paused']);
      release();
      expect(await eventually(() => count('ServerHeartbeatSucceeded') === succeeded + 1), 'the held check ends').to.equal(true);
      await settle();
      expect(pool.state, 'a reply older than the error says nothing newer of the server').to.equal('paused');
      // A command waiting for the server requests a check; its reply is as new as the error's: the pool is ready again.
      const pinged = client!.command('admin', { ping: 1 });
      await settle();
      clock.advance(500);
      expect(await pinged).to.include({ ok: 1 });
      expect(count('ConnectionPoolCleared'), 'cleared once').to.equal(1);
    });

    it('load-balanced: no error touches the pool\'s state; "node is shutting down" clears only its connection\'s service, once', async function () {
      const { a, pool, events, pings } = await loadBalancedClient();
      a.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 4 }, data: { failCommands: ['ping'], errorCode: 10107 } });
      for (const error of await pings(4)) expect(error).to.be.instanceOf(MongoServerError).and.include({ code: 10107 });
      expect(events.filter((e) => e.type === 'ConnectionPoolCleared'), 'not writable primary from a 4.2+ service').to.deep.equal([]);
      a.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 4 }, data: { failCommands: ['ping'], errorCode: 91 } });
      for (const error of await pings(4)) expect(error).to.be.instanceOf(MongoServerError).and.include({ code: 91 });
      const cleared = events.filter((e) => e.type === 'ConnectionPoolCleared') as Array<{ serviceId?: string }>;
      expect(cleared.map((e) => e.serviceId).sort(), 'once per service').to.deep.equal(a.services.map((id) => id.toHexString()).sort());
      expect(pool.state, 'load-balanced clears never pause').to.equal('ready');
      expect(await client!.command('admin', { ping: 1 })).to.include({ ok: 1 });
    });
  });

  describe(`server selection (${process.env.MONGODB_URI ? 'MONGODB_URI' : 'embedded endpoint'})`, function () {
    let endpoint: TestEndpoint;
    /** A unique appName, so the fail point catches this client's connections only (the server may be shared). */
    const appName = `rxcmap-client-${process.pid}`;

    before(async function () {
      endpoint = await startTestEndpoint();
    });
    after(() => stopTestEndpoint(endpoint));
    function failPoint(this: Mocha.Context, command: Record<string, unknown>): Promise<void> {
      return setFailPoint(this, endpoint, command);
    }

    it('an `await using` declaration closes the client when its block is left by a throw, before the code after it runs', async function () {
      const thrown = new Error('the block failed');
      let used: Client | undefined;
      const events: string[] = [];
      try {
        await using scoped = connect(`mongodb://${endpoint.address}/`, { ...endpoint.connectionOptions, appName });
        client = used = scoped;
        scoped.events$.subscribe((e) => {
          if (!e.type.startsWith('ServerHeartbeat')) events.push(e.type);
        });
        expect(await scoped.command('admin', { ping: 1 })).to.include({ ok: 1 });
        throw thrown;
      } catch (error) {
        expect(error).to.equal(thrown);
      }
      expect(events.at(-1)).to.equal('ConnectionPoolClosed');
      expect(await used!.command('admin', { ping: 1 }).catch((e: unknown) => e)).to.be.instanceOf(ClientClosedError);
      if (endpoint.embedded) expect(await eventually(() => endpoint.embedded!.openConnections === 0)).to.equal(true);
    });

    it('a waiting command() requests an immediate check at once, then every minHeartbeatFrequencyMS, not waiting heartbeatFrequencyMS', async function () {
      // The first two checks fail with a command error (no retry at once): the pool is not ready after either.
      await failPoint.call(this, { mode: { times: 2 }, data: { failCommands: ['hello', 'isMaster'], errorCode: 91, appName } });
      const clock = new VirtualClock();
      client = connect(`mongodb://${endpoint.address}/?heartbeatFrequencyMS=10000&serverSelectionTimeoutMS=30000`, {
        ...endpoint.connectionOptions,
        appName,
        scheduler: clock,
      });
      const heartbeats: string[] = [];
      client.events$.subscribe((e) => {
        if (e.type.startsWith('ServerHeartbeat')) heartbeats.push(e.type);
      });
      const settle = (): Promise<unknown> => new Promise((r) => setTimeout(r, 20));
      expect(await eventually(() => heartbeats.length === 2)).to.equal(true);
      expect(heartbeats).to.deep.equal(['ServerHeartbeatStarted', 'ServerHeartbeatFailed']);

      let settled = false;
      const reply = client.command('admin', { ping: 1 }).finally(() => (settled = true));
      // Requested at once: the check comes minHeartbeatFrequencyMS (500 ms) after the failed one ended.
      clock.advance(499);
      await settle();
      expect(heartbeats).to.have.length(2);
      clock.advance(1);
      expect(await eventually(() => heartbeats.length === 4)).to.equal(true);
      expect(heartbeats.slice(2)).to.deep.equal(['ServerHeartbeatStarted', 'ServerHeartbeatFailed']);
      // Still waiting, it requests again 500 ms after its first request.
      await settle();
      clock.advance(499);
      await settle();
      expect(heartbeats).to.have.length(4);
      expect(settled).to.equal(false);
      clock.advance(1);
      expect(await reply).to.include({ ok: 1 });
      expect(heartbeats.slice(4, 6)).to.deep.equal(['ServerHeartbeatStarted', 'ServerHeartbeatSucceeded']);
      expect(clock.now(), 'virtual ms waited').to.equal(1000);
    });

    it('a ServerSelectionError quotes no heartbeat error once the host\'s last check succeeded', async function () {
      await failPoint.call(this, { mode: { times: 1 }, data: { failCommands: ['hello', 'isMaster'], errorCode: 91, appName } });
      const clock = new VirtualClock();
      client = connect(`mongodb://${endpoint.address}/?heartbeatFrequencyMS=10000&serverSelectionTimeoutMS=300`, { ...endpoint.connectionOptions, appName, scheduler: clock });
      const pool = [...client.pools.values()][0];
      const heartbeats: string[] = [];
      client.events$.subscribe((e) => void (e.type.startsWith('ServerHeartbeat') && heartbeats.push(e.type)));
      expect(await eventually(() => heartbeats.length === 2)).to.equal(true);
      expect(heartbeats).to.deep.equal(['ServerHeartbeatStarted', 'ServerHeartbeatFailed']);
      clock.advance(10000);
      expect(await eventually(() => pool.state === 'ready')).to.equal(true);
      // The last check that ended succeeded (streaming, the next one is already waiting on the server).
      expect(heartbeats.filter((t) => t !== 'ServerHeartbeatStarted').at(-1)).to.equal('ServerHeartbeatSucceeded');
      // Paused by a clear, with the last check a success: selection ends before the next check may run (500 ms).
      pool.clear();
      const waiting = client.command('admin', { ping: 1 }).catch((e: unknown) => e);
      clock.advance(300);
      const error = await waiting;
      expect(error).to.be.instanceOf(ServerSelectionError);
      expect((error as Error).cause, 'the failed check before the success is not the cause').to.equal(undefined);
      expect((error as Error).message).to.not.match(/last check failed/);
    });

    it('a command failing with a network error (not a timeout) clears its pool once, and the monitor readies it again at an immediate check', async function () {
      const clock = new VirtualClock();
      client = connect(`mongodb://${endpoint.address}/?heartbeatFrequencyMS=10000&maxPoolSize=4`, { ...endpoint.connectionOptions, appName, scheduler: clock });
      const pool = [...client.pools.values()][0];
      const events: ClientEvent[] = [];
      client.events$.subscribe((e) => events.push(e));
      const count = (type: string, reason?: string) => events.filter((e) => e.type === type && (reason === undefined || (e as { reason?: string }).reason === reason)).length;
      const pings = () => Promise.all([0, 1, 2].map(() => client!.command('admin', { ping: 1 })));
      await pings();
      // An establishment the pings started but did not need (slower with authentication) may still be under way.
      expect(await eventually(() => pool.snapshot().pendingConnectionCount === 0)).to.equal(true);
      const established = count('ConnectionReady');
      expect(established, 'connections made by the concurrent commands').to.be.at.least(2);
      // The next two pings, in flight together on two connections, each find their connection closed by the server.
      await failPoint.call(this, { mode: { times: 2 }, data: { failCommands: ['ping'], closeConnection: true, appName } });
      const failed = await Promise.all([0, 1].map(() => client!.command('admin', { ping: 1 }).then(() => undefined, (e: unknown) => e)));
      for (const error of failed) {
        expect(error).to.be.instanceOf(MongoNetworkError);
        expect(error).to.not.be.instanceOf(MongoNetworkTimeoutError);
      }
      expect(count('ConnectionPoolCleared'), 'once: the second failure is of a connection the first clear made stale').to.equal(1);
      expect(pool.state).to.equal('paused');
      const checks = count('ServerHeartbeatStarted');
      clock.advance(500); // the check it requested, 500 ms (minHeartbeatFrequencyMS) after the last one
      expect(await eventually(() => pool.state === 'ready')).to.equal(true);
      // One check readied it; streaming, the awaitable hello that follows it at once is the only other one.
      const later = events.filter((e) => e.type === 'ServerHeartbeatStarted').slice(checks) as { awaited: boolean }[];
      expect(later.filter((e) => !e.awaited)).to.have.length(1);
      expect(later.length).to.be.at.most(2);
      expect(await client.command('admin', { ping: 1 })).to.include({ ok: 1 });
      // The two that failed, checked in after the clear, closed for their own network error (which the events then
      // show); the idle ones, found at the next checkout, as stale, none failing a command.
      const errors = events.filter((e) => e.type === 'ConnectionClosed' && e.reason === 'error') as Array<{ error?: Error }>;
      expect(errors.map((e) => e.error)).to.have.length(2).and.satisfy((all: unknown[]) => all.every((e) => e instanceof MongoNetworkError));
      expect(count('ConnectionClosed', 'stale')).to.equal(established - 2);
      expect(count('ConnectionClosed')).to.equal(established);
    });

    it('polling: a command failing with a network error (not a timeout) closes the monitoring connection: the next check opens a new one, not waiting connectTimeoutMS on the old one', async function () {
      if (endpoint.connectionOptions.tls) {
        console.log('      skipped: MONGODB_URI uses TLS, which the proxy finding the monitoring connection cannot read');
        return this.skip();
      }
      const proxy = await startWireProxy(endpoint.address);
      try {
        // Only the monitor sends hello after its handshake (handshakes are legacy hello, with `client`): its connection
        // is found, and then its hello is held back, as on a connection to a server gone without a FIN.
        let monitoring: number | undefined;
        let unresponsive = false;
        proxy.hooks = {
          request: (cmd, connection) => {
            if (Object.keys(cmd)[0] === 'hello' && cmd.client === undefined) monitoring = connection;
            return cmd;
          },
          hold: (cmd) => unresponsive && Object.keys(cmd)[0] === 'hello',
        };
        const clock = new VirtualClock();
        client = connect(`mongodb://${proxy.address}/?heartbeatFrequencyMS=10000&connectTimeoutMS=5000&serverMonitoringMode=poll`, { ...endpoint.connectionOptions, appName, scheduler: clock });
        const pool = [...client.pools.values()][0];
        const heartbeats: string[] = [];
        client.events$.subscribe((e) => void (e.type.startsWith('ServerHeartbeat') && heartbeats.push(e.type)));
        await client.command('admin', { ping: 1 });
        clock.advance(10_000);
        expect(await eventually(() => heartbeats.length === 4 && monitoring !== undefined)).to.equal(true);
        unresponsive = true;
        await failPoint.call(this, { mode: { times: 1 }, data: { failCommands: ['ping'], closeConnection: true, appName } });
        const error = await client.command('admin', { ping: 1 }).catch((e: unknown) => e);
        expect(error).to.be.instanceOf(MongoNetworkError);
        expect(error).to.not.be.instanceOf(MongoNetworkTimeoutError);
        expect(pool.state).to.equal('paused');
        expect(await eventually(() => !proxy.openConnections().includes(monitoring!)), 'the monitoring connection closed').to.equal(true);
        clock.advance(500); // the check the command requested, minHeartbeatFrequencyMS after the last one ended
        expect(await eventually(() => pool.state === 'ready', 1000), 'ready again at that check').to.equal(true);
        expect(heartbeats.slice(4)).to.deep.equal(['ServerHeartbeatStarted', 'ServerHeartbeatSucceeded']);
      } finally {
        await client?.close();
        client = undefined;
        await proxy.stop();
      }
    });

    /**
     * A polling client (requested checks then come at 500 virtual ms, not at the server's next streamed reply) with
     * `established` connections in its pool, and counters over its events.
     */
    async function pollingClient(this: Mocha.Context) {
      const clock = new VirtualClock();
      client = connect(`mongodb://${endpoint.address}/?heartbeatFrequencyMS=10000&maxPoolSize=4&serverMonitoringMode=poll`, { ...endpoint.connectionOptions, appName, scheduler: clock });
      const pool = [...client.pools.values()][0];
      const events: ClientEvent[] = [];
      client.events$.subscribe((e) => events.push(e));
      const count = (type: string, reason?: string) => events.filter((e) => e.type === type && (reason === undefined || (e as { reason?: string }).reason === reason)).length;
      await Promise.all([0, 1, 2].map(() => client!.command('admin', { ping: 1 })));
      expect(await eventually(() => pool.snapshot().pendingConnectionCount === 0)).to.equal(true);
      const established = count('ConnectionReady');
      expect(established, 'connections made by the concurrent commands').to.be.at.least(2);
      return { clock, pool, count, established };
    }

    /** Two pings in flight together, on two connections; what each failed with. */
    async function twoFailedPings(this: Mocha.Context, code: number): Promise<MongoServerError[]> {
      await failPoint.call(this, { mode: { times: 2 }, data: { failCommands: ['ping'], errorCode: code, appName } });
      // As a server that steps down or starts shutting down: its topology changed after the monitor's last check, so
      // the errors carry a newer topologyVersion than the client has. (The embedded endpoint sends its current one.)
      endpoint.embedded?.changeTopology();
      const failed = await Promise.all([0, 1].map(() => client!.command('admin', { ping: 1 }).then(() => undefined, (e: unknown) => e)));
      for (const error of failed) expect(error).to.be.instanceOf(MongoServerError).and.include({ code });
      // A server that sends its current topologyVersion with a fail point's error (mongod does for "not writable
      // primary" in a replica set) makes the error as old as the monitor's last reply: stale, rightly ignored. The
      // embedded tests cover that case.
      if (endpoint.embedded === undefined && (failed[0] as MongoServerError).response.topologyVersion !== undefined) {
        console.log('      skipped: the server sent its current topologyVersion with the fail point\'s error (a stale error)');
        this.skip();
      }
      return failed as MongoServerError[];
    }

    it('a command failing with "node is shutting down" (ShutdownInProgress, 91) clears its pool once and requests an immediate check that readies it', async function () {
      const { clock, pool, count, established } = await pollingClient.call(this);
      const checks = count('ServerHeartbeatStarted');
      const failed = await twoFailedPings.call(this, 91);
      expect(count('ConnectionPoolCleared'), 'once: the second failure is of a connection the first clear made stale').to.equal(1);
      expect(pool.state).to.equal('paused');
      const refused = await pool.checkOut().then(undefined, (e: unknown) => e);
      expect(refused).to.be.instanceOf(PoolClearedError);
      expect((refused as Error).cause, 'the clear\'s cause is the command\'s error').to.equal(failed[0]);
      clock.advance(500); // the requested check, minHeartbeatFrequencyMS after the last one ended
      expect(await eventually(() => pool.state === 'ready'), 'ready again at the requested check').to.equal(true);
      expect(count('ServerHeartbeatStarted')).to.equal(checks + 1);
      expect(await client!.command('admin', { ping: 1 })).to.include({ ok: 1 });
      expect(count('ConnectionClosed', 'stale'), 'every connection of the cleared generation').to.equal(established);
    });

    it('a command failing with "not writable primary" (NotWritablePrimary, 10107) from a 4.2+ server requests an immediate check and keeps the pool', async function () {
      const { clock, pool, count } = await pollingClient.call(this);
      const checks = count('ServerHeartbeatStarted');
      await twoFailedPings.call(this, 10107);
      expect(count('ConnectionPoolCleared'), 'a 4.2+ server that is not shutting down keeps its connections').to.equal(0);
      expect(pool.state).to.equal('ready');
      clock.advance(499);
      await new Promise((r) => setTimeout(r, 20));
      expect(count('ServerHeartbeatStarted'), 'not before minHeartbeatFrequencyMS').to.equal(checks);
      clock.advance(1);
      expect(await eventually(() => count('ServerHeartbeatStarted') === checks + 1), 'the requested check').to.equal(true);
      expect(await client!.command('admin', { ping: 1 })).to.include({ ok: 1 });
      expect(count('ConnectionClosed')).to.equal(0);
    });

    it('a network error of a connection older than the last clear clears nothing more', async function () {
      const server = endpoint.embedded;
      if (server === undefined) {
        console.log('      skipped: it resets connections server-side, which only the embedded endpoint can do');
        return this.skip();
      }
      const clock = new VirtualClock();
      client = connect(`mongodb://${endpoint.address}/?heartbeatFrequencyMS=10000`, { ...endpoint.connectionOptions, appName, scheduler: clock });
      const pool = [...client.pools.values()][0];
      const cleared: unknown[] = [];
      client.events$.subscribe((e) => void (e.type === 'ConnectionPoolCleared' && cleared.push(e)));
      await client.command('admin', { ping: 1 });
      // A command held by the server on a connection of generation 0 ...
      await failPoint.call(this, { mode: { times: 1 }, data: { failCommands: ['ping'], blockConnection: true, blockTimeMS: 2000, appName } });
      const held = client.command('admin', { ping: 1 }).then(() => undefined, (e: unknown) => e);
      expect(await eventually(() => pool.snapshot().inUseConnectionCount === 1), 'the held ping holds a connection').to.equal(true);
      // ... while the pool is cleared (generation 1) and readied again by a check.
      pool.clear();
      // Polling, the check requested comes 500 ms later; streaming, the server's reply to the topology change.
      client.monitors.get(pool.address)!.requestCheck();
      server.changeTopology();
      clock.advance(500);
      expect(await eventually(() => pool.state === 'ready')).to.equal(true);
      expect(cleared).to.have.length(1);
      // The held command's connection is reset (not the monitor's, awaiting hello): a network error, of generation 0.
      server.closeConnections((c) => !c.awaitingHello);
      const error = await held;
      expect(error).to.be.instanceOf(MongoNetworkError);
      expect(error).to.not.be.instanceOf(MongoNetworkTimeoutError);
      await new Promise((r) => setTimeout(r, 20));
      expect(cleared, 'no second clear').to.have.length(1);
      expect(pool.state).to.equal('ready');
    });

    it('a command failing with a server error that is no state change error rejects with that error, and clears nothing', async function () {
      client = connect(`mongodb://${endpoint.address}/?heartbeatFrequencyMS=10000`, { ...endpoint.connectionOptions, appName });
      const pool = [...client.pools.values()][0];
      const cleared: unknown[] = [];
      client.events$.subscribe((e) => void (e.type === 'ConnectionPoolCleared' && cleared.push(e)));
      await client.command('admin', { ping: 1 });
      await failPoint.call(this, { mode: { times: 1 }, data: { failCommands: ['ping'], errorCode: 2, appName } });
      const error = await client.command('admin', { ping: 1 }).then(() => undefined, (e: unknown) => e);
      expect(error).to.be.instanceOf(MongoServerError);
      expect(error).to.include({ code: 2 });
      expect(cleared).to.deep.equal([]);
      expect(pool.state).to.equal('ready');
    });

    it('a command that times out (a network timeout) clears nothing and leaves its server as its last check described it', async function () {
      client = connect(`mongodb://${endpoint.address}/?heartbeatFrequencyMS=10000`, { ...endpoint.connectionOptions, appName });
      const pool = [...client.pools.values()][0];
      const topology = (client as unknown as { topology: { servers: Map<string, { type: string }> } }).topology;
      const cleared: unknown[] = [];
      client.events$.subscribe((e) => void (e.type === 'ConnectionPoolCleared' && cleared.push(e)));
      await client.command('admin', { ping: 1 });
      const type = topology.servers.get(pool.address)!.type;
      expect(type).to.not.equal('Unknown');
      await failPoint.call(this, { mode: { times: 1 }, data: { failCommands: ['ping'], blockConnection: true, blockTimeMS: 1000, appName } });
      const error = await client.command('admin', { ping: 1 }, { timeoutMS: 200 }).then(() => undefined, (e: unknown) => e);
      expect(error).to.be.instanceOf(MongoNetworkTimeoutError);
      expect(cleared, 'no clear').to.deep.equal([]);
      expect(pool.state).to.equal('ready');
      expect(topology.servers.get(pool.address)!.type).to.equal(type);
    });
  });
});
