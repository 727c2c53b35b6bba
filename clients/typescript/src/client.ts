import { PaypolicyError } from './errors.js';
import { errorFromAnswer, sendWithRetry, sleep, type HttpAnswer, type RetryOptions } from './http.js';
import type {
  ApprovalStatus, DryRunResult, PendingApproval, PingResult, Quote, QuoteRequest, ResolveResult, SignRequest, SignResult, SignedPayment,
  SpendStatus,
} from './types.js';

export type ClientOptions = {
  /** Where paypolicy listens, e.g. `https://paypolicy.internal` (paths are appended). */
  baseUrl: string;
  /** An organization API key (`ak_live_…` or `ak_test_…`). Sent only to `baseUrl`, never logged. */
  apiKey: string;
  /** A fetch implementation (default: the global one). */
  fetch?: typeof fetch;
  /** Retries of calls that are safe to repeat (see RetryOptions); `false` for none. */
  retry?: RetryOptions | false;
};

/** Options every call takes. */
export type CallOptions = { signal?: AbortSignal };

/** How waitForApproval polls. */
export type WaitOptions = {
  /** Give up after this long (default 300000: the wire protocol's 5 minutes). */
  timeoutMs?: number;
  /** First pause between polls (default 1000), growing by half each time… */
  initialIntervalMs?: number;
  /** …up to this (default 10000). */
  maxIntervalMs?: number;
  signal?: AbortSignal;
};

export type SignOptions = CallOptions & {
  /**
   * The payment's Idempotency-Key. Default: a fresh random one per `sign` call, reused for that
   * call's retries and for collecting it after an approval, so one logical payment is paid once.
   */
  idempotencyKey?: string;
  /** On a 202, wait for the human's decision and collect the result (true = default WaitOptions). */
  waitForApproval?: boolean | Omit<WaitOptions, 'signal'>;
};

/** A pending payment as `sign` returned it: what waitForApproval needs to collect it. */
export type PendingPayment = Extract<SignResult, { outcome: 'pending_approval' }>;
/** A signed payment as `sign` returns it. */
export type SignedResult = Extract<SignResult, { outcome: 'signed' }>;

/** The typed paypolicy REST client. Create it with {@link createClient}. */
export type PaypolicyClient = {
  readonly baseUrl: string;
  /** POST /api/ping: checks the key and agent pair. */
  ping(agentId: string, options?: CallOptions): Promise<PingResult>;
  /** GET /api/resolve: registry records by slug (null for unknown slugs). */
  resolve(slugs: readonly string[], options?: CallOptions): Promise<ResolveResult>;
  /** POST /api/quote: what a paywalled URL costs and whether the policy would allow it. Never signs; 202/403 verdicts are results, not errors. */
  quote(request: QuoteRequest, options?: CallOptions): Promise<Quote>;
  /**
   * POST /api/sign. Resolves `signed` (200) or `pending_approval` (202); with `waitForApproval`
   * only `signed`. A policy denial (403) throws PaypolicyError `policy_denied` with the reason.
   */
  sign(request: SignRequest, options: SignOptions & { waitForApproval: true | Omit<WaitOptions, 'signal'> }): Promise<SignedResult>;
  sign(request: SignRequest, options?: SignOptions): Promise<SignResult>;
  /** POST /api/sign with `dry_run: true`: the verdict without signing or recording anything. */
  dryRun(request: SignRequest, options?: CallOptions): Promise<DryRunResult>;
  /** GET /api/approvals/{id}/status. An unknown or foreign id throws `not_found`. */
  approvalStatus(approvalRequestId: string, options?: CallOptions): Promise<ApprovalStatus>;
  /**
   * Polls the approval of a pending payment (backing off, up to `timeoutMs`) and, once decided,
   * repeats the original sign with the same Idempotency-Key: resolves with the signed payment,
   * throws `policy_denied` (denied, expired, or refused by the re-check), or `approval_timeout`.
   */
  waitForApproval(pending: PendingPayment, options?: WaitOptions): Promise<SignedResult>;
  /** GET /api/agents/{id}/spend (paypolicy extension): what the agent may still spend in the rolling window. */
  spendStatus(agentId: string, options?: CallOptions): Promise<SpendStatus>;
};

