import { Code } from '@connectrpc/connect';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { decodeFunctionData, getAddress, type Address, type Hex } from 'viem';
import { Abis, Transaction } from 'viem/tempo';
import { Decision } from '../gen/paypolicy/v1/admin_pb.js';
import { approvalStatus } from '../src/protoMapping/enums.js';
import { adminFor, createAgent, upsertService, type Admin } from './helpers/admin.js';
import { listAllTransactions, postSign, setPolicy } from './helpers/payments.js';
import { MPP_RECIPIENT, MPP_REALM, carriesPayment, startMppPeer, type MppPeer } from './helpers/peers.js';
import { rest, startTestServer, type TestServer } from './helpers/server.js';
import { createUser, dashboardFetch, httpSignIn, type HttpSession } from './dashboard/helpers.js';
import { runCliInProcess as runCli } from './helpers/cliInProcess.js';
import { expectRpcError } from './helpers/rpc.js';

/**
 * An MPP challenge may split its amount to other recipients. The allowlist must hold for every
 * address a payment pays: allowed by address, each split recipient must be allowlisted too;
 * allowed through a registry-attributed service slug, the service's own challenge decides.
 */
const SPLIT_TO: Address = '0x90F79bf6EB2c4f870365E785982E1f101E93b906';

/** What a person approves in the approval tests: $2, almost all of it to PRIMARY. */
const PRIMARY: Address = '0x1111111111111111111111111111111111111111';
const SECOND: Address = '0x3333333333333333333333333333333333333333';
const APPROVED_SPLIT = [{ amount: '0.000001', recipient: SECOND }];
const PASSWORD = 'long enough password';

let peer: MppPeer;
/** A paywall charging $2 to PRIMARY with a split to SECOND that tests change between approval and collection. */
let changing: MppPeer;
/** A $2 paywall whose challenge says it pays the network fee (`feePayer`) while `sponsoring` holds. */
let sponsor: MppPeer;
let sponsoring = true;
let s: TestServer;
let admin: Admin;
let approver: HttpSession;
let treasury: Address;

beforeAll(async () => {
  peer = await startMppPeer({ splits: [{ amount: '0.004', recipient: SPLIT_TO }] });
  changing = await startMppPeer({ recipient: PRIMARY, splits: APPROVED_SPLIT });
  changing.setAmount('2');
  sponsor = await startMppPeer({ recipient: PRIMARY, rewriteChallenge: (v) => (sponsoring ? withFeePayer(v) : v) });
  sponsor.setAmount('2');
  s = await startTestServer({ dev: true, probeAllowHosts: [peer.host, changing.host, sponsor.host] });
  admin = adminFor(s);
  treasury = getAddress(s.bootstrap.treasury_address);
  await upsertService(admin, { slug: 'split-svc', name: 'Split Service', paymentMethods: [{ realm: MPP_REALM, baseUrl: peer.url('/svc'), protocol: 'mpp' }] });
  await createUser(admin, s.bootstrap.org_id, 'approver@example.com', 'approver', PASSWORD);
  approver = await httpSignIn(s.url, 'approver@example.com', PASSWORD);
});

afterAll(async () => {
  await s?.close();
  await peer?.close();
  await changing?.close();
  await sponsor?.close();
});

/** The challenge with `methodDetails.feePayer: true` in its request: the paywall offers to pay the fee. */
function withFeePayer(wwwAuthenticate: string): string {
  return wwwAuthenticate.replace(/request="([^"]+)"/, (_m, encoded: string) => {
    const request = JSON.parse(Buffer.from(encoded, 'base64url').toString('utf8')) as { methodDetails?: Record<string, unknown> };
    request.methodDetails = { ...request.methodDetails, feePayer: true };
    return `request="${Buffer.from(JSON.stringify(request)).toString('base64url')}"`;
  });
}

let n = 0;
async function agent(allowlist: string[]): Promise<string> {
  const id = await createAgent(admin, s.bootstrap.org_id, `split-${++n}`);
  await setPolicy(admin, id, { allowlist, capUsd: '10', thresholdUsd: '1' });
  return id;
}

