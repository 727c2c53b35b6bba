import { DomainError, invalidArgument } from '../../domain/errors.js';
import { evaluatePolicy, type Verdict } from '../../domain/policy.js';
import type { Attribution } from '../../domain/attribution.js';
import type { ApiKeyPrincipal } from '../../domain/types.js';
import type { Offer } from '../../paywalls/offer.js';
import { checkUrl } from '../../paywalls/safeFetch.js';
import { requireAgentInOrg } from '../organizations/agents.js';
import type { AppDeps } from '../deps.js';
import { attributeOffer, probeOffer, requireOfferChain, requirePayableOffer, splitRecipients, type ProbeMethod } from './paywall.js';
import { policyFacts } from './policyFacts.js';

export type QuoteResult = { offer: Offer; verdict: Verdict; attribution: Attribution; resourceUrl: string; cached: boolean };

/** A field not given is `undefined`; null is refused like any value of the wrong type (paymentRequest.ts). */
export type QuoteInput = { url: unknown; agentId: unknown; method: unknown };

/**
 * POST /api/quote: probes a paywalled URL, parses its challenge and evaluates the agent's policy
 * in dry-run mode. Never signs, never writes. Cheap checks run first (agent, treasury, URL), so
 * a bad request costs no network work. Offers are cached per (organization, url, method) for 60
 * seconds with the redirect chain they came through; the verdict (and the attribution of that
 * chain) is always evaluated fresh for the asking agent.
 */
export async function quotePayment(deps: AppDeps, principal: ApiKeyPrincipal, input: QuoteInput): Promise<QuoteResult> {
  if (input.agentId === undefined || input.agentId === '') throw invalidArgument('agent_id is required', 'agent_id_required');
  if (typeof input.agentId !== 'string') throw invalidArgument('agent_id must be a string');
  const agent = await requireAgentInOrg(deps, principal.orgId, input.agentId);
  if (!deps.vault.address(principal.orgId)) {
    throw new DomainError('treasury_unavailable', 'Organization treasury not provisioned', { code: 'treasury_not_provisioned' });
  }
  if (input.url === undefined || input.url === '') throw invalidArgument('url is required', 'url_required');
  if (typeof input.url !== 'string') throw invalidArgument('url must be a string', 'invalid_url');
  const method = parseMethod(input.method);
  checkUrl(input.url, deps.probe);

  let probed = deps.offers.get(principal.orgId, input.url, method);
  const cached = probed !== undefined;
  if (!probed) {
    const { offer, chain } = await probeOffer(deps, principal.orgId, input.url, method);
    probed = { offer, chain };
    deps.offers.set(principal.orgId, input.url, method, probed);
  }
  const { offer } = probed;
  requireOfferChain(offer, principal.mode);
  requirePayableOffer(offer);
  // The registry vouches for the URL that answered only if it covers every redirect hop too.
  const attribution = await attributeOffer(deps, agent, offer, probed.chain);
  const verdict = evaluatePolicy(await policyFacts(deps, agent, offer.payTo.toLowerCase(), offer.amountMicros, 0n, {
    otherRecipients: splitRecipients(offer),
    attributedSlug: attribution.attributed ? attribution.slug : null,
    attributionNote: attribution.note,
  }));
  return { offer, verdict, attribution, resourceUrl: input.url, cached };
}

function parseMethod(value: unknown): ProbeMethod {
  if (value === undefined || value === '') return 'GET';
  if (typeof value === 'string' && (value.toUpperCase() === 'GET' || value.toUpperCase() === 'POST')) return value.toUpperCase() as ProbeMethod;
  throw invalidArgument('method must be GET or POST', 'invalid_method');
}
