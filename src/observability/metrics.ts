import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { AppDeps } from '../app/deps.js';
import type { SignResult } from '../app/payments/settle.js';
import { Code, ConnectError } from '@connectrpc/connect';
import { DomainError, toDomainError } from '../domain/errors.js';
import { SignOutcome, type QuoteResponse, type SignResponse } from '../../gen/paypolicy/v1/payment_policy_pb.js';
import type { ClockAgreement } from './clockAgreement.js';

/**
 * The Prometheus metrics of one running service (served at /metrics, see server/server.ts). Every label
 * value comes from a closed set written in the source: route templates (never raw paths), outcome
 * classes, payment types, policy rule names, error codes. Nothing that names a caller, a key, an
 * address or an amount is a label, except agent ids when the operator opts in
 * (`--metrics-agent-labels`).
 */
export type Metrics = {
  /** Prometheus text exposition of everything below, plus the process metrics. */
  scrape: () => Promise<string>;
  contentType: string;
  /** One finished HTTP request: the route template (see routeLabel), its status, its duration. */
  observeRequest: (route: string, status: number, seconds: number) => void;
  /** One sign request's outcome: payment type, outcome and reason class (see signReasonClass). */
  observeSign: (type: unknown, outcome: SignOutcomeLabel, reason: string, agentId?: string) => void;
  /** One quote probe's outcome: `x402`/`mpp` for a priced offer, else the refusal's error code. */
  observeProbe: (outcome: string) => void;
  /** Where open connections are counted (the listener), read at scrape. */
  countConnections: (count: () => Promise<number>) => void;
  /** A connection refused by the connection cap. */
  observeRefusedConnection: () => void;
  /** Where the agent surface's admission gate counts its requests in flight, read at scrape; and its bound. */
  countAdmitted: (inFlight: () => number, limit: number) => void;
};

export type SignOutcomeLabel = 'allowed' | 'dry_run' | 'pending_approval' | 'denied' | 'error';

export type MetricsOptions = {
  /** Adds `agent_id` to a separate sign-outcome counter. Off by default: ids are unbounded. */
  agentLabels?: boolean;
  /** The wall and ledger clocks' agreement, exported as paypolicy_clock_skew_seconds. */
  clock?: ClockAgreement;
};

const PAYMENT_TYPES = new Set(['eip3009', 'permit2', 'raw_transaction', 'x402', 'mpp']);
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** A request's status as a label: the statuses the wire protocol gives meaning to, else the class. */
export function outcomeClass(status: number): string {
  if (status === 200 || status === 202 || status === 403) return OUTCOME_OF[status]!;
  const cls = Math.floor(status / 100);
  return CLASSES[cls] ?? `${cls}xx`;
}
// Written once: a label built per request is a string to allocate and hash per request.
const OUTCOME_OF: Record<number, string> = { 200: '200', 202: '202', 403: '403' };
const CLASSES = ['0xx', '1xx', '2xx', '3xx', '4xx', '5xx'];

/**
 * Why a payment was refused or held, as a label: the policy rule that decided (the texts are
 * domain/policy.ts's; a unit test pins each one), a human's denial, an expiry, else `other`.
 * Never the text itself, which carries addresses and amounts.
 */
