/**
 * An embedded MongoDB wire-protocol endpoint, for demos and tests on machines without mongod: a TCP (or TLS) server
 * on 127.0.0.1 that answers the way a standalone mongod does for what a pool, its monitor and a driver's connection
 * handshake use:
 *
 * - OP_MSG commands, and the legacy OP_QUERY hello many clients open with (answered with OP_REPLY);
 * - hello / isMaster (with `saslSupportedMechs`, `speculativeAuthenticate` and compression negotiation), ping,
 *   buildInfo, endSessions, connectionStatus, and `{ ok: 1 }` for anything else;
 * - with `mongos: true`, hello replies as a mongos gives them (`msg: 'isdbgrid'`);
 * - with `replicaSetMember`, hello replies as a replica set member gives them (`setName`, `hosts`, `me`, `primary`
 *   (a secondary's: the primary of its set in this process), `electionId` as the primary; `passives`, `arbiters`,
 *   `arbiterOnly`, `passive`, `hidden` and a removed member's reply from a configuration:
 *   {@link EmbeddedServer.setReplicaSetConfig}; `tags` for a tagged member; `lastWrite`, each member behind the
 *   primary by
 *   its replication lag: {@link EmbeddedServer.setReplicationLag}), a state that changes at runtime
 *   ({@link EmbeddedServer.setReplicaSetMemberState}: an election or a step down), and a secondary's refusals
 *   (NotWritablePrimary 10107, NotPrimaryNoSecondaryOk 13435);
 * - the commands received, with their `$readPreference` ({@link EmbeddedServer.receivedCommands});
 * - OP_COMPRESSED (zlib, snappy, zstd: those available in this process) once negotiated, replying with the
 *   compressor of the request;
 * - SCRAM-SHA-1 and SCRAM-SHA-256 users, MONGODB-X509 users (in `$external`, over TLS with verified client
 *   certificates) and PLAIN (LDAP users in `$external`, given the password their directory holds; the SCRAM users
 *   elsewhere, as a mongod with PLAIN enabled): with users configured, commands other than the handshake, authentication, ping, buildInfo and
 *   connectionStatus require an authenticated connection; the users can be replaced while it runs
 *   ({@link EmbeddedServer.setUsers}), and its SCRAM conversations are counted per users generation;
 * - `topologyVersion` in hello replies and a replica set member's "not primary" errors (not a standalone's, nor a
 *   shutdown error: mongod adds it to those only in quiesce mode), awaitable hello (`topologyVersion` with
 *   `maxAwaitTimeMS`) and, when the request sets exhaustAllowed, streaming hello (replies with moreToCome), as
 *   mongod 4.4+ (maxWireVersion 9 and up); {@link EmbeddedServer.changeTopology} is its topology change;
 * - a request with the OP_MSG moreToCome flag (an unacknowledged write; a hello too, awaitable or with exhaustAllowed:
 *   it waits as one, and neither replies nor streams) is run and gets no reply; when it fails with a
 *   not-primary error (codes 189, 10107, 11602, 13435, 13436, from a handler or the fail point), or its last write
 *   error (`writeErrors`) is one, the connection is closed instead, and any other error is dropped, as mongod does
 *   (OP_MSG spec, "moreToCome On Requests");
 * - the `failCommand` fail point through `configureFailPoint` on `admin` (see {@link FailCommandPoint});
 * - server-side connection resets ({@link EmbeddedServer.closeConnections});
 * - the Stable API parameters (`apiVersion`, `apiStrict`, `apiDeprecationErrors`) of every command, checked as mongod
 *   checks them, in the order they come in the command's BSON (TypeMismatch 14 for a wrong type; 40413 for one given
 *   twice, as when a command holding apiVersion is sent on a connection that declares one; 4886600 for apiStrict or
 *   apiDeprecationErrors without apiVersion;
 *   APIVersionError 322 for a version other than "1"), `requireApiVersion` (498870 for a command without apiVersion),
 *   and recorded per connection ({@link ClientConnectionInfo.apiParameters}). Unlike mongod it does not refuse
 *   commands outside API version 1 under `apiStrict`, nor check a getMore's parameters against its cursor's (it
 *   holds no cursors).
 *
 * Not a database: it stores nothing. Where it answers differently from a mongod, by design: a command without a
 * handler ({@link EmbeddedServer.handle}) gets `{ ok: 1 }`, where a mongod answers an unknown one with
 * CommandNotFound (59); it adds no error labels of its own but a secondary's RetryableWriteError (see
 * {@link FailCommandPoint}); a fail point configured for hello applies to the awaitable hellos waiting then (one use
 * per hello; one it does nothing to keeps waiting), where a mongod applies it as the next hello of each stream starts
 * (up to maxAwaitTimeMS later); it does not verify an OP_MSG checksum (a mongod refuses a wrong CRC-32C). `start()`
 * after `stop()` is a restart: the same address, a new `topologyVersion.processId`, its counter at 0.
 */
import * as net from 'node:net';
import * as tls from 'node:tls';
import { Binary, Long, ObjectId, onDemand, Timestamp, type Document } from 'bson';
import { AWS_FAILED, awsServerContinue, awsServerStart, type AwsServerConversation } from './aws-server';
import { EXTERNAL_SOURCE } from '../auth/credentials';
import { checkCompressorAvailable, compressMessage, compressorUnavailable, decompressMessage, SUPPORTED_COMPRESSORS, type CompressorName } from '../connection/op-compressed';
import { decodeOpMsg, encodeOpMsg, OpMsgFlag } from '../connection/op-msg';
import { decodeOpQuery, encodeOpReply } from '../connection/op-query';
import { API_PARAMETER_NAMES } from '../connection/server-api';
import { DEFAULT_MAX_MESSAGE_SIZE_BYTES, MessageFramer, OpCode, type WireMessage } from '../connection/wire-protocol';
import { inWords, InvalidOptionError } from '../errors';
import { optionValue, optionValues, rejectUnknownOptions, requireMethodOptions, requireOptionsObject, type ListsEveryOption } from '../options';
import { setOwnField } from '../own-field';
// The period of a primary's no-op writer (mongod's NoopWriter, periodicNoopIntervalSecs: 10 s), the max staleness
// spec's idleWritePeriodMS, which the client's estimate counts on.
import { IDLE_WRITE_PERIOD_MS } from '../read-preference';
import { MAX_TIMER_DELAY_MS } from '../scheduler';
import { FailCommandPoint, type FailAction } from './fail-points';
import { OidcIdentities, type EmbeddedOidcOptions } from './oidc-server';
import { ScramUsers, type EmbeddedUser, type ScramConversation } from './scram-server';

/** Options of an {@link EmbeddedServer}. Source: extension (the settings of a standalone mongod it imitates). */
export interface EmbeddedServerOptions {
  /**
   * TCP port; 0 (default) picks a free one at the first {@link EmbeddedServer.start}, and a restart (`start()` after
   * `stop()`) listens on that same port again, as a restarted mongod keeps its address.
   */
  port?: number | undefined;
  /**
   * maxWireVersion it reports. Default 25 (MongoDB 8.0). Below 9 (MongoDB 4.4) the handshake's
   * `speculativeAuthenticate` is ignored, and hello replies carry no `topologyVersion` (so a client polls), as with
   * servers before 4.4. Below 6 (MongoDB 3.4 and earlier, which predate OP_MSG) it answers only the legacy hello sent
   * as OP_QUERY (with OP_REPLY) and closes the connection on any OP_MSG, as such a server cannot read one. With
   * {@link minWireVersion}, what a server outside a client's supported range reports.
   */
  maxWireVersion?: number | undefined;
  /**
   * minWireVersion it reports: the oldest wire protocol version it still speaks. Default 0 (every mongod to date
   * reports 0 to clients); a value above a client's newest wire version stands for a server too new for that client.
   * At most {@link maxWireVersion} (default 25). It refuses nothing itself: the client decides.
   */
  minWireVersion?: number | undefined;
  /** Server version it reports in buildInfo. Default "8.0.0". */
  version?: string | undefined;
  /**
   * Users; when given, connections must authenticate (SCRAM-SHA-1 / SCRAM-SHA-256; MONGODB-X509 for users in
   * `$external`, which needs `tls` with `ca` and `requestCert`; PLAIN for users in `$external` given a password, and
   * for SCRAM users).
   */
  users?: EmbeddedUser[] | undefined;
  /** Serve TLS with this key and certificate (PEM); `ca` and `requestCert` check client certificates. */
  tls?: {
    /** The server's private key, PEM. */
    key: string | Buffer;
    /** The server's certificate, PEM. */
    cert: string | Buffer;
    /** The certificate authorities client certificates must chain to, PEM. */
    ca?: string | Buffer | undefined;
    /** Ask every client for a certificate and refuse connections without a valid one. Default false. */
    requestCert?: boolean | undefined;
  } | undefined;
  /**
   * Compressors it accepts, each `zlib`, `snappy` or `zstd`. Default: those this process can speak (zlib; snappy when
   * the optional package `snappy` loads; zstd on Node.js 22.15 or later), as mongod's default `snappy,zstd,zlib`.
   */
  compressors?: string[] | undefined;
  /**
   * Act as a load balancer in front of this many services: a handshake with `loadBalanced: true` gets a `serviceId`,
   * assigned to connections round-robin. Default 0 (not a load balancer: such a handshake gets no serviceId).
   */
  loadBalancedServices?: number | undefined;
  /**
   * Require a Stable API version, as mongod's `requireApiVersion` parameter does: every command (hello and the legacy
   * hello, the handshake, authentication and monitoring included) without `apiVersion` fails with code 498870
   * (`Location498870`, "The apiVersion parameter is required, please configure your MongoClient's API version").
   * Default false. Whatever this option, the API parameters of every command are checked as mongod checks them (see
   * {@link EmbeddedServer}).
   */
  requireApiVersion?: boolean | undefined;
  /**
   * Answer hello and the legacy hello as a mongos does: with `msg: 'isdbgrid'`, which makes a client take the
   * deployment as Sharded (server discovery and monitoring spec, "Server Type"). Default false (a standalone).
   */
  mongos?: boolean | undefined;
  /**
   * Act as one member of a replica set, as a mongod started with `--replSet` and a member of its configuration
   * answers. Hello and the legacy hello then carry `setName`, `setVersion` (1, counted up by
   * {@link EmbeddedServer.setReplicaSetHosts}), `isWritablePrimary` (legacy: `ismaster`) true only for the primary,
   * `secondary` (true only for a secondary), `hosts` (this option's `hosts`, default `[<its own host:port>]`), `me`
   * (its own `host:port`), `electionId` while it is the primary only (see
   * {@link EmbeddedServer.setReplicaSetMemberState}), and `primary`: the primary's own address; a secondary's, the
   * address of the started endpoint of its `setName` in this process that is primary (the one elected last when
   * several are), when its configuration lists that address (read at each hello: a mongod knows the primary of the
   * members of its configuration from its heartbeats), else none. Another member's election is no topology change of
   * this one: a waiting awaitable hello is not answered early for it, and its next reply shows the new `primary`.
   * Arbiters, passive (priority 0) and hidden members, and a member removed from the configuration, answer as
   * mongod's do once given a configuration with {@link EmbeddedServer.setReplicaSetConfig}.
   * A secondary refuses the commands mongod refuses on one (see {@link EmbeddedServer.setReplicaSetMemberState}).
   * The state changes at runtime with {@link EmbeddedServer.setReplicaSetMemberState}.
   *
   * - `setName`: the replica set's name (a non-empty string);
   * - `state`: `'primary'` or `'secondary'`, its state at construction;
   * - `hosts`: the members' `host:port` (non-empty strings), as the replica set configuration lists them; the
   *   endpoint's own address belongs in it (a client removes a member whose `me` its `hosts` lacks). Ports picked at
   *   `start()` can be set once known with {@link EmbeddedServer.setReplicaSetHosts}.
   *
   * - `tags`: the member's tags (an object of string values, `{ dc: 'east', usage: 'reporting' }`), sent as hello's
   *   `tags`, which a client matches read preference tag sets against; none, or `{}`, sends no `tags`, as mongod
   *   omits the field for a member without tags;
   * - `replicationLagMS`: how far behind the primary it replicates, in ms (a number >= 0, default 0); see
   *   {@link EmbeddedServer.setReplicationLag};
   * - `clock`: the clock of its writes and its `lastWrite` (an object with `now()`, epoch ms: an RxJS SchedulerLike
   *   such as `VirtualClock`), default the system clock (`Date.now`); give every member of one set the same. Only
   *   the replication model reads it: the endpoint's timers (maxAwaitTimeMS, blockTimeMS) and `localTime` stay on
   *   the system clock.
   *
   * Every member's hello carries `lastWrite` (see {@link EmbeddedServer.setReplicationLag}).
   *
   * Not with `mongos: true`, nor with `loadBalancedServices` above 0 (a mongos or a load balancer is no replica set
   * member). Default: none (a standalone). Unlike a mongod, the replies carry no `$clusterTime` or `operationTime`.
   *
   * Source: extension (mongod's replica set member hello reply: handshake spec, "Hello Command"; server discovery and
   * monitoring spec, "Server Type", "electionId"; MongoDB server, TopologyCoordinator's hello response).
   */
  replicaSetMember?: {
    /** The replica set's name. */
    setName: string;
    /** The member's state at construction. */
    state: 'primary' | 'secondary';
    /** The members' `host:port`, as the replica set configuration lists them. Default: `[<its own host:port>]`. */
    hosts?: string[] | undefined;
    /** The member's tags, sent as hello's `tags` (none: no `tags`). Source: extension (mongod's member `tags`). */
    tags?: Record<string, string> | undefined;
    /**
     * How far behind the primary it replicates, in ms: a number >= 0, default 0. See
     * {@link EmbeddedServer.setReplicationLag}.
     */
    replicationLagMS?: number | undefined;
    /**
     * The clock of its writes and `lastWrite`: `now()` in epoch ms (a VirtualClock does). Default: `Date.now`. Give
     * every member of one set the same.
     */
    clock?: {
      /** The time now, in epoch ms. */
      now(): number;
    } | undefined;
  } | undefined;
  /**
   * Accept MONGODB-OIDC (on `$external`), as a mongod with an OIDC identity provider: the tokens it accepts (a table,
   * or JWTs signed with a key: the endpoint is its own stand-in for the IdP; see {@link EmbeddedOidcOptions}). A
   * saslStart with `jwt` is the one-step conversation, one without it gets the IdP info (two-step), the handshake's
   * speculative saslStart is answered; a refused or expired token gets AuthenticationFailed (18). Once the token a
   * connection authenticated with expires, its commands (other than the handshake and authentication) fail with
   * ReauthenticationRequired (391). With this option, connections must authenticate. Counts: {@link EmbeddedServer.oidc}.
   */
  oidc?: EmbeddedOidcOptions | undefined;
  /**
   * MONGODB-AWS, as a mongod with it enabled: a saslStart on `$external` gets a server nonce (the client's 32 bytes and
   * 32 random ones) and `stsHost`; the saslContinue's signed GetCallerIdentity request is then checked. The endpoint's
   * stand-in for STS: where a mongod would send the request to STS, the endpoint verifies its SigV4 signature itself,
   * with the secret of the access key ID the Authorization header names in `credentials` (and, when one is listed, the
   * session token), and checks the nonce, the gs2-cb-flag and the signed headers. A failure is AuthenticationFailed
   * (18, "Authentication failed.") as a mongod answers; success authenticates the connection as the key's `arn`
   * (default `arn:aws:iam::000000000000:user/<accessKeyId>`) in `$external`. Connections must then authenticate.
   */
  aws?: {
    /** The keys STS would accept. */
    credentials: {
      /** The access key ID the Authorization header names. */
      accessKeyId: string;
      /** The secret the signature is checked with (never shown). */
      secretAccessKey: string;
      /** The session token the request must carry (`x-amz-security-token`), when the key is a temporary one. */
      sessionToken?: string | undefined;
      /** The user the connection authenticates as, in `$external`. Default `arn:aws:iam::000000000000:user/<accessKeyId>`. */
      arn?: string | undefined;
    }[];
    /** The STS host sent to clients. Default `sts.amazonaws.com`. */
    stsHost?: string | undefined;
  } | undefined;
}

