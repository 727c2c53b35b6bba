import { DomainError } from './domain/errors.js';

/**
 * A bound on work in flight that never queues: while `limit` pieces of work are inside, the next
 * one is refused at once (and answered 503 `overloaded` with Retry-After, or Connect Unavailable).
 * Nobody waits for admission, so there is no admission queue whose age could grow: under overload
 * the answers that are given stay as fast as at the bound, and the rest are quick refusals.
 */
export type Gate = {
  readonly limit: number;
  /** Work inside the gate right now. */
  inFlight: () => number;
  /** Enters, returning the release (idempotent), or throws `overloaded` naming `what` is full. */
  enter: () => () => void;
  /** Enters, returning the release, or undefined when the gate is full. */
  tryEnter: () => (() => void) | undefined;
};

/** Default requests in flight on the agent surface (REST /api/* and PaymentPolicyService). */
export const DEFAULT_MAX_IN_FLIGHT = 512;
/** Default payments in the signing stage at once (pre-sign, reservation, signing thread, settle). */
export const DEFAULT_MAX_SIGN_QUEUE = 256;
/** Default outbound paywall probes at once. */
export const DEFAULT_MAX_PROBES = 32;

/** The one error every gate answers with: `what` says which bound was reached. */
export function overloaded(what: string): DomainError {
  return new DomainError('overloaded', `Server overloaded (${what}); retry shortly`, { code: 'overloaded' });
}

export function createGate(limit: number, what: string): Gate {
  let inFlight = 0;
  const tryEnter = () => {
    if (inFlight >= limit) return undefined;
    inFlight++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      inFlight--;
    };
  };
  return {
    limit,
    inFlight: () => inFlight,
    tryEnter,
    enter() {
      const release = tryEnter();
      if (!release) throw overloaded(what);
      return release;
    },
  };
}
