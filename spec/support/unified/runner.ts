/**
 * A unified test format runner for the tests a pool and its client are tested by: SDAM's `unified` tests, CMAP's
 * `logging` tests, the load balancer spec's tests, the command logging and monitoring spec's tests and the server
 * selection spec's logging tests. It creates the entities (clients of rxcmap's `connect()`, databases, collections, threads),
 * translates the CRUD operations those tests use into the commands a driver sends for them (rxcmap has no CRUD
 * API), runs the test runner's own operations (fail points, waiting for and counting events, threads, topology
 * assertions), and checks the expected events, log messages and collection outcome by the format's matching rules.
 *
 * It supports what those files use and fails loudly on anything else (an unknown operation, entity, event or
 * matching operator), so a test can never pass by being skipped over.
 *
 * Source: unified test format spec ("Entity Map", "createEntities", "Test Operations", "Special Test Operations",
 * "expectedEventsForClient", "expectedLogMessagesForClient", "Evaluating Matches", "Test Runner Implementation").
 */
import { Long, ObjectId, type Document } from 'bson';
import { connect, MongoServerError, type Client, type ClientEvent, type CommandEvent, type LogMessage, type TopologyDescription, type TopologyEvent } from '../../../lib';
import { isSensitiveCommand } from '../../../lib/connection/command-events';
import { READ_PREFERENCE_MODES } from '../../../lib/read-preference';
import { type Deployment, type RunOnRequirement, unmet, withUriOptions } from './deployment';
import { eventually } from '../endpoint';
import { match, mismatchExactly } from './match';

/** A unified test file (the fields this runner reads). */
export interface UnifiedFile {
  readonly description: string;
  readonly schemaVersion: string;
  readonly runOnRequirements?: readonly RunOnRequirement[];
  readonly createEntities?: readonly Document[];
  readonly initialData?: readonly { collectionName: string; databaseName: string; documents: Document[]; createOptions?: Document }[];
  readonly tests: readonly UnifiedTest[];
}

/** One test of a unified test file. */
export interface UnifiedTest {
  readonly description: string;
  readonly runOnRequirements?: readonly RunOnRequirement[];
  readonly skipReason?: string;
  readonly operations: readonly Operation[];
  readonly expectEvents?: readonly { client: string; eventType?: 'command' | 'cmap' | 'sdam'; events: Document[]; ignoreExtraEvents?: boolean }[];
  readonly expectLogMessages?: readonly { client: string; messages: Document[]; ignoreMessages?: Document[]; ignoreExtraMessages?: boolean }[];
  readonly outcome?: readonly { collectionName: string; databaseName: string; documents: Document[] }[];
}

/** One operation of a test. */
export interface Operation {
  readonly name: string;
  readonly object: string;
  readonly arguments?: Document;
  readonly expectError?: Document;
  readonly expectResult?: unknown;
  readonly saveResultAsEntity?: string;
  readonly ignoreResultAndError?: boolean;
}

/** The newest schema version this runner reads (the unified test format spec's versions are backward compatible). */
export const SUPPORTED_SCHEMA_VERSION = '1.22';

/**
 * The max document length of the clients that observe log messages: large, as the command logging spec's test README
 * requires of its logging tests (and harmless to the other logging tests, which match no truncated text).
 */
const UNIFIED_MAX_DOCUMENT_LENGTH = 10_000;

/** An event a client entity observed, under the format's name, with the fields its expectations can name. */
interface Observed {
  readonly name: string;
  readonly category: 'command' | 'cmap' | 'sdam';
  readonly fields: Document;
}

/** What a client entity holds: its client, what it observed, and the fail points set through it. */
class ClientEntity {
  readonly observed: Observed[] = [];
  /** The server (`host:port`) each operation's first command went to, by operationId (a find's, a fail point's). */
  readonly operationServers = new Map<number, string>();
  /** The write concern of the client's `uriOptions` (`w`, `journal`, `wTimeoutMS`), undefined for the server's default. */
  readonly writeConcern: Document | undefined;
  private readonly subscriptions: { unsubscribe(): void }[] = [];
  constructor(
    readonly client: Client,
    readonly uri: string,
    spec: Document,
    /** The log messages the client wrote while observed, in order (its sink's), and whether it is still observed. */
    private readonly log: { readonly messages: LogMessage[]; open: boolean },
  ) {
    const uriOptions = new Map(Object.entries((spec.uriOptions as Document | undefined) ?? {}).map(([key, value]) => [key.toLowerCase(), value as unknown]));
    const writeConcern = Object.fromEntries(
      ([['w', 'w'], ['journal', 'j'], ['wtimeoutms', 'wtimeout']] as const).filter(([option]) => uriOptions.has(option)).map(([option, field]) => [field, uriOptions.get(option)]),
    );
    this.writeConcern = Object.keys(writeConcern).length === 0 ? undefined : writeConcern;
    const observe = new Set<string>((spec.observeEvents as string[] | undefined) ?? []);
    // configureFailPoint is never observed (the format's default), nor the commands the test names.
    const ignoredCommands = new Set<string>(['configurefailpoint', ...((spec.ignoreCommandMonitoringEvents as string[] | undefined) ?? []).map((n) => n.toLowerCase())]);
    const sensitive = spec.observeSensitiveCommands === true;
    if (spec.storeEventsAsEntities !== undefined) throw new Error('storeEventsAsEntities is not supported by this runner');
    for (const name of observe) if (!KNOWN_EVENTS.has(name)) throw new Error(`observeEvents: ${name} is not an event this runner knows`);
    // The requestIds of the sensitive commands left out, so that their replies or failures are left out too (a
    // redacted reply of a hello with speculativeAuthenticate does not tell it was one).
    const sensitiveRequests = new Set<number>();
    const keep = (event: Observed | undefined): void => {
      if (event !== undefined && observe.has(event.name)) this.observed.push(event);
    };
    this.subscriptions.push(
      client.events$.subscribe((event) => keep(observedOf(event))),
      client.topologyEvents$.subscribe((event) => keep(observedOf(event))),
      client.commandEvents$.subscribe((event) => {
        // The server of each operation's first command: where a find's cursor lives, where a fail point was set.
        if (event.type === 'CommandStarted' && event.operationId !== undefined && !this.operationServers.has(event.operationId)) this.operationServers.set(event.operationId, event.address);
        if (ignoredCommands.has(event.commandName.toLowerCase())) return;
        if (!sensitive) {
          if (event.type === 'CommandStarted' ? isSensitiveEvent(event) : sensitiveRequests.delete(event.requestId) || isSensitiveEvent(event)) {
            if (event.type === 'CommandStarted') sensitiveRequests.add(event.requestId);
            return;
          }
        }
        keep(observedOf(event));
      }),
    );
  }
  /** The log messages the client wrote until its observation stopped. */
  get logs(): readonly LogMessage[] {
    return this.log.messages;
  }

  /** Stops collecting events and log messages ("Executing a Test": listeners are disabled once the operations end). */
  stopObserving(): void {
    for (const s of this.subscriptions) s.unsubscribe();
    this.log.open = false;
  }
}

/** The command names whose events the command monitoring spec redacts (kept out unless observeSensitiveCommands). */
function isSensitiveEvent(event: CommandEvent): boolean {
  const command = event.type === 'CommandStarted' ? event.command : {};
  // A redacted command is published as {}: its name tells it was sensitive.
  return isSensitiveCommand(event.commandName, command) || (event.type === 'CommandStarted' && Object.keys(event.command).length === 0);
}

/** An event of the client's three streams (`events$`, `topologyEvents$`, `commandEvents$`). */
type ClientStreamEvent = ClientEvent | TopologyEvent | CommandEvent;

/** How the format names one event type: its name, its category, and the fields its expectations can name. */
interface EventMapping<E> {
  readonly name: string;
  readonly category: Observed['category'];
  readonly fields?: (event: E) => Document;
}

