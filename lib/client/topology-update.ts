/**
 * A client's topology description as server discovery updates it: which servers the client monitors (its seeds, then
 * the members a replica set's hello replies list, less those found not to belong), the TopologyType, the replica
 * set's name and the newest election a primary reported. Each check's outcome goes through
 * {@link Topology.update}, which says what the client has to do: servers to open and to remove, old
 * primaries to check again. No I/O: the client opens and closes the pools and monitors.
 *
 * Source: server discovery and monitoring spec, "TopologyDescription", "ServerDescription", "Parsing a hello or legacy
 * hello response", "Updating the TopologyDescription" (the TopologyType table and its actions), "Logical Session
 * Timeout", "Using electionId and setVersion to detect stale primaries", "Using me field to detect seed list members
 * that do not match host names in the replica set configuration".
 */
import type { Document, ObjectId } from 'bson';
import { parseAddress } from '../address';
import { asTopologyVersion } from '../monitor/topology-version';
import { PRIMARY, readPreferenceFrom, type ReadPreference, type ReadPreferenceMode } from '../read-preference';
import { checkedServer, compareOptional, ELECTION_ID_FIRST_WIRE_VERSION, suitableServers, type CheckedServer } from './server-selection';
import type { ServerType } from './topology-description';
import type { TopologyType } from './topology-type';

/**
 * The most members a replica set has (MongoDB's limit): a reply listing more (`hosts`, `passives` and `arbiters`
 * together) has only its first this many entries read, and no member a reply lists is added to a description that
 * holds this many servers already, so a broken or hostile server cannot make the client monitor thousands of hosts
 * (members that each list 50 new ones, found in turn, would otherwise). Source: extension (MongoDB's replica set limit
 * of 50 members).
 */
export const MAX_REPLICA_SET_MEMBERS = 50;

/**
 * What the client knows of one server from its last check: SDAM's ServerDescription, of the fields selection (see
 * `CheckedServer`: type, setName, electionId, setVersion, maxWireVersion, tags, lastWriteDate, lastUpdateTime in ms)
 * and discovery read. Addresses (`me`, `hosts`, `passives`, `arbiters`, `primary`) are normalized as the client writes
 * its hosts (`parseAddress`: host names lower-cased, port 27017 when none); one that is not an address, a Unix domain
 * socket path or a host of more than 255 characters, is left out. Its server's address is its key in
 * {@link TopologyDescription.servers} (and the `address` of the events that carry it).
 *
 * Source: server discovery and monitoring spec, "ServerDescription" (its fields; RTT is the monitor's, see
 * `Monitor.averageRoundTripTimeMS`).
 */
export interface ServerDescription extends CheckedServer {
  /**
   * Why it is Unknown: the error of its last check (its message), of a connection that made it so, or of the update
   * that made it so (a stale primary, a newer primary found); absent otherwise.
   */
  readonly error?: string | undefined;
  /** The reply's `minWireVersion`; 0 when not given. */
  readonly minWireVersion: number;
  /** The reply's `me`: the address the replica set configuration names this member by. */
  readonly me?: string | undefined;
  /** The reply's `hosts` (of the first 50 entries of `hosts`, `passives` and `arbiters` together), without repeats. */
  readonly hosts: readonly string[];
  /** The reply's `passives` (priority 0 members), read as `hosts` is. */
  readonly passives: readonly string[];
  /** The reply's `arbiters`, read as `hosts` is. */
  readonly arbiters: readonly string[];
  /** The reply's `primary`: who this member takes for the primary. */
  readonly primary?: string | undefined;
  /** The reply's `logicalSessionTimeoutMinutes`, if a number. */
  readonly logicalSessionTimeoutMinutes?: number | undefined;
  /**
   * The server's average round-trip time in ms as its monitor measured it at this check (see
   * `Monitor.averageRoundTripTimeMS`); undefined while Unknown, or before any sample. Not part of equality.
   */
  readonly roundTripTime?: number | undefined;
  /**
   * The smallest round-trip time in ms of the monitor's latest 10 samples at this check (0 until there are 2; see
   * `Monitor.minRoundTripTimeMS`); undefined while Unknown. Not part of equality.
   */
  readonly minRoundTripTime?: number | undefined;
  /**
   * The reply's `topologyVersion` (see `asTopologyVersion`), or, for a server a state change error made Unknown, the
   * error's: a check's reply older than it is ignored (see `isStaleServerDescription`).
   */
  readonly topologyVersion?: Document | undefined;
}

