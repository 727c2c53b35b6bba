import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { getAgentSpend } from '../../src/app/payments/agentSpend.js';
import { createAgent, getAgent, listAgents, policyHistory, recentPolicyChanges, setPolicy, updateAgent } from '../../src/app/organizations/agents.js';
import { simulatePolicyChange } from '../../src/app/payments/policySimulation.js';
import { authenticateApiKey, createApiKey, listApiKeys, revokeApiKey } from '../../src/app/accounts/apiKeys.js';
import { decideApproval, getApprovalStatus, listApprovals } from '../../src/app/approvals/approvals.js';
import {
  createDashboardUser, deleteDashboardUser, getDashboardUser, listDashboardUsers, resetDashboardUserPassword, updateDashboardUser,
} from '../../src/app/accounts/dashboardUsers.js';
import type { AppDeps } from '../../src/app/deps.js';
import { listTransactions } from '../../src/app/organizations/ledger.js';
import { createOrganization, getOrganization, listOrganizations, provisionTreasury, updateOrganization } from '../../src/app/organizations/organizations.js';
import { getTreasuryBalances } from '../../src/app/organizations/treasury.js';
import { pingAgent } from '../../src/app/organizations/ping.js';
import { quotePayment } from '../../src/app/payments/quote.js';
import { deleteService, findVisibleService, listServices, resolveServices, serviceRecords, upsertService, visibleServices } from '../../src/app/registry/registry.js';
import { importServices } from '../../src/app/registry/serviceImport.js';
import { signPayment } from '../../src/app/payments/pipeline.js';
import { summarizeSpend } from '../../src/app/payments/spend.js';
import { toDomainError } from '../../src/domain/errors.js';
import {
  OPERATOR, type ApiKeyPrincipal, type DashboardRole, type DashboardUserPrincipal, type Principal, type ServiceRecord,
} from '../../src/domain/types.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * Tenancy lives in the use cases (src/app), not in the transports: every use case is called
 * directly, on the real store file of a running server, by a principal of ANOTHER organization
 * (its owner, or its API key for the agent-facing ones) and must answer exactly what an unknown id
 * gets; by a same-organization viewer or approver where it needs an owner, permission_denied;
 * afterwards nothing of the target organization has changed. The list of use cases is explicit,
 * and a check fails when src/app exports something that is in neither list below.
 */

const RECIPIENT = '0x2222222222222222222222222222222222222222';

let s: TestServer;
let deps: AppDeps;
/** The target organization A (the bootstrap one) and its records. */
let orgA: string;
let agentA: string;
let keyA: string;
let userA: string;
let approvalA: string;
const slugA = 'a-private-service';
/** The other organization B and its principals. */
let orgB: string;
let ownerB: DashboardUserPrincipal;
let apiKeyB: ApiKeyPrincipal;
let apiKeyA: ApiKeyPrincipal;

function user(orgId: string, role: DashboardRole): DashboardUserPrincipal {
  return { kind: 'dashboard_user', orgId, userId: `usr_${role}`, email: `${role}@example.com`, role };
}

function service(slug: string): ServiceRecord {
  return { id: '', slug, name: slug, description: '', category: '', logoUrl: '', docsUrl: '', paymentMethods: [], endpoints: [] };
}

/** kind and code of what a call throws (awaiting it if it is async); fails the test if it returns. */
async function refusal(call: () => unknown): Promise<{ kind: string; code: string }> {
  try {
    await call();
  } catch (err) {
    const e = toDomainError(err);
    return { kind: e.kind, code: e.code };
  }
  throw new Error('expected the use case to refuse');
}

const denied = { kind: 'permission_denied', code: 'permission_denied' };
const nf = (code: string) => ({ kind: 'not_found', code });

type UseCase = {
  /** Call as `p` against organization A's records. */
  call: (p: Principal) => unknown;
  /** What a principal of organization B gets: the answer to an unknown id (or, operator-only, permission_denied). */
  other: { kind: string; code: string };
  /** Roles of organization A that must be refused (the use case needs more). */
  refusedRoles?: DashboardRole[];
  /** A call that succeeds for a principal allowed to act, so the refusals above are about scope and role. */
  allowed?: () => unknown;
};

/**
 * EVERY use case of src/app that acts for a caller. Dashboard-side ones are walked with organization
 * B's owner; the agent-facing ones (their principal is an API key by type) with organization B's key.
 */
