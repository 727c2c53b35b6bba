import pino from 'pino';
import { describe, expect, test } from 'vitest';
import { accessLog, createLogger, type AccessLine } from '../../src/observability/logger.js';

/**
 * The access line is built by hand for speed (src/observability/logger.ts); it must stay the line pino writes
 * for the same fields, and valid JSON for any field the server can hand it.
 */
function lines(level: 'info' | 'warn' = 'info') {
  const out: string[] = [];
  const log = createLogger(level, { write: (s: string) => void out.push(s) });
  const viaPino = pino({ level, base: { service: 'paypolicy' }, timestamp: pino.stdTimeFunctions.isoTime }, { write: (s: string) => void out.push(s) });
  return { out, write: accessLog(log), pinoWrite: (l: AccessLine) => viaPino.info({ ...l }, 'request') };
}
const noTime = (line: string) => line.replace(/"time":"[^"]+"/, '"time":"T"');

const CASES: AccessLine[] = [
  { reqId: '0192f3a4-7b1c-4def-8abc-0123456789ab', method: 'POST', path: '/api/sign', status: 200, ms: 1.23, httpVersion: '1.1' },
  { reqId: 'r', method: 'GET', path: '/api/approvals/"x"\\y/status', status: 404, ms: 0, httpVersion: '2.0' },
  { reqId: 'r', method: 'PROPFIND', path: '/\u0001\u001f\u007f\u00e9\u2028', status: 405, ms: 12345.67, httpVersion: '1.0' },
  { reqId: 'r', method: undefined, path: '/', status: 400, ms: 0.01, httpVersion: '2.0' },
];

describe('accessLog', () => {
  test('behavior: byte for byte the line pino writes for the same fields (time aside), a missing method left out', () => {
    for (const c of CASES) {
      const { out, write, pinoWrite } = lines();
      write(c);
      pinoWrite(c);
      expect(out).toHaveLength(2);
      expect(noTime(out[0]!)).toBe(noTime(out[1]!));
      const parsed = JSON.parse(out[0]!) as Record<string, unknown>;
      expect(parsed).toEqual({ level: 30, time: expect.any(String), service: 'paypolicy', ...Object.fromEntries(Object.entries(c).filter(([, v]) => v !== undefined)), msg: 'request' });
      expect('method' in parsed).toBe(c.method !== undefined);
    }
  });

  test('edge: a lone surrogate in the path still makes one valid JSON line', () => {
    const { out, write } = lines();
    write({ reqId: 'r', method: 'GET', path: '/\ud800x', status: 404, ms: 1, httpVersion: '2.0' });
    expect(out).toHaveLength(1);
    expect(out[0]!.endsWith('\n')).toBe(true);
    expect((JSON.parse(out[0]!) as { path: string }).path).toBe('/\ud800x');
  });

  test('behavior: nothing is written when the level is above info', () => {
    const { out, write } = lines('warn');
    write(CASES[0]!);
    expect(out).toEqual([]);
  });
});
