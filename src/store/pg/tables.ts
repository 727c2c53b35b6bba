import type { StoreTables } from '../port.js';
import { createPgAgentStore } from './agents.js';
import { createPgApiKeyStore } from './apiKeys.js';
import { createPgApprovalStore, type ApprovalHooks } from './approvals.js';
import { createPgDashboardSessionStore } from './dashboardSessions.js';
import { createPgDashboardUserStore } from './dashboardUsers.js';
import { createPgLoginFailureStore } from './loginFailures.js';
import { createPgOrganizationStore } from './organizations.js';
import { createPgPaymentStore } from './payments.js';
import { createPgServiceStore, type PgRegistryCache } from './services.js';
import { createPgSettingsStore } from './settings.js';
import { createPgSpendStore } from './spend.js';
import { createPgTransactionStore } from './transactions.js';
import { createPgTreasuryFundsStore } from './treasuryFunds.js';
import type { Sql } from './sql.js';

/** Listeners and in-process state shared by every binding of the tables (the pool's and each transaction's). */
export type TableHooks = { approvals: ApprovalHooks; registry?: PgRegistryCache };

/**
 * Every repository of the port (../port.ts) bound to one connection (a transaction's client) or
 * to the pool. Cheap: the statements are module constants and only closures are made, so a
 * transaction builds its own.
 */
export function createPgTables(sql: Sql, hooks: TableHooks = { approvals: {} }): StoreTables {
  return {
    organizations: createPgOrganizationStore(sql),
    apiKeys: createPgApiKeyStore(sql),
    agents: createPgAgentStore(sql),
    services: createPgServiceStore(sql, hooks.registry),
    transactions: createPgTransactionStore(sql),
    payments: createPgPaymentStore(sql),
    approvals: createPgApprovalStore(sql, hooks.approvals),
    settings: createPgSettingsStore(sql),
    spend: createPgSpendStore(sql),
    dashboardUsers: createPgDashboardUserStore(sql),
    dashboardSessions: createPgDashboardSessionStore(sql),
    loginFailures: createPgLoginFailureStore(sql),
    treasuryFunds: createPgTreasuryFundsStore(sql),
  };
}
