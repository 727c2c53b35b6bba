import { readFileSync } from 'node:fs';
import { Script } from 'node:vm';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * The dashboard's browser script is src/dashboard/static/client.ts, type-checked against the DOM
 * and emitted by tsconfig.client.json; the server sends that emitted file, unchanged, at the URL
 * the pages link, as a classic script (the CSP allows only 'self' scripts, never inline ones).
 */

let s: TestServer;
beforeAll(async () => {
  s = await startTestServer({ logLevel: 'warn' });
});
afterAll(async () => s?.close());

const EMITTED = new URL('../../dist/src/dashboard/static/client.js', import.meta.url);

describe('dashboard static files', () => {
  test('behavior: /dashboard/static/dashboard.js is the file tsconfig.client.json emitted from client.ts', async () => {
    const r = await fetch(`${s.url}/dashboard/static/dashboard.js`, { headers: { connection: 'close' } });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(r.headers.get('content-security-policy')).toMatch(/script-src 'self';/);
    const body = Buffer.from(await r.arrayBuffer());
    expect(body.equals(readFileSync(EMITTED))).toBe(true);
    // A classic script: compiles outside a module (no import or export), and is not TypeScript.
    expect(() => new Script(body.toString('utf8'), { filename: 'dashboard.js' })).not.toThrow();
    expect(body.toString('utf8')).toMatch(/data-expires-at/);
  });

  test('behavior: the script and stylesheet revalidate by ETag; their page links carry the version', async () => {
    for (const path of ['/dashboard/static/dashboard.js', '/dashboard/static/dashboard.css']) {
      const first = await fetch(`${s.url}${path}`, { headers: { connection: 'close' } });
      await first.arrayBuffer();
      const etag = first.headers.get('etag')!;
      expect(etag).toMatch(/^"[A-Za-z0-9_-]{16}"$/);
      const again = await fetch(`${s.url}${path}`, { headers: { connection: 'close', 'if-none-match': etag } });
      expect([again.status, again.headers.get('etag'), again.headers.get('x-frame-options')]).toEqual([304, etag, 'DENY']);
    }
    const page = await (await fetch(`${s.url}/dashboard/sign-in`, { headers: { connection: 'close' } })).text();
    expect(page).toMatch(/<script src="\/dashboard\/static\/dashboard\.js\?v=[0-9a-f]{10}" defer><\/script>/);
    expect(page).not.toMatch(/<script>/);
  });
});
