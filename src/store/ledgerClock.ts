import { readFileSync } from 'node:fs';

/**
 * The ledger's clock: the time every cap window, approval expiry and validity window is measured
 * in. The wall clock can jump (an operator's `date -s`, a bad NTP step, a VM restored from a
 * snapshot); a +25 h jump would empty an agent's rolling 24-hour window at once, and a backward
 * jump would freeze it. So the ledger clock never reads the wall clock while the process runs: it
 * advances by the system's monotonic clock from an anchor taken at start.
 *
 * The rule at start:
 * - Same boot as the previous start (the kernel's boot id matches the stored anchor): continue
 *   from the stored anchor by the monotonic time elapsed since it, so a wall-clock change while
 *   paypolicy was stopped changes nothing.
 * - Otherwise (first start, or the machine rebooted, which resets the monotonic clock): the wall
 *   clock, but never earlier than the newest time already in the ledger.
 * The monotonic clock does not advance while the machine is suspended; servers are not.
 *
 * Signatures are the exception: their validity is measured from `validityNow`, the earlier of the
 * wall clock and the ledger clock. A validity end is an absolute time that a chain or facilitator
 * compares with real time, and a ledger clock anchored to a wrong wall clock (a start before NTP
 * stepped it, then restarts in the same boot) would carry the error into every end. Whichever of
 * the two is wrong, the earlier one errs towards the past: an end comes early, never late, and a
 * start (x402 v1 `validAfter`) lies further back, which lengthens nothing since the end is fixed.
 * When the clocks agree the two readings are the same and nothing changes.
 */

/** A point where ledger time and the system's monotonic clock were read together. */
export type LedgerAnchor = { bootId: string; monotonicMs: number; ledgerMs: number };

export type ClockSources = {
  wallMs: () => number;
  /** System-wide monotonic milliseconds (CLOCK_MONOTONIC: shared by every process of one boot). */
  monotonicMs: () => number;
  bootId: () => string;
};

export type LedgerClock = {
  /** Integer epoch milliseconds; never decreases. */
  now: () => number;
  /** The anchor to persist for the next start. */
  anchor: LedgerAnchor;
  /** How the start time was chosen, for the start-up log line. */
  rule: 'same_boot' | 'wall_clock' | 'ledger_floor';
  /** Wall clock minus ledger clock now, in ms (positive: the wall clock is ahead). */
  skewMs: () => number;
  /** Integer epoch milliseconds every signature's validity is measured from: the earlier of the wall and the ledger clock. */
  validityNow: () => number;
};

export const systemClockSources: ClockSources = {
  wallMs: () => Date.now(),
  monotonicMs: () => Number(process.hrtime.bigint() / 1000n) / 1000,
  bootId: () => {
    try {
      return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
    } catch {
      // Without a boot id every start is treated as after a reboot: wall clock, floored.
      return '';
    }
  },
};

/** Starts the ledger clock from the previous anchor (if any) and the newest ledger time. */
export function startLedgerClock(previous: LedgerAnchor | undefined, newestLedgerMs: number, src: ClockSources = systemClockSources): LedgerClock {
  const bootId = src.bootId();
  const mono0 = src.monotonicMs();
  const wall = src.wallMs();
  let start: number;
  let rule: LedgerClock['rule'];
  if (previous && bootId !== '' && previous.bootId === bootId && mono0 >= previous.monotonicMs) {
    start = previous.ledgerMs + (mono0 - previous.monotonicMs);
    rule = 'same_boot';
  } else if (wall >= newestLedgerMs) {
    start = wall;
    rule = 'wall_clock';
  } else {
    start = newestLedgerMs;
    rule = 'ledger_floor';
  }
  start = Math.max(Math.floor(start), newestLedgerMs);
  const now = () => start + Math.floor(src.monotonicMs() - mono0);
  return {
    now, anchor: { bootId, monotonicMs: mono0, ledgerMs: start }, rule,
    skewMs: () => src.wallMs() - now(),
    validityNow: () => Math.min(Math.floor(src.wallMs()), now()),
  };
}

export function parseAnchor(text: string | undefined): LedgerAnchor | undefined {
  if (text === undefined) return undefined;
  try {
    const a = JSON.parse(text) as Partial<LedgerAnchor>;
    if (typeof a.bootId === 'string' && Number.isFinite(a.monotonicMs) && Number.isSafeInteger(a.ledgerMs)) return a as LedgerAnchor;
  } catch {
    // A damaged anchor only costs continuity: start from the wall clock, floored by the ledger.
  }
  return undefined;
}

const ANCHOR_KEY = 'ledger_clock_anchor';

/**
 * Starts the ledger clock for a store and durably records its anchor before anything is written
 * with it, so the next start of the same boot continues exactly where this one is.
 */
export function openLedgerClock(
  store: { settings: { get(k: string): string | undefined; set(k: string, v: string): void }; payments: { newestTime(): number } },
  commit: (fn: () => void) => void,
  src: ClockSources = systemClockSources,
): LedgerClock {
  const clock = startLedgerClock(parseAnchor(store.settings.get(ANCHOR_KEY)), store.payments.newestTime(), src);
  commit(() => store.settings.set(ANCHOR_KEY, JSON.stringify(clock.anchor)));
  return clock;
}
