/**
 * instrumentConnectionPools: the connection pool metrics of every pool of a client, as the client opens and closes
 * them. The mongodb+srv cases run against the SRV test environment (local DNS responder, mongos endpoints behind a
 * SOCKS5 proxy; rescans on a VirtualClock); the last case against the embedded endpoint, or the server of
 * MONGODB_URI when it is set.
 */
import { expect } from 'chai';
import { diag, DiagLogLevel, type Meter } from '@opentelemetry/api';
import { MeterProvider, MetricReader, type DataPoint } from '@opentelemetry/sdk-metrics';
import { ReplaySubject, Subject } from 'rxjs';
import { connect, ConnectionPool, InvalidOptionError, type Client } from '../../lib';
import { MIN_RESCAN_SRV_INTERVAL_MS } from '../../lib/client/srv-poller';
import { MockConnectionFactory, VirtualClock, type MockConnection } from '../../lib/testing';
import { instrumentConnectionPool, instrumentConnectionPools, type InstrumentedPool } from '../../lib/opentelemetry';
import { eventually, startTestEndpoint, type TestEndpoint } from '../support/endpoint';
import { SrvEnvironment, srvHost, srvRecords, TEST1 } from '../support/srv-environment';

class ManualReader extends MetricReader {
  protected async onShutdown(): Promise<void> {}
  protected async onForceFlush(): Promise<void> {}
}

const POOL_NAME = 'db.client.connection.pool.name';

/** A Meter with a reader collected from by hand, and how many collection callbacks were removed from it. */
function harness() {
  const reader = new ManualReader();
  const meter = new MeterProvider({ readers: [reader] }).getMeter('connection-pools-instrumentation.spec');
  let removed = 0;
  const remove = meter.removeBatchObservableCallback.bind(meter);
  meter.removeBatchObservableCallback = (...args) => {
    removed++;
    remove(...args);
  };
  /** The points of `name` of one collection, each as `pool name[ state]=value`, sorted. */
  const collect = async (name = 'db.client.connection.count'): Promise<string[]> => {
    const { resourceMetrics, errors } = await reader.collect();
    expect(errors).to.deep.equal([]);
    const points = resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).filter((m) => m.descriptor.name === name).flatMap((m) => m.dataPoints as DataPoint<number>[]);
    return points.map((p) => `${String(p.attributes[POOL_NAME])}${p.attributes['db.client.connection.state'] === undefined ? '' : ` ${String(p.attributes['db.client.connection.state'])}`}=${p.value}`).sort();
  };
  return { meter, collect, removals: () => removed };
}

