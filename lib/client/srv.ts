/**
 * Initial DNS seedlist discovery: the hosts and default options of a `mongodb+srv://{hostname}` connection string,
 * from the SRV records of `_{srvServiceName}._tcp.{hostname}` and the TXT record of `{hostname}`, queried once with
 * Node's `dns/promises` Resolver (on the servers `dns.getServers()` gives as it starts, so `dns.setServers()` applies).
 * The SRV records are queried again later by the client's SRV poller (see `SrvPoller`, lib/client/srv-poller.ts),
 * through {@link querySrvHosts}.
 *
 * Source: initial DNS seedlist discovery spec.
 */
import { getServers, promises as dnsPromises, type SrvRecord } from 'node:dns';
import { domainToASCII } from 'node:url';
import { keyLowerCase } from '../connection-string';
import { SrvResolutionError } from '../errors';
import { withPermissionRefusal } from '../permission-model';

/**
 * The default SRV service name (the `srvServiceName` URI option): `_mongodb._tcp.{hostname}` is queried.
 *
 * Source: initial DNS seedlist discovery spec, "srvServiceName".
 */
export const DEFAULT_SRV_SERVICE_NAME = 'mongodb';

/**
 * The name whose SRV records give the hosts of `hostname`: `_{srvServiceName}._tcp.{hostname}`, the service
 * {@link DEFAULT_SRV_SERVICE_NAME} when `srvServiceName` is undefined.
 *
 * Source: initial DNS seedlist discovery spec, "Querying DNS", "srvServiceName"; Polling SRV Records for mongos
 * Discovery spec, "Implementation" (the rescan queries the same name).
 */
export function srvRecordName(hostname: string, srvServiceName: string | undefined): string {
  return `_${srvServiceName ?? DEFAULT_SRV_SERVICE_NAME}._tcp.${hostname}`;
}

/** The only options a TXT record may give (lower case). Source: spec, "Default Connection String Options". */
const TXT_OPTIONS = new Set(['authsource', 'replicaset', 'loadbalanced']);

/** What {@link discoverSeedlist} found. */
export interface Seedlist {
  /** The seedlist, `host:port` (lower case), at most srvMaxHosts of the SRV targets when it is > 0. */
  readonly hosts: readonly string[];
  /** The TXT record's options as key/value pairs, in order (empty when there is no TXT record). */
  readonly txtOptions: readonly (readonly [string, string])[];
}

/**
 * A host name in lower case, without the trailing dot of a fully qualified name, an internationalized one in its
 * A-label (`xn--`) form: the form DNS answers with, and Node's resolver asks for (`bücher` is `xn--bcher-kva`).
 */
function normalize(name: string): string {
  const lower = name.toLowerCase().replace(/\.$/, '');
  if (/^\p{ASCII}*$/u.test(lower)) return lower;
  const ascii = domainToASCII(lower);
  return ascii === '' ? lower : ascii.toLowerCase();
}

/**
 * Whether the SRV target `target` may be used for the SRV host name `hostname`: it must end with `.{domainname}`,
 * where `{domainname}` is `hostname` without its left-most part when `hostname` has three or more `.`-separated parts,
 * and the whole `hostname` otherwise (then `target` has at least one more level than it). Case-insensitive; a
 * trailing dot is ignored; internationalized names are compared in their A-label (`xn--`) form.
 *
 * Source: initial DNS seedlist discovery spec, "Connection String Format" ({subdomain}, {domainname}), "Querying DNS"
 * (host names MUST share the SRV's {domainname}; with fewer than three parts, at least one more domain level).
 */
export function matchesParentDomain(target: string, hostname: string): boolean {
  const host = normalize(hostname);
  const name = normalize(target);
  const parts = host.split('.');
  const domain = parts.length >= 3 ? parts.slice(1).join('.') : host;
  // Ending in ".{domain}" gives at least one more level than {domain}: for a host of one or two parts, than the host.
  return name.endsWith(`.${domain}`) && name.length > domain.length + 1;
}

/**
 * Whether the SRV target `target` with port `port` is a host a client can connect to: a host name made of
 * `.`-separated labels of letters, digits, `-` and `_` (an internationalized one in its A-label form), at most 63
 * characters each, and a port from 1 to 65535. DNS carries any byte in a label: a target such as
 * `localhost,a.example.com` (which a connection string would read as two hosts) or `a b.example.com` is not one.
 *
 * Source: initial DNS seedlist discovery spec, "Querying DNS" (the SRV records give host names and ports); RFC 952
 * and RFC 1123 (host names; `_` accepted, as names in use carry it).
 */
