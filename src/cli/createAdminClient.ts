import { createClient, type Client, type Interceptor } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { AdminService } from '../../gen/paypolicy/v1/admin_pb.js';

/** Promise client of the AdminService. */
export type AdminClient = Client<typeof AdminService>;

/** No admin call does long work; a hung server should not hang an operator's shell. */
const TIMEOUT_MS = 30_000;

/** Connect JSON client over HTTP/1.1; the admin token lives only in the interceptor's closure. */
export function createAdminClient(baseUrl: string, adminToken: string): AdminClient {
  const authorize: Interceptor = (next) => (req) => {
    req.header.set('authorization', `Bearer ${adminToken}`);
    return next(req);
  };
  const transport = createConnectTransport({
    baseUrl, httpVersion: '1.1', useBinaryFormat: false, interceptors: [authorize], defaultTimeoutMs: TIMEOUT_MS,
  });
  return createClient(AdminService, transport);
}
