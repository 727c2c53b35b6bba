import type { Address, Hex } from 'viem';
import type { AppDeps } from './deps.js';
import type { SignedPayment } from './signedPayment.js';

/**
 * On-chain submission of raw transactions (README "On-chain submission"). A raw transaction whose
 * chain has a configured RPC endpoint is settled with submit_status 'pending' in the same commit
 * as its signature (settle.ts), and only then broadcast: first right away, bounded by the RPC
 * timeout, then by the background submitter until a node accepts it. Only the stored serialized
 * transaction is ever sent, so a payment never gets a second, different transaction.
 */

/** Whether a signed payment is a raw transaction the service submits (its chain has an endpoint). */
export function submitsOnChain(deps: AppDeps, signed: SignedPayment): boolean {
  return signed.type === 'raw_transaction' && deps.chains.has(signed.rawTransaction.chainId);
}

/**
 * Broadcasts the settled row's transaction and records the hash once a node accepted it. A node
 * that refuses it but already knows it (an earlier broadcast whose answer was lost) counts as
 * accepted. Null when it was not accepted now: the row stays pending for the background submitter.
 */
export async function broadcastSettled(deps: AppDeps, rowId: string, signed: SignedPayment): Promise<Hex | null> {
  if (signed.type !== 'raw_transaction' || !deps.chains.has(signed.rawTransaction.chainId)) return null;
  const { chainId, serialized, hash } = signed.rawTransaction;
  try {
    await deps.chains.sendRaw(chainId, serialized);
  } catch (err) {
    const known = await deps.chains.knows(chainId, hash).catch(() => false);
    if (!known) {
      deps.log.warn({ transactionId: rowId, chainId, reason: rpcReason(err) }, 'broadcasting a raw transaction failed; the background submitter retries it');
      return null;
    }
  }
  await deps.uow.write(() => deps.store.payments.markSubmitted(rowId, hash, deps.now()));
  return hash;
}

/**
 * One pass of the background submitter for one chain: the rows waiting for broadcast in nonce
 * order, once they are durable, stopping at the first that the node does not accept (the later nonces could not be mined
 * before it). Returns how many were submitted.
 */
export async function submitPending(deps: AppDeps, chainId: number, batch = 100): Promise<number> {
  let submitted = 0;
  const rows = deps.store.payments.unsubmitted(chainId, batch);
  if (rows.length === 0) return 0;
  // Read outside the write queue, a row may come from a group commit whose WAL sync is still
  // running: broadcast only after a sync that started after this read (invariant 2).
  await deps.uow.durable();
  for (const row of rows) {
    if (!(await broadcastSettled(deps, row.id, JSON.parse(row.result) as SignedPayment))) break;
    submitted++;
  }
  return submitted;
}

/**
 * A background loop of submitPending every `intervalMs`: one pass at a time per chain, chains
 * independent, so a slow node holds back only its own chain. `stop` ends it.
 */
export function startSubmitter(deps: AppDeps, intervalMs: number): { stop: () => void } {
  const running = new Set<number>();
  const timer = setInterval(() => {
    for (const chainId of deps.chains.chainIds()) {
      if (running.has(chainId)) continue;
      running.add(chainId);
      submitPending(deps, chainId)
        .then((n) => { if (n > 0) deps.log.info({ chainId, submitted: n }, 'submitted raw transactions waiting for broadcast'); })
        .catch((err: unknown) => deps.log.error({ err, chainId }, 'background submission failed'))
        .finally(() => running.delete(chainId));
    }
  }, intervalMs);
  timer.unref();
  return { stop: () => clearInterval(timer) };
}

/**
 * The node's pending nonce for the treasury, asked once per (organization, chain) and process
 * before the first reservation there: the caller raises the ledger's counter to it in the
 * reserving write (payments.raiseNonceFloor). Undefined when already reconciled, when the chain
 * has no endpoint, or when the node did not answer (the ledger's counter is used and the next
 * reservation asks again).
 */
export async function chainNonceFloor(deps: AppDeps, orgId: string, chainId: number, treasury: Address): Promise<number | undefined> {
  const key = `${orgId}\u0000${chainId}`;
  if (!deps.chains.has(chainId) || deps.nonceSynced.has(key)) return undefined;
  try {
    return await deps.chains.pendingNonce(chainId, treasury);
  } catch (err) {
    deps.log.warn({ orgId, chainId, reason: rpcReason(err) }, 'reading the treasury nonce from the node failed; using the ledger');
    return undefined;
  }
}

/** How far ahead of the ledger's counter a node's pending nonce is believed (a treasury's own history). */
export const MAX_NONCE_JUMP = 1_000_000;

/** Applies a floor from chainNonceFloor, inside the write that reserves the nonce, and marks the pair reconciled. */
export function applyNonceFloor(deps: AppDeps, orgId: string, chainId: number, floor: number | undefined): void {
  if (floor === undefined) return;
  // The counter never goes down, so one wrong answer would make every later transaction of this
  // treasury unmineable: a floor implausibly far ahead of the ledger is not believed.
  const counter = deps.store.payments.nonceCounter(orgId, chainId);
  if (!Number.isSafeInteger(floor) || floor < 0 || floor > counter + MAX_NONCE_JUMP) {
    deps.log.warn({ orgId, chainId, nodeNonce: String(floor), ledgerNonce: counter }, 'the node reports a pending nonce implausibly far ahead of the ledger; not trusted, using the ledger');
    return;
  }
  deps.store.payments.raiseNonceFloor(orgId, chainId, floor);
  deps.nonceSynced.add(`${orgId}\u0000${chainId}`);
}

/** A short reason for the log; viem's full message names the URL, which may carry a provider key. */
function rpcReason(err: unknown): string {
  const e = err as { shortMessage?: string; details?: string; message?: string };
  return [e.shortMessage ?? e.message, e.details].filter(Boolean).join(' ').replace(/https?:\/\/\S+/g, '<rpc-url>').replace(/\s+/g, ' ').slice(0, 200);
}
