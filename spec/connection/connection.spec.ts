/**
 * Real connections over TCP, against the embedded endpoint, or the server in MONGODB_URI when it is set.
 */
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import * as net from 'node:net';
import { inspect } from 'node:util';
import { Double, Int32, Long, serialize, type Document } from 'bson';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { inflateSync } from 'node:zlib';
import { firstValueFrom, from } from 'rxjs';
import {
  Connection,
  ConnectionBusyError,
  ConnectionPool,
  IncompatibleServerError,
  InvalidOptionError,
  MongoNetworkError,
  MongoNetworkTimeoutError,
  connectionFactory,
  type CommandEvent,
  type ConnectionOptions,
  type ConnectionPoolEvent,
  type ConnectionPoolOptions,
} from '../../lib';
import { compressMessage } from '../../lib/connection/op-compressed';
import { decodeOpMsg, encodeOpMsg, OpMsgFlag } from '../../lib/connection/op-msg';
import { HEADER_LENGTH, OpCode, WireProtocolError, type WireMessage } from '../../lib/connection/wire-protocol';
import { DRIVER_INFO } from '../../lib/version';
import { closedPort, eventually, startTestEndpoint, type TestEndpoint } from '../support/endpoint';
import { blockEventLoop } from '../support/blocked-loop';
import { occupyThreadPool } from '../support/busy-thread-pool';
import { startWireProxy } from '../support/wire-proxy';
import { opCompressed, startHostileServer, zlibBomb, type HostileServer, type HostileServerOptions } from '../support/hostile-server';
import * as pkg from '../../package.json';

