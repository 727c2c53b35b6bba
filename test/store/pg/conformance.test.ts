import { parseLimits } from '../../../src/domain/limits.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Agent } from '../../../src/domain/types.js';
import { createAgentStore } from '../../../src/store/agents.js';
import { createApiKeyStore } from '../../../src/store/apiKeys.js';
import { createApprovalStore } from '../../../src/store/approvals.js';
import { createDashboardSessionStore } from '../../../src/store/dashboardSessions.js';
import { createDashboardUserStore } from '../../../src/store/dashboardUsers.js';
import { openDatabase, type Db } from '../../../src/store/db.js';
import { createLoginFailureStore } from '../../../src/store/loginFailures.js';
import { CAP_BUCKETS_UNION, SQLITE_ONLY_TABLES } from '../../../src/store/migrations/0012_cap_buckets_hot.js';
import { createOrganizationStore } from '../../../src/store/organizations.js';
import { createPaymentStore } from '../../../src/store/payments.js';
import type { PaymentRow, StoreTables } from '../../../src/store/port.js';
import { asyncTables } from '../../../src/store/syncTables.js';
import { createServiceStore } from '../../../src/store/services.js';
import { createSettingsStore } from '../../../src/store/settings.js';
import { createSpendStore } from '../../../src/store/spend.js';
import { createTransactionStore } from '../../../src/store/transactions.js';
import { createTreasuryFundsStore } from '../../../src/store/treasuryFunds.js';
import { createPgStore, type PgStore } from '../../../src/store/pg/store.js';
import { attributeResource } from '../../../src/domain/attribution.js';
import { createTestDatabase, type TestDatabase } from '../../helpers/pgDatabase.js';

/**
 * Conformance: one script of operations over every table group, run against the SQLite modules
 * (through the store's async wrapper, syncTables.ts) and the PostgreSQL ones; every result must be equal, types
 * included (bigint stays bigint, number stays number), and so must every table's rows afterwards.
 */

function sqliteTables(db: Db): StoreTables {
  return asyncTables({
    organizations: createOrganizationStore(db), apiKeys: createApiKeyStore(db), agents: createAgentStore(db),
    services: createServiceStore(db), transactions: createTransactionStore(db), payments: createPaymentStore(db),
    approvals: createApprovalStore(db), settings: createSettingsStore(db), spend: createSpendStore(db),
    dashboardUsers: createDashboardUserStore(db), dashboardSessions: createDashboardSessionStore(db),
    loginFailures: createLoginFailureStore(db), treasuryFunds: createTreasuryFundsStore(db),
  });
}

const A = 'org_a';
const B = 'org_b';
const uuid = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;

function agent(id: string, orgId: string, createdAt: number, cap = 1_000_000n): Agent {
  return {
    id, orgId, name: `agent ${id}`, status: 'active', createdAt, updatedAt: createdAt, lastPingAt: null,
    policy: { allowlist: ['0xaa', 'example.com'], spendCapMicros: cap, approvalThresholdMicros: 250_000n, maxNetworkFeeWei: 10n ** 15n, maxPerPaymentMicros: 400_000n, limits: [], updatedAt: createdAt },
  };
}

function payment(n: number, over: Partial<PaymentRow> & { status: 'signing' | 'signed' | 'pending_approval' | 'denied' }): PaymentRow & { status: 'signing' | 'signed' | 'pending_approval' | 'denied' } {
  return {
    id: uuid(n), orgId: A, agentId: 'agt_1', type: 'eip3009', chainId: 8453, recipient: '0x' + '22'.repeat(20), amountMicros: 10_000n,
    reason: '', serviceSlug: '', resourceUrl: 'https://example.com/r', idempotencyKey: `key-${n}`, requestHash: `hash-${n}`, request: '{"n":1}',
    result: null, approvalId: null, createdAt: 1_000 + n, ...over,
  };
}

