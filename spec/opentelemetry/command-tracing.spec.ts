/**
 * traceCommands: a span per command from a pool's or client's command events, as the MongoDB OpenTelemetry spec's
 * "Instrumenting Server Commands" says, through a real SDK TracerProvider and an in-memory exporter; against the
 * embedded endpoint, or the server of MONGODB_URI when it is set (the fail points need its test commands), and on
 * command events made by hand for what one server cannot show (cursor ids, sessions, a Unix domain socket).
 */
import { expect } from 'chai';
import { context, diag, SpanKind, SpanStatusCode, trace, type Tracer } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { Binary, Long, UUID } from 'bson';
import { config, Subject } from 'rxjs';
import { ConnectionPool, MongoServerError, connect, type CommandEvent } from '../../lib';
import { refusedOption } from '../support/refused-option';
import { diagMessages } from '../support/diag-messages';
import { freshCopy } from '../support/fresh-copy';
import { setFailPoint, startTestEndpoint, stopTestEndpoint, type TestEndpoint } from '../support/endpoint';
import { QUERY_TEXT_MAX_LENGTH_ENV, traceCommands } from '../../lib/opentelemetry';
import { DRIVER_INFO } from '../../lib/version';

/** A Tracer of a fresh SDK TracerProvider, and the spans it has finished. */
function harness(): { tracer: Tracer; finished: () => ReadableSpan[] } {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  return { tracer: provider.getTracer('command-tracing.spec'), finished: () => exporter.getFinishedSpans() };
}

/**
 * Collects the errors reported to OpenTelemetry's diag logger and to RxJS's `config.onUnhandledError` (where RxJS
 * sends what a subscriber throws), until `restore()`.
 */
function collectReports(): { logged: string[]; unhandled: unknown[]; restore: () => void } {
  const unhandled: unknown[] = [];
  const saved = config.onUnhandledError;
  config.onUnhandledError = (e) => void unhandled.push(e);
  const logged = diagMessages('error');
  return {
    logged,
    unhandled,
    restore: () => {
      config.onUnhandledError = saved;
      diag.disable();
    },
  };
}

/** The fields every hand-made event carries, for request `requestId` on `address`. */
const fields = (requestId: number, commandName: string, address = 'db.example.com:27017') => ({
  address,
  time: 0,
  connectionId: 7,
  serverConnectionId: 40,
  requestId,
  databaseName: 'shop',
  commandName,
});

/** A copy of bson of its own, as another package's (or an ES module's) would be: its classes are not this one's. */
function otherBson(): typeof import('bson') {
  return freshCopy<typeof import('bson')>(require.resolve('bson'));
}

