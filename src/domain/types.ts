import type { SpendLimit } from './limits.js';
import type { TransactionState } from './transactionState.js';
import type { AgentStatus } from './validate.js';

/** Plain records shared by the store, the use cases and both transports. Times are epoch ms. */

export type Organization = {
  id: string;
  name: string;
  approvalWindowSeconds: number;
  createdAt: number;
  treasuryAddress: string | null;
  /** Window limits shared by every agent of the organization (domain/limits.ts). */
  limits: SpendLimit[];
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
  /** Hard ceiling on one payment's amount in micro-USD: above it 403, never an approval; null for none. */
  maxPerPaymentMicros: bigint | null;
  /** Rolling-window limits besides the 24-hour spend cap (domain/limits.ts), in the order written. */
  limits: SpendLimit[];
  /** The policy's version, counted from 1 per agent (every change is a new version); absent on a policy not yet stored. */
  version?: number;
  updatedAt: number;
};

/** One kept version of an agent's policy: who made it and when. */
export type PolicyVersion = { agentId: string; version: number; createdAt: number; actor: string; policy: Policy };

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

/** What attribution reads of a record: which base URLs (and realms) it covers, and its name. */
export type AttributedService = Pick<ServiceRecord, 'slug' | 'name' | 'paymentMethods'>;

/**
 * A stored record without its free text and endpoints: what listings and attribution read. Kept
 * in memory per scope (store/services.ts), so it is small whatever the record's endpoints weigh.
 */
export type ServiceSummary = AttributedService & Pick<RegisteredService, 'orgId' | 'category' | 'docsUrl'> & {
  endpointCount: number;
  /** The record's stored size (domain/recordBytes.ts). */
  bytes: number;
};

export type TransactionRecord = {
  id: string;
  orgId: string;
  agentId: string;
  type: string;
  /** See transactionState.ts. */
  status: TransactionState;
  chainId: number;
  recipient: string;
  amountMicros: bigint;
  reason: string;
  serviceSlug: string;
  approvalId: string | null;
  createdAt: number;
  /** The version of the agent's policy that decided it; null for pings and rows older than versions. */
  policyVersion?: number | null;
  /** The on-chain side of a raw transaction the service submits (docs/onchain.md); absent otherwise. */
  chain?: ChainTracking;
};

/** Where a submitted raw transaction is on chain (migration 0008's submit_status). */
export const CHAIN_STATES = ['pending', 'submitted', 'confirmed', 'reverted', 'dropped', 'replaced'] as const;
export type ChainState = (typeof CHAIN_STATES)[number];

export type ChainTracking = {
  status: ChainState;
  /** The current version's hash (the mined one once mined); null before a node accepted one. */
  txHash: string | null;
  blockNumber: number | null;
  /** Confirmations as last counted (1 = in the latest block). */
  confirmations: number | null;
  /** gasUsed × effectiveGasPrice of the mined version, in wei (decimal string). */
  networkFeeWei: string | null;
};

/** The three dashboard roles: owners manage, approvers decide approvals, viewers read. */
export type DashboardRole = 'owner' | 'approver' | 'viewer';

/** A dashboard user as the rest of the code sees it: never with password material. */
export type DashboardUser = {
  id: string;
  orgId: string;
  email: string;
  role: DashboardRole;
  createdAt: number;
  disabled: boolean;
};

/** An organization's agent software, through one of its API keys (the agent-facing API). */
export type ApiKeyPrincipal = { kind: 'api_key'; orgId: string; mode: ApiKeyMode; keyId: string };

/** A person signed in to the dashboard: bound to one organization, limited by their role. */
export type DashboardUserPrincipal = { kind: 'dashboard_user'; orgId: string; userId: string; email: string; role: DashboardRole };

/** The operator of the server (the admin token): may act on every organization. */
export type OperatorPrincipal = { kind: 'operator' };

/**
 * Who is calling a use case. Every use case takes one and enforces scope and role itself: an
 * organization-bound principal sees another organization's records exactly as unknown ids.
 */
export type Principal = ApiKeyPrincipal | DashboardUserPrincipal | OperatorPrincipal;

/** The operator's principal; there is only one operator. */
export const OPERATOR: OperatorPrincipal = Object.freeze({ kind: 'operator' });
