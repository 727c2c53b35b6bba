import type { Logger } from 'pino';

/**
 * Whether the wall clock and the ledger clock (store/ledgerClock.ts) agree. They drift apart only
 * when the wall clock is stepped (an NTP correction after start, `date -s`) or when the ledger
 * clock continues an anchor taken from a wrong wall clock. Signing stays safe either way (validity
 * is measured from the earlier clock, so a signature may end early, never late), but cap windows
 * and expiries follow the ledger clock, so an operator must hear of it: /readyz reports
 * `degraded`, /metrics carries the skew, and the log gets one line when the disagreement starts
 * and one when it ends, not one per check.
 */

/** Beyond this the clocks disagree. NTP slews both by the same rate, so in normal operation they stay within a second. */
export const CLOCK_SKEW_TOLERANCE_MS = 60_000;

export type ClockAgreementCheck = {
  ok: boolean;
  /** Wall clock minus ledger clock, in whole seconds (positive: the wall clock is ahead). */
  skew_seconds: number;
  tolerance_seconds: number;
  detail: string;
};

export type ClockAgreement = {
  /** Reads both clocks; logs if this reading starts or ends a disagreement. */
  check: () => ClockAgreementCheck;
};

/** Watches `skewMs` (wall minus ledger); every reader of the state calls `check`, so the first to notice a change logs it. */
export function watchClockAgreement(skewMs: () => number, log: Logger, toleranceMs = CLOCK_SKEW_TOLERANCE_MS): ClockAgreement {
  let disagreeing = false;
  return {
    check() {
      const skew = skewMs();
      const ok = Math.abs(skew) <= toleranceMs;
      // Both lines at warn: an operator who saw the first must be able to see it cleared.
      if (!ok && !disagreeing) {
        log.warn({ skewMs: skew, toleranceMs }, 'the wall clock and the ledger clock disagree: signatures are valid from the earlier of the two (they may end early, never late); cap windows and expiries follow the ledger clock');
      } else if (ok && disagreeing) {
        log.warn({ skewMs: skew, toleranceMs }, 'the wall clock and the ledger clock agree again');
      }
      disagreeing = !ok;
      const skewSeconds = Math.round(skew / 1000);
      return {
        ok,
        skew_seconds: skewSeconds,
        tolerance_seconds: toleranceMs / 1000,
        detail: ok
          ? 'wall clock and ledger clock agree'
          : `wall clock ${skewSeconds > 0 ? 'ahead of' : 'behind'} the ledger clock by ${Math.abs(skewSeconds)} s: signatures are valid from the earlier of the two`,
      };
    },
  };
}
