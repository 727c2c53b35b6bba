import { describe, expect, test } from 'vitest';
import { DomainError } from '../../src/domain/errors.js';
import {
  canonicalRequest,
  parsePaymentRequest,
  type PaymentRequest,
  type PaymentRequestInput,
} from '../../src/domain/paymentRequest.js';
import type { ApiKeyMode } from '../../src/domain/types.js';

/**
 * parsePaymentRequest turns raw transport input into a typed request; every failure is an
 * invalid_argument DomainError (HTTP 400) whose message names the offending field.
 */

const AGENT = 'agt_0123456789abcdef';
const RECIPIENT = '0xAbCdEf0123456789abcdef0123456789ABCDEF01';

/** A valid eip3009 request as a transport would deliver it. */
function input(over: Partial<PaymentRequestInput> = {}): PaymentRequestInput {
  return {
    agentId: AGENT,
    type: 'eip3009',
    chainId: 8453,
    recipientAddress: RECIPIENT,
    amountUsd: '0.5',
    payload: undefined,
    dryRun: undefined,
    idempotencyKey: undefined,
    ...over,
  };
}

function parse(over: Partial<PaymentRequestInput> = {}, mode: ApiKeyMode = 'test'): PaymentRequest {
  return parsePaymentRequest(input(over), mode);
}

/** Runs a parse that must fail and checks kind, code and the message (which names the field). */
function expectInvalid(over: Partial<PaymentRequestInput>, code: string, message: RegExp | string, mode: ApiKeyMode = 'test'): DomainError {
  let caught: unknown;
  try {
    parse(over, mode);
  } catch (err) {
    caught = err;
  }
  expect(caught, 'the parse should have failed').toBeInstanceOf(DomainError);
  const e = caught as DomainError;
  expect(e.kind).toBe('invalid_argument');
  expect(e.code).toBe(code);
  if (typeof message === 'string') expect(e.shortMessage).toBe(message);
  else expect(e.shortMessage).toMatch(message);
  return e;
}

