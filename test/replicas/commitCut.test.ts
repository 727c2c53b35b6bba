import { createServer, connect, type Server, type AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { type Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { createLocalChain, installMiniUsdc, type LocalChain } from '../helpers/localChain.js';
import { createAgent } from '../helpers/admin.js';
import { listAllTransactions, postSign, setPolicy, usdToMicros, type SignBody } from '../helpers/payments.js';
import type { RestResult } from '../helpers/server.js';
import { startCluster, type Cluster } from '../helpers/replicas.js';

/**
 * Replica 0 reaches PostgreSQL through a relay that cuts the
 * connection on every third COMMIT, alternately before the COMMIT reaches the server (rolled back)
 * and right after (committed, the answer lost). Clients retry a 503 or a broken connection with
 * the same Idempotency-Key on replicas 1 and 2 (direct). Every key ends with one outcome, every
 * 200 a client saw is the final outcome, nothing is paid twice, the cap holds and raw nonces are
 * unique.
 */

const CHAIN = 84532;
const USDC_84532: Address = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';
const RECIPIENT: Address = '0x2222222222222222222222222222222222222222';
const COMMIT = Buffer.from('COMMIT\0');

let chain: LocalChain;
let node: Awaited<ReturnType<LocalChain['listen']>>;
let relay: Server;
let commits = 0;
let cuts = 0;
let c: Cluster;

beforeAll(async () => {
  relay = createServer((client) => {
    const server = connect(5432, '127.0.0.1');
    for (const s of [client, server]) s.on('error', () => {});
    server.pipe(client);
    client.on('data', (chunk: Buffer) => {
      if (chunk.includes(COMMIT) && ++commits % 3 === 0) {
        cuts++;
        if (cuts % 2 === 0) {
          client.destroy();
          server.destroy();
          return;
        }
        server.write(chunk, () => setTimeout(() => {
          client.destroy();
          server.destroy();
        }, 1));
        return;
      }
      server.write(chunk);
    });
    client.on('close', () => server.destroy());
    server.on('close', () => client.destroy());
  });
  await new Promise<void>((r) => relay.listen(0, '127.0.0.1', () => r()));
  const port = (relay.address() as AddressInfo).port;
  const deployerKey = generatePrivateKey();
  chain = await createLocalChain({ chainId: CHAIN, accounts: [{ address: privateKeyToAccount(deployerKey).address, balance: 10n ** 20n }] });
  node = await chain.listen();
  c = await startCluster({ replicas: 3, env: { PAYPOLICY_STALE_SIGNING_MS: '5000' }, args: ['--rpc-url', `${CHAIN}=${node.url}`, '--max-in-flight', '1000', '--max-sign-queue', '1000', '--max-queue-ms', '5000'] });
  // Replica 0 restarted behind the relay (same database, same data directory).
  await c.kill(0);
  await c.start(0, { env: { PAYPOLICY_DATABASE_URL: c.db.url.replace('127.0.0.1:5432', `127.0.0.1:${port}`) } });
  const treasury = c.bootstrap.treasury_address as Address;
  await chain.rpc('hardhat_setBalance', [treasury, '0x56bc75e2d63100000']);
  await installMiniUsdc(chain, USDC_84532, deployerKey, [{ to: treasury, amount: 1_000_000_000n }]);
}, 120_000);
afterAll(async () => {
  await c?.close();
  await node?.close();
  relay?.close();
}, 60_000);

test('COMMITs cut mid-flight on one replica: one outcome per key, no acknowledged payment lost, nothing twice', async () => {
  const agentId = await createAgent(c.admin(1), c.bootstrap.org_id, 'cut');
  await setPolicy(c.admin(1), agentId, { allowlist: [RECIPIENT], capUsd: '3.00', thresholdUsd: '5' });
  const body = (i: number): SignBody => ({ agent_id: agentId, type: i % 2 === 0 ? 'eip3009' : 'raw_transaction', chain_id: CHAIN, recipient_address: RECIPIENT, amount_usd: '0.03' });
  const N = 150;
  const seen = new Map<number, RestResult[]>();
  await Promise.all(Array.from({ length: N }, async (_, i) => {
    const list: RestResult[] = [];
    seen.set(i, list);
    for (let attempt = 0; attempt < 400; attempt++) {
      const url = c.replicas[attempt === 0 ? 0 : 1 + (attempt % 2)]!.url;
      let r: RestResult;
      try {
        r = await postSign(url, c.bootstrap.api_key, body(i), `cut-${i}`);
      } catch {
        continue;
      }
      list.push(r);
      if (r.status === 503 || (r.status === 409 && r.json?.code === 'in_progress')) {
        await new Promise((res) => setTimeout(res, 100));
        continue;
      }
      return;
    }
  }));
  expect(cuts).toBeGreaterThan(3);
  const rows = await listAllTransactions(c.admin(2), c.bootstrap.org_id, agentId);
  const problems: string[] = [];
  for (const [i, list] of seen) {
    const final = list[list.length - 1];
    if (!final || final.status === 503 || (final.status === 409 && final.json?.code !== 'signing_failed')) problems.push(`key ${i}: no final outcome (${list.map((r) => r.status)}) ${final?.text}`);
    const oks = list.filter((r) => r.status === 200);
    if (new Set(oks.map((r) => r.json.transaction_id)).size > 1) problems.push(`key ${i}: two transactions ${oks.map((r) => r.json.transaction_id)}`);
    if (new Set(oks.map((r) => r.json.signature ?? r.json.raw_transaction?.hash)).size > 1) problems.push(`key ${i}: two signatures`);
    if (oks.length > 0 && final!.status !== 200) problems.push(`key ${i}: answered 200 then ${final!.status} ${final!.text}`);
  }
  expect(problems.slice(0, 5), `cuts ${cuts}`).toEqual([]);
  expect(rows.length).toBe(N);
  const okRaw = [...seen.values()].map((l) => l[l.length - 1]!).filter((r) => r.status === 200 && r.json.raw_transaction);
  const nonces = okRaw.map((r) => Number(r.json.raw_transaction.nonce));
  expect(new Set(nonces).size).toBe(nonces.length);
  const held = rows.filter((t) => t.status !== 'denied' && (t.status as string) !== 'failed');
  expect(held.reduce((s, t) => s + usdToMicros(t.amountUsd), 0n)).toBeLessThanOrEqual(3_000_000n);
}, 180_000);
