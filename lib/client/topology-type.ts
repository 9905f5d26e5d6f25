/**
 * The TopologyType of a client, as far as rxcmap (which does no discovery: each host is a server of its own) keeps
 * one: whether SRV polling may go on, and the type its topology description gives.
 *
 * Source: server discovery and monitoring spec, "TopologyType", "Initial TopologyType", "Server Type" (Mongos: a
 * hello reply with `msg: 'isdbgrid'`; RSGhost: `isreplicaset: true`), "TopologyType table" (Unknown becomes Sharded
 * on a Mongos, and stays Unknown on an RSGhost; Sharded stays Sharded); Polling SRV Records for mongos Discovery spec,
 * "Implementation" (polling only while the TopologyType is Sharded or Unknown).
 */
import type { Document } from 'bson';

/**
 * What rxcmap tells apart: `Unknown` (no server has told its type yet), `Single` (`directConnection=true`, or a
 * standalone answered), `Sharded` (a server answered as a mongos), `ReplicaSet` (a `replicaSet` option, or a member
 * answered: SDAM's ReplicaSetNoPrimary or ReplicaSetWithPrimary, which the description tells apart by its servers'
 * types), and `LoadBalanced`.
 */
export type ClientTopologyType = 'Unknown' | 'Single' | 'Sharded' | 'ReplicaSet' | 'LoadBalanced';

/**
 * The TopologyType a client starts with: `LoadBalanced` in load-balanced mode, `Single` with `directConnection=true`,
 * `ReplicaSet` with a `replicaSet` (URI or TXT record: ReplicaSetNoPrimary in SDAM), `Unknown` otherwise.
 *
 * Source: server discovery and monitoring spec, "Initial TopologyType"; load balancer spec.
 */
export function initialTopologyType(settings: { readonly loadBalanced: boolean; readonly directConnection: boolean; readonly replicaSet: string | undefined }): ClientTopologyType {
  if (settings.loadBalanced) return 'LoadBalanced';
  if (settings.directConnection) return 'Single';
  return settings.replicaSet !== undefined ? 'ReplicaSet' : 'Unknown';
}

/**
 * The TopologyType after a successful check whose hello reply is `reply`, from `current`: from `Unknown`, `Sharded`
 * when the server is a mongos (`msg: 'isdbgrid'`), `Unknown` still for an RSGhost (`isreplicaset: true`, whatever
 * else it says: SDAM's "any server is an RSGhost that reports isreplicaset: true", as `serverTypeOf` reads it),
 * `ReplicaSet` for a replica set member (a `setName`), `Single` for a standalone.
 * Any other `current` stays as it is: SDAM keeps a Sharded topology Sharded when a server that is not a mongos
 * answers (it removes that server; rxcmap keeps its pool).
 *
 * Deliberately simpler than SDAM in one case: a standalone among several seeds, which SDAM removes while the topology
 * stays Unknown, makes it `Single` here (rxcmap removes no server on its own, so the deployment is taken as it answers).
 *
 * Source: server discovery and monitoring spec, "Server Type", "TopologyType table".
 */
export function topologyTypeAfter(current: ClientTopologyType, reply: Document): ClientTopologyType {
  if (current !== 'Unknown') return current;
  if (reply.msg === 'isdbgrid') return 'Sharded';
  if (reply.isreplicaset === true) return 'Unknown';
  return reply.setName !== undefined ? 'ReplicaSet' : 'Single';
}