describe('parsePaymentRequest', () => {
  describe('valid requests', () => {
    test('behavior: a full eip3009 request is typed, normalized and bounded', () => {
      expect(parse()).toEqual({
        agentId: AGENT,
        type: 'eip3009',
        chainId: 8453,
        recipient: RECIPIENT.toLowerCase(),
        amountMicros: 500_000n,
        payload: { kind: 'authorization', validForSeconds: 3600 },
        maxAmountMicros: null,
        dryRun: false,
        idempotencyKey: undefined,
      });
    });

    test('behavior: type defaults to raw_transaction and chain to 8453, with default gas and fees', () => {
      expect(parse({ type: undefined, chainId: undefined })).toEqual({
        agentId: AGENT,
        type: 'raw_transaction',
        chainId: 8453,
        recipient: RECIPIENT.toLowerCase(),
        amountMicros: 500_000n,
        payload: { kind: 'raw_transaction', gas: 100_000n, maxFeePerGas: 1_000_000_000n, maxPriorityFeePerGas: 1_000_000n },
        maxAmountMicros: null,
        dryRun: false,
        idempotencyKey: undefined,
      });
    });

    test('error: null is no value: a null type or chain is refused, never taken for the default', () => {
      expectInvalid({ type: null }, 'unsupported_type', 'type must be one of eip3009, permit2, raw_transaction, x402, mpp');
      expectInvalid({ chainId: null }, 'invalid_argument', 'chain_id must be a positive integer');
    });

    test('behavior: permit2 uses the authorization payload', () => {
      expect(parse({ type: 'permit2', payload: { valid_for_seconds: 120 } }).payload).toEqual({ kind: 'authorization', validForSeconds: 120 });
    });

    test('behavior: the recipient is lowercased whatever its case', () => {
      expect(parse({ recipientAddress: RECIPIENT.toUpperCase().replace('0X', '0x') }).recipient).toBe(RECIPIENT.toLowerCase());
    });

    test('behavior: dry_run true and false are kept', () => {
      expect(parse({ dryRun: true }).dryRun).toBe(true);
      expect(parse({ dryRun: false }).dryRun).toBe(false);
    });

    test.each([
      ['0.000001', 1n],
      ['0.1', 100_000n],
      ['1.005', 1_005_000n],
      ['10', 10_000_000n],
      ['123.456789', 123_456_789n],
      ['1000000000', 1_000_000_000_000_000n],
      ['007.50', 7_500_000n],
    ])('behavior: amount %s is %s micro-dollars exactly', (text, micros) => {
      expect(parse({ amountUsd: text }).amountMicros).toBe(micros);
    });

    test('behavior: test keys may use Base mainnet and Base Sepolia', () => {
      expect(parse({ chainId: 8453 }, 'test').chainId).toBe(8453);
      expect(parse({ chainId: 84532 }, 'test').chainId).toBe(84532);
    });

    test('behavior: live keys may use Base mainnet', () => {
      expect(parse({ chainId: 8453 }, 'live').chainId).toBe(8453);
      expect(parse({ chainId: undefined }, 'live').chainId).toBe(8453);
    });

    test('behavior: valid_for_seconds accepts its bounds 30 and 86400', () => {
      expect(parse({ payload: { valid_for_seconds: 30 } }).payload).toEqual({ kind: 'authorization', validForSeconds: 30 });
      expect(parse({ payload: { valid_for_seconds: 86_400 } }).payload).toEqual({ kind: 'authorization', validForSeconds: 86_400 });
    });

    test('behavior: raw transaction gas accepts its bounds, as numbers or decimal strings', () => {
      const raw = (payload: Record<string, unknown>) => parse({ type: 'raw_transaction', payload }).payload;
      expect(raw({ gas: 21_000 })).toMatchObject({ gas: 21_000n });
      expect(raw({ gas: '1000000' })).toMatchObject({ gas: 1_000_000n });
      expect(raw({ max_fee_per_gas: '1000000000000', max_priority_fee_per_gas: 0 })).toMatchObject({
        maxFeePerGas: 1_000_000_000_000n,
        maxPriorityFeePerGas: 0n,
      });
    });

    test('behavior: the default priority fee never exceeds a low max fee', () => {
      expect(parse({ type: 'raw_transaction', payload: { max_fee_per_gas: 500 } }).payload).toEqual({
        kind: 'raw_transaction',
        gas: 100_000n,
        maxFeePerGas: 500n,
        maxPriorityFeePerGas: 500n,
      });
    });

    test('behavior: the use case reads only the payload fields it knows (REST refuses any other before calling it)', () => {
      expect(parse({ payload: { note: 'hi', nested: { a: 1 } } }).payload).toEqual({ kind: 'authorization', validForSeconds: 3600 });
    });

    test('behavior: an Idempotency-Key of 1 to 255 printable ASCII characters is kept', () => {
      expect(parse({ idempotencyKey: 'k' }).idempotencyKey).toBe('k');
      expect(parse({ idempotencyKey: '~'.repeat(255) }).idempotencyKey).toBe('~'.repeat(255));
      expect(parse({ idempotencyKey: 'order-42:retry!' }).idempotencyKey).toBe('order-42:retry!');
    });

    test.each(['', null, 42])('error: an Idempotency-Key %j is refused, never taken for none', (idempotencyKey) => {
      expectInvalid({ idempotencyKey }, 'invalid_idempotency_key', 'Idempotency-Key must be 1 to 255 printable ASCII characters without spaces');
    });
  });

  describe('x402 and mpp', () => {
    test.each(['x402', 'mpp'])('behavior: %s needs only payload.resource_url and ignores recipient and amount', (type) => {
      const r = parse({ type, recipientAddress: 'not-an-address', amountUsd: '-5', payload: { resource_url: 'https://api.example.com/x' } });
      expect(r).toEqual({
        agentId: AGENT,
        type,
        chainId: 8453,
        recipient: '',
        amountMicros: 0n,
        payload: { kind: 'paywall', resourceUrl: 'https://api.example.com/x', method: 'GET' },
        maxAmountMicros: null,
        dryRun: false,
        idempotencyKey: undefined,
      });
    });

    test.each(['x402', 'mpp'])('behavior: %s without recipient and amount is valid', (type) => {
      expect(parse({ type, recipientAddress: undefined, amountUsd: undefined, payload: { resource_url: 'https://a.example/' } }).type).toBe(type);
    });

    test.each(['x402', 'mpp'])('behavior: %s payload.max_amount_usd is read like amount_usd (string or JSON number)', (type) => {
      const at = (max: unknown) => parse({ type, payload: { resource_url: 'https://a.example/', max_amount_usd: max } }).maxAmountMicros;
      expect(at('0.10')).toBe(100_000n);
      expect(at(0.1)).toBe(100_000n);
      expect(at(undefined)).toBeNull();
      expect(at('')).toBeNull();
    });

    test('behavior: the ceiling is part of the idempotency text only when sent', () => {
      const base = { type: 'x402', payload: { resource_url: 'https://a.example/' } };
      const without = canonicalRequest(parse(base));
      expect(without).toBe(JSON.stringify(['x402', 8453, '', '0', { kind: 'paywall', resourceUrl: 'https://a.example/', method: 'GET' }]));
      expect(canonicalRequest(parse({ ...base, payload: { ...base.payload, max_amount_usd: '0.1' } }))).toBe(`${without.slice(0, -1)},"100000"]`);
    });

    test.each([['abc', 'payload.max_amount_usd must be a non-negative decimal number with at most 6 decimal places'], ['0.0000001', /max_amount_usd/],
      [-1, /max_amount_usd/], [true, 'payload.max_amount_usd must be a number'], [{}, 'payload.max_amount_usd must be a number'],
      ['0', 'payload.max_amount_usd must be greater than 0']])('error: payload.max_amount_usd %j is invalid_amount', (max, message) => {
      expectInvalid({ type: 'mpp', payload: { resource_url: 'https://a.example/', max_amount_usd: max } }, 'invalid_amount', message);
    });

    test.each(['x402', 'mpp'])('error: %s without payload.resource_url names the field', (type) => {
      expectInvalid({ type, payload: undefined }, 'resource_url_required', `payload.resource_url is required for type ${type}`);
      expectInvalid({ type, payload: {} }, 'resource_url_required', /payload\.resource_url/);
      expectInvalid({ type, payload: { resource_url: '' } }, 'resource_url_required', /payload\.resource_url/);
      expectInvalid({ type, payload: { resource_url: 42 } }, 'invalid_argument', 'payload.resource_url must be a string');
      expectInvalid({ type, payload: { resource_url: null } }, 'invalid_argument', 'payload.resource_url must be a string');
    });
  });

  describe('errors', () => {
    test.each([undefined, ''])('error: agent_id %j is required', (agentId) => {
      expectInvalid({ agentId }, 'agent_id_required', 'agent_id is required');
    });

    test.each([null, 42, true, {}, ['agt_x']])('error: agent_id %j must be a string', (agentId) => {
      expectInvalid({ agentId }, 'invalid_argument', 'agent_id must be a string');
    });

    test.each(['bitcoin', 'EIP3009', 'raw-transaction', 3, true, {}])('error: unknown type %j lists the supported types', (type) => {
      expectInvalid({ type }, 'unsupported_type', 'type must be one of eip3009, permit2, raw_transaction, x402, mpp');
    });

    test.each(['{}', 42, ['a'], true, null])('error: payload %j must be an object', (payload) => {
      expectInvalid({ payload }, 'invalid_argument', 'payload must be an object');
    });

    test.each(['true', 1, 0, {}, null])('error: dry_run %j must be a boolean', (dryRun) => {
      expectInvalid({ dryRun }, 'invalid_argument', 'dry_run must be a boolean');
    });

    test.each(['8453', 0, -1, 8453.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53, true])('error: chain_id %j must be a positive integer', (chainId) => {
      expectInvalid({ chainId }, 'invalid_argument', 'chain_id must be a positive integer');
    });

    test('error: a live key may not use Base Sepolia', () => {
      expectInvalid({ chainId: 84532 }, 'unsupported_chain', 'chain_id 84532 is not supported for eip3009 with ak_live_ keys (supported: 8453)', 'live');
    });

    test.each([1, 10, 137, 4217])('error: chain %d is unsupported for test keys', (chainId) => {
      expectInvalid({ chainId }, 'unsupported_chain', `chain_id ${chainId} is not supported for eip3009 with ak_test_ keys (supported: 8453, 84532)`, 'test');
    });

    test.each([1, 84532])('error: chain %d is unsupported for live keys', (chainId) => {
      expectInvalid({ chainId, type: 'raw_transaction' }, 'unsupported_chain', /^chain_id \d+ is not supported for raw_transaction with ak_live_ keys/, 'live');
    });

    test.each([undefined, ''])('error: recipient_address %j is required for direct types', (recipientAddress) => {
      expectInvalid({ recipientAddress }, 'recipient_required', 'recipient_address is required for type eip3009');
      expectInvalid({ recipientAddress, type: 'permit2' }, 'recipient_required', 'recipient_address is required for type permit2');
      expectInvalid({ recipientAddress, type: 'raw_transaction' }, 'recipient_required', 'recipient_address is required for type raw_transaction');
    });

    test.each([
      'abc',
      '0x123',
      RECIPIENT.slice(2),
      `${RECIPIENT}00`,
      '0xg000000000000000000000000000000000000000',
      ` ${RECIPIENT}`,
      42,
      {},
      null,
    ])('error: recipient_address %j must be a 20-byte 0x address', (recipientAddress) => {
      expectInvalid({ recipientAddress }, 'invalid_argument', 'recipient_address must be a 0x-prefixed 20-byte hex address');
    });

    test('error: the zero address is refused', () => {
      expectInvalid({ recipientAddress: '0x0000000000000000000000000000000000000000' }, 'invalid_argument', 'recipient_address must not be the zero address');
    });

    test.each([undefined, ''])('error: amount_usd %j is required for direct types', (amountUsd) => {
      expectInvalid({ amountUsd }, 'amount_required', 'amount_usd is required for type eip3009');
    });

    test.each(['0', '0.0', '0.000000', '000'])('error: amount_usd %j must be greater than 0', (amountUsd) => {
      expectInvalid({ amountUsd }, 'invalid_amount', 'amount_usd must be greater than 0');
    });

    test.each(['-1', '-0.5', '0.0000001', '1.1234567', '1e-7', '1e3', 'abc', '1.', '.5', '1,5', ' 1', '1 ', '+1', 'NaN', 'Infinity', '0x10'])(
      'error: amount_usd %j is not a decimal with at most 6 decimals',
      (amountUsd) => {
        expectInvalid({ amountUsd }, 'invalid_amount', 'amount_usd must be a non-negative decimal number with at most 6 decimal places');
      },
    );

    test.each(['1000000000.000001', '1000000001', '999999999999'])('error: amount_usd %j is above the bound', (amountUsd) => {
      expectInvalid({ amountUsd }, 'invalid_amount', 'amount_usd must be at most 1000000000');
    });

    test('error: an amount with more than 12 integer digits is refused', () => {
      expectInvalid({ amountUsd: '1000000000000' }, 'invalid_amount', /^amount_usd must be/);
    });

    test.each([1, 0.5, true, {}, ['1'], null])('error: amount_usd %j that is not decimal text is refused (transports convert JSON numbers first)', (amountUsd) => {
      expectInvalid({ amountUsd }, 'invalid_argument', 'amount_usd must be a number');
    });

    test.each([29, 86_401, 0, -30, 60.5, '60', true, null])('error: payload.valid_for_seconds %j is out of range', (v) => {
      expectInvalid({ payload: { valid_for_seconds: v } }, 'invalid_argument', 'payload.valid_for_seconds must be an integer from 30 to 86400');
      expectInvalid({ type: 'permit2', payload: { valid_for_seconds: v } }, 'invalid_argument', /^payload\.valid_for_seconds/);
    });

    test.each([20_999, 1_000_001, 0, '20999', '1000001', -1, 21_000.5, 'lots', '0x5208'])('error: raw transaction payload.gas %j is out of bounds', (gas) => {
      expectInvalid({ type: 'raw_transaction', payload: { gas } }, 'invalid_argument', 'payload.gas must be an integer (decimal string) from 21000 to 1000000');
    });

    test.each([0, '0', '1000000000001', -5])('error: raw transaction payload.max_fee_per_gas %j is out of bounds', (fee) => {
      expectInvalid({ type: 'raw_transaction', payload: { max_fee_per_gas: fee } }, 'invalid_argument', /^payload\.max_fee_per_gas must be an integer/);
    });

    test('error: a priority fee above the max fee is refused', () => {
      expectInvalid(
        { type: 'raw_transaction', payload: { max_fee_per_gas: 1000, max_priority_fee_per_gas: 1001 } },
        'invalid_argument',
        'payload.max_priority_fee_per_gas must be an integer (decimal string) from 0 to 1000',
      );
    });

    test.each([
      ['with a space', 'a b'],
      ['too long', 'k'.repeat(256)],
      ['non-ASCII', 'clé'],
      ['a control character', 'a\tb'],
      ['not a string', 42],
    ])('error: an Idempotency-Key %s is refused', (_what, idempotencyKey) => {
      expectInvalid({ idempotencyKey }, 'invalid_idempotency_key', 'Idempotency-Key must be 1 to 255 printable ASCII characters without spaces');
    });

    test('error: checks run in a fixed order: agent_id before type before payload before chain before recipient before amount', () => {
      const bad: Partial<PaymentRequestInput> = {
        agentId: undefined, type: 'nope', payload: 'x', chainId: 1, recipientAddress: 'x', amountUsd: '-1',
      };
      expectInvalid(bad, 'agent_id_required', /agent_id/);
      expectInvalid({ ...bad, agentId: AGENT }, 'unsupported_type', /^type/);
      expectInvalid({ ...bad, agentId: AGENT, type: 'eip3009' }, 'invalid_argument', /^payload/);
      expectInvalid({ ...bad, agentId: AGENT, type: 'eip3009', payload: {} }, 'unsupported_chain', /^chain_id/);
      expectInvalid({ ...bad, agentId: AGENT, type: 'eip3009', payload: {}, chainId: 8453 }, 'invalid_argument', /^recipient_address/);
      expectInvalid({ ...bad, agentId: AGENT, type: 'eip3009', payload: {}, chainId: 8453, recipientAddress: RECIPIENT }, 'invalid_amount', /^amount_usd/);
    });
  });
});

