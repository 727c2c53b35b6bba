import type { Logger } from 'pino';
import type { SignerPool } from '../signing/signerPool.js';
import type { TreasuryVault } from '../signing/treasury.js';
import type { AppStore } from '../store/asyncStore.js';
import type { OfferCache } from '../paywalls/offerCache.js';
import type { SafeFetchOptions } from '../paywalls/safeFetch.js';
import type { TempoFeeSource } from '../signing/tempoFees.js';
import type { UnitOfWork } from './unitOfWork.js';
import type { ChainRpc } from '../chain/rpc.js';

/** What every use case may touch. `now` is injected so tests can move the clock. */
export type AppDeps = {
  /**
   * The table groups for reads of committed data outside a write (asyncStore.ts); every write,
   * and every read a write depends on, goes through `uow` and its `tx`.
   */
  store: AppStore;
  /** Atomic, durable writes and read snapshots; see unitOfWork.ts. */
  uow: UnitOfWork;
  vault: TreasuryVault;
  signer: SignerPool;
  /** The ledger clock (store/ledgerClock.ts): cap windows, expiries, row times. */
  now: () => number;
  /**
   * What every signature's validity window is measured from (validBefore, Permit2 deadline, Tempo
   * validBefore, x402 ends and starts, paywall challenge expiry): the earlier of the wall clock
   * and the ledger clock, so no signature outlives its window in real time whichever is wrong.
   */
  validityNow: () => number;
  log: Logger;
  /**
   * Sign requests in flight per (agent, Idempotency-Key): concurrent duplicates wait for the first
   * and then replay its stored outcome, so they never race to create a second transaction.
   */
  inflight: Map<string, Promise<unknown>>;
  /**
   * Payments (id → reason) left in `signing` because the write that should have ended them (settling
   * the signature, or releasing the reservation) failed, e.g. on a full disk. The sweep and the
   * next successful settle release them (sign.ts releaseStranded), so they do not hold the cap
   * until a restart.
   */
  stranded: Map<string, string>;
  /** Outbound probe settings: SSRF rules, timeouts, the test-only host allow-list. */
  probe: SafeFetchOptions;
  /** Parsed offers reused by quote for 60 s per (organization, url, method). */
  offers: OfferCache;
  /** Gas and fee values for MPP payments: a configured Tempo RPC, else documented defaults. */
  tempoFees: TempoFeeSource;
  /** Configured EVM RPC endpoints (--rpc-url): raw transactions on these chains are submitted (submit.ts). */
  chains: ChainRpc;
  /** (organization, chain) pairs whose nonce counter was reconciled with the node's pending nonce in this process. */
  nonceSynced: Set<string>;
  /**
   * (organization, chain) pairs where a transaction that is none of ours used a nonce this ledger
   * gave out: another process signs for the treasury there. Nothing more is submitted or signed as
   * a raw transaction there until a restart (docs/onchain.md); value: what was seen.
   */
  chainConflicts: Map<string, string>;
};
