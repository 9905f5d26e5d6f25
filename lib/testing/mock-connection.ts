/**
 * A mock connection and its factory: no socket, no I/O. For testing code that uses a pool (and for the CMAP unit
 * tests, which allow a mocked Connection: CMAP spec, "Connection").
 */
import { Observable, type SchedulerLike } from 'rxjs';
import { InvalidOptionError } from '../errors';
import { optionValues, rejectUnknownOptions, requireFunction, requireOptionsObject, requireScheduler, type ListsEveryOption } from '../options';
import { MAX_TIMER_DELAY_MS } from '../scheduler';
import { hexServiceId, ignore, isPromiseLike } from '../pool/connection-checks';
import type { ConnectionFactory } from '../pool/contract';
import type { ConnectionDescriptor, PoolConnection } from '../pool/contract';

/**
 * A connection that does nothing but remember what happened to it.
 *
 * Source: CMAP spec, "Connection" ("a mocked Connection type could be used with the pool that never actually creates
 * a TCP connection or performs any I/O").
 */
export class MockConnection implements PoolConnection {
  /** The pool-assigned id, from the descriptor it was made for. */
  readonly id: number;
  /** The pool generation at creation, from the descriptor. */
  readonly generation: number;
  /** The pool's Endpoint, `host:port`, from the descriptor. */
  readonly address: string;
  /** The service it reached, in load-balanced tests (see {@link MockConnectionFactoryOptions.serviceIdOf}). */
  serviceId: string | undefined;
  /** Set it to simulate a network error: the pool then closes the connection with reason `error`. */
  errored = false;
  /** Set it with `errored` to give the error that made it errored: ConnectionClosed (reason `error`) carries it. */
  error: Error | undefined;
  /** Set it to simulate a request in flight (see `PoolConnection.busy`). */
  busy = false;
  /** Whether the pool destroyed it (`destroy()` also sets `errored`). */
  destroyed = false;
  /** The error the first `destroy(error)` was given, if any. */
  destroyError: Error | undefined;

  /**
   * Makes the connection a factory hands over for `descriptor` (a pool checks that it carries the descriptor's id).
   *
   * @throws {InvalidOptionError} (option `descriptor`) when `descriptor` is not an object with an integer `id`, an
   *   integer `generation` and a string `address`; (option `serviceId`) when `serviceId` is neither an ObjectId's
   *   24-character hex string (either case) nor undefined.
   */
  constructor(descriptor: Pick<ConnectionDescriptor, 'id' | 'generation' | 'address'>, serviceId?: string) {
    const d = descriptor as Partial<ConnectionDescriptor> | null | undefined;
    if (d === null || typeof d !== 'object' || !Number.isInteger(d.id) || !Number.isInteger(d.generation) || typeof d.address !== 'string') {
      throw new InvalidOptionError('descriptor', descriptor, 'an object { id, generation, address } (a ConnectionDescriptor)');
    }
    // As a handshake reports it (an ObjectId), so that clear({ serviceId }) can name the service it joins.
    if (serviceId !== undefined && hexServiceId(serviceId) === undefined) {
      throw new InvalidOptionError('serviceId', serviceId, "an ObjectId's 24-character hex string, or undefined");
    }
    this.serviceId = serviceId;
    this.id = descriptor.id;
    this.generation = descriptor.generation;
    this.address = descriptor.address;
  }

  /** Records the teardown: sets `destroyed`, `destroyError` and `errored`. Idempotent: later calls change nothing. */
  destroy(error?: Error): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.destroyError = error;
    this.errored = true;
  }
}

/** Options of {@link MockConnectionFactory}. Source: extension. */
export interface MockConnectionFactoryOptions {
  /**
   * How long an establishment takes, in ms. Default 0: it completes on a microtask, or with `scheduler` set, as that
   * scheduler runs a 0 ms timer (a `VirtualClock` on its next `advance`).
   */
  establishDelayMS?: number | undefined;
  /** Times the establishment on this scheduler (virtual time in tests); default: real timers. */
  scheduler?: SchedulerLike | undefined;
  /**
   * Return an error to make the establishment of that connection fail with it, undefined to let it succeed. It decides
   * at once: one that returns a Promise (an async function) or anything else fails the establishment with an
   * InvalidOptionError (option `failWith`).
   */
  failWith?: (descriptor: ConnectionDescriptor) => Error | undefined;
  /**
   * The serviceId the handshake of that connection reports, for load-balanced tests: an ObjectId's 24-character hex
   * string (anything else fails the establishment with InvalidOptionError), or undefined. It decides at once: a
   * Promise (an async function) fails the establishment with an InvalidOptionError (option `serviceIdOf`).
   */
  serviceIdOf?: (descriptor: ConnectionDescriptor) => string | undefined;
}

/** The option names of {@link MockConnectionFactoryOptions}. */
const MOCK_FACTORY_OPTION_NAMES = ['establishDelayMS', 'scheduler', 'failWith', 'serviceIdOf'] as const;
MOCK_FACTORY_OPTION_NAMES satisfies readonly (keyof MockConnectionFactoryOptions)[];
true satisfies ListsEveryOption<MockConnectionFactoryOptions, typeof MOCK_FACTORY_OPTION_NAMES>;

