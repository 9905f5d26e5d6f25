/**
 * The unified test format's matching of an actual value against an expected one: root-level documents may hold
 * fields the expectation does not name, embedded documents may not; arrays match element by element and must have
 * the same length; numbers match by value whatever their BSON type; and the special operators `$$exists`, `$$type`,
 * `$$unsetOrMatches`, `$$matchAsDocument`, `$$matchAsRoot` and `$$lte`.
 *
 * Source: unified test format spec, "Evaluating Matches" ("Allowing Extra Fields", "Special Operators for Matching
 * Assertions").
 */
import { EJSON, type Document } from 'bson';

/** Why a value did not match: the path to it and what differs; undefined when it matches. */
export type Mismatch = string | undefined;

/** The numeric types that match by value ("Flexible Numeric Comparisons": Decimal128 is not one of them). */
const NUMERIC = new Set(['Int32', 'Double', 'Long']);

/** The special operators this matcher evaluates; any other `$$` operator is an error wherever it is. */
const OPERATORS = new Set(['$$exists', '$$type', '$$unsetOrMatches', '$$matchAsDocument', '$$matchAsRoot', '$$lte']);

/** The BSON type name (the `$type` aliases) of a value as bson's deserializer gives it. */
export function bsonTypeOf(value: unknown): string {
  if (value === null) return 'null';
  if (value === undefined) return 'undefined';
  if (typeof value === 'string') return 'string';
  if (typeof value === 'boolean') return 'bool';
  // A JS number lost its BSON type: an integral one is an int (a long beyond int32), a fractional one a double.
  if (typeof value === 'number') return Number.isInteger(value) ? (value >= -2147483648 && value <= 2147483647 ? 'int' : 'long') : 'double';
  if (typeof value === 'bigint') return 'long';
  if (Array.isArray(value)) return 'array';
  if (value instanceof Date) return 'date';
  if (value instanceof RegExp) return 'regex';
  if (value instanceof Uint8Array) return 'binData';
  const bsontype = (value as { _bsontype?: string })._bsontype;
  switch (bsontype) {
    case 'Int32':
      return 'int';
    case 'Double':
      return 'double';
    case 'Long':
      return 'long';
    case 'Decimal128':
      return 'decimal';
    case 'ObjectId':
      return 'objectId';
    case 'Binary':
      return 'binData';
    case 'Timestamp':
      return 'timestamp';
    case 'BSONRegExp':
      return 'regex';
    case 'MinKey':
      return 'minKey';
    case 'MaxKey':
      return 'maxKey';
    case 'Code':
      return 'javascript';
    default:
      return 'object';
  }
}

/** A number's value, for a JS number or a bson numeric wrapper; undefined for anything else. */
function numericValue(value: unknown): number | undefined {
  if (typeof value === 'number') return value;
  if (typeof value === 'bigint') return Number(value);
  const bsontype = (value as { _bsontype?: string } | null)?._bsontype;
  if (bsontype !== undefined && NUMERIC.has(bsontype)) return Number((value as { toString(): string }).toString());
  return undefined;
}

function isPlainDocument(value: unknown): value is Document {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && bsonTypeOf(value) === 'object';
}

/** The operator of an expectation that is a special operator (`{ $$name: argument }`), if it is one. */
function operatorOf(expected: unknown): string | undefined {
  if (!isPlainDocument(expected)) return undefined;
  const keys = Object.keys(expected);
  return keys.length === 1 && keys[0].startsWith('$$') ? keys[0] : undefined;
}

function show(value: unknown): string {
  try {
    return EJSON.stringify(value as Document, { relaxed: true });
  } catch {
    return String(value);
  }
}

/**
 * Whether `actual` matches `expected` by the unified format's rules; the first difference found otherwise.
 *
 * @param root whether `actual` is a root-level document (extra fields allowed); embedded documents are not.
 * @param path where the values are, for the message.
 */
export function match(expected: unknown, actual: unknown, root = true, path = ''): Mismatch {
  const operator = operatorOf(expected);
  if (operator !== undefined) return special(operator, (expected as Document)[operator], actual, root, path);
  const at = path === '' ? 'the value' : path;
  if (isPlainDocument(expected)) {
    if (!isPlainDocument(actual)) return `${at}: expected a document ${show(expected)}, got ${show(actual)}`;
    for (const [key, value] of Object.entries(expected)) {
      const inner = `${path}${path === '' ? '' : '.'}${key}`;
      const op = operatorOf(value);
      if (op !== undefined && !OPERATORS.has(op)) throw new Error(`${inner}: the special operator ${op} is not supported by this runner`);
      if (op === '$$exists' || op === '$$unsetOrMatches' || op === '$$type') {
        const mismatch = special(op, (value as Document)[op], actual[key], false, inner, Object.prototype.hasOwnProperty.call(actual, key) && actual[key] !== undefined);
        if (mismatch !== undefined) return mismatch;
        continue;
      }
      if (!Object.prototype.hasOwnProperty.call(actual, key) || actual[key] === undefined) return `${inner}: missing (expected ${show(value)})`;
      const mismatch = match(value, actual[key], false, inner);
      if (mismatch !== undefined) return mismatch;
    }
    if (!root) {
      for (const key of Object.keys(actual)) {
        if (actual[key] !== undefined && !Object.prototype.hasOwnProperty.call(expected, key)) return `${path}.${key}: not expected in an embedded document (${show(actual[key])})`;
      }
    }
    return undefined;
  }
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual)) return `${at}: expected an array ${show(expected)}, got ${show(actual)}`;
    if (actual.length !== expected.length) return `${at}: expected ${expected.length} elements, got ${actual.length} (${show(actual)})`;
    for (let i = 0; i < expected.length; i++) {
      const mismatch = match(expected[i], actual[i], false, `${path}[${i}]`);
      if (mismatch !== undefined) return mismatch;
    }
    return undefined;
  }
  const expectedNumber = numericValue(expected);
  if (expectedNumber !== undefined) {
    const actualNumber = numericValue(actual);
    return actualNumber === expectedNumber ? undefined : `${at}: expected ${expectedNumber}, got ${show(actual)}`;
  }
  if (expected === null) return actual === null ? undefined : `${at}: expected null, got ${show(actual)}`;
  if (typeof expected === 'string' || typeof expected === 'boolean') {
    return actual === expected ? undefined : `${at}: expected ${show(expected)}, got ${show(actual)}`;
  }
  return show(expected) === show(actual) ? undefined : `${at}: expected ${show(expected)}, got ${show(actual)}`;
}

