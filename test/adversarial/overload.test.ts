import { fdatasync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { Code, ConnectError } from '@connectrpc/connect';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { PaymentPolicyService, PaymentType } from '../../gen/paypolicy/v1/payment_policy_pb.js';
import { shareOf } from '../../src/overload/admission.js';
import { ConfigError, loadConfig } from '../../src/config.js';
import type { SignerPool } from '../../src/signing/signerPool.js';
import { createWalSync } from '../../src/store/walSync.js';
import { createWriteQueue } from '../../src/store/writeQueue.js';
import { adminFor, createAgent, type Admin } from '../helpers/admin.js';
import { connectClient, grpcChannel, grpcUnary } from '../helpers/clients.js';
import { postSign, recoverAuthorizationSigner, setPolicy, type SignBody } from '../helpers/payments.js';
import { PAY_TO, startHeldPeer, startX402Peer, type X402Peer } from '../helpers/peers.js';
import { holdSigning } from '../helpers/holdSigning.js';
import { bearer, expectRpcError } from '../helpers/rpc.js';
import { rest, startTestServer, type RestResult, type TestServer, type TestServerOptions } from '../helpers/server.js';

/**
 * Overload is shed, not queued without bound. Real servers with small bounds
 * (4 requests in flight, 2 payments in the signing stage, 1 probe) are filled with work held by
 * real mechanisms (a paywall that does not answer until released, a WAL sync held like a slow
 * disk); the next request must be refused at once with 503 `overloaded` and Retry-After (Connect
 * and gRPC: Unavailable), write nothing, and leave /healthz and /readyz answering; once the work
 * is released everything completes and new requests succeed.
 */

const RECIPIENT = '0x2222222222222222222222222222222222222222';
const CLOSE = { connection: 'close' };

let x402: X402Peer;

/** A paywall in front of the x402 peer that parks every request until `release`, then relays it. */
function heldPaywall() {
  return startHeldPeer((req) => {
    const url = new URL(req.url);
    return fetch(x402.url(`${url.pathname}${url.search}`), { method: req.method, headers: { connection: 'close' } });
  });
}

/** Replaces the server's WAL sync with one that parks every sync until `open` (a stalled disk). */
function holdWalSync(s: TestServer) {
  let open = false;
  const parked: Array<() => void> = [];
  const sync = (fd: number, done: (err: NodeJS.ErrnoException | null) => void) => {
    if (open) fdatasync(fd, done);
    else parked.push(() => fdatasync(fd, done));
  };
  const store = s.app.store;
  store.writes = createWriteQueue(store.db, createWalSync(join(s.dataDir, 'paypolicy.db-wal'), sync), store.tx);
  return {
    open() {
      open = true;
      for (const p of parked.splice(0)) p();
    },
  };
}

/** Counts payments admitted into the signing stage (the real admit runs; this only watches). */
function watchSigningStage(signer: SignerPool) {
  let admitted = 0;
  let wake: (() => void) | undefined;
  const admit = signer.admit;
  signer.admit = (orgId) => {
    const release = admit(orgId);
    admitted++;
    wake?.();
    return release;
  };
  return {
    async reached(n: number) {
      while (admitted < n) await new Promise<void>((r) => (wake = r));
    },
  };
}

/**
 * Sends `head` (request line and headers) on a new connection and never sends a body; resolves
 * with the raw answer once the server has closed the connection, or with `undefined` if nothing
 * came within `ms` (the server waiting for the body).
 */
function headersOnly(url: string, head: string, ms: number): Promise<string | undefined> {
  const { port } = new URL(url);
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), '127.0.0.1', () => socket.write(head));
    let answer = '';
    const timer = setTimeout(() => {
      socket.destroy();
      resolve(undefined);
    }, ms);
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => (answer += d));
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(answer || undefined);
    });
  });
}

type Bounded = { s: TestServer; admin: Admin; held: Awaited<ReturnType<typeof heldPaywall>> };

