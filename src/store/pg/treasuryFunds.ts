import { statement, type Sql } from './sql.js';
import type { TreasuryFundsRepository } from '../port.js';

const UNMINED = statement('funds.unmined', `SELECT amount_micros, request FROM transactions
  WHERE org_id = $1 AND chain_id = $2 AND type = 'raw_transaction' AND nonce >= $3 AND status IN ('signing', 'signed')`);

/** Raw transactions of a treasury on one chain that a given block has not mined (PostgreSQL twin of ../treasuryFunds.ts). */
export function createPgTreasuryFundsStore(sql: Sql): TreasuryFundsRepository {
  return {
    async unminedRaw(orgId, chainId, minedNonce) {
      return (await sql.rows<{ amount_micros: bigint; request: string }>(UNMINED, [orgId, chainId, minedNonce]))
        .map((r) => ({ amountMicros: BigInt(r.amount_micros), request: r.request }));
    },
  };
}
