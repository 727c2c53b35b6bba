import { randomBytes } from 'node:crypto';
import type { AppDeps } from '../../src/app/deps.js';
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
 * a silent logger, empty in-flight and stranded maps, the default probe rules, an offer cache and
 * the default Tempo fees, all on `now` (default the real clock; signatures' validity too). Override any field.
 */
export function testDeps(store: Store, overrides: Partial<AppDeps> = {}): AppDeps {
  const now = overrides.now ?? Date.now;
  const log = createLogger('silent', { write: () => {} });
  return {
    store: store.app,
    uow: createUnitOfWork(store),
    vault: createTreasuryVault(store.treasuryKeys, randomBytes(32)),
    signer: NO_SIGNER,
    now,
    validityNow: now,
    log,
    inflight: new Map(),
    stranded: new Map(),
    probe: defaultSafeFetchOptions,
    offers: createOfferCache(now),
    tempoFees: createTempoFeeSource(undefined, log),
    chains: createChainRpc(),
    nonceSynced: new Set(),
    chainConflicts: new Map(),
    ...overrides,
  };
}
