import { buildSync } from 'esbuild';
import { fileURLToPath } from 'node:url';

/**
 * Worker threads cannot start from .ts files; running the workers from dist/ instead would test a
 * stale build whenever dist/ lags behind src/. Once per test run, the workers are bundled from src/ here
 * (dependencies stay external and resolve from node_modules) and src/singleExecutable/workerFiles.ts starts them
 * from this directory whenever the code under test itself runs from source.
 */
const WORKERS = ['src/signing/signerWorker.ts', 'src/store/checkpointWorker.ts', 'src/app/accounts/auth/passwordHashWorker.ts'];

export default function setup(): void {
  const root = fileURLToPath(new URL('..', import.meta.url));
  const outdir = `${root}node_modules/.cache/paypolicy-test-workers`;
  buildSync({
    absWorkingDir: root, entryPoints: WORKERS, outbase: 'src', outdir, outExtension: { '.js': '.mjs' },
    bundle: true, platform: 'node', target: 'node20', format: 'esm', packages: 'external', logLevel: 'error',
  });
  process.env.PAYPOLICY_TEST_WORKERS_DIR = outdir;
}
