import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, renameSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, test } from 'vitest';
import { buildShim } from './harness.js';

const roots: string[] = [];
afterEach(() => {
  for (const r of roots.splice(0)) rmSync(r, { recursive: true, force: true });
});

const DAY_PLUS_HOUR = 25 * 3600_000;

/**
 * A Node process under the shim that prints Date.now(), new Date() and process.hrtime each time
 * a line arrives on stdin: the wall clock the service would see, against the monotonic one.
 */
function clockProcess(ctlPath: string) {
  const script = `process.stdin.setEncoding('utf8').on('data', () => process.stdout.write(JSON.stringify({ now: Date.now(), date: new Date().getTime(), mono: Number(process.hrtime.bigint() / 1000000n) }) + '\\n'));`;
  const child = spawn(process.execPath, ['-e', script], {
    env: { ...process.env, LD_PRELOAD: buildShim(), FAULTFS_DIR: '/nonexistent', FAULTFS_CTL: ctlPath, UV_USE_IO_URING: '0' },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines: string[] = [];
  let buf = '';
  const waiters: Array<() => void> = [];
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    buf += d;
    for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
      lines.push(buf.slice(0, i));
      buf = buf.slice(i + 1);
      waiters.shift()?.();
    }
  });
  return {
    async read(): Promise<{ now: number; date: number; mono: number }> {
      const n = lines.length;
      const arrived = new Promise<void>((r) => waiters.push(r));
      child.stdin.write('\n');
      await arrived;
      return JSON.parse(lines[n]!) as { now: number; date: number; mono: number };
    },
    stop: () => child.kill('SIGKILL'),
  };
}

describe('faultfs wall clock shift', () => {
  test('behavior: clock_shift_ms moves Date.now() and new Date() of a running Node process, forward and back, and not its monotonic clock', async () => {
    const root = mkdtempSync(join(tmpdir(), 'paypolicy-clock-'));
    roots.push(root);
    const ctlPath = join(root, 'ctl');
    const ctl = (text: string) => {
      writeFileSync(`${ctlPath}.tmp`, text);
      renameSync(`${ctlPath}.tmp`, ctlPath);
    };
    ctl(`clock_shift_ms=${DAY_PLUS_HOUR}\n`);
    const p = clockProcess(ctlPath);
    try {
      const ahead = await p.read();
      expect(Math.abs(ahead.now - Date.now() - DAY_PLUS_HOUR)).toBeLessThan(5_000);
      expect(Math.abs(ahead.date - ahead.now)).toBeLessThan(1_000);

      // A jump while running: back by a day relative to the real clock.
      ctl('clock_shift_ms=-86400000\n');
      await new Promise((r) => setTimeout(r, 5)); // the shim re-reads its control file at most once a millisecond
      const behind = await p.read();
      expect(Math.abs(behind.now - Date.now() + 86_400_000)).toBeLessThan(5_000);
      expect(behind.mono - ahead.mono).toBeGreaterThanOrEqual(0);
      expect(behind.mono - ahead.mono).toBeLessThan(5_000);
    } finally {
      p.stop();
    }
  });
});
