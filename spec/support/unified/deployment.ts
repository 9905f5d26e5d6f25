/**
 * The deployments the unified test runner runs a test against: a real one when `MONGODB_URI` is set, otherwise one
 * made of embedded endpoints for the topology the test asks for (a standalone, a three-member replica set, two
 * mongoses, a load balancer), with SCRAM users when the test needs authentication, and collections that keep their
 * documents (see {@link EmbeddedCollections}).
 *
 * Source: unified test format spec, "runOnRequirement" (topologies, minServerVersion, maxServerVersion, auth,
 * serverless), "Test Runner Implementation" (the deployment under test, `useMultipleMongoses`).
 */
import type { Document } from 'bson';
import { connect } from '../../../lib';
import { EmbeddedServer } from '../../../lib/testing';
import { EmbeddedCollections } from './collections';

/** A topology a test can ask for, as `runOnRequirements` names it. */
export type TopologyName = 'single' | 'replicaset' | 'sharded' | 'sharded-replicaset' | 'load-balanced';

/** One `runOnRequirements` entry (the fields these tests use). */
export interface RunOnRequirement {
  readonly minServerVersion?: string;
  readonly maxServerVersion?: string;
  readonly topologies?: readonly TopologyName[];
  readonly serverless?: 'require' | 'forbid' | 'allow';
  readonly auth?: boolean;
  readonly serverParameters?: Document;
}

/** The server a test runs against, as its clients reach it. */
export interface Deployment {
  readonly topology: Exclude<TopologyName, 'sharded-replicaset'>;
  readonly serverVersion: string;
  readonly auth: boolean;
  /** The connection string of a client of the deployment: every mongos with `multipleMongoses`, one otherwise. */
  uri(multipleMongoses: boolean): string;
  /** Stops what the deployment started (nothing for a real one). */
  close(): Promise<void>;
}

/** The user the embedded deployments' tests authenticate as. */
const USER = { username: 'unified', password: 'unified-password' };

function versionParts(version: string): number[] {
  return version.split('.').map((part) => Number.parseInt(part, 10) || 0);
}

