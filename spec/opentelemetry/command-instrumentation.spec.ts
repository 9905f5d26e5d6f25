/**
 * instrumentCommands: `db.client.operation.duration` recorded from a pool's or client's command events, with the
 * OpenTelemetry conventions' attributes for MongoDB, through a real SDK MeterProvider read by hand; against the
 * embedded endpoint, or the server of MONGODB_URI when it is set (the fail points need its test commands).
 */
import { expect } from 'chai';
import { diag, ValueType, type Meter } from '@opentelemetry/api';
import { DataPointType, MeterProvider, MetricReader, type DataPoint, type Histogram, type MetricData } from '@opentelemetry/sdk-metrics';
import { ConnectionPool, connect, type CommandEvent } from '../../lib';
import { diagMessages } from '../support/diag-messages';
import { refusedOption } from '../support/refused-option';
import { setFailPoint, startTestEndpoint, stopTestEndpoint, type TestEndpoint } from '../support/endpoint';
import { instrumentCommands } from '../../lib/opentelemetry';

/** A reader collected from by hand. */
class ManualReader extends MetricReader {
  protected async onShutdown(): Promise<void> {}
  protected async onForceFlush(): Promise<void> {}
}

/** A Meter of a fresh SDK MeterProvider, and what one collection of `db.client.operation.duration` holds. */
function harness(): { meter: Meter; collect: () => Promise<MetricData | undefined> } {
  const reader = new ManualReader();
  const provider = new MeterProvider({ readers: [reader] });
  const meter = provider.getMeter('command-instrumentation.spec');
  const collect = async (): Promise<MetricData | undefined> => {
    const { resourceMetrics, errors } = await reader.collect();
    expect(errors).to.deep.equal([]);
    return resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).find((m) => m.descriptor.name === 'db.client.operation.duration');
  };
  return { meter, collect };
}

