import { expect } from 'chai';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { EJSON, type Document } from 'bson';
import { Client, connect, type ServerDescription, type TopologyDescription, type TopologyEvent } from '../../lib';
import { VirtualClock } from '../../lib/testing';

/**
 * The SDAM monitoring spec tests (tests/monitoring), run through a client whose monitors' connections are scripted:
 * each phase's responses are the hello replies of the checks, in order, and the topology events the client publishes
 * during the phase must be those the test lists, in that order.
 */
const fixtures = path.resolve(__dirname, '../fixtures/server-discovery/monitoring');

/** What the client asks of a host: its pool's and its monitor's connection factories (see `Client.connectionFactories`). */
type HostFactories = Map<string, { pool: () => Promise<never>; monitor: (() => Promise<unknown>) | undefined }>;

/** A monitoring connection whose handshake reply, and each later check's reply, is the next response given its server. */
class ScriptedConnection {
  moreToCome = false;
  readonly handshakeDurationMS = 0;
  constructor(
    readonly hello: Document,
    private readonly next: () => Promise<Document>,
  ) {}
  get server(): { helloOk: boolean; serverConnectionId: undefined } {
    return { helloOk: true, serverConnectionId: undefined };
  }
  command(): Promise<Document> {
    return this.next();
  }
  nextReply(): Promise<Document> {
    return this.next();
  }
  destroy(): void {}
}

/**
 * Scripted servers: each address's checks wait for the responses given to it (see {@link respond}), in order. While
 * installed, every client made gets these servers' connections instead of sockets.
 */
class ScriptedServers {
  private readonly replies = new Map<string, Document[]>();
  private readonly waiting = new Map<string, (reply: Document) => void>();
  private readonly original = (Client.prototype as unknown as Record<string, unknown>).connectionFactories;

  install(): void {
    (Client.prototype as unknown as Record<string, unknown>).connectionFactories = (hosts: readonly string[], _c: unknown, _m: unknown, loadBalanced: boolean): HostFactories => {
      const factories: HostFactories = new Map();
      for (const host of hosts) {
        factories.set(host, {
          pool: () => Promise.reject(new Error('no pool connection in this test')) as Promise<never>,
          monitor: loadBalanced ? undefined : async () => new ScriptedConnection(await this.reply(host), () => this.reply(host)),
        });
      }
      return factories;
    };
  }

  uninstall(): void {
    (Client.prototype as unknown as Record<string, unknown>).connectionFactories = this.original;
  }

  /** Whether a check of `address` waits for its reply. */
  isWaiting(address: string): boolean {
    return this.waiting.has(address);
  }

  /** Gives `address` its next reply: the check waiting gets it, else the next check will. */
  respond(address: string, reply: Document): void {
    const waiter = this.waiting.get(address);
    if (waiter !== undefined) {
      this.waiting.delete(address);
      waiter(reply);
    } else {
      this.replies.set(address, [...(this.replies.get(address) ?? []), reply]);
    }
  }

  private reply(address: string): Promise<Document> {
    const queued = this.replies.get(address);
    if (queued !== undefined && queued.length > 0) return Promise.resolve(queued.shift()!);
    return new Promise((resolve) => this.waiting.set(address, resolve));
  }
}

/** Lets every promise and microtask settle. */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
}

/** A server description as the spec's tests write it. */
function specServer(address: string, server: ServerDescription): Document {
  return { address, arbiters: [...server.arbiters], hosts: [...server.hosts], passives: [...server.passives], primary: server.primary ?? null, setName: server.setName ?? null, type: server.type };
}

/** A topology description as the spec's tests write it (its servers by address). */
function specTopology(description: TopologyDescription): Document {
  const servers = [...description.servers].map(([address, server]) => specServer(address, server)).sort((a, b) => (a.address < b.address ? -1 : 1));
  return { topologyType: description.type, setName: description.setName ?? null, servers };
}

/** An event as the spec's tests write it. */
function specEvent(event: TopologyEvent): Document {
  switch (event.type) {
    case 'TopologyOpening':
      return { topology_opening_event: {} };
    case 'ServerOpening':
      return { server_opening_event: { address: event.address } };
    case 'ServerDescriptionChanged':
      return { server_description_changed_event: { address: event.address, previousDescription: specServer(event.address, event.previousDescription), newDescription: specServer(event.address, event.newDescription) } };
    case 'TopologyDescriptionChanged':
      return { topology_description_changed_event: { previousDescription: specTopology(event.previousDescription), newDescription: specTopology(event.newDescription) } };
    case 'ServerClosed':
      return { server_closed_event: { address: event.address } };
    case 'TopologyClosed':
      return { topology_closed_event: {} };
  }
}

/**
 * `expected` as it applies to `actual`: the fields the test gives (a missing `primary` or `setName` is null), servers
 * sorted by address; `topologyId` left out (the client's own, checked apart).
 */
function expectedAs(expected: Document): Document {
  const [kind, fields] = Object.entries(expected)[0] as [string, Document];
  const server = (s: Document): Document => ({ primary: null, setName: null, ...s });
  const topology = (t: Document): Document => ({ setName: null, ...t, servers: (t.servers as Document[]).map(server).sort((a, b) => (a.address < b.address ? -1 : 1)) });
  const { topologyId: _id, ...rest } = fields;
  if (kind === 'server_description_changed_event') return { [kind]: { ...rest, previousDescription: server(rest.previousDescription), newDescription: server(rest.newDescription) } };
  if (kind === 'topology_description_changed_event') return { [kind]: { previousDescription: topology(rest.previousDescription), newDescription: topology(rest.newDescription) } };
  return { [kind]: rest };
}

interface MonitoringTest {
  description: string;
  uri: string;
  phases: { responses?: [string, Document][]; outcome: { events: Document[] } }[];
}

describe('topology events: the SDAM monitoring spec tests (tests/monitoring), through a client', function () {
  const servers = new ScriptedServers();
  let client: Client | undefined;
  beforeEach(() => servers.install());
  afterEach(async () => {
    servers.uninstall();
    await client?.close();
    client = undefined;
  });

  for (const file of fs.readdirSync(fixtures).filter((f) => f.endsWith('.json')).sort()) {
    const test = EJSON.parse(fs.readFileSync(path.join(fixtures, file), 'utf8'), { relaxed: true }) as MonitoringTest;
    it(`${file}: ${test.description}`, async function () {
      const clock = new VirtualClock();
      const uri = `${test.uri}${test.uri.includes('?') ? '&' : test.uri.endsWith('/') ? '?' : '/?'}serverMonitoringMode=poll`;
      const c = (client = connect(uri, { scheduler: clock }));
      const events: TopologyEvent[] = [];
      c.topologyEvents$.subscribe((e) => events.push(e));
      await settle();
      for (const [i, phase] of test.phases.entries()) {
        for (const [address, reply] of phase.responses ?? []) {
          // A server an earlier response removed: no check of it is left to answer.
          if (!c.topologyDescription.servers.has(address)) continue;
          // Its next check, after heartbeatFrequencyMS, when none waits now.
          if (!servers.isWaiting(address)) clock.advance(10_000);
          servers.respond(address, reply);
          await settle();
        }
        const published = events.splice(0);
        expect(published.every((e) => e.topologyId === c.topologyId), `phase ${i + 1}: the client's topologyId`).to.equal(true);
        expect(published.map(specEvent), `phase ${i + 1}`).to.deep.equal(phase.outcome.events.map(expectedAs));
      }
    });
  }
});
