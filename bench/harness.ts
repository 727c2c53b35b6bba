import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { AdminService, ApiKeyMode } from '../gen/paypolicy/v1/admin_pb.js';
import { QUANTILE_PERCENTS, type Load } from './interleave.js';

/**
 * What the bench's runners share (bench/run.ts, bench/ab.ts): the load generators, the child
 * processes' lines, the per-thread CPU and memory of a process, and the bench's agents.
 */

export const CONNECTIONS = 64;
export const DURATION_S = Number(process.env.BENCH_SECONDS ?? 10);
export const AGENTS = 256;
export const RECIPIENT = '0x2096aBCdEf0123456789aBCDeF0123456789287C';

/** What a first run of the server writes into its data directory (bootstrap.ts). */
export type Boot = { admin_token: string; org_id: string; api_key: string; treasury_address: string };

/**
 * The bench's AGENTS agents in the bootstrap organization, each allowed to pay RECIPIENT with a
 * cap and an approval threshold no bench reaches, created through the admin API.
 */
export async function createBenchAgents(base: string, boot: Boot): Promise<string[]> {
  const admin = createClient(AdminService, createConnectTransport({ baseUrl: base, httpVersion: '1.1' }));
  const auth = { headers: { authorization: `Bearer ${boot.admin_token}` } };
  const agents: string[] = [];
  for (let i = 0; i < AGENTS; i++) {
    const { agent } = await admin.createAgent({ orgId: boot.org_id, name: `bench-${i}` }, auth);
    await admin.setPolicy({ agentId: agent!.id, allowlist: [RECIPIENT], spendCapUsd: '1000000000', approvalThresholdUsd: '1000000' }, auth);
    agents.push(agent!.id);
  }
  return agents;
}

/**
 * A second organization for the budgets line: AGENTS agents like createBenchAgents', each with four
 * window limits (a count per minute, an amount per hour, per 30 days, and per day for RECIPIENT)
 * and the organization with a day's limit, none of which the bench reaches: every payment is
 * checked against all five and the cap, and allowed.
 */
export async function createLimitedAgents(base: string, boot: Boot): Promise<{ apiKey: string; agents: string[] }> {
  const admin = createClient(AdminService, createConnectTransport({ baseUrl: base, httpVersion: '1.1' }));
  const auth = { headers: { authorization: `Bearer ${boot.admin_token}` } };
  const { organization } = await admin.createOrganization({ name: 'bench-limits' }, auth);
  const orgId = organization!.id;
  await admin.provisionTreasury({ orgId }, auth);
  await admin.updateOrganization({ orgId, limits: { items: [{ window: '24h', maxUsd: '1000000000' }] } }, auth);
  const { plaintextKey } = await admin.createApiKey({ orgId, mode: ApiKeyMode.LIVE, label: 'bench-limits' }, auth);
  const limits = {
    items: [
      { window: '1m', maxCount: 1_000_000_000 }, { window: '1h', maxUsd: '1000000000' }, { window: '30d', maxUsd: '1000000000' },
      { window: '24h', maxUsd: '1000000000', recipient: RECIPIENT.toLowerCase() },
    ],
  };
  const agents: string[] = [];
  for (let i = 0; i < AGENTS; i++) {
    const { agent } = await admin.createAgent({ orgId, name: `bench-limits-${i}` }, auth);
    await admin.setPolicy({ agentId: agent!.id, allowlist: [RECIPIENT], spendCapUsd: '1000000000', approvalThresholdUsd: '1000000', limits }, auth);
    agents.push(agent!.id);
  }
  return { apiKey: plaintextKey, agents };
}

/**
 * Waits until the server has no agent request in flight (its /metrics gauge), at most 5 s. A load
 * generator stopped mid-flight leaves up to its connection count of requests running in the
 * server; the next slice's requests on top of those could pass the organization's share of the
 * admission gate (96 of 128) and be refused 503, as they should be (one quote of 91,519 was, in a
 * full run). The wait keeps a slice from meeting its predecessor's leftovers. A build older than
 * the gauge (an A/B's baseline) gets a fixed pause instead.
 */
export async function drained(base: string): Promise<void> {
  const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
  for (let waited = 0; waited < 5000; waited += 20) {
    const inFlight = /^paypolicy_requests_in_flight (\d+)$/m.exec(await (await fetch(`${base}/metrics`)).text())?.[1];
    if (inFlight === undefined) return void (await pause(500));
    if (inFlight === '0') return;
    await pause(20);
  }
  throw new Error(`${base} still had requests in flight after 5 s`);
}

