import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { adminFor, createAgent } from '../helpers/admin.js';
import { postSign, setPolicy } from '../helpers/payments.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startTempoRpc, type TempoRpc } from '../helpers/tempoRpc.js';

/**
 * A node that lies about the treasury's pending nonce. The ledger's nonce counter never goes
 * down, so believing one absurd answer would leave every later raw transaction of the treasury
 * with a nonce no chain will ever mine.
 */

const RECIPIENT = '0x4444444444444444444444444444444444444444';
let node: TempoRpc;
let answers: Record<string, unknown>;
let s: TestServer;
let agentId: string;

beforeAll(async () => {
  // Plenty of USDC (balanceOf through eth_call) and ETH, so the treasury balance check passes.
  answers = {
    eth_getTransactionCount: '0x1fffffffffffff', eth_chainId: '0x2105', eth_blockNumber: '0x1',
    eth_getBalance: '0xde0b6b3a7640000', eth_call: `0x${(10n ** 12n).toString(16).padStart(64, '0')}`,
  };
  node = await startTempoRpc(answers);
  s = await startTestServer({ logLevel: 'warn', rpcUrls: new Map([[8453, node.url]]) });
  agentId = await createAgent(adminFor(s), s.bootstrap.org_id, 'hostile-node');
  await setPolicy(adminFor(s), agentId, { allowlist: [RECIPIENT], capUsd: '10', thresholdUsd: '10' });
});
afterAll(async () => {
  await s?.close();
  await node?.close();
});

const pay = (key: string) => postSign(s.url, s.bootstrap.api_key, {
  agent_id: agentId, type: 'raw_transaction', chain_id: 8453, recipient_address: RECIPIENT, amount_usd: '0.01',
}, key);

describe('nonce floor from the node', () => {
  test('error: a pending nonce implausibly far ahead of the ledger is not believed; a plausible one later is', async () => {
    const first = await pay('hostile-1');
    expect(first.status, first.text).toBe(200);
    expect(first.json.raw_transaction.nonce).toBe('0');
    expect(s.logs.some((l) => l.includes('implausibly far ahead'))).toBe(true);

    answers.eth_getTransactionCount = '0x9';
    const second = await pay('hostile-2');
    expect(second.status, second.text).toBe(200);
    expect(second.json.raw_transaction.nonce).toBe('9');
  });
});
