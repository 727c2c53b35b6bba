import { describe, expect, test } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';

// Another replica repairs a payment left in `signing` for --stale-signing-ms; a live replica's
// payment may wait up to --max-queue-ms to be signed. A threshold below that wait would let replicas
// fail each other's live payments under load (500s): refused at start.
describe('--stale-signing-ms against --max-queue-ms', () => {
  test('error: a repair threshold below the signing wait is refused, naming both', () => {
    expect(() => loadConfig(['--stale-signing-ms', '1000', '--max-queue-ms', '30000'], {})).toThrow(ConfigError);
    expect(() => loadConfig([], { PAYPOLICY_STALE_SIGNING_MS: '1500', PAYPOLICY_MAX_QUEUE_MS: '2000' })).toThrow(/--stale-signing-ms \(1500\) must be at least --max-queue-ms \(2000\)/);
    // Against the default wait (1 s) too.
    expect(() => loadConfig(['--stale-signing-ms', '999'], {})).toThrow(ConfigError);
  });
  test('behavior: equal or above is accepted, and either alone keeps the other at its default', () => {
    expect(loadConfig(['--stale-signing-ms', '30000', '--max-queue-ms', '30000'], {}).staleSigningMs).toBe(30000);
    expect(loadConfig(['--stale-signing-ms', '1000'], {}).staleSigningMs).toBe(1000);
    expect(loadConfig(['--max-queue-ms', '5000'], {}).staleSigningMs).toBeUndefined();
  });
});
