/**
 * The one router of the HTTP transports (REST /api/*, the dashboard): routes are a method and a
 * path template such as `/api/approvals/{id}/status`, tried in order. A path that some route
 * matches under another method is a 405 with the methods it does answer; no match at all is a 404.
 * What a 404 or 405 looks like is the transport's business, so `match` only says which it is.
 */

/** The methods a route is declared with; every GET route also answers HEAD (the same headers, no body). */
export type Method = 'GET' | 'POST';

/** What every route carries; transports add their handler and whatever else they need. */
export type RouteSpec = { method: Method; path: string };

export type RouteMatch<R> =
  /** `params` are the path segments under each `{name}`, still percent-encoded. */
  | { kind: 'found'; route: R; params: Record<string, string> }
  | { kind: 'not_found' }
  /** `allow` lists the matching routes' methods, each once, in route order (HEAD right after GET). */
  | { kind: 'method_not_allowed'; allow: Array<Method | 'HEAD'> };

export type Router<R> = { match: (method: string | undefined, pathname: string) => RouteMatch<R> };

type Compiled<R> = { route: R; pattern: RegExp; keys: string[] };

/** A template's literal text matches itself only; each `{name}` matches one non-empty segment. */
function compile<R extends RouteSpec>(route: R): Compiled<R> {
  const keys: string[] = [];
  const source = route.path
    .split(/(\{\w+\})/)
    .map((part) => {
      const key = /^\{(\w+)\}$/.exec(part)?.[1];
      if (key === undefined) return part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      keys.push(key);
      return '([^/]+)';
    })
    .join('');
  return { route, pattern: new RegExp(`^${source}$`), keys };
}

/**
 * Builds the router over `routes`; the first route whose path and method both match wins. HEAD
 * matches a GET route (HTTP says a server answering GET answers HEAD too; Node drops the body).
 */
export function createRouter<R extends RouteSpec>(routes: readonly R[]): Router<R> {
  const compiled = routes.map(compile);
  return {
    match(method, pathname) {
      const allow: Array<Method | 'HEAD'> = [];
      const wanted = method === 'HEAD' ? 'GET' : method;
      for (const { route, pattern, keys } of compiled) {
        const m = pattern.exec(pathname);
        if (!m) continue;
        if (route.method === wanted) return { kind: 'found', route, params: Object.fromEntries(keys.map((k, i) => [k, m[i + 1]!])) };
        if (!allow.includes(route.method)) allow.push(...(route.method === 'GET' ? (['GET', 'HEAD'] as const) : [route.method]));
      }
      return allow.length === 0 ? { kind: 'not_found' } : { kind: 'method_not_allowed', allow };
    },
  };
}

/** A path parameter decoded; undefined for a malformed %-escape (each transport decides what that means). */
export function decodePathParam(raw: string): string | undefined {
  try {
    return decodeURIComponent(raw);
  } catch {
    return undefined;
  }
}
