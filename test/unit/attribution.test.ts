import { describe, expect, test } from 'vitest';
import { attributeResource } from '../../src/domain/attribution.js';
import { indexRegistry, joinRegistryIndexes, type RegistryIndex } from '../../src/domain/indexRegistry.js';
import type { AttributedService, ServiceRecord } from '../../src/domain/types.js';

function service(slug: string, methods: ServiceRecord['paymentMethods']): ServiceRecord {
  return { id: slug, slug, name: `${slug} name`, description: '', category: '', logoUrl: '', docsUrl: '', paymentMethods: methods, endpoints: [] };
}

const weather = service('weather', [{ realm: '', baseUrl: 'https://api.weather.example/v1', protocol: 'x402' }]);
const maps = service('maps', [{ realm: 'maps-realm', baseUrl: 'https://maps.example/', protocol: 'mpp' }]);
const registry = [weather, maps];

describe('attributeResource', () => {
  test.each([
    'https://api.weather.example/v1',
    'https://api.weather.example/v1/',
    'https://api.weather.example/v1/today?city=x',
    'https://API.WEATHER.EXAMPLE/v1/today',
    'https://api.weather.example:443/v1/today',
  ])('behavior: %s is under the base URL', (url) => {
    expect(attributeResource(registry, [url], 'x402', null, [])).toEqual({ attributed: true, slug: 'weather', name: 'weather name', note: null });
  });

  test.each([
    'https://api.weather.example/v10/today',
    'https://api.weather.example/v',
    'https://api.weather.example/other',
    'http://api.weather.example/v1/today',
    'https://api.weather.example:8443/v1/today',
    'https://evil.example/v1/today',
    'https://api.weather.example.evil.example/v1/today',
    'https://user@api.weather.example.evil/v1',
    'not a url',
  ])('error: %s is not attributed', (url) => {
    expect(attributeResource(registry, [url], 'x402', null, []).attributed).toBe(false);
  });

  // A lenient front end (nginx, Tomcat, IIS, a proxy that decodes twice) would route these out of
  // /v1 although WHATWG URL keeps them under it; see test/adversarial/pathConfusion.test.ts.
  test.each([
    '/v1/..%2Fother', '/v1/..%2fother', '/v1/%2E%2E%2Fother', '/v1/..%5Cother', '/v1/..;/other', '/v1/..;x=1/other',
    '/v1/%252e%252e/other', '/v1/%25252e%25252e%25252fother', '/v1/..%00/other', '/v1/%u002e%u002e%u002fother',
    '/v1/%EF%BC%8E%EF%BC%8E/other', '/v1/..%EF%BC%8Fother', '/v1/x%2F..%2F..%2Fother',
  ])('error: https://api.weather.example%s leaves the base path for a lenient front end → not attributed', (path) => {
    expect(attributeResource(registry, [`https://api.weather.example${path}`], 'x402', null, ['weather']).attributed).toBe(false);
  });

  test.each(['/v1/a%20b', '/v1/x%2Fy', '/v1/x/..%2Fy', '/v1/caf%C3%A9', '/v1/%ZZ', '/v1/%E0%A4%A', '/v1/x;jsessionid=1'])(
    'behavior: https://api.weather.example%s stays under /v1 however it is read → attributed',
    (path) => {
      expect(attributeResource(registry, [`https://api.weather.example${path}`], 'x402', null, ['weather'])).toMatchObject({ attributed: true, slug: 'weather' });
    },
  );

  test('error: the rail must match the payment method protocol', () => {
    expect(attributeResource(registry, ['https://api.weather.example/v1/x'], 'mpp', 'anything', []).attributed).toBe(false);
  });

  test('behavior: MPP attribution needs the registered realm to match the challenge realm', () => {
    expect(attributeResource(registry, ['https://maps.example/tiles'], 'mpp', 'maps-realm', ['maps'])).toMatchObject({ attributed: true, slug: 'maps' });
    expect(attributeResource(registry, ['https://maps.example/tiles'], 'mpp', 'impostor', ['maps'])).toEqual({
      attributed: false,
      note: 'realm "impostor" does not match the registered realm "maps-realm" of service maps',
    });
  });

  test('error: a realm alone never attributes a URL outside the base URL', () => {
    expect(attributeResource(registry, ['https://evil.example/tiles'], 'mpp', 'maps-realm', ['maps'])).toEqual({
      attributed: false,
      note: 'the resource URL is not under a registered base URL of allowlisted service maps',
    });
  });

  test('behavior: notes name allowlisted slugs that are unregistered or belong to another service', () => {
    expect(attributeResource(registry, ['https://evil.example/x'], 'x402', null, ['ghost'])).toEqual({
      attributed: false, note: 'allowlisted service ghost is not in the registry',
    });
    expect(attributeResource(registry, ['https://api.weather.example/v1/x'], 'x402', null, ['maps'])).toEqual({
      attributed: true, slug: 'weather', name: 'weather name',
      note: 'the resource URL belongs to registered service weather, not to allowlisted service maps',
    });
  });

  describe('redirect chains', () => {
    const sibling = service('weather', [
      { realm: '', baseUrl: 'https://api.weather.example/v1', protocol: 'x402' },
      { realm: '', baseUrl: 'https://api.weather.example/v2', protocol: 'x402' },
    ]);

    test('behavior: a chain wholly under the service\'s base URLs is attributed', () => {
      expect(attributeResource(registry, ['https://api.weather.example/v1/old', 'https://api.weather.example/v1/new'], 'x402', null, ['weather']))
        .toEqual({ attributed: true, slug: 'weather', name: 'weather name', note: null });
      // A redirect between two base URLs the same service registered for the rail.
      expect(attributeResource([sibling], ['https://api.weather.example/v1/a', 'https://api.weather.example/v2/b'], 'x402', null, ['weather']))
        .toMatchObject({ attributed: true, slug: 'weather' });
    });

    test('error: a redirect out of the base URL names the allowlisted slug and the hop', () => {
      expect(attributeResource(registry, ['https://api.weather.example/v1/go', 'https://other.example/pay'], 'x402', null, ['weather'])).toEqual({
        attributed: false,
        note: 'allowlisted service weather cannot vouch: the request was redirected to https://other.example/pay, outside its registered base URL',
      });
      // Same origin, outside the base path.
      expect(attributeResource(registry, ['https://api.weather.example/v1/go', 'https://api.weather.example/admin/pay'], 'x402', null, ['weather'])).toMatchObject({
        attributed: false,
        note: 'allowlisted service weather cannot vouch: the request was redirected to https://api.weather.example/admin/pay, outside its registered base URL',
      });
    });

    test('error: a chain that leaves and comes back is not attributed either', () => {
      const chain = ['https://api.weather.example/v1/a', 'https://evil.example/b', 'https://api.weather.example/v1/c'];
      expect(attributeResource(registry, chain, 'x402', null, ['weather'])).toEqual({
        attributed: false,
        note: 'allowlisted service weather cannot vouch: the request was redirected to https://evil.example/b, outside its registered base URL',
      });
    });

    test('error: a chain that starts elsewhere and ends under the base URL is not attributed', () => {
      expect(attributeResource(registry, ['https://evil.example/start', 'https://api.weather.example/v1/x'], 'x402', null, ['weather'])).toEqual({
        attributed: false,
        note: 'allowlisted service weather cannot vouch: the request started at https://evil.example/start, outside its registered base URL',
      });
    });

    test('error: a redirect to another registered service is attributed to neither', () => {
      const payer = service('payer', [{ realm: '', baseUrl: 'https://pay.example/', protocol: 'x402' }]);
      const chain = ['https://api.weather.example/v1/go', 'https://pay.example/invoice'];
      expect(attributeResource([weather, payer], chain, 'x402', null, ['weather'])).toEqual({
        attributed: false,
        note: 'allowlisted service weather cannot vouch: the request was redirected to https://pay.example/invoice, outside its registered base URL',
      });
      expect(attributeResource([weather, payer], chain, 'x402', null, ['payer'])).toEqual({
        attributed: false,
        note: 'allowlisted service payer cannot vouch: the request started at https://api.weather.example/v1/go, outside its registered base URL',
      });
    });

    test('error: hops must be under base URLs of the same rail', () => {
      const mixed = service('mixed', [
        { realm: '', baseUrl: 'https://mixed.example/x402', protocol: 'x402' },
        { realm: '', baseUrl: 'https://mixed.example/mpp', protocol: 'mpp' },
      ]);
      expect(attributeResource([mixed], ['https://mixed.example/mpp/a', 'https://mixed.example/x402/b'], 'x402', null, ['mixed']).attributed).toBe(false);
    });

    test('error: an empty chain is not attributed', () => {
      expect(attributeResource(registry, [], 'x402', null, ['weather'])).toEqual({ attributed: false, note: null });
    });
  });
});

