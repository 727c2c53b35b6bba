import type { TransactionState } from '../domain/transactionState.js';
import { html, type Html } from './html.js';

/** Badge colour of each ledger state: green when paid or about to be, amber while waiting, red when refused or broken. */
const TRANSACTION_BADGE: Record<TransactionState, 'badge-ok' | 'badge-warn' | 'badge-bad' | 'badge-muted'> = {
  signed: 'badge-ok',
  approved: 'badge-ok',
  signing: 'badge-warn',
  pending_approval: 'badge-warn',
  denied: 'badge-bad',
  failed: 'badge-bad',
  expired: 'badge-muted',
  recorded: 'badge-muted',
  reverted: 'badge-bad',
};

/** A ledger state as the badge the other pages use; an unknown word (an old row) is shown muted. */
export function transactionBadge(status: string): Html {
  const kind = (TRANSACTION_BADGE as Record<string, string | undefined>)[status] ?? 'badge-muted';
  return html`<span class="badge ${kind}">${status.replace('_', ' ')}</span>`;
}
