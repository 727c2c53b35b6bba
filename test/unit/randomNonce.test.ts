import { describe, expect, test } from 'vitest';
import { randomHex32 } from '../../src/signing/randomNonce.js';

describe('randomHex32 (EIP-3009 and Permit2 nonces from a CSPRNG-filled pool)', () => {
  test('every value is 32 bytes of lowercase hex, and none repeats across many pool refills', () => {
    // 4 KiB per refill, 32 bytes a value: 20,000 values span 156 refills.
    const seen = new Set<string>();
    for (let i = 0; i < 20_000; i++) {
      const v = randomHex32();
      expect(v).toMatch(/^0x[0-9a-f]{64}$/);
      seen.add(v);
    }
    expect(seen.size).toBe(20_000);
  });

  test('the bytes look uniform: each hex digit appears about 1/16 of the time', () => {
    const counts = new Map<string, number>();
    let total = 0;
    for (let i = 0; i < 4_000; i++) {
      for (const c of randomHex32().slice(2)) {
        counts.set(c, (counts.get(c) ?? 0) + 1);
        total++;
      }
    }
    expect(counts.size).toBe(16);
    // 256,000 digits: the expected count is 16,000 with a standard deviation of ~122.
    for (const n of counts.values()) expect(Math.abs(n - total / 16)).toBeLessThan(1_000);
  });
});