describe('indexRegistry', () => {
  /** Services on other origins than the chains below: many hosts, and the same host by another scheme or port. */
  function filler(n: number): ServiceRecord[] {
    return Array.from({ length: n }, (_, i) => service(`filler-${i}`, [
      { realm: '', baseUrl: `https://svc-${i}.example/v1`, protocol: 'x402' },
      { realm: '', baseUrl: `http://api.weather.example/v${i}`, protocol: 'x402' },
      { realm: '', baseUrl: `https://api.weather.example:${1000 + (i % 60000)}/v1`, protocol: 'x402' },
      { realm: 'r', baseUrl: `https://maps-${i}.example/`, protocol: 'mpp' },
    ]));
  }

  /** The index with the set of base URLs of every service it hands to attribution: the most it could compare. */
  function counted(index: RegistryIndex): { index: RegistryIndex; handed: () => number } {
    const handed = new Set<string>();
    const note = (s: AttributedService | undefined) => s?.paymentMethods.forEach((m, i) => handed.add(`${s.slug} ${i}`));
    return {
      index: {
        candidates(url) {
          const services = index.candidates(url);
          services.forEach(note);
          return services;
        },
        bySlug(slug) {
          const s = index.bySlug(slug);
          note(s);
          return s;
        },
      },
      handed: () => handed.size,
    };
  }

  const cases: Array<[string[], 'x402' | 'mpp', string | null, string[]]> = [
    [['https://api.weather.example/v1/today'], 'x402', null, []],
    [['https://api.weather.example/v1/today'], 'x402', null, ['maps', 'filler-3']],
    [['https://api.weather.example/other'], 'x402', null, ['weather']],
    [['https://maps.example/tiles'], 'mpp', 'maps-realm', []],
    [['https://maps.example/tiles'], 'mpp', 'wrong', ['maps']],
    [['https://evil.example/go', 'https://api.weather.example/v1/x'], 'x402', null, ['weather']],
    [['https://nobody.example/x'], 'x402', null, ['unknown-slug']],
  ];

  /** Services on the chains' own origins, under paths none of the chains lies under. */
  function sameOrigin(n: number): ServiceRecord[] {
    return Array.from({ length: n }, (_, i) => service(`near-${i}`, [
      { realm: '', baseUrl: `https://api.weather.example/v1/today/${i}`, protocol: 'x402' },
      { realm: '', baseUrl: `https://api.weather.example/v1x${i}`, protocol: 'x402' },
      { realm: '', baseUrl: `https://maps.example/tiles-${i}/`, protocol: 'mpp' },
    ]));
  }

  test('behavior: the base URLs attribution examines do not grow with the registry, and its answers do not change', () => {
    const small = indexRegistry(registry);
    const large = indexRegistry([...filler(10_000), ...sameOrigin(5_000), ...registry]);
    for (const [chain, rail, realm, allow] of cases) {
      const a = counted(small);
      const b = counted(large);
      const expected = attributeResource(registry, chain, rail, realm, allow);
      expect(attributeResource(a.index, chain, rail, realm, allow)).toEqual(expected);
      expect(attributeResource(b.index, chain, rail, realm, allow)).toEqual(expected);
      // The 55,000 base URLs more add nothing but those of a filler service the allowlist names.
      const allowedFiller = allow.filter((slug) => slug.startsWith('filler-')).length * 4;
      expect(b.handed() - a.handed(), chain.join(' -> ')).toBeGreaterThanOrEqual(0);
      expect(b.handed() - a.handed(), chain.join(' -> ')).toBeLessThanOrEqual(allowedFiller);
      expect(b.handed(), chain.join(' -> ')).toBeLessThanOrEqual(6);
    }
  });

  test('behavior: joined indexes answer as the concatenated list, the first index\'s services first', () => {
    const first = service('first', [{ realm: '', baseUrl: 'https://api.weather.example/v1', protocol: 'x402' }]);
    const shared = [first, maps];
    const own = [weather, ...filler(5), ...sameOrigin(5), service('root', [{ realm: '', baseUrl: 'https://api.weather.example', protocol: 'x402' }])];
    const joined = joinRegistryIndexes(indexRegistry(shared), indexRegistry(own));
    for (const [chain, rail, realm, allow] of [...cases, [['https://api.weather.example/v1/x'], 'x402', null, ['weather']]] as typeof cases) {
      expect(attributeResource(joined, chain, rail, realm, allow)).toEqual(attributeResource([...shared, ...own], chain, rail, realm, allow));
    }
    expect(attributeResource(joined, ['https://api.weather.example/v1/x'], 'x402', null, [])).toMatchObject({ attributed: true, slug: 'first' });
  });

  test.each([
    ['https://p.example/a/b', ['root', 'a', 'a-slash', 'a-b']],
    ['https://p.example/a/b/', ['root', 'a', 'a-slash', 'a-b', 'a-b-slash']],
    ['https://p.example/a/b/c', ['root', 'a', 'a-slash', 'a-b', 'a-b-slash']],
    ['https://p.example/a', ['root', 'a']],
    ['https://p.example/ab', ['root']],
    ['https://p.example/', ['root']],
    ['http://p.example/a/b', []],
  ])('behavior: %s is looked up under exactly the base paths it can lie under', (url, slugs) => {
    const bases = { root: '/', a: '/a', 'a-slash': '/a/', 'a-b': '/a/b', 'a-b-slash': '/a/b/', 'a-bc': '/a/bc', other: '/b' };
    const index = indexRegistry(Object.entries(bases).map(([slug, path]) => service(slug, [{ realm: '', baseUrl: `https://p.example${path}`, protocol: 'x402' }])));
    expect(index.candidates(new URL(url)).map((s) => s.slug)).toEqual(slugs);
  });
});
