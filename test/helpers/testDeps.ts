import { randomBytes } from 'node:crypto';
import type { AppDeps } from '../../src/app/deps.js';
import { SignsInFlight } from '../../src/app/signsInFlight.js';
import { StrandedPayments } from '../../src/app/strandedPayments.js';
import { createSubmitter } from '../../src/app/submission/submit.js';
import { createLogger } from '../../src/observability/logger.js';
import { createOfferCache } from '../../src/paywalls/offerCache.js';
import { defaultSafeFetchOptions } from '../../src/paywalls/safeFetch.js';
import type { SignerPool } from '../../src/signing/signerPool.js';
import { createTempoFeeSource } from '../../src/signing/tempoFees.js';
import { createTreasuryVault } from '../../src/signing/treasury.js';
import { createChainRpc } from '../../src/chain/rpc.js';
import type { Store } from '../../src/store/store.js';
import { createUnitOfWork } from '../../src/store/unitOfWork.js';

/**
 * A signer for use-case tests that never sign: any signing attempt fails the test loudly. Tests that
 * sign start the real server (helpers/server.ts), whose signing threads are real.
 */
const NO_SIGNER: SignerPool = {
  sign: () => Promise.reject(new Error('testDeps: this test has no signer; start a real server to sign')),
  admit: () => {
    throw new Error('testDeps: this test has no signer; start a real server to sign');
  },
  threads: () => [],
  maxQueueMs: 0,
  stage: () => ({ inFlight: 0, limit: 0 }),
  close: async () => {},
};

/**
 * Every AppDeps field, typed, for use-case tests on a real store: a vault over a fresh master key,
 * a silent logger, no sign requests in flight and no stranded payments, a submitter on the given chains, the default probe rules, an offer cache and
 * the default Tempo fees, all on `now` (default the real clock; signatures' validity too). Override any field.
 */
export function testDeps(store: Store, overrides: Partial<AppDeps> = {}): AppDeps {
  const now = overrides.now ?? Date.now;
  const log = overrides.log ?? createLogger('silent', { write: () => {} });
  const uow = overrides.uow ?? createUnitOfWork(store);
  const chains = overrides.chains ?? createChainRpc();
  return {
    store: store.app,
    uow,
    vault: createTreasuryVault(store.treasuryKeys, randomBytes(32)),
    signer: NO_SIGNER,
    now,
    validityNow: now,
    log,
    inflight: new SignsInFlight(),
    stranded: new StrandedPayments({ uow, now, log, failed: () => store.app.failure() !== undefined }),
    probe: defaultSafeFetchOptions,
    offers: createOfferCache(now),
    tempoFees: createTempoFeeSource(undefined, log),
    chains,
    submitter: createSubmitter({ chains, uow, log, now }),
    ...overrides,
  };
}
