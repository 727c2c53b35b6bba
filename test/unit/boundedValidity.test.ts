import { describe, expect, test } from 'vitest';
import { assertBoundedValidity } from '../../src/signing/boundedValidity.js';
import type { SignJob } from '../../src/signing/signJobs.js';

const NOW = 1_700_000_000;
const DAY = 86_400;
const A = '0x209693Bc6afc0C5328bA36FaF03C514EF312287C' as const;

/** One job of each kind whose validity ends `after` seconds from NOW. */
function jobs(after: number): Array<[string, SignJob]> {
  const until = NOW + after;
  return [
    ['eip3009 validBefore', {
      kind: 'eip3009', orgId: 'o', domain: { name: 'USDC', version: '2', chainId: 8453, verifyingContract: A },
      message: { from: A, to: A, value: 1n, validAfter: 0n, validBefore: BigInt(until), nonce: `0x${'00'.repeat(32)}` },
    }],
    ['permit2 deadline', {
      kind: 'permit2', orgId: 'o', chainId: 8453, permit2: A,
      message: { permitted: { token: A, amount: 1n }, spender: A, nonce: 1n, deadline: BigInt(until), witness: { to: A, validAfter: 0n } },
    }],
    ['tempo validBefore', {
      kind: 'tempo', orgId: 'o',
      tx: { chainId: 4217, calls: [], nonceKey: 0n, nonce: 0n, validBefore: until, gas: 1n, maxFeePerGas: 1n, maxPriorityFeePerGas: 0n, sponsored: false },
    }],
  ];
}

describe('assertBoundedValidity', () => {
  test.each(jobs(DAY))('behavior: %s exactly 86,400 s ahead is signed', (_name, job) => {
    expect(() => assertBoundedValidity(job, NOW)).not.toThrow();
  });

  test.each([...jobs(DAY + 1), ...jobs(900_000_000)])('error: internal — %s beyond 86,400 s is refused', (_name, job) => {
    expect(() => assertBoundedValidity(job, NOW)).toThrow(/refusing to sign: validity ends \d+ s from now, beyond 86400 s/);
  });

  test('behavior: a raw transaction has no validity window to bound', () => {
    const job: SignJob = { kind: 'eip1559', orgId: 'o', tx: { chainId: 8453, nonce: 0, to: A, data: '0x', gas: 21_000n, maxFeePerGas: 1n, maxPriorityFeePerGas: 1n } };
    expect(() => assertBoundedValidity(job, NOW)).not.toThrow();
  });
});
