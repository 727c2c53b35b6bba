import { DomainError } from '../domain/errors.js';

/**
 * A bound on work in flight that never queues: while `limit` pieces of work are inside, the next
 * one is refused at once (and answered 503 `overloaded` with Retry-After, or Connect Unavailable).
 * Nobody waits for admission, so there is no admission queue whose age could grow: under overload
 * the answers that are given stay as fast as at the bound, and the rest are quick refusals.
 */
export type Gate = {
  readonly limit: number;
  /** What is full when it refuses (the parenthesis of its `overloaded` message). */
  readonly what: string;
  /** Work inside the gate right now. */
  inFlight: () => number;
  /**
   * Enters, returning the release (idempotent), or throws `overloaded` naming `what` is full. With
   * a `tenant` (an organization id), also refuses once that tenant holds its share (ownShare).
   */
  enter: (tenant?: string) => () => void;
  /** Enters, returning the release, or undefined when the gate (or the tenant's share) is full. */
  tryEnter: (tenant?: string) => (() => void) | undefined;
  /**
   * True while the next `enter` (by `tenant`, when given) would be refused: a cheap look, for
   * refusing before any other work.
   */
  full: (tenant?: string) => boolean;
};

/**
 * Default requests in flight on the agent surface (REST /api/* and PaymentPolicyService). Sized
 * from throughput, not from memory: a request admitted behind N others waits about N / (payments
 * per second), and a loaded 2-core box signs a few hundred a second, so 128 keeps an admitted
 * request's wait well under a second while 64 busy clients are never refused.
 */
export const DEFAULT_MAX_IN_FLIGHT = 128;
/** Default payments in the signing stage at once (pre-sign, reservation, signing thread, settle). */
export const DEFAULT_MAX_SIGN_QUEUE = 256;
/**
 * Default longest wait of a payment in the signing stage before its decision is written: a payment
 * that has waited longer (for a signing thread or for its turn in the write queue) is refused with
 * `overloaded` instead of being served late, before anything is written (docs/configuration.md "Overload").
 */
export const DEFAULT_MAX_QUEUE_MS = 1_000;
/** Default outbound paywall probes at once. */
export const DEFAULT_MAX_PROBES = 32;

/** The one error every gate answers with: `what` says which bound was reached. */
export function overloaded(what: string): DomainError {
  return new DomainError('overloaded', `Server overloaded (${what}); retry shortly`, { code: 'overloaded' });
}

/**
 * Refuses work that has waited past `deadline` (a `performance.now()` time): called at the last
 * moment before a payment's decision is written, so a late one leaves nothing behind.
 */
export function shedIfLate(deadline: number): void {
  if (performance.now() > deadline) throw overloaded('waited too long to be signed');
}

/**
 * The most of a gate one tenant may hold: three quarters, so that whatever one organization's
 * requests wait on (a hung RPC node, a slow paywall, a flood of its own) at least a quarter of the
 * gate stays open to every other organization. A gate of one is all one tenant's.
 */
export function tenantShare(limit: number): number {
  return Math.max(1, Math.floor((limit * 3) / 4));
}

/** A configured share, or the default one, never more than the gate itself. */
export function shareOf(limit: number, configured: number | undefined): number {
  return Math.min(configured ?? tenantShare(limit), limit);
}

export function createGate(limit: number, what: string, share = tenantShare(limit)): Gate {
  let inFlight = 0;
  const byTenant = new Map<string, number>();
  const tryEnter = (tenant?: string) => {
    if (inFlight >= limit) return undefined;
    const held = tenant === undefined ? 0 : byTenant.get(tenant) ?? 0;
    if (tenant !== undefined && held >= share) return undefined;
    inFlight++;
    if (tenant !== undefined) byTenant.set(tenant, held + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      inFlight--;
      if (tenant === undefined) return;
      const left = (byTenant.get(tenant) ?? 1) - 1;
      if (left === 0) byTenant.delete(tenant);
      else byTenant.set(tenant, left);
    };
  };
  return {
    limit,
    what,
    inFlight: () => inFlight,
    full: (tenant) => inFlight >= limit || (tenant !== undefined && (byTenant.get(tenant) ?? 0) >= share),
    tryEnter,
    enter(tenant) {
      const release = tryEnter(tenant);
      if (release) return release;
      throw overloaded(inFlight >= limit || tenant === undefined ? what : `${what} for this organization`);
    },
  };
}
