import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createClient, createPayingFetch, type PaypolicyClient } from '@paypolicy/client';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Decision } from '../../gen/paypolicy/v1/admin_pb.js';
import { adminFor, createAgent, type Admin } from '../helpers/admin.js';
import { listAllTransactions, setPolicy } from '../helpers/payments.js';
import {
  MPP_RECIPIENT, PAY_TO, carriesPayment, startFetchPeer, startMppPeer, startPlainPeer, startX402Peer, type MppPeer, type Peer, type PlainPeer, type X402Peer,
} from '../helpers/peers.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { rejection } from './rejection.js';

/**
 * createPayingFetch from the built @paypolicy/client package against the real server on loopback
 * and the reference paywalls: @x402/hono 2.27.0 (v2), the reference v1 verifier, and mppx 0.11.0.
 * Each paywall verifies the payment itself, so a 200 with its body is the proof of payment.
 */

const STRANGER = '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC';
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

let x402: X402Peer;
let plain: PlainPeer;
let mpp: MppPeer;
/** Proxies the x402 paywall's challenge, but answers a payment with a redirect to `elsewhere`. */
let trap: Peer;
/** Another origin: must never see a payment header. */
let elsewhere: Peer;
let loop: Awaited<ReturnType<typeof startEndless402>>;
let s: TestServer;
let admin: Admin;
let client: PaypolicyClient;

/**
 * A hostile paywall: unpaid requests get the x402 paywall's real challenge; a paid one gets 402
 * again and then bytes for as long as anyone reads them (with backpressure, so only the reader
 * decides how much is sent). `hungUp` resolves when the paid request's reader closes.
 */
