import { isIPv4, isIPv6 } from 'node:net';

/**
 * Which hosts the probe may never reach. The probe fetches URLs chosen by callers, so anything that
 * lands on this machine, the local network, cloud metadata services or ranges that are not
 * routable on the public internet must be refused before a socket is opened.
 */

type Cidr = { bytes: readonly number[]; bits: number };

const BLOCKED_V4: readonly Cidr[] = [
  '0.0.0.0/8', // "this network"; 0.0.0.0 reaches the local host on most stacks
  '10.0.0.0/8',
  '100.64.0.0/10', // CGNAT; also where some clouds put metadata (100.100.100.200)
  '127.0.0.0/8',
  '169.254.0.0/16', // link-local, including the 169.254.169.254 metadata service
  '172.16.0.0/12',
  '192.0.0.0/24', // IETF protocol assignments (192.0.0.192 is a cloud metadata address)
  '192.0.2.0/24',
  '192.88.99.0/24', // deprecated 6to4 relay anycast
  '192.168.0.0/16',
  '198.18.0.0/15',
  '198.51.100.0/24',
  '203.0.113.0/24',
  '224.0.0.0/4',
  '240.0.0.0/4', // reserved, and 255.255.255.255 broadcast
].map(parseCidr);

const BLOCKED_V6: readonly Cidr[] = [
  '::/96', // unspecified, loopback and the deprecated IPv4-compatible form: nothing public lives here
  '64:ff9b:1::/48', // local-use NAT64 (RFC 8215): translates into the operator's own network
  '100::/64', // discard-only
  '2001::/32', // Teredo: the embedded client address is obfuscated, and no real paywall sits here
  '2001:db8::/32',
  '3fff::/20', // documentation (RFC 9637)
  'fc00::/7',
  'fe80::/10',
  'fec0::/10', // deprecated site-local, still routed inside some networks
  'ff00::/8',
].map(parseCidr);

/** IPv6 prefixes that carry an IPv4 address, and where it sits: these inherit the IPv4 verdict. */
const EMBEDS_V4: ReadonlyArray<{ prefix: Cidr; offset: number }> = [
  { prefix: parseCidr('::ffff:0:0/96'), offset: 12 },
  { prefix: parseCidr('64:ff9b::/96'), offset: 12 },
  { prefix: parseCidr('2002::/16'), offset: 2 },
];

/** True when an IP address (no brackets; a zone id is ignored) must not be probed; anything unparseable is blocked. */
export function isBlockedAddress(address: string): boolean {
  const v4 = parseIPv4(address);
  if (v4) return BLOCKED_V4.some((cidr) => contains(cidr, v4));
  const v6 = parseIPv6(address);
  if (!v6) return true;
  if (BLOCKED_V6.some((cidr) => contains(cidr, v6))) return true;
  for (const { prefix, offset } of EMBEDS_V4) {
    if (contains(prefix, v6)) return isBlockedAddress(v6.slice(offset, offset + 4).join('.'));
  }
  return false;
}

/**
 * True when a URL hostname, as the WHATWG parser normalized it (lowercase, IPv4 in dotted-quad,
 * IPv6 in brackets), names a blocked address or a name reserved for local use.
 */
export function isBlockedHostname(hostname: string): boolean {
  if (hostname.startsWith('[') && hostname.endsWith(']')) return isBlockedAddress(hostname.slice(1, -1));
  if (isIPv4(hostname) || isIPv6(hostname)) return isBlockedAddress(hostname);
  // A trailing dot makes a name absolute without changing what it resolves to.
  const name = hostname.toLowerCase().replace(/\.+$/, '');
  if (name === '') return true;
  return (
    name === 'localhost' ||
    name.endsWith('.localhost') ||
    name === 'local' ||
    name.endsWith('.local') ||
    name === 'internal' ||
    name.endsWith('.internal')
  );
}

function contains(cidr: Cidr, bytes: readonly number[]): boolean {
  if (cidr.bytes.length !== bytes.length) return false;
  let bits = cidr.bits;
  for (let i = 0; bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if (((bytes[i] ?? 0) & mask) !== ((cidr.bytes[i] ?? 0) & mask)) return false;
  }
  return true;
}

function parseCidr(text: string): Cidr {
  const [address = '', bits = ''] = text.split('/');
  const bytes = parseIPv4(address) ?? parseIPv6(address);
  if (!bytes) throw new Error(`bad CIDR ${text}`);
  return { bytes, bits: Number(bits) };
}

function parseIPv4(text: string): number[] | undefined {
  return isIPv4(text) ? text.split('.').map(Number) : undefined;
}

function parseIPv6(text: string): number[] | undefined {
  let s = text.split('%')[0] ?? '';
  if (!isIPv6(s)) return undefined;
  // Rewrite a dotted IPv4 tail (::ffff:1.2.3.4) as two hex groups so one path handles both forms.
  const lastColon = s.lastIndexOf(':');
  const tail = parseIPv4(s.slice(lastColon + 1));
  if (tail) {
    const [a = 0, b = 0, c = 0, d = 0] = tail;
    s = `${s.slice(0, lastColon + 1)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', rest] = s.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = rest === undefined || rest === '' ? [] : rest.split(':');
  const groups = rest === undefined ? left : [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  if (groups.length !== 8) return undefined;
  return groups.flatMap((group) => {
    const n = Number.parseInt(group, 16);
    return [n >> 8, n & 0xff];
  });
}
