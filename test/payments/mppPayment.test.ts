import { Challenge, Receipt } from 'mppx';
import { Mppx, tempo as tempoMethod } from 'mppx/server';
import {
  createClient, custom, decodeFunctionData, encodeFunctionData, getAddress, keccak256, maxUint256, type Address, type Hex,
} from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { tempoModerato } from 'viem/chains';
import { Abis, Transaction } from 'viem/tempo';
import { describe, expect, test } from 'vitest';
import { DomainError } from '../../src/domain/errors.js';
import type { MppChallengeParams, MppChargeRequest, Offer } from '../../src/paywalls/offer.js';
import { loadSigningKey, runSignJob } from '../../src/signing/signJob.js';
import type { SignJob } from '../../src/signing/signJobs.js';
import { DEFAULT_TEMPO_FEES, MAX_TEMPO_FEE, attributionMemo, prepareMppPayment } from '../../src/signing/tempo.js';

/**
 * MPP tempo/charge credentials from prepareMppPayment + runSignJob, presented to a real mppx
 * 0.11.0 server. Only the chain is mocked (mpp.md §13): `eth_call` simulates successfully and
 * `eth_sendRawTransaction` answers with the keccak256 of the raw transaction; the server's own
 * challenge HMAC, transaction decoding, call matching and memo binding run unmodified.
 */

const REALM = 'localhost-test';
const SECRET = 'paypolicy-test-secret-0123456789abcdef';
const RECIPIENT: Address = '0x742d35Cc6634c0532925a3b844bC9e7595F8fE00';
const SPLIT_RECIPIENT: Address = '0x1111111111111111111111111111111111111111';
const URL_PAID = 'http://localhost/paid';

type RpcCall = { method: string; params: unknown };

function mockChain() {
  const calls: RpcCall[] = [];
  const getClient = () =>
    createClient({
      chain: tempoModerato,
      transport: custom({
        async request({ method, params }: { method: string; params: unknown }) {
          calls.push({ method, params });
          if (method === 'eth_call') return '0x';
          if (method === 'eth_chainId') return `0x${tempoModerato.id.toString(16)}`;
          if (method === 'eth_sendRawTransaction') return keccak256((params as [Hex])[0]);
          throw new Error(`unmocked RPC ${method}`);
        },
      }),
    });
  return { calls, getClient };
}

type ServerOptions = { splits?: Array<{ amount: string; recipient: Address }>; feePayer?: ReturnType<typeof privateKeyToAccount>; requiresAuth?: boolean };

function paywall(options: ServerOptions = {}) {
  const chain = mockChain();
  const mppx = Mppx.create({
    realm: REALM,
    secretKey: SECRET,
    ...(options.requiresAuth ? { requiresAuth: true } : {}),
    methods: [
      tempoMethod.charge({
        recipient: RECIPIENT, testnet: true, getClient: chain.getClient, waitForConfirmation: false,
        ...(options.splits ? { splits: options.splits } : {}),
        ...(options.feePayer ? { feePayer: options.feePayer } : {}),
      }),
    ],
  });
  const handle = async (request: Request): Promise<Response> => {
    const result = await mppx.charge({ amount: '0.01', description: 'test item' })(request);
    if (result.status === 402) return result.challenge;
    return result.withReceipt(new Response('paid content'));
  };
  return { handle, rpc: chain.calls };
}

/** RFC 9110 auth-params of the first `Payment` challenge; enough for mppx's always-quoted output. */
function parsePaymentChallenge(header: string): Record<string, string> {
  const start = header.search(/(^|,\s*)Payment\s/i);
  expect(start).toBeGreaterThanOrEqual(0);
  const params: Record<string, string> = {};
  const re = /([A-Za-z0-9_-]+)="((?:[^"\\]|\\.)*)"/gy;
  re.lastIndex = header.indexOf('Payment', start) + 'Payment'.length;
  for (;;) {
    while (re.lastIndex < header.length && /[\s,]/.test(header[re.lastIndex]!)) re.lastIndex++;
    const m = re.exec(header);
    if (!m) break;
    params[m[1]!.toLowerCase()] = m[2]!.replace(/\\(.)/g, '$1');
  }
  return params;
}

