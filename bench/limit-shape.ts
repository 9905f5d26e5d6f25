/**
 * The shape's floor: the limit's FIFO pool of plain objects (no events, no generations, no timeouts, no options)
 * rebuilt on the shape rxcmap is built on, to show what that shape costs any pool before any pool work:
 *
 * - `acquire()` returns a lazy thenable: its first `then` sends a checkout action into a {@link PoolInput} (the same
 *   serialized two-lane input the pool uses);
 * - `scan` folds each action into the state, which leaves its effects as commands (deliver an item to a waiter);
 * - a runner performs each step's commands in order; a waiter settles its `then` on a microtask, as rxcmap's does;
 * - `release(item)` is an action through the same input.
 *
 * Everything rxcmap does beyond that (CMAP's states, generations, perished checks, the WaitQueue's lanes and
 * deadlines, the events, holders, cancellation) is left out.
 */
import { scan } from 'rxjs';
import { PoolInput } from '../lib/pool/pool-input';

const SETTLED = Promise.resolve();

/** One checkout: its item once delivered, or the `then` waiting for it. */
class ShapeWaiter<T> {
  delivered = false;
  item: T | undefined = undefined;
  onfulfilled: ((item: T) => unknown) | undefined = undefined;
  resolve: ((value: unknown) => void) | undefined = undefined;

  deliver(item: T): void {
    this.delivered = true;
    this.item = item;
    const { onfulfilled, resolve } = this;
    if (resolve !== undefined) void SETTLED.then(() => resolve(onfulfilled === undefined ? item : onfulfilled(item)));
  }
}

type ShapeAction<T> = { readonly type: 'checkOut'; readonly waiter: ShapeWaiter<T> } | { readonly type: 'checkIn'; readonly item: T };
type ShapeCommand<T> = { readonly type: 'deliver'; readonly waiter: ShapeWaiter<T>; readonly item: T };

interface ShapeState<T> {
  readonly free: T[];
  readonly queue: ShapeWaiter<T>[];
  head: number;
  commands: ShapeCommand<T>[];
}

function reduce<T>(s: ShapeState<T>, a: ShapeAction<T>): ShapeState<T> {
  const out: ShapeCommand<T>[] = [];
  s.commands = out;
  if (a.type === 'checkOut') {
    const item = s.free.pop();
    if (item !== undefined) out.push({ type: 'deliver', waiter: a.waiter, item });
    else s.queue.push(a.waiter);
  } else if (s.head < s.queue.length) {
    const waiter = s.queue[s.head];
    s.queue[s.head++] = undefined as unknown as ShapeWaiter<T>;
    if (s.head > 1024 && s.head * 2 > s.queue.length) {
      s.queue.splice(0, s.head);
      s.head = 0;
    }
    out.push({ type: 'deliver', waiter, item: a.item });
  } else {
    s.free.push(a.item);
  }
  return s;
}

/** The lazy checkout of {@link ShapePool.acquire}: nothing is sent until its first `then`. */
class ShapeRequest<T> implements PromiseLike<T> {
  private waiter: ShapeWaiter<T> | undefined;

  constructor(private readonly input: PoolInput<ShapeAction<T>>) {}

  then<A = T, B = never>(onfulfilled?: ((item: T) => A | PromiseLike<A>) | null): Promise<A | B> {
    let waiter = this.waiter;
    if (waiter === undefined) {
      waiter = this.waiter = new ShapeWaiter<T>();
      this.input.next({ type: 'checkOut', waiter });
    }
    const callback = onfulfilled ?? undefined;
    if (waiter.delivered) {
      const item = waiter.item as T;
      return SETTLED.then(() => (callback === undefined ? item : callback(item))) as Promise<A | B>;
    }
    const w = waiter;
    return new Promise<unknown>((resolve) => {
      w.onfulfilled = callback;
      w.resolve = resolve;
    }) as Promise<A | B>;
  }
}

/** The limit's pool on rxcmap's shape (see the file's comment). */
export class ShapePool<T> {
  private readonly input = new PoolInput<ShapeAction<T>>(() => false);

  constructor(items: T[]) {
    const state: ShapeState<T> = { free: [...items], queue: [], head: 0, commands: [] };
    this.input.pipe(scan(reduce<T>, state)).subscribe((s) => {
      const commands = s.commands;
      for (let i = 0; i < commands.length; i++) commands[i].waiter.deliver(commands[i].item);
    });
  }

  acquire(): PromiseLike<T> {
    return new ShapeRequest(this.input);
  }

  release(item: T): void {
    this.input.next({ type: 'checkIn', item });
  }
}
