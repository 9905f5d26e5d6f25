/**
 * OpenTelemetry spans for a pool's or client's commands, made from their command events (`commandEvents$`): one span
 * of kind CLIENT per command, a child of the span active where the command was called.
 *
 * Source: MongoDB OpenTelemetry spec, "Instrumenting Server Commands" (span name, kind, attributes, exceptions,
 * `db.query.text`), "Tracer Attributes", "Security Implication"; OpenTelemetry semantic conventions v1.44.0, "Semantic
 * conventions for database client spans", "Recording errors"; command logging and monitoring spec (the events).
 */
import { context, diag, SpanKind, SpanStatusCode, type Attributes, type Span, type Tracer } from '@opentelemetry/api';
import { Binary, Long, type Document } from 'bson';
import type { Observable, Subscription } from 'rxjs';
import { isWithheld, type CommandEvent, type CommandStartedEvent } from '../connection/command-events';
import { InvalidOptionError } from '../errors';
import { exactNumber } from '../int64';
import { documentText, truncate } from '../logging/log-message';
import { optionValue, rejectUnknownOptions, type ListsEveryOption } from '../options';
import { wallClockNow } from '../scheduler';
import { addFailureAttributes, commandCollection, ServerAttributes } from './command-attributes';
import type { InstrumentedCommands } from './command-instrumentation';
import { tracerOption } from './provider-option';
import {
  ATTR_DB_COLLECTION_NAME,
  ATTR_DB_COMMAND_NAME,
  ATTR_DB_MONGODB_CURSOR_ID,
  ATTR_DB_MONGODB_DRIVER_CONNECTION_ID,
  ATTR_DB_MONGODB_LSID,
  ATTR_DB_MONGODB_SERVER_CONNECTION_ID,
  ATTR_DB_MONGODB_TXN_NUMBER,
  ATTR_DB_NAMESPACE,
  ATTR_DB_QUERY_SUMMARY,
  ATTR_DB_QUERY_TEXT,
  ATTR_DB_SYSTEM_NAME,
  ATTR_NETWORK_TRANSPORT,
  ATTR_SERVER_PORT,
  DB_SYSTEM_NAME_VALUE_MONGODB,
  NETWORK_TRANSPORT_VALUE_TCP,
  NETWORK_TRANSPORT_VALUE_UNIX,
} from './semantic-conventions';

/**
 * The environment variable whose value, an integer from 0 to 2^31 - 1 in decimal digits (blanks around it ignored), is
 * the default {@link CommandTracingOptions.queryTextMaxLength}; unset or blank, the default is 0. Any other value is
 * ignored (the default is 0) with a warning on OpenTelemetry's `diag` logger, as OpenTelemetry SDKs treat their own
 * variables: a deployment's environment never stops {@link traceCommands}.
 *
 * Source: MongoDB OpenTelemetry spec, "Environment Variables for configuring OpenTelemetry"
 * (`OTEL_#{LANG}_INSTRUMENTATION_MONGODB_QUERY_TEXT_MAX_LENGTH`, `NODE` for Node.js as in OpenTelemetry JS's own
 * `OTEL_NODE_*` variables).
 */
export const QUERY_TEXT_MAX_LENGTH_ENV = 'OTEL_NODE_INSTRUMENTATION_MONGODB_QUERY_TEXT_MAX_LENGTH';

/**
 * Options of {@link traceCommands}.
 *
 * Source: MongoDB OpenTelemetry spec, "`MongoClient` Options for configuring OpenTelemetry on the client level"
 * (`query_text_max_length`); extension: `tracer` defaults as OpenTelemetry instrumentations do.
 */