/** No address. */
const NONE: readonly string[] = Object.freeze([]);

/** The description of a server not checked yet, or whose check failed: type Unknown, nothing else known. */
export const UNKNOWN_SERVER_DESCRIPTION: ServerDescription = Object.freeze({ type: 'Unknown', minWireVersion: 0, hosts: NONE, passives: NONE, arbiters: NONE });

/**
 * The ServerDescription a check's outcome gives: `reply`, a successful hello reply received at `lastUpdateTime` (ms,
 * the client's clock; see `checkedServer` for the fields selection reads), or undefined for a failed check (Unknown).
 * A reply without `ok: 1` is Unknown too. Never throws: a field of the wrong type is taken as absent, an entry of
 * `hosts`, `passives` or `arbiters` that is no address (a Unix domain socket path, a host of more than 255 characters
 * included) left out, and so is such a `me` or `primary`. An RSGhost, a standalone and a mongos have no set name,
 * members or `me` the client may use.
 *
 * Source: server discovery and monitoring spec, "Parsing a hello or legacy hello response" ("type", "RSGhost and
 * RSOther", "Hostnames are normalized to lower-case", "logicalSessionTimeoutMinutes").
 */
export function serverDescriptionOf(reply: Document | undefined, lastUpdateTime?: number): ServerDescription {
  if (reply === undefined || reply === null || typeof reply !== 'object' || reply.ok !== 1) return UNKNOWN_SERVER_DESCRIPTION;
  const checked = checkedServer(reply, lastUpdateTime);
  const { minWireVersion, logicalSessionTimeoutMinutes } = reply;
  const member = checked.type !== 'RSGhost' && checked.type !== 'Standalone' && checked.type !== 'Mongos';
  return Object.freeze({
    ...checked,
    setName: member ? checked.setName : undefined,
    minWireVersion: typeof minWireVersion === 'number' ? minWireVersion : 0,
    me: member ? addressOrUndefined(reply.me) : undefined,
    ...(member ? membersOf(reply) : { hosts: NONE, passives: NONE, arbiters: NONE }),
    primary: member ? addressOrUndefined(reply.primary) : undefined,
    logicalSessionTimeoutMinutes: typeof logicalSessionTimeoutMinutes === 'number' ? logicalSessionTimeoutMinutes : undefined,
    topologyVersion: asTopologyVersion(reply.topologyVersion),
  });
}

/**
 * The longest host a reply may name, in characters: a DNS name's limit (RFC 1035, section 2.3.4: 255 octets), above
 * which a name resolves to nothing, while every event and log message of its server would carry it (50 hosts of 19 KB
 * each, within a hello reply's 1 MB, made 3.7 MB of log per second). Source: extension (RFC 1035's limit).
 */
const MAX_HOST_LENGTH = 255;

/**
 * The normalized address `value` names (see `parseAddress`), or undefined when it names none, or names a Unix domain
 * socket path (a replica set's configuration names each member `host:port`, and a path a server over the network names
 * would make the client connect, and authenticate, to a socket of its own machine), or a host longer than
 * {@link MAX_HOST_LENGTH}.
 *
 * Source: server discovery and monitoring spec, "Parsing a hello or legacy hello response"; MongoDB's replica set
 * configuration (`members[n].host`: a host name and port); RFC 1035, section 2.3.4.
 */
function addressOrUndefined(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  try {
    const { address, host, port } = parseAddress(value);
    return port === undefined || host.length > MAX_HOST_LENGTH ? undefined : address;
  } catch {
    return undefined;
  }
}

/**
 * `hosts`, `passives` and `arbiters` of a member's reply, normalized, each without repeats: of their first 50 entries
 * in all (a set's configuration lists each of its at most 50 members once, in one of them), those that are addresses.
 * Those beyond are not read: a reply of 1 MB holds 58,000 entries, and reading each (an error made for each that is no
 * address) blocked the event loop for 0.5 to 1 s per reply.
 */
