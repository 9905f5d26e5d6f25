/**
 * Runs one CMAP format test against a pool, following the test format README: threads, operations, the expected
 * error of the main thread, and the expected events (after `ignore`), matched with MATCH.
 */
import type { ConnectionPool, ConnectionPoolEvent, ConnectionPoolOptions, PoolConnection } from '../../lib';
import { mismatch } from './match';
import type { CmapOperation, CmapSpecFile } from './spec-file';

/** Builds the pool under test from the file's poolOptions (options the target does not know are passed through). */
export type PoolMaker = (options: Omit<ConnectionPoolOptions<PoolConnection>, 'address'> & Record<string, unknown>) => ConnectionPool<PoolConnection>;

const DEFAULT_WAIT_FOR_EVENT_MS = 10_000;

class Thread {
  private chain: Promise<void> = Promise.resolve();
  error: unknown;

  schedule(work: () => Promise<void>): void {
    this.chain = this.chain.then(async () => {
      if (this.error !== undefined) return;
      try {
        await work();
      } catch (error) {
        this.error = error;
      }
    });
  }

  async join(): Promise<void> {
    await this.chain;
    if (this.error !== undefined) throw this.error;
  }

  settled(): Promise<void> {
    return this.chain;
  }
}

/** Runs `spec` on a pool made by `makePool`; rejects with an Error that says what did not match. */
export async function runCmapTest(spec: CmapSpecFile, makePool: PoolMaker): Promise<void> {
  const pool = makePool({ ...(spec.poolOptions ?? {}) });
  const events: ConnectionPoolEvent[] = [];
  const listeners = new Set<() => void>();
  const subscription = pool.events$.subscribe((event) => {
    events.push(event);
    for (const listener of listeners) listener();
  });
  const threads = new Map<string, Thread>();
  const labels = new Map<string, PoolConnection>();

  const waitForEvent = (type: string, count: number, timeoutMS: number): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      const check = (): boolean => events.filter((e) => e.type === type).length >= count;
      if (check()) return resolve();
      const timer = setTimeout(() => {
        listeners.delete(listener);
        const seen = events.filter((e) => e.type === type).length;
        reject(new Error(`waitForEvent: saw ${seen} of ${count} ${type} events within ${timeoutMS} ms`));
      }, timeoutMS);
      const listener = (): void => {
        if (!check()) return;
        clearTimeout(timer);
        listeners.delete(listener);
        resolve();
      };
      listeners.add(listener);
    });

  const execute = async (op: CmapOperation): Promise<void> => {
    switch (op.name) {
      case 'start':
        threads.set(op.target!, new Thread());
        return;
      case 'wait':
        await new Promise((r) => setTimeout(r, op.ms));
        return;
      case 'waitForThread': {
        const thread = threads.get(op.target!);
        if (!thread) throw new Error(`waitForThread: no thread ${op.target}`);
        await thread.join();
        return;
      }
      case 'waitForEvent':
        await waitForEvent(op.event!, op.count!, op.timeout ?? DEFAULT_WAIT_FOR_EVENT_MS);
        return;
      case 'checkOut': {
        const connection = await pool.checkOut();
        if (op.label !== undefined) labels.set(op.label, connection);
        return;
      }
      case 'checkIn': {
        const connection = labels.get(op.connection!);
        if (!connection) throw new Error(`checkIn: no connection labelled ${op.connection}`);
        pool.checkIn(connection);
        return;
      }
      case 'clear':
        pool.clear({ interruptInUseConnections: op.interruptInUseConnections ?? false });
        return;
      case 'close':
        pool.close();
        return;
      case 'ready':
        pool.ready();
        return;
      default:
        throw new Error(`unknown operation ${(op as CmapOperation).name}`);
    }
  };

  let mainError: unknown;
  try {
    for (const op of spec.operations) {
      if (op.thread !== undefined) {
        const thread = threads.get(op.thread);
        if (!thread) throw new Error(`operation ${op.name} names thread ${op.thread}, which was not started`);
        thread.schedule(() => execute(op));
      } else {
        await execute(op);
      }
    }
  } catch (error) {
    mainError = error;
  }
  const actual = events.filter((e) => !(spec.ignore ?? []).includes(e.type));

  // Tear down: close the pool (failing any checkout still waiting), let the threads finish, stop listening.
  pool.close();
  for (const connection of labels.values()) {
    try {
      pool.checkIn(connection);
    } catch {
      // already checked in by the test
    }
  }
  await Promise.race([
    Promise.allSettled([...threads.values()].map((t) => t.settled())),
    new Promise((r) => setTimeout(r, 2000)),
  ]);
  subscription.unsubscribe();

  if (spec.error !== undefined) {
    if (mainError === undefined) throw new Error(`expected the main thread to fail with ${JSON.stringify(spec.error)}, it did not`);
    const err = mainError as Error & { address?: string };
    const m = mismatch({ type: err.name, message: err.message, address: err.address }, spec.error, 'error');
    if (m) throw new Error(`${m}\n  actual error: ${err.name}: ${err.message}`);
  } else if (mainError !== undefined) {
    throw mainError;
  }
  for (const [i, expected] of (spec.events ?? []).entries()) {
    if (i >= actual.length) {
      throw new Error(`expected event ${i} ${JSON.stringify(expected)}, but only ${actual.length} events were seen:\n${describe(actual)}`);
    }
    const m = mismatch(actual[i], expected, `events[${i}]`);
    if (m) throw new Error(`${m}\nactual events:\n${describe(actual)}`);
  }
}

function describe(events: ConnectionPoolEvent[]): string {
  return events
    .map((e, i) => {
      const { address: _a, time: _t, ...rest } = e as ConnectionPoolEvent & { error?: unknown };
      if ('error' in rest) (rest as { error?: unknown }).error = String((rest as { error?: unknown }).error);
      return `  ${i}: ${JSON.stringify(rest)}`;
    })
    .join('\n');
}
