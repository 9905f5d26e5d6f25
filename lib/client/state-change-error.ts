/**
 * State change errors: which command replies say "not writable primary" or "node is recovering", which of those say
 * "node is shutting down", and whether such an error is older than what the client knows of the server
 * (topologyVersion).
 *
 * Source: server discovery and monitoring spec, "Error handling", "'not writable primary' and 'node is recovering'"
 * (the codes, the message fallback, writeConcernError, not writeErrors), "Error handling pseudocode"
 * (`isStateChangeError`, `isShutdown`, `isStaleError`, `compareTopologyVersion`); server monitoring spec,
 * "topologyVersion".
 */
import type { Document } from 'bson';
import { serverErrorMessage } from '../errors';
import { asTopologyVersion, compareTopologyVersion } from '../monitor/topology-version';

/** "node is recovering" codes: InterruptedAtShutdown, InterruptedDueToReplStateChange, NotPrimaryOrSecondary, PrimarySteppedDown, ShutdownInProgress. */
const RECOVERING_CODES: ReadonlySet<number> = new Set([11600, 11602, 13436, 189, 91]);
/** "not writable primary" codes: NotWritablePrimary, NotPrimaryNoSecondaryOk, LegacyNotPrimary. */
const NOT_WRITABLE_PRIMARY_CODES: ReadonlySet<number> = new Set([10107, 13435, 10058]);
/** "node is shutting down" codes (a subset of the recovering ones): InterruptedAtShutdown, ShutdownInProgress. */
const SHUTDOWN_CODES: ReadonlySet<number> = new Set([11600, 91]);

/**
 * A state change error found in a command reply.
 *
 * Source: as the module.
 */
export interface StateChangeError {
  /** The error document it was read from: the reply itself (`ok: 0`), or its `writeConcernError`. */
  readonly error: Document;
  /** Whether it is a "node is shutting down" error (code 91 or 11600), whose server's connections are all gone soon. */
  readonly shuttingDown: boolean;
  /**
   * The reply's `topologyVersion` (`{ processId, counter }`), else its error document's, when either has one of the
   * right shape (see `asTopologyVersion`).
   */
  readonly topologyVersion: Document | undefined;
}

/**
 * The state change error `reply` reports, if any: a reply whose `ok` is neither 1 nor true is checked by its `code`,
 * else (no code, or code 0) by its message, `errmsg` (a legacy reply's `$err` when it has none): "node is recovering"
 * or "not master or secondary": recovering; else "not master": not writable primary; a successful reply is checked
 * the same way by its `writeConcernError`.
 * `writeErrors` are never checked. Never throws.
 *
 * Source: as the module.
 */
export function stateChangeError(reply: Readonly<Document>): StateChangeError | undefined {
  const failed = !(reply.ok === 1 || reply.ok === true);
  const wce: unknown = reply.writeConcernError;
  const error = failed ? reply : wce !== null && typeof wce === 'object' ? (wce as Document) : undefined;
  if (error === undefined) return undefined;
  const code = typeof error.code === 'number' && error.code !== 0 ? error.code : undefined;
  const message = serverErrorMessage(error) ?? '';
  const isStateChange =
    code !== undefined
      ? RECOVERING_CODES.has(code) || NOT_WRITABLE_PRIMARY_CODES.has(code)
      : message.includes('node is recovering') || message.includes('not master'); // "not master or secondary" too
  if (!isStateChange) return undefined;
  const topologyVersion = asTopologyVersion(reply.topologyVersion ?? error.topologyVersion);
  return {
    error,
    shuttingDown: code !== undefined && SHUTDOWN_CODES.has(code),
    topologyVersion,
  };
}

/**
 * Whether an error carrying `errorVersion` says nothing newer than `currentVersion`, the topologyVersion of the
 * client's view of the server: both present, the same `processId`, and the error's `counter` not greater. Either
 * absent, or another processId (a restarted server), and the error counts as newer.
 *
 * Source: server discovery and monitoring spec, "Error handling pseudocode" (`isStaleError`: the current
 * topologyVersion compared with the error's is >= 0; `compareTopologyVersion`).
 */
export function isStaleTopologyVersion(currentVersion: Document | undefined, errorVersion: Document | undefined): boolean {
  return compareTopologyVersion(currentVersion, errorVersion) >= 0;
}

/**
 * Whether a check's reply carrying `replyVersion` is older than `currentVersion`, the topologyVersion of the
 * client's view of the server (e.g. of a state change error that came while the check was under way): both present,
 * the same `processId`, and the reply's `counter` smaller. Such a reply is ignored: the server stays as it was.
 *
 * Source: server discovery and monitoring spec, "topologyVersion Comparison" (a hello response is compared as a
 * State Change Error is), "Replacing the TopologyDescription" (`isStaleServerDescription`).
 */
export function isStaleServerDescription(currentVersion: Document | undefined, replyVersion: Document | undefined): boolean {
  return compareTopologyVersion(currentVersion, replyVersion) > 0;
}
