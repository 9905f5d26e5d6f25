/**
 * Unacknowledged writes: `command(db, cmd, { moreToCome: true })` sends the OP_MSG with the moreToCome flag and awaits
 * no reply (OP_MSG spec, "moreToCome On Requests"). Against the embedded endpoint, or the server in MONGODB_URI when it
 * is set; the bytes on the wire are read through a recording pipe (skipped when MONGODB_URI uses TLS).
 */
import { expect } from 'chai';
import * as net from 'node:net';
import { inflateSync } from 'node:zlib';
import { Binary, Double, Int32, Long, ObjectId, type Document } from 'bson';
import { MongoClient } from 'mongodb';
import { ConnectionBusyError, ConnectionPool, InvalidOptionError, MongoNetworkError, MongoNetworkTimeoutError, type Connection, type ConnectionPoolEvent } from '../../lib';
import { decodeOpMsg, encodeOpMsg, OpMsgFlag } from '../../lib/connection/op-msg';
import { MessageFramer, OpCode, WireProtocolError, type WireMessage } from '../../lib/connection/wire-protocol';
import { establishOne, eventually, setFailPoint, startTestEndpoint, stopTestEndpoint, type TestEndpoint } from '../support/endpoint';
import { startHostileServer } from '../support/hostile-server';
import { startWireProxy } from '../support/wire-proxy';

const where = process.env.MONGODB_URI ? 'MONGODB_URI' : 'embedded endpoint';

/** A TCP pipe to `target` that keeps every message the client sent, as framed on the wire (compressed or not). */
interface RecordingPipe {
  readonly address: string;
  /** The messages the client sent, in order. */
  readonly sent: WireMessage[];
  stop(): Promise<void>;
}

