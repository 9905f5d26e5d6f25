/**
 * Every kind of bad reply fails the command with a typed network error and leaves the connection errored, so the
 * pool closes it with reason `error` on check-in. The peer is a scripted server: it answers the handshake properly,
 * then answers the next request with the bytes under test.
 */
import { expect } from 'chai';
import * as net from 'node:net';
import { serialize } from 'bson';
import { ConnectionPool, MongoNetworkError, MongoNetworkTimeoutError, type Connection, type ConnectionPoolEvent } from '../../lib';
import { encodeOpMsg } from '../../lib/connection/op-msg';
import { MessageFramer, OpCode, writeHeader } from '../../lib/connection/wire-protocol';

type Answer = (requestId: number, socket: net.Socket) => void;

/** A server that answers the handshake with a small maxMessageSizeBytes, then every later request with `answer`. */
async function scriptedServer(answer: Answer): Promise<{ address: string; close(): void }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    sockets.add(socket);
    const framer = new MessageFramer();
    let handshaken = false;
    socket.on('data', (chunk: Buffer) => {
      for (const m of framer.push(chunk)) {
        if (!handshaken) {
          handshaken = true;
          socket.write(encodeOpMsg(1, m.header.requestId, { ismaster: true, maxWireVersion: 21, maxMessageSizeBytes: 1000, ok: 1 }));
        } else {
          answer(m.header.requestId, socket);
        }
      }
    });
    socket.on('error', () => undefined);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    address: `127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    close: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

function header(length: number, responseTo: number, opCode: number): Buffer {
  const b = Buffer.alloc(16);
  writeHeader(b, { messageLength: length, requestId: 9, responseTo, opCode });
  return b;
}

const cases: [string, Answer, RegExp, typeof MongoNetworkError][] = [
  ['a length below the header size', (id, s) => s.write(header(8, id, OpCode.OP_MSG)), /message length 8/, MongoNetworkError],
  ['a length over maxMessageSizeBytes', (id, s) => s.write(header(5000, id, OpCode.OP_MSG)), /outside the allowed range 16\.\.1000/, MongoNetworkError],
  [
    'an unknown opcode',
    (id, s) => {
      const body = Buffer.from(serialize({ ok: 1 }));
      s.write(Buffer.concat([header(16 + body.length, id, 4242), body]));
    },
    /unexpected opcode 4242/,
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
      } finally {
        pool.close();
        server.close();
      }
    });
  }
});
