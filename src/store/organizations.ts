import type { Db } from './db.js';
import { limitsFromStored, limitsToStored, type SpendLimit } from '../domain/limits.js';
import type { Organization } from '../domain/types.js';
import type { OrganizationRepository } from './port.js';
import type { Synchronous } from './syncTables.js';

type OrgRow = { id: string; name: string; approval_window_s: number; created_at: number; address: string | null; limits: string };

const SELECT = `SELECT o.id, o.name, o.approval_window_s, o.created_at, t.address, o.limits
  FROM organizations o LEFT JOIN treasuries t ON t.org_id = o.id`;

function toOrg(r: OrgRow): Organization {
  return { id: r.id, name: r.name, approvalWindowSeconds: r.approval_window_s, createdAt: r.created_at, treasuryAddress: r.address, limits: limitsFromStored(r.limits) };
}

/** Organizations and their treasuries (the encrypted key is read only by the signer). */
export function createOrganizationStore(db: Db): Synchronous<OrganizationRepository> {
  const insert = db.prepare('INSERT INTO organizations (id, name, approval_window_s, created_at) VALUES (?, ?, ?, ?)');
  const byId = db.prepare(`${SELECT} WHERE o.id = ?`);
  const all = db.prepare(`${SELECT} ORDER BY o.created_at, o.id`);
  const update = db.prepare('UPDATE organizations SET name = ?, approval_window_s = ? WHERE id = ?');
  const setLimits = db.prepare('UPDATE organizations SET limits = ? WHERE id = ?');
  // Changed limits' windows start again from the ledger when next measured (migration 0019).
  const dropStates = db.prepare("DELETE FROM limit_states WHERE org_id = ? AND agent_id = ''");
  const insertTreasury = db.prepare('INSERT INTO treasuries (org_id, address, key_ciphertext, created_at) VALUES (?, ?, ?, ?)');
  const treasuryKey = db.prepare('SELECT address, key_ciphertext FROM treasuries WHERE org_id = ?');
  return {
    insert(org: Omit<Organization, 'treasuryAddress' | 'limits'>): void {
      insert.run(org.id, org.name, org.approvalWindowSeconds, org.createdAt);
    },
    get(id: string): Organization | undefined {
      const r = byId.get(id) as OrgRow | undefined;
      return r && toOrg(r);
    },
    update(id: string, name: string, approvalWindowSeconds: number): void {
      update.run(name, approvalWindowSeconds, id);
    },
    setLimits(id: string, limits: readonly SpendLimit[]): void {
      setLimits.run(limitsToStored(limits), id);
      dropStates.run(id);
    },
    list(): Organization[] {
      return (all.all() as OrgRow[]).map(toOrg);
    },
    insertTreasury(orgId: string, address: string, ciphertext: Buffer, now: number): void {
      insertTreasury.run(orgId, address, ciphertext, now);
    },
    treasuryKey(orgId: string): { address: string; ciphertext: Buffer } | undefined {
      const r = treasuryKey.get(orgId) as { address: string; key_ciphertext: Buffer } | undefined;
      return r && { address: r.address, ciphertext: r.key_ciphertext };
    },
  };
}
export type OrganizationStore = ReturnType<typeof createOrganizationStore>;
