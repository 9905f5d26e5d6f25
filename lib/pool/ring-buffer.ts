/**
 * RingBuffer: the pool's one FIFO, a growable ring buffer. O(1) push and shift; a removed slot is cleared at once,
 * so nothing removed stays reachable from it (a dead entry promoted to old space would otherwise keep later ones
 * alive). The pool's input lanes and the WaitQueue are built on it.
 */

/** A FIFO of values: O(1) amortised push, O(1) shift and peek. */
export class RingBuffer<T> {
  private items: (T | undefined)[] = new Array(16);
  private head = 0;
  private count = 0;

  /** How many values it holds. */
  get size(): number {
    return this.count;
  }

  /** Appends `value` at the tail. */
  push(value: T): void {
    if (this.count === this.items.length) this.grow();
    this.items[(this.head + this.count) & (this.items.length - 1)] = value;
    this.count++;
  }

  /** The value at the head, without removing it; undefined when empty. */
  peek(): T | undefined {
    return this.count === 0 ? undefined : this.items[this.head];
  }

  /** Removes and returns the value at the head; undefined when empty. */
  shift(): T | undefined {
    if (this.count === 0) return undefined;
    const value = this.items[this.head];
    this.items[this.head] = undefined;
    this.head = (this.head + 1) & (this.items.length - 1);
    this.count--;
    return value;
  }

  /** Calls `visit` with each value, head to tail, without removing any. */
  forEach(visit: (value: T) => void): void {
    for (let i = 0; i < this.count; i++) visit(this.items[(this.head + i) & (this.items.length - 1)] as T);
  }

  /** Keeps only the values `keep` accepts, in order (O(size)); for compacting lazily deleted entries. */
  retain(keep: (value: T) => boolean): void {
    const kept: T[] = [];
    for (let i = 0; i < this.count; i++) {
      const value = this.items[(this.head + i) & (this.items.length - 1)] as T;
      if (keep(value)) kept.push(value);
    }
    let capacity = 16;
    while (capacity < kept.length) capacity *= 2;
    this.items = new Array(capacity);
    for (let i = 0; i < kept.length; i++) this.items[i] = kept[i];
    this.head = 0;
    this.count = kept.length;
  }

  /** Capacity doubles (it stays a power of two, so indices wrap with a mask). */
  private grow(): void {
    const next: (T | undefined)[] = new Array(this.items.length * 2);
    for (let i = 0; i < this.count; i++) next[i] = this.items[(this.head + i) & (this.items.length - 1)];
    this.items = next;
    this.head = 0;
  }
}
