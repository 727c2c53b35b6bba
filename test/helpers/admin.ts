import type { MessageInitShape } from '@bufbuild/protobuf';
import type { Client } from '@connectrpc/connect';
import { AdminService, ApiKeyMode } from '../../gen/paypolicy/v1/admin_pb.js';
import type { ServiceRecordSchema } from '../../gen/paypolicy/v1/registry_pb.js';
import { connectClient } from './clients.js';
import type { TestServer } from './server.js';

/** An AdminService client over Connect JSON plus the call options carrying the admin token. */
export type Admin = {
  client: Client<typeof AdminService>;
  /** Call options with `Authorization: Bearer <admin token>`. */
  auth: { headers: Record<string, string> };
};

/** Admin client for a test server, authenticated with its bootstrap admin token. */
export function adminFor(s: TestServer): Admin {
  return {
    client: connectClient(AdminService, s.url),
    auth: { headers: { authorization: `Bearer ${s.bootstrap.admin_token}` } },
  };
}

/** A second tenant: an organization with one API key and one active agent. */
export type Tenant = { orgId: string; apiKey: string; keyId: string; agentId: string; agentName: string };

/** Creates an organization, an API key of the given mode and an agent through the AdminService. */
export async function createTenant(admin: Admin, name: string, mode: 'live' | 'test' = 'test'): Promise<Tenant> {
  const org = await admin.client.createOrganization({ name }, admin.auth);
  const orgId = org.organization!.id;
  const key = await admin.client.createApiKey(
    { orgId, mode: mode === 'live' ? ApiKeyMode.LIVE : ApiKeyMode.TEST, label: `${name}-key` },
    admin.auth,
  );
  const agentName = `${name}-agent`;
  const agent = await admin.client.createAgent({ orgId, name: agentName }, admin.auth);
  return { orgId, apiKey: key.plaintextKey, keyId: key.apiKey!.id, agentId: agent.agent!.id, agentName };
}

/** Creates an extra API key for an existing organization; returns its plaintext and id. */
export async function createKey(admin: Admin, orgId: string, mode: 'live' | 'test', label = 'extra'): Promise<{ plaintext: string; id: string }> {
  const r = await admin.client.createApiKey({ orgId, mode: mode === 'live' ? ApiKeyMode.LIVE : ApiKeyMode.TEST, label }, admin.auth);
  return { plaintext: r.plaintextKey, id: r.apiKey!.id };
}

/** Creates an extra agent in an existing organization; returns its id. */
export async function createAgent(admin: Admin, orgId: string, name: string): Promise<string> {
  const r = await admin.client.createAgent({ orgId, name }, admin.auth);
  return r.agent!.id;
}

/** Registers (or replaces) a service record; returns the stored record with its server id. */
export async function upsertService(admin: Admin, service: MessageInitShape<typeof ServiceRecordSchema>) {
  const r = await admin.client.upsertService({ service }, admin.auth);
  return r.service!;
}
