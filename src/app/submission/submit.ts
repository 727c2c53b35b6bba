import { BaseError, HttpRequestError, parseTransaction, TimeoutError, type Address, type Hex } from 'viem';
import type { Logger } from 'pino';
import { rpcReason, type ChainReceipt, type ChainRpc } from '../../chain/rpc.js';
import type { Eip1559Fields } from '../../signing/signJobs.js';
import type { InFlightRow, UnitOfWork } from '../../store/port.js';
import type { AppDeps } from '../deps.js';
import type { SignedPayment } from '../payments/signatures.js';
import { CAP_WINDOW_MS } from '../payments/policyFacts.js';
import { recheckApproved } from '../payments/recheck.js';
import { withinWrite } from '../withinWrite.js';
import { ChainConflicts, pairKey, ReconciledNonces, type Submitter } from '../submitter.js';

/**
 * On-chain submission of raw transactions (docs/onchain.md). A raw transaction whose
 * chain has a configured RPC endpoint is settled with submit_status 'pending' in the same commit
 * as its signature (settle.ts), and only then broadcast: first right away, bounded by the RPC
 * timeout, then by the background submitter until a node accepts it. Only the stored serialized
 * transaction is ever sent, so a payment never gets a second, different transaction.
 */

/**
 * Why a node did not take a transaction: `permanent` when resending the same bytes can never work;
 * `unreachable` when the node itself did not answer (so nothing else will get through either).
 */
type Refusal = { reason: string; permanent: boolean; nonceTooLow: boolean; unreachable: boolean };

/**
 * Node errors that resending the same bytes will never get past: the transaction itself is
 * invalid for the chain (intrinsic gas, gas limit, signature, type, size). Not among them: fees
 * under the base fee, an underpriced replacement, a treasury short of gas money (all can change).
 */
const PERMANENT = /intrinsic gas too low|requires at least \d+ gas|gas limit reached|exceeds block gas limit|exceeds the block gas limit|invalid sender|invalid signature|invalid chain id|incorrect chain id|transaction type not supported|oversized data|gas limit too low|below intrinsic|intrinsic gas/i;
const NONCE_TOO_LOW = /nonce too low|nonce has already been used|already used nonce|is lower than the current nonce/i;

/** Sends the stored bytes; undefined when the node has them (now or from an earlier broadcast). */
async function broadcast(chains: ChainRpc, chainId: number, serialized: Hex, hash: Hex): Promise<Refusal | undefined> {
  try {
    await chains.sendRaw(chainId, serialized);
    return undefined;
  } catch (err) {
    if (await chains.knows(chainId, hash).catch(() => false)) return undefined;
    const reason = rpcReason(err);
    const unreachable = err instanceof BaseError && err.walk((e) => e instanceof HttpRequestError || e instanceof TimeoutError) !== null;
    return { reason, permanent: PERMANENT.test(reason), nonceTooLow: NONCE_TOO_LOW.test(reason), unreachable };
  }
}

/**
 * One pass of the background submitter for one chain: the rows waiting for broadcast in nonce
 * order, once they are durable. A treasury's rows stop at the first the node does not accept (its
 * later nonces could not be mined before it); other treasuries' rows go on, unless the node itself
 * did not answer. A row the node refuses for good gets its nonce filled
 * (fillNonce) so it does not hold back every later one. Returns how many were submitted.
 */
