import { randomBytes } from 'node:crypto';
import { getAddress, type Hex } from 'viem';
import { afterEach, describe, expect, test } from 'vitest';
import { postSign, recoverAuthorizationSigner, recoverPermit2Signer, setPolicy, type SignBody } from '../helpers/payments.js';
import { createTestDatabase } from '../helpers/pgDatabase.js';
import { rest, type RestResult } from '../helpers/server.js';
import { FAULT_TIMEOUT_MS } from './config.js';
import { RECIPIENT, rigPerTest, serverWallShifted, type FaultRig } from './harness.js';

const newRig = rigPerTest();
const DAY_MS = 86_400_000;
/** The longest window an agent may ask for, so that a stretched one shows as twice it. */
const WINDOW_S = 86_400;
const DISAGREE = 'the wall clock and the ledger clock disagree';
const AGREE = 'the wall clock and the ledger clock agree again';

/** The server's log lines (JSON, one a line) whose message starts with `msg`. */
function logLines(rig: FaultRig, msg: string): Array<{ msg: string; skewMs: number }> {
  return rig.server!.stdout().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { msg: string; skewMs: number }).filter((l) => l.msg.startsWith(msg));
}

async function logged(rig: FaultRig, msg: string): Promise<void> {
  while (logLines(rig, msg).length === 0) await new Promise((r) => setTimeout(r, 20));
}

