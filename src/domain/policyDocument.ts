import { invalidArgument } from './errors.js';
import { limitToJson, parseLimits, type SpendLimit } from './limits.js';
import { formatUsd, MAX_USD_MICROS, parseUsd } from './money.js';

/**
 * The policy document: one JSON object per agent, as `policy set --file` reads it and `policy get
 * --json` prints it. The agent-wide 24-hour spend cap is written as the limit
 * `{"window": "24h", "max_usd": …}` (no recipient, nothing else), so the cap that `--cap` and
 * `spend_cap_usd` set and read is one of the document's limits; a document without that limit
 * has no 24-hour cap of its own (the largest amount the ledger records). The document replaces
 * the whole policy: a key left out takes its default, never the agent's current value.
 */

export type PolicyDocumentFields = {
  allowlist: string[];
  spendCapUsd: string;
  approvalThresholdUsd: string;
  maxNetworkFeeWei?: string;
  /** '' for none. */
  maxPerPaymentUsd: string;
  /** The limits besides the spend cap, as the document writes them. */
  limits: Array<Record<string, unknown>>;
};

const KEYS = ['allow', 'approval_threshold_usd', 'max_per_payment_usd', 'limits', 'max_network_fee_wei'];

/** True for the limit that is the agent's 24-hour spend cap. */
function isSpendCap(l: Record<string, unknown>): boolean {
  return l.window === '24h' && l.max_usd !== undefined && Object.keys(l).length === 2;
}

/** Reads a policy document, refusing unknown keys and values of the wrong type; amounts and limits are checked again by the server. */
export function parsePolicyDocument(doc: unknown): PolicyDocumentFields {
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) throw invalidArgument('a policy document must be a JSON object');
  const o = doc as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (!KEYS.includes(k)) throw invalidArgument(`unknown key "${k}" in the policy document (it takes ${KEYS.join(', ')})`);
  }
  if (!Array.isArray(o.allow) || o.allow.some((e) => typeof e !== 'string')) throw invalidArgument('allow must be an array of 0x addresses and service slugs');
  const text = (key: string, fallback?: string): string => {
    const v = o[key];
    if (v === undefined && fallback !== undefined) return fallback;
    if (typeof v !== 'string') throw invalidArgument(`${key} must be a decimal string`);
    return v;
  };
  // Validated here so that an error names the document's own place (limits[2].window).
  if (o.limits === null) throw invalidArgument('limits must be an array of limits; leave the key out, or write [], for none');
  const limits = parseLimits(o.limits ?? [], 'limits');
  const raw = (o.limits ?? []) as Array<Record<string, unknown>>;
  const capAt = raw.findIndex(isSpendCap);
  if (capAt >= 0) parseUsd(String(raw[capAt]!.max_usd), `limits[${capAt}].max_usd`);
  return {
    allowlist: o.allow as string[],
    spendCapUsd: capAt >= 0 ? String(raw[capAt]!.max_usd) : formatUsd(MAX_USD_MICROS),
    approvalThresholdUsd: text('approval_threshold_usd'),
    maxPerPaymentUsd: o.max_per_payment_usd === undefined || o.max_per_payment_usd === null ? '' : text('max_per_payment_usd'),
    maxNetworkFeeWei: o.max_network_fee_wei === undefined ? undefined : text('max_network_fee_wei'),
    limits: limits.filter((_, i) => i !== capAt).map(limitToJson),
  };
}

/** A policy as its document: the spend cap first among the limits, unless it is the ledger's maximum. */
export function policyDocument(p: {
  allowlist: readonly string[]; spendCapUsd: string; approvalThresholdUsd: string; maxPerPaymentUsd: string; maxNetworkFeeWei: string;
  limits: ReadonlyArray<Record<string, unknown>>;
}): Record<string, unknown> {
  const cap = p.spendCapUsd === formatUsd(MAX_USD_MICROS) ? [] : [{ window: '24h', max_usd: p.spendCapUsd }];
  return {
    allow: [...p.allowlist],
    approval_threshold_usd: p.approvalThresholdUsd,
    max_per_payment_usd: p.maxPerPaymentUsd === '' ? null : p.maxPerPaymentUsd,
    limits: [...cap, ...p.limits],
    max_network_fee_wei: p.maxNetworkFeeWei,
  };
}

export type { SpendLimit };