/** Compares two server versions by their numeric parts (missing parts are 0): <0, 0 or >0. */
export function compareVersions(a: string, b: string): number {
  const x = versionParts(a);
  const y = versionParts(b);
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const d = (x[i] ?? 0) - (y[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/** Why `deployment` does not meet `requirement`; undefined when it does. */
export function unmet(requirement: RunOnRequirement, deployment: { topology: Deployment['topology']; serverVersion: string; auth: boolean }): string | undefined {
  if (requirement.minServerVersion !== undefined && compareVersions(deployment.serverVersion, requirement.minServerVersion) < 0) return `server ${deployment.serverVersion} < ${requirement.minServerVersion}`;
  if (requirement.maxServerVersion !== undefined && compareVersions(deployment.serverVersion, requirement.maxServerVersion) > 0) return `server ${deployment.serverVersion} > ${requirement.maxServerVersion}`;
  if (requirement.topologies !== undefined) {
    const names = requirement.topologies.map((t) => (t === 'sharded-replicaset' ? 'sharded' : t));
    if (!names.includes(deployment.topology)) return `topology ${deployment.topology} not in ${requirement.topologies.join(', ')}`;
  }
  if (requirement.serverless === 'require') return 'serverless required';
  if (requirement.auth !== undefined && requirement.auth !== deployment.auth) return `auth ${requirement.auth ? 'required' : 'forbidden'}`;
  if (requirement.serverParameters !== undefined) return 'serverParameters are not checked by this runner';
  return undefined;
}

/**
 * The embedded deployment that meets one of `requirements` (the first one this runner can make), or why none can be
 * made. Topologies are tried in the order the requirement lists them.
 */
export function embeddedPlan(requirements: readonly RunOnRequirement[] | undefined): EmbeddedPlan | string {
  const reasons: string[] = [];
  for (const requirement of requirements ?? [{}]) {
    const topologies = (requirement.topologies ?? ['single']).map((t) => (t === 'sharded-replicaset' ? 'sharded' : t));
    // The newest release the requirement allows: a test of older servers runs against endpoints that report one.
    const release = RELEASES.find(([version]) => requirement.maxServerVersion === undefined || compareVersions(version, requirement.maxServerVersion) <= 0);
    if (release === undefined) {
      reasons.push(`no release at or below ${String(requirement.maxServerVersion)}`);
      continue;
    }
    for (const topology of topologies) {
      const plan = { topology, serverVersion: release[0], maxWireVersion: release[1], auth: requirement.auth === true };
      const why = unmet(requirement, plan);
      if (why === undefined) return plan;
      reasons.push(why);
    }
  }
  return `no embedded deployment meets the requirements: ${reasons.join('; ')}`;
}

/** What {@link startEmbedded} starts: the topology, the version its endpoints report, whether they need auth. */
export interface EmbeddedPlan {
  readonly topology: Deployment['topology'];
  readonly serverVersion: string;
  readonly maxWireVersion: number;
  readonly auth: boolean;
}

/** Server releases, newest first, with the maxWireVersion each reports (handshake spec, wire version table). */
const RELEASES: readonly (readonly [string, number])[] = [
  ['8.0.0', 25],
  ['7.0.0', 21],
  ['6.0.0', 17],
  ['5.0.0', 13],
  ['4.4.0', 9],
  ['4.2.0', 8],
  ['4.0.0', 7],
];

function credentials(auth: boolean): string {
  return auth ? `${encodeURIComponent(USER.username)}:${encodeURIComponent(USER.password)}@` : '';
}

/** Starts the embedded deployment of `plan`. */
export async function startEmbedded(plan: EmbeddedPlan): Promise<Deployment> {
  const collections = new EmbeddedCollections();
  const base = { users: plan.auth ? [{ ...USER }] : undefined, version: plan.serverVersion, maxWireVersion: plan.maxWireVersion };
  let servers: EmbeddedServer[];
  let uri: (multiple: boolean) => string;
  switch (plan.topology) {
    case 'single':
      servers = [await new EmbeddedServer(base).start()];
      uri = () => `mongodb://${credentials(plan.auth)}${servers[0]!.address}/`;
      break;
    case 'sharded':
      servers = await Promise.all([new EmbeddedServer({ ...base, mongos: true }).start(), new EmbeddedServer({ ...base, mongos: true }).start()]);
      uri = (multiple) => `mongodb://${credentials(plan.auth)}${(multiple ? servers : servers.slice(0, 1)).map((s) => s.address).join(',')}/`;
      break;
    case 'load-balanced':
      servers = [await new EmbeddedServer({ ...base, loadBalancedServices: 1 }).start()];
      uri = () => `mongodb://${credentials(plan.auth)}${servers[0]!.address}/?loadBalanced=true`;
      break;
    case 'replicaset': {
      const setName = `rs-${Math.random().toString(36).slice(2, 10)}`;
      servers = await Promise.all(
        (['primary', 'secondary', 'secondary'] as const).map((state) => new EmbeddedServer({ ...base, replicaSetMember: { setName, state } }).start()),
      );
      for (const member of servers) member.setReplicaSetHosts(servers.map((s) => s.address));
      for (const member of servers) serveElections(member, servers);
      uri = () => `mongodb://${credentials(plan.auth)}${servers.map((s) => s.address).join(',')}/?replicaSet=${setName}`;
      break;
    }
  }
  for (const server of servers) collections.serve(server);
  return {
    topology: plan.topology,
    serverVersion: plan.serverVersion,
    auth: plan.auth,
    uri,
    close: async () => {
      await Promise.all(servers.map((s) => s.stop()));
    },
  };
}

/**
 * `replSetStepDown` and `replSetFreeze` on a member of an embedded replica set: the primary steps down and the next
 * member is elected, as a real set elects a secondary whose freeze was lifted; `replSetFreeze` is accepted.
 */
function serveElections(member: EmbeddedServer, members: readonly EmbeddedServer[]): void {
  member.handle('replSetFreeze', () => ({ ok: 1 }));
  member.handle('replSetStepDown', () => {
    const next = members[(members.indexOf(member) + 1) % members.length]!;
    member.setReplicaSetMemberState('secondary');
    next.setReplicaSetMemberState('primary');
    return { ok: 1 };
  });
}

/** The deployment `MONGODB_URI` names, as its server describes itself. */
export async function describeExternal(uri: string): Promise<Deployment> {
  const client = connect(uri, { serverSelectionTimeoutMS: 10_000 });
  try {
    const hello = await client.command('admin', { hello: 1 });
    const buildInfo = await client.command('admin', { buildInfo: 1 });
    const loadBalanced = /[?&]loadBalanced=true/i.test(uri);
    const topology: Deployment['topology'] = loadBalanced ? 'load-balanced' : hello.msg === 'isdbgrid' ? 'sharded' : hello.setName !== undefined ? 'replicaset' : 'single';
    const auth = /^mongodb(\+srv)?:\/\/[^/@]+@/.test(uri);
    const hosts = /^mongodb:\/\/(?:[^/@]+@)?([^/?]+)/.exec(uri)?.[1];
    return {
      topology,
      // "Version String": the first three elements of versionArray (a version's suffix, such as -rc0, is not one).
      serverVersion: Array.isArray(buildInfo.versionArray) ? (buildInfo.versionArray as unknown[]).slice(0, 3).map(Number).join('.') : String(buildInfo.version),
      auth,
      uri: (multiple) => (multiple || hosts === undefined || topology !== 'sharded' ? uri : uri.replace(hosts, hosts.split(',')[0]!)),
      close: async () => {},
    };
  } finally {
    await client.close();
  }
}

/** `uri` with `options` added to its query string. */
export function withUriOptions(uri: string, options: Document | undefined): string {
  if (options === undefined || Object.keys(options).length === 0) return uri;
  const query = Object.entries(options)
    .map(([key, value]) => `${encodeURIComponent(key)}=${encodeURIComponent(typeof value === 'object' && value !== null ? Object.entries(value as Document).map(([k, v]) => `${k}:${String(v)}`).join(',') : String(value))}`)
    .join('&');
  const [base, existing] = uri.split('?', 2) as [string, string | undefined];
  const path = /^[a-z+]+:\/\/[^/]*\//.test(base) ? base : `${base}/`;
  // The connection string's options that uriOptions names (option names are case-insensitive) give way to them.
  const overridden = new Set(Object.keys(options).map((key) => key.toLowerCase()));
  const kept = (existing ?? '').split('&').filter((pair) => pair !== '' && !overridden.has(decodeURIComponent(pair.split('=', 1)[0]!).toLowerCase()));
  return `${path}?${[...kept, query].join('&')}`;
}
