/**
 * The embedded endpoint as a replica set member that a read preference can choose: hello's `tags` (option
 * `replicaSetMember.tags`), hello's `lastWrite` from the set's shared record of writes with each member's replication
 * lag (`setReplicationLag`, option `replicaSetMember.replicationLagMS`) and the primary's idle no-op writes, and the
 * commands it received with their `$readPreference` (`receivedCommands`). Real sockets, through the library's
 * connection factory; the official driver checks that it reads `lastWrite` as a mongod's.
 */
import { expect } from 'chai';
import * as net from 'node:net';
import { deserialize, Long, Timestamp, type Document } from 'bson';
import { MongoClient, ReadPreference } from 'mongodb';
import { InvalidOptionError, type Connection } from '../../lib';
import { EmbeddedServer, VirtualClock } from '../../lib/testing';
import { encodeOpMsg } from '../../lib/connection/op-msg';
import { MessageFramer } from '../../lib/connection/wire-protocol';
import { eventually } from '../support/endpoint';
import { startedMembers } from '../support/members';

/** The idle period of a primary's no-op writer (mongod's idleWritePeriodMS). */
const IDLE_WRITE_PERIOD_MS = 10_000;

/** An opTime's position: seconds, then increment. */
function position(opTime: Document): [number, number] {
  const ts = opTime.ts as Timestamp;
  return [ts.t, ts.i];
}

/** A hello reply from `address` as its BSON holds it: int64 values as Long (a connection's decoding makes numbers of them). */
async function rawHello(address: string): Promise<Document> {
  const [host, port] = address.split(':');
  const socket = net.connect({ host, port: Number(port) });
  try {
    const framer = new MessageFramer();
    const reply = new Promise<Buffer>((resolve) => socket.on('data', (chunk: Buffer) => {
      const messages = framer.push(chunk);
      if (messages.length > 0) resolve(messages[0].body);
    }));
    socket.write(encodeOpMsg(1, 0, { hello: 1, $db: 'admin' }));
    // The body: flag bits (4 bytes), then the kind 0 section (1 byte) and its document.
    return deserialize((await reply).subarray(5), { promoteLongs: false });
  } finally {
    socket.destroy();
  }
}

/** Whether opTime `a` is after `b`. */
function after(a: Document, b: Document): boolean {
  const [as, ai] = position(a);
  const [bs, bi] = position(b);
  return as > bs || (as === bs && ai > bi);
}

