import { fdatasync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { AdminService, Decision } from '../../gen/paypolicy/v1/admin_pb.js';
import { createWalSync } from '../../src/store/walSync.js';
import { createWriteQueue } from '../../src/store/writeQueue.js';
import { adminFor } from '../helpers/admin.js';
import { connectClient } from '../helpers/clients.js';
import { createLocalChain, installMiniUsdc, type LocalChain } from '../helpers/localChain.js';
import { postSign, setPolicy } from '../helpers/payments.js';
import { bearer } from '../helpers/rpc.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * Invariant 2 for on-chain submission: the background submitter reads rows waiting for broadcast
 * outside the write queue, so it can see a settled raw transaction whose group commit is still
 * being synced. Here the server's WAL sync is held like a slow disk: the node must not receive
 * the transaction until the sync that covers its row has finished.
 */
const CHAIN = 84532;
const RECIPIENT: Address = '0x2222222222222222222222222222222222222222';
const USDC_84532: Address = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';

let chain: LocalChain;
let node: Awaited<ReturnType<LocalChain['listen']>>;
let s: TestServer;

beforeAll(async () => {
  const deployerKey = generatePrivateKey();
  chain = await createLocalChain({ chainId: CHAIN, accounts: [{ address: privateKeyToAccount(deployerKey).address, balance: 10n ** 20n }] });
  node = await chain.listen();
  s = await startTestServer({ rpcUrls: new Map([[CHAIN, node.url]]), submitIntervalMs: 10, logLevel: 'warn' });
  await chain.rpc('hardhat_setBalance', [s.bootstrap.treasury_address, '0x56bc75e2d63100000']);
  // USDC too: a raw transaction is signed only when the treasury can pay it (app/payments/funds.ts).
  await installMiniUsdc(chain, USDC_84532, deployerKey, [{ to: s.bootstrap.treasury_address as Address, amount: 100_000_000n }]);
  await setPolicy(adminFor(s), s.bootstrap.agent_id, { allowlist: [RECIPIENT], capUsd: '1000', thresholdUsd: '0.1' });
}, 30_000);
afterAll(async () => {
  await s?.close();
  await node?.close();
});

describe('nonces of approved raw transactions', () => {
  test('behavior: a raw transaction signed on approval starts from the chain\'s pending nonce, like a direct one', async () => {
    const treasury = s.bootstrap.treasury_address;
    // The treasury sent transactions outside this ledger: the chain is ahead of it.
    await chain.rpc('hardhat_setNonce', [treasury, '0x9']);
    const r = await postSign(s.url, s.bootstrap.api_key, {
      agent_id: s.bootstrap.agent_id, type: 'raw_transaction', chain_id: CHAIN, recipient_address: RECIPIENT, amount_usd: '0.25',
    }, 'approved-nonce');
    expect(r.status, r.text).toBe(202);
    await connectClient(AdminService, s.url).decideApproval({ id: r.json.approval_request_id, decision: Decision.APPROVE, note: '', decidedBy: 'alice' }, bearer(s.bootstrap.admin_token));
    const collected = await postSign(s.url, s.bootstrap.api_key, {
      agent_id: s.bootstrap.agent_id, type: 'raw_transaction', chain_id: CHAIN, recipient_address: RECIPIENT, amount_usd: '0.25',
    }, 'approved-nonce');
    expect(collected.status, collected.text).toBe(200);
    expect(Number(collected.json.raw_transaction.nonce)).toBe(9);
  });
});

describe('submission durability', () => {
  test('behavior: the background submitter broadcasts an approved raw transaction only after its settling commit is synced', async () => {
    const r = await postSign(s.url, s.bootstrap.api_key, {
      agent_id: s.bootstrap.agent_id, type: 'raw_transaction', chain_id: CHAIN, recipient_address: RECIPIENT, amount_usd: '0.25',
    }, 'held-submit');
    expect(r.status, r.text).toBe(202);

    const held: Array<() => void> = [];
    let asked: (() => void) | undefined;
    const store = s.app.store;
    const original = store.writes;
    store.writes = createWriteQueue(store.db, createWalSync(join(s.dataDir, 'paypolicy.db-wal'), (fd, done) => {
      held.push(() => fdatasync(fd, done));
      asked?.();
    }), store.tx);
    const treasuryTxs = async () => Number(await chain.rpc('eth_getTransactionCount', [s.bootstrap.treasury_address, 'pending']));
    const before = await treasuryTxs();
    const admin = connectClient(AdminService, s.url);
    const decided = admin.decideApproval({ id: r.json.approval_request_id, decision: Decision.APPROVE, note: '', decidedBy: 'alice' }, bearer(s.bootstrap.admin_token));
    // The decision and the settle of the signed row: the second's sync is held.
    const syncs = async (n: number) => { while (held.length < n) await new Promise<void>((res) => (asked = res)); };
    await syncs(1);
    held[0]!();
    await syncs(2);
    expect(store.payments.get(r.json.transaction_id)?.status).toBe('signed'); // committed, not yet on disk
    // Give the submitter (every 10 ms) many passes while the sync is held.
    await new Promise((res) => setTimeout(res, 300));
    expect(await treasuryTxs()).toBe(before);

    for (let i = 1; i < held.length; i++) held[i]!();
    let n = held.length;
    await decided;
    // Once synced, the submitter broadcasts it (later syncs are let through as they come).
    while ((await treasuryTxs()) === before) {
      while (n < held.length) held[n++]!();
      await new Promise((res) => setTimeout(res, 10));
    }
    while (n < held.length) held[n++]!();
    expect(await treasuryTxs()).toBe(before + 1);
    store.writes = original;
  }, 20_000);
});
