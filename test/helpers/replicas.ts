import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BootstrapFile } from '../../src/bootstrap.js';
import { AdminService } from '../../gen/paypolicy/v1/admin_pb.js';
import type { Admin } from './admin.js';
import { CLI } from './cli.js';
import { connectClient } from './clients.js';
import { createTestDatabase, type TestDatabase } from './pgDatabase.js';
import { postSign, type SignBody } from './payments.js';
import type { RestResult } from './server.js';

/**
 * Several real `paypolicy serve` processes (node bin/paypolicy.js, from dist/) sharing one
 * PostgreSQL database: each replica has its own data directory (its lock, nothing else), all share
 * the master key (PAYPOLICY_MASTER_KEY) and the admin token (PAYPOLICY_ADMIN_TOKEN), as an operator
 * would run them behind a load balancer. Separate processes, so one can be killed with SIGKILL.
 */

export type Replica = {
  index: number;
  url: string;
  dataDir: string;
  child: ChildProcess;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Everything the process wrote to stdout (JSON log lines and the banner) and stderr so far. */
  stdout(): string;
  stderr(): string;
  /** JSON log lines with this `msg`. */
  logLines(msg: string): Array<Record<string, unknown>>;
};

export type Cluster = {
  db: TestDatabase;
  replicas: Replica[];
  adminToken: string;
  masterKey: string;
  /** The first start's organization, test key, agent and treasury (bootstrap.json of the replica that bootstrapped). */
  bootstrap: BootstrapFile;
  admin(i: number): Admin;
  /** Starts one more replica (or restarts index i after it exited) on the same database. */
  start(i?: number, extra?: { args?: string[]; env?: Record<string, string> }): Promise<Replica>;
  /** SIGKILL, no goodbye. */
  kill(i: number): Promise<void>;
  /** SIGTERM every live replica, drop the database, remove the data directories. */
  close(): Promise<void>;
};

export type ClusterOptions = {
  replicas?: number;
  /** Extra `serve` arguments for every replica. */
  args?: string[];
  env?: Record<string, string>;
  /** Connections per replica's pool (default 6: three replicas and the tests stay far below max_connections). */
  poolSize?: number;
  /** The URL the replicas get, from the test database's (e.g. through a relay that can be cut). */
  databaseUrl?: (url: string) => string;
};

function spawnReplica(index: number, dataDir: string, env: NodeJS.ProcessEnv, args: string[]): Promise<Replica> {
  const child = spawn(process.execPath, [CLI, 'serve', '--port', '0', '--data-dir', dataDir, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('close', (code, signal) => resolve({ code, signal })));
  return new Promise<Replica>((resolve, reject) => {
    child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d;
      const line = out.split('\n').find((l) => l.includes('"msg":"paypolicy listening"'));
      const url = line ? (JSON.parse(line) as { url?: string }).url : undefined;
      if (url) {
        resolve({
          index, url, dataDir, child, exited, stdout: () => out, stderr: () => err,
          logLines: (msg) => out.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.msg === msg),
        });
      }
    });
    child.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
    void exited.then(({ code, signal }) => reject(new Error(`replica ${index} exited (${code ?? signal}) before listening\nstdout: ${out.slice(-3000)}\nstderr: ${err.slice(-3000)}`)));
  });
}

