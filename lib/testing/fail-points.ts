/**
 * The `failCommand` fail point of the embedded endpoint, configured with `configureFailPoint` on `admin` as on mongod.
 *
 * Supported: mode `alwaysOn`, `off`, `{ times: n }`, `{ skip: n }`; data `failCommands`, `closeConnection`,
 * `blockConnection` with `blockTimeMS`, `errorCode`, `errorLabels`, `writeConcernError` (added to the reply of a
 * command that succeeded, with `errorLabels` if given), `appName` (only connections whose handshake carried that
 * appName are affected). As on mongod, a command counts as a use of `{ times }` / `{ skip }` only when the fail point
 * acts on it: data with none of `closeConnection`, `blockConnection`, `errorCode` and `writeConcernError` affects no
 * command. `failInternalCommands` is accepted and changes nothing (the endpoint has no internal clients).
 *
 * Where it differs from mongod, and says so: a mode or data field it does not implement (`{ activationProbability }`;
 * `namespace`, `threadName`, `errorExtraInfo`, `failAllCommands`, ...) is refused with `BadValue` naming it, where
 * mongod would apply it. So is a data value it would otherwise not act on, naming it: an `errorCode` that is not a
 * 32-bit integer (`'x'`, `2.5`), `errorLabels` that are not an array of strings, a `closeConnection` or
 * `blockConnection` that is not a boolean, an `appName` that is not a string (mongod takes such data and leaves the
 * fail point silently doing nothing, or, for a number, takes it for a boolean). A `blockTimeMS` that is not a
 * non-negative integer is taken, and a command the fail point blocks then fails with InvalidOptions (72), as on
 * mongod. Error labels come only from `errorLabels`: the labels a mongod adds on its own (such as
 * `RetryableWriteError` for a retryable error of a retryable write on 4.4+) are not added. An `errorCode` it has no
 * name for gets codeName `Location<code>`, as mongod names a code missing from its table. `failCommands` names are
 * matched without regard to case (so `isMaster` covers `ismaster`, as on mongod, where both name one command; but
 * `PING` matches `ping` too, which mongod's exact match would not). A command sent with the OP_MSG moreToCome flag (an
 * unacknowledged write) gets no reply, whatever the fail point does: an `errorCode` of a not-primary error (189, 10107,
 * 11602, 13435, 13436) closes its connection instead, any other one is dropped, as on mongod.
 */
import type { Document } from 'bson';
import { InvalidOptionError } from '../errors';

/**
 * What a matching command must suffer, in order: block, then close the connection or fail with an error, else run
 * and have `writeConcernError` added to its reply.
 *
 * Source: extension (the server's `failCommand` fail point: `blockConnection`/`blockTimeMS`, `closeConnection`,
 * `errorCode`/`errorLabels`, `writeConcernError`).
 */
export interface FailAction {
  /**
   * How long to hold the reply back, in ms; 0 unless `blockConnection` is true. With `blockConnection` and no
   * `blockTimeMS` (or a negative or fractional one), the command fails with InvalidOptions (72) instead, as on mongod.
   */
  readonly blockTimeMS: number;
  /** Close the connection instead of answering (after blocking). */
  readonly closeConnection: boolean;
  /** The `ok: 0` reply to send instead of running the command (from `errorCode` and `errorLabels`), if any. */
  readonly error: Document | undefined;
  /**
   * Fields to add to the reply of the command once it ran and succeeded: `writeConcernError` (the document given in
   * the fail point's data), and `errorLabels` when given; undefined without `writeConcernError`.
   */
  readonly writeConcernError: Document | undefined;
}

/**
 * The server's names of the error codes drivers' tests most often set (retryable, state change, transaction, write
 * concern and cursor errors), for realistic error replies; any other code is named `Location<code>`, as mongod names a
 * code missing from its table.
 */
const CODE_NAMES: Record<number, string> = {
  1: 'InternalError',
  2: 'BadValue',
  6: 'HostUnreachable',
  7: 'HostNotFound',
  8: 'UnknownError',
  11: 'UserNotFound',
  13: 'Unauthorized',
  18: 'AuthenticationFailed',
  20: 'IllegalOperation',
  24: 'LockTimeout',
  26: 'NamespaceNotFound',
  43: 'CursorNotFound',
  50: 'MaxTimeMSExpired',
  59: 'CommandNotFound',
  64: 'WriteConcernTimeout',
  72: 'InvalidOptions',
  79: 'UnknownReplWriteConcern',
  89: 'NetworkTimeout',
  91: 'ShutdownInProgress',
  100: 'UnsatisfiableWriteConcern',
  112: 'WriteConflict',
  134: 'ReadConcernMajorityNotAvailableYet',
  175: 'QueryPlanKilled',
  189: 'PrimarySteppedDown',
  237: 'CursorKilled',
  251: 'NoSuchTransaction',
  262: 'ExceededTimeLimit',
  9001: 'SocketException',
  10107: 'NotWritablePrimary',
  11000: 'DuplicateKey',
  11600: 'InterruptedAtShutdown',
  11601: 'Interrupted',
  11602: 'InterruptedDueToReplStateChange',
  13435: 'NotPrimaryNoSecondaryOk',
  13436: 'NotPrimaryOrSecondary',
};

