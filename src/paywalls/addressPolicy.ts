import { BlockList, isIPv4, isIPv6 } from 'node:net';

/**
 * Which hosts the probe may never reach. The probe fetches URLs chosen by callers, so anything that
 * lands on this machine, the local network, cloud metadata services or ranges that are not
 * routable on the public internet must be refused before a socket is opened.
 *
 * Two checks decide. First the address itself against the blocked ranges (a net.BlockList).
 * Then every IPv4 address an IPv6 address carries inside it (mapped, NAT64, 6to4, ISATAP) is
 * judged as IPv4, so `[::ffff:127.0.0.1]`, `[64:ff9b::7f00:1]` and `[2002:7f00:1::]` are loopback.
 * IPv6 forms whose embedded IPv4 cannot be trusted to mean what it says (compatible, translated,
 * Teredo, local-use NAT64) are blocked whole. Anything that does not parse is blocked.
 */

const BLOCKED_V4 = [
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
];

const BLOCKED_V6 = [
  '::/96', // unspecified, loopback and the deprecated IPv4-compatible ::a.b.c.d: nothing public lives here
  '::ffff:0:0:0/96', // IPv4-translated (SIIT, RFC 6145): only meaningful inside a translator's own network
  '64:ff9b:1::/48', // local-use NAT64 (RFC 8215): translates into the operator's own network
  '100::/64', // discard-only
  '2001::/32', // Teredo: the client address is stored XORed with 0xffffffff, and no real paywall sits here
  '2001:db8::/32',
  '3fff::/20', // documentation (RFC 9637)
  'fc00::/7',
  'fe80::/10',
  'fec0::/10', // deprecated site-local, still routed inside some networks
  'ff00::/8',
];

const BLOCKED = new BlockList();
for (const cidr of BLOCKED_V4) addSubnet(cidr, 'ipv4');
for (const cidr of BLOCKED_V6) addSubnet(cidr, 'ipv6');

type Bytes = readonly number[];

/**
 * IPv6 forms that carry an IPv4 address at byte `at`, recognized from the other bytes. An address
 * can match more than one (a 6to4 prefix with an ISATAP interface id); each carried IPv4 is judged.
 */
const EMBEDDINGS: ReadonlyArray<{ carries: (b: Bytes) => boolean; at: number }> = [
  // IPv4-mapped ::ffff:a.b.c.d: a dual-stack socket connects to it over IPv4.
  { carries: (b) => startsWith(b, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]), at: 12 },
  // Well-known NAT64 prefix 64:ff9b::/96 (RFC 6052): the translator connects to the last 32 bits.
  { carries: (b) => startsWith(b, [0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0]), at: 12 },
  // 6to4 2002:a.b.c.d::/48 (RFC 3056): tunnelled to the IPv4 address in bits 16-47.
  { carries: (b) => startsWith(b, [0x20, 0x02]), at: 2 },
  // ISATAP interface id …:0:5efe:a.b.c.d (RFC 5214, u and g bits in either state), under any prefix.
  { carries: (b) => (b[8]! & 0xfc) === 0 && b[9] === 0 && b[10] === 0x5e && b[11] === 0xfe, at: 12 },
];

/** True when an IP address (no brackets; a zone id is ignored) must not be probed; anything unparseable is blocked. */
export function isBlockedAddress(address: string): boolean {
  if (isIPv4(address)) return BLOCKED.check(address, 'ipv4');
  const bare = address.split('%')[0] ?? '';
  const bytes = parseIPv6(bare);
  if (!bytes) return true;
  if (BLOCKED.check(bare, 'ipv6')) return true;
  return EMBEDDINGS.some(({ carries, at }) => carries(bytes) && BLOCKED.check(bytes.slice(at, at + 4).join('.'), 'ipv4'));
}

/**
 * True when a URL hostname, as the WHATWG parser normalized it (lowercase, IPv4 in dotted-quad
 * whatever numeric form it was written in, IPv6 in brackets), names a blocked address or a name
 * reserved for local use.
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

function addSubnet(cidr: string, type: 'ipv4' | 'ipv6'): void {
  const [network = '', bits = ''] = cidr.split('/');
  BLOCKED.addSubnet(network, Number(bits), type);
}

function startsWith(bytes: Bytes, prefix: Bytes): boolean {
  return prefix.every((byte, i) => bytes[i] === byte);
}

/** The 16 bytes of an IPv6 address in any spelling (zero compression, dotted IPv4 tail, any case). */
function parseIPv6(text: string): number[] | undefined {
  if (!isIPv6(text)) return undefined;
  let s = text;
  // Rewrite a dotted IPv4 tail (::ffff:1.2.3.4) as two hex groups so one path handles both forms.
  const lastColon = s.lastIndexOf(':');
  const tail = s.slice(lastColon + 1);
  if (isIPv4(tail)) {
    const [a = 0, b = 0, c = 0, d = 0] = tail.split('.').map(Number);
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