async function startRecordingPipe(target: string): Promise<RecordingPipe> {
  const [host, port] = target.split(':');
  const sent: WireMessage[] = [];
  const open = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect({ host, port: Number(port) });
    const framer = new MessageFramer();
    open.add(client).add(upstream);
    client.on('data', (chunk: Buffer) => {
      for (const message of framer.push(chunk)) sent.push(message);
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => client.write(chunk));
    const close = (): void => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    for (const s of [client, upstream]) {
      s.on('error', close);
      s.on('close', close);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    address: `127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    sent,
    stop: () =>
      new Promise<void>((resolve) => {
        for (const s of open) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** The OP_MSG flag bits and sections of `message`, unwrapping an OP_COMPRESSED (zlib) first. */
function opMsgOf(message: WireMessage): { compressed: boolean; flags: number; document: Document; sequences: ReadonlyMap<string, Document[]> } {
  let body = message.body;
  const compressed = message.header.opCode === OpCode.OP_COMPRESSED;
  if (compressed) {
    expect(body.readInt32LE(0)).to.equal(OpCode.OP_MSG);
    body = inflateSync(body.subarray(9));
  } else {
    expect(message.header.opCode).to.equal(OpCode.OP_MSG);
  }
  return { compressed, ...decodeOpMsg(body) };
}

describe(`Connection: unacknowledged writes, moreToCome on requests (${where})`, function () {
  let endpoint: TestEndpoint;
  let pipe: RecordingPipe;
  let collection: string;
  const appName = `rxcmap-more-to-come-${process.pid}`;

  before(async function () {
    endpoint = await startTestEndpoint();
    // The embedded endpoint stores nothing: a collection of its own, for insert and find, as a mongod runs them.
    const stored = new Map<string, Document[]>();
    endpoint.embedded?.handle('insert', (cmd) => {
      const docs = stored.get(String(cmd.insert)) ?? [];
      docs.push(...(cmd.documents as Document[]));
      stored.set(String(cmd.insert), docs);
      return { n: (cmd.documents as Document[]).length, ok: 1 };
    });
    endpoint.embedded?.handle('find', (cmd) => {
      const filter = (cmd.filter ?? {}) as Document;
      const docs = (stored.get(String(cmd.find)) ?? []).filter((d) => Object.entries(filter).every(([k, v]) => String(d[k]) === String(v)));
      return { cursor: { id: 0n, ns: `${String(cmd.$db)}.${String(cmd.find)}`, firstBatch: docs }, ok: 1 };
    });
  });
  after(() => stopTestEndpoint(endpoint));
  beforeEach(async function () {
    collection = `more_to_come_${new ObjectId().toHexString()}`;
    if (endpoint.connectionOptions.tls) {
      console.log('      skipped: MONGODB_URI uses TLS, which the recording pipe cannot read');
      return this.skip();
    }
    pipe = await startRecordingPipe(endpoint.address);
  });
  afterEach(async function () {
    await endpoint.adminCommand({ configureFailPoint: 'failCommand', mode: 'off' }).catch(() => undefined);
    await pipe?.stop();
  });

  function connect(options: { compressors?: string[] } = {}): Promise<Connection> {
    return establishOne(pipe.address, { ...endpoint.connectionOptions, appName, ...options } as never);
  }

  async function readBack(c: Connection, filter: Document = {}): Promise<Document[]> {
    const reply = await c.command('rxcmap_test', { find: collection, filter });
    return reply.cursor.firstBatch as Document[];
  }

  it('sets moreToCome (0x2) and no other flag bit, resolves { ok: 1 } once written, and the next command on the connection runs', async function () {
    const c = await connect();
    try {
      const before = pipe.sent.length;
      const reply = await c.command('rxcmap_test', { insert: collection, documents: [{ _id: 1, x: 'a' }], writeConcern: { w: 0 } }, { moreToCome: true });
      expect(reply).to.deep.equal({ ok: 1 });
      expect(c.busy).to.equal(false);
      expect(c.errored).to.equal(false);
      expect(await eventually(() => pipe.sent.length > before)).to.equal(true);
      const sent = pipe.sent.slice(before);
      expect(sent).to.have.length(1);
      const msg = opMsgOf(sent[0]);
      expect(msg.compressed).to.equal(false);
      expect(msg.flags).to.equal(OpMsgFlag.moreToCome);
      expect(msg.document).to.deep.include({ insert: collection, writeConcern: { w: 0 }, $db: 'rxcmap_test' });
      // The write took effect, and the connection answers the next command (no stray reply in between).
      expect(await readBack(c)).to.deep.equal([{ _id: 1, x: 'a' }]);
      expect(c.errored).to.equal(false);
    } finally {
      c.destroy();
    }
  });

  it('keeps the flag inside OP_COMPRESSED, for a small command and for one compressed on the thread pool', async function () {
    const c = await connect({ compressors: ['zlib'] });
    try {
      expect(c.compressor).to.equal('zlib');
      const before = pipe.sent.length;
      await c.command('rxcmap_test', { insert: collection, documents: [{ _id: 1 }], writeConcern: { w: 0 } }, { moreToCome: true });
      const big = 'y'.repeat(100 * 1024);
      await c.command('rxcmap_test', { insert: collection, writeConcern: { w: 0 } }, { moreToCome: true, documentSequences: { documents: [{ _id: 2, big }] } });
      expect(await eventually(() => pipe.sent.length >= before + 2)).to.equal(true);
      const sent = pipe.sent.slice(before);
      expect(sent.map((m) => m.header.opCode)).to.deep.equal([OpCode.OP_COMPRESSED, OpCode.OP_COMPRESSED]);
      const [small, large] = sent.map(opMsgOf);
      expect(small.flags).to.equal(OpMsgFlag.moreToCome);
      expect(large.flags).to.equal(OpMsgFlag.moreToCome);
      expect(large.sequences.get('documents')).to.deep.equal([{ _id: 2, big }]);
      expect((await readBack(c)).map((d) => d._id)).to.deep.equal([1, 2]);
    } finally {
      c.destroy();
    }
  });

  it('awaits no reply: resolves while the server still holds the write (a blocked insert)', async function () {
    await setFailPoint(this, endpoint, { mode: { times: 1 }, data: { failCommands: ['insert'], blockConnection: true, blockTimeMS: 3000, appName } });
    const c = await connect();
    try {
      const started = Date.now();
      await c.command('rxcmap_test', { insert: collection, documents: [{ _id: 1 }], writeConcern: { w: 0 } }, { moreToCome: true });
      const tookMS = Date.now() - started;
      // Waiting for the write would take the server's 3 s hold: 2 s leaves a loaded machine's pauses room.
      expect(tookMS).to.be.below(2000);
      // The next command waits its turn behind the write on the server, and sees it done.
      expect(await readBack(c)).to.deep.equal([{ _id: 1 }]);
    } finally {
      c.destroy();
    }
  });

  it('a write the server drops (a duplicate key, say) is not reported, and the connection stays usable', async function () {
    await setFailPoint(this, endpoint, { mode: { times: 1 }, data: { failCommands: ['insert'], errorCode: 11000, appName } });
    const c = await connect();
    try {
      expect(await c.command('rxcmap_test', { insert: collection, documents: [{ _id: 1 }], writeConcern: { w: 0 } }, { moreToCome: true })).to.deep.equal({ ok: 1 });
      expect(await readBack(c)).to.deep.equal([]);
      expect(c.errored).to.equal(false);
    } finally {
      c.destroy();
    }
  });

  it('a server that is no longer primary closes the connection: the next command fails with a network error', async function () {
    // As mongod: a not-primary error (NotWritablePrimary, 10107) of a moreToCome request closes the connection.
    await setFailPoint(this, endpoint, { mode: { times: 1 }, data: { failCommands: ['insert'], errorCode: 10107, appName } });
    const c = await connect();
    try {
      expect(await c.command('rxcmap_test', { insert: collection, documents: [{ _id: 1 }], writeConcern: { w: 0 } }, { moreToCome: true })).to.deep.equal({ ok: 1 });
      const error = await c.command('admin', { ping: 1 }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).to.be.instanceOf(MongoNetworkError);
      expect(c.errored).to.equal(true);
    } finally {
      c.destroy();
    }
  });

  it('refuses moreToCome with exhaustAllowed, with a writeConcern that asks for an acknowledgement, or not a boolean: InvalidOptionError, nothing sent', async function () {
    const c = await connect();
    try {
      const before = pipe.sent.length;
      const refusal = (command: Document, options: Document): Promise<unknown> =>
        c.command('rxcmap_test', command, options as never).then(
          () => undefined,
          (e: unknown) => e,
        );
      const insert = (writeConcern?: Document): Document => ({ insert: collection, documents: [{ _id: 1 }], ...(writeConcern ? { writeConcern } : {}) });
      const exhaust = await refusal(insert({ w: 0 }), { moreToCome: true, exhaustAllowed: true });
      expect(exhaust).to.be.instanceOf(InvalidOptionError).with.property('option', 'moreToCome');
      expect((exhaust as Error).message).to.equal('Invalid moreToCome: a request with moreToCome gets no reply, so it cannot set exhaustAllowed (a stream of replies) too');
      expect(exhaust).to.include({ allowed: 'false when exhaustAllowed is true', value: true });
      // Each refusal says what the writeConcern has.
      const cases: [unknown, string][] = [
        [{ w: 1 }, 'w: 1'],
        [{ w: 'majority' }, 'w: "majority"'],
        [{ j: true }, 'no w (the default, w: 1)'],
        [{ w: 2, wtimeout: 10 }, 'w: 2'],
        ['majority', 'no document'],
      ];
      for (const [writeConcern, shown] of cases) {
        const error = await refusal({ insert: collection, documents: [{ _id: 1 }], writeConcern }, { moreToCome: true });
        expect(error, JSON.stringify(writeConcern)).to.be.instanceOf(InvalidOptionError).and.include({ option: 'moreToCome', value: true, allowed: 'false unless the command has no writeConcern or one with w: 0' });
        expect((error as Error).message, JSON.stringify(writeConcern)).to.equal(
          `Invalid moreToCome: the command's writeConcern has ${shown}, which asks for an acknowledgement no reply will bring; an unacknowledged write must have writeConcern w: 0 (OP_MSG spec, "moreToCome On Requests")`,
        );
      }
      const notBoolean = await refusal(insert({ w: 0 }), { moreToCome: 'yes' });
      expect(notBoolean).to.be.instanceOf(InvalidOptionError).with.property('option', 'moreToCome');
      expect(pipe.sent.length).to.equal(before);
      // The connection stays usable, and the same acknowledged write without moreToCome is sent and answered.
      expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
      expect(await readBack(c)).to.deep.equal([]);
      expect(await c.command('rxcmap_test', insert({ w: 1 }))).to.include({ ok: 1, n: 1 });
      expect(await readBack(c)).to.deep.equal([{ _id: 1 }]);
    } finally {
      c.destroy();
    }
  });

  it('judges the writeConcern that goes on the wire, read once: a getter, a toBSON or an inherited w cannot pass w: 0 and send another, and a BSON 0 is w: 0', async function () {
    const c = await connect();
    try {
      const before = pipe.sent.length;
      const insert = (extra: Document): Document => Object.assign({ insert: collection, documents: [{ _id: 1 }] }, extra);
      // A getter answering w: 0 to the first read and w: 1 to the next.
      let reads = 0;
      const flipping = insert({});
      Object.defineProperty(flipping, 'writeConcern', { enumerable: true, get: () => (++reads === 1 ? { w: 0 } : { w: 1 }) });
      let wReads = 0;
      const flippingW = {};
      Object.defineProperty(flippingW, 'w', { enumerable: true, get: () => (++wReads === 1 ? 0 : 'majority') });
      // Read once: the w: 0 judged is the w: 0 sent.
      for (const command of [flipping, insert({ writeConcern: flippingW })]) {
        expect(await c.command('rxcmap_test', command, { moreToCome: true })).to.deep.equal({ ok: 1 });
        await eventually(() => pipe.sent.length > before);
        expect(opMsgOf(pipe.sent.at(-1)!).document.writeConcern).to.deep.equal({ w: 0 });
        pipe.sent.length = before;
      }
      const refused: Document[] = [
        insert({ writeConcern: { w: 0, toBSON: () => ({ w: 1 }) } }),
        // w: 0 read through the prototype, but not an own property: BSON sends {}, the default write concern.
        insert({ writeConcern: Object.create({ w: 0 }) as Document }),
      ];
      for (const [i, command] of refused.entries()) {
        const error = await c.command('rxcmap_test', command, { moreToCome: true }).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error, `case ${i}`).to.be.instanceOf(InvalidOptionError).with.property('option', 'moreToCome');
      }
      expect(pipe.sent.length).to.equal(before);
      // What BSON sends as the number 0 is w: 0, whatever its JavaScript shape.
      for (const writeConcern of [{ w: new Int32(0) }, { w: new Double(0) }, { w: Long.fromNumber(0) }, new Map([['w', 0]])]) {
        expect(await c.command('rxcmap_test', insert({ writeConcern }), { moreToCome: true })).to.deep.equal({ ok: 1 });
      }
      expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
    } finally {
      c.destroy();
    }
  });

  it('refuses w: 0 with j or fsync true, which a server acknowledges once journaled: InvalidOptionError, nothing sent', async function () {
    // mongod waits for the journal for j: true (or fsync: true) whatever w is (write_concern.cpp, waitForWriteConcern:
    // the sync mode is waited for before w), and the MongoDB manual: "If you specify w: 0 but include j: true, the
    // j: true prevails to request acknowledgment". No reply can bring that acknowledgement.
    const c = await connect();
    try {
      const before = pipe.sent.length;
      for (const writeConcern of [{ w: 0, j: true }, { w: 0, j: 1 }, { w: 0, fsync: true }, { w: 0, wtimeout: 5, j: true }]) {
        const error = await c.command('rxcmap_test', { insert: collection, documents: [{ _id: 1 }], writeConcern }, { moreToCome: true }).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error, JSON.stringify(writeConcern)).to.be.instanceOf(InvalidOptionError).with.property('option', 'moreToCome');
        expect((error as Error).message).to.match(/journal/).and.include(`writeConcern has w: 0 with ${'fsync' in writeConcern ? 'fsync' : 'j'}: true`);
        expect(error).to.include({ allowed: 'false unless the command has no writeConcern or one with w: 0 without j or fsync true', value: true });
      }
      expect(pipe.sent.length).to.equal(before);
      // j: false, fsync: false and a wtimeout ask for nothing more than w: 0.
      for (const writeConcern of [{ w: 0, j: false }, { w: 0, fsync: false }, { w: 0, wtimeout: 5 }]) {
        expect(await c.command('rxcmap_test', { insert: collection, documents: [{}], writeConcern }, { moreToCome: true })).to.deep.equal({ ok: 1 });
      }
      expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
    } finally {
      c.destroy();
    }
  });

  it('a connection destroyed while the command is encoded (a getter of its document) rejects it, acknowledged or not, sending nothing', async function () {
    for (const moreToCome of [false, true]) {
      const c = await connect();
      const before = pipe.sent.length;
      const command = { insert: collection, writeConcern: { w: 0 }, get documents() {
        c.destroy();
        return [{ _id: 1 }];
      } };
      const settled = await Promise.race([
        c.command('rxcmap_test', command, { moreToCome }).then(
          () => 'resolved',
          (e: unknown) => e,
        ),
        new Promise((r) => setTimeout(() => r('pending after 1 s'), 1000)),
      ]);
      expect(settled, `moreToCome ${moreToCome}`).to.be.instanceOf(MongoNetworkError);
      expect(pipe.sent.length).to.equal(before);
    }
  });

  it('sends a command without writeConcern (killCursors) with moreToCome as it is, and takes moreToCome: false as an acknowledged command', async function () {
    const c = await connect();
    try {
      const before = pipe.sent.length;
      expect(await c.command('rxcmap_test', { killCursors: collection, cursors: [] }, { moreToCome: true })).to.deep.equal({ ok: 1 });
      const reply = await c.command('rxcmap_test', { insert: collection, documents: [{ _id: 5 }] }, { moreToCome: false });
      expect(reply).to.include({ n: 1 });
      expect(pipe.sent.slice(before).map((m) => opMsgOf(m).flags)).to.deep.equal([OpMsgFlag.moreToCome, 0]);
    } finally {
      c.destroy();
    }
  });

  it('a busy connection refuses it with ConnectionBusyError, sending nothing', async function () {
    const c = await connect();
    try {
      const first = c.command('admin', { ping: 1 });
      const before = pipe.sent.length;
      const error = await c.command('rxcmap_test', { insert: collection, documents: [{ _id: 1 }], writeConcern: { w: 0 } }, { moreToCome: true }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).to.be.instanceOf(ConnectionBusyError);
      await first;
      expect(pipe.sent.length).to.equal(before + 1);
      expect(await readBack(c)).to.deep.equal([]);
    } finally {
      c.destroy();
    }
  });

  it('a pooled connection checked in right after an unacknowledged write is available again, not closed', async function () {
    const pool = new ConnectionPool({ address: pipe.address, connectionOptions: { ...endpoint.connectionOptions, appName } });
    const events: ConnectionPoolEvent[] = [];
    pool.events$.subscribe((e) => events.push(e));
    pool.ready();
    try {
      const c = await pool.checkOut();
      await c.command('rxcmap_test', { insert: collection, documents: [{ _id: 1 }], writeConcern: { w: 0 } }, { moreToCome: true });
      pool.checkIn(c);
      const again = await pool.checkOut();
      expect(again.id).to.equal(c.id);
      expect(await readBack(again as Connection)).to.deep.equal([{ _id: 1 }]);
      pool.checkIn(again);
      expect(events.filter((e) => e.type === 'ConnectionClosed')).to.deep.equal([]);
    } finally {
      pool.close();
    }
  });

  it('passes through the wire proxy of the specs unanswered (the proxy keeps the flag bits of what it rewrites)', async function () {
    const proxy = await startWireProxy(endpoint.address);
    try {
      const c = await establishOne(proxy.address, { ...endpoint.connectionOptions, appName } as never);
      try {
        await c.command('rxcmap_test', { insert: collection, documents: [{ _id: 1 }], writeConcern: { w: 0 } }, { moreToCome: true });
        expect(await readBack(c)).to.deep.equal([{ _id: 1 }]);
        expect(c.errored).to.equal(false);
      } finally {
        c.destroy();
      }
    } finally {
      await proxy.stop();
    }
  });

  it('sends what the official driver sends for insertOne(doc, { writeConcern: { w: 0 } }): the same OP_MSG body, byte for byte, plain and compressed', async function () {
    if (!endpoint.embedded) return this.skip(); // the driver would need MONGODB_URI's credentials and TLS
    for (const compressors of [[], ['zlib']]) {
      const client = new MongoClient(`mongodb://${pipe.address}/?directConnection=true${compressors.length > 0 ? '&compressors=zlib' : ''}`);
      await client.connect();
      let before = pipe.sent.length;
      await client.db('rxcmap_test').collection(collection).insertOne({ _id: 1 as never, x: 'a' }, { writeConcern: { w: 0 } });
      await client.close();
      const isInsert = (m: WireMessage): boolean => Object.keys(opMsgOf(m).document)[0] === 'insert';
      expect(await eventually(() => pipe.sent.slice(before).some(isInsert))).to.equal(true);
      const driver = pipe.sent.slice(before).find(isInsert)!;
      const c = await connect({ compressors });
      try {
        before = pipe.sent.length;
        const command = { insert: collection, documents: [{ _id: 1, x: 'a' }], ordered: true, writeConcern: { w: 0 } };
        await c.command('rxcmap_test', command, { moreToCome: true });
        expect(await eventually(() => pipe.sent.length > before)).to.equal(true);
        const ours = pipe.sent[before];
        // Everything but the header's requestId (each client numbers its own): opCode, responseTo 0, the body.
        expect(ours.header.opCode, `compressors ${compressors.join()}`).to.equal(driver.header.opCode);
        expect(ours.header.responseTo).to.equal(0);
        expect(ours.body.equals(driver.body), `compressors ${compressors.join()}`).to.equal(true);
      } finally {
        c.destroy();
      }
    }
  });

  it('the pool closes a connection the server closed after an unacknowledged write (reason error) and hands out another', async function () {
    await setFailPoint(this, endpoint, { mode: { times: 1 }, data: { failCommands: ['insert'], errorCode: 10107, appName } });
    const pool = new ConnectionPool({ address: pipe.address, connectionOptions: { ...endpoint.connectionOptions, appName } });
    const events: ConnectionPoolEvent[] = [];
    pool.events$.subscribe((e) => events.push(e));
    pool.ready();
    try {
      const c = (await pool.checkOut()) as Connection;
      await c.command('rxcmap_test', { insert: collection, documents: [{ _id: 1 }], writeConcern: { w: 0 } }, { moreToCome: true });
      expect(await eventually(() => c.errored)).to.equal(true);
      pool.checkIn(c);
      expect(events.find((e) => e.type === 'ConnectionClosed')).to.include({ connectionId: c.id, reason: 'error' });
      const next = (await pool.checkOut()) as Connection;
      expect(next.id).to.not.equal(c.id);
      expect(await next.command('admin', { ping: 1 })).to.include({ ok: 1 });
      pool.checkIn(next);
    } finally {
      pool.close();
    }
  });
});

