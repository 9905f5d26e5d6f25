/**
 * A client's server selection messages (component `serverSelection`): what `log$` and the log destination say while
 * commands wait for a server, as in an outage or a network partition, where the operator asks why commands waited.
 * Against the embedded endpoint, or the server of MONGODB_URI when it is set (a closed port stands for a server that
 * is down).
 */
import { expect } from 'chai';
import * as crypto from 'node:crypto';
import * as dns from 'node:dns';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { config } from 'rxjs';
import { Client as ClientClass, ClientClosedError, CommandCancelledError, connect, IncompatibleServerError, PoolClosedError, ServerSelectionError, SrvResolutionError, type Client, type LogLevel, type LogMessage, type ServerSelectionLogMessage } from '../../lib';
import { EmbeddedServer, VirtualClock } from '../../lib/testing';
import { DnsResponder } from '../support/dns-responder';
import { closedPort, eventually, startTestEndpoint, stopTestEndpoint, withOptions, type TestEndpoint } from '../support/endpoint';
import { selectionsWaiting } from '../support/selections';
import { startRelay } from '../support/relay';
import { startSocks5Proxy } from '../support/socks5-proxy';

describe('Client: server selection log messages (server selection spec, "Logging")', function () {
  this.timeout(20_000);
  let server: TestEndpoint | undefined;
  let client: Client | undefined;

  afterEach(async function () {
    await client?.close();
    client = undefined;
    if (server !== undefined) await stopTestEndpoint(server);
    server = undefined;
  });

  /** The messages written to the client's log destination, and those of `log$`, in order. */
  function logged(): { written: LogMessage[]; feed: LogMessage[]; logging: (level: LogLevel, others?: LogLevel) => object } {
    const written: LogMessage[] = [];
    const feed: LogMessage[] = [];
    return {
      written,
      feed,
      logging: (level, others = 'off') => ({ componentSeverities: { serverSelection: level, default: others }, path: { write: (m: LogMessage) => void written.push(m) } }),
    };
  }

  const selectionMessages = (messages: readonly LogMessage[]): ServerSelectionLogMessage[] =>
    messages.filter((m): m is ServerSelectionLogMessage => m.component === 'serverSelection');

  /** A client of a server that is down, on virtual time. */
  async function down(level: LogLevel, serverSelectionTimeoutMS = 3000): Promise<{ c: Client; clock: VirtualClock; log: ReturnType<typeof logged> }> {
    const port = await closedPort();
    const clock = new VirtualClock();
    const log = logged();
    const c = (client = connect(`mongodb://127.0.0.1:${port}/?serverSelectionTimeoutMS=${serverSelectionTimeoutMS}&connectTimeoutMS=20000`, { scheduler: clock, logging: log.logging(level) }));
    c.log$.subscribe((m) => log.feed.push(m));
    return { c, clock, log };
  }

  it('a command on a ready server: "Server selection started" then "succeeded", at debug, with the common keys and the server selected; no waiting message', async function () {
    server = await startTestEndpoint();
    const log = logged();
    const c = (client = connect(withOptions(process.env.MONGODB_URI ?? `mongodb://${server.address}/`, 'heartbeatFrequencyMS=500'), { logging: log.logging('debug') }));
    c.log$.subscribe((m) => log.feed.push(m));
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
    log.written.length = 0;
    log.feed.length = 0;
    await c.command('admin', { ping: 1 });
    const pool = [...c.pools.values()][0];
    const [host, port] = [pool.address.slice(0, pool.address.lastIndexOf(':')), Number(pool.address.slice(pool.address.lastIndexOf(':') + 1))];
    const messages = selectionMessages(log.written);
    expect(messages.map((m) => [m.fields.message, m.level])).to.deep.equal([
      ['Server selection started', 'debug'],
      ['Server selection succeeded', 'debug'],
    ]);
    // Every host, in order; the one selected of a known type (another host of MONGODB_URI may be down).
    const description = JSON.parse(messages[0].fields.topologyDescription) as { type: string; servers: { address: string; type: string }[] };
    expect(description.servers.map((s) => s.address)).to.deep.equal([...c.pools.keys()]);
    expect(description.servers.find((s) => s.address === pool.address)!.type).to.not.equal('Unknown');
    expect(description.type).to.not.equal('Unknown');
    expect(messages[0].toJSON()).to.include({ c: 'serverSelection', s: 'debug', message: 'Server selection started', selector: 'primary', operation: 'ping' });
    expect(Object.keys(messages[1].toJSON())).to.deep.equal(['t', 'c', 's', 'message', 'selector', 'operation', 'topologyDescription', 'serverHost', 'serverPort']);
    expect(messages[0].render()).to.equal(`Server selection started for operation ping. Selector: primary, topology description: ${messages[0].fields.topologyDescription}`);
    expect(messages[1].fields).to.include({ serverHost: host, serverPort: port });
    expect(messages[1].render()).to.equal(`Server selection succeeded for operation ping. Selected server: ${pool.address}. Selector: primary, topology description: ${messages[1].fields.topologyDescription}`);
    expect(selectionMessages(log.feed), 'log$ carries what the destination was given').to.deep.equal(messages);
  });

  it('a server on a Unix domain socket: "Server selection succeeded" names its path as serverHost, with no serverPort key at all', async function () {
    server = await startTestEndpoint();
    const socketPath = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'rxcmap-')), 'mongodb.sock');
    // The socket forwards to the server's TCP port.
    const relay = await startRelay(server.address, socketPath);
    try {
      const log = logged();
      const c = (client = connect(`mongodb://${encodeURIComponent(socketPath)}/?directConnection=true`, { logging: log.logging('debug'), ...server.connectionOptions }));
      expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
      const succeeded = selectionMessages(log.written).filter((m) => m.fields.message === 'Server selection succeeded');
      expect(succeeded.length).to.be.at.least(1);
      expect(succeeded[0].fields.serverHost).to.equal(socketPath);
      expect(Object.keys(succeeded[0].fields), 'the fields').to.not.include('serverPort');
      expect(Object.keys(succeeded[0].toJSON()), 'the structured form').to.not.include('serverPort');
      expect(succeeded[0].render()).to.include(`Selected server: ${socketPath}.`);
      await c.close();
      client = undefined;
    } finally {
      await relay.close();
    }
  });

  it('no ready server: one "Waiting for suitable server to become available" (info) however long it waits, then "Server selection failed" with the ServerSelectionError', async function () {
    const { c, clock, log } = await down('debug');
    const failed = c.command('admin', { ping: 1 }).catch((e: unknown) => e);
    expect(await eventually(() => selectionsWaiting(c) === 1)).to.equal(true);
    // Immediate checks are requested every 500 ms meanwhile: still one waiting message.
    for (let elapsed = 0; elapsed < 2500; elapsed += 500) {
      clock.advance(500);
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(selectionMessages(log.written).map((m) => m.fields.message)).to.deep.equal(['Server selection started', 'Waiting for suitable server to become available']);
    clock.advance(500);
    const error = await failed;
    expect(error).to.be.instanceOf(ServerSelectionError);
    const messages = selectionMessages(log.written);
    expect(messages.map((m) => [m.fields.message, m.level])).to.deep.equal([
      ['Server selection started', 'debug'],
      ['Waiting for suitable server to become available', 'info'],
      ['Server selection failed', 'debug'],
    ]);
    expect(messages[1].fields.remainingTimeMS, 'ms left when it began to wait (virtual time)').to.equal(3000);
    expect(JSON.parse(messages[1].fields.topologyDescription)).to.deep.equal({ type: 'Unknown', servers: [{ address: [...c.pools.keys()][0], type: 'Unknown' }] });
    // The failure repeats nothing the message's other keys hold (server selection spec, "failure"): not the hosts,
    // which topologyDescription lists, nor the read preference, the selector; the error thrown names both. The last
    // check's error is written once, as its cause.
    const cause = (error as Error).cause;
    expect(cause, 'the last check failed').to.be.instanceOf(Error);
    expect(messages[2].fields.failure).to.deep.include({ type: 'ServerSelectionError', message: 'No suitable server within serverSelectionTimeoutMS=3000 ms' });
    expect(messages[2].fields.failure?.cause).to.include({ message: (cause as Error).message });
    expect(messages[2].render().split((cause as Error).message).length - 1, "the last check's error written once").to.equal(1);
    expect((error as Error).message).to.include([...c.pools.keys()][0]).and.include('(read preference primary)');
    expect(messages[2].render()).to.match(/^Server selection failed for operation ping\. Failure: ServerSelectionError: No suitable server within .+\. Selector: primary, topology description: \{/);
    expect(messages[1].render()).to.match(/^Waiting for server to become available for operation ping\. Remaining time: 3000 ms\. Selector: primary, topology description: \{.*\}\.$/);
  });

  it('a server whose wire versions rxcmap does not speak: "Server selection failed" with the IncompatibleServerError, once the check told', async function () {
    const old = await new EmbeddedServer({ maxWireVersion: 7 }).start();
    try {
      const log = logged();
      const c = (client = connect(`mongodb://${old.address}/?directConnection=true`, { logging: log.logging('debug') }));
      const failedCheck = new Promise<void>((resolve) => c.events$.subscribe((e) => e.type === 'ServerHeartbeatFailed' && resolve()));
      await failedCheck;
      const error = await c.command('admin', { ping: 1 }).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(IncompatibleServerError);
      const messages = selectionMessages(log.written);
      expect(messages.map((m) => m.fields.message)).to.deep.equal(['Server selection started', 'Server selection failed']);
      expect(messages[1].fields.failure).to.include({ type: 'IncompatibleServerError', message: (error as Error).message });
      await c.close();
    } finally {
      await old.stop();
    }
  });

  it('at info, only the waiting message; off, none (with the other components at debug)', async function () {
    const info = await down('info');
    const first = info.c.command('admin', { ping: 1 }).catch((e: unknown) => e);
    expect(await eventually(() => selectionsWaiting(info.c) === 1)).to.equal(true);
    info.clock.advance(3000);
    expect(await first).to.be.instanceOf(ServerSelectionError);
    expect(selectionMessages(info.log.written).map((m) => [m.fields.message, m.level, m.fields.operation])).to.deep.equal([['Waiting for suitable server to become available', 'info', 'ping']]);
    await info.c.close();

    const port = await closedPort();
    const clock = new VirtualClock();
    const log = logged();
    const c = (client = connect(`mongodb://127.0.0.1:${port}/?serverSelectionTimeoutMS=3000`, { scheduler: clock, logging: log.logging('off', 'debug') }));
    const second = c.command('admin', { ping: 1 }).catch((e: unknown) => e);
    expect(await eventually(() => selectionsWaiting(c) === 1)).to.equal(true);
    clock.advance(3000);
    expect(await second).to.be.instanceOf(ServerSelectionError);
    expect(log.written.length, 'the other components logged').to.be.above(0);
    expect(selectionMessages(log.written)).to.deep.equal([]);
  });

  it('a selection its signal ends, and selectPool(): "Server selection failed" with the CommandCancelledError; the operation is the command\'s name, or selectPool', async function () {
    const { c, log } = await down('debug', 10_000);
    const controller = new AbortController();
    const cancelled = c.command('admin', { find: 'orders' }, { signal: controller.signal }).catch((e: unknown) => e);
    const selecting = c.selectPool({ signal: controller.signal }).catch((e: unknown) => e);
    expect(await eventually(() => selectionsWaiting(c) === 2)).to.equal(true);
    controller.abort();
    expect(await cancelled).to.be.instanceOf(CommandCancelledError);
    expect(await selecting).to.be.instanceOf(CommandCancelledError);
    const ends = selectionMessages(log.written).filter((m) => m.fields.message === 'Server selection failed');
    expect(ends.map((m) => [m.fields.operation, m.fields.failure?.type])).to.deep.equal([
      ['find', 'CommandCancelledError'],
      ['selectPool', 'CommandCancelledError'],
    ]);
  });

  it('close() while selections wait: each one\'s "Server selection failed" (ClientClosedError) reaches log$ before it completes', async function () {
    const { c, log } = await down('debug', 10_000);
    const waits = [c.command('admin', { ping: 1 }).catch((e: unknown) => e), c.selectPool().catch((e: unknown) => e)];
    expect(await eventually(() => selectionsWaiting(c) === 2)).to.equal(true);
    let completed = false;
    const atCompletion: string[] = [];
    c.log$.subscribe({ complete: () => ((completed = true), atCompletion.push(...selectionMessages(log.feed).map((m) => m.fields.message))) });
    await c.close();
    const errors = await Promise.all(waits);
    for (const error of errors) expect(error).to.be.instanceOf(ClientClosedError);
    expect(await eventually(() => completed), 'log$ completes').to.equal(true);
    expect(atCompletion.filter((m) => m === 'Server selection failed').length).to.equal(2);
    // Written as the error it is (its own message), not as a selection that timed out.
    expect(selectionMessages(log.feed).at(-1)?.fields.failure).to.deep.equal({ type: 'ClientClosedError', message: (errors[1] as Error).message });
    // A selection after close fails at once, and is not logged (the log has ended).
    expect(await c.command('admin', { ping: 1 }).catch((e: unknown) => e)).to.be.instanceOf(ClientClosedError);
    expect(selectionMessages(log.written).length).to.equal(6);
  });

  for (const [what, act, expected] of [
    ['closes', (c: Client) => void c.close(), ClientClosedError],
    ['drains', (c: Client) => void c.drain(), PoolClosedError],
  ] as const) {
    it(`a destination that ${what} the client as the waiting message is written: the command fails at once, as it would have waiting`, async function () {
      const port = await closedPort();
      const clock = new VirtualClock();
      let c: Client | undefined;
      const sink = { write: (m: LogMessage) => void (m.component === 'serverSelection' && m.level === 'info' && act(c!)) };
      c = client = connect(`mongodb://127.0.0.1:${port}/?serverSelectionTimeoutMS=10000`, { scheduler: clock, logging: { componentSeverities: { serverSelection: 'info' }, path: sink } });
      let settled: unknown = 'pending';
      void c.command('admin', { ping: 1 }).then(
        () => (settled = 'succeeded'),
        (e: unknown) => (settled = e),
      );
      // The virtual clock never moves: a selection left waiting would never end.
      expect(await eventually(() => settled !== 'pending'), 'the command settled').to.equal(true);
      expect(settled).to.be.instanceOf(expected);
      expect(selectionsWaiting(c)).to.equal(0);
    });
  }

  it('a mongodb+srv URI still being discovered: one waiting message for the DNS wait and the server wait together', async function () {
    const responder = await new DnsResponder({ srv: { '_mongodb._tcp.test3.test.build.10gen.cc': [{ target: 'localhost.test.build.10gen.cc', port: 27017 }] } }).start();
    const servers = dns.getServers();
    dns.setServers([responder.server]);
    try {
      responder.delayMS = 600;
      const log = logged();
      const c = (client = connect('mongodb+srv://test3.test.build.10gen.cc/?serverSelectionTimeoutMS=1000', { logging: log.logging('debug') }));
      const started = performance.now();
      const error = await c.command('admin', { ping: 1 }).catch((e: unknown) => e);
      const waited = performance.now() - started;
      expect(error).to.be.instanceOf(ServerSelectionError);
      // The DNS wait counts against serverSelectionTimeoutMS: 1000 ms in all, not 600 ms more.
      expect(waited, 'ms from the command to its failure').to.be.within(950, 1400);
      expect(responder.questions.length, 'DNS questions asked').to.be.above(0);
      const messages = selectionMessages(log.written);
      expect(messages.map((m) => m.fields.message)).to.deep.equal(['Server selection started', 'Waiting for suitable server to become available', 'Server selection failed']);
      expect(messages[1].fields.remainingTimeMS).to.be.within(900, 1000);
    } finally {
      dns.setServers(servers);
      await responder.close();
    }
  });

  it('remainingTimeMS is a whole number of ms (the spec\'s Int), what is left rounded down, on a clock that reads fractions of a ms as performance.now() does', async function () {
    const port = await closedPort();
    const clock = new VirtualClock();
    const log = logged();
    // The start message's destination takes 0.6 ms: 2999.4 ms are left as the wait begins.
    const sink = { write: (m: LogMessage) => void (log.written.push(m), m.component === 'serverSelection' && m.fields.message === 'Server selection started' && clock.advance(0.6)) };
    const c = (client = connect(`mongodb://127.0.0.1:${port}/?serverSelectionTimeoutMS=3000`, { scheduler: clock, logging: { componentSeverities: { serverSelection: 'debug' }, path: sink } }));
    const failed = c.command('admin', { ping: 1 }).catch((e: unknown) => e);
    expect(await eventually(() => selectionsWaiting(c) === 1)).to.equal(true);
    const waiting = selectionMessages(log.written)[1];
    expect(waiting.fields).to.include({ message: 'Waiting for suitable server to become available', remainingTimeMS: 2999 });
    expect(waiting.render()).to.include('Remaining time: 2999 ms.');
    expect(waiting.toJSON()).to.include({ remainingTimeMS: 2999 });
    clock.advance(3000);
    expect(await failed).to.be.instanceOf(ServerSelectionError);
  });

  it('remainingTimeMS is what is left when the wait begins, and the wait ends serverSelectionTimeoutMS after the start (a destination that takes 100 ms per message)', async function () {
    const port = await closedPort();
    const clock = new VirtualClock();
    const log = logged();
    const advanceOn = (m: LogMessage): boolean => m.component === 'serverSelection' && m.fields.message !== 'Server selection failed';
    const sink = { write: (m: LogMessage) => void (log.written.push(m), advanceOn(m) && clock.advance(100)) };
    const c = (client = connect(`mongodb://127.0.0.1:${port}/?serverSelectionTimeoutMS=3000`, { scheduler: clock, logging: { componentSeverities: { serverSelection: 'debug' }, path: sink } }));
    let settled: unknown = 'pending';
    void c.command('admin', { ping: 1 }).then(
      () => (settled = 'succeeded'),
      (e: unknown) => (settled = e),
    );
    expect(await eventually(() => selectionsWaiting(c) === 1)).to.equal(true);
    expect(selectionMessages(log.written)[1].fields).to.include({ message: 'Waiting for suitable server to become available', remainingTimeMS: 2900 });
    // The wait counts from the start: 3000 ms in all, 200 of them spent writing the two messages.
    clock.advance(2799);
    await new Promise((resolve) => setImmediate(resolve));
    expect(settled, '1 ms before serverSelectionTimeoutMS from the start').to.equal('pending');
    clock.advance(1);
    expect(await eventually(() => settled !== 'pending')).to.equal(true);
    expect(settled).to.be.instanceOf(ServerSelectionError);
  });
});

