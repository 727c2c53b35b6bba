import {
  Decision,
  DecideApprovalResponseSchema,
  ListApprovalsResponseSchema,
  type Approval,
} from '../../../gen/paypolicy/v1/admin_pb.js';
import { commandOutput, type Command } from '../command.js';
import { UsageError } from '../errors.js';
import { optionalChoice } from '../flagValues.js';
import { formatFields, formatList, formatTime, formatUsdText } from '../render.js';

import { APPROVAL_STATES, approvalStatus } from '../../protoMapping/enums.js';
import { allPages } from './pages.js';

/** The most the payment can cost in network fees on top of its amount, as the server reported it. */
function maxFeeText(a: Approval): string {
  if (a.maxNetworkFeeWei) return `${a.maxNetworkFeeWei} wei`;
  if (a.maxNetworkFeeUsd) return `${formatUsdText(a.maxNetworkFeeUsd)} (Tempo)`;
  return 'none';
}

/**
 * Every transfer of a split payment with its amount, the recipient's share first: approving
 * approves exactly those, so a person must see them all.
 */
function payeesText(a: Approval): string {
  return a.payees.map((p) => `${formatUsdText(p.amountUsd)} to ${p.address}`).join(', ');
}

function approvalFields(a: Approval | undefined): string {
  if (!a) return 'no approval in the response';
  return formatFields([
    ['id', a.id],
    ['status', approvalStatus.fromProto(a.status) ?? '-'],
    ['transaction', a.transactionId],
    ['agent', a.agentId],
    ['amount', formatUsdText(a.amountUsd)],
    ['recipient', a.serviceSlug ? `${a.serviceSlug} (${a.recipientAddress})` : a.recipientAddress],
    ...(a.payees.length > 1 ? [['pays', payeesText(a)] as [string, string]] : []),
    ['reason', a.reason],
    ['max network fee', maxFeeText(a)],
    ['created', formatTime(a.createdAt)],
    ['expires', formatTime(a.expiresAt)],
    ['decided', formatTime(a.decidedAt)],
    ['decided by', a.decidedBy],
    ['note', a.note],
  ]);
}

/** `approval list` and `approval decide`. */
export const approvalCommands: Command[] = [
  {
    group: 'approval',
    action: 'list',
    synopsis: '--org ORG_ID [--status pending|approved|denied|expired]',
    summary: "List an organization's approval requests, newest first.",
    flags: { '--org': 'value', '--status': 'value' },
    prepare(flags) {
      const statusName = optionalChoice(flags, '--status', APPROVAL_STATES);
      const request = { orgId: flags.require('--org'), status: statusName === undefined ? 0 : approvalStatus.toProto(statusName) };
      return async (client) => {
        const r = await allPages((page) => client.listApprovals({ ...request, ...page }), (x) => x.approvals);
        const rows = r.approvals.map((a) => [
          a.id, approvalStatus.fromProto(a.status) ?? '-', formatUsdText(a.amountUsd), maxFeeText(a), a.agentId, a.payees.length > 1 ? payeesText(a) : a.serviceSlug || a.recipientAddress, formatTime(a.createdAt), formatTime(a.expiresAt), a.reason,
        ]);
        const headers = ['ID', 'STATUS', 'AMOUNT', 'MAX FEE', 'AGENT', 'RECIPIENT', 'CREATED', 'EXPIRES', 'REASON'];
        return commandOutput(ListApprovalsResponseSchema, r, formatList('approvals', headers, rows));
      };
    },
  },
  {
    group: 'approval',
    action: 'decide',
    synopsis: '--id ID (--approve | --deny) [--note TEXT] [--by NAME]',
    summary: 'Approve (and sign) or deny a pending approval request.',
    flags: { '--id': 'value', '--approve': 'switch', '--deny': 'switch', '--note': 'value', '--by': 'value' },
    prepare(flags) {
      const id = flags.require('--id');
      if (flags.has('--approve') === flags.has('--deny')) throw new UsageError('approval decide needs exactly one of --approve and --deny');
      const request = {
        id, decision: flags.has('--approve') ? Decision.APPROVE : Decision.DENY, note: flags.get('--note') ?? '', decidedBy: flags.get('--by') ?? '',
      };
      return async (client) => {
        const r = await client.decideApproval(request);
        return commandOutput(DecideApprovalResponseSchema, r, approvalFields(r.approval));
      };
    },
  },
];
