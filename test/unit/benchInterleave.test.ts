import { describe, expect, it } from 'vitest';
import { interleave, mergedPercentile, mergeLoads, percentileOfSorted, QUANTILE_PERCENTS, type Load } from '../../bench/interleave.js';

/** A deterministic pseudo-random stream (the test must say the same thing every run). */
function lcg(seed: number): () => number {
  let x = seed >>> 0;
  return () => {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    return x / 2 ** 32;
  };
}

/** A slice as a generator would report it: its own latencies known only at the grid's percents. */
function slice(latencies: number[], seconds: number): Load {
  const sorted = [...latencies].sort((a, b) => a - b);
  return {
    rps: sorted.length / seconds, p50: percentileOfSorted(sorted, 50), p99: percentileOfSorted(sorted, 99),
    non2xx: 0, errors: 0, total: sorted.length, seconds, quantiles: QUANTILE_PERCENTS.map((p) => percentileOfSorted(sorted, p)),
  };
}

describe('bench: interleaved slices', () => {
  it('merges slices into the rate over all their seconds, failures summed', () => {
    const merged = mergeLoads([
      { rps: 100, p50: 1, p99: 2, non2xx: 1, errors: 0, total: 300, seconds: 3 },
      { rps: 50, p50: 3, p99: 9, non2xx: 0, errors: 2, total: 150, seconds: 3 },
    ]);
    expect(merged.total).toBe(450);
    expect(merged.seconds).toBe(6);
    expect(merged.rps).toBe(75);
    expect(merged.non2xx).toBe(1);
    expect(merged.errors).toBe(2);
    // Without latency grids: the slowest slice's percentiles, never a flattering one.
    expect(merged.p50).toBe(3);
    expect(merged.p99).toBe(9);
  });

  it("merged p50 and p99 are those of all the slices' requests together, to the grid's resolution", () => {
    const rand = lcg(7);
    // Three slices from different machine states: fast and tight, slow, and a long tail.
    const a = Array.from({ length: 9000 }, () => 5 + rand() * 5);
    const b = Array.from({ length: 4000 }, () => 15 + rand() * 20);
    const c = Array.from({ length: 6000 }, () => (rand() < 0.05 ? 80 + rand() * 100 : 8 + rand() * 4));
    const union = [...a, ...b, ...c].sort((x, y) => x - y);
    const slices = [slice(a, 3), slice(b, 3), slice(c, 3)];
    for (const p of [50, 90, 99, 99.9]) {
      const merged = mergedPercentile(slices, p);
      // Each slice is known at 0.1% steps, so the merge may land a step either side.
      expect(merged).toBeGreaterThanOrEqual(percentileOfSorted(union, p - 0.2));
      expect(merged).toBeLessThanOrEqual(percentileOfSorted(union, p + 0.2));
    }
    // The merge is not the average of the slices' p99s (which would hide c's tail behind a and b).
    const p99 = mergeLoads(slices).p99;
    expect(p99).toBeGreaterThan(80);
    expect(Math.abs(p99 - percentileOfSorted(union, 99))).toBeLessThan(10);
  });

  it('a single slice is reported as it was measured', () => {
    const only = slice([1, 2, 3, 4], 1);
    expect(mergeLoads([only])).toBe(only);
  });

  it('runs every phase once per round, the order rotated each round, each summed over its slices', async () => {
    const order: string[] = [];
    const phase = (name: string, perSecond: number) => ({
      name,
      slice: async (seconds: number): Promise<Load> => {
        order.push(name);
        return { rps: perSecond, p50: 1, p99: 2, non2xx: 0, errors: 0, total: perSecond * seconds, seconds };
      },
    });
    const wrapped: string[] = [];
    const result = await interleave([phase('a', 10), phase('b', 20), phase('c', 30)], 3, 2, async (name, run) => {
      wrapped.push(name);
      return run();
    }, async () => {
      order.push('|');
    });
    // Each slice is followed by the wait between slices, before the next one starts.
    expect(order).toEqual(['a', '|', 'b', '|', 'c', '|', 'b', '|', 'c', '|', 'a', '|', 'c', '|', 'a', '|', 'b', '|']);
    expect(wrapped).toEqual(order.filter((x) => x !== '|'));
    expect(result.get('a')!.total).toBe(60);
    expect(result.get('a')!.seconds).toBe(6);
    expect(result.get('b')!.rps).toBe(20);
    expect(result.get('c')!.rps).toBe(30);
  });
});
