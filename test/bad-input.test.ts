import http2 from 'node:http2';
import { status as GrpcStatus } from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PaymentPolicyService } from '../gen/paypolicy/v1/payment_policy_pb.js';
import { grpcChannel, grpcUnary } from './helpers/clients.js';
import { grpcWebFrame } from './helpers/grpcWeb.js';
import { rawConnection, rawHttp, type RawConnection } from './helpers/rawHttp.js';
import { rest, startTestServer, type RestResult, type TestServer } from './helpers/server.js';

/**
 * Hostile and malformed input on every surface: REST bodies, paths, methods, URLs and headers,
 * Connect JSON, gRPC-Web and raw sockets. Each must get a 4xx (never a 500), the process must
 * keep serving, and nothing may be logged at level error or above.
 */

const MAX_REST_BODY = 64 * 1024;
const MAX_RPC_MESSAGE = 256 * 1024;
const PING_RPC = `/${PaymentPolicyService.typeName}/Ping`;

let s: TestServer;

beforeAll(async () => {
  s = await startTestServer();
});
afterAll(async () => s.close());

const ping = (opts: Parameters<typeof rest>[3]) => rest(s.url, 'POST', '/api/ping', { key: s.bootstrap.api_key, ...opts });

function expectJsonError(r: RestResult, status: number, code: string): void {
  expect(r.status).toBe(status);
  expect(r.headers.get('content-type')).toMatch(/^application\/json\b/);
  expect(r.json).toEqual({ error: expect.any(String), code });
}

/** An approval id that cannot exist gets the wire protocol's 404 "empty of detail". */
function expectApprovalNotFound(r: RestResult, id: string): void {
  expect.soft(r.status, id).toBe(404);
  expect(r.text === '' ? {} : r.json).toEqual({});
}

