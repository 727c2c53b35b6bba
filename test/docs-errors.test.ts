import { readFileSync } from 'node:fs';
import { describe, expect, test } from 'vitest';
// @ts-expect-error: a plain ESM script without types (scripts/docs-errors.mjs)
import { BEGIN, DOC, END, collectErrorCodes, renderErrorTable, withErrorTable } from '../scripts/docs-errors.mjs';

/** The error-code table of docs/errors.md is generated from src by `npm run docs:errors`; this fails when it is stale. */

type Code = { code: string; statuses: Set<string>; connect: Set<string | undefined> };
const page = readFileSync(new URL(`../${DOC}`, import.meta.url), 'utf8');

describe('docs:errors', () => {
  test('behavior: the block in docs/errors.md equals a fresh rendering of the codes in src', () => {
    expect(DOC).toBe('docs/errors.md');
    const block = page.slice(page.indexOf(BEGIN), page.indexOf(END) + END.length);
    expect(block, 'docs/errors.md error-code table is stale: run `npm run docs:errors`').toBe(renderErrorTable());
  });

  test('behavior: codes that transports and probes raise are listed with their status', () => {
    const codes = new Map((collectErrorCodes() as Code[]).map((c) => [c.code, [...c.statuses].join(',')]));
    for (const code of ['no_payment_challenge', 'no_challenge', 'unsupported_network', 'unsupported_method', 'url_not_allowed', 'unreachable', 'rail_mismatch', 'invalid_json', 'agent_id_required']) {
      expect(codes.get(code), code).toBe('400');
    }
    expect(codes.get('permission_denied')).toBe('403');
    expect(codes.get('not_found')).toBe('404');
    expect(codes.get('method_not_allowed')).toBe('405');
    expect(codes.get('idempotency_key_reused')).toBe('409');
    expect(codes.get('body_too_large')).toBe('413');
    expect(codes.get('overloaded')).toBe('503');
    expect(codes.get('storage_failed')).toBe('503');
    expect(codes.get('treasury_not_provisioned')).toBe('503');
  });

  test('behavior: a stale block is replaced, text around it kept', () => {
    const stale = `before\n${BEGIN}\n| old |\n${END}\nafter`;
    const fresh = withErrorTable(stale) as string;
    expect(fresh.startsWith('before\n')).toBe(true);
    expect(fresh.endsWith('\nafter')).toBe(true);
    expect(fresh).toContain('| `rail_mismatch` | 400 | invalid_argument |');
    expect(fresh).not.toContain('| old |');
  });

  test('behavior: the README links the table and keeps no copy of it that could go stale', () => {
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
    expect(readme).toContain('](docs/errors.md)');
    expect(readme).not.toContain(BEGIN);
    expect(readme).not.toContain(END);
  });

  test('error: a page without the markers', () => {
    expect(() => withErrorTable('no markers')).toThrow(/lacks the markers/);
  });
});