const commandFields = (event: CommandEvent): Document => ({
  commandName: event.commandName,
  databaseName: event.databaseName,
  hasServiceId: event.serviceId !== undefined,
  hasServerConnectionId: event.serverConnectionId !== undefined,
});

/**
 * The client's events the format names ("expectedCmapEvent", "expectedSdamEvent", "expectedCommandEvent"), by type:
 * the pool's extension events and ServerOpening/ServerClosed (which the format does not name) are not among them.
 */
const EVENTS: { readonly [T in ClientStreamEvent['type']]?: EventMapping<Extract<ClientStreamEvent, { type: T }>> } = {
  ConnectionPoolCreated: { name: 'poolCreatedEvent', category: 'cmap' },
  ConnectionPoolReady: { name: 'poolReadyEvent', category: 'cmap' },
  ConnectionPoolCleared: { name: 'poolClearedEvent', category: 'cmap', fields: (e) => ({ hasServiceId: e.serviceId !== undefined, interruptInUseConnections: e.interruptInUseConnections }) },
  ConnectionPoolClosed: { name: 'poolClosedEvent', category: 'cmap' },
  ConnectionCreated: { name: 'connectionCreatedEvent', category: 'cmap' },
  ConnectionReady: { name: 'connectionReadyEvent', category: 'cmap' },
  ConnectionClosed: { name: 'connectionClosedEvent', category: 'cmap', fields: (e) => ({ reason: e.reason }) },
  ConnectionCheckOutStarted: { name: 'connectionCheckOutStartedEvent', category: 'cmap' },
  ConnectionCheckOutFailed: { name: 'connectionCheckOutFailedEvent', category: 'cmap', fields: (e) => ({ reason: e.reason }) },
  ConnectionCheckedOut: { name: 'connectionCheckedOutEvent', category: 'cmap' },
  ConnectionCheckedIn: { name: 'connectionCheckedInEvent', category: 'cmap' },
  ServerHeartbeatStarted: { name: 'serverHeartbeatStartedEvent', category: 'sdam', fields: (e) => ({ awaited: e.awaited }) },
  ServerHeartbeatSucceeded: { name: 'serverHeartbeatSucceededEvent', category: 'sdam', fields: (e) => ({ awaited: e.awaited }) },
  ServerHeartbeatFailed: { name: 'serverHeartbeatFailedEvent', category: 'sdam', fields: (e) => ({ awaited: e.awaited }) },
  TopologyOpening: { name: 'topologyOpeningEvent', category: 'sdam' },
  TopologyClosed: { name: 'topologyClosedEvent', category: 'sdam' },
  ServerDescriptionChanged: {
    name: 'serverDescriptionChangedEvent',
    category: 'sdam',
    fields: (e) => ({ previousDescription: { type: e.previousDescription.type }, newDescription: { type: e.newDescription.type } }),
  },
  TopologyDescriptionChanged: {
    name: 'topologyDescriptionChangedEvent',
    category: 'sdam',
    fields: (e) => ({ previousDescription: { type: e.previousDescription.type }, newDescription: { type: e.newDescription.type } }),
  },
  CommandStarted: { name: 'commandStartedEvent', category: 'command', fields: (e) => ({ ...commandFields(e), command: e.command }) },
  CommandSucceeded: { name: 'commandSucceededEvent', category: 'command', fields: (e) => ({ ...commandFields(e), reply: e.reply }) },
  CommandFailed: { name: 'commandFailedEvent', category: 'command', fields: commandFields },
};

/** The names `observeEvents` may list: those of {@link EVENTS}. */
const KNOWN_EVENTS = new Set(Object.values(EVENTS).map((mapping) => mapping.name));

/** An event as the format names it, with its fields; undefined for one the format does not name. */
function observedOf(event: ClientStreamEvent): Observed | undefined {
  const mapping = EVENTS[event.type] as EventMapping<typeof event> | undefined;
  return mapping === undefined ? undefined : { name: mapping.name, category: mapping.category, fields: mapping.fields?.(event) ?? {} };
}

/** An event expectation (`{ <name>: { ...fields } }`) against an observed event. */
function eventMismatch(expected: Document, actual: Observed): string | undefined {
  const entries = Object.entries(expected);
  if (entries.length !== 1) throw new Error(`an expected event names exactly one event, not ${entries.length}: ${JSON.stringify(expected)}`);
  const [name, fields] = entries[0] as [string, Document];
  if (name !== actual.name) return `expected ${name}, got ${actual.name}`;
  return matchWithRoots(fields ?? {}, actual.fields, ['command', 'reply', 'previousDescription', 'newDescription']);
}

/**
 * `expected` against `actual` as a root-level document whose fields named in `roots` are root-level documents too
 * (an event's `command` and `reply`, a log message's `data`: "Allowing Extra Fields").
 */
function matchWithRoots(expected: Document, actual: Document, roots: readonly string[]): string | undefined {
  const rest: Document = {};
  for (const [key, value] of Object.entries(expected)) {
    if (!roots.includes(key) || (typeof value === 'object' && value !== null && Object.keys(value as Document)[0]?.startsWith('$$'))) {
      rest[key] = value;
      continue;
    }
    if (actual[key] === undefined) return `${key}: missing`;
    const mismatch = match(value, actual[key], true, key);
    if (mismatch !== undefined) return mismatch;
  }
  return match(rest, actual);
}

function matchingEvents(entity: ClientEntity, expected: Document): Observed[] {
  return entity.observed.filter((event) => eventMismatch(expected, event) === undefined);
}

/** The options of a find operation sent as the find command's fields of the same name (CRUD spec, "Find"). */
const FIND_OPTIONS = ['sort', 'limit', 'skip', 'batchSize', 'projection', 'comment', 'hint', 'max', 'min', 'maxTimeMS', 'returnKey', 'showRecordId'] as const;

/** The operations this runner runs, by entity kind, with the arguments each takes (any other is an error). */
const ARGUMENTS: Readonly<Record<string, readonly string[]>> = {
  'testRunner.createEntities': ['entities'],
  'testRunner.failPoint': ['client', 'failPoint'],
  'testRunner.wait': ['ms'],
  'testRunner.waitForEvent': ['client', 'event', 'count'],
  'testRunner.assertEventCount': ['client', 'event', 'count'],
  'testRunner.runOnThread': ['thread', 'operation'],
  'testRunner.waitForThread': ['thread'],
  'testRunner.recordTopologyDescription': ['client', 'id'],
  'testRunner.assertTopologyType': ['topologyDescription', 'topologyType'],
  'testRunner.waitForPrimaryChange': ['client', 'priorTopologyDescription', 'timeoutMS'],
  'client.close': [],
  'client.listDatabases': ['filter', 'nameOnly', 'authorizedDatabases'],
  'client.clientBulkWrite': ['models', 'ordered', 'verboseResults'],
  'database.runCommand': ['command', 'commandName', 'readPreference'],
  'collection.insertOne': ['document'],
  'collection.insertMany': ['documents', 'ordered'],
  'collection.updateOne': ['filter', 'update', 'upsert'],
  'collection.updateMany': ['filter', 'update', 'upsert'],
  'collection.deleteOne': ['filter'],
  'collection.deleteMany': ['filter'],
  'collection.bulkWrite': ['requests', 'ordered'],
  'collection.find': ['filter', ...FIND_OPTIONS],
};

/** The operations whose result is an iterable of documents, each of them a root-level document ("Evaluating Matches"). */
const ITERABLE_RESULTS = new Set(['find', 'listDatabases']);

function matchEach(expected: readonly unknown[], actual: readonly unknown[]): string | undefined {
  if (actual.length !== expected.length) return `the value: expected ${expected.length} elements, got ${actual.length}`;
  for (let i = 0; i < expected.length; i++) {
    const mismatch = match(expected[i], actual[i], true, `[${i}]`);
    if (mismatch !== undefined) return mismatch;
  }
  return undefined;
}

