/**
 * `Connection.nextReply({ signal })`: a reader of a streamed reply (an exhaust cursor whose subscriber is gone) gives
 * up at once with CommandCancelledError; a read cancelled while it waited closes its connection (the stream's next
 * reply is never read, so the connection never goes back to the pool), one cancelled before it began leaves the
 * connection as it was; no listener stays on the signal once its reads settled. The stream is a streaming hello
 * (exhaustAllowed, awaitable), against the embedded endpoint or the server of MONGODB_URI when it is set (the embedded
 * endpoint's topology change brings the next reply at once; a server of MONGODB_URI streams one every maxAwaitTimeMS).
 */
import { expect } from 'chai';
import { getEventListeners } from 'node:events';
import type * as net from 'node:net';
import { Long, ObjectId, type Document } from 'bson';
import { CommandCancelledError, ConnectionBusyError, ConnectionPool, InvalidOptionError, MongoNetworkError, MongoNetworkTimeoutError, WireProtocolError, type Connection, type ConnectionPoolEvent } from '../../lib';
import { compressMessage } from '../../lib/connection/op-compressed';
import { encodeOpMsg, OpMsgFlag } from '../../lib/connection/op-msg';
import { eventually, startTestEndpoint, stopTestEndpoint, type TestEndpoint } from '../support/endpoint';
import { startHostileServer, type HostileServer } from '../support/hostile-server';
import { microtasks } from '../support/microtasks';
import { abortingAsListened, refusingListeners, unreadableAborted, brokenAtRead } from '../support/signals';
import { unhandledRejectionsOf } from '../support/unhandled';

/**
 * What `promise` came to before the event loop's next turn (its value, or the error it rejected with), or 'pending':
 * a read that settles at once does so however loaded the machine is, where a bound in ms would not hold.
 */
const atOnce = (promise: Promise<unknown>): Promise<unknown> => Promise.race([promise.catch((e: unknown) => e), microtasks().then(() => 'pending')]);

/** How many streamed replies `connection` received and did not read yet (its private queue of them). */
const unreadOf = (connection: Connection): number => (connection as unknown as { unread: unknown[] }).unread.length;

