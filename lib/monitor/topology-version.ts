/**
 * topologyVersion: the `{ processId, counter }` a server (MongoDB 4.4+) puts in its hello replies and its state change
 * errors. `processId` is an ObjectId new at each server start; `counter`, an int64, grows with each change of the
 * server's state. The monitor sends it back in an awaitable hello; a client compares two of them to tell which says
 * something newer of the server.
 *
 * Source: server monitoring spec, "topologyVersion"; server discovery and monitoring spec, "topologyVersion
 * Comparison" (`compareTopologyVersion`).
 */
import { Long, type Document } from 'bson';

/**
 * A reply's topologyVersion as sent back in an awaitable hello (`processId` as received, `counter` as an int64, as the
 * server requires; frozen, its counter a frozen copy: the client keeps it in a server's description, which its
 * topology events give to any subscriber, and compares the next replies with it), or undefined when `value` has none
 * of the right shape (no `processId`, or a counter that is neither an int64 nor a safe integer).
 *
 * Source: as the module.
 */
export function asTopologyVersion(value: unknown): Document | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  const { processId, counter } = value as Document;
  if (processId === undefined) return undefined;
  // A copy of the reply's Long, frozen: its bits are writable fields, and the reply is the heartbeat event's.
  if (Long.isLong(counter)) return Object.freeze({ processId, counter: Object.freeze(Long.fromBits(counter.low, counter.high, counter.unsigned)) });
  if (typeof counter === 'number' && Number.isSafeInteger(counter)) return Object.freeze({ processId, counter: Object.freeze(Long.fromNumber(counter)) });
  return undefined;
}

/**
 * Compares two topologyVersions: -1 when `a` is older than `b`, or either is absent, or their processIds differ (a
 * restarted server: `b` is taken as newer), or a counter is not an integer; 0 when they are the same; 1 when `a` is
 * newer. Never throws.
 *
 * Source: as the module.
 */
export function compareTopologyVersion(a: Document | undefined, b: Document | undefined): -1 | 0 | 1 {
  if (a === undefined || b === undefined || !sameProcess(a.processId, b.processId)) return -1;
  const [x, y] = [asBigInt(a.counter), asBigInt(b.counter)];
  if (x === undefined || y === undefined || x < y) return -1;
  return x === y ? 0 : 1;
}

/** Whether two `processId`s (ObjectIds, or anything with the same `toHexString()`) are the same. */
function sameProcess(a: unknown, b: unknown): boolean {
  const hex = (v: unknown): string | undefined =>
    v !== null && typeof v === 'object' && typeof (v as { toHexString?: unknown }).toHexString === 'function' ? (v as { toHexString(): string }).toHexString() : undefined;
  const [x, y] = [hex(a), hex(b)];
  return x !== undefined && x === y;
}

/** A `counter` (an int64 as a bson Long, a number or a bigint) as a bigint; undefined for anything else. */
function asBigInt(value: unknown): bigint | undefined {
  if (typeof value === 'bigint') return value;
  if (typeof value === 'number') return Number.isSafeInteger(value) ? BigInt(value) : undefined;
  if (Long.isLong(value)) return BigInt(value.toString());
  return undefined;
}
