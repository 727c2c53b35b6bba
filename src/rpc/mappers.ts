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
