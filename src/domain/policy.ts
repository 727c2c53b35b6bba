import { describeWindow, type LimitUsage } from './limits.js';
import { formatUsd, MAX_USD_MICROS } from './money.js';
import { countedFeeWei, maxNetworkFeeWei, type NetworkFee } from './networkFee.js';
import type { AgentStatus } from './validate.js';

/**
 * The policy engine: a pure function from facts to a verdict. The store supplies the facts inside
 * the same write transaction that records the verdict, which is what makes the check atomic.
 */

export type PolicyFacts = {
  agentStatus: AgentStatus;
  /** Lowercased 0x addresses and registry slugs. */
  allowlist: readonly string[];
  spendCapMicros: bigint;
  approvalThresholdMicros: bigint;
  /** Lowercased recipient address. */
  recipient: string;
  /**
   * Other lowercased addresses the payment also pays (MPP splits). Allowed through a
   * registry-attributed slug they are the service's own business; allowed by address, each of
   * them must be on the allowlist too.
   */
  otherRecipients?: readonly string[];
  /** Registry slug the payment is attributed to at runtime, when attribution holds. */
  attributedSlug: string | null;
  /** Why an allowlisted service slug could not vouch for this payment, for the denial reason. */
  attributionNote?: string | null;
  /** Payment amount in micro-USD; always positive. */
  amountMicros: bigint;
  /** What already counts against the cap in the rolling 24 hours (signing, signed, approved, pending approval). */
  committedMicros: bigint;
  /** The agent's per-payment ceiling on network fees the treasury pays, in wei. */
  maxNetworkFeeWei: bigint;
  /** The agent's hard ceiling on one payment's amount in micro-USD; null or absent means none. */
  maxPerPaymentMicros?: bigint | null;
  /** Gas and fee cap of a payment whose gas the treasury pays (raw transactions); absent otherwise. */
  networkFee?: NetworkFee | null;
  /**
   * The requester's own ceiling on the amount in micro-USD (a paywall request's
   * payload.max_amount_usd, checked against the live price); null or absent means none.
   */
  maxAmountMicros?: bigint | null;
  /**
   * The agent's and its organization's window limits that cover this payment (domain/limits.ts),
   * each with what its window already holds; absent or empty when there are none.
   */
  limits?: readonly LimitUsage[];
};

/** `treasury_funds` and `treasury_gas` are not decided here: app/organizations/treasury.ts denies a raw transaction the treasury cannot pay. */
export type DenyRule = 'amount_limit' | 'agent_status' | 'max_amount' | 'max_per_payment' | 'allowlist' | 'network_fee' | 'spend_cap' | 'limit' | 'treasury_funds' | 'treasury_gas';

/**
 * The rule that decided, for machines: `kind` is the deny rule (or `approval_threshold`), and for
 * a window limit the measure that would overflow (`max_usd`, `max_count`, `max_network_fee_wei`);
 * `window`, `scope` and `recipient` say which limit; `limit` and `spent` are in the measure's unit
 * (USD decimal text, a count, wei), `spent` what the window held before this payment.
 */
export type RuleInfo = {
  kind: string;
  window: string | null;
  scope: 'agent' | 'organization' | null;
  recipient: string | null;
  limit: string | null;
  spent: string | null;
};

export type Verdict =
  | { outcome: 'allowed' }
  | { outcome: 'pending_approval'; reason: string; thresholdMicros: bigint; rule: RuleInfo }
  | { outcome: 'denied'; rule: DenyRule; reason: string; info: RuleInfo };

export type EvaluateOptions = {
  /** A human approval overrides the threshold, and only the threshold. */
  skipThreshold?: boolean;
};

const usd = (micros: bigint) => `$${formatUsd(micros)}`;

/** A denial by `rule`, with its machine-readable description. */
export function deny(rule: DenyRule, reason: string, info: Partial<RuleInfo> = {}): Verdict {
  return { outcome: 'denied', rule, reason, info: { kind: rule, window: null, scope: null, recipient: null, limit: null, spent: null, ...info } };
}

/**
 * Checks, in order: the amount against what the ledger records (a paywall names any price, up to
 * 2^256 − 1 atomic units), agent status, the requester's own price ceiling, the agent's per-payment
 * maximum (a denial, never an approval: no person can approve what the policy forbids outright),
 * recipient allowlist, network-fee ceiling, rolling 24-hour spend cap, approval threshold. The fee ceiling is inclusive (a fee equal to it is allowed). Amounts strictly above the threshold need approval; equal is allowed. An empty
 * allowlist allows nothing.
 */
