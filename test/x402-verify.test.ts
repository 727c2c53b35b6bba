import type { PaymentPayload, PaymentRequirements } from '@x402/core/types';
import type { FacilitatorEvmSigner } from '@x402/evm';
import { ExactEvmScheme } from '@x402/evm/exact/facilitator';
import { ExactEvmScheme as ExactEvmServerScheme } from '@x402/evm/exact/server';
import { getAddress, type Address, type Hex } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AdminService } from '../gen/paypolicy/v1/admin_pb.js';
import { connectClient } from './helpers/clients.js';
import { postSign, setPolicy, type WireAuthorization } from './helpers/payments.js';
import { bearer } from './helpers/rpc.js';
import { startTestServer, type TestServer } from './helpers/server.js';

/**
 * EIP-3009 authorizations from POST /api/sign, checked by the x402 reference facilitator
 * (@x402/evm 2.27.0 `ExactEvmScheme.verify`). Only the chain is mocked: the asset has code, the
 * treasury is an EOA, and the simulated `transferWithAuthorization` succeeds. The signature check
 * itself is the reference implementation's own ECDSA recovery.
 */

const PAY_TO = '0x4444444444444444444444444444444444444444';
const FACILITATOR = '0x5555555555555555555555555555555555555555';
/** USDC on the two chains test keys may use, as x402's defaults list them. */
const USDC_BY_CHAIN: Record<number, Address> = {
  8453: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
  84532: '0x036CbD53842c5426634e7929541eC2318f3dCF7e',
};

type ChainCall = { method: string; args: unknown };

/** A FacilitatorEvmSigner backed by a fake chain that knows only which addresses hold code. */
function mockChain(): { signer: FacilitatorEvmSigner; calls: ChainCall[] } {
  const calls: ChainCall[] = [];
  const contracts = new Set(Object.values(USDC_BY_CHAIN).map((a) => a.toLowerCase()));
  const signer: FacilitatorEvmSigner = {
    getAddresses: () => [FACILITATOR],
    async getCode(args) {
      calls.push({ method: 'getCode', args });
      return contracts.has(args.address.toLowerCase()) ? '0x6080604052' : '0x';
    },
    async readContract(args) {
      calls.push({ method: 'readContract', args });
      return undefined;
    },
    async verifyTypedData() {
      throw new Error('2.27.0 verifies EOA signatures itself; the mock must not be asked');
    },
    async writeContract(args) {
      calls.push({ method: 'writeContract', args });
      return `0x${'ab'.repeat(32)}`;
    },
    async sendTransaction(args) {
      calls.push({ method: 'sendTransaction', args });
      return `0x${'cd'.repeat(32)}`;
    },
    async waitForTransactionReceipt(args) {
      calls.push({ method: 'waitForTransactionReceipt', args });
      return { status: 'success' };
    },
  };
  return { signer, calls };
}

let s: TestServer;
let treasury: Address;

beforeAll(async () => {
  // Real clock: the facilitator checks validBefore against Date.now().
  s = await startTestServer({ logLevel: 'warn' });
  treasury = getAddress(s.bootstrap.treasury_address);
  const admin = { client: connectClient(AdminService, s.url), auth: bearer(s.bootstrap.admin_token) };
  await setPolicy(admin, s.bootstrap.agent_id, { allowlist: [PAY_TO], capUsd: '1000', thresholdUsd: '100' });
});
afterAll(async () => s.close());

/** Signs an eip3009 payment through POST /api/sign and returns the answer's signature and authorization. */
async function signEip3009(chainId: number, amountUsd: string, payload?: Record<string, unknown>) {
  const r = await postSign(s.url, s.bootstrap.api_key, {
    agent_id: s.bootstrap.agent_id, type: 'eip3009', chain_id: chainId, recipient_address: PAY_TO, amount_usd: amountUsd, payload,
  });
  expect(r.status, r.text).toBe(200);
  return { signature: r.json.signature as Hex, authorization: r.json.authorization as WireAuthorization };
}

