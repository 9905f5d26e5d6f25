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
import { setOwnField } from '../own-field';

/**
 * A copy of `document` whose relaxed Extended JSON (`EJSON.stringify(copy, { relaxed: true })`) has the same first
 * `maxLength` UTF-16 code units as that of `document`, and is longer than `maxLength` exactly when that of
 * `document` is. Its size is O(`maxLength`) for plain objects, arrays, typed arrays, strings, keys and Binary values,
 * whatever the size of `document` (an object with a huge number of keys still has its key list read once).
 *
 * Kept as they are (not cut): other BSON values (a vector Binary, a BSONRegExp, Code and DBRef among them), Dates,
 * RegExps, Maps, functions, subclasses of Array, and objects with an own enumerable `toJSON` method. A value that is
 * cyclic within the max length is written as far as the max length, not refused.
 *
 * @param maxLength the max document length (UTF-16 code units), an integer ≥ 0.
 * @param omitted top-level keys left out of the copy (and never read), as if `document` did not have them: for a
 *   document written without some of its fields (a command without `lsid`, say), with no copy of it made first.
 * @throws whatever reading `document` throws (a getter), or RangeError for a document nested deeper than the stack
 *   when `maxLength` is large.
 */
export function documentPrefix(document: unknown, maxLength: number, omitted?: ReadonlySet<string>): unknown {
  const pruner = new Pruner(maxLength);
  if (omitted === undefined || kindOf(document) !== 'document') return pruner.copy(document);
  return pruner.document(document as object, Object.keys(document as object), omitted);
}

/** Binary subtype of a vector: its payload is validated when written, so it is never cut. */
const BINARY_SUBTYPE_VECTOR = 9;

/** How bson and JSON write a value, as far as the pruner needs to know. */
type Kind =
  | 'string'
  | 'array' // a plain Array: bson maps it to a plain Array
  | 'document' // written as a document of its own enumerable keys
  | 'indexed' // a typed array: a document whose keys are its indexes
  | 'binary'
  | 'written' // written with one character at least, not cut
  | 'unsure'; // perhaps not written at all (a function, a symbol, a toJSON): not counted, not cut

class Pruner {
  /** A lower bound of the UTF-16 code units written before the value being copied. */
  private written = 0;

  constructor(private readonly maxLength: number) {}

  /** Whether everything written from now on falls after the max length. */
  private full(): boolean {
    return this.written > this.maxLength;
  }

  copy(value: unknown, kind = kindOf(value)): unknown {
    switch (kind) {
      case 'string':
        return this.string(value as string);
      case 'array':
        return this.array(value as readonly unknown[]);
      case 'document':
        return this.document(value as object, Object.keys(value as object));
      case 'indexed':
        return this.indexed(value as ArrayLike<unknown> & object);
      case 'binary':
        return this.binary(value as Binary);
      case 'written':
        this.written += 1;
        return value;
      case 'unsure':
        return value;
    }
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

  /** The document `value` with its `keys` (but those `omitted`), as far as the max length. */
  document(value: object, keys: readonly string[], omitted?: ReadonlySet<string>): Record<string, unknown> {
    this.written += 1; // {
    const out: Record<string, unknown> = {};
    for (const key of keys) {
      if (this.full()) break;
      if (omitted?.has(key)) continue;
      const field = (value as Record<string, unknown>)[key];
      const kind = kindOf(field);
      const name = this.key(key);
      if (kind !== 'unsure') this.written += name.length + 3; // "key":
      const copied = this.copy(field, kind);
      // As bson writes it: a key `__proto__` is an own property, not the prototype.
      setOwnField(out, name, copied);
    }
    return out;
  }

  /**
   * A key longer than the max length is cut like a string (it is the last one copied: it fills the max length),
   * unless the cut would make it an array index, which objects order before their other keys.
   */
  private key(key: string): string {
    const kept = this.maxLength + 1;
    if (key.length <= kept) return key;
    const cut = key.slice(0, kept);
    return ARRAY_INDEX.test(cut) ? key : cut;
  }

  /** A typed array is written as a document keyed by its indexes (then any other own keys): only the shown ones are read. */
  private indexed(value: ArrayLike<unknown> & object): Record<string, unknown> {
    const length = value.length;
    const shown: string[] = [];
    // The indexes document() copies: as it counts, `{`, then `"i":` and one character for each element before.
    for (let i = 0, bound = this.written + 1; i < length && bound <= this.maxLength; i++) {
      const key = String(i);
      shown.push(key);
      bound += key.length + 4;
    }
    return this.document(value, shown.length < length ? shown : Object.keys(value));
  }

  /** A Binary's payload is written in base64: 4 characters per 3 bytes, so a cut at 3 bytes keeps a prefix. */
  private binary(value: Binary): Binary {
    const bytes: unknown = value.buffer;
    const kept = 3 * Math.ceil((this.maxLength + 1) / 4);
    const subType = value.sub_type;
    // A subtype outside a byte would change when a new Binary is made; a vector's cut payload would fail validation;
    // a Binary of another copy of bson without bytes as this one has them is left to it.
    if (!(bytes instanceof Uint8Array) || bytes.length <= kept || !Number.isInteger(subType) || subType < 0 || subType > 0xff || subType === BINARY_SUBTYPE_VECTOR) {
      this.written += 1;
      return value;
    }
    this.written += (4 * kept) / 3;
    return new Binary(bytes.subarray(0, kept), subType);
  }
}

/** A key that objects order first, ascending: an array index (a canonical integer below 2^32 − 1). */
const ARRAY_INDEX = /^(?:0|[1-9]\d{0,9})$/;

/**
 * How `value` is written (see {@link Kind}), following bson's order of checks: Maps (by their tag) first, then
 * arrays, Dates, RegExps, BSON values, and other objects as documents.
 */
function kindOf(value: unknown): Kind {
  switch (typeof value) {
    case 'string':
      return 'string';
    case 'function':
    case 'symbol':
      return 'unsure';
    case 'object':
      break;
    default:
      return 'written';
  }
  if (value === null) return 'written';
  if (value instanceof Map || tagOf(value) === '[object Map]') return 'unsure';
  if (Array.isArray(value)) return Object.getPrototypeOf(value) === Array.prototype ? 'array' : 'unsure';
  if (value instanceof Date || value instanceof RegExp) return 'written';
  const tag = tagOf(value);
  if (tag === '[object Date]' || tag === '[object RegExp]') return 'written';
  const bsonType = (value as { _bsontype?: unknown })._bsontype;
  // A BSON value is written by its toExtendedJSON (or bson throws, and there is nothing to agree with). A Binary is
  // known by its `_bsontype`, as bson knows it: one of another copy of bson (an ES module's) is no instance of this
  // one.
  if (bsonType !== undefined) return bsonType === 'Binary' ? 'binary' : 'written';
  // JSON calls an own enumerable toJSON instead of writing the document (bson copies only enumerable keys).
  if (Object.prototype.propertyIsEnumerable.call(value, 'toJSON') && typeof (value as { toJSON?: unknown }).toJSON === 'function') return 'unsure';
  return ArrayBuffer.isView(value) && !(value instanceof DataView) ? 'indexed' : 'document';
}

function tagOf(value: object): string {
  return Object.prototype.toString.call(value);
}