export function evaluatePolicy(f: PolicyFacts, options: EvaluateOptions = {}): Verdict {
  if (f.amountMicros > MAX_USD_MICROS) {
    return deny('amount_limit', `Price of ${usd(f.amountMicros)} is larger than the ledger can record (at most ${usd(MAX_USD_MICROS)} per payment)`, { limit: formatUsd(MAX_USD_MICROS) });
  }
  if (f.agentStatus !== 'active') {
    return deny('agent_status', `Agent is ${f.agentStatus}; it cannot make payments`);
  }
  if (f.maxAmountMicros != null && f.amountMicros > f.maxAmountMicros) {
    return deny('max_amount', `Price of ${usd(f.amountMicros)} exceeds the request's max_amount_usd of ${usd(f.maxAmountMicros)}`, { limit: formatUsd(f.maxAmountMicros) });
  }
  if (f.maxPerPaymentMicros != null && f.amountMicros > f.maxPerPaymentMicros) {
    return deny('max_per_payment', `Amount ${usd(f.amountMicros)} exceeds the agent's maximum of ${usd(f.maxPerPaymentMicros)} per payment`, { scope: 'agent', limit: formatUsd(f.maxPerPaymentMicros) });
  }
  const byAddress = f.allowlist.includes(f.recipient);
  const bySlug = f.attributedSlug !== null && f.allowlist.includes(f.attributedSlug);
  if (byAddress && !bySlug) {
    const unlisted = (f.otherRecipients ?? []).find((r) => !f.allowlist.includes(r));
    if (unlisted !== undefined) {
      return deny('allowlist', `The payment also pays ${unlisted} (a split), which is not on the agent's allowlist`, { scope: 'agent', recipient: unlisted });
    }
  }
  if (!byAddress && !bySlug) {
    const reason = f.allowlist.length === 0
      ? `Recipient ${f.recipient} is not on the agent's allowlist (the allowlist is empty)`
      : f.attributionNote
        ? `Recipient ${f.recipient} is not on the agent's allowlist: ${f.attributionNote}`
        : `Recipient ${f.recipient} is not on the agent's allowlist`;
    return deny('allowlist', reason, { scope: 'agent', recipient: f.recipient });
  }
  if (f.networkFee) {
    const fee = maxNetworkFeeWei(f.networkFee);
    if (fee > f.maxNetworkFeeWei) {
      return deny('network_fee', `Maximum network fee of ${fee} wei (gas ${f.networkFee.gas} × max fee ${f.networkFee.maxFeePerGas} wei) exceeds the agent's ceiling of ${f.maxNetworkFeeWei} wei`, { scope: 'agent', limit: f.maxNetworkFeeWei.toString() });
    }
  }
  if (f.committedMicros + f.amountMicros > f.spendCapMicros) {
    const left = f.spendCapMicros > f.committedMicros ? f.spendCapMicros - f.committedMicros : 0n;
    return deny('spend_cap', `Spend cap of ${usd(f.spendCapMicros)} per 24 hours would be exceeded: ${usd(f.committedMicros)} already committed, this payment is ${usd(f.amountMicros)} (${usd(left)} left)`,
      { window: '24h', scope: 'agent', limit: formatUsd(f.spendCapMicros), spent: formatUsd(f.committedMicros) });
  }
  const overLimit = f.limits && f.limits.length > 0 ? windowLimitVerdict(f) : null;
  if (overLimit) return overLimit;
  if (!options.skipThreshold && f.amountMicros > f.approvalThresholdMicros) {
    return {
      outcome: 'pending_approval',
      thresholdMicros: f.approvalThresholdMicros,
      reason: `Amount ${usd(f.amountMicros)} exceeds the approval threshold of ${formatUsd(f.approvalThresholdMicros)} USD; a human must approve it`,
      rule: { kind: 'approval_threshold', window: null, scope: 'agent', recipient: null, limit: formatUsd(f.approvalThresholdMicros), spent: null },
    };
  }
  return { outcome: 'allowed' };
}

/**
 * The first window limit this payment would overflow, agent's before organization's in the order
 * they were written; a limit checks its amount, then its count, then its network fees.
 */
function windowLimitVerdict(f: PolicyFacts): Verdict | null {
  const fee = countedFeeWei(f.networkFee ?? null);
  for (const { scope, limit, use } of f.limits!) {
    const whose = scope === 'agent' ? "the agent's" : "the organization's";
    const name = `${whose} ${limit.window} limit${limit.recipient ? ` for ${limit.recipient}` : ''}`;
    const where = { window: limit.window, scope, recipient: limit.recipient };
    if (limit.maxMicros !== null && use.micros + f.amountMicros > limit.maxMicros) {
      return deny('limit', `Payment of ${usd(f.amountMicros)} would exceed ${name} of ${usd(limit.maxMicros)}: ${usd(use.micros)} already spent in ${describeWindow(limit)}`,
        { ...where, kind: 'max_usd', limit: formatUsd(limit.maxMicros), spent: formatUsd(use.micros) });
    }
    if (limit.maxCount !== null && use.count + 1 > limit.maxCount) {
      return deny('limit', `Payment would exceed ${name} of ${limit.maxCount} payment${limit.maxCount === 1 ? '' : 's'}: ${use.count} already made in ${describeWindow(limit)}`,
        { ...where, kind: 'max_count', limit: String(limit.maxCount), spent: String(use.count) });
    }
    if (limit.maxNetworkFeeWei !== null && fee > 0n && use.feeWei + fee > limit.maxNetworkFeeWei) {
      return deny('limit', `Network fee of up to ${fee} wei (counted in whole gwei) would exceed ${name} of ${limit.maxNetworkFeeWei} wei: ${use.feeWei} wei already committed in ${describeWindow(limit)}`,
        { ...where, kind: 'max_network_fee_wei', limit: limit.maxNetworkFeeWei.toString(), spent: use.feeWei.toString() });
    }
  }
  return null;
}
