import type pg from 'pg';

/**
 * Chain conflicts shared by the replicas of one database. A conflict is an (organization, chain)
 * where a transaction paypolicy did not sign used one of the treasury's nonces: another signer holds
 * the key, and nothing more is signed or submitted there as a raw transaction (app/submission/submit.ts,
 * deps.chainConflicts) until an operator stops that signer and restarts paypolicy. On SQLite the
 * one process that saw it refuses; with replicas, the one that saw it (the tracker runs on one
 * replica at a time) must make every other replica refuse too.
 *
 * Each replica publishes the conflicts it detects as settings rows `chain_conflict:<pair>` and adopts
 * every row it reads, once a second. A replica's start clears the rows (the operator's restart after
 * stopping the other signer, as on SQLite); a replica drops a conflict it had published or adopted
 * once its row is gone. The lag is one sync period; the refusal it spreads is what matters, not its
 * first second (the replica that saw the conflict refuses at once).
 */

const PREFIX = 'chain_conflict:';
/** A pair key holds a NUL separator (app/submission/submit.ts pairKey), which TEXT cannot store: base64url in the row key. */
const rowKey = (pair: string) => PREFIX + Buffer.from(pair, 'utf8').toString('base64url');
const pairOf = (key: string) => Buffer.from(key.slice(PREFIX.length), 'base64url').toString('utf8');

export function createConflictSync(pool: pg.Pool, conflicts: Map<string, string>, onChange?: (pair: string, reason: string | undefined) => void) {
  /** Pairs this replica knows the database holds (published or adopted). */
  const shared = new Set<string>();
  async function sync(): Promise<void> {
    for (const [pair, reason] of conflicts) {
      if (shared.has(pair)) continue;
      await pool.query('INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING', [rowKey(pair), reason]);
      shared.add(pair);
    }
    const { rows } = await pool.query<{ key: string; value: string }>("SELECT key, value FROM settings WHERE key LIKE 'chain\\_conflict:%'");
    const inDb = new Map(rows.map((r) => [pairOf(r.key), r.value]));
    for (const [pair, reason] of inDb) {
      shared.add(pair);
      if (!conflicts.has(pair)) {
        conflicts.set(pair, reason);
        onChange?.(pair, reason);
      }
    }
    for (const pair of [...shared]) {
      if (inDb.has(pair)) continue;
      shared.delete(pair);
      if (conflicts.delete(pair)) onChange?.(pair, undefined);
    }
  }
  return {
    sync,
    /** At a replica's start: the operator restarted paypolicy, so every recorded conflict is cleared. */
    async clear(): Promise<void> {
      await pool.query("DELETE FROM settings WHERE key LIKE 'chain\\_conflict:%'");
    },
  };
}
