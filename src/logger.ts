import pino, { type DestinationStream, type Logger } from 'pino';

/**
 * Paths pino censors wherever they appear. Nothing in the service logs headers, bodies or
 * config objects wholesale; this list is the second line of defence, fixed at start-up.
 */
const REDACT = [
  'authorization', '*.authorization', 'headers', '*.headers', 'apiKey', '*.apiKey', 'api_key', '*.api_key',
  'adminToken', '*.adminToken', 'admin_token', '*.admin_token', 'privateKey', '*.privateKey', 'masterKey',
  '*.masterKey', 'plaintext', '*.plaintext', 'plaintextKey', '*.plaintextKey', 'password', '*.password',
  'signature', '*.signature', 'body', '*.body',
];

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** JSON logger; `destination` lets tests capture every line. */
export function createLogger(level: LogLevel, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'paypolicy' },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: REDACT, censor: '[redacted]' },
      serializers: { err: pino.stdSerializers.err },
    },
    destination,
  );
}
