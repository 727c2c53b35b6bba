import { attributeResource, type Attribution } from '../../domain/attribution.js';
import { invalidArgument } from '../../domain/errors.js';
import { formatUsd } from '../../domain/money.js';
import type { Agent, ApiKeyMode } from '../../domain/types.js';
import { ADDRESS } from '../../domain/validate.js';
import type { Offer } from '../../paywalls/offer.js';
import { atomicToMicrosRoundedUp } from '../../paywalls/offerOutcome.js';
import { parsePaymentChallenge } from '../../paywalls/parseChallenge.js';
import { safeFetch } from '../../paywalls/safeFetch.js';
import { checkMppOffer } from '../../signing/tempo.js';
import { checkX402Offer } from '../../signing/x402Payment.js';
import type { AppDeps } from '../deps.js';

/**
 * Chains an offer may be paid on, per key mode. Live keys: Base (x402) and Tempo (MPP) mainnets,
 * as the wire protocol says. Test keys may also pay their testnets (Base Sepolia, Tempo Moderato).
 */
export const OFFER_CHAINS: Readonly<Record<ApiKeyMode, { x402: readonly number[]; mpp: readonly number[] }>> = {
  live: { x402: [8453], mpp: [4217] },
  test: { x402: [8453, 84532], mpp: [4217, 42431] },
};

export type ProbeMethod = 'GET' | 'POST';

/** Refuses offers on chains the key's mode may not pay on, with the wire protocol's reason texts. */
export function requireOfferChain(offer: Offer, mode: ApiKeyMode): void {
  const allowed = OFFER_CHAINS[mode][offer.rail];
  if (allowed.includes(offer.chainId)) return;
  if (offer.rail === 'x402') {
    throw invalidArgument(`Unsupported x402 network ${offer.network} (ak_${mode}_ keys pay on ${allowed.map((c) => `eip155:${c}`).join(', ')})`, 'unsupported_network');
  }
  throw invalidArgument(`MPP method ${offer.mpp?.challenge.method ?? 'tempo'} on chain ${offer.chainId} not supported yet (ak_${mode}_ keys pay on ${allowed.join(', ')})`, 'unsupported_method');
}

/**
 * Refuses an offer no payment can be built from (a zero price, a challenge in a mode that cannot
 * be paid), with the error signing it would meet: quote and sign (dry runs included) check an
 * offer by the same functions the signing does, so a quote never allows what sign refuses.
 */
export function requirePayableOffer(offer: Offer): void {
  if (offer.rail === 'x402') checkX402Offer(offer);
  else checkMppOffer(offer);
}

/** An offer with the chain of URLs that led to it (see SafeFetchResult): attribution needs both. */
export type ProbedOffer = { offer: Offer; chain: string[] };

/**
 * Probes a paywalled URL through the SSRF-safe client and parses its 402, on `orgId`'s share of the
 * probe slots. A 405 to GET is retried once with POST, as the wire protocol says; the chain is then
 * the POST's.
 */
export async function probeOffer(deps: AppDeps, orgId: string, url: string, method: ProbeMethod): Promise<ProbedOffer & { method: ProbeMethod }> {
  let used = method;
  let res = await safeFetch(url, { method, tenant: orgId }, deps.probe);
  if (res.status === 405 && method === 'GET') {
    used = 'POST';
    res = await safeFetch(url, { method: 'POST', tenant: orgId }, deps.probe);
  }
  if (res.status !== 402) throw invalidArgument(`URL did not return a payment challenge (status ${res.status})`, 'no_payment_challenge');
  // A challenge's expiry is a paywall's real time, compared on the validity clock like the ends it caps.
  return { offer: parsePaymentChallenge(res, new Date(deps.validityNow())), chain: res.chain, method: used };
}

/**
 * Attributes a paid resource to a registered service, explaining failures of the agent's slug
 * entries. `chain` is the probe's whole redirect chain: the registry must vouch for every hop.
 * Inside a deciding write the registry read is held by the agent's policy row (agents.getForUse),
 * which every registry write touches for agents that allow a slug. The registry is read through
 * its cached index (store/services.ts), so this costs the same inside the write queue whatever
 * the size of the registry.
 */
export async function attributeOffer(deps: AppDeps, agent: Agent, offer: Offer, chain: readonly string[]): Promise<Attribution> {
  const slugs = agent.policy.allowlist.filter((entry) => !ADDRESS.test(entry));
  return attributeResource(await deps.store.services.visibleIndex(agent.orgId), chain, offer.rail, offer.realm, slugs);
}

