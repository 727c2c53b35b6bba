import { formatUsd, MAX_USD_MICROS } from './money.js';
import { maxNetworkFeeWei, type NetworkFee } from './networkFee.js';
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
};

/** `treasury_funds` and `treasury_gas` are not decided here: app/organizations/treasury.ts denies a raw transaction the treasury cannot pay. */
export type DenyRule = 'amount_limit' | 'agent_status' | 'max_amount' | 'max_per_payment' | 'allowlist' | 'network_fee' | 'spend_cap' | 'treasury_funds' | 'treasury_gas';

export type Verdict =
  | { outcome: 'allowed' }
  | { outcome: 'pending_approval'; reason: string; thresholdMicros: bigint }
  | { outcome: 'denied'; rule: DenyRule; reason: string };

export type EvaluateOptions = {
  /** A human approval overrides the threshold, and only the threshold. */
  skipThreshold?: boolean;
};

const usd = (micros: bigint) => `$${formatUsd(micros)}`;

/**
 * Checks, in order: the amount against what the ledger records (a paywall names any price, up to
 * 2^256 − 1 atomic units), agent status, the requester's own price ceiling, the agent's per-payment
 * maximum (a denial, never an approval: no person can approve what the policy forbids outright),
 * recipient allowlist, network-fee ceiling, rolling 24-hour spend cap, approval threshold. The fee ceiling is inclusive (a fee equal to it is allowed). Amounts strictly above the threshold need approval; equal is allowed. An empty
 * allowlist allows nothing.
 */
export function evaluatePolicy(f: PolicyFacts, options: EvaluateOptions = {}): Verdict {
  if (f.amountMicros > MAX_USD_MICROS) {
    return { outcome: 'denied', rule: 'amount_limit', reason: `Price of ${usd(f.amountMicros)} is larger than the ledger can record (at most ${usd(MAX_USD_MICROS)} per payment)` };
  }
  if (f.agentStatus !== 'active') {
    return { outcome: 'denied', rule: 'agent_status', reason: `Agent is ${f.agentStatus}; it cannot make payments` };
  }
  if (f.maxAmountMicros != null && f.amountMicros > f.maxAmountMicros) {
    return {
      outcome: 'denied',
      rule: 'max_amount',
      reason: `Price of ${usd(f.amountMicros)} exceeds the request's max_amount_usd of ${usd(f.maxAmountMicros)}`,
    };
  }
  if (f.maxPerPaymentMicros != null && f.amountMicros > f.maxPerPaymentMicros) {
    return {
      outcome: 'denied',
      rule: 'max_per_payment',
      reason: `Amount ${usd(f.amountMicros)} exceeds the agent's maximum of ${usd(f.maxPerPaymentMicros)} per payment`,
    };
  }
  const byAddress = f.allowlist.includes(f.recipient);
  const bySlug = f.attributedSlug !== null && f.allowlist.includes(f.attributedSlug);
  if (byAddress && !bySlug) {
    const unlisted = (f.otherRecipients ?? []).find((r) => !f.allowlist.includes(r));
    if (unlisted !== undefined) {
      return { outcome: 'denied', rule: 'allowlist', reason: `The payment also pays ${unlisted} (a split), which is not on the agent's allowlist` };
    }
  }
  if (!byAddress && !bySlug) {
    const reason = f.allowlist.length === 0
      ? `Recipient ${f.recipient} is not on the agent's allowlist (the allowlist is empty)`
      : f.attributionNote
        ? `Recipient ${f.recipient} is not on the agent's allowlist: ${f.attributionNote}`
        : `Recipient ${f.recipient} is not on the agent's allowlist`;
    return { outcome: 'denied', rule: 'allowlist', reason };
  }
  if (f.networkFee) {
    const fee = maxNetworkFeeWei(f.networkFee);
    if (fee > f.maxNetworkFeeWei) {
      return {
        outcome: 'denied',
        rule: 'network_fee',
        reason: `Maximum network fee of ${fee} wei (gas ${f.networkFee.gas} × max fee ${f.networkFee.maxFeePerGas} wei) exceeds the agent's ceiling of ${f.maxNetworkFeeWei} wei`,
      };
    }
  }
  if (f.committedMicros + f.amountMicros > f.spendCapMicros) {
    const left = f.spendCapMicros > f.committedMicros ? f.spendCapMicros - f.committedMicros : 0n;
    return {
      outcome: 'denied',
      rule: 'spend_cap',
      reason: `Spend cap of ${usd(f.spendCapMicros)} per 24 hours would be exceeded: ${usd(f.committedMicros)} already committed, this payment is ${usd(f.amountMicros)} (${usd(left)} left)`,
    };
  }
  if (!options.skipThreshold && f.amountMicros > f.approvalThresholdMicros) {
    return {
      outcome: 'pending_approval',
      thresholdMicros: f.approvalThresholdMicros,
      reason: `Amount ${usd(f.amountMicros)} exceeds the approval threshold of ${formatUsd(f.approvalThresholdMicros)} USD; a human must approve it`,
    };
  }
  return { outcome: 'allowed' };
}