export interface CommandTracingOptions {
  /**
   * The Tracer that makes the spans. Default: `trace.getTracer('rxcmap', <version>)` of `@opentelemetry/api`, which
   * makes no-op spans until an SDK TracerProvider is registered globally.
   */
  tracer?: Tracer | undefined;
  /**
   * The max length of the command's text in `db.query.text` (UTF-16 code units), an integer from 0 to 2^31 - 1; 0
   * leaves the attribute out. A longer text is cut there and `...` is added (so the attribute holds at most that
   * length plus 3), as the logging spec's max document length cuts. Default: the value of
   * {@link QUERY_TEXT_MAX_LENGTH_ENV} when it is set to a valid one, else 0. The text holds the values of the command
   * (filters, documents): turn it on knowing where the spans go.
   */
  queryTextMaxLength?: number | undefined;
}

/**
 * The handle of traced commands: {@link unsubscribe} (or a `using` declaration) stops tracing.
 *
 * Source: extension (RxJS `Subscription.unsubscribe`, TC39 explicit resource management `Symbol.dispose`).
 */
export interface CommandTracing extends Disposable {
  /**
   * Whether tracing has ended: unsubscribed and no span left open, or the source's `commandEvents$` completed (or
   * failed).
   */
  readonly closed: boolean;
  /**
   * Stops tracing (idempotent): no span is started from then on; those open end with their commands, and then the
   * commands' events are no longer built for it.
   */
  unsubscribe(): void;
  /** The same as {@link unsubscribe}, for `using` declarations. */
  [Symbol.dispose](): void;
}

/**
 * Makes one span per command of `source` (a `ConnectionPool` or a `Client`), from its CommandStarted to its
 * CommandSucceeded or CommandFailed:
 *
 * - name: the command's name (`find`, `insert`, `getMore`), `mongodb` for a command named `''`; kind CLIENT; parent:
 *   the span active where `Connection.command` was called (the command's operation span in a driver built on
 *   rxcmap), whose async context CommandStarted is published in; start: when CommandStarted is received, with
 *   sub-millisecond precision; end: that plus the command's `duration` (so the span lasts what the command events and
 *   `db.client.operation.duration` say);
 * - attributes, given when the span starts (for samplers):
 *
 * | attribute | value |
 * | --- | --- |
 * | `db.system.name` | `mongodb` |
 * | `db.command.name` | the command's name |
 * | `db.namespace` | the database |
 * | `db.collection.name` | the collection the command names (its first value when a string, a `getMore`'s `collection`); absent on `admin` and for a command naming none (`{ ping: 1 }`, `{ aggregate: 1 }`) |
 * | `db.query.summary` | `<command> <database>.<collection>`, or `<command> <database>` |
 * | `server.address`, `server.port` | the server (no port for a Unix domain socket) |
 * | `network.transport` | `tcp`, or `unix` for a Unix domain socket |
 * | `db.mongodb.driver_connection_id`, `db.mongodb.server_connection_id` | the connection's ids (the server's when its hello gave one) |
 * | `db.mongodb.lsid` | the command's `lsid.id` as a UUID string, when it carries one |
 * | `db.mongodb.txn_number` | its `txnNumber`, when it carries one |
 * | `db.mongodb.cursor_id` | a `getMore`'s cursor, a `killCursors`' when it names one only (`cursors: [id]`), or the cursor a reply opens (`cursor.id` other than 0); added at the end for the latter |
 * | `db.query.text` | only with {@link CommandTracingOptions.queryTextMaxLength}: the command as relaxed Extended JSON without `lsid`, `$db`, `$clusterTime` and `signature` |
 *
 * - a failed command: status ERROR with the error's message, the exception recorded (an `exception` event with its
 *   class name as `exception.type`, its message and stack; the message cut at 4096 UTF-16 code units in both, the
 *   stack at 16384, `...` added where cut: a server's message can be megabytes), `error.type` (a server error's code
 *   as a string, else the error's name, as for `db.client.operation.duration`) and, for a server error,
 *   `db.response.status_code`;
 * - a sensitive command (authentication, user management, a hello carrying `speculativeAuthenticate`: their command
 *   is withheld from the events) has no span; nor have the handshake and the monitors' heartbeats, which publish no
 *   events.
 *
 * A cursor id or transaction number beyond 2^53 - 1 is given as its decimal string (a number would lose digits). A
 * span or a Tracer that throws is reported to OpenTelemetry's `diag` logger, never to the command; so is a
 * `commandEvents$` that fails (the spans open are ended, tracing with them). Tracing subscribes to `commandEvents$`,
 * so each command builds its events (the cost of tracing); with no SDK registered, spans are no-ops but the events are
 * still built: call this only to trace.
 *
 * @example
 * ```ts
 * import { trace } from '@opentelemetry/api';
 * import { connect } from 'rxcmap';
 * import { traceCommands } from 'rxcmap/opentelemetry';
 *
 * const client = connect('mongodb://localhost:27017');
 * using tracing = traceCommands(client, { tracer: trace.getTracer('my-service') });
 * ```
 *
 * @param source a `ConnectionPool` or a `Client` (anything with `commandEvents$`).
 * @param options the Tracer and the query text's length; see {@link CommandTracingOptions}.
 * @returns the handle that stops tracing.
 * @throws {InvalidOptionError} for a `source` without `commandEvents$` (option `source`), options that are not an
 *   object (option `options`), a key that is not one of its options (named, with the closest one), a `tracer` that is
 *   not an OpenTelemetry Tracer (option `tracer`), or a `queryTextMaxLength` that is not an integer from 0 to
 *   2^31 - 1 (a bad value of {@link QUERY_TEXT_MAX_LENGTH_ENV} is warned of on `diag` and ignored, not thrown).
 *
 * Source: MongoDB OpenTelemetry spec, "Instrumenting Server Commands" (a span per command sent, except sensitive
 * ones; name, kind CLIENT, attributes; an exception recorded on failure), "db.query.text" (off by default, truncated
 * to the configured length), "Security Implication"; semantic conventions, "Recording errors" (status ERROR with the
 * exception's message, `error.type` the same as the metric's), database spans, "Name" (`{db.system.name}` when there
 * is no operation name). Disabled until called: the spec's "disabled by default".
 */
