import { afterAll, beforeAll, expect, test } from 'vitest';
import pg from 'pg';
import { Decision } from '../../gen/paypolicy/v1/admin_pb.js';
import { AgentStatus } from '../../gen/paypolicy/v1/payment_policy_pb.js';
import { createAgent, upsertService } from '../helpers/admin.js';
import { postSign, setPolicy, type SignBody } from '../helpers/payments.js';
import { PAY_TO, startX402Peer, type X402Peer } from '../helpers/peers.js';
import { startCluster, type Cluster } from '../helpers/replicas.js';

/**
 * A payment's deciding write on replica B (a new payment, an approval, the collection of an
 * approved paywall payment) and a pause or policy change on replica A, made to overlap exactly:
 * a trigger, installed in this test's database only, holds B's write at its first ledger row
 * change, after it has read the agent, until the test lets it go. A change on A acknowledged
 * while B waits there would make B's later commit a payment decided on a row the operator had
 * already been told was replaced. The agent read in the write must hold the change back instead
 * (FOR SHARE), so the change is acknowledged only after B's payment, or B decides on the change.
 */

const RECIPIENT = '0x1111111111111111111111111111111111111111';
const GATE = [777, 1] as const;

let c: Cluster;
let db: pg.Client;
let x402: X402Peer;

beforeAll(async () => {
  x402 = await startX402Peer();
  c = await startCluster({ replicas: 2, args: ['--dev'], env: { PAYPOLICY_PROBE_ALLOW_HOSTS: x402.host } });
  db = new pg.Client({ connectionString: c.db.url });
  await db.connect();
  await db.query(`CREATE TABLE pp_test_gate (agent_id TEXT PRIMARY KEY)`);
  await db.query(`CREATE FUNCTION pp_test_gate() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF EXISTS (SELECT 1 FROM pp_test_gate WHERE agent_id = NEW.agent_id) THEN PERFORM pg_advisory_xact_lock(${GATE[0]}, ${GATE[1]}); END IF;
      RETURN NEW;
    END $$`);
  await db.query(`CREATE TRIGGER pp_test_gate BEFORE INSERT OR UPDATE ON transactions FOR EACH ROW EXECUTE FUNCTION pp_test_gate()`);
}, 120_000);
afterAll(async () => {
  await db?.end().catch(() => {});
  await c?.close();
  await x402?.close();
}, 60_000);

async function freshAgent(name: string, thresholdUsd: string): Promise<string> {
  const agentId = await createAgent(c.admin(0), c.bootstrap.org_id, name);
  await setPolicy(c.admin(0), agentId, { allowlist: [RECIPIENT, PAY_TO], capUsd: '1000', thresholdUsd });
  return agentId;
}

const eip3009 = (agentId: string): SignBody => ({ agent_id: agentId, type: 'eip3009', chain_id: 8453, recipient_address: RECIPIENT, amount_usd: '0.01' });
const paywall = (agentId: string): SignBody => ({ agent_id: agentId, type: 'x402', chain_id: 8453, recipient_address: PAY_TO, amount_usd: 0.5, payload: { resource_url: x402.url('/approval') } });

type Outcome = { ok: boolean; detail: string };

/**
 * Runs `decide` (on replica 1) held at its first ledger row change, then `change` (on replica 0);
 * reports whether the change was acknowledged while the decision was still held, and both outcomes.
 */
async function overlap(agentId: string, decide: () => Promise<Outcome>, change: () => Promise<unknown>): Promise<{ ackedWhileHeld: boolean; decided: Outcome }> {
  await db.query(`SELECT pg_advisory_lock($1, $2)`, [...GATE]);
  await db.query(`INSERT INTO pp_test_gate VALUES ($1)`, [agentId]);
  let released = false;
  try {
    const deciding = decide();
    for (let i = 0; ; i++) {
      const { rows } = await db.query<{ n: string }>(`SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND classid = $1 AND objid = $2`, [...GATE]);
      if (Number(rows[0]!.n) > 0) break;
      if (i > 400) throw new Error(`the decision never reached the gate: ${JSON.stringify(await Promise.race([deciding, 'still running']))}`);
      await new Promise((r) => setTimeout(r, 10));
    }
    let acked = false;
    const changing = change().then(() => { acked = true; });
    await new Promise((r) => setTimeout(r, 500));
    const ackedWhileHeld = acked;
    await db.query(`SELECT pg_advisory_unlock($1, $2)`, [...GATE]);
    released = true;
    const decided = await deciding;
    await changing;
    return { ackedWhileHeld, decided };
  } finally {
    if (!released) await db.query(`SELECT pg_advisory_unlock($1, $2)`, [...GATE]);
    await db.query(`DELETE FROM pp_test_gate WHERE agent_id = $1`, [agentId]);
  }
}

