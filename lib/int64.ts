/**
 * A 64-bit integer as a JavaScript number, when a number holds it exactly.
 */
import { Long } from 'bson';

/**
 * The number `value` is, when `value` is a 64-bit integer (a BSON `Long` of any copy of bson, or a bigint) within
 * ±(2^53 − 1) (`Number.MAX_SAFE_INTEGER`), where a number holds it exactly; undefined for one beyond, whose nearest
 * double would show other digits, and for any other value. Never throws.
 *
 * Source: extension (BSON spec, int64; a JavaScript number is a double).
 */
export function exactNumber(value: unknown): number | undefined {
  if (typeof value === 'bigint') return value <= MAX_SAFE_BIGINT && value >= -MAX_SAFE_BIGINT ? Number(value) : undefined;
  if (!Long.isLong(value)) return undefined;
  return value.lessThanOrEqual(Number.MAX_SAFE_INTEGER) && value.greaterThanOrEqual(Number.MIN_SAFE_INTEGER) ? value.toNumber() : undefined;
}

/** 2^53 − 1 as a bigint. */
const MAX_SAFE_BIGINT = BigInt(Number.MAX_SAFE_INTEGER);
