/**
 * The WaitQueue and its members. A checkout request is a {@link Waiter}; the pool keeps two FIFO queues of them: the
 * WaitQueue proper (waiting for an available connection or an establishment slot) and the claimants (checkouts that
 * left the WaitQueue holding a claim on a connection being established).
 *
 * Cancellation is O(1): {@link WaitQueue.remove} marks the waiter and drops it lazily when it reaches the head; the
 * queue compacts itself when the removed outnumber the members, so abandoned checkouts never stay reachable in bulk.
 *
 * Source: CMAP spec, "WaitQueue" (FIFO, waitQueueTimeoutMS), "Checking Out a Connection".
 */
import { RingBuffer } from './ring-buffer';

/**
 * Where a checkout request is:
 * - `new`: created, its checkOut action not yet processed;
 * - `queued`: in the WaitQueue (waitQueueTimeoutMS applies);
 * - `claimant`: left the WaitQueue holding a claim on a connection being established (waitQueueTimeoutMS still
 *   applies when it claimed an establishment it did not start: its `deadline` is then kept);
 * - `done`: the pool committed its outcome (delivery or failure), or it was cancelled.
 */
export type WaiterState = 'new' | 'queued' | 'claimant' | 'done';

/**
 * One checkout request, and how its outcome reaches the requester: each checkOut front end (Promise, Observable)
 * is a subclass. Its `state` is written by the reducer (and by the queues it is a member of) only.
 *
 * Small on purpose (many may wait at once): the times are stored only when something needs them, so an untimed
 * waiter carries no number boxes.
 */
/** Checks `connection` back in for `waiter`, its holder: for a delivery its requester left after all. */
export type GiveBack<C> = (connection: C, waiter: Waiter<C>) => void;

export abstract class Waiter<C> {
  state: WaiterState = 'new';
  /** Clock time (ms) of ConnectionCheckOutStarted; undefined when nothing needed it timed. */
  startedAt: number | undefined = undefined;
  /**
   * Clock time (ms) after which the waiter times out of the WaitQueue (or of waiting on an establishment it claimed
   * but did not start); undefined for none.
   */
  deadline: number | undefined = undefined;

  /**
   * Hands the connection over. Returns false when the requester is gone (unsubscribed, aborted); the pool then
   * checks the connection back in, so it is never stranded. A waiter that cannot tell yet (see the Observable form's)
   * returns true and, should its requester turn out to be gone, calls `giveBack` later instead.
   */
  abstract deliver(connection: C, giveBack: GiveBack<C>): boolean;

  /** Fails the checkout. Ignored when the requester is gone. */
  abstract fail(error: Error): void;
}

/**
 * A FIFO of waiters in one state (`queued` or `claimant`), with O(1) removal of any member, in two lanes: high-priority
 * waiters (`checkOut({ priority: 'high' })`) come out before every normal one, each lane FIFO. The high lane is made
 * on its first member, so a pool without priority checkouts never pays for it.
 */
export class WaitQueue<C> {
  /** The normal lane. */
  private readonly buffer = new RingBuffer<Waiter<C>>();
  private high: RingBuffer<Waiter<C>> | undefined = undefined;
  private members = 0;
  /**
   * The waiters shifted out since {@link beginStep} (the first `takenCount` slots): where a fault of the pool in the
   * middle of a step finds the ones it took out but had not yet placed (see {@link takeAll}). The array is reused from
   * step to step, so shifting allocates nothing once it has grown to the most a step takes.
   */
  private readonly taken: (Waiter<C> | undefined)[] = [];
  private takenCount = 0;

  /** @param memberState the state a waiter has while it is a member of this queue. */
  constructor(private readonly memberState: 'queued' | 'claimant') {}

  /** The number of members (removed waiters not counted). */
  get length(): number {
    return this.members;
  }

  /** Appends `w` to its lane (high priority, or normal) and gives it this queue's member state. */
  push(w: Waiter<C>, high = false): void {
    w.state = this.memberState;
    (high ? (this.high ??= new RingBuffer<Waiter<C>>()) : this.buffer).push(w);
    this.members++;
  }

