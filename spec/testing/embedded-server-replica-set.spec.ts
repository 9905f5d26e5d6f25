/**
 * The embedded endpoint as one member of a replica set (option `replicaSetMember`): the hello fields of a primary and
 * of a secondary, electionIds ordered by election across endpoints, a step down answering a waiting awaitable hello
 * at once, and a secondary's refusals (NotWritablePrimary 10107, NotPrimaryNoSecondaryOk 13435) as mongod gives them.
 * Real sockets, through the library's connection factory.
 */
import { expect } from 'chai';
import * as net from 'node:net';
import { Long, ObjectId } from 'bson';
import { InvalidOptionError, MongoServerError } from '../../lib';
import { EmbeddedServer, type EmbeddedServerOptions } from '../../lib/testing';
import { encodeOpMsg, OpMsgFlag } from '../../lib/connection/op-msg';
import { eventually } from '../support/endpoint';
import { startedMembers } from '../support/members';
import { rawClient } from '../support/raw-client';

describe('EmbeddedServer: a replica set member (replicaSetMember)', function () {
  const started = startedMembers();
  const { member, connect } = started;

  const refusal = (promise: Promise<unknown>): Promise<unknown> => promise.then(() => 'no error', (e: unknown) => e);

  it('a primary answers hello and the legacy hello with setName, setVersion 1, hosts, me, primary (itself) and an electionId', async function () {
    const server = await member({ setName: 'rs0', state: 'primary', hosts: ['h1:1', 'h2:2'] });
    const c = await connect(server);
    const hello = await c.command('admin', { hello: 1 });
    expect(hello).to.include({ ok: 1, isWritablePrimary: true, secondary: false, setName: 'rs0', setVersion: 1, me: server.address, primary: server.address });
    expect(hello.hosts).to.deep.equal(['h1:1', 'h2:2']);
    expect(hello.electionId).to.be.instanceOf(ObjectId);
    expect(hello.topologyVersion.processId.equals(server.topologyVersion.processId)).to.equal(true);
    const legacy = await c.command('admin', { isMaster: 1 });
    expect(legacy).to.include({ ismaster: true, secondary: false, setName: 'rs0', me: server.address, primary: server.address });
    expect(legacy).to.not.have.property('isWritablePrimary');
    expect(legacy.electionId.equals(hello.electionId)).to.equal(true);
  });

  it('a secondary answers isWritablePrimary / ismaster false and secondary: true, hosts by default its own address, and no primary nor electionId', async function () {
    const server = await member({ setName: 'rs0', state: 'secondary' });
    const c = await connect(server);
    const hello = await c.command('admin', { hello: 1 });
    expect(hello).to.include({ ok: 1, isWritablePrimary: false, secondary: true, setName: 'rs0', setVersion: 1, me: server.address });
    expect(hello.hosts).to.deep.equal([server.address]);
    expect(hello).to.not.have.any.keys('electionId', 'primary', 'msg');
    expect(await c.command('admin', { isMaster: 1 })).to.include({ ismaster: false, secondary: true });
    // A standalone has none of these fields.
    const standalone = await started.standalone();
    expect(await (await connect(standalone)).command('admin', { hello: 1 })).to.not.have.any.keys('setName', 'hosts', 'me', 'secondary', 'setVersion');
  });

  it('electionIds grow with each election across the endpoints of the process, in mongod\'s form (0x7fffffff, then the term)', async function () {
    const a = await member({ setName: 'rs0', state: 'primary' });
    const b = await member({ setName: 'rs0', state: 'secondary' });
    const ca = await connect(a);
    const cb = await connect(b);
    const first = (await ca.command('admin', { hello: 1 })).electionId as ObjectId;
    expect(first.toHexString().slice(0, 8)).to.equal('7fffffff');
    a.setReplicaSetMemberState('secondary');
    b.setReplicaSetMemberState('primary');
    const second = (await cb.command('admin', { hello: 1 })).electionId as ObjectId;
    expect(second.toHexString() > first.toHexString()).to.equal(true, `${second.toHexString()} after ${first.toHexString()}`);
    expect(await ca.command('admin', { hello: 1 })).to.not.have.property('electionId');
    b.setReplicaSetMemberState('secondary');
    a.setReplicaSetMemberState('primary');
    const third = (await ca.command('admin', { hello: 1 })).electionId as ObjectId;
    expect(third.toHexString() > second.toHexString()).to.equal(true, `${third.toHexString()} after ${second.toHexString()}`);
    // Setting the state it has changes nothing: same electionId, same topologyVersion.
    a.setReplicaSetMemberState('primary');
    expect((await ca.command('admin', { hello: 1 })).electionId.equals(third)).to.equal(true);
    expect(Number(a.topologyVersion.counter)).to.equal(2);
  });

  it('a step down answers a waiting awaitable hello at once, as a secondary with the next topologyVersion, and keeps the connection open', async function () {
    const server = await member({ setName: 'rs0', state: 'primary' });
    const c = await connect(server);
    const started = Date.now();
    const waiting = c.command('admin', { hello: 1, topologyVersion: c.hello.topologyVersion, maxAwaitTimeMS: 10_000 });
    expect(await eventually(() => server.awaitingHelloCount === 1)).to.equal(true);
    server.setReplicaSetMemberState('secondary');
    const reply = await waiting;
    expect(Date.now() - started).to.be.below(2_000);
    expect(reply).to.include({ isWritablePrimary: false, secondary: true });
    expect(Number(reply.topologyVersion.counter)).to.equal(1);
    expect(await c.command('admin', { ping: 1 })).to.include({ ok: 1 });
    expect(server.openConnections).to.equal(1);
  });

  it('a streaming hello (exhaustAllowed) gets a reply at once on each step down and step up', async function () {
    const server = await member({ setName: 'rs0', state: 'primary' });
    const c = await connect(server);
    const first = c.command('admin', { hello: 1, topologyVersion: c.hello.topologyVersion, maxAwaitTimeMS: 10_000 }, { exhaustAllowed: true });
    expect(await eventually(() => server.awaitingHelloCount === 1)).to.equal(true);
    const started = Date.now();
    server.setReplicaSetMemberState('secondary');
    expect(await first).to.include({ isWritablePrimary: false, secondary: true });
    expect(c.moreToCome).to.equal(true);
    const second = c.nextReply();
    expect(await eventually(() => server.awaitingHelloCount === 1)).to.equal(true);
    server.setReplicaSetMemberState('primary');
    const stepUp = await second;
    expect(stepUp).to.include({ isWritablePrimary: true, secondary: false });
    expect(stepUp.electionId).to.be.instanceOf(ObjectId);
    expect(Number(stepUp.topologyVersion.counter)).to.equal(2);
    expect(Date.now() - started).to.be.below(2_000);
  });

  it('keeps its state and electionId across a restart, with a new topologyVersion processId', async function () {
    const server = await member({ setName: 'rs0', state: 'primary' });
    const before = await (await connect(server)).command('admin', { hello: 1 });
    await server.stop();
    await server.start();
    const after = await (await connect(server)).command('admin', { hello: 1 });
    expect(after).to.include({ isWritablePrimary: true, setName: 'rs0', primary: server.address });
    expect(after.electionId.equals(before.electionId)).to.equal(true);
    expect(after.topologyVersion.processId.equals(before.topologyVersion.processId)).to.equal(false);
  });

  it('closes the connection of an unacknowledged write (moreToCome) a secondary refuses, as mongod, so the client selects again', async function () {
    const server = await member({ setName: 'rs0', state: 'secondary' });
    const [host, port] = server.address.split(':');
    const socket = net.connect({ host, port: Number(port) });
    await new Promise((r) => socket.once('connect', r));
    const closed = new Promise((r) => socket.once('close', r));
    socket.write(encodeOpMsg(1, 0, { insert: 'c', documents: [{}], writeConcern: { w: 0 }, $db: 'test' }, OpMsgFlag.moreToCome));
    await closed;
    expect(await server.waitForOpenConnections(0)).to.equal(0);
  });

  it('a secondary refuses writes with NotWritablePrimary (10107) and reads without a secondary read preference with NotPrimaryNoSecondaryOk (13435), carrying topologyVersion', async function () {
    const server = await member({ setName: 'rs0', state: 'secondary' });
    const c = await connect(server);
    const write = (await refusal(c.command('test', { insert: 'c', documents: [{ x: 1 }] }))) as MongoServerError;
    expect(write).to.be.instanceOf(MongoServerError).and.include({ code: 10107, codeName: 'NotWritablePrimary', message: 'not primary' });
    expect(write.response).to.include({ ok: 0, errmsg: 'not primary' });
    expect((write.response.topologyVersion as { processId: ObjectId }).processId.equals(server.topologyVersion.processId)).to.equal(true);
    const read = (await refusal(c.command('test', { find: 'c' }))) as MongoServerError;
    expect(read).to.be.instanceOf(MongoServerError).and.include({ code: 13435, codeName: 'NotPrimaryNoSecondaryOk', message: 'not primary and secondaryOk=false' });
    expect(read.response).to.have.property('topologyVersion');
    expect(await refusal(c.command('test', { find: 'c', $readPreference: { mode: 'primary' } }))).to.include({ code: 13435 });
    for (const mode of ['secondary', 'secondaryPreferred', 'primaryPreferred', 'nearest']) {
      expect(await c.command('test', { find: 'c', $readPreference: { mode } })).to.include({ ok: 1 });
    }
    // A secondary read preference does not make a write run; a read in a transaction is refused as a write.
    expect(await refusal(c.command('test', { delete: 'c', deletes: [], $readPreference: { mode: 'secondary' } }))).to.include({ code: 10107 });
    expect(await refusal(c.command('test', { find: 'c', autocommit: false, $readPreference: { mode: 'secondary' } }))).to.include({ code: 10107 });
    expect(await refusal(c.command('test', { getMore: Long.fromNumber(1), collection: 'c', autocommit: false }))).to.include({ code: 10107 });
    expect(await c.command('test', { getMore: Long.fromNumber(1), collection: 'c' })).to.include({ ok: 1 });
    // What mongod runs on a secondary regardless, and anything on the local database.
    for (const command of [{ ping: 1 }, { buildInfo: 1 }, { endSessions: [] }, { getParameter: 1 }, { connectionStatus: 1 }]) {
      expect(await c.command('admin', command)).to.include({ ok: 1 });
    }
    expect(await c.command('local', { find: 'oplog.rs' })).to.include({ ok: 1 });
    // A retryable write (txnNumber, outside a transaction) refused is labelled RetryableWriteError; others are not.
    const retryable = (await refusal(c.command('test', { insert: 'c', documents: [{ x: 1 }], txnNumber: Long.fromNumber(1) }))) as MongoServerError;
    expect(retryable.response.errorLabels).to.deep.equal(['RetryableWriteError']);
    expect(write.response).to.not.have.property('errorLabels');
    const transaction = (await refusal(c.command('test', { insert: 'c', documents: [{ x: 1 }], txnNumber: Long.fromNumber(2), autocommit: false }))) as MongoServerError;
    expect(transaction.response).to.not.have.property('errorLabels');
    // Stepped up, it runs them all.
    server.setReplicaSetMemberState('primary');
    expect(await c.command('test', { insert: 'c', documents: [{ x: 1 }] })).to.include({ ok: 1 });
    expect(await c.command('test', { find: 'c' })).to.include({ ok: 1 });
  });

  it('as a mongod before 4.4 (maxWireVersion 8), labels no refused retryable write RetryableWriteError and gives its refusals no topologyVersion', async function () {
    const server = await member({ setName: 'rs0', state: 'secondary' }, { maxWireVersion: 8 });
    const c = await connect(server);
    const retryable = (await refusal(c.command('test', { insert: 'c', documents: [{ x: 1 }], txnNumber: Long.fromNumber(1) }))) as MongoServerError;
    expect(retryable).to.be.instanceOf(MongoServerError).and.include({ code: 10107 });
    expect(retryable.response).to.not.have.property('errorLabels');
    expect(retryable.response).to.not.have.property('topologyVersion');
  });

  it('words the refusals "not master" on a connection whose hello never carried helloOk: true, as mongod', async function () {
    const server = await member({ setName: 'rs0', state: 'secondary' });
    const raw = await rawClient(server.address);
    try {
      expect(await raw.send({ insert: 'c', documents: [], $db: 'test' })).to.include({ ok: 0, code: 10107, errmsg: 'not master' });
      expect(await raw.send({ find: 'c', $db: 'test' })).to.include({ ok: 0, code: 13435, codeName: 'NotPrimaryNoSecondaryOk', errmsg: 'not master and slaveOk=false' });
      await raw.send({ hello: 1, helloOk: true, $db: 'admin' });
      expect(await raw.send({ insert: 'c', documents: [], $db: 'test' })).to.include({ code: 10107, errmsg: 'not primary' });
    } finally {
      raw.close();
    }
  });

  it('refuses before the fail point and the handler, but after the authentication check', async function () {
    const server = await member({ setName: 'rs0', state: 'secondary' }, { users: [{ username: 'u', password: 'p', db: 'admin' }] });
    const raw = await rawClient(server.address);
    try {
      expect(await raw.send({ insert: 'c', documents: [], $db: 'test' })).to.include({ ok: 0, code: 13, codeName: 'Unauthorized' });
    } finally {
      raw.close();
    }
    const open = await member({ setName: 'rs0', state: 'secondary' });
    open.handle('insert', () => ({ ok: 1, n: 1 }));
    open.failCommand.configure({ configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['insert'], errorCode: 2 } });
    const c = await connect(open);
    expect(await refusal(c.command('test', { insert: 'c', documents: [] }))).to.include({ code: 10107 });
  });

  it('setReplicaSetHosts replaces hosts, counts setVersion up and answers a waiting awaitable hello at once', async function () {
    const server = await member({ setName: 'rs0', state: 'primary' });
    const c = await connect(server);
    const started = Date.now();
    const waiting = c.command('admin', { hello: 1, topologyVersion: c.hello.topologyVersion, maxAwaitTimeMS: 10_000 });
    expect(await eventually(() => server.awaitingHelloCount === 1)).to.equal(true);
    server.setReplicaSetHosts(['127.0.0.1:1', server.address]);
    const reply = await waiting;
    expect(Date.now() - started).to.be.below(2_000);
    expect(Number(reply.topologyVersion.counter)).to.equal(1);
    expect(reply).to.include({ setVersion: 2 });
    expect(reply.hosts).to.deep.equal(['127.0.0.1:1', server.address]);
    expect(() => server.setReplicaSetHosts([])).to.throw(InvalidOptionError, 'hosts');
    expect(() => new EmbeddedServer().setReplicaSetHosts(['a:1'])).to.throw(InvalidOptionError, 'replicaSetMember');
  });

  it('refuses bad replicaSetMember values, and with mongos or a load balancer, naming the option and what it allows', function () {
    const bad = (replicaSetMember: unknown, more: EmbeddedServerOptions = {}): unknown => {
      try {
        new EmbeddedServer({ ...more, replicaSetMember: replicaSetMember as never });
        return undefined;
      } catch (e) {
        return e;
      }
    };
    expect(bad('rs0')).to.be.instanceOf(InvalidOptionError).and.include({ option: 'replicaSetMember' });
    expect(bad({ setName: 'rs0', state: 'primary', host: ['a:1'] })).to.be.instanceOf(InvalidOptionError).and.include({ option: 'replicaSetMember.host', suggestion: 'hosts' });
    expect(bad({ setName: '', state: 'primary' })).to.be.instanceOf(InvalidOptionError).and.include({ option: 'replicaSetMember.setName' });
    expect(bad({ setName: 'rs0', state: 'arbiter' })).to.be.instanceOf(InvalidOptionError).and.include({ option: 'replicaSetMember.state' });
    expect(bad({ setName: 'rs0', state: 'primary', hosts: [] })).to.be.instanceOf(InvalidOptionError).and.include({ option: 'replicaSetMember.hosts' });
    expect(bad({ setName: 'rs0', state: 'primary', hosts: ['a:1', 2] })).to.be.instanceOf(InvalidOptionError).and.include({ option: 'replicaSetMember.hosts' });
    const withMongos = bad({ setName: 'rs0', state: 'primary' }, { mongos: true }) as InvalidOptionError;
    expect(withMongos).to.be.instanceOf(InvalidOptionError).and.include({ option: 'replicaSetMember' });
    expect(withMongos.allowed).to.include('mongos');
    const withLoadBalancer = bad({ setName: 'rs0', state: 'primary' }, { loadBalancedServices: 2 }) as InvalidOptionError;
    expect(withLoadBalancer).to.be.instanceOf(InvalidOptionError).and.include({ option: 'replicaSetMember' });
    expect(withLoadBalancer.allowed).to.include('loadBalancedServices');
    expect(bad({ setName: 'rs0', state: 'primary' }, { mongos: false, loadBalancedServices: 0 })).to.equal(undefined);
    expect(() => new EmbeddedServer({ replicaSetMembers: {} } as never)).to.throw(InvalidOptionError, 'replicaSetMember');
    const standalone = new EmbeddedServer();
    expect(() => standalone.setReplicaSetMemberState('primary')).to.throw(InvalidOptionError, 'replicaSetMember');
    const secondary = new EmbeddedServer({ replicaSetMember: { setName: 'rs0', state: 'secondary' } });
    expect(() => secondary.setReplicaSetMemberState('arbiter' as never)).to.throw(InvalidOptionError).with.property('option', 'state');
  });
});