/** Whether `value` is undefined or an integer from `min` to `max`. */
function isIntegerOrUnset(value: unknown, min: number, max = Number.MAX_SAFE_INTEGER): boolean {
  return value === undefined || (Number.isInteger(value) && (value as number) >= min && (value as number) <= max);
}

/**
 * Checks the values of {@link EmbeddedServerOptions} (users are checked by {@link ScramUsers}).
 *
 * @throws {InvalidOptionError} naming the first invalid option and what it allows.
 */
function checkEmbeddedServerOptions(options: EmbeddedServerOptions): void {
  const { port, maxWireVersion, version, compressors, loadBalancedServices, tls: tlsOptions } = options;
  if (!isIntegerOrUnset(port, 0, 65535)) throw new InvalidOptionError('port', port, 'an integer from 0 to 65535 (0: a free port)');
  if (!isIntegerOrUnset(maxWireVersion, 0)) throw new InvalidOptionError('maxWireVersion', maxWireVersion, 'an integer >= 0');
  if (!isIntegerOrUnset(options.minWireVersion, 0, maxWireVersion ?? 25)) {
    throw new InvalidOptionError('minWireVersion', options.minWireVersion, `an integer from 0 to maxWireVersion (${maxWireVersion ?? 25})`);
  }
  if (version !== undefined && (typeof version !== 'string' || version === '')) {
    throw new InvalidOptionError('version', version, 'a non-empty version string such as "8.0.0"');
  }
  if (compressors !== undefined && (!Array.isArray(compressors) || !compressors.every((c) => (SUPPORTED_COMPRESSORS as readonly unknown[]).includes(c)))) {
    throw new InvalidOptionError('compressors', compressors, `an array of ${SUPPORTED_COMPRESSORS.map((c) => `"${c}"`).join(', ')}`);
  }
  for (const c of compressors ?? []) checkCompressorAvailable(c);
  if (options.requireApiVersion !== undefined && typeof options.requireApiVersion !== 'boolean') {
    throw new InvalidOptionError('requireApiVersion', options.requireApiVersion, 'true or false (a boolean)');
  }
  if (options.mongos !== undefined && typeof options.mongos !== 'boolean') throw new InvalidOptionError('mongos', options.mongos, 'true or false (a boolean)');
  if (options.aws !== undefined) {
    const given = requireOptionsObject('aws', options.aws, 'an object { credentials, stsHost? }', true);
    const list: unknown = optionValue(given, 'credentials');
    if (!Array.isArray(list) || !list.every((c: Record<string, unknown>) => c !== null && typeof c === 'object' && typeof c.accessKeyId === 'string' && typeof c.secretAccessKey === 'string')) {
      throw new InvalidOptionError('aws.credentials', '<not shown>', 'an array of { accessKeyId, secretAccessKey, sessionToken?, arn? } (strings)');
    }
  }
  if (!isIntegerOrUnset(loadBalancedServices, 0)) throw new InvalidOptionError('loadBalancedServices', loadBalancedServices, 'an integer >= 0');
  if (tlsOptions !== undefined) {
    const given = requireOptionsObject('tls', tlsOptions, 'an object { key, cert, ca?, requestCert? } (PEM)', true);
    if (optionValue(given, 'key') === undefined || optionValue(given, 'cert') === undefined) {
      throw new InvalidOptionError('tls', '<not shown>', 'an object { key, cert, ca?, requestCert? } (PEM) with key and cert');
    }
  }
}

/** The keys of {@link EmbeddedServerOptions.replicaSetMember}. */
const REPLICA_SET_MEMBER_OPTION_NAMES = ['setName', 'state', 'hosts', 'tags', 'replicationLagMS', 'clock'] as const;

/** What {@link EmbeddedServerOptions.replicaSetMember} allows, in words. */
const REPLICA_SET_MEMBER_ALLOWED = "an object { setName, state: 'primary' | 'secondary', hosts?, tags?, replicationLagMS?, clock? }";

/** What a replication lag allows, in words. */
const REPLICATION_LAG_ALLOWED = 'a number of ms >= 0 (how far behind the primary the member replicates)';

/** Whether `lagMS` is a replication lag: a finite number >= 0. */
function isReplicationLag(lagMS: unknown): lagMS is number {
  return typeof lagMS === 'number' && Number.isFinite(lagMS) && lagMS >= 0;
}

/**
 * A copy of `tags` when it is an object whose own enumerable values are all strings (the tags of a replica set
 * member), undefined otherwise.
 */
function copyTags(tags: unknown): Record<string, string> | undefined {
  if (tags === null || typeof tags !== 'object' || Array.isArray(tags)) return undefined;
  const entries = Object.entries(tags as Record<string, unknown>);
  if (!entries.every(([, value]) => typeof value === 'string')) return undefined;
  return Object.fromEntries(entries) as Record<string, string>;
}

/**
 * Whether `hosts` is a non-empty array of non-empty strings (the `host:port` of each member).
 */
function isHostList(hosts: unknown): hosts is string[] {
  return Array.isArray(hosts) && hosts.length > 0 && hosts.every((h) => typeof h === 'string' && h !== '');
}

/**
 * Checks {@link EmbeddedServerOptions.replicaSetMember} and that it comes without `mongos: true` or load balanced
 * services (once the other options are checked), and returns what it gives, each field read once.
 *
 * @throws {InvalidOptionError} naming `replicaSetMember` (not an object, or given with `mongos: true` or
 *   `loadBalancedServices` above 0), an unknown key of it (`replicaSetMember.<key>`, with the closest one), or
 *   `replicaSetMember.setName`, `replicaSetMember.state`, `replicaSetMember.hosts`, `replicaSetMember.tags`,
 *   `replicaSetMember.replicationLagMS` or `replicaSetMember.clock` for a value it does not allow.
 */
function checkReplicaSetMember(options: EmbeddedServerOptions): {
  setName: string;
  state: 'primary' | 'secondary';
  hosts: readonly string[] | undefined;
  tags: Readonly<Record<string, string>> | undefined;
  replicationLagMS: number;
  clock: { now(): number } | undefined;
} {
  const given = requireOptionsObject('replicaSetMember', options.replicaSetMember, REPLICA_SET_MEMBER_ALLOWED, true);
  rejectUnknownOptions(given, REPLICA_SET_MEMBER_OPTION_NAMES, 'replicaSetMember', 'replicaSetMember.');
  const setName: unknown = optionValue(given, 'setName');
  if (typeof setName !== 'string' || setName === '') throw new InvalidOptionError('replicaSetMember.setName', setName, "a non-empty string (the replica set's name)");
  const state: unknown = optionValue(given, 'state');
  if (state !== 'primary' && state !== 'secondary') throw new InvalidOptionError('replicaSetMember.state', state, "'primary' or 'secondary'");
  const hosts: unknown = optionValue(given, 'hosts');
  if (hosts !== undefined && !isHostList(hosts)) {
    throw new InvalidOptionError('replicaSetMember.hosts', hosts, 'a non-empty array of "host:port" strings (the members), or nothing (its own address)');
  }
  const givenTags: unknown = optionValue(given, 'tags');
  const tags = givenTags === undefined ? undefined : copyTags(givenTags);
  if (givenTags !== undefined && tags === undefined) {
    throw new InvalidOptionError('replicaSetMember.tags', givenTags, "an object of string values (the member's tags, { dc: 'east' }), or nothing");
  }
  const replicationLagMS: unknown = optionValue(given, 'replicationLagMS') ?? 0;
  if (!isReplicationLag(replicationLagMS)) throw new InvalidOptionError('replicaSetMember.replicationLagMS', replicationLagMS, REPLICATION_LAG_ALLOWED);
  const clock: unknown = optionValue(given, 'clock');
  if (clock !== undefined && (clock === null || typeof clock !== 'object' || typeof (clock as { now?: unknown }).now !== 'function')) {
    throw new InvalidOptionError('replicaSetMember.clock', clock, 'an object with now() (epoch ms), such as an RxJS SchedulerLike, or nothing (Date.now)');
  }
  if (options.mongos === true) throw new InvalidOptionError('replicaSetMember', given, 'absent with mongos: true (a mongos is no replica set member)');
  if ((options.loadBalancedServices ?? 0) > 0) {
    throw new InvalidOptionError('replicaSetMember', given, 'absent with loadBalancedServices above 0 (a load balancer is no replica set member)');
  }
  return { setName, state, hosts: hosts === undefined ? undefined : [...hosts], tags, replicationLagMS, clock: clock as { now(): number } | undefined };
}

/**
 * One member of a replica set's configuration, as `replSetReconfig`'s `members` gives it (the fields that shape hello
 * replies), for {@link EmbeddedServer.setReplicaSetConfig}.
 *
 * Source: extension (mongod's replica set configuration, `members[n]`: `host`, `arbiterOnly`, `priority`, `hidden`).
 */
export interface ReplicaSetConfigMember {
  /** The member's `host:port` (a non-empty string, unique in the configuration). */
  host: string;
  /** An arbiter: votes, holds no data, never primary. Default false. */
  arbiterOnly?: boolean | undefined;
  /**
   * Its priority in elections, a number from 0 to 1000; default 1 (0 for an arbiter). 0 makes a data-bearing member
   * passive: listed in `passives`, never elected.
   */
  priority?: number | undefined;
  /** Hidden: listed in no member's hello; requires `priority: 0`, as mongod does. Default false. */
  hidden?: boolean | undefined;
}

/** The keys of a {@link ReplicaSetConfigMember}. */
const CONFIG_MEMBER_OPTION_NAMES = ['host', 'arbiterOnly', 'priority', 'hidden'] as const;

/** A {@link ReplicaSetConfigMember} checked, each field read once, the defaults filled in. */
interface ConfigMember {
  readonly host: string;
  readonly arbiterOnly: boolean;
  readonly priority: number;
  readonly hidden: boolean;
}

/** Whether mongod may elect `member`: a data-bearing member of priority above 0 (mongod's `isElectable`). */
function isElectable(member: ConfigMember): boolean {
  return !member.arbiterOnly && member.priority > 0;
}

/**
 * Checks the `members` of {@link EmbeddedServer.setReplicaSetConfig} as mongod checks a configuration's members (for
 * the fields it takes), and returns them with their defaults.
 *
 * @throws {InvalidOptionError} naming `members` (not a non-empty array of at most 50), `members[i]` (not an object, or
 *   a key other than `host`, `arbiterOnly`, `priority`, `hidden`, with the closest one), `members[i].host` (not a
 *   non-empty string, or one an earlier member has), `members[i].arbiterOnly` or `members[i].hidden` (not a boolean),
 *   `members[i].priority` (not a number from 0 to 1000, or above 0 with `hidden: true`).
 */
function checkConfigMembers(members: unknown): ConfigMember[] {
  if (!Array.isArray(members) || members.length === 0 || members.length > 50) {
    throw new InvalidOptionError('members', members, 'a non-empty array of at most 50 { host, arbiterOnly?, priority?, hidden? } (the replica set configuration\'s members)');
  }
  const checked: ConfigMember[] = [];
  members.forEach((given: unknown, i) => {
    const name = `members[${i}]`;
    const entry = requireOptionsObject(name, given, 'an object { host, arbiterOnly?, priority?, hidden? }', true);
    rejectUnknownOptions(entry, CONFIG_MEMBER_OPTION_NAMES, name, `${name}.`);
    const host: unknown = optionValue(entry, 'host');
    if (typeof host !== 'string' || host === '') throw new InvalidOptionError(`${name}.host`, host, 'a non-empty "host:port" string (the member\'s address)');
    if (checked.some((m) => m.host === host)) throw new InvalidOptionError(`${name}.host`, host, 'a host no other member of the configuration has (mongod refuses two members of one host)');
    const arbiterOnly: unknown = optionValue(entry, 'arbiterOnly') ?? false;
    if (typeof arbiterOnly !== 'boolean') throw new InvalidOptionError(`${name}.arbiterOnly`, arbiterOnly, 'true or false (a boolean), or nothing (false)');
    const hidden: unknown = optionValue(entry, 'hidden') ?? false;
    if (typeof hidden !== 'boolean') throw new InvalidOptionError(`${name}.hidden`, hidden, 'true or false (a boolean), or nothing (false)');
    const givenPriority: unknown = optionValue(entry, 'priority');
    if (givenPriority !== undefined && (typeof givenPriority !== 'number' || !(givenPriority >= 0 && givenPriority <= 1000))) {
      throw new InvalidOptionError(`${name}.priority`, givenPriority, 'a number from 0 to 1000, or nothing (1; 0 for an arbiter)');
    }
    // As mongod: an arbiter's default priority (1) becomes 0; a hidden member must have priority 0.
    const priority = givenPriority === undefined || (arbiterOnly && givenPriority === 1) ? (arbiterOnly ? 0 : 1) : givenPriority;
    if (hidden && priority !== 0) throw new InvalidOptionError(`${name}.priority`, givenPriority, '0 with hidden: true (mongod: "priority must be 0 when hidden=true")');
    checked.push({ host, arbiterOnly, priority, hidden });
  });
  return checked;
}


/** The most write times a replica set's record keeps (see {@link ReplicaSetWrites}). */
const MAX_RECORDED_WRITES = 100_000;

/** One entry of an oplog, as hello's `lastWrite` gives it: its time (epoch ms), increment within its second, and term. */
interface OpTimeRecord {
  readonly ms: number;
  readonly inc: number;
  readonly term: number;
}

/** What the write record of its set reads of a member started: its replication lag and its claim to be primary. */
interface ReplicaSetMemberView {
  /** Its replication lag now, in ms (0 for a primary). */
  lagMS(): number;
  /** Its address and the term of its election while it is the primary; undefined otherwise. */
  primaryClaim(): { readonly address: string; readonly term: number } | undefined;
}

/**
 * The writes of one replica set (the endpoints of one `setName` in this process, while started): the times of the
 * writes its primaries ran, from which each member's `lastWrite` is read as the newest write at or before now minus
 * its replication lag. Between them, the no-op writes of mongod's periodic no-op writer: at each multiple of
 * {@link IDLE_WRITE_PERIOD_MS} of the epoch when nothing was written in the period before it (as mongod's NoopWriter,
 * which writes one when the last applied opTime has not moved since its last round). The no-op writes are computed
 * when asked for, not written by a timer: the set is taken to have a primary writing them at every such time, before
 * its first member started too (a set that had been running idle). Memory: the write times no lag of a member still
 * reaches are dropped (one older write is kept), and at most {@link MAX_RECORDED_WRITES} are kept (the oldest go).
 */
class ReplicaSetWrites {
  /** The writes the primaries ran, oldest first. */
  private readonly writes: OpTimeRecord[] = [];
  /** The members started (see {@link ReplicaSetMemberView}). */
  readonly members = new Set<ReplicaSetMemberView>();
  /** The term of the set's last election, written in each opTime. */
  term = 0;

  /**
   * The address of the set's primary now: of the started members that are primary, the one elected last (the
   * highest term), as a mongod's secondary follows the primary of the highest term; undefined when none is.
   */
  currentPrimary(): string | undefined {
    let primary: { readonly address: string; readonly term: number } | undefined;
    for (const member of this.members) {
      const now = member.primaryClaim();
      if (now !== undefined && (primary === undefined || now.term > primary.term)) primary = now;
    }
    return primary?.address;
  }

