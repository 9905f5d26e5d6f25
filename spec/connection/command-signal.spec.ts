/**
 * `Connection.command({ signal })`: a command whose caller gave up (an HTTP request aborted, a subscriber gone) fails
 * at once with CommandCancelledError; one that reached the server closes its connection (its reply is never read, so
 * the connection never goes back to the pool), one that did not leaves it usable; CommandFailed follows every
 * CommandStarted; no listener stays on the signal once its commands settled. Against the embedded endpoint, or the
 * server of MONGODB_URI when it is set (the `failCommand` fail point holds a reply back; what the server received is
 * counted on the embedded endpoint only, and the compression and MONGODB-OIDC cases run on endpoints of their own).
 */
import { expect } from 'chai';
import { getEventListeners } from 'node:events';
import zlib = require('node:zlib');
import { CommandCancelledError, ConnectionPool, InvalidOptionError, MongoCredentials, MongoNetworkError, type CommandEvent, type ConnectionPoolEvent } from '../../lib';
import { EmbeddedServer, signOidcToken } from '../../lib/testing';
import { eventually, setFailPoint, startTestEndpoint, stopTestEndpoint, type TestEndpoint } from '../support/endpoint';
import { microtasks } from '../support/microtasks';
import { abortingAsListened, brokenAtRead, refusingListeners, unreadableAborted } from '../support/signals';

