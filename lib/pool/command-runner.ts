/**
 * The command runner: performs the reducer's commands after the step that listed them is committed, in the order
 * listed. It owns the side-effect handles: establishments under way and armed timers. Results of side effects
 * (establishment outcomes, timers firing, a delivery nobody took) come back as actions through `dispatch`, never by
 * touching the state.
 *
 * Source: CMAP spec, "Establishing a Connection", "Closing a Connection", "Connection Pool Monitoring".
 */
import { from, type Observable, type ObservableInput, type SchedulerLike, type Subscription } from 'rxjs';
import { establishChannel, isTraced, Trace, type EstablishTraceContext } from '../diagnostics-channels';
import { CmapError, ErrorLabel, isError, MongoNetworkError, PoolCallbackError } from '../errors';
import type { ConnectionPoolEvent } from '../events';
import type { Action, TimerName } from './actions';
import { countFailure } from './caller-frames';
import type { Command } from './commands';
import { destroyQuietly, destroyWhenResolved, idOf, ignore, isConnection, isErrored, isPromiseLike, serviceKey } from './connection-checks';
import type { ConnectionFactory, PoolConnection } from './contract';
import { reportUnhandled } from './report-unhandled';
import type { Waiter } from './wait-queue';

/** What the runner needs from its pool. */
export interface RunnerContext<C extends PoolConnection> {
  readonly address: string;
  /** OpenTelemetry's `server.address` and `server.port` of the Endpoint (for establishment traces). */
  readonly serverAddress: string;
  readonly serverPort: number | undefined;
  /** The pool (for establishment traces: which pool published them). */
  readonly pool: object;
  readonly factory: ConnectionFactory<C>;
  readonly scheduler: SchedulerLike;
  readonly events: { next(event: ConnectionPoolEvent): void };
  /** Decides whether an establishment error clears the pool; told the generation the connection was created in. */
  readonly clearOnEstablishmentError: (error: Error, establishment: { readonly generation: number }) => boolean;
  /** Enqueues an action (never re-enters the reducer). */
  readonly dispatch: (action: Action<C>) => void;
}

interface Establishment {
  readonly controller: AbortController;
  /** What the factory returned (a Promise is torn down when it resolves after an abort). */
  input: unknown;
  subscription: Subscription | undefined;
  /** Its trace on `rxcmap:connection:establish`, when that channel had subscribers as it started. */
  readonly trace: Trace<EstablishTraceContext> | undefined;
}

/** Performs commands. Owns the side-effect handles: establishments under way and armed timers. */
export class CommandRunner<C extends PoolConnection> {
  private readonly establishments = new Map<number, Establishment>();
  private readonly timers: Partial<Record<TimerName, Subscription>> = {};

  constructor(private readonly ctx: RunnerContext<C>) {}

  /** Checks a delivered connection back in for its waiter, whose requester turned out to be gone (one function for all). */
  private readonly giveBack = (connection: C, waiter: Waiter<C>): void => this.ctx.dispatch({ type: 'checkIn', connection, holder: waiter });

  /**
   * Performs `commands` in order. A command that throws (a fault of the pool itself: user callbacks are guarded where
   * they are called) is reported as unhandled and the commands after it still run, so no checkout the step settled
   * is left unsettled.
   */
  run(commands: readonly Command<C>[]): void {
    for (let i = 0; i < commands.length; i++) {
      try {
        this.perform(commands[i]);
      } catch (fault) {
        reportUnhandled(fault);
      }
    }
  }

  private perform(c: Command<C>): void {
    switch (c.type) {
      case 'emit':
        this.ctx.events.next(c.event);
        return;
      case 'establish':
        return this.establish(c.id, c.generation);
      case 'abort':
        return this.abort(c.id);
      case 'destroy':
        return destroyQuietly(c.connection, c.error);
      case 'deliver':
        // The requester left while its connection was on the way: check it back in, never strand it.
        if (!c.waiter.deliver(c.connection, this.giveBack)) this.giveBack(c.connection, c.waiter);
        return;
      case 'fail':
        countFailure(c.error);
        c.waiter.fail(c.error);
        return;
      case 'arm': {
        this.timers[c.timer]?.unsubscribe();
        const timer = c.timer;
        this.timers[timer] = this.ctx.scheduler.schedule(() => {
          this.timers[timer] = undefined;
          this.ctx.dispatch({ type: 'timer', timer });
        }, c.delay);
        return;
      }
      case 'disarm':
        this.timers[c.timer]?.unsubscribe();
        this.timers[c.timer] = undefined;
        return;
      case 'publish':
        c.channel.publish(c.message);
        return;
      case 'report':
        reportUnhandled(c.error);
        return;
    }
  }

