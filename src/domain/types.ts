import type { AgentStatus } from './validate.js';

/** Plain records shared by the store, the use cases and both transports. Times are epoch ms. */

export type Organization = {
  id: string;
  name: string;
  approvalWindowSeconds: number;
  createdAt: number;
  treasuryAddress: string | null;
};

export type ApiKeyMode = 'live' | 'test';

export type ApiKeyRecord = {
  id: string;
  orgId: string;
  mode: ApiKeyMode;
  prefix: string;
  label: string;
  createdAt: number;
  revokedAt: number | null;
};

export type Policy = {
  /** Lowercased 0x addresses and registry slugs. */
  allowlist: string[];
  spendCapMicros: bigint;
  approvalThresholdMicros: bigint;
  /** Per-payment ceiling on the network fee the treasury pays (gas × max fee per gas), in wei. */
  maxNetworkFeeWei: bigint;
  updatedAt: number;
};

export type Agent = {
  id: string;
  orgId: string;
  name: string;
  status: AgentStatus;
  createdAt: number;
  updatedAt: number;
  lastPingAt: number | null;
  policy: Policy;
};

export type PaymentMethod = { realm: string; baseUrl: string; protocol: string };

export type ServiceEndpoint = {
  method: string;
  path: string;
  description: string;
  priceAtomic: string | null;
  currency: string;
  pricingModel: string;
  protocol: string;
};

export type ServiceRecord = {
  id: string;
  slug: string;
  name: string;
  description: string;
  category: string;
  logoUrl: string;
  docsUrl: string;
  paymentMethods: PaymentMethod[];
  endpoints: ServiceEndpoint[];
};

/**
 * A stored registry record and its scope: `orgId` null for a shared record (the operator's, seen
 * by every organization), else the one organization that owns and alone sees this private record.
 */
export type RegisteredService = ServiceRecord & { orgId: string | null };

export type TransactionRecord = {
  id: string;
  orgId: string;
  agentId: string;
  type: string;
  status: string;
  chainId: number;
  recipient: string;
  amountMicros: bigint;
  reason: string;
  serviceSlug: string;
  approvalId: string | null;
  createdAt: number;
};

/** Who is calling: an organization, through one of its API keys. */
export type Principal = { orgId: string; keyId: string; mode: ApiKeyMode };
