import { lookup } from 'node:dns/promises';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Decision } from '../../gen/paypolicy/v1/admin_pb.js';
import { MAX_RECORD_BYTES, MAX_RESOLVE_BYTES } from '../../src/app/registry/registry.js';
import { adminFor, createAgent, upsertService, type Admin } from '../helpers/admin.js';
import { listAllTransactions, setPolicy } from '../helpers/payments.js';
import { sizedRecord } from '../helpers/registry.js';
import { PAY_TO, carriesPayment, startFetchPeer, startX402Peer, type Peer, type X402Peer } from '../helpers/peers.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * The MCP server of @paypolicy/client, started as an agent host would (`paypolicy-client mcp`,
 * stdio, settings from the environment) and driven by the MCP SDK's own client: tool list and
 * schemas, every tool against the real server and the @x402/hono paywall, errors as tool errors.
 */

const BIN = fileURLToPath(new URL('../../clients/typescript/dist/bin.js', import.meta.url));
const RECIPIENT = '0x2222222222222222222222222222222222222222';
/** Whether this machine's own name resolves to loopback (/etc/hosts), so the resolver check can be seen end to end. */
const OWN_NAME_IS_LOOPBACK = await resolvesToLoopback(hostname());

let s: TestServer;
let x402: X402Peer;
let admin: Admin;
let agentId: string;
let mcp: Client;
let stderr = '';
/** An internal service on loopback that pay_and_fetch must never reach (not exempt). */
let inner: Peer;
/** An exempt origin that redirects to `inner`. */
let hop: Peer;
/** An exempt origin that answers with headers and then never finishes its body. */
let stall: { host: string; arrived: Promise<void>; hungUp: Promise<void>; close: () => Promise<void> };

