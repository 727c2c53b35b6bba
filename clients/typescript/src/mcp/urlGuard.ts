import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { PaypolicyError } from '../errors.js';
import { isBlockedAddress, isBlockedHostname } from './addressPolicy.js';

/*
 * What `pay_and_fetch` may fetch from the agent host. The URL comes from a model, and a model can
 * be talked into anything by the pages it reads, so without this guard a prompt injection could
 * make the host read its own internal services (cloud metadata, admin ports, the LAN) and hand the
 * answer back. Every hop is checked, redirects included: https only (http when allowed), no
 * credentials in the URL, no literal loopback/private/link-local address, no `localhost`,
 * `*.local` or `*.internal` name, and no name that resolves to such an address right now.
 *
 * Residual risk: the check resolves the name, then fetch resolves it again when it connects, so a
 * DNS server that answers a public address first and a private one a moment later (rebinding)
 * can still slip through; fetch offers no portable way to pin the address. Node-only (node:dns),
 * which is why it lives in the MCP server and not in createPayingFetch, which runs on edge
 * runtimes too.
 */

export type UrlGuardOptions = {
  /** Also allow http:// (development only). */
  allowHttp: boolean;
  /** `host:port` entries exempt from the address checks (a local paywall in development or tests). */
  allowHosts: ReadonlySet<string>;
  /** Resolver; defaults to the system's (node:dns lookup, every address). */
  resolve?: (hostname: string) => Promise<string[]>;
};

const systemResolve = async (hostname: string) => (await lookup(hostname, { all: true, verbatim: true })).map((a) => a.address);

function refuse(url: URL, why: string): never {
  throw new PaypolicyError(`Refused to fetch ${url.origin}: ${why}`, { code: 'url_not_allowed', status: 0, details: { url: url.origin } });
}

/** Throws `url_not_allowed` unless `raw` may be fetched under `options`. */
export async function checkFetchUrl(raw: string, options: UrlGuardOptions): Promise<void> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new PaypolicyError('Invalid URL', { code: 'url_not_allowed', status: 0 });
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') refuse(url, 'only https URLs can be fetched');
  if (url.username !== '' || url.password !== '') refuse(url, 'credentials in the URL');
  const port = url.port !== '' ? url.port : url.protocol === 'https:' ? '443' : '80';
  const exempt = options.allowHosts.has(`${url.hostname}:${port}`);
  if (!exempt && isBlockedHostname(url.hostname)) refuse(url, 'loopback, private and local-only hosts are blocked');
  if (url.protocol === 'http:' && !options.allowHttp) refuse(url, 'only https URLs can be fetched (PAYPOLICY_MCP_ALLOW_HTTP=1 allows http for development)');
  // A literal address was judged above; only names need resolving.
  if (exempt || url.hostname.startsWith('[') || isIP(url.hostname) !== 0) return;
  let addresses: string[];
  try {
    addresses = await (options.resolve ?? systemResolve)(url.hostname);
  } catch (cause) {
    throw new PaypolicyError(`Could not resolve ${url.hostname}`, { code: 'network_error', status: 0, retryable: true, cause, details: { url: url.origin } });
  }
  if (addresses.length === 0 || addresses.some(isBlockedAddress)) refuse(url, `${url.hostname} resolves to a loopback, private or local-only address`);
}

/** A fetch that checks every URL it is asked for (the paying fetch follows redirects by hand, so every hop). */
export function createGuardedFetch(base: typeof fetch, options: UrlGuardOptions): typeof fetch {
  return async (input, init) => {
    const raw = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    await checkFetchUrl(raw, options);
    return base(input, init);
  };
}
