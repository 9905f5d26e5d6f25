/**
 * Every kind of bad reply fails the command with a typed network error and leaves the connection errored, so the
 * pool closes it with reason `error` on check-in, and no socket stays open on the server side. The peer is the
 * hostile server (spec/support/hostile-server.ts): it answers the handshake properly (announcing maxMessageSizeBytes
 * 2^31-1, which the client bounds to 48,000,000), then answers the next request with the bytes under test. A whole
 * reply whose only fault is a value JavaScript cannot read (a string that is not valid UTF-8, a regular expression
 * RegExp refuses) is not a bad reply of this kind (see the last block).
 */
import { expect } from 'chai';
import type * as net from 'node:net';
import { BSONRegExp, serialize } from 'bson';
import { firstValueFrom, from } from 'rxjs';
import { ConnectionPool, MongoNetworkError, MongoNetworkTimeoutError, MongoServerError, connect, connectionFactory, type Connection, type ConnectionPoolEvent } from '../../lib';
import { decodeOpMsg, encodeOpMsg, OpMsgFlag } from '../../lib/connection/op-msg';
import { OpCode, WireProtocolError, writeHeader } from '../../lib/connection/wire-protocol';
import { eventually } from '../support/endpoint';
import { startHostileServer, type HostileServer } from '../support/hostile-server';

type Answer = (requestId: number, socket: net.Socket) => void;

/** A server that answers the handshake (maxMessageSizeBytes 2^31-1), then every later request with `answer`. */
function scriptedServer(answer: Answer): Promise<HostileServer> {
  return startHostileServer({
    misbehaviour: { kind: 'answer', answer: (request, socket) => answer(request.header.requestId, socket) },
    hello: { maxMessageSizeBytes: 2 ** 31 - 1 },
  });
}

function header(length: number, responseTo: number, opCode: number): Buffer {
  const b = Buffer.alloc(16);
  writeHeader(b, { messageLength: length, requestId: 9, responseTo, opCode });
  return b;
}

const cases: [string, Answer, RegExp, typeof MongoNetworkError][] = [
  ['a length below the header size', (id, s) => s.write(header(8, id, OpCode.OP_MSG)), /message length 8/, MongoNetworkError],
  [
    'a 600,000,000-byte length after announcing maxMessageSizeBytes 2^31-1',
    (id, s) => s.write(header(600_000_000, id, OpCode.OP_MSG)),
    /message length 600000000 is outside the allowed range 16\.\.48000000 bytes \(maxMessageSizeBytes is 48000000\)/,
    MongoNetworkError,
  ],
  [
    'an OP_COMPRESSED reply when no compressor was negotiated',
    (id, s) => {
      const out = Buffer.alloc(16 + 9 + 10);
      writeHeader(out, { messageLength: out.length, requestId: 9, responseTo: id, opCode: OpCode.OP_COMPRESSED });
      out.writeInt32LE(OpCode.OP_MSG, 16);
      out.writeInt32LE(10, 20);
      s.write(out); // compressor id 0 (noop)
    },
    /OP_COMPRESSED \(compressor id 0\) received, but no compressor was negotiated/,
    MongoNetworkError,
  ],
  [
    'an unknown opcode',
    (id, s) => {
      const body = Buffer.from(serialize({ ok: 1 }));
      s.write(Buffer.concat([header(16 + body.length, id, 4242), body]));
    },
    /unexpected opcode 4242 in reply \(expected OP_MSG, 2013\)/,
    MongoNetworkError,
  ],
  [
    'invalid BSON',
    (id, s) => {
      const body = Buffer.from([0, 0, 0, 0, 0, 12, 0, 0, 0, 0x10, 0x61, 0, 1, 0, 0, 0]); // int32 "a" cut short
      s.write(Buffer.concat([header(16 + body.length, id, OpCode.OP_MSG), body]));
    },
    /wire-protocol error/,
    MongoNetworkError,
  ],
  [
    'a reply with the moreToCome flag set, to a request without exhaustAllowed',
    (id, s) => s.write(encodeOpMsg(3, id, { ok: 1 }, OpMsgFlag.moreToCome)),
    /wire-protocol error: OP_MSG reply has the moreToCome flag set \(0x2\), but the request did not set exhaustAllowed/,
    MongoNetworkError,
  ],
  ['a responseTo that answers another request', (id, s) => s.write(encodeOpMsg(3, id + 1000, { ok: 1 })), /does not match the request in flight/, MongoNetworkError],
  ['the server closing the socket', (_id, s) => s.destroy(), /closed by the server or the network/, MongoNetworkError],
  ['no reply within the timeout', () => undefined, /timed out after 50 ms/, MongoNetworkTimeoutError],
];

