import Database from 'better-sqlite3';
import type { Agent, ApiKeyRecord } from '../domain/types.js';
import type { AppStore, StoreTables } from './port.js';
import { asyncTables, type SyncTables } from './syncTables.js';
import type { SharedCache } from './agents.js';
import { failStop, onStorageFailure, openDatabase, storageFailure, type Db, type OpenOptions } from './db.js';
import { createAgentStore } from './agents.js';
import { createApiKeyStore, type ApiKeyCache } from './apiKeys.js';
import { createApprovalStore } from './approvals.js';
import { createDashboardSessionStore } from './dashboardSessions.js';
import { createDashboardUserStore } from './dashboardUsers.js';
import { createLoginFailureStore } from './loginFailures.js';
import { createOrganizationStore, type OrganizationStore } from './organizations.js';
import { createPaymentStore, type CapSumMemo } from './payments.js';
import { ScopeCache } from './registryCache.js';
import { createServiceStore, type RegistryCache } from './services.js';
import { createSettingsStore } from './settings.js';
import { createSpendStore } from './spend.js';
import { createTransactionStore } from './transactions.js';
import { createTreasuryFundsStore } from './treasuryFunds.js';
import { createWriteQueue, type WriteQueue } from './writeQueue.js';
import { createWalSync } from './walSync.js';
import { startCheckpointer, WAL_RESTART_FRAMES } from './checkpointer.js';
import { CAP_ROWS_EVERY_MS, CAP_ROWS_LAG_MS, CAP_ROWS_PER_MOVE, createCapRowsMover } from './capRows.js';

export type StoreOptions = OpenOptions & {
  /** The cap-rows mover (capRows.ts): how far behind the clock, how often; `false` never moves (tests). */
  capRows?: { lagMs?: number; everyMs?: number } | false;
  /** The checkpoint thread (checkpointer.ts): how often it checkpoints, and the WAL size that pauses writes for a restart. */
  checkpoints?: { intervalMs?: number; restartFrames?: number };
};

/**
 * A WAL catch-up (store.ts restartWal): how long the checkpoint thread retries while readers still
 * need frames, how long the writes wait for its answer (`farWaitMs` once the WAL is `farPast` times
 * its restart size: a disk whose database sync takes longer than the short wait would otherwise
 * never see the WAL started over), and how long after a catch-up that failed the next waits.
 */
const WAL_CATCH_UP = { retryMs: 150, waitMs: 200, farPast: 4, farWaitMs: 2_000, backOffMs: 1_000 };

/** The table groups over one connection; a reader's caches are shared with the writer's (agents.ts SharedCache). */
function tablesOver(db: Db, caches?: { agents: SharedCache<Agent>; apiKeys: ApiKeyCache; services: RegistryCache }, capMemo?: CapSumMemo): SyncTables {
  return {
    organizations: createOrganizationStore(db),
    apiKeys: createApiKeyStore(db, caches?.apiKeys),
    agents: createAgentStore(db, caches?.agents),
    services: createServiceStore(db, caches?.services),
    transactions: createTransactionStore(db),
    payments: createPaymentStore(db, capMemo),
    approvals: createApprovalStore(db),
    settings: createSettingsStore(db),
    spend: createSpendStore(db),
    dashboardUsers: createDashboardUserStore(db),
    dashboardSessions: createDashboardSessionStore(db),
    loginFailures: createLoginFailureStore(db),
    treasuryFunds: createTreasuryFundsStore(db),
  };
}

/** A read-only connection to the same file: in WAL mode it sees committed transactions only. */
function openReader(file: string): Db {
  const reader = new Database(file, { readonly: true, fileMustExist: true });
  reader.pragma('busy_timeout = 5000');
  return reader;
}

/**
 * All table groups over the single writer connection every write transaction goes through, and a
 * read-only connection for reads outside a write. A write function is asynchronous (the port,
 * port.ts), so the group commit's transaction stays open across awaits on the writer; reads
 * outside it go to the reader, which in WAL mode sees only committed data, never
 * another request's open transaction. Read snapshots (unitOfWork.ts read) get a third connection,
 * opened on first use, so an open snapshot never holds back what the plain reads see.
 *
 * The synchronous writer tables (`store.payments` …) are for start-up and maintenance code outside
 * the use cases (paypolicy.ts, bootstrap, the ledger clock, tests); `store.app` is what the use
 * cases get as `deps.store`, and `store.tx` the handle a write function gets.
 */
