import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { SpendLimit } from '../domain/limits.js';
import type { RuleInfo } from '../domain/policy.js';
import { formatUsd } from '../domain/money.js';
import { isAgentStatus } from '../domain/validate.js';
import { DomainError } from '../domain/errors.js';
import type { Agent, ApiKeyRecord, Organization, Policy, PolicyVersion, ServiceRecord, TransactionRecord } from '../domain/types.js';
import {
  ApiKeyMode,
  type AgentSchema,
  type ApiKeySchema,
  type ApprovalSchema,
  type OrganizationSchema,
  type PolicySchema,
  type PolicyVersionSchema,
  type SetPolicyRequest,
  type SimulatePolicyResponseSchema,
  type SpendLimits,
  type SpendLimitSchema,
  type TransactionSchema,
} from '../../gen/paypolicy/v1/admin_pb.js';
import type { ServiceRecordSchema } from '../../gen/paypolicy/v1/registry_pb.js';
import type {
  GetAgentSpendResponseSchema,
  PolicyRuleSchema,
  GetApprovalStatusResponseSchema,
  PingResponseSchema,
  QuoteResponseSchema,
  ResolveResponseSchema,
  SignResponseSchema,
} from '../../gen/paypolicy/v1/payment_policy_pb.js';
import type { AgentSpendStatus } from '../app/payments/agentSpend.js';
import type { SimulationReport } from '../app/payments/policySimulation.js';
import type { PingResult } from '../app/organizations/ping.js';
import type { PolicyInput } from '../app/organizations/agents.js';
import type { ResolveResult } from '../app/registry/registry.js';
import type { SignResult } from '../app/payments/pipeline.js';
import type { QuoteResult } from '../app/payments/quote.js';
import type { SignedPayment } from '../app/payments/signatures.js';
import { agentStatus, approvalStatus, chainStatus, offerStatus, paymentType, signOutcome, simulatedOutcome, transactionStatus, type ApprovalState } from './enums.js';

/**
 * Use-case results → the protobuf messages of the contract (proto/paypolicy/v1). Both transports
 * answer from these: the RPC services send them as they are, and REST writes them through the
 * declared field mapping of rest/mappers.ts. Pure functions; no rule lives here.
 */

/** An approval request as the use cases describe it (no store row type crosses into the transports). */
export type ApprovalRecord = {
  id: string; status: ApprovalState; transactionId: string; agentId: string; createdAt: number; expiresAt: number;
  decidedAt: number | null; decidedBy: string; note: string;
};

/** An approval with the payment it is for (AdminService's Approval). */
export type ApprovalDescription = ApprovalRecord & {
  amountMicros: bigint; recipient: string; reason: string; serviceSlug: string; maxNetworkFeeWei: bigint | null; maxTempoFeeMicros: bigint | null;
  payees: ReadonlyArray<{ recipient: string; amountMicros: bigint }>;
};

const optionalTime = (ms: number | null) => (ms === null ? undefined : timestampFromMs(ms));

export function organizationToProto(o: Organization): MessageInitShape<typeof OrganizationSchema> {
  return {
    id: o.id, name: o.name, treasuryAddress: o.treasuryAddress ?? '', approvalWindowSeconds: o.approvalWindowSeconds,
    createdAt: timestampFromMs(o.createdAt), limits: o.limits.map(limitToProto),
  };
}

/** A window limit on the wire: only the measures it sets are present. */
export function limitToProto(l: SpendLimit): MessageInitShape<typeof SpendLimitSchema> {
  return {
    window: l.window, maxUsd: l.maxMicros === null ? undefined : formatUsd(l.maxMicros), maxCount: l.maxCount ?? undefined,
    maxNetworkFeeWei: l.maxNetworkFeeWei?.toString(), recipient: l.recipient ?? undefined,
  };
}

/**
 * Limits from the wire as the policy document writes them, for domain/limits.ts to parse: one
 * parser for every surface, so an error names `limits[i].key` the same way everywhere.
 */
export function limitsFromProto(list: SpendLimits | undefined): unknown {
  if (list === undefined) return undefined;
  return list.items.map((l) => {
    const o: Record<string, unknown> = { window: l.window };
    if (l.maxUsd !== undefined) o.max_usd = l.maxUsd;
    if (l.maxCount !== undefined) o.max_count = l.maxCount;
    if (l.maxNetworkFeeWei !== undefined) o.max_network_fee_wei = l.maxNetworkFeeWei;
    if (l.recipient !== undefined) o.recipient = l.recipient;
    return o;
  });
}

