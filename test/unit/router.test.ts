import { describe, expect, test } from 'vitest';
import { createRouter, decodePathParam, type RouteSpec } from '../../src/http/router.js';
import { PLAIN_PATH } from '../../src/rest/router.js';

type R = RouteSpec & { name: string };

const routes: R[] = [
  { method: 'GET', path: '/dashboard/services/new', name: 'new' },
  { method: 'GET', path: '/dashboard/services/{slug}', name: 'one' },
  { method: 'POST', path: '/dashboard/services/{slug}/delete', name: 'delete' },
  { method: 'GET', path: '/dashboard/approvals.json', name: 'json' },
  { method: 'GET', path: '/dashboard/agents', name: 'agents' },
  { method: 'POST', path: '/dashboard/agents', name: 'create' },
  { method: 'GET', path: '/api/approvals/{id}/status', name: 'status' },
];
const router = createRouter(routes);

describe('createRouter', () => {
  test('behavior: the first route matching path and method wins; parameters come back still encoded', () => {
    expect(router.match('GET', '/dashboard/services/new')).toMatchObject({ kind: 'found', route: { name: 'new' }, params: {} });
    expect(router.match('GET', '/dashboard/services/a%2Fb')).toMatchObject({ kind: 'found', route: { name: 'one' }, params: { slug: 'a%2Fb' } });
    expect(router.match('GET', '/api/approvals/apr_1/status')).toMatchObject({ kind: 'found', params: { id: 'apr_1' } });
  });

  test('behavior: template text is literal and whole-path; a parameter is one non-empty segment', () => {
    expect(router.match('GET', '/dashboard/approvalsxjson').kind).toBe('not_found');
    expect(router.match('GET', '/dashboard/agents/').kind).toBe('not_found');
    expect(router.match('GET', '/x/dashboard/agents').kind).toBe('not_found');
    expect(router.match('GET', '/api/approvals//status').kind).toBe('not_found');
    expect(router.match('GET', '/api/approvals/a/b/status').kind).toBe('not_found');
  });

  test('behavior: HEAD is answered by the GET route of a path, never by a POST one', () => {
    expect(router.match('HEAD', '/dashboard/services/new')).toMatchObject({ kind: 'found', route: { method: 'GET', path: '/dashboard/services/new' } });
    expect(router.match('HEAD', '/dashboard/agents')).toMatchObject({ kind: 'found', route: { method: 'GET' } });
  });

  test('behavior: a path answered under other methods is method_not_allowed, each method once', () => {
    expect(router.match('PUT', '/dashboard/agents')).toEqual({ kind: 'method_not_allowed', allow: ['GET', 'HEAD', 'POST'] });
    expect(router.match('POST', '/dashboard/services/new')).toEqual({ kind: 'method_not_allowed', allow: ['GET', 'HEAD'] });
    expect(router.match(undefined, '/dashboard/agents')).toEqual({ kind: 'method_not_allowed', allow: ['GET', 'HEAD', 'POST'] });
  });
});

describe('decodePathParam', () => {
  test('behavior: decodes escapes; a malformed escape is undefined, not a throw', () => {
    expect(decodePathParam('a%20b')).toBe('a b');
    expect(decodePathParam('%E0%A4')).toBeUndefined();
  });
});

describe('PLAIN_PATH (REST targets routed without WHATWG URL parsing)', () => {
  const pathnameOf = (t: string) => new URL(t, 'http://localhost').pathname;

  test('behavior: the API paths themselves are plain, and URL parsing leaves them unchanged', () => {
    for (const t of ['/api/sign', '/api/quote', '/api/approvals/0192f3a4-7b1c-7def-8abc-0123456789ab/status', '/api/agents/agt_ab12/spend', '/']) {
      expect(PLAIN_PATH.test(t)).toBe(true);
      expect(pathnameOf(t)).toBe(t);
    }
  });

  test('edge: targets URL parsing would change are not plain (dot segments, escapes, queries, backslashes, //host)', () => {
    for (const t of ['/api/./sign', '/api/../api/sign', '/api/sign/.', '/api/sign?x=1', '/api/%73ign', '/api\\sign', '//api/sign', '/api/sign#x', 'api/sign', '']) {
      expect(PLAIN_PATH.test(t)).toBe(false);
    }
  });

  test('behavior: over 200,000 random targets, every one called plain has itself as its pathname', () => {
    const alphabet = '/./.a-_~9Z%?#\\';
    let plain = 0;
    for (let i = 0; i < 200_000; i++) {
      let t = '/';
      const n = 1 + Math.floor(Math.random() * 10);
      for (let j = 0; j < n; j++) t += alphabet[Math.floor(Math.random() * alphabet.length)];
      if (!PLAIN_PATH.test(t)) continue;
      plain++;
      expect(pathnameOf(t)).toBe(t);
    }
    expect(plain).toBeGreaterThan(10_000);
  });
});
