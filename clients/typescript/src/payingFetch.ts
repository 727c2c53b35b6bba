import { readTextPrefix } from './body.js';
import type { PaypolicyClient, PendingPayment, WaitOptions } from './client.js';
import { PaypolicyError } from './errors.js';
import { formatMicros, usdToMicros } from './money.js';

export type PayingFetchOptions = {
  client: PaypolicyClient;
  /** The agent whose policy pays. */
  agentId: string;
  /**
   * The most one call may pay, in USD (a decimal string keeps it exact; at most 6 decimals).
   * Checked against the quote before anything is signed, sent with the sign request as
   * `payload.max_amount_usd` so that paypolicy refuses a price that rose since the quote before
   * signing or holding anything (`policy_denied`, the reason naming both amounts), and checked
   * again against the signed cost before the payment is sent.
   */
  maxAmountUsd: number | string;
  /**
   * On a 202 (a human must approve): wait for the decision (default, with these WaitOptions), or
   * `false` to throw `approval_required` at once; repeating the call with the error's
   * `details.idempotency_key` as `idempotencyKey` collects it later.
   */
  waitForApproval?: boolean | Omit<WaitOptions, 'signal'>;
  /** Called once when the payment is queued for approval (before waiting). */
  onPending?: (pending: PendingPayment) => void | Promise<void>;
  /** fetch used for the paywall itself (default: the global one). */
  fetch?: typeof fetch;
  /** Redirects followed per request (default 5). */
  maxRedirects?: number;
};

/** What was paid for a response. */
export type PaymentInfo = {
  rail: 'x402' | 'mpp';
  /** paypolicy's transaction id: the ledger row of this payment. */
  transactionId: string;
  /** What was paid, USD decimal text. */
  amountUsd: string;
  /** True when paypolicy replayed an earlier signature for the same Idempotency-Key (not charged again). */
  idempotent: boolean;
  /** The Idempotency-Key the payment was signed under. */
  idempotencyKey: string;
  /** The URL that issued the challenge and received the payment. */
  resourceUrl: string;
  /** The paywall's receipt header (`PAYMENT-RESPONSE`, `X-PAYMENT-RESPONSE` or `Payment-Receipt`), decoded when it is base64 JSON. */
  receipt: { header: string; value: string; decoded: unknown } | null;
};

/** A fetch Response, plus what was paid for it (null when no payment was needed). */
export type PaidResponse = Response & { payment: PaymentInfo | null };

/** `fetch`-like: `init.idempotencyKey` pins the payment's key (default: a fresh one per call). */
export type PayingFetch = (input: string | URL, init?: RequestInit & { idempotencyKey?: string }) => Promise<PaidResponse>;

const RECEIPT_HEADERS = ['payment-response', 'x-payment-response', 'payment-receipt'];
/**
 * The headers a payment credential is sent in: x402's `PAYMENT-SIGNATURE` and `X-PAYMENT`, MPP's
 * `Authorization` and `Payment-Authorization`. Any other name (`Cookie`, say) would overwrite one
 * of the agent's own headers.
 */
const PAYMENT_HEADERS = new Set(['payment-signature', 'x-payment', 'authorization', 'payment-authorization']);
/** Headers a browser's fetch drops when a redirect leaves the origin; so do we. */
const CREDENTIAL_HEADERS = ['authorization', 'cookie', 'proxy-authorization'];

/** The answer, and the request as it stood at the URL that gave it (after redirects). */
type Sent = { response: Response; url: string; attempt: Attempt };
type Attempt = { method: string; headers: Headers; body: ArrayBuffer | undefined };

function decodeReceipt(value: string): unknown {
  for (const alphabet of ['base64', 'base64url'] as const) {
    try {
      const normal = alphabet === 'base64url' ? value.replace(/-/g, '+').replace(/_/g, '/') : value;
      const bytes = Uint8Array.from(atob(normal.padEnd(Math.ceil(normal.length / 4) * 4, '=')), (c) => c.charCodeAt(0));
      return JSON.parse(new TextDecoder().decode(bytes));
    } catch {
      // try the next alphabet
    }
  }
  return null;
}

