import type { SignJob } from '../../src/signing/signJobs.js';
import type { SignerPool } from '../../src/signing/signerPool.js';

/** Signing jobs held back, as behind a stalled signing thread. */
export type HeldSigning = {
  /** Jobs held so far. */
  parked: () => number;
  /** Resolves once `n` jobs are held. */
  reached: (n: number) => Promise<void>;
  /** A promise of the next held job, for waiting on that or something else. */
  next: () => Promise<void>;
  /** Signs every held job, and every later one at once. */
  release: () => void;
};

/** Holds every signing job that `which` picks (default: all) until `release`; the others sign. */
export function holdSigning(signer: SignerPool, which: (job: SignJob) => boolean = () => true): HeldSigning {
  const sign = signer.sign;
  let parked = 0;
  let wake: (() => void) | undefined;
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  signer.sign = async (job) => {
    if (which(job)) {
      parked++;
      wake?.();
      await released;
    }
    return sign(job);
  };
  const next = () => new Promise<void>((r) => (wake = r));
  return {
    parked: () => parked,
    async reached(n) {
      while (parked < n) await next();
    },
    next,
    release() {
      release();
      signer.sign = sign;
    },
  };
}
