import { expect } from 'chai';
import { createHash, createHmac, pbkdf2Sync } from 'node:crypto';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import { inspect } from 'node:util';
import { BSON, Binary, type Document } from 'bson';
import { firstValueFrom, from } from 'rxjs';
import {
  AuthenticationError,
  ConnectionPool,
  InvalidOptionError,
  MongoCredentials,
  MongoNetworkError,
  MongoNetworkTimeoutError,
  MongoServerError,
  connectionFactory,
  type ScramMechanism,
  type Connection,
  type CredentialsInit,
} from '../../lib';
import { saslPayloadText, scramAuthenticate, type RunCommand } from '../../lib/auth/scram';
import { EmbeddedServer, type EmbeddedUser } from '../../lib/testing';
import { decodeOpMsg, encodeOpMsg, OpMsgFlag } from '../../lib/connection/op-msg';
import { decodeOpReply, encodeOpQuery } from '../../lib/connection/op-query';
import { MessageFramer, OpCode } from '../../lib/connection/wire-protocol';
import { compressMessage } from '../../lib/connection/op-compressed';
import { establishOne, eventually } from '../support/endpoint';
import { rawClient } from '../support/raw-client';

describe('EmbeddedServer', function () {
  let server: EmbeddedServer;
  beforeEach(async function () {
    server = await new EmbeddedServer().start();
  });
  afterEach(async function () {
    await server.stop();
  });

  it('answers hello with isWritablePrimary and legacy isMaster with ismaster, each with its connectionId', async function () {
    const a = await rawClient(server.address);
    const b = await rawClient(server.address);
    const hello = await a.send({ hello: 1, $db: 'admin' });
    const legacy = await b.send({ isMaster: 1, helloOk: true, $db: 'admin' });
    expect(hello).to.include({ isWritablePrimary: true, ok: 1, connectionId: 1 });
    expect(legacy).to.include({ ismaster: true, helloOk: true, ok: 1, connectionId: 2 });
    expect(legacy.maxWireVersion).to.be.a('number');
    a.close();
    b.close();
  });

  it('answers hello and the legacy hello with msg: isdbgrid as a mongos with `mongos: true`, and without it otherwise', async function () {
    const mongos = await new EmbeddedServer({ mongos: true }).start();
    try {
      const a = await rawClient(mongos.address);
      expect(await a.send({ hello: 1, $db: 'admin' })).to.include({ msg: 'isdbgrid', isWritablePrimary: true, ok: 1 });
      expect(await a.send({ isMaster: 1, $db: 'admin' })).to.include({ msg: 'isdbgrid', ismaster: true, ok: 1 });
      a.close();
      const b = await rawClient(server.address);
      expect(await b.send({ hello: 1, $db: 'admin' })).to.not.have.property('msg');
      b.close();
      expect(() => new EmbeddedServer({ mongos: 'yes' as never })).to.throw(InvalidOptionError, 'mongos');
    } finally {
      await mongos.stop();
    }
  });

  it('answers helloOk: true only to a hello or legacy hello that carried helloOk, as mongod', async function () {
    const a = await rawClient(server.address);
    expect(await a.send({ isMaster: 1, $db: 'admin' })).to.not.have.property('helloOk');
    expect(await a.send({ hello: 1, $db: 'admin' })).to.not.have.property('helloOk');
    expect(await a.send({ isMaster: 1, helloOk: true, $db: 'admin' })).to.include({ helloOk: true });
    expect(await a.send({ hello: 1, helloOk: false, $db: 'admin' })).to.include({ helloOk: true });
    a.close();
  });

  it('refuses client metadata in a second hello with ClientMetadataCannotBeMutated, as mongod, and keeps the first appName', async function () {
    const a = await rawClient(server.address);
    expect(await a.send({ hello: 1, client: { application: { name: 'first' } }, $db: 'admin' })).to.include({ ok: 1 });
    expect(await a.send({ hello: 1, $db: 'admin' })).to.include({ ok: 1 });
    expect(await a.send({ isMaster: 1, client: { application: { name: 'second' } }, $db: 'admin' })).to.include({ ok: 0, code: 186, codeName: 'ClientMetadataCannotBeMutated' });
    expect(server.clientConnections()[0].appName).to.equal('first');
    a.close();
  });

  it('answers ping, buildInfo and unknown commands', async function () {
    const c = await rawClient(server.address);
    expect(await c.send({ ping: 1, $db: 'admin' })).to.deep.equal({ ok: 1 });
    expect(await c.send({ buildInfo: 1, $db: 'admin' })).to.include({ version: '8.0.0', ok: 1 });
    expect(await c.send({ find: 'things', $db: 'test' })).to.deep.equal({ ok: 1 });
    c.close();
  });

  it('failCommand writeConcernError: the command runs and its ok: 1 reply carries the writeConcernError, as mongod answers', async function () {
    const a = await rawClient(server.address);
    const writeConcernError = { code: 64, codeName: 'WriteConcernFailed', errmsg: 'waiting for replication timed out' };
    expect(await a.send({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['insert'], writeConcernError }, $db: 'admin' })).to.include({ ok: 1 });
    const reply = await a.send({ insert: 'c', documents: [{}], $db: 'test' });
    expect(reply).to.deep.include({ ok: 1, writeConcernError });
    expect(await a.send({ insert: 'c', documents: [{}], $db: 'test' })).to.not.have.property('writeConcernError');
    // A command that fails gets its own error alone: the writeConcernError goes only on a reply that succeeded.
    server.handle('update', () => ({ ok: 0, code: 11000, codeName: 'DuplicateKey', errmsg: 'duplicate key' }));
    expect(await a.send({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['update'], writeConcernError }, $db: 'admin' })).to.include({ ok: 1 });
    expect(await a.send({ update: 'c', updates: [], $db: 'test' })).to.deep.equal({ ok: 0, code: 11000, codeName: 'DuplicateKey', errmsg: 'duplicate key' });
    a.close();
  });

  it('answers BadValue, on a connection it keeps open, when a handler throws something that is not an Error or returns something that is not a document', async function () {
    // Before, a handler that threw null or undefined, or returned anything but an object, had the connection closed
    // (a client saw a network error, not the handler's fault), and one that threw a string was answered without errmsg.
    const a = await rawClient(server.address);
    const cases: [string, () => unknown, string][] = [
      ['throws null', () => { throw null; }, 'null'],
      ['throws undefined', () => { throw undefined; }, 'undefined'],
      ['throws a string', () => { throw 'out of stock'; }, 'out of stock'],
      ['rejects with null', () => Promise.reject(null), 'null'],
      ['returns undefined', () => undefined, 'the handler of foo returned undefined, not a reply document'],
      ['returns null', () => null, 'the handler of foo returned null, not a reply document'],
      ['resolves to a number', async () => 5, 'the handler of foo returned a number, not a reply document'],
      ['returns an array', () => [{ ok: 1 }], 'the handler of foo returned an array, not a reply document'],
    ];
    for (const [what, handler, errmsg] of cases) {
      server.handle('foo', handler as () => Document);
      expect(await a.send({ foo: 1, $db: 'admin' }), what).to.deep.equal({ ok: 0, errmsg, code: 2, codeName: 'BadValue' });
    }
    expect(a.socket.destroyed).to.equal(false);
    a.close();
  });

  it('answers BadValue, on a connection it keeps open, when a handler returns an object that cannot be encoded as a reply (a Buffer, a Date, a cycle)', async function () {
    // Before, the encoding threw and the connection was closed: the client saw a network error, not the handler's fault.
    const cyclic: Document = { ok: 1 };
    cyclic.self = cyclic;
    const a = await rawClient(server.address);
    for (const [what, reply] of [['a Buffer', Buffer.from('abc')], ['a Date', new Date(0)], ['a cycle', cyclic]] as const) {
      server.handle('foo', () => reply as Document);
      const answer = await a.send({ foo: 1, $db: 'admin' });
      expect(answer, what).to.include({ ok: 0, code: 2, codeName: 'BadValue' });
      expect(answer.errmsg, what).to.match(/^the reply of foo cannot be encoded as BSON: ./);
    }
    expect(a.socket.destroyed).to.equal(false);
    a.close();
  });

  it('answers an OP_MSG request without $db with error 40571, as mongod, instead of running it on admin', async function () {
    const a = await rawClient(server.address);
    expect(await a.send({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['ping'], errorCode: 2 } })).to.deep.equal({
      ok: 0,
      errmsg: 'OP_MSG requests require a $db argument',
      code: 40571,
      codeName: 'Location40571',
    });
    expect(server.failCommand.active).to.equal(false);
    expect(await a.send({ ping: 1, $db: 'admin' })).to.include({ ok: 1 }); // the connection stays usable
    a.close();
  });

  it('runs a request with moreToCome (an unacknowledged write) without replying to it, as mongod', async function () {
    const [host, port] = server.address.split(':');
    const socket = net.connect({ host, port: Number(port) });
    await new Promise((r) => socket.once('connect', r));
    const framer = new MessageFramer();
    const replies: { responseTo: number; document: Document }[] = [];
    socket.on('data', (chunk: Buffer) => {
      for (const m of framer.push(chunk)) replies.push({ responseTo: m.header.responseTo, document: decodeOpMsg(m.body).document });
    });
    const inserts: Document[] = [];
    server.handle('insert', (command) => {
      inserts.push(command);
      return { ok: 1, n: 1 };
    });
    socket.write(encodeOpMsg(1, 0, { insert: 'c', documents: [{}], writeConcern: { w: 0 }, $db: 'test' }, OpMsgFlag.moreToCome));
    socket.write(encodeOpMsg(2, 0, { ping: 1, $db: 'admin' }));
    await eventually(() => replies.length >= 1);
    await new Promise((r) => setImmediate(r));
    expect(inserts).to.have.length(1);
    expect(replies.map((r) => r.responseTo)).to.deep.equal([2]);
    socket.destroy();
  });

  /** What a client sees of a moreToCome request: the responseTo of each reply, and whether the connection closed. */
  type UnacknowledgedOutcome = { replies: number[]; closed: boolean };

  /**
   * Sends `insert` with moreToCome (the server's insert handler answering `answer()`) then a ping (request 2) on a new
   * connection, and tells what came back: the ping's reply, or the connection closed without one.
   */
  async function unacknowledgedInsert(insert: Document, answer: () => Document): Promise<UnacknowledgedOutcome> {
    const [host, port] = server.address.split(':');
    const socket = net.connect({ host, port: Number(port) });
    await new Promise((r) => socket.once('connect', r));
    const framer = new MessageFramer();
    const replies: number[] = [];
    let closed = false;
    socket.on('data', (chunk: Buffer) => replies.push(...framer.push(chunk).map((m) => m.header.responseTo)));
    socket.on('close', () => (closed = true));
    socket.on('error', () => undefined);
    server.handle('insert', answer);
    socket.write(encodeOpMsg(1, 0, insert, OpMsgFlag.moreToCome));
    socket.write(encodeOpMsg(2, 0, { ping: 1, $db: 'admin' }));
    await eventually(() => closed || replies.length >= 1);
    socket.destroy();
    return { replies, closed: replies.length === 0 && closed };
  }

  it('closes the connection when a moreToCome request fails with a not-primary error, and drops any other error, as mongod', async function () {
    // mongod (service_entry_point_common.cpp, makeCommandResponse): a moreToCome request that met a not-primary error
    // (NotPrimaryError category: 189, 10107, 11602, 13435, 13436) ends the session "to get client to go through server
    // selection again"; every other error is dropped, the connection kept.
    const outcome = (failure: Document | undefined): Promise<UnacknowledgedOutcome> =>
      unacknowledgedInsert({ insert: 'c', documents: [{}], writeConcern: { w: 0 }, $db: 'test' }, () => failure ?? { ok: 1, n: 1 });
    for (const code of [189, 10107, 11602, 13435, 13436]) {
      expect(await outcome({ ok: 0, code, errmsg: 'not primary' }), `code ${code}`).to.deep.equal({ replies: [], closed: true });
    }
    for (const code of [11000, 2, 91, 11600]) {
      expect(await outcome({ ok: 0, code, errmsg: 'dropped' }), `code ${code}`).to.deep.equal({ replies: [2], closed: false });
    }
    expect(await outcome(undefined)).to.deep.equal({ replies: [2], closed: false });
    // Through the failCommand fail point, as on mongod: its error is the command's.
    server.handle('insert', () => ({ ok: 1, n: 1 }));
    server.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['insert'], errorCode: 10107 } });
    const [host, port] = server.address.split(':');
    const socket = net.connect({ host, port: Number(port) });
    const closed = new Promise((r) => socket.once('close', r));
    socket.on('error', () => undefined);
    socket.write(encodeOpMsg(1, 0, { insert: 'c', documents: [{}], writeConcern: { w: 0 }, $db: 'test' }, OpMsgFlag.moreToCome));
    await closed;
  });

  it('closes the connection when the last write error of a moreToCome write is a not-primary error, as mongod', async function () {
    // mongod (write_ops_exec.cpp, handleError) records each write error of a batch in the NotPrimaryErrorTracker, the
    // last one recorded deciding; a not-primary one closes the connection of a moreToCome request as a command error
    // does (OP_MSG spec: "Write errors due to not-primary will close the connection").
    const outcome = (writeErrors: Document[]): Promise<UnacknowledgedOutcome> =>
      unacknowledgedInsert({ insert: 'c', documents: [{}, {}], ordered: false, writeConcern: { w: 0 }, $db: 'test' }, () => ({ ok: 1, n: 0, writeErrors }));
    const writeError = (index: number, code: number): Document => ({ index, code, errmsg: 'failed' });
    for (const code of [189, 10107, 11602, 13435, 13436]) {
      expect(await outcome([writeError(0, code)]), `code ${code}`).to.deep.equal({ replies: [], closed: true });
      expect(await outcome([writeError(0, 11000), writeError(1, code)]), `11000 then ${code}`).to.deep.equal({ replies: [], closed: true });
    }
    expect(await outcome([writeError(0, 11000)])).to.deep.equal({ replies: [2], closed: false });
    expect(await outcome([writeError(0, 10107), writeError(1, 11000)])).to.deep.equal({ replies: [2], closed: false });
  });

  it('sends no reply to an awaitable or streaming hello sent with moreToCome, as mongod (the flag is read before exhaust)', async function () {
    // mongod (service_entry_point_common.cpp, makeCommandResponse): a request with moreToCome gets no reply, whatever the
    // command; exhaustAllowed is looked at only for a reply that is sent.
    const [host, port] = server.address.split(':');
    const socket = net.connect({ host, port: Number(port) });
    await new Promise((r) => socket.once('connect', r));
    const framer = new MessageFramer();
    const replies: number[] = [];
    let first: Document | undefined;
    socket.on('data', (chunk: Buffer) => {
      for (const m of framer.push(chunk)) {
        first ??= decodeOpMsg(m.body).document;
        replies.push(m.header.responseTo);
      }
    });
    socket.on('error', () => undefined);
    try {
      socket.write(encodeOpMsg(9, 0, { hello: 1, $db: 'admin' }));
      await eventually(() => first !== undefined);
      replies.length = 0;
      // This process's topologyVersion: each waits maxAwaitTimeMS, as a monitor's would.
      const topologyVersion = first!.topologyVersion as Document;
      const awaitable = { hello: 1, topologyVersion, maxAwaitTimeMS: 50, $db: 'admin' };
      socket.write(encodeOpMsg(1, 0, awaitable, OpMsgFlag.moreToCome));
      socket.write(encodeOpMsg(2, 0, awaitable, OpMsgFlag.moreToCome | OpMsgFlag.exhaustAllowed));
      socket.write(encodeOpMsg(3, 0, { hello: 1, topologyVersion, $db: 'admin' }, OpMsgFlag.moreToCome));
      socket.write(encodeOpMsg(4, 0, { ping: 1, $db: 'admin' }));
      await eventually(() => replies.length >= 1);
      await new Promise((r) => setTimeout(r, 150));
      expect(replies).to.deep.equal([4]);
    } finally {
      socket.destroy();
    }
  });

  it('gives a handler the documents of a document sequence (kind 1 section) as the field of that name, as mongod runs the command', async function () {
    const seen: Document[] = [];
    server.handle('insert', (command) => {
      seen.push(command);
      return { ok: 1, n: command.documents.length };
    });
    const [host, port] = server.address.split(':');
    const socket = net.connect({ host, port: Number(port) });
    await new Promise((r) => socket.once('connect', r));
    const framer = new MessageFramer();
    const replies: Document[] = [];
    socket.on('data', (chunk: Buffer) => {
      for (const m of framer.push(chunk)) replies.push(decodeOpMsg(m.body).document);
    });
    const message = (body: Document): Buffer => {
      const identifier = Buffer.from('documents\0');
      const docs = Buffer.concat([BSON.serialize({ a: 1 }), BSON.serialize({ a: 2 })]);
      const sequence = Buffer.alloc(4);
      sequence.writeInt32LE(4 + identifier.length + docs.length);
      const sections = Buffer.concat([Buffer.from([0, 0, 0, 0, 0]), BSON.serialize(body), Buffer.from([1]), sequence, identifier, docs]);
      const header = Buffer.alloc(16);
      header.writeInt32LE(16 + sections.length, 0);
      header.writeInt32LE(7, 4);
      header.writeInt32LE(OpCode.OP_MSG, 12);
      return Buffer.concat([header, sections]);
    };
    socket.write(message({ insert: 'c', $db: 'test' }));
    socket.write(message({ insert: 'c', documents: [], $db: 'test' }));
    await eventually(() => replies.length >= 2);
    expect(seen).to.have.length(1);
    expect(seen[0].documents).to.deep.equal([{ a: 1 }, { a: 2 }]);
    expect(replies[0]).to.deep.equal({ ok: 1, n: 2 });
    expect(replies[1]).to.include({ ok: 0, code: 40433 });
    socket.destroy();
  });

  it('refuses configureFailPoint on a database other than admin with Unauthorized, as mongod', async function () {
    const a = await rawClient(server.address);
    const command = { configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['ping'], errorCode: 2 } };
    expect(await a.send({ ...command, $db: 'test' })).to.include({ ok: 0, code: 13, codeName: 'Unauthorized' });
    expect(server.failCommand.active).to.equal(false);
    expect(await a.send({ ...command, $db: 'admin' })).to.deep.equal({ ok: 1 });
    expect(server.failCommand.active).to.equal(true);
    a.close();
  });

  it('stop() resolves with every connection closed and counted out: one blocked by failCommand, one streaming hello, one idle', async function () {
    const [host, port] = server.address.split(':');
    const sockets = await Promise.all(
      [0, 1, 2].map(async () => {
        const socket = net.connect({ host, port: Number(port) });
        socket.on('error', () => undefined);
        await new Promise((r) => socket.once('connect', r));
        return socket;
      }),
    );
    server.failCommand.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['ping'], blockConnection: true, blockTimeMS: 60_000 } });
    sockets[0].write(encodeOpMsg(1, 0, { ping: 1, $db: 'admin' }));
    sockets[1].write(encodeOpMsg(2, 0, { hello: 1, topologyVersion: server.topologyVersion, maxAwaitTimeMS: 60_000, $db: 'admin' }, OpMsgFlag.exhaustAllowed));
    expect(await eventually(() => server.awaitingHelloCount === 1 && server.openConnections === 3)).to.equal(true);
    await server.stop();
    expect(server.openConnections).to.equal(0);
    expect(server.awaitingHelloCount).to.equal(0);
    await eventually(() => sockets.every((s) => s.closed));
    expect(sockets.map((s) => s.closed)).to.deep.equal([true, true, true]);
    server = await new EmbeddedServer().start(); // for afterEach
  });

  it('an `await using` declaration stops the endpoint when its block is left, its connections closed before the code after it runs', async function () {
    let used: EmbeddedServer | undefined;
    let socket: net.Socket | undefined;
    {
      await using scoped = await new EmbeddedServer().start();
      used = scoped;
      const [host, port] = scoped.address.split(':');
      socket = net.connect({ host, port: Number(port) });
      socket.on('error', () => undefined);
      await new Promise((r) => socket!.once('connect', r));
      expect(await eventually(() => scoped.openConnections === 1)).to.equal(true);
    }
    expect(used.openConnections).to.equal(0);
    await eventually(() => socket!.closed);
    expect(socket.closed).to.equal(true);
    const [host, port] = used.address.split(':');
    const refused = await new Promise<unknown>((resolve) => net.connect({ host, port: Number(port) }).once('error', resolve).once('connect', () => resolve('connected')));
    expect(refused).to.have.property('code', 'ECONNREFUSED');
  });

  it('waits a maxAwaitTimeMS longer than one Node timer holds (3e9 ms) rather than answering at once', async function () {
    const [host, port] = server.address.split(':');
    const socket = net.connect({ host, port: Number(port) });
    socket.on('error', () => undefined);
    await new Promise((r) => socket.once('connect', r));
    const framer = new MessageFramer();
    let replies = 0;
    socket.on('data', (chunk: Buffer) => void (replies += framer.push(chunk).length));
    const warnings: Error[] = [];
    const onWarning = (w: Error): void => void warnings.push(w);
    process.on('warning', onWarning);
    try {
      socket.write(encodeOpMsg(1, 0, { hello: 1, topologyVersion: server.topologyVersion, maxAwaitTimeMS: 3e9, $db: 'admin' }, OpMsgFlag.exhaustAllowed));
      expect(await eventually(() => server.awaitingHelloCount === 1)).to.equal(true);
      // One timer of 3e9 ms fires after 1 ms (TimeoutOverflowWarning): the hello would be answered, then again.
      await new Promise((r) => setTimeout(r, 50));
      expect(replies, 'no reply before maxAwaitTimeMS').to.equal(0);
      expect(server.awaitingHelloCount).to.equal(1);
      expect(warnings.map((w) => w.name)).to.not.include('TimeoutOverflowWarning');
    } finally {
      process.off('warning', onWarning);
      socket.destroy();
    }
  });

  it('keeps serving after a client resets its connection (ECONNRESET on the server side is not thrown)', async function () {
    const c = await rawClient(server.address);
    await c.send({ ping: 1, $db: 'admin' });
    c.socket.write(encodeOpMsg(9, 0, { ping: 1, $db: 'admin' }));
    c.socket.resetAndDestroy();
    expect(await eventually(() => server.openConnections === 0)).to.equal(true);
    const d = await rawClient(server.address);
    expect(await d.send({ ping: 1, $db: 'admin' })).to.deep.equal({ ok: 1 });
    d.close();
  });

  it('counts its open connections', async function () {
    expect(server.openConnections).to.equal(0);
    const c = await rawClient(server.address);
    expect(await eventually(() => server.openConnections === 1)).to.equal(true);
    c.close();
    expect(await eventually(() => server.openConnections === 0)).to.equal(true);
    expect(server.connectionsAccepted).to.equal(1);
  });

  it('answers a legacy OP_QUERY hello with OP_REPLY, and closes the connection on any other OP_QUERY', async function () {
    const [host, port] = server.address.split(':');
    const socket = net.connect({ host, port: Number(port) });
    await new Promise((r) => socket.once('connect', r));
    const reply = await new Promise<{ opCode: number; doc: Document }>((resolve) => {
      socket.once('data', (chunk: Buffer) => {
        const m = new MessageFramer().push(chunk)[0];
        resolve({ opCode: m.header.opCode, doc: decodeOpReply(m.body) });
      });
      socket.write(encodeOpQuery(1, 'admin.$cmd', { isMaster: 1, helloOk: true, client: { application: { name: 'legacy' } } }));
    });
    expect(reply.opCode).to.equal(OpCode.OP_REPLY);
    expect(reply.doc).to.include({ ismaster: true, helloOk: true, ok: 1 });
    const closed = new Promise((r) => socket.once('close', r));
    socket.write(encodeOpQuery(2, 'test.things', { find: 'things' }));
    await closed;
  });

  it('reports minWireVersion (default 0) and maxWireVersion as given; below maxWireVersion 6 (MongoDB 3.4) it answers the OP_QUERY hello only and closes the connection on an OP_MSG', async function () {
    const client = await rawClient(server.address);
    expect(await client.send({ hello: 1, $db: 'admin' })).to.include({ minWireVersion: 0, maxWireVersion: 25 });
    client.close();
    const tooNew = await new EmbeddedServer({ maxWireVersion: 30, minWireVersion: 26 }).start();
    const old = await new EmbeddedServer({ maxWireVersion: 5 }).start();
    try {
      const a = await rawClient(tooNew.address);
      expect(await a.send({ hello: 1, $db: 'admin' })).to.include({ minWireVersion: 26, maxWireVersion: 30 });
      a.close();
      const [host, port] = old.address.split(':');
      const socket = net.connect({ host, port: Number(port) });
      await new Promise((r) => socket.once('connect', r));
      const reply = await new Promise<Document>((resolve) => {
        socket.once('data', (chunk: Buffer) => resolve(decodeOpReply(new MessageFramer().push(chunk)[0].body)));
        socket.write(encodeOpQuery(1, 'admin.$cmd', { isMaster: 1 }));
      });
      expect(reply).to.include({ ismaster: true, minWireVersion: 0, maxWireVersion: 5, ok: 1 });
      const closed = new Promise((r) => socket.once('close', r));
      socket.write(encodeOpMsg(2, 0, { isMaster: 1, $db: 'admin' }));
      await closed;
    } finally {
      await tooNew.stop();
      await old.stop();
    }
  });

  it('answers an OP_QUERY hello (also wrapped in $query) with OP_REPLY, and closes the connection on any other command sent to a $cmd namespace', async function () {
    const [host, port] = server.address.split(':');
    const socket = net.connect({ host, port: Number(port) });
    await new Promise((r) => socket.once('connect', r));
    const ask = (requestId: number, query: Document) => new Promise<Document>((resolve) => {
      socket.once('data', (chunk: Buffer) => resolve(decodeOpReply(new MessageFramer().push(chunk)[0].body)));
      socket.write(encodeOpQuery(requestId, 'admin.$cmd', query));
    });
    expect(await ask(1, { hello: 1 })).to.include({ isWritablePrimary: true, ok: 1 });
    expect(await ask(2, { $query: { isMaster: 1 } })).to.include({ ismaster: true, ok: 1 });
    const closed = new Promise((r) => socket.once('close', r));
    socket.write(encodeOpQuery(3, 'admin.$cmd', { ping: 1 }));
    await closed;
  });

  it('closes client connections from the server side: those selected (by appName), or all, and keeps listening', async function () {
    const a = await rawClient(server.address);
    const b = await rawClient(server.address);
    const c = await rawClient(server.address);
    await a.send({ hello: 1, client: { application: { name: 'victim' } }, $db: 'admin' });
    await b.send({ hello: 1, client: { application: { name: 'bystander' } }, $db: 'admin' });
    await c.send({ hello: 1, client: { application: { name: 'victim' } }, $db: 'admin' });

    expect(server.closeConnections((client) => client.appName === 'victim')).to.equal(2);
    expect(await eventually(() => a.socket.destroyed && c.socket.destroyed)).to.equal(true);
    expect(b.socket.destroyed).to.equal(false);
    expect(await b.send({ ping: 1, $db: 'admin' })).to.deep.equal({ ok: 1 });
    expect(await eventually(() => server.openConnections === 1)).to.equal(true);
    expect(server.closeConnections((client) => client.appName === 'victim')).to.equal(0);

    const d = await rawClient(server.address); // still listening
    expect(await d.send({ ping: 1, $db: 'admin' })).to.deep.equal({ ok: 1 });
    expect(server.closeConnections()).to.equal(2);
    expect(await eventually(() => server.openConnections === 0)).to.equal(true);
  });

  it('closeConnections refuses a select that is not a function, naming it, and closes nothing', async function () {
    const a = await rawClient(server.address);
    await a.send({ hello: 1, $db: 'admin' });
    for (const select of [null, 5, 'victim']) {
      expect(() => server.closeConnections(select as never), String(select)).to.throw(InvalidOptionError, /^Invalid select: .* \(select must be a function/);
    }
    expect(a.socket.destroyed).to.equal(false);
    expect(await a.send({ ping: 1, $db: 'admin' })).to.deep.equal({ ok: 1 });
  });

  it('with loadBalancedServices, answers a loadBalanced hello with a serviceId, round-robin over the services, and other hellos without', async function () {
    {
      await using lb = await new EmbeddedServer({ loadBalancedServices: 2 }).start();
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) {
        const c = await rawClient(lb.address);
        try {
          const reply = await c.send({ hello: 1, loadBalanced: true, $db: 'admin' });
          ids.push(String(reply.serviceId));
          expect(await c.send({ hello: 1, $db: 'admin' })).to.not.have.property('serviceId');
        } finally {
          c.close();
        }
      }
      expect(ids[0]).to.match(/^[0-9a-f]{24}$/);
      expect(ids[1]).to.not.equal(ids[0]);
      expect(ids[2]).to.equal(ids[0]);
    }
    const plain = await rawClient(server.address);
    expect(await plain.send({ hello: 1, loadBalanced: true, $db: 'admin' })).to.not.have.property('serviceId');
    plain.close();
  });

  it('negotiates only the compressors it accepts', async function () {
    const c = await rawClient(server.address);
    expect((await c.send({ hello: 1, compression: ['lz4', 'zlib'], $db: 'admin' })).compression).to.deep.equal(['zlib']);
    c.close();
  });

  it('accepts a compressed request only once a compressor was negotiated, as a mongod does', async function () {
    const ping = (requestId: number): Buffer => compressMessage(encodeOpMsg(requestId, 0, { ping: 1, $db: 'admin' }));
    const negotiated = await rawClient(server.address);
    await negotiated.send({ hello: 1, compression: ['zlib'], $db: 'admin' });
    const reply = new Promise<Buffer>((resolve) => negotiated.socket.once('data', resolve));
    negotiated.socket.write(ping(7));
    expect((await reply).readInt32LE(12), 'an OP_COMPRESSED reply').to.equal(OpCode.OP_COMPRESSED);
    negotiated.close();

    const plain = await rawClient(server.address);
    await plain.send({ hello: 1, $db: 'admin' }); // no compression offered
    const closed = new Promise((resolve) => plain.socket.once('close', resolve));
    plain.socket.write(ping(8));
    await closed; // refused: the endpoint closes the connection
    expect(await eventually(() => server.openConnections === 0)).to.equal(true);
  });

  it('answers an awaitable hello compressed when it came compressed, and plain when it came plain, on a connection that negotiated zlib', async function () {
    const c = await rawClient(server.address);
    const { topologyVersion } = await c.send({ hello: 1, compression: ['zlib'], $db: 'admin' });
    const other = { processId: new BSON.ObjectId(), counter: topologyVersion.counter };
    const opCodeOfReply = (message: Buffer): Promise<number> => {
      const reply = new Promise<Buffer>((resolve) => c.socket.once('data', resolve));
      c.socket.write(message);
      return reply.then((b) => b.readInt32LE(12));
    };
    const hello = (requestId: number): Buffer => encodeOpMsg(requestId, 0, { hello: 1, topologyVersion: other, maxAwaitTimeMS: 100, $db: 'admin' });
    expect(await opCodeOfReply(compressMessage(hello(7)))).to.equal(OpCode.OP_COMPRESSED);
    expect(await opCodeOfReply(hello(8))).to.equal(OpCode.OP_MSG);
    c.close();
  });
});