async function startEndless402(): Promise<{ url: (path: string) => string; host: string; paidRequests: () => number; hungUp: Promise<void>; close: () => Promise<void> }> {
  let paid = 0;
  let hungUp!: () => void;
  const closed = new Promise<void>((resolve) => (hungUp = resolve));
  const server = http.createServer((req, res) => {
    if (req.headers['payment-signature'] === undefined) {
      void fetch(x402.url('/paid'), { headers: { accept: 'application/json' } }).then(async (challenge) => {
        const skip = new Set(['content-length', 'transfer-encoding', 'connection', 'keep-alive']);
        res.writeHead(challenge.status, Object.fromEntries([...challenge.headers].filter(([name]) => !skip.has(name))));
        res.end(Buffer.from(await challenge.arrayBuffer()));
      });
      return;
    }
    paid++;
    res.on('close', hungUp);
    res.writeHead(402, { 'content-type': 'text/plain' });
    const chunk = Buffer.alloc(64 * 1024, 'x');
    const pump = () => {
      while (!res.destroyed && res.write(chunk));
    };
    res.on('drain', pump);
    pump();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const host = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url: (path) => `http://${host}${path}`, host, paidRequests: () => paid, hungUp: closed,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

beforeAll(async () => {
  [x402, plain, mpp, elsewhere] = await Promise.all([
    startX402Peer(), startPlainPeer(), startMppPeer(), startFetchPeer(() => Response.json({ elsewhere: true })),
  ]);
  trap = await startFetchPeer(async (req) => {
    if (req.headers.has('payment-signature')) return new Response(null, { status: 302, headers: { location: elsewhere.url('/sink') } });
    const challenge = await fetch(x402.url('/paid'), { headers: { accept: 'application/json' } });
    return new Response(await challenge.arrayBuffer(), { status: challenge.status, headers: challenge.headers });
  });
  loop = await startEndless402();
  s = await startTestServer({ dev: true, logLevel: 'warn', probeAllowHosts: [x402.host, plain.host, mpp.host, trap.host, elsewhere.host, loop.host] });
  admin = adminFor(s);
  client = createClient({ baseUrl: s.url, apiKey: s.bootstrap.api_key });
});

afterAll(async () => {
  await s?.close();
  await Promise.all([x402, plain, mpp, trap, elsewhere, loop].map((p) => p?.close()));
});

let agents = 0;
async function agentWith(policy: { allowlist: string[]; cap?: string; threshold?: string }): Promise<string> {
  const agentId = await createAgent(admin, s.bootstrap.org_id, `paying-fetch-${++agents}`);
  await setPolicy(admin, agentId, { allowlist: policy.allowlist, capUsd: policy.cap ?? '10', thresholdUsd: policy.threshold ?? '1' });
  return agentId;
}

async function ledger(agentId: string) {
  return (await listAllTransactions(admin, s.bootstrap.org_id, agentId)).map((t) => ({ status: t.status, amount: t.amountUsd, type: t.type }));
}

const payments = (peer: Peer, path: string) => peer.requestsTo(path).filter(carriesPayment);


describe('createPayingFetch', () => {
  test('behavior: x402 v2 paywall: one call pays and returns the paid body, the receipt and the transaction id', async () => {
    const agentId = await agentWith({ allowlist: [PAY_TO] });
    const pay = createPayingFetch({ client, agentId, maxAmountUsd: '0.05' });
    const settled = x402.settlements.length;
    const res = await pay(x402.url('/paid?case=v2'));
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true, path: '/paid' });
    expect(res.payment).toMatchObject({ rail: 'x402', amountUsd: '0.01', idempotent: false, resourceUrl: x402.url('/paid?case=v2') });
    expect(res.payment!.transactionId).toMatch(UUID_RE);
    expect(res.payment!.receipt).toMatchObject({ header: 'payment-response', decoded: { success: true, network: 'eip155:84532' } });
    expect(x402.settlements).toHaveLength(settled + 1);
    expect(payments(x402, '/paid?case=v2')).toHaveLength(1);
    expect(await ledger(agentId)).toEqual([{ status: 'signed', amount: '0.01', type: 'x402' }]);
  });

  test('behavior: x402 v1 paywall (JSON-body challenge, X-PAYMENT) verified by the reference v1 verifier', async () => {
    const agentId = await agentWith({ allowlist: [PAY_TO] });
    const res = await createPayingFetch({ client, agentId, maxAmountUsd: 0.05 })(plain.url('/v1/paid'));
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true, path: '/v1/paid' });
    expect(res.payment).toMatchObject({ rail: 'x402', amountUsd: '0.01', receipt: { header: 'x-payment-response', decoded: { success: true } } });
    expect(plain.v1Verifications.at(-1)).toMatchObject({ isValid: true });
  });

  test('behavior: MPP paywall (mppx): pays with a Tempo credential and exposes Payment-Receipt', async () => {
    const agentId = await agentWith({ allowlist: [MPP_RECIPIENT] });
    const broadcasts = mpp.broadcasts.length;
    const res = await createPayingFetch({ client, agentId, maxAmountUsd: '0.05' })(mpp.url('/item'));
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true, path: '/item' });
    expect(res.payment).toMatchObject({ rail: 'mpp', amountUsd: '0.01', receipt: { header: 'payment-receipt', decoded: { status: 'success' } } });
    expect(mpp.broadcasts).toHaveLength(broadcasts + 1);
    expect(await ledger(agentId)).toEqual([{ status: 'signed', amount: '0.01', type: 'mpp' }]);
  });

  test('error: unexpected_response: a payment header named Cookie (a server that does not check the challenge\'s header) is never sent; the agent\'s cookie stays its own', async () => {
    const agentId = await agentWith({ allowlist: [MPP_RECIPIENT] });
    const sign = async (...args: Parameters<PaypolicyClient['sign']>) => {
      const r = await client.sign(...args);
      return r.outcome === 'signed' && r.payment_header ? { ...r, payment_header: { ...r.payment_header, name: 'Cookie' } } : r;
    };
    const misnaming = { ...client, sign: sign as PaypolicyClient['sign'] };
    const path = '/item?case=cookie';
    const err = await rejection(createPayingFetch({ client: misnaming, agentId, maxAmountUsd: '0.05' })(mpp.url(path), { headers: { cookie: 'session=agent-own' } }));
    expect([err.code, err.message]).toEqual(['unexpected_response', 'paypolicy returned a payment header named Cookie, which no payment protocol uses; it was not sent']);
    // The agent's one request carries its cookie; paypolicy's probes carry none; nothing carries a payment.
    expect(mpp.requestsTo(path).map((r) => r.headers.cookie).filter((c) => c !== undefined)).toEqual(['session=agent-own']);
    expect(mpp.requestsTo(path).filter(carriesPayment)).toEqual([]);
  });

  test('behavior: a URL without a paywall is fetched as is; nothing is quoted or signed', async () => {
    const agentId = await agentWith({ allowlist: [PAY_TO] });
    const res = await createPayingFetch({ client, agentId, maxAmountUsd: '1' })(x402.url('/free'));
    expect([res.status, res.payment]).toEqual([200, null]);
    expect(await res.json()).toEqual({ free: true });
    expect(await ledger(agentId)).toEqual([]);
  });

  test('behavior: above the threshold: 202, approved through AdminService while the fetch waits, then paid', async () => {
    const agentId = await agentWith({ allowlist: [PAY_TO], threshold: '0.005' });
    let polls = 0;
    let approval = '';
    // The real client, with a fetch that approves as soon as the client has seen one pending poll.
    const watching = createClient({
      baseUrl: s.url, apiKey: s.bootstrap.api_key,
      fetch: async (input, init) => {
        const res = await fetch(input, init);
        if (String(input).endsWith('/status') && ++polls === 1) {
          expect(((await res.clone().json()) as { status: string }).status).toBe('pending');
          await admin.client.decideApproval({ id: approval, decision: Decision.APPROVE, note: 'ok' }, admin.auth);
        }
        return res;
      },
    });
    const pay = createPayingFetch({
      client: watching, agentId, maxAmountUsd: '0.05', waitForApproval: { initialIntervalMs: 10 }, onPending: (p) => void (approval = p.approval_request_id),
    });
    const res = await pay(x402.url('/approval'));
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ ok: true, path: '/approval' });
    expect(polls).toBe(2);
    expect(res.payment).toMatchObject({ rail: 'x402', amountUsd: '0.01' });
    expect(await ledger(agentId)).toEqual([{ status: 'signed', amount: '0.01', type: 'x402' }]);
    expect(payments(x402, '/approval')).toHaveLength(1);
  });

  test('behavior: waitForApproval false fails fast with approval_required; the same key collects it after the decision', async () => {
    const agentId = await agentWith({ allowlist: [PAY_TO], threshold: '0.005' });
    const pay = createPayingFetch({ client, agentId, maxAmountUsd: '0.05', waitForApproval: false });
    const err = await rejection(pay(x402.url('/approval?case=fast')));
    expect(err).toMatchObject({ code: 'approval_required', status: 202, retryable: true, reason: expect.stringContaining('exceeds the approval threshold') });
    await admin.client.decideApproval({ id: err.approvalRequestId!, decision: Decision.APPROVE }, admin.auth);
    const res = await pay(x402.url('/approval?case=fast'), { idempotencyKey: err.details!.idempotency_key as string });
    expect(res.status).toBe(200);
    expect(res.payment!.transactionId).toBe(err.transactionId);
  });

  test('error: policy_denied: a recipient off the allowlist ends in a typed error; the paywall never sees a payment', async () => {
    const agentId = await agentWith({ allowlist: [STRANGER] });
    const err = await rejection(createPayingFetch({ client, agentId, maxAmountUsd: '1' })(x402.url('/paid?case=deny')));
    expect(err).toMatchObject({ code: 'policy_denied', status: 403, retryable: false, reason: `Recipient ${PAY_TO.toLowerCase()} is not on the agent's allowlist` });
    expect(err.transactionId).toMatch(UUID_RE);
    expect(payments(x402, '/paid?case=deny')).toEqual([]);
    expect(await ledger(agentId)).toEqual([{ status: 'denied', amount: '0.01', type: 'x402' }]);
  });

  test('behavior: a second identical call with the same idempotency key does not pay twice', async () => {
    const agentId = await agentWith({ allowlist: [PAY_TO] });
    const pay = createPayingFetch({ client, agentId, maxAmountUsd: '1' });
    const first = await pay(x402.url('/paid?case=twice'), { idempotencyKey: 'order-7' });
    const again = await pay(x402.url('/paid?case=twice'), { idempotencyKey: 'order-7' });
    expect([first.status, again.status]).toEqual([200, 200]);
    expect(again.payment).toMatchObject({ idempotent: true, transactionId: first.payment!.transactionId });
    // One ledger row, one authorization: the paywall got the same signed header twice.
    expect(await ledger(agentId)).toEqual([{ status: 'signed', amount: '0.01', type: 'x402' }]);
    const sent = payments(x402, '/paid?case=twice').map((r) => r.headers['payment-signature']);
    expect(sent).toHaveLength(2);
    expect(sent[1]).toBe(sent[0]);
  });

  test('error: cross_origin_redirect: a paid request redirected to another origin is not followed; that origin never sees the header', async () => {
    const agentId = await agentWith({ allowlist: [PAY_TO] });
    const err = await rejection(createPayingFetch({ client, agentId, maxAmountUsd: '1' })(trap.url('/paid')));
    expect(err).toMatchObject({ code: 'cross_origin_redirect', details: { location: elsewhere.origin } });
    expect(err.transactionId).toMatch(UUID_RE);
    expect(payments(trap, '/paid')).toHaveLength(1);
    expect(elsewhere.requests).toEqual([]);
  });

  test('behavior: an unpaid redirect to another origin is followed, and that origin (the challenge issuer) alone is paid', async () => {
    const agentId = await agentWith({ allowlist: [PAY_TO] });
    const hop = await startFetchPeer(() => new Response(null, { status: 302, headers: { location: x402.url('/paid?case=hop') } }));
    try {
      const paid = await createPayingFetch({ client, agentId, maxAmountUsd: '1' })(hop.url('/start'), { headers: { authorization: 'Bearer agent-secret' } });
      expect(paid.status).toBe(200);
      expect(paid.payment!.resourceUrl).toBe(x402.url('/paid?case=hop'));
      expect(hop.requests.filter(carriesPayment)).toEqual([]);
      // Credentials meant for the first origin are dropped when a redirect leaves it, in the paid
      // request too (the agent's first request, paypolicy's quote and sign probes, the payment).
      const seen = x402.requestsTo('/paid?case=hop');
      expect(seen.map((r) => [r.headers.authorization, carriesPayment(r)])).toEqual([[undefined, false], [undefined, false], [undefined, false], [undefined, true]]);
    } finally {
      await hop.close();
    }
  });

  test('error: max_amount_exceeded: a price above maxAmountUsd is refused before anything is signed', async () => {
    const agentId = await agentWith({ allowlist: [PAY_TO] });
    x402.setPrice('/changing', '$0.50');
    const err = await rejection(createPayingFetch({ client, agentId, maxAmountUsd: '0.1' })(x402.url('/changing?case=max')));
    expect(err).toMatchObject({ code: 'max_amount_exceeded', status: 0, details: { amount_usd: '0.5', max_amount_usd: '0.1' } });
    expect(err.transactionId).toBeUndefined();
    expect(await ledger(agentId)).toEqual([]);
    expect(payments(x402, '/changing?case=max')).toEqual([]);
  });

  test('error: policy_denied: a price that rose between quote and sign is refused by paypolicy; nothing signed, held or sent', async () => {
    const agentId = await agentWith({ allowlist: [PAY_TO] });
    const url = x402.url('/changing?case=rise');
    x402.setPrice('/changing', '$0.01');
    expect((await client.quote({ url, agent_id: agentId })).amount_usd).toBe(0.01); // cached for 60 s
    x402.setPrice('/changing', '$0.50');
    const err = await rejection(createPayingFetch({ client, agentId, maxAmountUsd: '0.1' })(url));
    expect(err).toMatchObject({ code: 'policy_denied', status: 403, reason: "Price of $0.5 exceeds the request's max_amount_usd of $0.1" });
    expect(err.transactionId).toMatch(UUID_RE);
    expect(await ledger(agentId)).toEqual([{ status: 'denied', amount: '0.5', type: 'x402' }]);
    expect((await client.spendStatus(agentId)).committed_usd).toBe('0');
    expect(payments(x402, '/changing?case=rise')).toEqual([]);
  });

  test('error: payment_rejected: a paywall that answers the payment with another 402 and an endless body is read only as far as the error quotes it; paid once', async () => {
    const agentId = await agentWith({ allowlist: [PAY_TO] });
    const url = loop.url('/paid');
    const err = await rejection(createPayingFetch({ client, agentId, maxAmountUsd: '1' })(url));
    expect(err).toMatchObject({ code: 'payment_rejected', status: 402 });
    expect((err.details as { paywall_answer: string }).paywall_answer).toBe('x'.repeat(500));
    await loop.hungUp; // the client stopped reading and closed the stream
    expect(loop.paidRequests()).toBe(1);
    expect(await ledger(agentId)).toEqual([{ status: 'signed', amount: '0.01', type: 'x402' }]);
  });

  test('error: an aborted signal stops the call with the signal\'s reason', async () => {
    const agentId = await agentWith({ allowlist: [PAY_TO] });
    const controller = new AbortController();
    controller.abort(new Error('agent gave up'));
    await expect(createPayingFetch({ client, agentId, maxAmountUsd: '1' })(x402.url('/paid'), { signal: controller.signal })).rejects.toThrow(/aborted|agent gave up/);
    expect(await ledger(agentId)).toEqual([]);
  });
});
