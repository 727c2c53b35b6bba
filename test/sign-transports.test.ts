import * as grpc from '@grpc/grpc-js';
import { create, fromBinary, toBinary, type DescMessage, type MessageInitShape, type MessageShape } from '@bufbuild/protobuf';
import { timestampMs } from '@bufbuild/protobuf/wkt';
import { Code, ConnectError, type Client } from '@connectrpc/connect';
import {
  decodeFunctionData,
  erc20Abi,
  getAddress,
  parseTransaction,
  recoverTransactionAddress,
  recoverTypedDataAddress,
  type Address,
  type Hex,
} from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { Decision } from '../gen/paypolicy/v1/admin_pb.js';
import {
  AgentStatus,
  ApprovalStatus,
  PaymentPolicyService,
  PaymentType,
  SignOutcome,
  type SignRequestSchema,
  type SignResponseSchema,
} from '../gen/paypolicy/v1/payment_policy_pb.js';
import { adminFor, createAgent, createTenant, type Admin, type Tenant } from './helpers/admin.js';
import { connectClient, grpcChannel } from './helpers/clients.js';
import { listAllTransactions, rpcPayload } from './helpers/payments.js';
import { rest, startTestServer, type RestResult, type TestServer } from './helpers/server.js';

/**
 * PaymentPolicyService.Sign and GetApprovalStatus over Connect JSON and over real gRPC
 * (@grpc/grpc-js). Each outcome is checked on its own and then compared with the REST answer to
 * the equivalent request, field by field wherever the value is deterministic (the clock is fixed,
 * so validity windows are too; nonces, signatures and ids are random).
 */

const T0 = Date.parse('2031-06-07T08:09:10.111Z');
let clock = T0;
const nowSeconds = () => Math.floor(clock / 1000);

let s: TestServer;
let admin: Admin;
let connect: Client<typeof PaymentPolicyService>;
let channel: grpc.Client;
let treasury: Address;
let bare: Tenant;

const RECIPIENT = getAddress('0x90f79bf6eb2c4f870365e785982e1f101e93b906');
const STRANGER = getAddress('0x15d34aaf54267db7d7c367839aaf71a00a2c6a65');
const USDC_BASE = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const SIG_RE = /^0x[0-9a-f]{130}$/;

const M = PaymentPolicyService.method;
const TYPE_NAMES: Record<number, string> = { [PaymentType.EIP3009]: 'eip3009', [PaymentType.PERMIT2]: 'permit2', [PaymentType.RAW_TRANSACTION]: 'raw_transaction' };
const OUTCOME_STATUS: Record<number, number> = { [SignOutcome.ALLOWED]: 200, [SignOutcome.PENDING_APPROVAL]: 202, [SignOutcome.DENIED]: 403 };

type SignResponse = MessageShape<typeof SignResponseSchema>;
type SignInit = MessageInitShape<typeof SignRequestSchema>;

/** Connect call options: the key, `connection: close` so close() is not held up by idle sockets. */
const opts = (key: string = s.bootstrap.api_key, extra: Record<string, string> = {}) => ({
  headers: { connection: 'close', authorization: `Bearer ${key}`, ...extra },
});

type GrpcOutcome<O extends DescMessage> =
  | { ok: true; message: MessageShape<O> }
  | { ok: false; code: grpc.status; details: string; errorCode: string | undefined };

/** One unary call through @grpc/grpc-js with any metadata (the shared helper sets only the key). */
function grpcCall<I extends DescMessage, O extends DescMessage>(
  method: { name: string; input: I; output: O },
  request: MessageInitShape<I>,
  metadata: Record<string, string> = { authorization: `Bearer ${s.bootstrap.api_key}` },
): Promise<GrpcOutcome<O>> {
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(metadata)) md.set(k, v);
  return new Promise((resolve) => {
    channel.makeUnaryRequest(
      `/${PaymentPolicyService.typeName}/${method.name}`,
      (m: MessageShape<I>) => Buffer.from(toBinary(method.input, m)),
      (b: Buffer) => fromBinary(method.output, b),
      create(method.input, request),
      md,
      (err, value) => {
        if (err) resolve({ ok: false, code: err.code, details: fullyDecoded(err.details), errorCode: err.metadata.get('x-error-code')[0]?.toString() });
        else resolve({ ok: true, message: value as MessageShape<O> });
      },
    );
  });
}

/**
 * grpc-message is percent-encoded on the wire; grpc-js decodes it with decodeURI, which leaves
 * reserved characters such as ':' and ',' encoded (%3A, %2C). Finish the decoding here.
 */
function fullyDecoded(details: string): string {
  try {
    return decodeURIComponent(details);
  } catch {
    return details;
  }
}

const grpcAuth = (key: string = s.bootstrap.api_key, extra: Record<string, string> = {}) => ({ authorization: `Bearer ${key}`, ...extra });

async function grpcSign(req: SignInit, metadata?: Record<string, string>): Promise<SignResponse> {
  const r = await grpcCall(M.sign, req, metadata);
  if (!r.ok) throw new Error(`gRPC Sign failed: ${r.code} ${r.details}`);
  return r.message;
}

async function grpcSignError(req: SignInit, metadata?: Record<string, string>) {
  const r = await grpcCall(M.sign, req, metadata);
  if (r.ok) throw new Error('expected the gRPC call to fail');
  return r;
}

async function connectError(p: Promise<unknown>): Promise<ConnectError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(ConnectError);
    return err as ConnectError;
  }
  throw new Error('expected the Connect call to fail');
}

