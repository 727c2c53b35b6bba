import {
  CreateAgentResponseSchema,
  GetAgentResponseSchema,
  ListAgentsResponseSchema,
  PolicySchema,
  SetPolicyRequestSchema,
  SetPolicyResponseSchema,
  SimulatedOutcome,
  UpdateAgentResponseSchema,
  type Agent,
  type Policy,
  type SpendLimit,
  type SpendLimitSchema,
} from '../../../gen/paypolicy/v1/admin_pb.js';
import { toJson, type JsonValue, type MessageInitShape } from '@bufbuild/protobuf';
import { PolicyRuleSchema } from '../../../gen/paypolicy/v1/payment_policy_pb.js';
import { timestampMs } from '@bufbuild/protobuf/wkt';
import { DomainError } from '../../domain/errors.js';
import { DEFAULT_MAX_NETWORK_FEE_WEI } from '../../domain/networkFee.js';
import { parsePolicyDocument, policyDocument } from '../../domain/policyDocument.js';
import { readJsonFile } from '../jsonFile.js';
import { formatEther } from 'viem';
import { commandOutput, type Command } from '../command.js';
import { UsageError } from '../errors.js';
import { optionalChoice, optionalInteger } from '../flagValues.js';
import { messageFlags } from '../messageFlags.js';
import type { Flags } from '../parseFlags.js';
import { formatFields, formatList, formatTime, formatUsdText } from '../render.js';

import { agentStatus, simulatedOutcome } from '../../protoMapping/enums.js';
import { AGENT_STATUSES } from '../../domain/validate.js';
import { allPages } from './pages.js';
import { VERSION_PAGE_SIZE } from '../../rpc/pages.js';

function allowlistText(p: Policy | undefined): string {
  return p && p.allowlist.length > 0 ? p.allowlist.join(', ') : 'nothing';
}

/** A wei amount as the server gave it (decimal string), with its value in ETH. */
function weiText(wei: string): string {
  return /^\d+$/.test(wei) ? `${wei} wei (${formatEther(BigInt(wei))} ETH) per payment` : '-';
}

function policyFields(p: Policy | undefined): [string, string][] {
  return [
    ['allowlist', allowlistText(p)],
    ['spend cap', `${formatUsdText(p?.spendCapUsd ?? '')} per 24h`],
    ['approval above', formatUsdText(p?.approvalThresholdUsd ?? '')],
    ['max per payment', p?.maxPerPaymentUsd ? formatUsdText(p.maxPerPaymentUsd) : 'no maximum'],
    ['max network fee', weiText(p?.maxNetworkFeeWei ?? '')],
    ['limits', limitsText(p?.limits ?? [])],
    ['policy updated', `${formatTime(p?.updatedAt)} (version ${p?.version ?? '-'})`],
    ...otherPolicyFields(p),
  ];
}

const SHOWN_POLICY_FIELDS = ['allowlist', 'spend_cap_usd', 'approval_threshold_usd', 'max_per_payment_usd', 'max_network_fee_wei', 'limits', 'version', 'updated_at'];

/** Policy fields without a rendering of their own are shown as their JSON value, so none is hidden. */
function otherPolicyFields(p: Policy | undefined): [string, string][] {
  if (!p) return [];
  const json = toJson(PolicySchema, p, { alwaysEmitImplicit: true }) as Record<string, unknown>;
  return PolicySchema.fields
    .filter((f) => !SHOWN_POLICY_FIELDS.includes(f.name))
    .map((f) => [f.name.replace(/_/g, ' '), JSON.stringify(json[f.jsonName] ?? null)]);
}

function agentFields(a: Agent | undefined): string {
  if (!a) return 'no agent in the response';
  return formatFields([
    ['id', a.id],
    ['organization', a.orgId],
    ['name', a.name],
    ['status', agentStatus.fromProto(a.status) ?? '-'],
    ...policyFields(a.policy),
    ['created', formatTime(a.createdAt)],
    ['last ping', a.lastPingAt ? formatTime(a.lastPingAt) : 'never'],
  ]);
}