export function isUsableTarget(target: string, port: number): boolean {
  const name = normalize(target);
  return Number.isInteger(port) && port >= 1 && port <= 65_535 && name.length <= 253 && /^[a-z0-9_-]{1,63}(\.[a-z0-9_-]{1,63})*$/.test(name);
}

/**
 * The options of a TXT record (its strings joined, in order): `key=value` pairs separated by `&`, each key
 * authSource, replicaSet or loadBalanced (any case), percent-decoded.
 *
 * @throws {SrvResolutionError} for a pair without `=` or without a value (misformatted), or any other key (named; its
 *   value is not shown).
 *
 * Source: initial DNS seedlist discovery spec, "Default Connection String Options" ("MUST only support the
 * authSource, replicaSet, and loadBalanced options through a TXT record, and MUST raise an error if any other option is
 * encountered"; "If any connection string option in a TXT record is incorrectly formatted, a Client MUST throw a parse
 * exception").
 */
export function parseTxtOptions(hostname: string, text: string): [string, string][] {
  const pairs: [string, string][] = [];
  for (const piece of text.split('&')) {
    if (piece === '') continue;
    const equals = piece.indexOf('=');
    if (equals <= 0) throw new SrvResolutionError(hostname, `the TXT record of ${hostname} holds an option that is not key=value`);
    // An empty value is no default: what the URI would ignore or refuse (an empty authSource) is a malformed record here.
    if (equals === piece.length - 1) throw new SrvResolutionError(hostname, `the TXT record of ${hostname} gives ${piece.slice(0, equals)} no value`);
    let key: string;
    let value: string;
    try {
      key = decodeURIComponent(piece.slice(0, equals));
      value = decodeURIComponent(piece.slice(equals + 1));
    } catch {
      throw new SrvResolutionError(hostname, `the TXT record of ${hostname} holds an option whose percent-encoding is invalid`);
    }
    if (!TXT_OPTIONS.has(keyLowerCase(key))) {
      throw new SrvResolutionError(hostname, `the TXT record of ${hostname} gives ${key}, but a TXT record may give only authSource, replicaSet and loadBalanced`);
    }
    pairs.push([key, value]);
  }
  return pairs;
}

/**
 * `count` of `items` picked at random (a Fisher-Yates shuffle of a copy, its first `count`); all of them, in their
 * order, when `count` is 0 or at least their number.
 *
 * Source: initial DNS seedlist discovery spec, "Querying DNS" (srvMaxHosts: "randomly select that many hosts";
 * "SHOULD use the Fisher-Yates shuffle").
 */
export function pickAtRandom<T>(items: readonly T[], count: number, random: () => number = Math.random): T[] {
  if (count <= 0 || count >= items.length) return [...items];
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [copy[i], copy[j]] = [copy[j], copy[i]];
  }
  return copy.slice(0, count);
}

/** Options of {@link discoverSeedlist}. */
export interface SeedlistOptions {
  /** The SRV service name: `_{srvServiceName}._tcp.{hostname}` is queried. Default "mongodb". */
  readonly srvServiceName?: string | undefined;
  /** At most this many hosts, picked at random (0: all). Default 0. */
  readonly srvMaxHosts?: number | undefined;
  /** The deadline of both queries together, in ms (0: none). */
  readonly timeoutMS?: number | undefined;
  /** Aborting it cancels the queries: the promise rejects with the signal's reason. */
  readonly signal?: AbortSignal | undefined;
}

/**
 * A DNS error's code and message, in words; for a query Node's permission model refused (ERR_ACCESS_DENIED, Node.js 25
 * and later without `--allow-net`: its message names no flag), the flag that allows it.
 */
function dnsReason(error: unknown): string {
  const { code, message } = error as { code?: string; message?: string };
  return code !== undefined ? withPermissionRefusal(`${code}${message === undefined ? '' : ` (${message})`}`, error) : String(message ?? error);
}

/**
 * Queries the SRV records of `_{srvServiceName}._tcp.{hostname}` and the TXT records of `hostname` (in parallel; no
 * connection is made before both answered), checks them, and returns the seedlist and the TXT record's options. SRV
 * priority and weight are ignored; CNAME records are not looked for.
 *
 * @throws {SrvResolutionError} (rejection) for a DNS error or a deadline passed (code and reason in the message), no
 *   SRV record, a target outside the parent domain (see {@link matchesParentDomain}) or that is no host name and port
 *   (see {@link isUsableTarget}), more than one TXT record, or a TXT
 *   record {@link parseTxtOptions} refuses; the signal's reason when `signal` is aborted.
 *
 * Source: initial DNS seedlist discovery spec, "Querying DNS", "Default Connection String Options", "CNAME not
 * supported"; the deadline: extension (the spec sets none).
 */
