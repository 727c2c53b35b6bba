import pg from 'pg';
import type { Organization } from '../../domain/types.js';
import type { AppStore, StoreTables, UnitOfWork } from '../port.js';
import { parseAnchor, startLedgerClock, systemClockSources, type ClockSources, type LedgerClock } from '../ledgerClock.js';
import type { OrganizationStore } from '../organizations.js';
import { createClusterJobs, type ClusterJobs } from './cluster.js';
import { createPgStore, type PgStoreOptions } from './store.js';

/**
 * The PostgreSQL store as the service runs on it (paypolicy.ts with --database-url): the use
 * cases' AppStore and UnitOfWork over P2's createPgStore, the treasury keys as the vault reads them,
 * the cluster-once jobs, the ledger clock, and a background ping for /readyz.
 *
 * No table data is cached in this process (a revoked key, a paused agent, a changed policy are
 * read from the database on the next request, whichever replica made the change), with one
 * exception: treasury keys, which never change once provisioned (see createPgTreasuryKeys).
 */

export type PgBackend = Awaited<ReturnType<typeof openPgBackend>>;

/** How often the database is pinged for /readyz, and how long one ping may take. */
const PING_EVERY_MS = 1_000;
const PING_TIMEOUT_MS = 2_000;
/** Connections for the cluster jobs' advisory locks (one per job running at once: submitter per chain, sweeps). */
const UPKEEP_CONNECTIONS = 8;

export async function openPgBackend(options: PgStoreOptions) {
  const store = await createPgStore(options);
  const tables: StoreTables = store;
  // Pools of their own for the cluster jobs' lock sessions (a submitter pass holds its lock across
  // RPC calls of seconds) and for /readyz's ping, so neither waits behind, nor takes slots from,
  // the requests' pool: readiness says whether the database answers, not whether this replica is busy.
  const side = { connectionString: options.connectionString, connectionTimeoutMillis: options.connectTimeoutMs ?? 2000, keepAlive: true };
  // The jobs' own statements (lock, the settings row of their last start) are bounded like the
  // requests' ones: behind a lock nobody releases, a sweep must fail and come back next period, not
  // hang and stop that job on every replica. Waiting for the bootstrap lock is bounded the same way.
  const statementTimeoutMs = options.statementTimeoutMs ?? 5000;
  const upkeep = new pg.Pool({
    ...side, max: UPKEEP_CONNECTIONS, application_name: 'paypolicy upkeep', idle_in_transaction_session_timeout: options.idleInTransactionTimeoutMs ?? 10_000,
    statement_timeout: statementTimeoutMs, query_timeout: statementTimeoutMs + 1000,
  });
  const pingPool = new pg.Pool({ ...side, max: 1, application_name: 'paypolicy ping', statement_timeout: PING_TIMEOUT_MS, query_timeout: PING_TIMEOUT_MS });
  for (const p of [upkeep, pingPool]) p.on('error', (err) => options.onError?.(err));
  const cluster: ClusterJobs = createClusterJobs(upkeep);
  const treasury = createPgTreasuryKeys(store.pool);
  const closeAll = async () => {
    await Promise.allSettled([upkeep.end(), pingPool.end()]);
    await store.close();
  };
  try {
    await treasury.refresh();
  } catch (err) {
    await closeAll();
    throw err;
  }

  // /readyz answers from memory: the last ping's outcome, refreshed in the background.
  let health = { ok: true, detail: 'answering', at: Date.now() };
  let pinging = false;
  const ping = () => {
    if (pinging || !store.isOpen()) return;
    pinging = true;
    void pingPool.query('SELECT 1').then(
      () => (health = { ok: true, detail: 'answering', at: Date.now() }),
      (err: Error) => (health = { ok: false, detail: `database unavailable (${err.message})`, at: Date.now() }),
    ).finally(() => (pinging = false));
  };
  const pinger = setInterval(ping, PING_EVERY_MS);
  pinger.unref();

  const app: AppStore = {
    ...tables,
    failure: () => undefined,
    onFailure: () => {},
    onWalSync: () => {},
    isOpen: () => store.isOpen(),
    dataFile: () => '',
    database: () => {
      // A ping older than two periods (the database stopped answering mid-ping) counts as down.
      if (Date.now() - health.at > 3 * PING_EVERY_MS + PING_TIMEOUT_MS) return { ok: false, detail: 'database not answering' };
      return { ok: health.ok, detail: health.detail };
    },
  };
  const uow: UnitOfWork = {
    write: (fn) => store.uow.write(fn),
    read: (fn) => store.uow.read(fn),
    durable: () => store.uow.durable(),
  };
  return {
    app,
    uow,
    tables,
    pool: store.pool as pg.Pool,
    cluster,
    treasuryKeys: treasury.organizations,
    /** Reads the treasury keys provisioned since the last look (another replica's new organizations). */
    refreshTreasuries: treasury.refresh,
    async close(): Promise<void> {
      clearInterval(pinger);
      treasury.stop();
      await closeAll();
    },
  };
}

