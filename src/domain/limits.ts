import { invalidArgument } from './errors.js';
import { formatUsd, parseUsd } from './money.js';
import { parseMaxNetworkFeeWei } from './networkFee.js';

/**
 * Rolling-window budgets: an agent's or an organization's limits on how much (USD), how many
 * payments and how much network fee may be committed within the last N minutes, hours or days,
 * optionally only for payments attributed to one recipient (a registry slug or a 0x address).
 * Pure: the store measures what each window already holds; domain/policy.ts compares.
 */

export type LimitScope = 'agent' | 'organization';

export type SpendLimit = {
  /** As written: `Nm`, `Nh` or `Nd`. */
  window: string;
  windowMs: number;
  maxMicros: bigint | null;
  maxCount: number | null;
  maxNetworkFeeWei: bigint | null;
  /** Lowercased 0x address or registry slug; null counts every payment. */
  recipient: string | null;
};

/** What a limit's window already holds (signing, signed, approved and pending payments). */
export type LimitUse = { micros: bigint; count: number; feeWei: bigint };

/** A limit with its scope and what its window holds: one fact of a decision. */
export type LimitUsage = { scope: LimitScope; limit: SpendLimit; use: LimitUse };

/** A document names at most this many limits per agent or organization. */
export const MAX_LIMITS = 32;
const MINUTE = 60_000;
const UNIT_MS = { m: MINUTE, h: 60 * MINUTE, d: 24 * 60 * MINUTE } as const;
/** The longest window: a leap year. */
export const MAX_WINDOW_MS = 366 * UNIT_MS.d;
const WINDOW = /^([1-9]\d{0,5})([mhd])$/;
const LIMIT_KEYS = new Set(['window', 'max_usd', 'max_count', 'max_network_fee_wei', 'recipient']);
const SLUG = /^[a-z0-9][a-z0-9-]{0,62}$/;
const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
/** Payments counted per window at most (a count is an integer the wire and both stores carry exactly). */
const MAX_COUNT = 1_000_000_000;

/** Milliseconds of a window written `Nm`, `Nh` or `Nd`, from 1m to 366d; throws naming `field` otherwise. */
export function parseWindow(text: unknown, field: string): number {
  const m = typeof text === 'string' ? WINDOW.exec(text) : null;
  const ms = m ? Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS] : 0;
  if (!m || ms > MAX_WINDOW_MS) {
    throw invalidArgument(`${field} must be a window like "30m", "1h" or "7d": a whole number of minutes (m), hours (h) or days (d) from 1m to 366d`);
  }
  return ms;
}

/**
 * Reads a JSON array of limits, refusing anything it does not understand: an unknown key, a
 * window outside 1m–366d, an amount that is negative, over-precise or too large, a limit that
 * limits nothing. `field` names the array in errors (`limits[2].max_usd`).
 */
export function parseLimits(value: unknown, field = 'limits'): SpendLimit[] {
  if (!Array.isArray(value)) throw invalidArgument(`${field} must be an array of limits`);
  if (value.length > MAX_LIMITS) throw invalidArgument(`${field} may hold at most ${MAX_LIMITS} limits, got ${value.length}`);
  return value.map((item, i) => parseLimit(item, `${field}[${i}]`));
}

function parseLimit(item: unknown, at: string): SpendLimit {
  if (item === null || typeof item !== 'object' || Array.isArray(item)) throw invalidArgument(`${at} must be an object`);
  const o = item as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (!LIMIT_KEYS.has(k)) throw invalidArgument(`${at} has an unknown key "${k}" (a limit takes window, max_usd, max_count, max_network_fee_wei, recipient)`);
  }
  const windowMs = parseWindow(o.window, `${at}.window`);
  const maxMicros = o.max_usd === undefined ? null : parseUsd(stringOf(o.max_usd, `${at}.max_usd`), `${at}.max_usd`);
  const maxCount = o.max_count === undefined ? null : parseMaxCount(o.max_count, `${at}.max_count`);
  const maxNetworkFeeWei = o.max_network_fee_wei === undefined ? null : parseMaxNetworkFeeWei(o.max_network_fee_wei, `${at}.max_network_fee_wei`);
  const recipient = o.recipient === undefined ? null : parseLimitRecipient(o.recipient, `${at}.recipient`);
  if (maxMicros === null && maxCount === null && maxNetworkFeeWei === null) {
    throw invalidArgument(`${at} limits nothing: give it max_usd, max_count or max_network_fee_wei`);
  }
  return { window: o.window as string, windowMs, maxMicros, maxCount, maxNetworkFeeWei, recipient };
}

/** A limit's number of payments: a whole number from 0 to a billion; throws naming `field` otherwise. */
export function parseMaxCount(value: unknown, field: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > MAX_COUNT) {
    throw invalidArgument(`${field} must be a whole number from 0 to ${MAX_COUNT}`);
  }
  return value;
}

/** A limit's recipient, lowercased: a 0x address or a registry slug; throws naming `field` otherwise. */
export function parseLimitRecipient(value: unknown, field: string): string {
  // As in an allowlist, a value that starts like an address is a mistyped address, never a slug.
  if (typeof value !== 'string' || !(ADDRESS.test(value) || (SLUG.test(value) && !/^0x/i.test(value)))) {
    throw invalidArgument(`${field} must be a 0x address or a registry service slug`);
  }
  return value.toLowerCase();
}

/**
 * Amounts are decimal strings, as on every admin surface: a JSON number has already passed through
 * a double (1.0000000000000001 would read as 1), so it is refused rather than rounded.
 */
function stringOf(v: unknown, field: string): string {
  if (typeof v === 'string') return v;
  throw invalidArgument(`${field} must be a decimal string, like "5" or "0.25"`);
}

/** A limit as the policy document writes it: only the keys it sets. */
export function limitToJson(l: SpendLimit): Record<string, string | number> {
  const out: Record<string, string | number> = { window: l.window };
  if (l.maxMicros !== null) out.max_usd = formatUsd(l.maxMicros);
  if (l.maxCount !== null) out.max_count = l.maxCount;
  if (l.maxNetworkFeeWei !== null) out.max_network_fee_wei = l.maxNetworkFeeWei.toString();
  if (l.recipient !== null) out.recipient = l.recipient;
  return out;
}

/**
 * Whether a payment to `recipient` (attributed to `slug`, or null, and also paying `others`, the
 * split recipients of an MPP payment) counts against `limit`. A payment that pays a limit's
 * recipient anything counts whole against it: fail-closed, never a share the payer chose.
 */
export function limitCovers(limit: SpendLimit, recipient: string, slug: string | null, others: readonly string[] = []): boolean {
  return limit.recipient === null || limit.recipient === recipient || (slug !== null && limit.recipient === slug) || others.includes(limit.recipient);
}

/** "the last hour", "the last 30 days": how a denial names a window. */
export function describeWindow(l: Pick<SpendLimit, 'window'>): string {
  const m = WINDOW.exec(l.window)!;
  const n = Number(m[1]);
  const unit = { m: 'minute', h: 'hour', d: 'day' }[m[2] as 'm' | 'h' | 'd'];
  return n === 1 ? `the last ${unit}` : `the last ${n} ${unit}s`;
}

/** The limits serialized for storage: the document's JSON, re-read by parseLimits on load. */
export function limitsToStored(limits: readonly SpendLimit[]): string {
  return JSON.stringify(limits.map(limitToJson));
}

export function limitsFromStored(text: string): SpendLimit[] {
  return parseLimits(JSON.parse(text));
}
