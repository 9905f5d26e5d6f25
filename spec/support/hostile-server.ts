/**
 * A hostile server for tests: a TCP server on 127.0.0.1 that speaks just enough of the wire protocol to answer the
 * handshake correctly when asked, and then lies or attacks in one chosen way (see {@link Misbehaviour}). It counts
 * the sockets it accepted and the ones that closed, so a test can check that a failure leaves no socket open on the
 * server side either.
 *
 * Source: extension (adversarial peers for the CMAP "Connection" Errored rules; the hello reply is shaped like
 * the embedded endpoint's, `lib/testing/embedded-server.ts`).
 */
import * as net from 'node:net';
import { deflateSync } from 'node:zlib';
import { Binary, type Document } from 'bson';
import { CompressorId } from '../../lib/connection/op-compressed';
import { decodeOpMsg, encodeOpMsg } from '../../lib/connection/op-msg';
import {
  HEADER_LENGTH,
  MessageFramer,
  OpCode,
  writeHeader,
  type WireMessage,
} from '../../lib/connection/wire-protocol';

/**
 * How the server misbehaves, once it starts to (see {@link HostileServerOptions.at}):
 *
 * - `garbage`: answers with `bytes` (default: an HTTP/1.1 400 response, as a web server on the port would), stays
 *   open.
 * - `truncated`: sends the first half of a valid reply, then closes.
 * - `oversized-length`: sends a header announcing `messageLength` bytes (default 600,000,000) and 1 KiB of body, then
 *   nothing more; stays open.
 * - `compressed-bomb`: answers with an OP_COMPRESSED (zlib) whose data inflates to `inflatedBytes` zero bytes
 *   (default 64 MiB, about 64 KB compressed) and announces `announcedBytes` as its uncompressedSize (default: the
 *   true size); stays open. Whether a compressor was negotiated depends on the client's `compressors` and on the
 *   hello reply's `compression` ({@link HostileServerOptions.hello}).
 * - `wrong-response-to`: answers with a valid reply whose responseTo names another request; stays open.
 * - `silent`: never answers; stays open.
 * - `close`: closes the connection on receiving the request.
 * - `absurd-scram`: answers the handshake, then answers `saslStart` with a valid server-first message asking for
 *   `iterations` PBKDF2 iterations (default 30,000,000) and closes the connection on `saslContinue`, so a client that
 *   derives the key anyway fails with a network error instead of an authentication error. `at` is ignored.
 * - `valid-then-extra`: sends a valid reply and, in the same write, a second one nobody asked for; stays open.
 * - `answer`: calls `answer` with the request and the socket, to write anything.
 */
export type Misbehaviour =
  | { readonly kind: 'garbage'; readonly bytes?: Buffer }
  | { readonly kind: 'truncated' }
  | { readonly kind: 'oversized-length'; readonly messageLength?: number }
  | { readonly kind: 'compressed-bomb'; readonly inflatedBytes?: number; readonly announcedBytes?: number }
  | { readonly kind: 'wrong-response-to' }
  | { readonly kind: 'silent' }
  | { readonly kind: 'close' }
  | { readonly kind: 'valid-then-extra' }
  | { readonly kind: 'absurd-scram'; readonly iterations?: number }
  | { readonly kind: 'answer'; readonly answer: (request: WireMessage, socket: net.Socket) => void };

/** Options of {@link startHostileServer}. */
export interface HostileServerOptions {
  /** What the server does wrong. */
  readonly misbehaviour: Misbehaviour;
  /**
   * `handshake`: misbehave from the first request on (the handshake). `command` (default): answer the handshake
   * correctly, then misbehave on every later request.
   */
  readonly at?: 'handshake' | 'command';
  /** Fields merged into the hello reply, e.g. `{ maxMessageSizeBytes: 2 ** 31 - 1 }` or `{ compression: ['zlib'] }`. */
  readonly hello?: Document;
}

/** A running hostile server. */
export interface HostileServer {
  /** `127.0.0.1:<port>`. */
  readonly address: string;
  /** The TCP port it listens on. */
  readonly port: number;
  /** Sockets accepted since start. */
  readonly accepted: number;
  /** Accepted sockets that have closed since (by either side). */
  readonly closed: number;
  /** Accepted sockets still open. */
  readonly open: number;
  /** Stops listening and destroys every socket still open; resolves once the server is closed. */
  close(): Promise<void>;
}

/** The bytes of a 400 response from an HTTP server: what a client gets when pointed at a web server's port. */
export const HTTP_400_RESPONSE = Buffer.from(
  'HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 11\r\nConnection: close\r\n\r\nBad Request',
  'latin1',
);

const bombs = new Map<number, Buffer>();

/** zlib data that inflates to `inflatedBytes` zero bytes (built once per size). */
export function zlibBomb(inflatedBytes: number): Buffer {
  let bomb = bombs.get(inflatedBytes);
  if (bomb === undefined) {
    bomb = deflateSync(Buffer.alloc(inflatedBytes), { level: 9 });
    bombs.set(inflatedBytes, bomb);
  }
  return bomb;
}

/**
 * An OP_COMPRESSED wrapping OP_MSG, answering `responseTo`: `data` announced as `uncompressedSize` bytes, with
 * compressor id `compressorId` (default zlib, 2). Nothing is checked: it may lie.
 */
export function opCompressed(
  responseTo: number,
  data: Buffer,
  uncompressedSize: number,
  compressorId: number = CompressorId.zlib,
): Buffer {
  const out = Buffer.alloc(HEADER_LENGTH + 9 + data.length);
  writeHeader(out, { messageLength: out.length, requestId: 77, responseTo, opCode: OpCode.OP_COMPRESSED });
  out.writeInt32LE(OpCode.OP_MSG, 16);
  out.writeInt32LE(uncompressedSize, 20);
  out[24] = compressorId;
  data.copy(out, 25);
  return out;
}