export function apiKeyToProto(k: ApiKeyRecord): MessageInitShape<typeof ApiKeySchema> {
  return {
    id: k.id, orgId: k.orgId, mode: k.mode === 'live' ? ApiKeyMode.LIVE : ApiKeyMode.TEST, prefix: k.prefix, label: k.label,
    createdAt: timestampFromMs(k.createdAt), revokedAt: optionalTime(k.revokedAt),
  };
}

export function policyToProto(p: Policy): MessageInitShape<typeof PolicySchema> {
  return {
    allowlist: p.allowlist, spendCapUsd: formatUsd(p.spendCapMicros),
    approvalThresholdUsd: formatUsd(p.approvalThresholdMicros), updatedAt: timestampFromMs(p.updatedAt),
    maxNetworkFeeWei: p.maxNetworkFeeWei.toString(), maxPerPaymentUsd: p.maxPerPaymentMicros === null ? '' : formatUsd(p.maxPerPaymentMicros),
    limits: p.limits.map(limitToProto), version: p.version ?? 0,
  };
}

export function policyVersionToProto(v: PolicyVersion): MessageInitShape<typeof PolicyVersionSchema> {
  return { version: v.version, createdAt: timestampFromMs(v.createdAt), actor: v.actor, policy: policyToProto(v.policy) };
}

/** A SetPolicy request as the use case's input: a policy field added to the proto is mapped here and in policyToProto, not in the service. */
export function policyInputFromProto(req: SetPolicyRequest): PolicyInput & { agentId: string } {
  return {
    agentId: req.agentId, allowlist: req.allowlist, spendCapUsd: req.spendCapUsd, approvalThresholdUsd: req.approvalThresholdUsd,
    maxNetworkFeeWei: req.maxNetworkFeeWei, maxPerPaymentUsd: req.maxPerPaymentUsd, limits: limitsFromProto(req.limits),
  };
}

export function agentToProto(a: Agent): MessageInitShape<typeof AgentSchema> {
  return {
    id: a.id, orgId: a.orgId, name: a.name, status: agentStatus.toProto(a.status), policy: policyToProto(a.policy),
    createdAt: timestampFromMs(a.createdAt), lastPingAt: optionalTime(a.lastPingAt),
  };
}

export function pingResultToProto(r: PingResult): MessageInitShape<typeof PingResponseSchema> {
  if (!isAgentStatus(r.status)) throw new DomainError('internal', `agent status ${r.status} has no proto value`);
  return { ok: r.ok, agentId: r.agentId, agentName: r.agentName, orgId: r.orgId, status: agentStatus.toProto(r.status) };
}

export function serviceToProto(s: ServiceRecord): MessageInitShape<typeof ServiceRecordSchema> {
  return {
    id: s.id, slug: s.slug, name: s.name, description: s.description, category: s.category, logoUrl: s.logoUrl,
    docsUrl: s.docsUrl, paymentMethods: s.paymentMethods,
    endpoints: s.endpoints.map((e) => ({ ...e, priceAtomic: e.priceAtomic ?? undefined })),
  };
}

/** protobuf ServiceRecord → domain record (for UpsertService). */
export function serviceFromProto(s: {
  id: string; slug: string; name: string; description: string; category: string; logoUrl: string; docsUrl: string;
  paymentMethods: Array<{ realm: string; baseUrl: string; protocol: string }>;
  endpoints: Array<{ method: string; path: string; description: string; priceAtomic?: string; currency: string; pricingModel: string; protocol: string }>;
}): ServiceRecord {
  return {
    id: s.id, slug: s.slug, name: s.name, description: s.description, category: s.category, logoUrl: s.logoUrl,
    docsUrl: s.docsUrl,
    paymentMethods: s.paymentMethods.map((m) => ({ realm: m.realm, baseUrl: m.baseUrl, protocol: m.protocol })),
    endpoints: s.endpoints.map((e) => ({
      method: e.method, path: e.path, description: e.description, priceAtomic: e.priceAtomic ?? null,
      currency: e.currency, pricingModel: e.pricingModel, protocol: e.protocol,
    })),
  };
}

export function resolveResultToProto(r: ResolveResult): MessageInitShape<typeof ResolveResponseSchema> {
  return {
    results: r.results.map((x) => ({ slug: x.slug, service: x.service ? serviceToProto(x.service) : undefined })),
    resolvedCount: r.resolvedCount,
    unresolvedCount: r.unresolvedCount,
  };
}

