import { describe, expect, test } from 'vitest';
import { parseLimits } from '../../src/domain/limits.js';
import { policyChanges } from '../../src/domain/policyChanges.js';
import type { Policy } from '../../src/domain/types.js';

const USD = 1_000_000n;
const SHOP = '0x2222222222222222222222222222222222222222';

function policy(over: Partial<Policy> = {}): Policy {
  return {
    allowlist: [SHOP, 'weather'], spendCapMicros: 10n * USD, approvalThresholdMicros: 2n * USD, maxNetworkFeeWei: 10n ** 15n,
    maxPerPaymentMicros: null, limits: [], updatedAt: 0, ...over,
  };
}

describe('what a policy version changed', () => {
  test('behavior: a save that changes nothing has no changes; the time and version do not count', () => {
    expect(policyChanges(policy(), policy({ updatedAt: 5, version: 7 }))).toEqual([]);
  });

  test('behavior: each changed field from and to, in the order the form shows them; the allowlist as entries added and removed', () => {
    const next = policy({
      allowlist: ['weather', 'maps'], spendCapMicros: 12n * USD, approvalThresholdMicros: 3n * USD, maxPerPaymentMicros: 5n * USD, maxNetworkFeeWei: 2n * 10n ** 15n,
    });
    expect(policyChanges(policy(), next)).toEqual([
      { field: 'allowlist', added: ['maps'], removed: [SHOP] },
      { field: 'spendCap', from: 10n * USD, to: 12n * USD },
      { field: 'approvalThreshold', from: 2n * USD, to: 3n * USD },
      { field: 'maxPerPayment', from: null, to: 5n * USD },
      { field: 'maxNetworkFee', from: 10n ** 15n, to: 2n * 10n ** 15n },
    ]);
    expect(policyChanges(next, policy({ ...next, maxPerPaymentMicros: null }))).toEqual([{ field: 'maxPerPayment', from: 5n * USD, to: null }]);
  });

  test('behavior: limits added and removed, counting repeats; an edited limit is the old one removed and the new one added; order alone is no change', () => {
    const [hour, day, hourAgain, edited] = parseLimits([
      { window: '1h', max_usd: '5' }, { window: '1d', max_count: 3, recipient: 'weather' }, { window: '1h', max_usd: '5' }, { window: '1h', max_usd: '6' },
    ]);
    const before = policy({ limits: [hour!, day!, hourAgain!] });
    expect(policyChanges(before, policy({ limits: [day!, hour!, hourAgain!] }))).toEqual([]);
    expect(policyChanges(before, policy({ limits: [hour!, day!] }))).toEqual([{ field: 'limits', added: [], removed: [hourAgain] }]);
    expect(policyChanges(before, policy({ limits: [edited!, day!, hourAgain!] }))).toEqual([{ field: 'limits', added: [edited], removed: [hour] }]);
  });
});
