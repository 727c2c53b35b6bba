import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { adminFor, type Admin } from './helpers/admin.js';
import { runCliInProcess as runCli } from './helpers/cliInProcess.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { createUser, httpSignIn, dashboardFetch, postSignIn } from './dashboard/helpers.js';

/**
 * The operator CLI (the real launcher, bin/paypolicy.js, over dist/) against a real server:
 * managing dashboard users, the same not-found for every unknown id, the policy warnings, and the
 * `service upsert --file` example of docs/cli.md fed to the CLI as written.
 */

const PASSWORD = 'long enough password';
const CLI_DOC = fileURLToPath(new URL('../docs/cli.md', import.meta.url));
let s: TestServer;
let admin: Admin;
let orgId: string;

beforeAll(async () => {
  s = await startTestServer({ logLevel: 'warn' });
  admin = adminFor(s);
  orgId = (await admin.client.createOrganization({ name: 'cli users' }, admin.auth)).organization!.id;
});
afterAll(async () => s?.close());

/** `paypolicy <args> --url … --admin-token …` with the environment given. */
function cli(args: string[], env: Record<string, string> = {}) {
  return runCli([...args, '--url', s.url, '--admin-token', s.bootstrap.admin_token], env);
}

async function ok(args: string[], env: Record<string, string> = {}): Promise<string> {
  const r = await cli(args, env);
  expect({ args, code: r.code, stderr: r.stderr }).toEqual({ args, code: 0, stderr: '' });
  return r.stdout;
}

describe('paypolicy user …', { timeout: 120_000 }, () => {
  test('behavior: list, disable (ends the session), enable, reset-password and remove', async () => {
    const owner = await createUser(admin, orgId, 'cli-owner@example.com', 'owner', PASSWORD);
    const approver = await createUser(admin, orgId, 'cli-approver@example.com', 'approver', PASSWORD);

    const table = await ok(['user', 'list', '--org', orgId]);
    expect(table.split('\n')[0]).toMatch(/^ID\s+EMAIL\s+ROLE\s+STATUS\s+CREATED$/);
    expect(table).toMatch(new RegExp(`${approver.id}\\s+cli-approver@example.com\\s+approver\\s+enabled`));
    const json = JSON.parse(await ok(['user', 'list', '--org', orgId, '--json']));
    expect(json.users.map((u: { email: string; disabled: boolean }) => [u.email, u.disabled])).toEqual([
      ['cli-owner@example.com', false], ['cli-approver@example.com', false],
    ]);

    const session = await httpSignIn(s.url, approver.email, PASSWORD);
    expect(await ok(['user', 'disable', '--id', approver.id])).toMatch(/status\s+disabled/);
    const after = await dashboardFetch(s.url, session, '/dashboard/agents');
    expect([after.status, after.headers.get('location')]).toEqual([303, '/dashboard/sign-in']);
    expect((await postSignIn(s.url, approver.email, PASSWORD)).status).toBe(401);
    expect(await ok(['user', 'enable', '--id', approver.id])).toMatch(/status\s+enabled/);
    expect((await postSignIn(s.url, approver.email, PASSWORD)).status).toBe(303);

    const newPassword = 'reset by the operator';
    expect(await ok(['user', 'reset-password', '--id', approver.id], { PAYPOLICY_DASHBOARD_PASSWORD: newPassword })).toMatch(/^password reset; sessions ended/);
    expect((await postSignIn(s.url, approver.email, PASSWORD)).status).toBe(401);
    expect((await postSignIn(s.url, approver.email, newPassword)).status).toBe(303);

    expect(await ok(['user', 'remove', '--id', approver.id])).toBe(`removed ${approver.id}\n`);
    expect(JSON.parse(await ok(['user', 'list', '--org', orgId, '--json'])).users.map((u: { id: string }) => u.id)).toEqual([owner.id]);
  });

  test('error: the last enabled owner, an unknown id and a missing password', async () => {
    const org = (await admin.client.createOrganization({ name: 'solo' }, admin.auth)).organization!.id;
    const owner = await createUser(admin, org, 'solo-owner@example.com', 'owner', PASSWORD);
    expect(await cli(['user', 'remove', '--id', owner.id])).toMatchObject({
      code: 1, stderr: 'paypolicy: failed_precondition: This is the last enabled owner of the organization; add or enable another owner first\n',
    });
    expect(await cli(['user', 'disable', '--id', owner.id])).toMatchObject({ code: 1, stderr: expect.stringMatching(/last enabled owner/) });
    expect(await cli(['user', 'disable', '--id', 'usr_nope'])).toMatchObject({ code: 1, stderr: 'paypolicy: not_found: Dashboard user not found\n' });
    expect(await cli(['user', 'reset-password', '--id', owner.id])).toMatchObject({
      code: 2, stderr: 'paypolicy: give the password on stdin with --password-stdin, or in PAYPOLICY_DASHBOARD_PASSWORD\n',
    });
  });
});

