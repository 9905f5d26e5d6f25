/**
 * Test support: the stored collections of an embedded deployment, for the unified test format's `initialData`,
 * CRUD operations and `outcome` checks. One {@link EmbeddedCollections} is one store (databases → collections →
 * documents) that any number of `EmbeddedServer`s of one deployment answer from, imitating mongod's commands.
 */
import { Binary, EJSON, Long, ObjectId, calculateObjectSize, type Document } from 'bson';
import type { EmbeddedServer } from '../../../lib/testing';

/** A reply with `ok: 0`, thrown by a command's parsing and answered as it is. */
class CommandFailure extends Error {
  constructor(readonly reply: Document) {
    super(String(reply.errmsg));
  }
}

const failure = (code: number, codeName: string, errmsg: string): CommandFailure => new CommandFailure({ ok: 0, errmsg, code, codeName });

/**
 * The write error of statement `index` that failed with `error` (`{ index, code, errmsg, ... }`, a write error's fields
 * of the refusal); any error but a {@link CommandFailure} is thrown again.
 */
function statementError(index: number, error: unknown): Document {
  if (!(error instanceof CommandFailure)) throw error;
  const { ok: _ok, codeName: _codeName, ...writeError } = error.reply;
  return { index, ...writeError };
}

/** BSON's type name of `value`, as mongod writes it in a TypeMismatch message. */
function typeName(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'int' : 'double';
  return typeof value === 'string' ? 'string' : typeof value === 'boolean' ? 'bool' : 'object';
}

/** The `field` of command `command` of type `type` (mongod's TypeMismatch 14, or 40414 when a required one is missing). */
function field(command: Document, name: string, key: string, type: 'string' | 'array' | 'object', required: boolean): unknown {
  const value: unknown = command[key];
  if (value === undefined && !required) return undefined;
  if (value === undefined) throw failure(40414, 'Location40414', `BSON field '${name}.${key}' is missing but a required field`);
  const actual = typeName(value);
  if (actual !== type) throw failure(14, 'TypeMismatch', `BSON field '${name}.${key}' is the wrong type '${actual}', expected type '${type}'`);
  return value;
}

/** mongod's canonical order of BSON types (MinKey, null, numbers, strings, objects, arrays, binData, ObjectId, ...). */
function rank(v: unknown): number {
  if (v === null || v === undefined) return 5;
  if (typeof v === 'number' || typeof v === 'bigint') return 10;
  if (typeof v === 'string') return 15;
  if (typeof v === 'boolean') return 40;
  if (Array.isArray(v)) return 25;
  if (v instanceof Date) return 45;
  if (v instanceof RegExp) return 50;
  const type = (v as { _bsontype?: string })._bsontype;
  const ranks: Record<string, number> = { MinKey: -1, Int32: 10, Double: 10, Long: 10, Decimal128: 10, BSONSymbol: 15, Binary: 30, ObjectId: 35, Timestamp: 47, BSONRegExp: 50, Code: 60, MaxKey: 127 };
  return type === undefined ? 20 : (ranks[type] ?? 20);
}

/** A number's value whatever its BSON type (Int32, Double, Long, Decimal128; a Long beyond 2^53 loses precision). */
const numeric = (v: unknown): number => (typeof v === 'number' ? v : Number(typeof v === 'bigint' ? v : String(v)));

/**
 * Test support imitating mongod's comparison of two BSON values (< 0, 0, > 0), as its filters and sorts use it: by
 * type in mongod's canonical order, then value; numbers by value whatever their type (Int32, Double, Long,
 * Decimal128); documents field by field (name, then value: key order counts), arrays element by element; a missing
 * value (undefined) counts as null. Strings compare by UTF-16 code unit (mongod: by byte, the same for BMP text).
 */
export function compareValues(a: unknown, b: unknown): number {
  const ra = rank(a);
  const rb = rank(b);
  if (ra !== rb) return ra - rb;
  switch (ra) {
    case 5: case -1: case 127: return 0;
    case 10: return Math.sign(numeric(a) - numeric(b));
    case 15: { const [x, y] = [String(a), String(b)]; return x < y ? -1 : x > y ? 1 : 0; }
    case 25: return compareLists(a as unknown[], b as unknown[]);
    case 20: return compareLists(Object.entries(a as Document).flat(), Object.entries(b as Document).flat());
    case 30: return (a as Binary).length() - (b as Binary).length() || (a as Binary).sub_type - (b as Binary).sub_type || Buffer.compare(bytes(a as Binary), bytes(b as Binary));
    case 35: return Buffer.compare(Buffer.from((a as ObjectId).id), Buffer.from((b as ObjectId).id));
    case 40: return Number(a) - Number(b);
    case 45: return Math.sign((a as Date).getTime() - (b as Date).getTime());
    case 47: return (a as Long).compare(b as Long);
    default: { const [x, y] = [EJSON.stringify(a as Document), EJSON.stringify(b as Document)]; return x < y ? -1 : x > y ? 1 : 0; }
  }
}

