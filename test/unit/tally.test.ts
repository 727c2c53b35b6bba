import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, test } from 'vitest';
import { createCounterTally, createHistogramTally } from '../../src/observability/tally.js';

/**
 * The per-request metrics are tallied by hand for speed (src/observability/tally.ts); a scrape
 * must read exactly what prom-client wrote for the same observations, so dashboards and alerts
 * built on the earlier output keep working.
 */
const BOUNDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const VALUES = [0, 0.0004, 0.001, 0.00100001, 0.003, 0.01, 0.7, 1, 2.5000001, 9.99, 10, 11, 1e6, 0.05];
const LABELS: Array<[string, string]> = [['/api/sign', '200'], ['/api/approvals/{id}/status', '4xx'], ['we"ird\\route\nx', '5xx'], ['/api/sign', '403']];

async function promText(build: (r: Registry) => void): Promise<string> {
  const registry = new Registry();
  build(registry);
  return registry.metrics();
}

describe('tally', () => {
  test('behavior: a histogram renders line for line what prom-client renders for the same observations', async () => {
    const ours = createHistogramTally('h_seconds', 'Help with a \\ and a\nnewline', ['route', 'outcome'], BOUNDS);
    const expected = await promText((registry) => {
      const theirs = new Histogram({ name: 'h_seconds', help: 'Help with a \\ and a\nnewline', labelNames: ['route', 'outcome'], buckets: BOUNDS, registers: [registry] });
      for (const [i, v] of VALUES.entries()) {
        const [route, outcome] = LABELS[i % LABELS.length]!;
        theirs.labels(route, outcome).observe(v);
        ours.observe(v, route, outcome);
      }
    });
    expect(`${ours.render()}\n`).toBe(expected);
  });

  test('behavior: counters with one or several labels render what prom-client renders', async () => {
    const one = createCounterTally('c_total', 'One label', ['outcome']);
    const three = createCounterTally('d_total', 'Three labels', ['type', 'outcome', 'reason']);
    const expected = await promText((registry) => {
      const c = new Counter({ name: 'c_total', help: 'One label', labelNames: ['outcome'], registers: [registry] });
      const d = new Counter({ name: 'd_total', help: 'Three labels', labelNames: ['type', 'outcome', 'reason'], registers: [registry] });
      for (const o of ['x402', 'mpp', 'x402', 'unreachable', 'x402']) {
        c.labels(o).inc();
        one.inc(o);
      }
      for (const [t, o, r] of [['eip3009', 'allowed', 'none'], ['invalid', 'error', 'unsupported_type'], ['eip3009', 'allowed', 'none']] as const) {
        d.labels(t, o, r).inc();
        three.inc(t, o, r);
      }
    });
    expect(`${one.render()}\n\n${three.render()}\n`).toBe(expected);
  });

  test('edge: nothing observed yet is HELP and TYPE alone, as prom-client writes a labelled metric without series', async () => {
    const expected = await promText((registry) => {
      new Counter({ name: 'c_total', help: 'h', labelNames: ['a'], registers: [registry] });
      new Histogram({ name: 'h_seconds', help: 'h', labelNames: ['a'], buckets: [1], registers: [registry] });
    });
    expect(`${createCounterTally('c_total', 'h', ['a']).render()}\n\n${createHistogramTally('h_seconds', 'h', ['a'], [1]).render()}\n`).toBe(expected);
  });

  test('error: a value that is not a finite number is left out rather than poisoning the sum', () => {
    const h = createHistogramTally('h_seconds', 'h', ['a'], [1]);
    h.observe(NaN, 'x');
    h.observe(Infinity, 'x');
    h.observe(0.5, 'x');
    expect(h.render()).toContain('h_seconds_count{a="x"} 1');
    expect(h.render()).toContain('h_seconds_sum{a="x"} 0.5');
  });
});