function membersOf(reply: Document): Pick<ServerDescription, 'hosts' | 'passives' | 'arbiters'> {
  const lists = { hosts: new Set<string>(), passives: new Set<string>(), arbiters: new Set<string>() };
  let read = 0;
  fields: for (const field of ['hosts', 'passives', 'arbiters'] as const) {
    const list: unknown = reply[field];
    if (!Array.isArray(list)) continue;
    for (const entry of list) {
      if (read++ === MAX_REPLICA_SET_MEMBERS) break fields;
      const address = addressOrUndefined(entry);
      if (address !== undefined) lists[field].add(address);
    }
  }
  return { hosts: Object.freeze([...lists.hosts]), passives: Object.freeze([...lists.passives]), arbiters: Object.freeze([...lists.arbiters]) };
}

/** The members a member's description lists: its `hosts`, `passives` and `arbiters`, in that order, without repeats. */
function members(description: ServerDescription): string[] {
  return [...new Set([...description.hosts, ...description.passives, ...description.arbiters])];
}

/**
 * A copy of `entries` that refuses to change: its `set`, `delete` and `clear` throw a TypeError. A description's
 * `servers` is given to every subscriber of the topology events, and the client keeps it (the last one published, to
 * compare the next one with; the empty one every client starts from and ends at): a subscriber that changed it would
 * change what the others see, and what the client publishes next.
 */
function frozenMap<K, V>(entries: Iterable<readonly [K, V]>): ReadonlyMap<K, V> {
  const map = new Map(entries);
  for (const name of ['set', 'delete', 'clear'] as const) {
    Object.defineProperty(map, name, {
      value: () => {
        throw new TypeError(`a topology description's servers cannot be changed (${name}): it is a snapshot, shared by every subscriber`);
      },
    });
  }
  return Object.freeze(map);
}

/** What one update asks of the client (addresses in the order the update found them). */
export interface TopologyChange {
  /** Servers new to the description: open a pool and a monitor for each. */
  readonly added: readonly string[];
  /** Servers no longer in the description: stop monitoring each and close its pool. */
  readonly removed: readonly string[];
  /**
   * Other servers the update made Unknown (a primary replaced by a newer one): request an immediate check of each
   * (their pools are not cleared).
   */
  readonly invalidated: readonly string[];
}

/** Where a description starts (see {@link Topology}). */
export interface InitialTopology {
  /** The seed list: normalized addresses, without repeats. */
  readonly seeds: readonly string[];
  /** The initial TopologyType: `Single`, `LoadBalanced`, `ReplicaSetNoPrimary` (a set name given) or `Unknown`. */
  readonly type: TopologyType;
  /** The replica set's name, when given (the URI's `replicaSet`). */
  readonly setName?: string | undefined;
}

/**
 * SDAM's TopologyDescription at one moment, as the topology events carry it and `Client.topologyDescription` gives
 * it: frozen, its `servers` a copy that refuses changes (a later update changes a later description, not this one),
 * in the order the client came to monitor them (the seeds, then each member as a reply first listed it).
 *
 * Source: server discovery and monitoring spec, "TopologyDescription"; SDAM logging and monitoring spec, "Events API"
 * (`hasReadableServer`, `hasWritableServer`, "Determining If A Topology Has Readable/Writable Servers").
 */
