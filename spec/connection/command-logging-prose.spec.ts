/**
 * The command logging and monitoring spec's logging prose tests (tests/README.md, "Prose Tests"): the default
 * truncation limit (Test 1), an explicitly configured one (Test 2), and truncation of commands, replies and server
 * responses holding multi-byte code points, the max length falling inside one (Test 3). rxcmap's unit of length is the
 * UTF-16 code unit: a cut that would split a surrogate pair is made before it. Against the embedded endpoint, and the
 * server of MONGODB_URI where it is set; the embedded endpoint, which stores nothing, is given the handlers of a
 * mongod for the commands the tests run (insert and find of one collection, CommandNotFound for an unknown command).
 */
import { ObjectId, type Document } from 'bson';
import { expect } from 'chai';
import { ConnectionPool, type CommandEvent, type ConnectionPoolOptions } from '../../lib';
import { parseAddress } from '../../lib/address';
import { commandLogMessage, type CommandLogMessage } from '../../lib/logging/log-message';
import { EmbeddedServer } from '../../lib/testing';
import { startTestEndpoint, stopTestEndpoint, type TestEndpoint } from '../support/endpoint';

/** Whether `text` is well-formed UTF-16: no lone surrogate (a high one not followed by a low one, or a low one alone). */
const wellFormed = (text: string): boolean => !/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(text);

/** The trailing ellipsis a truncated document ends with (not counted in the max length). */
const ELLIPSIS = '...';