const USE_CASES: Record<string, UseCase> = {
  // organizations.ts
  createOrganization: { call: (p) => createOrganization(deps, p, { name: 'x' }), other: denied, refusedRoles: ['owner', 'approver', 'viewer'] },
  updateOrganization: { call: (p) => updateOrganization(deps, p, { orgId: orgA, name: 'renamed' }), other: denied, refusedRoles: ['owner'] },
  listOrganizations: { call: (p) => listOrganizations(deps, p), other: denied, refusedRoles: ['owner'] },
  provisionTreasury: { call: (p) => provisionTreasury(deps, p, orgA), other: denied, refusedRoles: ['owner'] },
  getOrganization: { call: (p) => getOrganization(deps, p, orgA), other: nf('organization_not_found'), allowed: () => getOrganization(deps, user(orgA, 'viewer'), orgA) },
  // treasury.ts
  getTreasuryBalances: { call: (p) => getTreasuryBalances(deps, p, orgA), other: nf('organization_not_found'), allowed: () => getTreasuryBalances(deps, user(orgA, 'viewer'), orgA) },
  // dashboardUsers.ts
  createDashboardUser: {
    call: (p) => createDashboardUser(deps, p, { orgId: orgA, email: 'new@example.com', role: 'owner', password: 'correct horse battery' }),
    other: denied, refusedRoles: ['owner'],
  },
  listDashboardUsers: { call: (p) => listDashboardUsers(deps, p, orgA), other: nf('organization_not_found'), allowed: () => listDashboardUsers(deps, user(orgA, 'viewer'), orgA) },
  getDashboardUser: {
    call: (p) => getDashboardUser(deps, p, userA), other: nf('dashboard_user_not_found'), refusedRoles: ['approver', 'viewer'],
    allowed: () => getDashboardUser(deps, user(orgA, 'owner'), userA),
  },
  updateDashboardUser: { call: (p) => updateDashboardUser(deps, p, { userId: userA, disabled: true }), other: nf('dashboard_user_not_found'), refusedRoles: ['approver', 'viewer'] },
  deleteDashboardUser: { call: (p) => deleteDashboardUser(deps, p, userA), other: nf('dashboard_user_not_found'), refusedRoles: ['approver', 'viewer'] },
  resetDashboardUserPassword: {
    call: (p) => resetDashboardUserPassword(deps, p, { userId: userA, password: 'another long password' }), other: nf('dashboard_user_not_found'),
    refusedRoles: ['approver', 'viewer'],
  },
  // agents.ts
  getAgent: { call: (p) => getAgent(deps, p, agentA), other: nf('agent_not_found'), allowed: () => getAgent(deps, user(orgA, 'viewer'), agentA) },
  policyHistory: { call: (p) => policyHistory(deps, p, agentA), other: nf('agent_not_found'), allowed: () => policyHistory(deps, user(orgA, 'viewer'), agentA) },
  simulatePolicyChange: {
    call: (p) => simulatePolicyChange(deps, p, { agentId: agentA, allowlist: [], spendCapUsd: '1', approvalThresholdUsd: '1' }), other: nf('agent_not_found'),
    allowed: () => simulatePolicyChange(deps, user(orgA, 'viewer'), { agentId: agentA, allowlist: [], spendCapUsd: '1', approvalThresholdUsd: '1' }),
  },
  recentPolicyChanges: {
    call: (p) => recentPolicyChanges(deps, p, agentA, 20), other: nf('agent_not_found'), allowed: () => recentPolicyChanges(deps, user(orgA, 'viewer'), agentA, 20),
  },
  listAgents: { call: (p) => listAgents(deps, p, orgA), other: nf('organization_not_found'), allowed: () => listAgents(deps, user(orgA, 'viewer'), orgA) },
  createAgent: { call: (p) => createAgent(deps, p, { orgId: orgA, name: 'intruder' }), other: nf('organization_not_found'), refusedRoles: ['approver', 'viewer'] },
  updateAgent: {
    call: (p) => updateAgent(deps, p, { agentId: agentA, status: 'revoked' }), other: nf('agent_not_found'), refusedRoles: ['approver', 'viewer'],
    allowed: () => updateAgent(deps, user(orgA, 'owner'), { agentId: agentA, name: 'demo-agent' }),
  },
  setPolicy: {
    call: (p) => setPolicy(deps, p, { agentId: agentA, allowlist: [], spendCapUsd: '1000000', approvalThresholdUsd: '1000000' }),
    other: nf('agent_not_found'), refusedRoles: ['approver', 'viewer'],
  },
  // apiKeys.ts
  createApiKey: { call: (p) => createApiKey(deps, p, { orgId: orgA, mode: 'live', label: 'intruder' }), other: nf('organization_not_found'), refusedRoles: ['approver', 'viewer'] },
  revokeApiKey: { call: (p) => revokeApiKey(deps, p, keyA), other: nf('api_key_not_found'), refusedRoles: ['approver', 'viewer'] },
  listApiKeys: { call: (p) => listApiKeys(deps, p, orgA), other: nf('organization_not_found'), allowed: () => listApiKeys(deps, user(orgA, 'viewer'), orgA) },
  // ledger.ts and spend.ts
  listTransactions: {
    call: (p) => listTransactions(deps, p, { orgId: orgA, agentId: agentA }), other: nf('organization_not_found'),
    allowed: () => listTransactions(deps, user(orgA, 'viewer'), { orgId: orgA }),
  },
  summarizeSpend: { call: (p) => summarizeSpend(deps, p, orgA), other: nf('organization_not_found'), allowed: () => summarizeSpend(deps, user(orgA, 'viewer'), orgA) },
  // approvals.ts
  listApprovals: { call: (p) => listApprovals(deps, p, orgA, ''), other: nf('organization_not_found'), allowed: () => listApprovals(deps, user(orgA, 'viewer'), orgA, '') },
  decideApproval: { call: (p) => decideApproval(deps, p, { id: approvalA, decision: 'deny', note: 'intruder' }), other: nf('approval_not_found'), refusedRoles: ['viewer'] },
  getApprovalStatus: { call: () => getApprovalStatus(deps, apiKeyB, approvalA), other: nf('approval_not_found'), allowed: () => getApprovalStatus(deps, apiKeyA, approvalA) },
  // registry.ts and serviceImport.ts
  upsertService: { call: (p) => upsertService(deps, p, { orgId: orgA }, service('intruder')), other: nf('organization_not_found'), refusedRoles: ['approver', 'viewer'] },
  importServices: { call: (p) => importServices(deps, p, { orgId: orgA }, [service('intruder')]), other: nf('organization_not_found'), refusedRoles: ['approver', 'viewer'] },
  deleteService: { call: (p) => deleteService(deps, p, { orgId: orgA }, slugA), other: nf('service_not_found'), refusedRoles: ['approver', 'viewer'] },
  listServices: { call: (p) => listServices(deps, p, { orgId: orgA }), other: nf('organization_not_found'), allowed: () => listServices(deps, user(orgA, 'viewer'), { orgId: orgA }) },
  serviceRecords: {
    call: async (p) => serviceRecords(deps, p, { orgId: orgA }, await listServices(deps, OPERATOR, { orgId: orgA })), other: nf('organization_not_found'),
    allowed: async () => expect((await serviceRecords(deps, user(orgA, 'viewer'), { orgId: orgA }, await listServices(deps, OPERATOR, { orgId: orgA }))).map((r) => r.slug)).toEqual([slugA]),
  },
  visibleServices: { call: (p) => visibleServices(deps, p, orgA), other: nf('organization_not_found'), allowed: () => visibleServices(deps, user(orgA, 'viewer'), orgA) },
  findVisibleService: {
    call: (p) => findVisibleService(deps, p, orgA, slugA), other: nf('service_not_found'),
    allowed: async () => expect((await findVisibleService(deps, user(orgA, 'viewer'), orgA, slugA))?.slug).toBe(slugA),
  },
  // The agent-facing use cases: the key's organization is the only scope there is.
  signPayment: {
    call: () => signPayment(deps, apiKeyB, {
      agentId: agentA, type: 'eip3009', chainId: 84532, recipientAddress: RECIPIENT, amountUsd: '0.01', payload: undefined, dryRun: true, idempotencyKey: undefined,
    }),
    other: nf('agent_not_found'),
  },
  quotePayment: { call: () => quotePayment(deps, apiKeyB, { url: 'https://paywall.example/x', agentId: agentA, method: 'GET' }), other: nf('agent_not_found') },
  getAgentSpend: { call: () => getAgentSpend(deps, apiKeyB, agentA), other: nf('agent_not_found'), allowed: () => getAgentSpend(deps, apiKeyA, agentA) },
  // The wire protocol answers an unusable agent_id on /api/ping with 400 missing_agent_id, unknown and foreign alike.
  pingAgent: { call: () => pingAgent(deps, apiKeyB, agentA), other: { kind: 'missing_agent', code: 'missing_agent_id' }, allowed: () => pingAgent(deps, apiKeyA, agentA) },
};

