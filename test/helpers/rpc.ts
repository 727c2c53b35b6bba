import { Code, ConnectError } from '@connectrpc/connect';
import { expect } from 'vitest';

/**
 * Call options carrying the admin token. `connection: close` keeps the test from leaving idle
 * keep-alive sockets behind: server/server.ts cannot close those on stop() (see test/shutdown.test.ts),
 * so each one would add the full grace period plus one second to every close().
 */
export function bearer(token: string): { headers: Record<string, string> } {
  return { headers: { authorization: `Bearer ${token}`, connection: 'close' } };
}

/** Call options with no credentials, same connection handling as `bearer`. */
export const anonymous = { headers: { connection: 'close' } };

/**
 * Awaits a call that must fail and returns its ConnectError after checking the code and,
 * when given, that the message matches.
 */
export async function expectRpcError(call: Promise<unknown>, code: Code, message?: RegExp): Promise<ConnectError> {
  let caught: unknown;
  try {
    await call;
  } catch (err) {
    caught = err;
  }
  expect(caught, 'the call should have failed').toBeInstanceOf(ConnectError);
  const err = caught as ConnectError;
  expect(Code[err.code], err.message).toBe(Code[code]);
  if (message) expect(err.rawMessage).toMatch(message);
  return err;
}