let agentCount = 0;
async function agentWith(policy: { allowlist?: string[]; cap?: string; threshold?: string } = {}): Promise<string> {
  const agentId = await createAgent(admin, s.bootstrap.org_id, `transports-${++agentCount}`);
  await admin.client.setPolicy(
    { agentId, allowlist: policy.allowlist ?? [RECIPIENT], spendCapUsd: policy.cap ?? '100', approvalThresholdUsd: policy.threshold ?? '1' },
    admin.auth,
  );
  return agentId;
}

async function ledger(agentId: string) {
  return listAllTransactions(admin, s.bootstrap.org_id, agentId);
}

function restSign(body: Record<string, unknown>, idem?: string, key = s.bootstrap.api_key): Promise<RestResult> {
  return rest(s.url, 'POST', '/api/sign', { key, body, headers: idem === undefined ? {} : { 'idempotency-key': idem } });
}

/** A SignResponse written in the REST body's shape, so both can be compared with toEqual. */
/** The rule object as REST writes it, every key present. */
function ruleOf(m: SignResponse): { rule?: Record<string, string | null> } {
  const r = m.rule;
  if (!r) return {};
  return { rule: { kind: r.kind, window: r.window ?? null, scope: r.scope ?? null, recipient: r.recipient ?? null, limit: r.limit ?? null, spent: r.spent ?? null } };
}

function asRest(m: SignResponse): { status: number; body: Record<string, unknown> } {
  if (m.dryRun) {
    return {
      status: OUTCOME_STATUS[m.outcome]!,
      body: {
        dry_run: true,
        status: m.outcome === SignOutcome.ALLOWED ? 'allowed' : m.outcome === SignOutcome.PENDING_APPROVAL ? 'pending_approval' : 'denied',
        agent_id: m.agentId, type: TYPE_NAMES[m.type], chain_id: m.chainId, recipient_address: m.recipientAddress, amount_usd: Number(m.amountUsd),
        ...(m.reason === '' ? {} : { reason: m.reason }),
        ...(m.approvalThresholdUsd === undefined ? {} : { approval_threshold_usd: Number(m.approvalThresholdUsd) }),
        ...ruleOf(m),
      },
    };
  }
  if (m.outcome === SignOutcome.PENDING_APPROVAL) {
    return { status: 202, body: { status: 'pending_approval', reason: m.reason, transaction_id: m.transactionId, approval_request_id: m.approvalRequestId, ...ruleOf(m) } };
  }
  if (m.outcome === SignOutcome.DENIED) return { status: 403, body: { error: 'Policy denied', reason: m.reason, transaction_id: m.transactionId, ...ruleOf(m) } };
  const a = m.authorization;
  const p = m.permit2;
  const t = m.rawTransaction;
  return {
    status: 200,
    body: {
      signature: m.signature ?? null, tx_hash: m.txHash ?? null, agent_id: m.agentId, cost_usd: m.costUsd ?? null, transaction_id: m.transactionId,
      idempotent: m.idempotent, type: TYPE_NAMES[m.type], chain_id: m.chainId, recipient_address: m.recipientAddress,
      ...(a ? {
        authorization: {
          from: a.from, to: a.to, value: a.value, valid_after: a.validAfter, valid_before: a.validBefore, nonce: a.nonce, token: a.token,
          domain_name: a.domainName, domain_version: a.domainVersion, chain_id: a.chainId,
        },
      } : {}),
      ...(p ? {
        permit2: {
          owner: p.owner, token: p.permitted!.token, amount: p.permitted!.amount, spender: p.spender, nonce: p.nonce, deadline: p.deadline,
          to: p.witness!.to, valid_after: p.witness!.validAfter, permit2_address: p.verifyingContract, chain_id: p.chainId,
        },
      } : {}),
      ...(t ? { raw_transaction: { serialized: t.serialized, hash: t.hash, nonce: t.nonce, token: t.token, chain_id: t.chainId } } : {}),
    },
  };
}

/** Replaces the values that differ between two otherwise identical requests. */
function deterministic(r: { status: number; body: any }) {
  const b = structuredClone(r.body);
  const blank = (o: any, keys: string[]) => {
    if (o) for (const k of keys) if (k in o) o[k] = `<${k}>`;
  };
  blank(b, ['signature', 'transaction_id', 'approval_request_id']);
  blank(b.authorization, ['nonce']);
  blank(b.permit2, ['nonce']);
  blank(b.raw_transaction, ['serialized', 'hash', 'nonce']);
  return { status: r.status, body: b };
}

async function eip3009Signer(m: SignResponse): Promise<Address> {
  const a = m.authorization!;
  return recoverTypedDataAddress({
    domain: { name: a.domainName, version: a.domainVersion, chainId: a.chainId, verifyingContract: a.token as Address },
    types: {
      TransferWithAuthorization: [
        { name: 'from', type: 'address' }, { name: 'to', type: 'address' }, { name: 'value', type: 'uint256' },
        { name: 'validAfter', type: 'uint256' }, { name: 'validBefore', type: 'uint256' }, { name: 'nonce', type: 'bytes32' },
      ],
    },
    primaryType: 'TransferWithAuthorization',
    message: {
      from: a.from as Address, to: a.to as Address, value: BigInt(a.value), validAfter: BigInt(a.validAfter),
      validBefore: BigInt(a.validBefore), nonce: a.nonce as Hex,
    },
    signature: m.signature as Hex,
  });
}

