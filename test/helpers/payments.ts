import { recoverTypedDataAddress, type Address, type Hex } from 'viem';
import type { Admin } from './admin.js';
import { rest, type RestResult } from './server.js';
import type { TransactionState } from '../../src/domain/transactionState.js';
import { transactionStatus } from '../../src/protoMapping/enums.js';
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { Transaction } from '../../gen/paypolicy/v1/admin_pb.js';
import type { SignRequestSchema } from '../../gen/paypolicy/v1/payment_policy_pb.js';

/** EIP-3009 `TransferWithAuthorization`, written out here so the tests do not trust src/. */
export const TRANSFER_WITH_AUTHORIZATION_TYPES = {
  TransferWithAuthorization: [
    { name: 'from', type: 'address' },
    { name: 'to', type: 'address' },
    { name: 'value', type: 'uint256' },
    { name: 'validAfter', type: 'uint256' },
    { name: 'validBefore', type: 'uint256' },
    { name: 'nonce', type: 'bytes32' },
  ],
} as const;

/** Permit2 `PermitWitnessTransferFrom` with the x402 proxy's witness, written out here for the same reason. */
export const PERMIT2_WITNESS_TYPES = {
  PermitWitnessTransferFrom: [
    { name: 'permitted', type: 'TokenPermissions' },
    { name: 'spender', type: 'address' },
    { name: 'nonce', type: 'uint256' },
    { name: 'deadline', type: 'uint256' },
    { name: 'witness', type: 'Witness' },
  ],
  TokenPermissions: [
    { name: 'token', type: 'address' },
    { name: 'amount', type: 'uint256' },
  ],
  Witness: [
    { name: 'to', type: 'address' },
    { name: 'validAfter', type: 'uint256' },
  ],
} as const;

/** The `authorization` object of a 200 from POST /api/sign with type eip3009. */
export type WireAuthorization = {
  from: Address; to: Address; value: string; valid_after: string; valid_before: string; nonce: Hex;
  token: Address; domain_name: string; domain_version: string; chain_id: number;
};

/** Body of POST /api/sign as the wire protocol writes it. */
export type SignBody = {
  agent_id: string;
  type?: string;
  chain_id?: number;
  recipient_address?: string;
  amount_usd?: number | string;
  payload?: Record<string, unknown>;
  dry_run?: boolean;
};

/**
 * POST /api/sign. `connection: close` so that no idle keep-alive socket outlives the test
 * (server stop cannot close those and would wait its whole grace period).
 */
export function postSign(base: string, key: string, body: SignBody, idempotencyKey?: string): Promise<RestResult> {
  const headers: Record<string, string> = { connection: 'close' };
  if (idempotencyKey !== undefined) headers['idempotency-key'] = idempotencyKey;
  return rest(base, 'POST', '/api/sign', { key, body, headers });
}

/** GET /api/approvals/{id}/status with the same connection handling as postSign. */
export function getApprovalStatus(base: string, key: string, id: string): Promise<RestResult> {
  return rest(base, 'GET', `/api/approvals/${encodeURIComponent(id)}/status`, { key, headers: { connection: 'close' } });
}

/** Sets an agent's allowlist, cap and threshold through the AdminService. */
export async function setPolicy(admin: Admin, agentId: string, p: { allowlist: string[]; capUsd: string; thresholdUsd: string }): Promise<void> {
  await admin.client.setPolicy({ agentId, allowlist: p.allowlist, spendCapUsd: p.capUsd, approvalThresholdUsd: p.thresholdUsd }, admin.auth);
}

/** A ledger row with its status by name, as the README names the states (`signed` for TRANSACTION_STATUS_SIGNED). */
export type NamedTransaction = Omit<Transaction, 'status'> & { status: TransactionState | undefined };

/** Every ledger row of one agent (optionally of one status), following page tokens, statuses by name. */
export async function listAllTransactions(admin: Admin, orgId: string, agentId: string, status?: TransactionState): Promise<NamedTransaction[]> {
  const all: NamedTransaction[] = [];
  let pageToken = '';
  do {
    const filter = status === undefined ? 0 : transactionStatus.toProto(status);
    const r = await admin.client.listTransactions({ orgId, agentId, status: filter, pageSize: 500, pageToken }, admin.auth);
    all.push(...r.transactions.map((t) => ({ ...t, status: transactionStatus.fromProto(t.status) })));
    pageToken = r.nextPageToken;
  } while (pageToken !== '');
  return all;
}

/** Decimal USD text → integer micro-dollars, without floats. */
export function usdToMicros(text: string): bigint {
  const m = /^(\d+)(?:\.(\d{1,6}))?$/.exec(text);
  if (!m) throw new Error(`not a USD amount: ${text}`);
  return BigInt(m[1]!) * 1_000_000n + BigInt((m[2] ?? '').padEnd(6, '0'));
}

/** The address that signed the EIP-3009 authorization of a 200 answer. */
export function recoverAuthorizationSigner(signature: Hex, a: WireAuthorization): Promise<Address> {
  return recoverTypedDataAddress({
    domain: { name: a.domain_name, version: a.domain_version, chainId: a.chain_id, verifyingContract: a.token },
    types: TRANSFER_WITH_AUTHORIZATION_TYPES,
    primaryType: 'TransferWithAuthorization',
    message: {
      from: a.from, to: a.to, value: BigInt(a.value), validAfter: BigInt(a.valid_after), validBefore: BigInt(a.valid_before), nonce: a.nonce,
    },
    signature,
  });
}

/** The `permit2` object of a 200 from POST /api/sign with type permit2. */
export type WirePermit2 = {
  owner: Address; token: Address; amount: string; spender: Address; nonce: string; deadline: string; to: Address;
  valid_after: string; permit2_address: Address; chain_id: number;
};

/** The address that signed the Permit2 witness transfer of a 200 answer. */
export function recoverPermit2Signer(signature: Hex, p: WirePermit2): Promise<Address> {
  return recoverTypedDataAddress({
    domain: { name: 'Permit2', chainId: p.chain_id, verifyingContract: p.permit2_address },
    types: PERMIT2_WITNESS_TYPES,
    primaryType: 'PermitWitnessTransferFrom',
    message: {
      permitted: { token: p.token, amount: BigInt(p.amount) },
      spender: p.spender,
      nonce: BigInt(p.nonce),
      deadline: BigInt(p.deadline),
      witness: { to: p.to, validAfter: BigInt(p.valid_after) },
    },
    signature,
  });
}

/**
 * A REST `payload` object as SignRequest's `payload` oneof for one payment type, written out field
 * by field (REST's snake_case keys are the proto field names) so the RPC tests send what REST sends.
 */
export function rpcPayload(type: 'eip3009' | 'permit2' | 'raw_transaction' | 'x402' | 'mpp', p: Record<string, unknown>): MessageInitShape<typeof SignRequestSchema>['payload'] {
  const big = (v: unknown) => (v === undefined ? undefined : BigInt(v as string | number));
  switch (type) {
    case 'eip3009':
    case 'permit2':
      return { case: type, value: { validForSeconds: p.valid_for_seconds as number | undefined } };
    case 'raw_transaction':
      return { case: 'rawTransaction', value: { gas: big(p.gas), maxFeePerGas: big(p.max_fee_per_gas), maxPriorityFeePerGas: big(p.max_priority_fee_per_gas) } };
    case 'x402':
    case 'mpp':
      return { case: type, value: { resourceUrl: p.resource_url as string, method: (p.method as string | undefined) ?? '' } };
  }
}