function compareLists(a: unknown[], b: unknown[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const c = compareValues(a[i], b[i]);
    if (c !== 0) return c;
  }
  return a.length - b.length;
}

/** The bytes a Binary holds (its `buffer` may be longer). */
const bytes = (b: Binary): Buffer => Buffer.from(b.read(0, b.length()));

/** A deep copy of a stored value: documents and arrays copied, Binary and Date copied, other BSON values shared (immutable). */
function copy<T>(v: T): T {
  if (Array.isArray(v)) return v.map(copy) as T;
  if (v instanceof Date) return new Date(v.getTime()) as T;
  if (v instanceof Binary) return new Binary(bytes(v), v.sub_type) as T;
  if (v === null || typeof v !== 'object' || (v as { _bsontype?: string })._bsontype !== undefined || v instanceof RegExp) return v;
  const out: Document = {};
  for (const [k, x] of Object.entries(v)) out[k] = copy(x);
  return out as T;
}

const isOperatorDocument = (v: unknown): v is Document =>
  v !== null && typeof v === 'object' && !Array.isArray(v) && rank(v) === 20 && Object.keys(v).length > 0 && Object.keys(v)[0].startsWith('$');

/** Whether `value` (an array: any element, or itself) satisfies `test`, as mongod matches a field holding an array. */
const anyOf = (value: unknown, test: (v: unknown) => boolean): boolean => test(value) || (Array.isArray(value) && value.some(test));

/** Whether one field's `value` matches its filter `condition` (a value, or operators). BadValue 2 for an unknown one. */
function matchesCondition(value: unknown, condition: unknown): boolean {
  if (!isOperatorDocument(condition)) return anyOf(value, (v) => compareValues(v, condition) === 0);
  return Object.entries(condition).every(([op, operand]) => {
    const sameTypeCompare = (ok: (c: number) => boolean) => anyOf(value, (v) => v !== undefined && rank(v) === rank(operand) && ok(compareValues(v, operand)));
    switch (op) {
      case '$eq': return matchesCondition(value, operand);
      case '$ne': return !matchesCondition(value, operand);
      case '$gt': return sameTypeCompare((c) => c > 0);
      case '$gte': return sameTypeCompare((c) => c >= 0);
      case '$lt': return sameTypeCompare((c) => c < 0);
      case '$lte': return sameTypeCompare((c) => c <= 0);
      case '$exists': return (value !== undefined) === Boolean(operand);
      case '$in': case '$nin': {
        if (!Array.isArray(operand)) throw failure(2, 'BadValue', `${op} needs an array`);
        return operand.some((o) => matchesCondition(value, o)) === (op === '$in');
      }
      default: throw failure(2, 'BadValue', `unknown operator: ${op}`);
    }
  });
}

/**
 * Whether `doc` matches `filter`: per top-level field, equality (with an array field: any element) or the operators
 * `$eq $ne $gt $gte $lt $lte $in $nin $exists`; `$and` / `$or` of filters; `$where` only as `sleep(<ms>) || true`
 * (see {@link whereSleepMS}). Others (`$expr`, any other `$where`; dotted paths are taken as plain names) are not
 * supported: an unknown top-level operator is mongod's BadValue 2 ("unknown top level operator").
 */
function matches(doc: Document, filter: Document): boolean {
  return Object.entries(filter).every(([name, condition]) => {
    if (name === '$and' || name === '$or') {
      if (!Array.isArray(condition) || condition.length === 0) throw failure(2, 'BadValue', '$and/$or/$nor must be a nonempty array');
      const sub = (f: unknown) => matches(doc, f as Document);
      return name === '$and' ? condition.every(sub) : condition.some(sub);
    }
    if (name === '$where' && whereSleepMS(condition) !== undefined) return true;
    if (name.startsWith('$')) throw failure(2, 'BadValue', `unknown top level operator: ${name}`);
    return matchesCondition(doc[name], condition);
  });
}

/**
 * Refuses a filter mongod refuses, as it does, while parsing it before any document is read (an empty collection
 * too): an `$and`/`$or` that is not a nonempty array, an unknown top-level operator, an unknown field operator, an
 * `$in`/`$nin` without an array; BadValue 2 each (see {@link matches}).
 */
function checkFilter(filter: Document): void {
  for (const [name, condition] of Object.entries(filter)) {
    if (name === '$and' || name === '$or') {
      if (!Array.isArray(condition) || condition.length === 0) throw failure(2, 'BadValue', '$and/$or/$nor must be a nonempty array');
      for (const sub of condition) checkFilter(sub as Document);
    } else if (name.startsWith('$') && !(name === '$where' && whereSleepMS(condition) !== undefined)) {
      throw failure(2, 'BadValue', `unknown top level operator: ${name}`);
    } else if (isOperatorDocument(condition)) {
      for (const [op, operand] of Object.entries(condition)) {
        if (!['$eq', '$ne', '$gt', '$gte', '$lt', '$lte', '$exists', '$in', '$nin'].includes(op)) throw failure(2, 'BadValue', `unknown operator: ${op}`);
        if ((op === '$in' || op === '$nin') && !Array.isArray(operand)) throw failure(2, 'BadValue', `${op} needs an array`);
      }
    }
  }
}