/** The keys each entity kind takes (any other is an error: a setting the runner would not apply). */
const ENTITY_KEYS: Readonly<Record<string, readonly string[]>> = {
  client: ['id', 'uriOptions', 'useMultipleMongoses', 'observeEvents', 'ignoreCommandMonitoringEvents', 'observeSensitiveCommands', 'observeLogMessages', 'storeEventsAsEntities'],
  database: ['id', 'client', 'databaseName', 'databaseOptions'],
  collection: ['id', 'database', 'collectionName', 'collectionOptions'],
  thread: ['id'],
  session: ['id', 'client', 'sessionOptions'],
};

/** A database entity: its client, its name, the read preference and write concern its collections inherit. */
interface DatabaseEntity {
  readonly kind: 'database';
  readonly client: ClientEntity;
  readonly name: string;
  readonly readPreference: Document | undefined;
  readonly writeConcern: Document | undefined;
}

/** A collection entity: its client, database, name, and the read preference and write concern its operations use. */
interface CollectionEntity {
  readonly kind: 'collection';
  readonly client: ClientEntity;
  readonly db: string;
  readonly name: string;
  readonly readPreference: Document | undefined;
  readonly writeConcern: Document | undefined;
}

/** The read preference and write concern of a `databaseOptions` or `collectionOptions`; any other option is an error. */
function entityOptions(options: unknown, what: string): { readPreference?: Document; writeConcern?: Document } {
  if (options === undefined) return {};
  for (const key of Object.keys(options as Document)) if (key !== 'readPreference' && key !== 'writeConcern') throw new UnrunnableError(`${what}: option ${key} is not supported by this runner`);
  const { readPreference, writeConcern } = options as { readPreference?: Document; writeConcern?: Document };
  return { ...(readPreference === undefined ? {} : { readPreference: readPreferenceOf(readPreference, what) }), ...(writeConcern === undefined ? {} : { writeConcern: writeConcernOf(writeConcern, what) }) };
}

/**
 * A write concern as the format writes one (`w`, `journal`, `wtimeoutMS`: "commonOptions_writeConcern") as a command's
 * `writeConcern` field has it (`w`, `j`, `wtimeout`); any other field is an error.
 */
export function writeConcernOf(given: Document, what: string): Document {
  const fields: Record<string, string> = { w: 'w', journal: 'j', wtimeoutMS: 'wtimeout' };
  const out: Document = {};
  for (const [key, value] of Object.entries(given)) {
    if (fields[key] === undefined) throw new UnrunnableError(`${what}: write concern field ${key} is not supported by this runner`);
    out[fields[key]] = value;
  }
  return out;
}

/**
 * A read preference as the format writes one (the server selection spec's form: `mode` in any case, `Secondary` or
 * `SECONDARY` say, read as the mode of that name; `tagSets`; `maxStalenessSeconds`) as rxcmap's `readPreference`
 * option takes it (`{ mode: 'secondary', tags }`); any other field is an error.
 */
export function readPreferenceOf(given: Document, what: string): Document {
  const out: Document = {};
  for (const [key, value] of Object.entries(given)) {
    if (key === 'mode') out.mode = typeof value === 'string' ? (READ_PREFERENCE_MODES.find((mode) => mode.toLowerCase() === value.toLowerCase()) ?? value) : value;
    else if (key === 'tagSets' || key === 'tags') out.tags = value;
    else if (key === 'maxStalenessSeconds') out.maxStalenessSeconds = value;
    else throw new UnrunnableError(`${what}: read preference field ${key} is not supported by this runner`);
  }
  return out;
}

/**
 * A session entity: created as a driver creates one (nothing is sent), but sessions are not this runner's, so an
 * operation that names one is an error (its tests are pending).
 */
class SessionEntity {}

/** A thread entity: the operations given to it run one after another, apart from the test's own. */
class ThreadEntity {
  done: Promise<void> = Promise.resolve();
  error: unknown;
  /** Whether a waitForThread failed the test with {@link error} already. */
  reported = false;
}

/** `error` named as the failure of an operation run on thread `id`. */
function threadFailure(id: string, error: unknown): Error {
  return new Error(`thread ${id}: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`, { cause: error });
}

type Entity = ClientEntity | DatabaseEntity | CollectionEntity | ThreadEntity | SessionEntity | TopologyDescription | unknown;

/** `documents` each with an `_id`, a new ObjectId where it has none, as drivers add one (CRUD spec, "insert"). */
function withIds(documents: readonly Document[]): Document[] {
  return documents.map((document) => (document._id === undefined ? { _id: new ObjectId(), ...document } : document));
}

/**
 * An update's `update` or a replacement's `replacement`, checked as drivers check it (CRUD spec, "Update vs. Replace
 * Validation"; "Client Bulk Write", the same for its models): an update that is empty or whose first field is not an
 * atomic modifier (a pipeline aside), or a replacement whose first field is one, is refused with a client error
 * (thrown), nothing sent.
 */
function checkedUpdate(u: unknown, replace: boolean): unknown {
  const atomic = typeof u === 'object' && u !== null && !Array.isArray(u) && (Object.keys(u)[0]?.startsWith('$') ?? false);
  if (replace ? atomic : !atomic && !Array.isArray(u)) throw new Error(replace ? 'replacement document must not contain atomic operators' : 'update document requires atomic operators');
  return u;
}

/**
 * The update statement of an updateOne or updateMany request (`filter`, `update`, `upsert`), or of a replaceOne
 * (`filter`, `replacement`, `upsert`), its document checked by {@link checkedUpdate}.
 */
function updateStatement(request: Document, multi: boolean, replace = false): Document {
  const u = checkedUpdate(request[replace ? 'replacement' : 'update'], replace);
  return { q: request.filter, u, ...(multi ? { multi: true } : {}), ...(request.upsert === undefined ? {} : { upsert: request.upsert }) };
}

/** The write models of bulkWrite and clientBulkWrite this runner sends, with the fields each takes (CRUD spec). */
const WRITE_MODEL_FIELDS: Readonly<Record<string, readonly string[]>> = {
  insertOne: ['document'],
  updateOne: ['filter', 'update', 'upsert'],
  updateMany: ['filter', 'update', 'upsert'],
  replaceOne: ['filter', 'replacement', 'upsert'],
  deleteOne: ['filter'],
  deleteMany: ['filter'],
};

/**
 * The one write model `request` names (`{ insertOne: { document } }`, say) and its fields, for operation `what`,
 * whose models may also have the fields `extra` (clientBulkWrite's `namespace`). A request naming more or fewer than
 * one, a model or a field the runner does not send (a `hint`, a `collation`) is an {@link UnrunnableError}.
 */
function writeModel(request: Document, what: string, extra: readonly string[] = []): [string, Document] {
  const entries = Object.entries(request);
  if (entries.length !== 1) throw new UnrunnableError(`${what}: a request names one write model, not ${entries.length}`);
  const [model, given] = entries[0] as [string, Document];
  const fields = WRITE_MODEL_FIELDS[model];
  if (fields === undefined) throw new UnrunnableError(`${what}: write model ${model} is not supported by this runner`);
  for (const key of Object.keys(given)) if (!fields.includes(key) && !extra.includes(key)) throw new UnrunnableError(`${what}: ${model} option ${key} is not supported by this runner`);
  return [model, given];
}

/**
 * A test the runner cannot run as written: an operation, argument, option or entity it does not support or cannot
 * find. It fails the test whatever the operation expects: it never stands for the error an `expectError` names (a
 * client error, say), nor is it ignored by `ignoreResultAndError`.
 */
export class UnrunnableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnrunnableError';
  }
}

/** The error a write's reply reports (a write error or a write concern error), as a driver throws it. */
export class WriteError extends Error {
  constructor(
    readonly code: number | undefined,
    readonly codeName: string | undefined,
    readonly errorLabels: readonly string[],
    message: string,
  ) {
    super(message);
    this.name = 'WriteError';
  }
}

/** Whether a write concern asks for no acknowledgement (`w: 0` without `j: true`). */
function isUnacknowledged(writeConcern: Document | undefined): boolean {
  return writeConcern?.w === 0 && writeConcern.j !== true;
}