/** Establishes one connection (handshake, and authentication when `credentials` are given) to `address`. */
function establish(address: string, credentials?: CredentialsInit): Promise<Connection> {
  return establishOne(address, credentials ? { credentials } : {});
}

/**
 * Runs a SCRAM conversation on `c` as `credentials`; resolves to the server-first message it got, or rejects with the
 * AuthenticationError. `between` runs after saslStart is answered and before saslContinue is sent.
 */
async function scram(
  c: Connection,
  credentials: CredentialsInit,
  between?: () => void,
  mechanism: ScramMechanism = 'SCRAM-SHA-256',
): Promise<string | undefined> {
  let serverFirst: string | undefined;
  let continued = false;
  const run: RunCommand = async (db, cmd) => {
    if (cmd.saslContinue !== undefined && !continued) {
      continued = true;
      between?.();
    }
    const reply = await c.command(db, cmd);
    if (cmd.saslStart !== undefined) serverFirst = saslPayloadText(reply.payload);
    return reply;
  };
  await scramAuthenticate(run, new MongoCredentials(credentials), mechanism);
  return serverFirst;
}

/** Whether a command that needs authentication succeeds on `c` (false: refused with Unauthorized). */
async function authorized(c: Connection): Promise<boolean> {
  const reply = await c.command('admin', { listDatabases: 1 }).catch((e: unknown) => e);
  if (reply instanceof MongoServerError && reply.code === 13) return false;
  expect(reply).to.include({ ok: 1 });
  return true;
}