/**
 * A fetch that pays x402 and MPP paywalls under the agent's paypolicy policy:
 * request → 402 → quote (price check against maxAmountUsd, nothing signed yet) → sign (`x402` or
 * `mpp`, as the quote's rail says; the server probes the URL itself) → wait for approval if needed
 * → the same request again with the payment header → the paid response, with `payment` set.
 * The payment header goes only to the origin that issued the challenge: redirects are followed
 * by hand, and one that would carry it to another origin ends the call (`cross_origin_redirect`).
 */
export function createPayingFetch(options: PayingFetchOptions): PayingFetch {
  const fetchImpl = options.fetch ?? globalThis.fetch.bind(globalThis);
  const maxMicros = usdToMicros(options.maxAmountUsd, 'maxAmountUsd');
  const maxRedirects = options.maxRedirects ?? 5;

  /** Sends `attempt` to `url`, following redirects; with `payment`, only within its origin. */
  async function send(url: string, attempt: Attempt, signal: AbortSignal | undefined, payment?: { name: string; value: string; origin: string; transactionId: string }): Promise<Sent> {
    let { method, body } = attempt;
    const headers = new Headers(attempt.headers);
    if (payment) headers.set(payment.name, payment.value);
    for (let hops = 0; ; hops++) {
      const response = await fetchImpl(url, { method, headers, body, signal, redirect: 'manual' });
      if (response.type === 'opaqueredirect') {
        throw new PaypolicyError('The paywall redirected, and this runtime hides where to', { code: 'redirect_refused', status: 0, transactionId: payment?.transactionId });
      }
      const location = response.status >= 300 && response.status < 400 ? response.headers.get('location') : null;
      if (location === null) {
        if (payment) headers.delete(payment.name);
        return { response, url, attempt: { method, headers, body } };
      }
      await response.body?.cancel();
      if (hops >= maxRedirects) throw new PaypolicyError(`More than ${maxRedirects} redirects`, { code: 'redirect_refused', status: 0, transactionId: payment?.transactionId });
      const next = new URL(location, url);
      if (next.origin !== new URL(url).origin) {
        if (payment) {
          throw new PaypolicyError(`Refused to follow a redirect to ${next.origin}: the payment is only for ${payment.origin}`, {
            code: 'cross_origin_redirect', status: response.status, transactionId: payment.transactionId, details: { location: next.origin },
          });
        }
        for (const name of CREDENTIAL_HEADERS) headers.delete(name);
      }
      // fetch's rules: 303 (and 301/302 after a POST) become a GET without a body.
      if (response.status === 303 || ((response.status === 301 || response.status === 302) && method === 'POST')) {
        if (method !== 'HEAD') method = 'GET';
        body = undefined;
        for (const name of ['content-type', 'content-length', 'content-encoding', 'content-language', 'content-location']) headers.delete(name);
      }
      url = next.href;
    }
  }

  return async (input, init = {}) => {
    const { idempotencyKey, ...rest } = init;
    const signal = rest.signal ?? undefined;
    // A Request reads every body kind (text, JSON, form data, streams) once, so it can be resent.
    const request = new Request(input, rest);
    const method = request.method.toUpperCase();
    const attempt: Attempt = {
      method,
      headers: new Headers(request.headers),
      body: method === 'GET' || method === 'HEAD' ? undefined : await request.arrayBuffer(),
    };
    const first = await send(request.url, attempt, signal);
    if (first.response.status !== 402) return Object.assign(first.response, { payment: null });
    await first.response.body?.cancel();

    // The URL that issued the challenge is the one paypolicy probes, and the only one paid.
    const resourceUrl = first.url;
    const probeMethod = first.attempt.method;
    if (probeMethod !== 'GET' && probeMethod !== 'POST') {
      throw new PaypolicyError(`Cannot pay a ${probeMethod} request: paypolicy probes paywalls with GET or POST`, { code: 'unsupported_method', status: 0 });
    }
    const quote = await options.client.quote({ url: resourceUrl, agent_id: options.agentId, method: probeMethod }, { signal });
    const quoted = usdToMicros(quote.amount_usd, 'amount_usd');
    if (quoted > maxMicros) {
      throw new PaypolicyError(`The paywall asks $${formatMicros(quoted)}, more than maxAmountUsd $${formatMicros(maxMicros)}; nothing was signed`, {
        code: 'max_amount_exceeded', status: 0, details: { amount_usd: formatMicros(quoted), max_amount_usd: formatMicros(maxMicros), resource_url: resourceUrl },
      });
    }

    const key = idempotencyKey ?? globalThis.crypto.randomUUID();
    // The ceiling travels with the request: the server signs the live price, which may have risen since the quote.
    const signRequest = { agent_id: options.agentId, type: quote.rail, payload: { resource_url: resourceUrl, method: probeMethod, max_amount_usd: formatMicros(maxMicros) } };
    let signed = await options.client.sign(signRequest, { idempotencyKey: key, signal });
    if (signed.outcome === 'pending_approval') {
      await options.onPending?.(signed);
      if (options.waitForApproval === false) {
        throw new PaypolicyError(`Payment awaits a human's approval: ${signed.reason}`, {
          code: 'approval_required', status: 202, retryable: true, reason: signed.reason, transactionId: signed.transaction_id,
          approvalRequestId: signed.approval_request_id, details: { idempotency_key: key },
        });
      }
      const wait = options.waitForApproval === undefined || options.waitForApproval === true ? {} : options.waitForApproval;
      signed = await options.client.waitForApproval(signed, { ...wait, signal });
    }
    const header = signed.payment_header;
    if (!header || typeof header.name !== 'string' || typeof header.value !== 'string' || signed.cost_usd === null) {
      throw new PaypolicyError('paypolicy signed but returned no payment header', { code: 'unexpected_response', status: 200, transactionId: signed.transaction_id });
    }
    if (!PAYMENT_HEADERS.has(header.name.toLowerCase())) {
      throw new PaypolicyError(`paypolicy returned a payment header named ${header.name}, which no payment protocol uses; it was not sent`, {
        code: 'unexpected_response', status: 200, transactionId: signed.transaction_id,
      });
    }
    // The quote was a snapshot; the signed cost is what the header pays. paypolicy already refuses
    // a price above the ceiling; this check stays for servers that predate max_amount_usd.
    const cost = usdToMicros(signed.cost_usd, 'cost_usd');
    if (cost > maxMicros) {
      throw new PaypolicyError(`The signed payment is $${formatMicros(cost)}, more than maxAmountUsd $${formatMicros(maxMicros)}; it was not sent`, {
        code: 'max_amount_exceeded', status: 0, transactionId: signed.transaction_id, details: { amount_usd: formatMicros(cost), max_amount_usd: formatMicros(maxMicros), resource_url: resourceUrl },
      });
    }

    const origin = new URL(resourceUrl).origin;
    // Resent as it reached the challenger: credentials of an origin left on the way stay dropped.
    const paid = await send(resourceUrl, first.attempt, signal, { name: header.name, value: header.value, origin, transactionId: signed.transaction_id });
    if (paid.response.status === 402) {
      // A hostile paywall may send an endless body: read only what the error quotes.
      const { text } = await readTextPrefix(paid.response, 500).catch(() => ({ text: '' }));
      throw new PaypolicyError('The paywall refused the signed payment (402 again)', {
        code: 'payment_rejected', status: 402, transactionId: signed.transaction_id, details: { resource_url: resourceUrl, paywall_answer: text },
      });
    }
    let receipt: PaymentInfo['receipt'] = null;
    for (const name of RECEIPT_HEADERS) {
      const value = paid.response.headers.get(name);
      if (value !== null) {
        receipt = { header: name, value, decoded: decodeReceipt(value) };
        break;
      }
    }
    const payment: PaymentInfo = {
      rail: quote.rail, transactionId: signed.transaction_id, amountUsd: formatMicros(cost), idempotent: signed.idempotent, idempotencyKey: key, resourceUrl, receipt,
    };
    return Object.assign(paid.response, { payment });
  };
}
