import { once } from 'node:events';
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Decision } from '../gen/paypolicy/v1/admin_pb.js';
import { PaymentPolicyService, PaymentType } from '../gen/paypolicy/v1/payment_policy_pb.js';
import { ConfigError, loadConfig } from '../src/config.js';
import { evaluatePolicy, type DenyRule, type PolicyFacts } from '../src/domain/policy.js';
import { outcomeClass, signReasonClass } from '../src/observability/metrics.js';
import { parseLimits } from '../src/domain/limits.js';
import { createReadiness } from '../src/observability/readiness.js';
import { isLoopbackAddress } from '../src/server/server.js';
import { adminFor, createAgent, type Admin } from './helpers/admin.js';
import { connectClient } from './helpers/clients.js';
import { postSign, setPolicy } from './helpers/payments.js';
import { closedPort, PAY_TO, startFetchPeer, startX402Peer, type X402Peer } from './helpers/peers.js';
import { rest, startTestServer, type TestServer } from './helpers/server.js';
import { startTempoRpc } from './helpers/tempoRpc.js';

/**
 * /metrics, /readyz and the root redirect against a real server: real sign, quote and approval
 * traffic over REST and Connect, then a scrape that must show the series and must not show any
 * identifier of a tenant.
 */

const STRANGER = '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC';
const METRICS_TOKEN = 'metrics-token-0123456789abcdef';
const CLOSE = { connection: 'close' };

let x402: X402Peer;
let deadPort: number;
let s: TestServer;
let guarded: TestServer;
let admin: Admin;

beforeAll(async () => {
  [x402, deadPort] = await Promise.all([startX402Peer(), closedPort()]);
  [s, guarded] = await Promise.all([
    startTestServer({ dev: true, probeAllowHosts: [x402.host, `127.0.0.1:${deadPort}`] }),
    startTestServer({ metrics: { metricsToken: METRICS_TOKEN, metricsAgentLabels: true } }),
  ]);
  admin = adminFor(s);
});

afterAll(async () => {
  await Promise.all([s?.close(), guarded?.close()]);
  await x402?.close();
});

/** The value of one series (exact label text), or undefined when it is absent. */
function series(text: string, name: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line === undefined ? undefined : Number(line.slice(name.length + 1));
}

async function scrape(server: TestServer, headers: Record<string, string> = {}) {
  return rest(server.url, 'GET', '/metrics', { headers: { ...CLOSE, ...headers } });
}

