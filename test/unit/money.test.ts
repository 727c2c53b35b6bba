import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { DomainError } from '../../src/domain/errors.js';
import {
  atomicToMicros,
  formatUsd,
  jsonNumberToDecimal,
  MAX_USD_MICROS,
  MICROS_PER_USD,
  microsToAtomic,
  parseUsd,
  usdToJsonNumber,
} from '../../src/domain/money.js';

/** Runs `fn`, which must throw a DomainError, and returns it. */
function domainError(fn: () => unknown): DomainError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(DomainError);
    return err as DomainError;
  }
  throw new Error('expected a DomainError');
}

describe('parseUsd', () => {
  test('behavior: parses whole and fractional amounts into micro-dollars', () => {
    expect(parseUsd('0', 'amount')).toBe(0n);
    expect(parseUsd('0.000001', 'amount')).toBe(1n);
    expect(parseUsd('1', 'amount')).toBe(1_000_000n);
    expect(parseUsd('1.5', 'amount')).toBe(1_500_000n);
    expect(parseUsd('0.10', 'amount')).toBe(100_000n);
    expect(parseUsd('12.345678', 'amount')).toBe(12_345_678n);
    expect(parseUsd('007', 'amount')).toBe(7_000_000n);
  });

  test('behavior: accepts exactly the maximum of one billion USD', () => {
    expect(parseUsd('1000000000', 'amount')).toBe(MAX_USD_MICROS);
    expect(parseUsd('1000000000.000000', 'amount')).toBe(MAX_USD_MICROS);
    expect(parseUsd('999999999.999999', 'amount')).toBe(MAX_USD_MICROS - 1n);
  });

  test('error: invalid_argument: more than 6 decimals, exponents, signs and other non-decimal text', () => {
    for (const text of ['1.1234567', '0.0000001', '1e-7', '1e3', '1E3', '-1', '-0', '+1', '', ' 1', '1 ', '1.', '.5', '1,5', '0x10', 'NaN', 'Infinity', '１', '1_000']) {
      const err = domainError(() => parseUsd(text, 'spend_cap_usd'));
      expect(err.kind, text).toBe('invalid_argument');
      expect(err.code).toBe('invalid_amount');
      expect(err.shortMessage).toBe('spend_cap_usd must be a non-negative decimal number with at most 6 decimal places');
    }
  });

  test('error: invalid_argument: above the maximum, naming the field', () => {
    for (const text of ['1000000000.000001', '999999999999', '999999999999.999999']) {
      const err = domainError(() => parseUsd(text, 'amount_usd'));
      expect(err.code).toBe('invalid_amount');
      expect(err.shortMessage).toBe('amount_usd must be at most 1000000000');
    }
    // Thirteen integer digits fail the grammar before any BigInt is built.
    expect(domainError(() => parseUsd('1000000000000', 'x')).shortMessage).toMatch(/^x must be a non-negative decimal/);
  });
});

describe('formatUsd', () => {
  test('behavior: formats without trailing zeros', () => {
    expect(formatUsd(0n)).toBe('0');
    expect(formatUsd(1n)).toBe('0.000001');
    expect(formatUsd(100_000n)).toBe('0.1');
    expect(formatUsd(1_500_000n)).toBe('1.5');
    expect(formatUsd(10n * MICROS_PER_USD)).toBe('10');
    expect(formatUsd(MAX_USD_MICROS)).toBe('1000000000');
    expect(formatUsd(-1_500_000n)).toBe('-1.5');
    expect(formatUsd(-1n)).toBe('-0.000001');
  });

  test('behavior: parseUsd(formatUsd(x)) === x for every amount in range', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: MAX_USD_MICROS }), (micros) => parseUsd(formatUsd(micros), 'amount') === micros),
    );
  });
});

