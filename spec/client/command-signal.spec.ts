/**
 * `Client.command({ signal })`: a caller that gives up (an HTTP request aborted, a subscriber gone) ends its command
 * at once wherever it is: waiting for a ready server, for its checkout, or for its reply; a command that reached the
 * server closes its connection (never reused), clearing nothing; no listener stays on a long-lived signal. Against the
 * embedded endpoint, or the server of MONGODB_URI when it is set (the `failCommand` fail point holds a reply back;
 * what the server received is counted on the embedded endpoint only).
 */
import { expect } from 'chai';
import { getEventListeners } from 'node:events';
import { CheckOutCancelledError, CommandCancelledError, connect, InvalidOptionError, type Client, type ClientEvent, type CommandEvent } from '../../lib';
import { closedPort, eventually, setFailPoint, startTestEndpoint, stopTestEndpoint, withOptions, type TestEndpoint } from '../support/endpoint';
import { cancelledWhileSelecting, selectionsWaiting } from '../support/selections';
import { abortingAsListened, brokenAtRead, refusingListeners } from '../support/signals';

describe('Client.command: signal (a command its caller gives up on)', function () {
  this.timeout(30_000);
  let server: TestEndpoint | undefined;
  let client: Client | undefined;
  let pings = 0;

  async function started(uriOptions = ''): Promise<{ c: Client; events: ClientEvent[]; commands: CommandEvent[] }> {
    server = await startTestEndpoint();
    pings = 0;
    server.embedded?.handle('ping', () => {
      pings++;
      return { ok: 1 };
    });
    const c = (client = connect(withOptions(process.env.MONGODB_URI ?? `mongodb://${server.address}/`, uriOptions)));
    const events: ClientEvent[] = [];
    const commands: CommandEvent[] = [];
    c.events$.subscribe((e) => events.push(e));
    c.commandEvents$.subscribe((e) => commands.push(e));
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
    pings = 0;
    events.length = 0;
    commands.length = 0;
    return { c, events, commands };
  }

  afterEach(async function () {
    await client?.close();
    client = undefined;
    if (server !== undefined) await stopTestEndpoint(server);
    server = undefined;
  });

  const types = (events: ClientEvent[], names: readonly string[]): string[] =>
    events.filter((e) => names.includes(e.type)).map((e) => ('reason' in e ? `${e.type}:${String(e.reason)}` : e.type));

  it('an already-aborted signal fails at once with CommandCancelledError: no server selected, no checkout, nothing sent', async function () {
    const { c, events, commands } = await started();
    const controller = new AbortController();
    controller.abort();
    const error = await c.command('admin', { ping: 1 }, { signal: controller.signal }).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(CommandCancelledError);
    expect(error).to.deep.include({ address: undefined, connectionId: undefined, commandName: 'ping', sent: false, cause: controller.signal.reason });
    expect((error as Error).message).to.equal('Command ping was cancelled before a server was selected');
    expect(types(events, ['ConnectionCheckOutStarted']), 'no checkout').to.deep.equal([]);
    expect(commands).to.deep.equal([]);
    if (server!.embedded !== undefined) expect(pings).to.equal(0);
  });

  it('aborted while it waits for a ready server: fails at once with CommandCancelledError and leaves the selection', async function () {
    const port = await closedPort();
    const c = (client = connect(`mongodb://127.0.0.1:${port}/?serverSelectionTimeoutMS=20000&connectTimeoutMS=20000`));
    await cancelledWhileSelecting(c, (signal) => c.command('admin', { ping: 1 }, { signal: signal }));
  });

  it('a signal that aborts as it is listened to, while no server is ready: fails at once with CommandCancelledError', async function () {
    const port = await closedPort();
    const c = (client = connect(`mongodb://127.0.0.1:${port}/?serverSelectionTimeoutMS=10000&connectTimeoutMS=20000`));
    const reason = new Error('upstream aborted');
    // A wrapper that subscribes to an upstream signal as it is listened to, and finds it aborted just then.
    const signal = abortingAsListened(reason);
    const start = performance.now();
    const error = await c.command('admin', { ping: 1 }, { signal }).catch((e: unknown) => e);
    expect(performance.now() - start, 'ms to the rejection (selection would wait 10 s)').to.be.below(2000);
    expect(error).to.be.instanceOf(CommandCancelledError).and.deep.include({ address: undefined, sent: false, cause: reason });
    expect(selectionsWaiting(c), 'selections still waiting').to.equal(0);
  });

  it('a signal whose addEventListener throws a value that is not an Error, while no server is ready: an Error saying so, at once', async function () {
    const port = await closedPort();
    const c = (client = connect(`mongodb://127.0.0.1:${port}/?serverSelectionTimeoutMS=10000&connectTimeoutMS=20000`));
    const signal = refusingListeners('listeners off');
    const start = performance.now();
    const error = await c.command('admin', { ping: 1 }, { signal }).catch((e: unknown) => e);
    expect(performance.now() - start, 'ms to the rejection (selection would wait 10 s)').to.be.below(2000);
    // As Connection.command and the checkout fail for such a signal: an Error, the value its cause.
    expect(error).to.be.instanceOf(Error).and.include({ message: "the command's signal refused a listener: listeners off", cause: 'listeners off' });
    expect(selectionsWaiting(c), 'selections still waiting').to.equal(0);
  });

  it('a signal whose aborted getter throws after the shape check, at the first look or as selection listens: that error, or an Error saying so, nothing selected', async function () {
    const port = await closedPort();
    const c = (client = connect(`mongodb://127.0.0.1:${port}/?serverSelectionTimeoutMS=10000&connectTimeoutMS=20000`));
    // Read 1 is the shape check (an InvalidOptionError), 2 the look before selection, 3 the selection's own.
    for (const at of [2, 3]) {
      const broken = new Error(`aborted getter broke at read ${at}`);
      const start = performance.now();
      expect(await c.command('admin', { ping: 1 }, { signal: brokenAtRead(at, broken) }).catch((e: unknown) => e), `read ${at}`).to.equal(broken);
      const wrapped = await c.command('admin', { ping: 1 }, { signal: brokenAtRead(at, 'no') }).catch((e: unknown) => e);
      expect(performance.now() - start, 'ms to both rejections (selection would wait 10 s)').to.be.below(2000);
      expect(wrapped, `read ${at}`).to.be.instanceOf(Error).and.include({ message: "the command's signal refused a listener: no", cause: 'no' });
    }
    expect(selectionsWaiting(c), 'selections still waiting').to.equal(0);
  });

  it('a signal whose aborted getter throws once a ready server was selected (the checkout\'s and the connection\'s looks): that error, or an Error with it as cause, never an InvalidOptionError, and nothing held', async function () {
    const { c } = await started();
    const pool = [...c.pools.values()][0]!;
    // With a ready server, read 3 is the checkout's look at the options, 4 its look before it enters the pool, 5 the
    // connection's look at the command's options, 6 and later its looks before it sends.
    for (let at = 3; at <= 8; at++) {
      const broken = new Error(`aborted getter broke at read ${at}`);
      const error = await c.command('admin', { ping: 1 }, { signal: brokenAtRead(at, broken) }).then(() => undefined, (e: unknown) => e);
      expect(error, `read ${at}`).to.equal(broken);
      const wrapped = await c.command('admin', { ping: 1 }, { signal: brokenAtRead(at, null) }).then(() => undefined, (e: unknown) => e);
      expect(wrapped, `read ${at}`).to.be.instanceOf(Error).and.not.be.instanceOf(InvalidOptionError);
      expect((wrapped as Error).message, `read ${at}`).to.match(/^the (command|checkout)'s signal refused a listener: null$/);
      expect((wrapped as Error).cause, `read ${at}`).to.equal(null);
    }
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
    expect(pool.snapshot().inUseConnectionCount, 'connections left in use').to.equal(0);
    expect(pool.snapshot().waitQueueLength, 'checkouts left waiting').to.equal(0);
  });

  it("aborted while it waits for its checkout: the pool's CheckOutCancelledError, ConnectionCheckOutFailed reason cancelled, nothing sent", async function () {
    const { c, events } = await started('maxPoolSize=1');
    await setFailPoint(this, server!, { mode: { times: 1 }, data: { failCommands: ['ping'], blockConnection: true, blockTimeMS: 1500 } });
    const pool = [...c.pools.values()][0]!;
    const busy = c.command('admin', { ping: 1 });
    const controller = new AbortController();
    const settled = c.command('admin', { ping: 1 }, { signal: controller.signal }).catch((e: unknown) => e);
    expect(await eventually(() => pool.snapshot().waitQueueLength === 1)).to.equal(true);
    controller.abort();
    const error = await settled;
    expect(error).to.be.instanceOf(CheckOutCancelledError).and.have.property('cause', controller.signal.reason);
    expect(pool.snapshot().waitQueueLength).to.equal(0);
    expect(types(events, ['ConnectionCheckOutFailed'])).to.deep.equal(['ConnectionCheckOutFailed:cancelled']);
    expect(await busy).to.include({ ok: 1 });
    if (server!.embedded !== undefined) expect(pings, 'only the first ping reached the server').to.equal(1);
  });

  it('aborted while its reply is awaited: fails at once, CommandFailed, its connection closed (reason error), the pool neither cleared nor paused', async function () {
    const { c, events, commands } = await started();
    await setFailPoint(this, server!, { mode: { times: 1 }, data: { failCommands: ['ping'], blockConnection: true, blockTimeMS: 5000 } });
    const pool = [...c.pools.values()][0]!;
    const controller = new AbortController();
    const settled = c.command('admin', { ping: 1 }, { signal: controller.signal }).catch((e: unknown) => e);
    expect(await eventually(() => commands.length === 1)).to.equal(true);
    await new Promise((r) => setTimeout(r, 50));
    const abortedAt = performance.now();
    controller.abort();
    const error = await settled;
    expect(performance.now() - abortedAt, 'ms from the abort to the rejection (the reply is held 5 s)').to.be.below(2000);
    expect(error).to.be.instanceOf(CommandCancelledError).and.deep.include({ address: server!.address, commandName: 'ping', sent: true, cause: controller.signal.reason });
    await new Promise((r) => setImmediate(r));
    expect(commands.map((e) => e.type)).to.deep.equal(['CommandStarted', 'CommandFailed']);
    expect((commands[1] as CommandEvent & { failure: Error }).failure).to.equal(error);
    expect(types(events, ['ConnectionCheckedIn', 'ConnectionClosed', 'ConnectionPoolCleared'])).to.deep.equal(['ConnectionCheckedIn', 'ConnectionClosed:error']);
    expect(pool.state).to.equal('ready');
    expect(pool.snapshot().totalConnectionCount, 'its connection closed').to.equal(0);
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
    expect(getEventListeners(controller.signal, 'abort').length).to.equal(0);
  });

  it('one signal over 20 commands on 5 connections, aborted at once: each settles once, 5 CommandFailed, the 5 connections closed, none left listening', async function () {
    const { c, events, commands } = await started('maxPoolSize=5');
    await setFailPoint(this, server!, { mode: 'alwaysOn', data: { failCommands: ['ping'], blockConnection: true, blockTimeMS: 5000 } });
    const pool = [...c.pools.values()][0]!;
    const controller = new AbortController();
    const outcomes = Array.from({ length: 20 }, () => c.command('admin', { ping: 1 }, { signal: controller.signal }).catch((e: unknown) => e));
    expect(await eventually(() => commands.length === 5 && pool.snapshot().waitQueueLength === 15)).to.equal(true);
    await new Promise((r) => setTimeout(r, 50));
    expect(getEventListeners(controller.signal, 'abort').length, 'listeners while 20 wait').to.equal(1);
    controller.abort();
    const errors = await Promise.all(outcomes);
    const kinds = errors.map((e) => (e instanceof CommandCancelledError ? `sent ${String(e.sent)}` : e instanceof CheckOutCancelledError ? 'checkout' : String(e)));
    expect(kinds.filter((k) => k === 'sent true').length, 'cancelled after they were sent').to.equal(5);
    expect(kinds.filter((k) => k === 'checkout').length, 'cancelled in the WaitQueue').to.equal(15);
    await new Promise((r) => setImmediate(r));
    expect(commands.filter((e) => e.type === 'CommandStarted').length).to.equal(5);
    expect(commands.filter((e) => e.type === 'CommandFailed').length).to.equal(5);
    expect(types(events, ['ConnectionClosed', 'ConnectionPoolCleared'])).to.deep.equal(Array(5).fill('ConnectionClosed:error'));
    expect(pool.snapshot()).to.deep.include({ totalConnectionCount: 0, waitQueueLength: 0 });
    expect(getEventListeners(controller.signal, 'abort').length, 'listeners once all settled').to.equal(0);
    await setFailPoint(this, server!, { mode: 'off' });
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
  });

  it('one signal over 10,000 commands: no listener left once they settled', async function () {
    const { c } = await started();
    const { signal } = new AbortController();
    for (let i = 0; i < 10_000; i++) await c.command('admin', { ping: 1 }, { signal });
    expect(getEventListeners(signal, 'abort').length, 'listeners after 10,000 commands').to.equal(0);
    if (server!.embedded !== undefined) expect(pings).to.equal(10_000);
  });

  it('a signal that is not an AbortSignal is refused with InvalidOptionError naming signal, before a server is selected', async function () {
    const { c, events } = await started();
    for (const value of [{}, 'abort', null, { aborted: 1, addEventListener() {}, removeEventListener() {} }]) {
      const error = await c.command('admin', { ping: 1 }, { signal: value as unknown as AbortSignal }).catch((e: unknown) => e);
      expect(error, String(value)).to.be.instanceOf(InvalidOptionError).and.have.property('option', 'signal');
    }
    const misspelt = await c.command('admin', { ping: 1 }, { sigal: new AbortController().signal } as never).catch((e: unknown) => e);
    expect(misspelt).to.be.instanceOf(InvalidOptionError);
    expect((misspelt as Error).message).to.match(/did you mean signal\?/);
    expect(types(events, ['ConnectionCheckOutStarted'])).to.deep.equal([]);
    if (server!.embedded !== undefined) expect(pings).to.equal(0);
  });
});
