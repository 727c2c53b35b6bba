import net from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { rest, startTestServer, type TestServer } from '../helpers/server.js';

/**
 * An RPC request whose authority cannot be made into a URL: HTTP/1.0 without a Host header (legal
 * in HTTP/1.0), or a Host header that is not a host. connect-node builds every request's URL from
 * it and threw synchronously from the request handler, which took the whole process down: one
 * unauthenticated packet stopped the service. Now unary calls are answered as usual (the URL is
 * not needed) and what connect-node still serves is answered 400.
 */

let s: TestServer;
let port: number;

beforeAll(async () => {
  s = await startTestServer();
  port = Number(new URL(s.url).port);
});
afterAll(async () => s?.close());

/** Sends raw bytes on a fresh connection and returns the status line and body of the answer. */
function raw(request: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => socket.end(request));
    let text = '';
    socket.on('data', (d) => (text += d.toString()));
    socket.on('error', reject);
    socket.on('close', () => {
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(text)?.[1] ?? 0);
      resolve({ status, body: text.slice(text.indexOf('\r\n\r\n') + 4) });
    });
  });
}

async function stillServing(): Promise<void> {
  expect((await rest(s.url, 'GET', '/healthz')).status).toBe(200);
}

describe('RPC requests without a usable authority', () => {
  test('error: HTTP/1.0 without Host, unary Connect POST: answered (401 without a key), the server keeps running', async () => {
    const r = await raw('POST /paypolicy.v1.AdminService/ListOrganizations HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}');
    expect(r.status).toBe(401);
    expect(JSON.parse(r.body)).toMatchObject({ code: 'unauthenticated' });
    await stillServing();
  });

  test('error: HTTP/1.0 without Host, Connect GET (served by connect-node): 400, the server keeps running', async () => {
    const r = await raw('GET /paypolicy.v1.AdminService/ListOrganizations?encoding=json&message=%7B%7D HTTP/1.0\r\n\r\n');
    expect(r.status).toBe(400);
    expect(JSON.parse(r.body)).toEqual({ error: 'Bad request: missing or malformed Host header', code: 'invalid_request' });
    await stillServing();
    // A client's mistake: no warning and no stack in the log for it.
    const mentions = s.logs.filter((l) => l.includes('before connect-node'));
    expect(mentions.filter((l) => (JSON.parse(l) as { level: number }).level >= 40 || l.includes('"stack"'))).toEqual([]);
  });

  test('error: a Host that is not a host, gRPC-Web POST (served by connect-node): 400, the server keeps running', async () => {
    const r = await raw('POST /paypolicy.v1.PaymentPolicyService/Ping HTTP/1.1\r\nHost: [zz\r\nContent-Type: application/grpc-web+proto\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
    expect(r.status).toBe(400);
    expect(JSON.parse(r.body)).toMatchObject({ code: 'invalid_request' });
    await stillServing();
  });

  test('error: a Host that is not a host, unary Connect POST: answered as usual', async () => {
    const r = await raw('POST /paypolicy.v1.PaymentPolicyService/Ping HTTP/1.1\r\nHost: [zz\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}');
    expect(r.status).toBe(401);
    await stillServing();
  });
});
