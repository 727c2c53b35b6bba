import type { Address } from 'viem';
import { checksumAddress } from '../../domain/address.js';
import { DomainError } from '../../domain/errors.js';
import type { PaymentType } from '../../domain/paymentRequest.js';
import type { RuleInfo, Verdict } from '../../domain/policy.js';
import type { PaymentRow } from '../../store/port.js';
import type { AppDeps } from '../deps.js';
import { parseStored, preparePayment, storedMppOffer, type SignedPayment } from './signatures.js';

/**
 * The pipeline's sign and settle stages (pipeline.ts): signing a stored request and settling the
 * row that accounts for it, then the answer. The signature leaves only after the settling commit
 * is durable; a reservation that will not be signed now is ended (`failed`, or back to `approved`
 * when a human approved it), and rows a failed write left in `signing` are released once writes
 * succeed again (strandedPayments.ts).
 */

/** What POST /api/sign and PaymentPolicyService.Sign answer, before a transport maps it. */
export type SignResult =
  | {
      outcome: 'allowed'; agentId: string; transactionId: string; idempotent: boolean; amountMicros: bigint;
      chainId: number; type: PaymentType; recipient: string; signed: SignedPayment; resourceUrl: string;
      /** The on-chain transaction hash once a node accepted it (raw transactions the service submits); else null. */
      txHash: string | null;
    }
  | { outcome: 'pending_approval'; agentId: string; transactionId: string; approvalRequestId: string; reason: string; idempotent: boolean; rule: RuleInfo | null }
  | { outcome: 'denied'; agentId: string; transactionId: string; reason: string; idempotent: boolean; rule: RuleInfo | null }
  | { outcome: 'dry_run'; agentId: string; verdict: Verdict; type: PaymentType; chainId: number; recipient: string; amountMicros: bigint };

/** A signature whose row is durably `signed`: the one thing of a payment that may leave the process. */
export type Signed = { row: Omit<PaymentRow, 'status'>; signed: SignedPayment; idempotent: boolean };


/** Signs a stored request; a challenge the builders refuse is the caller's 400, anything else an internal error. */
export async function signOrFail(deps: AppDeps, orgId: string, treasury: Address, stored: string, nonce?: number): Promise<SignedPayment> {
  const parsed = parseStored(stored);
  const mppOffer = storedMppOffer(parsed);
  const fees = mppOffer ? await deps.tempoFees.feesFor(mppOffer, checksumAddress(treasury)) : undefined;
  let prepared;
  try {
    prepared = preparePayment(deps, orgId, checksumAddress(treasury), parsed, nonce, fees);
  } catch (err) {
    // A challenge the builders refuse (expired, bad splits) is the caller's 400, not our failure.
    if (err instanceof DomainError && err.kind === 'invalid_argument') throw err;
    throw new DomainError('internal', 'Signing failed', { cause: err });
  }
  try {
    return prepared.finish(await deps.signer.sign(prepared.job));
  } catch (err) {
    throw new DomainError('internal', 'Signing failed', { cause: err });
  }
}

/**
 * Signs a reserved row (status `signing`) and records the result; the signature only leaves the
 * process after the settling commit. If signing fails, or the settling commit fails (a full disk
 * surfaces as SQLITE_FULL and rolls back, so the row is certainly still `signing`), the signature
 * is dropped unseen and the reservation ends: `failed`, or back to `approved` when a human
 * approved it (payments.ts releaseSigning). If even that write fails, the row is remembered in
 * deps.stranded and released by the sweep or the next successful settle. A failed sync is not
 * retried here: it stops the service (db.ts failStop) and the restart repairs the row.
 */
export async function signAndSettle(deps: AppDeps, rowId: string, orgId: string, treasury: Address, stored: string, nonce?: number): Promise<SignedPayment> {
  let signed: SignedPayment;
  try {
    signed = await signOrFail(deps, orgId, treasury, stored, nonce);
  } catch (err) {
    await endSigning(deps, rowId, 'Signing failed');
    throw err;
  }
  let settled: boolean;
  try {
    settled = await deps.uow.write((tx) => tx.payments.settleSigned(rowId, JSON.stringify(signed), deps.now(), submitsOnChain(deps, signed), nonce));
  } catch (err) {
    await endSigning(deps, rowId, 'Recording the signature failed; it was discarded unsent');
    throw err;
  }
  // Another replica's upkeep took the row over meanwhile (it repairs rows it believes a dead replica
  // left in `signing`): this signature is dropped unseen, and the caller's repeat answers what the
  // ledger holds now. Not a server error: the outcome is known, just not this one.
  if (!settled) {
    throw new DomainError('conflict', 'The payment changed state while it was being signed; this signature was discarded unsent. Repeat the request to get its current outcome', {
      code: 'payment_state_changed', meta: { rowId },
    });
  }
  // Writes succeed again: release what a failed write left behind.
  if (deps.stranded.size > 0) await deps.stranded.release();
  return signed;
}

/** Whether a signed payment is a raw transaction the service submits (its chain has an endpoint). */
function submitsOnChain(deps: AppDeps, signed: SignedPayment): boolean {
  return signed.type === 'raw_transaction' && deps.submitter.broadcasts(signed.rawTransaction.chainId);
}

/** Ends a `signing` row that will not be signed now; on a failed write, leaves it to deps.stranded. */
async function endSigning(deps: AppDeps, rowId: string, reason: string): Promise<void> {
  try {
    await deps.uow.write((tx) => tx.payments.releaseSigning(rowId, reason, deps.now()));
  } catch (err) {
    // After a failed sync the service is stopping: the restart repairs the row.
    if (deps.store.failure()) return;
    deps.stranded.add(rowId, reason, err);
  }
}

/**
 * The last stage: a settled raw transaction is broadcast (bounded by the RPC timeout; the
 * background submitter retries what the node did not take), then the answer is built.
 */
export async function answerSigned(deps: AppDeps, s: Signed): Promise<SignResult> {
  const txHash = s.signed.type === 'raw_transaction' ? await deps.submitter.broadcastSettled(s.row.id, s.signed.rawTransaction) : null;
  return allowedResult(s.row, s.signed, s.idempotent, txHash);
}

export function allowedResult(row: Omit<PaymentRow, 'status'>, signed: SignedPayment, idempotent: boolean, txHash: string | null = row.txHash ?? null): SignResult {
  return {
    outcome: 'allowed', agentId: row.agentId, transactionId: row.id, idempotent, amountMicros: row.amountMicros,
    chainId: row.chainId, type: row.type as PaymentType, recipient: checksumAddress(row.recipient), signed, resourceUrl: row.resourceUrl, txHash,
  };
}