/**
 * Treasury keys for the vault (src/signing/treasury.ts reads them synchronously): every sealed key
 * of the database, loaded at start and then kept up to date. A key row is immutable once written
 * (an organization's treasury never changes), so keeping it in memory cannot serve a stale value;
 * what can lag is an organization provisioned on another replica a moment ago: its first look-up
 * here misses, starts a read, and the request is refused as `treasury_not_provisioned` until that
 * read lands (milliseconds; also every second in the background). The ciphertext stays sealed
 * here; only the vault opens it. New treasuries are inserted through the write transaction
 * (app/organizations/organizations.ts provisionTreasury), never through this object.
 */
export function createPgTreasuryKeys(pool: pg.Pool, everyMs = 1_000) {
  const keys = new Map<string, { address: string; ciphertext: Buffer }>();
  let running: Promise<void> | undefined;
  const refresh = (): Promise<void> => {
    running ??= (async () => {
      try {
        const { rows } = await pool.query<{ org_id: string; address: string; key_ciphertext: Buffer }>(
          'SELECT org_id, address, key_ciphertext FROM treasuries WHERE NOT (org_id = ANY($1::text[]))', [[...keys.keys()]],
        );
        for (const r of rows) keys.set(r.org_id, { address: r.address, ciphertext: r.key_ciphertext });
      } finally {
        running = undefined;
      }
    })();
    return running;
  };
  const timer = setInterval(() => void refresh().catch(() => {}), everyMs);
  timer.unref();
  const organizations = {
    treasuryKey(orgId: string) {
      const key = keys.get(orgId);
      if (!key) void refresh().catch(() => {});
      return key;
    },
    /** The organizations with a sealed key, as verifyMasterKey walks them (only id and address are read). */
    list(): Organization[] {
      return [...keys].map(([id, k]) => ({ id, treasuryAddress: k.address }) as unknown as Organization);
    },
    insertTreasury(): void {
      throw new Error('on PostgreSQL a treasury is inserted through its write transaction');
    },
  } as unknown as OrganizationStore;
  return { organizations, refresh, stop: () => clearInterval(timer) };
}

const ANCHOR_KEY = 'ledger_clock_anchor';

/**
 * The ledger clock on a shared database: the same rule as SQLite's (ledgerClock.ts), from the
 * anchor the last replica to start recorded and the newest time in the ledger. A replica on the
 * same machine (same boot) continues that anchor's time by the monotonic clock; one on another
 * machine starts from its wall clock, never earlier than the newest ledger time. Replicas' clocks
 * must agree within a few seconds (NTP): cap windows and expiries are compared across replicas.
 */
export async function openPgLedgerClock(tables: StoreTables, uow: UnitOfWork, src: ClockSources = systemClockSources): Promise<LedgerClock> {
  const clock = startLedgerClock(parseAnchor(await tables.settings.get(ANCHOR_KEY)), await tables.payments.newestTime(), src);
  await uow.write(async (tx) => tx.settings.set(ANCHOR_KEY, JSON.stringify(clock.anchor)));
  return clock;
}
