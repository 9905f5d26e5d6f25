import { expect } from 'chai';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { AuthenticationError, ClientClosedError, ConnectionPool, MongoNetworkError, MongoServerError, PoolCallbackError, PoolClearedError, PoolClosedError, ServerSelectionError, type CommandEvent, type ConnectionLogMessage, type LogSink } from '../../lib';
import { Long } from 'bson';
import { parseAddress } from '../../lib/address';
import { ClientLogMessage, CommandLogMessage, commandLogMessage, connectionLogMessage, heartbeatLogMessage, logError, selectionFailure, serverLogFields, TopologyLogMessage, truncate } from '../../lib/logging/log-message';
import { MockConnectionFactory, VirtualClock, type MockConnection } from '../../lib/testing';

/** A pool whose connection log messages are captured by a sink. */
function loggedPool(extra: Record<string, unknown> = {}, factory = new MockConnectionFactory()) {
  const messages: ConnectionLogMessage[] = [];
  const sink: LogSink = { write: (m) => messages.push(m as ConnectionLogMessage) };
  const pool = new ConnectionPool<MockConnection>({
    address: 'db.example:27018',
    maxPoolSize: 5,
    waitQueueTimeoutMS: 2000,
    connectionFactory: factory.factory,
    logging: { componentSeverities: { connection: 'debug' }, path: sink },
    ...extra,
  });
  return { pool, messages, json: () => messages.map((m) => { const { t, ...rest } = m.toJSON(); expect(t).to.be.a('string'); return rest; }) };
}