export function signReasonClass(reason: string): string {
  if (reason.includes('larger than the ledger can record')) return 'amount_limit';
  if (reason.startsWith('Agent is ')) return 'agent_status';
  if (reason.includes("exceeds the request's max_amount_usd")) return 'max_amount';
  if (reason.includes("exceeds the agent's maximum of")) return 'max_per_payment';
  if (reason.includes("not on the agent's allowlist")) return 'allowlist';
  if (reason.startsWith('Maximum network fee ')) return 'network_fee';
  if (reason.startsWith('Spend cap of ')) return 'spend_cap';
  if (/^(Payment of \$[\d.]+ would exceed|Payment would exceed|Network fee of up to \d+ wei \(counted in whole gwei\) would exceed) the (agent|organization)'s /.test(reason)) return 'limit';
  if (reason.includes('exceeds the approval threshold')) return 'approval_threshold';
  if (reason.startsWith('Denied by approver')) return 'approver';
  if (/expired/i.test(reason)) return 'expired';
  return 'other';
}

/** A sign result as (outcome, reason class) labels. */
export function signOutcomeOf(result: SignResult): [SignOutcomeLabel, string] {
  switch (result.outcome) {
    case 'allowed':
      return ['allowed', 'none'];
    case 'dry_run':
      return ['dry_run', result.verdict.outcome === 'denied' ? result.verdict.rule : result.verdict.outcome];
    default:
      return [result.outcome, signReasonClass(result.reason)];
  }
}

/** A refused request's error code (a closed set in the source; see docs/errors.md). */
export function errorCodeOf(err: unknown): string {
  return toDomainError(err).code;
}

/** A failed call's code: the domain error's, or `rpc_<code>` for an error Connect raised itself (a malformed RPC). */
function failureCodeOf(err: unknown): string {
  return err instanceof ConnectError && !(err.cause instanceof DomainError) ? `rpc_${Code[err.code]?.toLowerCase() ?? 'error'}` : errorCodeOf(err);
}

/**
 * Counts Sign and Quote answers the same way whichever transport carried them: REST and the RPC
 * interceptor both hand over the response message (or the error) and the payment type label.
 */
export function observeSign(metrics: Metrics, type: unknown, answer: { message: SignResponse } | { error: unknown }): void {
  if ('error' in answer) {
    metrics.observeSign(type, 'error', failureCodeOf(answer.error));
    return;
  }
  const m = answer.message;
  const outcome = (SignOutcome[m.outcome]?.toLowerCase() ?? 'unspecified') as SignOutcomeLabel;
  if (m.dryRun) metrics.observeSign(type, 'dry_run', outcome === 'denied' ? signReasonClass(m.reason) : outcome, m.agentId);
  else metrics.observeSign(type, outcome, outcome === 'allowed' ? 'none' : signReasonClass(m.reason), m.agentId);
}

/** Counts a Quote answer by the rail it offers (`none` when it offers none), or a failed one by its code. */
export function observeQuote(metrics: Metrics, answer: { message: QuoteResponse } | { error: unknown }): void {
  metrics.observeProbe('error' in answer ? failureCodeOf(answer.error) : answer.message.rail || 'none');
}

/** A payment type as a label; anything a caller made up is `invalid`. */
export function paymentTypeLabel(type: unknown): string {
  return typeof type === 'string' && PAYMENT_TYPES.has(type) ? type : type === undefined ? 'unset' : 'invalid';
}

/** Builds the registry and its collectors; gauges read `deps` only when scraped. */
export function createMetrics(deps: AppDeps, options: MetricsOptions = {}): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });

  // Observed on every request. prom-client's own counters: counters of our own measured no faster
  // in an interleaved A/B of REST sign (0.98x the rate of prom-client's).
  const requests = new Counter({ name: 'paypolicy_http_requests_total', help: 'HTTP requests answered, by route template and outcome class', labelNames: ['route', 'outcome'], registers: [registry] });
  const latency = new Histogram({ name: 'paypolicy_http_request_duration_seconds', help: 'Time from request to the end of the answer, by route template and outcome class', labelNames: ['route', 'outcome'], buckets: [...LATENCY_BUCKETS], registers: [registry] });
  const signs = new Counter({ name: 'paypolicy_sign_outcomes_total', help: 'Sign requests by payment type, outcome and reason class (policy rule or error code)', labelNames: ['type', 'outcome', 'reason'], registers: [registry] });
  const agentSigns = options.agentLabels
    ? new Counter({ name: 'paypolicy_agent_sign_outcomes_total', help: 'Sign requests by agent id and outcome (--metrics-agent-labels)', labelNames: ['agent_id', 'outcome'], registers: [registry] })
    : undefined;
  const probes = new Counter({ name: 'paypolicy_probe_outcomes_total', help: 'Quote probes of paywalled URLs: the rail of a priced offer, else the refusal code', labelNames: ['outcome'], registers: [registry] });

  new Gauge({
    name: 'paypolicy_pending_approvals', help: 'Approval requests waiting for a human', registers: [registry],
    async collect() {
      if (deps.store.isOpen() && !deps.store.failure()) this.set(await deps.store.approvals.countPending());
    },
  });
  const decisions = new Histogram({
    name: 'paypolicy_approval_decision_seconds', help: 'Time from an approval request to its human decision, by decision',
    labelNames: ['decision'] as const, buckets: [1, 10, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 24 * 3600], registers: [registry],
  });
  void deps.store.approvals.onDecided((status, waitedMs) => decisions.labels(status).observe(waitedMs / 1000));

  const walSync = new Histogram({
    name: 'paypolicy_wal_sync_seconds', help: 'Duration of each fdatasync of the SQLite WAL (group commit)',
    buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1], registers: [registry],
  });
  deps.store.onWalSync((seconds) => walSync.observe(seconds));

  new Gauge({
    name: 'paypolicy_signing_stage_payments', help: 'Payments in the signing stage (bounded by --max-sign-queue)', registers: [registry],
    collect() {
      this.set(deps.signer.stage().inFlight);
    },
  });
  new Gauge({
    name: 'paypolicy_signing_stage_limit', help: 'The --max-sign-queue bound', registers: [registry],
    collect() {
      this.set(deps.signer.stage().limit);
    },
  });
  new Gauge({
    name: 'paypolicy_signer_jobs', help: 'Signing jobs sent to the signing threads and not yet answered', registers: [registry],
    collect() {
      this.set(deps.signer.threads().reduce((n, t) => n + t.jobs, 0));
    },
  });
  new Gauge({
    name: 'paypolicy_signer_threads', help: 'Signing threads, by state (busy: working on at least one job)', labelNames: ['state'] as const, registers: [registry],
    collect() {
      const threads = deps.signer.threads();
      this.set({ state: 'online' }, threads.filter((t) => t.online).length);
      this.set({ state: 'busy' }, threads.filter((t) => t.jobs > 0).length);
      this.set({ state: 'configured' }, threads.length);
    },
  });
  new Gauge({
    name: 'paypolicy_signer_thread_restarts', help: 'Signing threads that died and were replaced since start', registers: [registry],
    collect() {
      this.set(deps.signer.threads().reduce((n, t) => n + t.restarts, 0));
    },
  });

  let connections: (() => Promise<number>) | undefined;
  new Gauge({
    name: 'paypolicy_open_connections', help: 'Open client connections (all protocols)', registers: [registry],
    async collect() {
      if (connections) this.set(await connections());
    },
  });
  // How close the agent surface is to refusing with 503 `overloaded`: an operator sizing
  // --max-in-flight, or a load test waiting for its last slice's requests to finish, reads these.
  let admitted: { inFlight: () => number; limit: number } | undefined;
  new Gauge({
    name: 'paypolicy_requests_in_flight', help: 'Agent requests (REST /api/*, PaymentPolicyService) inside the admission gate', registers: [registry],
    collect() {
      if (admitted) this.set(admitted.inFlight());
    },
  });
  new Gauge({
    name: 'paypolicy_requests_in_flight_limit', help: 'The --max-in-flight bound of the admission gate', registers: [registry],
    collect() {
      if (admitted) this.set(admitted.limit);
    },
  });
  const clock = options.clock;
  if (clock) {
    new Gauge({
      name: 'paypolicy_clock_skew_seconds', help: 'Wall clock minus ledger clock; beyond the tolerance /readyz is degraded and signatures are valid from the earlier clock', registers: [registry],
      collect() {
        this.set(clock.check().skew_seconds);
      },
    });
  }
  const refused = new Counter({ name: 'paypolicy_refused_connections_total', help: 'Connections closed at once by the connection cap (--max-connections)', registers: [registry] });

  return {
    scrape: () => registry.metrics(),
    contentType: registry.contentType,
    observeRequest(route, status, seconds) {
      const outcome = outcomeClass(status);
      requests.labels(route, outcome).inc();
      if (Number.isFinite(seconds)) latency.labels(route, outcome).observe(seconds);
    },
    observeSign(type, outcome, reason, agentId) {
      signs.labels(paymentTypeLabel(type), outcome, reason).inc();
      if (agentSigns && agentId) agentSigns.labels(agentId, outcome).inc();
    },
    observeProbe: (outcome) => probes.labels(outcome).inc(),
    countConnections(count) {
      connections = count;
    },
    observeRefusedConnection: () => refused.inc(),
    countAdmitted(inFlight, limit) {
      admitted = { inFlight, limit };
    },
  };
}