export async function submitPending(deps: AppDeps, chainId: number, batch = 100, tracking: TrackingOptions = DEFAULT_TRACKING): Promise<number> {
  let submitted = 0;
  const rows = await deps.store.payments.unsubmitted(chainId, batch);
  if (rows.length === 0) return 0;
  // Read outside the write queue, a row may come from a group commit whose WAL sync is still
  // running: broadcast only after a sync that started after this read (invariant 2).
  await deps.uow.durable();
  // The rows of every organization on the chain come in one nonce order, but a stop holds back
  // only the treasury it is about: another treasury's nonces do not wait for this one's.
  const held = new Set<string>();
  for (const row of rows) {
    const signed = JSON.parse(row.result) as SignedPayment;
    if (signed.type !== 'raw_transaction') continue;
    const orgId = (await deps.store.payments.get(row.id))?.orgId;
    if (orgId === undefined || held.has(orgId)) continue;
    const versions = await versionsOf(deps, row.id, signed);
    if (deps.submitter.conflicts.has(orgId, chainId)) {
      // Nothing is broadcast on a conflicted pair; a row whose nonce is used on chain keeps being
      // checked until nonceTaken settles it, else it would hold back every later nonce for good.
      const treasury = deps.vault.address(orgId) as Address | undefined;
      const minedNonce = treasury ? await deps.chains.minedNonce(chainId, treasury).catch(() => undefined) : undefined;
      if (minedNonce !== undefined && minedNonce > Number(signed.rawTransaction.nonce)) {
        await checkNonceUse(deps, chainId, orgId, row.id, Number(signed.rawTransaction.nonce), versions, tracking);
      }
      held.add(orgId);
      continue;
    }
    // A row that already has later versions (a filler) broadcasts its newest one.
    const newest = versions[versions.length - 1]!;
    const refusal = await broadcast(deps.chains, chainId, newest.serialized, newest.hash);
    if (refusal === undefined) {
      await deps.uow.write((tx) => tx.payments.markAccepted(row.id, newest.hash, newest.kind !== 'original', deps.now()));
      submitted++;
      continue;
    }
    deps.log.warn({ transactionId: row.id, chainId, reason: refusal.reason }, 'the node did not accept a raw transaction waiting for broadcast');
    if (refusal.unreachable) break;
    if (refusal.nonceTooLow) {
      await checkNonceUse(deps, chainId, orgId, row.id, Number(signed.rawTransaction.nonce), versions, tracking);
      held.add(orgId);
      continue;
    }
    if (!refusal.permanent || newest.kind !== 'original' || !(await fillNonce(deps, chainId, orgId, row.id, signed, refusal.reason))) {
      held.add(orgId);
      continue;
    }
    submitted++;
  }
  return submitted;
}

/** Tracking settings: confirmations before `confirmed`, and how long a version may wait before a fee bump. */
export type TrackingOptions = { confirmations: number; replaceAfterMs: number; batch?: number };
export const DEFAULT_TRACKING: TrackingOptions = { confirmations: 1, replaceAfterMs: 60_000 };

/** One broadcast version of a row: the original (the row's result) or a later attempt. */
type Version = { hash: Hex; serialized: Hex; kind: 'original' | 'bump' | 'filler' };

async function versionsOf(deps: AppDeps, rowId: string, signed: Extract<SignedPayment, { type: 'raw_transaction' }>): Promise<Version[]> {
  return [
    { hash: signed.rawTransaction.hash, serialized: signed.rawTransaction.serialized, kind: 'original' },
    ...(await deps.store.payments.attempts(rowId)).map((a) => ({ hash: a.hash as Hex, serialized: a.serialized as Hex, kind: a.kind })),
  ];
}

/**
 * The node refused a row's transaction for good: its nonce must still be used, or every later
 * transaction of the treasury waits behind it forever. The service signs a no-op in its place,
 * a zero-value transfer from the treasury to itself with the same nonce and the same fees (21,000
 * gas, so within the fee the policy allowed for the payment), records it as the row's filler
 * before it is broadcast, and broadcasts it. Once mined the row becomes `reverted`: nothing was
 * paid. True when the filler was accepted.
 */
async function fillNonce(deps: AppDeps, chainId: number, orgId: string, rowId: string, signed: Extract<SignedPayment, { type: 'raw_transaction' }>, refusal: string): Promise<boolean> {
  const treasury = deps.vault.address(orgId) as Address | undefined;
  if (!treasury) return false;
  const original = parseTransaction(signed.rawTransaction.serialized);
  const fees = { maxFeePerGas: original.maxFeePerGas ?? 0n, maxPriorityFeePerGas: original.maxPriorityFeePerGas ?? 0n };
  const version = await signVersion(deps, rowId, orgId, 'filler', {
    chainId, nonce: Number(signed.rawTransaction.nonce), to: treasury, data: '0x', gas: 21_000n, ...fees,
  }, `The node refused the transaction for good (${refusal}); its nonce is filled by a no-op transfer to the treasury`);
  if (!version) return false;
  deps.log.error({ transactionId: rowId, chainId, reason: refusal, filler: version.hash }, 'the node refused a raw transaction for good; its nonce is filled by a no-op transfer so later ones are not held back');
  const again = await broadcast(deps.chains, chainId, version.serialized, version.hash);
  if (again !== undefined) {
    deps.log.warn({ transactionId: rowId, chainId, reason: again.reason }, 'broadcasting a nonce filler failed; retried on the next pass');
    return false;
  }
  await deps.uow.write((tx) => tx.payments.markAccepted(rowId, version.hash, true, deps.now()));
  return true;
}

