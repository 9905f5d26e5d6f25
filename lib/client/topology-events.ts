/**
 * The SDAM events of a topology's life, `Client.topologyEvents$`: TopologyOpening first, then ServerOpening,
 * ServerDescriptionChanged, TopologyDescriptionChanged and ServerClosed as servers are added, checked and removed, and
 * TopologyClosed last; and the equality of descriptions that decides whether a change is published.
 *
 * Source: SDAM logging and monitoring spec, "Events API" (the six events and their conditions), "Event Order and
 * Concurrency", "Initial Server Description", "Initial Topology Description", "Closing Topology Description"; server
 * discovery and monitoring spec, "Server Description Equality".
 */
import type { Document } from 'bson';
import { compareTopologyVersion } from '../monitor/topology-version';
import type { ServerDescription, TopologyDescription } from './topology-update';

/**
 * Fields every topology event carries.
 *
 * Source: SDAM logging and monitoring spec, "Events API" (`topologyId`); `time`: extension (as the pool events'
 * `time`).
 */
export interface TopologyEventBase {
  /** The client's topology id (`Client.topologyId`), the same in its log messages. */
  readonly topologyId: string;
  /**
   * When the event was published, in ms, read from the client's scheduler: ms since the Unix epoch with the default
   * one, an injected scheduler's own `now()` otherwise.
   */
  readonly time: number;
}

/** The client made its topology description: the first topology event. Source: as the module ("TopologyOpeningEvent"). */
export interface TopologyOpeningEvent extends TopologyEventBase {
  /** The event's name; discriminates {@link TopologyEvent}. */
  readonly type: 'TopologyOpening';
}

/**
 * A server was added (a seed, a member a reply listed, a host SRV polling found), its description Unknown: published
 * before its monitor starts (in load-balanced mode, before its description becomes `LoadBalancer`). A seed's comes
 * after the first TopologyDescriptionChanged, which lists the seeds; a server discovery or SRV polling adds comes
 * before the TopologyDescriptionChanged that first lists it (after the ServerDescriptionChanged of the check that
 * named it). Source: as the module ("ServerOpeningEvent").
 */
export interface ServerOpeningEvent extends TopologyEventBase {
  /** The event's name; discriminates {@link TopologyEvent}. */
  readonly type: 'ServerOpening';
  /** The server's address (`host:port`). */
  readonly address: string;
}

/**
 * A server's description changed: the outcome of its own check (a primary older than the newest election made
 * Unknown included), an error of one of its connections, or, in load-balanced mode, its opening gave it a description
 * not equal to the one it had (see {@link serverDescriptionEquals}: RTT, lastUpdateTime and lastWriteDate do not
 * count). The other servers the same update changes (a member another one names primary, now PossiblePrimary; a
 * primary a newer one replaced, now Unknown) get none: the TopologyDescriptionChanged that follows shows them, as the
 * SDAM monitoring spec tests expect. Published before the TopologyDescriptionChanged of the same change, and before the
 * ServerOpening and ServerClosed of the servers that change adds or removes. Source: as the module
 * ("ServerDescriptionChangedEvent"; the test `replica_set_with_no_primary`).
 */
export interface ServerDescriptionChangedEvent extends TopologyEventBase {
  /** The event's name; discriminates {@link TopologyEvent}. */
  readonly type: 'ServerDescriptionChanged';
  /** The server's address (`host:port`). */
  readonly address: string;
  /** Its description before (Unknown for a server just opened). */
  readonly previousDescription: ServerDescription;
  /** Its description now. */
  readonly newDescription: ServerDescription;
}

/**
 * The topology's description changed (see {@link topologyDescriptionEquals}): the first one from an Unknown
 * description of no server to the seeds, each Unknown; the last one, once closed, to an Unknown description of no
 * server. Source: as the module ("TopologyDescriptionChangedEvent").
 */
export interface TopologyDescriptionChangedEvent extends TopologyEventBase {
  /** The event's name; discriminates {@link TopologyEvent}. */
  readonly type: 'TopologyDescriptionChanged';
  /** The description the last TopologyDescriptionChanged gave (frozen). */
  readonly previousDescription: TopologyDescription;
  /** The description now (frozen). */
  readonly newDescription: TopologyDescription;
}

/**
 * A server was removed (or the client closed): its monitor was closed (a check it had in progress ended with
 * ServerHeartbeatFailed first). Source: as the module ("ServerClosedEvent").
 */
