import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';

/**
 * `npm pack` of @paypolicy/client installs into an empty folder, offline (from the npm cache the
 * root install filled; only the package's own declared dependencies are needed), and imports
 * without any of the server's dependencies. The library entry needs neither the MCP SDK nor any
 * Node built-in, so it runs wherever fetch exists.
 */

const PKG = fileURLToPath(new URL('../../clients/typescript/', import.meta.url));
const REGISTRY = (() => {
  const r = execFileSync('npm', ['config', 'get', 'registry'], { encoding: 'utf8' }).trim();
  return r.endsWith('/') ? r : `${r}/`;
})();
const SERVER_DEPS = ["better-sqlite3", "secp256k1", "viem", "pino", "@fastify", "prom-client"];

let work: string;
let app: string;
let packed: { files: Array<{ path: string }>; integrity: string; filename: string };

type LockEntry = Record<string, unknown> & { dependencies?: Record<string, string>; optionalDependencies?: Record<string, string> };

/**
 * The root lockfile's entries for the client's dependency closure, found the way Node resolves
 * (nearest node_modules first). npm caches tarballs, not every registry document, so the app gets
 * a lockfile: `npm ci --offline` then needs nothing but the cached tarballs of declared deps.
 */
function clientClosure(): Record<string, LockEntry> {
  const lock = JSON.parse(readFileSync(join(PKG, '../../package-lock.json'), 'utf8')) as { packages: Record<string, LockEntry> };
  const out: Record<string, LockEntry> = {};
  const visit = (from: string, name: string, optional: boolean) => {
    for (let base = from; ; base = base.includes('/node_modules/') ? base.slice(0, base.lastIndexOf('/node_modules/')) : '') {
      const path = `${base === '' ? '' : `${base}/`}node_modules/${name}`;
      const entry = lock.packages[path];
      if (entry) {
        if (out[path]) return;
        const { dev: _d, devOptional: _o, peer: _p, ...clean } = entry;
        // This machine writes lockfiles without `resolved` (omit-lockfile-registry-resolved); the
        // registry's tarball address lets npm find the tarball in its cache by integrity.
        const unscoped = name.slice(name.lastIndexOf('/') + 1);
        out[path] = { resolved: `${REGISTRY}${name}/-/${unscoped}-${String(entry.version)}.tgz`, ...clean };
        for (const dep of Object.keys(entry.dependencies ?? {})) visit(path, dep, false);
        for (const dep of Object.keys(entry.optionalDependencies ?? {})) visit(path, dep, true);
        return;
      }
      if (base === '') break;
    }
    if (!optional) throw new Error(`${name} (needed by ${from}) is not in the root lockfile`);
  };
  const client = lock.packages['clients/typescript']!;
  for (const dep of Object.keys(client.dependencies ?? {})) visit('clients/typescript', dep, false);
  return out;
}

const npm = (args: string[], cwd: string) => execFileSync('npm', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, npm_config_update_notifier: 'false' } });
const node = (code: string) => execFileSync(process.execPath, ['--input-type=module', '-e', code], { cwd: app, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'paypolicy-pack-'));
  [packed] = JSON.parse(npm(['pack', '--json', '--pack-destination', work], PKG));
  app = join(work, 'app');
  execFileSync('mkdir', [app]);
  const spec = `file:../${packed.filename}`;
  const manifest = JSON.parse(readFileSync(join(PKG, 'package.json'), 'utf8'));
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'agent-app', private: true, type: 'module', dependencies: { '@paypolicy/client': spec } }));
  writeFileSync(join(app, 'package-lock.json'), JSON.stringify({
    name: 'agent-app', lockfileVersion: 3, requires: true,
    packages: {
      '': { name: 'agent-app', dependencies: { '@paypolicy/client': spec } },
      'node_modules/@paypolicy/client': {
        version: manifest.version, resolved: spec, integrity: packed.integrity, license: manifest.license,
        dependencies: manifest.dependencies, bin: manifest.bin, engines: manifest.engines,
      },
      ...clientClosure(),
    },
  }));
  npm(['ci', '--offline', '--no-audit', '--no-fund', '--ignore-scripts'], app);
}, 120_000);

