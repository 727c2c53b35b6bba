import { decodePaymentRequiredHeader } from '@x402/core/http';
import { DEFAULT_ASSETS } from '@x402/evm';
import { EVM_NETWORK_CHAIN_ID_MAP } from '@x402/evm/v1';
import { Challenge } from 'mppx';
import { getAddress } from 'viem';
import { describe, expect, test } from 'vitest';
import { DomainError } from '../../src/domain/errors.js';
import type { Offer, ProbeResult } from '../../src/paywalls/offer.js';
import { parsePaymentChallenge } from '../../src/paywalls/parseChallenge.js';
import {
  findTempoUsdToken,
  findX402Stablecoin,
  listX402Stablecoins,
  resolveX402ChainId,
  X402_V1_NETWORKS,
} from '../../src/paywalls/tokens.js';
import {
  challengeOf,
  decodeBase64Json,
  encodeBase64Json,
  MPP_RECIPIENT,
  mppStripeAndTempo,
  mppStripeOnly,
  mppTempo,
  PAY_TO,
  RESOURCE_URL,
  toProbe,
  x402App,
  x402Challenge,
} from './challengePeers.js';

const NOW = new Date();
const BASE_SEPOLIA_USDC = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';
const BASE_USDC = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
const MEGA_USD = '0xFAfDdbb3FC7688494971a79cc65DCa3EF82079E7';
const PATH_USD = '0x20C0000000000000000000000000000000000000';
const PATH_USD_WIRE = '0x20c0000000000000000000000000000000000000';
const TEMPO_USDC_E = '0x20C000000000000000000000b9537d11c60E8b50';
const TESTNET_EURC_E = '0x20c000000000000000000000D72572838BbEe59C';

/** Runs `fn`, which must throw a DomainError of kind invalid_argument, and returns it. */
function refusal(fn: () => unknown): DomainError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(DomainError);
    expect((err as DomainError).kind).toBe('invalid_argument');
    return err as DomainError;
  }
  throw new Error('expected a DomainError');
}

/** The raw `request="…"` auth-param of the Payment challenge whose method is `method`. */
function rawRequestOf(header: string, method: string): string {
  const m = new RegExp(`method="${method}", intent="charge", request="([A-Za-z0-9_-]+)"`).exec(header);
  if (!m) throw new Error(`no ${method} request in ${header}`);
  return m[1]!;
}

/** Merges the headers of two 402s as fetch would (repeated fields joined with ", "). */
function mergeProbes(a: ProbeResult, b: ProbeResult): ProbeResult {
  const headers = { ...a.headers };
  for (const [name, value] of Object.entries(b.headers)) headers[name] = headers[name] ? `${headers[name]}, ${value}` : value;
  return { ...a, headers };
}

describe('token tables', () => {
  test('behavior: every @x402/evm 2.27.0 default asset is priced with its decimals and EIP-712 domain', () => {
    for (const [network, assets] of Object.entries(DEFAULT_ASSETS)) {
      const chainId = resolveX402ChainId(network);
      expect(chainId, network).toBeDefined();
      for (const asset of assets) {
        const token = findX402Stablecoin(chainId!, asset.asset.toLowerCase());
        expect(token, `${network} ${asset.asset}`).toMatchObject({
          address: asset.asset,
          decimals: asset.decimals,
          eip712Name: asset.name,
          eip712Version: asset.version,
        });
      }
    }
  });

  test('behavior: every @x402/evm v1 network name maps to the same chain id', () => {
    expect(Object.fromEntries(X402_V1_NETWORKS)).toEqual(EVM_NETWORK_CHAIN_ID_MAP);
  });

  test('behavior: chain ids resolve from v1 names and CAIP-2 only', () => {
    expect(resolveX402ChainId('base')).toBe(8453);
    expect(resolveX402ChainId('base-sepolia')).toBe(84532);
    expect(resolveX402ChainId('eip155:8453')).toBe(8453);
    expect(resolveX402ChainId('eip155:08453')).toBeUndefined();
    expect(resolveX402ChainId('tempo')).toBeUndefined();
    expect(resolveX402ChainId('constructor')).toBeUndefined();
    expect(resolveX402ChainId('solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp')).toBeUndefined();
  });

  test('behavior: lookups compare addresses case-insensitively', () => {
    expect(findX402Stablecoin(8453, BASE_USDC.toUpperCase().replace('0X', '0x'))?.symbol).toBe('USDC');
    expect(findX402Stablecoin(4326, MEGA_USD.toLowerCase())?.decimals).toBe(18);
    expect(findX402Stablecoin(84532, BASE_USDC)).toBeUndefined();
    expect(findTempoUsdToken(4217, TEMPO_USDC_E)?.address).toBe(TEMPO_USDC_E);
    expect(findTempoUsdToken(42431, PATH_USD.toUpperCase().replace('0X', '0x'))?.symbol).toBe('pathUSD');
    expect(findTempoUsdToken(42431, TESTNET_EURC_E)).toBeUndefined();
    expect(findTempoUsdToken(4217, '0x20c0000000000000000000001621e21f71cf12fb')).toBeUndefined(); // EURC.e
  });

  test('behavior: table addresses are checksummed and unique per chain', () => {
    const keys = listX402Stablecoins().map((t) => `${t.chainId}:${t.address.toLowerCase()}`);
    expect(new Set(keys).size).toBe(keys.length);
    for (const t of listX402Stablecoins()) expect(t.address).toBe(getAddress(t.address.toLowerCase()));
  });
});

