/**
 * Machine codes a PaypolicyError can carry: the server's wire codes (README "API": `invalid_argument`,
 * `agent_not_found`, `idempotency_key_reused`, `overloaded`, …, passed through as sent) plus the
 * client's own, listed here.
 */
export type ClientErrorCode =
  /** 403 from /api/sign: the policy refused the payment (`reason` says why). */
  | 'policy_denied'
  /** No HTTP answer: connection refused or reset, DNS, TLS (after the automatic retries). */
  | 'network_error'
  /** waitForApproval ran out of time while the approval was still pending. */
  | 'approval_timeout'
  /** The paying fetch was asked to pay more than `maxAmountUsd`; nothing was signed. */
  | 'max_amount_exceeded'
  /** The paying fetch refused to follow a redirect that would carry a payment to another origin. */
  | 'cross_origin_redirect'
  /** A redirect the paying fetch cannot follow safely (unreadable in a browser, or too many). */
  | 'redirect_refused'
  /** The paying fetch cannot reproduce this request for the server's probe (methods other than GET and POST). */
  | 'unsupported_method'
  /** The MCP server refused to fetch a URL: not https, or a loopback, private or local-only host (any redirect hop). */
  | 'url_not_allowed'
  /** The paywall answered 402 again to the signed payment. */
  | 'payment_rejected'
  /** An approval is pending and the caller asked not to wait for it. */
  | 'approval_required'
  /** The server or paywall answered something this client cannot read. */
  | 'unexpected_response'
  /** 404 with an empty body (approval status of an unknown or foreign id). */
  | 'not_found';

/** Either a code the server sent or one of the client's own. */
export type PaypolicyErrorCode = ClientErrorCode | (string & {});

export type PaypolicyErrorOptions = {
  code: PaypolicyErrorCode;
  /** HTTP status of the answer, or 0 when there was none (network, client-side checks). */
  status: number;
  /** True when repeating the same call later may succeed (network, 503 overloaded, 409 in_progress, approval timeout). */
  retryable?: boolean;
  /** Policy reason of a denial (the wire `reason`). */
  reason?: string;
  transactionId?: string;
  approvalRequestId?: string;
  /** Extra facts for display, never secrets. */
  details?: Record<string, unknown>;
  cause?: unknown;
};

/**
 * The one error class of this package. `code` is the wire code (or a client code), `status` the
 * HTTP status (0 without an answer), `retryable` whether trying again later can help, and
 * `shortMessage` a one-line text fit for a log or a model.
 */
export class PaypolicyError extends Error {
  override name = 'PaypolicyError';
  readonly code: PaypolicyErrorCode;
  readonly status: number;
  readonly retryable: boolean;
  readonly shortMessage: string;
  readonly reason: string | undefined;
  readonly transactionId: string | undefined;
  readonly approvalRequestId: string | undefined;
  readonly details: Record<string, unknown> | undefined;

  constructor(shortMessage: string, options: PaypolicyErrorOptions) {
    super(shortMessage, options.cause === undefined ? undefined : { cause: options.cause });
    this.shortMessage = shortMessage;
    this.code = options.code;
    this.status = options.status;
    this.retryable = options.retryable ?? false;
    this.reason = options.reason;
    this.transactionId = options.transactionId;
    this.approvalRequestId = options.approvalRequestId;
    this.details = options.details;
  }

  /** A plain object for JSON output (tool results, logs): no stack, no cause. */
  toJSON(): Record<string, unknown> {
    const out: Record<string, unknown> = { error: this.shortMessage, code: this.code, status: this.status, retryable: this.retryable };
    if (this.reason !== undefined) out.reason = this.reason;
    if (this.transactionId !== undefined) out.transaction_id = this.transactionId;
    if (this.approvalRequestId !== undefined) out.approval_request_id = this.approvalRequestId;
    if (this.details !== undefined) out.details = this.details;
    return out;
  }
}

/** Whether an error is this package's error (also across duplicated copies of the package). */
export function isPaypolicyError(err: unknown): err is PaypolicyError {
  return err instanceof PaypolicyError || (err instanceof Error && err.name === 'PaypolicyError' && 'code' in err && 'status' in err);
}