describe('Connection.command: signal (a command its caller gives up on)', function () {
  this.timeout(20_000);
  let endpoint: TestEndpoint;
  /** How many `ping`s the server received (the embedded endpoint's count). */
  let pings = 0;
  let pool: ConnectionPool;
  let commands: CommandEvent[];
  let poolEvents: ConnectionPoolEvent[];

  beforeEach(async function () {
    endpoint = await startTestEndpoint();
    pings = 0;
    endpoint.embedded?.handle('ping', () => {
      pings++;
      return { ok: 1 };
    });
    pool = new ConnectionPool({ address: endpoint.address, maxPoolSize: 1, connectionOptions: endpoint.connectionOptions });
    commands = [];
    poolEvents = [];
    pool.commandEvents$.subscribe((e) => commands.push(e));
    pool.events$.subscribe((e) => poolEvents.push(e));
    pool.ready();
  });
  afterEach(async function () {
    pool.close();
    await stopTestEndpoint(endpoint);
  });

  /** The pool events after ConnectionCreated... as `type` or `type:reason`. */
  const poolTypes = (): string[] =>
    poolEvents.filter((e) => e.type === 'ConnectionCheckedIn' || e.type === 'ConnectionClosed' || e.type === 'ConnectionCreated').map((e) => ('reason' in e ? `${e.type}:${String(e.reason)}` : e.type));

  it('an already-aborted signal fails at once with CommandCancelledError (cause: its reason): nothing sent or published, the connection usable', async function () {
    const connection = await pool.checkOut();
    const controller = new AbortController();
    const reason = new Error('request aborted');
    controller.abort(reason);
    const error = await connection.command('admin', { ping: 1 }, { signal: controller.signal }).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(CommandCancelledError);
    expect(error).to.deep.include({ name: 'CommandCancelledError', address: endpoint.address, connectionId: connection.id, commandName: 'ping', sent: false, cause: reason });
    expect((error as Error).message).to.equal(`Command ping on connection ${connection.id} to ${endpoint.address} was cancelled before it was sent`);
    if (endpoint.embedded !== undefined) expect(pings, 'pings received').to.equal(0);
    expect(commands, 'command events').to.deep.equal([]);
    expect(connection.errored).to.equal(false);
    expect(await connection.command('admin', { ping: 1 })).to.include({ ok: 1 });
    pool.checkIn(connection);
    expect(poolTypes()).to.deep.equal(['ConnectionCreated', 'ConnectionCheckedIn']);
  });

  it('aborted while its reply is awaited: fails at once, CommandFailed with that error, the connection closed (reason error), never reused', async function () {
    await setFailPoint(this, endpoint, { mode: { times: 1 }, data: { failCommands: ['ping'], blockConnection: true, blockTimeMS: 5000 } });
    const connection = await pool.checkOut();
    const controller = new AbortController();
    const settled = connection.command('admin', { ping: 1 }, { signal: controller.signal }).catch((e: unknown) => e);
    // Published and written as it is called.
    expect(commands.map((e) => e.type)).to.deep.equal(['CommandStarted']);
    // Held by the server: the fail point (one use) matched it, and blocks it before it runs.
    if (endpoint.embedded !== undefined) expect(await eventually(() => !endpoint.embedded!.failCommand.active), 'the ping held by the server').to.equal(true);
    const abortedAt = performance.now();
    controller.abort();
    const error = await settled;
    expect(performance.now() - abortedAt, 'ms from the abort to the rejection (the reply is held 5 s)').to.be.below(2000);
    expect(error).to.be.instanceOf(CommandCancelledError);
    expect(error).to.deep.include({ connectionId: connection.id, commandName: 'ping', sent: true, cause: controller.signal.reason });
    expect((error as Error).message).to.match(/was cancelled after it was sent, before its reply was read: the server may have run it, and the connection is closed$/);
    await new Promise((r) => setImmediate(r));
    expect(commands.map((e) => e.type)).to.deep.equal(['CommandStarted', 'CommandFailed']);
    expect((commands[1] as CommandEvent & { failure: Error }).failure).to.equal(error);
    expect(commands[1]!.requestId).to.equal(commands[0]!.requestId);
    // Its reply will never be read: errored, with a network error that says why, and closed as it is checked in.
    expect(connection.errored).to.equal(true);
    expect(connection.error).to.be.instanceOf(MongoNetworkError);
    expect(connection.error!.message).to.match(/was closed: its command ping was cancelled after it was sent, before its reply was read$/);
    if (endpoint.embedded !== undefined) expect(await endpoint.embedded.waitForOpenConnections(0, { timeoutMS: 2000 }), 'the socket is closed').to.equal(0);
    pool.checkIn(connection);
    expect(poolTypes()).to.deep.equal(['ConnectionCreated', 'ConnectionCheckedIn', 'ConnectionClosed:error']);
    const next = await pool.checkOut();
    expect(next.id, 'a new connection').to.not.equal(connection.id);
    expect(await next.command('admin', { ping: 1 })).to.include({ ok: 1 });
    pool.checkIn(next);
  });

  it('aborted after CommandStarted, before it is written (by a subscriber): nothing sent, CommandFailed, the connection usable', async function () {
    const connection = await pool.checkOut();
    const controller = new AbortController();
    const subscription = pool.commandEvents$.subscribe((e) => e.type === 'CommandStarted' && controller.abort());
    const error = await connection.command('admin', { ping: 1 }, { signal: controller.signal }).catch((e: unknown) => e);
    subscription.unsubscribe();
    expect(error).to.be.instanceOf(CommandCancelledError).and.deep.include({ sent: false });
    await new Promise((r) => setImmediate(r));
    expect(commands.map((e) => e.type)).to.deep.equal(['CommandStarted', 'CommandFailed']);
    if (endpoint.embedded !== undefined) expect(pings, 'pings received').to.equal(0);
    expect(connection.errored).to.equal(false);
    expect(await connection.command('admin', { ping: 1 })).to.include({ ok: 1 });
    if (endpoint.embedded !== undefined) expect(pings).to.equal(1);
    pool.checkIn(connection);
    expect(poolTypes()).to.deep.equal(['ConnectionCreated', 'ConnectionCheckedIn']);
  });

  it('aborted after it settled: nothing happens, the connection goes back to the pool', async function () {
    const connection = await pool.checkOut();
    const controller = new AbortController();
    expect(await connection.command('admin', { ping: 1 }, { signal: controller.signal })).to.include({ ok: 1 });
    controller.abort();
    expect(connection.errored).to.equal(false);
    pool.checkIn(connection);
    expect((await pool.withConnection((c) => c.id)), 'the same connection, reused').to.equal(connection.id);
    expect(commands.map((e) => e.type)).to.deep.equal(['CommandStarted', 'CommandSucceeded']);
    expect(poolTypes()).to.deep.equal(['ConnectionCreated', 'ConnectionCheckedIn', 'ConnectionCheckedIn']);
  });

  it('one signal over 10,000 commands: one listener while one is in flight, none once they settled', async function () {
    const controller = new AbortController();
    const { signal } = controller;
    const connection = await pool.checkOut();
    try {
      for (let i = 0; i < 10_000; i++) {
        const reply = connection.command('admin', { ping: 1 }, { signal });
        if (i === 0) expect(getEventListeners(signal, 'abort').length, 'listeners while in flight').to.equal(1);
        await reply;
      }
      expect(getEventListeners(signal, 'abort').length, 'listeners after 10,000 commands').to.equal(0);
      if (endpoint.embedded !== undefined) expect(pings).to.equal(10_000);
    } finally {
      pool.checkIn(connection);
    }
  });

  it('a signal that is not an AbortSignal is refused with InvalidOptionError naming signal, before anything is sent', async function () {
    const connection = await pool.checkOut();
    for (const value of [{}, 'abort', 5, null, { aborted: 'no', addEventListener() {}, removeEventListener() {} }]) {
      const error = await connection.command('admin', { ping: 1 }, { signal: value as unknown as AbortSignal }).catch((e: unknown) => e);
      expect(error, String(value)).to.be.instanceOf(InvalidOptionError).and.have.property('option', 'signal');
      expect((error as Error).message).to.match(/\(signal must be an AbortSignal \(e\.g\. AbortController\.signal or AbortSignal\.timeout\(ms\)\)\)$/);
    }
    // One whose `aborted` throws as it is read, a value that is not an Error: refused the same way, what it threw the cause.
    const unreadable = await connection.command('admin', { ping: 1 }, { signal: unreadableAborted('torn down') }).catch((e: unknown) => e);
    expect(unreadable).to.be.instanceOf(InvalidOptionError).and.include({ option: 'signal', cause: 'torn down' });
    expect((unreadable as Error).message).to.equal('Invalid signal: reading it as an AbortSignal threw (torn down); signal must be an AbortSignal (e.g. AbortController.signal or AbortSignal.timeout(ms))');
    // An AbortSignal of another realm or a polyfill: its shape is what counts.
    const polyfill = { aborted: false, reason: undefined, addEventListener() {}, removeEventListener() {} };
    expect(await connection.command('admin', { ping: 1 }, { signal: polyfill as unknown as AbortSignal })).to.include({ ok: 1 });
    if (endpoint.embedded !== undefined) expect(pings).to.equal(1);
    expect(connection.busy).to.equal(false);
    pool.checkIn(connection);
  });

  it('a signal whose addEventListener throws fails the command with that error: nothing sent, the connection usable', async function () {
    const connection = await pool.checkOut();
    const refusal = new Error('no listeners here');
    const signal = refusingListeners(refusal);
    const error = await connection.command('admin', { ping: 1 }, { signal }).catch((e: unknown) => e);
    expect(error).to.equal(refusal);
    if (endpoint.embedded !== undefined) expect(pings).to.equal(0);
    expect(commands).to.deep.equal([]);
    expect(connection.busy).to.equal(false);
    expect(await connection.command('admin', { ping: 1 })).to.include({ ok: 1 });
    pool.checkIn(connection);
  });

  it('a signal whose aborted getter throws once the command is encoded rejects with that error, never throws: nothing sent', async function () {
    const connection = await pool.checkOut();
    const broken = new Error('aborted getter broke');
    const signal = brokenAtRead(3, broken);
    let thrown: unknown;
    let settled: Promise<unknown> | undefined;
    try {
      settled = connection.command('admin', { ping: 1 }, { signal }).catch((e: unknown) => e);
    } catch (error) {
      thrown = error;
    }
    expect(thrown, 'thrown synchronously').to.equal(undefined);
    expect(await settled).to.equal(broken);
    if (endpoint.embedded !== undefined) expect(pings).to.equal(0);
    expect(connection.busy).to.equal(false);
    pool.checkIn(connection);
  });

  it('a signal whose aborted getter throws a value that is not an Error at its first look after the option check rejects with an Error saying so, the value its cause: nothing sent', async function () {
    const connection = await pool.checkOut();
    // Read 1 is the option check; read 2 the look before the command is encoded; read 3 the look once it is.
    for (const at of [2, 3]) {
      for (const thrown of [null, undefined, Symbol('torn down'), 'torn down']) {
        const error = await connection.command('admin', { ping: 1 }, { signal: brokenAtRead(at, thrown) }).catch((e: unknown) => e);
        expect(error, `read ${at}, ${String(thrown)}`).to.be.instanceOf(Error);
        expect((error as Error).message, `read ${at}, ${String(thrown)}`).to.match(/^the command's signal refused a listener: /);
        expect((error as Error).cause, `read ${at}, ${String(thrown)}`).to.equal(thrown);
      }
    }
    if (endpoint.embedded !== undefined) expect(pings).to.equal(0);
    expect(commands).to.deep.equal([]);
    expect(connection.busy).to.equal(false);
    pool.checkIn(connection);
  });

  it('a signal that aborts as it is listened to (its addEventListener aborts it) cancels the command at once: nothing sent', async function () {
    await setFailPoint(this, endpoint, { mode: { times: 1 }, data: { failCommands: ['ping'], blockConnection: true, blockTimeMS: 5000 } });
    const connection = await pool.checkOut();
    const reason = new Error('upstream aborted');
    // A wrapper that subscribes to an upstream signal as it is listened to, and finds it aborted just then.
    const signal = abortingAsListened(reason);
    const start = performance.now();
    const error = await connection.command('admin', { ping: 1 }, { signal }).catch((e: unknown) => e);
    expect(performance.now() - start, 'ms to the rejection (the reply would be held 5 s)').to.be.below(2000);
    expect(error).to.be.instanceOf(CommandCancelledError);
    expect(error).to.deep.include({ sent: false, cause: reason });
    if (endpoint.embedded !== undefined) expect(pings).to.equal(0);
    expect(connection.errored).to.equal(false);
    expect(connection.busy).to.equal(false);
    pool.checkIn(connection);
  });

  it('a large command compressed on the thread pool, aborted before it is written: nothing sent, CommandFailed, the connection reused', async function () {
    const server = await new EmbeddedServer({ compressors: ['zlib'] }).start();
    try {
      let inserts = 0;
      server.handle('insert', () => {
        inserts++;
        return { ok: 1, n: 1 };
      });
      pool.close();
      pool = new ConnectionPool({ address: server.address, maxPoolSize: 1, connectionOptions: { compressors: ['zlib'] } });
      commands = [];
      pool.commandEvents$.subscribe((e) => commands.push(e));
      pool.ready();
      const connection = await pool.checkOut();
      expect(connection.compressor).to.equal('zlib');
      const controller = new AbortController();
      // 256 KiB: compressed on the thread pool, so the abort below comes before it is written.
      const documents = [{ _id: 1, blob: 'x'.repeat(256 * 1024) }];
      const compression = nextDeflate();
      const settled = connection.command('app', { insert: 'c', documents }, { signal: controller.signal }).catch((e: unknown) => e);
      controller.abort();
      const error = await settled;
      expect(error).to.be.instanceOf(CommandCancelledError).and.deep.include({ commandName: 'insert', sent: false });
      // The compression ends, and what would have been sent then is not: the next insert is the first the server
      // receives on this connection (a reply to the cancelled one would fail the connection).
      await compression;
      await microtasks();
      expect(inserts, 'inserts received').to.equal(0);
      expect(commands.map((e) => e.type)).to.deep.equal(['CommandStarted', 'CommandFailed']);
      expect(connection.errored).to.equal(false);
      expect(await connection.command('app', { insert: 'c', documents })).to.include({ ok: 1 });
      expect(inserts).to.equal(1);
      pool.checkIn(connection);
    } finally {
      await server.stop();
    }
  });

  describe('on a MONGODB-OIDC connection, after ReauthenticationRequired (391)', function () {
    const key = 'idp-signing-key';
    let oidc: EmbeddedServer;
    let oidcPool: ConnectionPool;
    let calls: number;
    let contexts: AbortSignal[];
    /** Resolved as the callback is called the second time (the reauthentication). */
    let reauthenticating: Promise<void>;
    /** Lets the reauthentication's callback return (it waits until then). */
    let release: () => void;
    /** Resolved once the reauthentication's callback returned. */
    let returned: Promise<void>;
    let events: CommandEvent[];
    let oidcPoolEvents: ConnectionPoolEvent[];

    beforeEach(async function () {
      oidc = await new EmbeddedServer({ oidc: { signingKey: key } }).start();
      calls = 0;
      contexts = [];
      let reauthenticated!: () => void;
      reauthenticating = new Promise((r) => (reauthenticated = r));
      const released = new Promise<void>((r) => (release = r));
      returned = new Promise(() => undefined);
      const credentials = new MongoCredentials({
        mechanism: 'MONGODB-OIDC',
        mechanismProperties: {
          OIDC_CALLBACK: ({ timeoutContext }: { timeoutContext: AbortSignal }) => {
            contexts.push(timeoutContext);
            const token = { accessToken: signOidcToken(key, { sub: 'svc' }) };
            if (++calls === 1) return Promise.resolve(token);
            // The reauthentication's call returns when the test lets it.
            const call = released.then(() => token);
            returned = call.then(() => undefined);
            reauthenticated();
            return call;
          },
        },
      });
      events = [];
      oidcPoolEvents = [];
      oidcPool = new ConnectionPool({ address: oidc.address, connectionOptions: { credentials } });
      oidcPool.commandEvents$.subscribe((e) => events.push(e));
      oidcPool.events$.subscribe((e) => oidcPoolEvents.push(e));
      oidcPool.ready();
    });
    afterEach(async function () {
      oidcPool.close();
      await oidc.stop();
    });

    it('aborted during the reauthentication: fails at once, not sent again, the callback told, the connection closed', async function () {
      const connection = await oidcPool.checkOut();
      await connection.command('admin', { configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['find'], errorCode: 391 } });
      events.length = 0;
      const controller = new AbortController();
      const settled = connection.command('test', { find: 'c' }, { signal: controller.signal }).catch((e: unknown) => e);
      await reauthenticating;
      controller.abort();
      // Settled in the turn of the abort, the callback still waiting.
      const error = await Promise.race([settled, microtasks().then(() => 'pending')]);
      expect(error).to.be.instanceOf(CommandCancelledError).and.deep.include({ commandName: 'find', sent: false, cause: controller.signal.reason });
      expect(contexts[1]!.aborted, "the reauthentication's callback timeoutContext aborted").to.equal(true);
      expect(events.map((e) => `${e.type} ${e.commandName}`)).to.deep.equal(['CommandStarted find', 'CommandFailed find']);
      expect(connection.errored).to.equal(true);
      expect(connection.error!.message).to.match(/was closed: its command find was cancelled while the connection was reauthenticated$/);
      oidcPool.checkIn(connection);
      expect(oidcPoolEvents.filter((e) => e.type === 'ConnectionClosed').map((e) => (e as { reason: string }).reason)).to.deep.equal(['error']);
      // The callback returns: nothing is sent on the closed connection.
      release();
      await returned;
      await microtasks();
      expect(events.map((e) => `${e.type} ${e.commandName}`), 'command events, once the callback returned').to.deep.equal(['CommandStarted find', 'CommandFailed find']);
      expect(calls, 'callback calls').to.equal(2);
      expect(getEventListeners(controller.signal, 'abort').length).to.equal(0);
      expect(await oidcPool.withConnection((c) => c.command('test', { find: 'c' }))).to.include({ ok: 1 });
    });

    it('aborted as the 391 comes (by a CommandFailed subscriber): nothing more is sent, no reauthentication, the connection usable', async function () {
      const connection = await oidcPool.checkOut();
      await connection.command('admin', { configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['find'], errorCode: 391 } });
      events.length = 0;
      const controller = new AbortController();
      const subscription = oidcPool.commandEvents$.subscribe((e) => e.type === 'CommandFailed' && controller.abort());
      const error = await connection.command('test', { find: 'c' }, { signal: controller.signal }).catch((e: unknown) => e);
      subscription.unsubscribe();
      expect(error).to.be.instanceOf(CommandCancelledError).and.deep.include({ commandName: 'find', sent: false });
      expect(calls, 'callback calls: the establishment only').to.equal(1);
      expect(events.map((e) => `${e.type} ${e.commandName}`)).to.deep.equal(['CommandStarted find', 'CommandFailed find']);
      expect(connection.errored).to.equal(false);
      expect(await connection.command('test', { find: 'c' })).to.include({ ok: 1 });
      oidcPool.checkIn(connection);
    });
  });
});

/**
 * Resolves once the next `zlib.deflate` (a compression on the thread pool) has ended and its callback has run.
 * `zlib.deflate` is wrapped until then.
 */
function nextDeflate(): Promise<void> {
  const deflate = zlib.deflate;
  return new Promise((resolve) => {
    zlib.deflate = ((buffer: zlib.InputType, options: zlib.ZlibOptions, callback: zlib.CompressCallback): void => {
      zlib.deflate = deflate;
      deflate(buffer, options, (error, result) => {
        callback(error, result);
        resolve();
      });
    }) as typeof zlib.deflate;
  });
}
