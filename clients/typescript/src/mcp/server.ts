import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { createClient, type PaypolicyClient, type SignedResult } from '../client.js';
import { isPaypolicyError, PaypolicyError } from '../errors.js';
import { formatMicros, usdToMicros } from '../money.js';
import { readTextPrefix } from '../body.js';
import { createPayingFetch } from '../payingFetch.js';
import { strictStdioServerTransport } from './strictStdio.js';
import { createGuardedFetch } from './urlGuard.js';
import type { SignRequest, SignResult } from '../types.js';

/*
 * The paypolicy MCP server: six tools through which a model pays under its agent's policy.
 * Every failure is a tool error (`isError: true`) whose text is JSON `{error, code, status,
 * retryable, reason?, transaction_id?, …}`; nothing a tool does can crash the server. A call the
 * host cancels (notifications/cancelled) aborts its requests, paywall fetches and approval waits.
 */

export type McpServerOptions = {
  client: PaypolicyClient;
  /** The agent every tool acts for. */
  agentId: string;
  /** Ceiling on one payment made through the tools, USD (default 1). A tool argument can lower it, never raise it. */
  maxAmountUsd?: number | string;
  /** fetch for paywalls (default: the global one); every URL it is given is checked first (urlGuard.ts). */
  fetch?: typeof fetch;
  /**
   * What pay_and_fetch may reach. Default: https only, no loopback, private, link-local or
   * local-only host (literal or resolved). `allowHttp` allows http; `allowHosts` exempts exact
   * `host:port` entries from the address checks. Both are for development.
   */
  urls?: { allowHttp?: boolean; allowHosts?: readonly string[] };
};

/** Longest approval wait a tool call may ask for: MCP clients commonly time a request out at 60 s. */
const MAX_WAIT_SECONDS = 50;
const DEFAULT_BODY_CHARS = 20_000;
const MAX_BODY_CHARS = 200_000;
const TEXTUAL = /^(text\/|application\/(json|[\w.+-]*\+json|xml|[\w.+-]*\+xml|javascript|x-www-form-urlencoded|x-ndjson)\b)/i;

function ok(value: unknown): CallToolResult {
  return { content: [{ type: 'text', text: JSON.stringify(value, null, 2) }] };
}

function toolError(err: unknown): CallToolResult {
  const body = isPaypolicyError(err)
    ? err.toJSON()
    : { error: err instanceof Error ? err.message : String(err), code: err instanceof TypeError ? 'invalid_argument' : 'internal', status: 0, retryable: false };
  return { content: [{ type: 'text', text: JSON.stringify(body, null, 2) }], isError: true };
}

/** Runs a tool body; every throw becomes a tool error. */
async function guarded(run: () => Promise<CallToolResult>): Promise<CallToolResult> {
  try {
    return await run();
  } catch (err) {
    return toolError(err);
  }
}

/** The body as text, cut to `maxChars` (read no further); non-text bodies are not read. */
async function readTruncated(res: Response, maxChars: number): Promise<{ text: string | null; truncated: boolean; contentType: string }> {
  const contentType = res.headers.get('content-type') ?? '';
  if (contentType !== '' && !TEXTUAL.test(contentType)) {
    await res.body?.cancel();
    return { text: null, truncated: true, contentType };
  }
  return { ...(await readTextPrefix(res, maxChars)), contentType };
}

function signedView(r: SignedResult) {
  const { outcome, idempotencyKey, ...rest } = r;
  return { outcome, idempotency_key: idempotencyKey, ...rest };
}

function pendingView(r: Extract<SignResult, { outcome: 'pending_approval' }>, retryHint: string) {
  return {
    outcome: 'pending_approval',
    reason: r.reason,
    approval_request_id: r.approval_request_id,
    transaction_id: r.transaction_id,
    idempotency_key: r.idempotencyKey,
    next_step: `A human must approve this payment. Check approval_status with approval_request_id; once it is approved, ${retryHint} with idempotency_key "${r.idempotencyKey}" to collect it (a new key would make a second payment request).`,
  };
}

