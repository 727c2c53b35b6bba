import { fileURLToPath } from 'node:url';
// @ts-expect-error: a plain .mjs build script without type declarations.
import { bundleWorkers } from '../scripts/bundleWorkers.mjs';

/**
 * Worker threads cannot start from .ts files; running the workers from dist/ instead would test a
 * stale build whenever dist/ lags behind src/. Once per test run, the workers are bundled from src/ here
 * and src/singleExecutable/workerFiles.ts starts them from this directory whenever the code under
 * test itself runs from source.
 */
export default function setup(): void {
  const outdir = fileURLToPath(new URL('../node_modules/.cache/paypolicy-test-workers', import.meta.url));
  (bundleWorkers as (outdir: string, extension: string) => void)(outdir, '.mjs');
  process.env.PAYPOLICY_TEST_WORKERS_DIR = outdir;
}
