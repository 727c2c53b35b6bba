import { COLLECTION_WINDOW_MS, expireCollectionIfDue, expireIfDue } from '../approvals/approvalExpiry.js';
import type { AppDeps } from '../deps.js';
import { releaseStranded } from '../payments/settle.js';

/** The server's own upkeep of the ledger, acting for no caller: the periodic sweep and the start-up repair. */

export const INTERRUPTED_EXPIRED_REASON = 'Signing the approved payment was interrupted and it was not collected within 15 minutes of the approval; send a new request';

/**
 * Expires every overdue approval and every approved payment left uncollected past its window;
 * run periodically so holds are released without a read.
 */
export async function sweepExpiredApprovals(deps: AppDeps): Promise<number> {
  // Rows a failed write left in signing go first: an approved one may then expire right here.
  await releaseStranded(deps);
  let expired = 0;
  for (const a of await deps.store.approvals.due(deps.now())) if (await expireIfDue(deps, a.id)) expired++;
  for (const id of await deps.store.payments.overdueApproved(deps.now() - COLLECTION_WINDOW_MS)) if (await expireCollectionIfDue(deps, id)) expired++;
  return expired;
}

/**
 * Start-up repair of what a crash cut off while signing, in one write transaction. No signature
 * of a row still in `signing` was ever returned (it leaves only after the settling commit), so:
 * a row whose approval is approved goes back to `approved` (hold kept, nonce handed back, its
 * collection window counted from the decision) and the agent's repeat collects it; every other
 * row is `failed` and releases its hold and nonce. Rows an older build failed although their
 * approval was approved are reopened the same way within the collection window, else `expired`
 * with INTERRUPTED_EXPIRED_REASON.
 */
export function repairInterrupted(deps: AppDeps): Promise<{ reapproved: number; failed: number; reopened: number; expired: number }> {
  return deps.uow.write(async ({ payments }) => {
    const now = deps.now();
    const reapproved = await payments.reapproveInterrupted(now);
    const failed = await payments.failInterrupted(now);
    return { reapproved, failed, ...await payments.reopenFailedApprovals(now - COLLECTION_WINDOW_MS, INTERRUPTED_EXPIRED_REASON, now) };
  }, { alone: true });
}
