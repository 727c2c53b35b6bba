import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { encodeAbiParameters, encodeFunctionData, keccak256, pad, toHex, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { AdminService, ChainStatus, TransactionStatus, type Transaction } from '../gen/paypolicy/v1/admin_pb.js';
import { adminFor, createAgent } from './helpers/admin.js';
import { grpcChannel, grpcUnary } from './helpers/clients.js';
import { createLocalChain, installMiniUsdc, MINI_USDC_ABI, type LocalChain } from './helpers/localChain.js';
import { postSign } from './helpers/payments.js';
import { startTestServer, type TestServer } from './helpers/server.js';

// Raw transactions the service submits are tracked to finality on a real EDR chain,
// against the real server: confirmations, a revert that releases the hold, a dropped transaction
// broadcast again, fee bumps within the policy's ceiling, a node refusal that would block the
// nonce, a restart mid-tracking, and another signer on the same treasury. States are read over
// gRPC (ListTransactions), the way an operator's tooling would.
const CHAIN = 84532;
const USDC: Address = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';
const RECIPIENT: Address = '0x3333333333333333333333333333333333333333';
const CONFIRMATIONS = 3;

let chain: LocalChain;
let node: Awaited<ReturnType<LocalChain['listen']>>;
let server: TestServer;
let treasury: Address;
const dataDir = { current: '' };

const start = async (dir?: string) => startTestServer({
  dataDir: dir, rpcUrls: new Map([[CHAIN, node.url]]), submitIntervalMs: 40, logLevel: 'info',
  tracking: { confirmations: CONFIRMATIONS, replaceAfterMs: 1_000 },
});

const sign = (key: string, agentId = server.bootstrap.agent_id, extra: Record<string, unknown> = {}, amount = '0.25') => postSign(server.url, server.bootstrap.api_key, {
  agent_id: agentId, type: 'raw_transaction', chain_id: CHAIN, recipient_address: RECIPIENT, amount_usd: amount, ...extra,
}, key);

const balanceOf = async (who: Address) => BigInt(await chain.rpc('eth_call', [{
  to: USDC, data: encodeFunctionData({ abi: MINI_USDC_ABI, functionName: 'balanceOf', args: [who] }),
}, 'latest']) as string);

const automine = (on: boolean) => chain.rpc('evm_setAutomine', [on]);
const mine = (blocks: number) => chain.rpc('hardhat_mine', [`0x${blocks.toString(16)}`]);

/** The ledger row as ListTransactions answers it over gRPC (@grpc/grpc-js). */
async function rowOf(id: string, agentId = server.bootstrap.agent_id): Promise<Transaction> {
  const ch = grpcChannel(server.url);
  try {
    const r = await grpcUnary(ch, AdminService, AdminService.method.listTransactions, { orgId: server.bootstrap.org_id, agentId, pageSize: 500 }, server.bootstrap.admin_token);
    if (!r.ok) throw new Error(`ListTransactions: ${r.details}`);
    const row = r.message.transactions.find((t) => t.id === id);
    if (!row) throw new Error(`no row ${id}`);
    return row;
  } finally {
    ch.close();
  }
}

async function waitFor<T>(what: string, fn: () => Promise<T | undefined | false>, timeoutMs = 10_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 30));
  }
}

const waitChain = (id: string, status: ChainStatus, agentId?: string, timeoutMs?: number) =>
  waitFor(`chain status ${ChainStatus[status]} of ${id}`, async () => { const r = await rowOf(id, agentId); return r.chainStatus === status ? r : undefined; }, timeoutMs);

/** Sends as the treasury without its key (another signer): not mined while automine is off. */
async function sendAsTreasury(tx: { to: Address; data?: Hex; nonce?: number; maxFeePerGas: bigint; maxPriorityFeePerGas: bigint }): Promise<Hex> {
  await chain.rpc('hardhat_impersonateAccount', [treasury]);
  try {
    return await chain.rpc('eth_sendTransaction', [{
      from: treasury, to: tx.to, data: tx.data ?? '0x', gas: '0x30000', maxFeePerGas: `0x${tx.maxFeePerGas.toString(16)}`,
      maxPriorityFeePerGas: `0x${tx.maxPriorityFeePerGas.toString(16)}`, ...(tx.nonce === undefined ? {} : { nonce: `0x${tx.nonce.toString(16)}` }),
    }]) as Hex;
  } finally {
    await chain.rpc('hardhat_stopImpersonatingAccount', [treasury]);
  }
}