describe('parsePaymentChallenge: x402 v2 from @x402/hono 2.27.0', () => {
  test('behavior: Base Sepolia $0.01 becomes a complete offer that echoes accepts[0] verbatim', async () => {
    const app = x402App([{ scheme: 'exact', price: '$0.01', network: 'eip155:84532', payTo: PAY_TO }]);
    const res = await x402Challenge(app);
    expect(res.status).toBe(402);
    const probe = await toProbe(res);
    const header = probe.headers['payment-required']!;
    const decoded = decodeBase64Json(header) as { accepts: Record<string, unknown>[]; resource: Record<string, unknown> };

    const offer = parsePaymentChallenge(probe, NOW);

    expect(offer).toEqual({
      rail: 'x402',
      chainId: 84532,
      network: 'eip155:84532',
      scheme: 'exact',
      realm: null,
      payTo: PAY_TO,
      asset: BASE_SEPOLIA_USDC,
      amountAtomic: 10000n,
      decimals: 6,
      amountMicros: 10000n,
      x402: {
        version: 2,
        accepted: decoded.accepts[0]!,
        resource: { url: RESOURCE_URL, description: 'demo', mimeType: '' },
        domainName: 'USDC',
        domainVersion: '2',
        maxTimeoutSeconds: 300,
      },
    } satisfies Offer);
    // Verbatim means key order too: the re-serialised echo is byte-identical.
    expect(JSON.stringify(offer.x402!.accepted)).toBe(JSON.stringify(decoded.accepts[0]));
    expect(offer.x402!.resource).toEqual(decoded.resource);
    // The reference client's own decoder reads the same requirement.
    expect(decodePaymentRequiredHeader(header).accepts[0]).toEqual(offer.x402!.accepted);
  });

  test('behavior: Base mainnet $0.001 with a 60 s timeout uses the "USD Coin" domain', async () => {
    const app = x402App([{ scheme: 'exact', price: '$0.001', network: 'eip155:8453', payTo: PAY_TO, maxTimeoutSeconds: 60 }], 'Weather');
    const offer = parsePaymentChallenge(await toProbe(await x402Challenge(app)), NOW);
    expect(offer).toMatchObject({ rail: 'x402', chainId: 8453, network: 'eip155:8453', asset: BASE_USDC, amountAtomic: 1000n, amountMicros: 1000n });
    expect(offer.x402).toMatchObject({ version: 2, domainName: 'USD Coin', domainVersion: '2', maxTimeoutSeconds: 60 });
  });

  test('behavior: a larger price keeps exact integer amounts', async () => {
    const app = x402App([{ scheme: 'exact', price: '$1234.567891', network: 'eip155:8453', payTo: PAY_TO }]);
    const offer = parsePaymentChallenge(await toProbe(await x402Challenge(app)), NOW);
    expect(offer.amountAtomic).toBe(1234567891n);
    expect(offer.amountMicros).toBe(1234567891n);
  });

  test('behavior: the first payable entry wins; an earlier permit2 (MegaETH) and upto entry are skipped', async () => {
    const app = x402App([
      { scheme: 'exact', price: '$0.02', network: 'eip155:4326', payTo: PAY_TO },
      { scheme: 'upto', price: '$0.03', network: 'eip155:84532', payTo: PAY_TO },
      { scheme: 'exact', price: '$0.01', network: 'eip155:84532', payTo: PAY_TO },
      { scheme: 'exact', price: '$0.01', network: 'eip155:8453', payTo: PAY_TO },
    ]);
    const probe = await toProbe(await x402Challenge(app));
    const decoded = decodeBase64Json(probe.headers['payment-required']!) as { accepts: Record<string, unknown>[] };
    expect(decoded.accepts).toHaveLength(4);
    expect(decoded.accepts[0]!.extra).toMatchObject({ assetTransferMethod: 'permit2' });

    const offer = parsePaymentChallenge(probe, NOW);

    expect(offer.chainId).toBe(84532);
    expect(offer.x402!.accepted).toEqual(decoded.accepts[2]);
    expect(JSON.stringify(offer.x402!.accepted)).toBe(JSON.stringify(decoded.accepts[2]));
  });

  test('error: cannot_price for a permit2-only MegaETH offer', async () => {
    const app = x402App([{ scheme: 'exact', price: '$0.01', network: 'eip155:4326', payTo: PAY_TO }]);
    const probe = await toProbe(await x402Challenge(app));
    const e = refusal(() => parsePaymentChallenge(probe, NOW));
    expect(e.code).toBe('cannot_price');
    expect(e.shortMessage).toBe(`Cannot price asset ${MEGA_USD} on eip155:4326: only EIP-3009 transfers are supported`);
  });

  test('error: cannot_price for an upto-only offer', async () => {
    const app = x402App([{ scheme: 'upto', price: '$0.01', network: 'eip155:84532', payTo: PAY_TO }]);
    const probe = await toProbe(await x402Challenge(app));
    const err = refusal(() => parsePaymentChallenge(probe, NOW));
    expect(err.code).toBe('cannot_price');
    expect(err.shortMessage).toBe('Cannot price x402 scheme upto on eip155:84532');
  });

  test('error: cannot_price for a token outside the table', async () => {
    const unknown = '0x1111111111111111111111111111111111111111';
    const app = x402App([
      { scheme: 'exact', price: { amount: '5000', asset: unknown, extra: { name: 'Fake', version: '1' } }, network: 'eip155:8453', payTo: PAY_TO },
    ]);
    const probe = await toProbe(await x402Challenge(app));
    const e = refusal(() => parsePaymentChallenge(probe, NOW));
    expect(e.code).toBe('cannot_price');
    expect(e.shortMessage).toBe(`Cannot price asset ${unknown} on eip155:8453`);
  });

  test('error: unsupported_network for Tempo on x402', async () => {
    const app = x402App([
      {
        scheme: 'exact',
        price: { amount: '10000', asset: PATH_USD, extra: { name: 'pathUSD', version: '1' } },
        network: 'eip155:4217',
        payTo: PAY_TO,
      },
    ]);
    const probe = await toProbe(await x402Challenge(app));
    expect(decodeBase64Json(probe.headers['payment-required']!)).toMatchObject({ accepts: [{ network: 'eip155:4217' }] });
    const err = refusal(() => parsePaymentChallenge(probe, NOW));
    expect(err.code).toBe('unsupported_network');
    expect(err.shortMessage).toBe('Unsupported x402 network eip155:4217');
  });
});

