/**
 * Watching key derivations in tests: an event-loop ticker (it cannot tick while the loop is blocked) and a spy on the
 * salted-password derivations a MongoCredentials starts.
 */
import type { MongoCredentials } from '../../lib';

/** Counts the turns of the event loop: a 2 ms interval timer, which cannot fire while the loop is blocked. */
export function ticker(): { readonly ticks: number; stop(): void } {
  let ticks = 0;
  const timer = setInterval(() => ticks++, 2);
  return {
    get ticks(): number {
      return ticks;
    },
    stop: () => clearInterval(timer),
  };
}

/** One salted-password derivation seen by {@link spyOnDerivations}. */
export interface Derivation {
  /** Whether it has ended. */
  settled: boolean;
  /** The ticks counted from its start to its end. */
  ticksWhileRunning: number;
  /** Resolves when it ends (whatever its outcome). */
  done: Promise<void>;
}

/** Records every salted-password derivation `creds` starts: whether it ended, the ticks while it ran, its end. */
export function spyOnDerivations(creds: MongoCredentials, tick: { readonly ticks: number }): Derivation[] {
  const derivations: Derivation[] = [];
  const original = creds.saltedPassword.bind(creds);
  creds.saltedPassword = (key, derive) =>
    original(key, () => {
      const startTicks = tick.ticks;
      const result = derive();
      const derivation: Derivation = { settled: false, ticksWhileRunning: 0, done: Promise.resolve() };
      const settle = (): void => {
        derivation.settled = true;
        derivation.ticksWhileRunning = tick.ticks - startTicks;
      };
      derivation.done = Promise.resolve(result).then(settle, settle);
      derivations.push(derivation);
      return result;
    });
  return derivations;
}