async function permit2Signer(m: SignResponse): Promise<Address> {
  const p = m.permit2!;
  return recoverTypedDataAddress({
    domain: { name: 'Permit2', chainId: p.chainId, verifyingContract: p.verifyingContract as Address },
    types: {
      PermitWitnessTransferFrom: [
        { name: 'permitted', type: 'TokenPermissions' }, { name: 'spender', type: 'address' }, { name: 'nonce', type: 'uint256' },
        { name: 'deadline', type: 'uint256' }, { name: 'witness', type: 'Witness' },
      ],
      TokenPermissions: [{ name: 'token', type: 'address' }, { name: 'amount', type: 'uint256' }],
      Witness: [{ name: 'to', type: 'address' }, { name: 'validAfter', type: 'uint256' }],
    },
    primaryType: 'PermitWitnessTransferFrom',
    message: {
      permitted: { token: p.permitted!.token as Address, amount: BigInt(p.permitted!.amount) }, spender: p.spender as Address, nonce: BigInt(p.nonce),
      deadline: BigInt(p.deadline), witness: { to: p.witness!.to as Address, validAfter: BigInt(p.witness!.validAfter) },
    },
    signature: m.signature as Hex,
  });
}

/** The checks every allowed eip3009 answer must pass, on any transport. */
async function expectAllowedEip3009(m: SignResponse, agentId: string, amountUsd: string, atomic: string) {
  expect(m.outcome).toBe(SignOutcome.ALLOWED);
  expect(m.outcome).toBe(1);
  expect(m).toMatchObject({
    agentId, costUsd: amountUsd, amountUsd, chainId: 8453, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, idempotent: false,
    dryRun: false, reason: '', approvalRequestId: '',
  });
  expect(m.transactionId).toMatch(UUID_RE);
  expect(m.signature).toMatch(SIG_RE);
  expect(m.txHash).toBeUndefined();
  expect(m.permit2).toBeUndefined();
  expect(m.rawTransaction).toBeUndefined();
  expect(m.authorization).toMatchObject({
    from: treasury, to: RECIPIENT, value: atomic, validAfter: '0', validBefore: String(nowSeconds() + 3600), token: USDC_BASE,
    domainName: 'USD Coin', domainVersion: '2', chainId: 8453,
  });
  expect(await eip3009Signer(m)).toBe(treasury);
}

beforeAll(async () => {
  s = await startTestServer({ now: () => clock });
  admin = adminFor(s);
  connect = connectClient(PaymentPolicyService, s.url);
  channel = grpcChannel(s.url);
  const orgs = await admin.client.listOrganizations({}, admin.auth);
  treasury = getAddress(orgs.organizations.find((o) => o.id === s.bootstrap.org_id)!.treasuryAddress);
  bare = await createTenant(admin, 'bare-transports');
  await admin.client.setPolicy({ agentId: bare.agentId, allowlist: [RECIPIENT], spendCapUsd: '10', approvalThresholdUsd: '1' }, admin.auth);
});
afterAll(async () => {
  channel?.close();
  await s?.close();
});

