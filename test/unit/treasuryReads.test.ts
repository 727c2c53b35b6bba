import { describe, expect, test } from 'vitest';
import type { AppDeps } from '../../src/app/deps.js';
import { readFundsForSigning } from '../../src/app/payments/funds.js';
import type { TreasuryFunds } from '../../src/chain/balances.js';
import type { ChainRpc } from '../../src/chain/rpc.js';

/**
 * readFundsForSigning: payments that arrive while a balance read for the same treasury and chain
 * is under way share it (a node answering one call at a time would otherwise bound raw payments);
 * nothing is kept once it settles, and a failed read is a reason, not a throw.
 */
const TREASURY = '0x1111111111111111111111111111111111111111';
const FUNDS: TreasuryFunds = { blockNumber: 7n, tokenBalance: 5n, nativeBalanceWei: 9n, minedNonce: 3 };

function node() {
  const calls: Array<{ chainId: number; treasury: string }> = [];
  const pending: Array<{ resolve: (f: TreasuryFunds) => void; reject: (e: Error) => void }> = [];
  const chains = {
    has: (chainId: number) => chainId === 84532 || chainId === 999,
    treasuryFunds: (chainId: number, treasury: string) => {
      calls.push({ chainId, treasury });
      return new Promise<TreasuryFunds>((resolve, reject) => pending.push({ resolve, reject }));
    },
  } as unknown as ChainRpc;
  return { deps: { chains } as AppDeps, calls, pending };
}

describe('readFundsForSigning', () => {
  test('behavior: concurrent reads of one treasury and chain share one node read; a later one reads again', async () => {
    const { deps, calls, pending } = node();
    const reads = Array.from({ length: 5 }, () => readFundsForSigning(deps, 84532, TREASURY));
    expect(calls).toHaveLength(1);
    pending[0]!.resolve(FUNDS);
    for (const r of await Promise.all(reads)) expect(r).toEqual({ ok: true, funds: FUNDS });
    const later = readFundsForSigning(deps, 84532, TREASURY);
    expect(calls).toHaveLength(2);
    pending[1]!.reject(Object.assign(new Error('x'), { shortMessage: 'HTTP request failed.', details: 'fetch failed', message: 'HTTP request failed. URL: http://key@node.example/v3/secret' }));
    expect(await later).toEqual({ ok: false, reason: 'HTTP request failed. fetch failed' });
  });

  test('behavior: another treasury or chain reads on its own; a chain without an endpoint or USDC reads nothing', async () => {
    const { deps, calls } = node();
    void readFundsForSigning(deps, 84532, TREASURY);
    void readFundsForSigning(deps, 84532, '0x2222222222222222222222222222222222222222');
    expect(calls).toHaveLength(2);
    expect(await readFundsForSigning(deps, 8453, TREASURY)).toBeUndefined(); // no endpoint
    expect(await readFundsForSigning(deps, 999, TREASURY)).toBeUndefined(); // no USDC in the token table
    expect(calls).toHaveLength(2);
  });
});