/** An offer as JSON text for the ledger (bigints as decimal strings). */
export function offerToJson(offer: Offer): unknown {
  return { ...offer, amountAtomic: offer.amountAtomic.toString(), amountMicros: offer.amountMicros.toString() };
}

export function offerFromJson(json: unknown): Offer {
  const o = json as Offer & { amountAtomic: string; amountMicros: string };
  return { ...o, amountAtomic: BigInt(o.amountAtomic), amountMicros: BigInt(o.amountMicros) };
}

/**
 * Whether a fresh offer still pays what a human approved: same rail, chain, token, recipient, the
 * same payer of the network fee, and not more in total. Anything else needs a new request and a
 * new decision. A split payment is approved as its vector of transfers, so it must come back
 * exactly as approved: the same recipients with the same amounts in the same order (the order the
 * transfers are signed in), the primary recipient's share included, so the total too.
 */
export function sameOffer(fresh: Offer, approved: Offer): boolean {
  return fresh.rail === approved.rail && fresh.chainId === approved.chainId
    && fresh.asset.toLowerCase() === approved.asset.toLowerCase()
    && fresh.payTo.toLowerCase() === approved.payTo.toLowerCase()
    && samePayees(fresh, approved)
    && sameFeePayer(fresh, approved)
    && fresh.amountAtomic <= approved.amountAtomic;
}

/** Whether a split payment's transfers are the approved ones exactly; an offer without splits has only its total to compare, which sameOffer bounds. */
export function samePayees(fresh: Offer, approved: Offer): boolean {
  if (offerSplits(fresh).length === 0 && offerSplits(approved).length === 0) return true;
  return sameSplits(fresh, approved) && fresh.amountAtomic === approved.amountAtomic;
}

/**
 * Whether the paywall still pays the network fee when it did at approval (an MPP `feePayer`
 * challenge): the approver was shown no fee, so the treasury must not start paying one.
 */
export function sameFeePayer(fresh: Offer, approved: Offer): boolean {
  return (fresh.mpp?.request.methodDetails.feePayer === true) === (approved.mpp?.request.methodDetails.feePayer === true);
}

/** Whether two offers split their amount identically: recipient and amount of every split, in order. */
export function sameSplits(a: Offer, b: Offer): boolean {
  const x = offerSplits(a);
  const y = offerSplits(b);
  return x.length === y.length && x.every((s, i) => s.recipient === y[i]!.recipient && s.amountAtomic === y[i]!.amountAtomic);
}

/** Lowercased addresses an offer pays besides its primary recipient (MPP splits). */
export function splitRecipients(offer: Offer): string[] {
  return offerSplits(offer).map((s) => s.recipient);
}

/**
 * One transfer a payment makes: a lowercased address, its amount in the token's atomic units and
 * in micro-USD at the token's $1 peg (rounded up, like an offer's amount).
 */
export type Payee = { recipient: string; amountAtomic: bigint; amountMicros: bigint };

const payee = (offer: Offer, recipient: string, amountAtomic: bigint): Payee => ({
  recipient: recipient.toLowerCase(), amountAtomic, amountMicros: atomicToMicrosRoundedUp(amountAtomic, offer.decimals),
});

/** An offer's MPP splits in challenge order (none for x402 or an MPP offer without splits). */
export function offerSplits(offer: Offer): Payee[] {
  return (offer.mpp?.request.methodDetails.splits ?? []).map((s) => payee(offer, s.recipient, BigInt(s.amount)));
}

/**
 * Every transfer an offer pays, in the order they are signed: the primary recipient's share
 * (the amount less the splits, signing/tempo.ts) first, then each split.
 */
export function offerPayees(offer: Offer): Payee[] {
  const splits = offerSplits(offer);
  const primary = offer.amountAtomic - splits.reduce((sum, s) => sum + s.amountAtomic, 0n);
  return [payee(offer, offer.payTo, primary), ...splits];
}

/** Payees as a person reads them: `$1.5 to 0x…, $0.5 to 0x…`. */
export function describePayees(payees: readonly Payee[]): string {
  return payees.map((p) => `$${formatUsd(p.amountMicros)} to ${p.recipient}`).join(', ');
}

/** Who pays an offer's network fee, as the approval showed it. */
export function feePayerText(offer: Offer): string {
  return offer.mpp?.request.methodDetails.feePayer === true ? 'the paywall pays the network fee' : 'the treasury pays the network fee';
}