export function traceCommands(source: InstrumentedCommands, options: CommandTracingOptions = {}): CommandTracing {
  const events$: unknown = source === null || typeof source !== 'object' ? undefined : (source as { commandEvents$?: unknown }).commandEvents$;
  if (events$ === null || typeof events$ !== 'object' || typeof (events$ as { subscribe?: unknown }).subscribe !== 'function') {
    throw new InvalidOptionError('source', source, 'a ConnectionPool or Client (an object with commandEvents$)');
  }
  if (options === null || typeof options !== 'object') {
    throw new InvalidOptionError('options', options, 'an object { tracer?, queryTextMaxLength? }, or nothing');
  }
  rejectUnknownOptions(options, COMMAND_TRACING_OPTION_NAMES, 'traceCommands');
  const tracer = tracerOption(options, ['startSpan']);
  return new CommandSpans(events$ as Observable<CommandEvent>, tracer, queryTextMaxLength(optionValue(options, 'queryTextMaxLength')));
}

/** The option names of {@link CommandTracingOptions}. */
const COMMAND_TRACING_OPTION_NAMES = ['tracer', 'queryTextMaxLength'] as const;
COMMAND_TRACING_OPTION_NAMES satisfies readonly (keyof CommandTracingOptions)[];
true satisfies ListsEveryOption<CommandTracingOptions, typeof COMMAND_TRACING_OPTION_NAMES>;

/** The largest `queryTextMaxLength`. */
const MAX_QUERY_TEXT_LENGTH = 0x7fffffff;

/**
 * `queryTextMaxLength` as given, else from {@link QUERY_TEXT_MAX_LENGTH_ENV}, else 0. A bad value of the variable is
 * warned of on `diag` and ignored (0), as OpenTelemetry SDKs treat their own variables.
 *
 * @throws {InvalidOptionError} (option `queryTextMaxLength`) unless the option given is an integer in range.
 */
