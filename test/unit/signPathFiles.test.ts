import { mkdtempSync, rmSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import type { AppDeps } from '../../src/app/deps.js';
import { createApiKey } from '../../src/app/accounts/apiKeys.js';
import { createAgent } from '../../src/app/organizations/agents.js';
import { createOrganization, provisionTreasury } from '../../src/app/organizations/organizations.js';
import { signPayment } from '../../src/app/payments/pipeline.js';
import { OPERATOR, type ApiKeyPrincipal } from '../../src/domain/types.js';
import { createSignerPool } from '../../src/signing/signerPool.js';
import { openStore, type Store } from '../../src/store/store.js';
import { testDeps } from '../helpers/testDeps.js';

/**
 * Which source files one sign request runs through, measured rather than declared: the use case
 * (app/payments/pipeline.ts signPayment) is called in-process on a real SQLite file and a real
 * signing thread, under V8's precise coverage (call counts, per function). A file counts when any
 * of its functions ran during the request; what ran before it (module loading, provisioning, a
 * warm-up sign that runs the paths compiled lazily on first use) is left out by resetting the
 * counts just before. The signing thread's own code runs in another isolate and is not seen here.
 *
 * Bounds: the use-case layer (src/app) at most MAX_APP_FILES files, and every src file together at
 * most MAX_SRC_FILES, so a stage that starts bouncing between more modules fails here. The request
 * runs no use case above payments in the capability order (test/unit/importGraph.test.ts): it hands
 * raw transactions to submission through deps.submitter and nothing of approvals or submission
 * runs. Coverage gives no order of entry, so whether the request ever returns to a layer it left
 * is not measured here; the import graph test forbids the imports that could make it.
 */
const SRC = resolve(import.meta.dirname, '../../src');
const MAX_APP_FILES = 9;
const MAX_SRC_FILES = 35;
const RECIPIENT = '0x2222222222222222222222222222222222222222';

let dir: string;
let store: Store;
let deps: AppDeps;
let principal: ApiKeyPrincipal;
let agentId: string;
const session = new Session();

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'paypolicy-signpath-'));
  store = openStore(join(dir, 'db.sqlite'));
  const base = testDeps(store);
  // A wide queue deadline: on a machine busy with other files the payment may wait for a core, and
  // shedding is not what this file is about.
  const signer = createSignerPool(1, (orgId) => base.vault.privateKeyForWorker(orgId) as `0x${string}`, undefined, 60_000);
  deps = { ...base, signer };
  const org = await createOrganization(deps, OPERATOR, { name: 'acme' });
  await provisionTreasury(deps, OPERATOR, org.id);
  const key = await createApiKey(deps, OPERATOR, { orgId: org.id, mode: 'test', label: 'k' });
  principal = { kind: 'api_key', orgId: org.id, mode: 'test', keyId: key.key.id };
  agentId = (await createAgent(deps, OPERATOR, {
    orgId: org.id, name: 'a', policy: { allowlist: [RECIPIENT], spendCapMicros: 100_000_000n, approvalThresholdMicros: 50_000_000n, maxNetworkFeeWei: 10n ** 15n, maxPerPaymentMicros: null, limits: [], updatedAt: Date.now() },
  })).id;
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.startPreciseCoverage', { callCount: true, detailed: false });
}, 30_000);

afterAll(async () => {
  await session.post('Profiler.stopPreciseCoverage').catch(() => undefined);
  session.disconnect();
  await deps?.signer.close();
  await store?.close();
  rmSync(dir, { recursive: true, force: true });
});

const request = (key: string) => ({
  agentId, type: 'eip3009', chainId: 84532, recipientAddress: RECIPIENT, amountUsd: '0.25',
  payload: {}, dryRun: false, idempotencyKey: key,
});

/** Per src file, the summed call counts of its functions, as V8 has them now (takePreciseCoverage resets them). */
async function callsBySrcFile(): Promise<Map<string, number>> {
  const { result } = await session.post('Profiler.takePreciseCoverage');
  const calls = new Map<string, number>();
  for (const script of result) {
    if (!script.url.startsWith('file:')) continue;
    const file = relative(SRC, fileURLToPath(script.url));
    if (file.startsWith('..') || !file.endsWith('.ts')) continue;
    // A function's first range counts its calls; nested block ranges are not calls.
    const n = script.functions.reduce((sum, f) => sum + (f.ranges[0]?.count ?? 0), 0);
    if (n > 0) calls.set(file, (calls.get(file) ?? 0) + n);
  }
  return calls;
}

describe('one sign request', () => {
  test('behavior: runs through a bounded set of src files, none above payments in app', async () => {
    // The warm-up request loads and first-runs every lazily initialized path of signing.
    expect((await signPayment(deps, principal, request('warm-up'))).outcome).toBe('allowed');
    await callsBySrcFile();
    const result = await signPayment(deps, principal, request('measured'));
    const files = [...(await callsBySrcFile()).keys()].sort();
    expect(result.outcome).toBe('allowed');
    const app = files.filter((f) => f.startsWith('app/'));
    expect(app.length, app.join(', ')).toBeLessThanOrEqual(MAX_APP_FILES);
    expect(files.length, files.join(', ')).toBeLessThanOrEqual(MAX_SRC_FILES);
    const above = files.filter((f) => /^app\/(approvals|submission)\/|^(rest|rpc|dashboard|server|cli|http|protoMapping)\//.test(f));
    expect(above).toEqual([]);
    expect(app).toContain('app/payments/pipeline.ts');
  });
});