/** The Offer another helper's parser would produce for this 402. */
async function offerFrom(res: Response): Promise<Offer> {
  expect(res.status).toBe(402);
  const header = res.headers.get('www-authenticate');
  expect(header).toBeTruthy();
  const p = parsePaymentChallenge(header!);
  const challenge: MppChallengeParams = {
    id: p.id!, realm: p.realm!, method: p.method!, intent: p.intent!, request: p.request!,
    ...(p.expires ? { expires: p.expires } : {}), ...(p.description ? { description: p.description } : {}),
    ...(p.digest ? { digest: p.digest } : {}), ...(p.opaque ? { opaque: p.opaque } : {}), ...(p.header ? { header: p.header } : {}),
  };
  const request = JSON.parse(Buffer.from(challenge.request, 'base64url').toString('utf8')) as MppChargeRequest;
  // Cross-check the hand parser with mppx's own.
  const [reference] = Challenge.fromResponseList(res.clone());
  expect(reference!.id).toBe(challenge.id);
  expect(reference!.request).toEqual(request);
  const amountAtomic = BigInt(request.amount);
  return {
    rail: 'mpp', chainId: request.methodDetails.chainId, network: 'tempo-testnet', scheme: null, realm: challenge.realm,
    payTo: getAddress(request.recipient), asset: getAddress(request.currency), amountAtomic, decimals: 6, amountMicros: amountAtomic,
    mpp: { challenge, request },
  };
}

const privateKey = generatePrivateKey();
const key = loadSigningKey(privateKey);
const treasury = privateKeyToAccount(privateKey).address;

/** Signs in-process exactly as a signing thread would, optionally rewriting the job first. */
function pay(offer: Offer, edit?: (job: Extract<SignJob, { kind: 'tempo' }>) => void, nowMs = Date.now()) {
  const { job, finish } = prepareMppPayment('org-1', treasury, offer, nowMs, DEFAULT_TEMPO_FEES);
  if (job.kind !== 'tempo') throw new Error('expected a tempo job');
  edit?.(job);
  const out = runSignJob(key, job);
  return { job, out, ...finish(out) };
}

function decodeCredential(value: string) {
  expect(value).toMatch(/^Payment [A-Za-z0-9_-]+$/);
  return JSON.parse(Buffer.from(value.slice('Payment '.length), 'base64url').toString('utf8')) as {
    challenge: Record<string, string>; payload: { type: string; signature: Hex }; source: string;
  };
}

async function problem(res: Response): Promise<{ type: string; detail: string }> {
  return (await res.json()) as { type: string; detail: string };
}

describe('attributionMemo', () => {
  test('behavior: matches both mpp.md §8 test vectors', () => {
    expect(attributionMemo('localhost-test', '59J20bsFONLWyr09KgQVuh7wGDXjxXvaMQcFF0L5JZI'))
      .toBe('0xef1ed7120137efd7839d8a9b0b9dd6000000000000000000003a22d787f765ba');
    expect(attributionMemo('api.example.com', 'challenge-123', 'my-app'))
      .toBe('0xef1ed712011ece072f76bd8b82350e3a180fb9d0177aa2f371eb18f2d4402269');
  });

  test('behavior: an empty client id is anonymous', () => {
    expect(attributionMemo('r', 'c', '')).toBe(attributionMemo('r', 'c'));
  });
});