describe('connection log messages', function () {
  it('a checkout whose start was not timed logs no durationMS, and no duration in its text', function () {
    const server = { address: 'db.example:27018', host: 'db.example', port: 27018 };
    const base = { address: 'db.example:27018', time: 0, duration: undefined };
    const out = connectionLogMessage({ ...base, type: 'ConnectionCheckedOut', connectionId: 3 }, server, 1000);
    expect(out.toJSON()).to.not.have.key('durationMS');
    expect(out.render()).to.equal('Connection checked out: address=db.example:27018, driver-generated ID=3');
    const failed = connectionLogMessage({ ...base, type: 'ConnectionCheckOutFailed', reason: 'poolClosed' }, server, 1000);
    expect(failed.toJSON()).to.not.have.key('durationMS');
    expect(failed.render()).to.equal('Checkout failed for connection to db.example:27018. Reason: Connection pool was closed.');
    const timed = connectionLogMessage({ ...base, type: 'ConnectionCheckedOut', connectionId: 3, duration: 2 }, server, 1000);
    expect(timed.render()).to.equal('Connection checked out: address=db.example:27018, driver-generated ID=3, duration=2 ms');
  });

  it('writes an IPv6 serverHost in brackets in the text, as every event and error writes the address, and a socket path without a port', async function () {
    // "[fe80::a]:1234" cannot be misread; "fe80::a:1234" is itself an IPv6 address, of another server.
    for (const [address, serverHost, serverPort, where] of [
      ['[FE80::A]:1234', 'fe80::a', 1234, '[fe80::a]:1234'],
      ['/tmp/mongodb-27017.sock', '/tmp/mongodb-27017.sock', undefined, '/tmp/mongodb-27017.sock'],
    ] as const) {
      const { pool, messages, json } = loggedPool({ address });
      pool.ready();
      pool.checkIn(await pool.checkOut());
      pool.close();
      for (const fields of json()) {
        expect(fields).to.include({ serverHost });
        if (serverPort === undefined) expect(fields).to.not.have.property('serverPort');
        else expect(fields).to.include({ serverPort });
      }
      expect(messages.map((m) => m.render())).to.include.members([
        `Connection pool created for ${where} using options maxPoolSize=5, waitQueueTimeoutMS=2000`,
        `Connection pool ready for ${where}`,
        `Checkout started for connection to ${where}`,
        `Connection created: address=${where}, driver-generated ID=1`,
        `Connection checked in: address=${where}, driver-generated ID=1`,
        `Connection pool closed for ${where}`,
      ]);
    }
  });

  it('Connection pool draining (extension) gives the deadline as timeoutMS, the key of the event it reports', async function () {
    for (const timeoutMS of [5000, undefined]) {
      const { pool, json, messages } = loggedPool();
      pool.ready();
      const drained = pool.drain(timeoutMS === undefined ? undefined : { timeoutMS });
      await drained;
      const draining = json().find((m) => m.message === 'Connection pool draining');
      const rendered = messages.find((m) => m.fields.message === 'Connection pool draining')!.render();
      if (timeoutMS === undefined) {
        expect(draining).to.not.have.any.keys('timeoutMS', 'durationMS');
        expect(rendered).to.equal('Connection pool draining for db.example:27018');
      } else {
        expect(draining).to.include({ timeoutMS: 5000 }).and.not.have.key('durationMS');
        expect(rendered).to.equal('Connection pool draining for db.example:27018, closing in at most 5000 ms');
      }
    }
  });

  it('create → ready → checkOut → checkIn → close, field by field', async function () {
    const { pool, json, messages } = loggedPool();
    pool.ready();
    const c = await pool.checkOut();
    pool.checkIn(c);
    pool.close();
    const common = { c: 'connection', s: 'debug', serverHost: 'db.example', serverPort: 27018 };
    const all = json();
    const durations = all.map((m) => m.durationMS);
    expect(all).to.deep.equal([
      { ...common, message: 'Connection pool created', maxPoolSize: 5, waitQueueTimeoutMS: 2000 },
      { ...common, message: 'Connection pool ready' },
      { ...common, message: 'Connection checkout started' },
      { ...common, message: 'Connection created', driverConnectionId: 1 },
      { ...common, message: 'Connection ready', driverConnectionId: 1, durationMS: durations[4] },
      { ...common, message: 'Connection checked out', driverConnectionId: 1, durationMS: durations[5] },
      { ...common, message: 'Connection checked in', driverConnectionId: 1 },
      { ...common, message: 'Connection closed', driverConnectionId: 1, reason: 'Connection pool was closed' },
      { ...common, message: 'Connection pool closed' },
    ]);
    expect(durations[4]).to.be.a('number');
    expect(messages.map((m) => m.render())).to.deep.equal([
      'Connection pool created for db.example:27018 using options maxPoolSize=5, waitQueueTimeoutMS=2000',
      'Connection pool ready for db.example:27018',
      'Checkout started for connection to db.example:27018',
      'Connection created: address=db.example:27018, driver-generated ID=1',
      `Connection ready: address=db.example:27018, driver-generated ID=1, established in=${durations[4]} ms`,
      `Connection checked out: address=db.example:27018, driver-generated ID=1, duration=${durations[5]} ms`,
      'Connection checked in: address=db.example:27018, driver-generated ID=1',
      'Connection closed: address=db.example:27018, driver-generated ID=1. Reason: Connection pool was closed.',
      'Connection pool closed for db.example:27018',
    ]);
  });

  it('Connection pool created lists the options the user set in the order the CMAP message gives them', function () {
    // Set in the opposite order: what is written follows the message's own order, not the user's nor the pool's.
    const { pool, messages } = loggedPool({ waitQueueTimeoutMS: 250, maxConnecting: 3, maxPoolSize: 7, minPoolSize: 2, maxIdleTimeMS: 60000 });
    pool.close();
    const created = messages[0]!;
    expect(created.render()).to.equal(
      'Connection pool created for db.example:27018 using options maxIdleTimeMS=60000, minPoolSize=2, maxPoolSize=7, maxConnecting=3, waitQueueTimeoutMS=250',
    );
    const { t: _t, c: _c, s: _s, ...fields } = created.toJSON();
    expect(Object.keys(fields)).to.deep.equal(['message', 'serverHost', 'serverPort', 'maxIdleTimeMS', 'minPoolSize', 'maxPoolSize', 'maxConnecting', 'waitQueueTimeoutMS']);
  });

  it('a failed checkout carries the reason text, the error and the duration', async function () {
    const boom = new MongoServerError({ ok: 0, code: 18, codeName: 'AuthenticationFailed', errmsg: 'bad auth' });
    const { pool, messages } = loggedPool({}, new MockConnectionFactory({ failWith: () => boom }));
    pool.ready();
    await pool.checkOut().then(
      () => expect.fail('must fail'),
      () => undefined,
    );
    pool.close();
    const failed = messages.find((m) => m.fields.message === 'Connection checkout failed')!;
    expect(failed.fields).to.include({ reason: 'An error occurred while trying to establish a new connection' });
    expect(failed.fields.error).to.deep.include({ type: 'MongoServerError', message: 'bad auth', code: 18, codeName: 'AuthenticationFailed' });
    expect(failed.fields.durationMS).to.be.a('number');
    expect(failed.render()).to.match(
      /^Checkout failed for connection to db\.example:27018\. Reason: An error occurred while trying to establish a new connection\. Error: MongoServerError: bad auth\. Duration: [\d.]+ ms$/,
    );
    const closed = messages.find((m) => m.fields.message === 'Connection closed')!;
    expect(closed.fields.reason).to.equal('An error occurred while using the connection');
    expect(messages.find((m) => m.fields.message === 'Connection pool cleared')!.render()).to.equal('Connection pool for db.example:27018 cleared');
  });

  it('a client message: component client, level warn, its text as the message and as the unstructured form', function () {
    const message = new ClientLogMessage(Date.UTC(2026, 0, 2, 3, 4, 5), { message: 'unknown option fooBar is ignored' });
    expect(message).to.include({ component: 'client', level: 'warn' });
    expect(message.toJSON()).to.deep.equal({ t: '2026-01-02T03:04:05.000Z', c: 'client', s: 'warn', message: 'unknown option fooBar is ignored' });
    expect(message.render()).to.equal('unknown option fooBar is ignored');
  });

  it('truncates to the max length without splitting a surrogate pair, and marks it with ...', function () {
    expect(truncate('abcdef', 10)).to.equal('abcdef');
    expect(truncate('abcdef', 3)).to.equal('abc...');
    const withEmoji = 'ab😀cd'; // the emoji is two UTF-16 code units at indexes 2 and 3
    expect(truncate(withEmoji, 3)).to.equal('ab...');
    expect(truncate(withEmoji, 4)).to.equal('ab😀...');
    // The high surrogates at both ends of their range, and a lone low surrogate (cut like any code unit).
    expect(truncate('a\ud800\udc00b', 2)).to.equal('a...');
    expect(truncate('a\udbff\udfffb', 2)).to.equal('a...');
    expect(truncate('a\udc00bc', 2)).to.equal('a\udc00...');
    const long = new MongoServerError({ ok: 0, errmsg: 'x'.repeat(50), code: 2 });
    const messages: ConnectionLogMessage[] = [];
    const sink: LogSink = { write: (m) => messages.push(m as ConnectionLogMessage) };
    const { pool } = loggedPool(
      { logging: { componentSeverities: { connection: 'debug' }, maxDocumentLength: 10, path: sink } },
      new MockConnectionFactory({ failWith: () => long }),
    );
    pool.ready();
    return pool.checkOut().then(
      () => expect.fail('must fail'),
      () => {
        pool.close();
        const error = messages.find((m) => m.fields.error)!.fields.error!;
        expect(error.message).to.equal(`${'x'.repeat(10)}...`);
        expect(error.response!.length).to.equal(13);
      },
    );
  });

  /** The error a checkout fails with when establishing fails with `error`, and the `error` field logged for it. */
  async function loggedFailure(error: Error, maxDocumentLength?: number) {
    const messages: ConnectionLogMessage[] = [];
    const sink: LogSink = { write: (m) => messages.push(m as ConnectionLogMessage) };
    const { pool } = loggedPool(
      { logging: { componentSeverities: { connection: 'debug' }, path: sink, ...(maxDocumentLength === undefined ? {} : { maxDocumentLength }) } },
      new MockConnectionFactory({ failWith: () => error }),
    );
    pool.ready();
    const failed = await pool.checkOut().then(
      () => undefined,
      (e: unknown) => e,
    );
    pool.close();
    expect(failed).to.equal(error);
    expect(messages.map((m) => m.fields.message)).to.include('Connection pool closed');
    const logged = messages.filter((m) => m.fields.error).map((m) => m.fields.error!);
    return Object.assign(logged[0], { times: logged.length });
  }

  it("writes an error's cause too: a failed authentication keeps the server's code and reply that explain it", async function () {
    const reply = new MongoServerError({ ok: 0, code: 18, codeName: 'AuthenticationFailed', errmsg: 'Authentication failed.' });
    const error = new AuthenticationError('Authentication failed for "app" on "admin" with SCRAM-SHA-256: Authentication failed.', reply);
    const messages: ConnectionLogMessage[] = [];
    const sink: LogSink = { write: (m) => messages.push(m as ConnectionLogMessage) };
    const { pool } = loggedPool(
      { logging: { componentSeverities: { connection: 'debug' }, path: sink } },
      new MockConnectionFactory({ failWith: () => error }),
    );
    pool.ready();
    await pool.checkOut().then(undefined, () => undefined);
    pool.close();
    const failed = messages.find((m) => m.fields.message === 'Connection checkout failed')!;
    const closed = messages.find((m) => m.fields.message === 'Connection closed')!;
    for (const logged of [failed, closed]) {
      expect(logged.fields.error).to.deep.equal({
        type: 'AuthenticationError',
        message: error.message,
        cause: {
          type: 'MongoServerError',
          message: 'Authentication failed.',
          code: 18,
          codeName: 'AuthenticationFailed',
          response: '{"ok":0,"code":18,"codeName":"AuthenticationFailed","errmsg":"Authentication failed."}',
        },
      });
    }
    expect(failed.render()).to.match(
      /\. Error: AuthenticationError: Authentication failed for "app" on "admin" with SCRAM-SHA-256: Authentication failed\., caused by MongoServerError: Authentication failed\.\. Duration: [\d.]+ ms$/,
    );
  });

  it('writes what the error reports of the pool and the service: the holdings of an evicted checkout, the serviceId of an establishment error', async function () {
    const clock = new VirtualClock();
    const { pool, messages } = loggedPool({ maxPoolSize: 1, waitQueueTimeoutMS: 0, scheduler: clock }, new MockConnectionFactory({ scheduler: clock, establishDelayMS: 10 }));
    pool.ready();
    pool.checkOut().subscribe();
    clock.advance(10);
    const waiting = pool.checkOut().then(undefined, (e: unknown) => e);
    clock.advance(40);
    pool.clear({ cause: new Error('connection 1 reset by peer') });
    const error = (await waiting) as PoolClearedError;
    expect(error.pool).to.not.equal(undefined);
    const failed = messages.find((m) => m.fields.message === 'Connection checkout failed')!;
    expect(failed.fields.error?.pool).to.deep.equal({
      inUseConnectionCount: 1,
      inUseByPurpose: { cursor: 0, transaction: 0, operation: 1 },
      pendingConnectionCount: 0,
      availableConnectionCount: 0,
      waitQueueLength: 1,
      oldestCheckOut: { connectionId: 1, duration: 40 },
    });
    pool.close();

    const refused = new AuthenticationError('Authentication failed for "app" on "admin" with SCRAM-SHA-256: Authentication failed.');
    refused.serviceId = '65f0c0ffee0000000000000a';
    const server = { address: 'db.example:27018', host: 'db.example', port: 27018 };
    const closed = connectionLogMessage({ type: 'ConnectionClosed', address: 'db.example:27018', time: 0, connectionId: 4, reason: 'error', error: refused }, server, 1000);
    expect(closed.fields.error).to.deep.include({ type: 'AuthenticationError', serviceId: '65f0c0ffee0000000000000a' });
  });

  it('writes of a factory error\'s own `pool` property only the holdings\' counts: nothing else it holds (a password, itself), nor a serviceId longer than the max length', async function () {
    const foreign: Record<string, unknown> = { inUseConnectionCount: 1, inUseByPurpose: { operation: 1, secret: 'hunter2' }, password: 'hunter2', oldestCheckOut: { connectionId: 3, duration: 5, checkOutStack: 'x'.repeat(50), token: 'hunter2' } };
    foreign.self = foreign;
    const error = Object.assign(new Error('connect failed'), { pool: foreign, serviceId: 'y'.repeat(5000) });
    const logged = await loggedFailure(error, 20);
    expect(() => JSON.stringify(logged)).to.not.throw();
    expect(JSON.stringify(logged)).to.not.include('hunter2');
    expect(logged.pool).to.deep.equal({ inUseConnectionCount: 1, inUseByPurpose: { operation: 1 }, oldestCheckOut: { connectionId: 3, duration: 5, checkOutStack: `${'x'.repeat(20)}...` } });
    expect(logged.serviceId).to.equal(`${'y'.repeat(20)}...`);
  });

  it('writes the establishment error a PoolCallbackError carries when clearOnEstablishmentError threw', async function () {
    const refused = new MongoNetworkError('db.example:27018', 'connect ECONNREFUSED', { labels: ['SystemOverloadedError', 'RetryableError'] });
    const { pool, messages } = loggedPool(
      {
        clearOnEstablishmentError: () => {
          throw new Error('policy bug');
        },
      },
      new MockConnectionFactory({ failWith: () => refused }),
    );
    pool.ready();
    const error = await pool.checkOut().then(undefined, (e: unknown) => e);
    pool.close();
    expect(error).to.be.instanceOf(PoolCallbackError);
    const failed = messages.find((m) => m.fields.message === 'Connection checkout failed')!;
    expect(failed.fields.error?.establishmentError).to.deep.equal({
      type: 'MongoNetworkError',
      message: 'connect ECONNREFUSED',
      errorLabels: ['SystemOverloadedError', 'RetryableError'],
    });
  });

  it('follows a chain of causes to its end, stopping at a cause met before and after 8 causes', async function () {
    const looped = new Error('outer', { cause: new Error('inner') });
    (looped.cause as Error).cause = looped;
    const loop = await loggedFailure(looped);
    expect(loop).to.deep.include({ type: 'Error', message: 'outer', cause: { type: 'Error', message: 'inner' } });
    let deep = new Error('cause 20');
    for (let i = 19; i >= 0; i--) deep = new Error(`cause ${i}`, { cause: deep });
    let logged: { message: string; cause?: unknown } | undefined = await loggedFailure(deep);
    const chain: string[] = [];
    for (; logged !== undefined; logged = logged.cause as typeof logged) chain.push(logged.message);
    expect(chain).to.deep.equal(['cause 0', 'cause 1', 'cause 2', 'cause 3', 'cause 4', 'cause 5', 'cause 6', 'cause 7', 'cause 8']);
    const unreadable = Object.defineProperty(new Error('top'), 'cause', { get: () => { throw new Error('no cause'); } });
    expect(await loggedFailure(unreadable)).to.include({ message: 'top' }).and.not.have.property('cause');
    expect(await loggedFailure(new Error('top', { cause: 'a string' }))).to.not.have.property('cause');
  });

  it('writes a reply nested 100,000 deep as far as the max length, instead of throwing in the events$ subscriber', async function () {
    let deep: Record<string, unknown> = {};
    for (let i = 0; i < 100_000; i++) deep = { a: deep };
    const logged = await loggedFailure(new MongoServerError({ ok: 0, errmsg: 'nested', code: 2, a: deep }));
    expect(logged).to.include({ type: 'MongoServerError', message: 'nested', code: 2 });
    expect(logged.response).to.equal(`${`{"ok":0,"errmsg":"nested","code":2,"a":${'{"a":'.repeat(200)}`.slice(0, 1000)}...`);
  });

  it('says a reply that cannot be written is so (a getter that throws), instead of throwing in the events$ subscriber', async function () {
    const reply = Object.defineProperty({ ok: 0, errmsg: 'odd', code: 2 }, 'bad', {
      enumerable: true,
      get: () => {
        throw new Error('no reading this');
      },
    });
    const logged = await loggedFailure(new MongoServerError(reply));
    expect(logged).to.include({ message: 'odd', response: '(the document cannot be written as Extended JSON: no reading this)' });
  });

  it("writes a factory's error whose name, message or labels cannot be read, or are not strings, instead of throwing in the events$ subscriber", async function () {
    const unreadable = (key: string) =>
      Object.defineProperty(new Error('hidden'), key, {
        get: () => {
          throw new Error(`no ${key}`);
        },
      });
    expect(await loggedFailure(unreadable('message'))).to.include({ type: 'Error', message: "(the error's message cannot be read)", times: 2 });
    expect(await loggedFailure(unreadable('name'))).to.include({ type: "(the error's name cannot be read)", message: 'hidden', times: 2 });
    const labelled = await loggedFailure(unreadable('errorLabels'));
    expect(labelled).to.include({ type: 'Error', message: 'hidden' }).and.not.have.property('errorLabels');
    expect(await loggedFailure(Object.assign(new Error(), { message: 42 as unknown as string }))).to.include({ message: '42' });
    const server = new MongoServerError({ ok: 0, errmsg: 'odd', code: 2 });
    Object.defineProperty(server, 'response', { get: () => { throw new Error('gone'); } });
    expect(await loggedFailure(server)).to.include({ message: 'odd', code: 2, response: '(the reply cannot be read: gone)' });
  });

  it('reads a huge reply only as far as the max length: 1,000,000 elements behind getters, 137 read at max 1000', async function () {
    let reads = 0;
    const element = Object.defineProperty({}, 'n', { enumerable: true, get: () => ++reads });
    const reply = { ok: 0, errmsg: 'huge', cursor: { firstBatch: new Array<object>(1_000_000).fill(element) } };
    const logged = await loggedFailure(new MongoServerError(reply), 1000);
    // The lower bound of what is written passes 1000 after 137 elements (see the documentPrefix spec), in each message
    // that logs the error (Connection closed, Connection checkout failed).
    expect(logged.times).to.equal(2);
    expect(reads).to.equal(137 * logged.times);
    expect(logged.response).to.have.length(1003);
    expect(logged.response!.startsWith('{"ok":0,"errmsg":"huge","cursor":{"firstBatch":[{"n":1},{"n":2},')).to.equal(true);
  });

  it('writes the error of a connection closed by one in its text, and no options on a pool created without any', function () {
    const server = { address: 'db.example:27018', host: 'db.example', port: 27018 };
    const reset = new MongoNetworkError('db.example:27018', 'connection 4 to db.example:27018 closed: ECONNRESET');
    const closed = connectionLogMessage({ type: 'ConnectionClosed', address: 'db.example:27018', time: 0, connectionId: 4, reason: 'error', error: reset }, server, 1000);
    expect(closed.render()).to.equal(
      'Connection closed: address=db.example:27018, driver-generated ID=4. Reason: An error occurred while using the connection. Error: MongoNetworkError: connection 4 to db.example:27018 closed: ECONNRESET',
    );
    // A pool created with no option the message lists: its text has no "using options", its fields none of them.
    const created = connectionLogMessage({ type: 'ConnectionPoolCreated', address: 'db.example:27018', time: 0, options: {} }, server, 1000);
    expect(created.render()).to.equal('Connection pool created for db.example:27018');
    expect(Object.keys(created.fields)).to.deep.equal(['message', 'serverHost', 'serverPort']);
  });

  it('gives each close and checkout failure reason the text the CMAP spec names (extensions: texts of their own)', function () {
    const server = { address: 'db.example:27018', host: 'db.example', port: 27018 };
    const closed = (reason: string): unknown =>
      connectionLogMessage({ type: 'ConnectionClosed', address: 'db.example:27018', time: 0, connectionId: 1, reason } as never, server, 1000).fields.reason;
    expect(['stale', 'idle', 'error', 'poolClosed', 'expired'].map(closed)).to.deep.equal([
      'Connection became stale because the pool was cleared',
      'Connection has been available but unused for longer than the configured max idle time',
      'An error occurred while using the connection',
      'Connection pool was closed',
      'Connection reached its maximum lifetime (maxLifeTimeMS)',
    ]);
    const failed = (reason: string): unknown =>
      connectionLogMessage({ type: 'ConnectionCheckOutFailed', address: 'db.example:27018', time: 0, reason, duration: 1 } as never, server, 1000).fields.reason;
    expect(['timeout', 'connectionError', 'poolClosed', 'cancelled', 'waitQueueFull'].map(failed)).to.deep.equal([
      'Wait queue timeout elapsed without a connection becoming available',
      'An error occurred while trying to establish a new connection',
      'Connection pool was closed',
      'The checkout was cancelled before a connection was delivered',
      'The wait queue was full (maxWaitQueueSize checkouts were waiting)',
    ]);
  });

  it('writes the serviceId of a load-balanced pool\'s clear in its fields and its text', function () {
    const server = { address: 'lb.example:27017', host: 'lb.example', port: 27017 };
    const serviceId = '65f0c0ffee0000000000000a';
    const cleared = connectionLogMessage({ type: 'ConnectionPoolCleared', address: 'lb.example:27017', time: 0, serviceId } as never, server, 1000);
    expect(cleared.fields).to.deep.equal({ message: 'Connection pool cleared', serverHost: 'lb.example', serverPort: 27017, serviceId });
    expect(cleared.render()).to.equal(`Connection pool for lb.example:27017 cleared for serviceId ${serviceId}`);
  });

  it('stops at a loop through the establishment error of a PoolCallbackError, writing each error once', async function () {
    const establishment = new Error('connect ECONNREFUSED');
    const policy = new PoolCallbackError('db.example:27018', 'clearOnEstablishmentError', 'clearOnEstablishmentError threw', { cause: new Error('policy bug') }, establishment);
    (establishment as { cause?: unknown }).cause = policy; // the establishment error leads back to the error that carries it
    const logged = await loggedFailure(policy);
    expect(logged).to.deep.include({
      type: 'PoolCallbackError',
      message: 'clearOnEstablishmentError threw',
      establishmentError: { type: 'Error', message: 'connect ECONNREFUSED' },
      cause: { type: 'Error', message: 'policy bug' },
    });
  });

  it('writes the holdings of a pool whose purposes or oldest checkout are missing (null), without them', async function () {
    const error = Object.assign(new Error('connect failed'), { pool: { inUseConnectionCount: 2, inUseByPurpose: null, pendingConnectionCount: 1, oldestCheckOut: null } });
    const logged = await loggedFailure(error);
    expect(logged.pool).to.deep.equal({ inUseConnectionCount: 2, pendingConnectionCount: 1 });
  });

  it('leaves out keys without a value: a Unix domain socket has no serverPort, in every message', async function () {
    const { pool, json, messages } = loggedPool({ address: '/tmp/mongodb-27017.sock' });
    pool.ready();
    pool.checkIn(await pool.checkOut());
    pool.close();
    const lines = json();
    expect(lines.map((l) => l.message)).to.include.ordered.members(['Connection pool created', 'Connection pool ready', 'Connection checkout started']);
    for (const line of lines) {
      expect(line.serverHost).to.equal('/tmp/mongodb-27017.sock');
      expect(line, String(line.message)).to.not.have.property('serverPort');
    }
    // Nor as a key without a value in the fields a sink is handed, but in the three checkout messages (one literal each).
    const checkouts = ['Connection checkout started', 'Connection checked out', 'Connection checked in'];
    for (const m of messages) {
      if (checkouts.includes(m.fields.message)) expect(m.fields.serverPort).to.equal(undefined);
      else expect(Object.keys(m.fields), m.fields.message).to.not.include('serverPort');
    }
  });

  it('builds nothing and writes nothing when connection logging is off', function () {
    const pool = new ConnectionPool({ address: 'h:1', connectionFactory: new MockConnectionFactory().factory, logging: { componentSeverities: { connection: 'info' } } });
    let completed = false;
    let received = 0;
    pool.log$.subscribe({ next: () => received++, complete: () => (completed = true) });
    expect(completed).to.equal(true);
    expect(received).to.equal(0);
    expect((pool as unknown as { poolState: { observed: boolean } }).poolState.observed).to.equal(false);
    pool.close();
  });

  it('appends JSON lines to a file named by MONGODB_LOG_PATH (programmatic path here), closing it with the pool', async function () {
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'rxcmap-log-')), 'pool.log');
    fs.writeFileSync(file, 'existing line\n');
    const pool = new ConnectionPool({ address: 'h:1', connectionFactory: new MockConnectionFactory().factory, logging: { componentSeverities: { connection: 'debug' }, path: file } });
    pool.ready();
    pool.close();
    // The file is written through a buffered stream, flushed and closed once the pool is done.
    const deadline = Date.now() + 5000;
    while (fs.readFileSync(file, 'utf8').trim().split('\n').length < 4 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    const lines = fs.readFileSync(file, 'utf8').trim().split('\n');
    expect(lines[0]).to.equal('existing line');
    expect(lines.slice(1).map((l) => JSON.parse(l).message)).to.deep.equal(['Connection pool created', 'Connection pool ready', 'Connection pool closed']);
  });
});

