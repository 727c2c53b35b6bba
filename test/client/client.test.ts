import { createClient, createPayingFetch, usdToMicros, type PaypolicyClient } from '@paypolicy/client';
import { getAddress } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Decision } from '../../gen/paypolicy/v1/admin_pb.js';
import { adminFor, createAgent, type Admin } from '../helpers/admin.js';
import { listAllTransactions, recoverAuthorizationSigner, setPolicy, type WireAuthorization } from '../helpers/payments.js';
import { closedPort, startFetchPeer, type Peer } from '../helpers/peers.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { rejection } from './rejection.js';

/**
 * The REST client of @paypolicy/client (built package) against the real server: typed results
 * and errors, Idempotency-Keys that survive retries, retries only where safe, waitForApproval.
 * Lost answers are made real: the request reaches the server and is fully processed, and only
 * then does the client's transport fail, as when a connection drops before the response.
 */

const RECIPIENT = '0x2222222222222222222222222222222222222222';
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const CLIENT_KEY_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

let s: TestServer;
let admin: Admin;
let client: PaypolicyClient;

beforeAll(async () => {
  s = await startTestServer({ logLevel: 'warn' });
  admin = adminFor(s);
  client = createClient({ baseUrl: s.url, apiKey: s.bootstrap.api_key, retry: { baseDelayMs: 5 } });
});
afterAll(async () => s?.close());

let agents = 0;
async function agent(threshold = '1'): Promise<string> {
  const agentId = await createAgent(admin, s.bootstrap.org_id, `client-${++agents}`);
  await setPolicy(admin, agentId, { allowlist: [RECIPIENT], capUsd: '10', thresholdUsd: threshold });
  return agentId;
}

const direct = (agentId: string, amount: string) => ({ agent_id: agentId, type: 'eip3009' as const, chain_id: 84532, recipient_address: RECIPIENT, amount_usd: amount });

/** A fetch that records every call to /api/sign (and its Idempotency-Key) and can lose answers. */
function recordingFetch(loseAnswers = 0) {
  const calls: Array<{ path: string; key: string | null }> = [];
  let lose = loseAnswers;
  const impl: typeof fetch = async (input, init) => {
    const path = new URL(String(input)).pathname;
    calls.push({ path, key: new Headers(init?.headers).get('idempotency-key') });
    const res = await fetch(input, init);
    await res.clone().arrayBuffer(); // the server has answered in full
    if (path === '/api/sign' && lose > 0) {
      lose--;
      throw new TypeError('fetch failed', { cause: new Error('socket hang up') });
    }
    return res;
  };
  return { impl, calls };
}