const pauseOn0 = (agentId: string) => () => c.admin(0).client.updateAgent({ agentId, status: AgentStatus.PAUSED }, c.admin(0).auth);
const capToZeroOn0 = (agentId: string) => () => setPolicy(c.admin(0), agentId, { allowlist: [RECIPIENT, PAY_TO], capUsd: '0', thresholdUsd: '0' });
const signedOutcome = async (p: Promise<{ status: number; json: Record<string, unknown>; text: string }>): Promise<Outcome> => {
  const r = await p;
  return { ok: r.status === 200 && typeof r.json.signature === 'string', detail: `${r.status} ${r.text}` };
};

for (const [what, change] of [['paused', pauseOn0], ['capped at zero', capToZeroOn0]] as const) {
  test(`sign on B, agent ${what} on A meanwhile: the change is not acknowledged before B's payment commits`, async () => {
    const agentId = await freshAgent(`sign-${what}`, '500');
    const { ackedWhileHeld, decided } = await overlap(agentId, () => signedOutcome(postSign(c.replicas[1]!.url, c.bootstrap.api_key, eip3009(agentId))), change(agentId));
    expect(ackedWhileHeld, decided.detail).toBe(false);
    expect(decided.ok, decided.detail).toBe(true);
    // And once acknowledged, it binds: the next payment is refused.
    const next = await postSign(c.replicas[1]!.url, c.bootstrap.api_key, eip3009(agentId));
    expect([next.status, next.json.error], next.text).toEqual([403, 'Policy denied']);
  }, 60_000);

  test(`approve on B, agent ${what} on A meanwhile: the change is not acknowledged before the approval commits`, async () => {
    const agentId = await freshAgent(`approve-${what}`, '0.005');
    const pending = await postSign(c.replicas[1]!.url, c.bootstrap.api_key, eip3009(agentId));
    expect(pending.json.status, pending.text).toBe('pending_approval');
    const approve = async (): Promise<Outcome> => {
      try {
        const r = await c.admin(1).client.decideApproval({ id: pending.json.approval_request_id as string, decision: Decision.APPROVE }, c.admin(1).auth);
        return { ok: true, detail: JSON.stringify(r.approval?.status) };
      } catch (err) {
        return { ok: false, detail: String(err) };
      }
    };
    const { ackedWhileHeld, decided } = await overlap(agentId, approve, change(agentId));
    expect(ackedWhileHeld, decided.detail).toBe(false);
    expect(decided.ok, decided.detail).toBe(true);
  }, 60_000);

  test(`an approved paywall payment collected on B, agent ${what} on A meanwhile: the change is not acknowledged before the collection commits`, async () => {
    const agentId = await freshAgent(`collect-${what}`, '0.005');
    const key = `collect-${what.replace(/ /g, '-')}`;
    const pending = await postSign(c.replicas[1]!.url, c.bootstrap.api_key, paywall(agentId), key);
    expect(pending.json.status, pending.text).toBe('pending_approval');
    await c.admin(0).client.decideApproval({ id: pending.json.approval_request_id as string, decision: Decision.APPROVE }, c.admin(0).auth);
    const { ackedWhileHeld, decided } = await overlap(agentId, () => signedOutcome(postSign(c.replicas[1]!.url, c.bootstrap.api_key, paywall(agentId), key)), change(agentId));
    expect(ackedWhileHeld, decided.detail).toBe(false);
    expect(decided.ok, decided.detail).toBe(true);
  }, 60_000);
}

// The registry is part of the policy for an agent that allows a service by slug: a paywall payment
// is attributed (and so allowed) again in its deciding write, with the service rows held.
for (const flow of ['a paywall payment signed', 'an approved paywall payment collected'] as const) {
  test(`${flow} on B through an allowlisted service, the service removed on A meanwhile: the removal is not acknowledged before B commits`, async () => {
    const slug = `svc-${flow.split(' ')[1]}-${Date.now()}`;
    await upsertService(c.admin(0), { slug, name: 'Gated', paymentMethods: [{ realm: '', baseUrl: x402.url('/svc'), protocol: 'x402' }] });
    const collect = flow.startsWith('an approved');
    const agentId = await createAgent(c.admin(0), c.bootstrap.org_id, slug);
    await setPolicy(c.admin(0), agentId, { allowlist: [slug], capUsd: '1000', thresholdUsd: collect ? '0.005' : '500' });
    const body: SignBody = { ...paywall(agentId), payload: { resource_url: x402.url('/svc/paid') } };
    if (collect) {
      const pending = await postSign(c.replicas[1]!.url, c.bootstrap.api_key, body, slug);
      expect(pending.json.status, pending.text).toBe('pending_approval');
      await c.admin(0).client.decideApproval({ id: pending.json.approval_request_id as string, decision: Decision.APPROVE }, c.admin(0).auth);
    }
    const { ackedWhileHeld, decided } = await overlap(agentId, () => signedOutcome(postSign(c.replicas[1]!.url, c.bootstrap.api_key, body, slug)),
      () => c.admin(0).client.deleteService({ slug }, c.admin(0).auth));
    expect(ackedWhileHeld, decided.detail).toBe(false);
    expect(decided.ok, decided.detail).toBe(true);
  }, 60_000);
}

