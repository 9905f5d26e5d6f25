/**
 * The endpoint integration tests run against: the server named by MONGODB_URI when it is set, else a fresh embedded
 * endpoint. `embedded` is set only in the second case, for assertions on server-side state.
 */
import * as net from 'node:net';
import type { Document } from 'bson';
import { firstValueFrom, from } from 'rxjs';
import { connectionFactory, type Client, type Connection, type ConnectionOptions } from '../../lib';
import { EmbeddedServer, type EmbeddedUser } from '../../lib/testing';
import { parseConnectionString } from '../../lib/connection-string';

export interface TestEndpoint {
  /**
   * `host:port` of the server: the embedded endpoint's, or MONGODB_URI's first host (its port 27017 when the URI gives
   * none), which a proxy or relay in front of the server forwards to.
   */
  readonly address: string;
  /** Connection options the server needs (credentials, TLS), from MONGODB_URI. */
  readonly connectionOptions: ConnectionOptions;
  readonly embedded: EmbeddedServer | undefined;
  /** Runs one command on `admin` over a fresh connection of its own. */
  adminCommand(command: Document): Promise<Document>;
  stop(): Promise<void>;
}

/** `users`: the embedded endpoint's users (see `EmbeddedServerOptions.users`); MONGODB_URI's server has its own. */
export async function startTestEndpoint(options: { users?: EmbeddedUser[] } = {}): Promise<TestEndpoint> {
  const uri = process.env.MONGODB_URI;
  const parsed = uri ? parseConnectionString(uri) : undefined;
  const embedded = parsed ? undefined : await new EmbeddedServer({ users: options.users }).start();
  const address = parsed ? parsed.hosts[0] : embedded!.address;
  const connectionOptions = parsed?.connectionOptions ?? {};
  const adminCommand = async (command: Document): Promise<Document> => {
    const [host, port] = address.split(':');
    const factory = connectionFactory({ ...connectionOptions, appName: undefined, host, port: Number(port) });
    const connection = await firstValueFrom(from(factory({ id: 0, generation: 0, address, signal: new AbortController().signal })));
    try {
      return await connection.command('admin', command);
    } finally {
      connection.destroy();
    }
  };
  return {
    address,
    connectionOptions,
    embedded,
    adminCommand,
    stop: async () => embedded?.stop(),
  };
}

/** Establishes one connection (id 1, generation 0) to `address` (`host:port`) with `options`; resolves to it or rejects. */
export function establishOne(address: string, options: ConnectionOptions = {}): Promise<Connection> {
  const [host, port] = address.split(':');
  const factory = connectionFactory({ ...options, host, port: Number(port) });
  return firstValueFrom(from(factory({ id: 1, generation: 0, address, signal: new AbortController().signal })));
}

/** The users `connectionStatus` reports as authenticated on `connection`, as `<db>.<user>`. */
export async function authenticatedUsers(connection: Connection): Promise<string[]> {
  const status = await connection.command('admin', { connectionStatus: 1 });
  return (status.authInfo.authenticatedUsers as { user: string; db: string }[]).map((u) => `${u.db}.${u.user}`);
}

/** Turns the failCommand fail point off (a server without one is fine) and stops the endpoint. */
export async function stopTestEndpoint(endpoint: TestEndpoint): Promise<void> {
  await endpoint.adminCommand({ configureFailPoint: 'failCommand', mode: 'off' }).catch(() => undefined);
  await endpoint.stop();
}

/**
 * The endpoint and client of the running test, for a suite whose tests each start their own: call it in the
 * `describe`; after each test the client (when set) is closed, then the endpoint (when set) stopped, and both unset.
 */
export function endpointAndClientPerTest(): { server: TestEndpoint | undefined; client: Client | undefined } {
  const held: { server: TestEndpoint | undefined; client: Client | undefined } = { server: undefined, client: undefined };
  afterEach(async function () {
    await held.client?.close();
    held.client = undefined;
    if (held.server !== undefined) await stopTestEndpoint(held.server);
    held.server = undefined;
  });
  return held;
}

/** Sets the failCommand fail point; skips the test (`context`) when the server has none (test commands off). */
export async function setFailPoint(context: Mocha.Context, endpoint: TestEndpoint, command: Record<string, unknown>): Promise<void> {
  const reply = await endpoint.adminCommand({ configureFailPoint: 'failCommand', ...command }).catch((e: Error) => ({ ok: 0, errmsg: e.message }));
  if (reply.ok !== 1) {
    console.log(`      skipped: the server refused the failCommand fail point (enableTestCommands needed): ${String(reply.errmsg)}`);
    context.skip();
  }
}

/** Polls `condition` every 5 ms until it holds or `timeoutMS` passes; resolves to whether it held. */
export async function eventually(condition: () => boolean, timeoutMS = 2000): Promise<boolean> {
  const deadline = Date.now() + timeoutMS;
  while (!condition()) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 5));
  }
  return true;
}

/** A TCP port on 127.0.0.1 that nothing listens on (it was free a moment ago): connections to it are refused. */
export function closedPort(): Promise<number> {
  return new Promise((resolve) => {
    const server = net.createServer().listen(0, '127.0.0.1', () => {
      const port = (server.address() as net.AddressInfo).port;
      server.close(() => resolve(port));
    });
  });
}

/** `uri` with the URI options `options` (`a=1&b=2`) added to its own. */
export function withOptions(uri: string, options: string): string {
  if (options === '') return uri;
  if (uri.includes('?')) return `${uri}&${options}`;
  return /^mongodb(\+srv)?:\/\/[^/]+\//.test(uri) ? `${uri}?${options}` : `${uri}/?${options}`;
}
