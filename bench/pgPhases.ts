import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import autocannon from 'autocannon';
import pg from 'pg';
import { CONNECTIONS, createBenchAgents, signSpecFor, toAutocannon, type Boot } from './harness.js';

/**
 * The PostgreSQL bench lines (BENCH_ONLY=pg in bench/run.ts, or `node dist/bench/pgPhases.js`): POST
 * /api/sign on SQLite, on PostgreSQL with one replica, and on PostgreSQL with two replicas sharing
 * the database, each as req/s and p50/p99 and as a ratio to SQLite measured in the same run.
 * Same load for all three: 64 connections (split 32/32 over two replicas, as a balancer would),
 * eip3009 payments of $0.01 over 256 agents, autocannon in this process. The PostgreSQL server is
 * PAYPOLICY_BENCH_PG_URL's (default the test server); a database of its own per run, dropped after.
 */

const root = fileURLToPath(new URL('../..', import.meta.url));
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const PG_SERVER = process.env.PAYPOLICY_BENCH_PG_URL ?? 'postgres://root@127.0.0.1:5432/test';

export type PgLine = { name: string; rps: number; p50: number; p99: number; non2xx: number; errors: number; ratio: number };

type Server = { child: ChildProcess; url: string; dataDir: string };

function startServer(env: Record<string, string>): Promise<Server> {
  const dataDir = mkdtempSync(join(tmpdir(), 'pp-bench-pg-'));
  const child = spawn(process.execPath, [join(root, 'bin/paypolicy.js'), 'serve', '--port', '0', '--data-dir', dataDir, '--log-level', 'info'], {
    stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...env },
  });
  return new Promise((resolve, reject) => {
    let buf = '';
    const onData = (d: Buffer) => {
      buf += d.toString();
      const line = buf.split('\n').find((l) => l.includes('"msg":"paypolicy listening"'));
      if (line) {
        child.stdout!.off('data', onData);
        // One log line per request at info level, as in production: keep draining it.
        child.stdout!.resume();
        resolve({ child, url: (JSON.parse(line) as { url: string }).url, dataDir });
      }
    };
    child.stdout!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`paypolicy exited (${code}) before listening:\n${buf.slice(-2000)}`)));
  });
}

async function stopServer(s: Server): Promise<void> {
  if (s.child.exitCode === null) {
    const exited = new Promise((r) => s.child.once('exit', r));
    s.child.kill('SIGTERM');
    await exited;
  }
  rmSync(s.dataDir, { recursive: true, force: true });
}

async function ready(url: string): Promise<void> {
  for (let i = 0; i < 400; i++) {
    const r = await fetch(`${url}/readyz`).catch(() => undefined);
    if (r?.status === 200) return;
    await new Promise((res) => setTimeout(res, 25));
  }
  throw new Error(`${url} never became ready`);
}

/** The same load split evenly over `urls`; req/s summed, p50/p99 the worse of the parts. */
async function loadOver(urls: string[], request: autocannon.Request, seconds: number): Promise<Omit<PgLine, 'name' | 'ratio'>> {
  const parts = await Promise.all(urls.map((url) => autocannon({ url, connections: CONNECTIONS / urls.length, duration: seconds, requests: [request], pipelining: 1 })));
  return {
    rps: parts.reduce((s, r) => s + r.requests.average, 0),
    p50: Math.max(...parts.map((r) => r.latency.p50)),
    p99: Math.max(...parts.map((r) => r.latency.p99)),
    non2xx: parts.reduce((s, r) => s + r.non2xx, 0),
    errors: parts.reduce((s, r) => s + r.errors + r.timeouts, 0),
  };
}

async function measure(servers: Server[], seconds: number): Promise<Omit<PgLine, 'name' | 'ratio'>> {
  await Promise.all(servers.map((s) => ready(s.url)));
  const bootDir = servers.find((s) => { try { readFileSync(join(s.dataDir, 'bootstrap.json')); return true; } catch { return false; } })!.dataDir;
  const boot = JSON.parse(readFileSync(join(bootDir, 'bootstrap.json'), 'utf8')) as Boot;
  // The bench's 256 agents with a large cap (harness.ts), created through the first replica.
  const request = toAutocannon(signSpecFor(boot, await createBenchAgents(servers[0]!.url, boot)));
  await loadOver(servers.map((s) => s.url), request, 3);
  return loadOver(servers.map((s) => s.url), request, seconds);
}

async function withDatabase<T>(fn: (url: string) => Promise<T>): Promise<T> {
  const name = `pp_bench_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client(PG_SERVER);
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(PG_SERVER);
  url.pathname = `/${name}`;
  try {
    return await fn(url.toString());
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => {});
    await admin.end();
  }
}

/** The three lines, in this order: SQLite, PostgreSQL 1 replica, PostgreSQL 2 replicas. */
export async function runPgPhases(seconds = SECONDS): Promise<PgLine[]> {
  const base = { PAYPOLICY_SIGNER_THREADS: '1' };
  process.stderr.write(`pg: POST /api/sign on SQLite, ${CONNECTIONS} connections, ${seconds} s…\n`);
  const sqliteServer = await startServer(base);
  let sqlite: Omit<PgLine, 'name' | 'ratio'>;
  try {
    sqlite = await measure([sqliteServer], seconds);
  } finally {
    await stopServer(sqliteServer);
  }
  const lines: PgLine[] = [{ name: 'sign SQLite', ...sqlite, ratio: 1 }];
  for (const replicas of [1, 2]) {
    process.stderr.write(`pg: POST /api/sign on PostgreSQL, ${replicas} replica(s)…\n`);
    const result = await withDatabase(async (url) => {
      const env = { ...base, PAYPOLICY_DATABASE_URL: url, PAYPOLICY_MASTER_KEY: randomBytes(32).toString('hex'), PAYPOLICY_ADMIN_TOKEN: `bench_${randomBytes(16).toString('hex')}` };
      const servers: Server[] = [];
      try {
        // One after the other: the first bootstraps, the others find it done.
        for (let i = 0; i < replicas; i++) servers.push(await startServer(env));
        return await measure(servers, seconds);
      } finally {
        await Promise.all(servers.map(stopServer));
      }
    });
    lines.push({ name: `sign PostgreSQL ${replicas} replica${replicas > 1 ? 's' : ''}`, ...result, ratio: result.rps / sqlite.rps });
  }
  return lines;
}

export function formatPgLine(l: PgLine): string {
  const bad = l.non2xx + l.errors > 0 ? ` (${l.non2xx} non-2xx, ${l.errors} errors)` : '';
  return `${l.name.padEnd(30)} ${l.rps.toFixed(0).padStart(6)} req/s  p50 ${l.p50} ms  p99 ${l.p99} ms  ${l.ratio.toFixed(2)}x SQLite${bad}`;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  for (const line of await runPgPhases()) process.stdout.write(`${formatPgLine(line)}\n`);
}