export interface TopologyDescription {
  /** The TopologyType. */
  readonly type: TopologyType;
  /** The replica set's name: given (`replicaSet`), or taken from the first member that answered; else undefined. */
  readonly setName: string | undefined;
  /** The greatest electionId a primary reported (part of the newest election, with `maxSetVersion`). */
  readonly maxElectionId: ObjectId | undefined;
  /** The setVersion of the newest election. */
  readonly maxSetVersion: number | undefined;
  /** One description per server the client monitors, by address (`host:port`). */
  readonly servers: ReadonlyMap<string, ServerDescription>;
  /**
   * The smallest `logicalSessionTimeoutMinutes` of the data-bearing servers; undefined when there is none or one of
   * them reports none (see `Client.logicalSessionTimeoutMinutes`).
   */
  readonly logicalSessionTimeoutMinutes: number | undefined;
  /**
   * Whether a server could serve a read of `readPreference` (a mode, or `{ mode, tags?, maxStalenessSeconds? }`, as
   * `selectPool()` takes it; default `primary`) now, by SDAM's table: never in `Unknown`; in `Single` and `Sharded`
   * when a server is available (not Unknown; PossiblePrimary is a replica set's only); always in `LoadBalanced`; in a
   * replica set when a server suits the read preference (`primary` in `ReplicaSetNoPrimary`: never), as server
   * selection finds it (pools aside: a server whose pool is paused counts).
   *
   * A secondary's staleness is estimated, and the smallest maxStalenessSeconds taken, with the client's
   * heartbeatFrequencyMS, as server selection does.
   *
   * @throws {InvalidOptionError} naming `readPreference` (or its field) for a read preference `readPreferenceFrom`
   *   refuses, whatever the TopologyType; naming `readPreference.maxStalenessSeconds`, in a replica set, for a
   *   maxStalenessSeconds below 90 s or below (heartbeatFrequencyMS + 10,000 ms) / 1000 (see
   *   `checkMaxStalenessSeconds`).
   */
  hasReadableServer(readPreference?: ReadPreferenceMode | ReadPreference): boolean;
  /** Whether a server could serve a write now: {@link hasReadableServer} with `primary`. */
  hasWritableServer(): boolean;
}

/**
 * SDAM's TopologyDescription, updated in place by each check's outcome ({@link update}): the client's Topology. Its
 * `servers` are the ones the client monitors, in the order they came (the seeds, then each member as a reply first
 * listed it). {@link description} gives it as it is now, frozen.
 *
 * Source: server discovery and monitoring spec, "TopologyDescription", "Updating the TopologyDescription".
 */
export class Topology {
  /** The TopologyType. */
  type: TopologyType;
  /** The replica set's name: given, or taken from the first member that answered. */
  setName: string | undefined;
  /** The greatest electionId a primary reported (part of the newest election, with {@link maxSetVersion}). */
  maxElectionId: ObjectId | undefined;
  /** The setVersion of the newest election (it may go down, as electionId orders first). */
  maxSetVersion: number | undefined;
  /** One description per server the client monitors, by address. */
  readonly servers = new Map<string, ServerDescription>();
  /**
   * How many seeds the client was given (one: a standalone makes the topology Single, while it is the only server;
   * more: it is removed).
   */
  private readonly seedCount: number;

  constructor(initial: InitialTopology) {
    this.type = initial.type;
    this.setName = initial.setName;
    this.seedCount = initial.seeds.length;
    for (const seed of initial.seeds) this.servers.set(seed, UNKNOWN_SERVER_DESCRIPTION);
  }

  /**
   * The smallest `logicalSessionTimeoutMinutes` of the data-bearing servers (Standalone, Mongos, RSPrimary,
   * RSSecondary, LoadBalancer); undefined when there is none or one of them reports none.
   *
   * Source: server discovery and monitoring spec, "Logical Session Timeout", "Data-Bearing Server Type".
   */
  get logicalSessionTimeoutMinutes(): number | undefined {
    let smallest: number | undefined;
    for (const server of this.servers.values()) {
      if (!DATA_BEARING.has(server.type)) continue;
      if (server.logicalSessionTimeoutMinutes === undefined) return undefined;
      smallest = smallest === undefined ? server.logicalSessionTimeoutMinutes : Math.min(smallest, server.logicalSessionTimeoutMinutes);
    }
    return smallest;
  }

  /**
   * The description as it is now: frozen, with a copy of `servers` (see {@link TopologyDescription}).
   * `heartbeatFrequencyMS`: how often the client checks its servers, in ms (default 10,000), which
   * `hasReadableServer` reads a maxStalenessSeconds with, as server selection does.
   */
  description(heartbeatFrequencyMS?: number): TopologyDescription {
    const servers = frozenMap(this.servers);
    const { type, setName, maxElectionId, maxSetVersion, logicalSessionTimeoutMinutes } = this;
    const hasReadableServer = (given?: ReadPreferenceMode | ReadPreference): boolean => {
      const readPreference = given === undefined ? PRIMARY : readPreferenceFrom('readPreference', given);
      switch (type) {
        case 'Unknown':
          return false;
        case 'LoadBalanced':
          return true;
        case 'Single':
        case 'Sharded':
          return [...servers.values()].some((server) => server.type !== 'Unknown');
        default: {
          const selectable = [...servers].map(([address, server]) => ({ ...server, pool: address, averageRoundTripTimeMS: undefined, operationCount: 0 }));
          return suitableServers('ReplicaSet', selectable, { replicaSet: setName, readPreference, heartbeatFrequencyMS }).length > 0;
        }
      }
    };
    return Object.freeze({ type, setName, maxElectionId, maxSetVersion, servers, logicalSessionTimeoutMinutes, hasReadableServer, hasWritableServer: () => hasReadableServer(PRIMARY) });
  }

