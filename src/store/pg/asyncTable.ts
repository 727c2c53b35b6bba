import type { AsyncTable } from '../asyncStore.js';
import type { AgentStore } from '../agents.js';
import type { ApiKeyStore } from '../apiKeys.js';
import type { ApprovalStore } from '../approvals.js';
import type { DashboardSessionStore } from '../dashboardSessions.js';
import type { DashboardUserStore } from '../dashboardUsers.js';
import type { LoginFailureStore } from '../loginFailures.js';
import type { OrganizationStore } from '../organizations.js';
import type { PaymentStore } from '../payments.js';
import type { ServiceStore } from '../services.js';
import type { SettingsStore } from '../settings.js';
import type { SpendStore } from '../spend.js';
import type { TransactionStore } from '../transactions.js';
import type { TreasuryFundsStore } from '../treasuryFunds.js';

/**
 * A SQLite table group's API made asynchronous: the store interface's own mapped type
 * (../asyncStore.ts). Every PostgreSQL table group is typed as the AsyncTable of its SQLite twin
 * (type-only imports), so the compiler proves the two stores have the same shape.
 */
export type { AsyncTable };

/** Every table group of the store, bound to one connection (a transaction) or to the pool. */
export type PgTables = {
  organizations: AsyncTable<OrganizationStore>;
  apiKeys: AsyncTable<ApiKeyStore>;
  agents: AsyncTable<AgentStore>;
  services: AsyncTable<ServiceStore>;
  transactions: AsyncTable<TransactionStore>;
  payments: AsyncTable<PaymentStore>;
  approvals: AsyncTable<ApprovalStore>;
  settings: AsyncTable<SettingsStore>;
  spend: AsyncTable<SpendStore>;
  dashboardUsers: AsyncTable<DashboardUserStore>;
  dashboardSessions: AsyncTable<DashboardSessionStore>;
  loginFailures: AsyncTable<LoginFailureStore>;
  treasuryFunds: AsyncTable<TreasuryFundsStore>;
};
