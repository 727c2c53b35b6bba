import { evaluatePolicy, type Verdict } from '../../domain/policy.js';
import type { NetworkFee } from '../../domain/networkFee.js';
import type { Agent } from '../../domain/types.js';
import type { PaymentRow } from '../../store/port.js';
import type { AppDeps } from '../deps.js';
import { attributeOffer, offerFromJson, splitRecipients } from './paywall.js';
import { policyFacts } from './policyFacts.js';
import { isPaywallRequest, type StoredPaywallRequest } from './signatures.js';
import { loadRequest } from './signatures.js';
import type { Offer } from '../../paywalls/offer.js';

/** Split recipients of a stored paywall request (none for the direct types). */
function storedSplitRecipients(request: string): string[] {
  return isPaywallRequest(request) ? splitRecipients(offerFromJson((JSON.parse(request) as StoredPaywallRequest).offer)) : [];
}

/** Gas and fee cap of a stored raw transaction, whose fee the treasury pays; null for other types. */
export function storedNetworkFee(request: string): NetworkFee | null {
  if (isPaywallRequest(request)) return null;
  const { payload } = loadRequest(request);
  return payload.kind === 'raw_transaction' ? { gas: payload.gas, maxFeePerGas: payload.maxFeePerGas } : null;
}

/**
 * The policy re-check of an approved payment (when decided, and when a direct payment is
 * collected again): everything but the threshold, which the human overrides. `ownMicros` is the
 * payment's own hold inside the cap window, counted once, as this payment. The registry
 * attribution made when the payment was requested still vouches for a slug entry; the network fee
 * is checked again because the ceiling may have been lowered while the payment waited.
 */
export async function recheckApproved(deps: AppDeps, agent: Agent, tx: PaymentRow, ownMicros: bigint): Promise<Verdict> {
  return evaluatePolicy(await policyFacts(deps, agent, tx.recipient, tx.amountMicros, ownMicros, {
    attributedSlug: tx.serviceSlug || null, ownId: tx.id,
    otherRecipients: storedSplitRecipients(tx.request),
    networkFee: storedNetworkFee(tx.request),
  }), { skipThreshold: true });
}

/** The collection re-check of an approved paywall payment against the fresh offer and its attribution now. */
export async function recheckProbed(deps: AppDeps, agent: Agent, row: PaymentRow, probed: { offer: Offer; chain: readonly string[] }): Promise<Verdict> {
  const attribution = await attributeOffer(deps, agent, probed.offer, probed.chain);
  return evaluatePolicy(await policyFacts(deps, agent, probed.offer.payTo.toLowerCase(), row.amountMicros, row.amountMicros, {
    otherRecipients: splitRecipients(probed.offer), ownId: row.id,
    attributedSlug: attribution.attributed ? attribution.slug : null,
    attributionNote: attribution.note,
  }), { skipThreshold: true });
}