describe('heartbeat log messages (component topology)', function () {
  const topologyId = '65f1c0a2b3c4d5e6f7a8b9c0';
  const server = { address: 'db.example:27018', host: 'db.example', port: 27018 };
  const base = { address: 'db.example:27018', time: Date.UTC(2024, 0, 2, 3, 4, 5), connectionId: 0 };
  const json = (m: ReturnType<typeof heartbeatLogMessage>): Record<string, unknown> => {
    const { t, ...rest } = m.toJSON();
    expect(t).to.equal('2024-01-02T03:04:05.000Z');
    return rest;
  };

  it('started, succeeded, failed: the spec\'s keys (debug, topology), and its unstructured sentences', function () {
    const started = heartbeatLogMessage({ ...base, type: 'ServerHeartbeatStarted', awaited: false }, server, topologyId, 1000);
    expect(json(started)).to.deep.equal({ c: 'topology', s: 'debug', message: 'Server heartbeat started', topologyId, serverHost: 'db.example', serverPort: 27018, driverConnectionId: 0, awaited: false });
    expect(started.render()).to.equal(`Heartbeat started for db.example:27018 on connection with driver-generated ID 0 in topology with ID ${topologyId}. Awaited: false`);

    const reply = { ok: 1, isWritablePrimary: true, connectionId: 7 };
    const succeeded = heartbeatLogMessage({ ...base, type: 'ServerHeartbeatSucceeded', serverConnectionId: 7, awaited: true, duration: 12.5, reply }, server, topologyId, 1000);
    expect(json(succeeded)).to.deep.equal({
      c: 'topology',
      s: 'debug',
      message: 'Server heartbeat succeeded',
      topologyId,
      serverHost: 'db.example',
      serverPort: 27018,
      driverConnectionId: 0,
      serverConnectionId: 7,
      awaited: true,
      durationMS: 12.5,
      reply: '{"ok":1,"isWritablePrimary":true,"connectionId":7}',
    });
    expect(succeeded.render()).to.equal(
      `Heartbeat succeeded in 12.5 ms for db.example:27018 on connection with driver-generated ID 0 and server-generated ID 7 in topology with ID ${topologyId}. Awaited: true. Reply: {"ok":1,"isWritablePrimary":true,"connectionId":7}`,
    );

    const error = new MongoServerError({ ok: 0, code: 91, codeName: 'ShutdownInProgress', errmsg: 'shutting down' });
    const failed = heartbeatLogMessage({ ...base, type: 'ServerHeartbeatFailed', serverConnectionId: 7, awaited: false, duration: 3, error }, server, topologyId, 1000);
    const failedJson = json(failed);
    expect(failedJson).to.deep.include({ message: 'Server heartbeat failed', driverConnectionId: 0, serverConnectionId: 7, awaited: false, durationMS: 3 });
    expect(failedJson.failure).to.deep.include({ type: 'MongoServerError', message: 'shutting down', code: 91, codeName: 'ShutdownInProgress' });
    expect(failed.render()).to.equal(
      `Heartbeat failed in 3 ms for db.example:27018 on connection with driver-generated ID 0 and server-generated ID 7 in topology with ID ${topologyId}. Awaited: false. Failure: MongoServerError: shutting down`,
    );
  });

  it('truncates the reply and the failure to maxDocumentLength; a Unix domain socket has no serverPort, an IPv6 host is written in brackets', function () {
    const reply = { ok: 1, blob: 'x'.repeat(100_000) };
    const cut = heartbeatLogMessage({ ...base, type: 'ServerHeartbeatSucceeded', awaited: false, duration: 1, reply }, server, topologyId, 20);
    expect(cut.fields.reply).to.equal('{"ok":1,"blob":"xxxx...');
    const failed = heartbeatLogMessage({ ...base, type: 'ServerHeartbeatFailed', awaited: false, duration: 1, error: new MongoNetworkError('h:1', 'y'.repeat(50)) }, server, topologyId, 10);
    expect(failed.fields.failure?.message).to.equal('yyyyyyyyyy...');

    const socket = { address: '/tmp/mongodb-27017.sock', host: '/tmp/mongodb-27017.sock' };
    const overSocket = heartbeatLogMessage({ ...base, type: 'ServerHeartbeatStarted', awaited: false }, socket, topologyId, 1000);
    expect(overSocket.toJSON()).to.not.have.key('serverPort');
    // A key without a value is left out of the fields themselves (logging spec, "Omitting Null Values"), and out of the
    // structured form even when a message is made with one.
    expect(overSocket.fields).to.not.have.any.keys('serverPort', 'serverConnectionId');
    const made = new TopologyLogMessage(base.time, { ...overSocket.fields, serverPort: undefined, serverConnectionId: undefined });
    expect(made.toJSON()).to.not.have.any.keys('serverPort', 'serverConnectionId');
    expect(overSocket.render()).to.match(/^Heartbeat started for \/tmp\/mongodb-27017\.sock on connection/);
    const v6 = heartbeatLogMessage({ ...base, type: 'ServerHeartbeatStarted', awaited: true }, { address: '[::1]:27017', host: '::1', port: 27017 }, topologyId, 1000);
    expect(v6.fields).to.include({ serverHost: '::1', serverPort: 27017 });
    expect(v6.render()).to.match(/^Heartbeat started for \[::1\]:27017 on connection/);
  });
});

