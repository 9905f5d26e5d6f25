/**
 * The client's `command()` options a driver's operations need beyond a plain command: `operationId` (linking an
 * operation's server selection, commands, events and log messages, as a bulk write's batches) and `moreToCome` (an
 * unacknowledged write). Against the embedded endpoint, or MONGODB_URI's server where the test needs no handler of its
 * own (a closed port stands for a server that is down).
 */
import { Binary } from 'bson';
import { expect } from 'chai';
import { InvalidOptionError, MongoNetworkError, MongoNetworkTimeoutError, connect, type Client, type CommandEvent, type CommandLogMessage, type LogMessage, type ServerSelectionLogMessage } from '../../lib';
import { VirtualClock } from '../../lib/testing';
import { closedPort, endpointAndClientPerTest, eventually, startTestEndpoint, withOptions } from '../support/endpoint';
import { selectionsWaiting } from '../support/selections';

describe('Client: command() and selectPool() options of an operation (operationId, moreToCome)', function () {
  this.timeout(20_000);
  const held = endpointAndClientPerTest();

  /** A client of the test endpoint writing its `serverSelection` and `command` messages to `written`. */
  async function logging(written: LogMessage[]): Promise<Client> {
    const server = (held.server = await startTestEndpoint());
    return (held.client = connect(withOptions(process.env.MONGODB_URI ?? `mongodb://${server.address}/`, 'heartbeatFrequencyMS=500'), {
      logging: { componentSeverities: { serverSelection: 'debug', command: 'debug', default: 'off' }, path: { write: (m: LogMessage) => void written.push(m) } },
    }));
  }

  /** A {@link logging} client whose server was found (its selections succeed at once), its messages and command events from then on. */
  async function found(): Promise<{ c: Client; written: LogMessage[]; events: CommandEvent[] }> {
    const written: LogMessage[] = [];
    const c = await logging(written);
    await c.command('admin', { ping: 1 });
    written.length = 0;
    const events: CommandEvent[] = [];
    c.commandEvents$.subscribe((e) => events.push(e));
    return { c, written, events };
  }

  const selections = (messages: readonly LogMessage[]): ServerSelectionLogMessage[] => messages.filter((m): m is ServerSelectionLogMessage => m.component === 'serverSelection');
  const commands = (messages: readonly LogMessage[]): CommandLogMessage[] => messages.filter((m): m is CommandLogMessage => m.component === 'command');

  it('an operationId is carried by the selection messages (before operation, in the spec table order; rendered "with ID"), the command events and the command messages; none without one', async function () {
    const { c, written, events } = await found();
    await c.command('admin', { ping: 1 }, { operationId: 42 });
    await c.command('admin', { ping: 1 });
    const [started, succeeded, ...unidentified] = selections(written);
    expect([started, succeeded].map((m) => [m.fields.message, m.fields.operationId])).to.deep.equal([
      ['Server selection started', 42],
      ['Server selection succeeded', 42],
    ]);
    // The common keys in the order of the spec's table (server selection spec, "Common Fields"), as the command messages keep theirs.
    expect(Object.keys(succeeded.toJSON())).to.deep.equal(['t', 'c', 's', 'message', 'selector', 'operationId', 'operation', 'topologyDescription', 'serverHost', 'serverPort']);
    expect(started.render()).to.equal(`Server selection started for operation ping with ID 42. Selector: primary, topology description: ${started.fields.topologyDescription}`);
    expect(succeeded.render()).to.match(/^Server selection succeeded for operation ping with ID 42\. Selected server: /);
    expect(unidentified.map((m) => m.fields.message)).to.deep.equal(['Server selection started', 'Server selection succeeded']);
    for (const m of unidentified) {
      expect(Object.keys(m.toJSON()), 'no ID given: no key').to.not.include('operationId');
      expect(m.fields, 'no ID given: no key in its fields either').to.not.have.property('operationId');
      expect(m.render()).to.match(/for operation ping\. /);
    }
    const pings = events.filter((e) => e.commandName === 'ping');
    expect(pings.map((e) => [e.type, e.operationId])).to.deep.equal([
      ['CommandStarted', 42],
      ['CommandSucceeded', 42],
      ['CommandStarted', undefined],
      ['CommandSucceeded', undefined],
    ]);
    expect(commands(written).map((m) => m.fields.operationId)).to.deep.equal([42, 42, undefined, undefined]);
  });

  it('a selection that waits and fails (command() and selectPool()): its waiting and failed messages carry the operationId too', async function () {
    const port = await closedPort();
    const clock = new VirtualClock();
    const written: LogMessage[] = [];
    const c = (held.client = connect(`mongodb://127.0.0.1:${port}/?serverSelectionTimeoutMS=1000&connectTimeoutMS=20000`, {
      scheduler: clock,
      logging: { componentSeverities: { serverSelection: 'debug', default: 'off' }, path: { write: (m: LogMessage) => void written.push(m) } },
    }));
    const failed = c.command('admin', { insert: 'c', documents: [{}] }, { operationId: 7 }).catch((e: unknown) => e);
    const selecting = c.selectPool({ operationId: 0 }).catch((e: unknown) => e);
    expect(await eventually(() => selectionsWaiting(c) === 2)).to.equal(true);
    clock.advance(1000);
    await Promise.all([failed, selecting]);
    const messages = selections(written);
    const of = (operation: string): unknown[] => messages.filter((m) => m.fields.operation === operation).map((m) => [m.fields.message, m.fields.operationId]);
    expect(of('insert')).to.deep.equal([
      ['Server selection started', 7],
      ['Waiting for suitable server to become available', 7],
      ['Server selection failed', 7],
    ]);
    expect(of('selectPool'), 'an ID of 0 is an ID').to.deep.equal([
      ['Server selection started', 0],
      ['Waiting for suitable server to become available', 0],
      ['Server selection failed', 0],
    ]);
    const waiting = messages.find((m) => m.fields.operation === 'insert' && m.fields.message === 'Waiting for suitable server to become available')!;
    expect(waiting.render()).to.match(/^Waiting for server to become available for operation insert with ID 7\. Remaining time: 1000 ms\./);
  });

  it('a command with a timeoutMS: its operationId and moreToCome reach the connection as without one', async function () {
    if (process.env.MONGODB_URI !== undefined) this.skip(); // a handler of the endpoint's own sees what was sent
    const { c, events } = await found();
    await c.command('admin', { ping: 1 }, { operationId: 11, timeoutMS: 10_000 });
    const pings = events.filter((e) => e.commandName === 'ping');
    expect(pings.map((e) => [e.type, e.operationId])).to.deep.equal([
      ['CommandStarted', 11],
      ['CommandSucceeded', 11],
    ]);
    const received: unknown[] = [];
    held.server!.embedded!.handle('insert', (command) => {
      received.push(command.documents);
      return { n: 1, ok: 1 };
    });
    // Sent with the flag: the server's acknowledgement is never read, the reply is { ok: 1 }.
    expect(await c.command('app', { insert: 'c', documents: [{ _id: 1 }], writeConcern: { w: 0 } }, { moreToCome: true, timeoutMS: 10_000 })).to.deep.equal({ ok: 1 });
    expect(await eventually(() => received.length === 1)).to.equal(true);
  });

  it('an operationId of -0 is the ID 0: its selection messages, events and command messages carry 0, not -0', async function () {
    const { c, written, events } = await found();
    await c.command('admin', { ping: 1 }, { operationId: -0 });
    await c.selectPool({ operationId: -0 });
    const carried = [...events.map((e) => e.operationId), ...written.map((m) => (m.fields as { operationId?: number }).operationId)];
    // Two events, two command messages, two selection messages for each of command() and selectPool().
    expect(carried).to.have.length(8);
    for (const id of carried) expect(Object.is(id, 0), `${String(id)} is +0`).to.equal(true);
  });

  it('an operationId or moreToCome that is not what it must be: InvalidOptionError naming it, before anything is selected or logged', async function () {
    const written: LogMessage[] = [];
    const c = await logging(written);
    const refused = async (call: () => Promise<unknown>): Promise<InvalidOptionError> => {
      const error = await call().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).to.be.instanceOf(InvalidOptionError);
      return error as InvalidOptionError;
    };
    for (const operationId of [-1, 1.5, 2 ** 53, '42', null, Number.NaN]) {
      expect(await refused(() => c.command('admin', { ping: 1 }, { operationId } as never))).to.include({ option: 'operationId' });
      expect(await refused(() => c.selectPool({ operationId } as never))).to.include({ option: 'operationId' });
    }
    expect((await refused(() => c.command('admin', { ping: 1 }, { operationId: -1 }))).message).to.include('an integer from 0 to 2^53 - 1');
    for (const moreToCome of ['true', 1, null]) {
      expect(await refused(() => c.command('admin', { ping: 1 }, { moreToCome } as never))).to.include({ option: 'moreToCome' });
    }
    expect(await refused(() => c.command('admin', { ping: 1 }, { operationid: 1 } as never))).to.include({ option: 'operationid', suggestion: 'operationId' });
    expect(written, 'nothing selected, sent or logged').to.deep.equal([]);
  });

  it('moreToCome: an unacknowledged write is sent with the flag and resolves to { ok: 1 } once written, the server\'s answer never read; its events say so', async function () {
    if (process.env.MONGODB_URI !== undefined) this.skip(); // a handler of the endpoint's own sees what was sent
    const written: LogMessage[] = [];
    const c = await logging(written);
    const received: unknown[] = [];
    // Answers as mongod would an acknowledged insert: a reply that a command sent without the flag would return.
    held.server!.embedded!.handle('insert', (command) => {
      received.push(command.documents);
      return { n: 1, ok: 1 };
    });
    const events: CommandEvent[] = [];
    c.commandEvents$.subscribe((e) => events.push(e));
    const reply = await c.command('app', { insert: 'c', documents: [{ _id: 1 }], writeConcern: { w: 0 } }, { moreToCome: true, operationId: 3 });
    expect(reply).to.deep.equal({ ok: 1 });
    expect(await eventually(() => received.length === 1)).to.equal(true);
    expect(received).to.deep.equal([[{ _id: 1 }]]);
    const inserts = events.filter((e) => e.commandName === 'insert');
    expect(inserts.map((e) => e.type)).to.deep.equal(['CommandStarted', 'CommandSucceeded']);
    expect(inserts[1]).to.deep.include({ reply: { ok: 1 }, operationId: 3 });
    // The connection is free at once, and the next command's reply is its own.
    expect(await c.command('app', { insert: 'c', documents: [{ _id: 2 }] })).to.deep.equal({ n: 1, ok: 1 });
    const acknowledged = events.filter((e) => e.commandName === 'insert' && e.type === 'CommandSucceeded');
    expect(acknowledged.map((e) => (e as { reply: unknown }).reply)).to.deep.equal([{ ok: 1 }, { n: 1, ok: 1 }]);
  });

  it('moreToCome: a network error while the write is written fails it as any command\'s: the pool cleared, the server Unknown, the connection closed', async function () {
    if (process.env.MONGODB_URI !== undefined) this.skip(); // the endpoint resets the command's connection
    const written: LogMessage[] = [];
    const c = await logging(written);
    await c.command('admin', { ping: 1 });
    const poolEvents: string[] = [];
    c.events$.subscribe((e) => poolEvents.push(e.type));
    // The server resets the command's connection (not its monitor's) as the command starts: 14 MB cannot all be
    // taken by the socket before the reset comes back.
    c.commandEvents$.subscribe((e) => {
      if (e.type === 'CommandStarted' && e.commandName === 'insert') held.server!.embedded!.closeConnections((info) => info.id === e.serverConnectionId);
    });
    const big = new Binary(Buffer.alloc(7 * 1024 * 1024));
    const error = await c.command('app', { insert: 'c', documents: [{ big }, { big }], writeConcern: { w: 0 } }, { moreToCome: true, operationId: 4 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).to.be.instanceOf(MongoNetworkError).and.not.be.instanceOf(MongoNetworkTimeoutError);
    expect(poolEvents).to.include.members(['ConnectionPoolCleared', 'ConnectionClosed']);
    expect(c.topologyDescription.servers.get(held.server!.address)?.type, 'marked Unknown until its next check').to.equal('Unknown');
    const failed = commands(written).filter((m) => m.fields.commandName === 'insert').map((m) => [m.fields.message, m.fields.operationId]);
    expect(failed).to.deep.equal([
      ['Command started', 4],
      ['Command failed', 4],
    ]);
  });

  it('moreToCome with a writeConcern that asks for an acknowledgement: refused by the connection, nothing sent', async function () {
    if (process.env.MONGODB_URI !== undefined) this.skip(); // counts the inserts the endpoint received
    const written: LogMessage[] = [];
    const c = await logging(written);
    let inserts = 0;
    held.server!.embedded!.handle('insert', () => (inserts++, { n: 1, ok: 1 }));
    for (const writeConcern of [{ w: 1 }, { w: 'majority' }, { w: 0, j: true }]) {
      const error = await c.command('app', { insert: 'c', documents: [{}], writeConcern }, { moreToCome: true }).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(InvalidOptionError);
      expect(error).to.include({ option: 'moreToCome' });
    }
    // The connection is still usable, and none of them reached the server.
    expect(await c.command('app', { insert: 'c', documents: [{}] })).to.deep.equal({ n: 1, ok: 1 });
    expect(inserts).to.equal(1);
  });
});
