/**
 * The TopologyType of a client, as far as rxcmap (which keeps no topology description) needs it: whether SRV polling
 * may go on.
 *
 * Source: server discovery and monitoring spec, "TopologyType", "Initial TopologyType", "Server Type" (Mongos: a
 * hello reply with `msg: 'isdbgrid'`; RSGhost: `isreplicaset: true`), "TopologyType table" (Unknown becomes Sharded
 * on a Mongos, and stays Unknown on an RSGhost; Sharded stays Sharded); Polling SRV Records for mongos Discovery spec,
 * "Implementation" (polling only while the TopologyType is Sharded or Unknown).
 */
import type { Document } from 'bson';

/**
 * What rxcmap tells apart: `Unknown` (no server has told its type yet), `Sharded` (a server answered as a mongos),
 * `LoadBalanced`, and `Other` (a replica set, from a `replicaSet` option or a member's reply, or a standalone).
 */
export type ClientTopologyType = 'Unknown' | 'Sharded' | 'LoadBalanced' | 'Other';

/**
 * The TopologyType a client starts with: `LoadBalanced` in load-balanced mode, `Other` with a `replicaSet` (URI or
 * TXT record: ReplicaSetNoPrimary in SDAM), `Unknown` otherwise.
 *
 * Source: server discovery and monitoring spec, "Initial TopologyType"; load balancer spec.
 */
export function initialTopologyType(settings: { readonly loadBalanced: boolean; readonly replicaSet: string | undefined }): ClientTopologyType {
  if (settings.loadBalanced) return 'LoadBalanced';
  return settings.replicaSet !== undefined ? 'Other' : 'Unknown';
}

/**
 * The TopologyType after a successful check whose hello reply is `reply`, from `current`: from `Unknown`, `Sharded`
 * when the server is a mongos (`msg: 'isdbgrid'`), `Unknown` still for an RSGhost (`isreplicaset: true`), `Other` for
 * any other server (a replica set member or a standalone). Any other `current` stays as it is: SDAM keeps a Sharded
 * topology Sharded when a server that is not a mongos answers (it removes that server; rxcmap keeps its pool).
 *
 * Deliberately simpler than SDAM in one case: a standalone among several seeds, which SDAM removes while the topology
 * stays Unknown, makes it `Other` here (rxcmap removes no server on its own, so the deployment is taken as it answers).
 *
 * Source: server discovery and monitoring spec, "Server Type", "TopologyType table".
 */
export function topologyTypeAfter(current: ClientTopologyType, reply: Document): ClientTopologyType {
  if (current !== 'Unknown') return current;
  if (reply.msg === 'isdbgrid') return 'Sharded';
  if (reply.isreplicaset === true && reply.setName === undefined) return 'Unknown';
  return 'Other';
}
