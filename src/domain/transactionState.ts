/**
 * The one definition of a ledger row's states: which exist, which moves between them are allowed,
 * and which hold the agent's spend cap. The store derives `holds_cap` from it on every write and
 * the database refuses any other move (migration 0006's triggers, checked against this table by
 * test/store/transactionState.test.ts); the spend sums, the sweeps, the restart repair, the
 * dashboard and the CLI read their status lists from here.
 *
 * A payment request starts in `signing` (allowed), `signed` (allowed, signed before the deciding
 * commit), `pending_approval` or `denied`; a ping is `recorded` and never moves.
 * - signing → signed (the signature is recorded) | failed (signing or recording it failed, or a
 *   crash cut it off) | approved (the same, for a payment a human approved: the approval stands)
 * - pending_approval → signing (an approved direct payment) | approved (an approved paywall
 *   payment, signed when the agent collects it) | denied | expired (no decision in the window)
 * - approved → signing (collected) | denied (the paywall's offer changed, or the re-check at
 *   collection refused it) | expired (not collected within the collection window)
 * - failed → approved | expired: only the start-up repair of rows an older build failed although
 *   their approval was approved (reopened within the collection window, else expired)
 * - signed → reverted: a raw transaction the service submitted was mined and its receipt says it
 *   failed (or the node refused it for good and its nonce was filled by a no-op transfer): nothing
 *   moved, so the hold is released (migration 0008). Its reason says why.
 * denied, expired, reverted and recorded are final; signed is final except for that move.
 */
export const TRANSACTION_STATES = ['signing', 'signed', 'failed', 'pending_approval', 'approved', 'denied', 'expired', 'recorded', 'reverted'] as const;

export type TransactionState = (typeof TRANSACTION_STATES)[number];

/** Allowed moves, from → to. Anything else is refused by the typed store API and by the database. */
export const TRANSITIONS = {
  signing: ['signed', 'failed', 'approved'],
  signed: ['reverted'],
  failed: ['approved', 'expired'],
  pending_approval: ['signing', 'approved', 'denied', 'expired'],
  approved: ['signing', 'denied', 'expired'],
  denied: [],
  expired: [],
  recorded: [],
  reverted: [],
} as const satisfies Record<TransactionState, readonly TransactionState[]>;

/** The states a row in `From` may move to. */
export type NextState<From extends TransactionState> = (typeof TRANSITIONS)[From][number];

/** States a new row may be written in. */
export const INITIAL_STATES = ['signing', 'signed', 'pending_approval', 'denied', 'recorded'] as const satisfies readonly TransactionState[];
export type InitialState = (typeof INITIAL_STATES)[number];

/**
 * States whose amount counts against the agent's rolling cap (from the row's cap_at): a payment
 * being signed or signed, and one waiting for a human or for its agent to collect it.
 */
export const CAP_HOLDING_STATES = ['signing', 'signed', 'pending_approval', 'approved'] as const satisfies readonly TransactionState[];

export function isTransactionState(s: string): s is TransactionState {
  return (TRANSACTION_STATES as readonly string[]).includes(s);
}

export function holdsCap(state: TransactionState): boolean {
  return (CAP_HOLDING_STATES as readonly TransactionState[]).includes(state);
}

export function canTransition(from: TransactionState, to: TransactionState): boolean {
  return (TRANSITIONS[from] as readonly TransactionState[]).includes(to);
}
