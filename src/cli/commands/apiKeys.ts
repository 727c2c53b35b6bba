import {
  ApiKeyMode,
  CreateApiKeyResponseSchema,
  ListApiKeysResponseSchema,
  RevokeApiKeyResponseSchema,
  type ApiKey,
} from '../../../gen/paypolicy/v1/admin_pb.js';
import { commandOutput, type Command } from '../command.js';
import { allPages } from './pages.js';
import { requireChoice } from '../flagValues.js';
import { formatFields, formatList, formatTime } from '../render.js';

const MODES = { test: ApiKeyMode.TEST, live: ApiKeyMode.LIVE } as const;

function modeName(mode: ApiKeyMode): string {
  return mode === ApiKeyMode.LIVE ? 'live' : mode === ApiKeyMode.TEST ? 'test' : 'unspecified';
}

function keyFields(k: ApiKey): string {
  return formatFields([
    ['id', k.id],
    ['organization', k.orgId],
    ['mode', modeName(k.mode)],
    ['prefix', k.prefix],
    ['label', k.label],
    ['created', formatTime(k.createdAt)],
    ['revoked', formatTime(k.revokedAt)],
  ]);
}

/** `key create`, `key revoke` and `key list`. */
export const apiKeyCommands: Command[] = [
  {
    group: 'key',
    action: 'create',
    synopsis: '--org ORG_ID --mode test|live [--label LABEL]',
    summary: 'Issue an API key; its plaintext is printed once and never again.',
    flags: { '--org': 'value', '--mode': 'value', '--label': 'value' },
    prepare(flags) {
      const request = { orgId: flags.require('--org'), mode: MODES[requireChoice(flags, '--mode', ['test', 'live'])], label: flags.get('--label') ?? '' };
      return async (client) => {
        const r = await client.createApiKey(request);
        const text = [
          r.apiKey ? keyFields(r.apiKey) : '',
          '',
          'API key (store it now; it will not be shown again):',
          r.plaintextKey,
        ].join('\n');
        return commandOutput(CreateApiKeyResponseSchema, r, text);
      };
    },
  },
  {
    group: 'key',
    action: 'revoke',
    synopsis: '--id KEY_ID',
    summary: 'Revoke an API key; the next request with it gets 401.',
    flags: { '--id': 'value' },
    prepare(flags) {
      const request = { id: flags.require('--id') };
      return async (client) => {
        const r = await client.revokeApiKey(request);
        return commandOutput(RevokeApiKeyResponseSchema, r, r.apiKey ? keyFields(r.apiKey) : 'revoked');
      };
    },
  },
  {
    group: 'key',
    action: 'list',
    synopsis: '--org ORG_ID',
    summary: "List an organization's API keys (never their secrets), newest first.",
    flags: { '--org': 'value' },
    prepare(flags) {
      const request = { orgId: flags.require('--org') };
      return async (client) => {
        const r = await allPages((page) => client.listApiKeys({ ...request, ...page }), (x) => x.apiKeys);
        const rows = r.apiKeys.map((k) => [k.id, modeName(k.mode), k.prefix, k.label, formatTime(k.createdAt), formatTime(k.revokedAt)]);
        return commandOutput(ListApiKeysResponseSchema, r, formatList('API keys', ['ID', 'MODE', 'PREFIX', 'LABEL', 'CREATED', 'REVOKED'], rows));
      };
    },
  },
];
