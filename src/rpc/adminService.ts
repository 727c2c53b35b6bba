import type { HandlerContext, ServiceImpl } from '@connectrpc/connect';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromMs, timestampMs } from '@bufbuild/protobuf/wkt';
import { AdminService, ApiKeyMode, DashboardRole, Decision, type DashboardUserSchema } from '../../gen/paypolicy/v1/admin_pb.js';
import { decideApproval, describeApproval, listApprovals } from '../app/approvals/approvals.js';
import { authenticateAdmin } from '../app/accounts/auth/credentials.js';
import { createAgent, getAgent, listAgents, policyHistory, setPolicy, updateAgent } from '../app/organizations/agents.js';
import { createApiKey, listApiKeys, revokeApiKey } from '../app/accounts/apiKeys.js';
import {
  createDashboardUser, deleteDashboardUser, listDashboardUsers, resetDashboardUserPassword, updateDashboardUser,
} from '../app/accounts/dashboardUsers.js';
import type { DashboardUser } from '../domain/types.js';
import type { AppDeps } from '../app/deps.js';
import { listTransactions } from '../app/organizations/ledger.js';
import { simulatePolicyChange } from '../app/payments/policySimulation.js';
import { createOrganization, listOrganizations, provisionTreasury, updateOrganization } from '../app/organizations/organizations.js';
import { deleteService, listServices, MAX_LIST_PAGE_BYTES, recordsWithin, serviceRecords, upsertService, type RegistryScope } from '../app/registry/registry.js';
import { getTreasuryBalances } from '../app/organizations/treasury.js';
import { invalidArgument } from '../domain/errors.js';
import type { OperatorPrincipal } from '../domain/types.js';
import {
  agentToProto,
  approvalToProto,
  apiKeyToProto,
  limitsFromProto,
  policyVersionToProto,
  organizationToProto,
  policyInputFromProto,
  simulationToProto,
  policyToProto,
  serviceFromProto,
  serviceToProto,
  transactionToProto,
} from '../protoMapping/messages.js';
import { treasuryBalancesToProto } from '../protoMapping/treasury.js';
import { agentStatus, approvalStatus, transactionStatus, type EnumCodec } from '../protoMapping/enums.js';
import { pageOf, VERSION_PAGE_SIZE } from './pages.js';

/** The registry scope an operator request names: an organization's private records, or the shared ones. */
function registryScope(orgId: string | undefined): RegistryScope {
  return orgId === undefined ? 'shared' : { orgId };
}

/**
 * Operator RPCs, all behind the admin token. Handlers translate and call one use case each, as
 * the operator; the use cases do every scope and permission check.
 */
