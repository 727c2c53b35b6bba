import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { DomainError } from '../../src/domain/errors.js';
import { limitCovers, limitsFromStored, limitsToStored, parseLimits, parseWindow, type LimitUsage } from '../../src/domain/limits.js';
import { evaluatePolicy, type PolicyFacts } from '../../src/domain/policy.js';
import { parsePolicyDocument, policyDocument } from '../../src/domain/policyDocument.js';

const USD = 1_000_000n;
const SHOP = '0x2222222222222222222222222222222222222222';

function facts(limits: LimitUsage[], over: Partial<PolicyFacts> = {}): PolicyFacts {
  return {
    agentStatus: 'active', allowlist: [SHOP], spendCapMicros: 1000n * USD, approvalThresholdMicros: 100n * USD, recipient: SHOP,
    attributedSlug: null, amountMicros: USD, committedMicros: 0n, maxNetworkFeeWei: 10n ** 18n, limits, ...over,
  };
}

const limit = (text: unknown) => parseLimits([text])[0]!;
const use = (micros: bigint, count = 0, feeWei = 0n) => ({ micros, count, feeWei });

describe('window limits: parsing', () => {
  test('behavior: windows are whole minutes, hours or days from 1m to 366d', () => {
    expect(parseWindow('1m', 'w')).toBe(60_000);
    expect(parseWindow('36h', 'w')).toBe(36 * 3_600_000);
    expect(parseWindow('366d', 'w')).toBe(366 * 86_400_000);
    for (const bad of ['0m', '367d', '1w', '1.5h', ' 1h', '1H', '', '01h', 60, null]) {
      expect(() => parseWindow(bad, 'limits[0].window'), String(bad)).toThrow(/limits\[0\]\.window must be a window/);
    }
  });

  test('error: an unknown key, a limit that limits nothing or a bad value is refused naming its place', () => {
    const refused = (value: unknown): string => {
      try {
        parseLimits(value);
      } catch (err) {
        expect(err).toBeInstanceOf(DomainError);
        expect((err as DomainError).kind).toBe('invalid_argument');
        return (err as Error).message;
      }
      throw new Error('accepted');
    };
    expect(refused([{ window: '1h', max_usd: '1', scope: 'agent' }])).toMatch(/limits\[0\] has an unknown key "scope"/);
    expect(refused([{ window: '1h', max_usd: '1' }, { window: '1h' }])).toMatch(/limits\[1\] limits nothing/);
    expect(refused([{ window: '1h', max_count: 1.5 }])).toMatch(/limits\[0\]\.max_count/);
    expect(refused([{ window: '1h', max_count: -1 }])).toMatch(/limits\[0\]\.max_count/);
    expect(refused([{ window: '1h', max_network_fee_wei: '1e18' }])).toMatch(/limits\[0\]\.max_network_fee_wei/);
    expect(refused([{ window: '1h', max_usd: '1.0000001' }])).toMatch(/limits\[0\]\.max_usd/);
    expect(refused(Array.from({ length: 33 }, () => ({ window: '1h', max_count: 1 })))).toMatch(/at most 32/);
    expect(refused({ window: '1h' })).toMatch(/must be an array/);
    // Amounts are strings: a JSON number has already been rounded through a double.
    expect(refused([{ window: '1h', max_usd: 1.0000000000000001 }])).toMatch(/limits\[0\]\.max_usd must be a decimal string/);
    // Something that starts like an address is a mistyped address, never a slug.
    for (const typo of ['0x123', '0xzz', '0x-weather', `0x${'2'.repeat(41)}`]) {
      expect(refused([{ window: '1h', max_usd: '1', recipient: typo }]), typo).toMatch(/limits\[0\]\.recipient/);
    }
  });

  test('property: a stored list reads back as the same limits', () => {
    const arb = fc.array(fc.record({
      window: fc.tuple(fc.integer({ min: 1, max: 366 }), fc.constantFrom('m', 'h', 'd')).map(([n, u]) => `${n}${u}`),
      max_usd: fc.bigInt({ min: 0n, max: 10n ** 15n }).map((m) => `${m / USD}.${(m % USD).toString().padStart(6, '0')}`),
      max_count: fc.integer({ min: 0, max: 1_000_000 }),
      recipient: fc.constantFrom(SHOP, 'weather'),
    }, { requiredKeys: ['window', 'max_usd'] }), { maxLength: 8 });
    fc.assert(fc.property(arb, (list) => {
      const parsed = parseLimits(list);
      expect(limitsFromStored(limitsToStored(parsed))).toEqual(parsed);
    }));
  });

  test('behavior: a scoped limit covers payments to its address or attributed to its slug, and nothing else', () => {
    const byAddress = limit({ window: '1h', max_usd: '1', recipient: SHOP.toUpperCase().replace('0X', '0x') });
    expect(limitCovers(byAddress, SHOP, null)).toBe(true);
    expect(limitCovers(byAddress, '0x3333333333333333333333333333333333333333', null)).toBe(false);
    const bySlug = limit({ window: '1h', max_usd: '1', recipient: 'weather' });
    expect(limitCovers(bySlug, SHOP, 'weather')).toBe(true);
    expect(limitCovers(bySlug, SHOP, null)).toBe(false);
  });
});

