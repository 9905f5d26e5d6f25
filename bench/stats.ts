/** Small statistics and formatting helpers for the benchmark report. */

export function median(values: number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** The p-th percentile (0..100) of the first `count` values of `samples`. */
export function percentile(samples: Float64Array, count: number, p: number): number {
  if (count === 0) return Number.NaN;
  const sorted = samples.slice(0, count).sort();
  return sorted[Math.min(count - 1, Math.floor((p / 100) * count))];
}

/** Formats a number compactly: 1234567 → "1.23M". */
export function human(n: number): string {
  if (!Number.isFinite(n)) return 'n/a';
  if (Math.abs(n) >= 1e6) return `${(n / 1e6).toFixed(2)}M`;
  if (Math.abs(n) >= 1e3) return `${(n / 1e3).toFixed(1)}k`;
  if (Math.abs(n) >= 100) return n.toFixed(0);
  return n.toFixed(2);
}

/** `peer / ours` as `0.42×`; `n/a` unless `peer` is finite and `ours` positive. */
export function ratio(peer: number, ours: number): string {
  return Number.isFinite(peer) && ours > 0 ? `${(peer / ours).toFixed(2)}×` : 'n/a';
}

/**
 * `peer / ours` for a target `peer ≥ min × ours`: as {@link ratio}, with a third decimal when two would read as the
 * other side of `min` (a miss at 0.9494 shows 0.949×, not 0.95×).
 */
export function ratioAgainst(peer: number, ours: number, min: number): string {
  if (!(Number.isFinite(peer) && ours > 0)) return 'n/a';
  const share = peer / ours;
  const shown = Number(share.toFixed(2));
  return (shown >= min) === (share >= min) ? `${share.toFixed(2)}×` : `${share.toFixed(3)}×`;
}

/**
 * Per-round ratios of two entries measured in the same rounds: `ours[i] / before[i]`, in round order. Pairing reduces
 * the effect of what changes between rounds (the machine's speed drifts by more than the effects measured), though not
 * of what changes within one. Throws a RangeError when the two have different lengths, which would pair samples of
 * different rounds.
 */
export function pairedRatios(ours: readonly number[], before: readonly number[]): number[] {
  if (ours.length !== before.length) throw new RangeError(`pairedRatios: ${ours.length} samples against ${before.length}; pairs need one of each per round`);
  return ours.map((x, i) => x / before[i]);
}

/**
 * The median of `values` (finite numbers) with a distribution-free confidence interval for it (the sign test's order
 * statistics, which assume the values independent): the k-th smallest and k-th largest values, k the largest rank with
 * P(Binomial(n, 1/2) < k) ≤ (1 − confidence) / 2, so that the interval holds the true median with at least `confidence`
 * (default 0.95; each end one-sided at (1 + confidence) / 2). With too few values for that (n ≤ 5 at 0.95), `low` and
 * `high` are NaN. Throws a RangeError when `confidence` is not strictly between 0 and 1 or a value is not finite.
 */
export function medianInterval(values: readonly number[], confidence = 0.95): { median: number; low: number; high: number } {
  if (!(confidence > 0 && confidence < 1)) throw new RangeError(`medianInterval: confidence ${confidence}; allowed: a number strictly between 0 and 1`);
  const bad = values.find((v) => !Number.isFinite(v));
  if (bad !== undefined) throw new RangeError(`medianInterval: value ${bad}; allowed: finite numbers only`);
  const n = values.length;
  const sorted = [...values].sort((a, b) => a - b);
  const tail = (1 - confidence) / 2;
  // Binomial(n, 1/2) probabilities in log space: 0.5 ** n underflows to 0 from n = 1075 on.
  const logHalfN = n * Math.log(0.5);
  let k = 0; // ranks 1..k below the interval's low end have cumulative probability ≤ tail
  let cumulative = 0;
  let logChoose = 0; // log C(n, j)
  for (let j = 0; j < n; j++) {
    cumulative += Math.exp(logChoose + logHalfN); // P(B ≤ j)
    if (cumulative > tail) break;
    k = j + 1;
    logChoose += Math.log(n - j) - Math.log(j + 1); // log C(n, j + 1)
  }
  const ok = k >= 1;
  return { median: median(sorted), low: ok ? sorted[k - 1] : Number.NaN, high: ok ? sorted[n - k] : Number.NaN };
}

/** The cost a target `share ≥ min` allows, as a whole percentage: 0.95 → `5%`. */
export function costShare(min: number): string {
  return `${Math.round((1 - min) * 100)}%`;
}

/** `1 caller`, `100 callers`. */
export function callersLabel(n: number): string {
  return `${n} caller${n === 1 ? '' : 's'}`;
}

/** A markdown table. */
export function table(header: string[], rows: string[][]): string {
  const line = (cells: string[]): string => `| ${cells.join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}

/** Formats a duration in µs: 0.42, 3.1, 250. */
export function micros(n: number): string {
  if (!Number.isFinite(n)) return 'n/a';
  if (Math.abs(n) < 10) return n.toFixed(2);
  if (Math.abs(n) < 100) return n.toFixed(1);
  return n.toFixed(0);
}
