import type { Logger } from 'pino';
import type { SignerPool } from '../signing/signerPool.js';
import type { TreasuryVault } from '../signing/treasury.js';
import type { AppStore, UnitOfWork } from '../store/port.js';
import type { OfferCache } from '../paywalls/offerCache.js';
import type { SafeFetchOptions } from '../paywalls/safeFetch.js';
import type { TempoFeeSource } from '../signing/tempoFees.js';
import type { ChainRpc } from '../chain/rpc.js';
import type { SignsInFlight } from './signsInFlight.js';
import type { StrandedPayments } from './strandedPayments.js';
import type { Submitter } from './submitter.js';

/** What every use case may touch. `now` is injected so tests can move the clock. */
export type AppDeps = {
  /**
   * The table groups for reads of committed data outside a write (store/port.ts); every write,
   * and every read a write depends on, goes through `uow` and its `tx`.
   */
  store: AppStore;
  /** Atomic, durable writes and read snapshots; see store/port.ts. */
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
  /** Sign requests in flight per (agent, Idempotency-Key); see signsInFlight.ts. */
  inflight: SignsInFlight;
  /** Payments a failed write left in `signing`, released once writes succeed again; see strandedPayments.ts. */
  stranded: StrandedPayments;
  /** Outbound probe settings: SSRF rules, timeouts, the test-only host allow-list. */
  probe: SafeFetchOptions;
  /** Parsed offers reused by quote for 60 s per (organization, url, method). */
  offers: OfferCache;
  /** Gas and fee values for MPP payments: a configured Tempo RPC, else documented defaults. */
  tempoFees: TempoFeeSource;
  /** Configured EVM RPC endpoints (--rpc-url): raw transactions on these chains are submitted (submitter). */
  chains: ChainRpc;
  /** The request path's handle on on-chain submission, with its per-(organization, chain) state; see submitter.ts. */
  submitter: Submitter;
};
