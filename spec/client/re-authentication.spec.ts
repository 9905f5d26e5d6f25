/**
 * Re-authentication after a failover, through the real pool (TCP, handshake, SCRAM): after a clear, no connection of
 * the old generation is checked out again, and every new connection runs a SCRAM conversation of its own against the
 * users the server has now (a new salt and iteration count, or a user that is gone or has another password).
 *
 * Runs against the embedded endpoint, whose users are changed with `setUsers` and which counts its SCRAM
 * conversations per users generation; or against the server in MONGODB_URI when it is set, whose user is re-created
 * with dropUser / createUser (the URI's credentials need those rights, else the tests are skipped, saying why).
 */
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { inspect } from 'node:util';
import type { Document } from 'bson';
import {
  AuthenticationError,
  ConnectionPool,
  MongoCredentials,
  MongoServerError,
  type Connection,
  type ConnectionPoolEvent,
} from '../../lib';
import type { EmbeddedServer } from '../../lib/testing';
import { spyOnDerivations } from '../support/derivations';
import { eventually, startTestEndpoint, type TestEndpoint } from '../support/endpoint';

/** The user the pool authenticates as, unique to this run on a shared server. */
const USERNAME = `rxcmap_reauth_${process.pid}`;
const PASSWORD = 'reauth-Pencil-7741';
/** The database the user may read (the commands that need authentication run there). */
const TEST_DB = 'rxcmap_reauth';

/** How a test changes the server's users, as a failover to a primary whose users differ does. */
interface Users {
  /** (Re-)creates the user with `password`: a new salt; on the embedded endpoint, also `iterations`. */
  recreate(password: string, iterations: number): Promise<void>;
  /** Removes the user. */
  drop(): Promise<void>;
}

/** The embedded endpoint's users: the test user (and a bystander, so authentication stays required without it). */
function embeddedUsers(server: EmbeddedServer): Users {
  const bystander = { username: 'bystander', password: 'unused', iterations: 4096 };
  return {
    recreate: async (password, iterations) =>
      server.setUsers([bystander, { username: USERNAME, password, iterations, salt: randomBytes(16) }]),
    drop: async () => server.setUsers([bystander]),
  };
}

/** A real server's users, through user-management commands on `admin` (the URI's credentials). */
function serverUsers(endpoint: TestEndpoint): Users {
  const run = async (command: Document): Promise<void> => {
    const reply = await endpoint.adminCommand(command);
    if (reply.ok !== 1) throw new MongoServerError(reply);
  };
  const drop = (): Promise<void> =>
    run({ dropUser: USERNAME }).catch((e: unknown) => {
      if (!(e instanceof MongoServerError && e.codeName === 'UserNotFound')) throw e;
    });
  return {
    // The iteration count is a server parameter (scramSHA256IterationCount), left as the server has it.
    recreate: async (password) => {
      await drop();
      await run({ createUser: USERNAME, pwd: password, roles: [{ role: 'read', db: TEST_DB }] });
    },
    drop,
  };
}

const against = process.env.MONGODB_URI ? 'MONGODB_URI' : 'embedded endpoint';

