/**
 * A server that lies or attacks at the wire level, met through the real connection factory: establishing a
 * connection, or running a command on one, fails promptly with a typed error that says what is wrong, and no socket
 * stays open on either side. Pool-level outcomes of malformed replies (ConnectionClosed with reason `error`) are in
 * malformed-replies.spec.ts.
 */
import { expect } from 'chai';
import { calculateObjectSize } from 'bson';
import { firstValueFrom, from } from 'rxjs';
import {
  AuthenticationError,
  ConnectionPool,
  MongoCompatibilityError,
  MongoNetworkError,
  MongoNetworkTimeoutError,
  connectionFactory,
  type Connection,
  type ConnectionOptions,
} from '../../lib';
import { WireProtocolError } from '../../lib/connection/wire-protocol';
import { eventually } from '../support/endpoint';
import {
  openSocketsOn,
  startHostileServer,
  type HostileServer,
  type HostileServerOptions,
} from '../support/hostile-server';

/** Establishes one connection with `options` to `server`; resolves to it or rejects with the error. */
function establish(server: HostileServer, options: ConnectionOptions = {}): Promise<Connection> {
  const factory = connectionFactory({ connectTimeoutMS: 2000, ...options, host: '127.0.0.1', port: server.port });
  const descriptor = { id: 1, generation: 0, address: server.address, signal: new AbortController().signal };
  return firstValueFrom(from(factory(descriptor)));
}

interface Case {
  readonly what: string;
  readonly server: HostileServerOptions;
  readonly client?: ConnectionOptions;
  readonly error: typeof MongoNetworkError | typeof AuthenticationError;
  readonly message: RegExp;
  /** Whether `cause` must be a WireProtocolError. */
  readonly wire?: boolean;
}

const COMPRESSED = { compressors: ['zlib'] } as const;

