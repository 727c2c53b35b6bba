import Database from 'better-sqlite3';
import { join } from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import { createPublicClient, http, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { createLocalChain, installMiniUsdc, type LocalChain } from '../helpers/localChain.js';
import { postSign, setPolicy } from '../helpers/payments.js';
import { LONG } from './config.js';
import { rigPerTest, type FaultRig } from './harness.js';

/**
 * No nonce gaps after a crash mid-load. The real `paypolicy serve` process, configured
 * with --rpc-url for a local EDR chain, takes concurrent raw_transaction payments and is killed
 * with SIGKILL in the middle, then restarted on the same data directory while the clients retry
 * what was not answered (same Idempotency-Key). Afterwards, on the node: the treasury's
 * transactions are all mined with no nonce left waiting, every 200 given before the kill is on
 * chain, and every ledger row has exactly one mined transaction (its own hash).
 */
const newRig = rigPerTest();
const CHAIN = 84532;
const USDC: Address = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';
const RECIPIENT: Address = '0x4444444444444444444444444444444444444444';
const CRASHES = LONG ? 5 : 1;
const ACKS_BEFORE_KILL = LONG ? 150 : 30;
const CONCURRENCY = 8;
/** A block every 100 ms rather than one per transaction: an automining EDR refuses a nonce ahead of the account's, a real node queues it. */
const BLOCK_MS = 100;

const cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const fn of cleanup.splice(0).reverse()) await fn();
});

type Ack = { key: string; transactionId: string; nonce: number; hash: Hex };

/**
 * Clients sending raw_transaction payments with fresh keys; a key not answered is retried as is,
 * as an agent would, except one whose payment the crash cut off mid-signature (409
 * signing_failed: nothing was signed, its nonce was released), which is given up.
 */