describe('traceCommands (MongoDB OpenTelemetry spec, "Instrumenting Server Commands")', function () {
  let server: TestEndpoint;
  let contextManager: AsyncLocalStorageContextManager;
  before(async function () {
    server = await startTestEndpoint();
    contextManager = new AsyncLocalStorageContextManager().enable();
    context.setGlobalContextManager(contextManager);
  });
  after(async function () {
    context.disable();
    await stopTestEndpoint(server);
  });
  /** A pool on the endpoint, with the connection options its server needs. */
  const newPool = (): ConnectionPool => new ConnectionPool({ address: server.address, connectionOptions: server.connectionOptions });

  it('one CLIENT span per command, named after it, under the span active where it was called, with the spec\'s attributes; none for a sensitive command', async function () {
    const { tracer, finished } = harness();
    await setFailPoint(this, server, { mode: 'off' });
    const pool = newPool();
    const tracing = traceCommands(pool, { tracer });
    pool.ready();
    const [host, port] = server.address.split(':') as [string, string];
    const operation = tracer.startSpan('operation');
    try {
      await context.with(trace.setSpan(context.active(), operation), () =>
        pool.withConnection(async (c) => {
          await c.command('shop', { find: 'orders', filter: { sku: 'a-1' } });
          await c.command('admin', { ping: 1 });
          await c.command('admin', { updateUser: 'nobody-rxcmap-test', pwd: 'secret-pw' }).catch(() => undefined);
        }),
      );
    } finally {
      operation.end();
      pool.close();
      tracing.unsubscribe();
    }
    const spans = finished().filter((s) => s.name !== 'operation');
    expect(spans.map((s) => s.name)).to.deep.equal(['find', 'ping']);
    const [find, ping] = spans as [ReadableSpan, ReadableSpan];
    for (const span of spans) {
      expect(span.kind).to.equal(SpanKind.CLIENT);
      expect(span.parentSpanContext?.spanId).to.equal(operation.spanContext().spanId);
      expect(span.spanContext().traceId).to.equal(operation.spanContext().traceId);
      expect(span.status.code).to.equal(SpanStatusCode.UNSET);
      expect(span.instrumentationScope.name).to.equal('command-tracing.spec');
    }
    const connectionIds = { 'db.mongodb.driver_connection_id': find.attributes['db.mongodb.driver_connection_id'] };
    expect(connectionIds['db.mongodb.driver_connection_id']).to.be.a('number');
    const serverConnectionId = find.attributes['db.mongodb.server_connection_id'];
    expect(serverConnectionId, 'the server\'s hello gives its connection id').to.be.a('number');
    const common = { 'db.system.name': 'mongodb', 'server.address': host, 'server.port': Number(port), 'network.transport': 'tcp', ...connectionIds, 'db.mongodb.server_connection_id': serverConnectionId };
    expect(find.attributes).to.deep.equal({ ...common, 'db.command.name': 'find', 'db.namespace': 'shop', 'db.collection.name': 'orders', 'db.query.summary': 'find shop.orders' });
    expect(ping.attributes).to.deep.equal({ ...common, 'db.command.name': 'ping', 'db.namespace': 'admin', 'db.query.summary': 'ping admin' });
    // Nothing of the command's values without queryTextMaxLength, and nothing of the sensitive one anywhere.
    expect(JSON.stringify(finished().map((s) => s.attributes))).to.not.match(/a-1|secret-pw|nobody/);
  });

  it('a failed command: status ERROR with its message, the exception recorded, error.type and db.response.status_code as the metric has them', async function () {
    const { tracer, finished } = harness();
    await setFailPoint(this, server, { mode: 'off' });
    const pool = newPool();
    const tracing = traceCommands(pool, { tracer });
    pool.ready();
    const failures: Error[] = [];
    try {
      await pool.withConnection(async (c) => {
        await c.command('admin', { configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['insert'], errorCode: 11000 } });
        await c.command('shop', { insert: 'orders', documents: [{ a: 1 }] }).catch((e: Error) => void failures.push(e));
        await c.command('admin', { configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['update'], closeConnection: true } });
        await c.command('shop', { update: 'orders', updates: [] }).catch((e: Error) => void failures.push(e));
      });
    } finally {
      pool.close();
      tracing.unsubscribe();
    }
    const [insertError, updateError] = failures as [Error, Error];
    expect(insertError).to.be.instanceOf(MongoServerError);
    const byName = new Map(finished().map((s) => [s.name, s]));
    const insert = byName.get('insert')!;
    expect(insert.status).to.deep.equal({ code: SpanStatusCode.ERROR, message: insertError.message });
    expect(insert.attributes).to.deep.include({ 'db.collection.name': 'orders', 'error.type': '11000', 'db.response.status_code': '11000' });
    expect(insert.events.map((e) => [e.name, e.attributes?.['exception.type'], e.attributes?.['exception.message']])).to.deep.equal([['exception', insertError.name, insertError.message]]);
    expect(insert.events[0]!.attributes?.['exception.stacktrace']).to.be.a('string');
    const update = byName.get('update')!;
    expect(update.status).to.deep.equal({ code: SpanStatusCode.ERROR, message: updateError.message });
    expect(update.attributes).to.deep.include({ 'error.type': 'MongoNetworkError' });
    expect(update.attributes).to.not.have.property('db.response.status_code');
    // The admin command names no collection: its first value is a fail point.
    expect(byName.get('configureFailPoint')!.attributes).to.not.have.property('db.collection.name');
  });

  it('a server error\'s message of 16 MB is cut to 4096 code units (and ...) in the status and the exception\'s message, its stack to 16384 with its frames kept; never inside a surrogate pair', function () {
    const { tracer, finished } = harness();
    const events = new Subject<CommandEvent>();
    const tracing = traceCommands({ commandEvents$: events }, { tracer });
    const huge = 'x'.repeat(16 * 1024 * 1024);
    // A surrogate pair across the cut: code units 4095 and 4096.
    const emoji = `${'y'.repeat(4095)}\u{1F600}${'z'.repeat(10)}`;
    const failures = [new MongoServerError({ ok: 0, code: 2, errmsg: huge }), new MongoServerError({ ok: 0, code: 2, errmsg: emoji }), new MongoServerError({ ok: 0, code: 2, errmsg: 'short' })];
    failures.forEach((failure, i) => {
      events.next({ type: 'CommandStarted', ...fields(i, 'insert'), command: { insert: 'a', $db: 'shop' } });
      events.next({ type: 'CommandFailed', ...fields(i, 'insert'), duration: 1, failure });
    });
    tracing.unsubscribe();
    const [big, pair, short] = finished() as [ReadableSpan, ReadableSpan, ReadableSpan];
    const texts = (span: ReadableSpan) => ({ status: span.status.message!, message: span.events[0]!.attributes!['exception.message'] as string, stack: span.events[0]!.attributes!['exception.stacktrace'] as string });
    // Lengths and ends, not the texts: a failure would print 16 MB.
    const shape = (text: string) => [text.length, text.slice(-5)];
    const cut = `${'x'.repeat(4096)}...`;
    const { status, message, stack } = texts(big);
    expect([shape(status), shape(message), status === cut && message === cut]).to.deep.equal([[4099, 'xx...'], [4099, 'xx...'], true]);
    expect(stack.length).to.be.at.most(16384 + 3);
    expect(stack.startsWith(`MongoServerError: ${cut}\n    at `), 'the message cut in the stack, its frames after it').to.equal(true);
    expect([texts(pair).status, texts(pair).message].map(shape)).to.deep.equal([[4098, 'yy...'], [4098, 'yy...']]);
    expect(texts(short)).to.deep.equal({ status: 'short', message: 'short', stack: failures[2]!.stack });
  });

  it('a command named \'\' (a runCommand with an empty first key) gets a span named mongodb, db.system.name, as the semantic conventions name a span with no operation name; db.command.name is still \'\'', function () {
    const { tracer, finished } = harness();
    const events = new Subject<CommandEvent>();
    const tracing = traceCommands({ commandEvents$: events }, { tracer });
    events.next({ type: 'CommandStarted', ...fields(1, ''), command: { '': 1, $db: 'shop' } });
    events.next({ type: 'CommandFailed', ...fields(1, ''), duration: 1, failure: new MongoServerError({ ok: 0, code: 59, codeName: 'CommandNotFound', errmsg: "no such command: ''" }) });
    tracing.unsubscribe();
    const [span] = finished() as [ReadableSpan];
    expect([span.name, span.attributes['db.command.name'], span.attributes['error.type']]).to.deep.equal(['mongodb', '', '59']);
  });

  it('db.query.text only when asked: relaxed Extended JSON without lsid, $db, $clusterTime and signature, cut at queryTextMaxLength; the environment variable sets the default (a bad value warned of on diag and ignored)', function () {
    const lsid = { id: new Binary(new UUID('0b4c6c1e-5d3f-4a7e-9c1b-2f0a8e6d4c3b').buffer, Binary.SUBTYPE_UUID) };
    const command = { find: 'orders', filter: { n: Long.fromNumber(5) }, lsid, $clusterTime: { clusterTime: 1 }, signature: 'x', $db: 'shop' };
    const texts = (options: Parameters<typeof traceCommands>[1]): unknown[] => {
      const { tracer, finished } = harness();
      const events = new Subject<CommandEvent>();
      const tracing = traceCommands({ commandEvents$: events }, { tracer, ...options });
      events.next({ type: 'CommandStarted', ...fields(1, 'find'), command });
      events.next({ type: 'CommandSucceeded', ...fields(1, 'find'), duration: 1, reply: { ok: 1 } });
      tracing.unsubscribe();
      return finished().map((s) => s.attributes['db.query.text']);
    };
    const saved = process.env[QUERY_TEXT_MAX_LENGTH_ENV];
    try {
      delete process.env[QUERY_TEXT_MAX_LENGTH_ENV];
      expect(texts({})).to.deep.equal([undefined]);
      expect(texts({ queryTextMaxLength: 0 })).to.deep.equal([undefined]);
      expect(texts({ queryTextMaxLength: 1000 })).to.deep.equal(['{"find":"orders","filter":{"n":5}}']);
      expect(texts({ queryTextMaxLength: 10 })).to.deep.equal(['{"find":"o...']);
      process.env[QUERY_TEXT_MAX_LENGTH_ENV] = '17';
      expect(texts({})).to.deep.equal(['{"find":"orders",...']);
      // The option wins over the environment.
      expect(texts({ queryTextMaxLength: 0 })).to.deep.equal([undefined]);
      // Surrounding blanks are no error (a value written in a YAML block, say).
      process.env[QUERY_TEXT_MAX_LENGTH_ENV] = ' 17\n';
      expect(texts({})).to.deep.equal(['{"find":"orders",...']);
      // A bad value is warned of on diag and ignored (the default, no text), as OpenTelemetry SDKs treat theirs: a
      // deployment's environment must not stop the application from starting.
      const warned = diagMessages('warn');
      try {
        for (const bad of ['-1', '1.5', 'ten', '0x10', '2147483648']) {
          process.env[QUERY_TEXT_MAX_LENGTH_ENV] = bad;
          expect(texts({}), bad).to.deep.equal([undefined]);
          // The option given, the variable is not read.
          expect(texts({ queryTextMaxLength: 10 }), bad).to.deep.equal(['{"find":"o...']);
        }
      } finally {
        diag.disable();
      }
      expect(warned).to.deep.equal(['-1', '1.5', 'ten', '0x10', '2147483648'].map((bad) => `rxcmap: ignoring ${QUERY_TEXT_MAX_LENGTH_ENV}=${JSON.stringify(bad)}: not an integer from 0 to 2147483647; db.query.text is left out`));
      for (const blank of ['', ' ']) {
        process.env[QUERY_TEXT_MAX_LENGTH_ENV] = blank;
        expect(texts({})).to.deep.equal([undefined]);
      }
    } finally {
      if (saved === undefined) delete process.env[QUERY_TEXT_MAX_LENGTH_ENV];
      else process.env[QUERY_TEXT_MAX_LENGTH_ENV] = saved;
    }
  });

  it('the session, transaction and cursor ids: lsid as a UUID string, txnNumber, a getMore\'s cursor and the cursor a reply opens (a string past 2^53 - 1); a Unix domain socket is transport unix; each span lasts its command\'s duration', function () {
    const { tracer, finished } = harness();
    const events = new Subject<CommandEvent>();
    const tracing = traceCommands({ commandEvents$: events }, { tracer });
    const uuid = '0b4c6c1e-5d3f-4a7e-9c1b-2f0a8e6d4c3b';
    const lsid = { id: new Binary(new UUID(uuid).buffer, Binary.SUBTYPE_UUID) };
    const big = Long.fromString('9007199254740993');
    events.next({ type: 'CommandStarted', ...fields(1, 'find'), command: { find: 'orders', lsid, txnNumber: Long.fromNumber(3), $db: 'shop' } });
    events.next({ type: 'CommandSucceeded', ...fields(1, 'find'), duration: 1, reply: { ok: 1, cursor: { id: big, firstBatch: [] } } });
    events.next({ type: 'CommandStarted', ...fields(2, 'getMore'), command: { getMore: Long.fromNumber(12), collection: 'orders', $db: 'shop' } });
    events.next({ type: 'CommandSucceeded', ...fields(2, 'getMore'), duration: 2.5, reply: { ok: 1, cursor: { id: 0, nextBatch: [] } } });
    events.next({ type: 'CommandStarted', ...fields(3, 'aggregate', '/tmp/mongodb-27017.sock'), command: { aggregate: 1, pipeline: [], $db: 'shop' } });
    events.next({ type: 'CommandSucceeded', ...fields(3, 'aggregate', '/tmp/mongodb-27017.sock'), duration: 1, reply: { ok: 1, cursor: { id: 0, firstBatch: [] } } });
    tracing.unsubscribe();
    const [find, getMore, aggregate] = finished() as [ReadableSpan, ReadableSpan, ReadableSpan];
    expect(find.attributes).to.deep.include({ 'db.mongodb.lsid': uuid, 'db.mongodb.txn_number': 3, 'db.mongodb.cursor_id': '9007199254740993' });
    // Each span lasts its command's duration (ms in the events, [s, ns] in the span).
    const ms = ([seconds, nanos]: [number, number]): number => seconds * 1e3 + nanos / 1e6;
    expect(ms(find.duration)).to.be.closeTo(1, 1e-3);
    expect(ms(getMore.duration)).to.be.closeTo(2.5, 1e-3);
    expect(getMore.attributes).to.deep.include({ 'db.collection.name': 'orders', 'db.query.summary': 'getMore shop.orders', 'db.mongodb.cursor_id': 12 });
    expect(aggregate.attributes).to.deep.include({ 'server.address': '/tmp/mongodb-27017.sock', 'network.transport': 'unix', 'db.query.summary': 'aggregate shop' });
    expect(aggregate.attributes).to.not.have.any.keys('server.port', 'db.mongodb.cursor_id', 'db.collection.name', 'db.mongodb.lsid');
  });

  it('a killCursors of one cursor has it as db.mongodb.cursor_id (a string past 2^53 - 1), so the span of a cursor closed early is found by its id; one of several cursors has none (the attribute holds one)', function () {
    const { tracer, finished } = harness();
    const events = new Subject<CommandEvent>();
    const tracing = traceCommands({ commandEvents$: events }, { tracer });
    const commands = [
      { killCursors: 'orders', cursors: [Long.fromString('5476541286716842819')], $db: 'shop' },
      { killCursors: 'orders', cursors: [Long.fromNumber(12)], $db: 'shop' },
      { killCursors: 'orders', cursors: [Long.fromNumber(12), Long.fromNumber(13)], $db: 'shop' },
      { killCursors: 'orders', cursors: [], $db: 'shop' },
    ];
    commands.forEach((command, i) => {
      events.next({ type: 'CommandStarted', ...fields(i, 'killCursors'), command });
      events.next({ type: 'CommandSucceeded', ...fields(i, 'killCursors'), duration: 1, reply: { ok: 1, cursorsKilled: command.cursors } });
    });
    tracing.unsubscribe();
    expect(finished().map((s) => s.attributes['db.mongodb.cursor_id'])).to.deep.equal(['5476541286716842819', 12, undefined, undefined]);
    expect(finished()[0]!.attributes['db.collection.name']).to.equal('orders');
  });

  it('unsubscribe: no span starts, one open ends with its command, then the events are no longer built for it; the source\'s end ends any open; a Tracer that throws is reported to diag, never to the command', async function () {
    const { tracer, finished } = harness();
    const events = new Subject<CommandEvent>();
    const tracing = traceCommands({ commandEvents$: events }, { tracer });
    events.next({ type: 'CommandStarted', ...fields(1, 'find'), command: { find: 'a', $db: 'shop' } });
    tracing[Symbol.dispose]();
    expect([tracing.closed, events.observed]).to.deep.equal([false, true]);
    events.next({ type: 'CommandStarted', ...fields(2, 'find'), command: { find: 'b', $db: 'shop' } });
    events.next({ type: 'CommandSucceeded', ...fields(2, 'find'), duration: 1, reply: { ok: 1 } });
    events.next({ type: 'CommandSucceeded', ...fields(1, 'find'), duration: 1, reply: { ok: 1 } });
    expect([tracing.closed, events.observed]).to.deep.equal([true, false]);
    expect(finished().map((s) => s.attributes['db.collection.name'])).to.deep.equal(['a']);
    // A source that completes with a span open (none does while its commands settle first) ends it.
    const ending = new Subject<CommandEvent>();
    const ended = traceCommands({ commandEvents$: ending }, { tracer });
    ending.next({ type: 'CommandStarted', ...fields(3, 'find'), command: { find: 'c', $db: 'shop' } });
    ending.complete();
    expect(ended.closed).to.equal(true);
    expect(finished().map((s) => s.attributes['db.collection.name'])).to.deep.equal(['a', 'c']);

    const logged = diagMessages('error');
    const pool = newPool();
    pool.ready();
    try {
      const throwing = traceCommands(pool, { tracer: { startSpan: () => { throw new Error('exporter down'); } } as unknown as Tracer });
      const reply = await pool.withConnection((c) => c.command('admin', { ping: 1 }));
      expect(reply.ok).to.equal(1);
      expect(logged).to.deep.equal(['rxcmap: tracing CommandStarted of ping failed']);
      throwing.unsubscribe();
      expect(throwing.closed).to.equal(true);
    } finally {
      pool.close();
      diag.disable();
    }
  });

  it('a client\'s commands are traced too; its close ends tracing', async function () {
    const { tracer, finished } = harness();
    const client = connect(process.env.MONGODB_URI ?? `mongodb://${server.address}/?directConnection=true`);
    const tracing = traceCommands(client, { tracer });
    try {
      await client.command('admin', { ping: 1 });
    } finally {
      await client.close();
    }
    expect(finished().map((s) => [s.name, s.attributes['db.namespace']])).to.deep.equal([['ping', 'admin']]);
    expect(tracing.closed).to.equal(true);
  });

  it('a span that throws when the source ends (its end, a span open) is reported to diag and the other open spans still end: never thrown out of the subscriber', async function () {
    const { tracer, finished } = harness();
    let first = true;
    const failing = {
      startSpan: (...args: Parameters<Tracer['startSpan']>) => {
        const span = tracer.startSpan(...args);
        if (!first) return span;
        first = false;
        return Object.assign(Object.create(span) as object, { end: () => { throw new Error('exporter down'); } });
      },
    } as unknown as Tracer;
    const { logged, unhandled, restore } = collectReports();
    try {
      const events = new Subject<CommandEvent>();
      const tracing = traceCommands({ commandEvents$: events }, { tracer: failing });
      events.next({ type: 'CommandStarted', ...fields(1, 'find'), command: { find: 'a', $db: 'shop' } });
      events.next({ type: 'CommandStarted', ...fields(2, 'find'), command: { find: 'b', $db: 'shop' } });
      events.complete();
      // RxJS reports what a subscriber throws from a timer.
      await new Promise((resolve) => setTimeout(resolve, 5));
      expect(unhandled.map(String)).to.deep.equal([]);
      expect(logged).to.deep.equal(['rxcmap: ending a command span when the command events completed failed']);
      expect(finished().map((s) => s.attributes['db.collection.name'])).to.deep.equal(['b']);
      expect(tracing.closed).to.equal(true);
    } finally {
      restore();
    }
  });

  it('a failed command\'s span that throws at one of its calls (attributes, exception, status) still gets the others, and ends', function () {
    const statuses: Record<string, unknown> = {};
    const logged = diagMessages('error');
    try {
      for (const method of ['setAttributes', 'recordException', 'setStatus'] as const) {
        const { tracer, finished } = harness();
        const failing = {
          startSpan: (...args: Parameters<Tracer['startSpan']>) =>
            Object.assign(Object.create(tracer.startSpan(...args)) as object, { [method]: () => { throw new Error(`${method} failed`); } }),
        } as unknown as Tracer;
        const events = new Subject<CommandEvent>();
        const tracing = traceCommands({ commandEvents$: events }, { tracer: failing });
        events.next({ type: 'CommandStarted', ...fields(1, 'insert'), command: { insert: 'a', $db: 'shop' } });
        events.next({ type: 'CommandFailed', ...fields(1, 'insert'), duration: 1, failure: new MongoServerError({ ok: 0, code: 11000, errmsg: 'E11000 duplicate key' }) });
        tracing.unsubscribe();
        const [span] = finished();
        statuses[method] = [span?.status.code, span?.attributes['error.type'], span?.events.length];
      }
    } finally {
      diag.disable();
    }
    expect(statuses).to.deep.equal({
      setAttributes: [SpanStatusCode.ERROR, undefined, 1],
      recordException: [SpanStatusCode.ERROR, '11000', 0],
      setStatus: [SpanStatusCode.UNSET, '11000', 1],
    });
    // Each reported to diag, naming what failed and the command.
    expect(logged).to.deep.equal(['the failure attributes', 'the exception', 'the status'].map((what) => `rxcmap: ${what} of the insert span failed`));
  });

  it('db.query.text writes a 64-bit integer beyond 2^53 with all its digits (a getMore\'s cursor id as db.mongodb.cursor_id has it), cut as any text', function () {
    const { tracer, finished } = harness();
    const events = new Subject<CommandEvent>();
    const tracing = traceCommands({ commandEvents$: events }, { tracer, queryTextMaxLength: 1000 });
    const cursorId = Long.fromString('5476541286716842819');
    const command = { getMore: cursorId, collection: 'orders', $db: 'shop' };
    events.next({ type: 'CommandStarted', ...fields(1, 'getMore'), command });
    events.next({ type: 'CommandSucceeded', ...fields(1, 'getMore'), duration: 1, reply: { ok: 1 } });
    events.next({ type: 'CommandStarted', ...fields(2, 'find'), command: { find: 'orders', filter: { n: { $in: [-(2n ** 63n), 2n ** 62n + 1n, Long.fromNumber(7)] } }, $db: 'shop' } });
    events.next({ type: 'CommandSucceeded', ...fields(2, 'find'), duration: 1, reply: { ok: 1 } });
    tracing.unsubscribe();
    const [getMore, find] = finished() as [ReadableSpan, ReadableSpan];
    expect(getMore.attributes['db.query.text']).to.equal('{"getMore":5476541286716842819,"collection":"orders"}');
    expect(getMore.attributes['db.mongodb.cursor_id']).to.equal('5476541286716842819');
    expect(find.attributes['db.query.text']).to.equal('{"find":"orders","filter":{"n":{"$in":[-9223372036854775808,4611686018427387905,7]}}}');
    // Cut at the max length as any text: the digits count.
    const cut = traceCommands({ commandEvents$: events }, { tracer, queryTextMaxLength: 20 });
    events.next({ type: 'CommandStarted', ...fields(3, 'getMore'), command });
    events.next({ type: 'CommandSucceeded', ...fields(3, 'getMore'), duration: 1, reply: { ok: 1 } });
    cut.unsubscribe();
    expect(finished()[2]!.attributes['db.query.text']).to.equal('{"getMore":547654128...');
  });

  it('db.query.text reads only what shows within queryTextMaxLength of a command with 100,000 top-level fields: not each field', function () {
    const { tracer, finished } = harness();
    const events = new Subject<CommandEvent>();
    const tracing = traceCommands({ commandEvents$: events }, { tracer, queryTextMaxLength: 100 });
    let reads = 0;
    const command: Record<string, unknown> = { insert: 'orders' };
    for (let i = 0; i < 100_000; i++) {
      Object.defineProperty(command, `f${i}`, { enumerable: true, get: () => (reads++, i) });
    }
    command.$db = 'shop';
    events.next({ type: 'CommandStarted', ...fields(1, 'insert'), command });
    events.next({ type: 'CommandSucceeded', ...fields(1, 'insert'), duration: 1, reply: { ok: 1 } });
    tracing.unsubscribe();
    expect(finished()[0]!.attributes['db.query.text']).to.equal('{"insert":"orders","f0":0,"f1":1,"f2":2,"f3":3,"f4":4,"f5":5,"f6":6,"f7":7,"f8":8,"f9":9,"f10":10,"f...');
    expect(reads).to.be.below(50);
  });

  it('a command span is stamped on the wall clock, as the SDK stamps its parent: still inside it once the monotonic clock has drifted 60 s from Date.now(), either way (a host suspended, an NTP step back or forth)', function () {
    for (const drift of [60_000, -60_000]) {
      const { tracer, finished } = harness();
      const events = new Subject<CommandEvent>();
      const tracing = traceCommands({ commandEvents$: events }, { tracer });
      const ms = ([seconds, nanos]: [number, number]): number => seconds * 1e3 + nanos / 1e6;
      const realNow = Date.now;
      // The wall clock 60 s ahead of performance.timeOrigin + performance.now(), which does not count a suspension,
      // then 60 s behind it (a clock stepped back).
      Date.now = () => Math.floor(performance.timeOrigin + performance.now() + drift);
      try {
        const operation = tracer.startSpan('operation');
        context.with(trace.setSpan(context.active(), operation), () => {
          events.next({ type: 'CommandStarted', ...fields(1, 'find'), command: { find: 'a', $db: 'shop' } });
          events.next({ type: 'CommandStarted', ...fields(2, 'find'), command: { find: 'b', $db: 'shop' } });
        });
        events.next({ type: 'CommandSucceeded', ...fields(1, 'find'), duration: 0.5, reply: { ok: 1 } });
        events.next({ type: 'CommandSucceeded', ...fields(2, 'find'), duration: 0.5, reply: { ok: 1 } });
        operation.end(Date.now() + 1);
      } finally {
        Date.now = realNow;
        tracing.unsubscribe();
      }
      const [a, b, operation] = finished() as [ReadableSpan, ReadableSpan, ReadableSpan];
      expect(operation.name).to.equal('operation');
      for (const span of [a, b]) {
        // On the clock that does not count the suspension, they would lie 60 s outside their parent's bounds: 30 s
        // leaves a loaded machine's pauses room.
        expect(ms(span.startTime) - ms(operation.startTime), 'starts after its parent').to.be.within(-1, 30_000);
        expect(ms(operation.endTime) - ms(span.endTime), 'ends before its parent').to.be.within(-1, 30_000);
      }
      // Still ordered: the second command starts after the first.
      expect(ms(b.startTime)).to.be.above(ms(a.startTime));
    }
  });

  it('db.mongodb.lsid from a session id made by another copy of bson (an ES module application\'s, another version\'s)', function () {
    const { tracer, finished } = harness();
    const events = new Subject<CommandEvent>();
    const tracing = traceCommands({ commandEvents$: events }, { tracer });
    const uuid = '0b4c6c1e-5d3f-4a7e-9c1b-2f0a8e6d4c3b';
    events.next({ type: 'CommandStarted', ...fields(1, 'find'), command: { find: 'orders', lsid: { id: new (otherBson().UUID)(uuid) }, $db: 'shop' } });
    events.next({ type: 'CommandSucceeded', ...fields(1, 'find'), duration: 1, reply: { ok: 1 } });
    tracing.unsubscribe();
    expect(finished()[0]!.attributes['db.mongodb.lsid']).to.equal(uuid);
  });

  it('a source that errors (a user\'s commandEvents$ through an operator that fails) ends the open spans and tracing, its error reported to diag, not rethrown from a timer', async function () {
    const { tracer, finished } = harness();
    const { logged, unhandled, restore } = collectReports();
    try {
      const events = new Subject<CommandEvent>();
      const tracing = traceCommands({ commandEvents$: events }, { tracer });
      events.next({ type: 'CommandStarted', ...fields(1, 'find'), command: { find: 'a', $db: 'shop' } });
      events.error(new Error('feed failed'));
      await new Promise((resolve) => setTimeout(resolve, 5));
      expect(unhandled.map(String)).to.deep.equal([]);
      expect(logged).to.deep.equal(['rxcmap: the command events traced failed; tracing ended']);
      expect(finished().map((s) => s.attributes['db.collection.name'])).to.deep.equal(['a']);
      expect(tracing.closed).to.equal(true);
    } finally {
      restore();
    }
  });

  it('refuses a source without commandEvents$, options that are not an object, a misspelt key, a tracer that is not one and a bad queryTextMaxLength, naming each', function () {
    const events = new Subject<CommandEvent>();
    expect(refusedOption(() => traceCommands({} as never))).to.equal('source');
    expect(refusedOption(() => traceCommands(null as never))).to.equal('source');
    expect(refusedOption(() => traceCommands({ commandEvents$: events }, null as never))).to.equal('options');
    expect(refusedOption(() => traceCommands({ commandEvents$: events }, { tracr: {} } as never))).to.equal('tracr');
    expect(refusedOption(() => traceCommands({ commandEvents$: events }, { tracer: {} as Tracer }))).to.equal('tracer');
    expect(refusedOption(() => traceCommands({ commandEvents$: events }, { tracer: null as never }))).to.equal('tracer');
    for (const bad of [-1, 1.5, Number.NaN, 2 ** 31, '10'])
      expect(refusedOption(() => traceCommands({ commandEvents$: events }, { queryTextMaxLength: bad as number })), String(bad)).to.equal('queryTextMaxLength');
    expect(events.observed).to.equal(false);
    const tracing = traceCommands({ commandEvents$: events });
    expect(tracing.closed).to.equal(false);
    tracing.unsubscribe();
  });

  it('each refusal names what is allowed: a source, options, a known key, a Tracer, a max length; a source whose commandEvents$ is null or has no subscribe, options of 5, a tracer missing startSpan are refused too, and the largest max length taken', function () {
    const events = new Subject<CommandEvent>();
    const message = (f: () => unknown): string => {
      try {
        f();
      } catch (error) {
        return (error as Error).message;
      }
      return 'accepted';
    };
    expect(message(() => traceCommands({ commandEvents$: null } as never))).to.match(/a ConnectionPool or Client \(an object with commandEvents\$/);
    expect(refusedOption(() => traceCommands({ commandEvents$: { subscribe: 1 } } as never))).to.equal('source');
    expect(message(() => traceCommands({ commandEvents$: events }, 5 as never))).to.match(/Invalid options: 5.*an object \{ tracer\?, queryTextMaxLength\? \}/);
    expect(message(() => traceCommands({ commandEvents$: events }, { tracr: {} } as never))).to.match(/traceCommands.*tracer/);
    expect(message(() => traceCommands({ commandEvents$: events }, { tracer: { startActiveSpan: () => undefined } as never }))).to.match(/an OpenTelemetry Tracer/);
    expect(message(() => traceCommands({ commandEvents$: events }, { queryTextMaxLength: -1 }))).to.match(/an integer from 0 to 2147483647 \(0: no db\.query\.text\)/);
    const { tracer } = harness();
    const widest = traceCommands({ commandEvents$: events }, { tracer, queryTextMaxLength: 2 ** 31 - 1 });
    widest.unsubscribe();
    expect(events.observed).to.equal(false);
  });

  it('the largest max length in the environment variable is taken, and an unset or blank variable is no warning', function () {
    const saved = process.env[QUERY_TEXT_MAX_LENGTH_ENV];
    const warned = diagMessages('warn');
    try {
      const text = (): unknown => {
        const { tracer, finished } = harness();
        const events = new Subject<CommandEvent>();
        const tracing = traceCommands({ commandEvents$: events }, { tracer });
        events.next({ type: 'CommandStarted', ...fields(1, 'ping'), command: { ping: 1, $db: 'admin' } });
        events.next({ type: 'CommandSucceeded', ...fields(1, 'ping'), duration: 1, reply: { ok: 1 } });
        tracing.unsubscribe();
        return finished()[0]!.attributes['db.query.text'];
      };
      delete process.env[QUERY_TEXT_MAX_LENGTH_ENV];
      expect(text()).to.equal(undefined);
      process.env[QUERY_TEXT_MAX_LENGTH_ENV] = ' ';
      expect(text()).to.equal(undefined);
      process.env[QUERY_TEXT_MAX_LENGTH_ENV] = '2147483647';
      expect(text()).to.equal('{"ping":1}');
      expect(warned).to.deep.equal([]);
    } finally {
      diag.disable();
      if (saved === undefined) delete process.env[QUERY_TEXT_MAX_LENGTH_ENV];
      else process.env[QUERY_TEXT_MAX_LENGTH_ENV] = saved;
    }
  });

  it('a command naming the collection \'\' has no db.collection.name: its summary names the database only', function () {
    const { tracer, finished } = harness();
    const events = new Subject<CommandEvent>();
    const tracing = traceCommands({ commandEvents$: events }, { tracer });
    events.next({ type: 'CommandStarted', ...fields(1, 'find'), command: { find: '', $db: 'shop' } });
    events.next({ type: 'CommandSucceeded', ...fields(1, 'find'), duration: 1, reply: { ok: 1 } });
    tracing.unsubscribe();
    const [span] = finished();
    expect([span?.attributes['db.collection.name'], span?.attributes['db.query.summary']]).to.deep.equal([undefined, 'find shop']);
  });

  it('ids given as bigint (a driver that builds commands with them) are read as Longs are: a number when exact, else a decimal string', function () {
    const { tracer, finished } = harness();
    const events = new Subject<CommandEvent>();
    const tracing = traceCommands({ commandEvents$: events }, { tracer });
    events.next({ type: 'CommandStarted', ...fields(1, 'getMore'), command: { getMore: 5476541286716842819n, collection: 'orders', txnNumber: 3n, $db: 'shop' } });
    events.next({ type: 'CommandSucceeded', ...fields(1, 'getMore'), duration: 1, reply: { ok: 1, cursor: { id: 0n, nextBatch: [] } } });
    tracing.unsubscribe();
    const [span] = finished();
    expect([span?.attributes['db.mongodb.cursor_id'], span?.attributes['db.mongodb.txn_number']]).to.deep.equal(['5476541286716842819', 3]);
  });

  it('db.mongodb.lsid only for a UUID: none for a session id of another Binary subtype, of other than 16 bytes, or not a Binary', function () {
    const { tracer, finished } = harness();
    const events = new Subject<CommandEvent>();
    const tracing = traceCommands({ commandEvents$: events }, { tracer });
    const bytes = new UUID('0b4c6c1e-5d3f-4a7e-9c1b-2f0a8e6d4c3b').buffer;
    // 15 bytes written into a Binary's larger buffer: its position says how many it holds.
    const short = new Binary(undefined, Binary.SUBTYPE_UUID);
    short.write(bytes.subarray(0, 15), 0);
    const ids = [new Binary(bytes, Binary.SUBTYPE_DEFAULT), new Binary(bytes.subarray(0, 15), Binary.SUBTYPE_UUID), short, { _bsontype: 'Binary', sub_type: 4, buffer: [...bytes], position: 16 }, '0b4c6c1e-5d3f-4a7e-9c1b-2f0a8e6d4c3b'];
    ids.forEach((id, i) => {
      events.next({ type: 'CommandStarted', ...fields(i, 'find'), command: { find: 'orders', lsid: { id }, $db: 'shop' } });
      events.next({ type: 'CommandSucceeded', ...fields(i, 'find'), duration: 1, reply: { ok: 1 } });
    });
    tracing.unsubscribe();
    expect(finished().map((s) => s.attributes['db.mongodb.lsid'])).to.deep.equal([undefined, undefined, undefined, undefined, undefined]);
  });

  it('the Tracer by default is the global provider\'s, named rxcmap with its version', function () {
    const exporter = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    trace.setGlobalTracerProvider(provider);
    try {
      const events = new Subject<CommandEvent>();
      const tracing = traceCommands({ commandEvents$: events });
      events.next({ type: 'CommandStarted', ...fields(1, 'ping'), command: { ping: 1, $db: 'admin' } });
      events.next({ type: 'CommandSucceeded', ...fields(1, 'ping'), duration: 1, reply: { ok: 1 } });
      tracing.unsubscribe();
      const [span] = exporter.getFinishedSpans();
      expect([span?.instrumentationScope.name, span?.instrumentationScope.version]).to.deep.equal(['rxcmap', DRIVER_INFO.version]);
    } finally {
      trace.disable();
    }
  });
});