/** A server with the given bounds that may probe a held paywall, for the enclosing describe block. */
function boundedServer(limits: TestServerOptions['limits']): Bounded {
  const ctx = {} as Bounded;
  beforeAll(async () => {
    ctx.held = await heldPaywall();
    // One organization fills these gates: its share is the whole gate (the per-organization share has its own test).
    ctx.s = await startTestServer({ logLevel: 'warn', dev: true, probeAllowHosts: [ctx.held.peer.host, x402.host], limits: {
      maxInFlightPerOrg: limits?.maxInFlight, maxSignQueuePerOrg: limits?.maxSignQueue, maxProbesPerOrg: limits?.maxProbes, ...limits,
    } });
    ctx.admin = adminFor(ctx.s);
  });
  afterAll(async () => {
    ctx.held?.release();
    await ctx.s?.close();
    await ctx.held?.peer.close();
  });
  return ctx;
}

/** A new agent allowed to pay `recipient` up to `capUsd` a day, asking approval above `thresholdUsd`. */
async function agentPaying({ s, admin }: Bounded, name: string, recipient: string, capUsd: string, thresholdUsd: string): Promise<string> {
  const agentId = await createAgent(admin, s.bootstrap.org_id, name);
  await setPolicy(admin, agentId, { allowlist: [recipient], capUsd, thresholdUsd });
  return agentId;
}

function expectOverloaded(r: RestResult): void {
  expect(r.status, r.text).toBe(503);
  expect(r.json).toEqual({ error: expect.stringMatching(/overloaded/i), code: 'overloaded' });
  expect(r.headers.get('retry-after')).toBe('1');
}

function expectRpcOverloaded(err: ConnectError): void {
  expect(err.metadata.get('x-error-code')).toBe('overloaded');
  expect(err.metadata.get('retry-after')).toBe('1');
}

async function expectHealthy(s: TestServer): Promise<void> {
  const [health, ready] = await Promise.all([rest(s.url, 'GET', '/healthz', { headers: CLOSE }), rest(s.url, 'GET', '/readyz', { headers: CLOSE })]);
  expect(health.status, health.text).toBe(200);
  expect(ready.status, ready.text).toBe(200);
}

beforeAll(async () => {
  x402 = await startX402Peer();
});
afterAll(async () => x402?.close());