/**
 * `policy set` flags come from SetPolicyRequest's fields: a field added to the policy is a flag
 * (`--field-name`) with no edit here. These are the short names the existing fields keep.
 */
const POLICY_FLAGS = messageFlags(SetPolicyRequestSchema, {
  allowlist: { flag: '--allow', placeholder: 'ADDR_OR_SLUG[,...]' },
  spend_cap_usd: { flag: '--cap', placeholder: 'USD' },
  approval_threshold_usd: { flag: '--threshold', placeholder: 'USD' },
  max_network_fee_wei: { flag: '--max-fee-wei', placeholder: 'WEI' },
}, ['agent_id', 'limits']);

/** A policy document file (domain/policyDocument.ts) as a SetPolicy request: the whole policy, every field set. */
function requestFromDocument(agentId: string, path: string): MessageInitShape<typeof SetPolicyRequestSchema> {
  let doc;
  try {
    doc = parsePolicyDocument(readJsonFile(path, { wholeNumbers: true }));
  } catch (err) {
    if (err instanceof DomainError) throw new UsageError(`${path}: ${err.message}`);
    throw err;
  }
  return {
    agentId, allowlist: doc.allowlist, spendCapUsd: doc.spendCapUsd, approvalThresholdUsd: doc.approvalThresholdUsd,
    maxPerPaymentUsd: doc.maxPerPaymentUsd, maxNetworkFeeWei: doc.maxNetworkFeeWei ?? String(DEFAULT_MAX_NETWORK_FEE_WEI),
    limits: { items: doc.limits.map((l) => limitMessage(l)) },
  };
}

/**
 * The SetPolicy request `policy set` and `policy simulate` send: from a document (--file) or from
 * flags, never both. The server validates the values; an optional one left out keeps the agent's.
 */
function policyRequest(flags: Flags, agentId: string): MessageInitShape<typeof SetPolicyRequestSchema> {
  const file = flags.get('--file');
  const mixed = Object.keys(POLICY_FLAGS.flags).find((f) => flags.has(f));
  if (file !== undefined && mixed !== undefined) throw new UsageError(`--file cannot be combined with ${mixed}: the document is the whole policy`);
  return file !== undefined ? requestFromDocument(agentId, file) : POLICY_FLAGS.read(flags, { agentId });
}

/** A document limit as its message: the keys it sets, by their proto names. */
export function limitMessage(l: Record<string, unknown>): MessageInitShape<typeof SpendLimitSchema> {
  return {
    window: l.window as string, maxUsd: l.max_usd as string | undefined, maxCount: l.max_count as number | undefined,
    maxNetworkFeeWei: l.max_network_fee_wei as string | undefined, recipient: l.recipient as string | undefined,
  };
}

/** The agent's policy as its document, with limits written as the document writes them. */
function documentOf(p: Policy | undefined): Record<string, unknown> {
  const json = p ? toJson(PolicySchema, p, { alwaysEmitImplicit: true }) as { limits?: Array<Record<string, unknown>> } : {};
  const limits = (json.limits ?? []).map((l) => Object.fromEntries(Object.entries({
    window: l.window, max_usd: l.maxUsd, max_count: l.maxCount, max_network_fee_wei: l.maxNetworkFeeWei, recipient: l.recipient,
  }).filter(([, v]) => v !== undefined)));
  return policyDocument({
    allowlist: p?.allowlist ?? [], spendCapUsd: p?.spendCapUsd ?? '0', approvalThresholdUsd: p?.approvalThresholdUsd ?? '0',
    maxPerPaymentUsd: p?.maxPerPaymentUsd ?? '', maxNetworkFeeWei: p?.maxNetworkFeeWei ?? '0', limits,
  });
}

/** Window limits, one line each, as people read them. */
export function limitsText(limits: readonly SpendLimit[]): string {
  if (limits.length === 0) return 'none';
  return limits.map((l) => [
    `${l.window}:`, l.maxUsd !== undefined ? formatUsdText(l.maxUsd) : '', l.maxCount !== undefined ? `${l.maxCount} payments` : '',
    l.maxNetworkFeeWei !== undefined ? `${l.maxNetworkFeeWei} wei of fees` : '', l.recipient ? `to ${l.recipient}` : '',
  ].filter(Boolean).join(' ')).join('; ');
}