  /** The oldest member: of the high lane when it has one, else of the normal lane. */
  peek(): Waiter<C> | undefined {
    return this.head(this.hasHigh() ? this.high! : this.buffer);
  }

  /** Whether the high lane has a member (one check while it was never used). */
  hasHigh(): boolean {
    return this.high !== undefined && this.head(this.high) !== undefined;
  }

  /** The oldest member of one lane (high priority, or normal), if any. */
  peekLane(high: boolean): Waiter<C> | undefined {
    const lane = high ? this.high : this.buffer;
    return lane === undefined ? undefined : this.head(lane);
  }

  /** Removes and returns the oldest member (see {@link peek}); the caller gives it its next state. */
  shift(): Waiter<C> | undefined {
    return this.shiftLane(this.hasHigh());
  }

  /** Removes and returns the oldest member of one lane, if any. */
  shiftLane(high: boolean): Waiter<C> | undefined {
    const lane = high ? this.high : this.buffer;
    if (lane === undefined || this.head(lane) === undefined) return undefined;
    this.members--;
    const w = lane.shift()!;
    this.taken[this.takenCount++] = w;
    return w;
  }

  /**
   * Removes member `w` in O(1) amortised: it is marked `done` and dropped when it reaches the head, or when the queue
   * compacts (once removed waiters outnumber members). Returns false when `w` is not a member. `w` is marked last, after
   * any compaction (which drops it with the removed waiters), so a fault while compacting leaves it a member.
   */
  remove(w: Waiter<C>): boolean {
    if (w.state !== this.memberState) return false;
    const left = this.members - 1;
    const removed = this.buffer.size + (this.high?.size ?? 0) - left;
    if (removed > 64 && removed > left) {
      const isMember = (x: Waiter<C>): boolean => x.state === this.memberState && x !== w;
      this.buffer.retain(isMember);
      this.high?.retain(isMember);
    }
    w.state = 'done';
    this.members = left;
    return true;
  }

  /**
   * Removes member `w` as {@link remove} does, and counts it among the waiters taken out in this step (see
   * {@link takeAll}): the caller owes it an outcome, as it does one it shifted out. Returns false when `w` is not a
   * member.
   */
  take(w: Waiter<C>): boolean {
    if (!this.remove(w)) return false;
    this.taken[this.takenCount++] = w;
    return true;
  }

  /** The members, in the order they would come out, leaving them members: O(size), for a short queue (the claimants). */
  toArray(): Waiter<C>[] {
    const out: Waiter<C>[] = [];
    for (const lane of [this.high, this.buffer]) {
      if (lane === undefined) continue;
      lane.forEach((w) => {
        if (w.state === this.memberState) out.push(w);
      });
    }
    return out;
  }

  /** Removes every member, returning them in the order they would have come out (their state is the caller's to set). */
  drain(): Waiter<C>[] {
    const out: Waiter<C>[] = [];
    for (let w = this.shift(); w !== undefined; w = this.shift()) out.push(w);
    return out;
  }

  /** A step of the pool begins: the waiters shifted out in the step before were all placed. */
  beginStep(): void {
    if (this.takenCount === 0) return;
    for (let i = 0; i < this.takenCount; i++) this.taken[i] = undefined; // placed: not kept from the collector
    this.takenCount = 0;
  }

  /**
   * Empties the queue whatever state a fault left it in, returning every waiter it may owe an outcome: those shifted
   * out since {@link beginStep} (whatever their state says), then its members.
   */
  takeAll(): Waiter<C>[] {
    const all = this.taken.slice(0, this.takenCount) as Waiter<C>[];
    this.taken.length = this.takenCount = 0;
    for (const lane of [this.high, this.buffer]) {
      if (lane === undefined) continue;
      for (let w = lane.shift(); w !== undefined; w = lane.shift()) if (w.state === this.memberState) all.push(w);
    }
    this.members = 0;
    return all;
  }

  /** The head member of a lane, dropping removed waiters in front of it. */
  private head(lane: RingBuffer<Waiter<C>>): Waiter<C> | undefined {
    for (let w = lane.peek(); w !== undefined; w = lane.peek()) {
      if (w.state === this.memberState) return w;
      lane.shift();
    }
    return undefined;
  }
}
