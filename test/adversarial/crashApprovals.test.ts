import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { AgentStatus, ApprovalStatus } from '../../gen/paypolicy/v1/payment_policy_pb.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { getAddress, parseTransaction, recoverTransactionAddress, type Address, type Hex } from 'viem';
import { afterEach, describe, expect, test } from 'vitest';
import { Decision } from '../../gen/paypolicy/v1/admin_pb.js';
import type { BootstrapFile } from '../../src/bootstrap.js';
import { writeTxn } from '../../src/store/db.js';
import { adminFor, createAgent, type Admin } from '../helpers/admin.js';
import { spawnCli, type CliProcess } from '../helpers/cli.js';
import { listAllTransactions, postSign, recoverAuthorizationSigner, setPolicy, type SignBody, type WireAuthorization } from '../helpers/payments.js';
import { startTestServer, type RestResult, type TestServer } from '../helpers/server.js';

/**
 * A crash never consumes an approval. A human's approval is recorded in one commit and its
 * signature settled in a later one; a kill -9 between the two must not leave the approval
 * `approved` and its payment `failed`, where the agent's repeat would get 409 forever and the
 * approval could not be decided again. After a restart such a payment is `approved` again and
 * the agent's repeat with its key signs it (policy re-checked, nonce reissued), or is refused with
 * a clear 403 once the 15-minute collection window has closed.
 */

const RECIPIENT = '0x90f79bf6eb2c4f870365e785982e1f101e93b906';
/** Written out here independently of src/. */
const COLLECTION_WINDOW_MS = 15 * 60 * 1000;
const INTERRUPTED_EXPIRED = 'Signing the approved payment was interrupted and it was not collected within 15 minutes of the approval; send a new request';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'paypolicy-crash-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function eip3009(agentId: string, amount = '0.5'): SignBody {
  return { agent_id: agentId, type: 'eip3009', chain_id: 8453, recipient_address: RECIPIENT, amount_usd: amount };
}

function raw(agentId: string, amount = '0.5'): SignBody {
  return { agent_id: agentId, type: 'raw_transaction', chain_id: 8453, recipient_address: RECIPIENT, amount_usd: amount, payload: {} };
}

/** Asserts a 200 carries a signature of the treasury; returns the raw transaction's nonce, if any. */
async function expectSignedByTreasury(r: RestResult, treasury: Address): Promise<number | undefined> {
  expect(r.status, r.text).toBe(200);
  if (r.json.raw_transaction) {
    const serialized = r.json.raw_transaction.serialized as `0x02${string}`;
    expect(await recoverTransactionAddress({ serializedTransaction: serialized })).toBe(treasury);
    return parseTransaction(serialized).nonce;
  }
  expect(await recoverAuthorizationSigner(r.json.signature as Hex, r.json.authorization as WireAuthorization)).toBe(treasury);
  return undefined;
}