/** The sign phase's requests: one eip3009 payment of $0.01 per agent, in turn. */
export function signSpecFor(boot: Boot, agents: readonly string[]): Spec {
  return {
    method: 'POST', path: '/api/sign', headers: { authorization: `Bearer ${boot.api_key}`, 'content-type': 'application/json' },
    bodies: agents.map((id) => JSON.stringify({ agent_id: id, type: 'eip3009', recipient_address: RECIPIENT, amount_usd: 0.01 })),
  };
}

/** The same payments as Connect JSON calls of PaymentPolicyService.Sign (unary POST, HTTP/1.1). */
export function connectSignSpecFor(boot: Boot, agents: readonly string[]): Spec {
  return {
    method: 'POST', path: '/paypolicy.v1.PaymentPolicyService/Sign',
    headers: { authorization: `Bearer ${boot.api_key}`, 'content-type': 'application/json', 'connect-protocol-version': '1' },
    bodies: agents.map((id) => JSON.stringify({ agentId: id, type: 'PAYMENT_TYPE_EIP3009', recipientAddress: RECIPIENT, amountUsd: '0.01' })),
  };
}

export function waitForLine(child: ChildProcess, pattern: RegExp): Promise<RegExpMatchArray> {
  return new Promise((resolve, reject) => {
    let buf = '';
    const onData = (d: Buffer) => {
      buf += d.toString();
      const m = pattern.exec(buf);
      if (m) {
        child.stdout!.off('data', onData);
        resolve(m);
      }
    };
    child.stdout!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`process exited (${code}) before it was ready:\n${buf}`)));
  });
}

export async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await exited;
}

/**
 * The load generator. wrk (C, Debian's `wrk` package) when installed, because it leaves more of
 * the two cores to the server under test; autocannon (JavaScript, from npm) otherwise. Every
 * phase of one run uses the same generator, so the ratios compare like with like.
 */
export const WRK = process.env.BENCH_LOADGEN !== 'autocannon' && existsSync('/usr/bin/wrk') ? '/usr/bin/wrk' : undefined;

export type Spec = { method: 'POST'; path: string; headers: Record<string, string>; bodies: string[] };