describe('malformed replies and network failures (through the pool)', function () {
  for (const [what, answer, message, type] of cases) {
    it(`${what}: typed network error, connection errored, closed with reason error`, async function () {
      const server = await scriptedServer(answer);
      const pool = new ConnectionPool({ address: server.address, connectionOptions: { socketTimeoutMS: 50 } });
      const events: ConnectionPoolEvent[] = [];
      pool.events$.subscribe((e) => events.push(e));
      pool.ready();
      try {
        const c: Connection = await pool.checkOut();
        const error = await c.command('admin', { ping: 1 }).catch((e) => e);
        expect(error).to.be.instanceOf(type);
        expect(error.message).to.match(message);
        expect(c.errored).to.equal(true);
        pool.checkIn(c);
        expect(events.at(-1)).to.include({ type: 'ConnectionClosed', reason: 'error', connectionId: 1 });
        expect(pool.snapshot().totalConnectionCount).to.equal(0);
        if (/wire-protocol error/.test(error.message)) expect(error.cause).to.be.instanceOf(WireProtocolError);
        expect(await eventually(() => server.open === 0, 1000), 'server-side socket left open').to.equal(true);
        expect(server.closed).to.equal(server.accepted);
      } finally {
        pool.close();
        await server.close();
      }
    });
  }
});

/** The BSON of `{ <fields>, <name>: "a\xff\xfeb" }`: whole, but with a string that is not valid UTF-8. */
function withInvalidUtf8(fields: Record<string, unknown>, name: string): Buffer {
  const head = Buffer.from(serialize(fields)).subarray(4, -1); // the elements of `fields`
  const text = Buffer.from([0x61, 0xff, 0xfe, 0x62, 0]);
  const length = Buffer.alloc(4);
  length.writeInt32LE(text.length);
  const element = Buffer.concat([Buffer.from([0x02]), Buffer.from(`${name}\0`), length, text]);
  const size = 4 + head.length + element.length + 1;
  const out = Buffer.alloc(size);
  out.writeInt32LE(size, 0);
  Buffer.concat([head, element, Buffer.from([0])]).copy(out, 4);
  return out;
}

/** An OP_MSG reply to `responseTo` whose body is the BSON `bson`, with flag bits `flags`. */
function opMsgWith(bson: Buffer, responseTo: number, flags = 0): Buffer {
  const out = Buffer.alloc(16 + 5 + bson.length);
  writeHeader(out, { messageLength: out.length, requestId: 9, responseTo, opCode: OpCode.OP_MSG });
  out.writeUInt32LE(flags, 16);
  bson.copy(out, 21);
  return out;
}