describe('prepareMppPayment against an mppx 0.11.0 server', () => {
  test('behavior: the credential is accepted; 200 with a receipt whose reference is the transaction hash', async () => {
    const server = paywall();
    const offer = await offerFrom(await server.handle(new Request(URL_PAID)));
    const { header, transactionHash, out, job } = pay(offer);

    expect(header.name).toBe('Authorization');
    const credential = decodeCredential(header.value);
    const c = offer.mpp!.challenge;
    expect(credential.challenge).toEqual({
      id: c.id, realm: c.realm, method: 'tempo', intent: 'charge', request: c.request, description: 'test item', expires: c.expires,
    });
    expect(credential.payload).toEqual({ type: 'transaction', signature: out.serialized });
    expect(credential.source).toBe(`did:pkh:eip155:42431:${treasury}`);
    expect(out.serialized!.slice(0, 4)).toBe('0x76');

    // What the transaction says, read back with viem's deserializer.
    const tx = Transaction.deserialize(out.serialized!) as unknown as {
      calls: Array<{ to: Address; data: Hex }>; nonceKey: bigint; validBefore: number; feeToken: Address; from: Address; chainId: number;
    };
    expect(getAddress(tx.from)).toBe(treasury);
    expect(tx.chainId).toBe(42431);
    expect(tx.nonceKey).toBe(maxUint256);
    expect(tx.feeToken.toLowerCase()).toBe(offer.asset.toLowerCase());
    expect(tx.validBefore).toBe(job.tx.validBefore);
    expect(tx.validBefore - Math.floor(Date.now() / 1000)).toBeLessThanOrEqual(25);
    expect(tx.calls).toHaveLength(1);
    expect(tx.calls[0]!.data.slice(0, 10)).toBe('0x95777d59');
    const decoded = decodeFunctionData({ abi: Abis.tip20, data: tx.calls[0]!.data });
    expect(decoded.args).toEqual([RECIPIENT, 10_000n, attributionMemo(REALM, c.id)]);

    const res = await server.handle(new Request(URL_PAID, { headers: { [header.name]: header.value } }));
    expect(res.status, await res.clone().text()).toBe(200);
    expect(await res.text()).toBe('paid content');
    const receipt = Receipt.fromResponse(res);
    expect(receipt).toMatchObject({ status: 'success', method: 'tempo', reference: transactionHash });
    expect(transactionHash).toBe(keccak256(out.serialized!));
    const sent = server.rpc.filter((r) => r.method === 'eth_sendRawTransaction');
    expect(sent.map((r) => (r.params as Hex[])[0])).toEqual([out.serialized]);
  });

  test('behavior: replaying the same credential is refused with 402', async () => {
    const server = paywall();
    const offer = await offerFrom(await server.handle(new Request(URL_PAID)));
    const { header } = pay(offer);
    const first = await server.handle(new Request(URL_PAID, { headers: { [header.name]: header.value } }));
    expect(first.status).toBe(200);
    const again = await server.handle(new Request(URL_PAID, { headers: { [header.name]: header.value } }));
    expect(again.status).toBe(402);
    const body = await problem(again);
    expect(body.type).toBe('https://paymentauth.org/problems/verification-failed');
    expect(body.detail).toMatch(/already been used/);
  });

  test('behavior: a plain transfer without the attribution memo is refused, so the memo is what binds the payment', async () => {
    const server = paywall();
    const offer = await offerFrom(await server.handle(new Request(URL_PAID)));
    const { header } = pay(offer, (job) => {
      job.tx.calls[0] = { to: offer.asset, data: encodeFunctionData({ abi: Abis.tip20, functionName: 'transfer', args: [RECIPIENT, 10_000n] }) };
    });
    const res = await server.handle(new Request(URL_PAID, { headers: { [header.name]: header.value } }));
    expect(res.status).toBe(402);
    expect((await problem(res)).detail).toMatch(/memo is not bound to this challenge/);
  });

  test('behavior: a memo bound to another challenge is refused', async () => {
    const server = paywall();
    const offer = await offerFrom(await server.handle(new Request(URL_PAID)));
    const { header } = pay(offer, (job) => {
      job.tx.calls[0] = {
        to: offer.asset,
        data: encodeFunctionData({ abi: Abis.tip20, functionName: 'transferWithMemo', args: [RECIPIENT, 10_000n, attributionMemo(REALM, 'other-challenge')] }),
      };
    });
    const res = await server.handle(new Request(URL_PAID, { headers: { [header.name]: header.value } }));
    expect(res.status).toBe(402);
    expect((await problem(res)).detail).toMatch(/memo is not bound/);
  });

  test('behavior: splits become one transfer each and the primary gets the remainder', async () => {
    const server = paywall({ splits: [{ amount: '0.002', recipient: SPLIT_RECIPIENT }] });
    const offer = await offerFrom(await server.handle(new Request(URL_PAID)));
    expect(offer.mpp!.request.methodDetails.splits).toEqual([{ amount: '2000', recipient: SPLIT_RECIPIENT }]);
    const { header, out, transactionHash } = pay(offer);
    const tx = Transaction.deserialize(out.serialized!) as unknown as { calls: Array<{ data: Hex }> };
    expect(tx.calls.map((call) => decodeFunctionData({ abi: Abis.tip20, data: call.data }))).toEqual([
      { functionName: 'transferWithMemo', args: [RECIPIENT, 8_000n, attributionMemo(REALM, offer.mpp!.challenge.id)] },
      { functionName: 'transfer', args: [SPLIT_RECIPIENT, 2_000n] },
    ]);
    const res = await server.handle(new Request(URL_PAID, { headers: { [header.name]: header.value } }));
    expect(res.status, await res.clone().text()).toBe(200);
    expect(Receipt.fromResponse(res).reference).toBe(transactionHash);
  });

  test('behavior: a sponsored challenge (feePayer) gets a 0x78 hand-off without fee token, and the server co-signs it', async () => {
    const server = paywall({ feePayer: privateKeyToAccount(generatePrivateKey()) });
    const offer = await offerFrom(await server.handle(new Request(URL_PAID)));
    expect(offer.mpp!.request.methodDetails.feePayer).toBe(true);
    const { header, out, job } = pay(offer);
    expect(job.tx.sponsored).toBe(true);
    expect(job.tx.feeToken).toBeUndefined();
    expect(out.serialized!.slice(0, 4)).toBe('0x78');
    const res = await server.handle(new Request(URL_PAID, { headers: { [header.name]: header.value } }));
    expect(res.status, await res.clone().text()).toBe(200);
    // The fee payer broadcasts its own 0x76 envelope, so the chain hash is not the hand-off's.
    const [broadcast] = server.rpc.filter((r) => r.method === 'eth_sendRawTransaction').map((r) => (r.params as Hex[])[0]!);
    expect(broadcast!.slice(0, 4)).toBe('0x76');
    expect(Receipt.fromResponse(res).reference).toBe(keccak256(broadcast!));
  });

  test('behavior: the credential goes in the header the challenge names', async () => {
    const server = paywall({ requiresAuth: true });
    const offer = await offerFrom(await server.handle(new Request(URL_PAID)));
    expect(offer.mpp!.challenge.header).toBe('Payment-Authorization');
    const { header } = pay(offer);
    expect(header.name).toBe('Payment-Authorization');
    expect(decodeCredential(header.value).challenge.header).toBe('Payment-Authorization');
    const res = await server.handle(new Request(URL_PAID, { headers: { [header.name]: header.value } }));
    expect(res.status, await res.clone().text()).toBe(200);
  });
});

