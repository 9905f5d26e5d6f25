/**
 * The available connections (CMAP "availableConnections") as an intrusive doubly linked list, oldest-available at the
 * head. Checkout takes from the tail (the most recently used connection), so unused connections age at the head,
 * where idle pruning finds them. Every operation is O(1).
 *
 * Source: CMAP spec, "Checking Out a Connection" (any available connection may be chosen), "Idle" (maxIdleTimeMS).
 */

/** What the list links: a connection record with its two links (undefined while not available). */
export interface AvailableLinks<R> {
  prev: R | undefined;
  next: R | undefined;
}

/** The available connections, oldest-available first. */
export class AvailableConnections<R extends AvailableLinks<R>> {
  head: R | undefined;
  tail: R | undefined;
  size = 0;

  /** Appends `r` as the most recently available. */
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