/** A slug of another organization resolves exactly like an unregistered one: to null. */
const RESOLVE = 'resolveServices';
/** Authentication produces the principal; it takes none. */
const AUTHENTICATION = ['authenticateApiKey', 'authenticateSession', 'signIn', 'signOut', 'csrfTokenMatches', 'sessionPrincipal'];

/**
 * Every other export of src/app, and why it takes no principal. A new export must be put here or
 * in USE_CASES; the check below fails otherwise.
 */
const NOT_USE_CASES: Record<string, string> = {
  // access rules themselves
  inScope: 'access rule', requireAccess: 'access rule', requirePermission: 'access rule', requireOrgAccess: 'access rule',
  roleAllows: 'access rule', ROLE_PERMISSIONS: 'access rule', scopePermission: 'access rule',
  // lookups for other use cases, each called after its caller's scope check
  requireOrganization: 'helper after a scope check', requireAgentInOrg: 'helper: scoped by the key\'s organization',
  limitStatuses: 'helper of getAgentSpend and summarizeSpend, after their scope checks', orgLimitStatuses: 'helper of summarizeSpend, after its scope check',
  describeApproval: 'helper on a row a use case returned', policyFacts: 'helper of sign/quote', advisoryPolicyFacts: 'helper of sign (the advisory pre-check)', recheckApproved: 'helper of decideApproval',
  // on-chain submission: the background submitter and the request path's handle on it act on rows a use case wrote
  requireBroadcast: 'guard of signPayment and collection', submitPending: 'background submitter',
  startSubmitter: 'background submitter', createSubmitter: 'composition: the app\'s submitter', MAX_NONCE_JUMP: 'constant',
  trackChain: 'background submitter', DEFAULT_TRACKING: 'constant', pairKey: 'pure',
  readFundsForSigning: 'helper of signPayment', treasuryFundsVerdict: 'helper of signPayment', treasuryRefusal: 'pure',
  signAndSettle: 'helper of sign/decideApproval',
  // the owned process-wide objects of AppDeps, created with the app
  SignsInFlight: 'owned object of AppDeps', StrandedPayments: 'owned object of AppDeps', ChainConflicts: 'owned object of AppDeps',
  ReconciledNonces: 'owned object of AppDeps',
  withinWrite: 'helper: the deps of a write function', attributeOffer: 'helper of sign/quote', probeOffer: 'helper of sign/quote',
  saveService: 'helper of upsertService/importServices inside their write (checks the scope itself)',
  requireRegistryRoom: 'helper of upsertService/importServices inside their write',
  registryUsageBefore: 'helper of upsertService/importServices inside their write', recordsWithin: 'pure',
  // the stages of signPayment (app/payments/pipeline.ts), each called after its scope check
  decide: 'stage of signPayment', readChain: 'stage of signPayment', answerSigned: 'stage of signPayment', replayPayment: 'helper of signPayment',
  resolveIntent: 'stage of signPayment', intentFacts: 'helper of signPayment', allowedResult: 'helper of signPayment', signOrFail: 'helper of sign/decideApproval',
  recheckProbed: 'helper of signPayment', storedNetworkFee: 'pure',
  sameSplits: 'pure', offerSplits: 'pure', offerPayees: 'pure', describePayees: 'pure', samePayees: 'pure', sameFeePayer: 'pure', feePayerText: 'pure',
  // the server's own maintenance, acting for no caller
  sweepExpiredApprovals: 'server maintenance', expireIfDue: 'server maintenance', expireCollectionIfDue: 'server maintenance',
  repairInterrupted: 'server start-up repair',
  // pure functions and constants
  denyAllPolicy: 'pure', parsePolicy: 'pure', policyAfter: 'pure',
  DEFAULT_SIMULATION_DAYS: 'constant', MAX_SIMULATION_DAYS: 'constant', MAX_SIMULATED_REQUESTS: 'constant', MAX_OTHER_HOLDS: 'constant', normalizeService: 'pure', normalizeEmail: 'pure', isDashboardRole: 'pure', DASHBOARD_ROLES: 'constant',
  hashPassword: 'pure', verifyPassword: 'pure', validateNewPassword: 'pure', MIN_PASSWORD_LENGTH: 'constant', MAX_PASSWORD_LENGTH: 'constant',
  signInAddressKey: 'pure', SESSION_TTL_MS: 'constant', MAX_FAILED_SIGN_INS: 'constant', MAX_FAILED_SIGN_INS_PER_ADDRESS: 'constant',
  LOCKOUT_MS: 'constant', LOGIN_FAILURE_PRUNE_MS: 'constant', MAX_LOGIN_FAILURE_ROWS: 'constant',
  DEFAULT_APPROVAL_WINDOW_SECONDS: 'constant', APPROVAL_WINDOW_SECONDS: 'constant', PING_RECORD_INTERVAL_MS: 'constant', PING_TOUCH_INTERVAL_MS: 'constant', MAX_IMPORT_RECORDS: 'constant',
  MAX_PRIVATE_RECORDS: 'constant', MAX_PRIVATE_BASE_URLS: 'constant', MAX_PAYMENT_METHODS: 'constant', MAX_PRIVATE_BYTES: 'constant',
  MAX_RECORD_BYTES: 'constant', MAX_RESOLVE_BYTES: 'constant', MAX_LIST_PAGE_BYTES: 'constant', MAX_ENDPOINTS: 'constant',
  MAX_ENDPOINT_PATH_CHARS: 'constant', MAX_ENDPOINT_DESCRIPTION_CHARS: 'constant', MAX_URL_CHARS: 'constant', CAP_WINDOW_MS: 'constant', CAP_SNAPSHOT_MS: 'constant',
  EXPIRED_REASON: 'constant', COLLECTION_EXPIRED_REASON: 'constant', COLLECTION_WINDOW_MS: 'constant', INTERRUPTED_EXPIRED_REASON: 'constant',
  OFFER_CHAINS: 'constant', requireOfferChain: 'pure', requirePayableOffer: 'pure', offerFromJson: 'pure', offerToJson: 'pure', sameOffer: 'pure', splitRecipients: 'pure',
  isPaywallRequest: 'pure', preparePayment: 'pure', storedMppOffer: 'pure', parseStored: 'pure',
  loadRequest: 'pure', storedRequestOf: 'pure', prepareSignature: 'pure', signatureOf: 'pure', storeRequest: 'pure',
};