  /**
   * Takes the outcome of a check of `address` (its new description, see {@link serverDescriptionOf}) and updates the
   * description as SDAM's TopologyType table says; returns what the client must do. An outcome of a server not in
   * the description (removed while it was checked) changes nothing. In `Single` the server is replaced, and is
   * Unknown when a set name was given and the reply names none or another one; in `LoadBalanced` only a description
   * of type `LoadBalancer` is taken (the client's, as it opens the server: there is no check).
   */
  update(address: string, description: ServerDescription): TopologyChange {
    const change = new Change();
    if (!this.servers.has(address)) return change;
    if (this.type === 'LoadBalanced') {
      if (description.type === 'LoadBalancer') this.servers.set(address, description);
      return change;
    }
    if (this.type === 'Single') {
      this.servers.set(address, this.setName !== undefined && description.setName !== this.setName ? UNKNOWN_SERVER_DESCRIPTION : description);
      return change;
    }
    this.servers.set(address, description);
    switch (this.type) {
      case 'Unknown':
        this.updateUnknown(address, description, change);
        break;
      case 'Sharded':
        if (description.type !== 'Unknown' && description.type !== 'Mongos') this.remove(address, change);
        break;
      case 'ReplicaSetNoPrimary':
      case 'ReplicaSetWithPrimary':
        this.updateReplicaSet(address, description, change);
        break;
    }
    return change;
  }

  /**
   * Adds `addresses` not in the description as Unknown servers, and removes those in it not in `addresses` (SRV
   * polling's new host list); returns what the client must do.
   */
  replaceServers(addresses: readonly string[]): TopologyChange {
    const change = new Change();
    for (const address of [...this.servers.keys()]) if (!addresses.includes(address)) this.remove(address, change);
    for (const address of addresses) this.add(address, change);
    if (this.type === 'ReplicaSetWithPrimary') this.checkIfHasPrimary();
    return change;
  }

  /**
   * Removes `address` (a server the client could not open), then, in a replica set, sets the TopologyType by whether
   * a primary is left.
   */
  removeServer(address: string): void {
    this.remove(address, new Change());
    if (this.type === 'ReplicaSetWithPrimary') this.checkIfHasPrimary();
  }

  /** TopologyType Unknown. */
  private updateUnknown(address: string, description: ServerDescription, change: Change): void {
    switch (description.type) {
      case 'Standalone':
        // updateUnknownWithStandalone. One seed that SRV polling has joined others to (a mongodb+srv URI whose one
        // host became several while none answered) is several: a Single topology of them would take every standalone
        // among them for its server, and spread operations over separate deployments.
        if (this.seedCount === 1 && this.servers.size === 1) this.type = 'Single';
        else this.remove(address, change);
        return;
      case 'Mongos':
        this.type = 'Sharded';
        return;
      case 'RSPrimary':
      case 'RSSecondary':
      case 'RSArbiter':
      case 'RSOther':
        // A member makes the topology a replica set (with a primary once updateReplicaSet takes a primary's reply).
        this.type = 'ReplicaSetNoPrimary';
        this.updateReplicaSet(address, description, change);
        return;
      default:
        // Unknown, RSGhost: the TopologyType stays Unknown.
        return;
    }
  }

