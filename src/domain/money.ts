import { invalidArgument } from './errors.js';

/**
 * USD amounts are integer micro-dollars (1 USD = 1_000_000) everywhere in code and storage.
 * Conversions from and to decimal text live only here, so no float ever takes part in arithmetic.
 */
export const MICROS_PER_USD = 1_000_000n;

/** Largest amount accepted anywhere: one billion USD keeps every sum far inside int64. */
export const MAX_USD_MICROS = 1_000_000_000n * MICROS_PER_USD;

const DECIMAL = /^(\d{1,12})(?:\.(\d{1,6}))?$/;

/**
 * Parses a non-negative decimal USD string with at most 6 decimal places into micro-USD.
 * `field` names the request field in the error message.
 */
export function parseUsd(text: string, field: string): bigint {
  const m = DECIMAL.exec(text);
  if (!m) {
    throw invalidArgument(
      `${field} must be a non-negative decimal number with at most 6 decimal places`,
      'invalid_amount',
    );
  }
  const whole = BigInt(m[1]!);
  const frac = BigInt((m[2] ?? '').padEnd(6, '0'));
  const micros = whole * MICROS_PER_USD + frac;
  if (micros > MAX_USD_MICROS) throw invalidArgument(`${field} must be at most 1000000000`, 'invalid_amount');
  return micros;
}

/**
 * Converts a JSON number to its shortest decimal text (what the client wrote, for any value a
 * client can write with 6 decimals) so that parseUsd can check it without float arithmetic.
 */
export function jsonNumberToDecimal(value: number): string {
  // String() of a finite double is its shortest round-trip representation; exponent forms
  // (1e-7, 1e+21) fail the decimal grammar in parseUsd and are rejected there.
  return String(value);
}

/** Formats micro-USD as a decimal string without trailing zeros, e.g. 1500000n → "1.5". */
export function formatUsd(micros: bigint): string {
  const sign = micros < 0n ? '-' : '';
  const abs = micros < 0n ? -micros : micros;
  const whole = abs / MICROS_PER_USD;
  const frac = (abs % MICROS_PER_USD).toString().padStart(6, '0').replace(/0+$/, '');
  return frac ? `${sign}${whole}.${frac}` : `${sign}${whole}`;
}

/**
 * Converts micro-USD to a JSON number for wire fields the protocol types as numbers. The value
 * is only displayed, never computed with: formatUsd's text parsed once gives the nearest double.
 */
export function usdToJsonNumber(micros: bigint): number {
  return Number(formatUsd(micros));
}

/** Converts a token amount in atomic units to micro-USD for a USD stablecoin with `decimals`. */
export function atomicToMicros(atomic: bigint, decimals: number): { micros: bigint; exact: boolean } {
  if (decimals >= 6) {
    const div = 10n ** BigInt(decimals - 6);
    return { micros: atomic / div, exact: atomic % div === 0n };
  }
  return { micros: atomic * 10n ** BigInt(6 - decimals), exact: true };
}

/** Converts micro-USD to atomic units of a USD stablecoin with `decimals`. */
export function microsToAtomic(micros: bigint, decimals: number): bigint {
  if (decimals >= 6) return micros * 10n ** BigInt(decimals - 6);
  const div = 10n ** BigInt(6 - decimals);
  if (micros % div !== 0n) throw invalidArgument(`amount has more precision than the token's ${decimals} decimals`, 'invalid_amount');
  return micros / div;
}
