import { createContextKey } from '@connectrpc/connect';
import type { Logger } from 'pino';
import type { ApiKeyPrincipal } from '../domain/types.js';

/**
 * The request's logger (a child with its reqId), passed from the HTTP layer into Connect handlers.
 * A function, so that the child is made only when an RPC logs something (an internal error).
 */
export const requestLoggerKey = createContextKey<(() => Logger) | undefined>(undefined, { description: 'request logger' });

/**
 * The API key's principal, once an agent RPC's key has been authenticated (at admission), so the
 * handler does not hash and look it up again. Unset when the key did not authenticate: the handler
 * then authenticates itself and answers the same 401.
 */
export const apiKeyPrincipalKey = createContextKey<ApiKeyPrincipal | undefined>(undefined, { description: 'authenticated API key' });