/**
 * Sends write `command` on `db` through `client` with `writeConcern` (none: the server's default) under `operationId`:
 * an unacknowledged one (see {@link isUnacknowledged}) with the moreToCome flag the OP_MSG spec requires of it, and
 * undefined for its reply (none is read); otherwise its reply as it is (write errors and write concern error unread).
 */
async function sendWrite(client: ClientEntity, db: string, command: Document, writeConcern: Document | undefined, operationId: number): Promise<Document | undefined> {
  const unacknowledged = isUnacknowledged(writeConcern);
  const sent = writeConcern === undefined ? command : { ...command, writeConcern };
  const reply = await client.client.command(db, sent, { operationId, ...(unacknowledged ? { moreToCome: true } : {}) });
  return unacknowledged ? undefined : reply;
}

function writeReply(reply: Document): Document {
  const writeErrors = reply.writeErrors as Document[] | undefined;
  if (writeErrors !== undefined && writeErrors.length > 0) {
    const first = writeErrors[0]!;
    throw new WriteError(first.code as number, first.codeName as string | undefined, (reply.errorLabels as string[] | undefined) ?? [], String(first.errmsg));
  }
  const concern = reply.writeConcernError as Document | undefined;
  if (concern !== undefined) {
    throw new WriteError(concern.code as number, concern.codeName as string | undefined, (reply.errorLabels as string[] | undefined) ?? (concern.errorLabels as string[] | undefined) ?? [], String(concern.errmsg));
  }
  return reply;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits for `condition` up to `timeoutMS` (the specs' {@link eventually}); throws `failure()`'s message then. */
async function waitUntil(condition: () => boolean, timeoutMS: number, failure: () => string): Promise<void> {
  if (!(await eventually(condition, timeoutMS))) throw new Error(failure());
}

/** How a run waits: `waitTimeoutMS` bounds waitForEvent and waitForThread (the format's 10 s by default). */
export interface RunOptions {
  readonly waitTimeoutMS?: number;
  /** Called once the operations ended and observation stopped, with the test's clients (for the runner's own tests). */
  readonly afterOperations?: (clients: readonly Client[]) => Promise<void>;
  /** Called with each client entity's client as it is created, before it sends anything (for the runner's own tests). */
  readonly clientCreated?: (client: Client) => void;
}

/** Runs the tests of one file's test against one deployment. */
export class UnifiedTestRun {
  private readonly entities = new Map<string, Entity>();
  private readonly failPoints: { uri: string; name: string }[] = [];
  private readonly clients: ClientEntity[] = [];
  /** The ID of the next operation sent (a collection's or client's, see {@link collectionOperation}; a fail point's). */
  private nextOperationId = 1;
  /** Whether the test may configure a fail point (see "Executing a Test": heartbeatFrequencyMS). */
  private readonly configuresFailPoints: boolean;

  constructor(
    private readonly file: UnifiedFile,
    private readonly test: UnifiedTest,
    private readonly deployment: Deployment,
    private readonly options: RunOptions = {},
  ) {
    this.configuresFailPoints = JSON.stringify(test.operations).includes('"failPoint"');
  }

  /** How long waitForEvent and waitForThread wait ("waitForEvent", "waitForThread": 10 seconds). */
  private get waitTimeoutMS(): number {
    return this.options.waitTimeoutMS ?? 10_000;
  }

  /** Why this test does not run on the deployment (requirements, skipReason); undefined when it runs. */
  static skip(file: UnifiedFile, test: UnifiedTest, deployment: Deployment): string | undefined {
    UnifiedTestRun.checkSchema(file);
    if (test.skipReason !== undefined) return test.skipReason;
    for (const requirements of [file.runOnRequirements, test.runOnRequirements]) {
      if (requirements === undefined) continue;
      const reasons = requirements.map((r) => unmet(r, deployment));
      if (reasons.every((r) => r !== undefined)) return reasons.join('; ');
    }
    return undefined;
  }

  /**
   * Throws for a file this runner cannot read: a schema version newer than it supports, or of another major version
   * ("Test Runner Support": an error, not a skipped test).
   */
  static checkSchema(file: UnifiedFile): void {
    const [major] = file.schemaVersion.split('.');
    if (major !== SUPPORTED_SCHEMA_VERSION.split('.')[0] || compareSchema(file.schemaVersion, SUPPORTED_SCHEMA_VERSION) > 0) {
      throw new Error(`schema version ${file.schemaVersion} is not supported by this runner (it reads 1.0 to ${SUPPORTED_SCHEMA_VERSION})`);
    }
  }

  /** Runs the test: initial data, entities, operations, then its expectations; always cleans up. */
  async run(): Promise<void> {
    UnifiedTestRun.checkSchema(this.file);
    try {
      await this.loadInitialData();
      await this.createEntities(this.file.createEntities ?? []);
      for (const operation of this.test.operations) await this.operate(operation);
      // A thread still running is waited for as waitForThread waits, so that its failure cannot come after the test
      // passed; an operation that failed on a thread fails the test, waited for or not ("runOnThread").
      await this.settleThreads(true);
      for (const [id, entity] of this.entities) if (entity instanceof ThreadEntity && entity.error !== undefined && !entity.reported) throw threadFailure(id, entity.error);
      for (const entity of this.clients) entity.stopObserving();
      await this.options.afterOperations?.(this.clients.map((entity) => entity.client));
      await this.disableFailPoints();
      this.checkEvents();
      this.checkLogMessages();
      await this.checkOutcome();
    } finally {
      await this.cleanUp();
    }
  }

  private async withSetupClient<T>(uri: string, work: (client: Client) => Promise<T>): Promise<T> {
    const client = connect(uri, { serverSelectionTimeoutMS: 10_000 });
    try {
      return await work(client);
    } finally {
      await client.close();
    }
  }

  private async loadInitialData(): Promise<void> {
    const data = this.file.initialData ?? [];
    if (data.length === 0) return;
    await this.withSetupClient(this.deployment.uri(false), async (client) => {
      for (const { collectionName, databaseName, documents, createOptions } of data) {
        await client.command(databaseName, { drop: collectionName, writeConcern: { w: 'majority' } }).catch((error: unknown) => {
          if (!(error instanceof MongoServerError && error.code === 26)) throw error;
        });
        if (documents.length > 0) writeReply(await client.command(databaseName, { insert: collectionName, documents, writeConcern: { w: 'majority' } }));
        else await client.command(databaseName, { create: collectionName, ...createOptions, writeConcern: { w: 'majority' } });
      }
    });
  }

  /**
   * Turns off every fail point the test set, on the server it was set on (through a client of the same URI); one that
   * cannot be turned off does not leave the others on (the first error is thrown once all were tried).
   */
  private async disableFailPoints(): Promise<void> {
    const errors: unknown[] = [];
    for (const { uri, name } of this.failPoints.splice(0)) {
      await this.withSetupClient(uri, (client) => client.command('admin', { configureFailPoint: name, mode: 'off' })).catch((error: unknown) => errors.push(error));
    }
    if (errors.length > 0) throw errors[0];
  }

  /**
   * Waits for the threads' operations to end, each up to the waitForThread timeout. With `strict`, a thread still
   * running then fails the test; without, it is left (the test failed already, its clients are closed).
   */
  private async settleThreads(strict: boolean): Promise<void> {
    for (const [id, entity] of this.entities) {
      if (!(entity instanceof ThreadEntity)) continue;
      if (!(await this.threadEnds(entity)) && strict) throw new Error(`thread ${id} still runs ${this.waitTimeoutMS} ms after the test's last operation`);
    }
  }

  /** Whether `thread`'s operations end within the waitForThread timeout ("waitForThread": 10 seconds). */
  private async threadEnds(thread: ThreadEntity): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const finished = await Promise.race([
      thread.done.then(() => true),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), this.waitTimeoutMS))),
    ]);
    clearTimeout(timer);
    return finished;
  }

  /** After the test, passed or failed: no fail point left on, every client closed. */
  private async cleanUp(): Promise<void> {
    for (const entity of this.clients) entity.stopObserving();
    const errors: unknown[] = [];
    await this.disableFailPoints().catch((error: unknown) => errors.push(error));
    await Promise.all(this.clients.map((entity) => entity.client.close().catch((error: unknown) => errors.push(error))));
    // A thread's operation is not left running past the test (its client is closed: it ends soon).
    await this.settleThreads(false);
    if (errors.length > 0) throw errors[0];
  }

  private entity<T>(id: string, what: string, is: (entity: Entity) => entity is T): T {
    const entity = this.entities.get(id);
    if (entity === undefined || !is(entity)) throw new UnrunnableError(`entity ${id} is not a ${what}`);
    return entity;
  }

  private clientEntity(id: string): ClientEntity {
    return this.entity(id, 'client', (e): e is ClientEntity => e instanceof ClientEntity);
  }

  private async createEntities(list: readonly Document[]): Promise<void> {
    for (const item of list) {
      const [kind, spec] = Object.entries(item)[0] as [string, Document];
      const id = spec.id as string;
      if (this.entities.has(id)) throw new Error(`entity ${id} exists already`);
      const known = ENTITY_KEYS[kind];
      if (known === undefined) throw new Error(`entity kind ${kind} is not supported by this runner`);
      for (const key of Object.keys(spec)) if (!known.includes(key)) throw new Error(`${kind} entity ${id}: ${key} is not supported by this runner`);
      switch (kind) {
        case 'client': {
          const uriOptions = { ...(spec.uriOptions as Document | undefined) };
          // The format's MAY: a client of a test that may configure a fail point checks its server every 500 ms unless
          // its uriOptions say otherwise, so that it finds the server again soon after the failure.
          if (this.configuresFailPoints && !Object.keys(uriOptions).some((key) => key.toLowerCase() === 'heartbeatfrequencyms')) uriOptions.heartbeatFrequencyMS = 500;
          const uri = withUriOptions(this.deployment.uri(spec.useMultipleMongoses === true), uriOptions);
          const severities = spec.observeLogMessages as Record<string, string> | undefined;
          const log = { messages: [] as LogMessage[], open: true };
          const write = (message: unknown): void => {
            if (log.open) log.messages.push(message as LogMessage);
          };
          // A large max document length (command logging spec, tests/README.md: "Drivers MUST run the logging tests
          // with their max document length setting set to a large value e.g. 10,000"), so that a reply is logged whole
          // and can be matched as a document.
          const logging = { componentSeverities: severities as never, path: { write }, maxDocumentLength: UNIFIED_MAX_DOCUMENT_LENGTH };
          const client = connect(uri, severities === undefined ? {} : { logging });
          this.options.clientCreated?.(client);
          const entity = new ClientEntity(client, uri, spec, log);
          this.clients.push(entity);
          this.entities.set(id, entity);
          break;
        }
        case 'database': {
          const client = this.clientEntity(spec.client as string);
          const { readPreference, writeConcern } = entityOptions(spec.databaseOptions, `database ${id}`);
          // A database writes with its own write concern, else its client's (the URI's w).
          this.entities.set(id, { kind: 'database', client, name: spec.databaseName as string, readPreference, writeConcern: writeConcern ?? client.writeConcern });
          break;
        }
        case 'collection': {
          const database = this.entities.get(spec.database as string) as DatabaseEntity | undefined;
          if (database?.kind !== 'database') throw new Error(`entity ${String(spec.database)} is not a database`);
          // A collection reads and writes with its own read preference and write concern, else its database's (CRUD
          // spec, "Read Preference"; read/write concern spec, "Write Concern": inherited).
          const options = entityOptions(spec.collectionOptions, `collection ${id}`);
          const readPreference = options.readPreference ?? database.readPreference;
          const writeConcern = options.writeConcern ?? database.writeConcern;
          this.entities.set(id, { kind: 'collection', client: database.client, db: database.name, name: spec.collectionName as string, readPreference, writeConcern });
          break;
        }
        case 'thread':
          this.entities.set(id, new ThreadEntity());
          break;
        case 'session':
          this.clientEntity(spec.client as string);
          this.entities.set(id, new SessionEntity());
          break;
        default:
          throw new Error(`entity kind ${kind} is not supported by this runner`);
      }
    }
  }

  /** Runs one operation and checks its result or error. */
  async operate(operation: Operation): Promise<void> {
    if (operation.object === 'testRunner') {
      // "Special Test Operations": they return nothing, and never name an expected result or error.
      for (const key of ['expectError', 'expectResult', 'saveResultAsEntity', 'ignoreResultAndError'] as const) {
        if (operation[key] !== undefined) throw new Error(`${operation.name} on testRunner: a test runner operation takes no ${key}`);
      }
    }
    let result: unknown;
    let error: unknown;
    let failed = false;
    try {
      result = await this.execute(operation);
    } catch (e) {
      // The runner's own refusal is never the error a test expects.
      if (e instanceof UnrunnableError) throw e;
      error = e;
      failed = true;
    }
    if (operation.object === 'testRunner') {
      if (failed) throw error;
      return;
    }
    if (operation.expectError !== undefined) {
      if (!failed) throw new Error(`${operation.name} on ${operation.object}: expected an error, got ${JSON.stringify(result)}`);
      checkError(operation.expectError, error, operation.name);
      return;
    }
    if (failed) {
      if (operation.ignoreResultAndError === true) return;
      throw error;
    }
    if (operation.expectResult !== undefined) {
      // The documents of an iterable result (find) are root-level documents each, in a list of exact length.
      const iterable = ITERABLE_RESULTS.has(operation.name) && Array.isArray(operation.expectResult) && Array.isArray(result);
      const mismatch = iterable ? matchEach(operation.expectResult as unknown[], result as unknown[]) : match(operation.expectResult, result);
      if (mismatch !== undefined) throw new Error(`${operation.name}: result ${mismatch}`);
    }
    if (operation.saveResultAsEntity !== undefined) this.entities.set(operation.saveResultAsEntity, result);
  }

  private async execute(operation: Operation): Promise<unknown> {
    const args = operation.arguments ?? {};
    const target = this.entities.get(operation.object) as { kind?: string } | ClientEntity | undefined;
    if (operation.object !== 'testRunner' && target === undefined) throw new UnrunnableError(`${operation.name} on ${operation.object}: no entity ${operation.object}`);
    const kind = operation.object === 'testRunner' ? 'testRunner' : target instanceof ClientEntity ? 'client' : target?.kind;
    const allowed = ARGUMENTS[`${String(kind)}.${operation.name}`];
    if (allowed === undefined) throw new UnrunnableError(`operation ${operation.name} on ${operation.object} (${String(kind)}) is not supported by this runner`);
    for (const key of Object.keys(args)) if (!allowed.includes(key)) throw new UnrunnableError(`operation ${operation.name}: argument ${key} is not supported by this runner`);
    if (operation.object === 'testRunner') return this.runTestRunnerOperation(operation.name, args);
    if (target instanceof ClientEntity) {
      switch (operation.name) {
        case 'close':
          await target.client.close();
          return undefined;
        case 'listDatabases':
          return ((await target.client.command('admin', { listDatabases: 1, ...args })).databases as Document[]) ?? [];
        case 'clientBulkWrite':
          return this.clientBulkWrite(target, args);
        default:
          throw new UnrunnableError(`client operation ${operation.name} is not supported by this runner`);
      }
    }
    if (target?.kind === 'database') {
      const database = target as DatabaseEntity;
      if (operation.name !== 'runCommand') throw new UnrunnableError(`database operation ${operation.name} is not supported by this runner`);
      const readPreference = args.readPreference as Document | undefined;
      return database.client.client.command(database.name, args.command as Document, readPreference === undefined ? undefined : { readPreference: readPreferenceOf(readPreference, 'runCommand') as never });
    }
    if (target?.kind === 'collection') return this.collectionOperation(target as CollectionEntity, operation.name, args);
    throw new UnrunnableError(`operation ${operation.name}: no entity ${operation.object}`);
  }

  /** The commands a driver sends for the CRUD operations these tests use (CRUD spec). */
  private async collectionOperation(collection: CollectionEntity, name: string, args: Document): Promise<unknown> {
    const client = collection.client.client;
    // Each operation has an ID its commands and their server selections carry (command logging and monitoring spec,
    // "Bulk Writes": a bulk write's commands share one).
    const operationId = this.nextOperationId++;
    switch (name) {
      case 'insertOne': {
        const [document] = withIds([args.document as Document]);
        await this.write(collection, { insert: collection.name, documents: [document], ordered: true }, operationId);
        return { insertedId: document!._id };
      }
      case 'insertMany': {
        // CRUD spec, "insertMany": an empty list is a client error, nothing sent.
        if (!Array.isArray(args.documents) || args.documents.length === 0) throw new Error('insertMany: documents must be a nonempty list');
        const documents = withIds(args.documents as Document[]);
        await this.write(collection, { insert: collection.name, documents, ordered: args.ordered ?? true }, operationId);
        return { insertedIds: Object.fromEntries(documents.map((d, i) => [i, d._id])) };
      }
      case 'updateOne':
      case 'updateMany': {
        const reply = await this.write(collection, { update: collection.name, updates: [updateStatement(args, name === 'updateMany')], ordered: true }, operationId);
        if (reply === undefined) return undefined;
        // The reply's n counts an upserted document too: matchedCount does not (CRUD spec, "UpdateResult").
        const upserted = (reply.upserted as Document[] | undefined) ?? [];
        return {
          matchedCount: Number(reply.n ?? 0) - upserted.length,
          modifiedCount: reply.nModified,
          upsertedCount: upserted.length,
          ...(upserted.length === 0 ? {} : { upsertedId: upserted[0]!._id }),
        };
      }
      case 'deleteOne':
      case 'deleteMany': {
        const reply = await this.write(collection, { delete: collection.name, deletes: [{ q: args.filter, limit: name === 'deleteOne' ? 1 : 0 }], ordered: true }, operationId);
        return reply === undefined ? undefined : { deletedCount: reply.n };
      }
      case 'bulkWrite':
        return this.bulkWrite(collection, args.requests as Document[], (args.ordered as boolean | undefined) ?? true, operationId);
      case 'find': {
        const command: Document = { find: collection.name, filter: args.filter ?? {} };
        for (const key of FIND_OPTIONS) if (args[key] !== undefined) command[key] = args[key];
        // CRUD spec, "Find": a negative limit asks for one batch (the find command's limit is not negative), and a
        // batchSize equal to the limit is sent as limit + 1, or the server leaves a cursor open for nothing.
        if (Number(args.limit) < 0) Object.assign(command, { limit: -Number(args.limit), singleBatch: true });
        if (Number(command.limit) > 0 && Number(args.batchSize) === Number(command.limit)) command.batchSize = Number(command.limit) + 1;
        const options = { operationId, ...(collection.readPreference === undefined ? {} : { readPreference: collection.readPreference as never }) };
        const reply = await client.command(collection.db, command, options);
        const cursor = reply.cursor as Document;
        const documents = [...(cursor.firstBatch as Document[])];
        const limit = Math.abs(Number(args.limit ?? 0));
        let id = cursor.id;
        // A cursor's getMores go to the server its find went to, through that server's pool, as a driver's cursor
        // sends them: a new selection could pick another mongos or member, which does not know the cursor.
        const server = collection.client.operationServers.get(operationId);
        const pool = server === undefined ? undefined : client.pools.get(server);
        while (id !== undefined && Number(id) !== 0) {
          if (pool === undefined) throw new Error(`find: the server of its cursor (${String(server)}) is no longer one of the client's`);
          // A getMore asks for the batch size, or for what is left of the limit when less (CRUD spec, "Find").
          // A batchSize of 0 (the server's default) is not sent: a getMore's must be positive.
          const given = Number(args.batchSize ?? 0) > 0 ? Number(args.batchSize) : undefined;
          const batchSize = limit > 0 ? Math.min(given ?? limit, limit - documents.length) : given;
          // The id goes back as a long, which getMore requires: a reply's Long small enough is read as a number.
          const getMore: Document = { getMore: Long.isLong(id) ? id : Long.fromNumber(Number(id)), collection: collection.name, ...(batchSize === undefined ? {} : { batchSize }) };
          const more = (await pool.withConnection((connection) => connection.command(collection.db, getMore, { operationId }))).cursor as Document;
          documents.push(...(more.nextBatch as Document[]));
          id = more.id;
        }
        return documents;
      }
      default:
        throw new UnrunnableError(`collection operation ${name} is not supported by this runner`);
    }
  }

  /**
   * Sends a write command of `collection`'s with its write concern: unacknowledged (w: 0), with the moreToCome flag the
   * OP_MSG spec requires of one, and undefined for its reply (never read); otherwise its reply, a write error or write
   * concern error thrown as a driver throws it.
   */
  private async write(collection: CollectionEntity, command: Document, operationId: number): Promise<Document | undefined> {
    const reply = await this.send(collection, command, operationId);
    return reply === undefined ? undefined : writeReply(reply);
  }

  /** {@link write}'s command sent, its reply as it is (write errors and write concern error unread); undefined unacknowledged. */
  private send(collection: CollectionEntity, command: Document, operationId: number): Promise<Document | undefined> {
    return sendWrite(collection.client, collection.db, command, collection.writeConcern, operationId);
  }

  /**
   * A client bulk write as drivers send one (CRUD spec, "Client Bulk Write": MongoDB 8.0's bulkWrite command on admin):
   * each model an op naming its namespace by its index in `nsInfo`, `errorsOnly` unless `verboseResults`, with the
   * client's write concern (w: 0 sent with moreToCome, its result unset). A client error, nothing sent, as drivers
   * must: an empty list of models, an update or replacement {@link checkedUpdate} refuses, an unacknowledged one that is
   * ordered (the default) or asks for verbose results. An acknowledged one's first failed op (or its write concern
   * error) is thrown as a driver throws it; its result gives the reply's totals. The results of each op
   * (`verboseResults`) are not read: no test here asks for them.
   */
  private async clientBulkWrite(entity: ClientEntity, args: Document): Promise<Document | undefined> {
    const operationId = this.nextOperationId++;
    const nsInfo: Document[] = [];
    const nsIndex = (ns: unknown): number => {
      const at = nsInfo.findIndex((info) => info.ns === ns);
      return at >= 0 ? at : nsInfo.push({ ns }) - 1;
    };
    // CRUD spec, "Client Bulk Write": an empty list of models is a client error, nothing sent.
    if (!Array.isArray(args.models) || args.models.length === 0) throw new Error('clientBulkWrite: models must be a nonempty list');
    // CRUD spec, "Client Bulk Write", "verboseResults" and "ordered": an unacknowledged one has no results to give
    // and cannot be ordered (the server would stop at an error no reply brings), a client error, nothing sent.
    if (isUnacknowledged(entity.writeConcern) && args.verboseResults === true) throw new Error('Cannot request unacknowledged write concern and verbose results');
    if (isUnacknowledged(entity.writeConcern) && args.ordered !== false) throw new Error('Cannot request unacknowledged write concern and ordered writes');
    const ops = (args.models as Document[]).map((request) => {
      const [model, given] = writeModel(request, 'clientBulkWrite', ['namespace']);
      const upsert = given.upsert === undefined ? {} : { upsert: given.upsert };
      switch (model) {
        case 'insertOne':
          return { insert: nsIndex(given.namespace), document: withIds([given.document as Document])[0] };
        case 'updateOne':
        case 'updateMany':
          return { update: nsIndex(given.namespace), filter: given.filter, updateMods: checkedUpdate(given.update, false), multi: model === 'updateMany', ...upsert };
        case 'replaceOne':
          return { update: nsIndex(given.namespace), filter: given.filter, updateMods: checkedUpdate(given.replacement, true), multi: false, ...upsert };
        default:
          return { delete: nsIndex(given.namespace), filter: given.filter, multi: model === 'deleteMany' };
      }
    });
    const command: Document = { bulkWrite: 1, errorsOnly: args.verboseResults !== true, ordered: args.ordered ?? true, ops, nsInfo };
    const reply = await sendWrite(entity, 'admin', command, entity.writeConcern, operationId);
    if (reply === undefined) return undefined;
    const failed = ((reply.cursor as Document | undefined)?.firstBatch as Document[] | undefined)?.find((entry) => entry.ok !== 1);
    if (failed !== undefined) throw new WriteError(failed.code as number, failed.codeName as string | undefined, (reply.errorLabels as string[] | undefined) ?? [], String(failed.errmsg));
    writeReply(reply);
    return { insertedCount: reply.nInserted, upsertedCount: reply.nUpserted, matchedCount: reply.nMatched, modifiedCount: reply.nModified, deletedCount: reply.nDeleted };
  }

  /**
   * A bulk write as drivers send one (CRUD spec, "Bulk Write"): the requests grouped into one insert, update or delete
   * command per run of requests of one kind (ordered), or per kind (unordered), all with the same operationId. An
   * ordered write stops at its first write error; an unordered one sends every command and then throws its first. A
   * write concern error stops neither (the bulk API spec: "Write Concern errors should not halt the processing of
   * ordered bulk operations"): it is thrown once every command ran, unless a write error is.
   */
  private async bulkWrite(collection: CollectionEntity, requests: readonly Document[], ordered: boolean, operationId: number): Promise<Document | undefined> {
    // Each batch with the index in `requests` of each of its statements (a reply's upserted index is the batch's).
    const batches: { kind: 'insert' | 'update' | 'delete'; statements: Document[]; indices: number[] }[] = [];
    const insertedIds: Record<number, unknown> = {};
    // CRUD spec, "bulkWrite": an empty list of requests is a client error, nothing sent.
    if (!Array.isArray(requests) || requests.length === 0) throw new Error('bulkWrite: requests must be a nonempty list');
    requests.forEach((request, index) => {
      const [model, given] = writeModel(request, 'bulkWrite');
      let kind: 'insert' | 'update' | 'delete';
      let statement: Document;
      switch (model) {
        case 'insertOne':
          kind = 'insert';
          statement = withIds([given.document as Document])[0]!;
          insertedIds[index] = statement._id;
          break;
        case 'updateOne':
        case 'updateMany':
          kind = 'update';
          statement = updateStatement(given, model === 'updateMany');
          break;
        case 'replaceOne':
          kind = 'update';
          statement = updateStatement(given, false, true);
          break;
        default:
          kind = 'delete';
          statement = { q: given.filter, limit: model === 'deleteOne' ? 1 : 0 };
      }
      const batch = ordered ? batches[batches.length - 1] : batches.find((b) => b.kind === kind);
      if (batch?.kind === kind) {
        batch.statements.push(statement);
        batch.indices.push(index);
      } else batches.push({ kind, statements: [statement], indices: [index] });
    });
    const field = { insert: 'documents', update: 'updates', delete: 'deletes' } as const;
    const upsertedIds: Record<number, unknown> = {};
    const result = { insertedCount: 0, matchedCount: 0, modifiedCount: 0, deletedCount: 0, upsertedCount: 0, insertedIds, upsertedIds };
    let writeFailure: unknown;
    let concernFailure: unknown;
    for (const { kind, statements, indices } of batches) {
      const reply = await this.send(collection, { [kind]: collection.name, [field[kind]]: statements, ordered }, operationId);
      if (reply === undefined) continue;
      try {
        writeReply(reply);
      } catch (error) {
        if ((reply.writeErrors as Document[] | undefined)?.length) writeFailure ??= error;
        else concernFailure ??= error;
      }
      if (ordered && writeFailure !== undefined) break;
      const n = Number(reply.n ?? 0);
      const upserted = (reply.upserted as Document[] | undefined) ?? [];
      if (kind === 'insert') result.insertedCount += n;
      else if (kind === 'delete') result.deletedCount += n;
      else {
        result.matchedCount += n - upserted.length;
        result.modifiedCount += Number(reply.nModified ?? 0);
        result.upsertedCount += upserted.length;
        // CRUD spec, "BulkWriteResult": upsertedIds by the request's index.
        for (const { index, _id } of upserted) upsertedIds[indices[Number(index)]!] = _id;
      }
    }
    if (writeFailure !== undefined) throw writeFailure;
    if (concernFailure !== undefined) throw concernFailure;
    return isUnacknowledged(collection.writeConcern) ? undefined : result;
  }

  private async runTestRunnerOperation(name: string, args: Document): Promise<unknown> {
    switch (name) {
      case 'createEntities':
        return this.createEntities(args.entities as Document[]);
      case 'failPoint': {
        const entity = this.clientEntity(args.client as string);
        const failPoint = args.failPoint as Document;
        const operationId = this.nextOperationId++;
        await entity.client.command('admin', failPoint, { readPreference: 'primary', operationId });
        // Recorded with the server it was set on: it is turned off there, not on a server the next selection picks.
        const server = entity.operationServers.get(operationId);
        this.failPoints.push({ uri: server === undefined ? entity.uri : directUri(entity.uri, server), name: failPoint.configureFailPoint as string });
        return undefined;
      }
      case 'wait':
        return sleep(args.ms as number);
      case 'waitForEvent': {
        const entity = this.clientEntity(args.client as string);
        const event = args.event as Document;
        const count = args.count as number;
        await waitUntil(
          () => matchingEvents(entity, event).length >= count,
          this.waitTimeoutMS,
          () => `waitForEvent: ${count} ${JSON.stringify(event)} expected, ${matchingEvents(entity, event).length} seen in ${this.waitTimeoutMS} ms; observed: ${entity.observed.map((e) => e.name).join(', ')}`,
        );
        return undefined;
      }
      case 'assertEventCount': {
        const entity = this.clientEntity(args.client as string);
        const seen = matchingEvents(entity, args.event as Document).length;
        if (seen !== args.count) throw new Error(`assertEventCount: ${String(args.count)} ${JSON.stringify(args.event)} expected, ${seen} observed`);
        return undefined;
      }
      case 'runOnThread': {
        const thread = this.entity(args.thread as string, 'thread', (e): e is ThreadEntity => e instanceof ThreadEntity);
        const operation = args.operation as Operation;
        // "runOnThread": the operation is an entity operation; a test runner operation has no place on a thread.
        if (operation.object === 'testRunner') throw new Error(`runOnThread: ${operation.name} is a test runner operation, not an entity operation`);
        thread.done = thread.done.then(() => this.operate(operation)).catch((error: unknown) => {
          thread.error ??= error;
        });
        return undefined;
      }
      case 'waitForThread': {
        const thread = this.entity(args.thread as string, 'thread', (e): e is ThreadEntity => e instanceof ThreadEntity);
        if (!(await this.threadEnds(thread))) throw new Error(`waitForThread: ${String(args.thread)} still runs after ${this.waitTimeoutMS} ms`);
        if (thread.error !== undefined) {
          thread.reported = true;
          throw threadFailure(String(args.thread), thread.error);
        }
        return undefined;
      }
      case 'recordTopologyDescription':
        this.entities.set(args.id as string, this.clientEntity(args.client as string).client.topologyDescription);
        return undefined;
      case 'assertTopologyType': {
        const description = this.entities.get(args.topologyDescription as string) as TopologyDescription;
        if (description?.type !== args.topologyType) throw new Error(`assertTopologyType: ${String(args.topologyType)} expected, got ${String(description?.type)}`);
        return undefined;
      }
      case 'waitForPrimaryChange': {
        const entity = this.clientEntity(args.client as string);
        const prior = primaryOf(this.entities.get(args.priorTopologyDescription as string) as TopologyDescription);
        const timeoutMS = (args.timeoutMS as number | undefined) ?? 10_000;
        await waitUntil(
          () => {
            const now = primaryOf(entity.client.topologyDescription);
            return now !== undefined && now !== prior;
          },
          timeoutMS,
          () => `waitForPrimaryChange: the primary is still ${String(prior)} after ${timeoutMS} ms`,
        );
        return undefined;
      }
      default:
        throw new Error(`test runner operation ${name} is not supported by this runner`);
    }
  }

  private checkEvents(): void {
    for (const { client, eventType = 'command', events, ignoreExtraEvents } of this.test.expectEvents ?? []) {
      const actual = this.clientEntity(client).observed.filter((event) => event.category === eventType);
      const context = (): string => `${client} ${eventType} events: ${actual.map((e) => `${e.name}${JSON.stringify(e.fields)}`).join(', ')}`;
      // An empty list asserts that no event was observed, extra events allowed or not ("expectedEventsForClient").
      if (ignoreExtraEvents === true && events.length > 0 ? actual.length < events.length : actual.length !== events.length) {
        throw new Error(`${events.length} ${eventType} events expected, ${actual.length} observed; ${context()}`);
      }
      events.forEach((expected, i) => {
        const mismatch = eventMismatch(expected, actual[i]!);
        if (mismatch !== undefined) throw new Error(`${eventType} event ${i}: ${mismatch}; ${context()}`);
      });
    }
  }

  private checkLogMessages(): void {
    for (const { client, messages, ignoreMessages = [], ignoreExtraMessages } of this.test.expectLogMessages ?? []) {
      const actual = this.clientEntity(client)
        .logs.map(logForm)
        .filter((log) => !ignoreMessages.some((ignored) => matchWithRoots(ignored, log, ['data']) === undefined));
      const context = (): string => `${client} log: ${actual.map((l) => `${l.component}/${l.level} ${String(l.data.message)}`).join(' | ')}`;
      // An empty list asserts that no message was written, extra messages allowed or not ("expectedLogMessagesForClient").
      if (ignoreExtraMessages === true && messages.length > 0 ? actual.length < messages.length : actual.length !== messages.length) {
        throw new Error(`${messages.length} log messages expected, ${actual.length} written; ${context()}`);
      }
      messages.forEach((expected, i) => {
        const { failureIsRedacted, ...rest } = expected;
        const mismatch = matchWithRoots(rest, actual[i]!, ['data']);
        if (mismatch !== undefined) throw new Error(`log message ${i}: ${mismatch}; ${context()}`);
        if (failureIsRedacted !== undefined) {
          const failure = actual[i]!.data.failure;
          if (failure === undefined) throw new Error(`log message ${i}: failure expected`);
          if (isRedacted(failure) !== failureIsRedacted) throw new Error(`log message ${i}: failure ${failureIsRedacted === true ? 'not ' : ''}redacted: ${JSON.stringify(failure)}`);
        }
      });
    }
  }

  private async checkOutcome(): Promise<void> {
    const outcome = this.test.outcome ?? [];
    if (outcome.length === 0) return;
    await this.withSetupClient(this.deployment.uri(false), async (client) => {
      for (const { collectionName, databaseName, documents } of outcome) {
        const reply = await client.command(databaseName, { find: collectionName, filter: {}, sort: { _id: 1 } }, { readPreference: 'primary' });
        const actual = (reply.cursor as Document).firstBatch as Document[];
        const mismatch = mismatchExactly(documents, actual);
        if (mismatch !== undefined) throw new Error(`outcome of ${databaseName}.${collectionName}: ${mismatch}`);
      }
    });
  }
}

