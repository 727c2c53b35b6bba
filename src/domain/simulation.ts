import { limitCovers, type LimitUsage, type SpendLimit } from './limits.js';
import type { NetworkFee } from './networkFee.js';
import { evaluatePolicy, type RuleInfo } from './policy.js';
import type { Policy } from './types.js';

/**
 * What-if for a policy: an agent's past payment requests replayed in order under a proposed
 * policy, each decided by the same engine as a live request (domain/policy.ts), with every window
 * the engine reads measured from the replay itself. Pure: the caller loads the history.
 *
 * The replay is what a fresh server given the same requests at the same times would decide:
 * - the agent's windows and spend cap hold only what the replay signed or queued for approval;
 * - nobody decides a queued approval, so it holds until the organization's approval window ends,
 *   as an unanswered approval does;
 * - the organization's limits also hold the other agents' payments that hold today, from when
 *   they began to (one that was approved: from its creation until the decision, then from the
 *   decision, as the ledger moved it); those agents are not replayed;
 * - a denial the policy document cannot change (the agent was paused, the requester's own price
 *   ceiling, a price beyond the ledger, the treasury's funds) stays as it was.
 */

/** A decision's outcome, as the ledger tells them apart. */
export const OUTCOMES = ['allowed', 'pending_approval', 'denied'] as const;
export type Outcome = (typeof OUTCOMES)[number];

/** One past request, as the ledger recorded it. */
export type PastRequest = {
  id: string;
  at: number;
  recipient: string;
  slug: string | null;
  /** Split recipients of an MPP payment. */
  others: readonly string[];
  amountMicros: bigint;
  networkFee: NetworkFee | null;
  /** The network fee it holds in limits, in wei (whole gwei, as the ledger counts it). */
  feeWei: bigint;
  had: Outcome;
  /** How long an approval of it would wait: its own approval's window when it had one; absent, the organization's. */
  approvalWindowMs?: number;
  /** A denial the policy document does not decide, kept as it was; null for every other request. */
  fixedDenial: RuleInfo | null;
};

/** Another agent's payment that holds the organization's windows today. */
export type OtherHold = {
  at: number;
  /** When it stops holding (a pending approval's expiry); null while it holds for good. */
  until: number | null;
  recipient: string;
  slug: string | null;
  others: readonly string[];
  amountMicros: bigint;
  feeWei: bigint;
};

export type SimulationInput = {
  requests: readonly PastRequest[];
  policy: Pick<Policy, 'allowlist' | 'spendCapMicros' | 'approvalThresholdMicros' | 'maxNetworkFeeWei' | 'maxPerPaymentMicros' | 'limits'>;
  orgLimits: readonly SpendLimit[];
  /** Oldest first. */
  otherHolds: readonly OtherHold[];
  approvalWindowMs: number;
};

export type SimulatedChange = {
  id: string;
  at: number;
  amountMicros: bigint;
  recipient: string;
  slug: string | null;
  had: Outcome;
  wouldBe: Outcome;
  /** The rule that decided the new outcome; null when it would be allowed. */
  rule: RuleInfo | null;
  reason: string;
};

export type SimulationResult = {
  requests: number;
  allowed: number;
  pendingApproval: number;
  denied: number;
  changed: SimulatedChange[];
};

const CAP_WINDOW_MS = 24 * 3600 * 1000;
const CAP: SpendLimit = { window: '24h', windowMs: CAP_WINDOW_MS, maxMicros: null, maxCount: null, maxNetworkFeeWei: null, recipient: null };

type Hold = { leaveAt: number; micros: bigint; feeWei: bigint };

/**
 * What one window holds as the replay's clock moves forward: holds leave at the end of the window
 * or at their approval's expiry, whichever is first, so a min-heap on that time keeps every
 * measurement O(log n) however long the history.
 */
class Window {
  micros = 0n;
  count = 0;
  feeWei = 0n;
  private heap: Hold[] = [];
  constructor(readonly limit: SpendLimit, readonly scope: 'agent' | 'organization') {}

  add(at: number, until: number | null, micros: bigint, feeWei: bigint, now: number): void {
    const leaveAt = Math.min(at + this.limit.windowMs, until ?? Infinity);
    if (leaveAt <= now) return;
    this.micros += micros;
    this.count++;
    this.feeWei += feeWei;
    const h = this.heap;
    h.push({ leaveAt, micros, feeWei });
    for (let i = h.length - 1; i > 0;) {
      const p = (i - 1) >> 1;
      if (h[p]!.leaveAt <= h[i]!.leaveAt) break;
      [h[p], h[i]] = [h[i]!, h[p]!];
      i = p;
    }
  }

