/**
 * RTT: the minimum of the latest 10 samples (0 until 2), from the monitoring connection's handshake and, while
 * streaming, a dedicated RTT connection's hello every heartbeatFrequencyMS, which publishes no event. Virtual time:
 * the server's handlers move the clock by the round trip each sample must measure.
 */
import { expect } from 'chai';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Document } from 'bson';
import { firstValueFrom, from, map, Subject } from 'rxjs';
import { Monitor, connectionFactory, type ServerHeartbeatEvent } from '../../lib';
import type { Connection } from '../../lib/connection/connection';
import { handshakeSample, RoundTripTimes, RTT_SAMPLE_WINDOW, RttMonitor } from '../../lib/monitor/rtt';
import type { ConnectionFactory } from '../../lib/pool/contract';
import { EmbeddedServer, MockConnection, VirtualClock } from '../../lib/testing';
import { eventually } from '../support/endpoint';
import { startTcpFaultProxy } from '../support/tcp-fault-proxy';

describe('RoundTripTimes', function () {
  it('is 0 until 2 samples, then the min of the latest 10', function () {
    const rtt = new RoundTripTimes();
    expect(RTT_SAMPLE_WINDOW).to.equal(10);
    expect(rtt.min).to.equal(0);
    rtt.add(5);
    expect(rtt.min, 'one sample').to.equal(0);
    rtt.add(8);
    expect(rtt.min).to.equal(5);
    for (let i = 0; i < 8; i++) rtt.add(20 + i);
    expect(rtt.min, '10 samples, 5 among them').to.equal(5);
    rtt.add(30);
    expect(rtt.min, '5 is the 11th latest').to.equal(8);
    rtt.add(40);
    expect(rtt.min).to.equal(20);
    rtt.reset();
    rtt.add(3);
    expect(rtt.min).to.equal(0);
  });

  it('counts a negative or non-finite sample (a clock that went back, or none) as 0', function () {
    for (const bad of [-5, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
      const rtt = new RoundTripTimes();
      rtt.add(bad);
      rtt.add(4);
      expect(rtt.min, String(bad)).to.equal(0);
    }
    const rtt = new RoundTripTimes();
    rtt.add(0);
    rtt.add(4);
    expect(rtt.min, 'a sample of 0 is one').to.equal(0);
  });
});

describe('handshakeSample', function () {
  it('is the handshake hello\'s duration from 0 to the establishment\'s, else the establishment\'s', function () {
    expect(handshakeSample(3, 10)).to.equal(3);
    expect(handshakeSample(0, 10), 'a hello that took no time on the monitor\'s clock (virtual time)').to.equal(0);
    expect(handshakeSample(10, 10), 'the hello was all of it').to.equal(10);
    expect(handshakeSample(10.5, 10)).to.equal(10);
    expect(handshakeSample(-1, 10)).to.equal(10);
    expect(handshakeSample(undefined, 10)).to.equal(10);
  });
});

describe('Monitor: RTT', function () {
  let server: EmbeddedServer;
  let monitor: Monitor | undefined;
  afterEach(async function () {
    monitor?.close();
    monitor = undefined;
    await server.stop();
  });

  it('counts the handshake, then a dedicated connection\'s hello every heartbeatFrequencyMS while streaming, with no event', async function () {
    server = await new EmbeddedServer().start();
    const clock = new VirtualClock();
    /** The round trip each non-awaitable hello or handshake takes, in virtual ms, in order. */
    const delays = [7, 9, 30, 25, 20, 15, 12, 11, 10, 40, 50, 60];
    let answered = 0;
    const reply = (legacy: boolean): Document => {
      clock.advance(delays[answered++]);
      return { ...(legacy ? { ismaster: true } : { isWritablePrimary: true }), helloOk: true, maxWireVersion: 25, topologyVersion: server.topologyVersion, ok: 1 };
    };
    server.handle('ismaster', () => reply(true));
    // An awaitable hello waits on the server (real time): only the RTT connection's hello is answered in this test.
    server.handle('hello', () => reply(false));
    const heartbeats: ServerHeartbeatEvent[] = [];
    monitor = new Monitor({ address: server.address, heartbeatFrequencyMS: 10_000, scheduler: clock });
    monitor.heartbeats$.subscribe((e) => heartbeats.push(e));
    monitor.start();
    expect(await eventually(() => server.awaitingHelloCount === 1)).to.equal(true);
    expect(monitor.minRoundTripTimeMS, 'one sample: the handshake (7)').to.equal(0);
    expect(server.connectionsAccepted, 'no RTT connection before heartbeatFrequencyMS').to.equal(1);
    expect(monitor.connectionCount, 'the streaming connection only').to.equal(server.openConnections).and.to.equal(1);
    const mins: number[] = [];
    for (let round = 1; round < delays.length; round++) {
      clock.advance(10_000);
      expect(await eventually(() => answered === round + 1), `round ${round}`).to.equal(true);
      // The round took its sample once the reply reached it, and then armed the next round (the streaming check
      // waits on the server, on no timer of the clock).
      expect(await eventually(() => clock.actions.length === 1), `round ${round} ended`).to.equal(true);
      mins.push(monitor.minRoundTripTimeMS);
    }
    // Samples 7 (handshake), 9 (the RTT connection's handshake), then 30, 25, 20, 15, 12, 11, 10, 40, 50, 60.
    expect(mins).to.deep.equal([7, 7, 7, 7, 7, 7, 7, 7, 7, 9, 10]);
    expect(server.connectionsAccepted, 'the monitoring connection and one RTT connection').to.equal(2);
    expect(monitor.connectionCount, 'the streaming connection and the RTT connection').to.equal(server.openConnections).and.to.equal(2);
    expect(heartbeats.map((e) => e.type), 'no event for RTT commands').to.deep.equal(['ServerHeartbeatStarted', 'ServerHeartbeatSucceeded', 'ServerHeartbeatStarted']);
    // An RTT connection error publishes nothing and changes no state: the next round opens a new one.
    server.closeConnections((c) => !c.awaitingHello);
    // The next round meets the error (the hello on the closed connection fails), and ends.
    clock.advance(10_000);
    expect(await eventually(() => clock.actions.length === 1 && monitor!.connectionCount === 1), 'the round on the closed connection ended').to.equal(true);
    expect(heartbeats).to.have.length(3);
    expect(monitor.minRoundTripTimeMS).to.equal(10);
    monitor.close();
    expect(monitor.connectionCount, 'closed: none').to.equal(0);
    expect(await eventually(() => server.openConnections === 0)).to.equal(true);
  });

  it('takes a new connection\'s sample, and its check\'s duration, from its handshake hello alone, not the TLS handshake before it (a remote server)', async function () {
    this.timeout(3000);
    const tlsFile = (name: string): string => path.resolve(__dirname, '../fixtures/tls', name);
    server = await new EmbeddedServer({ tls: { key: fs.readFileSync(tlsFile('server.key')), cert: fs.readFileSync(tlsFile('server.crt')) } }).start();
    // A link of 200 ms round trip: a TLS handshake (one round trip or more) and then the hello (one) to establish.
    // (Long, so that a loaded machine's pauses, added to the hello's time, stay well short of the TLS round trip.)
    const proxy = await startTcpFaultProxy(server.address);
    proxy.link.delayMS = { up: 100, down: 100 };
    try {
      monitor = new Monitor({
        address: proxy.address,
        heartbeatFrequencyMS: 500,
        serverMonitoringMode: 'stream',
        connectionOptions: { tls: true, tlsCAFile: tlsFile('ca.pem') },
      });
      const established: number[] = [];
      monitor.heartbeats$.subscribe((e) => {
        if (e.type === 'ServerHeartbeatSucceeded' && !e.awaited) established.push(e.duration);
      });
      monitor.start();
      // Two samples: the monitoring connection's handshake, then the RTT connection's, heartbeatFrequencyMS later.
      expect(await eventually(() => proxy.accepted() === 2 && monitor!.minRoundTripTimeMS > 0, 5000)).to.equal(true);
      expect(established[0], 'the check\'s duration is its handshake hello\'s, as its sample: one round trip, not the TLS handshake before it (400 ms or more)').to.be.within(195, 380);
      expect(monitor.minRoundTripTimeMS, 'one round trip, as the hello took').to.be.within(195, 380);
    } finally {
      monitor?.close();
      monitor = undefined;
      await proxy.stop();
    }
  });

  it('takes the whole establishment as the sample when a connection\'s handshakeDurationMS is not a duration within it', async function () {
    // A connectionFactory of the user's sets it (or leaves it on another clock): a value no hello on the monitor's
    // clock can take is no sample of it.
    server = await new EmbeddedServer().start();
    const [host, port] = server.address.split(':');
    const delays = [7, 9];
    const mins: Record<string, number> = {};
    for (const bogus of [Number.NaN, -5, Number.POSITIVE_INFINITY, 1e9, '3' as unknown as number]) {
      const clock = new VirtualClock();
      let answered = 0;
      const reply = (legacy: boolean): Document => {
        clock.advance(delays[answered++]);
        return { ...(legacy ? { ismaster: true } : { isWritablePrimary: true }), helloOk: true, maxWireVersion: 25, ok: 1 };
      };
      server.handle('ismaster', () => reply(true));
      server.handle('hello', () => reply(false));
      const real = connectionFactory({ host, port: Number(port) });
      monitor = new Monitor({
        address: server.address,
        heartbeatFrequencyMS: 10_000,
        scheduler: clock,
        serverMonitoringMode: 'poll',
        connectionFactory: (descriptor) =>
          from(real(descriptor)).pipe(
            map((c) => {
              c.handshakeDurationMS = bogus;
              return c;
            }),
          ),
      });
      monitor.start();
      // Each check ends with the monitor asleep: its next check armed on the clock, its one timer.
      const asleep = (): Promise<boolean> => eventually(() => clock.actions.length === 1);
      expect(await eventually(() => answered === 1)).to.equal(true);
      expect(await asleep(), 'the first check ended').to.equal(true);
      clock.advance(10_000);
      expect(await eventually(() => answered === 2)).to.equal(true);
      expect(await asleep(), 'the second check ended').to.equal(true);
      // The establishment took 7 (the handshake hello's reply moved the clock), the polling hello 9.
      mins[String(bogus)] = monitor.minRoundTripTimeMS;
      monitor.close();
      monitor = undefined;
    }
    expect(mins).to.deep.equal({ NaN: 7, '-5': 7, Infinity: 7, '1000000000': 7, '3': 7 });
  });
});

/** RoundTripTimes that keeps every sample it is given, in order. */
class RecordedTimes extends RoundTripTimes {
  readonly taken: number[] = [];

  override add(ms: number): void {
    this.taken.push(ms);
    super.add(ms);
  }
}

/** A turn of the event loop: every promise job pending now has run. */
const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('RttMonitor', function () {
  const heartbeatFrequencyMS = 10_000;
  let server: EmbeddedServer | undefined;
  let rtt: RttMonitor | undefined;
  afterEach(async function () {
    rtt?.close();
    rtt = undefined;
    await server?.stop();
    server = undefined;
  });

  /** An RttMonitor on virtual time, its factory `factory` or one of the embedded server's connections. */
  function rttMonitor(o: { factory?: ConnectionFactory<Connection>; connectTimeoutMS?: number } = {}): { clock: VirtualClock; samples: RecordedTimes; rtt: RttMonitor } {
    const clock = new VirtualClock();
    const samples = new RecordedTimes();
    const [host, port] = (server?.address ?? 'db:27017').split(':');
    const factory = o.factory ?? connectionFactory({ host, port: Number(port) });
    rtt = new RttMonitor({ address: `${host}:${port}`, factory, heartbeatFrequencyMS, connectTimeoutMS: o.connectTimeoutMS ?? 10_000, scheduler: clock, samples });
    return { clock, samples, rtt };
  }

  it('gives up on a hello the server never answers after connectTimeoutMS, and measures on a new connection the next round', async function () {
    // A hung server must not stop the RTT task: its round ends, its connection is closed.
    server = await new EmbeddedServer().start();
    const { clock, samples, rtt } = rttMonitor({ connectTimeoutMS: 100 });
    rtt.start();
    clock.advance(heartbeatFrequencyMS);
    expect(await eventually(() => samples.taken.length === 1), 'the RTT connection\'s handshake').to.equal(true);
    server.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['hello', 'isMaster'], blockConnection: true, blockTimeMS: 2000 } });
    clock.advance(heartbeatFrequencyMS);
    expect(await eventually(() => server!.openConnections === 0 && rtt.connectionCount === 0, 1000), 'timed out, closed').to.equal(true);
    clock.advance(heartbeatFrequencyMS);
    expect(await eventually(() => samples.taken.length === 2, 1000), 'the next round\'s sample').to.equal(true);
    expect(server.connectionsAccepted).to.equal(2);
    expect(rtt.connectionCount).to.equal(1);
  });

  it('runs one round every heartbeatFrequencyMS however often start() is called', async function () {
    server = await new EmbeddedServer().start();
    const { clock, samples, rtt } = rttMonitor();
    rtt.start();
    rtt.start();
    for (let round = 1; round <= 2; round++) {
      clock.advance(heartbeatFrequencyMS);
      expect(await eventually(() => samples.taken.length >= round)).to.equal(true);
      expect(await eventually(() => clock.actions.length === 1), 'the next round armed').to.equal(true);
      rtt.start();
    }
    expect(samples.taken, 'one sample a round').to.have.length(2);
    expect(server.connectionsAccepted, 'one RTT connection').to.equal(1);
  });

  it('runs no round and opens no connection once closed, even when closed during a round', async function () {
    server = await new EmbeddedServer().start();
    const { clock, samples, rtt } = rttMonitor();
    rtt.start();
    clock.advance(heartbeatFrequencyMS);
    expect(await eventually(() => samples.taken.length === 1)).to.equal(true);
    clock.advance(heartbeatFrequencyMS);
    rtt.close(); // its hello in flight
    rtt.start();
    // The round in flight ends on its destroyed connection; a round that ran on after it would open a connection.
    for (let i = 0; i < 3; i++) {
      await turn();
      clock.advance(heartbeatFrequencyMS);
    }
    await turn();
    expect(clock.actions, 'no round armed').to.have.length(0);
    expect(rtt.connectionCount, 'none being established').to.equal(0);
    expect(server.connectionsAccepted, 'no connection after close').to.equal(1);
    expect(await eventually(() => server!.openConnections === 0)).to.equal(true);
    expect(samples.taken).to.have.length(1);
    expect(rtt.connectionCount).to.equal(0);
  });

  it('counts its connection while it is established, and none once its establishment or the connection failed', async function () {
    server = await new EmbeddedServer().start();
    const [host, port] = server.address.split(':');
    const real = connectionFactory({ host, port: Number(port) });
    const gates: { open: () => void; fail: () => void }[] = [];
    const factory: ConnectionFactory<Connection> = (d) =>
      new Promise<void>((open, reject) => gates.push({ open, fail: () => reject(new Error('refused')) })).then(() => firstValueFrom(from(real(d))));
    const { clock, samples, rtt } = rttMonitor({ factory });
    rtt.start();
    clock.advance(heartbeatFrequencyMS);
    expect(rtt.connectionCount, 'being established').to.equal(1);
    gates[0].fail();
    await turn();
    expect(rtt.connectionCount, 'its establishment failed').to.equal(0);
    clock.advance(heartbeatFrequencyMS);
    expect(rtt.connectionCount, 'the next round\'s, being established').to.equal(1);
    gates[1].open();
    expect(await eventually(() => samples.taken.length === 1)).to.equal(true);
    expect(rtt.connectionCount).to.equal(1);
    server.closeConnections();
    clock.advance(heartbeatFrequencyMS);
    expect(await eventually(() => rtt.connectionCount === 0), 'its hello failed: the connection is closed').to.equal(true);
    expect(samples.taken, 'the failed round is no sample').to.have.length(1);
  });

  it('destroys a connection, and takes no sample, that arrive in the turn in which it is closed', async function () {
    const arrivals = new Subject<Connection>();
    const { clock, samples, rtt } = rttMonitor({ factory: () => arrivals });
    rtt.start();
    clock.advance(heartbeatFrequencyMS);
    const late = Object.assign(new MockConnection({ id: 1, generation: 0, address: 'db:27017' }), { handshakeDurationMS: 1 });
    arrivals.next(late as unknown as Connection);
    rtt.close();
    await turn();
    expect(late.destroyed, 'established as it closed: destroyed, not kept').to.equal(true);
    expect(samples.taken).to.deep.equal([]);

    // A hello answered as it closes: its sample would come after the monitor's own (a reset after a failed check).
    let answer!: (reply: object) => void;
    const again = rttMonitor({ factory: () => arrivals });
    again.rtt.start();
    again.clock.advance(heartbeatFrequencyMS);
    const connection = Object.assign(new MockConnection({ id: 1, generation: 0, address: 'db:27017' }), {
      handshakeDurationMS: 1,
      server: { helloOk: true },
      command: () => new Promise((resolve) => (answer = resolve)),
    });
    arrivals.next(connection as unknown as Connection);
    await turn();
    expect(again.samples.taken, 'its handshake (no virtual time passed)').to.deep.equal([0]);
    again.clock.advance(heartbeatFrequencyMS);
    answer({ ok: 1 });
    again.rtt.close();
    await turn();
    expect(again.samples.taken, 'no sample once closed').to.deep.equal([0]);
    expect(connection.destroyed).to.equal(true);
  });
});