  /** Records a write run now (epoch ms; never before the last one recorded). */
  record(now: number): void {
    const last = this.writes.at(-1);
    const ms = Math.max(now, last?.ms ?? now);
    const previous = this.newestAtOrBefore(ms);
    const inc = Math.floor(previous.ms / 1000) === Math.floor(ms / 1000) ? previous.inc + 1 : 1;
    this.writes.push({ ms, inc, term: this.term });
    this.prune(ms);
  }

  /** The newest write (or no-op write) at or before `target` (epoch ms). */
  newestAtOrBefore(target: number): OpTimeRecord {
    // The newest recorded write at or before target: binary search.
    let low = 0;
    let high = this.writes.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (this.writes[middle].ms <= target) low = middle + 1;
      else high = middle;
    }
    const write = low > 0 ? this.writes[low - 1] : undefined;
    // The last no-op time: a no-op is written there unless a write came in the period before it; and when one did,
    // that write is newer than any earlier no-op.
    const tick = Math.floor(target / IDLE_WRITE_PERIOD_MS) * IDLE_WRITE_PERIOD_MS;
    if (write === undefined || tick - IDLE_WRITE_PERIOD_MS >= write.ms) return { ms: tick, inc: 1, term: this.term };
    return write;
  }

  /**
   * The newest write a majority of the set's started members have (that of the member with the median lag, the
   * majority's slowest), for a member of lag `ownLagMS`: never newer than its own last write.
   */
  majorityAtOrBefore(now: number, ownLagMS: number): OpTimeRecord {
    const lags = [...this.members].map((member) => member.lagMS()).sort((a, b) => a - b);
    const majorityLag = lags.length === 0 ? ownLagMS : lags[Math.floor(lags.length / 2)];
    return this.newestAtOrBefore(now - Math.max(majorityLag, ownLagMS));
  }

  /** Drops the writes no member's lag reaches any more (keeping the newest of them), and the oldest over the cap. */
  private prune(now: number): void {
    const maxLag = Math.max(0, ...[...this.members].map((member) => member.lagMS()));
    const horizon = now - maxLag - IDLE_WRITE_PERIOD_MS;
    let unneeded = 0;
    while (unneeded + 1 < this.writes.length && this.writes[unneeded + 1].ms <= horizon) unneeded++;
    const over = this.writes.length - MAX_RECORDED_WRITES;
    if (unneeded > 1024 || over > 0) this.writes.splice(0, Math.max(unneeded, over));
  }
}

/** The write records of the replica sets of this process, by set name, while a member of the set is started. */
const replicaSetWrites = new Map<string, ReplicaSetWrites>();

/** An opTime as hello's `lastWrite` gives it: `{ ts: Timestamp, t: Long }`. */
function opTimeDocument(op: OpTimeRecord): Document {
  return { ts: new Timestamp({ t: Math.floor(op.ms / 1000), i: op.inc }), t: Long.fromNumber(op.term) };
}

/**
 * The most commands {@link EmbeddedServer.receivedCommands} keeps.
 */
const MAX_RECEIVED_COMMANDS = 1000;

/**
 * A command the endpoint received, as {@link EmbeddedServer.receivedCommands} lists it. Source: extension (for tests:
 * what a client sent, as mongod's command log shows it).
 */
export interface ReceivedCommand {
  /** The command's name as the client spelled it (`find`, `hello`, `isMaster`...). */
  readonly name: string;
  /** Its database (`$db`; for the legacy hello over OP_QUERY, the namespace's database). */
  readonly db: string;
  /** The id of the connection it came on ({@link ClientConnectionInfo.id}). */
  readonly connectionId: number;
  /**
   * Its `$readPreference` as sent (`{ mode, tags?, maxStalenessSeconds?, hedge? }`), or undefined when it carried
   * none (or a value that is no document).
   */
  readonly readPreference: Readonly<Document> | undefined;
}

/**
 * The last election term handed out in this process: each step up of any endpoint takes the next one, so that
 * electionIds compare, across the endpoints of one test, in the order they were elected.
 */
let lastElectionTerm = 0;

/**
 * A new electionId: as mongod (protocol version 1) makes it from its term (`OID::fromTerm`), the timestamp bytes at
 * 0x7fffffff followed by the term as a big-endian int64, so a later term is a greater ObjectId. The term is
 * {@link lastElectionTerm} plus one.
 */
function nextElectionId(): ObjectId {
  const bytes = Buffer.alloc(12);
  bytes.writeInt32BE(0x7fffffff, 0);
  bytes.writeBigInt64BE(BigInt(++lastElectionTerm), 4);
  return new ObjectId(bytes);
}

/** The opCodes a wire message header may carry (what tells one from a TLS record). */
const KNOWN_OP_CODES: ReadonlySet<number> = new Set(Object.values(OpCode));

/** The compressors this process speaks: zlib, and snappy and zstd where {@link compressorUnavailable} allows. */
function availableCompressors(): string[] {
  return SUPPORTED_COMPRESSORS.filter((c) => compressorUnavailable(c) === undefined);
}

/** The option names of {@link EmbeddedServerOptions}. */
const EMBEDDED_SERVER_OPTION_NAMES = ['port', 'maxWireVersion', 'minWireVersion', 'version', 'users', 'tls', 'compressors', 'loadBalancedServices', 'requireApiVersion', 'mongos', 'replicaSetMember', 'oidc', 'aws'] as const;
EMBEDDED_SERVER_OPTION_NAMES satisfies readonly (keyof EmbeddedServerOptions)[];
true satisfies ListsEveryOption<EmbeddedServerOptions, typeof EMBEDDED_SERVER_OPTION_NAMES>;

/**
 * What the server knows of one client connection, as given to a {@link CommandHandler}. Source: extension (the
 * per-connection state of a mongod: its connection id, handshake metadata, compressor and authenticated user).
 */
export interface ClientConnectionInfo {
  /** The server-side connection id (reported as `connectionId` in hello). */
  readonly id: number;
  /** `client.application.name` from the connection's handshake, if any. */
  appName: string | undefined;
  /** The compressor negotiated on this connection, if any. */
  compressor: string | undefined;
  /** The user this connection authenticated as (`<db>.<user>`), if any. */
  user: string | undefined;
  /**
   * The subject of the client certificate this connection presented and the endpoint verified (with `tls.ca` and
   * `requestCert`), as RFC 2253 writes it (the most specific attribute first): the user MONGODB-X509 authenticates
   * as. Undefined without such a certificate.
   */
  readonly certificateSubject: string | undefined;
  /**
   * The users generation ({@link EmbeddedServer.usersGeneration}) whose user this connection last authenticated
   * against: the generation its SCRAM conversation started in. Undefined until it authenticates.
   */
  usersGeneration: number | undefined;
  /** The SCRAM conversations started on this connection (saslStart answered with a salt and iteration count). */
  saslConversations: number;
  /**
   * The SASL conversation in progress, if any.
   *
   * @internal
   */
  conversation: ScramConversation | undefined;
  /** The service this connection reached, when the endpoint acts as a load balancer. */
  serviceId: ObjectId | undefined;
  /**
   * Whether an awaitable hello is in progress on this connection (waiting, or streaming replies with moreToCome):
   * what a streaming monitor's connection does all the time.
   */
  awaitingHello: boolean;
  /**
   * The Stable API parameters the last command of each name (lower case: `hello`, `saslstart`, `ping`...) carried on
   * this connection: a document of those of `apiVersion`, `apiStrict` and `apiDeprecationErrors` it held (`{}` for
   * none), whether or not the command then succeeded. `handshakeApiParameters` keeps the handshake's.
   */
  readonly apiParameters: Record<string, Readonly<Document>>;
  /** The Stable API parameters of this connection's first command (its handshake), as in {@link apiParameters}. */
  handshakeApiParameters: Readonly<Document> | undefined;
}

/** The Stable API parameters `command` holds (only those it holds). */
function apiParametersOf(command: Document): Document {
  const found: Document = {};
  for (const name of API_PARAMETER_NAMES) if (Object.prototype.hasOwnProperty.call(command, name)) found[name] = command[name];
  return found;
}

/** The names of the BSON types by type number, as mongod names them in a TypeMismatch error. */
const BSON_TYPE_NAMES: Readonly<Record<number, string>> = {
  1: 'double', 2: 'string', 3: 'object', 4: 'array', 5: 'binData', 6: 'undefined', 7: 'objectId', 8: 'bool', 9: 'date', 10: 'null',
  11: 'regex', 12: 'dbPointer', 13: 'javascript', 14: 'symbol', 15: 'javascriptWithScope', 16: 'int', 17: 'timestamp', 18: 'long',
  19: 'decimal', 127: 'maxKey', 255: 'minKey',
};

/**
 * The bytes of the body document (kind 0 section) of an OP_MSG body `body` (the bytes after the header), already
 * decoded by `decodeOpMsg`, so well formed.
 */
function bodyDocumentBytes(body: Buffer): Buffer | undefined {
  const end = (body.readUInt32LE(0) & OpMsgFlag.checksumPresent) !== 0 ? body.length - 4 : body.length;
  for (let offset = 4; offset < end; ) {
    const kind = body[offset++];
    const size = body.readInt32LE(offset);
    if (kind === 0) return body.subarray(offset, offset + size);
    offset += size;
  }
  return undefined;
}

/**
 * mongod's refusal of the API parameters of a command as they come, in order, in its BSON `document`, which a
 * decoded document cannot show (it keeps one value per key): the first API parameter of the wrong BSON type
 * (TypeMismatch 14), else the first given twice (40413, "is a duplicate field"): what a command holding `apiVersion`
 * on a connection that declares one gets. Undefined when each is given at most once with its type: the rest is
 * {@link apiParametersRefusal}'s.
 *
 * Source: extension (mongod's `APIParametersFromClient` parser: each field's type, then whether it was seen).
 */
function apiParametersInOrderRefusal(document: Uint8Array): Document | undefined {
  let seen: Set<string> | undefined;
  for (const [type, nameOffset, nameLength] of onDemand.parseToElements(document, 0)) {
    // Only names of 9 to 20 bytes starting with "api" can be one: the others are not read.
    if (nameLength < 9 || nameLength > 20 || document[nameOffset] !== 0x61 || document[nameOffset + 1] !== 0x70 || document[nameOffset + 2] !== 0x69) continue;
    const name = Buffer.from(document.buffer, document.byteOffset + nameOffset, nameLength).toString('utf8');
    if (!(API_PARAMETER_NAMES as readonly string[]).includes(name)) continue;
    const expected = name === 'apiVersion' ? 2 : 8;
    if (type !== expected) {
      const actual = BSON_TYPE_NAMES[type] ?? String(type);
      return { ok: 0, errmsg: `BSON field 'APIParametersFromClient.${name}' is the wrong type '${actual}', expected type '${BSON_TYPE_NAMES[expected]}'`, code: 14, codeName: 'TypeMismatch' };
    }
    if (seen?.has(name) === true) {
      return { ok: 0, errmsg: `BSON field 'APIParametersFromClient.${name}' is a duplicate field`, code: 40413, codeName: 'Location40413' };
    }
    (seen ??= new Set()).add(name);
  }
  return undefined;
}

/**
 * mongod's refusal of a command's API parameters, or undefined when it accepts them: a parameter of the wrong type
 * (TypeMismatch 14), `apiStrict` or `apiDeprecationErrors` without `apiVersion` (4886600), an `apiVersion` other than
 * "1" (APIVersionError 322), or, with `requireApiVersion`, no API parameter at all (498870).
 *
 * Source: extension (mongod's `initializeAPIParameters` and `enforceRequireAPIVersion`).
 */
function apiParametersRefusal(api: Document, requireApiVersion: boolean): Document | undefined {
  for (const name of API_PARAMETER_NAMES) {
    const value: unknown = api[name];
    const type = name === 'apiVersion' ? 'string' : 'boolean';
    if (value !== undefined && typeof value !== type) {
      const actual = value === null ? 'null' : typeof value === 'number' ? (Number.isInteger(value) ? 'int' : 'double') : typeof value === 'string' ? 'string' : typeof value === 'boolean' ? 'bool' : 'object';
      return { ok: 0, errmsg: `BSON field 'APIParametersFromClient.${name}' is the wrong type '${actual}', expected type '${type === 'boolean' ? 'bool' : type}'`, code: 14, codeName: 'TypeMismatch' };
    }
  }
  if ((api.apiStrict !== undefined || api.apiDeprecationErrors !== undefined) && api.apiVersion === undefined) {
    return { ok: 0, errmsg: 'Provided apiStrict and/or apiDeprecationErrors without passing apiVersion', code: 4886600, codeName: 'Location4886600' };
  }
  if (api.apiVersion !== undefined && api.apiVersion !== '1') {
    const errmsg = api.apiVersion === '2' ? 'Cannot accept API version 2' : 'API version must be "1"';
    return { ok: 0, errmsg, code: 322, codeName: 'APIVersionError' };
  }
  if (requireApiVersion && api.apiVersion === undefined) {
    return { ok: 0, errmsg: "The apiVersion parameter is required, please configure your MongoClient's API version", code: 498870, codeName: 'Location498870' };
  }
  return undefined;
}

/**
 * A command handler: receives the command document (over OP_MSG with `$db`, and each document sequence as the field of
 * its name, as mongod runs a command) and the connection it came on, and returns (or resolves to) the reply document. A
 * handler that throws or rejects (with any value), or returns something that is not a document (or one that cannot be
 * encoded as BSON: a Buffer, a Date, a cycle), is answered with `{ ok: 0, code: 2, codeName: 'BadValue' }` and the
 * error's message (or what was thrown, in words) as `errmsg`, on a connection it keeps open; a
 * `failCommand` fail point with `writeConcernError` adds it to a reply with `ok: 1`. Source: extension.
 */
export type CommandHandler = (command: Document, client: ClientConnectionInfo) => Document | Promise<Document>;

/** Commands that need no authentication. */
const OPEN_COMMANDS = new Set([
  'hello',
  'ismaster',
  'saslstart',
  'saslcontinue',
  'authenticate',
  'ping',
  'buildinfo',
  'connectionstatus',
]);

/**
 * The error codes of mongod's NotPrimaryError category (PrimarySteppedDown, NotWritablePrimary,
 * InterruptedDueToReplStateChange, NotPrimaryNoSecondaryOk, NotPrimaryOrSecondary): a request with moreToCome that
 * fails with one of them closes its connection. Source: MongoDB server (error_codes.yml; service_entry_point_common,
 * the moreToCome branch of the command response).
 */
const NOT_PRIMARY_CODES = new Set([189, 10107, 11602, 13435, 13436]);

/**
 * What mongod does with the response to a request sent with moreToCome: sends nothing; a not-primary error (see
 * {@link NOT_PRIMARY_CODES}) closes the connection, so that the client selects a server again; any other error is
 * dropped (OP_MSG spec, "moreToCome On Requests"). The error that counts is the last one met: the command's, when it
 * failed (`ok` not 1), else the last of its `writeErrors` (a write error of the batch is recorded as one). Source:
 * MongoDB server, service_entry_point_common (makeCommandResponse: the moreToCome branch comes before exhaust, for
 * every command, and reads the NotPrimaryErrorTracker); write_ops_exec (handleError records each write error, the last
 * one recorded deciding).
 */
function dropUnacknowledged(socket: net.Socket, response: Document): void {
  const failed = response.ok !== 1 && response.ok !== true;
  const writeErrors: unknown = response.writeErrors;
  const lastWriteError: unknown = Array.isArray(writeErrors) ? writeErrors.at(-1) : undefined;
  const code: unknown = failed ? response.code : lastWriteError !== null && typeof lastWriteError === 'object' ? (lastWriteError as Document).code : undefined;
  if (NOT_PRIMARY_CODES.has(Number(code))) socket.destroy();
}

