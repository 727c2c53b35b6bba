import type { ServiceImpl, HandlerContext } from '@connectrpc/connect';
import { PaymentPolicyService } from '../../gen/paypolicy/v1/payment_policy_pb.js';
import type { AppDeps } from '../app/deps.js';
import { authenticateApiKey } from '../app/apiKeys.js';
import { pingAgent } from '../app/ping.js';
import { resolveServices } from '../app/registry.js';
import type { ApiKeyPrincipal } from '../domain/types.js';
import { approvalStatusToProto, paymentTypeFromProto, quoteResultToProto, serviceToProto, signResultToProto } from './mappers.js';
import { quotePayment } from '../app/quote.js';
import { signPayment } from '../app/sign.js';
import { getApprovalStatus } from '../app/approvals.js';

/** Agent-facing RPCs: authenticate, call one use case, map the result. Nothing else. */
export function createPaymentPolicyService(deps: AppDeps): ServiceImpl<typeof PaymentPolicyService> {
  const principal = (ctx: HandlerContext): ApiKeyPrincipal => authenticateApiKey(deps, ctx.requestHeader.get('authorization'));

  return {
    ping(req, ctx) {
      return pingAgent(deps, principal(ctx), req.agentId);
    },
    resolve(req, ctx) {
      const r = resolveServices(deps, principal(ctx), req.slugs);
      return {
        results: r.results.map((x) => ({ slug: x.slug, service: x.service ? serviceToProto(x.service) : undefined })),
        resolvedCount: r.resolvedCount,
        unresolvedCount: r.unresolvedCount,
      };
    },
    async sign(req, ctx) {
      const result = await signPayment(deps, principal(ctx), {
        agentId: req.agentId,
        type: paymentTypeFromProto(req.type),
        chainId: req.chainId,
        recipientAddress: req.recipientAddress === '' ? undefined : req.recipientAddress,
        amountUsd: req.amountUsd === '' ? undefined : req.amountUsd,
        payload: req.payload,
        dryRun: req.dryRun,
        idempotencyKey: req.idempotencyKey || (ctx.requestHeader.get('idempotency-key') ?? undefined),
      });
      return signResultToProto(result);
    },
    async quote(req, ctx) {
      return quoteResultToProto(await quotePayment(deps, principal(ctx), { url: req.url, agentId: req.agentId, method: req.method }));
    },
    getApprovalStatus(req, ctx) {
      return approvalStatusToProto(getApprovalStatus(deps, principal(ctx), req.id));
    },
  };
}
