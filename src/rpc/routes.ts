import type { DescService } from '@bufbuild/protobuf';
import type { ConnectRouter, ServiceImpl } from '@connectrpc/connect';
import { AdminService } from '../../gen/paypolicy/v1/admin_pb.js';
import { PaymentPolicyService } from '../../gen/paypolicy/v1/payment_policy_pb.js';
import type { AppDeps } from '../app/deps.js';
import { createAdminService } from './adminService.js';
import { createPaymentPolicyService } from './paymentPolicyService.js';
import type { ServiceRegistration } from './unaryHandler.js';

/** Every Connect service with its implementation; gRPC, gRPC-Web and Connect JSON all reach these. */
export function createServices(deps: AppDeps, adminTokenHash: () => Buffer): ServiceRegistration[] {
  return [
    { service: PaymentPolicyService, impl: createPaymentPolicyService(deps) },
    { service: AdminService, impl: createAdminService(deps, adminTokenHash) },
  ];
}

/** Registers `services` on a Connect router. */
export function createRoutes(services: readonly ServiceRegistration[]) {
  return (router: ConnectRouter): void => {
    for (const { service, impl } of services) router.service(service, impl as ServiceImpl<DescService>);
  };
}