describe('parsePaymentChallenge: x402 v1 (legacy JSON body, x402.md §2)', () => {
  const v1Requirement = {
    scheme: 'exact',
    network: 'base-sepolia',
    maxAmountRequired: '10000',
    resource: RESOURCE_URL,
    description: 'demo',
    mimeType: '',
    payTo: PAY_TO,
    maxTimeoutSeconds: 60,
    asset: BASE_SEPOLIA_USDC,
    outputSchema: { input: { type: 'http', method: 'GET', discoverable: true } },
    extra: { name: 'USDC', version: '2' },
  };

  function v1Probe(accepts: unknown[]): ProbeResult {
    const body = { x402Version: 1, error: 'X-PAYMENT header is required', accepts };
    return { status: 402, headers: { 'content-type': 'application/json' }, body: Buffer.from(JSON.stringify(body)), url: RESOURCE_URL };
  }

  test('behavior: a base-sepolia $0.01 challenge keeps the v1 network name', () => {
    const offer = parsePaymentChallenge(v1Probe([v1Requirement]), NOW);
    expect(offer).toEqual({
      rail: 'x402',
      chainId: 84532,
      network: 'base-sepolia',
      scheme: 'exact',
      realm: null,
      payTo: PAY_TO,
      asset: BASE_SEPOLIA_USDC,
      amountAtomic: 10000n,
      decimals: 6,
      amountMicros: 10000n,
      x402: { version: 1, accepted: v1Requirement, resource: undefined, domainName: 'USDC', domainVersion: '2', maxTimeoutSeconds: 60 },
    } satisfies Offer);
  });

  test('behavior: a legacy float amount is rounded up to a whole atomic unit', () => {
    const offer = parsePaymentChallenge(v1Probe([{ ...v1Requirement, network: 'base', asset: BASE_USDC, maxAmountRequired: '1004999.9999999999' }]), NOW);
    expect(offer.amountAtomic).toBe(1005000n);
    expect(offer.amountMicros).toBe(1005000n);
    expect(offer.x402!.accepted.maxAmountRequired).toBe('1004999.9999999999');
    expect(parsePaymentChallenge(v1Probe([{ ...v1Requirement, maxAmountRequired: '10000.000' }]), NOW).amountAtomic).toBe(10000n);
    expect(parsePaymentChallenge(v1Probe([{ ...v1Requirement, maxAmountRequired: '0.0000001' }]), NOW).amountAtomic).toBe(1n);
  });

  test('behavior: a v1 body is ignored when the header carries v2', async () => {
    const app = x402App([{ scheme: 'exact', price: '$0.01', network: 'eip155:8453', payTo: PAY_TO }]);
    const probe = { ...(await toProbe(await x402Challenge(app))), body: v1Probe([v1Requirement]).body };
    expect(parsePaymentChallenge(probe, NOW)).toMatchObject({ chainId: 8453, x402: { version: 2 } });
  });

  test('error: unsupported_network for a v1 name paypolicy has no token on', () => {
    const err = refusal(() => parsePaymentChallenge(v1Probe([{ ...v1Requirement, network: 'solana-devnet' }]), NOW));
    expect(err.code).toBe('unsupported_network');
    expect(err.shortMessage).toBe('Unsupported x402 network solana-devnet');
    expect(refusal(() => parsePaymentChallenge(v1Probe([{ ...v1Requirement, network: 'tempo' }]), NOW)).shortMessage).toBe(
      'Unsupported x402 network tempo',
    );
  });
});

