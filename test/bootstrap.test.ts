import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Code } from '@connectrpc/connect';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AdminService } from '../gen/paypolicy/v1/admin_pb.js';
import { AgentStatus } from '../gen/paypolicy/v1/payment_policy_pb.js';
import { connectClient } from './helpers/clients.js';
import { runCli, spawnCli } from './helpers/cli.js';
import { bearer, expectRpcError } from './helpers/rpc.js';
import { rest, startTestServer, type TestServer } from './helpers/server.js';

const tempDir = () => mkdtempSync(join(tmpdir(), 'paypolicy-bootstrap-'));
const modeOf = (file: string) => statSync(file).mode & 0o777;
const readBootstrap = (dataDir: string) => JSON.parse(readFileSync(join(dataDir, 'bootstrap.json'), 'utf8')) as Record<string, string>;
const hexKey = () => randomBytes(32).toString('hex');

/** REST ping with the given key; `connection: close` so no idle socket outlives the test. */
function ping(s: { url: string }, key: string, agentId: string) {
  return rest(s.url, 'POST', '/api/ping', { key, body: { agent_id: agentId }, headers: { connection: 'close' } });
}

describe('startPaypolicy', () => {
  describe('first start on an empty data directory, then a restart', () => {
    let s: TestServer;
    let dataDir: string;
    const admin = () => connectClient(AdminService, s.url);

    beforeAll(async () => {
      dataDir = tempDir();
      s = await startTestServer({ dataDir });
    });
    afterAll(async () => s.close());

    test('behavior: writes bootstrap.json with mode 0600 and exactly the five keys', () => {
      const file = join(dataDir, 'bootstrap.json');
      expect(modeOf(file)).toBe(0o600);
      const b = readBootstrap(dataDir);
      expect(Object.keys(b).sort()).toEqual(['admin_token', 'agent_id', 'api_key', 'org_id', 'treasury_address']);
      expect(b.admin_token).toMatch(/^ppadm_[0-9a-f]{48}$/);
      expect(b.org_id).toMatch(/^org_[0-9a-z]+$/);
      expect(b.api_key).toMatch(/^ak_test_[0-9a-f]{48}$/);
      expect(b.agent_id).toMatch(/^agt_[0-9a-z]+$/);
      expect(b.treasury_address).toMatch(/^0x[0-9a-fA-F]{40}$/);
      // The in-memory result handed to the banner is the same as the file.
      expect(s.app.bootstrap).toEqual(b);
    });

    test('behavior: creates master.key with mode 0600 holding 32 bytes as hex', () => {
      const file = join(dataDir, 'master.key');
      expect(modeOf(file)).toBe(0o600);
      expect(readFileSync(file, 'utf8')).toMatch(/^[0-9a-f]{64}\n$/);
      // The database lives next to it.
      expect(existsSync(join(dataDir, 'paypolicy.db'))).toBe(true);
    });

    test('behavior: the bootstrap API key pings the demo agent', async () => {
      const r = await ping(s, s.bootstrap.api_key, s.bootstrap.agent_id);
      expect(r.status).toBe(200);
      expect(r.json).toEqual({ ok: true, agent_id: s.bootstrap.agent_id, agent_name: 'demo-agent', org_id: s.bootstrap.org_id, status: 'active' });
    });

    test('behavior: the default organization has the treasury named in the file, and the key decrypts to it', async () => {
      const { organizations } = await admin().listOrganizations({}, bearer(s.bootstrap.admin_token));
      expect(organizations).toHaveLength(1);
      expect(organizations[0]).toMatchObject({ id: s.bootstrap.org_id, name: 'default', treasuryAddress: s.bootstrap.treasury_address });
      expect(s.app.deps.vault.account(s.bootstrap.org_id).address).toBe(s.bootstrap.treasury_address);
    });

    test('behavior: the demo agent policy is conservative ($10 cap, approval above $1, empty allowlist)', async () => {
      const { agent } = await admin().getAgent({ agentId: s.bootstrap.agent_id }, bearer(s.bootstrap.admin_token));
      expect(agent).toMatchObject({ name: 'demo-agent', status: AgentStatus.ACTIVE, orgId: s.bootstrap.org_id });
      expect(agent?.policy).toMatchObject({ spendCapUsd: '10', approvalThresholdUsd: '1', allowlist: [] });
    });

    // Runs last in this block: it replaces `s` with a second start on the same directory.
    test('behavior: a restart reuses the data and bootstraps nothing', async () => {
      const first = s.bootstrap;
      const fileBefore = readFileSync(join(dataDir, 'bootstrap.json'), 'utf8');
      const masterBefore = readFileSync(join(dataDir, 'master.key'), 'utf8');
      await s.close({ keepData: true });
      s = await startTestServer({ dataDir });

      expect(s.app.bootstrap).toBeUndefined();
      expect(readFileSync(join(dataDir, 'bootstrap.json'), 'utf8')).toBe(fileBefore);
      expect(readFileSync(join(dataDir, 'master.key'), 'utf8')).toBe(masterBefore);
      expect(s.logs.some((l) => l.includes('created master key file'))).toBe(false);

      const { organizations } = await admin().listOrganizations({}, bearer(first.admin_token));
      expect(organizations.map((o) => o.id)).toEqual([first.org_id]);
      expect(organizations[0]?.treasuryAddress).toBe(first.treasury_address);
      // Same master key from the file: the stored treasury key still decrypts.
      expect(s.app.deps.vault.account(first.org_id).address).toBe(first.treasury_address);
      const r = await ping(s, first.api_key, first.agent_id);
      expect(r.status).toBe(200);
    });
  });

  describe('PAYPOLICY_ADMIN_TOKEN', () => {
    test('behavior: the configured token is the admin token, stored for later starts; a new one replaces it', async () => {
      const token = `operator-chosen-${randomBytes(8).toString('hex')}`;
      const dataDir = tempDir();
      let s = await startTestServer({ dataDir, adminToken: token });
      try {
        expect(s.bootstrap.admin_token).toBe(token);
        expect(readBootstrap(dataDir).admin_token).toBe(token);
        const list = await connectClient(AdminService, s.url).listOrganizations({}, bearer(token));
        expect(list.organizations.map((o) => o.id)).toEqual([s.bootstrap.org_id]);

        // Without the variable, the token's stored hash is in force.
        await s.close({ keepData: true });
        s = await startTestServer({ dataDir });
        await expect(connectClient(AdminService, s.url).listOrganizations({}, bearer(token))).resolves.toBeDefined();

        // A different configured token wins over the stored one.
        const rotated = `rotated-operator-token-${randomBytes(8).toString('hex')}`;
        await s.close({ keepData: true });
        s = await startTestServer({ dataDir, adminToken: rotated });
        const client = connectClient(AdminService, s.url);
        await expect(client.listOrganizations({}, bearer(rotated))).resolves.toBeDefined();
        await expectRpcError(client.listOrganizations({}, bearer(token)), Code.Unauthenticated);
      } finally {
        await s.close();
      }
    });

    test('error: a token shorter than 24 characters refuses to start and touches nothing', async () => {
      const dataDir = tempDir();
      try {
        await expect(startTestServer({ dataDir, adminToken: 'x'.repeat(23) })).rejects.toThrow(/PAYPOLICY_ADMIN_TOKEN must be at least 24 characters/);
        expect(readdirSync(dataDir)).toEqual([]);
      } finally {
        rmSync(dataDir, { recursive: true, force: true });
      }
    });
  });

  describe('PAYPOLICY_MASTER_KEY', () => {
    let dataDir: string;
    let org: string;
    let treasury: string;
    const original = hexKey();

    beforeAll(async () => {
      dataDir = tempDir();
      const s = await startTestServer({ dataDir, masterKey: original });
      org = s.bootstrap.org_id;
      treasury = s.bootstrap.treasury_address;
      // Read before close: the key decrypts with the configured master key.
      expect(s.app.deps.vault.account(org).address).toBe(treasury);
      await s.close({ keepData: true });
    });
    afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

    test('behavior: no master.key file is written when the key is configured', () => {
      expect(existsSync(join(dataDir, 'master.key'))).toBe(false);
      expect(existsSync(join(dataDir, 'bootstrap.json'))).toBe(true);
    });

    test('error: a different master key refuses start-up, naming the master key and the organization', async () => {
      const before = readFileSync(join(dataDir, 'bootstrap.json'), 'utf8');
      let thrown: unknown;
      try {
        const s = await startTestServer({ dataDir, masterKey: hexKey() });
        await s.close({ keepData: true });
      } catch (err) {
        thrown = err;
      }
      expect(thrown, 'start-up should have been refused').toBeInstanceOf(Error);
      expect(String(thrown)).toMatch(/master key/i);
      expect(String(thrown)).toContain(org);
      // The refused key exists nowhere and the secret file is untouched.
      expect(String(thrown)).not.toMatch(/[0-9a-f]{64}/);
      expect(existsSync(join(dataDir, 'master.key'))).toBe(false);
      expect(readFileSync(join(dataDir, 'bootstrap.json'), 'utf8')).toBe(before);
    });

    test('behavior: after a refused start, the right master key still opens the treasury', async () => {
      const s = await startTestServer({ dataDir, masterKey: original });
      try {
        expect(s.app.bootstrap).toBeUndefined();
        expect(s.app.deps.vault.account(org).address).toBe(treasury);
      } finally {
        await s.close({ keepData: true });
      }
    });
  });

  describe('master.key file permissions', () => {
    test('error: a master.key readable by group or others refuses to start with a clear message', async () => {
      const dataDir = tempDir();
      try {
        const file = join(dataDir, 'master.key');
        writeFileSync(file, `${hexKey()}\n`);
        chmodSync(file, 0o640);
        await expect(startTestServer({ dataDir })).rejects.toThrow(
          new RegExp(`${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} must not be readable by group or others \\(mode 640\\); run chmod 600`),
        );
        // Nothing was created next to the refused key.
        expect(readdirSync(dataDir)).toEqual(['master.key']);
      } finally {
        rmSync(dataDir, { recursive: true, force: true });
      }
    });
  });
});

