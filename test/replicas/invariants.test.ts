import { getAddress } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Decision } from '../../gen/paypolicy/v1/admin_pb.js';
import { AgentStatus } from '../../gen/paypolicy/v1/payment_policy_pb.js';
import { createAgent, createKey } from '../helpers/admin.js';
import {
  listAllTransactions, postSign, recoverAuthorizationSigner, setPolicy, usdToMicros, type SignBody, type WireAuthorization,
} from '../helpers/payments.js';
import { postSignRetrying, startCluster, type Cluster } from '../helpers/replicas.js';

/**
 * Invariants across replicas (README, "Tested with three replicas"): three real `paypolicy serve` processes on one
 * PostgreSQL database, requests spread over all of them.
 */

const RECIPIENT = '0x1111111111111111111111111111111111111111';

let c: Cluster;
let treasury: string;

beforeAll(async () => {
  c = await startCluster({
    replicas: 3,
    // A 1,000-way race is the point here, not admission: every request gets in and may wait.
    args: ['--max-in-flight', '1000', '--max-sign-queue', '1000', '--max-queue-ms', '30000'],
  });
  treasury = getAddress(c.bootstrap.treasury_address);
}, 120_000);
afterAll(async () => c?.close(), 60_000);

const url = (i: number) => c.replicas[i % c.replicas.length]!.url;

function eip3009(agentId: string, amountUsd: string): SignBody {
  return { agent_id: agentId, type: 'eip3009', chain_id: 8453, recipient_address: RECIPIENT, amount_usd: amountUsd };
}

async function freshAgent(name: string, capUsd: string, thresholdUsd: string): Promise<string> {
  const agentId = await createAgent(c.admin(0), c.bootstrap.org_id, name);
  await setPolicy(c.admin(1), agentId, { allowlist: [RECIPIENT], capUsd, thresholdUsd });
  return agentId;
}

function errorsOf(): string {
  return c.replicas.map((r) => r.stdout().split('\n').filter((l) => /"level":(50|60)/.test(l)).slice(0, 2).join('\n')).join('\n') || 'no error logged';
}

