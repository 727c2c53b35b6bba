import { describe, expect, test } from 'vitest';
import { loadRequest, storeRequest } from '../../src/app/payments/signatures.js';
import { parsePaymentRequest, type PaymentRequestInput } from '../../src/domain/paymentRequest.js';

/**
 * The ledger's `request` column of a direct payment (app/payments/signatures.ts storeRequest): what an
 * approved payment is signed from later, possibly by a newer build, so its text is pinned byte
 * for byte for every direct type, and reading it back restores the raw transaction's bigints.
 */

const base: PaymentRequestInput = {
  agentId: 'agt_0123456789abcdef', type: 'eip3009', chainId: 8453, recipientAddress: '0xAbCdEf0123456789abcdef0123456789ABCDEF01',
  amountUsd: '0.5', payload: undefined, dryRun: undefined, idempotencyKey: undefined,
};
const parse = (over: Partial<PaymentRequestInput>) => parsePaymentRequest({ ...base, ...over }, 'test');

describe('storeRequest', () => {
  test.each<[string, Partial<PaymentRequestInput>, string]>([
    ['eip3009', {}, '{"type":"eip3009","chainId":8453,"recipient":"0xabcdef0123456789abcdef0123456789abcdef01","amountMicros":"500000","payload":{"kind":"authorization","validForSeconds":3600}}'],
    ['permit2', { type: 'permit2', payload: { valid_for_seconds: 600 } },
      '{"type":"permit2","chainId":8453,"recipient":"0xabcdef0123456789abcdef0123456789abcdef01","amountMicros":"500000","payload":{"kind":"authorization","validForSeconds":600}}'],
    ['raw_transaction', { type: 'raw_transaction', payload: { gas: 50000, max_fee_per_gas: '30000000000', max_priority_fee_per_gas: 2 } },
      '{"type":"raw_transaction","chainId":8453,"recipient":"0xabcdef0123456789abcdef0123456789abcdef01","amountMicros":"500000","payload":{"kind":"raw_transaction","gas":"50000","maxFeePerGas":"30000000000","maxPriorityFeePerGas":"2"}}'],
  ])('behavior: the %s row holds the text earlier builds wrote', (_type, over, text) => {
    expect(storeRequest(parse(over))).toBe(text);
  });

  test('behavior: a raw transaction read back has its gas and fees as bigints again', () => {
    const req = parse({ type: 'raw_transaction', payload: { gas: 50000, max_fee_per_gas: '30000000000', max_priority_fee_per_gas: 2 } });
    expect(loadRequest(storeRequest(req)).payload).toEqual(req.payload);
  });
});