  /** Starts an establishment; when traced, inside the trace's `start` (with its bound stores), followed by `end`. */
  private establish(id: number, generation: number): void {
    if (!isTraced(establishChannel)) return this.startEstablishment(id, generation, undefined);
    const { address, serverAddress, serverPort, pool } = this.ctx;
    const trace = new Trace(establishChannel, {
      address,
      serverAddress,
      serverPort,
      pool,
      connectionId: id,
      generation,
      outcome: undefined,
      result: undefined,
      error: undefined,
    });
    trace.run(this.startEstablishment, this, id, generation, trace);
  }

  private startEstablishment(id: number, generation: number, trace: Trace<EstablishTraceContext> | undefined): void {
    const { address } = this.ctx;
    const controller = new AbortController();
    const entry: Establishment = { controller, input: undefined, subscription: undefined, trace };
    this.establishments.set(id, entry);
    let settled = false;
    const settle = (): boolean => {
      if (settled) return false;
      settled = true;
      this.establishments.delete(id);
      entry.subscription?.unsubscribe();
      return true;
    };
    const fail = (error: Error): void => {
      if (!settle()) return;
      const decision = this.decideClear(error, generation);
      if (trace !== undefined) endEstablishTrace(trace, 'failed', decision.error);
      this.ctx.dispatch({ type: 'establishFailed', id, ...decision });
    };
    const broken = (detail: string, cause?: unknown): void =>
      fail(new PoolCallbackError(address, 'connectionFactory', `connectionFactory ${detail}`, cause === undefined ? undefined : { cause }));

    let input: ObservableInput<C>;
    try {
      const handshakeDone = (serviceId: string): void => {
        if (!settled && typeof serviceId === 'string') this.ctx.dispatch({ type: 'handshakeDone', id, serviceId: serviceKey(serviceId) });
      };
      input = this.ctx.factory({ id, generation, address, signal: controller.signal, handshakeDone });
    } catch (error) {
      return broken(`threw: ${messageOf(error)}`, error);
    }
    entry.input = input;
    let source: Observable<C>;
    try {
      source = from(input);
    } catch {
      return broken(`returned ${describe(input)}, not an Observable, Promise or other ObservableInput`);
    }
    const subscription = source.subscribe({
      next: (connection) => {
        if (!isConnection(connection, id)) {
          destroyQuietly(connection);
          const other = isConnection(connection) ? idOf(connection) : undefined;
          const what = other === undefined ? describe(connection) : `connection ${String(other)}`;
          return broken(`emitted ${what} for connection ${id}, not a connection (an object with destroy() and id ${id})`);
        }
        if (isErrored(connection)) {
          // Errored before the pool took it (its socket ended right behind the last reply of the establishment): the
          // establishment failed. Taken, it would be closed as perished and replaced for the same checkout, as often as
          // the factory hands out such connections. A network error during the establishment carries the backpressure
          // labels (CMAP "Backpressure-enabled"), so by default it fails the checkout without clearing the pool.
          destroyQuietly(connection);
          const error = new MongoNetworkError(address, `connection ${id} to ${address} was errored when its establishment completed`);
          error.errorLabels.add(ErrorLabel.SystemOverloadedError);
          error.errorLabels.add(ErrorLabel.RetryableError);
          return fail(error);
        }
        if (!settle()) return destroyQuietly(connection);
        if (trace !== undefined) endEstablishTrace(trace, 'ready', connection);
        this.ctx.dispatch({ type: 'established', id, connection });
      },
      error: (error: unknown) => (isError(error) ? fail(error) : broken(`failed with ${describe(error)}, which is not an Error`, error)),
      complete: () => fail(completedWithoutConnection(address, id)),
    });
    if (settled) subscription.unsubscribe();
    else entry.subscription = subscription;
  }