async function waitReady(url: string, ms = 20_000): Promise<void> {
  const until = Date.now() + ms;
  for (;;) {
    try {
      const r = await fetch(`${url}/readyz`, { headers: { connection: 'close' } });
      await r.text();
      if (r.status === 200) return;
    } catch {
      // not yet
    }
    if (Date.now() > until) throw new Error(`${url}/readyz did not answer 200 within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Starts `replicas` processes at the same time on a fresh database; resolves once every one is ready. */
export async function startCluster(opts: ClusterOptions = {}): Promise<Cluster> {
  const db = await createTestDatabase();
  const root = mkdtempSync(join(tmpdir(), 'paypolicy-replicas-'));
  const adminToken = `adm_${randomBytes(24).toString('hex')}`;
  const masterKey = randomBytes(32).toString('hex');
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('PAYPOLICY_')) env[k] = v;
  Object.assign(env, {
    PAYPOLICY_LOG_LEVEL: 'info', PAYPOLICY_SIGNER_THREADS: '1',
    PAYPOLICY_DATABASE_URL: opts.databaseUrl ? opts.databaseUrl(db.url) : db.url, PAYPOLICY_DATABASE_POOL_SIZE: String(opts.poolSize ?? 6),
    PAYPOLICY_MASTER_KEY: masterKey, PAYPOLICY_ADMIN_TOKEN: adminToken,
    ...opts.env,
  });
  // Test files share the machine's cores: a payment that waits a second for a core would be shed
  // 503 overloaded, which is not what these tests ask about. A test that sets the signing-queue
  // deadline or the stale-signing age (which must be at least that deadline) keeps its own.
  const setsDeadline = (opts.args ?? []).some((a) => a === '--max-queue-ms' || a === '--stale-signing-ms');
  if (!setsDeadline && env.PAYPOLICY_MAX_QUEUE_MS === undefined && env.PAYPOLICY_STALE_SIGNING_MS === undefined) env.PAYPOLICY_MAX_QUEUE_MS = '30000';
  const replicas: Replica[] = [];
  const start = async (i = replicas.length, extra: { args?: string[]; env?: Record<string, string> } = {}) => {
    const dataDir = replicas[i]?.dataDir ?? join(root, `replica-${i}`);
    const r = await spawnReplica(i, dataDir, { ...env, ...extra.env }, [...(opts.args ?? []), ...(extra.args ?? [])]);
    await waitReady(r.url);
    replicas[i] = r;
    return r;
  };
  const cluster: Cluster = {
    db, replicas, adminToken, masterKey, bootstrap: undefined as unknown as BootstrapFile,
    admin: (i) => ({ client: connectClient(AdminService, replicas[i]!.url), auth: { headers: { authorization: `Bearer ${adminToken}` } } }),
    start,
    async kill(i) {
      const r = replicas[i]!;
      if (r.child.exitCode === null && r.child.signalCode === null) r.child.kill('SIGKILL');
      await r.exited;
    },
    async close() {
      await Promise.all(replicas.map(async (r) => {
        if (r.child.exitCode !== null || r.child.signalCode !== null) return;
        r.child.kill('SIGTERM');
        const t = setTimeout(() => r.child.kill('SIGKILL'), 5000);
        await r.exited;
        clearTimeout(t);
      }));
      await db.drop();
      rmSync(root, { recursive: true, force: true });
    },
  };
  try {
    await Promise.all(Array.from({ length: opts.replicas ?? 3 }, (_, i) => start(i)));
    const files = replicas.map((r) => join(r.dataDir, 'bootstrap.json')).filter((f) => existsSync(f));
    if (files.length !== 1) throw new Error(`expected exactly one replica to bootstrap the cluster, ${files.length} did`);
    cluster.bootstrap = JSON.parse(readFileSync(files[0]!, 'utf8')) as BootstrapFile;
  } catch (err) {
    await cluster.close().catch(() => {});
    throw err;
  }
  return cluster;
}

/** Round-robin over the live replicas' URLs. */
export function spread(cluster: Cluster): (i: number) => string {
  return (i) => {
    const live = cluster.replicas.filter((r) => r.child.exitCode === null && r.child.signalCode === null);
    return live[i % live.length]!.url;
  };
}

/**
 * POST /api/sign as an agent does against a cluster: a 503 (overloaded, database busy or out of
 * pooled connections on a loaded machine) and a 409 `in_progress` (the same key still being
 * signed elsewhere) both say "repeat", so the same request is sent again, to the next replica, up
 * to `tries` times. The last answer is returned.
 */
export async function postSignRetrying(urls: string[], start: number, key: string, body: SignBody, idempotencyKey?: string, tries = 20): Promise<RestResult> {
  const repeat = (r: RestResult) => r.status === 503 || (r.status === 409 && r.json?.code === 'in_progress');
  let r = await postSign(urls[start % urls.length]!, key, body, idempotencyKey);
  for (let i = 1; i < tries && repeat(r); i++) {
    await new Promise((res) => setTimeout(res, 50 * i));
    r = await postSign(urls[(start + i) % urls.length]!, key, body, idempotencyKey);
  }
  return r;
}
