import type { ServiceImpl, HandlerContext } from '@connectrpc/connect';
import { PaymentPolicyService } from '../../gen/paypolicy/v1/payment_policy_pb.js';
import { authenticateApiKey } from '../auth/credentials.js';
import type { AppDeps } from '../app/deps.js';
import { pingAgent } from '../app/ping.js';
import { resolveServices } from '../app/registry.js';
import { DomainError } from '../domain/errors.js';
import type { Principal } from '../domain/types.js';
import { serviceToProto } from './mappers.js';

/** Agent-facing RPCs: authenticate, call one use case, map the result. Nothing else. */
export function createPaymentPolicyService(deps: AppDeps): ServiceImpl<typeof PaymentPolicyService> {
  const principal = (ctx: HandlerContext): Principal => authenticateApiKey(deps.store.apiKeys, ctx.requestHeader.get('authorization'));
  const notYet = (ctx: HandlerContext): never => {
    principal(ctx);
    throw new DomainError('unimplemented', 'Not implemented yet');
  };
  return {
    ping(req, ctx) {
      return pingAgent(deps, principal(ctx), req.agentId);
    },
    resolve(req, ctx) {
      principal(ctx);
      const r = resolveServices(deps, req.slugs);
      return {
        results: r.results.map((x) => ({ slug: x.slug, service: x.service ? serviceToProto(x.service) : undefined })),
        resolvedCount: r.resolvedCount,
        unresolvedCount: r.unresolvedCount,
      };
    },
    sign(_req, ctx) {
      return notYet(ctx);
    },
    quote(_req, ctx) {
      return notYet(ctx);
    },
    getApprovalStatus(_req, ctx) {
      return notYet(ctx);
    },
  };
}
