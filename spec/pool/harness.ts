/**
 * A test bench for the reducer: a state on a hand-driven clock, an action log, and the runner's side effects
 * recorded as data (establishments under way, timers armed, deliveries, failures, events).
 */
import { initialPoolState, type PoolState } from '../../lib/pool/state';
import type { PoolConnection } from '../../lib/pool/contract';
import { Waiter } from '../../lib/pool/wait-queue';
import { reduce } from '../../lib/pool/reducer';
import type { Action, TimerName } from '../../lib/pool/actions';
import type { Command } from '../../lib/pool/commands';
import { resolvePoolOptions, type BackgroundOptions, type PoolOptions } from '../../lib/options';
import type { ConnectionPoolEvent } from '../../lib/events';

/** A waiter whose requester is always there: the bench records outcomes from the commands instead. */
export class TestWaiter extends Waiter<FakeConnection> {
  deliver(): boolean {
    return true;
  }
  fail(): void {}
}

export class FakeConnection implements PoolConnection {
  errored = false;
  error: Error | undefined;
  destroyed = false;
  destroyError: Error | undefined;
  constructor(
    readonly id: number,
    readonly serviceId?: string,
  ) {}
  destroy(error?: Error): void {
    this.destroyed = true;
    this.destroyError = error;
  }
}

export interface Outcome {
  readonly waiter: Waiter<FakeConnection>;
  /** `cancel`: the requester gave up before the pool settled it (its front end settles it then). */
  readonly kind: 'deliver' | 'fail' | 'cancel';
  readonly connection?: FakeConnection;
  readonly error?: Error;
}

export class Bench {
  time = 0;
  readonly state: PoolState<FakeConnection>;
  readonly events: ConnectionPoolEvent[] = [];
  readonly outcomes: Outcome[] = [];
  /** Establishments under way (pending connections), by connection id. */
  readonly pending = new Set<number>();
  readonly aborted: number[] = [];
  readonly destroyed: FakeConnection[] = [];
  /** Armed timers: name → clock time it fires. */
  readonly timers = new Map<TimerName, number>();
  /** Every command the reducer returned, in order. */
  readonly commands: Command<FakeConnection>[] = [];

  constructor(options: PoolOptions & BackgroundOptions = {}, observed = true, loadBalanced = false) {
    this.state = initialPoolState<FakeConnection>('localhost:27017', resolvePoolOptions(options), () => this.time, loadBalanced);
    this.state.observed = observed;
  }

  dispatch(action: Action<FakeConnection>): Command<FakeConnection>[] {
    const commands = [...reduce(this.state, action).commands];
    for (const c of commands) this.apply(c);
    return commands;
  }

  checkOut(): Waiter<FakeConnection> {
    const waiter = new TestWaiter();
    this.dispatch({ type: 'checkOut', waiter });
    return waiter;
  }

  /** The requester of `waiter` gives up: settled on its side if the pool had not settled it yet, then the cancel action. */
  cancel(waiter: Waiter<FakeConnection>): Command<FakeConnection>[] {
    if (waiter.state !== 'done') this.outcomes.push({ waiter, kind: 'cancel' });
    return this.dispatch({ type: 'cancel', waiter });
  }

  /** Checks `connection` in as the checkout that holds it (or as nobody, when nothing holds it). */
  checkIn(connection: FakeConnection, holder = this.state.records.get(connection.id)?.holder): Command<FakeConnection>[] {
    return this.dispatch({ type: 'checkIn', connection, holder: holder ?? new TestWaiter() });
  }

  succeed(id: number, serviceId?: string): FakeConnection {
    const connection = new FakeConnection(id, serviceId);
    this.pending.delete(id);
    this.dispatch({ type: 'established', id, connection });
    return connection;
  }

  failEstablishment(id: number, error = new Error(`establishment ${id} failed`), clearPool = true): void {
    this.pending.delete(id);
    this.dispatch({ type: 'establishFailed', id, error, clearPool });
  }

  /** Moves the clock to `time`, firing armed timers that are due, in time order. */
  advanceTo(time: number): void {
    for (;;) {
      const due = [...this.timers.entries()].filter(([, at]) => at <= time).sort((a, b) => a[1] - b[1])[0];
      if (due === undefined) break;
      this.time = Math.max(this.time, due[1]);
      this.timers.delete(due[0]);
      this.dispatch({ type: 'timer', timer: due[0] });
    }
    this.time = time;
  }

  connectionOf(waiter: Waiter<FakeConnection>): FakeConnection | undefined {
    return this.outcomes.find((o) => o.waiter === waiter && o.kind === 'deliver')?.connection;
  }

  errorOf(waiter: Waiter<FakeConnection>): Error | undefined {
    return this.outcomes.find((o) => o.waiter === waiter && o.kind === 'fail')?.error;
  }

  types(): string[] {
    return this.events.map((e) => e.type);
  }

  private apply(c: Command<FakeConnection>): void {
    this.commands.push(c);
    switch (c.type) {
      case 'emit':
        this.events.push(c.event);
        break;
      case 'establish':
        this.pending.add(c.id);
        break;
      case 'abort':
        this.pending.delete(c.id);
        this.aborted.push(c.id);
        break;
      case 'destroy':
        c.connection.destroy(c.error);
        this.destroyed.push(c.connection);
        break;
      case 'deliver':
        this.outcomes.push({ waiter: c.waiter, kind: 'deliver', connection: c.connection });
        break;
      case 'fail':
        this.outcomes.push({ waiter: c.waiter, kind: 'fail', error: c.error });
        break;
      case 'arm':
        this.timers.set(c.timer, this.time + c.delay);
        break;
      case 'disarm':
        this.timers.delete(c.timer);
        break;
    }
  }
}