export async function discoverSeedlist(hostname: string, options: SeedlistOptions = {}): Promise<Seedlist> {
  const srvName = srvRecordName(hostname, options.srvServiceName);
  return withResolver(hostname, options, async (resolver, failure) => {
    // Both asked before either is judged: a TXT error is not lost behind an SRV one, nor the reverse.
    const [srv, txt] = await Promise.allSettled([resolver.resolveSrv(srvName).catch(failure(`SRV ${srvName}`)), resolveTxt(resolver, hostname).catch(failure(`TXT ${hostname}`))]);
    if (srv.status === 'rejected') throw srv.reason;
    if (txt.status === 'rejected') throw txt.reason;
    return { hosts: seedlist(hostname, srvName, srv.value, options.srvMaxHosts ?? 0), txtOptions: txtOptions(hostname, txt.value) };
  });
}

/** Maps a DNS query's rejection to what its caller throws (see {@link withResolver}). */
type DnsFailure = (what: string) => (error: unknown) => never;

/**
 * Runs `query` on a resolver asking the servers `dns.getServers()` gives now, cancelled when `options.signal` aborts
 * or `options.timeoutMS` (ms; 0 or absent: no deadline of rxcmap's) passes; the deadline's timer is unref'd and
 * cleared, and the abort listener removed, once `query` settles. `query` is given `failure(what)`, which turns a
 * query's rejection into the signal's reason when aborted, else a {@link SrvResolutionError} naming `hostname`,
 * `what` was asked and the reason (the deadline in ms, or the DNS code).
 *
 * @throws the signal's reason at once when `options.signal` is already aborted; otherwise what `query` throws.
 *
 * Source: extension (the seedlist discovery and SRV polling specs set no deadline on the DNS queries).
 */
async function withResolver<T>(hostname: string, options: Pick<SeedlistOptions, 'signal' | 'timeoutMS'>, query: (resolver: dnsPromises.Resolver, failure: DnsFailure) => Promise<T>): Promise<T> {
  const resolver = new dnsPromises.Resolver();
  resolver.setServers(getServers());
  const { signal } = options;
  signal?.throwIfAborted();
  let timedOut = false;
  const onAbort = (): void => resolver.cancel();
  signal?.addEventListener('abort', onAbort, { once: true });
  const timeoutMS = options.timeoutMS ?? 0;
  const timer =
    timeoutMS > 0
      ? setTimeout(() => {
          timedOut = true;
          resolver.cancel();
        }, timeoutMS)
      : undefined;
  timer?.unref();
  const failure: DnsFailure = (what) => (error) => {
    if (signal?.aborted === true) throw signal.reason;
    if (timedOut) throw new SrvResolutionError(hostname, `the DNS query of ${what} did not answer within ${timeoutMS} ms`, error);
    throw new SrvResolutionError(hostname, `the DNS query of ${what} failed: ${dnsReason(error)}`, error);
  };
  try {
    return await query(resolver, failure);
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
  }
}

/** The TXT records of `hostname`; none when the name has no TXT record (ENODATA) or no record at all (ENOTFOUND). */
async function resolveTxt(resolver: dnsPromises.Resolver, hostname: string): Promise<string[][]> {
  try {
    return await resolver.resolveTxt(hostname);
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === 'ENODATA' || code === 'ENOTFOUND') return [];
    throw error;
  }
}

/** What {@link querySrvHosts} found. */
export interface SrvHosts {
  /** The targets in the parent domain, `host:port` (lower case), each once, in the answer's order. */
  readonly hosts: readonly string[];
  /** The targets outside the parent domain (see {@link matchesParentDomain}), as the answer gave them. */
  readonly rejected: readonly string[];
  /** The targets in the parent domain that are no host name and port (see {@link isUsableTarget}), as the answer gave them. */
  readonly unusable: readonly { readonly target: string; readonly port: number }[];
}

/**
 * Queries the SRV records of `_{srvServiceName}._tcp.{hostname}` only (no TXT record), and sorts their targets into
 * the hosts (in the parent domain of `hostname`, a host name and port), those outside that domain, and the others.
 * SRV priority and weight are ignored.
 *
 * @throws {SrvResolutionError} (rejection) for a DNS error (ENOTFOUND, ENODATA for a name without SRV record...) or a
 *   deadline passed (`timeoutMS`, in ms; 0: none); the signal's reason when `signal` is aborted.
 *
 * Source: Polling SRV Records for mongos Discovery spec, "Implementation" (the rescan queries the SRV records of
 * `_{srvServiceName}._tcp.{hostname}.{domainname}` and verifies each host name's parent domain).
 */
