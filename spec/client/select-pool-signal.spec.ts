/**
 * `Client.selectPool({ signal })`: a caller that gives up (an HTTP request aborted, a subscriber gone) ends its wait
 * for a ready server at once, with the CommandCancelledError `Client.command()` rejects with when its signal aborts
 * during server selection; no listener stays on a long-lived signal. Against the embedded endpoint, or the server of
 * MONGODB_URI when it is set (a client of a closed port stands for a server that is down).
 */
import { expect } from 'chai';
import { getEventListeners } from 'node:events';
import { CommandCancelledError, connect, InvalidOptionError, type Client } from '../../lib';
import { closedPort, eventually, startTestEndpoint, stopTestEndpoint, withOptions, type TestEndpoint } from '../support/endpoint';
import { cancelledWhileSelecting, selectionsWaiting } from '../support/selections';
import { abortingAsListened, brokenAtRead, refusingListeners, unreadableAborted } from '../support/signals';

describe('Client.selectPool: signal (a server selection its caller gives up on)', function () {
  this.timeout(30_000);
  let server: TestEndpoint | undefined;
  let client: Client | undefined;

  /** A client of the test endpoint, whose pool is ready; its monitor checks the server every 500 ms. */
  async function started(): Promise<Client> {
    server = await startTestEndpoint();
    const c = (client = connect(withOptions(process.env.MONGODB_URI ?? `mongodb://${server.address}/`, 'heartbeatFrequencyMS=500')));
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
    return c;
  }

  /** A client of a closed port: no server becomes ready within `serverSelectionTimeoutMS`. */
  async function down(serverSelectionTimeoutMS: number): Promise<Client> {
    const port = await closedPort();
    return (client = connect(`mongodb://127.0.0.1:${port}/?serverSelectionTimeoutMS=${serverSelectionTimeoutMS}&connectTimeoutMS=20000`));
  }

  afterEach(async function () {
    await client?.close();
    client = undefined;
    if (server !== undefined) await stopTestEndpoint(server);
    server = undefined;
  });

  it('an already-aborted signal rejects at once with CommandCancelledError, as command() does: nothing selected, even with a ready pool', async function () {
    const c = await started();
    const controller = new AbortController();
    const reason = new Error('request aborted');
    controller.abort(reason);
    const error = await c.selectPool({ signal: controller.signal }).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(CommandCancelledError);
    expect(error).to.deep.include({ address: undefined, connectionId: undefined, commandName: '', sent: false, streamedReply: false, cause: reason });
    expect((error as Error).message).to.equal('Command was cancelled before a server was selected');
    expect(selectionsWaiting(c)).to.equal(0);
    expect(getEventListeners(controller.signal, 'abort').length).to.equal(0);
  });

  it('aborted while it waits for a ready server: rejects at once with CommandCancelledError and leaves the selection', async function () {
    const c = await down(20_000);
    await cancelledWhileSelecting(c, (signal) => c.selectPool({ signal: signal }));
  });

  it('a ready pool is returned without listening; aborted after it resolved, nothing happens', async function () {
    const c = await started();
    const controller = new AbortController();
    const pool = await c.selectPool({ signal: controller.signal });
    expect(pool.state).to.equal('ready');
    expect(getEventListeners(controller.signal, 'abort').length).to.equal(0);
    controller.abort();
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
  });

  it('one signal over 10,000 selections waiting together, then 10,000 one after another: no listener left once they settled', async function () {
    const c = await started();
    const pool = [...c.pools.values()][0]!;
    const { signal } = new AbortController();
    // Paused by a clear until the monitor's next check (within 500 ms) readies the pool again: every selection waits
    // meanwhile.
    pool.clear();
    const waiting = Array.from({ length: 10_000 }, () => c.selectPool({ signal }));
    expect(await eventually(() => selectionsWaiting(c) === 10_000), 'selections waiting').to.equal(true);
    expect(getEventListeners(signal, 'abort').length, 'listeners while 10,000 wait').to.equal(1);
    const pools = await Promise.all(waiting);
    expect(new Set(pools)).to.deep.equal(new Set([pool]));
    expect(getEventListeners(signal, 'abort').length, 'listeners once 10,000 waits settled').to.equal(0);
    for (let i = 0; i < 10_000; i++) await c.selectPool({ signal });
    expect(getEventListeners(signal, 'abort').length, 'listeners after 10,000 more').to.equal(0);
  });

  it('a signal that is not an AbortSignal is refused with InvalidOptionError naming signal, before a server is selected', async function () {
    const c = await down(10_000);
    for (const value of [{}, 'abort', null, { aborted: 1, addEventListener() {}, removeEventListener() {} }]) {
      const error = await c.selectPool({ signal: value as unknown as AbortSignal }).catch((e: unknown) => e);
      expect(error, String(value)).to.be.instanceOf(InvalidOptionError).and.have.property('option', 'signal');
      expect((error as Error).message).to.match(/\(signal must be an AbortSignal \(e\.g\. AbortController\.signal or AbortSignal\.timeout\(ms\)\)\)$/);
    }
    const unreadable = await c.selectPool({ signal: unreadableAborted('torn down') }).catch((e: unknown) => e);
    expect(unreadable).to.be.instanceOf(InvalidOptionError).and.include({ option: 'signal', cause: 'torn down' });
    expect((unreadable as Error).message).to.match(/^Invalid signal: reading it as an AbortSignal threw \(torn down\); signal must be an AbortSignal/);
    const misspelt = await c.selectPool({ sigal: new AbortController().signal } as never).catch((e: unknown) => e);
    expect(misspelt).to.be.instanceOf(InvalidOptionError);
    expect((misspelt as Error).message).to.match(/did you mean signal\?/);
    const notAnObject = await c.selectPool('fast' as never).catch((e: unknown) => e);
    expect(notAnObject).to.be.instanceOf(InvalidOptionError).and.have.property('option', 'selectPool options');
    expect(selectionsWaiting(c), 'selections waiting').to.equal(0);
  });

  it('a signal whose aborted getter throws after the shape check, at the first look or as selection listens: that error, or an Error saying so, nothing selected', async function () {
    const c = await down(10_000);
    // Read 1 is the shape check (an InvalidOptionError), 2 the look before selection, 3 the selection's own.
    for (const at of [2, 3]) {
      const broken = new Error(`aborted getter broke at read ${at}`);
      const start = performance.now();
      expect(await c.selectPool({ signal: brokenAtRead(at, broken) }).catch((e: unknown) => e), `read ${at}`).to.equal(broken);
      const wrapped = await c.selectPool({ signal: brokenAtRead(at, 'no') }).catch((e: unknown) => e);
      expect(performance.now() - start, 'ms to both rejections (selection would wait 10 s)').to.be.below(2000);
      expect(wrapped, `read ${at}`).to.be.instanceOf(Error).and.include({ message: "the server selection's signal refused a listener: no", cause: 'no' });
    }
    expect(selectionsWaiting(c), 'selections still waiting').to.equal(0);
  });

  it('a signal whose addEventListener throws a value that is not an Error, while no server is ready: an Error saying so, at once', async function () {
    const c = await down(10_000);
    const signal = refusingListeners('listeners off');
    const start = performance.now();
    const error = await c.selectPool({ signal }).catch((e: unknown) => e);
    expect(performance.now() - start, 'ms to the rejection (selection would wait 10 s)').to.be.below(2000);
    expect(error).to.be.instanceOf(Error).and.include({ message: "the server selection's signal refused a listener: listeners off", cause: 'listeners off' });
    expect(selectionsWaiting(c), 'selections still waiting').to.equal(0);
  });

  it('a signal that aborts as it is listened to, while no server is ready: rejects at once with CommandCancelledError', async function () {
    const c = await down(10_000);
    const reason = new Error('upstream aborted');
    const start = performance.now();
    const error = await c.selectPool({ signal: abortingAsListened(reason) }).catch((e: unknown) => e);
    expect(performance.now() - start, 'ms to the rejection (selection would wait 10 s)').to.be.below(2000);
    expect(error).to.be.instanceOf(CommandCancelledError).and.deep.include({ address: undefined, sent: false, cause: reason });
    expect(selectionsWaiting(c), 'selections still waiting').to.equal(0);
  });
});
