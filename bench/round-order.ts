/**
 * The order in which the benchmark measures its entries in each round. Rounds go in pairs: round 2k runs the entries
 * rotated by k, round 2k + 1 the same order reversed. Over any number of rounds, each entry then runs before each
 * other entry in as many rounds as after it, give or take one, so what drifts within a round (the machine warming up,
 * the garbage of the entry before) does not favour one entry of a compared pair; and the rotation moves every entry
 * through the first and last places.
 */
export function roundOrder<T>(entries: readonly T[], round: number): T[] {
  if (!Number.isInteger(round) || round < 0) throw new RangeError(`roundOrder: round ${round}; allowed: an integer ≥ 0`);
  const n = entries.length;
  const shift = n === 0 ? 0 : (round >> 1) % n;
  const rotated = [...entries.slice(shift), ...entries.slice(0, shift)];
  return round % 2 === 1 ? rotated.reverse() : rotated;
}