function queryTextMaxLength(given: unknown): number {
  if (given === undefined) return queryTextMaxLengthFromEnvironment();
  if (typeof given !== 'number' || !Number.isInteger(given) || given < 0 || given > MAX_QUERY_TEXT_LENGTH) {
    throw new InvalidOptionError('queryTextMaxLength', given, `an integer from 0 to ${MAX_QUERY_TEXT_LENGTH} (0: no db.query.text)`);
  }
  return given;
}

/**
 * The value of {@link QUERY_TEXT_MAX_LENGTH_ENV} (blanks around it ignored); 0 when unset, blank or bad (warned of).
 */
function queryTextMaxLengthFromEnvironment(): number {
  const raw = process.env[QUERY_TEXT_MAX_LENGTH_ENV];
  const text = raw?.trim() ?? '';
  if (text === '') return 0;
  const value = /^\d+$/.test(text) ? Number(text) : Number.NaN;
  if (value <= MAX_QUERY_TEXT_LENGTH) return value;
  diag.warn(`rxcmap: ignoring ${QUERY_TEXT_MAX_LENGTH_ENV}=${JSON.stringify(raw)}: not an integer from 0 to ${MAX_QUERY_TEXT_LENGTH}; db.query.text is left out`);
  return 0;
}

/** The top-level fields `db.query.text` leaves out. Source: MongoDB OpenTelemetry spec, "db.query.text". */
const QUERY_TEXT_OMITTED: ReadonlySet<string> = new Set(['lsid', '$db', '$clusterTime', 'signature']);

/** The spans behind {@link traceCommands}. */
class CommandSpans implements CommandTracing {
  private readonly subscription: Subscription;
  /** The span of each command in flight, and when it started (epoch ms with a fraction), by request id. */
  private readonly open = new Map<number, { readonly span: Span; readonly startTime: number }>();
  private readonly servers = new ServerAttributes();
  /** Unsubscribed: no span starts; the subscription ends once none is open. */
  private stopping = false;

  constructor(
    events$: Observable<CommandEvent>,
    private readonly tracer: Tracer,
    private readonly queryTextMaxLength: number,
  ) {
    this.subscription = events$.subscribe({
      next: (event) => this.record(event),
      complete: () => this.endAll(),
      // A source of the application's may fail: its error is no command's, and nobody else would receive it.
      error: (error: unknown) => {
        diag.error('rxcmap: the command events traced failed; tracing ended', error);
        this.endAll();
      },
    });
  }

  get closed(): boolean {
    return this.subscription.closed;
  }

  unsubscribe(): void {
    this.stopping = true;
    if (this.open.size === 0) this.subscription.unsubscribe();
  }

  [Symbol.dispose](): void {
    this.unsubscribe();
  }

  /** Starts or ends a span for one event; never throws (it runs inside a `commandEvents$` subscriber). */
  private record(event: CommandEvent): void {
    try {
      if (event.type === 'CommandStarted') {
        if (!this.stopping) this.start(event);
        return;
      }
      const started = this.open.get(event.requestId);
      if (started === undefined) return;
      this.open.delete(event.requestId);
      const span = started.span;
      try {
        if (event.type === 'CommandSucceeded') {
          const cursorId = replyCursorId(event.reply);
          if (cursorId !== undefined && event.commandName !== 'getMore') span.setAttribute(ATTR_DB_MONGODB_CURSOR_ID, cursorId);
        } else {
          // Each call apart: a span that throws at one still gets the others (the status above all).
          const failure = event.failure;
          const attempt = (what: string, call: () => void): void => {
            try {
              call();
            } catch (error) {
              diag.error(`rxcmap: ${what} of the ${event.commandName} span failed`, error);
            }
          };
          attempt('the failure attributes', () => {
            const attributes: Attributes = {};
            addFailureAttributes(attributes, failure);
            span.setAttributes(attributes);
          });
          // Its class as exception.type (the SDK would take a server error's code, which error.type holds already).
          attempt('the exception', () => {
            const { name, message, stack } = failure;
            const bounded = boundedMessage(message);
            span.recordException(stack === undefined ? { name, message: bounded } : { name, message: bounded, stack: boundedStack(stack, message, bounded) });
          });
          attempt('the status', () => span.setStatus({ code: SpanStatusCode.ERROR, message: boundedMessage(failure.message) }));
        }
      } finally {
        // The command's own duration: the span lasts what its events say.
        span.end(started.startTime + event.duration);
      }
    } catch (error) {
      diag.error(`rxcmap: tracing ${event.type} of ${event.commandName} failed`, error);
    } finally {
      if (this.stopping && this.open.size === 0) this.subscription?.unsubscribe();
    }
  }