describe('POST /api/ping body', () => {
  test('error: invalid JSON answers 400 invalid_json', async () => {
    const r = await ping({ rawBody: '{"agent_id": ', headers: { 'content-type': 'application/json' } });
    expectJsonError(r, 400, 'invalid_json');
  });

  test('error: an empty body answers 400 invalid_json', async () => {
    const r = await ping({ rawBody: '', headers: { 'content-type': 'application/json' } });
    expectJsonError(r, 400, 'invalid_json');
  });

  test('error: no body at all answers 400 invalid_json', async () => {
    const r = await ping({});
    expectJsonError(r, 400, 'invalid_json');
  });

  test('error: JSON that is not an object answers 400 invalid_json', async () => {
    for (const raw of ['[]', `["${'agt_x'}"]`, '42', '-0.5e10', '"agt_abc"', 'null', 'true', 'false']) {
      const r = await ping({ rawBody: raw, headers: { 'content-type': 'application/json' } });
      expect.soft(r.status, raw).toBe(400);
      expectJsonError(r, 400, 'invalid_json');
    }
  });

  test('error: almost-JSON answers 400 invalid_json', async () => {
    const agent = s.bootstrap.agent_id;
    for (const raw of [
      `\uFEFF{"agent_id":"${agent}"}`,
      `{"agent_id":"${agent}"} trailing`,
      `{'agent_id':'${agent}'}`,
      `{agent_id:"${agent}"}`,
      `{"agent_id":"${agent}",}`,
      `/* c */{"agent_id":"${agent}"}`,
      '{"a":NaN}',
      '{"a":"\\x41"}',
      '\u0000',
    ]) {
      const r = await ping({ rawBody: raw, headers: { 'content-type': 'application/json' } });
      expect.soft(r.status, JSON.stringify(raw)).toBe(400);
      expectJsonError(r, 400, 'invalid_json');
    }
  });

  test('error: bytes that are not UTF-8 answer 400 invalid_json', async () => {
    const r = await ping({ rawBody: new Uint8Array([0xff, 0xfe, 0x7b, 0x00, 0x7d, 0xc3]), headers: { 'content-type': 'application/json' } });
    expectJsonError(r, 400, 'invalid_json');
  });

  test('error: wrong field types answer 400 invalid_argument saying agent_id must be a string', async () => {
    for (const agent_id of [0, 1.5, false, null, [], {}, [s.bootstrap.agent_id], { toString: s.bootstrap.agent_id }]) {
      const r = await ping({ body: { agent_id } });
      expect.soft(r.status, JSON.stringify(agent_id)).toBe(400);
      expectJsonError(r, 400, 'invalid_argument');
      expect.soft(r.json.error, JSON.stringify(agent_id)).toBe('agent_id must be a string');
    }
  });

  test('error: a field named __proto__ does not supply agent_id: it is an unknown field like any other', async () => {
    const r = await ping({ rawBody: `{"__proto__":{"agent_id":"${s.bootstrap.agent_id}"}}`, headers: { 'content-type': 'application/json' } });
    expectJsonError(r, 400, 'invalid_argument');
    expect(r.json.error).toContain('"__proto__"');
  });

  test('error: deeply nested JSON answers 400 invalid_json, not a stack overflow', async () => {
    const depth = 20_000;
    const r = await ping({ rawBody: `{"agent_id":${'['.repeat(depth)}${']'.repeat(depth)}}`, headers: { 'content-type': 'application/json' } });
    expectJsonError(r, 400, 'invalid_json');
  });

  test('error: a key repeated anywhere in the body answers 400 invalid_json naming it', async () => {
    const agent = s.bootstrap.agent_id;
    for (const [raw, key] of [
      [`{"agent_id":"agt_other","agent_id":"${agent}"}`, 'agent_id'],
      [`{"agent_id":"${agent}","\u0061gent_id":"agt_other"}`, 'agent_id'],
    ]) {
      const r = await ping({ rawBody: raw, headers: { 'content-type': 'application/json' } });
      expectJsonError(r, 400, 'invalid_json');
      expect(r.json.error).toContain(`"${key}"`);
    }
  });

  test('error: a huge unknown or repeated key is named cut short, never echoed whole', async () => {
    const key = 'k'.repeat(30_000);
    for (const raw of [`{"agent_id":"${s.bootstrap.agent_id}","${key}":1}`, `{"${key}":1,"${key}":2}`]) {
      const r = await ping({ rawBody: raw, headers: { 'content-type': 'application/json' } });
      expect(r.status).toBe(400);
      expect(r.json.error).toContain(`"${'k'.repeat(100)}…"`);
      expect(r.text.length).toBeLessThan(400);
    }
  });

  test('error: an unknown field answers 400 invalid_argument naming it', async () => {
    const r = await ping({ body: { agent_id: s.bootstrap.agent_id, agentId: s.bootstrap.agent_id } });
    expectJsonError(r, 400, 'invalid_argument');
    expect(r.json.error).toContain('"agentId"');
  });

  test('error: a huge agent_id string answers 400 missing_agent_id', async () => {
    const r = await ping({ body: { agent_id: `agt_${'a'.repeat(60_000)}` } });
    expectJsonError(r, 400, 'missing_agent_id');
  });

  test('behavior: a body just under the limit is read', async () => {
    const json = JSON.stringify({ agent_id: s.bootstrap.agent_id });
    const raw = json + ' '.repeat(MAX_REST_BODY - json.length);
    expect(Buffer.byteLength(raw)).toBe(MAX_REST_BODY);
    const r = await ping({ rawBody: raw, headers: { 'content-type': 'application/json' } });
    expect(r.status).toBe(200);
    expect(r.json.agent_id).toBe(s.bootstrap.agent_id);
  });

  test('error: a body one byte over the limit answers 413 body_too_large', async () => {
    const json = JSON.stringify({ agent_id: s.bootstrap.agent_id });
    const raw = json + ' '.repeat(MAX_REST_BODY - json.length + 1);
    const r = await ping({ rawBody: raw, headers: { 'content-type': 'application/json' } });
    expectJsonError(r, 413, 'body_too_large');
  });

  test('error: a 1 MiB body answers 413 {error, code: body_too_large}', async () => {
    const r = await ping({ body: { agent_id: s.bootstrap.agent_id, pad: 'x'.repeat(1024 * 1024) } });
    expectJsonError(r, 413, 'body_too_large');
  });

  const CHUNK = ' '.repeat(16 * 1024);
  const chunked = (n: number) => `${CHUNK.length.toString(16)}\r\n${CHUNK}\r\n`.repeat(n);

  /** Starts a chunked POST /api/ping and sends `chunks` × 16 KiB of its body, without the end. */
  function startChunkedPing(conn: RawConnection, chunks: number): void {
    conn.write(
      `POST /api/ping HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${s.bootstrap.api_key}\r\n` +
        'Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n' + chunked(chunks),
    );
  }

  test('error: a chunked body over the limit (no Content-Length) answers 413', async () => {
    const conn = await rawConnection(s.url);
    try {
      startChunkedPing(conn, 6);
      const r = await conn.next();
      expect(r?.status).toBe(413);
      expect(r!.headers['content-type']).toMatch(/^application\/json\b/);
      expect(JSON.parse(r!.body)).toEqual({ error: expect.any(String), code: 'body_too_large' });
    } finally {
      conn.destroy();
    }
  });

  // A body abandoned half-way must not leave a dead keep-alive connection: the 413 closes it.
  test('error: after a 413 for a chunked body the connection is closed or still usable', async () => {
    const conn = await rawConnection(s.url);
    try {
      // The client is still uploading when the 413 arrives, as a streaming client would be.
      startChunkedPing(conn, 6);
      const first = await conn.next();
      expect(first?.status).toBe(413);
      conn.write(`${chunked(2)}0\r\n\r\n`);
      if (first!.headers.connection?.toLowerCase() === 'close') {
        expect(await conn.closed(2000)).toBe(true);
        return;
      }
      conn.write('GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n');
      const second = await conn.next(2000);
      expect(second?.status).toBe(200);
    } finally {
      conn.destroy();
    }
  });

  test('error: clients that hang up half-way through a body leave the server serving (readBody rejects, nothing leaks)', async () => {
    const logged = s.logs.length;
    for (let i = 0; i < 20; i++) {
      const conn = await rawConnection(s.url);
      conn.write(
        `POST /api/ping HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${s.bootstrap.api_key}\r\n` +
          (i % 2 === 0 ? 'Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"age\r\n' : 'Content-Type: application/json\r\nContent-Length: 40\r\n\r\n{"agent_id"'),
      );
      await new Promise((resolve) => setTimeout(resolve, 5));
      conn.destroy();
    }
    const h = await rest(s.url, 'GET', '/healthz');
    expect(h.status).toBe(200);
    // A whole body still reaches the handler: a well-formed ping for an agent that does not exist.
    const r = await rest(s.url, 'POST', '/api/ping', { key: s.bootstrap.api_key, body: { agent_id: 'agt_unknown' } });
    expect({ status: r.status, json: r.json }).toEqual({ status: 400, json: expect.objectContaining({ error: expect.any(String) }) });
    // A client going away is not a server failure: no error line (it was 'unhandled error in rest handler').
    const errors = s.logs.slice(logged).map((l) => JSON.parse(l) as { level: number; msg: string }).filter((l) => l.level >= 50);
    expect(errors).toEqual([]);
  });

  test('error: an over-limit dashboard sign-in form closes the connection at once, even while the client keeps sending', async () => {
    const conn = await rawConnection(s.url);
    try {
      conn.write('POST /dashboard/sign-in HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/x-www-form-urlencoded\r\n'
        + `Transfer-Encoding: chunked\r\n\r\n${chunked(6)}`);
      const r = await conn.next();
      expect(r?.status).toBe(400);
      expect(r!.headers.connection?.toLowerCase()).toBe('close');
      // A client that trickles on after the answer: the server closed anyway (it held it 30 s).
      const trickle = setInterval(() => conn.write('1\r\na\r\n'), 100);
      try {
        expect(await conn.closed(2000)).toBe(true);
      } finally {
        clearInterval(trickle);
      }
    } finally {
      conn.destroy();
    }
  });

  test('behavior: after a 413 for a body sent in full with Content-Length the connection is still usable', async () => {
    const conn = await rawConnection(s.url);
    try {
      const body = ' '.repeat(MAX_REST_BODY + 1);
      conn.write(
        `POST /api/ping HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${s.bootstrap.api_key}\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
      );
      expect((await conn.next())?.status).toBe(413);
      conn.write('GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n');
      expect((await conn.next(2000))?.status).toBe(200);
    } finally {
      conn.destroy();
    }
  });

  test('error: a streamed body over the limit on HTTP/2 answers 413 and the session stays usable', async () => {
    const session = http2.connect(s.url);
    try {
      const req = session.request({ ':method': 'POST', ':path': '/api/ping', authorization: `Bearer ${s.bootstrap.api_key}`, 'content-type': 'application/json' });
      let status: number | undefined;
      let text = '';
      req.on('response', (h) => (status = Number(h[':status'])));
      req.setEncoding('utf8');
      req.on('data', (d: string) => (text += d));
      for (let i = 0; i < 6; i++) req.write(Buffer.alloc(16 * 1024, 0x20));
      req.end();
      await new Promise((resolve) => req.on('close', resolve));
      expect(status).toBe(413);
      expect(JSON.parse(text)).toEqual({ error: expect.any(String), code: 'body_too_large' });
      const health = session.request({ ':path': '/healthz' });
      const healthStatus = await new Promise<number>((resolve) => health.on('response', (h) => resolve(Number(h[':status']))));
      health.resume();
      expect(healthStatus).toBe(200);
    } finally {
      session.close();
    }
  });

  test('error: a declared huge Content-Length answers 413 before the body arrives', async () => {
    const { host } = new URL(s.url);
    const r = await rawHttp(
      s.url,
      `POST /api/ping HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${s.bootstrap.api_key}\r\n` +
        'Content-Type: application/json\r\nContent-Length: 1099511627776\r\n\r\n{"agent_id":',
    );
    expect(r.status).toBe(413);
    expect(r.headers['content-type']).toMatch(/^application\/json\b/);
    expect(JSON.parse(r.body)).toEqual({ error: expect.any(String), code: 'body_too_large' });
  });

  test('error: an invalid Content-Length is refused with 400 by the HTTP parser', async () => {
    const { host } = new URL(s.url);
    const r = await rawHttp(s.url, `POST /api/ping HTTP/1.1\r\nHost: ${host}\r\nContent-Length: -5\r\n\r\n`);
    expect(r.status).toBe(400);
  });
});

describe('REST routing', () => {
  test('error: unknown /api path answers 404 JSON', async () => {
    const r = await rest(s.url, 'GET', '/api/nope', { key: s.bootstrap.api_key });
    expectJsonError(r, 404, 'not_found');
    expect(r.json).toEqual({ error: 'Not found', code: 'not_found' });
  });

  test('error: unknown non-api path answers 404 JSON', async () => {
    const r = await rest(s.url, 'GET', '/nope');
    expectJsonError(r, 404, 'not_found');
    const post = await rest(s.url, 'POST', '/nope', { body: {} });
    expectJsonError(post, 404, 'not_found');
  });

  test('error: near misses of real routes answer 404', async () => {
    for (const path of ['/api/ping/', '/api/PING', '/API/ping', '/api/ping/extra', '/api/approvals//status', '/api/approvals/a/b/status', '/api/approvals/x']) {
      const r = await rest(s.url, 'POST', path, { key: s.bootstrap.api_key, body: { agent_id: s.bootstrap.agent_id } });
      expect.soft(r.status, path).toBe(404);
      expectJsonError(r, 404, 'not_found');
    }
  });

  test('error: GET /api/ping answers 405 with allow: POST', async () => {
    const r = await rest(s.url, 'GET', '/api/ping', { key: s.bootstrap.api_key });
    expectJsonError(r, 405, 'method_not_allowed');
    expect(r.headers.get('allow')).toBe('POST');
  });

  test('error: wrong methods on every route answer 405 with the allowed method', async () => {
    const cases: Array<[string, string, string]> = [
      ['POST', '/api/resolve?slug=a', 'GET, HEAD'],
      ['PUT', '/api/sign', 'POST'],
      ['DELETE', '/api/quote', 'POST'],
      ['PATCH', '/api/ping', 'POST'],
      ['POST', `/api/approvals/3f2504e0-4f89-41d3-9a0c-0305e82c3301/status`, 'GET, HEAD'],
      ['OPTIONS', '/api/ping', 'POST'],
    ];
    for (const [method, path, allow] of cases) {
      const r = await rest(s.url, method, path, { key: s.bootstrap.api_key });
      expect.soft(r.status, `${method} ${path}`).toBe(405);
      expectJsonError(r, 405, 'method_not_allowed');
      expect(r.headers.get('allow')).toBe(allow);
    }
  });

  test('error: invalid_argument: a query parameter the route does not read is refused, naming it, on every route', async () => {
    const key = s.bootstrap.api_key;
    const agent = s.bootstrap.agent_id;
    const cases: Array<[string, string, unknown, string]> = [
      ['GET', '/api/resolve?slug=a&foo=1', undefined, 'Unknown query parameter "foo" (this endpoint takes slug, slugs)'],
      ['GET', `/api/agents/${agent}/spend?window=1h`, undefined, 'Unknown query parameter "window" (this endpoint takes none)'],
      ['POST', '/api/ping?agent_id=x', { agent_id: agent }, 'Unknown query parameter "agent_id" (this endpoint takes none)'],
      ['POST', '/api/sign?dry_run=true', { agent_id: agent, type: 'eip3009', chain_id: 8453, recipient_address: '0x2222222222222222222222222222222222222222', amount_usd: '0.01' }, 'Unknown query parameter "dry_run" (this endpoint takes none)'],
      ['GET', '/api/approvals/3f2504e0-4f89-41d3-9a0c-0305e82c3301/status?x', undefined, 'Unknown query parameter "x" (this endpoint takes none)'],
    ];
    for (const [method, path, body, error] of cases) {
      const r = await rest(s.url, method, path, { key, body });
      expect.soft([r.status, r.json?.error], path).toEqual([400, error]);
    }
    // What the routes read still works, and an empty query is no parameter.
    expect((await rest(s.url, 'GET', '/api/resolve?slug=a&slugs=b', { key })).status).toBe(200);
    expect((await rest(s.url, 'POST', '/api/ping?', { key, body: { agent_id: agent } })).status).toBe(200);
  });

  test('error: HEAD on a POST route answers 405 without a body', async () => {
    const r = await rest(s.url, 'HEAD', '/api/ping', { key: s.bootstrap.api_key });
    expect(r.status).toBe(405);
    expect(r.text).toBe('');
    expect(r.headers.get('allow')).toBe('POST');
  });

  test('error: malformed percent-encoding in an approval id answers 404, not 500', async () => {
    expectJsonError(await rest(s.url, 'GET', '/api/approvals/%E0%A4%A/status'), 401, 'unauthenticated');
    for (const id of ['%E0%A4%A', '%', '%zz', '%C0%AF', '%ED%A0%80']) {
      expectApprovalNotFound(await rest(s.url, 'GET', `/api/approvals/${id}/status`, { key: s.bootstrap.api_key }), id);
    }
  });

  test('error: non-UUID approval ids answer 404 empty of detail', async () => {
    for (const id of ['not-a-uuid', '12345', 'x'.repeat(2000), '..%2F..%2Fetc%2Fpasswd', "1'%20OR%20'1'='1", '%00', 'AGT_X']) {
      expectApprovalNotFound(await rest(s.url, 'GET', `/api/approvals/${id}/status`, { key: s.bootstrap.api_key }), id);
    }
  });

  test('behavior: malformed percent-encoding in the resolve query is an unresolved slug', async () => {
    const r = await rest(s.url, 'GET', '/api/resolve?slug=%E0%A4%A', { key: s.bootstrap.api_key });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ resolvedCount: 0, unresolvedCount: 1 });
    expect(Object.values(r.json.results)).toEqual([null]);
  });

  test('behavior: a very long slug is an unresolved slug', async () => {
    const slug = 'a'.repeat(5000);
    const r = await rest(s.url, 'GET', `/api/resolve?slug=${slug}`, { key: s.bootstrap.api_key });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ results: { [slug]: null }, resolvedCount: 0, unresolvedCount: 1 });
  });

  test('error: a URL over the header size limit answers 431 or 414', async () => {
    const r = await rest(s.url, 'GET', `/api/resolve?slugs=${'abc,'.repeat(10_000)}`, { key: s.bootstrap.api_key });
    expect([414, 431]).toContain(r.status);
  });

  test('error: a header over the size limit answers 431', async () => {
    const r = await rest(s.url, 'POST', '/api/ping', { key: s.bootstrap.api_key, headers: { 'x-filler': 'a'.repeat(20_000) }, body: { agent_id: s.bootstrap.agent_id } });
    expect(r.status).toBe(431);
  });

  test('error: a long but accepted URL with too many slugs answers 400', async () => {
    const slugs = Array.from({ length: 1000 }, (_, i) => `slug-${i}`).join(',');
    const r = await rest(s.url, 'GET', `/api/resolve?slugs=${slugs}`, { key: s.bootstrap.api_key });
    expectJsonError(r, 400, 'too_many_slugs');
  });
});

describe('POST /api/sign: fields a paywall type does not use', () => {
  const sign = (body: Record<string, unknown>) => rest(s.url, 'POST', '/api/sign', { key: s.bootstrap.api_key, body });
  const x402 = (extra: Record<string, unknown>) => ({
    agent_id: s.bootstrap.agent_id, type: 'x402', payload: { resource_url: 'http://127.0.0.1:1/paid' }, dry_run: true, ...extra,
  });
  const signRpc = (body: Record<string, unknown>) => fetch(`${s.url}/${PaymentPolicyService.typeName}/Sign`, {
    method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${s.bootstrap.api_key}` }, body: JSON.stringify(body),
  });

  test('error: a value of a type the field cannot take is refused naming the field, though x402 ignores the field', async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ recipient_address: null }, 'recipient_address'],
      [{ recipient_address: 5 }, 'recipient_address'],
      [{ amount_usd: { x: [1] } }, 'amount_usd'],
      [{ amount_usd: null }, 'amount_usd'],
      [{ chain_id: 4294967296 }, 'chain_id'],
      [{ dry_run: null }, 'dry_run'],
    ];
    for (const [extra, field] of cases) {
      const r = await sign(x402(extra));
      expect.soft(r.status, JSON.stringify(extra)).toBe(400);
      expect.soft(r.json, JSON.stringify(extra)).toEqual({ error: expect.stringContaining(field), code: 'invalid_argument' });
    }
  });

  test('error: over Connect the same types are refused the same way', async () => {
    const base = { agentId: s.bootstrap.agent_id, type: 'PAYMENT_TYPE_X402', x402: { resourceUrl: 'http://127.0.0.1:1/paid' }, dryRun: true };
    for (const extra of [{ recipientAddress: null }, { amountUsd: 5 }]) {
      const res = await signRpc({ ...base, ...extra });
      expect.soft(res.status, JSON.stringify(extra)).toBe(400);
      expect.soft(await res.json(), JSON.stringify(extra)).toMatchObject({ code: 'invalid_argument' });
    }
  });

  test('behavior: a string or number in them is ignored, as the wire protocol says: the request goes on to the paywall (here a loopback URL the server refuses)', async () => {
    for (const extra of [{}, { recipient_address: '', amount_usd: '' }, { recipient_address: 'not-an-address', amount_usd: -5 }, { recipient_address: '0x1111111111111111111111111111111111111111', amount_usd: 1.5 }]) {
      const r = await sign(x402(extra));
      expect.soft(r.json.code, JSON.stringify(extra)).toBe('url_not_allowed');
    }
  });
});