describe('small signing and probe bounds (4 in flight, signing stage 2, 1 probe)', () => {
  const ctx = boundedServer({ maxInFlight: 4, maxSignQueue: 2, maxProbes: 1 });

  test('behavior: with the one probe slot held, the next quote and paywall sign get 503 overloaded at once and write nothing', async () => {
    const { s, held } = ctx;
    const key = s.bootstrap.api_key;
    const agentId = await agentPaying(ctx, 'probe-bound', PAY_TO, '10', '1');
    const url = held.peer.url('/paid');
    const first = rest(s.url, 'POST', '/api/quote', { key, body: { url, agent_id: agentId }, headers: CLOSE });
    await held.reached(1);

    expectOverloaded(await rest(s.url, 'POST', '/api/quote', { key, body: { url, agent_id: agentId }, headers: CLOSE }));
    const paywall: SignBody = { agent_id: agentId, type: 'x402', payload: { resource_url: url } };
    expectOverloaded(await postSign(s.url, key, paywall, 'probe-refused'));
    const client = connectClient(PaymentPolicyService, s.url);
    expectRpcOverloaded(await expectRpcError(client.quote({ url, agentId }, bearer(key)), Code.Unavailable, /overloaded/i));
    await expectHealthy(s);
    // Refused probes never reached the network, and the refused payment left no row.
    expect(held.parked()).toBe(1);
    expect(s.app.store.payments.findByIdempotencyKey(agentId, 'probe-refused')).toBeUndefined();

    held.release();
    const quoted = await first;
    expect(quoted.status, quoted.text).toBe(200);
    const signed = await postSign(s.url, key, paywall, 'probe-refused');
    expect(signed.status, signed.text).toBe(200);
    expect(signed.json.idempotent).toBe(false);
  });

  test('behavior: with the signing stage full, the next payment gets 503 overloaded (gRPC UNAVAILABLE) before anything is reserved', async () => {
    const { s } = ctx;
    const key = s.bootstrap.api_key;
    const agentId = await agentPaying(ctx, 'sign-bound', RECIPIENT, '10', '5');
    const body: SignBody = { agent_id: agentId, type: 'eip3009', chain_id: 8453, recipient_address: RECIPIENT, amount_usd: '1' };
    const disk = holdWalSync(s);
    const stage = watchSigningStage(s.app.deps.signer);
    const a = postSign(s.url, key, body, 'stage-1');
    const b = postSign(s.url, key, body, 'stage-2');
    await stage.reached(2); // both are signed or being signed, waiting for their commit's sync

    expectOverloaded(await postSign(s.url, key, body, 'stage-3'));
    const ch = grpcChannel(s.url);
    try {
      const g = await grpcUnary(ch, PaymentPolicyService, PaymentPolicyService.method.sign, {
        agentId, type: PaymentType.EIP3009, chainId: 8453, recipientAddress: RECIPIENT, amountUsd: '1', idempotencyKey: 'stage-grpc',
      }, key);
      expect(g.ok).toBe(false);
      if (!g.ok) {
        expect(g.code).toBe(grpc.status.UNAVAILABLE);
        expect(g.metadata.get('x-error-code')).toEqual(['overloaded']);
      }
    } finally {
      ch.close();
    }
    await expectHealthy(s);
    const payments = s.app.store.payments;
    expect(payments.findByIdempotencyKey(agentId, 'stage-3')).toBeUndefined();
    expect(payments.findByIdempotencyKey(agentId, 'stage-grpc')).toBeUndefined();
    expect(payments.committedSince(agentId, 0, s.app.deps.now())).toBe(2_000_000n);

    disk.open();
    for (const r of await Promise.all([a, b])) {
      expect(r.status, r.text).toBe(200);
      expect((await recoverAuthorizationSigner(r.json.signature, r.json.authorization)).toLowerCase()).toBe(s.bootstrap.treasury_address.toLowerCase());
    }
    const retried = await postSign(s.url, key, body, 'stage-3');
    expect(retried.status, retried.text).toBe(200);
    expect(retried.json.idempotent).toBe(false);
    expect(payments.committedSince(agentId, 0, s.app.deps.now())).toBe(3_000_000n);
  });
});