  /** Starts the span of a command, unless its command was withheld (a sensitive command: see `isWithheld`). */
  private start(event: CommandStartedEvent): void {
    const command = event.command;
    if (isWithheld(event)) return;
    const name = event.commandName;
    const database = event.databaseName;
    const collection = commandCollection(name, command, database);
    const server = this.servers.of(event.address);
    const attributes: Attributes = {
      [ATTR_DB_SYSTEM_NAME]: DB_SYSTEM_NAME_VALUE_MONGODB,
      [ATTR_DB_COMMAND_NAME]: name,
      [ATTR_DB_NAMESPACE]: database,
      ...(collection === undefined ? {} : { [ATTR_DB_COLLECTION_NAME]: collection }),
      [ATTR_DB_QUERY_SUMMARY]: collection === undefined ? `${name} ${database}` : `${name} ${database}.${collection}`,
      ...server,
      [ATTR_NETWORK_TRANSPORT]: server[ATTR_SERVER_PORT] === undefined ? NETWORK_TRANSPORT_VALUE_UNIX : NETWORK_TRANSPORT_VALUE_TCP,
      [ATTR_DB_MONGODB_DRIVER_CONNECTION_ID]: event.connectionId,
      ...(event.serverConnectionId === undefined ? {} : { [ATTR_DB_MONGODB_SERVER_CONNECTION_ID]: event.serverConnectionId }),
    };
    addCommandFields(attributes, name, command);
    // Only what shows within the max length is read: not every field of a command with many.
    if (this.queryTextMaxLength > 0) attributes[ATTR_DB_QUERY_TEXT] = documentText(command, this.queryTextMaxLength, QUERY_TEXT_OMITTED);
    const startTime = wallClockNow();
    // A command named '' (an empty first key) has no name to give: the semantic conventions' last resort.
    const spanName = name === '' ? DB_SYSTEM_NAME_VALUE_MONGODB : name;
    const span = this.tracer.startSpan(spanName, { kind: SpanKind.CLIENT, attributes, startTime }, context.active());
    this.open.set(event.requestId, { span, startTime });
  }

  /**
   * Ends the spans still open when `commandEvents$` completes (none, once every command has settled). Never throws
   * (it runs inside a `commandEvents$` subscriber): a span that throws is reported to `diag`, and the others still end.
   */
  private endAll(): void {
    const open = [...this.open.values()];
    this.open.clear();
    const now = wallClockNow();
    for (const { span } of open) {
      try {
        span.end(now);
      } catch (error) {
        diag.error('rxcmap: ending a command span when the command events completed failed', error);
      }
    }
  }
}

/**
 * The most UTF-16 code units of a failure's message in the span's status and its `exception.message` (`...` added
 * when cut): a server's `errmsg` can be megabytes (up to a 16 MB reply), which the SDK's attribute limits do not bound
 * in the status (nor at all by default), and an exporter refuses a batch past its message size (4 MB for an OTLP
 * collector's gRPC receiver), dropping every span in it. Server messages are far shorter than this.
 */
