import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import { writeTxn } from '../../src/store/db.js';
import { openLedgerClock, parseAnchor, startLedgerClock, type ClockSources } from '../../src/store/ledgerClock.js';
import { openStore } from '../../src/store/store.js';

const HOUR = 3_600_000;

/** A machine whose wall clock, monotonic clock and boot id the test sets. */
function machine(init: { wall: number; mono: number; boot?: string }) {
  const m = { wall: init.wall, mono: init.mono, boot: init.boot ?? 'boot-1' };
  const src: ClockSources = { wallMs: () => m.wall, monotonicMs: () => m.mono, bootId: () => m.boot };
  /** Real time passes: both clocks move together. */
  const elapse = (ms: number) => {
    m.wall += ms;
    m.mono += ms;
  };
  return { m, src, elapse };
}

describe('startLedgerClock', () => {
  test('behavior: a wall-clock jump while running moves nothing; real elapsed time does', () => {
    const { m, src, elapse } = machine({ wall: 1_000_000, mono: 50 });
    const clock = startLedgerClock(undefined, 0, src);
    expect(clock.rule).toBe('wall_clock');
    expect(clock.now()).toBe(1_000_000);
    m.wall += 25 * HOUR;
    expect(clock.now()).toBe(1_000_000);
    expect(clock.skewMs()).toBe(25 * HOUR);
    m.wall -= 50 * HOUR;
    elapse(1500);
    expect(clock.now()).toBe(1_001_500);
  });

  test('behavior: a restart in the same boot continues by monotonic time, whatever the wall clock says', () => {
    const { m, src, elapse } = machine({ wall: 1_000_000, mono: 50 });
    const first = startLedgerClock(undefined, 0, src);
    elapse(10_000);
    m.wall += 25 * HOUR; // set forward while stopped
    const second = startLedgerClock(first.anchor, 1_005_000, src);
    expect(second.rule).toBe('same_boot');
    expect(second.now()).toBe(1_010_000);
    m.wall -= 48 * HOUR; // and backward
    const third = startLedgerClock(second.anchor, 1_010_000, src);
    expect(third.now()).toBe(1_010_000);
  });

  test('behavior: after a reboot the wall clock is used, but never earlier than the newest ledger time', () => {
    const { m, src } = machine({ wall: 5_000_000, mono: 10, boot: 'boot-2' });
    const anchor = { bootId: 'boot-1', monotonicMs: 999_999, ledgerMs: 4_000_000 };
    expect(startLedgerClock(anchor, 4_500_000, src)).toMatchObject({ rule: 'wall_clock' });
    expect(startLedgerClock(anchor, 4_500_000, src).now()).toBe(5_000_000);
    m.wall = 3_000_000; // the machine came back with a clock set in the past
    const clock = startLedgerClock(anchor, 4_500_000, src);
    expect(clock.rule).toBe('ledger_floor');
    expect(clock.now()).toBe(4_500_000);
  });

  test('behavior: a monotonic clock behind the anchor (an impossible same-boot reading) falls back to the floored wall clock', () => {
    const { src } = machine({ wall: 2_000_000, mono: 5 });
    const clock = startLedgerClock({ bootId: 'boot-1', monotonicMs: 100, ledgerMs: 9_000_000 }, 1_000_000, src);
    expect(clock.rule).toBe('wall_clock');
    expect(clock.now()).toBe(2_000_000);
  });

  test('behavior: now() is an integer that never decreases', () => {
    const { m, src } = machine({ wall: 1_000_000, mono: 0.25 });
    const clock = startLedgerClock(undefined, 0, src);
    let last = clock.now();
    for (const step of [0.3, 0.4, 1.7, 0, 2.9]) {
      m.mono += step;
      m.wall -= 1000;
      const t = clock.now();
      expect(Number.isInteger(t)).toBe(true);
      expect(t).toBeGreaterThanOrEqual(last);
      last = t;
    }
  });
});

describe('parseAnchor', () => {
  test('error: damaged anchors are ignored', () => {
    for (const text of [undefined, '', 'null', '{', '{"bootId":1}', '{"bootId":"a","monotonicMs":"x","ledgerMs":1}', '{"bootId":"a","monotonicMs":1,"ledgerMs":1.5}']) {
      expect(parseAnchor(text)).toBeUndefined();
    }
    expect(parseAnchor('{"bootId":"a","monotonicMs":1.5,"ledgerMs":7}')).toEqual({ bootId: 'a', monotonicMs: 1.5, ledgerMs: 7 });
  });
});

describe('openLedgerClock', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  test('behavior: the anchor is stored durably, so a restart on the same file continues the clock', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'paypolicy-clock-'));
    dirs.push(dir);
    const file = join(dir, 'paypolicy.db');
    const { m, src, elapse } = machine({ wall: 1_700_000_000_000, mono: 1000 });
    let store = openStore(file);
    const first = openLedgerClock(store, (fn) => writeTxn(store.db, fn), src);
    expect(first.now()).toBe(1_700_000_000_000);
    await store.close();
    elapse(30_000);
    m.wall += 25 * HOUR;
    store = openStore(file);
    const second = openLedgerClock(store, (fn) => writeTxn(store.db, fn), src);
    expect(second.rule).toBe('same_boot');
    expect(second.now()).toBe(1_700_000_030_000);
    await store.close();
  });
});
