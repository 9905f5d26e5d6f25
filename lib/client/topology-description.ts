/**
 * ServerTypes, and the topology description as the log writes it: the client's TopologyType and, per host it monitors
 * (see `TopologyDescription` for how they are found and removed), the ServerType its monitor last saw while its pool
 * is ready. The server selection messages and the "Topology description changed" messages write it as JSON.
 *
 * Source: server discovery and monitoring spec, "ServerType", "ServerDescription" ("type": the hello reply's
 * symptoms), "TopologyDescription"; SDAM logging and monitoring spec, "Topology Description Changed" Log Message ("a
 * string representation ... The format is flexible").
 */
import type { Document } from 'bson';
import type { ClientTopologyType, TopologyType } from './topology-type';

/**
 * A server's type: `Unknown` (not checked yet, its last check failed, its pool cleared since, or the topology's update
 * made it so: a stale primary, one a newer primary replaced, a direct connection's of another set), `PossiblePrimary`
 * (not checked yet, but another member's reply names it primary; as unavailable as Unknown), `Standalone`, `Mongos`,
 * `RSPrimary`, `RSSecondary`, `RSArbiter`, `RSOther`, `RSGhost` (a replica set member that cannot be queried yet), or
 * `LoadBalancer` (load-balanced mode).
 *
 * Source: server discovery and monitoring spec, "ServerType".
 */
export type ServerType = 'Unknown' | 'PossiblePrimary' | 'Standalone' | 'Mongos' | 'RSPrimary' | 'RSSecondary' | 'RSArbiter' | 'RSOther' | 'RSGhost' | 'LoadBalancer';

/**
 * The ServerType a successful hello reply `reply` shows: `RSGhost` for `isreplicaset: true`; with a `setName`,
 * `RSOther` when `hidden: true`, else `RSPrimary` (`isWritablePrimary` true; in a reply without `isWritablePrimary`,
 * the legacy hello's, `ismaster` true), `RSSecondary`
 * (`secondary: true`), `RSArbiter` (`arbiterOnly: true`) or `RSOther`; `Mongos` for `msg: 'isdbgrid'`; `Standalone`
 * otherwise. Never throws.
 *
 * Source: server discovery and monitoring spec, "ServerDescription", "type" (the table of symptoms), "Parsing a hello
 * or legacy hello response" ("MUST first check for the isWritablePrimary field and fall back to checking for an
 * ismaster field if isWritablePrimary was not found").
 */
export function serverTypeOf(reply: Document): ServerType {
  if (reply.isreplicaset === true) return 'RSGhost';
  if (typeof reply.setName === 'string') {
    if (reply.hidden === true) return 'RSOther';
    if ('isWritablePrimary' in reply ? reply.isWritablePrimary === true : reply.ismaster === true) return 'RSPrimary';
    if (reply.secondary === true) return 'RSSecondary';
    if (reply.arbiterOnly === true) return 'RSArbiter';
    return 'RSOther';
  }
  return reply.msg === 'isdbgrid' ? 'Mongos' : 'Standalone';
}

/** One server of a topology description: its address (`host:port`, or a Unix domain socket path) and its type. */
export interface ServerSummary {
  readonly address: string;
  readonly type: ServerType;
}

/**
 * The topology description `{ type, servers }` as JSON: `type` the client's TopologyType as SDAM names it (see
 * {@link TopologyType}), `servers` in the client's order of its hosts. Two descriptions are equal when their JSON is.
 */
export function topologyDescriptionText(type: ClientTopologyType, servers: readonly ServerSummary[]): string {
  const named: TopologyType = type !== 'ReplicaSet' ? type : servers.some((server) => server.type === 'RSPrimary') ? 'ReplicaSetWithPrimary' : 'ReplicaSetNoPrimary';
  return JSON.stringify({ type: named, servers });
}

/**
 * The description of a topology that has no server and whose type is not known: the one a client's first change
 * starts from, and its last one ends at, once closed.
 *
 * Source: SDAM logging and monitoring spec, "Initial Topology Description", "Closing Topology Description".
 */
export const UNKNOWN_TOPOLOGY_DESCRIPTION: string = topologyDescriptionText('Unknown', []);
