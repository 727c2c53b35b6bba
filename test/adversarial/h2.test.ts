import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http2, { type ClientHttp2Session } from 'node:http2';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PaymentPolicyService } from '../../gen/paypolicy/v1/payment_policy_pb.js';
import { grpcChannel, grpcUnary } from '../helpers/clients.js';
import { rest, startTestServer, type TestServer } from '../helpers/server.js';
import { selfSigned } from '../helpers/tls.js';

/**
 * Resource exhaustion through the one listener: idle HTTP/2 sessions, unbounded streams, half-sent
 * requests, silent connections and connection floods. Each runs against a real server configured
 * with small limits so the tests take milliseconds: `fast` has a 300 ms idle and 400 ms request
 * timeout, `capped` accepts 3 connections, `defaults` runs the shipped configuration, and
 * `secure` is `fast` behind TLS (where ALPN, not the peek, picks the protocol).
 */

const IDLE_MS = 300;
const REQUEST_MS = 400;
const PREFACE = 'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n';

let fast: TestServer;
let capped: TestServer;
let defaults: TestServer;
let secure: TestServer;
let certDir: string;
let ca: Buffer;

beforeAll(async () => {
  certDir = mkdtempSync(join(tmpdir(), 'paypolicy-h2-tls-'));
  const pems = selfSigned(certDir);
  ca = readFileSync(pems.cert);
  [fast, capped, defaults, secure] = await Promise.all([
    startTestServer({ limits: { idleTimeoutMs: IDLE_MS, requestTimeoutMs: REQUEST_MS } }),
    startTestServer({ limits: { maxConnections: 3 } }),
    startTestServer(),
    startTestServer({ tls: pems, limits: { idleTimeoutMs: IDLE_MS, requestTimeoutMs: REQUEST_MS } }),
  ]);
});

afterAll(async () => {
  await Promise.all([fast?.close(), capped?.close(), defaults?.close(), secure?.close()]);
  if (certDir) rmSync(certDir, { recursive: true, force: true });
});

/** An HTTP/2 session (h2c by prior knowledge, or h2 over TLS) whose SETTINGS have arrived. */
async function h2c(server: TestServer): Promise<ClientHttp2Session> {
  const session = http2.connect(server.url, { ca });
  session.on('error', () => {});
  await once(session, 'remoteSettings');
  return session;
}

/** One request on a session: status and body. */
async function request(session: ClientHttp2Session, headers: http2.OutgoingHttpHeaders, body?: string): Promise<{ status: number; text: string }> {
  const stream = session.request(headers, { endStream: body === undefined });
  if (body !== undefined) stream.end(body);
  const [response] = (await once(stream, 'response')) as [http2.IncomingHttpHeaders];
  stream.setEncoding('utf8');
  let text = '';
  for await (const chunk of stream) text += chunk;
  return { status: Number(response[':status']), text };
}

/** A raw TCP (or TLS with HTTP/1.1 in ALPN) connection; `closed` resolves when the server closes it, with everything it sent. */
async function rawConnection(server: TestServer, overTls = false): Promise<{ socket: net.Socket; closed: Promise<string> }> {
  const { port } = new URL(server.url);
  const socket = overTls ? tls.connect({ port: Number(port), host: '127.0.0.1', ca, ALPNProtocols: ['http/1.1'] }) : net.connect(Number(port), '127.0.0.1');
  let received = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk: string) => (received += chunk));
  socket.on('error', () => {});
  // 'close', not once(): a reset (the server closing with our bytes unread) is a close here too.
  const closed = new Promise<string>((resolve) => socket.once('close', () => resolve(received)));
  await once(socket, overTls ? 'secureConnect' : 'connect');
  return { socket, closed };
}

const warnings = (server: TestServer, pattern: RegExp) =>
  server.logs.map((line) => JSON.parse(line) as { level: number; msg: string }).filter((l) => l.level === 40 && pattern.test(l.msg));

describe('HTTP/2 sessions', () => {
  test('behavior: SETTINGS advertise a bounded stream limit (100), not 2^32-1', async () => {
    const session = await h2c(defaults);
    try {
      expect(session.remoteSettings.maxConcurrentStreams).toBe(100);
    } finally {
      session.destroy();
    }
  });

  test('behavior: an idle h2c session is closed with GOAWAY after the idle timeout', async () => {
    const session = await h2c(fast);
    // Used once, then left idle: the timer starts when its last stream closes.
    expect((await request(session, { ':path': '/healthz' })).status).toBe(200);
    const idleSince = performance.now();
    const goaway = once(session, 'goaway');
    await once(session, 'close');
    const [code] = (await goaway) as [number];
    expect(code).toBe(http2.constants.NGHTTP2_NO_ERROR);
    expect(performance.now() - idleSince).toBeGreaterThanOrEqual(IDLE_MS - 50);
  });

  test('behavior: a half-sent request stream is reset after the request timeout; the session keeps working', async () => {
    const session = await h2c(fast);
    try {
      const stream = session.request(
        { ':method': 'POST', ':path': '/api/quote', authorization: `Bearer ${fast.bootstrap.api_key}`, 'content-type': 'application/json', 'content-length': '200' },
        { endStream: false },
      );
      stream.on('error', () => {});
      stream.write('{"agent_id":');
      const opened = performance.now();
      await once(stream, 'close');
      expect(stream.rstCode).toBe(http2.constants.NGHTTP2_CANCEL);
      expect(performance.now() - opened).toBeGreaterThanOrEqual(REQUEST_MS - 50);
      // Only the stream was cut: the same session still answers.
      expect((await request(session, { ':path': '/healthz' })).status).toBe(200);
    } finally {
      session.destroy();
    }
  });

  test('behavior: a stream that sends its whole request is not cut, however close to the timeout', async () => {
    const session = await h2c(fast);
    try {
      const r = await request(
        session,
        { ':method': 'POST', ':path': '/api/ping', authorization: `Bearer ${fast.bootstrap.api_key}`, 'content-type': 'application/json' },
        JSON.stringify({ agent_id: fast.bootstrap.agent_id }),
      );
      expect(r.status, r.text).toBe(200);
    } finally {
      session.destroy();
    }
  });
});