describe('PaymentPolicyService.Sign over Connect JSON', () => {
  test('behavior: allowed eip3009 is outcome ALLOWED (1) with an authorization that recovers to the treasury', async () => {
    const agentId = await agentWith();
    const m = await connect.sign({ agentId, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '0.5' }, opts());
    await expectAllowedEip3009(m, agentId, '0.5', '500000');
  });

  test('behavior: allowed permit2 recovers to the treasury with the PermitWitnessTransferFrom types', async () => {
    const agentId = await agentWith();
    const m = await connect.sign({ agentId, type: PaymentType.PERMIT2, recipientAddress: RECIPIENT, amountUsd: '0.25', payload: { case: 'permit2', value: { validForSeconds: 120 } } }, opts());
    expect(m.outcome).toBe(SignOutcome.ALLOWED);
    expect(m.signature).toMatch(SIG_RE);
    expect(m.permit2).toMatchObject({
      owner: treasury, permitted: { amount: '250000' }, witness: { to: RECIPIENT, validAfter: '0' }, deadline: String(nowSeconds() + 120), chainId: 8453,
    });
    expect(await permit2Signer(m)).toBe(treasury);
  });

  test('behavior: an unspecified type is a raw transaction from the treasury, without signature', async () => {
    const agentId = await agentWith();
    const m = await connect.sign({ agentId, recipientAddress: RECIPIENT, amountUsd: '0.75' }, opts());
    expect(m.outcome).toBe(SignOutcome.ALLOWED);
    expect(m.type).toBe(PaymentType.RAW_TRANSACTION);
    expect(m.chainId).toBe(8453);
    expect(m.signature).toBeUndefined();
    const serialized = m.rawTransaction!.serialized as `0x02${string}`;
    expect(await recoverTransactionAddress({ serializedTransaction: serialized })).toBe(treasury);
    const tx = parseTransaction(serialized);
    expect(decodeFunctionData({ abi: erc20Abi, data: tx.data! }).args).toEqual([RECIPIENT, 750_000n]);
  });

  test('behavior: above the threshold is outcome PENDING_APPROVAL (2) with an approval request id', async () => {
    const agentId = await agentWith();
    const m = await connect.sign({ agentId, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '2' }, opts());
    expect(m.outcome).toBe(2);
    expect(m.approvalRequestId).toMatch(UUID_RE);
    expect(m.transactionId).toMatch(UUID_RE);
    expect(m.reason).toBe('Amount $2 exceeds the approval threshold of 1 USD; a human must approve it');
    expect(m.signature).toBeUndefined();
    expect(m.costUsd).toBeUndefined();
    const [row] = await ledger(agentId);
    expect(row).toMatchObject({ id: m.transactionId, status: 'pending_approval', approvalRequestId: m.approvalRequestId });
  });

  test('behavior: a recipient off the allowlist is outcome DENIED (3) with the reason', async () => {
    const agentId = await agentWith();
    const m = await connect.sign({ agentId, type: PaymentType.EIP3009, recipientAddress: STRANGER, amountUsd: '0.5' }, opts());
    expect(m.outcome).toBe(3);
    expect(m.reason).toBe(`Recipient ${STRANGER.toLowerCase()} is not on the agent's allowlist`);
    expect(m.transactionId).toMatch(UUID_RE);
    expect(m.signature).toBeUndefined();
  });

  test('behavior: a dry run has dry_run true, no transaction id, and persists nothing', async () => {
    const agentId = await agentWith({ threshold: '0.5' });
    const m = await connect.sign({ agentId, type: PaymentType.PERMIT2, recipientAddress: RECIPIENT, amountUsd: '0.75', dryRun: true }, opts());
    expect(m).toMatchObject({
      outcome: SignOutcome.PENDING_APPROVAL, dryRun: true, transactionId: '', agentId, amountUsd: '0.75', approvalThresholdUsd: '0.5',
      type: PaymentType.PERMIT2, chainId: 8453, recipientAddress: RECIPIENT,
    });
    expect(await ledger(agentId)).toEqual([]);
  });

  test('behavior: the idempotencyKey field replays the stored outcome', async () => {
    const agentId = await agentWith();
    const req = { agentId, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '0.3', idempotencyKey: 'connect-field' };
    const first = await connect.sign(req, opts());
    const again = await connect.sign(req, opts());
    expect(first.idempotent).toBe(false);
    expect(again.idempotent).toBe(true);
    expect(again.transactionId).toBe(first.transactionId);
    expect(again.signature).toBe(first.signature);
    expect(again.authorization).toEqual(first.authorization);
    expect(await ledger(agentId)).toHaveLength(1);
  });

  test('behavior: the idempotency-key header replays the stored outcome', async () => {
    const agentId = await agentWith();
    const req = { agentId, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '0.3' };
    const first = await connect.sign(req, opts(undefined, { 'idempotency-key': 'connect-header' }));
    const again = await connect.sign(req, opts(undefined, { 'idempotency-key': 'connect-header' }));
    expect(again).toMatchObject({ idempotent: true, transactionId: first.transactionId, signature: first.signature });
    // The same key as a field is the same key.
    const viaField = await connect.sign({ ...req, idempotencyKey: 'connect-header' }, opts());
    expect(viaField).toMatchObject({ idempotent: true, transactionId: first.transactionId });
    expect(await ledger(agentId)).toHaveLength(1);
  });

  test('behavior: the field and the header may both be set when they are equal', async () => {
    const agentId = await agentWith();
    const req = { agentId, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '0.3' };
    const first = await connect.sign({ ...req, idempotencyKey: 'field-key' }, opts());
    const both = await connect.sign({ ...req, idempotencyKey: 'field-key' }, opts(undefined, { 'idempotency-key': 'field-key' }));
    expect(both).toMatchObject({ idempotent: true, transactionId: first.transactionId });
  });

  test('error: a field and a header that differ are InvalidArgument invalid_idempotency_key', async () => {
    const agentId = await agentWith();
    const req = { agentId, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '0.3' };
    const err = await connectError(connect.sign({ ...req, idempotencyKey: 'field-key' }, opts(undefined, { 'idempotency-key': 'header-key' })));
    expect(err.code).toBe(Code.InvalidArgument);
    expect(err.metadata.get('x-error-code')).toBe('invalid_idempotency_key');
  });

  test('behavior: replaying a pending request returns the same approval request', async () => {
    const agentId = await agentWith();
    const req = { agentId, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '5', idempotencyKey: 'connect-pending' };
    const first = await connect.sign(req, opts());
    const again = await connect.sign(req, opts());
    expect(again).toMatchObject({ outcome: SignOutcome.PENDING_APPROVAL, idempotent: true, transactionId: first.transactionId, approvalRequestId: first.approvalRequestId });
  });

  test('error: a key reused for another request is AlreadyExists with x-error-code idempotency_key_reused', async () => {
    const agentId = await agentWith();
    await connect.sign({ agentId, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '0.3', idempotencyKey: 'connect-reuse' }, opts());
    const e = await connectError(connect.sign({ agentId, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '0.4', idempotencyKey: 'connect-reuse' }, opts()));
    expect(e.code).toBe(Code.AlreadyExists);
    expect(e.rawMessage).toBe('Idempotency-Key was already used for a different request');
    expect(e.metadata.get('x-error-code')).toBe('idempotency_key_reused');
  });

  test('error: an unknown agent is NotFound with x-error-code agent_not_found', async () => {
    const e = await connectError(connect.sign({ agentId: 'agt_000000000000000000000000', type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '1' }, opts()));
    expect(e.code).toBe(Code.NotFound);
    expect(e.rawMessage).toBe('Agent not found');
    expect(e.metadata.get('x-error-code')).toBe('agent_not_found');
  });

  test('error: another organization\'s agent is the same NotFound', async () => {
    const e = await connectError(connect.sign({ agentId: bare.agentId, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '1' }, opts()));
    expect(e.code).toBe(Code.NotFound);
    expect(e.rawMessage).toBe('Agent not found');
  });

  test.each([
    ['abc', 'amount_usd must be a non-negative decimal number with at most 6 decimal places', 'invalid_amount'],
    ['0', 'amount_usd must be greater than 0', 'invalid_amount'],
    ['-1', 'amount_usd must be a non-negative decimal number with at most 6 decimal places', 'invalid_amount'],
    ['0.0000001', 'amount_usd must be a non-negative decimal number with at most 6 decimal places', 'invalid_amount'],
    ['', 'amount_usd is required for type eip3009', 'amount_required'],
  ])('error: amount %j is InvalidArgument', async (amountUsd, message, code) => {
    const agentId = await agentWith();
    const e = await connectError(connect.sign({ agentId, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd }, opts()));
    expect(e.code).toBe(Code.InvalidArgument);
    expect(e.rawMessage).toBe(message);
    expect(e.metadata.get('x-error-code')).toBe(code);
  });

  test('error: a chain outside the key mode is InvalidArgument unsupported_chain', async () => {
    const agentId = await agentWith();
    const e = await connectError(connect.sign({ agentId, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '1', chainId: 10 }, opts()));
    expect(e.code).toBe(Code.InvalidArgument);
    expect(e.metadata.get('x-error-code')).toBe('unsupported_chain');
  });

  test('error: an unprovisioned treasury is Unavailable', async () => {
    const e = await connectError(connect.sign({ agentId: bare.agentId, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '0.5' }, opts(bare.apiKey)));
    expect(e.code).toBe(Code.Unavailable);
    expect(e.metadata.get('x-error-code')).toBe('treasury_not_provisioned');
  });

  test('error: no key is Unauthenticated and nothing is recorded', async () => {
    const agentId = await agentWith();
    const e = await connectError(connect.sign({ agentId, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '0.5' }, { headers: { connection: 'close' } }));
    expect(e.code).toBe(Code.Unauthenticated);
    const wrong = await connectError(connect.sign({ agentId, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '0.5' }, opts(`ak_test_${'cd'.repeat(24)}`)));
    expect(wrong.code).toBe(Code.Unauthenticated);
    expect(await ledger(agentId)).toEqual([]);
  });
});

