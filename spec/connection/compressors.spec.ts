/**
 * snappy and zstd next to zlib, through the embedded endpoint: negotiation in the offer's order, round trips on and
 * off the event loop, the commands never compressed, what happens where a compressor is unavailable, and the size
 * bounds that keep a small message from decompressing into a huge one.
 */
import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import * as net from 'node:net';
import * as path from 'node:path';
import { MongoClient } from 'mongodb';
import { connectionFactory, InvalidOptionError, MongoNetworkError } from '../../lib';
import { parseConnectionString } from '../../lib/connection-string';
import {
  compressMessage,
  compressorUnavailable,
  compressWith,
  CompressorId,
  decompressMessage,
  decompressMessageOnThreadPool,
  decompressWith,
  type CompressorName,
} from '../../lib/connection/op-compressed';
import { encodeOpMsg } from '../../lib/connection/op-msg';
import { HEADER_LENGTH, MessageFramer, OpCode, WireProtocolError, writeHeader, type WireMessage } from '../../lib/connection/wire-protocol';
import { EmbeddedServer } from '../../lib/testing';
import { establishOne, startTestEndpoint } from '../support/endpoint';
import { opCompressed as hostileOpCompressed, startHostileServer } from '../support/hostile-server';
import { startWireProxy } from '../support/wire-proxy';

const OP_COMPRESSED = `OP_${OpCode.OP_COMPRESSED}`;

/** Skips the test when `name` cannot be used in this process, saying why (zstd before Node.js 22.15). */
function requireCompressor(context: Mocha.Context, name: CompressorName): void {
  const why = name === 'zlib' ? undefined : compressorUnavailable(name);
  if (why !== undefined) {
    console.log(`      skipped: ${why}`);
    context.skip();
  }
}

/** `message` (header included) as the framer hands it over. */
function asWireMessage(message: Buffer): WireMessage {
  return {
    header: {
      messageLength: message.readInt32LE(0),
      requestId: message.readInt32LE(4),
      responseTo: message.readInt32LE(8),
      opCode: message.readInt32LE(12),
    },
    body: message.subarray(HEADER_LENGTH),
  };
}

/** An OP_COMPRESSED wrapping OP_MSG whose `data` (compressor `id`) is announced as `uncompressedSize` bytes. */
function opCompressed(data: Buffer, uncompressedSize: number, id: number): WireMessage {
  const body = Buffer.alloc(9 + data.length);
  body.writeInt32LE(OpCode.OP_MSG, 0);
  body.writeInt32LE(uncompressedSize, 4);
  body[8] = id;
  data.copy(body, 9);
  return { header: { messageLength: HEADER_LENGTH + body.length, requestId: 1, responseTo: 0, opCode: OpCode.OP_COMPRESSED }, body };
}

/**
 * A zstd frame of `bytes` bytes of 'a' in RLE blocks of 128 KiB (4 bytes each), with no content size in its header:
 * 1 GiB takes 32,774 bytes, and nothing tells the decompressor how much it will produce before it does.
 */
function zstdRleFrame(bytes: number): Buffer {
  const parts = [Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x38])]; // magic; no content size; window 128 KiB
  for (let left = bytes; left > 0; ) {
    const n = Math.min(128 * 1024, left);
    left -= n;
    const header = (left === 0 ? 1 : 0) | (1 << 1) | (n << 3); // last block?, RLE, size
    parts.push(Buffer.from([header & 0xff, (header >> 8) & 0xff, (header >> 16) & 0xff, 0x61]));
  }
  return Buffer.concat(parts);
}

/**
 * Counts the calls of the asynchronous (thread pool) compress and decompress functions of `name`'s library: snappy's
 * `compress` / `uncompress`, Node's `zstdCompress` / `zstdDecompress`, zlib's `deflate` / `inflate`.
 */
function countAsyncCalls(name: CompressorName): { count: { compress: number; decompress: number }; restore(): void } {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const lib = (name === 'snappy' ? require('snappy') : require('node:zlib')) as Record<string, (...args: unknown[]) => unknown>;
  const names = { snappy: ['compress', 'uncompress'], zstd: ['zstdCompress', 'zstdDecompress'], zlib: ['deflate', 'inflate'] }[name];
  const count = { compress: 0, decompress: 0 };
  const real = names.map((n) => lib[n]);
  names.forEach((n, i) => {
    lib[n] = (...args: unknown[]) => {
      count[i === 0 ? 'compress' : 'decompress']++;
      return real[i](...args);
    };
  });
  return { count, restore: () => names.forEach((n, i) => (lib[n] = real[i])) };
}