describe('instrumentCommands (OpenTelemetry db.client.operation.duration)', function () {
  let server: TestEndpoint;
  before(async function () {
    server = await startTestEndpoint();
  });
  after(async function () {
    await stopTestEndpoint(server);
  });
  /** A pool on the endpoint, with the connection options its server needs. */
  const newPool = (): ConnectionPool => new ConnectionPool({ address: server.address, connectionOptions: server.connectionOptions });

  it('records each command\'s duration in seconds with the MongoDB attributes; a failure with error.type and db.response.status_code', async function () {
    const { meter, collect } = harness();
    await setFailPoint(this, server, { mode: 'off' });
    const pool = newPool();
    const events: CommandEvent[] = [];
    pool.commandEvents$.subscribe((e) => events.push(e));
    const instrumentation = instrumentCommands(pool, { meter });
    pool.ready();
    const [host, port] = server.address.split(':') as [string, string];
    try {
      await pool.withConnection(async (c) => {
        await c.command('shop', { find: 'orders', filter: {} });
        await c.command('shop', { find: 'orders', filter: {} });
        await c.command('admin', { ping: 1 });
        await c.command('admin', { updateUser: 'nobody-rxcmap-test', pwd: 'pw' }).catch(() => undefined);
        await c.command('admin', { configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['insert'], errorCode: 11000 } });
        await c.command('shop', { insert: 'orders', documents: [{ a: 1 }] }).catch(() => undefined);
        await c.command('admin', { configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['update'], closeConnection: true } });
        await c.command('shop', { update: 'orders', updates: [] }).catch(() => undefined);
      });
    } finally {
      pool.close();
    }
    const metric = (await collect())!;
    expect(metric.descriptor).to.deep.include({ name: 'db.client.operation.duration', unit: 's', valueType: ValueType.DOUBLE });
    expect(metric.dataPointType).to.equal(DataPointType.HISTOGRAM);
    const points = metric.dataPoints as DataPoint<Histogram>[];
    const server$ = { 'server.address': host, 'server.port': Number(port) };
    const find = points.find((p) => p.attributes['db.operation.name'] === 'find')!;
    expect(find.attributes).to.deep.equal({ 'db.system.name': 'mongodb', 'db.operation.name': 'find', 'db.namespace': 'shop', 'db.collection.name': 'orders', ...server$ });
    expect(find.value.count).to.equal(2);
    expect(find.value.buckets.boundaries).to.deep.equal([0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10]);
    const ping = points.find((p) => p.attributes['db.operation.name'] === 'ping')!;
    expect(ping.attributes).to.not.have.property('db.collection.name');
    // A sensitive command's document is not published: no collection is read from it.
    const updateUser = points.find((p) => p.attributes['db.operation.name'] === 'updateUser')!;
    expect(updateUser.attributes).to.not.have.property('db.collection.name');
    // A command on admin names no collection: configureFailPoint's first value is a fail point.
    const failPoint = points.find((p) => p.attributes['db.operation.name'] === 'configureFailPoint')!;
    expect(failPoint.attributes).to.not.have.property('db.collection.name');
    const insert = points.find((p) => p.attributes['db.operation.name'] === 'insert')!;
    expect(insert.attributes).to.deep.include({ 'db.collection.name': 'orders', 'error.type': '11000', 'db.response.status_code': '11000' });
    const update = points.find((p) => p.attributes['db.operation.name'] === 'update')!;
    expect(update.attributes).to.deep.include({ 'db.collection.name': 'orders', 'error.type': 'MongoNetworkError' });
    expect(update.attributes).to.not.have.property('db.response.status_code');
    // The recorded seconds are the events' ms: the sums agree.
    const ended = events.filter((e) => e.type !== 'CommandStarted') as { duration: number }[];
    const recorded = points.reduce((sum, p) => sum + p.value.sum!, 0);
    expect(recorded).to.be.closeTo(ended.reduce((sum, e) => sum + e.duration, 0) / 1000, 1e-9);
    expect(points.reduce((n, p) => n + p.value.count, 0)).to.equal(ended.length);
    instrumentation.unsubscribe();
  });

  it('a client\'s commands are recorded too; unsubscribe (or dispose) stops recording, and the events are no longer built for it', async function () {
    const { meter, collect } = harness();
    const client = connect(process.env.MONGODB_URI ?? `mongodb://${server.address}/?directConnection=true`);
    try {
      const instrumentation = instrumentCommands(client, { meter });
      await client.command('admin', { ping: 1 });
      expect(instrumentation.closed).to.equal(false);
      instrumentation[Symbol.dispose]();
      expect(instrumentation.closed).to.equal(true);
      await client.command('admin', { ping: 1 });
      const points = (await collect())!.dataPoints as DataPoint<Histogram>[];
      expect(points.map((p) => [p.attributes['db.operation.name'], p.value.count])).to.deep.equal([['ping', 1]]);
    } finally {
      await client.close();
    }
  });

  it('an instrument that throws is reported to diag, never to the command', async function () {
    const logged = diagMessages('error');
    const meter = { createHistogram: () => ({ record: () => { throw new Error('exporter down'); } }) } as unknown as Meter;
    const pool = newPool();
    pool.ready();
    try {
      const instrumentation = instrumentCommands(pool, { meter });
      const reply = await pool.withConnection((c) => c.command('admin', { ping: 1 }));
      expect(reply.ok).to.equal(1);
      expect(logged).to.deep.equal(['rxcmap: recording CommandSucceeded of ping failed']);
      instrumentation.unsubscribe();
    } finally {
      pool.close();
      diag.disable();
    }
  });

  it('refuses a source without commandEvents$, options that are not an object, a misspelt key and a meter that is not one, naming each', function () {
    const pool = newPool();
    try {
      expect(refusedOption(() => instrumentCommands({} as never))).to.equal('source');
      expect(refusedOption(() => instrumentCommands(null as never))).to.equal('source');
      expect(refusedOption(() => instrumentCommands(pool, null as never))).to.equal('options');
      expect(refusedOption(() => instrumentCommands(pool, { metre: {} } as never))).to.equal('metre');
      expect(refusedOption(() => instrumentCommands(pool, { meter: {} as Meter }))).to.equal('meter');
      const instrumentation = instrumentCommands(pool);
      expect(instrumentation.closed).to.equal(false);
      instrumentation.unsubscribe();
    } finally {
      pool.close();
    }
  });
});