/** Builds the MCP server with its six tools; connect it to a transport (see runStdioMcpServer). */
export function createPaypolicyMcpServer(options: McpServerOptions): McpServer {
  const { client, agentId } = options;
  const ceiling = usdToMicros(options.maxAmountUsd ?? '1', 'maxAmountUsd');
  const server = new McpServer({ name: 'paypolicy', version: '0.1.0' });
  // The model chooses pay_and_fetch's URL; the agent host must not become its way into internal services.
  const guardedFetch = createGuardedFetch(options.fetch ?? globalThis.fetch.bind(globalThis), {
    allowHttp: options.urls?.allowHttp ?? false, allowHosts: new Set(options.urls?.allowHosts ?? []),
  });

  /** The per-call limit: the tool argument if given, never above the configured ceiling. */
  function limitFor(arg: number | string | undefined): bigint {
    if (arg === undefined) return ceiling;
    const asked = usdToMicros(arg, 'max_amount_usd');
    return asked < ceiling ? asked : ceiling;
  }

  const waitSeconds = z.number().int().min(0).max(MAX_WAIT_SECONDS).optional()
    .describe(`Seconds to wait for a human approval before returning (0-${MAX_WAIT_SECONDS}, default 0: return at once with the approval id).`);
  const idempotencyKey = z.string().min(1).max(255).optional()
    .describe('Reuse the idempotency_key of an earlier call to collect or repeat that same payment without paying twice. Omit for a new payment.');
  const maxAmount = z.union([z.number().positive(), z.string().regex(/^\d+(\.\d{1,6})?$/)]).optional()
    .describe(`Most this call may pay, in USD. Default and upper bound: the server's configured ceiling ($${formatMicros(ceiling)}).`);

  server.registerTool('quote_url', {
    title: 'Quote a paywalled URL',
    description:
      'Ask what a paywalled (HTTP 402, x402 or MPP) URL costs and whether this agent\'s payment policy would allow it, without paying or signing anything. '
      + 'Returns status ("allowed", "pending_approval": a human would have to approve, "denied": the policy refuses, with reason), amount_usd, rail, recipient, and within_limit (whether it fits the per-call ceiling). '
      + 'Use before pay_and_fetch when the price matters.',
    inputSchema: z.object({
      url: z.string().url().describe('The full https URL of the paid resource.'),
      method: z.enum(['GET', 'POST']).optional().describe('HTTP method the resource is requested with (default GET).'),
    }).strict(),
    annotations: { readOnlyHint: true, openWorldHint: true },
  }, ({ url, method }, { signal }) => guarded(async () => {
    const q = await client.quote({ url, agent_id: agentId, ...(method ? { method } : {}) }, { signal });
    return ok({ ...q, max_amount_usd: formatMicros(ceiling), within_limit: usdToMicros(q.amount_usd, 'amount_usd') <= ceiling });
  }));

  server.registerTool('pay_and_fetch', {
    title: 'Fetch a URL, paying its paywall under policy',
    description:
      'Fetch an https URL on the public internet (loopback, private and local-only hosts are refused, redirects included); if it answers HTTP 402 (x402 or MPP paywall), pay it through paypolicy under this agent\'s policy and return the paid response. '
      + 'Pays at most max_amount_usd (checked before anything is signed). A payment over the approval threshold needs a human: the result is then '
      + 'outcome "pending_approval" with approval_request_id and idempotency_key; call approval_status, and once approved call pay_and_fetch again with the same url and idempotency_key. '
      + 'Returns the HTTP status, content_type, the body as text (cut to max_body_chars; truncated says so; non-text bodies are omitted), and payment (amount, transaction_id, receipt) or null when nothing was paid. '
      + 'A policy denial is an error with the reason: do not retry it with a new key.',
    inputSchema: z.object({
      url: z.string().url().describe('The full https URL to fetch.'),
      method: z.enum(['GET', 'POST']).optional().describe('HTTP method (default GET).'),
      headers: z.record(z.string(), z.string()).optional().describe('Extra request headers, e.g. {"accept": "application/json"}.'),
      body: z.string().max(65_536).optional().describe('Request body for POST, as text.'),
      max_amount_usd: maxAmount,
      idempotency_key: idempotencyKey,
      wait_seconds: waitSeconds,
      max_body_chars: z.number().int().min(1).max(MAX_BODY_CHARS).optional().describe(`Longest body text returned (default ${DEFAULT_BODY_CHARS}).`),
    }).strict(),
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
  }, (args, { signal }) => guarded(async () => {
    const wait = args.wait_seconds ?? 0;
    let pending: Extract<SignResult, { outcome: 'pending_approval' }> | undefined;
    const pay = createPayingFetch({
      client, agentId, maxAmountUsd: formatMicros(limitFor(args.max_amount_usd)), fetch: guardedFetch,
      waitForApproval: wait === 0 ? false : { timeoutMs: wait * 1000, initialIntervalMs: 1000, maxIntervalMs: 5000 },
      onPending: (p) => void (pending = p),
    });
    let res;
    try {
      res = await pay(args.url, {
        method: args.method ?? 'GET', headers: args.headers, body: args.method === 'POST' ? args.body : undefined, signal,
        ...(args.idempotency_key ? { idempotencyKey: args.idempotency_key } : {}),
      });
    } catch (err) {
      if (pending && isPaypolicyError(err) && (err.code === 'approval_required' || err.code === 'approval_timeout')) {
        return ok(pendingView(pending, 'call pay_and_fetch again'));
      }
      throw err;
    }
    const body = await readTruncated(res, args.max_body_chars ?? DEFAULT_BODY_CHARS);
    return ok({
      status: res.status,
      content_type: body.contentType,
      body: body.text ?? `(non-text body of type ${body.contentType} omitted)`,
      truncated: body.truncated,
      payment: res.payment,
    });
  }));

  server.registerTool('sign_payment', {
    title: 'Sign a payment under policy',
    description:
      'Ask paypolicy to sign one payment for this agent. Direct types (eip3009, permit2, raw_transaction) pay recipient_address amount_usd on chain_id and return the signed material; '
      + 'x402 and mpp sign for a paywalled resource_url (recipient and amount come from its live challenge) and return payment_header, the header to send to that URL. '
      + 'Amounts above the per-call ceiling are refused before signing. Outcome "signed", or "pending_approval" (a human must approve; call approval_status, then sign_payment again with the same arguments and idempotency_key). '
      + 'A policy denial is an error with the reason.',
    inputSchema: z.object({
      type: z.enum(['eip3009', 'permit2', 'raw_transaction', 'x402', 'mpp']).describe('What to sign.'),
      recipient_address: z.string().regex(/^0x[0-9a-fA-F]{40}$/).optional().describe('0x recipient (direct types only).'),
      amount_usd: z.string().regex(/^\d+(\.\d{1,6})?$/).optional().describe('USD amount as a decimal string, e.g. "0.25" (direct types only).'),
      chain_id: z.number().int().positive().optional().describe('Chain id for direct types (default 8453, Base).'),
      resource_url: z.string().url().optional().describe('The paywalled URL (x402 and mpp only).'),
      method: z.enum(['GET', 'POST']).optional().describe('Method of the paywalled request (x402 and mpp only, default GET).'),
      max_amount_usd: maxAmount,
      idempotency_key: idempotencyKey,
      wait_seconds: waitSeconds,
    }).strict(),
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
  }, (args, { signal }) => guarded(async () => {
    const limit = limitFor(args.max_amount_usd);
    const paywall = args.type === 'x402' || args.type === 'mpp';
    let request: SignRequest;
    if (paywall) {
      if (!args.resource_url) throw new PaypolicyError('resource_url is required for x402 and mpp', { code: 'invalid_argument', status: 0 });
      const q = await client.quote({ url: args.resource_url, agent_id: agentId, method: args.method ?? 'GET' }, { signal });
      if (q.rail !== args.type) throw new PaypolicyError(`The URL asks for ${q.rail}, not ${args.type}`, { code: 'invalid_argument', status: 0 });
      checkLimit(usdToMicros(q.amount_usd, 'amount_usd'), limit);
      request = { agent_id: agentId, type: args.type, payload: { resource_url: args.resource_url, method: args.method ?? 'GET', max_amount_usd: formatMicros(limit) } };
    } else {
      if (!args.recipient_address || !args.amount_usd) throw new PaypolicyError('recipient_address and amount_usd are required for direct types', { code: 'invalid_argument', status: 0 });
      checkLimit(usdToMicros(args.amount_usd, 'amount_usd'), limit);
      request = { agent_id: agentId, type: args.type, recipient_address: args.recipient_address, amount_usd: args.amount_usd, ...(args.chain_id ? { chain_id: args.chain_id } : {}) };
    }
    const first = await client.sign(request, { signal, ...(args.idempotency_key ? { idempotencyKey: args.idempotency_key } : {}) });
    if (first.outcome === 'signed') return ok(signedView(first));
    const wait = args.wait_seconds ?? 0;
    if (wait === 0) return ok(pendingView(first, 'call sign_payment again with the same arguments'));
    try {
      return ok(signedView(await client.waitForApproval(first, { timeoutMs: wait * 1000, maxIntervalMs: 5000, signal })));
    } catch (err) {
      if (isPaypolicyError(err) && err.code === 'approval_timeout') return ok(pendingView(first, 'call sign_payment again with the same arguments'));
      throw err;
    }
  }));

  server.registerTool('approval_status', {
    title: 'Check a pending approval',
    description:
      'Status of a payment waiting for a human: "pending", "approved" (collect it by repeating the original call with its idempotency_key), "denied" or "expired". '
      + 'Also decided_at, expires_at and transaction_id.',
    inputSchema: z.object({ approval_request_id: z.string().uuid().describe('The approval_request_id from a pending_approval result.') }).strict(),
    annotations: { readOnlyHint: true, openWorldHint: false },
  }, ({ approval_request_id }, { signal }) => guarded(async () => ok(await client.approvalStatus(approval_request_id, { signal }))));

  server.registerTool('resolve_services', {
    title: 'Look up registered paid services',
    description:
      'Look up paid services in the paypolicy registry by slug (e.g. "weather"): name, description, base URLs per payment rail, endpoints and prices. '
      + 'Unknown slugs map to null. An allowlisted slug lets this agent pay URLs under that service\'s registered base URLs.',
    inputSchema: z.object({ slugs: z.array(z.string().min(1).max(200)).min(1).max(100).describe('Service slugs to look up.') }).strict(),
    annotations: { readOnlyHint: true, openWorldHint: false },
  }, ({ slugs }, { signal }) => guarded(async () => ok(await client.resolve(slugs, { signal }))));

  server.registerTool('spend_status', {
    title: 'Remaining budget',
    description:
      'What this agent may still spend: spend_cap_usd per rolling window_hours, committed_usd already used (signed and pending payments), remaining_usd, '
      + 'approval_threshold_usd (payments above it need a human), and limits: every window limit of the agent and its organization with spent_usd, '
      + 'remaining_usd, count and max_count. Also the per-call ceiling of these tools. A snapshot: the policy decides again at signing.',
    inputSchema: z.object({}).strict(),
    annotations: { readOnlyHint: true, openWorldHint: false },
  }, (_args, { signal }) => guarded(async () => ok({ ...(await client.spendStatus(agentId, { signal })), max_amount_per_call_usd: formatMicros(ceiling) })));

  return server;
}

