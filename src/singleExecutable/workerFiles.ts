import { existsSync, readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { Worker, type WorkerOptions } from 'node:worker_threads';
import { addonPathsForWorkers, embeddedBytes, embeddedText, isSingleExecutable } from './runtime.js';

/**
 * Locates a worker thread's compiled entry file. In dist/ it sits next to the module that starts
 * it. Under vitest that module runs from src/*.ts, where Node cannot start a .ts worker: the test
 * setup bundles the workers from the same sources (test/globalSetup.ts) and names the directory
 * in PAYPOLICY_TEST_WORKERS_DIR, so a stale build is never what is tested; without it, dist/.
 */
export function workerUrl(file: string, from: string, builtDir: string): URL {
  const here = new URL(`./${file}`, from);
  if (existsSync(here)) return here;
  const fromSource = process.env.PAYPOLICY_TEST_WORKERS_DIR;
  if (fromSource && file.endsWith('Worker.js') && from.endsWith('.ts')) {
    return pathToFileURL(`${fromSource}/${builtDir}/${file.replace(/\.js$/, '.mjs')}`);
  }
  const built = new URL(`../../dist/src/${builtDir}/${file}`, from);
  if (existsSync(built)) return built;
  throw new Error(`worker ${file} is not built; run \`npm run build\``);
}

/**
 * Young generation of every worker thread's heap, in MB (V8 splits it into two 2 MB semi-spaces).
 * Node's default is 48 MB: under load the signing thread grew its young generation to 16 MB and
 * kept it. What it allocates per job dies within the job (a scavenge finds almost nothing alive),
 * so a small young generation only means more, equally cheap scavenges: measured on the signing
 * thread, 123-124 µs of CPU per EIP-3009 job either way, and 11 MB less resident memory.
 */
export const WORKER_YOUNG_GENERATION_MB = 6;

/**
 * Starts a worker thread from its entry file (see workerUrl). In the single executable there is
 * no file: the worker's own bundle is embedded as `workers/<file>` and run with `eval: true`
 * (scripts/build-binary.mjs builds it as a script, since eval'd code gets no module wrapper).
 * Its young generation is WORKER_YOUNG_GENERATION_MB unless `options.resourceLimits` says otherwise.
 */
export function startWorker(file: string, from: string, builtDir: string, options: WorkerOptions = {}): Worker {
  const limited: WorkerOptions = { ...options, resourceLimits: { maxYoungGenerationSizeMb: WORKER_YOUNG_GENERATION_MB, ...options.resourceLimits } };
  if (isSingleExecutable()) {
    // The worker reuses the main thread's native addons (see loadEmbeddedAddon).
    const prelude = `globalThis.__paypolicyAddonPaths = ${JSON.stringify(addonPathsForWorkers())};\n`;
    return new Worker(prelude + embeddedText(`workers/${file}`), { ...limited, eval: true });
  }
  return new Worker(workerUrl(file, from, builtDir), limited);
}

/**
 * Reads another file the build emits beside a module (the dashboard's compiled script), found as
 * workerUrl finds workers. In the single executable it is embedded as `<builtDir>/<file>`.
 */
export function readBuiltFile(file: string, from: string, builtDir: string): Buffer {
  if (isSingleExecutable()) return embeddedBytes(`${builtDir}/${file}`);
  return readFileSync(workerUrl(file, from, builtDir));
}
