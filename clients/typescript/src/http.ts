import { PaypolicyError } from './errors.js';

/** How the client retries calls that are safe to repeat. `false` turns retries off. */
export type RetryOptions = {
  /** Retries after the first attempt (default 3). */
  retries?: number;
  /** First backoff in milliseconds, doubled each time, with full jitter (default 250). */
  baseDelayMs?: number;
  /** Longest single wait, including a server's Retry-After (default 5000). */
  maxDelayMs?: number;
};

/** One HTTP answer, body read in full. */
export type HttpAnswer = { status: number; headers: Headers; text: string; json: unknown };

export type HttpRequest = {
  method: 'GET' | 'POST';
  url: string;
  headers: Record<string, string>;
  body?: string;
  signal?: AbortSignal | undefined;
};

/** Resolves after `ms`, or rejects with the signal's reason as soon as it aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Seconds or an HTTP date, as milliseconds from now; undefined when absent or unreadable. */
function retryAfterMs(value: string | null, now: number): number | undefined {
  if (value === null) return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

function parseJson(text: string): unknown {
  if (text === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * Sends one request, retrying only where repeating cannot do harm: when fetch itself fails
 * before any answer (every call this client makes is a read or carries an Idempotency-Key), and
 * on 503 `overloaded`, which the server sends before doing anything (waiting its Retry-After).
 * Never retries any other status: a 403 or 409 is an answer. An abort ends it at once with the
 * signal's reason.
 */
export async function sendWithRetry(fetchImpl: typeof fetch, req: HttpRequest, retry: RetryOptions | false): Promise<HttpAnswer> {
  const retries = retry === false ? 0 : retry.retries ?? 3;
  const base = retry === false ? 0 : retry.baseDelayMs ?? 250;
  const max = retry === false ? 0 : retry.maxDelayMs ?? 5000;
  const backoff = (attempt: number) => Math.random() * Math.min(max, base * 2 ** attempt);
  for (let attempt = 0; ; attempt++) {
    if (req.signal?.aborted) throw req.signal.reason;
    let res: Response;
    try {
      res = await fetchImpl(req.url, { method: req.method, headers: req.headers, body: req.body, signal: req.signal, redirect: 'error' });
    } catch (err) {
      if (req.signal?.aborted) throw req.signal.reason;
      if (attempt < retries) {
        await sleep(backoff(attempt), req.signal);
        continue;
      }
      throw new PaypolicyError(`Could not reach paypolicy (${req.method} ${new URL(req.url).pathname})`, {
        code: 'network_error', status: 0, retryable: true, cause: err,
      });
    }
    const text = await res.text();
    const json = parseJson(text);
    const code = (json as { code?: unknown } | undefined)?.code;
    if (res.status === 503 && code === 'overloaded' && attempt < retries) {
      const told = retryAfterMs(res.headers.get('retry-after'), Date.now());
      await sleep(Math.min(max, told ?? backoff(attempt)), req.signal);
      continue;
    }
    return { status: res.status, headers: res.headers, text, json };
  }
}

/** The typed error for a non-success answer: the server's `{error, code}` when it sent one. */
export function errorFromAnswer(a: HttpAnswer, what: string): PaypolicyError {
  const body = (typeof a.json === 'object' && a.json !== null ? a.json : {}) as Record<string, unknown>;
  const text = typeof body.error === 'string' ? body.error : undefined;
  const code = typeof body.code === 'string' ? body.code : undefined;
  if (a.status === 404 && a.text === '') return new PaypolicyError(`${what}: not found`, { code: 'not_found', status: 404 });
  if (text === undefined || code === undefined) {
    return new PaypolicyError(`${what}: unexpected HTTP ${a.status} from paypolicy`, { code: 'unexpected_response', status: a.status, retryable: a.status >= 500 });
  }
  // Worth repeating later: overload, a stranded row being released, storage recovering. Never a
  // policy answer, a conflict of keys or bad input.
  const retryable = code === 'overloaded' || code === 'in_progress' || code === 'storage_failed';
  return new PaypolicyError(text, { code, status: a.status, retryable });
}