describe('topology life log messages (component topology)', function () {
  const topologyId = '65f1c0a2b3c4d5e6f7a8b9c0';
  const time = Date.UTC(2024, 0, 2, 3, 4, 5);

  it('their structured and unstructured forms, as the SDAM logging spec gives them; a socket path has no serverPort key', function () {
    const started = new TopologyLogMessage(time, { message: 'Starting topology monitoring', topologyId });
    expect(started.toJSON()).to.deep.equal({ t: '2024-01-02T03:04:05.000Z', c: 'topology', s: 'debug', message: 'Starting topology monitoring', topologyId });
    expect(started.render()).to.equal(`Starting monitoring for topology with ID ${topologyId}`);
    expect(new TopologyLogMessage(time, { message: 'Stopped topology monitoring', topologyId }).render()).to.equal(`Stopped monitoring for topology with ID ${topologyId}`);
    const server = new TopologyLogMessage(time, { message: 'Starting server monitoring', topologyId, ...serverLogFields(parseAddress('[::1]:27017')) });
    expect(server.toJSON()).to.deep.equal({ t: '2024-01-02T03:04:05.000Z', c: 'topology', s: 'debug', message: 'Starting server monitoring', topologyId, serverHost: '::1', serverPort: 27017 });
    expect(server.render()).to.equal(`Starting monitoring for server [::1]:27017 in topology with ID ${topologyId}`);
    const socket = new TopologyLogMessage(time, { message: 'Stopped server monitoring', topologyId, ...serverLogFields(parseAddress('/tmp/mongodb-27017.sock')) });
    expect(Object.keys(socket.fields)).to.not.include('serverPort');
    expect(Object.keys(socket.toJSON())).to.not.include('serverPort');
    expect(socket.render()).to.equal(`Stopped monitoring for server /tmp/mongodb-27017.sock in topology with ID ${topologyId}`);
    const changed = new TopologyLogMessage(time, { message: 'Topology description changed', topologyId, previousDescription: '{"type":"Unknown","servers":[]}', newDescription: '{"type":"Single"}' });
    expect(changed.toJSON()).to.include({ previousDescription: '{"type":"Unknown","servers":[]}', newDescription: '{"type":"Single"}' });
    expect(changed.render()).to.equal(`Description changed for topology with ID ${topologyId}. Previous description: {"type":"Unknown","servers":[]}. New description: {"type":"Single"}`);
  });
});