describe('EmbeddedServer: replica set member tags, lastWrite and received read preferences', function () {
  const started = startedMembers();
  const { member, connect } = started;

  async function lastWrite(c: Connection): Promise<Document> {
    return (await c.command('admin', { hello: 1 })).lastWrite as Document;
  }

  const optionError = (make: () => unknown): unknown => {
    try {
      make();
      return undefined;
    } catch (e) {
      return e;
    }
  };

  it('sends a tagged member\'s tags in hello and the legacy hello, and no tags for a member without tags or with {}', async function () {
    const tagged = await member({ setName: 'rs-tags', state: 'secondary', tags: { dc: 'east', usage: 'reporting' } });
    const c = await connect(tagged);
    const hello = await c.command('admin', { hello: 1 });
    expect(hello.tags).to.deep.equal({ dc: 'east', usage: 'reporting' });
    expect((await c.command('admin', { isMaster: 1 })).tags).to.deep.equal({ dc: 'east', usage: 'reporting' });
    // As mongod's HelloResponse: tags come after primary and before me.
    const keys = Object.keys(hello);
    expect(keys.indexOf('tags')).to.be.above(keys.indexOf('secondary')).and.below(keys.indexOf('me'));
    for (const tags of [undefined, {}]) {
      const untagged = await member({ setName: 'rs-tags', state: 'primary', tags });
      expect(await (await connect(untagged)).command('admin', { hello: 1 })).to.not.have.property('tags');
    }
  });

  it('refuses tags that are not an object of string values, naming replicaSetMember.tags and what it allows', function () {
    for (const tags of ['east', ['east'], { dc: 1 }, { dc: 'east', rack: null }, null]) {
      const error = optionError(() => new EmbeddedServer({ replicaSetMember: { setName: 'rs0', state: 'secondary', tags: tags as never } })) as InvalidOptionError;
      expect(error, JSON.stringify(tags)).to.be.instanceOf(InvalidOptionError).and.include({ option: 'replicaSetMember.tags' });
      expect(error.allowed).to.include('string values');
    }
  });

  it('sends lastWrite from every member: opTime { ts, t }, lastWriteDate in whole seconds, majorityOpTime, majorityWriteDate; idle, the no-op write of the last 10 s', async function () {
    const primary = await member({ setName: 'rs-idle', state: 'primary' });
    const secondary = await member({ setName: 'rs-idle', state: 'secondary' });
    for (const server of [primary, secondary]) {
      const c = await connect(server);
      const before = Date.now();
      const hello = await c.command('admin', { hello: 1 });
      const write = hello.lastWrite as Document;
      expect(Object.keys(write)).to.deep.equal(['opTime', 'lastWriteDate', 'majorityOpTime', 'majorityWriteDate']);
      expect(write.opTime.ts).to.be.instanceOf(Timestamp);
      const raw = (await rawHello(server.address)).lastWrite as Document;
      expect(raw.opTime.t).to.be.instanceOf(Long);
      expect(raw.majorityOpTime.t).to.be.instanceOf(Long);
      expect(raw.majorityOpTime.ts).to.be.instanceOf(Timestamp);
      expect(write.lastWriteDate).to.be.instanceOf(Date);
      expect(write.majorityWriteDate).to.be.instanceOf(Date);
      const date = (write.lastWriteDate as Date).getTime();
      // Idle: the no-op write at the last multiple of 10 s, whose opTime says that same second.
      expect(date % IDLE_WRITE_PERIOD_MS).to.equal(0);
      expect(date).to.be.at.most(Date.now()).and.above(before - IDLE_WRITE_PERIOD_MS - 1000);
      expect(write.opTime.ts.t).to.equal(date / 1000);
      expect((write.majorityWriteDate as Date).getTime()).to.equal(date);
      // lastWrite comes last, after electionId, as mongod's.
      expect(Object.keys(hello).indexOf('lastWrite')).to.be.above(Object.keys(hello).indexOf('me'));
      expect((await c.command('admin', { isMaster: 1 })).lastWrite).to.have.property('lastWriteDate');
    }
    // A standalone sends none.
    const standalone = await started.standalone();
    expect(await (await connect(standalone)).command('admin', { hello: 1 })).to.not.have.property('lastWrite');
  });

  it('records each write a primary runs in the set\'s shared record: a secondary without lag has it at once, one lagging 200 s does not until its lag is set to 0', async function () {
    const primary = await member({ setName: 'rs-writes', state: 'primary' });
    const fresh = await member({ setName: 'rs-writes', state: 'secondary' });
    const lagging = await member({ setName: 'rs-writes', state: 'secondary', replicationLagMS: 200_000 });
    primary.handle('update', () => ({ ok: 0, errmsg: 'refused', code: 2, codeName: 'BadValue' }));
    const [cp, cf, cl] = await Promise.all([primary, fresh, lagging].map(connect));
    const idle = await lastWrite(cp);
    const started = Date.now();
    await cp.command('test', { insert: 'c', documents: [{ x: 1 }] });
    const first = await lastWrite(cp);
    expect(after(first.opTime, idle.opTime)).to.equal(true, 'the insert is a write');
    expect((first.lastWriteDate as Date).getTime()).to.be.at.least(Math.floor(started / 1000) * 1000).and.at.most(Date.now());
    // In whole seconds (mongod's appendTimeT): the second its opTime's ts gives.
    expect((first.lastWriteDate as Date).getTime()).to.equal(first.opTime.ts.t * 1000);
    await cp.command('test', { delete: 'c', deletes: [{ q: {}, limit: 0 }] });
    const second = await lastWrite(cp);
    expect(after(second.opTime, first.opTime)).to.equal(true, 'the delete is a write');
    // A read, and a write that fails, write nothing.
    await cp.command('test', { find: 'c' });
    expect(await cp.command('test', { update: 'c', updates: [] }).catch(() => 'refused')).to.equal('refused');
    expect(position((await lastWrite(cp)).opTime)).to.deep.equal(position(second.opTime));
    // The secondary without lag has the last write; the lagging one the no-op write of about 200 s ago.
    expect(position((await lastWrite(cf)).opTime)).to.deep.equal(position(second.opTime));
    const old = await lastWrite(cl);
    const age = Date.now() - (old.lastWriteDate as Date).getTime();
    expect(age).to.be.at.least(200_000).and.below(200_000 + IDLE_WRITE_PERIOD_MS + 1000);
    lagging.setReplicationLag(0);
    expect(position((await lastWrite(cl)).opTime)).to.deep.equal(position(second.opTime));
    lagging.setReplicationLag(200_000);
    expect(position((await lastWrite(cl)).opTime)).to.deep.equal(position(old.opTime));
  });

  it('a primary\'s lag is 0 whatever was set; stepped down, its lag applies; majorityOpTime is the median member\'s', async function () {
    const primary = await member({ setName: 'rs-majority', state: 'primary', replicationLagMS: 200_000 });
    const a = await member({ setName: 'rs-majority', state: 'secondary', replicationLagMS: 200_000 });
    const b = await member({ setName: 'rs-majority', state: 'secondary' });
    const [cp, ca, cb] = await Promise.all([primary, a, b].map(connect));
    await cp.command('test', { insert: 'c', documents: [{ x: 1 }] });
    const written = await lastWrite(cp);
    expect(Date.now() - (written.lastWriteDate as Date).getTime()).to.be.below(2_000);
    // Two of three members (the primary and b) have the write: a majority.
    expect(position(written.majorityOpTime)).to.deep.equal(position(written.opTime));
    expect(position((await lastWrite(cb)).majorityOpTime)).to.deep.equal(position(written.opTime));
    // a has neither: its majority is never newer than its own last write.
    const lagging = await lastWrite(ca);
    expect(position(lagging.majorityOpTime)).to.deep.equal(position(lagging.opTime));
    expect(after(written.opTime, lagging.opTime)).to.equal(true);
    // b lagging too: only the primary has the write, no majority.
    b.setReplicationLag(200_000);
    const minority = await lastWrite(cp);
    expect(position(minority.opTime)).to.deep.equal(position(written.opTime));
    expect(Date.now() - (minority.majorityWriteDate as Date).getTime()).to.be.at.least(200_000);
    // Stepped down, the former primary's own lag of 200 s applies.
    primary.setReplicaSetMemberState('secondary');
    expect(Date.now() - ((await lastWrite(cp)).lastWriteDate as Date).getTime()).to.be.at.least(200_000);
    // The opTime's term is the term of the election of the primary that wrote it (its electionId's last 8 bytes).
    const term = async (c: Connection): Promise<number> => Number(Buffer.from((await c.command('admin', { hello: 1 })).electionId.id).readBigInt64BE(4));
    b.setReplicationLag(0);
    b.setReplicaSetMemberState('primary');
    await cb.command('test', { insert: 'c', documents: [{ x: 2 }] });
    const elected = await lastWrite(cb);
    expect(elected.opTime.t).to.equal(await term(cb));
    expect(elected.opTime.t).to.be.above(written.opTime.t as number);
  });

  it('on a virtual clock: idle, a no-op write every 10 s; a write skips the next no-op, as mongod\'s no-op writer; increments count within a second', async function () {
    const clock = new VirtualClock();
    clock.advanceTo(1_000_000);
    const primary = await member({ setName: 'rs-clock', state: 'primary', clock });
    const secondary = await member({ setName: 'rs-clock', state: 'secondary', replicationLagMS: 15_000, clock });
    const [cp, cs] = await Promise.all([primary, secondary].map(connect));
    const at = async (c: Connection): Promise<[number, number, number]> => {
      const write = await lastWrite(c);
      return [(write.lastWriteDate as Date).getTime(), ...position(write.opTime)];
    };
    expect(await at(cp)).to.deep.equal([1_000_000, 1000, 1]);
    clock.advance(9_999);
    expect(await at(cp)).to.deep.equal([1_000_000, 1000, 1]);
    clock.advance(1);
    expect(await at(cp)).to.deep.equal([1_010_000, 1010, 1]);
    clock.advance(500);
    await cp.command('test', { insert: 'c', documents: [{ x: 1 }] });
    await cp.command('test', { insert: 'c', documents: [{ x: 2 }] });
    // In the second of the no-op at 1,010,000: increments 2 and 3.
    expect(await at(cp)).to.deep.equal([1_010_000, 1010, 3]);
    clock.advance(1_000);
    await cp.command('test', { insert: 'c', documents: [{ x: 3 }] });
    expect(await at(cp)).to.deep.equal([1_011_000, 1011, 1]);
    // The no-op writer's round at 1,020,000 finds a write since its last round: no no-op; the next round writes one.
    clock.advanceTo(1_020_000);
    expect(await at(cp)).to.deep.equal([1_011_000, 1011, 1]);
    clock.advanceTo(1_029_999);
    expect(await at(cp)).to.deep.equal([1_011_000, 1011, 1]);
    clock.advanceTo(1_030_000);
    expect(await at(cp)).to.deep.equal([1_030_000, 1030, 1]);
    // The secondary, 15 s behind: at 1,015,000 it had the last write.
    expect(await at(cs)).to.deep.equal([1_011_000, 1011, 1]);
  });

  it('on a virtual clock: drops the write times no lag reaches any more, so a lag raised later reaches back only to the idle no-op writes', async function () {
    this.timeout(20_000);
    const clock = new VirtualClock();
    clock.advanceTo(1_000_000);
    const primary = await member({ setName: 'rs-prune', state: 'primary', clock });
    const secondary = await member({ setName: 'rs-prune', state: 'secondary', clock });
    const [cp, cs] = await Promise.all([primary, secondary].map(connect));
    for (let i = 0; i < 1100; i++) {
      clock.advance(1);
      await cp.command('test', { insert: 'c', documents: [{ i }] });
    }
    // Before they are dropped, a lag of 99.5 s at 1,100,000 reaches the write at 1,000,500 (the 500th of its second).
    clock.advanceTo(1_100_000);
    secondary.setReplicationLag(99_500);
    expect(position((await lastWrite(cs)).opTime)).to.deep.equal([1000, 501]);
    // A write more than 10 s after them, while a lag reaches back to them: they are kept.
    await cp.command('test', { insert: 'c', documents: [{ kept: true }] });
    expect(position((await lastWrite(cs)).opTime)).to.deep.equal([1000, 501]);
    // A write with no lag reaching back: they are dropped (the newest of them kept).
    secondary.setReplicationLag(0);
    clock.advance(1);
    await cp.command('test', { insert: 'c', documents: [{ last: true }] });
    secondary.setReplicationLag(99_501);
    expect(position((await lastWrite(cs)).opTime)).to.deep.equal([1000, 1]);
    secondary.setReplicationLag(100_001 - 1_100);
    expect(position((await lastWrite(cs)).opTime)).to.deep.equal([1001, 101]);
  });

  it('counts the members started: stopped members leave the majority, and a restarted one joins it again', async function () {
    const primary = await member({ setName: 'rs-stop', state: 'primary' });
    const a = await member({ setName: 'rs-stop', state: 'secondary', replicationLagMS: 200_000 });
    const b = await member({ setName: 'rs-stop', state: 'secondary', replicationLagMS: 200_000 });
    const cp = await connect(primary);
    await cp.command('test', { insert: 'c', documents: [{ x: 1 }] });
    const minority = await lastWrite(cp);
    expect(Date.now() - (minority.majorityWriteDate as Date).getTime()).to.be.at.least(200_000);
    await Promise.all([a.stop(), b.stop()]);
    // The primary alone is the majority of the members started.
    const alone = await lastWrite(cp);
    expect(position(alone.majorityOpTime)).to.deep.equal(position(minority.opTime));
    await Promise.all([a.start(), b.start()]);
    expect(Date.now() - ((await lastWrite(cp)).majorityWriteDate as Date).getTime()).to.be.at.least(200_000);
  });

  it('refuses a lag that is not a number >= 0, and a lag on a standalone, naming the option', function () {
    const secondary = new EmbeddedServer({ replicaSetMember: { setName: 'rs0', state: 'secondary' } });
    for (const lag of [-1, Number.NaN, Number.POSITIVE_INFINITY, '5', undefined]) {
      expect(optionError(() => secondary.setReplicationLag(lag as never)), String(lag)).to.be.instanceOf(InvalidOptionError).and.include({ option: 'lagMS' });
      expect(optionError(() => new EmbeddedServer({ replicaSetMember: { setName: 'rs0', state: 'secondary', replicationLagMS: lag as never } })), String(lag))
        .to.satisfy((e: unknown) => (lag === undefined ? e === undefined : e instanceof InvalidOptionError && e.option === 'replicaSetMember.replicationLagMS'));
    }
    expect(optionError(() => new EmbeddedServer().setReplicationLag(0))).to.be.instanceOf(InvalidOptionError).and.include({ option: 'replicaSetMember' });
    for (const clock of [Date, { now: 1 }, null, 'now']) {
      expect(optionError(() => new EmbeddedServer({ replicaSetMember: { setName: 'rs0', state: 'secondary', clock: clock as never } })), String(clock))
        .to.be.instanceOf(InvalidOptionError).and.include({ option: 'replicaSetMember.clock' });
    }
    expect(optionError(() => secondary.setReplicationLag(0))).to.equal(undefined);
  });

  it('a new lastWrite shows at a streaming hello\'s next reply, and answers no waiting hello early (it is no topology change)', async function () {
    const primary = await member({ setName: 'rs-stream', state: 'primary' });
    const monitor = await connect(primary);
    const c = await connect(primary);
    const first = await monitor.command('admin', { hello: 1, topologyVersion: monitor.hello.topologyVersion, maxAwaitTimeMS: 300 }, { exhaustAllowed: true });
    expect(monitor.moreToCome).to.equal(true);
    const next = monitor.nextReply();
    expect(await eventually(() => primary.awaitingHelloCount === 1)).to.equal(true);
    const written = Date.now();
    await c.command('test', { insert: 'c', documents: [{ x: 1 }] });
    expect(primary.awaitingHelloCount).to.equal(1);
    const reply = await next;
    expect(Date.now() - written).to.be.above(100);
    expect(after(reply.lastWrite.opTime, first.lastWrite.opTime)).to.equal(true);
    expect(Number(reply.topologyVersion.counter)).to.equal(0);
  });

  it('lists the commands received with their $readPreference, at most the last 1000', async function () {
    const secondary = await member({ setName: 'rs-received', state: 'secondary' });
    const c = await connect(secondary);
    const readPreference = { mode: 'secondary', tags: [{ dc: 'east' }], maxStalenessSeconds: 90 };
    await c.command('test', { find: 'c', $readPreference: readPreference });
    await c.command('test', { find: 'c' }).catch(() => undefined);
    const finds = secondary.receivedCommands.filter((r) => r.name === 'find');
    expect(finds).to.deep.equal([
      { name: 'find', db: 'test', connectionId: c.hello.connectionId, readPreference },
      { name: 'find', db: 'test', connectionId: c.hello.connectionId, readPreference: undefined },
    ]);
    // The handshake, as the connection sent it.
    expect(secondary.receivedCommands.map((r) => r.name)).to.include('isMaster');
    for (let i = 0; i < 1005; i++) await c.command('admin', { ping: 1, $readPreference: { mode: 'nearest' } });
    const received = secondary.receivedCommands;
    expect(received).to.have.length(1000);
    expect(received.every((r) => r.name === 'ping' && r.readPreference?.mode === 'nearest')).to.equal(true);
  });

  it('the official driver with readPreference secondary and maxStalenessSeconds 90 reads from the fresh secondary, never the one 200 s behind', async function () {
    this.timeout(20_000);
    const primary = await member({ setName: 'rs-driver', state: 'primary' });
    const fresh = await member({ setName: 'rs-driver', state: 'secondary' });
    const lagging = await member({ setName: 'rs-driver', state: 'secondary', replicationLagMS: 200_000 });
    const hosts = [primary.address, fresh.address, lagging.address];
    const counts = new Map<EmbeddedServer, number>();
    for (const server of [primary, fresh, lagging]) {
      server.setReplicaSetHosts(hosts);
      counts.set(server, 0);
      server.handle('count', () => (counts.set(server, counts.get(server)! + 1), { n: 0, ok: 1 }));
    }
    const client = new MongoClient(`mongodb://${hosts.join(',')}/?replicaSet=rs-driver&readPreference=secondary&maxStalenessSeconds=90&heartbeatFrequencyMS=500`, {
      serverSelectionTimeoutMS: 5_000,
    });
    try {
      await client.connect();
      const readPreference = new ReadPreference('secondary', undefined, { maxStalenessSeconds: 90 });
      for (let i = 0; i < 20; i++) await client.db('test').command({ count: 'c' }, { readPreference });
      expect([counts.get(primary), counts.get(fresh), counts.get(lagging)]).to.deep.equal([0, 20, 0]);
      const seen = fresh.receivedCommands.filter((r) => r.name === 'count');
      expect(seen).to.have.length(20);
      expect(seen[0].readPreference).to.deep.include({ mode: 'secondary', maxStalenessSeconds: 90 });
    } finally {
      await client.close();
    }
  });
});