/** A special operator's match; `present` tells whether the field exists, for those that read it. */
function special(operator: string, argument: unknown, actual: unknown, root: boolean, path: string, present = actual !== undefined): Mismatch {
  const at = path === '' ? 'the value' : path;
  switch (operator) {
    case '$$exists':
      return present === argument ? undefined : `${at}: expected ${argument === true ? 'to exist' : 'to be absent'}, ${present ? `got ${show(actual)}` : 'absent'}`;
    case '$$type': {
      if (!present) return `${at}: missing (expected type ${show(argument)})`;
      const names = (Array.isArray(argument) ? argument : [argument]) as string[];
      const type = bsonTypeOf(actual);
      const ok = names.some((name) => name === type || (name === 'number' && (type === 'int' || type === 'long' || type === 'double' || type === 'decimal')) || (name === 'long' && type === 'int' && typeof actual === 'number'));
      return ok ? undefined : `${at}: expected type ${show(argument)}, got ${type} (${show(actual)})`;
    }
    case '$$unsetOrMatches':
      return present ? match(argument, actual, root, path) : undefined;
    case '$$matchAsDocument': {
      if (typeof actual !== 'string') return `${at}: expected a string holding a document, got ${show(actual)}`;
      let parsed: unknown;
      try {
        parsed = EJSON.parse(actual, { relaxed: false });
      } catch {
        return `${at}: not a JSON document (${actual.slice(0, 100)})`;
      }
      return match(argument, parsed, false, path);
    }
    case '$$matchAsRoot':
      return match(argument, actual, true, path);
    case '$$lte': {
      const value = numericValue(actual);
      const bound = numericValue(argument);
      return value !== undefined && bound !== undefined && value <= bound ? undefined : `${at}: expected <= ${show(argument)}, got ${show(actual)}`;
    }
    default:
      throw new Error(`${at}: the special operator ${operator} is not supported by this runner`);
  }
}

/**
 * Whether `actual` equals `expected` exactly (a test's outcome: "The test runner MUST assert that the documents
 * match exactly", only the order of fields may differ): no extra field anywhere, no special operator (a `$$` key is
 * a field like any other), numbers of the same value and type.
 */
export function mismatchExactly(expected: unknown, actual: unknown, path = ''): Mismatch {
  const at = path === '' ? 'the value' : path;
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual)) return `${at}: expected an array ${show(expected)}, got ${show(actual)}`;
    if (actual.length !== expected.length) return `${at}: expected ${expected.length} elements, got ${actual.length} (${show(actual)})`;
    for (let i = 0; i < expected.length; i++) {
      const mismatch = mismatchExactly(expected[i], actual[i], `${path}[${i}]`);
      if (mismatch !== undefined) return mismatch;
    }
    return undefined;
  }
  if (isPlainDocument(expected)) {
    if (!isPlainDocument(actual)) return `${at}: expected a document ${show(expected)}, got ${show(actual)}`;
    for (const [key, value] of Object.entries(expected)) {
      const inner = `${path}${path === '' ? '' : '.'}${key}`;
      if (!Object.prototype.hasOwnProperty.call(actual, key) || actual[key] === undefined) return `${inner}: missing (expected ${show(value)})`;
      const mismatch = mismatchExactly(value, actual[key], inner);
      if (mismatch !== undefined) return mismatch;
    }
    for (const key of Object.keys(actual)) {
      if (actual[key] !== undefined && !Object.prototype.hasOwnProperty.call(expected, key)) return `${path}${path === '' ? '' : '.'}${key}: not expected (${show(actual[key])})`;
    }
    return undefined;
  }
  const expectedNumber = numericValue(expected);
  if (expectedNumber !== undefined) {
    const same = numericValue(actual) === expectedNumber && bsonTypeOf(actual) === bsonTypeOf(expected);
    return same ? undefined : `${at}: expected ${show(expected)} (${bsonTypeOf(expected)}), got ${show(actual)} (${bsonTypeOf(actual)})`;
  }
  return show(expected) === show(actual) && bsonTypeOf(expected) === bsonTypeOf(actual) ? undefined : `${at}: expected ${show(expected)}, got ${show(actual)}`;
}