function newIdempotencyKey(): string {
  return globalThis.crypto.randomUUID();
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Creates a client. Nothing is sent until a method is called. */
export function createClient(options: ClientOptions): PaypolicyClient {
  const fetchImpl = options.fetch ?? globalThis.fetch.bind(globalThis);
  const retry = options.retry ?? {};
  const base = options.baseUrl.replace(/\/+$/, '');
  if (!/^https?:\/\//i.test(base)) throw new TypeError('baseUrl must be an http(s) URL');
  if (typeof options.apiKey !== 'string' || options.apiKey === '') throw new TypeError('apiKey is required');

  function call(method: 'GET' | 'POST', path: string, body: unknown, signal: AbortSignal | undefined, extra: Record<string, string> = {}): Promise<HttpAnswer> {
    const headers: Record<string, string> = { authorization: `Bearer ${options.apiKey}`, accept: 'application/json', ...extra };
    if (body !== undefined) headers['content-type'] = 'application/json';
    return sendWithRetry(fetchImpl, { method, url: `${base}${path}`, headers, body: body === undefined ? undefined : JSON.stringify(body), signal }, retry);
  }

  function expectObject(a: HttpAnswer, what: string): Record<string, unknown> {
    if (!isObject(a.json)) throw new PaypolicyError(`${what}: unreadable answer (HTTP ${a.status})`, { code: 'unexpected_response', status: a.status });
    return a.json;
  }

  async function signOnce(request: SignRequest, idempotencyKey: string, signal?: AbortSignal): Promise<SignResult> {
    const body = { ...request } as Record<string, unknown>;
    delete body.dry_run;
    const a = await call('POST', '/api/sign', body, signal, { 'idempotency-key': idempotencyKey });
    if (a.status === 200) return { outcome: 'signed', idempotencyKey, ...(expectObject(a, 'sign') as SignedPayment) };
    if (a.status === 202) return { outcome: 'pending_approval', idempotencyKey, request, ...(expectObject(a, 'sign') as PendingApproval) };
    if (a.status === 403 && isObject(a.json) && typeof a.json.reason === 'string') {
      const b = a.json;
      throw new PaypolicyError(`Policy denied: ${b.reason as string}`, {
        code: 'policy_denied', status: 403, reason: b.reason as string, transactionId: typeof b.transaction_id === 'string' ? b.transaction_id : undefined,
        details: isObject(b.rule) ? { rule: b.rule } : undefined,
      });
    }
    throw errorFromAnswer(a, 'sign');
  }

  const client: PaypolicyClient = {
    baseUrl: base,
    async ping(agentId, o = {}) {
      const a = await call('POST', '/api/ping', { agent_id: agentId }, o.signal);
      if (a.status !== 200) throw errorFromAnswer(a, 'ping');
      return expectObject(a, 'ping') as PingResult;
    },
    async resolve(slugs, o = {}) {
      const a = await call('GET', `/api/resolve?slugs=${encodeURIComponent(slugs.join(','))}`, undefined, o.signal);
      if (a.status !== 200) throw errorFromAnswer(a, 'resolve');
      return expectObject(a, 'resolve') as ResolveResult;
    },
    async quote(request, o = {}) {
      const a = await call('POST', '/api/quote', request, o.signal);
      // 200, 202 and 403 all carry the offer; the verdict is its status field.
      if ((a.status === 200 || a.status === 202 || a.status === 403) && isObject(a.json) && typeof a.json.rail === 'string') return a.json as Quote;
      throw errorFromAnswer(a, 'quote');
    },
    async sign(request: SignRequest, o: SignOptions = {}): Promise<any> {
      const key = o.idempotencyKey ?? newIdempotencyKey();
      const r = await signOnce(request, key, o.signal);
      if (r.outcome === 'signed' || !o.waitForApproval) return r;
      const wait = o.waitForApproval === true ? {} : o.waitForApproval;
      return client.waitForApproval(r, { ...wait, signal: o.signal });
    },
    async dryRun(request, o = {}) {
      const a = await call('POST', '/api/sign', { ...request, dry_run: true }, o.signal);
      if ((a.status === 200 || a.status === 202 || a.status === 403) && isObject(a.json) && a.json.dry_run === true) return a.json as DryRunResult;
      throw errorFromAnswer(a, 'dry run');
    },
    async approvalStatus(id, o = {}) {
      const a = await call('GET', `/api/approvals/${encodeURIComponent(id)}/status`, undefined, o.signal);
      if (a.status !== 200) throw errorFromAnswer(a, 'approval status');
      return expectObject(a, 'approval status') as ApprovalStatus;
    },
    async waitForApproval(pending, o = {}) {
      const timeoutMs = o.timeoutMs ?? 300_000;
      const deadline = Date.now() + timeoutMs;
      let interval = o.initialIntervalMs ?? 1000;
      const maxInterval = o.maxIntervalMs ?? 10_000;
      for (;;) {
        const st = await client.approvalStatus(pending.approval_request_id, { signal: o.signal });
        if (st.status !== 'pending') {
          // Decided: the original request with the same key collects the outcome (200 after an
          // approval, 403 with the reason after a denial or expiry).
          const r = await signOnce(pending.request, pending.idempotencyKey, o.signal);
          if (r.outcome === 'signed') return r;
        }
        const left = deadline - Date.now();
        if (left <= 0) {
          throw new PaypolicyError(`Approval still pending after ${Math.round(timeoutMs / 1000)} s`, {
            code: 'approval_timeout', status: 0, retryable: true, approvalRequestId: pending.approval_request_id, transactionId: pending.transaction_id,
          });
        }
        await sleep(Math.min(interval, left), o.signal);
        interval = Math.min(maxInterval, interval * 1.5);
      }
    },
    async spendStatus(agentId, o = {}) {
      const a = await call('GET', `/api/agents/${encodeURIComponent(agentId)}/spend`, undefined, o.signal);
      if (a.status !== 200) throw errorFromAnswer(a, 'spend status');
      return expectObject(a, 'spend status') as SpendStatus;
    },
  };
  return client;
}
