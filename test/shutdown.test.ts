import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PaymentPolicyService } from '../gen/paypolicy/v1/payment_policy_pb.js';
import { grpcChannel, grpcUnary } from './helpers/clients.js';
import { rest, startTestServer, type TestServer } from './helpers/server.js';
import { selfSigned } from './helpers/tls.js';

/** Resolves with the error code of a TCP connection attempt, or 'connected'. */
function tryConnect(port: number): Promise<string> {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1');
    sock.once('connect', () => {
      sock.destroy();
      resolve('connected');
    });
    sock.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'error'));
  });
}

/**
 * A grace period longer than any test's timeout: a stop() given it that resolves at all was held by
 * nothing, so no test needs a wall-clock bound on how long stop() took.
 */
const NO_DEADLINE = 10 * 60_000;

/**
 * POST /api/ping whose body is sent in two parts, so the request is in flight until `finish()`.
 * `Connection: close`, so the socket ends with the response. `Expect: 100-continue` makes the
 * server answer 100 when it dispatches the request, so `started` is an event, not a guess.
 */
function slowPing(s: TestServer) {
  const body = JSON.stringify({ agent_id: s.bootstrap.agent_id });
  const req = http.request(`${s.url}/api/ping`, {
    method: 'POST',
    agent: false,
    headers: { authorization: `Bearer ${s.bootstrap.api_key}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), connection: 'close', expect: '100-continue' },
  });
  const response = new Promise<{ status: number; body: string } | { error: string }>((resolve) => {
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', (err: NodeJS.ErrnoException) => resolve({ error: err.code ?? err.message }));
  });
  // Node's server writes 100 Continue and emits 'request' in the same step: the handler has it.
  const started = once(req, 'continue').then(() => void req.write(body.slice(0, 5)));
  req.flushHeaders();
  return {
    /** Resolves once the server has dispatched the request to its handler. */
    started,
    finish: () => req.end(body.slice(5)),
    response,
    abort: () => req.destroy(),
  };
}

describe('startPaypolicy', () => {
  describe('health endpoints', () => {
    let s: TestServer;
    beforeAll(async () => {
      s = await startTestServer();
    });
    afterAll(async () => s.close());

    test('behavior: /readyz and /healthz answer 200 while running', async () => {
      const ready = await rest(s.url, 'GET', '/readyz', { headers: { connection: 'close' } });
      expect(ready.status).toBe(200);
      expect(ready.json).toMatchObject({ status: 'ready' });
      expect(ready.headers.get('cache-control')).toBe('no-store');
      const health = await rest(s.url, 'GET', '/healthz', { headers: { connection: 'close' } });
      expect(health.status).toBe(200);
      expect(health.json).toEqual({ status: 'ok' });
    });
  });

  describe('stop', () => {
    test('behavior: resolves, stops accepting connections and closes the database; a second stop is the same', async () => {
      const s = await startTestServer();
      try {
        expect(await tryConnect(s.app.port)).toBe('connected');
        expect(s.app.store.db.open).toBe(true);
        const first = s.app.stop(NO_DEADLINE);
        const second = s.app.stop(NO_DEADLINE);
        expect(second).toBe(first);
        await first;
        expect(await tryConnect(s.app.port)).toBe('ECONNREFUSED');
        expect(s.app.store.db.open).toBe(false);
        expect(s.logs.some((l) => l.includes('"msg":"paypolicy stopped"'))).toBe(true);
      } finally {
        await s.close();
      }
    });

    test('behavior: a request in flight when stop() starts completes within the grace period', async () => {
      const s = await startTestServer();
      const slow = slowPing(s);
      try {
        await slow.started;
        const stopping = s.app.stop(NO_DEADLINE);
        let stopped = false;
        void stopping.then(() => (stopped = true));
        // Still draining once the listener refuses: the database is open for the request.
        expect(await tryConnect(s.app.port)).toBe('ECONNREFUSED');
        expect(stopped).toBe(false);
        expect(s.app.store.db.open).toBe(true);

        slow.finish();
        const r = await slow.response;
        expect(r).toMatchObject({ status: 200 });
        expect(JSON.parse((r as { body: string }).body)).toMatchObject({ ok: true, agent_id: s.bootstrap.agent_id });
        await stopping;
        expect(s.app.store.db.open).toBe(false);
      } finally {
        slow.abort();
        await s.close();
      }
    });

    test('behavior: an open HTTP/2 (gRPC) connection does not delay stop()', async () => {
      const s = await startTestServer();
      const ch = grpcChannel(s.url);
      try {
        const g = await grpcUnary(ch, PaymentPolicyService, PaymentPolicyService.method.ping, { agentId: s.bootstrap.agent_id }, s.bootstrap.api_key);
        expect(g.ok).toBe(true);
        await s.app.stop(NO_DEADLINE);
        expect(s.app.store.db.open).toBe(false);
      } finally {
        ch.close();
        await s.close();
      }
    });

    // h1 never listens itself, and Node tracks a server's connections only once it has listened:
    // h1 emits 'listening' to turn tracking on, so idle keep-alive sockets do not hold stop().
    test('behavior: an idle keep-alive HTTP/1.1 connection is closed at once and does not hold stop()', async () => {
      const s = await startTestServer();
      const agent = new http.Agent({ keepAlive: true });
      try {
        const socket = await new Promise<net.Socket>((resolve, reject) => {
          const req = http.get(`${s.url}/healthz`, { agent }, (res) => {
            res.resume();
            res.on('end', () => setImmediate(() => resolve(sock)));
          });
          let sock: net.Socket;
          req.on('socket', (x) => (sock = x as net.Socket));
          req.on('error', reject);
        });
        // The response is done and the socket is parked in the agent, idle but open.
        expect(socket.destroyed).toBe(false);
        expect(Object.values(agent.freeSockets).flat()).toContain(socket);
        const closed = once(socket, 'close');
        await s.app.stop(NO_DEADLINE);
        await closed;
      } finally {
        agent.destroy();
        await s.close();
      }
    });

    // A connection that has not sent enough bytes to be routed belongs to no server, so stop()
    // destroys unrouted sockets at once.
    test('behavior: a connection that has sent nothing does not hold stop()', async () => {
      const s = await startTestServer();
      const sock = net.connect(s.app.port, '127.0.0.1');
      try {
        await new Promise((r) => sock.once('connect', r));
        const closed = once(sock, 'close');
        await s.app.stop(NO_DEADLINE);
        await closed;
      } finally {
        sock.destroy();
        await s.close();
      }
    });

    // Requests still running after the grace period would run on against a closed database; they
    // are cut off at the deadline.
    test('behavior: a request still in flight after the grace period is dropped, not run against a closed database', async () => {
      const s = await startTestServer();
      const slow = slowPing(s);
      try {
        await slow.started;
        await s.app.stop(200);
        expect(s.app.store.db.open).toBe(false);
        slow.finish();
        const r = await slow.response;
        expect(r).toHaveProperty('error');
        expect((r as { error: string }).error).toMatch(/ECONNRESET|EPIPE|socket hang up/);
      } finally {
        slow.abort();
        await s.close();
      }
    });

    // Behind TLS, HTTP/1.1 is served by the secure HTTP/2 server itself, whose header and request
    // deadlines stop with its close(): the cut-off at the end of the grace period must reach its
    // connections too, or a client holding half-sent headers or a half-sent body would keep `serve`
    // from exiting after SIGTERM, for as long as it held them.
    describe('behind TLS', () => {
      let certDir: string;
      let pems: { cert: string; key: string };
      beforeAll(() => {
        certDir = mkdtempSync(join(tmpdir(), 'paypolicy-shutdown-tls-'));
        pems = selfSigned(certDir);
      });
      afterAll(() => rmSync(certDir, { recursive: true, force: true }));

      for (const [what, bytes] of [
        ['half-sent headers', 'POST /api/ping HTTP/1.1\r\nHost: x\r\nAuthoriz'],
        ['a half-sent body', 'POST /api/ping HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\nAuthorization: Bearer KEY\r\n\r\n{"agent_id"'],
      ] as const) {
        test(`behavior: an HTTP/1.1-over-TLS client holding ${what} is cut off at the end of the grace period`, async () => {
          const s = await startTestServer({ tls: pems });
          const sock = tls.connect({ port: s.app.port, host: '127.0.0.1', ca: readFileSync(pems.cert), ALPNProtocols: ['http/1.1'] });
          try {
            sock.on('data', () => {});
            sock.on('error', () => {});
            await once(sock, 'secureConnect');
            const closed = once(sock, 'close');
            sock.write(bytes.replace('KEY', s.bootstrap.api_key));
            // Past the grace period nothing is answered: stop() resolves only if the socket is cut.
            await s.app.stop(200);
            await closed;
            expect(s.app.store.db.open).toBe(false);
          } finally {
            sock.destroy();
            await s.close();
          }
        });
      }
    });
  });
});
