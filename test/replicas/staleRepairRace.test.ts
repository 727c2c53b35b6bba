import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { AdminService, Decision } from '../../gen/paypolicy/v1/admin_pb.js';
import type { BootstrapFile } from '../../src/bootstrap.js';
import { startPaypolicy, type Paypolicy } from '../../src/paypolicy.js';
import type { Admin } from '../helpers/admin.js';
import { connectClient } from '../helpers/clients.js';
import { postSign, setPolicy, type SignBody } from '../helpers/payments.js';
import { createTestDatabase, type TestDatabase } from '../helpers/pgDatabase.js';

/**
 * A live replica's signing must not be settled after another replica's
 * stale-signing repair took the row back, even when the row is back in `signing` for someone else.
 *
 * Two replicas on one PostgreSQL; B's clock runs 3 s ahead of A's ("clocks agree within a few
 * seconds") and --stale-signing-ms is 1000. An operator approves a raw transaction on A, which
 * signs it at decision time (nonce 0) with a slow signer; B's upkeep takes A's row for a dead replica's: back to `approved`, nonce 0
 * handed back. Another payment gets nonce 0, and the agent's repeat on B collects the approval
 * again (row in `signing` again, nonce 1). A's settle was guarded only by `status = 'signing'`:
 * it matched B's new reservation and answered A's signature (nonce 0) as the approved payment.
 * Two answered raw transactions with nonce 0, nonce 1 never signed: one payment can never be
 * mined and the treasury's later nonces wait behind a gap.
 */

const RECIPIENT = '0x1111111111111111111111111111111111111111';
const CHAIN = 84532;

let db: TestDatabase;
let a: Paypolicy;
let b: Paypolicy;
const dirs: string[] = [];
let boot: BootstrapFile;
const adminToken = `adm_${randomBytes(24).toString('hex')}`;
const masterKey = randomBytes(32).toString('hex');

async function replica(skewMs: number): Promise<Paypolicy> {
  const dataDir = mkdtempSync(join(tmpdir(), 'paypolicy-stale-'));
  dirs.push(dataDir);
  const app = await startPaypolicy({
    databaseUrl: db.url, databasePoolSize: 4, staleSigningMs: 1000, port: 0, host: '127.0.0.1', dataDir, logLevel: 'warn',
    adminToken, masterKey, signerThreads: 1, dev: false, probeAllowHosts: [], tlsCert: undefined, tlsKey: undefined, tempoRpcUrl: undefined,
  }, { logDestination: { write: () => {} }, now: () => Date.now() + skewMs });
  for (let tries = 0; !app.deps.signer.threads().every((t) => t.online); tries++) {
    if (tries > 400) throw new Error('signing threads did not come online');
    await new Promise((r) => setTimeout(r, 25));
  }
  return app;
}

const admin = (app: Paypolicy): Admin => ({ client: connectClient(AdminService, app.url), auth: { headers: { authorization: `Bearer ${adminToken}` } } });

beforeAll(async () => {
  db = await createTestDatabase();
  a = await replica(0);
  b = await replica(3000);
  boot = JSON.parse(readFileSync(join(dirs[0]!, 'bootstrap.json'), 'utf8')) as BootstrapFile;
}, 60_000);
afterAll(async () => {
  await Promise.allSettled([a?.stop(1000), b?.stop(1000)]);
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  await db?.drop();
}, 60_000);

const raw = (amount: string): SignBody => ({ agent_id: boot.agent_id, type: 'raw_transaction', chain_id: CHAIN, recipient_address: RECIPIENT, amount_usd: amount });

test('a signature whose row another replica repaired is never answered, even once the row is signing again', async () => {
  await setPolicy(admin(a), boot.agent_id, { allowlist: [RECIPIENT], capUsd: '1000', thresholdUsd: '5' });
  const pending = await postSign(a.url, boot.api_key, raw('10'), 'approved-1');
  expect(pending.status, pending.text).toBe(202);

  // A's signer holds the approved payment's signature (signed at decision time) until released.
  const signer = a.deps.signer;
  const real = signer.sign;
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let held = false;
  signer.sign = async (job) => {
    if (!held) {
      held = true;
      await gate;
    }
    return real.call(signer, job);
  };
  try {
    const decided = admin(a).client.decideApproval({ id: pending.json.approval_request_id, decision: Decision.APPROVE, note: '', decidedBy: 'op' }, admin(a).auth)
      .then(() => 'ok', (err: Error) => err.message);
    // B's upkeep (its clock ahead) takes the row for a dead replica's: back to approved, nonce 0 released.
    const until = Date.now() + 15_000;
    for (;;) {
      const { rows } = await b.pg!.pool.query<{ status: string }>(`SELECT status FROM transactions WHERE idempotency_key = 'approved-1'`);
      if (rows[0]?.status === 'approved') break;
      if (Date.now() > until) throw new Error(`the row stayed ${rows[0]?.status}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    // Another payment takes the handed-back nonce 0.
    const other = await postSign(b.url, boot.api_key, raw('1'), 'other');
    expect(other.status, other.text).toBe(200);
    // The agent's repeat on B collects the approval again; B's signer is slow too this time.
    const bSigner = b.deps.signer;
    const bReal = bSigner.sign;
    let releaseB!: () => void;
    const gateB = new Promise<void>((r) => (releaseB = r));
    bSigner.sign = async (job) => {
      await gateB;
      return bReal.call(bSigner, job);
    };
    const collectB = postSign(b.url, boot.api_key, raw('10'), 'approved-1');
    for (;;) {
      const { rows } = await b.pg!.pool.query<{ status: string }>(`SELECT status FROM transactions WHERE idempotency_key = 'approved-1'`);
      if (rows[0]?.status === 'signing') break;
      await new Promise((r) => setTimeout(r, 20));
    }
    release();
    const decision = await decided;
    releaseB();
    bSigner.sign = bReal;
    const answerB = await collectB;
    // Whatever A's decision call said, the agent's repeat on A answers what the ledger holds.
    const answerA = await postSign(a.url, boot.api_key, raw('10'), 'approved-1');

    // Every answered raw transaction: one nonce per payment, one payment per nonce.
    const answered = [other, answerA, answerB].filter((r) => r.status === 200);
    const seen = { decision, a: answerA.status, b: answerB.status, answered: answered.map((r) => [r.json.transaction_id, r.json.raw_transaction.nonce]) };
    const byPayment = new Map<string, Set<number>>();
    for (const r of answered) byPayment.set(r.json.transaction_id, (byPayment.get(r.json.transaction_id) ?? new Set()).add(Number(r.json.raw_transaction.nonce)));
    expect([...byPayment.values()].every((n) => n.size === 1), JSON.stringify(seen)).toBe(true);
    const nonces = [...byPayment.values()].map((n) => [...n][0]);
    expect(new Set(nonces).size, JSON.stringify(seen)).toBe(byPayment.size);
    // The approved payment was answered (B's collection, or the repeat), with the nonce its row holds.
    expect(answerA.status, answerA.text).toBe(200);
    const { rows } = await b.pg!.pool.query<{ nonce: bigint; status: string }>(`SELECT nonce, status FROM transactions WHERE idempotency_key = 'approved-1'`);
    expect(rows[0]).toEqual({ status: 'signed', nonce: BigInt(answerA.json.raw_transaction.nonce) });
  } finally {
    signer.sign = real;
    release();
  }
}, 60_000);
