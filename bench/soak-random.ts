/**
 * The soak's seeded randomness: every choice the soak makes (which checkout form, which fault, how long to wait)
 * comes from one of these, so a seed replays the same schedule of choices. Draws come from fast-check's generator,
 * as an unbiased stream of 32-bit integers kept without history (memory stays flat however long the soak runs).
 */
import * as fc from 'fast-check';

const TWO_POW_32 = 2 ** 32;

/** A seeded source of random choices. */
export class SoakRandom {
  private readonly stream: Iterator<number>;

  /** @param seed any safe integer; the same seed gives the same sequence of draws. */
  constructor(readonly seed: number) {
    const draws = fc.infiniteStream(fc.noBias(fc.integer({ min: 0, max: TWO_POW_32 - 1 })), { noHistory: true });
    this.stream = fc.sample(draws, { seed, numRuns: 1 })[0];
  }

  /** A number in [0, 1). */
  unit(): number {
    return (this.stream.next().value as number) / TWO_POW_32;
  }

  /** An integer in [min, max] (both included). */
  int(min: number, max: number): number {
    return min + Math.floor(this.unit() * (max - min + 1));
  }

  /** True with probability `p` (0 to 1). */
  chance(p: number): boolean {
    return this.unit() < p;
  }

  /** One of `choices`, each picked with a probability proportional to its weight (> 0). */
  weighted<T>(choices: readonly (readonly [T, number])[]): T {
    const total = choices.reduce((sum, [, weight]) => sum + weight, 0);
    let at = this.unit() * total;
    for (const [choice, weight] of choices) {
      if (at < weight) return choice;
      at -= weight;
    }
    return choices[choices.length - 1][0];
  }

  /**
   * An independent source seeded from this one's next draw: one per actor (each worker, the fault injector), so
   * each actor's own choices replay with the seed whatever the interleaving of their I/O.
   */
  fork(): SoakRandom {
    return new SoakRandom(this.int(0, 0x7fffffff));
  }
}