describe('rxcmap/opentelemetry: instrumentConnectionPools', function () {
  this.timeout(10_000);

  describe('a mongodb+srv client', function () {
    const environment = new SrvEnvironment({ srv: { [TEST1]: srvRecords(27017, 27018) } });
    const clients: Client[] = [];
    before(async function () {
      await environment.start();
    });
    afterEach(async function () {
      await Promise.all(clients.splice(0).map((c) => c.close()));
      environment.reset();
    });
    after(async function () {
      await environment.stop();
    });

    function open(clock?: VirtualClock): Client {
      const client = connect(`mongodb+srv://test1.test.build.10gen.cc/?${environment.query}&serverMonitoringMode=poll`, { scheduler: clock });
      clients.push(client);
      return client;
    }

    /** Moves `clock` a rescan's interval and waits for that rescan's answer to be taken. */
    async function rescan(client: Client, clock: VirtualClock): Promise<void> {
      const asked = environment.responder.questions.filter((q) => q.startsWith('SRV')).length;
      clock.advance(MIN_RESCAN_SRV_INTERVAL_MS);
      expect(await eventually(() => environment.responder.questions.filter((q) => q.startsWith('SRV')).length > asked), 'an SRV question').to.equal(true);
      expect(await eventually(() => client['srv']?.poller?.['lookup'] === undefined), 'its answer taken').to.equal(true);
    }

    it('records the pools its seedlist finds after connect() returned, which client.pools does not have yet', async function () {
      const { meter, collect } = harness();
      const client = open();
      // What was the only way: instrument the pools the client has; a mongodb+srv client has none yet.
      const eachPoolNow = [...client.pools.values()].map((pool) => instrumentConnectionPool(pool, { meter }));
      expect(eachPoolNow).to.have.length(0);
      const instrumentation = instrumentConnectionPools(client, { meter, poolNamePrefix: 'orders' });
      expect(instrumentation.instrumentations).to.deep.equal([]);
      expect(await client.command('admin', { ping: 1 })).to.include({ ok: 1 });
      expect(instrumentation.instrumentations.map((i) => i.poolName)).to.deep.equal([`orders/${srvHost(27017)}`, `orders/${srvHost(27018)}`]);
      const counts = await collect();
      // The command's connection is back in its pool: one idle connection in one of the two pools.
      expect(counts.filter((c) => c.endsWith('=1'))).to.have.length(1);
      expect(counts).to.have.length(4);
      for (const port of [27017, 27018]) expect(counts).to.include.oneOf([`orders/${srvHost(port)} used=0`]);
      expect(await collect('db.client.connection.max')).to.deep.equal([`orders/${srvHost(27017)}=100`, `orders/${srvHost(27018)}=100`]);
    });

    it('a client closed by a pools$ subscriber as its seedlist\'s first pool is announced: the subscribers after it are given every pool the client had, as a later one is', async function () {
      const { meter, collect } = harness();
      const client = open();
      const closer = client.pools$.subscribe(() => void client.close());
      const instrumentation = instrumentConnectionPools(client, { meter });
      const given: string[] = [];
      client.pools$.subscribe({ next: (pool) => given.push(pool.address), complete: () => given.push('complete') });
      const events: string[] = [];
      client.events$.subscribe({ next: (e) => events.push(`${e.type} ${e.address}`), complete: () => events.push('complete') });
      await client['discover']().catch(() => undefined);
      expect(closer.closed).to.equal(true);
      const later: string[] = [];
      client.pools$.subscribe({ next: (pool) => later.push(pool.address), complete: () => later.push('complete') });
      expect(later).to.deep.equal([srvHost(27017), srvHost(27018), 'complete']);
      expect(given, 'a subscriber that was there').to.deep.equal(later);
      // Its events$ too, and it completes: the pools are done.
      expect(events).to.deep.equal([`ConnectionPoolCreated ${srvHost(27017)}`, `ConnectionPoolCreated ${srvHost(27018)}`, 'complete']);
      // Each pool closed at once, with no connection: its counts 0.
      expect(await collect()).to.deep.equal([`${srvHost(27017)} idle=0`, `${srvHost(27017)} used=0`, `${srvHost(27018)} idle=0`, `${srvHost(27018)} used=0`]);
      expect(instrumentation.closed).to.equal(true);
    });

    it('records a host SRV polling adds, and stops recording one it removes once its pool is done (its counts 0 first)', async function () {
      const { meter, collect } = harness();
      const clock = new VirtualClock();
      const client = open(clock);
      const instrumentation = instrumentConnectionPools(client, { meter });
      await client['discover']();
      expect(await eventually(() => client['topologyType'] === 'Sharded'), 'a mongos seen').to.equal(true);
      const removed = client.pools.get(srvHost(27018))!;
      expect(await eventually(() => removed.state === 'ready'), 'its monitor saw the mongos').to.equal(true);
      const connection = await removed.checkOut();
      expect(await collect()).to.include(`${srvHost(27018)} used=1`);

      environment.responder.setZone({ srv: { [TEST1]: srvRecords(27017, 27019) } });
      await rescan(client, clock);
      expect(client.hosts).to.deep.equal([srvHost(27017), srvHost(27019)]);
      // The removed pool is closed, its connection still in use: it is recorded until that connection comes back.
      expect(instrumentation.instrumentations.map((i) => i.poolName)).to.deep.equal([srvHost(27017), srvHost(27018), srvHost(27019)]);
      const added = client.pools.get(srvHost(27019))!;
      expect(await eventually(() => added.state === 'ready'), 'its monitor saw the mongos').to.equal(true);
      await added.withConnection((c) => c.command('admin', { ping: 1 }));
      expect(await collect()).to.include.members([`${srvHost(27018)} used=1`, `${srvHost(27019)} idle=1`, `${srvHost(27019)} used=0`]);
      removed.checkIn(connection);
      expect(await eventually(() => instrumentation.instrumentations.length === 2)).to.equal(true);
      expect(instrumentation.instrumentations.map((i) => i.poolName)).to.deep.equal([srvHost(27017), srvHost(27019)]);
      expect(await collect(), 'the removed pool done: its counts 0').to.include.members([`${srvHost(27018)} idle=0`, `${srvHost(27018)} used=0`]);
      expect(instrumentation.closed).to.equal(false);
    });

    it('names a host SRV polling adds again, while its removed pool still has a connection in use, #2; closing the client stops every recording', async function () {
      const { meter, collect, removals } = harness();
      const clock = new VirtualClock();
      const client = open(clock);
      const instrumentation = instrumentConnectionPools(client, { meter });
      await client['discover']();
      const held = client.pools.get(srvHost(27018))!;
      expect(await eventually(() => held.state === 'ready'), 'its monitor saw the mongos').to.equal(true);
      const connection = await held.checkOut();
      environment.responder.setZone({ srv: { [TEST1]: srvRecords(27017) } });
      await rescan(client, clock);
      environment.responder.setZone({ srv: { [TEST1]: srvRecords(27017, 27018) } });
      await rescan(client, clock);
      const again = client.pools.get(srvHost(27018))!;
      expect(again).to.not.equal(held);
      expect(await eventually(() => again.state === 'ready'), 'its monitor saw the mongos').to.equal(true);
      expect(instrumentation.instrumentations.map((i) => i.poolName)).to.deep.equal([srvHost(27017), srvHost(27018), `${srvHost(27018)}#2`]);
      await again.withConnection((c) => c.command('admin', { ping: 1 }));
      // Two series, each pool's own: the old one's connection in use, the new one's idle.
      expect(await collect()).to.include.members([`${srvHost(27018)} used=1`, `${srvHost(27018)}#2 idle=1`, `${srvHost(27018)}#2 used=0`]);
      held.checkIn(connection);

      await client.close();
      expect(await eventually(() => instrumentation.closed), 'every pool done').to.equal(true);
      expect(instrumentation.instrumentations).to.deep.equal([]);
      instrumentation.unsubscribe();
      // Every collection callback removed: nothing of the three pools is measured any more.
      expect(removals()).to.equal(3);
    });
  });

  describe('on virtual time', function () {
    /** A pool on a VirtualClock, with mock connections. */
    const virtualPool = (address: string) =>
      new ConnectionPool<MockConnection>({ address, scheduler: new VirtualClock(), connectionFactory: new MockConnectionFactory({ establishDelayMS: 0 }).factory });

    it('unsubscribe() stops following the client and removes each pool\'s collection callback; a pool that comes later is not recorded', async function () {
      const { meter, collect, removals } = harness();
      const pools$ = new Subject<InstrumentedPool>();
      const instrumentation = instrumentConnectionPools({ pools$ }, { meter, poolNamePrefix: 'p' });
      pools$.next(virtualPool('a:1'));
      pools$.next(virtualPool('b:2'));
      expect((await collect()).length).to.equal(4);
      instrumentation.instrumentations[0].unsubscribe();
      expect(instrumentation.instrumentations.map((i) => i.poolName)).to.deep.equal(['p/b:2']);
      expect((instrumentation as unknown as { recordings: Set<unknown> }).recordings.size, 'a recording whose callback is removed is no longer kept').to.equal(1);
      instrumentation.unsubscribe();
      expect(instrumentation.closed).to.equal(true);
      expect(pools$.observed, 'the client no longer followed').to.equal(false);
      expect(removals()).to.equal(2);
      pools$.next(virtualPool('c:3'));
      expect(removals()).to.equal(2);
      expect(instrumentation.instrumentations).to.deep.equal([]);
      instrumentation.unsubscribe();
      expect(removals(), 'idempotent').to.equal(2);
      // A `using` declaration disposes of it the same way.
      {
        using disposed = instrumentConnectionPools({ pools$ }, { meter });
        pools$.next(virtualPool('d:4'));
        expect(disposed.closed).to.equal(false);
      }
      expect(removals(), 'disposed at the end of its block').to.equal(3);
      expect(pools$.observed).to.equal(false);
    });

    it('is closed once the client\'s pools$ completed and each pool finished, not before', async function () {
      const { meter } = harness();
      const pools$ = new Subject<InstrumentedPool>();
      const instrumentation = instrumentConnectionPools({ pools$ }, { meter });
      expect(instrumentation.closed, 'no pool yet, more to come').to.equal(false);
      const pool = virtualPool('a:1');
      pools$.next(pool);
      pools$.complete();
      expect(instrumentation.closed, 'its pool still open').to.equal(false);
      pool.close();
      expect(instrumentation.closed).to.equal(true);
    });

    it('a Meter that throws for a pool of the client at the start: thrown, nothing followed; for a pool opened later: reported to diag, the others recorded', async function () {
      const { meter, collect } = harness();
      let fail = true;
      const failing: Meter = Object.create(meter, {
        createCounter: {
          value: (...args: Parameters<Meter['createCounter']>) => {
            if (fail) throw new Error('the Meter refused');
            return meter.createCounter(...args);
          },
        },
      });
      const atStart = new ReplaySubject<InstrumentedPool>();
      atStart.next(virtualPool('a:1'));
      expect(() => instrumentConnectionPools({ pools$: atStart }, { meter: failing })).to.throw('the Meter refused');
      expect(atStart.observed, 'nothing followed').to.equal(false);
      expect(await collect()).to.deep.equal([]);

      const pools$ = new Subject<InstrumentedPool>();
      const reported: unknown[][] = [];
      diag.setLogger({ error: (...args: unknown[]) => reported.push(args), warn: () => {}, info: () => {}, debug: () => {}, verbose: () => {} }, DiagLogLevel.ERROR);
      try {
        fail = false;
        const instrumentation = instrumentConnectionPools({ pools$ }, { meter: failing });
        pools$.next(virtualPool('b:2'));
        fail = true;
        pools$.next(virtualPool('c:3'));
        fail = false;
        pools$.next(virtualPool('d:4'));
        expect(instrumentation.instrumentations.map((i) => i.poolName)).to.deep.equal(['b:2', 'd:4']);
        expect(reported.map((args) => args[0])).to.deep.equal(['rxcmap: recording the metrics of pool c:3 failed']);
        expect(await collect()).to.have.length(4);
        instrumentation.unsubscribe();
      } finally {
        diag.disable();
      }
    });

    it('refuses what is not a client, and bad options, naming each', function () {
      const pools$ = new Subject<InstrumentedPool>();
      const refused = (f: () => unknown, option: string, allowed: RegExp) => {
        expect(f).to.throw(InvalidOptionError).with.property('option', option);
        expect(f).to.throw(allowed);
      };
      refused(() => instrumentConnectionPools(null as never), 'client', /a Client \(connect\(\)\)/);
      refused(() => instrumentConnectionPools({ pools$: 1 } as never), 'client', /a Client/);
      refused(() => instrumentConnectionPools(virtualPool('a:1') as never), 'client', /a Client/);
      refused(() => instrumentConnectionPools({ pools$ }, null as never), 'options', /an object \{ meter\?, poolNamePrefix\? \}, or nothing/);
      refused(() => instrumentConnectionPools({ pools$ }, { meter: {} as never }), 'meter', /an OpenTelemetry Meter/);
      refused(() => instrumentConnectionPools({ pools$ }, { poolNamePrefix: '' }), 'poolNamePrefix', /a non-empty string/);
      refused(() => instrumentConnectionPools({ pools$ }, { poolNamePrefix: 5 as never }), 'poolNamePrefix', /a non-empty string/);
      expect(() => instrumentConnectionPools({ pools$ }, { poolName: 'x' } as never)).to.throw(InvalidOptionError, /poolNamePrefix/);
      expect(() => instrumentConnectionPools({ pools$ }, { poolName: 'x' } as never)).to.throw(/instrumentConnectionPools/);
      expect(pools$.observed, 'nothing followed').to.equal(false);
    });
  });

  describe('against the test endpoint', function () {
    let endpoint: TestEndpoint;
    before(async function () {
      endpoint = await startTestEndpoint();
    });
    after(async function () {
      await endpoint.stop();
    });

    it('records the pool of each host of the client, with its counts after a command', async function () {
      const { meter, collect } = harness();
      const client = connect(process.env.MONGODB_URI ?? `mongodb://${endpoint.address}/?directConnection=true`);
      try {
        const instrumentation = instrumentConnectionPools(client, { meter });
        expect(instrumentation.instrumentations.map((i) => i.poolName)).to.deep.equal(client.hosts);
        await client.command('admin', { ping: 1 });
        const counts = await collect();
        expect(counts).to.have.length(2 * client.hosts.length);
        expect(counts.filter((c) => / idle=[1-9]/.test(c)), 'the command\'s connection idle in its pool').to.have.length.at.least(1);
        await client.close();
        expect(await eventually(() => instrumentation.closed)).to.equal(true);
      } finally {
        await client.close();
      }
    });
  });
});
