import type { Address, Hex } from 'viem';
import { DomainError } from '../domain/errors.js';
import type { StoreTables } from '../store/port.js';

/**
 * What the request path hands to on-chain submission (docs/onchain.md), and the state about each
 * (organization, chain) pair that both sides share. The use cases that sign raw transactions
 * (payments, approvals) see only this contract; submission/submit.ts implements it and runs the
 * background broadcast and tracking. One submitter per running app, created with it
 * (paypolicy.ts) and living as long as it.
 */
export interface Submitter {
  /** The pairs where another process signs for the treasury: nothing more is signed or sent there. */
  readonly conflicts: ChainConflicts;
  /** The pairs whose nonce counter was reconciled with the node's pending nonce in this process. */
  readonly nonces: ReconciledNonces;
  /** Whether raw transactions on `chainId` are broadcast by this service (it has an RPC endpoint there). */
  broadcasts(chainId: number): boolean;
  /**
   * The node's pending nonce for the treasury, asked once per pair and process before the first
   * reservation there; refuses a conflicted pair (409 treasury_conflict). Asked outside any write.
   */
  nonceFloor(orgId: string, chainId: number, treasury: Address): Promise<number | undefined>;
  /**
   * Raises the ledger's nonce counter to a floor from nonceFloor, inside the write that reserves the
   * nonce. True when applied: once that write has committed, the caller calls markNonceSynced.
   */
  applyNonceFloor(payments: StoreTables['payments'], orgId: string, chainId: number, floor: number | undefined): Promise<boolean>;
  /** The pair's counter is reconciled with the node: later reservations there ask it no more. */
  markNonceSynced(orgId: string, chainId: number): void;
  /**
   * Broadcasts a raw transaction whose settling commit is durable (never before: invariant 2) and
   * records the hash once a node accepted it. Null when not accepted now: the background submitter
   * retries it.
   */
  broadcastSettled(rowId: string, tx: RawTransaction): Promise<Hex | null>;
}

/** What a signed raw transaction carries that submission needs. */
export type RawTransaction = { chainId: number; serialized: Hex; hash: Hex };

/** One (organization, chain) pair as a key; NUL-separated, as store/pg/conflicts.ts stores it. */
export const pairKey = (orgId: string, chainId: number): string => `${orgId}\u0000${chainId}`;

/**
 * (organization, chain) pairs where a transaction that is none of ours used a nonce this ledger
 * gave out: another process signs for the treasury there. Nothing more is submitted or signed as a
 * raw transaction there until a restart (docs/onchain.md). On PostgreSQL the replicas share them
 * through `shared`, which the replica sync (store/pg/conflicts.ts) reads and adopts into.
 */
export class ChainConflicts {
  /** Pair key → what was seen. */
  readonly shared = new Map<string, string>();

  has(orgId: string, chainId: number): boolean {
    return this.shared.has(pairKey(orgId, chainId));
  }

  /** Records a conflict; false when the pair was conflicted already. */
  mark(orgId: string, chainId: number, seen: string): boolean {
    const key = pairKey(orgId, chainId);
    if (this.shared.has(key)) return false;
    this.shared.set(key, seen);
    return true;
  }

  /** Refuses a new raw transaction on a conflicted pair (409 treasury_conflict): it could only be given a nonce another process may also use. */
  refuse(orgId: string, chainId: number): void {
    if (!this.has(orgId, chainId)) return;
    throw new DomainError('conflict',
      `Another process uses this organization's treasury on chain ${chainId} (a transaction paypolicy did not sign used one of its nonces); raw transactions there are refused until an operator stops the other signer and restarts paypolicy`,
      { code: 'treasury_conflict' });
  }
}

/**
 * (organization, chain) pairs whose nonce counter was reconciled with the node's pending nonce in
 * this process, so later reservations there do not ask the node again. A conflict forgets its pair.
 */
export class ReconciledNonces {
  readonly #pairs = new Set<string>();

  has(orgId: string, chainId: number): boolean {
    return this.#pairs.has(pairKey(orgId, chainId));
  }

  add(orgId: string, chainId: number): void {
    this.#pairs.add(pairKey(orgId, chainId));
  }

  /** Forgets a pair by its key (pairKey), as conflicts name it. */
  forget(pair: string): void {
    this.#pairs.delete(pair);
  }
}
