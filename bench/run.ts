import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { createPublicClient, http as viemHttp, type Hex } from 'viem';
import { privateKeyToAccount, generatePrivateKey } from 'viem/accounts';
import { ExactEvmScheme } from '@x402/evm/exact/client';
import { interleave, type Load, type Slicer } from './interleave.js';
import {
  CONNECTIONS, connectSignSpecFor, cpuMeter, createBenchAgents, createLimitedAgents, drained, DURATION_S, keepLog, load, loadWrk, memoryOf, RECIPIENT, signSpecFor, stop, toAutocannon,
  waitForLine, WRK, type Boot, type Memory, type Spec,
} from './harness.js';

/**
 * `npm run bench`: the speed goals of paypolicy, each measured against baselines taken in the
 * same run on the same machine. The load generator (autocannon, this process) shares the cores
 * with the server under test, as it would on a small self-hosted box.
 */

/**
 * The ratio phases run interleaved (bench/interleave.ts): BENCH_ROUNDS rounds of one slice each,
 * every slice a whole number of seconds (wrk's -d), so each phase is measured for about DURATION_S.
 */
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 4));
const SLICE_S = Math.max(1, Math.ceil(DURATION_S / ROUNDS));
/** The submit phase's chain (Base Sepolia's id, so raw transactions pay its USDC) and that USDC's address. */
const SUBMIT_CHAIN = 84532;
const SUBMIT_USDC = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';
const root = fileURLToPath(new URL('../..', import.meta.url));

/** A paywall on loopback answering every request with an x402 v2 challenge ($0.01 USDC, Base Sepolia). */
function startPaywall(): Promise<{ url: string; port: number; close: () => void }> {
  const challenge = Buffer.from(JSON.stringify({
    x402Version: 2, error: 'Payment required', resource: { url: 'http://127.0.0.1/paid', description: 'bench', mimeType: '' },
    accepts: [{
      scheme: 'exact', network: 'eip155:84532', amount: '10000', asset: '0x036CbD53842c5426634e7929541eC2318f3dCF7e',
      payTo: RECIPIENT, maxTimeoutSeconds: 300, extra: { name: 'USDC', version: '2' },
    }],
  })).toString('base64');
  const server = http.createServer((_req, res) => {
    res.writeHead(402, { 'payment-required': challenge, 'content-type': 'application/json' });
    res.end('{}');
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => {
    const { port } = server.address() as { port: number };
    resolve({ url: `http://127.0.0.1:${port}/paid`, port, close: () => server.close() });
  }));
}

/**
 * The x402 reference client (@x402/evm ExactEvmScheme) signing payments in this process, one
 * after another: a slice reports how many it signed (as a Load, without latencies).
 */
async function referenceClient(): Promise<(seconds: number) => Promise<Load>> {
  const scheme = new ExactEvmScheme(privateKeyToAccount(generatePrivateKey()));
  const requirements = {
    scheme: 'exact', network: 'eip155:8453' as const, amount: '10000', asset: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
    payTo: RECIPIENT, maxTimeoutSeconds: 300, extra: { name: 'USD Coin', version: '2' },
  };
  for (let i = 0; i < 50; i++) await scheme.createPaymentPayload(2, requirements);
  return async (seconds) => {
    let n = 0;
    const start = performance.now();
    while (performance.now() - start < seconds * 1000) {
      await scheme.createPaymentPayload(2, requirements);
      n++;
    }
    const elapsed = (performance.now() - start) / 1000;
    return { rps: n / elapsed, p50: NaN, p99: NaN, non2xx: 0, errors: 0, total: n, seconds: elapsed };
  };
}

/** The flood's answers by status, for the report line. */
type FloodResult = { total: number; byStatus: Array<[status: number, count: number]> };

/** Starts bench/signInFlood.ts in its own process, so it does not share the load generator's event loop. */
async function startSignInFlood(base: string): Promise<{ stop: () => Promise<FloodResult> }> {
  const child = spawn(process.execPath, [join(root, 'dist/bench/signInFlood.js'), base, String(CONNECTIONS)], { stdio: ['pipe', 'pipe', 'inherit'] });
  await waitForLine(child, /^flooding$/m);
  return {
    async stop() {
      const result = waitForLine(child, /^result (.+)$/m);
      child.stdin!.end();
      const [, json] = await result;
      await new Promise((r) => child.once('exit', r));
      return JSON.parse(json!) as FloodResult;
    },
  };
}

/**
 * The overload phase (bench/flood2k.ts): 2,000 connections flooding /api/sign on a server of its
 * own, its report printed as it comes. A server that answers a health check late or signs nothing
 * after the flood fails the run.
 */
