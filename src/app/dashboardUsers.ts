import { randomBytes } from 'node:crypto';
import { DomainError, invalidArgument } from '../domain/errors.js';
import type { DashboardRole, DashboardUser } from '../store/dashboardUsers.js';
import type { Principal } from '../domain/types.js';
import { requirePermission } from './access.js';
import type { AppDeps } from './deps.js';
import { hashPassword, validateNewPassword } from './dashboardPasswords.js';
import { requireOrgAccess, requireOrganization } from './organizations.js';

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
  requireOrganization(deps, input.orgId);
  const password = await hashPassword(input.password);
  return deps.uow.writeNow(() => {
    requireOrganization(deps, input.orgId);
    if (deps.store.dashboardUsers.getByEmail(email)) {
      throw new DomainError('conflict', 'A dashboard user with this email already exists', { code: 'dashboard_user_exists' });
    }
    const user: DashboardUser = {
      id: `usr_${randomBytes(12).toString('hex')}`, orgId: input.orgId, email, role, createdAt: deps.now(), disabled: false,
    };
    deps.store.dashboardUsers.insert(user, password);
    return user;
  });
}

/** An organization's dashboard users, oldest first. */
export function listDashboardUsers(deps: AppDeps, principal: Principal, orgId: string): DashboardUser[] {
  requireOrgAccess(deps, principal, 'read', orgId);
  return deps.store.dashboardUsers.listByOrg(orgId);
}
