import { PaypolicyError } from '@paypolicy/client';
import { expect } from 'vitest';

/** The PaypolicyError a promise rejects with; fails the test if it resolves or rejects otherwise. */
export async function rejection(p: Promise<unknown>): Promise<PaypolicyError> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(PaypolicyError);
  return err as PaypolicyError;
}
