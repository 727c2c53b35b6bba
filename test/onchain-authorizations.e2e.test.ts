import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import { x402Facilitator } from '@x402/core/facilitator';
import { decodePaymentResponseHeader } from '@x402/core/http';
import type { PaymentPayload, PaymentRequirements } from '@x402/core/types';
import { toFacilitatorEvmSigner } from '@x402/evm';
import { ExactEvmScheme as ExactEvmFacilitatorScheme } from '@x402/evm/exact/facilitator';
import { ExactEvmScheme as ExactEvmServerScheme } from '@x402/evm/exact/server';
import { paymentMiddleware, x402ResourceServer } from '@x402/hono';
import { Hono } from 'hono';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import {
  createPublicClient, createWalletClient, defineChain, encodeAbiParameters, encodeFunctionData, http, keccak256, maxUint256, parseSignature, publicActions, toBytes,
  type Abi, type Account, type Address, type Hex, type PublicClient,
} from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { adminFor } from './helpers/admin.js';
import {
  createLocalChain, installMiniUsdc, installPermit2, MINI_USDC_AUTHORIZATION_ABI, PERMIT2_ABI, sendAs, type LocalChain,
} from './helpers/localChain.js';
import { postSign, setPolicy, type WireAuthorization } from './helpers/payments.js';
import { startTestServer, type TestServer } from './helpers/server.js';

// EIP-3009 and Permit2 (README, On-chain submission): paypolicy returns the signed authorization and submits
// nothing; whoever holds it (an x402 facilitator, the payee) relays it. Here a test account relays
// what the real server signed to the real token and the canonical Permit2 on a local EDR chain,
// on Base Sepolia (token domain name "USDC") and Base (domain name "USD Coin"), so a wrong domain
// name on either chain fails on chain. Addresses and names are written out, not read from src/.
const CHAINS = [
  { chainId: 84532, token: '0x036CbD53842c5426634e7929541eC2318f3dCF7e', domainName: 'USDC', otherName: 'USD Coin' },
  { chainId: 8453, token: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913', domainName: 'USD Coin', otherName: 'USDC' },
] as const;
const PERMIT2: Address = '0x000000000022D473030F116dDEE9F6B43aC78BA3';
/** x402's exact-scheme Permit2 proxy: the spender paypolicy's Permit2 signatures name. */
const X402_PERMIT2_PROXY: Address = '0x402085c248EeA27D92E8b30b2C58ed07f9E20001';
const RECIPIENT: Address = '0x3333333333333333333333333333333333333333';
const AMOUNT_USD = '1.25';
const AMOUNT = 1_250_000n; // 6 decimals
const TREASURY_USDC = 100_000_000n;
const GAS = 300_000n;
/** The x402 paywall's payee, and its price: $0.01 of USDC. */
const PAYWALL_PAY_TO: Address = '0x5555555555555555555555555555555555555555';
const PAYWALL_PRICE = 10_000n;

/**
 * The witness x402's exact Permit2 proxy passes to permitWitnessTransferFrom: Permit2 appends this
 * type string to "PermitWitnessTransferFrom(TokenPermissions permitted,address spender,uint256
 * nonce,uint256 deadline," and hashes the witness struct with Witness's typehash.
 */
const WITNESS_TYPE_STRING = 'Witness witness)TokenPermissions(address token,uint256 amount)Witness(address to,uint256 validAfter)';
const WITNESS_TYPEHASH = keccak256(toBytes('Witness(address to,uint256 validAfter)'));
const witnessHash = (to: Address, validAfter: bigint) =>
  keccak256(encodeAbiParameters([{ type: 'bytes32' }, { type: 'address' }, { type: 'uint256' }], [WITNESS_TYPEHASH, to, validAfter]));

/** The `permit2` object of a 200 from POST /api/sign with type permit2. */
type WirePermit2 = {
  owner: Address; token: Address; amount: string; spender: Address; nonce: string; deadline: string; to: Address; valid_after: string;
  permit2_address: Address; chain_id: number;
};

type ContractCall = { address: Address; abi: Abi; functionName: string; args: readonly unknown[] };

type ChainSetup = {
  chain: LocalChain;
  node: Awaited<ReturnType<LocalChain['listen']>>;
  pc: PublicClient;
  relayer: Account;
  deployerKey: Hex;
  /** Sends `call` from `from` (a local account, or an address the chain lets us impersonate) with fixed gas, so a revert is mined, not estimated away. */
  send: (from: Account | Address, call: ContractCall) => Promise<'success' | 'reverted'>;
  viemChain: ReturnType<typeof defineChain>;
};

/**
 * An x402 paywall (@x402/hono) whose facilitator is x402's reference one (ExactEvmScheme) with a
 * real signer on the local chain: it verifies a payment against the chain and settles it by
 * sending transferWithAuthorization from its own funded account.
 */
async function startOnChainPaywall(setup: ChainSetup, facilitatorKey: Hex): Promise<{ url: string; host: string; close: () => Promise<void> }> {
  const wallet = createWalletClient({ account: privateKeyToAccount(facilitatorKey), chain: setup.viemChain, transport: http(setup.node.url, { retryCount: 0 }) })
    .extend(publicActions);
  const signer = toFacilitatorEvmSigner({ ...wallet, address: wallet.account.address } as never);
  const facilitator = new x402Facilitator().register(`eip155:${setup.chain.chainId}`, new ExactEvmFacilitatorScheme(signer));
  const resourceServer = new x402ResourceServer({
    getSupported: () => facilitator.getSupported(),
    verify: (p: PaymentPayload, r: PaymentRequirements) => facilitator.verify(p, r),
    settle: (p: PaymentPayload, r: PaymentRequirements) => facilitator.settle(p, r),
  } as never).register(`eip155:${setup.chain.chainId}`, new ExactEvmServerScheme());
  const app = new Hono();
  app.use(paymentMiddleware({
    'GET /paid': { accepts: { scheme: 'exact', network: `eip155:${setup.chain.chainId}` as `${string}:${string}`, price: '$0.01', payTo: PAYWALL_PAY_TO }, description: 'on-chain paywall' },
  }, resourceServer));
  app.get('/paid', (ctx) => ctx.json({ ok: true }));
  const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }) as Server;
  await new Promise<void>((resolve) => (server.listening ? resolve() : server.once('listening', () => resolve())));
  const host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: `http://${host}/paid`,
    host,
    close: () => new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    }),
  };
}

