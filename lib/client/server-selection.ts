/**
 * Server selection among a client's servers whose pools are ready: which are suitable for an operation (rxcmap's
 * only read preference is `primary`, so every operation is selected as a write is), which of those are within the
 * latency window, and which of those gets the operation (of two taken at random, the one with the lower
 * operationCount).
 *
 * Source: server selection spec, "Topology type: Single", "Topology type: ReplicaSetWithPrimary or
 * ReplicaSetNoPrimary" (only the primary is suitable for a write, or for a read with mode primary), "Topology type:
 * Sharded", "Topology type: LoadBalanced", "Topology type: Unknown", "Filtering suitable servers based on the latency
 * window", "Server Selection Algorithm" (multi-threaded or async: steps 6 to 8, "operationCount"); server discovery
 * and monitoring spec, "Using electionId and setVersion to detect stale primaries" (of two servers that say they are
 * primary, the one with the older electionId is stale).
 */
import { ObjectId, type Document } from 'bson';
import { serverTypeOf, type ServerType } from './topology-description';
import type { ClientTopologyType } from './topology-type';

/**
 * The latency window's default size, in ms: 15. Source: server selection spec, "localThresholdMS".
 */
export const DEFAULT_LOCAL_THRESHOLD_MS = 15;

/**
 * What a server's last successful check told of it, as selection reads it: its ServerType and a replica set member's
 * claim (`setName`; a primary's `electionId` and `setVersion`), each undefined when the reply has none of the right
 * type.
 */
export interface CheckedServer {
  /** Its ServerType (see `serverTypeOf`). */
  readonly type: ServerType;
  /** The `setName` of the reply, if a string. */
  readonly setName?: string | undefined;
  /** The `electionId` of the reply, if an ObjectId (a primary's). */
  readonly electionId?: ObjectId | undefined;
  /** The `setVersion` of the reply, if a number. */
  readonly setVersion?: number | undefined;
  /**
   * The `maxWireVersion` of the reply, if a number: the order its primary claims compare in (see
   * {@link compareElections}).
   */
  readonly maxWireVersion?: number | undefined;
}

/**
 * What the successful hello reply `reply` tells selection of its server (see {@link CheckedServer}). Never throws.
 *
 * Source: server discovery and monitoring spec, "ServerDescription" (type, setName, electionId, setVersion).
 */
export function checkedServer(reply: Document): CheckedServer {
  const { setName, electionId, setVersion, maxWireVersion } = reply;
  return {
    type: serverTypeOf(reply),
    setName: typeof setName === 'string' ? setName : undefined,
    electionId: electionId instanceof ObjectId ? electionId : undefined,
    setVersion: typeof setVersion === 'number' && !Number.isNaN(setVersion) ? setVersion : undefined,
    maxWireVersion: typeof maxWireVersion === 'number' ? maxWireVersion : undefined,
  };
}

/** What selection knows of one server whose pool is ready: what its last check said, and how busy it is. */
export interface SelectableServer<P> extends CheckedServer {
  /** What the selection returns for this server (the client: its pool). */
  readonly pool: P;
  /** Its average RTT in ms (see `Monitor.averageRoundTripTimeMS`); undefined: none measured. */
  readonly averageRoundTripTimeMS: number | undefined;
  /** Its operationCount: the operations selected for it and not yet done (read only of the two compared). */
  readonly operationCount: number;
}

/**
 * The servers of `servers` suitable for an operation with read preference `primary` (or any write) in a topology of
 * type `topologyType`: in `LoadBalanced` every server; in `Single` every server not `Unknown` when `directConnection`
 * (the one host the client was given), else (a standalone answered among several hosts) every `Standalone`; in
 * `Sharded` every `Mongos`; in `ReplicaSet` the primary (an `RSPrimary` of set `replicaSet` when that is given; of two
 * or more, those of the newest election, see {@link compareElections}: the others are stale primaries a step down
 * left behind); in `Unknown` none. Keeps their order.
 *
 * Source: server selection spec, "Topology type: ..." (each type's rule for writes and for mode primary; "A server of
 * type Unknown ... is not available"); server discovery and monitoring spec, "Using electionId and setVersion to
 * detect stale primaries"; extension: a standalone among several seeds, which SDAM removes while the topology stays
 * Unknown ("updateUnknownWithStandalone"), makes the topology Single here and is its only suitable server (see
 * `topologyTypeAfter`).
 */