describe('Compressors snappy, zstd and zlib', function () {
  describe('through the embedded endpoint', function () {
    let server: EmbeddedServer;
    const seen: (string | undefined)[] = [];
    beforeEach(async function () {
      seen.length = 0;
      server = await new EmbeddedServer().start();
      server.handle('echo', (command, client) => {
        seen.push(client.compressor);
        return { ok: 1, echoed: command.echo };
      });
    });
    afterEach(async function () {
      await server.stop();
    });

    for (const name of ['snappy', 'zstd', 'zlib'] as const) {
      it(`round-trips small and large (thread pool) commands and replies with ${name}`, async function () {
        requireCompressor(this, name);
        const proxy = await startWireProxy(server.address);
        try {
          const c = await establishOne(proxy.address, { compressors: [name] });
          expect(c.compressor).to.equal(name);
          // 2 KB and 400 KB: below and above the 64 KiB from which compression and decompression leave the event loop,
          // through the libraries' asynchronous calls (the endpoint, in this process, uses the synchronous ones).
          const calls = countAsyncCalls(name);
          try {
            for (const [text, offLoop] of [['ab'.repeat(1000), 0], ['ab'.repeat(200_000) + 'c', 1]] as const) {
              const before = { ...calls.count };
              expect((await c.command('admin', { echo: text })).echoed).to.equal(text);
              expect({ compress: calls.count.compress - before.compress, decompress: calls.count.decompress - before.decompress }, `${text.length} characters`).to.deep.equal({ compress: offLoop, decompress: offLoop });
            }
          } finally {
            calls.restore();
          }
          c.destroy();
          expect(seen).to.deep.equal([name, name]);
          // The handshake went uncompressed; both echoes compressed (the endpoint accepts only the negotiated id).
          expect(proxy.commands.filter((command) => command !== 'endSessions')).to.deep.equal(['isMaster', OP_COMPRESSED, OP_COMPRESSED]);
        } finally {
          await proxy.stop();
        }
      });
    }

    it('offers the compressors in the order given, and uses the first the server agrees to', async function () {
      const hellos: unknown[] = [];
      const offers: [string[], string[] | undefined, string | undefined][] = [
        // [offered, endpoint accepts (undefined: all this process speaks), negotiated]
        [['zstd', 'snappy', 'zlib'], ['zlib', 'snappy'], 'snappy'],
        [['zstd', 'snappy', 'zlib'], ['zlib'], 'zlib'],
        [['zlib', 'snappy'], undefined, 'zlib'],
        [['snappy', 'zlib'], undefined, 'snappy'],
        [['snappy'], ['zlib'], undefined],
        // A name given twice is offered once, in its first place.
        [['zlib', 'snappy', 'zlib', 'snappy'], ['snappy'], 'snappy'],
      ];
      const zstd = compressorUnavailable('zstd') === undefined;
      if (zstd) offers.push([['zstd', 'snappy', 'zlib'], undefined, 'zstd'], [['zlib', 'zstd'], ['zstd'], 'zstd']);
      else console.log(`      zstd left out of the offers: ${compressorUnavailable('zstd')}`);
      for (const [given, accepts, negotiated] of offers) {
        const offered = zstd ? given : given.filter((c) => c !== 'zstd');
        const endpoint = await new EmbeddedServer({ compressors: accepts }).start();
        const proxy = await startWireProxy(endpoint.address, {
          request: (command) => {
            if (command.isMaster !== undefined || command.hello !== undefined) hellos.push(command.compression);
            return command;
          },
        });
        try {
          const c = await establishOne(proxy.address, { compressors: offered });
          expect(c.compressor, `${offered.join(',')} against ${String(accepts)}`).to.equal(negotiated);
          expect(hellos.pop()).to.deep.equal([...new Set(offered)]);
          await c.command('admin', { ping: 1 });
          expect(proxy.commands.at(-1)).to.equal(negotiated === undefined ? 'ping' : OP_COMPRESSED);
          c.destroy();
        } finally {
          await proxy.stop();
          await endpoint.stop();
        }
      }
    });

    it("uses the first compressor of the client's list that the server lists, whatever the server's order", async function () {
      requireCompressor(this, 'snappy');
      // OP_COMPRESSED spec, "MongoDB Handshake Amendment": clients MUST use the first compressor in the client's
      // configured compressors list that is also in the server's list.
      const used: number[] = [];
      const server = await startHostileServer({
        hello: { compression: ['zlib', 'snappy'] },
        misbehaviour: {
          kind: 'answer',
          answer: (request, socket) => {
            used.push(request.header.opCode === OpCode.OP_COMPRESSED ? request.body[8] : -1);
            socket.write(encodeOpMsg(1, request.header.requestId, { ok: 1 }));
          },
        },
      });
      try {
        for (const [offered, expected] of [[['snappy', 'zlib'], 'snappy'], [['zlib', 'snappy'], 'zlib']] as const) {
          const c = await establishOne(server.address, { compressors: offered });
          expect(c.compressor, `${offered.join(',')} against zlib,snappy`).to.equal(expected);
          await c.command('admin', { ping: 1 });
          expect(used.pop()).to.equal(CompressorId[expected]);
          c.destroy();
        }
      } finally {
        await server.close();
      }
    });

    it('a connection destroyed while a large command is encoded (a getter of its document) rejects it as closed, compressing nothing', async function () {
      const c = await establishOne(server.address, { compressors: ['zlib'] });
      const calls = countAsyncCalls('zlib');
      try {
        // 200 KB: compressed on the thread pool, had the connection stayed open.
        const command = { echo: 'ab'.repeat(100_000), get comment() {
          c.destroy();
          return 'destroyed';
        } };
        const error = await c.command('admin', command).catch((e: unknown) => e);
        expect(error).to.be.instanceOf(MongoNetworkError).with.property('message').that.matches(/connection 1 to \S+ is closed$/);
        expect(calls.count.compress, 'thread-pool compressions started').to.equal(0);
      } finally {
        calls.restore();
      }
    });

    it('never compresses the handshake or authentication commands', async function () {
      const endpoint = await new EmbeddedServer({ users: [{ username: 'u', password: 'pencil' }] }).start();
      const proxy = await startWireProxy(endpoint.address);
      try {
        for (const mechanism of ['SCRAM-SHA-256', 'SCRAM-SHA-1'] as const) {
          proxy.commands.length = 0;
          const c = await establishOne(proxy.address, { compressors: ['snappy'], credentials: { username: 'u', password: 'pencil', mechanism } });
          expect(c.compressor).to.equal('snappy');
          await c.command('admin', { ping: 1 });
          c.destroy();
          const sent = proxy.commands.filter((command) => command !== 'endSessions');
          // The handshake (isMaster, without serverApi) carries the first SCRAM step (speculative authentication),
          // saslContinue the next ones; then ping goes compressed.
          expect(sent.at(-1)).to.equal(OP_COMPRESSED);
          expect(sent[0]).to.equal('isMaster');
          expect(sent.slice(1, -1)).to.include('saslContinue');
          expect(sent.slice(1, -1).every((command) => ['saslStart', 'saslContinue'].includes(command)), sent.join(' ')).to.equal(true);
        }
      } finally {
        await proxy.stop();
        await endpoint.stop();
      }
    });
  });

  it('the official driver sends the same snappy bytes as this library, and reads the endpoint\'s snappy replies', async function () {
    requireCompressor(this, 'snappy');
    this.timeout(20_000);
    const server = await new EmbeddedServer({ compressors: ['snappy'] }).start();
    const [host, port] = server.address.split(':');
    const sent: WireMessage[] = [];
    // A pass-through TCP proxy that frames what the driver sends.
    const proxy = net.createServer((client) => {
      const upstream = net.connect(Number(port), host);
      const framer = new MessageFramer();
      client.on('data', (chunk) => {
        sent.push(...framer.push(chunk));
        upstream.write(chunk);
      });
      upstream.on('data', (chunk) => client.write(chunk));
      client.on('close', () => upstream.destroy()).on('error', () => undefined);
      upstream.on('close', () => client.destroy()).on('error', () => undefined);
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const driver = new MongoClient(`mongodb://127.0.0.1:${(proxy.address() as net.AddressInfo).port}/?compressors=snappy&directConnection=true&maxPoolSize=1`);
    try {
      await driver.connect();
      expect((await driver.db('a').command({ ping: 1 })).ok).to.equal(1);
      expect((await driver.db('a').command({ ping: 1, big: 'xyz'.repeat(40_000) })).ok).to.equal(1); // 120 KB
      const compressed = sent.filter((m) => m.header.opCode === OpCode.OP_COMPRESSED);
      expect(compressed.map((m) => m.body[8])).to.deep.equal([CompressorId.snappy, CompressorId.snappy]);
      for (const message of compressed) {
        const header = Buffer.alloc(HEADER_LENGTH);
        writeHeader(header, message.header);
        const plain = decompressMessage(message);
        const plainBytes = Buffer.alloc(HEADER_LENGTH);
        writeHeader(plainBytes, plain.header);
        const ours = compressMessage(Buffer.concat([plainBytes, plain.body]), -1, 'snappy');
        expect(ours.equals(Buffer.concat([header, message.body])), `${plain.header.messageLength} bytes`).to.equal(true);
      }
    } finally {
      await driver.close();
      proxy.close();
      await server.stop();
    }
  });

  describe('where one is unavailable', function () {
    it('zstd before Node.js 22.15: an option error naming why, left out of a connection string with a warning naming why', function () {
      const why = compressorUnavailable('zstd');
      if (why === undefined) {
        console.log(`      skipped: Node.js ${process.version} has zstd (see the simulated case below)`);
        this.skip();
      }
      expect(why).to.match(/has no zlib\.zstdCompress \(Node\.js 22\.15 or later\)/);
      const error = (() => {
        try {
          connectionFactory({ host: 'h', port: 1, compressors: ['zlib', 'zstd'] });
        } catch (e) {
          return e;
        }
      })();
      expect(error).to.be.instanceOf(InvalidOptionError).with.property('option', 'compressors');
      expect((error as Error).message).to.include('zstd').and.include('Node.js 22.15 or later');
      const parsed = parseConnectionString('mongodb://h/?compressors=zstd,zlib');
      expect(parsed.connectionOptions.compressors).to.deep.equal(['zlib']);
      expect(parsed.warnings).to.deep.equal([`compressors zstd (${why}) are unavailable here and are ignored`]);
      expect(() => new EmbeddedServer({ compressors: ['zstd'] })).to.throw(InvalidOptionError, /Node\.js 22\.15 or later/);
    });

    it('snappy not installed, zstd absent (simulated in a child process): option errors and warnings naming why', function () {
      this.timeout(30_000);
      const root = path.resolve(__dirname, '../..');
      const script = `
        const Module = require('node:module');
        const load = Module._load;
        const zlib = require('node:zlib');
        const noZstd = { ...zlib, zstdCompress: undefined, zstdCompressSync: undefined, zstdDecompress: undefined, zstdDecompressSync: undefined };
        Module._load = function (request, ...rest) {
          if (request === 'snappy') throw Object.assign(new Error("Cannot find module 'snappy'\\nRequire stack:\\n- /srv/app/secret-project/index.js"), { code: 'MODULE_NOT_FOUND' });
          if (request === 'node:zlib' || request === 'zlib') return noZstd;
          return load.call(this, request, ...rest);
        };
        const { connectionFactory, InvalidOptionError } = require('./lib');
        const { parseConnectionString } = require('./lib/connection-string');
        const { EmbeddedServer } = require('./lib/testing');
        const out = {};
        for (const name of ['snappy', 'zstd']) {
          try { connectionFactory({ host: 'h', port: 1, compressors: [name] }); out[name] = 'accepted'; }
          catch (e) { out[name] = { invalidOption: e instanceof InvalidOptionError, option: e.option, message: e.message }; }
          try { new EmbeddedServer({ compressors: [name] }); out['endpoint ' + name] = 'accepted'; }
          catch (e) { out['endpoint ' + name] = e instanceof InvalidOptionError; }
        }
        const parsed = parseConnectionString('mongodb://h/?compressors=snappy,zstd,zlib,lz4');
        out.uri = { compressors: parsed.connectionOptions.compressors, warnings: parsed.warnings };
        out.zlib = connectionFactory({ host: 'h', port: 1, compressors: ['zlib'] }) !== undefined;
        console.log(JSON.stringify(out));
      `;
      const r = spawnSync(process.execPath, ['-r', 'ts-node/register/transpile-only', '-e', script], {
        cwd: root,
        env: { ...process.env, TS_NODE_PROJECT: path.join(root, 'tsconfig.json') },
        encoding: 'utf8',
      });
      expect(r.status, r.stderr).to.equal(0);
      const out = JSON.parse(r.stdout);
      expect(out.snappy).to.include({ invalidOption: true, option: 'compressors' });
      expect(out.snappy.message).to.include('snappy').and.include('the optional package snappy could not be loaded (npm install snappy)');
      expect(out.zstd).to.include({ invalidOption: true, option: 'compressors' });
      expect(out.zstd.message).to.include('has no zlib.zstdCompress (Node.js 22.15 or later)');
      expect(out['endpoint snappy']).to.equal(true);
      expect(out['endpoint zstd']).to.equal(true);
      expect(out.uri.compressors).to.deep.equal(['zlib']);
      expect(out.uri.warnings).to.have.length(1);
      expect(out.uri.warnings[0]).to.match(/^compressors lz4 are not supported and are ignored; compressors snappy \(the optional package snappy could not be loaded \(npm install snappy\): Cannot find module 'snappy'\), zstd \(Node\.js v[\d.]+ has no zlib\.zstdCompress \(Node\.js 22\.15 or later\)\) are unavailable here and are ignored$/);
      expect(out.zlib).to.equal(true);
    });
  });

  describe('the announced size bounds decompression', function () {
    const body = encodeOpMsg(1, 0, { insert: 'c', documents: Array.from({ length: 20_000 }, (_, i) => ({ i, s: 'abcdefgh' })), $db: 'db' });

    it('snappy: a valid block whose length header differs from uncompressedSize is refused before it is decompressed', async function () {
      requireCompressor(this, 'snappy');
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const snappy = require('snappy') as { uncompressSync: (...a: unknown[]) => unknown; uncompress: (...a: unknown[]) => unknown };
      const data = compressWith('snappy', body.subarray(HEADER_LENGTH)); // valid: the snappy package decompresses it
      const real = { sync: snappy.uncompressSync, async: snappy.uncompress };
      let calls = 0;
      snappy.uncompressSync = (...a: unknown[]) => (calls++, real.sync(...a));
      snappy.uncompress = (...a: unknown[]) => (calls++, real.async(...a));
      try {
        const actual = body.length - HEADER_LENGTH;
        for (const announced of [100, actual - 1, actual + 1]) {
          const message = opCompressed(data, announced, CompressorId.snappy);
          const refused = new RegExp(`snappy data announces ${actual} uncompressed bytes, the message ${announced}; refused`);
          expect(() => decompressMessage(message)).to.throw(WireProtocolError, refused);
          const error = await decompressMessageOnThreadPool(message).catch((e: unknown) => e);
          expect(error).to.be.instanceOf(WireProtocolError).with.property('message').that.matches(refused);
        }
        expect(calls, 'snappy decompressions started').to.equal(0);
        expect(decompressMessage(opCompressed(data, actual, CompressorId.snappy)).body.equals(body.subarray(HEADER_LENGTH))).to.equal(true);
        expect(calls).to.equal(1);
      } finally {
        snappy.uncompressSync = real.sync;
        snappy.uncompress = real.async;
      }
    });

    it('zstd: a 32 KB frame that expands to 1 GiB fails at the announced size, at once', async function () {
      requireCompressor(this, 'zstd');
      const frame = zstdRleFrame(2 ** 30);
      expect(frame.length).to.equal(32_774);
      const bomb = /zstd data inflates beyond its announced uncompressedSize of 100000 bytes; refused/;
      let start = performance.now();
      expect(() => decompressWith('zstd', frame, 100_000)).to.throw(WireProtocolError, bomb);
      expect(() => decompressMessage(opCompressed(frame, 100_000, CompressorId.zstd))).to.throw(WireProtocolError, bomb);
      const syncMS = performance.now() - start;
      start = performance.now();
      const error = await decompressMessageOnThreadPool(opCompressed(frame, 100_000, CompressorId.zstd)).catch((e: unknown) => e);
      const asyncMS = performance.now() - start;
      expect(error).to.be.instanceOf(WireProtocolError).with.property('message').that.matches(bomb);
      // Expanding it all takes some 2 s and 1 GiB; stopping at 100 KB takes about 1 ms: 1 s leaves a loaded machine's
      // pauses room.
      expect(syncMS, 'two synchronous refusals').to.be.below(1000);
      expect(asyncMS, 'refusal on the thread pool').to.be.below(1000);
    });

    // Data that decompresses to nothing: empty zlib stored blocks (5 bytes each), empty zstd raw blocks (3 bytes each).
    // 40 MB of either takes 50 ms (zlib) to 200 ms (zstd) to read through; announced as 100 bytes, it must still
    // leave the event loop.
    const emptyData: Record<'zlib' | 'zstd', (bytes: number) => Buffer> = {
      zlib: (bytes) => {
        const blocks = Math.floor(bytes / 5);
        const data = Buffer.alloc(2 + blocks * 5 + 9);
        data[0] = 0x78;
        data[1] = 0x9c;
        for (let i = 0; i <= blocks; i++) data.writeUInt16LE(0xffff, 2 + i * 5 + 3); // LEN 0, NLEN 0xffff
        data[2 + blocks * 5] = 1; // the last block is final
        data.writeUInt32BE(1, 2 + blocks * 5 + 5); // Adler-32 of nothing
        return data;
      },
      zstd: (bytes) => {
        const blocks = Math.floor(bytes / 3);
        const data = Buffer.alloc(6 + blocks * 3 + 3);
        data.writeUInt32LE(0xfd2fb528, 0); // magic; no content size; smallest window
        data[6 + blocks * 3] = 1; // the last block
        return data;
      },
    };
    for (const name of ['zlib', 'zstd'] as const) {
      it(`${name}: 64 KiB of compressed data or more is decompressed on the thread pool, whatever uncompressedSize it announces`, async function () {
        requireCompressor(this, name);
        const data = emptyData[name](1024 * 1024);
        const server = await startHostileServer({
          hello: { compression: [name] },
          misbehaviour: { kind: 'answer', answer: (request, socket) => socket.write(hostileOpCompressed(request.header.requestId, data, 100, CompressorId[name])) },
        });
        const calls = countAsyncCalls(name);
        try {
          const c = await establishOne(server.address, { compressors: [name] });
          const error = await c.command('admin', { ping: 1 }).catch((e: unknown) => e);
          expect(error).to.have.property('message').that.includes('OP_COMPRESSED announced 100 bytes but held 0');
          expect(calls.count.decompress, `${data.length} bytes of ${name} data announcing 100`).to.equal(1);
        } finally {
          calls.restore();
          await server.close();
        }
      });
    }

    it('snappy and zstd round-trip through compressMessage / decompressMessage, the compressor id in the header', function () {
      for (const name of ['snappy', 'zstd'] as const) {
        if (compressorUnavailable(name) !== undefined) continue;
        const compressed = compressMessage(body, -1, name);
        expect(compressed[24]).to.equal(CompressorId[name]);
        expect(compressed.length).to.be.below(body.length / 3);
        const back = decompressMessage(asWireMessage(compressed));
        expect(back.header.opCode).to.equal(OpCode.OP_MSG);
        expect(back.body.equals(body.subarray(HEADER_LENGTH))).to.equal(true);
      }
    });
  });

  // Against MONGODB_URI's server when set (a mongod accepts snappy, zstd and zlib by default), else the embedded endpoint.
  describe('against the test endpoint (MONGODB_URI when set)', function () {
    for (const name of ['snappy', 'zstd', 'zlib'] as const) {
      it(`negotiates ${name} and runs compressed commands, the handshake uncompressed`, async function () {
        requireCompressor(this, name);
        const endpoint = await startTestEndpoint();
        const proxy = await startWireProxy(endpoint.address);
        try {
          const c = await establishOne(proxy.address, { ...endpoint.connectionOptions, compressors: [name] });
          expect(c.compressor).to.equal(name);
          const text = 'xy'.repeat(100_000);
          const reply = await c.command('admin', { ping: 1, comment: text });
          expect(reply.ok).to.equal(1);
          c.destroy();
          // The proxy reads plain TCP only: over TLS (MONGODB_URI's, say) the bytes pass unread.
          if (!Object.keys(endpoint.connectionOptions).some((key) => key.startsWith('tls'))) {
            expect(proxy.commands.at(-1)).to.equal(OP_COMPRESSED);
            expect(proxy.commands[0]).to.be.oneOf(['isMaster', 'hello']);
          }
        } finally {
          await proxy.stop();
          await endpoint.stop();
        }
      });
    }
  });
});
