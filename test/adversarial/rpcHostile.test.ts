import { once } from 'node:events';
import http from 'node:http';
import http2, { type ClientHttp2Session, type IncomingHttpHeaders } from 'node:http2';
import { brotliCompressSync, constants as zlib, gzipSync } from 'node:zlib';
import { create, toBinary } from '@bufbuild/protobuf';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PaymentPolicyService, PingRequestSchema } from '../../gen/paypolicy/v1/payment_policy_pb.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * Hostile inputs against the unary RPC handler (src/rpc/unaryHandler.ts), with raw clients on a
 * real server: decompression bombs on gRPC and Connect (small on the wire, far over the 256 KiB
 * message limit once inflated), streams reset half-way through their body, non-ASCII header bytes,
 * and request ids under a mixed parallel load. Each must get a clear answer (or none, for a reset
 * stream), never a 500, a crash, an error log line or unbounded memory, and the server must go on
 * answering on the same connection.
 */

const PING = `/${PaymentPolicyService.typeName}/${PaymentPolicyService.method.ping.name}`;
let s: TestServer;
let session: ClientHttp2Session;

beforeAll(async () => {
  s = await startTestServer({ logLevel: 'info' });
  session = http2.connect(s.url);
  session.on('error', () => {});
  await once(session, 'remoteSettings');
});
afterAll(async () => {
  session?.close();
  await s?.close();
});

const pingBytes = () => Buffer.from(toBinary(PingRequestSchema, create(PingRequestSchema, { agentId: s.bootstrap.agent_id })));
function frame(data: Uint8Array, flags = 0): Buffer {
  const head = Buffer.alloc(5);
  head[0] = flags;
  head.writeUInt32BE(data.length, 1);
  return Buffer.concat([head, data]);
}

type Wire = { status: number | undefined; headers: IncomingHttpHeaders; trailers: IncomingHttpHeaders; body: Buffer; reset: boolean };
async function h2(p: string, headers: Record<string, string>, body?: Buffer): Promise<Wire> {
  const req = session.request({ ':method': 'POST', ':path': p, ...headers });
  const out: Wire = { status: undefined, headers: {}, trailers: {}, body: Buffer.alloc(0), reset: false };
  const chunks: Buffer[] = [];
  req.on('response', (h) => {
    out.headers = h;
    out.status = h[':status'] as number;
  });
  req.on('trailers', (t) => (out.trailers = t));
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('error', () => (out.reset = true));
  req.end(body);
  await once(req, 'close');
  out.body = Buffer.concat(chunks);
  return out;
}

const grpcHeaders = (extra: Record<string, string> = {}) => ({ 'content-type': 'application/grpc', te: 'trailers', authorization: `Bearer ${s.bootstrap.api_key}`, ...extra });
const connectHeaders = (extra: Record<string, string> = {}) => ({ 'content-type': 'application/proto', 'connect-protocol-version': '1', authorization: `Bearer ${s.bootstrap.api_key}`, ...extra });

async function stillServes(): Promise<void> {
  const ok = await h2(PING, grpcHeaders(), frame(pingBytes()));
  expect(ok.status).toBe(200);
  expect(ok.trailers['grpc-status']).toBe('0');
}

function errorLogs(): string[] {
  return s.logs.filter((l) => /"level":(50|60)/.test(l));
}

// 64 MiB of zeros gzip to ~64 KiB: well under the 256 KiB limit on the wire.
const BOMB = gzipSync(Buffer.alloc(64 * 1024 * 1024));

describe('decompression bombs', () => {
  test('gRPC: a gzipped frame inflating to 64 MiB is grpc-status 8, memory stays bounded', async () => {
    expect(BOMB.length).toBeLessThan(256 * 1024);
    const rss = process.memoryUsage().rss;
    const answers = await Promise.all(Array.from({ length: 8 }, () => h2(PING, grpcHeaders({ 'grpc-encoding': 'gzip' }), frame(BOMB, 1))));
    for (const w of answers) {
      expect(w.status).toBe(200);
      expect(w.trailers['grpc-status']).toBe('8');
    }
    // Eight bombs at once never inflated in full (8 × 64 MiB would be half a GiB).
    expect(process.memoryUsage().rss - rss).toBeLessThan(256 * 1024 * 1024);
    await stillServes();
    expect(errorLogs()).toEqual([]);
  });

  test('Connect (h2 and HTTP/1.1): a gzipped body inflating to 64 MiB is resource_exhausted (429), never 500', async () => {
    const w = await h2(PING, connectHeaders({ 'content-encoding': 'gzip' }), BOMB);
    expect(w.status).toBe(429);
    expect(JSON.parse(w.body.toString()).code).toBe('resource_exhausted');
    const h1 = await new Promise<{ status: number | undefined; body: string }>((resolve, reject) => {
      const req = http.request(new URL(PING, s.url), { method: 'POST', headers: { connection: 'close', ...connectHeaders({ 'content-encoding': 'gzip' }) }, agent: false }, (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (c: string) => (body += c)).on('end', () => resolve({ status: res.statusCode, body }));
      });
      req.on('error', reject);
      req.end(BOMB);
    });
    expect(h1.status).toBe(429);
    expect(JSON.parse(h1.body).code).toBe('resource_exhausted');
    await stillServes();
    expect(errorLogs()).toEqual([]);
  });
});

