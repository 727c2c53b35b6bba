import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { createPublicClient, http, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { adminFor } from './helpers/admin.js';
import { createLocalChain, installMiniUsdc, MINI_USDC_ABI, type LocalChain } from './helpers/localChain.js';
import { postSign, setPolicy } from './helpers/payments.js';
import { startTestServer, type TestServer } from './helpers/server.js';

// Raw transactions are broadcast to the configured node after the settling
// commit, on a real EDR chain served on loopback, against the real server.
const CHAIN = 84532;
const SLOW_CHAIN = 8453;
const USDC_84532: Address = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';
const RECIPIENT: Address = '0x2222222222222222222222222222222222222222';
const START_NONCE = 7;

describe('on-chain submission of raw transactions', () => {
  let chain: LocalChain;
  let node: Awaited<ReturnType<LocalChain['listen']>>;
  let hanging: Server;
  // In front of the node: forwards every call, except that it refuses broadcasts while
  // `refuseSends` is set (a node that answers reads but will not take the transaction now).
  let proxy: Server;
  let refuseSends = false;
  let server: TestServer;
  let pc: ReturnType<typeof createPublicClient>;
  const sign = (key: string, chainId = CHAIN) => postSign(server.url, server.bootstrap.api_key, {
    agent_id: server.bootstrap.agent_id, type: 'raw_transaction', chain_id: chainId, recipient_address: RECIPIENT, amount_usd: '0.25',
  }, key);
  const balance = () => pc.readContract({ address: USDC_84532, abi: MINI_USDC_ABI, functionName: 'balanceOf', args: [RECIPIENT] });

  beforeAll(async () => {
    const deployerKey = generatePrivateKey();
    chain = await createLocalChain({ chainId: CHAIN, accounts: [{ address: privateKeyToAccount(deployerKey).address, balance: 10n ** 20n }] });
    node = await chain.listen();
    // A node that accepts connections and never answers: the slow RPC.
    hanging = createServer(() => {});
    await new Promise<void>((r) => hanging.listen(0, '127.0.0.1', () => r()));
    proxy = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        const call = JSON.parse(body) as { id: unknown; method: string };
        if (refuseSends && call.method === 'eth_sendRawTransaction') {
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: call.id, error: { code: -32000, message: 'not now' } }));
          return;
        }
        fetch(node.url, { method: 'POST', body, headers: { 'content-type': 'application/json' } })
          .then(async (r) => res.writeHead(200, { 'content-type': 'application/json' }).end(await r.text()))
          .catch(() => res.destroy());
      });
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', () => r()));
    server = await startTestServer({
      rpcUrls: new Map([[CHAIN, `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`], [SLOW_CHAIN, `http://127.0.0.1:${(hanging.address() as AddressInfo).port}`]]),
      submitIntervalMs: 50,
    });
    const treasury = server.bootstrap.treasury_address as Address;
    await chain.rpc('hardhat_setBalance', [treasury, '0x56bc75e2d63100000']);
    await installMiniUsdc(chain, USDC_84532, deployerKey, [{ to: treasury, amount: 100_000_000n }]);
    // The treasury has already sent transactions outside this ledger: the chain's nonce is ahead.
    await chain.rpc('hardhat_setNonce', [treasury, `0x${START_NONCE.toString(16)}`]);
    await setPolicy(adminFor(server), server.bootstrap.agent_id, { allowlist: [RECIPIENT], capUsd: '1000', thresholdUsd: '1000' });
    pc = createPublicClient({ transport: http(node.url, { retryCount: 0 }), pollingInterval: 20 });
  }, 30_000);
  afterAll(async () => {
    await server?.close();
    await node?.close();
    hanging?.closeAllConnections();
    hanging?.close();
    proxy?.closeAllConnections();
    proxy?.close();
  });

  test('answers 200 with a tx_hash the node mined, from the chain\'s pending nonce; the recipient gets exactly the amount', async () => {
    const before = await balance();
    const r = await sign('first');
    expect(r.status, r.text).toBe(200);
    expect(Number(r.json.raw_transaction.nonce)).toBe(START_NONCE);
    expect(r.json.tx_hash).toBe(r.json.raw_transaction.hash);
    const receipt = await pc.getTransactionReceipt({ hash: r.json.tx_hash as Hex });
    expect(receipt.status).toBe('success');
    expect(await balance()).toBe(before + 250_000n);
    const repeat = await sign('first');
    expect(repeat.json).toMatchObject({ idempotent: true, tx_hash: r.json.tx_hash });
  });

  test('node down: the treasury balance check cannot be made, so 503 chain_unavailable and nothing is reserved', async () => {
    await node.close();
    let r;
    try {
      r = await sign('while-down');
    } finally {
      node = await chain.listen(node.port);
    }
    expect(r.status, r.text).toBe(503);
    expect(r.json.code).toBe('chain_unavailable');
    // Nothing was written: the same key is a first attempt now, with the next nonce.
    const back = await sign('while-down');
    expect(back.status, back.text).toBe(200);
    expect(back.json.idempotent).toBe(false);
    expect(Number(back.json.raw_transaction.nonce)).toBe(START_NONCE + 1);
    expect((await pc.getTransactionReceipt({ hash: back.json.tx_hash as Hex })).status).toBe('success');
  });

  test('a node that answers but refuses the broadcast: 200 with tx_hash null; the background submitter broadcasts it once accepted and the repeat shows the hash', async () => {
    refuseSends = true;
    let r;
    try {
      r = await sign('refused-send');
      expect(r.status, r.text).toBe(200);
      expect(r.json.tx_hash).toBeNull();
      expect(Number(r.json.raw_transaction.nonce)).toBe(START_NONCE + 2);
      expect((await sign('refused-send')).json.tx_hash).toBeNull();
    } finally {
      refuseSends = false;
    }
    let repeat = await sign('refused-send');
    while (repeat.json.tx_hash === null) {
      await new Promise((res) => setTimeout(res, 25));
      repeat = await sign('refused-send');
    }
    expect(repeat.json.tx_hash).toBe(r.json.raw_transaction.hash);
    expect((await pc.getTransactionReceipt({ hash: repeat.json.tx_hash as Hex })).status).toBe('success');
  });

  test('a node that never answers delays only its own chain\'s payment, never another one', async () => {
    const slow = sign('slow-chain', SLOW_CHAIN);
    let slowDone = false;
    void slow.then(() => { slowDone = true; });
    const started = performance.now();
    const fast = await sign('fast-chain');
    expect(fast.status, fast.text).toBe(200);
    expect(fast.json.tx_hash).toBe(fast.json.raw_transaction.hash);
    expect(slowDone).toBe(false);
    expect(performance.now() - started).toBeLessThan(1_500);
    // The node never answered the treasury balance check: refused, fail-closed, nothing reserved.
    const s = await slow;
    expect(s.status, s.text).toBe(503);
    expect(s.json.code).toBe('chain_unavailable');
  }, 20_000);
});