describe('canonicalRequest', () => {
  const canon = (over: Partial<PaymentRequestInput> = {}) => canonicalRequest(parse(over));

  test('behavior: equal requests give equal text', () => {
    expect(canon()).toBe(canon());
  });

  test('behavior: the same request written differently gives the same text', () => {
    expect(canon({ recipientAddress: RECIPIENT.toLowerCase(), amountUsd: '0.500000' })).toBe(canon({ recipientAddress: RECIPIENT, amountUsd: '0.5' }));
    expect(canon({ type: undefined, chainId: undefined })).toBe(canon({ type: 'raw_transaction', chainId: 8453 }));
    expect(canon({ payload: undefined })).toBe(canon({ payload: { valid_for_seconds: 3600 } }));
    expect(canon({ type: 'raw_transaction', payload: { gas: 21_000 } })).toBe(canon({ type: 'raw_transaction', payload: { gas: '21000' } }));
  });

  test('behavior: dry_run, the Idempotency-Key and the agent are not part of it', () => {
    const base = canon();
    expect(canon({ dryRun: true })).toBe(base);
    expect(canon({ idempotencyKey: 'k1' })).toBe(base);
    expect(canon({ agentId: 'agt_ffffffffffffffff' })).toBe(base);
  });

  test.each<[string, Partial<PaymentRequestInput>]>([
    ['type', { type: 'permit2' }],
    ['chain', { chainId: 84532 }],
    ['recipient', { recipientAddress: '0x1111111111111111111111111111111111111111' }],
    ['amount', { amountUsd: '0.500001' }],
    ['validity window', { payload: { valid_for_seconds: 3601 } }],
  ])('behavior: a different %s gives a different text', (_field, over) => {
    expect(canon(over)).not.toBe(canon());
  });

  test.each<[string, Record<string, unknown>]>([
    ['gas', { gas: 100_001 }],
    ['max fee', { max_fee_per_gas: '999999999' }],
    ['priority fee', { max_priority_fee_per_gas: 1 }],
  ])('behavior: a different raw transaction %s gives a different text', (_field, payload) => {
    expect(canon({ type: 'raw_transaction', payload })).not.toBe(canon({ type: 'raw_transaction' }));
  });

  test('behavior: different resource URLs of a paywalled type give different texts', () => {
    const a = canon({ type: 'x402', payload: { resource_url: 'https://a.example/x' } });
    const b = canon({ type: 'x402', payload: { resource_url: 'https://a.example/y' } });
    expect(a).not.toBe(b);
    expect(a).not.toBe(canon({ type: 'mpp', payload: { resource_url: 'https://a.example/x' } }));
  });

  // Stored rows keep the hash of this text: an idempotent repeat of a payment recorded by an
  // earlier build must hash the same, so the text of every kind is pinned here byte for byte.
  test.each<[string, Partial<PaymentRequestInput>, string]>([
    ['eip3009', { type: 'eip3009' }, '["eip3009",8453,"0xabcdef0123456789abcdef0123456789abcdef01","500000",{"kind":"authorization","validForSeconds":3600}]'],
    ['permit2', { type: 'permit2', payload: { valid_for_seconds: 600 } }, '["permit2",8453,"0xabcdef0123456789abcdef0123456789abcdef01","500000",{"kind":"authorization","validForSeconds":600}]'],
    ['raw_transaction', { type: 'raw_transaction', payload: { gas: 50000, max_fee_per_gas: '30000000000', max_priority_fee_per_gas: 2 } },
      '["raw_transaction",8453,"0xabcdef0123456789abcdef0123456789abcdef01","500000",{"kind":"raw_transaction","gas":"50000","maxFeePerGas":"30000000000","maxPriorityFeePerGas":"2"}]'],
    ['x402 with a ceiling', { type: 'x402', payload: { resource_url: 'https://a.example/x', method: 'POST', max_amount_usd: '0.25' } },
      '["x402",8453,"","0",{"kind":"paywall","resourceUrl":"https://a.example/x","method":"POST"},"250000"]'],
    ['mpp', { type: 'mpp', payload: { resource_url: 'https://a.example/y' } }, '["mpp",8453,"","0",{"kind":"paywall","resourceUrl":"https://a.example/y","method":"GET"}]'],
  ])('behavior: the text of %s is the one earlier builds stored', (_kind, over, text) => {
    expect(canonicalRequest(parse({ recipientAddress: RECIPIENT, ...over }))).toBe(text);
  });

  test('behavior: the text is valid JSON (no bigint leaks out)', () => {
    expect(() => JSON.parse(canon({ type: 'raw_transaction', payload: { gas: 50_000 } }))).not.toThrow();
  });
});
