import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { interleave } from './interleave.js';
import { connectSignSpecFor, cpuMeter, createBenchAgents, drained, keepLog, load, loadWrk, memoryOf, signSpecFor, stop, toAutocannon, waitForLine, WRK, type Boot } from './harness.js';

/**
 * `node dist/bench/ab.js`: an A/B of the sign path, for a change too small to see across two
 * bench runs on a shared VM (their phases drift by a third within minutes). Both servers are up at
 * once, each on a data directory of its own with the bench's agents, and the sign load alternates
 * between them in slices (bench/interleave.ts), so both meet the machine in the same states.
 *
 * Options: --a-root / --b-root, a checkout with its own dist/ (e.g. a `git worktree` of the
 * baseline, built), default this one; --a-flags / --b-flags, node flags for that side's server;
 * --line, the load: `sign` (default), POST /api/sign, or `connect`, the same payments as Connect JSON
 * Sign calls; --rounds (default 6) and --slice seconds (default 3). Write a flag with `=`: `--b-flags=--max-semi-space-size=32`.
 * Prints each side's rate, latencies, CPU per payment by thread and memory, and B's rate and CPU over A's.
 */
const here = fileURLToPath(new URL('../..', import.meta.url));
const { values } = parseArgs({
  options: {
    'a-root': { type: 'string', default: here },
    'b-root': { type: 'string', default: here },
    'a-flags': { type: 'string', default: '' },
    'b-flags': { type: 'string', default: '' },
    line: { type: 'string', default: 'sign' },
    rounds: { type: 'string', default: '6' },
    slice: { type: 'string', default: '3' },
  },
});

const specFor = ({ sign: signSpecFor, connect: connectSignSpecFor } as Record<string, typeof signSpecFor | undefined>)[values.line];
if (!specFor) throw new Error(`--line is sign or connect, not ${values.line}`);

type Side = { name: 'A' | 'B'; root: string; flags: string[] };
const sides: Side[] = [
  { name: 'A', root: values['a-root'], flags: values['a-flags'].split(' ').filter(Boolean) },
  { name: 'B', root: values['b-root'], flags: values['b-flags'].split(' ').filter(Boolean) },
];

const dirs = sides.map(() => mkdtempSync(join(tmpdir(), 'paypolicy-ab-')));
const servers = sides.map((side, i) => spawn(process.execPath, [...side.flags, join(side.root, 'bin/paypolicy.js'), 'serve', '--port', '0', '--data-dir', dirs[i]!, '--log-level', 'info'], {
  stdio: ['ignore', 'pipe', 'inherit'],
}));
try {
  const ready = await Promise.all(sides.map(async (_side, i) => {
    const [, base] = await waitForLine(servers[i]!, /(http:\/\/127\.0\.0\.1:\d+)/);
    keepLog(servers[i]!);
    const boot = JSON.parse(readFileSync(join(dirs[i]!, 'bootstrap.json'), 'utf8')) as Boot;
    return { base: base!, spec: specFor(boot, await createBenchAgents(base!, boot)) };
  }));
  const run = (i: number, seconds: number) => (WRK ? loadWrk(ready[i]!.base, ready[i]!.spec, seconds, dirs[i]!) : load(ready[i]!.base, [toAutocannon(ready[i]!.spec)], seconds));
  for (let i = 0; i < sides.length; i++) await run(i, 3);
  const meters = new Map(sides.map((side, i) => [side.name, cpuMeter(servers[i]!.pid!)] as const));
  const rounds = Number(values.rounds);
  const slice = Number(values.slice);
  process.stderr.write(`A/B (${values.line}): ${rounds} interleaved rounds of ${slice} s slices each…\n`);
  const measured = await interleave(sides.map((side, i) => ({ name: side.name, slice: (t: number) => run(i, t) })), rounds, slice,
    (name, work) => meters.get(name as 'A' | 'B')!.measure(work), async () => {
      await Promise.all(ready.map((r) => drained(r.base)));
    });
  const cpuUs = (report: string) => Number(/^(\d+) µs/.exec(report)?.[1]);
  for (const [i, side] of sides.entries()) {
    const l = measured.get(side.name)!;
    const memory = memoryOf(servers[i]!.pid!);
    process.stdout.write(`${side.name} (${side.root}${side.flags.length ? ` ${side.flags.join(' ')}` : ''}): ${l.rps.toFixed(0)} req/s, p50 ${l.p50} / p99 ${l.p99} ms, ` +
      `${l.non2xx + l.errors} failed of ${l.total}; CPU ${meters.get(side.name)!.report()}; RSS ${memory.rssMb} MB (peak ${memory.hwmMb})\n`);
  }
  const [a, b] = [measured.get('A')!, measured.get('B')!];
  process.stdout.write(`B/A: rate ${(b.rps / a.rps).toFixed(3)}x, CPU per payment ${(cpuUs(meters.get('B')!.report()) / cpuUs(meters.get('A')!.report())).toFixed(3)}x\n`);
  if (a.non2xx + a.errors + b.non2xx + b.errors > 0) process.exitCode = 1;
} finally {
  await Promise.all(servers.map(stop));
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
}
