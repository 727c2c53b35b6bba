import { DomainError } from '../domain/errors.js';
import type { Organization, Principal } from '../domain/types.js';
import { ORG_ID } from '../domain/validate.js';
import type { AppDeps } from './deps.js';
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

const orgNotFound = () => new DomainError('not_found', 'Organization not found', { code: 'organization_not_found' });

/** An organization by id, or 404; no scope check: the callers in src/app have made it. */
export async function requireOrganization(deps: AppDeps, orgId: string): Promise<Organization> {
  const org = ORG_ID.test(orgId) ? await deps.store.organizations.get(orgId) : undefined;
  if (!org) throw orgNotFound();
  return org;
}

/**
 * Checks that a principal may act with `permission` on an organization, and that it exists: the
 * operator on any, an organization-bound principal on its own only (another one's id is the same
 * 404 as an unknown one).
 */
export async function requireOrgAccess(deps: AppDeps, principal: Principal, permission: Permission, orgId: string): Promise<Organization> {
  requireAccess(principal, permission, orgId, orgNotFound);
  return requireOrganization(deps, orgId);
}
