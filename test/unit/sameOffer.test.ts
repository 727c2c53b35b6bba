import { describe, expect, test } from 'vitest';
import type { Address } from 'viem';
import { offerPayees, sameOffer } from '../../src/app/paywall.js';
import type { Offer } from '../../src/probe/offer.js';

/**
 * sameOffer decides whether an approved paywall payment may be signed against the challenge the
 * paywall answers with at collection: same rail, chain, token and recipient, no more in total,
 * and exactly the approved split vector (recipient and amount of every split, in order).
 */

const PRIMARY: Address = '0x1111111111111111111111111111111111111111';
const SECOND: Address = '0x3333333333333333333333333333333333333333';
const THIRD: Address = '0x4444444444444444444444444444444444444444';
const PATH_USD: Address = '0x20C0000000000000000000000000000000000000';

/** A Tempo testnet MPP offer of `total` atomic units of a 6-decimal token to PRIMARY with `splits`. */
function mppOffer(total: bigint, splits: Array<{ amount: string; recipient: Address }>): Offer {
  return {
    rail: 'mpp', chainId: 42431, network: 'tempo-testnet', scheme: null, realm: 'r', payTo: PRIMARY, asset: PATH_USD,
    amountAtomic: total, decimals: 6, amountMicros: total,
    mpp: {
      challenge: { id: 'c', realm: 'r', method: 'tempo', intent: 'charge', request: '' },
      request: { amount: total.toString(), currency: PATH_USD, recipient: PRIMARY, methodDetails: { chainId: 42431, ...(splits.length ? { splits } : {}) } },
    },
  };
}

const approved = mppOffer(2_000_000n, [{ amount: '1', recipient: SECOND }, { amount: '5', recipient: THIRD }]);

describe('sameOffer', () => {
  test('behavior: the same splits, and the same or a lower total, may be signed', () => {
    expect(sameOffer(mppOffer(2_000_000n, [{ amount: '1', recipient: SECOND }, { amount: '5', recipient: THIRD }]), approved)).toBe(true);
    // Recipients compared without regard to the address's case.
    expect(sameOffer(mppOffer(1_000_000n, [{ amount: '1', recipient: SECOND.toLowerCase() as Address }, { amount: '5', recipient: THIRD }]), approved)).toBe(true);
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