/**
 * Signs a new version of a row (same nonce) through the signing threads and records it durably
 * before anything is broadcast (invariant 2). Undefined when the row became final meanwhile, or
 * when `stillAllowed` refused it in that write.
 */
async function signVersion(
  deps: AppDeps, rowId: string, orgId: string, kind: 'bump' | 'filler', tx: Eip1559Fields, reason?: string,
  /** Checked in the recording write, before anything is recorded: false drops the signature unseen. */
  stillAllowed?: (inTx: AppDeps) => Promise<boolean>,
): Promise<Version | undefined> {
  const out = await deps.signer.sign({ kind: 'eip1559', orgId, tx });
  if (!out.serialized || !out.hash) throw new Error('the signer returned no transaction');
  const recorded = await deps.uow.write(async (store) => {
    if (stillAllowed && !await stillAllowed(withinWrite(deps, store))) return false;
    const { payments } = store;
    const now = deps.now();
    const ok = await payments.addAttempt(rowId, {
      hash: out.hash!, kind, serialized: out.serialized!, gas: tx.gas, maxFeePerGas: tx.maxFeePerGas, maxPriorityFeePerGas: tx.maxPriorityFeePerGas, createdAt: now,
    });
    if (ok && reason) await payments.noteReason(rowId, reason, now);
    return ok;
  });
  return recorded ? { hash: out.hash, serialized: out.serialized, kind } : undefined;
}

/**
 * The treasury's nonce of a row is used on chain: by one of the row's versions (its receipt
 * tells), or by a transaction that is none of ours: another process signs for this treasury.
 */
async function checkNonceUse(deps: AppDeps, chainId: number, orgId: string, rowId: string, nonce: number, versions: Version[], tracking: TrackingOptions): Promise<void> {
  const receipts = await Promise.all(versions.map((v) => deps.chains.receipt(chainId, v.hash).catch(() => undefined)));
  if (receipts.some((r) => r !== null)) return; // one is mined, or we could not tell: the tracker decides
  await nonceTaken(deps, chainId, orgId, rowId, nonce, versions[versions.length - 1]!.hash, tracking);
}

/** When each row was first seen with its nonce used and no receipt of its own (ledger ms), per deps. */
const takenSince = new WeakMap<AppDeps, Map<string, number>>();

/**
 * A row's nonce is used on chain and the node has no receipt for any of its versions: someone
 * else's transaction took it. The (organization, chain) is marked conflicted at once, so nothing
 * more is signed or sent there. The row itself keeps its hold on the cap until the same reading
 * has held for `replaceAfterMs`: "no receipt" is only the node's word, and a node behind a load
 * balancer can report the nonce from one backend and miss the receipt on another. Released early,
 * a payment that was in fact mined would leave the agent room to spend it twice; held, the worst
 * is headroom withheld for that window. Then the row is `reverted` (nothing was paid).
 */
async function nonceTaken(deps: AppDeps, chainId: number, orgId: string, rowId: string, nonce: number, hash: string, tracking: TrackingOptions): Promise<void> {
  markConflict(deps, chainId, orgId, rowId, nonce);
  let seen = takenSince.get(deps);
  if (!seen) takenSince.set(deps, (seen = new Map()));
  const now = deps.now();
  const first = seen.get(rowId);
  if (first === undefined || now < first) {
    seen.set(rowId, now);
    return;
  }
  if (now - first < tracking.replaceAfterMs) return;
  seen.delete(rowId);
  const reason = `Nonce ${nonce} of the treasury was used on chain by a transaction paypolicy did not sign: another process signs for this treasury on chain ${chainId}; nothing was paid`;
  await deps.uow.write((tx) => tx.payments.markReverted(rowId, { hash, blockNumber: null, confirmations: null, networkFeeWei: null }, reason, deps.now()));
}