describe('command logging prose tests (command logging and monitoring spec, tests/README.md)', function () {
  let endpoint: TestEndpoint;
  before(async function () {
    endpoint = await startTestEndpoint();
    const embedded = endpoint.embedded;
    if (embedded === undefined) return;
    // As a mongod answers them: the documents inserted are found again; an unknown command is CommandNotFound.
    const stored: Document[] = [];
    embedded.handle('insert', (command) => {
      const documents = command.documents as Document[];
      stored.push(...documents);
      return { n: documents.length, ok: 1 };
    });
    embedded.handle('find', (command) => ({ cursor: { firstBatch: stored, id: 0, ns: `rxcmap_test.${String(command.find)}` }, ok: 1 }));
    embedded.handle('notARealCommand', () => ({ ok: 0, errmsg: "no such command: 'notARealCommand'", code: 59, codeName: 'CommandNotFound' }));
  });
  after(async function () {
    await stopTestEndpoint(endpoint);
  });

  /** A ready pool on `address` logging `command` at debug into `messages`, its command events into `events`. */
  const loggingPool = (address: string, messages: CommandLogMessage[], maxDocumentLength?: number, events: CommandEvent[] = []): ConnectionPool => {
    const logging: NonNullable<ConnectionPoolOptions['logging']> = {
      componentSeverities: { command: 'debug' },
      path: { write: (m) => void messages.push(m as CommandLogMessage) },
      ...(maxDocumentLength === undefined ? {} : { maxDocumentLength }),
    };
    const pool = new ConnectionPool({ address, connectionOptions: address === endpoint.address ? endpoint.connectionOptions : {}, logging });
    pool.commandEvents$.subscribe((e) => events.push(e));
    pool.ready();
    return pool;
  };

  /** The one message named `message` of the command `commandName` among `messages`. */
  const messageOf = (messages: readonly CommandLogMessage[], commandName: string, message: CommandLogMessage['fields']['message']): CommandLogMessage => {
    const found = messages.filter((m) => m.fields.commandName === commandName && m.fields.message === message);
    expect(found, `${message} of ${commandName}`).to.have.length(1);
    return found[0]!;
  };

  it('Test 1: default truncation limit: 1000, plus the trailing ellipsis', async function () {
    // Not explicitly configured: the environment's MONGODB_LOG_MAX_DOCUMENT_LENGTH would configure it.
    if (process.env.MONGODB_LOG_MAX_DOCUMENT_LENGTH !== undefined) this.skip();
    const messages: CommandLogMessage[] = [];
    const pool = loggingPool(endpoint.address, messages);
    const collection = `prose_truncation_${new ObjectId().toHexString()}`;
    try {
      await pool.withConnection(async (c) => {
        // insertMany of { x: 'y' } 100 times, each given an _id as a driver does.
        const docs = Array.from({ length: 100 }, () => ({ _id: new ObjectId(), x: 'y' }));
        await c.command('rxcmap_test', { insert: collection, ordered: true }, { documentSequences: { documents: docs } });
        await c.command('rxcmap_test', { find: collection, filter: {} });
        await c.command('rxcmap_test', { drop: collection }).catch(() => undefined);
      });
    } finally {
      pool.close();
    }
    expect(messageOf(messages, 'insert', 'Command started').fields.command).to.have.length(1000 + ELLIPSIS.length);
    expect(messageOf(messages, 'insert', 'Command succeeded').fields.reply).to.have.length.at.most(1000 + ELLIPSIS.length);
    const found = messageOf(messages, 'find', 'Command succeeded').fields.reply!;
    expect(found).to.have.length(1000 + ELLIPSIS.length);
    expect(found.endsWith(ELLIPSIS)).to.equal(true);
  });

  it('Test 2: explicitly configured truncation limit: 5, the command, the reply and the server error', async function () {
    const messages: CommandLogMessage[] = [];
    const pool = loggingPool(endpoint.address, messages, 5);
    try {
      await pool.withConnection(async (c) => {
        await c.command('admin', { hello: true });
        await c.command('admin', { notARealCommand: true }).catch(() => undefined);
      });
    } finally {
      pool.close();
    }
    expect(messageOf(messages, 'hello', 'Command started').fields.command).to.equal(`{"hel${ELLIPSIS}`);
    expect(messageOf(messages, 'hello', 'Command succeeded').fields.reply).to.have.length(5 + ELLIPSIS.length);
    expect(messageOf(messages, 'notARealCommand', 'Command started').fields.command).to.equal(`{"not${ELLIPSIS}`);
    // rxcmap attaches the server's reply to its error (MongoServerError.response): logged as a string cut at 5.
    const failure = messageOf(messages, 'notARealCommand', 'Command failed').fields.failure!;
    expect(failure.type).to.equal('MongoServerError');
    expect(failure.response).to.have.length(5 + ELLIPSIS.length);
    expect(failure.message).to.have.length.at.most(5 + ELLIPSIS.length);
  });

  describe('Test 3: truncation with multi-byte code points (an embedded endpoint of its own)', function () {
    /** Two code points outside the BMP (two UTF-16 code units each), two of two and three UTF-8 bytes. */
    const TEXT = 'a😀é€𝄞z';
    let server: EmbeddedServer;
    before(async function () {
      server = await new EmbeddedServer().start();
      server.handle('echo', (command) => ({ ok: 1, text: command.text }));
      server.handle('refuse', (command) => ({ ok: 0, errmsg: `refused ${String(command.text)}`, code: 2, codeName: 'BadValue' }));
    });
    after(async function () {
      await server?.stop();
    });

    /** The command events of `echo` and `refuse` sent with {@link TEXT}. */
    async function eventsOfTheText(): Promise<CommandEvent[]> {
      const events: CommandEvent[] = [];
      const pool = loggingPool(server.address, [], 100_000, events);
      try {
        await pool.withConnection(async (c) => {
          await c.command('admin', { echo: 1, text: TEXT });
          await c.command('admin', { refuse: 1, text: TEXT }).catch(() => undefined);
        });
      } finally {
        pool.close();
      }
      expect(events.map((e) => `${e.type} ${e.commandName}`)).to.deep.equal(['CommandStarted echo', 'CommandSucceeded echo', 'CommandStarted refuse', 'CommandFailed refuse']);
      return events;
    }

    /** The truncated texts of the messages of `events` at `max`: the command, the reply, the server's response. */
    const textsAt = (events: readonly CommandEvent[], max: number): string[] => {
      const fields = events.map((e) => commandLogMessage(e, parseAddress(server.address), max).fields);
      return [fields[0]!.command!, fields[1]!.reply!, fields[2]!.command!, fields[3]!.failure!.response!, fields[3]!.failure!.message];
    };

    it('at every max length, each text is a well-formed prefix of the whole, cut before a code point the max length falls inside', async function () {
      const events = await eventsOfTheText();
      const whole = textsAt(events, 100_000);
      for (const text of whole) expect(text, text).to.include(TEXT);
      const longest = Math.max(...whole.map((t) => t.length));
      let cutInsideAPair = 0;
      for (let max = 0; max <= longest + 1; max++) {
        const texts = textsAt(events, max);
        texts.forEach((text, i) => {
          const full = whole[i]!;
          const at = `text ${i} at max ${max}: ${JSON.stringify(text)}`;
          expect(wellFormed(text), at).to.equal(true);
          if (full.length <= max) return expect(text, at).to.equal(full);
          // The max length falls between the two code units of a pair: the cut is made before the pair.
          const splitsAPair = /[\ud800-\udbff]/.test(full[max - 1] ?? '');
          if (splitsAPair) cutInsideAPair++;
          expect(text, at).to.equal(full.slice(0, splitsAPair ? max - 1 : max) + ELLIPSIS);
        });
      }
      // Each text holds the two pairs: every max length inside one of them was met.
      expect(cutInsideAPair).to.equal(2 * whole.length);
    });

    it('a pool whose max length falls inside a code point logs the command and reply cut before it', async function () {
      const messages: CommandLogMessage[] = [];
      // '{"echo":1,"text":"a' is 19 code units: the 20th is the high surrogate of 😀.
      const pool = loggingPool(server.address, messages, 20);
      try {
        await pool.withConnection((c) => c.command('admin', { echo: 1, text: TEXT }));
      } finally {
        pool.close();
      }
      expect(messageOf(messages, 'echo', 'Command started').fields.command).to.equal(`{"echo":1,"text":"a${ELLIPSIS}`);
      const reply = messageOf(messages, 'echo', 'Command succeeded').fields.reply!;
      expect(wellFormed(reply)).to.equal(true);
      expect(reply.length).to.be.at.most(20 + ELLIPSIS.length);
    });
  });
});
