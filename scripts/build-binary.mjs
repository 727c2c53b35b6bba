#!/usr/bin/env node
// `npm run build:binary`: one self-contained Linux executable, dist/paypolicy, built with Node's
// single executable applications (SEA) from the node running this script. Steps: esbuild bundles
// the CLI/server (CommonJS, as SEA requires) and each worker thread (a plain script, run with
// `eval: true`); the workers and the native addons are embedded as SEA assets; the blob is
// injected with postject into a stripped copy of node. Paths in the SEA config are relative, so
// no path of the build machine ends up in the executable. Nothing here is committed.
import { execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
process.chdir(root);
const out = 'dist/sea';
const exe = 'dist/paypolicy';
// Built under another name and renamed once checked: a failed build never leaves plain node as dist/paypolicy.
const partial = join(out, 'paypolicy.partial');
const require = createRequire(join(root, 'package.json'));
const pkg = require('./package.json');
const started = Date.now();

if (process.platform !== 'linux' || process.arch !== 'x64') throw new Error(`build:binary builds for linux-x64 only (this is ${process.platform}-${process.arch})`);

/** Workers: the file name startWorker() asks for, and their source entry. */
const WORKERS = {
  'signerWorker.js': 'src/signing/signerWorker.ts',
  'passwordHashWorker.js': 'src/app/accounts/auth/passwordHashWorker.ts',
  'checkpointWorker.js': 'src/store/checkpointWorker.ts',
};

/** Other files modules read beside themselves (readBuiltFile), emitted by `npm run build`. */
const BUILT_FILES = {
  'dashboard/static/client.js': 'dist/src/dashboard/static/client.js',
};

/** Native addons: the key the shims load, and the file in node_modules. */
const NATIVE = {
  'native/better_sqlite3.node': 'node_modules/better-sqlite3/build/Release/better_sqlite3.node',
  'native/secp256k1.node': 'node_modules/secp256k1/prebuilds/linux-x64/secp256k1.glibc.node',
};

/**
 * Packages that find their addon next to themselves at run time are swapped for the embedded
 * ones. `secp256k1` resolves straight to its native bindings: its index.js would otherwise fall
 * back, silently, to a pure-JS build about 40x slower when the addon fails to load.
 */
const nativeShims = {
  name: 'paypolicy-native-shims',
  setup(b) {
    b.onResolve({ filter: /^bindings$/ }, () => ({ path: join(root, 'scripts/sea/bindings.cjs') }));
    b.onResolve({ filter: /^node-gyp-build$/ }, (args) => {
      if (!args.importer.includes(`${join('node_modules', 'secp256k1')}`)) return { errors: [{ text: `unexpected node-gyp-build user ${args.importer}: embed its addon first` }] };
      return { path: join(root, 'scripts/sea/node-gyp-build.cjs') };
    });
    b.onResolve({ filter: /^secp256k1$/ }, () => ({ path: join(root, 'node_modules/secp256k1/bindings.js') }));
  },
};

const common = {
  bundle: true,
  platform: 'node',
  target: 'node20',
  legalComments: 'none',
  logLevel: 'warning',
  define: {
    __PAYPOLICY_SEA__: 'true',
    __PAYPOLICY_VERSION__: JSON.stringify(pkg.version),
    __PAYPOLICY_NATIVE__: JSON.stringify(Object.keys(NATIVE)),
    // Modules pass import.meta.url to startWorker/readBuiltFile, which ignore it in the executable;
    // anything else that resolves a file from it fails with this path in the message.
    'import.meta.url': JSON.stringify('file:///paypolicy-single-executable/no-files-here/'),
  },
  plugins: [nativeShims],
  // Optional speed-ups of ws (through viem) that are not installed; ws runs without them.
  external: ['bufferutil', 'utf-8-validate'],
};

rmSync(out, { recursive: true, force: true });
rmSync(exe, { force: true });
mkdirSync(join(out, 'workers'), { recursive: true });

await build({ ...common, format: 'cjs', entryPoints: ['src/singleExecutable/entry.ts'], outfile: join(out, 'main.cjs') });
for (const [file, entry] of Object.entries(WORKERS)) {
  // A script, not CommonJS: eval'd code has no module wrapper, and a bundle's top-level
  // `var crypto` would collide with the read-only globalThis.crypto.
  await build({ ...common, format: 'iife', entryPoints: [entry], outfile: join(out, 'workers', file) });
}

const assets = {};
for (const file of Object.keys(WORKERS)) assets[`workers/${file}`] = join(out, 'workers', file);
for (const [key, file] of Object.entries({ ...BUILT_FILES, ...NATIVE })) {
  if (!existsSync(file)) throw new Error(`${file} is missing; run \`npm ci\` (which builds dist/) first`);
  assets[key] = file;
}
const config = {
  main: join(out, 'main.cjs'),
  output: join(out, 'sea-prep.blob'),
  disableExperimentalSEAWarning: true,
  useCodeCache: false,
  assets,
};
writeFileSync(join(out, 'sea-config.json'), `${JSON.stringify(config, null, 2)}\n`);
execFileSync(process.execPath, ['--experimental-sea-config', join(out, 'sea-config.json')], { stdio: ['ignore', 'ignore', 'inherit'] });

copyFileSync(process.execPath, partial);
chmodSync(partial, 0o755);
// Strip before injecting (-12 MiB); stripping after injection breaks the executable.
try {
  execFileSync('strip', ['--strip-all', partial], { stdio: 'inherit' });
} catch (err) {
  if (err.code !== 'ENOENT') throw err;
  process.stderr.write('build:binary: `strip` not found; the executable keeps node\'s symbols (+12 MiB)\n');
}
const postject = join(root, 'node_modules/.bin/postject');
if (!existsSync(postject)) throw new Error('postject is not installed; run `npm ci` first');
execFileSync(postject, [partial, 'NODE_SEA_BLOB', config.output, '--sentinel-fuse', 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2'], {
  // postject warns "Can't find string offset for section name '.note.100'"; harmless.
  stdio: ['ignore', 'ignore', 'pipe'],
});

// A failed injection leaves plain node, which exits 0 saying nothing: ask the result what it is.
const version = JSON.parse(execFileSync(join(root, partial), ['version', '--json'], { env: {}, encoding: 'utf8' }));
if (version.singleExecutable !== true) throw new Error(`${partial} is not a single executable: ${JSON.stringify(version)}`);
renameSync(partial, exe);
const mib = (statSync(exe).size / 1024 / 1024).toFixed(1);
process.stdout.write(`build:binary: ${relative(process.cwd(), exe)} (${mib} MiB, paypolicy ${version.version}, node ${version.node}) in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