describe('admission bound on the agent surface (4 in flight)', () => {
  // Work is held here for as long as a test needs: no deadline shedding (its own block below).
  const ctx = boundedServer({ maxInFlight: 4, maxSignQueue: 100, maxQueueMs: 600_000, maxProbes: 100 });

  test('behavior: with 4 requests in flight the 5th gets 503 overloaded at once; health checks and AdminService still answer', async () => {
    const { s, held, admin } = ctx;
    const key = s.bootstrap.api_key;
    const agentId = await agentPaying(ctx, 'admission', PAY_TO, '10', '1');
    const url = held.peer.url('/paid');
    const quotes = [1, 2, 3, 4].map(() => rest(s.url, 'POST', '/api/quote', { key, body: { url, agent_id: agentId }, headers: CLOSE }));
    await held.reached(4);

    expectOverloaded(await rest(s.url, 'POST', '/api/ping', { key, body: { agent_id: agentId }, headers: CLOSE }));
    expectOverloaded(await rest(s.url, 'GET', `/api/resolve?slug=x`, { key, headers: CLOSE }));
    const client = connectClient(PaymentPolicyService, s.url);
    expectRpcOverloaded(await expectRpcError(client.ping({ agentId }, bearer(key)), Code.Unavailable, /overloaded/i));
    await expectHealthy(s);
    // Operators are outside the agent bound: the one who must suspend a flooding agent can.
    const listed = await admin.client.listAgents({ orgId: s.bootstrap.org_id }, admin.auth);
    expect(listed.agents.length).toBeGreaterThan(0);

    held.release();
    for (const q of await Promise.all(quotes)) {
      expect(q.status, q.text).toBe(200);
      expect(q.json.status).toBe('allowed');
    }
    const ping = await rest(s.url, 'POST', '/api/ping', { key, body: { agent_id: agentId }, headers: CLOSE });
    expect(ping.status, ping.text).toBe(200);
  });

  test('behavior: with the gate full, a request that sends its headers and stalls its body gets 503 overloaded at once, before authentication, and the connection is closed', async () => {
    const { s } = ctx;
    const key = s.bootstrap.api_key;
    const agentId = await agentPaying(ctx, 'stalled-body', RECIPIENT, '10', '5');
    const signer = holdSigning(s.app.deps.signer);
    const body: SignBody = { agent_id: agentId, type: 'eip3009', chain_id: 8453, recipient_address: RECIPIENT, amount_usd: '1' };
    const inside = [1, 2, 3, 4].map((i) => postSign(s.url, key, body, `inside-${i}`));
    await signer.reached(4);

    // 10 s is a third of the request timeout: a server that waits for the body answers nothing by then.
    const stalled = (auth: string) => headersOnly(s.url, `POST /api/sign HTTP/1.1\r\nhost: x\r\n${auth}content-type: application/json\r\ncontent-length: 200\r\nidempotency-key: stalled\r\n\r\n{"agent_id":`, 10_000);
    for (const answer of [await stalled(`authorization: Bearer ${key}\r\n`), await stalled('')]) {
      expect(answer).toMatch(/^HTTP\/1\.1 503 /);
      expect(answer).toMatch(/\r\nretry-after: 1\r\n/i);
      expect(answer).toMatch(/\r\nconnection: close\r\n/i);
      expect(answer).toContain('"code":"overloaded"');
    }
    await expectHealthy(s);
    expect(s.app.store.payments.findByIdempotencyKey(agentId, 'stalled')).toBeUndefined();

    signer.release();
    for (const r of await Promise.all(inside)) expect(r.status, r.text).toBe(200);
  });

  test('behavior: 300 concurrent connections against a bound of 4: exactly 4 are served, 296 refused at once, no 500, the ledger holds exactly the 200s', async () => {
    const { s } = ctx;
    const key = s.bootstrap.api_key;
    const agentId = await agentPaying(ctx, 'flood', RECIPIENT, '1000', '100');
    const body: SignBody = { agent_id: agentId, type: 'eip3009', chain_id: 8453, recipient_address: RECIPIENT, amount_usd: '1' };
    const disk = holdWalSync(s);
    const N = 300;
    let answered = 0;
    let wake: (() => void) | undefined;
    const calls = Array.from({ length: N }, (_, i) =>
      postSign(s.url, key, body, `flood-${i}`).then((r) => {
        answered++;
        wake?.();
        return { i, r };
      }));
    // While the disk is stalled, the 4 admitted payments cannot finish: every other one must
    // already have its answer.
    while (answered < N - 4) await new Promise<void>((r) => (wake = r));
    expect(answered).toBe(N - 4);
    await expectHealthy(s);
    disk.open();
    const results = await Promise.all(calls);

    const statuses = results.map(({ r }) => r.status);
    expect(statuses.filter((st) => st === 200)).toHaveLength(4);
    expect(statuses.filter((st) => st === 503)).toHaveLength(N - 4);
    for (const { r } of results) if (r.status === 503) expectOverloaded(r);
    const payments = s.app.store.payments;
    for (const { i, r } of results) {
      const row = payments.findByIdempotencyKey(agentId, `flood-${i}`);
      if (r.status === 200) expect(row?.status).toBe('signed');
      else expect(row).toBeUndefined();
    }
    expect(payments.committedSince(agentId, 0, s.app.deps.now())).toBe(4_000_000n);
  });
});