/**
 * The ms of a `$where` of the one form the unified tests use to hold a command on the server (`sleep(<ms>) || true`,
 * a string or Code): mongod runs it per document examined, matching every one. Undefined for any other `$where`.
 */
function whereSleepMS(where: unknown): number | undefined {
  const code = typeof where === 'string' ? where : (where as { _bsontype?: string; code?: unknown } | null)?._bsontype === 'Code' ? String((where as { code: unknown }).code) : '';
  const sleep = /^\s*sleep\((\d+)\)\s*\|\|\s*true\s*$/.exec(code);
  return sleep === null ? undefined : Number(sleep[1]);
}

/** mongod's `E11000` message and write error for a duplicate `_id` in namespace `ns`. */
function duplicateKey(index: number, ns: string, id: unknown): Document {
  const shown = typeof id === 'string' ? JSON.stringify(id) : id instanceof ObjectId ? `ObjectId('${id.toHexString()}')` : EJSON.stringify({ v: id as Document }).slice(5, -1);
  return { index, code: 11000, errmsg: `E11000 duplicate key error collection: ${ns} index: _id_ dup key: { _id: ${shown} }`, keyPattern: { _id: 1 }, keyValue: { _id: id } };
}

/** `doc` after update `u` (`$set`, `$inc`, `$unset` on top-level fields, or a replacement keeping `_id`). */
function applyUpdate(doc: Document, u: Document): Document {
  const keys = Object.keys(u);
  if (keys.length === 0 || !keys[0].startsWith('$')) return doc._id === undefined ? copy(u) : { _id: doc._id, ...copy(u) };
  const out = copy(doc);
  for (const [op, fields] of Object.entries(u)) {
    if (!['$set', '$inc', '$unset'].includes(op)) {
      throw failure(9, 'FailedToParse', `Unknown modifier: ${op}. Expected a valid update modifier or pipeline-style update specified as an array`);
    }
    for (const [name, v] of Object.entries(fields as Document)) {
      if (op === '$set') out[name] = copy(v);
      else if (op === '$unset') delete out[name];
      else if (rank(v) !== 10) throw failure(14, 'TypeMismatch', `Cannot increment with non-numeric argument: {${name}: ${EJSON.stringify(v as Document)}}`);
      else if (out[name] === undefined) out[name] = v;
      else if (rank(out[name]) !== 10) throw failure(14, 'TypeMismatch', `Cannot apply $inc to a value of non-numeric type. {_id: ${EJSON.stringify(doc._id)}} has the field '${name}' of non-numeric type ${typeName(out[name])}`);
      else out[name] = numeric(out[name]) + numeric(v);
    }
  }
  return out;
}

/** The stages an update pipeline may have (mongod's: `$addFields`, `$set`, `$project`, `$unset`, `$replaceRoot`, `$replaceWith`). */
const UPDATE_PIPELINE_STAGES = ['$addFields', '$set', '$project', '$unset', '$replaceRoot', '$replaceWith'];

/**
 * `doc` with the top-level fields of an inclusion projection (`{ a: 1 }`, `{ _id: 1 }`: `_id` kept unless `_id: 0`), or
 * without those of an exclusion projection (`{ a: 0 }`, `{ _id: 0 }`). A projection that both includes and excludes a
 * field other than `_id` is refused as mongod refuses it (Location31254 / Location31253).
 */
function project(doc: Document, projection: Document): Document {
  const entries = Object.entries(projection);
  const includes = (v: unknown): boolean => v === true || (rank(v) === 10 && numeric(v) !== 0);
  const fields = entries.filter(([name]) => name !== '_id');
  const inclusion = fields.length === 0 ? entries.some(([, v]) => includes(v)) : includes(fields[0]![1]);
  const mixed = fields.find(([, v]) => includes(v) !== inclusion);
  if (mixed !== undefined) {
    throw inclusion
      ? failure(31254, 'Location31254', `Cannot do exclusion on field ${mixed[0]} in inclusion projection`)
      : failure(31253, 'Location31253', `Cannot do inclusion on field ${mixed[0]} in exclusion projection`);
  }
  if (!inclusion) return Object.fromEntries(Object.entries(doc).filter(([name]) => !entries.some(([p, v]) => p === name && !includes(v))));
  const keep = new Set(entries.filter(([, v]) => includes(v)).map(([name]) => name));
  if (!entries.some(([name, v]) => name === '_id' && !includes(v))) keep.add('_id');
  return Object.fromEntries(Object.entries(doc).filter(([name]) => keep.has(name)));
}

/**
 * The documents of one deployment's databases, served by any number of its `EmbeddedServer`s (a replica set's
 * members, a few mongoses): a write through one is read through all. Test support imitating mongod's CRUD and DDL
 * commands over plain in-memory arrays (a linear scan per lookup: for test-sized data). Two instances share nothing.
 */
