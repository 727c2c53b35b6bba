import type { ServiceImpl, HandlerContext } from '@connectrpc/connect';
import { PaymentPolicyService, PaymentType, type SignRequest } from '../../gen/paypolicy/v1/payment_policy_pb.js';
import type { AppDeps } from '../app/deps.js';
import { authenticateApiKey } from '../app/accounts/apiKeys.js';
import { pingAgent } from '../app/organizations/ping.js';
import { resolveServices } from '../app/registry/registry.js';
import type { ApiKeyPrincipal } from '../domain/types.js';
import { agentSpendToProto, approvalStatusToProto, pingResultToProto, quoteResultToProto, resolveResultToProto, signResultToProto } from '../protoMapping/messages.js';
import { paymentType } from '../protoMapping/enums.js';
import { SIGN_PAYLOAD_MEMBERS } from '../protoMapping/signPayload.js';
import { invalidArgument } from '../domain/errors.js';
import { idempotencyKeyOf } from '../domain/paymentRequest.js';
import { quotePayment } from '../app/payments/quote.js';
import { signPayment } from '../app/payments/pipeline.js';
import { getApprovalStatus } from '../app/approvals/approvals.js';
import { getAgentSpend } from '../app/payments/agentSpend.js';
import { apiKeyPrincipalKey } from './context.js';

/** Agent-facing RPCs: authenticate, call one use case, map the result. Nothing else. */
export function createPaymentPolicyService(deps: AppDeps): ServiceImpl<typeof PaymentPolicyService> {
  // Authenticated once per call: admission (server/server.ts) leaves the principal in the context; a key
  // that did not authenticate there is authenticated here again and gets its 401.
  const principal = async (ctx: HandlerContext): Promise<ApiKeyPrincipal> =>
    ctx.values.get(apiKeyPrincipalKey) ?? authenticateApiKey(deps, ctx.requestHeader.get('authorization'));

  return {
    async ping(req, ctx) {
      return pingResultToProto(await pingAgent(deps, await principal(ctx), req.agentId));
    },
    async resolve(req, ctx) {
      return resolveResultToProto(await resolveServices(deps, await principal(ctx), req.slugs));
    },
    async sign(req, ctx) {
      const { type, payload } = typeAndPayload(req);
      const result = await signPayment(deps, await principal(ctx), {
        agentId: req.agentId,
        type,
        chainId: req.chainId,
        recipientAddress: req.recipientAddress === '' ? undefined : req.recipientAddress,
        amountUsd: req.amountUsd === '' ? undefined : req.amountUsd,
        payload,
        dryRun: req.dryRun,
        idempotencyKey: idempotencyKeyOf(req.idempotencyKey, ctx.requestHeader.get('idempotency-key') ?? undefined),
      });
      return signResultToProto(result);
    },
    async quote(req, ctx) {
      return quoteResultToProto(await quotePayment(deps, await principal(ctx), { url: req.url, agentId: req.agentId, method: req.method }));
    },
    async getApprovalStatus(req, ctx) {
      return approvalStatusToProto(await getApprovalStatus(deps, await principal(ctx), req.id));
    },
    async getAgentSpend(req, ctx) {
      return agentSpendToProto(await getAgentSpend(deps, await principal(ctx), req.agentId));
    },
  };
}

/**
 * The request's type and its payload as the sign use case reads it: the oneof member's fields under
 * their proto names, which are the REST payload's keys (test/contract.test.ts holds them equal).
 * UNSPECIFIED takes the payload's type, else the wire default; a payload of another type is refused.
 */
function typeAndPayload(req: SignRequest): { type: string | undefined; payload: Record<string, unknown> | undefined } {
  const named = paymentType.fromProto(req.type);
  if (named === undefined && req.type !== PaymentType.UNSPECIFIED) return { type: `unknown(${req.type})`, payload: undefined };
  const p = req.payload;
  if (p.case === undefined) return { type: named, payload: undefined };
  const member = SIGN_PAYLOAD_MEMBERS.find((f) => f.localName === p.case)!;
  if (named !== undefined && named !== member.name) {
    throw invalidArgument(`payload ${member.name} does not match type ${named}`, 'payload_type_mismatch');
  }
  const value = p.value as unknown as Record<string, unknown>;
  const payload: Record<string, unknown> = {};
  for (const f of member.message?.fields ?? []) {
    const v = value[f.localName];
    if (v === undefined || v === '') continue;
    payload[f.name] = typeof v === 'bigint' ? v.toString() : v;
  }
  return { type: member.name, payload };
}
