import { openDatabase, type Db } from './db.js';
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
import { createWriteQueue } from './writeQueue.js';
import { createWalSync } from './walSync.js';
import { startCheckpointer } from './checkpointer.js';

/** All table groups over one connection: the single writer every transaction goes through. */
export function openStore(file: string) {
  const db: Db = openDatabase(file);
  const wal = createWalSync(`${file}-wal`);
  // Should the checkpoint thread die, SQLite checkpoints inside commits again (slower, but bounded).
  const checkpointer = startCheckpointer(file, () => {
    if (db.open) db.pragma('wal_autocheckpoint = 1000');
  });
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
    async close(): Promise<void> {
      await checkpointer.close();
      wal.close();
      if (db.open) db.close();
    },
  };
}
export type Store = ReturnType<typeof openStore>;
