import { afterAll, beforeAll, expect, test } from 'vitest';
import { ApiKeyMode } from '../../gen/paypolicy/v1/admin_pb.js';
import { Decision } from '../../gen/paypolicy/v1/admin_pb.js';
import { postSign, setPolicy } from '../helpers/payments.js';
import { startCluster, type Cluster } from '../helpers/replicas.js';

/**
 * Free text holding a NUL character. SQLite stores it; PostgreSQL's TEXT refuses it (SQLSTATE
 * 22021), so taken as it comes, an API key label, an approval note or a service description with a
 * NUL would answer Internal error (500) instead of InvalidArgument on a PostgreSQL replica, and on
 * SQLite be stored where migrate-store could never copy it to PostgreSQL ("invalid byte sequence
 * for encoding UTF8: 0x00"). Refused as invalid input on both.
 */

const RECIPIENT = '0x1111111111111111111111111111111111111111';
const NUL = 'a\u0000b';
let c: Cluster;
beforeAll(async () => {
  c = await startCluster({ replicas: 1 });
}, 120_000);
afterAll(async () => c?.close(), 60_000);

async function outcome(fn: () => Promise<unknown>): Promise<string> {
  try {
    await fn();
    return 'accepted';
  } catch (err) {
    return (err as Error).message;
  }
}

test('a NUL in an API key label, an approval note or a service description is InvalidArgument, never Internal', async () => {
  const a = c.admin(0);
  await setPolicy(a, c.bootstrap.agent_id, { allowlist: [RECIPIENT], capUsd: '100', thresholdUsd: '1' });
  const pending = await postSign(c.replicas[0]!.url, c.bootstrap.api_key, { agent_id: c.bootstrap.agent_id, type: 'eip3009', chain_id: 8453, recipient_address: RECIPIENT, amount_usd: '2' });
  expect(pending.status, pending.text).toBe(202);
  const results = {
    label: await outcome(() => a.client.createApiKey({ orgId: c.bootstrap.org_id, mode: ApiKeyMode.TEST, label: NUL }, a.auth)),
    note: await outcome(() => a.client.decideApproval({ id: pending.json.approval_request_id, decision: Decision.DENY, note: NUL, decidedBy: '' }, a.auth)),
    description: await outcome(() => a.client.upsertService({ service: { slug: 'nul', name: 'Nul', description: NUL, category: 'x' } }, a.auth)),
  };
  for (const r of Object.values(results)) expect(r, JSON.stringify(results)).toMatch(/^\[invalid_argument\].*NUL/);
  // The approval is still undecided: the refused note changed nothing.
  const status = await fetch(`${c.replicas[0]!.url}/api/approvals/${pending.json.approval_request_id}/status`, { headers: { authorization: `Bearer ${c.bootstrap.api_key}` } });
  expect(((await status.json()) as { status: string }).status).toBe('pending');
});
