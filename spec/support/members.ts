/**
 * The set-up of a spec about replica set members of the embedded endpoint: `member()` starts one (`standalone()` an
 * endpoint that is none), `connect()` opens a connection to one through the library's factory; after each test, every connection is destroyed and every member
 * stopped.
 */
import type { Connection } from '../../lib';
import { EmbeddedServer, type EmbeddedServerOptions } from '../../lib/testing';
import { establishOne } from './endpoint';

/** What {@link startedMembers} gives a spec. */
export interface StartedMembers {
  /** Starts an endpoint as replica set member `replicaSetMember`, with `options` besides. */
  member(replicaSetMember: EmbeddedServerOptions['replicaSetMember'], options?: EmbeddedServerOptions): Promise<EmbeddedServer>;
  /** Starts an endpoint as a standalone (no replicaSetMember). */
  standalone(): Promise<EmbeddedServer>;
  /** A connection to `server`, handshaken. */
  connect(server: EmbeddedServer): Promise<Connection>;
}

/** Registers the `afterEach` that ends what the spec's members and connections left, and gives the two starters. */
export function startedMembers(): StartedMembers {
  const servers: EmbeddedServer[] = [];
  const connections: Connection[] = [];
  afterEach(async function () {
    for (const c of connections.splice(0)) c.destroy();
    await Promise.all(servers.splice(0).map((s) => s.stop()));
  });
  return {
    async member(replicaSetMember, options = {}) {
      const server = await new EmbeddedServer({ ...options, replicaSetMember }).start();
      servers.push(server);
      return server;
    },
    async standalone() {
      const server = await new EmbeddedServer().start();
      servers.push(server);
      return server;
    },
    async connect(server) {
      const connection = await establishOne(server.address);
      connections.push(connection);
      return connection;
    },
  };
}
