import type { DescEnum } from '@bufbuild/protobuf';
import { AGENT_STATUSES, type AgentStatus as DomainAgentStatus } from '../domain/validate.js';
import { PAYMENT_TYPES, type PaymentType as DomainPaymentType } from '../domain/paymentRequest.js';
import { TRANSACTION_STATES, type TransactionState } from '../domain/transactionState.js';
import {
  ChainStatusSchema, SimulatedOutcomeSchema, TransactionStatusSchema, type ChainStatus, type SimulatedOutcome, type TransactionStatus,
} from '../../gen/paypolicy/v1/admin_pb.js';
import { OUTCOMES, type Outcome } from '../domain/simulation.js';
import { CHAIN_STATES, type ChainState } from '../domain/types.js';
import {
  AgentStatusSchema,
  ApprovalStatusSchema,
  OfferStatusSchema,
  PaymentTypeSchema,
  SignOutcomeSchema,
  type AgentStatus,
  type ApprovalStatus,
  type OfferStatus,
  type PaymentType,
  type SignOutcome,
} from '../../gen/paypolicy/v1/payment_policy_pb.js';

/**
 * A proto enum and the domain's names for the same values, paired by spelling: `AGENT_STATUS_PAUSED`
 * is `paused`, `PAYMENT_TYPE_RAW_TRANSACTION` is `raw_transaction`. Built once at load; a domain name
 * without an enum value, or an enum value (other than the zero UNSPECIFIED) without a domain name,
 * throws there, so the two lists cannot drift apart unnoticed.
 */
export type EnumCodec<N extends string, E extends number> = {
  /** The enum value of a domain name. */
  toProto(name: N): E;
  /** The domain name of an enum value; undefined for UNSPECIFIED and for numbers the enum lacks. */
  fromProto(value: E | number): N | undefined;
  /** The domain names, in enum order. */
  readonly names: readonly N[];
};

export function enumCodec<N extends string, E extends number>(schema: DescEnum, names: readonly N[]): EnumCodec<N, E> {
  const byName = new Map<string, E>();
  const byValue = new Map<number, N>();
  for (const v of schema.values) {
    if (v.number === 0) continue;
    const name = v.localName.toLowerCase();
    if (!(names as readonly string[]).includes(name)) throw new Error(`${v.name} has no domain counterpart in [${names.join(', ')}]`);
    byName.set(name, v.number as E);
    byValue.set(v.number, name as N);
  }
  for (const n of names) if (!byName.has(n)) throw new Error(`${schema.typeName} has no value for ${n}`);
  return {
    toProto: (name) => byName.get(name)!,
    fromProto: (value) => byValue.get(value),
    names: [...byValue.values()],
  };
}

/** The three policy verdicts, as both the sign outcome and the quote's offer status name them. */
export const VERDICTS = ['allowed', 'pending_approval', 'denied'] as const;
export type Verdict = (typeof VERDICTS)[number];

/** The four states of an approval request. */
export const APPROVAL_STATES = ['pending', 'approved', 'denied', 'expired'] as const;
export type ApprovalState = (typeof APPROVAL_STATES)[number];

export const agentStatus = enumCodec<DomainAgentStatus, AgentStatus>(AgentStatusSchema, AGENT_STATUSES);
export const transactionStatus = enumCodec<TransactionState, TransactionStatus>(TransactionStatusSchema, TRANSACTION_STATES);
export const chainStatus = enumCodec<ChainState, ChainStatus>(ChainStatusSchema, CHAIN_STATES);
export const approvalStatus = enumCodec<ApprovalState, ApprovalStatus>(ApprovalStatusSchema, APPROVAL_STATES);
export const paymentType = enumCodec<DomainPaymentType, PaymentType>(PaymentTypeSchema, PAYMENT_TYPES);
export const signOutcome = enumCodec<Verdict, SignOutcome>(SignOutcomeSchema, VERDICTS);
export const offerStatus = enumCodec<Verdict, OfferStatus>(OfferStatusSchema, VERDICTS);
export const simulatedOutcome = enumCodec<Outcome, SimulatedOutcome>(SimulatedOutcomeSchema, OUTCOMES);
