import net from 'node:net';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { adminFor, createTenant, type Tenant } from '../helpers/admin.js';
import { holdSigning, type HeldSigning } from '../helpers/holdSigning.js';
import { postSign, setPolicy } from '../helpers/payments.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * An organization past its share of the agent gate is refused early: before the body is read, and
 * the HTTP/1.1 connection is not read again until Retry-After, as a full gate's refusals are.
 * Refused only after authentication and the body, with its connection free to send again at once, a
 * flood from one organization (2,000 connections ignoring Retry-After in the bench) would get
 * refusals as fast as it could send them, the event loop would serve nothing else, and /healthz
 * would take 12 s (0 payments admitted, against 18,549 without the share).
 */
const RECIPIENT = '0x6666666666666666666666666666666666666666';

describe('an organization flooding past its share', () => {
  let s: TestServer;
  let a: Tenant;
  let b: Tenant;
  let signing: HeldSigning;
  beforeAll(async () => {
    s = await startTestServer({ logLevel: 'warn', limits: { maxInFlight: 4, maxQueueMs: 60_000 } });
    const admin = adminFor(s);
    a = await createTenant(admin, 'flood-a');
    b = await createTenant(admin, 'flood-b');
    for (const t of [a, b]) {
      await setPolicy(admin, t.agentId, { allowlist: [RECIPIENT], capUsd: '100', thresholdUsd: '100' });
      await admin.client.provisionTreasury({ orgId: t.orgId }, admin.auth);
    }
    signing = holdSigning(s.app.deps.signer, (job) => job.orgId === a.orgId);
  });
  afterAll(() => s?.close());

  const body = (t: Tenant) => JSON.stringify({ agent_id: t.agentId, type: 'eip3009', chain_id: 8453, recipient_address: RECIPIENT, amount_usd: '1' });

  test('behavior: refused before its body is read, and its keep-alive connection is held for Retry-After', async () => {
    const held = [1, 2, 3].map((i) => postSign(s.url, a.apiKey, JSON.parse(body(a)), `held-${i}`));
    await signing.reached(3);
    // A client that ignores Retry-After: on one keep-alive connection, the next request as soon
    // as an answer arrives.
    const { port } = new URL(s.url);
    const socket = net.connect(Number(port), '127.0.0.1');
    // A failed assertion below leaves the socket open until afterAll stops the server: its reset
    // then must not surface as an unhandled error of the whole run.
    socket.on('error', () => {});
    await new Promise<void>((r) => socket.once('connect', () => r()));
    const one = `POST /api/sign HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${a.apiKey}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body(a))}\r\n\r\n${body(a)}`;
    let received = '';
    let answers = 0;
    socket.on('data', (d: Buffer) => {
      received += d.toString('latin1');
      // Each answer is a 503 with a small JSON body ending in "}": send the next at once.
      const done = received.split('"code":"overloaded"}').length - 1;
      while (answers < done) {
        answers++;
        socket.write(one);
      }
    });
    socket.write(one);
    await new Promise((r) => setTimeout(r, 600));
    expect(answers).toBe(1);
    expect(received).toMatch(/^HTTP\/1\.1 503 /);
    expect(received).toMatch(/retry-after: 1\r\n/i);
    expect(received).toContain('for this organization');
    // Meanwhile another organization is served.
    const other = await postSign(s.url, b.apiKey, JSON.parse(body(b)), 'other');
    expect(other.status, other.text).toBe(200);
    socket.destroy();
    signing.release();
    for (const r of await Promise.all(held)) expect(r.status, r.text).toBe(200);
  });
});