  /** Drops what has left the window by `now` (a hold leaves when `now` reaches its time, as the store's `cap_at > now - window` has it). */
  advance(now: number): void {
    const h = this.heap;
    while (h.length > 0 && h[0]!.leaveAt <= now) {
      const top = h[0]!;
      this.micros -= top.micros;
      this.count--;
      this.feeWei -= top.feeWei;
      const last = h.pop()!;
      if (h.length === 0) break;
      h[0] = last;
      for (let i = 0; ;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && h[l]!.leaveAt < h[m]!.leaveAt) m = l;
        if (r < h.length && h[r]!.leaveAt < h[m]!.leaveAt) m = r;
        if (m === i) break;
        [h[m], h[i]] = [h[i]!, h[m]!];
        i = m;
      }
    }
  }
}

export function simulatePolicy(input: SimulationInput): SimulationResult {
  const { policy } = input;
  const cap = new Window({ ...CAP, maxMicros: policy.spendCapMicros }, 'agent');
  const agentWindows = policy.limits.map((l) => new Window(l, 'agent'));
  const orgWindows = input.orgLimits.map((l) => new Window(l, 'organization'));
  const result: SimulationResult = { requests: 0, allowed: 0, pendingApproval: 0, denied: 0, changed: [] };
  let nextOther = 0;

  for (const r of input.requests) {
    // The other agents' holds that began by now enter the organization's windows.
    for (; nextOther < input.otherHolds.length && input.otherHolds[nextOther]!.at <= r.at; nextOther++) {
      const o = input.otherHolds[nextOther]!;
      for (const w of orgWindows) if (limitCovers(w.limit, o.recipient, o.slug, o.others)) w.add(o.at, o.until, o.amountMicros, o.feeWei, r.at);
    }
    cap.advance(r.at);
    for (const w of agentWindows) w.advance(r.at);
    for (const w of orgWindows) w.advance(r.at);

    const covering = [...agentWindows, ...orgWindows].filter((w) => limitCovers(w.limit, r.recipient, r.slug, r.others));
    let wouldBe: Outcome;
    let rule: RuleInfo | null = null;
    let reason = '';
    if (r.fixedDenial) {
      wouldBe = 'denied';
      rule = r.fixedDenial;
    } else {
      const limits: LimitUsage[] = covering.map((w) => ({ scope: w.scope, limit: w.limit, use: { micros: w.micros, count: w.count, feeWei: w.feeWei } }));
      const verdict = evaluatePolicy({
        agentStatus: 'active', allowlist: policy.allowlist, spendCapMicros: policy.spendCapMicros, approvalThresholdMicros: policy.approvalThresholdMicros,
        recipient: r.recipient, otherRecipients: r.others, attributedSlug: r.slug, amountMicros: r.amountMicros, committedMicros: cap.micros,
        maxNetworkFeeWei: policy.maxNetworkFeeWei, maxPerPaymentMicros: policy.maxPerPaymentMicros, networkFee: r.networkFee, limits,
      });
      wouldBe = verdict.outcome;
      if (verdict.outcome === 'denied') {
        rule = verdict.info;
        reason = verdict.reason;
      } else if (verdict.outcome === 'pending_approval') {
        rule = verdict.rule;
        reason = verdict.reason;
      }
      if (verdict.outcome !== 'denied') {
        const until = verdict.outcome === 'pending_approval' ? r.at + (r.approvalWindowMs ?? input.approvalWindowMs) : null;
        cap.add(r.at, until, r.amountMicros, 0n, r.at);
        for (const w of covering) w.add(r.at, until, r.amountMicros, r.feeWei, r.at);
      }
    }

    result.requests++;
    if (wouldBe === 'allowed') result.allowed++;
    else if (wouldBe === 'pending_approval') result.pendingApproval++;
    else result.denied++;
    if (wouldBe !== r.had) {
      result.changed.push({ id: r.id, at: r.at, amountMicros: r.amountMicros, recipient: r.recipient, slug: r.slug, had: r.had, wouldBe, rule, reason });
    }
  }
  return result;
}