/**
 * Starts a hostile server on 127.0.0.1 (a free port). Resolves once it listens. It frames requests with a
 * {@link MessageFramer} (default 48,000,000-byte limit) and destroys a connection that sends an unframable stream.
 */
export async function startHostileServer(options: HostileServerOptions): Promise<HostileServer> {
  const sockets = new Set<net.Socket>();
  let accepted = 0;
  let closed = 0;
  const server = net.createServer((socket) => {
    accepted++;
    sockets.add(socket);
    socket.on('close', () => {
      closed++;
      sockets.delete(socket);
    });
    socket.on('error', () => undefined);
    const framer = new MessageFramer();
    let requests = 0;
    socket.on('data', (chunk: Buffer) => {
      let messages: WireMessage[];
      try {
        messages = framer.push(chunk);
      } catch {
        socket.destroy();
        return;
      }
      for (const request of messages) {
        if (socket.destroyed) return;
        serve(options, socket, request, requests++ === 0);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    address: `127.0.0.1:${port}`,
    port,
    get accepted() {
      return accepted;
    },
    get closed() {
      return closed;
    },
    get open() {
      return sockets.size;
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function serve(options: HostileServerOptions, socket: net.Socket, request: WireMessage, first: boolean): void {
  const m = options.misbehaviour;
  const command = request.header.opCode === OpCode.OP_MSG ? decodeOpMsg(request.body).document : {};
  const name = Object.keys(command)[0]?.toLowerCase() ?? '';
  const id = request.header.requestId;
  if (m.kind === 'absurd-scram') {
    if (name === 'saslstart') {
      const clientFirst = command.payload instanceof Binary ? Buffer.from(command.payload.buffer).toString('utf8') : '';
      const clientNonce = /r=([^,]*)/.exec(clientFirst)?.[1] ?? '';
      const salt = Buffer.from('salt-of-16-bytes').toString('base64');
      const serverFirst = `r=${clientNonce}hostile,s=${salt},i=${m.iterations ?? 30_000_000}`;
      const payload = new Binary(Buffer.from(serverFirst));
      socket.write(encodeOpMsg(1, id, { conversationId: 1, done: false, payload, ok: 1 }));
    } else if (name === 'saslcontinue') {
      socket.destroy();
    } else {
      socket.write(encodeOpMsg(1, id, first ? helloReply(options, command) : { ok: 1 }));
    }
    return;
  }
  if (first && options.at !== 'handshake') {
    socket.write(encodeOpMsg(1, id, helloReply(options, command)));
    return;
  }
  const valid = (): Buffer => encodeOpMsg(1, id, first ? helloReply(options, command) : { ok: 1 });
  switch (m.kind) {
    case 'garbage':
      socket.write(m.bytes ?? HTTP_400_RESPONSE);
      return;
    case 'truncated': {
      const reply = valid();
      socket.end(reply.subarray(0, reply.length >> 1));
      return;
    }
    case 'oversized-length': {
      const head = Buffer.alloc(HEADER_LENGTH + 1024);
      const messageLength = m.messageLength ?? 600_000_000;
      writeHeader(head, { messageLength, requestId: 1, responseTo: id, opCode: OpCode.OP_MSG });
      socket.write(head);
      return;
    }
    case 'compressed-bomb': {
      const inflated = m.inflatedBytes ?? 64 * 1024 * 1024;
      socket.write(opCompressed(id, zlibBomb(inflated), m.announcedBytes ?? inflated));
      return;
    }
    case 'wrong-response-to':
      socket.write(encodeOpMsg(1, id + 1000, first ? helloReply(options, command) : { ok: 1 }));
      return;
    case 'silent':
      return;
    case 'close':
      socket.destroy();
      return;
    case 'valid-then-extra':
      socket.write(Buffer.concat([valid(), encodeOpMsg(1, id, { ok: 1 })]));
      return;
    case 'answer':
      m.answer(request, socket);
      return;
  }
}

/** A standalone server's hello reply (the embedded endpoint's shape), with `options.hello` merged in. */
function helloReply(options: HostileServerOptions, command: Document): Document {
  const legacy = command.ismaster !== undefined || command.isMaster !== undefined;
  return {
    ...(legacy ? { ismaster: true } : { isWritablePrimary: true }),
    helloOk: true,
    maxBsonObjectSize: 16 * 1024 * 1024,
    maxMessageSizeBytes: 48_000_000,
    maxWriteBatchSize: 100_000,
    localTime: new Date(),
    logicalSessionTimeoutMinutes: 30,
    connectionId: 1,
    minWireVersion: 0,
    maxWireVersion: 25,
    readOnly: false,
    ...(typeof command.saslSupportedMechs === 'string' ? { saslSupportedMechs: ['SCRAM-SHA-256'] } : {}),
    ...options.hello,
    ok: 1,
  };
}

/**
 * The sockets open in this process with `port` at either end: the client ends connected to a server on `port` and
 * that server's ends. Counts the ref'd sockets (every one a `Connection` opens); `process._getActiveHandles` is
 * Node's own listing of live handles (what `why-is-node-running` reads).
 */
export function openSocketsOn(port: number): number {
  const handles = (process as unknown as { _getActiveHandles(): unknown[] })._getActiveHandles();
  return handles.filter((h) => h instanceof net.Socket && (h.remotePort === port || h.localPort === port)).length;
}
