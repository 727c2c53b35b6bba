import {
  CreateOrganizationResponseSchema,
  ListOrganizationsResponseSchema,
  UpdateOrganizationResponseSchema,
  ProvisionTreasuryResponseSchema,
  type Organization,
} from '../../../gen/paypolicy/v1/admin_pb.js';
import { commandOutput, type Command } from '../command.js';
import type { Flags } from '../parseFlags.js';
import { allPages } from './pages.js';
import { APPROVAL_WINDOW_SECONDS } from '../../app/organizations/organizations.js';
import { UsageError } from '../errors.js';
import { optionalInteger } from '../flagValues.js';
import { formatFields, formatList, formatTime } from '../render.js';
import { readJsonFile } from '../jsonFile.js';
import { DomainError } from '../../domain/errors.js';
import { limitToJson, parseLimits } from '../../domain/limits.js';
import { limitMessage, limitsText } from './agents.js';

function organizationFields(o: Organization): string {
  return formatFields([
    ['id', o.id],
    ['name', o.name],
    ['treasury', o.treasuryAddress || 'not provisioned'],
    ['approval window', `${o.approvalWindowSeconds}s`],
    ['limits', limitsText(o.limits)],
    ['created', formatTime(o.createdAt)],
  ]);
}

/** --approval-window, checked against the server's bounds so a mistake names the range that applies. */
function approvalWindow(flags: Flags): number | undefined {
  return optionalInteger(flags, '--approval-window', APPROVAL_WINDOW_SECONDS.min, APPROVAL_WINDOW_SECONDS.max);
}

/** `org create`, `org update`, `org list` and `treasury provision`. */
export const organizationCommands: Command[] = [
  {
    group: 'org',
    action: 'create',
    synopsis: '--name NAME [--approval-window SECONDS]',
    summary: 'Create an organization (approval window defaults to 3600 seconds).',
    flags: { '--name': 'value', '--approval-window': 'value' },
    prepare(flags) {
      const request = { name: flags.require('--name'), approvalWindowSeconds: approvalWindow(flags) ?? 0 };
      return async (client) => {
        const r = await client.createOrganization(request);
        return commandOutput(CreateOrganizationResponseSchema, r, r.organization ? organizationFields(r.organization) : 'created');
      };
    },
  },
  {
    group: 'org',
    action: 'update',
    synopsis: '--id ORG_ID [--name NAME] [--approval-window SECONDS]',
    summary: 'Rename an organization or change its approval window (for new approval requests).',
    flags: { '--id': 'value', '--name': 'value', '--approval-window': 'value' },
    prepare(flags) {
      const request = {
        orgId: flags.require('--id'),
        name: flags.get('--name'),
        approvalWindowSeconds: approvalWindow(flags),
      };
      if (request.name === undefined && request.approvalWindowSeconds === undefined) throw new UsageError('org update needs --name or --approval-window');
      return async (client) => {
        const r = await client.updateOrganization(request);
        return commandOutput(UpdateOrganizationResponseSchema, r, r.organization ? organizationFields(r.organization) : 'updated');
      };
    },
  },
  {
    group: 'org',
    action: 'limits set',
    synopsis: '--org ORG_ID --file LIMITS.json',
    summary: 'Replace the window limits every agent of the organization shares, from {"limits": [...]} (each like a policy document\'s limits).',
    flags: { '--org': 'value', '--file': 'value' },
    prepare(flags) {
      const orgId = flags.require('--org');
      const path = flags.require('--file');
      const doc = readJsonFile(path, { wholeNumbers: true });
      if (doc === null || typeof doc !== 'object' || Array.isArray(doc) || Object.keys(doc).some((k) => k !== 'limits') || !('limits' in doc)) {
        throw new UsageError(`${path} must be a JSON object with one key, "limits", an array of limits`);
      }
      let limits;
      try {
        limits = parseLimits((doc as { limits: unknown }).limits).map(limitToJson);
      } catch (err) {
        if (err instanceof DomainError) throw new UsageError(`${path}: ${err.message}`);
        throw err;
      }
      const request = { orgId, limits: { items: limits.map(limitMessage) } };
      return async (client) => {
        const r = await client.updateOrganization(request);
        return commandOutput(UpdateOrganizationResponseSchema, r, r.organization ? organizationFields(r.organization) : 'updated');
      };
    },
  },
  {
    group: 'org',
    action: 'list',
    synopsis: '',
    summary: 'List organizations, oldest first.',
    flags: {},
    prepare() {
      return async (client) => {
        const r = await allPages((page) => client.listOrganizations(page), (x) => x.organizations);
        const rows = r.organizations.map((o) => [o.id, o.name, o.treasuryAddress, `${o.approvalWindowSeconds}s`, formatTime(o.createdAt)]);
        return commandOutput(ListOrganizationsResponseSchema, r, formatList('organizations', ['ID', 'NAME', 'TREASURY', 'APPROVAL WINDOW', 'CREATED'], rows));
      };
    },
  },
  {
    group: 'treasury',
    action: 'provision',
    synopsis: '--org ORG_ID',
    summary: "Create the organization's treasury signing key (once) and print its address.",
    flags: { '--org': 'value' },
    prepare(flags) {
      const request = { orgId: flags.require('--org') };
      return async (client) => {
        const r = await client.provisionTreasury(request);
        return commandOutput(ProvisionTreasuryResponseSchema, r, `treasury address ${r.treasuryAddress}`);
      };
    },
  },
];