function body(agentId: string, url: string) {
  return { agent_id: agentId, type: 'mpp', payload: { resource_url: url } };
}

describe('POST /api/sign type mpp with splits', () => {
  test('error: primary recipient allowlisted but the split recipient not → 403 naming the split, nothing signed', async () => {
    const agentId = await agent([MPP_RECIPIENT]);
    const url = peer.url('/plain/a');
    const r = await postSign(s.url, s.bootstrap.api_key, body(agentId, url));
    expect(r.status, r.text).toBe(403);
    expect(r.json.reason).toBe(`The payment also pays ${SPLIT_TO.toLowerCase()} (a split), which is not on the agent's allowlist`);
    const rows = await listAllTransactions(admin, s.bootstrap.org_id, agentId);
    expect(rows.map((t) => t.status)).toEqual(['denied']);
    expect(peer.requestsTo('/plain/a').filter(carriesPayment)).toHaveLength(0);
  });

  test('behavior: both recipients allowlisted by address → 200, and the paywall accepts the split payment', async () => {
    const agentId = await agent([MPP_RECIPIENT, SPLIT_TO]);
    const url = peer.url('/plain/b');
    const r = await postSign(s.url, s.bootstrap.api_key, body(agentId, url));
    expect(r.status, r.text).toBe(200);
    expect(r.json.cost_usd).toBe('0.01');
    const paid = await fetch(url, { headers: { accept: 'application/json', [r.json.payment_header.name]: r.json.payment_header.value } });
    expect(paid.status, await paid.clone().text()).toBe(200);
  });

  test('error: a window limit scoped to a split recipient counts every payment that pays it, whole', async () => {
    const agentId = await agent([MPP_RECIPIENT, SPLIT_TO]);
    await admin.client.setPolicy({
      agentId, allowlist: [MPP_RECIPIENT, SPLIT_TO], spendCapUsd: '10', approvalThresholdUsd: '1',
      limits: { items: [{ window: '1h', maxCount: 1, recipient: SPLIT_TO.toLowerCase() }] },
    }, admin.auth);
    expect((await postSign(s.url, s.bootstrap.api_key, body(agentId, peer.url('/limited/a')))).status).toBe(200);
    const second = await postSign(s.url, s.bootstrap.api_key, body(agentId, peer.url('/limited/b')));
    expect(second.status, second.text).toBe(403);
    expect(second.json.rule).toMatchObject({ kind: 'max_count', recipient: SPLIT_TO.toLowerCase(), spent: '1' });
    // A direct payment to the split recipient is in the same window.
    const direct = await postSign(s.url, s.bootstrap.api_key, { agent_id: agentId, type: 'eip3009', chain_id: 8453, recipient_address: SPLIT_TO, amount_usd: '0.01' });
    expect(direct.status, direct.text).toBe(403);
    const spend = await rest(s.url, 'GET', `/api/agents/${agentId}/spend`, { key: s.bootstrap.api_key });
    expect(spend.json.limits[1]).toMatchObject({ recipient: SPLIT_TO.toLowerCase(), count: 1, spent_usd: '0.01' });
  });

  test('behavior: allowed through an attributed service slug, the service\'s splits are accepted', async () => {
    const agentId = await agent(['split-svc']);
    const url = peer.url('/svc/c');
    const r = await postSign(s.url, s.bootstrap.api_key, body(agentId, url));
    expect(r.status, r.text).toBe(200);
    const paid = await fetch(url, { headers: { accept: 'application/json', [r.json.payment_header.name]: r.json.payment_header.value } });
    expect(paid.status).toBe(200);
  });

  test('error: quote reports the same refusal for an address-only allowlist', async () => {
    const agentId = await agent([MPP_RECIPIENT]);
    const r = await fetch(`${s.url}/api/quote`, {
      method: 'POST', headers: { authorization: `Bearer ${s.bootstrap.api_key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: peer.url('/plain/d'), agent_id: agentId }),
    });
    expect(r.status).toBe(403);
    expect(((await r.json()) as { reason: string }).reason).toMatch(/also pays 0x90f79bf6eb2c4f870365e785982e1f101e93b906 \(a split\)/);
  });
});

/** The transfers a signed MPP credential makes, read from the Tempo transaction whose signer ox recovers. */
function signedTransfers(paymentHeaderValue: string): { from: Address; transfers: Array<[string, bigint]> } {
  const credential = JSON.parse(Buffer.from(paymentHeaderValue.slice('Payment '.length), 'base64url').toString('utf8')) as { payload: { signature: Hex } };
  const tx = Transaction.deserialize(credential.payload.signature) as unknown as { calls: Array<{ data: Hex }>; from: Address };
  return {
    from: getAddress(tx.from),
    transfers: tx.calls.map((call) => {
      const [to, amount] = decodeFunctionData({ abi: Abis.tip20, data: call.data }).args as readonly [Address, bigint];
      return [to.toLowerCase(), amount];
    }),
  };
}

describe('approving an MPP payment with splits', () => {
  const APPROVED_PAYEES = [{ address: PRIMARY, amountUsd: '1.999999' }, { address: SECOND, amountUsd: '0.000001' }];

  /** A $2 payment to PRIMARY with a $0.000001 split to SECOND, above the agent's $1 threshold: 202. */
  async function pendingSplit(path: string, key: string): Promise<{ agentId: string; approvalId: string; transactionId: string }> {
    changing.setSplits(APPROVED_SPLIT);
    const agentId = await agent([PRIMARY, SECOND]);
    const r = await postSign(s.url, s.bootstrap.api_key, body(agentId, changing.url(path)), key);
    expect(r.status, r.text).toBe(202);
    return { agentId, approvalId: r.json.approval_request_id, transactionId: r.json.transaction_id };
  }

  async function listed(approvalId: string) {
    return (await admin.client.listApprovals({ orgId: s.bootstrap.org_id }, admin.auth)).approvals.find((a) => a.id === approvalId)!;
  }

  test('behavior: ListApprovals and the dashboard show every recipient and amount of the split', async () => {
    const { approvalId } = await pendingSplit('/show', 'split-show');
    const a = await listed(approvalId);
    expect([a.amountUsd, a.recipientAddress]).toEqual(['2', PRIMARY]);
    expect(a.payees.map((p) => ({ address: p.address, amountUsd: p.amountUsd }))).toEqual(APPROVED_PAYEES);

    const page = await (await dashboardFetch(s.url, approver, '/dashboard/approvals')).text();
    const card = page.slice(page.indexOf(`data-approval-id="${approvalId}"`), page.indexOf('</article>', page.indexOf(`data-approval-id="${approvalId}"`)));
    expect(card).toContain('split between 2 recipients');
    const payees = [...card.matchAll(/<li><span class="mono">(0x[0-9a-fA-F]{40})<\/span> receives <strong>([^<]+)<\/strong>/g)].map((m) => [m[1], m[2]]);
    expect(payees).toEqual([[PRIMARY, '$1.999999'], [SECOND, '$0.000001']]);
    const live = await (await dashboardFetch(s.url, approver, '/dashboard/approvals.json')).json() as { pending: Array<{ id: string; html: string }> };
    expect(live.pending.find((p) => p.id === approvalId)!.html).toContain(`${SECOND}</span> receives <strong>$0.000001</strong>`);

    const cli = await runCli(['approval', 'list', '--org', s.bootstrap.org_id, '--status', 'pending', '--url', s.url, '--admin-token', s.bootstrap.admin_token]);
    expect([cli.code, cli.stderr]).toEqual([0, '']);
    expect(cli.stdout.split('\n').find((line) => line.startsWith(approvalId))).toContain(`$1.999999 to ${PRIMARY}, $0.000001 to ${SECOND}`);
  });

  test('error: the paywall moves the split amounts after approval (same total, same recipients) → 403, nothing signed', async () => {
    const { agentId, approvalId, transactionId } = await pendingSplit('/moved', 'split-moved');
    const decided = await dashboardFetch(s.url, approver, `/dashboard/approvals/${approvalId}/decide`, { form: { _csrf: approver.csrf, decision: 'approve', note: '' } });
    expect(decided.status).toBe(303);
    const flash = await (await dashboardFetch(s.url, approver, '/dashboard/approvals')).text();
    expect(flash).toContain(`Approved $2.00 split as $1.999999 to ${PRIMARY}, $0.000001 to ${SECOND}`);
    const decidedRow = flash.slice(flash.indexOf('<tbody>', flash.indexOf('Recently decided approval requests')));
    expect(decidedRow.slice(0, decidedRow.indexOf('</tr>'))).toContain('0x3333…3333</span> $0.000001');
    expect(approvalStatus.fromProto((await listed(approvalId)).status)).toBe('approved');

    changing.setSplits([{ amount: '1.999999', recipient: SECOND }]);
    const r = await postSign(s.url, s.bootstrap.api_key, body(agentId, changing.url('/moved')), 'split-moved');
    expect(r.status, r.text).toBe(403);
    expect(r.json.reason).toBe(
      `The paywall's split changed after approval (approved $1.999999 to ${PRIMARY}, $0.000001 to ${SECOND}; now $0.000001 to ${PRIMARY}, $1.999999 to ${SECOND}); send a new request`,
    );
    expect(r.json.payment_header).toBeUndefined();
    const rows = await listAllTransactions(admin, s.bootstrap.org_id, agentId);
    expect(rows.map((t) => [t.id, t.status])).toEqual([[transactionId, 'denied']]);
    expect(changing.requestsTo('/moved').filter(carriesPayment)).toHaveLength(0);
    // The refusal is final: a repeat does not sign the moved split either.
    const again = await postSign(s.url, s.bootstrap.api_key, body(agentId, changing.url('/moved')), 'split-moved');
    expect([again.status, again.json.payment_header]).toEqual([403, undefined]);
  });

  test('error: the paywall lowers the total after approval, the splits unchanged → 403 (the primary share moved), nothing signed', async () => {
    const { agentId, approvalId, transactionId } = await pendingSplit('/lowered', 'split-lowered');
    await admin.client.decideApproval({ id: approvalId, decision: Decision.APPROVE }, admin.auth);
    changing.setAmount('1.5');
    try {
      const r = await postSign(s.url, s.bootstrap.api_key, body(agentId, changing.url('/lowered')), 'split-lowered');
      expect(r.status, r.text).toBe(403);
      expect(r.json.reason).toBe(
        `The paywall's split changed after approval (approved $1.999999 to ${PRIMARY}, $0.000001 to ${SECOND}; now $1.499999 to ${PRIMARY}, $0.000001 to ${SECOND}); send a new request`,
      );
      expect(r.json.payment_header).toBeUndefined();
      const rows = await listAllTransactions(admin, s.bootstrap.org_id, agentId);
      expect(rows.map((t) => [t.id, t.status])).toEqual([[transactionId, 'denied']]);
      expect(changing.requestsTo('/lowered').filter(carriesPayment)).toHaveLength(0);
    } finally {
      changing.setAmount('2');
    }
  });

  test('error: the paywall stops paying the network fee after approval → 403, nothing signed (the approver was shown no fee)', async () => {
    sponsoring = true;
    const agentId = await agent([PRIMARY]);
    const pending = await postSign(s.url, s.bootstrap.api_key, body(agentId, sponsor.url('/fee')), 'fee-dropped');
    expect(pending.status, pending.text).toBe(202);
    const a = await listed(pending.json.approval_request_id);
    expect([a.maxNetworkFeeUsd, a.maxNetworkFeeWei]).toEqual(['', '']);
    await admin.client.decideApproval({ id: a.id, decision: Decision.APPROVE }, admin.auth);
    sponsoring = false;
    try {
      const r = await postSign(s.url, s.bootstrap.api_key, body(agentId, sponsor.url('/fee')), 'fee-dropped');
      expect(r.status, r.text).toBe(403);
      expect(r.json.reason).toBe("The paywall's network fee sponsorship changed after approval (approved: the paywall pays the network fee; now: the treasury pays the network fee); send a new request");
      expect(r.json.payment_header).toBeUndefined();
      expect((await listAllTransactions(admin, s.bootstrap.org_id, agentId)).map((t) => t.status)).toEqual(['denied']);
      expect(sponsor.requestsTo('/fee').filter(carriesPayment)).toHaveLength(0);
    } finally {
      sponsoring = true;
    }
  });

  test('behavior: the split unchanged at collection → the signed Tempo transaction pays exactly the approved transfers', async () => {
    const { agentId, approvalId } = await pendingSplit('/kept', 'split-kept');
    await admin.client.decideApproval({ id: approvalId, decision: Decision.APPROVE }, admin.auth);
    const r = await postSign(s.url, s.bootstrap.api_key, body(agentId, changing.url('/kept')), 'split-kept');
    expect(r.status, r.text).toBe(200);
    const signed = signedTransfers(r.json.payment_header.value);
    expect(signed.from).toBe(treasury);
    expect(signed.transfers).toEqual([[PRIMARY, 1_999_999n], [SECOND, 1n]]);
    const paid = await fetch(changing.url('/kept'), { headers: { accept: 'application/json', [r.json.payment_header.name]: r.json.payment_header.value } });
    expect(paid.status, await paid.clone().text()).toBe(200);
    expect((await listed(approvalId)).payees.map((p) => ({ address: p.address, amountUsd: p.amountUsd }))).toEqual(APPROVED_PAYEES);
  });

  test('error: a split recipient taken off the allowlist before the decision → the approval is refused, the payment stays pending', async () => {
    const { agentId, approvalId } = await pendingSplit('/unlisted-before', 'split-unlisted-before');
    await setPolicy(admin, agentId, { allowlist: [PRIMARY], capUsd: '10', thresholdUsd: '1' });
    await expectRpcError(
      admin.client.decideApproval({ id: approvalId, decision: Decision.APPROVE }, admin.auth),
      Code.FailedPrecondition,
      new RegExp(`^Policy re-check refused the approval: The payment also pays ${SECOND} \\(a split\\), which is not on the agent's allowlist$`),
    );
    expect(approvalStatus.fromProto((await listed(approvalId)).status)).toBe('pending');
  });

  test('error: the spend cap counts the whole amount, splits included', async () => {
    changing.setSplits(APPROVED_SPLIT);
    const agentId = await agent([PRIMARY, SECOND]);
    // The recipient's own share ($1.999999) fits the cap; the payment ($2) does not.
    await setPolicy(admin, agentId, { allowlist: [PRIMARY, SECOND], capUsd: '1.999999', thresholdUsd: '1' });
    const r = await postSign(s.url, s.bootstrap.api_key, body(agentId, changing.url('/cap')), 'split-cap');
    expect(r.status, r.text).toBe(403);
    expect(r.json.reason).toBe('Spend cap of $1.999999 per 24 hours would be exceeded: $0 already committed, this payment is $2 ($1.999999 left)');
  });

  test('error: a split recipient taken off the allowlist after approval → collection refused by the policy re-check', async () => {
    const { agentId, approvalId } = await pendingSplit('/unlisted', 'split-unlisted');
    await admin.client.decideApproval({ id: approvalId, decision: Decision.APPROVE }, admin.auth);
    await setPolicy(admin, agentId, { allowlist: [PRIMARY], capUsd: '10', thresholdUsd: '1' });
    const r = await postSign(s.url, s.bootstrap.api_key, body(agentId, changing.url('/unlisted')), 'split-unlisted');
    expect(r.status, r.text).toBe(403);
    expect(r.json.reason).toBe(`Policy re-check at collection refused the approved payment: The payment also pays ${SECOND} (a split), which is not on the agent's allowlist`);
    expect(r.json.payment_header).toBeUndefined();
  });
});