function markConflict(deps: AppDeps, chainId: number, orgId: string, rowId: string, nonce: number): void {
  const { conflicts, nonces } = deps.submitter;
  if (!conflicts.mark(orgId, chainId, `nonce ${nonce} used by a transaction paypolicy did not sign (payment ${rowId})`)) return;
  nonces.forget(pairKey(orgId, chainId));
  deps.log.error({ orgId, chainId, nonce, transactionId: rowId },
    'another process uses this treasury on this chain: a nonce paypolicy gave out was used by a transaction it did not sign; submission and raw-transaction signing stop there until paypolicy is restarted (one deployment per treasury per chain)');
}

/**
 * One tracking pass for one chain: the submitted rows not yet final, lowest nonce first, bounded
 * by `batch`. For each, the receipts of every version: the one mined decides (confirmed after
 * `confirmations` blocks, or reverted); none mined and the treasury's nonce used = a conflict;
 * none known to the node = dropped, the newest version is broadcast again; known but waiting
 * longer than `replaceAfterMs` = a fee bump, within the policy's current network-fee ceiling.
 */
export async function trackChain(deps: AppDeps, chainId: number, opts: TrackingOptions = DEFAULT_TRACKING): Promise<void> {
  const rows = await deps.store.payments.inFlight(chainId, opts.batch ?? 200);
  if (rows.length === 0) return;
  // The mined nonce is read before the receipts: a version mined in between shows in its receipt,
  // so "nonce used and no receipt of ours" really means someone else's transaction.
  const mined = new Map<string, number>();
  for (const orgId of new Set(rows.map((r) => r.orgId))) {
    const treasury = deps.vault.address(orgId) as Address | undefined;
    if (treasury) mined.set(orgId, await deps.chains.minedNonce(chainId, treasury));
  }
  const latest = await deps.chains.blockNumber(chainId);
  for (const row of rows) {
    const minedNonce = mined.get(row.orgId);
    if (minedNonce === undefined) continue;
    // One row's bad answer (a malformed receipt, a failed call) decides nothing and does not
    // hold back the others: it is tracked again on the next pass.
    try {
      await trackRow(deps, chainId, row, minedNonce, latest, opts);
    } catch (err) {
      deps.log.warn({ transactionId: row.id, chainId, reason: rpcReason(err) }, 'tracking a submitted raw transaction failed this pass; it is tracked again on the next');
    }
  }
}

async function trackRow(deps: AppDeps, chainId: number, row: InFlightRow, minedNonce: number, latest: bigint, opts: TrackingOptions): Promise<void> {
  const signed = JSON.parse(row.result) as SignedPayment;
  if (signed.type !== 'raw_transaction') return;
  const versions = await versionsOf(deps, row.id, signed);
  const receipts = await Promise.all(versions.map((v) => deps.chains.receipt(chainId, v.hash)));
  const at = receipts.findIndex((r) => r !== null);
  if (at >= 0) {
    await settleMined(deps, chainId, row, versions[at]!, receipts[at]!, latest, opts);
    return;
  }
  if (minedNonce > row.nonce) {
    await nonceTaken(deps, chainId, row.orgId, row.id, row.nonce, row.txHash ?? versions[0]!.hash, opts);
    return;
  }
  // On a conflicted pair nothing is sent: no re-broadcast, no fee bump.
  if (deps.submitter.conflicts.has(row.orgId, chainId)) return;
  const known = await Promise.all(versions.map((v) => deps.chains.knows(chainId, v.hash)));
  if (!known.some(Boolean)) {
    await rebroadcastDropped(deps, chainId, row, versions);
    return;
  }
  if (row.broadcastAt !== null && deps.now() - row.broadcastAt >= opts.replaceAfterMs) await bumpFees(deps, chainId, row, versions);
}

