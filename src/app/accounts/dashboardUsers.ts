import { randomBytes } from 'node:crypto';
import { DomainError, invalidArgument } from '../../domain/errors.js';
import type { DashboardRole, DashboardUser, Principal } from '../../domain/types.js';
import { requireAccess, requirePermission } from '../access.js';
import type { AppDeps } from '../deps.js';
import { hashPassword, validateNewPassword } from './dashboardPasswords.js';
import { requireOrgAccess, requireOrganization } from '../access.js';
import { withinWrite } from '../withinWrite.js';

export const DASHBOARD_ROLES = ['owner', 'approver', 'viewer'] as const satisfies readonly DashboardRole[];

const EMAIL = /^[^\s@]{1,64}@[^\s@]+\.[^\s@]+$/;
// Decisions record the approver's email in decided_by, which holds at most 200 characters.
const MAX_EMAIL_LENGTH = 200;

/**
 * Lower-cases and checks an email address. Only the shape is checked: the address is a sign-in
 * name, never written to, so deliverability does not matter.
 */
export function normalizeEmail(value: string): string {
  const email = value.trim().toLowerCase();
  // eslint-disable-next-line no-control-regex
  if (email.length > MAX_EMAIL_LENGTH || !EMAIL.test(email) || /[\u0000-\u001f\u007f]/.test(email)) throw invalidArgument('email must be an email address');
  return email;
}

/** Whether a string names one of the three dashboard roles. */
export function isDashboardRole(value: string): value is DashboardRole {
  return (DASHBOARD_ROLES as readonly string[]).includes(value);
}

/**
 * Adds a dashboard user to an organization. The password is hashed before the write transaction
 * (scrypt is slow and must not hold the write lock); the uniqueness check runs inside it.
 */
export async function createDashboardUser(
  deps: AppDeps,
  principal: Principal,
  input: { orgId: string; email: string; role: string | undefined; password: string },
): Promise<DashboardUser> {
  requirePermission(principal, 'operate');
  const email = normalizeEmail(input.email);
  const role = input.role;
  if (role === undefined || !isDashboardRole(role)) throw invalidArgument('role must be one of owner, approver, viewer');
  validateNewPassword(input.password);
  await requireOrganization(deps, input.orgId);
  const password = await hashPassword(input.password);
  return deps.uow.write(async (tx) => {
    await requireOrganization(withinWrite(deps, tx), input.orgId);
    if (await tx.dashboardUsers.getByEmail(email)) {
      throw new DomainError('conflict', 'A dashboard user with this email already exists', { code: 'dashboard_user_exists' });
    }
    const user: DashboardUser = {
      id: `usr_${randomBytes(12).toString('hex')}`, orgId: input.orgId, email, role, createdAt: deps.now(), disabled: false,
    };
    await tx.dashboardUsers.insert(user, password);
    return user;
  }, { alone: true });
}

/** An organization's dashboard users, oldest first. */
export async function listDashboardUsers(deps: AppDeps, principal: Principal, orgId: string): Promise<DashboardUser[]> {
  await requireOrgAccess(deps, principal, 'read', orgId);
  return deps.store.dashboardUsers.listByOrg(orgId);
}

const userNotFound = () => new DomainError('not_found', 'Dashboard user not found', { code: 'dashboard_user_not_found' });
const USER_ID = /^usr_[0-9a-f]{24}$/;

/**
 * A dashboard user the principal may manage: the operator any, an owner those of their own
 * organization. Unknown ids, malformed ids and other organizations' users are the same 404.
 */
async function requireManagedUser(deps: AppDeps, principal: Principal, userId: string): Promise<DashboardUser> {
  requirePermission(principal, 'manage');
  const user = USER_ID.test(userId) ? await deps.store.dashboardUsers.get(userId) : undefined;
  if (!user) throw userNotFound();
  requireAccess(principal, 'manage', user.orgId, userNotFound);
  return user;
}

/** One dashboard user, for the operator or an owner of their organization (a reset form, say). */
export function getDashboardUser(deps: AppDeps, principal: Principal, userId: string): Promise<DashboardUser> {
  return requireManagedUser(deps, principal, userId);
}

/**
 * Refuses a change that would leave an organization without an owner who can sign in: nobody
 * could then manage its users, keys or policies from the dashboard. Runs inside the write.
 */
async function keepAnOwner(deps: AppDeps, user: DashboardUser): Promise<void> {
  if (user.role !== 'owner' || user.disabled) return;
  if (await deps.store.dashboardUsers.countEnabledOwners(user.orgId) <= 1) {
    throw new DomainError('failed_precondition', 'This is the last enabled owner of the organization; add or enable another owner first', {
      code: 'last_owner',
    });
  }
}

/**
 * Disables or re-enables a dashboard user. Disabling ends every session the user has in the same
 * transaction, so their next request is refused; the last enabled owner cannot be disabled.
 */
export function updateDashboardUser(deps: AppDeps, principal: Principal, input: { userId: string; disabled?: boolean }): Promise<DashboardUser> {
  return deps.uow.write(async (tx) => {
    const inTx = withinWrite(deps, tx);
    const user = await requireManagedUser(inTx, principal, input.userId);
    if (input.disabled === undefined || input.disabled === user.disabled) return user;
    if (input.disabled) {
      await keepAnOwner(inTx, user);
      await tx.dashboardSessions.deleteByUser(user.id);
    }
    await tx.dashboardUsers.setDisabled(user.id, input.disabled);
    return (await tx.dashboardUsers.get(user.id))!;
  }, { alone: true });
}

/**
 * Removes a dashboard user and their sessions. Decisions they made keep their email in
 * `decided_by`. The last enabled owner cannot be removed.
 */
export function deleteDashboardUser(deps: AppDeps, principal: Principal, userId: string): Promise<DashboardUser> {
  return deps.uow.write(async (tx) => {
    const inTx = withinWrite(deps, tx);
    const user = await requireManagedUser(inTx, principal, userId);
    await keepAnOwner(inTx, user);
    await tx.dashboardSessions.deleteByUser(user.id);
    await tx.dashboardUsers.delete(user.id);
    return user;
  }, { alone: true });
}

/**
 * Sets a new password and ends every session of the user (a reset is what one does after a
 * leak). Access is checked before the slow hash and again inside the write.
 */
export async function resetDashboardUserPassword(deps: AppDeps, principal: Principal, input: { userId: string; password: string }): Promise<DashboardUser> {
  await requireManagedUser(deps, principal, input.userId);
  validateNewPassword(input.password);
  // An owner's resets take their organization's share of the hashing line; the operator's never wait for a share.
  const password = await hashPassword(input.password, principal.kind === 'operator' ? undefined : principal.orgId);
  return deps.uow.write(async (tx) => {
    const user = await requireManagedUser(withinWrite(deps, tx), principal, input.userId);
    await tx.dashboardUsers.setPassword(user.id, password);
    await tx.dashboardSessions.deleteByUser(user.id);
    return user;
  }, { alone: true });
}