/**
 * The commands a mongod never runs on a secondary (their `secondaryAllowed` is `kNever`): the writes, the DDL, the
 * transaction commands and user management. A secondary answers them with NotWritablePrimary (10107). Lower case.
 * Source: MongoDB server, each command's `secondaryAllowed` (write_commands, find_and_modify, bulk_write, create,
 * drop, dropDatabase, create_indexes, drop_indexes, rename_collection, collection_to_capped, coll_mod, txn_cmds,
 * user_management_commands).
 */
const NEVER_ON_SECONDARY = new Set([
  'insert', 'update', 'delete', 'findandmodify', 'bulkwrite',
  'create', 'drop', 'dropdatabase', 'createindexes', 'dropindexes', 'renamecollection', 'collmod', 'converttocapped', 'clonecollectionascapped',
  'committransaction', 'aborttransaction',
  'createuser', 'updateuser', 'dropuser', 'dropallusersfromdatabase', 'grantrolestouser', 'revokerolesfromuser',
  'createrole', 'updaterole', 'droprole', 'dropallrolesfromdatabase', 'grantrolestorole', 'revokerolesfromrole',
  'grantprivilegestorole', 'revokeprivilegesfromrole',
]);

/**
 * The commands a mongod runs on a secondary whatever the read preference (their `secondaryAllowed` is `kAlways`):
 * the handshake and monitoring, authentication, sessions, diagnostics, and getMore / killCursors of a cursor already
 * opened. Every other command (find, aggregate, count, distinct, listCollections, listIndexes, listDatabases, dbStats,
 * explain, and the commands the endpoint does not know) is `kOptIn`: run on a secondary only for a client that allows
 * secondary reads. Lower case. Source: MongoDB server, each command's `secondaryAllowed`.
 */
const ALWAYS_ON_SECONDARY = new Set([
  'hello', 'ismaster', 'ping', 'buildinfo', 'saslstart', 'saslcontinue', 'authenticate', 'logout', 'connectionstatus',
  'endsessions', 'startsession', 'refreshsessions', 'killsessions', 'killallsessions', 'killallsessionsbypattern',
  'getparameter', 'setparameter', 'serverstatus', 'hostinfo', 'listcommands', 'whatsmyuri', 'getcmdlineopts', 'getlog',
  'currentop', 'killop', 'getmore', 'killcursors', 'replsetgetstatus', 'replsetgetconfig', 'configurefailpoint',
  'shutdown', 'fsync',
]);

/** The read preference modes other than `primary`: a command carrying one in `$readPreference` may run on a secondary. */
const SECONDARY_OK_MODES: ReadonlySet<unknown> = new Set(['primaryPreferred', 'secondary', 'secondaryPreferred', 'nearest']);

/**
 * The embedded endpoint. `start()` it, connect to {@link address}, `stop()` it.
 *
 * Source: extension (answers as a standalone mongod does: OP_MSG spec; OP_COMPRESSED spec; handshake spec, "Hello
 * Command"; auth spec, "SCRAM-SHA-1", "SCRAM-SHA-256"; load balancer spec, "Connection Establishment" for
 * `serviceId`; the server's `failCommand` fail point; with `replicaSetMember`, as a replica set member does: see
 * {@link setReplicaSetMemberState}).
 */
export class EmbeddedServer {
  /**
   * The `failCommand` fail point. Configuring it ends the wait of every awaitable hello it now applies to: that hello
   * runs at once, through the fail point (a `closeConnection` or a ShutdownInProgress `errorCode` reaches a streaming
   * client at once, as a mongod shutting down answers its waiting hellos).
   */
  readonly failCommand = new FailCommandPoint(() => {
    this.failPointConfigurations++;
    this.wakeAwaitingHellos();
  });

  /** How many times {@link failCommand} was configured: a wait ends for a configuration made after it looked. */
  private failPointConfigurations = 0;
  /** The number of client connections accepted since start. */
  connectionsAccepted = 0;

  private readonly server: net.Server;
  /** The open client connections, and what the server knows of each. */
  private readonly sockets = new Map<net.Socket, ClientConnectionInfo>();
  /**
   * Every accepted TCP socket not yet closed, from the moment it is accepted: with TLS, one whose TLS handshake is
   * not done yet is in none of {@link sockets}, and would hold `stop()` until the handshake times out.
   */
  private readonly accepted = new Set<net.Socket>();
  private nextConnectionId = 1;
  private readonly handlers = new Map<string, CommandHandler>();
  private readonly users: ScramUsers;
  /** The MONGODB-OIDC side (`oidc` option) and its counts; undefined without that option. */
  readonly oidc: OidcIdentities | undefined;
  /** When the OIDC token each connection authenticated with expires (epoch ms). */
  private readonly oidcExpiry = new WeakMap<ClientConnectionInfo, number>();
  /** Connections in the middle of a two-step OIDC conversation. */
  private readonly oidcTwoStep = new WeakSet<ClientConnectionInfo>();
  /** The MONGODB-AWS conversation of each connection between its saslStart and saslContinue. */
  private readonly awsConversations = new WeakMap<ClientConnectionInfo, AwsServerConversation>();
  /** The service ids behind this endpoint when it acts as a load balancer. */
  readonly services: readonly ObjectId[];
  private port = 0;
  /** `topologyVersion.processId`: new for every endpoint and every restart, as for every mongod process. */
  private processId = new ObjectId();
  /** Whether {@link stop} has run since the last {@link start}: the next start is a restart. */
  private stopped = false;
  /** `topologyVersion.counter`. */
  private topologyCounter = 0;
  /** The awaitable hellos waiting: each is called on a topology change or a fail point configuration. */
  private readonly awaitingHellos = new Set<() => void>();
  /** The waiters of {@link waitForOpenConnections}: each is called when the number of open connections changed. */
  private readonly connectionCountWaiters = new Set<() => void>();
  /** The connections whose hello has carried client metadata already. */
  private readonly metadataSent = new WeakSet<ClientConnectionInfo>();
  /** The requestId of the next reply of a hello stream (each streamed reply is answered to by the next). */
  private nextReplyId = 1;
  /** The replica set's name ({@link EmbeddedServerOptions.replicaSetMember}); undefined for a standalone. */
  private setName: string | undefined;
  /** The replica set member's state ({@link EmbeddedServerOptions.replicaSetMember}); undefined for a standalone. */
  private memberState: 'primary' | 'secondary' | undefined;
  /** The term of its last step up (the term its electionId holds). */
  private electionTerm = 0;
  /** The electionId of its last step up, while it is the primary; undefined otherwise. */
  private electionId: ObjectId | undefined;
  /** The replica set members' `host:port`, when given (by the option or {@link setReplicaSetHosts}). */
  private memberHosts: readonly string[] | undefined;
  /**
   * The replica set's configuration as {@link setReplicaSetConfig} gave it, undefined until then and after
   * {@link setReplicaSetHosts} (every member is then a data-bearing electable one, listed in {@link memberHosts}).
   */
  private configMembers: readonly ConfigMember[] | undefined;
  /** The replica set configuration's version: 1, + 1 on every {@link setReplicaSetHosts} and {@link setReplicaSetConfig}. */
  private setVersion = 1;
  /** The member's tags ({@link EmbeddedServerOptions.replicaSetMember}), sent as hello's `tags`; undefined for none. */
  private memberTags: Readonly<Record<string, string>> | undefined;
  /** The member's replication lag, in ms (see {@link setReplicationLag}). */
  private replicationLagMS = 0;
  /** The clock of its writes and lastWrite (option `replicaSetMember.clock`): epoch ms. */
  private replicationNow: () => number = Date.now;
  /** Its replication lag now, in ms: 0 while it is the primary (see {@link setReplicationLag}). */
  private readonly currentLagMS = (): number => (this.memberState === 'primary' ? 0 : this.replicationLagMS);
  /** The write record of its replica set while it is started (see {@link ReplicaSetWrites}). */
  private replicaSet: ReplicaSetWrites | undefined;
  /** What its set's write record reads of it: its lag, and its address and election term while it is the primary. */
  private readonly memberView: ReplicaSetMemberView = {
    lagMS: this.currentLagMS,
    primaryClaim: () => (this.memberState === 'primary' ? { address: this.address, term: this.electionTerm } : undefined),
  };
  /** The last commands received (see {@link receivedCommands}), oldest first. */
  private readonly received: ReceivedCommand[] = [];
  /**
   * Each connection's `helloOk` as its last hello or legacy hello that carried one gave it (mongod's
   * `Client::supportsHello`): with it true, not-primary errors say "primary", else "master".
   */
  private readonly supportsHello = new WeakMap<ClientConnectionInfo, boolean>();

  /** The options given, each read once, none from Object.prototype (see optionValue). */
  private readonly options: EmbeddedServerOptions;

  /**
   * Makes the endpoint; nothing listens until {@link start}.
   *
   * @throws {InvalidOptionError} naming the option, before anything is opened: options that are not an object, a key
   *   that is not an {@link EmbeddedServerOptions} option (with the closest one), a `port` that is not an integer
   *   from 0 to 65535, a `maxWireVersion` or `loadBalancedServices` that is not an integer >= 0, a `minWireVersion`
   *   that is not an integer from 0 to `maxWireVersion` (default 25), a `version` that is
   *   not a non-empty string, `compressors` that are not an array of the compressors it speaks (`zlib`, `snappy`,
   *   `zstd`) or that name one unavailable in this process (`compressorUnavailable`), a `tls` that
   *   is not an object with `key` and `cert`, a `requireApiVersion` that is not a boolean, a `replicaSetMember` that
   *   is not `{ setName, state, hosts?, tags?, replicationLagMS?, clock? }` (a non-empty `setName`, `state`
   *   `'primary'` or `'secondary'`, `hosts` a non-empty array of non-empty strings, `tags` an object of string
   *   values, `replicationLagMS` a number >= 0, `clock` an object with a `now` function; a key of another name) or that comes with `mongos: true` or
   *   `loadBalancedServices` above 0, an `aws` whose `credentials` are not an array of `{ accessKeyId, secretAccessKey }` strings, or an invalid user (see
   *   {@link setUsers}).
   */
  constructor(given: EmbeddedServerOptions = {}) {
    requireOptionsObject('options', given, 'an EmbeddedServerOptions object, or nothing', true);
    rejectUnknownOptions(given, EMBEDDED_SERVER_OPTION_NAMES, 'EmbeddedServer');
    const options = optionValues(given, EMBEDDED_SERVER_OPTION_NAMES);
    checkEmbeddedServerOptions(options);
    this.options = options;
    this.users = new ScramUsers(options.users);
    this.oidc = options.oidc === undefined ? undefined : new OidcIdentities(options.oidc);
    this.services = Array.from({ length: options.loadBalancedServices ?? 0 }, () => new ObjectId());
    if (options.replicaSetMember !== undefined) {
      const member = checkReplicaSetMember(options);
      this.setName = member.setName;
      this.memberState = member.state;
      this.memberHosts = member.hosts;
      this.memberTags = member.tags;
      this.replicationLagMS = member.replicationLagMS;
      const clock = member.clock;
      if (clock !== undefined) this.replicationNow = () => clock.now();
      if (member.state === 'primary') this.electionId = nextElectionId();
      this.electionTerm = lastElectionTerm;
    }
    const onSocket = (socket: net.Socket): void => this.accept(socket);
    this.server = options.tls
      ? tls.createServer({ ...options.tls, rejectUnauthorized: optionValue(options.tls, 'requestCert') === true }, onSocket)
      : net.createServer(onSocket);
    this.server.on('connection', (socket: net.Socket) => {
      this.accepted.add(socket);
      socket.once('close', () => this.accepted.delete(socket));
    });
    const version = options.version ?? '8.0.0';
    this.handlers.set('hello', (cmd, client) => this.helloReply(false, cmd, client));
    this.handlers.set('ismaster', (cmd, client) => this.helloReply(true, cmd, client));
    this.handlers.set('ping', () => ({ ok: 1 }));
    this.handlers.set('buildinfo', () => ({
      version,
      versionArray: [...version.split('.').map(Number), 0, 0, 0].slice(0, 4),
      maxBsonObjectSize: 16 * 1024 * 1024,
      ok: 1,
    }));
    this.handlers.set('endsessions', () => ({ ok: 1 }));
    // As mongod, an admin-only command: refused on any other database.
    this.handlers.set('configurefailpoint', (cmd) =>
      cmd.$db === 'admin'
        ? this.failCommand.configure(cmd)
        : { ok: 0, errmsg: 'configureFailPoint may only be run against the admin database.', code: 13, codeName: 'Unauthorized' },
    );
    this.handlers.set('connectionstatus', (_cmd, client) => connectionStatusReply(client));
  }

  /** `127.0.0.1:<port>` once started (`127.0.0.1:0` before). */
  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** A `mongodb://` connection string for this endpoint (without credentials). */
  get uri(): string {
    return `mongodb://${this.address}/?directConnection=true${this.options.tls ? '&tls=true' : ''}`;
  }

  /** The number of client connections open right now. */
  get openConnections(): number {
    return this.sockets.size;
  }

  /**
   * The topologyVersion its hello replies carry (maxWireVersion 9 and up): `processId`, an ObjectId of this endpoint
   * (new at each restart), and `counter`, an int64 from 0, counted up by {@link changeTopology}. A fresh object each call.
   *
   * Source: server monitoring spec, "topologyVersion".
   */
  get topologyVersion(): {
    /** This endpoint's ObjectId, the same until it is stopped; a restart ({@link start} after {@link stop}) gets a new one. */
    processId: ObjectId;
    /** The number of topology changes so far, from 0. */
    counter: Long;
  } {
    return { processId: this.processId, counter: Long.fromNumber(this.topologyCounter) };
  }

  /**
   * A significant topology change (what a mongod does on a stepdown, an election or a reconfig): counts
   * `topologyVersion.counter` up by one and answers every awaitable hello waiting at once, with the new
   * topologyVersion. Returns the new counter. Never throws; a stopped endpoint counts up too (a restart resets it).
   *
   * Source: server monitoring spec, "Awaitable hello or legacy hello Protocol" (reply when the server's
   * topologyVersion.counter is greater than the request's); the method is an extension.
   */
  changeTopology(): number {
    this.topologyCounter++;
    this.wakeAwaitingHellos();
    return this.topologyCounter;
  }