describe('three replicas on one PostgreSQL', () => {
  test('the spend cap is exact under a 1,000-way race spread over the replicas', async () => {
    // $10.00 / $0.03: 333 payments fit ($9.99); the 334th would reach $10.02.
    const agentId = await freshAgent('race', '10.00', '5');
    // A 503 (out of pooled connections on a loaded machine) wrote nothing: sent again as agents do.
    const urls = c.replicas.map((r) => r.url);
    const answers = await Promise.all(Array.from({ length: 1000 }, (_, i) =>
      postSignRetrying(urls, i, c.bootstrap.api_key, eip3009(agentId, '0.03'), i % 2 === 0 ? `race-${i}` : undefined)));
    expect(answers.filter((a) => a.status >= 500).map((a) => a.text).slice(0, 3), errorsOf()).toEqual([]);
    const ok = answers.filter((a) => a.status === 200);
    expect(ok).toHaveLength(333);
    expect(answers.filter((a) => a.status === 403)).toHaveLength(667);
    // Which replica signed how many is up to the scheduler (on a loaded machine one replica's share
    // can all arrive after the cap is spent, and a retried request may land elsewhere): not checked.
    // Every 200 is in the ledger, signed; nothing else holds the cap; the sum is exactly $9.99.
    const rows = await listAllTransactions(c.admin(2), c.bootstrap.org_id, agentId);
    const signed = rows.filter((t) => t.status === 'signed');
    expect(new Set(signed.map((t) => t.id))).toEqual(new Set(ok.map((a) => a.json.transaction_id as string)));
    expect(rows.filter((t) => t.status === 'signing' || t.status === 'pending_approval' || t.status === 'approved')).toEqual([]);
    expect(signed.reduce((s, t) => s + usdToMicros(t.amountUsd), 0n)).toBe(9_990_000n);
    for (const a of ok.slice(0, 20)) {
      expect(await recoverAuthorizationSigner(a.json.signature, a.json.authorization as WireAuthorization)).toBe(treasury);
    }
  }, 180_000);

  test('one transaction per (agent, Idempotency-Key), whichever replicas the duplicates hit', async () => {
    const agentId = await freshAgent('dupes', '1000', '500');
    const keys = Array.from({ length: 60 }, (_, k) => `dup-${k}`);
    // Five copies of each key, every copy on a different replica than the previous one, all at once.
    // A copy that finds the first still signing on another replica is told 409 in_progress and repeats.
    const send = async (k: number, copy: number) => {
      for (let attempt = 0; ; attempt++) {
        const r = await postSign(url(k + copy), c.bootstrap.api_key, eip3009(agentId, '0.25'), keys[k]);
        if (r.status === 409 && r.json?.code === 'in_progress' && attempt < 100) {
          await new Promise((res) => setTimeout(res, 50));
          continue;
        }
        return r;
      }
    };
    const answers = await Promise.all(keys.flatMap((_, k) => Array.from({ length: 5 }, (_, copy) => send(k, copy).then((r) => ({ k, r })))));
    expect(answers.filter(({ r }) => r.status !== 200).map(({ r }) => r.text).slice(0, 3), errorsOf()).toEqual([]);
    for (let k = 0; k < keys.length; k++) {
      const mine = answers.filter((a) => a.k === k).map((a) => a.r.json);
      expect(new Set(mine.map((j) => j.transaction_id)).size).toBe(1);
      expect(new Set(mine.map((j) => j.signature)).size).toBe(1);
      expect(mine.filter((j) => j.idempotent === false)).toHaveLength(1);
    }
    const rows = await listAllTransactions(c.admin(0), c.bootstrap.org_id, agentId);
    expect(rows).toHaveLength(keys.length);
    expect(rows.every((t) => t.status === 'signed')).toBe(true);
  }, 120_000);

  test('an approval is decided once and collected once, whichever replicas decide and collect', async () => {
    const agentId = await freshAgent('approvals', '100', '1');
    const requests = await Promise.all(Array.from({ length: 12 }, (_, i) => postSign(url(i), c.bootstrap.api_key, eip3009(agentId, '2'), `apr-${i}`)));
    expect(requests.map((r) => r.status)).toEqual(Array(12).fill(202));
    for (const [i, r] of requests.entries()) {
      const id = r.json.approval_request_id as string;
      // Three operators on three replicas decide at once: one approve, two deny.
      const decisions = await Promise.allSettled([0, 1, 2].map((j) => c.admin((i + j) % 3).client.decideApproval(
        { id, decision: j === 0 ? Decision.APPROVE : Decision.DENY, note: `op${j}`, decidedBy: `op${j}` }, c.admin(0).auth)));
      const won = decisions.filter((d) => d.status === 'fulfilled');
      expect(won, JSON.stringify(decisions.map((d) => d.status === 'rejected' ? String(d.reason) : 'ok'))).toHaveLength(1);
      // The agent repeats its request on every replica at once: at most one signature, the same to all.
      const collected = await Promise.all([0, 1, 2].map(async (j) => {
        for (let attempt = 0; ; attempt++) {
          const a = await postSign(url(i + j), c.bootstrap.api_key, eip3009(agentId, '2'), `apr-${i}`);
          if (a.status === 409 && a.json?.code === 'in_progress' && attempt < 100) {
            await new Promise((res) => setTimeout(res, 50));
            continue;
          }
          return a;
        }
      }));
      const statuses = new Set(collected.map((a) => a.status));
      expect(statuses.size, collected.map((a) => a.text).join('\n')).toBe(1);
      if (collected[0]!.status === 200) expect(new Set(collected.map((a) => a.json.signature)).size).toBe(1);
      else expect(collected[0]!.status).toBe(403);
    }
    const rows = await listAllTransactions(c.admin(1), c.bootstrap.org_id, agentId);
    expect(rows).toHaveLength(12);
    expect(rows.every((t) => t.status === 'signed' || t.status === 'denied')).toBe(true);
  }, 120_000);

  test('a revoked key, a paused agent and a changed policy take effect on the next request on every replica', async () => {
    const agentId = await freshAgent('fresh', '100', '50');
    const key = await createKey(c.admin(0), c.bootstrap.org_id, 'test', 'fresh');
    // Each replica has served this key and agent (anything a replica might remember is warm).
    for (let i = 0; i < 3; i++) expect((await postSign(url(i), key.plaintext, eip3009(agentId, '0.01'))).status).toBe(200);

    // Policy change on replica 0: the recipient is no longer allowed; replicas 1 and 2 deny at once.
    await setPolicy(c.admin(0), agentId, { allowlist: ['0x2222222222222222222222222222222222222222'], capUsd: '100', thresholdUsd: '50' });
    for (const i of [1, 2]) {
      const r = await postSign(url(i), key.plaintext, eip3009(agentId, '0.01'));
      expect(r.status, r.text).toBe(403);
      expect(r.json.reason).toMatch(/allowlist/i);
    }
    // A cap lowered on replica 0 to what is already spent ($0.03): replica 2 refuses the next cent.
    await setPolicy(c.admin(0), agentId, { allowlist: [RECIPIENT], capUsd: '0.03', thresholdUsd: '50' });
    expect((await postSign(url(2), key.plaintext, eip3009(agentId, '0.01'))).json.reason).toMatch(/Spend cap/);
    await setPolicy(c.admin(1), agentId, { allowlist: [RECIPIENT], capUsd: '100', thresholdUsd: '50' });
    expect((await postSign(url(0), key.plaintext, eip3009(agentId, '0.01'))).status).toBe(200);

    // Paused on replica 1: replicas 0 and 2 refuse the next request.
    await c.admin(1).client.updateAgent({ agentId, status: AgentStatus.PAUSED }, c.admin(1).auth);
    for (const i of [0, 2]) {
      const r = await postSign(url(i), key.plaintext, eip3009(agentId, '0.01'));
      expect(r.status, r.text).toBe(403);
      expect(r.json.reason).toMatch(/paused/i);
    }
    await c.admin(2).client.updateAgent({ agentId, status: AgentStatus.ACTIVE }, c.admin(2).auth);
    expect((await postSign(url(1), key.plaintext, eip3009(agentId, '0.01'))).status).toBe(200);

    // Revoked on replica 2: replicas 0 and 1 refuse the key on its next request.
    await c.admin(2).client.revokeApiKey({ id: key.id }, c.admin(2).auth);
    for (const i of [0, 1, 2]) expect((await postSign(url(i), key.plaintext, eip3009(agentId, '0.01'))).status).toBe(401);
  }, 60_000);
});