describe('EIP-3009 and Permit2 signatures from paypolicy, relayed on chain by a third party', () => {
  let server: TestServer;
  let treasury: Address;
  let paywall: Awaited<ReturnType<typeof startOnChainPaywall>>;
  const setups = new Map<number, ChainSetup>();

  beforeAll(async () => {
    for (const c of CHAINS) {
      const deployerKey = generatePrivateKey();
      const relayer = privateKeyToAccount(generatePrivateKey());
      const chain = await createLocalChain({
        chainId: c.chainId,
        accounts: [privateKeyToAccount(deployerKey), relayer].map((a) => ({ address: a.address, balance: 10n ** 20n })),
      });
      const node = await chain.listen();
      const viemChain = defineChain({ id: c.chainId, name: `local-${c.chainId}`, nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [node.url] } } });
      const transport = http(node.url, { retryCount: 0 });
      const pc = createPublicClient({ chain: viemChain, transport, pollingInterval: 20 }) as PublicClient;
      const send: ChainSetup['send'] = async (from, call) => {
        const impersonated = typeof from === 'string';
        if (impersonated) await chain.rpc('hardhat_impersonateAccount', [from]);
        try {
          const wallet = createWalletClient({ account: from, chain: viemChain, transport });
          const hash = await wallet.sendTransaction({ to: call.address, data: encodeFunctionData(call as never), gas: GAS } as never);
          return (await pc.waitForTransactionReceipt({ hash, pollingInterval: 10 })).status;
        } finally {
          if (impersonated) await chain.rpc('hardhat_stopImpersonatingAccount', [from]);
        }
      };
      setups.set(c.chainId, { chain, node, pc, relayer, deployerKey, send, viemChain });
    }
    const facilitatorKey = generatePrivateKey();
    await setups.get(84532)!.chain.rpc('hardhat_setBalance', [privateKeyToAccount(facilitatorKey).address, '0xde0b6b3a7640000']);
    paywall = await startOnChainPaywall(setups.get(84532)!, facilitatorKey);
    // The node URLs are configured, as an operator would: paypolicy still only signs authorizations.
    server = await startTestServer({
      rpcUrls: new Map(CHAINS.map((c) => [c.chainId, setups.get(c.chainId)!.node.url])),
      dev: true, probeAllowHosts: [paywall.host],
    });
    treasury = server.bootstrap.treasury_address as Address;
    for (const c of CHAINS) {
      const s = setups.get(c.chainId)!;
      // The token's domain name defaults to the chain's ("USDC" / "USD Coin"); stated here so the test says what it checks.
      await installMiniUsdc(s.chain, c.token, s.deployerKey, [{ to: treasury, amount: TREASURY_USDC }], c.domainName);
      await installPermit2(s.chain);
      // Gas money for the treasury's own Permit2 approval (sent by the test, impersonating it).
      await s.chain.rpc('hardhat_setBalance', [treasury, '0xde0b6b3a7640000']);
      await s.chain.rpc('hardhat_setBalance', [X402_PERMIT2_PROXY, '0xde0b6b3a7640000']);
    }
    await setPolicy(adminFor(server), server.bootstrap.agent_id, { allowlist: [RECIPIENT, PAYWALL_PAY_TO], capUsd: '1000', thresholdUsd: '1000' });
  }, 60_000);

  afterAll(async () => {
    await server?.close();
    await paywall?.close();
    for (const s of setups.values()) await s.node.close();
  });

  describe.each(CHAINS)('chain $chainId, token domain name $domainName', (c) => {
    const s = () => setups.get(c.chainId)!;
    const sign = (type: 'eip3009' | 'permit2', key: string, validForSeconds?: number) => postSign(server.url, server.bootstrap.api_key, {
      agent_id: server.bootstrap.agent_id, type, chain_id: c.chainId, recipient_address: RECIPIENT, amount_usd: AMOUNT_USD,
      ...(validForSeconds === undefined ? {} : { payload: { valid_for_seconds: validForSeconds } }),
    }, `${c.chainId}-${type}-${key}`);
    const usdc = (owner: Address) => s().pc.readContract({ address: c.token, abi: MINI_USDC_AUTHORIZATION_ABI, functionName: 'balanceOf', args: [owner] });
    const eth = (owner: Address) => s().pc.getBalance({ address: owner });
    /** The call reverts with `reason` (eth_call, decoded by viem) and, sent anyway, is mined reverted with nothing moved. */
    const expectRevert = async (from: Account | Address, call: ContractCall, reason: RegExp) => {
      await expect(s().pc.simulateContract({ ...call, account: from } as never)).rejects.toThrow(reason);
      const before = [await usdc(treasury), await usdc(RECIPIENT)];
      expect(await s().send(from, call)).toBe('reverted');
      expect([await usdc(treasury), await usdc(RECIPIENT)]).toEqual(before);
    };
    /** Runs `body` with the chain's clock at `timestamp` or later, then puts the chain (clock included) back. */
    const atTime = async (timestamp: bigint, body: () => Promise<void>) => {
      const snapshot = await s().chain.rpc('evm_snapshot');
      try {
        const latest = (await s().pc.getBlock()).timestamp;
        await s().chain.rpc('evm_increaseTime', [Number(timestamp - latest)]);
        await s().chain.rpc('hardhat_mine', ['0x1']);
        expect((await s().pc.getBlock()).timestamp).toBeGreaterThanOrEqual(timestamp);
        await body();
      } finally {
        expect(await s().chain.rpc('evm_revert', [snapshot])).toBe(true);
      }
    };

    const transferCall = (a: WireAuthorization, signature: Hex, form: 'vrs' | 'bytes', tamper: { value?: bigint } = {}): ContractCall => {
      const head = [a.from, a.to, tamper.value ?? BigInt(a.value), BigInt(a.valid_after), BigInt(a.valid_before), a.nonce] as const;
      if (form === 'bytes') return { address: c.token, abi: MINI_USDC_AUTHORIZATION_ABI, functionName: 'transferWithAuthorization', args: [...head, signature] };
      const { v, r, s: sv } = parseSignature(signature);
      return { address: c.token, abi: MINI_USDC_AUTHORIZATION_ABI, functionName: 'transferWithAuthorization', args: [...head, Number(v), r, sv] };
    };
    const permitCall = (p: WirePermit2, signature: Hex, tamper: { amount?: bigint; to?: Address } = {}): ContractCall => ({
      address: PERMIT2, abi: PERMIT2_ABI, functionName: 'permitWitnessTransferFrom',
      args: [
        { permitted: { token: p.token, amount: tamper.amount ?? BigInt(p.amount) }, nonce: BigInt(p.nonce), deadline: BigInt(p.deadline) },
        { to: tamper.to ?? p.to, requestedAmount: tamper.amount ?? BigInt(p.amount) },
        p.owner, witnessHash(tamper.to ?? p.to, BigInt(p.valid_after)), WITNESS_TYPE_STRING, signature,
      ],
    });

    test('the token at USDC\'s address answers the chain\'s domain name, the one paypolicy signs with', async () => {
      expect(await s().pc.readContract({ address: c.token, abi: MINI_USDC_AUTHORIZATION_ABI, functionName: 'name' })).toBe(c.domainName);
      expect(await s().pc.readContract({ address: c.token, abi: MINI_USDC_AUTHORIZATION_ABI, functionName: 'version' })).toBe('2');
    });

    describe('eip3009', () => {
      test('behavior: a relayer submits paypolicy\'s authorization with transferWithAuthorization; exactly the amount moves, the relayer pays the gas, paypolicy sent nothing', async () => {
        const sentBefore = await s().pc.getTransactionCount({ address: treasury });
        const r = await sign('eip3009', 'relayed');
        expect(r.status, r.text).toBe(200);
        expect(r.json.tx_hash).toBeNull();
        const a = r.json.authorization as WireAuthorization;
        expect(a).toMatchObject({ from: treasury, to: RECIPIENT, value: AMOUNT.toString(), token: c.token, domain_name: c.domainName, chain_id: c.chainId });
        // With this chain's node configured, paypolicy still broadcast nothing and used nothing.
        expect(await s().pc.getTransactionCount({ address: treasury })).toBe(sentBefore);
        expect(await s().pc.readContract({ address: c.token, abi: MINI_USDC_AUTHORIZATION_ABI, functionName: 'authorizationState', args: [treasury, a.nonce] })).toBe(false);

        const [treasuryUsdc, recipientUsdc, treasuryEth, relayerEth] = [await usdc(treasury), await usdc(RECIPIENT), await eth(treasury), await eth(s().relayer.address)];
        expect(await s().send(s().relayer, transferCall(a, r.json.signature as Hex, 'vrs'))).toBe('success');
        expect(await usdc(RECIPIENT)).toBe(recipientUsdc + AMOUNT);
        expect(await usdc(treasury)).toBe(treasuryUsdc - AMOUNT);
        expect(await eth(treasury)).toBe(treasuryEth);
        expect(await eth(s().relayer.address)).toBeLessThan(relayerEth);
        expect(await s().pc.readContract({ address: c.token, abi: MINI_USDC_AUTHORIZATION_ABI, functionName: 'authorizationState', args: [treasury, a.nonce] })).toBe(true);

        // error: the same authorization again, in either signature form: used.
        await expectRevert(s().relayer, transferCall(a, r.json.signature as Hex, 'vrs'), /FiatTokenV2: authorization is used or canceled/);
        await expectRevert(s().relayer, transferCall(a, r.json.signature as Hex, 'bytes'), /FiatTokenV2: authorization is used or canceled/);
      });

      test('error: a tampered value reverts (invalid signature) and leaves the authorization usable as signed (bytes-signature form)', async () => {
        const r = await sign('eip3009', 'tampered');
        expect(r.status, r.text).toBe(200);
        const a = r.json.authorization as WireAuthorization;
        await expectRevert(s().relayer, transferCall(a, r.json.signature as Hex, 'bytes', { value: AMOUNT + 1n }), /FiatTokenV2: invalid signature/);
        const before = await usdc(RECIPIENT);
        expect(await s().send(s().relayer, transferCall(a, r.json.signature as Hex, 'bytes'))).toBe('success');
        expect(await usdc(RECIPIENT)).toBe(before + AMOUNT);
      });

      test('error: the same token under the other chain\'s domain name refuses paypolicy\'s signature (the name is part of what is signed)', async () => {
        const r = await sign('eip3009', 'wrong-name');
        expect(r.status, r.text).toBe(200);
        const snapshot = await s().chain.rpc('evm_snapshot');
        try {
          // Same address, same balances (they are the address's storage), only the name differs.
          await installMiniUsdc(s().chain, c.token, s().deployerKey, [], c.otherName);
          expect(await s().pc.readContract({ address: c.token, abi: MINI_USDC_AUTHORIZATION_ABI, functionName: 'name' })).toBe(c.otherName);
          await expectRevert(s().relayer, transferCall(r.json.authorization as WireAuthorization, r.json.signature as Hex, 'vrs'), /FiatTokenV2: invalid signature/);
        } finally {
          expect(await s().chain.rpc('evm_revert', [snapshot])).toBe(true);
        }
      });

      test('error: an authorization relayed at or after its validBefore reverts (authorization is expired)', async () => {
        const r = await sign('eip3009', 'expired', 60);
        expect(r.status, r.text).toBe(200);
        const a = r.json.authorization as WireAuthorization;
        await atTime(BigInt(a.valid_before), async () => {
          await expectRevert(s().relayer, transferCall(a, r.json.signature as Hex, 'vrs'), /FiatTokenV2: authorization is expired/);
        });
      });
    });

    describe('permit2', () => {
      beforeAll(async () => {
        // paypolicy never sends approvals: the treasury's operator approves Permit2 once per
        // token, with a transaction of its own (sent here by impersonating the treasury).
        const data = encodeFunctionData({ abi: MINI_USDC_AUTHORIZATION_ABI, functionName: 'approve', args: [PERMIT2, maxUint256] });
        expect((await sendAs(s().chain, treasury, { to: c.token, data })).status).toBe('0x1');
      });

      test('behavior: with Permit2 approved by the treasury, the spender x402\'s proxy names relays paypolicy\'s witness permit; exactly the amount moves to the witnessed recipient, paypolicy sent nothing', async () => {
        expect(await s().pc.readContract({ address: c.token, abi: MINI_USDC_AUTHORIZATION_ABI, functionName: 'allowance', args: [treasury, PERMIT2] })).toBe(maxUint256);
        const sentBefore = await s().pc.getTransactionCount({ address: treasury });

        const r = await sign('permit2', 'relayed');
        expect(r.status, r.text).toBe(200);
        expect(r.json.tx_hash).toBeNull();
        const p = r.json.permit2 as WirePermit2;
        expect(p).toMatchObject({ owner: treasury, token: c.token, amount: AMOUNT.toString(), spender: X402_PERMIT2_PROXY, to: RECIPIENT, permit2_address: PERMIT2, chain_id: c.chainId });
        expect(await s().pc.getTransactionCount({ address: treasury })).toBe(sentBefore);

        // error: anyone but the named spender cannot use it (Permit2 hashes msg.sender as the spender).
        await expectRevert(s().relayer, permitCall(p, r.json.signature as Hex), /InvalidSigner/);

        // x402's proxy contract is not in any package here (only its ABI), so the relaying
        // account acts at its address: the call the proxy makes, with msg.sender the spender.
        const [treasuryUsdc, recipientUsdc, treasuryEth] = [await usdc(treasury), await usdc(RECIPIENT), await eth(treasury)];
        expect(await s().send(X402_PERMIT2_PROXY, permitCall(p, r.json.signature as Hex))).toBe('success');
        expect(await usdc(RECIPIENT)).toBe(recipientUsdc + AMOUNT);
        expect(await usdc(treasury)).toBe(treasuryUsdc - AMOUNT);
        expect(await eth(treasury)).toBe(treasuryEth);

        // error: the same permit again: its nonce is spent.
        await expectRevert(X402_PERMIT2_PROXY, permitCall(p, r.json.signature as Hex), /InvalidNonce/);
      });

      test('error: a tampered amount or witnessed recipient reverts (InvalidSigner) and leaves the permit usable as signed', async () => {
        const r = await sign('permit2', 'tampered');
        expect(r.status, r.text).toBe(200);
        const p = r.json.permit2 as WirePermit2;
        await expectRevert(X402_PERMIT2_PROXY, permitCall(p, r.json.signature as Hex, { amount: AMOUNT + 1n }), /InvalidSigner/);
        await expectRevert(X402_PERMIT2_PROXY, permitCall(p, r.json.signature as Hex, { to: '0x4444444444444444444444444444444444444444' }), /InvalidSigner/);
        const before = await usdc(RECIPIENT);
        expect(await s().send(X402_PERMIT2_PROXY, permitCall(p, r.json.signature as Hex))).toBe('success');
        expect(await usdc(RECIPIENT)).toBe(before + AMOUNT);
      });

      test('error: a permit relayed after its deadline reverts (SignatureExpired)', async () => {
        const r = await sign('permit2', 'expired', 60);
        expect(r.status, r.text).toBe(200);
        const p = r.json.permit2 as WirePermit2;
        // Permit2 accepts a permit through its deadline second and refuses it after.
        await atTime(BigInt(p.deadline) + 1n, async () => {
          await expectRevert(X402_PERMIT2_PROXY, permitCall(p, r.json.signature as Hex), /SignatureExpired/);
        });
      });
    });
  });

  test('x402: the payment_header paypolicy signs for a live @x402/hono paywall is settled on chain by x402\'s reference facilitator; the payee gets exactly the price', async () => {
    const s84532 = setups.get(84532)!;
    const usdc = (owner: Address) => s84532.pc.readContract({ address: CHAINS[0].token, abi: MINI_USDC_AUTHORIZATION_ABI, functionName: 'balanceOf', args: [owner] });
    const [payeeBefore, treasuryBefore, sentBefore] = [await usdc(PAYWALL_PAY_TO), await usdc(treasury), await s84532.pc.getTransactionCount({ address: treasury })];
    const r = await postSign(server.url, server.bootstrap.api_key, {
      agent_id: server.bootstrap.agent_id, type: 'x402', chain_id: 84532, payload: { resource_url: paywall.url },
    }, 'x402-on-chain');
    expect(r.status, r.text).toBe(200);
    expect(r.json).toMatchObject({ tx_hash: null, recipient_address: PAYWALL_PAY_TO, authorization: { from: treasury, to: PAYWALL_PAY_TO, value: PAYWALL_PRICE.toString(), domain_name: 'USDC' } });
    expect(await usdc(PAYWALL_PAY_TO)).toBe(payeeBefore); // signing moved nothing

    const header = r.json.payment_header as { name: string; value: string };
    const paid = await fetch(paywall.url, { headers: { accept: 'application/json', [header.name]: header.value } });
    expect(paid.status, await paid.clone().text()).toBe(200);
    const settled = decodePaymentResponseHeader(paid.headers.get('payment-response')!);
    expect(settled).toMatchObject({ success: true, network: 'eip155:84532', payer: treasury });
    const receipt = await s84532.pc.getTransactionReceipt({ hash: settled.transaction as Hex });
    expect(receipt.status).toBe('success');
    expect(receipt.from).not.toBe(treasury.toLowerCase());
    expect(await usdc(PAYWALL_PAY_TO)).toBe(payeeBefore + PAYWALL_PRICE);
    expect(await usdc(treasury)).toBe(treasuryBefore - PAYWALL_PRICE);
    expect(await s84532.pc.getTransactionCount({ address: treasury })).toBe(sentBefore);

    // The same header again: the facilitator's settlement reverts on chain (nonce used), so no second payment.
    const again = await fetch(paywall.url, { headers: { accept: 'application/json', [header.name]: header.value } });
    expect(again.status).not.toBe(200);
    expect(await usdc(PAYWALL_PAY_TO)).toBe(payeeBefore + PAYWALL_PRICE);
  });
});