describe('createClient', () => {
  test('behavior: ping, resolve, spendStatus and dryRun return the wire bodies', async () => {
    const agentId = await agent();
    expect(await client.ping(agentId)).toMatchObject({ ok: true, agent_id: agentId, org_id: s.bootstrap.org_id, status: 'active' });
    expect(await client.resolve(['nope'])).toEqual({ results: { nope: null }, resolvedCount: 0, unresolvedCount: 1 });
    expect(await client.spendStatus(agentId)).toMatchObject({
      agent_id: agentId, spend_cap_usd: '10', remaining_usd: '10',
      limits: [{ window: '24h', scope: 'agent', max_usd: '10', spent_usd: '0', remaining_usd: '10', count: 0 }],
    });
    expect(await client.dryRun(direct(agentId, '5'))).toMatchObject({ dry_run: true, status: 'pending_approval', approval_threshold_usd: 1 });
    expect(await client.dryRun(direct(agentId, '50'))).toMatchObject({ dry_run: true, status: 'denied' });
  });

  test('behavior: sign 200 gives the signed payment; the signature recovers to the treasury', async () => {
    const agentId = await agent();
    const r = await client.sign(direct(agentId, '0.5'));
    expect(r).toMatchObject({ outcome: 'signed', agent_id: agentId, cost_usd: '0.5', idempotent: false, transaction_id: expect.stringMatching(UUID_RE) });
    // The key is the client's own (crypto.randomUUID, version 4); the server's ids are version 7.
    expect(r.idempotencyKey).toMatch(CLIENT_KEY_RE);
    if (r.outcome !== 'signed') throw new Error('unreachable');
    expect(await recoverAuthorizationSigner(r.signature as `0x${string}`, r.authorization as WireAuthorization)).toBe(getAddress(s.bootstrap.treasury_address));
  });

  test('behavior: an answer lost after the server signed is retried with the same Idempotency-Key: one payment, replayed', async () => {
    const agentId = await agent();
    const { impl, calls } = recordingFetch(1);
    const lossy = createClient({ baseUrl: s.url, apiKey: s.bootstrap.api_key, fetch: impl, retry: { baseDelayMs: 5 } });
    const r = await lossy.sign(direct(agentId, '0.25'));
    expect(r).toMatchObject({ outcome: 'signed', idempotent: true });
    expect(calls).toHaveLength(2);
    expect(calls[1]!.key).toBe(calls[0]!.key);
    expect(calls[0]!.key).toBe(r.idempotencyKey);
    const rows = await listAllTransactions(admin, s.bootstrap.org_id, agentId);
    expect(rows.map((t) => [t.status, t.amountUsd])).toEqual([['signed', '0.25']]);
  });

  test('error: network_error after the retries when nothing answers; retryable', async () => {
    const port = await closedPort();
    const dead = createClient({ baseUrl: `http://127.0.0.1:${port}`, apiKey: 'ak_test_x', retry: { retries: 2, baseDelayMs: 1 } });
    const err = await rejection(dead.ping('agt_whatever1'));
    expect(err).toMatchObject({ code: 'network_error', status: 0, retryable: true });
    expect(err.message).not.toContain('ak_test_x');
  });

  test('error: policy_denied (403) is typed, carries reason and transaction id, and is never retried', async () => {
    const agentId = await agent();
    const { impl, calls } = recordingFetch();
    const c = createClient({ baseUrl: s.url, apiKey: s.bootstrap.api_key, fetch: impl });
    const err = await rejection(c.sign(direct(agentId, '11')));
    expect(err).toMatchObject({ code: 'policy_denied', status: 403, retryable: false, reason: expect.stringContaining('Spend cap of $10 per 24 hours would be exceeded') });
    // The rule that fired, for programs: its kind, window and limit.
    expect(err.details).toMatchObject({ rule: { kind: 'spend_cap', window: '24h', scope: 'agent', limit: '10' } });
    expect(err.transactionId).toMatch(UUID_RE);
    expect(calls).toHaveLength(1);
  });

  test('error: idempotency_key_reused (409) is the server\'s code, not retried', async () => {
    const agentId = await agent();
    await client.sign(direct(agentId, '0.1'), { idempotencyKey: 'same-key' });
    const { impl, calls } = recordingFetch();
    const c = createClient({ baseUrl: s.url, apiKey: s.bootstrap.api_key, fetch: impl });
    const err = await rejection(c.sign(direct(agentId, '0.2'), { idempotencyKey: 'same-key' }));
    expect(err).toMatchObject({ code: 'idempotency_key_reused', status: 409, retryable: false });
    expect(calls).toHaveLength(1);
  });

  test('error: invalid input and unknown records keep the server\'s text and code; 401 unauthenticated', async () => {
    const agentId = await agent();
    expect(await rejection(client.sign({ agent_id: agentId, type: 'eip3009', amount_usd: '1' }))).toMatchObject({ status: 400, code: 'recipient_required' });
    expect(await rejection(client.spendStatus('agt_00000000000000000000000000000000'))).toMatchObject({ status: 404, code: 'agent_not_found', message: 'Agent not found' });
    expect(await rejection(client.approvalStatus('00000000-0000-4000-8000-000000000000'))).toMatchObject({ status: 404, code: 'not_found' });
    const stranger = createClient({ baseUrl: s.url, apiKey: `ak_test_${'0'.repeat(48)}` });
    expect(await rejection(stranger.ping(agentId))).toMatchObject({ status: 401, code: 'unauthenticated' });
  });

  test('behavior: sign with waitForApproval polls, and collects the payment with the same key once approved', async () => {
    const agentId = await agent('0.5');
    let polls = 0;
    let approvalId = '';
    const c = createClient({
      baseUrl: s.url, apiKey: s.bootstrap.api_key,
      fetch: async (input, init) => {
        const res = await fetch(input, init);
        if (String(input).endsWith('/api/sign') && res.status === 202) approvalId = ((await res.clone().json()) as { approval_request_id: string }).approval_request_id;
        // Decided by a human after the client has seen it pending twice.
        if (String(input).endsWith('/status') && ++polls === 2) await admin.client.decideApproval({ id: approvalId, decision: Decision.APPROVE }, admin.auth);
        return res;
      },
    });
    const r = await c.sign(direct(agentId, '2'), { waitForApproval: { initialIntervalMs: 5 } });
    expect(r).toMatchObject({ outcome: 'signed', cost_usd: '2' });
    expect(polls).toBe(3);
    const rows = await listAllTransactions(admin, s.bootstrap.org_id, agentId);
    expect(rows.map((t) => t.status)).toEqual(['signed']);
    expect(rows[0]!.id).toBe(r.transaction_id);
  });

  test('error: policy_denied after a human denies while waitForApproval waits', async () => {
    const agentId = await agent('0.5');
    const pending = await client.sign(direct(agentId, '2'));
    if (pending.outcome !== 'pending_approval') throw new Error(`expected pending, got ${pending.outcome}`);
    expect(pending).toMatchObject({ status: 'pending_approval', approval_request_id: expect.stringMatching(UUID_RE) });
    await admin.client.decideApproval({ id: pending.approval_request_id, decision: Decision.DENY, note: 'no' }, admin.auth);
    const err = await rejection(client.waitForApproval(pending, { initialIntervalMs: 5 }));
    expect(err).toMatchObject({ code: 'policy_denied', status: 403, transactionId: pending.transaction_id });
  });

  test('error: approval_timeout while still pending; an abort ends the wait with the signal\'s reason', async () => {
    const agentId = await agent('0.5');
    const pending = await client.sign(direct(agentId, '2'));
    if (pending.outcome !== 'pending_approval') throw new Error('expected pending');
    const err = await rejection(client.waitForApproval(pending, { timeoutMs: 30, initialIntervalMs: 5 }));
    expect(err).toMatchObject({ code: 'approval_timeout', retryable: true, approvalRequestId: pending.approval_request_id });
    const controller = new AbortController();
    const waiting = client.waitForApproval(pending, { initialIntervalMs: 60_000, signal: controller.signal });
    controller.abort(new Error('stop waiting'));
    await expect(waiting).rejects.toThrow('stop waiting');
  });
});

