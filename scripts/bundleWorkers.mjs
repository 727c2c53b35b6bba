import { buildSync } from 'esbuild';
import { fileURLToPath } from 'node:url';

/**
 * Bundles the worker threads' entry files with their JavaScript dependencies, as the single
 * executable does. A signing thread that imports viem's package index spends about 450 ms of CPU
 * loading it, against 75 ms for its bundle, and a server starts one to four of them. Native addons
 * stay external and load from node_modules.
 *
 * `npm run build` overwrites tsc's worker files in dist/ with these bundles; the test setup
 * (test/globalSetup.ts) bundles them from src/ into its own directory, so a stale dist/ is never
 * what a test runs.
 */
export const WORKER_ENTRIES = ['src/signing/signerWorker.ts', 'src/store/checkpointWorker.ts', 'src/app/accounts/auth/passwordHashWorker.ts'];
const NATIVE = ['secp256k1', 'better-sqlite3'];

export function bundleWorkers(outdir, extension) {
  buildSync({
    absWorkingDir: fileURLToPath(new URL('..', import.meta.url)), entryPoints: WORKER_ENTRIES, outbase: 'src', outdir,
    outExtension: { '.js': extension }, bundle: true, platform: 'node', target: 'node20', format: 'esm', external: NATIVE, logLevel: 'error',
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) bundleWorkers(fileURLToPath(new URL('../dist/src', import.meta.url)), '.js');