describe('window limits: evaluation', () => {
  test('behavior: reaching a limit exactly is allowed, one micro-dollar more is denied by it, after the cap and before the threshold', () => {
    const hourly = limit({ window: '1h', max_usd: '5' });
    expect(evaluatePolicy(facts([{ scope: 'agent', limit: hourly, use: use(4n * USD) }]))).toEqual({ outcome: 'allowed' });
    const v = evaluatePolicy(facts([{ scope: 'agent', limit: hourly, use: use(4n * USD + 1n) }], { approvalThresholdMicros: 0n }));
    expect(v).toEqual({
      outcome: 'denied', rule: 'limit', reason: "Payment of $1 would exceed the agent's 1h limit of $5: $4.000001 already spent in the last hour",
      info: { kind: 'max_usd', window: '1h', scope: 'agent', recipient: null, limit: '5', spent: '4.000001' },
    });
    // The spend cap is checked first.
    expect(evaluatePolicy(facts([{ scope: 'agent', limit: hourly, use: use(5n * USD) }], { spendCapMicros: 0n }))).toMatchObject({ rule: 'spend_cap' });
  });

  test('behavior: a count limit counts payments; a fee limit counts only payments that carry a fee, in whole gwei rounded up as the ledger keeps them', () => {
    const counted = limit({ window: '7d', max_count: 3, max_network_fee_wei: '2000000000' });
    expect(evaluatePolicy(facts([{ scope: 'organization', limit: counted, use: use(0n, 3) }]))).toMatchObject({
      rule: 'limit', reason: "Payment would exceed the organization's 7d limit of 3 payments: 3 already made in the last 7 days",
      info: { kind: 'max_count', scope: 'organization', limit: '3', spent: '3' },
    });
    const oneGweiHeld = { scope: 'agent' as const, limit: counted, use: use(0n, 0, 1_000_000_000n) };
    expect(evaluatePolicy(facts([oneGweiHeld]))).toEqual({ outcome: 'allowed' });
    // 21,000 wei is counted as a whole gwei: 2 gwei with the one held, exactly the limit.
    expect(evaluatePolicy(facts([oneGweiHeld], { networkFee: { gas: 21_000n, maxFeePerGas: 1n } }))).toEqual({ outcome: 'allowed' });
    // One wei over a gwei is counted as two: over the limit, so the window never holds more than it allows.
    expect(evaluatePolicy(facts([oneGweiHeld], { networkFee: { gas: 1n, maxFeePerGas: 1_000_000_001n } }))).toMatchObject({
      info: { kind: 'max_network_fee_wei', limit: '2000000000', spent: '1000000000' },
    });
    const tiny = limit({ window: '1h', max_network_fee_wei: '21000' });
    expect(evaluatePolicy(facts([{ scope: 'agent', limit: tiny, use: use(0n) }], { networkFee: { gas: 21_000n, maxFeePerGas: 1n } }))).toMatchObject({ rule: 'limit' });
  });

  test('property: the verdict is denied by a limit exactly when some covering limit would overflow', () => {
    const arb = fc.array(fc.record({ max: fc.bigInt({ min: 0n, max: 100n * USD }), spent: fc.bigInt({ min: 0n, max: 100n * USD }) }), { maxLength: 6 });
    fc.assert(fc.property(arb, fc.bigInt({ min: 1n, max: 50n * USD }), (ls, amount) => {
      const usages = ls.map(({ max, spent }) => ({ scope: 'agent' as const, limit: { ...limit({ window: '1h', max_usd: '1' }), maxMicros: max }, use: use(spent) }));
      const v = evaluatePolicy(facts(usages, { amountMicros: amount, approvalThresholdMicros: 1000n * USD }));
      const overflows = ls.some(({ max, spent }) => spent + amount > max);
      expect(v.outcome === 'denied' && v.rule === 'limit').toBe(overflows);
    }));
  });
});

describe('policy document', () => {
  const doc = {
    allow: [SHOP, 'weather'], approval_threshold_usd: '1', max_per_payment_usd: '25',
    limits: [{ window: '1h', max_usd: '5', max_count: 30 }, { window: '24h', max_usd: '10' }, { window: '24h', max_usd: '3', recipient: 'weather' }],
    max_network_fee_wei: '1000000000000000',
  };

  test('behavior: the agent-wide 24h amount limit is the spend cap; the others are window limits; it reads back the same', () => {
    const fields = parsePolicyDocument(doc);
    expect(fields.spendCapUsd).toBe('10');
    expect(fields.limits).toEqual([doc.limits[0], doc.limits[2]]);
    expect(policyDocument({ ...fields, maxNetworkFeeWei: fields.maxNetworkFeeWei! })).toEqual({ ...doc, limits: [doc.limits[1], doc.limits[0], doc.limits[2]] });
  });

  test('behavior: without a 24h amount limit there is no 24-hour cap of its own; keys left out take their defaults', () => {
    const fields = parsePolicyDocument({ allow: [], approval_threshold_usd: '0' });
    expect(fields).toMatchObject({ spendCapUsd: '1000000000', maxPerPaymentUsd: '', maxNetworkFeeWei: undefined, limits: [] });
  });

  test('error: an unknown key, a missing threshold or a bad limit is refused naming it', () => {
    expect(() => parsePolicyDocument({ ...doc, cap: '1' })).toThrow(/unknown key "cap"/);
    expect(() => parsePolicyDocument({ allow: [] })).toThrow(/approval_threshold_usd/);
    expect(() => parsePolicyDocument({ ...doc, limits: [{ window: '2y', max_usd: '1' }] })).toThrow(/limits\[0\]\.window/);
    expect(() => parsePolicyDocument({ ...doc, allow: 'everything' })).toThrow(/allow must be an array/);
    expect(() => parsePolicyDocument({ ...doc, limits: null })).toThrow(/limits must be an array/);
    expect(() => parsePolicyDocument({ ...doc, limits: [{ window: '24h', max_usd: -0 }] })).toThrow(/limits\[0\]\.max_usd must be a decimal string/);
  });
});
