import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runCliInProcess, type CliResult } from './helpers/cliInProcess.js';
import { rest, startTestServer, type TestServer } from './helpers/server.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const API_KEY = /ak_test_[0-9a-f]{48}/;

/** Only what the child needs: inherited PAYPOLICY_* variables would change which server and token it uses. */
function childEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME };
  return { ...env, ...extra };
}

/** Runs the real launcher (`node bin/paypolicy.js …`, which loads dist/) and never rejects. */
function spawnCli(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['bin/paypolicy.js', ...args], { cwd: ROOT, env: childEnv(env), timeout: 20_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

/** The commands run in-process (the same `main`); the launcher has its own test below. */
const runCli = runCliInProcess;

describe('runAdminCommand', { timeout: 90_000 }, () => {
  let s: TestServer;
  /** Every output the CLI produced, checked at the end for the admin token. */
  const outputs: string[] = [];

  /** `paypolicy <args> --url <server> --admin-token <token>`, recording the output. */
  async function admin(...args: string[]): Promise<CliResult> {
    const r = await runCli([...args, '--url', s.url, '--admin-token', s.bootstrap.admin_token]);
    outputs.push(r.stdout, r.stderr);
    return r;
  }

  /** Like admin(), but the command must succeed; returns stdout. */
  async function ok(...args: string[]): Promise<string> {
    const r = await admin(...args);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    return r.stdout;
  }

  /** Like ok() with --json; returns the parsed document. */
  async function okJson(...args: string[]): Promise<any> {
    return JSON.parse(await ok(...args, '--json'));
  }

  beforeAll(async () => {
    s = await startTestServer();
  });
  afterAll(async () => s.close());

  test('behavior: org create prints the organization and org list shows it in columns', async () => {
    const created = await ok('org', 'create', '--name', 'Acme Research', '--approval-window', '900');
    const id = /org_[0-9a-z]+/.exec(created)?.[0];
    expect(id).toBeDefined();
    expect(created).toMatch(/name\s+Acme Research/);
    expect(created).toMatch(/approval window\s+900s/);
    const list = await ok('org', 'list');
    const lines = list.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^ID\s+NAME\s+TREASURY\s+APPROVAL WINDOW\s+CREATED$/);
    const row = lines.find((l) => l.startsWith(id!));
    expect(row).toMatch(/Acme Research\s+-\s+900s\s+\d{4}-\d{2}-\d{2}T/);
    expect(lines.some((l) => l.startsWith(s.bootstrap.org_id))).toBe(true);
    // Aligned: the NAME column starts at the same offset on every line.
    const nameCol = lines[0]!.indexOf('NAME');
    expect(row!.indexOf('Acme Research')).toBe(nameCol);
  });

  test('behavior: --json prints the response message as protobuf JSON, implicit fields included', async () => {
    const created = await okJson('org', 'create', '--name', 'json-org');
    expect(created.organization).toMatchObject({ name: 'json-org', approvalWindowSeconds: 3600, treasuryAddress: '' });
    expect(created.organization.id).toMatch(/^org_/);
    expect(Date.parse(created.organization.createdAt)).not.toBeNaN();
    const provisioned = await okJson('treasury', 'provision', '--org', created.organization.id);
    expect(provisioned.treasuryAddress).toMatch(/^0x[0-9a-fA-F]{40}$/);
    const list = await okJson('org', 'list');
    expect(list.organizations.find((o: any) => o.id === created.organization.id)?.treasuryAddress).toBe(provisioned.treasuryAddress);
  });

  test('behavior: key create prints the plaintext once, it pings, and key revoke makes it 401', async () => {
    const created = await ok('key', 'create', '--org', s.bootstrap.org_id, '--mode', 'test', '--label', 'ci');
    const plaintext = API_KEY.exec(created)?.[0];
    expect(plaintext).toBeDefined();
    expect(created.split(plaintext!)).toHaveLength(2);
    expect(created).toMatch(/will not be shown again/);
    const keyId = /key_[0-9a-z]+/.exec(created)![0];

    const ping = () => rest(s.url, 'POST', '/api/ping', { key: plaintext!, body: { agent_id: s.bootstrap.agent_id } });
    expect((await ping()).status).toBe(200);

    const listed = await ok('key', 'list', '--org', s.bootstrap.org_id);
    expect(listed).toMatch(new RegExp(`${keyId}\\s+test\\s+${plaintext!.slice(0, 16)}\\s+ci\\s`));
    expect(listed).not.toContain(plaintext!);

    const revoked = await ok('key', 'revoke', '--id', keyId);
    expect(revoked).toMatch(/revoked\s+\d{4}-/);
    expect((await ping()).status).toBe(401);
    const json = await okJson('key', 'list', '--org', s.bootstrap.org_id);
    const key = json.apiKeys.find((k: any) => k.id === keyId);
    expect(key).toMatchObject({ mode: 'API_KEY_MODE_TEST', label: 'ci' });
    expect(key.revokedAt).toBeDefined();
  });

  test('behavior: key create --json carries plaintextKey and apiKey', async () => {
    const r = await okJson('key', 'create', '--org', s.bootstrap.org_id, '--mode', 'live');
    expect(r.plaintextKey).toMatch(/^ak_live_[0-9a-f]{48}$/);
    expect(r.apiKey).toMatchObject({ orgId: s.bootstrap.org_id, mode: 'API_KEY_MODE_LIVE', label: '' });
  });

  test('behavior: agent create, update, get and list', async () => {
    const created = await okJson('agent', 'create', '--org', s.bootstrap.org_id, '--name', 'crawler');
    const id: string = created.agent.id;
    expect(created.agent).toMatchObject({ name: 'crawler', status: 'AGENT_STATUS_ACTIVE', orgId: s.bootstrap.org_id });

    const updated = await ok('agent', 'update', '--id', id, '--name', 'crawler-2', '--status', 'paused');
    expect(updated).toMatch(/name\s+crawler-2/);
    expect(updated).toMatch(/status\s+paused/);

    const got = await ok('agent', 'get', '--id', id);
    expect(got).toMatch(new RegExp(`id\\s+${id}`));
    expect(got).toMatch(/status\s+paused/);
    expect(got).toMatch(/allowlist\s+nothing/);
    expect(got).toMatch(/last ping\s+never/);

    const list = await ok('agent', 'list', '--org', s.bootstrap.org_id);
    expect(list.split('\n')[0]).toMatch(/^ID\s+NAME\s+STATUS\s+CAP\/24H\s+APPROVAL ABOVE\s+LAST PING\s+ALLOWLIST$/);
    expect(list).toMatch(new RegExp(`${id}\\s+crawler-2\\s+paused\\s+\\$0\\s+\\$0\\s+never\\s+nothing`));
    expect(list).toMatch(new RegExp(`${s.bootstrap.agent_id}\\s+demo-agent\\s+active\\s+\\$10\\s+\\$1\\s`));
  });

  test('behavior: policy set replaces the policy and agent get shows it', async () => {
    const id: string = (await okJson('agent', 'create', '--org', s.bootstrap.org_id, '--name', 'buyer')).agent.id;
    const addr = '0x' + 'Ab'.repeat(20);
    const r = await admin('policy', 'set', '--agent', id, '--allow', `weather-api,${addr}`, '--allow', 'news', '--cap', '25.5', '--threshold', '2');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/spend cap\s+\$25\.5 per 24h/);
    // Neither slug is registered yet: saved, with a warning each (test/cli-users.test.ts has more).
    expect(r.stderr.match(/^paypolicy: warning: allowlist entry "(weather-api|news)" is not a registered service slug/gm)).toHaveLength(2);

    const got = await ok('agent', 'get', '--id', id);
    expect(got).toMatch(new RegExp(`allowlist\\s+weather-api, ${addr.toLowerCase()}, news`));
    expect(got).toMatch(/spend cap\s+\$25\.5 per 24h/);
    expect(got).toMatch(/approval above\s+\$2\n/);
    const json = await okJson('agent', 'get', '--id', id);
    expect(json.agent.policy).toMatchObject({ allowlist: ['weather-api', addr.toLowerCase(), 'news'], spendCapUsd: '25.5', approvalThresholdUsd: '2' });

    await ok('policy', 'set', '--agent', id, '--allow', '', '--cap', '0', '--threshold', '0');
    expect((await okJson('agent', 'get', '--id', id)).agent.policy.allowlist).toEqual([]);
  });

  test('behavior: service upsert from a wire-shape file and from flags, then list and delete', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'paypolicy-cli-'));
    try {
      const file = join(dir, 'record.json');
      writeFileSync(file, JSON.stringify({
        slug: 'weather-api', name: 'Weather API', description: 'Forecasts', category: 'data',
        logoUrl: 'https://weather.example/logo.png', docsUrl: 'https://weather.example/docs',
        paymentMethods: [{ realm: 'weather.example', baseUrl: 'https://weather.example/api', protocol: 'mpp' }],
        endpoints: [
          { method: 'GET', path: '/forecast', description: 'One forecast', priceAtomic: '10000', currency: 'USDC', pricingModel: 'per_request', protocol: 'mpp' },
          { method: 'POST', path: '/bulk', description: '', priceAtomic: null, currency: 'USDC', pricingModel: 'dynamic', protocol: 'mpp' },
        ],
      }));
      const fromFile = await okJson('service', 'upsert', '--file', file);
      expect(fromFile.service).toMatchObject({ slug: 'weather-api', name: 'Weather API', logoUrl: 'https://weather.example/logo.png' });
      expect(fromFile.service.endpoints[0].priceAtomic).toBe('10000');
      expect(fromFile.service.endpoints[1].priceAtomic).toBeUndefined();

      const fromFlags = await ok('service', 'upsert', '--slug', 'news', '--name', 'News', '--category', 'media', '--base-url', 'https://news.example', '--protocol', 'x402');
      expect(fromFlags).toMatch(/slug\s+news/);
      expect(fromFlags).toMatch(/payment \(x402\)\s+https:\/\/news\.example/);

      const list = (await ok('service', 'list')).trimEnd().split('\n');
      expect(list[0]).toMatch(/^SLUG\s+NAME\s+CATEGORY\s+PROTOCOLS\s+ENDPOINTS\s+ID$/);
      expect(list.find((l) => l.startsWith('weather-api'))).toMatch(/Weather API\s+data\s+mpp\s+2\s+[0-9a-f-]{36}$/);
      expect(list.find((l) => l.startsWith('news'))).toMatch(/News\s+media\s+x402\s+0\s/);

      expect(await ok('service', 'delete', '--slug', 'news')).toBe('deleted service news\n');
      expect((await okJson('service', 'list')).services.map((x: any) => x.slug)).toEqual(['weather-api']);
      const again = await admin('service', 'delete', '--slug', 'news');
      expect(again.code).toBe(1);
      expect(again.stderr).toBe('paypolicy: not_found: Service not found\n');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('behavior: tx list shows the ping row after a ping', async () => {
    const ping = await rest(s.url, 'POST', '/api/ping', { key: s.bootstrap.api_key, body: { agent_id: s.bootstrap.agent_id } });
    expect(ping.status).toBe(200);
    const text = await ok('tx', 'list', '--org', s.bootstrap.org_id, '--agent', s.bootstrap.agent_id, '--from', '2000-01-01');
    const lines = text.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^CREATED\s+ID\s+AGENT\s+TYPE\s+STATUS\s+AMOUNT/);
    expect(lines[1]).toMatch(new RegExp(`^\\d{4}-\\d{2}-\\d{2}T\\S+Z\\s+[0-9a-f-]{36}\\s+${s.bootstrap.agent_id}\\s+ping\\s+recorded\\s+\\$0`));

    const json = await okJson('tx', 'list', '--org', s.bootstrap.org_id, '--page-size', '1');
    expect(json.transactions).toHaveLength(1);
    expect(json.transactions[0]).toMatchObject({ type: 'ping', status: 'TRANSACTION_STATUS_RECORDED', amountUsd: '0', agentId: s.bootstrap.agent_id });
    expect(typeof json.nextPageToken).toBe('string');

    expect(await ok('tx', 'list', '--org', s.bootstrap.org_id, '--to', '2000-01-01T00:00:00Z')).toBe('no transactions\n');
  });

  test('behavior: the admin token comes from bootstrap.json in --data-dir, or from the environment', async () => {
    const viaDataDir = await runCli(['org', 'list', '--url', s.url, '--data-dir', s.dataDir]);
    outputs.push(viaDataDir.stdout, viaDataDir.stderr);
    expect(viaDataDir.code).toBe(0);
    expect(viaDataDir.stdout).toContain(s.bootstrap.org_id);

    const viaEnv = await runCli(['agent', 'get', '--id', s.bootstrap.agent_id], { PAYPOLICY_URL: s.url, PAYPOLICY_DATA_DIR: s.dataDir });
    outputs.push(viaEnv.stdout, viaEnv.stderr);
    expect(viaEnv.code).toBe(0);
    expect(viaEnv.stdout).toMatch(/name\s+demo-agent/);

    const viaTokenEnv = await runCli(['org', 'list', '--json'], { PAYPOLICY_URL: s.url, PAYPOLICY_ADMIN_TOKEN: s.bootstrap.admin_token });
    outputs.push(viaTokenEnv.stdout, viaTokenEnv.stderr);
    expect(viaTokenEnv.code).toBe(0);
    expect(JSON.parse(viaTokenEnv.stdout).organizations.length).toBeGreaterThan(0);
  });

  test('error: unauthenticated: a wrong admin token exits 1 with the server message', async () => {
    const wrong = 'ppadm_' + '0'.repeat(48);
    const r = await runCli(['org', 'list', '--url', s.url, '--admin-token', wrong]);
    expect(r).toEqual({ code: 1, stdout: '', stderr: 'paypolicy: unauthenticated: Invalid admin token\n' });
  });

  test('error: no admin token anywhere exits 2 naming where it looked', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'paypolicy-cli-'));
    try {
      const r = await runCli(['org', 'list', '--url', s.url, '--data-dir', dir]);
      expect(r.code).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr).toBe(`paypolicy: no admin token: pass --admin-token, set PAYPOLICY_ADMIN_TOKEN, or point --data-dir at the server's data directory (${join(dir, 'bootstrap.json')} does not exist)\n`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('error: usage mistakes exit 2 with one line on stderr and nothing sent', async () => {
    const cases: Array<[string[], string]> = [
      [['frobnicate'], 'paypolicy: unknown command "frobnicate"; run "paypolicy help" for the list'],
      [['org', 'explode'], 'paypolicy: unknown command "org explode"; org actions are create, update, limits set, list'],
      [['org'], 'paypolicy: org needs an action: create, update, limits set, list'],
      [['org', 'list', '--colour'], 'paypolicy: unknown option --colour'],
      [['org', 'create'], 'paypolicy: missing required option --name'],
      [['org', 'create', '--name'], 'paypolicy: --name needs a value'],
      [['org', 'create', '--name', 'a', '--name', 'b'], 'paypolicy: --name given more than once'],
      [['org', 'create', '--name', 'a', '--approval-window', '-5'], 'paypolicy: --approval-window must be an integer from 60 to 604800, got "-5"'],
      [['org', 'create', '--name', 'a', '--approval-window=1.5'], 'paypolicy: --approval-window must be an integer from 60 to 604800, got "1.5"'],
      [['org', 'create', '--name', 'a', '--approval-window', 'abc'], 'paypolicy: --approval-window must be an integer from 60 to 604800, got "abc"'],
      [['org', 'update', '--id', 'org_x', '--approval-window', '30'], 'paypolicy: --approval-window must be an integer from 60 to 604800, got "30"'],
      [['org', 'list', 'extra'], 'paypolicy: unexpected argument "extra"; options start with --'],
      [['key', 'create', '--org', 'org_x', '--mode', 'prod'], 'paypolicy: --mode must be one of test, live, got "prod"'],
      [['agent', 'update', '--id', 'agt_x'], 'paypolicy: agent update needs --name or --status'],
      [['org', 'update', '--id', 'org_x'], 'paypolicy: org update needs --name or --approval-window'],
      [['policy', 'set', '--agent', 'agt_x', '--cap', '1', '--threshold', '1'], "paypolicy: missing required option --allow (use --allow '' for none)"],
      [['service', 'upsert', '--file', 'x.json', '--slug', 'x'], 'paypolicy: --file cannot be combined with --slug'],
      [['service', 'upsert', '--slug', 'x', '--name', 'X', '--base-url', 'https://x.example'], 'paypolicy: --base-url and --protocol must be given together'],
      [['tx', 'list', '--org', 'org_x', '--status', 'pending'], 'paypolicy: --status must be one of signing, signed, failed, pending_approval, approved, denied, expired, recorded, reverted, got "pending"'],
      [['tx', 'list', '--org', 'org_x', '--from', 'yesterday'], 'paypolicy: --from must be an ISO 8601 date or date-time with zone, e.g. 2025-01-31 or 2025-01-31T12:00:00Z, got "yesterday"'],
      [['approval', 'decide', '--id', 'x', '--approve', '--deny'], 'paypolicy: approval decide needs exactly one of --approve and --deny'],
      [['org', 'list', '--url', 'ftp://example.com'], 'paypolicy: the server URL (--url or PAYPOLICY_URL) must use http or https, not ftp'],
      [['org', 'list', '--url', 'not a url'], 'paypolicy: the server URL (--url or PAYPOLICY_URL) must be an absolute http(s) URL'],
    ];
    const results = await Promise.all(cases.map(async ([args]) => {
      const r = await runCli(args.includes('--url') ? [...args, '--admin-token', s.bootstrap.admin_token] : [...args, '--url', s.url, '--admin-token', s.bootstrap.admin_token]);
      outputs.push(r.stdout, r.stderr);
      return r;
    }));
    results.forEach((r, i) => {
      expect({ args: cases[i]![0], ...r }).toEqual({ args: cases[i]![0], code: 2, stdout: '', stderr: `${cases[i]![1]}\n` });
    });
  });

  test('error: service upsert --file with a misspelt field exits 2 naming the field', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'paypolicy-cli-'));
    try {
      const file = join(dir, 'record.json');
      writeFileSync(file, JSON.stringify({ slug: 'x', name: 'X', endpoints: [{ method: 'GET', price_atomic: '1' }] }));
      const r = await admin('service', 'upsert', '--file', file);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/^paypolicy: .*record\.json\.endpoints\[0\] has unknown field "price_atomic"; expected method, path/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('error: service upsert --file with a key given twice exits 2 naming it, and nothing is sent', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'paypolicy-cli-'));
    try {
      const file = join(dir, 'record.json');
      writeFileSync(file, '{"slug":"cli-dup","name":"First","name":"Second"}');
      const r = await admin('service', 'upsert', '--file', file);
      expect(r.code).toBe(2);
      expect(r.stderr).toBe(`paypolicy: ${file} has a duplicate key "name"\n`);
      expect(await admin('service', 'list')).toMatchObject({ code: 0, stdout: expect.not.stringContaining('cli-dup') });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('error: agent update with a status the CLI does not name exits 2 and changes nothing', async () => {
    for (const status of ['PAUSED', 'Paused', 'AGENT_STATUS_PAUSED', '2']) {
      const r = await admin('agent', 'update', '--id', s.bootstrap.agent_id, '--status', status);
      expect(r, status).toEqual({ code: 2, stdout: '', stderr: `paypolicy: --status must be one of active, paused, revoked, got "${status}"\n` });
    }
    expect(await admin('agent', 'get', '--id', s.bootstrap.agent_id)).toMatchObject({ code: 0, stdout: expect.stringMatching(/status\s+active/) });
  });

  test('error: invalid_argument from the server exits 1 with its message', async () => {
    const r = await admin('policy', 'set', '--agent', s.bootstrap.agent_id, '--allow', '', '--cap', 'ten', '--threshold', '1');
    expect(r).toEqual({ code: 1, stdout: '', stderr: 'paypolicy: invalid_argument: spend_cap_usd must be a non-negative decimal number with at most 6 decimal places\n' });
  });

  // Whether or not approvals are implemented server-side, an unknown organization or request id
  // is a server error, so this pins only that the request is sent and the answer printed cleanly.
  test('error: approval list and approval decide print the server error cleanly', async () => {
    const list = await admin('approval', 'list', '--org', 'org_0000000000000000', '--status', 'pending');
    expect(list.code).toBe(1);
    expect(list.stdout).toBe('');
    expect(list.stderr).toMatch(/^paypolicy: (not_found|unimplemented): [^\n]+\n$/);
    const decide = await admin('approval', 'decide', '--id', '00000000-0000-4000-8000-000000000000', '--deny', '--note', 'no', '--by', 'ops');
    expect(decide.code).toBe(1);
    expect(decide.stdout).toBe('');
    expect(decide.stderr).toMatch(/^paypolicy: (not_found|unimplemented): [^\n]+\n$/);
  });

  test('error: unavailable: an unreachable server exits 1 with "cannot reach"', async () => {
    const r = await runCli(['org', 'list', '--url', 'http://user:secret@127.0.0.1:1', '--admin-token', s.bootstrap.admin_token]);
    outputs.push(r.stdout, r.stderr);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^paypolicy: cannot reach http:\/\/127\.0\.0\.1:1: .*ECONNREFUSED.*\n$/);
  });

  test('behavior: --help prints the command usage and exits 0', async () => {
    const r = await runCli(['policy', 'set', '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^usage: paypolicy policy set --agent AGENT_ID \(--file POLICY.json \| --allow/);
    const all = await runCli(['help']);
    expect(all.stdout).toMatch(/approval decide --id ID \(--approve \| --deny\)/);
  });

  test('behavior: the launcher (bin/paypolicy.js, a process of its own) prints and exits as the commands do in-process', async () => {
    // Exit statuses 0, 2 (no --id) and 1 (a wrong token): the launcher hands main's status to the process.
    for (const args of [
      ['org', 'list', '--json', '--url', s.url, '--admin-token', s.bootstrap.admin_token],
      ['agent', 'get', '--url', s.url, '--admin-token', s.bootstrap.admin_token],
      ['org', 'list', '--url', s.url, '--admin-token', 'x'.repeat(40)],
    ]) {
      const spawned = await spawnCli(args);
      outputs.push(spawned.stdout, spawned.stderr);
      expect(spawned).toEqual(await runCli(args));
    }
  });

  test('behavior: the admin token never appears in any output', () => {
    expect(outputs.length).toBeGreaterThan(40);
    for (const out of outputs) expect(out).not.toContain(s.bootstrap.admin_token);
  });
});
