import type { ConnectRouter } from '@connectrpc/connect';
import { AdminService } from '../../gen/paypolicy/v1/admin_pb.js';
import { PaymentPolicyService } from '../../gen/paypolicy/v1/payment_policy_pb.js';
import type { AppDeps } from '../app/deps.js';
import { createAdminService } from './adminService.js';
import { createPaymentPolicyService } from './paymentPolicyService.js';

/** Registers every Connect service; gRPC, gRPC-Web and Connect JSON all reach these. */
export function createRoutes(deps: AppDeps, adminTokenHash: () => Buffer) {
  return (router: ConnectRouter): void => {
    router.service(PaymentPolicyService, createPaymentPolicyService(deps));
    router.service(AdminService, createAdminService(deps, adminTokenHash));
  };
}