describe('usdToJsonNumber', () => {
  test('behavior: gives the nearest double of the decimal text', () => {
    expect(usdToJsonNumber(100_000n)).toBe(0.1);
    expect(usdToJsonNumber(1_500_000n)).toBe(1.5);
    expect(usdToJsonNumber(0n)).toBe(0);
  });
});

describe('jsonNumberToDecimal', () => {
  test('behavior: gives the shortest decimal text of a JSON number', () => {
    expect(jsonNumberToDecimal(0.1)).toBe('0.1');
    expect(jsonNumberToDecimal(10)).toBe('10');
    expect(jsonNumberToDecimal(0)).toBe('0');
    expect(jsonNumberToDecimal(0.000001)).toBe('0.000001');
    expect(parseUsd(jsonNumberToDecimal(0.1), 'amount')).toBe(100_000n);
    // 0.1 + 0.2 is not 0.3 as a double; its text has too many decimals and is refused.
    expect(() => parseUsd(jsonNumberToDecimal(0.1 + 0.2), 'amount')).toThrow(DomainError);
  });

  test('behavior: exponent forms come out as exponents, which parseUsd rejects', () => {
    expect(jsonNumberToDecimal(1e21)).toBe('1e+21');
    expect(jsonNumberToDecimal(1e-7)).toBe('1e-7');
    expect(() => parseUsd(jsonNumberToDecimal(1e21), 'amount')).toThrow(DomainError);
    expect(() => parseUsd(jsonNumberToDecimal(1e-7), 'amount')).toThrow(DomainError);
    expect(() => parseUsd(jsonNumberToDecimal(-1), 'amount')).toThrow(DomainError);
  });
});

describe('atomicToMicros', () => {
  test('behavior: 6 decimals is the identity', () => {
    expect(atomicToMicros(1_500_000n, 6)).toEqual({ micros: 1_500_000n, exact: true });
    expect(atomicToMicros(0n, 6)).toEqual({ micros: 0n, exact: true });
  });

  test('behavior: 18 decimals divides by 10^12 and reports truncation', () => {
    expect(atomicToMicros(10n ** 18n, 18)).toEqual({ micros: 1_000_000n, exact: true });
    expect(atomicToMicros(10n ** 12n, 18)).toEqual({ micros: 1n, exact: true });
    expect(atomicToMicros(10n ** 18n + 1n, 18)).toEqual({ micros: 1_000_000n, exact: false });
    expect(atomicToMicros(10n ** 12n - 1n, 18)).toEqual({ micros: 0n, exact: false });
  });

  test('behavior: fewer than 6 decimals multiplies exactly', () => {
    expect(atomicToMicros(150n, 2)).toEqual({ micros: 1_500_000n, exact: true });
    expect(atomicToMicros(7n, 0)).toEqual({ micros: 7_000_000n, exact: true });
  });
});

describe('microsToAtomic', () => {
  test('behavior: 6 and 18 decimals', () => {
    expect(microsToAtomic(1_500_000n, 6)).toBe(1_500_000n);
    expect(microsToAtomic(1n, 18)).toBe(10n ** 12n);
    expect(microsToAtomic(1_000_000n, 18)).toBe(10n ** 18n);
  });

  test('behavior: round-trips through atomicToMicros for 6 and 18 decimals', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: MAX_USD_MICROS }), fc.constantFrom(6, 18), (micros, decimals) => {
        const back = atomicToMicros(microsToAtomic(micros, decimals), decimals);
        return back.exact && back.micros === micros;
      }),
    );
  });

  test('behavior: fewer than 6 decimals divides when exact', () => {
    expect(microsToAtomic(1_500_000n, 2)).toBe(150n);
    expect(microsToAtomic(0n, 2)).toBe(0n);
  });

  test('error: invalid_argument: more precision than the token has', () => {
    const err = domainError(() => microsToAtomic(1n, 2));
    expect(err.kind).toBe('invalid_argument');
    expect(err.code).toBe('invalid_amount');
    expect(err.shortMessage).toMatch(/more precision than the token's 2 decimals/);
  });
});
