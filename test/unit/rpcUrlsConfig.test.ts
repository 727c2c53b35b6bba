import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';

describe('--rpc-url and PAYPOLICY_RPC_URLS', () => {
  it('reads both; a flag replaces the environment entry for its chain', () => {
    const c = loadConfig(['--rpc-url', '84532=http://127.0.0.1:9', '--rpc-url=10=https://n.example/k'], { PAYPOLICY_RPC_URLS: '8453=https://a.example, 84532=https://b.example' });
    expect([...c.rpcUrls!]).toEqual([[8453, 'https://a.example'], [84532, 'http://127.0.0.1:9'], [10, 'https://n.example/k']]);
    expect(loadConfig([], {}).rpcUrls!.size).toBe(0);
  });
  it('refuses malformed entries without echoing the URL', () => {
    expect(() => loadConfig(['--rpc-url', 'https://secret.example/key123'], {})).toThrow(ConfigError);
    expect(() => loadConfig(['--rpc-url', '0=http://x'], {})).toThrow(/positive integer chain id/);
    expect(() => loadConfig(['--rpc-url', '8453=ftp://x'], {})).toThrow(/CHAIN_ID=http/);
    expect(() => loadConfig([], { PAYPOLICY_RPC_URLS: '8453=http://a,8453=http://b' })).toThrow(/more than once/);
    try {
      loadConfig(['--rpc-url', '8453=ftp://user:key123@x'], {});
    } catch (err) {
      expect(String(err)).not.toContain('key123');
    }
  });
});
