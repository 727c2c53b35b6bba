import type { Migration } from './migration.js';

/**
 * Pending approvals by organization and expiry: a window limit takes away its organization's
 * approvals past their expiry (limitStates.ts), and found through approvals_pending (status,
 * expires_at) that read every organization's, so one organization's backlog of expired approvals
 * slowed every other organization's decisions until the sweep caught up.
 *
 * Never edit once landed: add the next migration.
 */

const sql = 'CREATE INDEX approvals_org_pending ON approvals (org_id, status, expires_at);';

export const migration: Migration = { version: 20, name: 'approvals_org_pending', sqlite: sql, postgres: sql };
