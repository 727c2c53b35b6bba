import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';

/**
 * The README's Layout section is where a newcomer looks up what a folder is for, so it names every
 * folder of src/ and every top-level folder of the repository. Reads files only: a top-level
 * folder counts unless .gitignore ignores it (node_modules/, dist/, data/, …) or it is .git.
 */

const ROOT = join(import.meta.dirname, '../..');

/** The text of the README's `## Layout` section, up to the next `## ` heading. */
function layoutSection(readme: string): string | undefined {
  const start = readme.search(/^## Layout\s*$/m);
  if (start < 0) return undefined;
  const rest = readme.slice(start);
  const next = rest.slice(1).search(/^## /m);
  return next < 0 ? rest : rest.slice(0, next + 1);
}

/** Folder names that .gitignore ignores at the top level: lines such as `dist/` or `/data/`, without wildcards. */
function ignoredFolders(): Set<string> {
  const path = join(ROOT, '.gitignore');
  if (!existsSync(path)) return new Set();
  return new Set(readFileSync(path, 'utf8').split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#') && !l.startsWith('!') && !/[*?[]/.test(l))
    .map((l) => l.replace(/^\//, '').replace(/\/$/, ''))
    .filter((l) => !l.includes('/')));
}

function folders(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name).sort();
}

/** Whether the section names `path/` as a path of its own (at a line start or after a space, backtick or parenthesis). */
function names(section: string, path: string): boolean {
  const escaped = path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`(?:^|[\\s\`(])${escaped}/`, 'm').test(section);
}

describe('README Layout', () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const section = layoutSection(readme);

  test('behavior: the README has a Layout section', () => {
    expect(section, 'README.md lacks a "## Layout" section').toBeDefined();
  });

  test('behavior: every folder of src/ is in the Layout section', () => {
    const src = folders(join(ROOT, 'src'));
    expect(src.length).toBeGreaterThan(5);
    expect(src.filter((d) => !names(section ?? '', `src/${d}`)).map((d) => `src/${d}/`)).toEqual([]);
  });

  test('behavior: every tracked top-level folder is in the Layout section', () => {
    const ignored = ignoredFolders();
    const top = folders(ROOT).filter((d) => d !== '.git' && !ignored.has(d));
    for (const d of ['src', 'test', 'docs']) expect(top).toContain(d);
    expect(top.filter((d) => !names(section ?? '', d)).map((d) => `${d}/`)).toEqual([]);
  });

  test('behavior: the check finds a folder only as a path of its own', () => {
    const sample = '```\nsrc/app/      use cases\nsrc/rest/  src/rpc/   transports\n.ci/  CI\n```\n';
    expect(names(sample, 'src/app')).toBe(true);
    expect(names(sample, 'src/rpc')).toBe(true);
    expect(names(sample, '.ci')).toBe(true);
    expect(names(sample, 'src/ap')).toBe(false);
    expect(names(sample, 'app')).toBe(false);
    expect(names(sample, 'ci')).toBe(false);
    expect(layoutSection('# x\n## Layout\nsrc/a/\n## Next\nsrc/b/\n')).toBe('## Layout\nsrc/a/\n');
  });
});
