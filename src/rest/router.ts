import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import type { Logger } from 'pino';
import { authenticateApiKey } from '../auth/credentials.js';
import type { AppDeps } from '../app/deps.js';
import { pingAgent } from '../app/ping.js';
import { resolveServices } from '../app/registry.js';
import { DomainError } from '../domain/errors.js';
import type { Principal } from '../domain/types.js';
import { parseJsonObject, readBody } from './body.js';
import { errorResponse, type RestResponse } from './errors.js';
import { pingJson, resolveJson } from './mappers.js';

type NodeRequest = IncomingMessage | Http2ServerRequest;
type NodeResponse = ServerResponse | Http2ServerResponse;

/** What a route handler receives: the authenticated caller, the parsed URL and a body reader. */
export type RestCall = {
  principal: Principal;
  url: URL;
  params: Record<string, string>;
  body: () => Promise<Record<string, unknown>>;
  header: (name: string) => string | undefined;
  log: Logger;
};

type Route = { method: 'GET' | 'POST'; pattern: RegExp; keys: string[]; handle: (call: RestCall) => RestResponse | Promise<RestResponse> };

function route(method: Route['method'], path: string, handle: Route['handle']): Route {
  const keys: string[] = [];
  const pattern = new RegExp(`^${path.replace(/\{(\w+)\}/g, (_m, k: string) => (keys.push(k), '([^/]+)'))}$`);
  return { method, pattern, keys, handle };
}

/** The exact /api/* surface of the wire protocol, mapped onto the same use cases as the RPCs. */
export function createRestRoutes(deps: AppDeps): Route[] {
  return [
    route('POST', '/api/ping', async (call) => {
      const body = await call.body();
      // A non-string agent_id is as unusable as a missing one: same missing-agent-id answer.
      const agentId = typeof body.agent_id === 'string' ? body.agent_id : '';
      return { status: 200, body: pingJson(pingAgent(deps, call.principal, agentId)) };
    }),
    route('GET', '/api/resolve', (call) => {
      const slugs = [...call.url.searchParams.getAll('slug'), ...call.url.searchParams.getAll('slugs')];
      return { status: 200, body: resolveJson(resolveServices(deps, slugs)) };
    }),
    route('POST', '/api/sign', () => {
      throw new DomainError('unimplemented', 'Not implemented yet');
    }),
    route('POST', '/api/quote', () => {
      throw new DomainError('unimplemented', 'Not implemented yet');
    }),
    route('GET', '/api/approvals/{id}/status', () => {
      throw new DomainError('unimplemented', 'Not implemented yet');
    }),
  ];
}

/** A malformed %-escape is just an id that matches nothing, not a server error. */
function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

const JSON_HEADERS = { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' };

function send(res: NodeResponse, r: RestResponse): void {
  const payload = r.body === undefined ? '' : JSON.stringify(r.body);
  res.writeHead(r.status, { ...JSON_HEADERS, ...r.headers, 'content-length': Buffer.byteLength(payload) });
  res.end(payload);
}

/**
 * Handles one /api/* request: match, authenticate (before the body is read, so unauthenticated
 * callers cannot make us buffer anything), run, and write JSON. Never lets an error escape.
 */
export function createRestHandler(deps: AppDeps, routes: Route[]) {
  return async (req: NodeRequest, res: NodeResponse, log: Logger): Promise<void> => {
    let result: RestResponse;
    try {
      const url = new URL(req.url ?? '/', 'http://localhost');
      const matching = routes.filter((r) => r.pattern.test(url.pathname));
      const chosen = matching.find((r) => r.method === req.method);
      if (matching.length === 0) {
        result = { status: 404, body: { error: 'Not found', code: 'not_found' } };
      } else if (!chosen) {
        result = { status: 405, body: { error: 'Method not allowed', code: 'method_not_allowed' }, headers: { allow: matching.map((r) => r.method).join(', ') } };
      } else {
        const principal = authenticateApiKey(deps.store.apiKeys, req.headers.authorization);
        const m = chosen.pattern.exec(url.pathname)!;
        const params = Object.fromEntries(chosen.keys.map((k, i) => [k, safeDecode(m[i + 1]!)]));
        result = await chosen.handle({
          principal, url, params, log,
          body: async () => parseJsonObject(await readBody(req)),
          header: (name) => {
            const v = req.headers[name];
            return Array.isArray(v) ? v[0] : v;
          },
        });
      }
    } catch (err) {
      result = errorResponse(err, log);
    }
    if (!res.headersSent) send(res, result);
  };
}