describe('parsePaymentChallenge: 18-decimal tokens', () => {
  test('behavior: MegaUSD with an EIP-3009 domain is priced at 18 decimals, rounding micro-dollars up', () => {
    const accepted = {
      scheme: 'exact',
      network: 'eip155:4326',
      amount: '10000000000000001', // $0.010000000000000001
      asset: MEGA_USD,
      payTo: PAY_TO,
      maxTimeoutSeconds: 300,
      extra: { name: 'MegaUSD', version: '1' },
    };
    const header = encodeBase64Json({ x402Version: 2, resource: { url: RESOURCE_URL }, accepts: [accepted] });
    const offer = parsePaymentChallenge({ status: 402, headers: { 'payment-required': header }, body: Buffer.alloc(0), url: RESOURCE_URL }, NOW);
    expect(offer).toMatchObject({ chainId: 4326, decimals: 18, amountAtomic: 10000000000000001n, amountMicros: 10001n });
  });
});

describe('parsePaymentChallenge: MPP from mppx 0.11.0', () => {
  test('behavior: a testnet tempo/charge of $0.01 becomes a complete offer with the raw request kept', async () => {
    const mppx = mppTempo();
    const res = challengeOf(await mppx.charge({ amount: '0.01', description: 'test item' })(new Request(RESOURCE_URL)));
    const probe = await toProbe(res);
    const header = probe.headers['www-authenticate']!;
    const [reference] = Challenge.deserializeList(header);

    const offer = parsePaymentChallenge(probe, NOW);

    expect(offer).toEqual({
      rail: 'mpp',
      chainId: 42431,
      network: 'tempo-testnet',
      scheme: null,
      realm: 'localhost-test',
      payTo: MPP_RECIPIENT,
      asset: PATH_USD,
      amountAtomic: 10000n,
      decimals: 6,
      amountMicros: 10000n,
      mpp: {
        challenge: {
          id: reference!.id,
          realm: 'localhost-test',
          method: 'tempo',
          intent: 'charge',
          request: rawRequestOf(header, 'tempo'),
          description: 'test item',
          expires: reference!.expires,
        },
        request: { amount: '10000', currency: PATH_USD_WIRE, recipient: MPP_RECIPIENT, methodDetails: { chainId: 42431 } },
      },
    } satisfies Offer);
    expect(Buffer.from(offer.mpp!.challenge.request, 'base64url').toString()).toBe(JSON.stringify(reference!.request));
  });

  test('behavior: mainnet with splits prices the full amount in USDC.e', async () => {
    const mppx = mppTempo({ chainId: 4217 });
    const res = challengeOf(
      await mppx.charge({ amount: '1.5', splits: [{ amount: '0.5', recipient: PAY_TO }] })(new Request(RESOURCE_URL)),
    );
    const offer = parsePaymentChallenge(await toProbe(res), NOW);
    expect(offer).toMatchObject({ rail: 'mpp', chainId: 4217, network: 'tempo', asset: TEMPO_USDC_E, amountAtomic: 1500000n, amountMicros: 1500000n });
    expect(offer.mpp!.request.methodDetails).toEqual({ chainId: 4217, splits: [{ amount: '500000', recipient: PAY_TO }] });
  });

  test('behavior: with stripe offered first in one comma-joined header, the tempo challenge is chosen', async () => {
    const mppx = mppStripeAndTempo();
    const res = challengeOf(await mppx.charge({ amount: '1' })(new Request(RESOURCE_URL)));
    const probe = await toProbe(res);
    const header = probe.headers['www-authenticate']!;
    expect(header.indexOf('method="stripe"')).toBeLessThan(header.indexOf('method="tempo"'));
    expect(Challenge.deserializeList(header)).toHaveLength(2);

    const offer = parsePaymentChallenge(probe, NOW);

    expect(offer).toMatchObject({ rail: 'mpp', chainId: 42431, amountAtomic: 1000000n, amountMicros: 1000000n });
    expect(offer.mpp!.challenge.request).toBe(rawRequestOf(header, 'tempo'));
  });

  test('behavior: compose() with stripe first gives the same choice', async () => {
    const mppx = mppStripeAndTempo();
    const res = challengeOf(
      await mppx.compose(['stripe/charge', { amount: '1' }], ['tempo/charge', { amount: '0.01' }])(new Request(RESOURCE_URL)),
    );
    expect(parsePaymentChallenge(await toProbe(res), NOW)).toMatchObject({ rail: 'mpp', network: 'tempo-testnet', amountAtomic: 10000n });
  });

  test('behavior: an escaped description with ", Payment " inside does not split the challenge', async () => {
    const mppx = mppStripeAndTempo();
    const description = 'say "hi", Payment id="evil", realm="x" — café';
    const res = challengeOf(await mppx.charge({ amount: '1', description })(new Request(RESOURCE_URL)));
    const probe = await toProbe(res);
    const offer = parsePaymentChallenge(probe, NOW);
    expect(offer.mpp!.challenge.description).toBe(description);
    expect(offer.mpp!.challenge.id).toBe(Challenge.deserializeList(probe.headers['www-authenticate']!)[1]!.id);
  });

  test('behavior: a challenge is payable until its expires instant', async () => {
    const res = challengeOf(await mppTempo().charge({ amount: '0.01' })(new Request(RESOURCE_URL)));
    const probe = await toProbe(res);
    const expires = Challenge.deserializeList(probe.headers['www-authenticate']!)[0]!.expires!;
    expect(parsePaymentChallenge(probe, new Date(Date.parse(expires) - 1)).rail).toBe('mpp');
    const err = refusal(() => parsePaymentChallenge(probe, new Date(Date.parse(expires))));
    expect(err.code).toBe('challenge_expired');
    expect(err.shortMessage).toBe(`Cannot price expired MPP challenge (expires ${expires})`);
  });

  test('error: unsupported_method for stripe only', async () => {
    const res = challengeOf(await mppStripeOnly().charge({ amount: '1' })(new Request(RESOURCE_URL)));
    const err = refusal(() => parsePaymentChallenge(toProbeSync(res), NOW));
    expect(err.code).toBe('unsupported_method');
    expect(err.shortMessage).toBe('MPP method stripe not supported yet');
  });

  test('error: cannot_price for a non-USD Tempo token (EURC.e)', async () => {
    const mppx = mppTempo({ testnet: true, currency: '0x20c000000000000000000000d72572838bbee59c' });
    const res = challengeOf(await mppx.charge({ amount: '0.01' })(new Request(RESOURCE_URL)));
    const err = refusal(() => parsePaymentChallenge(toProbeSync(res), NOW));
    expect(err.code).toBe('cannot_price');
    expect(err.shortMessage).toBe(`Cannot price currency ${TESTNET_EURC_E} on chain 42431`);
  });

  test('error: cannot_price when methodDetails.chainId is absent (the specs disagree on the default)', () => {
    const header = Challenge.serialize(
      Challenge.from({
        id: 'nochainidchallenge0001',
        realm: 'api.example.test',
        method: 'tempo',
        intent: 'charge',
        request: { amount: '10000', currency: PATH_USD, recipient: MPP_RECIPIENT },
        expires: new Date(NOW.getTime() + 60_000).toISOString(),
      }),
    );
    const err = refusal(() => parsePaymentChallenge(mppProbe(header), NOW));
    expect(err.code).toBe('cannot_price');
    expect(err.shortMessage).toBe(`Cannot price currency ${PATH_USD} without methodDetails.chainId`);
  });

  test('error: unsupported_method for tempo/session', () => {
    const header = Challenge.serialize(
      Challenge.from({
        id: 'sessionchallenge000001',
        realm: 'api.example.test',
        method: 'tempo',
        intent: 'session',
        request: { amount: '10', unitType: 'token', currency: PATH_USD, recipient: MPP_RECIPIENT, methodDetails: { chainId: 42431 } },
      }),
    );
    const err = refusal(() => parsePaymentChallenge(mppProbe(header), NOW));
    expect(err.code).toBe('unsupported_method');
    expect(err.shortMessage).toBe('MPP method tempo/session not supported yet');
  });
});