/** The script: every method of every table group, with the edge cases that differ most easily between engines. */
async function script(t: StoreTables): Promise<Array<[string, unknown]>> {
  const log: Array<[string, unknown]> = [];
  const rec = async (label: string, p: Promise<unknown>) => {
    try {
      log.push([label, await p]);
    } catch (err) {
      // Constraint messages differ between engines; the trigger messages are the same on both.
      const m = (err as Error).message;
      log.push([label, { error: /registry|transaction state|no signing row/.test(m) ? m.replace(/^.*?(registry|transaction state|no signing row)/, '$1') : 'constraint' }]);
    }
  };

  // organizations
  await rec('org.insert', t.organizations.insert({ id: A, name: 'Alpha', approvalWindowSeconds: 3600, createdAt: 10 }));
  await rec('org.insert b', t.organizations.insert({ id: B, name: 'Beta', approvalWindowSeconds: 60, createdAt: 5 }));
  await rec('org.insert dup', t.organizations.insert({ id: A, name: 'dup', approvalWindowSeconds: 1, createdAt: 1 }));
  await rec('org.get', t.organizations.get(A));
  await rec('org.get missing', t.organizations.get('org_none'));
  await rec('org.update', t.organizations.update(B, 'Beta 2', 120));
  await rec('org.setLimits', t.organizations.setLimits(B, parseLimits([{ window: '1h', max_usd: '5', max_count: 3 }, { window: '366d', max_network_fee_wei: '1', recipient: 'weather' }])));
  await rec('org.get with limits', t.organizations.get(B));
  await rec('org.insertTreasury', t.organizations.insertTreasury(A, '0xTreasury', Buffer.from([0, 1, 2, 255]), 11));
  await rec('org.treasuryKey', t.organizations.treasuryKey(A));
  await rec('org.treasuryKey missing', t.organizations.treasuryKey(B));
  await rec('org.list', t.organizations.list());

  // apiKeys
  const key = (id: string, orgId: string, createdAt: number) => ({ id, orgId, mode: 'live' as const, prefix: `pp_${id}`, label: `label ${id}`, createdAt, revokedAt: null });
  await rec('key.insert 1', t.apiKeys.insert(key('key_1', A, 20), Buffer.from('hash-1')));
  await rec('key.insert 2', t.apiKeys.insert(key('key_2', A, 20), Buffer.from('hash-2')));
  await rec('key.insert 3', t.apiKeys.insert(key('key_3', B, 21), Buffer.from('hash-3')));
  await rec('key.insert dup hash', t.apiKeys.insert(key('key_4', B, 22), Buffer.from('hash-3')));
  await rec('key.findByHash', t.apiKeys.findByHash(Buffer.from('hash-1')));
  await rec('key.findByHash unknown', t.apiKeys.findByHash(Buffer.from('nope')));
  await rec('key.get', t.apiKeys.get('key_2'));
  await rec('key.listByOrg', t.apiKeys.listByOrg(A));
  await rec('key.revoke', t.apiKeys.revoke('key_1', 30));
  await rec('key.revoke again', t.apiKeys.revoke('key_1', 31));
  await rec('key.findByHash revoked', t.apiKeys.findByHash(Buffer.from('hash-1')));

  // agents
  await rec('agent.insert 1', t.agents.insert(agent('agt_1', A, 40)));
  await rec('agent.insert 2', t.agents.insert(agent('agt_2', A, 40, 5n)));
  await rec('agent.insert 3', t.agents.insert(agent('agt_3', B, 41)));
  await rec('agent.get', t.agents.get('agt_1'));
  await rec('agent.get missing', t.agents.get('agt_none'));
  await rec('agent.update', t.agents.update('agt_2', 'renamed', 'paused', 42));
  await rec('agent.setPolicy', t.agents.setPolicy('agt_2', { allowlist: [], spendCapMicros: 9_007_199_254_740_993n, approvalThresholdMicros: 0n, maxNetworkFeeWei: 10n ** 21n, maxPerPaymentMicros: 9_007_199_254_740_993n, limits: [], updatedAt: 43 }));
  await rec('agent.touchPing', t.agents.touchPing('agt_3', 44));
  await rec('agent.listByOrg', t.agents.listByOrg(A));
  await rec('agent.get 3', t.agents.get('agt_3'));

  // services
  const svc = (id: string, slug: string, name = slug) => ({
    id, slug, name, description: 'd', category: 'data', logoUrl: 'https://l', docsUrl: 'https://d',
    paymentMethods: [{ kind: 'x402' }] as never, endpoints: [{ url: `https://${slug}.example/api` }] as never,
  });
  await rec('svc.upsert shared', t.services.upsert(svc(uuid(900), 'weather'), null, 50));
  await rec('svc.upsert shared 2', t.services.upsert(svc(uuid(901), 'alpha'), null, 50));
  await rec('svc.upsert private', t.services.upsert(svc(uuid(902), 'inhouse'), A, 51));
  await rec('svc.upsert private b', t.services.upsert(svc(uuid(903), 'inhouse'), B, 51));
  await rec('svc.upsert update keeps id', t.services.upsert(svc(uuid(904), 'weather', 'Weather 2'), null, 52));
  await rec('svc.upsert private over shared', t.services.upsert(svc(uuid(905), 'weather'), A, 53));
  await rec('svc.upsert shared over private', t.services.upsert(svc(uuid(906), 'inhouse'), null, 53));
  await rec('svc.get', t.services.get('weather', null));
  await rec('svc.get wrong scope', t.services.get('weather', A));
  await rec('svc.summaries shared', t.services.summaries(null));
  await rec('svc.summaries private', t.services.summaries(A));
  await rec('svc.range shared', t.services.range(null, 'alpha', 'weather'));
  await rec('svc.range private', t.services.range(A, 'a', 'z'));
  await rec('svc.visibleSummaries', t.services.visibleSummaries(A));
  const paid = { ...svc(uuid(907), 'paid'), paymentMethods: [{ realm: '', baseUrl: 'https://paid.example/v1', protocol: 'x402' }, { realm: '', baseUrl: '', protocol: 'mpp' }] };
  await rec('svc.upsert private with base URLs', t.services.upsert(paid, A, 54));
  await rec('svc.usage', t.services.usage(A));
  await rec('svc.usage none', t.services.usage(B));
  await rec('svc.visibleBytes', t.services.visibleBytes(A, ['paid', 'weather', 'inhouse', 'nope']));
  await rec('svc.visibleBytes none', t.services.visibleBytes(B, ['paid']));
  await rec('svc.visibleIndex', t.services.visibleIndex(A).then((index) => [
    attributeResource(index, ['https://paid.example/v1/x'], 'x402', null, ['weather']),
    attributeResource(index, ['https://other.example/'], 'x402', null, ['weather', 'nope']),
  ]));
  await rec('svc.privateHolders', t.services.privateHolders('inhouse'));
  await rec('svc.delete', t.services.delete('inhouse', B));
  await rec('svc.delete missing', t.services.delete('inhouse', B));
  await rec('svc.visibleSummaries b', t.services.visibleSummaries(B));

  // transactions (pings) and listing
  for (let i = 0; i < 5; i++) {
    await rec(`tx.insert ping ${i}`, t.transactions.insert({ id: uuid(100 + i), orgId: A, agentId: i % 2 ? 'agt_1' : 'agt_2', type: 'ping', status: 'recorded',
      chainId: 0, recipient: '', amountMicros: 0n, reason: '', serviceSlug: '', approvalId: null, createdAt: 60 + (i >> 1) }));
  }
  await rec('tx.insert bad state', t.transactions.insert({ id: uuid(199), orgId: A, agentId: 'agt_1', type: 'ping', status: 'failed' as never,
    chainId: 0, recipient: '', amountMicros: 0n, reason: '', serviceSlug: '', approvalId: null, createdAt: 70 }));
  await rec('tx.hasPingBetween', t.transactions.hasPingBetween(A, 'agt_1', 59, 60));
  await rec('tx.hasPingBetween none', t.transactions.hasPingBetween(A, 'agt_1', 61, 62));

  // payments
  await rec('pay.insert signed', t.payments.insert(payment(1, { status: 'signed', result: '{"sig":1}' })));
  await rec('pay.insert signing raw', t.payments.insert(payment(2, { status: 'signing', type: 'raw_transaction' })));
  await rec('pay.insert signing raw 2', t.payments.insert(payment(3, { status: 'signing', type: 'raw_transaction' })));
  await rec('pay.insert pending', t.payments.insert(payment(4, { status: 'pending_approval', approvalId: uuid(500) })));
  await rec('pay.insert pending 2', t.payments.insert(payment(5, { status: 'pending_approval', approvalId: uuid(501) })));
  await rec('pay.insert denied', t.payments.insert(payment(6, { status: 'denied', reason: 'over cap' })));
  await rec('pay.insert keyless', t.payments.insert(payment(7, { status: 'signed', idempotencyKey: null })));
  await rec('pay.insert dup key', t.payments.insert(payment(8, { status: 'signed', idempotencyKey: 'key-1' })));
  await rec('pay.insert big', t.payments.insert(payment(9, { status: 'signed', agentId: 'agt_2', amountMicros: 9_007_199_254_740_993n })));
  await rec('pay.committedSince', t.payments.committedSince('agt_1', 0, 5_000));
  await rec('pay.committedSince big', t.payments.committedSince('agt_2', 0, 5_000));
  await rec('pay.committedSince window', t.payments.committedSince('agt_1', 1_003, 5_000));
  await rec('pay.insert raw with fee', t.payments.insert(payment(10, { status: 'signed', type: 'raw_transaction', feeGwei: 12_345n, rule: null })));
  await rec('pay.insert denied with rule', t.payments.insert(payment(11, { status: 'denied', rule: '{"kind":"max_usd"}' })));
  await rec('pay.windowUses org, agent, recipient', t.payments.windowUses({ orgId: A, now: 5_000, windows: [
    { agentId: null, recipient: null, since: 0 }, { agentId: 'agt_1', recipient: null, since: 1_003 }, { agentId: null, recipient: '0xnobody', since: 0 },
  ] }));
  // Amounts whose sum passes 2^63 micro-USD, one row per agent (each agent's own cap buckets stay in range).
  await rec('agent.insert 4', t.agents.insert(agent('agt_4', B, 42)));
  await rec('pay.insert huge 1', t.payments.insert(payment(40, { status: 'signed', orgId: B, agentId: 'agt_3', amountMicros: 4_000_000_000_000_000_123n })));
  await rec('pay.insert huge 2', t.payments.insert(payment(41, { status: 'signed', orgId: B, agentId: 'agt_4', amountMicros: 6_000_000_000_000_000_456n, feeGwei: 9_000_000_000_000_000_000n })));
  await rec('pay.windowUses past 2^63', t.payments.windowUses({ orgId: B, now: 5_000, windows: [{ agentId: null, recipient: null, since: 0 }, { agentId: 'agt_4', recipient: null, since: 0 }] }));
  await rec('pay.windowUses excluding a row', t.payments.windowUses({ orgId: A, now: 5_000, excludeId: uuid(1), windows: [{ agentId: 'agt_1', recipient: null, since: 0 }] }));
  await rec('pay.requestHistory', t.payments.requestHistory(A, 'agt_1', 0, 100));
  await rec('pay.requestHistory since and limit', t.payments.requestHistory(A, 'agt_1', 1_003, 2));
  await rec('pay.heldByOthers', t.payments.heldByOthers(A, 'agt_2', 0, 100));
  await rec('pay.heldByOthers of agt_1', t.payments.heldByOthers(A, 'agt_1', 1_002, 100));
  await rec('pay.get with rule', t.payments.get(uuid(11)));
  await rec('pay.findByIdempotencyKey', t.payments.findByIdempotencyKey('agt_1', 'key-1'));
  await rec('pay.findByIdempotencyKey missing', t.payments.findByIdempotencyKey('agt_1', 'key-x'));
  await rec('pay.findKeylessById', t.payments.findKeylessById('agt_1', uuid(7)));
  await rec('pay.findKeylessById keyed', t.payments.findKeylessById('agt_1', uuid(1)));
  await rec('pay.get', t.payments.get(uuid(4)));
  await rec('pay.allocateNonce', t.payments.allocateNonce(A, 8453, uuid(2)));
  await rec('pay.allocateNonce 2', t.payments.allocateNonce(A, 8453, uuid(3)));
  await rec('pay.allocateNonce not signing', t.payments.allocateNonce(A, 8453, uuid(1)));
  await rec('pay.nonceCounter', t.payments.nonceCounter(A, 8453));
  await rec('pay.markFailed', t.payments.markFailed(uuid(3), 'node refused', 1_100));
  await rec('pay.markFailed again', t.payments.markFailed(uuid(3), 'node refused', 1_100));
  await rec('pay.settleSigned', t.payments.settleSigned(uuid(2), '{"raw":"0x01"}', 1_101, true));
  await rec('pay.settleSigned again', t.payments.settleSigned(uuid(2), '{"raw":"0x01"}', 1_101, true));
  await rec('pay.unsubmitted', t.payments.unsubmitted(8453, 10));
  await rec('pay.markSubmitted', t.payments.markSubmitted(uuid(2), '0xhash1', 1_102));
  await rec('pay.markSubmitted again', t.payments.markSubmitted(uuid(2), '0xhash1', 1_102));
  await rec('pay.startBroadcastTimer', t.payments.startBroadcastTimer(uuid(2), 1_103));
  await rec('pay.inFlight', t.payments.inFlight(8453, 10));
  await rec('pay.addAttempt', t.payments.addAttempt(uuid(2), { hash: '0xbump1', kind: 'bump', serialized: '0xaa', gas: 21_000n, maxFeePerGas: 10n ** 12n, maxPriorityFeePerGas: 1n, createdAt: 1_104 }));
  await rec('pay.addAttempt same ms', t.payments.addAttempt(uuid(2), { hash: '0xbump0', kind: 'filler', serialized: '0xbb', gas: 21_000n, maxFeePerGas: 2n, maxPriorityFeePerGas: 2n, createdAt: 1_104 }));
  await rec('pay.addAttempt final row', t.payments.addAttempt(uuid(6), { hash: '0xno', kind: 'bump', serialized: '0x', gas: 1n, maxFeePerGas: 1n, maxPriorityFeePerGas: 1n, createdAt: 1 }));
  await rec('pay.attempts', t.payments.attempts(uuid(2)));
  await rec('pay.markAccepted', t.payments.markAccepted(uuid(2), '0xbump1', true, 1_105));
  await rec('pay.markDropped', t.payments.markDropped(uuid(2), 1_106));
  await rec('pay.markMined', t.payments.markMined(uuid(2), { hash: '0xbump1', blockNumber: 12, confirmations: 1, networkFeeWei: '21000000000000' }, 1_107));
  await rec('pay.markConfirmed', t.payments.markConfirmed(uuid(2), { hash: '0xbump1', blockNumber: 12, confirmations: 3, networkFeeWei: '21000000000000' }, 1_108));
  await rec('pay.markConfirmed again', t.payments.markConfirmed(uuid(2), { hash: '0xbump1', blockNumber: 12, confirmations: 3, networkFeeWei: null }, 1_108));
  await rec('pay.noteReason', t.payments.noteReason(uuid(1), 'noted', 1_109));
  await rec('pay.maxSignedNonce', t.payments.maxSignedNonce(A, 8453));
  await rec('pay.maxSignedNonce none', t.payments.maxSignedNonce(B, 8453));
  await rec('pay.raiseNonceFloor', t.payments.raiseNonceFloor(A, 8453, 1));
  await rec('pay.nonceCounter after floor', t.payments.nonceCounter(A, 8453));
  await rec('pay.raiseNonceFloor lower', t.payments.raiseNonceFloor(A, 8453, 0));
  await rec('pay.raiseNonceFloor new chain', t.payments.raiseNonceFloor(A, 1, 7));
  await rec('pay.nonceCounter new chain', t.payments.nonceCounter(A, 1));
  await rec('pay.insert signing raw 3', t.payments.insert(payment(10, { status: 'signing', type: 'raw_transaction' })));
  await rec('pay.allocateNonce reuse', t.payments.allocateNonce(A, 8453, uuid(10)));
  await rec('pay.unminedRaw', t.treasuryFunds.unminedRaw(A, 8453, 0));
  await rec('pay.unminedRaw above', t.treasuryFunds.unminedRaw(A, 8453, 5));

  // A raw row the chain reverted.
  await rec('pay.insert signing raw 4', t.payments.insert(payment(11, { status: 'signing', type: 'raw_transaction' })));
  await rec('pay.allocateNonce 4', t.payments.allocateNonce(A, 8453, uuid(11)));
  await rec('pay.settleSigned 4', t.payments.settleSigned(uuid(11), '{}', 1_200, true));
  await rec('pay.markAccepted 4', t.payments.markAccepted(uuid(11), '0xh4', false, 1_201));
  await rec('pay.markReverted', t.payments.markReverted(uuid(11), { hash: '0xh4', blockNumber: 13, confirmations: 1, networkFeeWei: '5' }, 'receipt status 0', 1_202));
  await rec('pay.markReverted again', t.payments.markReverted(uuid(11), { hash: '0xh4', blockNumber: 13, confirmations: 1, networkFeeWei: '5' }, 'x', 1_202));

  // approvals and the approval moves
  const approval = (n: number, txn: number, expiresAt: number) => ({ id: uuid(n), orgId: A, agentId: 'agt_1', transactionId: uuid(txn), status: 'pending' as const,
    createdAt: 1_000 + n, expiresAt, decidedAt: null, decidedBy: '', note: '' });
  await rec('appr.insert', t.approvals.insert(approval(500, 4, 2_000)));
  await rec('appr.insert 2', t.approvals.insert(approval(501, 5, 1_500)));
  await rec('appr.insert dup txn', t.approvals.insert(approval(502, 5, 1_500)));
  await rec('appr.get', t.approvals.get(uuid(500)));
  await rec('appr.countPending', t.approvals.countPending());
  await rec('appr.due', t.approvals.due(1_600));
  await rec('pay.committedSince overdue', t.payments.committedSince('agt_1', 0, 1_600));
  await rec('pay.heldByOthers pending', t.payments.heldByOthers(A, 'agt_2', 0, 100));
  await rec('pay.windowUses overdue', t.payments.windowUses({ orgId: A, now: 1_600, windows: [{ agentId: 'agt_1', recipient: null, since: 0 }] }));
  await rec('appr.decide', t.approvals.decide(uuid(500), 'approved', 1_300, 'owner@x', 'ok'));
  await rec('appr.decide again', t.approvals.decide(uuid(500), 'denied', 1_301, 'owner@x', ''));
  await rec('pay.markApproved', t.payments.markApproved(uuid(4), 1_300));
  await rec('pay.startSigningFromApproved', t.payments.startSigningFromApproved(uuid(4), '{"fresh":true}', 1_310));
  await rec('pay.releaseSigning approved', t.payments.releaseSigning(uuid(4), 'sign failed', 1_311));
  await rec('pay.get back to approved', t.payments.get(uuid(4)));
  await rec('pay.overdueApproved', t.payments.overdueApproved(1_300));
  await rec('pay.expireApproved early', t.payments.expireApproved(uuid(4), 1_299, 'late', 1_312));
  await rec('pay.startSigningFromApproved 2', t.payments.startSigningFromApproved(uuid(4), '{}', 1_313));
  await rec('pay.reapproveInterrupted', t.payments.reapproveInterrupted(1_314));
  await rec('pay.denyApproved', t.payments.denyApproved(uuid(4), 'offer changed', 1_315));
  await rec('appr.expire', t.approvals.expire(uuid(501)));
  await rec('appr.expire again', t.approvals.expire(uuid(501)));
  await rec('pay.releasePending expired', t.payments.releasePending(uuid(5), 'expired', 'no decision', 1_316));
  await rec('pay.releasePending again', t.payments.releasePending(uuid(5), 'denied', 'x', 1_316));
  await rec('pay.insert pending 3', t.payments.insert(payment(12, { status: 'pending_approval', approvalId: uuid(503) })));
  await rec('appr.insert 3', t.approvals.insert(approval(503, 12, 9_000)));
  await rec('appr.decide 3', t.approvals.decide(uuid(503), 'approved', 1_400, 'u', ''));
  await rec('pay.startSigningApproved', t.payments.startSigningApproved(uuid(12), 1_400));
  await rec('pay.releaseSigning failed', t.payments.releaseSigning(uuid(1), 'x', 1_401));
  await rec('pay.releaseSigning approved 3', t.payments.releaseSigning(uuid(12), 'x', 1_402));
  await rec('pay.startSigningFromApproved 3', t.payments.startSigningFromApproved(uuid(12), '{}', 1_403));
  await rec('pay.failInterrupted', t.payments.failInterrupted(1_404));
  await rec('pay.reopenFailedApprovals', t.payments.reopenFailedApprovals(1_000, 'too old', 1_405));
  await rec('pay.reopenFailedApprovals expire', t.payments.reopenFailedApprovals(2_000, 'too old', 1_406));
  await rec('appr.listByOrg', t.approvals.listByOrg(A));
  await rec('appr.listByOrg status', t.approvals.listByOrg(A, 'approved'));
  await rec('appr.countPending after', t.approvals.countPending());
  await rec('pay.newestTime', t.payments.newestTime());

  // listing after all of it
  await rec('tx.list', t.transactions.list({ orgId: A, limit: 50 }));
  await rec('tx.list agent+status', t.transactions.list({ orgId: A, agentId: 'agt_1', status: 'signed', limit: 50 }));
  await rec('tx.list range', t.transactions.list({ orgId: A, from: 61, to: 1_005, limit: 50 }));
  await rec('tx.list page', t.transactions.list({ orgId: A, before: { createdAt: 61, id: uuid(103) }, limit: 2 }));

  // settings, spend
  await rec('set.get missing', t.settings.get('admin'));
  await rec('set.set', t.settings.set('admin', 'h1'));
  await rec('set.set again', t.settings.set('admin', 'h2'));
  await rec('set.get', t.settings.get('admin'));
  await rec('spend.bucketsSince', t.spend.bucketsSince('agt_1', 900, 50, 8));
  await rec('spend.bucketsSince big', t.spend.bucketsSince('agt_2', 0, 1_000, 3));
  await rec('spend.bucketsSince fractional', t.spend.bucketsSince('agt_1', 900.7, 49.9, 8));

  // dashboard users, sessions, login failures
  const pw = (n: number) => ({ salt: Buffer.from([n, 0, 255]), hash: Buffer.from(`hash${n}`), params: 'scrypt:16384:8:1' });
  const user = (id: string, orgId: string, email: string, role: 'owner' | 'approver' | 'viewer', createdAt: number) => ({ id, orgId, email, role, createdAt, disabled: false });
  await rec('user.insert', t.dashboardUsers.insert(user('usr_1', A, 'a@x.io', 'owner', 80), pw(1)));
  await rec('user.insert 2', t.dashboardUsers.insert(user('usr_2', A, 'b@x.io', 'owner', 80), pw(2)));
  await rec('user.insert dup email', t.dashboardUsers.insert(user('usr_3', B, 'a@x.io', 'viewer', 81), pw(3)));
  await rec('user.insert bad role', t.dashboardUsers.insert(user('usr_4', B, 'c@x.io', 'root' as never, 81), pw(4)));
  await rec('user.findForSignIn', t.dashboardUsers.findForSignIn('a@x.io'));
  await rec('user.getByEmail', t.dashboardUsers.getByEmail('b@x.io'));
  await rec('user.get missing', t.dashboardUsers.get('usr_9'));
  await rec('user.countEnabledOwners', t.dashboardUsers.countEnabledOwners(A));
  await rec('user.setDisabled', t.dashboardUsers.setDisabled('usr_2', true));
  await rec('user.countEnabledOwners after', t.dashboardUsers.countEnabledOwners(A));
  await rec('user.setPassword', t.dashboardUsers.setPassword('usr_1', pw(7)));
  await rec('user.listByOrg', t.dashboardUsers.listByOrg(A));
  const session = (n: number, userId: string, expiresAt: number) => ({ tokenHash: Buffer.from(`tok${n}`), userId, csrfToken: `csrf${n}`, createdAt: 90, expiresAt });
  await rec('sess.insert', t.dashboardSessions.insert(session(1, 'usr_1', 100)));
  await rec('sess.insert 2', t.dashboardSessions.insert(session(2, 'usr_1', 200)));
  await rec('sess.insert 3', t.dashboardSessions.insert(session(3, 'usr_2', 300)));
  await rec('sess.insert unknown user', t.dashboardSessions.insert(session(4, 'usr_9', 300)));
  await rec('sess.get', t.dashboardSessions.get(Buffer.from('tok2')));
  await rec('sess.deleteExpired', t.dashboardSessions.deleteExpired(100));
  await rec('sess.delete', t.dashboardSessions.delete(Buffer.from('tok2')));
  await rec('sess.delete missing', t.dashboardSessions.delete(Buffer.from('tok2')));
  await rec('user.delete with session', t.dashboardUsers.delete('usr_2'));
  await rec('sess.deleteByUser', t.dashboardSessions.deleteByUser('usr_2'));
  await rec('user.delete', t.dashboardUsers.delete('usr_2'));
  await rec('user.delete missing', t.dashboardUsers.delete('usr_2'));
  for (let i = 0; i < 6; i++) {
    await rec(`fail.put ${i}`, t.loginFailures.put({ email: `e${i}@x.io`, failures: i + 1, windowStart: 100 + i, lockedUntil: i === 1 ? 10_000 : 0 }));
  }
  await rec('fail.put update', t.loginFailures.put({ email: 'e0@x.io', failures: 9, windowStart: 99, lockedUntil: 0 }));
  await rec('fail.get', t.loginFailures.get('e0@x.io'));
  await rec('fail.get missing', t.loginFailures.get('zz@x.io'));
  await rec('fail.clear', t.loginFailures.clear('e5@x.io'));
  await rec('fail.prune', t.loginFailures.prune(101, 500));
  await rec('fail.prune max', t.loginFailures.prune(0, 500, 2));
  await rec('fail.prune none', t.loginFailures.prune(0, 500));
  return log;
}

