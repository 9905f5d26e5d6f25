/**
 * A client's TopologyType: where its topology description starts, and the type server selection and SRV polling read
 * (a replica set's two types taken as one).
 *
 * Source: server discovery and monitoring spec, "TopologyType", "Initial TopologyType", "Initial setName"; Polling SRV
 * Records for mongos Discovery spec, "Implementation" (polling only while the TopologyType is Sharded or Unknown).
 */
import type { TopologyType } from './topology-description';
import type { InitialTopology } from './topology-update';

/**
 * What rxcmap's selection tells apart: `Unknown` (no server has told its type yet), `Single` (`directConnection=true`,
 * or a standalone answered as the only seed), `Sharded` (a server answered as a mongos), `ReplicaSet` (SDAM's
 * ReplicaSetNoPrimary or ReplicaSetWithPrimary, which the description tells apart by its servers' types), and
 * `LoadBalanced`.
 */
export type ClientTopologyType = 'Unknown' | 'Single' | 'Sharded' | 'ReplicaSet' | 'LoadBalanced';

/** The {@link ClientTopologyType} of SDAM's TopologyType `type`. */
export function clientTopologyType(type: TopologyType): ClientTopologyType {
  return type === 'ReplicaSetNoPrimary' || type === 'ReplicaSetWithPrimary' ? 'ReplicaSet' : type;
}

/**
 * Where a client's topology description starts: its `seeds`, and the TopologyType `LoadBalanced` in load-balanced
 * mode, `Single` with `directConnection=true`, `ReplicaSetNoPrimary` with a `replicaSet` (URI or TXT record; its name
 * the description's setName), `Unknown` otherwise (whatever the number of seeds, a `mongodb+srv://` URI's included).
 *
 * Source: server discovery and monitoring spec, "Initial TopologyType", "Initial setName", "Handling of SRV URIs
 * resolving to single host"; load balancer spec.
 */
export function initialTopology(settings: { readonly seeds: readonly string[]; readonly loadBalanced: boolean; readonly directConnection: boolean; readonly replicaSet: string | undefined }): InitialTopology {
  const { seeds, replicaSet } = settings;
  if (settings.loadBalanced) return { seeds, type: 'LoadBalanced', setName: undefined };
  if (settings.directConnection) return { seeds, type: 'Single', setName: replicaSet };
  return { seeds, type: replicaSet !== undefined ? 'ReplicaSetNoPrimary' : 'Unknown', setName: replicaSet };
}