describe('command log messages (component command)', function () {
  const base = { time: Date.UTC(2026, 0, 2, 3, 4, 5), connectionId: 4, requestId: 17, databaseName: 'shop', commandName: 'find' } as const;

  it('leave out what is unknown: the server\'s connection id, the port of a socket path, the service and operation ids', function () {
    const started = commandLogMessage({ type: 'CommandStarted', address: '/tmp/mongodb-27017.sock', ...base, command: { find: 'orders' } }, parseAddress('/tmp/mongodb-27017.sock'), 1000);
    expect(started).to.be.instanceOf(CommandLogMessage);
    expect(started.toJSON()).to.deep.equal({
      t: '2026-01-02T03:04:05.000Z', c: 'command', s: 'debug', message: 'Command started', commandName: 'find', databaseName: 'shop', requestId: 17,
      driverConnectionId: 4, serverHost: '/tmp/mongodb-27017.sock', command: '{"find":"orders"}',
    });
    expect(started.render()).to.equal('Command "find" started on database "shop" using a connection with driver-generated ID 4 to /tmp/mongodb-27017.sock. The requestID is 17. Command: {"find":"orders"}');
  });

  it("give their keys in the order of the spec's tables: the message, the common fields, then the message's own", function () {
    const ids = { serverConnectionId: 99, serviceId: '0123456789abcdef01234567', operationId: 5 };
    const server = parseAddress('db.example:27017');
    const keysOf = (event: CommandEvent): string[] => Object.keys(commandLogMessage(event, server, 1000).toJSON());
    const common = ['t', 'c', 's', 'message', 'commandName', 'databaseName', 'requestId', 'operationId', 'driverConnectionId', 'serverHost', 'serverPort', 'serverConnectionId', 'serviceId'];
    const event = { address: 'db.example:27017', ...base, ...ids };
    expect(keysOf({ type: 'CommandStarted', ...event, command: { find: 'orders' } })).to.deep.equal([...common, 'command']);
    expect(keysOf({ type: 'CommandSucceeded', ...event, duration: 1, reply: { ok: 1 } })).to.deep.equal([...common, 'durationMS', 'reply']);
    expect(keysOf({ type: 'CommandFailed', ...event, duration: 1, failure: new Error('lost') })).to.deep.equal([...common, 'durationMS', 'failure']);
  });

  it('write a 64-bit integer beyond 2^53 inside a Map (a sort or filter built as one, which bson sends as a document) with all its digits, as in a plain object', function () {
    const id = Long.fromString('5476541286716842819');
    const command = { find: 'orders', filter: new Map<string, unknown>([['n', id], ['m', new Map([['k', [2n ** 62n + 1n]]])]]), sort: new Map([['a', 1]]), plain: { n: id } };
    const started = commandLogMessage({ type: 'CommandStarted', address: 'db.example:27017', ...base, command }, parseAddress('db.example:27017'), 1000);
    expect(started.toJSON().command).to.equal('{"find":"orders","filter":{"n":5476541286716842819,"m":{"k":[4611686018427387905]}},"sort":{"a":1},"plain":{"n":5476541286716842819}}');
    // The Map given is left as it is.
    expect(command.filter.get('n')).to.equal(id);
  });

  it('write a 64-bit integer beyond 2^53 with all its digits in a document with a __proto__ field (a parsed JSON command), that field kept in its place', function () {
    const command = JSON.parse('{"find":"orders","__proto__":{"a":1},"n":0}') as Record<string, unknown>;
    command.n = Long.fromString('5476541286716842819');
    const started = commandLogMessage({ type: 'CommandStarted', address: 'db.example:27017', ...base, command }, parseAddress('db.example:27017'), 1000);
    expect(started.toJSON().command).to.equal('{"find":"orders","__proto__":{"a":1},"n":5476541286716842819}');
  });

  it('write what is known: the server\'s connection id, the port, the service and operation ids, and a failure with its causes', function () {
    const ids = { serverConnectionId: 99, serviceId: '0123456789abcdef01234567', operationId: 5 };
    const failure = new MongoNetworkError('db.example:27017', 'closed', { cause: new Error('reset') });
    const failed = commandLogMessage({ type: 'CommandFailed', address: 'db.example:27017', ...base, ...ids, duration: 1.5, failure }, parseAddress('db.example:27017'), 1000);
    expect(failed.toJSON()).to.deep.include({ message: 'Command failed', serverHost: 'db.example', serverPort: 27017, ...ids, durationMS: 1.5 });
    expect(failed.render()).to.equal(
      'Command "find" failed on database "shop" in 1.5 ms using a connection with driver-generated ID 4 and server-generated ID 99 to db.example:27017 with service ID 0123456789abcdef01234567. The requestID is 17 and the operation ID is 5. Error: MongoNetworkError: closed, caused by Error: reset',
    );
    const succeeded = commandLogMessage({ type: 'CommandSucceeded', address: 'db.example:27017', ...base, duration: 0.25, reply: { ok: 1 } }, parseAddress('db.example:27017'), 1000);
    expect(succeeded.render()).to.equal('Command "find" succeeded on database "shop" in 0.25 ms using a connection with driver-generated ID 4 to db.example:27017. The requestID is 17. Command reply: {"ok":1}');
  });
});

