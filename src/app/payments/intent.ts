import { invalidArgument } from '../../domain/errors.js';
import type { NetworkFee } from '../../domain/networkFee.js';
import type { PaymentRequest } from '../../domain/paymentRequest.js';
import type { Offer } from '../../paywalls/offer.js';
import type { PolicyFacts } from '../../domain/policy.js';
import type { Agent, ApiKeyPrincipal } from '../../domain/types.js';
import type { AppDeps } from '../deps.js';
import { attributeOffer, offerToJson, probeOffer, requireOfferChain, requirePayableOffer, splitRecipients } from './paywall.js';
import { advisoryPolicyFacts, policyFacts } from './policyFacts.js';
import type { StoredPaywallRequest } from './signatures.js';
import { storeRequest } from './signatures.js';

/**
 * What a request asks to pay, resolved: for the direct types straight from the request; for x402
 * and mpp from the challenge the resource URL answers with right now (the client's recipient and
 * amount are never used), attributed to a registered service when the registry vouches for it.
 */
export type Intent = {
  chainId: number;
  recipient: string;
  /** Split recipients an MPP payment also pays. */
  otherRecipients: string[];
  /** Gas and fee cap the treasury pays for (raw transactions); null when the payer pays no fee in wei. */
  networkFee: NetworkFee | null;
  amountMicros: bigint;
  /** The requester's ceiling on amountMicros (x402/mpp payload.max_amount_usd); null when none. */
  maxAmountMicros: bigint | null;
  /** The attribution when the challenge was probed; the deciding write attributes again (intentFacts). */
  attributedSlug: string | null;
  attributionNote: string | null;
  /** The probed challenge and its redirect chain (x402 and mpp); null for the direct types. */
  paywall: { offer: Offer; chain: readonly string[] } | null;
  resourceUrl: string;
  /** The ledger's `request` column: everything needed to sign later. */
  stored: string;
  needsNonce: boolean;
};

export async function resolveIntent(deps: AppDeps, principal: ApiKeyPrincipal, agent: Agent, req: PaymentRequest): Promise<Intent> {
  if (req.payload.kind !== 'paywall') {
    return {
      chainId: req.chainId, recipient: req.recipient, otherRecipients: [], amountMicros: req.amountMicros, maxAmountMicros: null, attributedSlug: null, attributionNote: null, paywall: null,
      networkFee: req.payload.kind === 'raw_transaction' ? { gas: req.payload.gas, maxFeePerGas: req.payload.maxFeePerGas } : null,
      resourceUrl: '', stored: storeRequest(req), needsNonce: req.type === 'raw_transaction',
    };
  }
  const { resourceUrl, method } = req.payload;
  const { offer, chain } = await probeOffer(deps, principal.orgId, resourceUrl, method);
  if (offer.rail !== req.type) {
    throw invalidArgument(`type ${req.type} was requested but ${resourceUrl} offers ${offer.rail}`, 'rail_mismatch');
  }
  requireOfferChain(offer, principal.mode);
  requirePayableOffer(offer);
  const attribution = await attributeOffer(deps, agent, offer, chain);
  const stored: StoredPaywallRequest = {
    type: offer.rail, chainId: offer.chainId, recipient: offer.payTo.toLowerCase(), amountMicros: offer.amountMicros.toString(),
    payload: req.payload, offer: offerToJson(offer),
  };
  return {
    chainId: offer.chainId, recipient: offer.payTo.toLowerCase(), otherRecipients: splitRecipients(offer), amountMicros: offer.amountMicros, maxAmountMicros: req.maxAmountMicros, networkFee: null,
    attributedSlug: attribution.attributed ? attribution.slug : null, attributionNote: attribution.note, paywall: { offer, chain },
    resourceUrl, stored: JSON.stringify(stored), needsNonce: false,
  };
}

/**
 * The policy facts of a resolved intent as the store sees them now; `advisory` for the pre-check
 * that only chooses when to sign (policyFacts.ts advisoryPolicyFacts), never for a decision.
 */
export async function intentFacts(deps: AppDeps, agent: Agent, intent: Intent, advisory = false): Promise<PolicyFacts> {
  // A decision is judged by the registry as it is in its own write: a service removed or moved
  // since the probe (and acknowledged) no longer vouches for the URL.
  const fresh = !advisory && intent.paywall ? await attributeOffer(deps, agent, intent.paywall.offer, intent.paywall.chain) : undefined;
  const more = {
    otherRecipients: intent.otherRecipients,
    attributedSlug: fresh ? (fresh.attributed ? fresh.slug : null) : intent.attributedSlug,
    attributionNote: fresh ? fresh.note : intent.attributionNote,
    networkFee: intent.networkFee, maxAmountMicros: intent.maxAmountMicros,
  };
  return advisory
    ? advisoryPolicyFacts(deps, agent, intent.recipient, intent.amountMicros, more)
    : policyFacts(deps, agent, intent.recipient, intent.amountMicros, 0n, more);
}
