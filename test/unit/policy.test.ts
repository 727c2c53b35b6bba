import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { evaluatePolicy, type PolicyFacts } from '../../src/domain/policy.js';

/**
 * evaluatePolicy is a pure function from facts to a verdict. Rules, in order: the amount the
 * ledger can record, agent status, the agent's maximum per payment (a denial, never pending),
 * allowlist (empty allows nothing; an attributed registry slug counts), network-fee ceiling
 * (gas × max fee per gas ≤ ceiling, when the payment carries a fee), rolling 24-hour spend cap
 * (committed + amount ≤ cap), approval threshold (strictly above → pending; skipThreshold skips
 * only this rule).
 */

const USD = 1_000_000n;
const ALICE = '0x1111111111111111111111111111111111111111';
const BOB = '0x2222222222222222222222222222222222222222';
const CAROL = '0xabcdefabcdefabcdefabcdefabcdefabcdefabcd';
const CEILING = 10n ** 15n;

/**
 * An active agent paying $0.50 to an allowlisted recipient, cap $10, threshold $1, nothing
 * committed, fee ceiling 10^15 wei, no network fee.
 */
function facts(over: Partial<PolicyFacts> = {}): PolicyFacts {
  return {
    agentStatus: 'active',
    allowlist: [ALICE],
    spendCapMicros: 10n * USD,
    approvalThresholdMicros: 1n * USD,
    recipient: ALICE,
    attributedSlug: null,
    amountMicros: USD / 2n,
    committedMicros: 0n,
    maxNetworkFeeWei: CEILING,
    ...over,
  };
}

describe('evaluatePolicy: maximum per payment', () => {
  test('behavior: above the maximum is denied by its rule, even where the threshold would ask a person, and skipThreshold does not lift it', () => {
    const over = facts({ amountMicros: 5n * USD + 1n, maxPerPaymentMicros: 5n * USD });
    const v = evaluatePolicy(over);
    expect(v).toMatchObject({ outcome: 'denied', rule: 'max_per_payment', reason: "Amount $5.000001 exceeds the agent's maximum of $5 per payment" });
    expect(evaluatePolicy(over, { skipThreshold: true })).toEqual(v);
  });

  test('behavior: at the maximum the other rules decide; null means no maximum', () => {
    expect(evaluatePolicy(facts({ amountMicros: 5n * USD, maxPerPaymentMicros: 5n * USD })).outcome).toBe('pending_approval');
    expect(evaluatePolicy(facts({ amountMicros: USD / 2n, maxPerPaymentMicros: 5n * USD })).outcome).toBe('allowed');
    expect(evaluatePolicy(facts({ amountMicros: 9n * USD, maxPerPaymentMicros: null })).outcome).toBe('pending_approval');
    expect(evaluatePolicy(facts({ amountMicros: USD / 2n, maxPerPaymentMicros: 0n }))).toMatchObject({ outcome: 'denied', rule: 'max_per_payment' });
  });

  test('property: a payment above the maximum is never allowed or pending, whatever else holds', () => {
    fc.assert(fc.property(
      fc.bigInt({ min: 0n, max: 1000n * USD }), fc.bigInt({ min: 1n, max: 1000n * USD }), fc.bigInt({ min: 0n, max: 1000n * USD }), fc.boolean(),
      (max, amount, threshold, skip) => {
        const v = evaluatePolicy(facts({ maxPerPaymentMicros: max, amountMicros: amount, approvalThresholdMicros: threshold, spendCapMicros: 10_000n * USD }), { skipThreshold: skip });
        return amount > max ? v.outcome === 'denied' : !(v.outcome === 'denied' && v.rule === 'max_per_payment');
      },
    ));
  });
});