/** The x402 v2 requirements the answer satisfies, built from its own fields. */
function requirementsFrom(a: WireAuthorization): PaymentRequirements {
  return {
    scheme: 'exact', network: `eip155:${a.chain_id}`, amount: a.value, asset: a.token, payTo: PAY_TO, maxTimeoutSeconds: 300,
    extra: { name: a.domain_name, version: a.domain_version },
  };
}

/** The x402 v2 PaymentPayload a client would send with this signature. */
function paymentPayload(requirements: PaymentRequirements, signature: Hex, a: WireAuthorization): PaymentPayload {
  return {
    x402Version: 2,
    accepted: requirements,
    payload: {
      authorization: { from: a.from, to: a.to, value: a.value, validAfter: a.valid_after, validBefore: a.valid_before, nonce: a.nonce },
      signature,
    },
  };
}

describe('eip3009 signatures under the x402 reference facilitator', () => {
  for (const chainId of [8453, 84532]) {
    test(`behavior: a signature for chain ${chainId} passes ExactEvmScheme.verify`, async () => {
      const { signature, authorization } = await signEip3009(chainId, '0.05');
      expect(getAddress(authorization.from)).toBe(treasury);
      expect(getAddress(authorization.token)).toBe(USDC_BY_CHAIN[chainId]);
      const requirements = requirementsFrom(authorization);
      // The same requirements as an x402 resource server pricing "$0.05" on that network.
      const priced = await new ExactEvmServerScheme().parsePrice('$0.05', `eip155:${chainId}`);
      expect({ amount: requirements.amount, asset: getAddress(requirements.asset), extra: requirements.extra }).toEqual({
        amount: priced.amount, asset: getAddress(priced.asset), extra: priced.extra,
      });

      const { signer, calls } = mockChain();
      const result = await new ExactEvmScheme(signer).verify(paymentPayload(requirements, signature, authorization), requirements);
      expect(result).toMatchObject({ isValid: true, payer: authorization.from });
      // The payer was looked up on chain and found to be an EOA, so the signature was recovered locally.
      expect(calls).toContainEqual({ method: 'getCode', args: { address: authorization.from } });
      const simulated = calls.find((c) => c.method === 'readContract')?.args as { functionName: string; args: unknown[] };
      expect(simulated.functionName).toBe('transferWithAuthorization');
      expect(simulated.args.slice(0, 6)).toEqual([
        treasury, getAddress(PAY_TO), 50_000n, 0n, BigInt(authorization.valid_before), authorization.nonce,
      ]);
    });
  }

  test('behavior: a verified payment also settles through the reference facilitator', async () => {
    const { signature, authorization } = await signEip3009(84532, '1.25');
    const requirements = requirementsFrom(authorization);
    const { signer, calls } = mockChain();
    const settled = await new ExactEvmScheme(signer).settle(paymentPayload(requirements, signature, authorization), requirements);
    expect(settled).toMatchObject({ success: true, network: 'eip155:84532', payer: authorization.from });
    const write = calls.find((c) => c.method === 'writeContract')?.args as { address: string; functionName: string; args: unknown[] };
    expect(getAddress(write.address)).toBe(USDC_BY_CHAIN[84532]);
    expect(write.functionName).toBe('transferWithAuthorization');
    expect(write.args.slice(0, 3)).toEqual([treasury, getAddress(PAY_TO), 1_250_000n]);
  });

  test('behavior: a short validity window the caller asked for still passes', async () => {
    const before = Math.floor(Date.now() / 1000);
    const { signature, authorization } = await signEip3009(8453, '0.01', { valid_for_seconds: 30 });
    const validBefore = Number(authorization.valid_before);
    expect(validBefore).toBeGreaterThanOrEqual(before + 30);
    expect(validBefore).toBeLessThanOrEqual(Math.floor(Date.now() / 1000) + 30);
    const requirements = requirementsFrom(authorization);
    const result = await new ExactEvmScheme(mockChain().signer).verify(paymentPayload(requirements, signature, authorization), requirements);
    expect(result.isValid).toBe(true);
  });
});

