import { createContextKey } from '@connectrpc/connect';
import type { Logger } from 'pino';

/** The per-request child logger (with reqId), passed from the HTTP layer into Connect handlers. */
export const requestLoggerKey = createContextKey<Logger | undefined>(undefined, { description: 'request logger' });