describe('evaluatePolicy', () => {
  test('behavior: an active agent paying an allowlisted recipient within cap and threshold is allowed', () => {
    expect(evaluatePolicy(facts())).toEqual({ outcome: 'allowed' });
  });

  describe('rule 0: the amount the ledger can record', () => {
    test('behavior: a price above $1,000,000,000 is denied by rule amount_limit, before every other rule and whatever the cap', () => {
      const huge = (2n ** 256n - 1n) / 10n ** 12n; // 2^256 − 1 atomic units of an 18-decimal token
      for (const amountMicros of [1_000_000_000n * USD + 1n, huge]) {
        const v = evaluatePolicy(facts({ amountMicros, agentStatus: 'paused', allowlist: [], spendCapMicros: 2n ** 70n }), { skipThreshold: true });
        expect(v).toMatchObject({ outcome: 'denied', rule: 'amount_limit', reason: expect.stringMatching(/^Price of \$[\d.]+ is larger than the ledger can record \(at most \$1000000000 per payment\)$/) });
      }
      expect(evaluatePolicy(facts({ amountMicros: 1_000_000_000n * USD, spendCapMicros: 2n ** 70n, approvalThresholdMicros: 2n ** 70n }))).toEqual({ outcome: 'allowed' });
    });
  });

  describe('rule 1: agent status', () => {
    test('behavior: a paused agent is denied by rule agent_status with its status in the reason', () => {
      expect(evaluatePolicy(facts({ agentStatus: 'paused' }))).toMatchObject({
        outcome: 'denied',
        rule: 'agent_status',
        reason: 'Agent is paused; it cannot make payments',
      });
    });

    test('behavior: a revoked agent is denied by rule agent_status with its status in the reason', () => {
      expect(evaluatePolicy(facts({ agentStatus: 'revoked' }))).toMatchObject({
        outcome: 'denied',
        rule: 'agent_status',
        reason: 'Agent is revoked; it cannot make payments',
      });
    });

    test('behavior: status is checked before every other rule', () => {
      // Every later rule would also fail: empty allowlist, cap 0, over threshold.
      const v = evaluatePolicy(facts({ agentStatus: 'paused', allowlist: [], spendCapMicros: 0n, amountMicros: 5n * USD, committedMicros: 99n * USD }));
      expect(v).toMatchObject({ outcome: 'denied', rule: 'agent_status' });
    });

    test('behavior: skipThreshold does not bypass the status rule', () => {
      expect(evaluatePolicy(facts({ agentStatus: 'paused' }), { skipThreshold: true })).toMatchObject({ outcome: 'denied', rule: 'agent_status' });
    });
  });

  describe('rule 2: allowlist', () => {
    test('behavior: a recipient missing from a non-empty allowlist is denied by rule allowlist', () => {
      expect(evaluatePolicy(facts({ recipient: BOB }))).toMatchObject({
        outcome: 'denied',
        rule: 'allowlist',
        reason: `Recipient ${BOB} is not on the agent's allowlist`,
      });
    });

    test('behavior: an empty allowlist allows nothing and says it is empty', () => {
      expect(evaluatePolicy(facts({ allowlist: [] }))).toMatchObject({
        outcome: 'denied',
        rule: 'allowlist',
        reason: `Recipient ${ALICE} is not on the agent's allowlist (the allowlist is empty)`,
      });
    });

    test('behavior: any entry of a longer allowlist matches', () => {
      expect(evaluatePolicy(facts({ allowlist: [BOB, CAROL, ALICE], recipient: CAROL }))).toEqual({ outcome: 'allowed' });
    });

    test('behavior: lowercased recipient and lowercased entries match (hex letters included)', () => {
      expect(evaluatePolicy(facts({ allowlist: [CAROL], recipient: CAROL }))).toEqual({ outcome: 'allowed' });
    });

    test('behavior: the engine compares exactly; lowercasing is the caller\'s job', () => {
      // PolicyFacts documents lowercased inputs; a checksummed recipient is not normalized here.
      const checksummed = '0xABcdEFABcdEFabcdEfAbCdefabcdeFABcDEFabCD';
      const v = evaluatePolicy(facts({ allowlist: [CAROL], recipient: checksummed }));
      expect(v).toMatchObject({ outcome: 'denied', rule: 'allowlist' });
      expect(evaluatePolicy(facts({ allowlist: [CAROL], recipient: checksummed.toLowerCase() }))).toEqual({ outcome: 'allowed' });
    });

    test('behavior: a registry slug on the allowlist admits a payment attributed to that slug', () => {
      expect(evaluatePolicy(facts({ allowlist: ['weather-api'], recipient: BOB, attributedSlug: 'weather-api' }))).toEqual({ outcome: 'allowed' });
    });

    test('behavior: a slug entry does not admit an unattributed payment', () => {
      expect(evaluatePolicy(facts({ allowlist: ['weather-api'], recipient: BOB, attributedSlug: null }))).toMatchObject({
        outcome: 'denied',
        rule: 'allowlist',
      });
    });

    test('behavior: a payment attributed to another slug is denied', () => {
      expect(evaluatePolicy(facts({ allowlist: ['weather-api'], recipient: BOB, attributedSlug: 'maps-api' }))).toMatchObject({
        outcome: 'denied',
        rule: 'allowlist',
      });
    });

    test('behavior: an attributed slug does not help with an empty allowlist', () => {
      expect(evaluatePolicy(facts({ allowlist: [], attributedSlug: 'weather-api' }))).toMatchObject({ outcome: 'denied', rule: 'allowlist' });
    });

    test('behavior: the allowlist is checked before the cap and the threshold', () => {
      const v = evaluatePolicy(facts({ recipient: BOB, spendCapMicros: 0n, amountMicros: 50n * USD }));
      expect(v).toMatchObject({ outcome: 'denied', rule: 'allowlist' });
    });

    test('behavior: skipThreshold does not bypass the allowlist', () => {
      expect(evaluatePolicy(facts({ recipient: BOB }), { skipThreshold: true })).toMatchObject({ outcome: 'denied', rule: 'allowlist' });
    });
  });

  describe('rule 3: network fee ceiling', () => {
    const fee = (gas: bigint, maxFeePerGas: bigint) => ({ networkFee: { gas, maxFeePerGas } });

    test('behavior: a fee exactly at the ceiling is allowed', () => {
      expect(evaluatePolicy(facts(fee(100_000n, 10_000_000_000n)))).toEqual({ outcome: 'allowed' });
    });

    test('behavior: one step over the ceiling is denied by rule network_fee with every number in the reason', () => {
      // 100,000 × 10,000,000,001 = 10^15 + 100,000 wei: one wei more per gas than the ceiling allows.
      expect(evaluatePolicy(facts(fee(100_000n, 10_000_000_001n)))).toMatchObject({
        outcome: 'denied',
        rule: 'network_fee',
        reason: "Maximum network fee of 1000000000100000 wei (gas 100000 × max fee 10000000001 wei) exceeds the agent's ceiling of 1000000000000000 wei",
      });
      expect(evaluatePolicy(facts({ ...fee(1n, CEILING + 1n) }))).toMatchObject({ outcome: 'denied', rule: 'network_fee' });
    });

    test('behavior: the README\'s example reason: 100,000 gas at 20 gwei against 0.001 ETH', () => {
      expect(evaluatePolicy(facts(fee(100_000n, 20_000_000_000n)))).toMatchObject({
        outcome: 'denied',
        rule: 'network_fee',
        reason: "Maximum network fee of 2000000000000000 wei (gas 100000 × max fee 20000000000 wei) exceeds the agent's ceiling of 1000000000000000 wei",
      });
    });

    test('behavior: a ceiling of 0 refuses any fee, and a payment without a fee passes it', () => {
      expect(evaluatePolicy(facts({ maxNetworkFeeWei: 0n, ...fee(21_000n, 1n) }))).toMatchObject({ outcome: 'denied', rule: 'network_fee' });
      expect(evaluatePolicy(facts({ maxNetworkFeeWei: 0n }))).toEqual({ outcome: 'allowed' });
      expect(evaluatePolicy(facts({ maxNetworkFeeWei: 0n, networkFee: null }))).toEqual({ outcome: 'allowed' });
    });

    test('behavior: the largest fee a request can carry (1,000,000 gas × 1000 gwei = 1 ETH) against the largest ceiling (1000 ETH) is allowed', () => {
      expect(evaluatePolicy(facts({ maxNetworkFeeWei: 10n ** 21n, ...fee(1_000_000n, 10n ** 12n) }))).toEqual({ outcome: 'allowed' });
      expect(evaluatePolicy(facts(fee(1_000_000n, 10n ** 12n)))).toMatchObject({
        outcome: 'denied', rule: 'network_fee', reason: expect.stringContaining('Maximum network fee of 1000000000000000000 wei'),
      });
    });

    test('behavior: the fee is checked after status and allowlist and before cap and threshold', () => {
      const over = fee(1_000_000n, 10n ** 12n);
      expect(evaluatePolicy(facts({ ...over, agentStatus: 'paused' }))).toMatchObject({ rule: 'agent_status' });
      expect(evaluatePolicy(facts({ ...over, recipient: BOB }))).toMatchObject({ rule: 'allowlist' });
      expect(evaluatePolicy(facts({ ...over, spendCapMicros: 0n }))).toMatchObject({ rule: 'network_fee' });
      expect(evaluatePolicy(facts({ ...over, amountMicros: 5n * USD }))).toMatchObject({ outcome: 'denied', rule: 'network_fee' });
    });

    test('behavior: skipThreshold does not bypass the fee ceiling (an approval cannot lift it)', () => {
      expect(evaluatePolicy(facts({ ...fee(1_000_000n, 10n ** 12n), amountMicros: 5n * USD }), { skipThreshold: true })).toMatchObject({
        outcome: 'denied', rule: 'network_fee',
      });
    });
  });

  describe('rule 4: spend cap', () => {
    test('behavior: reaching the cap exactly is allowed', () => {
      expect(evaluatePolicy(facts({ committedMicros: 9_500_000n, amountMicros: 500_000n, approvalThresholdMicros: 10n * USD }))).toEqual({ outcome: 'allowed' });
    });

    test('behavior: one micro-dollar over the cap is denied by rule spend_cap with every number in the reason', () => {
      expect(evaluatePolicy(facts({ committedMicros: 9_500_000n, amountMicros: 500_001n }))).toMatchObject({
        outcome: 'denied',
        rule: 'spend_cap',
        reason: 'Spend cap of $10 per 24 hours would be exceeded: $9.5 already committed, this payment is $0.500001 ($0.5 left)',
        info: { kind: 'spend_cap', window: '24h', scope: 'agent', recipient: null, limit: '10', spent: '9.5' },
      });
    });

    test('behavior: a single payment above the cap with nothing committed is denied', () => {
      const v = evaluatePolicy(facts({ amountMicros: 10n * USD + 1n, approvalThresholdMicros: 100n * USD }));
      expect(v).toMatchObject({ outcome: 'denied', rule: 'spend_cap' });
      if (v.outcome !== 'denied') throw new Error('unreachable');
      expect(v.reason).toContain('$10 per 24 hours');
      expect(v.reason).toContain('$0 already committed');
      expect(v.reason).toContain('this payment is $10.000001');
      expect(v.reason).toContain('($10 left)');
    });

    test('behavior: a zero cap denies every payment', () => {
      const v = evaluatePolicy(facts({ spendCapMicros: 0n, amountMicros: 1n }));
      expect(v).toMatchObject({
        outcome: 'denied',
        rule: 'spend_cap',
        reason: 'Spend cap of $0 per 24 hours would be exceeded: $0 already committed, this payment is $0.000001 ($0 left)',
      });
    });

    test('behavior: when more than the cap is already committed the reason says $0 left, never a negative amount', () => {
      const v = evaluatePolicy(facts({ spendCapMicros: 5n * USD, committedMicros: 7n * USD, amountMicros: 1n }));
      expect(v).toMatchObject({ outcome: 'denied', rule: 'spend_cap' });
      if (v.outcome !== 'denied') throw new Error('unreachable');
      expect(v.reason).toBe('Spend cap of $5 per 24 hours would be exceeded: $7 already committed, this payment is $0.000001 ($0 left)');
      expect(v.reason).not.toContain('-');
    });

    test('behavior: cents are written without trailing zeros in the reason', () => {
      const v = evaluatePolicy(facts({ spendCapMicros: 2_250_000n, committedMicros: 2_000_000n, amountMicros: 300_000n }));
      expect(v).toMatchObject({ reason: 'Spend cap of $2.25 per 24 hours would be exceeded: $2 already committed, this payment is $0.3 ($0.25 left)' });
    });

    test('behavior: the cap is checked before the threshold (an over-cap, over-threshold payment is denied, not pending)', () => {
      const v = evaluatePolicy(facts({ committedMicros: 9n * USD, amountMicros: 2n * USD }));
      expect(v).toMatchObject({ outcome: 'denied', rule: 'spend_cap' });
    });

    test('behavior: skipThreshold does not bypass the cap', () => {
      expect(evaluatePolicy(facts({ committedMicros: 9n * USD, amountMicros: 2n * USD }), { skipThreshold: true })).toMatchObject({
        outcome: 'denied',
        rule: 'spend_cap',
      });
    });

    test('behavior: amounts near the one-billion-dollar bound are compared exactly', () => {
      const big = 1_000_000_000n * USD;
      expect(evaluatePolicy(facts({ spendCapMicros: big, approvalThresholdMicros: big, amountMicros: big }))).toEqual({ outcome: 'allowed' });
      expect(evaluatePolicy(facts({ spendCapMicros: big, approvalThresholdMicros: big, amountMicros: big, committedMicros: 1n }))).toMatchObject({
        outcome: 'denied',
        rule: 'spend_cap',
      });
    });
  });

  describe('rule 5: approval threshold', () => {
    test('behavior: an amount equal to the threshold is allowed', () => {
      expect(evaluatePolicy(facts({ amountMicros: 1n * USD }))).toEqual({ outcome: 'allowed' });
    });

    test('behavior: one micro-dollar above the threshold needs approval, with amount and threshold in the reason', () => {
      expect(evaluatePolicy(facts({ amountMicros: USD + 1n }))).toMatchObject({
        outcome: 'pending_approval',
        thresholdMicros: 1n * USD,
        reason: 'Amount $1.000001 exceeds the approval threshold of 1 USD; a human must approve it',
      });
    });

    test('behavior: a fractional threshold is written in USD without trailing zeros', () => {
      expect(evaluatePolicy(facts({ approvalThresholdMicros: 250_000n, amountMicros: 300_000n }))).toMatchObject({
        outcome: 'pending_approval',
        thresholdMicros: 250_000n,
        reason: 'Amount $0.3 exceeds the approval threshold of 0.25 USD; a human must approve it',
      });
    });

    test('behavior: a zero threshold sends every payment to approval', () => {
      expect(evaluatePolicy(facts({ approvalThresholdMicros: 0n, amountMicros: 1n }))).toMatchObject({ outcome: 'pending_approval', thresholdMicros: 0n });
    });

    test('behavior: skipThreshold allows an amount above the threshold (a human approved it)', () => {
      expect(evaluatePolicy(facts({ amountMicros: 5n * USD }), { skipThreshold: true })).toEqual({ outcome: 'allowed' });
    });

    test('behavior: skipThreshold false behaves like no options', () => {
      expect(evaluatePolicy(facts({ amountMicros: 5n * USD }), { skipThreshold: false })).toMatchObject({ outcome: 'pending_approval' });
    });

    test('behavior: committed spending does not count against the threshold, only the amount does', () => {
      expect(evaluatePolicy(facts({ committedMicros: 8n * USD, amountMicros: 1n * USD }))).toEqual({ outcome: 'allowed' });
    });
  });

  describe('purity', () => {
    test('behavior: does not mutate its input and gives the same verdict twice', () => {
      const f = facts({ allowlist: [BOB, ALICE], amountMicros: 3n * USD });
      const copy = structuredClone(f);
      const a = evaluatePolicy(f);
      const b = evaluatePolicy(f);
      expect(a).toEqual(b);
      expect(f).toEqual(copy);
    });
  });

  describe('properties', () => {
    const address = fc.stringMatching(/^0x[0-9a-f]{40}$/);
    const slug = fc.stringMatching(/^[a-z0-9](?:[a-z0-9-]{0,10}[a-z0-9])?$/);
    const micros = fc.bigInt({ min: 0n, max: 2_000n * USD });
    const arbFacts = fc
      .record({
        agentStatus: fc.constantFrom('active' as const, 'paused' as const, 'revoked' as const),
        others: fc.array(fc.oneof(address, slug), { maxLength: 5 }),
        recipient: address,
        listRecipient: fc.boolean(),
        attributedSlug: fc.option(slug, { nil: null }),
        listSlug: fc.boolean(),
        spendCapMicros: micros,
        approvalThresholdMicros: micros,
        amountMicros: fc.bigInt({ min: 1n, max: 2_000n * USD }),
        committedMicros: micros,
        maxNetworkFeeWei: fc.oneof(fc.constant(0n), fc.constant(CEILING), fc.bigInt({ min: 0n, max: 10n ** 21n })),
        networkFee: fc.option(fc.record({ gas: fc.bigInt({ min: 21_000n, max: 1_000_000n }), maxFeePerGas: fc.bigInt({ min: 1n, max: 10n ** 12n }) }), { nil: null }),
      })
      .map(({ others, listRecipient, listSlug, ...r }): PolicyFacts => ({
        ...r,
        allowlist: [...others, ...(listRecipient ? [r.recipient] : []), ...(listSlug && r.attributedSlug !== null ? [r.attributedSlug] : [])],
      }));

    /** The rules written independently: the first failing rule decides. */
    function oracle(f: PolicyFacts, skipThreshold: boolean): 'allowed' | 'pending_approval' | 'agent_status' | 'allowlist' | 'network_fee' | 'spend_cap' {
      if (f.agentStatus !== 'active') return 'agent_status';
      const listed = f.allowlist.some((e) => e === f.recipient || (f.attributedSlug !== null && e === f.attributedSlug));
      if (!listed) return 'allowlist';
      if (f.networkFee && f.networkFee.gas * f.networkFee.maxFeePerGas > f.maxNetworkFeeWei) return 'network_fee';
      if (f.committedMicros + f.amountMicros > f.spendCapMicros) return 'spend_cap';
      if (!skipThreshold && f.amountMicros > f.approvalThresholdMicros) return 'pending_approval';
      return 'allowed';
    }

    test('behavior: allowed iff active, listed, fee ≤ ceiling, committed + amount ≤ cap and amount ≤ threshold', () => {
      fc.assert(
        fc.property(arbFacts, (f) => {
          const v = evaluatePolicy(f);
          const allowed =
            f.agentStatus === 'active' &&
            (f.allowlist.includes(f.recipient) || (f.attributedSlug !== null && f.allowlist.includes(f.attributedSlug))) &&
            (!f.networkFee || f.networkFee.gas * f.networkFee.maxFeePerGas <= f.maxNetworkFeeWei) &&
            f.committedMicros + f.amountMicros <= f.spendCapMicros &&
            f.amountMicros <= f.approvalThresholdMicros;
          expect(v.outcome === 'allowed').toBe(allowed);
        }),
        { numRuns: 2000 },
      );
    });

    test('behavior: the verdict is the first failing rule, with and without skipThreshold', () => {
      fc.assert(
        fc.property(arbFacts, fc.boolean(), (f, skip) => {
          const v = evaluatePolicy(f, { skipThreshold: skip });
          const expected = oracle(f, skip);
          const got = v.outcome === 'denied' ? v.rule : v.outcome;
          expect(got).toBe(expected);
        }),
        { numRuns: 2000 },
      );
    });

    test('behavior: pending only when active, listed, within cap and strictly above the threshold; it carries the threshold', () => {
      fc.assert(
        fc.property(arbFacts, (f) => {
          const v = evaluatePolicy(f);
          if (v.outcome === 'pending_approval') {
            expect(f.agentStatus).toBe('active');
            expect(f.amountMicros > f.approvalThresholdMicros).toBe(true);
            expect(f.committedMicros + f.amountMicros <= f.spendCapMicros).toBe(true);
            expect(v.thresholdMicros).toBe(f.approvalThresholdMicros);
            expect(v.reason).toMatch(/^Amount \$\d+(\.\d{1,6})? exceeds the approval threshold of \d+(\.\d{1,6})? USD; a human must approve it$/);
          }
        }),
        { numRuns: 1000 },
      );
    });

    test('behavior: every denial and approval reason is non-empty and names the rule\'s numbers', () => {
      const fmt = (m: bigint) => {
        const whole = m / USD;
        const frac = (m % USD).toString().padStart(6, '0').replace(/0+$/, '');
        return frac ? `${whole}.${frac}` : `${whole}`;
      };
      fc.assert(
        fc.property(arbFacts, (f) => {
          const v = evaluatePolicy(f);
          if (v.outcome === 'allowed') return;
          expect(v.reason.length).toBeGreaterThan(0);
          if (v.outcome === 'denied' && v.rule === 'spend_cap') {
            expect(v.reason).toContain(`$${fmt(f.spendCapMicros)} per 24 hours`);
            expect(v.reason).toContain(`$${fmt(f.committedMicros)} already committed`);
            expect(v.reason).toContain(`this payment is $${fmt(f.amountMicros)}`);
          }
          if (v.outcome === 'denied' && v.rule === 'allowlist') expect(v.reason).toContain(f.recipient);
          if (v.outcome === 'denied' && v.rule === 'agent_status') expect(v.reason).toContain(f.agentStatus);
          if (v.outcome === 'denied' && v.rule === 'network_fee') {
            expect(v.reason).toBe(
              `Maximum network fee of ${f.networkFee!.gas * f.networkFee!.maxFeePerGas} wei (gas ${f.networkFee!.gas} × max fee ${f.networkFee!.maxFeePerGas} wei) exceeds the agent's ceiling of ${f.maxNetworkFeeWei} wei`,
            );
          }
          if (v.outcome === 'pending_approval') {
            expect(v.reason).toContain(`$${fmt(f.amountMicros)}`);
            expect(v.reason).toContain(`${fmt(f.approvalThresholdMicros)} USD`);
          }
        }),
        { numRuns: 1000 },
      );
    });

    test('behavior: raising the cap, the threshold or the fee ceiling never turns an allowed payment into a refusal', () => {
      fc.assert(
        fc.property(arbFacts, micros, micros, fc.bigInt({ min: 0n, max: 10n ** 21n }), (f, moreCap, moreThreshold, moreFee) => {
          if (evaluatePolicy(f).outcome !== 'allowed') return;
          const looser = {
            ...f, spendCapMicros: f.spendCapMicros + moreCap, approvalThresholdMicros: f.approvalThresholdMicros + moreThreshold,
            maxNetworkFeeWei: f.maxNetworkFeeWei + moreFee,
          };
          expect(evaluatePolicy(looser)).toEqual({ outcome: 'allowed' });
        }),
        { numRuns: 1000 },
      );
    });
  });
});

