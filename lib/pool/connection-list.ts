/**
 * A list of connection records as an intrusive doubly linked list. The pool keeps two: the available connections
 * (CMAP "availableConnections"), oldest-available at the head, and the connections in use, oldest checkout at the head
 * (a record is in one or the other, never both, so they share its links). Checkout takes from the available list's
 * tail (the most recently used connection), so unused connections age at its head, where idle pruning finds them; the
 * in-use list's head is the checkout that has held its connection longest, which a WaitQueue timeout's holdings and
 * leak detection read without a pass over every connection. Every operation is O(1).
 *
 * Source: CMAP spec, "Checking Out a Connection" (any available connection may be chosen), "Idle" (maxIdleTimeMS);
 * the in-use list: extension (see PoolHoldings and leakDetectionThresholdMS).
 */

/** What the list links: a connection record with its two links (undefined while in neither list). */
export interface ListLinks<R> {
  prev: R | undefined;
  next: R | undefined;
}

/** A list of connection records, in the order they were appended (the oldest at the head). */
export class ConnectionList<R extends ListLinks<R>> {
  head: R | undefined;
  tail: R | undefined;
  size = 0;

  /** Appends `r` as the newest. */
  push(r: R): void {
    r.prev = this.tail;
    r.next = undefined;
    if (this.tail) this.tail.next = r;
    else this.head = r;
    this.tail = r;
    this.size++;
  }

  /** Empties the list without reading it (a fault may have left it inconsistent); unlinking the records is the caller's part. */
  clear(): void {
    this.head = this.tail = undefined;
    this.size = 0;
  }

  /** Unlinks `r`, which must be in the list. */
  remove(r: R): void {
    if (r.prev) r.prev.next = r.next;
    else this.head = r.next;
    if (r.next) r.next.prev = r.prev;
    else this.tail = r.prev;
    r.prev = r.next = undefined;
    this.size--;
  }
}