describe('EmbeddedServer options', function () {
  it('refuses, at construction, options it would misread, with an InvalidOptionError naming the option', function () {
    const cases: [string, unknown][] = [
      ['options', null],
      ['options', 'port=1'],
      ['prot', { prot: 27017 }],
      ['port', { port: -1 }],
      ['port', { port: 70000 }],
      ['port', { port: '27017' }],
      ['maxWireVersion', { maxWireVersion: -1 }],
      ['maxWireVersion', { maxWireVersion: '9' }],
      ['minWireVersion', { minWireVersion: -1 }],
      ['minWireVersion', { minWireVersion: 26 }],
      ['minWireVersion', { maxWireVersion: 7, minWireVersion: 8 }],
      ['version', { version: 8 }],
      ['version', { version: '' }],
      ['compressors', { compressors: ['lz4'] }],
      ['compressors', { compressors: 'zlib' }],
      ['loadBalancedServices', { loadBalancedServices: -1 }],
      ['loadBalancedServices', { loadBalancedServices: 1.5 }],
      ['tls', { tls: {} }],
      ['tls', { tls: 'on' }],
    ];
    for (const [option, options] of cases) {
      expect(() => new EmbeddedServer(options as never), JSON.stringify(options)).to.throw(InvalidOptionError).with.property('option', option);
    }
    const allowed: [unknown, string][] = [
      [{ port: 65536 }, 'an integer from 0 to 65535 (0: a free port)'],
      [{ maxWireVersion: 1.5 }, 'an integer >= 0'],
      [{ minWireVersion: 1.5 }, 'an integer from 0 to maxWireVersion (25)'],
      [{ maxWireVersion: 30, minWireVersion: 31 }, 'an integer from 0 to maxWireVersion (30)'],
      [{ version: '' }, 'a non-empty version string such as "8.0.0"'],
      [{ compressors: ['zlib', 'lz4'] }, 'an array of "zlib", "snappy", "zstd"'],
      [{ loadBalancedServices: -1 }, 'an integer >= 0'],
      [{ tls: 'on' }, 'an object { key, cert, ca?, requestCert? } (PEM)'],
      [{ tls: { key: 'k' } }, 'an object { key, cert, ca?, requestCert? } (PEM) with key and cert'],
      [{ tls: { cert: 'c' } }, 'an object { key, cert, ca?, requestCert? } (PEM) with key and cert'],
    ];
    for (const [options, wording] of allowed) {
      expect(() => new EmbeddedServer(options as never), JSON.stringify(options)).to.throw(InvalidOptionError).with.property('allowed', wording);
    }
    expect(() => new EmbeddedServer({ prot: 1 } as never)).to.throw(InvalidOptionError, /EmbeddedServer/);
    for (const options of [{}, undefined, { port: 0, maxWireVersion: 8, version: '4.2.0', compressors: [], loadBalancedServices: 2 }, { port: 65535, compressors: ['zlib'] }]) {
      expect(() => new EmbeddedServer(options), JSON.stringify(options)).to.not.throw();
    }
  });
});