beforeAll(async () => {
  s = await startTestServer({ logLevel: 'warn' });
  deps = s.app.deps;
  orgA = s.bootstrap.org_id;
  agentA = s.bootstrap.agent_id;
  apiKeyA = await authenticateApiKey(deps, `Bearer ${s.bootstrap.api_key}`);
  keyA = (await createApiKey(deps, OPERATOR, { orgId: orgA, mode: 'test', label: 'target' })).key.id;
  userA = (await createDashboardUser(deps, OPERATOR, { orgId: orgA, email: 'target@example.com', role: 'viewer', password: 'correct horse battery' })).id;
  await upsertService(deps, OPERATOR, { orgId: orgA }, service(slugA));
  await setPolicy(deps, OPERATOR, { agentId: agentA, allowlist: [RECIPIENT], spendCapUsd: '100', approvalThresholdUsd: '1' });
  const pending = await signPayment(deps, apiKeyA, {
    agentId: agentA, type: 'eip3009', chainId: 84532, recipientAddress: RECIPIENT, amountUsd: '5', payload: undefined, dryRun: false, idempotencyKey: undefined,
  });
  if (pending.outcome !== 'pending_approval') throw new Error(`expected a pending approval, got ${pending.outcome}`);
  approvalA = pending.approvalRequestId;

  orgB = (await createOrganization(deps, OPERATOR, { name: 'other' })).id;
  ownerB = user(orgB, 'owner');
  apiKeyB = await authenticateApiKey(deps, `Bearer ${(await createApiKey(deps, OPERATOR, { orgId: orgB, mode: 'test', label: 'b' })).plaintext}`);
});

