/**
 * How the pool asks a connection something. A connection comes from user code (a `connectionFactory`), so every
 * question may throw: the pool asks through these functions, which never throw, and decide what a connection that
 * cannot answer counts as. Nothing a connection does may stop the pool's reducer or leave a checkout unsettled.
 *
 * Source: CMAP spec, "Connection" (perished: errored; the pool closes a connection it cannot use); what a connection
 * that throws counts as: extension.
 */
import type { PoolConnection } from './contract';

/**
 * Whether `x` is a connection (an object with a `destroy` function), and, when `id` is given, the one with that id.
 * False for a value whose `destroy` or `id` cannot be read.
 */
export function isConnection(x: unknown, id?: number): x is PoolConnection {
  try {
    if (typeof x !== 'object' || x === null || typeof (x as PoolConnection).destroy !== 'function') return false;
    return id === undefined || (x as PoolConnection).id === id;
  } catch {
    return false;
  }
}

/** The `id` a connection carries, or undefined when it carries none or it cannot be read. */
export function idOf(connection: PoolConnection): unknown {
  try {
    return connection.id;
  } catch {
    return undefined;
  }
}

/** Whether `connection` says it is errored (`errored === true`); one whose `errored` cannot be read counts as errored. */
export function isErrored(connection: PoolConnection): boolean {
  try {
    return connection.errored === true;
  } catch {
    return true;
  }
}

/**
 * The service an establishment error names (`serviceId`, a 24-character hex string; see `CmapError.serviceId`), when
 * it names one and it can be read.
 */
export function serviceIdOfError(error: Error): string | undefined {
  try {
    return hexServiceId((error as { serviceId?: unknown }).serviceId);
  } catch {
    return undefined;
  }
}

/** The error `connection` says made it errored (`error`), when it is an Error and can be read. */
export function errorOf(connection: PoolConnection): Error | undefined {
  try {
    const error = connection.error;
    return error instanceof Error ? error : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Whether `connection` may have a request in flight: true when it says so, and, unless `finished` (its work is known
 * to have ended), also when it does not say it is idle (`busy === false`). One whose `busy` cannot be read counts as
 * busy.
 */
export function mayBeBusy(connection: PoolConnection, finished: boolean): boolean {
  try {
    const busy = connection.busy;
    return busy === true || (!finished && busy !== false);
  } catch {
    return true;
  }
}

/**
 * The `serviceId` a connection reports (a hex string in lower case, as `clear({ serviceId })` names it), or undefined
 * when it reports none or it cannot be read (the connection then joins the service with no id, as one whose handshake
 * reported none).
 */
export function serviceIdOf(connection: PoolConnection): string | undefined {
  try {
    const serviceId = connection.serviceId;
    return typeof serviceId === 'string' ? serviceKey(serviceId) : serviceId;
  } catch {
    return undefined;
  }
}

/**
 * The key of the service a connection names (its `serviceId`, or the one its factory gave `handshakeDone`): a hex
 * string in lower case, as `clear({ serviceId })` names it; any other string as it is.
 */
export function serviceKey(serviceId: string): string {
  return hexServiceId(serviceId) ?? serviceId;
}

/**
 * `value` as the key of a service: an ObjectId's 24-character hex string, in either case, written in lower case (as
 * `ObjectId.toHexString()` writes it); undefined for anything else.
 */
export function hexServiceId(value: unknown): string | undefined {
  return typeof value === 'string' && /^[0-9a-f]{24}$/i.test(value) ? value.toLowerCase() : undefined;
}

/**
 * Tears `connection` down with `error`; does nothing for a value that is not a connection, and swallows a throw, and
 * the rejection of a Promise (any thenable) `destroy` returns, which would otherwise be an unhandled rejection.
 */
export function destroyQuietly(connection: unknown, error?: Error): void {
  if (!isConnection(connection)) return;
  try {
    const result: unknown = connection.destroy(error);
    if (isPromiseLike(result)) result.then(undefined, ignore);
  } catch {
    // A connection that fails to tear itself down is already unusable; nothing more can be done for it.
  }
}

/**
 * Whether `x` is a Promise or another thenable (a factory's result, what `destroy` returned).
 *
 * @throws what reading `x.then` throws (a getter or a Proxy of user code); see {@link destroyWhenResolved}.
 */
export function isPromiseLike(x: unknown): x is PromiseLike<unknown> {
  return typeof (x as PromiseLike<unknown> | null)?.then === 'function';
}

/**
 * For an establishment abandoned before it emitted: when `input` (what the factory returned) is a Promise (any
 * thenable), the connection it resolves to is destroyed (quietly, see {@link destroyQuietly}) once it does, since a
 * Promise cannot be cancelled; its rejection is ignored. Does nothing for another value. Never throws: an `input`
 * whose `then` cannot be read or called (a getter of user code) counts as no Promise, so abandoning it (at `close()`)
 * never fails.
 */
export function destroyWhenResolved(input: unknown): void {
  try {
    if (isPromiseLike(input)) input.then((connection) => destroyQuietly(connection), ignore);
  } catch {
    // Not a thenable that can be used: nothing of it can be waited for.
  }
}

/** Does nothing: the handler of a Promise's outcome that is of no interest. */
export function ignore(): void {}