describe('Connection (TCP, OP_MSG)', function () {
  let endpoint: TestEndpoint;
  const pools: ConnectionPool[] = [];

  before(async function () {
    endpoint = await startTestEndpoint();
  });
  after(async function () {
    await endpoint.stop();
  });
  afterEach(function () {
    for (const pool of pools.splice(0)) pool.close();
  });

  function pool(options: Partial<ConnectionPoolOptions> = {}): ConnectionPool {
    const p = new ConnectionPool({ address: endpoint.address, connectionOptions: { appName: 'rxcmap-tests' }, ...options });
    pools.push(p);
    p.ready();
    return p;
  }

  it('reports the package version in the handshake metadata', function () {
    expect(DRIVER_INFO.version).to.equal(pkg.version);
  });

  /**
   * Runs `body` with a connection established through a proxy that records the names of the commands sent, and
   * `sentSince()`: those sent after the establishment. Skips the test when MONGODB_URI uses TLS (the proxy cannot read
   * it). The connection is destroyed and the proxy stopped afterwards.
   */
  async function throughRecordingProxy(test: Mocha.Context, body: (c: Connection, sentSince: () => string[]) => Promise<void>): Promise<void> {
    if (endpoint.connectionOptions.tls) {
      console.log('      skipped: MONGODB_URI uses TLS, which the proxy recording the commands sent cannot read');
      return test.skip();
    }
    const proxy = await startWireProxy(endpoint.address);
    try {
      const [host, port] = proxy.address.split(':');
      const factory = connectionFactory({ ...endpoint.connectionOptions, host, port: Number(port) });
      const c = await firstValueFrom(from(factory({ id: 1, generation: 0, address: proxy.address, signal: new AbortController().signal })));
      const established = proxy.commands.length;
      try {
        await body(c, () => proxy.commands.slice(established));
      } finally {
        c.destroy();
      }
    } finally {
      await proxy.stop();
    }
  }

  it('sends an undefined value as null, as the official driver does by default: a filter never loses a field', async function () {
    if (endpoint.connectionOptions.tls) {
      console.log('      skipped: MONGODB_URI uses TLS, which the proxy recording the commands sent cannot read');
      return this.skip();
    }
    const sent: Document[] = [];
    const proxy = await startWireProxy(endpoint.address, { request: (command) => (command.find === 'rxcmap_undefined_values' && sent.push(command), command) });
    try {
      const [host, port] = proxy.address.split(':');
      const factory = connectionFactory({ ...endpoint.connectionOptions, host, port: Number(port) });
      const c = await firstValueFrom(from(factory({ id: 1, generation: 0, address: proxy.address, signal: new AbortController().signal })));
      try {
        // Left out, `owner` would make the filter match every document: a delete with it would delete them all.
        await c.command('rxcmap_test', { find: 'rxcmap_undefined_values', filter: { owner: undefined, tags: { $in: [undefined, 'a'] } }, limit: 1 });
      } finally {
        c.destroy();
      }
    } finally {
      await proxy.stop();
    }
    expect(sent).to.have.length(1);
    expect(sent[0].filter).to.deep.equal({ owner: null, tags: { $in: [null, 'a'] } });
  });

  it('refuses a database name that is not a non-empty string without NUL ($db) with InvalidOptionError, sending nothing; the connection stays usable', async function () {
    await throughRecordingProxy(this, async (c, sentSince) => {
      for (const db of [undefined, '', 'a\0b', 42]) {
        let pending: Promise<unknown>;
        try {
          pending = c.command(db as string, { ping: 1 });
        } catch (error) {
          expect.fail(`command() threw synchronously: ${String(error)}`);
        }
        const error = await pending.then(
          () => expect.fail(`the command was sent with db ${inspect(db)}`),
          (e: unknown) => e,
        );
        expect(error).to.be.instanceOf(InvalidOptionError);
        expect((error as InvalidOptionError).option).to.equal('db');
        expect((error as Error).message).to.match(/db must be a non-empty string without NUL characters/);
      }
      expect(c.errored).to.equal(false);
      expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
      expect(sentSince()).to.deep.equal(['ping']);
    });
  });

  it('refuses a command that is not a document, and options it would misread, with InvalidOptionError, sending nothing; the connection stays usable', async function () {
    await throughRecordingProxy(this, async (c, sentSince) => {
      const cases: [string, () => Promise<unknown>][] = [
        ['command', () => c.command('admin', null as never)],
        ['command', () => c.command('admin', 'ping' as never)],
        ['command', () => c.command('admin', [{ ping: 1 }] as never)],
        ['command options', () => c.command('admin', { ping: 1 }, null as never)],
        ['timeoutMs', () => c.command('admin', { ping: 1 }, { timeoutMs: 5 } as never)],
        ['timeoutMS', () => c.command('admin', { ping: 1 }, { timeoutMS: -5 })],
        ['timeoutMS', () => c.command('admin', { ping: 1 }, { timeoutMS: '100' as never })],
        // Beyond what one Node timer holds: Node would fire it after 1 ms and time the command out at once.
        ['timeoutMS', () => c.command('admin', { ping: 1 }, { timeoutMS: 2 ** 31 })],
        ['exhaustAllowed', () => c.command('admin', { ping: 1 }, { exhaustAllowed: 'yes' as never })],
        ['nextReply options', () => c.nextReply(null as never)],
        ['timeoutMS', () => c.nextReply({ timeoutMS: NaN })],
      ];
      for (const [option, call] of cases) {
        let pending: Promise<unknown>;
        try {
          pending = call();
        } catch (error) {
          expect.fail(`threw synchronously for ${option}: ${String(error)}`);
        }
        const error = await pending.then(
          () => expect.fail(`resolved for ${option}`),
          (e: unknown) => e,
        );
        expect(error, option).to.be.instanceOf(InvalidOptionError);
        expect((error as InvalidOptionError).option, option).to.equal(option);
        if (option === 'command') expect((error as InvalidOptionError).allowed).to.equal('a command document, such as { ping: 1 }');
      }
      expect(c.errored).to.equal(false);
      expect(await c.command('admin', { ping: 1 }, { timeoutMS: 2 ** 31 - 1 })).to.include({ ok: 1 });
      expect(sentSince()).to.deep.equal(['ping']);
    });
  });

  it('rejects, never throws, for a command Proxy that is revoked or whose traps throw, sending nothing; the connection stays usable', async function () {
    await throughRecordingProxy(this, async (c, sentSince) => {
      const revocable = Proxy.revocable({ ping: 1 }, {});
      revocable.revoke();
      const trap = new Error('ownKeys trap');
      const throwing = new Proxy({ ping: 1 }, { ownKeys: () => { throw trap; } });
      for (const [what, command, expected] of [['revoked', revocable.proxy, TypeError], ['ownKeys throws', throwing, Error]] as const) {
        let pending: Promise<unknown>;
        try {
          pending = c.command('admin', command as Document);
        } catch (error) {
          expect.fail(`threw synchronously for a Proxy that is ${what}: ${String(error)}`);
        }
        expect(await pending.then(() => 'resolved', (e: unknown) => e), what).to.be.instanceOf(expected);
      }
      expect(c.errored).to.equal(false);
      expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
      expect(sentSince()).to.deep.equal(['ping']);
    });
  });

  it('sends document sequences (Payload Type 1), which the server reads as the command argument they are named for', async function () {
    const seen: Document[][] = [];
    endpoint.embedded?.handle('insert', (command) => (seen.push(command.documents as Document[]), { ok: 1, n: (command.documents as Document[]).length }));
    const collection = `sequences_${process.pid}_${Date.now()}`;
    const documents = [{ _id: 1, a: 'x' }, { _id: 2, a: undefined }, { _id: 3, nested: { b: [1, 2] } }];
    const reply = await pool().withConnection(async (c) => {
      const inserted = await c.command('rxcmap_test', { insert: collection, ordered: true }, { documentSequences: { documents } });
      // Against a real server: the documents are there, then gone.
      if (endpoint.embedded === undefined) {
        const found = await c.command('rxcmap_test', { find: collection, sort: { _id: 1 } });
        expect(found.cursor.firstBatch).to.deep.equal([{ _id: 1, a: 'x' }, { _id: 2, a: null }, { _id: 3, nested: { b: [1, 2] } }]);
        await c.command('rxcmap_test', { drop: collection });
      }
      return inserted;
    });
    expect(reply).to.include({ ok: 1, n: 3 });
    if (endpoint.embedded) expect(seen).to.deep.equal([[{ _id: 1, a: 'x' }, { _id: 2, a: null }, { _id: 3, nested: { b: [1, 2] } }]]);
  });

  it('refuses document sequences it would misread with InvalidOptionError naming the entry, sending nothing; the connection stays usable', async function () {
    await throughRecordingProxy(this, async (c, sentSince) => {
      const cases: [unknown, RegExp][] = [
        [null, /^Invalid documentSequences: null \(documentSequences must be an object of document sequences: each key a non-empty identifier without NUL or unpaired surrogate that the command document does not hold, each value an array of documents\)$/],
        [5, /^Invalid documentSequences: 5 \(/],
        [[{ a: 1 }], /^Invalid documentSequences: "\[object Array\]" \(/],
        [new Map([['documents', [{ a: 1 }]]]), /^Invalid documentSequences: "\[object Map\]" \(/],
        [{ documents: { a: 1 } }, /its entry "documents" is not an identifier with an array of documents/],
        [{ documents: [{ a: 1 }, [2]] }, /its entry "documents" is not an identifier with an array of documents/],
        [{ documents: [null] }, /its entry "documents" is not an identifier with an array of documents/],
        [{ '': [{ a: 1 }] }, /its entry "" is not an identifier/],
        [{ 'a\0b': [{ a: 1 }] }, /its entry "a\\u0000b" is not an identifier/],
        [{ insert: [{ a: 1 }] }, /its identifier "insert" is also a key of the command document/],
        [{ $db: [{ a: 1 }] }, /its identifier "\$db" is also a key of the command document/],
      ];
      for (const [documentSequences, message] of cases) {
        const error = await c.command('db', { insert: 'c' }, { documentSequences: documentSequences as never }).catch((e: unknown) => e);
        expect(error, String(message)).to.be.instanceOf(InvalidOptionError).with.property('option', 'documentSequences');
        expect((error as Error).message).to.match(message);
      }
      expect(c.errored).to.equal(false);
      expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
      expect(sentSince()).to.deep.equal(['ping']);
    });
  });

  it('document sequences pass through the recording proxy to the server unchanged', async function () {
    const seen: Document[] = [];
    endpoint.embedded?.handle('insert', (command) => (seen.push(command), { ok: 1, n: (command.documents as Document[]).length }));
    await throughRecordingProxy(this, async (c, sentSince) => {
      const reply = await c.command('db', { insert: 'c' }, { documentSequences: { documents: [{ a: 1 }, { a: 2 }] } });
      expect(reply).to.include({ ok: 1, n: 2 });
      expect(sentSince()).to.deep.equal(['insert']);
    });
    if (endpoint.embedded) expect(seen).to.deep.equal([{ insert: 'c', $db: 'db', documents: [{ a: 1 }, { a: 2 }] }]);
  });

  it('reads each document of a sequence once, and refuses a hole in the array with InvalidOptionError naming it, sending nothing', async function () {
    const seen: Document[][] = [];
    endpoint.embedded?.handle('insert', (command) => (seen.push(command.documents as Document[]), { ok: 1, n: (command.documents as Document[]).length }));
    await throughRecordingProxy(this, async (c, sentSince) => {
      // eslint-disable-next-line no-sparse-arrays
      for (const documents of [[, { a: 1 }], [{ a: 1 }, , { b: 2 }]]) {
        const error = await c.command('db', { insert: 'c' }, { documentSequences: { documents } as never }).catch((e: unknown) => e);
        expect(error).to.be.instanceOf(InvalidOptionError).with.property('option', 'documentSequences');
        expect((error as Error).message).to.match(/its entry "documents" is not an identifier with an array of documents: its element [01] is missing or not a document/);
      }
      // An array whose own `every` says yes to anything is still checked element by element.
      const lying = Object.assign([5], { every: () => true });
      const error = await c.command('db', { insert: 'c' }, { documentSequences: { documents: lying as never } }).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(InvalidOptionError).with.property('option', 'documentSequences');
      expect(sentSince()).to.deep.equal([]);
      // An element read once: the document checked is the document sent.
      let reads = 0;
      const documents: Document[] = [];
      Object.defineProperty(documents, 0, { enumerable: true, get: () => (reads++ === 0 ? { a: 1 } : 5) });
      expect(await c.command('db', { insert: 'c' }, { documentSequences: { documents } })).to.include({ ok: 1, n: 1 });
      expect(reads).to.equal(1);
      if (endpoint.embedded) expect(seen).to.deep.equal([[{ a: 1 }]]);
      expect(c.errored).to.equal(false);
      expect(sentSince()).to.deep.equal(['insert']);
    });
  });

  it('refuses a sequence identifier with an unpaired surrogate, which UTF-8 would send as another identifier; sends any other Unicode one', async function () {
    const seen: Document[] = [];
    endpoint.embedded?.handle('insert', (command) => (seen.push(command), { ok: 1, n: 1 }));
    await throughRecordingProxy(this, async (c, sentSince) => {
      // Both would go as U+FFFD: one message with two sequences of the same identifier, which no server takes.
      const illFormed: Record<string, Document[]>[] = [{ '\uD800': [{ a: 1 }], '\uDC00': [{ b: 1 }] }, { 'a\uDC00': [{ a: 1 }] }];
      for (const documentSequences of illFormed) {
        const error = await c.command('db', { insert: 'c' }, { documentSequences }).catch((e: unknown) => e);
        expect(error).to.be.instanceOf(InvalidOptionError).with.property('option', 'documentSequences');
        expect((error as Error).message).to.match(/is not an identifier with an array of documents/);
      }
      expect(c.errored).to.equal(false);
      expect(sentSince()).to.deep.equal([]);
      const documentSequences = { 'dokümente': [{ a: 1 }], '文档': [{ b: 1 }], '\u{1F600}': [{ c: 1 }] };
      expect(await c.command('db', { insert: 'c' }, { documentSequences })).to.include({ ok: 1 });
      expect(sentSince()).to.deep.equal(['insert']);
    });
    if (endpoint.embedded) expect(seen).to.deep.equal([{ insert: 'c', $db: 'db', 'dokümente': [{ a: 1 }], '文档': [{ b: 1 }], '\u{1F600}': [{ c: 1 }] }]);
  });

  it('establishes, handshakes and runs ping through the pool', async function () {
    const p = pool();
    const reply = await p.withConnection(async (c) => {
      expect(c.hello).to.have.property('maxWireVersion').that.is.a('number');
      expect(c.hello.helloOk).to.equal(true);
      return c.command('admin', { ping: 1 });
    });
    expect(reply).to.include({ ok: 1 });
  });

  it('sends appName in the handshake (embedded endpoint only: it records what it received)', async function () {
    if (!endpoint.embedded) this.skip();
    const seen: (string | undefined)[] = [];
    endpoint.embedded.handle('whoami', (_cmd, client) => {
      seen.push(client.appName);
      return { ok: 1 };
    });
    await pool().withConnection((c) => c.command('admin', { whoami: 1 }));
    expect(seen).to.deep.equal(['rxcmap-tests']);
  });

  it('runs one request at a time: a second concurrent command fails with ConnectionBusyError', async function () {
    await pool().withConnection(async (c) => {
      const first = c.command('admin', { ping: 1 });
      const second = c.command('admin', { ping: 1 }).then(
        () => undefined,
        (e) => e,
      );
      expect(await second).to.be.instanceOf(ConnectionBusyError);
      expect(await first).to.include({ ok: 1 });
      expect(c.errored).to.equal(false);
    });
  });

  it('closes every socket it opened when the pool closes (no leaked connection)', async function () {
    const p = pool({ minPoolSize: 3, maxPoolSize: 5 });
    const held = await Promise.all([p.checkOut(), p.checkOut()]);
    const before = endpoint.embedded?.openConnections;
    p.close();
    for (const c of held) p.checkIn(c);
    expect(held.every((c) => c.errored)).to.equal(true);
    if (endpoint.embedded) {
      expect(before).to.be.at.least(2);
      expect(await eventually(() => endpoint.embedded!.openConnections === 0)).to.equal(true);
    }
  });

  it('a refused connection fails the checkout with a MongoNetworkError and reason connectionError', async function () {
    const closed = await closedPort();
    const p = new ConnectionPool({ address: `127.0.0.1:${closed}` });
    pools.push(p);
    const events: ConnectionPoolEvent[] = [];
    p.events$.subscribe((e) => events.push(e));
    p.ready();
    const error = await p.checkOut().then(
      () => undefined,
      (e) => e,
    );
    expect(error).to.be.instanceOf(MongoNetworkError);
    expect(events.find((e) => e.type === 'ConnectionCheckOutFailed')).to.include({ reason: 'connectionError' });
    expect(events.find((e) => e.type === 'ConnectionClosed')).to.include({ reason: 'error' });
  });

  it('a reply that does not come within the timeout fails with MongoNetworkTimeoutError and errors the connection', async function () {
    if (!endpoint.embedded) this.skip();
    endpoint.embedded.handle('sleep', () => new Promise((r) => setTimeout(() => r({ ok: 1 }), 500)));
    const p = pool();
    const events: ConnectionPoolEvent[] = [];
    p.events$.subscribe((e) => events.push(e));
    const c = await p.checkOut();
    const error = await c.command('admin', { sleep: 1 }, { timeoutMS: 50 }).then(
      () => undefined,
      (e) => e,
    );
    expect(error).to.be.instanceOf(MongoNetworkTimeoutError);
    expect(c.errored).to.equal(true);
    p.checkIn(c);
    expect(events.at(-1)).to.include({ type: 'ConnectionClosed', reason: 'error' });
  });
});

// A scripted server only (startHostileServer): these need a handshake announcing chosen limits and compressors, and
// replies no real server sends.
describe('Connection limits from the handshake (compression, maxMessageSizeBytes)', function () {
  let server: HostileServer | undefined;
  /** Every server a test started (some start one per case): all are closed after it. */
  let started: HostileServer[] = [];
  afterEach(async function () {
    await Promise.all(started.map((s) => s.close()));
    started = [];
    server = undefined;
  });

  async function establish(options: HostileServerOptions, client: ConnectionOptions = {}): Promise<Connection> {
    server = await startHostileServer(options);
    started.push(server);
    const factory = connectionFactory({ ...client, host: '127.0.0.1', port: server.port });
    const descriptor = { id: 1, generation: 0, address: server.address, signal: new AbortController().signal };
    return firstValueFrom(from(factory(descriptor)));
  }

  /** A connection that negotiated zlib with a server answering each command (the hello aside) with `answer`. */
  function establishZlib(answer: (request: WireMessage, socket: net.Socket) => void): Promise<Connection> {
    return establish({ misbehaviour: { kind: 'answer', answer }, hello: { compression: ['zlib'] } }, { compressors: ['zlib'] });
  }

  /** Answers every command with `{ ok: 1, n }`, compressed with `compressorId` (0 noop, 2 zlib). */
  const compressedAnswers = (compressorId: number): HostileServerOptions => ({
    misbehaviour: {
      kind: 'answer',
      answer: (request, socket) => {
        const reply = encodeOpMsg(1, request.header.requestId, { ok: 1, n: 'x'.repeat(300) });
        const body = reply.subarray(HEADER_LENGTH);
        const noop = opCompressed(request.header.requestId, body, body.length, 0);
        socket.write(compressorId === 2 ? compressMessage(reply) : noop);
      },
    },
    hello: { compression: ['zlib'] },
  });

  for (const [name, id] of [['zlib', 2], ['noop', 0]] as const) {
    it(`with zlib negotiated, accepts ${name}-compressed replies`, async function () {
      const c = await establish(compressedAnswers(id), { compressors: ['zlib'] });
      expect(c.compressor).to.equal('zlib');
      expect(await c.command('admin', { ping: 1 })).to.deep.include({ ok: 1, n: 'x'.repeat(300) });
      expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
      c.destroy();
    });
  }

  /**
   * A connection that negotiated zlib with a server announcing `maxMessageSizeBytes`, and the opcode and length of each
   * message the server received, in order (each answered `{ ok: 1 }`).
   */
  async function sizedZlib(maxMessageSizeBytes: number): Promise<{ c: Connection; sent: { opCode: number; messageLength: number }[] }> {
    const sent: { opCode: number; messageLength: number }[] = [];
    const c = await establish(
      {
        misbehaviour: {
          kind: 'answer',
          answer: (request, socket) => {
            sent.push({ opCode: request.header.opCode, messageLength: request.header.messageLength });
            socket.write(encodeOpMsg(1, request.header.requestId, { ok: 1 }));
          },
        },
        hello: { compression: ['zlib'], maxMessageSizeBytes },
      },
      { compressors: ['zlib'] },
    );
    return { c, sent };
  }

  it('sends a command uncompressed when compressing it would exceed maxMessageSizeBytes (incompressible, near the limit)', async function () {
    const { c, sent } = await sizedZlib(16 * 1024 * 1024);
    expect(c.compressor).to.equal('zlib');
    // Random bytes do not compress: zlib makes them about 5 KB longer, and the OP_COMPRESSED header adds 9 bytes.
    const noise = randomBytes(16 * 1024 * 1024 - 100);
    expect(await c.command('db', { insert: 'x', noise })).to.include({ ok: 1 });
    expect(await c.command('db', { insert: 'x', small: 'a'.repeat(1000) })).to.include({ ok: 1 });
    expect(sent[0].messageLength).to.be.at.most(16 * 1024 * 1024);
    expect(sent[0].opCode).to.equal(OpCode.OP_MSG);
    expect(sent[1].opCode).to.equal(OpCode.OP_COMPRESSED); // a command that compresses is still sent compressed
    c.destroy();
  });

  it('a compressed command exactly maxMessageSizeBytes long is sent compressed; one byte more, uncompressed (OP_MSG spec: at most maxMessageSizeBytes)', async function () {
    // Random bytes: their compressed message is about 5 KB longer than the uncompressed one, so at a limit equal to the
    // compressed length both fit, and at one byte less only the uncompressed one does. The limit is at least 16 MiB
    // (the handshake's value is bounded to 16,777,216..48,000,000), which the compressed message reaches.
    const command = { insert: 'x', noise: randomBytes(16 * 1024 * 1024 - 3000) };
    const sentAt = async (maxMessageSizeBytes: number): Promise<{ opCode: number; messageLength: number }> => {
      const { c, sent } = await sizedZlib(maxMessageSizeBytes);
      expect(await c.command('db', command)).to.include({ ok: 1 });
      c.destroy();
      return sent[0];
    };
    const compressed = await sentAt(48_000_000);
    expect(compressed.opCode).to.equal(OpCode.OP_COMPRESSED);
    expect(compressed.messageLength, 'above the lowest limit').to.be.above(16 * 1024 * 1024);
    expect(await sentAt(compressed.messageLength), 'at a limit of its own length').to.deep.equal(compressed);
    const below = await sentAt(compressed.messageLength - 1);
    expect(below.opCode, 'one byte over the limit compressed').to.equal(OpCode.OP_MSG);
    expect(below.messageLength).to.be.below(compressed.messageLength);
  });

  describe('where a command is compressed: on the event loop below 64 KiB of OP_MSG body, on the thread pool from 64 KiB', function () {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const zlib = require('node:zlib') as Record<'deflate' | 'deflateSync', (...args: unknown[]) => unknown>;
    const real = { deflate: zlib.deflate, deflateSync: zlib.deflateSync };
    afterEach(function () {
      zlib.deflate = real.deflate;
      zlib.deflateSync = real.deflateSync;
    });

    /** A connection that negotiated zlib, and the messages its server received (decompressed), in order. */
    async function recording(): Promise<{ c: Connection; received: { opCode: number; bodyLength: number }[] }> {
      const received: { opCode: number; bodyLength: number }[] = [];
      const c = await establishZlib((request, socket) => {
        const body = request.header.opCode === OpCode.OP_COMPRESSED ? inflateSync(request.body.subarray(9)) : request.body;
        received.push({ opCode: request.header.opCode, bodyLength: body.length });
        socket.write(encodeOpMsg(1, request.header.requestId, { ok: 1 }));
      });
      return { c, received };
    }

    /** `{ insert: 'x', pad }`, its `pad` long enough that the OP_MSG body (the header aside) is `bodyLength` bytes. */
    function commandOfBody(bodyLength: number): Document {
      const bare = encodeOpMsg(1, 0, { insert: 'x', pad: '', $db: 'db' }).length - HEADER_LENGTH;
      const command = { insert: 'x', pad: 'p'.repeat(bodyLength - bare) };
      expect(encodeOpMsg(1, 0, { ...command, $db: 'db' }).length - HEADER_LENGTH).to.equal(bodyLength);
      return command;
    }

    it('65,535 bytes of body on the event loop, 65,536 on the thread pool, both sent compressed', async function () {
      const { c, received } = await recording();
      const calls = { deflate: 0, deflateSync: 0 };
      zlib.deflate = (...args: unknown[]) => (calls.deflate++, real.deflate(...args));
      zlib.deflateSync = (...args: unknown[]) => (calls.deflateSync++, real.deflateSync(...args));
      for (const [bodyLength, onThreadPool] of [[64 * 1024 - 1, false], [64 * 1024, true]] as const) {
        const before = { ...calls };
        expect(await c.command('db', commandOfBody(bodyLength))).to.include({ ok: 1 });
        const made = { deflate: calls.deflate - before.deflate, deflateSync: calls.deflateSync - before.deflateSync };
        expect(made, `${bodyLength} bytes`).to.deep.equal(onThreadPool ? { deflate: 1, deflateSync: 0 } : { deflate: 0, deflateSync: 1 });
      }
      expect(received).to.deep.equal([
        { opCode: OpCode.OP_COMPRESSED, bodyLength: 64 * 1024 - 1 },
        { opCode: OpCode.OP_COMPRESSED, bodyLength: 64 * 1024 },
      ]);
      c.destroy();
    });

    it('a command the compressor fails to compress is sent uncompressed, on the event loop and on the thread pool', async function () {
      const { c, received } = await recording();
      zlib.deflate = (_data: unknown, _options: unknown, callback: unknown) => setImmediate(() => (callback as (error: Error) => void)(new Error('deflate failed')));
      zlib.deflateSync = () => {
        throw new Error('deflateSync failed');
      };
      for (const bodyLength of [1000, 64 * 1024]) {
        const reply = c.command('db', commandOfBody(bodyLength));
        let timer: NodeJS.Timeout | undefined;
        const late = new Promise((resolve) => (timer = setTimeout(resolve, 3000, 'not answered within 3 s')));
        try {
          expect(await Promise.race([reply, late]), `${bodyLength} bytes`).to.include({ ok: 1 });
        } finally {
          clearTimeout(timer);
        }
      }
      expect(received).to.deep.equal([
        { opCode: OpCode.OP_MSG, bodyLength: 1000 },
        { opCode: OpCode.OP_MSG, bodyLength: 64 * 1024 },
      ]);
      expect(c.errored).to.equal(false);
      c.destroy();
    });
  });

  describe('zlib work on large messages runs off the event loop (as the Node.js driver does it)', function () {
    /** Random hex text of `bytes` characters: BSON writes and reads it fast, zlib takes much longer. */
    const hexText = (bytes: number): string => randomBytes(bytes / 2).toString('hex');

    it('compresses a large command without blocking the event loop for the compression', async function () {
      this.timeout(60_000);
      const c = await establishZlib((request, socket) => socket.write(encodeOpMsg(1, request.header.requestId, { ok: 1 })));
      const command = { insert: 'x', text: hexText(16 * 1024 * 1024 - 1024) };
      // What compressing its OP_MSG on the event loop costs, on this machine now.
      let start = performance.now();
      compressMessage(encodeOpMsg(1, 0, { ...command, $db: 'db' }));
      const compressionMS = performance.now() - start;
      start = performance.now();
      const reply = c.command('db', command);
      const blockedMS = performance.now() - start;
      expect(await reply).to.include({ ok: 1 });
      expect(blockedMS, `command() held the event loop ${blockedMS.toFixed(0)} ms; compressing takes ${compressionMS.toFixed(0)} ms`).to.be.below(compressionMS / 2);
      c.destroy();
    });

    it('a connection destroyed while it compresses a large command is busy until then, and sends nothing', async function () {
      this.timeout(60_000);
      const received: number[] = [];
      const c = await establishZlib((request, socket) => {
        received.push(request.header.messageLength);
        socket.write(encodeOpMsg(1, request.header.requestId, { ok: 1 }));
      });
      const reply = c.command('db', { insert: 'x', text: hexText(4 * 1024 * 1024) });
      expect(c.busy).to.equal(true);
      expect(await c.command('db', { ping: 1 }).catch((error: unknown) => error)).to.be.instanceOf(ConnectionBusyError);
      c.destroy();
      const error = await reply.catch((e: unknown) => e);
      expect(error).to.be.instanceOf(MongoNetworkError);
      expect((error as Error).message).to.match(/was closed by the pool/);
      // Whatever was written reaches the server before the close does.
      expect(await eventually(() => server!.closed === server!.accepted), 'the server saw the connection close').to.equal(true);
      expect(received).to.deep.equal([]);
      // Closed by the pool: errored, but by no error of the network, even once its socket has closed.
      expect(c.errored).to.equal(true);
      expect(c.error, 'the error that made it errored').to.equal(undefined);
    });

    /** An OP_MSG replying `{ ok: 1, a, b, c }`, each of them `part` (built by hand: bson writes at most 17 MiB). */
    function bigReply(responseTo: number, part: string): Buffer {
      const fields = ['a', 'b', 'c'].map((name) => {
        const doc = Buffer.from(serialize({ [name]: part }));
        return doc.subarray(4, doc.length - 1);
      });
      const ok = Buffer.from(serialize({ ok: 1 }));
      const elements = Buffer.concat([ok.subarray(4, ok.length - 1), ...fields, Buffer.from([0])]);
      const document = Buffer.concat([Buffer.alloc(4), elements]);
      document.writeInt32LE(document.length, 0);
      const message = Buffer.concat([Buffer.alloc(HEADER_LENGTH + 5), document]);
      message.writeInt32LE(message.length, 0);
      message.writeInt32LE(1, 4);
      message.writeInt32LE(responseTo, 8);
      message.writeInt32LE(OpCode.OP_MSG, 12);
      return message;
    }

    it('decompresses a large reply without blocking the event loop for the decompression', async function () {
      this.timeout(60_000);
      const part = hexText(14 * 1024 * 1024);
      // Made once: the server (in this process) then only writes them, with the responseTo of each request.
      const replies = { plain: bigReply(0, part), zipped: compressMessage(bigReply(0, part)) };
      let compressed = true;
      const c = await establishZlib((request, socket) => {
        const reply = compressed ? replies.zipped : replies.plain;
        reply.writeInt32LE(request.header.requestId, 8);
        socket.write(reply);
      });
      const inflateMS = (() => {
        const zipped = replies.zipped.subarray(HEADER_LENGTH + 9);
        const start = performance.now();
        inflateSync(zipped);
        return performance.now() - start;
      })();
      /** The longest the event loop was held while the reply to one command came and was read, in ms. */
      async function longestBlock(): Promise<number> {
        const histogram = monitorEventLoopDelay({ resolution: 1 });
        histogram.enable();
        const reply = await c.command('db', { find: 'x' });
        // The histogram records a block when its timer runs next, after it.
        await new Promise((resolve) => setTimeout(resolve, 20));
        histogram.disable();
        expect(reply.a).to.equal(part);
        return histogram.max / 1e6;
      }
      compressed = false;
      await longestBlock();
      const plain = Math.min(await longestBlock(), await longestBlock());
      compressed = true;
      await longestBlock();
      const zipped = Math.min(await longestBlock(), await longestBlock());
      expect(
        zipped,
        `a compressed reply held the event loop ${zipped.toFixed(0)} ms, an uncompressed one ${plain.toFixed(0)} ms; inflating it takes ${inflateMS.toFixed(0)} ms`,
      ).to.be.below(plain + inflateMS / 4);
      c.destroy();
    });

    it("a timeoutMS given bounds the wait for Node's busy thread pool to compress a large command: it fails then, saying nothing was sent", async function () {
      if (process.platform === 'win32') this.skip();
      const sent: number[] = [];
      const c = await establishZlib((request, socket) => {
        sent.push(request.header.opCode);
        socket.write(encodeOpMsg(1, request.header.requestId, { ok: 1 }));
      });
      const command = { insert: 'x', text: 'a'.repeat(200 * 1024) };
      const busy = await occupyThreadPool();
      let error: unknown;
      const started = performance.now();
      try {
        error = await c.command('db', command, { timeoutMS: 300 }).catch((e: unknown) => e);
      } finally {
        await busy.release();
      }
      const waited = performance.now() - started;
      expect(error).to.be.instanceOf(MongoNetworkTimeoutError);
      expect((error as Error).message).to.equal(`connection ${c.id} to ${server!.address} timed out after 300 ms waiting for Node's thread pool to compress the command (nothing was sent)`);
      expect(waited, 'ms until it failed').to.be.within(290, 2000);
      expect(c.errored).to.equal(true);
      // The compression ends once the threads are free: nothing is sent then either.
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(sent).to.deep.equal([]);
      c.destroy();

      // What is left of timeoutMS after the wait bounds the reply: 1000 ms in all, 400 of them spent waiting for a thread,
      // and a server that answers 800 ms after the send.
      const slow = await establishZlib((request, socket) => void setTimeout(() => socket.write(encodeOpMsg(1, request.header.requestId, { ok: 1 })), 800));
      const busier = await occupyThreadPool();
      setTimeout(() => void busier.release(), 400);
      try {
        const late = await slow.command('db', command, { timeoutMS: 1000 }).catch((e: unknown) => e);
        expect(late).to.be.instanceOf(MongoNetworkTimeoutError);
        expect((late as Error).message).to.match(/timed out after \d+ ms waiting for a reply$/);
      } finally {
        await busier.release();
        slow.destroy();
      }

      // Without timeoutMS (socketTimeoutMS counts from the send), the command waits for a thread, then is answered.
      const d = await establishZlib((request, socket) => socket.write(encodeOpMsg(1, request.header.requestId, { ok: 1 })));
      const held = await occupyThreadPool();
      const reply = d.command('db', command);
      setTimeout(() => void held.release(), 300);
      try {
        expect(await reply).to.include({ ok: 1 });
        // timeoutMS 0 is none: the same.
        const again = await occupyThreadPool();
        setTimeout(() => void again.release(), 100);
        expect(await d.command('db', command, { timeoutMS: 0 }).finally(() => again.release())).to.include({ ok: 1 });
      } finally {
        await held.release();
        d.destroy();
      }
    });

    it('reads streamed replies in order when a large compressed one is inflated off the event loop', async function () {
      const text = hexText(1024 * 1024);
      const c = await establishZlib((request, socket) => {
        const to = request.header.requestId;
        socket.write(
          Buffer.concat([
            compressMessage(encodeOpMsg(100, to, { ok: 1, n: 0, text }, OpMsgFlag.moreToCome)),
            encodeOpMsg(101, 100, { ok: 1, n: 1 }, OpMsgFlag.moreToCome),
            compressMessage(encodeOpMsg(102, 101, { ok: 1, n: 2, text }, OpMsgFlag.moreToCome)),
            encodeOpMsg(103, 102, { ok: 1, n: 3 }),
          ]),
        );
      });
      const first = await c.command('admin', { find: 'x' }, { exhaustAllowed: true });
      expect(first).to.include({ n: 0, text });
      const rest = [await c.nextReply(), await c.nextReply(), await c.nextReply()];
      expect(rest.map((r) => r.n)).to.deep.equal([1, 2, 3]);
      expect(rest[1].text).to.equal(text);
      expect(c.moreToCome).to.equal(false);
      expect(c.errored).to.equal(false);
      c.destroy();
    });

    it('holds at most a few MB of what a server sends while a large compressed reply is inflated', async function () {
      this.timeout(60_000);
      // The reply inflates to 40 MB of zeros (not a valid OP_MSG: it fails the command once inflated); the server
      // then sends 1 MB messages as fast as the client reads them, up to 300 MB.
      const announced = 40_000_000;
      let sent = 0;
      const c = await establishZlib((request, socket) => {
        const to = request.header.requestId;
        socket.write(opCompressed(to, zlibBomb(announced), announced));
        const flood = encodeOpMsg(5, to, { ok: 1, pad: 'y'.repeat(1 << 20) });
        const pump = (): void => {
          while (!socket.destroyed && sent < 300e6) {
            sent += flood.length;
            if (!socket.write(flood)) return void socket.once('drain', pump);
          }
        };
        pump();
      });
      const received = (c as unknown as { received: { body: Buffer }[] }).received;
      let held = 0;
      const sampler = setInterval(() => (held = Math.max(held, received.reduce((n, m) => n + m.body.length, 0))), 1);
      const error = await c.command('db', { find: 'x' }).catch((e: unknown) => e);
      clearInterval(sampler);
      expect(error).to.be.instanceOf(MongoNetworkError);
      expect((error as Error).message).to.match(/BSON document has invalid size 0/);
      expect(held, `held ${(held / 1e6).toFixed(0)} MB of the ${(sent / 1e6).toFixed(0)} MB sent`).to.be.below(4e6);
    });

    it('reads a large compressed reply the server sent before closing the connection, then is errored', async function () {
      const text = hexText(1024 * 1024);
      const c = await establishZlib((request, socket) => socket.end(compressMessage(encodeOpMsg(1, request.header.requestId, { ok: 1, text }))));
      expect(await c.command('db', { find: 'x' })).to.include({ ok: 1, text });
      expect(await eventually(() => c.errored)).to.equal(true);
      expect(c.error?.message).to.match(/closed by the server or the network/);
    });

    it('reads the streamed replies received whole before the server closed the connection, a large compressed one among them', async function () {
      const text = hexText(1024 * 1024);
      const c = await establishZlib((request, socket) => {
        socket.write(encodeOpMsg(100, request.header.requestId, { ok: 1, n: 0 }, OpMsgFlag.moreToCome));
        const rest = [compressMessage(encodeOpMsg(101, 100, { ok: 1, n: 1, text }, OpMsgFlag.moreToCome)), encodeOpMsg(102, 101, { ok: 1, n: 2 }, OpMsgFlag.moreToCome)];
        setTimeout(() => socket.end(Buffer.concat(rest)), 20);
      });
      expect(await c.command('admin', { find: 'x' }, { exhaustAllowed: true })).to.include({ n: 0 });
      expect(await eventually(() => c.errored), 'the server closed the connection').to.equal(true);
      const read = async (): Promise<unknown> => c.nextReply().then((reply) => reply.n, (error: Error) => error.message);
      expect([await read(), await read(), await read()]).to.deep.equal([1, 2, `connection 1 to ${server!.address} closed by the server or the network`]);
    });

    it('destroyed while a streamed reply is inflated: the inflated reply is dropped, and the next read fails as closed', async function () {
      const big = 'a'.repeat(15 * 1024 * 1024);
      const c = await establishZlib((request, socket) => {
        const first = encodeOpMsg(100, request.header.requestId, { ok: 1, n: 0 }, OpMsgFlag.moreToCome);
        socket.write(Buffer.concat([first, compressMessage(encodeOpMsg(101, 100, { ok: 1, n: 1, big }, OpMsgFlag.moreToCome))]));
      });
      expect(await c.command('admin', { find: 'x' }, { exhaustAllowed: true })).to.include({ n: 0 });
      const inflating = (c as unknown as { inflating: Promise<void> | undefined }).inflating;
      expect(inflating, 'the second reply is being inflated').to.not.equal(undefined);
      c.destroy(new Error('the application is done with it'));
      await inflating;
      const read = await c.nextReply().catch((e: unknown) => e);
      expect(read).to.be.instanceOf(MongoNetworkError);
      expect((read as Error).message).to.match(/is closed$/);
    });

    it('reads the streamed replies received whole before the connection was reset, two large compressed ones in a row among them', async function () {
      // 12 MiB each, some 12 KB compressed: the three replies come in one read, each compressed one inflated on the
      // thread pool in turn, and the reset is met while the first is.
      const big = 'a'.repeat(12 * 1024 * 1024);
      const c = await establishZlib((request, socket) => {
        socket.write(encodeOpMsg(100, request.header.requestId, { ok: 1, n: 0 }, OpMsgFlag.moreToCome));
        const rest = [
          compressMessage(encodeOpMsg(101, 100, { ok: 1, n: 1, big }, OpMsgFlag.moreToCome)),
          compressMessage(encodeOpMsg(102, 101, { ok: 1, n: 2, big }, OpMsgFlag.moreToCome)),
          encodeOpMsg(103, 102, { ok: 1, n: 3 }, OpMsgFlag.moreToCome),
        ];
        setTimeout(() => socket.write(Buffer.concat(rest), () => socket.resetAndDestroy()), 20);
      });
      expect(await c.command('admin', { find: 'x' }, { exhaustAllowed: true })).to.include({ n: 0 });
      expect(await eventually(() => c.errored), 'the connection was reset').to.equal(true);
      const read = async (): Promise<unknown> => c.nextReply().then((reply) => [reply.n, reply.big === big], (error: Error) => error.message);
      expect([await read(), await read(), await read()]).to.deep.equal([[1, true], [2, true], [3, false]]);
      // The reset, or the end of the stream it may be met as.
      expect(await read()).to.match(/^connection 1 to \S+ (read ECONNRESET|closed by the server or the network)$/);
    });

    it('a streamed reply that arrived whole is read within the timeout of nextReply, however long it takes to inflate', async function () {
      // 15 MB that compress to some 15 KB: both replies come in one read, and the second takes a while to inflate.
      const big = 'a'.repeat(15 * 1024 * 1024);
      const c = await establishZlib((request, socket) => {
        const first = encodeOpMsg(100, request.header.requestId, { ok: 1, n: 0 }, OpMsgFlag.moreToCome);
        socket.write(Buffer.concat([first, compressMessage(encodeOpMsg(101, 100, { ok: 1, n: 1, big }))]));
      });
      expect(await c.command('admin', { find: 'x' }, { exhaustAllowed: true })).to.include({ n: 0 });
      expect((c as unknown as { inflating: unknown }).inflating, 'the second reply is being inflated').to.not.equal(undefined);
      const second = await c.nextReply({ timeoutMS: 1 }).catch((error: Error) => error);
      expect(second).to.include({ n: 1 });
      expect(c.errored).to.equal(false);
      expect(c.moreToCome).to.equal(false);
      c.destroy();
    });

    it('a reply that comes while a large command is compressed, before it is sent, answers nothing: the connection fails', async function () {
      this.timeout(60_000);
      const received: number[] = [];
      server = await startHostileServer({
        at: 'handshake',
        misbehaviour: {
          kind: 'answer',
          answer: (request, socket) => {
            if (received.push(request.header.opCode) > 1) return void socket.write(encodeOpMsg(3, request.header.requestId, { ok: 1 }));
            const helloId = request.header.requestId;
            socket.write(encodeOpMsg(1, helloId, { isWritablePrimary: true, helloOk: true, maxWireVersion: 25, compression: ['zlib'], ok: 1 }));
            // Request ids are sequential: the next request of this process is the command. Its reply, before it is sent.
            setTimeout(() => socket.write(encodeOpMsg(2, helloId + 1, { ok: 1, n: 1 })), 20);
          },
        },
      });
      started.push(server);
      const factory = connectionFactory({ compressors: ['zlib'], host: '127.0.0.1', port: server.port });
      const c = await firstValueFrom(from(factory({ id: 1, generation: 0, address: server.address, signal: new AbortController().signal })));
      const outcome = await c.command('db', { insert: 'x', text: hexText(16 * 1024 * 1024) }).catch((error: Error) => error);
      expect(outcome).to.be.instanceOf(MongoNetworkError);
      expect((outcome as Error).message).to.match(/received \d+ bytes with no request in flight/);
      expect(c.errored).to.equal(true);
      // Whatever was written reaches the server before the close does.
      expect(await eventually(() => server!.closed === server!.accepted), 'the server saw the connection close').to.equal(true);
      expect(received, 'what the server received (opcodes)').to.deep.equal([OpCode.OP_MSG]);
    });

    it('fails the connection when a large compressed reply comes with a message nobody asked for', async function () {
      const text = hexText(1024 * 1024);
      const c = await establishZlib((request, socket) => {
        const to = request.header.requestId;
        socket.write(Buffer.concat([compressMessage(encodeOpMsg(100, to, { ok: 1, text })), encodeOpMsg(101, to, { ok: 1 })]));
      });
      expect(await c.command('db', { find: 'x' })).to.include({ ok: 1, text });
      expect(await eventually(() => c.errored)).to.equal(true);
      expect(c.error?.message).to.match(/responseTo \d+ does not match the request in flight \(none\)/);
    });
  });

  describe('the server\'s id for the connection (hello\'s connectionId, an int64): only an integer a server sends', function () {
    /** A connection to a server whose hello carries `connectionId`, and the command events of one ping on it. */
    async function pingWith(connectionId: unknown): Promise<{ c: Connection; events: CommandEvent[] }> {
      server = await startHostileServer({ misbehaviour: { kind: 'answer', answer: (request, socket) => socket.write(encodeOpMsg(1, request.header.requestId, { ok: 1 })) }, hello: { connectionId } });
      started.push(server);
      const factory = connectionFactory({ host: '127.0.0.1', port: server.port });
      const events: CommandEvent[] = [];
      factory.commandEvents$.subscribe((e) => events.push(e));
      const c = await firstValueFrom(from(factory({ id: 1, generation: 0, address: server.address, signal: new AbortController().signal })));
      await c.command('admin', { ping: 1 });
      return { c, events };
    }

    const hostile: [string, unknown][] = [
      ['NaN', NaN],
      ['Infinity', Infinity],
      ['-Infinity', -Infinity],
      ['a negative integer', -1],
      ['a non-integer', 1.5],
      ['a double beyond 2^53', 2 ** 53],
      ['a huge double', 1e300],
      ['an int64 beyond 2^53', Long.fromString('9223372036854775807')],
      ['a negative int64', Long.fromNumber(-5)],
      ['a string', '5'],
      ['a boolean', true],
      ['null', null],
      ['a document', { id: 5 }],
    ];
    for (const [name, value] of hostile) {
      it(`${name}: treated as absent, in the server description and the command events`, async function () {
        const { c, events } = await pingWith(value);
        expect(c.server.serverConnectionId, 'server.serverConnectionId').to.equal(undefined);
        expect(events.map((e) => 'serverConnectionId' in e), 'in the command events').to.deep.equal([false, false]);
        c.destroy();
      });
    }

    const sent: [string, unknown, number][] = [
      ['an int32', new Int32(41), 41],
      ['an int64', Long.fromNumber(2 ** 40), 2 ** 40],
      ['a double holding an integer', new Double(42), 42],
      ['0', new Int32(0), 0],
    ];
    for (const [name, value, expected] of sent) {
      it(`${name}: kept as a number, in the server description and the command events`, async function () {
        const { c, events } = await pingWith(value);
        expect(c.server.serverConnectionId).to.equal(expected);
        expect(events.map((e) => e.serverConnectionId)).to.deep.equal([expected, expected]);
        c.destroy();
      });
    }
  });

  it('records maxMessageSizeBytes bounded to 48,000,000 when the server announces 2^31-1', async function () {
    const c = await establish({ misbehaviour: { kind: 'silent' }, hello: { maxMessageSizeBytes: 2 ** 31 - 1 } });
    expect(c.hello.maxMessageSizeBytes).to.equal(2 ** 31 - 1);
    expect(c.server.maxMessageSizeBytes).to.equal(48_000_000);
    c.destroy();
  });

  describe('a command the server could not take: rejected with a typed error, nothing sent, the connection usable', function () {
    /** Commands the server received after the handshake, by their first key. */
    let received: string[];
    /** Establishes to a server announcing `hello`, that answers every later command with `{ ok: 1 }`. */
    function limited(hello: Document): Promise<Connection> {
      received = [];
      return establish({
        misbehaviour: {
          kind: 'answer',
          answer: (request, socket) => {
            received.push(Object.keys(decodeOpMsg(request.body).document)[0]);
            socket.write(encodeOpMsg(1, request.header.requestId, { ok: 1 }));
          },
        },
        hello,
      });
    }

    /** Runs `command` on `c`; a synchronous throw fails the test. */
    async function rejection(c: Connection, command: Document): Promise<unknown> {
      let pending: Promise<unknown>;
      try {
        pending = c.command('db', command);
      } catch (error) {
        expect.fail(`command() threw synchronously: ${String(error)}`);
      }
      return pending.then(
        () => expect.fail('the command was sent'),
        (error: unknown) => error,
      );
    }

    async function expectUsable(c: Connection): Promise<void> {
      expect(c.errored).to.equal(false);
      expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
      expect(received).to.deep.equal(['ping']);
    }

    it('a document larger than maxBsonObjectSize + 16 KiB; one within the allowance is sent', async function () {
      const c = await limited({ maxBsonObjectSize: 1024 * 1024 });
      const error = await rejection(c, { insert: 'x', documents: [{ s: 'a'.repeat(2 * 1024 * 1024) }] });
      expect(error).to.be.instanceOf(WireProtocolError);
      expect((error as Error).message).to.match(
        /command document is 20\d{5} bytes, more than maxBsonObjectSize 1048576 \+ 16384 \(1064960 bytes allowed\); nothing was sent/,
      );
      await expectUsable(c);
      expect(await c.command('db', { insert: 'x', documents: [{ s: 'a'.repeat(1024 * 1024 + 8 * 1024) }] })).to.include({ ok: 1 });
      c.destroy();
    });

    it('a maxBsonObjectSize that is not a positive integer counts as absent (16 MiB), as 0 does', async function () {
      // A BSON double in the hello reply: 0.5 and 1e-300 would refuse a 20 KB insert, 16777216.5 would print a limit
      // of half a byte, Infinity and 1e300 would leave no document limit at all.
      for (const announced of [0, 0.5, 1e-300, 16 * 1024 * 1024 + 0.5, Infinity, 1e300, NaN]) {
        const c = await limited({ maxBsonObjectSize: announced });
        expect(c.server.maxBsonObjectSize, String(announced)).to.equal(16 * 1024 * 1024);
        expect(await c.command('db', { insert: 'x', documents: [{ s: 'a'.repeat(20_000) }] })).to.include({ ok: 1 });
        const error = await rejection(c, { insert: 'x', documents: [{ s: 'a'.repeat(16 * 1024 * 1024 + 20_000) }] });
        expect((error as Error).message, String(announced)).to.match(
          /more than maxBsonObjectSize 16777216 \+ 16384 \(16793600 bytes allowed\); nothing was sent/,
        );
        c.destroy();
      }
    });

    it('maxWireVersion, minWireVersion and maxWriteBatchSize that are not positive integers keep their defaults', async function () {
      for (const announced of [0.5, 7.5, Infinity, 1e300]) {
        const c = await limited({ maxWireVersion: 21, minWireVersion: announced, maxWriteBatchSize: announced });
        expect(c.server, String(announced)).to.include({ maxWireVersion: 21, minWireVersion: 0, maxWriteBatchSize: 100_000 });
        c.destroy();
        // maxWireVersion 0 is older than any server rxcmap speaks to: the establishment fails.
        const error = await limited({ maxWireVersion: announced }).then(() => undefined, (e: unknown) => e);
        expect(error, String(announced)).to.be.instanceOf(IncompatibleServerError).with.property('maxWireVersion', 0);
      }
    });

    it('a message larger than maxMessageSizeBytes', async function () {
      const c = await limited({ maxBsonObjectSize: 32 * 1024 * 1024, maxMessageSizeBytes: 16 * 1024 * 1024 });
      const error = await rejection(c, { insert: 'x', documents: [{ s: 'a'.repeat(17 * 1024 * 1024) }] });
      expect(error).to.be.instanceOf(WireProtocolError);
      expect((error as Error).message).to.match(/OP_MSG would be 17\d{6} bytes, more than maxMessageSizeBytes 16777216; nothing was sent/);
      await expectUsable(c);
      c.destroy();
    });

    it('a document that cannot be encoded as BSON (a cycle)', async function () {
      const c = await limited({});
      const circular: Document = { ping: 1 };
      circular.self = circular;
      const error = await rejection(c, circular);
      expect(error).to.be.instanceOf(WireProtocolError);
      expect((error as Error).message).to.match(/command cannot be encoded as BSON: .*circular.*; nothing was sent/);
      expect((error as Error).cause).to.be.instanceOf(Error);
      await expectUsable(c);
      c.destroy();
    });
  });

  /** A Connection on a raw socket to a server that compresses its handshake reply with zlib. */
  async function compressedHandshake(offeredCompressors?: readonly 'zlib'[]): Promise<Connection> {
    server = await startHostileServer({
      at: 'handshake',
      misbehaviour: {
        kind: 'answer',
        answer: (request, socket) => {
          socket.write(compressMessage(encodeOpMsg(1, request.header.requestId, { ismaster: true, ok: 1 })));
        },
      },
    });
    started.push(server);
    const socket = net.connect({ host: '127.0.0.1', port: server.port });
    await new Promise((resolve) => socket.once('connect', resolve));
    return new Connection(socket, { id: 1, generation: 0, address: server.address, offeredCompressors });
  }

  it('accepts a handshake reply compressed with an offered compressor (the OP_COMPRESSED spec allows it)', async function () {
    const c = await compressedHandshake(['zlib']);
    expect(await c.command('admin', { isMaster: 1 })).to.include({ ismaster: true });
    c.destroy();
  });

  it('refuses a compressed handshake reply when no compressor was offered', async function () {
    const c = await compressedHandshake();
    const error = await c.command('admin', { isMaster: 1 }).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(MongoNetworkError);
    expect((error as Error).cause).to.be.instanceOf(WireProtocolError);
    expect((error as Error).message).to.match(/OP_COMPRESSED \(compressor id 2\) received during the handshake, but no compressor was offered/);
    expect((error as Error).message).to.not.match(/negotiated/);
    expect(c.errored).to.equal(true);
  });

  it('refuses a handshake reply compressed with a compressor that was not offered, naming those offered (none was negotiated yet)', async function () {
    const c = await compressedHandshake(['snappy'] as never);
    const error = await c.command('admin', { isMaster: 1 }).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(MongoNetworkError);
    expect((error as Error).message).to.match(/OP_COMPRESSED uses compressor id 2 during the handshake, but only the offered snappy \(id 1\) or noop \(id 0\) is accepted/);
    expect((error as Error).message).to.not.match(/negotiated/);
    expect(c.errored).to.equal(true);
  });
});

describe('Connection: bytes with no request in flight', function () {
  let server: net.Server | undefined;
  const sockets: net.Socket[] = [];
  afterEach(async function () {
    for (const socket of sockets.splice(0)) socket.destroy();
    await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
    server = undefined;
  });

  /**
   * A Connection to a server that answers the first request with `{ ok: 1 }` followed by `after` (in the same write),
   * then sends `later` on its own once the client has taken the reply; resolves to the connection, the reply and
   * whether the server-side socket is closed.
   */
  async function serverSending(after: Buffer, later?: Buffer): Promise<{ c: Connection; reply: Promise<Document>; closed: () => boolean }> {
    let closed = false;
    server = net.createServer((socket) => {
      sockets.push(socket);
      socket.on('error', () => undefined);
      socket.once('close', () => (closed = true));
      socket.once('data', (request) => {
        socket.write(Buffer.concat([encodeOpMsg(1, request.readInt32LE(4), { ok: 1 }), after]));
        if (later !== undefined) setTimeout(() => socket.write(later), 20);
      });
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as net.AddressInfo;
    const socket = net.connect({ host: '127.0.0.1', port });
    await new Promise((resolve) => socket.once('connect', resolve));
    const c = new Connection(socket, { id: 1, generation: 0, address: `127.0.0.1:${port}` });
    return { c, reply: c.command('admin', { ping: 1 }), closed: () => closed };
  }

  /** The start of a message announcing 48,000,000 bytes: kept, it would be followed by up to that many. */
  const bigStart = (bytes: number): Buffer => {
    const out = Buffer.alloc(bytes);
    out.writeInt32LE(48_000_000, 0);
    return out;
  };

  it('an idle connection receiving the start of a 48,000,000-byte message is errored at once, holding none of it', async function () {
    // Buffered until the message completed, 47,999,999 bytes sent to an idle connection held 96 MB, for as long as
    // the connection stayed idle in its pool.
    const { c, reply, closed } = await serverSending(Buffer.alloc(0), bigStart(1000));
    expect(await reply).to.include({ ok: 1 });
    expect(await eventually(closed, 1000), 'closed').to.equal(true);
    expect(c.errored).to.equal(true);
    expect(c.error).to.be.instanceOf(MongoNetworkError);
    expect(c.error!.cause).to.be.instanceOf(WireProtocolError);
    expect(c.error!.message).to.match(/failed: wire-protocol error: received 1000 bytes with no request in flight/);
    expect((c as unknown as { framer: { bufferedBytes: number } }).framer.bufferedBytes).to.equal(0);
    expect(await c.command('admin', { ping: 1 }).catch((e: unknown) => e)).to.equal(c.error);
  });

  it('a reply followed by the start of another message: the command succeeds, then the connection is errored', async function () {
    const { c, reply, closed } = await serverSending(bigStart(20));
    expect(await reply).to.include({ ok: 1 });
    expect(c.errored).to.equal(true);
    expect(c.error!.message).to.match(/received 20 bytes with no request in flight/);
    expect(await eventually(closed, 1000), 'closed').to.equal(true);
  });
});

describe('Connection: the reply timeout is a deadline, not an idle timeout', function () {
  it('a reply trickled one byte every 5 ms fails at the timeout, though bytes keep arriving', async function () {
    const sockets: net.Socket[] = [];
    const server = net.createServer((socket) => {
      sockets.push(socket);
      socket.on('error', () => undefined);
      socket.once('data', (request) => {
        const reply = encodeOpMsg(1, request.readInt32LE(4), { ok: 1, pad: 'x'.repeat(1000) });
        let sent = 0;
        const timer = setInterval(() => (socket.destroyed || sent >= reply.length ? clearInterval(timer) : socket.write(reply.subarray(sent, ++sent))), 5);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as net.AddressInfo;
      const socket = net.connect({ host: '127.0.0.1', port });
      await new Promise((resolve) => socket.once('connect', resolve));
      const c = new Connection(socket, { id: 1, generation: 0, address: `127.0.0.1:${port}`, socketTimeoutMS: 150 });
      const started = Date.now();
      const error = await c.command('admin', { ping: 1 }).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(MongoNetworkTimeoutError);
      expect((error as Error).message).to.match(/timed out after 150 ms waiting for a reply/);
      expect(Date.now() - started).to.be.within(140, 1000);
      expect(c.errored).to.equal(true);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    }
  });
  it('a reply trickled faster than the event loop turns still fails soon after the timeout', async function () {
    // A byte in every turn of the loop (a busy client turns every few ms, so a trickle of a byte a ms does this): bytes
    // that arrive after the deadline do not extend it.
    const sockets: net.Socket[] = [];
    let trickling = true;
    const server = net.createServer((socket) => {
      sockets.push(socket);
      socket.setNoDelay(true);
      socket.on('error', () => undefined);
      socket.once('data', (request) => {
        const header = Buffer.alloc(HEADER_LENGTH);
        header.writeInt32LE(1_000_000, 0);
        header.writeInt32LE(1, 4);
        header.writeInt32LE(request.readInt32LE(4), 8);
        header.writeInt32LE(OpCode.OP_MSG, 12);
        socket.write(header);
        const trickle = (): void => {
          if (!trickling || socket.destroyed) return;
          socket.write(Buffer.alloc(1));
          setImmediate(trickle);
        };
        trickle();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as net.AddressInfo;
      const socket = net.connect({ host: '127.0.0.1', port });
      await new Promise((resolve) => socket.once('connect', resolve));
      const c = new Connection(socket, { id: 1, generation: 0, address: `127.0.0.1:${port}`, socketTimeoutMS: 100 });
      const started = Date.now();
      const cap = setTimeout(() => c.destroy(new Error('still waiting 2 s later')), 2000);
      const error = await c.command('admin', { ping: 1 }).catch((e: unknown) => e);
      clearTimeout(cap);
      expect((error as Error).message).to.match(/timed out after 100 ms waiting for a reply/);
      expect(error).to.be.instanceOf(MongoNetworkTimeoutError);
      expect(Date.now() - started).to.be.within(90, 1000);
    } finally {
      trickling = false;
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('Connection: a reply received while the event loop was blocked', function () {
  // Node runs the timers that expired during a block before it reads the sockets: the reply timeout must not report
  // a reply that had already arrived. Deterministic by ordering: the timeout is armed, the server writes the reply
  // (into the client's socket buffer, on loopback), then blocks the whole process for longer than the timeout.
  async function afterBlock(replyBytes: number): Promise<unknown> {
    const sockets: net.Socket[] = [];
    const server = net.createServer((socket) => {
      sockets.push(socket);
      socket.on('error', () => undefined);
      socket.once('data', (request) => {
        socket.write(encodeOpMsg(1, request.readInt32LE(4), { ok: 1, pad: 'x'.repeat(replyBytes) }));
        blockEventLoop(300);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as net.AddressInfo;
      const socket = net.connect({ host: '127.0.0.1', port });
      await new Promise((resolve) => socket.once('connect', resolve));
      const c = new Connection(socket, { id: 1, generation: 0, address: `127.0.0.1:${port}`, socketTimeoutMS: 100 });
      const outcome = await c.command('admin', { ping: 1 }).then(
        (reply) => reply,
        (e: unknown) => e,
      );
      c.destroy();
      return outcome;
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    }
  }

  it('resolves a command whose reply arrived during the block, though its timeout expired meanwhile', async function () {
    const outcome = await afterBlock(10);
    expect(outcome, String(outcome)).to.not.be.instanceOf(Error);
    expect((outcome as Document).ok).to.equal(1);
  });

  it('resolves it when the reply is too long to be read in one turn of the event loop', async function () {
    const outcome = await afterBlock(3_000_000);
    expect(outcome, String(outcome)).to.not.be.instanceOf(Error);
    expect((outcome as Document).pad).to.have.length(3_000_000);
  });
});
