import { ListTransactionsResponseSchema, type Transaction } from '../../../gen/paypolicy/v1/admin_pb.js';
import { commandOutput, type Command } from '../command.js';
import { TRANSACTION_STATES } from '../../domain/transactionState.js';
import { chainStatus, transactionStatus } from '../../protoMapping/enums.js';
import { optionalChoice, optionalInteger, optionalTime } from '../flagValues.js';
import { formatList, formatTime, formatUsdText } from '../render.js';

/** Where the money went: the registry slug when known, else the address; pings have neither. */
function recipient(t: Transaction): string {
  if (t.serviceSlug && t.recipientAddress) return `${t.serviceSlug} (${t.recipientAddress})`;
  return t.serviceSlug || t.recipientAddress;
}

/** A submitted raw transaction's chain state, current hash and confirmations; empty for other rows. */
function onChain(t: Transaction): string {
  const state = chainStatus.fromProto(t.chainStatus);
  if (state === undefined) return '';
  return [state, t.txHash, t.confirmations ? `${t.confirmations} conf.` : ''].filter(Boolean).join(' ');
}

/** A --status choice as the request's enum; unset lists every status. */
function statusOf(name: (typeof TRANSACTION_STATES)[number] | undefined) {
  return name === undefined ? 0 : transactionStatus.toProto(name);
}

/** `tx list`. */
export const transactionCommands: Command[] = [
  {
    group: 'tx',
    action: 'list',
    synopsis: '--org ORG_ID [--agent AGENT_ID] [--status S] [--from ISO8601] [--to ISO8601] [--page-size N] [--page-token T]',
    summary: "Page through an organization's ledger, newest first (--from inclusive, --to exclusive).",
    flags: {
      '--org': 'value', '--agent': 'value', '--status': 'value', '--from': 'value', '--to': 'value', '--page-size': 'value', '--page-token': 'value',
    },
    prepare(flags) {
      const request = {
        orgId: flags.require('--org'),
        agentId: flags.get('--agent') ?? '',
        status: statusOf(optionalChoice(flags, '--status', TRANSACTION_STATES)),
        from: optionalTime(flags, '--from'),
        to: optionalTime(flags, '--to'),
        pageSize: optionalInteger(flags, '--page-size', 1, 500) ?? 0,
        pageToken: flags.get('--page-token') ?? '',
      };
      return async (client) => {
        const r = await client.listTransactions(request);
        const rows = r.transactions.map((t) => [
          formatTime(t.createdAt), t.id, t.agentId, t.type, transactionStatus.fromProto(t.status) ?? '-', formatUsdText(t.amountUsd), t.chainId ? String(t.chainId) : '',
          recipient(t), onChain(t), t.reason,
        ]);
        const table = formatList('transactions', ['CREATED', 'ID', 'AGENT', 'TYPE', 'STATUS', 'AMOUNT', 'CHAIN', 'RECIPIENT', 'ON CHAIN', 'REASON'], rows);
        const text = r.nextPageToken ? `${table}\n\nmore: --page-token ${r.nextPageToken}` : table;
        return commandOutput(ListTransactionsResponseSchema, r, text);
      };
    },
  },
];
