/** Virtual time for pool tests: an RxJS VirtualTimeScheduler that can be advanced to an exact time. */
import { VirtualTimeScheduler } from 'rxjs';

export class VirtualClock extends VirtualTimeScheduler {
  /** Runs every timer due up to now + ms, in order, and leaves the clock at exactly now + ms. */
  advance(ms: number): void {
    const target = this.now() + ms;
    this.schedule(() => undefined, ms);
    this.maxFrames = target;
    this.flush();
    this.maxFrames = Infinity;
  }
}

/** Lets pending promise reactions run. */
export function microtasks(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
