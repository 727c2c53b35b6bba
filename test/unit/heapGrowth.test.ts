import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { transformSync } from 'esbuild';
import { describe, expect, test } from 'vitest';
import { HEAP_GROWING_PERCENT, limitHeapGrowth } from '../../src/server/heapGrowth.js';

/**
 * limitHeapGrowth sets a V8 flag after V8 has started; these tests check, in fresh node
 * processes, that the running heap really follows it (a Node upgrade that ignored a flag set at
 * run time would fail here rather than silently bring back the old resident memory).
 */

/** src/server/heapGrowth.ts as a module a child process can import (type-stripped, no build needed). */
function moduleUrl(): string {
  const source = readFileSync(new URL('../../src/server/heapGrowth.ts', import.meta.url), 'utf8');
  const { code } = transformSync(source, { loader: 'ts', format: 'esm' });
  return `data:text/javascript,${encodeURIComponent(code)}`;
}

/**
 * Keeps ~40 MB live and churns objects that live long enough to be promoted out of the young
 * generation and die in the old one (what in-flight requests do in the server); prints the
 * largest old-generation size seen.
 */
const WORKLOAD = `
import { getHeapSpaceStatistics } from 'node:v8';
if (process.env.LIMIT === '1') {
  const { limitHeapGrowth } = await import(process.env.HEAP_GROWTH_MODULE);
  if (!limitHeapGrowth([], '')) throw new Error('not applied');
}
const live = [];
for (let i = 0; i < 300_000; i++) live.push({ i, s: 'x' + i, a: [i, i + 1] });
const ring = new Array(250_000);
let peak = 0;
for (let n = 0; n < 4_000_000; n++) {
  ring[n % ring.length] = { n, t: 'y' + n, b: [n] };
  if (n % 10_000 === 0) peak = Math.max(peak, getHeapSpaceStatistics().find((s) => s.space_name === 'old_space').space_size);
}
process.stdout.write(JSON.stringify({ peakMb: peak / 1048576, kept: live.length + ring.length }));
`;

async function peakOldSpaceMb(limit: boolean): Promise<number> {
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', WORKLOAD], {
    env: { ...process.env, NODE_OPTIONS: '', LIMIT: limit ? '1' : '0', HEAP_GROWTH_MODULE: moduleUrl() },
  });
  return (JSON.parse(stdout) as { peakMb: number }).peakMb;
}

describe('limitHeapGrowth', () => {
  test(`behavior: set at run time, the old generation stays far below V8's default growth (--heap-growing-percent=${HEAP_GROWING_PERCENT})`, async () => {
    const [unlimited, limited] = await Promise.all([peakOldSpaceMb(false), peakOldSpaceMb(true)]);
    // Measured: about 327 MB by default, 169 MB limited.
    expect(limited).toBeLessThan(unlimited * 0.7);
  });

  test('behavior: an operator\'s own --heap-growing-percent, on the command line or in NODE_OPTIONS, wins', () => {
    expect(limitHeapGrowth(['--heap-growing-percent=30'], '')).toBe(false);
    expect(limitHeapGrowth(['--max-old-space-size=512'], '--heap_growing_percent=30')).toBe(false);
    expect(limitHeapGrowth([], '--max-old-space-size=512 --heap-growing-percent=0')).toBe(false);
  });
});
