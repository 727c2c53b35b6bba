import { timestampFromMs } from '@bufbuild/protobuf/wkt';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { formatUsd } from '../domain/money.js';
import type { Agent, ApiKeyRecord, Organization, Policy, ServiceRecord, TransactionRecord } from '../domain/types.js';
import {
  ApiKeyMode,
  type AgentSchema,
  type ApiKeySchema,
  type OrganizationSchema,
  type PolicySchema,
  type TransactionSchema,
} from '../../gen/paypolicy/v1/admin_pb.js';
import type { ServiceRecordSchema } from '../../gen/paypolicy/v1/registry_pb.js';
import {
  ApprovalStatus,
  PaymentType as PaymentTypeEnum,
  SignOutcome,
  OfferStatus,
  type GetApprovalStatusResponseSchema,
  type QuoteResponseSchema,
  type SignResponseSchema,
} from '../../gen/paypolicy/v1/payment_policy_pb.js';
import type { ApprovalSchema } from '../../gen/paypolicy/v1/admin_pb.js';
import type { SignResult } from '../app/sign.js';
import type { QuoteResult } from '../app/quote.js';
import type { SignedPayment } from '../app/signedPayment.js';
import type { ApprovalView } from '../app/approvals.js';
import type { ApprovalRow } from '../store/approvals.js';
import type { PaymentType } from '../domain/paymentRequest.js';

/** Domain records → protobuf message shapes. Pure functions; no rule lives here. */

export function organizationToProto(o: Organization): MessageInitShape<typeof OrganizationSchema> {
  return {
    id: o.id, name: o.name, treasuryAddress: o.treasuryAddress ?? '', approvalWindowSeconds: o.approvalWindowSeconds,
    createdAt: timestampFromMs(o.createdAt),
  };
}

export function apiKeyToProto(k: ApiKeyRecord): MessageInitShape<typeof ApiKeySchema> {
  return {
    id: k.id, orgId: k.orgId, mode: k.mode === 'live' ? ApiKeyMode.LIVE : ApiKeyMode.TEST, prefix: k.prefix, label: k.label,
    createdAt: timestampFromMs(k.createdAt), revokedAt: k.revokedAt === null ? undefined : timestampFromMs(k.revokedAt),
  };
}

export function policyToProto(p: Policy): MessageInitShape<typeof PolicySchema> {
  return {
    allowlist: p.allowlist, spendCapUsd: formatUsd(p.spendCapMicros),
    approvalThresholdUsd: formatUsd(p.approvalThresholdMicros), updatedAt: timestampFromMs(p.updatedAt),
    maxNetworkFeeWei: p.maxNetworkFeeWei.toString(),
  };
}