describe('streams that go away', () => {
  test('gRPC and Connect streams reset half-way through the body: no answer owed, no error logged, the session serves on', async () => {
    for (const headers of [grpcHeaders(), connectHeaders()]) {
      for (let i = 0; i < 20; i++) {
        const req = session.request({ ':method': 'POST', ':path': PING, ...headers });
        req.on('error', () => {});
        const whole = headers['content-type'] === 'application/grpc' ? frame(pingBytes()) : pingBytes();
        req.write(whole.subarray(0, 3));
        await new Promise((r) => setTimeout(r, 5));
        req.close(http2.constants.NGHTTP2_CANCEL);
        await once(req, 'close');
      }
    }
    await new Promise((r) => setTimeout(r, 100));
    await stillServes();
    expect(errorLogs()).toEqual([]);
  });
});

describe('header bytes', () => {
  test('non-ASCII (latin-1) bytes in authorization and in other headers: 401 / answered, never 500 or a reset', async () => {
    const bad = await h2(PING, grpcHeaders({ authorization: 'Bearer \u00e9\u00ff', 'x-note': 'caf\u00e9' }), frame(pingBytes()));
    expect(bad.reset).toBe(false);
    expect(bad.status).toBe(200);
    expect(bad.trailers['grpc-status']).toBe('16');
    const ok = await h2(PING, grpcHeaders({ 'x-note': 'caf\u00e9' }), frame(pingBytes()));
    expect(ok.trailers['grpc-status']).toBe('0');
    const c = await h2(PING, connectHeaders({ authorization: 'Bearer \u00e9', 'x-note': '\u00ff' }), pingBytes());
    expect(c.status).toBe(401);
    expect(errorLogs()).toEqual([]);
  });
});

describe('malformed frames and bodies', () => {
  // Which code each gets is pinned by test/rpc-wire.test.ts (connect-node's answers); here: every
  // one is a whole answer (gRPC: HTTP 200 with a grpc-status trailer; Connect: a JSON error or the
  // message), nothing is reset or logged as an error, and the session serves on.
  test('odd flags, truncated or bomb compression, empty and junk bodies, odd timeouts: a whole answer each', async () => {
    const ping = pingBytes();
    const brBomb = brotliCompressSync(Buffer.alloc(64 * 1024 * 1024), { params: { [zlib.BROTLI_PARAM_QUALITY]: 1 } });
    expect(brBomb.length).toBeLessThan(256 * 1024);
    const g = grpcHeaders;
    const c = connectHeaders;
    const grpcCases: Array<[Record<string, string>, Buffer]> = [
      [g({ 'grpc-encoding': 'gzip' }), frame(ping, 1)],
      [g({ 'grpc-encoding': 'identity' }), frame(ping, 1)],
      [g(), frame(ping, 0x80)],
      [g(), frame(ping, 2)],
      [g({ 'grpc-encoding': 'gzip' }), frame(gzipSync(ping).subarray(0, 10), 1)],
      [g({ 'grpc-encoding': 'br' }), frame(brBomb, 1)],
      [g(), Buffer.alloc(0)],
      [g(), Buffer.from([0, 0, 0, 0])],
      [g(), frame(Buffer.alloc(0))],
      [g({ 'grpc-encoding': 'gzip' }), frame(Buffer.alloc(0), 1)],
      [g({ 'content-type': 'application/grpc+json' }), frame(Buffer.from([0x7b, 0xff, 0xfe, 0x7d]))],
      [g({ 'grpc-timeout': '0n' }), frame(ping)],
      [g({ 'grpc-timeout': '99999999H' }), frame(ping)],
      [g({ 'grpc-encoding': 'gzip,br' }), frame(gzipSync(ping), 1)],
    ];
    for (const [headers, body] of grpcCases) {
      const w = await h2(PING, headers, body);
      expect(w.reset).toBe(false);
      expect(w.status).toBe(200);
      expect(w.trailers['grpc-status']).toMatch(/^\d+$/);
    }
    const connectCases: Array<[Record<string, string>, Buffer]> = [
      [c({ 'content-encoding': 'gzip' }), Buffer.alloc(0)],
      [c({ 'content-encoding': 'gzip' }), gzipSync(ping).subarray(0, 10)],
      [c({ 'content-encoding': 'br' }), brBomb],
      [c({ 'content-type': 'application/json' }), Buffer.from([0x7b, 0xff, 0xfe, 0x7d])],
      [c({ 'content-type': 'application/json' }), Buffer.from('{"agentId": 1e999999}')],
      [c({ 'content-type': 'application/json' }), Buffer.from(`{"agentId":"x","unknown":${'['.repeat(100_000)}${']'.repeat(100_000)}}`)],
      [c(), Buffer.alloc(100_000, 0x0b)],
      [c(), Buffer.alloc(20, 0xff)],
      [c({ 'connect-timeout-ms': '-1' }), ping],
      [c({ 'connect-timeout-ms': '99999999999999999999' }), ping],
    ];
    for (const [headers, body] of connectCases) {
      const w = await h2(PING, headers, body);
      expect(w.reset).toBe(false);
      expect(w.status).toBeGreaterThanOrEqual(200);
      if (w.status !== 200) expect(JSON.parse(w.body.toString()).code).toMatch(/^[a-z_]+$/);
    }
    await stillServes();
    expect(errorLogs()).toEqual([]);
  });
});