describe('HTTP/1.1 and the connection peek', () => {
  test('behavior: a half-sent HTTP/1.1 body is answered 408 and the connection closed', async () => {
    const { socket, closed } = await rawConnection(fast);
    socket.write(`POST /api/quote HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${fast.bootstrap.api_key}\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{"agent_id":`);
    expect(await closed).toMatch(/^HTTP\/1\.1 408 /);
  });

  test('behavior: a connection that sends nothing is closed before it is routed', async () => {
    const { closed } = await rawConnection(fast);
    expect(await closed).toBe('');
  });

  test('behavior: trickling the h2c preface a byte at a time does not extend the deadline', async () => {
    const { socket, closed } = await rawConnection(fast);
    let sent = 0;
    // One byte every 50 ms would finish the preface after 1.2 s; the deadline is the request timeout.
    const trickle = setInterval(() => {
      if (sent < PREFACE.length && !socket.destroyed) socket.write(PREFACE[sent++]!);
    }, 50);
    try {
      expect(await closed).toBe('');
      expect(sent).toBeLessThan(PREFACE.length);
    } finally {
      clearInterval(trickle);
    }
  });
});

describe('connection cap', () => {
  test('behavior: connections beyond the cap are refused, existing ones keep working, one warn line', async () => {
    const held = [await h2c(capped), await h2c(capped), await h2c(capped)];
    try {
      for (const session of held) expect((await request(session, { ':path': '/healthz' })).status).toBe(200);
      const refused = await Promise.all([rawConnection(capped), rawConnection(capped), rawConnection(capped), rawConnection(capped)]);
      // Each extra connection is closed by the server without a byte; it never reaches HTTP.
      for (const { socket, closed } of refused) {
        socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
        expect(await closed).toBe('');
      }
      for (const session of held) expect((await request(session, { ':path': '/healthz' })).status).toBe(200);
      expect(warnings(capped, /connection limit reached/)).toHaveLength(1);
      expect(warnings(capped, /connection limit reached/)[0]).toMatchObject({ maxConnections: 3, refused: 1 });
    } finally {
      for (const session of held) session.destroy();
    }
  });
});

describe('the same limits behind TLS', () => {
  test('behavior: h2 over TLS advertises the stream limit and closes an idle session with GOAWAY', async () => {
    const session = await h2c(secure);
    expect(session.remoteSettings.maxConcurrentStreams).toBe(100);
    expect((await request(session, { ':path': '/healthz' })).status).toBe(200);
    const goaway = once(session, 'goaway');
    await once(session, 'close');
    expect(((await goaway) as [number])[0]).toBe(http2.constants.NGHTTP2_NO_ERROR);
  });

  test('behavior: a half-sent HTTP/1.1 body over TLS is answered 408 and the connection closed', async () => {
    const { socket, closed } = await rawConnection(secure, true);
    socket.write(`POST /api/quote HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${secure.bootstrap.api_key}\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{"agent_id":`);
    expect(await closed).toMatch(/^HTTP\/1\.1 408 /);
  });

  test('behavior: a TCP connection that never starts the TLS handshake is closed', async () => {
    const { closed } = await rawConnection(secure);
    expect(await closed).toBe('');
  });
});

describe('normal traffic under the default limits', () => {
  test('behavior: gRPC, Connect over h2c and over HTTP/1.1, and REST all answer', async () => {
    const grpc = grpcChannel(defaults.url);
    try {
      const g = await grpcUnary(grpc, PaymentPolicyService, PaymentPolicyService.method.ping, { agentId: defaults.bootstrap.agent_id }, defaults.bootstrap.api_key);
      expect(g.ok).toBe(true);
    } finally {
      grpc.close();
    }
    for (const httpVersion of ['2', '1.1'] as const) {
      const client = createClient(PaymentPolicyService, createConnectTransport({ baseUrl: defaults.url, httpVersion }));
      const c = await client.ping({ agentId: defaults.bootstrap.agent_id }, { headers: { authorization: `Bearer ${defaults.bootstrap.api_key}` } });
      expect(c.agentId, httpVersion).toBe(defaults.bootstrap.agent_id);
    }
    const r = await rest(defaults.url, 'POST', '/api/ping', { key: defaults.bootstrap.api_key, body: { agent_id: defaults.bootstrap.agent_id } });
    expect(r.status, r.text).toBe(200);
  });
});
