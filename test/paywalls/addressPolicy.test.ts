import { describe, expect, test } from 'vitest';
import { isBlockedAddress, isBlockedHostname } from '../../src/paywalls/addressPolicy.js';

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

  // Every IPv6 form that carries 127.0.0.1 (or another private IPv4), in every spelling.
  test.each([
    // IPv4-mapped ::ffff:0:0/96
    '::ffff:127.0.0.1',
    '::FFFF:127.0.0.1',
    '0:0:0:0:0:ffff:127.0.0.1',
    '0000:0000:0000:0000:0000:FFFF:7F00:0001',
    '::ffff:7f00:1%lo',
    '::ffff:192.168.1.1',
    // IPv4-translated ::ffff:0:0:0/96 (blocked whole, whatever it carries)
    '::ffff:0:127.0.0.1',
    '::ffff:0:7f00:1',
    '0:0:0:0:ffff:0:127.0.0.1',
    '::FFFF:0:7F00:1%eth0',
    '::ffff:0:8.8.8.8',
    // IPv4-compatible ::a.b.c.d (blocked whole)
    '::127.0.0.1',
    '0:0:0:0:0:0:127.0.0.1',
    '::7F00:1',
    // NAT64 well-known prefix 64:ff9b::/96
    '64:ff9b::127.0.0.1',
    '64:FF9B::7F00:1',
    '0064:ff9b:0000:0000:0000:0000:7f00:0001',
    '64:ff9b::a9fe:a9fe',
    '64:ff9b::169.254.169.254%1',
    // local-use NAT64 64:ff9b:1::/48 (blocked whole)
    '64:ff9b:1::127.0.0.1',
    '64:ff9b:1:ffff::8.8.8.8',
    // 6to4 2002::/16
    '2002:7f00:1::',
    '2002:7F00:0001:0:0:0:0:1',
    '2002:a9fe:a9fe::1',
    '2002:c0a8:101::127.0.0.1',
    // Teredo 2001::/32 (blocked whole; the client address is XORed)
    '2001:0:4136:e378:8000:63bf:80ff:fffe',
    '2001::8.8.8.8',
    // ISATAP interface ids under any prefix, u/g bits in every state
    'fe80::5efe:127.0.0.1',
    '2606:4700::5efe:127.0.0.1',
    '2606:4700::200:5efe:7f00:1',
    '2606:4700:0:0:100:5EFE:10.0.0.1',
    '2606:4700::300:5efe:169.254.169.254',
    // one bad embedding is enough: a public 6to4 prefix with a loopback ISATAP id
    '2002:808:808::5efe:127.0.0.1',
  ])('behavior: blocks the embedded private IPv4 in %s', (address) => {
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
    '2606:4700::5efe:8.8.8.8',
    '2606:4700::400:5efe:7f00:1',
    'fbff::1',
    'fe7f::1',
  ])('behavior: allows %s', (address) => {
    expect(isBlockedAddress(address)).toBe(false);
  });
});

describe('isBlockedHostname', () => {
  test.each(['localhost', 'localhost.', 'a.b.localhost', 'printer.local', 'db.internal..', '.', '[::1]', '127.0.0.1', '[::ffff:7f00:1]', '[::ffff:0:7f00:1]'])(
    'behavior: blocks %s',
    (hostname) => {
      expect(isBlockedHostname(hostname)).toBe(true);
    },
  );

  test.each(['example.com', 'localhost.example.com', 'internal.example', 'mylocal', '[2606:4700::1]', '8.8.8.8'])('behavior: allows %s', (hostname) => {
    expect(isBlockedHostname(hostname)).toBe(false);
  });

  // What the WHATWG parser makes of each spelling is what the probe judges.
  test.each([
    'http://[::ffff:0:127.0.0.1]/',
    'http://[::FFFF:0:7F00:1]/',
    'http://[0:0:0:0:ffff:0:127.0.0.1]/',
    'http://[::ffff:127.0.0.1]/',
    'http://[::127.0.0.1]/',
    'http://[64:ff9b::127.0.0.1]/',
    'http://[64:ff9b:1::7f00:1]/',
    'http://[2002:7f00:1::]/',
    'http://[2001:0:7f00:1::]/',
    'http://[2606:4700::5efe:127.0.0.1]/',
    'http://2130706433/',
    'http://0x7f.1/',
    'http://0177.0.0.1/',
  ])('behavior: blocks the host of %s', (url) => {
    expect(isBlockedHostname(new URL(url).hostname)).toBe(true);
  });
});
