/**
 * The soak's checkout ledger: every checkout the load starts is entered here, and every way it ends (a connection
 * delivered, an error, the caller unsubscribing first) is recorded against it. A checkout that ends twice, or with an
 * error its form cannot have, is a violation at once; one still open at a quiescent point is a violation there.
 */

/**
 * How a checkout was made: `promise` (awaited), `abort` (awaited with an AbortSignal that fires after 0-3 ms),
 * `observable` (subscribed), `unsubscribe` (subscribed, unsubscribed after 0-3 ms unless delivered), `withConnection`,
 * `withConnection$` (under an RxJS `timeout` of 1-30 ms), `burst` (awaited, held 60-150 ms to fill the pool).
 */
export type CheckOutForm = 'promise' | 'abort' | 'observable' | 'unsubscribe' | 'withConnection' | 'withConnection$' | 'burst';

/** Errors any checkout may fail with under the soak's faults. */
const CHECKOUT_ERRORS: ReadonlySet<string> = new Set([
  'PoolClearedError', // paused by a clear, or evicted from the WaitQueue by one
  'WaitQueueTimeoutError',
  'MongoNetworkError', // the establishment it started failed (handshake fail point, socket closed)
  'MongoNetworkTimeoutError',
  'MongoServerError', // the handshake was refused (handshake fail point with an error code)
]);

/** Extra errors of one form: an AbortSignal's cancellation. */
const FORM_ERRORS: Partial<Record<CheckOutForm, ReadonlySet<string>>> = {
  abort: new Set(['CheckOutCancelledError']),
};

/** One checkout in the ledger. */
export interface CheckOutTicket {
  /** 1, 2, 3, ... in start order. */
  readonly id: number;
  readonly form: CheckOutForm;
  /** How it ended, once it did. */
  outcome: 'resolved' | 'rejected' | 'unsubscribed' | undefined;
}

/** The name of an error (its class name for rxcmap's errors), or its type when it is not an Error. */
export function errorName(error: unknown): string {
  return error instanceof Error ? error.name : typeof error;
}

/** Every checkout of a soak run and how each ended. */
export class CheckOutLedger {
  /** Checkouts started. */
  started = 0;
  /** Checkouts that delivered a connection. */
  resolved = 0;
  /** Checkouts the caller left (unsubscribed, or a `timeout` operator did) before a connection was delivered. */
  unsubscribed = 0;
  /** Checkouts that failed, by error name. */
  readonly rejected = new Map<string, number>();
  /** Checkouts started, by form. */
  readonly forms = new Map<CheckOutForm, number>();
  private readonly open = new Set<CheckOutTicket>();
  private nextId = 1;

  /** @param violation records a violation (a message naming the checkout and what went wrong). */
  constructor(private readonly violation: (message: string) => void) {}

  /** Enters a checkout about to be started. */
  start(form: CheckOutForm): CheckOutTicket {
    const ticket: CheckOutTicket = { id: this.nextId++, form, outcome: undefined };
    this.started++;
    this.forms.set(form, (this.forms.get(form) ?? 0) + 1);
    this.open.add(ticket);
    return ticket;
  }

  /** The checkout delivered a connection. False (and a violation) if it had already ended. */
  resolve(ticket: CheckOutTicket): boolean {
    if (!this.end(ticket, 'resolved')) return false;
    this.resolved++;
    return true;
  }

  /** The checkout failed with `error`; a violation if it had already ended or its form cannot fail so. */
  reject(ticket: CheckOutTicket, error: unknown): void {
    if (!this.end(ticket, 'rejected')) return;
    const name = errorName(error);
    this.rejected.set(name, (this.rejected.get(name) ?? 0) + 1);
    if (!CHECKOUT_ERRORS.has(name) && FORM_ERRORS[ticket.form]?.has(name) !== true) {
      this.violation(`checkout #${ticket.id} (${ticket.form}) failed with an unexpected ${name}: ${(error as Error)?.message ?? String(error)}`);
    }
  }

  /** The caller left the checkout before a connection was delivered. A violation if it had already ended. */
  unsubscribe(ticket: CheckOutTicket): void {
    if (this.end(ticket, 'unsubscribed')) this.unsubscribed++;
  }

  /** Checkouts started and not yet ended. */
  get outstanding(): number {
    return this.open.size;
  }

  /** Checkouts that ended (each exactly once). */
  get settled(): number {
    return this.resolved + this.unsubscribed + [...this.rejected.values()].reduce((a, b) => a + b, 0);
  }

  /** How many failed with the error named `name`. */
  rejectedWith(name: string): number {
    return this.rejected.get(name) ?? 0;
  }

  /** The violations of a quiescent point: checkouts still open (never settled), described by form and id. */
  check(): string[] {
    const violations: string[] = [];
    if (this.open.size > 0) {
      const open = [...this.open];
      const shown = open.slice(0, 5).map((t) => `#${t.id} (${t.form})`).join(', ');
      violations.push(`${open.length} checkout(s) never settled at a quiescent point: ${shown}${open.length > 5 ? ', ...' : ''}`);
    }
    if (this.settled + this.open.size !== this.started) {
      violations.push(`checkouts started ${this.started} != settled ${this.settled} + open ${this.open.size}`);
    }
    return violations;
  }

  /** Each figure of the ledger, for the JSON summary. */
  toJSON(): Record<string, unknown> {
    return {
      started: this.started,
      settled: this.settled,
      resolved: this.resolved,
      unsubscribed: this.unsubscribed,
      rejected: Object.fromEntries([...this.rejected].sort()),
      forms: Object.fromEntries([...this.forms].sort()),
    };
  }

  private end(ticket: CheckOutTicket, outcome: NonNullable<CheckOutTicket['outcome']>): boolean {
    if (ticket.outcome !== undefined) {
      this.violation(`checkout #${ticket.id} (${ticket.form}) settled twice: ${ticket.outcome}, then ${outcome}`);
      return false;
    }
    ticket.outcome = outcome;
    this.open.delete(ticket);
    return true;
  }
}
