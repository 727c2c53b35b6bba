import { describe, expect, test } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { defaultMaxConnections, headersTimeoutMs, http1Timeouts, resolveServerLimits } from '../../src/server/limits.js';

describe('resolveServerLimits', () => {
  test('behavior: defaults stay within the bounds the service promises', () => {
    const limits = resolveServerLimits();
    expect(limits.idleTimeoutMs).toBeLessThanOrEqual(120_000);
    expect(limits.maxConcurrentStreams).toBeLessThanOrEqual(1_000);
    expect(limits.requestTimeoutMs).toBe(30_000);
    expect(limits.maxConnections).toBe(defaultMaxConnections());
    expect(limits.maxConnections).toBeGreaterThanOrEqual(64);
    expect(limits.maxConnections).toBeLessThanOrEqual(4096);
  });

  test('behavior: HTTP/1.1 header and keep-alive timeouts never exceed the request and idle timeouts', () => {
    const limits = resolveServerLimits({ requestTimeoutMs: 400, idleTimeoutMs: 300 });
    expect(headersTimeoutMs(limits)).toBe(400);
    expect(http1Timeouts(limits)).toEqual({ requestTimeout: 400, headersTimeout: 400, keepAliveTimeout: 300, connectionsCheckingInterval: 100 });
    expect(headersTimeoutMs(resolveServerLimits())).toBe(15_000);
  });
});

describe('loadConfig limits', () => {
  test('behavior: flags win over the environment; unset means the server default', () => {
    const env = { PAYPOLICY_MAX_CONNECTIONS: '100', PAYPOLICY_IDLE_TIMEOUT_MS: '5000', PAYPOLICY_REQUEST_TIMEOUT_MS: '7000' };
    expect(loadConfig(['--max-connections', '200'], env)).toMatchObject({ maxConnections: 200, idleTimeoutMs: 5000, requestTimeoutMs: 7000 });
    expect(loadConfig([], {})).toMatchObject({ maxConnections: undefined, idleTimeoutMs: undefined, requestTimeoutMs: undefined });
  });

  test.each([
    ['--max-connections', '0'],
    ['--max-connections', '-1'],
    ['--max-connections', '12.5'],
    ['--idle-timeout-ms', '99'],
    ['--idle-timeout-ms', 'soon'],
    ['--request-timeout-ms', '600001'],
  ])('error: %s %s is refused with one line', (flag, value) => {
    expect(() => loadConfig([flag, value], {})).toThrow(ConfigError);
    expect(() => loadConfig([flag, value], {})).toThrow(new RegExp(`^${flag} must be an integer`));
  });
});
