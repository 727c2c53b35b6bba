import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { adminFor, createTenant } from '../helpers/admin.js';
import { createLocalChain, installMiniUsdc, type LocalChain } from '../helpers/localChain.js';
import { postSign, setPolicy } from '../helpers/payments.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * A slow node delays only its own chain's payments, and only its own organization's. A node that
 * hangs (on eth_sendRawTransaction only, or on everything) makes every raw payment of its chain
 * hold an agent-gate slot for the RPC timeout (2 s): without bounds, 140 such requests from one
 * organization would fill the whole gate (--max-in-flight 128) and another organization's payment
 * on another chain would be refused 503 overloaded. One organization holds at most three quarters
 * of the gate (--max-in-flight-per-org) and a node that timed out is not asked again for a moment
 * (src/chain/rpc.ts).
 */
const USDC: Address = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';
const R = '0x3333333333333333333333333333333333333333';
let chain: LocalChain; let node: Awaited<ReturnType<LocalChain['listen']>>; let s: TestServer; let proxy: http.Server;
/** Which calls the node leaves unanswered. */
let hang: (method: string) => boolean = () => false;
beforeAll(async () => {
  const k = generatePrivateKey();
  chain = await createLocalChain({ chainId: 84532, accounts: [{ address: privateKeyToAccount(k).address, balance: 10n ** 20n }] });
  node = await chain.listen();
  proxy = http.createServer((req, res) => {
    let b = '';
    req.on('data', (c: Buffer) => (b += c.toString()));
    req.on('end', () => {
      if (hang((JSON.parse(b) as { method: string }).method)) return;
      void fetch(node.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: b }).then((r) => r.text()).then((t) => res.end(t));
    });
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', () => r()));
  s = await startTestServer({ rpcUrls: new Map([[84532, `http://127.0.0.1:${(proxy.address() as AddressInfo).port}/`]]), submitIntervalMs: 5000, logLevel: 'warn' });
  await chain.rpc('hardhat_setBalance', [s.bootstrap.treasury_address, '0x56bc75e2d63100000']);
  await installMiniUsdc(chain, USDC, k, [{ to: s.bootstrap.treasury_address as Address, amount: 1_000_000_000n }]);
  await setPolicy(adminFor(s), s.bootstrap.agent_id, { allowlist: [R], capUsd: '1000', thresholdUsd: '1000' });
}, 30_000);
afterAll(async () => { await s?.close(); await node?.close(); proxy.closeAllConnections(); proxy.close(); });

describe('a slow node', () => {
  test.each([
    ['hangs on eth_sendRawTransaction', (m: string) => m === 'eth_sendRawTransaction'],
    ['hangs on every call', () => true],
  ])('error: a node that %s delays only its own chain: another organization\'s payment on another chain is signed', async (name, which) => {
    const other = await createTenant(adminFor(s), `other-${name.replace(/\W+/g, '-')}`);
    await setPolicy(adminFor(s), other.agentId, { allowlist: [R], capUsd: '1000', thresholdUsd: '1000' });
    await adminFor(s).client.provisionTreasury({ orgId: other.orgId }, adminFor(s).auth);
    hang = which;
    const raws = Array.from({ length: 140 }, (_, i) => postSign(s.url, s.bootstrap.api_key, {
      agent_id: s.bootstrap.agent_id, type: 'raw_transaction', chain_id: 84532, recipient_address: R, amount_usd: '0.01',
    }, `slow-${name.replace(/\W+/g, '-')}-${i}`));
    await new Promise((r) => setTimeout(r, 700));
    const elsewhere = await postSign(s.url, other.apiKey, { agent_id: other.agentId, type: 'eip3009', chain_id: 8453, recipient_address: R, amount_usd: '0.01' }, 'elsewhere');
    const answers = await Promise.all(raws);
    hang = () => false;
    expect(elsewhere.status, elsewhere.text).toBe(200);
    // The raw payments themselves: signed (their hash may come later) or refused with nothing written.
    for (const r of answers) expect([200, 503], r.text).toContain(r.status);
    for (const r of answers.filter((x) => x.status === 503)) expect(['chain_unavailable', 'overloaded']).toContain(r.json.code);
  }, 30_000);
});