async function settleMined(deps: AppDeps, chainId: number, row: InFlightRow, version: Version, receipt: ChainReceipt, latest: bigint, opts: TrackingOptions): Promise<void> {
  // The fee a version can have paid is bounded by what it was signed with: figures beyond that
  // come from a node that is wrong, and decide nothing.
  const signedTx = parseTransaction(version.serialized);
  if (receipt.gasUsed > (signedTx.gas ?? 0n) || receipt.effectiveGasPrice > (signedTx.maxFeePerGas ?? 0n)) {
    throw new Error('the node answered a receipt whose gas used or price exceeds what the transaction was signed with');
  }
  const confirmations = latest >= receipt.blockNumber ? Number(latest - receipt.blockNumber) + 1 : 0;
  const minedVersion = { hash: version.hash, blockNumber: Number(receipt.blockNumber), confirmations, networkFeeWei: (receipt.gasUsed * receipt.effectiveGasPrice).toString() };
  const now = deps.now();
  if (confirmations < opts.confirmations) {
    await deps.uow.write((tx) => tx.payments.markMined(row.id, minedVersion, now));
    return;
  }
  if (version.kind === 'filler') {
    const reason = `${row.reason || 'The node refused the transaction for good'}; nonce ${row.nonce} was used by the no-op transfer in block ${receipt.blockNumber}; nothing was paid`;
    await deps.uow.write((tx) => tx.payments.markReverted(row.id, minedVersion, reason, deps.now()));
  } else if (receipt.status === 'success') {
    await deps.uow.write((tx) => tx.payments.markConfirmed(row.id, minedVersion, deps.now()));
  } else {
    const tx = signedTx;
    const treasury = deps.vault.address(row.orgId) as Address;
    const why = tx.to && tx.data ? await deps.chains.revertReason(chainId, { from: treasury, to: tx.to, data: tx.data, gas: tx.gas ?? 0n }, receipt.blockNumber).catch(() => undefined) : undefined;
    const reason = `Reverted on chain in block ${receipt.blockNumber}${why ? `: ${why}` : ''}; nothing was paid and the hold on the spend cap is released`;
    await deps.uow.write((tx) => tx.payments.markReverted(row.id, minedVersion, reason, deps.now()));
    deps.log.warn({ transactionId: row.id, chainId, txHash: version.hash, reason }, 'a submitted raw transaction reverted on chain');
  }
}

/** No version is known to the node and none is mined: broadcast the newest again (the same bytes). */
async function rebroadcastDropped(deps: AppDeps, chainId: number, row: InFlightRow, versions: Version[]): Promise<void> {
  if (row.submitStatus !== 'dropped') {
    await deps.uow.write((tx) => tx.payments.markDropped(row.id, deps.now()));
    deps.log.warn({ transactionId: row.id, chainId, nonce: row.nonce }, 'the node no longer knows a submitted raw transaction; broadcasting it again');
  }
  const newest = versions[versions.length - 1]!;
  const refusal = await broadcast(deps.chains, chainId, newest.serialized, newest.hash);
  if (refusal !== undefined) {
    deps.log.warn({ transactionId: row.id, chainId, reason: refusal.reason }, 'broadcasting a dropped raw transaction again failed; retried on the next pass');
    return;
  }
  await deps.uow.write((tx) => tx.payments.markAccepted(row.id, newest.hash, newest.kind !== 'original', deps.now()));
}

type BumpRefusal = { policy: string } | { ceilingWei: bigint };

/**
 * Why the policy as it stands refuses a fee bump of `row` to `feeWei` (gas × max fee per gas), or
 * undefined when it allows it. A bump is a new signature by the treasury's key: the agent active,
 * the recipient allowed, the cap with the payment's own hold counted once (the threshold was
 * decided already), as an approved payment is re-checked when collected; and the bumped fee
 * within the network fee ceiling. Inside a write (withinWrite) the agent row is held for it.
 */
async function bumpRefusal(deps: AppDeps, row: InFlightRow, feeWei: bigint, to: Address | null | undefined): Promise<BumpRefusal | undefined> {
  const agent = await deps.store.agents.getForUse(row.agentId);
  const payment = await deps.store.payments.get(row.id);
  if (!agent || !payment) return { policy: 'agent or payment not found' };
  const own = payment.createdAt > deps.now() - CAP_WINDOW_MS ? payment.amountMicros : 0n;
  const verdict = await recheckApproved(deps, agent, payment, own);
  if (verdict.outcome !== 'allowed') return { policy: verdict.outcome === 'denied' ? verdict.reason : 'policy refused' };
  if (feeWei > agent.policy.maxNetworkFeeWei || !to) return { ceilingWei: agent.policy.maxNetworkFeeWei };
  return undefined;
}

