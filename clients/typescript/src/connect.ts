import { createClient, type Client, type Transport } from '@connectrpc/connect';
import { PaymentPolicyService } from './gen/paypolicy/v1/payment_policy_pb.js';

/*
 * The Connect/gRPC variant for internal services: the same operations as the REST client, as
 * `paypolicy.v1.PaymentPolicyService` (descriptors generated from the repository's proto/ when
 * the package is built). Bring a transport: `createGrpcTransport` or `createConnectTransport`
 * from @connectrpc/connect-node, or `createConnectTransport` from @connectrpc/connect-web.
 * Business outcomes of Sign (pending approval, denial) are responses with `outcome` set; other
 * failures are ConnectErrors whose `x-error-code` metadata and `paypolicy.v1.ErrorInfo` detail
 * carry the same code as REST.
 */

export { PaymentPolicyService };
export * from './gen/paypolicy/v1/payment_policy_pb.js';
export { ErrorInfoSchema, type ErrorInfo } from './gen/paypolicy/v1/error_pb.js';
export type { ServiceRecord, PaymentMethod, ServiceEndpoint } from './gen/paypolicy/v1/registry_pb.js';

/**
 * A PaymentPolicyService client over `transport`, authenticated with an organization API key.
 * The transport must not already add another Authorization header.
 */
export function createPaymentPolicyClient(transport: Transport, apiKey: string): Client<typeof PaymentPolicyService> {
  // The key stays in this closure; every call, unary or streaming, carries it.
  const withKey = (header: HeadersInit | undefined) => {
    const h = new Headers(header);
    h.set('authorization', `Bearer ${apiKey}`);
    return h;
  };
  const authenticated: Transport = {
    unary: (method, signal, timeoutMs, header, input, contextValues) => transport.unary(method, signal, timeoutMs, withKey(header), input, contextValues),
    stream: (method, signal, timeoutMs, header, input, contextValues) => transport.stream(method, signal, timeoutMs, withKey(header), input, contextValues),
  };
  return createClient(PaymentPolicyService, authenticated);
}