const MAX_ERROR_MESSAGE_LENGTH = 4096;
/** The most UTF-16 code units of a failure's stack in `exception.stacktrace` (`...` added when cut). */
const MAX_ERROR_STACK_LENGTH = 16384;

/** `message` cut to {@link MAX_ERROR_MESSAGE_LENGTH} (never inside a surrogate pair); anything else as it is. */
function boundedMessage(message: string): string {
  return typeof message === 'string' ? truncate(message, MAX_ERROR_MESSAGE_LENGTH) : message;
}

/**
 * `stack` with the failure's `message` in it (V8 heads a stack with `<name>: <message>`) replaced by `bounded`, its
 * cut, so the frames after a long message are kept; then cut to {@link MAX_ERROR_STACK_LENGTH}.
 */
function boundedStack(stack: string, message: string, bounded: string): string {
  if (typeof stack !== 'string') return stack;
  const at = bounded === message ? -1 : stack.indexOf(message);
  const kept = at === -1 ? stack : `${stack.slice(0, at)}${bounded}${stack.slice(at + message.length)}`;
  return truncate(kept, MAX_ERROR_STACK_LENGTH);
}

/**
 * Adds `db.mongodb.lsid`, `db.mongodb.txn_number` and the `db.mongodb.cursor_id` of a `getMore`, or of a
 * `killCursors` of one cursor, from `command`. Never throws.
 */
function addCommandFields(attributes: Attributes, name: string, command: Readonly<Document>): void {
  try {
    const lsid = uuidText((command.lsid as { id?: unknown } | undefined)?.id);
    if (lsid !== undefined) attributes[ATTR_DB_MONGODB_LSID] = lsid;
    const txnNumber = int64(command.txnNumber);
    if (txnNumber !== undefined) attributes[ATTR_DB_MONGODB_TXN_NUMBER] = txnNumber;
    // The cursor a command uses: a getMore's; a killCursors' when it names one only (the attribute holds one id).
    const cursors: unknown = name === 'killCursors' ? command.cursors : undefined;
    const used = name === 'getMore' ? command.getMore : Array.isArray(cursors) && cursors.length === 1 ? cursors[0] : undefined;
    const cursorId = int64(used);
    if (cursorId !== undefined) attributes[ATTR_DB_MONGODB_CURSOR_ID] = cursorId;
  } catch {
    // A field that cannot be read is left out.
  }
}

/**
 * `value` as a UUID string (`0b4c6c1e-5d3f-4a7e-9c1b-2f0a8e6d4c3b`) when it is a BSON Binary of subtype 4 and 16 bytes,
 * of this copy of bson or of any other (an ES module application's, another version's: known by its `_bsontype`, as
 * bson itself knows them), else undefined.
 */
function uuidText(value: unknown): string | undefined {
  if (value === null || typeof value !== 'object' || (value as { _bsontype?: unknown })._bsontype !== 'Binary') return undefined;
  const { sub_type: subType, buffer, position } = value as { sub_type?: unknown; buffer?: unknown; position?: unknown };
  if (subType !== Binary.SUBTYPE_UUID || !(buffer instanceof Uint8Array) || position !== 16 || buffer.length < 16) return undefined;
  const hex = Buffer.from(buffer.buffer, buffer.byteOffset, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The cursor a reply opens (`cursor.id`, not 0), else undefined. Never throws. */
function replyCursorId(reply: Readonly<Document>): number | string | undefined {
  try {
    const id = int64((reply.cursor as { id?: unknown } | undefined)?.id);
    return id === 0 ? undefined : id;
  } catch {
    return undefined;
  }
}

/** An int64 as an attribute value: a number when exact, else its decimal string; undefined for anything else. */
function int64(value: unknown): number | string | undefined {
  if (typeof value === 'number') return Number.isInteger(value) ? value : undefined;
  if (typeof value === 'bigint' || Long.isLong(value)) return exactNumber(value) ?? value.toString();
  return undefined;
}

