import { createHmac } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { DestinationStream, Logger } from 'pino';
import type { AppDeps } from './app/deps.js';
import { validateAdminToken } from './app/accounts/auth/credentials.js';
import { adminTokenHash, bootstrapIfEmpty, markBannerShown, unshownBootstrap, type BootstrapFile } from './bootstrap.js';
import { ConfigError, type Config } from './config.js';
import { createLogger } from './observability/logger.js';
import { startServer, type RunningServer } from './server/server.js';
import { loadMasterKey } from './signing/masterKey.js';
import { createSignerPool } from './signing/signerPool.js';
import { defaultSafeFetchOptions } from './paywalls/safeFetch.js';
import { createGate, DEFAULT_MAX_PROBES, DEFAULT_MAX_SIGN_QUEUE, shareOf } from './overload/admission.js';
import { createOfferCache } from './paywalls/offerCache.js';
import { createTempoFeeSource } from './signing/tempoFees.js';
import { createChainRpc } from './chain/rpc.js';
import { createSubmitter, DEFAULT_TRACKING, startSubmitter } from './app/submission/submit.js';
import { SignsInFlight } from './app/signsInFlight.js';
import { StrandedPayments } from './app/strandedPayments.js';
import { createTreasuryVault } from './signing/treasury.js';
import { sweepExpiredApprovals } from './app/payments/expiry.js';
import { repairInterrupted } from './app/submission/maintenance.js';
import { openStore, type Store } from './store/store.js';
import { FRAMES_PER_MB } from './store/checkpointer.js';
import { writeTxn } from './store/db.js';
import { lockDataDir, prepareDataDir } from './store/dataDir.js';
import { openLedgerClock } from './store/ledgerClock.js';
import { createUnitOfWork } from './store/unitOfWork.js';
import { createDashboard } from './dashboard/dashboard.js';
import { createMetrics } from './observability/metrics.js';
import { watchClockAgreement } from './observability/clockAgreement.js';
import type { LedgerClock } from './store/ledgerClock.js';
import type { AppStore, UnitOfWork } from './store/port.js';
import type { PgBackend } from './store/pg/appStore.js';
import { DEFAULT_STALE_SIGNING_MS, repairStaleSigning, type ClusterJobs } from './store/pg/cluster.js';
import { createConflictSync } from './store/pg/conflicts.js';

/** How often overdue approvals are expired without anyone reading them. */
const APPROVAL_SWEEP_MS = 15_000;
/** How often raw transactions waiting for broadcast are retried (app/submission/submit.ts). */
const SUBMIT_INTERVAL_MS = 5_000;

export type Paypolicy = RunningServer & {
  deps: AppDeps;
  /**
   * The SQLite store behind deps.store and deps.uow: its connections and write queue (tests,
   * maintenance). With --database-url there is none: every use throws (the PostgreSQL store is `pg`).
   */
  store: Store;
  /** The PostgreSQL store with --database-url, else undefined. */
  pg: PgBackend | undefined;
  log: Logger;
  /** Secrets created by a first start, for the banner, until one start has printed them; undefined after. */
  bootstrap: BootstrapFile | undefined;
  /** Graceful stop: stop accepting, drain, close the database. */
  stop: (graceMs?: number) => Promise<void>;
};

export type StartOptions = {
  logDestination?: DestinationStream;
  /** Replaces the ledger clock, and the validity clock with it (tests move time with this). */
  now?: () => number;
  /**
   * Called once after a failed sync, when the service has stopped acknowledging (every request
   * answers 503 from then on). `paypolicy serve` exits non-zero from here.
   */
  onStorageFailure?: (err: Error) => void;
  /** Background submitter period (default SUBMIT_INTERVAL_MS); tests shorten it. */
  submitIntervalMs?: number;
};

/**
 * Composition root: config → logger → data directory → database (integrity check) → master key →
 * vault → first-start bootstrap → one listener. Everything a running instance needs is built here and nowhere else.
 */
