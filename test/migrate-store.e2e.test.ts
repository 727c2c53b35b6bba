import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getAddress } from 'viem';
import { afterAll, expect, test } from 'vitest';
import { AdminService, Decision } from '../gen/paypolicy/v1/admin_pb.js';
import { startPaypolicy } from '../src/paypolicy.js';
import { createAgent } from './helpers/admin.js';
import { runCli } from './helpers/cli.js';
import { connectClient } from './helpers/clients.js';
import { listAllTransactions, postSign, recoverAuthorizationSigner, setPolicy, type WireAuthorization } from './helpers/payments.js';
import { createTestDatabase, type TestDatabase } from './helpers/pgDatabase.js';
import { bearer } from './helpers/rpc.js';
import { startTestServer } from './helpers/server.js';

/**
 * Moving a deployment: a SQLite server takes payments, stops; `paypolicy migrate-store` copies its
 * data directory into an empty PostgreSQL database; a server on PostgreSQL with the same master key
 * then answers exactly as the SQLite one did (replays, the admin token, approvals, the treasury key).
 */

const RECIPIENT = '0x1111111111111111111111111111111111111111';
const cleanup: Array<() => Promise<void> | void> = [];
afterAll(async () => {
  for (const f of cleanup.reverse()) await f();
});

test('a SQLite deployment moved with migrate-store answers the same on PostgreSQL', async () => {
  const masterKey = randomBytes(32).toString('hex');
  const dataDir = mkdtempSync(join(tmpdir(), 'pp-move-'));
  cleanup.push(() => rmSync(dataDir, { recursive: true, force: true }));
  // The source is SQLite whatever store the suite runs on.
  const saved = process.env.PAYPOLICY_TEST_STORE;
  delete process.env.PAYPOLICY_TEST_STORE;
  const s = await startTestServer({ dataDir, masterKey, logLevel: 'warn' });
  if (saved !== undefined) process.env.PAYPOLICY_TEST_STORE = saved;
  const admin = { client: connectClient(AdminService, s.url), auth: bearer(s.bootstrap.admin_token) };
  const agentId = await createAgent(admin, s.bootstrap.org_id, 'mover');
  await setPolicy(admin, agentId, { allowlist: [RECIPIENT], capUsd: '10', thresholdUsd: '1' });
  const pay = (url: string, key: string, amount = '0.5') => postSign(url, s.bootstrap.api_key, { agent_id: agentId, type: 'eip3009', chain_id: 8453, recipient_address: RECIPIENT, amount_usd: amount }, key);
  const before = await Promise.all(Array.from({ length: 5 }, (_, i) => pay(s.url, `move-${i}`)));
  expect(before.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
  const pending = await pay(s.url, 'move-approval', '2');
  expect(pending.status).toBe(202);
  const rowsBefore = await listAllTransactions(admin, s.bootstrap.org_id, agentId);
  await s.close({ keepData: true });

  const target: TestDatabase = await createTestDatabase();
  cleanup.push(() => target.drop());
  const moved = await runCli(['migrate-store', '--from', dataDir, '--to', target.url]);
  expect(moved.code, moved.stderr).toBe(0);
  expect(moved.stdout).toMatch(/copied and verified, schema version \d+/);
  expect(moved.stdout).toMatch(/transactions\s+6 rows/);
  // A second run refuses: the target is no longer empty.
  const again = await runCli(['migrate-store', '--from', dataDir, '--to', target.url]);
  expect(again.code).toBe(1);
  expect(again.stderr).toMatch(/not empty/);

  const pgDir = mkdtempSync(join(tmpdir(), 'pp-moved-'));
  cleanup.push(() => rmSync(pgDir, { recursive: true, force: true }));
  const app = await startPaypolicy({
    port: 0, host: '127.0.0.1', dataDir: pgDir, logLevel: 'warn', adminToken: undefined, masterKey, tlsCert: undefined, tlsKey: undefined,
    signerThreads: 1, dev: false, probeAllowHosts: [], tempoRpcUrl: undefined, databaseUrl: target.url, databasePoolSize: 4,
  }, { logDestination: { write: () => {} } });
  cleanup.push(() => app.stop(1000));
  expect(app.bootstrap).toBeUndefined();
  for (let i = 0; i < 100 && !app.deps.signer.threads().every((t) => t.online); i++) await new Promise((r) => setTimeout(r, 25));

  // The same key replays the same signature; the stored admin token still works; the ledger is the same.
  for (const [i, r] of before.entries()) {
    const replay = await pay(app.url, `move-${i}`);
    expect(replay.status).toBe(200);
    expect(replay.json.signature).toBe(r.json.signature);
    expect(replay.json.transaction_id).toBe(r.json.transaction_id);
  }
  const pgAdmin = { client: connectClient(AdminService, app.url), auth: bearer(JSON.parse(readFileSync(join(dataDir, 'bootstrap.json'), 'utf8')).admin_token) };
  expect(await listAllTransactions(pgAdmin, s.bootstrap.org_id, agentId)).toEqual(rowsBefore);
  // The moved approval is decided and collected on PostgreSQL, signed by the moved treasury key.
  await pgAdmin.client.decideApproval({ id: pending.json.approval_request_id, decision: Decision.APPROVE, note: '', decidedBy: 'op' }, pgAdmin.auth);
  const collected = await pay(app.url, 'move-approval', '2');
  expect(collected.status, collected.text).toBe(200);
  expect(await recoverAuthorizationSigner(collected.json.signature, collected.json.authorization as WireAuthorization)).toBe(getAddress(s.bootstrap.treasury_address));
  // The cap counts what was spent on SQLite: $2.50 + $2 of $10, so $5.51 more is refused.
  expect((await pay(app.url, 'move-over', '5.51')).status).toBe(403);
}, 120_000);
