import type pg from 'pg';
import { holdsCap } from '../../domain/transactionState.js';
import { databaseUnavailable, isRetryable, isUnavailable } from './errors.js';

/**
 * Work that must happen once per cluster, not once per replica, when several paypolicy processes
 * share one PostgreSQL database: the approval-expiry sweep, the repair of rows a dead replica left
 * in `signing`, the background submitter and tracker of raw transactions, the first-start bootstrap.
 *
 * Each job is guarded by a session advisory lock of its own (pg_try_advisory_lock on a connection
 * held for the job's duration): a replica that finds the lock taken skips the run, because another
 * replica is doing it right now. The lock belongs to the database session, so a replica killed
 * mid-job (kill -9, a lost network) gives it back when PostgreSQL notices the session is gone; a
 * job is never stuck behind a dead holder. Periodic jobs also keep their last start time in
 * `settings` (`cluster_job:<name>`), read and written under the lock with the database's clock, so
 * N replicas with the same period start the job about once per period, not N times.
 */

/** Lock keys live in their own namespace ("job:" + name), apart from the store's hot-spot keys ("cap:", "nonce:"). */
const JOB_LOCK = 'SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS ok';
const JOB_UNLOCK = 'SELECT pg_advisory_unlock(hashtextextended($1, 0))';
const WAIT_LOCK = 'SELECT pg_advisory_lock(hashtextextended($1, 0))';
const DB_NOW_MS = `(extract(epoch FROM clock_timestamp()) * 1000)::bigint`;

export type ClusterJobs = {
  /** Runs `fn` unless another replica runs the same job now; undefined when skipped. */
  once<T>(job: string, fn: () => Promise<T>): Promise<T | undefined>;
  /** Like once(), and also skipped when any replica started the job less than `periodMs` ago. */
  oncePer<T>(job: string, periodMs: number, fn: () => Promise<T>): Promise<T | undefined>;
  /** Runs `fn` holding the job's lock, waiting for another holder to finish first (bootstrap). */
  exclusive<T>(job: string, fn: () => Promise<T>): Promise<T>;
};

export function createClusterJobs(pool: pg.Pool): ClusterJobs {
  async function connect(): Promise<pg.PoolClient> {
    try {
      return await pool.connect();
    } catch (err) {
      throw databaseUnavailable(err);
    }
  }
  async function withLock<T>(job: string, wait: boolean, fn: (client: pg.PoolClient) => Promise<T>): Promise<{ ran: true; value: T } | { ran: false }> {
    const client = await connect();
    const key = `job:${job}`;
    let broken = false;
    const onError = () => {
      broken = true;
    };
    client.on('error', onError);
    try {
      if (wait) {
        await client.query(WAIT_LOCK, [key]);
      } else {
        const { rows } = await client.query<{ ok: boolean }>(JOB_LOCK, [key]);
        if (!rows[0]?.ok) return { ran: false };
      }
      try {
        return { ran: true, value: await fn(client) };
      } finally {
        try {
          await client.query(JOB_UNLOCK, [key]);
        } catch {
          // The session ends below (the connection is discarded), and its lock with it.
          broken = true;
        }
      }
    } catch (err) {
      if (isUnavailable(err)) broken = true;
      throw isUnavailable(err) ? databaseUnavailable(err) : err;
    } finally {
      client.removeListener('error', onError);
      client.release(broken ? true : undefined);
    }
  }
  return {
    async once(job, fn) {
      const r = await withLock(job, false, () => fn());
      return r.ran ? r.value : undefined;
    },
    async oncePer(job, periodMs, fn) {
      const r = await withLock(job, false, async (client) => {
        const setting = `cluster_job:${job}`;
        const { rows } = await client.query<{ due: boolean; now: bigint | string }>(
          `SELECT COALESCE((SELECT value::bigint FROM settings WHERE key = $1), 0) <= ${DB_NOW_MS} - $2 AS due, ${DB_NOW_MS} AS now`,
          [setting, Math.floor(periodMs * 0.9)],
        );
        if (!rows[0]?.due) return { ran: false as const };
        // Marked before the run: a run that fails is not retried by the next replica at once.
        await client.query('INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value', [setting, String(rows[0].now)]);
        return { ran: true as const, value: await fn() };
      });
      return r.ran && r.value.ran ? r.value.value : undefined;
    },
    async exclusive(job, fn) {
      const r = await withLock(job, true, () => fn());
      if (!r.ran) throw new Error('unreachable: a waiting lock always runs');
      return r.value;
    },
  };
}

