import type { Document } from 'bson';
import { Client, type TopologyDescription, type TopologyEvent } from '../../lib';
import type { ConnectionDescriptor } from '../../lib/pool/contract';

/** What the client asks of a host: its pool's and its monitor's connection factories (see `Client.connectionFactories`). */
export type HostFactories = Map<string, { pool: (descriptor: ConnectionDescriptor) => Promise<unknown>; monitor: (() => Promise<unknown>) | undefined }>;

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
export class ScriptedServers {
  private readonly replies = new Map<string, Document[]>();
  private readonly waiting = new Map<string, { resolve: (reply: Document) => void; reject: (error: Error) => void }>();
  private readonly failures = new Map<string, Error>();
  private readonly original = (Client.prototype as unknown as Record<string, unknown>).connectionFactories;

  install(): void {
    this.poolConnection = () => Promise.reject(new Error('no pool connection in this test'));
    this.replies.clear();
    this.waiting.clear();
    this.failures.clear();
    (Client.prototype as unknown as Record<string, unknown>).connectionFactories = (hosts: readonly string[], _c: unknown, _m: unknown, loadBalanced: boolean): HostFactories => {
      const factories: HostFactories = new Map();
      for (const host of hosts) {
        factories.set(host, {
          pool: (descriptor) => this.poolConnection(host, descriptor),
          monitor: loadBalanced ? undefined : async () => new ScriptedConnection(await this.reply(host), () => this.reply(host)),
        });
      }
      return factories;
    };
  }

  /**
   * The pool connections of a host (`descriptor`: the establishment's id, generation and address): each fails (a plain
   * Error, which clears the pool), at once unless a test replaces this (to fail one at a moment of its choosing, or to
   * give a connection).
   */
  poolConnection: (host: string, descriptor: ConnectionDescriptor) => Promise<unknown> = () => Promise.reject(new Error('no pool connection in this test'));

  uninstall(): void {
    (Client.prototype as unknown as Record<string, unknown>).connectionFactories = this.original;
  }

  /** Whether a check of `address` waits for its reply. */
  isWaiting(address: string): boolean {
    return this.waiting.has(address);
  }

  /** Gives `address` its next reply: the check waiting gets it, else the next check will. */
  respond(address: string, reply: Document): void {
    this.failures.delete(address);
    const waiter = this.waiting.get(address);
    if (waiter !== undefined) {
      this.waiting.delete(address);
      waiter.resolve(reply);
    } else {
      this.replies.set(address, [...(this.replies.get(address) ?? []), reply]);
    }
  }

  /** Makes every check of `address` fail with `error` from now on (the one waiting too), until it is given a reply. */
  fail(address: string, error: Error): void {
    this.failures.set(address, error);
    const waiter = this.waiting.get(address);
    this.waiting.delete(address);
    waiter?.reject(error);
  }

  private reply(address: string): Promise<Document> {
    const failure = this.failures.get(address);
    if (failure !== undefined) return Promise.reject(failure);
    const queued = this.replies.get(address);
    if (queued !== undefined && queued.length > 0) return Promise.resolve(queued.shift()!);
    return new Promise((resolve, reject) => this.waiting.set(address, { resolve, reject }));
  }
}

/** Lets every promise and microtask settle. */
export async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
}

/** A topology event in one line: its kind and server, a change's types (`Unknown->RSPrimary`, `Single{a:27017=Standalone}`). */
export function eventLine(e: TopologyEvent): string {
  const types = (d: TopologyDescription): string => `${d.type}{${[...d.servers].map(([a, s]) => `${a}=${s.type}`).join(',')}}`;
  switch (e.type) {
    case 'ServerOpening':
    case 'ServerClosed':
      return `${e.type} ${e.address}`;
    case 'ServerDescriptionChanged':
      return `${e.type} ${e.address} ${e.previousDescription.type}->${e.newDescription.type}`;
    case 'TopologyDescriptionChanged':
      return `${e.type} ${types(e.previousDescription)} -> ${types(e.newDescription)}`;
    default:
      return e.type;
  }
}

/**
 * For each test of the `describe` block this is called in: scripted servers installed before it, and after it the
 * servers uninstalled and every client `made` for it closed.
 */
export function scriptedServersEachTest(): { servers: ScriptedServers; made: (client: Client) => Client } {
  const servers = new ScriptedServers();
  const clients: Client[] = [];
  beforeEach(() => servers.install());
  afterEach(async () => {
    servers.uninstall();
    for (const client of clients.splice(0)) await client.close();
  });
  return { servers, made: (client) => (clients.push(client), client) };
}
