/**
 * The soak's load: workers that check connections out of the pool in every form its API offers and run one command
 * on each (`find`, or `ping`), and workers that run commands through the `connect()` client. Every checkout is
 * entered in the ledger and every command outcome tallied; an error the faults cannot explain, or a `checkIn` that
 * throws for a connection the worker holds, is a violation.
 *
 * Each worker draws its choices from a random stream of its own (forked from the seed), so its sequence of choices
 * replays with the seed; how they interleave depends on I/O timing.
 */
import { from, timeout, TimeoutError } from 'rxjs';
import type { Client, Connection, ConnectionPool } from '../lib';
import { errorName, type CheckOutForm, type CheckOutLedger, type CheckOutTicket } from './soak-ledger';
import type { SoakRandom } from './soak-random';
import { within } from './soak-resources';
import { Timers } from './soak-timers';

/** How often each checkout form is used, relative to the others. */
const FORMS: readonly (readonly [CheckOutForm, number])[] = [
  ['promise', 30],
  ['abort', 15],
  ['observable', 10],
  ['unsubscribe', 15],
  ['withConnection', 20],
  ['withConnection$', 10],
];

/** Errors a command on a checked-out connection may fail with under the soak's faults. */
const COMMAND_ERRORS: ReadonlySet<string> = new Set([
  'MongoServerError', // fail point with an error code
  'MongoNetworkError', // fail point closing the connection, socket killed by the endpoint
  'MongoNetworkTimeoutError',
  'PoolClearedError', // its connection interrupted by clear({ interruptInUseConnections: true })
]);

/** Errors of `withConnection$` under its `timeout` operator, once it holds a connection. */
const SCOPED_COMMAND_ERRORS: ReadonlySet<string> = new Set([...COMMAND_ERRORS, 'TimeoutError']);

/** Errors a client command may fail with: its checkout's, its command's, and server selection's. */
const CLIENT_COMMAND_ERRORS: ReadonlySet<string> = new Set([...COMMAND_ERRORS, 'WaitQueueTimeoutError', 'ServerSelectionError']);

/** Commands that succeeded, and those that failed by error name. */
export class Outcomes {
  ok = 0;
  readonly failed = new Map<string, number>();

  constructor(
    private readonly what: string,
    private readonly violation: (message: string) => void,
  ) {}

  /** Counts a failure; a violation when its error is not in `allowed`. */
  fail(error: unknown, allowed: ReadonlySet<string>): void {
    const name = errorName(error);
    this.failed.set(name, (this.failed.get(name) ?? 0) + 1);
    if (!allowed.has(name)) this.violation(`${this.what} failed with an unexpected ${name}: ${(error as Error)?.message ?? String(error)}`);
  }

  /** The figures, for the JSON summary. */
  toJSON(): Record<string, unknown> {
    return { ok: this.ok, failed: Object.fromEntries([...this.failed].sort()) };
  }
}

/** What the load runs against. */
export interface LoadTargets {
  readonly pool: ConnectionPool<Connection>;
  readonly client: Client;
  readonly ledger: CheckOutLedger;
  readonly violation: (message: string) => void;
}

/** How many workers of each kind run. */
export interface LoadShape {
  /** Workers on the pool; more than its maxPoolSize, so checkouts wait. */
  readonly poolWorkers: number;
  /** Workers running `client.command()`. */
  readonly clientWorkers: number;
}

const immediate = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** The workers; {@link start} and {@link stop} them around each quiescent point. */
export class Load {
  /** Commands run on connections checked out of the pool. */
  readonly commands: Outcomes;
  /** Commands run through the client. */
  readonly clientCommands: Outcomes;
  private readonly timers = new Timers();
  private readonly workerRandoms: SoakRandom[];
  private readonly clientRandoms: SoakRandom[];
  private readonly work = new Set<Promise<void>>();
  private running = false;

  constructor(
    rng: SoakRandom,
    private readonly targets: LoadTargets,
    shape: LoadShape,
  ) {
    this.commands = new Outcomes('a command on a pool connection', targets.violation);
    this.clientCommands = new Outcomes('a client command', targets.violation);
    this.workerRandoms = Array.from({ length: shape.poolWorkers }, () => rng.fork());
    this.clientRandoms = Array.from({ length: shape.clientWorkers }, () => rng.fork());
  }

