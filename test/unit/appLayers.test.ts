import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';

/**
 * The shape of the use-case layer: use cases write only through the unit of work (deps.uow), never
 * the store's connection or commit machinery, and src/app has no import cycle.
 */
const APP = join(import.meta.dirname, '../../src/app');
const files = tsFilesUnder('app').map((f) => f.slice('app/'.length));
const source = (f: string) => readFileSync(join(APP, f), 'utf8');

describe('src/app layering', () => {
  test('behavior: no use case imports store/db.ts or reaches the connection or the write queue', () => {
    const offending = files.filter((f) => /from '(?:\.\.\/)+store\/(db|writeQueue|walSync)\.js'|\bstore\.(db|writes)\b|\bwriteTxn\(/.test(source(f)));
    expect(offending).toEqual([]);
  });

  test('behavior: no use case imports a store driver module (PostgreSQL errors are mapped inside the store)', () => {
    const offending = files.filter((f) => /from '(?:\.\.\/)+store\/pg\//.test(source(f)));
    expect(offending).toEqual([]);
  });
});

/** Every .ts file under a folder of src, with its path from src. */
function tsFilesUnder(dir: string): string[] {
  const root = join(import.meta.dirname, '../../src');
  const walk = (rel: string): string[] => readdirSync(join(root, rel), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? walk(join(rel, e.name)) : e.name.endsWith('.ts') ? [join(rel, e.name)] : []);
  return walk(dir);
}

describe('transports', () => {
  test('behavior: REST, RPC, the dashboard and the HTTP plumbing import no store module, not even its types', () => {
    const src = join(import.meta.dirname, '../../src');
    const transportFiles = ['rest', 'rpc', 'dashboard', 'http'].flatMap(tsFilesUnder);
    expect(transportFiles.length).toBeGreaterThan(20);
    const offending = transportFiles.filter((f) => /from '(?:\.\.\/)+store\//.test(readFileSync(join(src, f), 'utf8')));
    expect(offending).toEqual([]);
  });
});
