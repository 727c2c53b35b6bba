import { UsageError } from './errors.js';
import type { Flags } from './parseFlags.js';

type Env = Record<string, string | undefined>;

/** The server to talk to: `baseUrl` for requests, `displayUrl` (no credentials) for messages. */
export type ServerUrl = { baseUrl: string; displayUrl: string };

/** The port `serve` would listen on; checked only when it is actually used. */
function defaultPort(env: Env): string {
  const port = env.PAYPOLICY_PORT || '8080';
  if (!/^\d{1,5}$/.test(port) || Number(port) > 65535) throw new UsageError(`PAYPOLICY_PORT must be an integer from 0 to 65535, got "${port}"`);
  return port;
}

/** `--url`, else PAYPOLICY_URL, else the local default of `serve` on PAYPOLICY_PORT or 8080. */
export function resolveServerUrl(flags: Flags, env: Env): ServerUrl {
  const text = flags.get('--url') ?? (env.PAYPOLICY_URL || `http://127.0.0.1:${defaultPort(env)}`);
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    // Not echoed: an unparsable URL cannot be stripped of the credentials it may carry.
    throw new UsageError('the server URL (--url or PAYPOLICY_URL) must be an absolute http(s) URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new UsageError(`the server URL (--url or PAYPOLICY_URL) must use http or https, not ${url.protocol.replace(/:$/, '')}`);
  }
  const baseUrl = url.href.replace(/\/+$/, '');
  // Userinfo in the URL is a secret too; messages show the URL without it.
  url.username = '';
  url.password = '';
  return { baseUrl, displayUrl: url.href.replace(/\/+$/, '') };
}
