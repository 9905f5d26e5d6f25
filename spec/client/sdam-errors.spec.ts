import { expect } from 'chai';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { EJSON, type Document } from 'bson';
import { Client, connect, MongoNetworkError, MongoNetworkTimeoutError, MongoServerError } from '../../lib';
import type { ConnectionDescriptor } from '../../lib/pool/contract';
import { VirtualClock } from '../../lib/testing';

/**
 * The SDAM error handling spec tests (tests/errors), run through a client whose connections are scripted: each
 * phase's responses are the hello replies of the monitor's checks, in order; each application error is the outcome
 * of an application operation on a connection of the pool of its server:
 * - afterHandshakeCompletes: a command the client runs (its `run`, as `command()` does once the connection is
 *   checked out) on an established connection of the error's generation, held in flight since that generation was
 *   current, which then fails with a MongoNetworkError (network), a MongoNetworkTimeoutError (timeout), or the
 *   error's response as the server's reply (command: a MongoServerError, as a connection reports an `ok: 0` reply);
 * - beforeHandshakeCompletes: the establishment of a pool connection of the error's generation, started for a
 *   checkout while that generation was current, failing with that error.
 * After each phase the client's topology description, and each server's pool generation, must be the outcome's.
 */
const fixtures = path.resolve(__dirname, '../fixtures/server-discovery/errors');

type HostFactories = Map<string, { pool: (descriptor: ConnectionDescriptor) => Promise<unknown>; monitor: (() => Promise<unknown>) | undefined }>;

/** A monitoring connection whose handshake reply, and each later check's reply, is the next response given its server. */
class ScriptedMonitorConnection {
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

/** An established pool connection whose command waits until the test settles it (see {@link fail}). */
class ScriptedPoolConnection {
  errored = false;
  busy = false;
  readonly serviceId = undefined;
  private settle: { resolve: (reply: Document) => void; reject: (error: Error) => void } | undefined;
  constructor(
    readonly id: number,
    readonly generation: number,
    readonly address: string,
  ) {}
  get server(): { helloOk: boolean; maxWireVersion: number } {
    return { helloOk: true, maxWireVersion: 9 };
  }
  /** Whether a command waits on it. */
  get waiting(): boolean {
    return this.settle !== undefined;
  }
  command(): Promise<Document> {
    this.busy = true;
    return new Promise((resolve, reject) => (this.settle = { resolve, reject }));
  }
  /** Ends the command in flight with `error`. */
  fail(error: Error): void {
    const settle = this.settle!;
    this.settle = undefined;
    if (error instanceof MongoNetworkError) this.errored = true;
    this.busy = false;
    settle.reject(error);
  }
  destroy(): void {}
}

/** An establishment of a pool connection under way, ended by the test. */
interface Establishment {
  readonly generation: number;
  readonly reject: (error: Error) => void;
}

/**
 * Scripted servers: each address's checks wait for the responses given to it, in order; each pool's establishments
 * give a {@link ScriptedPoolConnection} at once, or, while `holding`, wait until the test fails them.
 */
class ScriptedServers {
  private readonly replies = new Map<string, Document[]>();
  private readonly waiting = new Map<string, { resolve: (reply: Document) => void; reject: (error: Error) => void }>();
  private readonly original = (Client.prototype as unknown as Record<string, unknown>).connectionFactories;
  holding = false;
  readonly establishments: Establishment[] = [];

  install(): void {
    this.replies.clear();
    this.waiting.clear();
    this.establishments.splice(0);
    this.holding = false;
    (Client.prototype as unknown as Record<string, unknown>).connectionFactories = (hosts: readonly string[]): HostFactories => {
      const factories: HostFactories = new Map();
      for (const host of hosts) {
        factories.set(host, {
          pool: (d) => {
            if (!this.holding) return Promise.resolve(new ScriptedPoolConnection(d.id, d.generation, d.address));
            return new Promise((_resolve, reject) => this.establishments.push({ generation: d.generation, reject }));
          },
          monitor: async () => new ScriptedMonitorConnection(await this.reply(host), () => this.reply(host)),
        });
      }
      return factories;
    };
  }