describe('start-up repair of approved payments cut off while signing (in-process, deterministic)', () => {
  let clock = Date.now();
  const now = () => clock;

  async function start(dataDir: string): Promise<TestServer> {
    const s = await startTestServer({ dataDir, now, logLevel: 'warn' });
    cleanups.push(() => s.close({ keepData: true }));
    return s;
  }

  /** An agent that needs approval above $0.10, cap $10. */
  async function agent(s: TestServer): Promise<string> {
    const admin = adminFor(s);
    const agentId = await createAgent(admin, s.bootstrap.org_id, 'crash');
    await setPolicy(admin, agentId, { allowlist: [RECIPIENT], capUsd: '10', thresholdUsd: '0.1' });
    return agentId;
  }

  async function pending(s: TestServer, body: SignBody, key: string): Promise<{ transactionId: string; approvalId: string }> {
    const r = await postSign(s.url, s.bootstrap.api_key, body, key);
    expect(r.status, r.text).toBe(202);
    return { transactionId: r.json.transaction_id, approvalId: r.json.approval_request_id };
  }

  /**
   * What the disk holds when a crash lands right after decideApproval's deciding commit: the
   * approval is approved, the payment is `signing` and holds the cap (and, for a raw transaction,
   * its nonce). These are the store calls of that commit, with no signing after them.
   */
  function decidedThenCrashed(s: TestServer, p: { transactionId: string; approvalId: string }): void {
    const { store } = s.app;
    writeTxn(store.db, () => {
      expect(store.approvals.decide(p.approvalId, 'approved', clock, 'operator', '')).toBe(true);
      expect(store.payments.startSigningApproved(p.transactionId, clock)).toBe(true);
      const tx = store.payments.get(p.transactionId)!;
      if (tx.type === 'raw_transaction') store.payments.allocateNonce(tx.orgId, tx.chainId, tx.id);
    });
  }

  test('behavior: a raw transaction left signing is approved again at restart, and the repeat signs it with the nonce it had', async () => {
    clock = Date.now();
    const dataDir = tempDir();
    let s = await start(dataDir);
    const agentId = await agent(s);
    const p = await pending(s, raw(agentId), 'raw-crash');
    decidedThenCrashed(s, p);
    expect(s.app.store.payments.get(p.transactionId)!.status).toBe('signing');
    await s.close({ keepData: true });

    s = await start(dataDir);
    const { payments, approvals } = s.app.store;
    expect(payments.get(p.transactionId)!.status).toBe('approved');
    expect(approvals.get(p.approvalId)!.status).toBe('approved');
    // Still held against the cap: $0.50 of the agent's $10.
    expect(payments.committedSince(agentId, clock - 86_400_000, clock)).toBe(500_000n);

    const treasury = getAddress(s.bootstrap.treasury_address);
    const repeat = await postSign(s.url, s.bootstrap.api_key, raw(agentId), 'raw-crash');
    expect(repeat.json.transaction_id).toBe(p.transactionId);
    expect(await expectSignedByTreasury(repeat, treasury)).toBe(0);
    // Replays are stable, and the next raw transaction takes the next nonce: no gap, no reuse.
    const again = await postSign(s.url, s.bootstrap.api_key, raw(agentId), 'raw-crash');
    expect(again.json.raw_transaction.serialized).toBe(repeat.json.raw_transaction.serialized);
    expect(await expectSignedByTreasury(await postSign(s.url, s.bootstrap.api_key, raw(agentId, '0.05'), 'raw-next'), treasury)).toBe(1);
    expect(payments.get(p.transactionId)!.status).toBe('signed');
  });

  test('behavior: the collection re-checks the policy: a payment whose agent was paused meanwhile is a clear 403 and releases its hold', async () => {
    clock = Date.now();
    const dataDir = tempDir();
    let s = await start(dataDir);
    const agentId = await agent(s);
    const p = await pending(s, eip3009(agentId), 'paused');
    decidedThenCrashed(s, p);
    await s.close({ keepData: true });

    s = await start(dataDir);
    const admin = adminFor(s);
    await admin.client.updateAgent({ agentId, status: AgentStatus.PAUSED }, admin.auth);
    const repeat = await postSign(s.url, s.bootstrap.api_key, eip3009(agentId), 'paused');
    expect(repeat.status, repeat.text).toBe(403);
    expect(repeat.json.reason).toMatch(/^Policy re-check at collection refused the approved payment: /);
    expect(s.app.store.payments.committedSince(agentId, clock - 86_400_000, clock)).toBe(0n);
  });

  test('behavior: rows an older build left failed are collectable within 15 minutes of the decision, else expired with a clear reason', async () => {
    clock = Date.now();
    const dataDir = tempDir();
    let s = await start(dataDir);
    const agentId = await agent(s);
    const old = await pending(s, eip3009(agentId), 'old-build-late');
    const recent = await pending(s, raw(agentId), 'old-build-recent');
    decidedThenCrashed(s, old);
    clock += 10 * 60 * 1000;
    decidedThenCrashed(s, recent);
    // What the older build's start-up repair did to both: `failed`, hold and nonce released.
    writeTxn(s.app.store.db, () => s.app.store.payments.failInterrupted(clock));
    await s.close({ keepData: true });

    // Restart 16 minutes after the first decision, 6 after the second.
    clock += 6 * 60 * 1000;
    s = await start(dataDir);
    const { payments } = s.app.store;
    expect(payments.get(old.transactionId)).toMatchObject({ status: 'expired', reason: INTERRUPTED_EXPIRED });
    expect(payments.get(recent.transactionId)!.status).toBe('approved');
    expect(payments.committedSince(agentId, clock - 86_400_000, clock)).toBe(500_000n);

    const late = await postSign(s.url, s.bootstrap.api_key, eip3009(agentId), 'old-build-late');
    expect(late.status, late.text).toBe(403);
    expect(late.json.reason).toBe(INTERRUPTED_EXPIRED);
    const treasury = getAddress(s.bootstrap.treasury_address);
    expect(await expectSignedByTreasury(await postSign(s.url, s.bootstrap.api_key, raw(agentId), 'old-build-recent'), treasury)).toBe(0);

    // A reopened payment nobody collects expires with the collection window, hold released.
    const idle = await pending(s, eip3009(agentId), 'never-collected');
    decidedThenCrashed(s, idle);
    await s.close({ keepData: true });
    s = await start(dataDir);
    expect(s.app.store.payments.get(idle.transactionId)!.status).toBe('approved');
    clock += COLLECTION_WINDOW_MS + 1;
    const expired = await postSign(s.url, s.bootstrap.api_key, eip3009(agentId), 'never-collected');
    expect(expired.status, expired.text).toBe(403);
    expect(expired.json.reason).toBe('Approved payment was not collected within 15 minutes of the approval; send a new request');
    expect(s.app.store.payments.get(idle.transactionId)!.status).toBe('expired');
    // Only the collected $0.50 still counts.
    expect(s.app.store.payments.committedSince(agentId, clock - 86_400_000, clock)).toBe(500_000n);
  });
});