export function openStore(file: string, options: StoreOptions = {}) {
  const db: Db = openDatabase(file, options);
  // Savepoint journals in memory, after the migrations (whose index builds may sort a whole table).
  // Each group write runs in a savepoint, and SQLite journals every page a savepoint changes; past
  // 64 KiB in a transaction that journal spills to a temp file, and from then on every page it
  // journals costs two pwrite calls on the event loop: ~4 per payment under the sign bench, more
  // than the WAL's own. The journal is emptied at each savepoint's release, so what it holds stays
  // one write's pages.
  db.pragma('temp_store = MEMORY');
  const wal = createWalSync(`${file}-wal`, undefined, (err) => failStop(db, err));
  const reader = openReader(file);
  let snapshot: Db | undefined;
  let snapshotTables: StoreTables | undefined;
  // Rows cached from either connection: the writer drops entries inside its transaction, the reader
  // keeps a row only while the writer has no transaction open (so none of its drops is pending).
  const fromReader = () => !db.inTransaction && !reader.inTransaction;
  const caches = {
    agents: { records: new Map<string, Agent>(), cacheable: fromReader },
    apiKeys: { records: new Map<string, ApiKeyRecord & { hash: Buffer }>(), byId: new Map<string, ApiKeyRecord & { hash: Buffer }>(), cacheable: fromReader },
    services: { scopes: new ScopeCache(), dirty: new Set<string>(), writing: () => db.inTransaction, inSnapshot: () => reader.inTransaction } satisfies RegistryCache,
  };
  const writer = tablesOver(db, {
    agents: { ...caches.agents, cacheable: () => !db.inTransaction },
    apiKeys: { ...caches.apiKeys, cacheable: () => !db.inTransaction },
    services: { ...caches.services, inSnapshot: () => false },
  });
  const tx = asyncTables(writer);
  // The committed state the reader sees, named by the writer's count of changed rows: this process
  // is the database's only writer (the data directory's lock), so while the writer has no
  // transaction open the reader sees exactly what that count has reached. While one is open it
  // may still commit, under the same count, rows it already wrote: nothing read then is remembered.
  const totalChanges = db.prepare('SELECT total_changes()').pluck();
  const capMemo: CapSumMemo = { version: () => (db.inTransaction || reader.inTransaction || !db.open ? undefined : totalChanges.get() as number) };
  const readerSync = tablesOver(reader, caches, capMemo);
  const readerTables = asyncTables(readerSync);
  const health = {
    failure: (): Error | undefined => storageFailure(db),
    onFailure: (listener: (err: Error) => void) => onStorageFailure(db, listener),
    onWalSync: (listener: (seconds: number) => void) => wal.onSync(listener),
    isOpen: () => db.open,
    dataFile: () => db.name,
  };
  const app: AppStore = {
    ...readerTables,
    // Decisions are recorded by the writer's instance: the metrics listener goes there.
    approvals: { ...readerTables.approvals, onDecided: async (listener) => writer.approvals.onDecided(listener) },
    ...health,
  };
  const writes = createWriteQueue(db, wal, tx);
  // Under writes that never pause, SQLite never starts the WAL over (checkpointer.ts). Past
  // restartFrames the writes are held back for one catch-up (WAL_CATCH_UP) that starts it over.
  // One at a time; after a catch-up that could not (a read snapshot still needs old frames), the
  // next waits a second.
  let catchingUp = false;
  let quietUntil = 0;
  const restartFrames = options.checkpoints?.restartFrames ?? WAL_RESTART_FRAMES;
  const restartWal = (frames: number): void => {
    if (catchingUp || performance.now() < quietUntil || !db.open || storageFailure(db) !== undefined) return;
    catchingUp = true;
    const backOff = () => (quietUntil = performance.now() + WAL_CATCH_UP.backOffMs);
    const waitMs = frames >= WAL_CATCH_UP.farPast * restartFrames ? WAL_CATCH_UP.farWaitMs : WAL_CATCH_UP.waitMs;
    writes.pause(() => checkpointer.catchUp({ retryMs: WAL_CATCH_UP.retryMs, waitMs }))
      .then((restarted) => void (restarted || backOff()), backOff)
      .finally(() => (catchingUp = false));
  };
  // Should the checkpoint thread die, SQLite checkpoints inside commits again (slower, but bounded).
  const checkpointer = startCheckpointer(file, () => {
    if (db.open && storageFailure(db) === undefined) db.pragma('wal_autocheckpoint = 1000');
  }, { ...options.checkpoints, restartFrames, onLong: restartWal });
  onStorageFailure(db, () => void checkpointer.close({ checkpoint: false }));
  const mover = startCapRowsMover(db, writes, options.capRows);
  return {
    db,
    /** Group-committed writes; see writeQueue.ts. */
    writes,
    ...writer,
    /** The writer's tables as the store interface: the handle a write function gets (unitOfWork.ts). */
    tx,
    /** What the use cases get as deps.store: reads of committed data on the reader connection. */
    app,
    /**
     * The organizations table as the treasury vault uses it (src/signing/treasury.ts, synchronous):
     * treasury keys and addresses read from committed rows only, a new treasury inserted on the
     * writer, inside the write transaction that provisions it (organizations.ts provisionTreasury).
     */
    treasuryKeys: { ...readerSync.organizations, insertTreasury: writer.organizations.insertTreasury } as OrganizationStore,
    /** The connection for read snapshots, opened on first use. */
    snapshot(): { db: Db; tables: StoreTables } {
      if (!snapshot) {
        snapshot = openReader(file);
        snapshotTables = asyncTables(tablesOver(snapshot));
      }
      return { db: snapshot, tables: snapshotTables! };
    },
    ...health,
    async close(): Promise<void> {
      // A move in flight is waited for: its sync must not meet a closed WAL file.
      await mover.stop();
      // Readers first: the writer's close, as the last connection, checkpoints.
      if (reader.open) reader.close();
      if (snapshot?.open) snapshot.close();
      // After a failed sync nothing more is written: no last checkpoint of unknown state.
      await checkpointer.close({ checkpoint: storageFailure(db) === undefined });
      wal.close();
      // Closing the last connection checkpoints; after a failure the process just exits instead.
      if (db.open && storageFailure(db) === undefined) db.close();
    },
  };
}
export type Store = ReturnType<typeof openStore>;