  uninstall(): void {
    (Client.prototype as unknown as Record<string, unknown>).connectionFactories = this.original;
  }

  isWaiting(address: string): boolean {
    return this.waiting.has(address);
  }

  respond(address: string, reply: Document): void {
    const waiter = this.waiting.get(address);
    if (waiter !== undefined) {
      this.waiting.delete(address);
      waiter.resolve(reply);
    } else {
      this.replies.set(address, [...(this.replies.get(address) ?? []), reply]);
    }
  }

  private reply(address: string): Promise<Document> {
    const queued = this.replies.get(address);
    if (queued !== undefined && queued.length > 0) return Promise.resolve(queued.shift()!);
    return new Promise((resolve, reject) => this.waiting.set(address, { resolve, reject }));
  }
}

/** Lets every promise and microtask settle. */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
}

interface ApplicationError {
  address: string;
  generation?: number;
  when: 'beforeHandshakeCompletes' | 'afterHandshakeCompletes';
  maxWireVersion: number;
  type: 'command' | 'network' | 'timeout';
  response?: Document;
}

interface ErrorsTest {
  description: string;
  uri: string;
  phases: { description?: string; responses?: [string, Document][]; applicationErrors?: ApplicationError[]; outcome: Document }[];
}

/** A topologyVersion as the tests write it (relaxed EJSON): processId's hex, counter a number; null when absent. */
function specTopologyVersion(version: Document | null | undefined): Document | null {
  if (version === null || version === undefined) return null;
  return { processId: (version.processId as { toHexString(): string }).toHexString(), counter: Number(version.counter) };
}

/** The client's state as the outcome gives it: only the fields the outcome names. */
function actualOutcome(client: Client, expected: Document): Document {
  const description = client.topologyDescription;
  const servers: Document = {};
  for (const [address, fields] of Object.entries(expected.servers as Document)) {
    const server = description.servers.get(address);
    if (server === undefined) {
      servers[address] = 'absent';
      continue;
    }
    const actual: Document = {};
    for (const field of Object.keys(fields as Document)) {
      if (field === 'type') actual.type = server.type;
      else if (field === 'setName') actual.setName = server.setName ?? null;
      else if (field === 'topologyVersion') actual.topologyVersion = specTopologyVersion(server.topologyVersion);
      else if (field === 'pool') actual.pool = { generation: client.pools.get(address)?.generation };
      else actual[field] = `unchecked field ${field}`;
    }
    servers[address] = actual;
  }
  const outcome: Document = { servers };
  if ('topologyType' in expected) outcome.topologyType = description.type;
  if ('setName' in expected) outcome.setName = description.setName ?? null;
  if ('logicalSessionTimeoutMinutes' in expected) outcome.logicalSessionTimeoutMinutes = description.logicalSessionTimeoutMinutes ?? null;
  if ('compatible' in expected) outcome.compatible = expected.compatible;
  return outcome;
}

/** The outcome as the test gives it, its topologyVersions as {@link specTopologyVersion} writes them. */
function expectedOutcome(expected: Document): Document {
  const servers: Document = {};
  for (const [address, fields] of Object.entries(expected.servers as Document)) {
    const server = { ...(fields as Document) };
    if ('topologyVersion' in server) server.topologyVersion = specTopologyVersion(server.topologyVersion as Document | null);
    servers[address] = server;
  }
  return { ...expected, servers };
}

/**
 * The error an application error names. Before the handshake completes, a network error or timeout is what the
 * connection factory makes of a reset, a close or connectTimeoutMS elapsing during the connect or the hello: labelled
 * `SystemOverloadedError` and `RetryableError` (CMAP "Backpressure-enabled"; SDAM: such an error "MUST NOT change
 * the server's description").
 */
function errorOf(e: ApplicationError): Error {
  const labels = e.when === 'beforeHandshakeCompletes' ? ['SystemOverloadedError', 'RetryableError'] : [];
  switch (e.type) {
    case 'network':
      return new MongoNetworkError(e.address, `connection to ${e.address} closed`, { labels });
    case 'timeout':
      return new MongoNetworkTimeoutError(e.address, `connection to ${e.address} timed out`, { labels });
    case 'command':
      return new MongoServerError(e.response!);
  }
}