/** POST /api/sign, repeated with the same key while a loaded machine answers 503 `overloaded`, as an agent would. */
async function signRetried(rig: FaultRig, body: SignBody, key: string): Promise<RestResult> {
  for (;;) {
    const r = await postSign(rig.server!.url, rig.bootstrap.api_key, body, key);
    if (r.status !== 503 || r.json?.code !== 'overloaded') return r;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * Signs an eip3009 and a permit2 for the longest window and checks, on the signatures themselves
 * (signer recovered), that each ends within the window of real time around the answer: not later
 * (a signature outliving what was asked), and not earlier either, since the wall clock is right.
 */
async function signBounded(rig: FaultRig, key: string): Promise<void> {
  const treasury = getAddress(rig.bootstrap.treasury_address);
  const body = { agent_id: rig.bootstrap.agent_id, chain_id: 8453, recipient_address: RECIPIENT, amount_usd: '0.01', payload: { valid_for_seconds: WINDOW_S } };
  const before = Math.floor(Date.now() / 1000);
  const eip3009 = await signRetried(rig, { ...body, type: 'eip3009' }, `${key}-eip3009`);
  const permit2 = await signRetried(rig, { ...body, type: 'permit2' }, `${key}-permit2`);
  const after = Math.ceil(Date.now() / 1000);
  expect(eip3009.status, eip3009.text).toBe(200);
  expect(permit2.status, permit2.text).toBe(200);
  expect(await recoverAuthorizationSigner(eip3009.json.signature as Hex, eip3009.json.authorization)).toBe(treasury);
  expect(await recoverPermit2Signer(permit2.json.signature as Hex, permit2.json.permit2)).toBe(treasury);
  for (const end of [Number(eip3009.json.authorization.valid_before), Number(permit2.json.permit2.deadline)]) {
    expect(end).toBeLessThanOrEqual(after + WINDOW_S);
    expect(end).toBeGreaterThanOrEqual(before + WINDOW_S);
  }
}

type Readyz = { status: string; checks: { clock: { ok: boolean; skew_seconds: number; tolerance_seconds: number; detail: string } } };

async function readyz(rig: FaultRig): Promise<{ status: number; body: Readyz }> {
  const r = await rest(rig.server!.url, 'GET', '/readyz', { headers: { connection: 'close' } });
  return { status: r.status, body: r.json as Readyz };
}

/**
 * /readyz once it answers 200: listening comes before the signing threads are online, and on a
 * loaded machine a database ping can miss its deadline for a moment (503, nothing to do with clocks).
 */
async function servingReady(rig: FaultRig): Promise<Readyz> {
  for (;;) {
    const r = await readyz(rig);
    if (r.status === 200) return r.body;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** paypolicy_clock_skew_seconds as /metrics (read from loopback, no token) shows it. */
async function skewMetric(rig: FaultRig): Promise<number> {
  const r = await rest(rig.server!.url, 'GET', '/metrics', { headers: { connection: 'close' } });
  expect(r.status).toBe(200);
  const m = /^paypolicy_clock_skew_seconds (\S+)$/m.exec(r.text);
  expect(m, 'paypolicy_clock_skew_seconds in /metrics').not.toBeNull();
  return Number(m![1]);
}

/** Readiness and the metric both show the ledger clock a day ahead of the (right) wall clock. */
async function expectDayAhead(rig: FaultRig): Promise<void> {
  const r = await servingReady(rig);
  expect(r.status).toBe('degraded');
  expect(r.checks.clock.ok).toBe(false);
  expect(Math.abs(r.checks.clock.skew_seconds + DAY_MS / 1000)).toBeLessThan(60);
  expect(Math.abs((await skewMetric(rig)) + DAY_MS / 1000)).toBeLessThan(60);
}

/**
 * How the server is started on each store. PostgreSQL keeps the ledger clock's anchor in its
 * settings table, so a restart in the same boot continues it from there.
 */
async function storeStart(store: 'sqlite' | 'pg'): Promise<{ start: (rig: FaultRig) => Promise<unknown>; drop: () => Promise<void> }> {
  if (store === 'sqlite') return { start: (rig) => rig.start(), drop: async () => {} };
  const db = await createTestDatabase();
  const env = { PAYPOLICY_MASTER_KEY: randomBytes(32).toString('hex') };
  return { start: (rig) => rig.start({ args: ['--database-url', db.url], env }), drop: () => db.drop() };
}

describe.each(['sqlite', 'pg'] as const)('a wall clock corrected after start on %s (faultfs shifts CLOCK_REALTIME of the real server process)', (store) => {
  let rig: FaultRig | undefined;
  let dropDatabase: (() => Promise<void>) | undefined;
  // The server stops before its database is dropped (this runs before the rig's own disposal).
  afterEach(async () => {
    await rig?.stop();
    await dropDatabase?.();
  });

  test('property: with the ledger clock a day ahead, signatures still end within the requested window of real time; /readyz, /metrics and one log line show it', async () => {
    rig = newRig();
    const server = await storeStart(store);
    dropDatabase = server.drop;
    // First start with the wall clock a day ahead: the ledger clock is anchored there.
    rig.ctl({ clock_shift_ms: DAY_MS });
    await server.start(rig);
    await servingReady(rig);
    await setPolicy(rig.admin, rig.bootstrap.agent_id, { allowlist: [RECIPIENT], capUsd: '10', thresholdUsd: '10' });
    expect((await servingReady(rig)).status).toBe('ready');

    // NTP steps the wall clock back to the right time; the ledger clock keeps its anchor.
    rig.ctl({});
    await serverWallShifted(rig.server!.url, 0);
    await signBounded(rig, 'corrected');
    await expectDayAhead(rig);
    await expectDayAhead(rig);

    // The wall clock agrees with the ledger clock again: ready, and one line says so. Before it,
    // exactly one line said they disagreed, however often readiness and metrics looked.
    rig.ctl({ clock_shift_ms: DAY_MS });
    await serverWallShifted(rig.server!.url, DAY_MS);
    const agreed = await servingReady(rig);
    expect(agreed.status).toBe('ready');
    expect(agreed.checks.clock.ok).toBe(true);
    await logged(rig, AGREE);
    expect(logLines(rig, DISAGREE)).toHaveLength(1);
    expect(Math.abs(logLines(rig, DISAGREE)[0]!.skewMs + DAY_MS)).toBeLessThan(60_000);
    expect(logLines(rig, AGREE)).toHaveLength(1);

    // Restarted in the same boot with the wall clock right: the ledger clock continues its
    // anchor, a day ahead, so the bound and the report hold from the first request.
    await rig.stop();
    rig.ctl({});
    await server.start(rig);
    await servingReady(rig);
    await serverWallShifted(rig.server!.url, 0);
    await signBounded(rig, 'restarted');
    await expectDayAhead(rig);
    await logged(rig, DISAGREE);
    expect(logLines(rig, DISAGREE)).toHaveLength(1);
  }, FAULT_TIMEOUT_MS);
});
