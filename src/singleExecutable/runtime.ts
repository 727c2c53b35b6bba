import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { constants, tmpdir } from 'node:os';
import { basename, join } from 'node:path';

/**
 * What the single executable (`npm run build:binary`, Node's SEA) needs at run time: its embedded
 * assets and its native addons. `__PAYPOLICY_SEA__` is defined only by the executable's bundles
 * (scripts/build-binary.mjs); from dist/ or under vitest it is undeclared and everything here
 * answers "not the executable".
 */
declare const __PAYPOLICY_SEA__: boolean | undefined;
/** Keys of the embedded native addons (`native/<file>.node`), defined by the same build. */
declare const __PAYPOLICY_NATIVE__: readonly string[] | undefined;

type SeaModule = { isSea(): boolean; getAsset(key: string, encoding: 'utf8'): string; getRawAsset(key: string): ArrayBuffer };

/** Environment variable naming where embedded addons are written before dlopen (default the temp dir). */
export const NATIVE_DIR_ENV = 'PAYPOLICY_NATIVE_DIR';

let sea: SeaModule | null | undefined;

function seaModule(): SeaModule | null {
  if (sea === undefined) {
    // Only the executable's bundles reach the require: they are CommonJS (main) or scripts (workers).
    sea = typeof __PAYPOLICY_SEA__ !== 'undefined' && __PAYPOLICY_SEA__ ? (require('node:sea') as SeaModule) : null;
    if (sea && !sea.isSea()) sea = null;
  }
  return sea;
}

/** Whether this code runs inside the single executable. */
export function isSingleExecutable(): boolean {
  return seaModule() !== null;
}

/** An embedded text asset (a worker's source); throws outside the executable or for an unknown key. */
export function embeddedText(key: string): string {
  const s = seaModule();
  if (!s) throw new Error(`embedded asset ${key} is only available in the single executable`);
  return s.getAsset(key, 'utf8');
}

/** An embedded file's bytes, copied out of the executable's read-only mapping. */
export function embeddedBytes(key: string): Buffer {
  const s = seaModule();
  if (!s) throw new Error(`embedded asset ${key} is only available in the single executable`);
  // Never write into getRawAsset's buffer (SIGSEGV): Buffer.from of a Uint8Array copies.
  return Buffer.from(new Uint8Array(s.getRawAsset(key)));
}

const loaded = new Map<string, unknown>();
/** Where each addon this thread loaded was unpacked (the file is gone; the name still matches). */
const paths = new Map<string, string>();
/** Set in a worker by startWorker (addonPathsForWorkers): the main thread's addon paths. */
const inherited = (globalThis as { __paypolicyAddonPaths?: Record<string, string> }).__paypolicyAddonPaths ?? {};

function dlopen(file: string): unknown {
  const module = { exports: {} as unknown };
  process.dlopen(module, file, constants.dlopen.RTLD_NOW);
  return module.exports;
}

/**
 * Loads an embedded native addon (`native/<file>.node`). dlopen needs a real file: it is written to
 * a fresh private directory (mkdtemp, 0700), loaded, and deleted at once; the mapping stays valid
 * and nothing is left behind, even after a crash. A fixed path in a shared temp directory would let
 * another user plant a file there first. Once per addon per thread; a worker thread opens the path
 * the main thread used, which the dynamic loader matches by name to the copy already loaded (as
 * node_modules' one path does outside the executable). Two copies of SQLite in one process would
 * each keep their own table of POSIX locks, and closing a file in one drops the other's locks.
 */
export function loadEmbeddedAddon(key: string): unknown {
  const cached = loaded.get(key);
  if (cached) return cached;
  const s = seaModule();
  if (!s) throw new Error(`native addon ${key} is only embedded in the single executable`);
  const shared = inherited[key];
  if (shared) {
    const exports = dlopen(shared);
    loaded.set(key, exports);
    return exports;
  }
  const base = process.env[NATIVE_DIR_ENV] || tmpdir();
  let dir: string | undefined;
  try {
    dir = mkdtempSync(join(base, 'paypolicy-native-'));
    const file = join(dir, basename(key));
    // The raw asset is the executable's read-only mapping: only ever read from it.
    writeFileSync(file, new Uint8Array(s.getRawAsset(key)), { mode: 0o500 });
    const exports = dlopen(file);
    loaded.set(key, exports);
    paths.set(key, file);
    return exports;
  } catch (err) {
    throw new Error(`cannot load the embedded ${basename(key)} through ${base}: ${(err as Error).message} (set ${NATIVE_DIR_ENV} to a writable directory that allows execution)`, { cause: err });
  } finally {
    if (dir) rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Loads every embedded addon in this (the main) thread, so that all threads share one copy of
 * each, and returns the paths for a worker's source to set as `globalThis.__paypolicyAddonPaths`.
 */
export function addonPathsForWorkers(): Record<string, string> {
  for (const key of typeof __PAYPOLICY_NATIVE__ === 'undefined' ? [] : __PAYPOLICY_NATIVE__) loadEmbeddedAddon(key);
  return { ...inherited, ...Object.fromEntries(paths) };
}
