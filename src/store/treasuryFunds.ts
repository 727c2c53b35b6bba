import type { Db } from './db.js';
import type { TreasuryFundsRepository } from './port.js';
import type { Synchronous } from './syncTables.js';

/**
 * The ledger's side of a treasury's funds on one chain: the raw transactions it has signed (or is
 * signing) that a given block has not mined yet, i.e. those whose nonce is at or above the count
 * of the treasury's transactions that block mined. Nonces are gap-free and mined in order, so
 * exactly these are still to be paid out of the balances read at that block; a mined one
 * (succeeded or reverted) has already been paid for.
 */
export function createTreasuryFundsStore(db: Db): Synchronous<TreasuryFundsRepository> {
  const unmined = db.prepare(`SELECT amount_micros, request FROM transactions
    WHERE org_id = ? AND chain_id = ? AND type = 'raw_transaction' AND nonce >= ? AND status IN ('signing', 'signed')`).safeIntegers(true);
  return {
    /** Raw transactions of (treasury, chain) holding a nonce ≥ `minedNonce` and signed or being signed: amount and stored request. */
    unminedRaw(orgId: string, chainId: number, minedNonce: number): Array<{ amountMicros: bigint; request: string }> {
      return (unmined.all(orgId, chainId, minedNonce) as Array<{ amount_micros: bigint; request: string }>)
        .map((r) => ({ amountMicros: BigInt(r.amount_micros), request: r.request }));
    },
  };
}
export type TreasuryFundsStore = ReturnType<typeof createTreasuryFundsStore>;