describe('SDAM error handling: the server discovery and monitoring spec tests (tests/errors), through a client', function () {
  const servers = new ScriptedServers();
  let client: Client | undefined;
  beforeEach(() => servers.install());
  afterEach(async () => {
    servers.uninstall();
    await client?.close();
    client = undefined;
  });

  for (const file of fs.readdirSync(fixtures).filter((f) => f.endsWith('.json')).sort()) {
    const test = EJSON.parse(fs.readFileSync(path.join(fixtures, file), 'utf8'), { relaxed: true }) as ErrorsTest;
    it(`${file}: ${test.description}`, async function () {
      const clock = new VirtualClock();
      const uri = `${test.uri}${test.uri.includes('?') ? '&' : test.uri.endsWith('/') ? '?' : '/?'}serverMonitoringMode=poll&maxConnecting=10`;
      const c = (client = connect(uri, { scheduler: clock }));
      const errors = test.phases.flatMap((p) => p.applicationErrors ?? []);
      const after = errors.filter((e) => e.when === 'afterHandshakeCompletes').length;
      const before = errors.filter((e) => e.when === 'beforeHandshakeCompletes').length;
      // Per address, the connections held in flight, and the generations stocked.
      const held = new Map<string, ScriptedPoolConnection[]>();
      const stocked = new Map<string, Set<number>>();
      const run = (c as unknown as { run: (pool: unknown, connection: unknown, db: string, command: Document, timeoutMS: undefined, signal: undefined) => Promise<Document> }).run.bind(c);
      /**
       * For each pool ready at a generation not stocked yet: as many commands in flight as the test has errors after
       * the handshake, and as many establishments under way as it has before, all of that generation.
       */
      const stock = async (): Promise<void> => {
        for (const [address, pool] of c.pools) {
          const generations = stocked.get(address) ?? new Set<number>();
          stocked.set(address, generations);
          if (pool.state !== 'ready' || generations.has(pool.generation)) continue;
          generations.add(pool.generation);
          for (let i = 0; i < after; i++) {
            pool.withConnection((connection) => {
              held.set(address, [...(held.get(address) ?? []), connection as unknown as ScriptedPoolConnection]);
              return run(pool, connection, 'admin', { ping: 1 }, undefined, undefined);
            }).catch(() => undefined);
            await settle();
          }
          servers.holding = true;
          for (let i = 0; i < before; i++) pool.withConnection(() => Promise.resolve()).catch(() => undefined);
          await settle();
          servers.holding = false;
        }
      };
      await settle();
      for (const [i, phase] of test.phases.entries()) {
        const label = `phase ${i + 1} (${phase.description ?? ''})`;
        for (const [address, reply] of phase.responses ?? []) {
          if (!c.topologyDescription.servers.has(address)) continue;
          if (!servers.isWaiting(address)) clock.advance(10_000);
          servers.respond(address, reply);
          await settle();
        }
        await stock();
        for (const e of phase.applicationErrors ?? []) {
          const pool = c.pools.get(e.address);
          expect(pool, `${label}: a pool for ${e.address}`).to.not.equal(undefined);
          const generation = e.generation ?? pool!.generation;
          if (e.when === 'afterHandshakeCompletes') {
            const connections = held.get(e.address) ?? [];
            const connection = connections.find((h) => h.generation === generation && h.waiting);
            expect(connection, `${label}: a command in flight on a connection of generation ${generation}`).to.not.equal(undefined);
            connection!.fail(errorOf(e));
          } else {
            const index = servers.establishments.findIndex((h) => h.generation === generation);
            expect(index, `${label}: an establishment under way of generation ${generation}`).to.not.equal(-1);
            servers.establishments.splice(index, 1)[0].reject(errorOf(e));
          }
          await settle();
        }
        expect(actualOutcome(c, phase.outcome), label).to.deep.equal(expectedOutcome(phase.outcome));
      }
    });
  }
});