/** Rows in `signing` for longer than this belong to no live replica (default; PAYPOLICY_STALE_SIGNING_MS). */
export const DEFAULT_STALE_SIGNING_MS = 60_000;

const APPROVED_ONLY = `approval_id IN (SELECT id FROM approvals WHERE status = 'approved')`;
const DECISION_TIME = `COALESCE((SELECT a.decided_at FROM approvals a WHERE a.id = transactions.approval_id), cap_at)`;
const STALE = `status = 'signing' AND updated_at < $1`;

/**
 * The start-up repair of a single process (app/submission/maintenance.ts repairInterrupted), made safe while
 * other replicas are signing: only rows in `signing` last moved before `cutoff` are touched, older
 * than any signature in progress can be (a payment waits at most --max-queue-ms for a signing
 * thread, and signs in milliseconds). Such a row was left by a replica that died (or lost the
 * database) between reserving and settling; no signature of it was answered, since a row leaves
 * `signing` only through the settling commit. As on a restart: a row whose approval is approved
 * goes back to `approved` (its nonce handed back, collection window from the decision) and the
 * agent's repeat collects it; any other is `failed`, releasing its cap hold and nonce. Should the
 * replica still be alive after all, its settling write finds the row no longer in `signing`, and
 * the state machine refuses `failed` → `signed`: the signature is never answered.
 * One SERIALIZABLE transaction, retried on a serialization failure.
 */
export async function repairStaleSigning(pool: pg.Pool, cutoff: number, now: number): Promise<{ reapproved: number; failed: number }> {
  for (let attempt = 1; ; attempt++) {
    let client: pg.PoolClient;
    try {
      client = await pool.connect();
    } catch (err) {
      throw databaseUnavailable(err);
    }
    let broken = false;
    try {
      await client.query('BEGIN ISOLATION LEVEL SERIALIZABLE');
      await client.query(`INSERT INTO released_nonces (org_id, chain_id, nonce)
        SELECT org_id, chain_id, nonce FROM transactions WHERE ${STALE} AND nonce IS NOT NULL ON CONFLICT DO NOTHING`, [cutoff]);
      const reapproved = (await client.query(`UPDATE transactions SET status = 'approved', holds_cap = ${holdsCap('approved') ? 1 : 0},
        nonce = NULL, cap_at = ${DECISION_TIME}, updated_at = $2 WHERE ${STALE} AND ${APPROVED_ONLY}`, [cutoff, now])).rowCount ?? 0;
      const failed = (await client.query(`UPDATE transactions SET status = 'failed', holds_cap = ${holdsCap('failed') ? 1 : 0},
        reason = 'Interrupted while signing', updated_at = $2 WHERE ${STALE}`, [cutoff, now])).rowCount ?? 0;
      const done = await client.query('COMMIT');
      if (done.command !== 'COMMIT') throw new Error('the stale-signing repair was rolled back at COMMIT');
      return { reapproved, failed };
    } catch (err) {
      if (isUnavailable(err)) {
        broken = true;
        throw databaseUnavailable(err);
      }
      await client.query('ROLLBACK').catch(() => {
        broken = true;
      });
      if (!isRetryable(err) || attempt >= 20) throw err;
    } finally {
      client.release(broken ? true : undefined);
    }
    await new Promise((r) => setTimeout(r, Math.random() * 20 * attempt));
  }
}