describe('CLI frictions', { timeout: 120_000 }, () => {
  test('error: key revoke of an unknown or malformed id is not_found, worded as agent get\'s', async () => {
    const agent = await cli(['agent', 'get', '--id', 'nope']);
    expect(agent).toMatchObject({ code: 1, stderr: 'paypolicy: not_found: Agent not found\n' });
    for (const id of ['nope', 'key_000000000000000000000000']) {
      expect(await cli(['key', 'revoke', '--id', id])).toMatchObject({ code: 1, stdout: '', stderr: 'paypolicy: not_found: API key not found\n' });
    }
  });

  test('behavior: policy set warns on stderr about an unregistered slug and a threshold above the cap, and saves the policy', async () => {
    const agentId = (await admin.client.createAgent({ orgId, name: 'warned' }, admin.auth)).agent!.id;
    await admin.client.upsertService({ service: { slug: 'known-svc', name: 'Known', paymentMethods: [{ protocol: 'x402' }] }, orgId }, admin.auth);
    const recipient = '0x2096abcdef0123456789abcdef0123456789287c';
    const r = await cli(['policy', 'set', '--agent', agentId, '--allow', `known-svc,typo-svc,${recipient}`, '--cap', '10', '--threshold', '25']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/allowlist\s+known-svc, typo-svc, 0x2096/);
    expect(r.stderr).toBe([
      'paypolicy: warning: allowlist entry "typo-svc" is not a registered service slug; it matches nothing until a service with that slug is registered',
      'paypolicy: warning: approval threshold 25 USD is above the spend cap 10 USD; no payment can reach it, so none will wait for approval',
      '',
    ].join('\n'));
    // --json keeps stdout a JSON document; the warnings are in it and on stderr.
    const j = await cli(['policy', 'set', '--agent', agentId, '--allow', 'typo-svc', '--cap', '10', '--threshold', '1', '--json']);
    expect(JSON.parse(j.stdout).warnings).toEqual([expect.stringMatching(/"typo-svc" is not a registered service slug/)]);
    expect(j.stderr).toMatch(/^paypolicy: warning: allowlist entry "typo-svc"/);
    // A sound policy says nothing.
    expect(await cli(['policy', 'set', '--agent', agentId, '--allow', 'known-svc', '--cap', '10', '--threshold', '10'])).toMatchObject({ code: 0, stderr: '' });
  });

  test('behavior: the service upsert --file example of docs/cli.md is accepted as written and stored', async () => {
    const doc = readFileSync(CLI_DOC, 'utf8');
    const from = doc.indexOf('Example `record.json` for `service upsert --file`');
    const example = from < 0 ? undefined : /```json\n([\s\S]*?)\n```/.exec(doc.slice(from))?.[1];
    expect(example, 'docs/cli.md example block').toBeDefined();
    const dir = mkdtempSync(join(tmpdir(), 'paypolicy-cli-doc-'));
    try {
      const file = join(dir, 'record.json');
      writeFileSync(file, example!);
      const slug = (JSON.parse(example!) as { slug: string }).slug;
      expect(await ok(['service', 'upsert', '--file', file])).toContain(slug);
      const listed = JSON.parse(await ok(['service', 'list', '--json'])).services.find((x: { slug: string }) => x.slug === slug);
      expect(listed).toMatchObject({ slug, name: 'Weather API', paymentMethods: [{ protocol: 'x402' }, { protocol: 'mpp', realm: 'api.weather.example' }] });
      expect(listed.endpoints).toHaveLength(1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