export class EmbeddedCollections {
  /** db name → collection name → documents, in insertion (natural) order. */
  private readonly databases = new Map<string, Map<string, Document[]>>();
  /** The open cursors (a find's results beyond its first batch), by id, each on the server that opened it (as on mongod: another server does not know it). */
  private readonly cursors = new Map<bigint, { readonly ns: string; readonly rest: Document[]; readonly server: EmbeddedServer }>();
  private lastCursorId = 0n;

  /**
   * Answers, on `server`, these commands from this store, each as mongod does (replies with `ok: 1`, or `ok: 0`,
   * `errmsg`, `code`, `codeName` for what mongod refuses in commonly wrong input: a required field missing 40414, a
   * field of the wrong type TypeMismatch 14, an empty collection name InvalidNamespace 73, an unknown query operator
   * BadValue 2; per-statement errors of insert/update come as `writeErrors` `{ index, code, errmsg }`, the rest of an
   * ordered batch not run):
   * - `insert` (`documents`, `ordered`): `{ n, writeErrors? }`; a missing `_id` becomes a new ObjectId; a duplicate
   *   `_id` is E11000 (code 11000, `keyPattern`, `keyValue`);
   * - a filter (find, count, update, delete) of top-level fields, compared in mongod's BSON order (see {@link matches}); a
   *   `$where: 'sleep(<ms>) || true'` holds the command `<ms>` per document of its collection first, as mongod
   *   evaluates it per document, and matches all (the unified tests' long-running operation);
   * - `find` (`filter`, `sort`, `skip`, `limit`, `projection` of top-level fields, `batchSize`, `returnKey`,
   *   `showRecordId`; `hint`, `min`, `max`, `comment`, `maxTimeMS` accepted and not applied): `{ cursor: { firstBatch,
   *   id, ns }, ok: 1 }`, natural order without `sort`, every match in the first batch (id 0) unless `batchSize` is
   *   not larger (a first batch filled to `batchSize` leaves the cursor open, as mongod's; `batchSize: 0` opens it with
   *   an empty first batch; `singleBatch` never does; a negative `limit` is Location51024; a projection both including
   *   and excluding is Location31254 / 31253); `getMore` (`batchSize`, positive or BadValue 2) reads the rest
   *   (CursorNotFound 43 for an unknown id or one another server opened: cursors are each server's own, as on
   *   mongod), `killCursors` closes cursors; `returnKey` gives the `_id` index's key
   *   when the query uses it (hinted, sorted or filtered on `_id`), else `{}`; `showRecordId` a document's place in
   *   natural order as `$recordId`;
   * - `update` (`updates: [{ q, u, multi, upsert }]`; `u`: `$set`/`$inc`/`$unset` or a replacement):
   *   `{ n, nModified, upserted?: [{ index, _id }] }`;
   * - `delete` (`deletes: [{ q, limit: 0 | 1 }]`): `{ n }`; `count` (`query`): `{ n }`;
   * - `bulkWrite` (MongoDB 8.0, on admin only, else Unauthorized 13; `ops` of `insert` / `update` / `delete` naming
   *   `nsInfo` entries, `ordered`, `errorsOnly`): `{ cursor: { firstBatch: [{ ok, idx, n, nModified?, upserted? }],
   *   id: 0 (int64), ns: 'admin.$cmd.bulkWrite' }, nErrors, nInserted, nUpserted, nMatched, nModified, nDeleted }`, a
   *   failed statement's entry `{ ok: 0, idx, code, errmsg }` (where an endpoint without it answered `{ ok: 1 }` and
   *   wrote nothing); every entry in the first batch;
   * - `drop` (`{ nIndexesWas: 1, ns }`; `{ ok: 1 }` for a missing collection, as mongod 7.0+, where older ones
   *   answer NamespaceNotFound 26), `create` (ok when it exists, as mongod with identical options: options are not kept);
   * - `listDatabases` (`{ databases: [{ name, sizeOnDisk, empty }], totalSize, totalSizeMb }`; `nameOnly`: names only;
   *   only databases holding a collection here), `listCollections` (a cursor of `{ name, type: 'collection' }`).
   * The endpoint's refusals (API parameters, a secondary's NotWritablePrimary / NotPrimaryNoSecondaryOk, then the
   * `failCommand` fail point, then authentication) come before these handlers: a refused or failed command changes
   * nothing; the fail point's `writeConcernError` is added to a reply after the write was stored, as on mongod.
   * Update pipelines (`u` an array) are refused with TypeMismatch 14, where mongod runs them (a stage mongod does not
   * know fails the command, Location40324, as on mongod). A delete's filter mongod cannot parse is its statement's
   * write error. `createUser` / `updateUser` check their fields' types and change no user.
   * Sessions are not kept (no unified test run here uses one): a write's `lsid` and `txnNumber` are not read (a
   * retried write runs again), nor are transactions (a statement with `autocommit: false` is stored at once;
   * `commitTransaction` and `abortTransaction` get the endpoint's `{ ok: 1 }` for a command it has no handler for).
   */
  serve(server: EmbeddedServer): void {
    const commands: Record<string, (c: Document, db: string) => Document> = {
      insert: (c, db) => this.insert(c, db),
      find: (c, db) => this.find(c, db, server),
      getMore: (c, db) => this.getMore(c, db, server),
      killCursors: (c, db) => this.killCursors(c, db, server),
      update: (c, db) => this.update(c, db),
      delete: (c, db) => this.delete(c, db),
      bulkWrite: (c, db) => this.bulkWrite(c, db, server),
      count: (c, db) => ({ n: this.select(db, this.name(c, 'count'), (field(c, 'count', 'query', 'object', false) ?? {}) as Document).length, ok: 1 }),
      drop: (c, db) => this.drop(c, db),
      create: (c, db) => (this.collection(db, this.name(c, 'create'), true), { ok: 1 }),
      listDatabases: (c) => this.listDatabases(c),
      listCollections: (c, db) => this.listCollections(c, db),
      createUser: (c) => this.userCommand(c, 'createUser'),
      updateUser: (c) => this.userCommand(c, 'updateUser'),
    };
    for (const [name, run] of Object.entries(commands)) {
      server.handle(name, async (command) => {
        try {
          const db = String(command.$db);
          // A `$where: 'sleep(<ms>) || true'` filter holds the command its ms per document of the collection, then runs it.
          const statements = [command.filter, command.query, ...[command.updates, command.deletes].flatMap((s: unknown) => (Array.isArray(s) ? s.map((x: Document) => x?.q) : []))];
          const sleepMS = statements.reduce((sum: number, f: Document | undefined) => sum + (whereSleepMS(f?.$where) ?? 0), 0);
          const scanned = this.collection(db, String(command[Object.keys(command)[0]]), false)?.length ?? 0;
          if (sleepMS > 0) await new Promise((resolve) => setTimeout(resolve, sleepMS * scanned));
          return run(command, db);
        } catch (error) {
          if (error instanceof CommandFailure) return error.reply;
          throw error;
        }
      });
    }
  }