export function agentToProto(a: Agent): MessageInitShape<typeof AgentSchema> {
  return {
    id: a.id, orgId: a.orgId, name: a.name, status: a.status, policy: policyToProto(a.policy),
    createdAt: timestampFromMs(a.createdAt), lastPingAt: a.lastPingAt === null ? undefined : timestampFromMs(a.lastPingAt),
  };
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

export function transactionToProto(t: TransactionRecord): MessageInitShape<typeof TransactionSchema> {
  return {
    id: t.id, orgId: t.orgId, agentId: t.agentId, type: t.type, status: t.status, amountUsd: formatUsd(t.amountMicros),
    recipientAddress: t.recipient, chainId: t.chainId, reason: t.reason, createdAt: timestampFromMs(t.createdAt),
    approvalRequestId: t.approvalId ?? '', serviceSlug: t.serviceSlug,
  };
}

const PAYMENT_TYPE_TO_PROTO: Record<PaymentType, PaymentTypeEnum> = {
  eip3009: PaymentTypeEnum.EIP3009,
  permit2: PaymentTypeEnum.PERMIT2,
  raw_transaction: PaymentTypeEnum.RAW_TRANSACTION,
  x402: PaymentTypeEnum.X402,
  mpp: PaymentTypeEnum.MPP,
};

/** Proto enum → wire type name; UNSPECIFIED means "not given" (the default applies). */
export function paymentTypeFromProto(t: PaymentTypeEnum): string | undefined {
  const entry = Object.entries(PAYMENT_TYPE_TO_PROTO).find(([, v]) => v === t);
  if (entry) return entry[0];
  return t === PaymentTypeEnum.UNSPECIFIED ? undefined : `unknown(${t})`;
}

type SignedFields = {
  signature?: string;
  paymentHeader?: { name: string; value: string };
  authorization?: Extract<SignedPayment, { type: 'eip3009' }>['authorization'];
  permit2?: Extract<SignedPayment, { type: 'permit2' }>['permit2'];
  rawTransaction?: Extract<SignedPayment, { type: 'raw_transaction' }>['rawTransaction'];
};

function signedToProto(s: SignedPayment): SignedFields {
  switch (s.type) {
    case 'eip3009':
      return { signature: s.signature, authorization: s.authorization };
    case 'permit2':
      return { signature: s.signature, permit2: s.permit2 };
    case 'raw_transaction':
      return { rawTransaction: s.rawTransaction };
    case 'x402':
      return { signature: s.signature, authorization: s.authorization, paymentHeader: s.paymentHeader };
    case 'mpp':
      return { paymentHeader: s.paymentHeader };
  }
}

const VERDICT_OUTCOME = { allowed: SignOutcome.ALLOWED, pending_approval: SignOutcome.PENDING_APPROVAL, denied: SignOutcome.DENIED } as const;

export function signResultToProto(r: SignResult): MessageInitShape<typeof SignResponseSchema> {
  switch (r.outcome) {
    case 'allowed':
      return {
        outcome: SignOutcome.ALLOWED, agentId: r.agentId, transactionId: r.transactionId, idempotent: r.idempotent,
        costUsd: formatUsd(r.amountMicros), amountUsd: formatUsd(r.amountMicros), chainId: r.chainId,
        type: PAYMENT_TYPE_TO_PROTO[r.type], recipientAddress: r.recipient, ...signedToProto(r.signed),
      };
    case 'pending_approval':
      return {
        outcome: SignOutcome.PENDING_APPROVAL, agentId: r.agentId, transactionId: r.transactionId, idempotent: r.idempotent,
        reason: r.reason, approvalRequestId: r.approvalRequestId,
      };
    case 'denied':
      return { outcome: SignOutcome.DENIED, agentId: r.agentId, transactionId: r.transactionId, idempotent: r.idempotent, reason: r.reason };
    case 'dry_run':
      return {
        outcome: VERDICT_OUTCOME[r.verdict.outcome], agentId: r.agentId, dryRun: true, chainId: r.chainId,
        type: PAYMENT_TYPE_TO_PROTO[r.type], recipientAddress: r.recipient, amountUsd: formatUsd(r.amountMicros),
        reason: r.verdict.outcome === 'allowed' ? '' : r.verdict.reason,
        approvalThresholdUsd: r.verdict.outcome === 'pending_approval' ? formatUsd(r.verdict.thresholdMicros) : undefined,
      };
  }
}

const APPROVAL_STATUS = {
  pending: ApprovalStatus.PENDING, approved: ApprovalStatus.APPROVED, denied: ApprovalStatus.DENIED, expired: ApprovalStatus.EXPIRED,
} as const;

export function approvalStatusToProto(a: ApprovalRow): MessageInitShape<typeof GetApprovalStatusResponseSchema> {
  return {
    status: APPROVAL_STATUS[a.status], transactionId: a.transactionId, expiresAt: timestampFromMs(a.expiresAt),
    decidedAt: a.decidedAt === null ? undefined : timestampFromMs(a.decidedAt),
  };
}

export function approvalToProto(a: ApprovalView): MessageInitShape<typeof ApprovalSchema> {
  return {
    id: a.id, status: a.status, transactionId: a.transactionId, agentId: a.agentId, amountUsd: formatUsd(a.amountMicros),
    recipientAddress: a.recipient, reason: a.reason, createdAt: timestampFromMs(a.createdAt), expiresAt: timestampFromMs(a.expiresAt),
    decidedAt: a.decidedAt === null ? undefined : timestampFromMs(a.decidedAt), decidedBy: a.decidedBy, note: a.note,
    serviceSlug: a.serviceSlug, maxNetworkFeeWei: a.maxNetworkFeeWei?.toString() ?? '',
    maxNetworkFeeUsd: a.maxTempoFeeMicros === null ? '' : formatUsd(a.maxTempoFeeMicros),
  };
}

const OFFER_STATUS = { allowed: OfferStatus.ALLOWED, pending_approval: OfferStatus.PENDING_APPROVAL, denied: OfferStatus.DENIED } as const;

export function quoteResultToProto(r: QuoteResult): MessageInitShape<typeof QuoteResponseSchema> {
  const { offer, verdict, attribution } = r;
  return {
    status: OFFER_STATUS[verdict.outcome], rail: offer.rail, chainId: offer.chainId, amountUsd: formatUsd(offer.amountMicros),
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