afterAll(() => {
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('npm pack of @paypolicy/client', () => {
  test('behavior: the tarball holds the built package only (no sources, tests or server code)', () => {
    const paths = packed.files.map((f) => f.path);
    expect(paths).toContain('dist/index.js');
    expect(paths).toContain('dist/index.d.ts');
    expect(paths).toContain('dist/mcp/server.js');
    expect(paths).toContain('dist/gen/paypolicy/v1/payment_policy_pb.js');
    expect(paths).toContain('dist/bin.js');
    expect(paths).toContain('README.md');
    expect(paths.filter((p) => !p.startsWith('dist/') && !['package.json', 'README.md'].includes(p))).toEqual([]);
  });

  test('behavior: installs offline into an empty folder with none of the server\'s dependencies', () => {
    const installed = readdirSync(join(app, 'node_modules'));
    expect(installed).toContain('@paypolicy');
    expect(installed).toContain('@modelcontextprotocol');
    for (const dep of SERVER_DEPS) expect(installed, dep).not.toContain(dep);
    // The Connect entry needs the runtime only, never connect-node (transports are the caller's).
    expect(readdirSync(join(app, 'node_modules/@connectrpc'))).toEqual(['connect']);
  });

  test('behavior: imports and works; the library entry loads without the MCP SDK', () => {
    const api = 'const m = await import("@paypolicy/client"); const c = m.createClient({ baseUrl: "http://127.0.0.1:1", apiKey: "ak_test_x" });'
      + 'const e = new m.PaypolicyError("x", { code: "policy_denied", status: 403 });'
      + 'console.log(JSON.stringify([Object.keys(m).sort(), typeof c.sign, typeof m.createPayingFetch({ client: c, agentId: "agt_x", maxAmountUsd: "1" }), e.toJSON()]))';
    const expected = [
      ['PaypolicyError', 'createClient', 'createPayingFetch', 'formatMicros', 'isPaypolicyError', 'usdToMicros'], 'function', 'function',
      { error: 'x', code: 'policy_denied', status: 403, retryable: false },
    ];
    expect(JSON.parse(node(api))).toEqual(expected);
    expect(node('const m = await import("@paypolicy/client/mcp"); console.log(typeof m.createPaypolicyMcpServer)').trim()).toBe('function');
    expect(node('const m = await import("@paypolicy/client/connect"); console.log(m.PaymentPolicyService.typeName)').trim()).toBe('paypolicy.v1.PaymentPolicyService');
    // Without the MCP SDK, zod and the Connect runtime, the library still imports; only the other entries need them.
    for (const dep of ['@modelcontextprotocol', 'zod', '@connectrpc', '@bufbuild']) rmSync(join(app, 'node_modules', dep), { recursive: true });
    expect(JSON.parse(node(api))).toEqual(expected);
    expect(() => node('await import("@paypolicy/client/mcp")')).toThrow(/@modelcontextprotocol\/sdk/);
  });

  test('behavior: the library entry imports no Node built-in (it runs wherever fetch exists)', () => {
    const dist = join(app, 'node_modules/@paypolicy/client/dist');
    const library = readdirSync(dist).filter((f) => f.endsWith('.js') && f !== 'bin.js' && f !== 'connect.js');
    expect(library.length).toBeGreaterThan(4);
    for (const file of library) {
      const text = readFileSync(join(dist, file), 'utf8');
      expect([file, /from ['"](node:|fs|path|http|crypto|process)['"]|require\(|process\./.test(text)]).toEqual([file, false]);
    }
    expect(existsSync(join(dist, 'mcp/server.js'))).toBe(true);
  });
});
