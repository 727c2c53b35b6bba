import type { Logger } from 'pino';
import { authenticateApiKey } from '../app/apiKeys.js';
import type { AppDeps } from '../app/deps.js';
import { pingAgent } from '../app/ping.js';
import { resolveServices } from '../app/registry.js';
import { DomainError } from '../domain/errors.js';
import type { ApiKeyPrincipal } from '../domain/types.js';
import { bodyAbandoned, requestHeader, sendJson, send, type NodeRequest, type NodeResponse } from '../http/io.js';
import { createRouter, decodePathParam, type RouteSpec } from '../http/router.js';
import { parseJsonObject, readRestBody } from './body.js';
import { errorResponse, STORAGE_FAILED, type RestResponse } from './errors.js';
import type { Gate } from '../admission.js';
import { agentSpendJson, approvalStatusJson, pingJson, quoteJson, resolveJson, signJson } from './mappers.js';
import { getAgentSpend } from '../app/agentSpend.js';
import { quotePayment } from '../app/quote.js';
import { signPayment } from '../app/sign.js';
import { getApprovalStatus } from '../app/approvals.js';
import { jsonNumberToDecimal } from '../domain/money.js';
import { errorCodeOf, signOutcomeOf, type Metrics } from '../observability/metrics.js';

/** What a route handler receives: the authenticated caller, the parsed URL and a body reader. */
export type RestCall = {
  principal: ApiKeyPrincipal;
  url: URL;
  params: Record<string, string>;
  body: () => Promise<Record<string, unknown>>;
  header: (name: string) => string | undefined;
  log: Logger;
};

type Route = RouteSpec & { handle: (call: RestCall) => RestResponse | Promise<RestResponse> };

function route(method: Route['method'], path: string, handle: Route['handle']): Route {
  return { method, path, handle };
}

/** The exact /api/* surface of the wire protocol, mapped onto the same use cases as the RPCs. */
export function createRestRoutes(deps: AppDeps, metrics?: Metrics): Route[] {
  return [
    route('POST', '/api/ping', async (call) => {
      const body = await call.body();
      // A non-string agent_id is as unusable as a missing one: same missing-agent-id answer.
      const agentId = typeof body.agent_id === 'string' ? body.agent_id : '';
      return { status: 200, body: pingJson(pingAgent(deps, call.principal, agentId)) };
    }),
    route('GET', '/api/resolve', (call) => {
      const slugs = [...call.url.searchParams.getAll('slug'), ...call.url.searchParams.getAll('slugs')];
      return { status: 200, body: resolveJson(resolveServices(deps, call.principal, slugs)) };
    }),
    route('POST', '/api/sign', async (call) => {
      const body = await call.body();
      const amount = body.amount_usd;
      const result = await observed(() => signPayment(deps, call.principal, {
        agentId: body.agent_id,
        type: body.type,
        chainId: body.chain_id,
        recipientAddress: body.recipient_address,
        // JSON numbers become their shortest decimal text, so no float reaches the arithmetic.
        amountUsd: typeof amount === 'number' && Number.isFinite(amount) ? jsonNumberToDecimal(amount) : amount,
        payload: body.payload,
        dryRun: body.dry_run,
        idempotencyKey: call.header('idempotency-key'),
      }), (r) => metrics?.observeSign(body.type, ...signOutcomeOf(r), r.agentId), (err) => metrics?.observeSign(body.type, 'error', errorCodeOf(err)));
      return signJson(result);
    }),
    route('POST', '/api/quote', async (call) => {
      const body = await call.body();
      const result = await observed(
        () => quotePayment(deps, call.principal, { url: body.url, agentId: body.agent_id, method: body.method }),
        (r) => metrics?.observeProbe(r.offer.rail), (err) => metrics?.observeProbe(errorCodeOf(err)),
      );
      return quoteJson(result);
    }),
    // Extension beyond the wire protocol: the agent's own remaining budget (README "API").
    route('GET', '/api/agents/{id}/spend', (call) => ({ status: 200, body: agentSpendJson(getAgentSpend(deps, call.principal, call.params.id!)) })),
    route('GET', '/api/approvals/{id}/status', (call) => {
      try {
        return { status: 200, body: approvalStatusJson(getApprovalStatus(deps, call.principal, call.params.id!)) };
      } catch (err) {
        // The wire protocol wants this 404 empty of detail, so nothing leaks across organizations.
        if (err instanceof DomainError && err.kind === 'not_found') return { status: 404, body: undefined };
        throw err;
      }
    }),
  ];
}

/** Runs `work`, reporting its result or its error (which it rethrows) to the metrics. */
async function observed<T>(work: () => Promise<T>, ok: (r: T) => void, failed: (err: unknown) => void): Promise<T> {
  try {
    const r = await work();
    ok(r);
    return r;
  } catch (err) {
    failed(err);
    throw err;
  }
}

/** Writes a REST answer: JSON, or headers alone when the wire protocol wants an empty body. */
function sendRest(res: NodeResponse, r: RestResponse): void {
  if (r.body === undefined) send(res, r.status, { 'cache-control': 'no-store', ...r.headers });
  else sendJson(res, r.status, r.body, r.headers);
}

/**
 * Handles one /api/* request: match, authenticate (before the body is read, so unauthenticated
 * callers cannot make us buffer anything), read the body, enter the admission gate, run, and
 * write JSON. Never lets an error escape.
 */
export function createRestHandler(deps: AppDeps, routes: Route[], admission?: Gate) {
  const router = createRouter(routes);
  return async (req: NodeRequest, res: NodeResponse, log: Logger): Promise<void> => {
    let result: RestResponse;
    let release: (() => void) | undefined;
    try {
      const url = new URL(req.url ?? '/', 'http://localhost');
      const match = router.match(req.method, url.pathname);
      if (match.kind === 'not_found') {
        result = { status: 404, body: { error: 'Not found', code: 'not_found' } };
      } else if (match.kind === 'method_not_allowed') {
        result = { status: 405, body: { error: 'Method not allowed', code: 'method_not_allowed' }, headers: { allow: match.allow.join(', ') } };
      } else {
        const chosen = match.route;
        const principal = authenticateApiKey(deps, req.headers.authorization);
        // A malformed %-escape is just an id that matches nothing, not a server error.
        const params = Object.fromEntries(Object.entries(match.params).map(([k, v]) => [k, decodePathParam(v) ?? v]));
        const raw = chosen.method === 'POST' ? await readRestBody(req) : Buffer.alloc(0);
        // In flight from here (authenticated, request read in full) until the answer is computed,
        // even if the client has gone; beyond the bound: 503 overloaded at once, nothing done.
        release = admission?.enter();
        result = await chosen.handle({
          principal, url, params, log,
          body: async () => parseJsonObject(raw),
          header: (name) => requestHeader(req, name),
        });
      }
    } catch (err) {
      result = errorResponse(err, log);
    } finally {
      release?.();
    }
    // Computed while a sync failed: it may rest on rows that are not on disk (fail-stop).
    if (deps.store.failure()) result = { status: 503, body: STORAGE_FAILED };
    if (bodyAbandoned(req) && req.httpVersion.startsWith('1')) result = { ...result, headers: { ...result.headers, connection: 'close' } };
    if (!res.headersSent) sendRest(res, result);
  };
}
