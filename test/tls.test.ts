import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PaymentPolicyService, PingRequestSchema, PingResponseSchema, type PingResponse } from '../gen/paypolicy/v1/payment_policy_pb.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { selfSigned } from './helpers/tls.js';

function httpsJson(url: string, ca: Buffer, body: unknown, key: string): Promise<{ status: number; json: unknown; alpn: string | false | null }> {
  return new Promise((resolve, reject) => {
    // Offer only http/1.1 in ALPN, as an HTTP/1.1 REST client would.
    const options: https.RequestOptions & { ALPNProtocols: string[] } = {
      method: 'POST', ca, ALPNProtocols: ['http/1.1'], headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    };
    const req = https.request(url, options, (res) => {
      const alpn = (res.socket as import('node:tls').TLSSocket).alpnProtocol;
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, json: JSON.parse(Buffer.concat(chunks).toString()), alpn }));
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

describe('TLS (--tls-cert/--tls-key)', () => {
  let dir: string;
  let s: TestServer;
  let ca: Buffer;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'paypolicy-tls-'));
    const tls = selfSigned(dir);
    ca = readFileSync(tls.cert);
    s = await startTestServer({ tls });
  });
  afterAll(async () => {
    await s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('behavior: the one port serves https REST over HTTP/1.1 chosen by ALPN', async () => {
    expect(s.url.startsWith('https://127.0.0.1:')).toBe(true);
    const r = await httpsJson(`${s.url}/api/ping`, ca, { agent_id: s.bootstrap.agent_id }, s.bootstrap.api_key);
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ ok: true, agent_id: s.bootstrap.agent_id });
    expect(r.alpn).toBe('http/1.1');
  });

  test('behavior: the same port serves gRPC over TLS (HTTP/2 chosen by ALPN)', async () => {
    const client = new grpc.Client(new URL(s.url).host, grpc.credentials.createSsl(ca));
    try {
      const md = new grpc.Metadata();
      md.set('authorization', `Bearer ${s.bootstrap.api_key}`);
      const res = await new Promise<PingResponse>((resolve, reject) => {
        client.makeUnaryRequest(
          `/${PaymentPolicyService.typeName}/Ping`,
          (m: ReturnType<typeof create<typeof PingRequestSchema>>) => Buffer.from(toBinary(PingRequestSchema, m)),
          (b: Buffer) => fromBinary(PingResponseSchema, b),
          create(PingRequestSchema, { agentId: s.bootstrap.agent_id }),
          md,
          (err, value) => (err ? reject(err) : resolve(value!)),
        );
      });
      expect(res.ok).toBe(true);
      expect(res.agentName).toBe('demo-agent');
    } finally {
      client.close();
    }
  });

  test('error: a client that does not trust the certificate cannot connect', async () => {
    await expect(httpsJson(`${s.url}/api/ping`, Buffer.from(''), {}, s.bootstrap.api_key)).rejects.toThrow();
  });
});
