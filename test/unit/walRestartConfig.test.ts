import { describe, expect, test } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';

describe('--wal-restart-mb', () => {
  test('behavior: unset by default (the store keeps 32 MiB), a flag or its variable sets it', () => {
    expect(loadConfig([], {}).walRestartMb).toBeUndefined();
    expect(loadConfig(['--wal-restart-mb', '8'], {}).walRestartMb).toBe(8);
    expect(loadConfig([], { PAYPOLICY_WAL_RESTART_MB: '48' }).walRestartMb).toBe(48);
    expect(loadConfig(['--wal-restart-mb', '16'], { PAYPOLICY_WAL_RESTART_MB: '48' }).walRestartMb).toBe(16);
  });

  test('error: anything but a whole number of MiB from 1 to 1024 is refused, naming the flag', () => {
    for (const bad of ['0', '1025', '-1', '1.5', 'big', '']) {
      expect(() => loadConfig(['--wal-restart-mb', bad], {}), bad).toThrow(ConfigError);
    }
    expect(() => loadConfig(['--wal-restart-mb', '0'], {})).toThrow(/--wal-restart-mb/);
  });
});
