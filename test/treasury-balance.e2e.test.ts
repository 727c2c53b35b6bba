import { createServer as createNetServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { Code } from '@connectrpc/connect';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { AdminService } from '../gen/paypolicy/v1/admin_pb.js';
import { adminFor, createTenant, type Tenant } from './helpers/admin.js';
import { runCliInProcess as runCli } from './helpers/cliInProcess.js';
import { connectClient, grpcChannel, grpcUnary } from './helpers/clients.js';
import { createLocalChain, installMiniUsdc, type LocalChain } from './helpers/localChain.js';
import { bearer, expectRpcError } from './helpers/rpc.js';
import { rest } from './helpers/server.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { createUser, dashboardFetch, httpSignIn } from './dashboard/helpers.js';

/**
 * Treasury balances: `paypolicy treasury balance`, AdminService.GetTreasuryBalances and the
 * dashboard's Spend page show the treasury's USDC and gas balance per configured chain, exactly
 * (integers, never floats), from a real EDR chain; a node that is down is an error for its chain
 * only; another organization never sees them.
 */

const CHAIN = 84532;
const DOWN_CHAIN = 8453;
const USDC_84532: Address = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';
const MINTED = 12_345_678n; // $12.345678
const WEI = 1_500_000_000_000_000_007n; // 1.500000000000000007 ETH
const PASSWORD = 'correct horse battery staple';

let chain: LocalChain;
let node: Awaited<ReturnType<LocalChain['listen']>>;
let downUrl: string;
let s: TestServer;
let bare: TestServer;
let other: Tenant;

beforeAll(async () => {
  const deployerKey = generatePrivateKey();
  chain = await createLocalChain({ chainId: CHAIN, accounts: [{ address: privateKeyToAccount(deployerKey).address, balance: 10n ** 20n }] });
  node = await chain.listen();
  // A port nothing listens on: the node of DOWN_CHAIN is down.
  const probe = createNetServer();
  await new Promise<void>((r) => probe.listen(0, '127.0.0.1', () => r()));
  downUrl = `http://127.0.0.1:${(probe.address() as AddressInfo).port}`;
  await new Promise<void>((r) => probe.close(() => r()));
  s = await startTestServer({ logLevel: 'warn', rpcUrls: new Map([[CHAIN, node.url], [DOWN_CHAIN, downUrl]]) });
  bare = await startTestServer({ logLevel: 'warn' });
  const treasury = s.bootstrap.treasury_address as Address;
  await chain.rpc('hardhat_setBalance', [treasury, `0x${WEI.toString(16)}`]);
  await installMiniUsdc(chain, USDC_84532, deployerKey, [{ to: treasury, amount: MINTED }]);
  other = await createTenant(adminFor(s), 'other-org');
  await adminFor(s).client.provisionTreasury({ orgId: other.orgId }, adminFor(s).auth);
}, 30_000);
afterAll(async () => {
  await s?.close();
  await bare?.close();
  await node?.close();
});

const cli = (server: TestServer, ...args: string[]) => runCli([...args, '--url', server.url, '--admin-token', server.bootstrap.admin_token]);

describe('GetTreasuryBalances', () => {
  test('behavior: the exact minted USDC and set wei on the chain with a node; the down node is an error for its chain only', async () => {
    const admin = adminFor(s);
    const r = await admin.client.getTreasuryBalances({ orgId: s.bootstrap.org_id }, admin.auth);
    expect(r.treasuryAddress).toBe(s.bootstrap.treasury_address);
    expect(r.chains.map((c) => c.chainId)).toEqual([DOWN_CHAIN, CHAIN]);
    const ok = r.chains.find((c) => c.chainId === CHAIN)!;
    expect(ok).toMatchObject({
      tokenAddress: USDC_84532, tokenSymbol: 'USDC', tokenBalanceMicros: MINTED.toString(), tokenBalanceUsd: '12.345678',
      nativeBalanceWei: WEI.toString(), nativeBalanceEth: '1.500000000000000007', error: '',
    });
    expect(ok.blockNumber).toBeGreaterThan(0n);
    const down = r.chains.find((c) => c.chainId === DOWN_CHAIN)!;
    expect(down).toMatchObject({ tokenBalanceMicros: '', nativeBalanceWei: '', blockNumber: 0n });
    expect(down.error).toMatch(/could not read from the node/);
    // The node's URL (which may carry a provider key) is never echoed.
    expect(down.error).not.toContain(downUrl);
  });

  test('behavior: without any RPC endpoint there is nothing to read: the address and no chains', async () => {
    const admin = adminFor(bare);
    const r = await admin.client.getTreasuryBalances({ orgId: bare.bootstrap.org_id }, admin.auth);
    expect(r.treasuryAddress).toBe(bare.bootstrap.treasury_address);
    expect(r.chains).toEqual([]);
  });

  test('error: tenancy: an API key, of the organization or another, reaches no balances over Connect, gRPC or REST', async () => {
    const client = connectClient(AdminService, s.url);
    await expectRpcError(client.getTreasuryBalances({ orgId: s.bootstrap.org_id }, bearer(other.apiKey)), Code.Unauthenticated);
    await expectRpcError(client.getTreasuryBalances({ orgId: s.bootstrap.org_id }, bearer(s.bootstrap.api_key)), Code.Unauthenticated);
    const channel = grpcChannel(s.url);
    try {
      const r = await grpcUnary(channel, AdminService, AdminService.method.getTreasuryBalances, { orgId: s.bootstrap.org_id }, other.apiKey);
      expect(r.ok).toBe(false);
      if (!r.ok) expect(r.code).toBe(grpc.status.UNAUTHENTICATED);
      const op = await grpcUnary(channel, AdminService, AdminService.method.getTreasuryBalances, { orgId: s.bootstrap.org_id }, s.bootstrap.admin_token);
      expect(op.ok).toBe(true);
      if (op.ok) expect(op.message.chains.find((c) => c.chainId === CHAIN)?.tokenBalanceMicros).toBe(MINTED.toString());
    } finally {
      channel.close();
    }
    // REST has no balance route: the agent API never shows treasury balances.
    const r = await rest(s.url, 'GET', '/api/treasury/balances', { key: other.apiKey, headers: { connection: 'close' } });
    expect(r.status).toBe(404);
    // An unknown organization is not_found, as for every operator call.
    await expectRpcError(adminFor(s).client.getTreasuryBalances({ orgId: 'org_nope' }, adminFor(s).auth), Code.NotFound);
  });
});

describe('paypolicy treasury balance', () => {
  test('behavior: prints the address and, per chain, USD and ETH decimals from integers; the down chain shows its error', async () => {
    const r = await cli(s, 'treasury', 'balance', '--org', s.bootstrap.org_id);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`treasury ${s.bootstrap.treasury_address}`);
    const line = r.stdout.split('\n').find((l) => l.startsWith(String(CHAIN)))!;
    expect(line).toContain('$12.345678');
    expect(line).toContain('1.500000000000000007');
    expect(line).toContain(WEI.toString());
    const downLine = r.stdout.split('\n').find((l) => l.startsWith(`${DOWN_CHAIN} `))!;
    expect(downLine).toMatch(/error: could not read from the node/);
  });

  test('behavior: --json is the response message with every field', async () => {
    const r = await cli(s, 'treasury', 'balance', '--org', s.bootstrap.org_id, '--json');
    expect(r.code, r.stderr).toBe(0);
    const json = JSON.parse(r.stdout) as { treasuryAddress: string; chains: Array<Record<string, unknown>> };
    expect(json.treasuryAddress).toBe(s.bootstrap.treasury_address);
    expect(json.chains.find((c) => c.chainId === CHAIN)).toMatchObject({ tokenBalanceMicros: MINTED.toString(), nativeBalanceWei: WEI.toString(), error: '' });
  });

  test('behavior: a server without RPC endpoints says none is configured', async () => {
    const r = await cli(bare, 'treasury', 'balance', '--org', bare.bootstrap.org_id);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/no RPC endpoint configured/);
  });

  test('error: an unknown organization exits 1 with not_found', async () => {
    const r = await cli(s, 'treasury', 'balance', '--org', 'org_nope');
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/not_found/);
  });
});