export function createAdminService(deps: AppDeps, adminTokenHash: () => Buffer): ServiceImpl<typeof AdminService> {
  const admin = (ctx: HandlerContext): OperatorPrincipal => authenticateAdmin(adminTokenHash(), ctx.requestHeader.get('authorization'));
  return {
    async createOrganization(req, ctx) {
      const op = admin(ctx);
      return { organization: organizationToProto(await createOrganization(deps, op, { name: req.name, approvalWindowSeconds: req.approvalWindowSeconds })) };
    },
    async updateOrganization(req, ctx) {
      const op = admin(ctx);
      return { organization: organizationToProto(await updateOrganization(deps, op, { orgId: req.orgId, name: req.name, approvalWindowSeconds: req.approvalWindowSeconds, limits: limitsFromProto(req.limits) })) };
    },
    async listOrganizations(req, ctx) {
      const op = admin(ctx);
      const { page, nextPageToken } = pageOf(await listOrganizations(deps, op), req, (o) => [o.createdAt, o.id], 'asc');
      return { organizations: page.map(organizationToProto), nextPageToken };
    },
    async provisionTreasury(req, ctx) {
      const op = admin(ctx);
      return { treasuryAddress: await provisionTreasury(deps, op, req.orgId) };
    },
    async getTreasuryBalances(req, ctx) {
      const op = admin(ctx);
      return treasuryBalancesToProto(await getTreasuryBalances(deps, op, req.orgId));
    },
    async createApiKey(req, ctx) {
      const op = admin(ctx);
      const mode = req.mode === ApiKeyMode.LIVE ? 'live' : req.mode === ApiKeyMode.TEST ? 'test' : undefined;
      const r = await createApiKey(deps, op, { orgId: req.orgId, mode, label: req.label });
      return { apiKey: apiKeyToProto(r.key), plaintextKey: r.plaintext };
    },
    async revokeApiKey(req, ctx) {
      const op = admin(ctx);
      return { apiKey: apiKeyToProto(await revokeApiKey(deps, op, req.id)) };
    },
    async listApiKeys(req, ctx) {
      const op = admin(ctx);
      const { page, nextPageToken } = pageOf(await listApiKeys(deps, op, req.orgId), req, (k) => [k.createdAt, k.id], 'desc');
      return { apiKeys: page.map(apiKeyToProto), nextPageToken };
    },
    async createAgent(req, ctx) {
      const op = admin(ctx);
      return { agent: agentToProto(await createAgent(deps, op, { orgId: req.orgId, name: req.name })) };
    },
    async updateAgent(req, ctx) {
      const op = admin(ctx);
      return { agent: agentToProto(await updateAgent(deps, op, { agentId: req.agentId, name: req.name, status: statusInput(agentStatus, req.status) })) };
    },
    async getAgent(req, ctx) {
      const op = admin(ctx);
      return { agent: agentToProto(await getAgent(deps, op, req.agentId)) };
    },
    async listAgents(req, ctx) {
      const op = admin(ctx);
      const { page, nextPageToken } = pageOf(await listAgents(deps, op, req.orgId), req, (a) => [a.createdAt, a.id], 'asc');
      return { agents: page.map(agentToProto), nextPageToken };
    },
    async setPolicy(req, ctx) {
      const op = admin(ctx);
      const { policy, warnings } = await setPolicy(deps, op, policyInputFromProto(req));
      return { policy: policyToProto(policy), warnings };
    },
    async listPolicyVersions(req, ctx) {
      const { page, nextPageToken } = pageOf(await policyHistory(deps, admin(ctx), req.agentId), req, (v) => [v.version], 'asc', VERSION_PAGE_SIZE);
      return { versions: page.map(policyVersionToProto), nextPageToken };
    },
    async simulatePolicy(req, ctx) {
      const op = admin(ctx);
      if (!req.policy) throw invalidArgument('policy is required');
      return simulationToProto(await simulatePolicyChange(deps, op, { ...policyInputFromProto(req.policy), days: req.days }));
    },
    async upsertService(req, ctx) {
      const op = admin(ctx);
      if (!req.service) throw invalidArgument('service is required');
      return { service: serviceToProto(await upsertService(deps, op, registryScope(req.orgId), serviceFromProto(req.service))) };
    },
    async deleteService(req, ctx) {
      const op = admin(ctx);
      await deleteService(deps, op, registryScope(req.orgId), req.slug);
      return {};
    },
    async listServices(req, ctx) {
      const op = admin(ctx);
      const scope = registryScope(req.orgId);
      const summaries = await listServices(deps, op, scope);
      let { page, nextPageToken } = pageOf(summaries, req, (x) => [x.slug], 'asc');
      // A page carries whole records: cut it where they pass MAX_LIST_PAGE_BYTES (one record at least).
      const fit = recordsWithin(page, MAX_LIST_PAGE_BYTES);
      if (fit < page.length) ({ page, nextPageToken } = pageOf(summaries, { pageSize: fit, pageToken: req.pageToken }, (x) => [x.slug], 'asc'));
      return { services: (await serviceRecords(deps, op, scope, page)).map(serviceToProto), nextPageToken };
    },
    async listTransactions(req, ctx) {
      const op = admin(ctx);
      const r = await listTransactions(deps, op, {
        orgId: req.orgId, agentId: req.agentId, status: statusInput(transactionStatus, req.status),
        from: req.from ? timestampMs(req.from) : undefined, to: req.to ? timestampMs(req.to) : undefined,
        pageSize: req.pageSize, pageToken: req.pageToken,
      });
      return { transactions: r.transactions.map(transactionToProto), nextPageToken: r.nextPageToken };
    },
    async listApprovals(req, ctx) {
      const op = admin(ctx);
      const all = await listApprovals(deps, op, req.orgId, statusInput(approvalStatus, req.status) ?? '');
      const { page, nextPageToken } = pageOf(all, req, (a) => [a.createdAt, a.id], 'desc');
      return { approvals: await Promise.all(page.map(async (a) => approvalToProto(await describeApproval(deps, a)))), nextPageToken };
    },
    async decideApproval(req, ctx) {
      const op = admin(ctx);
      const decision = req.decision === Decision.APPROVE ? 'approve' : req.decision === Decision.DENY ? 'deny' : undefined;
      const a = await decideApproval(deps, op, { id: req.id, decision, note: req.note, decidedBy: req.decidedBy });
      return { approval: approvalToProto(await describeApproval(deps, a)) };
    },
    async createDashboardUser(req, ctx) {
      const op = admin(ctx);
      const role = DASHBOARD_ROLES[req.role];
      const user = await createDashboardUser(deps, op, { orgId: req.orgId, email: req.email, role, password: req.password });
      return { user: dashboardUserToProto(user) };
    },
    async listDashboardUsers(req, ctx) {
      const op = admin(ctx);
      const { page, nextPageToken } = pageOf(await listDashboardUsers(deps, op, req.orgId), req, (u) => [u.createdAt, u.id], 'asc');
      return { users: page.map(dashboardUserToProto), nextPageToken };
    },
    async updateDashboardUser(req, ctx) {
      const op = admin(ctx);
      return { user: dashboardUserToProto(await updateDashboardUser(deps, op, { userId: req.userId, disabled: req.disabled })) };
    },
    async deleteDashboardUser(req, ctx) {
      const op = admin(ctx);
      await deleteDashboardUser(deps, op, req.userId);
      return {};
    },
    async resetDashboardUserPassword(req, ctx) {
      const op = admin(ctx);
      return { user: dashboardUserToProto(await resetDashboardUserPassword(deps, op, { userId: req.userId, password: req.password })) };
    },
  };
}

/** A status filter or update as the use case's text: UNSPECIFIED (0) is "not given"; numbers the enum lacks are refused. */
function statusInput<N extends string>(codec: EnumCodec<N, number>, value: number): N | undefined {
  if (value === 0) return undefined;
  const name = codec.fromProto(value);
  if (name === undefined) throw invalidArgument(`status must be one of ${codec.names.join(', ')}`);
  return name;
}

/** DashboardRole → the role name the use case takes; UNSPECIFIED and unknown values stay undefined. */
const DASHBOARD_ROLES: Partial<Record<DashboardRole, DashboardUser['role']>> = {
  [DashboardRole.OWNER]: 'owner',
  [DashboardRole.APPROVER]: 'approver',
  [DashboardRole.VIEWER]: 'viewer',
};

/** A dashboard user without password material (the store never hands that out). */
function dashboardUserToProto(u: DashboardUser): MessageInitShape<typeof DashboardUserSchema> {
  const role = u.role === 'owner' ? DashboardRole.OWNER : u.role === 'approver' ? DashboardRole.APPROVER : DashboardRole.VIEWER;
  return { id: u.id, orgId: u.orgId, email: u.email, role, createdAt: timestampFromMs(u.createdAt), disabled: u.disabled };
}