describe(`re-authentication after a failover (ConnectionPool, ${against})`, function () {
  let endpoint: TestEndpoint | undefined;
  let users: Users;
  let pool: ConnectionPool | undefined;
  let credentials: MongoCredentials;
  /** Every pool event, in commit order. */
  let events: ConnectionPoolEvent[];
  /** The salted-password derivations the pool's credentials started. */
  let derivations: unknown[];
  /** The embedded endpoint's users generation the pool's generation 0 authenticates against. */
  let g0 = 0;
  /** Every connection a test checked out: destroyed after it, so a failed test leaves no socket open. */
  let held: Connection[] = [];

  before(async function () {
    endpoint = await startTestEndpoint();
    if (endpoint.embedded !== undefined) {
      users = embeddedUsers(endpoint.embedded);
      return;
    }
    if (endpoint.connectionOptions.credentials === undefined) {
      console.log('      skipped: MONGODB_URI has no credentials; changing users needs createUser and dropUser rights');
      this.skip();
    }
    users = serverUsers(endpoint);
    try {
      await users.recreate(PASSWORD, 4096);
    } catch (error) {
      const why = (error as Error).message;
      console.log(`      skipped: the server refused to create a user (createUser and dropUser rights needed): ${why}`);
      this.skip();
    }
  });
  after(async function () {
    if (endpoint?.embedded === undefined && users !== undefined) await users.drop().catch(() => undefined);
    await endpoint?.stop();
  });

  beforeEach(async function () {
    await users.recreate(PASSWORD, 4096); // generation 0 of the pool: salt S1, 4096 iterations
    g0 = endpoint!.embedded?.usersGeneration ?? 0;
    credentials = new MongoCredentials({ username: USERNAME, password: PASSWORD });
    derivations = spyOnDerivations(credentials, { ticks: 0 });
    events = [];
    pool = new ConnectionPool({
      address: endpoint!.address,
      maxPoolSize: 4,
      connectionOptions: { ...endpoint!.connectionOptions, appName: 'rxcmap-reauth', credentials },
    });
    pool.events$.subscribe((e) => events.push(e));
    pool.ready();
  });
  afterEach(function () {
    pool?.close();
    pool = undefined;
    for (const c of held.splice(0)) c.destroy();
  });

  /** Checks a connection out of the pool. */
  const checkOut = async (): Promise<Connection> => {
    const c = await pool!.checkOut();
    held.push(c);
    return c;
  };

  /** A command that needs an authenticated connection; resolves to its reply, rejects with the server's refusal. */
  const find = (c: Connection): Promise<Document> => c.command(TEST_DB, { find: 'reauth', filter: {}, limit: 1 });
  /** The users `c` is authenticated as, from the server (connectionStatus). */
  const authenticatedUsers = async (c: Connection): Promise<Document[]> =>
    (await c.command('admin', { connectionStatus: 1 })).authInfo.authenticatedUsers;
  /** What the embedded endpoint knows of `c` (matched by the server connection id from the handshake). */
  const serverSide = (server: EmbeddedServer, c: Connection) =>
    server.clientConnections().find((info) => info.id === c.server.serverConnectionId);
  const since = (index: number, type: ConnectionPoolEvent['type']): ConnectionPoolEvent[] =>
    events.slice(index).filter((e) => e.type === type);
  const closed = (id: number): ConnectionPoolEvent | undefined =>
    events.find((e) => e.type === 'ConnectionClosed' && e.connectionId === id);
  /** Waits for connection `id` to be closed; resolves to its ConnectionClosed event (undefined if it never was). */
  const closedEventually = async (id: number): Promise<ConnectionPoolEvent | undefined> => {
    await eventually(() => closed(id) !== undefined);
    return closed(id);
  };

  it('after a clear, no generation-0 connection is checked out, and each new one runs its own SCRAM conversation against the new salt', async function () {
    const p = pool!;
    const a = await checkOut();
    const b = await checkOut();
    for (const c of [a, b]) {
      expect(await find(c)).to.include({ ok: 1 });
      expect(c.generation).to.equal(0);
    }
    p.checkIn(b); // available, a stays in use
    expect(derivations, 'one derivation for salt S1, cached for the second connection').to.have.length(1);
    const embedded = endpoint!.embedded;
    if (embedded) expect(embedded.scramConversations(g0)).to.deep.equal({ started: 2, succeeded: 2, failed: 0 });

    // The failover: the new primary has the user re-created (same name and password, new salt and iteration count).
    await users.recreate(PASSWORD, 5000);
    const cleared = events.length;
    p.clear();
    p.ready();
    const [c, d] = await Promise.all([checkOut(), checkOut()]);

    const old = new Set([a.id, b.id]);
    const checkedOut = since(cleared, 'ConnectionCheckedOut').map((e) => (e as { connectionId: number }).connectionId);
    expect(checkedOut, 'checked out after the clear').to.have.members([c.id, d.id]);
    const reused = checkedOut.filter((id) => old.has(id));
    expect(reused, 'generation-0 connections checked out after the clear').to.deep.equal([]);
    expect([c.generation, d.generation]).to.deep.equal([1, 1]);
    expect(since(cleared, 'ConnectionCreated')).to.have.length(2);
    for (const conn of [c, d]) {
      expect(await find(conn), `connection ${conn.id}`).to.include({ ok: 1 });
      expect(await authenticatedUsers(conn)).to.deep.include({ user: USERNAME, db: 'admin' });
    }
    // One new derivation for the new salt, shared by both conversations; nothing reused from S1.
    expect(derivations, 'derivations').to.have.length(2);
    if (embedded) {
      const counts = embedded.scramConversations(g0 + 1);
      expect(counts, 'one full conversation per new connection').to.deep.equal({ started: 2, succeeded: 2, failed: 0 });
      for (const conn of [c, d]) {
        const info = serverSide(embedded, conn);
        expect(info, `connection ${conn.id}`).to.include({ usersGeneration: g0 + 1, saslConversations: 1 });
      }
      expect(serverSide(embedded, a), 'the in-use connection keeps its user').to.include({ usersGeneration: g0 });
    }

    expect(await closedEventually(b.id), 'the available generation-0 connection').to.include({ reason: 'stale' });
    p.checkIn(a);
    expect(await closedEventually(a.id), 'the in-use one, once checked in').to.include({ reason: 'stale' });

    // Authentication is per connection: a generation-1 connection checked out again does not authenticate again.
    p.checkIn(c);
    p.checkIn(d);
    const again = await checkOut();
    expect([c.id, d.id]).to.include(again.id);
    expect(await find(again)).to.include({ ok: 1 });
    p.checkIn(again);
    if (embedded) expect(embedded.scramConversations(g0 + 1).started).to.equal(2);
    expect(since(cleared, 'ConnectionCheckOutFailed')).to.deep.equal([]);
  });

  for (const [change, what] of [['gone', 'is gone'], ['password', 'has another password']] as const) {
    it(`when the user ${what} after the failover, new checkouts fail with an AuthenticationError, and generation-0 connections are closed as stale, never reused`, async function () {
      const p = pool!;
      const a = await checkOut();
      const b = await checkOut();
      p.checkIn(b); // available, a stays in use
      expect(await find(a)).to.include({ ok: 1 });

      if (change === 'gone') await users.drop();
      else await users.recreate('another-Secret-9313', 5000);
      const cleared = events.length;
      p.clear();
      p.ready();
      const error = await checkOut().then(
        (c) => {
          p.checkIn(c);
          return expect.fail(`checkout got connection ${c.id} (generation ${c.generation}) instead of failing`);
        },
        (e: unknown) => e,
      );

      expect(error).to.be.instanceOf(AuthenticationError);
      expect((error as Error).message).to.include(`"${USERNAME}"`);
      expect(since(cleared, 'ConnectionCheckedOut'), 'nothing checked out after the clear').to.deep.equal([]);
      const failures = since(cleared, 'ConnectionCheckOutFailed').map((e) => (e as { reason: string }).reason);
      expect(failures).to.deep.equal(['connectionError']);
      const embedded = endpoint!.embedded;
      if (embedded) {
        // Gone: refused at saslStart (no salt to send); another password: refused at the proof.
        const started = change === 'gone' ? 0 : 1;
        expect(embedded.scramConversations(g0 + 1)).to.deep.equal({ started, succeeded: 0, failed: 1 });
      }

      expect(await closedEventually(b.id), 'the available generation-0 connection').to.include({ reason: 'stale' });
      p.checkIn(a);
      expect(await closedEventually(a.id), 'the in-use one, once checked in').to.include({ reason: 'stale' });
      const everything = inspect([error, events], { depth: 10, showHidden: true });
      expect(everything).to.not.include(PASSWORD).and.not.include('another-Secret-9313');
    });
  }
});
