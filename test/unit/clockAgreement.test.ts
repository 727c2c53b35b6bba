import { describe, expect, test } from 'vitest';
import { createLogger } from '../../src/observability/logger.js';
import { watchClockAgreement } from '../../src/observability/clockAgreement.js';

const DAY_MS = 86_400_000;

/** A watcher on a skew the test sets, logging into an array of parsed lines. */
function watched() {
  const state = { skewMs: 0 };
  const lines: Array<{ level: number; msg: string; skewMs: number }> = [];
  const log = createLogger('info', { write: (line: string) => void lines.push(JSON.parse(line)) });
  return { state, lines, agreement: watchClockAgreement(() => state.skewMs, log) };
}

describe('watchClockAgreement', () => {
  test('behavior: one line when the clocks start to disagree and one when they agree again, however often it is checked', () => {
    const { state, lines, agreement } = watched();
    expect(agreement.check()).toEqual({ ok: true, skew_seconds: 0, tolerance_seconds: 60, detail: 'wall clock and ledger clock agree' });
    state.skewMs = -DAY_MS;
    for (let i = 0; i < 5; i++) {
      expect(agreement.check()).toMatchObject({ ok: false, skew_seconds: -86_400, detail: expect.stringContaining('wall clock behind the ledger clock by 86400 s') });
    }
    state.skewMs = DAY_MS; // still apart, the other way: the same disagreement
    expect(agreement.check().ok).toBe(false);
    state.skewMs = 500;
    for (let i = 0; i < 5; i++) expect(agreement.check().ok).toBe(true);
    expect(lines.map((l) => [l.msg.split(':')[0], l.skewMs])).toEqual([
      ['the wall clock and the ledger clock disagree', -DAY_MS],
      ['the wall clock and the ledger clock agree again', 500],
    ]);
    expect(lines.every((l) => l.level === 40)).toBe(true);
  });

  test('behavior: the tolerance is inclusive: exactly 60 s apart still agree', () => {
    const { state, lines, agreement } = watched();
    state.skewMs = 60_000;
    expect(agreement.check().ok).toBe(true);
    state.skewMs = -60_001;
    expect(agreement.check().ok).toBe(false);
    expect(lines).toHaveLength(1);
  });
});