describe('retries on 503 overloaded', () => {
  let busy: TestServer;
  let slow: Peer;
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));

  beforeAll(async () => {
    slow = await startFetchPeer(async () => {
      await held;
      return new Response('no challenge', { status: 200 });
    });
    busy = await startTestServer({ dev: true, logLevel: 'warn', probeAllowHosts: [slow.host], limits: { maxInFlight: 1 } });
  });
  afterAll(async () => {
    release();
    await busy?.close();
    await slow?.close();
  });

  test('behavior: a 503 overloaded is retried after Retry-After (capped) and then answered', async () => {
    const statuses: number[] = [];
    const c = createClient({
      baseUrl: busy.url, apiKey: busy.bootstrap.api_key, retry: { maxDelayMs: 20 },
      fetch: async (input, init) => {
        const res = await fetch(input, init);
        statuses.push(res.status);
        // The first refusal frees the slot the slow quote holds, so the retry gets in.
        if (res.status === 503) release();
        return res;
      },
    });
    const hog = createClient({ baseUrl: busy.url, apiKey: busy.bootstrap.api_key, retry: false });
    const hogging = hog.quote({ url: slow.url('/slow'), agent_id: busy.bootstrap.agent_id }).catch((e: unknown) => e);
    await new Promise<void>((resolve) => {
      const check = () => (slow.requests.length > 0 ? resolve() : setImmediate(check));
      check();
    });
    expect(await c.ping(busy.bootstrap.agent_id)).toMatchObject({ ok: true });
    expect(statuses).toEqual([503, 200]);
    expect(await hogging).toMatchObject({ status: 400, message: 'URL did not return a payment challenge (status 200)' });
  });
});

describe('USD amounts given to the client', () => {
  test('error: text with surrounding whitespace is refused, as the server refuses it', () => {
    for (const text of [' 1', '1 ', '\t0.5', '0.5\n']) {
      expect(() => usdToMicros(text, 'maxAmountUsd'), JSON.stringify(text)).toThrow(/maxAmountUsd must be/);
      expect(() => createPayingFetch({ client, agentId: 'agt_x', maxAmountUsd: text }), JSON.stringify(text)).toThrow(/maxAmountUsd must be/);
    }
    expect(usdToMicros('0.5', 'x')).toBe(500_000n);
  });
});
