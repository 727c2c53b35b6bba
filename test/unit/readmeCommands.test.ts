import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { bootstrapBanner } from '../../src/bootstrap.js';

/**
 * Every command the documentation gives runs code from this repository or a path the user built.
 * A package runner given a bare name (`npx name`, `npm exec name`, `pnpm dlx`, `bunx`, an MCP
 * host's `"command": "npx"`) resolves it in the public registry when the package is not installed
 * right there, and would run whatever is published under that name.
 */

const ROOT = join(import.meta.dirname, '../..');

function markdownFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return e.name === 'node_modules' || e.name === 'dist' || e.name.startsWith('.') ? [] : markdownFiles(path);
    return e.name.endsWith('.md') ? [path] : [];
  });
}

const documents = (): Array<[string, string]> => [
  ...[join(ROOT, 'README.md'), join(ROOT, 'clients/typescript/README.md'), ...(existsSync(join(ROOT, 'docs')) ? markdownFiles(join(ROOT, 'docs')) : [])]
    .map((path): [string, string] => [path.slice(ROOT.length + 1), readFileSync(path, 'utf8')]),
  ['the first-start banner', bootstrapBanner({ admin_token: 'pp_admin_x', org_id: 'org_x', api_key: 'ak_test_x', agent_id: 'agt_x', treasury_address: '0x' }, 'http://127.0.0.1:8080', '/tmp/data')],
];

/** What a registry lookup at run time looks like, whatever follows it. */
const RUNNERS = /\b(?:npx|npm exec|npm x|pnpm dlx|pnpx|yarn dlx|bunx)\s+(\S+)(?:\s+(\S+))?/g;

describe('documented commands', () => {
  test('behavior: every package-runner call is --no-install and names a tool installed by npm ci', () => {
    const found: string[] = [];
    for (const [name, text] of documents()) {
      for (const m of text.matchAll(RUNNERS)) {
        const [call, first, second] = m;
        if (first !== '--no-install' || second === undefined || !existsSync(join(ROOT, 'node_modules/.bin', second))) found.push(`${name}: ${call}`);
      }
    }
    expect(found).toEqual([]);
  });

  test('behavior: no MCP or other JSON configuration runs a package runner as its command', () => {
    const found = documents().flatMap(([name, text]) => [...text.matchAll(/"command"\s*:\s*"(npx|pnpx|bunx|npm|pnpm|yarn)"/g)].map((m) => `${name}: ${m[0]}`));
    expect(found).toEqual([]);
  });

  test('behavior: the repository paths commands start with exist', () => {
    const paths = documents().flatMap(([, text]) => [...text.matchAll(/(?:^|[\s`"(])(\.\/[\w./-]+\.(?:js|mjs|sh))\b/gm)].map((m) => m[1]!));
    expect(paths.length).toBeGreaterThan(0);
    expect(paths.filter((p) => !existsSync(join(ROOT, p)))).toEqual([]);
  });
});