describe('tampered payments under the x402 reference facilitator', () => {
  let signed: { signature: Hex; authorization: WireAuthorization };
  beforeAll(async () => {
    signed = await signEip3009(8453, '0.2');
  });

  /** Verifies the signed payment with `change` applied to the authorization and requirements. */
  async function verifyTampered(change: (a: WireAuthorization, r: PaymentRequirements) => void, signature = signed.signature) {
    const authorization = { ...signed.authorization };
    const requirements = requirementsFrom(authorization);
    change(authorization, requirements);
    return new ExactEvmScheme(mockChain().signer).verify(paymentPayload(requirements, signature, authorization), requirements);
  }

  test('behavior: the untampered payment is valid (control)', async () => {
    expect((await verifyTampered(() => {})).isValid).toBe(true);
  });

  test('error: invalid_exact_evm_signature for a changed value', async () => {
    const result = await verifyTampered((a, r) => {
      a.value = String(BigInt(a.value) + 1n);
      r.amount = a.value;
    });
    expect(result).toMatchObject({ isValid: false, invalidReason: 'invalid_exact_evm_signature' });
  });

  test('error: value mismatch when the requirement asks for another amount than the signed value', async () => {
    const result = await verifyTampered((_a, r) => {
      r.amount = '200001';
    });
    expect(result).toMatchObject({ isValid: false, invalidReason: 'invalid_exact_evm_payload_authorization_value_mismatch' });
  });

  test('error: invalid_exact_evm_signature for a changed recipient', async () => {
    const other = '0x6666666666666666666666666666666666666666';
    const result = await verifyTampered((a, r) => {
      a.to = other;
      r.payTo = other;
    });
    expect(result).toMatchObject({ isValid: false, invalidReason: 'invalid_exact_evm_signature' });
  });

  test('error: recipient mismatch when the requirement pays someone else', async () => {
    const result = await verifyTampered((_a, r) => {
      r.payTo = '0x6666666666666666666666666666666666666666';
    });
    expect(result).toMatchObject({ isValid: false, invalidReason: 'invalid_exact_evm_recipient_mismatch' });
  });

  test('error: invalid_exact_evm_signature for a changed nonce', async () => {
    const result = await verifyTampered((a) => {
      a.nonce = `0x${(BigInt(a.nonce) ^ 1n).toString(16).padStart(64, '0')}`;
    });
    expect(result).toMatchObject({ isValid: false, invalidReason: 'invalid_exact_evm_signature' });
  });

  test('error: invalid_exact_evm_signature for a changed validBefore', async () => {
    const result = await verifyTampered((a) => {
      a.valid_before = String(BigInt(a.valid_before) + 1n);
    });
    expect(result).toMatchObject({ isValid: false, invalidReason: 'invalid_exact_evm_signature' });
  });

  test('error: invalid_exact_evm_signature when a Base signature is presented on Base Sepolia', async () => {
    const result = await verifyTampered((_a, r) => {
      r.network = 'eip155:84532';
      r.asset = USDC_BY_CHAIN[84532]!;
      r.extra = { name: 'USDC', version: '2' };
    });
    expect(result).toMatchObject({ isValid: false, invalidReason: 'invalid_exact_evm_signature' });
  });

  test('error: invalid_exact_evm_signature for another payer or a flipped signature byte', async () => {
    const otherPayer = await verifyTampered((a) => {
      a.from = '0x7777777777777777777777777777777777777777';
    });
    expect(otherPayer).toMatchObject({ isValid: false, invalidReason: 'invalid_exact_evm_signature' });
    const sig = signed.signature;
    const flipped = `${sig.slice(0, 10)}${sig[10] === '0' ? '1' : '0'}${sig.slice(11)}` as Hex;
    const badSig = await verifyTampered(() => {}, flipped);
    expect(badSig).toMatchObject({ isValid: false, invalidReason: 'invalid_exact_evm_signature' });
  });
});