  /**
   * Changes the state of this replica set member ({@link EmbeddedServerOptions.replicaSetMember}), as an election or
   * a step down changes a mongod's:
   *
   * - to `'primary'` (a step up): a new `electionId`, greater than every electionId any endpoint of this process gave
   *   before (made from a term shared by all of them, as mongod makes it from its term: `0x7fffffff` then the term as a
   *   big-endian int64), so the electionIds of two endpoints of one test compare in the order they were elected; its
   *   hellos answer `isWritablePrimary: true`, `secondary: false`, `primary` and `electionId`;
   * - to `'secondary'` (a step down): no electionId in its hellos, and `primary` only as a secondary reports it (the
   *   set's primary in this process: see {@link EmbeddedServerOptions.replicaSetMember}), `isWritablePrimary: false`,
   *   `secondary: true`, and the commands a secondary refuses are refused. Nothing is closed: connections stay open,
   *   as on mongod 4.2 and later (connections survive step down spec).
   *
   * Either way it is a topology change ({@link changeTopology}): `topologyVersion.counter` goes up by one and every
   * awaitable hello waiting (a streaming monitor's) is answered at once, as mongod answers them on a step down or up.
   * Setting the state it already has changes nothing. The state is kept across a restart.
   *
   * A secondary refuses, as mongod (`commandCanRunHere` and the command dispatch, service_entry_point_common) does
   * for a client that does not allow secondary reads, on any database but `local`, once a command passed the
   * authentication check: the writes, DDL, transaction and user management commands with NotWritablePrimary (10107,
   * "not primary"); every other command except those mongod runs on a secondary regardless (hello, legacy hello,
   * ping, buildInfo, saslStart, saslContinue, authenticate, logout, connectionStatus, endSessions and the other
   * session commands, getParameter, setParameter, serverStatus, hostInfo, listCommands, whatsmyuri, getCmdLineOpts,
   * getLog, currentOp, killOp, getMore, killCursors, replSetGetStatus, replSetGetConfig, configureFailPoint, shutdown,
   * fsync) with NotPrimaryNoSecondaryOk (13435, "not primary and secondaryOk=false"), unless it carries
   * `$readPreference` with a mode other than `primary`. Any command of a multi-document transaction (`autocommit:
   * false`), whatever its read preference, getMore included, is refused with NotWritablePrimary, as mongod runs no
   * transaction on a secondary. On a connection whose hello never carried `helloOk: true`,
   * the messages are mongod's older words, "not master" and "not master and slaveOk=false". The refusals have `ok: 0`,
   * `errmsg`, `code` and `codeName` as the endpoint's other errors, and `topologyVersion` (maxWireVersion 9 and up),
   * as mongod adds it to a replica set member's not-primary errors. They come before the `failCommand` fail point and
   * a command's handler, as mongod refuses before the command runs. Unlike mongod, a `$readPreference` whose mode is
   * unknown is not refused: it does not allow secondary reads.
   *
   * @throws {InvalidOptionError} synchronously, changing nothing: option `state` for a state other than `'primary'`
   *   or `'secondary'`, or for `'primary'` when its configuration ({@link setReplicaSetConfig}) makes it an arbiter,
   *   gives it priority 0 or does not list it (mongod elects none of them); option `replicaSetMember` when the
   *   endpoint was made without that option (a standalone, which has no member state).
   *
   * Source: extension (mongod's replica set member hello reply and state errors: MongoDB server, TopologyCoordinator
   * (hello fields, `OID::fromTerm` electionIds), service_entry_point_common and command_can_run_here (the
   * NotWritablePrimary and NotPrimaryNoSecondaryOk refusals and their messages), each command's `secondaryAllowed`;
   * server discovery and monitoring spec, "electionId"; connections survive step down spec).
   */
  setReplicaSetMemberState(state: 'primary' | 'secondary'): void {
    if (state !== 'primary' && state !== 'secondary') throw new InvalidOptionError('state', state, "'primary' or 'secondary'");
    if (this.memberState === undefined) {
      throw new InvalidOptionError('replicaSetMember', undefined, 'given at construction to have a replica set member state to change');
    }
    if (state === this.memberState) return;
    const own = this.ownConfig();
    if (state === 'primary' && (own === undefined || !isElectable(own))) {
      const why = own === undefined ? 'is in none of the entries of its configuration (a removed member)' : own.arbiterOnly ? 'is an arbiter in its configuration' : 'has priority 0 in its configuration';
      throw new InvalidOptionError('state', state, `'secondary': ${this.address} ${why}, and mongod elects no such member`);
    }
    this.memberState = state;
    this.electionId = state === 'primary' ? nextElectionId() : undefined;
    if (state === 'primary') this.electionTerm = lastElectionTerm;
    if (state === 'primary' && this.replicaSet !== undefined) this.replicaSet.term = this.electionTerm;
    this.changeTopology();
  }

  /**
   * Replaces the replica set's members as a reconfiguration (`replSetReconfig`) does: hello and the legacy hello then
   * answer `hosts` with `hosts`, `setVersion` goes up by one, and it is a topology change ({@link changeTopology}:
   * the awaitable hellos waiting are answered at once). What a test needs when its endpoints listen on ports picked
   * at `start()`: start them all, then give each the list of their addresses. Every member is then a data-bearing
   * electable one, listed in `hosts` (a configuration given by {@link setReplicaSetConfig} is dropped); a member
   * whose own address is not in `hosts` still answers as a member, unlike with {@link setReplicaSetConfig}.
   *
   * @throws {InvalidOptionError} synchronously, changing nothing: option `hosts` for a value that is not a non-empty
   *   array of non-empty strings; option `replicaSetMember` when the endpoint was made without that option.
   *
   * Source: extension (mongod's replica set reconfiguration: the config version is the hello's `setVersion`).
   */
  setReplicaSetHosts(hosts: readonly string[]): void {
    if (!isHostList(hosts)) throw new InvalidOptionError('hosts', hosts, 'a non-empty array of "host:port" strings (the members)');
    if (this.memberState === undefined) {
      throw new InvalidOptionError('replicaSetMember', undefined, 'given at construction to have replica set hosts to change');
    }
    this.memberHosts = [...hosts];
    this.configMembers = undefined;
    this.setVersion++;
    this.changeTopology();
  }

  /**
   * Replaces the replica set's configuration as a reconfiguration (`replSetReconfig`) with these `members` does, for
   * a set with arbiters, passive or hidden members, or one this member was removed from. Give every member of the set
   * the same configuration (each endpoint holds its own copy, as each mongod does, so a test can also let one lag
   * behind). Hello and the legacy hello then answer as a current mongod builds them from its configuration
   * (TopologyCoordinator::fillHelloForReplSet):
   *
   * - `hosts`: the electable members (neither arbiter nor priority 0), `passives`: the other data-bearing members
   *   (priority 0), `arbiters`: the arbiters, each in the configuration's order, hidden members in none; a list with
   *   no member is left out, as mongod leaves it;
   * - its own entry is the one whose `host` is its {@link address} (mongod's `me`): an arbiter's hello has
   *   `arbiterOnly: true`, `isWritablePrimary` (legacy: `ismaster`) false and `secondary` false (mongod's ARBITER
   *   state); a data-bearing member of priority 0 has `passive: true`; a hidden one `hidden: true` (and
   *   `passive: true`, its priority being 0), `secondary: true` while it is a secondary;
   * - a member whose address is in no entry answers as a mongod removed from its set's configuration (REMOVED state,
   *   an RSGhost to a client): `setName`, `isWritablePrimary` (legacy: `ismaster`) false, `secondary` false,
   *   `info: 'Does not have a valid replica set config'`, `isreplicaset: true`, and none of `hosts`, `passives`,
   *   `arbiters`, `setVersion`, `primary`, `me`, `tags`, `electionId`, `lastWrite` (older mongod versions also listed
   *   the members). Given a configuration that lists it again, it answers as a member again.
   *
   * An arbiter's hello carries `lastWrite` too, as mongod sets it for every member of its configuration (read from
   * the set's record as a secondary's: see {@link setReplicationLag}).
   *
   * A primary the new configuration makes unelectable (an arbiter, priority 0) or removes steps down, as mongod
   * ("Could not remain primary because no longer electable"): its electionId goes, and it answers as a secondary (or
   * an arbiter, or a removed member). An arbiter and a removed member refuse writes with NotWritablePrimary (10107)
   * as a secondary does, and commands with a secondary read preference with NotPrimaryOrSecondary (13436, "node is
   * not in primary or recovering state"), as mongod refuses reads in a state that is neither primary nor secondary.
   * `setVersion` goes up by one, and it is a topology change ({@link changeTopology}: the awaitable hellos waiting are
   * answered at once). {@link setReplicaSetHosts} returns to a plain list of data-bearing members.
   *
   * @param members the configuration's members, in order: each `{ host, arbiterOnly?, priority?, hidden? }` (see
   *   {@link ReplicaSetConfigMember}).
   * @throws {InvalidOptionError} synchronously, changing nothing: option `members` for a value that is not a
   *   non-empty array of at most 50 members; `members[i]` for one that is not an object or has another key (naming the
   *   closest); `members[i].host` for one that is not a non-empty string or that an earlier member has;
   *   `members[i].arbiterOnly` or `members[i].hidden` for one that is not a boolean; `members[i].priority` for one
   *   that is not a number from 0 to 1000, or not 0 on a hidden member (mongod: "priority must be 0 when
   *   hidden=true"); option `members` when its own entry is an arbiter while it has `tags` (mongod refuses tags on an
   *   arbiter); option `replicaSetMember` when the endpoint was made without that option.
   *
   * Source: extension (mongod's replica set configuration and hello: MongoDB server, MemberConfig (priority, hidden
   * and arbiter rules), TopologyCoordinator::fillHelloForReplSet and updateConfig, HelloResponse::addToBSON; server
   * discovery and monitoring spec, "Server Type", "RSGhost and RSOther").
   */
  setReplicaSetConfig(members: readonly ReplicaSetConfigMember[]): void {
    const checked = checkConfigMembers(members);
    if (this.memberState === undefined) {
      throw new InvalidOptionError('replicaSetMember', undefined, 'given at construction to have a replica set configuration to change');
    }
    const own = checked.find((m) => m.host === this.address);
    if (own?.arbiterOnly === true && this.memberTags !== undefined && Object.keys(this.memberTags).length > 0) {
      throw new InvalidOptionError('members', members, `a configuration where ${this.address}, a member with tags, is no arbiter (mongod: "Cannot set tags on arbiters.")`);
    }
    this.configMembers = checked;
    if (this.memberState === 'primary' && (own === undefined || !isElectable(own))) {
      this.memberState = 'secondary';
      this.electionId = undefined;
    }
    this.setVersion++;
    this.changeTopology();
  }

  /**
   * Its own entry of its replica set's configuration: before {@link setReplicaSetConfig} (or after
   * {@link setReplicaSetHosts}), a data-bearing electable member; then the entry of its address, undefined when none
   * has it (a removed member).
   */
  private ownConfig(): ConfigMember | undefined {
    if (this.configMembers === undefined) return { host: this.address, arbiterOnly: false, priority: 1, hidden: false };
    return this.configMembers.find((m) => m.host === this.address);
  }

  /**
   * Sets how far behind the primary this member replicates, in ms, from now on (what option
   * `replicaSetMember.replicationLagMS` sets at construction). It shows in hello's `lastWrite`, which every member of
   * a replica set sends, as mongod does:
   *
   * ```
   * lastWrite: {
   *   opTime: { ts: Timestamp, t: Long },  // the member's last applied oplog entry: its time (s) and increment, and term
   *   lastWriteDate: Date,                 // that entry's time, in whole seconds (mongod's appendTimeT)
   *   majorityOpTime: { ts: Timestamp, t: Long },  // the last entry a majority of the members have
   *   majorityWriteDate: Date,
   * }
   * ```
   *
   * The members of one replica set (the endpoints of one `setName` in this process, while started) share one record
   * of writes: a primary records one for each write it runs successfully (the commands a secondary refuses with
   * NotWritablePrimary: insert, update, delete, findAndModify, bulkWrite, the DDL, commitTransaction,
   * abortTransaction, user management; acknowledged or not), and, as mongod's periodic no-op writer
   * (idleWritePeriodMS, 10 s), a no-op at each multiple of 10 s of the epoch when nothing was written in the 10 s
   * before it: so a primary's `lastWriteDate` is at most 20 s old, and within 10 s while it is idle. A member reports
   * the newest of them at or before now minus its lag (a primary's lag is 0, whatever was set: the lag set here counts
   * while it is a secondary); `majorityOpTime` is the newest a majority of the set's started members have (the member
   * with the median lag), never newer than its own. The set is taken to have been running idle before its first
   * member started, so a secondary lagging 200 s reports a `lastWriteDate` about 200 s old at once. A client reading
   * it (max staleness spec: a secondary's staleness is its lastWriteDate behind the primary's, plus
   * heartbeatFrequencyMS) sees a change only at its next hello: a new lastWrite is no topology change (nothing answers
   * a waiting awaitable hello early), as on mongod. Time is option `replicaSetMember.clock`'s, by default the system
   * clock (Date.now). Memory: the write times
   * older than the largest lag of a started member (plus 10 s) are dropped, and at most 100,000 are kept; raising a
   * lag later reaches back only as far as what was kept (before that, the idle no-op writes).
   *
   * @param lagMS the lag, in ms: a number >= 0.
   * @throws {InvalidOptionError} synchronously, changing nothing: option `lagMS` for a value that is not a number
   *   >= 0; option `replicaSetMember` when the endpoint was made without that option (a standalone has no lag).
   *
   * Source: extension (mongod's replication: hello's `lastWrite` (HelloResponse), the periodic no-op writer
   * (NoopWriter), a secondary's applied opTime behind the primary's; max staleness spec, "idleWritePeriodMS",
   * "Replica Set Secondary staleness").
   */
  setReplicationLag(lagMS: number): void {
    if (!isReplicationLag(lagMS)) throw new InvalidOptionError('lagMS', lagMS, REPLICATION_LAG_ALLOWED);
    if (this.memberState === undefined) {
      throw new InvalidOptionError('replicaSetMember', undefined, 'given at construction to have a replication lag to set');
    }
    this.replicationLagMS = lagMS;
  }

  /**
   * The last commands this endpoint received (at most 1000, oldest first; a new array each call): each command's
   * name, database, connection and `$readPreference`, so a test sees which read preference each command arrived
   * with. Every command that reaches the endpoint's dispatch counts (hellos and monitoring included, each reply of a
   * streaming hello too, those refused afterwards too); a message that is not a command (malformed, or with an API
   * parameter refused before dispatch) does not.
   *
   * Source: extension (mongod's command log at verbosity 1, reduced to what tests of read preferences need).
   */
  get receivedCommands(): readonly ReceivedCommand[] {
    return [...this.received];
  }