describe('EmbeddedServer SCRAM conversation, step by step (raw saslStart / saslContinue)', function () {
  const salt = Buffer.from('a-fixed-salt-for-tests');
  let server: EmbeddedServer;
  beforeEach(async function () {
    server = await new EmbeddedServer({ users: [{ username: 'a,b=c', password: 'pencil', salt, iterations: 4096, mechanisms: ['SCRAM-SHA-256'] }] }).start();
  });
  afterEach(async function () {
    await server.stop();
  });

  /** saslStart for user `a,b=c` (escaped as SCRAM requires) with `clientNonce`; the reply and the client-first-bare. */
  const start = (c: { send(doc: Document): Promise<Document> }, clientNonce: string, extra: Document = {}, gs2 = 'n,,') => {
    const bare = `n=a=2Cb=3Dc,r=${clientNonce}`;
    return { bare, reply: c.send({ saslStart: 1, mechanism: 'SCRAM-SHA-256', payload: Buffer.from(gs2 + bare), ...extra, $db: 'admin' }) };
  };
  /** The client-final message proving password `pencil` for the conversation (RFC 5802 / auth spec, SCRAM-SHA-256). */
  const clientFinal = (bare: string, serverFirst: string, nonce = /r=([^,]*)/.exec(serverFirst)![1]): Buffer => {
    const salted = pbkdf2Sync('pencil', salt, 4096, 32, 'sha256');
    const clientKey = createHmac('sha256', salted).update('Client Key').digest();
    const storedKey = createHash('sha256').update(clientKey).digest();
    const withoutProof = `c=biws,r=${nonce}`;
    const signature = createHmac('sha256', storedKey).update(`${bare},${serverFirst},${withoutProof}`).digest();
    const proof = Buffer.from(clientKey.map((b, i) => b ^ signature[i]));
    return Buffer.from(`${withoutProof},p=${proof.toString('base64')}`);
  };
  const payloadText = (reply: Document): string => saslPayloadText(reply.payload) ?? '';
  const authFailed = { ok: 0, code: 18, codeName: 'AuthenticationFailed', errmsg: 'Authentication failed.' };

  it('answers each step as mongod: ProtocolError before saslStart, AuthenticationFailed for a bad gs2 header or nonce, done: false until the empty exchange', async function () {
    const c = await rawClient(server.address);
    expect(await c.send({ saslContinue: 1, conversationId: 1, payload: Buffer.alloc(0), $db: 'admin' })).to.deep.equal({
      ok: 0, code: 17, codeName: 'ProtocolError', errmsg: 'No SASL session state found',
    });
    expect(await start(c, 'nonce0', {}, 'y,,').reply).to.deep.equal(authFailed);
    // A wrong nonce in client-final fails the conversation.
    let { bare, reply } = start(c, 'nonce1');
    let first = await reply;
    expect(first).to.include({ ok: 1, done: false, conversationId: 1 });
    expect(await c.send({ saslContinue: 1, conversationId: 1, payload: clientFinal(bare, payloadText(first), 'nonce1-not-the-servers'), $db: 'admin' })).to.deep.equal(authFailed);
    expect(await c.send({ listDatabases: 1, $db: 'admin' })).to.include({ ok: 0, code: 13 });
    // Without skipEmptyExchange: the proof is answered with done: false and v=..., the empty exchange with done: true.
    ({ bare, reply } = start(c, 'nonce2'));
    first = await reply;
    expect(payloadText(first)).to.match(/^r=nonce2[^,]+,s=[^,]+,i=4096$/);
    const second = await c.send({ saslContinue: 1, conversationId: 1, payload: clientFinal(bare, payloadText(first)), $db: 'admin' });
    expect(second).to.include({ ok: 1, done: false, conversationId: 1 });
    expect(payloadText(second)).to.match(/^v=/);
    const third = await c.send({ saslContinue: 1, conversationId: 1, payload: Buffer.alloc(0), $db: 'admin' });
    expect(third).to.include({ ok: 1, done: true, conversationId: 1 });
    expect(payloadText(third)).to.equal('');
    expect(await c.send({ listDatabases: 1, $db: 'admin' })).to.include({ ok: 1 });
    expect(server.scramConversations()).to.deep.equal({ started: 2, succeeded: 1, failed: 2 });
    c.close();
  });

  it('with skipEmptyExchange, answers the proof with done: true', async function () {
    const c = await rawClient(server.address);
    const { bare, reply } = start(c, 'nonce3', { options: { skipEmptyExchange: true } });
    const first = await reply;
    expect(first).to.include({ ok: 1, done: false });
    const second = await c.send({ saslContinue: 1, conversationId: 1, payload: clientFinal(bare, payloadText(first)), $db: 'admin' });
    expect(second).to.include({ ok: 1, done: true });
    expect(await c.send({ connectionStatus: 1, $db: 'admin' })).to.nested.include({ 'authInfo.authenticatedUsers[0].user': 'a,b=c' });
    c.close();
  });

  it('answers the handshake\'s saslSupportedMechs and speculativeAuthenticate only for a stored user and a saslStart document on a db', async function () {
    const c = await rawClient(server.address);
    const hello = await c.send({ hello: 1, saslSupportedMechs: 'admin.a,b=c', $db: 'admin' });
    expect(hello.saslSupportedMechs).to.deep.equal(['SCRAM-SHA-256']);
    expect(await c.send({ hello: 1, saslSupportedMechs: 'admin.nobody', $db: 'admin' })).to.not.have.property('saslSupportedMechs');
    const bare = 'n=a=2Cb=3Dc,r=nonce4';
    const saslStart = { saslStart: 1, mechanism: 'SCRAM-SHA-256', payload: Buffer.from(`n,,${bare}`), db: 'admin' };
    // Not a saslStart first, a db that is no string, an unknown user: no answer, as if the field had not been sent.
    for (const request of [{ mechanism: 'SCRAM-SHA-256', saslStart: 1, payload: saslStart.payload, db: 'admin' }, { ...saslStart, db: ['admin'] }, { ...saslStart, payload: Buffer.from('n,,n=nobody,r=x') }]) {
      const d = await rawClient(server.address);
      expect(await d.send({ hello: 1, speculativeAuthenticate: request, $db: 'admin' }), JSON.stringify(request)).to.include({ ok: 1 }).and.not.have.property('speculativeAuthenticate');
      d.close();
    }
    // A stored user: the server-first message without ok, and the conversation goes on with saslContinue.
    const reply = await c.send({ hello: 1, speculativeAuthenticate: saslStart, $db: 'admin' });
    expect(reply.speculativeAuthenticate).to.include({ conversationId: 1, done: false }).and.not.have.property('ok');
    const proof = await c.send({ saslContinue: 1, conversationId: 1, payload: clientFinal(bare, payloadText(reply.speculativeAuthenticate)), $db: 'admin' });
    expect(proof).to.include({ ok: 1, done: false });
    expect(await c.send({ listDatabases: 1, $db: 'admin' })).to.include({ ok: 1 });
    expect(server.scramConversations()).to.deep.equal({ started: 1, succeeded: 1, failed: 0 });
    c.close();
  });

  it('ignores speculativeAuthenticate below maxWireVersion 9, as a mongod older than 4.4', async function () {
    await using old = await new EmbeddedServer({ maxWireVersion: 8, users: [{ username: 'u', password: 'p', iterations: 4096 }] }).start();
    const c = await rawClient(old.address);
    const speculativeAuthenticate = { saslStart: 1, mechanism: 'SCRAM-SHA-256', payload: Buffer.from('n,,n=u,r=x'), db: 'admin' };
    expect(await c.send({ hello: 1, speculativeAuthenticate, $db: 'admin' })).to.include({ ok: 1 }).and.not.have.property('speculativeAuthenticate');
  });
});