/** Sets the treasury's MiniUSDC balance in storage (balances are the mapping at slot 1); returns the old one. */
async function setTreasuryTokens(amount: bigint): Promise<bigint> {
  const old = await balanceOf(treasury);
  const slot = keccak256(encodeAbiParameters([{ type: 'address' }, { type: 'uint256' }], [treasury, 1n]));
  await chain.rpc('hardhat_setStorageAt', [USDC, slot, pad(toHex(amount))]);
  expect(await balanceOf(treasury)).toBe(amount);
  return old;
}

async function newAgent(name: string, policy: { capUsd: string; maxNetworkFeeWei?: string }): Promise<string> {
  const admin = adminFor(server);
  const id = await createAgent(admin, server.bootstrap.org_id, name);
  await admin.client.setPolicy({
    agentId: id, allowlist: [RECIPIENT], spendCapUsd: policy.capUsd, approvalThresholdUsd: '1000', maxNetworkFeeWei: policy.maxNetworkFeeWei,
  }, admin.auth);
  return id;
}

beforeAll(async () => {
  const deployerKey = generatePrivateKey();
  chain = await createLocalChain({ chainId: CHAIN, accounts: [{ address: privateKeyToAccount(deployerKey).address, balance: 10n ** 20n }] });
  node = await chain.listen();
  server = await start();
  dataDir.current = server.dataDir;
  treasury = server.bootstrap.treasury_address as Address;
  await chain.rpc('hardhat_setBalance', [treasury, '0x56bc75e2d63100000']);
  await installMiniUsdc(chain, USDC, deployerKey, [{ to: treasury, amount: 100_000_000n }]);
  const admin = adminFor(server);
  await admin.client.setPolicy({ agentId: server.bootstrap.agent_id, allowlist: [RECIPIENT], spendCapUsd: '1000', approvalThresholdUsd: '1000' }, admin.auth);
}, 30_000);

afterAll(async () => {
  await server?.close();
  await node?.close();
});