describe('deadline in the signing stage (max queue 300 ms)', () => {
  const ctx = boundedServer({ maxInFlight: 4, maxSignQueue: 4, maxQueueMs: 300, maxProbes: 1 });

  test('behavior: a payment that waited longer than the deadline for a signing thread gets 503 overloaded and writes nothing; its retry signs', async () => {
    const { s } = ctx;
    const key = s.bootstrap.api_key;
    const agentId = await agentPaying(ctx, 'deadline', RECIPIENT, '10', '5');
    const body: SignBody = { agent_id: agentId, type: 'eip3009', chain_id: 8453, recipient_address: RECIPIENT, amount_usd: '1' };
    const signer = holdSigning(s.app.deps.signer);
    const late = postSign(s.url, key, body, 'late');
    await signer.reached(1);
    // The condition under test is time itself: the payment waits past its deadline for the thread.
    await new Promise((r) => setTimeout(r, 400));
    signer.release();

    expectOverloaded(await late);
    const payments = s.app.store.payments;
    expect(payments.findByIdempotencyKey(agentId, 'late')).toBeUndefined();
    expect(payments.committedSince(agentId, 0, s.app.deps.now())).toBe(0n);
    const retried = await postSign(s.url, key, body, 'late');
    expect(retried.status, retried.text).toBe(200);
    expect(retried.json.idempotent).toBe(false);
    expect((await recoverAuthorizationSigner(retried.json.signature, retried.json.authorization)).toLowerCase()).toBe(s.bootstrap.treasury_address.toLowerCase());
    expect(payments.committedSince(agentId, 0, s.app.deps.now())).toBe(1_000_000n);
  });
});

describe('configuration of the bounds', () => {
  test('behavior: flags win over the environment, unset bounds keep their defaults, and a bound of 0 is refused', () => {
    const c = loadConfig(['--max-in-flight', '8', '--max-probes=2', '--max-queue-ms', '250'], { PAYPOLICY_MAX_IN_FLIGHT: '99', PAYPOLICY_MAX_SIGN_QUEUE: '3', PAYPOLICY_MAX_QUEUE_MS: '9' });
    expect([c.maxInFlight, c.maxSignQueue, c.maxProbes, c.maxQueueMs]).toEqual([8, 3, 2, 250]);
    expect(loadConfig([], {}).maxInFlight).toBeUndefined();
    expect(() => loadConfig(['--max-sign-queue', '0'], {})).toThrow(ConfigError);
    expect(() => loadConfig([], { PAYPOLICY_MAX_PROBES: '-1' })).toThrow(/--max-probes must be an integer/);
  });

  test('behavior: the per-organization shares of the probes and the signing stage are read like the bounds; 0 is refused', () => {
    const c = loadConfig(['--max-probes-per-org', '5'], { PAYPOLICY_MAX_PROBES_PER_ORG: '9', PAYPOLICY_MAX_SIGN_QUEUE_PER_ORG: '7' });
    expect([c.maxProbesPerOrg, c.maxSignQueuePerOrg]).toEqual([5, 7]);
    expect(() => loadConfig(['--max-sign-queue-per-org', '0'], {})).toThrow(/--max-sign-queue-per-org must be an integer/);
    expect(() => loadConfig([], { PAYPOLICY_MAX_PROBES_PER_ORG: '0' })).toThrow(ConfigError);
  });

  test('behavior: a share is three quarters of its gate unless set, and never more than the gate', () => {
    expect([shareOf(32, undefined), shareOf(256, undefined), shareOf(1, undefined)]).toEqual([24, 192, 1]);
    expect([shareOf(32, 10), shareOf(4, 100)]).toEqual([10, 4]);
  });
});