export function suitableServers<P>(
  topologyType: ClientTopologyType,
  servers: readonly SelectableServer<P>[],
  replicaSet?: string,
  directConnection = true,
): SelectableServer<P>[] {
  switch (topologyType) {
    case 'LoadBalanced':
      return [...servers];
    case 'Single':
      return servers.filter((s) => (directConnection ? s.type !== 'Unknown' : s.type === 'Standalone'));
    case 'Sharded':
      return servers.filter((s) => s.type === 'Mongos');
    case 'ReplicaSet': {
      const primaries = servers.filter((s) => s.type === 'RSPrimary' && (replicaSet === undefined || s.setName === replicaSet));
      if (primaries.length < 2) return primaries;
      const newest = primaries.reduce((a, b) => (compareElections(a, b) >= 0 ? a : b));
      return primaries.filter((s) => compareElections(s, newest) === 0);
    }
    default:
      return [];
  }
}

/** The wire version of MongoDB 6.0, from which a primary's claims compare by electionId first. */
const ELECTION_ID_FIRST_WIRE_VERSION = 17;

/**
 * The order of two primaries' claims (negative when `a` is the older, 0 for the same election, positive when `b`
 * is): by electionId, then setVersion, when `a` is of MongoDB 6.0 or later (maxWireVersion >= 17, or none given);
 * by setVersion, then electionId, before. An absent electionId or setVersion is older than any.
 *
 * Source: server discovery and monitoring spec, "Using electionId and setVersion to detect stale primaries",
 * "updateRSFromPrimary" (the order by the reporting server's maxWireVersion).
 */
export function compareElections(a: CheckedServer, b: CheckedServer): number {
  const ids = compareOptional(a.electionId?.toHexString(), b.electionId?.toHexString());
  const versions = compareOptional(a.setVersion, b.setVersion);
  if ((a.maxWireVersion ?? ELECTION_ID_FIRST_WIRE_VERSION) >= ELECTION_ID_FIRST_WIRE_VERSION) return ids !== 0 ? ids : versions;
  return versions !== 0 ? versions : ids;
}

function compareOptional<T extends string | number>(a: T | undefined, b: T | undefined): number {
  if (a === b) return 0;
  if (a === undefined) return -1;
  if (b === undefined) return 1;
  return a < b ? -1 : 1;
}

/**
 * The servers of `suitable` within the latency window: those whose average RTT is at most `localThresholdMS` (ms)
 * above the shortest among them. A server without one (none measured yet) anchors nothing and is kept. Keeps their
 * order; empty for none.
 *
 * Source: server selection spec, "Filtering suitable servers based on the latency window"; extension: a server with
 * no average RTT is kept (the spec's servers, never Unknown here, all have one).
 */
export function inLatencyWindow<P>(suitable: readonly SelectableServer<P>[], localThresholdMS: number): SelectableServer<P>[] {
  if (suitable.length < 2) return [...suitable];
  let shortest = Infinity;
  for (const s of suitable) if (s.averageRoundTripTimeMS !== undefined) shortest = Math.min(shortest, s.averageRoundTripTimeMS);
  return suitable.filter((s) => s.averageRoundTripTimeMS === undefined || s.averageRoundTripTimeMS <= shortest + localThresholdMS);
}

/**
 * The server that gets the operation, of those in the latency window (`inWindow`): the only one, or of two taken at
 * random (`random`: a function giving a number in [0, 1), as `Math.random`), the one with the lower operationCount
 * (of two equal, either, at random). Undefined for none.
 *
 * Source: server selection spec, "Server Selection Algorithm" (multi-threaded or async, steps 6 and 7),
 * "operationCount-based selection within the latency window".
 */
export function selectWithinLatencyWindow<P>(inWindow: readonly SelectableServer<P>[], random: () => number = Math.random): SelectableServer<P> | undefined {
  const n = inWindow.length;
  if (n < 2) return inWindow[0];
  const i = Math.min(n - 1, Math.floor(random() * n));
  // The second of two distinct servers: one of the n - 1 others, each as likely.
  let j = Math.min(n - 2, Math.floor(random() * (n - 1)));
  if (j >= i) j++;
  const a = inWindow[i]!;
  const b = inWindow[j]!;
  if (a.operationCount !== b.operationCount) return a.operationCount < b.operationCount ? a : b;
  // Equal: the order i, j is random already.
  return a;
}

/**
 * The server selected for one operation (see {@link suitableServers}, {@link inLatencyWindow},
 * {@link selectWithinLatencyWindow}); undefined when none is suitable.
 *
 * Source: server selection spec, "Server Selection Algorithm" (multi-threaded or async, steps 3 to 7).
 */
export function selectServer<P>(
  topologyType: ClientTopologyType,
  servers: readonly SelectableServer<P>[],
  options: { readonly localThresholdMS: number; readonly replicaSet?: string | undefined; readonly directConnection?: boolean; readonly random?: () => number },
): SelectableServer<P> | undefined {
  const suitable = suitableServers(topologyType, servers, options.replicaSet, options.directConnection);
  return selectWithinLatencyWindow(inLatencyWindow(suitable, options.localThresholdMS), options.random);
}
