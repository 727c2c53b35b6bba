import { parseLimits } from '../../domain/limits.js';
import { DomainError, invalidArgument } from '../../domain/errors.js';
import type { Organization, Principal } from '../../domain/types.js';
import { requireName } from '../../domain/validate.js';
import { newId } from '../../store/ids.js';
import { requireOrgAccess, requirePermission, type Permission } from '../access.js';
import type { AppDeps } from '../deps.js';
import { withinWrite } from '../withinWrite.js';

/** Default approval window: one hour, long enough for a human to notice, short enough to not pin cap. */
export const DEFAULT_APPROVAL_WINDOW_SECONDS = 3600;
/** Bounds of an approval window, in seconds: one minute to seven days. */
export const APPROVAL_WINDOW_SECONDS = { min: 60, max: 7 * 24 * 3600 } as const;

/** One organization, for its own members and the operator. */
export function getOrganization(deps: AppDeps, principal: Principal, orgId: string): Promise<Organization> {
  return requireOrgAccess(deps, principal, 'read', orgId);
}

function requireWindow(window: number): number {
  if (!Number.isInteger(window) || window < APPROVAL_WINDOW_SECONDS.min || window > APPROVAL_WINDOW_SECONDS.max) {
    throw invalidArgument(`approval_window_seconds must be between ${APPROVAL_WINDOW_SECONDS.min} and ${APPROVAL_WINDOW_SECONDS.max}`);
  }
  return window;
}

export async function createOrganization(deps: AppDeps, principal: Principal, input: { name: string; approvalWindowSeconds?: number }): Promise<Organization> {
  requirePermission(principal, 'operate');
  const name = requireName(input.name, 'name');
  const window = requireWindow(input.approvalWindowSeconds || DEFAULT_APPROVAL_WINDOW_SECONDS);
  const org = { id: newId('org'), name, approvalWindowSeconds: window, createdAt: deps.now() };
  await deps.uow.write((tx) => tx.organizations.insert(org), { alone: true });
  return { ...org, treasuryAddress: null, limits: [] };
}

/**
 * Renames an organization, changes its approval window (pending approvals keep their expiry) or
 * replaces its window limits (`limits` as the document writes them, parsed by domain/limits.ts;
 * they bind the next decision of every agent of the organization). Renaming and the approval
 * window are the operator's; the limits alone an owner of the organization may also replace,
 * as they bound nothing but the agents the owner already manages.
 */
export async function updateOrganization(
  deps: AppDeps, principal: Principal, input: { orgId: string; name?: string; approvalWindowSeconds?: number; limits?: unknown },
): Promise<Organization> {
  const permission: Permission = input.name !== undefined || input.approvalWindowSeconds !== undefined ? 'operate' : 'manage';
  requirePermission(principal, permission);
  const name = input.name === undefined ? undefined : requireName(input.name, 'name');
  const window = input.approvalWindowSeconds === undefined ? undefined : requireWindow(input.approvalWindowSeconds);
  const limits = input.limits === undefined ? undefined : parseLimits(input.limits);
  // An update that says nothing was not understood (a field the caller's tool dropped), not a success to report.
  if (name === undefined && window === undefined && limits === undefined) {
    throw invalidArgument('name, approval_window_seconds or limits is required: the update would change nothing');
  }
  return deps.uow.write(async (tx) => {
    const org = await requireOrgAccess(withinWrite(deps, tx), principal, permission, input.orgId);
    if (name !== undefined || window !== undefined) await tx.organizations.update(org.id, name ?? org.name, window ?? org.approvalWindowSeconds);
    if (limits !== undefined) await tx.organizations.setLimits(org.id, limits);
    return (await tx.organizations.get(org.id))!;
  }, { alone: true });
}

export async function listOrganizations(deps: AppDeps, principal: Principal): Promise<Organization[]> {
  requirePermission(principal, 'operate');
  return deps.store.organizations.list();
}

/**
 * Creates the organization's signing key; only its address ever leaves the vault. The vault reads
 * committed rows only, so a treasury written earlier in the same write is looked for here.
 */
export async function provisionTreasury(deps: AppDeps, principal: Principal, orgId: string): Promise<string> {
  const address = await deps.uow.write(async (tx) => {
    await requireOrgAccess(withinWrite(deps, tx), principal, 'operate', orgId);
    if (await tx.organizations.treasuryKey(orgId)) throw new DomainError('conflict', 'Treasury already provisioned', { code: 'treasury_exists' });
    // Sealed here, inserted by this write's own handle: on PostgreSQL the vault has no connection
    // of the transaction, and a rolled-back write leaves no key behind.
    const sealed = deps.vault.seal(orgId);
    await tx.organizations.insertTreasury(orgId, sealed.address, sealed.ciphertext, deps.now());
    return sealed.address;
  }, { alone: true });
  // PostgreSQL's vault reads keys from memory: load the one just committed (a no-op on SQLite).
  await deps.vault.refresh();
  return address;
}
