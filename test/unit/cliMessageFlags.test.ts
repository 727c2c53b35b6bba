import { create } from '@bufbuild/protobuf';
import { describe, expect, test } from 'vitest';
import { ListTransactionsRequestSchema, SetPolicyRequestSchema } from '../../gen/paypolicy/v1/admin_pb.js';
import { agentCommands } from '../../src/cli/commands/agents.js';
import { messageFlags } from '../../src/cli/messageFlags.js';
import { parseFlags } from '../../src/cli/parseFlags.js';
import { UsageError } from '../../src/cli/errors.js';

const policySet = agentCommands.find((c) => c.group === 'policy' && c.action === 'set')!;

describe('flags read from a request message', () => {
  test('behavior: every SetPolicyRequest field is a policy set flag, so a field added to the policy needs no CLI edit', () => {
    // One flag per field (agent_id is --agent; limits, a message, come whole from the --file document);
    // fields without a short name get --field-name.
    expect(Object.keys(policySet.flags)).toHaveLength(SetPolicyRequestSchema.fields.length);
    expect(policySet.synopsis).toBe('--agent AGENT_ID (--file POLICY.json | --allow ADDR_OR_SLUG[,...] --cap USD --threshold USD [--max-fee-wei WEI] [--max-per-payment-usd MAX_PER_PAYMENT_USD])');
    const unnamed = messageFlags(SetPolicyRequestSchema, {}, ['agent_id', 'limits']);
    expect(unnamed.flags).toEqual({ '--allowlist': 'list', '--spend-cap-usd': 'value', '--approval-threshold-usd': 'value', '--max-network-fee-wei': 'value', '--max-per-payment-usd': 'value' });
    expect(unnamed.synopsis).toBe('--allowlist ALLOWLIST --spend-cap-usd SPEND_CAP_USD --approval-threshold-usd APPROVAL_THRESHOLD_USD [--max-network-fee-wei MAX_NETWORK_FEE_WEI] [--max-per-payment-usd MAX_PER_PAYMENT_USD]');
  });

  test('behavior: the request is the message the flags describe; an optional field left out stays unset', async () => {
    const read = (argv: string[]) => {
      let request: unknown;
      const call = policySet.prepare(parseFlags(argv, { ...policySet.flags }));
      void call({ setPolicy: async (r: unknown) => { request = r; throw new Error('sent'); } } as never).catch(() => undefined);
      return request;
    };
    expect(read(['--agent', 'agt_1', '--allow', '0xa,0xb', '--allow', 'svc', '--cap', '10', '--threshold', '5'])).toEqual(
      create(SetPolicyRequestSchema, { agentId: 'agt_1', allowlist: ['0xa', '0xb', 'svc'], spendCapUsd: '10', approvalThresholdUsd: '5' }),
    );
    const withFee = read(['--agent', 'agt_1', '--allow', '', '--cap', '1', '--threshold', '1', '--max-fee-wei', '7']) as { maxNetworkFeeWei?: string; allowlist: string[] };
    expect(withFee.maxNetworkFeeWei).toBe('7');
    expect(withFee.allowlist).toEqual([]);
  });

  test('error: a required field or list left out is a usage error naming its flag', () => {
    const prepare = (argv: string[]) => () => policySet.prepare(parseFlags(argv, { ...policySet.flags }));
    expect(prepare(['--agent', 'a', '--cap', '1', '--threshold', '1'])).toThrow(new UsageError("missing required option --allow (use --allow '' for none)"));
    expect(prepare(['--agent', 'a', '--allow', '', '--threshold', '1'])).toThrow(/--cap/);
  });

  test('behavior: values are read as the field\'s type (numbers, enum names); a value the type cannot hold is a usage error', () => {
    const list = messageFlags(ListTransactionsRequestSchema, {}, ['from', 'to']);
    const read = (argv: string[]) => list.read(parseFlags(argv, list.flags));
    const m = read(['--org-id', 'org_1', '--agent-id', '', '--status', 'TRANSACTION_STATUS_SIGNED', '--page-size', '3', '--page-token', '']);
    expect(m.pageSize).toBe(3);
    expect(m.status).not.toBe(0);
    expect(() => read(['--org-id', 'o', '--agent-id', '', '--status', 'TRANSACTION_STATUS_NOPE', '--page-size', '1', '--page-token', ''])).toThrow(UsageError);
    expect(() => read(['--org-id', 'o', '--agent-id', '', '--status', 'TRANSACTION_STATUS_SIGNED', '--page-size', 'many', '--page-token', ''])).toThrow(/--page-size takes a number/);
    // A message field cannot be a flag: refused when the flags are built, not left out.
    expect(() => messageFlags(ListTransactionsRequestSchema, {})).toThrow(/ListTransactionsRequest\.from cannot be a command-line flag/);
  });
});
