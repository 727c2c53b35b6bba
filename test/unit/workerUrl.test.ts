import { statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, test } from 'vitest';
import { workerUrl } from '../../src/workerUrl.js';

describe('workerUrl', () => {
  test('behavior: under the tests, workers started by source modules are bundled from src/ by this run, never taken from dist/', () => {
    for (const [file, dir] of [['signerWorker.js', 'signing'], ['checkpointWorker.js', 'store'], ['passwordHashWorker.js', 'auth']] as const) {
      const from = new URL(`../../src/${dir}/anything.ts`, import.meta.url).href;
      const url = workerUrl(file, from, dir);
      const path = fileURLToPath(url);
      expect(path).toContain('paypolicy-test-workers');
      expect(path).not.toContain('/dist/');
      const source = fileURLToPath(new URL(`../../src/${dir}/${file.replace(/\.js$/, '.ts')}`, import.meta.url));
      expect(statSync(path).mtimeMs).toBeGreaterThanOrEqual(statSync(source).mtimeMs);
    }
  });
});
