/**
 * The embedded endpoint as mongod 4.4+ for monitoring: topologyVersion in hello replies, awaitable hello (waits up to
 * maxAwaitTimeMS or until changeTopology()), streaming hello with exhaustAllowed (moreToCome), and fail points that
 * end a wait at once (an error, a closed connection) or hold a reply before its wait (a block). Real sockets, through the library's connection factory.
 */
import { expect } from 'chai';
import { Long, ObjectId, type Document } from 'bson';
import { firstValueFrom, from } from 'rxjs';
import { connectionFactory, MongoNetworkError, MongoServerError, type Connection } from '../../lib';
import { EmbeddedServer } from '../../lib/testing';
import { eventually } from '../support/endpoint';

describe('EmbeddedServer: topologyVersion and awaitable hello', function () {
  let server: EmbeddedServer;
  let connection: Connection | undefined;

  afterEach(async function () {
    connection?.destroy();
    connection = undefined;
    await server.stop();
  });

  async function open(options: ConstructorParameters<typeof EmbeddedServer>[0] = {}, appName = 'watcher'): Promise<Connection> {
    server = await new EmbeddedServer(options).start();
    const [host, port] = server.address.split(':');
    connection = await firstValueFrom(from(connectionFactory({ host, port: Number(port), appName })({ id: 1, generation: 0, address: server.address, signal: new AbortController().signal })));
    return connection;
  }

  const awaitable = (c: Connection, maxAwaitTimeMS: number): Document => ({ hello: 1, topologyVersion: c.hello.topologyVersion, maxAwaitTimeMS });

  it('hello replies carry topologyVersion { processId: ObjectId, counter: int64 from 0 }; below maxWireVersion 9 none', async function () {
    const c = await open();
    expect(c.hello.topologyVersion.processId).to.be.instanceOf(ObjectId);
    expect(Number(c.hello.topologyVersion.counter)).to.equal(0);
    expect(server.topologyVersion.counter).to.be.instanceOf(Long);
    expect((await c.command('admin', { hello: 1 })).topologyVersion.processId.equals(c.hello.topologyVersion.processId)).to.equal(true);
    c.destroy();
    await server.stop();
    const old = await open({ maxWireVersion: 8 });
    expect(old.hello.topologyVersion).to.equal(undefined);
  });

  it('an awaitable hello whose counter is ahead of the endpoint\'s is answered at once with error 31382, as mongod, not held for maxAwaitTimeMS', async function () {
    const c = await open();
    const ahead = { processId: c.hello.topologyVersion.processId, counter: Long.fromNumber(5) };
    const started = Date.now();
    const error = await c.command('admin', { hello: 1, topologyVersion: ahead, maxAwaitTimeMS: 5_000 }).catch((e: unknown) => e);
    expect(Date.now() - started).to.be.below(2_000);
    expect(error).to.be.instanceOf(MongoServerError).and.include({ code: 31382 });
  });

  it('refuses an awaitable hello missing topologyVersion or maxAwaitTimeMS, or with a negative maxAwaitTimeMS, with mongod\'s codes and messages, and keeps the connection', async function () {
    const c = await open();
    const tv = c.hello.topologyVersion;
    const refused = async (command: Document): Promise<unknown> => c.command('admin', command).catch((e: unknown) => e);
    expect(await refused({ hello: 1, maxAwaitTimeMS: 100 })).to.be.instanceOf(MongoServerError).and.include({
      code: 31368, codeName: 'Location31368', message: "A request with 'maxAwaitTimeMS' must include a 'topologyVersion'",
    });
    expect(await refused({ isMaster: 1, topologyVersion: tv })).to.be.instanceOf(MongoServerError).and.include({
      code: 31368, codeName: 'Location31368', message: "A request with a 'topologyVersion' must include 'maxAwaitTimeMS'",
    });
    expect(await refused({ hello: 1, topologyVersion: tv, maxAwaitTimeMS: -1 })).to.be.instanceOf(MongoServerError).and.include({
      code: 31373, codeName: 'Location31373', message: 'maxAwaitTimeMS must be a non-negative integer',
    });
    expect(await refused({ hello: 1, topologyVersion: null, maxAwaitTimeMS: 100 })).to.be.instanceOf(MongoServerError).and.include({ code: 2, codeName: 'BadValue' });
    // maxAwaitTimeMS 0 is valid: the reply comes at once.
    const started = Date.now();
    expect(await c.command('admin', { hello: 1, topologyVersion: tv, maxAwaitTimeMS: 0 })).to.include({ ok: 1, isWritablePrimary: true });
    expect(Date.now() - started).to.be.below(1_000);
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
  });

  it('an awaitable hello waits maxAwaitTimeMS when nothing changes, and answers at once on changeTopology()', async function () {
    const c = await open();
    let started = Date.now();
    const reply = await c.command('admin', awaitable(c, 150));
    expect(Date.now() - started).to.be.at.least(140);
    expect(Number(reply.topologyVersion.counter)).to.equal(0);
    started = Date.now();
    const waiting = c.command('admin', awaitable(c, 5000));
    expect(await eventually(() => server.awaitingHelloCount === 1)).to.equal(true);
    expect(server.changeTopology()).to.equal(1);
    expect(Number((await waiting).topologyVersion.counter)).to.equal(1);
    expect(Date.now() - started).to.be.below(1000);
  });

  it('answers at once a topologyVersion of another process, and refuses topologyVersion without maxAwaitTimeMS', async function () {
    const c = await open();
    const started = Date.now();
    await c.command('admin', { hello: 1, topologyVersion: { processId: new ObjectId(), counter: Long.fromNumber(0) }, maxAwaitTimeMS: 5000 });
    expect(Date.now() - started).to.be.below(1000);
    const error = await c.command('admin', { hello: 1, topologyVersion: c.hello.topologyVersion }).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(MongoServerError);
  });

  it('with exhaustAllowed, streams a reply with moreToCome on each topology change', async function () {
    const c = await open();
    const first = c.command('admin', awaitable(c, 5000), { exhaustAllowed: true });
    expect(await eventually(() => server.awaitingHelloCount === 1)).to.equal(true);
    server.changeTopology();
    expect(Number((await first).topologyVersion.counter)).to.equal(1);
    expect(c.moreToCome).to.equal(true);
    const second = c.nextReply();
    expect(await eventually(() => server.awaitingHelloCount === 1)).to.equal(true);
    server.changeTopology();
    expect(Number((await second).topologyVersion.counter)).to.equal(2);
    expect(c.moreToCome).to.equal(true);
  });

  it('a fail point configured during a wait ends it at once: an error ends the stream, closeConnection closes', async function () {
    const c = await open();
    const first = c.command('admin', awaitable(c, 5000), { exhaustAllowed: true });
    expect(await eventually(() => server.awaitingHelloCount === 1)).to.equal(true);
    const started = Date.now();
    server.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['hello'], errorCode: 91, appName: 'watcher' } });
    const error = (await first.catch((e: unknown) => e)) as MongoServerError;
    expect(error).to.be.instanceOf(MongoServerError);
    expect(error.code).to.equal(91);
    expect(Date.now() - started).to.be.below(1000);
    expect(c.moreToCome).to.equal(false);
    const next = c.command('admin', awaitable(c, 5000), { exhaustAllowed: true });
    expect(await eventually(() => server.awaitingHelloCount === 1)).to.equal(true);
    server.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['hello'], closeConnection: true } });
    expect(await next.catch((e: unknown) => e)).to.be.instanceOf(MongoNetworkError);
    expect(await eventually(() => server.openConnections === 0)).to.equal(true);
  });

  it('a fail point that only blocks holds a streamed reply for blockTimeMS, then the wait runs in full, as mongod (it applies the fail point as each hello starts, before its wait)', async function () {
    const c = await open();
    const first = c.command('admin', awaitable(c, 300), { exhaustAllowed: true });
    await first;
    const second = c.nextReply();
    expect(await eventually(() => server.awaitingHelloCount === 1)).to.equal(true);
    const started = Date.now();
    server.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 2 }, data: { failCommands: ['hello'], blockConnection: true, blockTimeMS: 200, appName: 'watcher' } });
    const reply = await second;
    // 200 ms of block, then 300 ms of wait: a client whose check times out after 400 ms sees no reply in time.
    expect(Date.now() - started).to.be.at.least(480);
    expect(reply).to.include({ ok: 1 });
    expect(c.moreToCome).to.equal(true);
    // The next hello of the stream is blocked as it starts, and waits in full after the block too: the fail point's
    // second use does not end that wait.
    const third = Date.now();
    await c.nextReply();
    expect(Date.now() - third).to.be.at.least(480);
    // Both uses spent: the next reply comes after the wait alone.
    const fourth = Date.now();
    await c.nextReply();
    expect(Date.now() - fourth).to.be.within(250, 450);
  });

  it('a fail point counts one use per hello of a stream: a skip it counts leaves the wait to run to its end, where the skipped hellos were answered at once in a burst', async function () {
    const c = await open();
    await c.command('admin', awaitable(c, 300), { exhaustAllowed: true });
    const second = c.nextReply();
    expect(await eventually(() => server.awaitingHelloCount === 1)).to.equal(true);
    const started = Date.now();
    server.failCommand.configure({ configureFailPoint: 'failCommand', mode: { skip: 2 }, data: { failCommands: ['hello'], blockConnection: true, blockTimeMS: 150, appName: 'watcher' } });
    await second;
    // The waiting hello counts the first skip and is answered when its wait ends; the next one counts the second skip
    // as it starts and waits in full; the one after is blocked, then waits in full.
    const at: number[] = [];
    await c.nextReply();
    at.push(Date.now());
    await c.nextReply();
    at.push(Date.now());
    expect(at[0] - started).to.be.at.least(280);
    expect(at[1] - at[0]).to.be.at.least(430);
  });

  it('a fail point configured while a stream waits after a block applies at once: closeConnection closes, where the wait ran on', async function () {
    const c = await open();
    const first = c.command('admin', awaitable(c, 5000), { exhaustAllowed: true });
    expect(await eventually(() => server.awaitingHelloCount === 1)).to.equal(true);
    server.changeTopology();
    await first;
    const next = c.nextReply().catch((e: unknown) => e);
    expect(await eventually(() => server.awaitingHelloCount === 1)).to.equal(true);
    server.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['hello'], blockConnection: true, blockTimeMS: 50, appName: 'watcher' } });
    // Blocked, then waiting again.
    expect(await eventually(() => server.awaitingHelloCount === 0)).to.equal(true);
    expect(await eventually(() => server.awaitingHelloCount === 1)).to.equal(true);
    const started = Date.now();
    server.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['hello'], closeConnection: true, appName: 'watcher' } });
    expect(await next).to.be.instanceOf(MongoNetworkError);
    expect(Date.now() - started).to.be.below(1000);
    expect(await eventually(() => server.openConnections === 0)).to.equal(true);
  });

  it('a fail point configured during the wait after a block that does nothing to the hello leaves that wait to run in full', async function () {
    const c = await open();
    const first = c.command('admin', awaitable(c, 400), { exhaustAllowed: true });
    expect(await eventually(() => server.awaitingHelloCount === 1)).to.equal(true);
    const started = Date.now();
    server.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['hello'], blockConnection: true, blockTimeMS: 300, appName: 'watcher' } });
    await new Promise((resolve) => setTimeout(resolve, 450));
    // Counted as a skip by the hello waiting after its block: its wait (from 300 to 700 ms) is not cut short.
    server.failCommand.configure({ configureFailPoint: 'failCommand', mode: { skip: 1 }, data: { failCommands: ['hello'], blockConnection: true, blockTimeMS: 50, appName: 'watcher' } });
    await first;
    expect(Date.now() - started).to.be.at.least(650);
  });

  it('a stream the fail point does nothing to keeps waiting: the use another stream took does not answer it early', async function () {
    server = await new EmbeddedServer().start();
    const [host, port] = server.address.split(':');
    const connect = (id: number): Promise<Connection> =>
      firstValueFrom(from(connectionFactory({ host, port: Number(port), appName: 'watcher' })({ id, generation: 0, address: server.address, signal: new AbortController().signal })));
    const [a, b] = await Promise.all([connect(1), connect(2)]);
    try {
      const replied = [a, b].map((c) => c.command('admin', awaitable(c, 800), { exhaustAllowed: true }).then(() => Date.now()));
      expect(await eventually(() => server.awaitingHelloCount === 2)).to.equal(true);
      const started = Date.now();
      server.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['hello'], blockConnection: true, blockTimeMS: 100, appName: 'watcher' } });
      const [ta, tb] = (await Promise.all(replied)).map((t) => t - started).sort((x, y) => x - y);
      // One stream was blocked, then waited in full; the other answered when its own wait ended.
      expect(ta).to.be.at.least(600);
      expect(tb).to.be.at.least(850);
    } finally {
      a.destroy();
      b.destroy();
    }
  });

  it('a fail point that blocks and then fails a streamed hello fails it once the block ends, without the wait: closeConnection closes, errorCode answers the error', async function () {
    const c = await open();
    const first = c.command('admin', awaitable(c, 5000), { exhaustAllowed: true });
    expect(await eventually(() => server.awaitingHelloCount === 1)).to.equal(true);
    let started = Date.now();
    server.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['hello'], blockConnection: true, blockTimeMS: 200, errorCode: 91, appName: 'watcher' } });
    const error = (await first.catch((e: unknown) => e)) as MongoServerError;
    expect(error).to.be.instanceOf(MongoServerError).and.include({ code: 91 });
    expect(Date.now() - started).to.be.within(180, 1500);
    const next = c.command('admin', awaitable(c, 5000), { exhaustAllowed: true });
    expect(await eventually(() => server.awaitingHelloCount === 1)).to.equal(true);
    started = Date.now();
    server.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['hello'], blockConnection: true, blockTimeMS: 200, closeConnection: true, appName: 'watcher' } });
    expect(await next.catch((e: unknown) => e)).to.be.instanceOf(MongoNetworkError);
    expect(Date.now() - started).to.be.within(180, 1500);
  });

  it('a fail point on another appName leaves the wait alone; a client closing its socket ends the wait', async function () {
    const c = await open();
    const waiting = c.command('admin', awaitable(c, 5000), { exhaustAllowed: true }).catch((e: unknown) => e);
    expect(await eventually(() => server.awaitingHelloCount === 1)).to.equal(true);
    server.failCommand.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['hello'], closeConnection: true, appName: 'other' } });
    expect(server.awaitingHelloCount).to.equal(1);
    c.destroy();
    expect(await waiting).to.be.instanceOf(MongoNetworkError);
    expect(await eventually(() => server.awaitingHelloCount === 0 && server.openConnections === 0)).to.equal(true);
  });

  it('answers at once, without waiting maxAwaitTimeMS, when the topology changed before the request or a fail point for it is already on', async function () {
    const c = await open();
    const stale = c.hello.topologyVersion;
    server.changeTopology();
    let started = Date.now();
    expect(Number((await c.command('admin', { hello: 1, topologyVersion: stale, maxAwaitTimeMS: 5000 })).topologyVersion.counter)).to.equal(1);
    expect(Date.now() - started).to.be.below(1000);
    server.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['hello'], errorCode: 91, appName: 'watcher' } });
    started = Date.now();
    const current = { processId: stale.processId, counter: Long.fromNumber(1) };
    expect(await c.command('admin', { hello: 1, topologyVersion: current, maxAwaitTimeMS: 5000 }).catch((e: unknown) => e)).to.be.instanceOf(MongoServerError).and.include({ code: 91 });
    expect(Date.now() - started).to.be.below(1000);
  });

  it('words error 31382 as mongod, with both counters', async function () {
    const c = await open();
    const ahead = { processId: c.hello.topologyVersion.processId, counter: Long.fromNumber(5) };
    expect(await c.command('admin', { hello: 1, topologyVersion: ahead, maxAwaitTimeMS: 100 }).catch((e: unknown) => e)).to.be.instanceOf(MongoServerError).and.include({
      code: 31382, codeName: 'Location31382',
      message: 'Received a topology version with counter: 5 which is greater than the server topology version counter: 0',
    });
  });

  it('shows awaitingHello on the connection only while its awaitable hello waits or streams', async function () {
    const c = await open();
    const waiting = c.command('admin', awaitable(c, 5000));
    expect(await eventually(() => server.clientConnections()[0]?.awaitingHello === true)).to.equal(true);
    server.changeTopology();
    await waiting;
    expect(server.clientConnections()[0].awaitingHello).to.equal(false);
    await c.command('admin', { hello: 1, topologyVersion: { processId: new ObjectId(), counter: Long.fromNumber(0) }, maxAwaitTimeMS: 100 });
    expect(server.clientConnections()[0].awaitingHello).to.equal(false);
  });

  it('ends the stream on a hello reply that cannot be encoded: the BadValue answer has no moreToCome', async function () {
    const c = await open();
    const cycle: Document = { ok: 1 };
    cycle.self = cycle;
    server.handle('hello', () => cycle);
    const error = await c.command('admin', awaitable(c, 100), { exhaustAllowed: true }).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(MongoServerError).and.include({ code: 2, codeName: 'BadValue' });
    expect(c.moreToCome).to.equal(false);
    server.handle('hello', () => ({ ok: 1, isWritablePrimary: true }));
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
  });

  it('keeps streaming after a hello handler\'s reply with ok: true, as after ok: 1', async function () {
    const c = await open();
    server.handle('hello', () => ({ ok: true, isWritablePrimary: true, topologyVersion: server.topologyVersion }));
    await c.command('admin', { hello: 1, topologyVersion: { processId: new ObjectId(), counter: Long.fromNumber(0) }, maxAwaitTimeMS: 5000 }, { exhaustAllowed: true });
    expect(c.moreToCome).to.equal(true);
  });

  it('streams past many topology changes on one connection without a process warning (no listener left behind per wait)', async function () {
    const warnings: Error[] = [];
    const onWarning = (w: Error): number => warnings.push(w);
    process.on('warning', onWarning);
    try {
      const c = await open();
      const first = c.command('admin', awaitable(c, 5000), { exhaustAllowed: true });
      expect(await eventually(() => server.awaitingHelloCount === 1)).to.equal(true);
      server.changeTopology();
      await first;
      for (let i = 2; i <= 15; i++) {
        const next = c.nextReply();
        expect(await eventually(() => server.awaitingHelloCount === 1)).to.equal(true);
        server.changeTopology();
        expect(Number((await next).topologyVersion.counter)).to.equal(i);
      }
      await new Promise((r) => setImmediate(r));
      expect(warnings.map((w) => w.message)).to.deep.equal([]);
    } finally {
      process.off('warning', onWarning);
    }
  });
});