  /** Starts every worker. */
  start(): void {
    this.running = true;
    for (const rng of this.workerRandoms) this.track(this.poolWorker(rng));
    for (const rng of this.clientRandoms) this.track(this.clientWorker(rng));
  }

  /**
   * Stops the workers: each finishes the cycle it is in (sleeps and holds are cut short). Resolves to the violations
   * of a load that did not finish within `deadlineMS` (a checkout or command that never ended).
   */
  async stop(deadlineMS: number): Promise<string[]> {
    this.running = false;
    this.timers.flush();
    const finished = await within(Promise.all([...this.work]).then(() => true), deadlineMS, false);
    this.timers.flush();
    return finished ? [] : [`${this.work.size} worker(s) or burst checkout(s) did not finish within ${deadlineMS} ms of the load being paused`];
  }

  /** Starts `size` checkouts that hold their connection `holdMS` each (to make other checkouts wait and time out). */
  burst(size: number, holdMS: number): void {
    if (!this.running) return;
    for (let i = 0; i < size; i++) {
      this.track(
        (async () => {
          const connection = await this.checkOut('burst');
          if (connection === undefined) return;
          await this.timers.sleep(holdMS);
          this.checkIn(connection);
        })(),
      );
    }
  }

  /**
   * Test-only leak: checks out one connection and never checks it in (retrying while the pool refuses). Resolves once
   * it holds it.
   */
  async leakConnection(): Promise<void> {
    for (let attempt = 0; attempt < 1000; attempt++) {
      if ((await this.checkOut('promise')) !== undefined) return;
      await this.timers.sleep(1);
    }
  }

  private track(work: Promise<void>): void {
    const tracked = work.then(
      () => undefined,
      (error: unknown) => this.targets.violation(`the load itself failed: ${(error as Error)?.stack ?? String(error)}`),
    );
    this.work.add(tracked);
    void tracked.then(() => this.work.delete(tracked));
  }

  private async poolWorker(rng: SoakRandom): Promise<void> {
    while (this.running) {
      const ok = await this.cycle(rng.weighted(FORMS), rng);
      // A paused pool fails checkouts at once: back off after a failure rather than spin.
      if (ok) await immediate();
      else await this.timers.sleep(rng.int(1, 5));
    }
  }

  private async clientWorker(rng: SoakRandom): Promise<void> {
    while (this.running) {
      try {
        await this.targets.client.command('admin', { ping: 1 });
        this.clientCommands.ok++;
        await immediate();
      } catch (error) {
        this.clientCommands.fail(error, CLIENT_COMMAND_ERRORS);
        await this.timers.sleep(rng.int(1, 5));
      }
    }
  }

  /** One checkout of `form`, and one command on the connection if it got one. Resolves to whether both succeeded. */
  private async cycle(form: CheckOutForm, rng: SoakRandom): Promise<boolean> {
    const { pool, ledger } = this.targets;
    switch (form) {
      case 'promise':
      case 'observable': {
        const connection = await this.checkOut(form);
        return connection !== undefined && this.use(connection, rng);
      }
      case 'abort': {
        const controller = new AbortController();
        const connection = this.checkOut(form, controller.signal);
        const delay = rng.int(0, 3);
        const cancel = delay === 0 ? (controller.abort(), undefined) : this.timers.after(delay, () => controller.abort());
        const c = await connection;
        cancel?.();
        return c !== undefined && this.use(c, rng);
      }
      case 'unsubscribe': {
        const c = await this.checkOutUnsubscribing(rng.int(0, 3));
        return c !== undefined && this.use(c, rng);
      }
      case 'withConnection': {
        const ticket = ledger.start(form);
        let entered = false;
        try {
          await pool.withConnection(async (c) => {
            entered = true;
            ledger.resolve(ticket);
            await this.hold(rng);
            return c.command(...command(rng));
          });
          this.commands.ok++;
          return true;
        } catch (error) {
          if (entered) this.commands.fail(error, COMMAND_ERRORS);
          else ledger.reject(ticket, error);
          return false;
        }
      }
      case 'withConnection$': {
        const ticket = ledger.start(form);
        let entered = false;
        const [db, cmd] = command(rng);
        return new Promise<boolean>((resolve) => {
          pool
            .withConnection$((c) => {
              entered = true;
              ledger.resolve(ticket);
              return from(c.command(db, cmd));
            })
            .pipe(timeout({ first: rng.int(1, 30) }))
            .subscribe({
              next: () => {
                this.commands.ok++;
                resolve(true);
              },
              error: (error: unknown) => {
                if (entered) this.commands.fail(error, SCOPED_COMMAND_ERRORS);
                else if (error instanceof TimeoutError) ledger.unsubscribe(ticket); // the operator left the checkout
                else ledger.reject(ticket, error);
                resolve(false);
              },
            });
        });
      }
      case 'burst':
        throw new Error('burst checkouts are started by burst()');
    }
  }

