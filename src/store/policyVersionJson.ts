import { limitsFromStored, limitsToStored } from '../domain/limits.js';
import type { Policy } from '../domain/types.js';

/**
 * A policy as policy_versions keeps it (migration 0017): amounts as decimal strings of micro-USD
 * and wei, so the JSON holds them exactly; the same text in both stores.
 */
type Stored = {
  allowlist: string[]; spend_cap_micros: string; approval_threshold_micros: string; max_network_fee_wei: string;
  max_per_payment_micros: string | null; limits: unknown[];
};

export function encodePolicyVersion(p: Policy): string {
  const stored: Stored = {
    allowlist: p.allowlist, spend_cap_micros: p.spendCapMicros.toString(), approval_threshold_micros: p.approvalThresholdMicros.toString(),
    max_network_fee_wei: p.maxNetworkFeeWei.toString(), max_per_payment_micros: p.maxPerPaymentMicros?.toString() ?? null,
    limits: JSON.parse(limitsToStored(p.limits)) as unknown[],
  };
  return JSON.stringify(stored);
}

export function decodePolicyVersion(text: string, version: number, updatedAt: number): Policy {
  const s = JSON.parse(text) as Stored;
  return {
    allowlist: s.allowlist, spendCapMicros: BigInt(s.spend_cap_micros), approvalThresholdMicros: BigInt(s.approval_threshold_micros),
    maxNetworkFeeWei: BigInt(s.max_network_fee_wei), maxPerPaymentMicros: s.max_per_payment_micros === null ? null : BigInt(s.max_per_payment_micros),
    limits: limitsFromStored(JSON.stringify(s.limits)), version, updatedAt,
  };
}
