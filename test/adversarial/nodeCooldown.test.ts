import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { adminFor } from '../helpers/admin.js';
import { createLocalChain, installMiniUsdc, type LocalChain } from '../helpers/localChain.js';
import { postSign, setPolicy } from '../helpers/payments.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { NODE_COOLDOWN_MS } from '../../src/chain/rpc.js';

/**
 * A node that stops answering made every raw payment of its chain wait the whole RPC timeout (2 s)
 * while holding a request slot, so a burst of them filled the agent gate. After one such failure
 * the chain's node is not asked again for NODE_COOLDOWN_MS: raw payments there are refused at once
 * (503 chain_unavailable, nothing written), then one call probes it and the first answer lets the
 * others through. Payments that need no node are never affected.
 *
 * The node here sits behind Basic authentication, configured as user:password in the URL: the
 * credentials travel in an Authorization header and never reach a log line.
 */
const CHAIN = 84532;
const USDC: Address = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';
const RECIPIENT: Address = '0x9999999999999999999999999999999999999999';
const PASSWORD = 's3cret-node-pass';

let hang = false;
const seenAuth: Array<string | undefined> = [];
let chain: LocalChain;
let node: Awaited<ReturnType<LocalChain['listen']>>;
let proxy: http.Server;
let s: TestServer;

beforeAll(async () => {
  const deployerKey = generatePrivateKey();
  chain = await createLocalChain({ chainId: CHAIN, accounts: [{ address: privateKeyToAccount(deployerKey).address, balance: 10n ** 20n }] });
  node = await chain.listen();
  // A node behind Basic authentication that can be made to hang.
  proxy = http.createServer((req, res) => {
    seenAuth.push(req.headers.authorization);
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      if (req.headers.authorization !== `Basic ${Buffer.from(`paypolicy:${PASSWORD}`).toString('base64')}`) {
        res.writeHead(401).end();
        return;
      }
      if (hang) return;
      void fetch(node.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body }).then((r) => r.text()).then((t) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(t);
      });
    });
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', () => r()));
  const url = `http://paypolicy:${PASSWORD}@127.0.0.1:${(proxy.address() as AddressInfo).port}/`;
  s = await startTestServer({ rpcUrls: new Map([[CHAIN, url]]), submitIntervalMs: 60_000, logLevel: 'debug' });
  await chain.rpc('hardhat_setBalance', [s.bootstrap.treasury_address, '0x56bc75e2d63100000']);
  await installMiniUsdc(chain, USDC, deployerKey, [{ to: s.bootstrap.treasury_address as Address, amount: 100_000_000n }]);
  await setPolicy(adminFor(s), s.bootstrap.agent_id, { allowlist: [RECIPIENT], capUsd: '1000', thresholdUsd: '1000' });
}, 30_000);
afterAll(async () => {
  await s?.close();
  await node?.close();
  proxy?.closeAllConnections();
  await new Promise<void>((r) => (proxy ? proxy.close(() => r()) : r()));
});

const pay = (type: 'raw_transaction' | 'eip3009', key: string) => postSign(s.url, s.bootstrap.api_key, {
  agent_id: s.bootstrap.agent_id, type, chain_id: CHAIN, recipient_address: RECIPIENT, amount_usd: '0.01',
}, key);

describe('a node behind Basic authentication that stops answering', () => {
  test('credentials in the URL are sent as Basic authentication: a raw payment is submitted', async () => {
    const r = await pay('raw_transaction', 'auth-ok');
    expect(r.status, r.text).toBe(200);
    expect(r.json.tx_hash).toBe(r.json.raw_transaction.hash);
    expect(seenAuth.length).toBeGreaterThan(0);
    expect(seenAuth.every((a) => a?.startsWith('Basic '))).toBe(true);
    expect(s.logs.join('\n')).not.toContain(PASSWORD);
  });

  test('after one timeout, raw payments on that chain are refused at once until the node answers again; others are unaffected', async () => {
    hang = true;
    let started = performance.now();
    const first = await pay('raw_transaction', 'hang-1');
    expect(first.status, first.text).toBe(503);
    expect(first.json.code).toBe('chain_unavailable');
    expect(performance.now() - started).toBeGreaterThan(1_500); // it did wait for the node once
    // At most one of them (a probe, should the cooldown run out meanwhile) waits for the node.
    const timed = (i: number) => {
      const t0 = performance.now();
      return pay('raw_transaction', `hang-burst-${i}`).then((r) => ({ r, ms: performance.now() - t0 }));
    };
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => timed(i)));
    expect(results.filter((x) => x.ms > 1_500).length).toBeLessThanOrEqual(1);
    const burst = results.map((x) => x.r);
    for (const r of burst) {
      expect(r.status, r.text).toBe(503);
      expect(r.json.code).toBe('chain_unavailable');
    }
    const elsewhere = await pay('eip3009', 'no-node-needed');
    expect(elsewhere.status, elsewhere.text).toBe(200);
    // Nothing was written for the refused ones: the same keys are first attempts later.
    hang = false;
    await new Promise((r) => setTimeout(r, NODE_COOLDOWN_MS + 200));
    const again = await pay('raw_transaction', 'hang-burst-0');
    expect(again.status, again.text).toBe(200);
    expect(again.json.idempotent).toBe(false);
    expect(again.json.tx_hash).toBe(again.json.raw_transaction.hash);
    expect(s.logs.join('\n')).not.toContain(PASSWORD);
  }, 30_000);
});