describe('Client: server selection log messages, every path and re-entrant log destinations', function () {
  this.timeout(20_000);
  const clients: Client[] = [];
  let server: TestEndpoint | undefined;
  let responder: DnsResponder | undefined;
  let dnsServers: string[] | undefined;

  afterEach(async function () {
    for (const c of clients.splice(0)) await c.close();
    if (server !== undefined) await stopTestEndpoint(server);
    server = undefined;
    if (dnsServers !== undefined) dns.setServers(dnsServers);
    dnsServers = undefined;
    await responder?.close();
    responder = undefined;
  });

  const selectionMessages = (messages: readonly LogMessage[]): ServerSelectionLogMessage[] =>
    messages.filter((m): m is ServerSelectionLogMessage => m.component === 'serverSelection');
  const names = (messages: readonly LogMessage[]): string[] => selectionMessages(messages).map((m) => m.fields.message);
  const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

  /** A DNS responder for `test3.test.build.10gen.cc` that the resolver of the clients made from now on asks. */
  async function srvResponder(): Promise<DnsResponder> {
    responder = await new DnsResponder({ srv: { '_mongodb._tcp.test3.test.build.10gen.cc': [{ target: 'localhost.test.build.10gen.cc', port: 27017 }] } }).start();
    dnsServers = dns.getServers();
    dns.setServers([responder.server]);
    return responder;
  }

  /**
   * A client of `uri` (a `mongodb+srv://` one: its hosts' connections go to a proxy port nothing listens on, so they
   * fail at once and ask no system resolver) on `clock`, its serverSelection messages at debug written to `written`.
   */
  function open(uri: string, clock: VirtualClock, written: LogMessage[], write?: (m: LogMessage) => void): Client {
    const proxy = uri.startsWith('mongodb+srv:') ? { proxyHost: '127.0.0.1', proxyPort: refusingPort } : {};
    const sink = { write: (m: LogMessage) => void (written.push(m), write?.(m)) };
    const c = connect(uri, { scheduler: clock, ...proxy, logging: { componentSeverities: { serverSelection: 'debug' }, path: sink } });
    clients.push(c);
    return c;
  }
  let refusingPort: number;
  before(async function () {
    refusingPort = await closedPort();
  });

  /** Records how `promise` settles: `pending` until then, then `resolved`, or the error. */
  function settlement(promise: Promise<unknown>): { readonly value: unknown } {
    const state = { value: 'pending' as unknown };
    promise.then(
      () => (state.value = 'resolved'),
      (e: unknown) => (state.value = e),
    );
    return state;
  }

  it('a mongodb+srv URI still being discovered: the time the waiting message\'s destination takes counts against serverSelectionTimeoutMS too', async function () {
    (await srvResponder()).silent = true;
    const clock = new VirtualClock();
    const written: LogMessage[] = [];
    const sink = { write: (m: LogMessage) => void (written.push(m), m.component === 'serverSelection' && m.fields.message !== 'Server selection failed' && clock.advance(100)) };
    const c = connect('mongodb+srv://test3.test.build.10gen.cc/?serverSelectionTimeoutMS=3000&connectTimeoutMS=20000', { scheduler: clock, logging: { componentSeverities: { serverSelection: 'debug' }, path: sink } });
    clients.push(c);
    const settled = settlement(c.command('admin', { ping: 1 }));
    expect(await eventually(() => names(written).length === 2)).to.equal(true);
    expect(selectionMessages(written)[1].fields).to.include({ message: 'Waiting for suitable server to become available', remainingTimeMS: 2900 });
    // 200 ms of the 3000 went to the two messages.
    clock.advance(2799);
    await tick();
    expect(settled.value, '1 ms before serverSelectionTimeoutMS from the start').to.equal('pending');
    clock.advance(1);
    expect(await eventually(() => settled.value !== 'pending'), 'the command failed serverSelectionTimeoutMS after the start').to.equal(true);
    expect(settled.value).to.be.instanceOf(ServerSelectionError);
    expect(names(written)).to.deep.equal(['Server selection started', 'Waiting for suitable server to become available', 'Server selection failed']);
  });

  it('an operation timeoutMS shorter than serverSelectionTimeoutMS: the waiting message says what is left of it, and the wait fails at it with one end message', async function () {
    const port = await closedPort();
    const clock = new VirtualClock();
    const written: LogMessage[] = [];
    const c = open(`mongodb://127.0.0.1:${port}/?serverSelectionTimeoutMS=10000&connectTimeoutMS=20000`, clock, written);
    const settled = settlement(c.command('admin', { ping: 1 }, { timeoutMS: 2000 }));
    expect(await eventually(() => selectionsWaiting(c) === 1)).to.equal(true);
    expect(selectionMessages(written)[1].fields).to.include({ message: 'Waiting for suitable server to become available', remainingTimeMS: 2000 });
    clock.advance(1999);
    await tick();
    expect(settled.value).to.equal('pending');
    clock.advance(1);
    expect(await eventually(() => settled.value !== 'pending')).to.equal(true);
    expect(settled.value).to.be.instanceOf(ServerSelectionError).and.include({ timeoutMS: 2000 });
    expect(names(written)).to.deep.equal(['Server selection started', 'Waiting for suitable server to become available', 'Server selection failed']);
    expect(selectionMessages(written)[2].fields.failure?.message).to.include("the operation's timeoutMS=2000 ms");
  });

  it('a mongodb+srv URI whose discovery took 1000 ms: one waiting message (all of serverSelectionTimeoutMS left), and the server wait ends serverSelectionTimeoutMS after the start', async function () {
    (await srvResponder()).delayMS = 300;
    const clock = new VirtualClock();
    const written: LogMessage[] = [];
    const c = open('mongodb+srv://test3.test.build.10gen.cc/?serverSelectionTimeoutMS=3000&connectTimeoutMS=20000', clock, written);
    const settled = settlement(c.command('admin', { ping: 1 }));
    expect(await eventually(() => names(written).length === 2)).to.equal(true);
    expect(selectionMessages(written)[1].fields.remainingTimeMS).to.equal(3000);
    // The DNS answers come 300 ms later (real time): meanwhile 1000 virtual ms pass.
    clock.advance(1000);
    expect(await eventually(() => c.pools.size === 1), 'the seedlist discovered').to.equal(true);
    expect(await eventually(() => selectionsWaiting(c) === 1), 'waiting for a ready server').to.equal(true);
    clock.advance(1999);
    await tick();
    expect(settled.value, '1 ms before serverSelectionTimeoutMS from the start').to.equal('pending');
    clock.advance(1);
    expect(await eventually(() => settled.value !== 'pending')).to.equal(true);
    expect(settled.value).to.be.instanceOf(ServerSelectionError);
    expect(names(written)).to.deep.equal(['Server selection started', 'Waiting for suitable server to become available', 'Server selection failed']);
  });

  it('a mongodb+srv URI whose discovery fails: started, waiting, then failed with the SrvResolutionError', async function () {
    await srvResponder();
    const clock = new VirtualClock();
    const written: LogMessage[] = [];
    const c = open('mongodb+srv://test4.test.build.10gen.cc/?serverSelectionTimeoutMS=3000&connectTimeoutMS=20000', clock, written);
    const error = await c.selectPool().catch((e: unknown) => e);
    expect(error).to.be.instanceOf(SrvResolutionError);
    expect(names(written)).to.deep.equal(['Server selection started', 'Waiting for suitable server to become available', 'Server selection failed']);
    expect(selectionMessages(written)[2].fields.failure).to.include({ type: 'SrvResolutionError', message: (error as Error).message });
    expect(selectionMessages(written)[2].fields.operation).to.equal('selectPool');
  });

  it('drain() while a command and selectPool() wait: each logs one end, a failure (the PoolClosedError the command gets at once, not a success naming the server that refuses it; ClientClosedError as the drain closes the client), and log$ completes', async function () {
    const port = await closedPort();
    const clock = new VirtualClock();
    const written: LogMessage[] = [];
    const c = open(`mongodb://127.0.0.1:${port}/?serverSelectionTimeoutMS=10000&connectTimeoutMS=20000`, clock, written);
    let completed = false;
    c.log$.subscribe({ complete: () => (completed = true) });
    const command = c.command('admin', { ping: 1 }).catch((e: unknown) => e);
    const selecting = c.selectPool().catch((e: unknown) => e);
    expect(await eventually(() => selectionsWaiting(c) === 2)).to.equal(true);
    await c.drain();
    expect(await command).to.be.instanceOf(PoolClosedError);
    expect(await selecting).to.be.instanceOf(ClientClosedError);
    const ends = selectionMessages(written).filter((m) => m.fields.message === 'Server selection failed' || m.fields.message === 'Server selection succeeded');
    expect(ends.map((m) => [m.fields.operation, m.fields.message, m.fields.failure?.type])).to.deep.equal([
      ['ping', 'Server selection failed', 'PoolClosedError'],
      ['selectPool', 'Server selection failed', 'ClientClosedError'],
    ]);
    expect(names(written).filter((n) => n === 'Server selection started').length).to.equal(2);
    expect(await eventually(() => completed), 'log$ completes').to.equal(true);
  });

  it('no credential in any selection message, structured or rendered: the URI\'s user and password, proxyUsername and proxyPassword, tlsCertificateKeyFilePassword, through a failure whose cause is the proxy\'s refusal', async function () {
    const secrets = ['dbUser-7f3a', 'Db-Pa55word-7f3a', 'pxUser-7f3a', 'Pr0xy-S3cret-7f3a', 'Key-Pa55phrase-7f3a'];
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rxcmap-selection-log-'));
    const proxy = await startSocks5Proxy({ auth: { username: 'pxUser-7f3a', password: 'another-password' } });
    try {
      const fixtures = path.resolve(__dirname, '../fixtures/tls');
      const pem = fs.readFileSync(path.join(fixtures, 'client.pem'), 'utf8');
      const keyFile = path.join(dir, 'client-encrypted.pem');
      const key = crypto.createPrivateKey(pem).export({ type: 'pkcs8', format: 'pem', cipher: 'aes-256-cbc', passphrase: 'Key-Pa55phrase-7f3a' });
      fs.writeFileSync(keyFile, `${key as string}${new crypto.X509Certificate(pem).toString()}`);
      const port = await closedPort();
      const clock = new VirtualClock();
      const written: LogMessage[] = [];
      const tls = `tls=true&tlsCAFile=${encodeURIComponent(path.join(fixtures, 'ca.pem'))}&tlsCertificateKeyFile=${encodeURIComponent(keyFile)}&tlsCertificateKeyFilePassword=Key-Pa55phrase-7f3a`;
      const uri = `mongodb://dbUser-7f3a:Db-Pa55word-7f3a@127.0.0.1:${port}/?serverSelectionTimeoutMS=3000&proxyPort=${proxy.port}&${tls}`;
      const c2 = connect(uri, {
        scheduler: clock,
        proxyHost: '127.0.0.1',
        proxyUsername: 'pxUser-7f3a',
        proxyPassword: 'Pr0xy-S3cret-7f3a',
        logging: { componentSeverities: { serverSelection: 'debug' }, path: { write: (m: LogMessage) => void written.push(m) } },
      });
      clients.push(c2);
      const failedCheck = new Promise<void>((resolve) => c2.events$.subscribe((e) => e.type === 'ServerHeartbeatFailed' && resolve()));
      await failedCheck;
      expect(proxy.requests.some((r) => r.authenticated === false), 'the proxy refused the credentials').to.equal(true);
      written.length = 0;
      const settled = settlement(c2.command('admin', { ping: 1 }));
      const selecting = settlement(c2.selectPool());
      expect(await eventually(() => selectionsWaiting(c2) === 2)).to.equal(true);
      clock.advance(3000);
      expect(await eventually(() => settled.value !== 'pending' && selecting.value !== 'pending')).to.equal(true);
      expect(settled.value).to.be.instanceOf(ServerSelectionError);
      const messages = selectionMessages(written);
      expect(names(messages)).to.have.length(6);
      expect(messages.at(-1)?.fields.failure?.cause?.message, 'the failure says why the last check failed').to.include('refused the user name and password');
      for (const m of messages) {
        const forms = [JSON.stringify(m.toJSON()), m.render()];
        for (const form of forms) for (const secret of secrets) expect(form, `${m.fields.message}`).not.to.include(secret);
      }
      await c2.close();
    } finally {
      await proxy.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('no credential in the failure of a mongodb+srv URI whose TXT record\'s options cannot be used with the hosts found', async function () {
    const dnsResponder = await srvResponder();
    const target = { target: 'localhost.test.build.10gen.cc', port: 27017 };
    dnsResponder.setZone({ srv: { '_mongodb._tcp.test3.test.build.10gen.cc': [target, { ...target, port: 27018 }] }, txt: { 'test3.test.build.10gen.cc': [['loadBalanced=true']] } });
    const written: LogMessage[] = [];
    const c = open('mongodb+srv://dbUser-7f3a:Db-Pa55word-7f3a@test3.test.build.10gen.cc/?serverSelectionTimeoutMS=3000', new VirtualClock(), written);
    const error = await c.command('admin', { ping: 1 }).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(SrvResolutionError);
    const messages = selectionMessages(written);
    expect(names(messages)).to.deep.equal(['Server selection started', 'Waiting for suitable server to become available', 'Server selection failed']);
    expect(messages[2].fields.failure?.message).to.include('cannot be used');
    for (const m of messages) for (const form of [JSON.stringify(m.toJSON()), m.render()]) for (const secret of ['dbUser-7f3a', 'Db-Pa55word-7f3a']) expect(form).not.to.include(secret);
  });

  it('a server found incompatible while the selection waits: started, waiting, then failed with the IncompatibleServerError', async function () {
    const old = await new EmbeddedServer({ maxWireVersion: 7 }).start();
    try {
      const written: LogMessage[] = [];
      const c = open(`mongodb://${old.address}/?serverSelectionTimeoutMS=10000`, new VirtualClock(), written);
      // Called before the monitor's first check could have answered: the selection waits for it.
      const error = await c.command('admin', { ping: 1 }).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(IncompatibleServerError);
      expect(names(written)).to.deep.equal(['Server selection started', 'Waiting for suitable server to become available', 'Server selection failed']);
      expect(selectionMessages(written)[2].fields.failure).to.include({ type: 'IncompatibleServerError', message: (error as Error).message });
      await c.close();
    } finally {
      await old.stop();
    }
  });

  it('a mongodb+srv URI still being discovered and an operation timeoutMS shorter than serverSelectionTimeoutMS: remainingTimeMS is what is left of timeoutMS, and the DNS wait ends at it', async function () {
    (await srvResponder()).silent = true;
    const clock = new VirtualClock();
    const written: LogMessage[] = [];
    const c = open('mongodb+srv://test3.test.build.10gen.cc/?serverSelectionTimeoutMS=3000&connectTimeoutMS=20000', clock, written);
    const settled = settlement(c.command('admin', { ping: 1 }, { timeoutMS: 1000 }));
    expect(await eventually(() => names(written).length === 2)).to.equal(true);
    expect(selectionMessages(written)[1].fields.remainingTimeMS).to.equal(1000);
    clock.advance(999);
    await tick();
    expect(settled.value).to.equal('pending');
    clock.advance(1);
    expect(await eventually(() => settled.value !== 'pending')).to.equal(true);
    expect(settled.value).to.be.instanceOf(ServerSelectionError).and.include({ timeoutMS: 1000 });
    expect(names(written)).to.deep.equal(['Server selection started', 'Waiting for suitable server to become available', 'Server selection failed']);
    expect(selectionMessages(written)[2].fields.failure?.cause?.type).to.equal('SrvResolutionError');
  });

  it('a command while its client drains, its server ready: "Server selection failed" with the PoolClosedError the command fails with, not "succeeded"', async function () {
    server = await startTestEndpoint();
    const written: LogMessage[] = [];
    const c = open(`mongodb://${server.address}/`, new VirtualClock(), written);
    await c.command('admin', { ping: 1 });
    written.length = 0;
    const drained = c.drain();
    const error = await c.command('admin', { ping: 1 }).catch((e: unknown) => e);
    await drained;
    expect(error).to.be.instanceOf(PoolClosedError);
    expect(names(written)).to.deep.equal(['Server selection started', 'Server selection failed']);
    expect(selectionMessages(written)[1].fields.failure).to.include({ type: 'PoolClosedError', message: (error as Error).message });
  });

  for (const [seedlist, at, takes] of [
    [false, 'Server selection started', 5000],
    [true, 'Server selection started', 5000],
    [false, 'Waiting for suitable server to become available', 5000],
    [true, 'Waiting for suitable server to become available', 5000],
    [false, 'Server selection started', 3000],
    [true, 'Server selection started', 3000],
    [false, 'Waiting for suitable server to become available', 3000],
    [true, 'Waiting for suitable server to become available', 3000],
  ] as const) {
    it(`a destination that takes ${takes === 3000 ? 'exactly' : 'longer than'} serverSelectionTimeoutMS to write "${at}"${seedlist ? ' (a seedlist being discovered)' : ''}: the selection fails at once, without waiting (or a waiting message with no time left)`, async function () {
      let uri = `mongodb://127.0.0.1:${await closedPort()}/?serverSelectionTimeoutMS=3000&connectTimeoutMS=20000`;
      if (seedlist) {
        (await srvResponder()).silent = true;
        uri = 'mongodb+srv://test3.test.build.10gen.cc/?serverSelectionTimeoutMS=3000&connectTimeoutMS=20000';
      }
      const clock = new VirtualClock();
      const written: LogMessage[] = [];
      const c = open(uri, clock, written, (m) => void (m.component === 'serverSelection' && m.fields.message === at && clock.advance(takes)));
      const settled = settlement(c.command('admin', { ping: 1 }));
      // The virtual clock moves no more: a selection that waits would never end.
      expect(await eventually(() => settled.value !== 'pending'), 'the command settled').to.equal(true);
      expect(settled.value).to.be.instanceOf(ServerSelectionError);
      const waited = at === 'Server selection started' ? [] : [at];
      expect(names(written)).to.deep.equal(['Server selection started', ...waited, 'Server selection failed']);
      expect(selectionsWaiting(c)).to.equal(0);
    });
  }

  it('a selection that waits, then finds its server ready: started, one waiting message, succeeded naming it', async function () {
    server = await startTestEndpoint();
    const written: LogMessage[] = [];
    const c = open(`mongodb://${server.address}/?serverSelectionTimeoutMS=10000`, new VirtualClock(), written);
    // Called before the monitor's first check could have answered: the selection waits for it.
    await c.command('admin', { ping: 1 });
    expect(names(written)).to.deep.equal(['Server selection started', 'Waiting for suitable server to become available', 'Server selection succeeded']);
    const address = [...c.pools.keys()][0];
    expect(selectionMessages(written)[2].render()).to.include(`Selected server: ${address}.`);
    const described = JSON.parse(selectionMessages(written)[2].fields.topologyDescription) as { type: string; servers: { address: string; type: string }[] };
    expect(described.servers.map((s) => s.address)).to.deep.equal([address]);
    expect(described.servers[0].type, 'the server it waited for, of a known type now').to.not.equal('Unknown');
    if (!process.env.MONGODB_URI) expect(described).to.deep.equal({ type: 'Single', servers: [{ address, type: 'Standalone' }] });
  });

  it('a signal aborted before the call: nothing is selected, and nothing is logged', async function () {
    const written: LogMessage[] = [];
    const c = open(`mongodb://127.0.0.1:${await closedPort()}/`, new VirtualClock(), written);
    const controller = new AbortController();
    controller.abort();
    expect(await c.command('admin', { ping: 1 }, { signal: controller.signal }).catch((e: unknown) => e)).to.be.instanceOf(CommandCancelledError);
    expect(await c.selectPool({ signal: controller.signal }).catch((e: unknown) => e)).to.be.instanceOf(CommandCancelledError);
    expect(names(written)).to.deep.equal([]);
  });

  describe('the cost while the component logs no message', function () {
    /** Calls of the client's own selection logging, and reads of a command's keys from within server selection. */
    function spies(): { counts: Record<string, number>; restore: () => void } {
      const proto = ClientClass.prototype as unknown as Record<string, (...args: unknown[]) => unknown>;
      const names = ['loggedSelect', 'describe'];
      const counts: Record<string, number> = { loggedSelect: 0, describe: 0, nameReads: 0 };
      const originals = Object.fromEntries(names.map((name) => [name, proto[name]]));
      for (const name of names) {
        proto[name] = function (this: unknown, ...args: unknown[]) {
          counts[name]++;
          return originals[name].apply(this, args);
        };
      }
      return { counts, restore: () => Object.assign(proto, originals) };
    }
    /** A command whose keys are read only by serialization, and counted when server selection reads them. */
    function watched(counts: Record<string, number>): Record<string, unknown> {
      return new Proxy<Record<string, unknown>>({ ping: 1 }, {
        ownKeys(target) {
          if (/\bClient\.(select|loggedSelect)\b/.test(new Error().stack ?? '')) counts.nameReads++;
          return Reflect.ownKeys(target);
        },
      });
    }

    for (const [level, expected] of [
      ['off', { loggedSelect: 0, describe: 0, nameReads: 0, written: 0 }],
      ['info', { describe: 0, nameReads: 0, written: 0 }],
    ] as const) {
      it(`serverSelection at ${level}, a server ready at once: no message is written or built, and the command's name is not read (the other components at debug, counted by the destination)`, async function () {
        server = await startTestEndpoint();
        let written = 0;
        let others = 0;
        const sink = { write: (m: LogMessage) => void (m.component === 'serverSelection' ? written++ : others++) };
        const c = connect(`mongodb://${server.address}/`, { logging: { componentSeverities: { serverSelection: level, default: 'debug' }, path: sink } });
        clients.push(c);
        await c.command('admin', { ping: 1 });
        // At info the first command waited for the monitor's first check: its waiting message.
        written = 0;
        const { counts, restore } = spies();
        try {
          for (let i = 0; i < 5; i++) await c.command('admin', watched(counts));
          await c.selectPool();
        } finally {
          restore();
        }
        expect(others, 'the other components logged').to.be.above(0);
        expect({ ...counts, written }).to.deep.include(expected);
      });
    }
  });

  describe('user code run by a server selection message (the destination, or a log$ subscriber) that calls back into the client', function () {
    type Act = 'command' | 'selectPool' | 'close' | 'drain' | 'abort' | 'throw';
    const ACTS: Act[] = ['command', 'selectPool', 'close', 'drain', 'abort', 'throw'];
    const AT = ['Server selection started', 'Waiting for suitable server to become available', 'Server selection failed', 'Server selection succeeded'] as const;
    let unhandled: unknown[] = [];
    let previous: typeof config.onUnhandledError;
    const warnings: Error[] = [];
    const onWarning = (w: Error): void => void warnings.push(w);
    beforeEach(function () {
      unhandled = [];
      warnings.length = 0;
      previous = config.onUnhandledError;
      config.onUnhandledError = (e: unknown) => void unhandled.push(e);
      process.on('warning', onWarning);
    });
    afterEach(function () {
      config.onUnhandledError = previous;
      process.off('warning', onWarning);
    });

    for (const [site, at, seedlist] of [
      ...(['destination', 'log$'] as const).flatMap((site) => AT.map((at) => [site, at, false] as const)),
      // A mongodb+srv URI whose DNS server never answers: the selection waits for the seedlist.
      ...(['destination', 'log$'] as const).flatMap((site) => AT.slice(0, 3).map((at) => [site, at, true] as const)),
    ]) {
      {
        for (const act of ACTS) {
          it(`${site}, at "${at}"${seedlist ? ' (a seedlist being discovered)' : ''}, ${act}: every operation settles, none is left waiting, each selection logs one start and one end, log$ completes after close()`, async function () {
            const ready = at === 'Server selection succeeded';
            const clock = new VirtualClock();
            let uri: string;
            if (ready) {
              server = await startTestEndpoint();
              uri = `mongodb://${server.address}/?serverSelectionTimeoutMS=3000`;
            } else if (seedlist) {
              (await srvResponder()).silent = true;
              uri = 'mongodb+srv://test3.test.build.10gen.cc/?serverSelectionTimeoutMS=3000&connectTimeoutMS=20000';
            } else {
              uri = `mongodb://127.0.0.1:${await closedPort()}/?serverSelectionTimeoutMS=3000&connectTimeoutMS=20000`;
            }
            const controller = new AbortController();
            const operations: { readonly value: unknown }[] = [];
            let c: Client;
            let armed = false;
            const thrown = new Error('thrown by user code');
            const run = (m: LogMessage): void => {
              if (!armed || m.component !== 'serverSelection' || m.fields.message !== at) return;
              armed = false;
              if (act === 'command') operations.push(settlement(c.command('admin', { ping: 1 })));
              else if (act === 'selectPool') operations.push(settlement(c.selectPool()));
              else if (act === 'close') void c.close();
              else if (act === 'drain') void c.drain();
              else if (act === 'abort') controller.abort();
              else throw thrown;
            };
            const written: LogMessage[] = [];
            c = open(uri, clock, written, site === 'destination' ? run : undefined);
            // Counted from log$: a destination that throws is switched off, and is given nothing more.
            const feed: LogMessage[] = [];
            let completed = false;
            c.log$.subscribe({ next: (m) => void feed.push(m), complete: () => (completed = true) });
            if (site === 'log$') c.log$.subscribe(run);
            if (ready) {
              await c.command('admin', { ping: 1 });
              feed.length = 0;
            }
            armed = true;
            operations.unshift(settlement(c.command('admin', { ping: 1 }, { signal: controller.signal })));
            if ((act === 'close' || act === 'drain' || act === 'abort') && at !== 'Server selection failed') {
              // The virtual clock has not moved: nothing that waits for a server or a timer would end.
              expect(await eventually(() => operations.every((o) => o.value !== 'pending')), 'every operation settled at once').to.equal(true);
            }
            for (let elapsed = 0; elapsed < 8000 && operations.some((o) => o.value === 'pending'); elapsed += 500) {
              await tick();
              await tick();
              clock.advance(500);
            }
            expect(await eventually(() => operations.every((o) => o.value !== 'pending')), 'every operation settled').to.equal(true);
            expect(armed, 'the user code ran').to.equal(false);
            expect(selectionsWaiting(c), 'selections left waiting').to.equal(0);
            const logged = names(feed);
            const count = (name: string): number => logged.filter((n) => n === name).length;
            const starts = count('Server selection started');
            expect(count('Server selection succeeded') + count('Server selection failed'), `one end per start: ${logged.join(', ')}`).to.equal(starts);
            expect(count('Waiting for suitable server to become available'), 'at most one waiting message per selection').to.be.at.most(starts);
            expect(starts, 'each operation begun logged its start').to.be.at.least(1);
            if (act === 'throw') {
              const reported = site === 'log$' ? unhandled : warnings.map((w) => w.message);
              expect(await eventually(() => reported.length > 0), 'the error thrown reached the unhandled-error report, or a warning').to.equal(true);
            } else expect(unhandled).to.deep.equal([]);
            await c.close();
            expect(await eventually(() => completed), 'log$ completed').to.equal(true);
          });
        }
      }
    }
  });
});