import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AdminService, Decision } from '../../gen/paypolicy/v1/admin_pb.js';
import { TRANSACTION_STATES, holdsCap, isTransactionState } from '../../src/domain/transactionState.js';
import { createAgent, type Admin } from '../helpers/admin.js';
import { connectClient } from '../helpers/clients.js';
import { postSign, setPolicy, type SignBody } from '../helpers/payments.js';
import { bearer } from '../helpers/rpc.js';
import { rest, startTestServer, type TestServer } from '../helpers/server.js';

/**
 * After a mixed workload on the real server (allowed, denied and pending payments of several
 * types, approvals approved, denied and left to expire, repeats that collect, pings), every ledger
 * row's holds_cap is exactly what its state says (src/domain/transactionState.ts), and the cap sum
 * is the sum over the states that hold the cap.
 */
const T0 = Date.parse('2030-05-06T07:08:09.000Z');
const HOUR = 3600_000;
const RECIPIENT = '0x2222222222222222222222222222222222222222';
const ELSEWHERE = '0x3333333333333333333333333333333333333333';

let clock = T0;
let s: TestServer;
let admin: Admin;

beforeAll(async () => {
  s = await startTestServer({ now: () => clock, logLevel: 'warn' });
  admin = { client: connectClient(AdminService, s.url), auth: bearer(s.bootstrap.admin_token) };
});
afterAll(async () => s.close());

const pay = (agentId: string, type: 'eip3009' | 'permit2' | 'raw_transaction', usd: string, to = RECIPIENT): SignBody => ({
  agent_id: agentId, type, chain_id: 8453, recipient_address: to, amount_usd: usd, ...(type === 'raw_transaction' ? { payload: {} } : {}),
});

describe('holds_cap follows the state machine', () => {
  test('behavior: after a mixed workload every row holds the cap exactly when its state does', async () => {
    const orgId = s.bootstrap.org_id;
    const key = s.bootstrap.api_key;
    const agents = await Promise.all(['mix-a', 'mix-b'].map((n) => createAgent(admin, orgId, n)));
    for (const agentId of agents) await setPolicy(admin, agentId, { allowlist: [RECIPIENT], capUsd: '20', thresholdUsd: '2' });
    const approvals: string[] = [];
    let n = 0;
    for (const agentId of agents) {
      for (const type of ['eip3009', 'permit2', 'raw_transaction'] as const) {
        for (const usd of ['0.5', '1', '3', '4']) {
          const r = await postSign(s.url, key, pay(agentId, type, usd), `k-${++n}`);
          expect([200, 202, 403], r.text).toContain(r.status);
          if (r.status === 202) approvals.push(r.json.approval_request_id);
        }
        expect((await postSign(s.url, key, pay(agentId, type, '0.1', ELSEWHERE), `k-${++n}`)).status).toBe(403);
      }
      expect((await rest(s.url, 'POST', '/api/ping', { key, body: { agent_id: agentId } })).status).toBe(200);
    }
    expect(approvals.length).toBeGreaterThanOrEqual(6);
    // A third approved, a third denied, the rest left to expire.
    for (const [i, id] of approvals.entries()) {
      if (i % 3 === 2) continue;
      await admin.client.decideApproval({ id, decision: i % 3 === 0 ? Decision.APPROVE : Decision.DENY, note: '' }, admin.auth).catch(() => undefined);
    }
    clock += 2 * HOUR;
    // Reading the approvals sweeps: the undecided ones expire and release their holds.
    await admin.client.listApprovals({ orgId }, admin.auth);
    for (const agentId of agents) expect((await postSign(s.url, key, pay(agentId, 'eip3009', '0.25'), `after-${agentId}`)).status).toBe(200);

    const rows = s.app.store.db.prepare('SELECT agent_id, status, holds_cap, amount_micros, cap_at FROM transactions WHERE org_id = ?')
      .all(orgId) as Array<{ agent_id: string; status: string; holds_cap: number; amount_micros: number; cap_at: number }>;
    const seen = new Set(rows.map((r) => r.status));
    for (const state of ['signed', 'denied', 'expired', 'recorded'] as const) expect(seen, state).toContain(state);
    for (const r of rows) {
      expect(isTransactionState(r.status), r.status).toBe(true);
      expect(r.holds_cap, `${r.status} holds_cap`).toBe(holdsCap(r.status as (typeof TRANSACTION_STATES)[number]) ? 1 : 0);
    }
    for (const agentId of agents) {
      const expected = rows.filter((r) => r.agent_id === agentId && holdsCap(r.status as (typeof TRANSACTION_STATES)[number]) && r.cap_at > clock - 24 * HOUR)
        .reduce((sum, r) => sum + BigInt(r.amount_micros), 0n);
      expect(s.app.store.payments.committedSince(agentId, clock - 24 * HOUR, clock)).toBe(expected);
      expect(expected).toBeGreaterThan(0n);
    }
  });
});
