import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Decision } from '../../gen/paypolicy/v1/admin_pb.js';
import { adminFor, createAgent, upsertService, type Admin } from '../helpers/admin.js';
import { listAllTransactions, setPolicy } from '../helpers/payments.js';
import { PAY_TO, carriesPayment, startX402Peer, type X402Peer } from '../helpers/peers.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * The MCP server of @paypolicy/client, started as an agent host would (`paypolicy-client mcp`,
 * stdio, settings from the environment) and driven by the MCP SDK's own client: tool list and
 * schemas, every tool against the real server and the @x402/hono paywall, errors as tool errors.
 */

const BIN = fileURLToPath(new URL('../../clients/typescript/dist/bin.js', import.meta.url));
const RECIPIENT = '0x2222222222222222222222222222222222222222';

let s: TestServer;
let x402: X402Peer;
let admin: Admin;
let agentId: string;
let mcp: Client;
let transport: StdioClientTransport;
let stderr = '';

beforeAll(async () => {
  x402 = await startX402Peer();
  s = await startTestServer({ dev: true, logLevel: 'warn', probeAllowHosts: [x402.host] });
  admin = adminFor(s);
  agentId = await createAgent(admin, s.bootstrap.org_id, 'mcp-agent');
  await setPolicy(admin, agentId, { allowlist: [PAY_TO, RECIPIENT], capUsd: '10', thresholdUsd: '0.02' });
  await upsertService(admin, { slug: 'mcp-weather', name: 'Weather', paymentMethods: [{ realm: '', baseUrl: x402.url('/svc'), protocol: 'x402' }] });
  transport = new StdioClientTransport({
    command: process.execPath,
    args: [BIN, 'mcp'],
    env: { PATH: process.env.PATH ?? '', PAYPOLICY_URL: s.url, PAYPOLICY_API_KEY: s.bootstrap.api_key, PAYPOLICY_AGENT_ID: agentId, PAYPOLICY_MAX_AMOUNT_USD: '0.5' },
    stderr: 'pipe',
  });
  transport.stderr?.on('data', (chunk: Buffer) => void (stderr += chunk.toString()));
  mcp = new Client({ name: 'paypolicy-test-host', version: '1.0.0' });
  await mcp.connect(transport);
});

afterAll(async () => {
  await mcp?.close();
  await s?.close();
  await x402?.close();
});

/** Calls a tool and parses its JSON text. */
async function call(name: string, args: Record<string, unknown> = {}): Promise<{ isError: boolean; body: any }> {
  const r = (await mcp.callTool({ name, arguments: args })) as CallToolResult;
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

  test('error: the bin refuses to start without its environment, naming what is missing', async () => {
    const { spawnSync } = await import('node:child_process');
    const r = spawnSync(process.execPath, [BIN, 'mcp'], { env: { PATH: process.env.PATH ?? '' }, encoding: 'utf8', input: '' });
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('Missing environment: PAYPOLICY_URL, PAYPOLICY_API_KEY, PAYPOLICY_AGENT_ID');
    const usage = spawnSync(process.execPath, [BIN], { encoding: 'utf8' });
    expect([usage.status, usage.stderr]).toEqual([2, expect.stringContaining('usage: paypolicy-client mcp')]);
  });
});
