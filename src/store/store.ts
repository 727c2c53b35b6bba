import { failStop, onStorageFailure, openDatabase, storageFailure, type Db, type OpenOptions } from './db.js';
import { createAgentStore } from './agents.js';
import { createApiKeyStore } from './apiKeys.js';
import { createApprovalStore } from './approvals.js';
import { createDashboardSessionStore } from './dashboardSessions.js';
import { createDashboardUserStore } from './dashboardUsers.js';
import { createLoginFailureStore } from './loginFailures.js';
import { createOrganizationStore } from './organizations.js';
import { createPaymentStore } from './payments.js';
import { createServiceStore } from './services.js';
import { createSettingsStore } from './settings.js';
import { createSpendStore } from './spend.js';
import { createTransactionStore } from './transactions.js';
import { createTreasuryFundsStore } from './treasuryFunds.js';
import { createWriteQueue } from './writeQueue.js';
import { createWalSync } from './walSync.js';
import { startCheckpointer } from './checkpointer.js';

/** All table groups over one connection: the single writer every transaction goes through. */
export function openStore(file: string, options: OpenOptions = {}) {
  const db: Db = openDatabase(file, options);
  const wal = createWalSync(`${file}-wal`, undefined, (err) => failStop(db, err));
  // Should the checkpoint thread die, SQLite checkpoints inside commits again (slower, but bounded).
  const checkpointer = startCheckpointer(file, () => {
    if (db.open && storageFailure(db) === undefined) db.pragma('wal_autocheckpoint = 1000');
  });
  onStorageFailure(db, () => void checkpointer.close({ checkpoint: false }));
  return {
    db,
    /** Group-committed writes for hot paths; see writeQueue.ts. */
    writes: createWriteQueue(db, wal),
    organizations: createOrganizationStore(db),
    apiKeys: createApiKeyStore(db),
    agents: createAgentStore(db),
    services: createServiceStore(db),
    transactions: createTransactionStore(db),
    payments: createPaymentStore(db),
    approvals: createApprovalStore(db),
    settings: createSettingsStore(db),
    spend: createSpendStore(db),
    dashboardUsers: createDashboardUserStore(db),
    dashboardSessions: createDashboardSessionStore(db),
    loginFailures: createLoginFailureStore(db),
    treasuryFunds: createTreasuryFundsStore(db),
    /** The error that stopped the store (fail-stop after a failed sync), if any. */
    failure: (): Error | undefined => storageFailure(db),
    /** Runs once, on the first failed sync or I/O error under a commit. */
    onFailure: (listener: (err: Error) => void) => onStorageFailure(db, listener),
    /** Seconds each WAL fdatasync took (one listener; the metrics histogram). */
    onWalSync: (listener: (seconds: number) => void) => wal.onSync(listener),
    async close(): Promise<void> {
      // After a failed sync nothing more is written: no last checkpoint of unknown state.
      await checkpointer.close({ checkpoint: storageFailure(db) === undefined });
      wal.close();
      // Closing the last connection checkpoints; after a failure the process just exits instead.
      if (db.open && storageFailure(db) === undefined) db.close();
    },
  };
}
export type Store = ReturnType<typeof openStore>;
