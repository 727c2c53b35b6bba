import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, test } from 'vitest';

/**
 * The source reads top-down: a module imports only from its own layer or a lower one, and no
 * module imports itself back through others. Layers, lowest first (the longest matching path wins):
 *
 *   0  domain, overload               pure rules and the admission bound
 *   1  chain, paywalls, signing,      what the use cases drive: the EVM, paywalls, keys, storage,
 *      store, observability/logger,   logging and worker files
 *      singleExecutable (runtime)
 *   2  app                            use cases (capabilities below, in their own order)
 *   3  observability, protoMapping,   what transports share: metrics, readiness, proto messages,
 *      http                           HTTP plumbing
 *   4  rest, rpc, dashboard           transports
 *   5  server                         the listener that mounts them
 *   6  cli, config, bootstrap, the    entry points and composition
 *      composition root, entries
 *
 * Inside app, capabilities are ordered too, so none reaches back into one that builds on it:
 * accounts < registry < organizations < payments < approvals, submission. Accounts and the registry
 * need of organizations only the scope check, which sits with the other access rules at app's
 * root; an agent's allowlist names registry services, so organizations build on the registry.
 * Payments hand work to submission only through the Submitter contract (app/submitter.ts), so
 * the background submitter can build on payments (it re-checks policy before a fee bump). App's
 * own root files (deps, unit of work, access rules, the owned process-wide objects) sit below all.
 */
const SRC = resolve(import.meta.dirname, '../../src');

const LAYERS: Array<[prefix: string, rank: number]> = [
  ['domain/', 0], ['overload/', 0],
  ['chain/', 1], ['paywalls/', 1], ['signing/', 1], ['store/', 1], ['observability/logger.ts', 1],
  ['singleExecutable/', 1],
  ['app/', 2],
  ['observability/', 3], ['protoMapping/', 3], ['http/', 3],
  ['rest/', 4], ['rpc/', 4], ['dashboard/', 4],
  ['server/', 5],
  ['cli/', 6], ['config.ts', 6], ['bootstrap.ts', 6], ['paypolicy.ts', 6], ['main.ts', 6], ['singleExecutable/entry.ts', 6],
];

const APP_ORDER: Array<[prefix: string, rank: number]> = [
  ['app/deps.ts', 0], ['app/withinWrite.ts', 0], ['app/access.ts', 0], ['app/dashboardRoles.ts', 0],
  ['app/signsInFlight.ts', 0], ['app/strandedPayments.ts', 0], ['app/submitter.ts', 0],
  ['app/accounts/', 1], ['app/registry/', 2], ['app/organizations/', 3], ['app/payments/', 4],
  ['app/approvals/', 5], ['app/submission/', 5],
];

function rankOf(table: Array<[string, number]>, file: string): number | undefined {
  let best: [string, number] | undefined;
  for (const entry of table) if (file.startsWith(entry[0]) && (!best || entry[0].length > best[0].length)) best = entry;
  return best?.[1];
}

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? tsFiles(join(dir, e.name)) : e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [join(dir, e.name)] : []);
}

/** Every src file (path from src/) with the src files it imports or re-exports, types included. */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const abs of tsFiles(SRC)) {
    const text = readFileSync(abs, 'utf8');
    const targets = [...text.matchAll(/(?:import|export)\s[^'";]*?from\s+'(\.{1,2}\/[^']+)\.js'|import\('(\.{1,2}\/[^']+)\.js'\)/g)]
      .map((m) => relative(SRC, resolve(dirname(abs), `${m[1] ?? m[2]}.ts`)))
      .filter((t) => !t.startsWith('..'));
    graph.set(relative(SRC, abs), targets);
  }
  return graph;
}

describe('import graph of src/', () => {
  const graph = importGraph();

  test('behavior: every src file belongs to a layer', () => {
    expect(graph.size).toBeGreaterThan(150);
    expect([...graph.keys()].filter((f) => rankOf(LAYERS, f) === undefined)).toEqual([]);
    expect([...graph.keys()].filter((f) => f.startsWith('app/') && rankOf(APP_ORDER, f) === undefined)).toEqual([]);
  });

  test('behavior: no import climbs from a lower layer to a higher one (store → app included)', () => {
    const upward: string[] = [];
    for (const [file, targets] of graph) {
      for (const target of targets) {
        if (rankOf(LAYERS, target)! > rankOf(LAYERS, file)!) upward.push(`${file} -> ${target}`);
      }
    }
    expect(upward).toEqual([]);
  });

  test('behavior: inside app, no capability imports one that builds on it', () => {
    const upward: string[] = [];
    for (const [file, targets] of graph) {
      if (!file.startsWith('app/')) continue;
      for (const target of targets) {
        if (target.startsWith('app/') && rankOf(APP_ORDER, target)! > rankOf(APP_ORDER, file)!) upward.push(`${file} -> ${target}`);
      }
    }
    expect(upward).toEqual([]);
  });

  test('behavior: the import graph has no cycle', () => {
    const cycles: string[] = [];
    const done = new Set<string>();
    const visit = (file: string, path: string[]) => {
      const at = path.indexOf(file);
      if (at >= 0) {
        cycles.push([...path.slice(at), file].join(' -> '));
        return;
      }
      if (done.has(file)) return;
      for (const next of graph.get(file) ?? []) visit(next, [...path, file]);
      done.add(file);
    };
    for (const file of graph.keys()) visit(file, []);
    expect(cycles).toEqual([]);
  });
});