/** The data fields it implements (`failInternalCommands` has nothing to act on: there are no internal clients). */
const SUPPORTED_DATA = new Set([
  'failCommands',
  'closeConnection',
  'blockConnection',
  'blockTimeMS',
  'errorCode',
  'errorLabels',
  'writeConcernError',
  'appName',
  'failInternalCommands',
]);

/**
 * The state of the `failCommand` fail point of an {@link EmbeddedServer} (its `failCommand` property), set by a
 * `configureFailPoint` command or by calling {@link FailCommandPoint.configure}. Off until configured.
 *
 * Source: extension (the server's `failCommand` fail point, as the CMAP and SDAM tests use it).
 */
export class FailCommandPoint {
  private mode: 'off' | 'alwaysOn' | 'times' = 'off';
  private remaining = 0;
  private skip = 0;
  private data: Document = {};

  /**
   * @param onConfigure called after every configuration that was applied (mode on or off), so that the endpoint can
   *   end the waits of awaitable hellos the fail point now applies to. Source: extension.
   * @throws {InvalidOptionError} (option `onConfigure`) when it is given and is not a function.
   */
  constructor(private readonly onConfigure: () => void = () => undefined) {
    if (typeof onConfigure !== 'function') throw new InvalidOptionError('onConfigure', onConfigure, 'a function, or nothing');
  }

  /** Whether the fail point is on. */
  get active(): boolean {
    return this.mode !== 'off';
  }

  /**
   * Applies a `configureFailPoint` command. Returns the reply: `{ ok: 1 }`, or an `ok: 0` error naming what is
   * invalid (a `command` that is not a document included).
   */
  configure(command: Document): Document {
    if (command === null || typeof command !== 'object' || Array.isArray(command)) {
      const shown = typeof command === 'string' ? JSON.stringify(command) : Array.isArray(command) ? 'an array' : String(command);
      return { ok: 0, code: 2, codeName: 'BadValue', errmsg: `configureFailPoint takes a command document, not ${shown}` };
    }
    if (command.configureFailPoint !== 'failCommand') {
      return { ok: 0, code: 2, codeName: 'BadValue', errmsg: `unknown fail point: ${String(command.configureFailPoint)}` };
    }
    const mode = command.mode;
    if (mode === 'off') {
      this.mode = 'off';
      this.remaining = 0;
      this.skip = 0;
      this.onConfigure();
      return { ok: 1 };
    }
    const data = command.data ?? {};
    if (!Array.isArray(data.failCommands)) {
      return { ok: 0, code: 2, codeName: 'BadValue', errmsg: 'failCommand requires data.failCommands (an array)' };
    }
    const unsupported = Object.keys(data).find((field) => !SUPPORTED_DATA.has(field));
    if (unsupported !== undefined) {
      return {
        ok: 0,
        code: 2,
        codeName: 'BadValue',
        errmsg: `the embedded endpoint's failCommand does not implement data.${unsupported} (it implements ${[...SUPPORTED_DATA].join(', ')})`,
      };
    }
    const invalid = invalidDataValue(data);
    if (invalid !== undefined) {
      return { ok: 0, code: 2, codeName: 'BadValue', errmsg: `the embedded endpoint's failCommand takes data.${invalid}` };
    }
    if (mode === 'alwaysOn') {
      // A new mode replaces the former one whole: a skip or count still left from it does not carry over.
      this.mode = 'alwaysOn';
      this.remaining = 0;
      this.skip = 0;
    } else if (mode !== null && typeof mode === 'object' && 'activationProbability' in mode) {
      return { ok: 0, code: 2, codeName: 'BadValue', errmsg: "the embedded endpoint's failCommand does not implement mode { activationProbability }" };
    } else if (mode !== null && typeof mode === 'object' && isCountMode(mode)) {
      this.mode = mode.times !== undefined ? 'times' : 'alwaysOn';
      this.remaining = Number(mode.times ?? 0);
      this.skip = Number(mode.skip ?? 0);
    } else {
      return { ok: 0, code: 2, codeName: 'BadValue', errmsg: `unsupported fail point mode: ${JSON.stringify(mode)}` };
    }
    this.data = data;
    this.onConfigure();
    return { ok: 1 };
  }

  /**
   * Whether `commandName`, on a connection whose handshake carried `appName`, is one the fail point applies to now
   * (a skip still to consume counts), without consuming a use. Source: extension.
   */
  wouldMatch(commandName: string, appName: string | undefined): boolean {
    if (this.mode === 'off' || (this.mode === 'times' && this.remaining <= 0)) return false;
    return this.targets(commandName, appName);
  }

