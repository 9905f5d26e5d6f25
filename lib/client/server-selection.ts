/**
 * Server selection among a client's servers whose pools are ready: which are suitable for an operation (by its read
 * preference: a replica set's primary, its eligible secondaries, or both; every mongos; the one server of a Single or
 * load-balanced topology), which of those are within the latency window, and which of those gets the operation (of
 * two taken at random, the one with the lower operationCount).
 *
 * Source: server selection spec, "Topology type: Single", "Topology types: ReplicaSetWithPrimary or
 * ReplicaSetNoPrimary" ("Read operations": mode, then maxStalenessSeconds, then tag_sets), "Topology type: Sharded",
 * "Topology type: LoadBalanced", "Topology type: Unknown", "maxStalenessSeconds" (the staleness estimate), "tag_sets",
 * "Filtering suitable servers based on the latency window", "Server Selection Algorithm" (multi-threaded or async:
 * steps 6 to 8, "operationCount"); server discovery and monitoring spec, "Using electionId and setVersion to detect
 * stale primaries" (of two servers that say they are primary, the one with the older electionId is stale).
 */
import { ObjectId, type Document } from 'bson';
import { DEFAULT_HEARTBEAT_FREQUENCY_MS } from '../monitor/monitor';
import { setOwnField } from '../own-field';
import { checkMaxStalenessSeconds, PRIMARY, type ReadPreference, type TagSet } from '../read-preference';
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
   * `compareElections`).
   */
  readonly maxWireVersion?: number | undefined;
  /** The `tags` of the reply (a member's), if an object; only its string values are kept. */
  readonly tags?: TagSet | undefined;
  /**
   * `lastWrite.lastWriteDate` of the reply (a member's), in ms since the epoch (the primary's wall clock when it last
   * wrote to its oplog, as this member has replicated it), if a date.
   */
  readonly lastWriteDate?: number | undefined;
  /** When the client received the reply, in ms (its scheduler's clock): the spec's lastUpdateTime. */
  readonly lastUpdateTime?: number | undefined;
}

/**
 * What the successful hello reply `reply`, received at `lastUpdateTime` (ms, the client's clock), tells selection of
 * its server (see {@link CheckedServer}). Never throws.
 *
 * Source: server discovery and monitoring spec, "ServerDescription" (type, setName, electionId, setVersion, tags,
 * lastWriteDate, lastUpdateTime).
 */
export function checkedServer(reply: Document, lastUpdateTime?: number): CheckedServer {
  const { setName, electionId, setVersion, maxWireVersion, tags, lastWrite } = reply;
  const lastWriteDate: unknown = lastWrite !== null && typeof lastWrite === 'object' ? (lastWrite as Document).lastWriteDate : undefined;
  return {
    type: serverTypeOf(reply),
    setName: typeof setName === 'string' ? setName : undefined,
    electionId: electionId instanceof ObjectId ? electionId : undefined,
    // A finite number only: an infinite setVersion would make every later primary's claim stale.
    setVersion: typeof setVersion === 'number' && Number.isFinite(setVersion) ? setVersion : undefined,
    maxWireVersion: typeof maxWireVersion === 'number' ? maxWireVersion : undefined,
    tags: tagsOf(tags),
    lastWriteDate: lastWriteDate instanceof Date && !Number.isNaN(lastWriteDate.getTime()) ? lastWriteDate.getTime() : undefined,
    lastUpdateTime,
  };
}

