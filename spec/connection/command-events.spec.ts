/**
 * Command events (command logging and monitoring spec): CommandStarted, then CommandSucceeded or CommandFailed with
 * the same requestId, for the application's commands only (never the handshake, authentication or heartbeats), the
 * command as sent (document sequences as arrays), sensitive commands redacted, unacknowledged writes, nothing built
 * while nobody receives them; and their log messages (component `command`). Against the embedded endpoint, and the
 * server of MONGODB_URI where it is set (the tests that need the endpoint's own users or fail points say so).
 */
import { BSONRegExp } from 'bson';
import { expect } from 'chai';
import { config, firstValueFrom, from } from 'rxjs';
import { InvalidOptionError, MongoCredentials, MongoNetworkError, MongoNetworkTimeoutError, MongoServerError, WireProtocolError, connect, connectionFactory, ConnectionPool, type CommandEvent, type CommandFailedEvent, type CommandSucceededEvent, type Connection, type LogSink } from '../../lib';
import { isSensitiveCommand, isWithheld, redactedFailure, type CommandStartedEvent } from '../../lib/connection/command-events';
import type { CommandLogMessage } from '../../lib/logging/log-message';
import { resolveLogSettings } from '../../lib/logging/log-settings';
import { EmbeddedServer, signOidcToken } from '../../lib/testing';
import { eventually, setFailPoint, startTestEndpoint, stopTestEndpoint, type TestEndpoint } from '../support/endpoint';

