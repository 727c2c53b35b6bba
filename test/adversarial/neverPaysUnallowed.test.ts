import fc from 'fast-check';
import { decodeFunctionData, getAddress, recoverTypedDataAddress, type Address, type Hex } from 'viem';
import { Abis, Transaction } from 'viem/tempo';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { adminFor, createAgent, upsertService, type Admin } from '../helpers/admin.js';
import { TRANSFER_WITH_AUTHORIZATION_TYPES, postSign, setPolicy } from '../helpers/payments.js';
import { MPP_REALM, MPP_RECIPIENT, PAY_TO, openRedirect, startMppPeer, startX402Peer, type Peer } from '../helpers/peers.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * Property: whatever the policy (allowlists of addresses and registry slugs), the
 * registry's contents and the paywalls' answers (redirect chains across origins and paths, MPP
 * challenges with split recipients), the real server never returns a signature that pays an
 * address the policy does not allow. Every 200 is read back from the signed material itself (the
 * EIP-3009 `to`, recovered to the treasury; the Tempo transaction's transfer calls) and judged by
 * an oracle written here from the policy rules, independently of src/: a payee is allowed when it
 * (and every split) is on the allowlist, or when an allowlisted service covers every URL of the
 * redirect chain with base URLs registered for the rail (and its realm, for MPP).
 */

const X402_OTHER: Address = '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC';
const MPP_OTHER: Address = '0x15d34AAf54267DB7D7c367839AAf71A00a2C6A65';
const SPLIT_TO: Address = '0x90F79bf6EB2c4f870365E785982E1f101E93b906';
const STRANGER: Address = '0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc';
const ADDRESSES = [PAY_TO, X402_OTHER, MPP_RECIPIENT, MPP_OTHER, SPLIT_TO, STRANGER].map((a) => a.toLowerCase());

type Rail = 'x402' | 'mpp';
/** A paywall peer and what its challenges pay. */
type Paywall = { peer: Peer; rail: Rail; payees: string[]; paidPaths: string[] };

let paywalls: Paywall[];
let s: TestServer;
let admin: Admin;
let treasury: Address;

/** Paid paths of each rail's paywalls (the x402 peer's GET routes; every mppx path is paid). */
const TARGET_PATHS: Record<Rail, string[]> = { x402: ['/paid', '/svc/paid', '/approval', '/changing'], mpp: ['/paid', '/svc/paid', '/good/paid', '/bad/paid'] };
/** Base-URL prefixes services may register and redirect hops may sit under. */
const PREFIXES = ['', '/svc', '/approval', '/changing', '/good', '/bad'];

beforeAll(async () => {
  const [x1, x2, m1, m2] = await Promise.all([
    startX402Peer({ redirect: openRedirect }),
    startX402Peer({ payTo: X402_OTHER, redirect: openRedirect }),
    startMppPeer({ redirect: openRedirect, splits: [{ amount: '0.004', recipient: SPLIT_TO }] }),
    startMppPeer({ redirect: openRedirect, recipient: MPP_OTHER }),
  ]);
  paywalls = [
    { peer: x1, rail: 'x402', payees: [PAY_TO.toLowerCase()], paidPaths: TARGET_PATHS.x402 },
    { peer: x2, rail: 'x402', payees: [X402_OTHER.toLowerCase()], paidPaths: TARGET_PATHS.x402 },
    { peer: m1, rail: 'mpp', payees: [MPP_RECIPIENT.toLowerCase(), SPLIT_TO.toLowerCase()], paidPaths: TARGET_PATHS.mpp },
    { peer: m2, rail: 'mpp', payees: [MPP_OTHER.toLowerCase()], paidPaths: TARGET_PATHS.mpp },
  ];
  s = await startTestServer({ dev: true, logLevel: 'warn', probeAllowHosts: paywalls.map((p) => p.peer.host) });
  admin = adminFor(s);
  treasury = getAddress(s.bootstrap.treasury_address);
}, 60_000);

afterAll(async () => {
  await s?.close();
  await Promise.all((paywalls ?? []).map((p) => p.peer.close()));
});

type Method = { peer: number; prefix: string; protocol: Rail; realm: string };
type Service = { methods: Method[] };
type Hop = { peer: number; prefix: string };
type Case = { services: Service[]; allowAddresses: boolean[]; allowSlugs: boolean[]; hops: Hop[]; target: { peer: number; path: number } };

const peerIndex = fc.integer({ min: 0, max: 3 });
const RAILS: Rail[] = ['x402', 'x402', 'mpp', 'mpp'];

/**
 * Cases are built around their target paywall so that registrations and hops often line up with
 * it (same peer, same rail): otherwise slug attribution would almost never hold and the property
 * would mostly test refusals.
 */
const caseArb: fc.Arbitrary<Case> = fc.record({ peer: peerIndex, path: fc.integer({ min: 0, max: 3 }) }).chain((target) => {
  const nearPeer = fc.oneof(fc.constant(target.peer), peerIndex);
  // The target path's first segment ('' for '/paid'), or any prefix.
  const segment = /^(\/[a-z]+)\//.exec(`${TARGET_PATHS[RAILS[target.peer]!][target.path]!}/`)![1]!;
  const nearPrefix = fc.oneof(fc.constant(segment === '/paid' ? '' : segment), fc.constantFrom(...PREFIXES));
  const method: fc.Arbitrary<Method> = fc.record({
    peer: nearPeer,
    prefix: nearPrefix,
    protocol: fc.oneof(fc.constant(RAILS[target.peer]!), fc.constantFrom<Rail>('x402', 'mpp')),
    realm: fc.constantFrom('', MPP_REALM, 'other-realm'),
  });
  return fc.record({
    services: fc.array(fc.record({ methods: fc.array(method, { minLength: 1, maxLength: 2 }) }), { maxLength: 3 }),
    allowAddresses: fc.array(fc.integer({ min: 0, max: 3 }).map((v) => v === 0), { minLength: ADDRESSES.length, maxLength: ADDRESSES.length }),
    allowSlugs: fc.array(fc.boolean(), { minLength: 4, maxLength: 4 }),
    hops: fc.array(fc.record({ peer: nearPeer, prefix: nearPrefix }), { maxLength: 2 }),
    target: fc.constant(target),
  });
});

/** The agent's URL: each hop an open redirect (`<prefix>/go?to=`) to the next, ending at the paywall. */
function chainOf(c: Case): string[] {
  const target = paywalls[c.target.peer]!;
  const urls = [target.peer.url(target.paidPaths[c.target.path]!)];
  for (const hop of [...c.hops].reverse()) {
    urls.unshift(`${paywalls[hop.peer]!.peer.url(`${hop.prefix}/go`)}?to=${encodeURIComponent(urls[0]!)}`);
  }
  return urls;
}

/** Same origin and a path prefix on a segment boundary: the registry's rule, restated. */
function under(url: string, base: string): boolean {
  const u = new URL(url);
  const b = new URL(base);
  if (u.origin !== b.origin) return false;
  const prefix = b.pathname.endsWith('/') ? b.pathname : `${b.pathname}/`;
  return u.pathname === b.pathname || u.pathname.startsWith(prefix);
}

/** Whether the policy allows paying `payees` (primary first) for the given chain. */
function oracleAllows(c: Case, chain: string[], rail: Rail, payees: string[]): boolean {
  const allowlist = ADDRESSES.filter((_, i) => c.allowAddresses[i]);
  if (payees.every((p) => allowlist.includes(p))) return true;
  const final = chain[chain.length - 1]!;
  return c.services.some((service, i) => {
    if (!c.allowSlugs[i]) return false;
    const bases = service.methods.filter((m) => m.protocol === rail).map((m) => ({ ...m, base: paywalls[m.peer]!.peer.url(m.prefix) }));
    const answering = bases.some((m) => under(final, m.base) && (rail === 'x402' || m.realm === '' || m.realm === MPP_REALM));
    return answering && chain.every((hop) => bases.some((m) => under(hop, m.base)));
  });
}

/** The addresses a 200 actually pays, read from what was signed. */
async function signedPayees(body: any, rail: Rail): Promise<string[]> {
  if (rail === 'x402') {
    const a = body.authorization;
    const signer = await recoverTypedDataAddress({
      domain: { name: a.domain_name, version: a.domain_version, chainId: a.chain_id, verifyingContract: a.token },
      types: TRANSFER_WITH_AUTHORIZATION_TYPES,
      primaryType: 'TransferWithAuthorization',
      message: { from: a.from, to: a.to, value: BigInt(a.value), validAfter: BigInt(a.valid_after), validBefore: BigInt(a.valid_before), nonce: a.nonce },
      signature: body.signature,
    });
    expect(signer).toBe(treasury);
    return [a.to.toLowerCase()];
  }
  const value = body.payment_header.value as string;
  const credential = JSON.parse(Buffer.from(value.slice('Payment '.length), 'base64url').toString('utf8')) as { payload: { signature: Hex } };
  const tx = Transaction.deserialize(credential.payload.signature) as unknown as { calls: Array<{ data: Hex }>; from: Address };
  expect(getAddress(tx.from)).toBe(treasury);
  return tx.calls.map((call) => (decodeFunctionData({ abi: Abis.tip20, data: call.data }).args[0] as Address).toLowerCase());
}

let run = 0;
const outcomes = { signed: 0, signedBySlug: 0, redirectedSigned: 0, denied: 0, other: 0 };

describe('property: no signature ever pays an address the policy does not allow', () => {
  test('behavior: random policies, registries and paywall answers (redirects, MPP splits)', async () => {
    await fc.assert(
      fc.asyncProperty(caseArb, async (c) => {
        const n = ++run;
        const slugs = c.services.map((_, i) => `prop-${n}-${i}`);
        for (const [i, service] of c.services.entries()) {
          await upsertService(admin, {
            slug: slugs[i]!, name: `Prop ${n} ${i}`,
            paymentMethods: service.methods.map((m) => ({ baseUrl: paywalls[m.peer]!.peer.url(m.prefix), protocol: m.protocol, realm: m.protocol === 'mpp' ? m.realm : '' })),
          });
        }
        try {
          const allowlist = [
            ...ADDRESSES.filter((_, i) => c.allowAddresses[i]),
            ...slugs.filter((_, i) => c.allowSlugs[i]),
            ...(c.allowSlugs[3] ? ['prop-unregistered'] : []),
          ];
          const agentId = await createAgent(admin, s.bootstrap.org_id, `prop-${n}`);
          await setPolicy(admin, agentId, { allowlist, capUsd: '1000', thresholdUsd: '100' });
          const chain = chainOf(c);
          const target = paywalls[c.target.peer]!;
          const r = await postSign(s.url, s.bootstrap.api_key, { agent_id: agentId, type: target.rail, payload: { resource_url: chain[0] } });
          if (r.status === 200) {
            outcomes.signed++;
            const paid = await signedPayees(r.json, target.rail);
            if (!paid.every((p) => allowlist.includes(p))) outcomes.signedBySlug++;
            if (chain.length > 1) outcomes.redirectedSigned++;
            expect(new Set(paid), `chain ${chain.join(' → ')}`).toEqual(new Set(target.payees));
            expect(oracleAllows(c, chain, target.rail, paid), `signed for ${paid.join(', ')} via ${chain.join(' → ')}; allowlist ${allowlist.join(', ')}`).toBe(true);
          } else {
            expect(r.json?.signature ?? null, r.text).toBeNull();
            expect(r.json?.payment_header, r.text).toBeUndefined();
            if (r.status === 403) outcomes.denied++;
            else outcomes.other++;
          }
        } finally {
          for (const slug of slugs) await admin.client.deleteService({ slug }, admin.auth);
        }
      }),
      { numRuns: 300 },
    );
    // Not vacuous: the runs both signed and refused.
    expect(outcomes.signed, JSON.stringify(outcomes)).toBeGreaterThan(5);
    expect(outcomes.denied, JSON.stringify(outcomes)).toBeGreaterThan(5);
    expect(outcomes.signedBySlug, JSON.stringify(outcomes)).toBeGreaterThan(0);
    expect(outcomes.redirectedSigned, JSON.stringify(outcomes)).toBeGreaterThan(0);
  }, 120_000);
});