// The CLI tests run concurrently: each spawns a process (about a second to start) and they
// share nothing but the built dist/.
describe.concurrent('main (bin/paypolicy.js serve)', () => {
  test('behavior: first start prints the banner with the secrets and SIGTERM exits 0', async ({ expect }) => {
    const root = tempDir();
    const dataDir = join(root, 'data');
    const cli = spawnCli(['serve', '--port', '0', '--data-dir', dataDir]);
    try {
      const out = await cli.waitForStdout(/paypolicy\.js agent list/);
      const b = readBootstrap(dataDir);
      expect(out).toContain('paypolicy: first start, created a default organization:');
      expect(out).toContain(`admin token       ${b.admin_token}`);
      expect(out).toContain(`test API key      ${b.api_key}`);
      expect(out).toContain(`demo agent        ${b.agent_id}`);
      expect(out).toContain(`treasury address  ${b.treasury_address}`);
      expect(modeOf(join(dataDir, 'bootstrap.json'))).toBe(0o600);
      // The banner's own example works against the running process. Answering a request also
      // proves start-up has gone past installing the signal handlers: main.ts installs them just
      // after printing, so a SIGTERM sent on seeing the banner could still hit Node's default
      // handler and kill the process by signal.
      const url = /curl -s -X POST (http:\/\/127\.0\.0\.1:\d+)\/api\/ping/.exec(out)?.[1];
      expect(url).toBeDefined();
      expect((await ping({ url: url! }, b.api_key!, b.agent_id!)).status).toBe(200);

      // Nothing is in flight, so the process exits; that nothing holds stop() (no wait for the
      // grace period) is shown in process by test/shutdown.test.ts, without a clock.
      cli.child.kill('SIGTERM');
      expect(await cli.exited).toEqual({ code: 0, signal: null });
      expect(cli.stdout()).toMatch(/"msg":"paypolicy stopped"/);
      // Secrets go to stdout once, in the banner; never into a JSON log line.
      const logLines = cli.stdout().split('\n').filter((l) => l.startsWith('{'));
      expect(logLines.length).toBeGreaterThan(0);
      for (const l of logLines) expect(l).not.toMatch(/ppadm_|ak_test_/);
      expect(cli.stderr()).toBe('');
    } finally {
      cli.child.kill('SIGKILL');
      rmSync(root, { recursive: true, force: true });
    }
  });

  test('behavior: a first start that cannot listen keeps its banner for the next start, which shows it once; later starts print no secret', async ({ expect }) => {
    const dataDir = tempDir();
    const taken = createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
    const port = String((taken.address() as AddressInfo).port);
    const starts: ReturnType<typeof spawnCli>[] = [];
    try {
      // The port is taken: bootstrapped, then exit 2 with a way out.
      const refused = await runCli(['serve', '--port', port, '--data-dir', dataDir]);
      expect(refused.code).toBe(2);
      expect(refused.stderr).toMatch(/^paypolicy: cannot listen: address already in use .*--port N \(or PAYPOLICY_PORT\).*printed once a start can listen\n$/);
      expect(refused.stdout + refused.stderr).not.toMatch(/ppadm_|ak_test_/);
      const b = readBootstrap(dataDir);

      // The next start that can listen prints what the first could not, with its own URL.
      const second = spawnCli(['serve', '--port', '0', '--data-dir', dataDir]);
      starts.push(second);
      const out = await second.waitForStdout(/paypolicy\.js user create/);
      expect(out).toContain('paypolicy: first start, created a default organization:');
      expect(out).toContain(`admin token       ${b.admin_token}`);
      expect(out).toContain(`test API key      ${b.api_key}`);
      const url = /curl -s -X POST (http:\/\/127\.0\.0\.1:\d+)\/api\/ping/.exec(out)![1]!;
      // The CLI hints name this server and its data directory, not the defaults.
      expect(out).toContain(`agent list --org ${b.org_id} --url ${url} --data-dir ${dataDir}`);
      second.child.kill('SIGTERM');
      expect(await second.exited).toEqual({ code: 0, signal: null });

      const third = spawnCli(['serve', '--port', '0', '--data-dir', dataDir]);
      starts.push(third);
      const later = await third.waitForStdout(/paypolicy listening on http:\/\/127\.0\.0\.1:\d+ /);
      expect(later).toContain('see bootstrap.json in the data directory');
      const thirdUrl = /paypolicy listening on (http:\/\/\S+) /.exec(later)![1]!;
      expect((await rest(thirdUrl, 'GET', '/healthz', { headers: { connection: 'close' } })).status).toBe(200);
      third.child.kill('SIGTERM');
      expect(await third.exited).toEqual({ code: 0, signal: null });
      expect(third.stdout() + third.stderr()).not.toMatch(/ppadm_|ak_test_/);
      expect(third.stderr()).toBe('');
    } finally {
      for (const s of starts) s.child.kill('SIGKILL');
      taken.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
    // Three processes start one after another (each loads the whole server); on two cores shared
    // with other test files that alone can take half a minute.
  }, 90_000);

  test('error: invalid configuration exits 2 with exactly one line on stderr', async ({ expect }) => {
    const root = tempDir();
    const dataDir = join(root, 'never-created');
    const cases: Array<{ args: string[]; env?: Record<string, string>; detail: RegExp }> = [
      { args: ['--port', 'abc'], detail: /--port must be an integer/ },
      { args: ['--log-level', 'loud'], detail: /--log-level must be one of/ },
      { args: ['--verbose'], detail: /unknown option --verbose/ },
      { args: ['--tls-cert', join(root, 'cert.pem')], detail: /--tls-cert and --tls-key must be given together/ },
      { args: [], env: { PAYPOLICY_ADMIN_TOKEN: 'too-short' }, detail: /PAYPOLICY_ADMIN_TOKEN must be at least 24 characters/ },
    ];
    try {
      const results = await Promise.all(cases.map((c) => runCli(['serve', '--data-dir', dataDir, ...c.args], c.env)));
      results.forEach((r, i) => {
        const c = cases[i]!;
        expect(r.code, c.args.join(' ')).toBe(2);
        expect(r.stderr.endsWith('\n')).toBe(true);
        const lines = r.stderr.slice(0, -1).split('\n');
        expect(lines).toHaveLength(1);
        expect(lines[0]).toMatch(/^paypolicy: invalid configuration: /);
        expect(lines[0]).toMatch(c.detail);
        expect(r.stdout).toBe('');
      });
      expect(existsSync(dataDir)).toBe(false);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
