import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { limitCovers, parseLimits, type LimitUsage, type SpendLimit } from '../../src/domain/limits.js';
import { evaluatePolicy, type RuleInfo } from '../../src/domain/policy.js';
import { simulatePolicy, type OtherHold, type Outcome, type PastRequest, type SimulationInput } from '../../src/domain/simulation.js';

const USD = 1_000_000n;
const MIN = 60_000;
const SHOP = '0x2222222222222222222222222222222222222222';
const OTHER = '0x3333333333333333333333333333333333333333';

const policy = (over: Partial<SimulationInput['policy']> = {}): SimulationInput['policy'] => ({
  allowlist: [SHOP, OTHER], spendCapMicros: 1000n * USD, approvalThresholdMicros: 100n * USD, maxNetworkFeeWei: 10n ** 18n, maxPerPaymentMicros: null,
  limits: [], ...over,
});
const req = (i: number, at: number, usd: bigint, over: Partial<PastRequest> = {}): PastRequest => ({
  id: `r${i}`, at, recipient: SHOP, slug: null, others: [], amountMicros: usd * USD, networkFee: null, feeWei: 0n, had: 'allowed', fixedDenial: null, ...over,
});
const limits = (...items: unknown[]) => parseLimits(items);
const run = (requests: PastRequest[], over: Partial<SimulationInput> = {}) =>
  simulatePolicy({ requests, policy: policy(), orgLimits: [], otherHolds: [], approvalWindowMs: 60 * MIN, ...over });

