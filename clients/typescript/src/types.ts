/*
 * Request and response bodies of the paypolicy REST API, field for field as the wire protocol and
 * the README's "API" section write them (snake_case, USD amounts as the server sends them).
 */

/** Payment types /api/sign accepts. `x402` and `mpp` pay a paywalled URL (`payload.resource_url`). */
export type PaymentType = 'eip3009' | 'permit2' | 'raw_transaction' | 'x402' | 'mpp';

/** Body of POST /api/sign. */
export type SignRequest = {
  /** Agent making the payment (prefix `agt_`). */
  agent_id: string;
  /** Default `raw_transaction` on the server. */
  type?: PaymentType;
  /** Default 8453 (Base). */
  chain_id?: number;
  /** Final 0x recipient; required for the direct types, ignored for `x402` and `mpp`. */
  recipient_address?: string;
  /** USD amount (a decimal string keeps it exact); required for the direct types, ignored for `x402` and `mpp`. */
  amount_usd?: number | string;
  /**
   * Type-specific payload; for `x402`/`mpp`: `{ resource_url, method?, max_amount_usd? }`, where
   * `max_amount_usd` makes paypolicy deny (403, nothing signed or held) a live price above it.
   */
  payload?: Record<string, unknown>;
};

/** A header the agent sends to the paywall (x402 `PAYMENT-SIGNATURE`/`X-PAYMENT`, MPP `Authorization`). */
export type PaymentHeader = { name: string; value: string };

/** 200 from POST /api/sign: signed. Type-specific material (`authorization`, `permit2`, …) is kept as sent. */
export type SignedPayment = {
  signature: string | null;
  tx_hash: string | null;
  agent_id: string;
  /** Actual USD cost as a decimal string. */
  cost_usd: string | null;
  transaction_id: string;
  /** True when this answer replays an earlier one (same agent and Idempotency-Key): nothing was charged again. */
  idempotent: boolean;
  type?: PaymentType;
  chain_id?: number;
  recipient_address?: string;
  /** `x402` and `mpp` only. */
  resource_url?: string;
  /** `x402` and `mpp` only: what to send to the paywall. */
  payment_header?: PaymentHeader;
  [field: string]: unknown;
};

/**
 * The policy rule behind a 403 or a 202: `kind` names it (`spend_cap`, `allowlist`,
 * `approval_threshold`, or for a window limit `max_usd`, `max_count`, `max_network_fee_wei`);
 * `limit` and `spent` are in its unit (USD decimal text, payments, wei).
 */
export type PolicyRule = {
  kind: string;
  window: string | null;
  scope: 'agent' | 'organization' | null;
  recipient: string | null;
  limit: string | null;
  spent: string | null;
};

/** 202 from POST /api/sign: a human must decide. */
export type PendingApproval = {
  status: 'pending_approval';
  reason: string;
  transaction_id: string;
  approval_request_id: string;
  rule?: PolicyRule;
};

/** What `sign` returns: signed, or pending with what is needed to wait for it. */
export type SignResult =
  | ({ outcome: 'signed'; idempotencyKey: string } & SignedPayment)
  | ({ outcome: 'pending_approval'; idempotencyKey: string; request: SignRequest } & PendingApproval);

/** Body of a dry run (`dry_run: true`), whatever its status. */
export type DryRunResult = {
  dry_run: true;
  status: 'allowed' | 'pending_approval' | 'denied';
  agent_id: string;
  type: PaymentType;
  chain_id: number;
  recipient_address: string;
  amount_usd: number | string;
  reason?: string;
  approval_threshold_usd?: number | string;
  rule?: PolicyRule;
};

/** Body of POST /api/quote. */
export type QuoteRequest = {
  /** Resource URL to probe. */
  url: string;
  agent_id: string;
  /** `GET` (default) or `POST`. */
  method?: 'GET' | 'POST';
};

/** The offer /api/quote returns with 200, 202 and 403 alike: the verdict is `status`. */
export type Quote = {
  status: 'allowed' | 'pending_approval' | 'denied';
  rail: 'x402' | 'mpp';
  chain_id: number;
  /** Price parsed from the 402 challenge (rounded up to a whole micro-dollar). */
  amount_usd: number;
  recipient: { address: string; slug: string | null; name: string | null };
  resource_url: string;
  scheme: string | null;
  network: string;
  realm: string | null;
  cached: boolean;
  reason?: string;
  approval_threshold_usd?: number | null;
};

/** GET /api/approvals/{id}/status. */
export type ApprovalStatus = {
  status: 'pending' | 'approved' | 'denied' | 'expired';
  decided_at: string | null;
  expires_at: string;
  transaction_id: string;
};

/** POST /api/ping. */
export type PingResult = { ok: boolean; agent_id: string; agent_name: string; org_id: string; status: string };

/** A registry record from /api/resolve. */
export type ServiceRecord = {
  id: string;
  slug: string;
  name: string;
  description: string;
  category: string;
  logoUrl: string;
  docsUrl: string;
  paymentMethods: Array<{ realm: string; baseUrl: string; protocol: string }>;
  endpoints: Array<{
    method: string; path: string; description: string; priceAtomic: string | null; currency: string; pricingModel: string; protocol: string;
  }>;
};

/** GET /api/resolve. */
export type ResolveResult = {
  results: Record<string, ServiceRecord | null>;
  resolvedCount: number;
  unresolvedCount: number;
};

/** GET /api/agents/{id}/spend (a paypolicy extension beyond the wire protocol). USD as decimal strings. */
export type SpendStatus = {
  agent_id: string;
  agent_name: string;
  status: string;
  window_hours: number;
  spend_cap_usd: string;
  /** Signed, being signed, approved and pending payments inside the rolling window. */
  committed_usd: string;
  remaining_usd: string;
  approval_threshold_usd: string;
  as_of: string;
  /** Every limit: the 24h spend cap, then the agent's window limits, then its organization's. */
  limits: LimitStatus[];
};

/** One limit of the spend read and what its window holds; null where the limit has no such maximum. */
export type LimitStatus = {
  window: string;
  scope: 'agent' | 'organization';
  recipient: string | null;
  max_usd: string | null;
  spent_usd: string;
  remaining_usd: string | null;
  max_count: number | null;
  count: number;
  max_network_fee_wei: string | null;
  network_fee_wei: string;
};
