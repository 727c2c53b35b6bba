import { COLLECTION_WINDOW_MS } from '../payments/expiry.js';
import type { AppDeps } from '../deps.js';

/** The server's own upkeep of the ledger, acting for no caller: the start-up repair (the periodic sweep is payments/expiry.ts). */

export const INTERRUPTED_EXPIRED_REASON = 'Signing the approved payment was interrupted and it was not collected within 15 minutes of the approval; send a new request';

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
