import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, test } from 'vitest';
import { createAgent } from '../../src/app/organizations/agents.js';
import type { AppDeps } from '../../src/app/deps.js';
import { createOrganization } from '../../src/app/organizations/organizations.js';
import { summarizeSpend } from '../../src/app/payments/spend.js';
import { OPERATOR } from '../../src/domain/types.js';
import { TRANSACTION_STATES, holdsCap, type InitialState, type TransactionState } from '../../src/domain/transactionState.js';
import { openStore, type Store } from '../../src/store/store.js';
import { testDeps } from '../helpers/testDeps.js';

const HOUR = 3600_000;
const DAY = 24 * HOUR;
const NOW = Date.parse('2030-06-15T12:00:00Z');
let dir: string;
let store: Store;
let deps: AppDeps;
let orgId: string;
let seq = 0;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'paypolicy-spend-'));
  store = openStore(join(dir, 'db.sqlite'));
  deps = testDeps(store, { now: () => NOW });
  orgId = (await createOrganization(deps, OPERATOR, { name: 'acme' })).id;
});

afterEach(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

/**
 * How a payment reaches each state, through the payment store's typed moves (a row may only start
 * in an initial state and move along the state machine; holds_cap follows from its state).
 */
const PATHS: Record<Exclude<TransactionState, 'recorded'>, { start: InitialState; moves: Array<(id: string, at: number) => boolean> }> = {
  signing: { start: 'signing', moves: [] },
  signed: { start: 'signing', moves: [(id, at) => store.payments.settleSigned(id, '{}', at)] },
  failed: { start: 'signing', moves: [(id, at) => store.payments.markFailed(id, 'Signing failed', at)] },
  pending_approval: { start: 'pending_approval', moves: [] },
  approved: { start: 'pending_approval', moves: [(id, at) => store.payments.markApproved(id, at)] },
  denied: { start: 'denied', moves: [] },
  expired: { start: 'pending_approval', moves: [(id, at) => store.payments.releasePending(id, 'expired', 'Approval request expired', at)] },
  reverted: {
    start: 'signing',
    moves: [
      (id, at) => store.payments.settleSigned(id, '{}', at, true),
      (id, at) => store.payments.markAccepted(id, '0xabc', false, at),
      (id, at) => store.payments.markReverted(id, { hash: '0xabc', blockNumber: 5, confirmations: 1, networkFeeWei: '21000' }, 'Reverted on chain in block 5', at),
    ],
  },
};

/** A payment `ago` ms before NOW (when it began counting), brought to `status` through the state machine. */
function row(agentId: string, ago: number, usd: bigint, status: keyof typeof PATHS): void {
  const id = `00000000-0000-4000-8000-${String(++seq).padStart(12, '0')}`;
  const path = PATHS[status];
  store.payments.insert({
    id, orgId, agentId, type: 'eip3009', status: path.start, chainId: 8453, recipient: '0x2222222222222222222222222222222222222222',
    amountMicros: usd * 1_000_000n, reason: '', serviceSlug: '', resourceUrl: '', idempotencyKey: null, requestHash: 'h', request: '{}',
    result: null, approvalId: null, createdAt: NOW - ago,
  });
  for (const step of path.moves) expect(step(id, NOW - ago)).toBe(true);
  expect(store.payments.get(id)!.status).toBe(status);
}

describe('summarizeSpend', () => {
  test('behavior: signed, signing and pending count; denied, failed and expired do not; windows end now', async () => {
    const a = await createAgent(deps, OPERATOR, { orgId, name: 'a', policy: { allowlist: [], spendCapMicros: 50_000_000n, approvalThresholdMicros: 0n, maxNetworkFeeWei: 10n ** 15n, maxPerPaymentMicros: null, limits: [], updatedAt: NOW } });
    const b = await createAgent(deps, OPERATOR, { orgId, name: 'b' });
    row(a.id, 0, 1n, 'signed'); // exactly now: in the last hourly bucket
    row(a.id, 2 * HOUR, 2n, 'signing');
    row(a.id, 23 * HOUR, 4n, 'pending_approval');
    row(a.id, DAY, 8n, 'signed'); // exactly 24 h ago: outside the open window, like the cap's `cap_at > since`
    row(a.id, 3 * DAY + HOUR, 16n, 'signed');
    row(a.id, 7 * DAY, 32n, 'signed'); // outside 7 days
    row(a.id, HOUR, 100n, 'denied');
    row(a.id, HOUR, 100n, 'failed');
    row(a.id, HOUR, 100n, 'expired');
    row(a.id, HOUR, 100n, 'reverted');
    row(b.id, 5 * HOUR, 3n, 'signed');

    const s = await summarizeSpend(deps, OPERATOR, orgId);
    const sa = s.agents.find((x) => x.agent.id === a.id)!;
    expect(sa.last24hMicros).toBe(7_000_000n);
    expect(sa.hourly).toHaveLength(24);
    expect(sa.hourly[23]).toBe(1_000_000n);
    expect(sa.hourly[21]).toBe(2_000_000n);
    expect(sa.hourly[0]).toBe(4_000_000n);
    expect(sa.daily).toEqual([0n, 0n, 0n, 16_000_000n, 0n, 8_000_000n, 7_000_000n]);
    expect(sa.last7dMicros).toBe(31_000_000n);
    expect(s.totals).toEqual({ last24hMicros: 10_000_000n, last7dMicros: 34_000_000n, daily: [0n, 0n, 0n, 16_000_000n, 0n, 8_000_000n, 10_000_000n], capMicros: 50_000_000n });
  });

  test('behavior: the 24-hour figure equals what the cap check counts', async () => {
    const a = await createAgent(deps, OPERATOR, { orgId, name: 'a' });
    for (const ago of [0, 1, HOUR, 12 * HOUR, DAY - 1, DAY, DAY + 1, 2 * DAY]) row(a.id, ago, 1n, 'signed');
    const s = await summarizeSpend(deps, OPERATOR, orgId);
    expect(s.agents[0]!.last24hMicros).toBe(store.payments.committedSince(a.id, NOW - DAY, NOW));
    expect(s.agents[0]!.last24hMicros).toBe(5_000_000n);
  });

  test('behavior: a payment counts exactly while its state holds the cap, in every state', async () => {
    const a = await createAgent(deps, OPERATOR, { orgId, name: 'a' });
    const states = TRANSACTION_STATES.filter((t): t is keyof typeof PATHS => t !== 'recorded');
    // One payment per state, each a distinct power of two: the sum names the states that count.
    // Five minutes ago: inside an approved payment's 15-minute collection window, so the sweep keeps it approved.
    states.forEach((status, i) => row(a.id, 5 * 60_000, 2n ** BigInt(i), status));
    const expected = states.reduce((sum, status, i) => (holdsCap(status) ? sum + 2n ** BigInt(i) * 1_000_000n : sum), 0n);
    expect(expected).toBe((1n + 2n + 8n + 16n) * 1_000_000n); // signing, signed, pending_approval, approved
    expect((await summarizeSpend(deps, OPERATOR, orgId)).agents[0]!.last24hMicros).toBe(expected);
    expect(store.payments.committedSince(a.id, NOW - DAY, NOW)).toBe(expected);
  });
});