describe('policy simulation', () => {
  test('behavior: an hourly limit denies what would overflow it and frees as the hour slides; only changed requests are listed', () => {
    const requests = [req(1, 0, 3n), req(2, 10 * MIN, 3n), req(3, 59 * MIN, 2n), req(4, 60 * MIN, 3n)];
    const r = run(requests, { policy: policy({ limits: limits({ window: '1h', max_usd: '5' }) }) });
    expect(r).toMatchObject({ requests: 4, allowed: 3, pendingApproval: 0, denied: 1 });
    // r2 overflows (3 + 3 > 5); r3 fits (3 + 2); at 60 min r1 has left the window (cap_at > now - 1h is false), so r4 sees 2 held.
    expect(r.changed).toEqual([{
      id: 'r2', at: 10 * MIN, amountMicros: 3n * USD, recipient: SHOP, slug: null, had: 'allowed', wouldBe: 'denied',
      rule: { kind: 'max_usd', window: '1h', scope: 'agent', recipient: null, limit: '5', spent: '3' },
      reason: "Payment of $3 would exceed the agent's 1h limit of $5: $3 already spent in the last hour",
    }]);
  });

  test('behavior: a request that would wait for approval holds until the approval window ends, as an unanswered approval does', () => {
    const p = policy({ approvalThresholdMicros: 4n * USD, limits: limits({ window: '1d', max_usd: '10' }) });
    const requests = [req(1, 0, 8n), req(2, 29 * MIN, 5n), req(3, 30 * MIN, 5n)];
    const r = run(requests, { policy: p, approvalWindowMs: 30 * MIN });
    expect(r.changed.map((c) => [c.id, c.wouldBe])).toEqual([['r1', 'pending_approval'], ['r2', 'denied'], ['r3', 'pending_approval']]);
  });

  test('behavior: the organization\'s limits count the other agents\' holds from when they began until they end; the agent\'s own limits do not', () => {
    const org = limits({ window: '1h', max_usd: '10' });
    const others: OtherHold[] = [
      { at: 0, until: null, recipient: SHOP, slug: null, others: [], amountMicros: 6n * USD, feeWei: 0n },
      { at: 20 * MIN, until: 25 * MIN, recipient: SHOP, slug: null, others: [], amountMicros: 4n * USD, feeWei: 0n },
    ];
    const p = policy({ limits: limits({ window: '1h', max_usd: '100' }) });
    const r = run([req(1, 21 * MIN, 1n), req(2, 25 * MIN, 4n), req(3, 61 * MIN, 6n)], { policy: p, orgLimits: org, otherHolds: others });
    // At 21 min the org holds 10 (r1 denied); at 25 min the pending one has expired (6 + 4 = 10 fits); at 61 min only r2 (4) is held, and 6 more fits.
    expect(r.changed.map((c) => [c.id, c.wouldBe, c.rule?.scope])).toEqual([['r1', 'denied', 'organization']]);
    expect(r).toMatchObject({ allowed: 2, denied: 1 });
  });

  test('behavior: a recipient-scoped limit counts split recipients and attributed slugs, and leaves other recipients alone', () => {
    const p = policy({ allowlist: [SHOP, OTHER, 'weather'], limits: limits({ window: '1h', max_count: 1, recipient: 'weather' }) });
    const requests = [
      req(1, 0, 1n, { slug: 'weather' }), req(2, MIN, 1n, { recipient: OTHER }), req(3, 2 * MIN, 1n, { others: ['weather'] }), req(4, 3 * MIN, 1n),
    ];
    const r = run(requests, { policy: p });
    expect(r.changed.map((c) => c.id)).toEqual(['r3']);
  });

  test('behavior: denials the policy does not decide stay as they were, whatever the proposed policy allows', () => {
    const status: RuleInfo = { kind: 'agent_status', window: null, scope: null, recipient: null, limit: null, spent: null };
    const r = run([req(1, 0, 1n, { had: 'denied', fixedDenial: status }), req(2, MIN, 1n, { had: 'denied' })]);
    expect(r).toMatchObject({ allowed: 1, denied: 1 });
    expect(r.changed.map((c) => [c.id, c.had, c.wouldBe])).toEqual([['r2', 'denied', 'allowed']]);
  });

  test('property: the replay decides each request exactly as the engine does over a ledger summed from scratch', () => {
    const arb = fc.record({
      gaps: fc.array(fc.integer({ min: 0, max: 40 * MIN }), { minLength: 1, maxLength: 60 }),
      amounts: fc.array(fc.integer({ min: 1, max: 9 }), { minLength: 60, maxLength: 60 }),
      recipients: fc.array(fc.boolean(), { minLength: 60, maxLength: 60 }),
      threshold: fc.integer({ min: 1, max: 10 }),
      approvalMin: fc.integer({ min: 1, max: 120 }),
      cap: fc.integer({ min: 5, max: 60 }),
      hourly: fc.integer({ min: 3, max: 30 }),
      count: fc.integer({ min: 1, max: 8 }),
    });
    fc.assert(fc.property(arb, (a) => {
      let t = 0;
      const requests = a.gaps.map((g, i) => req(i, (t += g), BigInt(a.amounts[i]!), { recipient: a.recipients[i] ? SHOP : OTHER }));
      const agentLimits = limits({ window: '1h', max_usd: String(a.hourly) }, { window: '30m', max_count: a.count, recipient: OTHER });
      const orgLimits = limits({ window: '2h', max_usd: String(a.hourly * 2) });
      const p = policy({ spendCapMicros: BigInt(a.cap) * USD, approvalThresholdMicros: BigInt(a.threshold) * USD, limits: agentLimits });
      const approvalWindowMs = a.approvalMin * MIN;
      const r = simulatePolicy({ requests, policy: p, orgLimits, otherHolds: [], approvalWindowMs });
      const wouldBe = new Map(r.changed.map((c) => [c.id, c.wouldBe]));

      // The reference: every hold kept in a list and every window summed from it, as the store does.
      const holds: Array<{ at: number; until: number | null; r: PastRequest }> = [];
      const held = (l: SpendLimit | null, now: number, windowMs: number) => holds.filter((h) =>
        h.at > now - windowMs && (h.until === null || h.until > now) && (l === null || limitCovers(l, h.r.recipient, h.r.slug, h.r.others)));
      for (const q of requests) {
        const usage = (scope: 'agent' | 'organization', l: SpendLimit): LimitUsage => {
          const hs = held(l, q.at, l.windowMs);
          return { scope, limit: l, use: { micros: hs.reduce((s, h) => s + h.r.amountMicros, 0n), count: hs.length, feeWei: 0n } };
        };
        const covering = [...agentLimits.map((l) => ['agent', l] as const), ...orgLimits.map((l) => ['organization', l] as const)]
          .filter(([, l]) => limitCovers(l, q.recipient, q.slug, q.others));
        const v = evaluatePolicy({
          agentStatus: 'active', allowlist: p.allowlist, spendCapMicros: p.spendCapMicros, approvalThresholdMicros: p.approvalThresholdMicros,
          recipient: q.recipient, attributedSlug: null, amountMicros: q.amountMicros, maxNetworkFeeWei: p.maxNetworkFeeWei,
          committedMicros: held(null, q.at, 24 * 60 * MIN).reduce((s, h) => s + h.r.amountMicros, 0n),
          limits: covering.map(([scope, l]) => usage(scope, l)),
        });
        const expected: Outcome = v.outcome;
        expect(wouldBe.get(q.id) ?? q.had).toBe(expected);
        if (v.outcome !== 'denied') holds.push({ at: q.at, until: v.outcome === 'pending_approval' ? q.at + approvalWindowMs : null, r: q });
      }
    }), { numRuns: 150 });
  });
});
