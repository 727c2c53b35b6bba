import { existsSync } from 'node:fs';

/**
 * Locates a worker thread's compiled entry file. In dist/ it sits next to the module that starts
 * it. Under vitest that module runs from src/*.ts, where Node cannot start a .ts worker, so the
 * build output is used instead (`npm test` builds first).
 */
export function workerUrl(file: string, from: string, builtDir: string): URL {
  const here = new URL(`./${file}`, from);
  if (existsSync(here)) return here;
  const built = new URL(`../../dist/src/${builtDir}/${file}`, from);
  if (existsSync(built)) return built;
  throw new Error(`worker ${file} is not built; run \`npm run build\``);
}