test('a paywall payment signed on B through an allowlisted service, a new service taking its URL over registered on A meanwhile: not acknowledged before B commits', async () => {
  const slug = `zz-kept-${Date.now()}`;
  await upsertService(c.admin(0), { slug, name: 'Kept', paymentMethods: [{ realm: '', baseUrl: x402.url('/svc'), protocol: 'x402' }] });
  const agentId = await createAgent(c.admin(0), c.bootstrap.org_id, slug);
  await setPolicy(c.admin(0), agentId, { allowlist: [slug], capUsd: '1000', thresholdUsd: '500' });
  const body: SignBody = { ...paywall(agentId), payload: { resource_url: x402.url('/svc/paid') } };
  // Sorted first, it is the first match for the URL once registered: the payment would no longer be attributed to the allowlisted one.
  const taker = `aa-taker-${Date.now()}`;
  const { ackedWhileHeld, decided } = await overlap(agentId, () => signedOutcome(postSign(c.replicas[1]!.url, c.bootstrap.api_key, body)),
    () => upsertService(c.admin(0), { slug: taker, name: 'Taker', paymentMethods: [{ realm: '', baseUrl: x402.url('/svc'), protocol: 'x402' }] }));
  expect(ackedWhileHeld, decided.detail).toBe(false);
  expect(decided.ok, decided.detail).toBe(true);
  const after = await postSign(c.replicas[1]!.url, c.bootstrap.api_key, body);
  expect([after.status, after.json.error], after.text).toEqual([403, 'Policy denied']);
  await c.admin(0).client.deleteService({ slug: taker }, c.admin(0).auth);
}, 60_000);

test('registry churn on A against slug-attributed paywall payments on B: no deadlock, no 5xx, the registry changes all acknowledged', async () => {
  const deadlocks = async () => {
    await db.query('SELECT pg_stat_clear_snapshot()');
    const { rows } = await db.query<{ n: string }>('SELECT deadlocks AS n FROM pg_stat_database WHERE datname = current_database()');
    return Number(rows[0]!.n);
  };
  const target = `m-churn-${Date.now()}`;
  for (let i = 0; i < 20; i++) {
    await upsertService(c.admin(0), { slug: `churn-${String(i).padStart(2, '0')}-${Date.now()}`, name: 'filler', paymentMethods: [{ realm: '', baseUrl: x402.url(`/filler${i}`), protocol: 'x402' }] });
  }
  await upsertService(c.admin(0), { slug: target, name: 'Target', paymentMethods: [{ realm: '', baseUrl: x402.url('/svc'), protocol: 'x402' }] });
  const agents = await Promise.all([0, 1, 2, 3].map(async (i) => {
    const id = await createAgent(c.admin(0), c.bootstrap.org_id, `${target}-${i}`);
    await setPolicy(c.admin(0), id, { allowlist: [target], capUsd: '100000', thresholdUsd: '50000' });
    return id;
  }));
  const before = await deadlocks();
  const until = Date.now() + 6_000;
  const statuses: number[] = [];
  const refusals: string[] = [];
  const pay = async (w: number) => {
    for (let k = 0; Date.now() < until; k++) {
      const body: SignBody = { ...paywall(agents[(w + k) % agents.length]!), payload: { resource_url: x402.url('/svc/paid') } };
      const r = await postSign(c.replicas[1]!.url, c.bootstrap.api_key, body);
      statuses.push(r.status);
      if (r.status !== 200) refusals.push(`${r.status} ${r.text.slice(0, 200)}`);
    }
  };
  const changes: string[] = [];
  const churn = async (w: number) => {
    for (let k = 0; Date.now() < until; k++) {
      const slug = `a-churn-${w}-${k}-${Date.now()}`;
      await upsertService(c.admin(w % 2), { slug, name: 'churn', paymentMethods: [{ realm: '', baseUrl: x402.url(`/churn${w}`), protocol: 'x402' }] });
      await c.admin((w + 1) % 2).client.deleteService({ slug }, c.admin((w + 1) % 2).auth);
      changes.push(slug);
    }
  };
  // 16 payers: under one organization's share of the paywall probes (3/4 of 32), so a refusal
  // here would be the registry's doing, not admission's.
  await Promise.all([...Array.from({ length: 16 }, (_, w) => pay(w)), churn(0), churn(1)]);
  expect(refusals).toEqual([]);
  expect(statuses.length).toBeGreaterThan(50);
  expect(changes.length).toBeGreaterThan(5);
  // The counter is flushed by busy sessions at least once a second.
  await new Promise((r) => setTimeout(r, 1_500));
  expect(await deadlocks() - before).toBe(0);
}, 60_000);