const handshakeCases: Case[] = [
  {
    // Handed out, the errored connection would be closed by the pool and replaced at once, for ever: a storm.
    what: 'a valid hello reply with an unsolicited reply in the same write',
    server: { misbehaviour: { kind: 'valid-then-extra' } },
    error: MongoNetworkError,
    message: /connection 1 to 127\.0\.0\.1:\d+ failed: .*reply responseTo \d+ does not match the request in flight \(none\)/,
    wire: true,
  },

  {
    what: 'garbage (an HTTP response)',
    server: { misbehaviour: { kind: 'garbage' } },
    error: MongoNetworkError,
    message: /message length 1347703880 is outside the allowed range 16\.\.48000000 bytes \(maxMessageSizeBytes is 48000000\)/,
    wire: true,
  },
  {
    what: 'half a hello reply, then close',
    server: { misbehaviour: { kind: 'truncated' } },
    error: MongoNetworkError,
    message: /closed by the server or the network/,
  },
  {
    what: 'a length header of 600,000,000 bytes',
    server: { misbehaviour: { kind: 'oversized-length' } },
    error: MongoNetworkError,
    message: /message length 600000000 is outside the allowed range 16\.\.48000000 bytes \(maxMessageSizeBytes/,
    wire: true,
  },
  {
    what: 'a compressed hello reply when the client offered no compressor',
    server: { misbehaviour: { kind: 'compressed-bomb' } },
    error: MongoNetworkError,
    message: /OP_COMPRESSED \(compressor id 2\) received during the handshake, but no compressor was offered/,
    wire: true,
  },
  {
    what: 'a hello reply to another request',
    server: { misbehaviour: { kind: 'wrong-response-to' } },
    error: MongoNetworkError,
    message: /responseTo \d+ does not match the request in flight/,
    wire: true,
  },
  {
    what: 'no hello reply',
    server: { misbehaviour: { kind: 'silent' } },
    client: { connectTimeoutMS: 100 },
    error: MongoNetworkTimeoutError,
    message: /timed out after 100 ms/,
  },
  {
    what: 'closing on the hello',
    server: { misbehaviour: { kind: 'close' } },
    error: MongoNetworkError,
    message: /closed by the server or the network/,
  },
];

const commandCases: Case[] = [
  {
    what: 'garbage (an HTTP response)',
    server: { misbehaviour: { kind: 'garbage' } },
    error: MongoNetworkError,
    message: /message length 1347703880 is outside the allowed range 16\.\.48000000/,
    wire: true,
  },
  {
    what: 'half a reply, then close',
    server: { misbehaviour: { kind: 'truncated' } },
    error: MongoNetworkError,
    message: /closed by the server or the network/,
  },
  {
    what: 'a 600,000,000-byte reply after announcing maxMessageSizeBytes 2^31-1',
    server: { misbehaviour: { kind: 'oversized-length' }, hello: { maxMessageSizeBytes: 2 ** 31 - 1 } },
    error: MongoNetworkError,
    message: /message length 600000000 is outside the allowed range 16\.\.48000000 bytes \(maxMessageSizeBytes is 48000000\)/,
    wire: true,
  },
  {
    what: 'a compressed bomb when no compressor was negotiated (the hello reply lists zlib, the client offered none)',
    server: { misbehaviour: { kind: 'compressed-bomb', announcedBytes: 1000 }, hello: { compression: ['zlib'] } },
    error: MongoNetworkError,
    message: /no compressor was negotiated in the handshake/,
    wire: true,
  },
  {
    what: 'a compressed bomb announcing its true size (64 MiB) over a negotiated compressor',
    server: { misbehaviour: { kind: 'compressed-bomb' }, hello: { compression: ['zlib'] } },
    client: COMPRESSED,
    error: MongoNetworkError,
    message: /uncompressedSize of 67108864 bytes; allowed 0\.\.47999984 \(maxMessageSizeBytes 48000000/,
    wire: true,
  },
  {
    what: 'a compressed bomb announcing 1000 bytes over a negotiated compressor',
    server: { misbehaviour: { kind: 'compressed-bomb', announcedBytes: 1000 }, hello: { compression: ['zlib'] } },
    client: COMPRESSED,
    error: MongoNetworkError,
    message: /inflates beyond its announced uncompressedSize of 1000 bytes \(the inflate output limit, maxOutputLength\)/,
    wire: true,
  },
  {
    what: 'a compressed bomb announcing 1 MiB over a negotiated compressor (inflated on the thread pool)',
    server: { misbehaviour: { kind: 'compressed-bomb', announcedBytes: 1024 * 1024 }, hello: { compression: ['zlib'] } },
    client: COMPRESSED,
    error: MongoNetworkError,
    message: /inflates beyond its announced uncompressedSize of 1048576 bytes \(the inflate output limit, maxOutputLength\)/,
    wire: true,
  },
  {
    what: 'a snappy-compressed reply when zlib was negotiated',
    server: {
      misbehaviour: {
        kind: 'answer',
        answer: (request, socket) => socket.write(compressedWithId(request.header.requestId, 1)),
      },
      hello: { compression: ['zlib'] },
    },
    client: COMPRESSED,
    error: MongoNetworkError,
    message: /compressor id 1, but only the negotiated zlib \(id 2\) or noop \(id 0\) is accepted/,
    wire: true,
  },
];

/** A tiny OP_COMPRESSED answering `responseTo` with compressor id `compressorId`. */
function compressedWithId(responseTo: number, compressorId: number): Buffer {
  const out = Buffer.alloc(16 + 9 + 4);
  out.writeInt32LE(out.length, 0);
  out.writeInt32LE(responseTo, 8);
  out.writeInt32LE(2012, 12);
  out.writeInt32LE(2013, 16);
  out.writeInt32LE(4, 20);
  out[24] = compressorId;
  return out;
}

describe('a hostile server (wire level), through the connection factory', function () {
  let server: HostileServer | undefined;

  afterEach(async function () {
    await server?.close();
    server = undefined;
  });

  /** Every socket the test opened is closed, on the server side and on the client side. */
  async function expectNoSocketLeft(s: HostileServer): Promise<void> {
    expect(await eventually(() => s.open === 0 && openSocketsOn(s.port) === 0, 1000), 'sockets left open').to.equal(true);
    expect(s.accepted).to.equal(1);
    expect(s.closed).to.equal(1);
  }

  function expectError(error: unknown, c: Case): void {
    expect(error).to.be.instanceOf(c.error);
    expect((error as Error).message).to.match(c.message);
    if (c.wire) expect((error as Error).cause).to.be.instanceOf(WireProtocolError);
  }

  describe('misbehaving on the handshake: establishment fails', function () {
    for (const c of handshakeCases) {
      it(`${c.what}: ${c.error.name}, no socket left open`, async function () {
        server = await startHostileServer({ ...c.server, at: 'handshake' });
        const started = Date.now();
        const error = await establish(server, c.client).then(
          (connection) => {
            connection.destroy();
            return undefined;
          },
          (e: unknown) => e,
        );
        expectError(error, c);
        expect(Date.now() - started).to.be.below(1000);
        await expectNoSocketLeft(server);
      });
    }
  });

  describe('misbehaving after a correct handshake: the command fails and the connection is errored', function () {
    for (const c of commandCases) {
      it(`${c.what}: ${c.error.name}, no socket left open`, async function () {
        server = await startHostileServer({ ...c.server, at: 'command' });
        const connection = await establish(server, { socketTimeoutMS: 1000, ...c.client });
        expect(connection.compressor).to.equal(c.client?.compressors?.[0]);
        const started = Date.now();
        const error = await connection.command('admin', { ping: 1 }).catch((e: unknown) => e);
        expectError(error, c);
        expect(Date.now() - started).to.be.below(1000);
        expect(connection.errored).to.equal(true);
        expect(connection.error).to.equal(error);
        await expectNoSocketLeft(server);
      });
    }
  });

  it('a saslStart reply asking for 30,000,000 iterations: a prompt AuthenticationError, no socket left open', async function () {
    this.timeout(3000);
    server = await startHostileServer({ misbehaviour: { kind: 'absurd-scram' } });
    const started = Date.now();
    const error = await establish(server, {
      credentials: { username: 'app', password: 'secret-pw-1', mechanism: 'SCRAM-SHA-256' },
    }).catch((e: unknown) => e);
    expect(Date.now() - started).to.be.below(1000);
    expect(error).to.be.instanceOf(AuthenticationError);
    expect((error as Error).message).to.match(/iteration/i).and.match(/30000000/);
    expect((error as Error).message).not.to.include('secret-pw-1');
    await expectNoSocketLeft(server);
  });

  it('a server that sends an unsolicited reply with every hello: each checkout fails once, with no connection storm', async function () {
    server = await startHostileServer({ misbehaviour: { kind: 'valid-then-extra' }, at: 'handshake' });
    const pool = new ConnectionPool({ address: server.address, maxPoolSize: 1 });
    const events: string[] = [];
    pool.events$.subscribe((e) => events.push(e.type));
    try {
      for (let i = 0; i < 3; i++) {
        pool.ready();
        const error = await pool.checkOut().then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error, `checkout ${i}`).to.be.instanceOf(MongoNetworkError);
      }
    } finally {
      pool.close();
    }
    expect(server.accepted, 'one connection per checkout').to.equal(3);
    expect(events.filter((e) => e === 'ConnectionCreated')).to.have.length(3);
    expect(events.filter((e) => e === 'ConnectionCheckOutFailed')).to.have.length(3);
    expect(events.filter((e) => e === 'ConnectionClosed')).to.have.length(3);
    expect(await eventually(() => server!.open === 0 && openSocketsOn(server!.port) === 0, 1000), 'sockets left open').to.equal(true);
  });

  it('a hello reply of 2 MiB (a padding field): a MongoNetworkError, no socket left open, no reply kept', async function () {
    server = await startHostileServer({ misbehaviour: { kind: 'silent' }, hello: { padding: 'x'.repeat(2 * 1024 * 1024) } });
    const error = await establish(server).then(
      (connection) => {
        const kept = Buffer.byteLength(String(connection.hello.padding));
        connection.destroy();
        return `established, keeping a hello reply with ${kept} bytes of padding`;
      },
      (e: unknown) => e,
    );
    expect(error).to.be.instanceOf(MongoNetworkError);
    expect((error as Error).message).to.match(
      /connection 1 to 127\.0\.0\.1:\d+ failed: the hello reply is 20\d{5} bytes, more than the 1048576 bytes a hello reply may hold/,
    );
    expect((error as Error).cause).to.be.instanceOf(WireProtocolError);
    expect([...(error as MongoNetworkError).errorLabels]).to.deep.equal([]); // not an overloaded server
    await expectNoSocketLeft(server);
  });

  it('a hello reply of 1 MiB less 1 KiB is accepted, and one of exactly 1 MiB (the limit) too', async function () {
    server = await startHostileServer({ misbehaviour: { kind: 'silent' }, hello: { padding: 'x'.repeat(1024 * 1024 - 1024) } });
    const connection = await establish(server);
    expect(connection.hello.padding).to.have.length(1024 * 1024 - 1024);
    connection.destroy();
    // The padding that brings the same reply to exactly 1048576 bytes.
    const exact = 1024 * 1024 - 1024 + (1024 * 1024 - calculateObjectSize(connection.hello));
    await server.close();
    server = await startHostileServer({ misbehaviour: { kind: 'silent' }, hello: { padding: 'x'.repeat(exact) } });
    const atLimit = await establish(server);
    expect(calculateObjectSize(atLimit.hello)).to.equal(1024 * 1024);
    atLimit.destroy();
  });

  it('a hello reply whose serviceId is null, in load-balanced mode: the server does not support the mode (as with none)', async function () {
    server = await startHostileServer({ misbehaviour: { kind: 'silent' }, at: 'command', hello: { serviceId: null } });
    const error = await establish(server, { loadBalanced: true }).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(MongoCompatibilityError);
    expect((error as Error).message).to.equal('Driver attempted to initialize in load balancing mode, but the server does not support this mode.');
    await expectNoSocketLeft(server);
  });

  it('a hello reply whose serviceId is not an ObjectId, in load-balanced mode: a MongoCompatibilityError, no socket left open', async function () {
    for (const serviceId of ['aaaaaaaaaaaaaaaaaaaaaaaa', 7, { id: 1 }]) {
      server = await startHostileServer({ misbehaviour: { kind: 'silent' }, at: 'command', hello: { serviceId } });
      const error = await establish(server, { loadBalanced: true }).catch((e: unknown) => e);
      expect(error, JSON.stringify(serviceId)).to.be.instanceOf(MongoCompatibilityError);
      expect((error as Error).message).to.equal(
        `Driver attempted to initialize in load balancing mode, but the hello reply's serviceId is not an ObjectId (${typeof serviceId})`,
      );
      await expectNoSocketLeft(server);
      await server.close();
    }
    server = undefined;
  });
});
