import { x402Facilitator } from '@x402/core/facilitator';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader } from '@x402/core/http';
import type { PaymentPayload, PaymentRequirements } from '@x402/core/types';
import type { FacilitatorEvmSigner } from '@x402/evm';
import { ExactEvmScheme as ExactEvmFacilitatorScheme } from '@x402/evm/exact/facilitator';
import { ExactEvmScheme as ExactEvmServerScheme } from '@x402/evm/exact/server';
import { ExactEvmSchemeV1 } from '@x402/evm/exact/v1/facilitator';
import { paymentMiddleware, x402ResourceServer } from '@x402/hono';
import { Hono } from 'hono';
import { getAddress, verifyTypedData, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { describe, expect, test } from 'vitest';
import { DomainError } from '../../src/domain/errors.js';
import type { Offer } from '../../src/paywalls/offer.js';
import { loadSigningKey, runSignJob } from '../../src/signing/signJob.js';
import { prepareX402Payment } from '../../src/signing/x402Payment.js';

/**
 * x402 `exact` payments from prepareX402Payment + runSignJob, presented to a real @x402/hono
 * 2.27.0 paywall whose facilitator is the reference `ExactEvmScheme` in process. Only the chain
 * is mocked (x402.md §12): the asset has code, the payer is an EOA, simulation and settlement
 * succeed. Signature recovery, amount/recipient/window checks and requirement matching are the
 * reference code's own.
 */

const PAY_TO: Address = getAddress('0x8217d0b5d3d2f4d2da1a6b7a3a1bde3c1b9e15c4');
const BASE_SEPOLIA_USDC: Address = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';
const FACILITATOR: Address = '0x5555555555555555555555555555555555555555';
const URL_PAID = 'http://example.test/paid';

function mockSigner(): { signer: FacilitatorEvmSigner; writes: unknown[] } {
  const writes: unknown[] = [];
  const signer: FacilitatorEvmSigner = {
    getAddresses: () => [FACILITATOR],
    getCode: async ({ address }) => (address.toLowerCase() === BASE_SEPOLIA_USDC.toLowerCase() ? '0x6080604052' : '0x'),
    readContract: async () => undefined,
    verifyTypedData: async (args) => verifyTypedData(args as Parameters<typeof verifyTypedData>[0]),
    writeContract: async (args) => {
      writes.push(args);
      return `0x${'ab'.repeat(32)}`;
    },
    sendTransaction: async () => `0x${'cd'.repeat(32)}`,
    waitForTransactionReceipt: async () => ({ status: 'success' }),
  };
  return { signer, writes };
}

function paywall() {
  const chain = mockSigner();
  const facilitator = new x402Facilitator().register('eip155:84532', new ExactEvmFacilitatorScheme(chain.signer));
  const client = {
    getSupported: () => facilitator.getSupported(),
    verify: (p: PaymentPayload, r: PaymentRequirements) => facilitator.verify(p, r),
    settle: (p: PaymentPayload, r: PaymentRequirements) => facilitator.settle(p, r),
  };
  const server = new x402ResourceServer(client as never).register('eip155:84532', new ExactEvmServerScheme());
  const app = new Hono();
  app.use(paymentMiddleware({ 'GET /paid': { accepts: { scheme: 'exact', price: '$0.01', network: 'eip155:84532', payTo: PAY_TO }, description: 'demo' } }, server));
  app.get('/paid', (c) => c.text('paid content'));
  return { app, writes: chain.writes };
}

const privateKey = generatePrivateKey();
const key = loadSigningKey(privateKey);
const treasury = privateKeyToAccount(privateKey).address;

/** The Offer another helper's parser would produce for the chosen requirement. */
function offerFor(version: 1 | 2, accepted: Record<string, unknown>, resource?: Record<string, unknown>): Offer {
  const extra = accepted.extra as { name: string; version: string };
  const amount = BigInt(String(version === 2 ? accepted.amount : accepted.maxAmountRequired));
  return {
    rail: 'x402', chainId: 84532, network: String(accepted.network), scheme: String(accepted.scheme), realm: null,
    payTo: getAddress(String(accepted.payTo)), asset: getAddress(String(accepted.asset)), amountAtomic: amount, decimals: 6, amountMicros: amount,
    x402: { version, accepted, resource, domainName: extra.name, domainVersion: extra.version, maxTimeoutSeconds: Number(accepted.maxTimeoutSeconds) },
  };
}

function pay(offer: Offer, nowSeconds = Math.floor(Date.now() / 1000)) {
  const { job, finish } = prepareX402Payment('org-1', treasury, offer, nowSeconds);
  return { job, ...finish(runSignJob(key, job)) };
}

function decodeHeader(value: string): Record<string, any> {
  expect(value).toMatch(/^[A-Za-z0-9+/]*={0,2}$/);
  return JSON.parse(Buffer.from(value, 'base64').toString('utf8'));
}

function encodeHeader(value: unknown): string {
  return Buffer.from(JSON.stringify(value)).toString('base64');
}

async function challenge(app: Hono) {
  const res = await app.request(URL_PAID, { headers: { accept: 'application/json' } });
  expect(res.status).toBe(402);
  const header = res.headers.get('payment-required');
  expect(header).toBeTruthy();
  return decodePaymentRequiredHeader(header!);
}

describe('prepareX402Payment (v2) against an @x402/hono 2.27.0 paywall', () => {
  test('behavior: PAYMENT-SIGNATURE is accepted, settled, and answered with 200 + PAYMENT-RESPONSE', async () => {
    const { app, writes } = paywall();
    const required = await challenge(app);
    const accepted = required.accepts[0] as unknown as Record<string, unknown>;
    const offer = offerFor(2, accepted, required.resource as unknown as Record<string, unknown>);
    const now = Math.floor(Date.now() / 1000);
    const { header, authorization, signature } = pay(offer, now);

    expect(header.name).toBe('PAYMENT-SIGNATURE');
    const sent = decodeHeader(header.value);
    expect(Object.keys(sent)).toEqual(['x402Version', 'resource', 'accepted', 'payload']);
    expect(sent.x402Version).toBe(2);
    expect(sent.resource).toEqual(required.resource);
    expect(sent.accepted).toEqual(accepted);
    expect(sent.payload.signature).toBe(signature);
    expect(sent.payload.authorization).toEqual({
      from: treasury, to: offer.payTo, value: '10000', validAfter: '0', validBefore: String(now + offer.x402!.maxTimeoutSeconds), nonce: authorization.nonce,
    });
    expect(authorization).toMatchObject({ token: BASE_SEPOLIA_USDC, domainName: 'USDC', domainVersion: '2', chainId: 84532 });
    expect(authorization.nonce).toMatch(/^0x[0-9a-f]{64}$/);

    const res = await app.request(URL_PAID, { headers: { accept: 'application/json', [header.name]: header.value } });
    expect(res.status, await res.clone().text()).toBe(200);
    expect(await res.text()).toBe('paid content');
    const settled = decodePaymentResponseHeader(res.headers.get('payment-response')!);
    expect(settled).toMatchObject({ success: true, network: 'eip155:84532', payer: treasury, transaction: `0x${'ab'.repeat(32)}` });
    expect(writes).toHaveLength(1);
  });

  test('behavior: each payment uses a fresh nonce', () => {
    const offer = offerFor(2, { scheme: 'exact', network: 'eip155:84532', amount: '10000', asset: BASE_SEPOLIA_USDC, payTo: PAY_TO, maxTimeoutSeconds: 300, extra: { name: 'USDC', version: '2' } });
    expect(pay(offer).authorization.nonce).not.toBe(pay(offer).authorization.nonce);
  });

  test('error: a tampered amount is rejected by the paywall with invalid_exact_evm_signature', async () => {
    const { app, writes } = paywall();
    const required = await challenge(app);
    const offer = offerFor(2, required.accepts[0] as unknown as Record<string, unknown>, required.resource as unknown as Record<string, unknown>);
    const sent = decodeHeader(pay(offer).header.value);
    sent.payload.authorization.value = '10001';
    sent.accepted.amount = '10001';
    const res = await app.request(URL_PAID, { headers: { accept: 'application/json', 'PAYMENT-SIGNATURE': encodeHeader(sent) } });
    expect(res.status).toBe(402);
    expect(decodePaymentRequiredHeader(res.headers.get('payment-required')!).error).toBe('No matching payment requirements');
    // Echoing a changed requirement no longer matches the route; keep the echo and change only the value.
    sent.accepted.amount = '10000';
    const res2 = await app.request(URL_PAID, { headers: { accept: 'application/json', 'PAYMENT-SIGNATURE': encodeHeader(sent) } });
    expect(res2.status).toBe(402);
    expect(decodePaymentRequiredHeader(res2.headers.get('payment-required')!).error).toBe('invalid_exact_evm_signature');
    expect(writes).toHaveLength(0);
  });

  test('error: a signature over the right amount with a changed value field fails the signature check', async () => {
    const { signer } = mockSigner();
    const requirements = { scheme: 'exact', network: 'eip155:84532', amount: '10001', asset: BASE_SEPOLIA_USDC, payTo: PAY_TO, maxTimeoutSeconds: 300, extra: { name: 'USDC', version: '2' } };
    const offer = offerFor(2, { ...requirements, amount: '10000' });
    const sent = decodeHeader(pay(offer).header.value) as PaymentPayload;
    (sent.payload as { authorization: { value: string } }).authorization.value = '10001';
    const result = await new ExactEvmFacilitatorScheme(signer).verify({ ...sent, accepted: requirements as PaymentRequirements }, requirements as PaymentRequirements);
    expect(result).toMatchObject({ isValid: false, invalidReason: 'invalid_exact_evm_signature' });
  });
});

describe('prepareX402Payment (v1)', () => {
  /** A v1 requirement as x402-express 1.2.0 emits it (x402.md §2). */
  const requirement = {
    scheme: 'exact', network: 'base-sepolia', maxAmountRequired: '10000', resource: URL_PAID, description: 'demo', mimeType: '',
    payTo: PAY_TO, maxTimeoutSeconds: 60, asset: BASE_SEPOLIA_USDC, extra: { name: 'USDC', version: '2' },
  };

  test('behavior: X-PAYMENT passes the reference v1 facilitator ExactEvmSchemeV1.verify', async () => {
    const now = Math.floor(Date.now() / 1000);
    const { header, authorization } = pay(offerFor(1, requirement), now);
    expect(header.name).toBe('X-PAYMENT');
    const sent = decodeHeader(header.value);
    expect(Object.keys(sent)).toEqual(['x402Version', 'scheme', 'network', 'payload']);
    expect(sent).toMatchObject({ x402Version: 1, scheme: 'exact', network: 'base-sepolia' });
    expect(sent.payload.authorization).toEqual({
      from: treasury, to: PAY_TO, value: '10000', validAfter: String(now - 600), validBefore: String(now + 60), nonce: authorization.nonce,
    });
    const { signer } = mockSigner();
    const result = await new ExactEvmSchemeV1(signer).verify(sent as PaymentPayload, requirement as unknown as PaymentRequirements);
    expect(result).toMatchObject({ isValid: true, payer: treasury });
  });

  test('error: a tampered amount fails ExactEvmSchemeV1.verify', async () => {
    const sent = decodeHeader(pay(offerFor(1, requirement)).header.value);
    sent.payload.authorization.value = '9999';
    const { signer } = mockSigner();
    const result = await new ExactEvmSchemeV1(signer).verify(sent as PaymentPayload, { ...requirement, maxAmountRequired: '9999' } as unknown as PaymentRequirements);
    expect(result.isValid).toBe(false);
  });

  test('behavior: validBefore is at least now + 30 when the timeout is shorter', () => {
    const now = 1_800_000_000;
    const { authorization } = pay(offerFor(1, { ...requirement, maxTimeoutSeconds: 5 }), now);
    expect(authorization.validBefore).toBe(String(now + 30));
  });
});

describe('prepareX402Payment refusals', () => {
  const accepted = { scheme: 'exact', network: 'eip155:84532', amount: '10000', asset: BASE_SEPOLIA_USDC, payTo: PAY_TO, maxTimeoutSeconds: 300, extra: { name: 'USDC', version: '2' } };
  const refusal = (offer: Offer): DomainError => {
    try {
      prepareX402Payment('org', treasury, offer, Math.floor(Date.now() / 1000));
    } catch (err) {
      expect(err).toBeInstanceOf(DomainError);
      return err as DomainError;
    }
    throw new Error('expected a refusal');
  };

  test('error: invalid_argument when the offer disagrees with the echoed requirement', () => {
    expect(refusal({ ...offerFor(2, accepted), amountAtomic: 9_999n }).kind).toBe('invalid_argument');
    expect(refusal({ ...offerFor(2, accepted), payTo: FACILITATOR }).kind).toBe('invalid_argument');
    expect(refusal({ ...offerFor(2, accepted), asset: FACILITATOR }).kind).toBe('invalid_argument');
  });

  test('error: invalid_argument without an EIP-712 domain or x402 details', () => {
    const offer = offerFor(2, accepted);
    expect(refusal({ ...offer, x402: { ...offer.x402!, domainName: '' } }).kind).toBe('invalid_argument');
    const { x402: _omit, ...bare } = offer;
    expect(refusal(bare as Offer).kind).toBe('invalid_argument');
  });

  test('error: unimplemented for other schemes and Permit2 requirements', () => {
    expect(refusal({ ...offerFor(2, { ...accepted, scheme: 'upto' }) }).kind).toBe('unimplemented');
    const permit2 = { ...accepted, extra: { name: 'USDC', version: '2', assetTransferMethod: 'permit2' } };
    expect(refusal(offerFor(2, permit2)).kind).toBe('unimplemented');
  });

  test('behavior: the signature is a 65-byte hex string', () => {
    const sig: Hex = pay(offerFor(2, accepted)).signature;
    expect(sig).toMatch(/^0x[0-9a-f]{130}$/);
  });
});
