import { expect } from 'chai';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { EJSON, type Document } from 'bson';
import { Client, connect, MongoNetworkError, MongoNetworkTimeoutError, MongoServerError } from '../../lib';
import { VirtualClock } from '../../lib/testing';
import { scriptedServersEachTest, settle } from '../support/scripted-servers';

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
  const { servers, made } = scriptedServersEachTest();
  /** While true, each pool's establishments wait until the test fails them (see `establishments`); else they give a connection at once. */
  let holding = false;
  const establishments: Establishment[] = [];
  // After the servers are installed (the hook before), which sets their pool connections.
  beforeEach(() => {
    holding = false;
    establishments.splice(0);
    servers.poolConnection = (_host, d) => (holding ? new Promise((_resolve, reject) => establishments.push({ generation: d.generation, reject })) : Promise.resolve(new ScriptedPoolConnection(d.id, d.generation, d.address)));
  });

  for (const file of fs.readdirSync(fixtures).filter((f) => f.endsWith('.json')).sort()) {
    const test = EJSON.parse(fs.readFileSync(path.join(fixtures, file), 'utf8'), { relaxed: true }) as ErrorsTest;
    it(`${file}: ${test.description}`, async function () {
      const clock = new VirtualClock();
      const uri = `${test.uri}${test.uri.includes('?') ? '&' : test.uri.endsWith('/') ? '?' : '/?'}serverMonitoringMode=poll&maxConnecting=10`;
      const c = made(connect(uri, { scheduler: clock }));
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
          holding = true;
          for (let i = 0; i < before; i++) pool.withConnection(() => Promise.resolve()).catch(() => undefined);
          await settle();
          holding = false;
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
            const index = establishments.findIndex((h) => h.generation === generation);
            expect(index, `${label}: an establishment under way of generation ${generation}`).to.not.equal(-1);
            establishments.splice(index, 1)[0].reject(errorOf(e));
          }
          await settle();
        }
        expect(actualOutcome(c, phase.outcome), label).to.deep.equal(expectedOutcome(phase.outcome));
      }
    });
  }
});