/** `agent create|update|get|list` and `policy set`. */
export const agentCommands: Command[] = [
  {
    group: 'agent',
    action: 'create',
    synopsis: '--org ORG_ID --name NAME',
    summary: 'Add an agent; it starts with a policy that allows nothing.',
    flags: { '--org': 'value', '--name': 'value' },
    prepare(flags) {
      const request = { orgId: flags.require('--org'), name: flags.require('--name') };
      return async (client) => {
        const r = await client.createAgent(request);
        return commandOutput(CreateAgentResponseSchema, r, agentFields(r.agent));
      };
    },
  },
  {
    group: 'agent',
    action: 'update',
    synopsis: '--id AGENT_ID [--name NAME] [--status active|paused|revoked]',
    summary: 'Rename an agent or change its status; revocation is final.',
    flags: { '--id': 'value', '--name': 'value', '--status': 'value' },
    prepare(flags) {
      const agentId = flags.require('--id');
      const name = flags.get('--name');
      const statusName = optionalChoice(flags, '--status', AGENT_STATUSES);
      const status = statusName === undefined ? undefined : agentStatus.toProto(statusName);
      if (name === undefined && status === undefined) throw new UsageError('agent update needs --name or --status');
      return async (client) => {
        const r = await client.updateAgent({ agentId, name, status });
        return commandOutput(UpdateAgentResponseSchema, r, agentFields(r.agent));
      };
    },
  },
  {
    group: 'agent',
    action: 'get',
    synopsis: '--id AGENT_ID',
    summary: 'Show one agent with its policy.',
    flags: { '--id': 'value' },
    prepare(flags) {
      const request = { agentId: flags.require('--id') };
      return async (client) => {
        const r = await client.getAgent(request);
        return commandOutput(GetAgentResponseSchema, r, agentFields(r.agent));
      };
    },
  },
  {
    group: 'agent',
    action: 'list',
    synopsis: '--org ORG_ID',
    summary: "List an organization's agents, oldest first.",
    flags: { '--org': 'value' },
    prepare(flags) {
      const request = { orgId: flags.require('--org') };
      return async (client) => {
        const r = await allPages((page) => client.listAgents({ ...request, ...page }), (x) => x.agents);
        const rows = r.agents.map((a) => [
          a.id, a.name, agentStatus.fromProto(a.status) ?? '-', formatUsdText(a.policy?.spendCapUsd ?? ''), formatUsdText(a.policy?.approvalThresholdUsd ?? ''),
          a.lastPingAt ? formatTime(a.lastPingAt) : 'never', allowlistText(a.policy),
        ]);
        return commandOutput(ListAgentsResponseSchema, r, formatList('agents', ['ID', 'NAME', 'STATUS', 'CAP/24H', 'APPROVAL ABOVE', 'LAST PING', 'ALLOWLIST'], rows));
      };
    },
  },
  {
    group: 'policy',
    action: 'set',
    synopsis: `--agent AGENT_ID (--file POLICY.json | ${POLICY_FLAGS.synopsis})`,
    summary: "Replace an agent's policy, whole from a policy document (--file), or from flags: --allow repeats, and --allow '' allows nothing; without --max-fee-wei or --max-per-payment-usd that value stays as it is, and so do the window limits; --max-per-payment-usd '' removes the maximum.",
    flags: { '--agent': 'value', '--file': 'value', ...POLICY_FLAGS.flags },
    prepare(flags) {
      const agentId = flags.require('--agent');
      const request = policyRequest(flags, agentId);
      return async (client) => {
        const r = await client.setPolicy(request);
        return { ...commandOutput(SetPolicyResponseSchema, r, `policy of ${agentId}\n${formatFields(policyFields(r.policy))}`), warnings: r.warnings };
      };
    },
  },
  {
    group: 'policy',
    action: 'simulate',
    synopsis: `--agent AGENT_ID (--file POLICY.json | ${POLICY_FLAGS.synopsis}) [--days N]`,
    summary: "Replay the agent's payment requests of the last N days (30 unless given, at most 366), in order, under a proposed policy, given as policy set takes it, and show what would change; writes nothing.",
    flags: { '--agent': 'value', '--file': 'value', '--days': 'value', ...POLICY_FLAGS.flags },
    prepare(flags) {
      const policy = policyRequest(flags, flags.require('--agent'));
      const days = optionalInteger(flags, '--days', 1, 366);
      return async (client) => {
        const r = await client.simulatePolicy({ policy, days });
        const outcome = (o: SimulatedOutcome) => simulatedOutcome.fromProto(o) ?? 'unknown';
        const iso = (t: typeof r.since) => (t ? new Date(timestampMs(t)).toISOString() : null);
        const changed = r.changed.map((c) => ({
          transaction_id: c.transactionId, created_at: iso(c.createdAt), amount_usd: c.amountUsd, recipient: c.recipient, service: c.service || null,
          was: outcome(c.was), would_be: outcome(c.wouldBe), rule: c.rule ? toJson(PolicyRuleSchema, c.rule, { useProtoFieldName: true }) : null, reason: c.reason || null,
        }));
        const json = {
          requests: r.requests, allowed: r.allowed, pending_approval: r.pendingApproval, denied: r.denied, changed, changed_total: r.changedTotal,
          since: iso(r.since), until: iso(r.until),
        };
        const lines = changed.map((c) => `  ${c.created_at}  ${c.transaction_id}  ${formatUsdText(c.amount_usd)} to ${c.service ?? c.recipient}: ${c.was} -> ${c.would_be}${c.reason ? ` (${c.reason})` : ''}`);
        const more = r.changedTotal > changed.length ? `\n  … and ${r.changedTotal - changed.length} more` : '';
        const text = `${r.requests} requests since ${json.since}: ${r.allowed} allowed, ${r.pendingApproval} pending approval, ${r.denied} denied under the proposed policy\n`
          + (r.changedTotal === 0 ? 'no outcome would change' : `${r.changedTotal} would change:\n${lines.join('\n')}${more}`);
        return { json: json as unknown as JsonValue, text };
      };
    },
  },
  {
    group: 'policy',
    action: 'history',
    synopsis: '--agent AGENT_ID',
    summary: "Every version of an agent's policy, oldest first, with who made it and what changed; with --json, each version's policy document.",
    flags: { '--agent': 'value' },
    prepare(flags) {
      const request = { agentId: flags.require('--agent') };
      return async (client) => {
        const r = await allPages((page) => client.listPolicyVersions({ ...request, ...page }), (x) => x.versions, VERSION_PAGE_SIZE.max);
        let previous: Record<string, unknown> | undefined;
        const versions = r.versions.map((v) => {
          const doc = documentOf(v.policy);
          const changed = previous === undefined ? Object.keys(doc) : Object.keys(doc).filter((k) => JSON.stringify(doc[k]) !== JSON.stringify(previous![k]));
          previous = doc;
          return { version: v.version, created_at: v.createdAt ? new Date(timestampMs(v.createdAt)).toISOString() : null, actor: v.actor, changed, policy: doc };
        });
        const text = versions.map((v) => `version ${v.version}  ${v.created_at ?? '-'}  ${v.actor || 'before versions were kept'}\n  ${
          v.version === 1 ? 'first policy' : v.changed.length === 0 ? 'nothing changed' : v.changed.map((k) => `${k}: ${JSON.stringify(v.policy[k])}`).join('\n  ')}`).join('\n');
        return { json: versions as unknown as JsonValue, text: text || 'no versions' };
      };
    },
  },
  {
    group: 'policy',
    action: 'get',
    synopsis: '--agent AGENT_ID',
    summary: "Show an agent's policy; with --json, as the policy document that policy set --file takes.",
    flags: { '--agent': 'value' },
    prepare(flags) {
      const request = { agentId: flags.require('--agent') };
      return async (client) => {
        const r = await client.getAgent(request);
        return { json: documentOf(r.agent?.policy) as JsonValue, text: `policy of ${request.agentId}\n${formatFields(policyFields(r.agent?.policy))}` };
      };
    },
  },
];
