import type { AgentStore } from './agents.js';
import type { ApiKeyStore } from './apiKeys.js';
import type { ApprovalStore } from './approvals.js';
import type { DashboardSessionStore } from './dashboardSessions.js';
import type { DashboardUserStore } from './dashboardUsers.js';
import type { LoginFailureStore } from './loginFailures.js';
import type { OrganizationStore } from './organizations.js';
import type { PaymentStore } from './payments.js';
import type { ServiceStore } from './services.js';
import type { SettingsStore } from './settings.js';
import type { SpendStore } from './spend.js';
import type { TransactionStore } from './transactions.js';
import type { TreasuryFundsStore } from './treasuryFunds.js';

/**
 * The one store interface the use cases run on: every table group of the SQLite
 * modules with the same method names, parameters and results, each returned as a Promise, so a
 * store behind a network (PostgreSQL, src/store/pg/) implements exactly the same shape. The
 * SQLite modules stay synchronous; `asyncTables` wraps them.
 */
export type AsyncTable<T> = { [K in keyof T]: T[K] extends (...a: infer A) => infer R ? (...a: A) => Promise<Awaited<R>> : never };

/** The synchronous SQLite table groups over one connection (store.ts builds two sets: writer and reader). */
export type SyncTables = {
  organizations: OrganizationStore;
  apiKeys: ApiKeyStore;
  agents: AgentStore;
  services: ServiceStore;
  transactions: TransactionStore;
  payments: PaymentStore;
  approvals: ApprovalStore;
  settings: SettingsStore;
  spend: SpendStore;
  dashboardUsers: DashboardUserStore;
  dashboardSessions: DashboardSessionStore;
  loginFailures: LoginFailureStore;
  treasuryFunds: TreasuryFundsStore;
};

export type StoreTables = { [K in keyof SyncTables]: AsyncTable<SyncTables[K]> };

/**
 * What the use cases hold as `deps.store`: the table groups for reads outside a write transaction
 * (they see committed data only, never another request's open transaction), plus the store's
 * health. Writes, and reads that a write depends on, go through `deps.uow` and its `tx` handle.
 */
export type AppStore = StoreTables & {
  /** The error that stopped the store (fail-stop after a failed sync), if any. */
  failure(): Error | undefined;
  /** Runs once, on the first failed sync or I/O error under a commit. */
  onFailure(listener: (err: Error) => void): void;
  /** Seconds each durable sync took (one listener; the metrics histogram). A store without one never calls it. */
  onWalSync(listener: (seconds: number) => void): void;
  /** False once the store is closed (metrics stop reading it). */
  isOpen(): boolean;
  /** The database file (readiness checks its disk). */
  dataFile(): string;
  /** A store behind a network (PostgreSQL): whether the database answered its last ping; readiness uses it instead of dataFile. */
  database?(): { ok: boolean; detail: string };
};

/**
 * One table group's methods as async functions. Built once per store, not per call: a call costs
 * one settled promise (a microtask), no extra statement. A synchronous throw becomes a rejection.
 */
function asyncTable<T extends object>(table: T): AsyncTable<T> {
  const out: Record<string, unknown> = {};
  for (const [name, method] of Object.entries(table)) {
    if (typeof method !== 'function') continue;
    const fn = method as (...a: unknown[]) => unknown;
    out[name] = async (...a: unknown[]) => fn(...a);
  }
  return out as AsyncTable<T>;
}

/** Every table group of `tables` as async functions over the same connection. */
export function asyncTables(tables: SyncTables): StoreTables {
  return {
    organizations: asyncTable(tables.organizations),
    apiKeys: asyncTable(tables.apiKeys),
    agents: asyncTable(tables.agents),
    services: asyncTable(tables.services),
    transactions: asyncTable(tables.transactions),
    payments: asyncTable(tables.payments),
    approvals: asyncTable(tables.approvals),
    settings: asyncTable(tables.settings),
    spend: asyncTable(tables.spend),
    dashboardUsers: asyncTable(tables.dashboardUsers),
    dashboardSessions: asyncTable(tables.dashboardSessions),
    loginFailures: asyncTable(tables.loginFailures),
    treasuryFunds: asyncTable(tables.treasuryFunds),
  };
}
