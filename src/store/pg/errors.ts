import { DomainError } from '../../domain/errors.js';

/** SQLSTATEs after which the whole transaction may simply run again: serialization_failure, deadlock_detected. */
const RETRYABLE = new Set(['40001', '40P01']);

/** The transaction lost a race with a concurrent one and was rolled back whole; running it again is safe. */
export function isRetryable(err: unknown): boolean {
  return RETRYABLE.has(String((err as { code?: unknown } | undefined)?.code));
}

/** Node socket errors meaning the server cannot be reached or the connection died. */
const SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'ECONNABORTED']);

/** node-postgres' own messages for a connection that timed out or closed under it. */
const DRIVER_MESSAGES = [
  'timeout exceeded when trying to connect',
  'Connection terminated',
  'Query read timeout',
  'Client has encountered a connection error and is not queryable',
  'Client was closed and is not queryable',
  'Cannot use a pool after calling end on the pool',
];

/**
 * The database did not answer, or not in time: unreachable, refusing connections, shutting
 * down, out of connection slots, or a statement cut off by statement_timeout
 * (SQLSTATE class 08, 57P01-57P03, 53300, 57014).
 */
export function isUnavailable(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | undefined;
  const code = typeof e?.code === 'string' ? e.code : '';
  if (SOCKET_CODES.has(code)) return true;
  if (code.startsWith('08') || code === '57P01' || code === '57P02' || code === '57P03' || code === '53300' || code === '57014') return true;
  const message = typeof e?.message === 'string' ? e.message : '';
  return DRIVER_MESSAGES.some((m) => message.includes(m));
}

/**
 * 503 `database_unavailable` (with Retry-After): the request failed fast instead of hanging. When
 * the connection broke during COMMIT the outcome is unknown, which is why callers retry with the
 * same Idempotency-Key: the repeat answers whatever did commit.
 */
export function databaseUnavailable(err: unknown, meta?: Record<string, unknown>): DomainError {
  return new DomainError('overloaded', 'Database unavailable; retry shortly', { code: 'database_unavailable', cause: err, meta });
}

/** 503 `database_busy`: a write kept losing serialization races after every retry; nothing was written. */
export function databaseBusy(err: unknown, attempts: number): DomainError {
  return new DomainError('overloaded', 'Database busy; nothing was written, retry shortly', { code: 'database_busy', cause: err, meta: { attempts } });
}

/**
 * A payment's insert lost to another replica's insert of the same (agent, Idempotency-Key): the
 * unique index refused it (23505 on transactions_idempotency) and the whole write rolled back.
 */
function isIdempotencyKeyTaken(err: unknown): boolean {
  const e = err as { code?: unknown; constraint?: unknown } | undefined;
  return e?.code === '23505' && e.constraint === 'transactions_idempotency';
}

/** The driver's error as the domain's: a lost Idempotency-Key race is a conflict the caller resolves; anything else as thrown. */
export function domainErrorOf(err: unknown, cause: unknown): unknown {
  if (!isIdempotencyKeyTaken(cause) && !isIdempotencyKeyTaken(err)) return err;
  // Written as a literal (IDEMPOTENCY_KEY_TAKEN's value) so that docs:errors, which reads literals, lists it.
  return new DomainError('conflict', 'Idempotency-Key already used by another request', { code: 'idempotency_key_taken', cause });
}
