import { afterAll, beforeAll, expect, test } from 'vitest';
import { createAgent } from '../helpers/admin.js';
import { listAllTransactions, type SignBody } from '../helpers/payments.js';
import { postSignRetrying, startCluster, type Cluster } from '../helpers/replicas.js';
import { rest } from '../helpers/server.js';

/**
 * An organization's window limit is one budget across replicas: 1,000 payments of $0.10 from ten
 * agents, spread over three replicas sharing one PostgreSQL database, against an organization 24h
 * limit of $10: exactly 100 are signed, whichever replica decided them.
 */

const RECIPIENT = '0x2222222222222222222222222222222222222222';
let c: Cluster;

beforeAll(async () => {
  c = await startCluster({ replicas: 3, args: ['--max-in-flight', '1000', '--max-sign-queue', '1000', '--max-queue-ms', '60000'] });
}, 120_000);
afterAll(async () => c?.close(), 60_000);

test('property: 1,000 signs over 10 agents and 3 replicas against an organization 24h limit of $10: exactly 100 signed', async () => {
  const orgId = c.bootstrap.org_id;
  await c.admin(0).client.updateOrganization({ orgId, limits: { items: [{ window: '24h', maxUsd: '10' }] } }, c.admin(0).auth);
  const agents: string[] = [];
  for (let i = 0; i < 10; i++) {
    const agentId = await createAgent(c.admin(i % 3), orgId, `org-limit-${i}`);
    await c.admin(i % 3).client.setPolicy({ agentId, allowlist: [RECIPIENT], spendCapUsd: '1000', approvalThresholdUsd: '100' }, c.admin(i % 3).auth);
    agents.push(agentId);
  }
  const urls = c.replicas.map((r) => r.url);
  const body = (i: number): SignBody => ({ agent_id: agents[i % 10]!, type: 'eip3009', chain_id: 8453, recipient_address: RECIPIENT, amount_usd: '0.1' });
  // A 503 wrote nothing: sent again with its Idempotency-Key, as agents do.
  const answers = await Promise.all(Array.from({ length: 1000 }, (_, i) => postSignRetrying(urls, i, c.bootstrap.api_key, body(i), `org-limit-${i}`)));
  expect(answers.filter((a) => a.status !== 200 && a.status !== 403).map((a) => a.text).slice(0, 3)).toEqual([]);
  expect(answers.filter((a) => a.status === 200)).toHaveLength(100);
  expect(answers.filter((a) => a.status === 403).every((a) => a.json.rule?.scope === 'organization')).toBe(true);
  let signed = 0;
  for (const agentId of agents) signed += (await listAllTransactions(c.admin(0), orgId, agentId, 'signed')).length;
  expect(signed).toBe(100);
  const spend = await rest(urls[2]!, 'GET', `/api/agents/${agents[0]}/spend`, { key: c.bootstrap.api_key });
  expect(spend.json.limits.at(-1)).toMatchObject({ scope: 'organization', spent_usd: '10', count: 100 });
}, 180_000);
