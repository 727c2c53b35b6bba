import type { SessionContext } from '../app/accounts/dashboardSessions.js';
import type { Flash } from './layout.js';

/** Flash messages waiting for their page view, at most this many (oldest dropped first). */
const MAX_PENDING_FLASHES = 10_000;

/** One-time messages for the page after a redirect, one per session. */
export type Flashes = {
  set: (session: SessionContext, flash: Flash) => void;
  /** The session's message, removed as it is read. */
  take: (session: SessionContext) => Flash | undefined;
};

/**
 * Keyed by the session's token hash. Memory only: a restart loses at most a confirmation (or a
 * just-created key, which the user can then revoke and redo).
 */
export function createFlashes(max = MAX_PENDING_FLASHES): Flashes {
  const flashes = new Map<string, Flash>();
  return {
    set(session, flash) {
      const key = session.tokenHash.toString('hex');
      flashes.delete(key);
      flashes.set(key, flash);
      if (flashes.size > max) flashes.delete(flashes.keys().next().value!);
    },
    take(session) {
      const key = session.tokenHash.toString('hex');
      const flash = flashes.get(key);
      flashes.delete(key);
      return flash;
    },
  };
}