/**
 * Whether a logged failure (rxcmap's `LoggedError`) is a server error redacted as the command logging and monitoring
 * spec asks ("Security": every field but `code`, `codeName` and `errorLabels` redacted): a MongoServerError whose
 * reply (`response`) holds nothing but `ok`, `code`, `codeName` and `errorLabels`, with no cause, and whose message is
 * the one such a reply gives (not the server's `errmsg` kept past its reply). A network error, which the spec leaves as
 * it is, is not redacted.
 */
export function isRedacted(failure: unknown): boolean {
  if (typeof failure !== 'object' || failure === null) return false;
  const { type, message, response, cause } = failure as { type?: unknown; message?: unknown; response?: unknown; cause?: unknown };
  if (type !== 'MongoServerError' || cause !== undefined || typeof response !== 'string') return false;
  let reply: unknown;
  try {
    reply = JSON.parse(response);
  } catch {
    return false;
  }
  if (typeof reply !== 'object' || reply === null || !Object.keys(reply).every((key) => ['ok', 'code', 'codeName', 'errorLabels'].includes(key))) return false;
  return message === new MongoServerError(reply as Document).message;
}

/** A log message as the format's expectations name its parts: level, component, data (the structured fields). */
function logForm(message: LogMessage): { level: string; component: string; data: Document } {
  return { level: message.level, component: message.component, data: message.fields as Document };
}

