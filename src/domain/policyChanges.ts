import { limitToJson, type SpendLimit } from './limits.js';
import type { Policy } from './types.js';

/**
 * What one version of a policy changed from the one before: each field that differs, in the
 * order the policy form shows them. Lists (the allowlist, the window limits) say what was added
 * and what was removed; a limit that was edited is the old one removed and the new one added.
 */
export type PolicyChange =
  | { field: 'allowlist'; added: string[]; removed: string[] }
  | { field: 'spendCap' | 'approvalThreshold'; from: bigint; to: bigint }
  /** Micro-USD; null is no maximum. */
  | { field: 'maxPerPayment'; from: bigint | null; to: bigint | null }
  | { field: 'maxNetworkFee'; from: bigint; to: bigint }
  | { field: 'limits'; added: SpendLimit[]; removed: SpendLimit[] };

/** The items of `a` not in `b`, counting repeats (two equal limits removed from three leave one). */
function minus<T>(a: readonly T[], b: readonly T[], key: (x: T) => string): T[] {
  const left = new Map<string, number>();
  for (const x of b) left.set(key(x), (left.get(key(x)) ?? 0) + 1);
  return a.filter((x) => {
    const n = left.get(key(x)) ?? 0;
    if (n > 0) left.set(key(x), n - 1);
    return n === 0;
  });
}

const limitKey = (l: SpendLimit) => JSON.stringify(limitToJson(l));
const itself = (x: string) => x;

/** The changes from `previous` to `next`; empty when a save changed nothing. */
export function policyChanges(previous: Policy, next: Policy): PolicyChange[] {
  const changes: PolicyChange[] = [];
  const allowAdded = minus(next.allowlist, previous.allowlist, itself);
  const allowRemoved = minus(previous.allowlist, next.allowlist, itself);
  if (allowAdded.length > 0 || allowRemoved.length > 0) changes.push({ field: 'allowlist', added: allowAdded, removed: allowRemoved });
  if (previous.spendCapMicros !== next.spendCapMicros) changes.push({ field: 'spendCap', from: previous.spendCapMicros, to: next.spendCapMicros });
  if (previous.approvalThresholdMicros !== next.approvalThresholdMicros) {
    changes.push({ field: 'approvalThreshold', from: previous.approvalThresholdMicros, to: next.approvalThresholdMicros });
  }
  if (previous.maxPerPaymentMicros !== next.maxPerPaymentMicros) {
    changes.push({ field: 'maxPerPayment', from: previous.maxPerPaymentMicros, to: next.maxPerPaymentMicros });
  }
  if (previous.maxNetworkFeeWei !== next.maxNetworkFeeWei) changes.push({ field: 'maxNetworkFee', from: previous.maxNetworkFeeWei, to: next.maxNetworkFeeWei });
  const limitsAdded = minus(next.limits, previous.limits, limitKey);
  const limitsRemoved = minus(previous.limits, next.limits, limitKey);
  if (limitsAdded.length > 0 || limitsRemoved.length > 0) changes.push({ field: 'limits', added: limitsAdded, removed: limitsRemoved });
  return changes;
}