/** Logs a refused bump once per row (policy) or per row and fee level (ceiling). */
function logBumpRefusal(deps: AppDeps, chainId: number, rowId: string, refused: BumpRefusal, gas: bigint, maxFee: bigint): void {
  const logged = ceilingLogged.get(deps) ?? new Set<string>();
  ceilingLogged.set(deps, logged);
  const key = 'policy' in refused ? `${rowId}:policy` : `${rowId}:${maxFee}`;
  if (logged.has(key)) return;
  logged.add(key);
  if ('policy' in refused) {
    deps.log.warn({ transactionId: rowId, chainId, reason: refused.policy },
      'a submitted raw transaction is waiting, but the agent\'s policy no longer allows the payment, so no fee bump is signed; it stays as it is');
  } else {
    deps.log.warn({ transactionId: rowId, chainId, gas: String(gas), maxFeePerGas: String(maxFee), ceilingWei: String(refused.ceilingWei) },
      'a submitted raw transaction is waiting, but a fee bump would exceed the policy\'s network fee ceiling; it stays as it is');
  }
}

/** Rows (by id, and by fee level for the ceiling) whose bump was refused: logged once. */
const ceilingLogged = new WeakMap<AppDeps, Set<string>>();

/**
 * Replaces a version waiting too long by one with the same nonce and higher fees: both fees at
 * least +12.5% (nodes want +10%), only if gas × max fee per gas stays within the agent's network
 * fee ceiling as the policy says now. Otherwise nothing is sent and the wait is logged once.
 */
async function bumpFees(deps: AppDeps, chainId: number, row: InFlightRow, versions: Version[]): Promise<void> {
  const newest = versions[versions.length - 1]!;
  const tx = parseTransaction(newest.serialized);
  const gas = tx.gas ?? 0n;
  const maxFee = tx.maxFeePerGas ?? 0n;
  const priority = tx.maxPriorityFeePerGas ?? 0n;
  const bumpedMax = maxFee + (maxFee + 7n) / 8n;
  const bumpedPriority = priority + (priority + 7n) / 8n;
  const refused = await bumpRefusal(deps, row, gas * bumpedMax, tx.to);
  if (refused) {
    logBumpRefusal(deps, chainId, row.id, refused, gas, maxFee);
    return;
  }
  // Checked again in the write that records the bump: a pause or a lowered ceiling acknowledged
  // while the signing thread worked drops the signature unseen (logged by the next pass).
  const version = await signVersion(deps, row.id, row.orgId, 'bump', {
    chainId, nonce: row.nonce, to: tx.to!, data: tx.data ?? '0x', gas, maxFeePerGas: bumpedMax, maxPriorityFeePerGas: bumpedPriority,
  }, undefined, async (inTx) => (await bumpRefusal(inTx, row, gas * bumpedMax, tx.to)) === undefined);
  if (!version) return;
  const refusal = await broadcast(deps.chains, chainId, version.serialized, version.hash);
  if (refusal !== undefined) {
    deps.log.warn({ transactionId: row.id, chainId, reason: refusal.reason }, 'broadcasting a fee bump failed; retried on the next pass');
    return;
  }
  await deps.uow.write((tx) => tx.payments.markAccepted(row.id, version.hash, true, deps.now()));
  deps.log.info({ transactionId: row.id, chainId, replaced: newest.hash, by: version.hash, maxFeePerGas: String(bumpedMax) }, 'replaced a waiting raw transaction by a fee bump with the same nonce');
}

/** Rows one submitPending call takes. */
const SUBMIT_BATCH = 100;

/**
 * The background loop every `intervalMs`: per chain, broadcast what waits (submitPending), then
 * track what was submitted (trackChain). One pass at a time per chain, chains independent, so a
 * slow node holds back only its own chain; every RPC call is bounded. `stop` ends it.
 */