afterAll(async () => {
  await s?.close();
});

/** What organization A looks like to its operator; no refused call may change any of it. */
async function snapshotA() {
  return {
    org: await getOrganization(deps, OPERATOR, orgA),
    agents: await listAgents(deps, OPERATOR, orgA),
    keys: await listApiKeys(deps, OPERATOR, orgA),
    users: await listDashboardUsers(deps, OPERATOR, orgA),
    approvals: await listApprovals(deps, OPERATOR, orgA, ''),
    services: await listServices(deps, OPERATOR, { orgId: orgA }),
    ledger: (await listTransactions(deps, OPERATOR, { orgId: orgA, pageSize: 500 })).transactions.filter((t) => t.type !== 'ping'),
    organizations: (await listOrganizations(deps, OPERATOR)).length,
  };
}

describe('use-case tenancy', () => {
  test('error: not_found: every use case, called by another organization, answers exactly what an unknown id gets, and changes nothing', async () => {
    const before = await snapshotA();
    for (const [name, u] of Object.entries(USE_CASES)) {
      expect([name, await refusal(() => u.call(ownerB))]).toEqual([name, u.other]);
    }
    expect(await snapshotA()).toEqual(before);
  });

  test('error: permission_denied: a same-organization role below what the use case needs is refused, and changes nothing', async () => {
    const before = await snapshotA();
    for (const [name, u] of Object.entries(USE_CASES)) {
      for (const role of u.refusedRoles ?? []) {
        expect([name, role, await refusal(() => u.call(user(orgA, role)))]).toEqual([name, role, denied]);
      }
    }
    expect(await snapshotA()).toEqual(before);
  });

  test('error: permission_denied: an API key reaches no dashboard or operator use case, not even in its own organization', async () => {
    for (const [name, u] of Object.entries(USE_CASES)) {
      if (u.call.length === 0) continue; // the agent-facing ones take the key by type
      expect([name, await refusal(() => u.call(apiKeyA))]).toEqual([name, denied]);
    }
  });

  test('behavior: the same calls succeed for a principal allowed to make them, so the refusals above are about scope and role', async () => {
    for (const [name, u] of Object.entries(USE_CASES)) {
      if (u.allowed) await expect(Promise.resolve().then(u.allowed), name).resolves.not.toThrow();
    }
    // The approver may decide what the viewer may not: deny the pending approval of organization A.
    const decided = await decideApproval(deps, user(orgA, 'approver'), { id: approvalA, decision: 'deny', note: '' });
    expect([decided.status, decided.decidedBy]).toEqual(['denied', 'approver@example.com']);
  });

  test('behavior: an owner replaces their own organization\'s window limits and nothing else of it; another organization\'s owner gets not_found', async () => {
    const limits = [{ window: '7d', max_usd: '500' }];
    expect(await refusal(() => updateOrganization(deps, ownerB, { orgId: orgA, limits }))).toEqual(nf('organization_not_found'));
    for (const role of ['approver', 'viewer'] as const) {
      expect([role, await refusal(() => updateOrganization(deps, user(orgA, role), { orgId: orgA, limits }))]).toEqual([role, denied]);
    }
    // Renaming or a new approval window stays the operator's, with the limits or without.
    expect(await refusal(() => updateOrganization(deps, user(orgA, 'owner'), { orgId: orgA, limits, approvalWindowSeconds: 600 }))).toEqual(denied);
    expect((await getOrganization(deps, OPERATOR, orgA)).limits).toEqual([]);
    try {
      const updated = await updateOrganization(deps, user(orgA, 'owner'), { orgId: orgA, limits });
      expect(updated.limits.map((l) => [l.window, l.maxMicros])).toEqual([['7d', 500_000_000n]]);
    } finally {
      await updateOrganization(deps, OPERATOR, { orgId: orgA, limits: [] });
    }
  });

  test('behavior: another organization\'s private slug resolves like an unregistered one', async () => {
    expect((await resolveServices(deps, apiKeyB, [slugA])).results).toEqual([{ slug: slugA, service: null }]);
    expect((await resolveServices(deps, apiKeyA, [slugA])).results[0]!.service?.slug).toBe(slugA);
  });

  test('behavior: every export of src/app is either a listed use case or listed with why it takes no principal', async () => {
    const dir = join(import.meta.dirname, '../../src/app');
    const exported: string[] = [];
    // Every module under app, its capability folders included; accounts/auth holds the credential
    // primitives and the password-hashing thread, which act on secrets, never on a principal's records.
    const modules = (readdirSync(dir, { recursive: true }) as string[]).filter((f) => f.endsWith('.ts') && !f.startsWith(join('accounts', 'auth')));
    for (const file of modules) {
      const mod = (await import(join(dir, file))) as Record<string, unknown>;
      exported.push(...Object.keys(mod));
    }
    const known = new Set([...Object.keys(USE_CASES), RESOLVE, ...AUTHENTICATION, ...Object.keys(NOT_USE_CASES)]);
    expect(exported.filter((name) => !known.has(name))).toEqual([]);
    // And no list names something that is gone.
    expect([...known].filter((name) => !exported.includes(name))).toEqual([]);
  });
});