  /**
   * Whether the configured data targets `commandName` on a connection whose handshake carried `appName`: it is one of
   * `failCommands` (without regard to case), the `appName` matches when one is given, and the data acts on a command.
   * The mode (off, a count used up, a skip) is not looked at.
   */
  private targets(commandName: string, appName: string | undefined): boolean {
    const names = (this.data.failCommands as unknown[]).map((n) => String(n).toLowerCase());
    return names.includes(commandName.toLowerCase()) && (this.data.appName === undefined || this.data.appName === appName) && acts(this.data);
  }

  /** Whether `commandName`, on a connection whose handshake carried `appName`, must fail; consumes one use if so. */
  match(commandName: string, appName: string | undefined): FailAction | undefined {
    if (this.mode === 'off' || !this.targets(commandName, appName)) return undefined;
    if (this.skip > 0) {
      this.skip--;
      return undefined;
    }
    if (this.mode === 'times') {
      if (this.remaining <= 0) return undefined;
      if (--this.remaining === 0) this.mode = 'off';
    }
    const code = this.data.errorCode;
    const error =
      typeof code === 'number'
        ? {
            ok: 0,
            errmsg: "Failing command via 'failCommand' failpoint",
            code,
            codeName: CODE_NAMES[code] ?? `Location${code}`,
            ...(Array.isArray(this.data.errorLabels) ? { errorLabels: this.data.errorLabels } : {}),
          }
        : undefined;
    const wce = this.data.writeConcernError;
    const writeConcernError =
      wce !== null && typeof wce === 'object'
        ? { writeConcernError: wce, ...(Array.isArray(this.data.errorLabels) && this.data.errorLabels.length > 0 ? { errorLabels: this.data.errorLabels } : {}) }
        : undefined;
    if (this.data.blockConnection === true) {
      const blockTimeMS = this.data.blockTimeMS;
      if (typeof blockTimeMS !== 'number' || !Number.isInteger(blockTimeMS) || blockTimeMS < 0) {
        // As mongod: the command fails, as it reaches the fail point, without blocking.
        const errmsg =
          blockTimeMS === undefined ? "must specify 'blockTimeMS' when 'blockConnection' is true" : "'blockTimeMS' must be a non-negative integer";
        return { blockTimeMS: 0, closeConnection: false, error: { ok: 0, errmsg, code: 72, codeName: 'InvalidOptions' }, writeConcernError: undefined };
      }
    }
    return {
      blockTimeMS: this.data.blockConnection === true ? Number(this.data.blockTimeMS) : 0,
      closeConnection: this.data.closeConnection === true,
      error,
      writeConcernError,
    };
  }
}

/** The most and least an error code can be: mongod's error codes are 32-bit integers. */
const INT32_MAX = 2 ** 31 - 1;
const INT32_MIN = -(2 ** 31);

/**
 * The first data field whose value the fail point would not act on as given, as `<field> as <what it takes>, not
 * <value>`; undefined when every one given is valid. `blockTimeMS` is not judged here: as on mongod, a command the
 * fail point blocks fails with InvalidOptions when it is not a non-negative integer.
 */
function invalidDataValue(data: Document): string | undefined {
  const shown = (value: unknown): string => (typeof value === 'number' ? String(value) : JSON.stringify(value) ?? String(value));
  const code = data.errorCode;
  if (code !== undefined && !(Number.isInteger(code) && code >= INT32_MIN && code <= INT32_MAX)) {
    return `errorCode as a 32-bit integer, not ${shown(code)}`;
  }
  const labels = data.errorLabels;
  if (labels !== undefined && !(Array.isArray(labels) && labels.every((label) => typeof label === 'string'))) {
    return `errorLabels as an array of strings, not ${shown(labels)}`;
  }
  for (const field of ['closeConnection', 'blockConnection'] as const) {
    if (data[field] !== undefined && typeof data[field] !== 'boolean') return `${field} as a boolean, not ${shown(data[field])}`;
  }
  if (data.appName !== undefined && typeof data.appName !== 'string') return `appName as a string, not ${shown(data.appName)}`;
  return undefined;
}

/** Whether the data makes the fail point do anything to a command (else mongod does not count it as a use). */
function acts(data: Document): boolean {
  return (
    data.closeConnection === true ||
    data.blockConnection === true ||
    typeof data.errorCode === 'number' ||
    (data.writeConcernError !== null && typeof data.writeConcernError === 'object')
  );
}

/**
 * Whether a mode object gives `times`, `skip` or both, each a count: an integer >= 0 (a number or a BSON Int32/Long).
 * Each one given must be a count: `{ times: -1, skip: 2 }` is refused, not taken for a skip whose count never fails.
 */
function isCountMode(mode: Document): boolean {
  const given = [mode.times, mode.skip].filter((value) => value !== undefined);
  return given.length > 0 && given.every((value) => value !== null && Number.isInteger(Number(value)) && Number(value) >= 0);
}