describe('evaluatePolicy: split recipients', () => {
  const base = {
    agentStatus: 'active' as const, allowlist: ['0xaaaa', 'svc'], spendCapMicros: 10_000_000n, approvalThresholdMicros: 5_000_000n,
    recipient: '0xaaaa', attributedSlug: null, amountMicros: 1_000_000n, committedMicros: 0n, maxNetworkFeeWei: CEILING,
  };

  test('error: allowed by address, an unlisted split recipient denies with the allowlist rule', () => {
    const v = evaluatePolicy({ ...base, otherRecipients: ['0xbbbb'] });
    expect(v).toMatchObject({ outcome: 'denied', rule: 'allowlist', reason: "The payment also pays 0xbbbb (a split), which is not on the agent's allowlist" });
  });

  test('behavior: allowed by address, listed split recipients pass', () => {
    expect(evaluatePolicy({ ...base, allowlist: ['0xaaaa', '0xbbbb'], otherRecipients: ['0xbbbb'] }).outcome).toBe('allowed');
  });

  test('behavior: allowed through the attributed slug, the service decides its splits', () => {
    expect(evaluatePolicy({ ...base, recipient: '0xcccc', attributedSlug: 'svc', otherRecipients: ['0xbbbb'] }).outcome).toBe('allowed');
  });
});