  /** Replaces the documents of `db`.`collection` with copies of `documents` (the collection made when missing). */
  set(db: string, collection: string, documents: Document[]): void {
    this.collection(db, collection, true)!.splice(0, Infinity, ...documents.map(copy));
  }

  /**
   * Copies of the documents of `db`.`collection` (none for a missing one), in ascending `_id` order: the order the
   * unified format's `outcome` check reads them in (a find sorted `{ _id: 1 }`) and lists them.
   */
  documents(db: string, collection: string): Document[] {
    return (this.collection(db, collection, false) ?? []).map(copy).sort((a, b) => compareValues(a._id, b._id));
  }

  /** The collection named by command `name`'s first field: a string (TypeMismatch 14), not empty (InvalidNamespace 73). */
  private name(command: Document, name: string): string {
    const coll = field(command, name, Object.keys(command)[0], 'string', true) as string;
    if (coll === '') throw failure(73, 'InvalidNamespace', `Invalid namespace specified '${String(command.$db)}.'`);
    return coll;
  }

  private collection(db: string, name: string, create: boolean): Document[] | undefined {
    let database = this.databases.get(db);
    if (database === undefined && create) this.databases.set(db, (database = new Map()));
    let docs = database?.get(name);
    if (docs === undefined && create) database!.set(name, (docs = []));
    return docs;
  }

  /** The stored documents (not copies) of `db`.`coll` matching `filter`, in natural order. */
  private select(db: string, coll: string, filter: Document): Document[] {
    checkFilter(filter);
    return (this.collection(db, coll, false) ?? []).filter((d) => matches(d, filter));
  }

  private insert(command: Document, db: string): Document {
    const coll = this.name(command, 'insert');
    const documents = field(command, 'insert', 'documents', 'array', true) as unknown[];
    const docs = this.collection(db, coll, true)!;
    const writeErrors: Document[] = [];
    let n = 0;
    for (const [index, given] of documents.entries()) {
      const doc = copy(given as Document);
      const added = doc._id === undefined ? { _id: new ObjectId(), ...doc } : doc;
      if (docs.some((d) => compareValues(d._id, added._id) === 0)) {
        writeErrors.push(duplicateKey(index, `${db}.${coll}`, added._id));
        if (command.ordered !== false) break;
      } else {
        docs.push(added);
        n++;
      }
    }
    return { n, ...(writeErrors.length > 0 ? { writeErrors } : {}), ok: 1 };
  }

