import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BootstrapFile } from '../../src/bootstrap.js';
import type { Config } from '../../src/config.js';
import { startPaypolicy, type Paypolicy } from '../../src/paypolicy.js';
import { createTestDatabase, type TestDatabase } from './pgDatabase.js';

export type TestServer = {
  app: Paypolicy;
  url: string;
  dataDir: string;
  /** Every JSON log line the server wrote, in order. */
  logs: string[];
  bootstrap: BootstrapFile;
  /** Stops the server; removes the data directory unless keepData. */
  close: (opts?: { keepData?: boolean }) => Promise<void>;
};

export type TestServerOptions = {
  dataDir?: string;
  adminToken?: string;
  masterKey?: string;
  now?: () => number;
  logLevel?: Config['logLevel'];
  /** Allow http:// probes (development mode). */
  dev?: boolean;
  /** Test-only host:port entries the probe may reach despite the private-address block. */
  probeAllowHosts?: string[];
  /** PEM files for TLS. */
  tls?: { cert: string; key: string };
  /** Tempo JSON-RPC endpoint for MPP fee estimates. */
  tempoRpcUrl?: string;
  /** EVM RPC endpoints per chain (--rpc-url), and the background submitter's period. */
  rpcUrls?: ReadonlyMap<number, string>;
  submitIntervalMs?: number;
  /** Tracking of submitted raw transactions: --confirmations and --replace-after-ms. */
  tracking?: Pick<Config, 'confirmations' | 'replaceAfterMs'>;
  /** Connection cap and timeouts (small values keep limit tests fast). */
  limits?: Pick<Config, 'maxConnections' | 'idleTimeoutMs' | 'requestTimeoutMs' | 'maxInFlight' | 'maxInFlightPerOrg' | 'maxSignQueue' | 'maxSignQueuePerOrg' | 'maxQueueMs' | 'maxProbes' | 'maxProbesPerOrg'>;
  /** /metrics token and agent labels. */
  metrics?: Pick<Config, 'metricsToken' | 'metricsAgentLabels'>;
};

/**
 * Which store the test servers run on: SQLite (default), or with PAYPOLICY_TEST_STORE=pg a fresh
 * PostgreSQL database per server (dropped at close), as the `pg` vitest project runs the suites
 * that must pass on both stores.
 */
export const TEST_STORE = process.env.PAYPOLICY_TEST_STORE === 'pg' ? 'pg' : 'sqlite';

/**
 * PostgreSQL databases (and their master keys) of servers closed with `keepData`, by data
 * directory: a server started again on that directory is a restart on the same store, as on SQLite.
 */
const keptDatabases = new Map<string, { db: TestDatabase; masterKey: string }>();

/** Starts the real service on 127.0.0.1:0 with a fresh data directory and captured logs. */
export async function startTestServer(opts: TestServerOptions = {}): Promise<TestServer> {
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), 'paypolicy-test-'));
  const logs: string[] = [];
  // PostgreSQL: a database of its own, and a master key (never generated on PostgreSQL).
  const kept = keptDatabases.get(dataDir);
  keptDatabases.delete(dataDir);
  const pgdb = TEST_STORE === 'pg' ? kept?.db ?? await createTestDatabase() : undefined;
  const masterKey = pgdb ? opts.masterKey ?? kept?.masterKey ?? randomBytes(32).toString('hex') : opts.masterKey;
  const app = await startPaypolicy(
    {
      ...(pgdb ? { databaseUrl: pgdb.url, databasePoolSize: 6 } : {}),
      port: 0, host: '127.0.0.1', dataDir, logLevel: opts.logLevel ?? 'info', adminToken: opts.adminToken,
      masterKey, tlsCert: opts.tls?.cert, tlsKey: opts.tls?.key, signerThreads: 1, dev: opts.dev ?? false, probeAllowHosts: opts.probeAllowHosts ?? [], tempoRpcUrl: opts.tempoRpcUrl, rpcUrls: opts.rpcUrls,
      // On PostgreSQL one agent's writes take turns on its cap at the database's round trip: a
      // 500-request burst on one agent outlasts the default 1 s signing-queue bound and is shed
      // with 503 overloaded. The suites check correctness under such bursts, so the bounds are wide.
      // On either store, test files share the machine's cores with other files: a payment that waits
      // a second for a core is not what a test asks about, so the signing-queue deadline is wide too
      // (test/adversarial/overload.test.ts sets its own to test shedding).
      maxQueueMs: 60_000,
      ...(pgdb ? { maxInFlight: 2000, maxSignQueue: 2000 } : {}),
      ...opts.limits,
      ...opts.metrics,
      ...opts.tracking,
    },
    { logDestination: { write: (line: string) => void logs.push(line) }, now: opts.now, submitIntervalMs: opts.submitIntervalMs },
  );
  // Listening comes before the signing threads are online (/readyz says 503 until then); tests
  // start from a ready server.
  for (let tries = 0; !app.deps.signer.threads().every((t) => t.online); tries++) {
    if (tries > 400) throw new Error('the test server\'s signing threads did not come online');
    await new Promise((r) => setTimeout(r, 25));
  }
  const bootstrap = app.bootstrap ?? (JSON.parse((await import('node:fs')).readFileSync(join(dataDir, 'bootstrap.json'), 'utf8')) as BootstrapFile);
  return {
    app, url: app.url, dataDir, logs, bootstrap,
    async close({ keepData = false } = {}) {
      await app.stop(1000);
      if (!keepData) rmSync(dataDir, { recursive: true, force: true });
      if (!keepData) await pgdb?.drop();
      else if (pgdb) keptDatabases.set(dataDir, { db: pgdb, masterKey: masterKey! });
    },
  };
}

export type RestResult = { status: number; headers: Headers; text: string; json: any };

/** One REST call with fetch; `key` becomes `Authorization: Bearer <key>`. */
export async function rest(
  base: string,
  method: string,
  path: string,
  opts: { key?: string; body?: unknown; rawBody?: string | Uint8Array; headers?: Record<string, string> } = {},
): Promise<RestResult> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.key !== undefined) headers.authorization = `Bearer ${opts.key}`;
  let body: string | Uint8Array | undefined = opts.rawBody;
  if (opts.body !== undefined) {
    body = JSON.stringify(opts.body);
    headers['content-type'] ??= 'application/json';
  }
  const res = await fetch(`${base}${path}`, { method, headers, body });
  const text = await res.text();
  let json: unknown;
  try {
    json = text === '' ? undefined : JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}
