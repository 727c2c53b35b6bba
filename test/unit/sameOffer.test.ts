import { describe, expect, test } from 'vitest';
import type { Address } from 'viem';
import { offerPayees, sameOffer } from '../../src/app/payments/paywall.js';
import type { Offer } from '../../src/paywalls/offer.js';

/**
 * sameOffer decides whether an approved paywall payment may be signed against the challenge the
 * paywall answers with at collection: same rail, chain, token, recipient and fee payer, no more in
 * total, and for a split payment exactly the approved vector of transfers (every recipient and
 * amount in order, the primary recipient's share, so the total, included).
 */

const PRIMARY: Address = '0x1111111111111111111111111111111111111111';
const SECOND: Address = '0x3333333333333333333333333333333333333333';
const THIRD: Address = '0x4444444444444444444444444444444444444444';
const PATH_USD: Address = '0x20C0000000000000000000000000000000000000';

/** A Tempo testnet MPP offer of `total` atomic units of a 6-decimal token to PRIMARY with `splits`. */
function mppOffer(total: bigint, splits: Array<{ amount: string; recipient: Address }>, feePayer?: boolean): Offer {
  return {
    rail: 'mpp', chainId: 42431, network: 'tempo-testnet', scheme: null, realm: 'r', payTo: PRIMARY, asset: PATH_USD,
    amountAtomic: total, decimals: 6, amountMicros: total,
    mpp: {
      challenge: { id: 'c', realm: 'r', method: 'tempo', intent: 'charge', request: '' },
      request: { amount: total.toString(), currency: PATH_USD, recipient: PRIMARY, methodDetails: { chainId: 42431, ...(splits.length ? { splits } : {}), ...(feePayer === undefined ? {} : { feePayer }) } },
    },
  };
}

const approved = mppOffer(2_000_000n, [{ amount: '1', recipient: SECOND }, { amount: '5', recipient: THIRD }]);

describe('sameOffer', () => {
  test('behavior: the same splits and the same total may be signed', () => {
    expect(sameOffer(mppOffer(2_000_000n, [{ amount: '1', recipient: SECOND }, { amount: '5', recipient: THIRD }]), approved)).toBe(true);
    // Recipients compared without regard to the address's case.
    expect(sameOffer(mppOffer(2_000_000n, [{ amount: '1', recipient: SECOND.toLowerCase() as Address }, { amount: '5', recipient: THIRD }]), approved)).toBe(true);
  });

  test('error: the same splits with a lower total move the primary recipient\'s share', () => {
    expect(sameOffer(mppOffer(1_000_000n, [{ amount: '1', recipient: SECOND }, { amount: '5', recipient: THIRD }]), approved)).toBe(false);
  });

  test('behavior: without splits, the same or a lower total may be signed, a higher one not', () => {
    const single = mppOffer(2_000_000n, []);
    expect([1_000_000n, 2_000_000n, 2_000_001n].map((t) => sameOffer(mppOffer(t, []), single))).toEqual([true, true, false]);
  });

  test('error: the fee payer changed: a paywall that paid the network fee at approval and no longer does, or the other way', () => {
    expect(sameOffer(mppOffer(2_000_000n, [], false), mppOffer(2_000_000n, [], true))).toBe(false);
    expect(sameOffer(mppOffer(2_000_000n, [], true), mppOffer(2_000_000n, []))).toBe(false);
    expect(sameOffer(mppOffer(2_000_000n, [], false), mppOffer(2_000_000n, []))).toBe(true);
  });

  test('error: a split amount moved between recipients with the total and the recipients kept', () => {
    expect(sameOffer(mppOffer(2_000_000n, [{ amount: '1999990', recipient: SECOND }, { amount: '5', recipient: THIRD }]), approved)).toBe(false);
  });

  test('error: the same splits in another order, a split added or a split dropped', () => {
    expect(sameOffer(mppOffer(2_000_000n, [{ amount: '5', recipient: THIRD }, { amount: '1', recipient: SECOND }]), approved)).toBe(false);
    expect(sameOffer(mppOffer(2_000_000n, [{ amount: '1', recipient: SECOND }]), approved)).toBe(false);
    expect(sameOffer(mppOffer(2_000_000n, [{ amount: '1', recipient: SECOND }, { amount: '5', recipient: THIRD }, { amount: '1', recipient: THIRD }]), approved)).toBe(false);
    expect(sameOffer(mppOffer(2_000_000n, []), approved)).toBe(false);
  });

  test('error: the amounts swapped between two splits', () => {
    expect(sameOffer(mppOffer(2_000_000n, [{ amount: '5', recipient: SECOND }, { amount: '1', recipient: THIRD }]), approved)).toBe(false);
  });
});

describe('offerPayees', () => {
  test('behavior: the recipient gets the total less the splits, listed first, then each split in order', () => {
    expect(offerPayees(approved)).toEqual([
      { recipient: PRIMARY, amountAtomic: 1_999_994n, amountMicros: 1_999_994n },
      { recipient: SECOND.toLowerCase(), amountAtomic: 1n, amountMicros: 1n },
      { recipient: THIRD.toLowerCase(), amountAtomic: 5n, amountMicros: 5n },
    ]);
    expect(offerPayees(mppOffer(10_000n, []))).toEqual([{ recipient: PRIMARY, amountAtomic: 10_000n, amountMicros: 10_000n }]);
  });
});
