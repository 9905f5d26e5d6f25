/**
 * The command runner: performs the reducer's commands after the step that listed them is committed, in the order
 * listed. It owns the side-effect handles: establishments under way and armed timers. Results of side effects
 * (establishment outcomes, timers firing, a delivery nobody took) come back as actions through `dispatch`, never by
 * touching the state.
 *
 * Source: CMAP spec, "Establishing a Connection", "Closing a Connection", "Connection Pool Monitoring".
 */
import { from, type ObservableInput, type SchedulerLike, type Subscription } from 'rxjs';
import type { ConnectionPoolEvent } from '../events';
import type { Action, TimerName } from './actions';
import type { Command } from './commands';
import type { ConnectionFactory, PoolConnection } from './contract';

/** What the runner needs from its pool. */
export interface RunnerContext<C extends PoolConnection> {
  readonly address: string;
  readonly factory: ConnectionFactory<C>;
  readonly scheduler: SchedulerLike;
  readonly events: { next(event: ConnectionPoolEvent): void };
  /** Decides whether an establishment error clears the pool. */
  readonly clearOnEstablishmentError: (error: Error) => boolean;
  /** Enqueues an action (never re-enters the reducer). */
  readonly dispatch: (action: Action<C>) => void;
}

interface Establishment {
  readonly controller: AbortController;
  readonly input: ObservableInput<unknown>;
  subscription: Subscription | undefined;
}

/** Performs commands. Owns the side-effect handles: establishments under way and armed timers. */
export class CommandRunner<C extends PoolConnection> {
  private readonly establishments = new Map<number, Establishment>();
  private readonly timers: Partial<Record<TimerName, Subscription>> = {};

  constructor(private readonly ctx: RunnerContext<C>) {}

  run(commands: readonly Command<C>[]): void {
    for (let i = 0; i < commands.length; i++) this.perform(commands[i]);
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
        if (!c.waiter.sink.deliver(c.connection)) {
          // The requester left while its connection was on the way: check it back in, never strand it.
          this.ctx.dispatch({ type: 'checkIn', connection: c.connection, holder: c.waiter });
        }
        return;
      case 'fail':
        c.waiter.sink.fail(c.error);
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
    }
  }

  private establish(id: number, generation: number): void {
    const controller = new AbortController();
    let settled = false;
    const settle = (): boolean => {
      if (settled) return false;
      settled = true;
      const entry = this.establishments.get(id);
      this.establishments.delete(id);
      entry?.subscription?.unsubscribe();
      return true;
    };
    const fail = (error: unknown): void => {
      if (!settle()) return;
      const err = error instanceof Error ? error : new Error(String(error));
      this.ctx.dispatch({
        type: 'establishFailed',
        id,
        error: err,
        clearPool: this.ctx.clearOnEstablishmentError(err),
      });
    };
    let input: ObservableInput<C>;
    try {
      input = this.ctx.factory({ id, generation, address: this.ctx.address, signal: controller.signal });
    } catch (error) {
      this.establishments.set(id, { controller, input: [], subscription: undefined });
      fail(error);
      return;
    }
    const entry: Establishment = { controller, input, subscription: undefined };
    this.establishments.set(id, entry);
    const subscription = from(input).subscribe({
      next: (connection) => {
        if (!settle()) return destroyQuietly(connection);
        this.ctx.dispatch({ type: 'established', id, connection });
      },
      error: fail,
      complete: () => fail(new Error(`connection factory completed without a connection for connection ${id}`)),
    });
    if (settled) subscription.unsubscribe();
    else entry.subscription = subscription;
  }

  private abort(id: number): void {
    const entry = this.establishments.get(id);
    if (!entry) return;
    this.establishments.delete(id);
    entry.controller.abort();
    entry.subscription?.unsubscribe();
    // A Promise cannot be cancelled: whatever it resolves to is torn down, so no socket outlives the abort.
    if (isPromiseLike(entry.input)) {
      entry.input.then(
        (c) => destroyQuietly(c as PoolConnection),
        () => undefined,
      );
    }
  }
}

function destroyQuietly(connection: PoolConnection, error?: Error): void {
  try {
    connection.destroy(error);
  } catch {
    // A connection that fails to tear itself down is already unusable; nothing more can be done for it.
  }
}

function isPromiseLike(x: unknown): x is PromiseLike<unknown> {
  return typeof (x as PromiseLike<unknown> | null)?.then === 'function';
}
