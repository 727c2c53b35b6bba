import type { ApprovalRow } from '../store/approvals.js';
import type { AgentSpendStatus } from '../app/agentSpend.js';
import type { PingResult } from '../app/ping.js';
import type { SignResult } from '../app/sign.js';
import type { QuoteResult } from '../app/quote.js';
import { signatureOf, type Eip3009Record, type SignedPayment } from '../app/signedPayment.js';
import { formatUsd, usdToJsonNumber } from '../domain/money.js';
import type { ResolveResult } from '../app/registry.js';
import type { ServiceRecord } from '../domain/types.js';

/**
 * Domain results → the wire protocol's JSON. Field names, nulls and key order are the contract
 * REST clients depend on, so each body is written out explicitly rather than derived from proto.
 */

export function pingJson(r: PingResult) {
  return { ok: r.ok, agent_id: r.agentId, agent_name: r.agentName, org_id: r.orgId, status: r.status };
}

export function serviceJson(s: ServiceRecord) {
  return {
    id: s.id,
    slug: s.slug,
    name: s.name,
    description: s.description,
    category: s.category,
    logoUrl: s.logoUrl,
    docsUrl: s.docsUrl,
    paymentMethods: s.paymentMethods.map((m) => ({ realm: m.realm, baseUrl: m.baseUrl, protocol: m.protocol })),
    endpoints: s.endpoints.map((e) => ({
      method: e.method,
      path: e.path,
      description: e.description,
      priceAtomic: e.priceAtomic,
      currency: e.currency,
      pricingModel: e.pricingModel,
      protocol: e.protocol,
    })),
  };
}

export function resolveJson(r: ResolveResult) {
  // fromEntries defines own properties, so a slug such as "__proto__" stays plain data.
  const results = Object.fromEntries(r.results.map((x) => [x.slug, x.service ? serviceJson(x.service) : null]));
  return { results, resolvedCount: r.resolvedCount, unresolvedCount: r.unresolvedCount };
}

function authorizationJson(a: Eip3009Record) {
  return {
    from: a.from, to: a.to, value: a.value, valid_after: a.validAfter, valid_before: a.validBefore, nonce: a.nonce,
    token: a.token, domain_name: a.domainName, domain_version: a.domainVersion, chain_id: a.chainId,
  };
}

/** The type-specific signed material, beside the wire fields of a 200. */
function signedJson(s: SignedPayment) {
  switch (s.type) {
    case 'eip3009':
      return { authorization: authorizationJson(s.authorization) };
    case 'permit2': {
      const p = s.permit2;
      return {
        permit2: {
          owner: p.owner, token: p.token, amount: p.amount, spender: p.spender, nonce: p.nonce, deadline: p.deadline, to: p.to,
          valid_after: p.validAfter, permit2_address: p.permit2Address, chain_id: p.chainId,
        },
      };
    }
    case 'raw_transaction': {
      const t = s.rawTransaction;
      return { raw_transaction: { serialized: t.serialized, hash: t.hash, nonce: t.nonce, token: t.token, chain_id: t.chainId } };
    }
    case 'x402':
      return { authorization: authorizationJson(s.authorization), payment_header: s.paymentHeader };
    case 'mpp':
      return { mpp: { transaction_hash: s.transactionHash }, payment_header: s.paymentHeader };
  }
}

/** Sign outcome → status and body: 200 signed, 202 pending approval, 403 policy denied. */
export function signJson(r: SignResult): { status: number; body: unknown } {
  switch (r.outcome) {
    case 'allowed':
      return {
        status: 200,
        body: {
          signature: signatureOf(r.signed),
          tx_hash: null,
          agent_id: r.agentId,
          cost_usd: formatUsd(r.amountMicros),
          transaction_id: r.transactionId,
          idempotent: r.idempotent,
          type: r.type,
          chain_id: r.chainId,
          recipient_address: r.recipient,
          ...(r.resourceUrl ? { resource_url: r.resourceUrl } : {}),
          ...signedJson(r.signed),
        },
      };
    case 'pending_approval':
      return { status: 202, body: { status: 'pending_approval', reason: r.reason, transaction_id: r.transactionId, approval_request_id: r.approvalRequestId } };
    case 'denied':
      return { status: 403, body: { error: 'Policy denied', reason: r.reason, transaction_id: r.transactionId } };
    case 'dry_run': {
      const v = r.verdict;
      const status = v.outcome === 'allowed' ? 200 : v.outcome === 'pending_approval' ? 202 : 403;
      return {
        status,
        body: {
          dry_run: true,
          status: v.outcome,
          agent_id: r.agentId,
          type: r.type,
          chain_id: r.chainId,
          recipient_address: r.recipient,
          amount_usd: usdToJsonNumber(r.amountMicros),
          ...(v.outcome === 'allowed' ? {} : { reason: v.reason }),
          ...(v.outcome === 'pending_approval' ? { approval_threshold_usd: usdToJsonNumber(v.thresholdMicros) } : {}),
        },
      };
    }
  }
}

export function approvalStatusJson(a: ApprovalRow) {
  return {
    status: a.status,
    decided_at: a.decidedAt === null ? null : new Date(a.decidedAt).toISOString(),
    expires_at: new Date(a.expiresAt).toISOString(),
    transaction_id: a.transactionId,
  };
}

const VERDICT_STATUS = { allowed: 200, pending_approval: 202, denied: 403 } as const;

/** Quote result → 200/202/403 with the Offer fields in the wire protocol's order. */
export function quoteJson(r: QuoteResult): { status: number; body: unknown } {
  const { offer, verdict, attribution } = r;
  return {
    status: VERDICT_STATUS[verdict.outcome],
    body: {
      status: verdict.outcome,
      rail: offer.rail,
      chain_id: offer.chainId,
      amount_usd: usdToJsonNumber(offer.amountMicros),
      recipient: {
        address: offer.payTo,
        slug: attribution.attributed ? attribution.slug : null,
        name: attribution.attributed ? attribution.name : null,
      },
      resource_url: r.resourceUrl,
      scheme: offer.scheme,
      network: offer.network,
      realm: offer.realm,
      cached: r.cached,
      ...(verdict.outcome === 'allowed' ? {} : { reason: verdict.reason }),
      ...(verdict.outcome === 'pending_approval' ? { approval_threshold_usd: usdToJsonNumber(verdict.thresholdMicros) } : {}),
    },
  };
}

/** GET /api/agents/{id}/spend (an extension beyond the wire protocol): USD as decimal strings, like cost_usd. */
export function agentSpendJson(a: AgentSpendStatus) {
  return {
    agent_id: a.agentId,
    agent_name: a.agentName,
    status: a.status,
    window_hours: a.windowMs / 3_600_000,
    spend_cap_usd: formatUsd(a.spendCapMicros),
    committed_usd: formatUsd(a.committedMicros),
    remaining_usd: formatUsd(a.remainingMicros),
    approval_threshold_usd: formatUsd(a.approvalThresholdMicros),
    as_of: new Date(a.asOf).toISOString(),
  };
}