describe('PaymentPolicyService.Sign over gRPC', () => {
  test('behavior: allowed eip3009 is outcome ALLOWED (1) and recovers to the treasury', async () => {
    const agentId = await agentWith();
    const m = await grpcSign({ agentId, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '0.5' });
    await expectAllowedEip3009(m, agentId, '0.5', '500000');
  });

  test('behavior: allowed permit2 recovers to the treasury', async () => {
    const agentId = await agentWith();
    const m = await grpcSign({ agentId, type: PaymentType.PERMIT2, recipientAddress: RECIPIENT, amountUsd: '1' });
    expect(m.outcome).toBe(SignOutcome.ALLOWED);
    expect(m.permit2).toMatchObject({ permitted: { amount: '1000000' }, deadline: String(nowSeconds() + 3600) });
    expect(await permit2Signer(m)).toBe(treasury);
  });

  test('behavior: a raw transaction with payload gas is signed with that gas', async () => {
    const agentId = await agentWith();
    const m = await grpcSign({ agentId, type: PaymentType.RAW_TRANSACTION, recipientAddress: RECIPIENT, amountUsd: '0.2', payload: { case: 'rawTransaction', value: { gas: 70_000n } } });
    expect(m.outcome).toBe(SignOutcome.ALLOWED);
    const serialized = m.rawTransaction!.serialized as `0x02${string}`;
    expect(parseTransaction(serialized).gas).toBe(70_000n);
    expect(await recoverTransactionAddress({ serializedTransaction: serialized })).toBe(treasury);
  });

  test('behavior: above the threshold is outcome PENDING_APPROVAL (2) with an approval request id', async () => {
    const agentId = await agentWith();
    const m = await grpcSign({ agentId, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '1.000001' });
    expect(m.outcome).toBe(2);
    expect(m.approvalRequestId).toMatch(UUID_RE);
    expect(m.reason).toBe('Amount $1.000001 exceeds the approval threshold of 1 USD; a human must approve it');
  });

  test('behavior: a paused agent is outcome DENIED (3) with the reason', async () => {
    const agentId = await agentWith();
    await admin.client.updateAgent({ agentId, status: AgentStatus.PAUSED }, admin.auth);
    const m = await grpcSign({ agentId, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '0.5' });
    expect(m.outcome).toBe(3);
    expect(m.reason).toBe('Agent is paused; it cannot make payments');
    expect(m.transactionId).toMatch(UUID_RE);
  });

  test('behavior: the cap denies over gRPC exactly as over REST', async () => {
    const agentId = await agentWith({ cap: '1', threshold: '1' });
    expect((await grpcSign({ agentId, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '0.6' })).outcome).toBe(SignOutcome.ALLOWED);
    const m = await grpcSign({ agentId, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '0.5' });
    expect(m.outcome).toBe(SignOutcome.DENIED);
    expect(m.reason).toBe('Spend cap of $1 per 24 hours would be exceeded: $0.6 already committed, this payment is $0.5 ($0.4 left)');
  });

  test('behavior: the idempotencyKey field replays the stored outcome', async () => {
    const agentId = await agentWith();
    const req = { agentId, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '0.3', idempotencyKey: 'grpc-field' };
    const first = await grpcSign(req);
    const again = await grpcSign(req);
    expect(again).toMatchObject({ idempotent: true, transactionId: first.transactionId, signature: first.signature });
    expect(first.idempotent).toBe(false);
    expect(await ledger(agentId)).toHaveLength(1);
  });

  test('behavior: idempotency-key metadata replays the stored outcome', async () => {
    const agentId = await agentWith();
    const req = { agentId, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '0.3' };
    const first = await grpcSign(req, grpcAuth(undefined, { 'idempotency-key': 'grpc-metadata' }));
    const again = await grpcSign(req, grpcAuth(undefined, { 'idempotency-key': 'grpc-metadata' }));
    expect(again).toMatchObject({ idempotent: true, transactionId: first.transactionId, signature: first.signature });
    expect(await ledger(agentId)).toHaveLength(1);
  });

  test('behavior: a denial replays over gRPC with the same transaction id', async () => {
    const agentId = await agentWith({ allowlist: [] });
    const req = { agentId, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '0.3', idempotencyKey: 'grpc-denied' };
    const first = await grpcSign(req);
    const again = await grpcSign(req);
    expect(first.outcome).toBe(SignOutcome.DENIED);
    expect(again).toMatchObject({ outcome: SignOutcome.DENIED, idempotent: true, transactionId: first.transactionId, reason: first.reason });
  });

  test('error: an unknown agent is NOT_FOUND (5)', async () => {
    const r = await grpcSignError({ agentId: 'agt_000000000000000000000000', type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '1' });
    expect(r.code).toBe(grpc.status.NOT_FOUND);
    expect(r.details).toBe('Agent not found');
    expect(r.errorCode).toBe('agent_not_found');
  });

  test('error: a bad amount is INVALID_ARGUMENT (3) naming amount_usd', async () => {
    const agentId = await agentWith();
    const r = await grpcSignError({ agentId, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '1.2345678' });
    expect(r.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(r.details).toMatch(/^amount_usd /);
    expect(r.errorCode).toBe('invalid_amount');
  });

  test('error: a missing agent id is INVALID_ARGUMENT agent_id_required', async () => {
    const r = await grpcSignError({ type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '1' });
    expect(r.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(r.errorCode).toBe('agent_id_required');
  });

  test('error: a payment type outside the enum is INVALID_ARGUMENT unsupported_type', async () => {
    const agentId = await agentWith();
    const r = await grpcSignError({ agentId, type: 42 as PaymentType, recipientAddress: RECIPIENT, amountUsd: '1' });
    expect(r.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(r.errorCode).toBe('unsupported_type');
  });

  test('error: a key reused for another request is ALREADY_EXISTS (6)', async () => {
    const agentId = await agentWith();
    await grpcSign({ agentId, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '0.3', idempotencyKey: 'grpc-reuse' });
    const r = await grpcSignError({ agentId, type: PaymentType.PERMIT2, recipientAddress: RECIPIENT, amountUsd: '0.3', idempotencyKey: 'grpc-reuse' });
    expect(r.code).toBe(grpc.status.ALREADY_EXISTS);
    expect(r.errorCode).toBe('idempotency_key_reused');
  });

  test('error: an unprovisioned treasury is UNAVAILABLE (14)', async () => {
    const r = await grpcSignError({ agentId: bare.agentId, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '0.5' }, grpcAuth(bare.apiKey));
    expect(r.code).toBe(grpc.status.UNAVAILABLE);
    expect(r.details).toBe('Organization treasury not provisioned');
  });

  test('error: no key and a wrong key are UNAUTHENTICATED (16)', async () => {
    const agentId = await agentWith();
    const none = await grpcSignError({ agentId, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '0.5' }, {});
    expect(none.code).toBe(grpc.status.UNAUTHENTICATED);
    expect(none.details).toBe('Missing Authorization header');
    const wrong = await grpcSignError({ agentId, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '0.5' }, grpcAuth(`ak_live_${'ef'.repeat(24)}`));
    expect(wrong.code).toBe(grpc.status.UNAUTHENTICATED);
    expect(await ledger(agentId)).toEqual([]);
  });
});

describe('PaymentPolicyService.Sign across transports', () => {
  /** Equivalent requests in REST JSON and in proto form. */
  const cases: Array<[string, (agentId: string) => Record<string, unknown>, (agentId: string) => SignInit]> = [
    [
      'allowed eip3009',
      (a) => ({ agent_id: a, type: 'eip3009', recipient_address: RECIPIENT, amount_usd: 0.4 }),
      (a) => ({ agentId: a, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '0.4' }),
    ],
    [
      'allowed permit2 on Base Sepolia',
      (a) => ({ agent_id: a, type: 'permit2', chain_id: 84532, recipient_address: RECIPIENT, amount_usd: 0.2, payload: { valid_for_seconds: 300 } }),
      (a) => ({ agentId: a, type: PaymentType.PERMIT2, chainId: 84532, recipientAddress: RECIPIENT, amountUsd: '0.2', payload: rpcPayload('permit2', { valid_for_seconds: 300 }) }),
    ],
    [
      'allowed raw transaction',
      (a) => ({ agent_id: a, recipient_address: RECIPIENT, amount_usd: 0.1 }),
      (a) => ({ agentId: a, recipientAddress: RECIPIENT, amountUsd: '0.1' }),
    ],
    [
      'pending approval',
      (a) => ({ agent_id: a, type: 'eip3009', recipient_address: RECIPIENT, amount_usd: 1.5 }),
      (a) => ({ agentId: a, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '1.5' }),
    ],
    [
      'denied by the allowlist',
      (a) => ({ agent_id: a, type: 'eip3009', recipient_address: STRANGER, amount_usd: 0.5 }),
      (a) => ({ agentId: a, type: PaymentType.EIP3009, recipientAddress: STRANGER, amountUsd: '0.5' }),
    ],
    [
      'denied by the cap',
      (a) => ({ agent_id: a, type: 'eip3009', recipient_address: RECIPIENT, amount_usd: 101 }),
      (a) => ({ agentId: a, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '101' }),
    ],
    [
      'dry run allowed',
      (a) => ({ agent_id: a, type: 'eip3009', recipient_address: RECIPIENT, amount_usd: 0.5, dry_run: true }),
      (a) => ({ agentId: a, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '0.5', dryRun: true }),
    ],
    [
      'dry run pending',
      (a) => ({ agent_id: a, type: 'permit2', recipient_address: RECIPIENT, amount_usd: 3, dry_run: true }),
      (a) => ({ agentId: a, type: PaymentType.PERMIT2, recipientAddress: RECIPIENT, amountUsd: '3', dryRun: true }),
    ],
    [
      'dry run denied',
      (a) => ({ agent_id: a, type: 'raw_transaction', recipient_address: STRANGER, amount_usd: 0.5, dry_run: true }),
      (a) => ({ agentId: a, type: PaymentType.RAW_TRANSACTION, recipientAddress: STRANGER, amountUsd: '0.5', dryRun: true }),
    ],
  ];

  test.each(cases)('behavior: %s gives the same answer on REST, Connect and gRPC', async (_name, restBody, protoReq) => {
    const agentId = await agentWith();
    const r = await restSign(restBody(agentId));
    const c = await connect.sign(protoReq(agentId), opts());
    const g = await grpcSign(protoReq(agentId));
    expect(asRest(c).status).toBe(r.status);
    expect(asRest(g).status).toBe(r.status);
    const restAnswer = deterministic({ status: r.status, body: r.json });
    expect(deterministic(asRest(c))).toEqual(restAnswer);
    expect(deterministic(asRest(g))).toEqual(restAnswer);
    if (r.status === 200 && !r.json.dry_run) {
      // The random parts are still well-formed on every transport.
      for (const m of [c, g]) expect(m.transactionId).toMatch(UUID_RE);
      if (r.json.authorization) {
        expect(await eip3009Signer(c)).toBe(treasury);
        expect(await eip3009Signer(g)).toBe(treasury);
      }
      if (r.json.permit2) {
        expect(await permit2Signer(c)).toBe(treasury);
        expect(await permit2Signer(g)).toBe(treasury);
      }
      if (r.json.raw_transaction) {
        for (const m of [c, g]) {
          const serialized = m.rawTransaction!.serialized as `0x02${string}`;
          expect(await recoverTransactionAddress({ serializedTransaction: serialized })).toBe(treasury);
          const tx = parseTransaction(serialized);
          expect(tx.gas).toBe(parseTransaction(r.json.raw_transaction.serialized as Hex).gas);
          expect(decodeFunctionData({ abi: erc20Abi, data: tx.data! }).args).toEqual([RECIPIENT, 100_000n]);
        }
      }
    }
  });

  test('behavior: a key used over REST replays over Connect and gRPC (one use case, one ledger)', async () => {
    const agentId = await agentWith();
    const r = await restSign({ agent_id: agentId, type: 'eip3009', recipient_address: RECIPIENT, amount_usd: 0.3 }, 'cross-transport');
    const c = await connect.sign({ agentId, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '0.3', idempotencyKey: 'cross-transport' }, opts());
    const g = await grpcSign({ agentId, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '0.3' }, grpcAuth(undefined, { 'idempotency-key': 'cross-transport' }));
    expect(r.status).toBe(200);
    for (const m of [c, g]) {
      expect(asRest(m)).toEqual({ status: 200, body: { ...r.json, idempotent: true } });
    }
    expect(await ledger(agentId)).toHaveLength(1);
  });

  const errorCases: Array<[string, Record<string, unknown>, SignInit, Code, number]> = [
    ['unknown agent', { agent_id: 'agt_111111111111111111111111', type: 'eip3009', recipient_address: RECIPIENT, amount_usd: 1 },
      { agentId: 'agt_111111111111111111111111', type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '1' }, Code.NotFound, 404],
    ['zero amount', { agent_id: '@agent', type: 'eip3009', recipient_address: RECIPIENT, amount_usd: 0 },
      { agentId: '@agent', type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '0' }, Code.InvalidArgument, 400],
    ['zero address', { agent_id: '@agent', type: 'permit2', recipient_address: '0x0000000000000000000000000000000000000000', amount_usd: 1 },
      { agentId: '@agent', type: PaymentType.PERMIT2, recipientAddress: '0x0000000000000000000000000000000000000000', amountUsd: '1' }, Code.InvalidArgument, 400],
    ['missing recipient', { agent_id: '@agent', type: 'eip3009', amount_usd: 1 },
      { agentId: '@agent', type: PaymentType.EIP3009, amountUsd: '1' }, Code.InvalidArgument, 400],
    ['unsupported chain', { agent_id: '@agent', type: 'eip3009', chain_id: 137, recipient_address: RECIPIENT, amount_usd: 1 },
      { agentId: '@agent', type: PaymentType.EIP3009, chainId: 137, recipientAddress: RECIPIENT, amountUsd: '1' }, Code.InvalidArgument, 400],
    ['validity window too short', { agent_id: '@agent', type: 'eip3009', recipient_address: RECIPIENT, amount_usd: 1, payload: { valid_for_seconds: 5 } },
      { agentId: '@agent', type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '1', payload: rpcPayload('eip3009', { valid_for_seconds: 5 }) }, Code.InvalidArgument, 400],
    ['gas too low', { agent_id: '@agent', type: 'raw_transaction', recipient_address: RECIPIENT, amount_usd: 1, payload: { gas: 100 } },
      { agentId: '@agent', type: PaymentType.RAW_TRANSACTION, recipientAddress: RECIPIENT, amountUsd: '1', payload: rpcPayload('raw_transaction', { gas: 100 }) }, Code.InvalidArgument, 400],
    ['x402 without resource_url', { agent_id: '@agent', type: 'x402' },
      { agentId: '@agent', type: PaymentType.X402 }, Code.InvalidArgument, 400],
  ];

  test.each(errorCases)('error: %s has the same message and code on REST, Connect and gRPC', async (_name, restBody, protoReq, code, status) => {
    const agentId = await agentWith();
    const fill = <T extends Record<string, unknown>>(o: T): T =>
      Object.fromEntries(Object.entries(o).map(([k, v]) => [k, v === '@agent' ? agentId : v])) as T;
    const r = await restSign(fill(restBody));
    expect(r.status).toBe(status);
    const c = await connectError(connect.sign(fill(protoReq as Record<string, unknown>) as SignInit, opts()));
    expect(c.code).toBe(code);
    expect(c.rawMessage).toBe(r.json.error);
    expect(c.metadata.get('x-error-code')).toBe(r.json.code);
    const g = await grpcSignError(fill(protoReq as Record<string, unknown>) as SignInit);
    expect(g.code).toBe(code as number);
    expect(g.details).toBe(r.json.error);
    expect(g.errorCode).toBe(r.json.code);
  });
});

describe('PaymentPolicyService.GetApprovalStatus', () => {
  async function pendingApproval(): Promise<{ approvalId: string; transactionId: string; created: number }> {
    const agentId = await agentWith();
    const created = clock;
    const m = await grpcSign({ agentId, type: PaymentType.EIP3009, recipientAddress: RECIPIENT, amountUsd: '4' });
    expect(m.outcome).toBe(SignOutcome.PENDING_APPROVAL);
    return { approvalId: m.approvalRequestId, transactionId: m.transactionId, created };
  }

  test('behavior: a pending approval is PENDING with expires_at and no decided_at, like REST', async () => {
    const p = await pendingApproval();
    const r = await rest(s.url, 'GET', `/api/approvals/${p.approvalId}/status`, { key: s.bootstrap.api_key });
    const c = await connect.getApprovalStatus({ id: p.approvalId }, opts());
    const g = await grpcCall(M.getApprovalStatus, { id: p.approvalId });
    if (!g.ok) throw new Error(`gRPC failed: ${g.code} ${g.details}`);
    for (const m of [c, g.message]) {
      expect(m.status).toBe(ApprovalStatus.PENDING);
      expect(m.transactionId).toBe(p.transactionId);
      expect(m.decidedAt).toBeUndefined();
      expect(timestampMs(m.expiresAt!)).toBe(p.created + 3600 * 1000);
      expect(new Date(timestampMs(m.expiresAt!)).toISOString()).toBe(r.json.expires_at);
    }
    expect(r.json).toEqual({ status: 'pending', decided_at: null, expires_at: new Date(p.created + 3600 * 1000).toISOString(), transaction_id: p.transactionId });
  });

  test('behavior: an approved request is APPROVED with decided_at, and the keyed replay is then signed', async () => {
    const agentId = await agentWith();
    const req = { agentId, type: PaymentType.PERMIT2, recipientAddress: RECIPIENT, amountUsd: '4', idempotencyKey: 'approve-grpc' };
    const pending = await grpcSign(req);
    clock += 5_000;
    await admin.client.decideApproval({ id: pending.approvalRequestId, decision: Decision.APPROVE, note: '', decidedBy: 'dana' }, admin.auth);
    const c = await connect.getApprovalStatus({ id: pending.approvalRequestId }, opts());
    expect(c.status).toBe(ApprovalStatus.APPROVED);
    expect(timestampMs(c.decidedAt!)).toBe(clock);
    const g = await grpcCall(M.getApprovalStatus, { id: pending.approvalRequestId });
    expect(g.ok && g.message.status).toBe(ApprovalStatus.APPROVED);
    const signed = await grpcSign(req);
    expect(signed).toMatchObject({ outcome: SignOutcome.ALLOWED, idempotent: true, transactionId: pending.transactionId });
    expect(await permit2Signer(signed)).toBe(treasury);
  });

  test('behavior: an approval past its window is EXPIRED without decided_at', async () => {
    const p = await pendingApproval();
    clock += 3600 * 1000 + 1;
    const c = await connect.getApprovalStatus({ id: p.approvalId }, opts());
    expect(c.status).toBe(ApprovalStatus.EXPIRED);
    expect(c.decidedAt).toBeUndefined();
  });

  test.each(['00000000-0000-4000-8000-000000000000', 'not-a-uuid', ''])('error: id %j is NotFound on Connect and NOT_FOUND on gRPC', async (id) => {
    const c = await connectError(connect.getApprovalStatus({ id }, opts()));
    expect(c.code).toBe(Code.NotFound);
    const g = await grpcCall(M.getApprovalStatus, { id });
    expect(g.ok ? 0 : g.code).toBe(grpc.status.NOT_FOUND);
  });

  test('error: another organization\'s approval is the same NotFound as an unknown id', async () => {
    const p = await pendingApproval();
    const unknown = await connectError(connect.getApprovalStatus({ id: '00000000-0000-4000-8000-000000000000' }, opts(bare.apiKey)));
    const foreign = await connectError(connect.getApprovalStatus({ id: p.approvalId }, opts(bare.apiKey)));
    expect(foreign.code).toBe(Code.NotFound);
    expect([foreign.code, foreign.rawMessage, foreign.metadata.get('x-error-code')]).toEqual([unknown.code, unknown.rawMessage, unknown.metadata.get('x-error-code')]);
    const g = await grpcCall(M.getApprovalStatus, { id: p.approvalId }, grpcAuth(bare.apiKey));
    expect(g.ok ? 0 : g.code).toBe(grpc.status.NOT_FOUND);
  });

  test('error: no key is Unauthenticated on Connect and UNAUTHENTICATED on gRPC', async () => {
    const p = await pendingApproval();
    const c = await connectError(connect.getApprovalStatus({ id: p.approvalId }, { headers: { connection: 'close' } }));
    expect(c.code).toBe(Code.Unauthenticated);
    const g = await grpcCall(M.getApprovalStatus, { id: p.approvalId }, {});
    expect(g.ok ? 0 : g.code).toBe(grpc.status.UNAUTHENTICATED);
  });
});
