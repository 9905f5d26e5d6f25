/**
 * The soak's fault injector: while the load runs, every 5-40 ms it picks one fault at random (seeded) and applies it
 * to the pool, the endpoint or the client, the way production meets them:
 *
 * - `clear` / `interruptingClear`: `pool.clear()`, without or with `interruptInUseConnections` (an SDAM error);
 * - `commandError`, `closeConnection`, `blockConnection`: the endpoint's `failCommand` fail point on `find` and
 *   `ping`, for the pool's connections (mostly) or the client's, for the next 1-8 commands;
 * - `handshakeError`: the fail point on the pool's handshake (`hello`): its next establishments fail;
 * - `heartbeatFailPoint`: the fail point on the client's `hello`: the monitor's next check fails (or the client
 *   pool's next establishment);
 * - `killPoolSockets` / `killClientSockets`: the endpoint closes half the pool's connections, or every connection of
 *   the client (its pool's and its monitor's, whose next check then fails);
 * - `burst`: 8-16 extra checkouts that hold their connections 60-150 ms, so that others time out in the WaitQueue.
 *
 * The pool has no monitor of its own: the injector marks it ready again 0-20 ms after it finds it paused (by its
 * clears, or by a failed establishment), as a monitor's next successful check would.
 */
import type { Connection, ConnectionPool } from '../lib';
import type { EmbeddedServer } from '../lib/testing';
import type { SoakRandom } from './soak-random';
import { Timers } from './soak-timers';

/** The kinds of fault, as counted in the summary. */
export type FaultKind =
  | 'clear'
  | 'interruptingClear'
  | 'commandError'
  | 'closeConnection'
  | 'blockConnection'
  | 'handshakeError'
  | 'heartbeatFailPoint'
  | 'killPoolSockets'
  | 'killClientSockets'
  | 'burst';

/** How often each fault is picked, relative to the others. */
const WEIGHTS: readonly (readonly [FaultKind, number])[] = [
  ['clear', 3],
  ['interruptingClear', 2],
  ['commandError', 3],
  ['closeConnection', 2],
  ['blockConnection', 3],
  ['handshakeError', 1],
  ['heartbeatFailPoint', 1],
  ['killPoolSockets', 2],
  ['killClientSockets', 1],
  ['burst', 2],
];

/** Server error codes a command fail point answers with. */
const ERROR_CODES = [91, 189, 10107, 11600, 11602];

/** What the injector acts on. */
export interface FaultTargets {
  readonly pool: ConnectionPool<Connection>;
  readonly server: EmbeddedServer;
  /** The appName of the pool's connections (fail points and kills select on it). */
  readonly poolAppName: string;
  /** The appName of the client's connections, its monitor's included. */
  readonly clientAppName: string;
  /** Starts `size` checkouts on the pool that hold their connection `holdMS` each. */
  burst(size: number, holdMS: number): void;
}

/** Applies random faults while started; see the module's description. */
export class FaultInjector {
  /** Faults applied, by kind. */
  readonly counts = new Map<FaultKind, number>();
  /** Connections the endpoint closed: the pool's, and the client's (pool and monitor). */
  readonly socketsKilled = { pool: 0, client: 0 };
  private readonly timers = new Timers();
  /** Draws for choosing sockets to kill: their number depends on timing, so they come from a stream of their own. */
  private readonly selection: SoakRandom;
  private running = false;
  private loop: Promise<void> = Promise.resolve();

  constructor(
    private readonly rng: SoakRandom,
    private readonly targets: FaultTargets,
  ) {
    this.selection = rng.fork();
    for (const [kind] of WEIGHTS) this.counts.set(kind, 0);
  }

  /** Starts applying faults (until {@link stop}). */
  start(): void {
    this.running = true;
    this.loop = this.run();
  }

  /**
   * Stops applying faults: cuts its sleeps short, turns the fail point off and marks the pool ready. Resolves once no
   * fault of its own is pending.
   */
  async stop(): Promise<void> {
    this.running = false;
    this.timers.flush();
    await this.loop;
    this.timers.flush();
    this.targets.server.failCommand.configure({ configureFailPoint: 'failCommand', mode: 'off' });
    this.targets.pool.ready();
  }

  private async run(): Promise<void> {
    while (this.running) {
      await this.timers.sleep(this.rng.int(5, 40));
      if (!this.running) return;
      this.apply(this.rng.weighted(WEIGHTS));
      if (this.targets.pool.state === 'paused') this.timers.after(this.rng.int(0, 20), () => this.targets.pool.ready());
    }
  }

  private apply(kind: FaultKind): void {
    const { pool, server, poolAppName, clientAppName } = this.targets;
    const rng = this.rng;
    this.counts.set(kind, (this.counts.get(kind) ?? 0) + 1);
    const commandTarget = (): string => (rng.chance(0.8) ? poolAppName : clientAppName);
    switch (kind) {
      case 'clear':
      case 'interruptingClear':
        pool.clear({ interruptInUseConnections: kind === 'interruptingClear', cause: new Error(`soak fault: ${kind}`) });
        return;
      case 'commandError':
        return this.failPoint(rng.int(1, 5), {
          failCommands: ['find', 'ping'],
          appName: commandTarget(),
          errorCode: ERROR_CODES[rng.int(0, ERROR_CODES.length - 1)],
          ...(rng.chance(0.5) ? { errorLabels: ['RetryableWriteError'] } : {}),
        });
      case 'closeConnection':
        return this.failPoint(rng.int(1, 3), { failCommands: ['find', 'ping'], appName: commandTarget(), closeConnection: true });
      case 'blockConnection':
        return this.failPoint(rng.int(1, 8), {
          failCommands: ['find', 'ping'],
          appName: commandTarget(),
          blockConnection: true,
          blockTimeMS: rng.int(20, 120),
        });
      case 'handshakeError':
        return this.failPoint(rng.int(1, 2), {
          failCommands: ['hello', 'isMaster'],
          appName: poolAppName,
          ...(rng.chance(0.5) ? { closeConnection: true } : { errorCode: 91 }),
        });
      case 'heartbeatFailPoint':
        return this.failPoint(rng.int(1, 2), { failCommands: ['hello', 'isMaster'], appName: clientAppName, closeConnection: true });
      case 'killPoolSockets':
        this.socketsKilled.pool += server.closeConnections((c) => c.appName === poolAppName && this.selection.chance(0.5));
        return;
      case 'killClientSockets':
        this.socketsKilled.client += server.closeConnections((c) => c.appName === clientAppName);
        return;
      case 'burst':
        this.targets.burst(rng.int(8, 16), rng.int(60, 150));
        return;
    }
  }

  /** Sets the endpoint's `failCommand` fail point for the next `times` matching commands. */
  private failPoint(times: number, data: Record<string, unknown>): void {
    const reply = this.targets.server.failCommand.configure({ configureFailPoint: 'failCommand', mode: { times }, data });
    if (reply.ok !== 1) throw new Error(`the endpoint refused a fail point: ${JSON.stringify(reply)}`);
  }
}
