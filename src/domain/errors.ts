/**
 * The one error type of paypolicy. Domain and application code throws only DomainError; each
 * transport maps `kind` once (rpc/errors.ts to Connect codes, rest/errors.ts to HTTP statuses).
 * `shortMessage` is safe to send to callers; `cause` and `meta` are for logs only.
 */
export type ErrorKind =
  | 'invalid_argument'
  | 'unauthenticated'
  | 'permission_denied'
  | 'not_found'
  | 'missing_agent'
  | 'conflict'
  | 'failed_precondition'
  | 'treasury_unavailable'
  | 'payload_too_large'
  | 'unimplemented'
  | 'overloaded'
  | 'internal';

/**
 * The store's code for a payment insert that lost to another writer's insert of the same
 * (agent, Idempotency-Key), as store/pg/errors.ts raises it: the whole write rolled back, and the caller answers the winner's row.
 * Only PostgreSQL replicas race here; one SQLite process never does.
 */
export const IDEMPOTENCY_KEY_TAKEN = 'idempotency_key_taken';

/** Seconds a caller refused with `overloaded` is told to wait (REST `Retry-After`, RPC `retry-after` metadata). */
export const OVERLOADED_RETRY_AFTER_SECONDS = 1;

export type DomainErrorOptions = {
  /** Machine-readable snake_case code sent to callers, e.g. `agent_not_found`. */
  code?: string;
  /** Facts for logs; never sent to callers. */
  meta?: Record<string, unknown>;
  cause?: unknown;
};

export class DomainError extends Error {
  override name = 'DomainError';
  readonly kind: ErrorKind;
  readonly shortMessage: string;
  readonly code: string;
  readonly meta: Record<string, unknown> | undefined;

  constructor(kind: ErrorKind, shortMessage: string, options: DomainErrorOptions = {}) {
    super(shortMessage, options.cause === undefined ? undefined : { cause: options.cause });
    this.kind = kind;
    this.shortMessage = shortMessage;
    this.code = options.code ?? kind;
    this.meta = options.meta;
  }
}

/** Shorthand for the most common error: a request field that is missing or malformed. */
export function invalidArgument(shortMessage: string, code = 'invalid_argument'): DomainError {
  return new DomainError('invalid_argument', shortMessage, { code });
}

/** Wraps anything thrown into a DomainError; unknown errors become `internal` with no detail. */
export function toDomainError(err: unknown): DomainError {
  if (err instanceof DomainError) return err;
  return new DomainError('internal', 'Internal error', { cause: err });
}