export async function startPaypolicy(config: Config, options: StartOptions = {}): Promise<Paypolicy> {
  if (config.adminToken !== undefined) {
    const problem = validateAdminToken(config.adminToken);
    if (problem) throw new ConfigError(`PAYPOLICY_ADMIN_TOKEN ${problem}`);
  }
  const log = createLogger(config.logLevel, options.logDestination);
  const { narrowed } = prepareDataDir(config.dataDir);
  if (narrowed.length > 0) log.warn({ dataDir: config.dataDir, files: narrowed }, 'narrowed files readable by group or others to mode 0600');
  const dbFile = join(config.dataDir, 'paypolicy.db');
  if (config.skipIntegrityCheck) log.warn({ file: dbFile }, 'integrity check skipped (--skip-integrity-check)');
  // An existing key (its mode, its format) is checked before anything is created next to it.
  let master = config.masterKey || existsSync(join(config.dataDir, 'master.key')) ? loadMasterKey(config.masterKey, config.dataDir) : undefined;
  // One process per data directory, taken before anything in it is created or written.
  const lock = lockDataDir(config.dataDir);
  let opened: Opened;
  try {
    opened = config.databaseUrl ? await openPostgres(config, log, master) : await openSqlite(config, log, dbFile, master, options);
  } catch (err) {
    lock.release();
    throw err;
  }
  const { store, appStore, uow, vault, clock, pgBackend, closeStore } = opened;
  const maxSignQueue = config.maxSignQueue ?? DEFAULT_MAX_SIGN_QUEUE;
  const signer = createSignerPool(config.signerThreads, (orgId) => vault.privateKeyForWorker(orgId), maxSignQueue, config.maxQueueMs, shareOf(maxSignQueue, config.maxSignQueuePerOrg));
  log.info({ rule: clock.rule, skewMs: clock.skewMs() }, 'ledger clock started');
  // A same-boot start continuing a wrong anchor disagrees from the first reading: say so now.
  const clockAgreement = watchClockAgreement(clock.skewMs, log);
  clockAgreement.check();
  const now = options.now ?? clock.now;
  if (config.probeAllowHosts.length > 0) {
    log.warn({ hosts: config.probeAllowHosts }, 'PAYPOLICY_PROBE_ALLOW_HOSTS is set: these hosts bypass the private-address block of quote and sign (tests only)');
  }
  // One registry of RPC clients: submission and the Tempo fee estimates share its entries.
  const chains = createChainRpc(config.rpcUrls);
  const maxProbes = config.maxProbes ?? DEFAULT_MAX_PROBES;
  const deps: AppDeps = {
    store: appStore, uow, vault, signer, now, validityNow: options.now ?? clock.validityNow, log,
    inflight: new SignsInFlight(),
    stranded: new StrandedPayments({ uow, now, log, failed: () => appStore.failure() !== undefined }),
    probe: {
      ...defaultSafeFetchOptions, allowHttp: config.dev, allowHosts: new Set(config.probeAllowHosts),
      slots: createGate(maxProbes, 'too many paywall probes in flight', shareOf(maxProbes, config.maxProbesPerOrg)),
    },
    offers: createOfferCache(now),
    tempoFees: createTempoFeeSource({ chains, legacyUrl: config.tempoRpcUrl }, log),
    chains,
    submitter: createSubmitter({ chains, uow, log, now }),
  };
  // Nothing can be mid-signature at start-up: such rows were cut off by a crash and never answered.
  // Approved ones become collectable again; the rest fail (app/submission/maintenance.ts repairInterrupted).
  // On PostgreSQL other replicas may be signing right now: only rows older than --stale-signing-ms
  // are repaired, by one replica at a time, at start and then periodically (store/pg/cluster.ts).
  const staleSigningMs = config.staleSigningMs ?? DEFAULT_STALE_SIGNING_MS;
  const repairStale = async (cluster: ClusterJobs, pool: PgBackend['pool']) => {
    const repaired = await cluster.once('repair-stale-signing', () => repairStaleSigning(pool, deps.now() - staleSigningMs, deps.now()));
    if (repaired && (repaired.failed > 0 || repaired.reapproved > 0)) log.warn(repaired, 'repaired payments left in signing by a replica that stopped');
  };
  try {
    if (pgBackend) {
      await repairStale(pgBackend.cluster, pgBackend.pool);
    } else {
      const repaired = await repairInterrupted(deps);
      if (Object.values(repaired).some((n) => n > 0)) log.warn(repaired, 'repaired payments interrupted while signing');
    }
  } catch (err) {
    await signer.close();
    await closeStore();
    lock.release();
    throw err;
  }
  let server: RunningServer;
  let bootstrap: BootstrapFile | undefined;
  try {
    // Once per cluster: replicas starting together take turns, and the later ones find it done.
    bootstrap = pgBackend
      ? await pgBackend.cluster.exclusive('bootstrap', async () => {
        const file = await bootstrapIfEmpty(deps, config.dataDir, config.adminToken);
        await pgBackend.refreshTreasuries();
        return file;
      })
      : await bootstrapIfEmpty(deps, config.dataDir, config.adminToken);
    bootstrap ??= await unshownBootstrap(deps, config.dataDir);
    const tokenHash = await adminTokenHash(deps, config.adminToken);
    server = await startServer({
      deps, log, host: config.host, port: config.port, adminTokenHash: () => tokenHash,
      // The dashboard for humans is served by the same listener, under /dashboard.
      extraHandler: createDashboard(deps).handle,
      tls: config.tlsCert && config.tlsKey ? { cert: readFileSync(config.tlsCert), key: readFileSync(config.tlsKey) } : undefined,
      limits: { maxConnections: config.maxConnections, idleTimeoutMs: config.idleTimeoutMs, requestTimeoutMs: config.requestTimeoutMs, maxInFlight: config.maxInFlight, maxInFlightPerOrg: config.maxInFlightPerOrg },
      metrics: { metrics: createMetrics(deps, { agentLabels: config.metricsAgentLabels, clock: clockAgreement }), token: config.metricsToken },
      readiness: { tempoRpcUrl: config.tempoRpcUrl, clock: clockAgreement },
    });
    // Listening now, so the caller prints the banner; a start that could not listen left it for the
    // next. A failed mark only means the next start shows the banner again.
    if (bootstrap) await markBannerShown(deps).catch(() => undefined);
  } catch (err) {
    await signer.close();
    await closeStore();
    lock.release();
    throw err;
  }
  // Expiry also happens on every read; the sweep releases holds nobody reads. One sweep at a time.
  // On PostgreSQL it also repairs stale signing rows, so it runs at least twice per bound.
  const sweepEveryMs = pgBackend ? Math.min(APPROVAL_SWEEP_MS, Math.floor(staleSigningMs / 2)) : APPROVAL_SWEEP_MS;
  let sweeping = false;
  const sweep = setInterval(() => {
    // Also watched here, so a disagreement is logged even when nobody reads /readyz or /metrics.
    clockAgreement.check();
    if (sweeping) return;
    sweeping = true;
    void (async () => {
      try {
        // On PostgreSQL the sweeps run on one replica per period, the repair of rows a dead
        // replica left in signing first (their approved ones may then expire right here).
        if (pgBackend) await repairStale(pgBackend.cluster, pgBackend.pool);
        const expired = pgBackend
          ? await pgBackend.cluster.oncePer('approval-sweep', sweepEveryMs, () => {
            log.debug({ job: 'approval-sweep' }, 'cluster job ran');
            return sweepExpiredApprovals(deps);
          }) ?? 0
          : await sweepExpiredApprovals(deps);
        if (expired > 0) log.info({ expired }, 'expired approval requests');
      } catch (err) {
        log.error({ err }, 'approval sweep failed');
      } finally {
        sweeping = false;
      }
    })();
  }, sweepEveryMs);
  sweep.unref();
  // Raw transactions the first broadcast did not get accepted (node down or slow) are retried here.
  const background = startSubmitter(deps, options.submitIntervalMs ?? SUBMIT_INTERVAL_MS, {
    confirmations: config.confirmations ?? DEFAULT_TRACKING.confirmations, replaceAfterMs: config.replaceAfterMs ?? DEFAULT_TRACKING.replaceAfterMs,
  }, pgBackend ? async (job, fn) => void await pgBackend.cluster.once(job, fn) : undefined);
  if (config.rpcUrls && config.rpcUrls.size > 0) log.info({ chains: [...config.rpcUrls.keys()] }, 'raw transactions on these chains are submitted on chain');
  // PostgreSQL: a chain conflict one replica saw stops raw transactions on every replica (store/pg/conflicts.ts).
  let conflictTimer: NodeJS.Timeout | undefined;
  if (pgBackend) {
    const conflicts = createConflictSync(pgBackend.pool, deps.submitter.conflicts.shared, (pair, reason) => {
      deps.submitter.nonces.forget(pair);
      log.warn({ pair, reason: reason ?? null }, reason ? 'chain conflict reported by another replica: raw transactions refused there' : 'chain conflict cleared by a replica\'s restart');
    });
    await conflicts.clear().catch((err: Error) => log.warn({ reason: err.message }, 'clearing recorded chain conflicts failed'));
    conflictTimer = setInterval(() => void conflicts.sync().catch((err: Error) => log.warn({ reason: err.message }, 'sharing chain conflicts failed')), 1000);
    conflictTimer.unref();
  }
  log.info({ url: server.url, dataDir: config.dataDir }, 'paypolicy listening');
  let stopping: Promise<void> | undefined;
  return {
    ...server,
    deps,
    store,
    pg: pgBackend,
    log,
    bootstrap,
    stop(graceMs) {
      stopping ??= (async () => {
        clearInterval(sweep);
        clearInterval(conflictTimer);
        background.stop();
        await server.close(graceMs);
        await signer.close();
        try {
          await closeStore();
        } finally {
          lock.release();
        }
        log.info('paypolicy stopped');
        log.flush();
      })();
      return stopping;
    },
  };
}

