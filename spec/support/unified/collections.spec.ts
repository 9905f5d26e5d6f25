/**
 * The stored collections of an embedded deployment (test support for the unified test runner), through real
 * EmbeddedServers and real connections of the library: one store served by several endpoints, mongod's replies to
 * the CRUD and DDL commands, the endpoint's refusals coming before the store, and two stores sharing nothing.
 */
import { expect } from 'chai';
import { Binary, Int32, Long, ObjectId, type Document } from 'bson';
import { MongoClient } from 'mongodb';
import { MongoServerError, type Connection } from '../../../lib';
import { connect } from '../../../lib/client/client';
import { startedMembers } from '../members';
import { EmbeddedCollections } from './collections';

describe('EmbeddedCollections', function () {
  const { member, standalone, connect: connectTo } = startedMembers();

  /** A started standalone endpoint serving `store`, and a connection to it. */
  async function served(store: EmbeddedCollections): Promise<Connection> {
    const server = await standalone();
    store.serve(server);
    return connectTo(server);
  }

  const firstBatch = async (c: Connection, find: Document): Promise<Document[]> => (await c.command('db', find)).cursor.firstBatch as Document[];
  const failed = (p: Promise<unknown>): Promise<MongoServerError> => p.then(() => expect.fail('the command succeeded'), (e: MongoServerError) => e);

  it('serves one store from two endpoints: a write through one is read through the other, and by documents() in _id order', async function () {
    const store = new EmbeddedCollections();
    const [a, b] = [await served(store), await served(store)];
    expect(await a.command('db', { insert: 'coll', documents: [{ _id: 2, x: 'b' }, { _id: 1, x: 'a' }] })).to.include({ n: 2, ok: 1 });
    const reply = await b.command('db', { find: 'coll', filter: {} });
    expect(reply.cursor).to.deep.equal({ firstBatch: [{ _id: 2, x: 'b' }, { _id: 1, x: 'a' }], id: 0, ns: 'db.coll' });
    expect(store.documents('db', 'coll')).to.deep.equal([{ _id: 1, x: 'a' }, { _id: 2, x: 'b' }]);
    store.set('db', 'coll', [{ _id: 7 }]);
    expect(await firstBatch(a, { find: 'coll' })).to.deep.equal([{ _id: 7 }]);
    expect(store.documents('db', 'missing')).to.deep.equal([]);
  });

  it('answers a duplicate _id with E11000 write errors, stopping an ordered batch and not an unordered one; a missing _id becomes an ObjectId', async function () {
    const store = new EmbeddedCollections();
    const c = await served(store);
    const ordered = await c.command('db', { insert: 'coll', documents: [{ _id: 1 }, { _id: 1 }, { _id: 2 }] });
    expect(ordered.n).to.equal(1);
    expect(ordered.writeErrors).to.deep.equal([
      { index: 1, code: 11000, errmsg: 'E11000 duplicate key error collection: db.coll index: _id_ dup key: { _id: 1 }', keyPattern: { _id: 1 }, keyValue: { _id: 1 } },
    ]);
    const unordered = await c.command('db', { insert: 'coll', documents: [{ _id: 'a' }, { _id: 1.0 }, { _id: 3 }], ordered: false });
    expect(unordered.n).to.equal(2);
    expect(unordered.writeErrors.map((e: Document) => e.index)).to.deep.equal([1]);
    expect(store.documents('db', 'coll').map((d) => d._id)).to.deep.equal([1, 3, 'a']);
    await c.command('db', { insert: 'other', documents: [{ x: 1 }] });
    const [generated] = store.documents('db', 'other');
    expect(generated._id).to.be.instanceOf(ObjectId);
    expect(Object.keys(generated)).to.deep.equal(['_id', 'x']);
  });

  it('updates with $set, $inc, $unset, a replacement, multi and upsert, counting n, nModified and upserted as mongod', async function () {
    const store = new EmbeddedCollections();
    const c = await served(store);
    store.set('db', 'coll', [{ _id: 1, a: 1, b: 'x' }, { _id: 2, a: 1 }]);
    const upsert = await c.command('db', { update: 'coll', updates: [{ q: { _id: 5, k: { $gt: 0 } }, u: { $set: { a: 9 } }, upsert: true }] });
    expect(upsert).to.deep.include({ n: 1, nModified: 0, upserted: [{ index: 0, _id: 5 }] });
    const multi = await c.command('db', { update: 'coll', updates: [{ q: { a: 1 }, u: { $inc: { a: 2 }, $unset: { b: '' } }, multi: true }] });
    expect(multi).to.include({ n: 2, nModified: 2 });
    const same = await c.command('db', { update: 'coll', updates: [{ q: { _id: 1 }, u: { $set: { a: 3 } } }] });
    expect(same).to.include({ n: 1, nModified: 0 });
    await c.command('db', { update: 'coll', updates: [{ q: { _id: 2 }, u: { z: true } }] });
    const replaced = await c.command('db', { update: 'coll', updates: [{ q: { _id: 2 }, u: { _id: 3 } }, { q: { _id: 1 }, u: { $set: { a: 0 } } }] });
    expect(replaced.n).to.equal(0);
    expect(replaced.writeErrors[0]).to.include({ index: 0, code: 66 });
    expect(replaced.writeErrors).to.have.length(1);
    expect(store.documents('db', 'coll')).to.deep.equal([{ _id: 1, a: 3 }, { _id: 2, z: true }, { _id: 5, a: 9 }]);
  });

  it('finds with equality and the comparison operators on top-level fields, numbers compared across BSON types, sorted on two fields', async function () {
    const store = new EmbeddedCollections();
    const c = await served(store);
    store.set('db', 'coll', [
      { _id: 1, n: new Int32(5), g: 'a', tags: ['red', 'blue'] },
      { _id: 2, n: Long.fromNumber(10), g: 'b' },
      { _id: 3, n: 7.5, g: 'a', tags: [] },
      { _id: 4, n: 'ten', g: 'b' },
      { _id: 5, g: 'a', sub: { x: 1, y: [2] } },
    ]);
    const ids = async (filter: Document, sort?: Document): Promise<unknown[]> =>
      (await firstBatch(c, { find: 'coll', filter, ...(sort ? { sort } : {}) })).map((d) => d._id);
    expect(await ids({ n: { $gt: 5 } })).to.deep.equal([2, 3]);
    expect(await ids({ n: { $gte: 5, $lt: 10 } })).to.deep.equal([1, 3]);
    expect(await ids({ n: { $lte: 7.5 } })).to.deep.equal([1, 3]);
    expect(await ids({ n: { $in: [10, 'ten'] } })).to.deep.equal([2, 4]);
    expect(await ids({ g: { $ne: 'a' } })).to.deep.equal([2, 4]);
    expect(await ids({ n: { $exists: false } })).to.deep.equal([5]);
    expect(await ids({ n: 5.0, g: 'a' })).to.deep.equal([1]);
    expect(await ids({ tags: 'blue' })).to.deep.equal([1]);
    expect(await ids({ tags: { $ne: 'red' } })).to.deep.equal([2, 3, 4, 5]);
    expect(await ids({ sub: { x: 1, y: [2] } })).to.deep.equal([5]);
    expect(await ids({ sub: { y: [2], x: 1 } })).to.deep.equal([]);
    expect(await ids({}, { g: -1, _id: 1 })).to.deep.equal([2, 4, 1, 3, 5]);
    expect(await ids({}, { n: 1 })).to.deep.equal([5, 1, 3, 2, 4]);
    expect((await c.command('db', { count: 'coll', query: { g: 'a' } })).n).to.equal(3);
    const unknown = await failed(c.command('db', { find: 'coll', filter: { n: { $foo: 1 } } }));
    expect(unknown).to.include({ code: 2, codeName: 'BadValue', message: 'unknown operator: $foo' });
  });

  it('holds a command with the unified tests\' $where sleep(<ms>) || true per document, and refuses any other $where', async function () {
    const store = new EmbeddedCollections();
    const c = await served(store);
    store.set('db', 'coll', [{ _id: 1 }, { _id: 2 }]);
    const started = performance.now();
    expect(await firstBatch(c, { find: 'coll', filter: { $where: 'sleep(30) || true' } })).to.deep.equal([{ _id: 1 }, { _id: 2 }]);
    expect(performance.now() - started).to.be.at.least(59);
    const update = await c.command('db', { update: 'coll', updates: [{ q: { $where: 'sleep(1) || true' }, u: { $set: { a: 1 } } }] });
    expect(update).to.include({ n: 1, nModified: 1 });
    const other = await failed(c.command('db', { find: 'coll', filter: { $where: 'this._id > 1' } }));
    expect(other).to.include({ code: 2, message: 'unknown top level operator: $where' });
  });

  it('projects as mongod: { _id: 1 } keeps _id alone, { _id: 0 } drops it, a projection both including and excluding is refused', async function () {
    const store = new EmbeddedCollections();
    const c = await served(store);
    store.set('db', 'coll', [{ _id: 1, a: 1, b: 2 }]);
    const projected = async (projection: Document): Promise<Document[]> => firstBatch(c, { find: 'coll', projection });
    expect(await projected({ _id: 1 })).to.deep.equal([{ _id: 1 }]);
    expect(await projected({ _id: 0 })).to.deep.equal([{ a: 1, b: 2 }]);
    expect(await projected({ a: 1 })).to.deep.equal([{ _id: 1, a: 1 }]);
    expect(await projected({ a: true, _id: 0 })).to.deep.equal([{ a: 1 }]);
    expect(await projected({ a: 0 })).to.deep.equal([{ _id: 1, b: 2 }]);
    expect(await projected({ _id: 1, a: 0 })).to.deep.equal([{ _id: 1, b: 2 }]);
    expect(await failed(c.command('db', { find: 'coll', projection: { a: 1, b: 0 } }))).to.include({ code: 31254, message: 'Cannot do exclusion on field b in inclusion projection' });
    expect(await failed(c.command('db', { find: 'coll', projection: { a: 0, b: 1 } }))).to.include({ code: 31253, message: 'Cannot do inclusion on field b in exclusion projection' });
    // Parsed before any document is read.
    expect(await failed(c.command('db', { find: 'missing', projection: { a: 1, b: 0 } }))).to.include({ code: 31254 });
  });

  it("shows each document's own record id, whatever the sort and skip, and returns the _id index's key only where the query uses it", async function () {
    const store = new EmbeddedCollections();
    const c = await served(store);
    store.set('db', 'coll', [{ _id: 1, a: 1 }, { _id: 2, a: 2 }, { _id: 3, a: 3 }]);
    const shown = await firstBatch(c, { find: 'coll', sort: { _id: -1 }, skip: 1, showRecordId: true, projection: { a: 0 } });
    expect(shown).to.deep.equal([{ _id: 2, $recordId: 2 }, { _id: 1, $recordId: 1 }]);
    expect(await firstBatch(c, { find: 'coll', sort: { _id: 1 }, returnKey: true, showRecordId: true })).to.deep.equal([{ _id: 1 }, { _id: 2 }, { _id: 3 }]);
    expect(await firstBatch(c, { find: 'coll', filter: { a: { $gt: 1 } }, returnKey: true })).to.deep.equal([{}, {}]);
    expect(await firstBatch(c, { find: 'coll', filter: { a: 3 }, hint: { _id: 1 }, returnKey: true })).to.deep.equal([{ _id: 3 }]);
  });

  it('keeps a cursor for getMore: batches of batchSize, the first filled one left open, killCursors, CursorNotFound, singleBatch, no negative limit', async function () {
    const store = new EmbeddedCollections();
    const c = await served(store);
    store.set('db', 'coll', [{ _id: 1 }, { _id: 2 }, { _id: 3 }]);
    const first = (await c.command('db', { find: 'coll', batchSize: 2 })).cursor;
    expect(first.firstBatch).to.deep.equal([{ _id: 1 }, { _id: 2 }]);
    const id = Long.fromValue(first.id);
    expect(id.isZero()).to.equal(false);
    // Elsewhere the cursor is not found.
    expect(await failed(c.command('db', { getMore: id, collection: 'other' }))).to.include({ code: 43, codeName: 'CursorNotFound' });
    expect((await c.command('db', { getMore: id, collection: 'coll', batchSize: 5 })).cursor).to.deep.include({ nextBatch: [{ _id: 3 }], id: 0 });
    const small = Long.fromValue((await c.command('db', { find: 'coll', batchSize: 1 })).cursor.id);
    expect((await c.command('db', { getMore: small, collection: 'coll', batchSize: 1 })).cursor).to.deep.include({ nextBatch: [{ _id: 2 }], id: small.toNumber() });
    expect((await c.command('db', { getMore: small, collection: 'coll', batchSize: 1 })).cursor).to.deep.include({ nextBatch: [{ _id: 3 }], id: 0 });
    expect(await failed(c.command('db', { getMore: id, collection: 'coll' }))).to.include({ code: 43 });
    // A first batch filled to its batchSize leaves a cursor open though nothing is left (CRUD spec, limit = batchSize).
    const full = (await c.command('db', { find: 'coll', limit: 2, batchSize: 2 })).cursor;
    expect(full.firstBatch).to.have.length(2);
    expect(Long.fromValue(full.id).isZero()).to.equal(false);
    expect((await c.command('db', { getMore: Long.fromValue(full.id), collection: 'coll' })).cursor).to.deep.include({ nextBatch: [], id: 0 });
    const killed = Long.fromValue((await c.command('db', { find: 'coll', batchSize: 1 })).cursor.id);
    // Another collection's killCursors does not find it.
    expect(await c.command('db', { killCursors: 'other', cursors: [killed] })).to.deep.include({ cursorsKilled: [], cursorsNotFound: [killed.toNumber()] });
    expect(await c.command('db', { killCursors: 'coll', cursors: [killed, Long.fromNumber(999)] })).to.deep.include({ cursorsKilled: [killed.toNumber()], cursorsNotFound: [999] });
    expect(await failed(c.command('db', { getMore: killed, collection: 'coll' }))).to.include({ code: 43 });
    expect((await c.command('db', { find: 'coll', batchSize: 1, singleBatch: true })).cursor).to.deep.include({ firstBatch: [{ _id: 1 }], id: 0 });
    expect(await failed(c.command('db', { find: 'coll', limit: -1 }))).to.include({ code: 51024 });
    // batchSize 0: an open cursor, nothing read; a getMore's batchSize must be positive.
    const none = (await c.command('db', { find: 'coll', batchSize: 0 })).cursor;
    expect(none.firstBatch).to.deep.equal([]);
    expect(await failed(c.command('db', { getMore: Long.fromValue(none.id), collection: 'coll', batchSize: 0 }))).to.include({ code: 2, message: 'Batch size for getMore must be positive, but received: 0' });
    expect((await c.command('db', { getMore: Long.fromValue(none.id), collection: 'coll' })).cursor).to.deep.include({ nextBatch: [{ _id: 1 }, { _id: 2 }, { _id: 3 }], id: 0 });
  });

  it("keeps a cursor on the server that opened it: another server serving the store does not find it, as a mongod would not", async function () {
    const store = new EmbeddedCollections();
    const [a, b] = [await served(store), await served(store)];
    store.set('db', 'coll', [{ _id: 1 }, { _id: 2 }, { _id: 3 }]);
    const id = Long.fromValue((await a.command('db', { find: 'coll', batchSize: 1 })).cursor.id);
    expect(await failed(b.command('db', { getMore: id, collection: 'coll' }))).to.include({ code: 43, codeName: 'CursorNotFound' });
    expect(await b.command('db', { killCursors: 'coll', cursors: [id] })).to.deep.include({ cursorsKilled: [], cursorsNotFound: [id.toNumber()] });
    expect((await a.command('db', { getMore: id, collection: 'coll', batchSize: 1 })).cursor).to.deep.include({ nextBatch: [{ _id: 2 }] });
    expect(await a.command('db', { killCursors: 'coll', cursors: [id] })).to.deep.include({ cursorsKilled: [id.toNumber()] });
  });

  it('deletes, drops (a missing collection too), creates and lists databases and collections', async function () {
    const store = new EmbeddedCollections();
    const c = await served(store);
    store.set('db', 'a', [{ _id: 1, k: 1 }, { _id: 2, k: 1 }, { _id: 3, k: 2 }]);
    expect((await c.command('db', { delete: 'a', deletes: [{ q: { k: 1 }, limit: 1 }] })).n).to.equal(1);
    expect(store.documents('db', 'a')).to.deep.equal([{ _id: 2, k: 1 }, { _id: 3, k: 2 }]);
    expect(await c.command('db', { create: 'b' })).to.include({ ok: 1 });
    expect(await c.command('db', { create: 'b' })).to.include({ ok: 1 });
    const listed = await firstBatch(c, { listCollections: 1, nameOnly: true });
    expect(listed).to.deep.equal([{ name: 'a', type: 'collection' }, { name: 'b', type: 'collection' }]);
    const databases = await c.command('admin', { listDatabases: 1 });
    expect(databases.databases).to.deep.equal([{ name: 'db', sizeOnDisk: 42, empty: false }]);
    expect(databases.totalSize).to.equal(42);
    expect((await c.command('admin', { listDatabases: 1, nameOnly: true })).databases).to.deep.equal([{ name: 'db' }]);
    expect(await c.command('db', { drop: 'a' })).to.include({ ns: 'db.a', ok: 1 });
    expect(await c.command('db', { drop: 'a' })).to.include({ ok: 1 });
    await c.command('db', { drop: 'b' });
    expect((await c.command('admin', { listDatabases: 1 })).databases).to.deep.equal([]);
  });

  it('refuses bad input as mongod: documents missing (40414) or not an array (TypeMismatch 14), an empty collection name (InvalidNamespace 73)', async function () {
    const c = await served(new EmbeddedCollections());
    expect(await failed(c.command('db', { insert: 'coll' }))).to.include({ code: 40414, message: "BSON field 'insert.documents' is missing but a required field" });
    expect(await failed(c.command('db', { insert: 'coll', documents: { _id: 1 } }))).to.include({
      code: 14, codeName: 'TypeMismatch', message: "BSON field 'insert.documents' is the wrong type 'object', expected type 'array'",
    });
    expect(await failed(c.command('db', { find: '' }))).to.include({ code: 73, codeName: 'InvalidNamespace', message: "Invalid namespace specified 'db.'" });
  });

  it('refuses a filter mongod cannot parse before reading any document: an empty or missing collection answers BadValue too', async function () {
    const c = await served(new EmbeddedCollections());
    for (const filter of [{ $or: true }, { $and: [] }, { $nor: [{ a: 1 }] }, { a: { $size: 1 } }, { a: { $in: 3 } }]) {
      expect(await failed(c.command('db', { find: 'missing', filter })), JSON.stringify(filter)).to.include({ code: 2, codeName: 'BadValue' });
    }
    expect(await firstBatch(c, { find: 'missing', filter: { a: { $in: [1] } } })).to.deep.equal([]);
  });

  it('gives and keeps copies: a caller changing what it gave or got changes nothing stored', async function () {
    const store = new EmbeddedCollections();
    const given = [{ _id: 1, list: [1], sub: { a: 1 }, bin: new Binary(Buffer.from([1, 2])) }];
    store.set('db', 'coll', given);
    given[0].list.push(2);
    given[0].sub.a = 2;
    const got = store.documents('db', 'coll');
    (got[0].list as number[]).push(3);
    got[0].sub.a = 3;
    (got[0].bin as Binary).buffer[0] = 9;
    const [kept] = store.documents('db', 'coll');
    expect(kept).to.deep.include({ _id: 1, list: [1], sub: { a: 1 } });
    expect([...(kept.bin as Binary).value()]).to.deep.equal([1, 2]);
  });

  it('is reached only past the endpoint\'s refusals: a secondary refuses writes (NotWritablePrimary) and unflagged reads, the fail point fails a write, nothing stored', async function () {
    const store = new EmbeddedCollections();
    const primary = await member({ setName: 'rs', state: 'primary' });
    const secondary = await member({ setName: 'rs', state: 'secondary' });
    primary.setReplicaSetHosts([primary.address, secondary.address]);
    secondary.setReplicaSetHosts([primary.address, secondary.address]);
    store.serve(primary);
    store.serve(secondary);
    const [p, s] = [await connectTo(primary), await connectTo(secondary)];
    expect(await failed(s.command('db', { insert: 'coll', documents: [{ _id: 1 }] }))).to.include({ code: 10107, codeName: 'NotWritablePrimary' });
    expect(store.documents('db', 'coll')).to.deep.equal([]);
    await p.command('db', { insert: 'coll', documents: [{ _id: 2 }] });
    expect(await failed(s.command('db', { find: 'coll' }))).to.include({ code: 13435 });
    expect(await firstBatch(s, { find: 'coll', $readPreference: { mode: 'secondaryPreferred' } })).to.deep.equal([{ _id: 2 }]);
    await p.command('admin', { configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['insert'], errorCode: 91 } });
    expect(await failed(p.command('db', { insert: 'coll', documents: [{ _id: 3 }] }))).to.include({ code: 91 });
    expect(store.documents('db', 'coll')).to.deep.equal([{ _id: 2 }]);
  });

  it('serves a replica set to the library\'s client: its insert selects the primary, its secondary read sees the write', async function () {
    const store = new EmbeddedCollections();
    const members = [await member({ setName: 'rs', state: 'primary' }), await member({ setName: 'rs', state: 'secondary' })];
    for (const m of members) {
      m.setReplicaSetHosts(members.map((x) => x.address));
      store.serve(m);
    }
    const client = connect(`mongodb://${members.map((m) => m.address).join(',')}/?replicaSet=rs&serverSelectionTimeoutMS=5000`);
    try {
      expect(await client.command('db', { insert: 'coll', documents: [{ _id: 1 }] })).to.include({ n: 1 });
      const read = await client.command('db', { find: 'coll', filter: {} }, { readPreference: 'secondary' });
      expect(read.cursor.firstBatch).to.deep.equal([{ _id: 1 }]);
      expect(members[1].receivedCommands.map((c) => c.name)).to.include('find').and.not.include('insert');
    } finally {
      await client.close();
    }
  });

  it('runs MongoDB 8.0\'s bulkWrite on admin over several namespaces: an entry per statement, the totals, errorsOnly, an ordered batch stopped at its error', async function () {
    const store = new EmbeddedCollections();
    const c = await served(store);
    store.set('db', 'a', [{ _id: 1, x: 1 }, { _id: 2, x: 2 }]);
    const nsInfo = [{ ns: 'db.a' }, { ns: 'other.b' }];
    const reply = await c.command('admin', {
      bulkWrite: 1,
      ops: [
        { insert: 1, document: { _id: 10 } },
        { update: 0, filter: { _id: { $gte: 1 } }, updateMods: { $set: { x: 1 } }, multi: true },
        { update: 0, filter: { _id: 3 }, updateMods: { $set: { x: 3 } }, upsert: true },
        { insert: 1, document: { _id: 10 } },
        { delete: 0, filter: { _id: 2 } },
      ],
      nsInfo,
      ordered: false,
    });
    expect(reply.cursor.id).to.equal(0);
    expect(reply.cursor.ns).to.equal('admin.$cmd.bulkWrite');
    expect(reply.cursor.firstBatch.map(({ keyPattern: _k, keyValue: _v, errmsg: _m, ...entry }: Document) => entry)).to.deep.equal([
      { ok: 1, idx: 0, n: 1 },
      { ok: 1, idx: 1, n: 2, nModified: 1 },
      { ok: 1, idx: 2, n: 1, nModified: 0, upserted: { _id: 3 } },
      { ok: 0, idx: 3, code: 11000 },
      { ok: 1, idx: 4, n: 1 },
    ]);
    expect(reply).to.include({ nErrors: 1, nInserted: 1, nUpserted: 1, nMatched: 2, nModified: 1, nDeleted: 1, ok: 1 });
    expect(store.documents('db', 'a')).to.deep.equal([{ _id: 1, x: 1 }, { _id: 3, x: 3 }]);
    expect(store.documents('other', 'b')).to.deep.equal([{ _id: 10 }]);
    const ops = [{ delete: 0, filter: { _id: 1 } }, { insert: 1, document: { _id: 10 } }, { delete: 0, filter: {}, multi: true }];
    const ordered = await c.command('admin', { bulkWrite: 1, ops, nsInfo, errorsOnly: true });
    expect(ordered.cursor.firstBatch.map((e: Document) => [e.ok, e.idx, e.code])).to.deep.equal([[0, 1, 11000]]);
    expect(ordered).to.include({ nErrors: 1, nDeleted: 1 });
    expect(store.documents('db', 'a')).to.deep.equal([{ _id: 3, x: 3 }]);
    expect((await failed(c.command('db', { bulkWrite: 1, ops: [], nsInfo }))).code).to.equal(13);
  });

  it('answers bulkWrite as mongod to the official driver\'s client bulk write, which reads the reply\'s cursor id as an int64', async function () {
    const store = new EmbeddedCollections();
    const server = await standalone();
    store.serve(server);
    const driver = new MongoClient(`mongodb://${server.address}/?directConnection=true`);
    try {
      const result = await driver.bulkWrite<Record<string, { _id: number; x?: number }>>(
        [
          { name: 'insertOne', namespace: 'db.a', document: { _id: 1 } },
          { name: 'updateOne', namespace: 'db.b', filter: { _id: 2 }, update: { $set: { x: 1 } }, upsert: true },
        ],
        { verboseResults: true },
      );
      expect(result).to.include({ insertedCount: 1, upsertedCount: 1, matchedCount: 0, modifiedCount: 0, deletedCount: 0 });
      expect(store.documents('db', 'b')).to.deep.equal([{ _id: 2, x: 1 }]);
    } finally {
      await driver.close();
    }
  });

  it('shares nothing between two stores', async function () {
    const [one, two] = [new EmbeddedCollections(), new EmbeddedCollections()];
    const [a, b] = [await served(one), await served(two)];
    await a.command('db', { insert: 'coll', documents: [{ _id: 1 }] });
    two.set('db', 'other', [{ _id: 2 }]);
    expect(await firstBatch(b, { find: 'coll' })).to.deep.equal([]);
    expect(two.documents('db', 'coll')).to.deep.equal([]);
    expect(one.documents('db', 'other')).to.deep.equal([]);
    expect((await a.command('admin', { listDatabases: 1, nameOnly: true })).databases).to.deep.equal([{ name: 'db' }]);
    expect(await firstBatch(a, { listCollections: 1 })).to.deep.equal([{ name: 'coll', type: 'collection' }]);
  });
});