/** A node:http server that sends 200 and one chunk, then holds the response open until the client hangs up. */
async function startStallingPeer(): Promise<typeof stall> {
  let arrive!: () => void;
  let hangUp!: () => void;
  const arrived = new Promise<void>((resolve) => (arrive = resolve));
  const hungUp = new Promise<void>((resolve) => (hangUp = resolve));
  const server = http.createServer((_req, res) => {
    res.on('close', hangUp);
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.write('first bytes, and then nothing');
    arrive();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    host: `127.0.0.1:${(server.address() as AddressInfo).port}`, arrived, hungUp,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** Starts `paypolicy-client mcp` on stdio with the test server's settings plus `env`. */
async function startMcp(env: Record<string, string>): Promise<{ client: Client; transport: StdioClientTransport }> {
  const t = new StdioClientTransport({
    command: process.execPath,
    args: [BIN, 'mcp'],
    env: { PATH: process.env.PATH ?? '', PAYPOLICY_URL: s.url, PAYPOLICY_API_KEY: s.bootstrap.api_key, PAYPOLICY_AGENT_ID: agentId, PAYPOLICY_MAX_AMOUNT_USD: '0.5', ...env },
    stderr: 'pipe',
  });
  t.stderr?.on('data', (chunk: Buffer) => void (stderr += chunk.toString()));
  const c = new Client({ name: 'paypolicy-test-host', version: '1.0.0' });
  await c.connect(t);
  return { client: c, transport: t };
}

beforeAll(async () => {
  x402 = await startX402Peer();
  inner = await startFetchPeer(() => Response.json({ secret: 'internal' }));
  hop = await startFetchPeer(() => new Response(null, { status: 302, headers: { location: inner.url('/secret?via=hop') } }));
  stall = await startStallingPeer();
  s = await startTestServer({ dev: true, logLevel: 'warn', probeAllowHosts: [x402.host] });
  admin = adminFor(s);
  agentId = await createAgent(admin, s.bootstrap.org_id, 'mcp-agent');
  await setPolicy(admin, agentId, { allowlist: [PAY_TO, RECIPIENT], capUsd: '10', thresholdUsd: '0.02' });
  await upsertService(admin, { slug: 'mcp-weather', name: 'Weather', paymentMethods: [{ realm: '', baseUrl: x402.url('/svc'), protocol: 'x402' }] });
  // The paywall is a loopback http peer: exempt it, as a developer would a local paywall.
  ({ client: mcp } = await startMcp({ PAYPOLICY_MCP_ALLOW_HTTP: '1', PAYPOLICY_MCP_ALLOW_HOSTS: `${x402.host}, ${hop.host}, ${stall.host}` }));
});

afterAll(async () => {
  await mcp?.close();
  await s?.close();
  await Promise.all([x402?.close(), inner?.close(), hop?.close(), stall?.close()]);
});

/** Calls a tool and parses its JSON text. */
async function call(name: string, args: Record<string, unknown> = {}, host: Client = mcp): Promise<{ isError: boolean; body: any }> {
  const r = (await host.callTool({ name, arguments: args })) as CallToolResult;
  const text = r.content.map((c) => (c.type === 'text' ? c.text : '')).join('');
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // SDK-level errors (schema validation) are plain text
  }
  return { isError: r.isError === true, body };
}

describe('paypolicy-client mcp', () => {
  test('behavior: lists the six tools with descriptions and precise input schemas', async () => {
    const { tools } = await mcp.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(['approval_status', 'pay_and_fetch', 'quote_url', 'resolve_services', 'sign_payment', 'spend_status']);
    for (const t of tools) expect(t.description!.length, t.name).toBeGreaterThan(80);
    const byName = Object.fromEntries(tools.map((t) => [t.name, t.inputSchema]));
    expect(byName.pay_and_fetch).toMatchObject({ type: 'object', required: ['url'], properties: { method: { enum: ['GET', 'POST'] } } });
    expect(byName.sign_payment).toMatchObject({ required: ['type'], properties: { type: { enum: ['eip3009', 'permit2', 'raw_transaction', 'x402', 'mpp'] } } });
    expect(byName.approval_status).toMatchObject({ required: ['approval_request_id'], properties: { approval_request_id: { format: 'uuid' } } });
    expect(byName.resolve_services).toMatchObject({ required: ['slugs'], properties: { slugs: { type: 'array', minItems: 1, maxItems: 100 } } });
    for (const t of tools) expect(t.inputSchema, t.name).toMatchObject({ additionalProperties: false });
  });

  test('error: an argument a tool does not take is a tool error naming it', async () => {
    for (const [name, args] of [
      ['quote_url', { url: 'https://example.com/x', methd: 'POST' }],
      ['sign_payment', { type: 'eip3009', recipient_address: '0x70997970c51812dc3a010c7d01b50e0d17dc79c8', amount_usd: '0.01', idempotencyKey: 'k' }],
      ['spend_status', { agent: 'other' }],
    ] as const) {
      const r = await call(name, args);
      expect(r.isError, name).toBe(true);
      expect(String(r.body), name).toMatch(new RegExp(`validation[\\s\\S]*${Object.keys(args).at(-1)}`, 'i'));
    }
  });

  test('behavior: spend_status, resolve_services and quote_url', async () => {
    expect(await call('spend_status')).toEqual({
      isError: false,
      body: expect.objectContaining({ agent_id: agentId, spend_cap_usd: '10', remaining_usd: '10', approval_threshold_usd: '0.02', max_amount_per_call_usd: '0.5' }),
    });
    const resolved = await call('resolve_services', { slugs: ['mcp-weather', 'unknown-svc'] });
    expect(resolved.body).toMatchObject({ results: { 'mcp-weather': { slug: 'mcp-weather', name: 'Weather' }, 'unknown-svc': null }, resolvedCount: 1 });
    const quote = await call('quote_url', { url: x402.url('/paid?mcp=quote') });
    expect(quote).toMatchObject({ isError: false, body: { status: 'allowed', rail: 'x402', amount_usd: 0.01, within_limit: true, max_amount_usd: '0.5' } });
  });

  test('error: resolve_services past what one resolve answers is a tool error naming resolve_too_large; fewer slugs are answered', async () => {
    const fitting = MAX_RESOLVE_BYTES / MAX_RECORD_BYTES;
    const slugs = Array.from({ length: fitting + 1 }, (_, i) => `mcp-big-${i}`);
    for (const slug of slugs) {
      const record = sizedRecord(slug, MAX_RECORD_BYTES);
      await upsertService(admin, { ...record, endpoints: record.endpoints.map((e) => ({ ...e, priceAtomic: e.priceAtomic ?? undefined })) });
    }
    const refused = await call('resolve_services', { slugs });
    expect(refused).toMatchObject({ isError: true, body: { code: 'resolve_too_large', status: 400 } });
    expect((await call('resolve_services', { slugs: slugs.slice(0, fitting) })).body).toMatchObject({ resolvedCount: fitting });
  });

  test('behavior: pay_and_fetch pays the paywall and returns the paid body and the payment', async () => {
    const r = await call('pay_and_fetch', { url: x402.url('/paid?mcp=pay') });
    expect(r.isError).toBe(false);
    expect(r.body).toMatchObject({ status: 200, truncated: false, payment: { rail: 'x402', amountUsd: '0.01', receipt: { header: 'payment-response' } } });
    expect(JSON.parse(r.body.body)).toEqual({ ok: true, path: '/paid' });
    expect(x402.requestsTo('/paid?mcp=pay').filter(carriesPayment)).toHaveLength(1);
  });

  test('behavior: pay_and_fetch truncates a long body to max_body_chars', async () => {
    const r = await call('pay_and_fetch', { url: x402.url('/free'), max_body_chars: 5 });
    expect(r.body).toMatchObject({ status: 200, body: '{"fre', truncated: true, payment: null });
  });

  test('behavior: pending approval → approval_status → approve → the same idempotency_key collects the payment', async () => {
    x402.setPrice('/approval', '$0.05');
    const first = await call('pay_and_fetch', { url: x402.url('/approval') });
    expect(first).toMatchObject({ isError: false, body: { outcome: 'pending_approval', approval_request_id: expect.any(String), idempotency_key: expect.any(String) } });
    expect(first.body.next_step).toContain(first.body.idempotency_key);
    expect((await call('approval_status', { approval_request_id: first.body.approval_request_id })).body).toMatchObject({ status: 'pending' });
    await admin.client.decideApproval({ id: first.body.approval_request_id, decision: Decision.APPROVE }, admin.auth);
    expect((await call('approval_status', { approval_request_id: first.body.approval_request_id })).body).toMatchObject({ status: 'approved' });
    const paid = await call('pay_and_fetch', { url: x402.url('/approval'), idempotency_key: first.body.idempotency_key });
    expect(paid.body).toMatchObject({ status: 200, payment: { amountUsd: '0.05', transactionId: first.body.transaction_id } });
  });

  test('behavior: sign_payment signs a direct payment; error: over the ceiling and policy denials are tool errors', async () => {
    const signed = await call('sign_payment', { type: 'eip3009', recipient_address: RECIPIENT, amount_usd: '0.01', chain_id: 84532 });
    expect(signed).toMatchObject({ isError: false, body: { outcome: 'signed', cost_usd: '0.01', signature: expect.stringMatching(/^0x[0-9a-f]{130}$/) } });
    const over = await call('sign_payment', { type: 'eip3009', recipient_address: RECIPIENT, amount_usd: '0.6', chain_id: 84532 });
    expect(over).toMatchObject({ isError: true, body: { code: 'max_amount_exceeded', details: { max_amount_usd: '0.5' } } });
    const lowered = await call('sign_payment', { type: 'eip3009', recipient_address: RECIPIENT, amount_usd: '0.2', chain_id: 84532, max_amount_usd: '0.1' });
    expect(lowered.body).toMatchObject({ code: 'max_amount_exceeded', details: { max_amount_usd: '0.1' } });
    const raised = await call('sign_payment', { type: 'eip3009', recipient_address: RECIPIENT, amount_usd: '0.6', chain_id: 84532, max_amount_usd: '5' });
    expect(raised.body).toMatchObject({ code: 'max_amount_exceeded', details: { max_amount_usd: '0.5' } });
    const denied = await call('sign_payment', { type: 'eip3009', recipient_address: '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC', amount_usd: '0.01', chain_id: 84532 });
    expect(denied).toMatchObject({ isError: true, body: { code: 'policy_denied', status: 403, reason: expect.stringContaining('not on the agent\'s allowlist'), transaction_id: expect.any(String) } });
    const rows = await listAllTransactions(admin, s.bootstrap.org_id, agentId);
    expect(rows.filter((t) => t.type === 'eip3009').map((t) => t.status).sort()).toEqual(['denied', 'signed']);
  });

  test('error: unknown approvals, bad arguments and unreachable URLs are tool errors; the server keeps serving', async () => {
    expect(await call('approval_status', { approval_request_id: '00000000-0000-4000-8000-000000000000' })).toMatchObject({ isError: true, body: { code: 'not_found', status: 404 } });
    const bad = await call('quote_url', { url: 'not a url' });
    expect(bad.isError).toBe(true);
    expect(String(bad.body)).toMatch(/validation/i);
    expect((await call('quote_url', { url: 'http://127.0.0.1:9/x' })).body).toMatchObject({ error: 'URL is not allowed (private/loopback hosts blocked)', status: 400 });
    expect((await call('sign_payment', { type: 'x402' })).body).toMatchObject({ code: 'invalid_argument', error: 'resource_url is required for x402 and mpp' });
    expect((await mcp.listTools()).tools).toHaveLength(6);
    expect(stderr).not.toContain(s.bootstrap.api_key);
  });

  test('behavior: a tool call the host cancels stops its work: the stalled paywall fetch is aborted; the server keeps serving', async () => {
    const controller = new AbortController();
    const pending = mcp.callTool({ name: 'pay_and_fetch', arguments: { url: `http://${stall.host}/slow` } }, undefined, { signal: controller.signal });
    await stall.arrived;
    controller.abort(new Error('host gave up'));
    await expect(pending).rejects.toThrow(/host gave up/);
    await stall.hungUp; // the MCP server's fetch let go of the paywall
    expect((await mcp.listTools()).tools).toHaveLength(6);
  });

  test('error: the bin refuses to start without its environment, naming what is missing', async () => {
    const { spawnSync } = await import('node:child_process');
    const r = spawnSync(process.execPath, [BIN, 'mcp'], { env: { PATH: process.env.PATH ?? '' }, encoding: 'utf8', input: '' });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('Missing environment: PAYPOLICY_URL, PAYPOLICY_API_KEY, PAYPOLICY_AGENT_ID');
    const usage = spawnSync(process.execPath, [BIN], { encoding: 'utf8' });
    expect([usage.status, usage.stderr]).toEqual([2, expect.stringContaining('usage: paypolicy-client mcp')]);
  });
});

describe('paypolicy-client mcp: pay_and_fetch reaches only public https URLs', () => {
  let strict: Client;
  beforeAll(async () => {
    ({ client: strict } = await startMcp({}));
  });
  afterAll(async () => {
    await strict?.close();
  });

  const refused = (r: { isError: boolean; body: any }) => {
    expect(r.isError, JSON.stringify(r.body)).toBe(true);
    expect(r.body).toMatchObject({ code: 'url_not_allowed', status: 0 });
    return r.body.error as string;
  };

  test('error: by default http is refused, even to an address that would be allowed otherwise', async () => {
    expect(refused(await call('pay_and_fetch', { url: x402.url('/paid?mcp=strict-http') }, strict))).toMatch(/loopback|only https/);
    expect(refused(await call('pay_and_fetch', { url: 'http://paywall.example/paid' }, strict))).toContain('only https URLs can be fetched');
    expect(x402.requestsTo('/paid?mcp=strict-http')).toEqual([]);
  });

  test.each([
    ['loopback', (p: Peer) => `https://${p.host}/secret?case=https`],
    ['loopback in decimal', (p: Peer) => `https://2130706433:${p.host.split(':')[1]}/secret`],
    ['IPv6 loopback', (p: Peer) => `https://[::1]:${p.host.split(':')[1]}/secret`],
    ['IPv4-mapped loopback', (p: Peer) => `https://[::ffff:127.0.0.1]:${p.host.split(':')[1]}/secret`],
    ['localhost', (p: Peer) => `https://localhost:${p.host.split(':')[1]}/secret`],
    ['cloud metadata (link-local)', () => 'https://169.254.169.254/latest/meta-data/'],
    ['private 10/8', () => 'https://10.0.0.1/admin'],
    ['private 192.168/16', () => 'https://192.168.1.1/'],
    ['*.internal', () => 'https://metadata.google.internal/computeMetadata/v1/'],
    ['*.local', () => 'https://printer.local/'],
  ])('error: %s is refused before any connection', async (_name, url) => {
    const before = inner.requests.length;
    expect(refused(await call('pay_and_fetch', { url: url(inner) }, strict))).toContain('loopback, private and local-only hosts are blocked');
    expect(inner.requests).toHaveLength(before);
  });

  test('error: a scheme other than http(s) is refused', async () => {
    expect(refused(await call('pay_and_fetch', { url: 'file:///etc/passwd' }, strict))).toContain('only https URLs');
  });

  test.skipIf(!OWN_NAME_IS_LOOPBACK)("error: a name that resolves to a loopback address is refused (this host's own name)", async () => {
    const before = inner.requests.length;
    const port = inner.host.split(':')[1];
    expect(refused(await call('pay_and_fetch', { url: `https://${hostname()}:${port}/secret` }, strict))).toContain('resolves to a loopback, private or local-only address');
    expect(inner.requests).toHaveLength(before);
  });

  test('error: with http allowed, a loopback host that is not exempt is still refused', async () => {
    expect(refused(await call('pay_and_fetch', { url: inner.url('/secret?case=http') }))).toContain('loopback, private and local-only hosts are blocked');
    expect(inner.requestsTo('/secret?case=http')).toEqual([]);
  });

  test('error: an exempt host that redirects to an internal one: the redirect is not followed', async () => {
    expect(refused(await call('pay_and_fetch', { url: hop.url('/go') }))).toContain(inner.origin);
    expect(hop.requestsTo('/go')).toHaveLength(1);
    expect(inner.requestsTo('/secret?via=hop')).toEqual([]);
  });
});

async function resolvesToLoopback(name: string): Promise<boolean> {
  try {
    return (await lookup(name, { all: true })).some((a) => a.address.startsWith('127.') || a.address === '::1');
  } catch {
    return false;
  }
}