describe('request ids', () => {
  test('unique across REST, Connect and gRPC under a parallel mixed load', async () => {
    const ids = await Promise.all(Array.from({ length: 300 }, async (_, i) => {
      if (i % 3 === 0) return (await h2(PING, grpcHeaders(), frame(pingBytes()))).headers['x-request-id'];
      if (i % 3 === 1) return (await h2(PING, connectHeaders(), pingBytes())).headers['x-request-id'];
      const r = await fetch(`${s.url}/api/ping`, { headers: { authorization: `Bearer ${s.bootstrap.api_key}`, connection: 'close' } });
      await r.text();
      return r.headers.get('x-request-id') ?? undefined;
    }));
    expect(ids.every((id) => typeof id === 'string' && id.length >= 16)).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
  });
});

describe('bodies that are not the input message are the caller\'s error, never a 500 or INTERNAL', () => {
  const garbage = Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]); // a length-delimited field running past the end

  test('Connect proto over h2 and HTTP/1.1: malformed protobuf is 400 invalid_argument', async () => {
    const viaH2 = await h2(PING, connectHeaders(), garbage);
    expect(viaH2.status).toBe(400);
    expect(JSON.parse(viaH2.body.toString())).toMatchObject({ code: 'invalid_argument' });
    const viaH1 = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = http.request(`${s.url}${PING}`, { method: 'POST', headers: { ...connectHeaders(), 'content-length': String(garbage.length) } }, (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode!, body }));
      });
      req.on('error', reject);
      req.end(garbage);
    });
    expect(viaH1.status).toBe(400);
    expect(JSON.parse(viaH1.body)).toMatchObject({ code: 'invalid_argument' });
    await stillServes();
    expect(errorLogs()).toEqual([]);
  });

  test('Connect: a truncated gzip body is 400 invalid_argument', async () => {
    const truncatedGzip = gzipSync(pingBytes()).subarray(0, 8);
    const w = await h2(PING, connectHeaders({ 'content-encoding': 'gzip' }), truncatedGzip);
    expect(w.status).toBe(400);
    expect(JSON.parse(w.body.toString())).toMatchObject({ code: 'invalid_argument' });
    await stillServes();
  });

  test('gRPC: malformed protobuf in a whole frame, and across a split body, is grpc-status 3', async () => {
    const whole = await h2(PING, grpcHeaders(), frame(garbage));
    expect(whole.status).toBe(200);
    expect(whole.trailers['grpc-status']).toBe('3');
    // A gzipped frame goes through the envelope reader instead of the one-frame fast path.
    const gz = await h2(PING, grpcHeaders({ 'grpc-encoding': 'gzip' }), frame(gzipSync(garbage), 1));
    expect(gz.trailers['grpc-status']).toBe('3');
    await stillServes();
    expect(errorLogs()).toEqual([]);
  });
});
