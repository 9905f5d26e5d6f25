/**
 * The OpenTelemetry `db.client.operation.duration` metric of a pool's or client's commands, recorded from their
 * command events (`commandEvents$`).
 *
 * Source: OpenTelemetry semantic conventions v1.44.0, "Semantic conventions for database client metrics", "Metric:
 * db.client.operation.duration" (Stable), "Semantic conventions for MongoDB"; command logging and monitoring spec
 * (the events).
 */
import { diag, ValueType, type Attributes, type Histogram, type Meter } from '@opentelemetry/api';
import type { Observable, Subscription } from 'rxjs';
import type { CommandEvent } from '../connection/command-events';
import { InvalidOptionError } from '../errors';
import { rejectUnknownOptions, type ListsEveryOption } from '../options';
import { addFailureAttributes, commandCollection, ServerAttributes } from './command-attributes';
import { meterOption } from './provider-option';
import {
  ATTR_DB_COLLECTION_NAME,
  ATTR_DB_NAMESPACE,
  ATTR_DB_OPERATION_NAME,
  ATTR_DB_SYSTEM_NAME,
  DB_CLIENT_CONNECTION_TIME_BUCKETS,
  DB_SYSTEM_NAME_VALUE_MONGODB,
  METRIC_DB_CLIENT_OPERATION_DURATION,
} from './semantic-conventions';

/**
 * What {@link instrumentCommands} and `traceCommands` read: a `commandEvents$` stream. Every `ConnectionPool` and
 * `Client` has one.
 *
 * Source: extension (the public surface of `ConnectionPool` and `Client`).
 */
export interface InstrumentedCommands {
  /** The command events measured or traced (see `ConnectionPool.commandEvents$`, `Client.commandEvents$`). */
  readonly commandEvents$: Observable<CommandEvent>;
}

/**
 * Options of {@link instrumentCommands}.
 *
 * Source: extension: `meter` defaults the way OpenTelemetry instrumentations do (the global MeterProvider, with the
 * library's name and version as the instrumentation scope).
 */
export interface CommandInstrumentationOptions {
  /**
   * The Meter that creates the histogram. Default: `metrics.getMeter('rxcmap', <version>)` of `@opentelemetry/api`,
   * which records nothing until an SDK MeterProvider is registered globally.
   */
  meter?: Meter | undefined;
}

/**
 * The handle of instrumented commands: {@link unsubscribe} (or a `using` declaration) stops recording.
 *
 * Source: extension (RxJS `Subscription.unsubscribe`, TC39 explicit resource management `Symbol.dispose`).
 */
export interface CommandInstrumentation extends Disposable {
  /** Whether recording has stopped: unsubscribed, disposed, or the source's `commandEvents$` completed. */
  readonly closed: boolean;
  /** Stops recording (idempotent): nothing more is measured, and the commands' events are no longer built for it. */
  unsubscribe(): void;
  /** The same as {@link unsubscribe}, for `using` declarations. */
  [Symbol.dispose](): void;
}

/**
 * Records `db.client.operation.duration` (Histogram, double, unit `s`, the conventions' bucket boundaries advised)
 * for each command of `source` (a `ConnectionPool` or a `Client`): one measurement per CommandSucceeded or
 * CommandFailed, its `duration` in seconds (from just after its CommandStarted, before compression and the write, to
 * its reply or failure), with the attributes of the conventions for MongoDB:
 *
 * | attribute | value |
 * | --- | --- |
 * | `db.system.name` | `mongodb` |
 * | `db.operation.name` | the command's name (`find`, `insert`, `getMore`) |
 * | `db.namespace` | the database |
 * | `db.collection.name` | the command's first value when it is a string (`{ find: 'orders' }`: `orders`), a `getMore`'s `collection`; absent otherwise, on the `admin` database, and for a sensitive command (its document is not published) |
 * | `server.address`, `server.port` | the server (no port for a Unix domain socket) |
 * | `error.type` | failed only: a server error's code as a string (`11000`), else the error's name (`MongoNetworkError`, `MongoNetworkTimeoutError`) |
 * | `db.response.status_code` | failed with a server error only: its code as a string |
 *
 * Mapping choices: a MongoDB "operation" in the conventions' sense is one command (a cursor's `find` and each
 * `getMore` are measured apart, as the conventions' MongoDB example does); a write whose reply holds write errors has
 * `ok: 1` and is a success, as for the command logging and monitoring spec; a command whose events were not observed records
 * nothing (recording subscribes to `commandEvents$`, which makes each command build its events: the cost of
 * instrumenting). An instrument that throws is reported to OpenTelemetry's `diag` logger, never thrown.
 *
 * @example
 * ```ts
 * import { metrics } from '@opentelemetry/api';
 * import { connect } from 'rxcmap';
 * import { instrumentCommands } from 'rxcmap/opentelemetry';
 *
 * const client = connect('mongodb://localhost:27017');
 * const instrumentation = instrumentCommands(client, { meter: metrics.getMeter('my-service') });
 * // ... later
 * instrumentation.unsubscribe();
 * ```
 *
 * @param source a `ConnectionPool` or a `Client` (anything with `commandEvents$`).
 * @param options the Meter; see {@link CommandInstrumentationOptions}.
 * @returns the handle that stops recording.
 * @throws {InvalidOptionError} for a `source` without `commandEvents$` (option `source`), options that are not an
 *   object (option `options`), a key that is not one of its options (named, with the closest one), or a `meter` that
 *   is not an OpenTelemetry Meter (option `meter`); what the Meter throws while the histogram is made.
 *
 * Source: OpenTelemetry semantic conventions v1.44.0, "Metric: db.client.operation.duration", "Semantic conventions
 * for MongoDB" (db.system.name `mongodb`, db.operation.name the command, db.namespace the database, db.collection.name,
 * db.response.status_code the error code as a string, error.type); command logging and monitoring spec, "Events API".
 */