describe('server selection failure (the failure of "Server selection failed")', function () {
  it("a ServerSelectionError is written without its hosts and read preference (the message's topologyDescription and selector), its last check's error once (its cause); any other error as logError writes it", function () {
    const none = new ServerSelectionError([], 30000, undefined, undefined, undefined, 'nearest');
    expect(selectionFailure(none, 1000)).to.deep.equal({ type: 'ServerSelectionError', message: 'No suitable server: the topology has no server left' });
    const timed = new ServerSelectionError(['a.example:27017', 'b.example:27017'], 30000, new Error('refused'), 500, '{"type":"Unknown"}', '{"mode":"secondary","tags":[{"dc":"ny"}]}');
    expect(selectionFailure(timed, 1000)).to.deep.equal({
      type: 'ServerSelectionError',
      // The last check's error once, as the cause.
      message: "No suitable server within the operation's timeoutMS=500 ms",
      cause: { type: 'Error', message: 'refused' },
    });
    // The error thrown still names them.
    expect(timed.message).to.include('a.example:27017, b.example:27017').and.include('"dc":"ny"');
    expect(selectionFailure(timed, 10).message).to.equal('No suitabl...');
    const other = new PoolClosedError('a.example:27017');
    expect(selectionFailure(other, 1000)).to.deep.equal(logError(other, 1000));
    // An error that has hosts of its own (close() while the selection waits) keeps its message too.
    const closed = new ClientClosedError(['a.example:27017']);
    expect(selectionFailure(closed, 1000)).to.deep.equal({ type: 'ClientClosedError', message: 'The client of a.example:27017 was closed' });
  });

  it('a ServerSelectionError whose fields cannot be read is written as logError writes it, never throwing', function () {
    const unreadable = new ServerSelectionError(['a.example:27017'], 30000, new Error('refused'));
    Object.defineProperty(unreadable, 'hosts', {
      get(): never {
        throw new Error('unreadable');
      },
    });
    expect(selectionFailure(unreadable, 1000)).to.deep.equal(logError(unreadable, 1000));
    expect(selectionFailure(unreadable, 1000).message).to.equal('No suitable server of a.example:27017 (read preference primary) within serverSelectionTimeoutMS=30000 ms; last check failed with: refused');
  });
});
