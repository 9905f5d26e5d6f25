/**
 * The Command union: the side effects the reducer decides, as data. The {@link CommandRunner} performs them after the
 * step that listed them is committed, in the order listed.
 *
 * Source: CMAP spec, "Establishing a Connection", "Closing a Connection", "Connection Pool Monitoring".
 */
import type { ConnectionPoolEvent } from '../events';
import type { TimerName } from './actions';
import type { Waiter } from './wait-queue';

/** Publish an event on `events$`. */
export interface EmitCommand {
  readonly type: 'emit';
  readonly event: ConnectionPoolEvent;
}
/** Start establishing connection `id`. */
export interface EstablishCommand {
  readonly type: 'establish';
  readonly id: number;
  readonly generation: number;
}
/** Abandon the establishment of connection `id` (its record is already closed). */
export interface AbortCommand {
  readonly type: 'abort';
  readonly id: number;
}
/** Tear a connection down (`PoolConnection.destroy`). */
export interface DestroyCommand<C> {
  readonly type: 'destroy';
  readonly connection: C;
  readonly error?: Error;
}
/** Hand a checked-out connection to its requester. */
export interface DeliverCommand<C> {
  readonly type: 'deliver';
  readonly waiter: Waiter<C>;
  readonly connection: C;
}
/** Fail a checkout. */
export interface FailCommand<C> {
  readonly type: 'fail';
  readonly waiter: Waiter<C>;
  readonly error: Error;
}
/** Arm (or re-arm) one of the pool's timers to fire after `delay` ms. */
export interface ArmCommand {
  readonly type: 'arm';
  readonly timer: TimerName;
  readonly delay: number;
}
/** Disarm one of the pool's timers. */
export interface DisarmCommand {
  readonly type: 'disarm';
  readonly timer: TimerName;
}

/** Publish a message on a diagnostics channel (one that had subscribers when the step ran). */
export interface PublishCommand {
  readonly type: 'publish';
  readonly channel: { publish(message: unknown): void };
  readonly message: object;
}

/**
 * Report an error as RxJS reports unhandled errors (`config.onUnhandledError`, else thrown asynchronously): a fault of
 * the pool itself, which made it close (see `reduceFailingClosed`).
 */
export interface ReportCommand {
  readonly type: 'report';
  readonly error: unknown;
}

/** Every side effect the reducer can ask for. */
export type Command<C> =
  | EmitCommand
  | EstablishCommand
  | AbortCommand
  | DestroyCommand<C>
  | DeliverCommand<C>
  | FailCommand<C>
  | ArmCommand
  | DisarmCommand
  | PublishCommand
  | ReportCommand;
