/**
 * The unified test runner fails a test that does not hold: real SDAM and CMAP unified tests, each run as it is
 * (it passes) and with one expectation changed (it fails, saying what differs), against embedded deployments; and
 * the format's rules the runner's own choices could get wrong (what is ignored, what is a root-level document, how
 * fail points are turned off, what makes a file unreadable).
 */
import * as path from 'node:path';
import { expect } from 'chai';
import { Long, type Document } from 'bson';
import { connect, MongoServerError, type Client } from '../../../lib';
import { startEmbedded, withUriOptions, type Deployment } from './deployment';
import { checkError, directUri, isRedacted, readPreferenceOf, UnifiedTestRun, writeConcernOf, type RunOptions, type UnifiedFile, type UnifiedTest } from './runner';
import { Concurrently } from './concurrently';
import { planFor, unifiedFiles } from './suite';

const FIXTURES = path.resolve(__dirname, '../../fixtures');
const FILES = new Map([
  ...unifiedFiles(path.join(FIXTURES, 'server-discovery/unified')),
  ...unifiedFiles(path.join(FIXTURES, 'connection-monitoring-and-pooling/logging')),
  ...unifiedFiles(path.join(FIXTURES, 'command-logging-and-monitoring/logging')),
]);

/** A test of a fixture file, as a copy that can be changed. */
function fixture(name: string, description: string): { file: UnifiedFile; test: Document } {
  const file = FILES.get(name);
  if (file === undefined) throw new Error(`no fixture ${name}`);
  const test = file.tests.find((t) => t.description === description);
  if (test === undefined) throw new Error(`no test "${description}" in ${name}`);
  return { file, test: structuredClone(test) as Document };
}

/** Runs `test` of `file` against a fresh embedded deployment it asks for: undefined when it passes, else why it failed. */
async function outcome(file: UnifiedFile, test: Document, options?: RunOptions, after?: (deployment: Deployment) => Promise<void>): Promise<string | undefined> {
  const plan = planFor(file, test as UnifiedTest);
  if (typeof plan === 'string') throw new Error(plan);
  const deployment = await startEmbedded(plan);
  try {
    await new UnifiedTestRun(file, test as UnifiedTest, deployment, options).run();
    return undefined;
  } catch (error) {
    return (error as Error).message;
  } finally {
    try {
      await after?.(deployment);
    } finally {
      await deployment.close();
    }
  }
}

/**
 * The fixture test passes as it is, and fails with each `change` made, with a message matching `why` (or, when `why`
 * is null, still passes: a change the format's rules allow).
 */
function failsWhen(name: string, description: string, cases: Record<string, [(test: Document) => void, RegExp | null, RunOptions?]>): void {
  describe(`${name}: ${description}`, function () {
    const unchanged = changedRuns.add(() => outcome(fixture(name, description).file, fixture(name, description).test));
    it('passes as it is', async function () {
      changedRuns.start();
      expect(await unchanged).to.equal(undefined);
    });
    for (const [title, [change, why, options]] of Object.entries(cases)) {
      const changed = changedRuns.add(() => {
        const { file, test } = fixture(name, description);
        change(test);
        return outcome(file, test, options);
      });
      it(`${why === null ? 'passes' : 'fails'} ${title}`, async function () {
        changedRuns.start();
        if (why === null) expect(await changed).to.equal(undefined);
        else expect(await changed).to.match(why);
      });
    }
  });
}

/** The runs of {@link failsWhen}'s tests, each against its own embedded deployment, four at a time. */
const changedRuns = new Concurrently<string | undefined>(4);

const LIFECYCLE = 'standalone-emit-topology-changed-before-close.json';
const LOGGING = 'logging-standalone.json';
const AUTH_ERROR = 'auth-error.json';
const AUTH_ERROR_TEST = 'Reset server and pool after AuthenticationFailure error';