describe('tracking submitted raw transactions to finality', () => {
  test('confirmed only after --confirmations blocks: submitted (1, 2 confirmations) → confirmed, with block, network fee and the same tx_hash on replay', async () => {
    const before = await balanceOf(RECIPIENT);
    const r = await sign('confirm-3');
    expect(r.status, r.text).toBe(200);
    const hash = r.json.tx_hash as Hex;
    expect(hash).toBe(r.json.raw_transaction.hash);
    const id = r.json.transaction_id as string;
    const seen = await waitFor('one confirmation', async () => { const row = await rowOf(id); return row.confirmations === 1 ? row : undefined; });
    expect(seen.chainStatus).toBe(ChainStatus.SUBMITTED);
    expect(seen.status).toBe(TransactionStatus.SIGNED);
    await mine(1);
    await waitFor('two confirmations', async () => (await rowOf(id)).confirmations === 2);
    expect((await rowOf(id)).chainStatus).toBe(ChainStatus.SUBMITTED);
    await mine(1);
    const done = await waitChain(id, ChainStatus.CONFIRMED);
    const receipt = await chain.rpc('eth_getTransactionReceipt', [hash]) as { blockNumber: Hex; gasUsed: Hex; effectiveGasPrice: Hex };
    expect(done.txHash).toBe(hash);
    expect(done.blockNumber).toBe(BigInt(receipt.blockNumber));
    expect(done.confirmations).toBe(3);
    expect(done.networkFeeWei).toBe((BigInt(receipt.gasUsed) * BigInt(receipt.effectiveGasPrice)).toString());
    expect(done.status).toBe(TransactionStatus.SIGNED);
    expect(await balanceOf(RECIPIENT)).toBe(before + 250_000n);
    const replay = await sign('confirm-3');
    expect(replay.json).toMatchObject({ idempotent: true, tx_hash: hash, cost_usd: '0.25' });
  });

  test('a transfer that reverts on chain: reverted with the token\'s reason, the hold is released (the agent can spend that amount again), and the replay says nothing was paid', async () => {
    const agent = await newAgent('reverts', { capUsd: '0.50' });
    await automine(false);
    const r = await sign('will-revert', agent, {}, '0.50');
    expect(r.status, r.text).toBe(200);
    const id = r.json.transaction_id as string;
    await waitChain(id, ChainStatus.SUBMITTED, agent);
    // The treasury's tokens vanish after the balance check and before mining (its balance slot
    // set to zero: no transaction, so no nonce of the treasury is used).
    const all = await setTreasuryTokens(0n);
    expect(await balanceOf(treasury)).toBe(0n);
    await mine(CONFIRMATIONS);
    await automine(true);
    const row = await waitChain(id, ChainStatus.REVERTED, agent);
    expect(row.status).toBe(TransactionStatus.REVERTED);
    expect(row.reason).toMatch(/^Reverted on chain in block \d+: .*exceeds balance.*nothing was paid/);
    expect(BigInt(row.networkFeeWei)).toBeGreaterThan(0n);
    const receipt = await chain.rpc('eth_getTransactionReceipt', [row.txHash]) as { status: Hex };
    expect(receipt.status).toBe('0x0');
    const replay = await sign('will-revert', agent, {}, '0.50');
    expect(replay.status, replay.text).toBe(409);
    expect(replay.json.code).toBe('transaction_reverted');
    // The whole cap is free again: a new payment of the same amount is allowed and lands.
    await setTreasuryTokens(all);
    const again = await sign('after-revert', agent, {}, '0.50');
    expect(again.status, again.text).toBe(200);
    await mine(CONFIRMATIONS);
    await waitChain(again.json.transaction_id, ChainStatus.CONFIRMED, agent);
  });

  test('dropped from the node\'s pool: marked dropped, the same signed bytes broadcast again, then mined and confirmed once', async () => {
    const before = await balanceOf(RECIPIENT);
    await automine(false);
    const r = await sign('dropped');
    expect(r.status, r.text).toBe(200);
    const id = r.json.transaction_id as string;
    const hash = r.json.tx_hash as Hex;
    await waitChain(id, ChainStatus.SUBMITTED);
    expect(await chain.rpc('hardhat_dropTransaction', [hash])).toBe(true);
    await waitFor('the log of the drop', async () => server.logs.some((l) => l.includes(id) && l.includes('no longer knows')));
    await waitFor('the node to know it again', async () => (await chain.rpc('eth_getTransactionByHash', [hash])) !== null);
    await mine(CONFIRMATIONS);
    await automine(true);
    const row = await waitChain(id, ChainStatus.CONFIRMED);
    expect(row.txHash).toBe(hash);
    expect(await balanceOf(RECIPIENT)).toBe(before + 250_000n);
  });

  test('stuck longer than --replace-after-ms: replaced by the same nonce with fees +12.5% within the ceiling; the replacement is what confirms', async () => {
    const before = await balanceOf(RECIPIENT);
    await automine(false);
    const r = await sign('bumped');
    expect(r.status, r.text).toBe(200);
    const id = r.json.transaction_id as string;
    const original = r.json.tx_hash as Hex;
    const replaced = await waitChain(id, ChainStatus.REPLACED, undefined, 8_000);
    expect(replaced.txHash).not.toBe(original);
    const [a, b] = await Promise.all([original, replaced.txHash].map((h) => chain.rpc('eth_getTransactionByHash', [h]))) as Array<{ nonce: Hex; maxFeePerGas: Hex; maxPriorityFeePerGas: Hex } | null>;
    expect(a).toBeNull(); // the node replaced it in its pool
    expect(Number(b!.nonce)).toBe(Number(r.json.raw_transaction.nonce));
    expect(BigInt(b!.maxFeePerGas)).toBe(10n ** 9n + 10n ** 9n / 8n);
    expect(BigInt(b!.maxPriorityFeePerGas)).toBe(10n ** 6n + 10n ** 6n / 8n);
    await mine(CONFIRMATIONS);
    await automine(true);
    const row = await waitChain(id, ChainStatus.CONFIRMED);
    expect(row.txHash).toBe(replaced.txHash);
    expect(await chain.rpc('eth_getTransactionReceipt', [original])).toBeNull();
    expect(await balanceOf(RECIPIENT)).toBe(before + 250_000n);
    expect((await sign('bumped')).json.tx_hash).toBe(replaced.txHash);
  });

  test('a ceiling that leaves no room: no bump, logged once, the transaction stays as signed', async () => {
    // gas 100,000 × max fee 1 gwei is exactly the ceiling: +12.5% would exceed it.
    const agent = await newAgent('tight-ceiling', { capUsd: '10', maxNetworkFeeWei: '100000000000000' });
    await automine(false);
    const r = await sign('no-room', agent);
    expect(r.status, r.text).toBe(200);
    const id = r.json.transaction_id as string;
    await waitFor('the ceiling log', async () => server.logs.some((l) => l.includes(id) && l.includes('network fee ceiling')), 8_000);
    await new Promise((res) => setTimeout(res, 1_200));
    const row = await rowOf(id, agent);
    expect(row.chainStatus).toBe(ChainStatus.SUBMITTED);
    expect(row.txHash).toBe(r.json.tx_hash);
    expect(server.logs.filter((l) => l.includes(id) && l.includes('network fee ceiling'))).toHaveLength(1);
    await mine(CONFIRMATIONS);
    await automine(true);
    await waitChain(id, ChainStatus.CONFIRMED, agent);
  });

  test('a transaction the node refuses for good (intrinsic gas too low) does not hold back the later nonces: its nonce is filled by a no-op to the treasury and it ends reverted', async () => {
    const before = await balanceOf(RECIPIENT);
    const bad = await sign('too-little-gas', undefined, { payload: { gas: '21000' } });
    expect(bad.status, bad.text).toBe(200);
    expect(bad.json.tx_hash).toBeNull();
    const next = await sign('after-refusal');
    expect(next.status, next.text).toBe(200);
    expect(Number(next.json.raw_transaction.nonce)).toBe(Number(bad.json.raw_transaction.nonce) + 1);
    // The filler is accepted (and, automining, mined), then the next nonce goes through.
    await waitChain(bad.json.transaction_id, ChainStatus.REPLACED);
    await waitChain(next.json.transaction_id, ChainStatus.SUBMITTED);
    await mine(CONFIRMATIONS);
    const row = await waitChain(bad.json.transaction_id, ChainStatus.REVERTED);
    expect(row.status).toBe(TransactionStatus.REVERTED);
    expect(row.reason).toMatch(/refused the transaction for good.*no-op transfer in block \d+; nothing was paid/);
    const filler = await chain.rpc('eth_getTransactionByHash', [row.txHash]) as { from: string; to: string; value: Hex; nonce: Hex };
    expect(filler.to.toLowerCase()).toBe(treasury.toLowerCase());
    expect(BigInt(filler.value)).toBe(0n);
    expect(Number(filler.nonce)).toBe(Number(bad.json.raw_transaction.nonce));
    await mine(CONFIRMATIONS);
    await waitChain(next.json.transaction_id, ChainStatus.CONFIRMED);
    expect(await balanceOf(RECIPIENT)).toBe(before + 250_000n);
  });

  test('a restart mid-tracking resumes from the ledger: the row submitted before the stop is confirmed by the next process, nothing sent twice', async () => {
    const before = await balanceOf(RECIPIENT);
    await automine(false);
    const r = await sign('across-restart');
    expect(r.status, r.text).toBe(200);
    const id = r.json.transaction_id as string;
    await waitChain(id, ChainStatus.SUBMITTED);
    await server.close({ keepData: true });
    await mine(CONFIRMATIONS);
    await automine(true);
    server = await start(dataDir.current);
    const row = await waitChain(id, ChainStatus.CONFIRMED);
    expect(row.txHash).toBe(r.json.tx_hash);
    expect(await balanceOf(RECIPIENT)).toBe(before + 250_000n);
    expect((await sign('across-restart')).json).toMatchObject({ idempotent: true, tx_hash: r.json.tx_hash });
  });

  test('another signer uses a nonce paypolicy gave out: the row is reverted, the organization and chain are conflicted (logged once) and new raw transactions there get 409 treasury_conflict until a restart', async () => {
    await automine(false);
    const r = await sign('taken-nonce');
    expect(r.status, r.text).toBe(200);
    const id = r.json.transaction_id as string;
    await waitChain(id, ChainStatus.SUBMITTED);
    // The same nonce, from the treasury, with higher fees: the node keeps the other one.
    await sendAsTreasury({ to: treasury, nonce: Number(r.json.raw_transaction.nonce), maxFeePerGas: 10n ** 11n, maxPriorityFeePerGas: 10n ** 10n });
    await mine(1);
    await automine(true);
    const row = await waitChain(id, ChainStatus.REVERTED);
    expect(row.status).toBe(TransactionStatus.REVERTED);
    expect(row.reason).toMatch(/did not sign: another process signs for this treasury/);
    const refused = await sign('while-conflicted');
    expect(refused.status, refused.text).toBe(409);
    expect(refused.json.code).toBe('treasury_conflict');
    await new Promise((res) => setTimeout(res, 200));
    expect(server.logs.filter((l) => l.includes('another process uses this treasury'))).toHaveLength(1);
    // The operator stopped the other signer and restarts: raw transactions are signed again, from
    // the chain's nonce.
    await server.close({ keepData: true });
    server = await start(dataDir.current);
    const after = await sign('after-resync');
    expect(after.status, after.text).toBe(200);
    expect(Number(after.json.raw_transaction.nonce)).toBe(Number(r.json.raw_transaction.nonce) + 1);
    await mine(CONFIRMATIONS);
    await waitChain(after.json.transaction_id, ChainStatus.CONFIRMED);
  });
});