/**
 * Makes {@link MockConnection}s. `factory` is the {@link ConnectionFactory} to give a pool; `created` lists every
 * connection it made, `started` every establishment it began and `aborted` those the pool abandoned. Each
 * establishment takes `establishDelayMS` (ms; on `scheduler` when given, else a Node timer, or a microtask for 0).
 * An establishment fails (the Observable `factory` returns errors) only with the Error `failWith` returns for it.
 *
 * @throws {InvalidOptionError} from the constructor, naming the option: options that are not an object, a key that
 *   is not a {@link MockConnectionFactoryOptions} key (with the closest one), an `establishDelayMS` that is not a
 *   number of ms from 0 to 2147483647, a `scheduler` that is not an RxJS SchedulerLike, or a `failWith` or
 *   `serviceIdOf` that is not a function.
 *
 * Source: CMAP spec, "Connection" (a mocked Connection for tests), "Establishing a Connection".
 */
export class MockConnectionFactory {
  /** Every connection it established, in order (failed establishments add none). */
  readonly created: MockConnection[] = [];
  /** The descriptor of every establishment it began, in order. */
  readonly started: ConnectionDescriptor[] = [];
  /** How many establishments were unsubscribed from (abandoned by the pool) before they finished. */
  aborted = 0;

  private readonly options: MockConnectionFactoryOptions;

  constructor(options: MockConnectionFactoryOptions = {}) {
    requireOptionsObject('options', options, 'a MockConnectionFactoryOptions object, or nothing', true);
    rejectUnknownOptions(options, MOCK_FACTORY_OPTION_NAMES, 'MockConnectionFactory');
    const o = optionValues(options, MOCK_FACTORY_OPTION_NAMES);
    const delay = o.establishDelayMS;
    if (delay !== undefined && (typeof delay !== 'number' || !(delay >= 0 && delay <= MAX_TIMER_DELAY_MS))) {
      throw new InvalidOptionError('establishDelayMS', delay, `a number of ms from 0 to ${MAX_TIMER_DELAY_MS}`);
    }
    requireScheduler('scheduler', o.scheduler);
    if (o.failWith !== undefined) requireFunction('failWith', o.failWith, 'a function (descriptor) => Error | undefined');
    if (o.serviceIdOf !== undefined) requireFunction('serviceIdOf', o.serviceIdOf, 'a function (descriptor) => string | undefined');
    this.options = o;
  }

  /**
   * The factory to give a pool as `connectionFactory`: each subscription establishes one {@link MockConnection}
   * after `establishDelayMS`, or fails with what `failWith` returns, or with what `failWith`, `serviceIdOf` or the
   * {@link MockConnection} constructor throws (an {@link InvalidOptionError} for a descriptor it cannot take).
   */
  readonly factory: ConnectionFactory<MockConnection> = (descriptor) =>
    new Observable<MockConnection>((subscriber) => {
      this.started.push(descriptor);
      let done = false;
      const finish = (): void => {
        if (done) return;
        done = true;
        // It runs in a timer, a microtask or a scheduler action: what it throws (a descriptor or a serviceId the
        // connection refuses, an error of failWith or serviceIdOf) fails this establishment, not the process.
        let connection: MockConnection;
        try {
          const error = decidedAtOnce('failWith', this.options.failWith?.(descriptor));
          if (error !== undefined) return subscriber.error(error);
          connection = new MockConnection(descriptor, decidedAtOnce('serviceIdOf', this.options.serviceIdOf?.(descriptor)));
        } catch (error) {
          return subscriber.error(error);
        }
        this.created.push(connection);
        subscriber.next(connection);
        subscriber.complete();
      };
      const delay = this.options.establishDelayMS ?? 0;
      let cancel: () => void;
      if (this.options.scheduler !== undefined) {
        const sub = this.options.scheduler.schedule(finish, delay);
        cancel = () => sub.unsubscribe();
      } else if (delay > 0) {
        const timer = setTimeout(finish, delay);
        cancel = () => clearTimeout(timer);
      } else {
        queueMicrotask(finish);
        cancel = () => {
          done = true;
        };
      }
      return () => {
        if (!done) {
          this.aborted++;
          cancel();
          done = true;
        }
      };
    });
}

/**
 * What `failWith` or `serviceIdOf` returned, which must be decided at once. A Promise (an async function) is refused
 * with an InvalidOptionError naming the option, and its rejection is ignored rather than left unhandled: taken as it
 * is, a Promise counted as an error (failWith) or as a serviceId no handshake reports (serviceIdOf), whatever it
 * would resolve to.
 */
function decidedAtOnce<T>(option: 'failWith' | 'serviceIdOf', value: T): T {
  if (option === 'failWith' && value !== undefined && !isPromiseLike(value) && !(value instanceof Error)) {
    // `condition && new Error(...)` gives false: neither an error nor undefined, and not the factory's fault.
    throw new InvalidOptionError(option, value, 'a function that returns an Error or undefined');
  }
  if (!isPromiseLike(value)) return value;
  try {
    value.then(ignore, ignore);
  } catch {
    // A thenable whose then throws: nothing of it is left pending.
  }
  const allowed = option === 'failWith' ? 'a function that returns an Error or undefined at once (not a Promise)' : 'a function that returns a serviceId or undefined at once (not a Promise)';
  throw new InvalidOptionError(option, value, allowed);
}