/**
 * `uri` reaching `address` alone (a direct connection, the credentials and other options kept); `uri` itself when
 * it cannot be direct (a load balancer's, which has one address anyway; an SRV connection string).
 */
export function directUri(uri: string, address: string): string {
  const parts = /^(mongodb:\/\/(?:[^/@]*@)?)([^/?]+)(\/[^?]*)?(?:\?(.*))?$/.exec(uri);
  if (parts === null || /(^|&)loadBalanced=true(&|$)/i.test(parts[4] ?? '')) return uri;
  const query = (parts[4] ?? '').split('&').filter((pair) => pair !== '' && !/^(replicaSet|directConnection)=/i.test(pair));
  return withUriOptions(`${parts[1]!}${address}${parts[3] ?? '/'}${query.length === 0 ? '' : `?${query.join('&')}`}`, { directConnection: true });
}

function primaryOf(description: TopologyDescription | undefined): string | undefined {
  if (description === undefined) return undefined;
  for (const [address, server] of description.servers) if (server.type === 'RSPrimary') return address;
  return undefined;
}

function compareSchema(a: string, b: string): number {
  const x = a.split('.').map(Number);
  const y = b.split('.').map(Number);
  return (x[0]! - y[0]!) * 1000 + ((x[1] ?? 0) - (y[1] ?? 0));
}