  private find(command: Document, db: string, server: EmbeddedServer): Document {
    const coll = this.name(command, 'find');
    const filter = (field(command, 'find', 'filter', 'object', false) ?? {}) as Document;
    const sortSpec = (field(command, 'find', 'sort', 'object', false) ?? {}) as Document;
    const projection = field(command, 'find', 'projection', 'object', false) as Document | undefined;
    const hint = command.hint as unknown;
    const sort = Object.entries(sortSpec);
    const stored = this.collection(db, coll, false) ?? [];
    // A document's record id is its own, whatever the sort or skip: its place in natural order here (mongod's grows
    // with each insert and is kept across updates).
    const recordIds = new Map<Document, number>();
    const found = this.select(db, coll, filter).map((doc) => {
      const copied = copy(doc);
      recordIds.set(copied, stored.indexOf(doc) + 1);
      return copied;
    });
    if (sort.length > 0) {
      found.sort((a, b) => sort.reduce((c, [name, dir]) => c || compareValues(a[name], b[name]) * (Number(dir) < 0 ? -1 : 1), 0));
    }
    const skip = Number(command.skip ?? 0);
    const limit = Number(command.limit ?? 0);
    // mongod's find command takes no negative limit (a driver sends a negative one as its absolute value with singleBatch).
    if (limit < 0) throw failure(51024, 'Location51024', `BSON field 'limit' value must be >= 0, actual value '${limit}'`);
    // The projection is parsed before any document is read.
    if (projection !== undefined) project({}, projection);
    // The only index is _id's: a query that uses it (hinted, sorted or filtered on _id) returns its key, others none.
    const usesIdIndex = (typeof hint === 'object' && hint !== null && '_id' in hint) || sort[0]?.[0] === '_id' || '_id' in filter;
    const results = found.slice(skip, limit > 0 ? skip + limit : undefined).map((doc) => {
      if (command.returnKey === true) return usesIdIndex ? { _id: doc._id } : {};
      const shown = projection === undefined ? doc : project(doc, projection);
      return command.showRecordId === true ? { ...shown, $recordId: Long.fromNumber(recordIds.get(doc)!) } : shown;
    });
    const ns = `${db}.${coll}`;
    if (command.singleBatch === true) {
      const size = Number(command.batchSize ?? 0);
      return { cursor: { firstBatch: size > 0 ? results.slice(0, size) : results, id: Long.fromNumber(0), ns }, ok: 1 };
    }
    // A batchSize of 0 opens the cursor with an empty first batch (mongod runs nothing yet); a first batch filled to
    // batchSize leaves the cursor open, the results all read or not (the limit too: CRUD spec, "Setting limit and
    // batchSize options for find commands"); a getMore then finds the rest, or nothing.
    if (command.batchSize !== undefined && Number(command.batchSize) === 0 && results.length > 0) {
      this.cursors.set(++this.lastCursorId, { ns, rest: results, server });
      return { cursor: { firstBatch: [], id: Long.fromBigInt(this.lastCursorId), ns }, ok: 1 };
    }
    return { cursor: this.open(server, ns, results, command.batchSize, 'firstBatch', 0n, true), ok: 1 };
  }

  /**
   * A cursor document over `results`: all of them in one batch (id 0), or the first `batchSize` (a number above 0)
   * with an id for getMore to read the rest from (`id`: the cursor's, for a getMore's batch). With `openWhenFull`, a
   * batch of exactly `batchSize` keeps the cursor open with nothing left, as mongod's first batch does.
   */
  private open(server: EmbeddedServer, ns: string, results: Document[], batchSize: unknown, batch: 'firstBatch' | 'nextBatch', id = 0n, openWhenFull = false): Document {
    const size = Number(batchSize ?? 0);
    if (!(size > 0) || results.length < size || (results.length === size && !openWhenFull)) return { [batch]: results, id: Long.fromNumber(0), ns };
    const cursorId = id === 0n ? ++this.lastCursorId : id;
    this.cursors.set(cursorId, { ns, rest: results.slice(size), server });
    return { [batch]: results.slice(0, size), id: Long.fromBigInt(cursorId), ns };
  }

  /**
   * `getMore` (a cursor id of this store's, `collection`, `batchSize`: positive, else BadValue 2 as on mongod): the next
   * batch; CursorNotFound 43 for another id, or for a cursor another server opened (a driver sends a cursor's getMore
   * to the server it came from).
   */
  private getMore(command: Document, db: string, server: EmbeddedServer): Document {
    // The endpoint reads a long that fits in a double as a number: either is the id.
    const given: unknown = command.getMore;
    const id = Long.isLong(given) ? given.toBigInt() : Number.isSafeInteger(given) ? BigInt(given as number) : undefined;
    if (id === undefined) throw failure(14, 'TypeMismatch', `Field 'getMore' must be of type long in: ${EJSON.stringify(command)}`);
    if (command.batchSize !== undefined && !(Number(command.batchSize) > 0)) throw failure(2, 'BadValue', `Batch size for getMore must be positive, but received: ${String(command.batchSize)}`);
    const coll = field(command, 'getMore', 'collection', 'string', true) as string;
    const cursor = this.cursors.get(id);
    if (cursor === undefined || cursor.ns !== `${db}.${coll}` || cursor.server !== server) throw failure(43, 'CursorNotFound', `cursor id ${id} not found`);
    this.cursors.delete(id);
    return { cursor: this.open(server, cursor.ns, cursor.rest, command.batchSize ?? cursor.rest.length, 'nextBatch', id), ok: 1 };
  }

