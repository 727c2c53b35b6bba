import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { adminFor } from '../helpers/admin.js';
import { createLocalChain, installMiniUsdc, type LocalChain } from '../helpers/localChain.js';
import { postSign, setPolicy } from '../helpers/payments.js';
import { startRpcProxy } from '../helpers/rpcProxy.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * A backlog of signed raw transactions waiting for broadcast (the node refused broadcasts for a
 * while) is sent in one pass of the background submitter, not 100 rows per interval: with the
 * default 5 s interval a backlog of thousands took minutes to drain while every new payment of
 * the chain queued behind it. The restarted server here has a one-minute interval, so only its
 * first pass can have sent them.
 */
const CHAIN = 84532;
const USDC: Address = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';
const RECIPIENT: Address = '0x8888888888888888888888888888888888888888';
const BACKLOG = 150;

let refuse = true;
let chain: LocalChain;
let node: Awaited<ReturnType<LocalChain['listen']>>;
let proxy: Awaited<ReturnType<typeof startRpcProxy>> | undefined;
let s: TestServer;
let proxyUrl: string;

async function startProxy(target: string): Promise<string> {
  proxy = await startRpcProxy(target, async ({ msg, forward }) => refuse && msg.method === 'eth_sendRawTransaction'
    ? { jsonrpc: '2.0', id: msg.id, error: { code: -32000, message: 'temporarily not accepting transactions' } }
    : forward());
  return proxy.url;
}

beforeAll(async () => {
  const deployerKey = generatePrivateKey();
  chain = await createLocalChain({ chainId: CHAIN, accounts: [{ address: privateKeyToAccount(deployerKey).address, balance: 10n ** 20n }] });
  node = await chain.listen();
  proxyUrl = await startProxy(node.url);
  s = await startTestServer({ rpcUrls: new Map([[CHAIN, proxyUrl]]), submitIntervalMs: 60_000, logLevel: 'warn' });
  await chain.rpc('hardhat_setBalance', [s.bootstrap.treasury_address, '0x56bc75e2d63100000']);
  await installMiniUsdc(chain, USDC, deployerKey, [{ to: s.bootstrap.treasury_address as Address, amount: 100_000_000n }]);
  await setPolicy(adminFor(s), s.bootstrap.agent_id, { allowlist: [RECIPIENT], capUsd: '1000', thresholdUsd: '1000' });
}, 30_000);
afterAll(async () => {
  await s?.close();
  await node?.close();
  await proxy?.close();
});

describe('a backlog waiting for broadcast', () => {
  test(`${BACKLOG} rows left pending are all sent by the first pass after a restart`, async () => {
    const pay = (i: number) => postSign(s.url, s.bootstrap.api_key, {
      agent_id: s.bootstrap.agent_id, type: 'raw_transaction', chain_id: CHAIN, recipient_address: RECIPIENT, amount_usd: '0.01',
    }, `backlog-${i}`);
    for (let i = 0; i < BACKLOG; i += 10) {
      const batch = await Promise.all(Array.from({ length: 10 }, (_, j) => pay(i + j)));
      for (const r of batch) {
        expect(r.status, r.text).toBe(200);
        expect(r.json.tx_hash).toBeNull();
      }
    }
    const treasury = s.bootstrap.treasury_address as Address;
    expect(Number(await chain.rpc('eth_getTransactionCount', [treasury, 'latest']))).toBe(0);
    const { dataDir } = s;
    await s.close({ keepData: true });
    refuse = false;
    s = await startTestServer({ dataDir, rpcUrls: new Map([[CHAIN, proxyUrl]]), submitIntervalMs: 60_000, logLevel: 'warn' });
    for (const until = Date.now() + 15_000; Number(await chain.rpc('eth_getTransactionCount', [treasury, 'latest'])) < BACKLOG;) {
      if (Date.now() > until) throw new Error(`only ${Number(await chain.rpc('eth_getTransactionCount', [treasury, 'latest']))} of ${BACKLOG} were sent`);
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(Number(await chain.rpc('eth_getTransactionCount', [treasury, 'latest']))).toBe(BACKLOG);
  }, 60_000);
});