async function flood2k(): Promise<void> {
  process.stderr.write('POST /api/sign from 2,000 connections ignoring Retry-After, health checks alongside…\n');
  const child = spawn(process.execPath, [join(root, 'dist/bench/flood2k.js')], { stdio: ['ignore', 'pipe', 'inherit'] });
  let text = '';
  child.stdout.on('data', (d: Buffer) => (text += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  const [, json] = /^result (.+)$/m.exec(text) ?? [];
  process.stdout.write(`\noverload (BENCH_ONLY=flood2k):\n${text.replace(/^result .+\n?/m, '')}`);
  const result = json ? (JSON.parse(json) as { after: number; healthz?: { max: number; failed: number } }) : undefined;
  if (code !== 0 || !result || result.after !== 200 || !result.healthz || result.healthz.failed > 0) process.exitCode = 1;
}

/** The local EVM process of the submit phase (bench/chainNode.ts). */
async function startChainNode(): Promise<{ url: string; fund: (treasury: string) => Promise<void>; stop: () => Promise<void> }> {
  const child = spawn(process.execPath, [join(root, 'dist/bench/chainNode.js'), String(SUBMIT_CHAIN)], { stdio: ['pipe', 'pipe', 'inherit'] });
  const [, port] = await waitForLine(child, /listening (\d+)/);
  return {
    url: `http://127.0.0.1:${port}`,
    async fund(treasury) {
      const funded = waitForLine(child, /^funded$/m);
      child.stdin!.write(`fund ${treasury} ${SUBMIT_USDC}\n`);
      await funded;
    },
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.stdin!.end();
      await exited;
    },
  };
}

type OnChain = { signed: number; withHash: number; pending: number; mined: number; missing: number; nonceGaps: number };

/**
 * After the submit phase: waits (up to 30 s) for the background submitter to broadcast what the
 * first attempt did not, then checks in the server's ledger (read-only) and on the node that every
 * signed raw transaction's hash is mined (successfully; up to 30 s more) and the treasury's nonces
 * have no gap.
 */
async function checkOnChain(dataDir: string, nodeUrl: string): Promise<OnChain> {
  const db = new Database(join(dataDir, 'paypolicy.db'), { readonly: true, fileMustExist: true });
  type Row = { nonce: number; tx_hash: string | null; submit_status: string | null };
  const rows = () => db.prepare(`SELECT nonce, tx_hash, submit_status FROM transactions WHERE type = 'raw_transaction' AND status = 'signed' AND chain_id = ? ORDER BY nonce`).all(SUBMIT_CHAIN) as Row[];
  try {
    let current = rows();
    for (let waited = 0; current.some((r) => r.submit_status === 'pending') && waited < 30_000; waited += 250) {
      await new Promise((r) => setTimeout(r, 250));
      current = rows();
    }
    const node = createPublicClient({ transport: viemHttp(nodeUrl, { retryCount: 0, timeout: 10_000 }) });
    const hashes = current.flatMap((r) => (r.tx_hash ? [r.tx_hash as Hex] : []));
    // The node mines a block every 250 ms (chainNode.ts): the last ones may still be in its mempool.
    let unmined = hashes;
    for (let waited = 0; unmined.length > 0 && waited < 30_000; waited += 500) {
      if (waited > 0) await new Promise((r) => setTimeout(r, 500));
      const still: Hex[] = [];
      let next = 0;
      const batch = unmined;
      await Promise.all(Array.from({ length: 16 }, async () => {
        while (next < batch.length) {
          const hash = batch[next++]!;
          const receipt = await node.request({ method: 'eth_getTransactionReceipt', params: [hash] });
          if (!receipt || (receipt as { status?: string }).status !== '0x1') still.push(hash);
        }
      }));
      unmined = still;
    }
    const mined = hashes.length - unmined.length;
    const nonceGaps = current.filter((r, i) => r.nonce !== i).length;
    return {
      signed: current.length, withHash: hashes.length, pending: current.filter((r) => r.submit_status === 'pending').length,
      mined, missing: hashes.length - mined, nonceGaps,
    };
  } finally {
    db.close();
  }
}

/** Stops the server's heap sampling (bench/heapSample.ts) and reads what the phase allocated per request. */
async function heapPerRequest(server: ChildProcess, dir: string, requests: number): Promise<string> {
  const file = join(dir, 'heap.json');
  rmSync(file, { force: true });
  server.kill('SIGUSR2');
  for (let i = 0; i < 100 && !existsSync(file); i++) await new Promise((r) => setTimeout(r, 100));
  if (!existsSync(file)) return 'not written';
  const { bytes } = JSON.parse(readFileSync(file, 'utf8')) as { bytes: number };
  return `${(bytes / 1024 / Math.max(1, requests)).toFixed(1)} KiB`;
}

const HISTORY_ROWS = 1_000_000;
/** Seconds of sign load each restarted server of the history phase gets before it is measured. */
const HISTORY_WARM_S = Math.min(15, DURATION_S + 5);
const DAY_MS = 24 * 3600 * 1000;

/**
 * Adds HISTORY_ROWS ledger rows to a stopped server's database in ONE statement: copies of a signed
 * eip3009 payment of the sign phase, spread round-robin over the organization's bench agents and
 * evenly over the 30 days before the newest row (all in the past, so the ledger clock is unmoved).
 * Signed rows hold the cap, so every cap sum of the next phase reads its agent's share of them.
 */
function addHistory(dbPath: string, orgId: string): number {
  const db = new Database(dbPath);
  try {
    // A cache that holds the indexes being filled (the default 2 MB made the insert disk-bound).
    db.pragma('cache_size = -524288');
    const columns = (db.prepare('PRAGMA table_info(transactions)').all() as Array<{ name: string }>).map((c) => c.name);
    const replaced: Record<string, string> = {
      id: `printf('txn_hist_%07d', n.i)`, agent_id: 'a.id', cap_at: '(c.newest - 1 - n.at)', created_at: '(c.newest - 1 - n.at)', updated_at: '(c.newest - 1 - n.at)', idempotency_key: 'NULL', request_hash: 'NULL',
    };
    const select = columns.map((c) => replaced[c] ?? `t.${c}`).join(', ');
    // The agents, the template row and the constants are materialized once; the agent lookup then
    // goes through an automatic index (without it, a scan of the agents per row: ~10x slower).
    const { changes } = db.prepare(`
      WITH RECURSIVE
        a(k, id) AS MATERIALIZED (SELECT ROW_NUMBER() OVER (ORDER BY id) - 1, id FROM agents WHERE org_id = @org AND name LIKE 'bench-%'),
        t AS MATERIALIZED (SELECT * FROM transactions WHERE org_id = @org AND type = 'eip3009' AND status = 'signed' LIMIT 1),
        c(agents, newest) AS MATERIALIZED (SELECT (SELECT COUNT(*) FROM a), (SELECT MAX(cap_at) FROM transactions)),
        n(i, at) AS (SELECT 0, 0 UNION ALL SELECT i + 1, (i + 1) * ${30 * DAY_MS} / ${HISTORY_ROWS} FROM n WHERE i + 1 < ${HISTORY_ROWS})
      INSERT INTO transactions (${columns.join(', ')})
      SELECT ${select} FROM n CROSS JOIN c CROSS JOIN t JOIN a ON a.k = n.i % c.agents`).run({ org: orgId });
    return changes;
  } finally {
    db.close();
  }
}

/**
 * The grpc phase's generator: bench/grpcLoad.ts in its own process against the server's h2c
 * listener, one process for all the slices (its connections and JIT warm up once).
 */
async function startGrpcLoad(base: string, spec: { apiKey: string; agents: string[]; recipient: string }, dir: string): Promise<{
  warm: (seconds: number) => Promise<void>;
  slice: (seconds: number, windowOpens: () => void) => Promise<Load>;
  stop: () => Promise<void>;
}> {
  const specPath = join(dir, 'grpc-spec.json');
  writeFileSync(specPath, JSON.stringify(spec));
  const child = spawn(process.execPath, [join(root, 'dist/bench/grpcLoad.js'), base.replace(/^http:\/\//, ''), specPath, String(CONNECTIONS), '4'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  // Its output, line by line, to whoever waits next.
  const lines: string[] = [];
  const waiting: Array<(line: string) => void> = [];
  createInterface({ input: child.stdout! }).on('line', (line) => (waiting.length > 0 ? waiting.shift()!(line) : lines.push(line)));
  const nextLine = () => (lines.length > 0 ? Promise.resolve(lines.shift()!) : Promise.race([
    new Promise<string>((r) => waiting.push(r)),
    exited.then(() => { throw new Error('grpcLoad exited'); }),
  ]));
  return {
    async warm(seconds) {
      child.stdin!.write(`warm ${seconds}\n`);
      if ((await nextLine()) !== 'WARM') throw new Error('grpcLoad: expected WARM');
    },
    async slice(seconds, windowOpens) {
      child.stdin!.write(`run ${seconds}\n`);
      if ((await nextLine()) !== 'MEASURING') throw new Error('grpcLoad: expected MEASURING');
      windowOpens();
      const line = await nextLine();
      const r = JSON.parse(line.replace(/^RESULT /, '')) as { rps: number; p50: number; p99: number; failed: number; total: number; seconds: number; quantiles: number[] };
      return { rps: r.rps, p50: r.p50, p99: r.p99, non2xx: r.failed, errors: 0, total: r.total, seconds: r.seconds, quantiles: r.quantiles };
    },
    async stop() {
      child.stdin!.end();
      await exited;
    },
  };
}

/** The PostgreSQL lines (bench/pgPhases.ts): sign on SQLite, PostgreSQL with one and with two replicas. */
async function pgPhases(): Promise<void> {
  const { runPgPhases, formatPgLine } = await import('./pgPhases.js');
  const lines = await runPgPhases(DURATION_S);
  process.stdout.write(`\nPostgreSQL (BENCH_ONLY=pg):\n${lines.map((l) => `  ${formatPgLine(l)}`).join('\n')}\n`);
}

async function main(): Promise<void> {
  if (process.env.BENCH_ONLY === 'flood2k') return flood2k();
  if (process.env.BENCH_ONLY === 'pg') return pgPhases();
  const dataDir = mkdtempSync(join(tmpdir(), 'paypolicy-bench-'));
  const paywall = await startPaywall();
  // The submit phase's node is up before the server, which is started with --rpc-url for it.
  const withSubmit = !process.env.BENCH_ONLY || process.env.BENCH_ONLY === 'submit';
  const chainNode = withSubmit ? await startChainNode() : undefined;
  // BENCH_PROFILE=dir writes V8 CPU profiles of the server (main thread and signing threads) there.
  const profile = process.env.BENCH_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE}`] : [];
  // BENCH_NODE_FLAGS: extra node flags for the server only (to measure one, e.g. a V8 heap setting).
  const nodeFlags = (process.env.BENCH_NODE_FLAGS ?? '').split(' ').filter(Boolean);
  // BENCH_HEAP=dir samples what the server allocates during the sign phase (bench/heapSample.ts).
  const heapDir = process.env.BENCH_HEAP;
  if (heapDir) nodeFlags.push('--import', join(root, 'dist/bench/heapSample.js'));
  const startServer = (dir = dataDir) => spawn(process.execPath, [...profile, ...nodeFlags, join(root, 'bin/paypolicy.js'), 'serve', '--port', '0', '--data-dir', dir, '--log-level', 'info', ...(chainNode ? ['--rpc-url', `${SUBMIT_CHAIN}=${chainNode.url}`] : [])], {
    stdio: ['ignore', 'pipe', 'inherit'],
    // The quote phase probes a paywall on loopback, which only this test-only setting allows.
    env: { ...process.env, PAYPOLICY_DEV: '1', PAYPOLICY_PROBE_ALLOW_HOSTS: `127.0.0.1:${paywall.port}`, ...(heapDir ? { BENCH_HEAP_DIR: heapDir } : {}) },
  });
  let server = startServer();
  // The history phase's second server and its data directory, stopped and removed at the end.
  const extraServers: ChildProcess[] = [];
  const extraDirs: string[] = [];
  const echo = spawn(process.execPath, [join(root, 'dist/bench/echoServer.js')], { stdio: ['ignore', 'pipe', 'inherit'] });
  const floor = spawn(process.execPath, [join(root, 'dist/bench/floorServer.js')], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    let [, base] = await waitForLine(server, /(http:\/\/127\.0\.0\.1:\d+)/);
    const [, echoPort] = await waitForLine(echo, /listening (\d+)/);
    const [, floorPort] = await waitForLine(floor, /listening (\d+)/);
    // The server logs one line per request at info level, as in production; keep draining it.
    keepLog(server);
    const boot = JSON.parse(readFileSync(join(dataDir, 'bootstrap.json'), 'utf8')) as Boot;
    // Gas and USDC for the treasury, so every raw transaction can be paid for and mined.
    if (chainNode) await chainNode.fund(boot.treasury_address);
    const agents = await createBenchAgents(base!, boot);
    const headers = { authorization: `Bearer ${boot.api_key}`, 'content-type': 'application/json' };
    const signSpec = signSpecFor(boot, agents);
    const echoSpec: Spec = { method: 'POST', path: '/', headers: { 'content-type': 'application/json' }, bodies: [signSpec.bodies[0]!] };
    const submitSpec: Spec = {
      method: 'POST', path: '/api/sign', headers,
      bodies: agents.map((id) => JSON.stringify({ agent_id: id, type: 'raw_transaction', chain_id: SUBMIT_CHAIN, recipient_address: RECIPIENT, amount_usd: 0.01 })),
    };
    const quoteSpec: Spec = {
      method: 'POST', path: '/api/quote', headers, bodies: agents.map((id) => JSON.stringify({ url: paywall.url, agent_id: id })),
    };
    const run = (url: string, spec: Spec, seconds = DURATION_S) => (WRK ? loadWrk(url, spec, seconds, dataDir) : load(url, [toAutocannon(spec)], seconds));

    // BENCH_ONLY=<phase> skips the baselines and the other phases (for profiling the server, or for
    // measuring one line): sign, quote, flood, submit, floor, grpc, connect, limits, history. Every phase
    // keeps the sign phase, most ratios' denominator; quote keeps the echo, its own. BENCH_ONLY=flood2k runs only the overload
    // phase, which otherwise runs last, on a server of its own.
    const only = process.env.BENCH_ONLY;
    const phase = (name: string) => !only || only === name;
    process.stderr.write(`load generator: ${WRK ? 'wrk' : 'autocannon'}\n`);
    const limited = phase('limits') ? await createLimitedAgents(base!, boot) : undefined;
    const limitsSpec = limited && signSpecFor({ ...boot, api_key: limited.apiKey }, limited.agents);
    const grpcSpec = { apiKey: boot.api_key, agents, recipient: RECIPIENT };
    const connectSpec = connectSignSpecFor(boot, agents);
    const floorUrl = `http://127.0.0.1:${floorPort}`;
    process.stderr.write('warming up…\n');
    await run(base!, signSpec, 3);
    if (phase('floor')) await run(floorUrl, signSpec, 3);
    if (phase('connect')) await run(base!, connectSpec, 3);
    const grpcGen = phase('grpc') ? await startGrpcLoad(base!, grpcSpec, dataDir) : undefined;
    await grpcGen?.warm(3);
    // One miss fills the quote cache; the quotes measured right after it are cache hits.
    const fillQuoteCache = async () => {
      const r = await fetch(`${base}/api/quote`, { method: 'POST', headers, body: quoteSpec.bodies[0] });
      if (!r.ok) throw new Error(`quote: ${r.status} ${await r.text()}`);
    };

    // The ratio phases, interleaved (bench/interleave.ts): sign (REST), the floor, the echo,
    // Connect, gRPC, the quote and the reference client take turns in slices, each round in a
    // rotated order, so that the two sides of every ratio meet the shared machine in the same states.
    const slicers: Slicer[] = [
      { name: 'sign', slice: (t) => run(base!, signSpec, t) },
      ...(phase('floor') ? [{ name: 'floor', slice: (t: number) => run(floorUrl, signSpec, t) }] : []),
      // The quote's ratio is to the echo, so BENCH_ONLY=quote keeps it.
      ...(!only || only === 'quote' ? [{ name: 'echo', slice: (t: number) => run(`http://127.0.0.1:${echoPort}`, echoSpec, t) }] : []),
      ...(phase('connect') ? [{ name: 'connect', slice: (t: number) => run(base!, connectSpec, t) }] : []),
      // Sign in the organization whose agents each have four window limits and which has one of its own.
      ...(limitsSpec ? [{ name: 'limits', slice: (t: number) => run(base!, limitsSpec, t) }] : []),
      // gRPC from a real gRPC client in its own process (bench/grpcLoad.ts).
      ...(grpcGen ? [{ name: 'grpc', slice: (t: number) => grpcGen.slice(t, () => meters.get('grpc')!.windowOpens()) }] : []),
      // The offer cache keeps an entry 60 s and the block lasts longer: each quote slice refills it
      // first, so that every quote it measures is a cache hit.
      ...(phase('quote') ? [{ name: 'quote', slice: async (t: number) => (await fillQuoteCache(), run(base!, quoteSpec, t)) }] : []),
      ...(only ? [] : [{ name: 'reference', slice: await referenceClient() }]),
    ];
    const meters = new Map(['sign', 'connect', 'grpc', 'quote', 'limits'].map((n) => [n, cpuMeter(server.pid!)] as const));
    meters.set('floor', cpuMeter(floor.pid!));
    // The echo's own CPU: the budget the quote's ratio to it leaves (half its rate, about twice its CPU).
    meters.set('echo', cpuMeter(echo.pid!));
    process.stderr.write(`${slicers.map((s) => s.name).join(', ')}: ${ROUNDS} interleaved rounds of ${SLICE_S} s slices, ${CONNECTIONS} connections…\n`);
    if (heapDir) server.kill('SIGUSR2');
    // After each slice, the server finishes what the generator left in flight before the next starts.
    const measured = await interleave(slicers, ROUNDS, SLICE_S, (name, slice) => meters.get(name)?.measure(slice) ?? slice(), () => drained(base!));
    await grpcGen?.stop();
    const sign = measured.get('sign')!;
    const cpuOf = (name: string) => (measured.has(name) ? meters.get(name)!.report() : undefined);
    const measuredSign = { load: sign, cpu: cpuOf('sign')! };
    // Heap sampling spans the whole interleaved block: meaningful with BENCH_ONLY=sign.
    const allocated = heapDir ? await heapPerRequest(server, heapDir, sign.total) : undefined;
    const floorLoad = measured.get('floor');
    const floorCpu = cpuOf('floor');
    const bare = measured.get('echo') ?? sign;
    const connectLoad = measured.get('connect');
    const connectCpu = cpuOf('connect');
    const grpcLoad = measured.get('grpc');
    const grpcCpu = cpuOf('grpc');
    const limitsLoad = measured.get('limits');
    const limitsCpu = cpuOf('limits');
    const quote = measured.get('quote');
    const quoteCpu = cpuOf('quote');
    const reference = measured.get('reference')?.rps ?? NaN;
    // /api/sign again, same load, while 64 loops flood the dashboard's sign-in with random emails.
    let flooded: { sign: Load; flood: FloodResult } | undefined;
    if (phase('flood')) {
      process.stderr.write(`POST /api/sign during a ${CONNECTIONS}-way sign-in flood…\n`);
      const flood = await startSignInFlood(base!);
      const during = await run(base!, signSpec);
      flooded = { sign: during, flood: await flood.stop() };
    }
    // Raw transactions broadcast to the local node before the 200 (each answered with its tx_hash
    // unless the node was too slow: then the background submitter sends it).
    let submit: { load: Load; chain: OnChain } | undefined;
    if (chainNode) {
      process.stderr.write('POST /api/sign (raw_transaction, submitted to a local EDR node), same load…\n');
      const submitLoad = await run(base!, submitSpec);
      process.stderr.write('checking every signed raw transaction on the node…\n');
      submit = { load: submitLoad, chain: await checkOnChain(dataDir, chainNode.url) };
    }
    // Memory at the end of the measured phases, before the server is stopped.
    const memory = memoryOf(server.pid!);
    // History: the same server's data directory with 1,000,000 more ledger rows, restarted.
    let history: { before: Load; load: Load; rows: number; insertS: number; memory: Memory; cpuBefore: string; cpu: string } | undefined;
    if (phase('history')) {
      await stop(server);
      // The ratio's denominator is a second server on a copy of the data directory as it is now
      // (only this run's rows), restarted the same way and measured in interleaved slices with the
      // history's: a restart's cold caches and the machine's slow patches fall on both sides,
      // and the difference is the history's alone.
      const beforeDir = mkdtempSync(join(tmpdir(), 'paypolicy-bench-before-'));
      extraDirs.push(beforeDir);
      cpSync(dataDir, beforeDir, { recursive: true });
      process.stderr.write('history: 1,000,000 ledger rows over the 256 agents and 30 days (one INSERT)…\n');
      const t0 = performance.now();
      const rows = addHistory(join(dataDir, 'paypolicy.db'), boot.org_id);
      const insertS = (performance.now() - t0) / 1000;
      process.stderr.write(`  ${rows} rows in ${insertS.toFixed(1)} s; restarting the server, and one on the data as it was before…\n`);
      server = startServer(dataDir);
      const beforeServer = startServer(beforeDir);
      extraServers.push(beforeServer);
      [, base] = await waitForLine(server, /(http:\/\/127\.0\.0\.1:\d+)/);
      const [, beforeBase] = await waitForLine(beforeServer, /(http:\/\/127\.0\.0\.1:\d+)/);
      keepLog(server);
      keepLog(beforeServer);
      // A fresh server reaches its steady rate only after ~15 s of load (JIT, and its WAL growing
      // to its working size): measured, 3,756 req/s in its first 5 s, 4,233 in the next, 4,350–4,690
      // after. Both are warmed that long, so the ratio compares steady states.
      await run(base!, signSpec, HISTORY_WARM_S);
      await run(beforeBase!, signSpec, HISTORY_WARM_S);
      process.stderr.write(`POST /api/sign with and without the history, ${ROUNDS} interleaved rounds of ${SLICE_S} s…\n`);
      // CPU per request beside the latencies: on a shared machine it moves far less between runs.
      const historyMeters = new Map([['history', cpuMeter(server.pid!)], ['before', cpuMeter(beforeServer.pid!)]]);
      const both = await interleave([
        { name: 'before', slice: (t) => run(beforeBase!, signSpec, t) },
        { name: 'history', slice: (t) => run(base!, signSpec, t) },
      ], ROUNDS, SLICE_S, (name, slice) => historyMeters.get(name)!.measure(slice), async () => {
        await Promise.all([drained(base!), drained(beforeBase!)]);
      });
      history = {
        before: both.get('before')!, load: both.get('history')!, rows, insertS, memory: memoryOf(server.pid!),
        cpuBefore: historyMeters.get('before')!.report(), cpu: historyMeters.get('history')!.report(),
      };
      await stop(beforeServer);
    }

    // Failures by kind: answers other than 2xx, and socket errors (connect, read, write, timeout).
    const failures = (l: Load) => `${l.non2xx + l.errors} of ${l.total}${l.non2xx + l.errors > 0 ? ` (${l.non2xx} non-2xx, ${l.errors} socket)` : ''}`;
    const row = (name: string, l: Load): [string, string, string, string] => [name, l.rps.toFixed(0), `${l.p50} / ${l.p99}`, failures(l)];
    const rows: Array<[string, string, string, string]> = [
      row('POST /api/sign (eip3009, allowed, 256 agents)', sign),
      ...(floorLoad ? [row('floor: minimal durable sign server (bench/floorServer.ts)', floorLoad)] : []),
      ...(connectLoad ? [row('Connect JSON Sign (HTTP/1.1)', connectLoad)] : []),
      ...(limitsLoad ? [row('POST /api/sign, 4 agent window limits + 1 organization limit', limitsLoad)] : []),
      ...(grpcLoad ? [row('gRPC Sign (HTTP/2, @grpc/grpc-js, 4 channels)', grpcLoad)] : []),
      ...(flooded ? [row(`POST /api/sign during a ${CONNECTIONS}-way sign-in flood`, flooded.sign)] : []),
      ...(quote ? [row('POST /api/quote (x402 offer, cache hit)', quote)] : []),
      ...(submit ? [row('POST /api/sign (raw_transaction, submitted to local EDR)', submit.load)] : []),
      ...(history ? [row('POST /api/sign, restarted on a copy of the data just before the history is added', history.before)] : []),
      ...(history ? [row(`POST /api/sign with ${history.rows.toLocaleString('en')} more ledger rows`, history.load)] : []),
      ...(measured.has('echo') ? [row('bare node:http JSON echo (baseline)', bare)] : []),
      ...(only ? [] : [['x402 reference client, in-process signing (baseline)', reference.toFixed(0), '-', '-'] as [string, string, string, string]]),
    ];
    // Each target line: what was measured, the target, and whether it was met.
    // A value that rounds to its goal is shown with one more digit, so that "0.80x NOT MET" (0.797)
    // never reads as a contradiction.
    const shown = (value: number, digits: number, goal: number) =>
      (Number(value.toFixed(digits)) === goal && value !== goal ? value.toFixed(digits + 1) : value.toFixed(digits));
    const target = (what: string, value: number, digits: number, unit: string, op: '>=' | '<=', goal: number) =>
      `${what}: ${Number.isFinite(value) ? shown(value, digits, goal) : 'n/a'}${unit} (target ${op} ${goal}${unit}) ${!Number.isFinite(value) ? 'not measured' : (op === '>=' ? value >= goal : value <= goal) ? 'MET' : 'NOT MET'}`;
    const lines = [
      `load generator: ${WRK ? 'wrk -t2' : 'autocannon'}, ${CONNECTIONS} connections; ${slicers.map((s) => s.name).join(', ')} interleaved, ` +
        `${ROUNDS} rounds of ${SLICE_S} s (${ROUNDS * SLICE_S} s each); the other phases ${DURATION_S} s`,
      '',
      `| measurement | req/s | p50 / p99 ms | failed |`,
      `|---|---|---|---|`,
      ...rows.map((r) => `| ${r.join(' | ')} |`),
      '',
      ...(only ? [] : [target('sign vs reference client', sign.rps / reference, 2, 'x', '>=', 3)]),
      `server CPU per request, sign: ${measuredSign.cpu}`,
      ...(allocated ? [`server allocation per request, sign: ${allocated} (heap sampling, which slows the server; profile in ${heapDir})`] : []),
      ...(floorCpu ? [`floor CPU per request: ${floorCpu}`] : []),
      ...(cpuOf('echo') ? [`bare node:http echo CPU per request: ${cpuOf('echo')}`] : []),
      ...(quoteCpu ? [`server CPU per request, quote: ${quoteCpu}`] : []),
      ...(connectCpu ? [`server CPU per request, Connect JSON Sign: ${connectCpu}`] : []),
      ...(limitsCpu ? [`server CPU per request, sign with five window limits: ${limitsCpu}`] : []),
      ...(grpcCpu ? [`server CPU per request, gRPC Sign: ${grpcCpu}`] : []),
      target('sign p99', sign.p99, 1, ' ms', '<=', 20),
      ...(floorLoad ? [target('sign vs floor', sign.rps / floorLoad.rps, 2, 'x', '>=', 0.8)] : []),
      ...(only ? [] : [`sign vs bare node:http: ${(sign.rps / bare.rps).toFixed(2)}x`]),
      ...(quote && measured.has('echo') ? [target('quote (cache hit) vs bare node:http', quote.rps / bare.rps, 2, 'x', '>=', 0.5)] : []),
      ...(connectLoad ? [target('Connect JSON Sign vs REST sign', connectLoad.rps / sign.rps, 2, 'x', '>=', 0.8)] : []),
      ...(limitsLoad ? [target('sign with 4 agent limits + 1 org limit vs sign with one cap', limitsLoad.rps / sign.rps, 2, 'x', '>=', 0.9)] : []),
      ...(grpcLoad ? [target('gRPC Sign vs REST sign', grpcLoad.rps / sign.rps, 2, 'x', '>=', 0.8)] : []),
      ...(history ? [
        target(`sign p50 with ${history.rows.toLocaleString('en')} more ledger rows vs just before (${history.load.p50} / ${history.before.p50} ms)`, history.load.p50 / history.before.p50, 2, 'x', '<=', 1.2),
        `  (before: ${history.before.rps.toFixed(0)} req/s with only this run's rows; rows inserted in ${history.insertS.toFixed(1)} s; req/s ratio ${(history.load.rps / history.before.rps).toFixed(2)}x)`,
        `  server CPU per request just before: ${history.cpuBefore}`,
        `  server CPU per request with the history: ${history.cpu}`,
      ] : []),
      target(`server RSS at the end of the phases (peak ${memory.hwmMb} MB)`, memory.rssMb, 0, ' MB', '<=', 250),
      ...(history ? [target(`server RSS after the history phase (peak ${history.memory.hwmMb} MB)`, history.memory.rssMb, 0, ' MB', '<=', 250)] : []),
      ...(submit ? [
        `submitted raw tx/s vs sign-only (eip3009, same run): ${(submit.load.rps / sign.rps).toFixed(2)}x`,
        `on chain: ${submit.chain.mined} of ${submit.chain.withHash} tx_hashes mined (${submit.chain.missing} not), ${submit.chain.signed} signed, ` +
          `${submit.chain.pending} still waiting for broadcast, ${submit.chain.nonceGaps} nonces out of sequence`,
      ] : []),
      ...(flooded ? [
        target(`sign p50 under a ${CONNECTIONS}-way sign-in flood vs unflooded (${flooded.sign.p50} / ${sign.p50} ms)`, flooded.sign.p50 / sign.p50, 2, 'x', '<=', 3),
        `  flood answers: ${flooded.flood.byStatus.map(([status, n]) => `${n} x ${status}`).join(', ')}`,
      ] : []),
    ];
    process.stdout.write(`${lines.join('\n')}\n`);
    const failed = (l: Load | undefined) => l !== undefined && l.non2xx + l.errors > 0;
    if (failed(sign) || failed(quote) || failed(flooded?.sign) || failed(floorLoad) || failed(connectLoad) || failed(grpcLoad) || failed(history?.load) || failed(history?.before)) process.exitCode = 1;
    if (submit && (submit.load.non2xx + submit.load.errors > 0 || submit.chain.missing > 0 || submit.chain.pending > 0 || submit.chain.nonceGaps > 0
      || submit.chain.withHash !== submit.chain.signed)) process.exitCode = 1;
  } finally {
    await Promise.all([stop(server), stop(echo), stop(floor), ...extraServers.map(stop)]);
    for (const dir of extraDirs) rmSync(dir, { recursive: true, force: true });
    await chainNode?.stop();
    paywall.close();
    // BENCH_KEEP_DATA=1 leaves the server's data directory for inspection (a restart on it, sqlite3).
    if (process.env.BENCH_KEEP_DATA === '1') process.stderr.write(`data directory kept: ${dataDir}\n`);
    else rmSync(dataDir, { recursive: true, force: true });
  }
  if (!process.env.BENCH_ONLY) await flood2k();
  if (!process.env.BENCH_ONLY) await pgPhases();
}

await main();
