import { describe, expect, test } from 'vitest';
import { isBlockedAddress, isBlockedHostname } from '../../src/probe/addressPolicy.js';

describe('isBlockedAddress', () => {
  test.each([
    '0.0.0.0',
    '0.255.255.255',
    '10.0.0.0',
    '10.255.255.255',
    '100.64.0.0',
    '100.127.255.255',
    '127.0.0.1',
    '127.255.255.255',
    '169.254.169.254',
    '172.16.0.0',
    '172.31.255.255',
    '192.0.0.8',
    '192.0.2.255',
    '192.88.99.1',
    '192.168.0.1',
    '198.18.0.0',
    '198.19.255.255',
    '198.51.100.1',
    '203.0.113.255',
    '224.0.0.0',
    '239.255.255.255',
    '240.0.0.0',
    '255.255.255.255',
    '::',
    '::1',
    '::7f00:1',
    '::8.8.8.8',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '::ffff:10.0.0.1',
    '::ffff:a9fe:a9fe',
    '64:ff9b::7f00:1',
    '64:ff9b::192.168.1.1',
    '64:ff9b:1::1',
    '2002:a00:1::1',
    '2002:7f00:1::',
    '2001::1',
    '2001:db8::1',
    '3fff::1',
    'fc00::1',
    'fdff:ffff::1',
    'fe80::1',
    'fe80::1%eth0',
    'febf:ffff::1',
    'fec0::1',
    'ff02::1',
    '100::1',
    'not-an-ip',
    '',
  ])('behavior: blocks %s', (address) => {
    expect(isBlockedAddress(address)).toBe(true);
  });

  test.each([
    '1.1.1.1',
    '8.8.8.8',
    '9.255.255.255',
    '11.0.0.0',
    '100.63.255.255',
    '100.128.0.0',
    '126.255.255.255',
    '128.0.0.0',
    '169.253.255.255',
    '169.255.0.0',
    '172.15.255.255',
    '172.32.0.0',
    '192.0.1.1',
    '192.167.255.255',
    '192.169.0.0',
    '198.17.255.255',
    '198.20.0.0',
    '223.255.255.255',
    '2606:4700:4700::1111',
    '2a00:1450:4001:81c::200e',
    '::ffff:8.8.8.8',
    '64:ff9b::808:808',
    '2002:808:808::1',
    'fbff::1',
    'fe7f::1',
  ])('behavior: allows %s', (address) => {
    expect(isBlockedAddress(address)).toBe(false);
  });
});

describe('isBlockedHostname', () => {
  test.each(['localhost', 'localhost.', 'a.b.localhost', 'printer.local', 'db.internal..', '.', '[::1]', '127.0.0.1'])(
    'behavior: blocks %s',
    (hostname) => {
      expect(isBlockedHostname(hostname)).toBe(true);
    },
  );

  test.each(['example.com', 'localhost.example.com', 'internal.example', 'mylocal', '[2606:4700::1]', '8.8.8.8'])('behavior: allows %s', (hostname) => {
    expect(isBlockedHostname(hostname)).toBe(false);
  });
});