  /**
   * Resolves once {@link openConnections} is `count`, at once when it already is: the server sees a client's sockets
   * close a few turns of the event loop after the client closed them, so `await server.waitForOpenConnections(0)`
   * after a pool's `close()` is how a test proves nothing leaked. After `timeoutMS` ms it resolves anyway. Either way
   * it resolves to the count it saw last, so `expect(await server.waitForOpenConnections(0)).to.equal(0)` fails with
   * the number of connections still open. Never rejects.
   *
   * @param count the number of open client connections to wait for: an integer >= 0.
   * @param options `timeoutMS`: how long to wait at most, in ms, from 0 to 2147483647; default 2000.
   * @throws {InvalidOptionError} synchronously: option `count` for a count that is not an integer >= 0, option
   *   `timeoutMS` for a timeout outside that range, `waitForOpenConnections options` for options that are not an
   *   object, and a key other than `timeoutMS` (naming the closest).
   *
   * Source: extension (the end of a test that proves its connections were closed).
   */
  waitForOpenConnections(count: number, options?: { timeoutMS?: number | undefined }): Promise<number> {
    if (typeof count !== 'number' || !Number.isInteger(count) || count < 0) {
      throw new InvalidOptionError('count', count, 'an integer >= 0 (the number of open client connections to wait for)');
    }
    requireMethodOptions('waitForOpenConnections', options, ['timeoutMS']);
    const timeoutMS = optionValue(options, 'timeoutMS') ?? 2000;
    if (typeof timeoutMS !== 'number' || !(timeoutMS >= 0 && timeoutMS <= MAX_TIMER_DELAY_MS)) {
      throw new InvalidOptionError('timeoutMS', timeoutMS, `a number of ms from 0 to ${MAX_TIMER_DELAY_MS} (default 2000)`);
    }
    if (this.sockets.size === count) return Promise.resolve(count);
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.connectionCountWaiters.delete(check);
        resolve(this.sockets.size);
      };
      const check = (): void => {
        if (this.sockets.size === count) done();
      };
      const timer = setTimeout(done, timeoutMS);
      this.connectionCountWaiters.add(check);
    });
  }

  /** Joins its replica set's write record (see {@link setReplicationLag}), as a member once started. */
  private joinReplicaSet(): void {
    if (this.setName === undefined || this.replicaSet !== undefined) return;
    let record = replicaSetWrites.get(this.setName);
    if (record === undefined) replicaSetWrites.set(this.setName, (record = new ReplicaSetWrites()));
    if (this.memberState === 'primary') record.term = Math.max(record.term, this.electionTerm);
    record.members.add(this.memberView);
    this.replicaSet = record;
  }

  /** Leaves its replica set's write record; the last member to leave drops it. */
  private leaveReplicaSet(): void {
    const record = this.replicaSet;
    if (record === undefined || this.setName === undefined) return;
    this.replicaSet = undefined;
    record.members.delete(this.memberView);
    if (record.members.size === 0 && replicaSetWrites.get(this.setName) === record) replicaSetWrites.delete(this.setName);
  }

  /** Tells the waiters of {@link waitForOpenConnections} that the number of open connections changed. */
  private connectionCountChanged(): void {
    for (const check of [...this.connectionCountWaiters]) check();
  }

  /**
   * The number of awaitable hellos waiting right now (for a topology change, or for maxAwaitTimeMS to elapse).
   * Source: extension.
   */
  get awaitingHelloCount(): number {
    return this.awaitingHellos.size;
  }

  private wakeAwaitingHellos(): void {
    for (const wake of [...this.awaitingHellos]) wake();
  }

  /**
   * Starts listening on 127.0.0.1. Resolves to this endpoint once it accepts connections; rejects with the server's
   * error when it cannot listen (e.g. `EADDRINUSE` for a taken `port`). After {@link stop}, it starts as a restarted
   * mongod does: on the port it listened on before (the one it picked, with `port` 0), so {@link address} and
   * {@link uri} stay the same and clients of them reach it again, with a new `topologyVersion.processId` and its
   * counter back at 0 (fail points and users are kept). Should another process have taken that port meanwhile, the
   * restart rejects with `EADDRINUSE`.
   */
  async start(): Promise<this> {
    if (this.stopped) {
      this.stopped = false;
      this.processId = new ObjectId();
      this.topologyCounter = 0;
    }
    // `port` is 0 until the first start, then the port it listened on: a restart keeps its address.
    const port = this.port !== 0 ? this.port : (this.options.port ?? 0);
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, '127.0.0.1', () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    this.port = (this.server.address() as net.AddressInfo).port;
    this.joinReplicaSet();
    return this;
  }

  /**
   * Closes client connections from the server side, at once and without a reply, as a mongod restart, a failover or
   * a network partition does: every open connection, or only those `select` picks (say by `appName`). Their clients
   * see the socket close: a request in flight, and the next one, fail with a network error. The endpoint keeps
   * listening, so new connections succeed.
   *
   * Returns how many connections it closed; {@link openConnections} drops by as many once their `close` events have
   * run (on a later turn of the event loop).
   *
   * @throws {InvalidOptionError} (option `select`) when `select` is given and is not a function; nothing is closed.
   *
   * Source: extension (a server-side connection reset, as the server's `closeConnection` fail point does to one
   * command, applied to connections chosen at will).
   */
  closeConnections(select: (client: ClientConnectionInfo) => boolean = () => true): number {
    if (typeof select !== 'function') {
      throw new InvalidOptionError('select', select, 'a function (client: ClientConnectionInfo) => boolean, or nothing (every connection)');
    }
    let closed = 0;
    for (const [socket, client] of this.sockets) {
      if (socket.destroyed || !select(client)) continue;
      socket.destroy();
      closed++;
    }
    return closed;
  }

  /**
   * Stops listening and closes every client connection, including, with TLS, those still in their TLS handshake.
   * Resolves once the server is closed and every connection's `close` has run: {@link openConnections} and
   * {@link awaitingHelloCount} are 0 by then. Never rejects (a server already stopped resolves too).
   *
   * Source: extension (the end of a test's endpoint).
   */
  async stop(): Promise<void> {
    this.stopped = true;
    this.leaveReplicaSet();
    const sockets = [...this.sockets.keys(), ...this.accepted];
    const closed = sockets.map((socket) => (socket.closed ? undefined : new Promise((resolve) => socket.once('close', resolve))));
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    await Promise.all(closed);
  }

  /**
   * {@link stop}, for an `await using` declaration (`await using server = await new EmbeddedServer().start()`): the
   * endpoint stops when the block that declared it is left, however it is left, and the block's exit waits for every
   * connection to close. Never rejects.
   *
   * Source: extension (TC39 explicit resource management, `Symbol.asyncDispose`).
   */
  [Symbol.asyncDispose](): Promise<void> {
    return this.stop();
  }

  /**
   * Replaces the endpoint's users while it runs: `users` becomes the whole list, of the same shape as the `users`
   * option ({@link EmbeddedUser}). A user may come back under its name with a new password, salt, iteration count or
   * mechanisms, or be left out (it no longer exists); every user is created anew, with a fresh random salt per
   * mechanism unless its `salt` is given. An empty list turns authentication off for new commands, as an endpoint
   * constructed without users has it. Counts {@link usersGeneration} up by one.
   *
   * What it models: a failover to a primary whose users differ from the former one's (a user re-created there), or
   * createUser / updateUser / dropUser on this server. Connections already authenticated keep their user (as the
   * connections to a former primary keep theirs) and go on running commands; new connections, and any connection
   * that authenticates again, authenticate against the new users. A SCRAM conversation in progress is checked
   * against the salt and keys it started with, and fails if its user was left out (as a mongod fails to acquire a
   * user dropped during the conversation). A mongod also withdraws a dropped user's privileges from the connections
   * it had authenticated, on their next command; to model that, close those connections with
   * {@link closeConnections} (`(c) => c.user === 'admin.name'`).
   *
   * @throws {InvalidOptionError} synchronously, leaving the users as they were: when `users` is not an array, or for
   *   a user whose `username` is not a non-empty string or `db` not a non-empty string; for a SCRAM user (any `db` but
   *   `$external`), `password` not a string (its value never shown), `mechanisms` not a non-empty list of SCRAM-SHA-1 /
   *   SCRAM-SHA-256, `iterations` not a positive integer, or `salt` not a Uint8Array of 1 to 1024 bytes; for a user
   *   of `$external` (MONGODB-X509, PLAIN), a `password` that is not a string (never shown), any `mechanisms`,
   *   `iterations` or `salt`.
   *
   * Source: extension (the users of a new primary after a failover, or of user-management commands: the auth spec's
   * "SCRAM-SHA-1" and "SCRAM-SHA-256" server state; the legacy pooling notes, which re-authenticate every connection
   * after a failover).
   */
  setUsers(users: readonly EmbeddedUser[]): void {
    this.users.replace(users);
  }

  /**
   * The users generation: 0 for the users given at construction, + 1 on every {@link setUsers}. Each connection's
   * {@link ClientConnectionInfo.usersGeneration} says which generation it authenticated against.
   *
   * Source: extension (see {@link setUsers}).
   */
  get usersGeneration(): number {
    return this.users.generation;
  }

  /**
   * The counts of the SCRAM conversations of users generation `usersGeneration` (default: the current one), from
   * every connection, open or since closed. A conversation counts in the generation it started in, even if the users
   * change before it ends. A fresh object each call; zeros for a generation that had none. PLAIN's one-step
   * saslStarts are not SCRAM conversations and count nowhere here; a connection's `user` tells whether one succeeded.
   *
   * Source: extension (see {@link setUsers}).
   */
  scramConversations(usersGeneration: number = this.users.generation): {
    /** Conversations started: saslStart answered with a server-first message (salt and iteration count). */
    started: number;
    /** Conversations that proved the password: the client is authenticated. */
    succeeded: number;
    /** AuthenticationFailed answers, at saslStart (unknown user or mechanism) or saslContinue (bad proof, user gone). */
    failed: number;
  } {
    return this.users.conversations(usersGeneration);
  }

  /**
   * What the endpoint knows of each open client connection, in the order they were accepted (a new array each call,
   * of the live records: their fields change as the connections go on).
   *
   * Source: extension (a mongod's `currentOp` of its client connections, reduced to what the endpoint tracks).
   */
  clientConnections(): ClientConnectionInfo[] {
    return [...this.sockets.values()];
  }

  /**
   * Adds or replaces the handler of a command (name matched case-insensitively); it answers that command from then
   * on, on every connection.
   *
   * @throws {InvalidOptionError} synchronously, leaving the handlers as they were: for a `commandName` that is not a
   *   non-empty string, or a `handler` that is not a function (option `handler`).
   *
   * Source: extension (a mongod's command dispatch, replaced for tests).
   */
  handle(commandName: string, handler: CommandHandler): void {
    if (typeof commandName !== 'string' || commandName === '') {
      throw new InvalidOptionError('commandName', commandName, 'a non-empty string (the command to answer)');
    }
    if (typeof handler !== 'function') throw new InvalidOptionError('handler', handler, 'a function (a CommandHandler)');
    this.handlers.set(commandName.toLowerCase(), handler);
  }

  private accept(socket: net.Socket): void {
    this.connectionsAccepted++;
    socket.setNoDelay(true);
    const client: ClientConnectionInfo = {
      id: this.nextConnectionId++,
      appName: undefined,
      compressor: undefined,
      user: undefined,
      // With requestCert, a certificate that does not verify never gets this far (the TLS handshake refuses it).
      certificateSubject: socket instanceof tls.TLSSocket ? certificateSubject(socket) : undefined,
      usersGeneration: undefined,
      saslConversations: 0,
      conversation: undefined,
      serviceId: this.services.length > 0 ? this.services[(this.nextConnectionId - 2) % this.services.length] : undefined,
      awaitingHello: false,
      apiParameters: Object.create(null) as Record<string, Readonly<Document>>,
      handshakeApiParameters: undefined,
    };
    this.sockets.set(socket, client);
    this.connectionCountChanged();
    const framer = new MessageFramer();
    let chain = Promise.resolve();
    // A TLS client on a plaintext endpoint: its first bytes are a TLS handshake record (content type 22, version
    // 3.x), which would read as the length of a message of several MB (16.8 MB for a ClientHello of 256 to 511
    // bytes, as Node sends) and hold the client until its connectTimeoutMS (a length over the framer's 48 MB limit is
    // refused at once anyway). mongod closes such a connection at once ("SSL handshake received but server is started
    // without SSL support"). A wire message that starts with the same two bytes has a known opCode at byte 12. The
    // first 16 bytes (a header's worth) are gathered however the client split them, and checked once.
    let head: Buffer | undefined = socket instanceof tls.TLSSocket ? undefined : Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      if (head !== undefined) {
        head = Buffer.concat([head, chunk]);
        if (head.length >= 16) {
          const tlsRecord = head[0] === 0x16 && head[1] === 0x03 && !KNOWN_OP_CODES.has(head.readInt32LE(12));
          head = undefined;
          if (tlsRecord) {
            socket.destroy();
            return;
          }
        }
      }
      let messages: WireMessage[];
      try {
        messages = framer.push(chunk);
      } catch {
        socket.destroy();
        return;
      }
      for (const message of messages) chain = chain.then(() => this.serve(socket, client, message));
    });
    socket.on('error', () => socket.destroy());
    socket.on('close', () => {
      this.sockets.delete(socket);
      this.connectionCountChanged();
    });
  }

  private async serve(socket: net.Socket, client: ClientConnectionInfo, raw: WireMessage): Promise<void> {
    if (socket.destroyed) return;
    let reply: Buffer | undefined;
    try {
      const compressed = raw.header.opCode === OpCode.OP_COMPRESSED;
      // As a mongod: a compressed request is accepted only with the compressor negotiated on this connection.
      const negotiated = client.compressor === undefined ? [] : [client.compressor as CompressorName];
      const message = decompressMessage(raw, { compressors: negotiated, maxMessageSizeBytes: DEFAULT_MAX_MESSAGE_SIZE_BYTES });
      if (message.header.opCode === OpCode.OP_MSG) {
        // A server before 3.6 (wire version 6) does not know OP_MSG: the connection ends there.
        if (!this.speaksOpMsg) {
          socket.destroy();
          return;
        }
        const decoded = decodeOpMsg(message.body);
        // As mongod: each document sequence (kind 1 section) becomes the body's field of that name, so a handler sees
        // `documents` of an insert however the client sent them (OP_MSG spec, "Sections").
        const command: Document = { ...decoded.document };
        let invalid: Document | undefined;
        for (const [identifier, documents] of decoded.sequences) {
          if (Object.prototype.hasOwnProperty.call(command, identifier)) {
            invalid = { ok: 0, errmsg: `Duplicate field between body and document sequence ${identifier}`, code: 40433, codeName: 'Location40433' };
          }
          setOwnField(command, identifier, documents);
        }
        const name = Object.keys(command)[0]?.toLowerCase();
        // A request with moreToCome (an unacknowledged write) gets no reply, as from mongod (OP_MSG spec, "moreToCome").
        const moreToCome = (decoded.flags & OpMsgFlag.moreToCome) !== 0;
        if (typeof command.$db !== 'string') {
          // As mongod: every OP_MSG request names its database (OP_MSG spec, "Global Command Arguments").
          invalid = { ok: 0, errmsg: 'OP_MSG requests require a $db argument', code: 40571, codeName: 'Location40571' };
        }
        const awaitable = command.topologyVersion !== undefined || command.maxAwaitTimeMS !== undefined;
        // As mongod: each API parameter as it comes in the BSON, so one given twice is seen.
        const body = bodyDocumentBytes(message.body);
        const inOrder = body === undefined ? undefined : apiParametersInOrderRefusal(body);
        // As mongod: API parameters are checked before an awaitable hello waits, not maxAwaitTimeMS later.
        if (invalid === undefined && awaitable) invalid = this.refuseApiParameters(client, name ?? '', command, inOrder);
        if (invalid === undefined && (name === 'hello' || name === 'ismaster') && awaitable && this.streams) {
          const exhaustAllowed = (decoded.flags & OpMsgFlag.exhaustAllowed) !== 0;
          const reply = { requestId: raw.header.requestId, exhaustAllowed, moreToCome, compress: compressed ? (client.compressor as CompressorName | undefined) : undefined };
          return await this.serveAwaitable(socket, client, command, reply);
        }
        const response = invalid ?? (await this.run(socket, client, command, command.$db, inOrder));
        if (response === undefined) return;
        if (moreToCome) return dropUnacknowledged(socket, response);
        reply = encodeAnswer(name ?? '', response, (document) => encodeOpMsg(0, raw.header.requestId, document));
        if (compressed && client.compressor !== undefined) reply = compressMessage(reply, -1, client.compressor as CompressorName);
      } else if (message.header.opCode === OpCode.OP_QUERY) {
        // Only the legacy hello may still come as OP_QUERY, as on current mongod.
        const query = decodeOpQuery(message.body);
        const command = query.query.$query ?? query.query;
        const name = Object.keys(command)[0]?.toLowerCase();
        if (!query.fullCollectionName.endsWith('.$cmd') || (name !== 'ismaster' && name !== 'hello')) {
          socket.destroy();
          return;
        }
        const response = await this.run(socket, client, command, query.fullCollectionName.split('.')[0]);
        if (response === undefined) return;
        reply = encodeAnswer(name, response, (document) => encodeOpReply(0, raw.header.requestId, document));
      } else {
        socket.destroy();
        return;
      }
    } catch {
      socket.destroy(); // malformed input: a mongod closes the connection
      return;
    }
    if (!socket.destroyed) socket.write(reply);
  }

  /** Whether it speaks OP_MSG (maxWireVersion 6 and up, as mongod 3.6+). */
  private get speaksOpMsg(): boolean {
    return (this.options.maxWireVersion ?? 25) >= 6;
  }

  /** Whether it speaks awaitable hello and topologyVersion (maxWireVersion 9 and up, as mongod 4.4+). */
  private get streams(): boolean {
    return (this.options.maxWireVersion ?? 25) >= 9;
  }

  /**
   * An awaitable hello, as mongod 4.4+ answers it: with `topologyVersion` and `maxAwaitTimeMS` both (one without the
   * other is error 31368, a negative maxAwaitTimeMS error 31373, a topologyVersion that is no document BadValue),
   * it waits until the topology changes (the counter passes the request's), maxAwaitTimeMS elapses, or the fail point
   * is configured to apply to it, unless the request's processId is another one (then it answers at once). With
   * exhaustAllowed, every successful reply has moreToCome and the next one follows the same way, waiting from the
   * topologyVersion just sent; an `ok: 0` reply ends the stream. The socket closing ends it all. With moreToCome it
   * is run (and waits) the same, but nothing is sent and nothing streamed, as mongod reads moreToCome before
   * exhaustAllowed (see {@link dropUnacknowledged}).
   */
  private async serveAwaitable(
    socket: net.Socket,
    client: ClientConnectionInfo,
    command: Document,
    { requestId, exhaustAllowed, moreToCome, compress }: { requestId: number; exhaustAllowed: boolean; moreToCome: boolean; compress: CompressorName | undefined },
  ): Promise<void> {
    const name = Object.keys(command)[0].toLowerCase();
    const db = String(command.$db);
    const maxAwaitTimeMS = Number(command.maxAwaitTimeMS);
    let requested: unknown = command.topologyVersion;
    let responseTo = requestId;
    // Whether `response` itself was sent: one that cannot be encoded is answered with a BadValue, which ends the
    // stream.
    const send = (response: Document, flags: number): boolean => {
      if (moreToCome) {
        dropUnacknowledged(socket, response);
        return false;
      }
      const id = this.nextReplyId++;
      let sent = true;
      let reply = encodeAnswer(name, response, (document) => {
        sent = document === response;
        return encodeOpMsg(id, responseTo, document, sent ? flags : 0);
      });
      if (compress !== undefined) reply = compressMessage(reply, -1, compress);
      responseTo = id;
      if (!socket.destroyed) socket.write(reply);
      return sent;
    };
    const version = requested as { processId?: unknown; counter?: unknown } | null;
    // As mongod: one of the two fields without the other is error 31368, a negative maxAwaitTimeMS error 31373.
    if ((version === undefined) !== (command.maxAwaitTimeMS === undefined)) {
      const errmsg = version === undefined
        ? "A request with 'maxAwaitTimeMS' must include a 'topologyVersion'"
        : "A request with a 'topologyVersion' must include 'maxAwaitTimeMS'";
      send({ ok: 0, errmsg, code: 31368, codeName: 'Location31368' }, 0);
      return;
    }
    if (maxAwaitTimeMS < 0) {
      send({ ok: 0, errmsg: 'maxAwaitTimeMS must be a non-negative integer', code: 31373, codeName: 'Location31373' }, 0);
      return;
    }
    if (typeof version !== 'object' || version === null || !Number.isFinite(maxAwaitTimeMS)) {
      send({ ok: 0, code: 2, codeName: 'BadValue', errmsg: 'topologyVersion must be a document and maxAwaitTimeMS a number' }, 0);
      return;
    }
    client.awaitingHello = true;
    try {
      await this.streamHellos(socket, client, command, name, db, maxAwaitTimeMS, exhaustAllowed, requested, send);
    } finally {
      client.awaitingHello = false;
    }
  }

  /** The replies of an awaitable hello (see {@link serveAwaitable}). */
  private async streamHellos(
    socket: net.Socket,
    client: ClientConnectionInfo,
    command: Document,
    name: string,
    db: string,
    maxAwaitTimeMS: number,
    exhaustAllowed: boolean,
    requested: unknown,
    send: (response: Document, flags: number) => boolean,
  ): Promise<void> {
    for (;;) {
      const current = requested as { processId?: unknown; counter?: unknown };
      const sameProcess = current.processId instanceof ObjectId && current.processId.equals(this.processId);
      if (sameProcess && Number(current.counter) > this.topologyCounter) {
        // As mongod (a replica set member): a counter this process never reached is an error, not a wait.
        const errmsg = `Received a topology version with counter: ${Number(current.counter)} which is greater than the server topology version counter: ${this.topologyCounter}`;
        send({ ok: 0, errmsg, code: 31382, codeName: 'Location31382' }, 0);
        return;
      }
      let failPoint: { action: FailAction | undefined } | undefined;
      if (sameProcess) {
        const counter = Number(current.counter);
        let deadline = Date.now() + maxAwaitTimeMS;
        // The configurations of the fail point this hello's wait ends for: any that applies to it (undefined) until it
        // was evaluated for this hello, then only one made after that.
        let since: number | undefined;
        for (;;) {
          const end = await this.awaitTopologyChange(socket, client, name, counter, Math.max(0, deadline - Date.now()), since);
          if (end === 'closed') return;
          if (end !== 'failPoint') break;
          // The wait ended for the fail point. mongod evaluates it as each hello of the stream starts, before the hello
          // waits, once per hello: one that only blocks holds this reply for blockTimeMS, then the wait runs in full (a
          // client's check sees blockTimeMS + maxAwaitTimeMS, as the SDAM unified test hello-timeout counts on); one
          // that does nothing to it (a skip it counts, or no use left) leaves the wait to run to its end.
          since = this.failPointConfigurations;
          const action = this.failCommand.match(name, client.appName);
          failPoint = { action };
          if (action === undefined) continue;
          if (action.blockTimeMS > 0 && !action.closeConnection && action.error === undefined) {
            if (!(await sleepUnlessClosed(socket, action.blockTimeMS))) return;
            failPoint = { action: undefined };
            deadline = Date.now() + maxAwaitTimeMS;
            continue;
          }
          break;
        }
      }
      const response = await this.run(socket, client, command, db, undefined, failPoint);
      if (response === undefined || socket.destroyed) return;
      const ok = response.ok === 1 || response.ok === true;
      const more = exhaustAllowed && ok;
      if (!send(response, more ? OpMsgFlag.moreToCome : 0) || !more) return;
      requested = response.topologyVersion;
    }
  }

  /**
   * Waits until the counter passes `counter` ('changed'), `ms` elapse ('elapsed'), or the fail point applies to this
   * hello ('failPoint'): any configuration of it when `since` is undefined, else only one made after the
   * {@link failPointConfigurations} count `since`. 'closed' as soon as the socket closes.
   */
  private awaitTopologyChange(
    socket: net.Socket,
    client: ClientConnectionInfo,
    name: string,
    counter: number,
    ms: number,
    since?: number,
  ): Promise<'changed' | 'elapsed' | 'failPoint' | 'closed'> {
    const due = (): 'changed' | 'failPoint' | undefined => {
      if (this.topologyCounter > counter) return 'changed';
      const configured = since === undefined || this.failPointConfigurations !== since;
      return configured && this.failCommand.wouldMatch(name, client.appName) ? 'failPoint' : undefined;
    };
    const now = due();
    if (now !== undefined || socket.destroyed) return Promise.resolve(socket.destroyed ? 'closed' : (now as 'changed' | 'failPoint'));
    return new Promise((resolve) => {
      const done = (end: 'changed' | 'elapsed' | 'failPoint' | 'closed'): void => {
        clearTimeout(timer);
        socket.off('close', onClose);
        this.awaitingHellos.delete(wake);
        resolve(end);
      };
      const onClose = (): void => done('closed');
      const wake = (): void => {
        const end = due();
        if (end !== undefined) done(end);
      };
      // A maxAwaitTimeMS longer than one Node timer holds waits on a chain of timers, as mongod waits it whole: one
      // timer would fire after 1 ms and answer the streaming client at once, again and again.
      let timer: NodeJS.Timeout;
      const wait = (left: number): void => {
        timer = setTimeout(() => (left > MAX_TIMER_DELAY_MS ? wait(left - MAX_TIMER_DELAY_MS) : done('elapsed')), Math.min(left, MAX_TIMER_DELAY_MS));
      };
      wait(ms);
      socket.once('close', onClose);
      this.awaitingHellos.add(wake);
    });
  }

  /**
   * Records the Stable API parameters of a command on its connection, and returns mongod's refusal of them, if any:
   * `inOrder` (see {@link apiParametersInOrderRefusal}) when given, else {@link apiParametersRefusal}'s.
   */
  private refuseApiParameters(client: ClientConnectionInfo, name: string, command: Document, inOrder?: Document): Document | undefined {
    const api = apiParametersOf(command);
    client.apiParameters[name] = api;
    client.handshakeApiParameters ??= api;
    return inOrder ?? apiParametersRefusal(api, this.options.requireApiVersion === true);
  }

  /**
   * Runs one command; undefined means the connection was closed instead of answered. `inOrder`: the refusal of its API
   * parameters as they came in its BSON (see {@link apiParametersInOrderRefusal}), if any. `failPoint`: what the fail
   * point does to it when that was decided already (an awaitable hello's), instead of matching it again.
   */
  private async run(socket: net.Socket, client: ClientConnectionInfo, command: Document, db: string, inOrder?: Document, failPoint?: { action: FailAction | undefined }): Promise<Document | undefined> {
    const name = Object.keys(command)[0]?.toLowerCase() ?? '';
    this.recordReceived(command, db, client);
    // As mongod: the API parameters are checked before anything else runs (initializeAPIParameters, then
    // requireApiVersion); a refused hello leaves the connection's metadata unset.
    const refusal = this.refuseApiParameters(client, name, command, inOrder);
    if (refusal !== undefined) return refusal;
    if ((name === 'hello' || name === 'ismaster') && command.client !== undefined) {
      // As mongod: the client metadata is the first hello's, and cannot be sent again (handshake spec, "client").
      if (this.metadataSent.has(client)) {
        return { ok: 0, errmsg: 'The client metadata document may only be sent in the first hello', code: 186, codeName: 'ClientMetadataCannotBeMutated' };
      }
      this.metadataSent.add(client);
      if (command.client?.application?.name !== undefined) client.appName = String(command.client.application.name);
    }
    // As mongod: a secondary refuses a command once its authentication is checked, before it runs.
    const notPrimary = this.authenticationRefusal(name, command, client) === undefined ? this.secondaryRefusal(name, db, command, client) : undefined;
    if (notPrimary !== undefined) return notPrimary;
    const failure = name === 'configurefailpoint' ? undefined : failPoint !== undefined ? failPoint.action : this.failCommand.match(name, client.appName);
    if (failure !== undefined) {
      if (failure.blockTimeMS > 0 && !(await sleepUnlessClosed(socket, failure.blockTimeMS))) return undefined;
      if (failure.closeConnection) {
        socket.destroy();
        return undefined;
      }
      if (failure.error !== undefined) {
        // As mongod: a replica set member's "not primary" errors carry its topologyVersion (counted up at every step
        // down); a standalone's carry none, and nor do "node is shutting down" errors (ShutdownInProgress 91,
        // InterruptedAtShutdown 11600), which mongod gives one only in quiesce mode, which the endpoint has not.
        const versioned = NOT_PRIMARY_CODES.has(failure.error.code as number) && this.memberState !== undefined && this.streams;
        return versioned ? { ...failure.error, topologyVersion: this.topologyVersion } : failure.error;
      }
    }
    if (name === 'saslstart' || name === 'saslcontinue') return this.authenticate(name, db, command, client);
    if (name === 'authenticate') return this.authenticateX509(db, command, client).reply;
    const unauthenticated = this.authenticationRefusal(name, command, client);
    if (unauthenticated !== undefined) return unauthenticated;
    const handler = this.handlers.get(name);
    let reply: Document;
    try {
      reply = handler ? await handler(command, client) : { ok: 1 };
      const given: unknown = reply;
      if (given === null || typeof given !== 'object' || Array.isArray(given)) {
        const what = given == null ? String(given) : Array.isArray(given) ? 'an array' : `a ${typeof given}`;
        throw new TypeError(`the handler of ${name} returned ${what}, not a reply document`);
      }
    } catch (error) {
      // Whatever was thrown (null, a string, an Error whose message getter throws): the client gets an answer.
      return { ok: 0, errmsg: inWords(error), code: 2, codeName: 'BadValue' };
    }
    // As mongod: the fail point's writeConcernError is added once the command ran and succeeded.
    const succeeded = reply.ok === 1 || reply.ok === true;
    if (succeeded && this.memberState === 'primary' && NEVER_ON_SECONDARY.has(name)) this.replicaSet?.record(this.replicationNow());
    return failure?.writeConcernError !== undefined && succeeded ? { ...reply, ...failure.writeConcernError } : reply;
  }

  /** Adds `command` to {@link receivedCommands}, dropping the oldest beyond its bound. */
  private recordReceived(command: Document, db: string, client: ClientConnectionInfo): void {
    const readPreference: unknown = command.$readPreference;
    this.received.push({
      name: Object.keys(command)[0] ?? '',
      db,
      connectionId: client.id,
      readPreference: readPreference !== null && typeof readPreference === 'object' && !Array.isArray(readPreference) ? (readPreference as Document) : undefined,
    });
    if (this.received.length > MAX_RECEIVED_COMMANDS) this.received.splice(0, this.received.length - MAX_RECEIVED_COMMANDS);
  }

  /**
   * The refusal of command `name` on a connection that has not authenticated (Unauthorized, 13) or whose OIDC token
   * expired (ReauthenticationRequired, 391), when authentication is on; undefined when it may run.
   */
  private authenticationRefusal(name: string, command: Document, client: ClientConnectionInfo): Document | undefined {
    const expiry = this.oidc === undefined ? undefined : this.oidcExpiry.get(client);
    if (expiry !== undefined && expiry <= Date.now() && !OPEN_COMMANDS.has(name)) {
      return { ok: 0, code: 391, codeName: 'ReauthenticationRequired', errmsg: 'Access token expired' };
    }
    if ((this.users.enabled || this.oidc !== undefined || this.options.aws !== undefined) && client.user === undefined && !OPEN_COMMANDS.has(name)) {
      // As mongod: the error names the command as the client spelled it (mongod looks commands up by that name).
      return { ok: 0, code: 13, codeName: 'Unauthorized', errmsg: `command ${Object.keys(command)[0]} requires authentication` };
    }
    return undefined;
  }

  private authenticate(name: string, db: string, command: Document, client: ClientConnectionInfo): Document {
    if (this.oidc !== undefined && ((name === 'saslstart' && command.mechanism === 'MONGODB-OIDC') || (name === 'saslcontinue' && this.oidcTwoStep.has(client)))) {
      return this.authenticateOidc(this.oidc, name, db, command, client);
    }
    if (name === 'saslstart' && command.mechanism === 'MONGODB-AWS') {
      client.conversation = undefined;
      const started = this.options.aws === undefined ? undefined : awsServerStart(db, command, this.options.aws.stsHost ?? 'sts.amazonaws.com');
      if (started === undefined) return AWS_FAILED;
      this.awsConversations.set(client, started.conversation);
      return started.reply;
    }
    const aws = this.awsConversations.get(client);
    this.awsConversations.delete(client);
    if (name === 'saslcontinue' && aws !== undefined) {
      const user = awsServerContinue(aws, command, this.options.aws!.credentials);
      if (user === undefined) return AWS_FAILED;
      client.user = `${EXTERNAL_SOURCE}.${user}`;
      client.usersGeneration = this.users.generation;
      return { conversationId: 1, done: true, payload: new Binary(Buffer.alloc(0)), ok: 1 };
    }
    if (name === 'saslstart' && command.mechanism === 'PLAIN') {
      // One step: done at once, or refused (see ScramUsers.plain); no conversation is left to continue.
      client.conversation = undefined;
      const { reply, user } = this.users.plain(db, command);
      if (user !== undefined) {
        client.user = user;
        client.usersGeneration = this.users.generation;
      }
      return reply;
    }
    if (name === 'saslstart') {
      const { reply, conversation } = this.users.start(db, command);
      client.conversation = conversation;
      if (conversation !== undefined) client.saslConversations++;
      return reply;
    }
    if (client.conversation === undefined) {
      return { ok: 0, code: 17, codeName: 'ProtocolError', errmsg: 'No SASL session state found' };
    }
    const { reply, authenticated } = this.users.continue(client.conversation, command);
    if (authenticated) {
      client.user = `${client.conversation.user.db}.${client.conversation.user.username}`;
      client.usersGeneration = client.conversation.generation;
    } else {
      client.conversation = undefined;
    }
    return reply;
  }

  /** A MONGODB-OIDC saslStart or saslContinue (see {@link EmbeddedServerOptions.oidc}). */
  private authenticateOidc(oidc: OidcIdentities, name: string, db: string, command: Document, client: ClientConnectionInfo): Document {
    client.conversation = undefined;
    const outcome = name === 'saslstart' ? oidc.start(db, command) : oidc.continue(command);
    this.oidcTwoStep.delete(client);
    if ('awaitingJwt' in outcome && outcome.awaitingJwt === true) this.oidcTwoStep.add(client);
    if (outcome.user !== undefined) {
      client.user = outcome.user;
      client.usersGeneration = this.users.generation;
      if (outcome.expiresAtMS === undefined) this.oidcExpiry.delete(client);
      else this.oidcExpiry.set(client, outcome.expiresAtMS);
    }
    return outcome.reply;
  }

  /**
   * The `authenticate` command, answered as a mongod does for MONGODB-X509: over a connection without TLS,
   * ProtocolError (17) "SSL support is required for the MONGODB-X509 mechanism."; on a database other than
   * `$external`, ProtocolError "X.509 authentication must always use the $external database."; then
   * AuthenticationFailed (18, "Authentication failed.", the words a mongod gives for every such failure) for another
   * mechanism, a connection without a verified client certificate, a `user` that is not its subject, or a subject no
   * user of `$external` has. Success: `{ dbname: '$external', user: <subject>, ok: 1 }`, and the connection is
   * authenticated.
   */
  private authenticateX509(db: string, command: Document, client: ClientConnectionInfo): { reply: Document; authenticated: boolean } {
    const refused = (code: number, codeName: string, errmsg: string): { reply: Document; authenticated: boolean } => ({ reply: { ok: 0, errmsg, code, codeName }, authenticated: false });
    if (this.options.tls === undefined) return refused(17, 'ProtocolError', 'SSL support is required for the MONGODB-X509 mechanism.');
    if (db !== EXTERNAL_SOURCE) return refused(17, 'ProtocolError', 'X.509 authentication must always use the $external database.');
    const subject = client.certificateSubject;
    const user: unknown = command.user ?? subject;
    if (command.mechanism !== 'MONGODB-X509' || subject === undefined || user !== subject || !this.users.isX509User(subject)) {
      return refused(18, 'AuthenticationFailed', 'Authentication failed.');
    }
    client.user = `${EXTERNAL_SOURCE}.${subject}`;
    client.usersGeneration = this.users.generation;
    return { reply: { dbname: EXTERNAL_SOURCE, user: subject, ok: 1 }, authenticated: true };
  }

  /**
   * The handshake's `speculativeAuthenticate`, answered as a mongod of 4.4 or later (maxWireVersion 9 and up) does: a
   * saslStart document with a string `db` runs as a saslStart on that database, and its reply without `ok` is the
   * answer (the conversation then goes on with saslContinue); a MONGODB-X509 `authenticate` document runs on
   * `$external`, and its reply without `ok` (`{ dbname, user }`) is the answer (the connection is then authenticated);
   * anything else, a PLAIN saslStart (a mongod refuses a plaintext mechanism there), and a saslStart or authenticate
   * that fails (unknown user or mechanism), gives no answer, as if it had not been sent. Older servers ignore the
   * field.
   */
  private speculativeAuthentication(request: unknown, client: ClientConnectionInfo): Document | undefined {
    if ((this.options.maxWireVersion ?? 25) < 9 || request === null || typeof request !== 'object') return undefined;
    const document = request as Document;
    if (Object.keys(document)[0] === 'authenticate') {
      const { reply, authenticated } = this.authenticateX509(EXTERNAL_SOURCE, document, client);
      if (!authenticated) return undefined;
      const { ok: _ok, ...answer } = reply;
      return answer;
    }
    if (Object.keys(document)[0] !== 'saslStart' || typeof document.db !== 'string' || document.mechanism === 'PLAIN') return undefined;
    if (document.mechanism === 'MONGODB-OIDC') {
      if (this.oidc === undefined) return undefined;
      const reply = this.authenticateOidc(this.oidc, 'saslstart', document.db, document, client);
      if (reply.ok !== 1) return undefined;
      const { ok: _ok, ...answer } = reply;
      return answer;
    }
    const { reply, conversation } = this.users.start(document.db, document, true);
    if (conversation === undefined) return undefined;
    client.conversation = conversation;
    client.saslConversations++;
    const { ok: _ok, ...answer } = reply;
    return answer;
  }

  /**
   * The fields of a replica set member's hello reply (legacy: `ismaster` in place of `isWritablePrimary`); its
   * `topologyVersion` is {@link helloReply}'s.
   */
  private replicaSetFields(legacy: boolean): Document {
    const writable = legacy ? 'ismaster' : 'isWritablePrimary';
    const own = this.ownConfig();
    if (own === undefined) {
      // As mongod in the REMOVED state (HelloResponse without a config): an RSGhost to a client.
      return { [writable]: false, setName: this.setName, secondary: false, info: 'Does not have a valid replica set config', isreplicaset: true };
    }
    const primary = this.memberState === 'primary';
    const secondary = !primary && !own.arbiterOnly;
    const lists = this.memberLists();
    const known = primary ? this.address : this.knownPrimary();
    return {
      [writable]: primary,
      ...lists,
      setName: this.setName,
      setVersion: this.setVersion,
      secondary,
      ...(known !== undefined ? { primary: known } : {}),
      ...(own.arbiterOnly ? { arbiterOnly: true } : own.priority === 0 ? { passive: true } : {}),
      ...(own.hidden ? { hidden: true } : {}),
      ...(this.memberTags !== undefined && Object.keys(this.memberTags).length > 0 ? { tags: { ...this.memberTags } } : {}),
      me: this.address,
      ...(primary ? { electionId: this.electionId } : {}),
      ...(this.replicaSet === undefined ? {} : { lastWrite: this.lastWrite(this.replicaSet) }),
    };
  }

  /**
   * Hello's `hosts`, `passives` and `arbiters`: the members given by {@link setReplicaSetHosts} or option
   * `replicaSetMember.hosts` (default its own address) as `hosts`; or, from a configuration
   * ({@link setReplicaSetConfig}), as mongod lists them: hidden members in none, a list without members left out.
   */
  private memberLists(): { hosts?: string[]; passives?: string[]; arbiters?: string[] } {
    if (this.configMembers === undefined) return { hosts: [...(this.memberHosts ?? [this.address])] };
    const listed = this.configMembers.filter((m) => !m.hidden);
    const hosts = listed.filter(isElectable).map((m) => m.host);
    const passives = listed.filter((m) => !m.arbiterOnly && !isElectable(m)).map((m) => m.host);
    const arbiters = listed.filter((m) => m.arbiterOnly).map((m) => m.host);
    return { ...(hosts.length > 0 ? { hosts } : {}), ...(passives.length > 0 ? { passives } : {}), ...(arbiters.length > 0 ? { arbiters } : {}) };
  }

  /**
   * The primary a member that is not the primary reports: the address of its set's primary among the started
   * endpoints of its `setName` in this process (the one elected last when several are), when that address is a
   * member of its own configuration (its `hosts`, or any entry of {@link setReplicaSetConfig}'s), as a mongod knows
   * the primary of its set from its heartbeats to the members of its configuration; undefined otherwise.
   */
  private knownPrimary(): string | undefined {
    const primary = this.replicaSet?.currentPrimary();
    if (primary === undefined || primary === this.address) return undefined;
    const listed = this.configMembers === undefined ? (this.memberHosts ?? [this.address]).includes(primary) : this.configMembers.some((m) => m.host === primary);
    return listed ? primary : undefined;
  }

  /** Hello's `lastWrite` of this member, now (see {@link setReplicationLag}). */
  private lastWrite(record: ReplicaSetWrites): Document {
    const now = this.replicationNow();
    const lag = this.currentLagMS();
    const applied = record.newestAtOrBefore(now - lag);
    const majority = record.majorityAtOrBefore(now, lag);
    const wholeSeconds = (op: OpTimeRecord): Date => new Date(Math.floor(op.ms / 1000) * 1000);
    return { opTime: opTimeDocument(applied), lastWriteDate: wholeSeconds(applied), majorityOpTime: opTimeDocument(majority), majorityWriteDate: wholeSeconds(majority) };
  }

  /**
   * A secondary's refusal of command `name` on database `db` (see {@link setReplicaSetMemberState}), or undefined
   * when it runs: always on a primary or a standalone.
   */
  private secondaryRefusal(name: string, db: string, command: Document, client: ClientConnectionInfo): Document | undefined {
    if (this.memberState !== 'secondary' || db === 'local') return undefined;
    // As mongod (commandCanRunHere): no command of a multi-document transaction runs on a secondary, not even one it
    // otherwise always runs.
    const inTransaction = command.autocommit === false;
    if (!inTransaction && ALWAYS_ON_SECONDARY.has(name)) return undefined;
    const readPreference: unknown = command.$readPreference;
    const mode = readPreference !== null && typeof readPreference === 'object' ? (readPreference as Document).mode : undefined;
    const hello = this.supportsHello.get(client) === true;
    const refusal = (code: number, codeName: string, errmsg: string, errorLabels?: string[]): Document => ({
      ok: 0, errmsg, code, codeName, ...(errorLabels === undefined ? {} : { errorLabels }), ...(this.streams ? { topologyVersion: this.topologyVersion } : {}),
    });
    // As mongod 4.4+ (maxWireVersion 9): a retryable write (one with a txnNumber, outside a transaction) refused as not
    // primary is labelled RetryableWriteError, which a driver retries on the new primary.
    const retryable = !inTransaction && command.txnNumber !== undefined && (this.options.maxWireVersion ?? 25) >= 9;
    if (NEVER_ON_SECONDARY.has(name) || inTransaction) return refusal(10107, 'NotWritablePrimary', hello ? 'not primary' : 'not master', retryable ? ['RetryableWriteError'] : undefined);
    if (SECONDARY_OK_MODES.has(mode)) {
      // As mongod: a member neither primary nor secondary (an arbiter, a removed member) serves no read.
      const own = this.ownConfig();
      return own === undefined || own.arbiterOnly ? refusal(13436, 'NotPrimaryOrSecondary', 'node is not in primary or recovering state') : undefined;
    }
    return refusal(13435, 'NotPrimaryNoSecondaryOk', hello ? 'not primary and secondaryOk=false' : 'not master and slaveOk=false');
  }

  private helloReply(legacy: boolean, command: Document, client: ClientConnectionInfo): Document {
    const reply: Document = {
      ...(legacy ? { ismaster: true } : { isWritablePrimary: true }),
      // As mongod: helloOk only in answer to a request that carried it (handshake spec, "helloOk").
      ...(typeof command.helloOk === 'boolean' ? { helloOk: true } : {}),
      maxBsonObjectSize: 16 * 1024 * 1024,
      maxMessageSizeBytes: 48_000_000,
      maxWriteBatchSize: 100_000,
      localTime: new Date(),
      logicalSessionTimeoutMinutes: 30,
      connectionId: client.id,
      minWireVersion: this.options.minWireVersion ?? 0,
      maxWireVersion: this.options.maxWireVersion ?? 25,
      readOnly: false,
      ...(this.options.mongos === true ? { msg: 'isdbgrid' } : {}),
    };
    if (typeof command.helloOk === 'boolean') this.supportsHello.set(client, command.helloOk);
    if (this.memberState !== undefined) Object.assign(reply, this.replicaSetFields(legacy));
    if (Array.isArray(command.compression)) {
      const accepted = this.options.compressors ?? availableCompressors();
      const agreed = (command.compression as string[]).filter((c) => accepted.includes(c));
      reply.compression = agreed;
      client.compressor = agreed[0];
    }
    if (command.loadBalanced === true && client.serviceId !== undefined) reply.serviceId = client.serviceId;
    if (typeof command.saslSupportedMechs === 'string') {
      const mechanisms = this.users.mechanismsOf(command.saslSupportedMechs);
      if (mechanisms !== undefined) reply.saslSupportedMechs = mechanisms;
    }
    if (this.streams) reply.topologyVersion = this.topologyVersion;
    const speculative = this.speculativeAuthentication(command.speculativeAuthenticate, client);
    if (speculative !== undefined) reply.speculativeAuthenticate = speculative;
    reply.ok = 1;
    return reply;
  }
}