describe('Connection: a server that replies to a moreToCome request anyway', function () {
  it('timeoutMS bounds the write: a message the server does not read fails the connection with MongoNetworkTimeoutError', async function () {
    // The server stops reading after the first request: a 20 MB message cannot leave the client's socket.
    const server = await startHostileServer({ misbehaviour: { kind: 'answer', answer: (_request, s) => s.pause() } });
    const c = await establishOne(server.address);
    try {
      await c.command('db', { insert: 'c', documents: [{}], writeConcern: { w: 0 } }, { moreToCome: true });
      const big = new Binary(Buffer.alloc(10 * 1024 * 1024));
      const started = Date.now();
      const error = await c.command('db', { insert: 'c', writeConcern: { w: 0 } }, { moreToCome: true, timeoutMS: 200, documentSequences: { documents: [{ big }, { big }] } }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).to.be.instanceOf(MongoNetworkTimeoutError);
      expect((error as Error).message).to.match(/timed out after 200 ms writing an unacknowledged command/);
      expect(Date.now() - started).to.be.below(2000);
      expect(c.errored).to.equal(true);
    } finally {
      c.destroy();
      await server.close();
    }
  });

  it('bytes that come while a moreToCome request is still being written fail the connection, saying so; the write fails with it', async function () {
    // The server answers the handshake, then stops reading and, 100 ms later, sends a reply of its own: the 20 MB
    // unacknowledged write is still leaving the client's socket then.
    const server = await startHostileServer({
      at: 'handshake',
      misbehaviour: {
        kind: 'answer',
        answer: (request, s) => {
          s.write(encodeOpMsg(1, request.header.requestId, { isWritablePrimary: true, helloOk: true, maxWireVersion: 25, ok: 1 }));
          s.pause();
          setTimeout(() => s.write(encodeOpMsg(2, request.header.requestId + 1, { ok: 1 })), 100);
        },
      },
    });
    const c = await establishOne(server.address);
    try {
      const big = new Binary(Buffer.alloc(10 * 1024 * 1024));
      const error = await c.command('db', { insert: 'c', writeConcern: { w: 0 } }, { moreToCome: true, documentSequences: { documents: [{ big }, { big }] } }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).to.be.instanceOf(MongoNetworkError);
      expect(((error as Error).cause as Error).message).to.match(/^received \d+ bytes while sending a request with moreToCome, which gets no reply$/);
      expect(c.errored).to.equal(true);
    } finally {
      c.destroy();
      await server.close();
    }
  });

  it('fails the connection with a network error (a reply nobody awaits); the next command fails with it', async function () {
    const server = await startHostileServer({
      misbehaviour: { kind: 'answer', answer: (request, s) => s.write(encodeOpMsg(7, request.header.requestId, { ok: 1 })) },
    });
    const c = await establishOne(server.address);
    try {
      expect(await c.command('db', { insert: 'c', documents: [{}], writeConcern: { w: 0 } }, { moreToCome: true })).to.deep.equal({ ok: 1 });
      expect(await eventually(() => c.errored)).to.equal(true);
      expect(c.error).to.be.instanceOf(MongoNetworkError);
      expect((c.error as Error).cause).to.be.instanceOf(WireProtocolError);
      const error = await c.command('db', { ping: 1 }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).to.equal(c.error);
    } finally {
      c.destroy();
      await server.close();
    }
  });
});
