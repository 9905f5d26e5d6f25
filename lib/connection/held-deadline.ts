/**
 * A deadline that can be held: its timer is stopped while held, and armed again, once the last hold is released, with
 * the time it had left. MONGODB-OIDC's human workflow holds the establishment's connectTimeoutMS, or a command's
 * timeoutMS on reauthentication, while a person signs in (their callback has 5 minutes whatever those deadlines), so
 * that only the steps that talk to the server stay bounded by them.
 *
 * Source: auth spec, "OIDC Human Callback" (the timeout duration MUST be 5 minutes); extension: the hold.
 */
export class HeldDeadline {
  private timer: { clear(): void } | undefined;
  /** When the deadline passes (on `now`, ms), while it runs. */
  private deadlineAt: number;
  private holds = 0;
  /** What the deadline had left when the first hold stopped it, in ms. */
  private leftMS = 0;
  private ended = false;

  /**
   * `arm(delayMS)` starts the timer that enforces the deadline (its callback is the caller's: a failure, an abort) and
   * returns what clears it; it runs now with `delayMS` (none when `delayMS` is 0: no deadline, nothing to hold). `now`:
   * the clock the time left is read on, in ms.
   */
  constructor(
    private readonly arm: (delayMS: number) => { clear(): void },
    delayMS: number,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.deadlineAt = now() + delayMS;
    this.timer = delayMS > 0 ? arm(delayMS) : undefined;
  }

  /**
   * Holds the deadline and returns what releases this hold (once; later calls do nothing). Nothing is held when the
   * deadline is ended, has passed, or never ran; holds nest, and the timer is armed again when the last is released.
   */
  readonly hold = (): (() => void) => {
    if (this.ended || (this.timer === undefined && this.holds === 0)) return () => undefined;
    if (this.holds === 0) {
      const leftMS = this.deadlineAt - this.now();
      // Passed already: its timer fires (or has fired) as it would have.
      if (leftMS <= 0) return () => undefined;
      this.leftMS = leftMS;
      this.timer?.clear();
      this.timer = undefined;
    }
    this.holds++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      if (--this.holds > 0 || this.ended) return;
      this.deadlineAt = this.now() + this.leftMS;
      this.timer = this.arm(this.leftMS);
    };
  };

  /** Ends the deadline: its timer cleared, never armed again. Idempotent. */
  end(): void {
    this.ended = true;
    this.timer?.clear();
    this.timer = undefined;
  }
}
