import { writeSync } from 'node:fs';
import { describe, test } from 'vitest';
import { bufferedStdout, MAX_WAITING_BYTES, type StdoutIo } from '../../src/observability/logger.js';

/**
 * The stdout writer under write failures a test cannot make a real disk produce without
 * privileges: a write cut short by a full disk (ENOSPC) after part of it went out, then room again.
 * Everything else about it is tested against real pipes and terminals (startup-output.test.ts).
 */
type Call = { bytes: string } | { fail: string } | { partly: number };

function scripted(plan: Call[], stalled = () => false, pipe = false): { io: StdoutIo; out: () => string; writes: string[] } {
  let out = '';
  const writes: string[] = [];
  const io: StdoutIo = {
    isatty: () => false,
    isPipe: () => pipe,
    openTerminal: () => undefined,
    write: (() => { throw new Error('not a terminal'); }) as unknown as StdoutIo['write'],
    writeSync: ((_fd: number, buf: Buffer) => {
      if (stalled()) throw Object.assign(new Error('EAGAIN'), { code: 'EAGAIN' });
      const step = plan.shift() ?? { bytes: 'all' };
      if ('fail' in step) throw Object.assign(new Error(step.fail), { code: step.fail });
      const n = 'partly' in step ? step.partly : buf.length;
      out += buf.subarray(0, n).toString('utf8');
      writes.push(buf.toString('utf8'));
      return n;
    }) as typeof writeSync,
  };
  return { io, out: () => out, writes };
}

/** Lines 0 … n-1, each written out on its own (flushSync), so each meets the next planned call. */
function linesOneByOne(w: ReturnType<typeof bufferedStdout>, n: number): void {
  for (let i = 0; i < n; i++) {
    w.write(line(i));
    w.flushSync();
  }
}

const line = (i: number) => `${JSON.stringify({ i, pad: 'x'.repeat(40) })}\n`;

describe('stdout writer faults', () => {
  test('behavior: a line a full disk cut short is ended before the next write, so no two lines run together', ({ expect }) => {
    // Ten lines go out partly (the write ends inside line 1), the rest fails; then the disk has room.
    const { io, out } = scripted([{ partly: 70 }, { fail: 'ENOSPC' }]);
    const w = bufferedStdout(99, io);
    for (let i = 0; i < 10; i++) w.write(line(i));
    w.flushSync();
    for (let i = 10; i < 13; i++) w.write(line(i));
    w.flushSync();
    const all = Array.from({ length: 10 }, (_, i) => line(i)).join('');
    expect(out()).toBe(`${all.slice(0, 70)}\n${line(10)}${line(11)}${line(12)}`);
  });

  test('behavior: a write that fails on a line boundary adds no empty line', ({ expect }) => {
    const { io, out } = scripted([{ partly: line(0).length }, { fail: 'EIO' }]);
    const w = bufferedStdout(99, io);
    for (let i = 0; i < 10; i++) w.write(line(i));
    w.flushSync();
    w.write(line(10));
    w.flushSync();
    expect(out()).toBe(line(0) + line(10));
  });

  test('behavior: a stdout that fails every write drops the lines and the next write that works starts whole', ({ expect }) => {
    const { io, out } = scripted([{ fail: 'EPIPE' }, { fail: 'EPIPE' }]);
    linesOneByOne(bufferedStdout(99, io), 3);
    expect(out()).toBe(line(2));
  });

  test('behavior: a cut line is still ended when the disk stays full for more writes', ({ expect }) => {
    // Line 0 is cut after 5 bytes; the newline that should end it fails with line 1; line 2 has room.
    const { io, out } = scripted([{ partly: 5 }, { fail: 'ENOSPC' }, { fail: 'ENOSPC' }]);
    linesOneByOne(bufferedStdout(99, io), 3);
    expect(out()).toBe(`${line(0).slice(0, 5)}\n${line(2)}`);
  });

  test('behavior: on a terminal that cannot be opened again, lines behind a write still on the pool at exit are dropped, never written ahead of it', ({ expect }) => {
    let synced = '';
    const started: string[] = [];
    const io: StdoutIo = {
      isatty: () => true,
      isPipe: () => false,
      openTerminal: () => undefined,
      // The pool never gets to it (busy, or the terminal stopped): no callback.
      write: ((_fd: number, buf: Buffer) => void started.push(buf.toString('utf8'))) as unknown as StdoutIo['write'],
      writeSync: ((_fd: number, buf: Buffer) => {
        synced += buf.toString('utf8');
        return buf.length;
      }) as typeof writeSync,
    };
    const w = bufferedStdout(99, io);
    for (let i = 0; i < 400; i++) w.write(line(i));
    w.flushSync();
    expect(started).toHaveLength(1);
    expect(synced).toBe('');
  });

  test('behavior: a full pipe (EAGAIN) loses nothing and keeps the order', ({ expect }) => {
    const { io, out } = scripted([{ partly: 10 }, { fail: 'EAGAIN' }, { fail: 'EAGAIN' }, { partly: 5 }, { fail: 'EINTR' }]);
    const w = bufferedStdout(99, io);
    for (let i = 0; i < 800; i++) w.write(line(i));
    w.flushSync();
    expect(out()).toBe(Array.from({ length: 800 }, (_, i) => line(i)).join(''));
  });
});