export function transactionToProto(t: TransactionRecord): MessageInitShape<typeof TransactionSchema> {
  return {
    id: t.id, orgId: t.orgId, agentId: t.agentId, type: t.type, status: transactionStatus.toProto(t.status), amountUsd: formatUsd(t.amountMicros),
    recipientAddress: t.recipient, chainId: t.chainId, reason: t.reason, createdAt: timestampFromMs(t.createdAt),
    approvalRequestId: t.approvalId ?? '', serviceSlug: t.serviceSlug, policyVersion: t.policyVersion ?? undefined,
    ...(t.chain ? {
      txHash: t.chain.txHash ?? '', chainStatus: chainStatus.toProto(t.chain.status), networkFeeWei: t.chain.networkFeeWei ?? '',
      blockNumber: BigInt(t.chain.blockNumber ?? 0), confirmations: t.chain.confirmations ?? 0,
    } : {}),
  };
}

type SignedFields = Pick<MessageInitShape<typeof SignResponseSchema>, 'signature' | 'authorization' | 'permit2' | 'rawTransaction' | 'mpp' | 'paymentHeader'>;

/** The signed material of each type, in the fields of SignResponse. */
function signedToProto(s: SignedPayment): SignedFields {
  switch (s.type) {
    case 'eip3009':
      return { signature: s.signature, authorization: s.authorization };
    case 'permit2': {
      const p = s.permit2;
      return {
        signature: s.signature,
        permit2: {
          owner: p.owner, permitted: { token: p.token, amount: p.amount }, spender: p.spender, nonce: p.nonce, deadline: p.deadline,
          witness: { to: p.to, validAfter: p.validAfter }, verifyingContract: p.permit2Address, chainId: p.chainId,
        },
      };
    }
    case 'raw_transaction':
      return { rawTransaction: s.rawTransaction };
    case 'x402':
      return { signature: s.signature, authorization: s.authorization, paymentHeader: s.paymentHeader };
    case 'mpp':
      return { mpp: { transactionHash: s.transactionHash }, paymentHeader: s.paymentHeader };
  }
}

export function signResultToProto(r: SignResult): MessageInitShape<typeof SignResponseSchema> {
  switch (r.outcome) {
    case 'allowed':
      return {
        outcome: signOutcome.toProto('allowed'), agentId: r.agentId, transactionId: r.transactionId, idempotent: r.idempotent,
        costUsd: formatUsd(r.amountMicros), amountUsd: formatUsd(r.amountMicros), chainId: r.chainId,
        type: paymentType.toProto(r.type), recipientAddress: r.recipient, resourceUrl: r.resourceUrl || undefined, txHash: r.txHash ?? undefined, ...signedToProto(r.signed),
      };
    case 'pending_approval':
      return {
        outcome: signOutcome.toProto('pending_approval'), agentId: r.agentId, transactionId: r.transactionId, idempotent: r.idempotent,
        reason: r.reason, approvalRequestId: r.approvalRequestId, rule: ruleToProto(r.rule),
      };
    case 'denied':
      return { outcome: signOutcome.toProto('denied'), agentId: r.agentId, transactionId: r.transactionId, idempotent: r.idempotent, reason: r.reason, rule: ruleToProto(r.rule) };
    case 'dry_run':
      return {
        outcome: signOutcome.toProto(r.verdict.outcome), agentId: r.agentId, dryRun: true, chainId: r.chainId,
        type: paymentType.toProto(r.type), recipientAddress: r.recipient, amountUsd: formatUsd(r.amountMicros),
        reason: r.verdict.outcome === 'allowed' ? '' : r.verdict.reason,
        approvalThresholdUsd: r.verdict.outcome === 'pending_approval' ? formatUsd(r.verdict.thresholdMicros) : undefined,
        rule: ruleToProto(r.verdict.outcome === 'allowed' ? null : r.verdict.outcome === 'denied' ? r.verdict.info : r.verdict.rule),
      };
  }
}

/** A decision's rule on the wire; null (a person's or an expiry's decision) leaves the field unset. */
function ruleToProto(r: RuleInfo | null): MessageInitShape<typeof PolicyRuleSchema> | undefined {
  if (!r) return undefined;
  return {
    kind: r.kind, window: r.window ?? undefined, scope: r.scope ?? undefined, recipient: r.recipient ?? undefined,
    limit: r.limit ?? undefined, spent: r.spent ?? undefined,
  };
}

