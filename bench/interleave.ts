/**
 * Measuring the bench's ratios in interleaved slices. On a shared VM the machine's
 * speed drifts by a third within minutes, so a ratio built from two phases measured a minute apart
 * compares two machines: the same build's gRPC line can read 0.39x in one run and 0.85x in another.
 * The phases of one ratio therefore run as short slices in turn, round after round (the order
 * rotated each round), and each side is the sum of its slices: a slow patch falls on both sides.
 *
 * Each slice reports its latency quantiles on a fine grid; the slices' latencies are merged as the
 * mixture of their distributions (each weighted by its requests), so a merged p99 is the p99 of
 * all the requests of all the slices, to the grid's resolution.
 */

/** What one phase (or the merge of its slices) measured; latencies in ms. */
export type Load = {
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
  total: number;
  /** Measured seconds (the denominator of rps). */
  seconds: number;
  /** Latency (ms) at each of QUANTILE_PERCENTS, when the generator reports them. */
  quantiles?: number[];
};

/** The percents at which a slice reports its latency: 0.1, 0.2, … 99.9, then 99.95 and 99.99. */
export const QUANTILE_PERCENTS: readonly number[] = [...Array.from({ length: 999 }, (_, i) => (i + 1) / 10), 99.95, 99.99];

/** The latency at percent `p` of an ascending list of latencies (nearest rank, as the gRPC client always did). */
export function percentileOfSorted(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]!;
}

const round1 = (ms: number) => Math.round(ms * 10) / 10;

/**
 * The latency (ms) below which `p` percent of all the slices' requests fall, each slice's
 * distribution known at QUANTILE_PERCENTS: the smallest reported latency x whose mixture CDF,
 * sum over slices of requests_k * F_k(x) / all requests, reaches p.
 */
export function mergedPercentile(slices: ReadonlyArray<Pick<Load, 'total' | 'quantiles'>>, p: number): number {
  const weighted = slices.filter((s) => s.total > 0 && s.quantiles !== undefined && s.quantiles.length === QUANTILE_PERCENTS.length);
  const all = weighted.reduce((sum, s) => sum + s.total, 0);
  if (all === 0) return NaN;
  // F_k(x): the largest grid percent whose latency is <= x (quantiles ascend with the percent).
  const cdf = (q: readonly number[], x: number): number => {
    let lo = 0;
    let hi = q.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (q[mid]! <= x) lo = mid + 1;
      else hi = mid;
    }
    return lo === 0 ? 0 : QUANTILE_PERCENTS[lo - 1]!;
  };
  const candidates = [...new Set(weighted.flatMap((s) => s.quantiles!))].sort((a, b) => a - b);
  for (const x of candidates) {
    const f = weighted.reduce((sum, s) => sum + s.total * cdf(s.quantiles!, x), 0) / all;
    // A little slack for the floating-point sum: the grid's percents are exact to 1e-9.
    if (f >= p - 1e-9) return x;
  }
  return candidates[candidates.length - 1]!;
}

/**
 * The slices of one phase as one measurement: requests and seconds summed (so rps is over all of
 * them), failures summed, p50 and p99 from the merged latency distribution. Slices without
 * quantiles (a generator that reports none) fall back to the slowest slice's p50 and p99.
 */
export function mergeLoads(slices: readonly Load[]): Load {
  if (slices.length === 0) throw new Error('no slices to merge');
  if (slices.length === 1) return slices[0]!;
  const total = slices.reduce((sum, s) => sum + s.total, 0);
  const seconds = slices.reduce((sum, s) => sum + s.seconds, 0);
  const withQuantiles = slices.every((s) => s.quantiles !== undefined);
  return {
    rps: total / seconds,
    p50: withQuantiles ? round1(mergedPercentile(slices, 50)) : Math.max(...slices.map((s) => s.p50)),
    p99: withQuantiles ? round1(mergedPercentile(slices, 99)) : Math.max(...slices.map((s) => s.p99)),
    non2xx: slices.reduce((sum, s) => sum + s.non2xx, 0),
    errors: slices.reduce((sum, s) => sum + s.errors, 0),
    total,
    seconds,
  };
}

/** One side of an interleaved comparison: a slice of `seconds` of its load. */
export type Slicer = { name: string; slice: (seconds: number) => Promise<Load> };

/**
 * Runs every slicer `rounds` times for `sliceSeconds` each, in turn, the order rotated by one each
 * round (so no phase always follows the same one), and returns each one's merged measurement.
 * `around` wraps each slice (the bench counts the server's CPU over its own slices); `between`
 * runs after each one (the bench waits there for what the slice left in flight to finish).
 */
export async function interleave(
  slicers: readonly Slicer[], rounds: number, sliceSeconds: number,
  around: (name: string, run: () => Promise<Load>) => Promise<Load> = (_name, run) => run(),
  between: () => Promise<void> = async () => {},
): Promise<Map<string, Load>> {
  const slices = new Map<string, Load[]>(slicers.map((s) => [s.name, []]));
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < slicers.length; i++) {
      const s = slicers[(i + r) % slicers.length]!;
      slices.get(s.name)!.push(await around(s.name, () => s.slice(sliceSeconds)));
      await between();
    }
  }
  return new Map([...slices].map(([name, list]) => [name, mergeLoads(list)]));
}