describe('unified test runner', function () {
  this.timeout(20_000);

  failsWhen(LIFECYCLE, 'Topology lifecycle', {
    'when an expected event is missing from the observed ones': [(t) => t.expectEvents[0].events.push({ topologyClosedEvent: {} }), /6 sdam events expected, 5 observed/],
    'when an observed event is not expected': [(t) => t.expectEvents[0].events.pop(), /4 sdam events expected, 5 observed/],
    'when an event is of another type': [(t) => (t.expectEvents[0].events[4] = { topologyOpeningEvent: {} }), /sdam event 4: expected topologyOpeningEvent, got topologyClosedEvent/],
    "when a description's type differs": [(t) => (t.expectEvents[0].events[2].topologyDescriptionChangedEvent.newDescription.type = 'Sharded'), /sdam event 2: newDescription\.type: expected "Sharded", got "Single"/],
    'when no events are expected but some were observed': [(t) => (t.expectEvents[0].events = []), /0 sdam events expected, 5 observed/],
    'when no events are expected but some were observed, even if extra events are allowed': [
      (t) => Object.assign(t.expectEvents[0], { events: [], ignoreExtraEvents: true }),
      /0 sdam events expected, 5 observed/,
    ],
    'when an expected event names two events': [(t) => (t.expectEvents[0].events[0] = { topologyOpeningEvent: {}, topologyClosedEvent: {} }), /exactly one event/],
    'when waitForEvent waits for more events than come': [(t) => (t.operations[1].arguments.count = 5), /waitForEvent: 5 .*topologyDescriptionChangedEvent.* expected, 2 seen in 300 ms/, { waitTimeoutMS: 300 }],
    'on an unknown operation': [(t) => (t.operations[2].name = 'shutdown'), /operation shutdown on client .* not supported/],
    'on an unknown argument': [(t) => (t.operations[1].arguments.timeoutMS = 5), /operation waitForEvent: argument timeoutMS is not supported/],
    'on an unknown entity': [(t) => (t.operations[2].object = 'client2'), /close on client2: no entity client2/],
    'on an entity setting the runner would not apply': [(t) => (t.operations[0].arguments.entities[0].client.serverApi = { version: '1' }), /client entity client: serverApi is not supported/],
    'when a test runner operation names an expected result or error': [(t) => (t.operations[1].expectError = { isError: true }), /waitForEvent on testRunner: a test runner operation takes no expectError/],
    'on an unknown test runner operation': [(t) => (t.operations[1].name = 'waitForEvents'), /operation waitForEvents on testRunner .* not supported/],
  });

  it('counts no log message written once the operations ended ("Executing a Test": listeners disabled first)', async function () {
    const { file, test } = fixture(LOGGING, 'Topology lifecycle');
    // Without its close: the close's three messages ("Stopped server monitoring", "Topology description changed",
    // "Stopped topology monitoring") come after the operations, and must not be expected or counted.
    test.operations = test.operations.filter((o: Document) => o.name !== 'close');
    test.expectLogMessages[0].messages.splice(-3);
    const afterOperations = async (clients: readonly { close(): Promise<void> }[]): Promise<void> => {
      await Promise.all(clients.map((c) => c.close()));
    };
    expect(await outcome(file, test, { afterOperations })).to.equal(undefined);
  });

  it('its clients log documents up to 10,000 long (command logging spec, tests/README.md: a large max document length), so a logged command of 5,000 matches as a document', async function () {
    const { file, test } = fixture('command.json', 'A successful command');
    const comment = 'c'.repeat(5000);
    test.operations[0].arguments.command.comment = comment;
    test.expectLogMessages[0].messages[0].data.command.$$matchAsDocument.$$matchAsRoot.comment = comment;
    expect(await outcome(file, test)).to.equal(undefined);
  });

  failsWhen(AUTH_ERROR, AUTH_ERROR_TEST, {
    'when an expectError says isError: false (the format allows only true)': [(t) => (t.operations[2].expectError = { isError: false }), /expectError\.isError must be true/],
    'when assertEventCount counts one more than were published': [(t) => (t.operations[6].arguments.count = 2), /assertEventCount: 2 .*serverDescriptionChangedEvent.* expected, 1 observed/],
    'when assertEventCount counts one fewer than were published': [(t) => (t.operations[7].arguments.count = 0), /assertEventCount: 0 .*poolClearedEvent.* expected, 1 observed/],
    'when an expected command holds an embedded field the sent one does not': [
      (t) => (t.expectEvents[0].events[0].commandStartedEvent.command.documents[0].x = 1),
      /command event 0: command\.documents\[0\]\.x: missing/,
    ],
    'when a sent command holds an embedded field the expected one does not': [
      (t) => (t.operations[5].arguments.documents[0].x = 1),
      /command event 0: command\.documents\[0\]\.x: not expected in an embedded document/,
    ],
    'when a different document was inserted': [(t) => (t.expectEvents[0].events[0].commandStartedEvent.command.documents[1]._id = 7), /command\.documents\[1\]\._id: expected 7, got 6/],
    'when the command is named otherwise': [(t) => (t.expectEvents[0].events[0].commandStartedEvent.commandName = 'update'), /commandName: expected "update", got "insert"/],
    'when the outcome lacks a document the collection holds': [(t) => t.outcome[0].documents.pop(), /outcome of sdam-tests\.auth-error: .*expected 3 elements, got 4/],
    'when the outcome holds a document the collection lacks': [(t) => t.outcome[0].documents.push({ _id: 7 }), /outcome of sdam-tests\.auth-error: .*expected 5 elements, got 4/],
    "when an outcome's document has a field the stored one lacks": [(t) => (t.outcome[0].documents[0].x = 1), /outcome of sdam-tests\.auth-error: \[0\]\.x: missing/],
    'when an outcome names a matching operator: the outcome is compared exactly': [
      (t) => (t.outcome[0].documents[0].x = { $$exists: false }),
      /outcome of sdam-tests\.auth-error: \[0\]\.x: missing/,
    ],
    'when an operation expected to fail succeeds': [(t) => (t.operations[5].expectError = { isError: true }), /insertMany on collection: expected an error/],
  });

  it('an operation that fails without expectError fails the test with its error', async function () {
    const { file, test } = fixture(AUTH_ERROR, AUTH_ERROR_TEST);
    delete test.operations[2].expectError;
    test.operations.splice(3);
    expect(await outcome(file, test)).to.match(/auth/i);
  });

  failsWhen('interruptInUse-pool-clear.json', 'Connection pool clear uses interruptInUseConnections=true after monitor timeout', {
    'when poolClearedEvent was to leave connections in use alone': [
      (t) => (t.expectEvents[1].events[3].poolClearedEvent.interruptInUseConnections = false),
      /cmap event 3: interruptInUseConnections: expected false, got true/,
    ],
    "when a thread's operation fails without expectError: at waitForThread": [
      (t) => delete t.operations[2].arguments.operation.expectError,
      /^thread thread1: PoolClearedError: .*interrupted/,
    ],
    "when a thread's operation expected to fail succeeds": [
      (t) => (t.operations[2].arguments.operation = { name: 'insertOne', object: 'collection', arguments: { document: { _id: 2 } }, expectError: { isError: true } }),
      /^thread thread1: Error: insertOne on collection: expected an error/,
    ],
    "when a thread's operation fails and no waitForThread follows": [
      (t) => {
        delete t.operations[2].arguments.operation.expectError;
        t.operations[4] = { name: 'wait', object: 'testRunner', arguments: { ms: 1800 } };
      },
      /^thread thread1: PoolClearedError: .*interrupted/,
    ],
    "when a thread's operation fails after the test's last operation, not waited for": [
      (t) => {
        delete t.operations[2].arguments.operation.expectError;
        t.operations.splice(4, 1);
      },
      /^thread thread1: PoolClearedError: .*interrupted/,
    ],
    'when a thread is given a test runner operation': [
      (t) => (t.operations[2].arguments.operation = { name: 'wait', object: 'testRunner', arguments: { ms: 1 } }),
      /runOnThread: wait is a test runner operation, not an entity operation/,
    ],
  });

  failsWhen('connection-pool-options.json', 'Options should be included in connection pool created message when specified', {
    "when an expected message's data leaves out a field the message has (data is a root-level document)": [(t) => delete t.expectLogMessages[0].messages[0].data.maxIdleTimeMS, null],
    "when a log message's data differs": [(t) => (t.expectLogMessages[0].messages[0].data.maxPoolSize = 6), /log message 0: data\.maxPoolSize: expected 6, got 5/],
    "when a log message's data names a field the message lacks": [(t) => (t.expectLogMessages[0].messages[1].data.maxPoolSize = 5), /log message 1: data\.maxPoolSize: missing/],
    'when a log message is missing': [(t) => t.expectLogMessages[0].messages.pop(), /3 log messages expected, 4 written/],
    'when no message is expected but some were written, even if extra messages are allowed': [
      (t) => Object.assign(t.expectLogMessages[0], { messages: [], ignoreExtraMessages: true }),
      /0 log messages expected, 4 written/,
    ],
    "when a message's level differs": [(t) => (t.expectLogMessages[0].messages[0].level = 'info'), /log message 0: level: expected "info", got "debug"/],
    'when ignoreMessages takes out a message that is expected': [
      (t) => (t.expectLogMessages[0].ignoreMessages = [{ level: 'debug', component: 'connection', data: { message: 'Connection created' } }]),
      /4 log messages expected, 3 written/,
    ],
  });

  describe('root-level documents', function () {
    const file: UnifiedFile = {
      description: 'find',
      schemaVersion: '1.4',
      createEntities: [{ client: { id: 'client' } }, { database: { id: 'database', client: 'client', databaseName: 'db' } }, { collection: { id: 'collection', database: 'database', collectionName: 'c' } }],
      initialData: [{ collectionName: 'c', databaseName: 'db', documents: [{ _id: 1, x: 1 }, { _id: 2, x: 2 }] }],
      tests: [],
    };
    const find = (expectResult: unknown): Document => ({ description: 'find', operations: [{ name: 'find', object: 'collection', arguments: { filter: {} }, expectResult }] });

    it("the documents find returns are root-level: extra fields allowed, the number of documents exact", async function () {
      expect(await outcome(file, find([{ _id: 1 }, { _id: 2 }]))).to.equal(undefined);
      expect(await outcome(file, find([{ _id: 1 }]))).to.match(/find: result the value: expected 1 elements, got 2/);
      expect(await outcome(file, find([{ _id: 1, x: 2 }, { _id: 2 }]))).to.match(/\[0\]\.x: expected 2, got 1/);
    });
  });

  describe('bulkWrite', function () {
    const file: UnifiedFile = {
      description: 'bulkWrite',
      schemaVersion: '1.13',
      createEntities: [
        { client: { id: 'client', observeEvents: ['commandStartedEvent'], observeLogMessages: { command: 'debug' } } },
        { database: { id: 'database', client: 'client', databaseName: 'db' } },
        { collection: { id: 'collection', database: 'database', collectionName: 'c' } },
      ],
      initialData: [{ collectionName: 'c', databaseName: 'db', documents: [{ _id: 1 }] }],
      tests: [],
    };
    /** Inserts of ids `a` and `b`, a delete of `_id: 1`, an insert of `c`, an update of `a`: two inserts apart. */
    const requests = (a: number, b: number, c: number): Document[] => [
      { insertOne: { document: { _id: a } } },
      { insertOne: { document: { _id: b } } },
      { deleteOne: { filter: { _id: 1 } } },
      { insertOne: { document: { _id: c } } },
      { updateOne: { filter: { _id: a }, update: { $set: { x: 1 } } } },
    ];
    const started = (command: Document): Document => ({ commandStartedEvent: { command } });
    const startedLog = (commandName: string, operationId: number): Document => ({ level: 'debug', component: 'command', data: { message: 'Command started', commandName, operationId } });
    const test = (): Document => ({
      description: 'bulkWrite',
      operations: [
        { name: 'bulkWrite', object: 'collection', arguments: { requests: requests(2, 3, 4) } },
        { name: 'bulkWrite', object: 'collection', arguments: { requests: requests(12, 13, 14), ordered: false } },
        { name: 'insertOne', object: 'collection', arguments: { document: { _id: 20 } } },
        // A find's getMores are of its operation.
        { name: 'find', object: 'collection', arguments: { filter: {}, sort: { _id: 1 }, batchSize: 4 } },
      ],
      expectEvents: [
        {
          client: 'client',
          events: [
            // Ordered: one command per run of requests of one kind, in the requests' order.
            started({ insert: 'c', documents: [{ _id: 2 }, { _id: 3 }], ordered: true }),
            started({ delete: 'c', deletes: [{ q: { _id: 1 }, limit: 1 }], ordered: true }),
            started({ insert: 'c', documents: [{ _id: 4 }], ordered: true }),
            started({ update: 'c', updates: [{ q: { _id: 2 }, u: { $set: { x: 1 } } }], ordered: true }),
            // Unordered: one command per kind, in the order each kind first comes.
            started({ insert: 'c', documents: [{ _id: 12 }, { _id: 13 }, { _id: 14 }], ordered: false }),
            started({ delete: 'c', deletes: [{ q: { _id: 1 }, limit: 1 }], ordered: false }),
            started({ update: 'c', updates: [{ q: { _id: 12 }, u: { $set: { x: 1 } } }], ordered: false }),
            started({ insert: 'c', documents: [{ _id: 20 }], ordered: true }),
            started({ find: 'c', batchSize: 4 }),
            started({ getMore: { $$type: 'long' }, batchSize: 4 }),
          ],
        },
      ],
      expectLogMessages: [
        {
          client: 'client',
          ignoreMessages: [{ level: 'debug', component: 'command', data: { message: 'Command succeeded' } }],
          // The commands of one bulk write share its operationId; each operation has its own (counted from 1).
          messages: [
            startedLog('insert', 1), startedLog('delete', 1), startedLog('insert', 1), startedLog('update', 1),
            startedLog('insert', 2), startedLog('delete', 2), startedLog('update', 2),
            startedLog('insert', 3),
            startedLog('find', 4), startedLog('getMore', 4),
          ],
        },
      ],
      outcome: [{ collectionName: 'c', databaseName: 'db', documents: [{ _id: 2, x: 1 }, { _id: 3 }, { _id: 4 }, { _id: 12, x: 1 }, { _id: 13 }, { _id: 14 }, { _id: 20 }] }],
    });

    it('groups requests into runs of one kind (ordered) or one command per kind (unordered), each bulk write under one operationId', async function () {
      expect(await outcome(file, test())).to.equal(undefined);
    });

    it('runs every command of an ordered bulk write past a write concern error, then throws it', async function () {
      const test = {
        description: 'bulkWrite with a write concern error',
        operations: [
          {
            name: 'failPoint',
            object: 'testRunner',
            arguments: { client: 'client', failPoint: { configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['insert'], writeConcernError: { code: 91, errmsg: 'Replication is being shut down' } } } },
          },
          {
            name: 'bulkWrite',
            object: 'collection',
            arguments: { requests: [{ insertOne: { document: { _id: 2 } } }, { deleteOne: { filter: { _id: 1 } } }, { insertOne: { document: { _id: 3 } } }] },
            expectError: { errorCode: 91 },
          },
        ],
        expectEvents: [
          { client: 'client', events: [started({ insert: 'c', documents: [{ _id: 2 }] }), started({ delete: 'c' }), started({ insert: 'c', documents: [{ _id: 3 }] })] },
        ],
        outcome: [{ collectionName: 'c', databaseName: 'db', documents: [{ _id: 2 }, { _id: 3 }] }],
      };
      expect(await outcome(file, test)).to.equal(undefined);
    });

    it('replaces with replaceOne; refuses an update without atomic modifiers, a replacement with one, an empty insertMany or bulkWrite, sending nothing', async function () {
      const replace = {
        description: 'replaceOne',
        operations: [{ name: 'bulkWrite', object: 'collection', arguments: { requests: [{ replaceOne: { filter: { _id: 1 }, replacement: { y: 1 } } }] } }],
        expectEvents: [{ client: 'client', events: [started({ update: 'c', updates: [{ q: { _id: 1 }, u: { y: 1 } }] })] }],
        outcome: [{ collectionName: 'c', databaseName: 'db', documents: [{ _id: 1, y: 1 }] }],
      };
      expect(await outcome(file, replace)).to.equal(undefined);
      const refused = {
        description: 'refused',
        operations: [
          { name: 'updateOne', object: 'collection', arguments: { filter: { _id: 1 }, update: { x: 1 } }, expectError: { isClientError: true } },
          { name: 'updateMany', object: 'collection', arguments: { filter: {}, update: {} }, expectError: { isClientError: true } },
          {
            name: 'bulkWrite',
            object: 'collection',
            arguments: { requests: [{ insertOne: { document: { _id: 5 } } }, { replaceOne: { filter: { _id: 1 }, replacement: { $set: { y: 1 } } } }] },
            expectError: { isClientError: true },
          },
          // An empty insertMany or bulkWrite is a client error (CRUD spec).
          { name: 'insertMany', object: 'collection', arguments: { documents: [] }, expectError: { isClientError: true } },
          { name: 'bulkWrite', object: 'collection', arguments: { requests: [] }, expectError: { isClientError: true } },
          // A pipeline is an update too.
          { name: 'updateOne', object: 'collection', arguments: { filter: { _id: 1 }, update: [{ $set: { x: 1 } }] }, expectError: { isClientError: false } },
        ],
        expectEvents: [{ client: 'client', events: [started({ update: 'c' })] }],
        outcome: [{ collectionName: 'c', databaseName: 'db', documents: [{ _id: 1 }] }],
      };
      expect(await outcome(file, refused)).to.equal(undefined);
    });

    it('refuses a client bulk write with no models, an update without atomic modifiers or a replacement with one, sending nothing (CRUD spec, "Client Bulk Write")', async function () {
      const clientBulkWrite = (models: Document[], expectError?: Document): Document => ({ name: 'clientBulkWrite', object: 'client', arguments: { models }, ...(expectError === undefined ? {} : { expectError }) });
      const refused = {
        description: 'refused',
        operations: [
          clientBulkWrite([], { isClientError: true }),
          clientBulkWrite([{ updateOne: { namespace: 'db.c', filter: { _id: 1 }, update: { x: 1 } } }], { isClientError: true }),
          clientBulkWrite([{ updateMany: { namespace: 'db.c', filter: {}, update: {} } }], { isClientError: true }),
          clientBulkWrite([{ insertOne: { namespace: 'db.c', document: { _id: 5 } } }, { replaceOne: { namespace: 'db.c', filter: { _id: 1 }, replacement: { $set: { y: 1 } } } }], { isClientError: true }),
          // What the checks take is sent.
          clientBulkWrite([{ replaceOne: { namespace: 'db.c', filter: { _id: 1 }, replacement: { y: 1 } } }, { updateOne: { namespace: 'db.c', filter: { _id: 1 }, update: { $set: { x: 1 } } } }]),
        ],
        expectEvents: [{ client: 'client', events: [started({ bulkWrite: 1, ops: [{ update: 0, filter: { _id: 1 }, updateMods: { y: 1 }, multi: false }, { update: 0, filter: { _id: 1 }, updateMods: { $set: { x: 1 } }, multi: false }] })] }],
        outcome: [{ collectionName: 'c', databaseName: 'db', documents: [{ _id: 1, y: 1, x: 1 }] }],
      };
      expect(await outcome(file, refused)).to.equal(undefined);
      // Unacknowledged (the client's w: 0), an ordered one (the default) or one asking for verbose results is a client
      // error too, nothing sent (CRUD spec, "Client Bulk Write", "ordered" and "verboseResults").
      const insert = [{ insertOne: { namespace: 'db.c', document: { _id: 7 } } }];
      const unacknowledged = {
        description: 'unacknowledged',
        operations: [
          { name: 'createEntities', object: 'testRunner', arguments: { entities: [{ client: { id: 'w0', uriOptions: { w: 0 }, observeEvents: ['commandStartedEvent'] } }] } },
          { name: 'clientBulkWrite', object: 'w0', arguments: { models: insert }, expectError: { isClientError: true, errorContains: 'Cannot request unacknowledged write concern and ordered writes' } },
          { name: 'clientBulkWrite', object: 'w0', arguments: { models: insert, ordered: true }, expectError: { isClientError: true, errorContains: 'ordered writes' } },
          { name: 'clientBulkWrite', object: 'w0', arguments: { models: insert, ordered: false, verboseResults: true }, expectError: { isClientError: true, errorContains: 'Cannot request unacknowledged write concern and verbose results' } },
        ],
        expectEvents: [{ client: 'w0', events: [] }],
        outcome: [{ collectionName: 'c', databaseName: 'db', documents: [{ _id: 1 }] }],
      };
      expect(await outcome(file, unacknowledged)).to.equal(undefined);
    });

    it('gives a document inserted without an _id a new ObjectId, as a driver does, and reports it', async function () {
      const oid = { $$type: 'objectId' };
      const test = {
        description: 'inserted ids',
        operations: [
          { name: 'insertOne', object: 'collection', arguments: { document: { x: 1 } }, expectResult: { insertedId: oid } },
          { name: 'insertMany', object: 'collection', arguments: { documents: [{ x: 2 }, { _id: 7 }] }, expectResult: { insertedIds: { 0: oid, 1: 7 } } },
          { name: 'bulkWrite', object: 'collection', arguments: { requests: [{ insertOne: { document: { x: 3 } } }] }, expectResult: { insertedIds: { 0: oid } } },
        ],
        expectEvents: [
          {
            client: 'client',
            events: [
              started({ insert: 'c', documents: [{ _id: oid, x: 1 }] }),
              started({ insert: 'c', documents: [{ _id: oid, x: 2 }, { _id: 7 }] }),
              started({ insert: 'c', documents: [{ _id: oid, x: 3 }] }),
            ],
          },
        ],
      };
      expect(await outcome(file, test)).to.equal(undefined);
    });

    it("writes with the collection's write concern, else its database's, else the client's uriOptions'", async function () {
      const inheriting: UnifiedFile = {
        ...file,
        createEntities: [
          { client: { id: 'client', observeEvents: ['commandStartedEvent'], uriOptions: { w: 'majority', journal: true } } },
          { database: { id: 'database', client: 'client', databaseName: 'db' } },
          { database: { id: 'database1', client: 'client', databaseName: 'db', databaseOptions: { writeConcern: { w: 1 } } } },
          { collection: { id: 'fromClient', database: 'database', collectionName: 'c' } },
          { collection: { id: 'fromDatabase', database: 'database1', collectionName: 'c' } },
          { collection: { id: 'own', database: 'database1', collectionName: 'c', collectionOptions: { writeConcern: { w: 'majority', journal: false, wtimeoutMS: 1000 } } } },
        ],
      };
      const test = {
        description: 'write concerns',
        operations: ['fromClient', 'fromDatabase', 'own'].map((object, i) => ({ name: 'deleteOne', object, arguments: { filter: { _id: i } } })),
        expectEvents: [
          {
            client: 'client',
            events: [
              started({ delete: 'c', writeConcern: { w: 'majority', j: true } }),
              started({ delete: 'c', writeConcern: { w: 1 } }),
              // The format's journal and wtimeoutMS are the command's j and wtimeout.
              started({ delete: 'c', writeConcern: { w: 'majority', j: false, wtimeout: 1000 } }),
            ],
          },
        ],
      };
      expect(await outcome(inheriting, test)).to.equal(undefined);
      expect(() => writeConcernOf({ w: 1, wtimeout: 5 }, 'collection c')).to.throw(/collection c: write concern field wtimeout is not supported/);
    });

    it('reports nothing of an unacknowledged write (w: 0), which it sends with no reply read; w: 0 with journal is acknowledged', async function () {
      const unacknowledged: UnifiedFile = {
        ...file,
        createEntities: [
          ...file.createEntities!,
          { collection: { id: 'w0', database: 'database', collectionName: 'c', collectionOptions: { writeConcern: { w: 0 } } } },
          { collection: { id: 'journaled', database: 'database', collectionName: 'c', collectionOptions: { writeConcern: { w: 0, journal: true } } } },
        ],
      };
      const none = { $$exists: false };
      const test = {
        description: 'unacknowledged',
        operations: [
          { name: 'updateOne', object: 'w0', arguments: { filter: { _id: 1 }, update: { $set: { x: 1 } } }, expectResult: none },
          { name: 'updateMany', object: 'w0', arguments: { filter: { _id: 1 }, update: { $set: { y: 1 } } }, expectResult: none },
          { name: 'bulkWrite', object: 'w0', arguments: { requests: [{ insertOne: { document: { _id: 2 } } }] }, expectResult: none },
          { name: 'deleteOne', object: 'w0', arguments: { filter: { _id: 2 } }, expectResult: none },
          // A duplicate key is not reported: the reply is never read.
          { name: 'insertOne', object: 'w0', arguments: { document: { _id: 1 } } },
          { name: 'deleteMany', object: 'journaled', arguments: { filter: { _id: 3 } }, expectResult: { deletedCount: 0 } },
          // The writes ran before the find, on the same connection.
          { name: 'find', object: 'collection', arguments: { filter: {} }, expectResult: [{ _id: 1, x: 1, y: 1 }] },
        ],
      };
      expect(await outcome(unacknowledged, test)).to.equal(undefined);
    });

    it('reports an upsert as upserted, not matched, with its upsertedId (CRUD spec, "UpdateResult")', async function () {
      const update = (name: string, filter: Document, expectResult: Document): Document => ({ name, object: 'collection', arguments: { filter, update: { $set: { x: 1 } }, upsert: true }, expectResult });
      const test = {
        description: 'upsert',
        operations: [
          update('updateOne', { _id: 7 }, { matchedCount: 0, modifiedCount: 0, upsertedCount: 1, upsertedId: 7 }),
          update('updateMany', { _id: 7 }, { matchedCount: 1, modifiedCount: 0, upsertedCount: 0, upsertedId: { $$exists: false } }),
          update('updateOne', { _id: 1 }, { matchedCount: 1, modifiedCount: 1, upsertedCount: 0 }),
        ],
      };
      expect(await outcome(file, test)).to.equal(undefined);
    });

    it("reports a bulk write's counts, and its inserted and upserted ids by the request's index, ordered or not", async function () {
      const requests = (base: number): Document[] => [
        { updateOne: { filter: { _id: base }, update: { $set: { u: 1 } }, upsert: true } },
        { insertOne: { document: { _id: base + 1 } } },
        { updateMany: { filter: { _id: 1 }, update: { $set: { u: 1 } } } },
        { updateOne: { filter: { _id: base + 2 }, update: { $set: { u: 1 } }, upsert: true } },
        { deleteOne: { filter: { _id: base + 1 } } },
      ];
      const expectResult = (base: number): Document => ({
        insertedCount: 1, matchedCount: 1, modifiedCount: 1, deletedCount: 1, upsertedCount: 2,
        insertedIds: { 1: base + 1 },
        upsertedIds: { 0: base, 3: base + 2 },
      });
      const test = {
        description: 'bulkWrite results',
        operations: [
          { name: 'bulkWrite', object: 'collection', arguments: { requests: requests(10) }, expectResult: expectResult(10) },
          { name: 'bulkWrite', object: 'collection', arguments: { requests: requests(20), ordered: false }, expectResult: { ...expectResult(20), modifiedCount: 0 } },
        ],
      };
      expect(await outcome(file, test)).to.equal(undefined);
    });

    it('stops an ordered bulk write at its first write error, and runs every command of an unordered one before throwing', async function () {
      const failing = (ordered: boolean): Document => ({
        description: 'bulkWrite with a write error',
        operations: [
          {
            name: 'bulkWrite',
            object: 'collection',
            arguments: { requests: [{ insertOne: { document: { _id: 1 } } }, { deleteOne: { filter: { _id: 1 } } }, { insertOne: { document: { _id: 5 } } }], ordered },
            expectError: { errorCode: 11000 },
          },
        ],
        expectEvents: [
          {
            client: 'client',
            events: ordered
              ? [started({ insert: 'c', documents: [{ _id: 1 }] })]
              : [started({ insert: 'c', documents: [{ _id: 1 }, { _id: 5 }] }), started({ delete: 'c', deletes: [{ q: { _id: 1 }, limit: 1 }] })],
          },
        ],
        outcome: [{ collectionName: 'c', databaseName: 'db', documents: ordered ? [{ _id: 1 }] : [{ _id: 5 }] }],
      });
      expect(await outcome(file, failing(true))).to.equal(undefined);
      expect(await outcome(file, failing(false))).to.equal(undefined);
    });
  });

  describe('find', function () {
    const file: UnifiedFile = {
      description: 'find',
      schemaVersion: '1.4',
      createEntities: [
        { client: { id: 'client', observeEvents: ['commandStartedEvent'] } },
        { database: { id: 'database', client: 'client', databaseName: 'db' } },
        { collection: { id: 'collection', database: 'database', collectionName: 'c' } },
      ],
      initialData: [{ collectionName: 'c', databaseName: 'db', documents: [{ _id: 1 }, { _id: 2 }, { _id: 3 }, { _id: 4 }] }],
      tests: [],
    };
    const ids = (...list: number[]): Document[] => list.map((_id) => ({ _id }));
    /** A find with `options` that returns `result` having sent `commands` (the find's, then its getMores'). */
    const find = (options: Document, result: Document[], commands: Document[]): Document => ({
      description: 'find',
      operations: [{ name: 'find', object: 'collection', arguments: { filter: {}, sort: { _id: 1 }, ...options }, expectResult: result }],
      expectEvents: [{ client: 'client', events: commands.map((command) => ({ commandStartedEvent: { command } })) }],
    });
    const getMore = (batchSize?: number): Document => ({ getMore: { $$type: 'long' }, collection: 'c', ...(batchSize === undefined ? {} : { batchSize }) });

    it('sends a negative limit as one batch of its absolute value (CRUD spec: singleBatch)', async function () {
      expect(await outcome(file, find({ limit: -2 }, ids(1, 2), [{ find: 'c', limit: 2, singleBatch: true }]))).to.equal(undefined);
    });

    it('sends a batchSize equal to the limit as limit + 1, so that no cursor is left open', async function () {
      expect(await outcome(file, find({ limit: 2, batchSize: 2 }, ids(1, 2), [{ find: 'c', limit: 2, batchSize: 3 }]))).to.equal(undefined);
    });

    it('reads the rest with getMores of the batchSize, or of what is left of the limit', async function () {
      expect(await outcome(file, find({ batchSize: 2 }, ids(1, 2, 3, 4), [{ find: 'c', batchSize: 2 }, getMore(2)]))).to.equal(undefined);
      expect(await outcome(file, find({ limit: 3, batchSize: 2 }, ids(1, 2, 3), [{ find: 'c', limit: 3, batchSize: 2 }, getMore(1)]))).to.equal(undefined);
      expect(await outcome(file, find({ batchSize: 3 }, ids(1, 2, 3, 4), [{ find: 'c', batchSize: 3 }, getMore(3)]))).to.equal(undefined);
      // A batchSize of 0 opens the cursor with nothing read: the getMore asks for no batch size.
      expect(await outcome(file, find({ batchSize: 0 }, ids(1, 2, 3, 4), [{ find: 'c', batchSize: 0 }, { ...getMore(), batchSize: { $$exists: false } }]))).to.equal(undefined);
      expect(await outcome(file, find({ batchSize: 0, limit: 3 }, ids(1, 2, 3), [{ find: 'c', batchSize: 0, limit: 3 }, getMore(3)]))).to.equal(undefined);
    });

    it("sends a find's getMores to the server its find went to, among several secondaries or several mongoses", async function () {
      const replicaSet: UnifiedFile = {
        ...file,
        runOnRequirements: [{ topologies: ['replicaset'] }],
        createEntities: [
          { client: { id: 'client', observeEvents: ['commandStartedEvent', 'topologyDescriptionChangedEvent'] } },
          { database: { id: 'database', client: 'client', databaseName: 'db' } },
          { collection: { id: 'collection', database: 'database', collectionName: 'c' } },
          { collection: { id: 'secondary', database: 'database', collectionName: 'c', collectionOptions: { readPreference: { mode: 'Secondary' } } } },
        ],
      };
      const read = (object: string, count: number): Document => ({
        description: 'reads of one document per batch',
        operations: [
          // Every member (or mongos) known.
          { name: 'waitForEvent', object: 'testRunner', arguments: { client: 'client', event: { topologyDescriptionChangedEvent: {} }, count } },
          ...[1, 2, 3, 4, 5].map(() => ({ name: 'find', object, arguments: { filter: {}, batchSize: 1 }, expectResult: ids(1, 2, 3, 4) })),
        ],
      });
      // The servers of each find's commands (its own, then its getMores'), in order, per run.
      const runs: string[][][] = [];
      const clientCreated = (client: Client): void => {
        const finds: string[][] = [];
        runs.push(finds);
        client.commandEvents$.subscribe((event) => {
          if (event.type !== 'CommandStarted') return;
          if (event.commandName === 'find') finds.push([event.address]);
          if (event.commandName === 'getMore') finds[finds.length - 1]!.push(event.address);
        });
      };
      const mongoses: UnifiedFile = {
        ...replicaSet,
        runOnRequirements: [{ topologies: ['sharded'] }],
        createEntities: [{ client: { id: 'client', useMultipleMongoses: true, observeEvents: ['topologyDescriptionChangedEvent'] } }, ...replicaSet.createEntities!.slice(1, 3)],
      };
      for (let i = 0; i < 2; i++) {
        expect(await outcome(replicaSet, read('secondary', 4), { clientCreated })).to.equal(undefined);
        expect(await outcome(mongoses, read('collection', 2), { clientCreated })).to.equal(undefined);
      }
      expect(runs.flat()).to.have.length(20);
      for (const servers of runs.flat()) {
        expect(servers, 'a find and its three getMores').to.have.length(4);
        expect(new Set(servers).size, `one server: ${servers.join(', ')}`).to.equal(1);
      }
      // In some run the finds went to both servers their selection allows (all five to one: 1 in 16 per run), so a
      // getMore selected again had another server to reach.
      expect(runs.some((finds) => new Set(finds.map((servers) => servers[0])).size === 2)).to.equal(true);
    });

    it("fails on what it cannot run, even where the operation expects an error or ignores it: its refusal is not the client's error", async function () {
      const refused = (operation: Document): Document => ({ description: 'refused', operations: [{ object: 'collection', ...operation }] });
      const find = { name: 'find', arguments: { filter: {}, collation: { locale: 'fr' } } };
      expect(await outcome(file, refused({ ...find, expectError: { isClientError: true } }))).to.match(/argument collation is not supported/);
      expect(await outcome(file, refused({ ...find, expectError: { isError: true } }))).to.match(/argument collation is not supported/);
      expect(await outcome(file, refused({ ...find, ignoreResultAndError: true }))).to.match(/argument collation is not supported/);
      expect(await outcome(file, refused({ name: 'aggregate', arguments: { pipeline: [] }, expectError: { isClientError: true } }))).to.match(/operation aggregate on collection .* not supported/);
      expect(await outcome(file, refused({ name: 'find', object: 'collection2', arguments: { filter: {} }, expectError: { isClientError: true } }))).to.match(/no entity collection2/);
      const bulk = { name: 'bulkWrite', arguments: { requests: [{ insertOne: { document: {} }, deleteOne: { filter: {} } }] }, expectError: { isClientError: true } };
      expect(await outcome(file, refused(bulk))).to.match(/a request names one write model, not 2/);
      // A write model's option the runner would not send fails the test too, of a bulkWrite or a clientBulkWrite.
      const model = (request: Document): Document => ({ name: 'bulkWrite', arguments: { requests: [request] }, expectError: { isClientError: true } });
      expect(await outcome(file, refused(model({ deleteOne: { filter: {}, hint: '_id_' } })))).to.match(/bulkWrite: deleteOne option hint is not supported/);
      expect(await outcome(file, refused(model({ insertOne: { document: {}, bypassDocumentValidation: true } })))).to.match(/bulkWrite: insertOne option bypassDocumentValidation is not supported/);
      const clientModel = (request: Document): Document => ({ name: 'clientBulkWrite', object: 'client', arguments: { models: [request] }, expectError: { isClientError: true } });
      expect(await outcome(file, refused(clientModel({ deleteOne: { namespace: 'db.c', filter: {}, collation: { locale: 'fr' } } })))).to.match(/clientBulkWrite: deleteOne option collation is not supported/);
      expect(await outcome(file, refused(clientModel({ insertMany: { namespace: 'db.c', documents: [{}] } })))).to.match(/clientBulkWrite: write model insertMany is not supported/);
      expect(await outcome(file, refused(clientModel({ insertOne: { namespace: 'db.c', document: {} }, deleteOne: { namespace: 'db.c', filter: {} } })))).to.match(/clientBulkWrite: a request names one write model, not 2/);
    });

    it("sends a getMore's cursor id as a long, as mongod requires, though the reply's id is read as a number", async function () {
      // The format's $$type 'long' takes a number too (a reply's long is read as one): the sent command is looked at.
      const sent: unknown[] = [];
      const clientCreated = (client: Client): void => {
        client.commandEvents$.subscribe((event) => {
          if (event.type === 'CommandStarted' && event.commandName === 'getMore') sent.push(event.command.getMore);
        });
      };
      expect(await outcome(file, find({ batchSize: 3 }, ids(1, 2, 3, 4), [{ find: 'c', batchSize: 3 }, getMore(3)]), { clientCreated })).to.equal(undefined);
      expect(sent).to.have.length(1);
      expect(Long.isLong(sent[0]), String(sent[0])).to.equal(true);
    });
  });

  describe('sensitive commands', function () {
    const file: UnifiedFile = {
      description: 'sensitive',
      schemaVersion: '1.4',
      createEntities: [
        { client: { id: 'client', observeEvents: ['commandStartedEvent', 'commandSucceededEvent', 'commandFailedEvent'] } },
        { database: { id: 'database', client: 'client', databaseName: 'admin' } },
      ],
      tests: [],
    };
    const hello = (command: Document): Document => ({
      description: 'hello',
      operations: [{ name: 'runCommand', object: 'database', arguments: { command, commandName: 'hello' } }],
      expectEvents: [{ client: 'client', events: [] }],
    });

    it('a hello with speculativeAuthenticate publishes no event observed, a plain hello does', async function () {
      const speculative = { hello: 1, speculativeAuthenticate: { saslStart: 1, mechanism: 'SCRAM-SHA-256', payload: Buffer.from('n,,n=u,r=abc'), db: 'admin' } };
      expect(await outcome(file, hello(speculative))).to.equal(undefined);
      expect(await outcome(file, hello({ hello: 1 }))).to.match(/0 command events expected, 2 observed/);
    });
  });

  describe('fail points', function () {
    const file: UnifiedFile = {
      description: 'fail point',
      schemaVersion: '1.4',
      runOnRequirements: [{ topologies: ['sharded'] }],
      createEntities: [{ client: { id: 'client', useMultipleMongoses: true } }],
      tests: [],
    };
    const test = (fail: boolean): Document => ({
      description: 'fail point',
      operations: [
        // Both mongoses known, so that either may be selected.
        { name: 'wait', object: 'testRunner', arguments: { ms: 100 } },
        { name: 'failPoint', object: 'testRunner', arguments: { client: 'client', failPoint: { configureFailPoint: 'failCommand', mode: 'alwaysOn', data: { failCommands: ['ping'], errorCode: 91 } } } },
        ...(fail ? [{ name: 'wait', object: 'testRunner', arguments: { ms: 1, bogus: true } }] : []),
      ],
    });

    /** Pings every mongos directly: a fail point left on fails one. */
    async function pingEach(deployment: Deployment): Promise<void> {
      const hosts = /^mongodb:\/\/([^/?]+)/.exec(deployment.uri(true))![1]!.split(',');
      expect(hosts).to.have.length(2);
      for (const host of hosts) {
        const client = connect(`mongodb://${host}/?directConnection=true`);
        try {
          expect(await client.command('admin', { ping: 1 })).to.include({ ok: 1 });
        } finally {
          await client.close();
        }
      }
    }

    it('are turned off on the mongos they were set on, the test passed or failed', async function () {
      // A client of several mongoses picks one at random: each run has even odds of showing a fail point turned off
      // on the other one.
      for (let i = 0; i < 6; i++) {
        expect(await outcome(file, test(i % 2 === 1), {}, pingEach)).to.satisfy((m: string | undefined) => (i % 2 === 1 ? /argument bogus/.test(m!) : m === undefined));
      }
    });
  });

  describe('files', function () {
    it('a file of a newer major schema version fails, it is not skipped', async function () {
      const { file, test } = fixture(LIFECYCLE, 'Topology lifecycle');
      const newer = { ...file, schemaVersion: '2.0' };
      const deployment = { topology: 'single', serverVersion: '8.0.0', auth: false } as Deployment;
      expect(() => UnifiedTestRun.skip(newer, test as UnifiedTest, deployment)).to.throw(/schema version 2\.0/);
      expect(() => UnifiedTestRun.skip({ ...file, schemaVersion: '1.99' }, test as UnifiedTest, deployment)).to.throw(/schema version 1\.99/);
      expect(UnifiedTestRun.skip(file, test as UnifiedTest, deployment)).to.equal(undefined);
      expect(await outcome(newer, test)).to.match(/schema version 2\.0/);
    });
  });

  describe('expectError', function () {
    const error = new MongoServerError({ ok: 0, code: 10107, codeName: 'NotWritablePrimary', errmsg: 'not primary', errorLabels: ['RetryableWriteError'] });

    it('errorCodeName and errorContains compare without case', function () {
      expect(() => checkError({ errorCodeName: 'notwritableprimary' }, error, 'op')).to.not.throw();
      expect(() => checkError({ errorCodeName: 'NotPrimary' }, error, 'op')).to.throw(/error code name NotWritablePrimary, expected NotPrimary/);
      expect(() => checkError({ errorContains: 'NOT PRIMARY' }, error, 'op')).to.not.throw();
      expect(() => checkError({ errorContains: 'secondary' }, error, 'op')).to.throw(/does not contain/);
    });

    it('errorCode, labels and client errors', function () {
      expect(() => checkError({ errorCode: 10107, errorLabelsContain: ['RetryableWriteError'], isClientError: false }, error, 'op')).to.not.throw();
      expect(() => checkError({ errorCode: 91 }, error, 'op')).to.throw(/error code 10107, expected 91/);
      expect(() => checkError({ errorLabelsContain: ['TransientTransactionError'] }, error, 'op')).to.throw(/lack TransientTransactionError/);
      expect(() => checkError({ errorLabelsOmit: ['RetryableWriteError'] }, error, 'op')).to.throw(/hold RetryableWriteError/);
      expect(() => checkError({ isClientError: true }, error, 'op')).to.throw(/expected a client error/);
      expect(() => checkError({ isClientError: true }, new Error('connection closed'), 'op')).to.not.throw();
    });
  });

  describe('read preferences', function () {
    it("are read in the format's form (mode in any case, tagSets), and one the runner would not apply is an error", function () {
      expect(readPreferenceOf({ mode: 'SecondaryPreferred', tagSets: [{ dc: 'ny' }, {}], maxStalenessSeconds: 90 }, 'c')).to.deep.equal({ mode: 'secondaryPreferred', tags: [{ dc: 'ny' }, {}], maxStalenessSeconds: 90 });
      expect(readPreferenceOf({ mode: 'primary' }, 'c')).to.deep.equal({ mode: 'primary' });
      expect(readPreferenceOf({ mode: 'SECONDARYPREFERRED' }, 'c')).to.deep.equal({ mode: 'secondaryPreferred' });
      expect(readPreferenceOf({ mode: 'primarypreferred' }, 'c')).to.deep.equal({ mode: 'primaryPreferred' });
      expect(() => readPreferenceOf({ mode: 'Nearest', hedge: { enabled: true } }, 'collection c')).to.throw(/collection c: read preference field hedge is not supported/);
    });
  });

  describe('failureIsRedacted', function () {
    const redacted = { type: 'MongoServerError', message: 'command failed', code: 18, codeName: 'AuthenticationFailed', response: '{"ok":0,"code":18,"codeName":"AuthenticationFailed"}' };

    it("is a server error reduced to its code, code name and labels: its reply's and its message's detail gone", function () {
      expect(isRedacted(redacted)).to.equal(true);
      expect(isRedacted({ ...redacted, response: '{"ok":0,"code":18,"codeName":"AuthenticationFailed","errorLabels":["x"]}' })).to.equal(true);
      expect(isRedacted({ ...redacted, response: '{"ok":0,"errmsg":"Authentication failed.","code":18,"codeName":"AuthenticationFailed"}', message: 'Authentication failed.' })).to.equal(false);
      // The reply redacted, the server's errmsg still in the message.
      expect(isRedacted({ ...redacted, message: 'Authentication failed for CN=myName' })).to.equal(false);
      expect(isRedacted({ ...redacted, cause: { type: 'Error', message: 'x' } })).to.equal(false);
    });

    it('is not a network error, which the spec leaves as it is', function () {
      expect(isRedacted({ type: 'MongoNetworkError', message: 'connection 1 to 127.0.0.1:1 closed' })).to.equal(false);
      expect(isRedacted({ ...redacted, type: 'MongoNetworkError' })).to.equal(false);
      expect(isRedacted(undefined)).to.equal(false);
    });
  });

  describe('uriOptions', function () {
    it("override the connection string's options of the same name, whatever their case", function () {
      expect(withUriOptions('mongodb://h:1/?appName=base&w=1', { appname: 'test' })).to.equal('mongodb://h:1/?w=1&appname=test');
      expect(withUriOptions('mongodb://h:1/?replicaSet=rs', { heartbeatFrequencyMS: 500 })).to.equal('mongodb://h:1/?replicaSet=rs&heartbeatFrequencyMS=500');
      expect(withUriOptions('mongodb://h:1', { w: 'majority' })).to.equal('mongodb://h:1/?w=majority');
    });

    it('a fail point is turned off through a direct connection to its server, credentials and options kept', function () {
      expect(directUri('mongodb://u:p@a:1,b:2/?replicaSet=rs&authSource=admin', 'b:2')).to.equal('mongodb://u:p@b:2/?authSource=admin&directConnection=true');
      expect(directUri('mongodb://a:1,b:2/', 'a:1')).to.equal('mongodb://a:1/?directConnection=true');
      expect(directUri('mongodb://lb:1/?loadBalanced=true', 'lb:1')).to.equal('mongodb://lb:1/?loadBalanced=true');
    });
  });
});