  /**
   * Asks the establishment error policy whether `error` clears the pool. A policy that throws, or returns a Promise
   * (an async function: the pool decides in the step that reports the failure, and a Promise is no decision), fails
   * the establishment with a PoolCallbackError (carrying both errors) and the default rule decides; the Promise's
   * rejection, if any, is ignored.
   */
  private decideClear(error: Error, generation: number): { error: Error; clearPool: boolean } {
    let failure: string;
    let cause: unknown;
    try {
      const decision: unknown = this.ctx.clearOnEstablishmentError(error, { generation });
      if (!isPromiseLike(decision)) return { error, clearPool: Boolean(decision) };
      decision.then(ignore, ignore); // both: a thenable of the application's may call either without checking it is one
      failure = 'clearOnEstablishmentError returned a Promise (it must return a boolean)';
    } catch (policyError) {
      failure = `clearOnEstablishmentError threw: ${messageOf(policyError)}`;
      cause = policyError;
    }
    const message = `${failure}; the establishment had failed with: ${messageOf(error)}`;
    let clearPool = true;
    try {
      clearPool = defaultClearOnEstablishmentError(error);
    } catch {
      // An error whose labels cannot be read (say an object made from a CmapError prototype): not backpressure.
    }
    return { error: new PoolCallbackError(this.ctx.address, 'clearOnEstablishmentError', message, { cause }, error), clearPool };
  }

  private abort(id: number): void {
    const entry = this.establishments.get(id);
    if (!entry) return;
    this.establishments.delete(id);
    // Unsubscribed first: a factory that fails when its signal aborts must not report that as an establishment
    // error (it would reach clearOnEstablishmentError for an establishment the pool itself abandoned).
    entry.subscription?.unsubscribe();
    entry.controller.abort();
    if (entry.trace !== undefined) endEstablishTrace(entry.trace, 'aborted', undefined);
    // A Promise cannot be cancelled: whatever it resolves to is torn down, so no socket outlives the abort.
    destroyWhenResolved(entry.input);
  }
}

/**
 * The error of an establishment whose connectionFactory completed without emitting a connection (connection `id` to
 * `address`): a PoolCallbackError, `callback` 'connectionFactory'. A pool's establishment and a monitor's fail with it.
 *
 * Source: extension (the factory is the pool's callback: see {@link PoolCallbackError}).
 */
export function completedWithoutConnection(address: string, id: number): PoolCallbackError {
  return new PoolCallbackError(address, 'connectionFactory', `connectionFactory completed without a connection for connection ${id}`);
}

/**
 * The default establishment error policy: SDAM's rule for errors before or during the handshake (they clear the
 * pool), minus those CMAP labels as backpressure (`SystemOverloadedError`).
 *
 * Source: CMAP spec, "Backpressure-enabled"; server discovery and monitoring spec, errors during the handshake.
 */
export function defaultClearOnEstablishmentError(error: Error): boolean {
  return !(error instanceof CmapError && error.hasErrorLabel(ErrorLabel.SystemOverloadedError));
}

/** Ends an establishment trace with its outcome (published now, or right after `end` when the factory has not returned). */
function endEstablishTrace(trace: Trace<EstablishTraceContext>, outcome: 'ready' | 'failed' | 'aborted', value: unknown): void {
  const context = trace.context;
  context.outcome = outcome;
  if (outcome === 'ready') context.result = value;
  else context.error = value as Error | undefined;
  trace.finish();
}

/**
 * A short description of a value for an error message: primitives as they are, objects by kind only. Never throws:
 * the value comes from a factory, and an object whose kind cannot be read (a revoked Proxy) is said to be so.
 */
function describe(x: unknown): string {
  if (x === null || (typeof x !== 'object' && typeof x !== 'function')) return typeof x === 'string' ? JSON.stringify(x) : String(x);
  if (typeof x === 'function') return 'a function';
  try {
    return `an object (${Object.prototype.toString.call(x)})`;
  } catch {
    return 'an object that cannot be inspected';
  }
}

/** An Error's message (as a string), else the value described; never throws (a getter of user code may). */
function messageOf(x: unknown): string {
  try {
    if (isError(x)) return String(x.message);
  } catch {
    return 'an Error whose message cannot be read';
  }
  return describe(x);
}