/** The most changed requests a simulation's answer lists (the total is counted beside). */
export const MAX_LISTED_CHANGES = 1000;

export function simulationToProto(r: SimulationReport): MessageInitShape<typeof SimulatePolicyResponseSchema> {
  return {
    requests: r.requests, allowed: r.allowed, pendingApproval: r.pendingApproval, denied: r.denied,
    changed: r.changed.slice(0, MAX_LISTED_CHANGES).map((c) => ({
      transactionId: c.id, createdAt: timestampFromMs(c.at), amountUsd: formatUsd(c.amountMicros), recipient: c.recipient, service: c.slug ?? '',
      was: simulatedOutcome.toProto(c.had), wouldBe: simulatedOutcome.toProto(c.wouldBe), rule: ruleToProto(c.rule), reason: c.reason,
    })),
    since: timestampFromMs(r.since), until: timestampFromMs(r.until), changedTotal: r.changed.length,
  };
}

export function agentSpendToProto(a: AgentSpendStatus): MessageInitShape<typeof GetAgentSpendResponseSchema> {
  return {
    agentId: a.agentId, agentName: a.agentName, status: agentStatus.toProto(a.status), windowHours: a.windowMs / 3_600_000,
    spendCapUsd: formatUsd(a.spendCapMicros), committedUsd: formatUsd(a.committedMicros), remainingUsd: formatUsd(a.remainingMicros),
    approvalThresholdUsd: formatUsd(a.approvalThresholdMicros), asOf: timestampFromMs(a.asOf),
    limits: a.limits.map(({ scope, limit: l, micros, count, feeWei }) => ({
      window: l.window, scope, recipient: l.recipient ?? undefined, maxUsd: l.maxMicros === null ? undefined : formatUsd(l.maxMicros),
      spentUsd: formatUsd(micros), remainingUsd: l.maxMicros === null ? undefined : formatUsd(l.maxMicros > micros ? l.maxMicros - micros : 0n),
      maxCount: l.maxCount ?? undefined, count, maxNetworkFeeWei: l.maxNetworkFeeWei?.toString(), networkFeeWei: feeWei.toString(),
    })),
  };
}

export function approvalStatusToProto(a: ApprovalRecord): MessageInitShape<typeof GetApprovalStatusResponseSchema> {
  return {
    status: approvalStatus.toProto(a.status), transactionId: a.transactionId, expiresAt: timestampFromMs(a.expiresAt),
    decidedAt: optionalTime(a.decidedAt),
  };
}

export function approvalToProto(a: ApprovalDescription): MessageInitShape<typeof ApprovalSchema> {
  return {
    id: a.id, status: approvalStatus.toProto(a.status), transactionId: a.transactionId, agentId: a.agentId, amountUsd: formatUsd(a.amountMicros),
    recipientAddress: a.recipient, reason: a.reason, createdAt: timestampFromMs(a.createdAt), expiresAt: timestampFromMs(a.expiresAt),
    decidedAt: optionalTime(a.decidedAt), decidedBy: a.decidedBy, note: a.note,
    serviceSlug: a.serviceSlug, maxNetworkFeeWei: a.maxNetworkFeeWei?.toString() ?? '',
    maxNetworkFeeUsd: a.maxTempoFeeMicros === null ? '' : formatUsd(a.maxTempoFeeMicros),
    payees: a.payees.map((p) => ({ address: p.recipient, amountUsd: formatUsd(p.amountMicros) })),
  };
}

export function quoteResultToProto(r: QuoteResult): MessageInitShape<typeof QuoteResponseSchema> {
  const { offer, verdict, attribution } = r;
  return {
    status: offerStatus.toProto(verdict.outcome), rail: offer.rail, chainId: offer.chainId, amountUsd: formatUsd(offer.amountMicros),
    recipient: {
      address: offer.payTo,
      slug: attribution.attributed ? attribution.slug : undefined,
      name: attribution.attributed ? attribution.name : undefined,
    },
    resourceUrl: r.resourceUrl, scheme: offer.scheme ?? undefined, network: offer.network, realm: offer.realm ?? undefined,
    cached: r.cached, reason: verdict.outcome === 'allowed' ? '' : verdict.reason,
    approvalThresholdUsd: verdict.outcome === 'pending_approval' ? formatUsd(verdict.thresholdMicros) : undefined,
  };
}
