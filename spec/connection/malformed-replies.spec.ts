/**
 * Every kind of bad reply fails the command with a typed network error and leaves the connection errored, so the
 * pool closes it with reason `error` on check-in, and no socket stays open on the server side. The peer is the
 * hostile server (spec/support/hostile-server.ts): it answers the handshake properly (announcing maxMessageSizeBytes
 * 2^31-1, which the client bounds to 48,000,000), then answers the next request with the bytes under test.
 */
import { expect } from 'chai';
import type * as net from 'node:net';
import { serialize } from 'bson';
import { ConnectionPool, MongoNetworkError, MongoNetworkTimeoutError, type Connection, type ConnectionPoolEvent } from '../../lib';
import { encodeOpMsg, OpMsgFlag } from '../../lib/connection/op-msg';
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