describe('a whole reply holding a value JavaScript cannot read (a string that is not valid UTF-8, a regular expression RegExp refuses)', function () {
  // The message and its BSON are whole, so the connection is in step with the server: only a value is unreadable (a
  // document stored with bad UTF-8, or an errmsg the server cut inside a character). The command fails; the connection,
  // its pool and the server are fine.
  const hello = { isWritablePrimary: true, helloOk: true, maxWireVersion: 21, minWireVersion: 0, maxBsonObjectSize: 16 * 1024 * 1024, ok: 1 };

  /** A server that answers hello properly, `find` with `bad` (with flag bits `flags`), and anything else with `{ ok: 1 }`. */
  function serverAnswering(bad: Buffer, flags = 0): Promise<HostileServer> {
    return startHostileServer({
      misbehaviour: {
        kind: 'answer',
        answer: (request, socket) => {
          const id = request.header.requestId;
          const name = Object.keys(decodeOpMsg(request.body).document)[0]?.toLowerCase();
          if (name === 'find') socket.write(opMsgWith(bad, id, flags));
          else socket.write(encodeOpMsg(1, id, name === 'hello' || name === 'ismaster' ? hello : { ok: 1 }));
        },
      },
    });
  }

  /**
   * The error of a `find` that a server answers with `reply`, on a connection checked out of a pool; then proves the
   * connection usable (a ping), pooled again once checked in, and never closed.
   */
  async function findErrorOnUsableConnection(reply: Buffer): Promise<unknown> {
    const server = await serverAnswering(reply);
    const pool = new ConnectionPool({ address: server.address });
    const events: ConnectionPoolEvent[] = [];
    pool.events$.subscribe((e) => events.push(e));
    pool.ready();
    try {
      const c: Connection = await pool.checkOut();
      const error = await c.command('test', { find: 'c' }).catch((e: unknown) => e);
      expect(c.errored).to.equal(false);
      expect(await c.command('admin', { ping: 1 })).to.deep.equal({ ok: 1 });
      pool.checkIn(c);
      expect(events.map((e) => e.type)).to.not.include('ConnectionClosed');
      expect(pool.snapshot().availableConnectionCount).to.equal(1);
      return error;
    } finally {
      pool.close();
      await server.close();
    }
  }

  it('ok: 1: rejects with a WireProtocolError saying so; the connection stays usable and pooled', async function () {
    const error = await findErrorOnUsableConnection(withInvalidUtf8({ ok: 1, cursor: { id: 0, ns: 'test.c' } }, 'name'));
    expect(error).to.be.instanceOf(WireProtocolError);
    expect(error).to.not.be.instanceOf(MongoNetworkError);
    expect((error as Error).message).to.match(/cannot be read \(Invalid UTF-8 string in BSON document\)/);
  });

  it('ok: 0: rejects with the MongoServerError, its code and labels kept (the bad bytes of its errmsg replaced by U+FFFD)', async function () {
    const error = await findErrorOnUsableConnection(withInvalidUtf8({ ok: 0, code: 11000, codeName: 'DuplicateKey', errorLabels: ['SomeLabel'] }, 'errmsg'));
    expect(error).to.be.instanceOf(MongoServerError);
    expect(error).to.include({ code: 11000, codeName: 'DuplicateKey', message: 'a\ufffd\ufffdb' });
    expect((error as MongoServerError).hasErrorLabel('SomeLabel')).to.equal(true);
  });

  it('through a client: neither clears the pool nor checks the server again', async function () {
    const server = await serverAnswering(withInvalidUtf8({ ok: 1 }, 'name'));
    const client = connect(`mongodb://${server.address}/?directConnection=true&heartbeatFrequencyMS=60000`);
    const types: string[] = [];
    client.events$.subscribe((e) => types.push(e.type));
    try {
      await client.command('admin', { ping: 1 });
      const checks = types.filter((t) => t === 'ServerHeartbeatStarted').length;
      const error = await client.command('test', { find: 'c' }).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(WireProtocolError);
      expect(await client.command('admin', { ping: 1 })).to.deep.equal({ ok: 1 });
      await new Promise((resolve) => setTimeout(resolve, 600)); // past minHeartbeatFrequencyMS
      expect(types.filter((t) => t === 'ConnectionPoolCleared')).to.deep.equal([]);
      expect(types.filter((t) => t === 'ConnectionClosed')).to.deep.equal([]);
      expect(types.filter((t) => t === 'ServerHeartbeatStarted').length).to.equal(checks);
    } finally {
      await client.close();
      await server.close();
    }
  });

  it('a regular expression JavaScript cannot compile (PCRE syntax a server accepts) is such a value too', async function () {
    // A server stores `/(?i)abc/` or `/a++b/` as it is; `new RegExp` refuses both.
    for (const [reply, expected] of [
      [serialize({ ok: 1, cursor: { id: 0, ns: 'test.c', firstBatch: [{ _id: 1, pattern: new BSONRegExp('(?i)abc', '') }] } }), WireProtocolError],
      [serialize({ ok: 0, code: 2, codeName: 'BadValue', errmsg: 'bad', errInfo: { pattern: new BSONRegExp('a++b', '') } }), MongoServerError],
    ] as const) {
      const error = await findErrorOnUsableConnection(Buffer.from(reply));
      expect(error).to.be.instanceOf(expected);
      if (expected === WireProtocolError) expect((error as Error).message).to.match(/Invalid regular expression: \/\(\?i\)abc\//);
      else expect(error).to.include({ code: 2, codeName: 'BadValue', message: 'bad' });
    }
  });

  it('in a streamed reply (moreToCome), still fails the connection: a stream cannot leave a reply out', async function () {
    const server = await serverAnswering(withInvalidUtf8({ ok: 1 }, 'name'), OpMsgFlag.moreToCome);
    const pool = new ConnectionPool({ address: server.address });
    pool.ready();
    try {
      const c: Connection = await pool.checkOut();
      const error = await c.command('test', { find: 'c' }, { exhaustAllowed: true }).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(MongoNetworkError);
      expect((error as Error).cause).to.be.instanceOf(WireProtocolError);
      expect((error as Error).message).to.match(/Invalid UTF-8/);
      expect(c.errored).to.equal(true);
      pool.checkIn(c);
    } finally {
      pool.close();
      await server.close();
    }
    // Decoded without acceptUnreadableValues (as the endpoint reads a request), such a document is invalid BSON.
    expect(() => decodeOpMsg(Buffer.concat([Buffer.from([0, 0, 0, 0, 0]), withInvalidUtf8({ ok: 1 }, 'name')]))).to.throw(WireProtocolError, /invalid BSON/);
  });

  it('in the hello reply of the handshake: the establishment fails as for a malformed hello reply, its socket closed', async function () {
    // The connection keeps its hello reply for life, and has not been handed over: it is of no use.
    const server = await startHostileServer({
      at: 'handshake',
      misbehaviour: { kind: 'answer', answer: (request, socket) => socket.write(opMsgWith(withInvalidUtf8(hello, 'me'), request.header.requestId)) },
    });
    const factory = connectionFactory({ host: '127.0.0.1', port: server.port });
    try {
      const error = await firstValueFrom(from(factory({ id: 1, generation: 0, address: server.address, signal: new AbortController().signal }))).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(MongoNetworkError);
      expect((error as Error).message).to.match(/failed: wire-protocol error: the hello reply holds a value that cannot be read/);
      expect((error as Error).cause).to.be.instanceOf(WireProtocolError);
      expect((error as MongoNetworkError).hasErrorLabel('SystemOverloadedError')).to.equal(false);
      expect(await eventually(() => server.open === 0, 1000), 'server-side socket left open').to.equal(true);
    } finally {
      await server.close();
    }
  });
});
