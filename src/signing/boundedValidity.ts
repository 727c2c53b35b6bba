import { DomainError } from '../domain/errors.js';
import { VALIDITY_SECONDS } from '../domain/paymentRequest.js';
import type { SignJob } from './signJobs.js';

/**
 * The longest any signature the treasury makes may stay usable: the direct types' upper bound
 * (`valid_for_seconds` ≤ 86,400). A paywall's own timeout (x402 `maxTimeoutSeconds`, an MPP
 * challenge's `expires`) can only shorten it.
 */
export const MAX_SIGNED_VALIDITY_SECONDS = VALIDITY_SECONDS.max;

/** The job's validity end in Unix seconds (EIP-3009 validBefore, Permit2 deadline, Tempo validBefore); null when it has none. */
function validUntil(job: SignJob): bigint | null {
  switch (job.kind) {
    case 'eip3009':
      return job.message.validBefore;
    case 'permit2':
      return job.message.deadline;
    case 'tempo':
      return BigInt(job.tx.validBefore);
    case 'eip1559':
      // An EIP-1559 transaction has no expiry; its nonce bounds it instead.
      return null;
  }
}

/**
 * The last gate before the signer: refuses a job whose validity would end more than
 * MAX_SIGNED_VALIDITY_SECONDS after `validityNowSeconds`, whichever builder made it. Builders
 * already bound their windows; this keeps a future builder (or a bug) from signing a long-lived
 * payment. `validityNowSeconds` must be read from the validity clock (AppDeps.validityNow, the
 * earlier of the wall and the ledger clock), the same reading the builders were given: measured
 * from the later clock, the gate would pass an end the wrong clock had stretched.
 */
export function assertBoundedValidity(job: SignJob, validityNowSeconds: number): void {
  const until = validUntil(job);
  if (until !== null && until > BigInt(validityNowSeconds) + BigInt(MAX_SIGNED_VALIDITY_SECONDS)) {
    throw new DomainError('internal', `refusing to sign: validity ends ${until - BigInt(validityNowSeconds)} s from now, beyond ${MAX_SIGNED_VALIDITY_SECONDS} s`);
  }
}