describe('parsePaymentChallenge: both rails in one 402', () => {
  async function x402Probe(accepts: Parameters<typeof x402App>[0]): Promise<ProbeResult> {
    return toProbe(await x402Challenge(x402App(accepts)));
  }
  async function tempoProbe(): Promise<ProbeResult> {
    return toProbe(challengeOf(await mppTempo().charge({ amount: '0.02' })(new Request(RESOURCE_URL))));
  }

  test('behavior: a payable x402 offer takes precedence over a payable MPP one', async () => {
    const probe = mergeProbes(await x402Probe([{ scheme: 'exact', price: '$0.01', network: 'eip155:84532', payTo: PAY_TO }]), await tempoProbe());
    expect(probe.headers['www-authenticate']).toContain('Payment ');
    expect(parsePaymentChallenge(probe, NOW)).toMatchObject({ rail: 'x402', amountAtomic: 10000n });
  });

  test('behavior: an unpayable x402 offer falls back to the MPP one', async () => {
    const x402 = await x402Probe([
      { scheme: 'exact', price: { amount: '10000', asset: PATH_USD, extra: { name: 'pathUSD', version: '1' } }, network: 'eip155:4217', payTo: PAY_TO },
    ]);
    expect(parsePaymentChallenge(mergeProbes(x402, await tempoProbe()), NOW)).toMatchObject({ rail: 'mpp', amountAtomic: 20000n });
  });

  test('error: the more specific refusal wins across rails (cannot_price over unsupported_method)', async () => {
    const x402 = await x402Probe([{ scheme: 'exact', price: '$0.01', network: 'eip155:4326', payTo: PAY_TO }]);
    const stripeOnly = await toProbe(challengeOf(await mppStripeOnly().charge({ amount: '1' })(new Request(RESOURCE_URL))));
    const err = refusal(() => parsePaymentChallenge(mergeProbes(stripeOnly, x402), NOW));
    expect(err.code).toBe('cannot_price');
  });
});

/** A 402 carrying only a WWW-Authenticate value. */
function mppProbe(header: string): ProbeResult {
  return { status: 402, headers: { 'www-authenticate': header }, body: Buffer.alloc(0), url: RESOURCE_URL };
}

/** Header-only conversion for refusal tests, where the problem+json body does not matter. */
function toProbeSync(res: Response): ProbeResult {
  const headers: Record<string, string> = {};
  res.headers.forEach((value, name) => {
    headers[name] = value;
  });
  return { status: res.status, headers, body: Buffer.alloc(0), url: RESOURCE_URL };
}
