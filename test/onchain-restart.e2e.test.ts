import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import { createPublicClient, http, keccak256, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { adminFor } from './helpers/admin.js';
import { createLocalChain, installMiniUsdc, MINI_USDC_ABI, type LocalChain } from './helpers/localChain.js';
import { postSign, setPolicy } from './helpers/payments.js';
import { startTestServer, type TestServer } from './helpers/server.js';

/**
 * Raw-transaction nonces survive a restart of paypolicy and of the node, on a real EDR
 * chain served on loopback and the real server. Each test has a chain of its own.
 */
const CHAIN = 84532;
const USDC: Address = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';
const RECIPIENT: Address = '0x3333333333333333333333333333333333333333';
const AMOUNT_MICROS = 250_000n;

type Node = Awaited<ReturnType<LocalChain['listen']>>;
const cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

async function newChain(): Promise<{ chain: LocalChain; deployerKey: Hex }> {
  const deployerKey = generatePrivateKey();
  const chain = await createLocalChain({ chainId: CHAIN, accounts: [{ address: privateKeyToAccount(deployerKey).address, balance: 10n ** 20n }] });
  return { chain, deployerKey };
}

/** Gas and USDC for the treasury (so the treasury balance check passes), and a policy that signs. */
async function fundAndOpen(chain: LocalChain, deployerKey: Hex, s: TestServer): Promise<void> {
  await chain.rpc('hardhat_setBalance', [s.bootstrap.treasury_address, '0x56bc75e2d63100000']);
  await installMiniUsdc(chain, USDC, deployerKey, [{ to: s.bootstrap.treasury_address as Address, amount: 1_000_000_000n }]);
  await setPolicy(adminFor(s), s.bootstrap.agent_id, { allowlist: [RECIPIENT], capUsd: '1000', thresholdUsd: '1000' });
}

function signRaw(s: TestServer, key: string) {
  return postSign(s.url, s.bootstrap.api_key, { agent_id: s.bootstrap.agent_id, type: 'raw_transaction', chain_id: CHAIN, recipient_address: RECIPIENT, amount_usd: '0.25' }, key);
}

function reader(url: string) {
  const pc = createPublicClient({ transport: http(url, { retryCount: 0 }) });
  return {
    pc,
    balance: () => pc.readContract({ address: USDC, abi: MINI_USDC_ABI, functionName: 'balanceOf', args: [RECIPIENT] }),
    minedCount: (a: string) => pc.getTransactionCount({ address: a as Address, blockTag: 'latest' }),
    receipt: (hash: string) => pc.getTransactionReceipt({ hash: hash as Hex }),
  };
}

/** Repeats a payment's request (same Idempotency-Key) until its tx_hash is known. */
async function untilHash(s: TestServer, key: string, timeoutMs = 10_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await signRaw(s, key);
    expect(r.status, r.text).toBe(200);
    if (r.json.tx_hash) return r.json.tx_hash as string;
    if (Date.now() > deadline) throw new Error(`${key}: no tx_hash after ${timeoutMs} ms`);
    await new Promise((res) => setTimeout(res, 25));
  }
}

