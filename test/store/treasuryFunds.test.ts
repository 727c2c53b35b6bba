import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { openStore, type Store } from '../../src/store/store.js';

/**
 * store/treasuryFunds.ts: which raw transactions the treasury balance check still counts against
 * a balance read at a block, on a real database file with every migration applied.
 */
let dir: string;
let store: Store;
let seq = 0;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'paypolicy-funds-'));
  store = openStore(join(dir, 'db.sqlite'));
  for (const org of ['org_a', 'org_b']) {
    store.db.prepare("INSERT INTO organizations (id, name, approval_window_s, created_at) VALUES (?, 'o', 3600, 1)").run(org);
    store.db.prepare("INSERT INTO agents (id, org_id, name, status, created_at, updated_at) VALUES (?, ?, 'a', 'active', 1, 1)").run(`agt_${org}`, org);
  }
});
afterEach(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A raw transaction of `org` on `chainId` reserved with the next nonce, then moved to `end`. */
function raw(org: string, chainId: number, micros: bigint, end: 'signing' | 'signed' | 'failed'): number {
  const id = `tx-${++seq}`;
  store.payments.insert({
    id, orgId: org, agentId: `agt_${org}`, type: 'raw_transaction', status: 'signing', chainId, recipient: '0x2222222222222222222222222222222222222222',
    amountMicros: micros, reason: '', serviceSlug: '', resourceUrl: '', idempotencyKey: null, requestHash: 'h',
    request: JSON.stringify({ payload: { kind: 'raw_transaction', gas: '21000', maxFeePerGas: '1000', maxPriorityFeePerGas: '1' } }), result: null, approvalId: null, createdAt: 1,
  });
  const nonce = store.payments.allocateNonce(org, chainId, id);
  if (end === 'signed') store.payments.settleSigned(id, '{}', 2, true);
  if (end === 'failed') store.payments.markFailed(id, 'Signing failed', 2);
  return nonce;
}

describe('unminedRaw', () => {
  test('behavior: counts signed and signing rows at or above the mined nonce, of that organization and chain only', () => {
    expect(raw('org_a', 84532, 1n, 'signed')).toBe(0);
    raw('org_a', 84532, 2n, 'signed');
    raw('org_a', 84532, 4n, 'failed'); // nonce 2, handed back: not to be paid
    raw('org_a', 84532, 8n, 'signing'); // reuses nonce 2
    raw('org_a', 84532, 16n, 'signed'); // nonce 3
    raw('org_a', 8453, 32n, 'signed');
    raw('org_b', 84532, 64n, 'signed');
    const sum = (mined: number) => store.treasuryFunds.unminedRaw('org_a', 84532, mined).reduce((t, r) => t + r.amountMicros, 0n);
    expect(sum(0)).toBe(1n + 2n + 8n + 16n);
    expect(sum(1)).toBe(2n + 8n + 16n);
    expect(sum(3)).toBe(16n);
    expect(sum(4)).toBe(0n);
    expect(store.treasuryFunds.unminedRaw('org_a', 84532, 3)[0]!.request).toContain('"gas":"21000"');
  });

  test('behavior: the query is a range scan of the raw-nonce index, not a walk over the ledger', () => {
    const plan = store.db.prepare(`EXPLAIN QUERY PLAN SELECT amount_micros, request FROM transactions
      WHERE org_id = ? AND chain_id = ? AND type = 'raw_transaction' AND nonce >= ? AND status IN ('signing', 'signed')`).all('org_a', 1, 0) as Array<{ detail: string }>;
    expect(plan.map((p) => p.detail).join('\n')).toMatch(/USING INDEX transactions_raw_nonce \(org_id=\? AND chain_id=\? AND nonce>\?\)/);
  });
});