  /** TopologyType ReplicaSetNoPrimary or ReplicaSetWithPrimary. */
  private updateReplicaSet(address: string, description: ServerDescription, change: Change): void {
    switch (description.type) {
      case 'Standalone':
      case 'Mongos':
        this.remove(address, change);
        this.checkIfHasPrimary();
        return;
      case 'RSPrimary':
        this.type = 'ReplicaSetWithPrimary';
        this.updateFromPrimary(address, description, change);
        return;
      case 'RSSecondary':
      case 'RSArbiter':
      case 'RSOther':
        if (this.type === 'ReplicaSetNoPrimary') this.updateWithoutPrimary(address, description, change);
        else this.updateWithPrimaryFromMember(address, description, change);
        return;
      default:
        // Unknown, RSGhost (kept: it may become a member of this set).
        this.checkIfHasPrimary();
        return;
    }
  }

  /** SDAM's updateRSWithoutPrimary. */
  private updateWithoutPrimary(address: string, description: ServerDescription, change: Change): void {
    if (this.setName === undefined) this.setName = description.setName;
    else if (this.setName !== description.setName) {
      this.remove(address, change);
      return;
    }
    for (const member of members(description)) this.addMember(member, change);
    this.markPossiblePrimary(description.primary);
    if (description.me !== undefined && description.me !== address) this.remove(address, change);
  }

  /** SDAM's updateRSWithPrimaryFromMember. */
  private updateWithPrimaryFromMember(address: string, description: ServerDescription, change: Change): void {
    if (this.setName !== description.setName || (description.me !== undefined && description.me !== address)) {
      this.remove(address, change);
      this.checkIfHasPrimary();
      return;
    }
    // Had this member been the primary?
    if (!this.hasPrimary()) {
      this.type = 'ReplicaSetNoPrimary';
      this.markPossiblePrimary(description.primary);
    }
  }

  /** SDAM's updateRSFromPrimary. */
  private updateFromPrimary(address: string, description: ServerDescription, change: Change): void {
    if (this.setName === undefined) this.setName = description.setName;
    else if (this.setName !== description.setName) {
      this.remove(address, change);
      this.checkIfHasPrimary();
      return;
    }
    const stale = this.staleClaim(description);
    if (stale !== undefined) {
      this.servers.set(address, Object.freeze({ ...UNKNOWN_SERVER_DESCRIPTION, error: stale }));
      this.checkIfHasPrimary();
      return;
    }
    for (const [other, server] of this.servers) {
      if (other === address || server.type !== 'RSPrimary') continue;
      this.servers.set(other, Object.freeze({ ...UNKNOWN_SERVER_DESCRIPTION, error: 'primary marked stale due to discovery of newer primary' }));
      change.invalidated.push(other);
    }
    // Those it does not list removed first (the same servers as SDAM's add, then remove): the members it lists, at most
    // 50, all find room.
    const listed = members(description);
    for (const other of [...this.servers.keys()]) if (!listed.includes(other)) this.remove(other, change);
    for (const member of listed) this.addMember(member, change);
    this.checkIfHasPrimary();
  }

  /**
   * Why the primary's claim `description` is stale (older than the newest election a primary reported), recording
   * it as the newest when it is not; undefined then.
   */
  private staleClaim(description: ServerDescription): string | undefined {
    const { electionId, setVersion } = description;
    if ((description.maxWireVersion ?? 0) >= ELECTION_ID_FIRST_WIRE_VERSION) {
      // An absent electionId or setVersion is older than any.
      const ids = compareOptional(electionId?.toHexString(), this.maxElectionId?.toHexString());
      if (ids > 0 || (ids === 0 && compareOptional(setVersion, this.maxSetVersion) >= 0)) {
        this.maxElectionId = electionId;
        this.maxSetVersion = setVersion;
        return undefined;
      }
      return staleMessage(description, this);
    }
    // Before MongoDB 6.0: setVersion orders first, and a claim without both is never stale.
    if (setVersion !== undefined && electionId !== undefined) {
      const max = this.maxSetVersion;
      const maxId = this.maxElectionId;
      if (max !== undefined && maxId !== undefined && (max > setVersion || (max === setVersion && maxId.toHexString() > electionId.toHexString()))) {
        return staleMessage(description, this);
      }
      this.maxElectionId = electionId;
    }
    if (setVersion !== undefined && (this.maxSetVersion === undefined || setVersion > this.maxSetVersion)) this.maxSetVersion = setVersion;
    return undefined;
  }