export function startSubmitter(
  deps: AppDeps, intervalMs: number, tracking: TrackingOptions = DEFAULT_TRACKING,
  /** Several replicas on one database: a chain's pass runs on one replica at a time (store/pg/cluster.ts once). */
  exclusive: (job: string, fn: () => Promise<void>) => Promise<void> = (_job, fn) => fn(),
): { stop: () => void } {
  const running = new Set<number>();
  const pass = () => {
    for (const chainId of deps.chains.chainIds()) {
      if (running.has(chainId)) continue;
      running.add(chainId);
      exclusive(`submit:${chainId}`, async () => {
        // A full batch means more may wait (a backlog after an outage): keep going in this pass
        // rather than 100 rows per interval.
        let n = 0;
        // (The batch is per organization, so a pass can send more than one batch's worth.)
        for (let got = SUBMIT_BATCH; got >= SUBMIT_BATCH;) {
          got = await submitPending(deps, chainId, SUBMIT_BATCH, tracking);
          n += got;
        }
        if (n > 0) deps.log.info({ chainId, submitted: n }, 'submitted raw transactions waiting for broadcast');
        await trackChain(deps, chainId, tracking);
      })
        .catch((err: unknown) => deps.log.error({ chainId, reason: rpcReason(err) }, 'background submission failed'))
        .finally(() => running.delete(chainId));
    }
  };
  const timer = setInterval(pass, intervalMs);
  timer.unref();
  // At start, rows left pending, submitted or dropped by the previous run are picked up at once.
  setImmediate(pass);
  return { stop: () => clearInterval(timer) };
}

/** How far ahead of the ledger's counter a node's pending nonce is believed (a treasury's own history). */
export const MAX_NONCE_JUMP = 1_000_000;

/**
 * The submitter of one running app: what the request path hands it (submitter.ts), on the app's
 * RPC registry and unit of work. The background passes (startSubmitter) read its state through
 * the app's deps.
 */
export function createSubmitter(app: { chains: ChainRpc; uow: UnitOfWork; log: Logger; now: () => number }): Submitter {
  const { chains, uow, log, now } = app;
  const conflicts = new ChainConflicts();
  const nonces = new ReconciledNonces();
  return {
    conflicts,
    nonces,
    broadcasts: (chainId) => chains.has(chainId),
    // Undefined when already reconciled, when the chain has no endpoint, or when the node did not
    // answer (the ledger's counter is used and the next reservation asks again).
    async nonceFloor(orgId, chainId, treasury) {
      if (!chains.has(chainId)) return undefined;
      conflicts.refuse(orgId, chainId);
      if (nonces.has(orgId, chainId)) return undefined;
      try {
        return await chains.pendingNonce(chainId, treasury);
      } catch (err) {
        log.warn({ orgId, chainId, reason: rpcReason(err) }, 'reading the treasury nonce from the node failed; using the ledger');
        return undefined;
      }
    },
    // Marked reconciled only by the caller once the write has committed, never inside it: the
    // write may be rolled back or run again.
    async applyNonceFloor(payments, orgId, chainId, floor) {
      if (floor === undefined) return false;
      // The counter never goes down, so one wrong answer would make every later transaction of this
      // treasury unmineable: a floor implausibly far ahead of the ledger is not believed.
      const counter = await payments.nonceCounter(orgId, chainId);
      if (!Number.isSafeInteger(floor) || floor < 0 || floor > counter + MAX_NONCE_JUMP) {
        log.warn({ orgId, chainId, nodeNonce: String(floor), ledgerNonce: counter }, 'the node reports a pending nonce implausibly far ahead of the ledger; not trusted, using the ledger');
        return false;
      }
      await payments.raiseNonceFloor(orgId, chainId, floor);
      return true;
    },
    markNonceSynced: (orgId, chainId) => nonces.add(orgId, chainId),
    // A node that refuses it but already knows it (an earlier broadcast whose answer was lost)
    // counts as accepted.
    async broadcastSettled(rowId, tx) {
      if (!chains.has(tx.chainId)) return null;
      const refusal = await broadcast(chains, tx.chainId, tx.serialized, tx.hash);
      if (refusal !== undefined) {
        log.warn({ transactionId: rowId, chainId: tx.chainId, reason: refusal.reason }, 'broadcasting a raw transaction failed; the background submitter retries it');
        return null;
      }
      await uow.write(async (w) => {
        if (await w.payments.markSubmitted(rowId, tx.hash, now())) await w.payments.startBroadcastTimer(rowId, now());
      });
      return tx.hash;
    },
  };
}