  /** `killCursors` (the collection, `cursors`: ids): each of this store's on that collection closed; others not found. */
  private killCursors(command: Document, db: string, server: EmbeddedServer): Document {
    const ns = `${db}.${this.name(command, 'killCursors')}`;
    const ids = field(command, 'killCursors', 'cursors', 'array', true) as unknown[];
    const kill = (id: bigint): boolean => this.cursors.get(id)?.ns === ns && this.cursors.get(id)?.server === server && this.cursors.delete(id);
    const killed = ids.filter((id) => (Long.isLong(id) ? kill(id.toBigInt()) : Number.isSafeInteger(id) && kill(BigInt(id as number))));
    return { cursorsKilled: killed, cursorsNotFound: ids.filter((id) => !killed.includes(id)), cursorsAlive: [], cursorsUnknown: [], ok: 1 };
  }

  private update(command: Document, db: string): Document {
    const coll = this.name(command, 'update');
    const updates = field(command, 'update', 'updates', 'array', true) as Document[];
    // A pipeline's stages are parsed with the command: an unknown one fails it whole, as on mongod.
    for (const statement of updates) {
      if (!Array.isArray(statement?.u)) continue;
      for (const stage of statement.u as unknown[]) {
        const name = typeof stage === 'object' && stage !== null ? Object.keys(stage)[0] : undefined;
        if (name === undefined || !UPDATE_PIPELINE_STAGES.includes(name)) throw failure(40324, 'Location40324', `Unrecognized pipeline stage name: '${String(name)}'`);
      }
    }
    const docs = this.collection(db, coll, true)!;
    const writeErrors: Document[] = [];
    const upserted: Document[] = [];
    let n = 0;
    let nModified = 0;
    for (const [index, statement] of updates.entries()) {
      try {
        const q = field(statement, 'update.updates', 'q', 'object', true) as Document;
        const u = field(statement, 'update.updates', 'u', 'object', true) as Document;
        const replacement = Object.keys(u).length === 0 || !Object.keys(u)[0].startsWith('$');
        if (replacement && statement.multi === true) throw failure(9, 'FailedToParse', 'multi update is not supported for replacement-style update');
        const targets = this.select(db, coll, q).slice(0, statement.multi === true ? undefined : 1);
        // Each statement is all or nothing: every target is computed before any is stored.
        const results = targets.map((doc) => {
          const after = applyUpdate(doc, u);
          if (compareValues(after._id, doc._id) !== 0) {
            throw failure(66, 'ImmutableField', `After applying the update, the (immutable) field '_id' was found to have been altered to _id: ${EJSON.stringify(after._id)}`);
          }
          return after;
        });
        if (targets.length === 0 && statement.upsert === true) {
          const seed: Document = {};
          for (const [name, v] of Object.entries(q)) if (!name.startsWith('$') && !isOperatorDocument(v)) seed[name] = copy(v);
          const created = applyUpdate(seed, u);
          const doc = created._id === undefined ? { _id: new ObjectId(), ...created } : created;
          if (docs.some((d) => compareValues(d._id, doc._id) === 0)) throw new CommandFailure(duplicateKey(index, `${db}.${coll}`, doc._id));
          docs.push(doc);
          upserted.push({ index, _id: doc._id });
          n++;
        }
        targets.forEach((doc, i) => {
          n++;
          if (compareValues(doc, results[i]) !== 0) nModified++;
          docs[docs.indexOf(doc)] = results[i];
        });
      } catch (error) {
        writeErrors.push(statementError(index, error));
        if (command.ordered !== false) break;
      }
    }
    return { n, nModified, ...(upserted.length > 0 ? { upserted } : {}), ...(writeErrors.length > 0 ? { writeErrors } : {}), ok: 1 };
  }