/**
 * Runs the cap-rows mover in the write queue, grouped with the payments it runs beside, every
 * `everyMs`, and again at once while a move found a full batch (catching up after a restart); the
 * hourly fold of the hot buckets rides along. A failed move changes nothing (its savepoint rolls
 * back) and is simply tried again: cap sums are exact whatever the horizon and the hot line are,
 * only slower the further they lag.
 */
function startCapRowsMover(db: Db, writes: WriteQueue<StoreTables>, options: StoreOptions['capRows']): { stop(): Promise<void> } {
  if (options === false) return { stop: async () => {} };
  const lagMs = options?.lagMs ?? CAP_ROWS_LAG_MS;
  const mover = createCapRowsMover(db);
  let running: Promise<void> | undefined;
  let stopped = false;
  const tick = (): void => {
    if (running || stopped || !db.open || storageFailure(db) !== undefined) return;
    // Nothing to copy: no write, so an idle server does not sync its WAL twice a second. (Inside a
    // group's open transaction the probe would read uncommitted rows: the move is queued instead.)
    if (!db.inTransaction && !mover.due(Date.now() - lagMs) && !mover.foldDue(Date.now())) return;
    running = writes.run(() => {
      mover.fold(Date.now());
      return mover.advance(Date.now() - lagMs);
    }).then(
      (moved) => {
        running = undefined;
        if (moved >= CAP_ROWS_PER_MOVE) setImmediate(tick);
      },
      () => {
        running = undefined;
      },
    );
  };
  const timer = setInterval(tick, options?.everyMs ?? CAP_ROWS_EVERY_MS);
  timer.unref();
  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}
