import { formatEther, getAddress } from 'viem';
import { formatUsd } from '../domain/money.js';

/** Micro-USD for people: `$1,234.50`. Built on formatUsd, so no float takes part. */
export function usd(micros: bigint): string {
  const text = formatUsd(micros < 0n ? -micros : micros);
  const [whole, frac = ''] = text.split('.');
  const grouped = whole!.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return `${micros < 0n ? '-' : ''}$${grouped}.${frac.padEnd(2, '0')}`;
}

/** Wei for people: `1,000,000,000,000,000 wei (0.001 ETH)`; string arithmetic only, no floats. */
export function wei(amount: bigint): string {
  return `${amount.toString().replace(/\B(?=(\d{3})+(?!\d))/g, ',')} wei (${formatEther(amount)} ETH)`;
}

/** An instant as `2030-03-04 05:06 UTC`: one zone for everyone reading the same page. */
export function utc(ms: number): string {
  return `${new Date(ms).toISOString().slice(0, 16).replace('T', ' ')} UTC`;
}

/** An instant as ISO 8601 for `<time datetime>` and CSV. */
export function iso(ms: number): string {
  return new Date(ms).toISOString();
}

/** A duration in words: `45 s`, `12 min`, `3 h 5 min`, `2 d 4 h`. */
export function duration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  const min = Math.floor(s / 60);
  if (min < 60) return `${min} min`;
  const h = Math.floor(min / 60);
  if (h < 24) return min % 60 ? `${h} h ${min % 60} min` : `${h} h`;
  const d = Math.floor(h / 24);
  return h % 24 ? `${d} d ${h % 24} h` : `${d} d`;
}

/** `0x2096…287c`: enough to recognise an address in a narrow column; the full one goes in a title. */
export function shortAddress(address: string): string {
  const a = checksum(address);
  return a.length > 14 ? `${a.slice(0, 6)}…${a.slice(-4)}` : a;
}

/** An address with its EIP-55 checksum (how wallets and explorers show it); anything else as given. */
export function checksum(address: string): string {
  try {
    return getAddress(address);
  } catch {
    return address;
  }
}