describe('command events (command logging and monitoring spec)', function () {
  let endpoint: TestEndpoint;
  before(async function () {
    endpoint = await startTestEndpoint();
  });
  after(async function () {
    await stopTestEndpoint(endpoint);
  });

  /** A pool on the endpoint, its command events recorded (from now on) into `events`. */
  const watchedPool = (events: CommandEvent[], extra: { logging?: ConstructorParameters<typeof ConnectionPool>[0]['logging'] } = {}): ConnectionPool => {
    const pool = new ConnectionPool({ address: endpoint.address, connectionOptions: endpoint.connectionOptions, ...extra });
    pool.commandEvents$.subscribe((e) => events.push(e));
    pool.ready();
    return pool;
  };

  it('a command is published as CommandStarted then CommandSucceeded, the same requestId, the command as sent with its $db and document sequences', async function () {
    const events: CommandEvent[] = [];
    const pool = watchedPool(events);
    const began = performance.now();
    try {
      const [ping, insert] = await pool.withConnection(async (c) => [
        await c.command('admin', { ping: 1 }),
        await c.command('rxcmap_test', { insert: 'command_events', ordered: true }, { documentSequences: { documents: [{ a: 1 }, { a: 2 }] } }),
      ]);
      expect(events.map((e) => e.type)).to.deep.equal(['CommandStarted', 'CommandSucceeded', 'CommandStarted', 'CommandSucceeded']);
      const [pingStarted, pingSucceeded, insertStarted, insertSucceeded] = events as [CommandEvent, CommandEvent, CommandEvent, CommandEvent];
      expect(pingStarted).to.deep.include({ address: endpoint.address, commandName: 'ping', databaseName: 'admin', connectionId: 1, command: { ping: 1, $db: 'admin' } });
      expect(pingSucceeded).to.deep.include({ commandName: 'ping', databaseName: 'admin', requestId: pingStarted.requestId, connectionId: 1, reply: ping });
      expect(insertStarted).to.deep.include({ commandName: 'insert', databaseName: 'rxcmap_test', command: { insert: 'command_events', ordered: true, $db: 'rxcmap_test', documents: [{ a: 1 }, { a: 2 }] } });
      expect(insertSucceeded).to.deep.include({ requestId: insertStarted.requestId, reply: insert });
      expect(insertStarted.requestId).to.be.greaterThan(pingStarted.requestId);
      for (const e of events) {
        expect(e.serverConnectionId, e.type).to.be.a('number');
        // What is unknown is left out, not set to undefined: no serviceId outside load-balanced mode, no operationId.
        const last = e.type === 'CommandStarted' ? 'command' : e.type === 'CommandSucceeded' ? 'reply' : 'failure';
        expect(Object.keys(e).sort(), e.type).to.deep.equal(['type', 'address', 'time', 'connectionId', 'serverConnectionId', 'requestId', 'databaseName', 'commandName', ...(e.type === 'CommandStarted' ? [] : ['duration']), last].sort());
        // On the wall clock to the microsecond: Date.now() is a whole ms, so it may read up to 2 ms behind.
        expect(e.time).to.be.within(Date.now() - 10_000, Date.now() + 2);
        if (e.type !== 'CommandStarted') expect(e.duration).to.be.a('number').and.at.least(0).and.below(performance.now() - began);
      }
    } finally {
      pool.close();
    }
  });

  it('the handshake and authentication are never published: the first event of a SCRAM pool is the application\'s command (embedded endpoint\'s users)', async function () {
    if (endpoint.embedded === undefined) this.skip();
    const server = await new EmbeddedServer({ users: [{ username: 'app', password: 'pencil' }] }).start();
    const events: CommandEvent[] = [];
    const pool = new ConnectionPool({ address: server.address, connectionOptions: { credentials: { username: 'app', password: 'pencil' } } });
    pool.commandEvents$.subscribe((e) => events.push(e));
    pool.ready();
    try {
      await pool.withConnection((c) => c.command('admin', { connectionStatus: 1 }));
      expect(events.map((e) => `${e.type} ${e.commandName}`)).to.deep.equal(['CommandStarted connectionStatus', 'CommandSucceeded connectionStatus']);
    } finally {
      pool.close();
      await server.stop();
    }
  });

  it('an operationId the caller gives is carried by both events and the log messages only; an invalid one is refused before anything is sent', async function () {
    const events: CommandEvent[] = [];
    const messages: CommandLogMessage[] = [];
    const pool = watchedPool(events, { logging: { componentSeverities: { command: 'debug' }, path: { write: (m) => void messages.push(m as CommandLogMessage) } } });
    try {
      await pool.withConnection(async (c) => {
        await c.command('rxcmap_test', { insert: 'command_events', documents: [{ c: 1 }] }, { operationId: 42 });
        await c.command('rxcmap_test', { insert: 'command_events', documents: [{ c: 2 }] }, { operationId: 42 });
        await c.command('admin', { ping: 1 });
        for (const bad of [-1, 1.5, Number.MAX_SAFE_INTEGER + 1, '42', null]) {
          const error = await c.command('admin', { ping: 1 }, { operationId: bad as number }).catch((e: unknown) => e);
          expect(error, String(bad)).to.be.instanceOf(InvalidOptionError).and.include({ option: 'operationId', allowed: 'an integer from 0 to 2^53 - 1' });
        }
        // 0 is an operation's id like any other.
        expect(await c.command('admin', { ping: 1 }, { operationId: 0 })).to.include({ ok: 1 });
      });
    } finally {
      pool.close();
    }
    expect(events.map((e) => e.operationId)).to.deep.equal([42, 42, 42, 42, undefined, undefined, 0, 0]);
    expect(events.filter((e) => e.type === 'CommandStarted').map((e) => Object.keys((e as { command: object }).command))).to.deep.equal([['insert', 'documents', '$db'], ['insert', 'documents', '$db'], ['ping', '$db'], ['ping', '$db']]);
    expect(messages.map((m) => m.toJSON().operationId)).to.deep.equal([42, 42, 42, 42, undefined, undefined, 0, 0]);
    expect(messages[0]!.render()).to.match(/\. The requestID is \d+ and the operation ID is 42\. Command: /);
    expect(messages[4]!.render()).to.match(/\. The requestID is \d+\. Command: /);
  });

  it('a server error is CommandFailed with the error the command rejects with; a network error too', async function () {
    const began = performance.now();
    await setFailPoint(this, endpoint, { mode: { times: 1 }, data: { failCommands: ['find'], errorCode: 2 } });
    const events: CommandEvent[] = [];
    const pool = watchedPool(events);
    try {
      const refused = await pool.withConnection((c) => c.command('rxcmap_test', { find: 'command_events' })).catch((e: unknown) => e);
      expect(refused).to.be.instanceOf(MongoServerError);
      await setFailPoint(this, endpoint, { mode: { times: 1 }, data: { failCommands: ['find'], closeConnection: true } });
      const lost = await pool.withConnection((c) => c.command('rxcmap_test', { find: 'command_events' })).catch((e: unknown) => e);
      expect(lost).to.be.instanceOf(MongoNetworkError);
      expect(events.map((e) => e.type)).to.deep.equal(['CommandStarted', 'CommandFailed', 'CommandStarted', 'CommandFailed']);
      const [s1, f1, s2, f2] = events as [CommandEvent, CommandEvent & { failure: Error; duration: number }, CommandEvent, CommandEvent & { failure: Error; duration: number }];
      for (const f of [f1, f2]) expect(f.duration).to.be.at.least(0).and.below(performance.now() - began);
      expect(f1.requestId).to.equal(s1.requestId);
      expect(f1.failure).to.equal(refused);
      expect(f2.requestId).to.equal(s2.requestId);
      expect(f2.failure).to.equal(lost);
    } finally {
      pool.close();
    }
  });

  it('duration is the time to send the command and receive its reply: the server\'s 50 ms are in it, a CommandStarted subscriber\'s 150 ms are not', async function () {
    await setFailPoint(this, endpoint, { mode: { times: 1 }, data: { failCommands: ['find'], blockConnection: true, blockTimeMS: 50 } });
    const events: CommandEvent[] = [];
    const pool = new ConnectionPool({ address: endpoint.address, connectionOptions: endpoint.connectionOptions });
    pool.commandEvents$.subscribe((e) => {
      events.push(e);
      // A slow subscriber: it runs before the command is written.
      if (e.type === 'CommandStarted') for (const until = performance.now() + 150; performance.now() < until; );
    });
    pool.ready();
    try {
      const began = performance.now();
      await pool.withConnection((c) => c.command('rxcmap_test', { find: 'command_events' }));
      const elapsed = performance.now() - began;
      const succeeded = events.find((e): e is CommandSucceededEvent => e.type === 'CommandSucceeded')!;
      expect(elapsed).to.be.at.least(200);
      expect(succeeded.duration).to.be.at.least(50).and.below(elapsed - 150);
    } finally {
      pool.close();
    }
  });

  it('an unacknowledged command (moreToCome) is CommandSucceeded with { ok: 1 } once written', async function () {
    const events: CommandEvent[] = [];
    const pool = watchedPool(events);
    try {
      await pool.withConnection((c) => c.command('rxcmap_test', { insert: 'command_events', documents: [{ b: 1 }], writeConcern: { w: 0 } }, { moreToCome: true }));
      expect(events.map((e) => e.type)).to.deep.equal(['CommandStarted', 'CommandSucceeded']);
      expect(events[1]).to.deep.include({ reply: { ok: 1 }, requestId: events[0]!.requestId });
      expect((events[0] as { command: Record<string, unknown> }).command.writeConcern).to.deep.equal({ w: 0 });
    } finally {
      pool.close();
    }
  });

  it('sensitive commands are published with {} for the command and reply (isWithheld), a server error by its code, codeName and labels only', async function () {
    if (endpoint.embedded === undefined) this.skip();
    const events: CommandEvent[] = [];
    const pool = watchedPool(events);
    try {
      await pool.withConnection(async (c) => {
        await c.command('admin', { createUser: 'someone', pwd: 'pw-not-to-show', roles: [] }).catch(() => undefined);
        await c.command('admin', { hello: 1, speculativeAuthenticate: { saslStart: 1, payload: 'secret-payload' } }).catch(() => undefined);
        await c.command('admin', { hello: 1 });
        await c.command('$external', { saslStart: 1, mechanism: 'PLAIN', payload: Buffer.from('\0u\0pw-not-to-show') }).catch(() => undefined);
      });
      const started = events.filter((e) => e.type === 'CommandStarted') as (CommandEvent & { command: object })[];
      expect(started.map((e) => [e.commandName, e.command])).to.deep.equal([['createUser', {}], ['hello', {}], ['hello', { hello: 1, $db: 'admin' }], ['saslStart', {}]]);
      // isWithheld tells the withheld ones from the one sent as it is.
      expect(started.map((e) => isWithheld(e as CommandStartedEvent))).to.deep.equal([true, true, false, true]);
      const ends = events.filter((e) => e.type !== 'CommandStarted');
      expect(ends).to.have.length(4);
      const [createUser, speculative, , sasl] = ends as (CommandEvent & { reply?: object; failure?: Error })[];
      if (createUser!.type === 'CommandSucceeded') expect(createUser!.reply).to.deep.equal({});
      if (speculative!.type === 'CommandSucceeded') expect(speculative!.reply).to.deep.equal({});
      expect(sasl!.type).to.equal('CommandFailed');
      const failure = sasl!.failure as MongoServerError;
      expect(failure).to.be.instanceOf(MongoServerError);
      expect(failure.message).to.equal('command failed');
      expect(Object.keys(failure.response).sort()).to.deep.equal(['code', 'ok'].concat(failure.codeName === undefined ? [] : ['codeName']).sort());
      expect(JSON.stringify(events, (_k, v: unknown) => (v instanceof Error ? `${v.message} ${JSON.stringify((v as MongoServerError).response)}` : v))).to.not.include('pw-not-to-show').and.not.include('secret-payload');
    } finally {
      pool.close();
    }
  });

  it('a sensitive command\'s reply that cannot be read is not quoted by its failure, in the event or the log message (embedded endpoint)', async function () {
    if (endpoint.embedded === undefined) this.skip();
    const server = await new EmbeddedServer().start();
    // A value RegExp refuses: the reply cannot be returned, and the error about it quotes the value.
    server.handle('createUser', () => ({ ok: 1, credentials: new BSONRegExp('(?i)reply-secret', '') }));
    const events: CommandEvent[] = [];
    const messages: CommandLogMessage[] = [];
    const pool = new ConnectionPool({ address: server.address, logging: { componentSeverities: { command: 'debug' }, maxDocumentLength: 100_000, path: { write: (m) => void messages.push(m as CommandLogMessage) } } });
    pool.commandEvents$.subscribe((e) => events.push(e));
    pool.ready();
    try {
      const error = await pool.withConnection((c) => c.command('admin', { createUser: 'someone', pwd: 'pw', roles: [] })).catch((e: Error) => e);
      // The application's own promise still says what was refused.
      expect((error as Error).message).to.include('reply-secret');
      const failed = events.find((e): e is CommandFailedEvent => e.type === 'CommandFailed');
      expect(failed?.failure).to.be.instanceOf(WireProtocolError);
      const shown = JSON.stringify(events, (_k, v: unknown) => (v instanceof Error ? { message: v.message, cause: String(v.cause) } : v)) + JSON.stringify(messages.map((m) => m.toJSON()));
      expect(shown).to.not.include('reply-secret');
    } finally {
      pool.close();
      await server.stop();
    }
  });

  it('a command document a getter of which throws once encoded is published as {}, and runs as sent', async function () {
    const events: CommandEvent[] = [];
    const pool = watchedPool(events);
    try {
      let reads = 0;
      const command = { ping: 1, get comment(): string { if (++reads > 1) throw new Error('read twice'); return 'once'; } };
      expect((await pool.withConnection((c) => c.command('admin', command))).ok).to.equal(1);
      expect(events.map((e) => e.type)).to.deep.equal(['CommandStarted', 'CommandSucceeded']);
      expect((events[0] as { command: object }).command).to.deep.equal({});
    } finally {
      pool.close();
    }
  });

  it('a command whose connection is destroyed while it is encoded (by a getter of its document) has no events and rejects as the closed connection', async function () {
    const events: CommandEvent[] = [];
    const pool = watchedPool(events);
    try {
      const connection = await pool.checkOut();
      const command = { ping: 1, get comment(): string { connection.destroy(); return 'destroying'; } };
      const outcome = await Promise.race([connection.command('admin', command), new Promise((r) => setTimeout(() => r('pending after 2 s'), 2000))]).catch((e: unknown) => e);
      expect(outcome).to.be.instanceOf(MongoNetworkError);
      expect((outcome as Error).message).to.equal(`connection ${connection.id} to ${endpoint.address} is closed`);
      expect(events).to.deep.equal([]);
      pool.checkIn(connection);
    } finally {
      pool.close();
    }
  });

  it('a server that gives no connectionId in its handshake: the events leave serverConnectionId out (embedded endpoint)', async function () {
    if (endpoint.embedded === undefined) this.skip();
    const server = await new EmbeddedServer().start();
    const hello = (cmd: Record<string, unknown>): Record<string, unknown> => ({
      ...('hello' in cmd ? { isWritablePrimary: true } : { ismaster: true }),
      ...(typeof cmd.helloOk === 'boolean' ? { helloOk: true } : {}),
      maxBsonObjectSize: 16 * 1024 * 1024,
      maxMessageSizeBytes: 48_000_000,
      maxWriteBatchSize: 100_000,
      minWireVersion: 0,
      maxWireVersion: 25,
      ok: 1,
    });
    server.handle('hello', hello);
    server.handle('ismaster', hello);
    const events: CommandEvent[] = [];
    const pool = new ConnectionPool({ address: server.address });
    pool.commandEvents$.subscribe((e) => events.push(e));
    pool.ready();
    try {
      await pool.withConnection((c) => c.command('admin', { ping: 1 }));
      expect(events.map((e) => e.type)).to.deep.equal(['CommandStarted', 'CommandSucceeded']);
      for (const e of events) expect(Object.keys(e), e.type).to.not.include('serverConnectionId');
    } finally {
      pool.close();
      await server.stop();
    }
  });

  it('nothing is built while nobody receives the events: the command document is read once unobserved, once more observed', async function () {
    const pool = new ConnectionPool({ address: endpoint.address, connectionOptions: endpoint.connectionOptions });
    pool.ready();
    try {
      let reads = 0;
      const command = { ping: 1, get comment(): string { reads++; return 'counted'; } };
      const readsOf = async (): Promise<number> => {
        reads = 0;
        await pool.withConnection((c) => c.command('admin', command));
        return reads;
      };
      const unobserved = await readsOf();
      const subscription = pool.commandEvents$.subscribe();
      const observed = await readsOf();
      subscription.unsubscribe();
      const after = await readsOf();
      expect([unobserved, observed, after]).to.deep.equal([1, 2, 1]);
    } finally {
      pool.close();
    }
  });

  it('the connection is busy from CommandStarted on: a subscriber\'s command on it meets ConnectionBusyError, a check-in there closes it and fails the command', async function () {
    const within = <T>(p: Promise<T>): Promise<T | 'pending after 2 s'> => Promise.race([p, new Promise<'pending after 2 s'>((r) => setTimeout(() => r('pending after 2 s'), 2000))]);
    const outcome = (p: Promise<unknown>): Promise<string> => within(p.then(() => 'ok', (e: Error) => e.name));
    // A command run by the subscriber on the same connection, while the first is being published.
    const events: CommandEvent[] = [];
    const pool = watchedPool(events);
    try {
      let nested: Promise<string> | undefined;
      const connection = await pool.checkOut();
      const subscription = pool.commandEvents$.subscribe((e) => {
        if (e.type === 'CommandStarted' && nested === undefined) nested = outcome(connection.command('admin', { buildInfo: 1 }));
      });
      const outer = await outcome(connection.command('admin', { ping: 1 }));
      subscription.unsubscribe();
      expect({ outer, nested: await nested, errored: connection.errored }).to.deep.equal({ outer: 'ok', nested: 'ConnectionBusyError', errored: false });
      expect(events.map((e) => `${e.type} ${e.commandName}`)).to.deep.equal(['CommandStarted ping', 'CommandSucceeded ping']);
      pool.checkIn(connection);
    } finally {
      pool.close();
    }
    // A check-in of the connection by the subscriber: it must not go back to the pool with the command still to send.
    const checkedIn: CommandEvent[] = [];
    const other = watchedPool(checkedIn);
    try {
      const connection = await other.checkOut();
      const subscription = other.commandEvents$.subscribe((e) => {
        if (e.type === 'CommandStarted') other.checkIn(connection);
      });
      const outer = await outcome(connection.command('admin', { ping: 1 }));
      subscription.unsubscribe();
      expect({ outer, errored: connection.errored }).to.deep.equal({ outer: 'MongoNetworkError', errored: true });
      expect(checkedIn.map((e) => `${e.type} ${e.commandName}`)).to.deep.equal(['CommandStarted ping', 'CommandFailed ping']);
    } finally {
      other.close();
    }
  });

  it('a subscriber that throws never fails the command nor holds the connection, even with RxJS\'s synchronous error handling', async function () {
    const reported: unknown[] = [];
    const saved = { sync: config.useDeprecatedSynchronousErrorHandling, onUnhandledError: config.onUnhandledError };
    config.onUnhandledError = (error) => void reported.push(error);
    const events: CommandEvent[] = [];
    const pool = watchedPool(events);
    try {
      for (const sync of [false, true]) {
        config.useDeprecatedSynchronousErrorHandling = sync;
        for (const type of ['CommandStarted', 'CommandSucceeded'] as const) {
          const subscription = pool.commandEvents$.subscribe((e) => {
            if (e.type === type) throw new Error(`subscriber failed on ${type}`);
          });
          const outcome = await pool.withConnection(async (c) => {
            const first = await c.command('admin', { ping: 1 }).then(() => 'ok', (e: Error) => e.message);
            subscription.unsubscribe();
            const busy = c.busy;
            const second = await c.command('admin', { ping: 1 }).then(() => 'ok', (e: Error) => e.name);
            return { first, busy, second };
          });
          expect(outcome, `${type}, synchronous error handling ${sync}`).to.deep.equal({ first: 'ok', busy: false, second: 'ok' });
        }
      }
      await new Promise((r) => setTimeout(r, 10));
      // Each reported once, as RxJS reports an unhandled error (asynchronously for its default handling).
      expect(reported.map((e) => (e as Error).message).sort()).to.deep.equal(['subscriber failed on CommandStarted', 'subscriber failed on CommandStarted', 'subscriber failed on CommandSucceeded', 'subscriber failed on CommandSucceeded']);
    } finally {
      config.useDeprecatedSynchronousErrorHandling = saved.sync;
      config.onUnhandledError = saved.onUnhandledError;
      pool.close();
    }
  });

  it('a factory of rxcmap\'s own carries the events of its connections; a pool with another factory has none', async function () {
    const [host, port] = endpoint.address.split(':') as [string, string];
    const factory = connectionFactory({ ...endpoint.connectionOptions, host, port: Number(port) });
    const events: CommandEvent[] = [];
    factory.commandEvents$.subscribe((e) => events.push(e));
    const connection: Connection = await firstValueFrom(from(factory({ id: 7, generation: 0, address: endpoint.address, signal: new AbortController().signal })));
    try {
      await connection.command('admin', { ping: 1 });
    } finally {
      connection.destroy();
    }
    expect(events.map((e) => `${e.type} ${e.commandName} c${e.connectionId}`)).to.deep.equal(['CommandStarted ping c7', 'CommandSucceeded ping c7']);
    const foreign = new ConnectionPool({ address: endpoint.address, connectionFactory: (d) => factory(d) });
    let completed = false;
    foreign.commandEvents$.subscribe({ complete: () => (completed = true) });
    foreign.close();
    expect(completed).to.equal(true);
  });

  it('a pool publishes its own connections\' commands only, when its factory serves another pool too; the factory publishes both', async function () {
    const [host, port] = endpoint.address.split(':') as [string, string];
    const factory = connectionFactory({ ...endpoint.connectionOptions, host, port: Number(port) });
    const seen = { a: [] as string[], b: [] as string[], factory: [] as string[] };
    const a = new ConnectionPool({ address: endpoint.address, connectionFactory: factory });
    const b = new ConnectionPool({ address: endpoint.address, connectionFactory: factory });
    a.commandEvents$.subscribe((e) => seen.a.push(`${e.type} ${e.commandName}`));
    b.commandEvents$.subscribe((e) => seen.b.push(`${e.type} ${e.commandName}`));
    factory.commandEvents$.subscribe((e) => seen.factory.push(`${e.type} ${e.commandName}`));
    a.ready();
    b.ready();
    try {
      await a.withConnection((c) => c.command('admin', { ping: 1 }));
      await b.withConnection((c) => c.command('admin', { buildInfo: 1 }));
      expect(seen).to.deep.equal({
        a: ['CommandStarted ping', 'CommandSucceeded ping'],
        b: ['CommandStarted buildInfo', 'CommandSucceeded buildInfo'],
        factory: ['CommandStarted ping', 'CommandSucceeded ping', 'CommandStarted buildInfo', 'CommandSucceeded buildInfo'],
      });
    } finally {
      a.close();
      b.close();
    }
  });

  it('commandEvents$ completes once the closed pool is done, after the commands still in flight; a client\'s once it is closed', async function () {
    const pool = new ConnectionPool({ address: endpoint.address, connectionOptions: endpoint.connectionOptions });
    const seen: string[] = [];
    pool.commandEvents$.subscribe({ next: (e) => seen.push(`${e.type} ${e.commandName}`), complete: () => seen.push('complete') });
    pool.ready();
    const connection = await pool.checkOut();
    pool.close();
    await connection.command('admin', { ping: 1 });
    expect(seen).to.deep.equal(['CommandStarted ping', 'CommandSucceeded ping']);
    pool.checkIn(connection);
    // Waited for, not assumed within 50 ms (a loaded runner's pause could outlast it); never completing is the wrong
    // behaviour.
    await eventually(() => seen.includes('complete'), 2000);
    expect(seen).to.deep.equal(['CommandStarted ping', 'CommandSucceeded ping', 'complete']);
    let lateCompleted = false;
    pool.commandEvents$.subscribe({ complete: () => (lateCompleted = true) });
    expect(lateCompleted).to.equal(true);
    // A drained pool's too.
    const drained = new ConnectionPool({ address: endpoint.address, connectionOptions: endpoint.connectionOptions });
    let drainedCompleted = false;
    drained.commandEvents$.subscribe({ complete: () => (drainedCompleted = true) });
    drained.ready();
    await drained.withConnection((c) => c.command('admin', { ping: 1 }));
    await drained.drain();
    expect(await eventually(() => drainedCompleted, 2000)).to.equal(true);
    // A client's: a subscription an APM agent never ends does not hold the closed client.
    const client = connect(process.env.MONGODB_URI ?? `mongodb://${endpoint.address}/?directConnection=true`);
    let clientCompleted = false;
    client.commandEvents$.subscribe({ complete: () => (clientCompleted = true) });
    await client.command('admin', { ping: 1 });
    await client.close();
    expect(await eventually(() => clientCompleted, 2000)).to.equal(true);
  });

  it('a client publishes its pools\' commands, never its monitors\' heartbeats', async function () {
    const uri = process.env.MONGODB_URI ?? `mongodb://${endpoint.address}/?directConnection=true&heartbeatFrequencyMS=500`;
    const client = connect(uri);
    const events: CommandEvent[] = [];
    client.commandEvents$.subscribe((e) => events.push(e));
    try {
      await client.command('admin', { ping: 1 });
      await new Promise((resolve) => setTimeout(resolve, 600)); // a heartbeat or two meanwhile
      await client.command('admin', { ping: 2 });
    } finally {
      await client.close();
    }
    expect(events.map((e) => `${e.type} ${e.commandName}`)).to.deep.equal(['CommandStarted ping', 'CommandSucceeded ping', 'CommandStarted ping', 'CommandSucceeded ping']);
  });

  it('a load-balanced connection\'s events carry its serviceId (embedded endpoint as a load balancer)', async function () {
    if (endpoint.embedded === undefined) this.skip();
    const server = await new EmbeddedServer({ loadBalancedServices: 1 }).start();
    const events: CommandEvent[] = [];
    const pool = new ConnectionPool({ address: server.address, loadBalanced: true });
    pool.commandEvents$.subscribe((e) => events.push(e));
    pool.ready();
    try {
      const serviceId = await pool.withConnection(async (c) => {
        await c.command('admin', { ping: 1 });
        return c.serviceId;
      });
      expect(serviceId).to.match(/^[0-9a-f]{24}$/);
      expect(events.map((e) => e.serviceId)).to.deep.equal([serviceId, serviceId]);
    } finally {
      pool.close();
      await server.stop();
    }
  });

  it('a command retried after a reauthentication (391) is published twice, each send with its own requestId; the reauthentication not at all', async function () {
    if (endpoint.embedded === undefined) this.skip();
    const key = 'idp-signing-key';
    const server = await new EmbeddedServer({ oidc: { signingKey: key } }).start();
    const credentials = new MongoCredentials({ mechanism: 'MONGODB-OIDC', mechanismProperties: { OIDC_CALLBACK: async () => ({ accessToken: signOidcToken(key, { sub: 'svc' }) }) } });
    const events: CommandEvent[] = [];
    const pool = new ConnectionPool({ address: server.address, connectionOptions: { credentials } });
    pool.commandEvents$.subscribe((e) => events.push(e));
    pool.ready();
    try {
      await pool.withConnection(async (c) => {
        await c.command('admin', { configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['find'], errorCode: 391 } });
        events.length = 0;
        await c.command('test', { find: 'c' });
      });
      expect(events.map((e) => `${e.type} ${e.commandName}`)).to.deep.equal(['CommandStarted find', 'CommandFailed find', 'CommandStarted find', 'CommandSucceeded find']);
      expect(events[1]!.requestId).to.equal(events[0]!.requestId);
      expect(events[3]!.requestId).to.equal(events[2]!.requestId).and.not.equal(events[0]!.requestId);
      expect(((events[1] as CommandFailedEvent).failure as MongoServerError).code).to.equal(391);
    } finally {
      pool.close();
      await server.stop();
    }
  });

  describe('log messages (component `command`)', function () {
    it('are written at debug, with the spec\'s keys and forms, documents truncated to maxDocumentLength, sensitive ones as {}', async function () {
      const messages: CommandLogMessage[] = [];
      const sink: LogSink = { write: (m) => void messages.push(m as CommandLogMessage) };
      const events: CommandEvent[] = [];
      const viaLog: string[] = [];
      const pool = watchedPool(events, { logging: { componentSeverities: { command: 'debug' }, path: sink, maxDocumentLength: 20 } });
      pool.log$.subscribe((m) => viaLog.push(m.component));
      try {
        await pool.withConnection(async (c) => {
          await c.command('admin', { ping: 1, comment: 'a comment longer than twenty characters' });
          await c.command('admin', { createUser: 'someone', pwd: 'pw-not-to-show', roles: [] }).catch(() => undefined);
        });
      } finally {
        pool.close();
      }
      expect(messages.map((m) => m.fields.message)).to.deep.equal(['Command started', 'Command succeeded', 'Command started', messages[3]!.fields.message]);
      expect(viaLog).to.deep.equal(['command', 'command', 'command', 'command']);
      const [started, succeeded, sensitive] = messages as [CommandLogMessage, CommandLogMessage, CommandLogMessage];
      const [host, port] = endpoint.address.split(':') as [string, string];
      const json = started.toJSON();
      expect(json).to.include({ c: 'command', s: 'debug', message: 'Command started', commandName: 'ping', databaseName: 'admin', driverConnectionId: 1, serverHost: host, serverPort: Number(port), requestId: events[0]!.requestId });
      expect(json.command).to.equal('{"ping":1,"comment":...');
      expect(started.render()).to.equal(
        `Command "ping" started on database "admin" using a connection with driver-generated ID 1 and server-generated ID ${events[0]!.serverConnectionId} to ${endpoint.address}. The requestID is ${events[0]!.requestId}. Command: {"ping":1,"comment":...`,
      );
      expect(succeeded.toJSON()).to.include({ message: 'Command succeeded', durationMS: (events[1] as { duration: number }).duration });
      expect(succeeded.render()).to.match(/^Command "ping" succeeded on database "admin" in [\d.]+ ms using a connection with driver-generated ID 1 .*\. Command reply: /);
      expect(sensitive.fields.command).to.equal('{}');
      expect(JSON.stringify(messages.map((m) => [m.toJSON(), m.render()]))).to.not.include('pw-not-to-show');
    });

    it('a failed command\'s message carries its error; MONGODB_LOG_COMMAND sets the component\'s level', async function () {
      await setFailPoint(this, endpoint, { mode: { times: 1 }, data: { failCommands: ['find'], errorCode: 2 } });
      const messages: CommandLogMessage[] = [];
      const pool = watchedPool([], { logging: { componentSeverities: { command: 'debug' }, path: { write: (m) => void messages.push(m as CommandLogMessage) } } });
      try {
        await pool.withConnection((c) => c.command('rxcmap_test', { find: 'command_events' })).catch(() => undefined);
      } finally {
        pool.close();
      }
      const failed = messages[1]!;
      expect(failed.toJSON()).to.deep.include({ message: 'Command failed', commandName: 'find' });
      expect(failed.fields.failure).to.include({ type: 'MongoServerError', code: 2 });
      expect(failed.render()).to.match(new RegExp(`^Command "find" failed on database "rxcmap_test" in [\\d.]+ ms .* Error: MongoServerError: ${failed.fields.failure!.message}$`));
      expect(resolveLogSettings({}, { MONGODB_LOG_COMMAND: 'debug' }).severities.command).to.equal('debug');
      expect(resolveLogSettings({}, { MONGODB_LOG_ALL: 'debug', MONGODB_LOG_COMMAND: 'off' }).severities.command).to.equal('off');
    });
  });

  describe('which commands are sensitive (spec, "Security")', function () {
    it('the listed commands, and hello or legacy hello with speculativeAuthenticate only', function () {
      for (const name of ['authenticate', 'saslStart', 'saslContinue', 'getnonce', 'createUser', 'updateUser', 'copydbgetnonce', 'copydbsaslstart', 'copydb']) {
        expect(isSensitiveCommand(name, { [name]: 1 }), name).to.equal(true);
      }
      for (const name of ['hello', 'isMaster', 'ismaster']) {
        expect(isSensitiveCommand(name, { [name]: 1, speculativeAuthenticate: {} }), name).to.equal(true);
        expect(isSensitiveCommand(name, { [name]: 1 }), name).to.equal(false);
      }
      expect(isSensitiveCommand('find', { find: 'c', speculativeAuthenticate: {} })).to.equal(false);
      // Present whatever its value: null, or undefined (which is sent as null).
      for (const value of [null, undefined]) expect(isSensitiveCommand('hello', { hello: 1, speculativeAuthenticate: value }), String(value)).to.equal(true);
      expect(isSensitiveCommand('hello', { hello: 1, get speculativeAuthenticate(): never { throw new Error('unreadable'); } })).to.equal(true);
      // A field with a value counts wherever the document holds it: inherited too (as a class's getter), or unreadable there.
      expect(isSensitiveCommand('hello', Object.assign(Object.create({ speculativeAuthenticate: { saslStart: 1 } }) as object, { hello: 1 }))).to.equal(true);
      const unreadable = Object.create({ get speculativeAuthenticate(): never { throw new Error('unreadable'); } }) as object;
      expect(isSensitiveCommand('hello', Object.assign(unreadable, { hello: 1 }))).to.equal(true);
    });

    it('a redacted server error keeps code, codeName and errorLabels only; other errors stay as they are', function () {
      const error = new MongoServerError({ ok: 0, code: 18, codeName: 'AuthenticationFailed', errmsg: 'secret in here', errorLabels: ['SystemOverloadedError'], extra: 'secret' });
      const redacted = redactedFailure(error) as MongoServerError;
      expect(redacted).to.be.instanceOf(MongoServerError);
      expect(redacted.response).to.deep.equal({ ok: 0, code: 18, codeName: 'AuthenticationFailed', errorLabels: ['SystemOverloadedError'] });
      expect(redacted.message).to.equal('command failed');
      expect(redacted.hasErrorLabel('SystemOverloadedError')).to.equal(true);
      const network = new MongoNetworkError('h:1', 'lost');
      expect(redactedFailure(network)).to.equal(network);
      // A reply that cannot be read: the detail (which may quote the reply) left out, the class and labels kept.
      const quoting = new MongoNetworkError('h:1', 'connection 3 to h:1 failed: wire-protocol error: invalid BSON: Invalid regular expression: /reply-secret/', {
        cause: new WireProtocolError('invalid BSON: Invalid regular expression: /reply-secret/'),
        labels: ['SystemOverloadedError'],
      });
      const redactedNetwork = redactedFailure(quoting) as MongoNetworkError;
      expect(redactedNetwork).to.be.instanceOf(MongoNetworkError);
      expect(redactedNetwork.address).to.equal('h:1');
      expect(redactedNetwork.message).to.match(/^connection 3 to h:1 failed: wire-protocol error: /).and.not.include('reply-secret');
      expect(redactedNetwork.cause).to.equal(undefined);
      expect(redactedNetwork.hasErrorLabel('SystemOverloadedError')).to.equal(true);
      const timeout = new MongoNetworkTimeoutError('h:1', 'timed out');
      expect(redactedFailure(timeout)).to.equal(timeout);
    });

    it('a redacted server error leaves out what the server did not give: no code, codeName or errorLabels key', function () {
      const redacted = redactedFailure(new MongoServerError({ ok: 0, errmsg: 'secret in here' })) as MongoServerError;
      expect(redacted.response).to.deep.equal({ ok: 0 });
      expect(redacted.message).to.equal('command failed');
    });

    it('a reply that cannot be read: the WireProtocolError keeps its class and labels, and says its detail is redacted', function () {
      const redacted = redactedFailure(new WireProtocolError('invalid BSON: /reply-secret/', { labels: ['SystemOverloadedError'] }));
      expect(redacted).to.be.instanceOf(WireProtocolError);
      expect(redacted.message).to.match(/redacted/).and.not.include('reply-secret');
      expect((redacted as WireProtocolError).hasErrorLabel('SystemOverloadedError')).to.equal(true);
    });

    it('a network error caused by a reply that cannot be read, further down its cause chain or with a message of another form, is redacted; its chain is followed 8 causes deep, so a cyclic one ends', function () {
      /** A network error whose cause chain is `depth` errors deep, the last a WireProtocolError quoting the reply. */
      const chained = (depth: number, message = 'lost the reply'): MongoNetworkError => {
        let cause: Error = new WireProtocolError('invalid BSON: /reply-secret/');
        for (let i = 1; i < depth; i++) cause = new Error(`wrapping ${i}`, { cause });
        return new MongoNetworkError('h:1', message, { cause });
      };
      // No "wire-protocol error" in its message: the connection and address still said, the detail not.
      const other = redactedFailure(chained(1, 'lost the reply: /reply-secret/'));
      expect(other).to.be.instanceOf(MongoNetworkError);
      expect(other.message).to.match(/^connection to h:1 failed: wire-protocol error: .*redacted/).and.not.include('reply-secret');
      expect(redactedFailure(chained(8)).message).to.match(/redacted/);
      const beyond = chained(9);
      expect(redactedFailure(beyond)).to.equal(beyond);
      const cyclic = new MongoNetworkError('h:1', 'lost', { cause: new Error('first') });
      (cyclic.cause as Error).cause = cyclic;
      expect(redactedFailure(cyclic)).to.equal(cyclic);
    });
  });
});
