import fc from 'fast-check';
import { getAddress } from 'viem';
import { describe, expect, test } from 'vitest';
import { DomainError } from '../../src/domain/errors.js';
import type { Offer, ProbeResult } from '../../src/paywalls/offer.js';
import { parseAuthChallenges } from '../../src/paywalls/mppChallenge.js';
import { parsePaymentChallenge } from '../../src/paywalls/parseChallenge.js';
import { findTempoUsdToken, findX402Stablecoin } from '../../src/paywalls/tokens.js';
import { encodeBase64Json, encodeBase64UrlJson, MPP_RECIPIENT, PAY_TO, RESOURCE_URL } from './challengePeers.js';

const NOW = new Date('2026-06-01T12:00:00.000Z');
const FUTURE = '2026-06-01T12:05:00.000Z';
const PAST = '2026-06-01T11:55:00Z';
const BASE_USDC = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
const BASE_SEPOLIA_USDC = '0x036CbD53842c5426634e7929541eC2318f3dCF7e';
const PATH_USD_WIRE = '0x20c0000000000000000000000000000000000000';
const NO_CHALLENGE = 'URL returned 402 but no parseable x402 or MPP challenge.';
const CODES = new Set(['no_challenge', 'cannot_price', 'unsupported_network', 'unsupported_method', 'challenge_expired']);

/** A 402 probe with the given lowercase headers and body. */
function probe(headers: Record<string, string>, body: Buffer | string = ''): ProbeResult {
  return { status: 402, headers, body: typeof body === 'string' ? Buffer.from(body) : body, url: RESOURCE_URL };
}

/** Runs the parser, which must refuse with a DomainError invalid_argument, and returns the error. */
function refusal(p: ProbeResult, now = NOW): DomainError {
  try {
    parsePaymentChallenge(p, now);
  } catch (err) {
    if (!(err instanceof DomainError)) throw err;
    expect(err.kind).toBe('invalid_argument');
    return err;
  }
  throw new Error('expected a DomainError');
}

/** Asserts the "no parseable challenge" refusal. */
function expectNoChallenge(p: ProbeResult): void {
  const err = refusal(p);
  expect(err.shortMessage).toBe(NO_CHALLENGE);
  expect(err.code).toBe('no_challenge');
}

const requirement = (overrides: Record<string, unknown> = {}): Record<string, unknown> => ({
  scheme: 'exact',
  network: 'eip155:84532',
  amount: '10000',
  asset: BASE_SEPOLIA_USDC,
  payTo: PAY_TO,
  maxTimeoutSeconds: 300,
  extra: { name: 'USDC', version: '2' },
  ...overrides,
});

const v2 = (accepts: unknown[], envelope: Record<string, unknown> = {}): Record<string, unknown> => ({
  x402Version: 2,
  error: 'Payment required',
  resource: { url: RESOURCE_URL, description: 'demo', mimeType: '' },
  accepts,
  ...envelope,
});

const v2Probe = (value: unknown): ProbeResult => probe({ 'payment-required': encodeBase64Json(value) });

const v1Requirement = (overrides: Record<string, unknown> = {}): Record<string, unknown> => ({
  scheme: 'exact',
  network: 'base-sepolia',
  maxAmountRequired: '10000',
  resource: RESOURCE_URL,
  description: 'demo',
  mimeType: '',
  payTo: PAY_TO,
  maxTimeoutSeconds: 60,
  asset: BASE_SEPOLIA_USDC,
  extra: { name: 'USDC', version: '2' },
  ...overrides,
});

const v1Probe = (accepts: unknown[], envelope: Record<string, unknown> = {}): ProbeResult =>
  probe({ 'content-type': 'application/json' }, JSON.stringify({ x402Version: 1, error: 'X-PAYMENT header is required', accepts, ...envelope }));

const tempoRequest = (overrides: Record<string, unknown> = {}): Record<string, unknown> => ({
  amount: '10000',
  currency: PATH_USD_WIRE,
  methodDetails: { chainId: 42431 },
  recipient: MPP_RECIPIENT,
  ...overrides,
});

/** Quotes an auth-param value the RFC 9110 way. */
const quote = (value: string): string => `"${value.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;

/** Serialises one Payment challenge; `request` may be an object (encoded) or a raw string. */
function payment(params: Record<string, unknown> = {}): string {
  const all: Record<string, unknown> = {
    id: 'challenge-1',
    realm: 'api.example.test',
    method: 'tempo',
    intent: 'charge',
    request: tempoRequest(),
    expires: FUTURE,
    ...params,
  };
  const parts = Object.entries(all)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}=${quote(typeof v === 'string' ? v : encodeBase64UrlJson(v))}`);
  return `Payment ${parts.join(', ')}`;
}

const mppProbe = (header: string): ProbeResult => probe({ 'www-authenticate': header });

