import { DomainError } from '../../domain/errors.js';
import type { Principal } from '../../domain/types.js';
import { roleAllows, type DashboardPermission } from './dashboardRoles.js';

/**
 * What a use case needs of its caller: a dashboard permission (`read`, `decide`, `manage`, which
 * the operator holds everywhere and a dashboard user by role), or `operate`, the operator's alone
 * (organizations, treasuries, dashboard accounts, the shared registry). API keys hold none of
 * these: they reach only the agent-facing use cases, which take an ApiKeyPrincipal by type.
 */
export type Permission = DashboardPermission | 'operate';

/** Refuses a principal that lacks a permission (403 permission_denied); says nothing about any record. */
export function requirePermission(principal: Principal, permission: Permission): void {
  if (principal.kind === 'operator') return;
  if (principal.kind === 'dashboard_user' && permission !== 'operate' && roleAllows(principal.role, permission)) return;
  const text = principal.kind === 'dashboard_user' ? `Your role (${principal.role}) does not allow this.` : 'An API key does not allow this.';
  throw new DomainError('permission_denied', text, { code: 'permission_denied' });
}

/** Whether a principal may touch the records of an organization: the operator any, others their own. */
export function inScope(principal: Principal, orgId: string): boolean {
  return principal.kind === 'operator' || principal.orgId === orgId;
}

/**
 * Checks permission, then scope: a record of another organization gets `notFound()`, the same
 * error as an unknown id, so an organization-bound caller cannot even learn that it exists.
 */
export function requireAccess(principal: Principal, permission: Permission, orgId: string, notFound: () => DomainError): void {
  requirePermission(principal, permission);
  if (!inScope(principal, orgId)) throw notFound();
}