/** Every row of every table (schema_migrations aside), values as text, bytes as hex, rows sorted. */
type Dump = Record<string, string[]>;
const norm = (v: unknown) => (v === null ? null : Buffer.isBuffer(v) ? `x${v.toString('hex')}` : String(v));

function dumpSqlite(db: Db): Dump {
  const out: Dump = {};
  const tables = (db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name != 'schema_migrations' ORDER BY name`).all() as { name: string }[])
    .map((r) => r.name).filter((name) => !SQLITE_ONLY_TABLES.includes(name));
  for (const table of tables) {
    // SQLite's cap_buckets is two tables (migration 0012): PostgreSQL's one holds their union.
    const rows = db.prepare(`SELECT * FROM ${table === 'cap_buckets' ? CAP_BUCKETS_UNION : table}`).safeIntegers(true).all() as Record<string, unknown>[];
    out[table] = rows.map((r) => JSON.stringify(Object.keys(r).sort().map((k) => [k, norm(r[k])]))).sort();
  }
  return out;
}

async function dumpPg(url: string, tables: string[]): Promise<Dump> {
  const c = new pg.Client(url);
  await c.connect();
  try {
    const out: Dump = {};
    for (const table of tables) {
      const rows = (await c.query(`SELECT * FROM ${table}`)).rows as Record<string, unknown>[];
      out[table] = rows.map((r) => {
        if (table === 'chain_attempts') delete r.seq;
        return JSON.stringify(Object.keys(r).sort().map((k) => [k, norm(r[k])]));
      }).sort();
    }
    return out;
  } finally {
    await c.end();
  }
}

describe('PostgreSQL table groups conform to the SQLite ones', () => {
  let dir: string;
  let lite: Db;
  let d: TestDatabase;
  let store: PgStore;
  let liteLog: Array<[string, unknown]>;
  let pgLog: Array<[string, unknown]>;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'paypolicy-conformance-'));
    lite = openDatabase(join(dir, 'db.sqlite'));
    d = await createTestDatabase();
    store = await createPgStore({ connectionString: d.url, poolSize: 2 });
    liteLog = await script(sqliteTables(lite));
    // On the pool, each statement its own transaction, as SQLite's calls outside a transaction are:
    // the script provokes constraint errors on purpose, and PostgreSQL (unlike SQLite) aborts the
    // whole transaction after a failed statement (write() then rejects, see unitOfWork.test.ts).
    pgLog = await script(store);
  }, 60_000);
  afterAll(async () => {
    lite?.close();
    rmSync(dir, { recursive: true, force: true });
    await store?.close();
    await d?.drop();
  });

  test('behavior: every operation gives the same result, types included', () => {
    const errors = liteLog.filter(([, r]) => typeof r === 'object' && r !== null && 'error' in r).map(([label]) => label);
    console.log(`${liteLog.length} operations, ${errors.length} refused on both: ${errors.join(', ')}`);
    expect(pgLog.map(([label]) => label)).toEqual(liteLog.map(([label]) => label));
    for (let i = 0; i < liteLog.length; i++) expect(pgLog[i], liteLog[i]![0]).toEqual(liteLog[i]);
    // Equal on both, and exact: sums past 2^63 are neither refused nor wrapped.
    expect(liteLog.find(([label]) => label === 'pay.windowUses past 2^63')![1]).toEqual([
      { micros: 10_000_000_000_000_000_579n, count: 2, feeGwei: 9_000_000_000_000_000_000n },
      { micros: 6_000_000_000_000_000_456n, count: 1, feeGwei: 9_000_000_000_000_000_000n },
    ]);
  });

  test('behavior: afterwards every table holds the same rows', async () => {
    const liteDump = dumpSqlite(lite);
    expect(await dumpPg(d.url, Object.keys(liteDump))).toEqual(liteDump);
  });
});