describe('kill -9 of the real server while approvals are decided', () => {
  /** Spawns `paypolicy serve` on `dataDir` and waits for its URL. */
  async function serve(dataDir: string): Promise<{ p: CliProcess; url: string }> {
    const p = spawnCli(['serve', '--port', '0', '--data-dir', dataDir], { PAYPOLICY_LOG_LEVEL: 'warn', PAYPOLICY_SIGNER_THREADS: '1' });
    cleanups.push(async () => {
      if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
      await p.exited;
    });
    // The first start prints the bootstrap banner, later starts one listening line.
    const listening = /(?:listening on |curl -s -X POST )(http:\/\/127\.0\.0\.1:\d+)/;
    const out = await p.waitForStdout(listening, 20_000);
    return { p, url: listening.exec(out)![1]! };
  }

  test('property: after the kill and a restart every agent repeat ends in 200 with a recovered signature; no approval is stuck and no nonce is skipped', async () => {
    const dataDir = tempDir();
    let { p, url } = await serve(dataDir);
    const bootstrap = JSON.parse(readFileSync(join(dataDir, 'bootstrap.json'), 'utf8')) as BootstrapFile;
    let admin: Admin = adminFor({ url, bootstrap } as TestServer);
    const agentId = bootstrap.agent_id;
    await setPolicy(admin, agentId, { allowlist: [RECIPIENT], capUsd: '1000', thresholdUsd: '0.01' });

    const N = 80;
    const bodies = new Map<string, SignBody>();
    const approvalOf = new Map<string, string>();
    await Promise.all(Array.from({ length: N }, async (_, i) => {
      const key = `crash-${i}`;
      const body = i % 2 === 0 ? raw(agentId, '0.02') : eip3009(agentId, '0.02');
      const r = await postSign(url, bootstrap.api_key, body, key);
      expect(r.status, r.text).toBe(202);
      bodies.set(key, body);
      approvalOf.set(key, r.json.approval_request_id);
    }));

    // Every approval decided at once. A reader on the same files (WAL readers see every commit)
    // watches for decided payments whose signature is not settled yet; the process is killed as
    // soon as a few are, with the rest settled, mid-decision or not yet read.
    const reader = new Database(join(dataDir, 'paypolicy.db'), { readonly: true, fileMustExist: true });
    cleanups.push(() => {
      reader.close();
    });
    const cutOff = reader.prepare(`SELECT COUNT(*) AS n FROM transactions t JOIN approvals a ON a.id = t.approval_id
      WHERE t.status = 'signing' AND a.status = 'approved'`);
    let settled = false;
    const decisions = Promise.all([...approvalOf.values()].map((id) =>
      admin.client.decideApproval({ id, decision: Decision.APPROVE }, admin.auth).catch(() => undefined))).finally(() => (settled = true));
    while (!settled && (cutOff.get() as { n: number }).n < 3) await new Promise((r) => setImmediate(r));
    p.child.kill('SIGKILL');
    expect(await p.exited).toMatchObject({ signal: 'SIGKILL' });
    await decisions;

    ({ p, url } = await serve(dataDir));
    admin = adminFor({ url, bootstrap } as TestServer);
    const afterRestart = await listAllTransactions(admin, bootstrap.org_id, agentId);
    const statuses = afterRestart.map((t) => t.status);
    // Nothing is failed; the kill did catch payments between decision and signature (else this
    // test proved nothing), and they are collectable again.
    expect(statuses.filter((st) => st === 'failed')).toEqual([]);
    expect(statuses.filter((st) => st === 'approved').length).toBeGreaterThan(0);

    const treasury = getAddress(bootstrap.treasury_address);
    const nonces: number[] = [];
    await Promise.all([...bodies].map(async ([key, body]) => {
      let r = await postSign(url, bootstrap.api_key, body, key);
      if (r.status === 202) {
        // Never decided before the kill: it can still be decided, exactly once.
        const decided = await admin.client.decideApproval({ id: approvalOf.get(key)!, decision: Decision.APPROVE }, admin.auth);
        expect(decided.approval?.status).toBe(ApprovalStatus.APPROVED);
        r = await postSign(url, bootstrap.api_key, body, key);
      }
      const nonce = await expectSignedByTreasury(r, treasury);
      if (nonce !== undefined) nonces.push(nonce);
    }));
    expect(nonces.sort((a, b) => a - b)).toEqual(Array.from({ length: N / 2 }, (_, i) => i));
    const final = await listAllTransactions(admin, bootstrap.org_id, agentId);
    expect(final.filter((t) => t.status !== 'signed')).toEqual([]);
    const approvals = (await admin.client.listApprovals({ orgId: bootstrap.org_id, pageSize: 500 }, admin.auth)).approvals;
    expect(approvals.filter((a) => a.status !== ApprovalStatus.APPROVED).map((a) => a.status)).toEqual([]);
  }, 60_000);
});
