import { accessSync, constants, statfsSync } from 'node:fs';
import { dirname } from 'node:path';
import type { AppDeps } from '../app/deps.js';
import type { ClockAgreement, ClockAgreementCheck } from './clockAgreement.js';

/**
 * What /readyz reports: one check per dependency that can fail. `database` and `signer` are
 * fatal (any failure answers 503: a balancer should stop sending payments here); `rpc` entries
 * are details only, since a payment does not fail when a fee estimate does (defaults are used).
 * `clock` is not fatal either (signing stays bounded, see clockAgreement.ts) but turns the status
 * to `degraded`, still 200, so that monitoring sees it without a balancer draining every replica
 * of a host whose clock was stepped.
 * Every check reads memory or makes a syscall or two; the RPC check answers from its last probe
 * and starts the next in the background, so /readyz never waits on the network.
 */
export type ReadinessReport = {
  status: 'ready' | 'degraded' | 'unavailable';
  checks: {
    server: { ok: boolean; draining: boolean };
    database: { ok: boolean; detail: string; free_bytes?: number };
    signer: { ok: boolean; detail: string; threads: Array<{ online: boolean; restarts: number; last_exit_code?: number }> };
    /** Configured JSON-RPC endpoints (never their URLs, which may carry credentials); not fatal. */
    rpc: Record<string, { configured: boolean; reachable: boolean | null; checked_at: string | null; detail?: string }>;
    /** Whether the wall clock and the ledger clock agree (present where the service watches them). */
    clock?: ClockAgreementCheck;
  };
};

export type ReadinessOptions = {
  tempoRpcUrl?: string;
  /** The wall and ledger clocks' agreement, reported as the `clock` check. */
  clock?: ClockAgreement;
  /** How long an RPC probe's answer is reused (default 30 s). */
  rpcRecheckMs?: number;
  /** One probe's deadline (default 2 s). */
  rpcTimeoutMs?: number;
};

export type Readiness = {
  check: (draining: boolean) => ReadinessReport;
  /** Resolves when no RPC probe is running (tests await the first one). */
  settled: () => Promise<void>;
};

/** Builds the checks for one running service. The first RPC probe starts at once. */
export function createReadiness(deps: AppDeps, options: ReadinessOptions = {}): Readiness {
  const tempo = options.tempoRpcUrl ? createRpcProbe(options.tempoRpcUrl, options.rpcRecheckMs ?? 30_000, options.rpcTimeoutMs ?? 2_000) : undefined;
  tempo?.refresh();
  return {
    check(draining) {
      const database = checkDatabase(deps);
      const signer = checkSigner(deps);
      const ok = !draining && database.ok && signer.ok;
      const clock = options.clock?.check();
      return {
        status: !ok ? 'unavailable' : clock && !clock.ok ? 'degraded' : 'ready',
        checks: {
          server: { ok: !draining, draining },
          database,
          signer,
          rpc: { tempo: tempo ? tempo.state() : { configured: false, reachable: null, checked_at: null } },
          ...(clock ? { clock } : {}),
        },
      };
    },
    settled: async () => tempo?.settled(),
  };
}

function checkDatabase(deps: AppDeps): ReadinessReport['checks']['database'] {
  if (deps.store.failure()) return { ok: false, detail: 'storage failed: a sync or write failed; the service is stopping' };
  if (!deps.store.isOpen()) return { ok: false, detail: 'database closed' };
  // PostgreSQL: no file of ours to check; the database must answer (a background ping).
  if (deps.store.database) return deps.store.database();
  const db = { name: deps.store.dataFile() };
  // Cheap proof that a write can still land: the file and its directory (where SQLite creates the
  // -wal and -shm files) are writable by this process, and the disk is not full.
  try {
    accessSync(db.name, constants.W_OK);
    accessSync(dirname(db.name), constants.W_OK);
  } catch (err) {
    return { ok: false, detail: `database not writable (${(err as NodeJS.ErrnoException).code ?? 'error'})` };
  }
  let free: number | undefined;
  try {
    const fs = statfsSync(dirname(db.name));
    free = fs.bavail * fs.bsize;
  } catch {
    // statfs is a detail; access() above decided writability.
  }
  if (free === 0) return { ok: false, detail: 'no free space on the data directory\'s disk', free_bytes: 0 };
  return { ok: true, detail: 'writable', ...(free === undefined ? {} : { free_bytes: free }) };
}

function checkSigner(deps: AppDeps): ReadinessReport['checks']['signer'] {
  const threads = deps.signer.threads();
  const online = threads.filter((t) => t.online).length;
  const ok = threads.length > 0 && online === threads.length;
  return {
    ok,
    detail: ok ? `${online} of ${threads.length} signing threads online` : `${online} of ${threads.length} signing threads online (a dead thread is replaced; this clears once it is up)`,
    threads: threads.map((t) => ({ online: t.online, restarts: t.restarts, ...(t.lastExitCode === undefined ? {} : { last_exit_code: t.lastExitCode }) })),
  };
}

/** Probes a JSON-RPC node with `eth_chainId`; at most one probe in flight, one per `recheckMs`. */
function createRpcProbe(url: string, recheckMs: number, timeoutMs: number) {
  let reachable: boolean | null = null;
  let checkedAt: number | undefined;
  let detail: string | undefined;
  let running: Promise<void> | undefined;
  async function probe(): Promise<void> {
    try {
      const res = await fetch(url, {
        method: 'POST', headers: { 'content-type': 'application/json' }, redirect: 'error',
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }), signal: AbortSignal.timeout(timeoutMs),
      });
      const text = (await res.text()).slice(0, 65_536);
      const body = JSON.parse(text) as { result?: unknown };
      reachable = res.ok && typeof body.result === 'string';
      detail = reachable ? undefined : `answered HTTP ${res.status} without a chain id`;
    } catch (err) {
      reachable = false;
      // The error's name only: messages can repeat the URL, which may carry credentials.
      detail = (err as Error).name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : 'unreachable or not JSON-RPC';
    }
    checkedAt = Date.now();
  }
  const refresh = () => {
    running ??= probe().finally(() => (running = undefined));
  };
  return {
    refresh,
    settled: async () => running,
    state() {
      if (checkedAt === undefined || Date.now() - checkedAt >= recheckMs) refresh();
      return { configured: true, reachable, checked_at: checkedAt === undefined ? null : new Date(checkedAt).toISOString(), ...(detail ? { detail } : {}) };
    },
  };
}
