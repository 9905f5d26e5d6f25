/**
 * The TopologyType: SDAM's, and the client's that server selection and SRV polling read (a replica set's two types
 * taken as one).
 *
 * Source: server discovery and monitoring spec, "TopologyType"; Polling SRV Records for mongos Discovery spec,
 * "Implementation" (polling only while the TopologyType is Sharded or Unknown).
 */

/**
 * What rxcmap's selection tells apart: `Unknown` (no server has told its type yet), `Single` (`directConnection=true`,
 * or a standalone answered as the only seed), `Sharded` (a server answered as a mongos), `ReplicaSet` (SDAM's
 * ReplicaSetNoPrimary or ReplicaSetWithPrimary, which the description tells apart by its servers' types), and
 * `LoadBalanced`.
 */
export type ClientTopologyType = 'Unknown' | 'Single' | 'Sharded' | 'ReplicaSet' | 'LoadBalanced';

/**
 * A TopologyType as SDAM names it: the client's (see `ClientTopologyType`), a replica set's told apart by whether one
 * of its servers is an RSPrimary.
 *
 * Source: server discovery and monitoring spec, "TopologyType".
 */
export type TopologyType = 'Unknown' | 'Single' | 'Sharded' | 'ReplicaSetNoPrimary' | 'ReplicaSetWithPrimary' | 'LoadBalanced';

/** The {@link ClientTopologyType} of SDAM's TopologyType `type`. */
export function clientTopologyType(type: TopologyType): ClientTopologyType {
  return type === 'ReplicaSetNoPrimary' || type === 'ReplicaSetWithPrimary' ? 'ReplicaSet' : type;
}