/** Checks an operation's error against `expectError` (isError, isClientError, errorContains, errorCode, ...). */
export function checkError(expected: Document, error: unknown, operation: string): void {
  const e = error as { message?: string; code?: number; codeName?: string; errorLabels?: Iterable<string> };
  const labels = [...(e.errorLabels ?? [])];
  for (const [key, value] of Object.entries(expected)) {
    switch (key) {
      case 'isError':
        // "isError: true": the error was raised; false is not allowed.
        if (value !== true) throw new Error('expectError.isError must be true');
        break;
      case 'isClientError': {
        const isClient = !(error instanceof MongoServerError) && !(error instanceof WriteError);
        if (isClient !== value) throw new Error(`${operation}: expected ${value === true ? 'a client' : 'a server'} error, got ${String(error)}`);
        break;
      }
      case 'errorContains':
        if (!String(e.message).toLowerCase().includes(String(value).toLowerCase())) throw new Error(`${operation}: error "${String(e.message)}" does not contain "${String(value)}"`);
        break;
      case 'errorCode':
        if (e.code !== value) throw new Error(`${operation}: error code ${String(e.code)}, expected ${String(value)}`);
        break;
      case 'errorCodeName':
        if (String(e.codeName).toLowerCase() !== String(value).toLowerCase()) throw new Error(`${operation}: error code name ${String(e.codeName)}, expected ${String(value)}`);
        break;
      case 'errorLabelsContain':
        for (const label of value as string[]) if (!labels.includes(label)) throw new Error(`${operation}: error labels ${JSON.stringify(labels)} lack ${label}`);
        break;
      case 'errorLabelsOmit':
        for (const label of value as string[]) if (labels.includes(label)) throw new Error(`${operation}: error labels ${JSON.stringify(labels)} hold ${label}`);
        break;
      default:
        throw new Error(`expectError.${key} is not supported by this runner`);
    }
  }
}
