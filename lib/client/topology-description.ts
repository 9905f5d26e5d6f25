/**
 * ServerTypes, and the topology description as the log writes it: the TopologyType and, per server the client
 * monitors (see `Topology` for how they are found and removed), the ServerType of its description. The server selection
 * messages, the "Topology description changed" messages and ServerSelectionError write it as JSON.
 *
 * Source: server discovery and monitoring spec, "ServerType", "ServerDescription" ("type": the hello reply's
 * symptoms), "TopologyDescription"; SDAM logging and monitoring spec, "Topology Description Changed" Log Message ("a
 * string representation ... The format is flexible").
 */
import type { Document } from 'bson';
import type { TopologyType } from './topology-type';

/**
 * A server's type: `Unknown` (not checked yet, its last check failed, an error of one of its connections made it so
 * until its next check: a network error, a state change error, or the topology's update made it so: a stale primary,
 * one a newer primary replaced, a direct connection's of another set), `PossiblePrimary`
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
 * The topology description `{ type, servers }` as JSON: `type` the TopologyType (see {@link TopologyType}), `servers`
 * in the client's order of its hosts.
 */
export function topologyDescriptionText(type: TopologyType, servers: readonly ServerSummary[]): string {
  return JSON.stringify({ type, servers });
}