/** A stdout nobody reads (every write EAGAIN) until `unblock`; then it takes everything. */
function unread(): { io: StdoutIo; unblock: () => void; out: () => string } {
  let blocked = true;
  return { ...scripted([], () => blocked), unblock: () => (blocked = false) };
}

describe('stdout writer backlog', () => {
  // A stdout nobody reads (a hung log collector): what waited in memory grew at the log rate until
  // the kernel killed the server. Now it stops at MAX_WAITING_BYTES; the lines past it are dropped
  // whole and counted in one warning line that comes out, in their place, once stdout is read again.
  test('behavior: lines waiting for an unread stdout stop at the bound; the dropped ones are counted in one line in their place', ({ expect }) => {
    const { io, unblock, out } = unread();
    let peak = 0;
    let queued = 0;
    const w = bufferedStdout(99, io);
    const used = () => process.memoryUsage().arrayBuffers;
    const base = used();
    const each = line(0).length;
    const total = Math.ceil((MAX_WAITING_BYTES * 3) / each);
    for (let i = 0; i < total; i++) {
      w.write(line(i));
      queued += each;
      if (i % 10_000 === 0) peak = Math.max(peak, used() - base);
    }
    peak = Math.max(peak, used() - base);
    // Three bounds' worth was logged; well under two stayed in memory.
    expect(queued).toBeGreaterThan(3 * MAX_WAITING_BYTES);
    expect(peak).toBeLessThan(1.5 * MAX_WAITING_BYTES);
    unblock();
    // The next flush writes the backlog and then the notice; a line after it follows the notice.
    w.flush();
    w.write(line(total));
    w.flushSync();
    const got = out().split('\n').slice(0, -1);
    const kept = got.findIndex((l) => l.includes('log lines dropped'));
    expect(kept).toBeGreaterThan(0);
    // In order and whole up to the notice; the notice counts exactly what is missing; the next line follows.
    got.slice(0, kept).forEach((l, i) => expect(l).toBe(line(i).slice(0, -1)));
    expect(kept * each).toBeLessThanOrEqual(MAX_WAITING_BYTES);
    const notice = JSON.parse(got[kept]!) as { level: number; dropped: number; msg: string };
    expect(notice).toMatchObject({ level: 40, dropped: total - kept, msg: 'log lines dropped: stdout was not read' });
    expect(got.slice(kept + 1)).toEqual([line(total).slice(0, -1)]);
  });

  test('behavior: lines dropped just before an exit are still counted in a last line', ({ expect }) => {
    const { io, unblock, out } = unread();
    const w = bufferedStdout(99, io);
    const total = Math.ceil((MAX_WAITING_BYTES * 1.5) / line(0).length);
    for (let i = 0; i < total; i++) w.write(line(i));
    unblock();
    w.flushSync();
    const got = out().split('\n').slice(0, -1);
    const last = JSON.parse(got.at(-1)!) as { dropped: number };
    expect(got.length - 1 + last.dropped).toBe(total);
    got.slice(0, -1).forEach((l, i) => expect(l).toBe(line(i).slice(0, -1)));
  });
});

describe('stdout writer on a pipe', () => {
  // Writes of at most PIPE_BUF bytes to a pipe are all or nothing; a longer one can be taken in
  // part. A line over 4 KiB sent in one write with the short lines after it would let a full pipe
  // cut a short line. Each write is whole lines within PIPE_BUF, or one long line alone.
  test('behavior: every write to a pipe is whole lines within 4 KiB, or a single longer line on its own', ({ expect }) => {
    const { io, out, writes } = scripted([], () => false, true);
    const w = bufferedStdout(99, io);
    const long = `${JSON.stringify({ long: 'y'.repeat(4_500) })}\n`;
    const lines = [...Array.from({ length: 30 }, (_, i) => line(i)), long, ...Array.from({ length: 200 }, (_, i) => line(100 + i)), long, long];
    for (const l of lines) w.write(l);
    w.flushSync();
    expect(out()).toBe(lines.join(''));
    expect(writes.length).toBeGreaterThan(3);
    for (const piece of writes) {
      expect(piece.endsWith('\n')).toBe(true);
      const count = piece.split('\n').length - 1;
      if (piece.length > 4096) expect(count).toBe(1);
    }
  });
});