  /**
   * A member named `primary` (another member's opinion) still Unknown becomes PossiblePrimary, keeping what its
   * Unknown description holds (a state change error's topologyVersion, against which older replies are ignored).
   */
  private markPossiblePrimary(primary: string | undefined): void {
    const server = primary === undefined ? undefined : this.servers.get(primary);
    if (server?.type === 'Unknown') this.servers.set(primary!, server === UNKNOWN_SERVER_DESCRIPTION ? POSSIBLE_PRIMARY : Object.freeze({ ...server, type: 'PossiblePrimary' }));
  }

  /** Whether an RSPrimary is among the servers. */
  private hasPrimary(): boolean {
    for (const server of this.servers.values()) if (server.type === 'RSPrimary') return true;
    return false;
  }

  /** SDAM's checkIfHasPrimary. */
  private checkIfHasPrimary(): void {
    this.type = this.hasPrimary() ? 'ReplicaSetWithPrimary' : 'ReplicaSetNoPrimary';
  }

  /** Adds `address` as an Unknown server, unless it is there already. */
  private add(address: string, change: Change): void {
    if (this.servers.has(address)) return;
    this.servers.set(address, UNKNOWN_SERVER_DESCRIPTION);
    change.added.push(address);
  }

  /**
   * Adds `address`, a member a reply lists, as {@link add} does, unless the description holds
   * {@link MAX_REPLICA_SET_MEMBERS} servers already.
   */
  private addMember(address: string, change: Change): void {
    if (this.servers.size < MAX_REPLICA_SET_MEMBERS) this.add(address, change);
  }

  /**
   * Removes `address`. (No update removes a server it added: a primary's removes only servers its list lacks, before
   * adding those it lists; the others remove only the server that replied.)
   */
  private remove(address: string, change: Change): void {
    if (this.servers.delete(address)) change.removed.push(address);
  }
}

/** The ServerTypes that bear data. */
const DATA_BEARING: ReadonlySet<ServerType> = new Set<ServerType>(['Standalone', 'Mongos', 'RSPrimary', 'RSSecondary', 'LoadBalancer']);

/**
 * Whether the pool of `address`, just checked successfully, is to be readied: its server bears data (Standalone,
 * Mongos, RSPrimary, RSSecondary), or is the one server of a `Single` topology (directConnection=true: an arbiter
 * included, as before any discovery; also while the check left it Unknown for another set's name). Otherwise the
 * check leaves the pool of an arbiter, an RSOther (a hidden member), an RSGhost, or a server the check left Unknown
 * (a stale primary) as it is: paused unless it was ready before (a member turned arbiter or hidden, a deposed primary,
 * whose pool SDAM does not clear, stay ready until their next clear). No operation is selected there, and a ready
 * pool would open minPoolSize connections to it, authenticating to an arbiter, which refuses authentication, at
 * every attempt.
 *
 * Source: server discovery and monitoring spec, "Connection Pool Management" (after a successful check of a
 * data-bearing server, or of a direct connection's, its pool MUST be created and marked ready); CMAP spec, "Marking a
 * Connection Pool as Ready"; as the official drivers do (Python's PYTHON-2634, Node.js's `Topology.updateServer`).
 */
export function readiesPool(topology: Topology, address: string): boolean {
  const type = topology.servers.get(address)?.type;
  return type !== undefined && (topology.type === 'Single' || DATA_BEARING.has(type));
}

/** A server another member names as primary, not checked since. */
const POSSIBLE_PRIMARY: ServerDescription = Object.freeze({ ...UNKNOWN_SERVER_DESCRIPTION, type: 'PossiblePrimary' });

/** A {@link TopologyChange} being built. */
class Change implements TopologyChange {
  readonly added: string[] = [];
  readonly removed: string[] = [];
  readonly invalidated: string[] = [];
}

/** The error of a primary whose claim is older than the newest election (`max`). */
function staleMessage(claim: ServerDescription, max: Topology): string {
  const tuple = (electionId: ObjectId | undefined, setVersion: number | undefined): string => `{ electionId: ${electionId?.toHexString() ?? 'null'}, setVersion: ${setVersion ?? 'null'} }`;
  return `primary marked stale due to electionId/setVersion mismatch, ${tuple(claim.electionId, claim.setVersion)} is stale compared to ${tuple(max.maxElectionId, max.maxSetVersion)}`;
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