  /** A checkout awaited through the request's own `then` (so a second settlement would be seen), or subscribed. */
  private checkOut(form: CheckOutForm, signal?: AbortSignal): Promise<Connection | undefined> {
    const { pool, ledger } = this.targets;
    const ticket = ledger.start(form);
    const request = pool.checkOut(signal === undefined ? undefined : { signal });
    return new Promise((resolve) => {
      const delivered = (c: Connection): void => resolve(ledger.resolve(ticket) ? c : undefined);
      const failed = (error: unknown): void => {
        ledger.reject(ticket, error);
        resolve(undefined);
      };
      if (form === 'observable') request.subscribe({ next: delivered, error: failed });
      else request.then(delivered, failed);
    });
  }

  /** A subscribed checkout, unsubscribed after `delayMS` (at once for 0) unless it settled first. */
  private checkOutUnsubscribing(delayMS: number): Promise<Connection | undefined> {
    const { pool, ledger } = this.targets;
    const ticket: CheckOutTicket = ledger.start('unsubscribe');
    return new Promise((resolve) => {
      let cancel: (() => void) | undefined;
      const subscription = pool.checkOut().subscribe({
        next: (c) => {
          cancel?.();
          resolve(ledger.resolve(ticket) ? c : undefined);
        },
        error: (error: unknown) => {
          cancel?.();
          ledger.reject(ticket, error);
          resolve(undefined);
        },
      });
      if (ticket.outcome !== undefined) return; // settled during subscribe
      const leave = (): void => {
        if (ticket.outcome !== undefined) return;
        subscription.unsubscribe();
        ledger.unsubscribe(ticket);
        resolve(undefined);
      };
      if (delayMS === 0) leave();
      else cancel = this.timers.after(delayMS, leave);
    });
  }

  /** Runs one command on `connection` and checks it in. Resolves to whether the command succeeded. */
  private async use(connection: Connection, rng: SoakRandom): Promise<boolean> {
    try {
      await this.hold(rng);
      await connection.command(...command(rng));
      this.commands.ok++;
      return true;
    } catch (error) {
      this.commands.fail(error, COMMAND_ERRORS);
      return false;
    } finally {
      this.checkIn(connection);
    }
  }

  /** One time in ten, keeps the connection 1-10 ms before using it (more checkouts wait). */
  private hold(rng: SoakRandom): Promise<void> | undefined {
    return rng.chance(0.1) ? this.timers.sleep(rng.int(1, 10)) : undefined;
  }

  private checkIn(connection: Connection): void {
    try {
      this.targets.pool.checkIn(connection);
    } catch (error) {
      this.targets.violation(`checkIn of connection ${connection.id}, held by its checkout, threw ${errorName(error)}: ${(error as Error).message}`);
    }
  }
}

/** A command: `find` on `soak` (7 times in 10), else `ping` on `admin`. */
function command(rng: SoakRandom): [string, Record<string, unknown>] {
  return rng.chance(0.7) ? ['soak', { find: 'items', filter: {} }] : ['admin', { ping: 1 }];
}