/**
 * The subject of the certificate `socket`'s peer presented, as RFC 2253 writes it (`openssl x509 -subject -nameopt
 * RFC2253`; the form a mongod compares a MONGODB-X509 user name with): Node gives the RDNs one per line, the attributes
 * of a multi-valued one joined by ` + `, escaped as RFC 2253 escapes them (a `+` in a value as `\+`), in the
 * certificate's order, non-ASCII characters as they are. RFC 2253 (as openssl and mongod write it) puts every
 * attribute in the reverse order, those of a multi-valued RDN too, and writes each byte of a non-ASCII character's
 * UTF-8 as `\XX`. Attributes of an OID openssl does not name are written as Node gives them (`1.2.3.4=value`), as a
 * mongod does. Undefined without one.
 */
function certificateSubject(socket: tls.TLSSocket): string | undefined {
  const subject = socket.getPeerX509Certificate()?.subject;
  if (subject === undefined) return undefined;
  const ordered = subject.split('\n').reverse().map((rdn) => rdn.split(' + ').reverse().join('+')).join(',');
  return ordered.replace(/[^\x00-\x7f]/gu, (character) => [...Buffer.from(character, 'utf8')].map((byte) => `\\${byte.toString(16).toUpperCase().padStart(2, '0')}`).join(''));
}

