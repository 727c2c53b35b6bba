import type { DashboardRole } from '../domain/types.js';

/**
 * What a dashboard request may do: `read` anything of its organization, `decide` approval
 * requests, or `manage` agents, policies, API keys and the registry.
 */
export type DashboardPermission = 'read' | 'decide' | 'manage';

/** The one table of who may do what; every dashboard route names the permission it needs. */
export const ROLE_PERMISSIONS = {
  owner: ['read', 'decide', 'manage'],
  approver: ['read', 'decide'],
  viewer: ['read'],
} as const satisfies Record<DashboardRole, readonly DashboardPermission[]>;

/** Whether a role grants a permission. */
export function roleAllows(role: DashboardRole, permission: DashboardPermission): boolean {
  return (ROLE_PERMISSIONS[role] as readonly DashboardPermission[]).includes(permission);
}
