import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { COMMANDS } from '../src/cli/admin.js';
import { SERVE_FLAGS } from '../src/config.js';
import { runCli } from './helpers/cli.js';

/** Flags that every admin command takes besides its own. */
const GLOBAL = ['--url', '--admin-token', '--data-dir', '--json', '--help'];

describe.concurrent('usage and --help (bin/paypolicy.js)', () => {
  test('error: the bare command prints the usage to stderr, exits 2 and starts no server', async ({ expect }) => {
    const cwd = mkdtempSync(join(tmpdir(), 'paypolicy-usage-'));
    try {
      // Run where ./data would be created by a server: it must stay absent.
      const r = await runCli([], {}, { cwd });
      expect(r.code).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(/^paypolicy: no command given; `paypolicy serve` starts the server\n\nusage: paypolicy <command> \[options\]\n/);
      expect(r.stderr).toContain('  serve [--port N]');
      expect(existsSync(join(cwd, 'data'))).toBe(false);
    } finally {
      rmSync(cwd, { recursive: true, force: true });
    }
  });

  test('behavior: serve --help, serve -h and help serve print every serve flag with its variable and exit 0', async ({ expect }) => {
    const runs = await Promise.all([['serve', '--help'], ['serve', '-h'], ['help', 'serve'], ['serve', '--port', '1', '--help']].map((args) => runCli(args)));
    for (const r of runs) {
      expect(r).toMatchObject({ code: 0, stderr: '' });
      expect(r.stdout).toBe(runs[0]!.stdout);
    }
    const text = runs[0]!.stdout;
    expect(text).toMatch(/^usage: paypolicy serve \[options\]\n/);
    for (const flag of [...Object.keys(SERVE_FLAGS), '--help']) expect(text, flag).toMatch(new RegExp(`^  ${flag}\\b`, 'm'));
    for (const name of ['PAYPOLICY_PORT', 'PAYPOLICY_DATA_DIR', 'PAYPOLICY_ADMIN_TOKEN', 'PAYPOLICY_MASTER_KEY', 'PAYPOLICY_NATIVE_DIR']) expect(text).toContain(name);
  });

  test('behavior: help lists every command with each of its flags; COMMAND ACTION --help and help COMMAND ACTION print the same', async ({ expect }) => {
    const all = await runCli(['help']);
    expect(all).toMatchObject({ code: 0, stderr: '' });
    for (const line of ['  serve [--port N]', '  version [--json]', '  help [COMMAND]']) expect(all.stdout).toContain(line);
    for (const c of COMMANDS) {
      const entry = all.stdout.split('\n').find((l) => l.startsWith(`  ${c.group} ${c.action}`));
      expect(entry, `${c.group} ${c.action}`).toBeDefined();
      for (const flag of Object.keys(c.flags)) expect(entry, `${c.group} ${c.action} ${flag}`).toContain(flag);
    }
    for (const flag of GLOBAL) expect(all.stdout).toMatch(new RegExp(`^  ${flag}\\b`, 'm'));
    expect((await runCli(['--help'])).stdout).toBe(all.stdout);
    expect((await runCli(['-h'])).stdout).toBe(all.stdout);

    const [own, viaHelp, group] = await Promise.all([runCli(['tx', 'list', '--help']), runCli(['help', 'tx', 'list']), runCli(['help', 'tx'])]);
    expect(own).toMatchObject({ code: 0, stderr: '' });
    expect(own.stdout).toMatch(/^usage: paypolicy tx list --org ORG_ID \[--agent AGENT_ID\] \[--status S\]/);
    expect(viaHelp.stdout).toBe(own.stdout);
    expect(group).toMatchObject({ code: 0, stderr: '' });
    expect(group.stdout).toMatch(/^usage: paypolicy tx <action> \[options\]\n/);
  });

  test('behavior: version prints the package version, --json says it is not the single executable here, --help its usage', async ({ expect }) => {
    const [text, json, help, bad] = await Promise.all([runCli(['version']), runCli(['version', '--json']), runCli(['version', '--help']), runCli(['version', '--colour'])]);
    expect(text).toMatchObject({ code: 0, stderr: '' });
    expect(text.stdout).toMatch(/^paypolicy \d+\.\d+\.\d+ \(node v20\.\d+\.\d+\)\n$/);
    expect(JSON.parse(json.stdout)).toEqual({ version: expect.stringMatching(/^\d+\.\d+\.\d+$/), node: process.version, singleExecutable: false });
    expect(help).toMatchObject({ code: 0, stderr: '' });
    expect(help.stdout).toMatch(/^usage: paypolicy version \[--json\]/);
    expect(bad).toMatchObject({ code: 2, stdout: '' });
    expect(bad.stderr).toMatch(/^paypolicy: version takes only --json/);
  });
});

test('property: every flag a command accepts is in its own usage line', () => {
  for (const c of COMMANDS) for (const flag of Object.keys(c.flags)) expect(c.synopsis, `${c.group} ${c.action}`).toContain(flag);
});
