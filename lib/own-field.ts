/**
 * Writing a field whose name comes from data (a command's, a tag set's, a server reply's) into a plain object.
 *
 * Source: extension (JSON.parse, bson and an object spread keep a key `__proto__` as a field; an assignment does not).
 */

/**
 * Sets `target`'s own field `key` to `value`, enumerable, writable and configurable, as an assignment makes it. A key
 * `__proto__` is defined rather than assigned: assigned, it would set `target`'s prototype and the field would be
 * lost. Any other key is assigned (the fast path: a command's fields are copied this way on every command sent with a
 * read preference).
 */
export function setOwnField(target: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') Object.defineProperty(target, key, { value, writable: true, enumerable: true, configurable: true });
  else target[key] = value;
}
