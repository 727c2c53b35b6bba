import { Code, ConnectError } from '@connectrpc/connect';
import { createConnectTransport, createGrpcTransport } from '@connectrpc/connect-node';
import { createPaymentPolicyClient, ErrorInfoSchema, PaymentType, SignOutcome } from '@paypolicy/client/connect';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { adminFor, createAgent } from '../helpers/admin.js';
import { setPolicy } from '../helpers/payments.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * The Connect/gRPC entry of @paypolicy/client (descriptors generated from proto/ at build time)
 * against the real server: gRPC over h2c and Connect JSON over HTTP/1.1, with the API key added
 * by the client, business outcomes as responses and failures as ConnectErrors with ErrorInfo.
 */

const RECIPIENT = '0x2222222222222222222222222222222222222222';

let s: TestServer;

beforeAll(async () => {
  s = await startTestServer({ logLevel: 'warn' });
});

async function newAgent(name: string): Promise<string> {
  const admin = adminFor(s);
  const agentId = await createAgent(admin, s.bootstrap.org_id, name);
  await setPolicy(admin, agentId, { allowlist: [RECIPIENT], capUsd: '10', thresholdUsd: '1' });
  return agentId;
}
afterAll(async () => s?.close());

const transports = {
  grpc: () => createGrpcTransport({ baseUrl: s.url }),
  connect: () => createConnectTransport({ baseUrl: s.url, httpVersion: '1.1' }),
};

describe('createPaymentPolicyClient', () => {
  for (const [name, make] of Object.entries(transports)) {
    test(`behavior: ${name}: ping and sign with the API key; pending and denied are outcomes`, async () => {
      const agentId = await newAgent(`connect-${name}`);
      const c = createPaymentPolicyClient(make(), s.bootstrap.api_key);
      expect(await c.ping({ agentId })).toMatchObject({ ok: true, agentId, orgId: s.bootstrap.org_id });
      const sign = (amount: string) => c.sign({ agentId, type: PaymentType.EIP3009, chainId: 84532, recipientAddress: RECIPIENT, amountUsd: amount });
      const signed = await sign('0.5');
      expect(signed.outcome).toBe(SignOutcome.ALLOWED);
      expect(signed.signature).toMatch(/^0x[0-9a-f]{130}$/);
      expect((await sign('5')).outcome).toBe(SignOutcome.PENDING_APPROVAL);
      expect((await sign('50')).outcome).toBe(SignOutcome.DENIED);
    });

    test(`error: ${name}: a wrong key is Unauthenticated with the ErrorInfo detail`, async () => {
      const c = createPaymentPolicyClient(make(), `ak_test_${'0'.repeat(48)}`);
      const err = await c.ping({ agentId: s.bootstrap.agent_id }).then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(ConnectError);
      const ce = err as ConnectError;
      expect(ce.code).toBe(Code.Unauthenticated);
      expect(ce.findDetails(ErrorInfoSchema)[0]?.reason).toBe('unauthenticated');
    });
  }
});