describe('/metrics', () => {
  test('behavior: after sign (allowed, pending, denied, error; REST and Connect), quote and an approval, the series count them, with no tenant identifier', async () => {
    const key = s.bootstrap.api_key;
    const agentId = await createAgent(admin, s.bootstrap.org_id, 'metrics-agent');
    await setPolicy(admin, agentId, { allowlist: [PAY_TO], capUsd: '10', thresholdUsd: '1' });

    const allowed = await postSign(s.url, key, { agent_id: agentId, type: 'eip3009', recipient_address: PAY_TO, amount_usd: 0.5 });
    expect(allowed.status).toBe(200);
    const pending = await postSign(s.url, key, { agent_id: agentId, type: 'eip3009', recipient_address: PAY_TO, amount_usd: 5 });
    expect(pending.status).toBe(202);
    const denied = await postSign(s.url, key, { agent_id: agentId, type: 'permit2', recipient_address: STRANGER, amount_usd: 0.5 });
    expect(denied.status).toBe(403);
    const invalid = await postSign(s.url, key, { agent_id: agentId, type: 'bogus', recipient_address: PAY_TO, amount_usd: 0.5 });
    expect(invalid.status).toBe(400);
    const rpc = connectClient(PaymentPolicyService, s.url);
    const rpcSign = await rpc.sign({ agentId, type: PaymentType.RAW_TRANSACTION, recipientAddress: STRANGER, amountUsd: '0.25' }, { headers: { authorization: `Bearer ${key}` } });
    expect(rpcSign.reason).toContain('allowlist');

    const quoted = await rest(s.url, 'POST', '/api/quote', { key, body: { url: x402.url('/paid?case=metrics'), agent_id: agentId }, headers: CLOSE });
    expect(quoted.status).toBe(200);
    const unreachable = await rest(s.url, 'POST', '/api/quote', { key, body: { url: `http://127.0.0.1:${deadPort}/paid`, agent_id: agentId }, headers: CLOSE });
    expect(unreachable.json.code).toBe('unreachable');
    const status = await rest(s.url, 'GET', `/api/approvals/${pending.json.approval_request_id}/status`, { key, headers: CLOSE });
    expect(status.status).toBe(200);

    const before = await scrape(s);
    expect(before.status).toBe(200);
    expect(before.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(series(before.text, 'paypolicy_pending_approvals')).toBe(1);

    await admin.client.decideApproval({ id: pending.json.approval_request_id, decision: Decision.APPROVE, note: 'ok' }, admin.auth);
    const after = await scrape(s);
    const m = after.text;
    expect(series(m, 'paypolicy_pending_approvals')).toBe(0);
    expect(series(m, 'paypolicy_approval_decision_seconds_count{decision="approved"}')).toBe(1);

    expect(series(m, 'paypolicy_sign_outcomes_total{type="eip3009",outcome="allowed",reason="none"}')).toBe(1);
    expect(series(m, 'paypolicy_sign_outcomes_total{type="eip3009",outcome="pending_approval",reason="approval_threshold"}')).toBe(1);
    expect(series(m, 'paypolicy_sign_outcomes_total{type="permit2",outcome="denied",reason="allowlist"}')).toBe(1);
    expect(series(m, 'paypolicy_sign_outcomes_total{type="invalid",outcome="error",reason="unsupported_type"}')).toBe(1);
    expect(series(m, 'paypolicy_sign_outcomes_total{type="raw_transaction",outcome="denied",reason="allowlist"}')).toBe(1);
    expect(series(m, 'paypolicy_probe_outcomes_total{outcome="x402"}')).toBe(1);
    expect(series(m, 'paypolicy_probe_outcomes_total{outcome="unreachable"}')).toBe(1);

    // Requests by route template and outcome class; never a raw path with an id in it.
    expect(series(m, 'paypolicy_http_requests_total{route="/api/sign",outcome="200"}')).toBe(1);
    expect(series(m, 'paypolicy_http_requests_total{route="/api/sign",outcome="202"}')).toBe(1);
    expect(series(m, 'paypolicy_http_requests_total{route="/api/sign",outcome="403"}')).toBe(1);
    expect(series(m, 'paypolicy_http_requests_total{route="/api/sign",outcome="4xx"}')).toBe(1);
    expect(series(m, 'paypolicy_http_requests_total{route="/api/approvals/{id}/status",outcome="200"}')).toBe(1);
    expect(series(m, 'paypolicy_http_requests_total{route="/paypolicy.v1.PaymentPolicyService/Sign",outcome="200"}')).toBe(1);
    expect(series(m, 'paypolicy_http_requests_total{route="/metrics",outcome="200"}')).toBe(1);
    expect(series(m, 'paypolicy_http_request_duration_seconds_count{route="/api/quote",outcome="200"}')).toBe(1);

    expect(series(m, 'paypolicy_wal_sync_seconds_count')).toBeGreaterThan(0);
    expect(series(m, 'paypolicy_signer_threads{state="online"}')).toBe(1);
    expect(series(m, 'paypolicy_signer_threads{state="configured"}')).toBe(1);
    expect(series(m, 'paypolicy_signing_stage_payments')).toBe(0);
    expect(series(m, 'paypolicy_signing_stage_limit')).toBe(256);
    expect(series(m, 'paypolicy_open_connections')).toBeGreaterThanOrEqual(1);
    // The clocks of a machine with a set clock agree: a skew of (nearly) nothing.
    expect(Math.abs(series(m, 'paypolicy_clock_skew_seconds') ?? Number.NaN)).toBeLessThanOrEqual(1);
    expect(series(m, 'process_cpu_user_seconds_total')).toBeGreaterThan(0);
    expect(m).toContain('nodejs_eventloop_lag_seconds');

    // No identifier of a tenant, a payment or a peer, and no agent series without the opt-in.
    for (const secret of [agentId, key, s.bootstrap.org_id, s.bootstrap.admin_token, pending.json.approval_request_id, allowed.json.transaction_id, PAY_TO, PAY_TO.toLowerCase(), STRANGER, x402.host, `127.0.0.1:${deadPort}`]) {
      expect(m).not.toContain(secret);
    }
    expect(m).not.toContain('paypolicy_agent_sign_outcomes_total');
    for (const [, route] of m.matchAll(/route="([^"]*)"/g)) expect(route).toMatch(/^(\/[\w/{}.]*|\/dashboard\/\*|unmatched)$/);
  });

  test('behavior: REST and Connect count the same refusals under the same labels (a mismatched Idempotency-Key, a type left out, a type chosen by the payload)', async () => {
    const key = s.bootstrap.api_key;
    const agentId = await createAgent(admin, s.bootstrap.org_id, 'metrics-parity-agent');
    await setPolicy(admin, agentId, { allowlist: [PAY_TO], capUsd: '10', thresholdUsd: '1' });
    const rpc = connectClient(PaymentPolicyService, s.url);
    const auth = { headers: { authorization: `Bearer ${key}` } };
    const count = async (labels: string) => series((await scrape(s)).text, `paypolicy_sign_outcomes_total{${labels}}`) ?? 0;

    const mismatch = 'type="eip3009",outcome="error",reason="invalid_idempotency_key"';
    const mismatchBefore = await count(mismatch);
    const rest1 = await rest(s.url, 'POST', '/api/sign', {
      key, headers: { ...CLOSE, 'idempotency-key': 'b' },
      body: { agent_id: agentId, type: 'eip3009', recipient_address: PAY_TO, amount_usd: 0.5, idempotency_key: 'a' },
    });
    expect(rest1.json.code).toBe('invalid_idempotency_key');
    expect(await count(mismatch)).toBe(mismatchBefore + 1);
    await expect(rpc.sign({ agentId, type: PaymentType.EIP3009, recipientAddress: PAY_TO, amountUsd: '0.5', idempotencyKey: 'a b' }, auth)).rejects.toThrow(/Idempotency-Key/);
    expect(await count(mismatch)).toBe(mismatchBefore + 2);

    // No type: REST's default member and Connect's unspecified type with no payload are both `unset`.
    const unset = 'type="unset",outcome="denied",reason="allowlist"';
    const unsetBefore = await count(unset);
    const rest2 = await postSign(s.url, key, { agent_id: agentId, recipient_address: STRANGER, amount_usd: 0.25 });
    expect(rest2.status).toBe(403);
    await rpc.sign({ agentId, recipientAddress: STRANGER, amountUsd: '0.25' }, auth);
    expect(await count(unset)).toBe(unsetBefore + 2);

    // A payload member that chooses the type labels the request with it, never `invalid`.
    const chosen = 'type="x402",outcome="error",reason="resource_url_required"';
    const chosenBefore = await count(chosen);
    await expect(rpc.sign({ agentId, payload: { case: 'x402', value: {} } }, auth)).rejects.toThrow(/resource_url/);
    expect(await count(chosen)).toBe(chosenBefore + 1);
  });

  test('behavior: a request whose path the REST handler normalizes is counted under the route that served it', async () => {
    const agentId = await createAgent(admin, s.bootstrap.org_id, 'dot-segments');
    await setPolicy(admin, agentId, { allowlist: [PAY_TO], capUsd: '10', thresholdUsd: '1' });
    const routeTotal = (text: string, route: string) => text.split('\n')
      .filter((l) => l.startsWith(`paypolicy_http_requests_total{route="${route}",`))
      .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
    const before = (await scrape(s)).text;
    // Sent as written (fetch would resolve the dot segment before sending).
    const status = await new Promise<number>((resolve, reject) => {
      const body = JSON.stringify({ agent_id: agentId, type: 'eip3009', recipient_address: PAY_TO, amount_usd: 0.01 });
      const req = request(`${s.url}/`, {
        method: 'POST', path: '/api/x/../sign',
        headers: { authorization: `Bearer ${s.bootstrap.api_key}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), connection: 'close' },
      }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode!));
      });
      req.on('error', reject);
      req.end(body);
    });
    expect(status).toBe(200);
    const after = (await scrape(s)).text;
    expect(routeTotal(after, '/api/sign') - routeTotal(before, '/api/sign')).toBe(1);
    expect(routeTotal(after, 'unmatched')).toBe(routeTotal(before, 'unmatched'));
  });

  test('behavior: the admission gate\'s requests in flight are counted while they run, beside its bound', async () => {
    // A paywall that holds its answer until told: the quote probing it stays inside the gate.
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let arrived!: () => void;
    const probing = new Promise<void>((r) => (arrived = r));
    const peer = await startFetchPeer(async () => {
      arrived();
      await held;
      return new Response('no offer here', { status: 404 });
    });
    const gated = await startTestServer({ dev: true, probeAllowHosts: [peer.host], limits: { maxInFlight: 7 } });
    try {
      const agentId = await createAgent(adminFor(gated), gated.bootstrap.org_id, 'in-flight');
      const before = (await scrape(gated)).text;
      expect(series(before, 'paypolicy_requests_in_flight')).toBe(0);
      expect(series(before, 'paypolicy_requests_in_flight_limit')).toBe(7);
      const quote = rest(gated.url, 'POST', '/api/quote', { key: gated.bootstrap.api_key, body: { url: peer.url('/held'), agent_id: agentId }, headers: CLOSE });
      await probing;
      // The scrape itself is outside the gate (operators' endpoints are never refused for load).
      expect(series((await scrape(gated)).text, 'paypolicy_requests_in_flight')).toBe(1);
      release();
      expect((await quote).status).toBeGreaterThanOrEqual(400);
      expect(series((await scrape(gated)).text, 'paypolicy_requests_in_flight')).toBe(0);
    } finally {
      release();
      await gated.close();
      await peer.close();
    }
  });

  test('behavior: with --metrics-token, only that bearer token reads /metrics; agent ids appear only with --metrics-agent-labels', async () => {
    expect((await scrape(guarded)).status).toBe(401);
    expect((await scrape(guarded)).headers.get('www-authenticate')).toBe('Bearer');
    expect((await scrape(guarded, { authorization: `Bearer ${METRICS_TOKEN}x` })).status).toBe(401);
    expect((await scrape(guarded, { authorization: `Bearer ${guarded.bootstrap.admin_token}` })).status).toBe(401);
    const g = adminFor(guarded);
    const agentId = await createAgent(g, guarded.bootstrap.org_id, 'labelled');
    await setPolicy(g, agentId, { allowlist: [PAY_TO], capUsd: '10', thresholdUsd: '1' });
    expect((await postSign(guarded.url, guarded.bootstrap.api_key, { agent_id: agentId, type: 'eip3009', recipient_address: PAY_TO, amount_usd: 0.1 })).status).toBe(200);
    const ok = await scrape(guarded, { authorization: `Bearer ${METRICS_TOKEN}` });
    expect(ok.status).toBe(200);
    // The scheme is case-insensitive (RFC 9110), and spaces are read as the API's own credentials read them.
    expect((await scrape(guarded, { authorization: `bearer ${METRICS_TOKEN}` })).status).toBe(200);
    expect((await scrape(guarded, { authorization: `BEARER   ${METRICS_TOKEN} ` })).status).toBe(200);
    expect((await scrape(guarded, { authorization: `Basic ${METRICS_TOKEN}` })).status).toBe(401);
    expect(series(ok.text, `paypolicy_agent_sign_outcomes_total{agent_id="${agentId}",outcome="allowed"}`)).toBe(1);
    expect(ok.text).not.toContain(METRICS_TOKEN);
  });

  test('behavior: the token comes from --metrics-token or PAYPOLICY_METRICS_TOKEN; error: a short one stops start-up without echoing it', () => {
    expect(loadConfig([], { PAYPOLICY_METRICS_TOKEN: METRICS_TOKEN }).metricsToken).toBe(METRICS_TOKEN);
    expect(loadConfig(['--metrics-token', METRICS_TOKEN, '--metrics-agent-labels'], {})).toMatchObject({ metricsToken: METRICS_TOKEN, metricsAgentLabels: true });
    expect(loadConfig([], {}).metricsToken).toBeUndefined();
    expect(() => loadConfig(['--metrics-token', 'short-secret'], {})).toThrow(ConfigError);
    expect(() => loadConfig(['--metrics-token', 'short-secret'], {})).not.toThrow(/short-secret/);
  });

  test('behavior: HEAD answers with GET\'s headers (a content-length of the scrape) and no body', async () => {
    const head = await rest(s.url, 'HEAD', '/metrics', { headers: CLOSE });
    expect(head.status).toBe(200);
    expect(head.text).toBe('');
    expect(Number(head.headers.get('content-length'))).toBeGreaterThan(0);
  });

  test('error: a method other than GET or HEAD is 405', async () => {
    const r = await rest(s.url, 'POST', '/metrics', { headers: CLOSE });
    expect(r.status).toBe(405);
    expect(r.headers.get('allow')).toBe('GET, HEAD');
  });

  test('behavior: without a token only loopback peers are served', () => {
    for (const a of ['127.0.0.1', '127.3.2.1', '::1', '::ffff:127.0.0.1']) expect(isLoopbackAddress(a)).toBe(true);
    for (const a of ['10.0.0.1', '192.168.1.2', '::ffff:10.0.0.1', 'fe80::1', '128.0.0.1', undefined]) expect(isLoopbackAddress(a)).toBe(false);
  });

  test('behavior: outcome classes and reason classes are closed sets; every policy denial maps to its rule', () => {
    expect([200, 202, 403, 201, 404, 409, 503, 303].map(outcomeClass)).toEqual(['200', '202', '403', '2xx', '4xx', '4xx', '5xx', '3xx']);
    const base: PolicyFacts = {
      agentStatus: 'active', allowlist: ['0xaa'], spendCapMicros: 10_000_000n, approvalThresholdMicros: 1_000_000n, recipient: '0xaa',
      attributedSlug: null, amountMicros: 500_000n, committedMicros: 0n, maxNetworkFeeWei: 10n,
    };
    const cases: Array<[DenyRule | 'approval_threshold', PolicyFacts]> = [
      ['amount_limit', { ...base, amountMicros: 10n ** 16n }],
      ['agent_status', { ...base, agentStatus: 'paused' }],
      ['max_per_payment', { ...base, maxPerPaymentMicros: 499_999n }],
      ['allowlist', { ...base, recipient: '0xbb' }],
      ['allowlist', { ...base, allowlist: [], recipient: '0xbb' }],
      ['allowlist', { ...base, otherRecipients: ['0xcc'] }],
      ['network_fee', { ...base, networkFee: { gas: 100_000n, maxFeePerGas: 1_000n } }],
      ['spend_cap', { ...base, committedMicros: 9_800_000n }],
      ['limit', { ...base, limits: [{ scope: 'agent', limit: parseLimits([{ window: '1h', max_usd: '0.6' }])[0]!, use: { micros: 200_000n, count: 0, feeWei: 0n } }] }],
      ['limit', { ...base, limits: [{ scope: 'organization', limit: parseLimits([{ window: '2d', max_count: 1 }])[0]!, use: { micros: 0n, count: 1, feeWei: 0n } }] }],
      ['limit', {
        ...base, maxNetworkFeeWei: 10n ** 9n, networkFee: { gas: 10n, maxFeePerGas: 10n },
        limits: [{ scope: 'agent', limit: parseLimits([{ window: '5m', max_network_fee_wei: '150' }])[0]!, use: { micros: 0n, count: 0, feeWei: 100n } }],
      }],
      ['approval_threshold', { ...base, amountMicros: 2_000_000n }],
    ];
    for (const [rule, facts] of cases) {
      const v = evaluatePolicy(facts);
      if (v.outcome === 'allowed') throw new Error(`expected ${rule} to refuse`);
      expect(signReasonClass(v.reason)).toBe(rule);
      if (v.outcome === 'denied') expect(v.rule).toBe(rule);
    }
    expect(signReasonClass('Denied by approver: no')).toBe('approver');
    expect(signReasonClass("Price of $2 exceeds the request's max_amount_usd of $1")).toBe('max_amount');
    expect(signReasonClass('something new')).toBe('other');
  });
});

describe('/readyz', () => {
  test('behavior: ready with per-check detail; a dead signing thread is 503 naming it until its replacement is online', async () => {
    const ready = await rest(s.url, 'GET', '/readyz', { headers: CLOSE });
    expect(ready.status).toBe(200);
    expect(ready.json).toMatchObject({
      status: 'ready',
      checks: {
        server: { ok: true, draining: false },
        database: { ok: true, detail: 'writable' },
        signer: { ok: true, threads: [{ online: true, restarts: 0 }] },
        rpc: { tempo: { configured: false, reachable: null } },
        clock: { ok: true, tolerance_seconds: 60, detail: 'wall clock and ledger clock agree' },
      },
    });
    expect(ready.json.checks.database.free_bytes).toBeGreaterThan(0);

    const [thread] = s.app.deps.signer.threads();
    const exited = once(thread!.worker, 'exit');
    await thread!.worker.terminate();
    await exited;
    const dead = await rest(s.url, 'GET', '/readyz', { headers: CLOSE });
    expect(dead.status).toBe(503);
    expect(dead.json.status).toBe('unavailable');
    expect(dead.json.checks.signer).toMatchObject({ ok: false, detail: expect.stringContaining('0 of 1 signing threads online'), threads: [{ online: false, restarts: 1, last_exit_code: 1 }] });
    expect(dead.json.checks.database.ok).toBe(true);

    const [replacement] = s.app.deps.signer.threads();
    expect(replacement!.worker).not.toBe(thread!.worker);
    if (!s.app.deps.signer.threads()[0]!.online) await once(replacement!.worker, 'online');
    const back = await rest(s.url, 'GET', '/readyz', { headers: CLOSE });
    expect(back.status).toBe(200);
    expect(back.json.checks.signer.threads).toEqual([{ online: true, restarts: 1, last_exit_code: 1 }]);
  });

  test('behavior: a configured RPC node is a non-fatal detail: reachable, or not, never naming its URL', async () => {
    const node = await startTempoRpc({ eth_chainId: '0xa5bf' });
    try {
      const secretUrl = `${node.url}key-in-path-abc123`;
      const up = createReadiness(s.app.deps, { tempoRpcUrl: secretUrl });
      await up.settled();
      const report = up.check(false);
      expect(report.status).toBe('ready');
      expect(report.checks.rpc.tempo).toMatchObject({ configured: true, reachable: true });
      expect(node.calls.map((c) => c.method)).toEqual(['eth_chainId']);

      const downUrl = `http://127.0.0.1:${deadPort}/key-in-path-abc123`;
      const down = createReadiness(s.app.deps, { tempoRpcUrl: downUrl });
      await down.settled();
      const downReport = down.check(false);
      expect(downReport.status).toBe('ready');
      expect(downReport.checks.rpc.tempo).toMatchObject({ configured: true, reachable: false, detail: 'unreachable or not JSON-RPC' });
      expect(JSON.stringify([report, downReport])).not.toContain('key-in-path');
    } finally {
      await node.close();
    }
  });
});

describe('/', () => {
  test('behavior: a browser (Accept: text/html) is sent to /dashboard with 303, GET and HEAD', async () => {
    for (const method of ['GET', 'HEAD']) {
      const r = await fetch(`${s.url}/`, { method, redirect: 'manual', headers: { accept: 'text/html,application/xhtml+xml;q=0.9,*/*;q=0.8', ...CLOSE } });
      expect(r.status).toBe(303);
      expect(r.headers.get('location')).toBe('/dashboard');
    }
  });

  test('behavior: an API client (Accept: application/json, or none) keeps the JSON 404', async () => {
    for (const headers of [{ accept: 'application/json' }, {}] as Array<Record<string, string>>) {
      const r = await rest(s.url, 'GET', '/', { headers: { ...headers, ...CLOSE } });
      expect(r.status).toBe(404);
      expect(r.json).toEqual({ error: 'Not found', code: 'not_found' });
    }
    const post = await rest(s.url, 'POST', '/', { headers: { accept: 'text/html', ...CLOSE } });
    expect(post.status).toBe(404);
  });
});