export function luaString(s: string): string {
  return `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
}

/** The same spec for autocannon: each request takes the next body. */
export function toAutocannon(spec: Spec): autocannon.Request {
  let turn = 0;
  return {
    method: spec.method, path: spec.path, headers: spec.headers,
    setupRequest: (req) => ({ ...req, body: spec.bodies[turn++ % spec.bodies.length]! }),
  };
}

/** Runs wrk with a script that cycles through the request bodies; latencies come back in µs. */
export async function loadWrk(base: string, spec: Spec, seconds: number, dir: string): Promise<Load> {
  const script = join(dir, `load-${Math.random().toString(36).slice(2)}.lua`);
  const headers = Object.entries(spec.headers).map(([k, v]) => `[${luaString(k)}] = ${luaString(v)}`).join(', ');
  writeFileSync(script, [
    `local bodies = { ${spec.bodies.map(luaString).join(', ')} }`,
    'local i = 0',
    'request = function()',
    '  i = i + 1',
    `  return wrk.format(${luaString(spec.method)}, ${luaString(spec.path)}, { ${headers} }, bodies[(i % #bodies) + 1])`,
    'end',
    `local percents = { ${QUANTILE_PERCENTS.join(', ')} }`,
    'done = function(summary, latency, requests)',
    '  local e = summary.errors',
    '  io.write(string.format("RESULT %d %d %d %d %d %d\\n", summary.requests, summary.duration, latency:percentile(50), latency:percentile(99), e.status, e.connect + e.read + e.write + e.timeout))',
    '  local q = {}',
    '  for i, p in ipairs(percents) do q[i] = string.format("%d", latency:percentile(p)) end',
    '  io.write("QUANTILES " .. table.concat(q, " ") .. "\\n")',
    'end',
  ].join('\n'));
  const out = await new Promise<string>((resolve, reject) => {
    // wrk counts an answer slower than its default 2 s timeout as a socket error, not a latency;
    // 10 s keeps slow answers (the submit phase against a busy local node) in the percentiles.
    const child = spawn(WRK!, ['-t2', `-c${CONNECTIONS}`, `-d${seconds}s`, '--timeout', '10s', '-s', script, base], { stdio: ['ignore', 'pipe', 'inherit'] });
    let text = '';
    child.stdout.on('data', (d: Buffer) => (text += d.toString()));
    child.once('exit', (code) => (code === 0 ? resolve(text) : reject(new Error(`wrk exited with ${code}:\n${text}`))));
  });
  const m = /RESULT (\d+) (\d+) (\d+) (\d+) (\d+) (\d+)/.exec(out);
  if (!m) throw new Error(`wrk printed no result:\n${out}`);
  const [, total, durationUs, p50, p99, non2xx, errors] = m.map(Number) as number[];
  // Latencies in µs from wrk, kept in ms.
  const quantiles = /QUANTILES ([\d ]+)/.exec(out)?.[1]!.trim().split(' ').map((us) => Number(us) / 1000);
  return {
    rps: total! / (durationUs! / 1e6), p50: Math.round(p50! / 100) / 10, p99: Math.round(p99! / 100) / 10, non2xx: non2xx!, errors: errors!, total: total!,
    seconds: durationUs! / 1e6, ...(quantiles?.length === QUANTILE_PERCENTS.length ? { quantiles } : {}),
  };
}

export async function load(url: string, requests: autocannon.Request[], seconds = DURATION_S): Promise<Load> {
  const result = await autocannon({ url, connections: CONNECTIONS, duration: seconds, requests, pipelining: 1 });
  return {
    rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99,
    non2xx: result.non2xx, errors: result.errors + result.timeouts, total: result.requests.total, seconds: result.duration,
  };
}


export type Memory = { rssMb: number; hwmMb: number };

/** The server's resident memory now and at its peak (VmRSS, VmHWM of /proc/<pid>/status), in MB. */
export function memoryOf(pid: number): Memory {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
  return { rssMb: Math.round(kb('VmRSS') / 1024), hwmMb: Math.round(kb('VmHWM') / 1024) };
}

/**
 * Drains the server's log (one line per request at info level, as in production). With
 * BENCH_SERVER_LOG=file the lines are appended there, to see what a failed request was answered.
 */
export function keepLog(child: ChildProcess): void {
  const file = process.env.BENCH_SERVER_LOG;
  if (file) child.stdout!.pipe(createWriteStream(file, { flags: 'a' }));
  else child.stdout!.resume();
}

/** CPU ticks (user + system, 1/100 s) each thread of a process has used so far, by thread name. */
export function threadTicks(pid: number): Map<string, number> {
  const ticks = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    } catch {
      continue; // the thread ended meanwhile
    }
    // The name sits in parentheses and may contain spaces; the fields after it are fixed.
    const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    // BENCH_THREADS=1 keeps each thread apart (Node's worker, libuv and V8 helper threads share names).
    const name = Number(tid) === pid ? 'main' : process.env.BENCH_THREADS ? `${comm}#${tid}` : comm;
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    ticks.set(name, (ticks.get(name) ?? 0) + Number(fields[11]) + Number(fields[12]));
  }
  return ticks;
}

/** Bytes the process has caused to be written to storage so far (the WAL, the checkpoints): /proc/<pid>/io. */
export function storageWrites(pid: number): number {
  return Number(/^write_bytes: (\d+)$/m.exec(readFileSync(`/proc/${pid}/io`, 'utf8'))?.[1] ?? NaN);
}

/**
 * The CPU a process spends per answered request, in µs per thread name, and the storage it wrote
 * per request (KiB; the page cache writes it back later, but a page is counted when it is dirtied,
 * so this is what the phase's commits and checkpoints cost), summed over every load `measure` ran.
 */
export function cpuMeter(pid: number): { measure: (work: () => Promise<Load>) => Promise<Load>; windowOpens: () => void; report: () => string } {
  const ticks = new Map<string, number>();
  let written = 0;
  let requests = 0;
  let before = new Map<string, number>();
  let writtenBefore = 0;
  const open = () => {
    before = threadTicks(pid);
    writtenBefore = storageWrites(pid);
  };
  return {
    async measure(work) {
      open();
      const load = await work();
      for (const [name, t] of threadTicks(pid)) ticks.set(name, (ticks.get(name) ?? 0) + t - (before.get(name) ?? 0));
      written += storageWrites(pid) - writtenBefore;
      requests += load.total;
      return load;
    },
    // A generator that warms up inside its slice says when its measured window opens.
    windowOpens: open,
    report() {
      const us = (t: number) => Math.round((t * 10_000) / Math.max(1, requests));
      const parts = [...ticks].map(([name, t]) => [name, us(t)] as const).filter(([, v]) => v > 0).sort((a, b) => b[1] - a[1]);
      const total = parts.reduce((sum, [, v]) => sum + v, 0);
      return `${total} µs (${parts.map(([n, v]) => `${n} ${v}`).join(', ')}); ${(written / 1024 / Math.max(1, requests)).toFixed(1)} KiB written`;
    },
  };
}