describe('raw-transaction nonces across restarts', () => {
  test('behavior: after a paypolicy restart on the same data directory, nonces continue with no gap and no reuse, and every transaction is mined', async () => {
    const { chain, deployerKey } = await newChain();
    const node = await chain.listen();
    cleanup.push(() => node.close());
    const dataDir = mkdtempSync(join(tmpdir(), 'paypolicy-restart-'));
    cleanup.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const rpcUrls = new Map([[CHAIN, node.url]]);
    let s = await startTestServer({ dataDir, rpcUrls, submitIntervalMs: 50, logLevel: 'warn' });
    let running: TestServer | undefined = s;
    cleanup.push(() => running?.close({ keepData: true }));
    await fundAndOpen(chain, deployerKey, s);
    const treasury = s.bootstrap.treasury_address;
    const { balance, minedCount, receipt } = reader(node.url);
    const before = await balance();

    const answers: Array<{ key: string; nonce: number; hash: string; txHash: string }> = [];
    for (let i = 0; i < 3; i++) {
      const r = await signRaw(s, `before-${i}`);
      expect(r.status, r.text).toBe(200);
      answers.push({ key: `before-${i}`, nonce: Number(r.json.raw_transaction.nonce), hash: r.json.raw_transaction.hash, txHash: r.json.tx_hash });
    }
    await s.close({ keepData: true });
    running = undefined;
    s = await startTestServer({ dataDir, rpcUrls, submitIntervalMs: 50, logLevel: 'warn' });
    running = s;
    expect(s.bootstrap.treasury_address).toBe(treasury);
    // A repeat of a payment from before the restart answers the same transaction, not a new one.
    const repeat = await signRaw(s, 'before-0');
    expect(repeat.json).toMatchObject({ idempotent: true, tx_hash: answers[0]!.txHash });
    for (let i = 0; i < 3; i++) {
      const r = await signRaw(s, `after-${i}`);
      expect(r.status, r.text).toBe(200);
      answers.push({ key: `after-${i}`, nonce: Number(r.json.raw_transaction.nonce), hash: r.json.raw_transaction.hash, txHash: r.json.tx_hash });
    }

    expect(answers.map((a) => a.nonce)).toEqual([0, 1, 2, 3, 4, 5]);
    for (const a of answers) {
      expect(a.txHash, a.key).toBe(a.hash);
      expect((await receipt(a.txHash)).status, a.key).toBe('success');
    }
    expect(await minedCount(treasury)).toBe(6);
    expect(await balance()).toBe(before + 6n * AMOUNT_MICROS);
  });

  test('behavior: a node that restarts: payments signed while it would not take broadcasts are sent in nonce order once it is back, none lost', async () => {
    const { chain, deployerKey } = await newChain();
    let node: Node = await chain.listen();
    cleanup.push(() => node.close());
    // In front of the node: while `restarting`, broadcasts get their connection dropped (the node
    // process going away mid-request) while reads still reach it. A node fully down refuses
    // signing altogether (the treasury balance check fails closed: 503, nothing written), so
    // this is how payments come to be signed while their broadcast cannot happen.
    let restarting = false;
    const broadcasts: string[] = [];
    const proxy: Server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        const call = JSON.parse(body) as { method: string; params?: unknown[] };
        if (call.method === 'eth_sendRawTransaction') {
          if (restarting) return void res.destroy();
          broadcasts.push(String(call.params?.[0]));
        }
        fetch(node.url, { method: 'POST', body, headers: { 'content-type': 'application/json' } })
          .then(async (r) => res.writeHead(200, { 'content-type': 'application/json' }).end(await r.text()))
          .catch(() => res.destroy());
      });
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', () => r()));
    cleanup.push(() => {
      proxy.closeAllConnections();
      proxy.close();
    });
    const s = await startTestServer({ rpcUrls: new Map([[CHAIN, `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`]]), submitIntervalMs: 50, logLevel: 'warn' });
    cleanup.push(() => s.close());
    await fundAndOpen(chain, deployerKey, s);
    const { balance, minedCount, receipt, pc } = reader(node.url);
    const before = await balance();

    const first = await signRaw(s, 'up');
    expect(first.status, first.text).toBe(200);
    expect(first.json.tx_hash).toBe(first.json.raw_transaction.hash);

    restarting = true;
    const down: Array<{ key: string; nonce: number; hash: string }> = [];
    for (let i = 0; i < 4; i++) {
      const r = await signRaw(s, `down-${i}`);
      expect(r.status, r.text).toBe(200);
      expect(r.json.tx_hash).toBeNull();
      down.push({ key: `down-${i}`, nonce: Number(r.json.raw_transaction.nonce), hash: r.json.raw_transaction.hash });
    }
    expect(down.map((d) => d.nonce)).toEqual([1, 2, 3, 4]);
    // The node itself restarts on the same port (EDR's state is in memory, so it stays).
    await node.close();
    node = await chain.listen(node.port);
    const sentBefore = broadcasts.length;
    restarting = false;

    for (const d of down) expect(await untilHash(s, d.key)).toBe(d.hash);
    const blocks: bigint[] = [];
    for (const d of down) {
      const rec = await receipt(d.hash);
      expect(rec.status, d.key).toBe('success');
      blocks.push(rec.blockNumber);
    }
    // In nonce order: each in a block no earlier than the previous nonce's (automining: one block each).
    expect([...blocks].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))).toEqual(blocks);
    // After the restart the waiting ones go out lowest nonce first. A transaction may go out more
    // than once (a broadcast whose answer was lost is repeated): always its own signed bytes,
    // never a new signature for its nonce.
    const resent = broadcasts.slice(sentBefore).map((raw) => down.findIndex((d) => raw.length > 0 && d.hash === hashOf(raw)));
    expect(resent.filter((i) => i < 0)).toEqual([]);
    expect([...new Set(resent)]).toEqual([0, 1, 2, 3]);
    expect(await minedCount(s.bootstrap.treasury_address)).toBe(5);
    expect(await balance()).toBe(before + 5n * AMOUNT_MICROS);
    const pending = Number(await pc.request({ method: 'eth_getTransactionCount', params: [s.bootstrap.treasury_address as Address, 'pending'] }));
    expect(pending).toBe(5);
  });

  test('behavior: a node that restarts with its mempool lost: the submitted transactions it forgot are broadcast again (the same bytes) and mined, in nonce order, none lost', async () => {
    const { chain, deployerKey } = await newChain();
    let node: Node = await chain.listen();
    cleanup.push(() => node.close());
    const s = await startTestServer({ rpcUrls: new Map([[CHAIN, node.url]]), submitIntervalMs: 50, logLevel: 'warn' });
    cleanup.push(() => s.close());
    await fundAndOpen(chain, deployerKey, s);
    const { balance, minedCount, receipt } = reader(node.url);
    const before = await balance();
    // Blocks only when the test says: accepted transactions wait in the mempool.
    await chain.rpc('evm_setAutomine', [false]);
    const sent: Array<{ key: string; nonce: number; hash: string }> = [];
    for (let i = 0; i < 3; i++) {
      const r = await signRaw(s, `pooled-${i}`);
      expect(r.status, r.text).toBe(200);
      expect(r.json.tx_hash).toBe(r.json.raw_transaction.hash);
      sent.push({ key: `pooled-${i}`, nonce: Number(r.json.raw_transaction.nonce), hash: r.json.tx_hash });
    }
    expect(sent.map((t) => t.nonce)).toEqual([0, 1, 2]);
    // The node restarts and its mempool is gone (EDR: the listener closes, the pending
    // transactions are dropped); the chain's state stays.
    await node.close();
    for (const t of sent) await chain.rpc('hardhat_dropTransaction', [t.hash]);
    expect(await chain.rpc('eth_getTransactionByHash', [sent[0]!.hash])).toBeNull();
    node = await chain.listen(node.port);
    // The tracker finds them unknown to the node and sends them again: back in the mempool.
    const deadline = Date.now() + 10_000;
    while ((await Promise.all(sent.map((t) => chain.rpc('eth_getTransactionByHash', [t.hash])))).some((tx) => tx === null)) {
      if (Date.now() > deadline) throw new Error('the dropped transactions were not broadcast again within 10 s');
      await new Promise((res) => setTimeout(res, 25));
    }
    await chain.rpc('evm_mine', []);
    const blocks: bigint[] = [];
    for (const t of sent) {
      const rec = await receipt(t.hash);
      expect(rec.status, t.key).toBe('success');
      blocks.push(rec.blockNumber);
    }
    expect(new Set(blocks).size).toBe(1); // one block, in nonce order by construction of the chain
    expect(await minedCount(s.bootstrap.treasury_address)).toBe(3);
    expect(await balance()).toBe(before + 3n * AMOUNT_MICROS);
    for (const t of sent) expect((await signRaw(s, t.key)).json.tx_hash).toBe(t.hash);
  });
});

/** The transaction hash of a serialized signed transaction (keccak256 of its bytes). */
function hashOf(serialized: string): string {
  return keccak256(serialized as Hex);
}