/** A reply's `tags`: its string values (a frozen copy), undefined when it is not an object or has none. */
function tagsOf(tags: unknown): TagSet | undefined {
  if (tags === null || typeof tags !== 'object' || Array.isArray(tags)) return undefined;
  let kept: Record<string, string> | undefined;
  for (const [key, value] of Object.entries(tags)) {
    // A tag named __proto__ stays a tag (see setOwnField).
    if (typeof value === 'string') setOwnField((kept ??= {}), key, value); // frozen below
  }
  return Object.freeze(kept);
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
 * What decides which servers are suitable, beyond the topology's type (see {@link suitableServers}).
 */
export interface SelectionCriteria {
  /** The replica set's name (the URI's `replicaSet`, or the first member's set name); undefined: any set. */
  readonly replicaSet?: string | undefined;
  /**
   * Whether a Single topology is a direct connection (its one host); false: the one seed answered as a standalone.
   * Default true.
   */
  readonly directConnection?: boolean | undefined;
  /** The operation's read preference (a write's is `primary`). Default {@link PRIMARY}. */
  readonly readPreference?: ReadPreference | undefined;
  /** How often servers are checked, in ms: part of a secondary's staleness estimate. Default 10,000. */
  readonly heartbeatFrequencyMS?: number | undefined;
}

/**
 * The servers of `servers` suitable for an operation in a topology of type `topologyType` (see
 * {@link SelectionCriteria}): in `LoadBalanced` every server; in `Single` every server not `Unknown` when
 * `directConnection` (the one host the client was given), else (a standalone that answered as the only seed) every
 * `Standalone`; in `Sharded` every `Mongos` (the read preference goes to them with the command); in `ReplicaSet`, by
 * the read preference's mode, the primary (an `RSPrimary` of set `replicaSet` when that is given; of two or more,
 * which a client's description never holds but the spec's tests give, those of the newest election, see
 * {@link compareElections}),
 * the eligible secondaries (`RSSecondary` of that set; eligible: of estimated staleness at most
 * `maxStalenessSeconds`, then matching the first tag set that matches any), or both; in `Unknown` none. Read
 * preferences apply only in `ReplicaSet`. Keeps their order.
 *
 * A secondary's staleness (ms) is `(S.lastUpdateTime - S.lastWriteDate) - (P.lastUpdateTime - P.lastWriteDate) +
 * heartbeatFrequencyMS` with a primary P, else `SMax.lastWriteDate - S.lastWriteDate + heartbeatFrequencyMS` (SMax:
 * the secondary with the newest lastWriteDate); a secondary whose staleness cannot be estimated (it, or P, has no
 * lastWriteDate) is not eligible under a maxStalenessSeconds.
 *
 * @throws {InvalidOptionError} in `ReplicaSet`, naming `readPreference.maxStalenessSeconds`, for a maxStalenessSeconds
 *   below 90 or below (heartbeatFrequencyMS + 10,000 ms) / 1000 (see `checkMaxStalenessSeconds`).
 *
 * Source: server selection spec, "Topology type: ..." (each type's rule for reads and writes; "A server of type
 * Unknown ... is not available"), "mode", "maxStalenessSeconds" (eligibility and the staleness estimate),
 * "tag_sets"; server discovery and monitoring spec, "Using electionId and setVersion to detect stale primaries",
 * "updateUnknownWithStandalone" (one seed that answers as a standalone makes the topology Single); extension: a
 * secondary of unknown staleness is not eligible (the spec's servers all have a lastWriteDate).
 */
export function suitableServers<P>(topologyType: ClientTopologyType, servers: readonly SelectableServer<P>[], criteria: SelectionCriteria = {}): SelectableServer<P>[] {
  switch (topologyType) {
    case 'LoadBalanced':
      return [...servers];
    case 'Single': {
      const direct = criteria.directConnection ?? true;
      return servers.filter((s) => (direct ? s.type !== 'Unknown' : s.type === 'Standalone'));
    }
    case 'Sharded':
      return servers.filter((s) => s.type === 'Mongos');
    case 'ReplicaSet':
      return replicaSetSuitable(servers, criteria);
    default:
      return [];
  }
}

/** {@link suitableServers} in a replica set. */
function replicaSetSuitable<P>(servers: readonly SelectableServer<P>[], criteria: SelectionCriteria): SelectableServer<P>[] {
  const { replicaSet } = criteria;
  const readPreference = criteria.readPreference ?? PRIMARY;
  const heartbeatFrequencyMS = criteria.heartbeatFrequencyMS ?? DEFAULT_HEARTBEAT_FREQUENCY_MS;
  checkMaxStalenessSeconds('readPreference', readPreference, heartbeatFrequencyMS);
  const primaries = servers.filter((s) => s.type === 'RSPrimary' && (replicaSet === undefined || s.setName === replicaSet));
  const primary = primaries.length < 2 ? primaries : newestPrimaries(primaries);
  const { mode } = readPreference;
  if (mode === 'primary' || (mode === 'primaryPreferred' && primary.length > 0)) return primary;
  const isSecondary = (s: SelectableServer<P>): boolean => s.type === 'RSSecondary' && (replicaSet === undefined || s.setName === replicaSet);
  const secondaries = servers.filter(isSecondary);
  // In the servers' order; a server is a primary or a secondary (of the set), never both.
  const candidates = mode !== 'nearest' ? secondaries : primary.length === 0 ? secondaries : servers.filter((s) => primary.includes(s) || isSecondary(s));
  const eligible = byTagSets(fresh(candidates, primary[0], secondaries, readPreference.maxStalenessSeconds, heartbeatFrequencyMS), readPreference.tags);
  return mode === 'secondaryPreferred' && eligible.length === 0 ? primary : eligible;
}

/** Of two or more primaries, those of the newest election (see {@link compareElections}). */
function newestPrimaries<P>(primaries: readonly SelectableServer<P>[]): SelectableServer<P>[] {
  const newest = primaries.reduce((a, b) => (compareElections(a, b) >= 0 ? a : b));
  return primaries.filter((s) => compareElections(s, newest) === 0);
}

/**
 * The candidates whose estimated staleness is at most `maxStalenessSeconds` (all without one); a non-secondary (the
 * primary, in mode nearest) has none. `primary`: the replica set's primary, if any; `secondaries`: every secondary (of
 * which SMax, without a primary); `heartbeatFrequencyMS`: how often servers are checked, in ms.
 */
function fresh<P>(
  candidates: readonly SelectableServer<P>[],
  primary: SelectableServer<P> | undefined,
  secondaries: readonly SelectableServer<P>[],
  maxStalenessSeconds: number | undefined,
  heartbeatFrequencyMS: number,
): readonly SelectableServer<P>[] {
  if (maxStalenessSeconds === undefined) return candidates;
  let staleness: (s: SelectableServer<P>) => number;
  if (primary !== undefined) {
    const primaryLag = primary.lastUpdateTime === undefined || primary.lastWriteDate === undefined ? NaN : primary.lastUpdateTime - primary.lastWriteDate;
    staleness = (s) => (s.lastUpdateTime ?? NaN) - (s.lastWriteDate ?? NaN) - primaryLag + heartbeatFrequencyMS;
  } else {
    let newest = -Infinity;
    for (const s of secondaries) if (s.lastWriteDate !== undefined && s.lastWriteDate > newest) newest = s.lastWriteDate;
    staleness = (s) => newest - (s.lastWriteDate ?? NaN) + heartbeatFrequencyMS;
  }
  // NaN (a date missing) compares false: not eligible.
  return candidates.filter((s) => s.type !== 'RSSecondary' || staleness(s) <= maxStalenessSeconds * 1000);
}

/**
 * The candidates matching the first tag set of `tags` that matches any of them (none when no tag set matches); all of
 * them without tags. Source: server selection spec, "tag_sets".
 */
function byTagSets<P>(candidates: readonly SelectableServer<P>[], tags: readonly TagSet[] | undefined): SelectableServer<P>[] {
  if (tags === undefined) return [...candidates];
  for (const set of tags) {
    const matching = candidates.filter((s) => matches(set, s.tags));
    if (matching.length > 0) return matching;
  }
  return [];
}

/** `Object.prototype.hasOwnProperty`, called on a member's tags: a polluted prototype's fields are no tags. */
const hasOwn = Object.prototype.hasOwnProperty;

/**
 * Whether the server tags `tags` hold every pair of tag set `set`: each its own, so that a field of a polluted
 * Object.prototype is no tag of a member.
 */
function matches(set: TagSet, tags: TagSet | undefined): boolean {
  for (const key of Object.keys(set)) if (tags === undefined || !hasOwn.call(tags, key) || tags[key] !== set[key]) return false;
  return true;
}

/** The wire version of MongoDB 6.0, from which a primary's claims compare by electionId first. */
export const ELECTION_ID_FIRST_WIRE_VERSION = 17;

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

/** The order of two optional values (negative when `a` is the lesser); an absent one is less than any. */
export function compareOptional<T extends string | number>(a: T | undefined, b: T | undefined): number {
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
 * @throws {InvalidOptionError} as {@link suitableServers} does.
 *
 * Source: server selection spec, "Server Selection Algorithm" (multi-threaded or async, steps 3 to 7).
 */
export function selectServer<P>(
  topologyType: ClientTopologyType,
  servers: readonly SelectableServer<P>[],
  options: SelectionCriteria & { readonly localThresholdMS: number; readonly random?: (() => number) | undefined },
): SelectableServer<P> | undefined {
  const suitable = suitableServers(topologyType, servers, options);
  return selectWithinLatencyWindow(inLatencyWindow(suitable, options.localThresholdMS), options.random);
}