  /**
   * MongoDB 8.0's `bulkWrite` (on admin): each of `ops` (`insert` / `update` / `delete`: an index into `nsInfo`,
   * with `document`, or `filter`, `updateMods`, `multi`, `upsert`) run as that statement of an insert, update or
   * delete of its namespace; a statement's error is its entry's (`ok: 0`), the rest of an ordered batch not run.
   */
  private bulkWrite(command: Document, db: string, server: EmbeddedServer): Document {
    if (db !== 'admin') throw failure(13, 'Unauthorized', 'The bulkWrite command can only be run against the admin database');
    const ops = field(command, 'bulkWrite', 'ops', 'array', true) as Document[];
    const nsInfo = field(command, 'bulkWrite', 'nsInfo', 'array', true) as Document[];
    const entries: Document[] = [];
    const totals = { nErrors: 0, nInserted: 0, nUpserted: 0, nMatched: 0, nModified: 0, nDeleted: 0 };
    for (const [idx, op] of ops.entries()) {
      const kind = Object.keys(op ?? {})[0];
      const ns: unknown = nsInfo[Number(op?.[kind as string])]?.ns;
      if (!['insert', 'update', 'delete'].includes(String(kind)) || typeof ns !== 'string' || !ns.includes('.')) {
        throw failure(2, 'BadValue', `BulkWrite ops entry ${idx} is not a valid insert, update or delete naming an nsInfo entry`);
      }
      const [opDb, coll] = [ns.slice(0, ns.indexOf('.')), ns.slice(ns.indexOf('.') + 1)];
      let reply: Document;
      try {
        reply =
          kind === 'insert'
            ? this.insert({ insert: coll, documents: [op.document] }, opDb)
            : kind === 'update'
              ? this.update({ update: coll, updates: [{ q: op.filter, u: op.updateMods, multi: op.multi, upsert: op.upsert }] }, opDb)
              : this.delete({ delete: coll, deletes: [{ q: op.filter, limit: op.multi === true ? 0 : 1 }] }, opDb);
      } catch (error) {
        if (!(error instanceof CommandFailure)) throw error;
        reply = { writeErrors: [{ index: 0, ...error.reply }] };
      }
      const writeError = (reply.writeErrors as Document[] | undefined)?.[0];
      if (writeError !== undefined) {
        const { index: _index, ok: _ok, ...status } = writeError;
        entries.push({ ok: 0, idx, ...status });
        totals.nErrors++;
        if (command.ordered !== false) break;
        continue;
      }
      const upserted = (reply.upserted as Document[] | undefined)?.[0];
      if (kind === 'insert') totals.nInserted += reply.n as number;
      if (kind === 'delete') totals.nDeleted += reply.n as number;
      if (kind === 'update') {
        totals.nUpserted += upserted === undefined ? 0 : 1;
        totals.nMatched += (reply.n as number) - (upserted === undefined ? 0 : 1);
        totals.nModified += reply.nModified as number;
      }
      entries.push({ ok: 1, idx, n: reply.n, ...(kind === 'update' ? { nModified: reply.nModified } : {}), ...(upserted === undefined ? {} : { upserted: { _id: upserted._id } }) });
    }
    const firstBatch = command.errorsOnly === true ? entries.filter((e) => e.ok === 0) : entries;
    // The cursor id is an int64, as every cursor id mongod answers.
    return { cursor: this.open(server, 'admin.$cmd.bulkWrite', firstBatch, undefined, 'firstBatch'), ...totals, ok: 1 };
  }

  private delete(command: Document, db: string): Document {
    const coll = this.name(command, 'delete');
    const deletes = field(command, 'delete', 'deletes', 'array', true) as Document[];
    const docs = this.collection(db, coll, false) ?? [];
    const writeErrors: Document[] = [];
    let n = 0;
    for (const [index, statement] of deletes.entries()) {
      const q = field(statement, 'delete.deletes', 'q', 'object', true) as Document;
      const limit = Number(statement.limit ?? 0);
      if (limit !== 0 && limit !== 1) throw failure(9, 'FailedToParse', `The limit field in delete objects must be 0 or 1. Got ${limit}`);
      let targets: Document[];
      try {
        targets = this.select(db, coll, q).slice(0, limit === 1 ? 1 : undefined);
      } catch (error) {
        // A filter mongod cannot parse fails its statement (a write error), not the command.
        writeErrors.push(statementError(index, error));
        if (command.ordered !== false) break;
        continue;
      }
      for (const doc of targets) {
        docs.splice(docs.indexOf(doc), 1);
        n++;
      }
    }
    return { n, ...(writeErrors.length > 0 ? { writeErrors } : {}), ok: 1 };
  }

  /**
   * `createUser` / `updateUser`: the field types mongod checks first (the user name, `pwd` a string, `roles` an array:
   * TypeMismatch 14), then `{ ok: 1 }` without a user made or changed (the endpoint's users are its own option).
   */
  private userCommand(command: Document, name: 'createUser' | 'updateUser'): Document {
    field(command, name, name, 'string', true);
    field(command, name, 'pwd', 'string', false);
    field(command, name, 'roles', 'array', name === 'createUser');
    return { ok: 1 };
  }

  private drop(command: Document, db: string): Document {
    const coll = this.name(command, 'drop');
    const database = this.databases.get(db);
    if (database?.delete(coll) !== true) return { ok: 1 };
    if (database.size === 0) this.databases.delete(db);
    return { nIndexesWas: 1, ns: `${db}.${coll}`, ok: 1 };
  }

  private listDatabases(command: Document): Document {
    const sizes = [...this.databases].map(([name, colls]) => {
      let size = 0;
      for (const docs of colls.values()) for (const d of docs) size += calculateObjectSize(d);
      return { name, sizeOnDisk: size, empty: size === 0 };
    });
    if (command.nameOnly === true) return { databases: sizes.map(({ name }) => ({ name })), ok: 1 };
    const totalSize = sizes.reduce((sum, d) => sum + d.sizeOnDisk, 0);
    return { databases: sizes, totalSize, totalSizeMb: Math.floor(totalSize / 1048576), ok: 1 };
  }

  private listCollections(command: Document, db: string): Document {
    const filter = (field(command, 'listCollections', 'filter', 'object', false) ?? {}) as Document;
    const entries = [...(this.databases.get(db)?.keys() ?? [])].map((name) => ({ name, type: 'collection' }));
    const firstBatch = entries.filter((e) => matches(e, filter));
    return { cursor: { id: Long.fromNumber(0), ns: `${db}.$cmd.listCollections`, firstBatch }, ok: 1 };
  }
}