/** What the composition root needs of a store, SQLite's or PostgreSQL's. */
type Opened = {
  /** SQLite's store; on PostgreSQL an object whose every use throws (Paypolicy.store). */
  store: Store;
  appStore: AppStore;
  uow: UnitOfWork;
  vault: ReturnType<typeof createTreasuryVault>;
  clock: LedgerClock;
  pgBackend: PgBackend | undefined;
  closeStore: () => Promise<void>;
};

/** The embedded SQLite store in the data directory (the default). */
async function openSqlite(config: Config, log: Logger, dbFile: string, master: ReturnType<typeof loadMasterKey> | undefined, options: StartOptions): Promise<Opened> {
  const store = openStore(dbFile, {
    skipIntegrityCheck: config.skipIntegrityCheck,
    checkpoints: config.walRestartMb === undefined ? undefined : { restartFrames: config.walRestartMb * FRAMES_PER_MB },
  });
  let vault: ReturnType<typeof createTreasuryVault>;
  try {
    // A database that already holds sealed treasury keys never gets a freshly generated key.
    const sealed = store.organizations.list().some((org) => org.treasuryAddress);
    master ??= loadMasterKey(config.masterKey, config.dataDir, !sealed);
    if (master.source === 'file-created') log.info({ file: join(config.dataDir, 'master.key') }, 'created master key file (mode 0600); back it up with the database');
    vault = createTreasuryVault(store.treasuryKeys, master.key);
    vault.verifyMasterKey();
  } catch (err) {
    await store.close();
    throw err;
  }
  store.onFailure((err) => {
    log.fatal({ err, file: dbFile }, 'storage failed: a sync or write of the database failed, so what is on disk is unknown; refusing every request and stopping (restart recovers from the disk)');
    options.onStorageFailure?.(err);
  });
  // Cap windows, expiries and validity windows run on the ledger clock, not the wall clock.
  const uow = createUnitOfWork(store);
  // Start-up, before anything else runs: the synchronous writer tables, one FULL-synced commit.
  const clock = openLedgerClock(store, (fn) => writeTxn(store.db, fn));
  return { store, appStore: store.app, uow, vault, clock, pgBackend: undefined, closeStore: () => store.close() };
}

