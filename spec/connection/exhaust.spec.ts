/**
 * OP_MSG exhaust on one connection: a request with exhaustAllowed may be answered by a stream of replies (moreToCome),
 * each answering the previous one; the connection reads them in order with nextReply() and takes no other command
 * until the stream ends. Without exhaustAllowed a moreToCome reply stays a wire-protocol error. The peer is the hostile
 * server (spec/support/hostile-server.ts), scripted per request.
 */
import { expect } from 'chai';
import type * as net from 'node:net';
import type { Document } from 'bson';
import { ConnectionBusyError, ConnectionPool, MongoNetworkError, type Connection } from '../../lib';
import { MAX_UNREAD_STREAMED_REPLIES } from '../../lib/connection/connection';
import { decodeOpMsg, encodeOpMsg, OpMsgFlag } from '../../lib/connection/op-msg';
import { WireProtocolError, type WireMessage } from '../../lib/connection/wire-protocol';
import { eventually } from '../support/endpoint';
import { startHostileServer, type HostileServer } from '../support/hostile-server';

describe('Connection: exhaustAllowed and moreToCome', function () {
  let server: HostileServer;
  let pool: ConnectionPool;
  let requests: { flags: number; document: Document; requestId: number }[];
  let socket: net.Socket | undefined;
  let answer: (request: WireMessage, socket: net.Socket) => void;

  beforeEach(async function () {
    requests = [];
    socket = undefined;
    answer = () => undefined;
    server = await startHostileServer({
      misbehaviour: {
        kind: 'answer',
        answer: (request, s) => {
          const decoded = decodeOpMsg(request.body);
          requests.push({ flags: decoded.flags, document: decoded.document, requestId: request.header.requestId });
          socket = s;
          answer(request, s);
        },
      },
    });
    pool = new ConnectionPool({ address: server.address, connectionOptions: { socketTimeoutMS: 2000 } });
    pool.ready();
  });
  afterEach(async function () {
    pool.close();
    await server.close();
  });

  /** Streams `count` replies with moreToCome, each answering the previous one, then one without. */
  function stream(count: number, id: number, s: net.Socket, final = true): number {
    let responseTo = id;
    for (let i = 0; i < count; i++) {
      const requestId = 100 + i;
      s.write(encodeOpMsg(requestId, responseTo, { n: i, ok: 1 }, OpMsgFlag.moreToCome));
      responseTo = requestId;
    }
    if (final) s.write(encodeOpMsg(999, responseTo, { n: count, ok: 1 }));
    return responseTo;
  }

  it('sets the exhaustAllowed flag only when asked, and reads every streamed reply in order', async function () {
    answer = (request, s) => (requests.length === 1 ? s.write(encodeOpMsg(1, request.header.requestId, { ok: 1 })) : stream(3, request.header.requestId, s));
    const c: Connection = await pool.checkOut();
    await c.command('admin', { ping: 1 });
    expect(requests[0].flags).to.equal(0);
    const first = await c.command('admin', { hello: 1 }, { exhaustAllowed: true });
    expect(requests[1].flags & OpMsgFlag.exhaustAllowed).to.equal(OpMsgFlag.exhaustAllowed);
    expect(first.n).to.equal(0);
    expect(c.moreToCome).to.equal(true);
    expect(c.busy).to.equal(true);
    const error = await c.command('admin', { ping: 1 }).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(ConnectionBusyError);
    const rest = [await c.nextReply(), await c.nextReply(), await c.nextReply()].map((d) => d.n);
    expect(rest).to.deep.equal([1, 2, 3]);
    expect(c.moreToCome).to.equal(false);
    expect(c.busy).to.equal(false);
    expect(c.errored).to.equal(false);
    pool.checkIn(c);
  });

  it('reads a streamed reply that arrives before nextReply() is called, and waits for one not yet sent', async function () {
    let streamed = 0;
    answer = (request, s) => (streamed = stream(2, request.header.requestId, s, false));
    const c: Connection = await pool.checkOut();
    await c.command('admin', { hello: 1 }, { exhaustAllowed: true });
    // The second reply is received before it is read.
    expect(await eventually(() => (c as unknown as { unread: unknown[] }).unread.length > 0), 'a streamed reply received, not yet read').to.equal(true);
    expect((await c.nextReply()).n).to.equal(1);
    const waiting = c.nextReply();
    socket!.write(encodeOpMsg(500, streamed, { n: 2, ok: 1 }));
    expect((await waiting).n).to.equal(2);
    expect(c.moreToCome).to.equal(false);
    pool.checkIn(c);
  });

  it(`holds at most ${MAX_UNREAD_STREAMED_REPLIES} streamed replies nobody read: a server streaming on fails the connection, its memory bounded`, async function () {
    const unread = (c: Connection): number => (c as unknown as { unread: unknown[] }).unread.length;
    // As many as it holds, the stream still open: nothing fails, and they are read in order.
    answer = (request, s) => stream(1 + MAX_UNREAD_STREAMED_REPLIES, request.header.requestId, s, false);
    const held: Connection = await pool.checkOut();
    expect((await held.command('admin', { hello: 1 }, { exhaustAllowed: true })).n).to.equal(0);
    expect(await eventually(() => unread(held) === MAX_UNREAD_STREAMED_REPLIES), 'replies held').to.equal(true);
    expect(held.errored).to.equal(false);
    expect((await held.nextReply()).n).to.equal(1);
    held.destroy();
    pool.checkIn(held);
    // One more than that: the connection fails with a protocol error that says why, and holds no more.
    answer = (request, s) => stream(2 + MAX_UNREAD_STREAMED_REPLIES, request.header.requestId, s, false);
    const flooded: Connection = await pool.checkOut();
    expect((await flooded.command('admin', { hello: 1 }, { exhaustAllowed: true })).n).to.equal(0);
    expect(await eventually(() => flooded.errored), 'the connection failed').to.equal(true);
    expect(flooded.error).to.be.instanceOf(MongoNetworkError);
    expect(flooded.error?.message).to.include(`more than ${MAX_UNREAD_STREAMED_REPLIES} streamed replies received and not yet read`);
    pool.checkIn(flooded);
  });

  it('without exhaustAllowed, a moreToCome reply still errors the connection', async function () {
    answer = (request, s) => stream(1, request.header.requestId, s);
    const c: Connection = await pool.checkOut();
    const error = await c.command('admin', { hello: 1 }).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(MongoNetworkError);
    expect((error as Error).message).to.match(/moreToCome flag set \(0x2\), but the request did not set exhaustAllowed/);
    expect(c.errored).to.equal(true);
    pool.checkIn(c);
  });

  it('a malformed streamed reply fails the read with a network error (cause WireProtocolError) and errors the connection', async function () {
    let last = 0;
    answer = (request, s) => (last = stream(1, request.header.requestId, s, false));
    const c: Connection = await pool.checkOut();
    await c.command('admin', { hello: 1 }, { exhaustAllowed: true });
    const reading = c.nextReply();
    const bad = encodeOpMsg(7, last, { ok: 1 });
    bad.writeUInt32LE(1 << 5, 16); // an unknown required flag bit
    socket!.write(bad);
    const error = await reading.catch((e: unknown) => e);
    expect(error).to.be.instanceOf(MongoNetworkError);
    expect((error as MongoNetworkError).cause).to.be.instanceOf(WireProtocolError);
    expect(c.errored).to.equal(true);
    pool.checkIn(c);
    expect(await eventually(() => server.open === 0, 1000)).to.equal(true);
  });

  it('a streamed reply with ok: 0 and moreToCome is a wire-protocol error', async function () {
    answer = (request, s) => s.write(encodeOpMsg(5, request.header.requestId, { ok: 0, errmsg: 'x' }, OpMsgFlag.moreToCome));
    const c: Connection = await pool.checkOut();
    const error = await c.command('admin', { hello: 1 }, { exhaustAllowed: true }).catch((e: unknown) => e);
    expect((error as Error).message).to.match(/moreToCome flag set with ok: 0/);
    expect(c.errored).to.equal(true);
    pool.checkIn(c);
  });

  it('nextReply() with no stream rejects with WireProtocolError and leaves the connection usable', async function () {
    answer = (request, s) => s.write(encodeOpMsg(1, request.header.requestId, { ok: 1 }));
    const c: Connection = await pool.checkOut();
    const error = await c.nextReply().catch((e: unknown) => e);
    expect(error).to.be.instanceOf(WireProtocolError);
    expect(c.errored).to.equal(false);
    expect((await c.command('admin', { ping: 1 })).ok).to.equal(1);
    pool.checkIn(c);
  });

  it('checked in while the stream is open, the connection is closed, and the next borrower gets another one', async function () {
    answer = (request, s) => {
      const document = decodeOpMsg(request.body).document;
      if (document.ping !== undefined) s.write(encodeOpMsg(1, request.header.requestId, { ok: 1 }));
      else stream(1, request.header.requestId, s, false);
    };
    const closed: unknown[] = [];
    pool.events$.subscribe((e) => e.type === 'ConnectionClosed' && closed.push({ connectionId: e.connectionId, reason: e.reason }));
    const c: Connection = await pool.checkOut();
    await c.command('admin', { hello: 1 }, { exhaustAllowed: true });
    const reading = c.nextReply().catch((e: unknown) => e);
    pool.checkIn(c);
    const error = await reading;
    expect(error).to.be.instanceOf(MongoNetworkError);
    expect((error as Error).message).to.equal(`Connection ${c.id} to ${server.address} closed: it was checked in while a request was in flight`);
    expect(closed).to.deep.equal([{ connectionId: c.id, reason: 'error' }]);
    const next: Connection = await pool.checkOut();
    expect(next.id).to.not.equal(c.id);
    expect((await next.command('admin', { ping: 1 })).ok).to.equal(1);
    pool.checkIn(next);
    expect(pool.snapshot()).to.include({ totalConnectionCount: 1, availableConnectionCount: 1 });
  });

  it('destroy() ends a read waiting for a streamed reply at once', async function () {
    answer = (request, s) => stream(1, request.header.requestId, s, false);
    const c: Connection = await pool.checkOut();
    await c.command('admin', { hello: 1 }, { exhaustAllowed: true });
    const reading = c.nextReply().catch((e: unknown) => e);
    c.destroy();
    expect(await reading).to.be.instanceOf(MongoNetworkError);
    pool.checkIn(c);
    expect(await eventually(() => server.open === 0, 1000)).to.equal(true);
  });
  it('refuses an unacknowledged write (moreToCome) while the server streams replies, as any command: ConnectionBusyError', async function () {
    answer = (request, s) => (requests.length === 1 ? s.write(encodeOpMsg(1, request.header.requestId, { ok: 1 })) : stream(2, request.header.requestId, s, false));
    const c: Connection = await pool.checkOut();
    try {
      await c.command('admin', { hello: 1 }, { exhaustAllowed: true });
      await c.command('admin', { hello: 1 }, { exhaustAllowed: true });
      expect(c.moreToCome).to.equal(true);
      const sent = requests.length;
      const error = await c.command('db', { insert: 'c', documents: [{}], writeConcern: { w: 0 } }, { moreToCome: true }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).to.be.instanceOf(ConnectionBusyError);
      await new Promise((r) => setTimeout(r, 20));
      expect(requests.length).to.equal(sent);
    } finally {
      c.destroy();
      pool.checkIn(c);
    }
  });
});
