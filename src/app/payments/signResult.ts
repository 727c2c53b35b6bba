import { checksumAddress } from '../../domain/address.js';
import type { Verdict } from '../../domain/policy.js';
import type { PaymentType } from '../../domain/paymentRequest.js';
import type { PaymentRow } from '../../store/payments.js';
import type { SignedPayment } from './signedPayment.js';

/** What POST /api/sign and PaymentPolicyService.Sign answer, before a transport maps it. */
export type SignResult =
  | {
      outcome: 'allowed'; agentId: string; transactionId: string; idempotent: boolean; amountMicros: bigint;
      chainId: number; type: PaymentType; recipient: string; signed: SignedPayment; resourceUrl: string;
      /** The on-chain transaction hash once a node accepted it (raw transactions the service submits); else null. */
      txHash: string | null;
    }
  | { outcome: 'pending_approval'; agentId: string; transactionId: string; approvalRequestId: string; reason: string; idempotent: boolean }
  | { outcome: 'denied'; agentId: string; transactionId: string; reason: string; idempotent: boolean }
  | { outcome: 'dry_run'; agentId: string; verdict: Verdict; type: PaymentType; chainId: number; recipient: string; amountMicros: bigint };

export function allowedResult(row: Omit<PaymentRow, 'status'>, signed: SignedPayment, idempotent: boolean, txHash: string | null = row.txHash ?? null): SignResult {
  return {
    outcome: 'allowed', agentId: row.agentId, transactionId: row.id, idempotent, amountMicros: row.amountMicros,
    chainId: row.chainId, type: row.type as PaymentType, recipient: checksumAddress(row.recipient), signed, resourceUrl: row.resourceUrl, txHash,
  };
}