export async function querySrvHosts(hostname: string, options: Omit<SeedlistOptions, 'srvMaxHosts'> = {}): Promise<SrvHosts> {
  const srvName = srvRecordName(hostname, options.srvServiceName);
  return withResolver(hostname, options, async (resolver, failure) => {
    const records = await resolver.resolveSrv(srvName).catch(failure(`SRV ${srvName}`));
    const hosts: string[] = [];
    const rejected: string[] = [];
    const unusable: { target: string; port: number }[] = [];
    for (const record of records) {
      if (!matchesParentDomain(record.name, hostname)) rejected.push(record.name);
      else if (!isUsableTarget(record.name, record.port)) unusable.push({ target: record.name, port: record.port });
      else {
        const host = `${normalize(record.name)}:${record.port}`;
        if (!hosts.includes(host)) hosts.push(host);
      }
    }
    return { hosts, rejected, unusable };
  });
}

/** The checked seedlist of the SRV answer `records` (see {@link discoverSeedlist}). */
function seedlist(hostname: string, srvName: string, records: readonly SrvRecord[], srvMaxHosts: number): string[] {
  if (records.length === 0) throw new SrvResolutionError(hostname, `no SRV record for ${srvName}`);
  const hosts: string[] = [];
  for (const record of records) {
    if (!matchesParentDomain(record.name, hostname)) {
      throw new SrvResolutionError(hostname, `the SRV target ${record.name} is not in the domain of ${hostname}`);
    }
    // Its host and port are written into the connection string the client then reads: nothing else may be read there.
    if (!isUsableTarget(record.name, record.port)) {
      throw new SrvResolutionError(hostname, `the SRV target ${record.name} (port ${record.port}) is not a host name and port a client can connect to`);
    }
    const host = `${normalize(record.name)}:${record.port}`;
    if (!hosts.includes(host)) hosts.push(host);
  }
  return pickAtRandom(hosts, srvMaxHosts);
}

/** The options of the TXT answer `records` (at most one record, its strings joined). */
function txtOptions(hostname: string, records: readonly (readonly string[])[]): [string, string][] {
  if (records.length > 1) throw new SrvResolutionError(hostname, `${hostname} has ${records.length} TXT records; at most one is allowed`);
  return records.length === 0 ? [] : parseTxtOptions(hostname, records[0].join(''));
}

/**
 * The `mongodb://` connection string `uri` (a `mongodb+srv://` one) stands for once its seedlist is known: the host
 * replaced by `hosts`, srvServiceName and srvMaxHosts left out, each TXT option the URI does not give (any case)
 * added, and `tls=true` added when the URI gives neither tls nor ssl. The credentials, auth database and other
 * options stay as written.
 *
 * Source: initial DNS seedlist discovery spec, "Example" (the URI the driver MUST treat the host information as),
 * "Validation Before Querying DNS" (TLS on unless tls=false is given), "Default Connection String Options" (the
 * Connection String's options override the TXT record's).
 */
export function resolvedUri(uri: string, hosts: readonly string[], txt: readonly (readonly [string, string])[]): string {
  const match = /^mongodb\+srv:\/\/([^/?]*)(.*)$/is.exec(uri);
  if (match === null) throw new TypeError('not a mongodb+srv:// connection string');
  const authority = match[1];
  const at = authority.lastIndexOf('@');
  const userinfo = at < 0 ? '' : authority.slice(0, at + 1);
  let rest = match[2];
  const query = rest.indexOf('?');
  const path = query < 0 ? rest : rest.slice(0, query);
  const pieces = query < 0 ? [] : rest.slice(query + 1).split('&');
  const keyOf = (piece: string): string => {
    const name = piece.split('=')[0];
    try {
      return keyLowerCase(decodeURIComponent(name));
    } catch {
      return name;
    }
  };
  const kept = pieces.filter((piece) => !['srvservicename', 'srvmaxhosts'].includes(keyOf(piece)));
  const given = new Set(pieces.map(keyOf));
  for (const [key, value] of txt) {
    if (!given.has(keyLowerCase(key))) kept.push(`${encodeURIComponent(key)}=${encodeURIComponent(value)}`);
  }
  if (!given.has('tls') && !given.has('ssl')) kept.push('tls=true');
  rest = `${path === '' ? '/' : path}?${kept.filter((p) => p !== '').join('&')}`;
  return `mongodb://${userinfo}${hosts.join(',')}${rest}`;
}
