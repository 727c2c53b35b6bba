import type { ApprovalRow } from '../../store/port.js';
import type { AppDeps } from '../deps.js';

/**
 * When approvals and approved payments run out, written once: a pending approval past its window
 * expires and releases its payment's hold; an approved paywall payment not collected within
 * COLLECTION_WINDOW_MS of the decision expires and releases its hold. Each runs in its own write
 * transaction, or joins the caller's when called with a write's deps (withinWrite.ts). Reads that
 * replay a payment expire it on the spot; the periodic sweep (sweepExpiredApprovals) releases the
 * holds nobody reads.
 */

export const EXPIRED_REASON = 'Approval request expired before a human decided';

/**
 * How long an approved paywall payment waits for its agent to collect it, counted from the
 * decision. The approved row holds the cap from the decision time (its cap_at), so a window much
 * shorter than the 24-hour cap window means the hold is released long before it would stop
 * counting: a hold never outlives the cap's own accounting. Collection moves cap_at to the
 * signing time, so the signed payment counts for a full window from its signature.
 */
export const COLLECTION_WINDOW_MS = 15 * 60 * 1000;

export const COLLECTION_EXPIRED_REASON = 'Approved payment was not collected within 15 minutes of the approval; send a new request';

/** A pending approval whose window has closed at `now`: it must expire before anything else happens to it. */
function overdue(a: ApprovalRow | undefined, now: number): a is ApprovalRow {
  return a !== undefined && a.status === 'pending' && a.expiresAt <= now;
}

/**
 * Moves a pending approval past its window to `expired` and releases its hold on the cap.
 * Runs in its own write transaction (or joins the caller's). Returns true when it expired one.
 */
export async function expireIfDue(deps: AppDeps, approvalId: string): Promise<boolean> {
  // Most reads find nothing to expire: only then is a write opened, and it checks again inside.
  if (!overdue(await deps.store.approvals.get(approvalId), deps.now())) return false;
  return deps.uow.write(async (tx) => {
    const a = await tx.approvals.get(approvalId);
    const now = deps.now();
    if (!overdue(a, now)) return false;
    await tx.approvals.expire(a.id);
    await tx.payments.releasePending(a.transactionId, 'expired', EXPIRED_REASON, now);
    return true;
  }, { alone: true });
}

/**
 * Moves an approved paywall payment whose collection window has closed to `expired` and releases
 * its hold. Runs in its own write transaction (or joins the caller's). True when it expired it.
 */
export function expireCollectionIfDue(deps: AppDeps, transactionId: string): Promise<boolean> {
  return deps.uow.write((tx) => {
    const now = deps.now();
    return tx.payments.expireApproved(transactionId, now - COLLECTION_WINDOW_MS, COLLECTION_EXPIRED_REASON, now);
  }, { alone: true });
}

/**
 * Expires every overdue approval and every approved payment left uncollected past its window;
 * run periodically so holds are released without a read.
 */
export async function sweepExpiredApprovals(deps: AppDeps): Promise<number> {
  // Rows a failed write left in signing go first: an approved one may then expire right here.
  await deps.stranded.release();
  let expired = 0;
  for (const a of await deps.store.approvals.due(deps.now())) if (await expireIfDue(deps, a.id)) expired++;
  for (const id of await deps.store.payments.overdueApproved(deps.now() - COLLECTION_WINDOW_MS)) if (await expireCollectionIfDue(deps, id)) expired++;
  return expired;
}
