/*
 * @paypolicy/client: the agents' side of paypolicy. Runs wherever `fetch` exists (Node 20+,
 * browsers, Deno, Bun, edge runtimes); no Node built-ins here. The MCP server is a separate entry
 * (`@paypolicy/client/mcp`) so this one never loads the MCP SDK.
 */
export { createClient } from './client.js';
export type { CallOptions, ClientOptions, PaypolicyClient, PendingPayment, SignOptions, SignedResult, WaitOptions } from './client.js';
export { PaypolicyError, isPaypolicyError } from './errors.js';
export type { ClientErrorCode, PaypolicyErrorCode, PaypolicyErrorOptions } from './errors.js';
export type { RetryOptions } from './http.js';
export { createPayingFetch } from './payingFetch.js';
export type { PaidResponse, PayingFetch, PayingFetchOptions, PaymentInfo } from './payingFetch.js';
export { formatMicros, usdToMicros } from './money.js';
export type * from './types.js';
