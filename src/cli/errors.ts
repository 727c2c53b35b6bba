import { ConnectError } from '@connectrpc/connect';
import { codeToString } from '@connectrpc/connect/protocol-connect';

/** Exit code when the server, or the way to it, failed. */
export const EXIT_FAILURE = 1;
/** Exit code when the command line or local configuration was wrong; nothing was sent. */
export const EXIT_USAGE = 2;

/** A mistake on the command line or in local configuration, found before any request is sent. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** What the CLI prints for a failure: one line for stderr (without the `paypolicy: ` prefix) and an exit code. */
export type ErrorReport = { line: string; exitCode: number };

/**
 * Turns anything a command threw into one line and an exit code. `target` must already be free of
 * credentials, because it is printed. Server messages are printed as the server sent them: the
 * server never echoes the admin token, and the CLI never puts it into an error.
 */
export function reportError(err: unknown, target: string): ErrorReport {
  if (err instanceof UsageError) return { line: err.message, exitCode: EXIT_USAGE };
  if (err instanceof ConnectError) {
    // Socket and DNS failures carry a Node system error (it always has `syscall`) as cause;
    // anything else is an answer from something that speaks HTTP.
    const cause = err.cause as { syscall?: unknown; message?: unknown } | undefined;
    if (cause && typeof cause.syscall === 'string') return { line: `cannot reach ${target}: ${String(cause.message)}`, exitCode: EXIT_FAILURE };
    return { line: `${codeToString(err.code)}: ${err.rawMessage}`, exitCode: EXIT_FAILURE };
  }
  return { line: err instanceof Error ? err.message : String(err), exitCode: EXIT_FAILURE };
}
