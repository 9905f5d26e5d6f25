/**
 * The part of a document that its relaxed Extended JSON shows within a max length, so a log message writes a huge
 * server reply in time proportional to the max document length rather than to the reply.
 *
 * {@link documentPrefix} copies a document until a lower bound of the Extended JSON written so far passes the max
 * length, and leaves out what would come after: strings and Binary payloads are cut, further keys and elements are
 * dropped. The text of the copy agrees with the text of the whole document on every character before the max length,
 * so the naive truncation the logging spec asks for is unchanged; Extended JSON itself is still written by `bson`.
 *
 * Source: logging spec, "Configurable Max Document Length" (truncate the Extended JSON naively at the max length).
 * Bounding the work before truncation is an extension: the spec bounds the output only.
 */
import { Binary } from 'bson';

/**
 * A copy of `document` whose relaxed Extended JSON (`EJSON.stringify(copy, { relaxed: true })`) has the same first
 * `maxLength` UTF-16 code units as that of `document`, and is longer than `maxLength` exactly when that of
 * `document` is. Its size is O(`maxLength`) for plain objects, arrays, strings and Binary values, whatever the size
 * of `document` (objects with a huge number of keys still have their key list read once).
 *
 * Kept as they are (not cut): other BSON values, Dates, RegExps, Maps, functions, and objects with an own `toJSON`
 * method. A value that is cyclic within the max length is written as far as the max length, not refused.
 *
 * @param maxLength the max document length (UTF-16 code units), an integer ≥ 0.
 * @throws whatever reading `document` throws (a getter), or RangeError for a document nested deeper than the stack
 *   when `maxLength` is large.
 */
export function documentPrefix(document: unknown, maxLength: number): unknown {
  return new Pruner(maxLength).copy(document);
}

/** Binary subtype of a vector: its payload is validated when written, so it is never cut. */
const BINARY_SUBTYPE_VECTOR = 9;

class Pruner {
  /** A lower bound of the UTF-16 code units written before the value being copied. */
  private written = 0;

  constructor(private readonly maxLength: number) {}

  /** Whether everything written from now on falls after the max length. */
  private full(): boolean {
    return this.written > this.maxLength;
  }

  copy(value: unknown): unknown {
    switch (typeof value) {
      case 'string':
        return this.string(value);
      case 'object':
        if (value === null) break;
        if (Array.isArray(value)) return this.array(value);
        if (isPlainDocument(value)) return this.document(value);
        if (value instanceof Binary) return this.binary(value);
        if (!isWritten(value)) return value;
        break;
      case 'function':
      case 'symbol':
        return value;
    }
    this.written += 1; // every other value is written with one character at least
    return value;
  }

  /** A string is written quoted, each code unit as one character at least. */
  private string(value: string): string {
    const kept = this.maxLength + 1;
    this.written += 2 + Math.min(value.length, kept);
    // The characters cut off fall after the max length: the opening quote precedes them.
    return value.length > kept ? value.slice(0, kept) : value;
  }

  private array(value: readonly unknown[]): unknown[] {
    this.written += 1; // [
    const out: unknown[] = [];
    for (let i = 0; i < value.length && !this.full(); i++) {
      out.push(this.copy(value[i]));
      this.written += 1; // , or ]
    }
    return out;
  }

  private document(value: object): Record<string, unknown> {
    this.written += 1; // {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(value)) {
      if (this.full()) break;
      const field = (value as Record<string, unknown>)[key];
      if (isWritten(field)) this.written += key.length + 3; // "key":
      const copied = this.copy(field);
      // As bson writes it: a key `__proto__` is an own property, not the prototype.
      if (key === '__proto__') Object.defineProperty(out, key, { value: copied, writable: true, enumerable: true, configurable: true });
      else out[key] = copied;
    }
    return out;
  }

  /** A Binary's payload is written in base64: 4 characters per 3 bytes, so a cut at 3 bytes keeps a prefix. */
  private binary(value: Binary): Binary {
    const bytes = value.buffer;
    const kept = 3 * Math.ceil((this.maxLength + 1) / 4);
    if (value.sub_type === BINARY_SUBTYPE_VECTOR || bytes.length <= kept) {
      this.written += 1;
      return value;
    }
    this.written += (4 * kept) / 3;
    return new Binary(bytes.subarray(0, kept), value.sub_type);
  }
}

/**
 * Whether the Extended JSON of a document with `value` as a field is sure to write that field (a lower bound must
 * not count what JSON may leave out): primitives other than symbols, arrays, plain documents, Binary values, Dates
 * and RegExps. Functions and symbols are left out; other objects (BSON values of another bson copy, an own `toJSON`)
 * may be, so they are not counted.
 */
function isWritten(value: unknown): boolean {
  switch (typeof value) {
    case 'function':
    case 'symbol':
      return false;
    case 'object':
      return (
        value === null ||
        Array.isArray(value) ||
        isPlainDocument(value) ||
        value instanceof Binary ||
        value instanceof Date ||
        value instanceof RegExp
      );
    default:
      return true;
  }
}

/**
 * Whether bson writes `value` as a document of its own enumerable keys: an object that is not a BSON value, Date,
 * RegExp or Map, and whose own `toJSON` (which JSON would call instead) is not a function.
 */
function isPlainDocument(value: object): boolean {
  if ((value as { _bsontype?: unknown })._bsontype !== undefined) return false;
  if (value instanceof Date || value instanceof RegExp || value instanceof Map) return false;
  const tag = Object.prototype.toString.call(value);
  if (tag === '[object Date]' || tag === '[object RegExp]' || tag === '[object Map]') return false;
  return !Object.prototype.hasOwnProperty.call(value, 'toJSON') || typeof (value as { toJSON?: unknown }).toJSON !== 'function';
}
