import {
  DeleteServiceResponseSchema,
  ListServicesResponseSchema,
  UpsertServiceResponseSchema,
} from '../../../gen/paypolicy/v1/admin_pb.js';
import type { ServiceRecord } from '../../../gen/paypolicy/v1/registry_pb.js';
import { commandOutput, type Command } from '../command.js';
import { allPages } from './pages.js';
import { UsageError } from '../errors.js';
import { optionalChoice } from '../flagValues.js';
import type { Flags } from '../parseFlags.js';
import { formatFields, formatList } from '../render.js';
import { readJsonFile } from '../jsonFile.js';
import { serviceRecordFromJson, type ServiceRecordInit } from '../serviceRecordFromJson.js';

const FLAG_FORM = ['--slug', '--name', '--description', '--category', '--base-url', '--protocol', '--realm'];

function recordFromFile(path: string): ServiceRecordInit {
  return serviceRecordFromJson(readJsonFile(path), path);
}

/** The flag form describes at most one payment rail and no endpoints; richer records need --file. */
function recordFromFlags(flags: Flags): ServiceRecordInit {
  const baseUrl = flags.get('--base-url');
  const protocol = optionalChoice(flags, '--protocol', ['x402', 'mpp']);
  const realm = flags.get('--realm');
  if ((baseUrl === undefined) !== (protocol === undefined)) throw new UsageError('--base-url and --protocol must be given together');
  if (realm !== undefined && baseUrl === undefined) throw new UsageError('--realm needs --base-url and --protocol');
  return {
    slug: flags.require('--slug'),
    name: flags.require('--name'),
    description: flags.get('--description') ?? '',
    category: flags.get('--category') ?? '',
    paymentMethods: baseUrl === undefined || protocol === undefined ? [] : [{ baseUrl, protocol, realm: realm ?? '' }],
    endpoints: [],
  };
}

function serviceFields(s: ServiceRecord | undefined): string {
  if (!s) return 'no service in the response';
  return formatFields([
    ['id', s.id],
    ['slug', s.slug],
    ['name', s.name],
    ['category', s.category],
    ['description', s.description],
    ...s.paymentMethods.map((m): [string, string] => [`payment (${m.protocol})`, m.realm ? `${m.baseUrl} realm ${m.realm}` : m.baseUrl]),
    ['endpoints', String(s.endpoints.length)],
  ]);
}

/** `service upsert`, `service delete` and `service list`. */
export const serviceCommands: Command[] = [
  {
    group: 'service',
    action: 'upsert',
    synopsis: '[--org ID] --file RECORD.json | --slug SLUG --name NAME [--description D] [--category C] [--base-url URL --protocol x402|mpp [--realm R]]',
    summary: 'Create or replace a registry record by slug (shared, or private to the organization --org), from a wire-shape JSON file or from flags.',
    flags: Object.fromEntries([['--file', 'value'], ['--org', 'value'], ...FLAG_FORM.map((f) => [f, 'value'])]),
    prepare(flags) {
      const file = flags.get('--file');
      const mixed = FLAG_FORM.find((f) => flags.has(f));
      if (file !== undefined && mixed !== undefined) throw new UsageError(`--file cannot be combined with ${mixed}`);
      const service = file !== undefined ? recordFromFile(file) : recordFromFlags(flags);
      const orgId = flags.get('--org');
      return async (client) => {
        const r = await client.upsertService({ service, orgId });
        return commandOutput(UpsertServiceResponseSchema, r, serviceFields(r.service));
      };
    },
  },
  {
    group: 'service',
    action: 'delete',
    synopsis: '--slug SLUG [--org ID]',
    summary: 'Remove a shared registry record, or with --org that organization\'s private one.',
    flags: { '--slug': 'value', '--org': 'value' },
    prepare(flags) {
      const slug = flags.require('--slug');
      const orgId = flags.get('--org');
      return async (client) => {
        const r = await client.deleteService({ slug, orgId });
        return commandOutput(DeleteServiceResponseSchema, r, `deleted service ${slug}`);
      };
    },
  },
  {
    group: 'service',
    action: 'list',
    synopsis: '[--org ID]',
    summary: 'List the shared registry records by slug, or with --org one organization\'s private ones.',
    flags: { '--org': 'value' },
    prepare(flags) {
      const orgId = flags.get('--org');
      return async (client) => {
        const r = await allPages((page) => client.listServices({ orgId, ...page }), (x) => x.services);
        const rows = r.services.map((s) => [
          s.slug, s.name, s.category, s.paymentMethods.map((m) => m.protocol).join(','), String(s.endpoints.length), s.id,
        ]);
        return commandOutput(ListServicesResponseSchema, r, formatList('services', ['SLUG', 'NAME', 'CATEGORY', 'PROTOCOLS', 'ENDPOINTS', 'ID'], rows));
      };
    },
  },
];