/** settings key of the master key's fingerprint: every replica of one database must hold the same key. */
const MASTER_KEY_CHECK = 'master_key_check';

/**
 * The shared PostgreSQL store (--database-url). The master key is never generated here: every
 * replica must be given the same one (PAYPOLICY_MASTER_KEY, or master.key copied into each data
 * directory), and the first replica records its fingerprint so a replica started with another key
 * refuses to start instead of sealing keys the others cannot open.
 */
async function openPostgres(config: Config, log: Logger, master: ReturnType<typeof loadMasterKey> | undefined): Promise<Opened> {
  if (!master) {
    throw new ConfigError('with --database-url the master key must be given: set PAYPOLICY_MASTER_KEY (64 hex characters, e.g. from `openssl rand -hex 32`) or put master.key in the data directory; every replica needs the same key');
  }
  const { openPgBackend, openPgLedgerClock } = await import('./store/pg/appStore.js');
  const pg = await openPgBackend({
    connectionString: config.databaseUrl!, poolSize: config.databasePoolSize, statementTimeoutMs: config.databaseStatementTimeoutMs,
    onError: (err) => log.warn({ reason: err.message }, 'a pooled PostgreSQL connection failed; it is replaced on demand'),
  });
  try {
    const key = master.key;
    const fingerprint = createHmac('sha256', key).update('paypolicy master key check').digest('hex');
    await pg.cluster.exclusive('master-key', async () => {
      const stored = await pg.tables.settings.get(MASTER_KEY_CHECK);
      if (stored === undefined) await pg.uow.write(async (tx) => tx.settings.set(MASTER_KEY_CHECK, fingerprint));
      else if (stored !== fingerprint) throw new Error('this master key is not the one the other replicas of this database use (its fingerprint differs); give every replica the same PAYPOLICY_MASTER_KEY or master.key');
    });
    const vault = createTreasuryVault(pg.treasuryKeys, key, { refresh: pg.refreshTreasuries });
    vault.verifyMasterKey();
    const clock = await openPgLedgerClock(pg.tables, pg.uow);
    log.info({ poolSize: config.databasePoolSize ?? 10 }, 'store: PostgreSQL');
    return { store: noSqliteStore(), appStore: pg.app, uow: pg.uow, vault, clock, pgBackend: pg, closeStore: () => pg.close() };
  } catch (err) {
    await pg.close();
    throw err;
  }
}

/** Paypolicy.store on PostgreSQL: SQLite's handles do not exist; any use is a bug, said plainly. */
function noSqliteStore(): Store {
  return new Proxy({}, {
    get(_t, name) {
      throw new Error(`Paypolicy.store.${String(name)} is SQLite's; this instance runs on PostgreSQL (use deps.store, deps.uow or Paypolicy.pg)`);
    },
  }) as Store;
}