describe('EmbeddedServer MONGODB-X509 users (raw authenticate, as mongod answers it)', function () {
  const fixture = (name: string): Buffer => fs.readFileSync(path.resolve(__dirname, '../fixtures/tls', name));
  /** The subject of x509-client.pem as RFC 2253 writes it (fixtures README). */
  const SUBJECT = 'CN=client,OU=Drivers,O=rxcmap\\, test,L=Reykjavik,ST=Reykjavik,C=IS';
  const authFailed = { ok: 0, errmsg: 'Authentication failed.', code: 18, codeName: 'AuthenticationFailed' };
  /** One connection with x509-client.pem and no credentials to a TLS endpoint `server`. */
  function tlsConnection(server: EmbeddedServer): Promise<Connection> {
    return establishOne(server.address, { tlsCAFile: path.resolve(__dirname, '../fixtures/tls/ca.pem'), tlsCertificateKeyFile: path.resolve(__dirname, '../fixtures/tls/x509-client.pem') });
  }
  const tlsOf = (requestCert: boolean) => ({ key: fixture('server.key'), cert: fixture('server.crt'), ca: fixture('x509-ca.pem'), requestCert });

  it('authenticates the verified certificate\'s subject on $external only, and words each refusal as mongod', async function () {
    const server = await new EmbeddedServer({ users: [{ username: SUBJECT, db: '$external' }], tls: tlsOf(true) }).start();
    server.handle('whoami', (_command, client) => ({ ok: 1, subject: client.certificateSubject ?? null, user: client.user ?? null }));
    const c = await tlsConnection(server);
    try {
      const users = async (): Promise<unknown> => (await c.command('admin', { connectionStatus: 1 })).authInfo.authenticatedUsers;
      expect(await users()).to.deep.equal([]);
      const refusal = (command: Document, db = '$external') => c.command(db, command).then(() => undefined, (e: MongoServerError) => e.response);
      expect(await refusal({ authenticate: 1, mechanism: 'MONGODB-X509' }, 'admin')).to.deep.equal({
        ok: 0, errmsg: 'X.509 authentication must always use the $external database.', code: 17, codeName: 'ProtocolError',
      });
      expect(await refusal({ authenticate: 1, mechanism: 'SCRAM-SHA-1' })).to.deep.equal(authFailed);
      expect(await refusal({ authenticate: 1, mechanism: 'MONGODB-X509', user: 'CN=client' })).to.deep.equal(authFailed);
      expect(await users()).to.deep.equal([]);
      expect(await c.command('$external', { authenticate: 1, mechanism: 'MONGODB-X509' })).to.deep.equal({ dbname: '$external', user: SUBJECT, ok: 1 });
      expect(await users()).to.deep.equal([{ user: SUBJECT, db: '$external' }]);
      expect(await c.command('admin', { whoami: 1 })).to.deep.equal({ ok: 1, subject: SUBJECT, user: `$external.${SUBJECT}` });
    } finally {
      c.destroy();
      await server.stop();
    }
  });

  it('refuses MONGODB-X509 without TLS (ProtocolError) and without a verified client certificate (AuthenticationFailed)', async function () {
    const plain = await new EmbeddedServer({ users: [{ username: SUBJECT, db: '$external' }] }).start();
    const c = await rawClient(plain.address);
    try {
      expect(await c.send({ authenticate: 1, mechanism: 'MONGODB-X509', $db: '$external' })).to.deep.equal({
        ok: 0, errmsg: 'SSL support is required for the MONGODB-X509 mechanism.', code: 17, codeName: 'ProtocolError',
      });
    } finally {
      c.close();
      await plain.stop();
    }
    // TLS without requestCert: the client presents no certificate, so there is no subject to authenticate.
    const unasked = await new EmbeddedServer({ users: [{ username: SUBJECT, db: '$external' }], tls: tlsOf(false) }).start();
    const t = await tlsConnection(unasked);
    try {
      const error = await t.command('$external', { authenticate: 1, mechanism: 'MONGODB-X509' }).catch((e: MongoServerError) => e);
      expect((error as MongoServerError).response).to.deep.equal(authFailed);
    } finally {
      t.destroy();
      await unasked.stop();
    }
  });

  it('answers a speculative authenticate in the hello only when it would succeed', async function () {
    const server = await new EmbeddedServer({ users: [{ username: SUBJECT, db: '$external' }], tls: tlsOf(true) }).start();
    const c = await tlsConnection(server);
    try {
      const hello = (speculativeAuthenticate: Document) => c.command('admin', { hello: 1, speculativeAuthenticate });
      expect((await hello({ authenticate: 1, mechanism: 'MONGODB-X509', user: 'CN=other' })).speculativeAuthenticate).to.equal(undefined);
      expect((await hello({ authenticate: 1, mechanism: 'MONGODB-X509' })).speculativeAuthenticate).to.deep.equal({ dbname: '$external', user: SUBJECT });
    } finally {
      c.destroy();
      await server.stop();
    }
  });

  it('names a subject with multi-valued RDNs and non-ASCII values as openssl\'s RFC 2253 form and mongod do', async function () {
    // `openssl x509 -in x509-rdn-client.pem -noout -subject -nameopt RFC2253` (fixtures README): every attribute in the
    // reverse order of the certificate's, a multi-valued RDN's too, and each byte of a non-ASCII character as \XX.
    const RDN_SUBJECT = 'UID=42+CN=J\\C3\\B3n,OU=Drivers+O=rxcmap,ST=Reykjav\\C3\\ADk,C=IS';
    const server = await new EmbeddedServer({
      users: [{ username: RDN_SUBJECT, db: '$external' }],
      tls: { key: fixture('server.key'), cert: fixture('server.crt'), ca: fixture('x509-rdn-ca.pem'), requestCert: true },
    }).start();
    server.handle('whoami', (_command, client) => ({ ok: 1, subject: client.certificateSubject ?? null }));
    const [host, port] = server.address.split(':');
    const factory = connectionFactory({ host, port: Number(port), tlsCAFile: path.resolve(__dirname, '../fixtures/tls/ca.pem'), tlsCertificateKeyFile: path.resolve(__dirname, '../fixtures/tls/x509-rdn-client.pem') });
    const c = await firstValueFrom(from(factory({ id: 1, generation: 0, address: server.address, signal: new AbortController().signal })));
    try {
      expect(await c.command('$external', { authenticate: 1, mechanism: 'MONGODB-X509' })).to.deep.equal({ dbname: '$external', user: RDN_SUBJECT, ok: 1 });
      expect(await c.command('admin', { whoami: 1 })).to.deep.equal({ ok: 1, subject: RDN_SUBJECT });
    } finally {
      c.destroy();
      await server.stop();
    }
  });

  it('takes a user of $external with its name and, for PLAIN, a password: a SCRAM setting or a password not a string is refused', function () {
    for (const [user, message] of [
      [{ username: SUBJECT, db: '$external', password: 5 as unknown as string }, 'Invalid password: "<not shown>" (password must be a string, or none)'],
      [{ username: SUBJECT, db: '$external', mechanisms: ['SCRAM-SHA-256'] }, 'Invalid mechanisms: ["SCRAM-SHA-256"] (mechanisms must be none for a user in $external (MONGODB-X509, PLAIN))'],
      [{ username: SUBJECT, db: '$external', iterations: 4096 }, 'Invalid iterations: 4096 (iterations must be none for a user in $external (MONGODB-X509, PLAIN))'],
    ] as [EmbeddedUser, string][]) {
      expect(() => new EmbeddedServer({ users: [user] }), message).to.throw(InvalidOptionError).with.property('message', message);
    }
    expect(() => new EmbeddedServer({ users: [{ username: SUBJECT, db: '$external', password: 'pencil' }] })).to.not.throw();
  });
});

describe('EmbeddedServer PLAIN (raw saslStart, as a mongod with PLAIN enabled answers it)', function () {
  const authFailed = { ok: 0, errmsg: 'Authentication failed.', code: 18, codeName: 'AuthenticationFailed' };
  const done = { conversationId: 1, done: true, payload: new Binary(Buffer.alloc(0)), ok: 1 };
  const saslStart = (payload: string | Buffer): Document => ({ saslStart: 1, mechanism: 'PLAIN', payload: new Binary(Buffer.isBuffer(payload) ? payload : Buffer.from(payload, 'utf8')), autoAuthorize: 1 });
  let server: EmbeddedServer;
  before(async function () {
    server = await new EmbeddedServer({
      users: [
        { username: 'user', password: 'pencil', db: '$external' },
        { username: 'CN=x509 only', db: '$external' },
        { username: 'scram', password: 'p\u00A0w', db: 'sales' },
        { username: 'sha1', password: 'pw1', db: 'sales', mechanisms: ['SCRAM-SHA-1'] },
      ],
    }).start();
  });
  after(async function () {
    await server?.stop();
  });
  /** Sends `command` to `db` on a fresh connection; resolves to the reply (or the refusal's) and the users after it. */
  async function attempt(db: string, command: Document): Promise<{ reply: Document; users: unknown }> {
    const c = await establishOne(server.address);
    try {
      const reply = await c.command(db, command).catch((e: MongoServerError) => e.response);
      const users = (await c.command('admin', { connectionStatus: 1 })).authInfo.authenticatedUsers;
      return { reply, users };
    } finally {
      c.destroy();
    }
  }

  it('authenticates a user of $external in one step, with or without the authorization identity (the auth spec\'s two forms)', async function () {
    for (const payload of [Buffer.from('AHVzZXIAcGVuY2ls', 'base64'), Buffer.from('dXNlcgB1c2VyAHBlbmNpbA==', 'base64')]) {
      const { reply, users } = await attempt('$external', saslStart(payload));
      expect(reply).to.deep.equal(done);
      expect(users).to.deep.equal([{ user: 'user', db: '$external' }]);
    }
  });

  it('answers every refusal with AuthenticationFailed, "Authentication failed.", and authenticates nobody', async function () {
    for (const payload of ['\0user\0wrong', '\0nobody\0pencil', '\0user\0', '\0\0pencil', 'other\0user\0pencil', 'user-pencil', '\0user', '\0CN=x509 only\0pencil']) {
      const { reply, users } = await attempt('$external', saslStart(payload));
      expect(reply, JSON.stringify(payload)).to.deep.equal(authFailed);
      expect(users).to.deep.equal([]);
    }
  });

  it('checks a user of another database against its SCRAM credentials: SCRAM-SHA-256 with the password as given, else SCRAM-SHA-1', async function () {
    // The SCRAM-SHA-256 key was derived from the SASLprep'd password ('p w': U+00A0 mapped to a space), and PLAIN
    // derives from the password as given, as a mongod does: only the prepared form matches.
    expect((await attempt('sales', saslStart('\0scram\0p w'))).users).to.deep.equal([{ user: 'scram', db: 'sales' }]);
    expect((await attempt('sales', saslStart('\0scram\0p\u00A0w'))).reply).to.deep.equal(authFailed);
    expect((await attempt('sales', saslStart('\0sha1\0pw1'))).users).to.deep.equal([{ user: 'sha1', db: 'sales' }]);
    expect((await attempt('sales', saslStart('\0sha1\0pw2'))).reply).to.deep.equal(authFailed);
    // An LDAP user is in $external only.
    expect((await attempt('admin', saslStart('\0user\0pencil'))).reply).to.deep.equal(authFailed);
  });

  it('cuts the password of a user of another database at its first NUL, as a mongod does (it reads it as a C string)', async function () {
    // mongod's PLAIN for its own users: pwd = input.substr(secondNull + 1).c_str(), then the empty check.
    expect((await attempt('sales', saslStart('\0sha1\0pw1\0anything'))).users).to.deep.equal([{ user: 'sha1', db: 'sales' }]);
    expect((await attempt('sales', saslStart('\0scram\0p w\0anything'))).users).to.deep.equal([{ user: 'scram', db: 'sales' }]);
    expect((await attempt('sales', saslStart('\0sha1\0\0pw1'))).reply).to.deep.equal(authFailed);
    expect((await attempt('sales', saslStart('\0sha1\0pw1\0'))).users).to.deep.equal([{ user: 'sha1', db: 'sales' }]);
  });

  it('leaves no conversation to continue, and never answers PLAIN in the handshake', async function () {
    const c = await establishOne(server.address);
    try {
      await c.command('$external', saslStart('\0user\0pencil'));
      const error = await c.command('$external', { saslContinue: 1, conversationId: 1, payload: new Binary(Buffer.alloc(0)) }).catch((e: MongoServerError) => e);
      expect((error as MongoServerError).response).to.deep.equal({ ok: 0, code: 17, codeName: 'ProtocolError', errmsg: 'No SASL session state found' });
      const hello = await c.command('admin', { hello: 1, speculativeAuthenticate: { ...saslStart('\0user\0pencil'), db: '$external' } });
      expect(hello).to.not.have.property('speculativeAuthenticate');
    } finally {
      c.destroy();
    }
  });
});

