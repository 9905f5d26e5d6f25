/**
 * A deployment played by proxies in front of one server (the test endpoint, or MONGODB_URI's): each proxy answers
 * hello as a mongos, a standalone or a replica set member, so a client's server selection can be tested against real
 * connections whatever the server behind is.
 */
import { expect } from 'chai';
import { ObjectId, type Document } from 'bson';
import type { Client } from '../../lib';
import type { ServerType } from '../../lib/client/topology-description';
import { eventually, startTestEndpoint, type TestEndpoint } from './endpoint';
import { startWireProxy, type WireProxy } from './wire-proxy';

/** What a proxy in front of the test endpoint makes its server say it is (see `deployment`). */
export type Role =
  | { kind: 'mongos' }
  | { kind: 'standalone' }
  | ({ kind: 'primary'; electionId: ObjectId; setName?: string; tags?: Record<string, string> } & Configured)
  | ({ kind: 'secondary'; setName?: string; tags?: Record<string, string>; lagMS?: number } & Configured)
  | { kind: 'down' };

/** What a member's hello says of the set's configuration, when given (see `deployment` for the defaults). */
export interface Configured {
  /** Its `hosts`: the members as the configuration names them. */
  hosts?: readonly unknown[];
  /** Its `me`. */
  me?: unknown;
  /** Its `primary` (none by default). */
  primary?: string;
  /** Without `logicalSessionTimeoutMinutes` (a member of a deployment without sessions), when true. */
  noSessions?: boolean;
}

/** Elections in the order of the calls: each electionId greater than the one before. */
let elections = 0;
export function election(): ObjectId {
  return new ObjectId(`${'0'.repeat(16)}${(++elections).toString(16).padStart(8, '0')}`);
}

/**
 * `roles.length` proxies in front of one server (the embedded endpoint, or MONGODB_URI's), each answering hello as
 * its role says (a mongos, a replica set member of `rs0`, with its `tags`, and a `lastWrite` whose lastWriteDate is
 * `lagMS` (default 0) before now), read again at every hello, and the set's configuration (`hosts`: the proxies
 * playing members of its set; `me`: its own address; or as the role says, see {@link Configured}); a secondary refuses every other command with
 * NotPrimaryNoSecondaryOk (13435), as mongod refuses a read that does not allow secondaries.
 */
export async function deployment(endpoint: TestEndpoint, roles: Role[]): Promise<WireProxy[]> {
  const setOf = (role: Role): string | undefined => (role.kind === 'mongos' || role.kind === 'standalone' ? undefined : role.kind === 'down' ? 'rs0' : (role.setName ?? 'rs0'));
  const proxies: WireProxy[] = await Promise.all(roles.map(async (_, i) => {
    const proxy = await startWireProxy(endpoint.address);
    proxy.hooks = {
      reply: (reply, command) => {
        const name = Object.keys(command)[0]!.toLowerCase();
        const role = roles[i]!;
        if (name !== 'hello' && name !== 'ismaster') {
          if (role.kind !== 'secondary' || name === 'saslstart' || name === 'saslcontinue') return reply;
          const mode = (command.$readPreference as { mode?: unknown } | undefined)?.mode;
          if (mode !== undefined && mode !== 'primary') return reply;
          return { ok: 0, errmsg: 'not primary and secondaryOk=false', code: 13435, codeName: 'NotPrimaryNoSecondaryOk' };
        }
        // A member gone: its checks fail.
        if (role.kind === 'down') return { ok: 0, errmsg: 'the server is down', code: 6, codeName: 'HostUnreachable' };
        const { msg: _msg, setName: _setName, electionId: _electionId, setVersion: _setVersion, secondary: _secondary, isWritablePrimary: _w, ismaster: _m, hosts: _hosts, primary: _primary, tags: _tags, lastWrite: _lastWrite, ...rest } = reply;
        const writable = role.kind !== 'secondary';
        const legacy = name === 'ismaster';
        const answer: Document = { ...rest, ...(legacy ? { ismaster: writable } : { isWritablePrimary: writable }) };
        if (role.kind === 'mongos') return { ...answer, msg: 'isdbgrid' };
        if (role.kind === 'standalone') return answer;
        return {
          ...answer,
          setName: role.setName ?? 'rs0',
          setVersion: 1,
          secondary: !writable,
          lastWrite: { lastWriteDate: new Date(Date.now() - (role.kind === 'secondary' ? (role.lagMS ?? 0) : 0)) },
          ...(role.tags === undefined ? {} : { tags: role.tags }),
          ...(role.kind === 'primary' ? { electionId: role.electionId } : {}),
          // The set's configuration: every proxy playing a member of this set (a member down included), each by the
          // address the client reaches it at.
          hosts: role.hosts ?? proxies.filter((_p, j) => setOf(roles[j]!) === setOf(role)).map((p) => p.address),
          me: 'me' in role ? role.me : proxy.address,
          ...(role.primary === undefined ? {} : { primary: role.primary }),
          ...(role.noSessions === true ? { logicalSessionTimeoutMinutes: undefined } : {}),
        };
      },
    };
    return proxy;
  }));
  return proxies;
}

/**
 * Requests a check of the `index`-th server of `c` and resolves once the client holds what a check of it found, a
 * server of type `type` (of `electionId` when given): its reply reached the client, not only its request the proxy.
 */
export async function checkedAs(c: Client, index: number, type: ServerType, electionId?: ObjectId): Promise<void> {
  const monitor = [...c.monitors.values()][index]!;
  const checked = (c as unknown as { topology: { servers: Map<string, { type: ServerType; electionId?: ObjectId }> } }).topology.servers;
  const found = (): boolean => {
    const server = checked.get(monitor.address);
    return server?.type === type && (electionId === undefined || server.electionId?.equals(electionId) === true);
  };
  monitor.requestCheck();
  expect(await eventually(found, 5000), `${monitor.address} checked as ${type}`).to.equal(true);
}

/** How many `ping` commands each proxy passed on. */
export function pings(proxies: WireProxy[]): number[] {
  return proxies.map((p) => p.commands.filter((c) => c === 'ping').length);
}

/** Runs `total` pings (or other commands) on `client`, `concurrency` at a time; resolves to the errors. */
export async function runPings(client: Client, total: number, concurrency: number, command: Document = { ping: 1 }): Promise<unknown[]> {
  const errors: unknown[] = [];
  let started = 0;
  const worker = async (): Promise<void> => {
    while (started < total) {
      started++;
      await client.command('admin', command).catch((e: unknown) => void errors.push(e));
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return errors;
}

/** What a describe playing deployments in front of one test endpoint holds (see {@link playedDeployments}). */
export interface PlayedDeployments {
  /** The test endpoint (MONGODB_URI's server when set), started before the describe's tests. */
  endpoint: TestEndpoint;
  /** The proxies of the test's deployment (see {@link deployment}): stopped after each test. */
  proxies: WireProxy[];
  /** The test's client: closed after each test. */
  client: Client | undefined;
}

/**
 * Registers a describe's hooks for deployments played in front of one test endpoint: the endpoint started before its
 * tests and stopped after them; after each test, its client closed and its proxies stopped.
 */
export function playedDeployments(): PlayedDeployments {
  const played = { proxies: [] as WireProxy[], client: undefined } as PlayedDeployments;
  before(async function () {
    played.endpoint = await startTestEndpoint();
  });
  after(async function () {
    await played.endpoint.stop();
  });
  afterEach(async function () {
    await played.client?.close();
    played.client = undefined;
    await Promise.all(played.proxies.map((p) => p.stop()));
    played.proxies = [];
  });
  return played;
}