/** connectionStatus as a mongod answers it: the authenticated user, if any (the endpoint has no roles). */
function connectionStatusReply(client: ClientConnectionInfo): Document {
  const authenticatedUsers: Document[] = [];
  if (client.user !== undefined) {
    const dot = client.user.indexOf('.');
    authenticatedUsers.push({ user: client.user.slice(dot + 1), db: client.user.slice(0, dot) });
  }
  return { authInfo: { authenticatedUsers, authenticatedUserRoles: [] }, ok: 1 };
}

/** Waits `ms`, or less if the socket closes first; resolves to whether the socket is still open. */
function sleepUnlessClosed(socket: net.Socket, ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const done = (open: boolean): void => {
      clearTimeout(timer);
      socket.off('close', onClose);
      resolve(open);
    };
    const onClose = (): void => done(false);
    const timer = setTimeout(() => done(true), ms);
    socket.once('close', onClose);
  });
}

/**
 * The reply message of command `name`: `response` encoded, or, when a handler's reply cannot be encoded as BSON (a
 * Buffer or a Date for a document, a cycle), a BadValue saying why, so that the client gets an answer and the
 * connection stays open, as for a handler that throws (see {@link CommandHandler}).
 */
function encodeAnswer(name: string, response: Document, encode: (document: Document) => Buffer): Buffer {
  try {
    return encode(response);
  } catch (error) {
    const cause = error instanceof Error && error.cause !== undefined ? error.cause : error;
    return encode({ ok: 0, errmsg: `the reply of ${name} cannot be encoded as BSON: ${inWords(cause)}`, code: 2, codeName: 'BadValue' });
  }
}