describe('prepareMppPayment refusals', () => {
  const challenge: MppChallengeParams = {
    id: 'challenge-1', realm: REALM, method: 'tempo', intent: 'charge', request: 'e30', expires: new Date(Date.now() + 60_000).toISOString(),
  };
  const base: Offer = {
    rail: 'mpp', chainId: 42431, network: 'tempo-testnet', scheme: null, realm: REALM, payTo: RECIPIENT,
    asset: '0x20c0000000000000000000000000000000000000', amountAtomic: 10_000n, decimals: 6, amountMicros: 10_000n,
    mpp: { challenge, request: { amount: '10000', currency: '0x20c0000000000000000000000000000000000000', recipient: RECIPIENT, methodDetails: { chainId: 42431 } } },
  };
  const withRequest = (edit: (r: MppChargeRequest) => void, offerEdit: Partial<Offer> = {}): Offer => {
    const request = structuredClone(base.mpp!.request);
    edit(request);
    return { ...base, ...offerEdit, mpp: { challenge, request } };
  };
  const refusal = (offer: Offer, nowMs = Date.now()): DomainError => {
    try {
      prepareMppPayment('org', treasury, offer, nowMs);
    } catch (err) {
      expect(err).toBeInstanceOf(DomainError);
      return err as DomainError;
    }
    throw new Error('expected a refusal');
  };

  test('behavior: the baseline offer is accepted and validBefore is capped by expires', () => {
    const now = Date.now();
    const soon = { ...challenge, expires: new Date(now + 10_000).toISOString() };
    const { job } = prepareMppPayment('org', treasury, { ...base, mpp: { ...base.mpp!, challenge: soon } }, now);
    expect(job.kind === 'tempo' && job.tx.validBefore).toBe(Math.floor((now + 10_000) / 1000));
  });

  test('error: invalid_argument for an expired challenge', () => {
    const e = refusal(base, Date.parse(challenge.expires!) + 1);
    expect(e.kind).toBe('invalid_argument');
    expect(e.code).toBe('challenge_expired');
  });

  test('error: invalid_argument for splits whose sum reaches the amount', () => {
    const e = refusal(withRequest((r) => { r.methodDetails.splits = [{ amount: '4000', recipient: SPLIT_RECIPIENT }, { amount: '6000', recipient: SPLIT_RECIPIENT }]; }));
    expect(e.kind).toBe('invalid_argument');
    expect(refusal(withRequest((r) => { r.methodDetails.splits = [{ amount: '0', recipient: SPLIT_RECIPIENT }]; })).kind).toBe('invalid_argument');
  });

  test('error: invalid_argument for amounts that are not positive integers', () => {
    for (const amount of ['0', '-5', '1.5', '1e4', '', ' 10000']) {
      const e = refusal(withRequest((r) => { r.amount = amount; }));
      expect(e.kind, amount).toBe('invalid_argument');
    }
  });

  test('error: invalid_argument when the offer and the request disagree', () => {
    expect(refusal({ ...base, amountAtomic: 9_999n }).kind).toBe('invalid_argument');
    expect(refusal({ ...base, payTo: SPLIT_RECIPIENT }).kind).toBe('invalid_argument');
    expect(refusal({ ...base, chainId: 4217 }).kind).toBe('invalid_argument');
  });

  test('error: unimplemented for other methods and push-only challenges', () => {
    expect(refusal({ ...base, mpp: { ...base.mpp!, challenge: { ...challenge, method: 'stripe' } } }).kind).toBe('unimplemented');
    expect(refusal(withRequest((r) => { r.methodDetails.supportedModes = ['push']; })).kind).toBe('unimplemented');
  });

  test('error: internal for fee settings that no chain would accept', () => {
    for (const fees of [{ ...DEFAULT_TEMPO_FEES, gas: 0n }, { ...DEFAULT_TEMPO_FEES, maxPriorityFeePerGas: DEFAULT_TEMPO_FEES.maxFeePerGas + 1n }]) {
      expect(() => prepareMppPayment('org', treasury, base, Date.now(), fees)).toThrow(expect.objectContaining({ kind: 'internal' }));
    }
  });

  test('error: internal for fees whose worst case exceeds MAX_TEMPO_FEE ($0.05); exactly at it is signed', () => {
    const atBound = { gas: 2_000_000n, maxFeePerGas: 25_000_000_000n, maxPriorityFeePerGas: 1n };
    expect(atBound.gas * atBound.maxFeePerGas).toBe(MAX_TEMPO_FEE);
    expect(prepareMppPayment('org', treasury, base, Date.now(), atBound).job).toMatchObject({ kind: 'tempo', tx: { gas: 2_000_000n, maxFeePerGas: 25_000_000_000n } });
    for (const fees of [{ ...atBound, maxFeePerGas: atBound.maxFeePerGas + 1n }, { ...atBound, gas: atBound.gas + 1n }]) {
      expect(() => prepareMppPayment('org', treasury, base, Date.now(), fees)).toThrow(expect.objectContaining({ kind: 'internal' }));
    }
  });

  test('behavior: the signed transaction is unchanged by a round trip through the worker message format', () => {
    const { job } = prepareMppPayment('org', treasury, base, Date.now());
    expect(runSignJob(key, structuredClone(job)).serialized).toBe(runSignJob(key, job).serialized);
  });
});
