import { PaypolicyError } from './errors.js';

/**
 * USD text or number → integer micro-dollars, exactly. Numbers go through `toFixed(6)`, which
 * is exact for the values paypolicy sends (made from whole micro-dollars); text must be a plain
 * decimal with at most 6 decimals. Comparisons of money in this package use these integers.
 */
export function usdToMicros(value: number | string, field: string): bigint {
  // Text is not trimmed: " 1" is refused, as the server refuses it.
  const text = typeof value === 'number' ? (Number.isFinite(value) && value >= 0 ? value.toFixed(6) : '') : value;
  const m = /^(\d+)(?:\.(\d{1,6}))?$/.exec(text);
  if (!m) throw new PaypolicyError(`${field} must be a non-negative USD amount with at most 6 decimals`, { code: 'invalid_argument', status: 0 });
  return BigInt(m[1]!) * 1_000_000n + BigInt((m[2] ?? '').padEnd(6, '0'));
}

/** Integer micro-dollars → shortest decimal text ("0.01", "2"). */
export function formatMicros(micros: bigint): string {
  const whole = micros / 1_000_000n;
  const frac = (micros % 1_000_000n).toString().padStart(6, '0').replace(/0+$/, '');
  return frac === '' ? whole.toString() : `${whole}.${frac}`;
}
