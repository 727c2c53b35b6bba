import { statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { once } from 'node:events';
import { describe, expect, test } from 'vitest';
import { startWorker, WORKER_YOUNG_GENERATION_MB, workerUrl } from '../../src/singleExecutable/workerFiles.js';

describe('workerUrl', () => {
  test('behavior: under the tests, workers started by source modules are bundled from src/ by this run, never taken from dist/', () => {
    for (const [file, dir] of [['signerWorker.js', 'signing'], ['checkpointWorker.js', 'store'], ['passwordHashWorker.js', 'app/accounts/auth']] as const) {
      const from = new URL(`../../src/${dir}/anything.ts`, import.meta.url).href;
      const url = workerUrl(file, from, dir);
      const path = fileURLToPath(url);
      expect(path).toContain('paypolicy-test-workers');
      expect(path).not.toContain('/dist/');
      const source = fileURLToPath(new URL(`../../src/${dir}/${file.replace(/\.js$/, '.ts')}`, import.meta.url));
      expect(statSync(path).mtimeMs).toBeGreaterThanOrEqual(statSync(source).mtimeMs);
    }
  });

  test(`behavior: startWorker gives each thread a ${WORKER_YOUNG_GENERATION_MB} MB young generation; a caller's own limit wins`, async () => {
    const from = new URL('../../src/signing/anything.ts', import.meta.url).href;
    const limited = startWorker('signerWorker.js', from, 'signing');
    const chosen = startWorker('signerWorker.js', from, 'signing', { resourceLimits: { maxYoungGenerationSizeMb: 12, stackSizeMb: 2 } });
    try {
      await Promise.all([once(limited, 'online'), once(chosen, 'online')]);
      expect(limited.resourceLimits?.maxYoungGenerationSizeMb).toBe(WORKER_YOUNG_GENERATION_MB);
      expect(chosen.resourceLimits).toMatchObject({ maxYoungGenerationSizeMb: 12, stackSizeMb: 2 });
    } finally {
      await Promise.all([limited.terminate(), chosen.terminate()]);
    }
  });
});
