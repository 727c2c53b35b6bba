import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { DomainError } from '../../src/domain/errors.js';
import { DEFAULT_MAX_NETWORK_FEE_WEI, MAX_NETWORK_FEE_CEILING_WEI, maxNetworkFeeWei, parseMaxNetworkFeeWei } from '../../src/domain/networkFee.js';

/** The one parser every surface (SetPolicy, CLI through it, the dashboard form) uses for the fee ceiling. */
describe('parseMaxNetworkFeeWei', () => {
  test('behavior: whole numbers from 0 to 10^21 are accepted; blanks around them are refused', () => {
    expect(parseMaxNetworkFeeWei('0')).toBe(0n);
    expect(parseMaxNetworkFeeWei('1000000000000000000000')).toBe(10n ** 21n);
    expect(parseMaxNetworkFeeWei('007')).toBe(7n);
    for (const padded of [' 7', '7 ', '\t7', '7\n']) expect(() => parseMaxNetworkFeeWei(padded)).toThrow(expect.objectContaining({ kind: 'invalid_argument' }));
    expect([DEFAULT_MAX_NETWORK_FEE_WEI, MAX_NETWORK_FEE_CEILING_WEI]).toEqual([10n ** 15n, 10n ** 21n]);
  });

  test('error: invalid_argument for a million digits, without parsing them', () => {
    expect(() => parseMaxNetworkFeeWei('9'.repeat(1e6))).toThrow(expect.objectContaining({ kind: 'invalid_argument' }));
  });

  test('behavior: any integer in range round-trips', () => {
    fc.assert(fc.property(fc.bigInt({ min: 0n, max: 10n ** 21n }), (n) => {
      expect(parseMaxNetworkFeeWei(n.toString())).toBe(n);
    }));
  });

  test.each(['', ' ', '-1', '+1', '1e3', '0x1', '1.0', '1_000', '1 0', 'NaN', '\u0661', '1000000000000000000001', '9'.repeat(26)])(
    'error: invalid_argument: %s',
    (text) => {
      expect(() => parseMaxNetworkFeeWei(text)).toThrow(
        new DomainError('invalid_argument', 'max_network_fee_wei must be a whole number of wei from 0 to 1000000000000000000000'),
      );
    },
  );

  test.each([['undefined', undefined], ['null', null], ['a number', 5], ['a bigint', 5n], ['an object', {}], ['an array', ['1']]])('error: invalid_argument for %s', (_name, value) => {
    expect(() => parseMaxNetworkFeeWei(value)).toThrow(expect.objectContaining({ kind: 'invalid_argument' }));
  });
});

describe('maxNetworkFeeWei', () => {
  test('behavior: all the gas at the highest price, exactly (no float)', () => {
    expect(maxNetworkFeeWei({ gas: 1_000_000n, maxFeePerGas: 10n ** 12n })).toBe(10n ** 18n);
    expect(maxNetworkFeeWei({ gas: 333_333n, maxFeePerGas: 3_000_000_001n })).toBe(999_999_000_333_333n);
  });
});