function checkLimit(amount: bigint, limit: bigint): void {
  if (amount > limit) {
    throw new PaypolicyError(`The payment is $${formatMicros(amount)}, more than the limit of $${formatMicros(limit)}; nothing was signed`, {
      code: 'max_amount_exceeded', status: 0, details: { amount_usd: formatMicros(amount), max_amount_usd: formatMicros(limit) },
    });
  }
}

/** Environment variables the stdio server reads. */
export const MCP_ENV = {
  url: 'PAYPOLICY_URL',
  apiKey: 'PAYPOLICY_API_KEY',
  agentId: 'PAYPOLICY_AGENT_ID',
  maxAmountUsd: 'PAYPOLICY_MAX_AMOUNT_USD',
  allowHttp: 'PAYPOLICY_MCP_ALLOW_HTTP',
  allowHosts: 'PAYPOLICY_MCP_ALLOW_HOSTS',
} as const;

/**
 * Starts the MCP server on stdin/stdout with settings from the environment: PAYPOLICY_URL,
 * PAYPOLICY_API_KEY, PAYPOLICY_AGENT_ID, PAYPOLICY_MAX_AMOUNT_USD (per-call ceiling, default 1),
 * and for development PAYPOLICY_MCP_ALLOW_HTTP=1 (pay_and_fetch may use http) and
 * PAYPOLICY_MCP_ALLOW_HOSTS (comma-separated `host:port` exempt from the private-address block).
 * Throws (before touching stdio) when one is missing.
 */
export async function runStdioMcpServer(env: Record<string, string | undefined> = process.env): Promise<McpServer> {
  const missing = [MCP_ENV.url, MCP_ENV.apiKey, MCP_ENV.agentId].filter((name) => !env[name]);
  if (missing.length > 0) throw new Error(`Missing environment: ${missing.join(', ')}`);
  const client = createClient({ baseUrl: env[MCP_ENV.url]!, apiKey: env[MCP_ENV.apiKey]! });
  const allowHosts = (env[MCP_ENV.allowHosts] ?? '').split(',').map((h) => h.trim().toLowerCase()).filter((h) => h !== '');
  const server = createPaypolicyMcpServer({
    client, agentId: env[MCP_ENV.agentId]!, maxAmountUsd: env[MCP_ENV.maxAmountUsd] || '1',
    urls: { allowHttp: env[MCP_ENV.allowHttp] === '1', allowHosts },
  });
  // Read through the ambiguity check: the SDK's JSON.parse keeps the last of two equal keys and rounds numbers.
  await server.connect(strictStdioServerTransport());
  return server;
}