function rawLoad(rig: FaultRig, prefix: string) {
  const acks = new Map<string, Ack>();
  let stopped = false;
  let seq = 0;
  const attempt = async (key: string): Promise<'done' | 'retry'> => {
    const url = rig.server?.url;
    if (!url) return 'retry';
    try {
      const r = await postSign(url, rig.bootstrap.api_key, {
        agent_id: rig.bootstrap.agent_id, type: 'raw_transaction', chain_id: CHAIN, recipient_address: RECIPIENT, amount_usd: '0.01',
      }, key);
      if (r.status === 200) {
        acks.set(key, { key, transactionId: r.json.transaction_id, nonce: Number(r.json.raw_transaction.nonce), hash: r.json.raw_transaction.hash });
        return 'done';
      }
      if (r.status === 409 && r.json?.code === 'signing_failed') return 'done';
    } catch {
      // the server is gone; the same key is retried
    }
    return 'retry';
  };
  const client = async (i: number): Promise<string | undefined> => {
    let retry: string | undefined;
    while (!stopped) {
      const key = retry ?? `${prefix}-${i}-${seq++}`;
      retry = (await attempt(key)) === 'done' ? undefined : key;
      if (retry) await new Promise((r) => setTimeout(r, 10));
    }
    return retry;
  };
  const running = Array.from({ length: CONCURRENCY }, (_, i) => client(i));
  return {
    acks,
    async until(n: number, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      while (acks.size < n) {
        if (Date.now() > deadline) throw new Error(`only ${acks.size} raw payments answered 200 in ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 5));
      }
    },
    /** Stops sending new keys; resolves once every client's last key got its answer. */
    async finish() {
      stopped = true;
      const leftover = (await Promise.all(running)).filter((k): k is string => k !== undefined);
      for (const key of leftover) {
        for (let tries = 0; (await attempt(key)) === 'retry'; tries++) {
          if (tries > 400) throw new Error(`${key}: never answered after the restart`);
          await new Promise((res) => setTimeout(res, 25));
        }
      }
    },
  };
}

type LedgerRow = { id: string; nonce: number; status: string; tx_hash: string | null };

/** The ledger's raw transactions on CHAIN that hold a nonce (signed or reverted), read-only. */
function ledgerRows(dataDir: string): LedgerRow[] {
  const db = new Database(join(dataDir, 'paypolicy.db'), { readonly: true });
  try {
    return db.prepare(`SELECT id, nonce, status, tx_hash FROM transactions WHERE type = 'raw_transaction' AND chain_id = ? AND status IN ('signed', 'reverted') ORDER BY nonce`).all(CHAIN) as LedgerRow[];
  } finally {
    db.close();
  }
}

describe('on-chain submission across a crash mid-load', () => {
  test(`property: after ${CRASHES} kill -9 under concurrent raw_transaction load and a restart, the treasury's nonces on the node have no gap, every acknowledged payment is on chain, one mined transaction per ledger row`, async () => {
    const deployerKey = generatePrivateKey();
    const chain: LocalChain = await createLocalChain({ chainId: CHAIN, accounts: [{ address: privateKeyToAccount(deployerKey).address, balance: 10n ** 20n }] });
    const node = await chain.listen();
    cleanup.push(() => node.close());
    const rig = newRig();
    const args = ['--rpc-url', `${CHAIN}=${node.url}`];
    await rig.start({ shim: false, args });
    const treasury = rig.bootstrap.treasury_address as Address;
    await chain.rpc('hardhat_setBalance', [treasury, `0x${(10n ** 21n).toString(16)}`]);
    await installMiniUsdc(chain, USDC, deployerKey, [{ to: treasury, amount: 10n ** 12n }]);
    await setPolicy(rig.admin, rig.bootstrap.agent_id, { allowlist: [RECIPIENT], capUsd: '1000000', thresholdUsd: '1000000' });
    await chain.rpc('evm_setAutomine', [false]);
    const mining = setInterval(() => void chain.rpc('evm_mine', []).catch(() => {}), BLOCK_MS);
    cleanup.push(() => clearInterval(mining));

    const beforeKill: Ack[] = [];
    const all = new Map<string, Ack>();
    for (let crash = 0; crash < CRASHES; crash++) {
      const load = rawLoad(rig, `c${crash}`);
      await load.until(ACKS_BEFORE_KILL);
      rig.server!.child.kill('SIGKILL');
      await rig.server!.exited;
      beforeKill.push(...load.acks.values());
      rig.server = undefined;
      await rig.start({ shim: false, args });
      await load.finish();
      for (const a of load.acks.values()) all.set(a.key, a);
    }

    // Every acknowledged payment is one ledger row, with its own nonce.
    const rows = ledgerRows(rig.dataDir);
    const byId = new Map(rows.map((r) => [r.id, r]));
    for (const a of all.values()) expect(byId.get(a.transactionId)?.nonce, a.key).toBe(a.nonce);
    expect(rows.map((r) => r.nonce)).toEqual(rows.map((_, i) => i));

    // The background submitter (every 5 s) broadcasts what the crash left unsent; wait until the
    // node has mined as many of the treasury's transactions as the ledger holds, none pending.
    const pc = createPublicClient({ transport: http(node.url, { retryCount: 0 }) });
    const count = async (blockTag: 'latest' | 'pending') => pc.getTransactionCount({ address: treasury, blockTag });
    const deadline = Date.now() + 30_000;
    while ((await count('latest')) < rows.length || (await count('pending')) !== (await count('latest'))) {
      if (Date.now() > deadline) throw new Error(`the node mined ${await count('latest')} (pending ${await count('pending')}) of ${rows.length} ledger transactions in 30 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(await count('latest')).toBe(rows.length);

    // Every 200 given before a kill has its transaction mined, and that transaction has its nonce.
    for (const a of beforeKill) {
      const receipt = await pc.getTransactionReceipt({ hash: a.hash });
      expect(receipt.status, a.key).toBe('success');
      expect((await pc.getTransaction({ hash: a.hash })).nonce, a.key).toBe(a.nonce);
    }

    // One mined transaction per ledger row: the treasury's mined transactions, nonce by nonce,
    // are exactly the rows' own hashes (the node mines one transaction per nonce).
    const final = ledgerRows(rig.dataDir);
    expect(final.map((r) => r.id)).toEqual(rows.map((r) => r.id));
    const latest = await pc.getBlockNumber();
    const minedByNonce = new Map<number, Hex>();
    for (let b = 0n; b <= latest; b++) {
      const block = await pc.getBlock({ blockNumber: b, includeTransactions: true });
      for (const tx of block.transactions) if (tx.from.toLowerCase() === treasury.toLowerCase()) minedByNonce.set(tx.nonce, tx.hash);
    }
    expect(minedByNonce.size).toBe(rows.length);
    for (const r of final) {
      const mined = minedByNonce.get(r.nonce);
      expect(mined, `nonce ${r.nonce}`).toBeDefined();
      // The ledger's tx_hash is set once a node accepted the transaction; rows the crash left
      // unsent carry it after the background submitter's broadcast.
      const hash = r.tx_hash ?? [...all.values()].find((a) => a.transactionId === r.id)?.hash;
      expect(mined, `nonce ${r.nonce}`).toBe(hash);
    }
    await rig.stop();
  }, LONG ? 600_000 : 90_000);
});