describe('EmbeddedServer users changed while running (setUsers)', function () {
  const S1 = Buffer.from('generation-0-salt');
  const S2 = Buffer.from('generation-1-salt');
  const alice = (password: string, salt: Buffer, iterations: number): EmbeddedUser => ({
    username: 'alice',
    password,
    salt,
    iterations,
  });
  let server: EmbeddedServer;
  const connections: Connection[] = [];
  beforeEach(async function () {
    server = await new EmbeddedServer({ users: [alice('pencil', S1, 4096)] }).start();
  });
  afterEach(async function () {
    for (const c of connections.splice(0)) c.destroy();
    await server.stop();
  });
  const open = async (credentials?: CredentialsInit): Promise<Connection> => {
    const c = await establish(server.address, credentials);
    connections.push(c);
    return c;
  };

  it('keeps connections already authenticated, and authenticates new ones against the new users (salt, iterations, password)', async function () {
    const before = await open();
    const first = await scram(before, { username: 'alice', password: 'pencil' });
    expect(first).to.include(`s=${S1.toString('base64')},i=4096`);
    expect(server.usersGeneration).to.equal(0);

    server.setUsers([alice('new-pencil', S2, 5000)]);
    expect(server.usersGeneration).to.equal(1);
    expect(await authorized(before), 'an authenticated connection keeps its user').to.equal(true);
    const status = await before.command('admin', { connectionStatus: 1 });
    expect(status.authInfo.authenticatedUsers).to.deep.equal([{ user: 'alice', db: 'admin' }]);

    const stale = await scram(await open(), { username: 'alice', password: 'pencil' }).catch((e: unknown) => e);
    expect(stale, 'the former password').to.be.instanceOf(AuthenticationError);
    const after = await open();
    expect(await authorized(after), 'not yet authenticated').to.equal(false);
    const second = await scram(after, { username: 'alice', password: 'new-pencil' });
    expect(second).to.include(`s=${S2.toString('base64')},i=5000`);
    expect(await authorized(after)).to.equal(true);

    const [a, , c] = server.clientConnections();
    expect([a.usersGeneration, a.saslConversations, a.user]).to.deep.equal([0, 1, 'admin.alice']);
    expect([c.usersGeneration, c.saslConversations, c.user]).to.deep.equal([1, 1, 'admin.alice']);
    expect(server.scramConversations(0)).to.deep.equal({ started: 1, succeeded: 1, failed: 0 });
    expect(server.scramConversations()).to.deep.equal({ started: 2, succeeded: 1, failed: 1 });
  });

  it('draws a fresh salt for every user re-created without one, even with the same password', async function () {
    server.setUsers([{ username: 'bob', password: 'pencil', iterations: 4096 }]);
    const first = await scram(await open(), { username: 'bob', password: 'pencil' });
    server.setUsers([{ username: 'bob', password: 'pencil', iterations: 4096 }]);
    const second = await scram(await open(), { username: 'bob', password: 'pencil' });
    const salt = (message: string | undefined): string | undefined => /,s=([^,]+),/.exec(message ?? '')?.[1];
    expect(salt(first)).to.be.a('string').with.length.above(0);
    expect(salt(second)).to.be.a('string').that.does.not.equal(salt(first));
    expect([server.scramConversations(1).succeeded, server.scramConversations(2).succeeded]).to.deep.equal([1, 1]);
  });

  it('answers saslStart for a mechanism it does not have with AuthenticationFailed, whatever its name, and the connection stays usable', async function () {
    // Names an Object has as properties (constructor, toString, __proto__) included: they are no stored mechanism.
    const c = await open();
    for (const mechanism of ['GSSAPI', 'constructor', 'toString', '__proto__', 'hasOwnProperty']) {
      const payload = Buffer.from('n,,n=alice,r=abcdef');
      const error = await c.command('admin', { saslStart: 1, mechanism, payload, options: { skipEmptyExchange: true } }).catch((e: unknown) => e);
      expect(error, mechanism).to.be.instanceOf(MongoServerError).with.property('code', 18);
    }
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
    expect(server.scramConversations()).to.deep.equal({ started: 0, succeeded: 0, failed: 5 });
  });

  it('counts a saslStart without the gs2 header n,, as a failed conversation, as it answers it AuthenticationFailed', async function () {
    const c = await open();
    for (const header of ['y,,', 'p=tls-unique,,', '']) {
      const payload = Buffer.from(`${header}n=alice,r=abcdef`);
      const error = await c.command('admin', { saslStart: 1, mechanism: 'SCRAM-SHA-256', payload }).catch((e: unknown) => e);
      expect(error, header).to.be.instanceOf(MongoServerError).and.include({ code: 18, codeName: 'AuthenticationFailed' });
    }
    expect(server.scramConversations()).to.deep.equal({ started: 0, succeeded: 0, failed: 3 });
  });

  it('a user left out no longer authenticates; an empty list turns authentication off for new commands', async function () {
    const kept = await open({ username: 'alice', password: 'pencil' });
    server.setUsers([{ username: 'bob', password: 'pencil', iterations: 4096 }]);
    const error = await scram(await open(), { username: 'alice', password: 'pencil' }).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(AuthenticationError);
    expect((error as Error).message).to.include('"alice"').and.not.include('pencil');
    expect(server.scramConversations(), 'refused at saslStart').to.deep.equal({ started: 0, succeeded: 0, failed: 1 });
    expect(await authorized(kept), 'authenticated before the change').to.equal(true);

    server.setUsers([]);
    expect(server.usersGeneration).to.equal(2);
    expect(await authorized(await open())).to.equal(true);
  });

  it('a conversation in progress ends against the salt it started with, and fails if its user was left out', async function () {
    const credentials = { username: 'alice', password: 'pencil' };
    const first = await scram(await open(), credentials, () => server.setUsers([alice('pencil', S2, 5000)]));
    expect(first).to.include(`s=${S1.toString('base64')}`);
    expect(server.usersGeneration, 'the users changed between saslStart and saslContinue').to.equal(1);
    expect(server.scramConversations(0)).to.deep.equal({ started: 1, succeeded: 1, failed: 0 });
    expect(server.clientConnections()[0].usersGeneration).to.equal(0);

    const left = await open();
    const removed = (): void => server.setUsers([{ username: 'bob', password: 'x' }]);
    const error = await scram(left, credentials, removed).catch((e: unknown) => e);
    expect(error).to.be.instanceOf(AuthenticationError);
    const counts = server.scramConversations(1);
    expect(counts, 'counted in the generation it started in').to.deep.equal({ started: 1, succeeded: 0, failed: 1 });
    expect(server.clientConnections()[1].user).to.equal(undefined);
  });

  it('accepts a salt of 1 or 1024 bytes and a db other than admin', async function () {
    server.setUsers([
      { username: 'one', password: 'p', salt: Buffer.alloc(1, 7), iterations: 4096 },
      { username: 'max', password: 'p', salt: Buffer.alloc(1024, 7), iterations: 4096, db: 'test' },
    ]);
    expect(server.usersGeneration).to.equal(1);
    expect(await scram(await open(), { username: 'max', password: 'p', source: 'test' })).to.include(`s=${Buffer.alloc(1024, 7).toString('base64')}`);
  });

  it('checks every user before replacing any: an invalid list throws InvalidOptionError and leaves the users as they were', async function () {
    const invalid: [unknown, RegExp][] = [
      [undefined, /Invalid users: .*\(users must be an array of users\)/],
      [
        [alice('s3cret-pw', S2, 5000), { username: 'bob', password: 's3cret-pw', iterations: 0 }],
        /Invalid iterations: 0 \(iterations must be a positive integer\)/,
      ],
      [[null], /Invalid user: null \(user must be an object \{ username, password, ... \}\)/],
      [['bob'], /Invalid user: .*\(user must be an object/],
      [[{ username: '', password: 's3cret-pw' }], /Invalid username: .*\(username must be a non-empty string\)/],
      [[{ username: 'bob', password: 42 }], /Invalid password: "<not shown>" \(password must be a string\)/],
      [[{ username: 'bob', password: 's3cret-pw', db: '' }], /Invalid db: .*\(db must be a non-empty database name\)/],
      [[{ username: 'bob', password: 's3cret-pw', db: 5 }], /Invalid db: 5 /],
      [[{ username: 'bob', password: 's3cret-pw', mechanisms: ['PLAIN'] }], /Invalid mechanisms: .*\(mechanisms must be a non-empty list of SCRAM-SHA-256, SCRAM-SHA-1\)/],
      [[{ username: 'bob', password: 's3cret-pw', mechanisms: ['SCRAM-SHA-256', 'PLAIN'] }], /Invalid mechanisms/],
      [[{ username: 'bob', password: 's3cret-pw', mechanisms: [] }], /Invalid mechanisms/],
      [[{ username: 'bob', password: 's3cret-pw', salt: Buffer.alloc(0) }], /Invalid salt: .*\(salt must be a Uint8Array of 1 to 1024 bytes\)/],
      [[{ username: 'bob', password: 's3cret-pw', salt: Buffer.alloc(1025) }], /Invalid salt/],
      [[{ username: 'bob', password: 's3cret-pw', salt: 'c2FsdA==' }], /Invalid salt/],
    ];
    for (const [users, message] of invalid) {
      const error = (() => {
        try {
          server.setUsers(users as EmbeddedUser[]);
        } catch (e) {
          return e;
        }
        return undefined;
      })();
      expect(error, inspect(users)).to.be.instanceOf(InvalidOptionError);
      expect((error as Error).message).to.match(message).and.not.include('s3cret-pw');
      expect(inspect(error, { showHidden: true, depth: 5 })).to.not.include('s3cret-pw');
    }
    expect(server.usersGeneration).to.equal(0);
    const serverFirst = await scram(await open(), { username: 'alice', password: 'pencil' });
    expect(serverFirst).to.include(`s=${S1.toString('base64')}`);
  });

  it('answers connectionStatus without authentication, naming no user before it', async function () {
    const c = await open();
    expect(await c.command('admin', { connectionStatus: 1 })).to.deep.equal({
      authInfo: { authenticatedUsers: [], authenticatedUserRoles: [] },
      ok: 1,
    });
  });
});

describe('EmbeddedServer without TLS', function () {
  let server: EmbeddedServer;
  beforeEach(async function () {
    server = await new EmbeddedServer().start();
  });
  afterEach(async function () {
    await server.stop();
  });

  it('closes the connection of a TLS client at its first bytes, as mongod does, instead of waiting for the multi-MB message its first bytes seem to announce', async function () {
    const [host, port] = server.address.split(':');
    const factory = connectionFactory({ host, port: Number(port), tls: true, tlsAllowInvalidCertificates: true, connectTimeoutMS: 5_000 });
    const error = await firstValueFrom(from(factory({ id: 1, generation: 0, address: server.address, signal: new AbortController().signal }))).then(
      () => undefined,
      (e: unknown) => e,
    );
    // Before: the endpoint read the TLS ClientHello as the length of a wire message and waited for the rest, so the
    // client failed only at connectTimeoutMS.
    expect(error).to.be.instanceOf(MongoNetworkError);
    expect(error).not.to.be.instanceOf(MongoNetworkTimeoutError);
  });

  it('recognises a TLS record split over several writes, and still serves a first message split the same way', async function () {
    const [host, port] = server.address.split(':');
    const clientHello = Buffer.from('16030101580100015403030000000000000000000000000000000000', 'hex'); // as a TLS client starts
    const tlsClient = net.connect({ host, port: Number(port), noDelay: true });
    tlsClient.on('error', () => undefined);
    // Two TCP segments read apart: real time between the writes, as nothing on the endpoint shows the first arrived.
    const apart = () => new Promise((r) => setTimeout(r, 20));
    const closed = new Promise((r) => tlsClient.once('close', r));
    await new Promise((r) => tlsClient.once('connect', r));
    tlsClient.write(clientHello.subarray(0, 3));
    await apart();
    tlsClient.write(clientHello.subarray(3));
    await closed; // closed by the endpoint: the test times out otherwise
    const a = await rawClient(server.address);
    const message = encodeOpMsg(1, 0, { hello: 1, $db: 'admin' });
    const reply = new Promise<Document>((resolve) => {
      a.socket.once('data', (chunk: Buffer) => resolve(decodeOpMsg(new MessageFramer().push(chunk)[0].body).document));
    });
    a.socket.setNoDelay(true);
    a.socket.write(message.subarray(0, 3));
    await apart();
    a.socket.write(message.subarray(3));
    expect(await reply).to.include({ isWritablePrimary: true, ok: 1 });
    a.close();
  });

  it('still serves a first message whose length starts with the bytes of a TLS record (790 bytes: 16 03 00 00)', async function () {
    const base = encodeOpMsg(1, 0, { hello: 1, $db: 'admin', pad: '' }).length;
    const message = encodeOpMsg(1, 0, { hello: 1, $db: 'admin', pad: 'x'.repeat(790 - base) });
    expect([...message.subarray(0, 4)]).to.deep.equal([0x16, 0x03, 0x00, 0x00]);
    const a = await rawClient(server.address);
    const reply = await new Promise<Document>((resolve) => {
      a.socket.once('data', (chunk: Buffer) => resolve(decodeOpMsg(new MessageFramer().push(chunk)[0].body).document));
      a.socket.write(message);
    });
    a.close();
    expect(reply).to.include({ isWritablePrimary: true, ok: 1 });
  });
});

describe('EmbeddedServer.stop()', function () {
  const fixtures = path.resolve(__dirname, '../fixtures/tls');

  it('with TLS, closes a connection still in its TLS handshake and resolves at once', async function () {
    const tlsOptions = { key: fs.readFileSync(path.join(fixtures, 'server.key')), cert: fs.readFileSync(path.join(fixtures, 'server.crt')) };
    const server = await new EmbeddedServer({ tls: tlsOptions }).start();
    const [host, port] = server.address.split(':');
    // Connected over TCP, never starting its TLS handshake (a client stalled, or one whose handshake is under way).
    const socket = net.connect({ host, port: Number(port) });
    socket.on('error', () => undefined);
    const closed = new Promise((r) => socket.once('close', r));
    await new Promise((r) => socket.once('connect', r));
    await new Promise((r) => setTimeout(r, 20)); // taken by the server's listener
    expect(server.connectionsAccepted, 'a client connection only once its TLS handshake is done').to.equal(0);
    const started = performance.now();
    // A stop that waited for the stalled client would never end (the race ends it at 3 s): 2.5 s leaves a loaded
    // machine's pauses room.
    const outcome = await Promise.race([server.stop().then(() => 'stopped'), new Promise((r) => setTimeout(() => r('still stopping after 3000 ms'), 3000).unref())]);
    socket.destroy();
    expect(outcome).to.equal('stopped');
    expect(performance.now() - started).to.be.below(2500);
    await closed;
  });
});

describe('EmbeddedServer restarted (start() after stop())', function () {
  it('answers with a new topologyVersion.processId and its counter back at 0, on the same port, as a restarted mongod', async function () {
    const probe = await new EmbeddedServer().start();
    const port = Number(probe.address.split(':')[1]);
    await probe.stop();
    const server = await new EmbeddedServer({ port }).start();
    try {
      server.changeTopology();
      server.changeTopology();
      const before = server.topologyVersion;
      await server.stop();
      await server.start();
      expect(server.address).to.equal(`127.0.0.1:${port}`);
      const client = await rawClient(server.address);
      try {
        const reply = await client.send({ hello: 1, $db: 'admin' });
        expect(reply.topologyVersion.processId.equals(before.processId), 'a new process').to.equal(false);
        expect(Number(reply.topologyVersion.counter)).to.equal(0);
        expect(Number(before.counter)).to.equal(2);
      } finally {
        client.close();
      }
    } finally {
      await server.stop();
    }
  });
});

describe('EmbeddedServer restarted on a port it picked (port 0)', function () {
  it('listens again on the port it picked at its first start, so clients of its address reach the restarted server', async function () {
    const server = await new EmbeddedServer().start();
    const pool = new ConnectionPool({ address: server.address });
    try {
      pool.ready();
      const address = server.address;
      await pool.withConnection((c) => c.command('admin', { ping: 1 }));
      await server.stop();
      await server.start();
      expect(server.address).to.equal(address);
      // The connection to the stopped server is gone; the next one reaches the restarted server at the same address.
      await pool.withConnection((c) => c.command('admin', { ping: 1 })).catch(() => undefined);
      pool.ready();
      expect(await pool.withConnection((c) => c.command('admin', { ping: 1 }))).to.include({ ok: 1 });
      expect(server.openConnections).to.equal(1);
    } finally {
      pool.close();
      await server.stop();
    }
  });
});

describe('EmbeddedServer.start()', function () {
  it('keeps, at its first start, the processId and topology changes it has from construction: only a restart renews them', async function () {
    const server = new EmbeddedServer();
    const processId = server.topologyVersion.processId;
    server.changeTopology();
    await server.start();
    try {
      expect(server.topologyVersion.processId.equals(processId)).to.equal(true);
      expect(Number(server.topologyVersion.counter)).to.equal(1);
    } finally {
      await server.stop();
    }
  });

  it('rejects with EADDRINUSE when its port is taken by another process\'s listener, instead of throwing an unhandled error', async function () {
    const taken = net.createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const port = (taken.address() as net.AddressInfo).port;
    try {
      const error = await new EmbeddedServer({ port }).start().catch((e: unknown) => e);
      expect(error).to.be.instanceOf(Error).and.include({ code: 'EADDRINUSE' });
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
  });

  it('restarts fifteen times without a process warning (no listener left behind per start)', async function () {
    const warnings: Error[] = [];
    const onWarning = (w: Error): number => warnings.push(w);
    process.on('warning', onWarning);
    const server = new EmbeddedServer();
    try {
      for (let i = 0; i < 15; i++) {
        await server.start();
        await server.stop();
      }
      await new Promise((r) => setImmediate(r));
      expect(warnings.map((w) => w.message)).to.deep.equal([]);
    } finally {
      process.off('warning', onWarning);
      await server.stop();
    }
  });
});

describe('EmbeddedServer.waitForOpenConnections()', function () {
  it('resolves once the server has seen the connections of a closed pool close, and to the count at its timeout otherwise', async function () {
    const server = await new EmbeddedServer().start();
    const pool = new ConnectionPool({ address: server.address, minPoolSize: 3 });
    try {
      pool.ready();
      await pool.warmUp();
      expect(await server.waitForOpenConnections(3)).to.equal(3);
      pool.close();
      // The server sees its sockets close some turns of the event loop after close(): no polling of one's own, and
      // no waiting for the timeout either.
      // (Waiting for the timeout would take its 5 s: 3 s leaves a loaded machine's pauses room.)
      const stillWaiting = new Promise((resolve) => setTimeout(() => resolve('still waiting after 3 s'), 3000).unref());
      expect(await Promise.race([server.waitForOpenConnections(0, { timeoutMS: 5_000 }), stillWaiting])).to.equal(0);
      const other = new ConnectionPool({ address: server.address });
      other.ready();
      await other.withConnection((c) => c.command('admin', { ping: 1 }));
      const started = performance.now();
      // A connection still open (a leak, here on purpose): it resolves at its timeout with the count it saw.
      expect(await server.waitForOpenConnections(0, { timeoutMS: 50 })).to.equal(1);
      expect(performance.now() - started).to.be.within(45, 1000);
      other.close();
      expect(await server.waitForOpenConnections(0)).to.equal(0);
    } finally {
      pool.close();
      await server.stop();
    }
  });

  it('refuses a count or timeoutMS it cannot wait for with InvalidOptionError naming it', async function () {
    const server = new EmbeddedServer();
    for (const [count, options, option] of [
      [-1, undefined, 'count'],
      [1.5, undefined, 'count'],
      ['0', undefined, 'count'],
      [0, { timeoutMS: -1 }, 'timeoutMS'],
      [0, { timeoutMS: Infinity }, 'timeoutMS'],
      [0, { timeoutMs: 5 }, 'timeoutMs'],
    ] as const) {
      const call = () => server.waitForOpenConnections(count as number, options as { timeoutMS?: number });
      expect(call, `${String(count)} ${JSON.stringify(options)}`).to.throw(InvalidOptionError).with.property('option', option);
    }
    expect(() => server.waitForOpenConnections(-1)).to.throw(InvalidOptionError).with.property('allowed').that.matches(/^an integer >= 0/);
    expect(() => server.waitForOpenConnections(0, { timeoutMS: -1 })).to.throw(InvalidOptionError).with.property('allowed').that.matches(/^a number of ms from 0 to \d+/);
    expect(() => server.waitForOpenConnections(0, { timeoutMs: 5 } as never)).to.throw(InvalidOptionError, /waitForOpenConnections/);
  });

  it('resolves at once when the count is already reached, whatever timeoutMS from 0 to the longest Node timer', async function () {
    await using server = await new EmbeddedServer().start();
    const started = Date.now();
    expect(await server.waitForOpenConnections(0, { timeoutMS: 2 ** 31 - 1 })).to.equal(0);
    expect(await server.waitForOpenConnections(0, { timeoutMS: 0 })).to.equal(0);
    expect(Date.now() - started).to.be.below(1_000);
  });
});

describe('EmbeddedServer.handle()', function () {
  it('refuses a command name that is not a non-empty string, or a handler that is not a function, with InvalidOptionError', function () {
    const server = new EmbeddedServer();
    const ping = () => ({ ok: 1 });
    const bad: [unknown, unknown, string][] = [
      [1, ping, 'commandName'],
      ['', ping, 'commandName'],
      [undefined, ping, 'commandName'],
      ['ping', 5, 'handler'],
      ['ping', undefined, 'handler'],
    ];
    for (const [name, handler, option] of bad) {
      const call = () => server.handle(name as string, handler as () => { ok: number });
      expect(call, `handle(${String(name)}, ${typeof handler})`).to.throw(InvalidOptionError).with.property('option', option);
    }
  });
});

describe('EmbeddedServer replies as mongod words them', function () {
  let server: EmbeddedServer;
  afterEach(async function () {
    await server.stop();
  });

  it('refuses a command before authentication with Unauthorized naming the command as sent, and answers buildInfo, ping and connectionStatus without it', async function () {
    server = await new EmbeddedServer({ users: [{ username: 'alice', password: 'pencil', iterations: 4096 }] }).start();
    const c = await rawClient(server.address);
    expect(await c.send({ listDatabases: 1, $db: 'admin' })).to.deep.equal({ ok: 0, code: 13, codeName: 'Unauthorized', errmsg: 'command listDatabases requires authentication' });
    expect(await c.send({ find: 'things', $db: 'test' })).to.deep.equal({ ok: 0, code: 13, codeName: 'Unauthorized', errmsg: 'command find requires authentication' });
    expect(await c.send({ buildInfo: 1, $db: 'admin' })).to.include({ ok: 1 });
    expect(await c.send({ ping: 1, $db: 'admin' })).to.deep.equal({ ok: 1 });
    expect(await c.send({ connectionStatus: 1, $db: 'admin' })).to.include({ ok: 1 });
    c.close();
  });

  it('answers buildInfo with the version, its four-number versionArray and maxBsonObjectSize 16 MiB, and endSessions with ok: 1', async function () {
    server = await new EmbeddedServer({ version: '7.0.12' }).start();
    const c = await rawClient(server.address);
    expect(await c.send({ buildInfo: 1, $db: 'admin' })).to.deep.equal({ version: '7.0.12', versionArray: [7, 0, 12, 0], maxBsonObjectSize: 16777216, ok: 1 });
    expect(await c.send({ endSessions: [], $db: 'admin' })).to.deep.equal({ ok: 1 });
    c.close();
  });

  it('words the refusals of configureFailPoint off admin and of a second client metadata as mongod', async function () {
    server = await new EmbeddedServer().start();
    const c = await rawClient(server.address);
    expect(await c.send({ configureFailPoint: 'failCommand', mode: 'off', $db: 'test' })).to.deep.equal({
      ok: 0, errmsg: 'configureFailPoint may only be run against the admin database.', code: 13, codeName: 'Unauthorized',
    });
    await c.send({ hello: 1, client: { application: { name: 'a' } }, $db: 'admin' });
    expect(await c.send({ hello: 1, client: { application: { name: 'a' } }, $db: 'admin' })).to.deep.equal({
      ok: 0, errmsg: 'The client metadata document may only be sent in the first hello', code: 186, codeName: 'ClientMetadataCannotBeMutated',
    });
    c.close();
  });
});

describe('EmbeddedServer failCommand, as mongod applies it', function () {
  let server: EmbeddedServer;
  afterEach(async function () {
    await server.stop();
  });
  const failPoint = (data: Document) => ({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data, $db: 'admin' });

  it('never fails configureFailPoint itself, even when failCommands names it, so the fail point can be turned off', async function () {
    server = await new EmbeddedServer().start();
    const c = await rawClient(server.address);
    expect(await c.send(failPoint({ failCommands: ['configureFailPoint', 'ping'], errorCode: 2 }))).to.deep.equal({ ok: 1 });
    expect(await c.send({ ping: 1, $db: 'admin' })).to.include({ ok: 0, code: 2 });
    expect(await c.send({ configureFailPoint: 'failCommand', mode: 'off', $db: 'admin' })).to.deep.equal({ ok: 1 });
    expect(await c.send({ ping: 1, $db: 'admin' })).to.deep.equal({ ok: 1 });
    c.close();
  });

  it('adds topologyVersion to a replica set member\'s "not primary" errors only (from maxWireVersion 9): not to a standalone\'s, nor to shutdown errors, as mongod outside quiesce mode', async function () {
    server = await new EmbeddedServer().start();
    const c = await rawClient(server.address);
    for (const code of [91, 11600, 10107, 2]) {
      await c.send(failPoint({ failCommands: ['find'], errorCode: code }));
      expect(await c.send({ find: 'c', $db: 'test' }), `standalone, code ${code}`).to.include({ ok: 0, code }).and.not.to.have.property('topologyVersion');
    }
    c.close();
    await server.stop();
    server = await new EmbeddedServer({ replicaSetMember: { setName: 'tv', state: 'primary' } }).start();
    const member = await rawClient(server.address);
    for (const code of [189, 10107, 11602, 13435, 13436]) {
      await member.send(failPoint({ failCommands: ['find'], errorCode: code }));
      const reply = await member.send({ find: 'c', $db: 'test' });
      expect(reply, `member, code ${code}`).to.include({ ok: 0, code });
      expect(reply.topologyVersion.processId.equals(server.topologyVersion.processId), `member, code ${code}`).to.equal(true);
    }
    for (const code of [91, 11600, 2]) {
      await member.send(failPoint({ failCommands: ['find'], errorCode: code }));
      expect(await member.send({ find: 'c', $db: 'test' }), `member, code ${code}`).to.include({ ok: 0, code }).and.not.to.have.property('topologyVersion');
    }
    member.close();
    await server.stop();
    server = await new EmbeddedServer({ maxWireVersion: 8, replicaSetMember: { setName: 'tv8', state: 'primary' } }).start();
    const old = await rawClient(server.address);
    await old.send(failPoint({ failCommands: ['find'], errorCode: 10107 }));
    expect(await old.send({ find: 'c', $db: 'test' })).to.include({ ok: 0, code: 10107 }).and.not.to.have.property('topologyVersion');
    old.close();
  });

  it('adds the writeConcernError to a reply that succeeded with ok: true as with ok: 1', async function () {
    server = await new EmbeddedServer().start();
    server.handle('insert', () => ({ ok: true, n: 1 }));
    const c = await rawClient(server.address);
    const writeConcernError = { code: 64, codeName: 'WriteConcernTimeout', errmsg: 'waiting for replication timed out' };
    await c.send(failPoint({ failCommands: ['insert'], writeConcernError }));
    expect(await c.send({ insert: 'c', documents: [{}], $db: 'test' })).to.deep.equal({ ok: true, n: 1, writeConcernError });
    c.close();
  });

  it('blocks many commands in turn on one connection (blockTimeMS) without a process warning (no listener left behind per block)', async function () {
    const warnings: Error[] = [];
    const onWarning = (w: Error): number => warnings.push(w);
    process.on('warning', onWarning);
    try {
      server = await new EmbeddedServer().start();
      const c = await rawClient(server.address);
      await c.send(failPoint({ failCommands: ['ping'], blockConnection: true, blockTimeMS: 1 }));
      for (let i = 0; i < 15; i++) expect(await c.send({ ping: 1, $db: 'admin' })).to.deep.equal({ ok: 1 });
      await new Promise((r) => setImmediate(r));
      expect(warnings.map((w) => w.message)).to.deep.equal([]);
      c.close();
    } finally {
      process.off('warning', onWarning);
    }
  });
});

describe('EmbeddedServer: Stable API parameters, as mongod checks them', function () {
  let server: EmbeddedServer;
  afterEach(async function () {
    await server?.stop();
  });

  it('requireApiVersion refuses a command without apiVersion (498870), hello and the OP_QUERY legacy hello included', async function () {
    server = await new EmbeddedServer({ requireApiVersion: true }).start();
    const refused = await establishOne(server.address).catch((e: unknown) => e);
    expect(refused).to.include({ code: 498870, codeName: 'Location498870' });
    expect((refused as Error).message).to.equal("The apiVersion parameter is required, please configure your MongoClient's API version");
    // The legacy hello over OP_QUERY, as old drivers open with: refused the same way.
    const socket = net.connect(Number(server.address.split(':')[1]), '127.0.0.1');
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write(encodeOpQuery(1, 'admin.$cmd', { isMaster: 1 }));
    const framer = new MessageFramer();
    const reply = await new Promise<Document>((resolve) => socket.on('data', (chunk: Buffer) => {
      const [message] = framer.push(chunk);
      if (message !== undefined) resolve(decodeOpReply(message.body));
    }));
    socket.destroy();
    expect(reply).to.include({ ok: 0, code: 498870 });
  });

  it('accepts a command with apiVersion "1" and records, per connection, what each command carried', async function () {
    server = await new EmbeddedServer({ requireApiVersion: true }).start();
    const connection = await establishOne(server.address, { serverApi: { version: '1', strict: false } });
    try {
      await connection.command('admin', { ping: 1 });
      const [info] = server.clientConnections();
      expect(info.handshakeApiParameters).to.deep.equal({ apiVersion: '1', apiStrict: false });
      expect(info.apiParameters.ping).to.deep.equal({ apiVersion: '1', apiStrict: false });
    } finally {
      connection.destroy();
    }
  });

  /** What `command` run on `connection` in admin gets: `{}` when it succeeds, else the refusal's code, codeName and message. */
  const refusalOf = (connection: Connection, command: Document): Promise<Document> =>
    connection.command('admin', command).then(
      () => ({}),
      (e: { code?: number; codeName?: string; message: string }) => ({ code: e.code, codeName: e.codeName, message: e.message }),
    );

  it('refuses apiStrict or apiDeprecationErrors without apiVersion (4886600), a version other than "1" (APIVersionError 322), a wrong type (TypeMismatch 14)', async function () {
    server = await new EmbeddedServer().start();
    const connection = await establishOne(server.address);
    try {
      const run = (command: Document) => refusalOf(connection, command);
      expect(await run({ ping: 1, apiStrict: true })).to.deep.equal({ code: 4886600, codeName: 'Location4886600', message: 'Provided apiStrict and/or apiDeprecationErrors without passing apiVersion' });
      expect(await run({ ping: 1, apiDeprecationErrors: false })).to.include({ code: 4886600 });
      expect(await run({ ping: 1, apiVersion: '3' })).to.deep.equal({ code: 322, codeName: 'APIVersionError', message: 'API version must be "1"' });
      expect(await run({ ping: 1, apiVersion: 1 })).to.deep.equal({ code: 14, codeName: 'TypeMismatch', message: "BSON field 'APIParametersFromClient.apiVersion' is the wrong type 'int', expected type 'string'" });
      expect(await run({ ping: 1, apiVersion: '1', apiStrict: 'yes' })).to.include({ code: 14 });
      expect(await run({ ping: 1, apiVersion: '1', apiStrict: true, apiDeprecationErrors: true })).to.deep.equal({});
      expect(await run({ ping: 1 }), 'without requireApiVersion').to.deep.equal({});
    } finally {
      connection.destroy();
    }
  });

  it('refuses an API parameter given twice (40413), as mongod does: a command holding apiVersion on a connection that declares one', async function () {
    server = await new EmbeddedServer().start();
    const connection = await establishOne(server.address, { serverApi: { version: '1' } });
    try {
      const run = (command: Document) => refusalOf(connection, command);
      // The declared apiVersion follows the command's own: the same field twice, which mongod refuses.
      expect(await run({ ping: 1, apiVersion: '1' })).to.deep.equal({ code: 40413, codeName: 'Location40413', message: "BSON field 'APIParametersFromClient.apiVersion' is a duplicate field" });
      // mongod reads the fields in order, each one's type first: the command's wrong type is what it reports.
      expect(await run({ ping: 1, apiVersion: 1 })).to.include({ code: 14 });
      expect(await run({ ping: 1 })).to.deep.equal({});
      const awaitable = await run({ hello: 1, topologyVersion: connection.hello.topologyVersion, maxAwaitTimeMS: 5000, apiVersion: '1' });
      expect(awaitable, 'an awaitable hello, at once').to.include({ code: 40413 });
    } finally {
      connection.destroy();
    }
  });

  it('refuses the API parameters of an awaitable hello at once, before it waits', async function () {
    server = await new EmbeddedServer().start();
    const connection = await establishOne(server.address);
    try {
      const started = Date.now();
      const error = await connection
        .command('admin', { hello: 1, topologyVersion: connection.hello.topologyVersion, maxAwaitTimeMS: 5000, apiStrict: true })
        .catch((e: unknown) => e);
      expect(error).to.include({ code: 4886600 });
      expect(Date.now() - started, 'ms').to.be.below(1000);
    } finally {
      connection.destroy();
    }
  });

  it('refuses a requireApiVersion that is not a boolean', function () {
    expect(() => new EmbeddedServer({ requireApiVersion: 'yes' as never })).to.throw(InvalidOptionError, /requireApiVersion/);
  });
});