export interface ServerClosedEvent extends TopologyEventBase {
  /** The event's name; discriminates {@link TopologyEvent}. */
  readonly type: 'ServerClosed';
  /** The server's address (`host:port`). */
  readonly address: string;
}

/**
 * The client closed: every server's ServerClosed and the description's change to Unknown with no server came before
 * it; the last topology event. Source: as the module ("TopologyClosedEvent").
 */
export interface TopologyClosedEvent extends TopologyEventBase {
  /** The event's name; discriminates {@link TopologyEvent}. */
  readonly type: 'TopologyClosed';
}

/** Every topology event, discriminated by `type`. Source: as the module. */
export type TopologyEvent = TopologyOpeningEvent | ServerOpeningEvent | ServerDescriptionChangedEvent | TopologyDescriptionChangedEvent | ServerClosedEvent | TopologyClosedEvent;

/**
 * Whether two descriptions of one server are equal for publishing: equal `type`, `minWireVersion`, `maxWireVersion`,
 * `me`, `hosts`, `passives`, `arbiters` (each as a set), `tags`, `setName`, `setVersion`, `electionId`, `primary`,
 * `logicalSessionTimeoutMinutes`, `topologyVersion` and `error`; `lastUpdateTime`, `lastWriteDate`, `roundTripTime`
 * and `minRoundTripTime` do not count.
 *
 * Source: server discovery and monitoring spec, "Server Description Equality".
 */
export function serverDescriptionEquals(a: ServerDescription, b: ServerDescription): boolean {
  if (a === b) return true;
  return (
    a.type === b.type &&
    a.minWireVersion === b.minWireVersion &&
    a.maxWireVersion === b.maxWireVersion &&
    a.me === b.me &&
    sameList(a.hosts, b.hosts) &&
    sameList(a.passives, b.passives) &&
    sameList(a.arbiters, b.arbiters) &&
    sameTags(a.tags, b.tags) &&
    a.setName === b.setName &&
    a.setVersion === b.setVersion &&
    a.electionId?.toHexString() === b.electionId?.toHexString() &&
    a.primary === b.primary &&
    a.logicalSessionTimeoutMinutes === b.logicalSessionTimeoutMinutes &&
    sameTopologyVersion(a.topologyVersion, b.topologyVersion) &&
    a.error === b.error
  );
}

/**
 * Whether two topology descriptions are equal for publishing: equal `type`, `setName`, `maxSetVersion`,
 * `maxElectionId`, and the same servers, in the same order, with equal descriptions (see
 * {@link serverDescriptionEquals}).
 *
 * Source: SDAM logging and monitoring spec, "Events API" ("When the old topology description is not equal to the new
 * topology description"); the fields: server discovery and monitoring spec, "TopologyDescription".
 */
export function topologyDescriptionEquals(a: TopologyDescription, b: TopologyDescription): boolean {
  if (a.type !== b.type || a.setName !== b.setName || a.maxSetVersion !== b.maxSetVersion || a.maxElectionId?.toHexString() !== b.maxElectionId?.toHexString()) return false;
  if (a.servers.size !== b.servers.size) return false;
  const others = [...b.servers];
  let i = 0;
  for (const [address, server] of a.servers) {
    const [otherAddress, other] = others[i++];
    if (address !== otherAddress || !serverDescriptionEquals(server, other)) return false;
  }
  return true;
}

/**
 * Whether two lists hold the same strings, as sets: in any order, repeats aside (the client's lists have none, but a
 * description given to the exported {@link serverDescriptionEquals} may: `[a, a]` and `[a, b]` are not equal).
 */
function sameList(a: readonly string[], b: readonly string[]): boolean {
  if (a.length === b.length && a.every((value, i) => value === b[i])) return true;
  const inB = new Set(b);
  const inA = new Set(a);
  return inA.size === inB.size && [...inA].every((value) => inB.has(value));
}

/** Whether two tag sets have the same tags (in any order). */
function sameTags(a: Readonly<Record<string, string>> | undefined, b: Readonly<Record<string, string>> | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((key) => Object.hasOwn(b, key) && a[key] === b[key]);
}

/** Whether two topologyVersions are both absent or the same (same processId and counter). */
function sameTopologyVersion(a: Document | undefined, b: Document | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return compareTopologyVersion(a, b) === 0;
}
