import { getAddress, recoverTypedDataAddress, type Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { describe, expect, test } from 'vitest';
import { offerToJson } from '../../src/app/payments/paywall.js';
import { preparePayment, type ParsedStored, type StoredPaywallRequest } from '../../src/app/payments/signatures.js';
import type { StoredRequest } from '../../src/app/payments/signatures.js';
import type { Offer } from '../../src/paywalls/offer.js';
import { assertBoundedValidity } from '../../src/signing/boundedValidity.js';
import { loadSigningKey, runSignJob } from '../../src/signing/signJob.js';
import type { SignJob } from '../../src/signing/signJobs.js';
import { startLedgerClock, type ClockSources, type LedgerClock } from '../../src/store/ledgerClock.js';
import { TRANSFER_WITH_AUTHORIZATION_TYPES } from '../helpers/payments.js';

const DAY_MS = 86_400_000;
const WINDOW_S = 86_400;
/** Real time in the tests below: what a chain or a facilitator compares validity ends with. */
const REAL_MS = 1_800_000_000_000;
const REAL_S = REAL_MS / 1000;
const RECIPIENT = getAddress('0x742d35cc6634c0532925a3b844bc9e7595f8fe00');
const privateKey = generatePrivateKey();
const treasury = privateKeyToAccount(privateKey).address;

/** A machine whose wall clock, monotonic clock and boot id the test sets; the wall clock may be wrong. */
function machine(wall: number) {
  const m = { wall, mono: 1000, boot: 'boot-1' };
  const src: ClockSources = { wallMs: () => m.wall, monotonicMs: () => m.mono, bootId: () => m.boot };
  return { m, src };
}

/** The four ways a ledger clock and a wall clock end up apart, and the one where they agree. */
function scenarios(): Array<[string, LedgerClock]> {
  // Started with the wall clock a day ahead, then NTP stepped it back 2 s later.
  const corrected = machine(REAL_MS - 2_000 + DAY_MS);
  const afterCorrection = startLedgerClock(undefined, 0, corrected.src);
  corrected.m.mono += 2_000;
  corrected.m.wall = REAL_MS;
  // Restarted in the same boot after that: the stored anchor carries the day on.
  const restarted = startLedgerClock(afterCorrection.anchor, 0, corrected.src);
  // Started right, then the wall clock was set a day ahead.
  const ahead = machine(REAL_MS);
  const wallAhead = startLedgerClock(undefined, 0, ahead.src);
  ahead.m.wall += DAY_MS;
  // After a reboot with the clock a day behind the ledger's newest row, the ledger floor holds it ahead.
  const floored = startLedgerClock(undefined, REAL_MS + DAY_MS, machine(REAL_MS).src);
  return [
    ['ledger clock a day ahead (wall clock corrected after start)', afterCorrection],
    ['ledger clock a day ahead (restart in the same boot after the correction)', restarted],
    ['wall clock a day ahead (set forward while running)', wallAhead],
    ['ledger clock a day ahead (floored by the newest ledger time)', floored],
  ];
}

const agreeing = (): LedgerClock => startLedgerClock(undefined, 0, machine(REAL_MS).src);

const direct = (type: 'eip3009' | 'permit2'): StoredRequest => ({
  type, chainId: 8453, recipient: RECIPIENT, amountMicros: '10000', payload: { kind: 'authorization', validForSeconds: WINDOW_S },
});

function paywall(type: 'x402' | 'mpp', offer: Offer): StoredPaywallRequest {
  return { type, chainId: offer.chainId, recipient: offer.payTo, amountMicros: offer.amountMicros.toString(), payload: { kind: 'paywall', resourceUrl: 'https://paywall.example/paid', method: 'GET' }, offer: offerToJson(offer) };
}

/** An x402 v1 offer whose paywall accepts the longest window (its own timeout a year). */
const USDC_BASE = getAddress('0x833589fcd6edb6e08f4c7c32d4f71b54bda02913');
const x402Offer: Offer = {
  rail: 'x402', chainId: 8453, network: 'base', scheme: 'exact', realm: null, payTo: RECIPIENT,
  asset: USDC_BASE, amountAtomic: 10_000n, decimals: 6, amountMicros: 10_000n,
  x402: {
    version: 1, accepted: { scheme: 'exact', network: 'base', maxAmountRequired: '10000', payTo: RECIPIENT, asset: USDC_BASE, maxTimeoutSeconds: 365 * WINDOW_S },
    resource: undefined, domainName: 'USD Coin', domainVersion: '2', maxTimeoutSeconds: 365 * WINDOW_S,
  },
};

/** An MPP offer whose challenge expires an hour from real time, longer than a Tempo window. */
const mppOffer: Offer = {
  rail: 'mpp', chainId: 42431, network: 'tempo-testnet', scheme: null, realm: 'paywall.example', payTo: RECIPIENT,
  asset: '0x20c0000000000000000000000000000000000000', amountAtomic: 10_000n, decimals: 6, amountMicros: 10_000n,
  mpp: {
    challenge: { id: 'c-1', realm: 'paywall.example', method: 'tempo', intent: 'charge', request: 'e30', expires: new Date(REAL_MS + 3_600_000).toISOString() },
    request: { amount: '10000', currency: '0x20c0000000000000000000000000000000000000', recipient: RECIPIENT, methodDetails: { chainId: 42431 } },
  },
};

/** Each kind of job with a validity window, and the longest window it may have (s). */
const KINDS: Array<[string, ParsedStored, number]> = [
  ['eip3009 validBefore', direct('eip3009'), WINDOW_S],
  ['permit2 deadline', direct('permit2'), WINDOW_S],
  ['x402 validBefore (maxTimeoutSeconds, clamped)', paywall('x402', x402Offer), WINDOW_S],
  ['tempo validBefore', paywall('mpp', mppOffer), 25],
];

/** The job's validity end and, where it has one, its start (Unix seconds). */
function bounds(job: SignJob): { end: number; start?: number } {
  switch (job.kind) {
    case 'eip3009':
      return { end: Number(job.message.validBefore), start: Number(job.message.validAfter) };
    case 'permit2':
      return { end: Number(job.message.deadline), start: Number(job.message.witness.validAfter) };
    case 'tempo':
      return { end: job.tx.validBefore };
    default:
      throw new Error(`no validity window on ${job.kind}`);
  }
}

describe('LedgerClock.validityNow', () => {
  test.each(scenarios())('behavior: %s: the earlier clock, which is real time', (_name, clock) => {
    expect(Math.abs(clock.skewMs())).toBeGreaterThanOrEqual(DAY_MS - 2_000);
    expect(clock.validityNow()).toBeLessThanOrEqual(REAL_MS);
  });

  test('behavior: when the clocks agree it is the ledger clock itself', () => {
    const clock = agreeing();
    expect(clock.validityNow()).toBe(clock.now());
  });
});

describe('preparePayment', () => {
  for (const [scenario, clock] of scenarios()) {
    test.each(KINDS)(`behavior: ${scenario}: %s ends within the window of real time`, (_kind, stored, window) => {
      const { job } = preparePayment({ validityNow: clock.validityNow }, 'org', treasury, stored);
      const { end, start } = bounds(job);
      expect(end).toBeLessThanOrEqual(REAL_S + window);
      // A start never lies after real now either: the payment is usable at once.
      if (start !== undefined) expect(start).toBeLessThanOrEqual(REAL_S);
    });
  }

  test.each(KINDS)('behavior: clocks agreeing: %s gets its whole window, from now', (_kind, stored, window) => {
    const { job } = preparePayment({ validityNow: agreeing().validityNow }, 'org', treasury, stored);
    expect(bounds(job).end).toBe(REAL_S + window);
  });

  test('behavior: the signed eip3009 carries the bounded validBefore (signer recovered from the signature)', async () => {
    const [, clock] = scenarios()[0]!;
    const { job } = preparePayment({ validityNow: clock.validityNow }, 'org', treasury, direct('eip3009'));
    const out = runSignJob(loadSigningKey(privateKey), job);
    if (job.kind !== 'eip3009' || !('signature' in out)) throw new Error('expected an eip3009 signature');
    const signer: Address = await recoverTypedDataAddress({
      domain: job.domain, types: TRANSFER_WITH_AUTHORIZATION_TYPES, primaryType: 'TransferWithAuthorization', message: job.message, signature: out.signature,
    });
    expect(signer).toBe(treasury);
    expect(job.message.validBefore).toBe(BigInt(REAL_S + WINDOW_S));
  });
});

describe('assertBoundedValidity', () => {
  test('error: internal — a window measured from a ledger clock a day ahead is refused when checked on the validity clock', () => {
    const [, clock] = scenarios()[0]!;
    const { job } = preparePayment({ validityNow: clock.now }, 'org', treasury, direct('eip3009'));
    expect(() => assertBoundedValidity(job, Math.floor(clock.validityNow() / 1000))).toThrow(/refusing to sign: validity ends \d+ s from now, beyond 86400 s/);
  });
});