describe('parsePaymentChallenge: x402 v2 header', () => {
  const valid = encodeBase64Json(v2([requirement()]));

  test('behavior: the valid baseline parses', () => {
    expect(parsePaymentChallenge(probe({ 'payment-required': valid }), NOW)).toMatchObject({ rail: 'x402', chainId: 84532 });
  });

  test('error: no_challenge for truncated base64', () => {
    for (const cut of [valid.slice(0, -4), valid.slice(0, -7), valid.slice(0, valid.length >> 1), valid.slice(0, 1), '']) {
      expectNoChallenge(probe({ 'payment-required': cut }));
    }
  });

  test('error: no_challenge for characters outside standard base64 and for excess padding', () => {
    expectNoChallenge(probe({ 'payment-required': `${valid.slice(0, 8)}!${valid.slice(8)}` }));
    expectNoChallenge(probe({ 'payment-required': valid.replace(/\+/g, '-').replace(/\//g, '_') + '-_' }));
    expectNoChallenge(probe({ 'payment-required': `${valid.replace(/=+$/, '')}===` }));
    expectNoChallenge(probe({ 'payment-required': `${valid.slice(0, 4)}=${valid.slice(4)}` }));
  });

  test('behavior: missing padding is tolerated', () => {
    // Pad the description until the encoding needs "=" so that dropping it is meaningful.
    let header = '';
    for (let n = 0; !header.endsWith('='); n++) header = encodeBase64Json(v2([requirement()], { error: 'x'.repeat(n) }));
    expect(parsePaymentChallenge(probe({ 'payment-required': header.replace(/=+$/, '') }), NOW).chainId).toBe(84532);
    expect(parsePaymentChallenge(probe({ 'payment-required': ` ${header} ` }), NOW).chainId).toBe(84532);
  });

  test('error: no_challenge for invalid JSON, invalid UTF-8 and non-object JSON', () => {
    expectNoChallenge(probe({ 'payment-required': Buffer.from('{"x402Version":2,').toString('base64') }));
    expectNoChallenge(probe({ 'payment-required': Buffer.from([0x7b, 0xff, 0xfe, 0x7d]).toString('base64') }));
    expectNoChallenge(probe({ 'payment-required': encodeBase64Json([v2([requirement()])]) }));
    expectNoChallenge(probe({ 'payment-required': encodeBase64Json('x402') }));
    expectNoChallenge(probe({ 'payment-required': encodeBase64Json(null) }));
  });

  test('error: no_challenge for a wrong envelope (version, accepts, error, resource)', () => {
    for (const x402Version of [1, '2', 3, null, undefined]) expectNoChallenge(v2Probe(v2([requirement()], { x402Version })));
    for (const accepts of [undefined, null, {}, [], 'exact', requirement()]) expectNoChallenge(v2Probe(v2([], { accepts })));
    for (const error of [5, {}, [], true]) expectNoChallenge(v2Probe(v2([requirement()], { error })));
    for (const resource of [RESOURCE_URL, 5, [], { url: 5 }, { url: '' }, { description: 'x' }, { url: RESOURCE_URL, description: 5 }, { url: RESOURCE_URL, mimeType: {} }]) {
      expectNoChallenge(v2Probe(v2([requirement()], { resource })));
    }
  });

  test('behavior: an absent or null resource is reported as undefined', () => {
    expect(parsePaymentChallenge(v2Probe(v2([requirement()], { resource: undefined })), NOW).x402!.resource).toBeUndefined();
    expect(parsePaymentChallenge(v2Probe(v2([requirement()], { resource: null })), NOW).x402!.resource).toBeUndefined();
  });

  const wrongTypes: Record<string, unknown[]> = {
    scheme: [5, null, '', {}, [], true],
    network: [8453, null, '', {}, ['eip155:8453']],
    amount: [10000, null, '', '1.5', '-1', '+1', '1e4', ' 100', '100 ', '0x10', '１０', '1'.repeat(79), (2n ** 256n).toString(), {}],
    asset: [5, null, '', [], {}],
    payTo: [5, null, '', 'not-an-address', '0x1234', `${PAY_TO}00`, {}],
    maxTimeoutSeconds: ['300', 0, -1, 1.5, null, 1e300, {}, true],
    extra: ['USDC', 5, [], true],
  };

  for (const [field, values] of Object.entries(wrongTypes)) {
    test(`error: no_challenge for a wrong ${field}; a valid sibling entry is still chosen`, () => {
      for (const value of values) {
        const broken = requirement({ [field]: value });
        expectNoChallenge(v2Probe(v2([broken])));
        const sibling = requirement({ network: 'eip155:8453', asset: BASE_USDC, amount: '777' });
        const offer = parsePaymentChallenge(v2Probe(v2([broken, sibling])), NOW);
        expect(offer.x402!.accepted).toEqual(sibling);
      }
    });
  }

  test('error: no_challenge for wrong types inside extra', () => {
    for (const extra of [{ name: 5, version: '2' }, { name: 'USDC', version: 2 }, { name: null, version: '2' }, { name: 'USDC', version: '2', assetTransferMethod: 1 }]) {
      expectNoChallenge(v2Probe(v2([requirement({ extra })])));
    }
  });

  test('error: no_challenge when a required field is missing', () => {
    for (const field of ['scheme', 'network', 'amount', 'asset', 'payTo', 'maxTimeoutSeconds']) {
      expectNoChallenge(v2Probe(v2([requirement({ [field]: undefined })])));
    }
    // v2 names the amount `amount`; the v1 name does not count.
    expectNoChallenge(v2Probe(v2([requirement({ amount: undefined, maxAmountRequired: '10000' })])));
  });

  test('error: cannot_price without an EIP-3009 domain', () => {
    for (const extra of [undefined, null, {}, { name: 'USDC' }, { version: '2' }, { name: '', version: '2' }]) {
      const err = refusal(v2Probe(v2([requirement({ extra })])));
      expect(err.code).toBe('cannot_price');
      expect(err.shortMessage).toBe(`Cannot price asset ${BASE_SEPOLIA_USDC} on eip155:84532: no EIP-3009 domain in extra`);
    }
    expect(parsePaymentChallenge(v2Probe(v2([requirement({ extra: { name: 'USDC', version: '2', assetTransferMethod: 'eip3009' } })])), NOW).rail).toBe('x402');
  });

  test('error: cannot_price for assets that are not table addresses, named safely', () => {
    expect(refusal(v2Probe(v2([requirement({ asset: 'USD' })]))).shortMessage).toBe('Cannot price asset USD on eip155:84532');
    expect(refusal(v2Probe(v2([requirement({ asset: BASE_USDC })]))).shortMessage).toBe(`Cannot price asset ${BASE_USDC} on eip155:84532`);
    const hostile = refusal(v2Probe(v2([requirement({ asset: `\u0000\n${'A'.repeat(5000)}` })]))).shortMessage;
    expect(hostile.length).toBeLessThan(200);
    expect(hostile).toMatch(/^[\x20-\x7e]+$/);
  });

  test('error: unsupported_network for non-EVM, malformed, prototype-named and Tempo networks', () => {
    for (const network of ['solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp', 'eip155:', 'eip155:0', 'eip155:-1', 'eip155:1e3', 'eip155:99999999999999999999', 'eip155:10', 'sepolia', 'constructor', '__proto__', 'toString', 'eip155:4217', 'eip155:42431', 'tempo']) {
      const err = refusal(v2Probe(v2([requirement({ network })])));
      expect(err.code, network).toBe('unsupported_network');
      expect(err.shortMessage).toBe(`Unsupported x402 network ${network}`);
    }
    const hostile = refusal(v2Probe(v2([requirement({ network: `\u001b[31m${'n'.repeat(10_000)}` })]))).shortMessage;
    expect(hostile).toMatch(/^Unsupported x402 network \?\[31mn+\.\.\.$/);
    expect(hostile.length).toBeLessThan(120);
  });

  test('behavior: "__proto__" keys in the JSON are inert and echoed as received', () => {
    const text = JSON.stringify(v2([requirement()])).replace('"scheme":"exact"', '"__proto__":{"scheme":"upto"},"scheme":"exact"');
    const offer = parsePaymentChallenge(probe({ 'payment-required': Buffer.from(text).toString('base64') }), NOW);
    expect(Object.hasOwn(offer.x402!.accepted, '__proto__')).toBe(true);
    expect(offer.scheme).toBe('exact');
  });

  test('error: no_challenge for a 200 KiB header, valid or not', () => {
    const huge = encodeBase64Json(v2([requirement()], { extensions: { pad: 'x'.repeat(200 * 1024) } }));
    expect(huge.length).toBeGreaterThan(200 * 1024);
    expectNoChallenge(probe({ 'payment-required': huge }));
    expectNoChallenge(probe({ 'payment-required': 'A'.repeat(200 * 1024) }));
  });

  test('error: no_challenge when header values are not strings (caller bug) or keys are prototype names', () => {
    expectNoChallenge(probe({ 'payment-required': 5 as unknown as string }));
    const headers = JSON.parse('{"__proto__":"x","constructor":"y","toString":"z"}') as Record<string, string>;
    expectNoChallenge(probe(headers));
  });
});

describe('parsePaymentChallenge: x402 v1 body', () => {
  test('error: no_challenge for bodies that are not a v1 challenge', () => {
    for (const body of [
      '',
      '<html><body>Pay</body></html>',
      '{}',
      '[]',
      'null',
      '{"x402Version":"1","accepts":[]}',
      '{"x402Version":2,"accepts":[]}',
      JSON.stringify({ x402Version: 2, accepts: [requirement()] }),
      '{"x402Version":1,"accepts":{}}',
      '{"x402Version":1,"accepts":[]}',
      '{"x402Version":1,',
    ]) {
      expectNoChallenge(probe({}, body));
    }
    expectNoChallenge(probe({}, Buffer.from([0xef, 0xbb, 0xbf, 0x7b, 0xc3, 0x28, 0x7d])));
  });

  test('error: no_challenge for a deeply nested or oversized body (no RangeError)', () => {
    expectNoChallenge(probe({}, '['.repeat(200_000)));
    expectNoChallenge(probe({}, `${'['.repeat(100_000)}${']'.repeat(100_000)}`));
    const big = JSON.stringify({ x402Version: 1, accepts: [v1Requirement()], pad: 'x'.repeat(300 * 1024) });
    expectNoChallenge(probe({}, big));
  });

  test('behavior: a UTF-8 BOM before the JSON is tolerated', () => {
    const body = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), v1Probe([v1Requirement()]).body]);
    expect(parsePaymentChallenge(probe({}, body), NOW).network).toBe('base-sepolia');
  });

  const wrongV1: Record<string, unknown[]> = {
    maxAmountRequired: [10000, '1.2.3', '.5', '5.', '1,5', '-1.5', 'NaN', 'Infinity', `${'9'.repeat(79)}.5`],
    resource: [undefined, 5, ''],
    description: [undefined, 5, null],
    mimeType: [5, {}],
    network: [84532, null],
  };
  for (const [field, values] of Object.entries(wrongV1)) {
    test(`error: no_challenge for a wrong v1 ${field}`, () => {
      for (const value of values) expectNoChallenge(v1Probe([v1Requirement({ [field]: value })]));
    });
  }

  test('error: no_challenge for a wrong v1 envelope error field', () => {
    expectNoChallenge(v1Probe([v1Requirement()], { error: 5 }));
  });

  test('behavior: a v1 amount just below 2^256 rounds up only while it still fits', () => {
    const max = (2n ** 256n - 1n).toString();
    expect(parsePaymentChallenge(v1Probe([v1Requirement({ maxAmountRequired: max })]), NOW).amountAtomic).toBe(2n ** 256n - 1n);
    expectNoChallenge(v1Probe([v1Requirement({ maxAmountRequired: `${max}.1` })]));
  });
});

describe('parsePaymentChallenge: MPP WWW-Authenticate', () => {
  test('behavior: the valid baseline parses', () => {
    expect(parsePaymentChallenge(mppProbe(payment()), NOW)).toMatchObject({ rail: 'mpp', chainId: 42431, realm: 'api.example.test' });
  });

  test('behavior: a malformed challenge among several does not hide the others', () => {
    const second = payment({ id: 'second' });
    const broken = [
      'Payment id="first", id="again", realm="r", method="tempo", intent="charge", request="e30"',
      'Payment id="first", ID="again", realm="r", method="tempo", intent="charge", request="e30"',
      payment({ id: 'first', request: 'not+base64url' }),
      payment({ id: 'first', request: `${encodeBase64UrlJson(tempoRequest())}==` }),
      payment({ id: 'first', request: 'A'.repeat(16 * 1024 + 4) }),
      payment({ id: 'first', request: encodeBase64UrlJson([tempoRequest()]) }),
      payment({ id: 'first', request: Buffer.from([0xff, 0xfe]).toString('base64url') }),
      payment({ id: 'first', expires: 'tomorrow' }),
      payment({ id: 'first', method: 'Tempo' }),
      payment({ id: 'first', intent: 'charge!' }),
      payment({ id: '' }),
      'Payment id="first", realm=, method="tempo"',
      'Payment id="first" realm="r"',
      'Payment id="first", realm="r", junk here, method="tempo"',
      'Payment id="first", realm="r", "quoted"',
      'Payment',
      'Payment token68abc==',
      'Payment id=first, realm="r", method="tempo", intent="charge", request="e30", request="e30"',
    ];
    for (const first of broken) {
      const offer = parsePaymentChallenge(mppProbe(`${first}, ${second}`), NOW);
      expect(offer.mpp!.challenge.id, first).toBe('second');
    }
  });

  test('behavior: other schemes around Payment challenges are skipped', () => {
    for (const header of [
      `Bearer realm="x", error="invalid_token", ${payment()}`,
      `Basic YWxhZGRpbjpvcGVuc2VzYW1l==, ${payment()}`,
      `Basic realm="a, Payment id=\\"evil\\"", ${payment()}, Bearer realm="y"`,
      `Negotiate, ${payment()}`,
      `, ,${payment()}, ,`,
    ]) {
      expect(parsePaymentChallenge(mppProbe(header), NOW).mpp!.challenge.id, header).toBe('challenge-1');
    }
  });

  test('behavior: quoted strings may hold ", Payment " text, escaped quotes and backslashes', () => {
    const description = 'a, Payment id="evil", realm="x", method="tempo" \\ done';
    const offer = parsePaymentChallenge(mppProbe(payment({ description, realm: 'r\\"q' })), NOW);
    expect(offer.mpp!.challenge.description).toBe(description);
    expect(offer.realm).toBe('r\\"q');
    expect(offer.mpp!.challenge.id).toBe('challenge-1');
  });

  test('behavior: quoted-pair and mppx \\uXXXX escapes are unescaped', () => {
    const header = payment().replace('realm="api.example.test"', 'realm="caf\\u00e9 \\a\\\\u0041 \\"x\\""');
    expect(parsePaymentChallenge(mppProbe(header), NOW).realm).toBe('café a\\u0041 "x"');
  });

  test('behavior: case-insensitive scheme and names, token values, spaces around "=", unknown params', () => {
    const request = encodeBase64UrlJson(tempoRequest());
    const header = `payment ID = "abc", Realm=api, METHOD=tempo, intent=charge, request=${request}, expires="${FUTURE}", future-param="ignored", x=y`;
    const offer = parsePaymentChallenge(mppProbe(header), NOW);
    expect(offer.mpp!.challenge).toEqual({ id: 'abc', realm: 'api', method: 'tempo', intent: 'charge', request, expires: FUTURE });
  });

  test('behavior: expires is optional, and every RFC 3339 offset form is read', () => {
    expect(parsePaymentChallenge(mppProbe(payment({ expires: undefined })), NOW).mpp!.challenge.expires).toBeUndefined();
    expect(parsePaymentChallenge(mppProbe(payment({ expires: '2026-06-01T14:00:00+01:00' })), NOW).rail).toBe('mpp');
    expect(refusal(mppProbe(payment({ expires: '2026-06-01T12:30:00+01:00' }))).code).toBe('challenge_expired');
    expect(parsePaymentChallenge(mppProbe(payment({ expires: '2026-06-01t12:00:00.5z' })), NOW).rail).toBe('mpp');
  });

  test('error: challenge_expired for an expired challenge', () => {
    const err = refusal(mppProbe(payment({ expires: PAST })));
    expect(err.code).toBe('challenge_expired');
    expect(err.shortMessage).toBe(`Cannot price expired MPP challenge (expires ${PAST})`);
    expect(refusal(mppProbe(payment({ expires: NOW.toISOString() }))).code).toBe('challenge_expired');
  });

  test('error: no_challenge when a required param is missing', () => {
    for (const param of ['id', 'realm', 'method', 'intent', 'request']) expectNoChallenge(mppProbe(payment({ [param]: undefined })));
    expect(parsePaymentChallenge(mppProbe(payment({ realm: '' })), NOW).realm).toBe('');
  });

  test('error: no_challenge for malformed expires values', () => {
    for (const expires of ['tomorrow', '2026-06-01', '2026-06-01 12:00:00Z', '2026-06-01T12:00:00', '2026-13-45T99:99:99Z', '1780000000']) {
      expectNoChallenge(mppProbe(payment({ expires })));
    }
  });

  const wrongRequest: Record<string, unknown>[] = [
    { amount: 10000 },
    { amount: '1.5' },
    { amount: '-1' },
    { amount: '' },
    { amount: (2n ** 256n).toString() },
    { amount: undefined },
    { currency: 'usd' },
    { currency: 5 },
    { currency: undefined },
    { recipient: undefined },
    { recipient: 'acct_123' },
    { description: 5 },
    { externalId: {} },
    { methodDetails: 'x' },
    { methodDetails: [] },
    { methodDetails: { chainId: '42431' } },
    { methodDetails: { chainId: 0 } },
    { methodDetails: { chainId: -1 } },
    { methodDetails: { chainId: 1.5 } },
    { methodDetails: { chainId: 42431, feePayer: 'true' } },
    { methodDetails: { chainId: 42431, memo: '0x12' } },
    { methodDetails: { chainId: 42431, splits: [] } },
    { methodDetails: { chainId: 42431, splits: {} } },
    { methodDetails: { chainId: 42431, splits: [{ amount: '10000', recipient: PAY_TO }] } },
    { methodDetails: { chainId: 42431, splits: [{ amount: '6000', recipient: PAY_TO }, { amount: '4000', recipient: PAY_TO }] } },
    { methodDetails: { chainId: 42431, splits: [{ amount: '0', recipient: PAY_TO }] } },
    { methodDetails: { chainId: 42431, splits: [{ amount: 10, recipient: PAY_TO }] } },
    { methodDetails: { chainId: 42431, splits: [{ amount: '10', recipient: 'bob' }] } },
    { methodDetails: { chainId: 42431, splits: [{ amount: '10', recipient: PAY_TO, memo: 'x' }] } },
    { methodDetails: { chainId: 42431, splits: ['10'] } },
    { methodDetails: { chainId: 42431, supportedModes: 'pull' } },
    { methodDetails: { chainId: 42431, supportedModes: [1] } },
  ];
  test('error: no_challenge for every wrong field of a tempo charge request', () => {
    for (const overrides of wrongRequest) {
      expectNoChallenge(mppProbe(payment({ request: tempoRequest(overrides) })));
      // The same broken request next to a good challenge leaves the good one payable.
      const offer = parsePaymentChallenge(mppProbe(`${payment({ id: 'bad', request: tempoRequest(overrides) })}, ${payment({ id: 'good' })}`), NOW);
      expect(offer.mpp!.challenge.id, JSON.stringify(overrides)).toBe('good');
    }
  });

  test('behavior: valid optional methodDetails are kept in the decoded request', () => {
    const memo = `0x${'ab'.repeat(32)}`;
    const methodDetails = {
      chainId: 42431,
      feePayer: true,
      memo,
      splits: [{ amount: '1000', recipient: PAY_TO, memo }],
      supportedModes: ['push'],
      machineTokenEnabled: false,
    };
    const offer = parsePaymentChallenge(mppProbe(payment({ request: tempoRequest({ methodDetails, externalId: 'order-1' }) })), NOW);
    expect(offer.mpp!.request).toEqual({
      amount: '10000',
      currency: PATH_USD_WIRE,
      recipient: MPP_RECIPIENT,
      methodDetails: { chainId: 42431, feePayer: true, memo, splits: [{ amount: '1000', recipient: PAY_TO, memo }], supportedModes: ['push'] },
    });
  });

  test('error: cannot_price for a missing chainId, an unknown chain and an unknown token', () => {
    const pathUsd = getAddress(PATH_USD_WIRE);
    expect(refusal(mppProbe(payment({ request: tempoRequest({ methodDetails: undefined }) }))).shortMessage).toBe(
      `Cannot price currency ${pathUsd} without methodDetails.chainId`,
    );
    expect(refusal(mppProbe(payment({ request: tempoRequest({ methodDetails: {} }) }))).code).toBe('cannot_price');
    expect(refusal(mppProbe(payment({ request: tempoRequest({ methodDetails: { chainId: 31318 } }) }))).shortMessage).toBe(
      `Cannot price currency ${pathUsd} on chain 31318`,
    );
    const eurc = '0x20c0000000000000000000001621e21f71cf12fb';
    expect(refusal(mppProbe(payment({ request: tempoRequest({ currency: eurc, methodDetails: { chainId: 4217 } }) }))).shortMessage).toBe(
      `Cannot price currency ${getAddress(eurc)} on chain 4217`,
    );
  });

  test('error: unsupported_method names the method, and method/intent for other intents', () => {
    expect(refusal(mppProbe(payment({ method: 'stripe', request: { amount: '100', currency: 'usd' } }))).shortMessage).toBe(
      'MPP method stripe not supported yet',
    );
    expect(refusal(mppProbe(payment({ intent: 'session' }))).shortMessage).toBe('MPP method tempo/session not supported yet');
    expect(refusal(mppProbe(payment({ method: 'evm', intent: 'subscription' }))).code).toBe('unsupported_method');
  });

  test('error: the most specific refusal wins among several MPP challenges', () => {
    const stripe = payment({ id: 's', method: 'stripe', request: { amount: '100', currency: 'usd' } });
    const unknownToken = payment({ id: 'u', request: tempoRequest({ currency: '0x20c0000000000000000000000000000000000099' }) });
    const expired = payment({ id: 'e', expires: PAST });
    expect(refusal(mppProbe(`${stripe}, ${unknownToken}`)).code).toBe('cannot_price');
    expect(refusal(mppProbe(`${unknownToken}, ${expired}, ${stripe}`)).code).toBe('challenge_expired');
    expect(refusal(mppProbe(`${stripe}, ${payment({ id: 'bad', request: 'e30' })}`)).code).toBe('unsupported_method');
  });

  test('error: no_challenge for a 200 KiB header, even with a valid challenge first', () => {
    expectNoChallenge(mppProbe(`${payment()}, Bearer realm="${'x'.repeat(200 * 1024)}"`));
    expectNoChallenge(mppProbe('Payment '.repeat(30 * 1024)));
    expectNoChallenge(mppProbe(`Payment id="${'\\'.repeat(200 * 1024)}`));
  });

  test('error: pathological header shapes are refused in linear time (no regex blow-up)', () => {
    const shapes = [
      `Payment a${' '.repeat(60_000)}b`,
      `Payment id="${'\\'.repeat(30_000)}x`,
      `Payment id="${'a\\"'.repeat(20_000)}`,
      `Payment ${'a=b,'.repeat(15_000)}`,
      'Payment, '.repeat(7_000),
      `Payment a=${'='.repeat(60_000)}`,
      `Payment ${'b'.repeat(60_000)} c`,
    ];
    for (const value of shapes) {
      const started = performance.now();
      expectNoChallenge(probe({ 'www-authenticate': value, 'payment-required': value }));
      expect(performance.now() - started, value.slice(0, 20)).toBeLessThan(500);
    }
  });

  test('error: no_challenge for an unterminated quoted string', () => {
    expectNoChallenge(mppProbe('Payment id="abc, realm="r", method="tempo"'));
    expectNoChallenge(mppProbe(payment().replace(/"$/, '')));
  });
});

describe('parseAuthChallenges', () => {
  test('behavior: splits merged lines into challenges with lowercased names', () => {
    expect(parseAuthChallenges('Bearer realm="a,b", Payment ID="x", Basic abc=, Payment, Foo a=b, c="d"')).toEqual([
      { scheme: 'Bearer', params: new Map([['realm', 'a,b']]) },
      { scheme: 'Payment', params: new Map([['id', 'x']]) },
      { scheme: 'Basic', params: null },
      { scheme: 'Payment', params: new Map() },
      { scheme: 'Foo', params: new Map([['a', 'b'], ['c', 'd']]) },
    ]);
  });
});

describe('parsePaymentChallenge: precedence across rails', () => {
  test('error: x402 unsupported_network outranks MPP unsupported_method; MPP cannot_price outranks both', () => {
    const stripe = payment({ method: 'stripe', request: { amount: '100', currency: 'usd' } });
    const x402 = encodeBase64Json(v2([requirement({ network: 'solana:devnet' })]));
    expect(refusal(probe({ 'payment-required': x402, 'www-authenticate': stripe })).code).toBe('unsupported_network');
    const unknownToken = payment({ request: tempoRequest({ methodDetails: { chainId: 31318 } }) });
    expect(refusal(probe({ 'payment-required': x402, 'www-authenticate': unknownToken })).code).toBe('cannot_price');
  });

  test('behavior: an unparseable x402 header does not hide a v1 body or an MPP challenge', () => {
    expect(parsePaymentChallenge({ ...v1Probe([v1Requirement()]), headers: { 'payment-required': 'garbage!' } }, NOW).x402!.version).toBe(1);
    expect(parsePaymentChallenge(probe({ 'payment-required': 'garbage!', 'www-authenticate': payment() }), NOW).rail).toBe('mpp');
  });

  test('error: no_challenge when every rail is malformed', () => {
    expectNoChallenge(probe({ 'payment-required': 'e30=', 'www-authenticate': 'Payment id="x"' }, '{"x402Version":1}'));
    expectNoChallenge(probe({}));
  });
});

// ---------------------------------------------------------------------------------------------
// Property-based: whatever a paywall sends, the parser returns a well-formed Offer or throws a
// DomainError invalid_argument with one of the documented codes, never anything else.
// ---------------------------------------------------------------------------------------------

/** Checks every invariant an Offer promises to its consumers. */
function assertWellFormedOffer(offer: Offer, now: Date): void {
  expect(['x402', 'mpp']).toContain(offer.rail);
  expect(Number.isSafeInteger(offer.chainId) && offer.chainId > 0).toBe(true);
  expect(offer.payTo).toBe(getAddress(offer.payTo));
  expect(offer.asset).toBe(getAddress(offer.asset));
  expect(typeof offer.amountAtomic).toBe('bigint');
  expect(offer.amountAtomic >= 0n && offer.amountAtomic < 2n ** 256n).toBe(true);
  const scale = 10n ** BigInt(offer.decimals - 6);
  expect(offer.amountMicros).toBe((offer.amountAtomic + scale - 1n) / scale);
  if (offer.rail === 'x402') {
    const token = findX402Stablecoin(offer.chainId, offer.asset);
    expect(token?.decimals).toBe(offer.decimals);
    expect(offer.scheme).toBe('exact');
    expect(offer.realm).toBeNull();
    expect(offer.mpp).toBeUndefined();
    expect(offer.x402!.accepted.network).toBe(offer.network);
    expect(offer.x402!.domainName.length).toBeGreaterThan(0);
    expect(Number.isSafeInteger(offer.x402!.maxTimeoutSeconds) && offer.x402!.maxTimeoutSeconds > 0).toBe(true);
  } else {
    expect(findTempoUsdToken(offer.chainId, offer.asset)?.decimals).toBe(offer.decimals);
    expect(offer.network).toBe(offer.chainId === 4217 ? 'tempo' : 'tempo-testnet');
    expect(offer.scheme).toBeNull();
    expect(typeof offer.realm).toBe('string');
    expect(offer.x402).toBeUndefined();
    expect(offer.mpp!.request.methodDetails.chainId).toBe(offer.chainId);
    expect(BigInt(offer.mpp!.request.amount)).toBe(offer.amountAtomic);
    const expires = offer.mpp!.challenge.expires;
    if (expires !== undefined) expect(Date.parse(expires.toUpperCase())).toBeGreaterThan(now.getTime());
  }
}

/** The property: an Offer or a documented DomainError; anything else fails the run. */
function parsesOrRefuses(p: ProbeResult, now = NOW): void {
  let offer: Offer;
  try {
    offer = parsePaymentChallenge(p, now);
  } catch (err) {
    if (!(err instanceof DomainError)) throw err;
    expect(err.kind).toBe('invalid_argument');
    expect(CODES.has(err.code)).toBe(true);
    expect(err.shortMessage).toMatch(/^[\x20-\x7e]{1,300}$/);
    return;
  }
  assertWellFormedOffer(offer, now);
}

const amountArb = fc.oneof(
  fc.bigInt({ min: 0n, max: 2n ** 257n }).map(String),
  fc.constantFrom('10000', '1004999.9999999999', '1.0', '0', '-1', '1e3', ''),
);
const addressArb = fc.oneof(
  fc.constantFrom(BASE_USDC, BASE_USDC.toLowerCase(), BASE_SEPOLIA_USDC, '0xFAfDdbb3FC7688494971a79cc65DCa3EF82079E7', PATH_USD_WIRE, PAY_TO, 'USD'),
  fc.uint8Array({ minLength: 20, maxLength: 20 }).map((b) => `0x${Buffer.from(b).toString('hex')}`),
);
/** Any value a hostile or buggy server might put in a field. */
const wildArb: fc.Arbitrary<unknown> = fc.oneof(
  fc.jsonValue({ maxDepth: 2 }),
  fc.constant(undefined),
  amountArb,
  addressArb,
  fc.constantFrom('eip155:8453', 'base', 'eip155:4217', 'tempo', 'solana:x', 'constructor', 'upto', 'permit2', 4217, 42431, 0, -1, 1.5),
);

/**
 * A coherent valid base with up to `max` fields replaced by wild values: most runs stay close
 * enough to valid to reach the deep checks, and each run breaks something different.
 */
function perturbed<T extends Record<string, unknown>>(bases: fc.Arbitrary<T>, keys: readonly string[], max = 2): fc.Arbitrary<Record<string, unknown>> {
  return fc
    .tuple(bases, fc.array(fc.tuple(fc.constantFrom(...keys), wildArb), { maxLength: max }))
    .map(([base, edits]) => {
      const out: Record<string, unknown> = { ...base };
      for (const [key, value] of edits) out[key] = value;
      return out;
    });
}

const requirementBases = [
  v1Requirement({ network: 'eip155:84532', amount: '10000' }),
  v1Requirement({ network: 'base', asset: BASE_USDC, amount: '1000', maxAmountRequired: '1004999.9999999999', extra: { name: 'USD Coin', version: '2' } }),
  v1Requirement({ network: 'eip155:4326', asset: '0xFAfDdbb3FC7688494971a79cc65DCa3EF82079E7', amount: '10000000000000001', maxAmountRequired: '1', extra: { name: 'MegaUSD', version: '1' } }),
  v1Requirement({ network: 'eip155:8453', asset: BASE_USDC.toLowerCase(), amount: '0', maxAmountRequired: '0', extra: { name: 'USD Coin', version: '2', assetTransferMethod: 'eip3009' } }),
];
const requirementArb = perturbed(fc.constantFrom(...requirementBases), [
  'scheme',
  'network',
  'amount',
  'maxAmountRequired',
  'asset',
  'payTo',
  'maxTimeoutSeconds',
  'resource',
  'description',
  'mimeType',
  'extra',
]).chain((req) =>
  // Sometimes break the EIP-3009 domain inside extra rather than extra itself.
  fc.option(fc.tuple(fc.constantFrom('name', 'version', 'assetTransferMethod'), wildArb), { nil: undefined }).map((edit) =>
    edit && typeof req.extra === 'object' && req.extra !== null ? { ...req, extra: { ...(req.extra as object), [edit[0]]: edit[1] } } : req,
  ),
);
const x402EnvelopeArb = perturbed(
  fc.tuple(fc.constantFrom(1, 2), fc.array(requirementArb, { minLength: 1, maxLength: 3 })).map(([x402Version, accepts]) =>
    x402Version === 2 ? v2(accepts) : { x402Version, error: 'X-PAYMENT header is required', accepts },
  ),
  ['x402Version', 'error', 'resource', 'accepts'],
  1,
);

const chargeBases = [
  tempoRequest(),
  tempoRequest({ currency: '0x20C000000000000000000000b9537d11c60E8b50', methodDetails: { chainId: 4217, splits: [{ amount: '4000', recipient: PAY_TO }] } }),
  tempoRequest({ currency: '0x20c0000000000000000000000000000000000001', methodDetails: { chainId: 42431, feePayer: true, supportedModes: ['pull'] } }),
];
const chargeArb = perturbed(fc.constantFrom(...chargeBases), ['amount', 'currency', 'recipient', 'methodDetails', 'description']);
const expiresArb = fc.integer({ min: -600, max: 600 }).map((s) => new Date(NOW.getTime() + s * 1000).toISOString());
const paramValueArb = fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom('tempo', 'charge', 'stripe', 'session', 'Tempo', 'a"b', 'x\\', ', Payment id="z"'));
const mppChallengeArb = fc
  .record({
    id: fc.string({ minLength: 1, maxLength: 10 }),
    request: fc.oneof({ weight: 6, arbitrary: chargeArb.map(encodeBase64UrlJson) }, { weight: 1, arbitrary: fc.string() }),
    expires: expiresArb,
    edits: fc.array(fc.tuple(fc.constantFrom('id', 'realm', 'method', 'intent', 'request', 'expires', 'description', 'other'), fc.option(paramValueArb)), { maxLength: 2 }),
    tokens: fc.boolean(),
  })
  .map(({ id, request, expires, edits, tokens }) => {
    const params: Record<string, string | null> = { id, realm: 'api.example.test', method: 'tempo', intent: 'charge', request, expires };
    for (const [key, value] of edits) params[key] = value;
    const parts = Object.entries(params)
      .filter((e): e is [string, string] => e[1] !== null)
      .map(([k, v]) => (tokens && /^[A-Za-z0-9._~-]+$/.test(v) ? `${k}=${v}` : `${k}=${quote(v)}`));
    return `Payment ${parts.join(', ')}`;
  });

/** Random edits of a string: the kind of damage proxies and buggy servers do. */
const mutate = (text: string): fc.Arbitrary<string> =>
  fc
    .array(fc.tuple(fc.nat(), fc.nat({ max: 5 }), fc.string({ maxLength: 4, unit: 'binary' })), { minLength: 1, maxLength: 3 })
    .map((edits) => edits.reduce((s, [at, del, ins]) => s.slice(0, at % (s.length + 1)) + ins + s.slice((at % (s.length + 1)) + del), text));

const validV2Header = encodeBase64Json(v2([requirement(), requirement({ network: 'eip155:8453', asset: BASE_USDC })]));
const validMppHeader = `${payment({ id: 'a', method: 'stripe', request: { amount: '100', currency: 'usd' } })}, ${payment({ id: 'b' })}`;

const paymentRequiredArb = fc.oneof(
  fc.string(),
  fc.string({ unit: 'binary', maxLength: 64 }),
  fc.jsonValue().map(encodeBase64Json),
  x402EnvelopeArb.map(encodeBase64Json),
  x402EnvelopeArb.map((e) => encodeBase64Json(e).replace(/=+$/, '')),
  mutate(validV2Header),
);
const wwwAuthenticateArb = fc.oneof(
  fc.string(),
  fc.array(mppChallengeArb, { minLength: 1, maxLength: 3 }).map((cs) => cs.join(', ')),
  fc.tuple(fc.constantFrom('Bearer realm="x"', 'Basic abc==', ''), mppChallengeArb).map(([a, b]) => (a ? `${a}, ${b}` : b)),
  mutate(validMppHeader),
);
const bodyArb = fc.oneof(
  fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b)),
  fc.jsonValue().map((v) => Buffer.from(JSON.stringify(v) ?? '')),
  x402EnvelopeArb.map((e) => Buffer.from(JSON.stringify(e))),
  fc.constant(Buffer.alloc(0)),
);
const headersArb = fc
  .record(
    {
      'payment-required': paymentRequiredArb,
      'www-authenticate': wwwAuthenticateArb,
      'content-type': fc.constantFrom('application/json', 'text/html'),
    },
    { requiredKeys: [] },
  )
  .chain((headers) =>
    fc.dictionary(fc.string({ maxLength: 12 }), fc.string({ maxLength: 12 }), { maxKeys: 3 }).map((extra) => ({ ...extra, ...headers })),
  );

describe('parsePaymentChallenge: property-based', () => {
  test('behavior: random headers and bodies give a well-formed Offer or a documented DomainError', () => {
    fc.assert(
      fc.property(headersArb, bodyArb, (headers, body) => parsesOrRefuses(probe(headers, body))),
      { numRuns: 2000 },
    );
  });

  test('behavior: structured x402 challenges (header and v1 body) never break the contract', () => {
    fc.assert(
      fc.property(x402EnvelopeArb, fc.boolean(), (envelope, inBody) =>
        parsesOrRefuses(inBody ? probe({}, JSON.stringify(envelope)) : probe({ 'payment-required': encodeBase64Json(envelope) })),
      ),
      { numRuns: 2000 },
    );
  });

  test('behavior: structured MPP challenges never break the contract, at any "now"', () => {
    fc.assert(
      fc.property(
        fc.array(mppChallengeArb, { minLength: 1, maxLength: 4 }),
        fc.integer({ min: -3600, max: 3600 }),
        (challenges, skew) => parsesOrRefuses(mppProbe(challenges.join(', ')), new Date(NOW.getTime() + skew * 1000)),
      ),
      { numRuns: 2000 },
    );
  });

  test('behavior: some generated inputs are payable (the generators reach the offer paths)', () => {
    let offers = 0;
    fc.assert(
      fc.property(fc.oneof(x402EnvelopeArb.map(encodeBase64Json).map((h) => probe({ 'payment-required': h })), mppChallengeArb.map(mppProbe)), (p) => {
        try {
          parsePaymentChallenge(p, NOW);
          offers++;
        } catch {
          // Refusals are covered by the other properties.
        }
      }),
      { numRuns: 1000, seed: 402 },
    );
    expect(offers).toBeGreaterThan(50);
  });
});

describe('parsePaymentChallenge: an offer too large to keep', () => {
  const BIG = 'x'.repeat(240 * 1024);
  // Headers are read up to 64 KiB by the parsers (16 KiB by the probe): a 10 KiB field there.
  const WIDE = 'x'.repeat(10 * 1024);

  test('error: cannot_price for a 240 KB field in a body, or a 10 KB one in a header, naming the field, on every rail', () => {
    const cases: Array<[ProbeResult, RegExp]> = [
      [v1Probe([v1Requirement({ description: BIG })]), /\(description\)$/],
      [v1Probe([v1Requirement({ extra: { name: BIG, version: '2' } })]), /\(extra\.name\)$/],
      [v2Probe(v2([requirement()], { resource: { url: RESOURCE_URL, description: WIDE, mimeType: '' } })), /\(resource\.description\)$/],
      [v2Probe(v2([requirement({ outputSchema: { [WIDE]: 1 } })])), /characters \(outputSchema\)$/],
      [mppProbe(payment({ description: WIDE })), /\(description\)$/],
    ];
    for (const [p, field] of cases) {
      const err = refusal(p);
      expect(err.code).toBe('cannot_price');
      expect(err.shortMessage).toMatch(/^Cannot price a challenge with a field of more than 4096 characters/);
      expect(err.shortMessage).toMatch(field);
      expect(err.shortMessage.length).toBeLessThan(200);
    }
  });

  test('error: cannot_price for many small fields adding up past 16384 bytes, and for deep nesting (no stack overflow)', () => {
    const many = Object.fromEntries(Array.from({ length: 400 }, (_, i) => [`k${i}`, 'v'.repeat(40)]));
    expect(refusal(v1Probe([v1Requirement({ outputSchema: many })])).shortMessage).toMatch(/^Cannot price a challenge of more than 16384 bytes \(\d+\)$/);
    const deep = `${'['.repeat(2_000)}"bottom"${']'.repeat(2_000)}`;
    const body = JSON.stringify({ x402Version: 1, accepts: [v1Requirement({ outputSchema: 'DEEP' })] }).replace('"DEEP"', deep);
    const err = refusal(probe({ 'content-type': 'application/json' }, body));
    expect(err.shortMessage).toBe('Cannot price a challenge nested more than 16 levels deep');
  });

  test('behavior: a sibling entry that fits is chosen, and real-sized fields pass', () => {
    const offer = parsePaymentChallenge(v1Probe([v1Requirement({ description: BIG }), v1Requirement({ description: 'd'.repeat(4096) })]), NOW);
    expect(offer.x402!.accepted.description).toBe('d'.repeat(4096));
    // x402 wins over MPP only while it fits; too large, the MPP offer beside it is paid.
    const both = probe({ 'content-type': 'application/json', 'www-authenticate': payment() }, JSON.stringify({ x402Version: 1, accepts: [v1Requirement({ description: BIG })] }));
    expect(parsePaymentChallenge(both, NOW).rail).toBe('mpp');
  });
});