describe('Connect JSON and gRPC input', () => {
  const connectPost = (body: string | Uint8Array, headers: Record<string, string> = {}) =>
    fetch(`${s.url}${PING_RPC}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${s.bootstrap.api_key}`, ...headers },
      body,
    });

  test('error: an invalid JSON body answers invalid_argument', async () => {
    const res = await connectPost('{"agentId": ');
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toMatch(/^application\/json\b/);
    expect(await res.json()).toMatchObject({ code: 'invalid_argument' });
  });

  test('error: a wrongly typed field answers invalid_argument', async () => {
    const res = await connectPost('{"agentId": 42}');
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ code: 'invalid_argument' });
  });

  test('error: an unknown JSON field is invalid_argument naming it, as on REST', async () => {
    const res = await connectPost(JSON.stringify({ agentId: s.bootstrap.agent_id, nope: 1 }));
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ code: 'invalid_argument', message: expect.stringContaining('"nope"') });
  });

  test('error: a message over 256 KiB answers resource_exhausted', async () => {
    const res = await connectPost(JSON.stringify({ agentId: 'a'.repeat(MAX_RPC_MESSAGE + 1024) }));
    expect(res.status).toBe(429);
    expect(await res.json()).toMatchObject({ code: 'resource_exhausted' });
  });

  test('error: a message over 256 KiB without a key answers resource_exhausted or unauthenticated, never internal', async () => {
    const res = await fetch(`${s.url}${PING_RPC}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ agentId: 'a'.repeat(MAX_RPC_MESSAGE + 1024) }),
    });
    const body = (await res.json()) as { code: string };
    expect(['resource_exhausted', 'unauthenticated']).toContain(body.code);
  });

  test('error: a gRPC message over 256 KiB answers RESOURCE_EXHAUSTED', async () => {
    const ch = grpcChannel(s.url);
    try {
      const g = await grpcUnary(ch, PaymentPolicyService, PaymentPolicyService.method.ping, { agentId: 'a'.repeat(MAX_RPC_MESSAGE + 1024) }, s.bootstrap.api_key);
      expect(g.ok ? 0 : g.code).toBe(GrpcStatus.RESOURCE_EXHAUSTED);
    } finally {
      ch.close();
    }
  });

  test('error: an unsupported content type is a client error', async () => {
    const res = await connectPost(JSON.stringify({ agentId: s.bootstrap.agent_id }), { 'content-type': 'text/plain' });
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(res.status).toBeLessThan(500);
  });

  test('error: an unknown RPC method answers 404', async () => {
    const res = await fetch(`${s.url}/${PaymentPolicyService.typeName}/Nope`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(res.status).toBe(404);
  });

  test('error: a truncated gRPC-Web frame is answered with a non-internal grpc-status', async () => {
    const frame = grpcWebFrame(new Uint8Array(100)).subarray(0, 20);
    const res = await fetch(`${s.url}${PING_RPC}`, {
      method: 'POST',
      headers: { 'content-type': 'application/grpc-web+proto', authorization: `Bearer ${s.bootstrap.api_key}` },
      body: frame,
    });
    const buf = new Uint8Array(await res.arrayBuffer());
    const grpcStatus = res.headers.get('grpc-status') ?? /grpc-status:\s*(\d+)/.exec(new TextDecoder().decode(buf))?.[1];
    expect(grpcStatus).toBeDefined();
    expect(Number(grpcStatus)).toBeGreaterThan(0);
    expect(Number(grpcStatus)).not.toBe(GrpcStatus.INTERNAL);
  });

  // connect-es answers undecodable binary with INTERNAL ("parse binary: …"), as grpc-go does;
  // that is library behaviour before any handler runs, so only "an error, not a crash" is pinned.
  test('error: invalid protobuf bytes in a gRPC-Web frame are answered with an error grpc-status', async () => {
    const res = await fetch(`${s.url}${PING_RPC}`, {
      method: 'POST',
      headers: { 'content-type': 'application/grpc-web+proto', authorization: `Bearer ${s.bootstrap.api_key}` },
      body: grpcWebFrame(new Uint8Array([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01])),
    });
    const buf = new Uint8Array(await res.arrayBuffer());
    const grpcStatus = res.headers.get('grpc-status') ?? /grpc-status:\s*(\d+)/.exec(new TextDecoder().decode(buf))?.[1];
    expect(res.status).toBe(200);
    expect(Number(grpcStatus)).toBeGreaterThan(0);
  });
});

describe('raw connections', () => {
  test('error: a garbage request line is refused with 400', async () => {
    const r = await rawHttp(s.url, 'THIS IS NOT HTTP\r\n\r\n');
    expect(r.status).toBe(400);
  });

  test('error: binary noise is refused or dropped without a server fault', async () => {
    const r = await rawHttp(s.url, Buffer.from([0x16, 0x03, 0x01, 0x00, 0xa5, 0x01, 0x00, 0x00, 0xa1, 0x03, 0x03, 0x0d, 0x0a, 0x0d, 0x0a]));
    expect(r.status === undefined || (r.status >= 400 && r.status < 500)).toBe(true);
  });

  test('error: a partial HTTP/2 preface followed by a close is dropped', async () => {
    const r = await rawHttp(s.url, 'PRI * HTTP/2.0\r\n', undefined, { end: true });
    expect([r.ended, r.status]).toEqual(['closed', undefined]);
  });

  test('error: an HTTP/2 preface followed by garbage frames is dropped', async () => {
    const garbage = Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), Buffer.alloc(64, 0xff)]);
    const r = await rawHttp(s.url, garbage);
    expect([r.ended, r.status]).toEqual(['closed', undefined]);
  });

  test('error: a header-less request line is refused', async () => {
    const r = await rawHttp(s.url, 'GET /api/ping HTTP/1.1\r\n\r\n');
    expect(r.status).toBe(400);
  });
});

describe('after all the bad input', () => {
  test('behavior: the server still answers /healthz 200', async () => {
    const r = await rest(s.url, 'GET', '/healthz');
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ status: 'ok' });
  });

  test('behavior: the server still answers a valid ping', async () => {
    const r = await ping({ body: { agent_id: s.bootstrap.agent_id } });
    expect(r.status).toBe(200);
    expect(r.json.ok).toBe(true);
  });

  test('behavior: nothing was logged at level error or above', async () => {
    const entries = s.logs.map((line) => JSON.parse(line) as { level: number; msg?: string });
    expect(entries.length).toBeGreaterThan(0);
    const serious = entries.filter((e) => e.level >= 50);
    expect(serious).toEqual([]);
  });

  test('behavior: no request was answered with 500', async () => {
    const entries = s.logs.map((line) => JSON.parse(line) as { msg?: string; status?: number; path?: string });
    const requests = entries.filter((e) => e.msg === 'request');
    expect(requests.length).toBeGreaterThan(50);
    expect(requests.filter((e) => e.status === 500)).toEqual([]);
  });
});
