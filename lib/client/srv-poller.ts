/**
 * SRV polling: the periodic rescan of the SRV records of a `mongodb+srv://` client, which follows the mongos hosts
 * the records list as they are added and removed, without a new client.
 *
 * Source: Polling SRV Records for mongos Discovery spec.
 */
import type { SchedulerLike, Subscription } from 'rxjs';
import { pickAtRandom, querySrvHosts, srvRecordName, type SrvHosts } from './srv';

/**
 * The shortest time between two rescans, in ms: 60000 (60 s). Also the interval when the SRV records' TTLs are not
 * known, which is always the case with Node's resolver (`resolveSrv` gives no TTL).
 *
 * Source: Polling SRV Records for mongos Discovery spec, "Implementation" ("MUST NOT be lower than 60 seconds";
 * "If a driver is unable to access the TTL values of SRV records, it MUST rescan every 60 seconds").
 */
export const MIN_RESCAN_SRV_INTERVAL_MS = 60_000;

/**
 * rescanSRVIntervalMS after a rescan that found records: the smallest of their TTLs (`ttlSeconds`, in s) in ms, but
 * at least {@link MIN_RESCAN_SRV_INTERVAL_MS}; that minimum when no TTL is known (`ttlSeconds` empty or absent).
 *
 * Source: Polling SRV Records for mongos Discovery spec, "Implementation" (the lowest TTL of the records of the most
 * recent rescan, not below 60 s).
 */
export function rescanSRVIntervalMS(ttlSeconds: readonly number[] = []): number {
  const known = ttlSeconds.filter((ttl) => Number.isFinite(ttl) && ttl >= 0);
  return known.length === 0 ? MIN_RESCAN_SRV_INTERVAL_MS : Math.max(MIN_RESCAN_SRV_INTERVAL_MS, Math.min(...known) * 1000);
}

/**
 * The hosts after a rescan that found the verified hosts `valid` (non-empty), the client having `current`: the
 * current hosts still in `valid` are kept, in their order and unchanged; those gone are dropped; the new ones are
 * added after them, all of them when `srvMaxHosts` is 0 (or not below the number of `valid` hosts), otherwise picked
 * at random ({@link pickAtRandom}, a Fisher-Yates shuffle, as for the initial seedlist) until there are `srvMaxHosts`.
 *
 * Source: Polling SRV Records for mongos Discovery spec, "Implementation" (remove the hosts no longer returned; leave
 * the unchanged ones alone; srvMaxHosts: add new hosts, randomly selected as for the initial selection, until the
 * topology has srvMaxHosts hosts).
 */
export function rescannedHosts(current: readonly string[], valid: readonly string[], srvMaxHosts: number, random: () => number = Math.random): string[] {
  const kept = current.filter((host) => valid.includes(host));
  const fresh = valid.filter((host) => !kept.includes(host));
  if (srvMaxHosts <= 0) return [...kept, ...fresh];
  const room = srvMaxHosts - kept.length;
  return room <= 0 ? kept : [...kept, ...pickAtRandom(fresh, room, random)];
}

/** Options of an {@link SrvPoller}. */
export interface SrvPollerOptions {
  /** The URI's host name: `_{srvServiceName}._tcp.{hostname}` is queried. */
  readonly hostname: string;
  /** The SRV service name (default "mongodb"). */
  readonly srvServiceName?: string | undefined;
  /** At most this many hosts (0 or absent: no limit). */
  readonly srvMaxHosts?: number | undefined;
  /** rescanSRVIntervalMS while no verified record is obtained (after a failed rescan), in ms. */
  readonly heartbeatFrequencyMS: number;
  /** The deadline of one DNS query, in ms (0: none of its own). */
  readonly timeoutMS: number;
  /** Clock and timers of the rescans. */
  readonly scheduler: SchedulerLike;
  /** The client's hosts now (`host:port`). */
  readonly hosts: () => readonly string[];
  /** Called with the new hosts after a rescan that changes them (never with an empty list). */
  readonly update: (hosts: readonly string[]) => void;
  /** Called with what a rescan could not use, and why (a DNS error, no record, a target outside the domain or no host name). */
  readonly warn: (message: string) => void;
  /** The SRV query (tests). Default {@link querySrvHosts}. */
  readonly query?: ((hostname: string, options: { srvServiceName?: string | undefined; timeoutMS: number; signal: AbortSignal }) => Promise<SrvHosts>) | undefined;
}