describe('Connection.nextReply: signal (a streamed reply its reader gives up on)', function () {
  this.timeout(30_000);
  let endpoint: TestEndpoint;
  let pool: ConnectionPool;
  let poolEvents: ConnectionPoolEvent[];

  beforeEach(async function () {
    endpoint = await startTestEndpoint();
    pool = new ConnectionPool({ address: endpoint.address, maxPoolSize: 1, connectionOptions: endpoint.connectionOptions });
    poolEvents = [];
    pool.events$.subscribe((e) => poolEvents.push(e));
    pool.ready();
  });
  afterEach(async function () {
    pool.close();
    await stopTestEndpoint(endpoint);
  });

  /** The pool events ConnectionCheckedIn and ConnectionClosed, as `type` or `type:reason`. */
  const poolTypes = (): string[] =>
    poolEvents.filter((e) => e.type === 'ConnectionCheckedIn' || e.type === 'ConnectionClosed').map((e) => ('reason' in e ? `${e.type}:${String(e.reason)}` : e.type));

  /**
   * Starts a streaming hello on `connection`: answered at once (its topologyVersion names another process), then one
   * reply every `maxAwaitTimeMS` (or at each topology change of the embedded endpoint). Resolves to the first reply.
   */
  async function streaming(connection: Connection, maxAwaitTimeMS: number): Promise<Document> {
    const topologyVersion = { processId: new ObjectId(), counter: Long.fromNumber(0) };
    const first = await connection.command('admin', { hello: 1, topologyVersion, maxAwaitTimeMS }, { exhaustAllowed: true });
    expect(connection.moreToCome, 'the server streams').to.equal(true);
    return first;
  }

  /**
   * Has the embedded endpoint stream its next reply now (a topology change), rather than maxAwaitTimeMS after the last
   * one; a server of MONGODB_URI streams it maxAwaitTimeMS later.
   */
  const nextReplyNow = (): void => void endpoint.embedded?.changeTopology();

  it('an already-aborted signal rejects at once with CommandCancelledError (cause: its reason): nothing read, the connection as it was', async function () {
    const connection = await pool.checkOut();
    await streaming(connection, 200);
    nextReplyNow();
    expect(await eventually(() => unreadOf(connection) > 0), 'a streamed reply received, not yet read').to.equal(true);
    const controller = new AbortController();
    const reason = new Error('subscriber gone');
    controller.abort(reason);
    const received = unreadOf(connection);
    const error = await atOnce(connection.nextReply({ signal: controller.signal }));
    expect(unreadOf(connection), 'streamed replies not yet read, after the rejection').to.be.at.least(received);
    expect(error).to.be.instanceOf(CommandCancelledError);
    expect(error).to.deep.include({ address: endpoint.address, connectionId: connection.id, commandName: 'hello', sent: false, streamedReply: true, cause: reason });
    expect((error as Error).message).to.equal(
      `Command hello on connection ${connection.id} to ${endpoint.address} was cancelled before its next streamed reply was read: nothing was read, and the connection is left as it was`,
    );
    expect(connection.errored).to.equal(false);
    expect(connection.moreToCome).to.equal(true);
    // The reply received meanwhile is still there, read at once.
    expect(await atOnce(connection.nextReply())).to.be.an('object').that.includes({ ok: 1 });
    expect(getEventListeners(controller.signal, 'abort').length).to.equal(0);
    connection.destroy();
    pool.checkIn(connection);
  });

  it('aborted while it waits for the next reply: rejects at once, the connection closed (reason error), never reused', async function () {
    const connection = await pool.checkOut();
    await streaming(connection, 10_000);
    const controller = new AbortController();
    const settled = connection.nextReply({ signal: controller.signal }).catch((e: unknown) => e);
    // A turn of the event loop later (the socket read), the read still waits: the next reply comes in 10 s.
    expect(await atOnce(settled), 'the read, before the abort').to.equal('pending');
    expect(getEventListeners(controller.signal, 'abort').length, 'listeners while it waits').to.equal(1);
    const abortedAt = performance.now();
    controller.abort();
    const error = await settled;
    expect(performance.now() - abortedAt, 'ms from the abort to the rejection (the next reply comes in 10 s)').to.be.below(2000);
    expect(error).to.be.instanceOf(CommandCancelledError);
    expect(error).to.deep.include({ connectionId: connection.id, commandName: 'hello', sent: true, streamedReply: true, cause: controller.signal.reason });
    expect((error as Error).message).to.match(/^Command hello on connection \d+ to .+ was cancelled while its next streamed reply was awaited: the stream's replies will not be read, and the connection is closed$/);
    expect(getEventListeners(controller.signal, 'abort').length, 'listeners once it settled').to.equal(0);
    // The stream's next reply will never be read: errored, with a network error that says why, and closed as it is
    // checked in.
    expect(connection.errored).to.equal(true);
    expect(connection.error).to.be.instanceOf(MongoNetworkError);
    expect(connection.error!.message).to.match(/was closed: its command hello was cancelled after it was sent, before its reply was read$/);
    if (endpoint.embedded !== undefined) expect(await endpoint.embedded.waitForOpenConnections(0, { timeoutMS: 2000 }), 'the socket is closed').to.equal(0);
    pool.checkIn(connection);
    expect(poolTypes()).to.deep.equal(['ConnectionCheckedIn', 'ConnectionClosed:error']);
    const next = await pool.checkOut();
    expect(next.id, 'a new connection').to.not.equal(connection.id);
    expect(await next.command('admin', { ping: 1 })).to.include({ ok: 1 });
    pool.checkIn(next);
  });

  it('aborted after it settled: nothing happens, the stream goes on', async function () {
    const connection = await pool.checkOut();
    await streaming(connection, 200);
    const controller = new AbortController();
    // Waiting for the reply, listening to the signal, when the reply comes.
    const reading = connection.nextReply({ signal: controller.signal });
    nextReplyNow();
    expect(await reading).to.include({ ok: 1 });
    controller.abort();
    expect(connection.errored).to.equal(false);
    expect(connection.moreToCome).to.equal(true);
    nextReplyNow();
    expect(await connection.nextReply()).to.include({ ok: 1 });
    connection.destroy();
    pool.checkIn(connection);
  });

  it('one signal over 10,000 reads of one stream: one listener while one waits, none once they settled', async function () {
    // A server of MONGODB_URI streams one reply per maxAwaitTimeMS (100 ms): 20 reads there.
    const embedded = endpoint.embedded;
    const reads = embedded === undefined ? 20 : 10_000;
    const { signal } = new AbortController();
    const connection = await pool.checkOut();
    try {
      await streaming(connection, embedded === undefined ? 100 : 10_000);
      for (let i = 0; i < reads; i++) {
        const reply = connection.nextReply({ signal });
        if (i === 0) expect(getEventListeners(signal, 'abort').length, 'listeners while one waits').to.equal(1);
        embedded?.changeTopology();
        expect(await reply).to.include({ ok: 1 });
      }
      expect(getEventListeners(signal, 'abort').length, `listeners after ${reads} reads`).to.equal(0);
      expect(connection.errored).to.equal(false);
    } finally {
      connection.destroy();
      pool.checkIn(connection);
    }
  });

  it('a signal that is not an AbortSignal is refused with InvalidOptionError naming signal: nothing read, the connection as it was', async function () {
    const connection = await pool.checkOut();
    await streaming(connection, 200);
    nextReplyNow();
    expect(await eventually(() => unreadOf(connection) > 0), 'a streamed reply received, not yet read').to.equal(true);
    for (const value of [{}, 'abort', 5, null, { aborted: 'no', addEventListener() {}, removeEventListener() {} }]) {
      const error = await connection.nextReply({ signal: value as unknown as AbortSignal }).catch((e: unknown) => e);
      expect(error, String(value)).to.be.instanceOf(InvalidOptionError).and.have.property('option', 'signal');
      expect((error as Error).message).to.match(/\(signal must be an AbortSignal \(e\.g\. AbortController\.signal or AbortSignal\.timeout\(ms\)\)\)$/);
    }
    const unreadable = await connection.nextReply({ signal: unreadableAborted('torn down') }).catch((e: unknown) => e);
    expect(unreadable).to.be.instanceOf(InvalidOptionError).and.include({ option: 'signal', cause: 'torn down' });
    expect((unreadable as Error).message).to.match(/^Invalid signal: reading it as an AbortSignal threw \(torn down\); signal must be an AbortSignal/);
    const misspelt = await connection.nextReply({ sigal: new AbortController().signal } as never).catch((e: unknown) => e);
    expect(misspelt).to.be.instanceOf(InvalidOptionError);
    expect((misspelt as Error).message).to.match(/did you mean signal\?/);
    expect(connection.errored).to.equal(false);
    expect(connection.busy).to.equal(true);
    expect(unreadOf(connection), 'streamed replies received, not yet read').to.be.above(0);
    // An AbortSignal of another realm or a polyfill: its shape is what counts. It reads the reply received before.
    const polyfill = { aborted: false, reason: undefined, addEventListener() {}, removeEventListener() {} };
    expect(await atOnce(connection.nextReply({ signal: polyfill as unknown as AbortSignal }))).to.be.an('object').that.includes({ ok: 1 });
    connection.destroy();
    pool.checkIn(connection);
  });

  it('a signal whose addEventListener throws fails the read with that error: nothing read, the connection as it was', async function () {
    const connection = await pool.checkOut();
    await streaming(connection, 200);
    const refusal = new Error('no listeners here');
    const signal = refusingListeners(refusal);
    const error = await connection.nextReply({ signal }).catch((e: unknown) => e);
    expect(error).to.equal(refusal);
    expect(connection.errored).to.equal(false);
    // No read is left in flight: the next one is taken, and reads the stream.
    nextReplyNow();
    expect(await connection.nextReply()).to.include({ ok: 1 });
    connection.destroy();
    pool.checkIn(connection);
  });

  it('a signal whose aborted getter throws, on the first look or as it is listened to, fails the read with that error (a value thrown, wrapped and named): nothing read, the connection as it was', async function () {
    const connection = await pool.checkOut();
    await streaming(connection, 200);
    // Read 1 is the shape check of the options: what it throws is an InvalidOptionError's cause (see above).
    for (const at of [2, 3]) {
      const broken = new Error(`aborted getter broke at read ${at}`);
      expect(await connection.nextReply({ signal: brokenAtRead(at, broken) }).catch((e: unknown) => e), `read ${at}`).to.equal(broken);
      const wrapped = (await connection.nextReply({ signal: brokenAtRead(at, 'no') }).catch((e: unknown) => e)) as Error;
      expect(wrapped.message, `read ${at}`).to.equal("the streamed read's signal refused a listener: no");
      expect(wrapped.cause, `read ${at}`).to.equal('no');
      expect(connection.errored).to.equal(false);
    }
    // No read is left in flight: the next one is taken, and reads the stream.
    nextReplyNow();
    expect(await connection.nextReply()).to.include({ ok: 1 });
    connection.destroy();
    pool.checkIn(connection);
  });

  it('a second read while one waits is refused with ConnectionBusyError, signal or not; a connection not streaming has no reply to read', async function () {
    const connection = await pool.checkOut();
    expect(await connection.nextReply({ signal: new AbortController().signal }).catch((e: unknown) => e))
      .to.be.instanceOf(WireProtocolError)
      .with.property('message', `connection ${connection.id} to ${endpoint.address} has no streamed reply to read: the last reply did not set moreToCome`);
    await streaming(connection, 10_000);
    while (unreadOf(connection) > 0) await connection.nextReply();
    const waiting = connection.nextReply();
    expect(await connection.nextReply({ signal: new AbortController().signal }).catch((e: unknown) => e)).to.be.instanceOf(ConnectionBusyError);
    expect(await connection.nextReply().catch((e: unknown) => e)).to.be.instanceOf(ConnectionBusyError);
    connection.destroy();
    await waiting.catch(() => undefined);
    pool.checkIn(connection);
  });

  it('a read of a connection its holder destroyed fails with a network error saying it is closed, signal or not', async function () {
    const connection = await pool.checkOut();
    await streaming(connection, 10_000);
    while (unreadOf(connection) > 0) await connection.nextReply();
    connection.destroy();
    for (const options of [{}, { signal: new AbortController().signal }]) {
      const error = await connection.nextReply(options).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(MongoNetworkError).with.property('message', `connection ${connection.id} to ${endpoint.address} is closed`);
    }
    pool.checkIn(connection);
  });

  it('a read whose timeoutMS passes says it was waiting for a reply (it writes nothing)', async function () {
    const connection = await pool.checkOut();
    await streaming(connection, 10_000);
    while (unreadOf(connection) > 0) await connection.nextReply();
    const error = await connection.nextReply({ timeoutMS: 100, signal: new AbortController().signal }).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(MongoNetworkTimeoutError);
    expect((error as Error).message).to.equal(`connection ${connection.id} to ${endpoint.address} timed out after 100 ms waiting for a reply`);
    pool.checkIn(connection);
  });

  it('a signal that aborts as it is listened to rejects at once: nothing read, the connection as it was', async function () {
    const connection = await pool.checkOut();
    await streaming(connection, 10_000);
    const reason = new Error('upstream aborted');
    const start = performance.now();
    const error = await connection.nextReply({ signal: abortingAsListened(reason) }).catch((e: unknown) => e);
    expect(performance.now() - start, 'ms to the rejection (the next reply comes in 10 s)').to.be.below(2000);
    expect(error).to.be.instanceOf(CommandCancelledError).and.deep.include({ sent: false, streamedReply: true, cause: reason });
    expect(connection.errored).to.equal(false);
    expect(connection.moreToCome).to.equal(true);
    // No read is left in flight: a new one waits for the stream (ConnectionBusyError otherwise).
    const controller = new AbortController();
    const waiting = connection.nextReply({ signal: controller.signal }).catch((e: unknown) => e);
    expect(await atOnce(waiting), 'the new read, before the abort').to.equal('pending');
    controller.abort();
    expect(await waiting).to.be.instanceOf(CommandCancelledError).and.deep.include({ sent: true });
    pool.checkIn(connection);
  });
});

describe('Connection.nextReply: signal, racing the stream (a scripted server)', function () {
  let server: HostileServer;
  let pool: ConnectionPool;
  let socket: net.Socket | undefined;
  /** The requestId of the last reply streamed: the responseTo of the next one. */
  let last: number;
  let nextId: number;

  beforeEach(async function () {
    socket = undefined;
    nextId = 100;
    server = await startHostileServer({
      hello: { compression: ['zlib'] },
      misbehaviour: {
        kind: 'answer',
        answer: (request, s) => {
          // The exhaustAllowed command's first reply, with moreToCome: the stream is open.
          socket = s;
          last = nextId++;
          s.write(encodeOpMsg(last, request.header.requestId, { n: 0, ok: 1 }, OpMsgFlag.moreToCome));
        },
      },
    });
    pool = new ConnectionPool({ address: server.address, connectionOptions: { compressors: ['zlib'], socketTimeoutMS: 5000 } });
    pool.ready();
  });
  afterEach(async function () {
    pool.close();
    await server.close();
  });

  /** Streams the next reply, with moreToCome; a `blob` of `bytes` bytes compressed with zlib when `bytes` is given. */
  function streamNext(n: number, bytes?: number): void {
    const id = nextId++;
    const reply = encodeOpMsg(id, last, { n, ok: 1, ...(bytes === undefined ? {} : { blob: 'x'.repeat(bytes) }) }, OpMsgFlag.moreToCome);
    socket!.write(bytes === undefined ? reply : compressMessage(reply, -1, 'zlib'));
    last = id;
  }

  /** Polls `condition` at every turn of the event loop (after the sockets are read) for up to 2 s. */
  async function soon(condition: () => boolean): Promise<boolean> {
    const deadline = performance.now() + 2000;
    while (!condition() && performance.now() < deadline) await new Promise((r) => setImmediate(r));
    return condition();
  }

  /** Whether `connection` is inflating a compressed reply (on the thread pool) now. */
  const inflating = (connection: Connection): boolean => (connection as unknown as { inflating: unknown }).inflating !== undefined;

  /** The inflation `connection` runs on the thread pool now (see {@link inflating}): settles once it ended. */
  function inflationOf(connection: Connection): Promise<unknown> {
    const inflation = (connection as unknown as { inflating: Promise<unknown> | undefined }).inflating;
    expect(inflation, 'an inflation in progress').to.be.instanceOf(Promise);
    return inflation!.catch(() => undefined);
  }

  async function streaming(): Promise<Connection> {
    const connection = await pool.checkOut();
    expect(connection.compressor).to.equal('zlib');
    expect(await connection.command('admin', { hello: 1 }, { exhaustAllowed: true })).to.include({ n: 0 });
    return connection;
  }

  it('aborted in the turn its reply is written: cancelled once, the connection closed, the late reply changing nothing', async function () {
    const connection = await streaming();
    const controller = new AbortController();
    const unhandled = await unhandledRejectionsOf(async () => {
      const reading = connection.nextReply({ signal: controller.signal }).catch((e: unknown) => e);
      expect(await atOnce(reading), 'the read, before the reply is written').to.equal('pending');
      streamNext(1);
      controller.abort();
      const error = await reading;
      expect(error).to.be.instanceOf(CommandCancelledError).and.deep.include({ sent: true, streamedReply: true });
      // Closed by the abort, before the reply could be read: once the server saw the socket close, no byte of it can
      // reach the connection any more.
      expect(await soon(() => server.open === 0), 'the socket is closed').to.equal(true);
    });
    expect(unhandled).to.deep.equal([]);
    expect(connection.errored).to.equal(true);
    expect(connection.error!.message).to.match(/was cancelled after it was sent, before its reply was read$/);
    expect(unreadOf(connection), 'streamed replies not yet read').to.equal(0);
    pool.checkIn(connection);
  });

  it('aborted as its reply settles it (in its continuation): the reply stands, the stream goes on', async function () {
    const connection = await streaming();
    const controller = new AbortController();
    const reading = connection.nextReply({ signal: controller.signal }).then((reply) => {
      controller.abort();
      return reply;
    });
    streamNext(1);
    expect(await reading).to.include({ n: 1 });
    expect(connection.errored).to.equal(false);
    expect(connection.moreToCome).to.equal(true);
    streamNext(2);
    expect(await connection.nextReply()).to.include({ n: 2 });
    connection.destroy();
    pool.checkIn(connection);
  });

  it('aborted while a large compressed streamed reply is inflated: cancelled at once, the connection closed, the inflated reply dropped', async function () {
    const connection = await streaming();
    const controller = new AbortController();
    const unhandled = await unhandledRejectionsOf(async () => {
      const reading = connection.nextReply({ signal: controller.signal }).catch((e: unknown) => e);
      streamNext(1, 8 * 1024 * 1024); // 8 MiB, some 8 KiB compressed: inflated on the thread pool, in some 35 ms
      expect(await soon(() => inflating(connection)), 'the reply is being inflated').to.equal(true);
      const inflation = inflationOf(connection);
      controller.abort();
      // Before the inflation (on the thread pool) can end.
      const error = await atOnce(reading);
      expect(error).to.be.instanceOf(CommandCancelledError).and.deep.include({ sent: true, streamedReply: true });
      // The inflation ends, and what it brings is dropped.
      await inflation;
      await microtasks();
    });
    expect(unhandled).to.deep.equal([]);
    expect(connection.errored).to.equal(true);
    expect(connection.error!.message).to.match(/was cancelled after it was sent, before its reply was read$/);
    expect(unreadOf(connection), 'streamed replies not yet read: the inflated one dropped').to.equal(0);
    pool.checkIn(connection);
  });

  it('already aborted while a streamed reply is inflated: nothing read, the inflated reply read next', async function () {
    const connection = await streaming();
    const controller = new AbortController();
    controller.abort();
    streamNext(1, 8 * 1024 * 1024);
    expect(await soon(() => inflating(connection)), 'the reply is being inflated').to.equal(true);
    const error = await connection.nextReply({ signal: controller.signal }).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(CommandCancelledError).and.deep.include({ sent: false, streamedReply: true });
    const reply = await connection.nextReply();
    expect(reply).to.include({ n: 1 });
    expect((reply.blob as string).length).to.equal(8 * 1024 * 1024);
    expect(connection.errored).to.equal(false);
    connection.destroy();
    pool.checkIn(connection);
  });

  it('the connection failed first: the read fails with its network error, a later abort does nothing, none left listening', async function () {
    const connection = await streaming();
    const controller = new AbortController();
    streamNext(1);
    expect(await soon(() => unreadOf(connection) > 0), 'the reply received, not yet read').to.equal(true);
    const reading = connection.nextReply({ signal: controller.signal });
    expect(await reading).to.include({ n: 1 });
    const waiting = connection.nextReply({ signal: controller.signal }).catch((e: unknown) => e);
    socket!.destroy();
    const error = await waiting;
    expect(error).to.be.instanceOf(MongoNetworkError).and.not.be.instanceOf(CommandCancelledError);
    expect(getEventListeners(controller.signal, 'abort').length).to.equal(0);
    controller.abort();
    expect(connection.error).to.equal(error);
    pool.checkIn(connection);
  });
});
