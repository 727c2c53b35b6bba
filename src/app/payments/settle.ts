import type { Address } from 'viem';
import { checksumAddress } from '../../domain/address.js';
import { DomainError } from '../../domain/errors.js';
import type { AppDeps } from '../deps.js';
import { parseStored, preparePayment, storedMppOffer } from './preparePayment.js';
import type { SignedPayment } from './signedPayment.js';
import { submitsOnChain } from '../submission/submit.js';

/**
 * Signing a stored request and settling the row that accounts for it: the signature leaves only
 * after the settling commit is durable; a reservation that will not be signed now is ended
 * (`failed`, or back to `approved` when a human approved it), and rows a failed write left in
 * `signing` are released once writes succeed again.
 */

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
  if (deps.stranded.size > 0) await releaseStranded(deps);
  return signed;
}

/** Ends a `signing` row that will not be signed now; on a failed write, leaves it to releaseStranded. */
async function endSigning(deps: AppDeps, rowId: string, reason: string): Promise<void> {
  try {
    await deps.uow.write((tx) => tx.payments.releaseSigning(rowId, reason, deps.now()));
  } catch (err) {
    // After a failed sync the service is stopping: the restart repairs the row.
    if (deps.store.failure()) return;
    if (deps.stranded.size === 0) {
      deps.log.error({ err }, 'a write failed, leaving payments in signing; they are released once writes succeed again');
    }
    deps.stranded.set(rowId, reason);
  }
}

/**
 * Releases the rows in deps.stranded (payments.ts releaseSigning) in one write; called by the
 * sweep and after each successful settle. Returns how many it released; on another failed write
 * they stay for the next attempt.
 */
export function releaseStranded(deps: AppDeps): Promise<number> {
  if (deps.stranded.size === 0 || deps.store.failure()) return Promise.resolve(0);
  // One release at a time (the sweep, a dashboard read's sweep and a settle may ask together):
  // a caller that comes while one runs waits for it rather than releasing the same rows twice.
  let running = releasing.get(deps.stranded);
  if (!running) {
    running = releaseNow(deps).finally(() => releasing.delete(deps.stranded));
    releasing.set(deps.stranded, running);
  }
  return running;
}

/** The release under way per stranded map (one per running app). */
const releasing = new WeakMap<object, Promise<number>>();

async function releaseNow(deps: AppDeps): Promise<number> {
  const rows = [...deps.stranded];
  let outcomes: Array<'approved' | 'failed' | undefined>;
  try {
    outcomes = await deps.uow.write(async (tx) => {
      const out: Array<'approved' | 'failed' | undefined> = [];
      for (const [id, reason] of rows) out.push(await tx.payments.releaseSigning(id, reason, deps.now()));
      return out;
    }, { alone: true });
  } catch {
    return 0;
  }
  for (const [id] of rows) deps.stranded.delete(id);
  deps.log.warn({
    failed: rows.filter((_, i) => outcomes[i] === 'failed').map(([id]) => id),
    approved: rows.filter((_, i) => outcomes[i] === 'approved').map(([id]) => id),
  }, 'released payments a failed write had left in signing');
  return rows.length;
}