/**
 * The rescans of one `mongodb+srv://` client. {@link start} arms the first rescan rescanSRVIntervalMS after the
 * initial discovery ended; each rescan arms the next when it ends. A rescan queries the SRV records (not the TXT
 * record) and:
 *
 * - for a DNS error (a timeout at `timeoutMS` included), an answer without any record, or records whose targets are
 *   all outside the parent domain or no host name and port (`localhost,a.example.com`, port 0: see `isUsableTarget`),
 *   changes nothing, reports it through `warn`, and sets rescanSRVIntervalMS to heartbeatFrequencyMS until a rescan
 *   obtains a verified record;
 * - otherwise reports each such target through `warn` (it is not used), sets
 *   rescanSRVIntervalMS back to {@link rescanSRVIntervalMS} (60 s: Node's resolver gives no TTL), and, when the hosts
 *   {@link rescannedHosts} gives differ from the current ones, calls `update` with them.
 *
 * Nothing is thrown: `update` and `warn` are called from the timer's callback, and an error they throw ends no
 * polling (it is reported through `warn`). {@link stop} cancels the timer and a query in progress, for good.
 *
 * Source: Polling SRV Records for mongos Discovery spec, "Implementation" (the rescan's rules; rescanSRVIntervalMS
 * from the end of the previous rescan or of the initial discovery), "Multi-Threaded Drivers" (the lookups never block
 * other operations: here, asynchronous DNS queries).
 */
export class SrvPoller {
  /** rescanSRVIntervalMS now, in ms: 60000, or heartbeatFrequencyMS after a rescan that found no verified record. */
  get rescanSRVIntervalMS(): number {
    return this.interval;
  }
  /** Whether {@link stop} was called. */
  get stopped(): boolean {
    return this.ended;
  }

  private interval = MIN_RESCAN_SRV_INTERVAL_MS;
  private ended = false;
  private timer: Subscription | undefined;
  private lookup: AbortController | undefined;

  constructor(private readonly options: SrvPollerOptions) {}

  /** Arms the next rescan, rescanSRVIntervalMS from now. No-op once stopped, or when one is armed or running. */
  start(): void {
    if (this.ended || this.timer !== undefined || this.lookup !== undefined) return;
    this.timer = this.options.scheduler.schedule(() => {
      this.timer = undefined;
      void this.rescan();
    }, this.interval);
  }

  /** Stops polling for good: the armed rescan is cancelled, a query in progress aborted and its answer ignored. Idempotent. */
  stop(): void {
    this.ended = true;
    this.timer?.unsubscribe();
    this.timer = undefined;
    this.lookup?.abort();
    this.lookup = undefined;
  }

  /** One rescan, then the next one armed (see {@link SrvPoller}). */
  private async rescan(): Promise<void> {
    const { hostname, srvServiceName } = this.options;
    const lookup = (this.lookup = new AbortController());
    let found: SrvHosts | undefined;
    let failure: string | undefined;
    try {
      found = await (this.options.query ?? querySrvHosts)(hostname, { srvServiceName, timeoutMS: this.options.timeoutMS, signal: lookup.signal });
    } catch (error) {
      failure = error instanceof Error ? error.message : String(error);
    }
    if (lookup.signal.aborted || this.ended) return;
    this.lookup = undefined;
    const service = srvRecordName(hostname, srvServiceName);
    try {
      for (const target of found?.rejected ?? []) this.options.warn(`SRV polling: the SRV target ${target} of ${service} is not in the domain of ${hostname} and is not used`);
      for (const { target, port } of found?.unusable ?? []) {
        this.options.warn(`SRV polling: the SRV target ${target} (port ${port}) of ${service} is not a host name and port a client can connect to, and is not used`);
      }
      if (found === undefined || found.hosts.length === 0) {
        this.interval = this.options.heartbeatFrequencyMS;
        const reason =
          found === undefined
            ? failure
            : found.unusable.length > 0
              ? 'no SRV target is a host name and port in its domain'
              : found.rejected.length > 0
                ? 'no SRV target is in its domain'
                : `no SRV record for ${service}`;
        this.options.warn(`SRV polling: the hosts are left unchanged, next rescan in ${this.interval} ms: ${reason}`);
      } else {
        this.interval = rescanSRVIntervalMS();
        const current = this.options.hosts();
        const next = rescannedHosts(current, found.hosts, this.options.srvMaxHosts ?? 0);
        if (next.length !== current.length || next.some((host, i) => host !== current[i])) this.options.update(next);
      }
    } catch (error) {
      this.options.warn(`SRV polling: applying a rescan failed: ${error instanceof Error ? error.message : String(error)}`);
    }
    this.start();
  }
}