export function instrumentCommands(source: InstrumentedCommands, options: CommandInstrumentationOptions = {}): CommandInstrumentation {
  const events$: unknown = source === null || typeof source !== 'object' ? undefined : (source as { commandEvents$?: unknown }).commandEvents$;
  if (events$ === null || typeof events$ !== 'object' || typeof (events$ as { subscribe?: unknown }).subscribe !== 'function') {
    throw new InvalidOptionError('source', source, 'a ConnectionPool or Client (an object with commandEvents$)');
  }
  if (options === null || typeof options !== 'object') {
    throw new InvalidOptionError('options', options, 'an object { meter? }, or nothing');
  }
  rejectUnknownOptions(options, COMMAND_INSTRUMENTATION_OPTION_NAMES, 'instrumentCommands');
  return new CommandMetricsRecorder(events$ as Observable<CommandEvent>, meterOption(options, ['createHistogram']));
}

/** The option names of {@link CommandInstrumentationOptions}. */
const COMMAND_INSTRUMENTATION_OPTION_NAMES = ['meter'] as const;
COMMAND_INSTRUMENTATION_OPTION_NAMES satisfies readonly (keyof CommandInstrumentationOptions)[];
true satisfies ListsEveryOption<CommandInstrumentationOptions, typeof COMMAND_INSTRUMENTATION_OPTION_NAMES>;

/** The recorder behind {@link instrumentCommands}. */
class CommandMetricsRecorder implements CommandInstrumentation {
  private readonly duration: Histogram;
  private readonly subscription: Subscription;
  /** The collection of each command in flight, by request id (from its CommandStarted): none for the others. */
  private readonly collections = new Map<number, string>();
  /** The server attributes of each address met, made once. */
  private readonly servers = new ServerAttributes();

  constructor(events$: Observable<CommandEvent>, meter: Meter) {
    this.duration = meter.createHistogram(METRIC_DB_CLIENT_OPERATION_DURATION, {
      unit: 's',
      valueType: ValueType.DOUBLE,
      advice: { explicitBucketBoundaries: [...DB_CLIENT_CONNECTION_TIME_BUCKETS] },
      description: 'Duration of database client operations.',
    });
    this.subscription = events$.subscribe({ next: (event) => this.record(event), complete: () => this.collections.clear() });
  }

  get closed(): boolean {
    return this.subscription.closed;
  }

  unsubscribe(): void {
    this.subscription.unsubscribe();
    this.collections.clear();
  }

  [Symbol.dispose](): void {
    this.unsubscribe();
  }

  /** Records one event; never throws (it runs inside a `commandEvents$` subscriber). */
  private record(event: CommandEvent): void {
    try {
      if (event.type === 'CommandStarted') {
        const collection = commandCollection(event.commandName, event.command, event.databaseName);
        if (collection !== undefined) this.collections.set(event.requestId, collection);
        return;
      }
      const collection = this.collections.get(event.requestId);
      this.collections.delete(event.requestId);
      const attributes: Attributes = {
        [ATTR_DB_SYSTEM_NAME]: DB_SYSTEM_NAME_VALUE_MONGODB,
        [ATTR_DB_OPERATION_NAME]: event.commandName,
        [ATTR_DB_NAMESPACE]: event.databaseName,
        ...(collection === undefined ? {} : { [ATTR_DB_COLLECTION_NAME]: collection }),
        ...this.servers.of(event.address),
      };
      if (event.type === 'CommandFailed') addFailureAttributes(attributes, event.failure);
      this.duration.record(event.duration / 1000, attributes);
    } catch (error) {
      diag.error(`rxcmap: recording ${event.type} of ${event.commandName} failed`, error);
    }
  }
}