describe('dashboard Spend page', () => {
  test('behavior: shows the organization\'s own treasury balances; another organization\'s owner sees only its own', async () => {
    await createUser(adminFor(s), s.bootstrap.org_id, 'owner-a@example.com', 'viewer', PASSWORD);
    await createUser(adminFor(s), other.orgId, 'owner-b@example.com', 'owner', PASSWORD);
    const a = await httpSignIn(s.url, 'owner-a@example.com', PASSWORD);
    const pageA = await (await dashboardFetch(s.url, a, '/dashboard/spend')).text();
    expect(pageA).toContain('Treasury balances');
    expect(pageA).toContain(s.bootstrap.treasury_address);
    expect(pageA).toContain('$12.345678');
    expect(pageA).toContain('1.500000000000000007 ETH');
    expect(pageA).toMatch(/<td colspan="3">could not read from the node/);

    const b = await httpSignIn(s.url, 'owner-b@example.com', PASSWORD);
    // Query parameters do not choose the organization: the session's does.
    const pageB = await (await dashboardFetch(s.url, b, `/dashboard/spend?org=${s.bootstrap.org_id}`)).text();
    expect(pageB).toContain('Treasury balances');
    expect(pageB).not.toContain(s.bootstrap.treasury_address);
    expect(pageB).not.toContain('$12.345678');
    expect(pageB).toContain('$0.00');
  });

  test('behavior: without an RPC endpoint the panel says so', async () => {
    await createUser(adminFor(bare), bare.bootstrap.org_id, 'viewer@example.com', 'viewer', PASSWORD);
    const v = await httpSignIn(bare.url, 'viewer@example.com', PASSWORD);
    const page = await (await dashboardFetch(bare.url, v, '/dashboard/spend')).text();
    expect(page).toMatch(/No RPC endpoint is configured/);
  });
});
